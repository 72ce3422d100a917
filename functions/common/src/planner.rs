//! The planner function: an event in, shards out to the shard queue (or, when too big
//! for one converter and a split state machine is configured, split into data ranges and
//! started on Step Functions), a summary back.
//!
//! A plan of one shard small enough (`EQDV_CONVERT_IN_PLANNER_MAX_MB`) is converted
//! here, in the same invocation, on the table the plan was made on: a streaming commit
//! then costs one invocation and one table read instead of two. If that conversion fails
//! or would run past the deadline, the shard goes to the queue as any other.
//!
//! One table failing to plan does not stop the others, but the invocation then ends
//! in an error naming the failures, so that Lambda's retries of asynchronous
//! invocations (EventBridge) try again; shards already sent are deduplicated by SQS.

use std::collections::BTreeMap;
use std::time::Instant;

use eqdv::catalog::Catalog;
use eqdv::convert::ConvertReport;
use eqdv::plan::Shard;
use eqdv::planner::{PlannerConfig, TableDecision, Trigger, plan_triggers};
/// The store a planner keeps its reads in (the planner binary makes one per process).
pub use eqdv::table::KeptReads;
use eqdv::table::LoadedTable;
use serde::Serialize;
use serde_json::Value;

use crate::converter::Converter;
use crate::events::parse_planner_event;
use crate::metrics::{KeptReadsAtStart, MetricSet, Unit};
use crate::queue::ShardQueue;
use crate::split::{SplitStarter, StartedSplit};
use crate::{FunctionConfig, FunctionError, Result};
use eqdv::convert::SplitJob;

/// What the planner returns.
#[derive(Clone, Debug, Serialize)]
pub struct PlannerResponse {
    pub dry_run: bool,
    pub tables: BTreeMap<String, TableDecision>,
    /// Shards sent (or, in a dry run, that would be sent).
    pub shards: Vec<ShardSent>,
}

/// One shard, as the summary shows it (not its file list).
#[derive(Clone, Debug, Serialize)]
pub struct ShardSent {
    pub id: String,
    pub table: String,
    pub partitions: Vec<String>,
    pub delete_files: usize,
    pub estimated_bytes: u64,
    /// The queue's message id; none in a dry run or when the shard was split.
    pub message_id: Option<String>,
    /// The split, when the shard was too big for one converter.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub split: Option<SplitSent>,
    /// The planner's own conversion of the shard, when it tried one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub in_planner: Option<InPlanner>,
}

/// How the planner's conversion of its plan's only shard ended.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum InPlanner {
    /// Converted (or found converted already): nothing was queued. The conversion's
    /// report, as the converter logs it.
    Converted(Box<ConvertReport>),
    /// It failed; the shard was sent to the queue instead.
    Queued { error: String },
}

/// A shard split into data ranges, converted by a Step Functions execution.
#[derive(Clone, Debug, Serialize)]
pub struct SplitSent {
    pub id: String,
    pub ranges: u32,
    /// The execution converting it; none in a dry run, or while it waits.
    pub execution: Option<String>,
    /// The running execution of another split of the same partitions that this one
    /// waits for (it is not started; its deletes are planned again once that one ends).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waiting_for: Option<String>,
}

impl ShardSent {
    fn of(
        shard: &Shard,
        message_id: Option<String>,
        split: Option<SplitSent>,
        in_planner: Option<InPlanner>,
    ) -> Self {
        Self {
            id: shard.id.clone(),
            table: shard.table.to_string(),
            partitions: shard.partitions.clone(),
            delete_files: shard.delete_files().count(),
            estimated_bytes: shard.estimated_bytes,
            message_id,
            split,
            in_planner,
        }
    }
}

/// Converts the plan's only shard on the table it was planned on, stopping cleanly (no
/// commit, its files removed) by the converter's margin before `deadline`. Any error is
/// the queue's to retry: the converter reads the table again and applies its own
/// retries and dead-lettering.
async fn convert_in_planner(
    converter: &Converter,
    shard: &Shard,
    table: &LoadedTable,
    deadline: Option<Instant>,
) -> InPlanner {
    let deadline = converter.config.engine_deadline(deadline);
    match converter
        .convert_planned_shard(shard, deadline, table.clone())
        .await
    {
        Ok(report) => {
            tracing::info!(table = %shard.table, shard = %shard.id, outcome = ?report.outcome, new_snapshot_id = report.new_snapshot_id, "shard converted in the planner");
            InPlanner::Converted(Box::new(report))
        }
        Err(e) => {
            tracing::warn!(table = %shard.table, shard = %shard.id, error = %e, kind = e.kind(), "converting in the planner failed: the shard goes to the queue");
            InPlanner::Queued {
                error: e.to_string(),
            }
        }
    }
}

