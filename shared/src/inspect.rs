//! What a table holds, for operators: data files, live equality deletes, DVs and v2
//! position deletes, per partition. Read-only.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use crate::Result;
use crate::partition::partition_label;
use crate::table::{LiveFile, LoadedTable, TableFiles};

/// Per-partition counts.
#[derive(Clone, Debug, Default, Serialize)]
pub struct PartitionCounts {
    pub data_files: u64,
    pub records: u64,
    pub equality_delete_files: u64,
    pub equality_deletes: u64,
    pub dvs: u64,
    pub dv_positions: u64,
    pub position_delete_files: u64,
}

/// A table's state at a branch head.
#[derive(Clone, Debug, Serialize)]
pub struct Inspection {
    pub table: String,
    pub branch: String,
    pub format_version: String,
    pub snapshot_id: Option<i64>,
    pub sequence_number: Option<i64>,
    pub operation: Option<String>,
    pub totals: PartitionCounts,
    /// Keyed by `spec-id:partition` (`<global>` for unpartitioned specs).
    pub partitions: BTreeMap<String, PartitionCounts>,
    pub summary: HashMap<String, String>,
    /// The key indexes the table names (see [`crate::key_index`]), with their delta
    /// and dead files against this head.
    pub key_indexes: Vec<crate::key_index::IndexSummary>,
    /// For a table in the staging mode (property `eqdv.staging-branch`): how far this
    /// branch is behind its staging branch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub staging: Option<StagingState>,
}

/// How far a branch is behind the staging branch it is applied from.
#[derive(Clone, Debug, Serialize)]
pub struct StagingState {
    pub staging_branch: String,
    /// The staging snapshot the branch reflects.
    pub applied: Option<i64>,
    /// The lag (`None` when the history cannot be applied: see `problem`).
    pub lag: Option<crate::staging::StagingLag>,
    /// Why the staging branch cannot be applied, when it cannot.
    pub problem: Option<String>,
}

/// The staging state of `branch`, when the table's property names a staging branch.
fn staging_state(table: &LoadedTable, branch: &str) -> Option<StagingState> {
    let staging_branch = crate::staging::staging_branch_of(table.metadata.properties(), branch)?;
    let table_name = table.name.to_string();
    let branches = crate::staging::Branches {
        table: &table_name,
        staging: &staging_branch,
        target: branch,
    };
    Some(match crate::staging::standing(&table.metadata, branches) {
        Ok(standing) => StagingState {
            staging_branch,
            applied: standing.applied,
            lag: Some(crate::staging::StagingLag::of(&standing)),
            problem: None,
        },
        Err(e) => StagingState {
            staging_branch,
            applied: None,
            lag: None,
            problem: Some(e.to_string()),
        },
    })
}

/// Inspects the head of `branch`.
pub async fn inspect(table: &LoadedTable, branch: &str) -> Result<Inspection> {
    let head = table.head(branch)?;
    let files = TableFiles::read(table, head.as_ref()).await?;
    let mut inspection = Inspection {
        table: table.name.to_string(),
        branch: branch.to_string(),
        format_version: table.metadata.format_version().to_string(),
        snapshot_id: head.as_ref().map(|s| s.snapshot_id()),
        sequence_number: head.as_ref().map(|s| s.sequence_number()),
        operation: head
            .as_ref()
            .map(|s| s.summary().operation.as_str().to_string()),
        totals: PartitionCounts::default(),
        partitions: BTreeMap::new(),
        summary: head
            .as_ref()
            .map(|s| s.summary().additional_properties.clone())
            .unwrap_or_default(),
        key_indexes: crate::key_index::summaries(table, Some(&files)).await,
        staging: staging_state(table, branch),
    };
    let label = |f: &LiveFile| -> String {
        match table.metadata.partition_spec_by_id(f.spec_id) {
            Some(spec) => format!(
                "{}:{}",
                f.spec_id,
                partition_label(spec, f.file.partition())
            ),
            None => format!("{}:?", f.spec_id),
        }
    };
    let mut add = |f: &LiveFile, apply: &dyn Fn(&mut PartitionCounts)| {
        apply(&mut inspection.totals);
        apply(inspection.partitions.entry(label(f)).or_default());
    };
    for f in &files.data_files {
        let n = f.file.record_count();
        add(f, &|c| {
            c.data_files += 1;
            c.records += n;
        });
    }
    for f in &files.equality_deletes {
        let n = f.file.record_count();
        add(f, &|c| {
            c.equality_delete_files += 1;
            c.equality_deletes += n;
        });
    }
    for f in files.dvs.values() {
        let n = f.file.record_count();
        add(f, &|c| {
            c.dvs += 1;
            c.dv_positions += n;
        });
    }
    for f in &files.position_deletes {
        add(f, &|c| c.position_delete_files += 1);
    }
    Ok(inspection)
}
