//! The key index's part of a resolve pass: the loaded groups' key hashes looked up in
//! their field set's index, once per index; what it names decides which covered
//! candidates are read (`scan`).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::ResolveMetrics;
use super::ResolveOptions;
use super::key_set::GroupKeys;
use crate::key_index::{IndexState, IndexStates, OpenIndex};
use crate::plan::DeleteGroup;
use crate::table::LoadedTable;

/// What a group's index lookup found.
pub(super) struct GroupHits {
    pub(super) index: Arc<OpenIndex>,
    /// Covered data files that may hold one of the keys (shared by the groups of one
    /// index: each index is asked once for the hashes of all of them).
    pub(super) named: Arc<HashSet<String>>,
}

/// Looks up the keys of the groups that have a usable index, one lookup per index for
/// all of its groups; per group, what the lookup found. An index that fails to read is
/// bypassed (recorded in `states`) and its groups resolve without it.
pub(super) async fn look_up(
    table: &LoadedTable,
    loaded: &mut [GroupKeys],
    index_of: &(dyn Fn(&DeleteGroup) -> Option<Arc<OpenIndex>> + Sync),
    options: &ResolveOptions,
    metrics: &mut ResolveMetrics,
    states: &mut IndexStates,
) -> Vec<Option<GroupHits>> {
    let mut hits: Vec<Option<GroupHits>> = loaded.iter().map(|_| None).collect();
    let mut by_index: HashMap<Vec<i32>, Vec<usize>> = HashMap::new();
    for (i, group) in loaded.iter().enumerate() {
        if index_of(&group.group).is_some() {
            by_index
                .entry(group.group.equality_ids.clone())
                .or_default()
                .push(i);
        }
    }
    for (ids, members) in by_index {
        let Some(index) = index_of(&loaded[members[0]].group) else {
            continue;
        };
        let hashes: Vec<i64> = members
            .iter()
            .flat_map(|&i| std::mem::take(&mut loaded[i].index_hashes))
            .collect();
        match index
            .lookup(&table.file_io, hashes, options.parallelism)
            .await
        {
            Ok(found) => {
                metrics.index_lookups += found.keys;
                metrics.index_leaves_read += found.leaves_read;
                metrics.index_row_groups_read += found.row_groups_read;
                metrics.index_bytes_read += found.bytes_read;
                let named = Arc::new(found.named);
                for &i in &members {
                    hits[i] = Some(GroupHits {
                        index: index.clone(),
                        named: named.clone(),
                    });
                }
            }
            Err(e) => {
                tracing::warn!(
                    table = %table.name,
                    index = %index.location,
                    error = %e,
                    "the key index cannot be read; resolving without it"
                );
                metrics.index_bypassed += 1;
                states.insert(
                    ids,
                    IndexState::Bypassed(format!("{}: {e}", index.location)),
                );
            }
        }
    }
    hits
}
