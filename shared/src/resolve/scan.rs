//! One pass of the resolve: the candidates of every group (after bound pruning), then
//! their files opened in parallel tasks, row groups pruned, key columns read once per
//! file and probed against each group's key set.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{Array, ArrayRef, RecordBatch};
use futures::future::{BoxFuture, FutureExt};
use futures::{StreamExt, TryStreamExt};
use iceberg::spec::{NameMapping, NestedFieldRef};
use roaring::RoaringTreemap;

use super::bloom::BloomVerdict;
use super::budget::ReadBudget;
use super::early::{self, EarlyOpen, EarlyOpens, GroupWatch};
use super::key_set::{GroupKeys, KeyPass, KeySet, load_group_keys};
use super::prune::ColumnRanges;
use super::{ResolveMetrics, ResolveOptions, Resolved};
use crate::key_index::{IndexState, IndexStates};
use crate::parquet_io::{FieldSource, FooterHint, FooterRead, ParquetFile};
use crate::plan::DeleteGroup;
use crate::table::{LiveFile, LoadedTable, TableFiles};
use crate::{Error, Result};

/// One pass over the candidates with one share of the keys.
pub(super) async fn resolve_pass(
    table: &LoadedTable,
    files: &TableFiles,
    groups: &[DeleteGroup],
    pass: KeyPass,
    options: &ResolveOptions,
    indexes: &IndexStates,
    on_match: &(dyn Fn(&str) + Sync),
) -> Result<Resolved> {
    let mut resolved = Resolved::default();
    let metrics = &mut resolved.metrics;
    let index_of = |group: &DeleteGroup| {
        indexes
            .get(&group.equality_ids)
            .and_then(IndexState::usable)
            .cloned()
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
        (pass.passes <= 1 && index_of(group).is_none()).then(|| {
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
                index_of(group).is_some(),
            )
            .boxed()
        })
        .collect();
    let mut loads = futures::stream::iter(loads).buffered(groups.len().max(1));
    let mut loaded: Vec<GroupKeys> = Vec::with_capacity(groups.len());
    while let Some((keys, group_metrics)) = loads.try_next().await? {
        metrics.bytes_read += group_metrics.bytes_read;
        metrics.delete_files_read += group_metrics.delete_files_read;
        loaded.push(keys);
    }
    drop(loads);
    metrics.delete_keys = loaded.iter().map(|g| g.keys.len() as u64).sum();
    let group_hits = super::index_lookup::look_up(
        table,
        &mut loaded,
        &index_of,
        options,
        metrics,
        &mut resolved.key_indexes,
    )
    .await;
    let loaded = Arc::new(loaded);

    // Candidates: per data file, the groups that may apply after bound pruning.
    let mut candidates: Vec<(&LiveFile, Vec<usize>)> = Vec::new();
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
        if let Some(rows) = rows {
            named_rows.push((data, rows));
        }
        candidates.push((data, surviving));
    }
    let (deleted_already, existing_dvs) = if named_rows.is_empty() {
        Default::default()
    } else {
        super::index_lookup::already_deleted(table, files, &named_rows, options, metrics).await
    };
    drop(named_rows);
    resolved.existing_dvs = existing_dvs;

    // The columns each candidate reads (files with the same surviving groups share one
    // projection).
    let mut work: Vec<(LiveFile, Vec<usize>, Arc<KeyProjection>)> = Vec::new();
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
        work.push((data.clone(), surviving, projection));
    }
    // Footers already fetched (or on their way) first: their scans can start at once.
    let mut work: Vec<_> = work
        .into_iter()
        .map(|(data, group_ids, projection)| {
            let open = early.take(data.path());
            (data, group_ids, projection, open)
        })
        .collect();
    work.sort_by_key(|(.., open)| open.is_none());
    metrics.footers_opened_early = work.iter().filter(|(.., open)| open.is_some()).count() as u64;

    let mut scans =
        futures::stream::iter(work.into_iter().map(|(data, group_ids, projection, open)| {
            let table = table.clone();
            let loaded = loaded.clone();
            let options = options.clone();
            let name_mapping = name_mapping.clone();
            let budget = budget.clone();
            let footer_hint = footer_hint.clone();
            let path = data.path().to_string();
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
                    scan_file(&context, &data, open, &group_ids, &projection).await
                });
                // A resolve that is dropped (deadline, error elsewhere) stops its scans too.
                let _abort_on_drop = AbortOnDrop(task.abort_handle());
                task.await.map_err(|e| Error::ScanTask {
                    path,
                    message: e.to_string(),
                })?
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
    /// The Arrow schema `fields` are read into, built once for every file.
    target: arrow_schema::SchemaRef,
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
        let target = crate::parquet_io::target_schema(&fields)?;
        Ok(Self {
            fields,
            target,
            column_of,
        })
    }
}

/// What every file scan of one pass shares.
struct ScanContext<'a> {
    table: &'a LoadedTable,
    loaded: &'a [GroupKeys],
    options: &'a ResolveOptions,
    name_mapping: Option<&'a NameMapping>,
    budget: &'a ReadBudget,
    footer_hint: &'a FooterHint,
}

