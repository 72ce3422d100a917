//! Leaf files: Parquet files of index entries sorted by key hash (ties by data file
//! path, then position), three columns: `key_hash` (the index key), `source_file` (the
//! data file's ordinal in its run's covered list, which is in path order) and
//! `source_file_pos` (the reserved field id of `pos`).
//!
//! Iceberg's draft index spec names the data file by its path in every entry; a leaf
//! sorted by hash names almost every file of its run, so a path column's dictionary
//! would hold them all (2 MB at 20,000 files, past Parquet's dictionary page limit,
//! after which every entry carries its path: 135 bytes an entry). An ordinal, delta
//! encoded, costs a few bytes whatever the table's size.
//!
//! Pages are small ([`ROWS_PER_PAGE`] entries) and the hash column has a page index, so
//! a lookup of a few keys reads, of the row groups whose statistics hold one, only the
//! pages whose hash range holds one: a few KiB a key, never a whole leaf.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Int32Type, Int64Type};
use arrow_array::{Array, Int32Array, Int64Array, PrimitiveArray, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt, TryStreamExt};
use iceberg::io::FileIO;
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions, RowSelection};
use parquet::arrow::{ArrowWriter, ParquetRecordBatchStreamBuilder, ProjectionMask};

use crate::parquet_io::unless_panicked;
use parquet::basic::Encoding;
use parquet::file::metadata::{PageIndexPolicy, ParquetMetaData};
use parquet::file::page_index::column_index::ColumnIndexMetaData;
use parquet::file::page_index::offset_index::PageLocation;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::file::statistics::Statistics;
use parquet::schema::types::ColumnPath;
use roaring::RoaringTreemap;

use super::format::LeafMeta;
use crate::parquet_io::FooterCache;
use crate::parquet_io::footer_cache::KeptOpen;
use crate::parquet_io::reader::FileReader;
use crate::{Error, Result};

/// Rows per row group of a leaf.
pub const ROWS_PER_ROW_GROUP: usize = 65_536;
/// Rows per data page: 512 hashes are 4 KiB, what one lookup of a key reads of that
/// column (and about 2 KiB of the other two).
pub const ROWS_PER_PAGE: usize = 512;

/// Pages of a probe closer than this are fetched in one read: 64 KiB cost about a
/// millisecond more at S3's per-connection throughput, a read of their own a round trip.
const PROBE_COALESCE_GAP: u64 = 64 * 1024;

/// Row groups of one leaf a probe reads at once.
const ROW_GROUPS_IN_FLIGHT: usize = 16;

/// Field id of `key_hash`.
const KEY_HASH_ID: i32 = 1;
/// Field id of `source_file`.
const SOURCE_FILE_ID: i32 = 2;
/// Iceberg's reserved field id of `pos`.
const POS_ID: i32 = 2147483545;

/// The leaf's columns, in order.
const COLUMNS: [&str; 3] = ["key_hash", "source_file", "source_file_pos"];

/// Index entries, in index order: `hashes[i]` of row `positions[i]` of the data file
/// `files[i]` of the run's covered list.
pub struct Entries<'a> {
    pub hashes: &'a [i64],
    pub files: &'a [u32],
    pub positions: &'a [u64],
}

fn field(name: &str, data_type: DataType, id: i32) -> Field {
    Field::new(name, data_type, false).with_metadata(
        [(
            parquet::arrow::PARQUET_FIELD_ID_META_KEY.to_string(),
            id.to_string(),
        )]
        .into(),
    )
}

fn leaf_schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        field(COLUMNS[0], DataType::Int64, KEY_HASH_ID),
        field(COLUMNS[1], DataType::Int32, SOURCE_FILE_ID),
        field(COLUMNS[2], DataType::Int64, POS_ID),
    ]))
}

