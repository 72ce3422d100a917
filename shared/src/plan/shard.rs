//! Shards: the queue message a converter runs, its stable id (a hash of its delete
//! files and branch), its queue group, and the split of a shard too large for one
//! message.

use serde::{Deserialize, Serialize};

use crate::catalog::TableName;
use crate::table::LoadedTable;
use crate::{Error, Result};

/// One group as carried in a shard message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardGroup {
    pub equality_ids: Vec<i32>,
    pub spec_id: i32,
    pub partition: String,
    pub delete_files: Vec<String>,
}

/// A unit of conversion work: whole partitions of one table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    /// Stable id: a hash of the shard's delete file set (dedup id for queues).
    pub id: String,
    pub table: TableName,
    pub branch: String,
    /// The snapshot the plan was made on (the converter re-reads the head).
    pub base_snapshot_id: i64,
    /// Partitions covered, e.g. `region=eu`.
    pub partitions: Vec<String>,
    /// The queue's message group within the table: a function of the partition alone
    /// (its hash bucket among the table's [`queue_groups_of`]), so that whatever plan a
    /// partition lands in, its shards queue in the same FIFO group and one partition is
    /// never converted twice at once. Empty when a global delete makes the whole table
    /// one shard (its group is then the table's `<table>` partition), and in shards from
    /// planners before this field existed.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub queue_group: String,
    pub groups: Vec<ShardGroup>,
    pub estimated_bytes: u64,
    /// The staging mode (see [`crate::staging`]): the staging branch whose pending
    /// snapshots this shard applies to `branch` (it has no groups then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub staging_branch: Option<String>,
}

impl Shard {
    /// The delete files this shard converts.
    pub fn delete_files(&self) -> impl Iterator<Item = &str> {
        self.groups
            .iter()
            .flat_map(|g| g.delete_files.iter().map(String::as_str))
    }
}

/// Hash buckets a table's partitions are dealt into for the queue's message groups, by
/// default and at most: at most this many of one table's shards convert at once.
pub const QUEUE_GROUPS: u64 = 16;

/// The table property that deals the table's partitions into fewer message groups
/// (1 to [`QUEUE_GROUPS`]). Fewer groups let the planner pack more of a commit's
/// partitions into one shard (one invocation instead of one per group touched), at the
/// price of fewer of the table's shards converting at once.
pub const QUEUE_GROUPS_PROPERTY: &str = "eqdv.queue-groups";

/// The number of message groups `table` is dealt into: [`QUEUE_GROUPS_PROPERTY`], or
/// `default` (the deployment's, [`QUEUE_GROUPS`] unless set) when unset. A value that
/// is not a whole number from 1 to [`QUEUE_GROUPS`] is refused (it is eqdv's own
/// setting, so a typo must not silently turn into another layout of the queue).
pub fn queue_groups_of(table: &LoadedTable, default: u64) -> Result<u64> {
    let Some(raw) = table.metadata.properties().get(QUEUE_GROUPS_PROPERTY) else {
        return Ok(default.clamp(1, QUEUE_GROUPS));
    };
    match raw.trim().parse::<u64>() {
        Ok(n) if (1..=QUEUE_GROUPS).contains(&n) => Ok(n),
        _ => Err(Error::UnsupportedTable {
            table: table.name.to_string(),
            message: format!(
                "table property {QUEUE_GROUPS_PROPERTY} is {raw:?}: it must be a whole number from 1 to {QUEUE_GROUPS}"
            ),
        }),
    }
}

/// The queue group of a partition key (`spec:label`, or `<table>` for a whole table)
/// when the table's partitions are dealt into `groups` buckets. With the default 16 the
/// buckets are those of planners before the property existed.
pub(super) fn queue_group_of(key: &str, groups: u64) -> String {
    if key == WHOLE_TABLE {
        return String::new();
    }
    format!("g{:02}", fnv1a(&[key]) % groups.clamp(1, QUEUE_GROUPS))
}

/// The queue group of the partition labelled `label` (see [`crate::partition::partition_label`])
/// of partition spec `spec_id`, when the table's partitions are dealt into `groups`.
pub fn partition_queue_group(spec_id: i32, label: &str, groups: u64) -> String {
    queue_group_of(&format!("{spec_id}:{label}"), groups)
}

/// The partition key of a table made one shard by a global delete.
pub(super) const WHOLE_TABLE: &str = "<table>";

impl Shard {
    pub(super) fn new(
        table: TableName,
        branch: &str,
        base_snapshot_id: i64,
        (partitions, queue_group): (Vec<String>, String),
        groups: Vec<ShardGroup>,
        estimated_bytes: u64,
    ) -> Self {
        let mut all_files: Vec<&str> = groups
            .iter()
            .flat_map(|g| g.delete_files.iter().map(String::as_str))
            .collect();
        all_files.sort_unstable();
        // The branch is part of the identity: the same delete files converted on two
        // branches are two pieces of work (and two queue messages).
        let mut identity = vec![branch];
        identity.extend(all_files);
        Self {
            id: stable_hash(&identity),
            table,
            branch: branch.to_string(),
            base_snapshot_id,
            partitions,
            queue_group,
            groups,
            estimated_bytes,
            staging_branch: None,
        }
    }

