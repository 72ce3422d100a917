//! One conversion attempt on the current head: plan, resolve keys to positions, merge
//! with what is already deleted, write the Puffin file and commit it, rebasing on a
//! moved head while validation allows.

use std::collections::HashSet;
use std::time::Instant;

use iceberg::spec::{Operation, Struct, StructType};

use super::merge::{self, DvPlan};
use super::validate::{AttemptFootprint, validate};
use super::{ConvertOptions, ConvertReport, Outcome, PhaseTimes, RetryPolicy, ms_since};
use crate::catalog::{Catalog, TableName};
use crate::key_index::IndexStates;
use crate::plan::{DataScope, DeleteGroup, Shard, group_equality_deletes};
use crate::puffin::{
    DvBlobInput, EncodedPuffin, FooterPrefetch, WrittenDv, WrittenPuffin, encode_dv_puffin,
};
use crate::resolve::{ResolveMetrics, ScannedKeys, resolve_observed};
use crate::snapshot::{
    AddedFile, CONVERTED_FROM_PROPERTY, PropertyUpdate, SHARD_PROPERTY, SOURCE_PROPERTY,
    SPLIT_PROPERTY, SnapshotChanges, build_and_write_snapshot,
};
use crate::table::{LiveFile, LoadedTable, TableFiles};
use crate::{Error, Result};

/// How one attempt ended, short of an error.
pub(super) enum AttemptEnd {
    /// The report is final: nothing to do, a dry run, or a commit.
    Done,
    /// The head moved in a way that invalidates the attempt: plan again.
    Replan,
}

/// What an attempt needs besides its own work.
pub(super) struct Attempt<'a> {
    pub catalog: &'a dyn Catalog,
    pub name: &'a TableName,
    pub options: &'a ConvertOptions,
    pub started: Instant,
}

