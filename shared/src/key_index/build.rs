//! Writing runs: the key columns of data files read into index entries, sorted and
//! written as leaves with their covered list; and runs merged into one, entries of data
//! files no longer live dropped with their coverage.

use std::collections::{HashMap, HashSet};

use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt, TryStreamExt};
use iceberg::io::FileIO;
use iceberg::spec::NameMapping;
use roaring::RoaringTreemap;

use super::format::{CoveredFile, CoveredFiles, LeafMeta, RunMeta, write_json};
use super::hash::hash_keys;
use super::leaf::{Entries, read_leaf, write_leaf};
use crate::Result;
use crate::keys::KeyColumns;
use crate::progress::{Progress, ProgressEvent, ProgressStep};
use crate::table::LiveFile;

/// Entries per leaf file by default: 1,048,576 entries are about 10-20 MB.
pub const DEFAULT_LEAF_ENTRIES: usize = 1 << 20;

/// Index entries of one run in the making, with the files they cover.
#[derive(Default)]
pub(super) struct RunEntries {
    pub covered: Vec<CoveredFile>,
    pub hashes: Vec<i64>,
    pub files: Vec<u32>,
    pub positions: Vec<u64>,
}

impl RunEntries {
    /// Adds the entries of `data`, every row of it: `hashes[i]` at `positions[i]`.
    pub fn push_file(
        &mut self,
        data: &LiveFile,
        hashes: &[i64],
        positions: impl IntoIterator<Item = u64>,
    ) {
        let ordinal = self.covered.len() as u32;
        self.covered.push(CoveredFile {
            path: data.path().to_string(),
            file_size_in_bytes: data.file.file_size_in_bytes(),
            record_count: hashes.len() as u64,
            deleted_left_out: 0,
        });
        self.files
            .extend(std::iter::repeat_n(ordinal, hashes.len()));
        self.hashes.extend_from_slice(hashes);
        self.positions.extend(positions);
    }
}

/// What reading data files for the index took.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct ScanRead {
    pub files: u64,
    pub rows: u64,
    pub bytes: u64,
}

/// Reads the key columns of every file of `files` (through the name mapping, as the
/// resolve reads them) into index entries.
pub(super) async fn read_files(
    file_io: &FileIO,
    name_mapping: Option<&NameMapping>,
    key_columns: &KeyColumns,
    files: &[LiveFile],
    (parallelism, progress): (usize, &Progress),
) -> Result<(RunEntries, ScanRead)> {
    let target = crate::parquet_io::target_schema(&key_columns.fields)?;
    progress.reading(
        ProgressStep::IndexBuild,
        files.iter().map(|f| f.file.file_size_in_bytes()),
    );
    // Boxed as `Send` futures: left to inference, the stream's type asks for `Send` for
    // every lifetime of its references, and a conversion stops being `Send`.
    type FileEntries<'a> = (&'a LiveFile, Vec<i64>, Vec<u64>, u64);
    let reads: Vec<BoxFuture<'_, Result<FileEntries<'_>>>> = files
        .iter()
        .map(|data| {
            let target = target.clone();
            async move {
                let opened = crate::file_rows::read_rows(
                    file_io,
                    data.path(),
                    data.file.file_size_in_bytes(),
                    data.file.file_format(),
                    name_mapping,
                    (&key_columns.fields, target),
                    8192,
                )
                .await?;
                let (hashes, positions) = hash_stream(key_columns, opened.rows).await?;
                let bytes = opened.bytes.load(std::sync::atomic::Ordering::Relaxed);
                progress.report(ProgressEvent::Read {
                    step: ProgressStep::IndexBuild,
                    bytes: data.file.file_size_in_bytes(),
                });
                Ok((data, hashes, positions, bytes))
            }
            .boxed()
        })
        .collect();
    // In completion order: `write_run` numbers the files in path order.
    let read: Vec<_> = futures::stream::iter(reads)
        .buffer_unordered(parallelism.max(1))
        .try_collect()
        .await?;
    let mut run = RunEntries::default();
    let mut scan = ScanRead::default();
    for (data, hashes, positions, bytes) in read {
        scan.files += 1;
        scan.rows += hashes.len() as u64;
        scan.bytes += bytes;
        run.push_file(data, &hashes, positions);
    }
    Ok((run, scan))
}

