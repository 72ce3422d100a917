//! Apache Iceberg Java, the reference implementation, as the writer and the judge:
//! tables written the way streaming writers write them (data files + equality deletes,
//! RowDelta), converted by eqdv through Glue and S3, then read back by Java's generic
//! reader and checked by Java's own DV loader. Also Java writers and compactions racing
//! eqdv. DuckDB reads some of the tables too, from S3. Needs the test services and the
//! interop jar (`tests/run` provides both).

mod common;

use eqdv_test_support::{before_swap, java, manifests, race, state};
use std::sync::atomic::{AtomicBool, Ordering};

use before_swap::{BeforeSwap, BoxFuture, Swap, Then};
use eqdv::catalog::{Catalog, GlueCatalog, TableName};
use eqdv::convert::{ConvertOptions, Outcome, convert};
use eqdv::table::{LoadedTable, TableFiles};
use java::{JavaTable, assert_java_agrees, assert_keys_unique, convert_beside_a_java_writer};
use race::{assert_lost_the_race, course, meeting, overtaken_by, winner_and_loser};
use serde_json::Value;
use state::{TableState, expected_conversion};

async fn eqdv_rows(catalog: &dyn Catalog, name: &TableName) -> Vec<String> {
    let t = LoadedTable::load(catalog, name).await.expect("load");
    eqdv_workload::read::read_canonical(&t, "main")
        .await
        .expect("read")
}

async fn live_files(catalog: &dyn Catalog, name: &TableName) -> TableFiles {
    let t = LoadedTable::load(catalog, name).await.expect("load");
    let head = t.head("main").expect("head");
    TableFiles::read(&t, head.as_ref()).await.expect("files")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_cdc_tables_convert_and_java_agrees() {
    let mut opened_early = 0;
    for (key, partition) in [
        ("long", "identity"),
        ("string", "bucket:3"),
        ("decimal", "none"),
        ("date", "identity"),
    ] {
        let t = JavaTable::new(&format!("cdc_{key}"));
        let written = t.write_cdc("11", "4", "600", key, partition);
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
        // Footers fetched while Java's delete files loaded are files the scan kept.
        let m = &r.resolve;
        assert_eq!(m.files_opened, m.candidate_files - m.pruned_by_bounds);
        assert!(
            m.footers_opened_early <= m.files_opened,
            "{key}/{partition}"
        );
        opened_early += m.footers_opened_early;
        assert_java_agrees(&t, &catalog, &before).await;
        let loaded = LoadedTable::load(&catalog, &t.name()).await.expect("load");
        manifests::assert_manifests_decode_alike(&loaded).await;
    }
    assert!(
        opened_early > 0,
        "no footer was fetched while delete files loaded"
    );
}

/// A Java-written CDC table converted in data ranges (`convert_in_ranges`), all
/// committed in one snapshot: Java reads the rows it read before and accepts every DV.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_cdc_table_converts_in_ranges_and_java_agrees() {
    let t = JavaTable::new("cdc_ranges");
    t.write_cdc("13", "4", "600", "long", "bucket:3");
    let before = t.dump();
    let catalog = t.catalog().await;
    let head = LoadedTable::load(&catalog, &t.name())
        .await
        .expect("load")
        .head("main")
        .expect("head")
        .map(|s| s.snapshot_id());
    let r = eqdv::convert::convert_in_ranges(&catalog, &t.name(), &ConvertOptions::default(), 3)
        .await
        .expect("convert in ranges");
    assert_eq!(r.outcome, Outcome::Converted);
    assert_eq!((r.ranges, r.commit_attempts), (3, 1));
    // One snapshot on the head the ranges read, its DVs in more than one range's file.
    let after = LoadedTable::load(&catalog, &t.name()).await.expect("load");
    let snapshot = after.head("main").expect("head").expect("a head");
    assert_eq!(snapshot.parent_snapshot_id(), head);
    let files = live_files(&catalog, &t.name()).await;
    let puffins: std::collections::BTreeSet<&str> =
        files.dvs.values().map(|dv| dv.path()).collect();
    assert!(puffins.len() > 1, "the DVs did not spread over ranges");
    assert_java_agrees(&t, &catalog, &before).await;
}

