//! The table's Arrow types and the stored types that convert to them exactly (spec
//! promotions and other spellings of the same values), with a cast that fails rather
//! than turn a value into a null.

use std::sync::Arc;

use arrow_array::ArrayRef;
use arrow_cast::CastOptions;
use arrow_schema::{DataType, SchemaRef as ArrowSchemaRef};
use iceberg::spec::NestedFieldRef;

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
