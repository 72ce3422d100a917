//! A key nested in structs, read from the struct column holding it: the file's structs
//! pruned to the path down to the key, each keeping its own nulls (a null struct and a
//! null key under a present struct are different keys to Iceberg Java).

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef, StructArray};
use arrow_schema::{ArrowError, DataType};

use super::convert::strict_cast;

/// `column` (a struct of the file) pruned to the child at `path[0]`, and so on down,
/// in `wanted`'s types (a chain of one-field structs over the key's type).
pub(super) fn prune(
    column: &ArrayRef,
    wanted: &DataType,
    path: &[usize],
) -> Result<ArrayRef, ArrowError> {
    let Some((&at, below)) = path.split_first() else {
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
    let (Some(child), Some(field)) = (stored.columns().get(at), fields.first()) else {
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
