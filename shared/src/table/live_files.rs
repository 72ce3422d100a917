//! The live files of a snapshot, read from its manifests with their inherited data
//! sequence numbers and split by what they are (data, equality deletes, DVs, v2
//! position deletes); the read skips what a [`DataScope`] rules out.

use std::collections::HashMap;
use std::sync::Arc;

use futures::{FutureExt, StreamExt};
use iceberg::spec::{
    DataContentType, DataFile, DataFileFormat, ManifestContentType, ManifestEntry, ManifestFile,
    ManifestList, ManifestStatus, SnapshotRef,
};

use super::DataScope;
use super::LoadedTable;
use crate::data_range::{DataRange, RangeLayout};
use crate::manifest_decode::{EntryHead, KeptEntries};
use crate::{Error, Result};

/// One live file of a snapshot with the values a reader inherits for it.
#[derive(Clone, Debug)]
pub struct LiveFile {
    pub file: DataFile,
    pub spec_id: i32,
    /// The data sequence number (what the delete rules compare).
    pub data_sequence_number: i64,
    pub file_sequence_number: i64,
    /// The snapshot that added the file.
    pub snapshot_id: i64,
    /// The manifest that lists it (so a commit knows which manifests to rewrite).
    pub manifest_path: String,
}

impl LiveFile {
    pub fn path(&self) -> &str {
        self.file.file_path()
    }

    /// Row groups in the file, from its split offsets (one per row group), when the
    /// writer recorded them.
    pub fn row_groups(&self) -> Option<usize> {
        self.file
            .split_offsets()
            .filter(|offsets| !offsets.is_empty())
            .map(<[i64]>::len)
    }

    /// Identity of a delete file entry: DVs share a Puffin file, so the offset is part of it.
    pub fn entry_key(&self) -> FileEntryKey {
        FileEntryKey {
            path: self.file.file_path().to_string(),
            content_offset: self.file.content_offset(),
        }
    }
}

/// Identifies one manifest entry: a file path plus, for DVs, the blob's offset.
#[derive(
    Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub struct FileEntryKey {
    pub path: String,
    pub content_offset: Option<i64>,
}

/// The live files of one snapshot.
#[derive(Clone, Debug, Default)]
pub struct TableFiles {
    /// The snapshot these files belong to (`None` for an empty table).
    pub snapshot_id: Option<i64>,
    /// Every manifest of the snapshot's manifest list.
    pub manifests: Vec<ManifestFile>,
    /// The live data files, or with [`TableFiles::read_scoped`] those in scope.
    pub data_files: Vec<LiveFile>,
    pub equality_deletes: Vec<LiveFile>,
    /// Deletion vectors by the data file they reference.
    pub dvs: HashMap<String, LiveFile>,
    /// v2 position delete files (Parquet/Avro/ORC), which may reference many data files.
    pub position_deletes: Vec<LiveFile>,
    /// The data left unread because it was out of scope (zero when all was read).
    pub skipped_data: SkippedData,
    /// Whether data files in scope were also left out by their path
    /// ([`TableFiles::read_scoped_paths`]): then `data_files` cannot tell which files
    /// are new in a later snapshot.
    pub data_paths_filtered: bool,
}

/// Which data files to keep, by path (on top of a scope).
pub type PathFilter<'a> = &'a (dyn Fn(&str) -> bool + Sync);

/// Which of the data files in scope a read keeps ([`TableFiles::read_scoped_paths`]).
#[derive(Clone, Copy)]
pub enum DataSelection<'a> {
    /// Those whose path the filter keeps.
    Paths(PathFilter<'a>),
    /// Those of one range of a split, by the snapshot's [`RangeLayout`]: the data
    /// manifests the range's part does not cover are not fetched.
    Range(DataRange),
}

/// Data a scoped read did not read or keep.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SkippedData {
    /// Data manifests not decoded: their summaries rule out every partition in scope
    /// (those fetched while the deletes were read, before the scope was known, too).
    pub manifests: usize,
    /// Live data files not kept: in skipped manifests (by the manifests' counts), or
    /// out of scope (or left out by path) in the manifests read.
    pub files: u64,
}

impl SkippedData {
    /// Whether some live data file may be missing from `data_files`.
    pub fn is_partial(&self) -> bool {
        self.manifests > 0 || self.files > 0
    }
}

/// Manifests read at once. Each is a round trip to object storage, and a streaming
/// table has one or two per commit since its last compaction: as many in flight as
/// eqdv reads data files (their decoded entries are all kept anyway).
pub(crate) const MANIFEST_READS_IN_FLIGHT: usize = crate::storage::DEFAULT_PARALLELISM;

