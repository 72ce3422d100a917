//! Shards too big for one converter: the planner starts a Step Functions execution per
//! split ([`SplitStarter`]), and the converter runs its tasks ([`SplitTask`]): one per
//! data range, then the fan-in that commits them all, or the cleanup when the split
//! will not commit. The state machine is infra/statemachine/split.asl.json.
//!
//! A task's failure reaches Step Functions as an error name its Retry and Catch rules
//! match ([`TaskError`]), so the contract between the two is the names below.

use std::time::Instant;

use async_trait::async_trait;
use aws_sdk_sfn::types::ExecutionStatus;
use eqdv::convert::{
    ConvertOptions, RangeTaskOutput, SplitCleanup, SplitJob, run_cleanup_task, run_commit_task,
    run_range_task,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tracing::Instrument;

use crate::converter::Converter;
use crate::metrics::{MetricSet, Unit};
use crate::{FunctionError, Result};

/// A transient failure: the state machine retries the task with backoff.
pub const ERROR_RETRYABLE: &str = "eqdv.Retryable";
/// A failure no retry can fix (bad input, an unsupported table, access denied).
pub const ERROR_PERMANENT: &str = "eqdv.Permanent";
/// The head moved in a way that invalidates the ranges' work: the split is cleaned up
/// and the next plan (on the new head) converts the shard.
pub const ERROR_RANGES_STALE: &str = "eqdv.RangesStale";
/// The fan-in's commit may or may not have landed: nothing may be cleaned up.
pub const ERROR_COMMIT_STATE_UNKNOWN: &str = "eqdv.CommitStateUnknown";

/// One task of a split, as the state machine sends it to the converter.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "task", rename_all = "kebab-case")]
pub enum SplitTask {
    /// Convert one data range; store its result, commit nothing.
    Range { split: SplitJob, range: u32 },
    /// Commit every range's result in one snapshot.
    Commit { split: SplitJob },
    /// Remove what the split's ranges wrote (it will not commit).
    Cleanup { split: SplitJob },
}

impl SplitTask {
    pub fn split(&self) -> &SplitJob {
        match self {
            SplitTask::Range { split, .. }
            | SplitTask::Commit { split }
            | SplitTask::Cleanup { split } => split,
        }
    }

    fn name(&self) -> &'static str {
        match self {
            SplitTask::Range { .. } => "range",
            SplitTask::Commit { .. } => "commit",
            SplitTask::Cleanup { .. } => "cleanup",
        }
    }
}

/// A task's failure: the error name Step Functions matches, and the cause it records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskError {
    pub error: &'static str,
    pub cause: String,
}

impl TaskError {
    pub fn from_function(e: &FunctionError) -> Self {
        let error = match e {
            FunctionError::Engine(eqdv::Error::RangesStale { .. }) => ERROR_RANGES_STALE,
            FunctionError::Engine(eqdv::Error::CommitStateUnknown { .. }) => {
                ERROR_COMMIT_STATE_UNKNOWN
            }
            e if e.is_permanent() => ERROR_PERMANENT,
            _ => ERROR_RETRYABLE,
        };
        Self {
            error,
            cause: format!("{}: {e}", e.kind()),
        }
    }
}

/// What a task hands back to the state machine.
#[derive(Clone, Debug, Serialize)]
#[serde(untagged)]
pub enum TaskOutput {
    Range(RangeTaskOutput),
    Commit(Value),
    Cleanup(SplitCleanup),
}

impl Converter {
    /// Runs one task of a split. `deadline` is when the invocation ends.
    pub async fn handle_split_task(
        &self,
        task: &SplitTask,
        deadline: Option<Instant>,
    ) -> std::result::Result<TaskOutput, TaskError> {
        let split = task.split();
        let span = tracing::info_span!("split_task", task = task.name(), split = %split.id, table = %split.shard.table);
        self.split_task_logged(task, deadline)
            .instrument(span)
            .await
    }

