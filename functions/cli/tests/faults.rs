//! The real `eqdv` binary killed with SIGKILL at the two dangerous points of a commit:
//! after the Puffin file is written, and after the new metadata.json is written but
//! before the catalog pointer is swapped. A kill can happen anywhere; these are the
//! points where it leaves the most behind.
//!
//! In every case: the table's rows are unchanged, a re-run converts the table, and
//! `eqdv cleanup --older-than 0s` removes exactly the dead attempt's files (and nothing
//! a live version references). The pause points are the engine's test hooks
//! (`eqdv::test_hooks`, enabled by `EQDV_TEST_PAUSE_AT`); the orphan oracle is the shared
//! test support's own walk, not the cleanup code under test.

mod common;
mod kill;

use eqdv_workload::support;
use std::collections::BTreeSet;
use std::process::Output;
use std::time::Instant;

use common::{eqdv_command, eqdv_json, json};
use eqdv::test_hooks::{AFTER_FILES, BEFORE_SWAP};
use eqdv_workload::generate::{KeyType, PartitionKind, WorkloadSpec, expected_rows};
use support::state::{TableState, expected_conversion};
use support::*;

fn spec(seed: u64) -> WorkloadSpec {
    WorkloadSpec {
        seed,
        rows: 1_500,
        commits: 3,
        keys: vec![KeyType::Long, KeyType::String],
        partition: PartitionKind::Identity,
        changes_per_commit: 150,
        rows_per_file: 300,
        rows_per_row_group: 100,
        ..Default::default()
    }
}

fn table_args(w: &Warehouse) -> Vec<String> {
    vec![
        "--warehouse".into(),
        w.path().display().to_string(),
        "--table".into(),
        table().to_string(),
    ]
}

fn eqdv(w: &Warehouse, command: &str, extra: &[&str]) -> Output {
    eqdv_json(command, &table_args(w), extra)
}

fn path_set(value: &serde_json::Value) -> BTreeSet<String> {
    value
        .as_array()
        .expect("a JSON array of paths")
        .iter()
        .map(|p| eqdv::cleanup::normalize_location(p.as_str().expect("path")))
        .collect()
}

/// Runs `eqdv convert` until it reports pausing at `point`, then SIGKILLs it.
fn convert_killed_at(w: &Warehouse, point: &str) {
    let mut command = eqdv_command();
    command.arg("convert").args(table_args(w));
    kill::kill_when_paused(command, point);
}

/// The version number of a `<location>/metadata/<version>-<uuid>.metadata.json`.
fn metadata_version(location: &str) -> u64 {
    let file = location.rsplit('/').next().unwrap_or(location);
    file.split('-')
        .next()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("not a versioned metadata file: {location}"))
}

/// What the dead attempt must have left at `point` on top of `before`: at either
/// point (a conversion writes its Puffin file, manifests, manifest list and metadata
/// file at once), the next metadata version and exactly what it references that
/// `before` did not hold (its manifest list, the new delete manifest, the rewritten
/// manifests, the Puffin file).
async fn assert_attempt_files(
    w: &Warehouse,
    point: &str,
    before: &TableState,
    dead: &BTreeSet<String>,
) {
    let data = format!("{}/data/", table_dir(w));
    match point {
        AFTER_FILES | BEFORE_SWAP => {
            let metadata: Vec<&String> = dead
                .iter()
                .filter(|n| n.ends_with(".metadata.json"))
                .collect();
            assert_eq!(metadata.len(), 1, "{dead:#?}");
            assert_eq!(
                metadata_version(metadata[0]),
                metadata_version(&before.pointer.metadata_location) + 1,
                "not the next metadata version: {}",
                metadata[0]
            );
            let written = before.written_by(&w.catalog, metadata[0]).await;
            assert_eq!(
                &written, dead,
                "not exactly what the dead metadata references"
            );
            let count = |f: &dyn Fn(&str) -> bool| dead.iter().filter(|n| f(n)).count();
            let puffins = count(&|n| n.starts_with(&data) && n.ends_with(".puffin"));
            let lists = count(&|n| n.contains("/metadata/snap-") && n.ends_with(".avro"));
            assert_eq!((puffins, lists), (1, 1), "{dead:#?}");
        }
        _ => unreachable!(),
    }
}

