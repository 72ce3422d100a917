//! A split run as separate tasks: the range tasks and the fan-in of an orchestrated split
//! (AWS Step Functions in the deployed stacks), each possibly in another process.
//!
//! The tasks share nothing but the [`SplitJob`] and the table's storage:
//! - a range task ([`run_range_task`]) converts its range and stores the result as JSON
//!   at [`SplitJob::result_location`], its Puffin file at a name fixed by the split and the
//!   range ([`SplitJob::dv_file_stem`]), so that a retried task overwrites its own files
//!   and the cleanup needs no listing;
//! - the fan-in ([`run_commit_task`]) loads every range's result and commits them at once
//!   with [`commit_ranges`], then removes the result objects;
//! - the cleanup ([`run_cleanup_task`]) of a split that will not commit removes every
//!   range's Puffin file and result.
//!
//! A commit records the split's id in the snapshot summary ([`SPLIT_PROPERTY`]). Both the
//! fan-in and the cleanup look for it between the base and the head first: a fan-in run
//! again after its commit landed (a retry, an answer lost) reports it and removes
//! nothing, and the cleanup never removes a committed split's DVs.

use std::fmt::Write as _;

use iceberg::io::FileIO;
use serde::{Deserialize, Serialize};
use twox_hash::XxHash64;

use super::{DataRange, RangeResult, commit_ranges_of, convert_range_of};
use crate::catalog::Catalog;
use crate::convert::{ConvertOptions, ConvertReport, Outcome};
use crate::plan::Shard;
use crate::snapshot::SPLIT_PROPERTY;
use crate::table::LoadedTable;
use crate::{Error, Result};

/// The most ranges one split may have (a Step Functions Map handles far more; this keeps
/// the fan-in's reads and one snapshot's DV count within what one invocation commits).
pub const MAX_RANGES: u32 = 1024;

/// One shard split into data ranges, as an orchestration hands it to every task.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SplitJob {
    /// Stable for the same shard, base and range count ([`SplitJob::new`]): it names the
    /// split's files, and the deployed stacks use it as the execution name, so a
    /// duplicate start converts once.
    pub id: String,
    /// The shard; every range reads its `base_snapshot_id`.
    pub shard: Shard,
    pub ranges: u32,
}

/// What a range task hands on: small, since the orchestration carries it (the result
/// itself may list thousands of DVs, so it is stored beside the table).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RangeTaskOutput {
    pub split_id: String,
    pub range: u32,
    /// Where the range's [`RangeResult`] is stored.
    pub result_location: String,
    pub dvs: usize,
    pub positions_added: u64,
    pub files_opened: u64,
    /// The snapshot that committed the split already, when it had (the range then wrote
    /// nothing: a redrive must not overwrite a committed split's DVs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub committed_snapshot_id: Option<i64>,
    /// Where the task's time went.
    #[serde(default)]
    pub phases: RangePhases,
}

/// Milliseconds a range task spent per phase: what a range repeats of the others' work
/// (loading the table, its manifests) against what it divides (resolving).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RangePhases {
    /// Loading the table from the catalog (its pointer and metadata).
    pub load_ms: f64,
    /// Reading the base's manifest list and manifests.
    pub read_table_ms: f64,
    /// Reading the deleted keys and resolving them to positions.
    pub resolve_ms: f64,
    /// Writing the Puffin file, then storing the result.
    pub write_ms: f64,
}

/// What the cleanup of a split did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SplitCleanup {
    pub split_id: String,
    /// True when the split had committed after all: nothing was removed.
    pub committed: bool,
    /// Files removed (or found absent) by location.
    pub removed: Vec<String>,
}

impl SplitJob {
    /// The split of `shard` into `ranges`; its id is a function of the table, branch,
    /// shard, base snapshot and range count.
    pub fn new(shard: Shard, ranges: u32) -> Result<Self> {
        DataRange::new(0, ranges)?;
        if ranges > MAX_RANGES {
            return Err(Error::InvalidInput(format!(
                "a split has at most {MAX_RANGES} data ranges, not {ranges}"
            )));
        }
        let key = format!(
            "{}\n{}\n{}\n{}\n{ranges}",
            shard.table, shard.branch, shard.id, shard.base_snapshot_id
        );
        let hash = XxHash64::oneshot(0, key.as_bytes());
        // Readable and usable as a Step Functions execution name (at most 80 of
        // [A-Za-z0-9_.-]) and as a path component.
        // Not starting with a dot either (a hidden path component; `check` refuses it).
        let mut id: String = shard
            .table
            .to_string()
            .chars()
            .enumerate()
            .map(|(i, c)| {
                let kept = c.is_ascii_alphanumeric() || c == '_' || c == '-' || (c == '.' && i > 0);
                if kept { c } else { '_' }
            })
            .take(48)
            .collect();
        let _ = write!(id, "-{hash:016x}-r{ranges}");
        Ok(Self { id, shard, ranges })
    }