    /// [`Converter::handle_split_task`] within its span: runs it, logs, emits metrics.
    async fn split_task_logged(
        &self,
        task: &SplitTask,
        deadline: Option<Instant>,
    ) -> std::result::Result<TaskOutput, TaskError> {
        let started = Instant::now();
        let split = task.split();
        let result = self.run_split_task(task, deadline).await;
        let mut metrics = MetricSet::new(&self.config.metrics_namespace, "converter")
            .database(&split.shard.table.namespace);
        metrics
            .property("Table", split.shard.table.to_string())
            .property("Split", split.id.clone())
            .property("SplitTask", task.name())
            .count("SplitTasksFailed", u64::from(result.is_err()))
            .put(
                "Duration",
                Unit::Milliseconds,
                started.elapsed().as_secs_f64() * 1000.0,
            );
        if let SplitTask::Range { range, .. } = task {
            metrics.property("Range", u64::from(*range));
        }
        match &result {
            Ok(TaskOutput::Range(out)) => {
                metrics
                    .count("DVsWritten", out.dvs as u64)
                    .count("PositionsDeleted", out.positions_added)
                    .count("FilesScanned", out.files_opened);
                tracing::info!(range = out.range, dvs = out.dvs, result = %out.result_location, "range converted");
            }
            Ok(TaskOutput::Commit(report)) => {
                metrics.count(
                    "SplitsCommitted",
                    u64::from(report["outcome"] == "converted"),
                );
                tracing::info!(report = %report, "split committed");
            }
            Ok(TaskOutput::Cleanup(cleanup)) => {
                tracing::info!(
                    committed = cleanup.committed,
                    removed = cleanup.removed.len(),
                    "split cleaned up"
                );
            }
            Err(e) => {
                metrics.property("Error", e.error);
                tracing::error!(error = e.error, cause = %e.cause, "split task failed");
            }
        }
        if self.config.emit_metrics {
            metrics.emit();
        }
        result
    }

    async fn run_split_task(
        &self,
        task: &SplitTask,
        deadline: Option<Instant>,
    ) -> std::result::Result<TaskOutput, TaskError> {
        let split = task.split();
        // The state machine is not a trust boundary to skip: check the allowlist again.
        if !self.config.allowlist.allows(&split.shard.table) {
            return Err(TaskError {
                error: ERROR_PERMANENT,
                cause: format!(
                    "BadMessage: table {} is not in the allowlist",
                    split.shard.table
                ),
            });
        }
        let options = ConvertOptions {
            branch: split.shard.branch.clone(),
            resolve: self.config.resolve.clone(),
            commit_retries: self.config.commit_retries,
            deadline: self.config.engine_deadline(deadline),
            source: self.source.clone(),
            ..Default::default()
        };
        let catalog = self.catalog.as_ref();
        let output: Result<TaskOutput> = match task {
            SplitTask::Range { split, range } => run_range_task(catalog, split, &options, *range)
                .await
                .map(TaskOutput::Range)
                .map_err(FunctionError::from),
            SplitTask::Commit { split } => run_commit_task(catalog, split, &options)
                .await
                .map_err(FunctionError::from)
                .and_then(|report| {
                    serde_json::to_value(&report)
                        .map(TaskOutput::Commit)
                        .map_err(|e| FunctionError::Engine(e.into()))
                }),
            SplitTask::Cleanup { split } => run_cleanup_task(catalog, split)
                .await
                .map(TaskOutput::Cleanup)
                .map_err(FunctionError::from),
        };
        output.map_err(|e| TaskError::from_function(&e))
    }
}

/// Parses a converter payload that is not an SQS event as a split task.
pub fn parse_task(payload: &Value) -> std::result::Result<SplitTask, TaskError> {
    serde_json::from_value(payload.clone()).map_err(|e| TaskError {
        error: ERROR_PERMANENT,
        cause: format!("BadMessage: neither an SQS event nor an eqdv split task: {e}"),
    })
}

/// Starts the conversion of a split.
#[async_trait]
pub trait SplitStarter: Send + Sync {
    /// Starts (or finds started) the split's execution: its id, and the job it runs
    /// (`job`, or after failed executions of it, `job` in more ranges: [`attempt_job`]).
    async fn start(&self, job: &SplitJob) -> Result<StartedSplit>;

