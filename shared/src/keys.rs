//! Equality keys as bytes.
//!
//! Keys from equality delete files and key columns from data files are both cast to the
//! table schema's Arrow types and encoded with arrow-row, so equal values (including
//! null = null, as the spec requires for equality deletes) give equal bytes whatever
//! physical type each file stored. Per-column encodings also preserve order, which is
//! what bound-based pruning compares.

use arrow_array::ArrayRef;
use arrow_row::{OwnedRow, RowConverter, Rows, SortField};
use arrow_schema::{DataType, SchemaRef as ArrowSchemaRef};
use iceberg::spec::{Datum, NestedFieldRef, PrimitiveType, Schema, Type};

use crate::{Error, Result};

mod nested;
#[cfg(test)]
mod tests;

use nested::KeyPath;
pub use nested::leaf;

/// The equality key columns of one delete group, resolved against the table schema.
pub struct KeyColumns {
    pub field_ids: Vec<i32>,
    /// What each key column is read as: the equality field itself when it is top-level,
    /// else its top-level ancestor pruned to the path down to it (see [`nested`]).
    pub fields: Vec<NestedFieldRef>,
    /// The equality fields themselves.
    pub leaves: Vec<NestedFieldRef>,
    /// Arrow schema the key columns are read into (field ids in the metadata).
    pub arrow_schema: ArrowSchemaRef,
    converter: RowConverter,
    /// The Arrow type of each column's leaf (the column's own type when top-level).
    leaf_types: Vec<DataType>,
    /// One converter per column's leaf, for per-column order-preserving encodings.
    column_converters: Vec<RowConverter>,
}

impl std::fmt::Debug for KeyColumns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyColumns")
            .field("field_ids", &self.field_ids)
            .finish()
    }
}

/// Checks that a field can be an equality key and returns where it sits.
fn key_field(table: &str, schema: &Schema, field_id: i32) -> Result<KeyPath> {
    let path = nested::key_path(table, schema, field_id)?;
    let field = path.leaf.clone();
    let supported = matches!(
        field.field_type.as_ref(),
        Type::Primitive(
            PrimitiveType::Boolean
                | PrimitiveType::Int
                | PrimitiveType::Long
                | PrimitiveType::Date
                | PrimitiveType::Time
                | PrimitiveType::Timestamp
                | PrimitiveType::Timestamptz
                | PrimitiveType::TimestampNs
                | PrimitiveType::TimestamptzNs
                | PrimitiveType::String
                | PrimitiveType::Uuid
                | PrimitiveType::Fixed(_)
                | PrimitiveType::Binary
                | PrimitiveType::Decimal { .. }
        )
    );
    if !supported {
        return Err(Error::UnsupportedKeyType {
            table: table.to_string(),
            field: path.name.clone(),
            field_id,
            field_type: field.field_type.to_string(),
        });
    }
    Ok(path)
}

impl KeyColumns {
    /// Resolves `equality_ids` against `schema` (the table's current schema).
    pub fn new(table: &str, schema: &Schema, equality_ids: &[i32]) -> Result<Self> {
        if equality_ids.is_empty() {
            return Err(Error::UnsupportedTable {
                table: table.to_string(),
                message: "an equality delete file has no equality field ids".into(),
            });
        }
        let paths = equality_ids
            .iter()
            .map(|&id| key_field(table, schema, id))
            .collect::<Result<Vec<_>>>()?;
        let fields: Vec<NestedFieldRef> = paths.iter().map(|p| p.read_field.clone()).collect();
        let leaves = paths.into_iter().map(|p| p.leaf).collect();
        let arrow_schema = crate::columns::target_schema(&fields)?;
        // The whole key in its read shape: a null struct and a null key under a present
        // struct encode differently, as Java compares them.
        let converter = RowConverter::new(
            arrow_schema
                .fields()
                .iter()
                .map(|f| SortField::new(f.data_type().clone()))
                .collect(),
        )?;
        let leaf_types: Vec<DataType> = arrow_schema
            .fields()
            .iter()
            .map(|f| leaf_type(f.data_type()))
            .collect();
        let column_converters = leaf_types
            .iter()
            .map(|t| RowConverter::new(vec![SortField::new(t.clone())]))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        Ok(Self {
            field_ids: equality_ids.to_vec(),
            fields,
            leaves,
            arrow_schema,
            converter,
            leaf_types,
            column_converters,
        })
    }

    pub fn len(&self) -> usize {
        self.field_ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.field_ids.is_empty()
    }

    /// Encodes whole keys; `columns` are in key order and already of the key types.
    pub fn encode(&self, columns: &[ArrayRef]) -> Result<Rows> {
        Ok(self.converter.convert_columns(columns)?)
    }

    /// Whether some key column is nested in a struct (then the whole key is not its
    /// leaves' values alone: see [`nested`]).
    pub fn is_nested(&self) -> bool {
        self.fields
            .iter()
            .zip(&self.field_ids)
            .any(|(f, id)| f.id != *id)
    }

    /// Order-preserving encoding of one key column's values (of its leaf, null where
    /// a struct above it is null: see [`leaf`]).
    pub fn encode_column(&self, index: usize, column: &ArrayRef) -> Result<Rows> {
        let column = leaf(column)?;
        Ok(self.column_converters[index].convert_columns(std::slice::from_ref(&column))?)
    }

    /// The values of key column `index` back from their order-preserving encodings
    /// (as `encode_column` made them).
    pub fn decode_column<'a>(
        &self,
        index: usize,
        encoded: impl Iterator<Item = &'a [u8]>,
    ) -> Result<ArrayRef> {
        let converter = &self.column_converters[index];
        let parser = converter.parser();
        let rows: Vec<_> = encoded.map(|bytes| parser.parse(bytes)).collect();
        let mut columns = converter.convert_rows(rows)?;
        columns
            .pop()
            .ok_or_else(|| Error::InvalidInput("decoding key values gave no column".into()))
    }

    /// Order-preserving encoding of a manifest bound for key column `index`, or `None`
    /// when the bound cannot be represented (then it must not be used for pruning).
    pub fn encode_bound(&self, index: usize, bound: &Datum) -> Option<OwnedRow> {
        let array = crate::columns::datum_to_array(bound, self.data_type(index))?;
        let rows = self.column_converters[index]
            .convert_columns(&[array])
            .ok()?;
        Some(rows.row(0).owned())
    }

    /// The Arrow type of key column `index`'s leaf (the column's type when top-level).
    pub fn data_type(&self, index: usize) -> &DataType {
        &self.leaf_types[index]
    }
}

/// The type under a chain of one-field structs.
fn leaf_type(data_type: &DataType) -> DataType {
    match data_type {
        DataType::Struct(fields) if fields.len() == 1 => leaf_type(fields[0].data_type()),
        other => other.clone(),
    }
}
