//! The staging mode against Iceberg Java: a Java writer commits to branch `staging`
//! (appends, upserts, deletes by key, checkpoints shaped like Flink's upsert sink with
//! same-commit equality deletes and DVs, deletes by position in older files), Java
//! compacts `main` now and then (a foreign commit on the target), and eqdv applies the
//! staging snapshots to `main` in between. After each application Java reads on `main`
//! exactly what it reads on `staging` (data columns: `main` gives the rows row ids of
//! its own), `main` holds no equality delete, and every DV passes Java's loader; at the
//! end of each history PyIceberg and DuckDB read the same rows on `main`, and no
//! snapshot of `main` ever held an equality delete. Before each application, a dry run
//! with the key index and one without must plan the same DVs. Some histories convert the
//! staging branch in place now and then, and compact main and expire all but each
//! branch's head after an application (main's own record of what it applied is then
//! the table property).

mod common;
use eqdv_test_support::fault_proxy as proxy;

use eqdv::catalog::{Catalog, GlueCatalog, GlueConfig, TableName};
use eqdv::convert::{ConvertOptions, Outcome};
use eqdv::staging::{
    STAGING_BRANCH_PROPERTY, STAGING_SNAPSHOT_PROPERTY, StagingOptions, StagingReport,
    apply_staging,
};
use eqdv::table::LoadedTable;
use eqdv_test_support::java::{JavaServer, JavaTable};
use eqdv_test_support::key_index;
use serde_json::json;

const STAGING: &str = "staging";

fn staging_options() -> StagingOptions {
    StagingOptions::new(STAGING)
}

/// Applies the pending staging snapshots, folding up to `per_commit` into one commit.
async fn apply_folding(
    catalog: &GlueCatalog,
    name: &TableName,
    (index, dry_run): (bool, bool),
    per_commit: usize,
) -> eqdv::Result<StagingReport> {
    let options = ConvertOptions {
        resolve: key_index(index),
        dry_run,
        ..Default::default()
    };
    let staging = StagingOptions {
        snapshots_per_commit: per_commit,
        ..staging_options()
    };
    apply_staging(catalog, name, &staging, &options).await
}

/// Applies the pending staging snapshots one commit each.
async fn apply(
    catalog: &GlueCatalog,
    name: &TableName,
    index: bool,
    dry_run: bool,
) -> eqdv::Result<StagingReport> {
    apply_folding(catalog, name, (index, dry_run), 1).await
}

/// The staging snapshots `main` records applying, oldest first, and whether any of its
/// snapshots held a live equality delete (by their summaries).
async fn main_history(catalog: &GlueCatalog, name: &TableName) -> (Vec<i64>, bool) {
    let table = LoadedTable::load(catalog, name).await.expect("load");
    let mut applied = Vec::new();
    let mut held_equality_deletes = false;
    let mut next = table.metadata.snapshot_for_ref("main").cloned();
    while let Some(snapshot) = next {
        let summary = &snapshot.summary().additional_properties;
        if let Some(id) = summary.get(STAGING_SNAPSHOT_PROPERTY) {
            assert_eq!(
                summary.get(STAGING_BRANCH_PROPERTY).map(String::as_str),
                Some(STAGING)
            );
            applied.push(id.parse::<i64>().expect("a snapshot id"));
        }
        held_equality_deletes |= summary
            .get("total-equality-deletes")
            .is_some_and(|n| n != "0");
        next = snapshot
            .parent_snapshot_id()
            .and_then(|id| table.metadata.snapshot_by_id(id).cloned());
    }
    applied.reverse();
    (applied, held_equality_deletes)
}

/// The staging branch's snapshot ids, oldest first.
async fn staging_ancestry(catalog: &GlueCatalog, name: &TableName) -> Vec<i64> {
    let table = LoadedTable::load(catalog, name).await.expect("load");
    let mut ids = Vec::new();
    let mut next = table.metadata.snapshot_for_ref(STAGING).cloned();
    while let Some(snapshot) = next {
        ids.push(snapshot.snapshot_id());
        next = snapshot
            .parent_snapshot_id()
            .and_then(|id| table.metadata.snapshot_by_id(id).cloned());
    }
    ids.reverse();
    ids
}

