//! Conversions judged by an independent reader: eqdv generates CDC tables with
//! equality deletes, converts them, and PyIceberg (through `pyiceberg/read_table.py`,
//! which also checks every DV byte for byte) must read exactly the rows the generator's
//! model expects, which eqdv's own reader must also read. Before a conversion PyIceberg
//! must refuse the table, so no test can pass by ignoring equality deletes.

mod common;

use std::path::Path;
use std::sync::{Arc, Mutex};

use common::{pyiceberg_counts, pyiceberg_read, try_pyiceberg_read};
use eqdv::catalog::{SqliteCatalog, TableName};
use eqdv::convert::{ConvertOptions, Outcome, convert};
use eqdv::progress::{Progress, ProgressEvent, ProgressStep};
use eqdv::table::LoadedTable;
use eqdv_workload::generate::{KeyType, PartitionKind, WorkloadSpec, expected_rows, generate};

const TABLE: &str = "db.events";

fn small(seed: u64, keys: Vec<KeyType>, partition: PartitionKind) -> WorkloadSpec {
    WorkloadSpec {
        seed,
        rows: 600,
        commits: 3,
        keys,
        partition,
        changes_per_commit: 80,
        rows_per_file: 150,
        rows_per_row_group: 50,
        ..Default::default()
    }
}

async fn rust_rows(catalog: &SqliteCatalog, name: &TableName) -> Vec<String> {
    let table = LoadedTable::load(catalog, name).await.expect("load");
    eqdv_workload::read::read_canonical(&table, "main")
        .await
        .expect("eqdv::read")
}

/// Generates `spec` (or continues the table), checks that PyIceberg refuses it, converts,
/// and checks that PyIceberg and eqdv both read the expected rows.
async fn generate_convert_judge(warehouse: &Path, catalog: &SqliteCatalog, spec: &WorkloadSpec) {
    let name = TableName::parse(TABLE).unwrap();
    let report = generate(catalog, &name, spec).await.expect("generate");
    let expected = expected_rows(&report.state).expect("expected rows");
    assert!(!expected.is_empty(), "the workload left no live rows");

    let refused = try_pyiceberg_read(warehouse, TABLE, "main")
        .expect_err("PyIceberg must refuse a table with live equality deletes");
    assert_eq!(refused.status, Some(3), "{refused}");
    let before = pyiceberg_counts(warehouse, TABLE);
    assert!(
        before.equality_delete_files > 0,
        "the workload wrote no equality deletes"
    );
    assert_eq!(before.format_version, 3);

    // The conversion reports the files it reads to a listener (the CLI's bar).
    let heard = Arc::new(Mutex::new(Vec::new()));
    let mut options = ConvertOptions::default();
    options.resolve.progress = Progress::new({
        let heard = heard.clone();
        move |event| heard.lock().unwrap().push(event)
    });
    let converted = convert(catalog, &name, &options).await.expect("convert");
    assert_eq!(converted.outcome, Outcome::Converted);
    assert_progress_adds_up(&heard.lock().unwrap(), converted.resolve.files_opened);

    let view = pyiceberg_read(warehouse, TABLE);
    assert_eq!(view.equality_delete_files, 0, "equality deletes still live");
    assert!(view.dv_count > 0, "no DV is live after the conversion");
    assert_eq!(view.position_delete_files, before.position_delete_files);
    assert_eq!(view.data_files, before.data_files, "data files changed");
    assert_eq!(view.snapshot_id, converted.new_snapshot_id);
    assert_eq!(
        view.rows.len(),
        expected.len(),
        "PyIceberg's live row count"
    );
    assert!(
        view.rows == expected,
        "PyIceberg's rows differ from the generator's model"
    );
    assert!(
        rust_rows(catalog, &name).await == view.rows,
        "eqdv::read and PyIceberg disagree"
    );
}

/// Every file announced was reported read, with the bytes announced, and the scan read
/// the files the report says it opened.
fn assert_progress_adds_up(heard: &[ProgressEvent], files_opened: u64) {
    for step in [ProgressStep::Scan, ProgressStep::IndexBuild] {
        let (mut announced, mut announced_bytes, mut read, mut read_bytes) = (0, 0, 0, 0);
        for event in heard {
            match *event {
                ProgressEvent::Reading {
                    step: s,
                    files,
                    bytes,
                } if s == step => {
                    announced += files;
                    announced_bytes += bytes;
                }
                ProgressEvent::Read { step: s, bytes } if s == step => {
                    read += 1;
                    read_bytes += bytes;
                }
                _ => {}
            }
        }
        assert_eq!((read, read_bytes), (announced, announced_bytes), "{step:?}");
        if step == ProgressStep::Scan {
            assert_eq!(announced, files_opened, "files the scan announced");
        }
    }
}

async fn round_trip(spec: WorkloadSpec) {
    let dir = tempfile::tempdir().unwrap();
    let catalog = SqliteCatalog::open_warehouse(dir.path()).expect("catalog");
    generate_convert_judge(dir.path(), &catalog, &spec).await;
    // More CDC on the converted table, then a second conversion that merges new
    // positions into the existing DVs.
    let more = WorkloadSpec {
        commits: 2,
        ..spec.clone()
    };
    generate_convert_judge(dir.path(), &catalog, &more).await;
}

#[tokio::test]
async fn unpartitioned_long_key() {
    round_trip(small(1, vec![KeyType::Long], PartitionKind::None)).await;
}

#[tokio::test]
async fn every_key_type_in_one_key_with_nulls() {
    let mut spec = small(2, KeyType::ALL.to_vec(), PartitionKind::None);
    spec.null_keys = true;
    round_trip(spec).await;
}

#[tokio::test]
async fn bucketed_with_global_deletes_and_an_added_column() {
    let mut spec = small(
        3,
        vec![KeyType::String, KeyType::Int],
        PartitionKind::Bucket(4),
    );
    spec.global_deletes = true;
    spec.add_column = true;
    spec.null_keys = true;
    round_trip(spec).await;
}

#[tokio::test]
async fn day_partitioned_timestamptz_key() {
    round_trip(small(
        4,
        vec![KeyType::Timestamptz, KeyType::Uuid],
        PartitionKind::Day,
    ))
    .await;
}