impl Attempt<'_> {
    /// One attempt on the current head (`loaded`, or loaded now). `policy` is settled on
    /// the first attempt, from the table's properties unless the options set it.
    pub(super) async fn run(
        &self,
        policy: &mut Option<RetryPolicy>,
        loaded: Option<LoadedTable>,
        report: &mut ConvertReport,
    ) -> Result<AttemptEnd> {
        let (catalog, name, options, started) =
            (self.catalog, self.name, self.options, self.started);
        options.check_deadline(name, "planning")?;
        let phase = Instant::now();
        let table = match loaded {
            Some(table) => table,
            None => LoadedTable::load(catalog, name).await?,
        };
        table.require_v3()?;
        table.require_branch(&options.branch)?;
        check_shard_branch(options)?;
        let policy = policy
            .get_or_insert_with(|| options.retry_policy_for(&table))
            .clone();
        let head = table.head(&options.branch)?;
        // Only the data the selected groups can touch is read (see table::DataScope).
        let (files, groups) = TableFiles::read_scoped(&table, head.as_ref(), |files| {
            let groups = select_groups(&table, files, options.shard.as_ref())?;
            Ok((data_scope(&groups, options), groups))
        })
        .await?;
        report.base_snapshot_id = files.snapshot_id;
        report.skipped_data = files.skipped_data;
        report.groups = groups.len();
        report.phases = PhaseTimes {
            read_table_ms: ms_since(phase),
            ..Default::default()
        };
        if groups.is_empty() {
            report.outcome = Outcome::NothingToDo;
            report.equality_deletes_elsewhere =
                super::equality_deletes_elsewhere(&table, &options.branch);
            if !report.equality_deletes_elsewhere.is_empty() {
                tracing::info!(
                    table = %table.name,
                    branch = %options.branch,
                    elsewhere = ?report.equality_deletes_elsewhere,
                    "nothing to do on the branch; other branches hold equality deletes"
                );
            }
            report.duration_ms = started.elapsed().as_millis() as u64;
            return Ok(AttemptEnd::Done);
        }

        let phase = Instant::now();
        let (metrics, dv_plans, removed_position_deletes, key_indexes) =
            resolve_and_merge(&table, &files, &groups, options).await?;
        report.resolve = metrics;
        report.phases.resolve_ms = ms_since(phase);

        let mut removed: Vec<LiveFile> = groups
            .iter()
            .flat_map(|g| g.delete_files.iter().cloned())
            .collect();
        removed.extend(dv_plans.iter().filter_map(|p| p.replaced.clone()));
        removed.extend(removed_position_deletes.iter().cloned());

        report.equality_delete_files_removed = groups.iter().map(|g| g.delete_files.len()).sum();
        report.equality_deletes_removed = groups.iter().map(DeleteGroup::delete_rows).sum();
        report.dvs_written = dv_plans.len();
        report.dvs_replaced = dv_plans.iter().filter(|p| p.replaced.is_some()).count();
        report.position_delete_files_removed = removed_position_deletes.len();
        report.positions_added = dv_plans.iter().map(|p| p.added).sum();
        if options.dry_run {
            report.outcome = Outcome::DryRun;
            report.duration_ms = started.elapsed().as_millis() as u64;
            return Ok(AttemptEnd::Done);
        }

        // From the first file written on, every error but an unknown commit outcome
        // removes what this attempt wrote.
        let file_io = table.file_io.clone();
        let location = table.location().to_string();
        let phase = Instant::now();
        let mut attempt_files: Vec<String> = Vec::new();
        let result = self
            .write_and_commit(
                &policy,
                table,
                files,
                groups,
                dv_plans,
                removed,
                &key_indexes,
                report,
                &mut attempt_files,
            )
            .await;
        report.phases.write_commit_ms = ms_since(phase);
        match result {
            Ok(AttemptEnd::Done) => Ok(AttemptEnd::Done),
            Ok(AttemptEnd::Replan) => {
                crate::storage::delete_files(&file_io, &location, &attempt_files).await;
                report.forget_attempt();
                Ok(AttemptEnd::Replan)
            }
            // The swap may have landed: keep every file; cleanup decides later.
            Err(e @ Error::CommitStateUnknown { .. }) => Err(e),
            Err(e) => {
                crate::storage::delete_files(&file_io, &location, &attempt_files).await;
                Err(e)
            }
        }
    }

    /// Writes the DVs and commits them, rebasing on a moved head while validation allows.
    /// Every file written is recorded in `attempt_files` (manifests and metadata of
    /// failed swaps are removed here already).
    #[allow(clippy::too_many_arguments)]
    async fn write_and_commit(
        &self,
        policy: &RetryPolicy,
        table: LoadedTable,
        files: TableFiles,
        groups: Vec<DeleteGroup>,
        dv_plans: Vec<DvPlan>,
        removed: Vec<LiveFile>,
        key_indexes: &(IndexStates, ScannedKeys),
        report: &mut ConvertReport,
        attempt_files: &mut Vec<String>,
    ) -> Result<AttemptEnd> {
        let (name, options) = (self.name, self.options);
        // Every DV goes into one Puffin file next to the data. It is encoded here and
        // uploaded by the first commit attempt while that writes the manifests: their
        // entries need only where each DV lies in the file, known once it is encoded.
        options.check_deadline(name, "writing deletion vectors")?;
        let mut added = Vec::new();
        let mut puffin_to_upload: Option<EncodedPuffin> = None;
        if !dv_plans.is_empty() {
            let encoded = encode_dvs(&table, &dv_plans, None, attempt_files).await?;
            let written = &encoded.written;
            for (plan, dv) in dv_plans.iter().zip(&written.dvs) {
                added.push(dv_added_file(&table, written, dv, &plan.data_file)?);
            }
            report.puffin_file = Some(written.location.clone());
            puffin_to_upload = Some(encoded);
        }

        let footprint = AttemptFootprint {
            groups,
            dv_targets: dv_plans
                .iter()
                .map(|p| p.data_file.path().to_string())
                .collect(),
            removed: removed.clone(),
        };
        let mut changes = conversion_changes(files.snapshot_id, options, added, removed);
        options.check_deadline(name, "updating the key index")?;
        for update in super::index_upkeep::keep_key_indexes(
            &table,
            &files,
            key_indexes,
            options,
            report
                .resolve
                .files_opened
                .saturating_sub(report.resolve.files_holding_deleted_values),
            attempt_files,
        )
        .await
        {
            report.key_index.push(update.upkeep.clone());
            changes.set_properties.push(PropertyUpdate {
                key: update.property,
                value: update.location,
                expected: update.expected,
                files: update.files,
            });
        }
        self.commit_changes(
            policy,
            table,
            files,
            changes,
            &footprint,
            puffin_to_upload,
            report,
        )
        .await
    }

    /// Commits `changes`, built on `files` (the head of `table` when it was loaded),
    /// rebasing on a moved head while validation against `footprint` allows. `puffin`,
    /// when given, is uploaded beside the first build's manifests. Manifests and metadata
    /// of failed swaps are removed here; the Puffin files the changes add are the
    /// caller's to remove on `Replan` or on an error other than `CommitStateUnknown`.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn commit_changes(
        &self,
        policy: &RetryPolicy,
        table: LoadedTable,
        files: TableFiles,
        mut changes: SnapshotChanges,
        footprint: &AttemptFootprint,
        mut puffin_to_upload: Option<EncodedPuffin>,
        report: &mut ConvertReport,
    ) -> Result<AttemptEnd> {
        let (catalog, name, options, started) =
            (self.catalog, self.name, self.options, self.started);
        // Commit loop: rebase on a moved head while validation allows it.
        let mut table = table;
        let mut files = files;
        // Files of property updates another commit overtook: removed once ours lands.
        let mut unreferenced: Vec<String> = Vec::new();
        loop {
            options.check_deadline(name, "committing")?;
            report.commit_attempts += 1;
            let (current, stale): (Vec<_>, Vec<_>) = std::mem::take(&mut changes.set_properties)
                .into_iter()
                .partition(|p| p.applies_to(&table.metadata));
            for update in stale {
                tracing::info!(table = %name, property = %update.key, "another commit changed the property; leaving its value");
                unreferenced.extend(update.files);
            }
            changes.set_properties = current;
            // The metadata file goes out with the manifests: one round of uploads.
            let build = build_and_write_snapshot(
                &table,
                &options.branch,
                &files,
                &changes,
                !catalog.commits_changes(),
            );
            let written = match puffin_to_upload.take() {
                None => build.await?,
                Some(puffin) => {
                    // Both run to the end (join, not try_join), so nothing is still in
                    // flight when files are removed. A failed build has removed its own
                    // files; the Puffin file is in `attempt_files`, which the caller
                    // removes.
                    let (written, uploaded) = futures::join!(build, puffin.upload(&table.file_io));
                    let written = written?;
                    crate::test_hooks::pause_point(crate::test_hooks::AFTER_FILES).await;
                    if let Err(e) = uploaded
                        .map_err(Error::from)
                        .and_then(|()| options.check_deadline(name, "committing"))
                    {
                        crate::storage::delete_files(
                            &table.file_io,
                            table.location(),
                            &written.prepared.written_files,
                        )
                        .await;
                        return Err(e);
                    }
                    written
                }
            };
            let prepared = &written.prepared;
            // publish read the pointer back after a failed swap: any error but
            // CommitStateUnknown means this commit is not in the table, so the deletes
            // below (and the caller's) cannot remove a file the table references.
            match crate::commit::publish_written(catalog, &table, &written).await {
                Ok(published) => {
                    crate::storage::delete_files(&table.file_io, table.location(), &unreferenced)
                        .await;
                    report.outcome = Outcome::Converted;
                    report.new_snapshot_id = Some(prepared.snapshot_id);
                    report.metadata_location = Some(published.metadata_location);
                    report.base_snapshot_id = files.snapshot_id;
                    report.duration_ms = started.elapsed().as_millis() as u64;
                    tracing::info!(
                        table = %name,
                        base_snapshot_id = ?files.snapshot_id,
                        new_snapshot_id = prepared.snapshot_id,
                        dvs = report.dvs_written,
                        equality_delete_files = report.equality_delete_files_removed,
                        "converted"
                    );
                    return Ok(AttemptEnd::Done);
                }
                Err(Error::CommitConflict { message, .. }) => {
                    crate::storage::delete_files(
                        &table.file_io,
                        table.location(),
                        &prepared.written_files,
                    )
                    .await;
                    report.conflicts += 1;
                    if report.commit_attempts > policy.num_retries
                        || started.elapsed() > policy.total_timeout
                    {
                        return Err(Error::RetriesExhausted {
                            table: name.to_string(),
                            attempts: report.commit_attempts,
                            last: message,
                        });
                    }
                    let wait = policy.backoff(report.commit_attempts);
                    if options
                        .deadline
                        .is_some_and(|deadline| Instant::now() + wait >= deadline)
                    {
                        return Err(options.deadline_error(name, "retrying a conflicting commit"));
                    }
                    tokio::time::sleep(wait).await;
                    let reloaded = LoadedTable::load(catalog, name).await?;
                    let head = reloaded.head(&options.branch)?;
                    // The same scope as the attempt's: what it did not read, it
                    // cannot have relied on.
                    let scope = data_scope(&footprint.groups, options);
                    if files.data_paths_filtered {
                        // A split's fan-in read of the base only the files it writes
                        // DVs for; telling what the head added takes all of its scope.
                        let base = files
                            .snapshot_id
                            .and_then(|id| reloaded.metadata.snapshot_by_id(id).cloned());
                        let Some(base) = base else {
                            report.replans += 1;
                            return Ok(AttemptEnd::Replan);
                        };
                        let scope = scope.clone();
                        (files, ()) =
                            TableFiles::read_scoped(&reloaded, Some(&base), |_| Ok((scope, ())))
                                .await?;
                    }
                    let (new_files, ()) =
                        TableFiles::read_scoped(&reloaded, head.as_ref(), |_| Ok((scope, ())))
                            .await?;
                    match validate(&files, &new_files, footprint) {
                        Ok(refreshed_removed) => {
                            tracing::info!(table = %name, "head moved; rebasing the conversion");
                            report.rebases += 1;
                            changes.removed_files = refreshed_removed;
                            table = reloaded;
                            files = new_files;
                        }
                        Err(reason) => {
                            tracing::info!(table = %name, %reason, "head moved; planning again");
                            report.replans += 1;
                            return Ok(AttemptEnd::Replan);
                        }
                    }
                }
                // The swap may have landed: keep every file; cleanup decides later.
                Err(e @ Error::CommitStateUnknown { .. }) => return Err(e),
                Err(e) => {
                    crate::storage::delete_files(
                        &table.file_io,
                        table.location(),
                        &prepared.written_files,
                    )
                    .await;
                    return Err(e);
                }
            }
        }
    }
}

