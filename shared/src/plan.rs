//! Planning: which equality deletes are live, how they group, and how the work splits
//! into shards that converters can run independently.
//!
//! A group is the set of live equality delete files with the same equality field ids,
//! partition spec and partition tuple (or, for an unpartitioned spec, the global group
//! that applies to every partition). A shard is a set of whole partitions, so two shards
//! never write a DV for the same data file. A plan never reads data files.

use std::collections::{BTreeMap, HashMap};

use iceberg::spec::{
    Literal, PartitionSpec, PrimitiveLiteral, PrimitiveType, Struct, StructType, TableMetadata,
    Type,
};
use ordered_float::OrderedFloat;
use serde::{Deserialize, Serialize};

use crate::catalog::TableName;
use crate::table::{LiveFile, LoadedTable, TableFiles};
use crate::{Error, Result};

/// Live equality delete files that share equality ids and partition scope.
#[derive(Clone, Debug)]
pub struct DeleteGroup {
    /// Equality field ids, sorted (the key is a set of columns).
    pub equality_ids: Vec<i32>,
    pub spec_id: i32,
    /// True when the spec is unpartitioned: the group applies to every partition.
    pub global: bool,
    pub partition: Struct,
    /// Human-readable partition, e.g. `region=eu/k0_bucket=3` (or `<global>`).
    pub partition_label: String,
    pub delete_files: Vec<LiveFile>,
    /// The highest data sequence number among the group's files.
    pub max_sequence_number: i64,
}

impl DeleteGroup {
    pub fn delete_rows(&self) -> u64 {
        self.delete_files
            .iter()
            .map(|f| f.file.record_count())
            .sum()
    }

    /// Whether the group's deletes may apply to `data` (partition scope and sequence).
    pub fn may_apply_to(&self, data: &LiveFile) -> bool {
        data.data_sequence_number < self.max_sequence_number
            && (self.global
                || (data.spec_id == self.spec_id
                    && same_partition(data.file.partition(), &self.partition)))
    }
}

/// A partition tuple with each value in its widest type: manifests written before a
/// partition source column was promoted (int to long, float to double) carry the old
/// type, later ones the new, and both name the same partition. The spec forbids
/// promotions that would change a partition value, so widening is exact.
pub fn normalize_partition(partition: &Struct) -> Struct {
    partition
        .iter()
        .map(|value| {
            value.map(|v| match v {
                Literal::Primitive(PrimitiveLiteral::Int(i)) => {
                    Literal::Primitive(PrimitiveLiteral::Long(i64::from(*i)))
                }
                Literal::Primitive(PrimitiveLiteral::Float(f)) => Literal::Primitive(
                    PrimitiveLiteral::Double(OrderedFloat(f64::from(f.into_inner()))),
                ),
                other => other.clone(),
            })
        })
        .collect()
}

/// `partition` with its values in the types of `partition_type` (a spec's partition type
/// under the schema a new manifest is written with): a tuple read from a manifest written
/// before a promotion carries ints where the writer now expects longs.
pub fn partition_as_type(partition: &Struct, partition_type: &StructType) -> Struct {
    partition
        .iter()
        .zip(partition_type.fields())
        .map(|(value, field)| {
            value.map(|v| match (v, field.field_type.as_ref()) {
                (
                    Literal::Primitive(PrimitiveLiteral::Int(i)),
                    Type::Primitive(PrimitiveType::Long),
                ) => Literal::Primitive(PrimitiveLiteral::Long(i64::from(*i))),
                (
                    Literal::Primitive(PrimitiveLiteral::Float(f)),
                    Type::Primitive(PrimitiveType::Double),
                ) => Literal::Primitive(PrimitiveLiteral::Double(OrderedFloat(f64::from(
                    f.into_inner(),
                )))),
                (other, _) => other.clone(),
            })
        })
        .collect()
}

/// Whether two partition tuples of the same spec hold the same values, compared as
/// values (see [`normalize_partition`]), not as the types their manifests wrote.
pub fn same_partition(a: &Struct, b: &Struct) -> bool {
    a == b || normalize_partition(a) == normalize_partition(b)
}

