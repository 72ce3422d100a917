//! eqdv's Parquet byte source: parquet's [`AsyncFileReader`] over an Iceberg
//! [`FileRead`], tuned for opening many small files.
//!
//! iceberg-rust's `ArrowFileReader` prefetches a 512 KiB footer and always preloads the
//! page indexes (column and offset indexes), which costs CPU on every opened file;
//! eqdv prunes by row-group statistics only and never uses them. This reader:
//!
//! - loads the footer with parquet's own [`ParquetMetaDataReader::load_and_finish`]:
//!   one suffix read of [`DEFAULT_FOOTER_HINT`] bytes (the whole file when smaller),
//!   plus one more read only when the footer is longer than that; page indexes skipped
//!   unless the reader's options ask for them (the key index's leaves);
//! - keeps that suffix and serves later reads falling inside it from memory, so a file
//!   smaller than the hint is read once;
//! - coalesces the column-chunk ranges of a read that are adjacent or closer than
//!   [`DEFAULT_COALESCE_GAP`] into one read each, then slices them.

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt, TryStreamExt};
use iceberg::io::FileRead;
use parquet::arrow::arrow_reader::ArrowReaderOptions;
use parquet::arrow::async_reader::{AsyncFileReader, MetadataFetch};
use parquet::errors::ParquetError;
use parquet::file::metadata::{PageIndexPolicy, ParquetMetaData, ParquetMetaDataReader};

use super::thrift_walk;
use crate::Error;

/// Bytes read from the end of a file to find its footer (the whole file when smaller).
pub const DEFAULT_FOOTER_HINT: usize = 64 * 1024;

/// Ranges of one read closer than this are fetched as one range.
pub const DEFAULT_COALESCE_GAP: u64 = 1024 * 1024;

/// The coalescing gap of a read by position: its pages are scattered through a chunk,
/// and the 1 MiB default would merge them back into most of it.
pub const POSITIONED_COALESCE_GAP: u64 = 64 * 1024;

/// A page that declares more bytes than this uncompressed is refused: parquet allocates
/// (and for most codecs zeroes) the size a page header declares before it decompresses
/// the page, so a header of a few bytes could ask for 2 GiB. Avro blocks have the same
/// cap.
pub const MAX_PAGE_BYTES: i32 = 256 << 20;

/// Merged ranges of one read fetched at once (matters on object stores); iceberg-rust's
/// `ArrowFileReader` default.
const FETCH_CONCURRENCY: usize = 10;

/// An [`AsyncFileReader`] over an Iceberg [`FileRead`] of a file of known size.
pub struct FileReader {
    path: Arc<str>,
    size: u64,
    inner: Box<dyn FileRead>,
    footer_hint: usize,
    coalesce_gap: u64,
    /// The file's last bytes as read for the footer: `(offset, bytes)`.
    tail: Option<(u64, Bytes)>,
    /// The page indexes as read to be checked, when outside the tail.
    index: Option<(u64, Bytes)>,
    /// Reads issued to `inner` (for tests and diagnostics).
    reads: u64,
    /// Bytes the footer's reads fetched.
    footer_bytes: u64,
    /// Where column reads are kept for a later reader of the file, and found again
    /// (see [`FileReader::with_kept_ranges`]).
    kept_ranges: Option<super::FooterCache>,
    /// Whether the ranges asked for are parquet's column reads, their pages' headers
    /// walked before parquet sees them (see [`FileReader::reading_pages`]).
    pages: bool,
}

impl FileReader {
    /// A reader of `path` (used in error messages), `size` bytes long, with the default
    /// footer hint and coalescing gap.
    pub fn new(path: &str, size: u64, inner: Box<dyn FileRead>) -> Self {
        Self {
            path: Arc::from(path),
            size,
            inner,
            footer_hint: DEFAULT_FOOTER_HINT,
            coalesce_gap: DEFAULT_COALESCE_GAP,
            tail: None,
            index: None,
            reads: 0,
            footer_bytes: 0,
            kept_ranges: None,
            pages: false,
        }
    }

