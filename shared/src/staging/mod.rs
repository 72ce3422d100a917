//! The staging mode: a writer commits to a staging branch (equality deletes and all),
//! and eqdv applies each of its snapshots to a target branch as data files plus DVs, so
//! the target never holds an equality delete and every reader of it reads it right.
//!
//! `history` tells which staging snapshots the target has not applied (each target
//! snapshot eqdv commits records the staging snapshot it reflects, so a crash, a lost
//! answer or a redelivered event never applies one twice or skips one); `changes` reads
//! what one staging snapshot changed and refuses what cannot be applied faithfully;
//! `apply` makes the target commit. One target commit per staging snapshot, in order; a
//! commit that loses the race for the target's head stands again from the new head.

mod apply;
mod changes;
mod history;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use roaring::RoaringTreemap;

use serde::Serialize;

use crate::catalog::{Catalog, TableName};
use crate::convert::{ConvertOptions, ConvertReport, Outcome, RetryPolicy};
pub use crate::convert::{StagingLag, StagingSummary};
use crate::resolve::ResolveMetrics;
use crate::table::LoadedTable;
use crate::{Error, Result};
use apply::{ApplyEnd, apply_snapshots};
pub use changes::{StagingChanges, read_changes};
pub use history::{Branches, RecordedApplication, Standing, applied_property, standing};

/// Summary property of a target snapshot: the staging snapshot it reflects.
pub const STAGING_SNAPSHOT_PROPERTY: &str = "eqdv.staging-snapshot-id";
/// Summary property of a target snapshot: the staging branch it was applied from. Also
/// the table property that puts a table in the staging mode (the branch's name).
pub const STAGING_BRANCH_PROPERTY: &str = "eqdv.staging-branch";

/// The staging branch the table property `eqdv.staging-branch` names for converting
/// `branch`: none when unset, empty, or naming `branch` itself (converting the staging
/// branch in place stays possible).
pub fn staging_branch_of(
    properties: &std::collections::HashMap<String, String>,
    branch: &str,
) -> Option<String> {
    properties
        .get(STAGING_BRANCH_PROPERTY)
        .map(|b| b.trim())
        .filter(|b| !b.is_empty() && *b != branch)
        .map(str::to_string)
}

/// What applying one staging snapshot did.
#[derive(Clone, Debug, Serialize)]
pub struct AppliedSnapshot {
    /// The newest staging snapshot the commit applied (what the target records).
    pub staging_snapshot_id: i64,
    /// Every staging snapshot the commit applied, oldest first (several when pending
    /// snapshots were folded into one commit).
    pub folded: Vec<i64>,
    /// The target snapshot committed (`None` on a dry run).
    pub target_snapshot_id: Option<i64>,
    pub metadata_location: Option<String>,
    pub data_files_added: usize,
    pub records_added: u64,
    pub equality_delete_files_applied: usize,
    pub equality_deletes_applied: u64,
    /// DVs and v2 position delete files of the staging snapshot carried over.
    pub staged_dvs: usize,
    pub staged_position_delete_files: usize,
    pub dvs_written: usize,
    /// Positions newly deleted on the target.
    pub positions_added: u64,
    pub puffin_file: Option<String>,
    pub resolve: ResolveMetrics,
    pub resolve_ms: f64,
    /// On a dry run: the DVs the commit would write (every position of each, by data
    /// file path), for comparing runs with and without the key index.
    #[serde(skip)]
    pub planned_dvs: BTreeMap<String, RoaringTreemap>,
}

impl StagingLag {
    /// The lag of `standing`, as of now.
    pub fn of(standing: &Standing) -> Self {
        let seconds = standing.pending.first().map_or(0.0, |oldest| {
            let now = chrono::Utc::now().timestamp_millis();
            (now - oldest.timestamp_ms()).max(0) as f64 / 1000.0
        });
        Self {
            snapshots: standing.pending.len(),
            seconds,
        }
    }
}

/// What a staging application did.
#[derive(Clone, Debug, Serialize)]
pub struct StagingReport {
    pub table: String,
    pub staging_branch: String,
    pub target_branch: String,
    pub outcome: Outcome,
    /// The staging snapshot the target reflected before this run.
    pub applied_before: Option<i64>,
    /// One entry per staging snapshot applied (or, on a dry run, the first pending).
    pub applied: Vec<AppliedSnapshot>,
    /// What is left: the lag after this run.
    pub lag: StagingLag,
    pub commit_attempts: u32,
    pub conflicts: u32,
    pub duration_ms: u64,
}

