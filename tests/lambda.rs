//! The deployed product, end to end, on this machine: the real planner and converter
//! binaries behind AWS's Lambda Runtime Interface Emulator (the Runtime API server of
//! Lambda's container images), a Java-written CDC table on the Glue emulator and MinIO,
//! and LocalStack's SQS FIFO queues. The test moves messages from SQS to the converter
//! the way Lambda's event source mapping does, and Iceberg Java judges the rows.
//!
//! Needs the test services, the interop jar, aws-lambda-rie (`EQDV_LAMBDA_RIE`, built by
//! tests/services/up) and the function binaries built next to this test's binary
//! (`cargo build -p eqdv-planner -p eqdv-converter`; tests/run does all of it).

use eqdv_test_support::{java, services};
use std::collections::HashMap;
use std::fs::File;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use aws_sdk_sqs::types::{MessageSystemAttributeName, QueueAttributeName};
use eqdv::catalog::{Catalog, GlueCatalog, TableName};
use eqdv::table::{LoadedTable, TableFiles};
use java::{JavaServer, JavaTable};

use eqdv_test_support::fault_proxy as proxy;
use serde_json::{Value, json};

/// A function binary: from `EQDV_FUNCTIONS_DIR` when set (e.g. a release build, to
/// measure it), else next to the test binary, which is in `<target>/debug/deps`.
fn binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let dir = match std::env::var_os("EQDV_FUNCTIONS_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => exe
            .parent()
            .and_then(Path::parent)
            .expect("target/debug")
            .to_path_buf(),
    };
    let path = dir.join(name);
    assert!(
        path.is_file(),
        "{} is missing: build it with `cargo build -p {name}` (tests/run does)",
        path.display()
    );
    path
}

fn rie() -> PathBuf {
    match std::env::var_os("EQDV_LAMBDA_RIE").map(PathBuf::from) {
        Some(p) if p.is_file() => p,
        _ => panic!(
            "EQDV_LAMBDA_RIE is not set to aws-lambda-rie: run tests/services/up and source \
             tests/services/env (tests/run does both)"
        ),
    }
}

/// One function: its binary behind its own Runtime Interface Emulator.
struct Function {
    name: String,
    child: Child,
    port: u16,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Function {
    fn start(name: &str, env: &[(&str, String)], timeout_secs: u32) -> Self {
        let free_port = || {
            let listener = TcpListener::bind("127.0.0.1:0").expect("free port");
            listener.local_addr().expect("addr").port()
        };
        // The invoke endpoint, and the Runtime API the function polls (default 9001,
        // which MinIO's console holds).
        let (port, runtime_api_port) = (free_port(), free_port());
        let dir = tempfile::tempdir().expect("tempdir");
        let log = dir.path().join(format!("{name}.log"));
        let out = File::create(&log).expect("log file");
        let mut command = Command::new(rie());
        command
            .arg("--runtime-interface-emulator-address")
            .arg(format!("127.0.0.1:{port}"))
            .arg("--runtime-api-address")
            .arg(format!("127.0.0.1:{runtime_api_port}"))
            .arg(binary(name))
            .env("AWS_LAMBDA_FUNCTION_NAME", name)
            .env("AWS_LAMBDA_FUNCTION_TIMEOUT", timeout_secs.to_string())
            .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "2048")
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("log"))
            .stderr(out);
        for (k, v) in env {
            command.env(k, v);
        }
        // Its own process group, so that stopping it stops the function process too.
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        let child = command.spawn().expect("start aws-lambda-rie");
        let started = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "aws-lambda-rie for {name} did not listen on {port}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Self {
            name: name.to_string(),
            child,
            port,
            log,
            _dir: dir,
        }
    }

    /// Invokes the function (RequestResponse) and returns its JSON response.
    async fn invoke(&self, payload: &Value) -> Value {
        let text = self.invoke_text(payload).await;
        serde_json::from_str(&text).unwrap_or_else(|e| {
            panic!(
                "{} answered non-JSON ({e}): {text}\n{}",
                self.name,
                self.logs()
            )
        })
    }

    /// Invokes the function and returns its response as text: the emulator answers a
    /// timed-out invocation with a plain-text message.
    async fn invoke_text(&self, payload: &Value) -> String {
        let url = format!(
            "http://127.0.0.1:{}/2015-03-31/functions/function/invocations",
            self.port
        );
        let response = reqwest::Client::new()
            .post(url)
            .json(payload)
            .timeout(Duration::from_secs(300))
            .send()
            .await
            .unwrap_or_else(|e| panic!("invoking {}: {e}\n{}", self.name, self.logs()));
        response.text().await.expect("response body")
    }

    fn logs(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The JSON lines the function printed (logs and EMF metrics).
    fn json_lines(&self) -> Vec<Value> {
        self.logs()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .collect()
    }

    /// The emulator's measure of the function's init phase.
    fn init_duration_ms(&self) -> Option<f64> {
        let logs = self.logs();
        let at = logs.find("INIT REPORT(durationMs: ")? + "INIT REPORT(durationMs: ".len();
        logs[at..].split(')').next()?.trim().parse().ok()
    }

    /// The EMF documents of `function` metrics.
    fn metrics(&self) -> Vec<Value> {
        self.json_lines()
            .into_iter()
            .filter(|v| v.get("_aws").is_some())
            .collect()
    }
}

impl Drop for Function {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.child.id())])
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// LocalStack's SQS, with a FIFO shard queue and its FIFO DLQ for one test.
struct Queues {
    client: aws_sdk_sqs::Client,
    shards: String,
    dlq: String,
}

impl Queues {
    async fn create(unique: &str) -> Self {
        assert!(
            std::env::var("AWS_ENDPOINT_URL_SQS").is_ok(),
            "AWS_ENDPOINT_URL_SQS is not set: source tests/services/env"
        );
        let config = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
        let client = aws_sdk_sqs::Client::new(&config);
        let name: String = unique
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
            .take(60)
            .collect();
        let fifo = |queue: &str| {
            let client = client.clone();
            let queue = queue.to_string();
            async move {
                client
                    .create_queue()
                    .queue_name(queue)
                    .attributes(QueueAttributeName::FifoQueue, "true")
                    .attributes(QueueAttributeName::ContentBasedDeduplication, "false")
                    .attributes(QueueAttributeName::VisibilityTimeout, "60")
                    .send()
                    .await
                    .expect("create queue")
                    .queue_url()
                    .expect("queue url")
                    .to_string()
            }
        };
        let dlq = fifo(&format!("{name}-dlq.fifo")).await;
        let shards = fifo(&format!("{name}-shards.fifo")).await;
        Self {
            client,
            shards,
            dlq,
        }
    }

    /// Receives every visible message of `queue` (all attributes), deleting none.
    async fn receive_all(&self, queue: &str, expected: usize) -> Vec<aws_sdk_sqs::types::Message> {
        let mut out = Vec::new();
        let started = Instant::now();
        while out.len() < expected && started.elapsed() < Duration::from_secs(30) {
            let got = self
                .client
                .receive_message()
                .queue_url(queue)
                .max_number_of_messages(10)
                .wait_time_seconds(1)
                .message_system_attribute_names(MessageSystemAttributeName::All)
                .message_attribute_names("All")
                .send()
                .await
                .expect("receive");
            out.extend(got.messages.unwrap_or_default());
        }
        out
    }

    /// The messages of `queue` visible now (one receive), deleting none.
    async fn receive_now(&self, queue: &str) -> Vec<aws_sdk_sqs::types::Message> {
        self.client
            .receive_message()
            .queue_url(queue)
            .max_number_of_messages(10)
            .wait_time_seconds(1)
            .send()
            .await
            .expect("receive")
            .messages
            .unwrap_or_default()
    }

    async fn delete(&self, queue: &str, message: &aws_sdk_sqs::types::Message) {
        self.client
            .delete_message()
            .queue_url(queue)
            .receipt_handle(message.receipt_handle().expect("receipt handle"))
            .send()
            .await
            .expect("delete message");
    }
}

/// The event Lambda's SQS event source mapping delivers for these messages.
fn sqs_event(queue_arn: &str, messages: &[&aws_sdk_sqs::types::Message]) -> Value {
    let records: Vec<Value> = messages
        .iter()
        .map(|m| {
            let attributes: HashMap<String, String> = m
                .attributes()
                .map(|a| {
                    a.iter()
                        .map(|(k, v)| (k.as_str().to_string(), v.clone()))
                        .collect()
                })
                .unwrap_or_default();
            json!({
                "messageId": m.message_id(),
                "receiptHandle": m.receipt_handle(),
                "body": m.body(),
                "attributes": attributes,
                "messageAttributes": {},
                "md5OfBody": m.md5_of_body(),
                "eventSource": "aws:sqs",
                "eventSourceARN": queue_arn,
                "awsRegion": "us-east-1",
            })
        })
        .collect();
    json!({ "Records": records })
}

/// A hand-made SQS record (for messages that never went through the queue).
fn sqs_record(message_id: &str, body: &str, receive_count: u32) -> Value {
    json!({
        "messageId": message_id,
        "receiptHandle": format!("handle-{message_id}"),
        "body": body,
        "attributes": {
            "ApproximateReceiveCount": receive_count.to_string(),
            "MessageGroupId": "test-group",
            "MessageDeduplicationId": message_id,
            "SentTimestamp": "1700000000000",
        },
        "messageAttributes": {},
        "eventSource": "aws:sqs",
        "eventSourceARN": "arn:aws:sqs:us-east-1:000000000000:test.fifo",
        "awsRegion": "us-east-1",
    })
}

fn glue_table_change(table: &TableName) -> Value {
    json!({
        "version": "0",
        "id": "3c2b1a0e-0000-4000-8000-000000000000",
        "detail-type": "Glue Data Catalog Table State Change",
        "source": "aws.glue",
        "account": "000000000000",
        "time": "2026-11-30T00:00:00Z",
        "region": "us-east-1",
        "resources": [format!("arn:aws:glue:us-east-1:000000000000:table/{}/{}", table.namespace, table.name)],
        "detail": {
            "databaseName": table.namespace,
            "tableName": table.name,
            "typeOfChange": "UpdateTable",
            "changedPartitions": []
        }
    })
}

