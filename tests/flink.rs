//! Tables written by Apache Flink's Iceberg sink in upsert mode (tests/flink's jar:
//! Flink 1.20, Iceberg 1.11's FlinkSink on a local mini-cluster), converted by eqdv in
//! place and applied from a staging branch. Flink's writer keeps a model of the rows it
//! leaves live; Iceberg Java (1.12, the interop jar) must read exactly those before and
//! after, with no equality delete left, and PyIceberg and DuckDB must read the same.
//! On a v3 table Iceberg 1.11's Flink writer writes, per checkpoint, equality deletes
//! for every upserted or deleted key it did not insert in that checkpoint and DVs (never
//! v2 position deletes) for the rows it replaced within the checkpoint. Needs the test
//! services, the interop jar and the Flink jar (`tests/run` provides all three).

mod common;

use eqdv::catalog::{GlueCatalog, TableName};
use eqdv::convert::{ConvertOptions, Outcome, convert};
use eqdv::staging::{StagingOptions, StagingReport, apply_staging};
use eqdv::table::LoadedTable;
use eqdv_test_support::flink::{FlinkWrite, write_flink};
use eqdv_test_support::java::{JavaServer, JavaTable};
use serde_json::json;

const STAGING: &str = "staging";

/// What every Flink run on a v3 table must have committed: one snapshot per checkpoint,
/// each with equality deletes (the sink's upserts of keys from earlier checkpoints) and
/// DVs for the rows replaced within the checkpoint; no v2 position delete file. Besides
/// those, the sink may commit a snapshot that adds nothing: when one completion notice
/// covers two checkpoints (Flink may skip a notice under load), the sink commits each
/// pending checkpoint as a row delta of its own, the one without data too. Such a commit
/// is what users' tables get, and eqdv applies it like any other.
fn assert_flink_shape(w: &FlinkWrite, checkpoints: u64) {
    let report = w.summary();
    assert_eq!(w.report["format_version"], 3, "{report}");
    let per_commit = w.report["per_commit"].as_array().expect("per_commit");
    let adds_nothing = |c: &serde_json::Value| {
        [
            "data_files",
            "equality_delete_files",
            "dvs",
            "position_delete_files",
            "added_records",
        ]
        .iter()
        .all(|k| c[*k].as_u64() == Some(0))
    };
    let with_data: Vec<&serde_json::Value> =
        per_commit.iter().filter(|c| !adds_nothing(c)).collect();
    assert_eq!(
        with_data.len() as u64,
        checkpoints,
        "one commit with data per checkpoint: {report}"
    );
    for c in with_data {
        assert!(c["equality_delete_files"].as_u64() > Some(0), "{report}");
        assert!(c["dvs"].as_u64() > Some(0), "{report}");
    }
    assert_eq!(w.position_delete_files(), 0, "{report}");
    assert!(!w.rows.is_empty(), "{report}");
}

/// Java's rows of `branch` (one `serve` JVM per test reads them all).
fn java_rows(java: &mut JavaServer, branch: &str) -> Vec<String> {
    java.dump_rows(branch, false)
        .unwrap_or_else(|e| panic!("Java dump of {branch}: {e}"))
}

/// Java's DV loader over `branch`'s head (`check-dvs`).
fn java_check_dvs(java: &mut JavaServer, branch: &str) -> serde_json::Value {
    java.call(json!({"op": "check-dvs", "branch": branch}))
        .unwrap_or_else(|e| panic!("Java check-dvs of {branch}: {e}"))
}

/// eqdv's reader's rows of `branch` (a second opinion on a table with equality deletes).
async fn eqdv_rows(catalog: &GlueCatalog, name: &TableName, branch: &str) -> Vec<String> {
    let t = LoadedTable::load(catalog, name).await.expect("load");
    eqdv_workload::read::read_canonical(&t, branch)
        .await
        .expect("eqdv's reader")
}

/// Java reads Flink's model before the conversion (and so does eqdv's reader); eqdv
/// converts; Java reads the same rows after with no equality delete and loads every DV,
/// and PyIceberg and DuckDB read them too.
async fn convert_and_judge(
    java: &mut JavaServer,
    t: &JavaTable,
    catalog: &GlueCatalog,
    w: &FlinkWrite,
) {
    let name = t.name();
    common::assert_same_rows(
        "Iceberg Java (Flink's table)",
        &java_rows(java, "main"),
        &w.rows,
    );
    common::assert_same_rows(
        "eqdv's reader (Flink's table)",
        &eqdv_rows(catalog, &name, "main").await,
        &w.rows,
    );
    let r = convert(catalog, &name, &ConvertOptions::default())
        .await
        .unwrap_or_else(|e| panic!("eqdv convert on Flink's table {name}: {e}"));
    assert_eq!(r.outcome, Outcome::Converted, "{}", w.summary());
    assert!(r.dvs_written > 0, "{}", w.summary());
    common::assert_same_rows(
        "Iceberg Java (Flink's table, converted)",
        &java_rows(java, "main"),
        &w.rows,
    );
    let check = java_check_dvs(java, "main");
    assert_eq!(check["equality_delete_files"], 0, "Java: {check}");
    assert!(check["dvs"].as_u64() > Some(0), "{check}");
    common::judge_converted_glue(&name.to_string(), &w.rows);
    let duckdb = common::duckdb_read_glue(&name.to_string());
    common::assert_same_rows("DuckDB (Flink's table, converted)", &duckdb, &w.rows);
}

