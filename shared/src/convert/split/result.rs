//! What one range of a split hands the fan-in: its DVs, uncommitted, with where each lies
//! and the data file and partition it is for, and what the range relied on (stored as
//! JSON between the tasks).

use std::collections::BTreeSet;

use iceberg::spec::{Literal, Struct, Type};
use serde::{Deserialize, Serialize};

use crate::Result;
use crate::catalog::TableName;
use crate::convert::attempt::dv_partition_type;
use crate::data_range::{DataRange, Membership};
use crate::partition::partition_as_type;
use crate::resolve::ResolveMetrics;
use crate::table::{LiveFile, LoadedTable};

/// What one range converted: the DVs it wrote, uncommitted, and what it relied on. It is
/// all the fan-in needs besides the table (it is meant to be stored as JSON between the
/// range tasks and the fan-in).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RangeResult {
    pub table: TableName,
    pub branch: String,
    /// The shard converted, when the conversion was of one shard.
    pub shard_id: Option<String>,
    pub range: DataRange,
    /// How the split's data files were dealt to its ranges (a result of a version
    /// before the manifest layout says nothing: by path hash).
    #[serde(default)]
    pub membership: Membership,
    /// The table's location when the range read it (where a split stores its results).
    #[serde(default)]
    pub table_location: String,
    /// The snapshot every range of the split read.
    pub base_snapshot_id: i64,
    /// The equality delete files the range applied (sorted): the same in every range.
    pub equality_delete_files: Vec<String>,
    /// The Puffin file written, when the range found positions to delete (and it was not
    /// a dry run).
    pub puffin: Option<RangePuffin>,
    /// v2 position delete files whose every referenced data file is this range's and got
    /// a DV that carries their positions.
    pub removed_position_deletes: Vec<String>,
    pub dvs_planned: usize,
    pub dvs_replaced: usize,
    pub positions_added: u64,
    pub resolve: ResolveMetrics,
    pub resolve_ms: f64,
    /// Reading the base's manifest list and manifests, and grouping the deletes.
    #[serde(default)]
    pub read_table_ms: f64,
    /// Encoding and uploading the Puffin file.
    #[serde(default)]
    pub write_ms: f64,
}

/// A range's Puffin file and where each of its DVs lies.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RangePuffin {
    pub location: String,
    pub file_size_in_bytes: u64,
    pub dvs: Vec<RangeDv>,
}

/// One DV of a range's Puffin file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RangeDv {
    pub referenced_data_file: String,
    pub content_offset: i64,
    pub content_size_in_bytes: i64,
    pub cardinality: u64,
    /// The DV it replaces (it carries that DV's positions too).
    pub replaced_dv: Option<String>,
    /// Where its data file lies, so that the fan-in files the DV without reading the
    /// data manifests again. Absent from results of earlier versions, and where the
    /// partition does not survive its JSON form: the fan-in then reads them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_file: Option<DvTarget>,
}

/// The spec and partition of a DV's data file, as the range read them in the base.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DvTarget {
    /// The manifest that lists the data file in the base (which range holds a file
    /// depends on it: `crate::data_range`).
    pub manifest_path: String,
    pub spec_id: i32,
    /// The partition in the spec's JSON single-value form (an object keyed by partition
    /// field id), typed as the table's current schema types it.
    pub partition: serde_json::Value,
}

impl DvTarget {
    /// The target of a DV for `data`; `None` when its partition does not read back from
    /// JSON as the same values (a NaN, a type the form does not carry).
    pub(super) fn of(table: &LoadedTable, data: &LiveFile) -> Result<Option<Self>> {
        let partition_type = dv_partition_type(table, data.spec_id)?;
        let partition = partition_as_type(data.file.partition(), &partition_type);
        Ok(Self::encode(
            &data.manifest_path,
            data.spec_id,
            &partition,
            &Type::Struct(partition_type),
        ))
    }

    /// The partition, typed by `table`'s current schema (see [`DvTarget::decode`]).
    pub(super) fn partition(&self, table: &LoadedTable) -> Option<Struct> {
        let partition_type = dv_partition_type(table, self.spec_id).ok()?;
        self.decode(&Type::Struct(partition_type))
    }

    /// `partition` of type `partition_type` in its JSON form, when that decodes back to
    /// the same values.
    fn encode(
        manifest_path: &str,
        spec_id: i32,
        partition: &Struct,
        partition_type: &Type,
    ) -> Option<Self> {
        let json = Literal::Struct(partition.clone())
            .try_into_json(partition_type)
            .ok()?;
        let target = Self {
            manifest_path: manifest_path.to_string(),
            spec_id,
            partition: json,
        };
        (target.decode(partition_type).as_ref() == Some(partition)).then_some(target)
    }

