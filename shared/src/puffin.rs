//! Puffin files that hold deletion vectors, with the exact blob offsets manifests need.
//!
//! A DV manifest entry points into a Puffin file by (content_offset,
//! content_size_in_bytes); readers trust those numbers, so a wrong one silently
//! un-deletes or mis-deletes rows. This module writes DV Puffin files with iceberg's
//! [`PuffinWriter`], then reads the footer back and refuses to report offsets the footer
//! does not confirm. It must never hand out an offset it has not checked, and
//! [`validate_dv_entry`] makes the same checks a reader makes before any DV is trusted.
//! [`WrittenPuffin::dv_entry`] builds the manifest entry from those checked numbers.

use std::collections::{HashMap, HashSet};
use std::ops::Range;

use futures::future::{BoxFuture, FutureExt};
use futures::{StreamExt, TryStreamExt};
use iceberg::io::{FileIO, FileRead};
use iceberg::puffin::{
    Blob, BlobMetadata, CREATED_BY_PROPERTY, CompressionCodec, FileMetadata, PuffinReader,
    PuffinWriter,
};
use iceberg::spec::{DataContentType, DataFile, DataFileBuilder, DataFileFormat, Struct};
use roaring::RoaringTreemap;

use crate::dv::{DV_BLOB_TYPE, DvError, deserialize_dv, serialize_dv};

/// Field id of the `_pos` metadata column, the field a DV is computed for.
pub const POS_FIELD_ID: i32 = 2_147_483_645;
/// Blob property naming the data file a DV applies to.
pub const REFERENCED_DATA_FILE_PROPERTY: &str = "referenced-data-file";
/// Blob property holding the DV's cardinality in decimal.
pub const CARDINALITY_PROPERTY: &str = "cardinality";

const PUFFIN_MAGIC: [u8; 4] = *b"PFA1";
/// The header magic; the first blob starts right after it.
const FIRST_BLOB_OFFSET: u64 = 4;
/// Footer tail: u32 LE payload length, 4 flag bytes, magic.
const FOOTER_STRUCT_LEN: u64 = 12;
/// Smallest possible Puffin file: header magic, footer magic, empty payload, tail.
const MIN_PUFFIN_LEN: u64 = 4 + 4 + FOOTER_STRUCT_LEN;
/// Length field + magic + CRC around every DV vector.
const MIN_DV_BLOB_LEN: i64 = 12;

/// One DV to write: the data file it applies to and its deleted positions.
#[derive(Debug, Clone)]
pub struct DvBlobInput {
    pub referenced_data_file: String,
    pub positions: RoaringTreemap,
}

/// Where one DV landed, as its manifest entry must record it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WrittenDv {
    pub referenced_data_file: String,
    pub content_offset: i64,
    pub content_size_in_bytes: i64,
    pub cardinality: u64,
}

/// A written Puffin file and its DVs, in input order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WrittenPuffin {
    pub location: String,
    pub file_size_in_bytes: u64,
    pub dvs: Vec<WrittenDv>,
}

impl WrittenPuffin {
    /// The manifest entry of `dv`, one of this file's DVs, in `partition` of spec
    /// `spec_id`: the entry points into this file at the offset and length written.
    pub fn dv_entry(
        &self,
        dv: &WrittenDv,
        spec_id: i32,
        partition: Struct,
    ) -> crate::Result<DataFile> {
        DataFileBuilder::default()
            .content(DataContentType::PositionDeletes)
            .file_path(self.location.clone())
            .file_format(DataFileFormat::Puffin)
            .partition(partition)
            .partition_spec_id(spec_id)
            .record_count(dv.cardinality)
            .file_size_in_bytes(self.file_size_in_bytes)
            .referenced_data_file(Some(dv.referenced_data_file.clone()))
            .content_offset(Some(dv.content_offset))
            .content_size_in_bytes(Some(dv.content_size_in_bytes))
            .build()
            .map_err(|e| crate::Error::InvalidInput(format!("building DV entry: {e}")))
    }
}