impl StagingReport {
    /// This application as a conversion's report (for callers that handle both, such as
    /// the converter function): its last target snapshot, its DVs and positions, and the
    /// staging summary.
    pub fn to_convert_report(&self, options: &ConvertOptions) -> ConvertReport {
        let name = TableName::parse(&self.table)
            .unwrap_or_else(|_| TableName::new(String::new(), self.table.clone()));
        let mut report = ConvertReport::new(&name, options, self.outcome);
        report.table = self.table.clone();
        report.new_snapshot_id = self.applied.iter().rev().find_map(|a| a.target_snapshot_id);
        report.metadata_location = self
            .applied
            .iter()
            .rev()
            .find_map(|a| a.metadata_location.clone());
        report.dvs_written = self.applied.iter().map(|a| a.dvs_written).sum();
        report.positions_added = self.applied.iter().map(|a| a.positions_added).sum();
        report.commit_attempts = self.commit_attempts;
        report.conflicts = self.conflicts;
        report.duration_ms = self.duration_ms;
        report.staging = Some(StagingSummary {
            staging_branch: self.staging_branch.clone(),
            snapshots_applied: self.applied.iter().map(|a| a.folded.len()).sum(),
            applied_before: self.applied_before,
            lag: self.lag.clone(),
        });
        report
    }
}

/// Options of a staging application besides the conversion's.
#[derive(Clone, Debug)]
pub struct StagingOptions {
    pub staging_branch: String,
    /// Apply at most this many staging snapshots in this run (the rest stay pending).
    pub max_snapshots: Option<usize>,
    /// Fold up to this many pending staging snapshots into one target commit (at least
    /// 1: one commit per staging snapshot, as Flink's converter makes).
    pub snapshots_per_commit: usize,
}

/// Pending staging snapshots folded into one target commit by default: the result is
/// the same as one commit each, and a target that fell behind catches up in fewer
/// commits (fewer races with other writers), while one commit's work stays bounded.
pub const DEFAULT_SNAPSHOTS_PER_COMMIT: usize = 16;

impl StagingOptions {
    /// Applies `staging_branch` with the defaults.
    pub fn new(staging_branch: impl Into<String>) -> Self {
        Self {
            staging_branch: staging_branch.into(),
            max_snapshots: None,
            snapshots_per_commit: DEFAULT_SNAPSHOTS_PER_COMMIT,
        }
    }
}

/// Applies the pending snapshots of `staging.staging_branch` to `options.branch`, one
/// commit each, oldest first.
pub async fn apply_staging(
    catalog: &dyn Catalog,
    name: &TableName,
    staging: &StagingOptions,
    options: &ConvertOptions,
) -> Result<StagingReport> {
    let started = Instant::now();
    let table_name = name.to_string();
    let branches = Branches {
        table: &table_name,
        staging: &staging.staging_branch,
        target: &options.branch,
    };
    let mut report = StagingReport {
        table: table_name.clone(),
        staging_branch: staging.staging_branch.clone(),
        target_branch: options.branch.clone(),
        outcome: Outcome::NothingToDo,
        applied_before: None,
        applied: Vec::new(),
        lag: StagingLag::default(),
        commit_attempts: 0,
        conflicts: 0,
        duration_ms: 0,
    };
    let mut policy: Option<RetryPolicy> = options.retry.clone();
    let mut conflicts_in_a_row = 0u32;
    let mut first = true;
    loop {
        options.check_deadline(name, "planning")?;
        let table = LoadedTable::load(catalog, name).await?;
        table.require_v3()?;
        table.require_branch(&options.branch)?;
        let policy = policy
            .get_or_insert_with(|| options.retry_policy_for(&table))
            .clone();
        let standing = standing(&table.metadata, branches)?;
        if first {
            report.applied_before = standing.applied;
            first = false;
        }
        report.lag = StagingLag::of(&standing);
        let applied_so_far: usize = report.applied.iter().map(|a| a.folded.len()).sum();
        let allowed = staging
            .max_snapshots
            .map_or(usize::MAX, |max| max.saturating_sub(applied_so_far));
        let fold = standing
            .pending
            .len()
            .min(staging.snapshots_per_commit.max(1))
            .min(allowed);
        if fold == 0 {
            break;
        }
        let next = &standing.pending[..fold];
        report.commit_attempts += u32::from(!options.dry_run);
        match apply_snapshots(
            catalog,
            &table,
            (standing.target_head.as_ref(), next),
            branches,
            options,
        )
        .await?
        {
            ApplyEnd::Done(applied) => {
                conflicts_in_a_row = 0;
                report.applied.push(*applied);
                if options.dry_run {
                    report.outcome = Outcome::DryRun;
                    break;
                }
                report.outcome = Outcome::Converted;
            }
            ApplyEnd::Conflict(message) => {
                report.conflicts += 1;
                conflicts_in_a_row += 1;
                if conflicts_in_a_row > policy.num_retries
                    || started.elapsed() > policy.total_timeout
                {
                    return Err(Error::RetriesExhausted {
                        table: table_name,
                        attempts: report.commit_attempts,
                        last: message,
                    });
                }
                let wait: Duration = policy.backoff(conflicts_in_a_row);
                if options
                    .deadline
                    .is_some_and(|deadline| Instant::now() + wait >= deadline)
                {
                    return Err(options.deadline_error(name, "retrying a conflicting commit"));
                }
                tracing::info!(table = %name, %message, "the target's head moved; standing again");
                tokio::time::sleep(wait).await;
            }
        }
    }
    report.duration_ms = started.elapsed().as_millis() as u64;
    Ok(report)
}
