//! The deleted keys of a group whose key is one `string` column (order ids, UUIDs
//! written as text, composite ids joined by the writer): the distinct values packed one
//! after another in one buffer, found through an open-addressing table of their indexes,
//! with a bit filter that rejects most absent values before the table is touched.
//!
//! Why not a hash map of arrow-row encoded keys (what other key types use): the scan
//! probes every row it reads, and encoding each probed value into a row, then hashing a
//! boxed key, costs more than the rest of the probe; here a probe hashes the string's
//! bytes as the data column holds them. A key also takes about 24 bytes plus its length,
//! not a boxed encoding and a map slot of 160.

use std::hash::{BuildHasher, Hasher};

use arrow_array::Array;
use arrow_array::cast::AsArray;

use super::key_hash::{KeyHashBuilder, mix64};

/// A group's deleted string values with the sequence number each was deleted at.
pub(super) struct StringKeys {
    /// The values, one after another.
    bytes: Vec<u8>,
    /// End offset of each value in `bytes`: value `i` is `bytes[ends[i - 1]..ends[i]]`.
    ends: Vec<usize>,
    /// Per value, the highest sequence number of a delete file that holds it.
    seqs: Vec<i64>,
    /// The sequence number a null key was deleted at, if one was.
    null: Option<i64>,
    /// Open addressing with linear probing: a value's index plus one, 0 for an empty
    /// slot. At most half full, a power of two long.
    slots: Vec<u32>,
    hasher: KeyHashBuilder,
    filter: BitFilter,
}

impl StringKeys {
    /// Distinct keys, the null key included.
    pub(super) fn len(&self) -> usize {
        self.ends.len() + usize::from(self.null.is_some())
    }

    /// The sequence number the null key was deleted at.
    pub(super) fn null(&self) -> Option<i64> {
        self.null
    }

    /// The sequence number `value` (a string's UTF-8 bytes) was deleted at, if it was.
    pub(super) fn get(&self, value: &[u8]) -> Option<i64> {
        let hash = self.hash(value);
        if !self.filter.may_contain(hash) {
            return None;
        }
        match self.find(value, hash) {
            Ok(index) => Some(self.seqs[index]),
            Err(_) => None,
        }
    }

    fn value(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.bytes[start..self.ends[i]]
    }

    fn hash(&self, value: &[u8]) -> u64 {
        let mut hasher = self.hasher.build_hasher();
        hasher.write(value);
        hasher.finish()
    }

    /// `Ok(index)` of `value`, or `Err(slot)`: the empty slot where it would go.
    fn find(&self, value: &[u8], hash: u64) -> Result<usize, usize> {
        let mask = self.slots.len() - 1;
        let mut slot = hash as usize & mask;
        loop {
            match self.slots[slot] {
                0 => return Err(slot),
                entry => {
                    let index = entry as usize - 1;
                    if self.value(index) == value {
                        return Ok(index);
                    }
                }
            }
            slot = (slot + 1) & mask;
        }
    }
}

/// Calls `each` with the row offset and value of every row of `array`, a string column
/// (`Utf8`, `LargeUtf8` or `Utf8View`, as Parquet readers may give a `string`); false,
/// calling nothing, for an array of another type.
pub(super) fn for_each_string(
    array: &dyn Array,
    mut each: impl FnMut(usize, Option<&[u8]>),
) -> bool {
    if let Some(a) = array.as_string_opt::<i32>() {
        a.iter()
            .enumerate()
            .for_each(|(i, v)| each(i, v.map(str::as_bytes)));
    } else if let Some(a) = array.as_string_opt::<i64>() {
        a.iter()
            .enumerate()
            .for_each(|(i, v)| each(i, v.map(str::as_bytes)));
    } else if let Some(a) = array.as_string_view_opt() {
        a.iter()
            .enumerate()
            .for_each(|(i, v)| each(i, v.map(str::as_bytes)));
    } else {
        return false;
    }
    true
}

/// Collects a group's string keys from its delete files, one entry a distinct value
/// from the start (streams delete the same keys over and over), then builds
/// [`StringKeys`].
pub(super) struct StringKeysBuilder {
    keys: StringKeys,
}

/// Slots in a new table: grown by doubling, so that it never holds more than half.
const INITIAL_SLOTS: usize = 1 << 10;

/// The most distinct values a set indexes with `u32` slots.
const MAX_VALUES: usize = (u32::MAX / 2) as usize;

impl StringKeysBuilder {
    /// `expected`: how many values are likely to come (the table is sized for them at
    /// once, so that it does not rehash on the way).
    pub(super) fn new(expected: usize) -> Self {
        let slots = expected
            .saturating_mul(2)
            .clamp(INITIAL_SLOTS, MAX_VALUES)
            .next_power_of_two();
        Self {
            keys: StringKeys {
                bytes: Vec::new(),
                ends: Vec::new(),
                seqs: Vec::new(),
                null: None,
                slots: vec![0; slots],
                hasher: KeyHashBuilder::new(),
                filter: BitFilter::empty(),
            },
        }
    }

