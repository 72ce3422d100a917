//! The conversion job and its commit protocol (DESIGN.md, "The commit protocol").
//!
//! load -> plan -> resolve -> merge with existing DVs and v2 position deletes -> write
//! Puffin -> build snapshot -> swap pointer. On a conflict the new head is validated
//! against what this attempt relied on: if nothing it read or removes changed, the same
//! Puffin file is committed on the new head (rebase); otherwise the attempt's files are
//! deleted and the work is planned again. It never commits without validating against
//! the head, never writes a second DV for a data file, and on giving up removes every
//! file the attempt wrote (except when the outcome of the last swap is unknown).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

use iceberg::spec::{DataContentType, DataFileBuilder, DataFileFormat, Operation};
use rand::Rng;
use roaring::RoaringTreemap;
use serde::Serialize;

use crate::catalog::{Catalog, TableName};
use crate::plan::{DeleteGroup, Shard, group_equality_deletes};
use crate::puffin::{DvBlobInput, write_dv_puffin};
use crate::resolve::{ResolveMetrics, ResolveOptions, resolve};
use crate::snapshot::{AddedFile, SnapshotChanges, build_snapshot};
use crate::table::{FileEntryKey, LiveFile, LoadedTable, TableFiles};
use crate::{Error, Result};

/// Summary property naming the snapshot a conversion was planned on.
pub const CONVERTED_FROM_PROPERTY: &str = "eqdv.converted-from";
/// Summary property naming what ran the conversion (e.g. `eqdv-converter`, `eqdv-cli`).
pub const SOURCE_PROPERTY: &str = "eqdv.source";
/// Summary property naming the shard converted, when there was one.
pub const SHARD_PROPERTY: &str = "eqdv.shard-id";

/// How to run a conversion.
#[derive(Clone, Debug)]
pub struct ConvertOptions {
    pub branch: String,
    /// Plan and resolve, but write and commit nothing.
    pub dry_run: bool,
    /// Convert only this shard's delete files (from a plan); the whole table when `None`.
    pub shard: Option<Shard>,
    pub resolve: ResolveOptions,
    /// Overrides the table's `commit.retry.*` properties.
    pub retry: Option<RetryPolicy>,
    /// Overrides only the number of retries (`commit.retry.num-retries`).
    pub commit_retries: Option<u32>,
    /// Stop cleanly (no commit, the attempt's files removed) rather than run past this
    /// instant. No new phase starts after it, and a commit is never cut off halfway:
    /// callers keep a margin between it and a hard end such as a Lambda timeout.
    pub deadline: Option<Instant>,
    /// Recorded in the snapshot summary as `eqdv.source`.
    pub source: String,
}

impl Default for ConvertOptions {
    fn default() -> Self {
        Self {
            branch: "main".into(),
            dry_run: false,
            shard: None,
            resolve: ResolveOptions::default(),
            retry: None,
            commit_retries: None,
            deadline: None,
            source: "eqdv".into(),
        }
    }
}

/// Commit retry policy: exponential backoff with full jitter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    pub num_retries: u32,
    pub min_wait: Duration,
    pub max_wait: Duration,
    pub total_timeout: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            num_retries: 4,
            min_wait: Duration::from_millis(100),
            max_wait: Duration::from_secs(60),
            total_timeout: Duration::from_secs(30 * 60),
        }
    }
}

impl RetryPolicy {
    /// The table's `commit.retry.*` properties, with Java's defaults.
    pub fn from_properties(props: &HashMap<String, String>) -> Self {
        let d = Self::default();
        let get = |k: &str| props.get(k).and_then(|v| v.trim().parse::<u64>().ok());
        Self {
            num_retries: get("commit.retry.num-retries").map_or(d.num_retries, |v| v as u32),
            min_wait: get("commit.retry.min-wait-ms").map_or(d.min_wait, Duration::from_millis),
            max_wait: get("commit.retry.max-wait-ms").map_or(d.max_wait, Duration::from_millis),
            total_timeout: get("commit.retry.total-timeout-ms")
                .map_or(d.total_timeout, Duration::from_millis),
        }
    }

