//! Reading ORC data and delete files by Iceberg field id, under the same rules as
//! Parquet ones ([`crate::columns`] decides which column holds which field).
//!
//! Iceberg writers store each field's id in the ORC type's `iceberg.id` attribute.
//! orc-rust decodes the file but keeps no type attributes, so the footer's types are
//! decoded here too, and checked before orc-rust walks them ([`tail`]); the tail is
//! fetched once, the reader serving orc-rust's footer read from the bytes fetched for
//! it. A DV names row positions whatever the data file's format: a row's position is
//! its ordinal in the file, stripe after stripe.
//!
//! Timestamps are decoded at nanoseconds, as ORC stores them: a table's microsecond
//! timestamp key in an ORC file is then refused as a type eqdv cannot convert exactly,
//! rather than truncated.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use arrow_array::RecordBatch;
use arrow_schema::{DataType, Field, Fields, Schema as ArrowSchema, SchemaRef as ArrowSchemaRef};
use bytes::Bytes;
use futures::future::BoxFuture;
use futures::{FutureExt, Stream, StreamExt};
use iceberg::io::{FileIO, FileRead};
use iceberg::spec::{NameMapping, NestedFieldRef};
use orc_rust::ArrowReaderBuilder;
use orc_rust::projection::ProjectionMask;
use orc_rust::proto;
use orc_rust::reader::AsyncChunkReader;
use parquet::arrow::PARQUET_FIELD_ID_META_KEY;

use crate::columns::{FieldSource, FileColumns, project, target_schema};
use crate::{Error, Result};

/// The attribute Iceberg writers give each ORC type: its field id.
const ICEBERG_ID_ATTRIBUTE: &str = "iceberg.id";

/// Bytes read from the file's end to hold its postscript and footer at once (a second
/// read fetches a longer footer).
const TAIL_HINT: u64 = 64 * 1024;

/// An open ORC file with its footer read.
pub struct OrcFile {
    path: String,
    builder: ArrowReaderBuilder<OrcBytes>,
    columns: FileColumns,
    /// The ORC column index of each top-level column, in the file's order.
    root_columns: Vec<usize>,
    rows: u64,
    fetched: Arc<AtomicU64>,
}

impl OrcFile {
    /// Opens `path` and reads its footer; `file_size` comes from the manifest, which
    /// saves a HEAD request.
    pub async fn open(file_io: &FileIO, path: &str, file_size: Option<u64>) -> Result<Self> {
        let (size, inner) = crate::storage::open_sized(file_io, path, file_size).await?;
        let fetched = Arc::new(AtomicU64::new(0));
        let mut bytes = OrcBytes {
            path: Arc::from(path),
            size,
            inner: Arc::from(inner),
            tail: None,
            fetched: fetched.clone(),
        };
        let footer = bytes.read_footer().await?;
        let builder = AssertUnwindSafe(ArrowReaderBuilder::try_new_async(bytes))
            .catch_unwind()
            .await
            .map_err(|_| reader_panicked(path, "its footer"))?
            .map_err(|e| Error::file(path, "cannot read the ORC file's footer", e))?;
        let root = footer
            .types
            .first()
            .ok_or_else(|| Error::file(path, "ORC footer has no types", "corrupt file"))?;
        let root_columns: Vec<usize> = root.subtypes.iter().map(|&i| i as usize).collect();
        // The Arrow schema orc-rust decodes into, with each type's field id added.
        let decoded = guarded(path, "its schema", || {
            builder
                .file_metadata()
                .root_data_type()
                .create_arrow_schema(&HashMap::new())
        })?;
        if decoded.fields().len() != root_columns.len() {
            return Err(Error::file(
                path,
                "ORC footer's root type and decoded schema differ",
                "corrupt file",
            ));
        }
        let mut has_ids = false;
        let fields: Vec<Field> = decoded
            .fields()
            .iter()
            .zip(&root_columns)
            .map(|(f, &column)| with_ids(f, column, &footer.types, &mut has_ids))
            .collect();
        let schema = Arc::new(ArrowSchema::new(fields));
        let rows = builder.file_metadata().number_of_rows();
        Ok(Self {
            path: path.to_string(),
            builder,
            columns: FileColumns::new(path, "ORC", schema, has_ids),
            root_columns,
            rows,
            fetched,
        })
    }

