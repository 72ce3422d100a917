//! The parts of an index: a partitioned table's index is kept in parts, one per queue
//! group of its partitions (as many as the table's queue groups, see
//! [`crate::plan::queue_groups_of`]), each named by its own table property. A shard
//! (whose partitions all share one queue group) opens and updates one part only, so the
//! shards of one table that convert at once (one per queue group) never update the same
//! pointer, and none reads the coverage of the others' partitions. Data files of an
//! unpartitioned spec, and every file of an unpartitioned table or of one with a single
//! queue group, are in the whole-table part, named by the property without a suffix
//! (the only part of indexes written before parts existed).

use iceberg::spec::TableMetadata;

use super::LOCATION_PROPERTY_PREFIX;
use crate::partition::{normalize_partition, partition_label};
use crate::plan::DeleteGroup;
use crate::table::LiveFile;

/// One index: of an equality field set, one part.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IndexKey {
    /// Sorted, as a delete group's.
    pub equality_ids: Vec<i32>,
    /// The queue group of its partitions (`g05`), or empty for the whole-table part.
    pub part: String,
}

impl IndexKey {
    /// The whole-table part of `equality_ids` (an unpartitioned table's index).
    pub fn whole(equality_ids: &[i32]) -> Self {
        Self {
            equality_ids: equality_ids.to_vec(),
            part: String::new(),
        }
    }

    /// The table property naming this index: `eqdv.key-index.location.<ids>`, with
    /// `.<part>` after the ids for a partitioned part (`eqdv.key-index.location.1,3.g05`).
    pub fn property(&self) -> String {
        let ids: Vec<String> = self.equality_ids.iter().map(i32::to_string).collect();
        let mut property = format!("{LOCATION_PROPERTY_PREFIX}{}", ids.join(","));
        if !self.part.is_empty() {
            property.push('.');
            property.push_str(&self.part);
        }
        property
    }

    /// The index a table property names, if it names one.
    pub fn from_property(property: &str) -> Option<Self> {
        let rest = property.strip_prefix(LOCATION_PROPERTY_PREFIX)?;
        let (ids, part) = match rest.split_once('.') {
            Some((ids, part)) if is_part(part) => (ids, part),
            Some(_) => return None,
            None => (rest, ""),
        };
        let equality_ids: Vec<i32> = ids
            .split(',')
            .map(|s| s.trim().parse().ok())
            .collect::<Option<_>>()?;
        (!equality_ids.is_empty()).then(|| Self {
            equality_ids,
            part: part.to_string(),
        })
    }

    /// Whether `group`'s keys are looked up in this index when the table's index is in
    /// `parts` parts: one of its field set, and the part of the group's partition (every
    /// part, for a delete of an unpartitioned spec, which applies to every partition).
    pub fn serves(&self, group: &DeleteGroup, parts: u64) -> bool {
        self.equality_ids == group.equality_ids
            && self.is_part_of(parts)
            && part_of_group(group, parts).is_none_or(|part| part == self.part)
    }

    /// Whether this part is one of an index in `parts` parts (`g00` to the last, or the
    /// whole-table part).
    pub fn is_part_of(&self, parts: u64) -> bool {
        self.part.is_empty()
            || (parts > 1
                && self
                    .part
                    .strip_prefix('g')
                    .and_then(|n| n.parse::<u64>().ok())
                    .is_some_and(|n| n < parts))
    }

    /// For logs and reports: `[1, 3]`, or `[1, 3] part g05`.
    pub fn describe(&self) -> String {
        if self.part.is_empty() {
            format!("{:?}", self.equality_ids)
        } else {
            format!("{:?} part {}", self.equality_ids, self.part)
        }
    }
}

/// Whether `s` is a part's name: `g` and two digits.
fn is_part(s: &str) -> bool {
    s.len() == 3 && s.starts_with('g') && s[1..].bytes().all(|b| b.is_ascii_digit())
}

/// The part holding data file `data` when the table's index is in `parts` parts: the
/// queue group of its partition, or the whole-table part for a file of an unpartitioned
/// (or unknown) spec, and for every file when there is one part.
pub fn part_of_file(metadata: &TableMetadata, parts: u64, data: &LiveFile) -> String {
    match metadata.partition_spec_by_id(data.spec_id) {
        Some(spec) if parts > 1 && !spec.is_unpartitioned() => {
            let label = partition_label(spec, &normalize_partition(data.file.partition()));
            crate::plan::partition_queue_group(data.spec_id, &label, parts)
        }
        _ => String::new(),
    }
}

/// The part a delete group's candidates are in (the data files of its partition) when
/// the table's index is in `parts` parts, or `None` when it applies to every partition.
pub fn part_of_group(group: &DeleteGroup, parts: u64) -> Option<String> {
    if parts <= 1 {
        return Some(String::new());
    }
    (!group.global)
        .then(|| crate::plan::partition_queue_group(group.spec_id, &group.partition_label, parts))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn properties_name_their_part() {
        let whole = IndexKey::whole(&[1, 3]);
        assert_eq!(whole.property(), "eqdv.key-index.location.1,3");
        assert_eq!(IndexKey::from_property(&whole.property()), Some(whole));
        let part = IndexKey {
            equality_ids: vec![2],
            part: "g05".into(),
        };
        assert_eq!(part.property(), "eqdv.key-index.location.2.g05");
        assert_eq!(
            IndexKey::from_property(&part.property()),
            Some(part.clone())
        );
        assert!(part.is_part_of(16) && part.is_part_of(6) && !part.is_part_of(5));
        assert!(!part.is_part_of(1));
        assert!(IndexKey::whole(&[2]).is_part_of(1));
        for not_an_index in [
            "eqdv.key-index.location.",
            "eqdv.key-index.location.1.x",
            "eqdv.key-index.location.1.g5",
            "eqdv.key-index.location.a",
            "eqdv.key-index.enabled",
        ] {
            assert_eq!(
                IndexKey::from_property(not_an_index),
                None,
                "{not_an_index}"
            );
        }
    }
}
