//! The converter function: SQS shard messages in, one conversion each, partial batch
//! failures back.
//!
//! - Idempotent: a shard whose delete files are no longer live (converted already, or
//!   compacted away) ends as "nothing to do".
//! - Deadline: the engine starts no new phase after the invocation's deadline less
//!   `EQDV_DEADLINE_MARGIN_SECONDS`; it then stops with nothing committed and its files
//!   removed, and the message goes back to the queue.
//! - Poison shards: an error that no retry can fix (a malformed message, a table that
//!   is gone or unsupported), or any error on the last allowed receive, sends the
//!   message to the DLQ with the error as attributes and acknowledges it.
//! - FIFO order: after the first failure in a batch, the rest of the batch is reported
//!   failed unprocessed, as Lambda requires for FIFO queues.

use std::time::{Duration, Instant};

use aws_lambda_events::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent, SqsMessage};
use eqdv::catalog::Catalog;
use eqdv::convert::{ConvertOptions, ConvertReport, Outcome, convert, convert_in_ranges};
use eqdv::plan::Shard;
use eqdv::staging::{StagingOptions, apply_staging};
use eqdv::table::{KeptReads, LoadedTable};
use tracing::Instrument;

use crate::metrics::{KeptReadsAtStart, MetricSet, Unit};
use crate::queue::{DeadLetter, DeadLetters};
use crate::{FunctionConfig, FunctionError, Result};

/// Recorded as `eqdv.source` in the summaries of the snapshots the converter commits.
pub const LAMBDA_SOURCE: &str = "eqdv-converter (AWS Lambda)";

/// The converter with its catalog, built once per Lambda instance.
pub struct Converter {
    pub catalog: Box<dyn Catalog>,
    pub config: FunctionConfig,
    /// Where poison shards go; without one they fail back to the queue (and SQS's own
    /// redrive policy moves them, without their error).
    pub dead_letters: Option<Box<dyn DeadLetters>>,
    /// `eqdv.source` of the snapshots committed.
    pub source: String,
    /// Manifest lists and manifests kept across the instance's invocations, as the
    /// planner keeps them (see [`KeptReads::next_invocation`]); off, each conversion
    /// reads its table afresh.
    pub kept_reads: KeptReads,
}

/// How one message ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MessageOutcome {
    Converted,
    NothingToDo,
    /// Failed; SQS delivers it again.
    Retry {
        error: String,
    },
    /// Sent to the DLQ with its error; acknowledged.
    DeadLettered {
        error: String,
    },
    /// Not attempted (time ran out, or an earlier message of the FIFO batch failed).
    Unprocessed,
}

impl Converter {
    /// Handles an SQS batch. `deadline` is when the invocation ends (Lambda's hard stop).
    pub async fn handle_sqs(&self, event: SqsEvent, deadline: Option<Instant>) -> SqsBatchResponse {
        // What the last invocation did not read again is of no use to this one.
        self.kept_reads.next_invocation();
        let engine_deadline = self.config.engine_deadline(deadline);
        let mut failures = Vec::new();
        let mut stop = false;
        for record in event.records {
            let message_id = record.message_id.clone().unwrap_or_default();
            let outcome = if stop || engine_deadline.is_some_and(|d| Instant::now() >= d) {
                MessageOutcome::Unprocessed
            } else {
                self.handle_message(&record, engine_deadline).await
            };
            match &outcome {
                MessageOutcome::Retry { .. } | MessageOutcome::Unprocessed => {
                    stop = true;
                    let mut failure = BatchItemFailure::default();
                    failure.item_identifier = message_id;
                    failures.push(failure);
                }
                _ => {}
            }
        }
        let mut response = SqsBatchResponse::default();
        response.batch_item_failures = failures;
        response
    }

