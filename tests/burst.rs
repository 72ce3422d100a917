//! A burst of table change events through the planner and the converters, against the
//! Glue emulator and MinIO (tests/services), with Glue answering a share of its calls
//! with ThrottlingException and S3 a share of its reads with 503 SlowDown.
//!
//! `EQDV_BURST_TABLES` tables (12 in CI; `tests/burst/run` sends 1,000) each get one
//! Glue table change event, and one of them `EQDV_BURST_EVENTS_PER_TABLE` more (10; 100),
//! all at once (`EQDV_BURST_CONCURRENCY` planner invocations in flight, 16). The planners
//! send their shards to a queue that converters drain, as Lambda does: a failed planner
//! invocation is retried (Lambda retries an asynchronous one twice), a failed shard is
//! received again (up to 5 receives, then it is a dead letter).
//!
//! What must hold: every table's pointer loads, no equality delete is left live on any
//! table, every table that had equality deletes has exactly one conversion commit (one
//! shard each: an unpartitioned table) and the others none, the dead letters are empty, and Java reads a sample of the
//! tables as it did before (every table by eqdv's reference reader). The run's size and
//! drain time are printed, and appended to `EQDV_BURST_RESULTS` when set.

mod common;

use eqdv_test_support::fault_proxy as proxy;

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use eqdv::catalog::{GlueCatalog, GlueConfig, TableName};
use eqdv::plan::Shard;
use eqdv::snapshot::SOURCE_PROPERTY;
use eqdv::table::{LoadedTable, TableFiles};
use eqdv_functions::FunctionConfig;
use eqdv_functions::converter::Converter;
use eqdv_functions::planner::Planner;
use eqdv_functions::queue::{InProcessQueue, ShardQueue};
use eqdv_test_support::{java, runs, services};
use eqdv_workload::generate::{KeyType, PartitionKind, WorkloadSpec, generate};
use futures::StreamExt;
use proxy::{Fault, Proxy};
use serde_json::json;

/// The queue the planners send to, shared with the test that drains it.
struct Shared(Arc<InProcessQueue>);

#[async_trait]
impl ShardQueue for Shared {
    async fn send(&self, shard: &Shard) -> eqdv_functions::Result<String> {
        self.0.send(shard).await
    }
}

fn spec(seed: u64) -> WorkloadSpec {
    WorkloadSpec {
        seed,
        rows: 40,
        commits: 1,
        keys: vec![KeyType::Long],
        partition: PartitionKind::None,
        changes_per_commit: 6,
        rows_per_file: 20,
        ..Default::default()
    }
}

