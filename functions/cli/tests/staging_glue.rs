//! The staging mode's faults on the production parts: the real `eqdv convert
//! --staging-branch staging --catalog glue` binary on a table Iceberg Java writes to
//! branch `staging`, against the Glue emulator and MinIO from tests/services.
//!
//! - Killed with SIGKILL after an application wrote its files, and after it wrote its
//!   metadata but before Glue's UpdateTable: Glue's pointer does not move, and a re-run
//!   applies every staging snapshot exactly once.
//! - Paused before the swap while Java commits to `staging` and compacts `main`: the
//!   swap meets a moved table, the application stands again on the new head, and in the
//!   end `main` reflects the new staging snapshot too.
//!
//! Each time Java reads on `main` exactly what it reads on `staging`, and `main` holds
//! no equality delete.

mod common;
mod kill;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::Duration;

use common::{assert_exit, eqdv_command, eqdv_json, json};
use eqdv::catalog::{Catalog, GlueCatalog, TableName};
use eqdv::staging::STAGING_SNAPSHOT_PROPERTY;
use eqdv::table::LoadedTable;
use eqdv::test_hooks::{AFTER_FILES, BEFORE_SWAP, PAUSE_AT_ENV, PAUSE_SECS_ENV, PAUSED_MARKER};
use eqdv_test_support::java::{JavaServer, JavaTable};
use serde_json::json as j;

const STAGING: &str = "staging";

/// A Java table with `n` commits on branch `staging` (the first creates it), none of them
/// deleting by position in older files (main is compacted in one test).
async fn staged(test: &str, seed: u64, n: u64) -> (JavaTable, JavaServer, GlueCatalog) {
    let t = JavaTable::new(test);
    let mut server = JavaServer::start(&t);
    let catalog = t.catalog().await;
    server
        .call(j!({"op": "create", "seed": seed}))
        .expect("create");
    stage(&mut server, seed * 100, n);
    (t, server, catalog)
}

fn stage(server: &mut JavaServer, first_seed: u64, n: u64) {
    for i in 0..n {
        server
            .call(
                j!({"op": "stage-op", "seed": first_seed + i, "branch": STAGING,
                "position_deletes": false}),
            )
            .expect("stage-op");
    }
}

/// `eqdv convert --staging-branch staging` on `name`, which must succeed; its output.
fn apply_all(name: &TableName, what: &str) -> std::process::Output {
    let out = eqdv_json("convert", &table_args(name), &["--staging-branch", STAGING]);
    assert_exit(&out, 0, what);
    out
}

fn table_args(name: &TableName) -> Vec<String> {
    ["--catalog", "glue", "--table", &name.to_string()]
        .map(String::from)
        .to_vec()
}

/// The staging snapshots main records applying (newest first), and the staging
/// branch's snapshots (newest first).
async fn applied_and_staged(catalog: &GlueCatalog, name: &TableName) -> (Vec<i64>, Vec<i64>) {
    let table = LoadedTable::load(catalog, name).await.expect("load");
    let walk = |branch: &str| {
        let mut out = Vec::new();
        let mut next = table.metadata.snapshot_for_ref(branch).cloned();
        while let Some(s) = next {
            out.push(s.clone());
            next = s
                .parent_snapshot_id()
                .and_then(|id| table.metadata.snapshot_by_id(id).cloned());
        }
        out
    };
    let applied = walk("main")
        .iter()
        .filter_map(|s| {
            s.summary()
                .additional_properties
                .get(STAGING_SNAPSHOT_PROPERTY)
                .and_then(|id| id.parse().ok())
        })
        .collect();
    let staged = walk(STAGING).iter().map(|s| s.snapshot_id()).collect();
    (applied, staged)
}

