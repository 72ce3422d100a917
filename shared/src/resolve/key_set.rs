//! The deleted keys of a group: loaded from its delete files into a hash set (with the
//! sequence number each key was deleted at), the per-column sorted values that pruning
//! compares with statistics, and the fast hashing both the set and its filter use.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};

use arrow_array::Array;
use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_schema::DataType;
use futures::TryStreamExt;
use iceberg::spec::NameMapping;

use super::{ResolveMetrics, ResolveOptions};
use crate::keys::KeyColumns;
use crate::parquet_io::ParquetFile;
use crate::plan::DeleteGroup;
use crate::table::LoadedTable;
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
    pub(super) fn len(&self) -> usize {
        self.ends.len()
    }

    pub(super) fn value(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.bytes[start..self.ends[i]]
    }

    fn push(&mut self, value: &[u8]) {
        self.bytes.extend_from_slice(value);
        self.ends.push(self.bytes.len());
    }

    /// The same values sorted, without duplicates.
    fn sorted(self) -> Self {
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

/// SplitMix64's finalizer: a bijection on u64 that scrambles well.
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Hashing for the deleted-key sets, probed once per data row read: a multiply-rotate
/// per 8 bytes and a SplitMix64 finish, several times cheaper than SipHash. The seed is
/// random per set, so keys cannot be crafted to collide ahead of time. Public so that
/// the benchmarks' floor hashes exactly as the engine does.
#[derive(Clone, Copy)]
pub struct KeyHashBuilder {
    seed: u64,
}

impl Default for KeyHashBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl KeyHashBuilder {
    pub fn new() -> Self {
        Self {
            seed: rand::random(),
        }
    }
}

impl BuildHasher for KeyHashBuilder {
    type Hasher = KeyHasher;

    fn build_hasher(&self) -> KeyHasher {
        KeyHasher(self.seed)
    }
}

pub struct KeyHasher(u64);

impl KeyHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0 ^ word)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            .rotate_left(29);
    }
}

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        mix64(self.0)
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut word = [0u8; 8];
            word[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(word) ^ ((rest.len() as u64) << 59));
        }
    }

    fn write_u64(&mut self, word: u64) {
        self.add(word);
    }

    fn write_i64(&mut self, word: i64) {
        self.add(word as u64);
    }

    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }
}

/// A one-hash bit filter over the deleted long keys, 8 bits per key (about 12% false
/// positives). Most rows the scan probes hold no deleted key, and the filter, unlike the
/// map, stays in the CPU cache when there are many keys: those rows are rejected without
/// touching the map. No false negatives: every key's bit is set.
pub(super) struct LongFilter {
    bits: Vec<u64>,
    mask: u64,
    seed: u64,
}

