//! Equality keys as bytes.
//!
//! Keys from equality delete files and key columns from data files are both cast to the
//! table schema's Arrow types and encoded with arrow-row, so equal values (including
//! null = null, as the spec requires for equality deletes) give equal bytes whatever
//! physical type each file stored. Per-column encodings also preserve order, which is
//! what bound-based pruning compares.

use std::sync::Arc;

use arrow_array::{
    ArrayRef, BinaryArray, BooleanArray, Decimal128Array, FixedSizeBinaryArray, Int32Array,
    Int64Array, StringArray,
};
use arrow_row::{OwnedRow, RowConverter, Rows, SortField};
use arrow_schema::{DataType, SchemaRef as ArrowSchemaRef};
use iceberg::spec::{
    Datum, Literal, NestedFieldRef, PrimitiveLiteral, PrimitiveType, Schema, Type,
};

use crate::{Error, Result};

/// The equality key columns of one delete group, resolved against the table schema.
pub struct KeyColumns {
    pub field_ids: Vec<i32>,
    pub fields: Vec<NestedFieldRef>,
    /// Arrow schema the key columns are read into (field ids in the metadata).
    pub arrow_schema: ArrowSchemaRef,
    converter: RowConverter,
    /// One converter per column, for per-column order-preserving encodings.
    column_converters: Vec<RowConverter>,
}

impl std::fmt::Debug for KeyColumns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyColumns")
            .field("field_ids", &self.field_ids)
            .finish()
    }
}

/// Checks that a field can be an equality key and returns it.
fn key_field(table: &str, schema: &Schema, field_id: i32) -> Result<NestedFieldRef> {
    let field = schema
        .field_by_id(field_id)
        .ok_or_else(|| Error::UnsupportedTable {
            table: table.to_string(),
            message: format!("equality field id {field_id} is not in the table schema"),
        })?
        .clone();
    // Only top-level columns are read as keys; a nested one would read as null.
    if schema.as_struct().field_by_id(field_id).is_none() {
        return Err(Error::UnsupportedTable {
            table: table.to_string(),
            message: format!(
                "equality field {} (id {field_id}) is nested in a struct; eqdv supports \
                 top-level equality fields only",
                field.name
            ),
        });
    }
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
            field: field.name.clone(),
            field_id,
            field_type: field.field_type.to_string(),
        });
    }
    Ok(field)
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
        let fields = equality_ids
            .iter()
            .map(|&id| key_field(table, schema, id))
            .collect::<Result<Vec<_>>>()?;
        let arrow_schema = crate::parquet_io::target_schema(&fields)?;
        let sort_fields: Vec<SortField> = arrow_schema
            .fields()
            .iter()
            .map(|f| SortField::new(f.data_type().clone()))
            .collect();
        let converter = RowConverter::new(sort_fields.clone())?;
        let column_converters = sort_fields
            .into_iter()
            .map(|f| RowConverter::new(vec![f]))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        Ok(Self {
            field_ids: equality_ids.to_vec(),
            fields,
            arrow_schema,
            converter,
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

    /// Order-preserving encoding of one key column's values.
    pub fn encode_column(&self, index: usize, column: &ArrayRef) -> Result<Rows> {
        Ok(self.column_converters[index].convert_columns(std::slice::from_ref(column))?)
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
        let data_type = self.arrow_schema.field(index).data_type();
        let array = datum_to_array(bound, data_type)?;
        let rows = self.column_converters[index]
            .convert_columns(&[array])
            .ok()?;
        Some(rows.row(0).owned())
    }

    /// The Arrow type of key column `index`.
    pub fn data_type(&self, index: usize) -> &DataType {
        self.arrow_schema.field(index).data_type()
    }
}

/// A one-element Arrow array holding `datum` as `data_type`, if representable.
pub fn datum_to_array(datum: &Datum, data_type: &DataType) -> Option<ArrayRef> {
    primitive_to_array(datum.literal(), data_type)
}

/// A one-element Arrow array holding a primitive `literal` (such as a field's
/// initial-default) as `data_type`, if representable.
pub fn literal_to_array(literal: &Literal, data_type: &DataType) -> Option<ArrayRef> {
    match literal {
        Literal::Primitive(p) => primitive_to_array(p, data_type),
        _ => None,
    }
}

fn primitive_to_array(literal: &PrimitiveLiteral, data_type: &DataType) -> Option<ArrayRef> {
    let array: ArrayRef = match (literal, data_type) {
        (PrimitiveLiteral::Boolean(v), _) => Arc::new(BooleanArray::from(vec![*v])),
        (PrimitiveLiteral::Int(v), _) => Arc::new(Int32Array::from(vec![*v])),
        (PrimitiveLiteral::Long(v), _) => Arc::new(Int64Array::from(vec![*v])),
        (PrimitiveLiteral::String(v), _) => Arc::new(StringArray::from(vec![v.as_str()])),
        (PrimitiveLiteral::Binary(v), DataType::FixedSizeBinary(n)) => {
            if v.len() != *n as usize {
                return None;
            }
            Arc::new(FixedSizeBinaryArray::try_from_iter(std::iter::once(v.as_slice())).ok()?)
        }
        (PrimitiveLiteral::Binary(v), _) => Arc::new(BinaryArray::from(vec![v.as_slice()])),
        (PrimitiveLiteral::UInt128(v), DataType::FixedSizeBinary(16)) => {
            let bytes = v.to_be_bytes();
            Arc::new(FixedSizeBinaryArray::try_from_iter(std::iter::once(&bytes[..])).ok()?)
        }
        (PrimitiveLiteral::Int128(v), DataType::Decimal128(p, s)) => Arc::new(
            Decimal128Array::from(vec![*v])
                .with_precision_and_scale(*p, *s)
                .ok()?,
        ),
        _ => return None,
    };
    if array.data_type() == data_type {
        Some(array)
    } else {
        // Strict: a value that does not fit is no bound (and no default), never a null.
        let options = arrow_cast::CastOptions {
            safe: false,
            ..Default::default()
        };
        arrow_cast::cast_with_options(&array, data_type, &options).ok()
    }
}
