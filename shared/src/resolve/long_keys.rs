//! The deleted keys of a group whose key is one `long` column (the common CDC key), in
//! about 14 bytes a key instead of a hash map's 40 to 75: the distinct values sorted in
//! one packed array, each with the index of its highest delete sequence number, a
//! directory over the value range that narrows a lookup to a few entries, and a bit
//! filter that rejects most absent values before the array is touched. The sorted values
//! double as the column's values for pruning, so nothing else holds them.

use std::ops::Range;

use super::key_hash::mix64;

/// One deleted value and the index (in [`LongKeys::seqs`]) of the highest sequence
/// number of a delete file that holds it. Packed: 12 bytes, not 16.
#[repr(C, packed)]
#[derive(Clone, Copy)]
struct LongKey {
    value: i64,
    seq: u32,
}

impl LongKey {
    fn value(&self) -> i64 {
        self.value
    }

    fn seq(&self) -> u32 {
        self.seq
    }
}

/// Values per directory bucket, on average (a lookup binary-searches one bucket).
const KEYS_PER_BUCKET: usize = 8;

/// Bytes a distinct key takes once built (12 in the array, up to 2 in the filter and up
/// to 1 in the directory, each rounded up to a power of two): for the memory budget.
pub(super) const BYTES_PER_LONG_KEY: u64 = 15;

/// A group's deleted long values with the sequence number each was deleted at.
pub(super) struct LongKeys {
    /// Sorted by value, one entry a value.
    keys: Vec<LongKey>,
    /// The distinct sequence numbers of the group's delete files, ascending: an entry's
    /// `seq` indexes this, so a higher index is a higher sequence number.
    seqs: Vec<i64>,
    /// The sequence number a null key was deleted at, if one was.
    null: Option<i64>,
    /// `directory[b]..directory[b + 1]` are the entries of bucket `b`: values whose
    /// offset from the smallest value, shifted right by `shift`, is `b`. None past
    /// `u32::MAX` keys (then a lookup searches the whole array).
    directory: Option<Vec<u32>>,
    shift: u32,
    filter: BitFilter,
}

impl LongKeys {
    /// Distinct keys, the null key included.
    pub(super) fn len(&self) -> usize {
        self.keys.len() + usize::from(self.null.is_some())
    }

    /// Distinct non-null keys: the indexes `values` and `range_within` use.
    pub(super) fn value_count(&self) -> usize {
        self.keys.len()
    }

    pub(super) fn has_null(&self) -> bool {
        self.null.is_some()
    }

    /// The sequence number the null key was deleted at.
    pub(super) fn null(&self) -> Option<i64> {
        self.null
    }

    /// The sequence number `v` was deleted at, if it was.
    pub(super) fn get(&self, v: i64) -> Option<i64> {
        if !self.filter.may_contain(v) {
            return None;
        }
        let min = self.keys.first()?.value();
        let max = self.keys.last()?.value();
        if v < min || v > max {
            return None;
        }
        let slice = match &self.directory {
            Some(directory) => {
                let bucket = bucket_of(v.wrapping_sub(min) as u64, self.shift) as usize;
                &self.keys[directory[bucket] as usize..directory[bucket + 1] as usize]
            }
            None => &self.keys[..],
        };
        slice
            .binary_search_by_key(&v, LongKey::value)
            .ok()
            .map(|i| self.seqs[slice[i].seq() as usize])
    }

    /// The indexes of the values within `[lower, upper]` (either end may be open).
    pub(super) fn range_within(&self, lower: Option<i64>, upper: Option<i64>) -> Range<usize> {
        let start = lower.map_or(0, |lo| self.keys.partition_point(|k| k.value() < lo));
        let end = upper.map_or(self.keys.len(), |hi| {
            self.keys.partition_point(|k| k.value() <= hi)
        });
        start..end.max(start)
    }

    /// The values at `range` (from [`LongKeys::range_within`]), in order.
    pub(super) fn values(&self, range: Range<usize>) -> impl Iterator<Item = i64> + '_ {
        self.keys[range].iter().map(LongKey::value)
    }
}

/// A delete sequence number as its index in the builder's sorted table.
#[derive(Clone, Copy)]
pub(super) struct SeqIndex(u32);

/// Collects a group's long keys from its delete files, then builds [`LongKeys`].
pub(super) struct LongKeysBuilder {
    keys: Vec<LongKey>,
    seqs: Vec<i64>,
    null: Option<i64>,
    /// Entries after the last compaction, all distinct.
    distinct: usize,
}

