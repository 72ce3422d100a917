//! Amazon S3 Tables: tables that Apache Iceberg Java wrote into a table bucket of the
//! test services' S3 Tables (moto's emulator, which checks the version token and serves
//! the bucket's storage, refusing object listings and deletes as S3 Tables does),
//! converted by eqdv through `GetTableMetadataLocation` and
//! `UpdateTableMetadataLocation`, judged by Java's reader and PyIceberg. Also a Java
//! writer and a second converter racing eqdv (a stale version token), and the answers a
//! deployment meets that the emulator cannot give on demand (an update applied but
//! answered 500 or never answered, 503s, refused credentials), injected by a proxy in
//! front of the API.
//!
//! A table bucket's storage cannot be listed, so the table state here is the referenced
//! objects (`TableState::read_referenced`): orphans are S3 Tables' to collect.
//!
//! Needs the test services and the interop jar (`tests/run` provides both).

mod common;
use eqdv_test_support::fault_proxy;

use eqdv::catalog::{Catalog, TableName};
use eqdv::convert::{ConvertOptions, Outcome, convert};
use eqdv::table::{LoadedTable, TableFiles};
use eqdv_test_support::java::{
    JavaTable, assert_java_agrees, assert_keys_unique, convert_beside_a_java_writer,
};
use eqdv_test_support::race::{assert_lost_the_race, overtaken_by};
use eqdv_test_support::services::{
    s3tables_bucket, s3tables_catalog, s3tables_catalog_at, s3tables_endpoint,
};
use eqdv_test_support::state::{TableState, expected_conversion};
use eqdv_test_support::{assert_key_index_agrees, key_index};
use fault_proxy::{Fault, Proxy};

async fn load(catalog: &dyn Catalog, name: &TableName) -> LoadedTable {
    LoadedTable::load(catalog, name).await.expect("load")
}

async fn live_files(catalog: &dyn Catalog, name: &TableName) -> TableFiles {
    let t = load(catalog, name).await;
    let head = t.head("main").expect("head");
    TableFiles::read(&t, head.as_ref()).await.expect("files")
}

/// A CDC table Java wrote into a new table bucket of the test's own, with equality
/// deletes to convert.
async fn java_table(test: &str, seed: &str, key: &str, partition: &str) -> JavaTable {
    let bucket = s3tables_bucket(test).await;
    let t = JavaTable::new_s3tables(test, &bucket);
    t.write_cdc(seed, "3", "600", key, partition);
    t
}