    /// Converts one message's shard, deciding retry or dead letter on failure.
    pub async fn handle_message(
        &self,
        record: &SqsMessage,
        deadline: Option<Instant>,
    ) -> MessageOutcome {
        let message_id = record.message_id.clone().unwrap_or_default();
        let receive_count: u32 = record
            .attributes
            .get("ApproximateReceiveCount")
            .and_then(|v| v.parse().ok())
            .unwrap_or(1);
        let span = tracing::info_span!("message", message_id = %message_id, receive_count, table = tracing::field::Empty, shard = tracing::field::Empty);
        async {
            let result = match parse_shard(record) {
                Ok(shard) => {
                    let span = tracing::Span::current();
                    span.record("table", tracing::field::display(&shard.table));
                    span.record("shard", tracing::field::display(&shard.id));
                    self.convert_shard(&shard, deadline).await
                }
                Err(e) => Err(e),
            };
            match result {
                Ok(report) if report.outcome == Outcome::NothingToDo => MessageOutcome::NothingToDo,
                Ok(_) => MessageOutcome::Converted,
                Err(e) => {
                    let last_receive = receive_count >= self.config.max_receives;
                    let error = e.to_string();
                    if !(e.is_permanent() || last_receive) {
                        tracing::warn!(error = %error, kind = e.kind(), "shard failed; it will be retried");
                        return MessageOutcome::Retry { error };
                    }
                    let Some(dead_letters) = &self.dead_letters else {
                        tracing::error!(error = %error, kind = e.kind(), "shard failed for good; no EQDV_DEAD_LETTER_QUEUE_URL, so it goes back to the queue");
                        return MessageOutcome::Retry { error };
                    };
                    let letter = DeadLetter {
                        body: record.body.clone().unwrap_or_default(),
                        message_id: message_id.clone(),
                        group_id: record.attributes.get("MessageGroupId").cloned(),
                        error_kind: e.kind().to_string(),
                        error: error.clone(),
                        receive_count,
                    };
                    match dead_letters.send(&letter).await {
                        Ok(()) => {
                            tracing::error!(error = %error, kind = e.kind(), last_receive, "shard sent to the dead-letter queue");
                            let mut metrics = MetricSet::new(&self.config.metrics_namespace, "converter");
                            metrics.count("ShardsDeadLettered", 1).property("Error", error.clone());
                            if self.config.emit_metrics {
                                metrics.emit();
                            }
                            MessageOutcome::DeadLettered { error }
                        }
                        Err(send_error) => {
                            tracing::error!(error = %error, dead_letter_error = %send_error, "could not dead-letter the shard; it goes back to the queue");
                            MessageOutcome::Retry { error }
                        }
                    }
                }
            }
        }
        .instrument(span)
        .await
    }

    /// Converts one shard; emits its metrics and logs whatever the outcome.
    pub async fn convert_shard(
        &self,
        shard: &Shard,
        deadline: Option<Instant>,
    ) -> Result<ConvertReport> {
        self.convert_shard_in_ranges(shard, deadline, 0).await
    }

    /// [`Converter::convert_shard`], split into `ranges` data ranges converted at once in
    /// this process and committed together when `ranges` is 2 or more (`eqdv backfill`
    /// splits as the planner would on Lambda).
    pub async fn convert_shard_in_ranges(
        &self,
        shard: &Shard,
        deadline: Option<Instant>,
        ranges: u32,
    ) -> Result<ConvertReport> {
        self.convert_shard_measured(shard, deadline, ranges, None)
            .await
    }

    /// [`Converter::convert_shard`] of a shard just planned on `table` in this process
    /// (the planner converting its plan's only shard): the table is not loaded again.
    pub async fn convert_planned_shard(
        &self,
        shard: &Shard,
        deadline: Option<Instant>,
        table: LoadedTable,
    ) -> Result<ConvertReport> {
        self.convert_shard_measured(shard, deadline, 0, Some(table))
            .await
    }

