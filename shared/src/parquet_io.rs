//! Reading Parquet files by Iceberg field id.
//!
//! Columns are found by the `PARQUET:field_id` of the file's schema, never by name, so
//! renamed columns resolve correctly. A field the file lacks (written before the column
//! was added) reads as nulls; a column whose stored type differs from the table's
//! current type (int promoted to long, ...) is cast to the current type. Positions are
//! the row's ordinal in the file: row-group first row + offset.

use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch, new_null_array};
use arrow_schema::{DataType, Field, Schema as ArrowSchema, SchemaRef as ArrowSchemaRef};
use futures::{Stream, StreamExt};
use iceberg::io::FileIO;
use iceberg::spec::NestedFieldRef;
use parquet::arrow::async_reader::ParquetRecordBatchStreamBuilder;
use parquet::arrow::{PARQUET_FIELD_ID_META_KEY, ProjectionMask};
use parquet::file::metadata::ParquetMetaData;

use crate::parquet_reader::FileReader;
use crate::{Error, Result};

/// The Arrow schema eqdv reads `fields` into (field ids kept in the metadata).
pub fn target_schema(fields: &[NestedFieldRef]) -> Result<ArrowSchemaRef> {
    let struct_type = iceberg::spec::StructType::new(fields.to_vec());
    let schema = iceberg::spec::Schema::builder()
        .with_fields(struct_type.fields().to_vec())
        .build()?;
    Ok(Arc::new(iceberg::arrow::schema_to_arrow_schema(&schema)?))
}

/// An open Parquet file with its footer read.
pub struct ParquetFile {
    path: String,
    builder: ParquetRecordBatchStreamBuilder<FileReader>,
}

impl ParquetFile {
    /// Opens `path` and reads its footer (without page indexes: see
    /// [`crate::parquet_reader`]). `file_size` comes from the manifest, which saves a
    /// HEAD request.
    pub async fn open(file_io: &FileIO, path: &str, file_size: Option<u64>) -> Result<Self> {
        let input = file_io.new_input(path)?;
        let size = match file_size {
            Some(size) => size,
            None => {
                input
                    .metadata()
                    .await
                    .map_err(|e| Error::file(path, "cannot stat data file (missing?)", e))?
                    .size
            }
        };
        let reader = input
            .reader()
            .await
            .map_err(|e| Error::file(path, "cannot open data file (missing?)", e))?;
        Self::open_reader(path, FileReader::new(path, size, reader)).await
    }

    /// Opens `path` through `reader` (a [`FileReader`] of it) and reads its footer.
    pub async fn open_reader(path: &str, reader: FileReader) -> Result<Self> {
        let builder = ParquetRecordBatchStreamBuilder::new(reader)
            .await
            .map_err(|e| Error::file(path, "not a readable Parquet file", e))?;
        Ok(Self {
            path: path.to_string(),
            builder,
        })
    }

    pub fn metadata(&self) -> &Arc<ParquetMetaData> {
        self.builder.metadata()
    }

    /// The bloom filter of column `leaf` in `row_group`, if the writer wrote one.
    pub async fn bloom_filter(
        &mut self,
        row_group: usize,
        leaf: usize,
    ) -> Result<Option<parquet::bloom_filter::Sbbf>> {
        self.builder
            .get_row_group_column_bloom_filter(row_group, leaf)
            .await
            .map_err(|e| Error::file(&self.path, "cannot read a bloom filter", e))
    }

    /// The file's Arrow schema (as the Parquet reader sees it).
    pub fn arrow_schema(&self) -> &ArrowSchemaRef {
        self.builder.schema()
    }

    /// The file's top-level Arrow field carrying Iceberg field id `field_id`.
    pub fn field_by_id(&self, field_id: i32) -> Option<&Field> {
        self.builder
            .schema()
            .fields()
            .iter()
            .find(|f| field_id_of(f) == Some(field_id))
            .map(|f| f.as_ref())
    }

    /// Compressed bytes of the given leaf columns over the given row groups: what a
    /// projected read fetches.
    pub fn projected_bytes(&self, leaves: &[usize], row_groups: &[usize]) -> u64 {
        let meta = self.metadata();
        row_groups
            .iter()
            .map(|&rg| {
                leaves
                    .iter()
                    .map(|&c| meta.row_group(rg).column(c).compressed_size().max(0) as u64)
                    .sum::<u64>()
            })
            .sum()
    }

    /// Rows per row group, in file order.
    pub fn row_group_rows(&self) -> Vec<u64> {
        self.metadata()
            .row_groups()
            .iter()
            .map(|rg| rg.num_rows().max(0) as u64)
            .collect()
    }

