//! The Iceberg REST catalog: tables that Apache Iceberg Java wrote through Iceberg
//! Java's own REST server (tests/services: its REST fixture over a JdbcCatalog, files
//! on MinIO), converted by eqdv through the same server and judged by Java's reader
//! and PyIceberg's REST client. Also a Java writer and a second converter racing eqdv,
//! and the server's answers a real deployment meets and a test cannot make it give on
//! demand (a 500 or a lost answer after the commit applied, a 503 or a 409 before it,
//! throttling, refused credentials), injected by a proxy in front of it.
//!
//! Needs the test services and the interop jar (`tests/run` provides both).

mod common;
use eqdv_test_support::captured::Captured;
use eqdv_test_support::fault_proxy;

use eqdv::catalog::{Catalog, RestAuth, TableName};
use eqdv::convert::{ConvertOptions, Outcome, convert};
use eqdv::table::{LoadedTable, TableFiles};
use eqdv_test_support::java::{
    JavaServer, JavaTable, assert_java_agrees, assert_keys_unique, convert_beside_a_java_writer,
};
use eqdv_test_support::race::{assert_lost_the_race, overtaken_by};
use eqdv_test_support::services::{rest_catalog, rest_catalog_at, rest_uri};
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

/// A CDC table Java wrote through the REST catalog, with equality deletes to convert.
fn java_table(test: &str, seed: &str, key: &str, partition: &str) -> JavaTable {
    let t = JavaTable::new_rest(test);
    t.write_cdc(seed, "3", "600", key, partition);
    t
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_tables_convert_through_the_rest_catalog_and_java_agrees() {
    for (key, partition) in [("long", "identity"), ("string", "bucket:3")] {
        let t = java_table(&format!("rest_{key}"), "21", key, partition);
        let before = t.dump();
        let catalog = rest_catalog().await;
        let name = t.name();

        // The key index on and off find the same rows.
        let table = load(&catalog, &name).await;
        assert_key_index_agrees(&table, &live_files(&catalog, &name).await, key).await;

        // Converted once, through the REST commit (with the key index on, the commit
        // also sets the index's table property): one new snapshot on the old head, every
        // new object referenced (eqdv wrote no metadata file of its own), nothing deleted.
        let state = TableState::read(&catalog, &name).await;
        let conversion = expected_conversion(&catalog, &name, &state.rows).await;
        let options = ConvertOptions {
            resolve: key_index(true),
            ..Default::default()
        };
        let report = convert(&catalog, &name, &options)
            .await
            .expect("convert through the REST catalog");
        assert_eq!(report.outcome, Outcome::Converted, "{key}: {report:?}");
        let after = TableState::read(&catalog, &name).await;
        state.assert_converted_once(&after, &conversion);
        assert_eq!(
            report.metadata_location.as_deref(),
            Some(after.pointer.metadata_location.as_str()),
            "the report names the metadata file the catalog wrote"
        );
        let properties = load(&catalog, &name).await.metadata.properties().clone();
        assert!(
            properties.keys().any(|k| k.starts_with("eqdv.key-index")),
            "{key}: the key index's property did not land: {properties:?}"
        );
        assert_java_agrees(&t, &catalog, &before).await;

        let again = convert(&catalog, &name, &options).await.expect("again");
        assert_eq!(again.outcome, Outcome::NothingToDo, "{key}: {again:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conversion_during_a_concurrent_java_writer_through_rest() {
    let t = java_table("rest_concurrent", "5", "long", "identity");
    let catalog = rest_catalog().await;
    convert_beside_a_java_writer(&t, &catalog, 10).await;

    let before = t.dump();
    convert(&catalog, &t.name(), &ConvertOptions::default())
        .await
        .expect("final conversion");
    assert_java_agrees(&t, &catalog, &before).await;
    assert_keys_unique(&before);
}

/// Two converters with their own REST clients plan on the same head; B converts the
/// whole table while A waits right before its commit. The catalog refuses A's commit
/// (409: the ref moved), A plans again on B's snapshot and has nothing to do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_converter_overtaken_before_its_rest_commit_plans_again() {
    let t = java_table("rest_overtaken", "4", "string", "none");
    let before = t.dump();
    let direct = rest_catalog().await;
    let state = TableState::read(&direct, &t.name()).await;
    let conversion = expected_conversion(&direct, &t.name(), &state.rows).await;
    let a = overtaken_by(rest_catalog().await, rest_catalog().await);
    let ra = convert(&a, &t.name(), &ConvertOptions::default())
        .await
        .expect("converter A");
    let rb = a.state.report();
    assert_lost_the_race(&ra, &rb);
    let after = TableState::read(&direct, &t.name()).await;
    state.assert_converted_once(&after, &conversion);
    assert_java_agrees(&t, &direct, &before).await;
}

/// eqdv's client of the services' REST catalog through a fault proxy.
async fn proxied() -> (Proxy, eqdv::catalog::RestCatalog) {
    let proxy = Proxy::start(&rest_uri());
    let catalog = rest_catalog_at(&proxy.url(), RestAuth::None).await;
    (proxy, catalog)
}

/// The commit POST of `name` (the table's own path; loads are GETs).
fn commit_path(name: &TableName) -> String {
    format!("/namespaces/{}/tables/{}", name.namespace, name.name)
}

/// A commit the server applied but whose answer was a 500, or was lost: the outcome is
/// unknown, eqdv reads the table back, finds its snapshot and reports the conversion
/// done, deleting nothing the table references; the table is converted exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_applied_but_answered_with_an_error_is_read_back_as_landed() {
    for (test, fault) in [
        ("rest_500", Fault::ForwardThenStatus(500)),
        ("rest_lost", Fault::DropAfterForward),
    ] {
        let t = java_table(test, "6", "long", "none");
        let before = t.dump();
        let direct = rest_catalog().await;
        let state = TableState::read(&direct, &t.name()).await;
        let conversion = expected_conversion(&direct, &t.name(), &state.rows).await;
        let (proxy, catalog) = proxied().await;
        proxy.inject("POST", &commit_path(&t.name()), fault, 1);
        let report = convert(&catalog, &t.name(), &ConvertOptions::default())
            .await
            .unwrap_or_else(|e| panic!("{test}: {e}"));
        assert_eq!(proxy.injected().len(), 1, "{test}: the fault was not met");
        assert_eq!(
            proxy.injected()[0].upstream_status,
            Some(200),
            "{test}: the server did not apply the commit"
        );
        assert_eq!(report.outcome, Outcome::Converted, "{test}: {report:?}");
        assert_eq!(report.commit_attempts, 1, "{test}: {report:?}");
        let after = TableState::read(&direct, &t.name()).await;
        state.assert_converted_once(&after, &conversion);
        assert_java_agrees(&t, &direct, &before).await;
    }
}

/// A commit refused before the server applied it: a 409 is a conflict, and so is a 503
/// once the read-back proves the commit absent; eqdv reloads and commits again. A
/// catalog that refuses every commit fails the conversion with an error naming the
/// catalog and the table, leaving the table as it was and no file behind; a rerun
/// converts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_refused_before_it_applied_changes_nothing() {
    let direct = rest_catalog().await;
    for (test, status) in [("rest_409", 409), ("rest_503", 503)] {
        let t = java_table(test, "7", "long", "none");
        let before = t.dump();
        let state = TableState::read(&direct, &t.name()).await;
        let conversion = expected_conversion(&direct, &t.name(), &state.rows).await;
        let (proxy, catalog) = proxied().await;
        proxy.inject("POST", &commit_path(&t.name()), Fault::Status(status), 1);
        let report = convert(&catalog, &t.name(), &ConvertOptions::default())
            .await
            .unwrap_or_else(|e| panic!("{test}: a refused commit is retried: {e}"));
        assert_eq!(report.outcome, Outcome::Converted, "{test}: {report:?}");
        assert_eq!(
            (report.conflicts, report.commit_attempts),
            (1, 2),
            "{test}: {report:?}"
        );
        // The refused attempt's files are gone: every new object is referenced.
        let after = TableState::read(&direct, &t.name()).await;
        state.assert_converted_once(&after, &conversion);
        assert_java_agrees(&t, &direct, &before).await;
    }

    let t = java_table("rest_503_always", "8", "long", "none");
    let before = t.dump();
    let state = TableState::read(&direct, &t.name()).await;
    let (proxy, catalog) = proxied().await;
    proxy.inject("POST", &commit_path(&t.name()), Fault::Status(503), 100);
    let options = ConvertOptions {
        commit_retries: Some(2),
        ..Default::default()
    };
    let err = convert(&catalog, &t.name(), &options)
        .await
        .expect_err("a catalog that refuses every commit fails the conversion");
    assert_eq!(proxy.injected().len(), 3, "one commit and two retries");
    assert!(err.retryable(), "a 503 is worth a later retry: {err}");
    let text = err.to_string();
    assert!(
        text.contains("rest http://") && text.contains(&t.name().to_string()),
        "the error names the catalog and the table: {text}"
    );
    let unchanged = TableState::read(&direct, &t.name()).await;
    assert_eq!(unchanged.pointer, state.pointer, "the table moved");
    assert_eq!(
        unchanged.objects, state.objects,
        "the attempts left files behind"
    );
    t.assert_unconverted(&before);
    let report = convert(&direct, &t.name(), &ConvertOptions::default())
        .await
        .expect("a rerun converts");
    assert_eq!(report.outcome, Outcome::Converted);
    assert_java_agrees(&t, &direct, &before).await;
}