impl TableFiles {
    /// Reads the manifest list and every manifest of `snapshot`.
    pub async fn read(table: &LoadedTable, snapshot: Option<&SnapshotRef>) -> Result<Self> {
        let Some(snapshot) = snapshot else {
            return Ok(Self::default());
        };
        let manifests = read_manifest_list(table, snapshot).await?;
        let mut files = Self::empty(snapshot, manifests.clone());
        files
            .add_manifests(table, &with_live_files(&manifests))
            .await?;
        Ok(files)
    }

    /// Reads the manifest list, every delete manifest, and then only the data that
    /// `scope` (given the deletes read) says a conversion needs: data manifests whose
    /// summaries rule it out are not read, and data files out of scope are not kept.
    /// Also returns what `scope` returned besides the scope.
    pub async fn read_scoped<T>(
        table: &LoadedTable,
        snapshot: Option<&SnapshotRef>,
        scope: impl FnOnce(&TableFiles) -> Result<(DataScope, T)>,
    ) -> Result<(Self, T)> {
        Self::read_scoped_paths(table, snapshot, scope, None).await
    }

    /// [`TableFiles::read_scoped`] keeping, of the data files in scope, only those
    /// `selection` selects: a range of a split fetches only the data manifests that hold
    /// its files and decodes in full only those, and a fan-in only the files its ranges
    /// wrote DVs for.
    pub async fn read_scoped_paths<T>(
        table: &LoadedTable,
        snapshot: Option<&SnapshotRef>,
        scope: impl FnOnce(&TableFiles) -> Result<(DataScope, T)>,
        selection: Option<DataSelection<'_>>,
    ) -> Result<(Self, T)> {
        let Some(snapshot) = snapshot else {
            let files = Self::default();
            let (_, extra) = scope(&files)?;
            return Ok((files, extra));
        };
        let manifests = read_manifest_list(table, snapshot).await?;
        let mut files = Self::empty(snapshot, manifests.clone());
        let (deletes, data): (Vec<ManifestFile>, Vec<ManifestFile>) = with_live_files(&manifests)
            .into_iter()
            .partition(|m| m.content == ManifestContentType::Deletes);
        // The data manifests are fetched while the deletes are read, so that a scoped
        // read costs no round trip more than a whole one: each is decoded once the scope
        // is known, and one not yet fetched by then is not fetched if out of scope.
        let (known, scope_rx) = tokio::sync::watch::channel::<Option<Arc<DataScope>>>(None);
        let deletes_then_scope = async {
            files.add_manifests(table, &deletes).await?;
            let (scope, extra) = scope(&files)?;
            known.send_replace(Some(Arc::new(scope)));
            Ok::<_, Error>(extra)
        };
        let mut data_part = TableFiles::default();
        let layout = match selection {
            Some(DataSelection::Range(range)) => {
                Some((range, RangeLayout::new(range.count, &manifests)))
            }
            _ => None,
        };
        let keeps_path = |manifest: &ManifestFile, path: &str| match (&selection, &layout) {
            (Some(DataSelection::Paths(keep)), _) => keep(path),
            (_, Some((range, layout))) => layout.holds(*range, &manifest.manifest_path, path),
            _ => true,
        };
        let fetches = |manifest: &ManifestFile| {
            layout
                .as_ref()
                .is_none_or(|(range, layout)| layout.may_hold(*range, manifest))
        };
        let data_read = data_part.add_data_manifests(table, &data, scope_rx, &fetches, &keeps_path);
        let (extra, ()) = futures::try_join!(deletes_then_scope, data_read)?;
        files.data_files = data_part.data_files;
        files.skipped_data = data_part.skipped_data;
        files.data_paths_filtered = selection.is_some();
        Ok((files, extra))
    }

    /// How this snapshot's data files are dealt to the ranges of a split into `count`:
    /// the same for every task that reads the snapshot's manifest list.
    pub fn range_layout(&self, count: u32) -> RangeLayout {
        RangeLayout::new(count, &self.manifests)
    }