/// The variables both functions get: the services' endpoints come from the test's own
/// environment (tests/services/env), which the emulator passes on.
fn function_env(t: &JavaTable, queues: &Queues) -> Vec<(&'static str, String)> {
    vec![
        ("EQDV_CATALOG", "glue".into()),
        ("EQDV_WAREHOUSE", t.warehouse.clone()),
        ("EQDV_ALLOWED_DATABASES", t.database.clone()),
        ("EQDV_SHARD_QUEUE_URL", queues.shards.clone()),
        ("EQDV_DEAD_LETTER_QUEUE_URL", queues.dlq.clone()),
        ("EQDV_MAX_RECEIVES", "3".into()),
        ("EQDV_DEADLINE_MARGIN_SECONDS", "5".into()),
    ]
}

/// A CDC table by Java: 800 rows and 4 commits (`EQDV_E2E_ROWS` makes it bigger, to
/// measure a larger shard's memory with the end-to-end test).
fn write_cdc(t: &JavaTable, seed: &str) {
    let rows = std::env::var("EQDV_E2E_ROWS").unwrap_or_else(|_| "800".into());
    t.java(
        "write-cdc",
        &[
            "--seed",
            seed,
            "--commits",
            "4",
            "--rows",
            &rows,
            "--key",
            "long",
            "--partition",
            "identity",
        ],
    );
}

async fn head_snapshot(
    catalog: &dyn Catalog,
    name: &TableName,
) -> (Option<i64>, HashMap<String, String>) {
    let t = LoadedTable::load(catalog, name).await.expect("load");
    let head = t.head("main").expect("head");
    let summary = head
        .as_ref()
        .map(|s| s.summary().additional_properties.clone())
        .unwrap_or_default();
    (head.map(|s| s.snapshot_id()), summary)
}

async fn live_equality_deletes(catalog: &dyn Catalog, name: &TableName) -> usize {
    let t = LoadedTable::load(catalog, name).await.expect("load");
    let head = t.head("main").expect("head");
    TableFiles::read(&t, head.as_ref())
        .await
        .expect("files")
        .equality_deletes
        .len()
}

/// The table, its live files, and the JSON of the first shard a plan of it makes.
async fn first_shard(catalog: &dyn Catalog, name: &TableName) -> (LoadedTable, TableFiles, String) {
    let loaded = LoadedTable::load(catalog, name).await.expect("load");
    let head = loaded.head("main").expect("head");
    let files = TableFiles::read(&loaded, head.as_ref())
        .await
        .expect("files");
    let plan = eqdv::plan::plan(&loaded, "main", &files, &Default::default()).expect("plan");
    let shard = serde_json::to_string(&plan.shards[0]).expect("shard JSON");
    (loaded, files, shard)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn glue_event_to_planner_to_sqs_to_converter() {
    let t = JavaTable::new("lambda_e2e");
    write_cdc(&t, "21");
    let before = t.dump();
    let catalog = t.catalog().await;
    let name = t.name();
    assert!(
        live_equality_deletes(&catalog, &name).await > 0,
        "the Java writer wrote no equality deletes"
    );

    // 0. With EQDV_QUEUE_GROUPS=1 (the stacks' default) the planner packs the table's
    // partitions into one shard, in the table's one message group (its own queues: the
    // message is not converted).
    let one = Queues::create(&services::unique_name("e2e-one")).await;
    let mut env = function_env(&t, &one);
    env.push(("EQDV_QUEUE_GROUPS", "1".into()));
    let packed = Function::start("eqdv-planner", &env, 60)
        .invoke(&glue_table_change(&name))
        .await;
    assert_eq!(
        packed["shards"].as_array().map(Vec::len),
        Some(1),
        "{packed}"
    );
    let message = one.receive_all(&one.shards, 1).await;
    let attributes = message[0].attributes().expect("attributes");
    assert_eq!(
        attributes[&MessageSystemAttributeName::MessageGroupId],
        format!("{name}/g00")
    );
    let shard: Value = serde_json::from_str(message[0].body().expect("body")).expect("shard JSON");
    let partitions = shard["partitions"].as_array().map_or(0, Vec::len);
    assert!(partitions > 1, "one shard of all the partitions: {shard}");

    let unique = services::unique_name("e2e");
    let queues = Queues::create(&unique).await;
    let env = function_env(&t, &queues);
    let planner = Function::start("eqdv-planner", &env, 60);
    let converter = Function::start("eqdv-converter", &env, 120);

    // 1. A Glue table change reaches the planner: shards go to the FIFO queue.
    let planned = planner.invoke(&glue_table_change(&name)).await;
    assert_eq!(
        planned["tables"][name.to_string()]["outcome"],
        "planned",
        "{planned}"
    );
    let shards = planned["shards"].as_array().expect("shards").clone();
    assert!(!shards.is_empty(), "{planned}");
    assert!(
        shards.iter().all(|s| s["message_id"].is_string()),
        "{planned}"
    );

    // 2. The event source mapping's job: each message, in a batch of one, to the converter.
    let messages = queues.receive_all(&queues.shards, shards.len()).await;
    assert_eq!(messages.len(), shards.len(), "messages in the shard queue");
    for m in &messages {
        let attributes = m.attributes().expect("attributes");
        let group = &attributes[&MessageSystemAttributeName::MessageGroupId];
        assert!(
            group.starts_with(&name.to_string()),
            "group id {group} names the table"
        );
        let shard: Value = serde_json::from_str(m.body().expect("body")).expect("shard JSON");
        assert_eq!(
            attributes[&MessageSystemAttributeName::MessageDeduplicationId],
            shard["id"].as_str().expect("shard id"),
            "dedup id is the shard's file-set hash"
        );
    }
    let arn = "arn:aws:sqs:us-east-1:000000000000:shards.fifo";
    for m in &messages {
        let response = converter.invoke(&sqs_event(arn, &[m])).await;
        assert_eq!(
            response["batchItemFailures"],
            json!([]),
            "{response}\n{}",
            converter.logs()
        );
        queues.delete(&queues.shards, m).await;
    }

    // 3. Converted: Java reads the same rows, accepts the DVs, and no equality delete is live.
    let after = t.dump();
    assert!(
        after == before,
        "Java reads different rows after the Lambda conversion"
    );
    let check = t.java_json("check-dvs", &[]);
    assert_eq!(check["equality_delete_files"], 0, "{check}");
    assert!(check["dvs"].as_u64().unwrap_or(0) > 0, "{check}");
    let (head, summary) = head_snapshot(&catalog, &name).await;
    assert_eq!(
        summary.get("eqdv.source").map(String::as_str),
        Some("eqdv-converter (AWS Lambda)")
    );
    assert!(summary.contains_key("eqdv.shard-id"), "{summary:?}");

    // 4. Idempotent: the same message again is "nothing to do" and commits nothing.
    let again = converter.invoke(&sqs_event(arn, &[&messages[0]])).await;
    assert_eq!(again["batchItemFailures"], json!([]), "{again}");
    assert_eq!(
        head_snapshot(&catalog, &name).await.0,
        head,
        "a redelivered shard committed again"
    );
    let outcomes: Vec<String> = converter
        .metrics()
        .iter()
        .filter_map(|m| m["Outcome"].as_str().map(str::to_string))
        .collect();
    assert_eq!(
        outcomes.last().map(String::as_str),
        Some("nothing-to-do"),
        "{outcomes:?}"
    );
    // A warm instance keeps the manifests it read: the first shard fetched them all, the
    // redelivered one read the table through what the shards before it kept.
    let shard_metrics: Vec<Value> = converter
        .metrics()
        .into_iter()
        .filter(|m| m["Outcome"].is_string())
        .collect();
    let (first, last) = (&shard_metrics[0], &shard_metrics[shard_metrics.len() - 1]);
    assert_eq!(first["ManifestFilesKept"], 0.0, "{first}");
    assert!(
        first["ManifestFilesFetched"].as_f64().unwrap_or(0.0) > 0.0,
        "{first}"
    );
    assert!(
        last["ManifestFilesKept"].as_f64().unwrap_or(0.0) > 0.0,
        "{last}"
    );

    // 5. The planner now skips the table quickly: eqdv's own head, no equality deletes.
    let replanned = planner.invoke(&glue_table_change(&name)).await;
    assert_eq!(
        replanned["tables"][name.to_string()]["outcome"],
        "nothing-to-do",
        "{replanned}"
    );

    // 6. Observability: EMF metrics with the counters, JSON logs with the snapshot ids.
    let converted: Vec<Value> = converter
        .metrics()
        .into_iter()
        .filter(|m| m["Outcome"] == "converted")
        .collect();
    assert_eq!(converted.len(), messages.len());
    for m in &converted {
        assert_eq!(m["_aws"]["CloudWatchMetrics"][0]["Namespace"], "eqdv");
        assert!(m["DVsWritten"].as_f64().unwrap_or(0.0) > 0.0, "{m}");
        assert!(
            m["EqualityDeleteFilesConverted"].as_f64().unwrap_or(0.0) > 0.0,
            "{m}"
        );
        assert_eq!(m["CommitAttempts"], 1.0, "{m}");
        // Counted even when the writer wrote no filter (Java's tables here: none).
        assert_eq!(m["BloomFiltersRead"], 0.0, "{m}");
        assert_eq!(m["Table"], name.to_string());
    }
    let done = converter
        .json_lines()
        .into_iter()
        .find(|l| l["message"] == "shard done" && l["outcome"] == "Converted")
        .expect("a 'shard done' log line");
    // Snapshot ids are logged as JSON numbers, the ones the metrics name.
    let logged = done["new_snapshot_id"]
        .as_i64()
        .expect("new_snapshot_id")
        .to_string();
    assert!(
        converted
            .iter()
            .any(|m| m["NewSnapshotId"].as_str() == Some(logged.as_str())),
        "{done}"
    );
    assert!(done["base_snapshot_id"].is_i64(), "{done}");
    let planner_metrics = planner.metrics();
    assert_eq!(planner_metrics[0]["ShardsSent"], shards.len() as f64);

    for m in &converted {
        eprintln!(
            "shard: {} equality delete rows from {} files -> {} DVs; {} of {} candidate files scanned, {} bytes read, {} ms",
            m["EqualityDeleteRowsConverted"],
            m["EqualityDeleteFilesConverted"],
            m["DVsWritten"],
            m["FilesScanned"],
            m["CandidateFiles"],
            m["BytesRead"],
            m["Duration"]
        );
    }
    let rss: Vec<f64> = converted
        .iter()
        .filter_map(|m| m["PeakRss"].as_f64())
        .collect();
    eprintln!(
        "init duration: planner {:?} ms, converter {:?} ms; converter peak RSS {:?} MiB over {} shard(s)",
        planner.init_duration_ms(),
        converter.init_duration_ms(),
        rss.iter()
            .map(|b| (b / 1048576.0).round())
            .collect::<Vec<_>>(),
        converted.len()
    );
    assert!(
        planner.init_duration_ms().is_some(),
        "no INIT REPORT from the emulator"
    );
}

/// A REST catalog emits no table-change event: its deployment runs the planner on the
/// scheduled sweep. The planner, on EQDV_CATALOG=rest, lists the allowed namespace
/// through the REST catalog and queues the table's shards; the converter commits each
/// through the catalog; Java, reading through the same catalog, judges. The functions'
/// OAuth2 client credentials are in a Secrets Manager secret (as the stacks deploy
/// them), read at cold start: every request to the catalog carries the token the
/// catalog's token endpoint grants that client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rest_catalog_sweep_to_planner_to_sqs_to_converter() {
    let t = JavaTable::new_rest("lambda_rest");
    write_cdc(&t, "24");
    let before = t.dump();
    let catalog = services::rest_catalog().await;
    let name = t.name();
    assert!(live_equality_deletes(&catalog, &name).await > 0);

    let secret_arn = rest_credential_secret(&services::unique_name("e2e-rest")).await;
    // Counts the catalog requests that carry the REST fixture's token for client
    // `eqdv-lambda` (a zero delay changes nothing else).
    let rest = proxy::Proxy::start(&services::rest_uri());
    rest.inject_request(
        "GET",
        "authorization: bearer client-credentials-token:sub=eqdv-lambda",
        proxy::Fault::Delay(Duration::ZERO),
        usize::MAX,
    );
    let queues = Queues::create(&services::unique_name("e2e-rest")).await;
    let mut env = function_env(&t, &queues);
    env.retain(|(k, _)| !matches!(*k, "EQDV_CATALOG" | "EQDV_WAREHOUSE"));
    env.push(("EQDV_CATALOG", "rest".into()));
    env.push(("EQDV_REST_URI", rest.url()));
    env.push(("EQDV_REST_CREDENTIAL_SECRET_ARN", secret_arn));
    let planner = Function::start("eqdv-planner", &env, 60);
    let converter = Function::start("eqdv-converter", &env, 120);

    let sweep = json!({"source": "aws.events", "detail-type": "Scheduled Event", "detail": {}});
    let planned = planner.invoke(&sweep).await;
    assert_eq!(
        planned["tables"][name.to_string()]["outcome"],
        "planned",
        "{planned}\n{}",
        planner.logs()
    );
    convert_planned_shards(&planned, &queues, &converter).await;

    t.assert_converted(&before);
    let (_, summary) = head_snapshot(&catalog, &name).await;
    assert_eq!(
        summary.get("eqdv.source").map(String::as_str),
        Some("eqdv-converter (AWS Lambda)")
    );
    // The next sweep finds nothing to do.
    let again = planner.invoke(&sweep).await;
    assert_eq!(
        again["tables"][name.to_string()]["outcome"],
        "nothing-to-do",
        "{again}"
    );
    let log = rest.log();
    let gets = log.iter().filter(|l| l.method == "GET").count();
    assert!(gets > 0, "{log:?}");
    assert_eq!(
        rest.matched(),
        gets,
        "every GET carries the token of the secret's client: {log:?}"
    );

    // The catalog refuses the table now: the planner's sweep fails on it, and a shard of
    // it sent to the converter is a dead letter. Neither what the functions print (JSON
    // logs, EMF metrics) nor the dead letter holds the secret or the token it got.
    rest.clear();
    rest.inject(
        "GET",
        &format!("/tables/{}", name.name),
        proxy::Fault::Status(403),
        usize::MAX,
    );
    let refused_sweep = planner.invoke(&sweep).await;
    let shard = json!({
        "id": "00000000000000ff",
        "table": {"namespace": name.namespace, "name": name.name},
        "branch": "main",
        "base_snapshot_id": 1,
        "partitions": [],
        "groups": [],
        "estimated_bytes": 0
    });
    let event = json!({"Records": [sqs_record("m-refused", &shard.to_string(), 1)]});
    let response = converter.invoke(&event).await;
    let dead = queues.receive_all(&queues.dlq, 1).await;
    assert_eq!(dead.len(), 1, "{response}\n{}", converter.logs());
    let mut printed = format!(
        "{refused_sweep}\n{response}\n{}\n{}\n",
        planner.logs(),
        converter.logs()
    );
    for m in &dead {
        printed.push_str(&format!("{:?}\n", m.body()));
        for (key, value) in m.message_attributes().into_iter().flatten() {
            printed.push_str(&format!("{key}={:?}\n", value.string_value()));
        }
    }
    assert!(
        printed.contains("403") && printed.contains(&name.name),
        "the failures were not printed: {printed}"
    );
    for secret in [
        "from-the-secret",
        "client-credentials-token:sub=eqdv-lambda",
    ] {
        let lines: Vec<&str> = printed.lines().filter(|l| l.contains(secret)).collect();
        assert!(lines.is_empty(), "{secret} was printed: {lines:#?}");
    }
}