/// Reads the server throttles (429) or fails (503) are retried; refused credentials
/// (401) end the conversion at once with one line naming the catalog and the table.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throttled_reads_are_retried_and_refused_credentials_are_said_in_one_line() {
    let t = java_table("rest_throttled", "9", "long", "none");
    let before = t.dump();
    let direct = rest_catalog().await;
    let (proxy, catalog) = proxied().await;
    let table_path = commit_path(&t.name());
    proxy.inject("GET", &table_path, Fault::Status(429), 2);
    proxy.inject("GET", &table_path, Fault::Status(503), 1);
    let report = convert(&catalog, &t.name(), &ConvertOptions::default())
        .await
        .expect("throttled loads are retried");
    assert_eq!(report.outcome, Outcome::Converted, "{report:?}");
    assert_eq!(proxy.injected().len(), 3);
    assert_java_agrees(&t, &direct, &before).await;

    let (proxy, catalog) = proxied().await;
    proxy.inject("GET", &table_path, Fault::Status(401), 10);
    let err = convert(&catalog, &t.name(), &ConvertOptions::default())
        .await
        .expect_err("refused credentials fail the conversion");
    assert!(
        !err.retryable(),
        "refused credentials are not retried: {err}"
    );
    assert_eq!(proxy.injected().len(), 1, "a 401 was retried");
    let text = err.to_string();
    assert!(!text.contains('\n'), "not one line: {text}");
    assert!(
        text.contains("rest http://")
            && text.contains(&t.name().to_string())
            && text.contains("401"),
        "the error names the catalog, the table and the answer: {text}"
    );
}