    /// A reader whose [`get_byte_ranges`](AsyncFileReader::get_byte_ranges) serves
    /// parquet's reads of column chunks or pages (each range starts at a page header):
    /// every page header in them is walked (see `thrift_walk`) and a page larger than
    /// [`MAX_PAGE_BYTES`] uncompressed is refused, naming the file, before parquet
    /// allocates for it.
    pub fn reading_pages(mut self) -> Self {
        self.pages = true;
        self
    }

    /// A reader whose column reads are looked for in `cache` first and kept there
    /// (while the file's footer is kept there too): a warm process reading the same
    /// pages of the same immutable file again, as a key index lookup of a hot key does,
    /// fetches them once.
    pub fn with_kept_ranges(mut self, cache: &super::FooterCache) -> Self {
        if cache.is_on() {
            self.kept_ranges = Some(cache.clone());
        }
        self
    }

    /// Bytes to read from the end of the file for its footer (at least the 8-byte tail).
    pub fn with_footer_hint(mut self, bytes: usize) -> Self {
        self.footer_hint = bytes;
        self
    }

    /// Where the footer's read starts: the bytes from here to the end come with it, so
    /// reading any of them later costs no request.
    pub fn footer_read_start(&self) -> u64 {
        self.size.saturating_sub(self.footer_hint as u64)
    }

    /// A reader that holds `bytes`, the file's last bytes from `offset` on, as if its
    /// footer read had fetched them (a footer kept from an earlier open): reads within
    /// them cost no request.
    pub fn with_tail(mut self, offset: u64, bytes: Bytes) -> Self {
        self.footer_hint = usize::try_from(self.size.saturating_sub(offset)).unwrap_or(usize::MAX);
        self.tail = Some((offset, bytes));
        self
    }

    /// The file's last bytes as the footer read fetched them: `(offset, bytes)`.
    pub fn tail(&self) -> Option<(u64, Bytes)> {
        self.tail.clone()
    }

    /// Ranges of one read closer than `bytes` are fetched as one.
    pub fn with_coalesce_gap(mut self, bytes: u64) -> Self {
        self.coalesce_gap = bytes;
        self
    }

    /// Reads issued to the underlying [`FileRead`] so far.
    pub fn reads(&self) -> u64 {
        self.reads
    }

    /// Bytes the footer's reads fetched so far.
    pub fn footer_bytes(&self) -> u64 {
        self.footer_bytes
    }

    /// The length of the footer's metadata (without the 8-byte trailer), from the kept
    /// tail: `None` before the footer is read.
    pub fn footer_len(&self) -> Option<u64> {
        let (_, tail) = self.tail.as_ref()?;
        let trailer = tail
            .len()
            .checked_sub(8)
            .and_then(|at| tail.get(at..at + 4))?;
        let len: [u8; 4] = trailer.try_into().ok()?;
        Some(u64::from(u32::from_le_bytes(len)))
    }

    /// `range` from the kept tail or page indexes, if it lies wholly inside them.
    fn cached(&self, range: &Range<u64>) -> Option<Bytes> {
        [&self.tail, &self.index]
            .into_iter()
            .flatten()
            .find_map(|(offset, bytes)| slice_within(*offset, bytes, range))
    }

    /// Reads `range` from the file, failing on a short read (a truncated file).
    async fn fetch_range(
        inner: &dyn FileRead,
        path: &str,
        range: Range<u64>,
    ) -> parquet::errors::Result<Bytes> {
        let bytes = inner.read(range.clone()).await.map_err(|e| {
            external(
                path,
                format!("cannot read bytes {}..{}", range.start, range.end),
                e,
            )
        })?;
        let wanted = range.end.saturating_sub(range.start);
        if bytes.len() as u64 != wanted {
            return Err(external(
                path,
                format!(
                    "read of bytes {}..{} returned {} bytes",
                    range.start,
                    range.end,
                    bytes.len()
                ),
                "file shorter than its recorded size (truncated?)",
            ));
        }
        Ok(bytes)
    }

