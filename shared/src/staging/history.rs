//! Which snapshots of a staging branch its target branch has not applied yet.
//!
//! The target's own history says where it stands: each snapshot eqdv commits to it
//! records the staging snapshot it reflects (summary `eqdv.staging-snapshot-id`). The
//! pending snapshots are the staging branch's ancestors after that one, oldest first.
//! Before the first application the target stands where the two branches share history
//! (the staging branch was made from the target), or nowhere when it does not exist yet.
//! Whatever cannot be told from the metadata (a recorded snapshot no longer among the
//! staging branch's ancestors, an ancestry cut by expiry) is refused, never guessed.

use std::collections::HashSet;

use iceberg::spec::{SnapshotRef, TableMetadata};

use super::{STAGING_BRANCH_PROPERTY, STAGING_SNAPSHOT_PROPERTY};
use crate::{Error, Result};

/// Where a target branch stands against its staging branch.
#[derive(Clone, Debug)]
pub struct Standing {
    /// The target's head (`None`: the branch does not exist yet).
    pub target_head: Option<SnapshotRef>,
    /// The staging snapshot the target reflects, as its newest eqdv snapshot records.
    pub applied: Option<i64>,
    /// Staging snapshots not applied yet, oldest first.
    pub pending: Vec<SnapshotRef>,
}

/// The branches of one staging application, and the table they belong to.
#[derive(Clone, Copy, Debug)]
pub struct Branches<'a> {
    pub table: &'a str,
    pub staging: &'a str,
    pub target: &'a str,
}

impl Branches<'_> {
    pub(super) fn diverged(&self, snapshot_id: Option<i64>, message: impl Into<String>) -> Error {
        Error::StagingDiverged {
            table: self.table.to_string(),
            staging_branch: self.staging.to_string(),
            target_branch: self.target.to_string(),
            snapshot_id,
            message: message.into(),
        }
    }
}

/// Where `branches.target` stands against `branches.staging` in `metadata`.
pub fn standing(metadata: &TableMetadata, branches: Branches<'_>) -> Result<Standing> {
    if branches.staging == branches.target {
        return Err(Error::InvalidInput(format!(
            "the staging branch and the target branch are both '{}'",
            branches.target
        )));
    }
    let Some(staging_head) = metadata.snapshot_for_ref(branches.staging).cloned() else {
        return Err(Error::UnsupportedTable {
            table: branches.table.to_string(),
            message: format!("staging branch '{}' does not exist", branches.staging),
        });
    };
    let target_head = metadata.snapshot_for_ref(branches.target).cloned();

    // The target's ancestors (as far as they are kept, and the id of the first one
    // expired), and the staging snapshot its newest eqdv application recorded.
    let mut target_ancestors = HashSet::new();
    let mut applied = None;
    let mut cut_by_expiry = false;
    let mut oldest_kept_sequence = i64::MAX;
    let mut next = target_head.clone();
    while let Some(snapshot) = next {
        target_ancestors.insert(snapshot.snapshot_id());
        oldest_kept_sequence = snapshot.sequence_number();
        if applied.is_none() {
            applied = recorded_staging_snapshot(&snapshot, branches)?;
        }
        next = match snapshot.parent_snapshot_id() {
            None => None,
            Some(parent) => {
                let kept = metadata.snapshot_by_id(parent).cloned();
                if kept.is_none() {
                    target_ancestors.insert(parent);
                    cut_by_expiry = true;
                }
                kept
            }
        };
    }
    // An application whose snapshot an expiry removed (a foreign commit came after it,
    // then only the newest snapshots were kept): the table property it set says which
    // staging snapshot it applied, and at which sequence number, older than every kept
    // ancestor (a rolled-back target has kept ancestors older than it: not trusted).
    if applied.is_none() && cut_by_expiry {
        applied = recorded_in_properties(metadata, branches)
            .filter(|r| r.sequence_number < oldest_kept_sequence)
            .map(|r| r.staging_snapshot_id);
    }

    // The staging ancestors back to where the target stands.
    let mut pending = Vec::new();
    let mut next = Some(staging_head);
    while let Some(snapshot) = next {
        let id = snapshot.snapshot_id();
        match applied {
            Some(applied) if applied == id => return Ok(done(target_head, Some(id), pending)),
            None if target_ancestors.contains(&id) => {
                return Ok(done(target_head, None, pending));
            }
            _ => {}
        }
        let parent = snapshot.parent_snapshot_id();
        pending.push(snapshot);
        next = match parent {
            None => None,
            Some(parent_id) => match metadata.snapshot_by_id(parent_id) {
                Some(parent) => Some(parent.clone()),
                // Expired once applied (or shared with the target): where it stands.
                None if applied == Some(parent_id)
                    || (applied.is_none() && target_ancestors.contains(&parent_id)) =>
                {
                    return Ok(done(target_head, applied, pending));
                }
                None => {
                    return Err(branches.diverged(
                        Some(id),
                        format!(
                            "its parent {parent_id} is expired, and branch '{}' has not applied \
                             it: the staging history between them is lost (expire the staging \
                             branch's snapshots only once the target applied them)",
                            branches.target
                        ),
                    ));
                }
            },
        };
    }
    // The staging branch's whole history, and the target stands on none of it.
    if let Some(applied) = applied {
        return Err(branches.diverged(
            None,
            format!(
                "branch '{}' reflects staging snapshot {applied}, which is no longer an \
                 ancestor of the staging branch's head: the staging branch was rolled back or \
                 replaced",
                branches.target
            ),
        ));
    }
    if target_head.is_some() {
        return Err(branches.diverged(
            None,
            format!(
                "branch '{}' shares no snapshot with the staging branch and reflects none of \
                 its snapshots: make the staging branch from the target branch's head",
                branches.target
            ),
        ));
    }
    Ok(done(None, None, pending))
}