    /// Full-jitter backoff before retry `attempt` (1-based).
    pub fn backoff(&self, attempt: u32) -> Duration {
        let exp = self.min_wait.saturating_mul(
            1u32.checked_shl(attempt.saturating_sub(1))
                .unwrap_or(u32::MAX),
        );
        let cap = exp.min(self.max_wait);
        let millis = cap.as_millis().min(u128::from(u64::MAX)) as u64;
        Duration::from_millis(rand::rng().random_range(0..=millis))
    }
}

impl ConvertOptions {
    /// Fails with `DeadlineExceeded` when the deadline has passed (before `phase` starts).
    fn check_deadline(&self, table: &TableName, phase: &str) -> Result<()> {
        match self.deadline {
            Some(deadline) if Instant::now() >= deadline => Err(self.deadline_error(table, phase)),
            _ => Ok(()),
        }
    }

    fn deadline_error(&self, table: &TableName, phase: &str) -> Error {
        Error::DeadlineExceeded {
            table: table.to_string(),
            phase: phase.to_string(),
        }
    }
}

/// How a conversion ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// No live equality deletes (in scope): nothing was written.
    NothingToDo,
    /// A snapshot was committed.
    Converted,
    /// `dry_run`: the work was resolved but nothing written.
    DryRun,
}

/// What a conversion did.
#[derive(Clone, Debug, Serialize)]
pub struct ConvertReport {
    pub table: String,
    pub branch: String,
    pub outcome: Outcome,
    /// The head the successful attempt was built on.
    pub base_snapshot_id: Option<i64>,
    pub new_snapshot_id: Option<i64>,
    pub metadata_location: Option<String>,
    pub groups: usize,
    pub equality_delete_files_removed: usize,
    pub equality_deletes_removed: u64,
    pub dvs_written: usize,
    pub dvs_replaced: usize,
    pub position_delete_files_removed: usize,
    /// Positions newly deleted (not already deleted by an older DV or position delete).
    pub positions_added: u64,
    pub puffin_file: Option<String>,
    pub commit_attempts: u32,
    pub conflicts: u32,
    pub rebases: u32,
    pub replans: u32,
    pub duration_ms: u64,
    /// Where the last attempt's time went.
    pub phases: PhaseTimes,
    pub resolve: ResolveMetrics,
}

/// Milliseconds spent per phase of the last attempt (plan again after a conflict: the
/// phases restart).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PhaseTimes {
    /// Loading the table, its manifest list and manifests, and grouping the deletes.
    pub read_table_ms: f64,
    /// Reading the deleted keys and resolving them to positions (merging with
    /// existing DVs and position deletes included).
    pub resolve_ms: f64,
    /// Writing the Puffin file and the metadata, and committing (retries included).
    pub write_commit_ms: f64,
}

impl ConvertReport {
    /// Drops what a discarded attempt planned and wrote (its files are deleted): a re-plan
    /// that finds nothing to do must not report them. The commit counters stay.
    fn forget_attempt(&mut self) {
        self.groups = 0;
        self.equality_delete_files_removed = 0;
        self.equality_deletes_removed = 0;
        self.dvs_written = 0;
        self.dvs_replaced = 0;
        self.position_delete_files_removed = 0;
        self.positions_added = 0;
        self.puffin_file = None;
        self.phases = PhaseTimes::default();
        self.resolve = ResolveMetrics::default();
    }
}

fn ms_since(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1000.0
}

/// The DV to write for one data file.
struct DvPlan {
    data_file: LiveFile,
    positions: RoaringTreemap,
    /// Positions no older DV or position delete had deleted.
    added: u64,
    replaced: Option<LiveFile>,
}