    /// The running execution of another split that `job` must wait for
    /// ([`must_wait_for`]), if one runs: its id.
    async fn running_overlap(&self, job: &SplitJob) -> Result<Option<String>>;
}

/// Whether a split of `job` must wait while `running` (another split) runs: same table
/// and branch, and a partition in common, as far as the queue's message groups tell (a
/// shard without one, such as a global group's, is the whole table). Both would resolve
/// the same data files; one of them would find the other's commit stale and throw its
/// work away. The shard queue keeps one partition to one converter at a time with its
/// FIFO groups; this is the same rule for splits. The deletes left waiting are planned
/// on the commit of the running split (its table change event) or by the sweep.
pub fn must_wait_for(job: &SplitJob, running: &SplitJob) -> bool {
    let (a, b) = (&job.shard, &running.shard);
    running.id != job.id
        && a.table == b.table
        && a.branch == b.branch
        && (a.queue_group.is_empty() || b.queue_group.is_empty() || a.queue_group == b.queue_group)
}

/// Whether the execution named `name` is one of `job`'s own (see [`execution_name`]).
fn is_own_execution(job: &SplitJob, name: &str) -> bool {
    let attempt = name.rsplit_once("-a").and_then(|(_, n)| {
        n.parse::<u32>()
            .ok()
            .filter(|a| *a >= 2 && n == a.to_string())
    });
    name == execution_name(job, attempt.unwrap_or(1)) || name == execution_name(job, 1)
}

/// The part of a split id that names its table (the id without `-<hash>-r<N>`): what
/// every split of the table's execution names start with.
fn table_prefix(job: &SplitJob) -> &str {
    job.id
        .rsplitn(3, '-')
        .nth(2)
        .map_or(job.id.as_str(), |prefix| &job.id[..prefix.len()])
}

/// The state machine's input for a split: the job, and the ranges its Map iterates over.
pub fn execution_input(job: &SplitJob) -> Value {
    json!({
        "split": job,
        "range_indexes": (0..job.ranges).collect::<Vec<u32>>(),
    })
}

/// How many executions one split gets. A split whose execution failed (a range that
/// failed for good or timed out, a stale fan-in) is started again under the next name
/// when the planner plans the same split again (the table's head has not moved), up to
/// this many; a moved head makes a new split.
pub const SPLIT_ATTEMPTS: u32 = 3;

/// A split's execution, as started or found.
#[derive(Clone, Debug)]
pub struct StartedSplit {
    pub execution: String,
    /// The job it runs (its ranges, and the id its files and commit mark carry).
    pub job: SplitJob,
}

/// The job `attempt` (1-based) of the split `job` runs: `job` itself first, then twice
/// its ranges per attempt, at most `max_ranges` (never fewer than `job`'s). A range that
/// timed out, or ran out of memory, gets half the data files the next time; the split's
/// other failures cost the same attempts they cost before. A job in other ranges has
/// its own id (the id counts the ranges), so its files and commit mark are its own.
pub fn attempt_job(job: &SplitJob, attempt: u32, max_ranges: u32) -> Result<SplitJob> {
    let factor = 1u32
        .checked_shl(attempt.saturating_sub(1))
        .unwrap_or(u32::MAX);
    let ranges = job
        .ranges
        .saturating_mul(factor)
        .min(max_ranges.min(eqdv::convert::MAX_RANGES))
        .max(job.ranges);
    if ranges == job.ranges {
        return Ok(job.clone());
    }
    Ok(SplitJob::new(job.shard.clone(), ranges)?)
}

