//! One conversion split across data-file ranges, committed once.
//!
//! A group too big for one invocation (a global group makes the whole table one) is
//! converted in ranges: every range resolves all of the group's keys against its own
//! share of the candidate data files, all read at one snapshot, and writes their DVs to a
//! Puffin file of its own, committing nothing ([`convert_range`]). One fan-in then
//! commits every range's DVs and removes the group's equality deletes in a single
//! snapshot ([`commit_ranges`]), validated against the head as any conversion is. The
//! equality deletes go only when every range of the split came back: a missing, failed or
//! mismatched range commits nothing, and the ranges' Puffin files are removed.
//!
//! A data file's range follows from the base's manifest list and the file's entry alone
//! (`crate::data_range`), so every range task and the fan-in agree on it: nothing lists
//! the files of a range, and a range fetches only the data manifests that hold its files.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fmt;
use std::time::Instant;

use iceberg::spec::{Literal, Struct, Type};
use serde::{Deserialize, Serialize};

use super::attempt::{
    Attempt, AttemptEnd, conversion_changes, data_scope, dv_partition, dv_partition_type,
    encode_dvs, resolve_and_merge, select_groups,
};
use super::validate::{AttemptFootprint, validate};
use super::{ConvertOptions, ConvertReport, Outcome, RetryPolicy, ms_since};
use crate::catalog::{Catalog, TableName};
pub use crate::data_range::{DataRange, Membership, RangeLayout};
use crate::partition::partition_as_type;
use crate::plan::DeleteGroup;
use crate::puffin::{WrittenDv, WrittenPuffin};
use crate::resolve::ResolveMetrics;
use crate::snapshot::AddedFile;
use crate::table::{DataSelection, LiveFile, LoadedTable, PathFilter, TableFiles};
use crate::{Error, Result};

/// Times an in-process split is converted again from a new head when the head moved in a
/// way that invalidates the ranges' work (as a conversion plans again).
const MAX_RANGE_REPLANS: u32 = 4;

/// What one range converted: the DVs it wrote, uncommitted, and what it relied on. It is
/// all the fan-in needs besides the table (it is meant to be stored as JSON between the
/// range tasks and the fan-in).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RangeResult {
    pub table: TableName,
    pub branch: String,
    /// The shard converted, when the conversion was of one shard.
    pub shard_id: Option<String>,
    pub range: DataRange,
    /// How the split's data files were dealt to its ranges (a result of a version
    /// before the manifest layout says nothing: by path hash).
    #[serde(default)]
    pub membership: Membership,
    /// The table's location when the range read it (where a split stores its results).
    #[serde(default)]
    pub table_location: String,
    /// The snapshot every range of the split read.
    pub base_snapshot_id: i64,
    /// The equality delete files the range applied (sorted): the same in every range.
    pub equality_delete_files: Vec<String>,
    /// The Puffin file written, when the range found positions to delete (and it was not
    /// a dry run).
    pub puffin: Option<RangePuffin>,
    /// v2 position delete files whose every referenced data file is this range's and got
    /// a DV that carries their positions.
    pub removed_position_deletes: Vec<String>,
    pub dvs_planned: usize,
    pub dvs_replaced: usize,
    pub positions_added: u64,
    pub resolve: ResolveMetrics,
    pub resolve_ms: f64,
    /// Reading the base's manifest list and manifests, and grouping the deletes.
    #[serde(default)]
    pub read_table_ms: f64,
    /// Encoding and uploading the Puffin file.
    #[serde(default)]
    pub write_ms: f64,
}

/// A range's Puffin file and where each of its DVs lies.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RangePuffin {
    pub location: String,
    pub file_size_in_bytes: u64,
    pub dvs: Vec<RangeDv>,
}

/// One DV of a range's Puffin file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RangeDv {
    pub referenced_data_file: String,
    pub content_offset: i64,
    pub content_size_in_bytes: i64,
    pub cardinality: u64,
    /// The DV it replaces (it carries that DV's positions too).
    pub replaced_dv: Option<String>,
    /// Where its data file lies, so that the fan-in files the DV without reading the
    /// data manifests again. Absent from results of earlier versions, and where the
    /// partition does not survive its JSON form: the fan-in then reads them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_file: Option<DvTarget>,
}

