//! The measured things, each meant to run as its own process (so the driver's
//! `wait4` gives per-run CPU time and peak RSS): eqdv's conversion (with or without
//! pruning), the floor, and the readers. Each prints one JSON object on stdout.

use std::collections::HashSet;
use std::fs::File;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::{Context, Result, anyhow};
use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{Array, RecordBatch};
use arrow_schema::DataType;
use eqdv::catalog::{Catalog, SqliteCatalog, TableName, TablePointer};
use eqdv::convert::{ConvertOptions, convert};
use eqdv::resolve::KeyHashBuilder;
use eqdv::table::LoadedTable;
use futures::TryStreamExt;
use iceberg::TableIdent;
use iceberg::io::FileIO;
use iceberg::spec::TableMetadata;
use iceberg::table::StaticTable;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use serde_json::{Value, json};

use crate::tables::{KeyKind, Scenario};

pub fn read_scenario(path: &Path) -> Result<Scenario> {
    serde_json::from_slice(&std::fs::read(path).with_context(|| format!("reading {path:?}"))?)
        .with_context(|| format!("parsing {path:?}"))
}

/// Points the scenario's table back at the state with the equality deletes.
pub async fn reset(scenario: &Scenario) -> Result<Value> {
    let catalog = SqliteCatalog::open_warehouse(&scenario.warehouse)?;
    let name = TableName::parse(&scenario.table)?;
    let pointer = catalog.load_pointer(&name).await?;
    if pointer.metadata_location != scenario.metadata_before {
        catalog
            .swap_pointer(&name, &pointer, &scenario.metadata_before)
            .await?;
    }
    Ok(json!({"reset_from": pointer.metadata_location}))
}

pub struct ConvertArgs {
    pub no_pruning: bool,
    pub key_memory_mb: Option<u64>,
    pub parallelism: Option<usize>,
}

/// eqdv's whole conversion: load, plan, resolve, write the Puffin file, commit.
pub async fn run_convert(scenario: &Scenario, args: &ConvertArgs) -> Result<Value> {
    let catalog = SqliteCatalog::open_warehouse(&scenario.warehouse)?;
    let name = TableName::parse(&scenario.table)?;
    let mut options = ConvertOptions::default();
    if args.no_pruning {
        options.resolve.bound_pruning = false;
        options.resolve.row_group_pruning = false;
        options.resolve.bloom_pruning = false;
    }
    if let Some(mb) = args.key_memory_mb {
        options.resolve.key_memory_budget = mb << 20;
    }
    if let Some(p) = args.parallelism {
        options.resolve.parallelism = p;
    }
    let started = Instant::now();
    let report = convert(&catalog, &name, &options).await?;
    let mut out = serde_json::to_value(&report)?;
    out["inner_ms"] = json!(started.elapsed().as_secs_f64() * 1000.0);
    out["parallelism"] = json!(options.resolve.parallelism);
    Ok(out)
}

/// The data files eqdv opens after its pruning by the manifests' bounds (the files it
/// reads a footer of; within them row groups may still be skipped), sorted, from a
/// resolve that commits nothing. Run on the scenario's table as `reset` leaves it.
pub async fn run_candidates(scenario: &Scenario) -> Result<Value> {
    let catalog = SqliteCatalog::open_warehouse(&scenario.warehouse)?;
    let name = TableName::parse(&scenario.table)?;
    let table = LoadedTable::load(&catalog, &name).await?;
    let files = eqdv::table::TableFiles::read(&table, table.head("main")?.as_ref()).await?;
    let groups = eqdv::plan::group_equality_deletes(&table, &files)?;
    let options = ConvertOptions::default();
    let resolved = eqdv::resolve::resolve(&table, &files, &groups, &options.resolve).await?;
    let mut opened: Vec<&String> = resolved.opened.iter().collect();
    opened.sort();
    Ok(json!({
        "opened": opened,
        "candidate_files": resolved.metrics.candidate_files,
        "files_opened": resolved.metrics.files_opened,
        "positions": resolved.metrics.positions_matched,
    }))
}

