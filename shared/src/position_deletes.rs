//! v2 position delete files (Parquet `file_path`, `pos`), which tables upgraded to v3
//! may still hold. eqdv merges them into new DVs and its reader applies them. Read-only.

use std::collections::HashMap;

use arrow_array::Array;
use futures::TryStreamExt;
use iceberg::io::FileIO;
use iceberg::spec::{DataFileFormat, NestedField, PrimitiveType, Type};
use roaring::RoaringTreemap;

use crate::table::LiveFile;
use crate::{Error, Result};

/// Field id of `file_path` in v2 position delete files (reserved by the spec).
pub const FILE_PATH_FIELD_ID: i32 = 2_147_483_546;
/// Field id of `pos` in v2 position delete files (reserved by the spec).
pub const POS_FIELD_ID: i32 = 2_147_483_545;

/// Positions of each data file, from one position delete file.
pub type FilePositions = HashMap<String, RoaringTreemap>;

/// The position delete files of `deletes` that may reference one of `targets`' data
/// files: all but those whose manifest entry proves otherwise, by its
/// `referenced_data_file` or by its `file_path` bounds (inclusive; a truncated upper
/// bound is an incremented prefix, so it still bounds from above).
pub fn may_reference_any<V>(
    deletes: &[LiveFile],
    targets: &std::collections::BTreeMap<String, V>,
) -> Vec<LiveFile> {
    deletes
        .iter()
        .filter(|delete| {
            if let Some(referenced) = delete.file.referenced_data_file() {
                return targets.contains_key(&referenced);
            }
            let bound = |bounds: &HashMap<i32, iceberg::spec::Datum>| match bounds
                .get(&FILE_PATH_FIELD_ID)
                .map(|d| d.literal().clone())
            {
                Some(iceberg::spec::PrimitiveLiteral::String(s)) => Some(s),
                _ => None,
            };
            match (
                bound(delete.file.lower_bounds()),
                bound(delete.file.upper_bounds()),
            ) {
                // (A range whose bounds are reversed proves nothing: keep the file.)
                (Some(lower), Some(upper)) if lower <= upper => targets
                    .range::<str, _>((
                        std::ops::Bound::Included(lower.as_str()),
                        std::ops::Bound::Included(upper.as_str()),
                    ))
                    .next()
                    .is_some(),
                _ => true,
            }
        })
        .cloned()
        .collect()
}

/// Reads v2 position delete files of table `table` through `file_io`: data file ->
/// [(delete sequence number, positions)].
pub async fn read(
    (file_io, table): (&FileIO, &str),
    deletes: &[LiveFile],
) -> Result<HashMap<String, Vec<(i64, RoaringTreemap)>>> {
    Ok(by_data_file(
        deletes,
        &read_each((file_io, table), deletes).await?,
    ))
}

/// Regroups [`read_each`]'s result by data file, with each delete's sequence number.
pub fn by_data_file(
    deletes: &[LiveFile],
    each: &[FilePositions],
) -> HashMap<String, Vec<(i64, RoaringTreemap)>> {
    let mut out: HashMap<String, Vec<(i64, RoaringTreemap)>> = HashMap::new();
    for (delete, per_file) in deletes.iter().zip(each) {
        for (path, positions) in per_file {
            out.entry(path.clone())
                .or_default()
                .push((delete.data_sequence_number, positions.clone()));
        }
    }
    out
}

/// Reads each v2 position delete file of table `table` once, through `file_io`: per file
/// (in `deletes`' order), the positions it deletes per data file.
pub async fn read_each(
    (file_io, table): (&FileIO, &str),
    deletes: &[LiveFile],
) -> Result<Vec<FilePositions>> {
    let fields = vec![
        std::sync::Arc::new(NestedField::required(
            FILE_PATH_FIELD_ID,
            "file_path",
            Type::Primitive(PrimitiveType::String),
        )),
        std::sync::Arc::new(NestedField::required(
            POS_FIELD_ID,
            "pos",
            Type::Primitive(PrimitiveType::Long),
        )),
    ];
    let mut out = Vec::with_capacity(deletes.len());
    for delete in deletes {
        let mut per_file: HashMap<String, RoaringTreemap> = HashMap::new();
        match delete.file.file_format() {
            DataFileFormat::Parquet | DataFileFormat::Orc => {
                // Streamed: a v2 position delete file may be large.
                let opened = crate::file_rows::read_rows(
                    file_io,
                    delete.path(),
                    delete.file.file_size_in_bytes(),
                    delete.file.file_format(),
                    None,
                    (&fields, crate::columns::target_schema(&fields)?),
                    8192,
                )
                .await?;
                let mut rows = opened.rows;
                while let Some((_, batch)) = rows.try_next().await? {
                    absorb(delete, &batch, &mut per_file)?;
                }
            }
            DataFileFormat::Avro => {
                let schema = crate::parquet_io::target_schema(&fields)?;
                let batches = crate::avro_columns::read_avro_columns(
                    file_io,
                    delete.path(),
                    (&fields, &schema),
                    None,
                    8192,
                )
                .await?;
                for batch in &batches {
                    absorb(delete, batch, &mut per_file)?;
                }
            }
            other => {
                return Err(Error::UnsupportedTable {
                    table: table.to_string(),
                    message: format!(
                        "position delete file {} is {other:?}; eqdv reads Parquet, Avro and \
                         ORC position deletes",
                        delete.path(),
                    ),
                });
            }
        }
        out.push(per_file);
    }
    Ok(out)
}

/// Adds the positions of one batch of `delete` (its `file_path` and `pos` columns) to
/// `per_file`.
fn absorb(
    delete: &LiveFile,
    batch: &arrow_array::RecordBatch,
    per_file: &mut HashMap<String, RoaringTreemap>,
) -> Result<()> {
    let paths = arrow_array::cast::as_string_array(batch.column(0));
    let positions = batch
        .column(1)
        .as_any()
        .downcast_ref::<arrow_array::Int64Array>()
        .ok_or_else(|| Error::file(delete.path(), "pos column is not long", "bad type"))?;
    for i in 0..batch.num_rows() {
        if paths.is_null(i) || positions.is_null(i) || positions.value(i) < 0 {
            return Err(Error::file(
                delete.path(),
                format!("row {i} has a null path or an invalid position"),
                "corrupt position delete file",
            ));
        }
        per_file
            .entry(paths.value(i).to_string())
            .or_default()
            .insert(positions.value(i) as u64);
    }
    Ok(())
}
