//! Resolving equality-deleted keys to row positions: the hot path.
//!
//! For each delete group the keys are loaded into a hash set (per key, the highest
//! sequence number of the group's files that hold it). Candidate data files are those
//! the group may apply to (partition scope, `seq(F) < max seq`), pruned by column bounds
//! in the manifest and then by Parquet row-group statistics; only the key columns of the
//! survivors are read, in parallel. A row is deleted iff its key is in the set with
//! `seq(F) < seq(key)`.
//!
//! Pruning is always conservative: a file or row group that may hold a key is read.
//! Nothing here writes.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_schema::DataType;
use futures::{StreamExt, TryStreamExt};
use iceberg::spec::{Literal, NameMapping, NestedFieldRef};
use parquet::arrow::arrow_reader::statistics::StatisticsConverter;
use roaring::RoaringTreemap;
use serde::Serialize;

use crate::keys::KeyColumns;
use crate::parquet_io::{FieldSource, ParquetFile};
use crate::plan::DeleteGroup;
use crate::table::{LiveFile, LoadedTable, TableFiles};
use crate::{Error, Result};

/// Tuning knobs for resolving.
#[derive(Clone, Debug)]
pub struct ResolveOptions {
    /// Data files read at once.
    pub parallelism: usize,
    /// Rows per decoded batch.
    pub batch_size: usize,
    /// Use Parquet row-group statistics to skip row groups.
    pub row_group_pruning: bool,
    /// Use Parquet bloom filters (where the writer wrote them) to skip row groups whose
    /// range holds a few deleted keys that the filter says are absent: files whose
    /// bounds were widened by upserts, random keys, deletes of keys never written.
    pub bloom_pruning: bool,
    /// Use manifest column bounds to skip data files. Turn off for tables whose
    /// writers recorded bounds that are too narrow (iceberg-rust <= 0.10.1 could, for
    /// strings over 64 bytes spread over several row groups).
    pub bound_pruning: bool,
    /// Memory for deleted keys. When the keys of the groups would need more, they are
    /// split by hash into passes that each hold a share of the keys and each scan the
    /// candidates again: memory stays bounded, at the price of more reads.
    pub key_memory_budget: u64,
}

/// Bytes a loaded key costs, estimated: the encoded key and its hash-map slot, plus the
/// per-column copies kept for pruning.
const BYTES_PER_KEY: u64 = 160;

impl Default for ResolveOptions {
    fn default() -> Self {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        Self {
            parallelism: (cores * 2).max(2),
            batch_size: 8192,
            row_group_pruning: true,
            bloom_pruning: true,
            bound_pruning: true,
            key_memory_budget: 1 << 30,
        }
    }
}

/// What resolving did, for reports and metrics.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ResolveMetrics {
    pub groups: u64,
    /// Key passes (more than one when the keys exceed the memory budget).
    pub key_passes: u64,
    pub delete_files_read: u64,
    /// Distinct deleted keys over all groups.
    pub delete_keys: u64,
    pub live_data_files: u64,
    /// Data files in scope of some group (partition and sequence number).
    pub candidate_files: u64,
    /// Candidates skipped because no key fits their column bounds.
    pub pruned_by_bounds: u64,
    pub files_opened: u64,
    pub row_groups_read: u64,
    pub row_groups_pruned: u64,
    /// Of the row groups pruned, those a bloom filter ruled out.
    pub row_groups_pruned_by_bloom: u64,
    /// Files opened whose key columns were not read at all (every row group pruned).
    pub files_pruned_by_footer: u64,
    pub rows_scanned: u64,
    /// Compressed bytes of the column chunks read (data and delete files).
    pub bytes_read: u64,
    /// Data files with at least one newly deleted row.
    pub files_with_matches: u64,
    pub positions_matched: u64,
}

/// The deleted rows found, per data file.
#[derive(Debug, Default)]
pub struct Resolved {
    /// Data file path -> positions deleted by the groups (not yet merged with old DVs).
    pub positions: BTreeMap<String, RoaringTreemap>,
    /// Every data file that was in scope of a group (opened or pruned).
    pub candidates: HashSet<String>,
    pub metrics: ResolveMetrics,
}

