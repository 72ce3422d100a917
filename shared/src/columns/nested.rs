//! A key nested in structs, read from the struct column holding it: the file's structs
//! pruned to the path down to the key, each keeping its own nulls (a null struct and a
//! null key under a present struct are different keys to Iceberg Java).

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef, StructArray};
use arrow_schema::{ArrowError, DataType};

use super::cast::strict_cast;

/// `column` (a struct of the file) pruned to its child `path[0]`, and so on down, in
/// `wanted`'s types (a chain of one-field structs over the key's type). Children are
/// found by name: the read may have left out the struct's other children.
pub(super) fn prune(
    column: &ArrayRef,
    wanted: &DataType,
    path: &[String],
) -> Result<ArrayRef, ArrowError> {
    let Some((name, below)) = path.split_first() else {
        return if column.data_type() == wanted {
            Ok(column.clone())
        } else {
            strict_cast(column, wanted)
        };
    };
    let (Some(stored), DataType::Struct(fields)) = (column.as_struct_opt(), wanted) else {
        return Err(ArrowError::SchemaError(format!(
            "a nested key's column is {}, not a struct",
            column.data_type()
        )));
    };
    let (Some(child), Some(field)) = (stored.column_by_name(name), fields.first()) else {
        return Err(ArrowError::SchemaError(
            "a nested key's struct lacks the field on its path".into(),
        ));
    };
    let child = prune(child, field.data_type(), below)?;
    Ok(Arc::new(StructArray::try_new(
        fields.clone(),
        vec![child],
        stored.nulls().cloned(),
    )?))
}

impl super::FileColumns {
    /// The name of top-level column `index` and those of the children at `path` below
    /// it (see [`super::FieldSource::Column`]).
    pub fn path_names(&self, index: usize, path: &[usize]) -> (String, Vec<String>) {
        let root = self.schema.field(index);
        let mut names = Vec::with_capacity(path.len());
        let mut field = root;
        for &at in path {
            let DataType::Struct(children) = field.data_type() else {
                break;
            };
            let Some(child) = children.get(at) else {
                break;
            };
            names.push(child.name().clone());
            field = child.as_ref();
        }
        (root.name().clone(), names)
    }
}