fn done(
    target_head: Option<SnapshotRef>,
    applied: Option<i64>,
    mut pending: Vec<SnapshotRef>,
) -> Standing {
    pending.reverse();
    Standing {
        target_head,
        applied,
        pending,
    }
}

/// What the table property [`applied_property`] records of the target's newest
/// application.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RecordedApplication {
    pub staging_branch: String,
    pub staging_snapshot_id: i64,
    /// The sequence number of the target snapshot that applied it.
    pub sequence_number: i64,
}

/// The table property that records a target branch's newest application (besides its
/// snapshot's summary, which an expiry may remove).
pub fn applied_property(target: &str) -> String {
    format!("eqdv.staging-applied.{target}")
}

fn recorded_in_properties(
    metadata: &TableMetadata,
    branches: Branches<'_>,
) -> Option<RecordedApplication> {
    let value = metadata
        .properties()
        .get(&applied_property(branches.target))?;
    let recorded: RecordedApplication = serde_json::from_str(value).ok()?;
    (recorded.staging_branch == branches.staging).then_some(recorded)
}

/// The staging snapshot `snapshot` (of the target) records applying from
/// `branches.staging`, if it is one of eqdv's applications from that branch.
fn recorded_staging_snapshot(
    snapshot: &SnapshotRef,
    branches: Branches<'_>,
) -> Result<Option<i64>> {
    let summary = &snapshot.summary().additional_properties;
    let Some(value) = summary.get(STAGING_SNAPSHOT_PROPERTY) else {
        return Ok(None);
    };
    if summary.get(STAGING_BRANCH_PROPERTY).map(String::as_str) != Some(branches.staging) {
        return Ok(None);
    }
    value.parse::<i64>().map(Some).map_err(|_| {
        branches.diverged(
            None,
            format!(
                "snapshot {} of branch '{}' records staging snapshot '{value}', which is not a \
                 snapshot id",
                snapshot.snapshot_id(),
                branches.target
            ),
        )
    })
}

#[cfg(test)]
#[path = "history_tests.rs"]
mod tests;
