//! The data a set of delete groups can touch, and which data manifests may hold it
//! (the plan builds it from its groups: `DataScope::of_groups`).
//!
//! An equality delete applies to a data file only when the file is older (a lower data
//! sequence number) and, unless the delete's spec is unpartitioned, has the same spec
//! and partition tuple. So a conversion of partitioned groups needs only the data files
//! of their partitions: a data manifest of another spec, one whose partition summary
//! rules out every group's tuple, or one holding only files as new as the groups, can
//! be skipped without being read. On a table of a million files whose deletes land in a
//! few partitions, that is most of the manifests.
//!
//! Pruning here only ever skips what provably cannot match: a bound that is missing or
//! cannot be decoded, a value of a type not compared here, or a global group means the
//! manifest is read.

use iceberg::spec::{
    DataContentType, FieldSummary, Literal, ManifestContentType, ManifestEntry, ManifestFile,
    ManifestStatus, PrimitiveLiteral, Struct,
};

use crate::manifest_decode::EntryHead;
#[cfg(doc)]
use crate::partition::normalize_partition;
use crate::partition::same_partition;

/// The data files a conversion needs.
#[derive(Clone, Debug, PartialEq)]
pub enum DataScope {
    /// Every data file (a global group applies to every partition).
    Everything,
    /// Only data files older than a group of the same spec and partition tuple.
    Partitions(Vec<PartitionTarget>),
}

/// One group's partition as far as pruning is concerned.
#[derive(Clone, Debug, PartialEq)]
pub struct PartitionTarget {
    pub spec_id: i32,
    /// The tuple in its widest types (see [`normalize_partition`]).
    pub partition: Struct,
    /// Data files at or above this data sequence number are too new for the group.
    pub max_sequence_number: i64,
}

impl DataScope {
    pub fn is_everything(&self) -> bool {
        matches!(self, Self::Everything)
    }

    /// Whether `manifest` may list a data file in scope. Delete manifests are always
    /// read (their DVs, equality and position deletes are what a conversion merges,
    /// removes and validates against), so this is only asked of data manifests.
    pub fn may_hold(&self, manifest: &ManifestFile) -> bool {
        let targets = match self {
            Self::Everything => return true,
            Self::Partitions(targets) => targets,
        };
        if manifest.content != ManifestContentType::Data {
            return true;
        }
        targets.iter().any(|target| {
            target.spec_id == manifest.partition_spec_id
                // The manifest's oldest live file is as new as the group's deletes.
                && manifest.min_sequence_number < target.max_sequence_number
                && summaries_admit(manifest.partitions.as_deref(), &target.partition)
        })
    }

    /// Whether a decoded entry of a data manifest of `spec_id` must be kept: a live data
    /// file in scope, or anything [`crate::table::TableFiles`] must look at itself
    /// (entries without an inherited sequence number, which it refuses). Deleted entries
    /// are never kept: they list no live file.
    pub fn may_hold_entry(&self, spec_id: i32, entry: &ManifestEntry) -> bool {
        self.may_hold_head(spec_id, &EntryHead::of(entry))
    }

    /// [`Self::may_hold_entry`] on what decides it (the manifest decoder asks before
    /// it decodes an entry's counts and bounds).
    pub fn may_hold_head(&self, spec_id: i32, head: &EntryHead<'_>) -> bool {
        if head.status == ManifestStatus::Deleted {
            return false;
        }
        let (Self::Partitions(targets), Some(seq)) = (self, head.sequence_number) else {
            return true;
        };
        head.content != DataContentType::Data
            || targets.iter().any(|target| {
                spec_id == target.spec_id
                    && seq < target.max_sequence_number
                    && same_partition(head.partition, &target.partition)
            })
    }
}

/// False only when the manifest's partition summaries prove that none of its files has
/// the tuple `partition`.
fn summaries_admit(summaries: Option<&[FieldSummary]>, partition: &Struct) -> bool {
    let Some(summaries) = summaries else {
        return true;
    };
    if summaries.len() != partition.fields().len() {
        return true;
    }
    summaries
        .iter()
        .zip(partition.iter())
        .all(|(summary, value)| field_admits(summary, value))
}

