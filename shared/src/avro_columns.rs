//! Delete files in Avro (what Java writes with `write.delete.format.default=avro`):
//! their columns (an equality delete's keys, a position delete's path and position) read
//! into the same Arrow columns, in the table schema's types, that a Parquet file gives.
//!
//! The container is read by apache-avro (the crate iceberg-rust reads manifests with).
//! A column is found by the `field-id` its writer recorded on the Avro field (or,
//! without one, through the table's name mapping), and each value is taken only where
//! it converts exactly: the Avro type of the field as written, or a promotion the
//! Iceberg spec allows (int to long, a decimal of the same scale and a smaller
//! precision). Anything else is refused with an error naming the file and the field,
//! never read as something close.

use std::sync::Arc;

use apache_avro::Schema as AvroSchema;
use apache_avro::types::Value;
use arrow_array::builder::{
    BinaryBuilder, BooleanBuilder, Date32Builder, Decimal128Builder, FixedSizeBinaryBuilder,
    Int32Builder, Int64Builder, LargeBinaryBuilder, LargeStringBuilder, StringBuilder,
    Time64MicrosecondBuilder, TimestampMicrosecondBuilder, TimestampNanosecondBuilder,
};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, SchemaRef, TimeUnit};
use iceberg::io::FileIO;
use iceberg::spec::{NameMapping, NestedFieldRef};

use crate::{Error, Result};
use nested::ColumnBuilder;

mod nested;

/// The columns `fields` (by field id) of the Avro delete file at `path`, in batches of
/// at most `batch_size` rows shaped as `schema` (the fields' Arrow types, in order).
pub(crate) async fn read_avro_columns(
    file_io: &FileIO,
    path: &str,
    (fields, schema): (&[NestedFieldRef], &SchemaRef),
    name_mapping: Option<&NameMapping>,
    batch_size: usize,
) -> Result<Vec<RecordBatch>> {
    let bytes = file_io
        .new_input(path)
        .map_err(|e| Error::file(path, "cannot open the delete file", e))?
        .read()
        .await
        .map_err(|e| Error::file(path, "cannot read the delete file", e))?;
    decode_columns(
        path,
        &bytes,
        (fields, schema),
        name_mapping,
        batch_size.max(1),
    )
}

/// Decodes columns of an Avro container's records (see [`read_avro_columns`]).
fn decode_columns(
    path: &str,
    bytes: &[u8],
    (fields, schema): (&[NestedFieldRef], &SchemaRef),
    name_mapping: Option<&NameMapping>,
    batch_size: usize,
) -> Result<Vec<RecordBatch>> {
    let invalid = |message: String| Error::file(path, message, "invalid delete file");
    crate::manifest_decode::check_avro_file(path, bytes)?;
    let reader = apache_avro::Reader::new(bytes)
        .map_err(|e| Error::file(path, "not an Avro container file", e))?;
    let AvroSchema::Record(record) = reader.writer_schema() else {
        return Err(invalid("its Avro schema is not a record".into()));
    };
    // Per column: the record field holding it (and, for a nested key, the key's
    // position in each record below it).
    let mut positions = Vec::with_capacity(fields.len());
    let mut columns = Vec::with_capacity(fields.len());
    for (i, field) in fields.iter().enumerate() {
        let id = field.id;
        let mapped =
            name_mapping.and_then(|m| m.fields().iter().find(|m| m.field_id() == Some(id)));
        let by_id = record.fields.iter().position(|f| {
            f.custom_attributes
                .get("field-id")
                .and_then(serde_json::Value::as_i64)
                == Some(i64::from(id))
        });
        let by_name = || {
            let mapped = mapped?;
            record.fields.iter().position(|f| {
                !f.custom_attributes.contains_key("field-id") && mapped.names().contains(&f.name)
            })
        };
        let Some(at) = by_id.or_else(by_name) else {
            return Err(invalid(format!(
                "the delete file lacks field id {id} ({})",
                field.name
            )));
        };
        let wanted = schema.field(i).data_type();
        let (path, leaf_schema) = nested::locate(field, &record.fields[at].schema, mapped)
            .map_err(|why| invalid(format!("field {} (id {id}): {why}", field.name)))?;
        let leaf_type = columns_leaf_type(wanted, path.len());
        check_decimal(leaf_schema, leaf_type)
            .map_err(|why| invalid(format!("field {} (id {id}) {why}", field.name)))?;
        positions.push(at);
        columns.push(ColumnBuilder::new(wanted, path, batch_size));
    }
    let mut batches = Vec::new();
    let mut rows = 0usize;
    for value in reader {
        let value = value.map_err(|e| Error::file(path, "cannot decode an Avro record", e))?;
        let Value::Record(values) = value else {
            return Err(invalid("an Avro record is not a record".into()));
        };
        for (i, &at) in positions.iter().enumerate() {
            let Some((_, value)) = values.get(at) else {
                return Err(invalid(format!("a record lacks field {at}")));
            };
            columns[i].append(value).map_err(|why| {
                invalid(format!(
                    "field {} (id {}) {why}",
                    fields[i].name, fields[i].id
                ))
            })?;
        }
        rows += 1;
        if rows == batch_size {
            batches.push(finish(path, schema, &mut columns)?);
            rows = 0;
        }
    }
    if rows > 0 {
        batches.push(finish(path, schema, &mut columns)?);
    }
    Ok(batches)
}