    /// `bytes` of `ranges` as a read returns them, their pages walked first when the
    /// reader is [`reading_pages`](FileReader::reading_pages).
    fn served(
        &self,
        ranges: &[Range<u64>],
        bytes: Vec<Bytes>,
    ) -> parquet::errors::Result<Vec<Bytes>> {
        if self.pages {
            for (range, bytes) in ranges.iter().zip(&bytes) {
                check_pages(&self.path, range.start, bytes)?;
            }
        }
        Ok(bytes)
    }

    fn check_range(&self, range: &Range<u64>) -> parquet::errors::Result<()> {
        if range.start > range.end || range.end > self.size {
            return Err(external(
                &self.path,
                format!(
                    "byte range {}..{} outside the file's {} bytes",
                    range.start, range.end, self.size
                ),
                "corrupt file or wrong file size",
            ));
        }
        Ok(())
    }
}

/// The bytes of the file's `range` out of `bytes`, the file's bytes from `offset` on, if
/// they hold all of it.
pub(crate) fn slice_within(offset: u64, bytes: &Bytes, range: &Range<u64>) -> Option<Bytes> {
    let start = usize::try_from(range.start.checked_sub(offset)?).ok()?;
    let end = usize::try_from(range.end.checked_sub(offset)?).ok()?;
    (start <= end && end <= bytes.len()).then(|| bytes.slice(start..end))
}

/// A parquet error carrying eqdv's file error (which names the path).
fn external(
    path: &str,
    message: impl Into<String>,
    source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
) -> ParquetError {
    ParquetError::External(Box::new(Error::file(path, message, source)))
}

/// Serves the footer reads of [`ParquetMetaDataReader`] and keeps the first suffix read.
pub(super) struct FooterFetch<'a>(pub(super) &'a mut FileReader);

impl MetadataFetch for FooterFetch<'_> {
    fn fetch(&mut self, range: Range<u64>) -> BoxFuture<'_, parquet::errors::Result<Bytes>> {
        async move {
            let reader = &mut *self.0;
            let bytes = match reader.cached(&range) {
                Some(bytes) => bytes,
                None => {
                    reader.check_range(&range)?;
                    reader.reads += 1;
                    let bytes =
                        FileReader::fetch_range(reader.inner.as_ref(), &reader.path, range.clone())
                            .await?;
                    reader.footer_bytes += bytes.len() as u64;
                    if reader.tail.is_none() && range.end == reader.size {
                        reader.tail = Some((range.start, bytes.clone()));
                    }
                    bytes
                }
            };
            reader.check_footer(&range, &bytes)?;
            Ok(bytes)
        }
        .boxed()
    }
}

impl FileReader {
    /// Walks the footer's Thrift (see [`thrift_walk`](super::thrift_walk)) when `bytes`,
    /// the file's `range`, hold all of it: a suffix of the file, or the footer alone (the
    /// second read of a footer longer than the first).
    fn check_footer(&self, range: &Range<u64>, bytes: &Bytes) -> parquet::errors::Result<()> {
        let footer = if range.end == self.size {
            let n = bytes.len();
            let trailer = n.checked_sub(8).and_then(|at| bytes.get(at..));
            let Some(trailer) = trailer.filter(|t| t[4..] == *b"PAR1") else {
                // Not a plain Parquet trailer: parquet's own check names what is wrong.
                return Ok(());
            };
            let len = u32::from_le_bytes([trailer[0], trailer[1], trailer[2], trailer[3]]);
            match (n - 8).checked_sub(len as usize) {
                Some(start) => &bytes[start..n - 8],
                // Longer than this read: walked when it is read alone.
                None => return Ok(()),
            }
        } else if range.end.checked_add(8) == Some(self.size) {
            &bytes[..]
        } else {
            return Ok(());
        };
        thrift_walk::walk_struct(footer, thrift_walk::FILE_METADATA)
            .and_then(|_| thrift_walk::check_schema_children(footer))
            .map_err(|why| external(&self.path, "corrupt footer", why))
    }

