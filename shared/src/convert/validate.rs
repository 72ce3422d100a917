//! Deciding, after a conflicting commit, whether the attempt may be rebased on the new
//! head (nothing it read or removes changed) or must be planned again.

use std::collections::{HashMap, HashSet};

use crate::plan::DeleteGroup;
use crate::table::{FileEntryKey, LiveFile, TableFiles};

/// What an attempt relied on, to validate a moved head against.
pub(super) struct AttemptFootprint {
    pub groups: Vec<DeleteGroup>,
    pub dv_targets: HashSet<String>,
    pub removed: Vec<LiveFile>,
}

/// Decides whether an attempt built on `base` may be committed on `head`.
///
/// Returns the removed entries as they are listed in `head` (manifests may have been
/// rewritten), or why the work must be planned again.
pub(super) fn validate(
    base: &TableFiles,
    head: &TableFiles,
    footprint: &AttemptFootprint,
) -> std::result::Result<Vec<LiveFile>, String> {
    // Every file we remove must still be live.
    let head_deletes: HashMap<FileEntryKey, &LiveFile> = head
        .equality_deletes
        .iter()
        .chain(head.dvs.values())
        .chain(&head.position_deletes)
        .map(|f| (f.entry_key(), f))
        .collect();
    let mut refreshed = Vec::with_capacity(footprint.removed.len());
    for removed in &footprint.removed {
        match head_deletes.get(&removed.entry_key()) {
            Some(f) => refreshed.push((*f).clone()),
            None => return Err(format!("delete file {} is no longer live", removed.path())),
        }
    }
    // Data files we write DVs for must still be live, and have no new DV.
    let head_data: HashSet<&str> = head.data_files.iter().map(|f| f.path()).collect();
    for target in &footprint.dv_targets {
        if !head_data.contains(target.as_str()) {
            return Err(format!("data file {target} was removed"));
        }
        let before = base.dvs.get(target).map(LiveFile::entry_key);
        let after = head.dvs.get(target).map(LiveFile::entry_key);
        if before != after {
            return Err(format!("data file {target} got a new deletion vector"));
        }
    }
    // New position delete files might cover our targets.
    let base_pos: HashSet<FileEntryKey> = base
        .position_deletes
        .iter()
        .map(LiveFile::entry_key)
        .collect();
    if let Some(added) = head
        .position_deletes
        .iter()
        .find(|f| !base_pos.contains(&f.entry_key()))
    {
        return Err(format!("position delete file {} was added", added.path()));
    }
    // A data file added with an old sequence number (a rewrite that kept sequence
    // numbers) in a group's scope would escape the deletes we remove.
    let base_data: HashSet<&str> = base.data_files.iter().map(|f| f.path()).collect();
    for data in &head.data_files {
        if base_data.contains(data.path()) {
            continue;
        }
        if let Some(group) = footprint.groups.iter().find(|g| g.may_apply_to(data)) {
            return Err(format!(
                "data file {} was added in scope of the equality deletes of {} with sequence number {} (below {})",
                data.path(),
                group.partition_label,
                data.data_sequence_number,
                group.max_sequence_number
            ));
        }
    }
    Ok(refreshed)
}
