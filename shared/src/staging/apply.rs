//! Applying one staging snapshot to the target branch: one target commit that adds the
//! snapshot's data files and the DVs its deletes resolve to, and never an equality
//! delete.
//!
//! The snapshot's equality deletes apply to every row the target holds (all of it
//! older than them: the target reflects the staging history before this snapshot, plus
//! foreign commits such as compactions) and to none of the rows the snapshot itself
//! adds, as the sequence number rule says of one commit's data and deletes. Its DVs and
//! position deletes name rows of its own data files or of older ones, which the target
//! still holds under the same paths (else the application is refused). Every new
//! position is unioned with the target's current DV of its file.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Instant;

use iceberg::spec::{Operation, SnapshotRef};
use roaring::RoaringTreemap;

use super::changes::{StagingChanges, read_changes, with_fresh_row_ids};
use super::history::{Branches, RecordedApplication, applied_property};
use super::{AppliedSnapshot, STAGING_BRANCH_PROPERTY, STAGING_SNAPSHOT_PROPERTY};
use crate::catalog::Catalog;
use crate::convert::{CONVERTED_FROM_PROPERTY, ConvertOptions, DvPlan, SOURCE_PROPERTY};
use crate::plan::{DataScope, DeleteGroup};
use crate::puffin::{DvEntryCheck, EncodedPuffin};
use crate::snapshot::{AddedFile, PropertyUpdate, SnapshotChanges, build_and_write_snapshot};
use crate::table::{LiveFile, LoadedTable, TableFiles};
use crate::{Error, Result};

/// How one application ended, short of an error.
pub(super) enum ApplyEnd {
    /// Committed to the target (or, on a dry run, resolved and not written).
    Done(Box<AppliedSnapshot>),
    /// The target's head moved under the commit: its files are removed; stand again.
    Conflict(String),
}

