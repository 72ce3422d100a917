//! eqdv's own reader: the live rows of a table branch with every kind of delete applied
//! (deletion vectors, v2 position deletes, equality deletes), plus the canonical row
//! form that every reader in the test suite (this one, iceberg-rust's scan, PyIceberg)
//! is compared in.
//!
//! It exists as the test oracle for the converter: a table must read the same before
//! and after its equality deletes become DVs. So it is written to be obviously right,
//! one data file at a time with the spec's rules spelled out, never to be fast. It
//! must never write anything, and never skip a delete file it does not understand:
//! an unknown file format or a DV without offsets is an error, not an empty result.
//!
//! The canonical row form it prints is in `canonical`.

mod canonical;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use arrow_array::{ArrayRef, BooleanArray, RecordBatch, RecordBatchOptions};
use arrow_schema::{Field, Schema as ArrowSchema, SchemaRef as ArrowSchemaRef};
use futures::TryStreamExt;
use iceberg::spec::{DataFileFormat, NestedFieldRef, PrimitiveType, Struct, TableMetadata, Type};
use roaring::RoaringTreemap;

use eqdv::parquet_io::target_schema;
use eqdv::table::{LiveFile, LoadedTable, TableFiles};
use eqdv::{Error, Result};

use canonical::row_keys;
pub use canonical::{
    ARROW_EXTENSION_NAME_KEY, ARROW_UUID_EXTENSION, canonical_rows, canonical_rows_for_schema,
    decimal_string, hex,
};

const BATCH_SIZE: usize = 8192;

/// Reads the live rows of `branch` in the table's current schema: every data file with
/// its DV, v2 position deletes and equality deletes applied. An empty table gives no
/// batches. UUID columns carry the `arrow.uuid` extension name.
pub async fn read_live_rows(table: &LoadedTable, branch: &str) -> Result<Vec<RecordBatch>> {
    let Some(snapshot) = table.head(branch)? else {
        return Ok(Vec::new());
    };
    let files = TableFiles::read(table, Some(&snapshot)).await?;
    let metadata = table.metadata.as_ref();
    let schema = metadata.current_schema();
    let current_fields: Vec<NestedFieldRef> = schema.as_struct().fields().to_vec();
    let output_schema = output_schema(&current_fields)?;
    let name_mapping = table.name_mapping()?;
    table.refuse_unparsed_defaults(&current_fields).await?;

    let equality_deletes = load_equality_deletes(table, &files.equality_deletes).await?;
    let position_deletes = eqdv::position_deletes::read(
        (&table.file_io, &table.name.to_string()),
        &files.position_deletes,
    )
    .await?;

    let mut data_files: Vec<&LiveFile> = files.data_files.iter().collect();
    data_files.sort_by(|a, b| a.path().cmp(b.path()));
    let mut out = Vec::new();
    for data_file in data_files {
        let deleted = deleted_positions(table, data_file, &files, &position_deletes).await?;

        // Equality deletes that apply to this file, grouped by their equality field ids.
        let mut groups: BTreeMap<&[i32], Vec<&HashSet<String>>> = BTreeMap::new();
        for e in &equality_deletes {
            if data_file.data_sequence_number < e.sequence_number
                && e.scope
                    .applies_to(data_file.spec_id, data_file.file.partition())
            {
                groups.entry(&e.field_ids).or_default().push(&e.keys);
            }
        }

        // Read the current schema plus any equality column the current schema dropped.
        let mut read_fields = current_fields.clone();
        for ids in groups.keys() {
            for id in ids.iter() {
                if !read_fields.iter().any(|f| f.id == *id) {
                    read_fields.push(field_by_id(metadata, *id, &table.name.to_string())?);
                }
            }
        }
        // Every id is in `read_fields` by construction, so `filter_map` drops nothing.
        let group_columns: Vec<(Vec<usize>, &Vec<&HashSet<String>>)> = groups
            .iter()
            .map(|(ids, sets)| {
                let cols = ids
                    .iter()
                    .filter_map(|id| read_fields.iter().position(|f| f.id == *id))
                    .collect();
                (cols, sets)
            })
            .collect();

        let mut stream = eqdv::file_rows::read_rows(
            &table.file_io,
            data_file.path(),
            data_file.file.file_size_in_bytes(),
            data_file.file.file_format(),
            name_mapping.as_deref(),
            (&read_fields, target_schema(&read_fields)?),
            BATCH_SIZE,
        )
        .await?
        .rows;
        while let Some((first, batch)) = stream.try_next().await? {
            let rows = batch.num_rows();
            let mut keep: Vec<bool> = (0..rows)
                .map(|i| !deleted.contains(first + i as u64))
                .collect();
            for (cols, sets) in &group_columns {
                let columns: Vec<ArrayRef> =
                    cols.iter().map(|&c| batch.column(c).clone()).collect();
                for (i, key) in row_keys(&columns, rows)?.iter().enumerate() {
                    if keep[i] && sets.iter().any(|s| s.contains(key)) {
                        keep[i] = false;
                    }
                }
            }
            let filtered =
                arrow_select::filter::filter_record_batch(&batch, &BooleanArray::from(keep))?;
            if filtered.num_rows() == 0 {
                continue;
            }
            let columns = filtered.columns()[..current_fields.len()].to_vec();
            out.push(RecordBatch::try_new_with_options(
                output_schema.clone(),
                columns,
                &RecordBatchOptions::new().with_row_count(Some(filtered.num_rows())),
            )?);
        }
    }
    Ok(out)
}