impl LongKeysBuilder {
    /// `seqs`: the data sequence numbers of the group's delete files. `expected`: how
    /// many values are likely to come (reserved at once, so that the array does not
    /// double past what it needs).
    pub(super) fn new(seqs: impl IntoIterator<Item = i64>, expected: usize) -> Self {
        let mut seqs: Vec<i64> = seqs.into_iter().collect();
        seqs.sort_unstable();
        seqs.dedup();
        Self {
            keys: Vec::with_capacity(expected),
            seqs,
            null: None,
            distinct: 0,
        }
    }

    /// The index of sequence number `seq`, one of those given to `new`: found once a
    /// delete file, not once a key.
    pub(super) fn seq_index(&self, seq: i64) -> SeqIndex {
        // `seqs` is sorted. The index fits: there are fewer delete files than u32::MAX.
        let index = self.seqs.partition_point(|&s| s < seq);
        debug_assert_eq!(self.seqs.get(index), Some(&seq), "unknown sequence number");
        SeqIndex(index as u32)
    }

    /// A value deleted at the sequence number of `seq` (from [`Self::seq_index`]).
    pub(super) fn push(&mut self, value: Option<i64>, seq: SeqIndex) {
        let Some(value) = value else {
            let seq = self.seqs[seq.0 as usize];
            self.null = Some(self.null.map_or(seq, |s| s.max(seq)));
            return;
        };
        if self.keys.len() == self.keys.capacity()
            && self.keys.len() >= 2 * self.distinct.max(1 << 16)
        {
            // Streams delete the same keys over and over: merge the repeats before the
            // array grows, so it stays near the distinct count.
            self.compact();
        }
        self.keys.push(LongKey { value, seq: seq.0 });
    }

    /// Sorts and keeps one entry a value, with its highest sequence number.
    fn compact(&mut self) {
        self.keys.sort_unstable_by_key(LongKey::value);
        self.keys.dedup_by(|later, kept| {
            if later.value() != kept.value() {
                return false;
            }
            if later.seq() > kept.seq() {
                kept.seq = later.seq();
            }
            true
        });
        self.distinct = self.keys.len();
    }

    pub(super) fn build(mut self) -> LongKeys {
        self.compact();
        self.keys.shrink_to_fit();
        let (directory, shift) = directory(&self.keys);
        let filter = BitFilter::new(self.keys.iter().map(LongKey::value), self.keys.len());
        LongKeys {
            keys: self.keys,
            seqs: self.seqs,
            null: self.null,
            directory,
            shift,
            filter,
        }
    }
}

/// The bucket directory over sorted `keys`: about [`KEYS_PER_BUCKET`] values a bucket
/// when they spread evenly over their range, and the shift that maps a value's offset
/// from the smallest one to its bucket.
fn directory(keys: &[LongKey]) -> (Option<Vec<u32>>, u32) {
    let (Some(first), Some(last)) = (keys.first(), keys.last()) else {
        return (Some(vec![0, 0]), 0);
    };
    if u32::try_from(keys.len()).is_err() {
        return (None, 0);
    }
    let span = last.value().wrapping_sub(first.value()) as u64;
    let buckets = (keys.len() / KEYS_PER_BUCKET).max(1).next_power_of_two() as u64;
    // The smallest shift that puts the largest offset in the last bucket or before.
    let mut shift = 0;
    while bucket_of(span, shift) >= buckets {
        shift += 1;
    }
    let used = bucket_of(span, shift) as usize + 1;
    let mut directory = Vec::with_capacity(used + 1);
    let mut index = 0usize;
    for bucket in 0..used as u64 {
        while index < keys.len()
            && bucket_of(
                keys[index].value().wrapping_sub(first.value()) as u64,
                shift,
            ) < bucket
        {
            index += 1;
        }
        directory.push(index as u32);
    }
    directory.push(keys.len() as u32);
    (Some(directory), shift)
}

/// The bucket of a value `offset` above the smallest (a shift of 64 or more: bucket 0).
fn bucket_of(offset: u64, shift: u32) -> u64 {
    offset.checked_shr(shift).unwrap_or(0)
}

/// A one-hash bit filter, 8 to 16 bits a value (about 12% false positives or fewer):
/// most rows the scan probes hold no deleted key, and the filter, unlike the array,
/// stays in the CPU cache. No false negatives.
struct BitFilter {
    bits: Vec<u64>,
    mask: u64,
    seed: u64,
}

impl BitFilter {
    fn new(values: impl Iterator<Item = i64>, count: usize) -> Self {
        let slots = (count.max(8) * 8).next_power_of_two() as u64;
        let mut filter = Self {
            bits: vec![0; (slots / 64) as usize],
            mask: slots - 1,
            seed: rand::random(),
        };
        for v in values {
            let slot = filter.slot(v);
            filter.bits[(slot >> 6) as usize] |= 1 << (slot & 63);
        }
        filter
    }