/// Writes `entries` (sorted, non-empty) as one leaf at `location`.
pub async fn write_leaf(
    file_io: &FileIO,
    location: &str,
    entries: &Entries<'_>,
) -> Result<LeafMeta> {
    let (Some(&min), Some(&max)) = (entries.hashes.first(), entries.hashes.last()) else {
        return Err(Error::InvalidInput(format!(
            "key index leaf {location} would be empty"
        )));
    };
    let (bytes, tail_bytes) = encode_leaf(location, entries)?;
    let size = bytes.len() as u64;
    super::format::write_file(file_io, location, bytes, "leaf").await?;
    Ok(LeafMeta {
        location: location.to_string(),
        file_size_in_bytes: size,
        record_count: entries.hashes.len() as u64,
        min_key_hash: min,
        max_key_hash: max,
        tail_bytes: Some(tail_bytes),
    })
}

/// The leaf's bytes, and how many of its last bytes hold its page indexes and footer.
fn encode_leaf(location: &str, entries: &Entries<'_>) -> Result<(Vec<u8>, u64)> {
    let encode_error = |e: &dyn std::fmt::Display| {
        Error::file(location, "cannot encode a key index leaf", e.to_string())
    };
    let schema = leaf_schema();
    let files = Int32Array::from_iter_values(entries.files.iter().map(|&f| f as i32));
    let positions = Int64Array::from_iter_values(entries.positions.iter().map(|&p| p as i64));
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(Int64Array::from(entries.hashes.to_vec())),
            Arc::new(files),
            Arc::new(positions),
        ],
    )
    .map_err(|e| encode_error(&e))?;
    let properties = WriterProperties::builder()
        .set_max_row_group_row_count(Some(ROWS_PER_ROW_GROUP))
        .set_data_page_row_count_limit(ROWS_PER_PAGE)
        .set_write_batch_size(ROWS_PER_PAGE)
        // Page statistics (the column index) on the hash only: lookups go by it alone.
        .set_statistics_enabled(EnabledStatistics::None)
        .set_column_statistics_enabled(ColumnPath::from(COLUMNS[0]), EnabledStatistics::Page)
        // No dictionary (a lookup would read a row group's for one page), and the
        // ordinals and positions delta encoded: a few bytes each.
        .set_dictionary_enabled(false)
        .set_column_encoding(ColumnPath::from(COLUMNS[1]), Encoding::DELTA_BINARY_PACKED)
        .set_column_encoding(ColumnPath::from(COLUMNS[2]), Encoding::DELTA_BINARY_PACKED)
        .build();
    let mut out = Vec::new();
    let mut writer =
        ArrowWriter::try_new(&mut out, schema, Some(properties)).map_err(|e| encode_error(&e))?;
    writer.write(&batch).map_err(|e| encode_error(&e))?;
    let metadata = writer.close().map_err(|e| encode_error(&e))?;
    let page_indexes = metadata
        .row_groups()
        .iter()
        .flat_map(|rg| rg.columns())
        .flat_map(|c| [c.column_index_offset(), c.offset_index_offset()])
        .flatten()
        .min();
    let len = out.len() as u64;
    let tail = match page_indexes.and_then(|at| u64::try_from(at).ok()) {
        Some(at) if at < len => len - at,
        // No page index: the footer and its 8-byte trailer.
        _ => out
            .get(out.len().saturating_sub(8)..out.len().saturating_sub(4))
            .and_then(|b| <[u8; 4]>::try_from(b).ok())
            .map_or(len, |b| u64::from(u32::from_le_bytes(b)) + 8),
    };
    Ok((out, tail))
}

/// What probing leaves read.
#[derive(Clone, Copy, Debug, Default)]
pub struct ProbeRead {
    pub row_groups_read: u64,
    pub bytes_read: u64,
    /// The footer and page index came from the footer cache.
    pub footer_from_cache: bool,
}