/// The data an attempt reads: what its groups can touch, or with pruning turned off
/// (`--no-pruning`, for tables whose bounds cannot be trusted) every data file.
pub(super) fn data_scope(groups: &[DeleteGroup], options: &ConvertOptions) -> DataScope {
    if options.resolve.bound_pruning {
        DataScope::of_groups(groups)
    } else {
        DataScope::Everything
    }
}

/// The groups to convert: all, or only the delete files the shard names that are still live.
pub(super) fn select_groups(
    table: &LoadedTable,
    files: &TableFiles,
    shard: Option<&Shard>,
) -> Result<Vec<DeleteGroup>> {
    let groups = group_equality_deletes(table, files)?;
    let Some(shard) = shard else {
        return Ok(groups);
    };
    if shard.table != table.name {
        return Err(Error::InvalidInput(format!(
            "shard {} is for table {}, not {}",
            shard.id, shard.table, table.name
        )));
    }
    let wanted: HashSet<&str> = shard.delete_files().collect();
    Ok(groups
        .into_iter()
        .filter_map(|mut g| {
            g.delete_files.retain(|f| wanted.contains(f.path()));
            if g.delete_files.is_empty() {
                None
            } else {
                g.max_sequence_number = g
                    .delete_files
                    .iter()
                    .map(|f| f.data_sequence_number)
                    .max()
                    .unwrap_or(i64::MIN);
                Some(g)
            }
        })
        .collect())
}