fn bucket_of(t: &JavaTable) -> &str {
    t.s3tables.as_deref().expect("an S3 Tables table")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_tables_convert_through_s3_tables_and_java_agrees() {
    for (key, partition) in [("long", "identity"), ("string", "bucket:3")] {
        let t = java_table(&format!("s3t_{key}"), "31", key, partition).await;
        let before = t.dump();
        let catalog = s3tables_catalog(bucket_of(&t)).await;
        let name = t.name();

        let table = load(&catalog, &name).await;
        assert!(
            table.location().contains("--table-s3"),
            "S3 Tables placed the table: {}",
            table.location()
        );
        assert_key_index_agrees(&table, &live_files(&catalog, &name).await, key).await;

        // Converted once: one new snapshot on the old head, its metadata file eqdv's,
        // the pointer swapped under a new version token.
        let state = TableState::read_referenced(&catalog, &name).await;
        let conversion = expected_conversion(&catalog, &name, &state.rows).await;
        let options = ConvertOptions {
            resolve: key_index(true),
            ..Default::default()
        };
        let report = convert(&catalog, &name, &options)
            .await
            .expect("convert through S3 Tables");
        assert_eq!(report.outcome, Outcome::Converted, "{key}: {report:?}");
        let after = TableState::read_referenced(&catalog, &name).await;
        state.assert_converted_once(&after, &conversion);
        assert_ne!(
            after.pointer.version, state.pointer.version,
            "S3 Tables gave the swapped pointer a new version token"
        );
        assert_eq!(
            report.metadata_location.as_deref(),
            Some(after.pointer.metadata_location.as_str())
        );
        assert_java_agrees(&t, &catalog, &before).await;

        let again = convert(&catalog, &name, &options).await.expect("again");
        assert_eq!(again.outcome, Outcome::NothingToDo, "{key}: {again:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conversion_during_a_concurrent_java_writer_through_s3_tables() {
    let t = java_table("s3t_concurrent", "5", "long", "identity").await;
    let catalog = s3tables_catalog(bucket_of(&t)).await;
    convert_beside_a_java_writer(&t, &catalog, 10).await;

    let before = t.dump();
    convert(&catalog, &t.name(), &ConvertOptions::default())
        .await
        .expect("final conversion");
    assert_java_agrees(&t, &catalog, &before).await;
    assert_keys_unique(&before);
}

/// Two converters plan on the same head; B converts the whole table while A waits
/// right before its swap. S3 Tables refuses A's version token (ConflictException), A
/// reads the pointer back, finds B's metadata, plans again and has nothing to do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_converter_with_a_stale_version_token_plans_again() {
    let t = java_table("s3t_overtaken", "4", "string", "none").await;
    let before = t.dump();
    let bucket = bucket_of(&t);
    let direct = s3tables_catalog(bucket).await;
    let state = TableState::read_referenced(&direct, &t.name()).await;
    let conversion = expected_conversion(&direct, &t.name(), &state.rows).await;
    let a = overtaken_by(
        s3tables_catalog(bucket).await,
        s3tables_catalog(bucket).await,
    );
    let ra = convert(&a, &t.name(), &ConvertOptions::default())
        .await
        .expect("converter A");
    let rb = a.state.report();
    assert_lost_the_race(&ra, &rb);
    let after = TableState::read_referenced(&direct, &t.name()).await;
    state.assert_converted_once(&after, &conversion);
    assert_java_agrees(&t, &direct, &before).await;
}

/// eqdv's client of `t`'s table bucket with its API behind a fault proxy.
async fn proxied(t: &JavaTable) -> (Proxy, eqdv::catalog::S3TablesCatalog) {
    let proxy = Proxy::start(&s3tables_endpoint());
    let catalog = s3tables_catalog_at(bucket_of(t), &proxy.url()).await;
    (proxy, catalog)
}

/// The table's pointer: `GetTableMetadataLocation` (GET) and
/// `UpdateTableMetadataLocation` (PUT).
const POINTER_PATH: &str = "/metadata-location";

/// An update S3 Tables applied but answered with a 500, or whose answer was lost: the
/// outcome is unknown (the SDK's retry meets a stale token), eqdv reads the pointer back,
/// finds its own metadata and reports the conversion done, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_applied_but_answered_with_an_error_is_read_back_as_landed() {
    for (test, fault) in [
        ("s3t_500", Fault::ForwardThenStatus(500)),
        ("s3t_lost", Fault::DropAfterForward),
    ] {
        let t = java_table(test, "6", "long", "none").await;
        let before = t.dump();
        let direct = s3tables_catalog(bucket_of(&t)).await;
        let state = TableState::read_referenced(&direct, &t.name()).await;
        let conversion = expected_conversion(&direct, &t.name(), &state.rows).await;
        let (proxy, catalog) = proxied(&t).await;
        proxy.inject("PUT", POINTER_PATH, fault, 1);
        let report = convert(&catalog, &t.name(), &ConvertOptions::default())
            .await
            .unwrap_or_else(|e| panic!("{test}: {e}"));
        assert_eq!(proxy.injected().len(), 1, "{test}: the fault was not met");
        assert_eq!(
            proxy.injected()[0].upstream_status,
            Some(200),
            "{test}: S3 Tables did not apply the update"
        );
        assert_eq!(report.outcome, Outcome::Converted, "{test}: {report:?}");
        assert_eq!(report.commit_attempts, 1, "{test}: {report:?}");
        let after = TableState::read_referenced(&direct, &t.name()).await;
        state.assert_converted_once(&after, &conversion);
        assert_java_agrees(&t, &direct, &before).await;
    }
}

/// An update refused before it applied (a 503, retried by the SDK) converts once; an
/// API that refuses every update fails the conversion, retryable, with an error naming
/// the catalog and the table, and leaves the table as it was; a rerun converts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn updates_refused_before_they_applied_change_nothing() {
    let t = java_table("s3t_503", "7", "long", "none").await;
    let before = t.dump();
    let direct = s3tables_catalog(bucket_of(&t)).await;
    let state = TableState::read_referenced(&direct, &t.name()).await;
    let conversion = expected_conversion(&direct, &t.name(), &state.rows).await;
    let (proxy, catalog) = proxied(&t).await;
    proxy.inject("PUT", POINTER_PATH, Fault::Status(503), 1);
    let report = convert(&catalog, &t.name(), &ConvertOptions::default())
        .await
        .expect("a 503 is retried");
    assert_eq!(report.outcome, Outcome::Converted, "{report:?}");
    assert_eq!(proxy.injected().len(), 1);
    let after = TableState::read_referenced(&direct, &t.name()).await;
    state.assert_converted_once(&after, &conversion);
    assert_java_agrees(&t, &direct, &before).await;

    let t = java_table("s3t_503_always", "8", "long", "none").await;
    let before = t.dump();
    let direct = s3tables_catalog(bucket_of(&t)).await;
    let state = TableState::read_referenced(&direct, &t.name()).await;
    let (proxy, catalog) = proxied(&t).await;
    proxy.inject("PUT", POINTER_PATH, Fault::Status(503), 1000);
    let options = ConvertOptions {
        commit_retries: Some(1),
        ..Default::default()
    };
    let err = convert(&catalog, &t.name(), &options)
        .await
        .expect_err("an API that refuses every update fails the conversion");
    assert!(err.retryable(), "a 503 is worth a later retry: {err}");
    let text = err.to_string();
    assert!(
        text.contains(&t.name().to_string()),
        "the error names the table: {text}"
    );
    let unchanged = TableState::read_referenced(&direct, &t.name()).await;
    assert_eq!(unchanged, state, "the table changed");
    t.assert_unconverted(&before);
    let report = convert(&direct, &t.name(), &ConvertOptions::default())
        .await
        .expect("a rerun converts");
    assert_eq!(report.outcome, Outcome::Converted);
    assert_java_agrees(&t, &direct, &before).await;
}