/// A Secrets Manager secret holding OAuth2 client credentials for client `eqdv-lambda`
/// (the services' REST fixture grants any), in JSON form; returns its ARN.
async fn rest_credential_secret(name: &str) -> String {
    let sdk = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .load()
        .await;
    aws_sdk_secretsmanager::Client::new(&sdk)
        .create_secret()
        .name(name)
        .secret_string(r#"{"client_id": "eqdv-lambda", "client_secret": "from-the-secret"}"#)
        .send()
        .await
        .expect("create the secret")
        .arn
        .expect("the secret's ARN")
}

/// Feeds every shard `planned` queued to `converter`, one SQS message per invocation,
/// each converted without a batch item failure and deleted from the queue.
async fn convert_planned_shards(planned: &Value, queues: &Queues, converter: &Function) {
    let shards = planned["shards"].as_array().expect("shards").clone();
    assert!(!shards.is_empty(), "{planned}");
    let messages = queues.receive_all(&queues.shards, shards.len()).await;
    assert_eq!(messages.len(), shards.len(), "messages in the shard queue");
    let arn = "arn:aws:sqs:us-east-1:000000000000:shards.fifo";
    for m in &messages {
        let response = converter.invoke(&sqs_event(arn, &[m])).await;
        assert_eq!(
            response["batchItemFailures"],
            json!([]),
            "{response}\n{}",
            converter.logs()
        );
        queues.delete(&queues.shards, m).await;
    }
}

/// S3 Tables emits no table change event: a deployment on a table bucket gets its
/// commits from CloudTrail (EventBridge's `AWS API Call via CloudTrail` of
/// `UpdateTableMetadataLocation`) and the scheduled sweep. The planner, on
/// EQDV_CATALOG=s3tables, plans the table CloudTrail names and queues its shards; the
/// converter swaps the pointer under S3 Tables' version token; Java, reading through
/// the same table bucket, judges; the next sweep finds nothing to do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_tables_commit_to_planner_to_sqs_to_converter() {
    let bucket = services::s3tables_bucket("lambda_s3t").await;
    let t = JavaTable::new_s3tables("lambda_s3t", &bucket);
    write_cdc(&t, "25");
    let before = t.dump();
    let catalog = services::s3tables_catalog(&bucket).await;
    let name = t.name();
    assert!(live_equality_deletes(&catalog, &name).await > 0);

    let queues = Queues::create(&services::unique_name("e2e-s3t")).await;
    let mut env = function_env(&t, &queues);
    env.retain(|(k, _)| !matches!(*k, "EQDV_CATALOG" | "EQDV_WAREHOUSE"));
    let endpoint = services::s3tables_endpoint();
    env.extend([
        ("EQDV_CATALOG", "s3tables".to_string()),
        ("EQDV_S3TABLES_BUCKET_ARN", bucket.clone()),
        ("EQDV_S3TABLES_ENDPOINT", endpoint.clone()),
        // The emulator serves the table bucket's storage too.
        ("EQDV_S3_ENDPOINT", endpoint),
    ]);
    let planner = Function::start("eqdv-planner", &env, 60);
    let converter = Function::start("eqdv-converter", &env, 120);

    // Java's last commit, as CloudTrail records it and EventBridge delivers it.
    let pointer = catalog.load_pointer(&name).await.expect("pointer");
    let commit = json!({
        "version": "0",
        "source": "aws.s3tables",
        "detail-type": "AWS API Call via CloudTrail",
        "detail": {
            "eventSource": "s3tables.amazonaws.com",
            "eventName": "UpdateTableMetadataLocation",
            "requestParameters": {
                "tableBucketARN": bucket,
                "namespace": name.namespace,
                "name": name.name,
                "metadataLocation": pointer.metadata_location,
            }
        }
    });
    let planned = planner.invoke(&commit).await;
    assert_eq!(
        planned["tables"][name.to_string()]["outcome"],
        "planned",
        "{planned}\n{}",
        planner.logs()
    );
    convert_planned_shards(&planned, &queues, &converter).await;

    t.assert_converted(&before);
    let (_, summary) = head_snapshot(&catalog, &name).await;
    assert_eq!(
        summary.get("eqdv.source").map(String::as_str),
        Some("eqdv-converter (AWS Lambda)")
    );
    let sweep = json!({"source": "aws.events", "detail-type": "Scheduled Event", "detail": {}});
    let again = planner.invoke(&sweep).await;
    assert_eq!(
        again["tables"][name.to_string()]["outcome"],
        "nothing-to-do",
        "{again}"
    );
}