    /// Refuses a job that is not one a planner made: a range count out of bounds, or an
    /// id that could escape the table's directories.
    pub fn check(&self) -> Result<()> {
        DataRange::new(0, self.ranges)?;
        if self.ranges > MAX_RANGES {
            return Err(Error::InvalidInput(format!(
                "split {}: at most {MAX_RANGES} data ranges, not {}",
                self.id, self.ranges
            )));
        }
        let clean = !self.id.is_empty()
            && self.id.len() <= 80
            && !self.id.starts_with('.')
            && self
                .id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == '-');
        if !clean {
            return Err(Error::InvalidInput(format!(
                "split id {:?} is not 1 to 80 of [A-Za-z0-9_.-]",
                self.id
            )));
        }
        Ok(())
    }

    /// The range `index` of this split.
    pub fn range(&self, index: u32) -> Result<DataRange> {
        DataRange::new(index, self.ranges)
    }

    /// Where range `range`'s result is stored, under the table's metadata directory.
    pub fn result_location(&self, table_location: &str, range: DataRange) -> String {
        format!(
            "{}/metadata/eqdv-splits/{}/range-{}-of-{}.json",
            table_location.trim_end_matches('/'),
            self.id,
            range.index,
            range.count
        )
    }

    /// The name (without `.puffin`) of range `range`'s Puffin file in `<table>/data/`.
    pub fn dv_file_stem(&self, range: DataRange) -> String {
        format!("eqdv-dv-{}-{}", self.id, range.index)
    }

    fn options(&self, options: &ConvertOptions) -> ConvertOptions {
        let mut options = options.clone();
        options.branch = self.shard.branch.clone();
        options.shard = Some(self.shard.clone());
        options.split_id = Some(self.id.clone());
        options
    }
}

/// Converts range `index` of the split and stores its result beside the table; commits
/// nothing. Run again, it overwrites its own Puffin file and result.
pub async fn run_range_task(
    catalog: &dyn Catalog,
    job: &SplitJob,
    options: &ConvertOptions,
    index: u32,
) -> Result<RangeTaskOutput> {
    job.check()?;
    let range = job.range(index)?;
    // Its Puffin file's name is fixed: once the split committed, writing it again would
    // overwrite DVs the table references.
    let started = std::time::Instant::now();
    let table = LoadedTable::load(catalog, &job.shard.table).await?;
    let load_ms = started.elapsed().as_secs_f64() * 1000.0;
    if let Some(snapshot_id) = committed_snapshot(&table, job)? {
        tracing::info!(table = %job.shard.table, split = %job.id, %range, snapshot_id, "the split was committed already");
        return Ok(RangeTaskOutput {
            split_id: job.id.clone(),
            range: index,
            result_location: job.result_location(table.location(), range),
            dvs: 0,
            positions_added: 0,
            files_opened: 0,
            committed_snapshot_id: Some(snapshot_id),
            phases: RangePhases {
                load_ms,
                ..Default::default()
            },
        });
    }
    let mut options = job.options(options);
    options.dv_file_stem = Some(job.dv_file_stem(range));
    let result = convert_range_of(&table, &options, job.shard.base_snapshot_id, range).await?;
    crate::test_hooks::pause_point(crate::test_hooks::BEFORE_RANGE_RESULT).await;
    let result_location = job.result_location(&result.table_location, range);
    let storing = std::time::Instant::now();
    let stored = serde_json::to_vec(&result)
        .map_err(|e| Error::InvalidInput(format!("{range} of split {}: {e}", job.id)))?;
    // The table's storage (a REST catalog's credentials vended for its files).
    let file_io = &table.file_io;
    let written = async {
        file_io
            .new_output(&result_location)?
            .write(stored.into())
            .await
    }
    .await;
    if let Err(e) = written {
        if let Some(puffin) = &result.puffin {
            crate::storage::delete_files(
                file_io,
                table.location(),
                std::slice::from_ref(&puffin.location),
            )
            .await;
        }
        return Err(Error::file(
            &result_location,
            "cannot write the range result",
            e,
        ));
    }
    Ok(RangeTaskOutput {
        split_id: job.id.clone(),
        range: index,
        result_location,
        dvs: result.dvs_planned,
        positions_added: result.positions_added,
        files_opened: result.resolve.files_opened,
        committed_snapshot_id: None,
        phases: RangePhases {
            load_ms,
            read_table_ms: result.read_table_ms,
            resolve_ms: result.resolve_ms,
            write_ms: result.write_ms + storing.elapsed().as_secs_f64() * 1000.0,
        },
    })
}

/// The fan-in: loads every range's result and commits them in one snapshot (or reports
/// the commit an earlier run of it made), then removes the results. A missing result
/// commits nothing.
pub async fn run_commit_task(
    catalog: &dyn Catalog,
    job: &SplitJob,
    options: &ConvertOptions,
) -> Result<ConvertReport> {
    let started = std::time::Instant::now();
    job.check()?;
    let options = job.options(options);
    let name = &job.shard.table;
    let table = LoadedTable::load(catalog, name).await?;
    if let Some(snapshot_id) = committed_snapshot(&table, job)? {
        tracing::info!(table = %name, split = %job.id, snapshot_id, "the split was committed already");
        let mut report = ConvertReport::new(name, &options, Outcome::Converted);
        report.base_snapshot_id = Some(job.shard.base_snapshot_id);
        report.new_snapshot_id = Some(snapshot_id);
        report.ranges = job.ranges;
        remove_results(&table.file_io, table.location(), job).await;
        return Ok(report);
    }
    // All read at once: each is a round trip.
    let results = futures::future::try_join_all(
        DataRange::all(job.ranges).map(|range| read_result(&table, job, range)),
    )
    .await?;
    let (file_io, location) = (table.file_io.clone(), table.location().to_string());
    let report = commit_ranges_of(catalog, table, &options, &results, started).await?;
    if report.outcome == Outcome::Converted {
        remove_results(&file_io, &location, job).await;
    }
    Ok(report)
}