async fn scan_file(
    context: &ScanContext<'_>,
    data: &LiveFile,
    early_open: Option<EarlyOpen>,
    group_ids: &[usize],
    projection: &KeyProjection,
) -> Result<FileScan> {
    let (table, loaded, options) = (context.table, context.loaded, context.options);
    let file = match early_open {
        Some(open) => early::finish(data.path(), open).await?,
        None => {
            ParquetFile::open_learning(
                &table.file_io,
                data.path(),
                data.file.file_size_in_bytes(),
                data.row_groups(),
                context.footer_hint,
            )
            .await?
        }
    };
    let mut file = file.with_name_mapping(context.name_mapping);
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
    let mut bloom_filters_read = 0;
    // Had the file held no deleted value, the chance that the filters would have ruled
    // out every row group that statistics keep (so that it is not read). `None` once a
    // row group is kept without a filter's say: it is read whatever the filters say.
    let mut skip_chance: Option<f64> = options.row_group_pruning.then_some(1.0);
    if options.row_group_pruning {
        let candidates: Vec<Vec<Option<ColumnRanges>>> = group_ids
            .iter()
            .map(|&g| loaded[g].row_group_candidates(&file, &sources))
            .collect::<Result<_>>()?;
        for (rg, keep_rg) in keep.iter_mut().enumerate() {
            let mut by_stats = false;
            // Had it held none of the values, the chance that no group would keep it.
            let mut ruled_out_chance = Some(1.0);
            for (n, &g) in group_ids.iter().enumerate() {
                let Some(ranges) = &candidates[n][rg] else {
                    continue;
                };
                by_stats = true;
                let verdict = if options.bloom_pruning {
                    loaded[g]
                        .bloom_verdict(&mut file, rg, ranges, &mut bloom_filters_read)
                        .await?
                } else {
                    BloomVerdict::UNPROBED
                };
                ruled_out_chance = ruled_out_chance
                    .zip(verdict.pass_chance)
                    .map(|(c, pass)| c * (1.0 - pass));
                if !verdict.ruled_out {
                    // The groups after it are not probed: the chance leaves them out,
                    // so it understates, never overstates, the filters' false positives.
                    *keep_rg = true;
                    break;
                }
            }
            if by_stats && !*keep_rg {
                pruned_by_bloom += 1;
            }
            skip_chance = skip_chance.zip(ruled_out_chance).map(|(m, c)| m * c);
        }
    }
    let selected: Vec<usize> = (0..total_groups).filter(|&i| keep[i]).collect();
    let mut scan = FileScan {
        path: data.path().to_string(),
        positions: RoaringTreemap::new(),
        row_groups_read: selected.len() as u64,
        row_groups_pruned: (total_groups - selected.len()) as u64,
        row_groups_pruned_by_bloom: pruned_by_bloom,
        bloom_filters_read,
        read_chance_if_absent: skip_chance.map(|skip| 1.0 - skip),
        footer: file.footer_read(),
        holds_deleted_value: false,
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
    // The stream fetches one row group's chunks at a time: the largest is what this
    // scan holds, until it is done.
    let largest = selected
        .iter()
        .map(|&rg| file.projected_bytes(&leaves, &[rg]))
        .max()
        .unwrap_or(0);
    let _held = context.budget.bytes(largest).await?;

    let mut stream = Box::pin(file.read_as(
        &projection.fields,
        projection.target.clone(),
        Some(selected),
        options.batch_size,
    )?);
    while let Some((first, batch)) = stream.try_next().await? {
        scan.rows_scanned += batch.num_rows() as u64;
        for &g in group_ids {
            scan.holds_deleted_value |= match_batch(
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

/// Adds the positions of `batch` that `group` deletes; true when some row holds a
/// deleted key at all (whether or not the delete is newer than the data file).
fn match_batch(
    group: &GroupKeys,
    data: &LiveFile,
    batch: &RecordBatch,
    column_of: &HashMap<i32, usize>,
    first_position: u64,
    positions: &mut RoaringTreemap,
) -> Result<bool> {
    let mut held = false;
    let mut deletes = |seq: Option<i64>| {
        held |= seq.is_some();
        seq.is_some_and(|seq| data.data_sequence_number < seq)
    };
    match &group.keys {
        KeySet::Long(keys) => {
            let column = batch
                .column(column_of[&group.key_columns.field_ids[0]])
                .as_primitive_opt::<Int64Type>()
                .ok_or_else(|| {
                    Error::file(data.path(), "key column is not a long", "type mismatch")
                })?;
            if column.null_count() == 0 {
                for (offset, &value) in column.values().iter().enumerate() {
                    if deletes(keys.get(value)) {
                        positions.insert(first_position + offset as u64);
                    }
                }
            } else {
                for (offset, value) in column.iter().enumerate() {
                    let seq = match value {
                        Some(v) => keys.get(v),
                        None => keys.null(),
                    };
                    if deletes(seq) {
                        positions.insert(first_position + offset as u64);
                    }
                }
            }
        }
        KeySet::Str(keys) => {
            let column = batch.column(column_of[&group.key_columns.field_ids[0]]);
            let is_string =
                super::string_keys::for_each_string(column.as_ref(), |offset, value| {
                    let seq = match value {
                        Some(v) => keys.get(v),
                        None => keys.null(),
                    };
                    if deletes(seq) {
                        positions.insert(first_position + offset as u64);
                    }
                });
            if !is_string {
                return Err(Error::file(
                    data.path(),
                    "key column is not a string",
                    "type mismatch",
                ));
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
    Ok(held)
}

/// Aborts a spawned task when dropped, so that cancelled work does not run on.
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Result of scanning one data file.
struct FileScan {
    path: String,
    positions: RoaringTreemap,
    row_groups_read: u64,
    row_groups_pruned: u64,
    row_groups_pruned_by_bloom: u64,
    bloom_filters_read: u64,
    /// Had the file held no deleted value, the chance that the bloom filters would have
    /// let it be read anyway; `None` when some row group was kept without their say.
    read_chance_if_absent: Option<f64>,
    /// Some row read holds a deleted key (a newer row of it included).
    holds_deleted_value: bool,
    footer: FooterRead,
    rows_scanned: u64,
    bytes_read: u64,
}
