//! Keeping an index up to date inside a conversion, at a cost that follows the change:
//! the live data files in the conversion's scope that the index does not cover (the
//! delta: new writes, compactions, imports) are read once, key columns only, and
//! written as a new run; runs merge as in a log-structured tree (a new run absorbs the
//! runs before it while it is at least half their size, and there are never more than
//! [`MAX_RUNS`]), so each entry is rewritten a logarithmic number of times. Entries of
//! data files the snapshot no longer holds are dropped, with their coverage, when their
//! run is merged and the conversion read every live data file; so are the entries of
//! rows the snapshot's DVs delete (a streaming table's hot keys would otherwise name
//! every file that ever held them, each to be ruled out by its DV on every lookup).
//!
//! Nothing here changes the table: the caller names the new index metadata file in its
//! own commit's metadata ([`IndexUpdate::property`]), or removes the files written.

use std::collections::HashMap;
use std::time::Instant;

use roaring::RoaringTreemap;
use serde::Serialize;

use super::build::{RunEntries, paths_of, read_files, read_runs, write_run};
use super::format::{CoveredFiles, FORMAT_VERSION, IndexMetadata, KEY_HASH, RunMeta, write_json};
use super::{IndexKey, IndexState, KeyFingerprint, KeyIndexOptions};
use crate::Result;
use crate::keys::KeyColumns;
use crate::progress::Progress;
use crate::table::{LiveFile, LoadedTable, TableFiles};

/// Runs an index holds at most: a lookup probes each.
pub const MAX_RUNS: usize = 8;

/// What keeping the index took, for the conversion's report.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Upkeep {
    pub equality_ids: Vec<i32>,
    /// The part of a partitioned table's index ([`IndexKey::part`]); empty for the
    /// whole-table part.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub part: String,
    /// The new index metadata file (named by the commit, unless another commit updated
    /// the index first).
    pub location: String,
    /// A new index (none, or one that could not be used, before).
    pub built: bool,
    /// Data files read for it (the delta, or every file in scope when built), besides
    /// those whose key hashes the conversion's scan took as it read them.
    pub data_files_read: u64,
    pub data_files_from_scan: u64,
    pub data_rows_read: u64,
    pub data_bytes_read: u64,
    /// Runs merged into the new one, and the leaf bytes read to merge them.
    pub runs_merged: u64,
    pub leaf_bytes_read: u64,
    /// Covered data files dropped because the snapshot no longer holds them.
    pub files_dropped: u64,
    /// DVs of the merged runs' data files read, and the entries of rows they delete
    /// that the merge left out.
    pub dvs_read: u64,
    pub deleted_entries_dropped: u64,
    pub entries_written: u64,
    pub leaves_written: u64,
    pub bytes_written: u64,
    /// The index after the update.
    pub runs: u64,
    pub entries: u64,
    pub covered_files: u64,
    pub ms: f64,
}

/// A new version of one index, written and waiting for the commit that names it.
#[derive(Clone, Debug)]
pub struct IndexUpdate {
    /// The table property to set ([`IndexKey::property`]) and its new value.
    pub property: String,
    pub location: String,
    /// The property's value in the metadata the update was built on: a commit that
    /// finds another value there (another converter updated the index) must leave it.
    pub expected: Option<String>,
    /// Every file the update wrote (its metadata file included).
    pub files: Vec<String>,
    pub upkeep: Upkeep,
}

