//! Faults on a local warehouse, and the orphan cleanup that mops up after them.
//!
//! Unknown commit outcomes (the swap may or may not have landed) must keep every file and
//! leave the decision to `cleanup`; `cleanup` must delete exactly what no metadata version
//! references, only when old enough and inside `data/` or `metadata/`, and nothing at all
//! when the metadata cannot be fully read. The oracle for "orphan" is the test support's
//! own walk (`orphan_files`), not the code under test. Kills of the real binary are in
//! functions/cli/tests/faults.rs; storage faults on S3 in tests/faults.rs.

use eqdv_test_support as support;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, SystemTime};

use eqdv::Error;
use eqdv::catalog::{Catalog, SqliteCatalog, TableName, TablePointer};
use eqdv::cleanup::{CleanupOptions, CleanupReport, cleanup, list_files, reachable_files};
use eqdv::convert::{ConvertOptions, Outcome, convert};
use eqdv_workload::generate::{KeyType, PartitionKind, WorkloadSpec, expected_rows};
use support::before_swap::{BeforeSwap, BoxFuture, Swap, Then};
use support::state::{TableState, expected_conversion};
use support::*;

fn spec(seed: u64) -> WorkloadSpec {
    WorkloadSpec {
        seed,
        rows: 1_200,
        commits: 3,
        keys: vec![KeyType::Long],
        partition: PartitionKind::Identity,
        changes_per_commit: 120,
        rows_per_file: 300,
        rows_per_row_group: 100,
        ..Default::default()
    }
}

fn now_only() -> CleanupOptions {
    CleanupOptions {
        older_than: Duration::ZERO,
        dry_run: false,
    }
}

fn local(path: &str) -> PathBuf {
    PathBuf::from(eqdv::cleanup::normalize_location(path))
}

fn paths(list: &[String]) -> BTreeSet<PathBuf> {
    list.iter().map(|p| local(p)).collect()
}

fn table_dir(w: &Warehouse) -> PathBuf {
    w.path().join("db.db").join("events")
}

fn plant(path: &Path, age: Option<Duration>) {
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, b"not referenced by any metadata").expect("write");
    if let Some(age) = age {
        let f = std::fs::File::options()
            .write(true)
            .open(path)
            .expect("open");
        f.set_modified(SystemTime::now() - age).expect("set mtime");
    }
}

fn set_age(path: &Path, age: Duration) {
    let f = std::fs::File::options()
        .write(true)
        .open(path)
        .expect("open");
    f.set_modified(SystemTime::now() - age).expect("set mtime");
}

async fn assert_rows(catalog: &dyn Catalog, expected: &[String]) {
    let rows = eqdv_workload::read::read_canonical(&load(catalog).await, "main")
        .await
        .expect("read rows");
    assert!(rows == expected, "live rows differ from the expected rows");
}

/// After generate + convert, every file under the table is reachable (the removed
/// equality deletes are still referenced by DELETED entries and older snapshots), and
/// the cleanup library agrees with the test support's independent walk.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clean_table_has_no_orphans_and_cleanup_deletes_nothing() {
    let w = warehouse();
    let report = generate_table(&w.catalog, &spec(1)).await;
    let expected = expected_rows(&report.state).unwrap();
    let removed: Vec<PathBuf> = files(&w.catalog)
        .await
        .equality_deletes
        .iter()
        .map(|f| local(f.path()))
        .collect();
    assert!(!removed.is_empty());
    let generated = TableState::read(&w.catalog, &table()).await;
    let conversion = expected_conversion(&w.catalog, &table(), &expected).await;
    convert(&w.catalog, &table(), &ConvertOptions::default())
        .await
        .expect("convert");
    let converted = TableState::read(&w.catalog, &table()).await;
    generated.assert_converted_once(&converted, &conversion);
    assert_no_orphans(&w.catalog).await;

    let before = all_files(&table_dir(&w));
    let r = cleanup(&w.catalog, &table(), &now_only()).await.unwrap();
    assert_eq!(r.orphans_found, 0, "{r:#?}");
    assert!(r.deleted.is_empty() && r.eligible.is_empty());
    assert_eq!(r.scanned, before.len());
    assert_eq!(r.reachable, before.len(), "every file on disk is reachable");
    assert_eq!(all_files(&table_dir(&w)), before);
    converted.assert_unchanged(&TableState::read(&w.catalog, &table()).await);

    // The library's listing and reachable set agree with the support walk.
    let t = load(&w.catalog).await;
    let listed: BTreeSet<PathBuf> = list_files(&t)
        .await
        .unwrap()
        .iter()
        .map(|f| local(&f.path))
        .collect();
    assert_eq!(listed, before);
    let reachable = reachable_files(&t).await.unwrap();
    for f in &before {
        assert!(
            reachable.contains(&f.display().to_string()),
            "{} not reachable",
            f.display()
        );
    }
    // The equality delete files the conversion removed are still referenced (by DELETED
    // entries and older snapshots), so they are kept.
    for f in &removed {
        assert!(f.exists(), "{} was deleted", f.display());
        assert!(reachable.contains(&f.display().to_string()));
    }
    assert_converted(&w.catalog, &expected).await;
}

