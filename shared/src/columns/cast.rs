//! The table's Arrow types and the stored types that convert to them exactly (spec
//! promotions and other spellings of the same values), with a cast that fails rather
//! than turn a value into a null.

use std::sync::Arc;

use arrow_array::{
    ArrayRef, BinaryArray, BooleanArray, Decimal128Array, FixedSizeBinaryArray, Int32Array,
    Int64Array, StringArray,
};
use arrow_cast::CastOptions;
use arrow_schema::{DataType, SchemaRef as ArrowSchemaRef};
use iceberg::spec::{Datum, Literal, NestedFieldRef, PrimitiveLiteral};

use crate::Result;

/// The Arrow schema eqdv reads `fields` into (field ids kept in the metadata). Each
/// field converts on its own: two nested keys are read through the same top-level
/// struct (pruned differently), which one Iceberg schema could not hold twice.
pub fn target_schema(fields: &[NestedFieldRef]) -> Result<ArrowSchemaRef> {
    let mut arrow_fields = Vec::with_capacity(fields.len());
    for field in fields {
        let schema = iceberg::spec::Schema::builder()
            .with_fields(vec![field.clone()])
            .build()?;
        let arrow = iceberg::arrow::schema_to_arrow_schema(&schema)?;
        arrow_fields.extend(arrow.fields().iter().cloned());
    }
    Ok(Arc::new(arrow_schema::Schema::new(arrow_fields)))
}

/// True when values stored as `stored` convert to `wanted` without loss or change:
/// the same type, a promotion the Iceberg spec allows (int to long, float to double,
/// decimal widening at the same scale), a narrower integer or a coarser timestamp unit
/// that files from other writers store (tinyint, TIMESTAMP_MILLIS), or another Arrow
/// spelling of the same values (string and binary layouts, a timestamp's time zone name,
/// dictionary encoding). Nested columns (never keys) convert as Arrow casts them, field
/// by field; the cast is strict, so a value that does not fit fails the read.
pub fn converts_exactly(stored: &DataType, wanted: &DataType) -> bool {
    use DataType::*;
    match (stored, wanted) {
        (a, b) if a == b => true,
        (Dictionary(_, values), b) => converts_exactly(values, b),
        (Int8 | Int16 | UInt8 | UInt16, Int32 | Int64) | (Int32 | UInt32, Int64) => true,
        (Float16 | Float32, Float64) => true,
        (Decimal128(p1, s1), Decimal128(p2, s2)) => s1 == s2 && p1 <= p2,
        (Utf8 | LargeUtf8 | Utf8View, Utf8 | LargeUtf8) => true,
        (Binary | LargeBinary | BinaryView, Binary | LargeBinary) => true,
        (Timestamp(u1, tz1), Timestamp(u2, tz2)) => {
            unit_rank(u1) <= unit_rank(u2) && tz1.is_some() == tz2.is_some()
        }
        (Struct(_), Struct(_))
        | (List(_) | LargeList(_), List(_) | LargeList(_))
        | (Map(..), Map(..)) => arrow_cast::can_cast_types(stored, wanted),
        _ => false,
    }
}

/// Finer units rank higher: converting to a finer unit multiplies, exactly.
fn unit_rank(unit: &arrow_schema::TimeUnit) -> u8 {
    match unit {
        arrow_schema::TimeUnit::Second => 0,
        arrow_schema::TimeUnit::Millisecond => 1,
        arrow_schema::TimeUnit::Microsecond => 2,
        arrow_schema::TimeUnit::Nanosecond => 3,
    }
}

/// A cast that fails rather than turning a value it cannot convert into a null.
pub(crate) fn strict_cast(
    col: &ArrayRef,
    to: &DataType,
) -> std::result::Result<ArrayRef, arrow_schema::ArrowError> {
    let options = CastOptions {
        safe: false,
        ..Default::default()
    };
    arrow_cast::cast_with_options(col, to, &options)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_conversions() {
        use DataType::*;
        assert!(converts_exactly(&Int32, &Int64));
        assert!(!converts_exactly(&Int64, &Int32));
        assert!(converts_exactly(&Decimal128(9, 2), &Decimal128(18, 2)));
        assert!(!converts_exactly(&Decimal128(9, 2), &Decimal128(18, 3)));
        assert!(!converts_exactly(&Decimal128(18, 2), &Decimal128(9, 2)));
        assert!(converts_exactly(
            &Dictionary(Box::new(Int32), Box::new(Utf8)),
            &Utf8
        ));
        assert!(!converts_exactly(&Utf8, &Int64));
        assert!(!converts_exactly(&Int32, &Date32));
        let utc = Some("UTC".into());
        assert!(converts_exactly(
            &Timestamp(arrow_schema::TimeUnit::Microsecond, utc.clone()),
            &Timestamp(arrow_schema::TimeUnit::Microsecond, Some("+00:00".into()))
        ));
        assert!(!converts_exactly(
            &Timestamp(arrow_schema::TimeUnit::Microsecond, None),
            &Timestamp(arrow_schema::TimeUnit::Microsecond, utc.clone())
        ));
        // TIMESTAMP_MILLIS from another writer scales up exactly; nanos would truncate.
        assert!(converts_exactly(
            &Timestamp(arrow_schema::TimeUnit::Millisecond, utc.clone()),
            &Timestamp(arrow_schema::TimeUnit::Microsecond, utc.clone())
        ));
        assert!(!converts_exactly(
            &Timestamp(arrow_schema::TimeUnit::Nanosecond, utc.clone()),
            &Timestamp(arrow_schema::TimeUnit::Microsecond, utc)
        ));
        assert!(converts_exactly(&Int8, &Int32) && converts_exactly(&UInt32, &Int64));
        assert!(!converts_exactly(&UInt32, &Int32) && !converts_exactly(&UInt64, &Int64));
    }
}