/// Encodes the DVs of `dv_plans` into one new Puffin file next to the table's data
/// (recorded in `written_files` before anything is uploaded); the caller uploads it.
/// Named `stem` when given, else uniquely.
pub(crate) async fn encode_dvs(
    table: &LoadedTable,
    dv_plans: &[DvPlan],
    stem: Option<&str>,
    written_files: &mut Vec<String>,
) -> Result<EncodedPuffin> {
    let location = match stem {
        Some(stem) => format!(
            "{}/data/{stem}.puffin",
            table.location().trim_end_matches('/')
        ),
        None => crate::storage::new_data_file(table.location(), None, "eqdv-dv", "puffin"),
    };
    written_files.push(location.clone());
    let inputs: Vec<DvBlobInput> = dv_plans
        .iter()
        .map(|p| DvBlobInput {
            referenced_data_file: p.data_file.path().to_string(),
            positions: p.positions.clone(),
        })
        .collect();
    Ok(encode_dv_puffin(&location, &inputs).await?)
}

/// The manifest entry of `dv`, written into `puffin` for `data_file`.
pub(crate) fn dv_added_file(
    table: &LoadedTable,
    puffin: &WrittenPuffin,
    dv: &WrittenDv,
    data_file: &LiveFile,
) -> Result<AddedFile> {
    let partition = dv_partition(table, data_file)?;
    Ok(AddedFile {
        spec_id: data_file.spec_id,
        file: puffin.dv_entry(dv, data_file.spec_id, partition)?,
    })
}

