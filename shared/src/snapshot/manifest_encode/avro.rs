//! The Avro binary encoding of a manifest entry's fields, as apache-avro writes them:
//! zigzag varint longs, length-prefixed bytes, union branches for optional values, and
//! each partition value in the Avro type iceberg's manifest schema gives its field.

use iceberg::spec::{DataFile, Datum, PrimitiveLiteral, PrimitiveType, Type};

use crate::{Error, Result};

/// `v` as the Avro long a manifest stores, or an error naming the file and `what`.
pub(super) fn to_i64(file: &DataFile, what: &str, v: u64) -> Result<i64> {
    i64::try_from(v).map_err(|_| {
        Error::file(
            file.file_path(),
            format!("its {what} {v} does not fit a long"),
            "invalid manifest entry",
        )
    })
}

/// The partition field types written here (all but UUID: see the module's documentation).
pub(super) fn encodes(ty: &PrimitiveType) -> bool {
    use PrimitiveType as P;
    matches!(
        ty,
        P::Boolean
            | P::Int
            | P::Long
            | P::Float
            | P::Double
            | P::Date
            | P::Time
            | P::Timestamp
            | P::Timestamptz
            | P::TimestampNs
            | P::TimestamptzNs
            | P::String
            | P::Binary
            | P::Fixed(_)
            | P::Decimal { .. }
    )
}

/// The Datum of a partition value, for its summary (as iceberg's writer builds it).
pub(super) fn datum(
    ty: &PrimitiveType,
    literal: &PrimitiveLiteral,
) -> std::result::Result<Datum, String> {
    use PrimitiveLiteral as L;
    use PrimitiveType as P;
    Ok(match (ty, literal) {
        (P::Boolean, L::Boolean(v)) => Datum::bool(*v),
        (P::Int, L::Int(v)) => Datum::int(*v),
        (P::Long, L::Long(v)) => Datum::long(*v),
        (P::Float, L::Float(v)) => Datum::float(v.0),
        (P::Double, L::Double(v)) => Datum::double(v.0),
        (P::Date, L::Int(v)) => Datum::date(*v),
        // A summary keeps only the bound's bytes: a time's are its long's (and iceberg's
        // writer does not check that the value lies within a day either).
        (P::Time, L::Long(v)) => Datum::long(*v),
        (P::Timestamp, L::Long(v)) => Datum::timestamp_micros(*v),
        (P::Timestamptz, L::Long(v)) => Datum::timestamptz_micros(*v),
        (P::TimestampNs, L::Long(v)) => Datum::timestamp_nanos(*v),
        (P::TimestamptzNs, L::Long(v)) => Datum::timestamptz_nanos(*v),
        (P::String, L::String(v)) => Datum::string(v),
        (P::Binary, L::Binary(v)) => Datum::binary(v.iter().copied()),
        // The Datum iceberg's writer builds (its type, not the value's): from the bytes
        // that `put_primitive` has checked.
        (P::Fixed(_), L::Binary(v)) => {
            Datum::try_from_bytes(v, ty.clone()).map_err(|e| e.to_string())?
        }
        (P::Decimal { .. }, L::Int128(v)) => {
            Datum::try_from_bytes(&v.to_be_bytes(), ty.clone()).map_err(|e| e.to_string())?
        }
        _ => return Err(format!("{literal:?} is not a value of type {ty}")),
    })
}

pub(super) fn put_primitive(
    out: &mut Vec<u8>,
    ty: &PrimitiveType,
    literal: &PrimitiveLiteral,
) -> std::result::Result<(), String> {
    use PrimitiveLiteral as L;
    use PrimitiveType as P;
    match (ty, literal) {
        (P::Boolean, L::Boolean(v)) => out.push(u8::from(*v)),
        (P::Int | P::Date, L::Int(v)) => put_long(out, i64::from(*v)),
        (
            P::Long | P::Time | P::Timestamp | P::Timestamptz | P::TimestampNs | P::TimestamptzNs,
            L::Long(v),
        ) => put_long(out, *v),
        (P::Float, L::Float(v)) => out.extend_from_slice(&v.0.to_le_bytes()),
        (P::Double, L::Double(v)) => out.extend_from_slice(&v.0.to_le_bytes()),
        (P::String, L::String(v)) => put_bytes(out, v.as_bytes()),
        (P::Binary, L::Binary(v)) => put_bytes(out, v),
        // An Avro fixed has no length: the value must be the type's.
        (P::Fixed(len), L::Binary(v)) => {
            if u64::try_from(v.len()).ok() != Some(*len) {
                return Err(format!("a value of {} bytes for type {ty}", v.len()));
            }
            out.extend_from_slice(v);
        }
        // The unscaled value, two's complement big-endian, in the fixed of the fewest
        // bytes the precision needs.
        (P::Decimal { precision, .. }, L::Int128(v)) => {
            let bytes = Type::decimal_required_bytes(*precision).map_err(|e| e.to_string())?;
            if !decimal_fits(*v, bytes) {
                return Err(format!(
                    "decimal partition value {v} does not fit its {bytes}-byte fixed"
                ));
            }
            out.extend_from_slice(&v.to_be_bytes()[16 - bytes as usize..]);
        }
        _ => return Err(format!("{literal:?} is not a value of type {ty}")),
    }
    Ok(())
}

/// Whether `v` fits a two's complement integer of `bytes` bytes.
pub(super) fn decimal_fits(v: i128, bytes: u32) -> bool {
    let bits = bytes.saturating_mul(8);
    bits >= 128 || {
        let limit = 1i128 << (bits - 1);
        (-limit..limit).contains(&v)
    }
}

/// Avro's long: zig-zag, then 7 bits a byte, least significant first.
pub(super) fn put_long(out: &mut Vec<u8>, v: i64) {
    let mut n = ((v << 1) ^ (v >> 63)) as u64;
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

pub(super) fn put_optional_long(out: &mut Vec<u8>, v: Option<i64>) {
    match v {
        None => put_long(out, 0),
        Some(v) => {
            put_long(out, 1);
            put_long(out, v);
        }
    }
}

/// A nullable array of longs (`split_offsets`, `equality_ids`): the union's branch, then
/// the array as one block.
pub(super) fn put_optional_longs<I>(out: &mut Vec<u8>, values: Option<I>)
where
    I: ExactSizeIterator<Item = i64>,
{
    match values {
        None => put_long(out, 0),
        Some(values) => {
            put_long(out, 1);
            put_block_len(out, values.len());
            for value in values {
                put_long(out, value);
            }
            put_long(out, 0);
        }
    }
}

/// An array's item count or a block's length (a `usize` always fits an Avro long here).
pub(super) fn put_block_len(out: &mut Vec<u8>, n: usize) {
    if n > 0 {
        put_long(out, n as i64);
    }
}

pub(super) fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_long(out, bytes.len() as i64);
    out.extend_from_slice(bytes);
}
