//! File locations and I/O helpers shared by the writers: every file eqdv writes gets a
//! fresh UUID name under the table location, so nothing existing is ever overwritten.

use iceberg::io::FileIO;
use uuid::Uuid;

use crate::Result;

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
pub async fn delete_files(file_io: &FileIO, paths: &[String]) {
    use futures::StreamExt as _;
    futures::stream::iter(paths)
        .for_each_concurrent(DELETES_IN_FLIGHT, |path| async move {
            if let Err(e) = file_io.delete(path).await {
                tracing::warn!(path = %path, error = %e, "could not delete a file written by a failed attempt");
            }
        })
        .await;
}

/// Removals [`delete_files`] has in flight at most.
pub const DELETES_IN_FLIGHT: usize = 32;

/// Reads a whole file, naming it in the error.
pub async fn read_all(file_io: &FileIO, path: &str) -> Result<bytes::Bytes> {
    let input = file_io.new_input(path)?;
    input
        .read()
        .await
        .map_err(|e| crate::Error::file(path, "cannot read", e))
}
