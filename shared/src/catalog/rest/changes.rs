//! A commit as the Iceberg REST protocol takes it: the updates eqdv's metadata builder
//! applied, and the requirements that make the server refuse them (409) when the table
//! is no longer the one they were made against.
//!
//! A pointer catalog refuses a swap when anything at all was committed since the base
//! was read. The REST protocol has no requirement on the metadata location, so the
//! nearest equivalent is asserted: the table's UUID, every branch and tag at the
//! snapshot it had (a ref the commit creates must still be absent), and the schema,
//! partition spec and column/partition id counters. A commit of any snapshot, schema or
//! spec since the base is then a conflict; only a change to properties alone is not,
//! which eqdv's property updates tolerate by construction (a key index is checked
//! against the snapshot it is used with).

use std::collections::BTreeMap;

use iceberg::spec::TableMetadata;
use iceberg::{TableRequirement, TableUpdate};

use crate::{Error, Result};

/// The updates a REST commit may send for eqdv: what its snapshots and staging
/// applications change. Anything else in a builder's changes means eqdv built a commit
/// it does not know how to express, and is refused rather than sent half.
fn supported(update: &TableUpdate) -> bool {
    matches!(
        update,
        TableUpdate::AddSnapshot { .. }
            | TableUpdate::SetSnapshotRef { .. }
            | TableUpdate::SetProperties { .. }
            | TableUpdate::RemoveProperties { .. }
    )
}

/// The requirements of a commit of `updates` on top of `base`.
pub(super) fn requirements(
    table: &str,
    base: &TableMetadata,
    updates: &[TableUpdate],
) -> Result<Vec<TableRequirement>> {
    if let Some(other) = updates.iter().find(|u| !supported(u)) {
        return Err(Error::InvalidInput(format!(
            "table {table}: a REST commit of eqdv cannot carry the update {other:?}"
        )));
    }
    let mut requirements = vec![TableRequirement::UuidMatch { uuid: base.uuid() }];
    let refs = refs(base)?;
    requirements.extend(
        refs.iter()
            .map(|(name, id)| TableRequirement::RefSnapshotIdMatch {
                r#ref: name.clone(),
                snapshot_id: Some(*id),
            }),
    );
    let mut created: Vec<&String> = updates
        .iter()
        .filter_map(|u| match u {
            TableUpdate::SetSnapshotRef { ref_name, .. } if !refs.contains_key(ref_name) => {
                Some(ref_name)
            }
            _ => None,
        })
        .collect();
    created.sort();
    created.dedup();
    requirements.extend(
        created
            .into_iter()
            .map(|name| TableRequirement::RefSnapshotIdMatch {
                r#ref: name.clone(),
                snapshot_id: None,
            }),
    );
    requirements.extend([
        TableRequirement::CurrentSchemaIdMatch {
            current_schema_id: base.current_schema_id(),
        },
        TableRequirement::LastAssignedFieldIdMatch {
            last_assigned_field_id: base.last_column_id(),
        },
        TableRequirement::DefaultSpecIdMatch {
            default_spec_id: base.default_partition_spec_id(),
        },
        TableRequirement::LastAssignedPartitionIdMatch {
            last_assigned_partition_id: base.last_partition_id(),
        },
    ]);
    Ok(requirements)
}

