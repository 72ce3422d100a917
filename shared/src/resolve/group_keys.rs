//! The loaded keys of one delete group: the key set (with the sequence number each key
//! was deleted at), the per-column sorted values that pruning compares with statistics,
//! and the caches of hashes the bloom filters and the key index are probed with. Loading
//! them is `key_set`'s; what pruning asks of them is `prune`'s and `bloom`'s.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use arrow_array::Array;
use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_schema::DataType;
use parquet::basic::Type as Physical;

use super::key_hash::{KeyHashBuilder, mix64};
use super::long_keys::LongKeys;
use super::string_keys::StringKeys;
use crate::keys::KeyColumns;
use crate::plan::DeleteGroup;
use crate::{Error, Result};

/// One key column's distinct non-null values in order-preserving encoding (arrow-row
/// bytes, which compare as the values do), sorted, packed in one buffer: two
/// allocations per column rather than one per key.
#[derive(Default)]
pub(super) struct ColumnValues {
    bytes: Vec<u8>,
    /// End offset of each value in `bytes`.
    ends: Vec<usize>,
    pub(super) has_null: bool,
}

impl ColumnValues {
    /// No values yet, for each of `columns` key columns.
    pub(super) fn empty_columns(columns: usize) -> Vec<Self> {
        (0..columns).map(|_| Self::default()).collect()
    }

    pub(super) fn len(&self) -> usize {
        self.ends.len()
    }

    /// Bytes the encoded values take.
    pub(super) fn byte_len(&self) -> usize {
        self.bytes.len()
    }

    pub(super) fn value(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.bytes[start..self.ends[i]]
    }

    pub(super) fn push(&mut self, value: &[u8]) {
        self.bytes.extend_from_slice(value);
        self.ends.push(self.bytes.len());
    }

    /// The same values sorted, without duplicates.
    pub(super) fn sorted(self) -> Self {
        let mut order: Vec<usize> = (0..self.len()).collect();
        order.sort_unstable_by(|&a, &b| self.value(a).cmp(self.value(b)));
        order.dedup_by(|a, b| self.value(*a) == self.value(*b));
        let mut out = ColumnValues {
            bytes: Vec::with_capacity(order.iter().map(|&i| self.value(i).len()).sum()),
            ends: Vec::with_capacity(order.len()),
            has_null: self.has_null,
        };
        for i in order {
            out.push(self.value(i));
        }
        out
    }

    /// Is some value within `[lower, upper]` (either end may be open)? Needs `sorted`.
    pub(super) fn any_within(&self, lower: Option<&[u8]>, upper: Option<&[u8]>) -> bool {
        let start = lower.map_or(0, |lo| self.partition_point(|v| v < lo));
        if start >= self.len() {
            return false;
        }
        upper.is_none_or(|hi| self.value(start) <= hi)
    }

    /// The indexes of the values within `[lower, upper]`. Needs `sorted`.
    pub(super) fn range_within(&self, lower: &[u8], upper: &[u8]) -> std::ops::Range<usize> {
        let start = self.partition_point(|v| v < lower);
        let end = self.partition_point(|v| v <= upper);
        start..end.max(start)
    }

    /// The first index whose value fails `before` (which must hold for a prefix).
    fn partition_point(&self, before: impl Fn(&[u8]) -> bool) -> usize {
        let (mut a, mut b) = (0, self.len());
        while a < b {
            let mid = a + (b - a) / 2;
            if before(self.value(mid)) {
                a = mid + 1;
            } else {
                b = mid;
            }
        }
        a
    }
}

/// The deleted keys of a group with, per key, the highest sequence number of a delete
/// file holding it.
pub(super) enum KeySet {
    /// Any key, by its arrow-row encoding.
    Rows(HashMap<Box<[u8]>, i64, KeyHashBuilder>),
    /// A single `long` column (the common CDC key): the values themselves, compact, so
    /// the scan probes without encoding rows.
    Long(LongKeys),
    /// A single `string` column: the values' bytes, packed, probed as the data column
    /// holds them (no row encoding either).
    Str(StringKeys),
}