/// Applies `snapshots` (the oldest pending staging snapshots, in order, at least one)
/// to the target of `branches`, whose head is `target_head`, with one commit (none on a
/// dry run). Several fold into one commit with the same result as one commit each: each
/// snapshot's files take a sequence number of their own above the target's, in order,
/// so a snapshot's equality deletes apply to the target's rows and to the files of the
/// snapshots before it in the fold, never to its own or later ones.
pub(super) async fn apply_snapshots(
    catalog: &dyn Catalog,
    table: &LoadedTable,
    (target_head, snapshots): (Option<&SnapshotRef>, &[SnapshotRef]),
    branches: Branches<'_>,
    options: &ConvertOptions,
) -> Result<ApplyEnd> {
    let started = Instant::now();
    let last_sequence = table.metadata.last_sequence_number();
    let mut changes = StagingChanges::default();
    // Which snapshot of the fold deletes rows of each file by position (the first).
    let mut named_by: HashMap<String, i64> = HashMap::new();
    let mut positions: BTreeMap<String, RoaringTreemap> = BTreeMap::new();
    for (i, snapshot) in snapshots.iter().enumerate() {
        let id = snapshot.snapshot_id();
        if let Some(schema_id) = snapshot.schema_id()
            && table.metadata.schema_by_id(schema_id).is_none()
        {
            return Err(branches.diverged(
                Some(id),
                format!("its schema {schema_id} is not among the table's schemas"),
            ));
        }
        // A conversion of the staging branch in place (the way to keep its equality
        // deletes from piling up) changes no row: the target applied the deletes it
        // converts when it applied their snapshots. Its DVs restate those deletes, on
        // files the target may have compacted since, so nothing of it is applied but
        // its place in the order.
        if restates_rows(snapshot) {
            continue;
        }
        let mut own = read_changes(table, snapshot, branches).await?;
        let sequence = last_sequence + 1 + i as i64;
        for f in own
            .data_files
            .iter_mut()
            .chain(own.equality_deletes.iter_mut())
        {
            f.data_sequence_number = sequence;
        }
        for (path, deleted) in staged_positions(table, &own, options).await? {
            named_by.entry(path.clone()).or_insert(id);
            *positions.entry(path).or_default() |= deleted;
        }
        changes.absorb(own);
    }
    let own_paths: HashSet<&str> = changes.data_files.iter().map(LiveFile::path).collect();
    // Paths of older files deleted from by position: the target must still hold each.
    let older_named: Vec<String> = positions
        .keys()
        .filter(|path| !own_paths.contains(path.as_str()))
        .cloned()
        .collect();

    let groups = crate::plan::group_files(
        &table.name,
        &table.metadata,
        changes.equality_deletes.iter(),
    )?;
    let scope = if !older_named.is_empty() || !options.resolve.bound_pruning {
        DataScope::Everything
    } else {
        DataScope::of_groups(&groups)
    };
    let (files, ()) = TableFiles::read_scoped(table, target_head, |_| Ok((scope, ()))).await?;
    let held: HashSet<&str> = files.data_files.iter().map(LiveFile::path).collect();
    if let Some(missing) = older_named.iter().find(|p| !held.contains(p.as_str())) {
        return Err(branches.diverged(
            named_by.get(missing).copied(),
            format!(
                "it deletes rows of data file {missing} by position, which branch '{}' no \
                 longer holds (compacted or removed on the target)",
                branches.target
            ),
        ));
    }
    // The fold's own files join the target's (they have no DV there): the equality
    // deletes of a later snapshot apply to them, and the merge finds them.
    let mut with_own = files.clone();
    with_own
        .data_files
        .extend(changes.data_files.iter().cloned());

    let ids: Vec<i64> = snapshots.iter().map(|s| s.snapshot_id()).collect();
    let mut applied = AppliedSnapshot::new(ids, &changes, &groups);
    let mut key_indexes = Default::default();
    if !groups.is_empty() {
        options.check_deadline(&table.name, "resolving keys to positions")?;
        let resolving = crate::resolve::resolve(table, &with_own, &groups, &options.resolve);
        let resolved = match options.deadline {
            Some(deadline) => tokio::time::timeout_at(deadline.into(), resolving)
                .await
                .map_err(|_| {
                    options.deadline_error(&table.name, "resolving keys to positions")
                })??,
            None => resolving.await?,
        };
        for (path, found) in resolved.positions {
            *positions.entry(path).or_default() |= found;
        }
        applied.resolve = resolved.metrics;
        key_indexes = (resolved.key_indexes, resolved.scanned_keys);
    }

    let (dv_plans, removed_position_deletes) = crate::convert::with_existing_deletes(
        table,
        &with_own,
        positions,
        options.resolve.parallelism,
        (None, &Default::default()),
    )
    .await?;
    applied.dvs_written = dv_plans.len();
    applied.positions_added = dv_plans.iter().map(|p| p.added).sum();
    applied.resolve_ms = started.elapsed().as_secs_f64() * 1000.0;
    if options.dry_run {
        applied.planned_dvs = dv_plans
            .into_iter()
            .map(|p| (p.data_file.path().to_string(), p.positions))
            .collect();
        return Ok(ApplyEnd::Done(Box::new(applied)));
    }

    let mut written_files = Vec::new();
    let result = commit(
        catalog,
        table,
        (&files, &changes),
        (dv_plans, removed_position_deletes),
        &key_indexes,
        (branches, options),
        &mut applied,
        &mut written_files,
    )
    .await;
    match result {
        Ok(end) => {
            if matches!(end, ApplyEnd::Conflict(_)) {
                crate::storage::delete_files(&table.file_io, table.location(), &written_files)
                    .await;
            }
            Ok(end)
        }
        // The swap may have landed: keep every file; the next run reads the target back.
        Err(e @ Error::CommitStateUnknown { .. }) => Err(e),
        Err(e) => {
            crate::storage::delete_files(&table.file_io, table.location(), &written_files).await;
            Err(e)
        }
    }
}

