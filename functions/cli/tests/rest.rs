//! `eqdv convert --catalog rest`, the real binary, on tables Apache Iceberg Java wrote
//! through Iceberg Java's own REST server (tests/services), judged by Java's reader and
//! PyIceberg's REST client. Also the binary killed right before its commit: the table
//! does not move, a rerun converts, and `eqdv cleanup` removes exactly what the dead
//! attempt wrote (a REST commit writes no metadata file of eqdv's: the catalog writes
//! it).
//!
//! `tests/services/up` starts the services and writes tests/services/env; without its
//! variables these tests fail and say so, they never skip.

mod common;
mod kill;

use std::collections::BTreeSet;
use std::process::Output;

use common::{assert_exit, eqdv_command, eqdv_json, json, path_set};
use eqdv::catalog::Catalog;
use eqdv::catalog::TableName;
use eqdv::cleanup::normalize_location;
use eqdv::table::{LoadedTable, TableFiles};
use eqdv::test_hooks::BEFORE_SWAP;
use eqdv_test_support::java::JavaTable;
use eqdv_test_support::services::{rest_catalog, rest_uri};
use eqdv_test_support::state::{TableState, expected_conversion};

/// `eqdv COMMAND --json --catalog rest --rest-uri URI --table NS.NAME EXTRA...`.
fn eqdv(name: &TableName, command: &str, extra: &[&str]) -> Output {
    eqdv_json(command, &table_args(name), extra)
}

