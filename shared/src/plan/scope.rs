//! The scope of a plan's delete groups: the data they can touch (see
//! [`crate::table::DataScope`], which the live-file read prunes with).

use super::group::DeleteGroup;
use crate::partition::normalize_partition;
use crate::table::{DataScope, PartitionTarget};

impl DataScope {
    /// The data that `groups` may apply to. No groups need no data at all.
    pub fn of_groups(groups: &[DeleteGroup]) -> Self {
        if groups.iter().any(|g| g.global) {
            return Self::Everything;
        }
        let mut targets: Vec<PartitionTarget> = Vec::new();
        for group in groups {
            let partition = normalize_partition(&group.partition);
            // Groups of one partition that differ in equality ids share a target.
            match targets
                .iter_mut()
                .find(|t| t.spec_id == group.spec_id && t.partition == partition)
            {
                Some(target) => {
                    target.max_sequence_number =
                        target.max_sequence_number.max(group.max_sequence_number)
                }
                None => targets.push(PartitionTarget {
                    spec_id: group.spec_id,
                    partition,
                    max_sequence_number: group.max_sequence_number,
                }),
            }
        }
        Self::Partitions(targets)
    }
}

#[cfg(test)]
mod tests {
    use iceberg::spec::ManifestContentType;

    use super::*;

    #[test]
    fn no_groups_need_no_data() {
        let none = DataScope::of_groups(&[]);
        let manifest = iceberg::spec::ManifestFile {
            partition_spec_id: 0,
            sequence_number: 1,
            min_sequence_number: 1,
            ..crate::test_fixtures::manifest_file(ManifestContentType::Data)
        };
        assert!(!none.may_hold(&manifest));
        assert!(!none.is_everything());
    }
}