/// Planted files: only old, unreferenced files in data/ and metadata/ go; young ones are
/// kept (a commit may be in flight), and files outside data/ and metadata/, hidden files
/// and version-hint.text are never deleted. A dry run deletes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cleanup_deletes_only_old_orphans_in_data_and_metadata() {
    let w = warehouse();
    let report = generate_table(&w.catalog, &spec(2)).await;
    let expected = expected_rows(&report.state).unwrap();
    convert(&w.catalog, &table(), &ConvertOptions::default())
        .await
        .expect("convert");
    let dir = table_dir(&w);
    let live = all_files(&dir);

    let four_days = Duration::from_secs(4 * 86_400);
    let old_data = dir.join("data/stray-old.parquet");
    let old_nested = dir.join("data/k0_bucket=1/eqdv-dv-stray.puffin");
    let old_metadata = dir.join("metadata/stray-manifest.avro");
    let young_metadata = dir.join("metadata/99999-young.metadata.json");
    let young_data = dir.join("data/stray-young.parquet");
    let unmanaged = [
        dir.join("other/keep.txt"),
        dir.join("data/.hidden.crc"),
        dir.join("data/_SUCCESS"),
        dir.join("metadata/version-hint.text"),
    ];
    for p in [&old_data, &old_nested, &old_metadata] {
        plant(p, Some(four_days));
    }
    for p in [&young_metadata, &young_data] {
        plant(p, None);
    }
    for p in &unmanaged {
        plant(p, Some(four_days));
    }
    let orphans: BTreeSet<PathBuf> = orphan_files(&w.catalog).await.into_iter().collect();
    assert_eq!(orphans.len(), 9, "the oracle sees every planted file");

    // Dry run at age 0: reports all managed orphans, deletes nothing.
    let dry = cleanup(
        &w.catalog,
        &table(),
        &CleanupOptions {
            older_than: Duration::ZERO,
            dry_run: true,
        },
    )
    .await
    .unwrap();
    assert_eq!(dry.orphans_found, 9);
    assert_eq!(
        paths(&dry.eligible),
        [
            &old_data,
            &old_nested,
            &old_metadata,
            &young_metadata,
            &young_data
        ]
        .into_iter()
        .cloned()
        .collect()
    );
    assert!(dry.deleted.is_empty());
    assert_eq!(
        paths(&dry.kept_unmanaged),
        unmanaged.iter().cloned().collect()
    );
    assert_eq!(
        orphan_files(&w.catalog).await.len(),
        9,
        "a dry run deleted files"
    );

    // Default age (3 days): only the four-day-old managed orphans go.
    let r = cleanup(&w.catalog, &table(), &CleanupOptions::default())
        .await
        .unwrap();
    assert_eq!(
        paths(&r.deleted),
        [&old_data, &old_nested, &old_metadata]
            .into_iter()
            .cloned()
            .collect()
    );
    assert_eq!(
        paths(&r.kept_too_young),
        [&young_metadata, &young_data]
            .into_iter()
            .cloned()
            .collect()
    );
    assert!(r.delete_failures.is_empty());
    for p in [&old_data, &old_nested, &old_metadata] {
        assert!(!p.exists(), "{} not deleted", p.display());
    }

    // Age 0: the young ones too; never the unmanaged ones, never a live file.
    let r = cleanup(&w.catalog, &table(), &now_only()).await.unwrap();
    assert_eq!(
        paths(&r.deleted),
        [&young_metadata, &young_data]
            .into_iter()
            .cloned()
            .collect()
    );
    let left: BTreeSet<PathBuf> = orphan_files(&w.catalog).await.into_iter().collect();
    assert_eq!(left, unmanaged.iter().cloned().collect());
    let mut expected_files = live.clone();
    expected_files.extend(unmanaged.iter().cloned());
    assert_eq!(all_files(&dir), expected_files, "a live file was deleted");
    assert_converted(&w.catalog, &expected).await;
}