/// Adds to `named` the entries of `leaf` whose hash is in `probes` (sorted,
/// deduplicated): per data file (its ordinal in the run's covered list), the positions.
/// Reads the footer and page index (unless `footers` kept them, and keeps them there)
/// and the columns of only the pages (or row groups, without a page index) whose hash
/// range holds a probe.
pub async fn probe_leaf(
    file_io: &FileIO,
    footers: &FooterCache,
    leaf: &LeafMeta,
    probes: &[i64],
    named: &mut HashMap<u32, RoaringTreemap>,
) -> Result<ProbeRead> {
    let probed = probe_leaf_unguarded(file_io, footers, leaf, probes, named);
    unless_panicked(&leaf.location, "cannot read a key index leaf", probed).await?
}

async fn probe_leaf_unguarded(
    file_io: &FileIO,
    footers: &FooterCache,
    leaf: &LeafMeta,
    probes: &[i64],
    named: &mut HashMap<u32, RoaringTreemap>,
) -> Result<ProbeRead> {
    let location = leaf.location.as_str();
    let mut read = ProbeRead::default();
    let arrow_metadata = match footers.get(location, leaf.file_size_in_bytes) {
        Some(kept) => {
            read.footer_from_cache = true;
            kept.metadata
        }
        None => {
            let (_, arrow_metadata) = open_leaf(file_io, leaf, true).await?;
            let kept = KeptOpen {
                metadata: arrow_metadata.clone(),
                tail: None,
            };
            footers.keep(location, leaf.file_size_in_bytes, kept);
            arrow_metadata
        }
    };
    let metadata = arrow_metadata.metadata().clone();
    let holds_probe = |min: i64, max: i64| {
        let first = probes.partition_point(|p| *p < min);
        first < probes.len() && probes[first] <= max
    };
    // Per row group whose hash range holds a probe: the row ranges to read in it.
    let mut selected: Vec<(usize, Vec<std::ops::Range<usize>>, usize)> = Vec::new();
    for (i, rg) in metadata.row_groups().iter().enumerate() {
        let (min, max) = match rg.column(0).statistics() {
            Some(Statistics::Int64(s)) => match (s.min_opt(), s.max_opt()) {
                (Some(min), Some(max)) => (*min, *max),
                _ => (i64::MIN, i64::MAX),
            },
            _ => (i64::MIN, i64::MAX),
        };
        if !holds_probe(min, max) {
            continue;
        }
        let rows = rg.num_rows().max(0) as usize;
        let ranges: Vec<std::ops::Range<usize>> =
            match page_ranges(&metadata, i, rows, &holds_probe) {
                Some(pages) => pages
                    .into_iter()
                    .map(|(range, bytes)| {
                        read.bytes_read += bytes;
                        range
                    })
                    .collect(),
                None => {
                    read.bytes_read += (0..3)
                        .map(|c| rg.column(c).compressed_size().max(0) as u64)
                        .sum::<u64>();
                    std::iter::once(0..rows).collect()
                }
            };
        if !ranges.is_empty() {
            selected.push((i, ranges, rows));
        }
    }
    read.row_groups_read = selected.len() as u64;
    if selected.is_empty() {
        return Ok(read);
    }
    // The row groups are read at once, each by a stream of its own: one stream reads its
    // row groups one after another, a round trip to object storage each.
    let mask = ProjectionMask::roots(metadata.file_metadata().schema_descr(), [0, 1, 2]);
    let reads: Vec<BoxFuture<'_, Result<HashMap<u32, RoaringTreemap>>>> = selected
        .into_iter()
        .map(|(rg, ranges, rows)| {
            let (arrow_metadata, mask) = (arrow_metadata.clone(), mask.clone());
            async move {
                // A warm process keeps the pages read (a hot key's, looked up again
                // after the next commit).
                let reader = leaf_reader(file_io, leaf, true)
                    .await?
                    .with_kept_ranges(footers);
                let selection = RowSelection::from_consecutive_ranges(ranges.into_iter(), rows);
                let mut stream =
                    ParquetRecordBatchStreamBuilder::new_with_metadata(reader, arrow_metadata)
                        .with_row_groups(vec![rg])
                        .with_row_selection(selection)
                        .with_projection(mask)
                        .with_batch_size(ROWS_PER_ROW_GROUP)
                        .build()
                        .map_err(|e| Error::file(location, "cannot read a key index leaf", e))?;
                let mut found: HashMap<u32, RoaringTreemap> = HashMap::new();
                while let Some(batch) = stream
                    .try_next()
                    .await
                    .map_err(|e| Error::file(location, "cannot read a key index leaf", e))?
                {
                    let (hashes, files, positions) = columns(location, &batch)?;
                    for (row, hash) in hashes.values().iter().enumerate() {
                        if probes.binary_search(hash).is_ok() {
                            found
                                .entry(files.value(row) as u32)
                                .or_default()
                                .insert(positions.value(row) as u64);
                        }
                    }
                }
                Ok(found)
            }
            .boxed()
        })
        .collect();
    let mut results = futures::stream::iter(reads).buffer_unordered(ROW_GROUPS_IN_FLIGHT);
    while let Some(found) = results.try_next().await? {
        for (file, positions) in found {
            *named.entry(file).or_default() |= positions;
        }
    }
    Ok(read)
}