    /// The manifest list and the delete manifests of `snapshot`, and no data manifest:
    /// for a reader told by other means which data files it needs (a split's fan-in, by
    /// its ranges, which read them at the same snapshot). Every live data file counts as
    /// skipped and `data_paths_filtered` is set, so that a commit conflict reads the
    /// snapshot again whole before it compares it with a new head.
    pub async fn read_deletes_only<T>(
        table: &LoadedTable,
        snapshot: &SnapshotRef,
        then: impl FnOnce(&TableFiles) -> Result<T>,
    ) -> Result<(Self, T)> {
        let manifests = read_manifest_list(table, snapshot).await?;
        let mut files = Self::empty(snapshot, manifests.clone());
        let (deletes, data): (Vec<ManifestFile>, Vec<ManifestFile>) = with_live_files(&manifests)
            .into_iter()
            .partition(|m| m.content == ManifestContentType::Deletes);
        // A table that keeps its reads is one this process converts once it is planned
        // (the planner's own conversion of a plan's one shard): its data manifests are
        // fetched while the delete manifests are read, so that the conversion finds
        // them kept instead of waiting for another round trip. A failed fetch is left
        // to the conversion's read, which reports it.
        let prefetch_data = async {
            if table.kept_reads.is_on() {
                let fetches = data
                    .iter()
                    .filter(|m| m.key_metadata.is_none())
                    .map(|m| async move { table.manifest_bytes(m).await.is_ok() });
                futures::stream::iter(fetches)
                    .buffer_unordered(MANIFEST_READS_IN_FLIGHT)
                    .for_each(|_| async {})
                    .await;
            }
        };
        let (read, ()) = futures::join!(files.add_manifests(table, &deletes), prefetch_data);
        read?;
        files.skipped_data.manifests = data.len();
        files.skipped_data.files = data.iter().map(listed_live_files).sum();
        files.data_paths_filtered = true;
        let extra = then(&files)?;
        Ok((files, extra))
    }

