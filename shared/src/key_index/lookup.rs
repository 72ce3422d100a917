//! Opening an index and looking keys up in it: which covered data files may hold one of
//! a set of key hashes.

use std::collections::HashMap;
use std::sync::Arc;

use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt, TryStreamExt};
use iceberg::io::FileIO;
use roaring::RoaringTreemap;

use super::format::{CoveredFiles, IndexMetadata, covered_by_path, read_json};
use super::leaf::{ProbeRead, probe_leaf};
use crate::Result;
use crate::parquet_io::FooterCache;
use crate::table::{KeptReads, LiveFile};

/// Covered lists read at once when an index opens.
const LISTS_IN_FLIGHT: usize = 16;

/// An index read: its metadata and what its runs cover.
#[derive(Debug)]
pub struct OpenIndex {
    pub location: String,
    pub metadata: IndexMetadata,
    /// Per run (the metadata's order), the data files it covers.
    pub covered_lists: Vec<CoveredFiles>,
    /// Covered data files by path: `(size, run)`.
    covered: HashMap<String, (u64, usize)>,
    /// Bytes of the metadata and covered lists read to open it (none kept before).
    pub bytes_read: u64,
}

/// Reads the index metadata file at `location` and its runs' covered lists, or takes
/// them from `kept` (a warm process's earlier reads: a run's covered list outlives many
/// index versions).
pub async fn open_index(file_io: &FileIO, kept: &KeptReads, location: &str) -> Result<OpenIndex> {
    let (metadata, metadata_bytes): (IndexMetadata, u64) =
        read_json(file_io, kept, location, "metadata file").await?;
    // Boxed as `Send` futures (see `build::read_files`).
    let reads: Vec<BoxFuture<'_, Result<(CoveredFiles, u64)>>> = metadata
        .runs
        .iter()
        .map(|run| {
            async move {
                let (list, bytes): (CoveredFiles, u64) =
                    read_json(file_io, kept, &run.covered_location, "covered list").await?;
                if list.files.len() as u64 != run.covered_files {
                    return Err(crate::Error::file(
                        &run.covered_location,
                        format!(
                            "covered list holds {} files, its index metadata says {}",
                            list.files.len(),
                            run.covered_files
                        ),
                        "inconsistent key index",
                    ));
                }
                Ok((list, bytes))
            }
            .boxed()
        })
        .collect();
    let lists: Vec<(CoveredFiles, u64)> = futures::stream::iter(reads)
        .buffered(LISTS_IN_FLIGHT)
        .try_collect()
        .await?;
    let bytes_read = metadata_bytes + lists.iter().map(|(_, b)| b).sum::<u64>();
    let covered_lists: Vec<CoveredFiles> = lists.into_iter().map(|(l, _)| l).collect();
    let covered = covered_by_path(location, &covered_lists)?;
    Ok(OpenIndex {
        location: location.to_string(),
        metadata,
        covered_lists,
        covered,
        bytes_read,
    })
}

/// What a lookup found and read.
#[derive(Clone, Debug, Default)]
pub struct IndexHits {
    /// Covered data files holding an entry with one of the hashes looked up, and the
    /// positions of those entries.
    pub named: HashMap<String, RoaringTreemap>,
    /// Distinct hashes looked up.
    pub keys: u64,
    pub leaves_read: u64,
    /// Leaves opened from footers kept by an earlier lookup (no request).
    pub leaves_from_cache: u64,
    pub row_groups_read: u64,
    pub bytes_read: u64,
}

impl OpenIndex {
    /// Whether the index covers `data`: a file of the same path and size.
    pub fn covers(&self, data: &LiveFile) -> bool {
        self.covered
            .get(data.path())
            .is_some_and(|(size, _)| *size == data.file.file_size_in_bytes())
    }

    /// Whether some covered file has rows left out as deleted
    /// ([`super::format::CoveredFile::deleted_left_out`]).
    pub fn leaves_out_deleted_rows(&self) -> bool {
        self.covered_lists
            .iter()
            .flat_map(|l| &l.files)
            .any(|f| f.deleted_left_out > 0)
    }

    /// Whether the index lists `path` at all (of any size).
    pub fn lists(&self, path: &str) -> bool {
        self.covered.contains_key(path)
    }

    /// Covered data files (all runs).
    pub fn covered_files(&self) -> usize {
        self.covered.len()
    }

    /// The covered data files that may hold one of `hashes`: the leaves whose hash range
    /// holds one are probed, `parallelism` at once, their footers kept in `footers` (a
    /// warm process's cache; leaves are never rewritten under their names).
    pub async fn lookup(
        self: &Arc<Self>,
        file_io: &FileIO,
        footers: &FooterCache,
        mut hashes: Vec<i64>,
        parallelism: usize,
    ) -> Result<IndexHits> {
        hashes.sort_unstable();
        hashes.dedup();
        let mut hits = IndexHits {
            keys: hashes.len() as u64,
            ..Default::default()
        };
        let probes: Vec<(&super::format::LeafMeta, usize, &[i64])> = self
            .metadata
            .runs
            .iter()
            .enumerate()
            .flat_map(|(run, meta)| meta.leaves.iter().map(move |leaf| (leaf, run)))
            .filter_map(|(leaf, run)| {
                let from = hashes.partition_point(|h| *h < leaf.min_key_hash);
                let to = hashes.partition_point(|h| *h <= leaf.max_key_hash);
                (from < to).then(|| (leaf, run, &hashes[from..to]))
            })
            .collect();
        type Probed<'a> = (
            &'a super::format::LeafMeta,
            usize,
            HashMap<u32, RoaringTreemap>,
            ProbeRead,
        );
        let reads: Vec<BoxFuture<'_, Result<Probed<'_>>>> = probes
            .into_iter()
            .map(|(leaf, run, probes)| {
                async move {
                    let mut named = HashMap::new();
                    let read = probe_leaf(file_io, footers, leaf, probes, &mut named).await?;
                    Ok((leaf, run, named, read))
                }
                .boxed()
            })
            .collect();
        let results: Vec<_> = futures::stream::iter(reads)
            .buffer_unordered(parallelism.max(1))
            .try_collect()
            .await?;
        for (leaf, run, named, read) in results {
            hits.leaves_read += 1;
            hits.leaves_from_cache += u64::from(read.footer_from_cache);
            hits.row_groups_read += read.row_groups_read;
            hits.bytes_read += read.bytes_read;
            let list = &self.covered_lists[run];
            for (file, positions) in named {
                let Some(covered) = list.files.get(file as usize) else {
                    return Err(super::format::ordinal_out_of_list(
                        &leaf.location,
                        &self.metadata.runs[run].covered_location,
                    ));
                };
                *hits.named.entry(covered.path.clone()).or_default() |= positions;
            }
        }
        Ok(hits)
    }
}