/// The key hash and position of every row of a file's `(first position, batch)` stream.
async fn hash_stream(
    key_columns: &KeyColumns,
    stream: impl futures::Stream<Item = Result<(u64, arrow_array::RecordBatch)>>,
) -> Result<(Vec<i64>, Vec<u64>)> {
    let mut stream = Box::pin(stream);
    let mut hashes = Vec::new();
    let mut positions = Vec::new();
    while let Some((first, batch)) = stream.try_next().await? {
        let before = hashes.len();
        hash_keys(key_columns, batch.columns(), &mut hashes)?;
        positions.extend((0..(hashes.len() - before) as u64).map(|i| first + i));
    }
    Ok((hashes, positions))
}

/// Reads every entry of `runs` into one run, leaving out the data files `keep` refuses
/// (and their coverage) and the entries at positions `deleted` holds for their file
/// (counted in its [`CoveredFile::deleted_left_out`]).
pub(super) async fn read_runs(
    file_io: &FileIO,
    runs: &[(&RunMeta, &CoveredFiles)],
    keep: &(dyn Fn(&str) -> bool + Sync),
    deleted: &HashMap<String, RoaringTreemap>,
    parallelism: usize,
) -> Result<(RunEntries, u64)> {
    // Per run, each of its ordinals' number in the merged run (`None`: left out).
    let mut covered: Vec<CoveredFile> = Vec::new();
    let mut renumber: Vec<Vec<Option<u32>>> = Vec::with_capacity(runs.len());
    for (_, files) in runs {
        renumber.push(
            files
                .files
                .iter()
                .map(|f| {
                    keep(&f.path).then(|| {
                        covered.push(f.clone());
                        (covered.len() - 1) as u32
                    })
                })
                .collect(),
        );
    }
    // By merged ordinal, the positions whose entries are left out.
    let left_out: Vec<Option<&RoaringTreemap>> =
        covered.iter().map(|f| deleted.get(&f.path)).collect();
    let leaves: Vec<(&LeafMeta, &[Option<u32>], &str)> = runs
        .iter()
        .zip(&renumber)
        .flat_map(|((run, _), numbers)| {
            run.leaves
                .iter()
                .map(move |leaf| (leaf, numbers.as_slice(), run.covered_location.as_str()))
        })
        .collect();
    let bytes = leaves.iter().map(|(l, ..)| l.file_size_in_bytes).sum();
    // A leaf's entries, and per merged ordinal how many it left out as deleted.
    type LeafEntries = (Vec<(i64, u32, u64)>, HashMap<u32, u64>);
    let left_out = &left_out;
    let reads: Vec<BoxFuture<'_, Result<LeafEntries>>> = leaves
        .into_iter()
        .map(|(leaf, numbers, list)| {
            async move {
                let mut entries = Vec::with_capacity(leaf.record_count as usize);
                let mut dropped: HashMap<u32, u64> = HashMap::new();
                let mut out_of_list = false;
                read_leaf(file_io, leaf, |hash, file, pos| {
                    match numbers.get(file as usize) {
                        Some(Some(file)) => {
                            if left_out[*file as usize].is_some_and(|d| d.contains(pos)) {
                                *dropped.entry(*file).or_default() += 1;
                            } else {
                                entries.push((hash, *file, pos));
                            }
                        }
                        Some(None) => {}
                        None => out_of_list = true,
                    }
                })
                .await?;
                if out_of_list {
                    return Err(super::format::ordinal_out_of_list(&leaf.location, list));
                }
                Ok((entries, dropped))
            }
            .boxed()
        })
        .collect();
    let read: Vec<LeafEntries> = futures::stream::iter(reads)
        .buffered(parallelism.max(1))
        .try_collect()
        .await?;
    let mut run = RunEntries {
        covered,
        ..Default::default()
    };
    for (entries, dropped) in read {
        for (hash, file, pos) in entries {
            run.hashes.push(hash);
            run.files.push(file);
            run.positions.push(pos);
        }
        for (file, n) in dropped {
            run.covered[file as usize].deleted_left_out += n;
        }
    }
    Ok((run, bytes))
}

