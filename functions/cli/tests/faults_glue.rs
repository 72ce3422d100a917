//! The fault scenarios of `faults.rs` on the production parts: the real `eqdv convert
//! --catalog glue` binary, against the Glue emulator and MinIO from tests/services,
//! killed with SIGKILL after the Puffin file is written, and after the new metadata.json
//! is written but before Glue's UpdateTable.
//!
//! In both cases: Glue's pointer (metadata location and VersionId) does not move, the
//! rows are the generator's, the objects the dead attempt left on S3 are exactly the
//! ones that point leaves, a re-run converts the table, and `eqdv cleanup --older-than
//! 0s` deletes exactly the dead attempt's objects and nothing a live version references.
//! The oracle for "the dead attempt's objects" is the difference of two S3 listings
//! taken around the kill, not the cleanup's reachable walk.
//!
//! `tests/services/up` starts the services and writes tests/services/env; without its
//! variables these tests fail and say so, they never skip.

mod common;
mod kill;

use eqdv_test_support::{services, state};
use std::collections::BTreeSet;
use std::process::Output;
use std::time::Instant;

use common::{assert_exit, eqdv_command, eqdv_json, json, path_set};
use eqdv::catalog::{Catalog, GlueCatalog, GlueConfig, TableName};
use eqdv::cleanup::normalize_location;
use eqdv::table::{LoadedTable, TableFiles};
use eqdv::test_hooks::{AFTER_FILES, BEFORE_SWAP};
use eqdv_workload::generate::{expected_rows, generate};
use state::{TableState, expected_conversion};

/// A Glue catalog with a warehouse prefix of its own, and a fresh database name.
async fn glue_catalog(test: &str) -> (GlueCatalog, String) {
    let warehouse = services::require_services();
    let unique = services::unique_name(test);
    (
        connect(Some(format!(
            "{}/{unique}",
            warehouse.trim_end_matches('/')
        )))
        .await,
        format!("eqdv_{unique}"),
    )
}

async fn connect(warehouse: Option<String>) -> GlueCatalog {
    GlueCatalog::connect(GlueConfig {
        warehouse,
        ..Default::default()
    })
    .await
    .expect("glue catalog")
}

/// `eqdv COMMAND --json --catalog glue --table DB.NAME EXTRA...`, never paused.
fn eqdv(name: &TableName, command: &str, extra: &[&str]) -> Output {
    let table_args = ["--catalog", "glue", "--table", &name.to_string()].map(String::from);
    eqdv_json(command, &table_args, extra)
}

async fn load(catalog: &dyn Catalog, name: &TableName) -> LoadedTable {
    LoadedTable::load(catalog, name).await.expect("load table")
}

async fn head_files(catalog: &dyn Catalog, name: &TableName) -> TableFiles {
    let t = load(catalog, name).await;
    let head = t.head("main").expect("head");
    TableFiles::read(&t, head.as_ref())
        .await
        .expect("read files")
}

async fn assert_rows(catalog: &dyn Catalog, name: &TableName, expected: &[String], when: &str) {
    let rows = eqdv_workload::read::read_canonical(&load(catalog, name).await, "main")
        .await
        .expect("read rows");
    assert_eq!(rows.len(), expected.len(), "live row count {when}");
    assert!(
        rows == expected,
        "live rows differ from the generator's {when}"
    );
}

/// Converted: PyIceberg reads the generator's rows and accepts every DV, no equality
/// delete is live; eqdv's reader and DV checks agree.
async fn assert_converted(catalog: &dyn Catalog, name: &TableName, expected: &[String]) {
    eqdv_judges::judge_converted_glue(&name.to_string(), expected);
    assert_rows(catalog, name, expected, "after conversion").await;
    let files = head_files(catalog, name).await;
    assert!(
        files.equality_deletes.is_empty(),
        "{} equality delete files still live",
        files.equality_deletes.len()
    );
    assert!(!files.dvs.is_empty(), "no DV written");
    let checked = eqdv::verify::verify_dvs(&load(catalog, name).await, &files)
        .await
        .unwrap_or_else(|e| panic!("invalid DV: {e}"));
    assert_eq!(checked.dvs, files.dvs.len());
}