/// Range `range`'s stored result. A missing one is an error naming the range.
async fn read_result(table: &LoadedTable, job: &SplitJob, range: DataRange) -> Result<RangeResult> {
    let location = job.result_location(table.location(), range);
    let bytes = match crate::storage::read_all(&table.file_io, &location).await {
        Ok(bytes) => bytes,
        // Missing (S3 without s3:ListBucket says access denied): the range never
        // finished, and a split commits all its ranges or nothing.
        Err(e) if !e.retryable() => {
            return Err(Error::InvalidInput(format!(
                "{range} of split {} of table {} has no readable result at {location} ({e}): the ranges of a split commit together or not at all",
                job.id, job.shard.table
            )));
        }
        Err(e) => return Err(e),
    };
    let result: RangeResult = serde_json::from_slice(&bytes)
        .map_err(|e| Error::file(&location, "is not a range result", e.to_string()))?;
    if result.range != range {
        return Err(Error::InvalidInput(format!(
            "{location} holds {}, not {range}",
            result.range
        )));
    }
    Ok(result)
}

/// Removes what a split that will not commit wrote: every range's Puffin file and result.
/// Removes nothing when the split committed after all.
pub async fn run_cleanup_task(catalog: &dyn Catalog, job: &SplitJob) -> Result<SplitCleanup> {
    job.check()?;
    let table = LoadedTable::load(catalog, &job.shard.table).await?;
    let mut cleanup = SplitCleanup {
        split_id: job.id.clone(),
        ..Default::default()
    };
    if committed_snapshot(&table, job)?.is_some() {
        cleanup.committed = true;
        remove_results(&table.file_io, table.location(), job).await;
        return Ok(cleanup);
    }
    let data = format!("{}/data", table.location().trim_end_matches('/'));
    for range in DataRange::all(job.ranges) {
        for location in [
            format!("{data}/{}.puffin", job.dv_file_stem(range)),
            job.result_location(table.location(), range),
        ] {
            crate::location::check_confined(table.location(), &location)?;
            table
                .file_io
                .delete(&location)
                .await
                .map_err(|e| Error::file(&location, "cannot remove", e))?;
            cleanup.removed.push(location);
        }
    }
    Ok(cleanup)
}

/// The snapshot of the job's branch that committed this split, if one did: searched
/// from the head back to the split's base.
fn committed_snapshot(table: &LoadedTable, job: &SplitJob) -> Result<Option<i64>> {
    let mut next = table.head(&job.shard.branch)?;
    while let Some(snapshot) = next {
        if snapshot.snapshot_id() == job.shard.base_snapshot_id {
            return Ok(None);
        }
        let props = &snapshot.summary().additional_properties;
        if props.get(SPLIT_PROPERTY).map(String::as_str) == Some(job.id.as_str()) {
            return Ok(Some(snapshot.snapshot_id()));
        }
        next = snapshot
            .parent_snapshot_id()
            .and_then(|id| table.metadata.snapshot_by_id(id).cloned());
    }
    Ok(None)
}

async fn remove_results(file_io: &FileIO, table_location: &str, job: &SplitJob) {
    let results: Vec<String> = DataRange::all(job.ranges)
        .map(|range| job.result_location(table_location, range))
        .collect();
    crate::storage::delete_files(file_io, table_location, &results).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A split's id is made of its table's name; a name starting with a dot (a REST
    /// namespace may) must not make an id the split's own check refuses, a hidden path
    /// component (found by fuzzing).
    #[test]
    fn split_ids_pass_their_own_check_whatever_the_table_is_named() {
        let long = "x".repeat(200);
        for (namespace, name) in [
            ("...", "events"),
            (".hidden", "t"),
            ("cdc", "orders"),
            ("cdc", long.as_str()),
        ] {
            let shard = Shard {
                id: "00ff".into(),
                table: crate::catalog::TableName::new(namespace, name),
                branch: "main".into(),
                base_snapshot_id: 1,
                partitions: Vec::new(),
                queue_group: String::new(),
                groups: Vec::new(),
                estimated_bytes: 0,
                staging_branch: None,
            };
            for ranges in [2, MAX_RANGES] {
                let job = SplitJob::new(shard.clone(), ranges).unwrap();
                job.check()
                    .unwrap_or_else(|e| panic!("{namespace}.{name}: {e}"));
                assert!(!job.id.starts_with('.'), "{}", job.id);
            }
        }
    }
}