/// Reads S3 Tables throttles or fails are retried; refused credentials (403) end the
/// conversion at once with one line naming the catalog, the table and the answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throttled_reads_are_retried_and_refused_credentials_are_said_in_one_line() {
    let t = java_table("s3t_throttled", "9", "long", "none").await;
    let before = t.dump();
    let (proxy, catalog) = proxied(&t).await;
    proxy.inject("GET", POINTER_PATH, Fault::Status(503), 2);
    let report = convert(&catalog, &t.name(), &ConvertOptions::default())
        .await
        .expect("throttled loads are retried");
    assert_eq!(report.outcome, Outcome::Converted, "{report:?}");
    assert_eq!(proxy.injected().len(), 2);
    let direct = s3tables_catalog(bucket_of(&t)).await;
    assert_java_agrees(&t, &direct, &before).await;

    let (proxy, catalog) = proxied(&t).await;
    proxy.inject("GET", POINTER_PATH, Fault::Status(403), 10);
    let err = convert(&catalog, &t.name(), &ConvertOptions::default())
        .await
        .expect_err("refused credentials fail the conversion");
    assert!(
        !err.retryable(),
        "refused credentials are not retried: {err}"
    );
    assert_eq!(proxy.injected().len(), 1, "a 403 was retried");
    let text = err.to_string();
    assert!(!text.contains('\n'), "not one line: {text}");
    let bucket_name = bucket_of(&t).rsplit('/').next().unwrap_or_default();
    assert!(
        text.contains(&format!("s3tables:{bucket_name}"))
            && text.contains(&t.name().to_string())
            && text.contains("403"),
        "the error names the catalog, the table and the answer: {text}"
    );
}