/// A DV manifest entry to check against the Puffin file it points into.
#[derive(Debug, Clone, Copy)]
pub struct DvEntryCheck<'a> {
    pub puffin_location: &'a str,
    pub referenced_data_file: &'a str,
    pub content_offset: i64,
    pub content_size_in_bytes: i64,
    pub record_count: u64,
    pub file_size_in_bytes: u64,
}

/// The footer of a Puffin file and the file's size.
#[derive(Debug, Clone)]
pub struct PuffinFooter {
    pub file_size_in_bytes: u64,
    pub metadata: FileMetadata,
    /// The file's last bytes, read with the footer, from offset `tail_start`: for the
    /// small files a streaming conversion writes, every blob too.
    tail: bytes::Bytes,
    tail_start: u64,
}

impl PuffinFooter {
    /// The bytes of `range` if the footer's read already holds them.
    fn cached(&self, range: &Range<u64>) -> Option<bytes::Bytes> {
        let start = range.start.checked_sub(self.tail_start)?;
        let end = range.end.checked_sub(self.tail_start)?;
        (end <= self.tail.len() as u64 && start <= end)
            .then(|| self.tail.slice(start as usize..end as usize))
    }
}

/// Writes `dvs` into a new Puffin file at `location` (the caller picks a fresh name;
/// an existing file would be overwritten) and returns each DV's offset and length:
/// [`encode_dv_puffin`], then [`EncodedPuffin::upload`].
///
/// Rejects empty DVs and two DVs for the same data file before writing anything.
pub async fn write_dv_puffin(
    file_io: &FileIO,
    location: &str,
    dvs: &[DvBlobInput],
) -> Result<WrittenPuffin, DvError> {
    let encoded = encode_dv_puffin(location, dvs).await?;
    encoded.upload(file_io).await?;
    Ok(encoded.written)
}

/// A Puffin file of DVs encoded in memory, and where each of its DVs lies: enough for
/// the manifest entries, so a conversion writes its manifests while the file uploads.
#[derive(Debug, Clone)]
pub struct EncodedPuffin {
    pub written: WrittenPuffin,
    bytes: bytes::Bytes,
}

impl EncodedPuffin {
    /// Uploads the file to its location in one request.
    pub async fn upload(&self, file_io: &FileIO) -> Result<(), DvError> {
        let location = &self.written.location;
        let io_err = |source| DvError::Io {
            location: location.clone(),
            source: Box::new(source),
        };
        file_io
            .new_output(location)
            .map_err(io_err)?
            .write(self.bytes.clone())
            .await
            .map_err(io_err)
    }
}