/// Brings the index `key` (a part of an index in `parts` parts) up to date with
/// `part_files`, the live data files of its part in `files` (the conversion's base snapshot, the head of `branch`, in its scope);
/// `scanned` has the key hashes of whole files that the resolve read (by path, in
/// position order), which are not read again. `None` when there is nothing to write: no
/// index and `builds` false (the conversion decided not to build one,
/// [`KeyIndexOptions::builds`]), or an index that already covers every file. Each file
/// written is recorded in `written` before it is written.
#[allow(clippy::too_many_arguments)]
pub async fn update_index(
    table: &LoadedTable,
    files: &TableFiles,
    (key, parts, part_files): (&IndexKey, u64, &[LiveFile]),
    state: &IndexState,
    scanned: Option<&HashMap<String, Vec<i64>>>,
    (options, branch): (&KeyIndexOptions, &str),
    (parallelism, builds, progress): (usize, bool, &Progress),
    written: &mut Vec<String>,
) -> Result<Option<IndexUpdate>> {
    let started = Instant::now();
    let equality_ids = key.equality_ids.as_slice();
    let property = key.property();
    let expected = table.metadata.properties().get(&property).cloned();
    let mut upkeep = Upkeep {
        equality_ids: equality_ids.to_vec(),
        part: key.part.clone(),
        ..Default::default()
    };
    // A live file the index lists with another size: the index cannot be reconciled
    // with the table, so it is built again rather than patched.
    let base = state.usable().filter(|index| {
        part_files
            .iter()
            .all(|f| !index.lists(f.path()) || index.covers(f))
    });
    let delta: Vec<LiveFile> = match base {
        Some(index) => part_files
            .iter()
            .filter(|f| !index.covers(f))
            .cloned()
            .collect(),
        None if !builds || part_files.is_empty() => return Ok(None),
        None => part_files.to_vec(),
    };
    if base.is_some() && delta.is_empty() {
        return Ok(None);
    }
    upkeep.built = base.is_none();
    let schema = table.metadata.current_schema();
    let key_columns = KeyColumns::new(&table.name.to_string(), schema, equality_ids)?;
    let name_mapping = table.name_mapping()?;
    // A file the scan hashed whole (a hash per row the manifest counts) is not read.
    let (from_scan, delta): (Vec<LiveFile>, Vec<LiveFile>) = delta.into_iter().partition(|f| {
        scanned
            .and_then(|s| s.get(f.path()))
            .is_some_and(|hashes| hashes.len() as u64 == f.file.record_count())
    });
    let (mut pending, scan) = read_files(
        &table.file_io,
        name_mapping.as_deref(),
        &key_columns,
        &delta,
        (parallelism, progress),
    )
    .await?;
    if let Some(scanned) = scanned {
        upkeep.data_files_from_scan = from_scan.len() as u64;
        append(&mut pending, entries_of(&from_scan, scanned));
    }
    upkeep.data_files_read = scan.files;
    upkeep.data_rows_read = scan.rows;
    upkeep.data_bytes_read = scan.bytes;

    // The runs kept as they are, and those the new run absorbs.
    let mut kept: Vec<(RunMeta, CoveredFiles)> = match base {
        Some(index) => index
            .metadata
            .runs
            .iter()
            .cloned()
            .zip(index.covered_lists.iter().cloned())
            .collect(),
        None => Vec::new(),
    };
    // The conversion read every live file, so every live file of this part is in
    // `part_files`: a covered file that is not is no longer live.
    let complete = !files.skipped_data.is_partial() && !files.data_paths_filtered;
    let live = paths_of(part_files);
    let keep = |path: &str| !complete || live.contains(path);
    let mut absorbed = Vec::new();
    // The new run's entries, counting those of the runs it absorbed so far.
    let mut new_run_entries = pending.hashes.len() as u64;
    while let Some((last, _)) = kept.last() {
        if kept.len() + 1 > MAX_RUNS || new_run_entries.saturating_mul(2) >= last.entries {
            new_run_entries += last.entries;
            absorbed.push(kept.pop().expect("checked by while let"));
        } else {
            break;
        }
    }
    if !absorbed.is_empty() {
        let runs: Vec<(&RunMeta, &CoveredFiles)> = absorbed.iter().map(|(r, c)| (r, c)).collect();
        let listed: u64 = absorbed.iter().map(|(r, _)| r.covered_files).sum();
        let left_out_before: u64 = runs
            .iter()
            .flat_map(|(_, c)| &c.files)
            .filter(|f| keep(&f.path))
            .map(|f| f.deleted_left_out)
            .sum();
        let deleted = deleted_rows(table, files, part_files, &runs, parallelism).await?;
        upkeep.dvs_read = deleted.len() as u64;
        let (merged, leaf_bytes) =
            read_runs(&table.file_io, &runs, &keep, &deleted, parallelism).await?;
        upkeep.runs_merged = absorbed.len() as u64;
        upkeep.leaf_bytes_read = leaf_bytes;
        upkeep.files_dropped = listed - merged.covered.len() as u64;
        upkeep.deleted_entries_dropped = merged
            .covered
            .iter()
            .map(|f| f.deleted_left_out)
            .sum::<u64>()
            - left_out_before;
        append(&mut pending, merged);
    }
    // The files this update writes: the new run's (if any) and the metadata file.
    let mut update_files = Vec::new();
    let run = if pending.hashes.is_empty() && pending.covered.is_empty() {
        None
    } else {
        upkeep.entries_written = pending.hashes.len() as u64;
        let run = write_run(
            &table.file_io,
            table.location(),
            pending,
            options.leaf_entries,
            written,
        )
        .await?;
        upkeep.leaves_written = run.leaves.len() as u64;
        upkeep.bytes_written = run.leaves.iter().map(|l| l.file_size_in_bytes).sum();
        update_files.push(run.covered_location.clone());
        update_files.extend(run.leaves.iter().map(|l| l.location.clone()));
        Some(run)
    };

    crate::test_hooks::pause_point(crate::test_hooks::KEY_INDEX_UPKEEP).await;
    let fingerprint = KeyFingerprint::of(table, key, Some(parts));
    let index_uuid = match base {
        Some(index) => index.metadata.index_uuid.clone(),
        None => uuid::Uuid::new_v4().to_string(),
    };
    let runs: Vec<RunMeta> = kept.into_iter().map(|(r, _)| r).chain(run).collect();
    let metadata = IndexMetadata {
        format_version: FORMAT_VERSION,
        index_uuid,
        table_uuid: fingerprint.table_uuid,
        equality_ids: equality_ids.to_vec(),
        part: (!key.part.is_empty()).then(|| key.part.clone()),
        parts: (!key.part.is_empty()).then_some(parts),
        key_hash: KEY_HASH.to_string(),
        key_types: fingerprint.key_types,
        name_mapping: fingerprint.name_mapping,
        source_snapshot_id: files.snapshot_id,
        source_branch: Some(branch.to_string()),
        runs,
    };
    upkeep.runs = metadata.runs.len() as u64;
    upkeep.entries = metadata.entries();
    upkeep.covered_files = metadata.runs.iter().map(|r| r.covered_files).sum();
    let location = crate::storage::new_metadata_file(table.location(), "eqdv-key-index", "json");
    written.push(location.clone());
    upkeep.location = location.clone();
    upkeep.bytes_written += write_json(&table.file_io, &location, &metadata).await?;
    upkeep.ms = started.elapsed().as_secs_f64() * 1000.0;
    update_files.push(location.clone());
    tracing::info!(
        table = %table.name,
        index = %location,
        part = %key.part,
        built = upkeep.built,
        data_files_read = upkeep.data_files_read,
        runs = upkeep.runs,
        runs_merged = upkeep.runs_merged,
        entries = upkeep.entries,
        "key index updated"
    );
    Ok(Some(IndexUpdate {
        property,
        location,
        expected,
        files: update_files,
        upkeep,
    }))
}