fn field_admits(summary: &FieldSummary, value: Option<&Literal>) -> bool {
    let Some(value) = value else {
        return summary.contains_null;
    };
    let (Some(lower), Some(upper)) = (&summary.lower_bound, &summary.upper_bound) else {
        // Missing bounds may mean "all null", or a writer that did not write them.
        return true;
    };
    match value {
        // Normalized: every int-like partition value (int, long, date, time, timestamps,
        // bucket and the time transforms) is a long; its bounds are 4- or 8-byte
        // little-endian, 4 for a manifest written before a promotion.
        Literal::Primitive(PrimitiveLiteral::Long(v)) => {
            match (integer_bound(lower), integer_bound(upper)) {
                (Some(lo), Some(hi)) => lo <= *v && *v <= hi,
                _ => true,
            }
        }
        // Strings compare by their UTF-8 bytes, as Iceberg orders them.
        Literal::Primitive(PrimitiveLiteral::String(v)) => {
            lower.as_slice() <= v.as_bytes() && v.as_bytes() <= upper.as_slice()
        }
        _ => true,
    }
}

fn integer_bound(bytes: &[u8]) -> Option<i64> {
    match bytes.len() {
        4 => Some(i64::from(i32::from_le_bytes(bytes.try_into().ok()?))),
        8 => Some(i64::from_le_bytes(bytes.try_into().ok()?)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use iceberg::spec::{ManifestContentType, ManifestFile};
    use serde_bytes::ByteBuf;

    use super::*;
    use crate::partition::normalize_partition;

    fn manifest(spec_id: i32, min_seq: i64, partitions: Option<Vec<FieldSummary>>) -> ManifestFile {
        ManifestFile {
            partition_spec_id: spec_id,
            sequence_number: min_seq,
            min_sequence_number: min_seq,
            partitions,
            ..crate::test_fixtures::manifest_file(ManifestContentType::Data)
        }
    }

    fn ints(lo: i32, hi: i32, contains_null: bool) -> FieldSummary {
        FieldSummary {
            contains_null,
            contains_nan: None,
            lower_bound: Some(ByteBuf::from(lo.to_le_bytes().to_vec())),
            upper_bound: Some(ByteBuf::from(hi.to_le_bytes().to_vec())),
        }
    }

    fn strings(lo: &str, hi: &str) -> FieldSummary {
        FieldSummary {
            contains_null: false,
            contains_nan: None,
            lower_bound: Some(ByteBuf::from(lo.as_bytes().to_vec())),
            upper_bound: Some(ByteBuf::from(hi.as_bytes().to_vec())),
        }
    }

    fn target(spec_id: i32, values: Vec<Option<PrimitiveLiteral>>, seq: i64) -> DataScope {
        let partition: Struct = values
            .into_iter()
            .map(|v| v.map(Literal::Primitive))
            .collect();
        DataScope::Partitions(vec![PartitionTarget {
            spec_id,
            partition: normalize_partition(&partition),
            max_sequence_number: seq,
        }])
    }

    #[test]
    fn bounds_rule_a_manifest_in_or_out() {
        use PrimitiveLiteral::*;
        let bucket3 = target(0, vec![Some(Int(3))], 10);
        assert!(bucket3.may_hold(&manifest(0, 1, Some(vec![ints(0, 15, false)]))));
        assert!(bucket3.may_hold(&manifest(0, 1, Some(vec![ints(3, 3, false)]))));
        assert!(!bucket3.may_hold(&manifest(0, 1, Some(vec![ints(4, 15, false)]))));
        assert!(!bucket3.may_hold(&manifest(0, 1, Some(vec![ints(0, 2, false)]))));
        // Another spec's files never match; nor do files as new as the deletes.
        assert!(!bucket3.may_hold(&manifest(1, 1, Some(vec![ints(0, 15, false)]))));
        assert!(!bucket3.may_hold(&manifest(0, 10, Some(vec![ints(0, 15, false)]))));
        assert!(bucket3.may_hold(&manifest(0, 9, Some(vec![ints(0, 15, false)]))));
        // 8-byte bounds (a long field) against a tuple written as an int, and the reverse.
        let long_bounds = FieldSummary {
            contains_null: false,
            contains_nan: None,
            lower_bound: Some(ByteBuf::from(5i64.to_le_bytes().to_vec())),
            upper_bound: Some(ByteBuf::from(9i64.to_le_bytes().to_vec())),
        };
        assert!(!bucket3.may_hold(&manifest(0, 1, Some(vec![long_bounds.clone()]))));
        assert!(target(0, vec![Some(Long(7))], 10).may_hold(&manifest(
            0,
            1,
            Some(vec![long_bounds])
        )));
        assert!(!target(0, vec![Some(Long(70))], 10).may_hold(&manifest(
            0,
            1,
            Some(vec![ints(0, 15, false)])
        )));
        // Strings by their bytes; every field must admit the tuple.
        let two = |lo, hi| manifest(0, 1, Some(vec![ints(0, 15, false), strings(lo, hi)]));
        let eu = target(0, vec![Some(Int(3)), Some(String("eu".into()))], 10);
        assert!(eu.may_hold(&two("ap", "us")));
        assert!(!eu.may_hold(&two("fr", "us")));
        assert!(!eu.may_hold(&two("ap", "ea")));
    }

    #[test]
    fn what_cannot_be_decided_is_read() {
        use PrimitiveLiteral::*;
        let bucket3 = target(0, vec![Some(Int(3))], 10);
        // No summaries, a summary per field missing, missing bounds, odd byte lengths.
        assert!(bucket3.may_hold(&manifest(0, 1, None)));
        assert!(bucket3.may_hold(&manifest(0, 1, Some(vec![]))));
        let no_bounds = FieldSummary {
            contains_null: true,
            contains_nan: None,
            lower_bound: None,
            upper_bound: None,
        };
        assert!(bucket3.may_hold(&manifest(0, 1, Some(vec![no_bounds]))));
        let odd = FieldSummary {
            contains_null: false,
            contains_nan: None,
            lower_bound: Some(ByteBuf::from(vec![1, 2, 3])),
            upper_bound: Some(ByteBuf::from(vec![1, 2, 3])),
        };
        assert!(bucket3.may_hold(&manifest(0, 1, Some(vec![odd]))));
        // Types not compared here are read.
        let decimal = target(0, vec![Some(Int128(5))], 10);
        assert!(decimal.may_hold(&manifest(0, 1, Some(vec![ints(100, 200, false)]))));
        // A global group needs everything; delete manifests are always read.
        assert!(DataScope::Everything.may_hold(&manifest(7, 99, Some(vec![ints(0, 0, false)]))));
        let mut deletes = manifest(1, 99, Some(vec![ints(9, 9, false)]));
        deletes.content = ManifestContentType::Deletes;
        assert!(bucket3.may_hold(&deletes));
    }

    #[test]
    fn a_null_partition_value_needs_a_manifest_holding_nulls() {
        let null = target(0, vec![None], 10);
        assert!(!null.may_hold(&manifest(0, 1, Some(vec![ints(0, 15, false)]))));
        assert!(null.may_hold(&manifest(0, 1, Some(vec![ints(0, 15, true)]))));
        let all_null = FieldSummary {
            contains_null: true,
            contains_nan: None,
            lower_bound: None,
            upper_bound: None,
        };
        assert!(null.may_hold(&manifest(0, 1, Some(vec![all_null]))));
    }

    fn entry(
        status: ManifestStatus,
        seq: Option<i64>,
        content: DataContentType,
        bucket: i32,
    ) -> ManifestEntry {
        let file = iceberg::spec::DataFileBuilder::default()
            .content(content)
            .file_path("f.parquet".into())
            .file_format(iceberg::spec::DataFileFormat::Parquet)
            .partition(Struct::from_iter([Some(Literal::int(bucket))]))
            .record_count(1)
            .file_size_in_bytes(1)
            .build()
            .expect("a data file");
        ManifestEntry {
            status,
            snapshot_id: Some(1),
            sequence_number: seq,
            file_sequence_number: seq,
            data_file: file,
        }
    }

    #[test]
    fn entries_out_of_scope_are_dropped_and_the_rest_kept() {
        use DataContentType::Data;
        use ManifestStatus::{Added, Deleted, Existing};
        let bucket3 = target(0, vec![Some(PrimitiveLiteral::Int(3))], 10);
        assert!(bucket3.may_hold_entry(0, &entry(Added, Some(9), Data, 3)));
        assert!(bucket3.may_hold_entry(0, &entry(Existing, Some(1), Data, 3)));
        // Another partition, another spec, as new as the deletes, or not live.
        assert!(!bucket3.may_hold_entry(0, &entry(Added, Some(9), Data, 4)));
        assert!(!bucket3.may_hold_entry(1, &entry(Added, Some(9), Data, 3)));
        assert!(!bucket3.may_hold_entry(0, &entry(Added, Some(10), Data, 3)));
        assert!(!bucket3.may_hold_entry(0, &entry(Deleted, Some(9), Data, 3)));
        // Kept for the reader to judge: no sequence number (it refuses), not data.
        assert!(bucket3.may_hold_entry(0, &entry(Added, None, Data, 4)));
        assert!(bucket3.may_hold_entry(
            0,
            &entry(Added, Some(9), DataContentType::EqualityDeletes, 4)
        ));
        assert!(DataScope::Everything.may_hold_entry(5, &entry(Added, Some(99), Data, 4)));
        assert!(!DataScope::Everything.may_hold_entry(5, &entry(Deleted, Some(1), Data, 4)));
    }
}