/// Renders a partition tuple as `name=value/...`.
pub fn partition_label(spec: &PartitionSpec, partition: &Struct) -> String {
    if spec.is_unpartitioned() {
        return "<global>".to_string();
    }
    spec.fields()
        .iter()
        .zip(partition.iter())
        .map(|(field, value)| {
            let value = match value {
                None => "null".to_string(),
                Some(Literal::Primitive(p)) => format!("{p:?}"),
                Some(other) => format!("{other:?}"),
            };
            format!("{}={value}", field.name)
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// Groups the live equality deletes of `files`.
pub fn group_equality_deletes(table: &LoadedTable, files: &TableFiles) -> Result<Vec<DeleteGroup>> {
    group_files(&table.name, &table.metadata, files.equality_deletes.iter())
}

fn group_files<'a>(
    table: &TableName,
    metadata: &TableMetadata,
    deletes: impl Iterator<Item = &'a LiveFile>,
) -> Result<Vec<DeleteGroup>> {
    let mut groups: HashMap<(Vec<i32>, i32, Struct), DeleteGroup> = HashMap::new();
    for file in deletes {
        let mut ids = file.file.equality_ids().unwrap_or_default();
        ids.sort_unstable();
        ids.dedup();
        if ids.is_empty() {
            return Err(Error::file(
                file.path(),
                format!("equality delete file of table {table} has no equality_ids"),
                "invalid manifest entry",
            ));
        }
        let spec =
            metadata
                .partition_spec_by_id(file.spec_id)
                .ok_or_else(|| Error::UnsupportedTable {
                    table: table.to_string(),
                    message: format!(
                        "delete file {} uses unknown partition spec {}",
                        file.path(),
                        file.spec_id
                    ),
                })?;
        let global = spec.is_unpartitioned();
        let partition = if global {
            Struct::empty()
        } else {
            normalize_partition(file.file.partition())
        };
        let key = (ids.clone(), file.spec_id, partition.clone());
        let group = groups.entry(key).or_insert_with(|| DeleteGroup {
            equality_ids: ids,
            spec_id: file.spec_id,
            global,
            partition_label: partition_label(spec, &partition),
            partition,
            delete_files: Vec::new(),
            max_sequence_number: i64::MIN,
        });
        group.max_sequence_number = group.max_sequence_number.max(file.data_sequence_number);
        group.delete_files.push(file.clone());
    }
    let mut groups: Vec<DeleteGroup> = groups.into_values().collect();
    groups.sort_by(|a, b| {
        (a.global, a.spec_id, &a.partition_label, &a.equality_ids).cmp(&(
            b.global,
            b.spec_id,
            &b.partition_label,
            &b.equality_ids,
        ))
    });
    Ok(groups)
}

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
    /// (one of [`QUEUE_GROUPS`] hash buckets), so that whatever plan a partition lands
    /// in, its shards queue in the same FIFO group and one partition is never converted
    /// twice at once. Empty when a global delete makes the whole table one shard (its
    /// group is then the table's `<table>` partition), and in shards from planners
    /// before this field existed.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub queue_group: String,
    pub groups: Vec<ShardGroup>,
    pub estimated_bytes: u64,
}

impl Shard {
    /// The delete files this shard converts.
    pub fn delete_files(&self) -> impl Iterator<Item = &str> {
        self.groups
            .iter()
            .flat_map(|g| g.delete_files.iter().map(String::as_str))
    }
}

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
}

/// Hash buckets a table's partitions are dealt into for the queue's message groups: at
/// most this many of one table's shards convert at once.
pub const QUEUE_GROUPS: u64 = 16;

/// The queue group of a partition key (`spec:label`, or `<table>` for a whole table).
fn queue_group_of(key: &str) -> String {
    if key == WHOLE_TABLE {
        return String::new();
    }
    format!("g{:02}", fnv1a(&[key]) % QUEUE_GROUPS)
}

/// The partition key of a table made one shard by a global delete.
const WHOLE_TABLE: &str = "<table>";

/// SQS's limit is 256 KiB per message; this leaves room for the message attributes.
pub const DEFAULT_MAX_SHARD_JSON_BYTES: usize = 240 * 1024;

impl Default for PlanOptions {
    fn default() -> Self {
        Self {
            target_shard_bytes: 512 * 1024 * 1024,
            max_shard_json_bytes: DEFAULT_MAX_SHARD_JSON_BYTES,
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
    pub shards: Vec<Shard>,
}

/// Plans the conversion of `files` (the head of `branch`).
pub fn plan(
    table: &LoadedTable,
    branch: &str,
    files: &TableFiles,
    options: &PlanOptions,
) -> Result<Plan> {
    let groups = group_equality_deletes(table, files)?;
    let mut plan = Plan {
        table: table.name.clone(),
        branch: branch.to_string(),
        base_snapshot_id: files.snapshot_id,
        equality_delete_files: files.equality_deletes.len(),
        equality_delete_rows: groups.iter().map(DeleteGroup::delete_rows).sum(),
        groups: groups.len(),
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
    // shard's partitions share one group).
    let mut items: Vec<(String, Vec<&DeleteGroup>, u64)> = partitions
        .into_iter()
        .map(|(k, (g, b))| (k, g, b))
        .collect();
    items.sort_by(|a, b| b.2.cmp(&a.2).then_with(|| a.0.cmp(&b.0)));
    let mut bins: Vec<(Vec<String>, Vec<&DeleteGroup>, u64, String)> = Vec::new();
    for (key, groups, bytes) in items {
        let group = queue_group_of(&key);
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

impl Shard {
    fn new(
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
fn split_to_fit(shard: Shard, max_bytes: usize) -> Result<Vec<Shard>> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn tuple(values: Vec<Option<PrimitiveLiteral>>) -> Struct {
        values
            .into_iter()
            .map(|v| v.map(Literal::Primitive))
            .collect()
    }

    #[test]
    fn partitions_compare_as_values_across_promotion() {
        use PrimitiveLiteral::*;
        // Written before and after `p` was promoted from int to long.
        let old = tuple(vec![Some(Int(7)), Some(String("eu".into())), None]);
        let new = tuple(vec![Some(Long(7)), Some(String("eu".into())), None]);
        assert!(same_partition(&old, &new));
        assert_eq!(normalize_partition(&old), normalize_partition(&new));
        let float = tuple(vec![Some(Float(OrderedFloat(1.5)))]);
        let double = tuple(vec![Some(Double(OrderedFloat(1.5)))]);
        assert!(same_partition(&float, &double));
        // Different values stay different; a null is no value.
        assert!(!same_partition(
            &old,
            &tuple(vec![Some(Long(8)), Some(String("eu".into())), None])
        ));
        assert!(!same_partition(
            &old,
            &tuple(vec![
                Some(Long(7)),
                Some(String("eu".into())),
                Some(Long(0))
            ])
        ));
        assert!(!same_partition(
            &tuple(vec![None]),
            &tuple(vec![Some(Long(0))])
        ));
    }
}