/// Applies the pending staging snapshots (after two dry runs, with and without the key
/// index, that must plan the same DVs) and judges `main` with Java. `Err` is a failure.
async fn apply_and_judge(
    server: &mut JavaServer,
    catalog: &GlueCatalog,
    (t, per_commit): (&JavaTable, usize),
    log: &mut Vec<String>,
) -> Result<(), String> {
    let name = t.name();
    let planned = |r: eqdv::Result<StagingReport>| {
        r.map(|r| {
            r.applied
                .into_iter()
                .map(|a| a.planned_dvs)
                .collect::<Vec<_>>()
        })
        .map_err(|e| e.to_string())
    };
    let without = planned(apply_folding(catalog, &name, (false, true), per_commit).await)?;
    let with = planned(apply_folding(catalog, &name, (true, true), per_commit).await)?;
    if without != with {
        return Err(format!(
            "the key index changed the planned DVs: {without:?} without it, {with:?} with it"
        ));
    }
    let staging_before = server.dump_rows(STAGING, false)?;
    let report = apply_folding(catalog, &name, (true, false), per_commit)
        .await
        .map_err(|e| format!("apply: {e}"))?;
    log.push(format!(
        "eqdv apply: {:?}, {} snapshots in {} commits ({} DVs), lag {:?}",
        report.outcome,
        report.applied.iter().map(|a| a.folded.len()).sum::<usize>(),
        report.applied.len(),
        report.applied.iter().map(|a| a.dvs_written).sum::<usize>(),
        report.lag
    ));
    if report.lag.snapshots != 0 {
        return Err(format!("snapshots left pending: {:?}", report.lag));
    }
    let staging_after = server.dump_rows(STAGING, false)?;
    if staging_before != staging_after {
        return Err("the application changed what Java reads on the staging branch".into());
    }
    let main = server.dump_rows("main", false)?;
    if main != staging_after {
        let (extra, lost) = (
            common::multiset_minus(&main, &staging_after),
            common::multiset_minus(&staging_after, &main),
        );
        return Err(format!(
            "Java reads {} rows on main and {} on staging: {} only on main (first {:?}), {} only on staging (first {:?})",
            main.len(),
            staging_after.len(),
            extra.len(),
            extra.first(),
            lost.len(),
            lost.first()
        ));
    }
    let check = server.call(json!({"op": "check-dvs", "branch": "main"}))?;
    if check["equality_delete_files"] != 0 {
        return Err(format!("equality deletes live on main: {check}"));
    }
    let (applied, held) = main_history(catalog, &name).await;
    if held {
        return Err("a snapshot of main held an equality delete".into());
    }
    let staging = staging_ancestry(catalog, &name).await;
    // (Of those an expiry kept on both branches.)
    let positions: Vec<usize> = applied
        .iter()
        .filter_map(|id| staging.iter().position(|s| s == id))
        .collect();
    let applied_in_order = positions.windows(2).all(|w| w[0] < w[1]);
    let mut distinct = applied.clone();
    distinct.sort_unstable();
    distinct.dedup();
    if distinct.len() != applied.len() || !applied_in_order {
        return Err(format!(
            "main applied staging snapshots twice or out of order: {applied:?} (staging: {staging:?})"
        ));
    }
    Ok(())
}