/// Every entry of `leaf`, appended to `out` as `(hash, file ordinal, position)` (for
/// merging runs).
pub async fn read_leaf(
    file_io: &FileIO,
    leaf: &LeafMeta,
    out: impl FnMut(i64, u32, u64),
) -> Result<u64> {
    let read = read_leaf_unguarded(file_io, leaf, out);
    unless_panicked(&leaf.location, "cannot read a key index leaf", read).await?
}

async fn read_leaf_unguarded(
    file_io: &FileIO,
    leaf: &LeafMeta,
    mut out: impl FnMut(i64, u32, u64),
) -> Result<u64> {
    let location = leaf.location.as_str();
    let (reader, metadata) = open_leaf(file_io, leaf, false).await?;
    let mut stream = ParquetRecordBatchStreamBuilder::new_with_metadata(reader, metadata)
        .with_batch_size(ROWS_PER_ROW_GROUP)
        .build()
        .map_err(|e| Error::file(location, "cannot read a key index leaf", e))?;
    let mut rows = 0;
    while let Some(batch) = stream
        .try_next()
        .await
        .map_err(|e| Error::file(location, "cannot read a key index leaf", e))?
    {
        let (hashes, files, positions) = columns(location, &batch)?;
        for row in 0..batch.num_rows() {
            out(
                hashes.value(row),
                files.value(row) as u32,
                positions.value(row) as u64,
            );
        }
        rows += batch.num_rows() as u64;
    }
    if rows != leaf.record_count {
        return Err(Error::file(
            location,
            format!(
                "key index leaf holds {rows} entries, its index metadata says {}",
                leaf.record_count
            ),
            "inconsistent key index",
        ));
    }
    Ok(rows)
}

/// The pages of row group `rg` (of `rows` rows) whose hash range `wanted` accepts: per
/// page, its rows within the row group and the bytes of it and of the other columns'
/// pages over the same rows. `None` when the leaf has no page index.
fn page_ranges(
    metadata: &ParquetMetaData,
    rg: usize,
    rows: usize,
    wanted: &dyn Fn(i64, i64) -> bool,
) -> Option<Vec<(std::ops::Range<usize>, u64)>> {
    let ColumnIndexMetaData::INT64(index) = metadata.column_index()?.get(rg)?.first()? else {
        return None;
    };
    let offsets = metadata.offset_index()?.get(rg)?;
    let hashes = offsets.first()?.page_locations();
    let others = [
        offsets.get(1)?.page_locations(),
        offsets.get(2)?.page_locations(),
    ];
    let ends = |pages: &[PageLocation], i: usize| {
        pages
            .get(i + 1)
            .map_or(rows, |p| p.first_row_index.max(0) as usize)
    };
    let mut out = Vec::new();
    for (p, page) in hashes.iter().enumerate() {
        let (Some(min), Some(max)) = (index.min_value(p), index.max_value(p)) else {
            return None;
        };
        if !wanted(*min, *max) {
            continue;
        }
        let range = page.first_row_index.max(0) as usize..ends(hashes, p);
        let other_bytes: u64 = others
            .iter()
            .flat_map(|pages| {
                let range = range.clone();
                pages.iter().enumerate().filter(move |(q, other)| {
                    (other.first_row_index.max(0) as usize) < range.end
                        && ends(pages, *q) > range.start
                })
            })
            .map(|(_, other)| other.compressed_page_size.max(0) as u64)
            .sum();
        out.push((range, page.compressed_page_size.max(0) as u64 + other_bytes));
    }
    Some(out)
}

