//! The conversion job and its commit protocol (docs/design.md, "The commit protocol").
//!
//! load -> plan -> resolve -> merge with existing DVs and v2 position deletes -> write
//! Puffin -> build snapshot -> swap pointer. On a conflict the new head is validated
//! against what this attempt relied on: if nothing it read or removes changed, the same
//! Puffin file is committed on the new head (rebase); otherwise the attempt's files are
//! deleted and the work is planned again. It never commits without validating against
//! the head, never writes a second DV for a data file, and on giving up removes every
//! file the attempt wrote (except when the outcome of the last swap is unknown).
//!
//! This module holds the options, the report and the retry policy, and plans again while
//! an attempt asks for it; `attempt` runs one attempt, `merge` unions new positions with
//! older deletes, `validate` decides between rebase and re-plan after a conflict, and
//! `ranges` splits one conversion into data ranges converted apart and committed once,
//! and `split` runs such a split as separate tasks (an orchestration's range tasks and
//! fan-in); `index_upkeep` keeps the key index up to date within a conversion.

mod attempt;
mod index_upkeep;
mod merge;
mod split;
mod validate;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use rand::Rng;
use serde::Serialize;

use crate::catalog::{Catalog, TableName};
use crate::plan::Shard;
use crate::resolve::{ResolveMetrics, ResolveOptions};
use crate::table::{LoadedTable, SkippedData};
use crate::{Error, Result};
use attempt::{Attempt, AttemptEnd};

pub(crate) use attempt::{dv_added_file, encode_dvs};
pub(crate) use index_upkeep::keep_key_indexes;
pub use merge::dvs_to_write;
pub(crate) use merge::{DvPlan, with_existing_deletes};
pub use split::{
    DataRange, DvTarget, MAX_RANGES, Membership, RangeDv, RangeLayout, RangePhases, RangePuffin,
    RangeResult, RangeTaskOutput, SplitCleanup, SplitJob, commit_ranges, commit_ranges_of,
    convert_in_ranges, convert_range, convert_range_of, discard_ranges, run_cleanup_task,
    run_commit_task, run_range_task,
};

// The summary properties a conversion records live with the snapshot code; kept here too
// for the callers that name them through `convert`.
pub use crate::snapshot::{
    CONVERTED_FROM_PROPERTY, SHARD_PROPERTY, SOURCE_PROPERTY, SPLIT_PROPERTY,
};

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
    /// The split whose ranges are committed, recorded in the summary as `eqdv.split-id`
    /// (set by the split's tasks, see [`SplitJob`]).
    pub split_id: Option<String>,
    /// The name (without `.puffin`) of the Puffin file written in `<table>/data/`,
    /// instead of a fresh unique one: a split's range task names its own, so that a
    /// retry overwrites it and cleaning up needs no listing.
    pub dv_file_stem: Option<String>,
    /// The table as its caller loaded it moments ago (the planner that converts the
    /// shard it planned, in the same invocation): the first attempt starts from it
    /// instead of loading the pointer and metadata again. A head that moved since is
    /// met at the commit, as with a table loaded here. Ignored if it names another table.
    pub loaded_table: Option<LoadedTable>,
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
            split_id: None,
            dv_file_stem: None,
            loaded_table: None,
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
    /// The retry policy of a conversion of `table`: its `commit.retry.*` properties
    /// (Java's defaults), with the number of retries these options override.
    pub(crate) fn retry_policy_for(&self, table: &LoadedTable) -> RetryPolicy {
        let mut policy = RetryPolicy::from_properties(table.metadata.properties());
        if let Some(retries) = self.commit_retries {
            policy.num_retries = retries;
        }
        policy
    }

    /// Fails with `DeadlineExceeded` when the deadline has passed (before `phase` starts).
    pub(crate) fn check_deadline(&self, table: &TableName, phase: &str) -> Result<()> {
        match self.deadline {
            Some(deadline) if Instant::now() >= deadline => Err(self.deadline_error(table, phase)),
            _ => Ok(()),
        }
    }

    pub(crate) fn deadline_error(&self, table: &TableName, phase: &str) -> Error {
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

/// How far a target is behind its staging branch.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct StagingLag {
    /// Staging snapshots not applied yet.
    pub snapshots: usize,
    /// Seconds since the oldest of them was committed (0 when none is pending).
    pub seconds: f64,
}