/// With EQDV_CONVERT_IN_PLANNER_MAX_MB (the stacks set it), a plan of one small shard is
/// converted by the planner in the same invocation and nothing is queued; a conversion
/// that cannot finish (here: no time left before the deadline's margin) commits nothing
/// and queues the shard instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_of_one_small_shard_is_converted_by_the_planner() {
    let t = JavaTable::new("lambda_in_planner");
    write_cdc(&t, "33");
    let before = t.dump();
    let catalog = t.catalog().await;
    let name = t.name();
    assert!(live_equality_deletes(&catalog, &name).await > 0);
    let (head_before, _) = head_snapshot(&catalog, &name).await;

    let queues = Queues::create(&services::unique_name("e2e-in-planner")).await;
    let mut env = function_env(&t, &queues);
    env.push(("EQDV_QUEUE_GROUPS", "1".into()));
    env.push(("EQDV_CONVERT_IN_PLANNER_MAX_MB", "256".into()));

    // 1. The margin takes the whole invocation: the conversion stops before it starts,
    // and the shard goes to the queue. The table is untouched.
    let mut no_time = env.clone();
    no_time.retain(|(k, _)| *k != "EQDV_DEADLINE_MARGIN_SECONDS");
    no_time.push(("EQDV_DEADLINE_MARGIN_SECONDS", "60".into()));
    let hurried = Function::start("eqdv-planner", &no_time, 30);
    let queued = hurried.invoke(&glue_table_change(&name)).await;
    let shards = queued["shards"].as_array().expect("shards").clone();
    assert_eq!(shards.len(), 1, "{queued}");
    assert_eq!(shards[0]["in_planner"]["result"], "queued", "{queued}");
    let error = shards[0]["in_planner"]["error"]
        .as_str()
        .unwrap_or_default();
    assert!(error.contains("deadline"), "{error}");
    assert!(shards[0]["message_id"].is_string(), "{queued}");
    let messages = queues.receive_all(&queues.shards, 1).await;
    assert_eq!(messages.len(), 1, "the shard is queued");
    queues.delete(&queues.shards, &messages[0]).await;
    assert_eq!(head_snapshot(&catalog, &name).await.0, head_before);
    // The conversion's own metrics say why (as the converter's would), the planner's
    // count the shard queued after it.
    let metrics = hurried.metrics();
    let of = |function: &str| {
        metrics
            .iter()
            .find(|m| m["Function"] == function)
            .cloned()
            .unwrap_or_else(|| panic!("no {function} metrics: {metrics:?}"))
    };
    assert_eq!(of("converter")["DeadlineStops"], 1.0);
    assert_eq!(of("planner")["ShardsQueuedAfterPlannerFailed"], 1.0);
    assert_eq!(of("planner")["ShardsSent"], 1.0);
    drop(hurried);

    // 2. With time: converted in the planner's invocation, nothing queued.
    let planner = Function::start("eqdv-planner", &env, 60);
    let planned = planner.invoke(&glue_table_change(&name)).await;
    let shards = planned["shards"].as_array().expect("shards").clone();
    assert_eq!(shards.len(), 1, "{planned}");
    let done = &shards[0]["in_planner"];
    assert_eq!(done["result"], "converted", "{planned}\n{}", planner.logs());
    assert_eq!(done["outcome"], "converted", "{planned}");
    assert!(done["dvs_written"].as_u64().unwrap_or(0) > 0, "{planned}");
    assert!(shards[0]["message_id"].is_null(), "{planned}");
    assert!(
        queues.receive_now(&queues.shards).await.is_empty(),
        "a shard converted in the planner was queued too"
    );
    let (head, summary) = head_snapshot(&catalog, &name).await;
    assert_eq!(head, done["new_snapshot_id"].as_i64(), "{planned}");
    assert_eq!(
        summary.get("eqdv.source").map(String::as_str),
        Some("eqdv-planner (AWS Lambda)")
    );
    let planner_metrics: Vec<Value> = planner
        .metrics()
        .into_iter()
        .filter(|m| m["Function"] == "planner")
        .collect();
    assert_eq!(planner_metrics[0]["ShardsConvertedInPlanner"], 1.0);
    assert_eq!(planner_metrics[0]["ShardsSent"], 0.0);
    assert_eq!(planner_metrics[0]["ShardSendFailures"], 0.0);

    // 3. Judged by Java: the same rows, the DVs accepted, no equality delete live.
    assert!(
        t.dump() == before,
        "Java reads different rows after the planner's conversion"
    );
    let check = t.java_json("check-dvs", &[]);
    assert_eq!(check["equality_delete_files"], 0, "{check}");
    assert!(check["dvs"].as_u64().unwrap_or(0) > 0, "{check}");

    // 4. The next event finds nothing to do and converts nothing.
    let again = planner.invoke(&glue_table_change(&name)).await;
    assert_eq!(
        again["tables"][name.to_string()]["outcome"],
        "nothing-to-do",
        "{again}"
    );
    assert_eq!(head_snapshot(&catalog, &name).await.0, head);

    // 5. Java's next commit, converted by the same (warm) instance: it fetches the new
    // manifest list and the manifests the commits since added, and keeps the rest from
    // its earlier invocation; Java reads the same rows as before the conversion.
    let rows = std::env::var("EQDV_E2E_ROWS").unwrap_or_else(|_| "800".into());
    t.write_cdc("33", "1", &rows, "long", "identity");
    let before_next = t.dump();
    let next = planner.invoke(&glue_table_change(&name)).await;
    let shards = next["shards"].as_array().expect("shards").clone();
    assert_eq!(shards.len(), 1, "{next}");
    assert_eq!(shards[0]["in_planner"]["result"], "converted", "{next}");
    let last = planner
        .metrics()
        .into_iter()
        .rfind(|m| m["Function"] == "planner")
        .expect("the planner's metrics");
    let (kept, fetched) = (&last["ManifestFilesKept"], &last["ManifestFilesFetched"]);
    assert!(kept.as_f64().unwrap_or(0.0) > 0.0, "nothing kept: {last}");
    let manifests = {
        let table = LoadedTable::load(&catalog, &name).await.expect("load");
        let snapshot = table
            .metadata
            .snapshot_by_id(
                shards[0]["in_planner"]["base_snapshot_id"]
                    .as_i64()
                    .unwrap_or(-1),
            )
            .cloned()
            .expect("the converted base");
        TableFiles::read(&table, Some(&snapshot))
            .await
            .expect("files")
            .manifests
            .len() as f64
    };
    // The manifest list is new, and so are Java's manifests; the others are kept.
    let fetched = fetched.as_f64().unwrap_or(f64::MAX);
    assert!(
        fetched >= 1.0 && fetched < manifests + 1.0,
        "fetched {fetched} of {manifests} manifests and the list: {last}"
    );
    assert!(
        t.dump() == before_next,
        "Java reads different rows after the warm planner's conversion"
    );
    let check = t.java_json("check-dvs", &[]);
    assert_eq!(check["equality_delete_files"], 0, "{check}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn poison_shards_go_to_the_dead_letter_queue_with_their_error() {
    let t = JavaTable::new("lambda_poison");
    let unique = services::unique_name("poison");
    let queues = Queues::create(&unique).await;
    let env = function_env(&t, &queues);
    let converter = Function::start("eqdv-converter", &env, 60);

    let missing_table = json!({
        "id": "0123456789abcdef",
        "table": {"namespace": t.database, "name": "does_not_exist"},
        "branch": "main",
        "base_snapshot_id": 1,
        "partitions": [],
        "groups": [],
        "estimated_bytes": 0
    });
    let event = json!({"Records": [
        sqs_record("m-garbage", "{\"hello\": \"world\"}", 1),
        sqs_record("m-missing", &missing_table.to_string(), 1),
    ]});
    let response = converter.invoke(&event).await;
    // Both were dead-lettered (and so acknowledged), not failed back to the queue.
    assert_eq!(
        response["batchItemFailures"],
        json!([]),
        "{response}\n{}",
        converter.logs()
    );
    let dead = queues.receive_all(&queues.dlq, 2).await;
    let mut kinds: HashMap<String, String> = HashMap::new();
    for m in &dead {
        let attrs = m.message_attributes().expect("attributes");
        let source = attrs["eqdv-source-message-id"]
            .string_value()
            .expect("id")
            .to_string();
        let kind = attrs["eqdv-error-kind"]
            .string_value()
            .expect("kind")
            .to_string();
        let error = attrs["eqdv-error"]
            .string_value()
            .expect("error")
            .to_string();
        match source.as_str() {
            "m-garbage" => {
                assert_eq!(m.body(), Some("{\"hello\": \"world\"}"), "the body is kept");
                assert!(error.contains("not an eqdv shard"), "{error}");
            }
            "m-missing" => assert!(error.contains("does_not_exist"), "{error}"),
            other => panic!("unexpected dead letter {other}"),
        }
        kinds.insert(source, kind);
    }
    assert_eq!(
        kinds.get("m-garbage").map(String::as_str),
        Some("BadMessage")
    );
    assert_eq!(
        kinds.get("m-missing").map(String::as_str),
        Some("TableNotFound")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn converter_stops_before_the_deadline_and_commits_nothing() {
    let t = JavaTable::new("lambda_deadline");
    write_cdc(&t, "8");
    let before = t.dump();
    let catalog = t.catalog().await;
    let name = t.name();
    let unique = services::unique_name("deadline");
    let queues = Queues::create(&unique).await;
    let (loaded, files, shard) = first_shard(&catalog, &name).await;
    let pointer_before = catalog.load_pointer(&name).await.expect("pointer");
    let listed_before = eqdv::cleanup::list_files(&loaded)
        .await
        .expect("list")
        .len();

    // The invocation may run 12 s; the conversion must start nothing after 12 - 6 s. It
    // is held for 8 s once its Puffin file and manifests are written, so it passes that
    // point there, before its metadata.json.
    let mut env = function_env(&t, &queues);
    env.push(("EQDV_DEADLINE_MARGIN_SECONDS", "6".into()));
    env.push(("EQDV_TEST_PAUSE_AT", "after-files".into()));
    env.push(("EQDV_TEST_PAUSE_SECS", "8".into()));
    let converter = Function::start("eqdv-converter", &env, 12);
    let response = converter
        .invoke(&json!({"Records": [sqs_record("m-slow", &shard, 1)]}))
        .await;
    assert_eq!(
        response["batchItemFailures"],
        json!([{"itemIdentifier": "m-slow"}]),
        "{response}\n{}",
        converter.logs()
    );
    assert!(
        converter.logs().contains("DeadlineExceeded"),
        "{}",
        converter.logs()
    );
    assert_eq!(
        catalog.load_pointer(&name).await.expect("pointer"),
        pointer_before,
        "the table moved"
    );
    let listed_after = eqdv::cleanup::list_files(&loaded).await.expect("list");
    assert_eq!(
        listed_after.len(),
        listed_before,
        "the stopped attempt left files: {:?}",
        listed_after
            .iter()
            .filter(|f| f.path.contains("eqdv-dv"))
            .collect::<Vec<_>>()
    );
    drop(converter);

    // Redelivered with time enough, the same shard converts.
    let env = function_env(&t, &queues);
    let converter = Function::start("eqdv-converter", &env, 120);
    let response = converter
        .invoke(&json!({"Records": [sqs_record("m-slow", &shard, 2)]}))
        .await;
    assert_eq!(
        response["batchItemFailures"],
        json!([]),
        "{response}\n{}",
        converter.logs()
    );
    assert!(
        t.dump() == before,
        "Java reads different rows after conversion"
    );
    assert!(live_equality_deletes(&catalog, &name).await < files.equality_deletes.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retryable_failures_go_back_to_the_queue_until_the_last_receive() {
    let t = JavaTable::new("lambda_retry");
    write_cdc(&t, "5");
    let catalog = t.catalog().await;
    let name = t.name();
    let (loaded, _files, shard) = first_shard(&catalog, &name).await;
    // A storage fault on demand: the current metadata.json is gone, so loading the table
    // fails with an I/O error, which a retry could get past in real life.
    let pointer = catalog.load_pointer(&name).await.expect("pointer");
    loaded
        .file_io
        .delete(&pointer.metadata_location)
        .await
        .expect("delete metadata.json");

    let unique = services::unique_name("retry");
    let queues = Queues::create(&unique).await;
    let converter = Function::start("eqdv-converter", &function_env(&t, &queues), 60);

    // Not the last receive: back to the queue, and (FIFO) the rest of the batch unprocessed.
    let response = converter
        .invoke(&json!({"Records": [sqs_record("m-1", &shard, 1), sqs_record("m-2", &shard, 1)]}))
        .await;
    assert_eq!(
        response["batchItemFailures"],
        json!([{"itemIdentifier": "m-1"}, {"itemIdentifier": "m-2"}]),
        "{response}\n{}",
        converter.logs()
    );
    let attempts = converter
        .json_lines()
        .iter()
        .filter(|l| l["message"] == "shard failed; it will be retried")
        .count();
    assert_eq!(
        attempts, 1,
        "the message after a failure must not be attempted"
    );

    // The last receive (EQDV_MAX_RECEIVES = 3): to the DLQ with the error, acknowledged.
    let response = converter
        .invoke(&json!({"Records": [sqs_record("m-1", &shard, 3)]}))
        .await;
    assert_eq!(response["batchItemFailures"], json!([]), "{response}");
    let dead = queues.receive_all(&queues.dlq, 1).await;
    assert_eq!(dead.len(), 1);
    let attrs = dead[0].message_attributes().expect("attributes");
    assert_eq!(attrs["eqdv-receive-count"].string_value(), Some("3"));
    let error = attrs["eqdv-error"].string_value().unwrap_or_default();
    assert!(
        error.contains("metadata.json"),
        "the error names the file: {error}"
    );
    assert_eq!(dead[0].body(), Some(shard.as_str()));
}

// --- A shard split over Step Functions -------------------------------------------------

/// LocalStack's Step Functions running the split state machine both stacks deploy
/// (infra/statemachine/split.asl.json), with its one task resource, the converter
/// Lambda, replaced by an activity: LocalStack runs Lambda functions only in Docker. The
/// test serves the activity the way Lambda serves the task: each task's input is the
/// real converter binary's invocation payload (behind the Runtime Interface Emulator),
/// and its answer, or its error type and message, goes back as the task's result.
struct SplitMachine {
    client: aws_sdk_sfn::Client,
    arn: String,
    activity: String,
}

/// How an execution ended, and the task inputs the converter (or a fault) answered.
struct ExecutionEnd {
    status: String,
    error: Option<String>,
    output: Value,
    tasks: Vec<Value>,
}

impl ExecutionEnd {
    fn tasks_of(&self, kind: &str) -> Vec<&Value> {
        self.tasks.iter().filter(|t| t["task"] == kind).collect()
    }

    /// How many times range `index` was run (retries included).
    fn runs_of_range(&self, index: u64) -> usize {
        self.tasks_of("range")
            .iter()
            .filter(|t| t["range"] == index)
            .count()
    }

    /// The execution succeeded (else: its tasks and the converter's logs).
    fn assert_succeeded(&self, converter: &Function) {
        assert_eq!(
            self.status,
            "SUCCEEDED",
            "{:?}\n{}",
            self.tasks,
            converter.logs()
        );
    }

    /// The execution failed as a split that commits nothing: no fan-in ran, the cleanup
    /// ran once, and it ended in eqdv.SplitFailed.
    fn assert_split_failed(&self, converter: &Function) {
        assert_eq!(
            (self.status.as_str(), self.error.as_deref()),
            ("FAILED", Some("eqdv.SplitFailed")),
            "{:?}\n{}",
            self.tasks,
            converter.logs()
        );
        assert_eq!(self.tasks_of("commit").len(), 0, "{:?}", self.tasks);
        assert_eq!(self.tasks_of("cleanup").len(), 1, "{:?}", self.tasks);
    }
}

impl SplitMachine {
    async fn create(unique: &str) -> Self {
        assert!(
            std::env::var("AWS_ENDPOINT_URL_SFN").is_ok()
                || std::env::var("AWS_ENDPOINT_URL").is_ok(),
            "no Step Functions endpoint (AWS_ENDPOINT_URL_SFN): source tests/services/env"
        );
        let config = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
        let client = aws_sdk_sfn::Client::new(&config);
        let name: String = unique
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
            .take(60)
            .collect();
        let activity = client
            .create_activity()
            .name(format!("{name}-converter"))
            .send()
            .await
            .expect("create activity")
            .activity_arn()
            .to_string();
        let path =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../infra/statemachine/split.asl.json");
        let asl = std::fs::read_to_string(&path).expect("the stacks' split state machine");
        assert!(
            asl.contains("${ConverterFunctionArn}"),
            "{}",
            path.display()
        );
        let arn = client
            .create_state_machine()
            .name(&name)
            .definition(asl.replace("${ConverterFunctionArn}", &activity))
            .role_arn("arn:aws:iam::000000000000:role/eqdv-split")
            .send()
            .await
            .expect("create the state machine from the stacks' definition")
            .state_machine_arn()
            .to_string();
        Self {
            client,
            arn,
            activity,
        }
    }

    async fn describe(
        &self,
        execution: &str,
    ) -> aws_sdk_sfn::operation::describe_execution::DescribeExecutionOutput {
        self.client
            .describe_execution()
            .execution_arn(execution)
            .send()
            .await
            .expect("describe execution")
    }

    /// Serves the activity with `converter` until `execution` ends. `hook` sees each
    /// task's input first and may answer it with a failure itself (error name, cause): a
    /// fault on demand; it may also act before the converter runs (another writer).
    async fn serve(
        &self,
        execution: &str,
        converter: &Function,
        mut hook: impl FnMut(&Value) -> Option<(String, String)>,
    ) -> ExecutionEnd {
        let started = Instant::now();
        let mut tasks = Vec::new();
        loop {
            let described = self.describe(execution).await;
            if described.status().as_str() != "RUNNING" {
                return ExecutionEnd {
                    status: described.status().as_str().to_string(),
                    error: described.error().map(str::to_string),
                    output: described
                        .output()
                        .and_then(|o| serde_json::from_str(o).ok())
                        .unwrap_or(Value::Null),
                    tasks,
                };
            }
            assert!(
                started.elapsed() < Duration::from_secs(300),
                "the execution did not end within 300 s; tasks served: {tasks:?}\n{}",
                converter.logs()
            );
            let polled = self
                .client
                .get_activity_task()
                .activity_arn(&self.activity)
                .worker_name("eqdv-test")
                .send()
                .await
                .expect("get activity task");
            let Some(token) = polled.task_token().filter(|t| !t.is_empty()) else {
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            };
            let input: Value =
                serde_json::from_str(polled.input().unwrap_or("null")).expect("task input JSON");
            tasks.push(input.clone());
            let answer = match hook(&input) {
                Some(fault) => Err(fault),
                None => {
                    let response = converter.invoke(&input).await;
                    match response.get("errorType").and_then(Value::as_str) {
                        Some(error) => Err((
                            error.to_string(),
                            response["errorMessage"].as_str().unwrap_or("").to_string(),
                        )),
                        None => Ok(response),
                    }
                }
            };
            match answer {
                Ok(output) => self
                    .client
                    .send_task_success()
                    .task_token(token)
                    .output(output.to_string())
                    .send()
                    .await
                    .map(|_| ())
                    .expect("send task success"),
                Err((error, cause)) => self
                    .client
                    .send_task_failure()
                    .task_token(token)
                    .error(error)
                    .cause(cause)
                    .send()
                    .await
                    .map(|_| ())
                    .expect("send task failure"),
            }
        }
    }
}

/// No equality delete is left, Java reads `expected` (after `what`), and no split left
/// a result behind.
async fn assert_all_converted(
    t: &JavaTable,
    catalog: &GlueCatalog,
    name: &TableName,
    expected: &[String],
    what: &str,
) {
    assert_eq!(live_equality_deletes(catalog, name).await, 0);
    assert!(
        t.dump() == expected,
        "Java reads different rows after {what}"
    );
    let results = files_containing(catalog, name, "eqdv-splits/").await;
    assert!(results.is_empty(), "results left behind: {results:?}");
}

/// The planner's split starter on Step Functions: a split's first execution runs its
/// planned ranges and a second start while it runs finds it; after it failed, the next
/// start runs it again as `<id>-a2` in twice the ranges, then `-a3` at the most ranges
/// allowed, then refuses, naming the split. (A state machine whose executions fail
/// after a few seconds stands in for the split state machine: what is tested is the
/// starter against the Step Functions API.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_split_runs_again_in_more_ranges() {
    use eqdv_functions::split::{SplitStarter, StepFunctions};
    let config = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    let client = aws_sdk_sfn::Client::new(&config);
    let failing = json!({
        "StartAt": "Run",
        "States": {
            "Run": {"Type": "Wait", "Seconds": 3, "Next": "Fail"},
            "Fail": {"Type": "Fail", "Error": "eqdv.SplitFailed", "Cause": "the test's"}
        }
    });
    let arn = client
        .create_state_machine()
        .name(services::unique_name("lambda_split_attempts"))
        .definition(failing.to_string())
        .role_arn("arn:aws:iam::000000000000:role/eqdv-split")
        .send()
        .await
        .expect("create a state machine")
        .state_machine_arn()
        .to_string();
    let starter = StepFunctions::connect(&arn, 6).await;
    let shard: eqdv::plan::Shard = serde_json::from_value(json!({
        "id": "attempts",
        "table": {"namespace": "db", "name": "events"},
        "branch": "main",
        "base_snapshot_id": 7,
        "partitions": [],
        "groups": [],
        "estimated_bytes": 10
    }))
    .expect("shard");
    let job = eqdv::convert::SplitJob::new(shard, 2).expect("job");
    let describe = async |execution: &str| {
        client
            .describe_execution()
            .execution_arn(execution)
            .send()
            .await
            .expect("describe execution")
    };
    // The ranges an execution was started with: the job's, and its Map's items.
    let ranges_of = async |execution: &str| {
        let described = describe(execution).await;
        let input: Value = serde_json::from_str(described.input().unwrap_or("{}")).expect("input");
        (
            input["split"]["ranges"].as_u64(),
            input["range_indexes"].as_array().map(Vec::len),
        )
    };
    let failed = async |execution: &str| {
        let started = Instant::now();
        while describe(execution).await.status().as_str() == "RUNNING" {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "{execution} did not end"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        assert_eq!(describe(execution).await.status().as_str(), "FAILED");
    };

    let first = starter.start(&job).await.expect("first start");
    assert_eq!(first.job, job);
    assert!(
        first.execution.ends_with(&format!(":{}", job.id)),
        "{}",
        first.execution
    );
    assert_eq!(ranges_of(&first.execution).await, (Some(2), Some(2)));
    let again = starter.start(&job).await.expect("start while it runs");
    assert_eq!(again.execution, first.execution);
    failed(&first.execution).await;

    // Each failed attempt's successor: twice the ranges, at most EQDV_MAX_RANGES (6).
    for (attempt, ranges) in [(2, 4), (3, 6)] {
        let next = starter.start(&job).await.expect("the next attempt");
        assert!(
            next.execution.ends_with(&format!(":{}-a{attempt}", job.id)),
            "{}",
            next.execution
        );
        assert_eq!(next.job.ranges, ranges, "attempt {attempt}");
        assert_ne!(next.job.id, job.id);
        assert_eq!(
            ranges_of(&next.execution).await,
            (Some(u64::from(ranges)), Some(ranges as usize))
        );
        failed(&next.execution).await;
    }

    let refused = starter.start(&job).await.expect_err("no fourth attempt");
    assert!(refused.to_string().contains(&job.id), "{refused}");
}

/// The functions' variables with the split state machine: every shard is split into 4
/// data ranges, and a commit's partitions make one shard.
fn split_env(
    t: &JavaTable,
    queues: &Queues,
    machine: &SplitMachine,
) -> Vec<(&'static str, String)> {
    let mut env = function_env(t, queues);
    env.extend([
        ("EQDV_SPLIT_STATE_MACHINE_ARN", machine.arn.clone()),
        ("EQDV_SPLIT_ABOVE_MB", "0".into()),
        ("EQDV_MAX_RANGES", "4".into()),
        ("EQDV_QUEUE_GROUPS", "1".into()),
    ]);
    env
}

/// A Java CDC table whose equality deletes are global (written under the unpartitioned
/// spec of a bucket[3] table), so that the whole table is one shard.
fn write_global_cdc(t: &JavaTable, seed: &str) {
    t.write_cdc_with(seed, "4", "800", "long", "bucket:3", &["--global-deletes"]);
}

/// The planner's one shard, split: its split id and execution ARN. Nothing was queued.
async fn planned_split(planner: &Function, name: &TableName, queues: &Queues) -> (String, String) {
    let planned = planner.invoke(&glue_table_change(name)).await;
    let shards = planned["shards"].as_array().expect("shards");
    assert_eq!(shards.len(), 1, "one shard for a global group: {planned}");
    let split = &shards[0]["split"];
    assert_eq!(split["ranges"], 4, "{planned}\n{}", planner.logs());
    assert!(shards[0]["message_id"].is_null(), "{planned}");
    let queued = queues
        .client
        .receive_message()
        .queue_url(&queues.shards)
        .wait_time_seconds(1)
        .send()
        .await
        .expect("receive");
    assert!(
        queued.messages().is_empty(),
        "a split shard was also queued"
    );
    (
        split["id"].as_str().expect("split id").to_string(),
        split["execution"].as_str().expect("execution").to_string(),
    )
}

/// A Java-written table with a global group (see [`write_global_cdc`]), the functions
/// configured with a split state machine, and the planner's one split of it, started.
struct SplitRig {
    t: JavaTable,
    catalog: GlueCatalog,
    name: TableName,
    queues: Queues,
    machine: SplitMachine,
    env: Vec<(&'static str, String)>,
    planner: Function,
    converter: Function,
    split_id: String,
    execution: String,
}

impl SplitRig {
    async fn start(table: &str, seed: &str) -> Self {
        let t = JavaTable::new(table);
        write_global_cdc(&t, seed);
        let catalog = t.catalog().await;
        let name = t.name();
        let unique = services::unique_name(table);
        let queues = Queues::create(&unique).await;
        let machine = SplitMachine::create(&unique).await;
        let env = split_env(&t, &queues, &machine);
        let planner = Function::start("eqdv-planner", &env, 60);
        let converter = Function::start("eqdv-converter", &env, 120);
        let (split_id, execution) = planned_split(&planner, &name, &queues).await;
        Self {
            t,
            catalog,
            name,
            queues,
            machine,
            env,
            planner,
            converter,
            split_id,
            execution,
        }
    }
}

/// The files under the table's location whose path contains `needle`.
async fn files_containing(catalog: &dyn Catalog, name: &TableName, needle: &str) -> Vec<String> {
    let loaded = LoadedTable::load(catalog, name).await.expect("load");
    eqdv::cleanup::list_files(&loaded)
        .await
        .expect("list")
        .into_iter()
        .map(|f| f.path)
        .filter(|p| p.contains(needle))
        .collect()
}

/// A global group split into 4 data ranges on Step Functions: the planner starts one
/// execution (twice started, one execution), the ranges run on the converter and the
/// fan-in commits once; Java reads the same rows, no equality delete is left, and the
/// ranges' results are gone. Run again (a redrive of the same split), it commits nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_split_shard_converts_over_step_functions_and_commits_once() {
    // 1. The planner splits the table's one shard and starts its execution; the same
    // event again (a retried planner) finds the same execution.
    let SplitRig {
        t,
        catalog,
        name,
        machine,
        planner,
        converter,
        split_id,
        execution,
        ..
    } = SplitRig::start("lambda_split", "31").await;
    let before = t.dump();
    let (head_before, _) = head_snapshot(&catalog, &name).await;
    let again = planner.invoke(&glue_table_change(&name)).await;
    assert_eq!(
        again["shards"][0]["split"]["execution"].as_str(),
        Some(execution.as_str()),
        "{again}"
    );
    assert_eq!(
        planner.metrics()[0]["SplitsStarted"],
        1.0,
        "{:?}",
        planner.metrics()
    );

    // 2. Step Functions runs every range, then the fan-in, on the converter.
    let end = machine.serve(&execution, &converter, |_| None).await;
    assert_eq!(
        (end.status.as_str(), end.error.as_deref()),
        ("SUCCEEDED", None),
        "{:?}\n{}",
        end.tasks,
        converter.logs()
    );
    let mut ranges: Vec<u64> = end
        .tasks_of("range")
        .iter()
        .filter_map(|t| t["range"].as_u64())
        .collect();
    ranges.sort();
    assert_eq!(ranges, [0, 1, 2, 3]);
    assert_eq!(end.tasks_of("commit").len(), 1);
    assert!(end.tasks_of("cleanup").is_empty());
    assert_eq!(
        end.output["commit"]["outcome"], "converted",
        "{}",
        end.output
    );
    assert_eq!(end.output["commit"]["ranges"], 4, "{}", end.output);

    // 3. One snapshot on the head the ranges read, marked with the split; Java reads the
    // same rows and accepts every DV; no equality delete is left; the DVs lie in more
    // than one range's Puffin file, and the ranges' results are gone.
    let (head, summary) = head_snapshot(&catalog, &name).await;
    assert_eq!(
        summary.get("eqdv.split-id").map(String::as_str),
        Some(split_id.as_str())
    );
    let loaded = LoadedTable::load(&catalog, &name).await.expect("load");
    let snapshot = loaded.head("main").expect("head").expect("a head");
    assert_eq!(snapshot.parent_snapshot_id(), head_before);
    assert!(
        t.dump() == before,
        "Java reads different rows after the split conversion"
    );
    let check = t.java_json("check-dvs", &[]);
    assert_eq!(check["equality_delete_files"], 0, "{check}");
    assert!(check["dvs"].as_u64().unwrap_or(0) > 0, "{check}");
    let puffins = files_containing(&catalog, &name, &format!("eqdv-dv-{split_id}")).await;
    assert!(
        puffins.len() > 1,
        "the DVs did not spread over ranges: {puffins:?}"
    );
    let results = files_containing(&catalog, &name, "eqdv-splits/").await;
    assert!(results.is_empty(), "results left behind: {results:?}");

    // 4. The same split run again (a redrive, under another execution name): every task
    // finds it committed, nothing is written or committed, its DVs stay.
    let redrive = machine
        .client
        .start_execution()
        .state_machine_arn(&machine.arn)
        .name(
            format!("{split_id}-again")
                .chars()
                .take(80)
                .collect::<String>(),
        )
        .input(json!({"split": end.output["split"], "range_indexes": [0, 1, 2, 3]}).to_string())
        .send()
        .await
        .expect("start again")
        .execution_arn()
        .to_string();
    let end = machine.serve(&redrive, &converter, |_| None).await;
    end.assert_succeeded(&converter);
    assert_eq!(
        head_snapshot(&catalog, &name).await.0,
        head,
        "a second commit"
    );
    assert_eq!(
        end.output["commit"]["new_snapshot_id"].as_i64(),
        head,
        "{}",
        end.output
    );
    let puffins_after = files_containing(&catalog, &name, &format!("eqdv-dv-{split_id}")).await;
    assert_eq!(puffins_after, puffins);
    assert!(
        end.tasks_of("range").len() == 4 && end.tasks_of("cleanup").is_empty(),
        "{:?}",
        end.tasks
    );
    assert!(
        t.dump() == before,
        "Java reads different rows after the redrive"
    );
    assert!(
        files_containing(&catalog, &name, "eqdv-splits/")
            .await
            .is_empty()
    );
}

/// A range that fails for good (after another one failed once and was retried) fails
/// the split: the cleanup removes every range's files, nothing is committed, and Java
/// reads the table as before, its equality deletes still live. The next plan starts the
/// same split again under its second execution name, and that one converts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_range_commits_nothing_and_leaves_nothing_behind() {
    let SplitRig {
        t,
        catalog,
        name,
        queues,
        machine,
        planner,
        converter,
        split_id,
        execution,
        ..
    } = SplitRig::start("lambda_split_fail", "32").await;
    let before = t.dump();
    let pointer_before = catalog.load_pointer(&name).await.expect("pointer");
    let deletes_before = live_equality_deletes(&catalog, &name).await;

    let mut transient_failures = 0;
    let end = machine
        .serve(&execution, &converter, |task| {
            match (task["task"].as_str(), task["range"].as_u64()) {
                (Some("range"), Some(1)) if transient_failures == 0 => {
                    transient_failures += 1;
                    Some((
                        "eqdv.Retryable".into(),
                        "EngineError: injected: throttled".into(),
                    ))
                }
                (Some("range"), Some(2)) => Some((
                    "eqdv.Permanent".into(),
                    "InvalidInput: injected: a range that cannot succeed".into(),
                )),
                _ => None,
            }
        })
        .await;
    end.assert_split_failed(&converter);
    assert!(end.runs_of_range(1) >= 1, "{:?}", end.tasks);
    assert_eq!(
        catalog.load_pointer(&name).await.expect("pointer"),
        pointer_before,
        "the table moved"
    );
    assert_eq!(live_equality_deletes(&catalog, &name).await, deletes_before);
    let left = files_containing(&catalog, &name, &split_id).await;
    assert!(left.is_empty(), "the failed split left files: {left:?}");
    assert!(
        t.dump() == before,
        "Java reads different rows after a failed split"
    );

    // Planned again on the same head: the same split, run again by a second execution,
    // which converts.
    let (again_id, again) = planned_split(&planner, &name, &queues).await;
    assert_eq!(again_id, split_id, "the same head makes the same split");
    assert_ne!(
        again, execution,
        "a failed execution is not the split's answer"
    );
    assert!(again.ends_with(&format!("{split_id}-a2")), "{again}");
    let end = machine.serve(&again, &converter, |_| None).await;
    end.assert_succeeded(&converter);
    assert_all_converted(&t, &catalog, &name, &before, "the second execution").await;
}

/// Another writer commits while the fan-in runs: the fan-in rebases on it (one snapshot
/// on the writer's), the writer's new equality deletes stay live, and Java reads the
/// rows it read after the writer's commit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_commit_before_the_fan_in_is_rebased_on() {
    let SplitRig {
        t,
        catalog,
        name,
        machine,
        converter,
        split_id,
        execution,
        ..
    } = SplitRig::start("lambda_split_rebase", "33").await;

    let mut expected = None;
    let end = machine
        .serve(&execution, &converter, |task| {
            if task["task"] == "commit" && expected.is_none() {
                // The same workload, one commit further (data and equality deletes).
                t.write_cdc_with("33", "1", "800", "long", "bucket:3", &["--global-deletes"]);
                expected = Some(t.dump());
            }
            None
        })
        .await;
    end.assert_succeeded(&converter);
    assert_eq!(end.output["commit"]["rebases"], 1, "{}", end.output);
    let loaded = LoadedTable::load(&catalog, &name).await.expect("load");
    let head = loaded.head("main").expect("head").expect("a head");
    assert_eq!(
        head.summary().additional_properties.get("eqdv.split-id"),
        Some(&split_id)
    );
    let writer = loaded
        .metadata
        .snapshot_by_id(head.parent_snapshot_id().expect("parent"))
        .expect("the writer's snapshot");
    assert!(
        !writer
            .summary()
            .additional_properties
            .contains_key("eqdv.split-id"),
        "the fan-in's parent is the writer's commit"
    );
    let expected = expected.expect("the writer committed");
    assert!(
        t.dump() == expected,
        "Java reads different rows after the rebased fan-in"
    );
    assert!(
        live_equality_deletes(&catalog, &name).await > 0,
        "the writer's new equality deletes must stay live"
    );
    let check = t.java_json("check-dvs", &[]);
    assert!(check["dvs"].as_u64().unwrap_or(0) > 0, "{check}");
}

/// A writer commits while a split runs, and the planner plans the new head: the new
/// split (the same global partitions) waits for the running one instead of starting
/// beside it, where one of the two would find the other's commit stale. The running
/// split commits, rebased on the writer's commit; planned again, the writer's deletes
/// split and convert. Java reads the rows it read after the writer's commit, and no
/// equality delete is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_split_waits_for_a_running_split_of_its_partitions() {
    let SplitRig {
        t,
        catalog,
        name,
        queues,
        machine,
        planner,
        converter,
        split_id,
        execution,
        ..
    } = SplitRig::start("lambda_split_wait", "34").await;
    // The execution runs: its tasks wait for the converter, which the test serves below.
    t.write_cdc_with("34", "1", "800", "long", "bucket:3", &["--global-deletes"]);
    let expected = t.dump();

    let planned = planner.invoke(&glue_table_change(&name)).await;
    let shards = planned["shards"].as_array().expect("shards");
    assert_eq!(shards.len(), 1, "{planned}\n{}", planner.logs());
    let waiting = &shards[0]["split"];
    assert_ne!(
        waiting["id"],
        split_id.as_str(),
        "a new head makes a new split"
    );
    assert!(waiting["execution"].is_null(), "{planned}");
    assert_eq!(waiting["waiting_for"], execution.as_str(), "{planned}");
    let started = machine
        .client
        .list_executions()
        .state_machine_arn(&machine.arn)
        .send()
        .await
        .expect("list executions");
    assert_eq!(
        started.executions().len(),
        1,
        "a second split started beside the running one"
    );

    let end = machine.serve(&execution, &converter, |_| None).await;
    end.assert_succeeded(&converter);
    assert_eq!(end.output["commit"]["rebases"], 1, "{}", end.output);
    assert!(live_equality_deletes(&catalog, &name).await > 0);

    // Planned again (the running split's commit is a table change): the rest converts.
    let (next_id, next) = planned_split(&planner, &name, &queues).await;
    assert_ne!(next_id, split_id);
    let end = machine.serve(&next, &converter, |_| None).await;
    end.assert_succeeded(&converter);
    assert_all_converted(&t, &catalog, &name, &expected, "both splits").await;
}

/// A compaction rewrites a data file a range wrote a DV for, before the fan-in: the
/// ranges are stale, so the split commits nothing and its files are removed; the next
/// plan (on the compacted head) splits again and converts, and Java reads the rows it
/// read after the compaction.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compaction_before_the_fan_in_makes_the_split_plan_again() {
    let SplitRig {
        t,
        catalog,
        name,
        queues,
        planner,
        machine,
        converter,
        split_id,
        execution,
        ..
    } = SplitRig::start("lambda_split_compact", "34").await;

    let mut expected = None;
    let end = machine
        .serve(&execution, &converter, |task| {
            if task["task"] == "commit" && expected.is_none() {
                // The largest file is one of the first commit's, which the later
                // commits' deletes all reach: a range wrote a DV for it.
                t.java("rewrite", &["--largest"]);
                expected = Some(t.dump());
            }
            None
        })
        .await;
    assert_eq!(
        (end.status.as_str(), end.error.as_deref()),
        ("FAILED", Some("eqdv.SplitFailed")),
        "{:?}\n{}",
        end.tasks,
        converter.logs()
    );
    assert_eq!(end.tasks_of("cleanup").len(), 1, "{:?}", end.tasks);
    assert!(
        converter.logs().contains("eqdv.RangesStale"),
        "the fan-in did not find the ranges stale"
    );
    let left = files_containing(&catalog, &name, &split_id).await;
    assert!(left.is_empty(), "the stale split left files: {left:?}");
    let expected = expected.expect("the compaction ran");
    assert!(
        t.dump() == expected,
        "Java reads different rows after a stale split"
    );

    // Planned again on the compacted head: another split, which converts.
    let (again_id, execution) = planned_split(&planner, &name, &queues).await;
    assert_ne!(again_id, split_id, "a new base is a new split");
    let end = machine.serve(&execution, &converter, |_| None).await;
    end.assert_succeeded(&converter);
    assert!(
        t.dump() == expected,
        "Java reads different rows after the conversion"
    );
    let check = t.java_json("check-dvs", &[]);
    assert_eq!(check["equality_delete_files"], 0, "{check}");
}