/// The spec and partition of a DV's data file, as the range read them in the base.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DvTarget {
    /// The manifest that lists the data file in the base (which range holds a file
    /// depends on it: `crate::data_range`).
    pub manifest_path: String,
    pub spec_id: i32,
    /// The partition in the spec's JSON single-value form (an object keyed by partition
    /// field id), typed as the table's current schema types it.
    pub partition: serde_json::Value,
}

impl DvTarget {
    /// The target of a DV for `data`; `None` when its partition does not read back from
    /// JSON as the same values (a NaN, a type the form does not carry).
    fn of(table: &LoadedTable, data: &LiveFile) -> Result<Option<Self>> {
        let partition_type = dv_partition_type(table, data.spec_id)?;
        let partition = partition_as_type(data.file.partition(), &partition_type);
        Ok(Self::encode(
            &data.manifest_path,
            data.spec_id,
            &partition,
            &Type::Struct(partition_type),
        ))
    }

    /// The partition, typed by `table`'s current schema (see [`DvTarget::decode`]).
    fn partition(&self, table: &LoadedTable) -> Option<Struct> {
        let partition_type = dv_partition_type(table, self.spec_id).ok()?;
        self.decode(&Type::Struct(partition_type))
    }

    /// `partition` of type `partition_type` in its JSON form, when that decodes back to
    /// the same values.
    fn encode(
        manifest_path: &str,
        spec_id: i32,
        partition: &Struct,
        partition_type: &Type,
    ) -> Option<Self> {
        let json = Literal::Struct(partition.clone())
            .try_into_json(partition_type)
            .ok()?;
        let target = Self {
            manifest_path: manifest_path.to_string(),
            spec_id,
            partition: json,
        };
        (target.decode(partition_type).as_ref() == Some(partition)).then_some(target)
    }

    /// The partition read as `partition_type`; `None` unless it encodes to the same JSON
    /// again (reading a struct from JSON turns a field it cannot read into a null, which
    /// must never file a DV in another partition).
    fn decode(&self, partition_type: &Type) -> Option<Struct> {
        let read = Literal::try_from_json(self.partition.clone(), partition_type).ok()??;
        let encoded_again = read.clone().try_into_json(partition_type).ok()?;
        match read {
            Literal::Struct(partition) if encoded_again == self.partition => Some(partition),
            _ => None,
        }
    }
}

/// Converts `range` of the table at snapshot `base_snapshot_id` of the options' branch
/// (all of its live equality deletes, or the shard's): resolves every key of the groups
/// against the range's data files and uploads their DVs, committing nothing. On an error
/// nothing it wrote is left.
pub async fn convert_range(
    catalog: &dyn Catalog,
    name: &TableName,
    options: &ConvertOptions,
    base_snapshot_id: i64,
    range: DataRange,
) -> Result<RangeResult> {
    let table = LoadedTable::load(catalog, name).await?;
    convert_range_of(&table, options, base_snapshot_id, range).await
}