/// What became of a split the planner made.
enum SplitStart {
    /// Its execution, started now or before.
    Started(Box<StartedSplit>),
    /// Not started: the running execution of another split of its partitions.
    Waiting(String),
}

/// Starts `job`, unless another split of its partitions is running.
async fn start_split(splits: &dyn SplitStarter, job: &SplitJob) -> Result<SplitStart> {
    if let Some(running) = splits.running_overlap(job).await? {
        return Ok(SplitStart::Waiting(running));
    }
    Ok(SplitStart::Started(Box::new(splits.start(job).await?)))
}

/// The planner with its catalog and queue, built once per Lambda instance.
pub struct Planner {
    pub catalog: Box<dyn Catalog>,
    pub config: FunctionConfig,
    pub queue: Box<dyn ShardQueue>,
    /// Where shards over `config.split_above_bytes` go; without it, to the queue.
    pub splits: Option<Box<dyn SplitStarter>>,
    /// Converts a plan's only shard here when `config.converts_in_planner` allows;
    /// without it every shard is sent.
    pub converter: Option<Converter>,
    /// Where a converting planner keeps the manifests it reads: a store of the process,
    /// so that a warm Lambda instance's next invocation fetches only the manifests the
    /// commits since added (off: each table keeps its own, for one invocation).
    pub kept_reads: KeptReads,
}

/// A planning run: the response, and what failed (tables, shard sends).
#[derive(Clone, Debug)]
pub struct PlannerRun {
    pub response: PlannerResponse,
    pub failures: Vec<String>,
}

impl Planner {
    /// Handles one invocation's payload: the response, or an error naming every table
    /// or shard that failed (after the rest was planned and sent).
    /// `deadline` is when the invocation ends (Lambda's hard stop).
    pub async fn handle(
        &self,
        event: &Value,
        deadline: Option<Instant>,
    ) -> Result<PlannerResponse> {
        // What the last invocation did not read again is of no use to this one.
        self.kept_reads.next_invocation();
        let run = self.run(event, deadline).await?;
        if !run.failures.is_empty() {
            return Err(FunctionError::PlanningIncomplete(run.failures.join("; ")));
        }
        Ok(run.response)
    }

    /// Plans and sends; failures of single tables or shards are collected, not raised.
    pub async fn run(&self, event: &Value, deadline: Option<Instant>) -> Result<PlannerRun> {
        let triggers = parse_planner_event(event)?;
        self.run_triggers(&triggers, deadline).await
    }

