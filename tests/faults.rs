//! Storage faults on the production parts (the Glue emulator and MinIO from
//! tests/services): eqdv talks to S3 through a fault-injecting HTTP proxy that can
//! answer a request with an error status, delay it, or drop the connection before or
//! after S3 applied it.
//!
//! What must hold: transient errors are retried by the storage layer and the conversion
//! lands; persistent ones fail the attempt with the table unchanged and the attempt's
//! files removed, or (when a write's outcome is unknown) kept as orphans that
//! `eqdv::cleanup` removes later; slow responses still convert; cleanup deletes nothing
//! when listing or reading the metadata fails, and never leaves the table's prefix.
//! Without the services these tests fail and say so; they never skip.

mod common;

use eqdv_test_support::{java, services, state};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use eqdv::ErrorKind;
use eqdv::catalog::{Catalog, GlueCatalog, GlueConfig, TableName};
use eqdv::cleanup::{CleanupOptions, cleanup, normalize_location};
use eqdv::convert::{ConvertOptions, Outcome, convert};
use eqdv::table::LoadedTable;
use eqdv_workload::generate::{KeyType, PartitionKind, WorkloadSpec, expected_rows, generate};
use proxy::{Fault, Proxy};
use state::{Conversion, TableState, expected_conversion};

/// The services' settings: the warehouse root and MinIO's endpoint.
fn require_services() -> (String, String) {
    let warehouse = services::require_services();
    (
        warehouse,
        std::env::var("AWS_ENDPOINT_URL_S3").unwrap_or_default(),
    )
}

/// A table generated on Glue + MinIO, with every S3 request going through a proxy
/// (and every Glue request through another, when asked for).
struct Setup {
    proxy: Proxy,
    /// The proxy in front of the Glue emulator, for [`setup_with_glue_proxy`].
    glue: Option<Proxy>,
    catalog: GlueCatalog,
    /// The same warehouse without any proxy: another writer, or a judge.
    direct: GlueCatalog,
    name: TableName,
    /// The table as generated, read directly.
    generated: TableState,
    /// What converting the generated table must give.
    conversion: Conversion,
    /// The generator's model of the table's rows.
    expected: Vec<String>,
    /// Iceberg Java on the same table: the judge of its rows and DVs (with PyIceberg).
    java: java::JavaTable,
}

async fn setup(test: &str, seed: u64) -> Setup {
    setup_on(test, seed, false).await
}

/// [`setup`] with Glue behind a fault-injecting proxy too.
async fn setup_with_glue_proxy(test: &str, seed: u64) -> Setup {
    setup_on(test, seed, true).await
}

async fn setup_on(test: &str, seed: u64, glue_proxy: bool) -> Setup {
    let (warehouse, s3) = require_services();
    let proxy = Proxy::start(&s3);
    let glue = glue_proxy
        .then(|| Proxy::start(&std::env::var("AWS_ENDPOINT_URL_GLUE").unwrap_or_default()));
    let unique = services::unique_name(test);
    let warehouse = format!("{}/{unique}", warehouse.trim_end_matches('/'));
    let config = GlueConfig {
        warehouse: Some(warehouse.clone()),
        s3_endpoint: Some(proxy.url()),
        glue_endpoint: glue.as_ref().map(Proxy::url),
        ..Default::default()
    };
    let catalog = GlueCatalog::connect(config).await.expect("glue catalog");
    let direct = GlueCatalog::connect(GlueConfig {
        warehouse: Some(warehouse.clone()),
        ..Default::default()
    })
    .await
    .expect("glue catalog");
    let name = TableName::new(format!("eqdv_{unique}"), "orders");
    let report = generate(&catalog, &name, &spec(seed))
        .await
        .expect("generate on Glue/S3");
    let expected = expected_rows(&report.state).unwrap();
    let generated = TableState::read(&direct, &name).await;
    assert!(generated.rows == expected, "generated rows");
    assert!(!generated.equality_deletes.is_empty());
    assert!(generated.orphans.is_empty(), "{:#?}", generated.orphans);
    let conversion = expected_conversion(&direct, &name, &expected).await;
    let java = java::JavaTable::of(&warehouse, &name);
    java.assert_unconverted(&expected);
    Setup {
        proxy,
        glue,
        catalog,
        direct,
        name,
        generated,
        conversion,
        expected,
        java,
    }
}

