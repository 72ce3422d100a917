//! Reading Parquet files by Iceberg field id, the way every Iceberg reader does.
//!
//! Which column of a file holds a table field is decided in [`crate::columns`] (for
//! Parquet and ORC alike), and every read of a Parquet data or delete file goes through
//! this module, so eqdv's resolver and its own reader follow the same rules (what readers
//! such as Iceberg Java do):
//! - a file with Parquet field ids: columns are found by `PARQUET:field_id`, never by
//!   name, so renamed columns resolve correctly;
//! - a file without any field ids (imported by migrate / add_files, or written by a tool
//!   that is not Iceberg): columns are found through the table's name mapping
//!   (`schema.name-mapping.default`); without one the file cannot be read faithfully and
//!   reading it is an error that names the file and the field;
//! - a field the file lacks (written before the column was added) reads as the field's
//!   `initial-default` (v3), or as null when it has none;
//! - a column stored as a type the table's type was promoted from (int to long, decimal
//!   widening, ...) is cast to the table's type; any other type is an error: eqdv never
//!   compares values it cannot convert exactly (casts are strict, never lossy to null).
//!
//! Positions are the row's ordinal in the file: row-group first row + offset.
//!
//! `stream` reads the batches and `reader` is the byte source under them all; this file
//! opens files and answers questions about their footer.

pub mod footer_cache;
pub mod footer_hint;
#[cfg(test)]
mod nested_tests;
#[cfg(test)]
mod positioned_tests;
pub mod reader;
mod stream;
#[cfg(test)]
mod tests;
mod thrift_walk;

use std::sync::Arc;

use arrow_schema::SchemaRef as ArrowSchemaRef;
use iceberg::io::FileIO;
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions};
use parquet::arrow::async_reader::ParquetRecordBatchStreamBuilder;
use parquet::file::metadata::{PageIndexPolicy, ParquetMetaData, ParquetMetaDataReader};

pub use crate::columns::{
    FieldIdSource, FieldSource, FileColumns, converts_exactly, target_schema,
};
pub use footer_cache::FooterCache;
pub use footer_hint::FooterHint;
pub use stream::row_group_starts;

use crate::{Error, Result};
use reader::FileReader;

/// `future`'s output, or an error naming `path` when it panicked. The Parquet and Arrow
/// readers panic on some corrupt files (an embedded Arrow schema of an unknown type, a
/// dictionary page missing, found by fuzzing): a corrupt file must fail its conversion,
/// not the process. (apache-avro's encoder, under iceberg's manifest writer, panics too.)
pub(crate) async fn unless_panicked<T>(
    path: &str,
    what: &str,
    future: impl std::future::Future<Output = T>,
) -> Result<T> {
    use futures::FutureExt;
    std::panic::AssertUnwindSafe(future)
        .catch_unwind()
        .await
        .map_err(|panic| panicked(path, what, panic.as_ref()))
}

/// `stream`'s items, ending with an error naming `path` if reading panicked (see
/// [`unless_panicked`]).
pub(crate) fn stream_unless_panicked<T>(
    path: String,
    what: &'static str,
    stream: impl futures::Stream<Item = Result<T>> + Send,
) -> impl futures::Stream<Item = Result<T>> + Send {
    use futures::StreamExt;
    std::panic::AssertUnwindSafe(stream)
        .catch_unwind()
        .map(move |item| item.unwrap_or_else(|panic| Err(panicked(&path, what, panic.as_ref()))))
}

fn panicked(path: &str, what: &str, panic: &(dyn std::any::Any + Send)) -> Error {
    let why = panic
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| panic.downcast_ref::<&str>().copied())
        .unwrap_or("no message");
    Error::file(path, what, format!("it panicked: {why}"))
}