fn table_args(name: &TableName) -> Vec<String> {
    [
        "--catalog",
        "rest",
        "--rest-uri",
        &rest_uri(),
        "--table",
        &name.to_string(),
    ]
    .map(String::from)
    .to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eqdv_convert_with_the_rest_catalog_converts_a_java_table() {
    let t = JavaTable::new_rest("cli_rest");
    t.write_cdc("12", "3", "600", "long", "identity");
    let before = t.dump();

    let out = eqdv(&t.name(), "convert", &[]);
    assert_exit(&out, 0, "eqdv convert --catalog rest");
    let report = json(&out);
    assert_eq!(report["outcome"], "converted", "{report}");
    assert!(
        report["dvs_written"].as_u64().is_some_and(|n| n > 0),
        "{report}"
    );
    t.assert_converted(&before);

    // Nothing left: exit 3, as for every catalog.
    let out = eqdv(&t.name(), "convert", &[]);
    assert_exit(&out, 3, "nothing left to convert");

    // `eqdv backfill` of the namespace converts a second table Java wrote there, split
    // into data ranges in this process (one commit of all its ranges).
    let second = JavaTable {
        table: "orders".into(),
        ..t.clone()
    };
    second.write_cdc("14", "3", "600", "string", "bucket:3");
    let second_before = second.dump();
    let out = eqdv_command()
        .args(["backfill", "--json", "--catalog", "rest", "--rest-uri"])
        .arg(rest_uri())
        .args(["--database", &t.database])
        .env("EQDV_SPLIT_ABOVE_MB", "0")
        .env("EQDV_MAX_RANGES", "3")
        .env_remove(eqdv::test_hooks::PAUSE_AT_ENV)
        .output()
        .expect("run eqdv backfill");
    assert_exit(&out, 0, "eqdv backfill --catalog rest");
    let done = json(&out);
    let conversions = done["conversions"].as_array().expect("conversions");
    // One shard per bucket, each split into its ranges; the first table has nothing
    // left to convert.
    assert!(!conversions.is_empty(), "{done}");
    for c in conversions {
        assert_eq!(c["outcome"], "converted", "{done}");
        assert_eq!(c["ranges"], 3, "{done}");
        assert!(
            c["metadata_location"]
                .as_str()
                .is_some_and(|m| m.contains("/orders/metadata/")),
            "only the second table: {done}"
        );
    }
    second.assert_converted(&second_before);
    t.assert_converted(&before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rest_sigkill_before_the_commit_changes_nothing_and_a_rerun_converts() {
    let t = JavaTable::new_rest("cli_rest_kill");
    t.write_cdc("13", "3", "600", "long", "none");
    let before_rows = t.dump();
    let catalog = rest_catalog().await;
    let name = t.name();
    let before = TableState::read(&catalog, &name).await;
    let conversion = expected_conversion(&catalog, &name, &before.rows).await;
    let location = LoadedTable::load(&catalog, &name)
        .await
        .expect("load")
        .location()
        .to_string();

    let mut command = eqdv_command();
    command.arg("convert").arg("--json").args(table_args(&name));
    kill::kill_when_paused(command, BEFORE_SWAP);

    // The catalog's pointer did not move; the dead attempt left its Puffin file, its
    // manifests and manifest list, and no metadata file; Java reads as before.
    let killed = TableState::read(&catalog, &name).await;
    let dead: BTreeSet<String> = killed
        .objects
        .difference(&before.objects)
        .cloned()
        .collect();
    before.assert_failed(&killed, &dead);
    let location = normalize_location(location.trim_end_matches('/'));
    let count = |f: &dyn Fn(&str) -> bool| dead.iter().filter(|n| f(n)).count();
    assert_eq!(
        count(&|n| n.starts_with(&format!("{location}/data/")) && n.ends_with(".puffin")),
        1,
        "{dead:#?}"
    );
    assert_eq!(
        count(&|n| n.starts_with(&format!("{location}/metadata/snap-"))),
        1,
        "{dead:#?}"
    );
    assert_eq!(
        count(&|n| n.ends_with(".metadata.json")),
        0,
        "eqdv wrote a metadata file of its own: {dead:#?}"
    );
    t.assert_unconverted(&before_rows);

    // A rerun converts the table, next to the dead attempt's objects.
    let out = eqdv(&name, "convert", &[]);
    assert_exit(&out, 0, "re-run of convert");
    assert_eq!(json(&out)["outcome"], "converted");
    let converted = TableState::read(&catalog, &name).await;
    killed.assert_converted_once(&converted, &conversion);
    t.assert_converted(&before_rows);

    // Cleanup deletes exactly the dead attempt's objects; the table still reads.
    let out = eqdv(&name, "cleanup", &["--older-than", "0s"]);
    assert_exit(&out, 0, "cleanup --older-than 0s");
    let r = json(&out);
    assert_eq!(
        path_set(&r["deleted"]),
        dead,
        "cleanup deleted other objects"
    );
    let cleaned = TableState::read(&catalog, &name).await;
    converted.assert_only_removed(&cleaned, &dead);
    t.assert_converted(&before_rows);
}

/// The services' REST server vends the storage credentials with each table it loads
/// (`include-credentials`; tests/services/up). eqdv run with no credentials of its own
/// reads the table with the vended ones; when the run then fails (the table's data files
/// are gone), nothing it prints, at debug level, holds the vended secret.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vended_credentials_never_reach_what_a_failing_run_prints() {
    let secret = std::env::var("AWS_SECRET_ACCESS_KEY").expect("tests/services/env");
    let t = JavaTable::new_rest("cli_rest_vended");
    t.write_cdc("15", "3", "600", "long", "none");
    let catalog = rest_catalog().await;
    let name = t.name();
    let table = LoadedTable::load(&catalog, &name).await.expect("load");
    let files = TableFiles::read(&table, table.head("main").expect("main").as_ref())
        .await
        .expect("files");
    assert!(!files.equality_deletes.is_empty());
    let io = catalog.table_file_io(&name, &Default::default());
    for file in &files.data_files {
        io.delete(file.path()).await.expect("delete a data file");
    }

    let out = eqdv_command()
        .arg("convert")
        .arg("--json")
        .args(table_args(&name))
        .env("RUST_LOG", "debug")
        .env_remove("AWS_ACCESS_KEY_ID")
        .env_remove("AWS_SECRET_ACCESS_KEY")
        .env_remove("AWS_SESSION_TOKEN")
        .env_remove(eqdv::test_hooks::PAUSE_AT_ENV)
        .output()
        .expect("run eqdv convert");
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.status.success(), "converted without its data files");
    // It read the table's manifests with the vended credentials, and failed on a data
    // file it could not find.
    assert!(
        files.data_files.iter().any(|f| printed.contains(f.path())),
        "the failure names no data file: {printed}"
    );
    if let Some(at) = printed.find(&secret) {
        let line_start = printed[..at].rfind('\n').map_or(0, |n| n + 1);
        let line_end = printed[at..].find('\n').map_or(printed.len(), |n| at + n);
        panic!(
            "the vended secret was printed, in: {}",
            &printed[line_start..line_end]
        );
    }
}
