//! Reading a file's batches in the table's types: the chosen columns and row groups,
//! fields the file lacks filled in, promoted types cast, each batch with the position of
//! its first row.

use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch, UInt32Array, new_null_array};
use arrow_schema::{Schema as ArrowSchema, SchemaRef as ArrowSchemaRef};
use futures::{Stream, StreamExt};
use iceberg::spec::NestedFieldRef;
use parquet::arrow::ProjectionMask;

use super::convert::strict_cast;
use super::{FieldSource, ParquetFile, target_schema};
use crate::{Error, Result};

impl ParquetFile {
    /// Streams `(first position, batch)` for the chosen row groups (all when `None`),
    /// with batches of `fields` in the table's types (see [`target_schema`]): fields the
    /// file lacks as their default or nulls, promoted types cast. Fails, naming the file
    /// and the field, when a field cannot be read faithfully (see
    /// [`ParquetFile::source_of`]).
    pub fn read(
        self,
        fields: &[NestedFieldRef],
        row_groups: Option<Vec<usize>>,
        batch_size: usize,
    ) -> Result<impl Stream<Item = Result<(u64, RecordBatch)>> + Send> {
        let target = target_schema(fields)?;
        self.read_as(fields, target, row_groups, batch_size)
    }

    /// [`ParquetFile::read`], with `target` the [`target_schema`] of `fields` (which a
    /// caller reading the same fields from many files builds once).
    pub fn read_as(
        self,
        fields: &[NestedFieldRef],
        target: ArrowSchemaRef,
        row_groups: Option<Vec<usize>>,
        batch_size: usize,
    ) -> Result<impl Stream<Item = Result<(u64, RecordBatch)>> + Send> {
        let sources = fields
            .iter()
            .map(|f| self.source_of(f))
            .collect::<Result<Vec<_>>>()?;
        let mut projected: Vec<Projected> = Vec::with_capacity(fields.len());
        for (source, field) in sources.iter().zip(target.fields()) {
            projected.push(match source {
                FieldSource::Column { index } => {
                    Projected::Column(self.builder.schema().field(*index).name().clone())
                }
                FieldSource::Constant(None) => Projected::Null,
                FieldSource::Constant(Some(value)) => {
                    let one = crate::keys::literal_to_array(value, field.data_type()).ok_or_else(
                        || {
                            Error::file(
                                &self.path,
                                format!(
                                    "the initial-default of field {} cannot be read as {}",
                                    field.name(),
                                    field.data_type()
                                ),
                                "unsupported default",
                            )
                        },
                    )?;
                    Projected::Constant(one)
                }
            });
        }

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

        // Whole top-level columns (a nested one with all its leaves); the Arrow schema's
        // top-level fields are the Parquet schema's roots, in order.
        let mut roots: Vec<usize> = sources
            .iter()
            .filter_map(|s| match s {
                FieldSource::Column { index } => Some(*index),
                FieldSource::Constant(_) => None,
            })
            .collect();
        roots.sort_unstable();
        roots.dedup();
        let mask = ProjectionMask::roots(self.metadata().file_metadata().schema_descr(), roots);
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
            let projected = project(&batch, &target, &projected).map_err(|e| {
                Error::file(&path2, "cannot project columns to the table schema", e)
            })?;
            Ok((first, projected))
        }))
    }
}

/// What one output column of a read is made of.
enum Projected {
    /// The file's column of this name, cast to the table's type.
    Column(String),
    /// A one-element array repeated for every row (an initial default).
    Constant(ArrayRef),
    Null,
}

/// Builds a batch in `target`'s shape from `batch`.
fn project(
    batch: &RecordBatch,
    target: &ArrowSchemaRef,
    projected: &[Projected],
) -> std::result::Result<RecordBatch, arrow_schema::ArrowError> {
    let rows = batch.num_rows();
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(target.fields().len());
    for (field, source) in target.fields().iter().zip(projected) {
        let column = match source {
            Projected::Column(name) => match batch.column_by_name(name) {
                Some(col) if col.data_type() == field.data_type() => col.clone(),
                Some(col) => strict_cast(col, field.data_type())?,
                None => {
                    return Err(arrow_schema::ArrowError::SchemaError(format!(
                        "column {name} missing from a decoded batch"
                    )));
                }
            },
            Projected::Constant(one) => {
                let indices = UInt32Array::from(vec![0u32; rows]);
                arrow_select::take::take(one.as_ref(), &indices, None)?
            }
            Projected::Null => new_null_array(field.data_type(), rows),
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
        &arrow_array::RecordBatchOptions::new().with_row_count(Some(rows)),
    )
}