/// The partition a DV for `data_file` is filed in: its data file's, in the partition
/// types the new manifest is written with (the current schema's: a data file written
/// before a promotion carries the old types).
pub(super) fn dv_partition(table: &LoadedTable, data_file: &LiveFile) -> Result<Struct> {
    Ok(crate::partition::partition_as_type(
        data_file.file.partition(),
        &dv_partition_type(table, data_file.spec_id)?,
    ))
}

/// The partition type of spec `spec_id` as a new manifest is written with it (in the
/// current schema's types).
pub(super) fn dv_partition_type(table: &LoadedTable, spec_id: i32) -> Result<StructType> {
    let spec = table.partition_spec(spec_id)?;
    Ok(spec.partition_type(table.metadata.current_schema())?)
}

/// The snapshot changes of a conversion on `base_snapshot_id`: `added` DVs in, `removed`
/// delete files out, and the summary properties that say what converted it.
pub(super) fn conversion_changes(
    base_snapshot_id: Option<i64>,
    options: &ConvertOptions,
    added: Vec<AddedFile>,
    removed: Vec<LiveFile>,
) -> SnapshotChanges {
    let mut changes = SnapshotChanges::new(Operation::Delete);
    changes.added_delete_files = added;
    changes.removed_files = removed;
    if let Some(id) = base_snapshot_id {
        changes
            .extra_summary
            .insert(CONVERTED_FROM_PROPERTY.into(), id.to_string());
    }
    changes
        .extra_summary
        .insert(SOURCE_PROPERTY.into(), options.source.clone());
    if let Some(shard) = &options.shard {
        changes
            .extra_summary
            .insert(SHARD_PROPERTY.into(), shard.id.clone());
    }
    if let Some(split) = &options.split_id {
        changes
            .extra_summary
            .insert(SPLIT_PROPERTY.into(), split.clone());
    }
    changes
}

/// Refuses a shard planned on another branch than the one the options convert.
pub(super) fn check_shard_branch(options: &ConvertOptions) -> Result<()> {
    match &options.shard {
        Some(shard) if shard.branch != options.branch => Err(Error::InvalidInput(format!(
            "shard {} was planned on branch '{}', not '{}'",
            shard.id, shard.branch, options.branch
        ))),
        _ => Ok(()),
    }
}

/// Resolves the groups' keys to positions in `files` (the scan stopped at the options'
/// deadline: dropping it cancels its tasks) and merges them with what is already
/// deleted: the resolve's metrics, the DVs to write and the v2 position delete files
/// they make redundant.
pub(super) async fn resolve_and_merge(
    table: &LoadedTable,
    files: &TableFiles,
    groups: &[DeleteGroup],
    options: &ConvertOptions,
) -> Result<(
    ResolveMetrics,
    Vec<DvPlan>,
    Vec<LiveFile>,
    (IndexStates, ScannedKeys),
)> {
    options.check_deadline(&table.name, "resolving keys to positions")?;
    // A file with a new deleted row merges with its old DV: its Puffin footer is read
    // while the other files are scanned, not in a round of its own after them.
    let old_dvs = FooterPrefetch::new(table.file_io.clone(), options.resolve.parallelism);
    let on_match = |path: &str| {
        if let Some(dv) = files.dvs.get(path) {
            old_dvs.start(dv.path(), dv.file.file_size_in_bytes());
        }
    };
    let resolving = resolve_observed(table, files, groups, &options.resolve, &on_match);
    let resolved = match options.deadline {
        Some(deadline) => tokio::time::timeout_at(deadline.into(), resolving)
            .await
            .map_err(|_| options.deadline_error(&table.name, "resolving keys to positions"))??,
        None => resolving.await?,
    };
    let (dv_plans, removed_position_deletes) = merge::with_existing_deletes(
        table,
        files,
        resolved.positions,
        options.resolve.parallelism,
        (Some(&old_dvs), &resolved.existing_dvs),
    )
    .await?;
    Ok((
        resolved.metrics,
        dv_plans,
        removed_position_deletes,
        (resolved.key_indexes, resolved.scanned_keys),
    ))
}