impl KeySet {
    pub(super) fn len(&self) -> usize {
        match self {
            KeySet::Rows(keys) => keys.len(),
            KeySet::Long(keys) => keys.len(),
            KeySet::Str(keys) => keys.len(),
        }
    }
}

/// Which share of the keys a pass holds: those whose hash is `index` modulo `passes`.
#[derive(Clone, Copy, Debug)]
pub(super) struct KeyPass {
    pub(super) index: u64,
    pub(super) passes: u64,
}

impl KeyPass {
    pub(super) fn owns(&self, key: &[u8]) -> bool {
        if self.passes <= 1 {
            return true;
        }
        // FNV-1a: stable and cheap; only needs to spread keys evenly.
        let mut hash: u64 = 0xcbf29ce484222325;
        for b in key {
            hash ^= u64::from(*b);
            hash = hash.wrapping_mul(0x100000001b3);
        }
        hash % self.passes == self.index
    }

    /// The same for a long key (null in the first pass): any even split will do, as
    /// only the loading asks which pass holds a key.
    pub(super) fn owns_long(&self, value: Option<i64>) -> bool {
        self.passes <= 1 || value.map_or(0, |v| mix64(v as u64) % self.passes) == self.index
    }

    /// The same for a string key's bytes (null in the first pass).
    pub(super) fn owns_string(&self, value: Option<&[u8]>) -> bool {
        match value {
            _ if self.passes <= 1 => true,
            Some(bytes) => self.owns(bytes),
            None => self.index == 0,
        }
    }
}

/// The loaded keys of one group.
pub(super) struct GroupKeys {
    pub(super) group: DeleteGroup,
    pub(super) key_columns: KeyColumns,
    pub(super) keys: KeySet,
    /// Per key column, its sorted values for pruning; empty for `KeySet::Long`, whose
    /// sorted keys are the values (see the `column_*` methods).
    pub(super) columns: Vec<ColumnValues>,
    /// The values' bloom-filter hashes, computed on first use.
    pub(super) bloom_hashes: BloomHashes,
    /// The keys' key-index hashes (every key read, this pass's or not: a hash looked up
    /// in vain costs nothing but the lookup), when the group has an index to ask.
    pub(super) index_hashes: Vec<i64>,
}

impl GroupKeys {
    /// How many non-null deleted values key column `i` has (what `column_values`
    /// ranges index).
    pub(super) fn column_len(&self, i: usize) -> usize {
        match &self.keys {
            KeySet::Long(keys) => keys.value_count(),
            KeySet::Rows(_) | KeySet::Str(_) => self.columns[i].len(),
        }
    }

    /// The indexes of key column `i`'s deleted values within `[lower, upper]`.
    pub(super) fn column_range_within(
        &self,
        i: usize,
        lower: &[u8],
        upper: &[u8],
    ) -> Result<std::ops::Range<usize>> {
        match &self.keys {
            KeySet::Long(keys) => Ok(keys.range_within(
                self.long_bound(i, Some(lower))?,
                self.long_bound(i, Some(upper))?,
            )),
            KeySet::Rows(_) | KeySet::Str(_) => Ok(self.columns[i].range_within(lower, upper)),
        }
    }

    /// Key column `i`'s deleted values at `range` (from `column_range_within`) as an
    /// array of the column's type.
    pub(super) fn column_values(
        &self,
        i: usize,
        range: std::ops::Range<usize>,
    ) -> Result<arrow_array::ArrayRef> {
        match &self.keys {
            KeySet::Long(keys) => Ok(std::sync::Arc::new(
                arrow_array::Int64Array::from_iter_values(keys.values(range)),
            )),
            KeySet::Rows(_) | KeySet::Str(_) => {
                let values = &self.columns[i];
                self.key_columns
                    .decode_column(i, range.map(|j| values.value(j)))
            }
        }
    }