/// `metadata` with the file's offset index added (read through `reader`, most often
/// from the footer's read), or as it was when the file has none or it cannot be read:
/// the index only saves bytes, so a read without it is whole column chunks, still right.
async fn with_offset_index(
    path: &str,
    reader: &mut FileReader,
    metadata: ArrowReaderMetadata,
) -> ArrowReaderMetadata {
    if metadata.metadata().offset_index().is_some() {
        return metadata;
    }
    let mut loader = ParquetMetaDataReader::new_with_metadata(metadata.metadata().as_ref().clone())
        .with_column_index_policy(PageIndexPolicy::Skip)
        .with_offset_index_policy(PageIndexPolicy::Optional);
    let load = async {
        reader
            .check_page_indexes(metadata.metadata(), false, true)
            .await?;
        loader.load_page_index(reader::FooterFetch(reader)).await?;
        let m = loader.finish()?;
        ArrowReaderMetadata::try_new(Arc::new(m), ArrowReaderOptions::new())
    };
    let with_index = match unless_panicked(path, "cannot read the offset index", load).await {
        Ok(loaded) => loaded.map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    match with_index {
        Ok(with_index) => with_index,
        Err(e) => {
            tracing::debug!(path, error = %e, "offset index unreadable: reading whole column chunks");
            metadata
        }
    }
}

/// An open Parquet file with its footer read.
pub struct ParquetFile {
    path: String,
    builder: ParquetRecordBatchStreamBuilder<FileReader>,
    /// Which column holds which field.
    columns: FileColumns,
    /// See [`FileReader::footer_read_start`].
    footer_read_start: u64,
    footer_read: FooterRead,
    /// What loading the offset index took (see [`ParquetFile::open_learning`]).
    offset_index_read: FooterRead,
}

/// What reading a file's footer took.
#[derive(Clone, Copy, Debug, Default)]
pub struct FooterRead {
    /// Requests: 1, or 2 when the footer was longer than the bytes read for it.
    pub requests: u64,
    /// Bytes fetched.
    pub bytes: u64,
}

/// A footer just read ([`ParquetFile::read_footer`]).
struct FooterOpened {
    reader: FileReader,
    metadata: ArrowReaderMetadata,
    /// Where the footer's read started, and what it took.
    read_start: u64,
    read: FooterRead,
    /// The length of the footer's metadata (see [`FileReader::footer_len`]).
    metadata_len: Option<u64>,
    /// What a footer cache keeps of the open.
    kept: footer_cache::KeptOpen,
}

impl ParquetFile {
    /// Opens `path` and reads its footer (without page indexes: see
    /// [`reader`]). `file_size` comes from the manifest, which saves a
    /// HEAD request.
    pub async fn open(file_io: &FileIO, path: &str, file_size: Option<u64>) -> Result<Self> {
        let (size, reader) = crate::storage::open_sized(file_io, path, file_size).await?;
        Self::open_reader(path, FileReader::new(path, size, reader)).await
    }

    /// Opens a data file of `size` bytes and `row_groups` row groups (its manifest
    /// entry's split offsets) with the footer read that `hint` has learned from the
    /// table's files opened before, and teaches `hint` this one. A footer the hint's
    /// cache keeps for this file is used without a request; one read is kept there.
    ///
    /// `by_position`: the file will be read at a few known positions
    /// ([`ParquetFile::read_positions_as`]), so its offset index is loaded too (when it
    /// has one) and ranges are coalesced less: only the pages holding those rows are
    /// fetched, not whole column chunks.
    pub async fn open_learning(
        file_io: &FileIO,
        path: &str,
        size: u64,
        row_groups: Option<usize>,
        hint: &FooterHint,
        by_position: bool,
    ) -> Result<Self> {
        let (size, reader) = crate::storage::open_sized(file_io, path, Some(size)).await?;
        let file = if let Some(kept) = hint.cache().get(path, size) {
            // Nothing is read now; what the first open's footer read fetched is held.
            let (reader, read_start) = match kept.tail {
                Some((offset, tail)) => (
                    FileReader::new(path, size, reader).with_tail(offset, tail),
                    offset,
                ),
                None => (FileReader::new(path, size, reader), size),
            };
            (reader, kept.metadata, read_start, FooterRead::default())
        } else {
            let reader = FileReader::new(path, size, reader)
                .with_footer_hint(hint.for_file(size, row_groups));
            let opened = Self::read_footer(path, reader).await?;
            if let Some(footer_len) = opened.metadata_len {
                hint.learn(size, opened.metadata.metadata(), footer_len);
            }
            hint.cache().keep(path, size, opened.kept);
            (
                opened.reader,
                opened.metadata,
                opened.read_start,
                opened.read,
            )
        };
        let (mut reader, mut metadata, read_start, footer_read) = file;
        let mut offset_index_read = FooterRead::default();
        if by_position {
            reader = reader.with_coalesce_gap(reader::POSITIONED_COALESCE_GAP);
            let before = (reader.reads(), reader.footer_bytes());
            metadata = with_offset_index(path, &mut reader, metadata).await;
            offset_index_read = FooterRead {
                requests: reader.reads() - before.0,
                bytes: reader.footer_bytes() - before.1,
            };
        }
        let mut file = Self::assemble(path, reader, metadata, read_start, footer_read);
        file.offset_index_read = offset_index_read;
        Ok(file)
    }

    /// Opens `path` through `reader` (a [`FileReader`] of it) and reads its footer.
    pub async fn open_reader(path: &str, reader: FileReader) -> Result<Self> {
        Ok(Self::open_measured(path, reader).await?.0)
    }

    /// [`Self::open_reader`], the length of the footer's metadata (see
    /// [`FileReader::footer_len`]) and what a [`FooterCache`] keeps of the open.
    async fn open_measured(
        path: &str,
        reader: FileReader,
    ) -> Result<(Self, Option<u64>, footer_cache::KeptOpen)> {
        let opened = Self::read_footer(path, reader).await?;
        Ok((
            Self::assemble(
                path,
                opened.reader,
                opened.metadata,
                opened.read_start,
                opened.read,
            ),
            opened.metadata_len,
            opened.kept,
        ))
    }

    /// Reads the footer through `reader`.
    async fn read_footer(path: &str, mut reader: FileReader) -> Result<FooterOpened> {
        let read_start = reader.footer_read_start();
        let load = ArrowReaderMetadata::load_async(&mut reader, ArrowReaderOptions::new());
        let metadata = unless_panicked(path, "not a readable Parquet file", load)
            .await?
            .map_err(|e| Error::file(path, "not a readable Parquet file", e))?;
        let read = FooterRead {
            requests: reader.reads(),
            bytes: reader.footer_bytes(),
        };
        let metadata_len = reader.footer_len();
        let kept = footer_cache::KeptOpen {
            metadata: metadata.clone(),
            tail: reader.tail(),
        };
        Ok(FooterOpened {
            reader,
            metadata,
            read_start,
            read,
            metadata_len,
            kept,
        })
    }

    /// The open file of `path`, its footer decoded into `metadata` (read from
    /// `footer_read_start` on, taking `footer_read`).
    fn assemble(
        path: &str,
        reader: FileReader,
        metadata: ArrowReaderMetadata,
        footer_read_start: u64,
        footer_read: FooterRead,
    ) -> Self {
        let builder =
            ParquetRecordBatchStreamBuilder::new_with_metadata(reader.reading_pages(), metadata);
        let has_ids = builder
            .metadata()
            .file_metadata()
            .schema_descr()
            .columns()
            .iter()
            .any(|c| c.self_type().get_basic_info().has_id());
        let columns = FileColumns::new(path, "Parquet", builder.schema().clone(), has_ids);
        Self {
            path: path.to_string(),
            builder,
            columns,
            footer_read_start,
            footer_read,
            offset_index_read: FooterRead::default(),
        }
    }

    /// What reading the footer took.
    pub fn footer_read(&self) -> FooterRead {
        self.footer_read
    }

    /// What loading the offset index took (nothing unless opened `by_position`).
    pub fn offset_index_read(&self) -> FooterRead {
        self.offset_index_read
    }

    /// Whether the file's offset index is loaded: a read by position then fetches only
    /// the pages holding its rows.
    pub fn has_offset_index(&self) -> bool {
        self.metadata().offset_index().is_some()
    }

    /// Whether the bytes at `offset` came with the footer's read (a later read of them
    /// costs no request).
    pub fn in_footer_read(&self, offset: i64) -> bool {
        u64::try_from(offset).is_ok_and(|o| o >= self.footer_read_start)
    }

    pub fn path(&self) -> &str {
        &self.path
    }

    pub fn metadata(&self) -> &Arc<ParquetMetaData> {
        self.builder.metadata()
    }

    /// The bloom filter of column `leaf` in `row_group`, if the writer wrote one.
    pub async fn bloom_filter(
        &mut self,
        row_group: usize,
        leaf: usize,
    ) -> Result<Option<parquet::bloom_filter::Sbbf>> {
        self.builder
            .get_row_group_column_bloom_filter(row_group, leaf)
            .await
            .map_err(|e| Error::file(&self.path, "cannot read a bloom filter", e))
    }

    /// The file's Arrow schema (as the Parquet reader sees it).
    pub fn arrow_schema(&self) -> &ArrowSchemaRef {
        self.builder.schema()
    }

    /// Compressed bytes of the given leaf columns over the given row groups: what a
    /// projected read fetches.
    pub fn projected_bytes(&self, leaves: &[usize], row_groups: &[usize]) -> u64 {
        let meta = self.metadata();
        row_groups
            .iter()
            .map(|&rg| {
                leaves
                    .iter()
                    .map(|&c| meta.row_group(rg).column(c).compressed_size().max(0) as u64)
                    .sum::<u64>()
            })
            .sum()
    }

    /// Compressed bytes of the given leaf columns a read of `rows` (positions in the
    /// file) fetches from the given row groups: with an offset index, the pages holding
    /// them (and a dictionary page before); without, whole chunks of groups holding any.
    pub fn positioned_bytes(
        &self,
        leaves: &[usize],
        row_groups: &[usize],
        rows: &roaring::RoaringTreemap,
    ) -> u64 {
        let meta = self.metadata();
        let rg_rows = self.row_group_rows();
        let starts = stream::row_group_starts(&rg_rows);
        let mut bytes = 0;
        for &rg in row_groups {
            let (start, end) = (starts[rg], starts[rg] + rg_rows[rg]);
            if rows.range_cardinality(start..end) == 0 {
                continue;
            }
            for &leaf in leaves {
                let chunk = meta.row_group(rg).column(leaf);
                let pages = meta
                    .offset_index()
                    .and_then(|index| index.get(rg)?.get(leaf))
                    .map(|index| index.page_locations())
                    .filter(|pages| !pages.is_empty());
                let Some(pages) = pages else {
                    bytes += chunk.compressed_size().max(0) as u64;
                    continue;
                };
                let (chunk_start, _) = chunk.byte_range();
                bytes += (pages[0].offset.max(0) as u64).saturating_sub(chunk_start);
                for (i, page) in pages.iter().enumerate() {
                    let first = start + page.first_row_index.max(0) as u64;
                    let last = pages
                        .get(i + 1)
                        .map_or(end, |next| start + next.first_row_index.max(0) as u64);
                    if rows.range_cardinality(first..last) > 0 {
                        bytes += page.compressed_page_size.max(0) as u64;
                    }
                }
            }
        }
        bytes
    }

    /// Rows per row group, in file order.
    pub fn row_group_rows(&self) -> Vec<u64> {
        self.metadata()
            .row_groups()
            .iter()
            .map(|rg| rg.num_rows().max(0) as u64)
            .collect()
    }

    /// The Parquet leaf column index holding field `field_id` (top-level or nested in
    /// structs), if the file has it.
    pub fn leaf_index(&self, field_id: i32) -> Option<usize> {
        // Keys are primitive columns under structs only: their Parquet path is their
        // Arrow names', which we find through the Parquet schema descriptor.
        let names = self.columns.names_of(field_id)?;
        let descr = self.metadata().file_metadata().schema_descr();
        (0..descr.num_columns()).find(|&i| {
            let column = descr.column(i);
            let parts = column.path().parts();
            parts.len() == names.len() && parts.iter().zip(&names).all(|(p, n)| p == n)
        })
    }

    /// Resolves a file without field ids through the table's name mapping (as readers
    /// do). Files with field ids ignore the mapping.
    pub fn with_name_mapping(mut self, mapping: Option<&iceberg::spec::NameMapping>) -> Self {
        self.columns = self.columns.with_name_mapping(mapping);
        self
    }

    /// Which column holds which field.
    pub fn columns(&self) -> &FileColumns {
        &self.columns
    }

    /// How the file's columns were given field ids.
    pub fn id_source(&self) -> FieldIdSource {
        self.columns.id_source()
    }

    /// See [`FileColumns::field_by_id`].
    pub fn field_by_id(&self, field_id: i32) -> Option<&arrow_schema::Field> {
        self.columns.field_by_id(field_id)
    }

    /// See [`FileColumns::source_of`].
    pub fn source_of(&self, field: &iceberg::spec::NestedField) -> Result<FieldSource> {
        self.columns.source_of(field)
    }

    /// Whether the file holds field `field_id` (top-level or nested in structs).
    pub fn has_field(&self, field_id: i32) -> bool {
        self.columns.names_of(field_id).is_some()
    }
}