/// [`convert_range`] of a table already loaded (at or after the base).
pub async fn convert_range_of(
    table: &LoadedTable,
    options: &ConvertOptions,
    base_snapshot_id: i64,
    range: DataRange,
) -> Result<RangeResult> {
    DataRange::new(range.index, range.count)?;
    let name = &table.name;
    // Only this range's data files are decoded in full and kept: the others are other
    // ranges' business, and counted as not read, so nothing below takes a file it does
    // not hold for a removed one.
    let phase = Instant::now();
    let (files, groups) =
        read_base(table, options, base_snapshot_id, BaseData::Range(range)).await?;
    let read_table_ms = ms_since(phase);
    let mut result = RangeResult {
        table: name.clone(),
        branch: options.branch.clone(),
        shard_id: options.shard.as_ref().map(|s| s.id.clone()),
        range,
        membership: files.range_layout(range.count).membership(),
        table_location: table.location().to_string(),
        base_snapshot_id,
        equality_delete_files: delete_file_paths(&groups),
        puffin: None,
        removed_position_deletes: Vec::new(),
        dvs_planned: 0,
        dvs_replaced: 0,
        positions_added: 0,
        resolve: ResolveMetrics::default(),
        resolve_ms: 0.0,
        read_table_ms,
        write_ms: 0.0,
    };
    if groups.is_empty() {
        return Ok(result);
    }

    let phase = Instant::now();
    // A range uses the key index to look keys up; keeping it is a whole conversion's.
    let (metrics, dv_plans, removed_position_deletes, _) =
        resolve_and_merge(table, &files, &groups, options).await?;
    result.resolve = metrics;
    result.resolve_ms = ms_since(phase);
    result.dvs_planned = dv_plans.len();
    result.dvs_replaced = dv_plans.iter().filter(|p| p.replaced.is_some()).count();
    result.positions_added = dv_plans.iter().map(|p| p.added).sum();
    result.removed_position_deletes = removed_position_deletes
        .iter()
        .map(|f| f.path().to_string())
        .collect();
    if options.dry_run || dv_plans.is_empty() {
        return Ok(result);
    }

    options.check_deadline(name, "writing deletion vectors")?;
    let phase = Instant::now();
    let targets = dv_plans
        .iter()
        .map(|plan| DvTarget::of(table, &plan.data_file))
        .collect::<Result<Vec<_>>>()?;
    let mut written_files = Vec::new();
    let encoded = encode_dvs(
        table,
        &dv_plans,
        options.dv_file_stem.as_deref(),
        &mut written_files,
    )
    .await?;
    if let Err(e) = encoded.upload(&table.file_io).await {
        crate::storage::delete_files(&table.file_io, table.location(), &written_files).await;
        return Err(e.into());
    }
    let written = &encoded.written;
    result.puffin = Some(RangePuffin {
        location: written.location.clone(),
        file_size_in_bytes: written.file_size_in_bytes,
        dvs: dv_plans
            .iter()
            .zip(&written.dvs)
            .zip(targets)
            .map(|((plan, dv), target)| RangeDv {
                referenced_data_file: dv.referenced_data_file.clone(),
                content_offset: dv.content_offset,
                content_size_in_bytes: dv.content_size_in_bytes,
                cardinality: dv.cardinality,
                replaced_dv: plan.replaced.as_ref().map(|f| f.path().to_string()),
                data_file: target,
            })
            .collect(),
    });
    result.write_ms = ms_since(phase);
    Ok(result)
}

/// Commits the DVs of every range of one split in a single snapshot that also removes
/// the groups' equality deletes, validated against the head (and rebased on it while
/// validation allows) as any conversion is. Refuses, committing nothing, when a range of
/// the split is missing or the results disagree; fails with [`Error::RangesStale`] when
/// the head moved in a way that invalidates the ranges' work. On every error but an
/// unknown commit outcome the ranges' Puffin files are removed.
pub async fn commit_ranges(
    catalog: &dyn Catalog,
    name: &TableName,
    options: &ConvertOptions,
    results: &[RangeResult],
) -> Result<ConvertReport> {
    let started = Instant::now();
    let table = match LoadedTable::load(catalog, name).await {
        Ok(table) => table,
        Err(e) => {
            // Without the table, nothing says where its files may be deleted: what the
            // ranges wrote is left to `eqdv cleanup` (a result names its own paths).
            tracing::warn!(table = %name, error = %e, "cannot load the table to commit its ranges; their files are left for cleanup");
            return Err(e);
        }
    };
    commit_ranges_of(catalog, table, options, results, started).await
}

/// [`commit_ranges`] on a table already loaded (`started` when the fan-in began).
pub async fn commit_ranges_of(
    catalog: &dyn Catalog,
    table: LoadedTable,
    options: &ConvertOptions,
    results: &[RangeResult],
    started: Instant,
) -> Result<ConvertReport> {
    let name = &table.name.clone();
    let file_io = table.file_io.clone();
    let location = table.location().to_string();
    let committed = commit_loaded(catalog, name, options, table, results, started).await;
    match &committed {
        Ok(report) if report.outcome == Outcome::Converted => {}
        // The swap may have landed: keep every file; cleanup decides later.
        Err(Error::CommitStateUnknown { .. }) => {}
        _ => discard_ranges(&file_io, &location, results).await,
    }
    committed
}

