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
//!
//! This file holds the options, the results and the entry point; `key_set` loads and
//! hashes the deleted keys, `prune` decides what need not be read, `early` fetches the
//! footers of candidates the keys loaded so far confirm while the rest load,
//! `index_lookup` asks the key index which covered candidates may hold a key, and `scan`
//! reads the candidates' key columns in parallel and probes them.

mod bloom;
mod budget;
mod early;
mod file_scan;
mod group_keys;
mod index_lookup;
mod key_hash;
mod key_set;
mod long_keys;
mod prune;
mod scan;
mod string_keys;

use std::collections::{BTreeMap, HashMap, HashSet};

use futures::FutureExt;
use iceberg::spec::{NestedFieldRef, PrimitiveType, Type};
use roaring::RoaringTreemap;
use serde::{Deserialize, Serialize};

pub use index_lookup::ExistingDvs;
pub use key_hash::{KeyHashBuilder, KeyHasher, mix64};

use crate::Result;
use crate::key_index::{IndexKey, IndexStates, KeyIndexOptions};
use crate::plan::DeleteGroup;
use crate::table::{LoadedTable, TableFiles};
use group_keys::KeyPass;

/// Tuning knobs for resolving.
#[derive(Clone, Debug)]
pub struct ResolveOptions {
    /// Files read at once (data file scans, and delete file reads). Against object
    /// storage a read is mostly waiting for round trips, so this is well above the
    /// cores: the decoding runs on the runtime's worker threads whatever this is, and
    /// memory is bounded by `read_memory_budget`.
    pub parallelism: usize,
    /// Bytes the reads in flight may hold at once: the compressed key column chunks of
    /// the row group each scan is decoding, and the decoded batches of delete files
    /// read ahead of their turn. Reads wait for their share, so with large files fewer
    /// run at once than `parallelism` allows.
    pub read_memory_budget: u64,
    /// Rows per decoded batch.
    pub batch_size: usize,
    /// Use Parquet row-group statistics to skip row groups.
    pub row_group_pruning: bool,
    /// Use Parquet bloom filters (where the writer wrote them) to skip row groups whose
    /// range holds a few deleted keys that the filter says are absent: files whose
    /// bounds were widened by upserts, random keys, deletes of keys never written.
    pub bloom_pruning: bool,
    /// Use manifest column bounds to skip data files, and manifest partition summaries
    /// to skip data manifests out of the groups' partitions. Turn off for tables whose
    /// writers recorded bounds that are too narrow (iceberg-rust <= 0.10.1 could, for
    /// strings over 64 bytes spread over several row groups).
    pub bound_pruning: bool,
    /// Memory for deleted keys. When the keys of the groups would need more, they are
    /// split by hash into passes that each hold a share of the keys and each scan the
    /// candidates again: memory stays bounded, at the price of more reads.
    pub key_memory_budget: u64,
    /// Data file footers kept from earlier resolves (shared by clones of these options;
    /// off by default): a process converting the same table again and again opens the
    /// files it opened before without a request (see [`crate::parquet_io::FooterCache`]),
    /// and the key index's leaves likewise.
    pub footer_cache: crate::parquet_io::FooterCache,
    /// Whether keys are looked up in the table's key index (and conversions keep it);
    /// the table's `eqdv.key-index.*` properties override it (see [`crate::key_index`]).
    pub key_index: KeyIndexOptions,
    /// Where the scan (and the key index's build) report the data files they read, for
    /// a caller that shows progress; nowhere by default.
    pub progress: crate::progress::Progress,
}

/// Bytes a loaded key costs, estimated: the encoded key and its hash-map slot, plus the
/// per-column copies kept for pruning. A single long key costs far less
/// (`long_keys::BYTES_PER_LONG_KEY`).
const BYTES_PER_KEY: u64 = 160;

pub use crate::storage::DEFAULT_PARALLELISM;