/// A partial reachable set would delete live files: when a manifest of the current
/// snapshot is missing or a metadata file in the log is corrupt, cleanup fails and
/// deletes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cleanup_deletes_nothing_when_the_metadata_cannot_be_read() {
    let w = warehouse();
    generate_table(&w.catalog, &spec(3)).await;
    convert(&w.catalog, &table(), &ConvertOptions::default())
        .await
        .expect("convert");
    let dir = table_dir(&w);
    let stray = dir.join("data/stray.parquet");
    plant(&stray, Some(Duration::from_secs(10 * 86_400)));
    let planted = TableState::read(&w.catalog, &table()).await;
    let on_disk = all_files(&dir);

    // A corrupt (present but unreadable) metadata file in the log.
    let t = load(&w.catalog).await;
    let old_metadata = local(&t.metadata.metadata_log()[1].metadata_file);
    let saved = std::fs::read(&old_metadata).unwrap();
    std::fs::write(&old_metadata, b"{ not json").unwrap();
    let err = cleanup(&w.catalog, &table(), &now_only())
        .await
        .expect_err("a corrupt metadata file must stop cleanup");
    assert!(
        err.to_string()
            .contains(&old_metadata.display().to_string()),
        "the error names the file: {err}"
    );
    assert_eq!(
        all_files(&dir),
        on_disk,
        "deleted despite an unreadable metadata file"
    );
    std::fs::write(&old_metadata, saved).unwrap();

    // A missing manifest of the current snapshot.
    let f = files(&w.catalog).await;
    let manifest = local(&f.manifests[0].manifest_path);
    let saved = std::fs::read(&manifest).unwrap();
    std::fs::remove_file(&manifest).unwrap();
    let err = cleanup(&w.catalog, &table(), &now_only())
        .await
        .expect_err("a missing current manifest must stop cleanup");
    assert!(
        err.to_string().contains(&manifest.display().to_string()),
        "the error names the manifest: {err}"
    );
    let mut without_manifest = on_disk.clone();
    without_manifest.remove(&manifest);
    assert_eq!(
        all_files(&dir),
        without_manifest,
        "deleted despite a missing manifest"
    );
    std::fs::write(&manifest, saved).unwrap();
    planted.assert_unchanged(&TableState::read(&w.catalog, &table()).await);

    // Restored: the stray goes, nothing else.
    let r = cleanup(&w.catalog, &table(), &now_only()).await.unwrap();
    assert_eq!(paths(&r.deleted), BTreeSet::from([stray.clone()]));
    let stray = BTreeSet::from([stray.display().to_string()]);
    planted.assert_only_removed(&TableState::read(&w.catalog, &table()).await, &stray);
    assert_no_orphans(&w.catalog).await;
}

/// An old metadata file that is gone (as with write.metadata.delete-after-commit) is
/// skipped, not an error; everything the current metadata references stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_metadata_files_in_the_log_are_skipped() {
    let w = warehouse();
    let report = generate_table(&w.catalog, &spec(4)).await;
    let expected = expected_rows(&report.state).unwrap();
    let t = load(&w.catalog).await;
    let gone = local(&t.metadata.metadata_log()[0].metadata_file);
    std::fs::remove_file(&gone).unwrap();
    let before = all_files(&table_dir(&w));
    let r = cleanup(&w.catalog, &table(), &now_only()).await.unwrap();
    assert_eq!(r.missing_referenced, 1, "{r:#?}");
    assert_eq!(r.orphans_found, 0);
    assert_eq!(all_files(&table_dir(&w)), before);
    assert_rows(&w.catalog, &expected).await;
}

/// How the fake swap behaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SwapFault {
    /// The request is lost before the catalog applies it; the answer is lost too.
    LostBeforeApply,
    /// The catalog applies it, and the answer is lost.
    LostAfterApply,
}

/// The fault of [`UnknownOutcome`] and what is left of it.
#[derive(Debug)]
struct Fault {
    fault: SwapFault,
    /// Pointer reads that fail after a faulty swap.
    failing_reads: AtomicU32,
    /// Faulty swaps left.
    faults: AtomicU32,
}

/// A catalog whose swaps end with an unknown outcome, and whose pointer cannot be read
/// back for a while afterwards (the network is down).
type UnknownOutcome = BeforeSwap<SqliteCatalog, Fault>;

