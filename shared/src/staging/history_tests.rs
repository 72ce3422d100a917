//! Where a target stands against its staging branch, on metadata built from JSON: the
//! first application, a fork, a record in a summary or (after an expiry) in the table
//! property, and every history that must be refused.

use iceberg::spec::TableMetadata;
use serde_json::{Value, json};

use super::{Branches, RecordedApplication, applied_property, standing};
use crate::Error;

const TABLE: &str = "db.t";

fn branches() -> Branches<'static> {
    Branches {
        table: TABLE,
        staging: "staging",
        target: "main",
    }
}

/// A snapshot: id, parent, sequence number, and (for the target's applications) the
/// staging snapshot it records.
fn snapshot(id: i64, parent: Option<i64>, seq: i64, records: Option<i64>) -> Value {
    let mut summary = json!({"operation": "append"});
    if let Some(applied) = records {
        summary["eqdv.staging-branch"] = json!("staging");
        summary["eqdv.staging-snapshot-id"] = json!(applied.to_string());
    }
    let mut s = json!({
        "snapshot-id": id,
        "sequence-number": seq,
        "timestamp-ms": 1_700_000_000_000i64 + seq,
        "manifest-list": format!("s3://b/t/metadata/snap-{id}.avro"),
        "summary": summary,
        "schema-id": 0
    });
    if let Some(p) = parent {
        s["parent-snapshot-id"] = json!(p);
    }
    s
}

/// Table metadata (format v2) holding `snapshots`, with branch heads `refs` and
/// `properties`.
fn metadata(snapshots: Vec<Value>, refs: &[(&str, i64)], properties: Value) -> TableMetadata {
    let last_seq = snapshots
        .iter()
        .filter_map(|s| s["sequence-number"].as_i64())
        .max()
        .unwrap_or(0);
    let refs: serde_json::Map<String, Value> = refs
        .iter()
        .map(|(name, id)| {
            (
                name.to_string(),
                json!({"snapshot-id": id, "type": "branch"}),
            )
        })
        .collect();
    let current = refs.get("main").map(|r| r["snapshot-id"].clone());
    let mut m = json!({
        "format-version": 2,
        "table-uuid": "9c12d441-03fe-4693-9a96-a0705ddf69c1",
        "location": "s3://b/t",
        "last-sequence-number": last_seq,
        "last-updated-ms": 1_700_000_100_000i64,
        "last-column-id": 1,
        "current-schema-id": 0,
        "schemas": [{"type": "struct", "schema-id": 0, "fields": [
            {"id": 1, "name": "k", "required": true, "type": "long"}]}],
        "default-spec-id": 0,
        "partition-specs": [{"spec-id": 0, "fields": []}],
        "last-partition-id": 999,
        "default-sort-order-id": 0,
        "sort-orders": [{"order-id": 0, "fields": []}],
        "properties": properties,
        "snapshots": snapshots,
        "snapshot-log": [],
        "metadata-log": [],
        "refs": refs
    });
    if let Some(id) = current {
        m["current-snapshot-id"] = id;
    }
    serde_json::from_value(m).expect("valid table metadata")
}

fn pending_ids(metadata: &TableMetadata) -> Vec<i64> {
    standing(metadata, branches())
        .expect("stands")
        .pending
        .iter()
        .map(|s| s.snapshot_id())
        .collect()
}