/// What an attempt relied on, to validate a moved head against.
struct AttemptFootprint {
    groups: Vec<DeleteGroup>,
    dv_targets: HashSet<String>,
    removed: Vec<LiveFile>,
}

/// Converts the live equality deletes of `table` (or of one shard) into DVs.
pub async fn convert(
    catalog: &dyn Catalog,
    name: &TableName,
    options: &ConvertOptions,
) -> Result<ConvertReport> {
    let started = Instant::now();
    let mut report = ConvertReport {
        table: name.to_string(),
        branch: options.branch.clone(),
        outcome: Outcome::NothingToDo,
        base_snapshot_id: None,
        new_snapshot_id: None,
        metadata_location: None,
        groups: 0,
        equality_delete_files_removed: 0,
        equality_deletes_removed: 0,
        dvs_written: 0,
        dvs_replaced: 0,
        position_delete_files_removed: 0,
        positions_added: 0,
        puffin_file: None,
        commit_attempts: 0,
        conflicts: 0,
        rebases: 0,
        replans: 0,
        duration_ms: 0,
        phases: PhaseTimes::default(),
        resolve: ResolveMetrics::default(),
    };
    let mut policy: Option<RetryPolicy> = options.retry.clone();

    'plan: loop {
        options.check_deadline(name, "planning")?;
        let phase = Instant::now();
        let table = LoadedTable::load(catalog, name).await?;
        table.require_v3()?;
        table.require_branch(&options.branch)?;
        if let Some(shard) = &options.shard
            && shard.branch != options.branch
        {
            return Err(Error::InvalidInput(format!(
                "shard {} was planned on branch '{}', not '{}'",
                shard.id, shard.branch, options.branch
            )));
        }
        let policy = policy
            .get_or_insert_with(|| {
                let mut policy = RetryPolicy::from_properties(table.metadata.properties());
                if let Some(retries) = options.commit_retries {
                    policy.num_retries = retries;
                }
                policy
            })
            .clone();
        let head = table.head(&options.branch)?;
        let files = TableFiles::read(&table, head.as_ref()).await?;
        let groups = select_groups(&table, &files, options.shard.as_ref())?;
        report.base_snapshot_id = files.snapshot_id;
        report.groups = groups.len();
        report.phases = PhaseTimes {
            read_table_ms: ms_since(phase),
            ..Default::default()
        };
        if groups.is_empty() {
            report.outcome = Outcome::NothingToDo;
            report.duration_ms = started.elapsed().as_millis() as u64;
            return Ok(report);
        }

        options.check_deadline(name, "resolving keys to positions")?;
        let phase = Instant::now();
        let resolving = resolve(&table, &files, &groups, &options.resolve);
        let resolved = match options.deadline {
            // Dropping the scan cancels it (its tasks abort on drop).
            Some(deadline) => tokio::time::timeout_at(deadline.into(), resolving)
                .await
                .map_err(|_| options.deadline_error(name, "resolving keys to positions"))??,
            None => resolving.await?,
        };
        report.resolve = resolved.metrics.clone();
        // Each v2 position delete file that may reference a file we write a DV for is
        // read once, for merging and for removal; the others (other partitions, other
        // shards' files) are not this attempt's business.
        let scoped_position_deletes: Vec<LiveFile> = if resolved.positions.is_empty() {
            Vec::new()
        } else {
            crate::position_deletes::may_reference_any(&files.position_deletes, &resolved.positions)
        };
        let position_deletes = if scoped_position_deletes.is_empty() {
            Vec::new()
        } else {
            crate::position_deletes::read_each(&table, &scoped_position_deletes).await?
        };
        let dv_plans = merge_with_existing(
            &table,
            &files,
            (&scoped_position_deletes, &position_deletes),
            resolved.positions,
        )
        .await?;
        let removed_position_deletes = covered_position_deletes(
            &files,
            &scoped_position_deletes,
            &position_deletes,
            &dv_plans,
        );
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
            return Ok(report);
        }

        // From the first file written on, every error but an unknown commit outcome
        // removes what this attempt wrote.
        let file_io = table.file_io.clone();
        let phase = Instant::now();
        let mut attempt_files: Vec<String> = Vec::new();
        let attempt = Attempt {
            catalog,
            name,
            options,
            policy: &policy,
            started,
        };
        let result = attempt
            .write_and_commit(
                table,
                files,
                groups,
                dv_plans,
                removed,
                &mut report,
                &mut attempt_files,
            )
            .await;
        report.phases.write_commit_ms = ms_since(phase);
        match result {
            Ok(AttemptEnd::Committed) => return Ok(report),
            Ok(AttemptEnd::Replan) => {
                crate::storage::delete_files(&file_io, &attempt_files).await;
                report.forget_attempt();
                continue 'plan;
            }
            // The swap may have landed: keep every file; cleanup decides later.
            Err(e @ Error::CommitStateUnknown { .. }) => return Err(e),
            Err(e) => {
                crate::storage::delete_files(&file_io, &attempt_files).await;
                return Err(e);
            }
        }
    }
}