    /// Fetches `manifests` (data manifests) up to the reads in flight, those `fetches`
    /// fetches, and files the entries in the scope `scope` receives once it is known
    /// (those `keeps` keeps).
    async fn add_data_manifests(
        &mut self,
        table: &LoadedTable,
        manifests: &[ManifestFile],
        scope: tokio::sync::watch::Receiver<Option<Arc<DataScope>>>,
        fetches: &(dyn Fn(&ManifestFile) -> bool + Sync),
        keeps: &(dyn Fn(&ManifestFile, &str) -> bool + Sync),
    ) -> Result<()> {
        type Read = Option<(Vec<ManifestEntry>, usize)>;
        let reads: Vec<futures::future::BoxFuture<'_, Result<(&ManifestFile, Read)>>> = manifests
            .iter()
            .map(|m| {
                let mut scope = scope.clone();
                let file_io = &table.file_io;
                async move {
                    let known = scope.borrow().clone();
                    if !fetches(m) || known.is_some_and(|s| !s.may_hold(m)) {
                        return Ok((m, None));
                    }
                    // Encrypted manifests are left to iceberg-rust, which decrypts.
                    let bytes = match m.key_metadata {
                        None => Some(table.manifest_bytes(m).await?),
                        Some(_) => None,
                    };
                    let scope = scope
                        .wait_for(Option::is_some)
                        .await
                        .map_err(|_| {
                            Error::file(
                                &m.manifest_path,
                                "cannot read manifest",
                                "the delete manifests were not read",
                            )
                        })?
                        .clone()
                        .unwrap_or_else(|| Arc::new(DataScope::Everything));
                    if !scope.may_hold(m) {
                        return Ok((m, None));
                    }
                    // Out of scope, dropped as they are decoded: the reads in flight
                    // then hold only their files in scope while they wait their turn.
                    let keep = |head: &EntryHead<'_>| {
                        scope.may_hold_head(m.partition_spec_id, head) && keeps(m, head.path)
                    };
                    let kept = match bytes {
                        Some(bytes) => {
                            crate::manifest_decode::parse_manifest_kept(m, &bytes, &keep)?
                        }
                        None => {
                            let (_, entries) =
                                crate::manifest_decode::load_manifest(file_io, m).await?;
                            KeptEntries::of(entries, &keep)
                        }
                    };
                    Ok((m, Some((kept.entries, kept.live))))
                }
                .boxed()
            })
            .collect();
        let mut reads = futures::stream::iter(reads).buffered(MANIFEST_READS_IN_FLIGHT);
        while let Some(read) = reads.next().await {
            match read? {
                (m, None) => {
                    self.skipped_data.manifests += 1;
                    self.skipped_data.files += listed_live_files(m);
                }
                (m, Some((entries, read))) => {
                    self.skipped_data.files += (read - entries.len()) as u64;
                    self.file_entries(table, m, entries)?
                }
            }
        }
        Ok(())
    }

    fn empty(snapshot: &SnapshotRef, manifests: Vec<ManifestFile>) -> Self {
        TableFiles {
            snapshot_id: Some(snapshot.snapshot_id()),
            manifests,
            ..Default::default()
        }
    }

    /// Reads `manifests` and files all their live entries.
    async fn add_manifests(
        &mut self,
        table: &LoadedTable,
        manifests: &[ManifestFile],
    ) -> Result<()> {
        let mut loaded = futures::stream::iter(manifests.iter().cloned().map(|m| async move {
            let (_, entries) = table.load_manifest(&m).await?;
            Ok::<_, Error>((m, entries))
        }))
        .buffered(MANIFEST_READS_IN_FLIGHT);
        while let Some(next) = loaded.next().await {
            let (manifest_file, entries): (ManifestFile, Vec<ManifestEntry>) = next?;
            self.file_entries(table, &manifest_file, entries)?;
        }
        Ok(())
    }

    /// Files the live entries of one manifest by what they are (a scoped read has
    /// dropped the data entries out of scope already).
    fn file_entries(
        &mut self,
        table: &LoadedTable,
        manifest_file: &ManifestFile,
        entries: Vec<ManifestEntry>,
    ) -> Result<()> {
        let files = self;
        for entry in entries {
            if entry.status() == ManifestStatus::Deleted {
                continue;
            }
            let (Some(data_seq), Some(snapshot_id)) =
                (entry.sequence_number(), entry.snapshot_id())
            else {
                return Err(Error::file(
                    &manifest_file.manifest_path,
                    format!(
                        "entry {} has no sequence number or snapshot id",
                        entry.file_path()
                    ),
                    "missing inherited value",
                ));
            };
            let file_sequence_number = entry.file_sequence_number.unwrap_or(data_seq);
            let content_type = entry.content_type();
            let live = LiveFile {
                file: entry.data_file,
                spec_id: manifest_file.partition_spec_id,
                data_sequence_number: data_seq,
                file_sequence_number,
                snapshot_id,
                manifest_path: manifest_file.manifest_path.clone(),
            };
            match (manifest_file.content, content_type) {
                (ManifestContentType::Data, DataContentType::Data) => files.data_files.push(live),
                (ManifestContentType::Deletes, DataContentType::EqualityDeletes) => {
                    files.equality_deletes.push(live)
                }
                (ManifestContentType::Deletes, DataContentType::PositionDeletes)
                    if live.file.file_format() == DataFileFormat::Puffin =>
                {
                    let Some(referenced) = live.file.referenced_data_file() else {
                        return Err(Error::file(
                            live.path(),
                            "deletion vector entry has no referenced_data_file",
                            "invalid manifest entry",
                        ));
                    };
                    if let Some(previous) = files.dvs.insert(referenced.clone(), live) {
                        return Err(Error::UnsupportedTable {
                            table: table.name.to_string(),
                            message: format!(
                                "two live deletion vectors for data file {referenced} (one in {}); the table violates the one-DV-per-file rule",
                                previous.path()
                            ),
                        });
                    }
                }
                (ManifestContentType::Deletes, DataContentType::PositionDeletes) => {
                    files.position_deletes.push(live)
                }
                (content, file_content) => {
                    return Err(Error::file(
                        &manifest_file.manifest_path,
                        format!(
                            "{file_content:?} entry {} in a {content} manifest",
                            live.path()
                        ),
                        "invalid manifest",
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Whether a manifest's list entry says it holds no live file (only deleted entries):
/// such a manifest is not read, and not carried into a new snapshot (as Java's scans and
/// commits do). Missing counts mean "maybe".
pub fn has_no_live_files(manifest: &ManifestFile) -> bool {
    manifest.added_files_count == Some(0) && manifest.existing_files_count == Some(0)
}

/// The live files the manifest list says `manifest` lists (a missing count as none):
/// what skipping it leaves unread.
fn listed_live_files(manifest: &ManifestFile) -> u64 {
    u64::from(manifest.added_files_count.unwrap_or(0))
        + u64::from(manifest.existing_files_count.unwrap_or(0))
}

fn with_live_files(manifests: &[ManifestFile]) -> Vec<ManifestFile> {
    manifests
        .iter()
        .filter(|m| !has_no_live_files(m))
        .cloned()
        .collect()
}

/// The manifests of `snapshot`'s manifest list.
pub(crate) async fn read_manifest_list(
    table: &LoadedTable,
    snapshot: &SnapshotRef,
) -> Result<Vec<ManifestFile>> {
    let list_bytes = table
        .kept_reads
        .get_or_read(
            snapshot.manifest_list(),
            None,
            crate::storage::read_all(&table.file_io, snapshot.manifest_list()),
        )
        .await?;
    crate::manifest_decode::check_avro_file(snapshot.manifest_list(), &list_bytes)?;
    let list = ManifestList::parse_with_version(&list_bytes, table.metadata.format_version())
        .map_err(|e| {
            Error::file(
                snapshot.manifest_list(),
                format!("cannot parse manifest list of table {}", table.name),
                e,
            )
        })?;
    Ok(list.entries().to_vec())
}
