//! DuckDB (its iceberg extension, through `pyiceberg/duckdb_read.py`) as a third
//! independent reader. Unlike PyIceberg it applies equality deletes, so it judges a table
//! both before a conversion (equality deletes) and after it (DVs): both times it must read
//! exactly the rows of the generator's model, and after the conversion PyIceberg must read
//! the same. Where DuckDB is known to misread or fail (null equality keys, uuid keys), the
//! reader must refuse, and these tests pin that it does.

mod common;

use std::path::Path;

use common::{duckdb_read, pyiceberg_read, try_duckdb_read};
use eqdv::catalog::{SqliteCatalog, TableName};
use eqdv::convert::{ConvertOptions, Outcome, convert};
use eqdv_workload::generate::{KeyType, PartitionKind, WorkloadSpec, expected_rows, generate};

const TABLE: &str = "db.events";

fn small(seed: u64, keys: Vec<KeyType>, partition: PartitionKind) -> WorkloadSpec {
    WorkloadSpec {
        seed,
        rows: 500,
        commits: 3,
        keys,
        partition,
        changes_per_commit: 70,
        rows_per_file: 150,
        rows_per_row_group: 50,
        ..Default::default()
    }
}

/// What DuckDB must do with the table while it still has equality deletes.
#[derive(Clone, Copy)]
enum Before {
    /// Read exactly the model's rows.
    Reads,
    /// Refuse with exit status 3 and a message containing this.
    Refused(&'static str),
}

/// Generates `spec` (or continues the table), judges DuckDB's read with the equality
/// deletes, converts, and checks that DuckDB and PyIceberg read the model's rows.
async fn generate_judge_convert(
    warehouse: &Path,
    catalog: &SqliteCatalog,
    spec: &WorkloadSpec,
    before: Before,
) {
    let name = TableName::parse(TABLE).unwrap();
    let report = generate(catalog, &name, spec).await.expect("generate");
    // Sorted on both sides, so equal vectors are equal multisets.
    let expected = expected_rows(&report.state).expect("expected rows");
    assert!(!expected.is_empty(), "the workload left no live rows");
    assert!(
        report.equality_delete_files > 0,
        "the workload wrote no equality deletes"
    );

    match before {
        Before::Reads => {
            let rows = duckdb_read(warehouse, TABLE);
            assert_eq!(rows.len(), expected.len(), "DuckDB's live row count");
            assert!(
                rows == expected,
                "DuckDB applies the equality deletes differently from the model: {} rows only \
                 DuckDB reads, {} only the model",
                common::multiset_minus(&rows, &expected).len(),
                common::multiset_minus(&expected, &rows).len()
            );
        }
        Before::Refused(why) => {
            let err = try_duckdb_read(warehouse, TABLE)
                .expect_err("duckdb_read.py must refuse a case DuckDB misreads");
            assert_eq!(err.status, Some(3), "{err}");
            assert!(err.stderr.contains(why), "{err}");
        }
    }

    let converted = convert(catalog, &name, &ConvertOptions::default())
        .await
        .expect("convert");
    assert_eq!(converted.outcome, Outcome::Converted);

    let rows = duckdb_read(warehouse, TABLE);
    assert_eq!(rows.len(), expected.len(), "DuckDB's live row count");
    assert!(
        rows == expected,
        "DuckDB reads the converted table differently from the model"
    );
    let view = pyiceberg_read(warehouse, TABLE);
    assert!(view.dv_count > 0, "no DV is live after the conversion");
    assert!(view.rows == rows, "PyIceberg and DuckDB disagree");
}

/// Two rounds: CDC, conversion; more CDC on top of the DVs (DuckDB reads both kinds of
/// deletes at once), conversion again.
async fn round_trip(spec: WorkloadSpec) {
    let dir = tempfile::tempdir().unwrap();
    let catalog = SqliteCatalog::open_warehouse(dir.path()).expect("catalog");
    generate_judge_convert(dir.path(), &catalog, &spec, Before::Reads).await;
    let more = WorkloadSpec {
        commits: 2,
        ..spec.clone()
    };
    generate_judge_convert(dir.path(), &catalog, &more, Before::Reads).await;
}

/// One round: DuckDB's reader refuses the table with equality deletes, reads it after.
async fn refused_until_converted(spec: WorkloadSpec, why: &'static str) {
    let dir = tempfile::tempdir().unwrap();
    let catalog = SqliteCatalog::open_warehouse(dir.path()).expect("catalog");
    generate_judge_convert(dir.path(), &catalog, &spec, Before::Refused(why)).await;
}

#[tokio::test]
async fn unpartitioned_long_key() {
    round_trip(small(21, vec![KeyType::Long], PartitionKind::None)).await;
}

#[tokio::test]
async fn every_key_type_but_uuid_in_one_key() {
    let keys = KeyType::ALL
        .into_iter()
        .filter(|k| *k != KeyType::Uuid)
        .collect();
    round_trip(small(22, keys, PartitionKind::None)).await;
}

#[tokio::test]
async fn identity_partitioned_string_key_with_global_deletes() {
    let mut spec = small(23, vec![KeyType::String], PartitionKind::Identity);
    spec.global_deletes = true;
    round_trip(spec).await;
}

#[tokio::test]
async fn bucketed_decimal_and_binary_key() {
    round_trip(small(
        24,
        vec![KeyType::Decimal, KeyType::Binary],
        PartitionKind::Bucket(4),
    ))
    .await;
}

#[tokio::test]
async fn day_partitioned_timestamp_and_date_key() {
    round_trip(small(
        25,
        vec![KeyType::Timestamptz, KeyType::Timestamp, KeyType::Date],
        PartitionKind::Day,
    ))
    .await;
}

// DuckDB 1.5.5 fails inside its equality delete join on a uuid key (an internal error).
#[tokio::test]
async fn uuid_key_is_refused_until_converted() {
    refused_until_converted(
        small(26, vec![KeyType::Uuid, KeyType::Long], PartitionKind::None),
        "keyed on uuid column(s) k0",
    )
    .await;
}

// DuckDB drops rows with a null key column that no delete matches (pinned on a
// hand-made table in pyiceberg_smoke.rs), so the reader refuses first.
#[tokio::test]
async fn null_keys_are_refused_until_converted() {
    let mut spec = small(
        27,
        vec![KeyType::String, KeyType::Int],
        PartitionKind::Identity,
    );
    spec.null_keys = true;
    refused_until_converted(spec, "may hold nulls in equality column(s)").await;
}

// The added column joins the equality key; older rows hold null in it.
#[tokio::test]
async fn an_added_key_column_is_refused_until_converted() {
    let mut spec = small(28, vec![KeyType::Long], PartitionKind::Bucket(3));
    spec.add_column = true;
    refused_until_converted(spec, "may hold nulls in equality column(s)").await;
}