/// A decimal key's Avro field must hold values of the table's scale, at most its
/// precision: other decimals would need rescaling, which is not an exact read.
fn check_decimal(schema: &AvroSchema, wanted: &DataType) -> std::result::Result<(), String> {
    let schema = nested::non_null(schema);
    match (schema, wanted) {
        (AvroSchema::Decimal(d), DataType::Decimal128(precision, scale)) => {
            let fits = i64::from(*scale) == d.scale as i64 && d.precision <= *precision as usize;
            if fits {
                Ok(())
            } else {
                Err(format!(
                    "is decimal({}, {}) in the file, decimal({precision}, {scale}) in the table",
                    d.precision, d.scale
                ))
            }
        }
        (_, DataType::Decimal128(..)) => Err(format!(
            "is a decimal in the table but {schema:?} in the file"
        )),
        _ => Ok(()),
    }
}

fn finish(path: &str, schema: &SchemaRef, columns: &mut [ColumnBuilder]) -> Result<RecordBatch> {
    let arrays: Vec<ArrayRef> = columns
        .iter_mut()
        .map(ColumnBuilder::finish)
        .collect::<std::result::Result<_, _>>()
        .map_err(|why| Error::file(path, why, "invalid delete file"))?;
    RecordBatch::try_new(schema.clone(), arrays)
        .map_err(|e| Error::file(path, "cannot assemble the delete file's columns", e))
}

/// The type under `depth` one-field structs of `data_type`.
fn columns_leaf_type(data_type: &DataType, depth: usize) -> &DataType {
    match data_type {
        DataType::Struct(fields) if depth > 0 => match fields.first() {
            Some(child) => columns_leaf_type(child.data_type(), depth - 1),
            None => data_type,
        },
        other => other,
    }
}

/// A column being decoded, in its table type.
enum KeyBuilder {
    Boolean(BooleanBuilder),
    Int(Int32Builder),
    Long(Int64Builder),
    Date(Date32Builder),
    Time(Time64MicrosecondBuilder),
    Micros(TimestampMicrosecondBuilder, Option<Arc<str>>),
    Nanos(TimestampNanosecondBuilder, Option<Arc<str>>),
    String(StringBuilder),
    LargeString(LargeStringBuilder),
    Binary(BinaryBuilder),
    LargeBinary(LargeBinaryBuilder),
    Fixed(FixedSizeBinaryBuilder, i32),
    Decimal(Decimal128Builder, u8, i8),
    /// A type no key has (`KeyColumns` refuses the others first).
    Unsupported(DataType),
}