    /// The Parquet leaf column index holding field `field_id`, if the file has it.
    pub fn leaf_index(&self, field_id: i32) -> Option<usize> {
        let schema = self.builder.schema();
        let top = schema
            .fields()
            .iter()
            .position(|f| field_id_of(f) == Some(field_id))?;
        // Only top-level primitive columns are keys; their leaf index equals their
        // position among leaves, which we find through the Parquet schema descriptor.
        let descr = self.metadata().file_metadata().schema_descr();
        let name = schema.field(top).name();
        (0..descr.num_columns()).find(|&i| {
            let col = descr.column(i);
            col.path().parts().len() == 1 && col.path().parts()[0] == *name
        })
    }

    /// Streams `(first position, batch)` for the chosen row groups (all when `None`),
    /// with batches in `target` schema: missing fields as nulls, types cast.
    pub fn read(
        self,
        target: ArrowSchemaRef,
        row_groups: Option<Vec<usize>>,
        batch_size: usize,
    ) -> Result<impl Stream<Item = Result<(u64, RecordBatch)>> + Send> {
        let path = self.path.clone();
        let rg_rows = self.row_group_rows();
        let selected: Vec<usize> = row_groups.unwrap_or_else(|| (0..rg_rows.len()).collect());
        let rg_start: Vec<u64> = rg_rows
            .iter()
            .scan(0u64, |acc, n| {
                let start = *acc;
                *acc += n;
                Some(start)
            })
            .collect();

        // Map each target field to a file column (by field id).
        let file_schema = self.builder.schema().clone();
        let mut leaves = Vec::new();
        let mut sources: Vec<Option<String>> = Vec::new();
        for field in target.fields() {
            let id = field_id_of(field);
            let found = id.and_then(|id| {
                file_schema
                    .fields()
                    .iter()
                    .find(|f| field_id_of(f) == Some(id))
                    .map(|f| f.name().clone())
            });
            if let (Some(id), Some(_)) = (id, &found)
                && let Some(leaf) = self.leaf_index(id)
            {
                leaves.push(leaf);
            }
            sources.push(found);
        }
        leaves.sort_unstable();
        leaves.dedup();
        let mask = ProjectionMask::leaves(self.metadata().file_metadata().schema_descr(), leaves);
        let stream = self
            .builder
            .with_projection(mask)
            .with_row_groups(selected.clone())
            .with_batch_size(batch_size)
            .build()
            .map_err(|e| Error::file(&path, "cannot read Parquet file", e))?;

        // Track positions: batches never span row groups' boundaries in position terms
        // because we count rows in the order the selected groups are read.
        let mut group_iter = selected.into_iter().map(move |g| (rg_start[g], rg_rows[g]));
        let mut current = group_iter.next();
        let mut consumed_in_group = 0u64;
        let path2 = path.clone();
        Ok(stream.map(move |batch| {
            let batch = batch.map_err(|e| Error::file(&path2, "cannot decode Parquet data", e))?;
            let Some((start, rows)) = current else {
                return Err(Error::file(
                    &path2,
                    "more rows than row groups declare",
                    "corrupt file",
                ));
            };
            let first = start + consumed_in_group;
            consumed_in_group += batch.num_rows() as u64;
            if consumed_in_group >= rows {
                if consumed_in_group > rows {
                    return Err(Error::file(
                        &path2,
                        "a batch spans row groups",
                        "unexpected reader behaviour",
                    ));
                }
                current = group_iter.next();
                consumed_in_group = 0;
            }
            let projected = project(&batch, &target, &sources).map_err(|e| {
                Error::file(&path2, "cannot project columns to the table schema", e)
            })?;
            Ok((first, projected))
        }))
    }
}

fn field_id_of(field: &Field) -> Option<i32> {
    field
        .metadata()
        .get(PARQUET_FIELD_ID_META_KEY)
        .and_then(|v| v.parse().ok())
}

/// Builds a batch in `target`'s shape from `batch` (columns found by name in `sources`).
fn project(
    batch: &RecordBatch,
    target: &ArrowSchemaRef,
    sources: &[Option<String>],
) -> std::result::Result<RecordBatch, arrow_schema::ArrowError> {
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(target.fields().len());
    for (field, source) in target.fields().iter().zip(sources) {
        let column = match source.as_ref().and_then(|name| batch.column_by_name(name)) {
            Some(col) if col.data_type() == field.data_type() => col.clone(),
            Some(col) => cast_column(col, field.data_type())?,
            None => new_null_array(field.data_type(), batch.num_rows()),
        };
        columns.push(column);
    }
    let schema = Arc::new(ArrowSchema::new(
        target
            .fields()
            .iter()
            .map(|f| f.as_ref().clone().with_nullable(true))
            .collect::<Vec<_>>(),
    ));
    RecordBatch::try_new_with_options(
        schema,
        columns,
        &arrow_array::RecordBatchOptions::new().with_row_count(Some(batch.num_rows())),
    )
}

fn cast_column(
    col: &ArrayRef,
    to: &DataType,
) -> std::result::Result<ArrayRef, arrow_schema::ArrowError> {
    arrow_cast::cast(col, to)
}
