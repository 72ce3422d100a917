//! Keys nested in structs in Avro delete files: Java writes the delete row in the
//! projected schema, a record field (nullable: a union with null) holding a record with
//! only the key. Each struct's nulls are kept, as the Parquet read keeps them (a null
//! struct and a null key under a present struct are different keys to Java).

use std::sync::Arc;

use apache_avro::Schema as AvroSchema;
use apache_avro::types::Value;
use arrow_array::{ArrayRef, BooleanArray, StructArray};
use arrow_schema::{DataType, Fields};
use iceberg::spec::{MappedField, NestedField, Type};

use super::KeyBuilder;

/// `schema` without its union with null.
pub(super) fn non_null(schema: &AvroSchema) -> &AvroSchema {
    match schema {
        AvroSchema::Union(union) => union
            .variants()
            .iter()
            .find(|v| !matches!(v, AvroSchema::Null))
            .unwrap_or(schema),
        other => other,
    }
}

/// The position of the key's field in each record below the top-level field of
/// `field` (the key's top-level struct pruned to it; none for a top-level key), and
/// the key's own Avro schema. Fields are found by field-id, or through `mapped` (the
/// name mapping of the top-level field) when the file has none.
pub(super) fn locate<'a>(
    field: &NestedField,
    top: &'a AvroSchema,
    mut mapped: Option<&MappedField>,
) -> Result<(Vec<usize>, &'a AvroSchema), String> {
    let (mut wanted, mut schema, mut path) = (field, top, Vec::new());
    while let Type::Struct(pruned) = wanted.field_type.as_ref() {
        let Some(child) = pruned.fields().first() else {
            break;
        };
        let AvroSchema::Record(record) = non_null(schema) else {
            return Err(format!(
                "{} is {schema:?} in the file, a struct in the table",
                wanted.name
            ));
        };
        let at = record
            .fields
            .iter()
            .position(|f| match f.custom_attributes.get("field-id") {
                Some(id) => id.as_i64() == Some(i64::from(child.id)),
                None => mapped.is_some_and(|m| {
                    m.fields()
                        .iter()
                        .any(|n| n.field_id() == Some(child.id) && n.names().contains(&f.name))
                }),
            });
        let Some(at) = at else {
            return Err(format!(
                "struct {} lacks field {} (id {})",
                wanted.name, child.name, child.id
            ));
        };
        mapped = crate::columns::mapped_child(mapped, child.id);
        path.push(at);
        schema = &record.fields[at].schema;
        wanted = child;
    }
    Ok((path, schema))
}

/// A key column being decoded: its leaf, and for a nested key each struct's nulls.
pub(super) struct ColumnBuilder {
    leaf: KeyBuilder,
    /// The key's position in each record below the top-level field.
    path: Vec<usize>,
    /// Per struct from the top: its Arrow fields and each row's validity.
    levels: Vec<(Fields, Vec<bool>)>,
}

impl ColumnBuilder {
    pub(super) fn new(data_type: &DataType, path: Vec<usize>, capacity: usize) -> Self {
        let mut levels = Vec::new();
        let mut leaf_type = data_type;
        for _ in &path {
            let DataType::Struct(fields) = leaf_type else {
                break;
            };
            let Some(child) = fields.first() else {
                break;
            };
            levels.push((fields.clone(), Vec::with_capacity(capacity)));
            leaf_type = child.data_type();
        }
        Self {
            leaf: KeyBuilder::new(leaf_type, capacity),
            path,
            levels,
        }
    }

    /// Appends the key under `value` (the top-level field's), or says why it does not
    /// read exactly.
    pub(super) fn append(&mut self, value: &Value) -> Result<(), String> {
        let mut value = unwrap_union(value);
        for (level, &at) in self.path.iter().enumerate() {
            match value {
                Value::Null => {
                    // A null struct: it and everything below it are null.
                    for (_, valid) in &mut self.levels[level..] {
                        valid.push(false);
                    }
                    return self.leaf.append(&Value::Null);
                }
                Value::Record(fields) => {
                    let Some((_, child)) = fields.get(at) else {
                        return Err(format!("a struct lacks its field {at}"));
                    };
                    if let Some((_, valid)) = self.levels.get_mut(level) {
                        valid.push(true);
                    }
                    value = unwrap_union(child);
                }
                other => return Err(format!("holds {other:?} where the table has a struct")),
            }
        }
        self.leaf.append(value)
    }

    pub(super) fn finish(&mut self) -> Result<ArrayRef, String> {
        let mut array = self.leaf.finish();
        for (fields, valid) in self.levels.iter_mut().rev() {
            let nulls = BooleanArray::from(std::mem::take(valid));
            array = Arc::new(
                StructArray::try_new(
                    fields.clone(),
                    vec![array],
                    Some(nulls.values().clone().into()),
                )
                .map_err(|e| format!("cannot assemble a struct: {e}"))?,
            );
        }
        Ok(array)
    }
}

fn unwrap_union(value: &Value) -> &Value {
    match value {
        Value::Union(_, inner) => inner.as_ref(),
        other => other,
    }
}