impl KeyBuilder {
    fn new(data_type: &DataType, capacity: usize) -> Self {
        match data_type {
            DataType::Boolean => Self::Boolean(BooleanBuilder::with_capacity(capacity)),
            DataType::Int32 => Self::Int(Int32Builder::with_capacity(capacity)),
            DataType::Int64 => Self::Long(Int64Builder::with_capacity(capacity)),
            DataType::Date32 => Self::Date(Date32Builder::with_capacity(capacity)),
            DataType::Time64(TimeUnit::Microsecond) => {
                Self::Time(Time64MicrosecondBuilder::with_capacity(capacity))
            }
            DataType::Timestamp(TimeUnit::Microsecond, tz) => Self::Micros(
                TimestampMicrosecondBuilder::with_capacity(capacity),
                tz.clone(),
            ),
            DataType::Timestamp(TimeUnit::Nanosecond, tz) => Self::Nanos(
                TimestampNanosecondBuilder::with_capacity(capacity),
                tz.clone(),
            ),
            DataType::Utf8 => Self::String(StringBuilder::new()),
            DataType::LargeUtf8 => Self::LargeString(LargeStringBuilder::new()),
            DataType::Binary => Self::Binary(BinaryBuilder::new()),
            DataType::LargeBinary => Self::LargeBinary(LargeBinaryBuilder::new()),
            DataType::FixedSizeBinary(n) => {
                Self::Fixed(FixedSizeBinaryBuilder::with_capacity(capacity, *n), *n)
            }
            DataType::Decimal128(p, s) => {
                Self::Decimal(Decimal128Builder::with_capacity(capacity), *p, *s)
            }
            other => Self::Unsupported(other.clone()),
        }
    }