fn spec(seed: u64) -> WorkloadSpec {
    WorkloadSpec {
        seed,
        rows: 800,
        commits: 2,
        keys: vec![KeyType::Long],
        partition: PartitionKind::Identity,
        changes_per_commit: 80,
        rows_per_file: 200,
        rows_per_row_group: 100,
        ..Default::default()
    }
}

impl Setup {
    async fn table(&self) -> LoadedTable {
        LoadedTable::load(&self.catalog, &self.name)
            .await
            .expect("load")
    }

    /// The table's whole state, read without the proxies.
    async fn state(&self) -> TableState {
        TableState::read(&self.direct, &self.name).await
    }

    /// Converted once on top of the generated table: Java and PyIceberg read the model's
    /// rows and accept every DV; one eqdv snapshot, the DVs a full scan expects (valid,
    /// in one new Puffin file), no equality delete, no object deleted and no orphan.
    async fn assert_converted(&self) {
        self.java.assert_converted(&self.expected);
        self.generated
            .assert_converted_once(&self.state().await, &self.conversion);
    }

    /// The Glue proxy of [`setup_with_glue_proxy`].
    fn glue(&self) -> &Proxy {
        self.glue.as_ref().expect("set up with a Glue proxy")
    }

    /// Converted through a Glue commit whose answer went wrong: the pointer names the
    /// report's metadata and snapshot, and the table is converted once on top of the
    /// generated table and the metadata files `others` committed in between
    /// ([`TableState::assert_converted_on`]: nothing referenced is missing either).
    async fn assert_landed(&self, report: &eqdv::convert::ConvertReport, others: &[&str]) {
        assert_eq!(report.outcome, Outcome::Converted);
        let after = self.state().await;
        assert_eq!(
            Some(&after.pointer.metadata_location),
            report.metadata_location.as_ref(),
            "the pointer is not the converted metadata"
        );
        assert_eq!(after.head, report.new_snapshot_id);
        self.java.assert_converted(&self.expected);
        self.generated
            .assert_converted_on(&after, &self.conversion, others);
    }

    /// Unchanged: the generated table, on S3 too (no object added or deleted), and Java
    /// still reads the model's rows with the equality deletes live.
    async fn assert_unchanged(&self) {
        self.generated.assert_unchanged(&self.state().await);
        self.java.assert_unconverted(&self.expected);
    }

    /// With the faults gone, a new conversion lands and is judged.
    async fn assert_a_later_run_converts(&self) {
        let r = convert(&self.catalog, &self.name, &ConvertOptions::default())
            .await
            .expect("a later run converts");
        assert_eq!(r.outcome, Outcome::Converted);
        self.assert_converted().await;
    }
}

fn now_only() -> CleanupOptions {
    CleanupOptions {
        older_than: Duration::ZERO,
        dry_run: false,
    }
}

/// 503s, a 500 and dropped connections on the first writes of each kind: the storage
/// layer retries them and the conversion lands as if nothing happened.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transient_write_failures_are_retried() {
    let s = setup("transient", 71).await;
    s.proxy.inject("PUT", ".puffin", Fault::Status(503), 2);
    s.proxy.inject("PUT", ".avro", Fault::Status(500), 1);
    s.proxy
        .inject("PUT", ".metadata.json", Fault::DropBeforeForward, 1);
    s.proxy
        .inject("PUT", ".metadata.json", Fault::DropAfterForward, 1);
    let started = Instant::now();
    let r = convert(&s.catalog, &s.name, &ConvertOptions::default())
        .await
        .expect("transient faults are retried");
    eprintln!(
        "converted through transient faults in {:?}",
        started.elapsed()
    );
    assert_eq!(r.outcome, Outcome::Converted);
    assert_eq!(s.proxy.injected().len(), 5, "{:#?}", s.proxy.injected());
    // Each faulted object was written successfully afterwards.
    for logged in s.proxy.injected() {
        assert!(
            s.proxy.log().iter().any(|l| l.method == "PUT"
                && l.path == logged.path
                && l.fault.is_none()
                && l.status == Some(200)),
            "{} never written after the fault",
            logged.path
        );
    }
    s.assert_converted().await;
}

