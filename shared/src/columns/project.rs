//! Turning a decoded batch of a file's columns into the table's types: each field from
//! its column (pruned to a nested key, cast where the stored type converts exactly), its
//! initial default, or nulls.

use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch, UInt32Array, new_null_array};
use arrow_schema::{ArrowError, Schema as ArrowSchema, SchemaRef as ArrowSchemaRef};
use iceberg::spec::NestedFieldRef;

use super::cast::strict_cast;
use super::{FieldSource, FileColumns};
use crate::{Error, Result};

/// What one output column of a read is made of.
pub(crate) enum Projected {
    /// The file's column of this name, cast to the table's type; a field nested in
    /// structs is under these names of each struct below it.
    Column(String, Vec<String>),
    /// A one-element array repeated for every row (an initial default).
    Constant(ArrayRef),
    Null,
}

impl FileColumns {
    /// Where each of `fields` comes from in this file, and how each column of `target`
    /// (their [`super::target_schema`]) is made; an error naming the file and the field
    /// when one cannot be read faithfully (see [`FileColumns::source_of`]).
    pub(crate) fn projection(
        &self,
        fields: &[NestedFieldRef],
        target: &ArrowSchemaRef,
    ) -> Result<(Vec<FieldSource>, Vec<Projected>)> {
        let sources = fields
            .iter()
            .map(|f| self.source_of(f))
            .collect::<Result<Vec<_>>>()?;
        let mut projected: Vec<Projected> = Vec::with_capacity(fields.len());
        for (source, field) in sources.iter().zip(target.fields()) {
            projected.push(match source {
                FieldSource::Column { index, path } => {
                    let (root, names) = self.path_names(*index, path);
                    Projected::Column(root, names)
                }
                FieldSource::Constant(None) => Projected::Null,
                FieldSource::Constant(Some(value)) => {
                    let one = super::cast::literal_to_array(value, field.data_type()).ok_or_else(
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
        Ok((sources, projected))
    }
}

/// Builds a batch in `target`'s shape from `batch`.
pub(crate) fn project(
    batch: &RecordBatch,
    target: &ArrowSchemaRef,
    projected: &[Projected],
) -> std::result::Result<RecordBatch, ArrowError> {
    let rows = batch.num_rows();
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(target.fields().len());
    for (field, source) in target.fields().iter().zip(projected) {
        let column = match source {
            Projected::Column(name, path) => match batch.column_by_name(name) {
                Some(col) if !path.is_empty() => {
                    super::nested::prune(col, field.data_type(), path)?
                }
                Some(col) if col.data_type() == field.data_type() => col.clone(),
                Some(col) => strict_cast(col, field.data_type())?,
                None => {
                    return Err(ArrowError::SchemaError(format!(
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
