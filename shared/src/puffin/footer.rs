//! Reading Puffin footers: one read of a file's end, bounds-checked before iceberg's
//! reader sees it, and footers read ahead while other work runs.

use std::collections::HashMap;
use std::ops::Range;

use futures::future::{BoxFuture, FutureExt};
use iceberg::io::{FileIO, FileRead};
use iceberg::puffin::{FileMetadata, PuffinReader};

use super::{
    FIRST_BLOB_OFFSET, FOOTER_STRUCT_LEN, MIN_DV_BLOB_LEN, MIN_PUFFIN_LEN, PUFFIN_MAGIC,
    PuffinFooter,
};
use crate::dv::DvError;

/// Footers of Puffin files read ahead, while other work runs: a conversion starts the
/// footer of a data file's existing DV as soon as its scan finds a newly deleted row,
/// so that merging with the old DVs does not wait for another round of reads after the
/// scans. Each file's footer is read once, with at most `parallelism` reads in flight;
/// what is read ahead is checked as any footer is ([`super::validate_dv_entries_prefetched`]).
pub struct FooterPrefetch {
    file_io: FileIO,
    permits: std::sync::Arc<tokio::sync::Semaphore>,
    started: std::sync::Mutex<HashMap<String, tokio::task::JoinHandle<Option<PuffinFooter>>>>,
}

impl FooterPrefetch {
    /// Whether the read started for `location` has ended (for tests that wait on it).
    #[cfg(test)]
    pub(super) fn finished(&self, location: &str) -> bool {
        self.started.lock().expect("not poisoned")[location].is_finished()
    }

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
    pub(super) fn take(&self, location: &str) -> Option<BoxFuture<'static, Option<PuffinFooter>>> {
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
pub(super) async fn read_footer(
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
pub(super) fn blob_range(location: &str, offset: i64, length: i64) -> Result<Range<u64>, DvError> {
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

pub(super) async fn read_range(
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
pub(super) fn to_i64(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}