/// Converts in `count` ranges in this process, all at once (each with its share of the
/// options' parallelism and memory), then commits them together; converted again from a
/// new head when that invalidated them. `count` 1 is one range, committed the same way.
pub async fn convert_in_ranges(
    catalog: &dyn Catalog,
    name: &TableName,
    options: &ConvertOptions,
    count: u32,
) -> Result<ConvertReport> {
    DataRange::new(0, count)?;
    let mut per_range = options.clone();
    let share = |v: u64| (v / u64::from(count)).max(1);
    per_range.resolve.parallelism = (options.resolve.parallelism / count as usize).max(1);
    per_range.resolve.read_memory_budget = share(options.resolve.read_memory_budget);
    per_range.resolve.key_memory_budget = share(options.resolve.key_memory_budget);
    let mut replans = 0;
    loop {
        let table = LoadedTable::load(catalog, name).await?;
        let Some(head) = table.head(&options.branch)? else {
            return Ok(ConvertReport::new(name, options, Outcome::NothingToDo));
        };
        let base = head.snapshot_id();
        let converted = futures::future::join_all(
            DataRange::all(count).map(|range| convert_range_of(&table, &per_range, base, range)),
        )
        .await;
        let mut results = Vec::with_capacity(converted.len());
        let mut failed = None;
        for (range, outcome) in DataRange::all(count).zip(converted) {
            match outcome {
                Ok(result) => results.push(result),
                Err(e) => {
                    tracing::warn!(table = %name, %range, error = %e, "range failed");
                    failed.get_or_insert(e);
                }
            }
        }
        if let Some(e) = failed {
            discard_ranges(&table.file_io, table.location(), &results).await;
            return Err(e);
        }
        match commit_ranges(catalog, name, options, &results).await {
            Err(Error::RangesStale { .. }) if replans < MAX_RANGE_REPLANS => {
                replans += 1;
                tracing::info!(table = %name, "head moved; converting the ranges again");
            }
            Ok(mut report) => {
                report.replans += replans;
                return Ok(report);
            }
            Err(e) => return Err(e),
        }
    }
}

/// Removes the Puffin files the ranges wrote (when their work will not be committed),
/// those in the directories of the table at `table_location` only.
pub async fn discard_ranges(
    file_io: &iceberg::io::FileIO,
    table_location: &str,
    results: &[RangeResult],
) {
    let written: Vec<String> = results
        .iter()
        .filter_map(|r| r.puffin.as_ref().map(|p| p.location.clone()))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    crate::storage::delete_files(file_io, table_location, &written).await;
}

/// Which of the base's data files in scope [`read_base`] reads.
#[derive(Clone, Copy)]
enum BaseData<'a> {
    Every,
    /// Those whose path the filter keeps.
    Paths(PathFilter<'a>),
    /// Those of one range of a split.
    Range(DataRange),
    /// None: no data manifest is fetched.
    Nothing,
}

/// The files of snapshot `base_snapshot_id` that the groups to convert may touch (of
/// the data files, those `data` says), and those groups (all, or the shard's).
async fn read_base(
    table: &LoadedTable,
    options: &ConvertOptions,
    base_snapshot_id: i64,
    data: BaseData<'_>,
) -> Result<(TableFiles, Vec<DeleteGroup>)> {
    table.require_v3()?;
    table.require_branch(&options.branch)?;
    super::attempt::check_shard_branch(options)?;
    let Some(snapshot) = table.metadata.snapshot_by_id(base_snapshot_id).cloned() else {
        return Err(Error::RangesStale {
            table: table.name.to_string(),
            reason: format!("snapshot {base_snapshot_id}, which the ranges read, is gone"),
        });
    };
    let groups_of = |files: &TableFiles| select_groups(table, files, options.shard.as_ref());
    let selection = match data {
        BaseData::Every => None,
        BaseData::Paths(filter) => Some(DataSelection::Paths(filter)),
        BaseData::Range(range) => Some(DataSelection::Range(range)),
        BaseData::Nothing => {
            return TableFiles::read_deletes_only(table, &snapshot, groups_of).await;
        }
    };
    TableFiles::read_scoped_paths(
        table,
        Some(&snapshot),
        |files| {
            let groups = groups_of(files)?;
            Ok((data_scope(&groups, options), groups))
        },
        selection,
    )
    .await
}