/// [`read_live_rows`] in canonical form, sorted.
pub async fn read_canonical(table: &LoadedTable, branch: &str) -> Result<Vec<String>> {
    canonical_rows(&read_live_rows(table, branch).await?)
}

/// The schema of the batches [`read_live_rows`] returns: nullable, field ids kept, UUIDs
/// marked.
fn output_schema(fields: &[NestedFieldRef]) -> Result<ArrowSchemaRef> {
    let target = target_schema(fields)?;
    let out: Vec<Field> = target
        .fields()
        .iter()
        .zip(fields)
        .map(|(arrow, iceberg)| {
            let mut f = arrow.as_ref().clone().with_nullable(true);
            if matches!(*iceberg.field_type, Type::Primitive(PrimitiveType::Uuid)) {
                let mut md = f.metadata().clone();
                md.insert(ARROW_EXTENSION_NAME_KEY.into(), ARROW_UUID_EXTENSION.into());
                f = f.with_metadata(md);
            }
            f
        })
        .collect();
    Ok(Arc::new(ArrowSchema::new(out)))
}

/// A field by id in the current schema, else in the newest older schema that has it
/// (an equality delete may name a column that was dropped since).
fn field_by_id(metadata: &TableMetadata, id: i32, table: &str) -> Result<NestedFieldRef> {
    if let Some(f) = metadata.current_schema().field_by_id(id) {
        return Ok(f.clone());
    }
    let mut schemas: Vec<_> = metadata.schemas_iter().collect();
    schemas.sort_by_key(|s| std::cmp::Reverse(s.schema_id()));
    schemas
        .iter()
        .find_map(|s| s.field_by_id(id).cloned())
        .ok_or_else(|| Error::UnsupportedTable {
            table: table.to_string(),
            message: format!("equality field id {id} is in no schema of the table"),
        })
}

/// Where an equality delete applies.
#[derive(Debug)]
enum Scope {
    /// Written with an unpartitioned spec: every partition of every spec.
    Global,
    /// Files of the same spec and partition tuple only.
    Partition { spec_id: i32, partition: Struct },
}

impl Scope {
    fn applies_to(&self, spec_id: i32, partition: &Struct) -> bool {
        match self {
            Scope::Global => true,
            Scope::Partition {
                spec_id: s,
                partition: p,
            } => *s == spec_id && eqdv::partition::same_partition(p, partition),
        }
    }
}