/// OAuth2 client credentials: eqdv exchanges them at the catalog's token endpoint and
/// sends the token it got with every request, fetching a new one when a request is
/// refused with 401; the conversion goes through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oauth2_client_credentials_are_exchanged_for_a_bearer_token() {
    let t = java_table("rest_oauth", "10", "long", "none");
    let before = t.dump();
    let proxy = Proxy::start(&rest_uri());
    // The first load of the table is refused as if the token had been revoked: eqdv
    // fetches a new one and loads again.
    proxy.inject("GET", &commit_path(&t.name()), Fault::Status(401), 1);
    // Counts the requests that carry the fixture's token for client `eqdv-test`
    // (a zero delay changes nothing else).
    proxy.inject_request(
        "GET",
        "authorization: bearer client-credentials-token:sub=eqdv-test",
        Fault::Delay(std::time::Duration::ZERO),
        usize::MAX,
    );
    let catalog = rest_catalog_at(
        &proxy.url(),
        RestAuth::client_credentials("eqdv-test:secret", None, None),
    )
    .await;
    let report = convert(&catalog, &t.name(), &ConvertOptions::default())
        .await
        .expect("convert with OAuth2 client credentials");
    assert_eq!(report.outcome, Outcome::Converted, "{report:?}");
    let log = proxy.log();
    let tokens = log
        .iter()
        .filter(|l| l.method == "POST" && l.path.ends_with("/v1/oauth/tokens"))
        .count();
    assert_eq!(tokens, 2, "a token, and another after the 401: {log:?}");
    let gets = log.iter().filter(|l| l.method == "GET").count();
    assert!(gets > 0);
    assert_eq!(
        proxy.matched(),
        gets,
        "every GET carries the token: {log:?}"
    );
    assert_java_agrees(&t, &rest_catalog().await, &before).await;
}