/// Every branch and tag of `metadata` with its snapshot, by name.
fn refs(metadata: &TableMetadata) -> Result<BTreeMap<String, i64>> {
    Ok(crate::refs::refs(metadata)?
        .into_iter()
        .map(|(name, reference)| (name, reference.snapshot_id))
        .collect())
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use iceberg::spec::{
        FormatVersion, NestedField, Operation, PrimitiveType, Schema, Snapshot, SnapshotReference,
        SnapshotRetention, Summary, TableMetadataBuilder, Type, UnboundPartitionSpec,
    };

    use super::*;

    fn base() -> TableMetadata {
        let schema = Schema::builder()
            .with_fields(vec![
                NestedField::required(1, "id", Type::Primitive(PrimitiveType::Long)).into(),
            ])
            .build()
            .unwrap();
        TableMetadataBuilder::new(
            schema,
            UnboundPartitionSpec::builder().build(),
            iceberg::spec::SortOrder::unsorted_order(),
            "memory://t".into(),
            FormatVersion::V3,
            HashMap::new(),
        )
        .unwrap()
        .build()
        .unwrap()
        .metadata
    }

    fn snapshot(id: i64, parent: Option<i64>, sequence: i64) -> Snapshot {
        Snapshot::builder()
            .with_snapshot_id(id)
            .with_parent_snapshot_id(parent)
            .with_sequence_number(sequence)
            // After the base's creation (now), as the builder requires.
            .with_timestamp_ms(later_ms() + id)
            .with_manifest_list(format!("memory://t/metadata/snap-{id}.avro"))
            .with_summary(Summary {
                operation: Operation::Append,
                additional_properties: HashMap::new(),
            })
            .with_schema_id(0)
            .with_row_range(0, 0)
            .build()
    }

    fn later_ms() -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64)
            + 1_000
    }

    /// What eqdv's snapshot build does: a snapshot on a branch plus properties, through
    /// iceberg-rust's builder, whose recorded changes are the commit's updates.
    fn commit(
        base: &TableMetadata,
        id: i64,
        branch: &str,
        properties: &[(&str, &str)],
    ) -> Vec<TableUpdate> {
        let parent = base.snapshot_for_ref(branch).map(|s| s.snapshot_id());
        let mut builder = base
            .clone()
            .into_builder(Some("memory://t/metadata/00001-x.metadata.json".into()))
            .set_branch_snapshot(snapshot(id, parent, base.next_sequence_number()), branch)
            .unwrap();
        if !properties.is_empty() {
            builder = builder
                .set_properties(
                    properties
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                )
                .unwrap();
        }
        builder.build().unwrap().changes
    }

    #[test]
    fn a_snapshot_on_main_asserts_the_table_as_it_was() {
        let base = base();
        let updates = commit(&base, 1, "main", &[("eqdv.key-index", "s3://x")]);
        assert!(
            updates
                .iter()
                .any(|u| matches!(u, TableUpdate::AddSnapshot { .. }))
        );
        assert!(
            updates
                .iter()
                .any(|u| matches!(u, TableUpdate::SetProperties { .. }))
        );
        let required = requirements("db.t", &base, &updates).unwrap();
        assert_eq!(
            required[0],
            TableRequirement::UuidMatch { uuid: base.uuid() }
        );
        // main does not exist yet in an empty table: it must still be absent.
        assert!(required.contains(&TableRequirement::RefSnapshotIdMatch {
            r#ref: "main".into(),
            snapshot_id: None,
        }));
        assert!(required.contains(&TableRequirement::CurrentSchemaIdMatch {
            current_schema_id: base.current_schema_id(),
        }));
        assert!(
            required.contains(&TableRequirement::LastAssignedFieldIdMatch {
                last_assigned_field_id: base.last_column_id(),
            })
        );
        // The wire form is the protocol's.
        let json = serde_json::to_value(&required).unwrap();
        assert_eq!(json[0]["type"], "assert-table-uuid");
        assert!(
            json.as_array()
                .unwrap()
                .iter()
                .any(|r| r["type"] == "assert-ref-snapshot-id"
                    && r["ref"] == "main"
                    && r["snapshot-id"].is_null())
        );
    }

    #[test]
    fn every_ref_of_the_base_is_asserted_at_its_snapshot() {
        let mut base = base();
        let updates = commit(&base, 1, "main", &[]);
        let mut builder = base.into_builder(None);
        for u in updates {
            builder = u.apply(builder).unwrap();
        }
        base = builder
            .set_ref(
                "audit",
                SnapshotReference::new(1, SnapshotRetention::branch(None, None, None)),
            )
            .unwrap()
            .build()
            .unwrap()
            .metadata;
        let updates = commit(&base, 2, "audit", &[]);
        let required = requirements("db.t", &base, &updates).unwrap();
        for name in ["main", "audit"] {
            assert!(
                required.contains(&TableRequirement::RefSnapshotIdMatch {
                    r#ref: name.into(),
                    snapshot_id: Some(1),
                }),
                "{name}: {required:?}"
            );
        }
        assert!(!required.iter().any(|r| matches!(
            r,
            TableRequirement::RefSnapshotIdMatch {
                snapshot_id: None,
                ..
            }
        )));
    }

    #[test]
    fn an_update_eqdv_never_makes_is_refused() {
        let base = base();
        let updates = vec![TableUpdate::SetLocation {
            location: "s3://elsewhere".into(),
        }];
        let err = requirements("db.t", &base, &updates).unwrap_err();
        assert!(err.to_string().contains("db.t"), "{err}");
        assert!(err.to_string().contains("SetLocation"), "{err}");
    }
}