/// DuckDB, reading S3 (MinIO) through its httpfs extension, reads Java-written CDC tables
/// as Java does, both with their equality deletes and after eqdv converted them to DVs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duckdb_reads_java_tables_on_s3_as_java_does() {
    for (key, partition) in [("long", "identity"), ("uuid", "bucket:3")] {
        let t = JavaTable::new(&format!("duckdb_{key}"));
        t.write_cdc("12", "3", "500", key, partition);
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

/// Java's Parquet writer with bloom filters on a random (UUID) key, which column bounds
/// cannot prune: eqdv finds the filters where Java puts them (after the row groups, so
/// they come with the footer's read), skips the row groups they rule out, finds the same
/// rows as with the filters ignored, and Java reads the converted table as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_bloom_filters_prune_random_keys_and_java_agrees() {
    use eqdv::resolve::{ResolveOptions, resolve};
    let t = JavaTable::new("bloom_uuid");
    t.write_cdc_with("21", "1", "800", "uuid", "bucket:2", &["--bloom-filters"]);
    let before = t.dump();
    let catalog = t.catalog().await;
    let loaded = LoadedTable::load(&catalog, &t.name()).await.expect("load");
    let files = live_files(&catalog, &t.name()).await;
    let groups = eqdv::plan::group_equality_deletes(&loaded, &files).expect("groups");
    let ignore_filters = ResolveOptions {
        bloom_pruning: false,
        ..Default::default()
    };
    let with = resolve(&loaded, &files, &groups, &ResolveOptions::default())
        .await
        .expect("resolve");
    let without = resolve(&loaded, &files, &groups, &ignore_filters)
        .await
        .expect("resolve without filters");
    assert_eq!(with.positions, without.positions);

    // Java wrote several row groups per file and a filter on k0 for each, placed where a
    // footer read of eqdv's size already holds them. Of the row groups the scan without
    // filters read, those holding a deleted row are the ones a filter cannot rule out.
    let (mut row_groups, mut filters, mut holding) = (0, 0, 0u64);
    for data in &files.data_files {
        let file = eqdv::parquet_io::ParquetFile::open(
            &loaded.file_io,
            data.path(),
            Some(data.file.file_size_in_bytes()),
        )
        .await
        .expect("open");
        for rg in file.metadata().row_groups() {
            row_groups += 1;
            if let Some(offset) = rg.column(0).bloom_filter_offset() {
                filters += 1;
                assert!(
                    file.in_footer_read(offset),
                    "{}: a filter at {offset} is outside the footer's read",
                    data.path()
                );
            }
        }
        let Some(deleted) = without.positions.get(data.path()) else {
            continue;
        };
        let ends: Vec<u64> = file
            .row_group_rows()
            .iter()
            .scan(0, |end, rows| {
                *end += rows;
                Some(*end)
            })
            .collect();
        let mut with_a_row: Vec<usize> = deleted
            .iter()
            .map(|position| ends.partition_point(|&end| end <= position))
            .collect();
        with_a_row.dedup();
        holding += with_a_row.len() as u64;
    }
    assert!(
        row_groups > 4 * files.data_files.len(),
        "{row_groups} row groups in {} files",
        files.data_files.len()
    );
    assert_eq!(filters, row_groups, "a filter per row group");

    let (m, w) = (&with.metrics, &without.metrics);
    eprintln!(
        "bloom: {} filters read, {} row groups read ({holding} hold a deleted row), {} ruled out by a filter, {} files' key columns not read; without filters: {} row groups read",
        m.bloom_filters_read,
        m.row_groups_read,
        m.row_groups_pruned_by_bloom,
        m.files_pruned_by_footer,
        w.row_groups_read
    );
    assert_eq!(w.bloom_filters_read, 0);
    assert!(m.bloom_filters_read > 0);
    // The filters are in the footer's read, so each is probed; at 128 bytes for about
    // ten keys they rule out nearly every row group without a deleted row.
    let without_a_key = w.row_groups_read - holding;
    assert!(
        without_a_key > w.row_groups_read / 4,
        "{without_a_key} of {}",
        w.row_groups_read
    );
    assert!(
        m.row_groups_read - holding <= without_a_key / 10,
        "read {} row groups, {holding} of them holding a deleted row, of {} read without filters",
        m.row_groups_read,
        w.row_groups_read
    );

    let r = convert(&catalog, &t.name(), &ConvertOptions::default())
        .await
        .expect("convert");
    assert_eq!(r.outcome, Outcome::Converted);
    assert_java_agrees(&t, &catalog, &before).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conversion_during_a_concurrent_java_writer() {
    let t = JavaTable::new("concurrent");
    t.write_cdc("5", "3", "800", "long", "identity");
    let catalog = t.catalog().await;
    // The writer appends and deletes for a few seconds while eqdv converts repeatedly.
    convert_beside_a_java_writer(&t, &catalog, 12).await;

    // Nothing lost: Java (which applies the remaining equality deletes) reads the same
    // rows before and after a final conversion, and every key is live at most once.
    let before = t.dump();
    convert(&catalog, &t.name(), &ConvertOptions::default())
        .await
        .expect("final conversion");
    assert_java_agrees(&t, &catalog, &before).await;
    assert_keys_unique(&before);
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
                rest: false,
                s3tables: None,
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
                        kept_reads: Default::default(),
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
    t.write_cdc("3", "3", "600", "long", "none");
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

/// A Java CDC table for two converters: one partition, string keys.
fn two_converters_table(test: &str, seed: &str) -> JavaTable {
    let t = JavaTable::new(test);
    t.write_cdc(seed, "3", "600", "string", "none");
    t
}

/// Two converters (own Glue clients) plan on the same head; B converts the whole table
/// while A waits right before its UpdateTable. A conflicts once, plans again on B's
/// snapshot and has nothing to do (race.rs, `assert_lost_the_race`). The table is
/// converted once, and Java reads it as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_converter_overtaken_before_its_swap_plans_again() {
    let t = two_converters_table("overtaken", "4");
    let before = t.dump();
    let direct = t.catalog().await;
    let generated = TableState::read(&direct, &t.name()).await;
    let conversion = expected_conversion(&direct, &t.name(), &generated.rows).await;
    let a = overtaken_by(t.catalog().await, t.catalog().await);
    let ra = convert(&a, &t.name(), &ConvertOptions::default())
        .await
        .expect("converter A");
    let rb = a.state.report();
    assert_lost_the_race(&ra, &rb);
    let after = TableState::read(&direct, &t.name()).await;
    generated.assert_converted_once(&after, &conversion);
    assert_eq!(after.head, rb.new_snapshot_id);
    assert_java_agrees(&t, &direct, &before).await;
}

/// Two converters really concurrent on Glue, held only so that both plan on the same
/// head: Glue's VersionId lets exactly one UpdateTable land; the other conflicts once
/// and ends with nothing to do. Which one wins is the race's; the rest is exact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_converters_on_one_partition() {
    let t = two_converters_table("two", "5");
    let before = t.dump();
    let direct = t.catalog().await;
    let generated = TableState::read(&direct, &t.name()).await;
    let conversion = expected_conversion(&direct, &t.name(), &generated.rows).await;
    let both = std::sync::Arc::new(tokio::sync::Barrier::new(2));
    let a = meeting(t.catalog().await, both.clone());
    let b = meeting(t.catalog().await, both);
    let name = t.name();
    let options = ConvertOptions::default();
    let (ra, rb) = tokio::join!(convert(&a, &name, &options), convert(&b, &name, &options));
    let (ra, rb) = (ra.expect("converter A"), rb.expect("converter B"));
    eprintln!("A {:?}, B {:?}", course(&ra), course(&rb));
    let (winner, loser) = winner_and_loser(&ra, &rb);
    assert_lost_the_race(loser, winner);
    let after = TableState::read(&direct, &t.name()).await;
    generated.assert_converted_once(&after, &conversion);
    assert_eq!(after.head, winner.new_snapshot_id);
    assert_java_agrees(&t, &direct, &before).await;
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
    let direct = t.catalog().await;
    let generated = TableState::read(&direct, &t.name()).await;
    let planned = expected_conversion(&direct, &t.name(), &generated.rows).await;
    let catalog = java_before_swap(t.catalog().await, &t, JavaFirst::WriteCdc, more);
    let r = convert(&catalog, &t.name(), &ConvertOptions::default())
        .await
        .expect("conversion with a Java commit in between");
    assert_eq!(r.outcome, Outcome::Converted);
    // Java's batch only added files: the same Puffin file is committed on its snapshot.
    assert_eq!(
        (r.conflicts, r.rebases, r.replans, r.commit_attempts),
        (1, 1, 0, 2),
        "expected one rebase"
    );
    // Java's snapshot, then eqdv's on top of it with the DVs planned on the first head.
    let after = TableState::read(&direct, &t.name()).await;
    let head = after.head.expect("head");
    assert_eq!(after.head, r.new_snapshot_id);
    let ours = &after.snapshots[&head];
    assert_eq!(ours.converted_from, generated.head.map(|id| id.to_string()));
    let java = ours.parent.expect("a parent");
    assert_eq!(after.snapshots[&java].parent, generated.head);
    let mut new: Vec<i64> = after
        .snapshots
        .keys()
        .filter(|id| !generated.snapshots.contains_key(id))
        .copied()
        .collect();
    new.sort();
    let mut both = vec![java, head];
    both.sort();
    assert_eq!(new, both, "Java's snapshot and eqdv's, nothing else");
    let dvs: std::collections::BTreeMap<String, u64> = after
        .dvs
        .iter()
        .map(|(data, dv)| (data.clone(), dv.cardinality))
        .collect();
    assert_eq!(dvs, planned.dvs, "not the DVs planned on the first head");
    assert!(generated.data_files.is_subset(&after.data_files));
    assert!(
        after
            .equality_deletes
            .is_disjoint(&generated.equality_deletes)
    );
    assert_eq!(
        after.orphans, generated.orphans,
        "the first attempt left files"
    );
    // Java's new batch (its equality deletes still live) and eqdv's DVs both landed.
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
/// eqdv's snapshot is a `delete` (not a `replace`) that adds a DV for the file the
/// compaction rewrites, and Java validates a RewriteFiles against the delete files added
/// since its starting snapshot: with the starting snapshot's sequence number kept (as
/// `rewrite` does by default) it ignores new equality deletes but refuses a new position
/// delete or DV for a replaced file. So Java refuses, and the table stays eqdv's
/// conversion: the file and its DV live, the rows Java read before the conversion.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_started_before_the_conversion_commits_after() {
    let t = JavaTable::new("late_compact");
    t.write_cdc("6", "3", "600", "long", "none");
    let before = t.dump();
    let start = t.java_json("check-dvs", &[])["snapshot_id"]
        .as_i64()
        .expect("snapshot id");
    let catalog = t.catalog().await;
    let r = convert(&catalog, &t.name(), &ConvertOptions::default())
        .await
        .expect("convert");
    assert_eq!(r.outcome, Outcome::Converted);
    let converted = TableState::read(&catalog, &t.name()).await;
    let target = converted
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
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    eprintln!(
        "Java compaction from snapshot {start} after eqdv's commit: {} {stdout}{stderr}",
        out.status
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "Java committed a compaction over a new DV: {stdout}{stderr}"
    );
    assert!(
        stderr.contains(
            "ValidationException: Cannot commit, found new position delete for replaced data file"
        ) && stderr.contains(target.as_str()),
        "not Java's validation of new deletes for {target}: {stderr}"
    );
    // Refused: the table is eqdv's conversion as it was. The one new object is the
    // compacted file Java wrote before committing, which nothing references.
    let after = TableState::read(&catalog, &t.name()).await;
    let leftovers: std::collections::BTreeSet<String> = after
        .objects
        .difference(&converted.objects)
        .cloned()
        .collect();
    assert_eq!(leftovers.len(), 1, "{leftovers:#?}");
    let written = leftovers.first().unwrap();
    assert!(
        written.contains("/data/") && written.ends_with("-rewrite.parquet"),
        "{leftovers:#?}"
    );
    converted.assert_failed(&after, &leftovers);
    assert!(after.data_files.contains(&target) && after.dvs.contains_key(&target));
    assert_java_agrees(&t, &catalog, &before).await;
}