/// Every manifest write fails: the attempt fails, the table is unchanged and the
/// engine removes the Puffin file it wrote. A later run converts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn persistent_write_failure_fails_cleanly() {
    let s = setup("persistent", 72).await;
    s.proxy
        .inject("PUT", ".avro", Fault::Status(503), usize::MAX);
    let started = Instant::now();
    let err = convert(&s.catalog, &s.name, &ConvertOptions::default())
        .await
        .expect_err("manifests cannot be written");
    eprintln!("failed after {:?}: {err}", started.elapsed());
    // What an operator reads (the CLI prints the chain down to the engine's error, as
    // here): one short line naming the file and the cause, no HTTP headers.
    let line = err.to_string();
    eprintln!("one line: {line} ({} chars)", line.len());
    assert!(!line.contains('\n'), "{line}");
    assert!(line.len() < 300, "{} chars: {line}", line.len());
    assert!(line.contains(".avro"), "names the file: {line}");
    assert!(line.contains("throttled") && line.contains("503"), "{line}");
    // Throttled past OpenDAL's retries: still worth a later attempt.
    assert_eq!((err.kind(), err.retryable()), (ErrorKind::Storage, true));
    for header in ["x-amz-request-id", "content-length", "Parts {", "headers"] {
        assert!(
            !line
                .to_ascii_lowercase()
                .contains(&header.to_ascii_lowercase()),
            "{line}"
        );
    }
    // The snapshot's manifests, its manifest list and its metadata file are uploaded
    // at once, each tried once and retried three times (OpenDAL's RetryLayer as
    // iceberg-storage-opendal sets it up); the attempt gives up when they have failed
    // for good, and removes the metadata file that landed beside them (the table is
    // unchanged, its objects included).
    let injected = s.proxy.injected();
    eprintln!("{} manifest writes answered 503", injected.len());
    let mut tries: std::collections::BTreeMap<&str, usize> = Default::default();
    for l in &injected {
        *tries.entry(l.path.as_str()).or_default() += 1;
    }
    assert!(tries.values().all(|&n| n <= 4), "{tries:#?}");
    assert!(tries.values().any(|&n| n == 4), "{tries:#?}");
    assert!(
        tries
            .keys()
            .all(|p| p.contains("/metadata/eqdv-") || p.contains("/metadata/snap-")),
        "{tries:#?}"
    );
    assert!(
        tries.keys().any(|p| p.contains("/metadata/eqdv-")),
        "{tries:#?}"
    );
    s.proxy.clear();
    s.assert_unchanged().await;
    assert!(
        s.proxy
            .log()
            .iter()
            .any(|l| l.method == "DELETE" && l.path.ends_with(".puffin")),
        "the Puffin file was never deleted"
    );

    s.assert_a_later_run_converts().await;
}

/// Every Puffin upload fails: the manifests, manifest list and metadata.json written
/// while it uploaded are removed with it, no pointer swap is tried, and the table and
/// its objects are as they were. A later run converts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn persistent_puffin_failure_removes_the_manifests_written_beside_it() {
    let s = setup("puffinfail", 75).await;
    // What the conversion sends (the generator wrote through the proxy too).
    let generated = s.proxy.log().len();
    s.proxy
        .inject("PUT", ".puffin", Fault::Status(503), usize::MAX);
    let err = convert(&s.catalog, &s.name, &ConvertOptions::default())
        .await
        .expect_err("the Puffin file cannot be written");
    let line = err.to_string();
    assert!(line.contains(".puffin") && line.contains("503"), "{line}");
    assert_eq!((err.kind(), err.retryable()), (ErrorKind::Storage, true));
    let log = s.proxy.log().split_off(generated);
    let put = |suffix: &str| {
        log.iter()
            .filter(|l| l.method == "PUT" && l.path.ends_with(suffix) && l.status == Some(200))
            .map(|l| l.path.clone())
            .collect::<std::collections::BTreeSet<_>>()
    };
    let manifests = put(".avro");
    assert!(
        manifests.iter().any(|p| p.contains("/snap-")),
        "the manifest list was not written beside the upload: {manifests:#?}"
    );
    let metadata = put(".metadata.json");
    assert_eq!(
        metadata.len(),
        1,
        "not one metadata.json beside the upload: {metadata:#?}"
    );
    for path in manifests.iter().chain(&metadata) {
        assert!(
            log.iter().any(|l| l.method == "DELETE" && &l.path == path),
            "{path} was left behind"
        );
    }
    s.proxy.clear();
    s.assert_unchanged().await;

    s.assert_a_later_run_converts().await;
}

