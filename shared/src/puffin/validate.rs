//! The checks a reader makes before it trusts a DV (the Puffin footer, the blob's
//! length, magic, CRC and cardinality, the data file it names), made on every DV eqdv
//! merges with or verifies.

use std::collections::{HashMap, HashSet};

use futures::future::{BoxFuture, FutureExt};
use futures::{StreamExt, TryStreamExt};
use iceberg::io::FileIO;
use iceberg::puffin::{BlobMetadata, CompressionCodec};
use roaring::RoaringTreemap;

use super::footer::{FooterPrefetch, blob_range, read_footer, read_range};
use super::{CARDINALITY_PROPERTY, DvEntryCheck, PuffinFooter, REFERENCED_DATA_FILE_PROPERTY};
use crate::dv::{DV_BLOB_TYPE, DvError, deserialize_dv};

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

/// The checks of [`validate_dv_entry`] against a footer already read (with
/// [`super::read_puffin_footer`]); a blob within the bytes read with the footer is not read
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

#[cfg(test)]
mod prefetch_tests {
    use roaring::RoaringTreemap;

    use super::*;
    use crate::puffin::{DvBlobInput, DvEntryCheck, WrittenPuffin, write_dv_puffin};

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
            if prefetch.finished(location) {
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