    /// Appends `value` (a null for an Avro null), or says why it does not convert
    /// exactly to the column's type.
    fn append(&mut self, value: &Value) -> std::result::Result<(), String> {
        let value = match value {
            Value::Union(_, inner) => inner.as_ref(),
            other => other,
        };
        let mismatch = |wanted: &str| format!("holds {value:?} where the table has {wanted}");
        match (self, value) {
            (Self::Unsupported(t), _) => return Err(format!("has type {t}, not a key type")),
            (Self::Boolean(b), Value::Null) => b.append_null(),
            (Self::Int(b), Value::Null) => b.append_null(),
            (Self::Long(b), Value::Null) => b.append_null(),
            (Self::Date(b), Value::Null) => b.append_null(),
            (Self::Time(b), Value::Null) => b.append_null(),
            (Self::Micros(b, _), Value::Null) => b.append_null(),
            (Self::Nanos(b, _), Value::Null) => b.append_null(),
            (Self::String(b), Value::Null) => b.append_null(),
            (Self::LargeString(b), Value::Null) => b.append_null(),
            (Self::Binary(b), Value::Null) => b.append_null(),
            (Self::LargeBinary(b), Value::Null) => b.append_null(),
            (Self::Fixed(b, _), Value::Null) => b.append_null(),
            (Self::Decimal(b, ..), Value::Null) => b.append_null(),
            (Self::Boolean(b), Value::Boolean(v)) => b.append_value(*v),
            (Self::Int(b), Value::Int(v)) => b.append_value(*v),
            (Self::Long(b), Value::Long(v)) => b.append_value(*v),
            (Self::Long(b), Value::Int(v)) => b.append_value(i64::from(*v)),
            (Self::Date(b), Value::Date(v)) => b.append_value(*v),
            (Self::Time(b), Value::TimeMicros(v)) => b.append_value(*v),
            (Self::Micros(b, _), Value::TimestampMicros(v) | Value::LocalTimestampMicros(v)) => {
                b.append_value(*v)
            }
            (Self::Nanos(b, _), Value::TimestampNanos(v) | Value::LocalTimestampNanos(v)) => {
                b.append_value(*v)
            }
            (Self::String(b), Value::String(v)) => b.append_value(v),
            (Self::LargeString(b), Value::String(v)) => b.append_value(v),
            (Self::Binary(b), Value::Bytes(v) | Value::Fixed(_, v)) => b.append_value(v),
            (Self::LargeBinary(b), Value::Bytes(v) | Value::Fixed(_, v)) => b.append_value(v),
            (Self::Fixed(b, n), Value::Fixed(len, v)) if *len == *n as usize => {
                b.append_value(v)
                    .map_err(|e| format!("holds a fixed value that does not fit: {e}"))?
            }
            (Self::Fixed(b, 16), Value::Uuid(v)) => b
                .append_value(v.as_bytes())
                .map_err(|e| format!("holds a UUID that does not fit: {e}"))?,
            (Self::Decimal(b, ..), Value::Decimal(v)) => {
                let bytes: Vec<u8> = v
                    .try_into()
                    .map_err(|e| format!("holds a decimal that does not decode: {e}"))?;
                b.append_value(unscaled(&bytes).ok_or("holds a decimal wider than 16 bytes")?)
            }
            (Self::Boolean(_), _) => return Err(mismatch("boolean")),
            (Self::Int(_), _) => return Err(mismatch("int")),
            (Self::Long(_), _) => return Err(mismatch("long")),
            (Self::Date(_), _) => return Err(mismatch("date")),
            (Self::Time(_), _) => return Err(mismatch("time")),
            (Self::Micros(..), _) => return Err(mismatch("a timestamp in microseconds")),
            (Self::Nanos(..), _) => return Err(mismatch("a timestamp in nanoseconds")),
            (Self::String(_) | Self::LargeString(_), _) => return Err(mismatch("string")),
            (Self::Binary(_) | Self::LargeBinary(_), _) => return Err(mismatch("binary")),
            (Self::Fixed(_, n), _) => return Err(mismatch(&format!("fixed[{n}]"))),
            (Self::Decimal(..), _) => return Err(mismatch("decimal")),
        }
        Ok(())
    }

    fn finish(&mut self) -> ArrayRef {
        match self {
            Self::Boolean(b) => Arc::new(b.finish()),
            Self::Int(b) => Arc::new(b.finish()),
            Self::Long(b) => Arc::new(b.finish()),
            Self::Date(b) => Arc::new(b.finish()),
            Self::Time(b) => Arc::new(b.finish()),
            Self::Micros(b, tz) => Arc::new(b.finish().with_timezone_opt(tz.clone())),
            Self::Nanos(b, tz) => Arc::new(b.finish().with_timezone_opt(tz.clone())),
            Self::String(b) => Arc::new(b.finish()),
            Self::LargeString(b) => Arc::new(b.finish()),
            Self::Binary(b) => Arc::new(b.finish()),
            Self::LargeBinary(b) => Arc::new(b.finish()),
            Self::Fixed(b, _) => Arc::new(b.finish()),
            Self::Decimal(b, p, s) => Arc::new(
                b.finish()
                    .with_precision_and_scale(*p, *s)
                    .unwrap_or_else(|_| Decimal128Builder::new().finish()),
            ),
            Self::Unsupported(_) => Arc::new(arrow_array::NullArray::new(0)),
        }
    }
}

/// A big-endian two's complement unscaled value of at most 16 bytes.
fn unscaled(bytes: &[u8]) -> Option<i128> {
    if bytes.len() > 16 {
        return None;
    }
    let negative = bytes.first().is_some_and(|b| b & 0x80 != 0);
    let mut full = [if negative { 0xff } else { 0 }; 16];
    full[16 - bytes.len()..].copy_from_slice(bytes);
    Some(i128::from_be_bytes(full))
}

#[cfg(test)]
mod tests;