    /// Walks the page indexes `metadata` points at (column indexes, offset indexes or
    /// both) before parquet decodes them, each as exactly one Thrift struct in its
    /// range. They are read in one range (kept, so that parquet's read of them costs no
    /// further request).
    pub(crate) async fn check_page_indexes(
        &mut self,
        metadata: &ParquetMetaData,
        column: bool,
        offset: bool,
    ) -> parquet::errors::Result<()> {
        let mut ranges = Vec::new();
        for row_group in metadata.row_groups() {
            for chunk in row_group.columns() {
                let indexes = [
                    (
                        column,
                        chunk.column_index_offset(),
                        chunk.column_index_length(),
                        thrift_walk::COLUMN_INDEX,
                    ),
                    (
                        offset,
                        chunk.offset_index_offset(),
                        chunk.offset_index_length(),
                        thrift_walk::OFFSET_INDEX,
                    ),
                ];
                for (wanted, at, len, fields) in indexes {
                    if let (true, Some(at), Some(len)) = (wanted, at, len) {
                        let (Ok(at), Ok(len)) = (u64::try_from(at), u64::try_from(len)) else {
                            return Err(external(
                                &self.path,
                                "corrupt page index",
                                "a negative offset or length",
                            ));
                        };
                        ranges.push((at..at.saturating_add(len), fields));
                    }
                }
            }
        }
        let (Some(start), Some(end)) = (
            ranges.iter().map(|(r, _)| r.start).min(),
            ranges.iter().map(|(r, _)| r.end).max(),
        ) else {
            return Ok(());
        };
        let bytes = FooterFetch(self).fetch(start..end).await?;
        if self.cached(&(start..end)).is_none() {
            self.index = Some((start, bytes.clone()));
        }
        for (range, fields) in ranges {
            let Some(index) = slice_within(start, &bytes, &range) else {
                return Err(external(
                    &self.path,
                    "corrupt page index",
                    "a range outside its read",
                ));
            };
            thrift_walk::walk_struct(&index, fields).map_err(|why| {
                external(
                    &self.path,
                    format!("corrupt page index at bytes {}..{}", range.start, range.end),
                    why,
                )
            })?;
        }
        Ok(())
    }
}