/// The connection drops after S3 stored the new metadata.json, on every try: the
/// conversion fails with the table unchanged. The attempt removes what it wrote,
/// the metadata file whose write "failed" (but landed) included: no swap was tried, so
/// nothing can reference it. Cleanup then finds nothing; a later run converts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_metadata_write_fails_and_leaves_nothing() {
    let s = setup("dropmeta", 73).await;
    s.proxy
        .inject("PUT", ".metadata.json", Fault::DropAfterForward, usize::MAX);
    let started = Instant::now();
    let err = convert(&s.catalog, &s.name, &ConvertOptions::default())
        .await
        .expect_err("the metadata file cannot be written");
    eprintln!("failed after {:?}: {err}", started.elapsed());
    assert!(err.to_string().contains(".metadata.json"), "{err}");
    assert_eq!((err.kind(), err.retryable()), (ErrorKind::Storage, true));
    // One metadata file, tried once and retried three times, stored by S3 each time.
    let injected = s.proxy.injected();
    assert_eq!(injected.len(), 4, "{injected:#?}");
    assert!(
        injected
            .iter()
            .all(|l| l.path == injected[0].path && l.upstream_status == Some(200)),
        "{injected:#?}"
    );
    s.proxy.clear();
    assert!(
        s.proxy
            .log()
            .iter()
            .any(|l| l.method == "DELETE" && l.path == injected[0].path),
        "the landed metadata file was never deleted"
    );
    s.assert_unchanged().await;

    for options in [CleanupOptions::default(), now_only()] {
        let r = cleanup(&s.catalog, &s.name, &options)
            .await
            .expect("cleanup");
        assert_eq!(r.orphans_found, 0, "{r:#?}");
        assert!(r.deleted.is_empty(), "{r:#?}");
    }
    s.assert_unchanged().await;

    s.assert_a_later_run_converts().await;
}

/// Slow S3 answers (seconds, within the storage layer's timeouts) still convert.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_responses_still_convert() {
    let s = setup("slow", 74).await;
    let delay = Duration::from_secs(2);
    s.proxy.inject("PUT", ".puffin", Fault::Delay(delay), 1);
    s.proxy.inject("PUT", ".avro", Fault::Delay(delay), 2);
    s.proxy
        .inject("PUT", ".metadata.json", Fault::Delay(delay), 1);
    s.proxy
        .inject("GET", ".metadata.json", Fault::Delay(delay), 1);
    let started = Instant::now();
    let r = convert(&s.catalog, &s.name, &ConvertOptions::default())
        .await
        .expect("slow responses convert");
    let took = started.elapsed();
    eprintln!("converted with slow responses in {took:?}");
    assert_eq!(r.outcome, Outcome::Converted);
    assert_eq!(s.proxy.injected().len(), 5);
    // One after another but for the writes that go out at once: the Puffin upload, the
    // manifests, the manifest list and the metadata.json. So at least: the metadata
    // read, then those writes.
    assert!(took >= delay * 2, "the delays were not applied: {took:?}");
    s.assert_converted().await;
}