/// Encodes `dvs` as the Puffin file to be written at `location`, in memory (nothing is
/// written to storage), and checks its layout against its own footer.
///
/// Rejects empty DVs and two DVs for the same data file.
pub async fn encode_dv_puffin(
    location: &str,
    dvs: &[DvBlobInput],
) -> Result<EncodedPuffin, DvError> {
    let mut seen = HashSet::new();
    let mut blobs = Vec::with_capacity(dvs.len());
    let mut written = Vec::with_capacity(dvs.len());
    let mut offset = FIRST_BLOB_OFFSET;
    for dv in dvs {
        let file = &dv.referenced_data_file;
        if dv.positions.is_empty() {
            return Err(DvError::EmptyDv {
                referenced_data_file: file.clone(),
            });
        }
        if !seen.insert(file.as_str()) {
            return Err(DvError::DuplicateDataFile {
                referenced_data_file: file.clone(),
            });
        }
        let data = serialize_dv(&dv.positions).map_err(|e| DvError::ForDataFile {
            referenced_data_file: file.clone(),
            source: Box::new(e),
        })?;
        let length = data.len() as u64;
        let cardinality = dv.positions.len();
        written.push(WrittenDv {
            referenced_data_file: file.clone(),
            content_offset: to_i64(offset),
            content_size_in_bytes: to_i64(length),
            cardinality,
        });
        offset += length;
        blobs.push(
            Blob::builder()
                .r#type(DV_BLOB_TYPE.to_string())
                .fields(vec![POS_FIELD_ID])
                .snapshot_id(-1)
                .sequence_number(-1)
                .data(data)
                .properties(HashMap::from([
                    (REFERENCED_DATA_FILE_PROPERTY.to_string(), file.clone()),
                    (CARDINALITY_PROPERTY.to_string(), cardinality.to_string()),
                ]))
                .build(),
        );
    }

    let io_err = |source| DvError::Io {
        location: location.to_string(),
        source: Box::new(source),
    };
    // iceberg's PuffinWriter writes to a FileIO: a memory one, keyed by the real
    // location so that any error names it.
    let memory = FileIO::new_with_memory();
    let output = memory.new_output(location).map_err(io_err)?;
    let properties = HashMap::from([(
        CREATED_BY_PROPERTY.to_string(),
        format!("eqdv {}", env!("CARGO_PKG_VERSION")),
    )]);
    let mut writer = PuffinWriter::new(&output, properties, false)
        .await
        .map_err(io_err)?;
    for blob in blobs {
        writer
            .add(blob, CompressionCodec::None)
            .await
            .map_err(io_err)?;
    }
    writer.close().await.map_err(io_err)?;

    // PuffinWriter reports no offsets: ours assume blobs back to back from offset 4,
    // uncompressed. Confirm against the footer, read as any reader will read it.
    let bytes = memory
        .new_input(location)
        .map_err(io_err)?
        .read()
        .await
        .map_err(io_err)?;
    let footer = read_puffin_footer(&memory, location).await?;
    let blob_metas = footer.metadata.blobs();
    if blob_metas.len() != written.len() {
        return Err(DvError::InvalidPuffin {
            location: location.to_string(),
            reason: format!(
                "footer lists {} blobs after writing, expected {}",
                blob_metas.len(),
                written.len()
            ),
            source: None,
        });
    }
    for (index, (meta, dv)) in blob_metas.iter().zip(&written).enumerate() {
        let expected_offset = dv.content_offset as u64;
        let expected_length = dv.content_size_in_bytes as u64;
        if meta.offset() != expected_offset || meta.length() != expected_length {
            return Err(DvError::UnexpectedLayout {
                location: location.to_string(),
                index,
                expected_offset,
                expected_length,
                found_offset: meta.offset(),
                found_length: meta.length(),
            });
        }
    }
    Ok(EncodedPuffin {
        written: WrittenPuffin {
            location: location.to_string(),
            file_size_in_bytes: footer.file_size_in_bytes,
            dvs: written,
        },
        bytes,
    })
}

/// Reads one DV blob with a single range read (no footer) and decodes it.
pub async fn read_dv(
    file_io: &FileIO,
    location: &str,
    content_offset: i64,
    content_size_in_bytes: i64,
) -> Result<RoaringTreemap, DvError> {
    let range = blob_range(location, content_offset, content_size_in_bytes)?;
    let bytes = read_range(file_io, location, range).await?;
    decode_blob(location, content_offset, content_size_in_bytes, &bytes)
}

fn decode_blob(
    location: &str,
    content_offset: i64,
    content_size_in_bytes: i64,
    bytes: &[u8],
) -> Result<RoaringTreemap, DvError> {
    deserialize_dv(bytes).map_err(|e| DvError::InBlob {
        location: location.to_string(),
        offset: content_offset,
        length: content_size_in_bytes,
        source: Box::new(e),
    })
}

