//! Merging a resolution's new positions with what is already deleted: each data file's
//! existing DV and the v2 position deletes that apply to it, so one DV per data file
//! carries every deleted position.

use std::collections::{BTreeMap, HashMap, HashSet};

use roaring::RoaringTreemap;

use crate::Result;
use crate::puffin::FooterPrefetch;
use crate::resolve::ExistingDvs;
use crate::table::{LiveFile, LoadedTable, TableFiles};

/// The DV to write for one data file.
pub(crate) struct DvPlan {
    pub data_file: LiveFile,
    pub positions: RoaringTreemap,
    /// Positions no older DV or position delete had deleted.
    pub added: u64,
    pub replaced: Option<LiveFile>,
}

/// The DVs to write for `new_positions` (merged with what is already deleted), and the
/// v2 position delete files they make redundant.
pub(crate) async fn with_existing_deletes(
    table: &LoadedTable,
    files: &TableFiles,
    new_positions: BTreeMap<String, RoaringTreemap>,
    parallelism: usize,
    old_dvs: (Option<&FooterPrefetch>, &ExistingDvs),
) -> Result<(Vec<DvPlan>, Vec<LiveFile>)> {
    // Each v2 position delete file that may reference a file we write a DV for is
    // read once, for merging and for removal; the others (other partitions, other
    // shards' files) are not this attempt's business.
    let scoped_position_deletes: Vec<LiveFile> = if new_positions.is_empty() {
        Vec::new()
    } else {
        crate::position_deletes::may_reference_any(&files.position_deletes, &new_positions)
    };
    let position_deletes = if scoped_position_deletes.is_empty() {
        Vec::new()
    } else {
        crate::position_deletes::read_each(
            (&table.file_io, &table.name.to_string()),
            &scoped_position_deletes,
        )
        .await?
    };
    let dv_plans = merge_with_existing(
        table,
        files,
        (&scoped_position_deletes, &position_deletes),
        new_positions,
        parallelism,
        old_dvs,
    )
    .await?;
    let removed_position_deletes = covered_position_deletes(
        files,
        &scoped_position_deletes,
        &position_deletes,
        &dv_plans,
    );
    Ok((dv_plans, removed_position_deletes))
}

/// The DVs a conversion would write for `resolved` (per data file, every position
/// deleted once they are written), without writing anything: what the key index must
/// leave unchanged, whichever files it ruled out.
pub async fn dvs_to_write(
    table: &LoadedTable,
    files: &TableFiles,
    resolved: &crate::resolve::Resolved,
    parallelism: usize,
) -> Result<BTreeMap<String, RoaringTreemap>> {
    let (plans, _) = with_existing_deletes(
        table,
        files,
        resolved.positions.clone(),
        parallelism,
        (None, &resolved.existing_dvs),
    )
    .await?;
    Ok(plans
        .into_iter()
        .map(|plan| (plan.data_file.path().to_string(), plan.positions))
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
    parallelism: usize,
    old_dvs: (Option<&FooterPrefetch>, &ExistingDvs),
) -> Result<Vec<DvPlan>> {
    let data_by_path: HashMap<&str, &LiveFile> =
        files.data_files.iter().map(|f| (f.path(), f)).collect();
    let position_deletes =
        crate::position_deletes::by_data_file(position_delete_files, position_deletes);
    let live: Vec<(String, RoaringTreemap, &LiveFile)> = new_positions
        .into_iter()
        .filter_map(|(path, positions)| {
            let data = *data_by_path.get(path.as_str())?;
            Some((path, positions, data))
        })
        .collect();
    let existing = read_existing_dvs(table, files, &live, parallelism, old_dvs).await?;

    let mut plans = Vec::new();
    for ((path, positions, data), existing) in live.into_iter().zip(existing) {
        let mut merged = positions;
        let replaced = files.dvs.get(&path).cloned();
        let mut before = existing.unwrap_or_default();
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
            data_file: data.clone(),
            positions: merged,
            added: added.len(),
            replaced,
        });
    }
    Ok(plans)
}

/// The existing DV of each entry of `live` that a new one merges with (`None` where
/// there is none, or where it predates the data file), checked and read together: one
/// after another, each would cost its own round trips to object storage, and a
/// streaming table's files mostly have one from the conversion before. DVs the resolve
/// read (`already_read`, checked the same way) are not read again.
async fn read_existing_dvs(
    table: &LoadedTable,
    files: &TableFiles,
    live: &[(String, RoaringTreemap, &LiveFile)],
    parallelism: usize,
    (prefetched, already_read): (Option<&FooterPrefetch>, &ExistingDvs),
) -> Result<Vec<Option<RoaringTreemap>>> {
    let mut existing: Vec<Option<RoaringTreemap>> = vec![None; live.len()];
    let mut checks = Vec::new();
    let mut with_dv = Vec::new();
    for (i, (_, _, data)) in live.iter().enumerate() {
        let Some(check) = crate::current_dv::applicable(files, data) else {
            continue;
        };
        let check = check?;
        if let Some(read) = already_read.get(&crate::current_dv::blob_key(&check)) {
            existing[i] = Some(read.clone());
            continue;
        }
        checks.push(check);
        with_dv.push(i);
    }
    let read = crate::puffin::validate_dv_entries_prefetched(
        &table.file_io,
        &checks,
        parallelism,
        prefetched,
    )
    .await?;
    for (i, positions) in with_dv.into_iter().zip(read) {
        existing[i] = Some(positions);
    }
    Ok(existing)
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
    // A path the read did not find is a removed file only when every data file was
    // read; after a scoped read it may be a live file of another partition.
    let known_gone = |path: &str| !files.skipped_data.is_partial() && !live.contains(path);
    position_delete_files
        .iter()
        .zip(position_deletes)
        .filter(|(_, referenced)| {
            referenced
                .keys()
                .all(|path| new_dvs.contains(path.as_str()) || known_gone(path))
        })
        .map(|(delete, _)| delete.clone())
        .collect()
}
