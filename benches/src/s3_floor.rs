//! The S3 floor of a resolve: what no converter can beat on a given table and storage.
//! Knowing in advance (from a preparation that is not timed) which data files truly
//! hold a deleted key, which of their row groups, and where each key column chunk sits,
//! the floor fetches every equality delete file and, of each data file, the span of its
//! key column chunks that hold a key, all at once (one request each, up to PARALLELISM
//! in flight), then decodes the keys and probes the chunks. eqdv must also find those files, read footers and prune; the floor does not.
//! Where a truth file already has a DV (a streaming table converted before), the floor
//! also fetches that DV's blob in the same wave, as any converter must merge it.
//!
//! One equality column of type long, string or uuid (the tables benches/s3_latency and
//! benches/random_keys make).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result, anyhow, bail};
use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{Array, ArrayRef};
use arrow_schema::DataType;
use bytes::{Buf, Bytes};
use eqdv::catalog::{GlueCatalog, GlueConfig, TableName};
use eqdv::dv::deserialize_dv;
use eqdv::plan::group_equality_deletes;
use eqdv::resolve::{ResolveOptions, resolve};
use eqdv::table::{LoadedTable, TableFiles};
use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt, TryStreamExt};
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder,
};
use parquet::file::metadata::{ParquetMetaData, ParquetMetaDataReader};
use parquet::file::reader::{ChunkReader, Length};
use roaring::RoaringTreemap;
use serde_json::{Value, json};

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Key {
    Long(i64),
    Str(String),
    /// uuid, fixed[L] and binary: the bytes.
    Bytes(Vec<u8>),
}

fn keys_of(column: &ArrayRef) -> Result<Vec<Option<Key>>> {
    Ok(match column.data_type() {
        DataType::Int64 => column
            .as_primitive::<Int64Type>()
            .iter()
            .map(|v| v.map(Key::Long))
            .collect(),
        DataType::Utf8 => column
            .as_string::<i32>()
            .iter()
            .map(|v| v.map(|s| Key::Str(s.to_string())))
            .collect(),
        DataType::FixedSizeBinary(_) => column
            .as_fixed_size_binary()
            .iter()
            .map(|v| v.map(|b| Key::Bytes(b.to_vec())))
            .collect(),
        other => bail!("the floor compares long, string and uuid keys, not {other}"),
    })
}

/// What one request of the floor fetched.
enum Fetched {
    Delete(usize),
    Chunk(usize),
    /// The existing DV of a truth file.
    Dv(usize),
}

/// The bytes of one data file the floor reads: from the first to the last key column
/// chunk of its row groups that hold a deleted key, in one request (for the small files
/// of a streaming table, one request a file beats one a chunk).
struct Chunk {
    file: usize,
    row_groups: Vec<usize>,
    start: u64,
    len: u64,
}

/// A truth file: its footer (known in advance), key column leaf and data sequence number.
struct TruthFile {
    path: String,
    size: u64,
    metadata: Arc<ParquetMetaData>,
    leaf: usize,
    data_sequence_number: i64,
    /// Its existing DV blob: (Puffin path, offset, length).
    dv: Option<(String, i64, i64)>,
}

/// The fetched byte ranges of one file, read as the file by the Parquet reader (which
/// asks only for the ranges of the projected column chunks).
struct Sparse {
    len: u64,
    parts: Vec<(u64, Bytes)>,
}

impl Sparse {
    fn part(&self, start: u64, length: u64) -> parquet::errors::Result<Bytes> {
        for (at, bytes) in &self.parts {
            if start >= *at && start + length <= at + bytes.len() as u64 {
                let from = (start - at) as usize;
                return Ok(bytes.slice(from..from + length as usize));
            }
        }
        Err(parquet::errors::ParquetError::General(format!(
            "range {start}+{length} was not fetched"
        )))
    }
}

impl Length for Sparse {
    fn len(&self) -> u64 {
        self.len
    }
}

impl ChunkReader for Sparse {
    type T = bytes::buf::Reader<Bytes>;

    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        for (at, bytes) in &self.parts {
            if start >= *at && start < at + bytes.len() as u64 {
                return Ok(bytes.slice((start - at) as usize..).reader());
            }
        }
        Err(parquet::errors::ParquetError::General(format!(
            "offset {start} was not fetched"
        )))
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        self.part(start, length as u64)
    }
}

fn column_by_name(metadata: &ParquetMetaData, name: &str) -> Result<usize> {
    metadata
        .file_metadata()
        .schema_descr()
        .columns()
        .iter()
        .position(|c| c.path().parts() == [name.to_string()])
        .ok_or_else(|| anyhow!("no column {name}"))
}

/// Row positions of the rows a reader of `row_groups` (ascending) returns, in order.
fn row_positions(metadata: &ParquetMetaData, row_groups: &[usize]) -> Vec<(u64, u64)> {
    let mut starts = Vec::new();
    let mut first = 0u64;
    for (rg, row_group) in metadata.row_groups().iter().enumerate() {
        let rows = row_group.num_rows().max(0) as u64;
        if row_groups.contains(&rg) {
            starts.push((first, rows));
        }
        first += rows;
    }
    starts
}