    /// Resolves a file without field ids through the table's name mapping (as readers
    /// do). Files with field ids ignore the mapping.
    pub fn with_name_mapping(mut self, mapping: Option<&NameMapping>) -> Self {
        self.columns = self.columns.with_name_mapping(mapping);
        self
    }

    /// Which column holds which field.
    pub fn columns(&self) -> &FileColumns {
        &self.columns
    }

    /// The file's stripes.
    pub fn stripes(&self) -> u64 {
        self.builder.file_metadata().stripe_metadatas().len() as u64
    }

    /// The file's rows, as its footer counts them.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// A count of the bytes fetched from storage for this file so far (the footer's,
    /// then each read's as it goes).
    pub fn fetched(&self) -> Arc<AtomicU64> {
        self.fetched.clone()
    }

    /// Streams `(first position, batch)` of every row, with batches of `fields` in the
    /// table's types; fails, naming the file and the field, when a field cannot be read
    /// faithfully (see [`FileColumns::source_of`]).
    pub fn read(
        self,
        fields: &[NestedFieldRef],
        batch_size: usize,
    ) -> Result<impl Stream<Item = Result<(u64, RecordBatch)>> + Send + use<>> {
        let target = target_schema(fields)?;
        self.read_as(fields, target, batch_size)
    }

    /// [`OrcFile::read`], with `target` the [`target_schema`] of `fields`.
    pub fn read_as(
        self,
        fields: &[NestedFieldRef],
        target: ArrowSchemaRef,
        batch_size: usize,
    ) -> Result<impl Stream<Item = Result<(u64, RecordBatch)>> + Send + use<>> {
        let (sources, projected) = self.columns.projection(fields, &target)?;
        // Whole top-level columns: a key nested in a struct reads its struct.
        let mut roots: Vec<usize> = sources
            .iter()
            .filter_map(|s| match s {
                FieldSource::Column { index, .. } => self.root_columns.get(*index).copied(),
                FieldSource::Constant(_) => None,
            })
            .collect();
        roots.sort_unstable();
        roots.dedup();
        let (path, total, builder) = (self.path, self.rows, self.builder);
        let stream = guarded(&path, "its columns", move || {
            let mask = ProjectionMask::roots(builder.file_metadata().root_data_type(), roots);
            builder
                .with_projection(mask)
                .with_batch_size(batch_size.max(1))
                .build_async()
        })?;
        let mut next = 0u64;
        Ok(AssertUnwindSafe(stream).catch_unwind().map(move |batch| {
            let batch = batch
                .map_err(|_| reader_panicked(&path, "its data"))?
                .map_err(|e| Error::file(&path, "cannot decode ORC data", e))?;
            let first = next;
            next += batch.num_rows() as u64;
            if next > total {
                return Err(Error::file(
                    &path,
                    format!("more rows than the footer's {total}"),
                    "corrupt file",
                ));
            }
            let batch = project(&batch, &target, &projected)
                .map_err(|e| Error::file(&path, "cannot project columns to the table schema", e))?;
            Ok((first, batch))
        }))
    }
}

/// orc-rust asserts what a well-formed file holds, so a damaged file can panic it: the
/// panic is caught and reported as the file's error (the stream it was in ends).
fn reader_panicked(path: &str, what: &str) -> Error {
    Error::file(
        path,
        format!("the ORC reader failed on {what}"),
        "corrupt ORC file",
    )
}

/// Runs a step of orc-rust over the file at `path`, its panic turned into the file's
/// error (see [`reader_panicked`]).
fn guarded<T>(path: &str, what: &str, step: impl FnOnce() -> T) -> Result<T> {
    std::panic::catch_unwind(AssertUnwindSafe(step)).map_err(|_| reader_panicked(path, what))
}

