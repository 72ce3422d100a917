//! Converting one range of a split: every key of the groups resolved against the range's
//! data files at the split's snapshot, their DVs written to a Puffin file of its own,
//! nothing committed.

use std::collections::BTreeSet;
use std::time::Instant;

use super::result::{DvTarget, RangeDv, RangePuffin, RangeResult};
use crate::catalog::{Catalog, TableName};
use crate::convert::attempt::{data_scope, encode_dvs, resolve_and_merge, select_groups};
use crate::convert::{ConvertOptions, ms_since};
use crate::data_range::DataRange;
use crate::plan::DeleteGroup;
use crate::resolve::ResolveMetrics;
use crate::table::{DataSelection, LiveFile, LoadedTable, PathFilter, TableFiles};
use crate::{Error, Result};

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

/// Which of the base's data files in scope [`read_base`] reads.
#[derive(Clone, Copy)]
pub(super) enum BaseData<'a> {
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
pub(super) async fn read_base(
    table: &LoadedTable,
    options: &ConvertOptions,
    base_snapshot_id: i64,
    data: BaseData<'_>,
) -> Result<(TableFiles, Vec<DeleteGroup>)> {
    table.require_v3()?;
    table.require_branch(&options.branch)?;
    crate::convert::attempt::check_shard_branch(options)?;
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

pub(super) fn delete_file_paths(groups: &[DeleteGroup]) -> Vec<String> {
    let paths: BTreeSet<&str> = groups
        .iter()
        .flat_map(|g| g.delete_files.iter().map(LiveFile::path))
        .collect();
    paths.into_iter().map(str::to_string).collect()
}
