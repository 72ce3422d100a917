//! The canonical row form that every reader in the test suite is compared in (this
//! reader, iceberg-rust's scan, PyIceberg, DuckDB and Java print the same text).
//!
//!
//! A row is a compact JSON array (serde_json's `to_string`: no spaces, non-ASCII
//! characters as raw UTF-8, only `"`, `\`, and control characters escaped, the latter
//! as `\n`/`\t`/... or lowercase `\u00xx`) with one element per column in the order of
//! the table's current schema:
//!
//! | type                    | JSON                                                   |
//! |-------------------------|--------------------------------------------------------|
//! | null (any type)         | `null`                                                 |
//! | boolean                 | `true` / `false`                                       |
//! | int, long               | number                                                 |
//! | float, double           | number; NaN and infinities as `"NaN"`, `"Infinity"`, `"-Infinity"` |
//! | string                  | string                                                 |
//! | binary, fixed           | lowercase hex string                                   |
//! | uuid                    | lowercase hyphenated string (`8-4-4-4-12`)             |
//! | decimal(p, s)           | string with exactly `s` fractional digits (`"-0.050"`) |
//! | date                    | days since 1970-01-01 (number)                         |
//! | time                    | microseconds since midnight (number)                   |
//! | timestamp, timestamptz  | microseconds since the epoch (number)                  |
//! | timestamp_ns, timestamptz_ns | nanoseconds since the epoch (number)              |
//!
//! A table's rows are a list of such strings sorted by byte order (which for UTF-8 is
//! code point order, the order Python's `sorted` gives). In Python the same text comes
//! from `json.dumps(values, separators=(",", ":"), ensure_ascii=False)`.

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Decimal128Type, Float32Type, Float64Type, Int8Type, Int16Type, Int32Type,
    Int64Type, Time32MillisecondType, Time32SecondType, Time64MicrosecondType,
    Time64NanosecondType, TimestampMicrosecondType, TimestampMillisecondType,
    TimestampNanosecondType, TimestampSecondType, UInt8Type, UInt16Type, UInt32Type, UInt64Type,
};
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, TimeUnit};
use iceberg::spec::{PrimitiveType, Schema, Type};
use serde_json::Value;

use eqdv::{Error, Result};

/// Arrow field metadata key naming an extension type.
pub const ARROW_EXTENSION_NAME_KEY: &str = "ARROW:extension:name";
/// The canonical Arrow extension name for UUIDs (stored as `FixedSizeBinary(16)`).
pub const ARROW_UUID_EXTENSION: &str = "arrow.uuid";

/// Rows of `batches` in canonical form, sorted.
///
/// Column types come from the Arrow schema. `FixedSizeBinary(16)` columns are UUIDs
/// only when their field carries the `arrow.uuid` extension name (as the batches of
/// [`read_live_rows`] do); use [`canonical_rows_for_schema`] for batches from readers
/// that do not mark UUIDs.
pub fn canonical_rows(batches: &[RecordBatch]) -> Result<Vec<String>> {
    canonical_rows_inner(batches, None)
}

/// Like [`canonical_rows`], but the i-th column's Iceberg type is the i-th field of
/// `schema` (which tells UUIDs from `fixed(16)`).
pub fn canonical_rows_for_schema(schema: &Schema, batches: &[RecordBatch]) -> Result<Vec<String>> {
    let uuid: Vec<bool> = schema
        .as_struct()
        .fields()
        .iter()
        .map(|f| matches!(*f.field_type, Type::Primitive(PrimitiveType::Uuid)))
        .collect();
    canonical_rows_inner(batches, Some(&uuid))
}

fn canonical_rows_inner(
    batches: &[RecordBatch],
    uuid_hint: Option<&[bool]>,
) -> Result<Vec<String>> {
    let mut rows = Vec::with_capacity(batches.iter().map(|b| b.num_rows()).sum());
    for batch in batches {
        let schema = batch.schema();
        if let Some(hint) = uuid_hint
            && hint.len() != batch.num_columns()
        {
            return Err(Error::InvalidInput(format!(
                "a batch has {} columns but the schema has {} fields",
                batch.num_columns(),
                hint.len()
            )));
        }
        let mut columns = Vec::with_capacity(batch.num_columns());
        for (i, column) in batch.columns().iter().enumerate() {
            let uuid = match uuid_hint {
                Some(hint) => hint[i],
                None => is_uuid_field(schema.field(i)),
            };
            columns.push(column_values(column, uuid)?.into_iter());
        }
        for _ in 0..batch.num_rows() {
            let row: Vec<Value> = columns
                .iter_mut()
                .map(|c| c.next().unwrap_or(Value::Null))
                .collect();
            rows.push(Value::Array(row).to_string());
        }
    }
    rows.sort_unstable();
    Ok(rows)
}

fn is_uuid_field(field: &Field) -> bool {
    matches!(field.data_type(), DataType::FixedSizeBinary(16))
        && field
            .metadata()
            .get(ARROW_EXTENSION_NAME_KEY)
            .map(String::as_str)
            == Some(ARROW_UUID_EXTENSION)
}