/// Prepares the floor of `table`'s resolve (through eqdv, untimed; through
/// `prepare_s3_endpoint` when given, so that a preparation behind a slow proxy costs
/// the benchmark no time), then runs it `reps` times with `parallelism` requests in flight
/// through the default S3 endpoint.
pub async fn run(
    warehouse: &str,
    table: &str,
    parallelism: usize,
    reps: usize,
    prepare_s3_endpoint: Option<String>,
) -> Result<Value> {
    let connect = |s3_endpoint: Option<String>| {
        GlueCatalog::connect(GlueConfig {
            warehouse: Some(warehouse.to_string()),
            s3_endpoint,
            ..Default::default()
        })
    };
    let catalog = connect(prepare_s3_endpoint).await?;
    let name = TableName::parse(table)?;
    let table = LoadedTable::load(&catalog, &name).await?;
    let files = TableFiles::read(&table, table.head("main")?.as_ref()).await?;
    if !files.position_deletes.is_empty() {
        bail!("the floor needs a table without v2 position deletes");
    }
    let groups = group_equality_deletes(&table, &files)?;
    let ids: Vec<i32> = groups.iter().flat_map(|g| g.equality_ids.clone()).collect();
    let key_id = match ids.first() {
        Some(id)
            if ids.iter().all(|i| i == id) && groups.iter().all(|g| g.equality_ids.len() == 1) =>
        {
            *id
        }
        _ => bail!("the floor needs one equality column shared by every group"),
    };
    let key_name = table
        .metadata
        .current_schema()
        .field_by_id(key_id)
        .ok_or_else(|| anyhow!("no field {key_id}"))?
        .name
        .clone();
    // The truth: which files and row groups hold a deleted key (eqdv's answer).
    let resolved = resolve(&table, &files, &groups, &ResolveOptions::default()).await?;
    let positions: u64 = resolved.positions.values().map(|p| p.len()).sum();
    let seq_of: HashMap<&str, i64> = files
        .data_files
        .iter()
        .map(|f| (f.path(), f.data_sequence_number))
        .collect();
    let mut truth = Vec::new();
    let mut chunks = Vec::new();
    // What eqdv's DVs would hold: its new positions with each file's old DV.
    let mut eqdv_merged = 0u64;
    for (path, deleted) in &resolved.positions {
        let dv = files.dvs.get(path.as_str()).map(|dv| {
            (
                dv.path().to_string(),
                dv.file.content_offset().unwrap_or(-1),
                dv.file.content_size_in_bytes().unwrap_or(-1),
            )
        });
        let mut merged = deleted.clone();
        if let Some((puffin, offset, length)) = &dv {
            merged |= eqdv::puffin::read_dv(&table.file_io, puffin, *offset, *length).await?;
        }
        eqdv_merged += merged.len();
        let bytes = table.file_io.new_input(path)?.read().await?;
        let metadata = Arc::new(ParquetMetaDataReader::new().parse_and_finish(&bytes)?);
        let leaf = column_by_name(&metadata, &key_name).with_context(|| path.clone())?;
        let mut first = 0u64;
        let mut span: Option<Chunk> = None;
        for (rg, row_group) in metadata.row_groups().iter().enumerate() {
            let rows = row_group.num_rows() as u64;
            let before = if first == 0 {
                0
            } else {
                deleted.rank(first - 1)
            };
            if rows > 0 && deleted.rank(first + rows - 1) > before {
                let (start, len) = row_group.column(leaf).byte_range();
                let span = span.get_or_insert(Chunk {
                    file: truth.len(),
                    row_groups: Vec::new(),
                    start,
                    len,
                });
                let end = (span.start + span.len).max(start + len);
                span.start = span.start.min(start);
                span.len = end - span.start;
                span.row_groups.push(rg);
            }
            first += rows;
        }
        chunks.extend(span);
        truth.push(TruthFile {
            path: path.clone(),
            size: bytes.len() as u64,
            metadata,
            leaf,
            data_sequence_number: *seq_of
                .get(path.as_str())
                .ok_or_else(|| anyhow!("{path} is not live"))?,
            dv,
        });
    }
    let deletes: Vec<(String, i64)> = groups
        .iter()
        .flat_map(|g| g.delete_files.iter())
        .map(|f| (f.path().to_string(), f.data_sequence_number))
        .collect();

    let dv_files: Vec<usize> = (0..truth.len())
        .filter(|&i| truth[i].dv.is_some())
        .collect();
    // The timed reads go through the default endpoint.
    let timed_catalog = connect(None).await?;
    let timed_table = LoadedTable::load(&timed_catalog, &name).await?;

    let mut runs = Vec::new();
    let mut bytes_fetched = 0;
    let mut matched = 0;
    let mut floor_merged = 0;
    for _ in 0..reps {
        let started = Instant::now();
        let file_io = &timed_table.file_io;
        let mut fetches: Vec<BoxFuture<'_, Result<(Fetched, Bytes)>>> = Vec::new();
        for (i, (path, _)) in deletes.iter().enumerate() {
            fetches.push(
                async move { Ok((Fetched::Delete(i), file_io.new_input(path)?.read().await?)) }
                    .boxed(),
            );
        }
        for (i, chunk) in chunks.iter().enumerate() {
            let path = &truth[chunk.file].path;
            fetches.push(
                async move {
                    let reader = file_io.new_input(path)?.reader().await?;
                    let range = chunk.start..chunk.start + chunk.len;
                    Ok((Fetched::Chunk(i), reader.read(range).await?))
                }
                .boxed(),
            );
        }
        for &i in &dv_files {
            let Some((puffin, offset, length)) = &truth[i].dv else {
                continue;
            };
            let (offset, length) = (*offset, *length);
            let (start, end) = (u64::try_from(offset)?, u64::try_from(offset + length)?);
            fetches.push(
                async move {
                    let reader = file_io.new_input(puffin)?.reader().await?;
                    Ok((Fetched::Dv(i), reader.read(start..end).await?))
                }
                .boxed(),
            );
        }
        let fetched: Vec<(Fetched, Bytes)> = futures::stream::iter(fetches)
            .buffer_unordered(parallelism.max(1))
            .try_collect()
            .await?;
        let fetch_ms = started.elapsed().as_secs_f64() * 1000.0;
        bytes_fetched = fetched.iter().map(|(_, b)| b.len() as u64).sum();

        // Decode the keys (each with its highest delete sequence number), then probe.
        let mut keys: HashMap<Key, i64> = HashMap::new();
        let mut chunk_bytes: Vec<Option<Bytes>> = vec![None; chunks.len()];
        let mut merged: Vec<RoaringTreemap> = vec![RoaringTreemap::new(); truth.len()];
        for (which, bytes) in fetched {
            let i = match which {
                Fetched::Chunk(i) => {
                    chunk_bytes[i] = Some(bytes);
                    continue;
                }
                Fetched::Dv(i) => {
                    merged[i] |= deserialize_dv(&bytes)?;
                    continue;
                }
                Fetched::Delete(i) => i,
            };
            let seq = deletes[i].1;
            for batch in ParquetRecordBatchReaderBuilder::try_new(bytes)?.build()? {
                let batch = batch?;
                let column = batch
                    .column_by_name(&key_name)
                    .ok_or_else(|| anyhow!("{} has no column {key_name}", deletes[i].0))?;
                for key in keys_of(column)?.into_iter().flatten() {
                    let at = keys.entry(key).or_insert(seq);
                    *at = (*at).max(seq);
                }
            }
        }
        matched = 0u64;
        for (chunk, bytes) in chunks.iter().zip(chunk_bytes) {
            let bytes = bytes.ok_or_else(|| anyhow!("a chunk was not fetched"))?;
            let file = &truth[chunk.file];
            let sparse = Sparse {
                len: file.size,
                parts: vec![(chunk.start, bytes)],
            };
            let meta =
                ArrowReaderMetadata::try_new(file.metadata.clone(), ArrowReaderOptions::new())?;
            let mask =
                ProjectionMask::leaves(meta.metadata().file_metadata().schema_descr(), [file.leaf]);
            let reader = ParquetRecordBatchReaderBuilder::new_with_metadata(sparse, meta)
                .with_projection(mask)
                .with_row_groups(chunk.row_groups.clone())
                .build()?;
            // The reader returns the row groups' rows in order: walk their positions.
            let mut positions = row_positions(&file.metadata, &chunk.row_groups)
                .into_iter()
                .flat_map(|(first, rows)| first..first + rows);
            for batch in reader {
                let batch = batch?;
                for key in keys_of(batch.column(0))? {
                    let position = positions
                        .next()
                        .ok_or_else(|| anyhow!("{}: more rows than its row groups", file.path))?;
                    if key
                        .and_then(|key| keys.get(&key))
                        .is_some_and(|s| *s > file.data_sequence_number)
                    {
                        matched += 1;
                        merged[chunk.file].insert(position);
                    }
                }
            }
        }
        floor_merged = merged.iter().map(RoaringTreemap::len).sum();
        runs.push(json!({
            "fetch_ms": fetch_ms,
            "total_ms": started.elapsed().as_secs_f64() * 1000.0,
        }));
    }
    Ok(json!({
        "table": name.to_string(),
        "parallelism": parallelism,
        "delete_files": deletes.len(),
        "truth_files": truth.len(),
        "data_spans": chunks.len(),
        "existing_dvs": dv_files.len(),
        "requests": deletes.len() + chunks.len() + dv_files.len(),
        "bytes_fetched": bytes_fetched,
        "positions_matched": matched,
        "eqdv_positions": positions,
        "floor_positions_with_old": floor_merged,
        "eqdv_positions_with_old": eqdv_merged,
        "runs": runs,
    }))
}
