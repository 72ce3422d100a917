//! Keeping the key index up to date as part of a conversion (see
//! [`crate::key_index::update_index`]): within a time budget, never failing the
//! conversion for it.

use std::collections::HashMap;
use std::time::Instant;

use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};

use super::ConvertOptions;
use crate::Error;
use crate::key_index::{IndexKey, IndexStates, IndexUpdate, part_of_file, update_index};
use crate::resolve::ScannedKeys;
use crate::table::{LiveFile, LoadedTable, TableFiles};

/// Parts of an index updated at once.
const PARTS_IN_FLIGHT: usize = 4;

/// Brings the key index of each group's equality field set up to date with `files` (see
/// [`crate::key_index::update_index`]), when the key index is on for the table (after a
/// resolve that read `read_in_vain` data files holding none of the keys; the key hashes
/// its scan took of whole files are used instead of reading them again); the files
/// written are recorded in `attempt_files`. An index that cannot be updated is
/// logged and left as it is: the conversion never depends on it.
pub(crate) async fn keep_key_indexes(
    table: &LoadedTable,
    files: &TableFiles,
    (states, scanned): &(IndexStates, ScannedKeys),
    options: &ConvertOptions,
    read_in_vain: u64,
    attempt_files: &mut Vec<String>,
) -> Vec<IndexUpdate> {
    let settings = options.resolve.key_index.for_table(table);
    if !settings.enabled() {
        return Vec::new();
    }
    // Whether an index (every part of it) is built where there is none: decided for
    // the conversion as a whole, whose resolve read `read_in_vain` files in vain.
    let builds = settings.builds(files.data_files.len() as u64, read_in_vain);
    let parts = settings.parts(table);
    let mut part_files: HashMap<String, Vec<LiveFile>> = HashMap::new();
    for data in &files.data_files {
        part_files
            .entry(part_of_file(&table.metadata, parts, data))
            .or_default()
            .push(data.clone());
    }
    let no_files = Vec::new();
    let mut keys: Vec<&IndexKey> = states.keys().collect();
    keys.sort();
    // The upkeep may take at most half the time left before the deadline: the commit
    // needs the rest, and a conversion must never miss its deadline for the index.
    let budget = options.deadline.map(|deadline| {
        let now = Instant::now();
        now + deadline.saturating_duration_since(now) / 2
    });
    let settings = &settings;
    type PartUpdate<'a> = (
        &'a IndexKey,
        crate::Result<Option<IndexUpdate>>,
        Vec<String>,
    );
    // Boxed as `Send` futures (see `key_index::build::read_files`).
    let updates: Vec<BoxFuture<'_, PartUpdate<'_>>> = keys.into_iter().filter_map(|key| {
        if states[key].serves_another_branch(&options.branch) {
            // Rebuilt by its own branch's next conversion, not taken over by this one.
            tracing::info!(table = %table.name, index = %key.describe(), branch = %options.branch, "the key index serves another branch; left as it is");
            return None;
        }
        let files_of_part = part_files.get(&key.part).unwrap_or(&no_files);
        Some(async move {
            let mut written = Vec::new();
            let update = update_index(
                table,
                files,
                (key, parts, files_of_part),
                &states[key],
                scanned.get(&key.equality_ids),
                (settings, &options.branch),
                (options.resolve.parallelism, builds, &options.resolve.progress),
                &mut written,
            );
            let result = match budget {
                Some(budget) => tokio::time::timeout_at(budget.into(), update)
                    .await
                    .unwrap_or_else(|_| {
                        Err(Error::DeadlineExceeded {
                            table: table.name.to_string(),
                            phase: "updating the key index (half the time left)".into(),
                        })
                    }),
                None => update.await,
            };
            (key, result, written)
        }.boxed())
    }).collect();
    // The parts of a partitioned table's index update side by side (each a few round
    // trips of writes), in key order.
    let results: Vec<_> = futures::stream::iter(updates)
        .buffered(PARTS_IN_FLIGHT)
        .collect()
        .await;
    let mut kept = Vec::new();
    for (key, result, written) in results {
        match result {
            Ok(Some(update)) => {
                attempt_files.extend(written);
                kept.push(update);
            }
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(table = %table.name, index = %key.describe(), error = %e, "cannot update the key index; converting without updating it");
                crate::storage::delete_files(&table.file_io, table.location(), &written).await;
            }
        }
    }
    kept
}
