//! File locations and I/O helpers shared by the readers and writers: every file eqdv
//! writes gets a fresh UUID name under the table location, so nothing existing is ever
//! overwritten; reads go as many at once as [`DEFAULT_PARALLELISM`] says by default.

use iceberg::io::FileIO;
use uuid::Uuid;

use crate::{Error, Result};

/// Reads in flight by default: through 20 ms to the first byte, 64 in flight convert a
/// table of 1,000 files several times faster than 4 (BENCHMARKS.md, "Through S3
/// latency"). Not more: at 10-50 ms a request, 64 in flight ask S3 for about 1,300 to
/// 6,400 GETs a second, around the 5,500 a second it serves one prefix before it
/// answers 503 SlowDown.
pub const DEFAULT_PARALLELISM: usize = 64;

/// A new, unique location under `<table>/metadata/`.
pub fn new_metadata_file(table_location: &str, stem: &str, extension: &str) -> String {
    format!(
        "{}/metadata/{stem}-{}.{extension}",
        table_location.trim_end_matches('/'),
        Uuid::new_v4()
    )
}

/// A new, unique location under `<table>/data/` (optionally in a partition directory).
pub fn new_data_file(
    table_location: &str,
    partition_dir: Option<&str>,
    stem: &str,
    extension: &str,
) -> String {
    let base = table_location.trim_end_matches('/');
    match partition_dir {
        Some(dir) if !dir.is_empty() => {
            format!("{base}/data/{dir}/{stem}-{}.{extension}", Uuid::new_v4())
        }
        _ => format!("{base}/data/{stem}-{}.{extension}", Uuid::new_v4()),
    }
}

/// Deletes files written by a failed attempt. Best effort: a file that cannot be removed
/// is logged (it is an orphan that `cleanup` finds later), never an error that would
/// hide the original failure.
///
/// The removals run at once (up to [`DELETES_IN_FLIGHT`]): each is a round trip to
/// object storage, and a split's fan-in removes one result per range.
///
/// Only files in the table's own `data/` and `metadata/` directories under
/// `table_location` are removed: a path outside them (see
/// [`crate::location::check_confined`]) is refused with an error log and left alone,
/// whatever named it.
pub async fn delete_files(file_io: &FileIO, table_location: &str, paths: &[String]) {
    use futures::StreamExt as _;
    let confined =
        paths.iter().filter(
            |path| match crate::location::check_confined(table_location, path) {
                Ok(()) => true,
                Err(e) => {
                    tracing::error!(path = %path, table_location, error = %e, "not deleted");
                    false
                }
            },
        );
    futures::stream::iter(confined)
        .for_each_concurrent(DELETES_IN_FLIGHT, |path| async move {
            if let Err(e) = file_io.delete(path).await {
                tracing::warn!(path = %path, error = %e, "could not delete a file written by a failed attempt");
            }
        })
        .await;
}

/// Removals [`delete_files`] has in flight at most.
pub const DELETES_IN_FLIGHT: usize = 32;

/// A reader of the data or delete file at `path`, and its size (`file_size` from its
/// manifest entry, or asked of storage).
pub async fn open_sized(
    file_io: &FileIO,
    path: &str,
    file_size: Option<u64>,
) -> Result<(u64, Box<dyn iceberg::io::FileRead>)> {
    let input = file_io.new_input(path)?;
    let size = match file_size {
        Some(size) => size,
        None => {
            input
                .metadata()
                .await
                .map_err(|e| Error::file(path, "cannot stat data file (missing?)", e))?
                .size
        }
    };
    let reader = input
        .reader()
        .await
        .map_err(|e| Error::file(path, "cannot open data file (missing?)", e))?;
    Ok((size, reader))
}

/// Reads a whole file, naming it in the error.
pub async fn read_all(file_io: &FileIO, path: &str) -> Result<bytes::Bytes> {
    let input = file_io.new_input(path)?;
    input
        .read()
        .await
        .map_err(|e| crate::Error::file(path, "cannot read", e))
}