/// How one attempt ended, short of an error.
enum AttemptEnd {
    Committed,
    /// The head moved in a way that invalidates the attempt: plan again.
    Replan,
}

/// What an attempt needs besides its own work.
struct Attempt<'a> {
    catalog: &'a dyn Catalog,
    name: &'a TableName,
    options: &'a ConvertOptions,
    policy: &'a RetryPolicy,
    started: Instant,
}

impl Attempt<'_> {
    /// Writes the DVs and commits them, rebasing on a moved head while validation allows.
    /// Every file written is recorded in `attempt_files` (manifests and metadata of
    /// failed swaps are removed here already).
    #[allow(clippy::too_many_arguments)]
    async fn write_and_commit(
        &self,
        table: LoadedTable,
        files: TableFiles,
        groups: Vec<DeleteGroup>,
        dv_plans: Vec<DvPlan>,
        removed: Vec<LiveFile>,
        report: &mut ConvertReport,
        attempt_files: &mut Vec<String>,
    ) -> Result<AttemptEnd> {
        let (catalog, name, options, policy, started) = (
            self.catalog,
            self.name,
            self.options,
            self.policy,
            self.started,
        );
        // Write every DV into one Puffin file next to the data.
        options.check_deadline(name, "writing deletion vectors")?;
        let mut added = Vec::new();
        if !dv_plans.is_empty() {
            let location =
                crate::storage::new_data_file(table.location(), None, "eqdv-dv", "puffin");
            attempt_files.push(location.clone());
            let inputs: Vec<DvBlobInput> = dv_plans
                .iter()
                .map(|p| DvBlobInput {
                    referenced_data_file: p.data_file.path().to_string(),
                    positions: p.positions.clone(),
                })
                .collect();
            let written = write_dv_puffin(&table.file_io, &location, &inputs).await?;
            let schema = table.metadata.current_schema();
            for (plan, dv) in dv_plans.iter().zip(&written.dvs) {
                // The DV sits in its data file's partition, in the partition types the new
                // manifest is written with (the current schema's: a data file written
                // before a promotion carries the old types).
                let spec_id = plan.data_file.spec_id;
                let spec = table
                    .metadata
                    .partition_spec_by_id(spec_id)
                    .ok_or_else(|| Error::UnsupportedTable {
                        table: table.name.to_string(),
                        message: format!("partition spec {spec_id} does not exist"),
                    })?;
                let partition = crate::plan::partition_as_type(
                    plan.data_file.file.partition(),
                    &spec.partition_type(schema)?,
                );
                let file = DataFileBuilder::default()
                    .content(DataContentType::PositionDeletes)
                    .file_path(written.location.clone())
                    .file_format(DataFileFormat::Puffin)
                    .partition(partition)
                    .partition_spec_id(plan.data_file.spec_id)
                    .record_count(dv.cardinality)
                    .file_size_in_bytes(written.file_size_in_bytes)
                    .referenced_data_file(Some(dv.referenced_data_file.clone()))
                    .content_offset(Some(dv.content_offset))
                    .content_size_in_bytes(Some(dv.content_size_in_bytes))
                    .build()
                    .map_err(|e| Error::InvalidInput(format!("building DV entry: {e}")))?;
                added.push(AddedFile {
                    spec_id: plan.data_file.spec_id,
                    file,
                });
            }
            report.puffin_file = Some(written.location);
            crate::test_hooks::pause_point(crate::test_hooks::AFTER_PUFFIN).await;
        }

        let footprint = AttemptFootprint {
            groups: groups.clone(),
            dv_targets: dv_plans
                .iter()
                .map(|p| p.data_file.path().to_string())
                .collect(),
            removed: removed.clone(),
        };
        let base_snapshot_id = files.snapshot_id;
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

        // Commit loop: rebase on a moved head while validation allows it.
        let mut table = table;
        let mut files = files;
        loop {
            options.check_deadline(name, "committing")?;
            report.commit_attempts += 1;
            let prepared = build_snapshot(&table, &options.branch, &files, &changes).await?;
            // publish read the pointer back after a failed swap: any error but
            // CommitStateUnknown means this commit is not in the table, so the deletes
            // below (and the caller's) cannot remove a file the table references.
            match crate::commit::publish(catalog, &table, &prepared).await {
                Ok(published) => {
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
                    return Ok(AttemptEnd::Committed);
                }
                Err(Error::CommitConflict { message, .. }) => {
                    crate::storage::delete_files(&table.file_io, &prepared.written_files).await;
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
                    let new_files = TableFiles::read(&reloaded, head.as_ref()).await?;
                    match validate(&files, &new_files, &footprint) {
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
                    crate::storage::delete_files(&table.file_io, &prepared.written_files).await;
                    return Err(e);
                }
            }
        }
    }
}