/// One random history of staging commits, and compactions of main when `compactions`
/// (then without deletes by position in older staging files, which a compacted target
/// cannot take: see the refusal test); applications fold up to `per_commit` pending
/// staging snapshots into one commit.
async fn history(seed: u64, compactions: bool, per_commit: usize) -> Result<(), String> {
    let t = JavaTable::new(&format!("staging{seed}"));
    let mut server = JavaServer::start(&t);
    let catalog = t.catalog().await;
    let mut log = Vec::new();
    let fail = |log: &[String], why: String| {
        format!(
            "seed {seed}, table {}: {why}\n  operations:\n    {}",
            t.name(),
            log.join("\n    ")
        )
    };
    let created = server
        .call(json!({"op": "create", "seed": seed}))
        .map_err(|e| fail(&log, format!("create: {e}")))?;
    log.push(created["desc"].as_str().unwrap_or("?").to_string());
    for i in 0..10u64 {
        let op = seed * 100 + i;
        let done = server
            .call(json!({"op": "stage-op", "seed": op, "branch": STAGING, "position_deletes": !compactions}))
            .map_err(|e| fail(&log, format!("stage-op: {e}")))?;
        log.push(done["desc"].as_str().unwrap_or("?").to_string());
        if op % 3 != 2 {
            continue;
        }
        // Now and then a foreign commit on the target first: a compaction of main.
        if compactions && op.is_multiple_of(2) && server.branches().iter().any(|b| b == "main") {
            let done = server
                .call(json!({"op": "compact", "seed": op, "branch": "main"}))
                .map_err(|e| fail(&log, format!("compact main: {e}")))?;
            log.push(format!("main: {}", done["desc"].as_str().unwrap_or("?")));
        }
        // Now and then the staging branch converted in place first (what keeps its own
        // equality deletes from piling up): main must take it as a change of no row.
        if op % 5 == 2 {
            let staging_rows = server
                .dump_rows(STAGING, false)
                .map_err(|e| fail(&log, e))?;
            let report = eqdv::convert::convert(
                &catalog,
                &t.name(),
                &ConvertOptions {
                    branch: STAGING.into(),
                    ..Default::default()
                },
            )
            .await
            .map_err(|e| fail(&log, format!("convert staging in place: {e}")))?;
            log.push(format!(
                "eqdv convert staging in place: {:?}",
                report.outcome
            ));
            let after = server
                .dump_rows(STAGING, false)
                .map_err(|e| fail(&log, e))?;
            if after != staging_rows {
                return Err(fail(
                    &log,
                    "the in-place conversion changed staging's rows".into(),
                ));
            }
        }
        apply_and_judge(&mut server, &catalog, (&t, per_commit), &mut log)
            .await
            .map_err(|e| fail(&log, e))?;
        // Then, on a target that compacts, a compaction and an expiry that keeps only
        // each branch's head: main's newest eqdv snapshot is expired (its table property
        // then says what main reflects) and so is all of staging's applied history.
        if compactions && op.is_multiple_of(4) {
            for cmd in [
                json!({"op": "compact", "seed": op + 1, "branch": "main"}),
                json!({"op": "expire", "retain": 1}),
            ] {
                let done = server
                    .call(cmd)
                    .map_err(|e| fail(&log, format!("java: {e}")))?;
                log.push(format!("java: {}", done["desc"].as_str().unwrap_or("?")));
            }
        }
    }
    apply_and_judge(&mut server, &catalog, (&t, per_commit), &mut log)
        .await
        .map_err(|e| fail(&log, e))?;
    // The other readers, on main.
    let rows = server.dump_rows("main", false).map_err(|e| fail(&log, e))?;
    common::judge_converted_glue(&t.name().to_string(), &rows);
    let duckdb = common::duckdb_read_glue(&t.name().to_string());
    common::assert_same_rows("DuckDB (main)", &duckdb, &rows);
    // main's rows have row ids and sequence numbers of its own.
    let lineage = server.dump("main").map_err(|e| fail(&log, e))?;
    if lineage.iter().any(|r| r.ends_with(",null,null]")) {
        return Err(fail(&log, "main's rows lack row lineage".into()));
    }
    eprintln!("seed {seed}: passed\n    {}", log.join("\n    "));
    Ok(())
}