fn table_dir(w: &Warehouse) -> String {
    eqdv::cleanup::normalize_location(&w.path().join("db.db").join("events").display().to_string())
}

async fn state(w: &Warehouse) -> TableState {
    // A new connection, as after a crash.
    TableState::read(&w.another_handle(), &table()).await
}

async fn killed_at(point: &str, seed: u64) {
    let started = Instant::now();
    let w = warehouse();
    let report = generate_table(&w.catalog, &spec(seed)).await;
    let expected = expected_rows(&report.state).unwrap();
    let before = state(&w).await;
    assert!(before.rows == expected, "generated rows");
    assert!(!before.equality_deletes.is_empty());
    assert!(before.orphans.is_empty(), "{:#?}", before.orphans);
    let conversion = expected_conversion(&w.catalog, &table(), &expected).await;

    convert_killed_at(&w, point);

    // The table is unchanged; the dead attempt's files are the only new objects, and
    // orphans all (the support's walk agrees).
    let killed = state(&w).await;
    let dead: BTreeSet<String> = killed
        .objects
        .difference(&before.objects)
        .cloned()
        .collect();
    assert_attempt_files(&w, point, &before, &dead).await;
    before.assert_failed(&killed, &dead);
    let orphans: BTreeSet<String> = orphan_files(&w.catalog)
        .await
        .into_iter()
        .map(|p| p.display().to_string())
        .collect();
    assert_eq!(orphans, dead);

    // With the default safety age they are too young to delete.
    let out = eqdv(&w, "cleanup", &[]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r = json(&out);
    assert_eq!(r["deleted"].as_array().map(Vec::len), Some(0));
    assert_eq!(path_set(&r["kept_too_young"]), dead);
    killed.assert_unchanged(&state(&w).await);

    // A re-run converts the table, next to the dead attempt's files.
    let out = eqdv(&w, "convert", &[]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r = json(&out);
    assert_eq!(r["outcome"], "converted");
    assert_eq!(
        (r["commit_attempts"].as_u64(), r["conflicts"].as_u64()),
        (Some(1), Some(0)),
        "{r}"
    );
    let converted = state(&w).await;
    killed.assert_converted_once(&converted, &conversion);
    assert_converted(&w.catalog, &expected).await;

    // A dry run names exactly the dead files and deletes nothing.
    let out = eqdv(&w, "cleanup", &["--older-than", "0s", "--dry-run"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(path_set(&json(&out)["eligible"]), dead);
    converted.assert_unchanged(&state(&w).await);

    // Cleanup removes exactly the dead attempt's files; the table still reads.
    let out = eqdv(&w, "cleanup", &["--older-than", "0s"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r = json(&out);
    assert_eq!(path_set(&r["deleted"]), dead);
    let cleaned = state(&w).await;
    converted.assert_only_removed(&cleaned, &dead);
    assert_no_orphans(&w.catalog).await;
    assert_converted(&w.catalog, &expected).await;
    let out = eqdv(&w, "convert", &[]);
    assert_eq!(out.status.code(), Some(3), "nothing left to convert");
    cleaned.assert_unchanged(&state(&w).await);
    eprintln!("{point}: {:?}", started.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_after_the_puffin_and_manifest_writes() {
    killed_at(AFTER_FILES, 61).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_between_metadata_write_and_pointer_swap() {
    killed_at(BEFORE_SWAP, 62).await;
}

/// A bad age is a usage error that names the value.
#[test]
fn cleanup_rejects_an_age_without_a_unit() {
    let w = warehouse();
    let out = eqdv_command()
        .arg("cleanup")
        .args(table_args(&w))
        .args(["--older-than", "72"])
        .output()
        .expect("run eqdv");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("'72'") && err.contains("unit"), "{err}");
}