/// Opens `leaf` (its footer read, and its page index when `page_index`) and checks that
/// it holds index entries: a reader of it and its metadata.
async fn open_leaf(
    file_io: &FileIO,
    leaf: &LeafMeta,
    page_index: bool,
) -> Result<(FileReader, ArrowReaderMetadata)> {
    let location = leaf.location.as_str();
    let mut reader = leaf_reader(file_io, leaf, page_index).await?;
    let policy = if page_index {
        PageIndexPolicy::Optional
    } else {
        PageIndexPolicy::Skip
    };
    let options = ArrowReaderOptions::new().with_page_index_policy(policy);
    let metadata = ArrowReaderMetadata::load_async(&mut reader, options)
        .await
        .map_err(|e| Error::file(location, "not a readable key index leaf", e))?;
    check_schema(location, metadata.schema())?;
    Ok((reader, metadata))
}

/// A reader of `leaf`; for a probe (`probe`), one that fetches its pages apart.
async fn leaf_reader(file_io: &FileIO, leaf: &LeafMeta, probe: bool) -> Result<FileReader> {
    let location = leaf.location.as_str();
    let inner = file_io
        .new_input(location)?
        .reader()
        .await
        .map_err(|e| Error::file(location, "cannot open a key index leaf (missing?)", e))?;
    let mut reader = FileReader::new(location, leaf.file_size_in_bytes, inner);
    if let Some(tail) = leaf.tail_bytes.and_then(|t| usize::try_from(t).ok()) {
        // Page indexes and footer in one request.
        reader = reader.with_footer_hint(tail);
    }
    // A probe reads a few pages scattered over the leaf: merged across the reader's
    // default gap (1 MiB) they would be most of the leaf.
    Ok(if probe {
        reader.with_coalesce_gap(PROBE_COALESCE_GAP)
    } else {
        reader
    })
}

fn bad_leaf(location: &str) -> Error {
    Error::file(
        location,
        "not a key index leaf (key_hash long, source_file int, source_file_pos long, none null or negative)",
        "unexpected schema",
    )
}

fn check_schema(location: &str, schema: &Schema) -> Result<()> {
    let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    if names != COLUMNS {
        return Err(bad_leaf(location));
    }
    Ok(())
}

type Columns<'a> = (
    &'a PrimitiveArray<Int64Type>,
    &'a PrimitiveArray<Int32Type>,
    &'a PrimitiveArray<Int64Type>,
);

/// The three columns of a batch of a leaf, checked: no nulls, no negative ordinal or
/// position.
fn columns<'a>(location: &str, batch: &'a RecordBatch) -> Result<Columns<'a>> {
    let bad = || bad_leaf(location);
    let hashes = batch
        .column(0)
        .as_primitive_opt::<Int64Type>()
        .ok_or_else(bad)?;
    let files = batch
        .column(1)
        .as_primitive_opt::<Int32Type>()
        .ok_or_else(bad)?;
    let positions = batch
        .column(2)
        .as_primitive_opt::<Int64Type>()
        .ok_or_else(bad)?;
    if hashes.null_count() > 0 || files.null_count() > 0 || positions.null_count() > 0 {
        return Err(bad());
    }
    if files.values().iter().any(|f| *f < 0) || positions.values().iter().any(|p| *p < 0) {
        return Err(bad());
    }
    Ok((hashes, files, positions))
}

#[cfg(test)]
mod tests;