/// Leaves of one run encoded and uploaded at once (each holds at most the leaf size's
/// entries encoded, about 12 MB at the default).
const LEAF_WRITES_IN_FLIGHT: usize = 4;

/// Sorts `run` into index order (key hash, then data file path, then position) and
/// writes it: leaves of at most `leaf_entries` entries and its covered list, each file
/// recorded in `written` before it is written.
pub(super) async fn write_run(
    file_io: &FileIO,
    table_location: &str,
    run: RunEntries,
    leaf_entries: usize,
    written: &mut Vec<String>,
) -> Result<RunMeta> {
    let mut run = run;
    number_in_path_order(&mut run);
    let RunEntries {
        covered,
        hashes,
        files,
        positions,
    } = run;
    // Files are numbered in path order, so (hash, file, pos) is the draft spec's order.
    let mut order: Vec<u32> = (0..hashes.len() as u32).collect();
    order.sort_unstable_by_key(|&i| {
        let i = i as usize;
        (hashes[i], files[i], positions[i])
    });
    let hashes: Vec<i64> = order.iter().map(|&i| hashes[i as usize]).collect();
    let files: Vec<u32> = order.iter().map(|&i| files[i as usize]).collect();
    let positions: Vec<u64> = order.iter().map(|&i| positions[i as usize]).collect();
    drop(order);

    // The leaves (a few at once: each is encoded, then uploaded) and the covered list are
    // written at once: a round trip to object storage for a conversion's small run, not
    // one a file, and a build's many leaves upload side by side.
    let chunk = leaf_entries.max(1);
    let slices: Vec<(std::ops::Range<usize>, String)> = (0..hashes.len())
        .step_by(chunk)
        .map(|start| {
            let location =
                crate::storage::new_metadata_file(table_location, "eqdv-key-index-leaf", "parquet");
            (start..(start + chunk).min(hashes.len()), location)
        })
        .collect();
    written.extend(slices.iter().map(|(_, location)| location.clone()));
    let covered_location =
        crate::storage::new_metadata_file(table_location, "eqdv-key-index-files", "json");
    written.push(covered_location.clone());
    let covered_files = covered.len() as u64;
    let covered = CoveredFiles { files: covered };
    // Boxed as `Send` futures (see `read_files`).
    let writes: Vec<BoxFuture<'_, Result<LeafMeta>>> = slices
        .iter()
        .map(|(range, location)| {
            let entries = Entries {
                hashes: &hashes[range.clone()],
                files: &files[range.clone()],
                positions: &positions[range.clone()],
            };
            async move { write_leaf(file_io, location, &entries).await }.boxed()
        })
        .collect();
    let leaf_writes = futures::stream::iter(writes)
        .buffered(LEAF_WRITES_IN_FLIGHT)
        .try_collect::<Vec<LeafMeta>>();
    let covered_write: BoxFuture<'_, Result<u64>> =
        write_json(file_io, &covered_location, &covered).boxed();
    let (leaves, covered_written) = futures::join!(leaf_writes, covered_write);
    let leaves = leaves?;
    covered_written?;
    Ok(RunMeta {
        covered_location,
        covered_files,
        entries: hashes.len() as u64,
        leaves,
    })
}

/// Renumbers the files of `run` so that their numbers follow their paths' order.
fn number_in_path_order(run: &mut RunEntries) {
    let mut order: Vec<usize> = (0..run.covered.len()).collect();
    order.sort_by(|a, b| run.covered[*a].path.cmp(&run.covered[*b].path));
    let mut renumber = vec![0u32; order.len()];
    for (new, &old) in order.iter().enumerate() {
        renumber[old] = new as u32;
    }
    run.covered = order.iter().map(|&i| run.covered[i].clone()).collect();
    for f in &mut run.files {
        *f = renumber[*f as usize];
    }
}

/// The paths of `files`.
pub(super) fn paths_of(files: &[LiveFile]) -> HashSet<&str> {
    files.iter().map(LiveFile::path).collect()
}