    /// Converts; emits the metrics and logs whatever the outcome.
    async fn convert_shard_measured(
        &self,
        shard: &Shard,
        deadline: Option<Instant>,
        ranges: u32,
        loaded_table: Option<LoadedTable>,
    ) -> Result<ConvertReport> {
        let started = Instant::now();
        let mut metrics = MetricSet::new(&self.config.metrics_namespace, "converter")
            .database(&shard.table.namespace);
        metrics
            .property("Table", shard.table.to_string())
            .property("Shard", shard.id.clone());
        let kept_reads = KeptReadsAtStart::of(&self.kept_reads);
        let result = self
            .convert_allowed_shard(shard, deadline, ranges, loaded_table)
            .await;
        // How much a warm instance saved, as the planner reports it.
        kept_reads.count_into(&mut metrics, &self.kept_reads);
        match &result {
            Ok(report) => {
                let r = &report.resolve;
                metrics
                    .count(
                        "ShardsConverted",
                        u64::from(report.outcome == Outcome::Converted),
                    )
                    .count(
                        "ShardsNothingToDo",
                        u64::from(report.outcome == Outcome::NothingToDo),
                    )
                    .count(
                        "EqualityDeleteFilesConverted",
                        report.equality_delete_files_removed as u64,
                    )
                    .count(
                        "EqualityDeleteRowsConverted",
                        report.equality_deletes_removed,
                    )
                    .count("DVsWritten", report.dvs_written as u64)
                    .count("PositionsDeleted", report.positions_added)
                    .count("CandidateFiles", r.candidate_files)
                    .count("FilesScanned", r.files_opened)
                    .count("FilesPrunedByBounds", r.pruned_by_bounds)
                    .count("RowGroupsPruned", r.row_groups_pruned)
                    .count("RowGroupsPrunedByBloom", r.row_groups_pruned_by_bloom)
                    .count("BloomFiltersRead", r.bloom_filters_read)
                    .count("FootersFromCache", r.footers_from_cache)
                    .count("IndexLookups", r.index_lookups)
                    .count("IndexLeavesFromCache", r.index_leaves_from_cache)
                    .count(
                        "FilesPrunedByIndex",
                        r.pruned_by_index + r.pruned_by_index_dvs,
                    )
                    .count("IndexDeltaFiles", r.index_delta_files)
                    .count("FilesReadByPosition", r.files_read_by_position)
                    .count("IndexBypassed", r.index_bypassed)
                    .put("IndexBytesRead", Unit::Bytes, r.index_bytes_read as f64)
                    .count(
                        "IndexRebuilds",
                        report.key_index.iter().filter(|u| u.built).count() as u64,
                    )
                    .put(
                        "IndexBytesWritten",
                        Unit::Bytes,
                        report
                            .key_index
                            .iter()
                            .map(|u| u.bytes_written)
                            .sum::<u64>() as f64,
                    )
                    .count("RowsScanned", r.rows_scanned)
                    .put("BytesRead", Unit::Bytes, r.bytes_read as f64)
                    .count("CommitAttempts", u64::from(report.commit_attempts))
                    .count("CommitConflicts", u64::from(report.conflicts))
                    .put("ResolveTime", Unit::Milliseconds, report.phases.resolve_ms)
                    .put(
                        "CommitTime",
                        Unit::Milliseconds,
                        report.phases.write_commit_ms,
                    );
                metrics.property(
                    "Outcome",
                    serde_json::to_value(report.outcome).unwrap_or_default(),
                );
                if let Some(staging) = &report.staging {
                    // How far the target is behind its staging branch after this run.
                    metrics
                        .count("StagingSnapshotsApplied", staging.snapshots_applied as u64)
                        .count("StagingLagSnapshots", staging.lag.snapshots as u64)
                        .put("StagingLagSeconds", Unit::Seconds, staging.lag.seconds);
                    metrics.property("StagingBranch", staging.staging_branch.clone());
                }
                if let Some(id) = report.base_snapshot_id {
                    metrics.property("BaseSnapshotId", id.to_string());
                }
                if let Some(id) = report.new_snapshot_id {
                    metrics.property("NewSnapshotId", id.to_string());
                }
                tracing::info!(
                    table = %shard.table,
                    shard = %shard.id,
                    outcome = ?report.outcome,
                    base_snapshot_id = report.base_snapshot_id,
                    new_snapshot_id = report.new_snapshot_id,
                    equality_delete_files = report.equality_delete_files_removed,
                    dvs = report.dvs_written,
                    files_scanned = r.files_opened,
                    files_pruned = r.pruned_by_bounds,
                    commit_attempts = report.commit_attempts,
                    conflicts = report.conflicts,
                    "shard done"
                );
            }
            Err(e) => {
                metrics.count("ShardsFailed", 1).count(
                    "DeadlineStops",
                    u64::from(e.engine_kind() == Some(eqdv::ErrorKind::DeadlineExceeded)),
                );
                metrics.property("ErrorKind", e.kind());
            }
        }
        metrics.put(
            "Duration",
            Unit::Milliseconds,
            started.elapsed().as_secs_f64() * 1000.0,
        );
        if let Some(rss) = crate::logging::peak_rss_bytes() {
            metrics.put("PeakRss", Unit::Bytes, rss as f64);
        }
        if self.config.emit_metrics {
            metrics.emit();
        }
        result
    }