fn delete_file_paths(groups: &[DeleteGroup]) -> Vec<String> {
    let paths: BTreeSet<&str> = groups
        .iter()
        .flat_map(|g| g.delete_files.iter().map(LiveFile::path))
        .collect();
    paths.into_iter().map(str::to_string).collect()
}

/// The split the results are of, once they are checked to be every range of one split,
/// converted alike: their base snapshot and the equality delete files they applied.
fn check_split<'a>(
    name: &TableName,
    options: &ConvertOptions,
    results: &'a [RangeResult],
) -> Result<(i64, &'a [String])> {
    let Some(first) = results.first() else {
        return Err(Error::InvalidInput(format!(
            "no range results to commit for table {name}"
        )));
    };
    let shard_id = options.shard.as_ref().map(|s| s.id.clone());
    let mut seen = HashSet::new();
    for r in results {
        let differs = |what: &str, this: &dyn fmt::Debug, want: &dyn fmt::Debug| {
            Error::InvalidInput(format!(
                "{} of table {name} has {what} {this:?}, not {want:?}",
                r.range
            ))
        };
        if r.table != *name {
            return Err(differs("table", &r.table.to_string(), &name.to_string()));
        }
        if r.branch != options.branch {
            return Err(differs("branch", &r.branch, &options.branch));
        }
        if r.shard_id != shard_id {
            return Err(differs("shard", &r.shard_id, &shard_id));
        }
        if r.range.count != first.range.count {
            return Err(differs("range count", &r.range.count, &first.range.count));
        }
        DataRange::new(r.range.index, r.range.count)?;
        if r.base_snapshot_id != first.base_snapshot_id {
            return Err(differs(
                "base snapshot",
                &r.base_snapshot_id,
                &first.base_snapshot_id,
            ));
        }
        if r.equality_delete_files != first.equality_delete_files {
            return Err(Error::InvalidInput(format!(
                "{} of table {name} applied other equality delete files than {}",
                r.range, first.range
            )));
        }
        if !seen.insert(r.range.index) {
            return Err(Error::InvalidInput(format!(
                "{} of table {name} is given twice",
                r.range
            )));
        }
    }
    if let Some(missing) = DataRange::all(first.range.count).find(|r| !seen.contains(&r.index)) {
        return Err(Error::InvalidInput(format!(
            "{missing} of table {name} is missing: the ranges of a split commit together or not at all"
        )));
    }
    Ok((first.base_snapshot_id, &first.equality_delete_files))
}