/// The canonical JSON value of every element of `array`.
pub(crate) fn column_values(array: &ArrayRef, uuid: bool) -> Result<Vec<Value>> {
    let len = array.len();
    let mut out = Vec::with_capacity(len);
    macro_rules! each {
        ($arr:expr, |$v:ident| $conv:expr) => {{
            let arr = $arr;
            for i in 0..len {
                if arr.is_null(i) {
                    out.push(Value::Null);
                } else {
                    let $v = arr.value(i);
                    out.push($conv);
                }
            }
        }};
    }
    match array.data_type() {
        DataType::Null => out.resize(len, Value::Null),
        DataType::Boolean => each!(array.as_boolean(), |v| Value::Bool(v)),
        DataType::Int8 => each!(array.as_primitive::<Int8Type>(), |v| Value::from(v)),
        DataType::Int16 => each!(array.as_primitive::<Int16Type>(), |v| Value::from(v)),
        DataType::Int32 => each!(array.as_primitive::<Int32Type>(), |v| Value::from(v)),
        DataType::Int64 => each!(array.as_primitive::<Int64Type>(), |v| Value::from(v)),
        DataType::UInt8 => each!(array.as_primitive::<UInt8Type>(), |v| Value::from(v)),
        DataType::UInt16 => each!(array.as_primitive::<UInt16Type>(), |v| Value::from(v)),
        DataType::UInt32 => each!(array.as_primitive::<UInt32Type>(), |v| Value::from(v)),
        DataType::UInt64 => each!(array.as_primitive::<UInt64Type>(), |v| Value::from(v)),
        DataType::Float32 => each!(array.as_primitive::<Float32Type>(), |v| float_value(
            f64::from(v)
        )),
        DataType::Float64 => each!(array.as_primitive::<Float64Type>(), |v| float_value(v)),
        DataType::Utf8 => each!(array.as_string::<i32>(), |v| Value::from(v)),
        DataType::LargeUtf8 => each!(array.as_string::<i64>(), |v| Value::from(v)),
        DataType::Utf8View => each!(array.as_string_view(), |v| Value::from(v)),
        DataType::Binary => each!(array.as_binary::<i32>(), |v| Value::from(hex(v))),
        DataType::LargeBinary => each!(array.as_binary::<i64>(), |v| Value::from(hex(v))),
        DataType::BinaryView => each!(array.as_binary_view(), |v| Value::from(hex(v))),
        DataType::FixedSizeBinary(16) if uuid => {
            each!(array.as_fixed_size_binary(), |v| Value::from(uuid_string(
                v
            )?))
        }
        DataType::FixedSizeBinary(_) => {
            each!(array.as_fixed_size_binary(), |v| Value::from(hex(v)))
        }
        DataType::Decimal128(_, scale) => {
            let scale = *scale;
            each!(array.as_primitive::<Decimal128Type>(), |v| Value::from(
                decimal_string(v, scale)
            ))
        }
        DataType::Date32 => each!(array.as_primitive::<Date32Type>(), |v| Value::from(v)),
        DataType::Time32(TimeUnit::Second) => {
            each!(array.as_primitive::<Time32SecondType>(), |v| Value::from(
                i64::from(v) * 1_000_000
            ))
        }
        DataType::Time32(TimeUnit::Millisecond) => {
            each!(array.as_primitive::<Time32MillisecondType>(), |v| {
                Value::from(i64::from(v) * 1_000)
            })
        }
        DataType::Time64(TimeUnit::Microsecond) => {
            each!(array.as_primitive::<Time64MicrosecondType>(), |v| {
                Value::from(v)
            })
        }
        DataType::Time64(TimeUnit::Nanosecond) => {
            // A time has no nanosecond Iceberg type: truncate to the spec's micros.
            each!(array.as_primitive::<Time64NanosecondType>(), |v| {
                Value::from(v.div_euclid(1_000))
            })
        }
        DataType::Timestamp(TimeUnit::Second, _) => {
            each!(
                array.as_primitive::<TimestampSecondType>(),
                |v| Value::from(v.saturating_mul(1_000_000))
            )
        }
        DataType::Timestamp(TimeUnit::Millisecond, _) => {
            each!(array.as_primitive::<TimestampMillisecondType>(), |v| {
                Value::from(v.saturating_mul(1_000))
            })
        }
        DataType::Timestamp(TimeUnit::Microsecond, _) => {
            each!(array.as_primitive::<TimestampMicrosecondType>(), |v| {
                Value::from(v)
            })
        }
        // Nanosecond timestamps are Iceberg's timestamp_ns types, whose unit is nanos.
        DataType::Timestamp(TimeUnit::Nanosecond, _) => {
            each!(array.as_primitive::<TimestampNanosecondType>(), |v| {
                Value::from(v)
            })
        }
        // Encodings that only change the layout: decode to the value type first.
        DataType::Dictionary(_, value_type) => {
            let decoded = arrow_cast::cast(array, value_type)?;
            return column_values(&decoded, uuid);
        }
        DataType::RunEndEncoded(_, values) => {
            let decoded = arrow_cast::cast(array, values.data_type())?;
            return column_values(&decoded, uuid);
        }
        other => {
            return Err(Error::InvalidInput(format!(
                "no canonical form for Arrow type {other}"
            )));
        }
    }
    Ok(out)
}

