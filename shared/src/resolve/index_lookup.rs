//! The key index's part of a resolve pass: the loaded groups' key hashes looked up in
//! their field set's index, once per index; what it names decides which covered
//! candidates are read (`scan`): those holding a looked-up hash at a position that no
//! existing DV deletes yet.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use roaring::RoaringTreemap;

use super::ResolveMetrics;
use super::ResolveOptions;
use super::key_set::GroupKeys;
use crate::key_index::{IndexState, IndexStates, OpenIndex};
use crate::plan::DeleteGroup;
use crate::table::{LiveFile, LoadedTable, TableFiles};

/// What a group's index lookup found.
pub(super) struct GroupHits {
    pub(super) index: Arc<OpenIndex>,
    /// Covered data files that may hold one of the keys, and the positions of the rows
    /// that may (shared by the groups of one index: each index is asked once for the
    /// hashes of all of them).
    pub(super) named: Arc<HashMap<String, RoaringTreemap>>,
}

impl GroupHits {
    /// For a data file the index covers, the rows that may hold one of the group's keys
    /// (empty: none); `None` when the index does not cover it (the delta: it is read).
    pub(super) fn rows_in(&self, data: &LiveFile) -> Option<RoaringTreemap> {
        self.index
            .covers(data)
            .then(|| self.named.get(data.path()).cloned().unwrap_or_default())
    }
}

/// Of the covered candidates the index named (`rows`: per data file, the rows that may
/// hold a key), those whose every such row an existing DV already deletes: a deleted
/// row stays deleted, so they cannot add a position and need not be read. A streaming
/// table's hot keys name many files whose rows of them earlier conversions deleted.
///
/// The DVs are those of the snapshot being resolved (`files`), read and checked as a
/// merge reads them; the ones read are returned by the location and offset of their
/// blob, for the merge to reuse. A DV that fails to read rules nothing out here (the
/// file is read, and a merge that needs the DV reports the error).
pub(super) async fn already_deleted(
    table: &LoadedTable,
    files: &TableFiles,
    rows: &[(&LiveFile, RoaringTreemap)],
    options: &ResolveOptions,
    metrics: &mut ResolveMetrics,
) -> (HashSet<String>, ExistingDvs) {
    let mut checks = Vec::new();
    let mut checked = Vec::new();
    for (data, named) in rows {
        // An entry without its blob's place rules nothing out (the merge reports it).
        let Some(Ok(check)) = crate::current_dv::applicable(files, data) else {
            continue;
        };
        checked.push((data.path(), named, crate::current_dv::blob_key(&check)));
        checks.push(check);
    }
    let mut pruned = HashSet::new();
    let mut existing = ExistingDvs::new();
    if checks.is_empty() {
        return (pruned, existing);
    }
    let read =
        crate::puffin::validate_dv_entries(&table.file_io, &checks, options.parallelism).await;
    let dvs = match read {
        Ok(dvs) => dvs,
        Err(e) => {
            tracing::warn!(
                table = %table.name,
                error = %e,
                "an existing DV cannot be read; the files the key index named are read"
            );
            return (pruned, existing);
        }
    };
    metrics.index_dvs_read += dvs.len() as u64;
    for ((path, named, blob), dv) in checked.into_iter().zip(dvs) {
        if named.is_subset(&dv) {
            pruned.insert(path.to_string());
        }
        existing.insert(blob, dv);
    }
    (pruned, existing)
}

/// DVs a resolve read, by the location and offset of their blob.
pub type ExistingDvs = HashMap<(String, i64), RoaringTreemap>;

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
            .lookup(
                &table.file_io,
                &options.footer_cache,
                hashes,
                options.parallelism,
            )
            .await
        {
            Ok(found) => {
                metrics.index_lookups += found.keys;
                metrics.index_leaves_read += found.leaves_read;
                metrics.index_leaves_from_cache += found.leaves_from_cache;
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
