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

#[path = "../../../shared/tests/support/mod.rs"]
mod support;

mod common;
mod kill;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Output;
use std::time::Instant;

use common::{eqdv_command, eqdv_json, json};
use eqdv::generate::{KeyType, PartitionKind, WorkloadSpec, expected_rows};
use eqdv::test_hooks::{AFTER_PUFFIN, BEFORE_SWAP};
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

fn path_set(value: &serde_json::Value) -> BTreeSet<PathBuf> {
    value
        .as_array()
        .expect("a JSON array of paths")
        .iter()
        .map(|p| PathBuf::from(eqdv::cleanup::normalize_location(p.as_str().expect("path"))))
        .collect()
}

/// Runs `eqdv convert` until it reports pausing at `point`, then SIGKILLs it.
fn convert_killed_at(w: &Warehouse, point: &str) {
    let mut command = eqdv_command();
    command.arg("convert").args(table_args(w));
    kill::kill_when_paused(command, point);
}

/// What the dead attempt must have left at `point`.
fn assert_attempt_files(point: &str, dead: &BTreeSet<PathBuf>) {
    let names: Vec<String> = dead.iter().map(|p| p.display().to_string()).collect();
    let count = |f: &dyn Fn(&str) -> bool| names.iter().filter(|n| f(n)).count();
    let puffins = count(&|n| n.contains("/data/") && n.ends_with(".puffin"));
    let metadata_json = count(&|n| n.contains("/metadata/") && n.ends_with(".metadata.json"));
    let lists = count(&|n| n.contains("/metadata/snap-") && n.ends_with(".avro"));
    let manifests = count(&|n| n.contains("/metadata/") && n.ends_with(".avro")) - lists;
    match point {
        AFTER_PUFFIN => {
            assert_eq!((puffins, dead.len()), (1, 1), "{names:#?}");
        }
        BEFORE_SWAP => {
            assert_eq!((puffins, metadata_json, lists), (1, 1, 1), "{names:#?}");
            assert!(
                manifests >= 2,
                "new delete manifest + rewritten ones: {names:#?}"
            );
            assert_eq!(dead.len(), puffins + metadata_json + lists + manifests);
        }
        _ => unreachable!(),
    }
}

async fn killed_at(point: &str, seed: u64) {
    let started = Instant::now();
    let w = warehouse();
    let report = generate_table(&w.catalog, &spec(seed)).await;
    let expected = expected_rows(&report.state).unwrap();
    let dir = w.path().join("db.db").join("events");
    let pointer = eqdv::catalog::Catalog::load_pointer(&w.catalog, &table())
        .await
        .unwrap();
    let before = all_files(&dir);

    convert_killed_at(&w, point);

    // The table is unchanged.
    let after_kill = eqdv::catalog::Catalog::load_pointer(&w.another_handle(), &table())
        .await
        .unwrap();
    assert_eq!(after_kill, pointer, "the pointer moved");
    let rows = eqdv::read::read_canonical(&load(&w.catalog).await, "main")
        .await
        .unwrap();
    assert!(rows == expected, "rows changed after a kill at {point}");
    assert!(!files(&w.catalog).await.equality_deletes.is_empty());

    // The dead attempt's files are exactly the orphans.
    let dead: BTreeSet<PathBuf> = all_files(&dir).difference(&before).cloned().collect();
    assert_attempt_files(point, &dead);
    let orphans: BTreeSet<PathBuf> = orphan_files(&w.catalog).await.into_iter().collect();
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

    // A re-run converts the table, next to the dead attempt's files.
    let out = eqdv(&w, "convert", &[]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(json(&out)["outcome"], "converted");
    assert_converted(&w.catalog, &expected).await;
    let live = all_files(&dir);

    // A dry run names exactly the dead files and deletes nothing.
    let out = eqdv(&w, "cleanup", &["--older-than", "0s", "--dry-run"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(path_set(&json(&out)["eligible"]), dead);
    assert_eq!(all_files(&dir), live);

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
    assert_no_orphans(&w.catalog).await;
    let remaining: BTreeSet<PathBuf> = live.difference(&dead).cloned().collect();
    assert_eq!(all_files(&dir), remaining, "a live file was deleted");
    assert_converted(&w.catalog, &expected).await;
    let out = eqdv(&w, "convert", &[]);
    assert_eq!(out.status.code(), Some(3), "nothing left to convert");
    eprintln!("{point}: {:?}", started.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_after_the_puffin_write() {
    killed_at(AFTER_PUFFIN, 61).await;
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