fn float_value(v: f64) -> Value {
    if v.is_nan() {
        Value::from("NaN")
    } else if v.is_infinite() {
        Value::from(if v > 0.0 { "Infinity" } else { "-Infinity" })
    } else {
        Value::from(v)
    }
}

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 0x0f)] as char);
    }
    s
}

fn uuid_string(bytes: &[u8]) -> Result<String> {
    uuid::Uuid::from_slice(bytes)
        .map(|u| u.hyphenated().to_string())
        .map_err(|e| Error::InvalidInput(format!("invalid uuid value: {e}")))
}

/// `unscaled * 10^-scale` with exactly `scale` fractional digits (`-5`, scale 3 -> `-0.005`).
pub fn decimal_string(unscaled: i128, scale: i8) -> String {
    let digits = unscaled.unsigned_abs().to_string();
    let sign = if unscaled < 0 { "-" } else { "" };
    if scale <= 0 {
        // Negative scales never occur in Iceberg; render the integer value they mean.
        let zeros = if unscaled == 0 {
            String::new()
        } else {
            "0".repeat(usize::from(scale.unsigned_abs()))
        };
        return format!("{sign}{digits}{zeros}");
    }
    let scale = usize::from(scale.unsigned_abs());
    let padded = if digits.len() <= scale {
        format!("{}{digits}", "0".repeat(scale + 1 - digits.len()))
    } else {
        digits
    };
    let (int, frac) = padded.split_at(padded.len() - scale);
    format!("{sign}{int}.{frac}")
}

/// The key of every row of `columns` as one canonical string (JSON array), so that two
/// rows have equal keys iff their strings are equal; null equals null.
pub(super) fn row_keys(columns: &[ArrayRef], rows: usize) -> Result<Vec<String>> {
    let mut values = Vec::with_capacity(columns.len());
    for c in columns {
        values.push(column_values(c, false)?.into_iter());
    }
    Ok((0..rows)
        .map(|_| {
            Value::Array(
                values
                    .iter_mut()
                    .map(|v| v.next().unwrap_or(Value::Null))
                    .collect(),
            )
            .to_string()
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_schema::Schema as ArrowSchema;

    use super::*;
    use arrow_array::{
        Decimal128Array, FixedSizeBinaryArray, Int64Array, LargeBinaryArray, StringArray,
        TimestampMicrosecondArray,
    };

    #[test]
    fn decimals_keep_their_scale() {
        assert_eq!(decimal_string(12345, 2), "123.45");
        assert_eq!(decimal_string(-5, 3), "-0.005");
        assert_eq!(decimal_string(0, 2), "0.00");
        assert_eq!(decimal_string(7, 0), "7");
        assert_eq!(decimal_string(-120, 1), "-12.0");
        assert_eq!(decimal_string(i128::MIN, 5).len(), 41);
    }

    #[test]
    fn canonical_rows_cover_the_types() {
        let uuid = uuid::Uuid::from_u128(0x0123_4567_89ab_cdef_0011_2233_4455_6677);
        let fields = vec![
            Field::new("l", DataType::Int64, true),
            Field::new("s", DataType::Utf8, true),
            Field::new("b", DataType::LargeBinary, true),
            Field::new("u", DataType::FixedSizeBinary(16), true).with_metadata(
                [(
                    ARROW_EXTENSION_NAME_KEY.to_string(),
                    ARROW_UUID_EXTENSION.to_string(),
                )]
                .into(),
            ),
            Field::new("d", DataType::Decimal128(10, 2), true),
            Field::new(
                "t",
                DataType::Timestamp(TimeUnit::Microsecond, Some("+00:00".into())),
                true,
            ),
        ];
        let batch = RecordBatch::try_new(
            Arc::new(ArrowSchema::new(fields)),
            vec![
                Arc::new(Int64Array::from(vec![Some(2), None])),
                Arc::new(StringArray::from(vec![Some("zürich \"q\""), None])),
                Arc::new(LargeBinaryArray::from(vec![Some(&[0u8, 0xff][..]), None])),
                Arc::new(
                    FixedSizeBinaryArray::try_from_sparse_iter_with_size(
                        vec![Some(uuid.into_bytes()), None].into_iter(),
                        16,
                    )
                    .unwrap(),
                ),
                Arc::new(
                    Decimal128Array::from(vec![Some(-5), None])
                        .with_precision_and_scale(10, 2)
                        .unwrap(),
                ),
                Arc::new(
                    TimestampMicrosecondArray::from(vec![Some(-1), None]).with_timezone("+00:00"),
                ),
            ],
        )
        .unwrap();
        let rows = canonical_rows(&[batch]).unwrap();
        assert_eq!(
            rows,
            vec![
                r#"[2,"zürich \"q\"","00ff","01234567-89ab-cdef-0011-223344556677","-0.05",-1]"#,
                "[null,null,null,null,null,null]",
            ]
        );
    }
}