/// main reflects staging's head, each staging snapshot once, and Java reads the same rows on
/// both branches with no equality delete on main.
async fn assert_caught_up(server: &mut JavaServer, catalog: &GlueCatalog, name: &TableName) {
    let (applied, staged) = applied_and_staged(catalog, name).await;
    // Newest first: main reflects staging's head, and each of its records once, in
    // staging's order (a folded commit records the newest snapshot it applied).
    assert_eq!(
        applied.first(),
        staged.first(),
        "main reflects staging's head"
    );
    let positions: Vec<usize> = applied
        .iter()
        .map(|id| {
            staged
                .iter()
                .position(|s| s == id)
                .expect("a staging snapshot")
        })
        .collect();
    assert!(
        positions.windows(2).all(|w| w[0] < w[1]),
        "main's records {applied:?} against staging's history {staged:?}"
    );
    let main = server.dump_rows("main", false).expect("dump main");
    let staging = server.dump_rows(STAGING, false).expect("dump staging");
    eqdv_judges::assert_same_rows("Iceberg Java (main against staging)", &main, &staging);
    let check = server
        .call(j!({"op": "check-dvs", "branch": "main"}))
        .expect("check-dvs");
    assert_eq!(check["equality_delete_files"], 0, "{check}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_application_leaves_main_as_it_was_and_a_rerun_applies_it() {
    for (i, point) in [AFTER_FILES, BEFORE_SWAP].into_iter().enumerate() {
        let (t, mut server, catalog) = staged(&format!("staging_kill{i}"), 641 + i as u64, 3).await;
        let name = t.name();
        // main exists: one application first, then more to apply.
        apply_all(&name, "first application");
        stage(&mut server, 9_000, 3);
        let before = catalog.load_pointer(&name).await.expect("pointer");
        let main_before = server.dump_rows("main", false).expect("dump main");

        let mut command = eqdv_command();
        command
            .args(["convert", "--json", "--staging-branch", STAGING])
            .args(table_args(&name));
        kill::kill_when_paused(command, point);
        let after = catalog.load_pointer(&name).await.expect("pointer");
        assert_eq!(after.metadata_location, before.metadata_location, "{point}");
        eqdv_judges::assert_same_rows(
            &format!("Iceberg Java (main after a kill at {point})"),
            &server.dump_rows("main", false).expect("dump main"),
            &main_before,
        );

        let out = apply_all(&name, "re-run");
        let report = json(&out);
        // Folded into one commit by default.
        assert_eq!(
            report["applied"].as_array().map(Vec::len),
            Some(1),
            "{report}"
        );
        assert_eq!(
            report["applied"][0]["folded"].as_array().map(Vec::len),
            Some(3),
            "{report}"
        );
        assert_caught_up(&mut server, &catalog, &name).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commits_to_staging_and_main_during_an_application_are_met_and_applied() {
    let (t, mut server, catalog) = staged("staging_race_cli", 651, 3).await;
    let name = t.name();
    apply_all(&name, "first application");
    stage(&mut server, 9_100, 2);

    // Paused before each swap long enough for Java to commit to both branches once.
    let mut child = eqdv_command()
        .args(["convert", "--json", "--staging-branch", STAGING])
        .args(table_args(&name))
        .env(PAUSE_AT_ENV, BEFORE_SWAP)
        .env(PAUSE_SECS_ENV, "6")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn eqdv");
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.starts_with(PAUSED_MARKER) {
                let _ = tx.send(());
            }
        }
    });
    rx.recv_timeout(Duration::from_secs(120))
        .expect("eqdv paused before its first swap");
    server
        .call(j!({"op": "stage-op", "seed": 9_200, "branch": STAGING, "position_deletes": false}))
        .expect("a writer's commit to staging");
    server
        .call(j!({"op": "compact", "seed": 1, "branch": "main"}))
        .expect("a compaction of main");
    let out = child.wait_with_output().expect("eqdv");
    assert_exit(&out, 0, "the application that met two commits");
    let report = json(&out);
    assert!(
        report["conflicts"].as_u64().is_some_and(|n| n >= 1),
        "{report}"
    );
    assert_caught_up(&mut server, &catalog, &name).await;
}