/// Cleanup on S3: deletes nothing when the listing or the reachable walk fails; stays
/// inside the table's prefix (a table whose name extends ours is not ours); keeps
/// young files; deletes old unreferenced ones and never a live one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cleanup_on_s3_is_safe() {
    let s = setup("cleanup", 75).await;
    let neighbour = TableName::new(s.name.namespace.clone(), "orders_2");
    generate(
        &s.catalog,
        &neighbour,
        &WorkloadSpec {
            commits: 1,
            ..spec(76)
        },
    )
    .await
    .expect("neighbour table");
    let ours = format!("{}/data/stray.parquet", s.table().await.location());
    let theirs = format!(
        "{}/data/stray.parquet",
        LoadedTable::load(&s.catalog, &neighbour)
            .await
            .unwrap()
            .location()
    );
    assert!(theirs.contains("/orders_2/") && ours.contains("/orders/"));
    let io = s.catalog.file_io().clone();
    for p in [&ours, &theirs] {
        io.new_output(p)
            .unwrap()
            .write(b"not referenced by any metadata".to_vec().into())
            .await
            .unwrap();
    }
    let planted = s.state().await;
    let ours_set = BTreeSet::from([normalize_location(&ours)]);
    assert!(planted.orphans == ours_set, "{:#?}", planted.orphans);

    // The listing fails: nothing is deleted.
    s.proxy
        .inject("GET", "list-type=2", Fault::Status(403), usize::MAX);
    let err = cleanup(&s.catalog, &s.name, &now_only())
        .await
        .expect_err("listing fails");
    eprintln!("listing failure: {err}");
    // Access denied: the configuration is at fault, a retry meets the same answer.
    assert_eq!((err.kind(), err.retryable()), (ErrorKind::Storage, false));
    s.proxy.clear();
    planted.assert_unchanged(&s.state().await);

    // Reading a manifest fails: nothing is deleted.
    s.proxy
        .inject("GET", ".avro", Fault::Status(403), usize::MAX);
    let err = cleanup(&s.catalog, &s.name, &now_only())
        .await
        .expect_err("the reachable walk fails");
    eprintln!("walk failure: {err}");
    assert_eq!((err.kind(), err.retryable()), (ErrorKind::Storage, false));
    s.proxy.clear();
    planted.assert_unchanged(&s.state().await);

    // Young: kept.
    let r = cleanup(&s.catalog, &s.name, &CleanupOptions::default())
        .await
        .unwrap();
    assert_eq!(r.kept_too_young, vec![ours.clone()]);
    assert!(r.deleted.is_empty());
    assert_eq!(r.scanned, planted.objects.len());
    planted.assert_unchanged(&s.state().await);

    // Old enough: only our stray goes.
    let r = cleanup(&s.catalog, &s.name, &now_only()).await.unwrap();
    assert_eq!(r.deleted, vec![ours.clone()]);
    assert!(!io.exists(&ours).await.unwrap());
    assert!(
        io.exists(&theirs).await.unwrap(),
        "deleted a neighbour's file"
    );
    planted.assert_only_removed(&s.state().await, &ours_set);
    s.assert_unchanged().await;
}

/// The target header of Glue's UpdateTable (AWS JSON protocol).
const UPDATE_TABLE: &str = "X-Amz-Target: AWSGlue.UpdateTable";

/// Glue applies the first UpdateTable, and its answer is lost (the connection drops).
/// The AWS SDK retries; the retry meets the VersionId the first request replaced and
/// Glue answers ConcurrentModificationException. The commit landed: convert must say so
/// and keep every file of it (issue 10, item 7).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn glue_commit_whose_answer_is_lost_is_converted() {
    let s = setup_with_glue_proxy("glue_lost", 77).await;
    s.glue()
        .inject_request("POST", UPDATE_TABLE, Fault::DropAfterForward, 1);
    let r = convert(&s.catalog, &s.name, &ConvertOptions::default())
        .await
        .expect("the commit landed: converted");
    let injected = s.glue().injected();
    assert_eq!(injected.len(), 1, "{injected:#?}");
    assert_eq!(
        injected[0].upstream_status,
        Some(200),
        "Glue applied the UpdateTable whose answer was dropped"
    );
    // The SDK retried it once, and the retry was refused (stale VersionId), which the
    // SDK does not retry; every other Glue call after the fault succeeded (before it,
    // setting up the table met EntityNotFound answers).
    let log = s.glue().log();
    let fault = log
        .iter()
        .position(|l| l.fault.is_some())
        .expect("the dropped UpdateTable");
    let refused: Vec<_> = log[fault + 1..]
        .iter()
        .filter(|l| l.status != Some(200))
        .collect();
    assert_eq!(refused.len(), 1, "{log:#?}");
    assert_eq!(
        (refused[0].method.as_str(), refused[0].status),
        ("POST", Some(400))
    );
    assert_eq!((r.commit_attempts, r.conflicts), (1, 0), "{r:#?}");
    s.assert_landed(&r, &[]).await;
}