/// Where a conversion's time goes: the phases of `eqdv::convert` run one by one (load,
/// manifests, plan, resolve) on the scenario's table, then a whole conversion.
pub async fn run_phases(scenario: &Scenario) -> Result<Value> {
    let catalog = SqliteCatalog::open_warehouse(&scenario.warehouse)?;
    let name = TableName::parse(&scenario.table)?;
    let mut ms = Vec::new();
    let t = Instant::now();
    let table = LoadedTable::load(&catalog, &name).await?;
    ms.push(("load", t.elapsed()));
    let t = Instant::now();
    let files = eqdv::table::TableFiles::read(&table, table.head("main")?.as_ref()).await?;
    ms.push(("manifests", t.elapsed()));
    // The manifests' bytes decoded alone (no IO): the fast decoder, then iceberg-rust's.
    let mut manifest_bytes = Vec::new();
    for m in &files.manifests {
        manifest_bytes.push(eqdv::storage::read_all(&table.file_io, &m.manifest_path).await?);
    }
    let t = Instant::now();
    for bytes in &manifest_bytes {
        eqdv::manifest_decode::decode_manifest(bytes)
            .map_err(|e| anyhow!("fast decoder declined a manifest: {e}"))?;
    }
    ms.push(("decode fast", t.elapsed()));
    let t = Instant::now();
    for bytes in &manifest_bytes {
        iceberg::spec::Manifest::parse_avro(bytes)?;
    }
    ms.push(("decode iceberg", t.elapsed()));
    let t = Instant::now();
    let groups = eqdv::plan::group_equality_deletes(&table, &files)?;
    ms.push(("plan", t.elapsed()));
    let t = Instant::now();
    let options = ConvertOptions::default();
    let resolved = eqdv::resolve::resolve(&table, &files, &groups, &options.resolve).await?;
    ms.push(("resolve", t.elapsed()));
    let t = Instant::now();
    let report = convert(&catalog, &name, &options).await?;
    ms.push(("whole convert", t.elapsed()));
    let mut out = serde_json::Map::new();
    for (k, d) in ms {
        out.insert(format!("{k}_ms"), json!(d.as_secs_f64() * 1000.0));
    }
    out.insert(
        "positions".into(),
        json!(resolved.metrics.positions_matched),
    );
    out.insert("converted".into(), json!(report.positions_added));
    Ok(Value::Object(out))
}

enum Keys {
    Long(HashSet<i64, KeyHashBuilder>),
    Str(HashSet<Box<str>, KeyHashBuilder>),
}

fn key_reader(
    path: &str,
) -> Result<(
    parquet::arrow::arrow_reader::ParquetRecordBatchReader,
    u64,
    u64,
)> {
    let file = File::open(path).with_context(|| format!("opening {path}"))?;
    let builder = ParquetRecordBatchReaderBuilder::try_new(file)?;
    let meta = builder.metadata().clone();
    let mask = ProjectionMask::leaves(meta.file_metadata().schema_descr(), [0]);
    let bytes: u64 = meta
        .row_groups()
        .iter()
        .map(|rg| rg.column(0).compressed_size().max(0) as u64)
        .sum();
    let rows = meta.file_metadata().num_rows().max(0) as u64;
    Ok((
        builder
            .with_projection(mask)
            .with_batch_size(8192)
            .build()?,
        bytes,
        rows,
    ))
}