/// Bytes the reads in flight hold by default: 64 reads of 1 MiB key column chunks.
pub const DEFAULT_READ_MEMORY_BUDGET: u64 = 64 << 20;

impl Default for ResolveOptions {
    fn default() -> Self {
        Self {
            parallelism: DEFAULT_PARALLELISM,
            read_memory_budget: DEFAULT_READ_MEMORY_BUDGET,
            batch_size: 8192,
            row_group_pruning: true,
            bloom_pruning: true,
            bound_pruning: true,
            key_memory_budget: 1 << 30,
            footer_cache: Default::default(),
            key_index: KeyIndexOptions::default(),
            progress: Default::default(),
        }
    }
}

/// What resolving did, for reports and metrics.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ResolveMetrics {
    pub groups: u64,
    /// Key passes (more than one when the keys exceed the memory budget).
    pub key_passes: u64,
    pub delete_files_read: u64,
    /// Distinct deleted keys over all groups.
    pub delete_keys: u64,
    /// Live data files read: all of them, or after a scoped read those of the groups'
    /// partitions (the rest are counted in the report's `skipped_data`).
    pub live_data_files: u64,
    /// Data files in scope of some group (partition and sequence number).
    pub candidate_files: u64,
    /// Candidates skipped because no key fits their column bounds.
    pub pruned_by_bounds: u64,
    pub files_opened: u64,
    /// Bytes fetched to open the data files' footers (see
    /// [`crate::parquet_io::footer_hint`]).
    pub footer_bytes_read: u64,
    /// Files opened whose footer was longer than the bytes first read for it, so that it
    /// took a second request.
    pub footers_read_twice: u64,
    /// Files opened with a footer kept from an earlier resolve (no request).
    #[serde(default)]
    pub footers_from_cache: u64,
    /// Of the files opened, those whose footer fetch started as soon as the keys loaded
    /// so far confirmed them (one lay within their bounds; `early`), not after every
    /// group's keys had loaded.
    pub footers_opened_early: u64,
    pub row_groups_read: u64,
    pub row_groups_pruned: u64,
    /// Of the row groups pruned, those a bloom filter ruled out.
    pub row_groups_pruned_by_bloom: u64,
    /// Bloom filters read (each a read of its own unless it lies in the footer's).
    pub bloom_filters_read: u64,
    /// Files opened whose key columns were not read at all (every row group pruned).
    pub files_pruned_by_footer: u64,
    pub rows_scanned: u64,
    /// Compressed bytes of the column chunks read (data and delete files).
    pub bytes_read: u64,
    /// Data files with at least one newly deleted row.
    pub files_with_matches: u64,
    /// Files read that hold a deleted key at all, a row newer than its delete included:
    /// the files any exact converter reads (at least `files_with_matches`; once per
    /// key pass, as `files_opened`).
    pub files_holding_deleted_values: u64,
    /// The files that hold no deleted key but that bloom filters were expected to let
    /// through (their false positives): over the files whose row groups the filters
    /// judged, the sum of the chance that they would be read, from each filter's set
    /// bits and the values probed. Files read though a filter was not (or could not be)
    /// probed are not in it.
    pub expected_bloom_false_positives: f64,
    pub positions_matched: u64,
    /// Distinct key hashes looked up in key indexes (over all groups and passes).
    #[serde(default)]
    pub index_lookups: u64,
    /// Index leaf files probed, their row groups read and the bytes of those (hash and
    /// path columns), and the bytes of index metadata and covered lists read.
    #[serde(default)]
    pub index_leaves_read: u64,
    /// Of the leaves probed, those whose footer and page index a warm process had kept
    /// (`footer_cache`): opened without a request.
    #[serde(default)]
    pub index_leaves_from_cache: u64,
    #[serde(default)]
    pub index_row_groups_read: u64,
    #[serde(default)]
    pub index_bytes_read: u64,
    /// Candidates (after bound pruning) the index ruled out: covered, and holding none
    /// of the keys.
    #[serde(default)]
    pub pruned_by_index: u64,
    /// Candidates (after bound pruning) of a group with an index that the index does not
    /// cover: read as without one (the delta).
    #[serde(default)]
    pub index_delta_files: u64,
    /// Indexes the table names that could not be used (read, or reconciled with the
    /// table): the resolve went on without them.
    #[serde(default)]
    pub index_bypassed: u64,
    /// Candidates the index named that were not read because an existing DV already
    /// deletes every row of theirs the index named (a hot key's older rows).
    #[serde(default)]
    pub pruned_by_index_dvs: u64,
    /// Existing DVs read to find those (the merge that follows reuses them).
    #[serde(default)]
    pub index_dvs_read: u64,
    /// Files read at the rows the index named and nowhere else (every other file opened
    /// is read whole: its key columns over the row groups pruning kept).
    #[serde(default)]
    pub files_read_by_position: u64,
    /// Where the resolve's time went, in its steps one after another (milliseconds,
    /// summed over key passes): opening the key indexes, loading the deleted keys,
    /// looking them up, reading existing DVs to rule files out, and scanning.
    #[serde(default)]
    pub steps_ms: ResolveSteps,
    /// Of those, the files read through their offset index: only the pages holding the
    /// named rows were fetched (the index's bytes, when not in the footer's read, are
    /// in `footer_bytes_read`).
    #[serde(default)]
    pub offset_indexes_read: u64,
}