/// Runs `eqdv convert --catalog glue` until it reports pausing at `point`, then
/// SIGKILLs it.
fn convert_killed_at(name: &TableName, point: &str) {
    let mut command = eqdv_command();
    command
        .args(["convert", "--json", "--catalog", "glue", "--table"])
        .arg(name.to_string());
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

/// What the dead attempt must have left at `point` on top of `before`, given the
/// table's location: at either point (a conversion writes its Puffin file, manifests,
/// manifest list and metadata file at once, before UpdateTable), the next metadata
/// version and exactly what it references that `before` did not hold (its manifest
/// list, the new and rewritten manifests, the Puffin file).
async fn assert_attempt_files(
    catalog: &dyn Catalog,
    point: &str,
    before: &TableState,
    dead: &BTreeSet<String>,
    location: &str,
) {
    let location = normalize_location(location.trim_end_matches('/'));
    let data = format!("{location}/data/");
    let metadata = format!("{location}/metadata/");
    let outside: Vec<&String> = dead
        .iter()
        .filter(|n| !n.starts_with(&data) && !n.starts_with(&metadata))
        .collect();
    assert!(
        outside.is_empty(),
        "outside data/ and metadata/: {outside:#?}"
    );
    let count = |f: &dyn Fn(&str) -> bool| dead.iter().filter(|n| f(n)).count();
    let puffins = count(&|n| n.starts_with(&data) && n.ends_with(".puffin"));
    match point {
        AFTER_FILES | BEFORE_SWAP => {
            let written: Vec<&String> = dead
                .iter()
                .filter(|n| n.starts_with(&metadata) && n.ends_with(".metadata.json"))
                .collect();
            assert_eq!(written.len(), 1, "{dead:#?}");
            assert_eq!(
                metadata_version(written[0]),
                metadata_version(&before.pointer.metadata_location) + 1,
                "the dead attempt's metadata.json is not the next version: {}",
                written[0]
            );
            let referenced = before.written_by(catalog, written[0]).await;
            assert_eq!(
                &referenced, dead,
                "not exactly what the dead metadata references"
            );
            let lists =
                count(&|n| n.starts_with(&format!("{metadata}snap-")) && n.ends_with(".avro"));
            assert_eq!((puffins, lists), (1, 1), "{dead:#?}");
        }
        _ => unreachable!(),
    }
}

async fn killed_at(point: &str, test: &str, seed: u64) {
    let started = Instant::now();
    let (catalog, db) = glue_catalog(test).await;
    let name = TableName::new(db, "events");
    let report = generate(&catalog, &name, &services::glue_spec(seed))
        .await
        .expect("generate on Glue/S3");
    let expected = expected_rows(&report.state).unwrap();
    let location = load(&catalog, &name).await.location().to_string();
    assert!(location.starts_with("s3://"), "{location}");
    let before = TableState::read(&catalog, &name).await;
    assert!(
        before.pointer.version.is_some(),
        "Glue returned no VersionId"
    );
    assert!(before.rows == expected, "generated rows");
    assert!(!before.equality_deletes.is_empty());
    assert!(before.orphans.is_empty(), "{:#?}", before.orphans);
    let conversion = expected_conversion(&catalog, &name, &expected).await;
    eprintln!("{point}: generated in {:?}", started.elapsed());

    convert_killed_at(&name, point);

    // Glue's pointer and VersionId did not move (read through a new client), the table
    // is as generated, and the only new objects are the dead attempt's, orphans all.
    let fresh = connect(None).await;
    let killed = TableState::read(&fresh, &name).await;
    let dead: BTreeSet<String> = killed
        .objects
        .difference(&before.objects)
        .cloned()
        .collect();
    assert_attempt_files(&fresh, point, &before, &dead, &location).await;
    before.assert_failed(&killed, &dead);
    eprintln!("{point}: the dead attempt left {dead:#?}");

    // With the default safety age they are too young to delete.
    let out = eqdv(&name, "cleanup", &[]);
    assert_exit(&out, 0, "cleanup with the default age");
    let r = json(&out);
    assert_eq!(path_set(&r["deleted"]), BTreeSet::new());
    assert_eq!(path_set(&r["kept_too_young"]), dead);
    killed.assert_unchanged(&TableState::read(&fresh, &name).await);

    // A re-run converts the table, next to the dead attempt's objects.
    let out = eqdv(&name, "convert", &[]);
    assert_exit(&out, 0, "re-run of convert");
    let r = json(&out);
    assert_eq!(r["outcome"], "converted");
    assert_eq!(
        (r["commit_attempts"].as_u64(), r["conflicts"].as_u64()),
        (Some(1), Some(0)),
        "{r}"
    );
    let converted = TableState::read(&fresh, &name).await;
    killed.assert_converted_once(&converted, &conversion);
    assert_ne!(
        converted.pointer.version, before.pointer.version,
        "Glue VersionId not bumped"
    );
    let puffin = normalize_location(r["puffin_file"].as_str().expect("puffin_file"));
    assert!(
        converted
            .dvs
            .values()
            .all(|dv| normalize_location(&dv.puffin) == puffin),
        "the DVs are not in {puffin}"
    );
    assert_converted(&fresh, &name, &expected).await;

    // A dry run names exactly the dead objects and deletes nothing.
    let out = eqdv(&name, "cleanup", &["--older-than", "0s", "--dry-run"]);
    assert_exit(&out, 0, "cleanup dry run");
    assert_eq!(path_set(&json(&out)["eligible"]), dead);
    converted.assert_unchanged(&TableState::read(&fresh, &name).await);

    // Cleanup deletes exactly the dead attempt's objects; the table still reads.
    let out = eqdv(&name, "cleanup", &["--older-than", "0s"]);
    assert_exit(&out, 0, "cleanup --older-than 0s");
    let r = json(&out);
    assert_eq!(
        path_set(&r["deleted"]),
        dead,
        "cleanup deleted other objects"
    );
    assert_eq!(
        r["delete_failures"].as_array().map(Vec::len),
        Some(0),
        "{}",
        r["delete_failures"]
    );
    assert_eq!(path_set(&r["kept_too_young"]), BTreeSet::new());
    let cleaned = TableState::read(&fresh, &name).await;
    converted.assert_only_removed(&cleaned, &dead);
    assert_converted(&fresh, &name, &expected).await;
    let out = eqdv(&name, "convert", &[]);
    assert_exit(&out, 3, "nothing left to convert");
    cleaned.assert_unchanged(&TableState::read(&fresh, &name).await);
    eprintln!("{point}: {:?}", started.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn glue_sigkill_after_the_puffin_and_manifest_writes() {
    killed_at(AFTER_FILES, "kill_files", 71).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn glue_sigkill_between_metadata_write_and_update_table() {
    killed_at(BEFORE_SWAP, "kill_swap", 72).await;
}

/// Every S3 request of `eqdv convert` is answered 503 SlowDown (a persistent S3
/// failure; Glue is the real emulator): the CLI exits 1 and prints one short line that
/// names the file and the cause, without the HTTP response (headers); `--json` has the
/// same line as `error` and the raw chain as `detail`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn persistent_s3_failure_prints_one_short_line() {
    let (catalog, db) = glue_catalog("short_error").await;
    let name = TableName::new(db, "events");
    generate(&catalog, &name, &services::glue_spec(68))
        .await
        .expect("generate on Glue/S3");
    let before = TableState::read(&catalog, &name).await;
    let metadata = before.pointer.metadata_location.clone();
    let s3 = always_503();
    let args = [
        "convert",
        "--catalog",
        "glue",
        "--table",
        &name.to_string(),
        "--s3-endpoint",
        &s3,
    ];

    let out = eqdv_command().args(args).output().expect("run eqdv");
    assert_exit(&out, 1, "a persistent S3 failure fails");
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("{stderr}");
    let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(errors.len(), 1, "{stderr}");
    let line = errors[0];
    assert!(line.len() < 300, "{} chars: {line}", line.len());
    assert!(line.contains(&metadata), "names the file: {line}");
    assert!(line.contains("throttled") && line.contains("503"), "{line}");
    for dump in ["parts {", "headers", "content-length", "x-amz", "source:"] {
        assert!(!stderr.to_ascii_lowercase().contains(dump), "{stderr}");
    }

    let out = eqdv_command()
        .args(args)
        .arg("--json")
        .output()
        .expect("run eqdv");
    assert_exit(&out, 1, "a persistent S3 failure fails");
    let v = json(&out);
    assert_eq!(
        v["error"]
            .as_str()
            .map(|e| format!("error: {e}"))
            .as_deref(),
        Some(line)
    );
    let detail = v["detail"].as_str().expect("detail");
    assert!(
        detail.len() > line.len() && detail.contains("503"),
        "{detail}"
    );
    // No request reached S3 or moved Glue's pointer.
    before.assert_unchanged(&TableState::read(&catalog, &name).await);
}

/// An S3 endpoint that answers every request with 503 SlowDown.
fn always_503() -> String {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    std::thread::spawn(move || {
        for mut client in listener.incoming().flatten() {
            let mut reader = BufReader::new(client.try_clone().expect("clone"));
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 0) && line != "\r\n" {
                line.clear();
            }
            let body = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>SlowDown</Code>\
                        <Message>injected by the eqdv test</Message></Error>";
            let _ = write!(
                client,
                "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/xml\r\n\
                 Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    url
}
