//! A data or delete file's rows, in the table's types, whatever its format: the one
//! entry point for readers that take a file whole (the key index's build, v2 position
//! deletes, the reference reader) and need not know Parquet from ORC.

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef as ArrowSchemaRef;
use futures::StreamExt;
use futures::stream::BoxStream;
use iceberg::io::FileIO;
use iceberg::spec::{DataFileFormat, NameMapping, NestedFieldRef};

use crate::columns::{FileColumns, key_name};
use crate::orc_io::OrcFile;
use crate::parquet_io::ParquetFile;
use crate::{Error, Result};

/// `(first position, batch)` of every row of a file, in order.
pub type FileRows = BoxStream<'static, Result<(u64, RecordBatch)>>;

/// A file's rows and the bytes its read fetches, once read.
pub struct OpenRows {
    pub rows: FileRows,
    /// Which of the file's columns holds which field.
    pub columns: FileColumns,
    /// Bytes of the key columns' chunks (Parquet), or fetched so far (ORC: the count
    /// grows as `rows` is read).
    pub bytes: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

/// Opens the `format` file at `path` (`size` bytes, from its manifest entry) and streams
/// `fields` of every row in `target`'s types (their [`crate::columns::target_schema`],
/// which a caller reading many files builds once), columns resolved by field id or
/// through `name_mapping` (see [`crate::columns`]). Formats other than Parquet and ORC
/// are an error naming the file.
pub async fn read_rows(
    file_io: &FileIO,
    path: &str,
    size: u64,
    format: DataFileFormat,
    name_mapping: Option<&NameMapping>,
    (fields, target): (&[NestedFieldRef], ArrowSchemaRef),
    batch_size: usize,
) -> Result<OpenRows> {
    match format {
        DataFileFormat::Parquet => {
            let file = ParquetFile::open(file_io, path, Some(size))
                .await?
                .with_name_mapping(name_mapping);
            // A nested key is read through its struct: its leaf is the key's column.
            let leaves: Vec<usize> = fields
                .iter()
                .filter_map(|f| file.leaf_index(key_name(f).1))
                .collect();
            let all: Vec<usize> = (0..file.row_group_rows().len()).collect();
            let bytes = file.projected_bytes(&leaves, &all);
            Ok(OpenRows {
                columns: file.columns().clone(),
                rows: file.read_as(fields, target, None, batch_size)?.boxed(),
                bytes: std::sync::Arc::new(bytes.into()),
            })
        }
        DataFileFormat::Orc => {
            let file = OrcFile::open(file_io, path, Some(size))
                .await?
                .with_name_mapping(name_mapping);
            let bytes = file.fetched();
            Ok(OpenRows {
                columns: file.columns().clone(),
                rows: file.read_as(fields, target, batch_size)?.boxed(),
                bytes,
            })
        }
        other => Err(Error::file(
            path,
            format!("the file is {other:?}; eqdv reads Parquet and ORC data files"),
            "unsupported file format",
        )),
    }
}