    /// An encoded bound of the long key column as its value (`None` stays open).
    pub(super) fn long_bound(&self, i: usize, bound: Option<&[u8]>) -> Result<Option<i64>> {
        let Some(bytes) = bound else {
            return Ok(None);
        };
        let decoded = self.key_columns.decode_column(i, std::iter::once(bytes))?;
        let values = decoded.as_primitive_opt::<Int64Type>().ok_or_else(|| {
            Error::InvalidInput("a long key bound decoded to another type".into())
        })?;
        // A null bound bounds nothing.
        Ok((values.len() == 1 && values.is_valid(0)).then(|| values.value(0)))
    }
}

/// Most deleted values of a key column whose hashes are kept (8 bytes each): past it,
/// the values in a row group's range are hashed when probed instead, so that bloom
/// filters never hold a large key set's memory budget hostage.
pub(super) const MAX_CACHED_HASHES: usize = 2_000_000;

/// The PLAIN encodings bloom filters hash, as far as this maps them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Plain {
    Int32,
    Int64,
    ByteArray,
    FixedLenByteArray,
}

impl Plain {
    pub(super) fn of(data_type: &DataType, physical: Physical) -> Option<Plain> {
        use arrow_schema::TimeUnit;
        match (data_type, physical) {
            (DataType::Int64 | DataType::Timestamp(TimeUnit::Microsecond, _), Physical::INT64) => {
                Some(Plain::Int64)
            }
            (DataType::Int32 | DataType::Date32, Physical::INT32) => Some(Plain::Int32),
            (DataType::Utf8 | DataType::Binary, Physical::BYTE_ARRAY) => Some(Plain::ByteArray),
            // uuid and fixed[L]: the bytes themselves (a decimal stored this way is not,
            // and never reaches here: its Arrow type is Decimal128).
            (DataType::FixedSizeBinary(_), Physical::FIXED_LEN_BYTE_ARRAY) => {
                Some(Plain::FixedLenByteArray)
            }
            _ => None,
        }
    }
}

/// Per key column and encoding, the xxHash64 of every sorted deleted value (what a
/// bloom filter is probed with), built on a column's first probe.
#[derive(Default)]
pub(super) struct BloomHashes(pub(super) Mutex<HashMap<(usize, Plain), Option<Hashes>>>);

/// One column's hashes, in the order of its sorted values.
pub(super) type Hashes = Arc<[u64]>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn column_values_sort_dedup_and_answer_ranges() {
        let mut values = ColumnValues::default();
        for v in [&b"m"[..], b"c", b"x", b"c", b"", b"mm"] {
            values.push(v);
        }
        let values = values.sorted();
        let all: Vec<&[u8]> = (0..values.len()).map(|i| values.value(i)).collect();
        assert_eq!(all, vec![&b""[..], b"c", b"m", b"mm", b"x"]);
        assert!(values.any_within(Some(b"d"), Some(b"m")));
        assert!(values.any_within(Some(b"mm"), Some(b"mm")));
        assert!(!values.any_within(Some(b"d"), Some(b"l")));
        assert!(!values.any_within(Some(b"y"), None));
        assert!(values.any_within(None, Some(b"")));
        assert!(values.any_within(Some(b"n"), None));
        assert!(!ColumnValues::default().any_within(None, None));
        // The indexes within a closed range (what bloom filters are probed with).
        assert_eq!(values.range_within(b"c", b"mm"), 1..4);
        assert_eq!(values.range_within(b"d", b"m"), 2..3);
        assert_eq!(values.range_within(b"d", b"l"), 2..2);
        assert_eq!(values.range_within(b"", b"zz"), 0..5);
        assert!(values.range_within(b"y", b"z").is_empty());
        assert!(values.range_within(b"x", b"a").is_empty());
    }
}