/// Checks a DV manifest entry against its Puffin file the way a reader does, and
/// returns the decoded positions.
///
/// Checks, each with its own error: file size; a footer blob at exactly (offset,
/// length), of type `deletion-vector-v1`, uncompressed, whose referenced-data-file is
/// the entry's and whose cardinality property is record_count; then the blob's length
/// field, magic and CRC; and the bitmap's cardinality equals record_count.
pub async fn validate_dv_entry(
    file_io: &FileIO,
    check: &DvEntryCheck<'_>,
) -> Result<RoaringTreemap, DvError> {
    // A range no DV can have is refused before any read.
    blob_range(
        check.puffin_location,
        check.content_offset,
        check.content_size_in_bytes,
    )?;
    let footer = read_footer(
        file_io,
        check.puffin_location,
        Some(check.file_size_in_bytes),
    )
    .await?;
    validate_dv_in(file_io, check, &footer).await
}

/// [`validate_dv_entry`] for many entries: each Puffin file's footer is read once (a
/// conversion's DVs share one file), and the footers, then the blobs, are read with
/// up to `parallelism` requests in flight. Results come in the order of `checks`, and
/// so does the first error.
pub async fn validate_dv_entries(
    file_io: &FileIO,
    checks: &[DvEntryCheck<'_>],
    parallelism: usize,
) -> Result<Vec<RoaringTreemap>, DvError> {
    validate_dv_entries_prefetched(file_io, checks, parallelism, None).await
}

/// [`validate_dv_entries`], taking the footers `prefetched` already read (or is
/// reading) instead of reading them again; a footer it failed to read is read here, so
/// its error is this call's.
pub async fn validate_dv_entries_prefetched(
    file_io: &FileIO,
    checks: &[DvEntryCheck<'_>],
    parallelism: usize,
    prefetched: Option<&FooterPrefetch>,
) -> Result<Vec<RoaringTreemap>, DvError> {
    let parallelism = parallelism.max(1);
    // Puffin files in the order of their first entry, each with the size the first of
    // its entries expects (a later entry that expects another size fails below).
    let mut locations: Vec<(&str, u64)> = Vec::new();
    let mut seen = HashSet::new();
    for check in checks {
        if seen.insert(check.puffin_location) {
            locations.push((check.puffin_location, check.file_size_in_bytes));
        }
    }
    // Boxed as `Send` futures: left to inference, the stream's type asks for `Send` for
    // every lifetime of its references, and the conversion stops being `Send`.
    let reads: Vec<BoxFuture<'_, Result<PuffinFooter, DvError>>> = locations
        .iter()
        .map(|&(location, size)| {
            let early = prefetched.and_then(|p| p.take(location));
            async move {
                if let Some(early) = early
                    && let Some(footer) = early.await
                {
                    return Ok(footer);
                }
                read_footer(file_io, location, Some(size)).await
            }
            .boxed()
        })
        .collect();
    let footers: Vec<PuffinFooter> = futures::stream::iter(reads)
        .buffered(parallelism)
        .try_collect()
        .await?;
    let footer_of: HashMap<&str, &PuffinFooter> = locations
        .iter()
        .map(|&(location, _)| location)
        .zip(&footers)
        .collect();
    let reads: Vec<BoxFuture<'_, Result<RoaringTreemap, DvError>>> = checks
        .iter()
        .map(|check| {
            let footer = footer_of[check.puffin_location];
            async move {
                if footer.file_size_in_bytes != check.file_size_in_bytes {
                    return Err(DvError::FileSizeMismatch {
                        location: check.puffin_location.to_string(),
                        expected: check.file_size_in_bytes,
                        found: footer.file_size_in_bytes,
                    });
                }
                validate_dv_in(file_io, check, footer).await
            }
            .boxed()
        })
        .collect();
    futures::stream::iter(reads)
        .buffered(parallelism)
        .try_collect()
        .await
}

/// Footers of Puffin files read ahead, while other work runs: a conversion starts the
/// footer of a data file's existing DV as soon as its scan finds a newly deleted row,
/// so that merging with the old DVs does not wait for another round of reads after the
/// scans. Each file's footer is read once, with at most `parallelism` reads in flight;
/// what is read ahead is checked as any footer is ([`validate_dv_entries_prefetched`]).
pub struct FooterPrefetch {
    file_io: FileIO,
    permits: std::sync::Arc<tokio::sync::Semaphore>,
    started: std::sync::Mutex<HashMap<String, tokio::task::JoinHandle<Option<PuffinFooter>>>>,
}

impl FooterPrefetch {
    pub fn new(file_io: FileIO, parallelism: usize) -> Self {
        Self {
            file_io,
            permits: std::sync::Arc::new(tokio::sync::Semaphore::new(parallelism.max(1))),
            started: std::sync::Mutex::new(HashMap::new()),
        }
    }

    /// Starts reading the footer of the Puffin file at `location`, expected to be
    /// `size` bytes long, unless it was started before. Must run inside a Tokio runtime.
    pub fn start(&self, location: &str, size: u64) {
        let Ok(mut started) = self.started.lock() else {
            return;
        };
        if started.contains_key(location) {
            return;
        }
        let (file_io, permits) = (self.file_io.clone(), self.permits.clone());
        let owned = location.to_string();
        let read = tokio::spawn(async move {
            let _permit = permits.acquire_owned().await.ok()?;
            // A failed read is read again by the caller, whose error it then reports.
            read_footer(&file_io, &owned, Some(size)).await.ok()
        });
        started.insert(location.to_string(), read);
    }

    /// The read started for `location`, if any: it yields the footer, or `None` when
    /// the read failed.
    fn take(&self, location: &str) -> Option<BoxFuture<'static, Option<PuffinFooter>>> {
        let read = self.started.lock().ok()?.remove(location)?;
        Some(async move { read.await.ok().flatten() }.boxed())
    }

    /// Footer reads started and not taken (a file whose new DV came to nothing).
    pub fn pending(&self) -> usize {
        self.started.lock().map(|s| s.len()).unwrap_or(0)
    }
}

impl Drop for FooterPrefetch {
    fn drop(&mut self) {
        // Reads nobody will take stop with the conversion that started them.
        if let Ok(started) = self.started.get_mut() {
            for read in started.values() {
                read.abort();
            }
        }
    }
}

/// The checks of [`validate_dv_entry`] against a footer already read (with
/// [`read_puffin_footer`]); a blob within the bytes read with the footer is not read
/// again.
pub async fn validate_dv_in(
    file_io: &FileIO,
    check: &DvEntryCheck<'_>,
    footer: &PuffinFooter,
) -> Result<RoaringTreemap, DvError> {
    let location = check.puffin_location;
    let offset = check.content_offset;
    let range = blob_range(location, offset, check.content_size_in_bytes)?;
    let blobs = footer.metadata.blobs();
    let Some(meta) = blobs.iter().find(|b| b.offset() == range.start) else {
        return Err(DvError::BlobNotFound {
            location: location.to_string(),
            offset,
            available: blobs.iter().map(|b| (b.offset(), b.length())).collect(),
        });
    };
    check_blob_metadata(check, meta)?;

    // A blob the footer's read already holds costs no request.
    let length = check.content_size_in_bytes;
    let positions = match footer.cached(&range) {
        Some(bytes) => decode_blob(location, offset, length, &bytes)?,
        None => read_dv(file_io, location, offset, length).await?,
    };
    if positions.len() != check.record_count {
        return Err(DvError::CardinalityMismatch {
            location: location.to_string(),
            offset,
            what: "bitmap cardinality",
            expected: check.record_count,
            found: positions.len(),
        });
    }
    Ok(positions)
}

fn check_blob_metadata(check: &DvEntryCheck<'_>, meta: &BlobMetadata) -> Result<(), DvError> {
    let location = check.puffin_location.to_string();
    let offset = check.content_offset;
    if meta.length() != check.content_size_in_bytes as u64 {
        return Err(DvError::BlobLengthMismatch {
            location,
            offset,
            expected: check.content_size_in_bytes,
            found: meta.length(),
        });
    }
    if meta.blob_type() != DV_BLOB_TYPE {
        return Err(DvError::WrongBlobType {
            location,
            offset,
            found: meta.blob_type().to_string(),
        });
    }
    if meta.compression_codec() != CompressionCodec::None {
        return Err(DvError::CompressedBlob {
            location,
            offset,
            found: meta.compression_codec().name().to_string(),
        });
    }
    let referenced = meta.properties().get(REFERENCED_DATA_FILE_PROPERTY);
    if referenced.map(String::as_str) != Some(check.referenced_data_file) {
        return Err(DvError::ReferencedFileMismatch {
            location,
            offset,
            expected: check.referenced_data_file.to_string(),
            found: referenced.cloned(),
        });
    }
    let property = meta.properties().get(CARDINALITY_PROPERTY);
    let Some(cardinality) = property.and_then(|c| c.parse::<u64>().ok()) else {
        return Err(DvError::InvalidCardinalityProperty {
            location,
            offset,
            found: property.cloned(),
        });
    };
    if cardinality != check.record_count {
        return Err(DvError::CardinalityMismatch {
            location,
            offset,
            what: "cardinality property",
            expected: check.record_count,
            found: cardinality,
        });
    }
    Ok(())
}

/// Reads a Puffin file's footer and size.
///
/// The footer tail is checked here first: iceberg's reader subtracts lengths taken
/// from the file without bounds checks, so a truncated or corrupt file could panic it.
pub async fn read_puffin_footer(file_io: &FileIO, location: &str) -> Result<PuffinFooter, DvError> {
    read_footer(file_io, location, None).await
}

/// Bytes read from a Puffin file's end in one request: the whole footer of up to a few
/// hundred DVs, and the whole of the small files a streaming conversion writes.
const FOOTER_READ_LEN: u64 = 64 * 1024;

/// [`read_puffin_footer`], failing first on a size other than `expected_size`: a
/// truncated file is better reported as such than as a broken footer.
///
/// One round trip when the size is expected (the size and the file's last
/// [`FOOTER_READ_LEN`] bytes are asked for at once), two otherwise, where iceberg's
/// reader makes seven one after another; a larger file, or a longer footer, costs a
/// read more. A footer with flags set (a compressed payload) goes through iceberg's
/// reader, which decodes or refuses them.
async fn read_footer(
    file_io: &FileIO,
    location: &str,
    expected_size: Option<u64>,
) -> Result<PuffinFooter, DvError> {
    let invalid = |reason: String, source: Option<Box<iceberg::Error>>| DvError::InvalidPuffin {
        location: location.to_string(),
        reason,
        source,
    };
    let io_err = |source| DvError::Io {
        location: location.to_string(),
        source: Box::new(source),
    };
    let input = file_io.new_input(location).map_err(io_err)?;
    let tail_start = |size: u64| size.saturating_sub(FOOTER_READ_LEN);
    let (size, early_tail) = match expected_size {
        Some(expected) if expected >= MIN_PUFFIN_LEN => {
            let (metadata, tail) = futures::join!(
                input.metadata(),
                read_range(file_io, location, tail_start(expected)..expected)
            );
            (metadata.map_err(io_err)?.size, Some(tail))
        }
        _ => (input.metadata().await.map_err(io_err)?.size, None),
    };
    if let Some(expected) = expected_size
        && expected != size
    {
        return Err(DvError::FileSizeMismatch {
            location: location.to_string(),
            expected,
            found: size,
        });
    }
    if size < MIN_PUFFIN_LEN {
        return Err(invalid(
            format!("{size} bytes, expected at least {MIN_PUFFIN_LEN}"),
            None,
        ));
    }
    // The size is as expected, so an early read is of this file's end.
    let start = tail_start(size);
    let tail = match early_tail {
        Some(tail) => tail?,
        None => read_range(file_io, location, start..size).await?,
    };
    let Some(&[l0, l1, l2, l3, f0, f1, f2, f3, m0, m1, m2, m3]) = tail.last_chunk::<12>() else {
        return Err(invalid(
            format!("footer tail is {} bytes, expected 12", tail.len()),
            None,
        ));
    };
    let magic = [m0, m1, m2, m3];
    if magic != PUFFIN_MAGIC {
        return Err(invalid(
            format!("trailing magic is {magic:02X?}, expected {PUFFIN_MAGIC:02X?}"),
            None,
        ));
    }
    let payload_len = u64::from(u32::from_le_bytes([l0, l1, l2, l3]));
    let footer_len = 4 + payload_len + FOOTER_STRUCT_LEN;
    if FIRST_BLOB_OFFSET + footer_len > size {
        return Err(invalid(
            format!("footer payload length {payload_len} does not fit in a {size}-byte file"),
            None,
        ));
    }
    let footer_start = size - footer_len;
    let metadata = if [f0, f1, f2, f3] != [0; 4] {
        PuffinReader::new(input)
            .file_metadata()
            .await
            .map_err(|e| invalid("cannot read the footer".to_string(), Some(Box::new(e))))?
            .clone()
    } else {
        let footer = if footer_start >= start {
            tail.slice((footer_start - start) as usize..)
        } else {
            read_range(file_io, location, footer_start..size).await?
        };
        let header = if start == 0 {
            tail.slice(..4)
        } else {
            read_range(file_io, location, 0..4).await?
        };
        for (what, bytes) in [("header", &header[..]), ("footer", &footer[..4])] {
            if bytes != PUFFIN_MAGIC {
                return Err(invalid(
                    format!("{what} magic is {bytes:02X?}, expected {PUFFIN_MAGIC:02X?}"),
                    None,
                ));
            }
        }
        let payload = &footer[4..4 + payload_len as usize];
        serde_json::from_slice::<FileMetadata>(payload).map_err(|e| {
            let e = iceberg::Error::new(
                iceberg::ErrorKind::DataInvalid,
                "footer payload is not valid JSON",
            )
            .with_source(e);
            invalid("cannot read the footer".to_string(), Some(Box::new(e)))
        })?
    };
    // A blob must lie between the header magic and the footer.
    for blob in metadata.blobs() {
        let end = blob.offset().checked_add(blob.length());
        if blob.offset() < FIRST_BLOB_OFFSET || end.is_none_or(|end| end > footer_start) {
            return Err(invalid(
                format!(
                    "blob at offset {} with length {} lies outside the blob area [4, {footer_start})",
                    blob.offset(),
                    blob.length()
                ),
                None,
            ));
        }
    }
    Ok(PuffinFooter {
        file_size_in_bytes: size,
        metadata,
        tail,
        tail_start: start,
    })
}

/// The byte range of a blob, rejecting offsets and lengths no DV can have.
fn blob_range(location: &str, offset: i64, length: i64) -> Result<Range<u64>, DvError> {
    let invalid = || DvError::InvalidRange {
        location: location.to_string(),
        offset,
        length,
    };
    if offset < FIRST_BLOB_OFFSET as i64 || length < MIN_DV_BLOB_LEN {
        return Err(invalid());
    }
    let end = offset.checked_add(length).ok_or_else(invalid)?;
    Ok(offset as u64..end as u64)
}

async fn read_range(
    file_io: &FileIO,
    location: &str,
    range: Range<u64>,
) -> Result<bytes::Bytes, DvError> {
    let io_err = |source| DvError::Io {
        location: location.to_string(),
        source: Box::new(source),
    };
    let reader = file_io
        .new_input(location)
        .map_err(io_err)?
        .reader()
        .await
        .map_err(io_err)?;
    let expected = range.end - range.start;
    let bytes = reader.read(range.clone()).await.map_err(io_err)?;
    // Some stores return a short read past the end instead of failing.
    if bytes.len() as u64 != expected {
        return Err(DvError::InvalidPuffin {
            location: location.to_string(),
            reason: format!(
                "reading bytes [{}, {}) returned {} bytes, expected {expected}",
                range.start,
                range.end,
                bytes.len()
            ),
            source: None,
        });
    }
    Ok(bytes)
}

/// Offsets and lengths of files we write fit i64 (files are far below 8 EiB).
fn to_i64(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod prefetch_tests {
    use super::*;

    fn dvs() -> Vec<DvBlobInput> {
        ["a", "b"]
            .iter()
            .enumerate()
            .map(|(i, name)| DvBlobInput {
                referenced_data_file: format!("s3://bucket/t/data/{name}.parquet"),
                positions: (0..100 * (i as u64 + 1)).step_by(3).collect(),
            })
            .collect()
    }

    fn checks(written: &WrittenPuffin) -> Vec<DvEntryCheck<'_>> {
        written
            .dvs
            .iter()
            .map(|dv| DvEntryCheck {
                puffin_location: &written.location,
                referenced_data_file: &dv.referenced_data_file,
                content_offset: dv.content_offset,
                content_size_in_bytes: dv.content_size_in_bytes,
                record_count: dv.cardinality,
                file_size_in_bytes: written.file_size_in_bytes,
            })
            .collect()
    }

    /// Waits for the read started for `location` to end, without taking it.
    async fn settle(prefetch: &FooterPrefetch, location: &str) {
        loop {
            let done = prefetch.started.lock().unwrap()[location].is_finished();
            if done {
                return;
            }
            tokio::task::yield_now().await;
        }
    }

    /// A footer read ahead is the one the check uses: the file may be gone by then (its
    /// small blobs came with the footer). A read ahead that failed is read again, and a
    /// file that cannot be read is the check's error, naming it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn footers_read_ahead_are_used_and_failed_ones_read_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("0001-dv.puffin");
        let location = format!("file://{}", path.display());
        let file_io = FileIO::new_with_fs();
        let dvs = dvs();
        let written = write_dv_puffin(&file_io, &location, &dvs).await.unwrap();
        let expected: Vec<RoaringTreemap> = dvs.iter().map(|d| d.positions.clone()).collect();

        let prefetch = FooterPrefetch::new(file_io.clone(), 4);
        prefetch.start(&location, written.file_size_in_bytes);
        prefetch.start(&location, written.file_size_in_bytes);
        assert_eq!(prefetch.pending(), 1, "a file's footer is read once");
        settle(&prefetch, &location).await;
        std::fs::rename(&path, dir.path().join("moved")).unwrap();
        let read = validate_dv_entries_prefetched(&file_io, &checks(&written), 4, Some(&prefetch))
            .await
            .unwrap();
        assert_eq!(read, expected);
        assert_eq!(prefetch.pending(), 0);

        // Read ahead while the file is away: that read fails, the check reads it again.
        let prefetch = FooterPrefetch::new(file_io.clone(), 4);
        prefetch.start(&location, written.file_size_in_bytes);
        settle(&prefetch, &location).await;
        std::fs::rename(dir.path().join("moved"), &path).unwrap();
        let read = validate_dv_entries_prefetched(&file_io, &checks(&written), 4, Some(&prefetch))
            .await
            .unwrap();
        assert_eq!(read, expected);

        // Away for good: the error is the check's own, naming the file.
        std::fs::remove_file(&path).unwrap();
        let prefetch = FooterPrefetch::new(file_io.clone(), 4);
        prefetch.start(&location, written.file_size_in_bytes);
        let err = validate_dv_entries_prefetched(&file_io, &checks(&written), 4, Some(&prefetch))
            .await
            .unwrap_err();
        assert!(
            matches!(&err, DvError::Io { location: l, .. } if *l == location),
            "{err:?}"
        );
    }
}
