//! One pass of the resolve: the candidates of every group (after bound pruning and the
//! key index's lookup), then their files scanned in parallel tasks (`file_scan`).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use futures::future::{BoxFuture, FutureExt};
use futures::{StreamExt, TryStreamExt};
use roaring::RoaringTreemap;

use super::budget::ReadBudget;
use super::early::{EarlyOpens, GroupWatch};
use super::file_scan::{KeyProjection, ScanContext, ScanWork, scan_file};
use super::group_keys::{GroupKeys, KeyPass};
use super::key_set::load_group_keys;
use super::{ResolveMetrics, ResolveOptions, Resolved, ms_since};
use crate::key_index::{IndexKey, IndexStates, KeyIndexMode, OpenIndex};
use crate::parquet_io::FooterHint;
use crate::plan::DeleteGroup;
use crate::progress::{ProgressEvent, ProgressStep};
use crate::table::{LiveFile, LoadedTable, TableFiles};
use crate::{Error, Result};

/// One pass over the candidates with one share of the keys.
pub(super) async fn resolve_pass(
    table: &LoadedTable,
    files: &TableFiles,
    groups: &[DeleteGroup],
    pass: KeyPass,
    options: &ResolveOptions,
    indexes: PassIndexes<'_>,
    on_match: &(dyn Fn(&str) + Sync),
) -> Result<Resolved> {
    let mut resolved = Resolved::default();
    let metrics = &mut resolved.metrics;
    // Until the indexes are open, a group counts as indexed when the table names an
    // index (a part) its keys are looked up in.
    let (known, named, opening) = match indexes {
        PassIndexes::Known(states) => (Some(states), HashSet::new(), None),
        PassIndexes::Opening { named, open } => (None, named, Some(open)),
    };
    let parts = options.key_index.parts(table);
    let indexed = |group: &DeleteGroup| match known {
        Some(states) => states
            .iter()
            .any(|(key, state)| key.serves(group, parts) && state.usable().is_some()),
        None => named.iter().any(|key| key.serves(group, parts)),
    };

    let name_mapping = table.name_mapping()?;
    // The groups' keys load at once (a table partitioned by day has a group a day, each
    // a few round trips to object storage), their delete file reads together bounded by
    // `parallelism` and the read budget; results come in group order, so the first
    // error is a sequential load's. The scans below share the same budget.
    let budget = Arc::new(ReadBudget::new(
        options.parallelism,
        options.read_memory_budget,
    ));
    // How much of each data file's end to read for its footer, learned as they open.
    let footer_hint = Arc::new(FooterHint::with_cache(options.footer_cache.clone()));
    // Footers of the candidates that the keys loaded so far confirm, fetched while the
    // rest load (`early`): in one key pass only.
    let early = EarlyOpens::new(
        table.file_io.clone(),
        budget.clone(),
        footer_hint.clone(),
        options.parallelism,
    );
    // A group with an index opens no footer early: the lookup, not the keys' bounds,
    // decides which of its candidates are read.
    let watch = |group: &DeleteGroup| {
        (pass.passes <= 1 && !indexed(group)).then(|| {
            let in_scope = files
                .data_files
                .iter()
                .filter(|data| group.may_apply_to(data))
                .collect();
            GroupWatch::new(
                &early,
                in_scope,
                group.equality_ids.len(),
                options.bound_pruning,
            )
        })
    };
    let loads: Vec<BoxFuture<'_, Result<(GroupKeys, ResolveMetrics)>>> = groups
        .iter()
        .map(|group| {
            let (budget, name_mapping) = (&*budget, name_mapping.as_deref());
            load_group_keys(
                table,
                group,
                pass,
                options,
                name_mapping,
                budget,
                watch(group),
                indexed(group),
            )
            .boxed()
        })
        .collect();
    let step = std::time::Instant::now();
    // The keys load while the indexes open (their metadata and covered lists).
    let loading = async {
        let mut loads = futures::stream::iter(loads).buffered(groups.len().max(1));
        let mut loaded: Vec<GroupKeys> = Vec::with_capacity(groups.len());
        let mut read = ResolveMetrics::default();
        while let Some((keys, group_metrics)) = loads.try_next().await? {
            read.bytes_read += group_metrics.bytes_read;
            read.delete_files_read += group_metrics.delete_files_read;
            loaded.push(keys);
        }
        Ok::<_, Error>((loaded, read))
    };
    let opened = async {
        match opening {
            Some(open) => Some(open.await),
            None => None,
        }
    };
    let (loading, opened) = futures::join!(loading, opened);
    let (mut loaded, read) = loading?;
    metrics.bytes_read += read.bytes_read;
    metrics.delete_files_read += read.delete_files_read;
    metrics.delete_keys = loaded.iter().map(|g| g.keys.len() as u64).sum();
    metrics.steps_ms.keys = ms_since(step);
    let opened_states: IndexStates = match opened {
        Some(opened) => {
            metrics.index_bytes_read += opened.bytes_read;
            metrics.index_bypassed += opened.bypassed;
            metrics.steps_ms.index_open = opened.ms;
            opened.states
        }
        None => IndexStates::new(),
    };
    let states: &IndexStates = known.unwrap_or(&opened_states);
    let index_of = |group: &DeleteGroup| {
        let mut parts: Vec<(IndexKey, Arc<OpenIndex>)> = states
            .iter()
            .filter(|(key, _)| key.serves(group, parts))
            .filter_map(|(key, state)| Some((key.clone(), state.usable()?.clone())))
            .collect();
        parts.sort_by(|a, b| a.0.cmp(&b.0));
        parts
    };
    let step = std::time::Instant::now();
    let group_hits = super::index_lookup::look_up(
        table,
        &mut loaded,
        &index_of,
        options,
        metrics,
        &mut resolved.key_indexes,
    )
    .await;
    metrics.steps_ms.index_lookup = ms_since(step);
    // The pass's states: as opened, but for an index its lookup found unreadable.
    for (key, state) in opened_states {
        resolved.key_indexes.entry(key).or_insert(state);
    }
    let loaded = Arc::new(loaded);

    // Whether the conversion will index every file it reads (mode `true` and no index
    // yet): then a scan hashes the keys of the files it reads whole, for the build.
    let settings = options.key_index.for_table(table);
    let builds_all = pass.index == 0
        && settings.mode == KeyIndexMode::On
        && settings.builds(files.data_files.len() as u64, 0);
    // Candidates: per data file, the groups that may apply after bound pruning.
    let mut candidates: Vec<(&LiveFile, Vec<usize>)> = Vec::new();
    // Per candidate, the groups (one per field set) whose index wants its keys hashed.
    let mut keys_for_index: HashMap<&str, Vec<usize>> = HashMap::new();
    // Of those, the ones every surviving group's index covers: the rows it named.
    let mut named_rows: Vec<(&LiveFile, RoaringTreemap)> = Vec::new();
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
        // A group whose index covers the file reads it only if the lookup named it.
        let mut in_delta = false;
        let mut rows = Some(RoaringTreemap::new());
        let surviving: Vec<usize> = surviving
            .into_iter()
            .filter(|&i| match group_hits[i].as_ref().map(|h| h.rows_in(data)) {
                Some(Some(named)) if named.is_empty() => false,
                Some(Some(named)) => {
                    if let Some(rows) = &mut rows {
                        *rows |= named;
                    }
                    true
                }
                Some(None) => {
                    in_delta = true;
                    rows = None;
                    true
                }
                None => {
                    rows = None;
                    true
                }
            })
            .collect();
        if surviving.is_empty() {
            metrics.pruned_by_index += 1;
            continue;
        }
        metrics.index_delta_files += u64::from(in_delta);
        // The index's upkeep folds in the files it does not cover, and a build every
        // file: those the scan reads whole, it hashes once here instead of reading them
        // again.
        let mut wanted: Vec<usize> = Vec::new();
        for &i in &surviving {
            let want = match group_hits[i].as_ref() {
                Some(hits) => pass.index == 0 && !hits.covers(data),
                None => builds_all,
            };
            let ids = &loaded[i].group.equality_ids;
            if want && !wanted.iter().any(|&w| loaded[w].group.equality_ids == *ids) {
                wanted.push(i);
            }
        }
        if !wanted.is_empty() {
            keys_for_index.insert(data.path(), wanted);
        }
        if let Some(rows) = rows {
            named_rows.push((data, rows));
        }
        candidates.push((data, surviving));
    }
    let step = std::time::Instant::now();
    let (deleted_already, existing_dvs) = if named_rows.is_empty() {
        Default::default()
    } else {
        super::index_lookup::already_deleted(table, files, &named_rows, options, metrics).await
    };
    resolved.existing_dvs = existing_dvs;
    metrics.steps_ms.index_dvs = ms_since(step);
    let step = std::time::Instant::now();
    // A file every surviving group's index named is read at the rows named and nowhere
    // else: the index holds every row of it, so no other row can hold a deleted key.
    let mut named_rows: HashMap<&str, RoaringTreemap> = named_rows
        .into_iter()
        .map(|(data, rows)| (data.path(), rows))
        .collect();

    // The columns each candidate reads (files with the same surviving groups share one
    // projection).
    let mut work: Vec<ScanWork> = Vec::new();
    let mut projections: HashMap<Vec<usize>, Arc<KeyProjection>> = HashMap::new();
    for (data, surviving) in candidates {
        if deleted_already.contains(data.path()) {
            metrics.pruned_by_index_dvs += 1;
            continue;
        }
        resolved.opened.insert(data.path().to_string());
        let projection = match projections.get(&surviving) {
            Some(p) => p.clone(),
            None => {
                let p = Arc::new(KeyProjection::new(&loaded, &surviving)?);
                projections.insert(surviving.clone(), p.clone());
                p
            }
        };
        let named = named_rows.remove(data.path());
        metrics.files_read_by_position += u64::from(named.is_some());
        let index_keys = keys_for_index.remove(data.path()).unwrap_or_default();
        work.push(ScanWork {
            index_keys,
            open: early.take(data.path()),
            data: data.clone(),
            group_ids: surviving,
            projection,
            named,
        });
    }
    // Footers already fetched (or on their way) first: their scans can start at once.
    work.sort_by_key(|w| w.open.is_none());
    metrics.footers_opened_early = work.iter().filter(|w| w.open.is_some()).count() as u64;
    options.progress.reading(
        ProgressStep::Scan,
        work.iter().map(|w| w.data.file.file_size_in_bytes()),
    );

    let mut scans = futures::stream::iter(work.into_iter().map(|work| {
        let table = table.clone();
        let loaded = loaded.clone();
        let options = options.clone();
        let name_mapping = name_mapping.clone();
        let budget = budget.clone();
        let footer_hint = footer_hint.clone();
        let path = work.data.path().to_string();
        let (progress, bytes) = (
            options.progress.clone(),
            work.data.file.file_size_in_bytes(),
        );
        async move {
            let task = tokio::spawn(async move {
                let context = ScanContext {
                    table: &table,
                    loaded: &loaded,
                    options: &options,
                    name_mapping: name_mapping.as_deref(),
                    budget: &budget,
                    footer_hint: &footer_hint,
                };
                scan_file(&context, work).await
            });
            // A resolve that is dropped (deadline, error elsewhere) stops its scans too.
            let _abort_on_drop = AbortOnDrop(task.abort_handle());
            let scan = task.await.map_err(|e| Error::ScanTask {
                path,
                message: e.to_string(),
            })??;
            progress.report(ProgressEvent::Read {
                step: ProgressStep::Scan,
                bytes,
            });
            Ok::<_, Error>(scan)
        }
    }))
    .buffer_unordered(options.parallelism.max(1));
    let mut scanned = Vec::new();
    while let Some(scan) = scans.try_next().await? {
        // What follows a match (reading the file's old DV) can start before the rest.
        if !scan.positions.is_empty() {
            on_match(&scan.path);
        }
        scanned.push(scan);
    }
    drop(scans);

    metrics.steps_ms.scan = ms_since(step);
    // Every footer opened early belongs to a file bound pruning kept (it is monotone in
    // the keys), so the scans took them all: an open left over was a wasted request.
    debug_assert_eq!(
        early.left_over(),
        0,
        "a footer opened early was not scanned"
    );
    for scan in scanned {
        metrics.files_opened += 1;
        metrics.footer_bytes_read += scan.footer.bytes;
        metrics.footers_read_twice += u64::from(scan.footer.requests > 1);
        metrics.footers_from_cache += u64::from(scan.footer.requests == 0);
        metrics.offset_indexes_read += u64::from(scan.by_pages);
        metrics.footer_bytes_read += scan.offset_index.bytes;
        metrics.row_groups_read += scan.row_groups_read;
        metrics.row_groups_pruned += scan.row_groups_pruned;
        metrics.row_groups_pruned_by_bloom += scan.row_groups_pruned_by_bloom;
        metrics.bloom_filters_read += scan.bloom_filters_read;
        if scan.row_groups_read == 0 {
            metrics.files_pruned_by_footer += 1;
        }
        if scan.holds_deleted_value {
            metrics.files_holding_deleted_values += 1;
        } else if let Some(chance) = scan.read_chance_if_absent {
            metrics.expected_bloom_false_positives += chance;
        }
        metrics.rows_scanned += scan.rows_scanned;
        metrics.bytes_read += scan.bytes_read;
        for (ids, hashes) in scan.index_keys {
            resolved
                .scanned_keys
                .entry(ids)
                .or_default()
                .insert(scan.path.clone(), hashes);
        }
        if !scan.positions.is_empty() {
            metrics.files_with_matches += 1;
            metrics.positions_matched += scan.positions.len();
            resolved.positions.insert(scan.path, scan.positions);
        }
    }
    Ok(resolved)
}

/// Aborts a spawned task when dropped, so that cancelled work does not run on.
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The key indexes a pass resolves with.
pub(super) enum PassIndexes<'a> {
    /// Opened before (a later key pass).
    Known(&'a IndexStates),
    /// Opening while the first pass loads its keys: `named`, the field sets the table
    /// names an index for.
    Opening {
        named: HashSet<IndexKey>,
        open: BoxFuture<'a, OpenedIndexes>,
    },
}

/// The indexes of a resolve as opened, and what opening them took.
pub(super) struct OpenedIndexes {
    pub(super) states: IndexStates,
    pub(super) bytes_read: u64,
    pub(super) bypassed: u64,
    pub(super) ms: f64,
}