    /// A shard that applies the snapshots of `staging_branch` up to `staging_head` to
    /// `branch` (whose head is `base_snapshot_id`, 0 when it does not exist yet). It
    /// queues in the table's whole-table message group, so a table's applications (and
    /// any conversion of all of it) run one at a time; its id names the staging head, so
    /// a redelivered event for the same head is deduplicated.
    pub fn staging(
        table: TableName,
        branch: &str,
        staging_branch: &str,
        base_snapshot_id: i64,
        staging_head: i64,
    ) -> Self {
        let head = staging_head.to_string();
        Self {
            id: stable_hash(&[branch, "staging", staging_branch, &head]),
            table,
            branch: branch.to_string(),
            base_snapshot_id,
            partitions: vec![WHOLE_TABLE.to_string()],
            queue_group: String::new(),
            groups: Vec::new(),
            estimated_bytes: 0,
            staging_branch: Some(staging_branch.to_string()),
        }
    }

    /// The shard as the JSON a queue message carries.
    pub fn to_json(&self) -> Result<String> {
        serde_json::to_string(self)
            .map_err(|e| Error::InvalidInput(format!("shard {} does not serialize: {e}", self.id)))
    }
}

/// Splits `shard` into shards of the same partitions whose JSON fits `max_bytes`, by
/// dealing its delete files out in order (the estimated bytes are shared in proportion).
pub(super) fn split_to_fit(shard: Shard, max_bytes: usize) -> Result<Vec<Shard>> {
    if shard.to_json()?.len() <= max_bytes {
        return Ok(vec![shard]);
    }
    let total_files = shard.delete_files().count().max(1) as u64;
    // What a shard costs without any file path: the frame plus each group's fields.
    let frame = Shard {
        groups: Vec::new(),
        ..shard.clone()
    }
    .to_json()?
    .len();
    // A group's fields without paths, and a path at its escaped JSON length (a string
    // may grow when escaped), each plus a separating comma.
    let json_len = |json: serde_json::Result<String>| {
        json.map(|j| j.len() + 1)
            .map_err(|e| Error::InvalidInput(format!("shard {} does not serialize: {e}", shard.id)))
    };

    let mut chunks: Vec<Vec<ShardGroup>> = Vec::new();
    let mut current: Vec<ShardGroup> = Vec::new();
    // The index (in `shard.groups`) of the group `current`'s last entry was cut from.
    let mut open_group: Option<usize> = None;
    let mut size = frame;
    for (index, group) in shard.groups.iter().enumerate() {
        let empty_group = ShardGroup {
            delete_files: Vec::new(),
            ..group.clone()
        };
        let group_cost = json_len(serde_json::to_string(&empty_group))?;
        for path in &group.delete_files {
            let path_cost = json_len(serde_json::to_string(path))?;
            let fresh = path_cost + group_cost;
            if frame + fresh > max_bytes {
                return Err(Error::InvalidInput(format!(
                    "delete file {path} of table {} does not fit a shard message of {max_bytes} bytes",
                    shard.table
                )));
            }
            let mut cost = if open_group == Some(index) {
                path_cost
            } else {
                fresh
            };
            if size + cost > max_bytes {
                chunks.push(std::mem::take(&mut current));
                size = frame;
                open_group = None;
                cost = fresh;
            }
            if open_group != Some(index) {
                current.push(empty_group.clone());
                open_group = Some(index);
            }
            size += cost;
            if let Some(last) = current.last_mut() {
                last.delete_files.push(path.clone());
            }
        }
    }
    if !current.is_empty() {
        chunks.push(current);
    }
    let shards: Vec<Shard> = chunks
        .into_iter()
        .map(|groups| {
            let files = groups
                .iter()
                .map(|g| g.delete_files.len() as u64)
                .sum::<u64>();
            Shard::new(
                shard.table.clone(),
                &shard.branch,
                shard.base_snapshot_id,
                (shard.partitions.clone(), shard.queue_group.clone()),
                groups,
                shard.estimated_bytes.saturating_mul(files) / total_files,
            )
        })
        .collect();
    for s in &shards {
        let len = s.to_json()?.len();
        if len > max_bytes {
            return Err(Error::InvalidInput(format!(
                "shard {} of table {} is {len} bytes after splitting, over {max_bytes}",
                s.id, s.table
            )));
        }
    }
    Ok(shards)
}

/// FNV-1a over the sorted file list: stable across processes and releases.
fn stable_hash(files: &[&str]) -> String {
    format!("{:016x}", fnv1a(files))
}

/// FNV-1a over NUL-terminated strings.
fn fnv1a(parts: &[&str]) -> u64 {
    let mut hash: u64 = 0xcbf29ce484222325;
    for f in parts {
        for b in f.as_bytes().iter().chain(std::iter::once(&0u8)) {
            hash ^= u64::from(*b);
            hash = hash.wrapping_mul(0x100000001b3);
        }
    }
    hash
}