/// The execution name of a split's `attempt` (1-based): the split's id, then
/// `<id>-a2`, `<id>-a3` (a planner's ids leave room: at most 71 characters). Within
/// Step Functions' 80 whatever the job: an id too long for its suffix keeps its end,
/// which holds the hash that tells splits apart (found by fuzzing).
pub fn execution_name(job: &SplitJob, attempt: u32) -> String {
    const MAX_NAME: usize = 80;
    let suffix = if attempt <= 1 {
        String::new()
    } else {
        format!("-a{attempt}")
    };
    // A checked id is ASCII, so any byte offset is a character boundary.
    let keep = MAX_NAME.saturating_sub(suffix.len());
    let id = job
        .id
        .get(job.id.len().saturating_sub(keep)..)
        .unwrap_or(&job.id);
    format!("{id}{suffix}")
}

/// AWS Step Functions: executions named by the split's id (and attempt), so that a
/// second start of the same split (a re-plan, a retried planner) while one runs or
/// after one succeeded converts once, and one that failed is run again.
pub struct StepFunctions {
    client: aws_sdk_sfn::Client,
    state_machine_arn: String,
    /// The most ranges a re-run of a failed split is given (`EQDV_MAX_RANGES`).
    max_ranges: u32,
}

impl StepFunctions {
    pub async fn connect(state_machine_arn: &str, max_ranges: u32) -> Self {
        let config = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
        Self {
            client: aws_sdk_sfn::Client::new(&config),
            state_machine_arn: state_machine_arn.to_string(),
            max_ranges,
        }
    }
}

impl StepFunctions {
    fn execution_arn(&self, name: &str) -> String {
        format!(
            "{}:{name}",
            self.state_machine_arn
                .replacen(":stateMachine:", ":execution:", 1)
        )
    }

    fn error(&self, e: &(dyn std::error::Error + 'static)) -> FunctionError {
        FunctionError::StateMachine {
            state_machine: self.state_machine_arn.clone(),
            message: eqdv::error::cause(e),
        }
    }
}

#[async_trait]
impl SplitStarter for StepFunctions {
    async fn start(&self, job: &SplitJob) -> Result<StartedSplit> {
        for attempt in 1..=SPLIT_ATTEMPTS {
            // Named by the planned split's id, whatever ranges the attempt runs in, so
            // that the next plan finds the attempts made.
            let name = execution_name(job, attempt);
            let attempt_job = attempt_job(job, attempt, self.max_ranges)?;
            let input = serde_json::to_string(&execution_input(&attempt_job))
                .map_err(|e| FunctionError::Engine(e.into()))?;
            let started = self
                .client
                .start_execution()
                .state_machine_arn(&self.state_machine_arn)
                .name(&name)
                .input(&input)
                .send()
                .await;
            let exists = match started {
                Ok(out) => {
                    return Ok(StartedSplit {
                        execution: out.execution_arn().to_string(),
                        job: attempt_job,
                    });
                }
                Err(e) => {
                    if !e
                        .as_service_error()
                        .is_some_and(|s| s.is_execution_already_exists())
                    {
                        return Err(self.error(&e));
                    }
                    self.execution_arn(&name)
                }
            };
            // Started before: running or converted, it is this split's execution;
            // failed, the next attempt runs the split again.
            let described = self
                .client
                .describe_execution()
                .execution_arn(&exists)
                .send()
                .await
                .map_err(|e| self.error(&e))?;
            match described.status() {
                ExecutionStatus::Failed | ExecutionStatus::TimedOut | ExecutionStatus::Aborted => {
                    tracing::warn!(split = %job.id, execution = %exists, status = described.status().as_str(), error = described.error().unwrap_or(""), attempt, "the split's execution failed: starting it again");
                }
                _ => {
                    return Ok(StartedSplit {
                        execution: exists,
                        job: attempt_job,
                    });
                }
            }
        }
        Err(FunctionError::StateMachine {
            state_machine: self.state_machine_arn.clone(),
            message: format!(
                "split {} of table {} failed in each of its {SPLIT_ATTEMPTS} executions ({} to {}): see their histories; the next writer commit to the table makes a new split",
                job.id,
                job.shard.table,
                execution_name(job, 1),
                execution_name(job, SPLIT_ATTEMPTS)
            ),
        })
    }

