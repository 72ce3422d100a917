//! The key index's part of a resolve pass: the loaded groups' key hashes looked up in
//! the indexes that serve them (their field set's part of their partition, or every
//! part for a delete that applies to every partition), once per index; what they name
//! decides which covered candidates are read (`scan`): those holding a looked-up hash
//! at a position that no existing DV deletes yet.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use roaring::RoaringTreemap;

use super::ResolveMetrics;
use super::ResolveOptions;
use super::group_keys::GroupKeys;
use crate::key_index::{IndexKey, IndexState, IndexStates, OpenIndex};
use crate::plan::DeleteGroup;
use crate::table::{LiveFile, LoadedTable, TableFiles};

/// What a group's index lookups found: per index that serves it (and read), the
/// covered data files that may hold one of the keys, and the positions of the rows that
/// may (shared by the groups of one index: each index is asked once for the hashes of
/// all of them).
pub(super) struct GroupHits {
    pub(super) parts: Vec<(Arc<OpenIndex>, Arc<NamedRows>)>,
}

/// Per data file, the rows a lookup named.
pub(super) type NamedRows = HashMap<String, RoaringTreemap>;

/// The usable indexes that serve a group ([`IndexKey::serves`]).
pub(super) type IndexesOf<'a> = dyn Fn(&DeleteGroup) -> Vec<(IndexKey, Arc<OpenIndex>)> + Sync + 'a;

impl GroupHits {
    /// For a data file an index of the group covers, the rows that may hold one of the
    /// group's keys (empty: none); `None` when none covers it (the delta: it is read).
    pub(super) fn rows_in(&self, data: &LiveFile) -> Option<RoaringTreemap> {
        self.parts
            .iter()
            .find(|(index, _)| index.covers(data))
            .map(|(_, named)| named.get(data.path()).cloned().unwrap_or_default())
    }

    /// Whether an index of the group covers `data`.
    pub(super) fn covers(&self, data: &LiveFile) -> bool {
        self.parts.iter().any(|(index, _)| index.covers(data))
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
/// all of its groups; per group, what the lookups found. An index that fails to read is
/// bypassed (recorded in `states`) and its groups resolve without it.
pub(super) async fn look_up(
    table: &LoadedTable,
    loaded: &mut [GroupKeys],
    index_of: &IndexesOf<'_>,
    options: &ResolveOptions,
    metrics: &mut ResolveMetrics,
    states: &mut IndexStates,
) -> Vec<Option<GroupHits>> {
    let mut hits: Vec<Option<GroupHits>> = loaded.iter().map(|_| None).collect();
    let mut by_index: BTreeMap<IndexKey, (Arc<OpenIndex>, Vec<usize>)> = BTreeMap::new();
    for (i, group) in loaded.iter().enumerate() {
        for (key, index) in index_of(&group.group) {
            by_index
                .entry(key)
                .or_insert_with(|| (index, Vec::new()))
                .1
                .push(i);
        }
    }
    // A group's hashes, taken once (a group served by several parts asks each).
    let group_hashes: Vec<Vec<i64>> = loaded
        .iter_mut()
        .map(|g| std::mem::take(&mut g.index_hashes))
        .collect();
    for (key, (index, members)) in by_index {
        let hashes: Vec<i64> = members
            .iter()
            .flat_map(|&i| group_hashes[i].iter().copied())
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
                    hits[i]
                        .get_or_insert_with(|| GroupHits { parts: Vec::new() })
                        .parts
                        .push((index.clone(), named.clone()));
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
                    key,
                    IndexState::Bypassed(format!("{}: {e}", index.location)),
                );
            }
        }
    }
    hits
}