fn refusal(metadata: &TableMetadata) -> String {
    match standing(metadata, branches()) {
        Err(e @ Error::StagingDiverged { .. }) => e.to_string(),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

fn recorded(staging_snapshot_id: i64, sequence_number: i64) -> Value {
    let value = serde_json::to_string(&RecordedApplication {
        staging_branch: "staging".into(),
        staging_snapshot_id,
        sequence_number,
    })
    .expect("json");
    json!({ applied_property("main"): value })
}

#[test]
fn a_target_that_does_not_exist_has_the_whole_staging_history_pending() {
    let m = metadata(
        vec![
            snapshot(1, None, 1, None),
            snapshot(2, Some(1), 2, None),
            snapshot(3, Some(2), 3, None),
        ],
        &[("staging", 3)],
        json!({}),
    );
    let s = standing(&m, branches()).expect("stands");
    assert!(s.target_head.is_none() && s.applied.is_none());
    assert_eq!(pending_ids(&m), vec![1, 2, 3]);
}

#[test]
fn the_target_stands_at_the_staging_snapshot_its_newest_application_records() {
    // main: 10 (applies 1) <- 11 (a compaction) <- 12 (applies 2) <- 13 (a compaction).
    let m = metadata(
        vec![
            snapshot(1, None, 1, None),
            snapshot(2, Some(1), 2, None),
            snapshot(3, Some(2), 3, None),
            snapshot(10, None, 4, Some(1)),
            snapshot(11, Some(10), 5, None),
            snapshot(12, Some(11), 6, Some(2)),
            snapshot(13, Some(12), 7, None),
        ],
        &[("staging", 3), ("main", 13)],
        json!({}),
    );
    assert_eq!(standing(&m, branches()).expect("stands").applied, Some(2));
    assert_eq!(pending_ids(&m), vec![3]);
}

#[test]
fn a_staging_branch_made_from_the_target_stands_where_they_fork() {
    let m = metadata(
        vec![
            snapshot(1, None, 1, None),
            snapshot(2, Some(1), 2, None),
            snapshot(3, Some(2), 3, None),
            snapshot(4, Some(3), 4, None),
        ],
        &[("main", 2), ("staging", 4)],
        json!({}),
    );
    assert_eq!(pending_ids(&m), vec![3, 4]);
}

#[test]
fn applied_staging_snapshots_may_be_expired_but_pending_ones_may_not() {
    // Staging 1 <- 2 <- 3; 1 and 2 expired; main applied 2: 3 is pending.
    let applied_2 = metadata(
        vec![
            snapshot(3, Some(2), 3, None),
            snapshot(10, None, 4, Some(2)),
        ],
        &[("staging", 3), ("main", 10)],
        json!({}),
    );
    assert_eq!(pending_ids(&applied_2), vec![3]);
    // main applied only 1: 2 is lost.
    let applied_1 = metadata(
        vec![
            snapshot(3, Some(2), 3, None),
            snapshot(10, None, 4, Some(1)),
        ],
        &[("staging", 3), ("main", 10)],
        json!({}),
    );
    let why = refusal(&applied_1);
    assert!(
        why.contains("staging snapshot 3") && why.contains("expired"),
        "{why}"
    );
}

#[test]
fn an_expired_application_is_found_in_the_table_property() {
    // main's application (sequence 4) was expired; its head 11 is a compaction.
    let m = metadata(
        vec![
            snapshot(2, None, 2, None),
            snapshot(3, Some(2), 3, None),
            snapshot(11, Some(10), 5, None),
        ],
        &[("staging", 3), ("main", 11)],
        recorded(2, 4),
    );
    assert_eq!(standing(&m, branches()).expect("stands").applied, Some(2));
    assert_eq!(pending_ids(&m), vec![3]);
}

#[test]
fn the_table_property_is_not_trusted_for_a_target_rolled_back_past_it() {
    // The property says sequence 5 applied staging 2, but main's kept ancestry holds a
    // snapshot of sequence 3 below its cut: main was rolled back before that commit.
    let m = metadata(
        vec![
            snapshot(2, None, 2, None),
            snapshot(3, Some(2), 3, None),
            snapshot(20, Some(19), 3, None),
            snapshot(21, Some(20), 7, None),
        ],
        &[("staging", 3), ("main", 21)],
        recorded(2, 5),
    );
    let why = refusal(&m);
    assert!(why.contains("shares no snapshot"), "{why}");
}

#[test]
fn a_rolled_back_staging_branch_is_refused() {
    // main applied 3; staging was moved back to 2 and went on with 4.
    let m = metadata(
        vec![
            snapshot(1, None, 1, None),
            snapshot(2, Some(1), 2, None),
            snapshot(3, Some(2), 3, None),
            snapshot(4, Some(2), 5, None),
            snapshot(10, None, 4, Some(3)),
        ],
        &[("staging", 4), ("main", 10)],
        json!({}),
    );
    let why = refusal(&m);
    assert!(why.contains("no longer an ancestor"), "{why}");
}

#[test]
fn a_target_unrelated_to_the_staging_branch_is_refused() {
    let m = metadata(
        vec![snapshot(1, None, 1, None), snapshot(5, None, 2, None)],
        &[("staging", 1), ("main", 5)],
        json!({}),
    );
    let why = refusal(&m);
    assert!(why.contains("shares no snapshot"), "{why}");
}

#[test]
fn a_missing_staging_branch_and_one_branch_for_both_are_refused() {
    let m = metadata(vec![snapshot(1, None, 1, None)], &[("main", 1)], json!({}));
    let e = standing(&m, branches()).expect_err("no staging branch");
    assert!(
        e.to_string()
            .contains("staging branch 'staging' does not exist"),
        "{e}"
    );
    let same = Branches {
        staging: "main",
        ..branches()
    };
    assert!(matches!(standing(&m, same), Err(Error::InvalidInput(_))));
}