/// Glue applies the UpdateTable and every answer is a 500 (the SDK's retries too): the
/// outcome is unknown until the pointer is read back, which shows the commit landed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn glue_commit_answered_500_after_it_landed_is_converted() {
    let s = setup_with_glue_proxy("glue_500", 78).await;
    s.glue().inject_request(
        "POST",
        UPDATE_TABLE,
        Fault::ForwardThenStatus(500),
        usize::MAX,
    );
    let r = convert(&s.catalog, &s.name, &ConvertOptions::default())
        .await
        .expect("the commit landed: converted");
    s.glue().clear();
    // The SDK's three attempts (its standard retry mode): the first applied, the
    // retries refused for the VersionId it replaced; all answered 500.
    let injected = s.glue().injected();
    let upstream: Vec<Option<u16>> = injected.iter().map(|l| l.upstream_status).collect();
    assert_eq!(
        upstream,
        [Some(200), Some(400), Some(400)],
        "Glue applied the first UpdateTable only: {injected:#?}"
    );
    assert!(injected.iter().all(|l| l.status == Some(500)));
    assert_eq!((r.commit_attempts, r.conflicts), (1, 0), "{r:#?}");
    s.assert_landed(&r, &[]).await;
}

/// Another writer moves the pointer while our UpdateTable is in flight (after our
/// pre-check): Glue refuses ours with ConcurrentModificationException. The read-back
/// proves our commit absent, so our metadata file is deleted, the conversion rebases on
/// the other writer's commit and lands, and no orphan is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_glue_conflict_deletes_the_attempt_and_rebases() {
    let s = setup_with_glue_proxy("glue_conflict", 79).await;
    let before = s.generated.pointer.clone();
    s.glue().inject_request(
        "POST",
        UPDATE_TABLE,
        Fault::Delay(Duration::from_secs(4)),
        1,
    );
    let converting = {
        let catalog = s.catalog.clone();
        let name = s.name.clone();
        tokio::spawn(async move { convert(&catalog, &name, &ConvertOptions::default()).await })
    };
    // Wait until our UpdateTable is held by the proxy, then commit another change.
    let waited = Instant::now();
    while s.glue().matched() == 0 {
        assert!(
            waited.elapsed() < Duration::from_secs(120),
            "no UpdateTable reached the proxy"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let other = other_writer_commit(&s.direct, &s.name).await;
    assert_ne!(other, before.metadata_location);

    let r = converting
        .await
        .expect("join")
        .expect("converted after a rebase");
    assert_eq!(r.outcome, Outcome::Converted);
    assert_eq!((r.conflicts, r.rebases, r.replans), (1, 1, 0), "{r:#?}");
    assert_eq!(r.commit_attempts, 2);
    let injected = s.glue().injected();
    assert_eq!(injected.len(), 1, "{injected:#?}");
    assert_eq!(
        injected[0].status,
        Some(400),
        "Glue refused the stale VersionId"
    );
    // Our first metadata file was deleted; the other writer's commit is kept.
    assert!(
        s.proxy
            .log()
            .iter()
            .any(|l| l.method == "DELETE" && l.path.ends_with(".metadata.json")),
        "the refused attempt's metadata file was never deleted"
    );
    let table = s.table().await;
    assert_eq!(
        table.metadata.properties().get(OTHER_WRITER_PROPERTY),
        Some(&"1".to_string())
    );
    assert!(
        table
            .metadata
            .metadata_log()
            .iter()
            .any(|m| m.metadata_file == other)
    );
    s.assert_landed(&r, &[&other]).await;
}

const OTHER_WRITER_PROPERTY: &str = "eqdv.test.other-writer";

/// Another writer's commit: a table property, as its own metadata version. Returns the
/// new metadata location.
async fn other_writer_commit(catalog: &GlueCatalog, name: &TableName) -> String {
    use std::str::FromStr;
    let t = LoadedTable::load(catalog, name).await.expect("load");
    let metadata = t
        .metadata
        .as_ref()
        .clone()
        .into_builder(Some(t.pointer.metadata_location.clone()))
        .set_properties(std::collections::HashMap::from([(
            OTHER_WRITER_PROPERTY.to_string(),
            "1".to_string(),
        )]))
        .expect("set property")
        .build()
        .expect("metadata")
        .metadata;
    let next = iceberg::MetadataLocation::from_str(&t.pointer.metadata_location)
        .expect("location")
        .with_next_version()
        .with_new_metadata(&metadata);
    metadata.write_to(&t.file_io, &next).await.expect("write");
    let next = next.to_string();
    catalog
        .swap_pointer(name, &t.pointer, &next)
        .await
        .expect("the other writer commits");
    next
}

use eqdv_test_support::fault_proxy as proxy;
