//! The deleted keys of a group: loaded from its delete files into a hash set (with the
//! sequence number each key was deleted at), the per-column sorted values that pruning
//! compares with statistics, and the fast hashing both the set and its filter use.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{Array, RecordBatch};
use arrow_schema::DataType;
use futures::channel::oneshot;
use futures::future::{BoxFuture, FutureExt};
use futures::{StreamExt, TryStreamExt};
use iceberg::spec::{DataFileFormat, NameMapping};
use tokio::sync::OwnedSemaphorePermit;

use super::budget::ReadBudget;
use super::early::GroupWatch;
use super::long_keys::{LongKeys, LongKeysBuilder};
use super::prune::DeletedValues;
use super::string_keys::{StringKeys, StringKeysBuilder, for_each_string};
use super::{ResolveMetrics, ResolveOptions};
use crate::keys::KeyColumns;
use crate::plan::DeleteGroup;
use crate::table::{LiveFile, LoadedTable};
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

/// SplitMix64's finalizer: a bijection on u64 that scrambles well. Public so that the
/// test workloads' random stream (eqdv-workload) uses this one copy.
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

    /// The same for a long key (null in the first pass): any even split will do, as
    /// only the loading asks which pass holds a key.
    fn owns_long(&self, value: Option<i64>) -> bool {
        self.passes <= 1 || value.map_or(0, |v| mix64(v as u64) % self.passes) == self.index
    }

    /// The same for a string key's bytes (null in the first pass).
    fn owns_string(&self, value: Option<&[u8]>) -> bool {
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
    pub(super) bloom_hashes: super::bloom::BloomHashes,
    /// The keys' key-index hashes (every key read, this pass's or not: a hash looked up
    /// in vain costs nothing but the lookup), when the group has an index to ask.
    pub(super) index_hashes: Vec<i64>,
}