impl LongFilter {
    fn new<'a>(values: impl ExactSizeIterator<Item = &'a i64>) -> Self {
        let slots = (values.len().max(8) * 8).next_power_of_two() as u64;
        let mut filter = Self {
            bits: vec![0; (slots / 64) as usize],
            mask: slots - 1,
            seed: rand::random(),
        };
        for &v in values {
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

/// The deleted keys of a group with, per key, the highest sequence number of a delete
/// file holding it.
pub(super) enum KeySet {
    /// Any key, by its arrow-row encoding.
    Rows(HashMap<Box<[u8]>, i64, KeyHashBuilder>),
    /// A single `long` column (the common CDC key): the values themselves, so the scan
    /// probes without encoding rows; the null key apart.
    Long {
        values: HashMap<i64, i64, KeyHashBuilder>,
        null: Option<i64>,
        /// Built once every key is loaded ([`KeySet::finish`]); without it, every row
        /// probes the map.
        filter: Option<LongFilter>,
    },
}

impl KeySet {
    pub(super) fn len(&self) -> usize {
        match self {
            KeySet::Rows(keys) => keys.len(),
            KeySet::Long { values, null, .. } => values.len() + usize::from(null.is_some()),
        }
    }

    /// Call once every key is in.
    pub(super) fn finish(&mut self) {
        if let KeySet::Long { values, filter, .. } = self {
            *filter = Some(LongFilter::new(values.keys()));
        }
    }

    /// The sequence number a non-null long key was deleted with.
    pub(super) fn long(
        values: &HashMap<i64, i64, KeyHashBuilder>,
        filter: Option<&LongFilter>,
        v: i64,
    ) -> Option<i64> {
        if filter.is_some_and(|f| !f.may_contain(v)) {
            return None;
        }
        values.get(&v).copied()
    }
}

/// Which share of the keys a pass holds: those whose hash is `index` modulo `passes`.
#[derive(Clone, Copy, Debug)]
pub(super) struct KeyPass {
    pub(super) index: u64,
    pub(super) passes: u64,
}

impl KeyPass {
    fn owns(&self, key: &[u8]) -> bool {
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
}

/// The loaded keys of one group.
pub(super) struct GroupKeys {
    pub(super) group: DeleteGroup,
    pub(super) key_columns: KeyColumns,
    pub(super) keys: KeySet,
    pub(super) columns: Vec<ColumnValues>,
}

pub(super) async fn load_group_keys(
    table: &LoadedTable,
    group: &DeleteGroup,
    pass: KeyPass,
    options: &ResolveOptions,
    name_mapping: Option<&NameMapping>,
    metrics: &mut ResolveMetrics,
) -> Result<GroupKeys> {
    let schema = table.metadata.current_schema();
    refuse_dropped_fields(table, group)?;
    let key_columns = KeyColumns::new(&table.name.to_string(), schema, &group.equality_ids)?;
    let single_long = key_columns.len() == 1 && *key_columns.data_type(0) == DataType::Int64;
    let mut keys = if single_long {
        KeySet::Long {
            values: HashMap::with_hasher(KeyHashBuilder::new()),
            null: None,
            filter: None,
        }
    } else {
        KeySet::Rows(HashMap::with_hasher(KeyHashBuilder::new()))
    };
    let mut columns_seen: Vec<ColumnValues> = (0..key_columns.len())
        .map(|_| ColumnValues::default())
        .collect();
    for delete in &group.delete_files {
        let file = ParquetFile::open(
            &table.file_io,
            delete.path(),
            Some(delete.file.file_size_in_bytes()),
        )
        .await?
        .with_name_mapping(name_mapping);
        for &id in &key_columns.field_ids {
            if file.field_by_id(id).is_none() {
                return Err(Error::file(
                    delete.path(),
                    format!("equality delete file lacks equality field id {id}"),
                    "invalid delete file",
                ));
            }
        }
        let leaves: Vec<usize> = key_columns
            .field_ids
            .iter()
            .filter_map(|&id| file.leaf_index(id))
            .collect();
        let all_groups: Vec<usize> = (0..file.row_group_rows().len()).collect();
        metrics.bytes_read += file.projected_bytes(&leaves, &all_groups);
        metrics.delete_files_read += 1;
        let mut stream = Box::pin(file.read(&key_columns.fields, None, options.batch_size)?);
        while let Some((_, batch)) = stream.try_next().await? {
            let columns = batch.columns().to_vec();
            let rows = key_columns.encode(&columns)?;
            // Only this pass's share of the keys is kept.
            let mine: Vec<bool> = rows.iter().map(|row| pass.owns(row.as_ref())).collect();
            let seq = delete.data_sequence_number;
            match &mut keys {
                KeySet::Rows(keys) => {
                    for (row, _) in rows.iter().zip(&mine).filter(|(_, m)| **m) {
                        let max = keys.entry(row.as_ref().into()).or_insert(i64::MIN);
                        *max = (*max).max(seq);
                    }
                }
                KeySet::Long { values, null, .. } => {
                    let column = columns[0].as_primitive_opt::<Int64Type>().ok_or_else(|| {
                        Error::file(delete.path(), "key column is not a long", "type mismatch")
                    })?;
                    for (value, _) in column.iter().zip(&mine).filter(|(_, m)| **m) {
                        let max = match value {
                            Some(v) => values.entry(v).or_insert(i64::MIN),
                            None => null.get_or_insert(i64::MIN),
                        };
                        *max = (*max).max(seq);
                    }
                }
            }
            for (i, column) in columns.iter().enumerate() {
                let encoded = key_columns.encode_column(i, column)?;
                for (row_index, row) in encoded.iter().enumerate() {
                    if !mine[row_index] {
                        continue;
                    }
                    if column.is_valid(row_index) {
                        columns_seen[i].push(row.as_ref());
                    } else {
                        columns_seen[i].has_null = true;
                    }
                }
            }
        }
    }
    keys.finish();
    let columns = columns_seen.into_iter().map(ColumnValues::sorted).collect();
    Ok(GroupKeys {
        group: group.clone(),
        key_columns,
        keys,
        columns,
    })
}

/// An equality field that the current schema dropped cannot be resolved: data files
/// written after the drop lack the column, and what they would compare as is unknown.
/// The error names the delete file and the field (by its last name).
fn refuse_dropped_fields(table: &LoadedTable, group: &DeleteGroup) -> Result<()> {
    let current = table.metadata.current_schema();
    for &id in &group.equality_ids {
        if current.field_by_id(id).is_some() {
            continue;
        }
        let mut schemas: Vec<_> = table.metadata.schemas_iter().collect();
        schemas.sort_by_key(|s| std::cmp::Reverse(s.schema_id()));
        let name = schemas
            .iter()
            .find_map(|s| s.field_by_id(id).map(|f| f.name.clone()))
            .unwrap_or_else(|| "<unknown>".into());
        let path = group
            .delete_files
            .first()
            .map_or_else(String::new, |f| f.path().to_string());
        return Err(Error::FieldUnresolvable {
            path,
            field: name,
            field_id: id,
            message: format!(
                "the equality delete's field was dropped from table {}'s current schema; \
                 eqdv cannot apply it faithfully to every data file, so the group is not \
                 converted",
                table.name
            ),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

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

    #[test]
    fn key_hasher_tells_lengths_and_values_apart() {
        let build = KeyHashBuilder { seed: 7 };
        let hash = |bytes: &[u8]| {
            let mut h = build.build_hasher();
            h.write(bytes);
            h.finish()
        };
        assert_eq!(hash(b"abc"), hash(b"abc"));
        assert_ne!(hash(b"abc"), hash(b"abc\0"));
        assert_ne!(hash(b"12345678"), hash(b"12345679"));
        let mut set: HashSet<i64, KeyHashBuilder> = HashSet::with_hasher(build);
        set.extend(0..10_000);
        assert!((0..10_000).all(|k| set.contains(&k)));
        assert!(!set.contains(&10_000));
    }

    #[test]
    fn long_filter_has_no_false_negatives_and_few_false_positives() {
        let keys: Vec<i64> = (0..50_000).map(|i| i * 7 - 100_000).collect();
        let filter = LongFilter::new(keys.iter());
        assert!(keys.iter().all(|&k| filter.may_contain(k)));
        let false_positives = (0..100_000i64)
            .map(|i| i * 7 + 3)
            .filter(|&k| filter.may_contain(k))
            .count();
        assert!(false_positives < 20_000, "{false_positives}");
        let empty = LongFilter::new([].iter());
        assert!(!empty.may_contain(0));
    }
}