/// Milliseconds of a resolve's steps (see [`ResolveMetrics::steps_ms`]).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ResolveSteps {
    pub index_open: f64,
    pub keys: f64,
    pub index_lookup: f64,
    pub index_dvs: f64,
    pub scan: f64,
}

impl ResolveSteps {
    fn add(&mut self, other: &ResolveSteps) {
        self.index_open += other.index_open;
        self.keys += other.keys;
        self.index_lookup += other.index_lookup;
        self.index_dvs += other.index_dvs;
        self.scan += other.scan;
    }
}

/// Milliseconds since `start`.
pub(crate) fn ms_since(start: std::time::Instant) -> f64 {
    start.elapsed().as_secs_f64() * 1000.0
}

/// The deleted rows found, per data file.
#[derive(Debug, Default)]
pub struct Resolved {
    /// Data file path -> positions deleted by the groups (not yet merged with old DVs).
    pub positions: BTreeMap<String, RoaringTreemap>,
    /// Every data file that was in scope of a group (opened or pruned).
    pub candidates: HashSet<String>,
    /// The candidates bound pruning kept: the data files whose footers were opened (in
    /// any key pass). Benchmarks hand this list to other engines.
    pub opened: HashSet<String>,
    pub metrics: ResolveMetrics,
    /// The key index of each group's equality field set, as the resolve found it (empty
    /// when the key index is off): a conversion keeps them up to date from there.
    pub key_indexes: IndexStates,
    /// Existing DVs read to rule out files the index named (by the location and offset
    /// of their blob), for the merge with the new positions to reuse.
    pub existing_dvs: ExistingDvs,
    /// Key hashes of every row of the files the scan read whole that the key index's
    /// upkeep will fold in (not covered yet, or all of them for a build): the upkeep
    /// takes them instead of reading those files again.
    pub scanned_keys: ScannedKeys,
}

/// Key hashes of whole data files in position order, by equality field ids and path.
pub type ScannedKeys = HashMap<Vec<i32>, HashMap<String, Vec<i64>>>;