impl AsyncFileReader for FileReader {
    fn get_bytes(&mut self, range: Range<u64>) -> BoxFuture<'_, parquet::errors::Result<Bytes>> {
        async move {
            if let Some(bytes) = self.cached(&range) {
                return Ok(bytes);
            }
            self.check_range(&range)?;
            self.reads += 1;
            Self::fetch_range(self.inner.as_ref(), &self.path, range).await
        }
        .boxed()
    }

    fn get_byte_ranges(
        &mut self,
        ranges: Vec<Range<u64>>,
    ) -> BoxFuture<'_, parquet::errors::Result<Vec<Bytes>>> {
        async move {
            let mut out: Vec<Option<Bytes>> = ranges
                .iter()
                .map(|r| {
                    self.cached(r).or_else(|| {
                        let kept = self.kept_ranges.as_ref()?;
                        kept.get_range(&self.path, self.size, r)
                    })
                })
                .collect();
            let missing: Vec<Range<u64>> = ranges
                .iter()
                .zip(&out)
                .filter(|(_, b)| b.is_none())
                .map(|(r, _)| r.clone())
                .collect();
            if missing.is_empty() {
                return self.served(&ranges, out.into_iter().flatten().collect());
            }
            for range in &missing {
                self.check_range(range)?;
            }
            let merged = coalesce_ranges(&missing, self.coalesce_gap);
            self.reads += merged.len() as u64;
            let (inner, path) = (self.inner.as_ref(), &*self.path);
            let fetched: Vec<Bytes> = futures::stream::iter(merged.iter().cloned())
                .map(|range| Self::fetch_range(inner, path, range))
                .buffered(FETCH_CONCURRENCY)
                .try_collect()
                .await?;
            if let Some(kept) = &self.kept_ranges {
                for (range, bytes) in merged.iter().zip(&fetched) {
                    kept.keep_range(path, self.size, range.start, bytes.clone());
                }
            }
            for (slot, range) in out.iter_mut().zip(&ranges) {
                if slot.is_some() {
                    continue;
                }
                // The merged range holding `range`: the last one starting at or before it.
                let i = merged
                    .partition_point(|m| m.start <= range.start)
                    .checked_sub(1)
                    .ok_or_else(|| external(path, "range coalescing lost a range", "bug"))?;
                let start = usize::try_from(range.start - merged[i].start)
                    .map_err(|e| external(path, "range too large", e))?;
                let end = usize::try_from(range.end - merged[i].start)
                    .map_err(|e| external(path, "range too large", e))?;
                *slot = Some(fetched[i].slice(start..end));
            }
            self.served(&ranges, out.into_iter().flatten().collect())
        }
        .boxed()
    }

    fn get_metadata<'a>(
        &'a mut self,
        options: Option<&'a ArrowReaderOptions>,
    ) -> BoxFuture<'a, parquet::errors::Result<Arc<ParquetMetaData>>> {
        async move {
            let size = self.size;
            // Page indexes only where the caller asks (the key index's leaves do).
            let (column_index, offset_index) = options
                .map_or((PageIndexPolicy::Skip, PageIndexPolicy::Skip), |o| {
                    (o.column_index_policy(), o.offset_index_policy())
                });
            let metadata = ParquetMetaDataReader::new()
                .with_metadata_options(options.map(|o| o.metadata_options().clone()))
                .with_column_index_policy(PageIndexPolicy::Skip)
                .with_offset_index_policy(PageIndexPolicy::Skip)
                .with_prefetch_hint(Some(self.footer_hint))
                .load_and_finish(FooterFetch(self), size)
                .await?;
            let skip = |p: PageIndexPolicy| matches!(p, PageIndexPolicy::Skip);
            if skip(column_index) && skip(offset_index) {
                return Ok(Arc::new(metadata));
            }
            // The page indexes walked before parquet decodes them (see `thrift_walk`).
            self.check_page_indexes(&metadata, !skip(column_index), !skip(offset_index))
                .await?;
            let mut loader = ParquetMetaDataReader::new_with_metadata(metadata)
                .with_column_index_policy(column_index)
                .with_offset_index_policy(offset_index);
            loader.load_page_index(FooterFetch(self)).await?;
            Ok(Arc::new(loader.finish()?))
        }
        .boxed()
    }
}

/// Walks the pages in `bytes`, the file's bytes from `offset` on, which parquet reads as
/// consecutive pages: each header must walk (see `thrift_walk`) and declare at most
/// [`MAX_PAGE_BYTES`] uncompressed. A page running past the bytes ends the walk (parquet
/// fails on it itself).
fn check_pages(path: &str, offset: u64, bytes: &[u8]) -> parquet::errors::Result<()> {
    let mut at = 0usize;
    while let Some(rest) = bytes.get(at..).filter(|rest| !rest.is_empty()) {
        let byte = offset.saturating_add(at as u64);
        let page = thrift_walk::page_header(rest)
            .map_err(|why| external(path, format!("corrupt page header at byte {byte}"), why))?;
        if page.uncompressed > MAX_PAGE_BYTES {
            return Err(external(
                path,
                format!(
                    "the page at byte {byte} declares {} bytes uncompressed",
                    page.uncompressed
                ),
                format!("more than eqdv's limit of {MAX_PAGE_BYTES} bytes a page"),
            ));
        }
        let Ok(compressed) = usize::try_from(page.compressed) else {
            return Err(external(
                path,
                format!("corrupt page header at byte {byte}"),
                format!("a compressed size of {}", page.compressed),
            ));
        };
        at = at.saturating_add(page.header).saturating_add(compressed);
    }
    Ok(())
}