/// Runs `future` to completion from a synchronous hook (a test's multi-threaded runtime).
fn block_on<T>(future: impl std::future::Future<Output = T>) -> T {
    tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(future))
}

/// A range whose converter invocation times out fails the split like any failed range:
/// the runtime (here the Runtime Interface Emulator, at a 40 s function timeout) kills
/// the invocation while its result upload hangs (S3 through a fault proxy), after its
/// Puffin file was written. The timeout is not retried; the cleanup removes that Puffin
/// file, which no result names, with every other range's files; nothing is committed
/// and Java reads the table as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_range_that_times_out_commits_nothing_and_leaves_nothing_behind() {
    let SplitRig {
        t,
        catalog,
        name,
        machine,
        env,
        converter,
        split_id,
        execution,
        ..
    } = SplitRig::start("lambda_split_timeout", "35").await;
    let before = t.dump();
    let pointer_before = catalog.load_pointer(&name).await.expect("pointer");
    let s3 = std::env::var("AWS_ENDPOINT_URL_S3").expect("AWS_ENDPOINT_URL_S3");
    let proxy = proxy::Proxy::start(&s3);
    // Every attempt hangs: the storage layer gives up on each after 10 s and retries
    // three times with backoff (about 47 s in all), so the invocation is killed first.
    proxy.inject(
        "PUT",
        "eqdv-splits/",
        proxy::Fault::Hang(Duration::from_secs(120)),
        10,
    );
    let mut slow_env = env.clone();
    slow_env.push(("AWS_ENDPOINT_URL_S3", proxy.url()));
    // Long enough to reach the result upload on a loaded machine (a range takes about
    // a second alone), shorter than the storage layer's retries of the hung upload.
    let slow_converter = Function::start("eqdv-converter", &slow_env, 40);

    let timed_out_puffin = format!("eqdv-dv-{split_id}-3.puffin");
    let mut timeout_answer = None;
    let mut at_cleanup = None;
    let end = machine
        .serve(&execution, &converter, |task| {
            match (task["task"].as_str(), task["range"].as_u64()) {
                (Some("range"), Some(3)) => {
                    let answer = block_on(slow_converter.invoke_text(task));
                    timeout_answer = Some(answer.clone());
                    // The emulator answers a timeout in plain text; Lambda reports it
                    // to Step Functions as the error Sandbox.Timedout.
                    Some(("Sandbox.Timedout".to_string(), answer))
                }
                (Some("cleanup"), _) => {
                    at_cleanup = Some(block_on(files_containing(&catalog, &name, &split_id)));
                    None
                }
                _ => None,
            }
        })
        .await;

    let answer = timeout_answer.expect("range 3 was served");
    assert!(
        answer.starts_with("Task timed out after"),
        "range 3 did not time out: {answer}\n{}",
        slow_converter.logs()
    );
    assert!(
        !proxy.injected().is_empty(),
        "the result upload did not hang"
    );
    end.assert_split_failed(&converter);
    assert_eq!(
        end.runs_of_range(3),
        1,
        "a timed-out range is not retried: {:?}",
        end.tasks
    );
    let at_cleanup = at_cleanup.expect("the cleanup ran");
    assert!(
        at_cleanup.iter().any(|f| f.ends_with(&timed_out_puffin)),
        "the timed-out range's Puffin file was not there for the cleanup: {at_cleanup:?}"
    );
    assert_eq!(
        catalog.load_pointer(&name).await.expect("pointer"),
        pointer_before,
        "the table moved"
    );
    let left = files_containing(&catalog, &name, &split_id).await;
    assert!(left.is_empty(), "the timed-out split left files: {left:?}");
    assert!(
        t.dump() == before,
        "Java reads different rows after a timed-out split"
    );
}