async fn commit_loaded(
    catalog: &dyn Catalog,
    name: &TableName,
    options: &ConvertOptions,
    table: LoadedTable,
    results: &[RangeResult],
    started: Instant,
) -> Result<ConvertReport> {
    let (base_snapshot_id, delete_files) = check_split(name, options, results)?;
    // A result is read back from storage: the Puffin file it names must be the table's
    // own (it is committed, and removed if the commit fails).
    for result in results {
        if let Some(puffin) = &result.puffin {
            crate::location::check_confined(table.location(), &puffin.location).map_err(|e| {
                Error::InvalidInput(format!("{} of table {name}: {e}", result.range))
            })?;
        }
    }
    let phase = Instant::now();
    // Of the data, the fan-in needs only where the files the ranges wrote DVs for lie (to
    // file their DVs in their partitions). The ranges read that in the base and say it
    // in their results; from results that do not, the fan-in reads those files' entries
    // itself (the rest of the data manifests skipped as it is decoded). Compared with a
    // moved head, the base is read whole.
    let targets = ranges_targets(&table, results);
    let dv_targets: HashSet<&str> = results
        .iter()
        .flat_map(|r| r.puffin.iter().flat_map(|p| &p.dvs))
        .map(|dv| dv.referenced_data_file.as_str())
        .collect();
    let is_dv_target = |path: &str| dv_targets.contains(path);
    let data = match targets {
        Some(_) => BaseData::Nothing,
        None => BaseData::Paths(&is_dv_target),
    };
    let (base, groups) = read_base(&table, options, base_snapshot_id, data).await?;
    // The ranges must have dealt the files as the base's manifest list says every task
    // of this version does: a range of an earlier version (by path hash, where this one
    // lays the manifests out) may have left files to no range.
    let layout = base.range_layout(results[0].range.count);
    if let Some(r) = results.iter().find(|r| r.membership != layout.membership()) {
        return Err(Error::InvalidInput(format!(
            "{} of table {name} dealt its data files by {}, where every range of snapshot {base_snapshot_id} deals them by {}: the ranges of a split must be of one version of eqdv",
            r.range,
            r.membership,
            layout.membership()
        )));
    }
    if delete_file_paths(&groups) != delete_files {
        return Err(Error::InvalidInput(format!(
            "the ranges of table {name} applied other equality delete files than snapshot {base_snapshot_id} holds for them"
        )));
    }
    let mut report = ConvertReport::new(name, options, Outcome::NothingToDo);
    report.base_snapshot_id = Some(base_snapshot_id);
    report.ranges = results.len() as u32;
    report.groups = groups.len();
    report.phases.read_table_ms = ms_since(phase);
    for r in results {
        report.resolve.add_range(&r.resolve);
        report.phases.resolve_ms = report.phases.resolve_ms.max(r.resolve_ms);
        report.dvs_written += r.dvs_planned;
        report.dvs_replaced += r.dvs_replaced;
        report.positions_added += r.positions_added;
    }
    if groups.is_empty() {
        report.duration_ms = started.elapsed().as_millis() as u64;
        return Ok(report);
    }

    let data_files = match targets {
        Some(targets) => DvDataFiles::FromRanges(targets),
        None => DvDataFiles::FromBase(base.data_files.iter().map(|f| (f.path(), f)).collect()),
    };
    let (added, removed, dv_targets) =
        range_changes(&table, &base, &layout, &data_files, &groups, results)?;
    report.equality_delete_files_removed = groups.iter().map(|g| g.delete_files.len()).sum();
    report.equality_deletes_removed = groups.iter().map(DeleteGroup::delete_rows).sum();
    report.position_delete_files_removed = results
        .iter()
        .flat_map(|r| &r.removed_position_deletes)
        .collect::<HashSet<_>>()
        .len();
    if options.dry_run {
        report.outcome = Outcome::DryRun;
        report.duration_ms = started.elapsed().as_millis() as u64;
        return Ok(report);
    }

    let phase = Instant::now();
    let footprint = AttemptFootprint {
        groups,
        dv_targets,
        removed,
    };
    let mut changes = conversion_changes(
        Some(base_snapshot_id),
        options,
        added,
        footprint.removed.clone(),
    );
    // The ranges read the base; the commit is built on the head. If it moved, the same
    // validation as after a conflict decides whether the ranges' work still holds.
    let head = table.head(&options.branch)?;
    let files = if head.as_ref().map(|s| s.snapshot_id()) == Some(base_snapshot_id) {
        base
    } else {
        let (base, _) = read_base(&table, options, base_snapshot_id, BaseData::Every).await?;
        let scope = data_scope(&footprint.groups, options);
        let (at_head, ()) =
            TableFiles::read_scoped(&table, head.as_ref(), |_| Ok((scope, ()))).await?;
        match validate(&base, &at_head, &footprint) {
            Ok(refreshed) => {
                report.rebases += 1;
                changes.removed_files = refreshed;
                at_head
            }
            Err(reason) => {
                return Err(Error::RangesStale {
                    table: name.to_string(),
                    reason,
                });
            }
        }
    };
    let mut policy = options
        .retry
        .clone()
        .unwrap_or_else(|| RetryPolicy::from_properties(table.metadata.properties()));
    if let Some(retries) = options.commit_retries {
        policy.num_retries = retries;
    }
    let attempt = Attempt {
        catalog,
        name,
        options,
        started,
    };
    let end = attempt
        .commit_changes(
            &policy,
            table,
            files,
            changes,
            &footprint,
            None,
            &mut report,
        )
        .await;
    report.phases.write_commit_ms = ms_since(phase);
    match end? {
        AttemptEnd::Done => Ok(report),
        AttemptEnd::Replan => Err(Error::RangesStale {
            table: name.to_string(),
            reason: "a commit that landed before the fan-in's invalidates the ranges' work".into(),
        }),
    }
}

/// Where the fan-in learns the spec and partition of each DV's data file.
enum DvDataFiles<'a> {
    /// The base's entries of those files.
    FromBase(HashMap<&'a str, &'a LiveFile>),
    /// The ranges' results, by data file path: its manifest, spec and partition.
    FromRanges(HashMap<&'a str, (&'a str, i32, Struct)>),
}

