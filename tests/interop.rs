//! Apache Iceberg Java, the reference implementation, as the writer and the judge:
//! tables written the way streaming writers write them (data files + equality deletes,
//! RowDelta), converted by eqdv through Glue and S3, then read back by Java's generic
//! reader and checked by Java's own DV loader. Also Java writers and compactions racing
//! eqdv. DuckDB reads some of the tables too, from S3. Needs the test services and the
//! interop jar (`tests/run` provides both).

mod common;

#[path = "../shared/tests/support/services.rs"]
mod services;

#[path = "common/java.rs"]
mod java;

#[path = "../shared/tests/support/manifests.rs"]
mod manifests;

#[path = "../shared/tests/support/before_swap.rs"]
mod before_swap;

use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};

use before_swap::{BeforeSwap, BoxFuture, Swap, Then};
use eqdv::catalog::{Catalog, GlueCatalog, TableName};
use eqdv::convert::{ConvertOptions, Outcome, convert};
use eqdv::table::{LoadedTable, TableFiles};
use java::JavaTable;
use serde_json::Value;

async fn eqdv_rows(catalog: &dyn Catalog, name: &TableName) -> Vec<String> {
    let t = LoadedTable::load(catalog, name).await.expect("load");
    eqdv::read::read_canonical(&t, "main").await.expect("read")
}

async fn live_files(catalog: &dyn Catalog, name: &TableName) -> TableFiles {
    let t = LoadedTable::load(catalog, name).await.expect("load");
    let head = t.head("main").expect("head");
    TableFiles::read(&t, head.as_ref()).await.expect("files")
}