/// The indexes a resolve of `groups` over `files` opens (and its conversion keeps), of
/// a table whose index is in `parts` parts: of each group's field set, the parts of the
/// data files in scope, and every part the table names for a group that applies to
/// every partition.
fn index_keys(
    table: &LoadedTable,
    files: &TableFiles,
    groups: &[DeleteGroup],
    parts: u64,
) -> Vec<IndexKey> {
    let mut ids: Vec<&Vec<i32>> = groups.iter().map(|g| &g.equality_ids).collect();
    ids.sort();
    ids.dedup();
    let mut in_scope: Vec<String> = files
        .data_files
        .iter()
        .map(|f| crate::key_index::part_of_file(&table.metadata, parts, f))
        .collect();
    in_scope.sort();
    in_scope.dedup();
    let mut keys: Vec<IndexKey> = ids
        .iter()
        .flat_map(|ids| {
            in_scope.iter().map(|part| IndexKey {
                equality_ids: ids.to_vec(),
                part: part.clone(),
            })
        })
        .collect();
    if groups.iter().any(|g| g.global) {
        keys.extend(
            crate::key_index::named_indexes(table)
                .into_iter()
                .map(|(key, _)| key)
                .filter(|key| groups.iter().any(|g| g.global && key.serves(g, parts))),
        );
    }
    keys.sort();
    keys.dedup();
    keys
}

/// Resolves `groups` against the live data files of `files`.
pub async fn resolve(
    table: &LoadedTable,
    files: &TableFiles,
    groups: &[DeleteGroup],
    options: &ResolveOptions,
) -> Result<Resolved> {
    resolve_observed(table, files, groups, options, &|_| {}).await
}