/// The spec and partition of every DV's data file as the ranges' results give them, or
/// `None` when a result does not give one (or gives one that does not read back): the
/// fan-in then reads them from the base.
fn ranges_targets<'a>(
    table: &LoadedTable,
    results: &'a [RangeResult],
) -> Option<HashMap<&'a str, (&'a str, i32, Struct)>> {
    let mut targets = HashMap::new();
    for dv in results
        .iter()
        .flat_map(|r| r.puffin.iter().flat_map(|p| &p.dvs))
    {
        let Some(target) = &dv.data_file else {
            return None;
        };
        let Some(partition) = target.partition(table) else {
            tracing::info!(table = %table.name, data_file = %dv.referenced_data_file, "a range result's partition does not read back; reading the data manifests");
            return None;
        };
        targets.insert(
            dv.referenced_data_file.as_str(),
            (target.manifest_path.as_str(), target.spec_id, partition),
        );
    }
    Some(targets)
}

/// The DVs the ranges add (checked: each for a data file of its own range, one per data
/// file, that the base holds in scope as `data_files` say, replacing the DV the base
/// holds for it) and the files
/// the snapshot removes: the groups' equality deletes, the replaced DVs and the position
/// deletes the ranges made redundant. Also the data files given a DV.
fn range_changes(
    table: &LoadedTable,
    base: &TableFiles,
    layout: &RangeLayout,
    data_files: &DvDataFiles<'_>,
    groups: &[DeleteGroup],
    results: &[RangeResult],
) -> Result<(Vec<AddedFile>, Vec<LiveFile>, HashSet<String>)> {
    let mut added = Vec::new();
    let mut removed: Vec<LiveFile> = groups
        .iter()
        .flat_map(|g| g.delete_files.iter().cloned())
        .collect();
    let mut dv_targets = HashSet::new();
    for r in results {
        let invalid =
            |what: String| Error::InvalidInput(format!("{} of table {}: {what}", r.range, r.table));
        let Some(puffin) = &r.puffin else {
            continue;
        };
        let written = WrittenPuffin {
            location: puffin.location.clone(),
            file_size_in_bytes: puffin.file_size_in_bytes,
            dvs: Vec::new(),
        };
        for dv in &puffin.dvs {
            let path = dv.referenced_data_file.as_str();
            let lies = match data_files {
                DvDataFiles::FromBase(files) => match files.get(path) {
                    Some(data) => Some((
                        data.manifest_path.as_str(),
                        data.spec_id,
                        dv_partition(table, data)?,
                    )),
                    None => None,
                },
                DvDataFiles::FromRanges(targets) => targets.get(path).cloned(),
            };
            let Some((manifest_path, spec_id, partition)) = lies else {
                return Err(invalid(format!(
                    "a DV for data file {path}, which snapshot {} does not hold in scope",
                    r.base_snapshot_id
                )));
            };
            if !layout.holds(r.range, manifest_path, path) {
                return Err(invalid(format!(
                    "a DV for data file {path}, which is not in this range"
                )));
            }
            if !dv_targets.insert(path.to_string()) {
                return Err(invalid(format!("a second DV for data file {path}")));
            }
            let replaced = base.dvs.get(path);
            if replaced.map(LiveFile::path) != dv.replaced_dv.as_deref() {
                return Err(invalid(format!(
                    "a DV for data file {path} replacing {:?}, where the base holds {:?}",
                    dv.replaced_dv,
                    replaced.map(LiveFile::path)
                )));
            }
            removed.extend(replaced.cloned());
            let entry = WrittenDv {
                referenced_data_file: dv.referenced_data_file.clone(),
                content_offset: dv.content_offset,
                content_size_in_bytes: dv.content_size_in_bytes,
                cardinality: dv.cardinality,
            };
            added.push(AddedFile {
                spec_id,
                file: written.dv_entry(&entry, spec_id, partition)?,
            });
        }
    }
    let position_deletes: HashMap<&str, &LiveFile> = base
        .position_deletes
        .iter()
        .map(|f| (f.path(), f))
        .collect();
    let mut removed_positions = HashSet::new();
    for r in results {
        for path in &r.removed_position_deletes {
            let Some(file) = position_deletes.get(path.as_str()) else {
                return Err(Error::InvalidInput(format!(
                    "{} of table {}: removes position delete file {path}, which the base does not hold",
                    r.range, r.table
                )));
            };
            if removed_positions.insert(path.as_str()) {
                removed.push((*file).clone());
            }
        }
    }
    Ok((added, removed, dv_targets))
}

