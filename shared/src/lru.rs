//! Dropping the least recently used entries of a store bounded in bytes: what the
//! stores a warm Lambda instance keeps across its invocations (manifests, data file
//! footers) do when they grow past their bound.

use std::collections::HashMap;

/// Removes entries of `entries`, the least recently used first (by `used`, then by
/// key), until `bytes` (their total, kept up to date from `len`) is at most `target`.
pub(crate) fn drop_least_recently_used<V>(
    entries: &mut HashMap<String, V>,
    bytes: &mut usize,
    target: usize,
    used: impl Fn(&V) -> u64,
    len: impl Fn(&V) -> usize,
) {
    if *bytes <= target {
        return;
    }
    let mut by_use: Vec<(u64, String)> = entries
        .iter()
        .map(|(key, entry)| (used(entry), key.clone()))
        .collect();
    by_use.sort_unstable();
    for (_, key) in by_use {
        if *bytes <= target {
            break;
        }
        if let Some(dropped) = entries.remove(&key) {
            *bytes -= len(&dropped);
        }
    }
}