/// Loads `group`'s share of the keys for `pass`, feeding `watch` as its delete files are
/// consumed; returns them with the reads' counters (delete files and bytes read).
#[allow(clippy::too_many_arguments)]
pub(super) async fn load_group_keys(
    table: &LoadedTable,
    group: &DeleteGroup,
    pass: KeyPass,
    options: &ResolveOptions,
    name_mapping: Option<&NameMapping>,
    budget: &ReadBudget,
    mut watch: Option<GroupWatch<'_>>,
    with_index_hashes: bool,
) -> Result<(GroupKeys, ResolveMetrics)> {
    let mut metrics = ResolveMetrics::default();
    let schema = table.metadata.current_schema();
    refuse_dropped_fields(table, group)?;
    let key_columns = KeyColumns::new(&table.name.to_string(), schema, &group.equality_ids)?;
    // The one-column sets compare the leaf alone: a nested key is also its structs'
    // nulls (see `keys::nested`), so it goes through the encoded rows.
    let one_leaf = key_columns.len() == 1 && !key_columns.is_nested();
    let single_long = one_leaf && *key_columns.data_type(0) == DataType::Int64;
    let single_string = one_leaf
        && matches!(
            key_columns.data_type(0),
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
        );
    // This pass's share of the delete rows: enough room from the start, so that the
    // set does not grow past it on the way.
    let expected = usize::try_from(group.delete_rows().div_ceil(pass.passes.max(1)))
        .unwrap_or(usize::MAX)
        .saturating_add(1024);
    let mut loading = if single_long {
        Loading::Long(LongKeysBuilder::new(
            group.delete_files.iter().map(|d| d.data_sequence_number),
            expected,
        ))
    } else if single_string {
        Loading::Str {
            keys: StringKeysBuilder::new(expected),
            columns: ColumnValues::empty_columns(1),
        }
    } else {
        Loading::Rows {
            keys: HashMap::with_hasher(KeyHashBuilder::new()),
            columns: ColumnValues::empty_columns(key_columns.len()),
        }
    };
    // The files are fetched concurrently (each open and read is a few round trips to
    // object storage) but consumed in file order: the keys, their sequence numbers and
    // the first error are those of a sequential load. A file is admitted once its
    // decoded batches fit the read budget and holds its share until they are consumed.
    // Admission follows file order (each file waits for the one before it to be
    // admitted, a chain of one-shot signals), so a group's earliest unconsumed file is
    // never behind a later one for budget, and every group moves on. At most
    // `parallelism` files of this group are read ahead; all groups share `budget`.
    // Boxed as `Send` futures: left to inference, the stream's type asks for `Send` for
    // every lifetime of its references, and the resolve stops being `Send`.
    let columns = &key_columns;
    let mut turn: Option<oneshot::Receiver<()>> = None;
    let reads: Vec<BoxFuture<'_, Result<(LoadedDeleteFile<'_>, OwnedSemaphorePermit)>>> = group
        .delete_files
        .iter()
        .map(|delete| {
            let (admitted, next) = oneshot::channel::<()>();
            let previous = turn.replace(next);
            async move {
                if let Some(previous) = previous {
                    // Cancelled when the earlier file failed or was dropped: the order
                    // is kept either way.
                    let _ = previous.await;
                }
                let held = budget.bytes(decoded_bytes(delete, columns)).await;
                drop(admitted);
                let held = held?;
                let loaded =
                    read_delete_file(table, delete, columns, options, name_mapping, budget).await?;
                Ok((loaded, held))
            }
            .boxed()
        })
        .collect();
    let mut loads = futures::stream::iter(reads).buffered(options.parallelism.max(1));
    let mut index_hashes = Vec::new();
    while let Some((loaded, _held)) = loads.try_next().await? {
        let LoadedDeleteFile {
            delete,
            batches,
            bytes,
        } = loaded;
        metrics.bytes_read += bytes;
        metrics.delete_files_read += 1;
        let seq = delete.data_sequence_number;
        for batch in batches {
            if let Some(watch) = &mut watch {
                watch.add_batch(&key_columns, batch.columns());
            }
            if with_index_hashes {
                crate::key_index::hash::hash_keys(
                    &key_columns,
                    batch.columns(),
                    &mut index_hashes,
                )?;
            }
            match &mut loading {
                Loading::Long(keys) => {
                    let column =
                        batch
                            .column(0)
                            .as_primitive_opt::<Int64Type>()
                            .ok_or_else(|| {
                                Error::file(
                                    delete.path(),
                                    "key column is not a long",
                                    "type mismatch",
                                )
                            })?;
                    let seq = keys.seq_index(seq);
                    for value in column.iter().filter(|v| pass.owns_long(*v)) {
                        keys.push(value, seq);
                    }
                }
                Loading::Str { keys, columns } => {
                    let array = batch.column(0);
                    let mut mine = Vec::with_capacity(array.len());
                    let mut full = false;
                    let is_string = for_each_string(array.as_ref(), |_, value| {
                        let owned = pass.owns_string(value);
                        mine.push(owned);
                        if owned {
                            full |= keys.push(value, seq).is_none();
                        }
                    });
                    if !is_string {
                        return Err(Error::file(
                            delete.path(),
                            "key column is not a string",
                            "type mismatch",
                        ));
                    }
                    if full {
                        return Err(Error::InvalidInput(format!(
                            "equality delete file {} brings its group past {} distinct string keys in one pass; lower the key memory budget so that the keys are split into passes",
                            delete.path(),
                            u32::MAX / 2
                        )));
                    }
                    // The column's values for pruning, as for any other key.
                    let encoded = key_columns.encode_column(0, array)?;
                    for (row_index, row) in encoded.iter().enumerate() {
                        if !mine[row_index] {
                            continue;
                        }
                        if array.is_valid(row_index) {
                            columns[0].push(row.as_ref());
                        } else {
                            columns[0].has_null = true;
                        }
                    }
                }
                Loading::Rows { keys, columns } => {
                    let arrays = batch.columns().to_vec();
                    let rows = key_columns.encode(&arrays)?;
                    // Only this pass's share of the keys is kept.
                    let mine: Vec<bool> = rows.iter().map(|row| pass.owns(row.as_ref())).collect();
                    for (row, _) in rows.iter().zip(&mine).filter(|(_, m)| **m) {
                        let max = keys.entry(row.as_ref().into()).or_insert(i64::MIN);
                        *max = (*max).max(seq);
                    }
                    for (i, array) in arrays.iter().enumerate() {
                        // Per column, the leaf's values (null under a null struct too).
                        let array = crate::keys::leaf(array)?;
                        let encoded = key_columns.encode_column(i, &array)?;
                        for (row_index, row) in encoded.iter().enumerate() {
                            if !mine[row_index] {
                                continue;
                            }
                            if array.is_valid(row_index) {
                                columns[i].push(row.as_ref());
                            } else {
                                columns[i].has_null = true;
                            }
                        }
                    }
                }
            }
        }
        if let Some(watch) = &mut watch {
            watch.file_loaded(&key_columns);
        }
    }
    // It borrows `key_columns`, which moves into the result.
    drop(loads);
    if let Some(watch) = &mut watch {
        watch.all_loaded(&key_columns);
    }
    let (keys, columns) = match loading {
        Loading::Long(keys) => (KeySet::Long(keys.build()), Vec::new()),
        Loading::Str { keys, columns } => (
            KeySet::Str(keys.build()),
            columns.into_iter().map(ColumnValues::sorted).collect(),
        ),
        Loading::Rows { keys, columns } => (
            KeySet::Rows(keys),
            columns.into_iter().map(ColumnValues::sorted).collect(),
        ),
    };
    let keys = GroupKeys {
        group: group.clone(),
        key_columns,
        keys,
        columns,
        bloom_hashes: Default::default(),
        index_hashes,
    };
    Ok((keys, metrics))
}