    /// The partition read as `partition_type`; `None` unless it encodes to the same JSON
    /// again (reading a struct from JSON turns a field it cannot read into a null, which
    /// must never file a DV in another partition).
    fn decode(&self, partition_type: &Type) -> Option<Struct> {
        let read = Literal::try_from_json(self.partition.clone(), partition_type).ok()??;
        let encoded_again = read.clone().try_into_json(partition_type).ok()?;
        match read {
            Literal::Struct(partition) if encoded_again == self.partition => Some(partition),
            _ => None,
        }
    }
}

/// Removes the Puffin files the ranges wrote (when their work will not be committed),
/// those in the directories of the table at `table_location` only.
pub async fn discard_ranges(
    file_io: &iceberg::io::FileIO,
    table_location: &str,
    results: &[RangeResult],
) {
    let written: Vec<String> = results
        .iter()
        .filter_map(|r| r.puffin.as_ref().map(|p| p.location.clone()))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    crate::storage::delete_files(file_io, table_location, &written).await;
}

#[cfg(test)]
mod tests {
    use iceberg::spec::{Literal, NestedField, PrimitiveType, Struct, StructType, Type};

    use super::DvTarget;

    fn struct_type(fields: &[(i32, PrimitiveType)]) -> Type {
        Type::Struct(StructType::new(
            fields
                .iter()
                .map(|(id, t)| {
                    NestedField::optional(*id, format!("p{id}"), Type::Primitive(t.clone())).into()
                })
                .collect(),
        ))
    }

    #[test]
    fn a_partition_round_trips_through_its_json_form() {
        let partition_type = struct_type(&[
            (1000, PrimitiveType::Int),
            (1001, PrimitiveType::Long),
            (1002, PrimitiveType::Date),
            (1003, PrimitiveType::Timestamp),
            (1004, PrimitiveType::Timestamptz),
            (1005, PrimitiveType::String),
            (
                1006,
                PrimitiveType::Decimal {
                    precision: 10,
                    scale: 2,
                },
            ),
            (1007, PrimitiveType::Binary),
            (1008, PrimitiveType::Boolean),
            (1009, PrimitiveType::Double),
            (1010, PrimitiveType::Int),
        ]);
        let partition = Struct::from_iter([
            Some(Literal::int(-7)),
            Some(Literal::long(1_i64 << 40)),
            Some(Literal::date(19_000)),
            Some(Literal::timestamp(1_700_000_000_123_456)),
            Some(Literal::timestamptz(1_700_000_000_000_001)),
            Some(Literal::string("a/b=c é")),
            Some(Literal::decimal(-12_345)),
            Some(Literal::binary(vec![0, 1, 254, 255])),
            Some(Literal::bool(true)),
            Some(Literal::double(0.1)),
            None,
        ]);
        let target = DvTarget::encode("m.avro", 3, &partition, &partition_type).expect("encodable");
        assert_eq!(target.spec_id, 3);
        let stored = serde_json::to_string(&target).unwrap();
        let read: DvTarget = serde_json::from_str(&stored).unwrap();
        assert_eq!(read.decode(&partition_type), Some(partition));
        // Unpartitioned: an empty tuple.
        let empty =
            DvTarget::encode("m.avro", 0, &Struct::empty(), &struct_type(&[])).expect("empty");
        assert_eq!(empty.decode(&struct_type(&[])), Some(Struct::empty()));
    }

    #[test]
    fn a_partition_that_does_not_read_back_is_not_given() {
        // NaN has no JSON number.
        let floats = struct_type(&[(1000, PrimitiveType::Float)]);
        let nan = Struct::from_iter([Some(Literal::float(f32::NAN))]);
        assert_eq!(DvTarget::encode("m.avro", 0, &nan, &floats), None);
        // A value the type cannot read is refused, not read as a null.
        let ints = struct_type(&[(1000, PrimitiveType::Int)]);
        let target = DvTarget {
            manifest_path: "m.avro".into(),
            spec_id: 0,
            partition: serde_json::json!({"1000": "not a number"}),
        };
        assert_eq!(target.decode(&ints), None);
        // Nor is a field it does not know (another spec's tuple).
        let target = DvTarget {
            manifest_path: "m.avro".into(),
            spec_id: 0,
            partition: serde_json::json!({"1001": 4}),
        };
        assert_eq!(target.decode(&ints), None);
    }

    #[test]
    fn a_partition_written_before_a_promotion_reads_in_the_promoted_type() {
        let before = struct_type(&[(1000, PrimitiveType::Int)]);
        let after = struct_type(&[(1000, PrimitiveType::Long)]);
        let target = DvTarget::encode(
            "m.avro",
            0,
            &Struct::from_iter([Some(Literal::int(42))]),
            &before,
        )
        .expect("encodable");
        assert_eq!(
            target.decode(&after),
            Some(Struct::from_iter([Some(Literal::long(42))]))
        );
    }
}