/// `field` (decoded from ORC column `column`) with its `iceberg.id` as the field id
/// metadata, and its struct children's, all the way down.
fn with_ids(field: &Field, column: usize, types: &[proto::Type], has_ids: &mut bool) -> Field {
    let Some(orc_type) = types.get(column) else {
        return field.clone();
    };
    let mut field = field.clone();
    if let DataType::Struct(children) = field.data_type()
        && children.len() == orc_type.subtypes.len()
    {
        let children: Fields = children
            .iter()
            .zip(&orc_type.subtypes)
            .map(|(c, &at)| with_ids(c, at as usize, types, has_ids))
            .collect();
        field = field.with_data_type(DataType::Struct(children));
    }
    let id = orc_type
        .attributes
        .iter()
        .find(|a| a.key.as_deref() == Some(ICEBERG_ID_ATTRIBUTE))
        .and_then(|a| a.value.as_deref())
        .and_then(|v| v.parse::<i32>().ok());
    match id {
        Some(id) => {
            *has_ids = true;
            let mut metadata = field.metadata().clone();
            metadata.insert(PARQUET_FIELD_ID_META_KEY.to_string(), id.to_string());
            field.with_metadata(metadata)
        }
        None => field,
    }
}

/// orc-rust's byte source over an Iceberg [`FileRead`] of a file of known size.
struct OrcBytes {
    path: Arc<str>,
    size: u64,
    inner: Arc<dyn FileRead>,
    /// The file's last bytes as read for the footer: `(offset, bytes)`.
    tail: Option<(u64, Bytes)>,
    fetched: Arc<AtomicU64>,
}

impl OrcBytes {
    async fn fetch(&self, offset: u64, length: u64) -> Result<Bytes> {
        let end = offset.checked_add(length).filter(|&end| end <= self.size);
        let Some(end) = end else {
            return Err(Error::file(
                &*self.path,
                format!(
                    "byte range {offset}+{length} outside the file's {} bytes",
                    self.size
                ),
                "corrupt file or wrong file size",
            ));
        };
        let bytes = self.inner.read(offset..end).await.map_err(|e| {
            Error::file(&*self.path, format!("cannot read bytes {offset}..{end}"), e)
        })?;
        if bytes.len() as u64 != length {
            return Err(Error::file(
                &*self.path,
                format!(
                    "read of bytes {offset}..{end} returned {} bytes",
                    bytes.len()
                ),
                "file shorter than its recorded size (truncated?)",
            ));
        }
        self.fetched.fetch_add(length, Ordering::Relaxed);
        Ok(bytes)
    }

    /// Reads the file's tail (kept for orc-rust's own footer read, which it serves)
    /// and decodes and checks its footer (see [`tail`]).
    async fn read_footer(&mut self) -> Result<proto::Footer> {
        let corrupt = |message: String| Error::file(&*self.path, message, "corrupt ORC file");
        if self.size < 4 {
            return Err(corrupt(format!("{} bytes is too short for ORC", self.size)));
        }
        let hint = self.size.min(TAIL_HINT);
        let mut tail = self.fetch(self.size - hint, hint).await?;
        let (needed, postscript) = tail::postscript(&tail).map_err(corrupt)?;
        if needed > self.size {
            return Err(corrupt(format!(
                "a footer of {needed} bytes in a file of {}",
                self.size
            )));
        }
        if needed > tail.len() as u64 {
            tail = self.fetch(self.size - needed, needed).await?;
        }
        // Postscript, its length byte, and the footer before them.
        let footer_end = tail.len() - 1 - usize::from(tail[tail.len() - 1]);
        let footer_len =
            usize::try_from(postscript.footer_length.unwrap_or(0)).unwrap_or(usize::MAX);
        let stored = tail.slice(footer_end.saturating_sub(footer_len)..footer_end);
        self.tail = Some((self.size - tail.len() as u64, tail));
        tail::footer(stored, &postscript).map_err(corrupt)
    }
}

impl AsyncChunkReader for OrcBytes {
    fn len(&mut self) -> BoxFuture<'_, std::io::Result<u64>> {
        let size = self.size;
        async move { Ok(size) }.boxed()
    }

    fn get_bytes(
        &mut self,
        offset_from_start: u64,
        length: u64,
    ) -> BoxFuture<'_, std::io::Result<Bytes>> {
        async move {
            if let Some((at, tail)) = &self.tail {
                let range = offset_from_start..offset_from_start.saturating_add(length);
                if let Some(bytes) = crate::parquet_io::reader::slice_within(*at, tail, &range) {
                    return Ok(bytes);
                }
            }
            self.fetch(offset_from_start, length)
                .await
                .map_err(std::io::Error::other)
        }
        .boxed()
    }
}

mod tail;
#[cfg(test)]
mod tests;
