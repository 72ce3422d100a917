//! Delete groups: the live equality delete files that share equality ids, partition
//! spec and partition tuple, and which data files each group may apply to.

use std::collections::HashMap;

use iceberg::spec::{Struct, TableMetadata};

use crate::catalog::TableName;
use crate::partition::{normalize_partition, partition_label, same_partition};
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
    /// The rows the group's delete files state (saturating: the counts are another
    /// writer's).
    pub fn delete_rows(&self) -> u64 {
        self.delete_files
            .iter()
            .map(|f| f.file.record_count())
            .fold(0, u64::saturating_add)
    }

    /// Whether the group's deletes may apply to `data` (partition scope and sequence).
    pub fn may_apply_to(&self, data: &LiveFile) -> bool {
        data.data_sequence_number < self.max_sequence_number
            && (self.global
                || (data.spec_id == self.spec_id
                    && same_partition(data.file.partition(), &self.partition)))
    }
}

/// Groups the live equality deletes of `files`.
pub fn group_equality_deletes(table: &LoadedTable, files: &TableFiles) -> Result<Vec<DeleteGroup>> {
    group_files(&table.name, &table.metadata, files.equality_deletes.iter())
}

/// Groups equality delete files `deletes` of a table (live or not: a staging
/// application groups a staging snapshot's files to apply them to its target).
pub(crate) fn group_files<'a>(
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
