//! Keeping the key index up to date as part of a conversion (see
//! [`crate::key_index::update_index`]): within a time budget, never failing the
//! conversion for it.

use std::time::Instant;

use super::ConvertOptions;
use crate::Error;
use crate::key_index::{IndexStates, IndexUpdate, update_index};
use crate::resolve::ScannedKeys;
use crate::table::{LoadedTable, TableFiles};

/// Brings the key index of each group's equality field set up to date with `files` (see
/// [`crate::key_index::update_index`]), when the key index is on for the table (after a
/// resolve that read `read_in_vain` data files holding none of the keys; the key hashes
/// its scan took of whole files are used instead of reading them again); the files
/// written are recorded in `attempt_files`. An index that cannot be updated is
/// logged and left as it is: the conversion never depends on it.
pub(super) async fn keep_key_indexes(
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
    let mut ids: Vec<&Vec<i32>> = states.keys().collect();
    ids.sort();
    // The upkeep may take at most half the time left before the deadline: the commit
    // needs the rest, and a conversion must never miss its deadline for the index.
    let budget = options.deadline.map(|deadline| {
        let now = Instant::now();
        now + deadline.saturating_duration_since(now) / 2
    });
    let mut updates = Vec::new();
    for ids in ids {
        if states[ids].serves_another_branch(&options.branch) {
            // Rebuilt by its own branch's next conversion, not taken over by this one.
            tracing::info!(table = %table.name, equality_ids = ?ids, branch = %options.branch, "the key index serves another branch; left as it is");
            continue;
        }
        let mut written = Vec::new();
        let update = update_index(
            table,
            files,
            ids,
            &states[ids],
            scanned.get(ids),
            (&settings, &options.branch),
            (options.resolve.parallelism, read_in_vain),
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
        match result {
            Ok(Some(update)) => {
                attempt_files.extend(written);
                updates.push(update);
            }
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(table = %table.name, equality_ids = ?ids, error = %e, "cannot update the key index; converting without updating it");
                crate::storage::delete_files(&table.file_io, &written).await;
            }
        }
    }
    updates
}