    /// [`Planner::run`] for triggers already parsed (`eqdv backfill` builds its own).
    pub async fn run_triggers(
        &self,
        triggers: &[Trigger],
        deadline: Option<Instant>,
    ) -> Result<PlannerRun> {
        let started = Instant::now();
        let kept_reads = KeptReadsAtStart::of(&self.kept_reads);
        let config = PlannerConfig {
            kept_reads: self.kept_reads.clone(),
            ..self.config.planner()
        };
        let summary = plan_triggers(self.catalog.as_ref(), triggers, &config).await?;

        let mut shards = Vec::with_capacity(summary.shards.len());
        let mut failures: Vec<String> = summary
            .tables
            .iter()
            .filter_map(|(table, d)| match d {
                TableDecision::Failed { error } => Some(format!("{table}: {error}")),
                _ => None,
            })
            .collect();
        let mut sent = 0u64;
        let mut splits_started = 0u64;
        let mut splits_waiting = 0u64;
        let (mut converted_here, mut queued_after_failing) = (0u64, 0u64);
        // The shard this invocation converts itself, with the table it was planned on.
        let convert_here = match (&self.converter, summary.single_shard()) {
            (Some(converter), Some((shard, table)))
                if !summary.dry_run && self.config.converts_in_planner(shard.estimated_bytes) =>
            {
                Some((converter, table))
            }
            _ => None,
        };
        for shard in &summary.shards {
            let split = match (&self.splits, self.config.ranges_for(shard.estimated_bytes)) {
                (Some(_), ranges) if ranges >= 2 => Some(SplitJob::new(shard.clone(), ranges)?),
                _ => None,
            };
            let (message_id, split, in_planner) = match split {
                Some(mut job) => {
                    let (mut execution, mut waiting_for) = (None, None);
                    if !summary.dry_run {
                        let Some(splits) = &self.splits else {
                            continue;
                        };
                        match start_split(splits.as_ref(), &job).await {
                            Ok(SplitStart::Started(started)) => {
                                splits_started += 1;
                                tracing::info!(table = %shard.table, shard = %shard.id, split = %started.job.id, ranges = started.job.ranges, execution = %started.execution, "split started");
                                let StartedSplit {
                                    execution: started,
                                    job: started_job,
                                } = *started;
                                execution = Some(started);
                                // A re-run of a failed split runs in more ranges.
                                job = started_job;
                            }
                            Ok(SplitStart::Waiting(running)) => {
                                splits_waiting += 1;
                                tracing::info!(table = %shard.table, shard = %shard.id, split = %job.id, running = %running, "another split of these partitions is running: this one waits for its commit or the sweep");
                                waiting_for = Some(running);
                            }
                            Err(e) => {
                                tracing::error!(table = %shard.table, shard = %shard.id, split = %job.id, error = %e, "starting a split failed");
                                failures.push(format!("{}: split {}: {e}", shard.table, job.id));
                                continue;
                            }
                        }
                    }
                    let sent = SplitSent {
                        id: job.id,
                        ranges: job.ranges,
                        execution,
                        waiting_for,
                    };
                    (None, Some(sent), None)
                }
                None if summary.dry_run => (None, None, None),
                None => {
                    let in_planner = match convert_here {
                        Some((converter, table)) => {
                            Some(convert_in_planner(converter, shard, table, deadline).await)
                        }
                        None => None,
                    };
                    if let Some(done @ InPlanner::Converted(_)) = &in_planner {
                        converted_here += 1;
                        shards.push(ShardSent::of(shard, None, None, Some(done.clone())));
                        continue;
                    }
                    queued_after_failing += u64::from(in_planner.is_some());
                    match self.queue.send(shard).await {
                        Ok(id) => {
                            sent += 1;
                            tracing::info!(table = %shard.table, shard = %shard.id, message_id = %id, "shard sent");
                            (Some(id), None, in_planner)
                        }
                        Err(e) => {
                            tracing::error!(table = %shard.table, shard = %shard.id, error = %e, "sending a shard failed");
                            failures.push(format!("{}: shard {}: {e}", shard.table, shard.id));
                            continue;
                        }
                    }
                }
            };
            shards.push(ShardSent::of(shard, message_id, split, in_planner));
        }

        let count = |pred: fn(&TableDecision) -> bool| {
            summary.tables.values().filter(|d| pred(d)).count() as u64
        };
        let send_failures = if summary.dry_run {
            0
        } else {
            summary.shards.len() as u64 - sent - splits_started - splits_waiting - converted_here
        };
        let mut metrics = MetricSet::new(&self.config.metrics_namespace, "planner");
        metrics
            .count(
                "TablesPlanned",
                count(|d| matches!(d, TableDecision::Planned { .. })),
            )
            .count(
                "TablesNothingToDo",
                count(|d| matches!(d, TableDecision::NothingToDo { .. })),
            )
            .count(
                "TablesSkipped",
                count(|d| matches!(d, TableDecision::Skipped { .. })),
            )
            .count(
                "TablesFailed",
                count(|d| matches!(d, TableDecision::Failed { .. })),
            )
            .count("ShardsSent", sent)
            .count("SplitsStarted", splits_started)
            .count("SplitsWaiting", splits_waiting)
            .count("ShardSendFailures", send_failures)
            .count("ShardsConvertedInPlanner", converted_here)
            .count("ShardsQueuedAfterPlannerFailed", queued_after_failing)
            .put(
                "Duration",
                Unit::Milliseconds,
                started.elapsed().as_secs_f64() * 1000.0,
            );
        // How much a warm instance saved: manifest lists and manifests kept from its
        // earlier invocations, and those it had to fetch.
        kept_reads.count_into(&mut metrics, &self.kept_reads);
        metrics.property("DryRun", summary.dry_run);
        if self.config.emit_metrics {
            metrics.emit();
        }

        let response = PlannerResponse {
            dry_run: summary.dry_run,
            tables: summary.tables,
            shards,
        };
        tracing::info!(
            tables = response.tables.len(),
            shards = response.shards.len(),
            dry_run = response.dry_run,
            summary = %serde_json::to_string(&response).unwrap_or_default(),
            "planned"
        );
        Ok(PlannerRun { response, failures })
    }
}
