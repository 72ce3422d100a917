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

#[path = "../shared/tests/support/services.rs"]
mod services;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use eqdv::catalog::{Catalog, GlueCatalog, GlueConfig, TableName, TablePointer};
use eqdv::cleanup::{CleanupOptions, cleanup, list_files, normalize_location, reachable_files};
use eqdv::convert::{ConvertOptions, Outcome, convert};
use eqdv::generate::{KeyType, PartitionKind, WorkloadSpec, expected_rows, generate};
use eqdv::table::{LoadedTable, TableFiles};
use proxy::{Fault, Proxy};

/// The services' settings: the warehouse root and MinIO's endpoint.
fn require_services() -> (String, String) {
    let warehouse = services::require_services();
    (
        warehouse,
        std::env::var("AWS_ENDPOINT_URL_S3").unwrap_or_default(),
    )
}

/// A table generated on Glue + MinIO, with every S3 request going through a proxy.
struct Setup {
    proxy: Proxy,
    catalog: GlueCatalog,
    name: TableName,
    expected: Vec<String>,
}

async fn setup(test: &str, seed: u64) -> Setup {
    let (warehouse, s3) = require_services();
    let proxy = Proxy::start(&s3);
    let unique = format!(
        "{test}_{}_{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_micros())
            .unwrap_or(0)
    );
    let config = GlueConfig {
        warehouse: Some(format!("{}/{unique}", warehouse.trim_end_matches('/'))),
        s3_endpoint: Some(proxy.url()),
        ..Default::default()
    };
    let catalog = GlueCatalog::connect(config).await.expect("glue catalog");
    let name = TableName::new(format!("eqdv_{unique}"), "orders");
    let report = generate(&catalog, &name, &spec(seed))
        .await
        .expect("generate on Glue/S3");
    let expected = expected_rows(&report.state).unwrap();
    Setup {
        proxy,
        catalog,
        name,
        expected,
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
    async fn pointer(&self) -> TablePointer {
        self.catalog
            .load_pointer(&self.name)
            .await
            .expect("pointer")
    }

    async fn table(&self) -> LoadedTable {
        LoadedTable::load(&self.catalog, &self.name)
            .await
            .expect("load")
    }

    async fn files(&self) -> TableFiles {
        let t = self.table().await;
        let head = t.head("main").expect("head");
        TableFiles::read(&t, head.as_ref()).await.expect("files")
    }

    async fn rows(&self) -> Vec<String> {
        eqdv::read::read_canonical(&self.table().await, "main")
            .await
            .expect("read rows")
    }

    /// Every object under the table location.
    async fn objects(&self) -> BTreeSet<String> {
        list_files(&self.table().await)
            .await
            .expect("list")
            .into_iter()
            .map(|f| normalize_location(&f.path))
            .collect()
    }

    /// Objects no metadata version references.
    async fn orphans(&self) -> BTreeSet<String> {
        let reachable = reachable_files(&self.table().await)
            .await
            .expect("reachable");
        self.objects()
            .await
            .into_iter()
            .filter(|o| !reachable.files.contains(o))
            .collect()
    }

    /// Converted: rows as generated, no equality delete, every DV valid, no orphan.
    async fn assert_converted(&self) {
        assert!(self.rows().await == self.expected, "rows differ");
        let files = self.files().await;
        assert!(files.equality_deletes.is_empty());
        assert!(!files.dvs.is_empty());
        let t = self.table().await;
        eqdv::verify::verify_dvs(&t, &files)
            .await
            .unwrap_or_else(|e| panic!("invalid DV: {e}"));
        let orphans = self.orphans().await;
        assert!(orphans.is_empty(), "orphans: {orphans:#?}");
    }

    /// Unchanged: same pointer, rows as generated, equality deletes still live.
    async fn assert_unchanged(&self, pointer: &TablePointer) {
        assert_eq!(&self.pointer().await, pointer, "the pointer moved");
        assert!(self.rows().await == self.expected, "rows changed");
        assert!(!self.files().await.equality_deletes.is_empty());
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
    let pointer = s.pointer().await;
    let before = s.objects().await;
    s.proxy
        .inject("PUT", ".avro", Fault::Status(503), usize::MAX);
    let started = Instant::now();
    let err = convert(&s.catalog, &s.name, &ConvertOptions::default())
        .await
        .expect_err("manifests cannot be written");
    eprintln!("failed after {:?}: {err}", started.elapsed());
    assert!(
        err.to_string().contains(".avro") || err.to_string().contains("503"),
        "{err}"
    );
    assert!(
        s.proxy.injected().len() >= 4,
        "the storage layer retried: {:#?}",
        s.proxy.injected()
    );
    s.proxy.clear();
    s.assert_unchanged(&pointer).await;
    assert_eq!(s.objects().await, before, "the failed attempt left files");
    assert!(
        s.proxy
            .log()
            .iter()
            .any(|l| l.method == "DELETE" && l.path.ends_with(".puffin")),
        "the Puffin file was never deleted"
    );

    let r = convert(&s.catalog, &s.name, &ConvertOptions::default())
        .await
        .expect("a later run converts");
    assert_eq!(r.outcome, Outcome::Converted);
    s.assert_converted().await;
}

/// The connection drops after S3 stored the new metadata.json, on every try: the
/// conversion fails with the table unchanged. Whatever the attempt could not remove
/// (the write's outcome was unknown to it) is an orphan that cleanup removes; nothing
/// else is. A later run converts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_metadata_write_fails_and_cleanup_removes_the_leftovers() {
    let s = setup("dropmeta", 73).await;
    let pointer = s.pointer().await;
    let before = s.objects().await;
    s.proxy
        .inject("PUT", ".metadata.json", Fault::DropAfterForward, usize::MAX);
    let started = Instant::now();
    let err = convert(&s.catalog, &s.name, &ConvertOptions::default())
        .await
        .expect_err("the metadata file cannot be written");
    eprintln!("failed after {:?}: {err}", started.elapsed());
    s.proxy.clear();
    s.assert_unchanged(&pointer).await;

    let leftovers: BTreeSet<String> = s.objects().await.difference(&before).cloned().collect();
    assert_eq!(s.orphans().await, leftovers);
    // The Puffin file, manifests and manifest list were removed by the engine; only
    // the metadata file whose write "failed" (but landed) can be left.
    for l in &leftovers {
        assert!(l.ends_with(".metadata.json"), "left behind: {leftovers:#?}");
    }
    if !leftovers.is_empty() {
        eprintln!("left for cleanup: {leftovers:#?}");
    }

    let young = cleanup(&s.catalog, &s.name, &CleanupOptions::default())
        .await
        .expect("cleanup");
    assert!(young.deleted.is_empty());
    let r = cleanup(&s.catalog, &s.name, &now_only())
        .await
        .expect("cleanup");
    let deleted: BTreeSet<String> = r.deleted.iter().map(|p| normalize_location(p)).collect();
    assert_eq!(deleted, leftovers);
    assert!(s.orphans().await.is_empty());
    assert_eq!(s.objects().await, before);
    s.assert_unchanged(&pointer).await;

    let r = convert(&s.catalog, &s.name, &ConvertOptions::default())
        .await
        .expect("a later run converts");
    assert_eq!(r.outcome, Outcome::Converted);
    s.assert_converted().await;
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
    assert!(took >= delay * 5, "the delays were not applied: {took:?}");
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
    let live = s.objects().await;

    // The listing fails: nothing is deleted.
    s.proxy
        .inject("GET", "list-type=2", Fault::Status(403), usize::MAX);
    let err = cleanup(&s.catalog, &s.name, &now_only())
        .await
        .expect_err("listing fails");
    eprintln!("listing failure: {err}");
    s.proxy.clear();
    assert!(io.exists(&ours).await.unwrap());

    // Reading a manifest fails: nothing is deleted.
    s.proxy
        .inject("GET", ".avro", Fault::Status(403), usize::MAX);
    let err = cleanup(&s.catalog, &s.name, &now_only())
        .await
        .expect_err("the reachable walk fails");
    eprintln!("walk failure: {err}");
    s.proxy.clear();
    assert!(io.exists(&ours).await.unwrap());

    // Young: kept.
    let r = cleanup(&s.catalog, &s.name, &CleanupOptions::default())
        .await
        .unwrap();
    assert_eq!(r.kept_too_young, vec![ours.clone()]);
    assert!(r.deleted.is_empty());
    assert_eq!(r.scanned, live.len());

    // Old enough: only our stray goes.
    let r = cleanup(&s.catalog, &s.name, &now_only()).await.unwrap();
    assert_eq!(r.deleted, vec![ours.clone()]);
    assert!(!io.exists(&ours).await.unwrap());
    assert!(
        io.exists(&theirs).await.unwrap(),
        "deleted a neighbour's file"
    );
    let mut expected = live.clone();
    expected.remove(&normalize_location(&ours));
    assert_eq!(s.objects().await, expected);
    assert!(s.rows().await == s.expected);
}

/// A fault-injecting HTTP/1.1 proxy: one thread per connection, one request per
/// connection (it asks S3 to close), so every request can be judged on its own.
mod proxy {
    use std::io::{BufRead, BufReader, Read, Write};
    use std::net::{Shutdown, TcpListener, TcpStream};
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    /// What to do to a matching request.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Fault {
        /// Answer with this status and an S3 error body; S3 never sees the request.
        Status(u16),
        /// Close the connection without forwarding or answering.
        DropBeforeForward,
        /// Forward it (S3 applies it), then close without answering.
        DropAfterForward,
        /// Wait, then forward normally.
        Delay(Duration),
    }

    struct Rule {
        method: String,
        contains: String,
        fault: Fault,
        remaining: usize,
    }

    /// One request as the proxy saw it.
    #[derive(Clone, Debug)]
    pub struct Logged {
        pub method: String,
        /// The request target without the query.
        pub path: String,
        pub fault: Option<Fault>,
        /// S3's status, when it answered and the answer was passed on.
        pub status: Option<u16>,
    }

    #[derive(Default)]
    struct State {
        rules: Vec<Rule>,
        log: Vec<Logged>,
    }

    pub struct Proxy {
        url: String,
        state: Arc<Mutex<State>>,
    }

    impl Proxy {
        /// Listens on 127.0.0.1 (a free port) and forwards to `upstream` (http://host:port).
        pub fn start(upstream: &str) -> Proxy {
            let upstream = upstream
                .trim_start_matches("http://")
                .trim_end_matches('/')
                .to_string();
            let listener = TcpListener::bind("127.0.0.1:0").expect("bind proxy");
            let url = format!("http://{}", listener.local_addr().expect("addr"));
            let state = Arc::new(Mutex::new(State::default()));
            let shared = state.clone();
            std::thread::spawn(move || {
                for client in listener.incoming().flatten() {
                    let upstream = upstream.clone();
                    let state = shared.clone();
                    std::thread::spawn(move || {
                        let _ = handle(client, &upstream, &state);
                    });
                }
            });
            Proxy { url, state }
        }

        pub fn url(&self) -> String {
            self.url.clone()
        }

        /// Applies `fault` to the next `times` requests with this method whose target
        /// (path and query) contains `contains`. Rules are tried in the order added.
        pub fn inject(&self, method: &str, contains: &str, fault: Fault, times: usize) {
            self.state.lock().unwrap().rules.push(Rule {
                method: method.to_string(),
                contains: contains.to_string(),
                fault,
                remaining: times,
            });
        }

        pub fn clear(&self) {
            self.state.lock().unwrap().rules.clear();
        }

        pub fn log(&self) -> Vec<Logged> {
            self.state.lock().unwrap().log.clone()
        }

        pub fn injected(&self) -> Vec<Logged> {
            self.log()
                .into_iter()
                .filter(|l| l.fault.is_some())
                .collect()
        }
    }

    fn take_fault(state: &Mutex<State>, method: &str, target: &str) -> Option<Fault> {
        let mut s = state.lock().unwrap();
        let rule = s
            .rules
            .iter_mut()
            .find(|r| r.remaining > 0 && r.method == method && target.contains(&r.contains))?;
        rule.remaining -= 1;
        Some(rule.fault)
    }

    fn log(state: &Mutex<State>, entry: Logged) {
        state.lock().unwrap().log.push(entry);
    }

    fn handle(client: TcpStream, upstream: &str, state: &Mutex<State>) -> std::io::Result<()> {
        client.set_read_timeout(Some(Duration::from_secs(120)))?;
        let mut reader = BufReader::new(client.try_clone()?);
        let mut client = client;
        // The request head.
        let mut head: Vec<String> = Vec::new();
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line)? == 0 {
                return Ok(());
            }
            let line = line.trim_end_matches(['\r', '\n']).to_string();
            if line.is_empty() {
                break;
            }
            head.push(line);
        }
        let Some(request_line) = head.first().cloned() else {
            return Ok(());
        };
        let mut parts = request_line.split_whitespace();
        let method = parts.next().unwrap_or_default().to_string();
        let target = parts.next().unwrap_or_default().to_string();
        let header = |name: &str| {
            head[1..].iter().find_map(|h| {
                let (k, v) = h.split_once(':')?;
                k.trim()
                    .eq_ignore_ascii_case(name)
                    .then(|| v.trim().to_string())
            })
        };
        if header("expect").is_some_and(|v| v.eq_ignore_ascii_case("100-continue")) {
            client.write_all(b"HTTP/1.1 100 Continue\r\n\r\n")?;
        }
        // The request body, raw.
        let mut body = Vec::new();
        if header("transfer-encoding").is_some_and(|v| v.to_ascii_lowercase().contains("chunked")) {
            read_chunked(&mut reader, &mut body)?;
        } else if let Some(n) = header("content-length").and_then(|v| v.parse::<usize>().ok()) {
            body.resize(n, 0);
            reader.read_exact(&mut body)?;
        }

        let path = target.split('?').next().unwrap_or_default().to_string();
        let fault = take_fault(state, &method, &target);
        let mut entry = Logged {
            method: method.clone(),
            path,
            fault,
            status: None,
        };
        match fault {
            Some(Fault::Status(code)) => {
                let (reason, s3_code) = match code {
                    503 => ("Service Unavailable", "SlowDown"),
                    500 => ("Internal Server Error", "InternalError"),
                    403 => ("Forbidden", "AccessDenied"),
                    _ => ("Error", "InternalError"),
                };
                let xml = format!(
                    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{s3_code}</Code>\
                     <Message>injected by the eqdv test proxy</Message></Error>"
                );
                let response = format!(
                    "HTTP/1.1 {code} {reason}\r\nContent-Type: application/xml\r\n\
                     Content-Length: {}\r\nConnection: close\r\n\r\n{xml}",
                    xml.len()
                );
                entry.status = Some(code);
                log(state, entry);
                client.write_all(response.as_bytes())?;
                let _ = client.shutdown(Shutdown::Both);
                return Ok(());
            }
            Some(Fault::DropBeforeForward) => {
                log(state, entry);
                let _ = client.shutdown(Shutdown::Both);
                return Ok(());
            }
            Some(Fault::Delay(d)) => std::thread::sleep(d),
            Some(Fault::DropAfterForward) | None => {}
        }

        // Forward with `Connection: close`, read S3's whole answer.
        let mut up = TcpStream::connect(upstream)?;
        up.set_read_timeout(Some(Duration::from_secs(120)))?;
        let mut out = Vec::with_capacity(body.len() + 1024);
        out.extend_from_slice(request_line.as_bytes());
        out.extend_from_slice(b"\r\n");
        for h in &head[1..] {
            let name = h.split(':').next().unwrap_or_default().trim();
            if ["connection", "keep-alive", "proxy-connection", "expect"]
                .iter()
                .any(|n| name.eq_ignore_ascii_case(n))
            {
                continue;
            }
            out.extend_from_slice(h.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"Connection: close\r\n\r\n");
        out.extend_from_slice(&body);
        up.write_all(&out)?;
        let mut response = Vec::new();
        up.read_to_end(&mut response)?;
        let status = std::str::from_utf8(&response[..response.len().min(32)])
            .ok()
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|c| c.parse::<u16>().ok());
        if fault == Some(Fault::DropAfterForward) {
            log(state, entry);
            let _ = client.shutdown(Shutdown::Both);
            return Ok(());
        }
        entry.status = status;
        log(state, entry);
        client.write_all(&response)?;
        let _ = client.shutdown(Shutdown::Write);
        Ok(())
    }

    /// Copies a chunked body (chunks, last chunk, trailers) as is.
    fn read_chunked(reader: &mut impl BufRead, body: &mut Vec<u8>) -> std::io::Result<()> {
        loop {
            let mut size_line = String::new();
            reader.read_line(&mut size_line)?;
            body.extend_from_slice(size_line.as_bytes());
            let size =
                usize::from_str_radix(size_line.trim().split(';').next().unwrap_or("0").trim(), 16)
                    .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
            if size == 0 {
                // Trailers up to the empty line.
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line)? == 0 {
                        return Ok(());
                    }
                    body.extend_from_slice(line.as_bytes());
                    if line == "\r\n" || line == "\n" {
                        return Ok(());
                    }
                }
            }
            let mut chunk = vec![0; size + 2];
            reader.read_exact(&mut chunk)?;
            body.extend_from_slice(&chunk);
        }
    }
}