/// The staging mode through the REST catalog: Java's writers commit to a staging
/// branch, eqdv applies it to main in commits of two staging snapshots each (each a
/// REST commit of a snapshot on main, asserting the staging branch where it was), and
/// Java reads on main what it reads on staging, with no equality delete live on main.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_staging_branch_is_applied_to_main_through_rest() {
    use eqdv::staging::{StagingOptions, apply_staging};
    let t = JavaTable::new_rest("rest_staging");
    let mut server = JavaServer::start(&t);
    server
        .call(serde_json::json!({"op": "create", "seed": 631}))
        .expect("create");
    for seed in 63_100..63_105 {
        server
            .call(serde_json::json!({"op": "stage-op", "seed": seed, "branch": "staging"}))
            .expect("stage-op");
    }
    let catalog = rest_catalog().await;
    let staging = StagingOptions {
        snapshots_per_commit: 2,
        ..StagingOptions::new("staging")
    };
    let options = ConvertOptions {
        resolve: key_index(true),
        ..Default::default()
    };
    let report = apply_staging(&catalog, &t.name(), &staging, &options)
        .await
        .expect("apply the staging branch through REST");
    assert_eq!(report.outcome, Outcome::Converted, "{report:?}");
    assert_eq!(report.lag.snapshots, 0, "{report:?}");
    assert!(report.applied.len() >= 2, "{report:?}");
    let on_staging = server.dump_rows("staging", false).expect("dump staging");
    let on_main = server.dump_rows("main", false).expect("dump main");
    common::assert_same_rows("Iceberg Java (main against staging)", &on_main, &on_staging);
    let check = server
        .call(serde_json::json!({"op": "check-dvs", "branch": "main"}))
        .expect("check-dvs");
    assert_eq!(check["equality_delete_files"], 0, "{check}");
    let again = apply_staging(&catalog, &t.name(), &staging, &options)
        .await
        .expect("again");
    assert_eq!(again.outcome, Outcome::NothingToDo, "{again:?}");
}

/// A sweep of a REST catalog walks nested namespaces: a table Java wrote in a namespace
/// two levels deep is listed (by `ListNamespaces` with `parent`), converted, and judged
/// by Java and PyIceberg through the same catalog.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_finds_tables_in_nested_namespaces() {
    let mut t = JavaTable::new_rest("rest_nested");
    t.database = format!("{}.inner", t.database);
    t.write_cdc("13", "3", "600", "long", "none");
    let before = t.dump();
    let catalog = rest_catalog().await;
    let listed = catalog.list_tables(None).await.expect("list every table");
    assert!(
        listed.contains(&t.name()),
        "{} is not among the {} tables listed",
        t.name(),
        listed.len()
    );
    let outer = t.database.split('.').next().expect("outer level");
    assert_eq!(
        catalog
            .list_tables(Some(outer))
            .await
            .expect("list the outer namespace"),
        Vec::<TableName>::new(),
        "the outer namespace holds no table of its own"
    );
    let report = convert(&catalog, &t.name(), &ConvertOptions::default())
        .await
        .expect("convert a table of a nested namespace");
    assert_eq!(report.outcome, Outcome::Converted, "{report:?}");
    assert_java_agrees(&t, &catalog, &before).await;
}