/// The keys of one equality delete file.
#[derive(Debug)]
struct EqualityDeletes {
    field_ids: Vec<i32>,
    sequence_number: i64,
    scope: Scope,
    keys: HashSet<String>,
}

async fn load_equality_deletes(
    table: &LoadedTable,
    files: &[LiveFile],
) -> Result<Vec<EqualityDeletes>> {
    let metadata = table.metadata.as_ref();
    let name_mapping = table.name_mapping()?;
    let mut out = Vec::with_capacity(files.len());
    for f in files {
        let field_ids = match f.file.equality_ids() {
            Some(ids) if !ids.is_empty() => ids,
            _ => {
                return Err(Error::file(
                    f.path(),
                    "equality delete file has no equality_ids",
                    "invalid manifest entry",
                ));
            }
        };
        if !matches!(
            f.file.file_format(),
            DataFileFormat::Parquet | DataFileFormat::Orc
        ) {
            return Err(Error::UnsupportedTable {
                table: table.name.to_string(),
                message: format!(
                    "equality delete file {} is {:?}; the reference reader reads Parquet and \
                     ORC",
                    f.path(),
                    f.file.file_format()
                ),
            });
        }
        let spec =
            metadata
                .partition_spec_by_id(f.spec_id)
                .ok_or_else(|| Error::UnsupportedTable {
                    table: table.name.to_string(),
                    message: format!(
                        "delete file {} has unknown partition spec {}",
                        f.path(),
                        f.spec_id
                    ),
                })?;
        let scope = if spec.is_unpartitioned() {
            Scope::Global
        } else {
            Scope::Partition {
                spec_id: f.spec_id,
                partition: f.file.partition().clone(),
            }
        };
        let fields = field_ids
            .iter()
            .map(|id| field_by_id(metadata, *id, &table.name.to_string()))
            .collect::<Result<Vec<_>>>()?;
        let mut stream = eqdv::file_rows::read_rows(
            &table.file_io,
            f.path(),
            f.file.file_size_in_bytes(),
            f.file.file_format(),
            name_mapping.as_deref(),
            (&fields, target_schema(&fields)?),
            BATCH_SIZE,
        )
        .await?
        .rows;
        let mut keys = HashSet::new();
        while let Some((_, batch)) = stream.try_next().await? {
            keys.extend(row_keys(batch.columns(), batch.num_rows())?);
        }
        out.push(EqualityDeletes {
            field_ids,
            sequence_number: f.data_sequence_number,
            scope,
            keys,
        });
    }
    Ok(out)
}

/// Positions of `data_file` deleted by its DV and by v2 position deletes: those with a
/// sequence number at least the file's.
async fn deleted_positions(
    table: &LoadedTable,
    data_file: &LiveFile,
    files: &TableFiles,
    position_deletes: &HashMap<String, Vec<(i64, RoaringTreemap)>>,
) -> Result<RoaringTreemap> {
    let mut deleted = RoaringTreemap::new();
    if let Some(dv) = files.dvs.get(data_file.path())
        && data_file.data_sequence_number <= dv.data_sequence_number
    {
        let (Some(offset), Some(size)) =
            (dv.file.content_offset(), dv.file.content_size_in_bytes())
        else {
            return Err(Error::file(
                dv.path(),
                format!(
                    "deletion vector for {} has no content_offset/content_size_in_bytes",
                    data_file.path()
                ),
                "invalid manifest entry",
            ));
        };
        deleted |= eqdv::puffin::read_dv(&table.file_io, dv.path(), offset, size).await?;
    }
    if let Some(list) = position_deletes.get(data_file.path()) {
        for (seq, positions) in list {
            if data_file.data_sequence_number <= *seq {
                deleted |= positions;
            }
        }
    }
    Ok(deleted)
}