/// After a conversion: Java reads `expected`, Java's DV loader accepts every DV, no
/// equality delete is live, and eqdv's reader and PyIceberg agree.
async fn assert_java_agrees(t: &JavaTable, catalog: &dyn Catalog, expected: &[String]) {
    let after = t.dump();
    assert_eq!(after.len(), expected.len(), "Java's live row count changed");
    assert!(
        after == expected,
        "Java reads different rows after conversion"
    );
    let check = t.java_json("check-dvs", &[]);
    assert_eq!(check["equality_delete_files"], 0, "{check}");
    let files = live_files(catalog, &t.name()).await;
    assert_eq!(
        check["dvs"].as_u64(),
        Some(files.dvs.len() as u64),
        "{check}"
    );
    assert!(
        eqdv_rows(catalog, &t.name()).await == expected,
        "eqdv's reader disagrees with Java"
    );
    let py = common::pyiceberg_read_glue(&t.name().to_string());
    assert!(py.rows == expected, "PyIceberg disagrees with Java");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_cdc_tables_convert_and_java_agrees() {
    for (key, partition) in [
        ("long", "identity"),
        ("string", "bucket:3"),
        ("decimal", "none"),
        ("date", "identity"),
    ] {
        let t = JavaTable::new(&format!("cdc_{key}"));
        let written = t.java_json(
            "write-cdc",
            &[
                "--seed",
                "11",
                "--commits",
                "4",
                "--rows",
                "600",
                "--key",
                key,
                "--partition",
                partition,
            ],
        );
        assert!(
            written["equality_delete_files"].as_u64().unwrap() > 0,
            "{written}"
        );
        let before = t.dump();
        assert_eq!(
            before.len() as u64,
            written["expected_live_rows"].as_u64().unwrap()
        );
        let catalog = t.catalog().await;
        assert!(
            eqdv_rows(&catalog, &t.name()).await == before,
            "eqdv reads a Java table differently"
        );
        // Java's manifests take eqdv's fast decoding path and decode as iceberg-rust does.
        let loaded = LoadedTable::load(&catalog, &t.name()).await.expect("load");
        assert!(manifests::assert_manifests_decode_alike(&loaded).await > 0);

        let r = convert(&catalog, &t.name(), &ConvertOptions::default())
            .await
            .expect("convert");
        assert_eq!(r.outcome, Outcome::Converted, "{key}/{partition}");
        assert!(r.dvs_written > 0);
        assert_java_agrees(&t, &catalog, &before).await;
        let loaded = LoadedTable::load(&catalog, &t.name()).await.expect("load");
        manifests::assert_manifests_decode_alike(&loaded).await;
    }
}

/// DuckDB, reading S3 (MinIO) through its httpfs extension, reads Java-written CDC tables
/// as Java does, both with their equality deletes and after eqdv converted them to DVs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duckdb_reads_java_tables_on_s3_as_java_does() {
    for (key, partition) in [("long", "identity"), ("uuid", "bucket:3")] {
        let t = JavaTable::new(&format!("duckdb_{key}"));
        let written = t.java_json(
            "write-cdc",
            &[
                "--seed",
                "12",
                "--commits",
                "3",
                "--rows",
                "500",
                "--key",
                key,
                "--partition",
                partition,
            ],
        );
        assert!(
            written["equality_delete_files"].as_u64().unwrap() > 0,
            "{written}"
        );
        let before = t.dump();
        let name = t.name().to_string();
        assert!(
            common::duckdb_read_glue(&name) == before,
            "DuckDB applies Java's equality deletes differently from Java ({key}/{partition})"
        );

        let catalog = t.catalog().await;
        let r = convert(&catalog, &t.name(), &ConvertOptions::default())
            .await
            .expect("convert");
        assert_eq!(r.outcome, Outcome::Converted, "{key}/{partition}");
        assert!(
            t.dump() == before,
            "Java reads different rows after conversion"
        );
        assert!(
            common::duckdb_read_glue(&name) == before,
            "DuckDB reads the converted table differently from Java ({key}/{partition})"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conversion_during_a_concurrent_java_writer() {
    let t = JavaTable::new("concurrent");
    t.java(
        "write-cdc",
        &[
            "--seed",
            "5",
            "--commits",
            "3",
            "--rows",
            "800",
            "--key",
            "long",
            "--partition",
            "identity",
        ],
    );
    let catalog = t.catalog().await;
    // The writer appends and deletes for a few seconds while eqdv converts repeatedly.
    let writer = t
        .command(
            "concurrent-writer",
            &["--seconds", "12", "--seed", "9", "--rows", "20"],
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the Java writer");
    let (mut converted, mut conflicts, mut attempts) = (0, 0, 0);
    let started = std::time::Instant::now();
    while started.elapsed() < std::time::Duration::from_secs(11) {
        let r = convert(&catalog, &t.name(), &ConvertOptions::default())
            .await
            .expect("a conversion racing a Java writer must end cleanly");
        if r.outcome == Outcome::Converted {
            converted += 1;
        }
        conflicts += r.conflicts;
        attempts += r.commit_attempts;
    }
    let out = writer.wait_with_output().expect("Java writer");
    assert!(
        out.status.success(),
        "Java writer failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stats: Value = serde_json::from_slice(&out.stdout).expect("writer JSON");
    eprintln!(
        "eqdv: {converted} conversions, {attempts} commit attempts, {conflicts} conflicts; Java writer: {stats}"
    );
    assert!(converted > 0, "no conversion landed while the writer ran");
    assert_eq!(stats["failed_commits"], 0, "{stats}");

    // Nothing lost: Java (which applies the remaining equality deletes) reads the same
    // rows before and after a final conversion, and every key is live at most once.
    let before = t.dump();
    convert(&catalog, &t.name(), &ConvertOptions::default())
        .await
        .expect("final conversion");
    assert_java_agrees(&t, &catalog, &before).await;
    let mut keys: Vec<String> = before
        .iter()
        .map(|row| serde_json::from_str::<Vec<Value>>(row).expect("row")[0].to_string())
        .collect();
    let total = keys.len();
    keys.sort();
    keys.dedup();
    assert_eq!(
        keys.len(),
        total,
        "a key is live twice: a deleted row came back"
    );
}

/// What a Java writer commits right before eqdv's first swap (a real race, forced).
#[derive(Debug, Clone, Copy)]
enum JavaFirst {
    /// Compacts one of the data files eqdv is about to commit a DV for.
    Compact,
    /// Commits one more CDC batch (appends and new equality deletes).
    WriteCdc,
}

/// What Java commits before eqdv's first swap, on which table.
#[derive(Debug)]
struct JavaCommit {
    table: String,
    warehouse: String,
    database: String,
    action: JavaFirst,
    cdc_args: Vec<String>,
    done: AtomicBool,
}

/// A Glue catalog that lets Java commit right before eqdv's first swap.
type JavaBeforeSwap = BeforeSwap<GlueCatalog, JavaCommit>;

fn java_before_swap(
    inner: GlueCatalog,
    t: &JavaTable,
    action: JavaFirst,
    cdc_args: Vec<String>,
) -> JavaBeforeSwap {
    let state = JavaCommit {
        table: t.table.clone(),
        warehouse: t.warehouse.clone(),
        database: t.database.clone(),
        action,
        cdc_args,
        done: AtomicBool::new(false),
    };
    BeforeSwap::new(inner, state, java_commit)
}

fn java_commit(swap: Swap<'_, JavaCommit, GlueCatalog>) -> BoxFuture<'_, Then> {
    Box::pin(async move {
        if !swap.state.done.swap(true, Ordering::SeqCst) {
            let jt = JavaTable {
                warehouse: swap.state.warehouse.clone(),
                database: swap.state.database.clone(),
                table: swap.state.table.clone(),
            };
            let args: Vec<String> = match swap.state.action {
                JavaFirst::Compact => {
                    // Which data files does the pending snapshot add DVs for?
                    let pending = iceberg::spec::TableMetadata::read_from(
                        swap.inner.file_io(),
                        swap.new_metadata_location,
                    )
                    .await
                    .expect("pending metadata");
                    let t = LoadedTable {
                        name: swap.table.clone(),
                        pointer: swap.expected.clone(),
                        metadata: std::sync::Arc::new(pending),
                        file_io: swap.inner.file_io().clone(),
                    };
                    let head = t.head("main").unwrap();
                    let files = TableFiles::read(&t, head.as_ref()).await.unwrap();
                    let target = files
                        .dvs
                        .keys()
                        .next()
                        .expect("a DV in the pending snapshot");
                    vec!["rewrite".into(), "--file".into(), target.clone()]
                }
                JavaFirst::WriteCdc => {
                    let mut a = vec!["write-cdc".to_string()];
                    a.extend(swap.state.cdc_args.iter().cloned());
                    a
                }
            };
            let out = tokio::task::spawn_blocking(move || {
                let rest: Vec<&str> = args[1..].iter().map(String::as_str).collect();
                jt.java_json(&args[0], &rest)
            })
            .await
            .expect("java task");
            eprintln!("Java commit before eqdv's swap: {out}");
        }
        Then::Swap
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_of_a_dv_target_forces_a_replan() {
    let t = JavaTable::new("compact");
    t.java(
        "write-cdc",
        &[
            "--seed",
            "3",
            "--commits",
            "3",
            "--rows",
            "600",
            "--key",
            "long",
            "--partition",
            "none",
        ],
    );
    let before = t.dump();
    let catalog = java_before_swap(t.catalog().await, &t, JavaFirst::Compact, Vec::new());
    let r = convert(&catalog, &t.name(), &ConvertOptions::default())
        .await
        .expect("conversion after a concurrent compaction");
    assert_eq!(r.outcome, Outcome::Converted);
    assert_eq!(
        r.conflicts, 1,
        "the compaction's commit must have moved the pointer"
    );
    assert_eq!(
        r.replans, 1,
        "a removed DV target must force a re-plan, not a rebase"
    );
    // No deleted row came back, and no DV points at the compacted-away file.
    let direct = t.catalog().await;
    assert_java_agrees(&t, &direct, &before).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_converters_on_one_partition() {
    let t = JavaTable::new("two");
    t.java(
        "write-cdc",
        &[
            "--seed",
            "4",
            "--commits",
            "3",
            "--rows",
            "600",
            "--key",
            "string",
            "--partition",
            "none",
        ],
    );
    let before = t.dump();
    let (a, b) = (t.catalog().await, t.catalog().await);
    let name = t.name();
    let options = ConvertOptions::default();
    let (ra, rb) = tokio::join!(convert(&a, &name, &options), convert(&b, &name, &options));
    let (ra, rb) = (ra.expect("converter A"), rb.expect("converter B"));
    let outcomes = [ra.outcome, rb.outcome];
    assert!(outcomes.contains(&Outcome::Converted), "{outcomes:?}");
    assert!(
        outcomes
            .iter()
            .all(|o| matches!(o, Outcome::Converted | Outcome::NothingToDo)),
        "{outcomes:?}"
    );
    // live_files fails on two DVs for one data file; Java's check plans the scan too.
    assert_java_agrees(&t, &a, &before).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_commit_before_the_swap_is_rebased_over() {
    let t = JavaTable::new("rebase");
    let cdc: Vec<String> = [
        "--seed",
        "8",
        "--rows",
        "600",
        "--key",
        "long",
        "--partition",
        "identity",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let mut first: Vec<&str> = cdc.iter().map(String::as_str).collect();
    first.extend(["--commits", "3"]);
    t.java("write-cdc", &first);
    let mut more = cdc.clone();
    more.extend(["--commits".to_string(), "1".to_string()]);
    let catalog = java_before_swap(t.catalog().await, &t, JavaFirst::WriteCdc, more);
    let r = convert(&catalog, &t.name(), &ConvertOptions::default())
        .await
        .expect("conversion with a Java commit in between");
    assert_eq!(r.outcome, Outcome::Converted);
    assert_eq!(
        (r.conflicts, r.rebases, r.replans),
        (1, 1, 0),
        "expected one rebase"
    );
    // Java's new batch (its equality deletes still live) and eqdv's DVs both landed.
    let direct = t.catalog().await;
    let check = t.java_json("check-dvs", &[]);
    assert!(
        check["equality_delete_files"].as_u64().unwrap() > 0,
        "the Java batch is missing: {check}"
    );
    let before = t.dump();
    convert(&direct, &t.name(), &ConvertOptions::default())
        .await
        .expect("convert the rest");
    assert_java_agrees(&t, &direct, &before).await;
}

/// The other order: a compaction planned before eqdv's commit tries to commit after it.
/// eqdv's snapshot is a `delete` (not a `replace`), so Java's RewriteFiles validation sees
/// the new DVs for the file it rewrites. Whatever Java decides, no deleted row returns
/// and no DV dangles.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_started_before_the_conversion_commits_after() {
    let t = JavaTable::new("late_compact");
    t.java(
        "write-cdc",
        &[
            "--seed",
            "6",
            "--commits",
            "3",
            "--rows",
            "600",
            "--key",
            "long",
            "--partition",
            "none",
        ],
    );
    let before = t.dump();
    let start = t.java_json("check-dvs", &[])["snapshot_id"]
        .as_i64()
        .expect("snapshot id");
    let catalog = t.catalog().await;
    let r = convert(&catalog, &t.name(), &ConvertOptions::default())
        .await
        .expect("convert");
    assert_eq!(r.outcome, Outcome::Converted);
    let files = live_files(&catalog, &t.name()).await;
    let target = files
        .dvs
        .keys()
        .next()
        .expect("a data file with a DV")
        .clone();
    let out = t
        .command(
            "rewrite",
            &["--file", &target, "--from-snapshot", &start.to_string()],
        )
        .output()
        .expect("run java rewrite");
    eprintln!(
        "Java compaction from snapshot {start} after eqdv's commit: {} {}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let files = live_files(&catalog, &t.name()).await;
    if out.status.success() {
        assert!(
            !files.data_files.iter().any(|d| d.path() == target),
            "rewritten file still live"
        );
    } else {
        // Java's validation refused: the file and its DV stay.
        assert!(
            files.dvs.contains_key(&target),
            "the DV of the kept file is gone"
        );
    }
    assert_java_agrees(&t, &catalog, &before).await;
}
