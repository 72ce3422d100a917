//! Planning: which equality deletes are live, how they group, and how the work splits
//! into shards that converters can run independently.
//!
//! A group is the set of live equality delete files with the same equality field ids,
//! partition spec and partition tuple (or, for an unpartitioned spec, the global group
//! that applies to every partition). A shard is a set of whole partitions, so two shards
//! never write a DV for the same data file. A plan never reads data files.
//!
//! `partition` compares and renders partition tuples, `group` forms the delete groups,
//! `scope` decides which data manifests the groups' partitions need read, and `shard` holds the shard message, its stable id and the split that keeps it
//! under the queue's message size; this file bin-packs groups into a plan.

mod group;
mod partition;
mod scope;
mod shard;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::Result;
use crate::catalog::TableName;
use crate::table::{LoadedTable, SkippedData, TableFiles};

pub use group::{DeleteGroup, group_equality_deletes};
pub use partition::{normalize_partition, partition_as_type, partition_label, same_partition};
pub use scope::{DataScope, PartitionTarget};
pub use shard::{QUEUE_GROUPS, QUEUE_GROUPS_PROPERTY, Shard, ShardGroup, queue_groups_of};
use shard::{WHOLE_TABLE, queue_group_of, split_to_fit};

/// How to split work.
#[derive(Clone, Debug)]
pub struct PlanOptions {
    /// Bin-pack partitions into shards of about this many bytes of candidate data.
    pub target_shard_bytes: u64,
    /// The most bytes a shard may take as JSON (a queue message). A partition with more
    /// delete files than that holds is split into several shards of the same partitions,
    /// each converting some of its delete files: every equality delete file converts on
    /// its own, and the queue's message group (table + partitions) runs them in order.
    pub max_shard_json_bytes: usize,
    /// The queue groups of a table without the `eqdv.queue-groups` property (1 to
    /// [`QUEUE_GROUPS`]; see [`queue_groups_of`]).
    pub default_queue_groups: u64,
}

/// SQS's limit is 256 KiB per message; this leaves room for the message attributes.
pub const DEFAULT_MAX_SHARD_JSON_BYTES: usize = 240 * 1024;

impl Default for PlanOptions {
    fn default() -> Self {
        Self {
            target_shard_bytes: 512 * 1024 * 1024,
            max_shard_json_bytes: DEFAULT_MAX_SHARD_JSON_BYTES,
            default_queue_groups: QUEUE_GROUPS,
        }
    }
}

/// The plan for one table.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Plan {
    pub table: TableName,
    pub branch: String,
    pub base_snapshot_id: Option<i64>,
    pub equality_delete_files: usize,
    pub equality_delete_rows: u64,
    pub groups: usize,
    /// The data the plan did not need read (see [`read_for_plan`]).
    #[serde(default)]
    pub skipped_data: SkippedData,
    pub shards: Vec<Shard>,
}

/// Reads what a plan of `snapshot` needs: every delete file, and of the data only the
/// files its equality deletes may apply to (see [`DataScope`]).
pub async fn read_for_plan(
    table: &LoadedTable,
    snapshot: Option<&iceberg::spec::SnapshotRef>,
) -> Result<TableFiles> {
    let (files, ()) = TableFiles::read_scoped(table, snapshot, |files| {
        Ok((
            DataScope::of_groups(&group_equality_deletes(table, files)?),
            (),
        ))
    })
    .await?;
    Ok(files)
}

/// Plans the conversion of `files` (the head of `branch`, all of it or as
/// [`read_for_plan`] reads it).
pub fn plan(
    table: &LoadedTable,
    branch: &str,
    files: &TableFiles,
    options: &PlanOptions,
) -> Result<Plan> {
    let groups = group_equality_deletes(table, files)?;
    let queue_groups = queue_groups_of(table, options.default_queue_groups)?;
    let mut plan = Plan {
        table: table.name.clone(),
        branch: branch.to_string(),
        base_snapshot_id: files.snapshot_id,
        equality_delete_files: files.equality_deletes.len(),
        equality_delete_rows: groups.iter().map(DeleteGroup::delete_rows).sum(),
        groups: groups.len(),
        skipped_data: files.skipped_data,
        shards: Vec::new(),
    };
    let Some(base_snapshot_id) = files.snapshot_id else {
        return Ok(plan);
    };
    if groups.is_empty() {
        return Ok(plan);
    }

    // Work per partition: candidate data bytes plus the delete files themselves.
    // A global group touches every partition, so with one the whole table is one shard.
    let any_global = groups.iter().any(|g| g.global);
    let mut partitions: BTreeMap<String, (Vec<&DeleteGroup>, u64)> = BTreeMap::new();
    for group in &groups {
        let key = if any_global {
            WHOLE_TABLE.to_string()
        } else {
            format!("{}:{}", group.spec_id, group.partition_label)
        };
        let candidate_bytes: u64 = files
            .data_files
            .iter()
            .filter(|d| group.may_apply_to(d))
            .map(|d| d.file.file_size_in_bytes())
            .sum();
        let delete_bytes: u64 = group
            .delete_files
            .iter()
            .map(|f| f.file.file_size_in_bytes())
            .sum();
        let entry = partitions.entry(key).or_default();
        entry.0.push(group);
        entry.1 += candidate_bytes + delete_bytes;
    }

    // First-fit decreasing bin packing by estimated bytes, within each queue group (a
    // shard's partitions share one group): with one group, all of a commit's partitions
    // pack together up to the target.
    let mut items: Vec<(String, Vec<&DeleteGroup>, u64)> = partitions
        .into_iter()
        .map(|(k, (g, b))| (k, g, b))
        .collect();
    items.sort_by(|a, b| b.2.cmp(&a.2).then_with(|| a.0.cmp(&b.0)));
    let mut bins: Vec<(Vec<String>, Vec<&DeleteGroup>, u64, String)> = Vec::new();
    for (key, groups, bytes) in items {
        let group = queue_group_of(&key, queue_groups);
        let label = key;
        match bins
            .iter_mut()
            .find(|b| b.3 == group && b.2 + bytes <= options.target_shard_bytes)
        {
            Some(bin) => {
                bin.0.push(label);
                bin.1.extend(groups);
                bin.2 += bytes;
            }
            None => bins.push((vec![label], groups, bytes, group)),
        }
    }
    for (labels, groups, bytes, queue_group) in bins {
        let shard_groups: Vec<ShardGroup> = groups
            .iter()
            .map(|g| {
                let mut delete_files: Vec<String> = g
                    .delete_files
                    .iter()
                    .map(|f| f.path().to_string())
                    .collect();
                delete_files.sort();
                ShardGroup {
                    equality_ids: g.equality_ids.clone(),
                    spec_id: g.spec_id,
                    partition: g.partition_label.clone(),
                    delete_files,
                }
            })
            .collect();
        let shard = Shard::new(
            table.name.clone(),
            branch,
            base_snapshot_id,
            (labels, queue_group),
            shard_groups,
            bytes,
        );
        plan.shards
            .extend(split_to_fit(shard, options.max_shard_json_bytes)?);
    }
    Ok(plan)
}
