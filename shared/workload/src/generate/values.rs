//! Key values. Every key value derives from a key id ("kid") and the column; each
//! column's mapping is injective in the kid, except boolean (kid parity).

use std::sync::Arc;

use arrow_array::{
    ArrayRef, BooleanArray, Date32Array, Decimal128Array, FixedSizeBinaryArray, Int32Array,
    Int64Array, LargeBinaryArray, StringArray, TimestampMicrosecondArray,
};
use arrow_schema::{DataType, TimeUnit};
use iceberg::spec::Datum;

use crate::rng::mix64;
use eqdv::{Error, Result};

use super::spec::KeyType;
use super::{DECIMAL_PRECISION, DECIMAL_SCALE, FIXED_LEN};

pub(super) fn int_key(kid: u64) -> i32 {
    (kid as i64 - 500) as i32
}

pub(super) fn long_key(kid: u64) -> i64 {
    kid as i64 * 1_000_003 - 1_000_000_000
}

/// A bijection of the key id onto all of i64 (splitmix's finalizer), so distinct ids
/// stay distinct keys and consecutive ids land far apart.
pub(super) fn hashed_long_key(kid: u64) -> i64 {
    mix64(kid) as i64
}

/// Several families: long shared prefixes (> 16 characters), non-ASCII, a family whose
/// first 16 characters are U+10FFFF (no truncated upper bound exists), short ASCII.
pub(super) fn string_key(kid: u64, col: usize) -> String {
    match (kid + col as u64) % 6 {
        0 => format!("tenant/eu-central-1/customer/{kid:010}"),
        1 => format!("Zürich/Bahnhofstraße/Kunde/{kid}"),
        2 => format!("k{kid}"),
        3 => format!("日本語のキー/顧客番号/東京都/{kid}"),
        4 => format!("{}{kid}", "\u{10FFFF}".repeat(17)),
        _ => format!("🔑 κλειδί πελάτη {kid}"),
    }
}

pub(super) fn uuid_key(kid: u64, col: usize) -> uuid::Uuid {
    let high = mix64(kid ^ ((col as u64) << 56));
    uuid::Uuid::from_u128((u128::from(high) << 64) | u128::from(kid))
}

pub(super) fn decimal_key(kid: u64) -> i128 {
    i128::from(kid) * 10_007 - 5_000_000
}

pub(super) fn date_key(kid: u64) -> i32 {
    (kid as i64 - 700_000) as i32
}

pub(super) fn timestamp_key(kid: u64) -> i64 {
    (kid as i64 - 400_000) * 3_600_000_017
}

pub(super) fn timestamptz_key(kid: u64) -> i64 {
    kid as i64 * 999_983 + 1_500_000_000_000_000
}

/// Families told apart by length; one starts with 0xff bytes (increment carries).
pub(super) fn binary_key(kid: u64, col: usize) -> Vec<u8> {
    match (kid + col as u64) % 3 {
        0 => [&[0xffu8; 20][..], &kid.to_be_bytes()].concat(),
        1 => [&b"shared-binary-prefix/"[..], &kid.to_le_bytes()].concat(),
        _ => kid.to_be_bytes().to_vec(),
    }
}

pub(super) fn fixed_key(kid: u64, col: usize) -> Vec<u8> {
    [&[0xab, 0xcd, col as u8, 0][..], &kid.to_be_bytes()].concat()
}

/// The key of a row, equal iff the key values are equal (null equals null).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct KeyCode {
    /// Bit j set: column j is null.
    nulls: u32,
    /// The kid when a non-null, non-boolean column exists, else the boolean value(s).
    value: u64,
}

pub(super) struct Keys {
    pub(super) types: Vec<KeyType>,
    pub(super) seed: u64,
    pub(super) null_keys: bool,
    /// Long keys are `hashed_long_key` (see `WorkloadSpec::hashed_keys`).
    pub(super) hashed: bool,
}

impl Keys {
    fn is_null(&self, kid: u64, col: usize) -> bool {
        self.null_keys
            && mix64(
                self.seed.rotate_left(17) ^ kid.wrapping_mul(0x9e37_79b9) ^ ((col as u64) << 48),
            )
            .is_multiple_of(16)
    }