/// The floor: load the deleted keys, then decode only the key column of the data files
/// that truly hold a key and probe each value; positions into a bitmap per file.
pub fn run_floor(scenario: &Scenario, threads: usize) -> Result<Value> {
    let started = Instant::now();
    let mut keys = match scenario.layout.key {
        KeyKind::Long => Keys::Long(HashSet::with_hasher(KeyHashBuilder::new())),
        KeyKind::String => Keys::Str(HashSet::with_hasher(KeyHashBuilder::new())),
    };
    let mut bytes_read = 0;
    for path in &scenario.delete_files {
        let (reader, bytes, _) = key_reader(path)?;
        bytes_read += bytes;
        for batch in reader {
            let column = batch?.column(0).clone();
            match (&mut keys, column.data_type()) {
                (Keys::Long(set), DataType::Int64) => {
                    set.extend(column.as_primitive::<Int64Type>().iter().flatten())
                }
                (Keys::Str(set), DataType::Utf8) => {
                    set.extend(column.as_string::<i32>().iter().flatten().map(Box::from))
                }
                (_, other) => return Err(anyhow!("unexpected key type {other} in {path}")),
            }
        }
    }
    let keys = Arc::new(keys);
    let queue = Arc::new(Mutex::new(scenario.truth_files.clone()));
    let results = Arc::new(Mutex::new((0u64, 0u64, 0u64, 0u64)));
    let workers: Vec<_> = (0..threads.max(1))
        .map(|_| {
            let (keys, queue, results) = (keys.clone(), queue.clone(), results.clone());
            std::thread::spawn(move || -> Result<()> {
                loop {
                    let Some(path) = queue.lock().map_err(|_| anyhow!("poisoned"))?.pop() else {
                        return Ok(());
                    };
                    let (reader, bytes, rows) = key_reader(&path)?;
                    let mut positions = roaring::RoaringTreemap::new();
                    let mut first = 0u64;
                    for batch in reader {
                        let column = batch?.column(0).clone();
                        match keys.as_ref() {
                            Keys::Long(set) => {
                                for (i, v) in column.as_primitive::<Int64Type>().iter().enumerate()
                                {
                                    if v.is_some_and(|v| set.contains(&v)) {
                                        positions.insert(first + i as u64);
                                    }
                                }
                            }
                            Keys::Str(set) => {
                                for (i, v) in column.as_string::<i32>().iter().enumerate() {
                                    if v.is_some_and(|v| set.contains(v)) {
                                        positions.insert(first + i as u64);
                                    }
                                }
                            }
                        }
                        first += column.len() as u64;
                    }
                    let mut r = results.lock().map_err(|_| anyhow!("poisoned"))?;
                    r.0 += 1;
                    r.1 += bytes;
                    r.2 += rows;
                    r.3 += positions.len();
                }
            })
        })
        .collect();
    for w in workers {
        w.join().map_err(|_| anyhow!("floor worker panicked"))??;
    }
    let r = *results.lock().map_err(|_| anyhow!("poisoned"))?;
    Ok(json!({
        "files_opened": r.0,
        "bytes_read": r.1 + bytes_read,
        "rows_scanned": r.2,
        "positions": r.3,
        "threads": threads,
        "inner_ms": started.elapsed().as_secs_f64() * 1000.0,
    }))
}

fn tally(batch: &RecordBatch, rows: &mut u64, sum_v: &mut u64) -> Result<()> {
    *rows += batch.num_rows() as u64;
    let v = batch
        .column_by_name("v")
        .ok_or_else(|| anyhow!("no column v"))?;
    let v = v
        .as_primitive_opt::<Int64Type>()
        .ok_or_else(|| anyhow!("v is not a long"))?;
    for x in v.iter().flatten() {
        *sum_v = sum_v.wrapping_add(x as u64);
    }
    Ok(())
}

/// iceberg-rust's table scan of one snapshot (all columns), applying its deletes.
pub async fn read_iceberg(metadata: &str, snapshot: Option<i64>) -> Result<Value> {
    let started = Instant::now();
    let table = StaticTable::from_metadata_file(
        metadata,
        TableIdent::from_strs(["bench", "t"])?,
        FileIO::new_with_fs(),
    )
    .await?;
    let mut scan = table.scan().select_all();
    if let Some(id) = snapshot {
        scan = scan.snapshot_id(id);
    }
    let mut stream = scan.build()?.to_arrow().await?;
    let (mut rows, mut sum_v) = (0, 0);
    while let Some(batch) = stream.try_next().await? {
        tally(&batch, &mut rows, &mut sum_v)?;
    }
    Ok(json!({"rows": rows, "sum_v": sum_v, "inner_ms": started.elapsed().as_secs_f64() * 1000.0}))
}

/// eqdv's reference reader (DV-aware; equality deletes too) at the head of a metadata file.
pub async fn read_eqdv(metadata: &str) -> Result<Value> {
    let started = Instant::now();
    let file_io = FileIO::new_with_fs();
    let table_metadata = TableMetadata::read_from(&file_io, metadata).await?;
    let table = LoadedTable {
        name: TableName::new("bench", "t"),
        pointer: TablePointer {
            metadata_location: metadata.to_string(),
            version: None,
        },
        metadata: Arc::new(table_metadata),
        file_io,
        kept_reads: Default::default(),
    };
    let batches = eqdv_workload::read::read_live_rows(&table, "main").await?;
    let (mut rows, mut sum_v) = (0, 0);
    for batch in &batches {
        tally(batch, &mut rows, &mut sum_v)?;
    }
    Ok(json!({"rows": rows, "sum_v": sum_v, "inner_ms": started.elapsed().as_secs_f64() * 1000.0}))
}