    async fn convert_allowed_shard(
        &self,
        shard: &Shard,
        deadline: Option<Instant>,
        ranges: u32,
        loaded_table: Option<LoadedTable>,
    ) -> Result<ConvertReport> {
        // The queue is not a trust boundary to skip: check the allowlist again.
        if !self.config.allowlist.allows(&shard.table) {
            return Err(FunctionError::BadMessage {
                message_id: shard.id.clone(),
                message: format!("table {} is not in the allowlist", shard.table),
            });
        }
        // A warm instance reads the table through its store: the shard's snapshot lists
        // all but a few of the manifests its last shard's did.
        let loaded_table = match loaded_table {
            None if ranges < 2 && self.kept_reads.is_on() => Some(
                LoadedTable::load(self.catalog.as_ref(), &shard.table)
                    .await?
                    .keeping_reads_in(&self.kept_reads),
            ),
            given => given,
        };
        let options = ConvertOptions {
            branch: shard.branch.clone(),
            shard: Some(shard.clone()),
            resolve: self.config.resolve.clone(),
            commit_retries: self.config.commit_retries,
            deadline,
            source: self.source.clone(),
            loaded_table,
            ..Default::default()
        };
        if let Some(staging_branch) = &shard.staging_branch {
            // The staging mode: the shard names no delete files, only the branches.
            let options = ConvertOptions {
                shard: None,
                loaded_table: None,
                ..options
            };
            let staging = StagingOptions::new(staging_branch.clone());
            let report =
                apply_staging(self.catalog.as_ref(), &shard.table, &staging, &options).await?;
            return Ok(report.to_convert_report(&options));
        }
        if ranges >= 2 {
            return Ok(
                convert_in_ranges(self.catalog.as_ref(), &shard.table, &options, ranges).await?,
            );
        }
        Ok(convert(self.catalog.as_ref(), &shard.table, &options).await?)
    }
}

fn parse_shard(record: &SqsMessage) -> Result<Shard> {
    let message_id = record.message_id.clone().unwrap_or_default();
    let body = record
        .body
        .as_deref()
        .ok_or_else(|| FunctionError::BadMessage {
            message_id: message_id.clone(),
            message: "no body".into(),
        })?;
    serde_json::from_str(body).map_err(|e| FunctionError::BadMessage {
        message_id,
        message: format!("not an eqdv shard: {e}"),
    })
}

/// Converts Lambda's deadline (milliseconds since the epoch) to an `Instant`.
pub fn deadline_from_epoch_ms(deadline_ms: u64) -> Instant {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    Instant::now() + Duration::from_millis(deadline_ms.saturating_sub(now_ms))
}