    fn slot(&self, v: i64) -> u64 {
        mix64(v as u64 ^ self.seed) & self.mask
    }

    fn may_contain(&self, v: i64) -> bool {
        let slot = self.slot(v);
        self.bits[(slot >> 6) as usize] & (1 << (slot & 63)) != 0
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// A builder fed `pushes`, against a map of each value's highest sequence number.
    fn check(pushes: &[(Option<i64>, i64)], probes: impl Iterator<Item = i64>) {
        let mut builder = LongKeysBuilder::new(pushes.iter().map(|&(_, s)| s), 4);
        let mut expected: BTreeMap<i64, i64> = BTreeMap::new();
        let mut null = None;
        for &(v, s) in pushes {
            builder.push(v, builder.seq_index(s));
            match v {
                Some(v) => {
                    let e = expected.entry(v).or_insert(s);
                    *e = (*e).max(s);
                }
                None => null = Some(null.map_or(s, |n: i64| n.max(s))),
            }
        }
        let keys = builder.build();
        assert_eq!(keys.len(), expected.len() + usize::from(null.is_some()));
        assert_eq!(keys.null(), null);
        for (&v, &s) in &expected {
            assert_eq!(keys.get(v), Some(s), "value {v}");
        }
        for v in probes {
            assert_eq!(keys.get(v), expected.get(&v).copied(), "probe {v}");
        }
        let all: Vec<i64> = keys.values(keys.range_within(None, None)).collect();
        assert_eq!(all, expected.keys().copied().collect::<Vec<_>>());
    }

    #[test]
    fn dense_sparse_and_extreme_values() {
        let dense: Vec<_> = (0..10_000)
            .map(|i| (Some(1_000_000 + i), 3 + i % 4))
            .collect();
        check(&dense, 999_990..1_010_010);
        let sparse: Vec<_> = (0..5_000u64).map(|i| (Some(mix64(i) as i64), 7)).collect();
        check(&sparse, (0..5_000u64).map(|i| mix64(i + 1_000_000) as i64));
        let extremes = [
            (Some(i64::MIN), 1),
            (Some(i64::MAX), 2),
            (Some(0), 3),
            (Some(-1), 1),
            (None, 5),
            (None, 2),
        ];
        check(&extremes, [i64::MIN + 1, i64::MAX - 1, 1, -2].into_iter());
        // Two clusters far apart: most buckets empty, one holds nearly everything.
        let clusters: Vec<_> = (0..3_000)
            .map(|i| (Some(if i % 2 == 0 { i } else { i64::MAX - i }), 9))
            .collect();
        check(&clusters, (0..100).chain(i64::MAX - 100..i64::MAX));
        check(&[], [0, 1, -1].into_iter());
        check(&[(None, 4)], [0].into_iter());
    }

    #[test]
    fn repeats_keep_the_highest_sequence_number_across_compactions() {
        // Far more pushes than distinct values, in an order that compacts many times.
        let pushes: Vec<_> = (0..400_000i64)
            .map(|i| (Some((i * 7919) % 1_000), 10 + (i * 31) % 97))
            .collect();
        check(&pushes, -5..1_005);
    }

    #[test]
    fn ranges_are_inclusive_and_may_be_open() {
        let pushes: Vec<_> = [5, 10, 15, 20].iter().map(|&v| (Some(v), 1)).collect();
        let mut b = LongKeysBuilder::new([1], 4);
        for &(v, s) in &pushes {
            b.push(v, b.seq_index(s));
        }
        let keys = b.build();
        let r = |lo, hi| keys.values(keys.range_within(lo, hi)).collect::<Vec<_>>();
        assert_eq!(r(Some(10), Some(15)), vec![10, 15]);
        assert_eq!(r(Some(11), Some(14)), Vec::<i64>::new());
        assert_eq!(r(None, Some(10)), vec![5, 10]);
        assert_eq!(r(Some(16), None), vec![20]);
        assert_eq!(r(Some(21), None), Vec::<i64>::new());
        assert_eq!(r(Some(15), Some(5)), Vec::<i64>::new());
    }

    #[test]
    fn bit_filter_has_no_false_negatives_and_few_false_positives() {
        let keys: Vec<i64> = (0..50_000).map(|i| i * 7 - 100_000).collect();
        let filter = BitFilter::new(keys.iter().copied(), keys.len());
        assert!(keys.iter().all(|&k| filter.may_contain(k)));
        let false_positives = (0..100_000i64)
            .map(|i| i * 7 + 3)
            .filter(|&k| filter.may_contain(k))
            .count();
        assert!(false_positives < 20_000, "{false_positives}");
        let empty = BitFilter::new(std::iter::empty(), 0);
        assert!(!empty.may_contain(0));
    }
}