/// botocore's SigV4 check in front of the services' REST server (tests/pyiceberg/
/// sigv4_proxy.py: it recomputes each request's signature and answers 403 to any that
/// differs), as AWS's Iceberg REST endpoints check it. Dropped with the test.
struct SigV4Proxy {
    child: std::process::Child,
    url: String,
}

impl SigV4Proxy {
    fn start(service: &str, region: &str) -> Self {
        use std::io::BufRead as _;
        let script = eqdv_judges::pyiceberg_dir().join("sigv4_proxy.py");
        let mut child = std::process::Command::new(eqdv_judges::python())
            .arg(&script)
            .args([
                "--upstream",
                &rest_uri(),
                "--service",
                service,
                "--region",
                region,
            ])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("start sigv4_proxy.py");
        let stdout = child.stdout.take().expect("its stdout");
        let mut line = String::new();
        std::io::BufReader::new(stdout)
            .read_line(&mut line)
            .expect("sigv4_proxy.py's first line");
        let port = line
            .trim()
            .strip_prefix("listening ")
            .unwrap_or_else(|| panic!("sigv4_proxy.py said {line:?}"))
            .to_string();
        Self {
            child,
            url: format!("http://127.0.0.1:{port}"),
        }
    }

    /// How many requests the proxy let through and refused, and why.
    fn stats(&self) -> serde_json::Value {
        let out = std::process::Command::new("curl")
            .args(["-sf", &format!("{}/_sigv4/stats", self.url)])
            .output()
            .expect("curl");
        serde_json::from_slice(&out.stdout).expect("stats JSON")
    }
}

impl Drop for SigV4Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// SigV4 (AWS's Glue and S3 Tables Iceberg endpoints): every request eqdv sends, the
/// commit's body included, carries the signature botocore computes for it, and the
/// conversion goes through; requests signed for another service are refused (403) in
/// one line naming the catalog and the answer, and not retried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigv4_signed_requests_are_the_ones_botocore_computes() {
    let t = java_table("rest_sigv4", "11", "long", "none");
    let before = t.dump();
    let proxy = SigV4Proxy::start("glue", "us-east-1");
    let sigv4 = |service: &str| RestAuth::SigV4 {
        signing_name: service.to_string(),
        region: Some("us-east-1".to_string()),
    };
    let catalog = rest_catalog_at(&proxy.url, sigv4("glue")).await;
    let report = convert(&catalog, &t.name(), &ConvertOptions::default())
        .await
        .expect("convert with SigV4");
    assert_eq!(report.outcome, Outcome::Converted, "{report:?}");
    let stats = proxy.stats();
    assert_eq!(stats["rejected"], 0, "{stats}");
    assert!(
        stats["verified"].as_u64().is_some_and(|n| n >= 3),
        "config, loads and the commit: {stats}"
    );
    assert_java_agrees(&t, &rest_catalog().await, &before).await;

    // Signed for another service: refused from the first request (the configuration).
    let err = eqdv::catalog::RestCatalog::connect(eqdv::catalog::RestConfig {
        uri: proxy.url.clone(),
        auth: sigv4("s3tables"),
        ..Default::default()
    })
    .await
    .expect_err("a signature for another service is refused");
    assert!(
        !err.retryable(),
        "a refused signature is not retried: {err}"
    );
    let text = err.to_string();
    assert!(!text.contains('\n'), "not one line: {text}");
    assert!(
        text.contains(&format!("rest {}", proxy.url)) && text.contains("403"),
        "the error names the catalog and the answer: {text}"
    );
    let stats = proxy.stats();
    assert_eq!(stats["rejected"], 1, "refused once, not retried: {stats}");
}

/// An error as a user meets it: its line, its debug form and every source below it.
fn everything_about(e: &eqdv::Error) -> String {
    let mut text = format!("{e}\n{e:?}\n");
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(&format!("{s}\n{s:?}\n"));
        source = s.source();
    }
    text
}