async fn in_place(partition: &str, seed: u64, rounds: u32) {
    let t = JavaTable::new(&format!("flink_{partition}"));
    let catalog = t.catalog().await;
    let mut java = JavaServer::start(&t);
    for round in 0..rounds {
        let create = (round == 0).then_some(partition);
        let w = write_flink(&t, seed + u64::from(round), 3, "main", create);
        assert_flink_shape(&w, 3);
        eprintln!("{partition}, round {round}: {}", w.summary());
        convert_and_judge(&mut java, &t, &catalog, &w).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flink_unpartitioned_upserts_convert_in_place_and_every_reader_agrees() {
    in_place("none", 31, 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flink_identity_partitioned_upserts_convert_in_place_and_every_reader_agrees() {
    in_place("identity", 41, 1).await;
}

/// Flink goes on writing to the converted table (its new equality deletes hit data files
/// that now carry eqdv's DVs), and eqdv converts it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flink_bucketed_upserts_convert_in_place_twice_and_every_reader_agrees() {
    in_place("bucket", 51, 2).await;
}

/// Applies Flink's staging commits to main, folding up to `per_commit` into one commit.
async fn apply(catalog: &GlueCatalog, name: &TableName, per_commit: usize) -> StagingReport {
    let staging = StagingOptions {
        snapshots_per_commit: per_commit,
        ..StagingOptions::new(STAGING)
    };
    apply_staging(catalog, name, &staging, &ConvertOptions::default())
        .await
        .unwrap_or_else(|e| panic!("eqdv apply_staging on Flink's table {name}: {e}"))
}

/// After an application of Flink's staging commits: main holds every one of them, Java
/// reads on main what it reads on staging and what Flink's model says, with no equality
/// delete on main; PyIceberg and DuckDB read the same on main.
async fn apply_and_judge(
    java: &mut JavaServer,
    t: &JavaTable,
    (catalog, per_commit): (&GlueCatalog, usize),
    w: &FlinkWrite,
) {
    let name = t.name();
    let staging = java_rows(java, STAGING);
    common::assert_same_rows("Iceberg Java (Flink's staging branch)", &staging, &w.rows);
    let report = apply(catalog, &name, per_commit).await;
    assert_eq!(report.outcome, Outcome::Converted, "{report:?}");
    let applied: usize = report.applied.iter().map(|a| a.folded.len()).sum();
    assert_eq!(applied as u64, w.commits(), "{report:?}");
    assert_eq!(
        report.applied.len() as u64,
        w.commits().div_ceil(per_commit as u64),
        "{report:?}"
    );
    assert_eq!(report.lag.snapshots, 0, "{report:?}");
    assert_eq!(
        report
            .applied
            .iter()
            .map(|a| a.staged_dvs as u64)
            .sum::<u64>(),
        w.dvs(),
        "every DV Flink staged is carried to main: {report:?}"
    );
    assert_eq!(
        report
            .applied
            .iter()
            .map(|a| a.equality_delete_files_applied as u64)
            .sum::<u64>(),
        w.equality_delete_files(),
        "{report:?}"
    );
    common::assert_same_rows(
        "Iceberg Java (staging after the application)",
        &java_rows(java, STAGING),
        &staging,
    );
    let main = java_rows(java, "main");
    common::assert_same_rows("Iceberg Java (main against staging)", &main, &staging);
    let check = java_check_dvs(java, "main");
    assert_eq!(check["equality_delete_files"], 0, "Java on main: {check}");
    common::judge_converted_glue(&name.to_string(), &w.rows);
    let duckdb = common::duckdb_read_glue(&name.to_string());
    common::assert_same_rows("DuckDB (main)", &duckdb, &w.rows);
}

/// Flink's sink commits to branch `staging` of a table whose main does not exist yet;
/// eqdv applies each of its commits to main; then Flink writes more checkpoints to
/// staging and eqdv applies those.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flink_staging_commits_apply_to_main_and_every_reader_agrees() {
    let t = JavaTable::new("flink_staging");
    let catalog = t.catalog().await;
    let name = t.name();
    let mut java = JavaServer::start(&t);

    let first = write_flink(&t, 61, 3, STAGING, Some("identity"));
    assert_flink_shape(&first, 3);
    eprintln!("staging, first run: {}", first.summary());
    let loaded = LoadedTable::load(&catalog, &name).await.expect("load");
    assert!(
        loaded.metadata.snapshot_for_ref("main").is_none(),
        "Flink wrote to main"
    );
    // One target commit per Flink commit first (as Flink's own converter makes), then
    // Flink's next commits folded into one.
    apply_and_judge(&mut java, &t, (&catalog, 1), &first).await;

    let second = write_flink(&t, 62, 2, STAGING, None);
    assert_flink_shape(&second, 2);
    eprintln!("staging, second run: {}", second.summary());
    apply_and_judge(&mut java, &t, (&catalog, 16), &second).await;

    let again = apply(&catalog, &name, 16).await;
    assert_eq!(again.outcome, Outcome::NothingToDo, "{again:?}");
}