/// One key column's distinct non-null values in order-preserving encoding (arrow-row
/// bytes, which compare as the values do), sorted, packed in one buffer: two
/// allocations per column rather than one per key.
#[derive(Default)]
struct ColumnValues {
    bytes: Vec<u8>,
    /// End offset of each value in `bytes`.
    ends: Vec<usize>,
    has_null: bool,
}

impl ColumnValues {
    fn len(&self) -> usize {
        self.ends.len()
    }

    fn value(&self, i: usize) -> &[u8] {
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
    fn any_within(&self, lower: Option<&[u8]>, upper: Option<&[u8]>) -> bool {
        let start = lower.map_or(0, |lo| self.partition_point(|v| v < lo));
        if start >= self.len() {
            return false;
        }
        upper.is_none_or(|hi| self.value(start) <= hi)
    }

    /// The indexes of the values within `[lower, upper]`. Needs `sorted`.
    fn range_within(&self, lower: &[u8], upper: &[u8]) -> std::ops::Range<usize> {
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

/// A row group's deleted values per key column, as `row_group_candidates` finds them:
/// `Some(range)` indexes the values within the row group's exact statistics; `None`
/// when that is unknown (no usable statistics, column absent, null keys).
type ColumnRanges = Vec<Option<std::ops::Range<usize>>>;

/// Bloom filters are probed only for row groups whose range holds at most this many
/// deleted values of a column: with a typical 1% false-positive rate, more probes would
/// rarely all come back negative, and each costs a hash.
const BLOOM_MAX_PROBES: usize = 256;

/// SplitMix64's finalizer: a bijection on u64 that scrambles well.
fn mix64(mut z: u64) -> u64 {
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
struct LongFilter {
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
enum KeySet {
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
    fn len(&self) -> usize {
        match self {
            KeySet::Rows(keys) => keys.len(),
            KeySet::Long { values, null, .. } => values.len() + usize::from(null.is_some()),
        }
    }

    /// Call once every key is in.
    fn finish(&mut self) {
        if let KeySet::Long { values, filter, .. } = self {
            *filter = Some(LongFilter::new(values.keys()));
        }
    }

    /// The sequence number a non-null long key was deleted with.
    fn long(
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
struct KeyPass {
    index: u64,
    passes: u64,
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
struct GroupKeys {
    group: DeleteGroup,
    key_columns: KeyColumns,
    keys: KeySet,
    columns: Vec<ColumnValues>,
}

async fn load_group_keys(
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

impl GroupKeys {
    /// False when the file's manifest bounds prove that no key of the group is in it.
    fn may_match_file(&self, data: &LiveFile) -> bool {
        let file = &data.file;
        for (i, &field_id) in self.key_columns.field_ids.iter().enumerate() {
            let values = &self.columns[i];
            // A file written before the field existed has no statistics for it and reads
            // its initial-default: statistics cannot rule it out.
            let has_bounds = file.lower_bounds().contains_key(&field_id)
                && file.upper_bounds().contains_key(&field_id);
            if self.key_columns.fields[i].initial_default.is_some() && !has_bounds {
                continue;
            }
            let null_count = file.null_value_counts().get(&field_id).copied();
            let value_count = file.value_counts().get(&field_id).copied();
            let may_match_null = values.has_null && null_count != Some(0);
            let all_null = matches!((null_count, value_count), (Some(n), Some(v)) if n == v);
            let may_match_value = !all_null && {
                let lower = file
                    .lower_bounds()
                    .get(&field_id)
                    .and_then(|d| self.key_columns.encode_bound(i, d));
                let upper = file
                    .upper_bounds()
                    .get(&field_id)
                    .and_then(|d| self.key_columns.encode_bound(i, d));
                values.any_within(
                    lower.as_ref().map(|r| r.row().data()),
                    upper.as_ref().map(|r| r.row().data()),
                )
            };
            if !may_match_null && !may_match_value {
                return false;
            }
        }
        true
    }

    /// Row groups of `file` that may hold a key, by Parquet statistics: `None` for a
    /// row group that cannot, else the deleted values in its range per key column.
    fn row_group_candidates(
        &self,
        file: &ParquetFile,
        sources: &HashMap<i32, FieldSource>,
    ) -> Result<Vec<Option<ColumnRanges>>> {
        let row_groups = file.metadata().row_groups();
        let columns = self.key_columns.field_ids.len();
        let mut keep = vec![true; row_groups.len()];
        let mut ranges: Vec<ColumnRanges> = vec![vec![None; columns]; row_groups.len()];
        let parquet_schema = file.metadata().file_metadata().schema_descr();
        for (i, &field_id) in self.key_columns.field_ids.iter().enumerate() {
            let constant = match sources.get(&field_id) {
                Some(FieldSource::Column { .. }) => None,
                Some(FieldSource::Constant(value)) => Some(value),
                None => {
                    return Err(Error::file(
                        file.path(),
                        format!("key field id {field_id} was not resolved before pruning"),
                        "internal error",
                    ));
                }
            };
            if let Some(value) = constant {
                // Column absent from this file: every row reads the field's default (or
                // null), so the row groups may match only if that value was deleted.
                if !self.may_match_constant(i, value.as_ref())? {
                    keep.iter_mut().for_each(|k| *k = false);
                }
                continue;
            }
            let Some(field) = file.field_by_id(field_id) else {
                continue;
            };
            let Some(leaf) = file.leaf_index(field_id) else {
                continue;
            };
            let Ok(converter) =
                StatisticsConverter::try_new(field.name(), file.arrow_schema(), parquet_schema)
            else {
                continue;
            };
            let target = self.key_columns.data_type(i);
            let (Ok(mins), Ok(maxes), Ok(nulls)) = (
                converter.row_group_mins(row_groups.iter()),
                converter.row_group_maxes(row_groups.iter()),
                converter.row_group_null_counts(row_groups.iter()),
            ) else {
                continue;
            };
            let (Some(mins), Some(maxes)) = (cast_to(&mins, target), cast_to(&maxes, target))
            else {
                continue;
            };
            let (Ok(min_rows), Ok(max_rows)) = (
                self.key_columns.encode_column(i, &mins),
                self.key_columns.encode_column(i, &maxes),
            ) else {
                continue;
            };
            let byte_like = matches!(
                target,
                DataType::Utf8 | DataType::LargeUtf8 | DataType::Binary | DataType::LargeBinary
            );
            for (rg, keep_rg) in keep.iter_mut().enumerate() {
                if !*keep_rg {
                    continue;
                }
                let stats = row_groups[rg].column(leaf).statistics();
                // Truncated (inexact) byte statistics are not safe bounds.
                let exact =
                    stats.is_some_and(|s| !byte_like || (s.min_is_exact() && s.max_is_exact()));
                let num_rows = row_groups[rg].num_rows().max(0) as u64;
                let null_count = (!nulls.is_null(rg)).then(|| nulls.value(rg));
                let may_match_null = self.columns[i].has_null && null_count != Some(0);
                let all_null = null_count == Some(num_rows);
                let may_match_value = !all_null
                    && (!exact || mins.is_null(rg) || maxes.is_null(rg) || {
                        let lo = min_rows.row(rg);
                        let hi = max_rows.row(rg);
                        let range = self.columns[i].range_within(lo.data(), hi.data());
                        let any = !range.is_empty();
                        if !may_match_null {
                            ranges[rg][i] = Some(range);
                        }
                        any
                    });
                if !may_match_null && !may_match_value {
                    *keep_rg = false;
                }
            }
        }
        Ok(keep
            .into_iter()
            .zip(ranges)
            .map(|(k, r)| k.then_some(r))
            .collect())
    }

    /// Whether key column `index` of the group holds `value` (null when `None`) among its
    /// deleted values: what every row of a file that lacks the column reads.
    fn may_match_constant(&self, index: usize, value: Option<&Literal>) -> Result<bool> {
        let values = &self.columns[index];
        let Some(value) = value else {
            return Ok(values.has_null);
        };
        let data_type = self.key_columns.data_type(index);
        let Some(array) = crate::keys::literal_to_array(value, data_type) else {
            // Cannot encode it: the rows must be read (and then fail loudly if need be).
            return Ok(true);
        };
        let encoded = self.key_columns.encode_column(index, &array)?;
        let row = encoded.row(0);
        Ok(!values.range_within(row.data(), row.data()).is_empty())
    }

    /// False when a bloom filter of `row_group` proves that none of the deleted values
    /// in its range (`ranges`, from `row_group_candidates`) of some key column is there.
    /// A key matches only if every one of its columns does, so one column suffices.
    async fn bloom_rules_out(
        &self,
        file: &mut ParquetFile,
        row_group: usize,
        ranges: &ColumnRanges,
    ) -> Result<bool> {
        for (i, range) in ranges.iter().enumerate() {
            let Some(range) = range else { continue };
            if range.is_empty() {
                return Ok(true);
            }
            if range.len() > BLOOM_MAX_PROBES {
                continue;
            }
            let Some(leaf) = file.leaf_index(self.key_columns.field_ids[i]) else {
                continue;
            };
            let physical = file
                .metadata()
                .file_metadata()
                .schema_descr()
                .column(leaf)
                .physical_type();
            // The filter only ever saves a read: one that cannot be read is no filter.
            let filter = match file.bloom_filter(row_group, leaf).await {
                Ok(Some(filter)) => filter,
                Ok(None) => continue,
                Err(e) => {
                    tracing::warn!(error = %e, row_group, "ignoring an unreadable bloom filter");
                    continue;
                }
            };
            let values = &self.columns[i];
            let decoded = self
                .key_columns
                .decode_column(i, range.clone().map(|j| values.value(j)))?;
            let Some(probes) = plain_values(&decoded, physical) else {
                continue;
            };
            if !probes.iter().any(|p| filter.check(p.as_slice())) {
                return Ok(true);
            }
        }
        Ok(false)
    }
}

/// Values as Parquet's PLAIN encoding stores them for `physical` (what its bloom filters
/// hash), or `None` for a type this does not map. Timestamps (microseconds) and dates are
/// stored as their INT64 / INT32 values.
fn plain_values(array: &ArrayRef, physical: parquet::basic::Type) -> Option<Vec<Vec<u8>>> {
    use arrow_array::types::{Int32Type, Int64Type};
    use parquet::basic::Type as Physical;
    let out: Vec<Vec<u8>> = match (array.data_type(), physical) {
        (
            DataType::Int64 | DataType::Timestamp(arrow_schema::TimeUnit::Microsecond, _),
            Physical::INT64,
        ) => arrow_cast::cast(array, &DataType::Int64)
            .ok()?
            .as_primitive::<Int64Type>()
            .iter()
            .flatten()
            .map(|v| v.to_le_bytes().to_vec())
            .collect(),
        (DataType::Int32 | DataType::Date32, Physical::INT32) => {
            arrow_cast::cast(array, &DataType::Int32)
                .ok()?
                .as_primitive::<Int32Type>()
                .iter()
                .flatten()
                .map(|v| v.to_le_bytes().to_vec())
                .collect()
        }
        (DataType::Utf8, Physical::BYTE_ARRAY) => array
            .as_string::<i32>()
            .iter()
            .flatten()
            .map(|v| v.as_bytes().to_vec())
            .collect(),
        (DataType::Binary, Physical::BYTE_ARRAY) => array
            .as_binary::<i32>()
            .iter()
            .flatten()
            .map(<[u8]>::to_vec)
            .collect(),
        _ => return None,
    };
    Some(out)
}

fn cast_to(array: &ArrayRef, to: &DataType) -> Option<ArrayRef> {
    if array.data_type() == to {
        Some(array.clone())
    } else {
        arrow_cast::cast(array, to).ok()
    }
}

/// Result of scanning one data file.
struct FileScan {
    path: String,
    positions: RoaringTreemap,
    row_groups_read: u64,
    row_groups_pruned: u64,
    row_groups_pruned_by_bloom: u64,
    rows_scanned: u64,
    bytes_read: u64,
}

/// Resolves `groups` against the live data files of `files`.
pub async fn resolve(
    table: &LoadedTable,
    files: &TableFiles,
    groups: &[DeleteGroup],
    options: &ResolveOptions,
) -> Result<Resolved> {
    // Delete rows bound the distinct keys from above, so this never underestimates.
    let delete_rows: u64 = groups.iter().map(DeleteGroup::delete_rows).sum();
    let needed = delete_rows.saturating_mul(BYTES_PER_KEY);
    let passes = needed.div_ceil(options.key_memory_budget.max(1)).max(1);
    // Once for all groups and passes (it may re-read the metadata file).
    let schema = table.metadata.current_schema();
    let key_fields: Vec<NestedFieldRef> = groups
        .iter()
        .flat_map(|g| &g.equality_ids)
        .filter_map(|id| schema.as_struct().field_by_id(*id).cloned())
        .collect();
    table.refuse_unparsed_defaults(&key_fields).await?;
    let mut resolved = Resolved::default();
    for index in 0..passes {
        let pass = resolve_pass(table, files, groups, KeyPass { index, passes }, options).await?;
        // Passes hold disjoint keys, so a position is found by at most one pass.
        for (path, positions) in pass.positions {
            *resolved.positions.entry(path).or_default() |= positions;
        }
        resolved.candidates.extend(pass.candidates);
        resolved.metrics.add(&pass.metrics);
    }
    resolved.metrics.key_passes = passes;
    resolved.metrics.groups = groups.len() as u64;
    resolved.metrics.live_data_files = files.data_files.len() as u64;
    resolved.metrics.candidate_files = resolved.candidates.len() as u64;
    resolved.metrics.files_with_matches = resolved.positions.len() as u64;
    resolved.metrics.positions_matched = resolved.positions.values().map(|p| p.len()).sum();
    Ok(resolved)
}

impl ResolveMetrics {
    /// Adds the work counters of one pass.
    fn add(&mut self, pass: &ResolveMetrics) {
        self.delete_files_read += pass.delete_files_read;
        self.delete_keys += pass.delete_keys;
        self.pruned_by_bounds += pass.pruned_by_bounds;
        self.files_opened += pass.files_opened;
        self.row_groups_read += pass.row_groups_read;
        self.row_groups_pruned += pass.row_groups_pruned;
        self.row_groups_pruned_by_bloom += pass.row_groups_pruned_by_bloom;
        self.files_pruned_by_footer += pass.files_pruned_by_footer;
        self.rows_scanned += pass.rows_scanned;
        self.bytes_read += pass.bytes_read;
    }
}

/// One pass over the candidates with one share of the keys.
async fn resolve_pass(
    table: &LoadedTable,
    files: &TableFiles,
    groups: &[DeleteGroup],
    pass: KeyPass,
    options: &ResolveOptions,
) -> Result<Resolved> {
    let mut resolved = Resolved::default();
    let metrics = &mut resolved.metrics;

    let name_mapping = table.name_mapping()?;
    let mut loaded = Vec::with_capacity(groups.len());
    for group in groups {
        loaded.push(
            load_group_keys(
                table,
                group,
                pass,
                options,
                name_mapping.as_deref(),
                metrics,
            )
            .await?,
        );
    }
    metrics.delete_keys = loaded.iter().map(|g| g.keys.len() as u64).sum();
    let loaded = Arc::new(loaded);

    // Candidates: per data file, the groups that may apply after bound pruning, and the
    // columns they read (files with the same surviving groups share one projection).
    let mut work: Vec<(LiveFile, Vec<usize>, Arc<KeyProjection>)> = Vec::new();
    let mut projections: HashMap<Vec<usize>, Arc<KeyProjection>> = HashMap::new();
    for data in &files.data_files {
        let in_scope: Vec<usize> = loaded
            .iter()
            .enumerate()
            .filter(|(_, g)| g.group.may_apply_to(data))
            .map(|(i, _)| i)
            .collect();
        if in_scope.is_empty() {
            continue;
        }
        metrics.candidate_files += 1;
        resolved.candidates.insert(data.path().to_string());
        let surviving: Vec<usize> = in_scope
            .into_iter()
            .filter(|&i| !options.bound_pruning || loaded[i].may_match_file(data))
            .collect();
        if surviving.is_empty() {
            metrics.pruned_by_bounds += 1;
            continue;
        }
        let projection = match projections.get(&surviving) {
            Some(p) => p.clone(),
            None => {
                let p = Arc::new(KeyProjection::new(&loaded, &surviving)?);
                projections.insert(surviving.clone(), p.clone());
                p
            }
        };
        work.push((data.clone(), surviving, projection));
    }

    let scans: Vec<FileScan> =
        futures::stream::iter(work.into_iter().map(|(data, group_ids, projection)| {
            let table = table.clone();
            let loaded = loaded.clone();
            let options = options.clone();
            let name_mapping = name_mapping.clone();
            let path = data.path().to_string();
            async move {
                let task = tokio::spawn(async move {
                    let context = ScanContext {
                        table: &table,
                        loaded: &loaded,
                        options: &options,
                        name_mapping: name_mapping.as_deref(),
                    };
                    scan_file(&context, &data, &group_ids, &projection).await
                });
                // A resolve that is dropped (deadline, error elsewhere) stops its scans too.
                let _abort_on_drop = AbortOnDrop(task.abort_handle());
                task.await.map_err(|e| Error::ScanTask {
                    path,
                    message: e.to_string(),
                })?
            }
        }))
        .buffer_unordered(options.parallelism.max(1))
        .try_collect()
        .await?;

    for scan in scans {
        metrics.files_opened += 1;
        metrics.row_groups_read += scan.row_groups_read;
        metrics.row_groups_pruned += scan.row_groups_pruned;
        metrics.row_groups_pruned_by_bloom += scan.row_groups_pruned_by_bloom;
        if scan.row_groups_read == 0 {
            metrics.files_pruned_by_footer += 1;
        }
        metrics.rows_scanned += scan.rows_scanned;
        metrics.bytes_read += scan.bytes_read;
        if !scan.positions.is_empty() {
            metrics.files_with_matches += 1;
            metrics.positions_matched += scan.positions.len();
            resolved.positions.insert(scan.path, scan.positions);
        }
    }
    Ok(resolved)
}

/// The key columns a set of groups reads (their union), as read from each file.
struct KeyProjection {
    fields: Vec<NestedFieldRef>,
    /// Field id to column index in the batches read with `fields`.
    column_of: HashMap<i32, usize>,
}

impl KeyProjection {
    fn new(loaded: &[GroupKeys], group_ids: &[usize]) -> Result<Self> {
        let mut fields: Vec<NestedFieldRef> = Vec::new();
        for &g in group_ids {
            for field in &loaded[g].key_columns.fields {
                if !fields.iter().any(|f| f.id == field.id) {
                    fields.push(field.clone());
                }
            }
        }
        let column_of = fields.iter().enumerate().map(|(i, f)| (f.id, i)).collect();
        Ok(Self { fields, column_of })
    }
}

/// What every file scan of one pass shares.
struct ScanContext<'a> {
    table: &'a LoadedTable,
    loaded: &'a [GroupKeys],
    options: &'a ResolveOptions,
    name_mapping: Option<&'a NameMapping>,
}

async fn scan_file(
    context: &ScanContext<'_>,
    data: &LiveFile,
    group_ids: &[usize],
    projection: &KeyProjection,
) -> Result<FileScan> {
    let (table, loaded, options) = (context.table, context.loaded, context.options);
    let mut file = ParquetFile::open(
        &table.file_io,
        data.path(),
        Some(data.file.file_size_in_bytes()),
    )
    .await?
    .with_name_mapping(context.name_mapping);
    // The invariant: every candidate's key columns are resolved faithfully (by field id,
    // through the name mapping, or as a known default), or the whole resolve fails with
    // an error naming the file and the field. Checked before any pruning, so a file whose
    // row groups are all skipped is held to it too.
    let sources: HashMap<i32, FieldSource> = projection
        .fields
        .iter()
        .map(|f| Ok((f.id, file.source_of(f)?)))
        .collect::<Result<_>>()?;
    let total_groups = file.row_group_rows().len();
    let mut keep = vec![!options.row_group_pruning; total_groups];
    let mut pruned_by_bloom = 0;
    if options.row_group_pruning {
        let candidates: Vec<Vec<Option<ColumnRanges>>> = group_ids
            .iter()
            .map(|&g| loaded[g].row_group_candidates(&file, &sources))
            .collect::<Result<_>>()?;
        for (rg, keep_rg) in keep.iter_mut().enumerate() {
            let mut by_stats = false;
            for (n, &g) in group_ids.iter().enumerate() {
                let Some(ranges) = &candidates[n][rg] else {
                    continue;
                };
                by_stats = true;
                if !options.bloom_pruning
                    || !loaded[g].bloom_rules_out(&mut file, rg, ranges).await?
                {
                    *keep_rg = true;
                    break;
                }
            }
            if by_stats && !*keep_rg {
                pruned_by_bloom += 1;
            }
        }
    }
    let selected: Vec<usize> = (0..total_groups).filter(|&i| keep[i]).collect();
    let mut scan = FileScan {
        path: data.path().to_string(),
        positions: RoaringTreemap::new(),
        row_groups_read: selected.len() as u64,
        row_groups_pruned: (total_groups - selected.len()) as u64,
        row_groups_pruned_by_bloom: pruned_by_bloom,
        rows_scanned: 0,
        bytes_read: 0,
    };
    if selected.is_empty() {
        return Ok(scan);
    }

    // Read the union of the groups' key columns once.
    let leaves: Vec<usize> = projection
        .fields
        .iter()
        .filter_map(|f| file.leaf_index(f.id))
        .collect();
    scan.bytes_read = file.projected_bytes(&leaves, &selected);

    let mut stream = Box::pin(file.read(&projection.fields, Some(selected), options.batch_size)?);
    while let Some((first, batch)) = stream.try_next().await? {
        scan.rows_scanned += batch.num_rows() as u64;
        for &g in group_ids {
            match_batch(
                &loaded[g],
                data,
                &batch,
                &projection.column_of,
                first,
                &mut scan.positions,
            )?;
        }
    }
    Ok(scan)
}

fn match_batch(
    group: &GroupKeys,
    data: &LiveFile,
    batch: &RecordBatch,
    column_of: &HashMap<i32, usize>,
    first_position: u64,
    positions: &mut RoaringTreemap,
) -> Result<()> {
    let deletes = |seq: Option<i64>| seq.is_some_and(|seq| data.data_sequence_number < seq);
    match &group.keys {
        KeySet::Long {
            values,
            null,
            filter,
        } => {
            let filter = filter.as_ref();
            let column = batch
                .column(column_of[&group.key_columns.field_ids[0]])
                .as_primitive_opt::<Int64Type>()
                .ok_or_else(|| {
                    Error::file(data.path(), "key column is not a long", "type mismatch")
                })?;
            if column.null_count() == 0 {
                for (offset, &value) in column.values().iter().enumerate() {
                    if deletes(KeySet::long(values, filter, value)) {
                        positions.insert(first_position + offset as u64);
                    }
                }
            } else {
                for (offset, value) in column.iter().enumerate() {
                    let seq = match value {
                        Some(v) => KeySet::long(values, filter, v),
                        None => *null,
                    };
                    if deletes(seq) {
                        positions.insert(first_position + offset as u64);
                    }
                }
            }
        }
        KeySet::Rows(keys) => {
            let columns: Vec<ArrayRef> = group
                .key_columns
                .field_ids
                .iter()
                .map(|id| batch.column(column_of[id]).clone())
                .collect();
            let rows = group.key_columns.encode(&columns)?;
            for (offset, row) in rows.iter().enumerate() {
                if deletes(keys.get(row.as_ref()).copied()) {
                    positions.insert(first_position + offset as u64);
                }
            }
        }
    }
    Ok(())
}

/// Aborts a spawned task when dropped, so that cancelled work does not run on.
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

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

    #[test]
    fn plain_values_match_parquet_physical_encodings() {
        use arrow_array::{Int32Array, Int64Array, StringArray};
        use parquet::basic::Type as Physical;
        let longs: ArrayRef = Arc::new(Int64Array::from(vec![Some(-2), None, Some(7)]));
        assert_eq!(
            plain_values(&longs, Physical::INT64),
            Some(vec![
                (-2i64).to_le_bytes().to_vec(),
                7i64.to_le_bytes().to_vec()
            ])
        );
        // A column stored narrower than the table's type (int promoted to long) is not
        // probed: its filter hashed other bytes.
        assert_eq!(plain_values(&longs, Physical::INT32), None);
        let micros: ArrayRef =
            Arc::new(arrow_array::TimestampMicrosecondArray::from(vec![5]).with_timezone("UTC"));
        assert_eq!(
            plain_values(&micros, Physical::INT64),
            Some(vec![5i64.to_le_bytes().to_vec()])
        );
        let dates: ArrayRef = Arc::new(arrow_array::Date32Array::from(vec![-3]));
        assert_eq!(
            plain_values(&dates, Physical::INT32),
            Some(vec![(-3i32).to_le_bytes().to_vec()])
        );
        let ints: ArrayRef = Arc::new(Int32Array::from(vec![1]));
        assert_eq!(
            plain_values(&ints, Physical::INT32),
            Some(vec![vec![1, 0, 0, 0]])
        );
        let strings: ArrayRef = Arc::new(StringArray::from(vec!["é", ""]));
        assert_eq!(
            plain_values(&strings, Physical::BYTE_ARRAY),
            Some(vec!["é".as_bytes().to_vec(), vec![]])
        );
        assert_eq!(plain_values(&strings, Physical::FIXED_LEN_BYTE_ARRAY), None);
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