/// Credentials never reach a log line or an error, whatever fails: an OAuth2 client
/// secret when the token endpoint refuses it, the bearer token it was exchanged for when
/// the catalog fails every load, and a static token the catalog refuses. Everything the
/// runs print at debug level, their errors (line, debug form, sources) and the
/// catalogs' debug forms are searched for each secret.
#[tokio::test(flavor = "current_thread")]
async fn credentials_never_reach_an_error_or_a_log_line() {
    use eqdv::catalog::{RestCatalog, RestConfig};
    const CLIENT_SECRET: &str = "client-secret-7f3a9c1e";
    const STATIC_TOKEN: &str = "static-token-5d2b8e0a";
    // The token the REST fixture issues for client `eqdv-test`.
    const ISSUED_TOKEN: &str = "client-credentials-token:sub=eqdv-test";
    let t = java_table("rest_secrets", "7", "long", "none");
    let printed = Captured::default();
    let writer = printed.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::DEBUG)
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    let _logs = tracing::subscriber::set_default(subscriber);
    let mut seen = String::new();
    let connect = |uri: String, auth: RestAuth| async move {
        RestCatalog::connect(RestConfig {
            uri,
            auth,
            ..Default::default()
        })
        .await
    };
    let options = ConvertOptions::default();
    let credentials = format!("eqdv-test:{CLIENT_SECRET}");

    // The token endpoint refuses the client.
    let proxy = Proxy::start(&rest_uri());
    proxy.inject("POST", "/v1/oauth/tokens", Fault::Status(401), usize::MAX);
    let auth = RestAuth::client_credentials(&credentials, None, None);
    let failed = match connect(proxy.url(), auth).await {
        Err(e) => e,
        Ok(catalog) => {
            seen.push_str(&format!("{catalog:?}\n"));
            convert(&catalog, &t.name(), &options)
                .await
                .expect_err("a refused client converts")
        }
    };
    seen.push_str(&everything_about(&failed));
    assert!(
        !proxy.injected().is_empty(),
        "the token endpoint was not asked"
    );

    // A token is issued, then every load fails (retried, then given up).
    let proxy = Proxy::start(&rest_uri());
    let auth = RestAuth::client_credentials(&credentials, None, None);
    let catalog = connect(proxy.url(), auth).await.expect("connect");
    seen.push_str(&format!("{catalog:?}\n"));
    proxy.inject(
        "GET",
        &commit_path(&t.name()),
        Fault::Status(500),
        usize::MAX,
    );
    let failed = convert(&catalog, &t.name(), &options)
        .await
        .expect_err("failing loads convert");
    seen.push_str(&everything_about(&failed));

    // A static token: the catalog takes it, then refuses it for the table.
    let proxy = Proxy::start(&rest_uri());
    proxy.inject(
        "GET",
        &commit_path(&t.name()),
        Fault::Status(403),
        usize::MAX,
    );
    let sent = format!("authorization: bearer {STATIC_TOKEN}");
    proxy.inject_request(
        "GET",
        &sent,
        Fault::Delay(std::time::Duration::ZERO),
        usize::MAX,
    );
    let catalog = connect(proxy.url(), RestAuth::Token(STATIC_TOKEN.into()))
        .await
        .expect("connect with a static token");
    seen.push_str(&format!("{catalog:?}\n"));
    let failed = convert(&catalog, &t.name(), &options)
        .await
        .expect_err("a refused token converts");
    seen.push_str(&everything_about(&failed));
    assert!(proxy.matched() > 0, "the static token was not sent");

    seen.push_str(&printed.text());
    assert!(
        seen.contains(&t.name().to_string()) && seen.contains("500") && seen.contains("DEBUG"),
        "the runs did not print what they failed on: {seen}"
    );
    for secret in [CLIENT_SECRET, STATIC_TOKEN, ISSUED_TOKEN] {
        assert!(
            !seen.contains(secret),
            "{secret} was printed:\n{}",
            seen.lines()
                .filter(|l| l.contains(secret))
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
}