fn unknown_outcome(w: &Warehouse, fault: SwapFault) -> UnknownOutcome {
    readable_unknown_outcome(w, fault).before_load(fail_read_back)
}

/// `unknown_outcome` without the failing read-back.
fn readable_unknown_outcome(w: &Warehouse, fault: SwapFault) -> UnknownOutcome {
    let state = Fault {
        fault,
        failing_reads: AtomicU32::new(0),
        faults: AtomicU32::new(1),
    };
    BeforeSwap::new(w.another_handle(), state, lose_the_answer)
}

fn fail_read_back<'a>(
    s: &'a Fault,
    inner: &'a SqliteCatalog,
    _table: &'a TableName,
) -> Option<eqdv::Result<TablePointer>> {
    if s.failing_reads
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok()
    {
        return Some(Err(Error::Catalog {
            catalog: inner.name().into(),
            message: "injected: connection reset".into(),
            retryable: true,
            source: None,
        }));
    }
    None
}

fn lose_the_answer(swap: Swap<'_, Fault, SqliteCatalog>) -> BoxFuture<'_, Then> {
    Box::pin(async move {
        if swap
            .state
            .faults
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_err()
        {
            return Then::Swap;
        }
        if swap.state.fault == SwapFault::LostAfterApply
            && let Err(e) = swap
                .inner
                .swap_pointer(swap.table, swap.expected, swap.new_metadata_location)
                .await
        {
            return Then::Answer(Err(e));
        }
        swap.state.failing_reads.store(1, Ordering::SeqCst);
        Then::Answer(Err(Error::CommitStateUnknown {
            table: swap.table.to_string(),
            message: "injected: timeout after the request was sent".into(),
        }))
    })
}

fn deleted_set(r: &CleanupReport) -> BTreeSet<PathBuf> {
    paths(&r.deleted)
}

/// The objects a dead or unknown attempt left on top of `before`: exactly what its
/// metadata file (the one new `.metadata.json`, the next version) references that
/// `before` did not hold: the manifest list, the new manifests and the Puffin file.
async fn attempt_files(
    catalog: &dyn Catalog,
    before: &TableState,
    after: &TableState,
) -> BTreeSet<String> {
    let added: BTreeSet<&String> = after.objects.difference(&before.objects).collect();
    let metadata: Vec<&&String> = added
        .iter()
        .filter(|o| o.ends_with(".metadata.json"))
        .collect();
    assert_eq!(metadata.len(), 1, "one new metadata file: {added:#?}");
    let written = before.written_by(catalog, metadata[0]).await;
    let puffins = written.iter().filter(|o| o.ends_with(".puffin")).count();
    let lists = written
        .iter()
        .filter(|o| o.contains("/metadata/snap-"))
        .count();
    assert_eq!((puffins, lists), (1, 1), "{written:#?}");
    written
}

/// The swap never landed and the pointer cannot be read back: convert reports an
/// unknown outcome and keeps every file (they might be live). The table is unchanged;
/// cleanup later removes exactly those files; a re-run converts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_outcome_that_did_not_land_keeps_files_for_cleanup() {
    let w = warehouse();
    let report = generate_table(&w.catalog, &spec(5)).await;
    let expected = expected_rows(&report.state).unwrap();
    let before = TableState::read(&w.catalog, &table()).await;
    assert!(before.rows == expected);
    assert!(!before.equality_deletes.is_empty());

    let catalog = unknown_outcome(&w, SwapFault::LostBeforeApply);
    let err = convert(&catalog, &table(), &ConvertOptions::default())
        .await
        .expect_err("unknown outcome");
    assert!(matches!(err, Error::CommitStateUnknown { .. }), "{err}");

    // Kept: the Puffin file, the manifests, the manifest list and the metadata file.
    let after = TableState::read(&w.catalog, &table()).await;
    let attempt = attempt_files(&w.catalog, &before, &after).await;
    before.assert_failed(&after, &attempt);
    let orphans: BTreeSet<PathBuf> = orphan_files(&w.catalog).await.into_iter().collect();
    assert_eq!(orphans, attempt.iter().map(PathBuf::from).collect());

    // Too young by default; at age 0 exactly the attempt's files go.
    let r = cleanup(&w.catalog, &table(), &CleanupOptions::default())
        .await
        .unwrap();
    assert!(r.deleted.is_empty());
    assert_eq!(
        paths(&r.kept_too_young),
        attempt.iter().map(PathBuf::from).collect()
    );
    after.assert_unchanged(&TableState::read(&w.catalog, &table()).await);
    let r = cleanup(&w.catalog, &table(), &now_only()).await.unwrap();
    assert_eq!(deleted_set(&r), attempt.iter().map(PathBuf::from).collect());
    let cleaned = TableState::read(&w.catalog, &table()).await;
    after.assert_only_removed(&cleaned, &attempt);
    before.assert_unchanged(&cleaned);
    assert_no_orphans(&w.catalog).await;

    let conversion = expected_conversion(&w.catalog, &table(), &expected).await;
    let again = convert(&w.catalog, &table(), &ConvertOptions::default())
        .await
        .expect("re-run");
    assert_eq!(again.outcome, Outcome::Converted);
    before.assert_converted_once(&TableState::read(&w.catalog, &table()).await, &conversion);
    assert_converted(&w.catalog, &expected).await;
    assert_no_orphans(&w.catalog).await;
}

