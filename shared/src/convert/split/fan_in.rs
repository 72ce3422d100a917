//! The fan-in of a split: every range's result checked to be one split, alike, and all
//! their DVs committed with the removal of the equality deletes in one snapshot,
//! validated against the head as any conversion is.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::time::Instant;

use iceberg::spec::Struct;

use super::range::{BaseData, delete_file_paths, read_base};
use super::result::{RangeResult, discard_ranges};
use crate::catalog::{Catalog, TableName};
use crate::convert::attempt::{Attempt, AttemptEnd, conversion_changes, data_scope, dv_partition};
use crate::convert::validate::{AttemptFootprint, validate};
use crate::convert::{ConvertOptions, ConvertReport, Outcome, RetryPolicy, ms_since};
use crate::data_range::{DataRange, RangeLayout};
use crate::plan::DeleteGroup;
use crate::puffin::{WrittenDv, WrittenPuffin};
use crate::snapshot::AddedFile;
use crate::table::{LiveFile, LoadedTable, TableFiles};
use crate::{Error, Result};

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