    pub(super) fn code(&self, kid: u64) -> KeyCode {
        let mut nulls = 0u32;
        let mut exact = false;
        let mut parity = false;
        for (j, t) in self.types.iter().enumerate() {
            if self.is_null(kid, j) {
                nulls |= 1 << j;
            } else if *t == KeyType::Boolean {
                parity = true;
            } else {
                exact = true;
            }
        }
        let value = if exact {
            kid
        } else if parity {
            kid & 1
        } else {
            0
        };
        KeyCode { nulls, value }
    }

    fn long(&self, kid: u64) -> i64 {
        if self.hashed {
            hashed_long_key(kid)
        } else {
            long_key(kid)
        }
    }

    /// Column `col` of key `kid` as a datum (null keys give `None`).
    pub(super) fn datum(&self, kid: u64, col: usize) -> Result<Option<Datum>> {
        if self.is_null(kid, col) {
            return Ok(None);
        }
        Ok(Some(match self.types[col] {
            KeyType::Int => Datum::int(int_key(kid)),
            KeyType::Long => Datum::long(self.long(kid)),
            KeyType::String => Datum::string(string_key(kid, col)),
            KeyType::Uuid => Datum::uuid(uuid_key(kid, col)),
            KeyType::Decimal => Datum::try_from_bytes(
                &decimal_key(kid).to_be_bytes(),
                KeyType::Decimal.iceberg_type(),
            )?,
            KeyType::Date => Datum::date(date_key(kid)),
            KeyType::Timestamp => Datum::timestamp_micros(timestamp_key(kid)),
            KeyType::Timestamptz => Datum::timestamptz_micros(timestamptz_key(kid)),
            KeyType::Binary => Datum::binary(binary_key(kid, col)),
            KeyType::Boolean => Datum::bool(kid & 1 == 1),
            KeyType::Fixed => Datum::fixed(fixed_key(kid, col)),
        }))
    }

    /// Column `col` for the given kids (`None`: a null row), as `data_type`.
    pub(super) fn column(
        &self,
        col: usize,
        kids: &[u64],
        data_type: &DataType,
    ) -> Result<ArrayRef> {
        let vals = || {
            kids.iter()
                .map(move |&k| (!self.is_null(k, col)).then_some(k))
        };
        let array: ArrayRef = match self.types[col] {
            KeyType::Int => Arc::new(Int32Array::from_iter(vals().map(|k| k.map(int_key)))),
            KeyType::Long => Arc::new(Int64Array::from_iter(
                vals().map(|k| k.map(|k| self.long(k))),
            )),
            KeyType::String => Arc::new(StringArray::from_iter(
                vals().map(|k| k.map(|k| string_key(k, col))),
            )),
            KeyType::Uuid => Arc::new(FixedSizeBinaryArray::try_from_sparse_iter_with_size(
                vals().map(|k| k.map(|k| uuid_key(k, col).into_bytes())),
                16,
            )?),
            KeyType::Decimal => Arc::new(
                Decimal128Array::from_iter(vals().map(|k| k.map(decimal_key)))
                    .with_precision_and_scale(DECIMAL_PRECISION as u8, DECIMAL_SCALE as i8)?,
            ),
            KeyType::Date => Arc::new(Date32Array::from_iter(vals().map(|k| k.map(date_key)))),
            KeyType::Timestamp | KeyType::Timestamptz => {
                let f = if self.types[col] == KeyType::Timestamp {
                    timestamp_key
                } else {
                    timestamptz_key
                };
                let tz = match data_type {
                    DataType::Timestamp(TimeUnit::Microsecond, tz) => tz.clone(),
                    _ => None,
                };
                Arc::new(
                    TimestampMicrosecondArray::from_iter(vals().map(|k| k.map(f)))
                        .with_timezone_opt(tz),
                )
            }
            KeyType::Binary => Arc::new(LargeBinaryArray::from_iter(
                vals().map(|k| k.map(|k| binary_key(k, col))),
            )),
            KeyType::Boolean => Arc::new(BooleanArray::from_iter(
                vals().map(|k| k.map(|k| k & 1 == 1)),
            )),
            KeyType::Fixed => Arc::new(FixedSizeBinaryArray::try_from_sparse_iter_with_size(
                vals().map(|k| k.map(|k| fixed_key(k, col))),
                FIXED_LEN as i32,
            )?),
        };
        if array.data_type() != data_type {
            return Err(Error::InvalidInput(format!(
                "column k{col}: the table has type {data_type}, the generator writes {}",
                array.data_type()
            )));
        }
        Ok(array)
    }
}
