//! The real `eqdv` binary killed with SIGKILL at the dangerous points of a commit: after
//! the Puffin file is written, after the new metadata.json is written but before the
//! catalog pointer is swapped, and (with the key index) after the index's new run is
//! written but before its metadata file. A kill can happen anywhere; these are the
//! points where it leaves the most behind. `sigkill_at_every_pause_point_over_seeds`
//! loops over all of them and over seeds (`tests/crash/run` for a long run).
//!
//! In every case: the table's rows are unchanged, a re-run converts the table, and
//! `eqdv cleanup --older-than 0s` removes exactly the dead attempt's files (and nothing
//! a live version references). The pause points are the engine's test hooks
//! (`eqdv::test_hooks`, enabled by `EQDV_TEST_PAUSE_AT`); the orphan oracle is the shared
//! test support's own walk, not the cleanup code under test.

mod common;
mod kill;

use eqdv_test_support as support;
use std::collections::BTreeSet;
use std::process::Output;
use std::time::Instant;

use common::{assert_exit, eqdv_command, eqdv_json, json};
use eqdv::test_hooks::{AFTER_FILES, BEFORE_RANGE_RESULT, BEFORE_SWAP, KEY_INDEX_UPKEEP};
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

/// Runs `eqdv convert` (with `extra` arguments) until it reports pausing at `point`,
/// then SIGKILLs it.
fn convert_killed_at(w: &Warehouse, point: &str, extra: &[&str]) {
    let mut command = eqdv_command();
    command.arg("convert").args(table_args(w)).args(extra);
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
        KEY_INDEX_UPKEEP => {
            // The index's new run (leaves and covered list), before its metadata file,
            // the Puffin upload and the conversion's metadata.
            assert!(dead.len() >= 2, "{dead:#?}");
            let index = format!("{}/metadata/eqdv-key-index-", table_dir(w));
            assert!(
                dead.iter().all(|f| f.starts_with(&index)),
                "not only key index files: {dead:#?}"
            );
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
    killed_converting_at(point, spec(seed), &[]).await;
}

/// [`killed_at`] on a table generated by `spec`, with `convert_args` on every
/// conversion (e.g. `--key-index`); the dead attempt's files.
async fn killed_converting_at(
    point: &str,
    spec: WorkloadSpec,
    convert_args: &[&str],
) -> BTreeSet<String> {
    let started = Instant::now();
    let w = warehouse();
    let report = generate_table(&w.catalog, &spec).await;
    let expected = expected_rows(&report.state).unwrap();
    let before = state(&w).await;
    assert!(before.rows == expected, "generated rows");
    assert!(!before.equality_deletes.is_empty());
    assert!(before.orphans.is_empty(), "{:#?}", before.orphans);
    let conversion = expected_conversion(&w.catalog, &table(), &expected).await;

    convert_killed_at(&w, point, convert_args);

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
    let out = eqdv(&w, "convert", convert_args);
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
    let out = eqdv(&w, "convert", convert_args);
    assert_eq!(out.status.code(), Some(3), "nothing left to convert");
    cleaned.assert_unchanged(&state(&w).await);
    eprintln!("{point}: {:?}", started.elapsed());
    dead
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_after_the_puffin_and_manifest_writes() {
    killed_at(AFTER_FILES, 61).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_between_metadata_write_and_pointer_swap() {
    killed_at(BEFORE_SWAP, 62).await;
}

/// With the key index on, the dead attempt also wrote the index (leaves, covered list,
/// index metadata file) that its metadata names: orphans like the rest, removed by
/// cleanup, and the re-run builds the index again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_before_the_swap_with_the_key_index() {
    let mut spec = spec(63);
    spec.table_properties.insert(
        eqdv::key_index::MIN_FILES_PROPERTY.to_string(),
        "1".to_string(),
    );
    let dead = killed_converting_at(BEFORE_SWAP, spec, &["--key-index"]).await;
    let index_files: Vec<&String> = dead
        .iter()
        .filter(|f| f.contains("/metadata/eqdv-key-index"))
        .collect();
    // An index metadata file, a covered list and at least one leaf.
    assert!(index_files.len() >= 3, "{dead:#?}");
}

/// A split's tasks killed at their pause points, each in its own process as the state
/// machine runs them: a range after its Puffin file is written and before its result is
/// stored, then the fan-in after its metadata is written and before the swap. After each
/// kill the table is unchanged and everything new is an orphan; the tasks run again
/// commit the split once (PyIceberg reads the converted rows), and `cleanup` leaves no
/// orphan behind. Over `EQDV_CRASH_SEEDS` seeds (1 in CI) from `EQDV_CRASH_SEED_START`
/// (700), each seed with its own table, 2 to 4 ranges and another range killed;
/// `EQDV_CRASH_RESULTS=FILE` appends the run's totals (`tests/crash/run` sets both).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_in_a_splits_tasks_over_seeds() {
    let seeds = support::runs::env_u64("EQDV_CRASH_SEEDS", 1);
    let start = support::runs::env_u64("EQDV_CRASH_SEED_START", 700);
    let started = Instant::now();
    for seed in start..start + seeds {
        split_killed(seed).await;
    }
    // Every seed asserted that no row was lost and no file was left after cleanup.
    support::runs::record(
        "EQDV_CRASH",
        &[
            ("seed_start", start.to_string()),
            ("seeds", seeds.to_string()),
            (
                "points",
                format!("split: {BEFORE_RANGE_RESULT},{BEFORE_SWAP}"),
            ),
            ("kills", (2 * seeds).to_string()),
            ("rows_lost", "0".into()),
            ("files_left_after_cleanup", "0".into()),
            ("seconds", format!("{:.0}", started.elapsed().as_secs_f64())),
        ],
    );
}

/// One seed of [`sigkill_in_a_splits_tasks_over_seeds`].
async fn split_killed(seed: u64) {
    let w = warehouse();
    let report = generate_table(&w.catalog, &global_deletes_spec(seed)).await;
    let expected = expected_rows(&report.state).unwrap();
    let before = state(&w).await;
    assert!(before.orphans.is_empty(), "{:#?}", before.orphans);
    let ranges = 2 + seed % 3;
    let killed_range = (seed % ranges).to_string();
    let jobs = tempfile::tempdir().unwrap();
    let job = jobs.path().join("job.json").display().to_string();
    let warehouse = w.path().display().to_string();
    let task = |name: &str, extra: &[&str]| {
        let mut command = eqdv_command();
        command
            .args([
                "split",
                name,
                "--json",
                "--warehouse",
                &warehouse,
                "--job",
                &job,
            ])
            .args(extra);
        command
    };
    let out = eqdv_command()
        .args(["split", "job", "--json", "--warehouse", &warehouse])
        .args([
            "--table",
            &table().to_string(),
            "--ranges",
            &ranges.to_string(),
            "--output",
            &job,
        ])
        .output()
        .expect("run eqdv split job");
    assert_exit(&out, 0, "eqdv split");

    // A range dies between its Puffin file and its result: an orphan Puffin file.
    kill::kill_when_paused(
        task("range", &["--range", &killed_range]),
        BEFORE_RANGE_RESULT,
    );
    let killed = state(&w).await;
    let dead: BTreeSet<String> = killed
        .objects
        .difference(&before.objects)
        .cloned()
        .collect();
    assert!(
        dead.len() == 1 && dead.iter().all(|f| f.ends_with(".puffin")),
        "seed {seed}: not just range {killed_range}'s Puffin file: {dead:#?}"
    );
    before.assert_failed(&killed, &dead);

    // Every range runs again (the killed one rewrites its Puffin file under its fixed
    // name); the fan-in dies before its swap.
    for range in 0..ranges {
        let out = task("range", &["--range", &range.to_string()])
            .output()
            .expect("range");
        assert_exit(&out, 0, "eqdv split");
    }
    kill::kill_when_paused(task("commit", &[]), BEFORE_SWAP);
    let killed = state(&w).await;
    assert_eq!(
        killed.pointer, before.pointer,
        "seed {seed}: the fan-in's pointer moved"
    );
    assert!(killed.rows == before.rows, "seed {seed}: the rows changed");
    assert!(
        killed
            .objects
            .difference(&before.objects)
            .all(|f| killed.orphans.contains(f)),
        "seed {seed}: a new object is referenced"
    );

    // The fan-in again: the split commits once.
    let out = task("commit", &[]).output().expect("commit");
    assert_exit(&out, 0, "eqdv split");
    assert_eq!(json(&out)["outcome"], "converted", "seed {seed}");
    assert_converted(&w.catalog, &expected).await;
    let out = eqdv(&w, "cleanup", &["--older-than", "0s"]);
    assert_exit(&out, 0, "eqdv split");
    assert_no_orphans(&w.catalog).await;
    assert_converted(&w.catalog, &expected).await;
}

/// A kill at every pause point of a conversion that keeps its key index (its index
/// update among them), over seeds: each time the table is unchanged, the dead attempt's
/// files are exactly the orphans, `cleanup` removes exactly them after a re-run
/// converted, and PyIceberg reads the converted rows. `EQDV_CRASH_SEEDS` seeds (1 in
/// CI) from `EQDV_CRASH_SEED_START` (700), each with its own table layout;
/// `EQDV_CRASH_RESULTS=FILE` appends the run's totals (`tests/crash/run` sets both).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_at_every_pause_point_over_seeds() {
    let seeds = support::runs::env_u64("EQDV_CRASH_SEEDS", 1);
    let start = support::runs::env_u64("EQDV_CRASH_SEED_START", 700);
    let points = [AFTER_FILES, BEFORE_SWAP, KEY_INDEX_UPKEEP];
    let started = Instant::now();
    let mut kills = 0;
    for seed in start..start + seeds {
        for point in points {
            let mut spec = spec(seed);
            spec.partition = match seed % 3 {
                0 => PartitionKind::Identity,
                1 => PartitionKind::Bucket(3),
                _ => PartitionKind::None,
            };
            spec.table_properties.insert(
                eqdv::key_index::MIN_FILES_PROPERTY.to_string(),
                "1".to_string(),
            );
            killed_converting_at(point, spec, &["--key-index"]).await;
            kills += 1;
        }
    }
    // Every kill asserted that no row was lost and no file was left after cleanup: a
    // run that records its totals had none.
    support::runs::record(
        "EQDV_CRASH",
        &[
            ("seed_start", start.to_string()),
            ("seeds", seeds.to_string()),
            ("points", points.join(",")),
            ("kills", kills.to_string()),
            ("rows_lost", "0".into()),
            ("files_left_after_cleanup", "0".into()),
            ("seconds", format!("{:.0}", started.elapsed().as_secs_f64())),
        ],
    );
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