    /// A value deleted at `seq` (its highest is kept). `None` if the set is full: more
    /// distinct values than `u32` slots index, which the caller reports.
    pub(super) fn push(&mut self, value: Option<&[u8]>, seq: i64) -> Option<()> {
        let keys = &mut self.keys;
        let Some(value) = value else {
            keys.null = Some(keys.null.map_or(seq, |s| s.max(seq)));
            return Some(());
        };
        let hash = keys.hash(value);
        match keys.find(value, hash) {
            Ok(index) => keys.seqs[index] = keys.seqs[index].max(seq),
            Err(slot) => {
                if keys.ends.len() >= MAX_VALUES {
                    return None;
                }
                keys.bytes.extend_from_slice(value);
                keys.ends.push(keys.bytes.len());
                keys.seqs.push(seq);
                keys.slots[slot] = keys.ends.len() as u32;
                if keys.ends.len() * 2 > keys.slots.len() {
                    self.grow();
                }
            }
        }
        Some(())
    }

    /// Doubles the table and places every value again.
    fn grow(&mut self) {
        let keys = &mut self.keys;
        let mut slots = vec![0u32; keys.slots.len() * 2];
        let mask = slots.len() - 1;
        for index in 0..keys.ends.len() {
            let mut slot = keys.hash(keys.value(index)) as usize & mask;
            while slots[slot] != 0 {
                slot = (slot + 1) & mask;
            }
            slots[slot] = index as u32 + 1;
        }
        keys.slots = slots;
    }

    pub(super) fn build(mut self) -> StringKeys {
        let keys = &mut self.keys;
        keys.bytes.shrink_to_fit();
        keys.ends.shrink_to_fit();
        keys.seqs.shrink_to_fit();
        let hashes: Vec<u64> = (0..keys.ends.len())
            .map(|i| keys.hash(keys.value(i)))
            .collect();
        keys.filter = BitFilter::new(&hashes);
        self.keys
    }
}

/// A one-hash bit filter over the values' hashes, 8 to 16 bits a value (about 12% false
/// positives or fewer): most rows the scan probes hold no deleted key, and the filter,
/// unlike the buffer, stays in the CPU cache. No false negatives.
struct BitFilter {
    bits: Vec<u64>,
    mask: u64,
}

impl BitFilter {
    fn empty() -> Self {
        Self {
            bits: vec![0],
            mask: 63,
        }
    }

    fn new(hashes: &[u64]) -> Self {
        let slots = (hashes.len().max(8) * 8).next_power_of_two() as u64;
        let mut filter = Self {
            bits: vec![0; (slots / 64) as usize],
            mask: slots - 1,
        };
        for &hash in hashes {
            let slot = filter.slot(hash);
            filter.bits[(slot >> 6) as usize] |= 1 << (slot & 63);
        }
        filter
    }

    /// Scrambled again: the table's slot comes from the hash's low bits, so the filter
    /// must not use the same ones.
    fn slot(&self, hash: u64) -> u64 {
        mix64(hash) & self.mask
    }

    fn may_contain(&self, hash: u64) -> bool {
        let slot = self.slot(hash);
        self.bits[(slot >> 6) as usize] & (1 << (slot & 63)) != 0
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    /// A builder fed `pushes`, against a map of each value's highest sequence number.
    fn check(pushes: &[(Option<&str>, i64)], absent: &[&str]) {
        let mut builder = StringKeysBuilder::new(2);
        let mut expected: HashMap<&str, i64> = HashMap::new();
        let mut null = None;
        for &(v, s) in pushes {
            builder.push(v.map(str::as_bytes), s).expect("room");
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
        for (v, s) in &expected {
            assert_eq!(keys.get(v.as_bytes()), Some(*s), "value {v:?}");
        }
        for v in absent {
            assert_eq!(keys.get(v.as_bytes()), None, "absent {v:?}");
        }
    }

    #[test]
    fn values_nulls_and_repeats_keep_the_highest_sequence_number() {
        check(
            &[
                (Some("ord-1"), 3),
                (None, 2),
                (Some(""), 1),
                (Some("ord-1"), 5),
                (Some("ord-1"), 4),
                (None, 7),
                (Some("ünïcödé"), 2),
            ],
            &["ord-2", "ord-", "ord-10", "\0", "ünïcöde"],
        );
        check(&[], &["", "a"]);
    }

    #[test]
    fn a_table_that_grows_many_times_finds_every_value() {
        let values: Vec<String> = (0..50_000).map(|i| format!("key-{i:08}")).collect();
        let mut pushes: Vec<(Option<&str>, i64)> = values
            .iter()
            .enumerate()
            .map(|(i, v)| (Some(v.as_str()), (i % 7) as i64))
            .collect();
        // Every value again, at a lower or higher sequence number.
        pushes.extend(values.iter().map(|v| (Some(v.as_str()), 3)));
        let absent: Vec<String> = (50_000..51_000).map(|i| format!("key-{i:08}")).collect();
        let absent: Vec<&str> = absent.iter().map(String::as_str).collect();
        check(&pushes, &absent);
    }

    #[test]
    fn the_filter_has_no_false_negatives_and_few_false_positives() {
        let hashes: Vec<u64> = (0..10_000u64).map(mix64).collect();
        let filter = BitFilter::new(&hashes);
        assert!(hashes.iter().all(|&h| filter.may_contain(h)));
        let passed = (10_000..110_000u64)
            .map(mix64)
            .filter(|&h| filter.may_contain(h))
            .count();
        assert!(passed < 15_000, "{passed} of 100,000 absent values passed");
    }
}