/// The groups to convert: all, or only the delete files the shard names that are still live.
fn select_groups(
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

/// Unions new positions with each file's existing DV and applicable v2 position deletes.
/// Files whose positions were all deleted already need no new DV.
async fn merge_with_existing(
    table: &LoadedTable,
    files: &TableFiles,
    (position_delete_files, position_deletes): (
        &[LiveFile],
        &[crate::position_deletes::FilePositions],
    ),
    new_positions: BTreeMap<String, RoaringTreemap>,
) -> Result<Vec<DvPlan>> {
    let data_by_path: HashMap<&str, &LiveFile> =
        files.data_files.iter().map(|f| (f.path(), f)).collect();
    let position_deletes =
        crate::position_deletes::by_data_file(position_delete_files, position_deletes);
    let mut plans = Vec::new();
    for (path, positions) in new_positions {
        let Some(data) = data_by_path.get(path.as_str()) else {
            continue;
        };
        let mut merged = positions;
        let mut before = RoaringTreemap::new();
        let replaced = files.dvs.get(&path).cloned();
        if let Some(dv) = &replaced
            && dv.data_sequence_number >= data.data_sequence_number
        {
            let (Some(offset), Some(size)) =
                (dv.file.content_offset(), dv.file.content_size_in_bytes())
            else {
                return Err(Error::file(
                    dv.path(),
                    "deletion vector entry lacks content_offset/content_size_in_bytes",
                    "invalid manifest entry",
                ));
            };
            let existing = crate::puffin::validate_dv_entry(
                &table.file_io,
                &crate::puffin::DvEntryCheck {
                    puffin_location: dv.path(),
                    referenced_data_file: &path,
                    content_offset: offset,
                    content_size_in_bytes: size,
                    record_count: dv.file.record_count(),
                    file_size_in_bytes: dv.file.file_size_in_bytes(),
                },
            )
            .await?;
            before |= existing;
        }
        if let Some(entries) = position_deletes.get(&path) {
            for (seq, positions) in entries {
                if data.data_sequence_number <= *seq {
                    before |= positions;
                }
            }
        }
        let added = &merged - &before;
        if added.is_empty() {
            continue;
        }
        merged |= before;
        plans.push(DvPlan {
            data_file: (*data).clone(),
            positions: merged,
            added: added.len(),
            replaced,
        });
    }
    Ok(plans)
}

/// v2 position delete files that every live data file they reference now has a new DV for.
/// `position_deletes` is what [`crate::position_deletes::read_each`] read from them.
fn covered_position_deletes(
    files: &TableFiles,
    position_delete_files: &[LiveFile],
    position_deletes: &[crate::position_deletes::FilePositions],
    plans: &[DvPlan],
) -> Vec<LiveFile> {
    if plans.is_empty() {
        return Vec::new();
    }
    let live: HashSet<&str> = files.data_files.iter().map(|f| f.path()).collect();
    let new_dvs: HashSet<&str> = plans.iter().map(|p| p.data_file.path()).collect();
    position_delete_files
        .iter()
        .zip(position_deletes)
        .filter(|(_, referenced)| {
            referenced
                .keys()
                .all(|path| !live.contains(path.as_str()) || new_dvs.contains(path.as_str()))
        })
        .map(|(delete, _)| delete.clone())
        .collect()
}

/// Decides whether an attempt built on `base` may be committed on `head`.
///
/// Returns the removed entries as they are listed in `head` (manifests may have been
/// rewritten), or why the work must be planned again.
fn validate(
    base: &TableFiles,
    head: &TableFiles,
    footprint: &AttemptFootprint,
) -> std::result::Result<Vec<LiveFile>, String> {
    // Every file we remove must still be live.
    let head_deletes: HashMap<FileEntryKey, &LiveFile> = head
        .equality_deletes
        .iter()
        .chain(head.dvs.values())
        .chain(&head.position_deletes)
        .map(|f| (f.entry_key(), f))
        .collect();
    let mut refreshed = Vec::with_capacity(footprint.removed.len());
    for removed in &footprint.removed {
        match head_deletes.get(&removed.entry_key()) {
            Some(f) => refreshed.push((*f).clone()),
            None => return Err(format!("delete file {} is no longer live", removed.path())),
        }
    }
    // Data files we write DVs for must still be live, and have no new DV.
    let head_data: HashSet<&str> = head.data_files.iter().map(|f| f.path()).collect();
    for target in &footprint.dv_targets {
        if !head_data.contains(target.as_str()) {
            return Err(format!("data file {target} was removed"));
        }
        let before = base.dvs.get(target).map(LiveFile::entry_key);
        let after = head.dvs.get(target).map(LiveFile::entry_key);
        if before != after {
            return Err(format!("data file {target} got a new deletion vector"));
        }
    }
    // New position delete files might cover our targets.
    let base_pos: HashSet<FileEntryKey> = base
        .position_deletes
        .iter()
        .map(LiveFile::entry_key)
        .collect();
    if let Some(added) = head
        .position_deletes
        .iter()
        .find(|f| !base_pos.contains(&f.entry_key()))
    {
        return Err(format!("position delete file {} was added", added.path()));
    }
    // A data file added with an old sequence number (a rewrite that kept sequence
    // numbers) in a group's scope would escape the deletes we remove.
    let base_data: HashSet<&str> = base.data_files.iter().map(|f| f.path()).collect();
    for data in &head.data_files {
        if base_data.contains(data.path()) {
            continue;
        }
        if let Some(group) = footprint.groups.iter().find(|g| g.may_apply_to(data)) {
            return Err(format!(
                "data file {} was added in scope of the equality deletes of {} with sequence number {} (below {})",
                data.path(),
                group.partition_label,
                data.data_sequence_number,
                group.max_sequence_number
            ));
        }
    }
    Ok(refreshed)
}