/// Writes the DVs and commits the application on the target head `files` was read at.
/// Every file written is recorded in `written_files` (the caller removes them unless
/// the commit landed or its outcome is unknown).
#[allow(clippy::too_many_arguments)]
async fn commit(
    catalog: &dyn Catalog,
    table: &LoadedTable,
    (files, changes): (&TableFiles, &StagingChanges),
    (dv_plans, removed_position_deletes): (Vec<DvPlan>, Vec<LiveFile>),
    key_indexes: &(crate::key_index::IndexStates, crate::resolve::ScannedKeys),
    (branches, options): (Branches<'_>, &ConvertOptions),
    applied: &mut AppliedSnapshot,
    written_files: &mut Vec<String>,
) -> Result<ApplyEnd> {
    options.check_deadline(&table.name, "writing deletion vectors")?;
    let mut snapshot_changes = SnapshotChanges::new(operation(changes, &dv_plans));
    for data in &changes.data_files {
        snapshot_changes.added_data_files.push(AddedFile {
            spec_id: data.spec_id,
            file: with_fresh_row_ids(data)?,
        });
    }
    let mut puffin: Option<EncodedPuffin> = None;
    if !dv_plans.is_empty() {
        let encoded = crate::convert::encode_dvs(table, &dv_plans, None, written_files).await?;
        for (plan, dv) in dv_plans.iter().zip(&encoded.written.dvs) {
            snapshot_changes
                .added_delete_files
                .push(crate::convert::dv_added_file(
                    table,
                    &encoded.written,
                    dv,
                    &plan.data_file,
                )?);
        }
        applied.puffin_file = Some(encoded.written.location.clone());
        puffin = Some(encoded);
    }
    snapshot_changes.removed_files = dv_plans
        .iter()
        .filter_map(|p| p.replaced.clone())
        .chain(removed_position_deletes)
        .collect();
    let summary = &mut snapshot_changes.extra_summary;
    summary.insert(STAGING_BRANCH_PROPERTY.into(), branches.staging.to_string());
    summary.insert(
        STAGING_SNAPSHOT_PROPERTY.into(),
        applied.staging_snapshot_id.to_string(),
    );
    summary.insert(SOURCE_PROPERTY.into(), options.source.clone());
    // The same in a table property, which outlives an expiry of this snapshot.
    let key = applied_property(branches.target);
    let recorded = RecordedApplication {
        staging_branch: branches.staging.to_string(),
        staging_snapshot_id: applied.staging_snapshot_id,
        sequence_number: table.metadata.next_sequence_number(),
    };
    snapshot_changes.set_properties.push(PropertyUpdate {
        expected: table.metadata.properties().get(&key).cloned(),
        key,
        value: serde_json::to_string(&recorded)?,
        files: Vec::new(),
    });

    options.check_deadline(&table.name, "updating the key index")?;
    let read_in_vain = applied
        .resolve
        .files_opened
        .saturating_sub(applied.resolve.files_holding_deleted_values);
    for update in crate::convert::keep_key_indexes(
        table,
        files,
        key_indexes,
        options,
        read_in_vain,
        written_files,
    )
    .await
    {
        snapshot_changes.set_properties.push(PropertyUpdate {
            key: update.property,
            value: update.location,
            expected: update.expected,
            files: update.files,
        });
    }

    options.check_deadline(&table.name, "committing")?;
    let build = build_and_write_snapshot(
        table,
        branches.target,
        files,
        &snapshot_changes,
        !catalog.commits_changes(),
    );
    // Both run to the end, so nothing is in flight when files are removed (a failed
    // build removes its own).
    let (written, uploaded) = match puffin {
        None => (build.await?, Ok(())),
        Some(puffin) => {
            let (written, uploaded) = futures::join!(build, puffin.upload(&table.file_io));
            (written?, uploaded.map_err(Error::from))
        }
    };
    written_files.extend(written.prepared.written_files.iter().cloned());
    uploaded?;
    crate::test_hooks::pause_point(crate::test_hooks::AFTER_FILES).await;
    match crate::commit::publish_written(catalog, table, &written).await {
        Ok(published) => {
            applied.target_snapshot_id = Some(written.prepared.snapshot_id);
            applied.metadata_location = Some(published.metadata_location);
            tracing::info!(
                table = %table.name,
                staging_branch = branches.staging,
                target_branch = branches.target,
                staging_snapshot_id = applied.staging_snapshot_id,
                target_snapshot_id = written.prepared.snapshot_id,
                data_files = applied.data_files_added,
                dvs = applied.dvs_written,
                "applied a staging snapshot"
            );
            Ok(ApplyEnd::Done(Box::new(applied.clone())))
        }
        Err(Error::CommitConflict { message, .. }) => Ok(ApplyEnd::Conflict(message)),
        Err(e) => Err(e),
    }
}

/// Whether `snapshot` is an eqdv conversion in place (of the staging branch): it adds no
/// data file and changes no row, by eqdv's own rule.
fn restates_rows(snapshot: &SnapshotRef) -> bool {
    let summary = &snapshot.summary().additional_properties;
    summary.contains_key(CONVERTED_FROM_PROPERTY)
        && summary
            .get("added-data-files")
            .is_none_or(|n| n.trim() == "0")
}

/// The operation Java would name the commit with: an append when it only adds data, a
/// delete when it only deletes rows, an overwrite when both.
fn operation(changes: &StagingChanges, dv_plans: &[DvPlan]) -> Operation {
    match (changes.data_files.is_empty(), dv_plans.is_empty()) {
        (false, true) | (true, true) => Operation::Append,
        (true, false) => Operation::Delete,
        (false, false) => Operation::Overwrite,
    }
}

/// The positions the snapshot's DVs and v2 position delete files delete, by data file
/// path (a DV holds every position deleted from its file on the staging branch).
async fn staged_positions(
    table: &LoadedTable,
    changes: &StagingChanges,
    options: &ConvertOptions,
) -> Result<BTreeMap<String, RoaringTreemap>> {
    let mut positions: BTreeMap<String, RoaringTreemap> = BTreeMap::new();
    let mut checks = Vec::new();
    let mut paths = Vec::new();
    for dv in &changes.dvs {
        let (Some(referenced), Some(offset), Some(size)) = (
            dv.file.referenced_data_file(),
            dv.file.content_offset(),
            dv.file.content_size_in_bytes(),
        ) else {
            return Err(Error::file(
                dv.path(),
                "deletion vector entry lacks referenced_data_file, content_offset or \
                 content_size_in_bytes",
                "invalid manifest entry",
            ));
        };
        paths.push(referenced);
        checks.push((dv, offset, size));
    }
    let checks: Vec<DvEntryCheck<'_>> = checks
        .iter()
        .zip(&paths)
        .map(|((dv, offset, size), referenced)| DvEntryCheck {
            puffin_location: dv.path(),
            referenced_data_file: referenced,
            content_offset: *offset,
            content_size_in_bytes: *size,
            record_count: dv.file.record_count(),
            file_size_in_bytes: dv.file.file_size_in_bytes(),
        })
        .collect();
    let read =
        crate::puffin::validate_dv_entries(&table.file_io, &checks, options.resolve.parallelism)
            .await?;
    for (path, dv) in paths.iter().zip(read) {
        *positions.entry(path.clone()).or_default() |= dv;
    }
    if !changes.position_deletes.is_empty() {
        let each = crate::position_deletes::read_each(
            (&table.file_io, &table.name.to_string()),
            &changes.position_deletes,
        )
        .await?;
        for per_file in each {
            for (path, deleted) in per_file {
                *positions.entry(path).or_default() |= deleted;
            }
        }
    }
    Ok(positions)
}

impl AppliedSnapshot {
    fn new(folded: Vec<i64>, changes: &StagingChanges, groups: &[DeleteGroup]) -> Self {
        Self {
            staging_snapshot_id: folded.last().copied().unwrap_or_default(),
            folded,
            target_snapshot_id: None,
            metadata_location: None,
            data_files_added: changes.data_files.len(),
            records_added: changes
                .data_files
                .iter()
                .map(|f| f.file.record_count())
                .sum(),
            equality_delete_files_applied: changes.equality_deletes.len(),
            equality_deletes_applied: groups.iter().map(DeleteGroup::delete_rows).sum(),
            staged_dvs: changes.dvs.len(),
            staged_position_delete_files: changes.position_deletes.len(),
            dvs_written: 0,
            positions_added: 0,
            puffin_file: None,
            resolve: Default::default(),
            resolve_ms: 0.0,
            planned_dvs: BTreeMap::new(),
        }
    }
}