    async fn running_overlap(&self, job: &SplitJob) -> Result<Option<String>> {
        let prefix = format!("{}-", table_prefix(job));
        let mut next_token: Option<String> = None;
        loop {
            let page = self
                .client
                .list_executions()
                .state_machine_arn(&self.state_machine_arn)
                .status_filter(ExecutionStatus::Running)
                .set_next_token(next_token.take())
                .send()
                .await
                .map_err(|e| self.error(&e))?;
            for execution in page.executions() {
                let name = execution.name();
                if !name.starts_with(&prefix) || is_own_execution(job, name) {
                    continue;
                }
                let described = self
                    .client
                    .describe_execution()
                    .execution_arn(execution.execution_arn())
                    .send()
                    .await
                    .map_err(|e| self.error(&e))?;
                let running = described
                    .input()
                    .and_then(|input| serde_json::from_str::<Value>(input).ok())
                    .and_then(|input| {
                        serde_json::from_value::<SplitJob>(input["split"].clone()).ok()
                    });
                match running {
                    Some(running) if must_wait_for(job, &running) => {
                        return Ok(Some(execution.execution_arn().to_string()));
                    }
                    Some(_) => {}
                    None => {
                        tracing::warn!(execution = %execution.execution_arn(), "a running execution of the split state machine has no split job in its input; ignored");
                    }
                }
            }
            match page.next_token() {
                Some(token) => next_token = Some(token.to_string()),
                None => return Ok(None),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A shard of table `namespace.name` on `base` (its message group `queue_group`:
    /// empty for a global group's, the whole table).
    fn shard(namespace: &str, name: &str, base: i64, queue_group: &str) -> eqdv::plan::Shard {
        serde_json::from_value(json!({
            "id": format!("shard-{base}-{queue_group}"),
            "table": {"namespace": namespace, "name": name},
            "branch": "main",
            "base_snapshot_id": base,
            "partitions": [],
            "queue_group": queue_group,
            "groups": [],
            "estimated_bytes": 10
        }))
        .unwrap()
    }

    /// A failed split runs again in twice the ranges per attempt, at most the allowed
    /// ranges and never fewer than planned; a job in other ranges has its own id.
    #[test]
    fn a_failed_split_runs_again_in_more_ranges() {
        let job = SplitJob::new(shard("db", "events", 7, ""), 4).unwrap();
        let ranges = |attempt, max| attempt_job(&job, attempt, max).unwrap().ranges;
        assert_eq!([ranges(1, 32), ranges(2, 32), ranges(3, 32)], [4, 8, 16]);
        assert_eq!([ranges(2, 6), ranges(3, 6)], [6, 6]);
        assert_eq!(
            [ranges(2, 4), ranges(2, 2)],
            [4, 4],
            "never fewer than planned"
        );
        assert_eq!(
            attempt_job(&job, 2, 4).unwrap(),
            job,
            "the same job when capped"
        );
        let second = attempt_job(&job, 2, 32).unwrap();
        assert_ne!(second.id, job.id);
        assert!(second.id.ends_with("-r8"), "{}", second.id);
        assert_eq!(second.shard, job.shard);
        assert_eq!(
            ranges(40, u32::MAX),
            eqdv::convert::MAX_RANGES,
            "no overflow, at most the engine's"
        );
    }

    /// A split waits for a running split of the same table and branch that shares its
    /// message group (or either is the whole table), never for itself or for another
    /// table's; its own attempts are told apart from other splits' executions.
    #[test]
    fn a_split_waits_for_a_running_split_of_its_partitions() {
        let job = |namespace, name, base, group| {
            SplitJob::new(shard(namespace, name, base, group), 4).unwrap()
        };
        let global = job("db", "events", 2, "");
        assert!(must_wait_for(&global, &job("db", "events", 1, "")));
        assert!(must_wait_for(&global, &job("db", "events", 1, "g3")));
        assert!(must_wait_for(
            &job("db", "events", 2, "g3"),
            &job("db", "events", 1, "")
        ));
        assert!(must_wait_for(
            &job("db", "events", 2, "g3"),
            &job("db", "events", 1, "g3")
        ));
        assert!(!must_wait_for(
            &job("db", "events", 2, "g3"),
            &job("db", "events", 1, "g4")
        ));
        assert!(!must_wait_for(&global, &global.clone()), "not for itself");
        assert!(!must_wait_for(&global, &job("db", "events_2", 1, "")));
        let mut other_branch = job("db", "events", 1, "");
        other_branch.shard.branch = "audit".into();
        assert!(!must_wait_for(&global, &other_branch));

        assert!(is_own_execution(&global, &global.id));
        assert!(is_own_execution(&global, &execution_name(&global, 3)));
        assert!(!is_own_execution(&global, &format!("{}-ax", global.id)));
        assert!(!is_own_execution(&global, &job("db", "events", 1, "").id));
        // Every split of the table starts with its table prefix; another table's not.
        assert_eq!(table_prefix(&global), "db.events");
        assert!(job("db", "events", 9, "g1").id.starts_with("db.events-"));
        assert!(!job("db", "events_2", 9, "").id.starts_with("db.events-"));
    }

    /// The state machine both stacks deploy.
    fn definition() -> Value {
        serde_json::from_str(include_str!("../../../infra/statemachine/split.asl.json"))
            .expect("the ASL is JSON")
    }

    /// Every `eqdv.*` error name the state machine's Retry and Catch rules match is one
    /// the converter raises, and the names that must lead somewhere do.
    #[test]
    fn the_state_machine_matches_the_error_names_the_converter_raises() {
        let raised = [
            ERROR_RETRYABLE,
            ERROR_PERMANENT,
            ERROR_RANGES_STALE,
            ERROR_COMMIT_STATE_UNKNOWN,
        ];
        let asl = definition();
        let mut matched = Vec::new();
        fn walk(v: &Value, out: &mut Vec<String>) {
            match v {
                Value::Object(map) => {
                    if let Some(Value::Array(names)) = map.get("ErrorEquals") {
                        out.extend(names.iter().filter_map(Value::as_str).map(str::to_string));
                    }
                    map.values().for_each(|v| walk(v, out));
                }
                Value::Array(items) => items.iter().for_each(|v| walk(v, out)),
                _ => {}
            }
        }
        walk(&asl, &mut matched);
        for name in matched.iter().filter(|n| n.starts_with("eqdv.")) {
            assert!(
                raised.contains(&name.as_str()),
                "the ASL matches {name}, which nothing raises"
            );
        }
        assert!(
            matched.iter().any(|n| n == ERROR_RETRYABLE),
            "transient errors are retried"
        );
        // An unknown commit outcome must not reach the cleanup.
        let catches = asl["States"]["Commit"]["Catch"]
            .as_array()
            .expect("Commit catches");
        let unknown = catches
            .iter()
            .find(|c| {
                c["ErrorEquals"]
                    .as_array()
                    .is_some_and(|e| e.iter().any(|n| n == ERROR_COMMIT_STATE_UNKNOWN))
            })
            .expect("the fan-in catches an unknown commit outcome");
        assert_eq!(
            asl["States"][unknown["Next"].as_str().unwrap()]["Type"],
            "Fail"
        );
        assert_eq!(asl["States"]["CleanUp"]["Parameters"]["task"], "cleanup");
        assert_eq!(asl["States"]["Commit"]["Parameters"]["task"], "commit");
        assert_eq!(
            asl["States"]["ConvertRanges"]["ItemSelector"]["task"],
            "range"
        );
    }

    /// A split's executions: its id first, then numbered attempts, all valid Step
    /// Functions names (at most 80 characters) for the longest split id.
    #[test]
    fn a_splits_executions_are_named_by_its_id_and_attempt() {
        let shard = shard(
            "a_database_name_of_some_length",
            "and_a_long_table_name_too",
            7,
            "",
        );
        let job = SplitJob::new(shard, eqdv::convert::MAX_RANGES).unwrap();
        assert_eq!(execution_name(&job, 1), job.id);
        assert_eq!(execution_name(&job, 2), format!("{}-a2", job.id));
        let last = execution_name(&job, SPLIT_ATTEMPTS);
        assert!(last.len() <= 80, "{last} ({} characters)", last.len());
        let mut names: Vec<String> = (1..=SPLIT_ATTEMPTS)
            .map(|a| execution_name(&job, a))
            .collect();
        names.dedup();
        assert_eq!(names.len(), SPLIT_ATTEMPTS as usize);
    }

    /// A job's id may be as long as its check allows (80), longer than any a planner
    /// makes: its execution names still keep within 80 characters, stay apart by
    /// attempt, and are known as its own (found by fuzzing).
    #[test]
    fn execution_names_of_the_longest_id_keep_within_the_limit() {
        let shard = shard("cdc", "orders", 7, "");
        let mut job = SplitJob::new(shard, 2).unwrap();
        job.id = format!("{}-{}", "t".repeat(60), "0123456789abcdef-r2");
        assert_eq!(job.id.len(), 80);
        job.check().unwrap();
        let names: Vec<String> = [1, 2, 10, 1_000_000]
            .iter()
            .map(|a| execution_name(&job, *a))
            .collect();
        for name in &names {
            assert!(name.len() <= 80, "{name} ({} characters)", name.len());
            assert!(name.contains("0123456789abcdef-r2"), "{name}");
            assert!(is_own_execution(&job, name), "{name}");
        }
        let mut distinct = names.clone();
        distinct.dedup();
        assert_eq!(distinct, names);
        assert!(!is_own_execution(&job, "another-split-a2"));
    }

    /// What the state machine sends parses as the task it means; its input is what the
    /// planner starts it with.
    #[test]
    fn tasks_parse_from_what_the_state_machine_sends() {
        let job = SplitJob::new(shard("db", "events", 7, ""), 3).unwrap();
        let input = execution_input(&job);
        assert_eq!(input["range_indexes"], json!([0, 1, 2]));
        // The Map's ItemSelector: {task: range, split: $.split, range: item}.
        let range = json!({"task": "range", "split": input["split"], "range": 2});
        assert_eq!(
            parse_task(&range).unwrap(),
            SplitTask::Range {
                split: job.clone(),
                range: 2
            }
        );
        let commit = json!({"task": "commit", "split": input["split"]});
        assert_eq!(
            parse_task(&commit).unwrap(),
            SplitTask::Commit { split: job.clone() }
        );
        let cleanup = json!({"task": "cleanup", "split": input["split"]});
        assert_eq!(
            parse_task(&cleanup).unwrap(),
            SplitTask::Cleanup { split: job }
        );
        let bad = parse_task(&json!({"task": "explode"})).unwrap_err();
        assert_eq!(bad.error, ERROR_PERMANENT);
        assert!(
            bad.cause
                .contains("neither an SQS event nor an eqdv split task"),
            "{}",
            bad.cause
        );
    }

    /// The error names: a stale split and an unknown commit outcome by name, the rest by
    /// whether a retry can help.
    #[test]
    fn task_errors_are_named_for_the_state_machine() {
        let name = |e: eqdv::Error| TaskError::from_function(&FunctionError::Engine(e)).error;
        let table = || "db.events".to_string();
        assert_eq!(
            name(eqdv::Error::RangesStale {
                table: table(),
                reason: "moved".into()
            }),
            ERROR_RANGES_STALE
        );
        assert_eq!(
            name(eqdv::Error::CommitStateUnknown {
                table: table(),
                message: "timeout".into()
            }),
            ERROR_COMMIT_STATE_UNKNOWN
        );
        assert_eq!(
            name(eqdv::Error::DeadlineExceeded {
                table: table(),
                phase: "resolving".into()
            }),
            ERROR_RETRYABLE
        );
        assert_eq!(
            name(eqdv::Error::InvalidInput("bad".into())),
            ERROR_PERMANENT
        );
        let e = TaskError::from_function(&FunctionError::Engine(eqdv::Error::InvalidInput(
            "data range 2 of 4 is missing".into(),
        )));
        assert!(e.cause.starts_with("InvalidInput: "), "{}", e.cause);
    }
}
