//! Equality fields nested in structs.
//!
//! Iceberg Java applies an equality delete by comparing the data row projected to the
//! delete schema with the delete row, struct by struct: a null struct equals only a
//! null struct, and a struct whose key is null equals only a struct whose key is null
//! (`StructLikeSet` with `Comparators.forType`, nulls first). So a nested key is read
//! as its top-level ancestor pruned to the path down to it (a chain of one-field
//! structs, each with its own nulls) and the whole key is arrow-row encoded in that
//! shape: equal bytes exactly when Java's comparison says equal. Per-column work that
//! compares values (bounds, statistics, bloom filters) uses the leaf with every
//! ancestor's null folded in, which matches a superset of what the shaped key does.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef, BooleanArray};
use iceberg::spec::{NestedField, NestedFieldRef, Schema, StructType, Type};

use crate::{Error, Result};

/// Where an equality field sits in the table schema.
pub(crate) struct KeyPath {
    /// The field itself.
    pub(crate) leaf: NestedFieldRef,
    /// Its dotted path (`s.id`), for errors.
    pub(crate) name: String,
    /// What is read for it: the field when top-level, else its top-level ancestor
    /// pruned to the path down to it.
    pub(crate) read_field: NestedFieldRef,
}

/// Finds `field_id` in `schema`, refusing a field inside a list or a map (whose rows
/// are not the table's rows).
pub(crate) fn key_path(table: &str, schema: &Schema, field_id: i32) -> Result<KeyPath> {
    let mut chain = Vec::new();
    let mut in_collection = false;
    let root = Type::Struct(schema.as_struct().clone());
    if !find(&root, field_id, &mut chain, &mut in_collection) {
        return Err(Error::UnsupportedTable {
            table: table.to_string(),
            message: format!("equality field id {field_id} is not in the table schema"),
        });
    }
    let name = chain
        .iter()
        .map(|f| f.name.as_str())
        .collect::<Vec<_>>()
        .join(".");
    if in_collection {
        return Err(Error::UnsupportedTable {
            table: table.to_string(),
            message: format!(
                "equality field {name} (id {field_id}) is inside a list or a map; eqdv \
                 supports equality fields at the top level or nested in structs only"
            ),
        });
    }
    let leaf = chain.pop().ok_or_else(|| {
        Error::InvalidInput(format!("equality field id {field_id} has an empty path"))
    })?;
    let mut read_field = leaf.clone();
    // Rebuilt from the leaf up: each ancestor keeps only the child on the path.
    while let Some(parent) = chain.pop() {
        let pruned = Type::Struct(StructType::new(vec![read_field]));
        let mut field = NestedField::new(parent.id, &parent.name, pruned, parent.required);
        field.doc = parent.doc.clone();
        read_field = Arc::new(field);
    }
    Ok(KeyPath {
        leaf,
        name,
        read_field,
    })
}

/// Depth-first search for `id` under `ty`, pushing the fields on the way.
fn find(ty: &Type, id: i32, chain: &mut Vec<NestedFieldRef>, in_collection: &mut bool) -> bool {
    let children: Vec<(&NestedFieldRef, bool)> = match ty {
        Type::Primitive(_) => return false,
        Type::Struct(s) => s.fields().iter().map(|f| (f, false)).collect(),
        Type::List(l) => vec![(&l.element_field, true)],
        Type::Map(m) => vec![(&m.key_field, true), (&m.value_field, true)],
    };
    for (field, collection) in children {
        chain.push(field.clone());
        if field.id == id || find(&field.field_type, id, chain, in_collection) {
            *in_collection |= collection;
            return true;
        }
        chain.pop();
    }
    false
}

/// The leaf of a key column read as a chain of one-field structs (itself for any
/// other column), null wherever it or a struct above it is null.
pub fn leaf(column: &ArrayRef) -> Result<ArrayRef> {
    let mut current = column.clone();
    let mut valid: Option<Vec<bool>> = None;
    while let Some(s) = current.as_struct_opt() {
        let v = valid.get_or_insert_with(|| vec![true; s.len()]);
        for (i, x) in v.iter_mut().enumerate() {
            *x &= s.is_valid(i);
        }
        let child = s.columns().first().cloned().ok_or_else(|| {
            Error::InvalidInput("a nested key column is a struct without fields".into())
        })?;
        current = child;
    }
    match valid {
        Some(valid) if valid.iter().any(|v| !v) => {
            // `nullif` nulls where the mask is true.
            let mask = BooleanArray::from(valid.iter().map(|v| !v).collect::<Vec<_>>());
            Ok(arrow_select::nullif::nullif(current.as_ref(), &mask)?)
        }
        _ => Ok(current),
    }
}