/// `{data file: [positions]}` of a Java JSON answer (check-dvs' `dv_positions`,
/// deleted-positions' `deleted`).
fn positions_by_file(v: &Value) -> std::collections::BTreeMap<String, Vec<u64>> {
    v.as_object()
        .unwrap_or_else(|| panic!("not a map of positions: {v}"))
        .iter()
        .map(|(file, positions)| {
            let p = positions
                .as_array()
                .expect("positions")
                .iter()
                .map(|p| p.as_u64().expect("position"))
                .collect();
            (file.clone(), p)
        })
        .collect()
}

/// Java writes DVs (its own DV writer), then equality deletes hit more rows of the same
/// data files. eqdv must merge: one DV per data file holding Java's positions and the
/// equality-deleted ones, Java's DVs replaced, and Java reads the rows it read before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn equality_deletes_merge_into_dvs_java_wrote() {
    let t = JavaTable::new("java_dvs");
    let cdc = [
        "--seed",
        "13",
        "--rows",
        "600",
        "--key",
        "long",
        "--partition",
        "identity",
    ];
    // The initial load alone (no equality deletes yet), one data file per region...
    t.java("write-cdc", &[&cdc[..], &["--commits", "0"]].concat());
    // ...Java's DVs on three of them...
    let written = t.java_json(
        "write-dvs",
        &["--seed", "2", "--files", "3", "--positions", "10"],
    );
    assert_eq!(written["dvs_written"], 3, "{written}");
    // ...then two commits of equality deletes, which hit rows of every initial file.
    t.java("write-cdc", &[&cdc[..], &["--commits", "2"]].concat());

    let java_dvs = t.java_json("check-dvs", &["--positions"]);
    assert_eq!(java_dvs["dvs"], 3, "{java_dvs}");
    assert!(
        java_dvs["equality_delete_files"].as_u64().unwrap() > 0,
        "{java_dvs}"
    );
    let old = positions_by_file(&java_dvs["dv_positions"]);
    // What Java's reader drops, file by file: the DVs' and the equality deletes' rows.
    let deleted = positions_by_file(&t.java_json("deleted-positions", &[])["deleted"]);
    for (file, positions) in &old {
        assert_eq!(positions.len(), 10, "{file}");
        let all = deleted
            .get(file)
            .expect("a file with a DV has deleted rows");
        assert!(
            positions.iter().all(|p| all.binary_search(p).is_ok()),
            "Java's reader returns a row of Java's DV in {file}"
        );
        assert!(
            all.len() > positions.len(),
            "no equality delete hits {file}: the merge would go untested"
        );
    }
    assert!(deleted.len() > old.len(), "{deleted:?}");
    let catalog = t.catalog().await;
    let java_entries: Vec<_> = live_files(&catalog, &t.name())
        .await
        .dvs
        .values()
        .map(|dv| dv.entry_key())
        .collect();
    assert_eq!(java_entries.len(), 3);

    let before = t.dump();
    let r = convert(&catalog, &t.name(), &ConvertOptions::default())
        .await
        .expect("convert");
    assert_eq!(r.outcome, Outcome::Converted);
    assert_java_agrees(&t, &catalog, &before).await;
    // Exactly one DV per data file with a deleted row, holding exactly the positions Java's
    // reader dropped before: Java's DV positions and the equality-deleted ones.
    let after = t.java_json("check-dvs", &["--positions"]);
    assert_eq!(after["equality_delete_files"], 0, "{after}");
    assert_eq!(after["dvs"].as_u64(), Some(deleted.len() as u64), "{after}");
    assert_eq!(positions_by_file(&after["dv_positions"]), deleted);
    let files = live_files(&catalog, &t.name()).await;
    for entry in &java_entries {
        assert!(
            files.dvs.values().all(|dv| &dv.entry_key() != entry),
            "Java's DV {entry:?} is still live next to eqdv's"
        );
    }
    for (file, positions) in &old {
        assert_eq!(
            files.dvs[file].file.record_count(),
            deleted[file].len() as u64,
            "the DV of {file} (Java's {} positions and the new ones)",
            positions.len()
        );
    }
}