/// The size of the ranged reads [`read_all_sized`] splits a larger file into. On S3 one
/// connection's bandwidth, not its latency, bounds a large read (a 14 MB manifest takes
/// about 0.17 s at 80 MB/s), and a few connections at once divide that.
pub const PARALLEL_READ_CHUNK: u64 = 4 << 20;

/// Reads the whole file at `path`, recorded as `length` bytes long (a manifest's length
/// is in the manifest list): above `chunk` bytes, in ranged reads of `chunk` bytes at
/// once while its size is looked up. A file of another size than recorded, or a ranged
/// read that fails, is read whole instead: a wrong recorded length must never truncate
/// what is read, and [`read_all`] names the file in its error.
pub async fn read_all_sized(
    file_io: &FileIO,
    path: &str,
    length: u64,
    chunk: u64,
) -> Result<bytes::Bytes> {
    if chunk == 0 || length <= chunk {
        return read_all(file_io, path).await;
    }
    match read_in_ranges(file_io, path, length, chunk).await {
        Some(bytes) => Ok(bytes),
        None => {
            tracing::debug!(
                path,
                length,
                "ranged reads did not give the recorded length; reading whole"
            );
            read_all(file_io, path).await
        }
    }
}

/// The file at `path` in ranged reads of `chunk` bytes at once, if it is `length` bytes
/// long and every read succeeds.
async fn read_in_ranges(
    file_io: &FileIO,
    path: &str,
    length: u64,
    chunk: u64,
) -> Option<bytes::Bytes> {
    let input = file_io.new_input(path).ok()?;
    let reader = input.reader().await.ok()?;
    let starts = (0..length).step_by(usize::try_from(chunk.max(1)).unwrap_or(usize::MAX));
    let reads = futures::future::join_all(starts.map(|start| {
        let (reader, range) = (&reader, start..(start + chunk).min(length));
        async move {
            let wanted = range.end - range.start;
            reader
                .read(range)
                .await
                .ok()
                .filter(|bytes| bytes.len() as u64 == wanted)
        }
    }));
    let (parts, metadata) = futures::join!(reads, input.metadata());
    if metadata.ok()?.size != length {
        return None;
    }
    let mut bytes = bytes::BytesMut::with_capacity(usize::try_from(length).unwrap_or(0));
    for part in parts {
        bytes.extend_from_slice(&part?);
    }
    Some(bytes.freeze())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_sized_read_in_ranges_gives_the_whole_file_whatever_length_is_recorded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("manifest.avro");
        let content: Vec<u8> = (0..10_000u32).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(&path, &content).unwrap();
        let (file_io, path) = (FileIO::new_with_fs(), path.to_string_lossy().to_string());
        // In ten ranged reads, in one, and with a recorded length shorter or longer than
        // the file's (read whole: never truncated).
        for (length, chunk) in [
            (10_000, 1_000),
            (10_000, 3_333),
            (10_000, 0),
            (9_000, 1_000),
            (12_000, 1_000),
        ] {
            let read = read_all_sized(&file_io, &path, length, chunk)
                .await
                .unwrap();
            assert_eq!(
                read.as_ref(),
                content.as_slice(),
                "length {length}, chunk {chunk}"
            );
        }
        // The ranged reads themselves: the file when its length is right, else nothing.
        for chunk in [1_000, 3_333, 9_999] {
            let ranged = read_in_ranges(&file_io, &path, 10_000, chunk).await;
            assert_eq!(ranged.as_deref(), Some(content.as_slice()), "chunk {chunk}");
        }
        for length in [9_000, 12_000] {
            assert_eq!(read_in_ranges(&file_io, &path, length, 1_000).await, None);
        }
        let missing = format!("{path}.gone");
        let e = read_all_sized(&file_io, &missing, 10_000, 1_000)
            .await
            .unwrap_err();
        assert!(e.to_string().contains(&missing), "{e}");
    }
}
