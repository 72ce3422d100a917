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
mod scope;
mod shard;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::Result;
use crate::catalog::TableName;
use crate::summary_keys::TOTAL_FILES_SIZE_PROPERTY;
use crate::table::{LoadedTable, SkippedData, TableFiles};

pub use crate::table::{DataScope, PartitionTarget};
pub(crate) use group::group_files;
pub use group::{DeleteGroup, group_equality_deletes};
pub use shard::{
    QUEUE_GROUPS, QUEUE_GROUPS_PROPERTY, Shard, ShardGroup, partition_queue_group, queue_groups_of,
};
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
    /// A table whose head's snapshot summary puts all its files (`total-files-size`) at
    /// no more than this many bytes, and no more than `target_shard_bytes`, is planned by
    /// [`plan_head`] from its delete manifests alone: whatever its data, every plan of it
    /// packs each queue group's partitions into one shard, so its data manifests (most
    /// of a streaming table's) need not be read. Each shard is then estimated at the
    /// table's size, an upper bound. 0 (the default) always reads them; the planner
    /// sets the size under which it does not split a shard.
    pub small_table_bytes: u64,
}

/// SQS's limit is 256 KiB per message; this leaves room for the message attributes.
pub const DEFAULT_MAX_SHARD_JSON_BYTES: usize = 240 * 1024;

impl Default for PlanOptions {
    fn default() -> Self {
        Self {
            target_shard_bytes: 512 * 1024 * 1024,
            max_shard_json_bytes: DEFAULT_MAX_SHARD_JSON_BYTES,
            default_queue_groups: QUEUE_GROUPS,
            small_table_bytes: 0,
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

/// The size of `snapshot`'s files by its summary, when that is at most what
/// [`PlanOptions::small_table_bytes`] plans from the delete manifests alone.
fn small_table_size(snapshot: &iceberg::spec::SnapshotRef, options: &PlanOptions) -> Option<u64> {
    let limit = options.small_table_bytes.min(options.target_shard_bytes);
    let total = snapshot
        .summary()
        .additional_properties
        .get(TOTAL_FILES_SIZE_PROPERTY)?
        .trim()
        .parse::<u64>()
        .ok()?;
    (limit > 0 && total <= limit).then_some(total)
}

/// Plans the head of `branch`: what [`read_for_plan`] reads, then [`plan`]. A table
/// small enough by its summary (see [`PlanOptions::small_table_bytes`]) is read without
/// its data manifests; a summary that understates the size costs only the balance of
/// the shards, never what they convert (a converter reads the table itself).
pub async fn plan_head(table: &LoadedTable, branch: &str, options: &PlanOptions) -> Result<Plan> {
    let head = table.head(branch)?;
    let small = head.as_ref().and_then(|h| small_table_size(h, options));
    let files = match (&head, small) {
        (Some(head), Some(_)) => {
            TableFiles::read_deletes_only(table, head, |_| Ok(()))
                .await?
                .0
        }
        _ => read_for_plan(table, head.as_ref()).await?,
    };
    let mut plan = plan(table, branch, &files, options)?;
    if let Some(size) = small {
        for shard in &mut plan.shards {
            shard.estimated_bytes = size;
        }
    }
    Ok(plan)
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
        equality_delete_rows: groups
            .iter()
            .map(DeleteGroup::delete_rows)
            .fold(0, u64::saturating_add),
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
            .fold(0, u64::saturating_add);
        let delete_bytes: u64 = group
            .delete_files
            .iter()
            .map(|f| f.file.file_size_in_bytes())
            .fold(0, u64::saturating_add);
        let entry = partitions.entry(key).or_default();
        entry.0.push(group);
        // Sizes from manifests: saturating, so that a hostile one cannot wrap a total.
        entry.1 = entry
            .1
            .saturating_add(candidate_bytes.saturating_add(delete_bytes));
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
            .find(|b| b.3 == group && b.2.saturating_add(bytes) <= options.target_shard_bytes)
        {
            Some(bin) => {
                bin.0.push(label);
                bin.1.extend(groups);
                bin.2 = bin.2.saturating_add(bytes);
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