#[tokio::test]
async fn staging_histories_apply_to_main_and_every_reader_agrees() {
    let mut failures = Vec::new();
    for seed in 601..604 {
        // Seed 601 commits once per staging snapshot, the others fold them.
        let per_commit = if seed == 601 { 1 } else { 16 };
        if let Err(e) = history(seed, seed != 602, per_commit).await {
            eprintln!("FAILURE {e}");
            failures.push(e);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// Stages `n` commits on a new table and returns it with its server.
async fn staged_table(test: &str, seed: u64, n: u64) -> (JavaTable, JavaServer, GlueCatalog) {
    let t = JavaTable::new(test);
    let mut server = JavaServer::start(&t);
    let catalog = t.catalog().await;
    server
        .call(json!({"op": "create", "seed": seed}))
        .expect("create");
    stage(&mut server, seed * 100, n);
    (t, server, catalog)
}

/// `n` random writer commits to the staging branch.
fn stage(server: &mut JavaServer, first_seed: u64, n: u64) {
    for seed in first_seed..first_seed + n {
        server
            .call(json!({"op": "stage-op", "seed": seed, "branch": STAGING}))
            .expect("stage-op");
    }
}

/// Two applications at once (a redelivered event): each staging snapshot lands on main
/// once, in order; a third finds nothing to do; one at most applies as many as asked.
#[tokio::test]
async fn concurrent_applications_apply_each_staging_snapshot_once() {
    let (t, mut server, catalog) = staged_table("staging_race", 611, 5).await;
    let name = t.name();
    let one = StagingOptions {
        max_snapshots: Some(1),
        ..staging_options()
    };
    let first = apply_staging(&catalog, &name, &one, &ConvertOptions::default())
        .await
        .expect("apply one");
    assert_eq!(first.applied.len(), 1);
    assert_eq!(first.lag.snapshots, 4, "{first:?}");
    let (a, b) = tokio::join!(
        apply(&catalog, &name, true, false),
        apply(&catalog, &name, false, false)
    );
    let (a, b) = (a.expect("first racer"), b.expect("second racer"));
    assert_eq!(a.applied.len() + b.applied.len(), 4, "{a:?}\n{b:?}");
    let third = apply(&catalog, &name, true, false).await.expect("third");
    assert_eq!(third.outcome, Outcome::NothingToDo);
    assert_eq!(
        third.applied_before,
        staging_ancestry(&catalog, &name).await.last().copied()
    );
    let (applied, held) = main_history(&catalog, &name).await;
    assert!(!held);
    assert_eq!(applied, staging_ancestry(&catalog, &name).await);
    let staging = server.dump_rows(STAGING, false).expect("dump staging");
    let main = server.dump_rows("main", false).expect("dump main");
    common::assert_same_rows("Iceberg Java (main against staging)", &main, &staging);

    // Two more staging commits, folded into one commit: it records the newer of them,
    // and main reads as staging does.
    stage(&mut server, 61_190, 2);
    let folded = apply_folding(&catalog, &name, (true, false), 16)
        .await
        .expect("folded");
    assert_eq!(folded.applied.len(), 1, "{folded:?}");
    let staged = staging_ancestry(&catalog, &name).await;
    assert_eq!(
        folded.applied[0].folded,
        staged[staged.len() - 2..],
        "{folded:?}"
    );
    assert_eq!(main_history(&catalog, &name).await.0.last(), staged.last());
    let staging = server.dump_rows(STAGING, false).expect("dump staging");
    let main = server.dump_rows("main", false).expect("dump main");
    common::assert_same_rows("Iceberg Java (main after a folded commit)", &main, &staging);
}

/// What eqdv cannot apply faithfully is refused, naming the snapshot, and main is left
/// as it was: a staging commit that removes data files (a compaction on the staging
/// branch), a DV on a staging data file that main compacted away, and a staging branch
/// rolled back past what main applied.
#[tokio::test]
async fn a_staging_history_eqdv_cannot_apply_is_refused_and_main_untouched() {
    let (t, mut server, catalog) = staged_table("staging_refused", 621, 3).await;
    let name = t.name();
    apply(&catalog, &name, false, false).await.expect("apply");

    // A compaction on the staging branch removes data files.
    server
        .call(json!({"op": "compact", "seed": 1, "branch": STAGING}))
        .expect("compact staging");
    let compaction = *staging_ancestry(&catalog, &name).await.last().unwrap();
    let pointer = catalog.load_pointer(&name).await.expect("pointer");
    let err = apply(&catalog, &name, false, false)
        .await
        .expect_err("a staging compaction cannot be applied");
    let msg = err.to_string();
    assert!(
        msg.contains(&format!("staging snapshot {compaction}"))
            && msg.contains("removes data file"),
        "{msg}"
    );
    assert!(
        matches!(err, eqdv::Error::StagingDiverged { .. }),
        "{err:?}"
    );
    let now = catalog.load_pointer(&name).await.expect("pointer");
    assert_eq!(now.metadata_location, pointer.metadata_location);

    // A DV on a data file main no longer holds (an unpartitioned table of one file).
    let (t, mut server, catalog) = staged_table("staging_compacted_target", 601, 1).await;
    let name = t.name();
    apply(&catalog, &name, false, false).await.expect("apply");
    server
        .call(json!({"op": "compact", "seed": 1, "branch": "main"}))
        .expect("compact main");
    server
        .call(json!({"op": "delete-by-position", "seed": 1, "branch": STAGING}))
        .expect("delete by position");
    let pointer = catalog.load_pointer(&name).await.expect("pointer");
    let err = apply(&catalog, &name, true, false)
        .await
        .expect_err("a DV on a file main compacted cannot be applied");
    assert!(err.to_string().contains("no longer holds"), "{err}");
    let now = catalog.load_pointer(&name).await.expect("pointer");
    assert_eq!(now.metadata_location, pointer.metadata_location);

    // A staging branch rolled back past the snapshot main reflects.
    let (t, mut server, catalog) = staged_table("staging_rolled_back", 622, 3).await;
    let name = t.name();
    apply(&catalog, &name, false, false).await.expect("apply");
    let main_before = server.dump_rows("main", false).expect("dump main");
    server
        .call(json!({"op": "rollback-branch", "branch": STAGING}))
        .expect("rollback");
    server
        .call(json!({"op": "stage-op", "seed": 7, "branch": STAGING}))
        .expect("stage-op");
    let pointer = catalog.load_pointer(&name).await.expect("pointer");
    let err = apply(&catalog, &name, false, false)
        .await
        .expect_err("a rolled-back staging branch cannot be applied");
    assert!(err.to_string().contains("no longer an ancestor"), "{err}");
    let now = catalog.load_pointer(&name).await.expect("pointer");
    assert_eq!(now.metadata_location, pointer.metadata_location);
    common::assert_same_rows(
        "Iceberg Java (main after the refusal)",
        &server.dump_rows("main", false).expect("dump main"),
        &main_before,
    );
}

/// Glue applies an application's UpdateTable and its answer is lost (the connection
/// drops): the pointer read back shows it landed, the application goes on from there,
/// and no staging snapshot is applied twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_application_whose_answer_is_lost_is_applied_once() {
    let (t, mut server, direct) = staged_table("staging_lost", 631, 4).await;
    let name = t.name();
    let glue = proxy::Proxy::start(&std::env::var("AWS_ENDPOINT_URL_GLUE").unwrap_or_default());
    let catalog = GlueCatalog::connect(GlueConfig {
        warehouse: Some(t.warehouse.clone()),
        glue_endpoint: Some(glue.url()),
        ..Default::default()
    })
    .await
    .expect("glue catalog through the proxy");
    glue.inject_request(
        "POST",
        "X-Amz-Target: AWSGlue.UpdateTable",
        proxy::Fault::DropAfterForward,
        1,
    );
    let report = apply(&catalog, &name, false, false)
        .await
        .expect("the first commit landed: the application goes on");
    let injected = glue.injected();
    assert_eq!(injected.len(), 1, "{injected:#?}");
    assert_eq!(injected[0].upstream_status, Some(200), "Glue applied it");
    assert_eq!(report.applied.len(), 4, "{report:?}");
    let (applied, held) = main_history(&direct, &name).await;
    assert!(!held);
    assert_eq!(applied, staging_ancestry(&direct, &name).await);
    let staging = server.dump_rows(STAGING, false).expect("dump staging");
    let main = server.dump_rows("main", false).expect("dump main");
    common::assert_same_rows("Iceberg Java (main after a lost answer)", &main, &staging);
}