#[cfg(test)]
mod tests {
    use iceberg::spec::{Literal, NestedField, PrimitiveType, Struct, StructType, Type};

    use super::DvTarget;

    fn struct_type(fields: &[(i32, PrimitiveType)]) -> Type {
        Type::Struct(StructType::new(
            fields
                .iter()
                .map(|(id, t)| {
                    NestedField::optional(*id, format!("p{id}"), Type::Primitive(t.clone())).into()
                })
                .collect(),
        ))
    }

    #[test]
    fn a_partition_round_trips_through_its_json_form() {
        let partition_type = struct_type(&[
            (1000, PrimitiveType::Int),
            (1001, PrimitiveType::Long),
            (1002, PrimitiveType::Date),
            (1003, PrimitiveType::Timestamp),
            (1004, PrimitiveType::Timestamptz),
            (1005, PrimitiveType::String),
            (
                1006,
                PrimitiveType::Decimal {
                    precision: 10,
                    scale: 2,
                },
            ),
            (1007, PrimitiveType::Binary),
            (1008, PrimitiveType::Boolean),
            (1009, PrimitiveType::Double),
            (1010, PrimitiveType::Int),
        ]);
        let partition = Struct::from_iter([
            Some(Literal::int(-7)),
            Some(Literal::long(1_i64 << 40)),
            Some(Literal::date(19_000)),
            Some(Literal::timestamp(1_700_000_000_123_456)),
            Some(Literal::timestamptz(1_700_000_000_000_001)),
            Some(Literal::string("a/b=c é")),
            Some(Literal::decimal(-12_345)),
            Some(Literal::binary(vec![0, 1, 254, 255])),
            Some(Literal::bool(true)),
            Some(Literal::double(0.1)),
            None,
        ]);
        let target = DvTarget::encode("m.avro", 3, &partition, &partition_type).expect("encodable");
        assert_eq!(target.spec_id, 3);
        let stored = serde_json::to_string(&target).unwrap();
        let read: DvTarget = serde_json::from_str(&stored).unwrap();
        assert_eq!(read.decode(&partition_type), Some(partition));
        // Unpartitioned: an empty tuple.
        let empty =
            DvTarget::encode("m.avro", 0, &Struct::empty(), &struct_type(&[])).expect("empty");
        assert_eq!(empty.decode(&struct_type(&[])), Some(Struct::empty()));
    }

    #[test]
    fn a_partition_that_does_not_read_back_is_not_given() {
        // NaN has no JSON number.
        let floats = struct_type(&[(1000, PrimitiveType::Float)]);
        let nan = Struct::from_iter([Some(Literal::float(f32::NAN))]);
        assert_eq!(DvTarget::encode("m.avro", 0, &nan, &floats), None);
        // A value the type cannot read is refused, not read as a null.
        let ints = struct_type(&[(1000, PrimitiveType::Int)]);
        let target = DvTarget {
            manifest_path: "m.avro".into(),
            spec_id: 0,
            partition: serde_json::json!({"1000": "not a number"}),
        };
        assert_eq!(target.decode(&ints), None);
        // Nor is a field it does not know (another spec's tuple).
        let target = DvTarget {
            manifest_path: "m.avro".into(),
            spec_id: 0,
            partition: serde_json::json!({"1001": 4}),
        };
        assert_eq!(target.decode(&ints), None);
    }

    #[test]
    fn a_partition_written_before_a_promotion_reads_in_the_promoted_type() {
        let before = struct_type(&[(1000, PrimitiveType::Int)]);
        let after = struct_type(&[(1000, PrimitiveType::Long)]);
        let target = DvTarget::encode(
            "m.avro",
            0,
            &Struct::from_iter([Some(Literal::int(42))]),
            &before,
        )
        .expect("encodable");
        assert_eq!(
            target.decode(&after),
            Some(Struct::from_iter([Some(Literal::long(42))]))
        );
    }
}