/// The staging mode on the functions: a table whose property eqdv.staging-branch names
/// `staging`, written there by Java. A table change makes the planner queue one shard
/// for the whole table (its whole-table message group) that names the branches, not
/// delete files; the converter applies every pending staging snapshot to main, reports
/// the lag it leaves, and Java reads on main what it reads on staging with no equality
/// delete. The next event finds nothing to do; after more staging commits, an old
/// message redelivered applies only the new snapshots.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_staging_table_is_applied_by_the_functions() {
    let t = JavaTable::new("lambda_staging");
    let mut server = JavaServer::start(&t);
    server
        .call(json!({"op": "create", "seed": 661}))
        .expect("create");
    server
        .call(json!({"op": "set-property", "key": "eqdv.staging-branch", "value": "staging"}))
        .expect("set the staging property");
    let stage = |server: &mut JavaServer, seeds: std::ops::Range<u64>| {
        for seed in seeds {
            server
                .call(json!({"op": "stage-op", "seed": seed, "branch": "staging"}))
                .expect("stage-op");
        }
    };
    stage(&mut server, 66_100..66_104);
    let catalog = t.catalog().await;
    let name = t.name();

    let queues = Queues::create(&services::unique_name("e2e-staging")).await;
    let env = function_env(&t, &queues);
    let planner = Function::start("eqdv-planner", &env, 60);
    let converter = Function::start("eqdv-converter", &env, 120);

    // 1. One shard, in the table's whole-table group, naming the branches.
    let planned = planner.invoke(&glue_table_change(&name)).await;
    assert_eq!(
        planned["tables"][name.to_string()]["outcome"],
        "planned",
        "{planned}"
    );
    let messages = queues.receive_all(&queues.shards, 1).await;
    assert_eq!(messages.len(), 1);
    let attributes = messages[0].attributes().expect("attributes");
    assert_eq!(
        attributes[&MessageSystemAttributeName::MessageGroupId],
        format!("{name}/<table>")
    );
    let shard: Value = serde_json::from_str(messages[0].body().expect("body")).expect("shard");
    assert_eq!(shard["staging_branch"], "staging", "{shard}");
    assert_eq!(shard["groups"], json!([]), "{shard}");

    // 2. The converter applies the four staging snapshots.
    let arn = "arn:aws:sqs:us-east-1:000000000000:shards.fifo";
    let response = converter.invoke(&sqs_event(arn, &[&messages[0]])).await;
    assert_eq!(
        response["batchItemFailures"],
        json!([]),
        "{response}\n{}",
        converter.logs()
    );
    queues.delete(&queues.shards, &messages[0]).await;
    let applied = converter
        .metrics()
        .into_iter()
        .rfind(|m| m["Function"] == "converter")
        .expect("the converter's metrics");
    assert_eq!(applied["StagingSnapshotsApplied"], 4.0, "{applied}");
    assert_eq!(applied["StagingLagSnapshots"], 0.0, "{applied}");

    // 3. Judged by Java, PyIceberg and DuckDB on main.
    let staging = server.dump_rows("staging", false).expect("dump staging");
    let main = server.dump_rows("main", false).expect("dump main");
    eqdv_judges::assert_same_rows("Iceberg Java (main against staging)", &main, &staging);
    let check = server
        .call(json!({"op": "check-dvs", "branch": "main"}))
        .expect("check-dvs");
    assert_eq!(check["equality_delete_files"], 0, "{check}");
    eqdv_judges::judge_converted_glue(&name.to_string(), &staging);
    let (head, summary) = head_snapshot(&catalog, &name).await;
    assert_eq!(
        summary.get("eqdv.source").map(String::as_str),
        Some("eqdv-converter (AWS Lambda)")
    );

    // 4. Nothing to do on the next event.
    let again = planner.invoke(&glue_table_change(&name)).await;
    assert_eq!(
        again["tables"][name.to_string()]["outcome"],
        "nothing-to-do",
        "{again}"
    );
    assert_eq!(head_snapshot(&catalog, &name).await.0, head);

    // 5. Two more staging commits; the old message, redelivered, applies just those.
    stage(&mut server, 66_200..66_202);
    let response = converter.invoke(&sqs_event(arn, &[&messages[0]])).await;
    assert_eq!(response["batchItemFailures"], json!([]), "{response}");
    let applied = converter
        .metrics()
        .into_iter()
        .rfind(|m| m["Function"] == "converter")
        .expect("the converter's metrics");
    assert_eq!(applied["StagingSnapshotsApplied"], 2.0, "{applied}");
    let staging = server.dump_rows("staging", false).expect("dump staging");
    let main = server.dump_rows("main", false).expect("dump main");
    eqdv_judges::assert_same_rows("Iceberg Java (main after more staging)", &main, &staging);
}