/// [`resolve`], calling `on_match` with the path of each data file as soon as its scan
/// finds a deleted row (in a later key pass, a file may be named again).
pub async fn resolve_observed(
    table: &LoadedTable,
    files: &TableFiles,
    groups: &[DeleteGroup],
    options: &ResolveOptions,
    on_match: &(dyn Fn(&str) + Sync),
) -> Result<Resolved> {
    // Delete rows bound the distinct keys from above, so this never underestimates.
    let schema = table.metadata.current_schema();
    let needed: u64 = groups
        .iter()
        .map(|g| g.delete_rows().saturating_mul(bytes_per_key(schema, g)))
        .fold(0, u64::saturating_add);
    let passes = needed.div_ceil(options.key_memory_budget.max(1)).max(1);
    // Once for all groups and passes (it may re-read the metadata file).
    let key_fields: Vec<NestedFieldRef> = groups
        .iter()
        .flat_map(|g| &g.equality_ids)
        .filter_map(|id| schema.as_struct().field_by_id(*id).cloned())
        .collect();
    table.refuse_unparsed_defaults(&key_fields).await?;
    let mut resolved = Resolved::default();
    // The indexes open while the first pass loads its keys.
    let mut first = if options.key_index.for_table(table).enabled() {
        let parts = options.key_index.parts(table);
        let keys = index_keys(table, files, groups, parts);
        let named = keys
            .iter()
            .filter(|key| table.metadata.properties().contains_key(&key.property()))
            .cloned()
            .collect();
        let open = async move {
            let started = std::time::Instant::now();
            let states =
                futures::future::join_all(keys.iter().map(|key| {
                    crate::key_index::open_for(table, key, Some(parts), files.snapshot_id)
                }))
                .await;
            let mut opened = scan::OpenedIndexes {
                states: IndexStates::new(),
                bytes_read: 0,
                bypassed: 0,
                ms: 0.0,
            };
            for (key, state) in keys.into_iter().zip(states) {
                match &state {
                    crate::key_index::IndexState::Usable(index) => {
                        opened.bytes_read += index.bytes_read
                    }
                    crate::key_index::IndexState::Bypassed(_)
                    | crate::key_index::IndexState::Diverged { .. } => opened.bypassed += 1,
                    crate::key_index::IndexState::Absent => {}
                }
                opened.states.insert(key, state);
            }
            opened.ms = ms_since(started);
            opened
        };
        Some((named, open.boxed()))
    } else {
        None
    };
    for index in 0..passes {
        let indexes = match first.take() {
            Some((named, open)) => scan::PassIndexes::Opening { named, open },
            None => scan::PassIndexes::Known(&resolved.key_indexes),
        };
        let pass = scan::resolve_pass(
            table,
            files,
            groups,
            KeyPass { index, passes },
            options,
            indexes,
            on_match,
        )
        .await?;
        // Passes hold disjoint keys, so a position is found by at most one pass.
        for (path, positions) in pass.positions {
            *resolved.positions.entry(path).or_default() |= positions;
        }
        resolved.candidates.extend(pass.candidates);
        // An index that failed to read in a pass is bypassed for the rest, and not kept.
        resolved.key_indexes.extend(pass.key_indexes);
        resolved.opened.extend(pass.opened);
        resolved.existing_dvs.extend(pass.existing_dvs);
        for (ids, keys) in pass.scanned_keys {
            resolved.scanned_keys.entry(ids).or_default().extend(keys);
        }
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
    /// Adds the metrics of one range of a split conversion: every range loads all of the
    /// groups' keys (counted in each) and scans its own data files.
    pub(crate) fn add_range(&mut self, range: &ResolveMetrics) {
        self.add(range);
        self.groups = self.groups.max(range.groups);
        self.key_passes = self.key_passes.max(range.key_passes);
        self.live_data_files += range.live_data_files;
        self.candidate_files += range.candidate_files;
        self.files_with_matches += range.files_with_matches;
        self.positions_matched += range.positions_matched;
    }

    /// Adds the work counters of one pass.
    fn add(&mut self, pass: &ResolveMetrics) {
        self.delete_files_read += pass.delete_files_read;
        self.delete_keys += pass.delete_keys;
        self.pruned_by_bounds += pass.pruned_by_bounds;
        self.files_opened += pass.files_opened;
        self.footer_bytes_read += pass.footer_bytes_read;
        self.footers_read_twice += pass.footers_read_twice;
        self.footers_from_cache += pass.footers_from_cache;
        self.footers_opened_early += pass.footers_opened_early;
        self.row_groups_read += pass.row_groups_read;
        self.row_groups_pruned += pass.row_groups_pruned;
        self.row_groups_pruned_by_bloom += pass.row_groups_pruned_by_bloom;
        self.bloom_filters_read += pass.bloom_filters_read;
        self.files_pruned_by_footer += pass.files_pruned_by_footer;
        self.files_holding_deleted_values += pass.files_holding_deleted_values;
        self.expected_bloom_false_positives += pass.expected_bloom_false_positives;
        self.rows_scanned += pass.rows_scanned;
        self.bytes_read += pass.bytes_read;
        self.index_lookups += pass.index_lookups;
        self.index_leaves_read += pass.index_leaves_read;
        self.index_leaves_from_cache += pass.index_leaves_from_cache;
        self.index_row_groups_read += pass.index_row_groups_read;
        self.index_bytes_read += pass.index_bytes_read;
        self.pruned_by_index += pass.pruned_by_index;
        self.index_delta_files += pass.index_delta_files;
        self.index_bypassed += pass.index_bypassed;
        self.pruned_by_index_dvs += pass.pruned_by_index_dvs;
        self.index_dvs_read += pass.index_dvs_read;
        self.files_read_by_position += pass.files_read_by_position;
        self.steps_ms.add(&pass.steps_ms);
        self.offset_indexes_read += pass.offset_indexes_read;
    }
}

/// What one key of `group` costs in memory once loaded: a single `long` key column
/// (read as a long, whatever it was written as) is stored compactly.
fn bytes_per_key(schema: &iceberg::spec::Schema, group: &DeleteGroup) -> u64 {
    // Top-level only: a nested key is stored as encoded rows (see `keys::nested`).
    let single_long = matches!(group.equality_ids.as_slice(), [id] if schema
        .as_struct()
        .field_by_id(*id)
        .is_some_and(|f| *f.field_type == Type::Primitive(PrimitiveType::Long)));
    if single_long {
        long_keys::BYTES_PER_LONG_KEY
    } else {
        BYTES_PER_KEY
    }
}