/// A group's keys while its delete files are read.
enum Loading {
    Long(LongKeysBuilder),
    Str {
        keys: StringKeysBuilder,
        columns: Vec<ColumnValues>,
    },
    Rows {
        keys: HashMap<Box<[u8]>, i64, KeyHashBuilder>,
        columns: Vec<ColumnValues>,
    },
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
    fn long_bound(&self, i: usize, bound: Option<&[u8]>) -> Result<Option<i64>> {
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

impl DeletedValues for GroupKeys {
    fn column_has_null(&self, i: usize) -> bool {
        match &self.keys {
            KeySet::Long(keys) => keys.has_null(),
            KeySet::Rows(_) | KeySet::Str(_) => self.columns[i].has_null,
        }
    }

    fn column_any_within(
        &self,
        i: usize,
        lower: Option<&[u8]>,
        upper: Option<&[u8]>,
    ) -> Result<bool> {
        match &self.keys {
            KeySet::Long(keys) => {
                let range =
                    keys.range_within(self.long_bound(i, lower)?, self.long_bound(i, upper)?);
                Ok(!range.is_empty())
            }
            KeySet::Rows(_) | KeySet::Str(_) => Ok(self.columns[i].any_within(lower, upper)),
        }
    }
}

/// One equality delete file's key columns, read whole.
struct LoadedDeleteFile<'a> {
    delete: &'a LiveFile,
    batches: Vec<RecordBatch>,
    /// Compressed bytes of the key column chunks.
    bytes: u64,
}

/// What the decoded key columns of a delete file hold, estimated before it is read:
/// at least its size on storage, and 8 bytes a value per key column (more for wide
/// values, which the file size then reflects).
fn decoded_bytes(delete: &LiveFile, key_columns: &KeyColumns) -> u64 {
    let rows = delete.file.record_count();
    let values = rows.saturating_mul(8 * key_columns.len() as u64);
    values.max(delete.file.file_size_in_bytes())
}

async fn read_delete_file<'a>(
    table: &LoadedTable,
    delete: &'a LiveFile,
    key_columns: &KeyColumns,
    options: &ResolveOptions,
    name_mapping: Option<&NameMapping>,
    budget: &ReadBudget,
) -> Result<LoadedDeleteFile<'a>> {
    // One permit a read, released when the read is done (not when its batches are
    // consumed: a group waiting for an earlier file must not starve the others).
    let _permit = budget.file().await?;
    match delete.file.file_format() {
        DataFileFormat::Parquet | DataFileFormat::Orc => {}
        DataFileFormat::Avro => {
            let batches = crate::avro_columns::read_avro_columns(
                &table.file_io,
                delete.path(),
                (&key_columns.fields, &key_columns.arrow_schema),
                name_mapping,
                options.batch_size,
            )
            .await?;
            return Ok(LoadedDeleteFile {
                delete,
                batches,
                bytes: delete.file.file_size_in_bytes(),
            });
        }
        other => {
            return Err(Error::file(
                delete.path(),
                format!(
                    "equality delete files in {other:?} are not supported (Parquet, Avro and \
                     ORC are)"
                ),
                "unsupported delete file",
            ));
        }
    }
    let opened = crate::file_rows::read_rows(
        &table.file_io,
        delete.path(),
        delete.file.file_size_in_bytes(),
        delete.file.file_format(),
        name_mapping,
        (&key_columns.fields, key_columns.arrow_schema.clone()),
        options.batch_size,
    )
    .await?;
    require_key_fields(delete, key_columns, |id| {
        opened.columns.names_of(id).is_some()
    })?;
    let batches = opened.rows.map_ok(|(_, batch)| batch).try_collect().await?;
    let bytes = opened.bytes.load(std::sync::atomic::Ordering::Relaxed);
    Ok(LoadedDeleteFile {
        delete,
        batches,
        bytes,
    })
}

/// An equality delete file must hold every one of its equality fields.
fn require_key_fields(
    delete: &LiveFile,
    key_columns: &KeyColumns,
    has_field: impl Fn(i32) -> bool,
) -> Result<()> {
    match key_columns.field_ids.iter().find(|&&id| !has_field(id)) {
        Some(id) => Err(Error::file(
            delete.path(),
            format!("equality delete file lacks equality field id {id}"),
            "invalid delete file",
        )),
        None => Ok(()),
    }
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
}