/// Sorted, disjoint ranges covering `ranges`, merging those that overlap, touch or are
/// at most `gap` bytes apart.
pub fn coalesce_ranges(ranges: &[Range<u64>], gap: u64) -> Vec<Range<u64>> {
    let mut sorted = ranges.to_vec();
    sorted.sort_unstable_by_key(|r| (r.start, r.end));
    let mut merged: Vec<Range<u64>> = Vec::with_capacity(sorted.len());
    for range in sorted {
        match merged.last_mut() {
            Some(last) if range.start <= last.end.saturating_add(gap) => {
                last.end = last.end.max(range.end);
            }
            _ => merged.push(range),
        }
    }
    merged
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::path::Path;

    use arrow_array::{Array, Int64Array, RecordBatch};
    use arrow_schema::{DataType, Field, Schema};
    use futures::TryStreamExt;
    use iceberg::io::FileIO;
    use parquet::arrow::{ArrowWriter, PARQUET_FIELD_ID_META_KEY};
    use parquet::file::properties::WriterProperties;

    use super::*;
    use crate::parquet_io::ParquetFile;

    /// Writes `columns` long columns (field ids 1..) of `rows` rows each, in row groups
    /// of `group_rows`; column `c` holds `c * 1_000_000 + row`.
    fn write_parquet(path: &Path, columns: usize, rows: usize, group_rows: usize) {
        let fields: Vec<Field> = (0..columns)
            .map(|c| {
                Field::new(format!("c{c}"), DataType::Int64, false).with_metadata(HashMap::from([
                    (PARQUET_FIELD_ID_META_KEY.to_string(), (c + 1).to_string()),
                ]))
            })
            .collect();
        let schema = Arc::new(Schema::new(fields));
        let arrays: Vec<Arc<dyn Array>> = (0..columns)
            .map(|c| {
                Arc::new(Int64Array::from_iter_values(
                    (0..rows as i64).map(|r| c as i64 * 1_000_000 + r),
                )) as Arc<dyn Array>
            })
            .collect();
        let batch = RecordBatch::try_new(schema.clone(), arrays).unwrap();
        let props = WriterProperties::builder()
            .set_max_row_group_row_count(Some(group_rows))
            .build();
        let file = std::fs::File::create(path).unwrap();
        let mut writer = ArrowWriter::try_new(file, schema, Some(props)).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
    }

    async fn reader_of(path: &Path, size: Option<u64>) -> FileReader {
        let path = path.to_str().unwrap();
        let size = size.unwrap_or_else(|| std::fs::metadata(path).unwrap().len());
        let inner = FileIO::new_with_fs()
            .new_input(path)
            .unwrap()
            .reader()
            .await
            .unwrap();
        FileReader::new(path, size, inner)
    }

    #[tokio::test]
    async fn small_file_is_read_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("small.parquet");
        write_parquet(&path, 3, 1000, 1000);
        assert!(std::fs::metadata(&path).unwrap().len() < DEFAULT_FOOTER_HINT as u64);
        let mut reader = reader_of(&path, None).await;
        let meta = reader.get_metadata(None).await.unwrap();
        assert_eq!(reader.reads(), 1);
        assert_eq!(meta.num_row_groups(), 1);
        assert!(meta.column_index().is_none() && meta.offset_index().is_none());
        // Every column chunk comes from the kept tail.
        let ranges: Vec<Range<u64>> = meta
            .row_group(0)
            .columns()
            .iter()
            .map(|c| {
                let (start, len) = c.byte_range();
                start..start + len
            })
            .collect();
        let chunks = reader.get_byte_ranges(ranges.clone()).await.unwrap();
        assert_eq!(reader.reads(), 1);
        let file = std::fs::read(&path).unwrap();
        for (range, chunk) in ranges.iter().zip(&chunks) {
            assert_eq!(&chunk[..], &file[range.start as usize..range.end as usize]);
        }
    }

    #[tokio::test]
    async fn footer_longer_than_the_suffix_takes_a_second_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wide.parquet");
        // 300 columns x 4 row groups: a footer of tens of KiB.
        write_parquet(&path, 300, 400, 100);
        for hint in [0, 64, 4096] {
            let mut reader = reader_of(&path, None).await.with_footer_hint(hint);
            let meta = reader.get_metadata(None).await.unwrap();
            assert_eq!(reader.reads(), 2, "hint {hint}");
            assert_eq!(meta.num_row_groups(), 4);
            assert_eq!(meta.file_metadata().schema_descr().num_columns(), 300);
        }
        // And the file reads correctly by field id through ParquetFile.
        let reader = reader_of(&path, None).await.with_footer_hint(64);
        let file = ParquetFile::open_reader(path.to_str().unwrap(), reader)
            .await
            .unwrap();
        assert_eq!(file.leaf_index(250), Some(249));
        let target = [Arc::new(iceberg::spec::NestedField::required(
            250,
            "c249",
            iceberg::spec::Type::Primitive(iceberg::spec::PrimitiveType::Long),
        ))];
        let batches: Vec<(u64, RecordBatch)> = file
            .read(&target, Some(vec![1, 3]), 1024)
            .unwrap()
            .try_collect()
            .await
            .unwrap();
        let firsts: Vec<u64> = batches.iter().map(|(p, _)| *p).collect();
        assert_eq!(firsts, vec![100, 300]);
        let values = crate::parquet_io::tests::first_long_column(&batches);
        let expected: Vec<i64> = (100..200)
            .chain(300..400)
            .map(|r| 249_000_000 + r)
            .collect();
        assert_eq!(values, expected);
    }

    #[test]
    fn ranges_coalesce_when_close() {
        assert!(coalesce_ranges(&[], 10).is_empty());
        // Adjacent, overlapping, contained, unsorted.
        assert_eq!(
            coalesce_ranges(&[20..30, 0..10, 10..15, 5..12, 22..25], 0),
            vec![0..15, 20..30]
        );
        // Gaps up to `gap` merge, larger ones do not.
        assert_eq!(
            coalesce_ranges(&[0..10, 15..20, 31..40], 5),
            vec![0..20, 31..40]
        );
        assert_eq!(coalesce_ranges(&[0..10, 16..20], 5), vec![0..10, 16..20]);
    }

    #[tokio::test]
    async fn byte_ranges_are_coalesced_then_sliced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("blob.bin");
        let data: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(&path, &data).unwrap();
        let mut reader = reader_of(&path, None).await;
        let ranges = vec![
            500..900,
            0..100,
            100..300, // adjacent to 0..100
            250..260, // overlapping
            600_000..600_010,
            2_900_000..2_900_100, // more than 1 MiB after the previous one
        ];
        let got = reader.get_byte_ranges(ranges.clone()).await.unwrap();
        assert_eq!(reader.reads(), 2);
        for (range, bytes) in ranges.iter().zip(&got) {
            assert_eq!(&bytes[..], &data[range.start as usize..range.end as usize]);
        }
        // With no gap allowed, only touching or overlapping ranges merge.
        let mut reader = reader_of(&path, None).await.with_coalesce_gap(0);
        let got = reader.get_byte_ranges(ranges.clone()).await.unwrap();
        assert_eq!(reader.reads(), 4);
        for (range, bytes) in ranges.iter().zip(&got) {
            assert_eq!(&bytes[..], &data[range.start as usize..range.end as usize]);
        }
        // A range past the end is an error naming the file.
        let err = reader.get_bytes(2_999_990..3_000_010).await.unwrap_err();
        assert!(err.to_string().contains("blob.bin"), "{err}");
    }

    /// A reader of column data walks the pages of what it serves: one declaring more
    /// than [`MAX_PAGE_BYTES`] uncompressed is refused, naming the file and the page,
    /// whether it was fetched or kept in the footer's read.
    #[tokio::test]
    async fn a_page_declaring_too_many_bytes_is_refused_naming_the_file() {
        use super::super::thrift_walk::tests::page_header_bytes;
        let dir = tempfile::tempdir().unwrap();
        let page = |uncompressed: i64| {
            let mut page = page_header_bytes(uncompressed, 10);
            page.extend([9; 10]);
            page
        };
        let small = page(4000);
        for (hint, served_from) in [(0, "fetched"), (DEFAULT_FOOTER_HINT, "kept")] {
            let path = dir.path().join(format!("pages-{served_from}.parquet"));
            let good = small.repeat(2);
            let mut bytes = good.clone();
            bytes.extend(page(i64::from(MAX_PAGE_BYTES) + 1));
            std::fs::write(&path, &bytes).unwrap();
            let mut reader = reader_of(&path, None)
                .await
                .with_footer_hint(hint)
                .reading_pages();
            if hint > 0 {
                // The footer's read keeps the whole (small) file.
                let _ = reader.get_metadata(None).await;
            }
            let ranges = std::iter::once(0..good.len() as u64).collect();
            let got = reader
                .get_byte_ranges(ranges)
                .await
                .expect("two small pages");
            assert_eq!(&got[0][..], &good[..], "{served_from}");
            let err = reader
                .get_byte_ranges(std::iter::once(0..bytes.len() as u64).collect())
                .await
                .expect_err("refused")
                .to_string();
            assert!(
                err.contains(&format!("pages-{served_from}.parquet"))
                    && err.contains(&format!("page at byte {}", good.len()))
                    && err.contains("uncompressed"),
                "{err}"
            );
            // A reader of bytes that are not pages does not walk them.
            let mut raw = reader_of(&path, None).await;
            raw.get_byte_ranges(std::iter::once(0..bytes.len() as u64).collect())
                .await
                .expect("not walked");
        }
    }

    /// Every page of a file parquet wrote walks: a real column chunk is served whole.
    #[tokio::test]
    async fn the_pages_of_a_real_file_walk() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("real.parquet");
        write_parquet(&path, 3, 5000, 1000);
        let mut reader = reader_of(&path, None).await.reading_pages();
        let meta = reader.get_metadata(None).await.unwrap();
        let ranges: Vec<Range<u64>> = meta
            .row_groups()
            .iter()
            .flat_map(|rg| rg.columns())
            .map(|c| {
                let (start, len) = c.byte_range();
                start..start + len
            })
            .collect();
        assert!(ranges.len() >= 15);
        reader.get_byte_ranges(ranges).await.expect("walks");
    }

    async fn open_error(path: &Path, size: Option<u64>) -> String {
        let reader = reader_of(path, size).await;
        match ParquetFile::open_reader(path.to_str().unwrap(), reader).await {
            Ok(_) => panic!("{} opened", path.display()),
            Err(e) => {
                assert!(matches!(e, Error::File { .. }), "{e:?}");
                e.to_string()
            }
        }
    }

    #[tokio::test]
    async fn unreadable_files_give_errors_naming_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let text = dir.path().join("not-parquet.parquet");
        std::fs::write(&text, b"hello, this is not a parquet file at all").unwrap();
        let message = open_error(&text, None).await;
        assert!(message.contains("not-parquet.parquet"), "{message}");

        let tiny = dir.path().join("tiny.parquet");
        std::fs::write(&tiny, b"PAR1").unwrap();
        let message = open_error(&tiny, None).await;
        assert!(message.contains("tiny.parquet"), "{message}");

        // A truncated file, opened with its size before truncation (as a manifest
        // would record it) and with its actual size.
        let good = dir.path().join("truncated.parquet");
        write_parquet(&good, 2, 1000, 1000);
        let full = std::fs::read(&good).unwrap();
        std::fs::write(&good, &full[..full.len() / 2]).unwrap();
        let message = open_error(&good, Some(full.len() as u64)).await;
        assert!(message.contains("truncated.parquet"), "{message}");
        let message = open_error(&good, None).await;
        assert!(message.contains("truncated.parquet"), "{message}");

        // A file that opens but whose data is cut is reported when read.
        let (path, file_len) = (dir.path().join("cut.parquet"), full.len());
        let mut cut = full.clone();
        // Overwrite the first page's bytes (after "PAR1") with garbage.
        for b in &mut cut[4..file_len / 2] {
            *b = 0xff;
        }
        std::fs::write(&path, &cut).unwrap();
        let reader = reader_of(&path, None).await;
        let file = ParquetFile::open_reader(path.to_str().unwrap(), reader)
            .await
            .unwrap();
        let target = [Arc::new(iceberg::spec::NestedField::required(
            1,
            "c0",
            iceberg::spec::Type::Primitive(iceberg::spec::PrimitiveType::Long),
        ))];
        let result: Result<Vec<_>, Error> =
            file.read(&target, None, 1024).unwrap().try_collect().await;
        let message = result.unwrap_err().to_string();
        assert!(message.contains("cut.parquet"), "{message}");
    }
}