/// A staging application in short, as a [`ConvertReport`] carries it (the staging
/// module, above this one, fills it in).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StagingSummary {
    pub staging_branch: String,
    pub snapshots_applied: usize,
    pub applied_before: Option<i64>,
    pub lag: StagingLag,
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
    /// The data ranges the conversion was split into and committed together (0: not
    /// split; see [`convert_in_ranges`]).
    pub ranges: u32,
    pub duration_ms: u64,
    /// Data the last attempt did not read: out of every group's partitions.
    pub skipped_data: SkippedData,
    /// Where the last attempt's time went.
    pub phases: PhaseTimes,
    pub resolve: ResolveMetrics,
    /// What keeping the key index took (one entry per index updated; empty when it is
    /// off or had nothing to add).
    pub key_index: Vec<crate::key_index::Upkeep>,
    /// When there was nothing to do: the other branches whose heads hold live equality
    /// deletes, by their snapshot summaries (a writer may commit to a branch, such as a
    /// staging branch, other than the one converted).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub equality_deletes_elsewhere: Vec<BranchDeletes>,
    /// In the staging mode: what was applied from the staging branch, and the lag left.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub staging: Option<StagingSummary>,
}

/// A branch whose head holds live equality deletes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BranchDeletes {
    pub branch: String,
    /// Equality delete rows, as the head's summary counts them (`total-equality-deletes`).
    pub equality_delete_rows: u64,
}

/// The branches of `table` other than `branch` whose head's summary counts live equality
/// deletes, by name.
fn equality_deletes_elsewhere(table: &LoadedTable, branch: &str) -> Vec<BranchDeletes> {
    let Ok(refs) = crate::refs::refs(&table.metadata) else {
        return Vec::new();
    };
    let mut out: Vec<BranchDeletes> = refs
        .iter()
        .filter(|(name, r)| name.as_str() != branch && !crate::refs::is_tag(r))
        .filter_map(|(name, r)| {
            let snapshot = table.metadata.snapshot_by_id(r.snapshot_id)?;
            let rows = snapshot
                .summary()
                .additional_properties
                .get("total-equality-deletes")?
                .parse::<u64>()
                .ok()?;
            (rows > 0).then(|| BranchDeletes {
                branch: name.clone(),
                equality_delete_rows: rows,
            })
        })
        .collect();
    out.sort_by(|a, b| a.branch.cmp(&b.branch));
    out
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
    /// A report of nothing done yet, ending in `outcome` unless more happens.
    pub(crate) fn new(name: &TableName, options: &ConvertOptions, outcome: Outcome) -> Self {
        Self {
            table: name.to_string(),
            branch: options.branch.clone(),
            outcome,
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
            ranges: 0,
            duration_ms: 0,
            skipped_data: SkippedData::default(),
            phases: PhaseTimes::default(),
            resolve: ResolveMetrics::default(),
            key_index: Vec::new(),
            equality_deletes_elsewhere: Vec::new(),
            staging: None,
        }
    }

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
        self.skipped_data = SkippedData::default();
        self.phases = PhaseTimes::default();
        self.resolve = ResolveMetrics::default();
        self.key_index.clear();
        self.equality_deletes_elsewhere.clear();
    }
}

fn ms_since(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1000.0
}

/// Converts the live equality deletes of `table` (or of one shard) into DVs.
pub async fn convert(
    catalog: &dyn Catalog,
    name: &TableName,
    options: &ConvertOptions,
) -> Result<ConvertReport> {
    let started = Instant::now();
    let mut report = ConvertReport::new(name, options, Outcome::NothingToDo);
    let mut policy: Option<RetryPolicy> = options.retry.clone();
    let mut loaded = options
        .loaded_table
        .clone()
        .filter(|table| &table.name == name);
    let attempt = Attempt {
        catalog,
        name,
        options,
        started,
    };
    loop {
        match attempt.run(&mut policy, loaded.take(), &mut report).await? {
            AttemptEnd::Done => return Ok(report),
            // The attempt's files are deleted and the report forgotten: plan again.
            AttemptEnd::Replan => continue,
        }
    }
}