/// The swap landed but its answer was lost and the pointer could not be read back:
/// convert reports an unknown outcome, yet the table is converted. Cleanup must see the
/// attempt's files as live and delete none of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_outcome_that_landed_is_never_cleaned_up() {
    let w = warehouse();
    let report = generate_table(&w.catalog, &spec(6)).await;
    let expected = expected_rows(&report.state).unwrap();
    let before = TableState::read(&w.catalog, &table()).await;
    let conversion = expected_conversion(&w.catalog, &table(), &expected).await;
    let catalog = unknown_outcome(&w, SwapFault::LostAfterApply);
    let err = convert(&catalog, &table(), &ConvertOptions::default())
        .await
        .expect_err("unknown outcome");
    assert!(matches!(err, Error::CommitStateUnknown { .. }), "{err}");
    let after = TableState::read(&w.catalog, &table()).await;
    before.assert_converted_once(&after, &conversion);
    assert_converted(&w.catalog, &expected).await;
    assert_no_orphans(&w.catalog).await;
    let r = cleanup(&w.catalog, &table(), &now_only()).await.unwrap();
    assert_eq!(r.orphans_found, 0, "{r:#?}");
    assert!(r.deleted.is_empty(), "{r:#?}");
    after.assert_unchanged(&TableState::read(&w.catalog, &table()).await);
    assert_converted(&w.catalog, &expected).await;
}

/// The same lost answer, but the pointer can be read back: publish sees its own file
/// and reports success; nothing is left behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_answer_with_a_readable_pointer_is_a_success() {
    let w = warehouse();
    let report = generate_table(&w.catalog, &spec(7)).await;
    let expected = expected_rows(&report.state).unwrap();
    let before = TableState::read(&w.catalog, &table()).await;
    let conversion = expected_conversion(&w.catalog, &table(), &expected).await;
    // The read after the swap succeeds.
    let catalog = readable_unknown_outcome(&w, SwapFault::LostAfterApply);
    let r = convert(&catalog, &table(), &ConvertOptions::default())
        .await
        .expect("the read-back shows the commit landed");
    assert_eq!(r.outcome, Outcome::Converted);
    assert_eq!((r.commit_attempts, r.conflicts), (1, 0), "{r:#?}");
    let after = TableState::read(&w.catalog, &table()).await;
    before.assert_converted_once(&after, &conversion);
    assert_eq!(after.head, r.new_snapshot_id);
    assert_eq!(
        Some(&after.pointer.metadata_location),
        r.metadata_location.as_ref()
    );
    assert_converted(&w.catalog, &expected).await;
    assert_no_orphans(&w.catalog).await;
}

/// A table next to ours whose name starts with ours is not ours to clean.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cleanup_stays_inside_the_table_location() {
    let w = warehouse();
    generate_table(&w.catalog, &spec(8)).await;
    let neighbour = TableName::new("db", "events_2");
    eqdv_workload::generate::generate(
        &w.catalog,
        &neighbour,
        &WorkloadSpec {
            commits: 1,
            ..spec(9)
        },
    )
    .await
    .unwrap();
    let theirs = w.path().join("db.db/events_2/data/stray.parquet");
    let ours = table_dir(&w).join("data/stray.parquet");
    plant(&theirs, None);
    plant(&ours, None);
    set_age(&ours, Duration::from_secs(60));
    let r = cleanup(&w.catalog, &table(), &now_only()).await.unwrap();
    assert_eq!(deleted_set(&r), BTreeSet::from([ours]));
    assert!(theirs.exists());
}