/// The rows that the DVs of `files` (the snapshot the update reconciles with) delete in
/// the live data files (`part_files`, of the index's part) that `runs` cover: a merge
/// leaves their entries out. A deleted row stays deleted in every snapshot that
/// descends from this one, and an index that left rows out serves no other
/// ([`super::open_for`]).
async fn deleted_rows(
    table: &LoadedTable,
    files: &TableFiles,
    part_files: &[LiveFile],
    runs: &[(&RunMeta, &CoveredFiles)],
    parallelism: usize,
) -> Result<HashMap<String, RoaringTreemap>> {
    let live: HashMap<&str, &LiveFile> = part_files.iter().map(|f| (f.path(), f)).collect();
    let covered = runs
        .iter()
        .flat_map(|(_, c)| &c.files)
        .filter_map(|c| live.get(c.path.as_str()).copied());
    crate::current_dv::read_deleted(&table.file_io, files, covered, parallelism).await
}

/// The entries of `data_files`, each hashed whole by the resolve's scan (`scanned`).
fn entries_of(data_files: &[LiveFile], scanned: &HashMap<String, Vec<i64>>) -> RunEntries {
    let mut run = RunEntries::default();
    for data in data_files {
        if let Some(hashes) = scanned.get(data.path()) {
            // A whole file's hashes come in position order.
            run.push_file(data, hashes, 0..hashes.len() as u64);
        }
    }
    run
}

/// Adds `other`'s entries and covered files to `run` (file numbers shifted; `write_run`
/// numbers them in path order again).
fn append(run: &mut RunEntries, other: RunEntries) {
    let offset = run.covered.len() as u32;
    run.covered.extend(other.covered);
    run.hashes.extend(other.hashes);
    run.files
        .extend(other.files.into_iter().map(|f| f + offset));
    run.positions.extend(other.positions);
}