/// The functions' configuration for the Glue catalog (the catalog itself is built by
/// the test, through the fault proxies): every shard goes to the queue.
fn config(warehouse: &str) -> FunctionConfig {
    let warehouse = warehouse.to_string();
    FunctionConfig::from_lookup(|name| match name {
        "EQDV_CATALOG" => Some("glue".into()),
        "EQDV_WAREHOUSE" => Some(warehouse.clone()),
        "EQDV_CONVERT_IN_PLANNER_MAX_MB" => Some("0".into()),
        _ => None,
    })
    .expect("function config")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_table_events_drains_through_throttling() {
    let tables = runs::env_u64("EQDV_BURST_TABLES", 12) as usize;
    let repeats = runs::env_u64("EQDV_BURST_EVENTS_PER_TABLE", 10) as usize;
    let concurrency = runs::env_u64("EQDV_BURST_CONCURRENCY", 16) as usize;
    let warehouse_root = services::require_services();
    let unique = services::unique_name("burst");
    let warehouse = format!("{}/{unique}", warehouse_root.trim_end_matches('/'));
    let database = format!("eqdv_{unique}");
    let direct = GlueCatalog::connect(GlueConfig {
        warehouse: Some(warehouse.clone()),
        ..Default::default()
    })
    .await
    .expect("glue catalog");

    // The tables, written without faults (eight at a time).
    let started = Instant::now();
    let names: Vec<TableName> = (0..tables)
        .map(|i| TableName::new(&database, format!("t{i:04}")))
        .collect();
    futures::stream::iter(names.iter().enumerate())
        .for_each_concurrent(8, |(i, name)| {
            let direct = &direct;
            async move {
                generate(direct, name, &spec(7_000 + i as u64))
                    .await
                    .unwrap_or_else(|e| panic!("generate {name}: {e}"));
            }
        })
        .await;
    let generated_s = started.elapsed().as_secs_f64();
    // Which tables the generator left equality deletes in (a few seeds of a small
    // table write none): those must be converted once, the others never.
    let mut with_deletes = std::collections::HashSet::new();
    for name in &names {
        let t = LoadedTable::load(&direct, name).await.expect("load");
        let files = TableFiles::read(&t, t.head("main").unwrap().as_ref())
            .await
            .expect("files");
        if !files.equality_deletes.is_empty() {
            with_deletes.insert(name.clone());
        }
    }
    assert!(
        with_deletes.len() * 10 >= tables * 9,
        "only {} of {tables} tables have equality deletes",
        with_deletes.len()
    );
    let sample: Vec<&TableName> = names.iter().step_by((tables / 3).max(1)).take(3).collect();
    let before: Vec<(java::JavaTable, Vec<String>)> = sample
        .iter()
        .map(|name| {
            let t = java::JavaTable::of(&warehouse, name);
            let rows = t.dump();
            (t, rows)
        })
        .collect();

    // The faults: a share of Glue's table reads and commits throttled, a share of S3's
    // reads slowed down, for the whole burst.
    let glue = Proxy::start(&std::env::var("AWS_ENDPOINT_URL_GLUE").unwrap_or_default());
    let s3 = Proxy::start(&std::env::var("AWS_ENDPOINT_URL_S3").unwrap_or_default());
    glue.inject_every(
        "POST",
        "X-Amz-Target: AWSGlue.GetTable",
        Fault::Status(400),
        5,
    );
    glue.inject_every(
        "POST",
        "X-Amz-Target: AWSGlue.UpdateTable",
        Fault::Status(400),
        4,
    );
    s3.inject_every("GET", "GET /", Fault::Status(503), 7);
    let faulty = || async {
        GlueCatalog::connect(GlueConfig {
            warehouse: Some(warehouse.clone()),
            glue_endpoint: Some(glue.url()),
            s3_endpoint: Some(s3.url()),
            ..Default::default()
        })
        .await
        .expect("glue catalog through the proxies")
    };
    let queue = Arc::new(InProcessQueue::default());
    let planner = Planner {
        catalog: Box::new(faulty().await),
        config: config(&warehouse),
        queue: Box::new(Shared(queue.clone())),
        splits: None,
        converter: None,
        kept_reads: Default::default(),
    };
    let converter = Converter {
        catalog: Box::new(faulty().await),
        config: config(&warehouse),
        dead_letters: None,
        source: "eqdv burst test".into(),
        kept_reads: Default::default(),
    };

    // The burst: one event per table, and `repeats` more for the first.
    let burst = Instant::now();
    let events: Vec<serde_json::Value> = names
        .iter()
        .chain(std::iter::repeat_n(&names[0], repeats))
        .map(|name| {
            json!({
                "version": "0",
                "source": "aws.glue",
                "detail-type": "Glue Data Catalog Table State Change",
                "detail": {"databaseName": name.namespace, "tableName": name.name, "typeOfChange": "UpdateTable"}
            })
        })
        .collect();
    let event_count = events.len();
    // Lambda retries a failed asynchronous invocation twice.
    let failed_events: Vec<String> = futures::stream::iter(events)
        .map(|event| {
            let planner = &planner;
            async move {
                let mut last = String::new();
                for _ in 0..3 {
                    match planner.handle(&event, None).await {
                        Ok(_) => return None,
                        Err(e) => last = e.to_string(),
                    }
                }
                Some(format!("{event}: {last}"))
            }
        })
        .buffer_unordered(concurrency)
        .filter_map(|failed| async move { failed })
        .collect()
        .await;
    assert!(
        failed_events.is_empty(),
        "events failed three times: {failed_events:#?}"
    );

    // The drain: converters take shards as SQS delivers them; a failure is received
    // again, five receives at most.
    let mut pending: VecDeque<(Shard, u32)> = queue.drain().into_iter().map(|s| (s, 0)).collect();
    let shards_sent = pending.len();
    let mut dead_letters = Vec::new();
    let (mut converted, mut nothing_to_do, mut retried) = (0, 0, 0);
    while !pending.is_empty() {
        let batch: Vec<(Shard, u32)> = pending.drain(..pending.len().min(concurrency)).collect();
        let outcomes: Vec<_> = futures::stream::iter(batch)
            .map(|(shard, receives)| {
                let converter = &converter;
                async move {
                    let outcome = converter.convert_shard(&shard, None).await;
                    (shard, receives + 1, outcome)
                }
            })
            .buffer_unordered(concurrency)
            .collect()
            .await;
        for (shard, receives, outcome) in outcomes {
            match outcome {
                Ok(report) if report.outcome == eqdv::convert::Outcome::Converted => converted += 1,
                Ok(_) => nothing_to_do += 1,
                Err(e) if e.is_permanent() || receives >= 5 => {
                    dead_letters.push(format!("{}: {e}", shard.table))
                }
                Err(_) => {
                    retried += 1;
                    pending.push_back((shard, receives));
                }
            }
        }
    }
    let drain_s = burst.elapsed().as_secs_f64();
    assert!(dead_letters.is_empty(), "dead letters: {dead_letters:#?}");
    assert!(
        !glue.injected().is_empty() && !s3.injected().is_empty(),
        "no fault was injected"
    );

    // Every table: its pointer loads, no equality delete is live, and one conversion
    // commit at most (the deletes converted once).
    for name in &names {
        let t = LoadedTable::load(&direct, name)
            .await
            .unwrap_or_else(|e| panic!("{name} does not load: {e}"));
        let head = t.head("main").unwrap();
        let files = TableFiles::read(&t, head.as_ref()).await.unwrap();
        assert!(
            files.equality_deletes.is_empty(),
            "{name} has live equality deletes"
        );
        let conversions = t
            .metadata
            .snapshots()
            .filter(|s| {
                s.summary()
                    .additional_properties
                    .contains_key(SOURCE_PROPERTY)
            })
            .count();
        let expected = usize::from(with_deletes.contains(name));
        assert_eq!(
            conversions, expected,
            "{name} was converted {conversions} times"
        );
    }
    for (t, rows) in &before {
        t.assert_converted(rows);
    }
    let line = format!(
        "burst: {tables} tables, {event_count} events ({repeats} more for one table), \
         {shards_sent} shards sent, {converted} converted, {nothing_to_do} with nothing to \
         do, {retried} received again; {} Glue and {} S3 faults injected; tables written in \
         {generated_s:.0} s, drained in {drain_s:.1} s",
        glue.injected().len(),
        s3.injected().len()
    );
    eprintln!("{line}");
    runs::record(
        "EQDV_BURST",
        &[
            ("tables", tables.to_string()),
            ("events", event_count.to_string()),
            ("shards_sent", shards_sent.to_string()),
            ("converted", converted.to_string()),
            ("nothing_to_do", nothing_to_do.to_string()),
            ("received_again", retried.to_string()),
            ("dead_letters", dead_letters.len().to_string()),
            ("glue_faults", glue.injected().len().to_string()),
            ("s3_faults", s3.injected().len().to_string()),
            ("drain_seconds", format!("{drain_s:.1}")),
        ],
    );
}
