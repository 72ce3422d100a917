//! Reading a table: its metadata, a branch head, and the live files of a snapshot with
//! their data sequence numbers, split by what they are (data, equality deletes, DVs,
//! v2 position deletes).
//!
//! Read-only: nothing here writes. Sequence numbers come from the manifest list by
//! inheritance, never guessed.

use std::collections::HashMap;
use std::sync::Arc;

use futures::{FutureExt, StreamExt};
use iceberg::io::FileIO;
use iceberg::spec::{
    DEFAULT_SCHEMA_NAME_MAPPING, DataContentType, DataFile, DataFileFormat, FormatVersion,
    ManifestContentType, ManifestEntry, ManifestFile, ManifestList, ManifestStatus, NameMapping,
    NestedFieldRef, PrimitiveType, SnapshotRef, TableMetadata, TableMetadataRef, Type,
};

use crate::catalog::{Catalog, TableName, TablePointer};
use crate::data_range::{DataRange, RangeLayout};
use crate::manifest_decode::{EntryHead, KeptEntries};
use crate::plan::DataScope;
use crate::{Error, Result};

/// A table as loaded from its catalog at one moment.
#[derive(Clone, Debug)]
pub struct LoadedTable {
    pub name: TableName,
    pub pointer: TablePointer,
    pub metadata: TableMetadataRef,
    pub file_io: FileIO,
    /// The manifest list and manifests read through this table, kept for a later read
    /// through it or its clones (off unless [`LoadedTable::keeping_reads`]).
    pub kept_reads: KeptReads,
}

/// The manifest lists and manifests a [`LoadedTable`] (and its clones) read, kept by
/// path: Iceberg never rewrites a file under its path, so a second read of the same
/// table state (the planner converting the shard it just planned) needs no request.
/// Off by default; at most [`KEPT_READS_MAX_BYTES`] are kept.
///
/// One store may also outlive the tables that use it: a warm Lambda process's planner
/// keeps one across its invocations (see [`KeptReads::next_invocation`]), since the
/// next commit's snapshot lists all but a few of the manifests the last one did.
#[derive(Clone, Debug, Default)]
pub struct KeptReads(Option<Arc<std::sync::Mutex<KeptFiles>>>);

#[derive(Debug, Default)]
struct KeptFiles {
    files: HashMap<String, KeptFile>,
    bytes: usize,
    /// Counts [`KeptReads::next_invocation`] calls: which invocation a use belongs to.
    invocation: u64,
    /// Files read through the store (not found kept), since it was made.
    fetched: u64,
}

#[derive(Debug)]
struct KeptFile {
    bytes: bytes::Bytes,
    /// The last invocation that read or used it.
    used_in: u64,
}

/// The most bytes of manifests one table keeps: a table whose manifests are larger is
/// not one a planner converts in its own invocation.
pub const KEPT_READS_MAX_BYTES: usize = 256 << 20;

/// The most bytes a store keeps from one invocation for the next: what a warm planner
/// holds between invocations (a streaming table's manifests are a few MB).
pub const KEPT_ACROSS_INVOCATIONS_MAX_BYTES: usize = 64 << 20;

/// Invocations (of those that used the store) a file stays kept without being used: a
/// planner serving a few tables in turn keeps each one's.
pub const KEPT_FOR_INVOCATIONS: u64 = 4;

impl KeptReads {
    /// A store that keeps reads (what [`LoadedTable::keeping_reads`] gives a table).
    pub fn new_store() -> Self {
        Self(Some(Default::default()))
    }

    /// The file at `path`: kept, or read by `read` (and kept while there is room). A
    /// kept file whose length is not `expected_len` (a manifest's length as its list
    /// gives it) is not used: it is read again and replaced.
    pub(crate) async fn get_or_read<F>(
        &self,
        path: &str,
        expected_len: Option<u64>,
        read: F,
    ) -> Result<bytes::Bytes>
    where
        F: std::future::Future<Output = Result<bytes::Bytes>>,
    {
        let Some(kept) = &self.0 else {
            return read.await;
        };
        if let Ok(mut k) = kept.lock() {
            let invocation = k.invocation;
            if let Some(file) = k.files.get_mut(path)
                && expected_len.is_none_or(|len| len == file.bytes.len() as u64)
            {
                file.used_in = invocation;
                return Ok(file.bytes.clone());
            }
        }
        let bytes = read.await?;
        if let Ok(mut k) = kept.lock() {
            k.fetched += 1;
            if let Some(stale) = k.files.remove(path) {
                k.bytes -= stale.bytes.len();
            }
            if k.bytes + bytes.len() <= KEPT_READS_MAX_BYTES {
                let used_in = k.invocation;
                k.bytes += bytes.len();
                k.files.insert(
                    path.to_string(),
                    KeptFile {
                        bytes: bytes.clone(),
                        used_in,
                    },
                );
            }
        }
        Ok(bytes)
    }

    /// Starts the next invocation of a process that keeps this store across them. A
    /// file stays while one of the last [`KEPT_FOR_INVOCATIONS`] invocations that used
    /// the store read or used it, and the least recently used go first while more than
    /// [`KEPT_ACROSS_INVOCATIONS_MAX_BYTES`] are kept. An invocation that used nothing
    /// (the event of eqdv's own commit, which needs no manifest) does not count: the
    /// files stay for the next commit's.
    pub fn next_invocation(&self) {
        let Some(kept) = &self.0 else {
            return;
        };
        let Ok(mut k) = kept.lock() else {
            return;
        };
        let ending = k.invocation;
        if !k.files.values().any(|f| f.used_in == ending) {
            return;
        }
        k.files
            .retain(|_, file| file.used_in + KEPT_FOR_INVOCATIONS > ending);
        k.bytes = k.files.values().map(|f| f.bytes.len()).sum();
        let KeptFiles { files, bytes, .. } = &mut *k;
        crate::lru::drop_least_recently_used(
            files,
            bytes,
            KEPT_ACROSS_INVOCATIONS_MAX_BYTES,
            |f| f.used_in,
            |f| f.bytes.len(),
        );
        k.invocation += 1;
    }

    /// Whether reads are kept at all.
    pub fn is_on(&self) -> bool {
        self.0.is_some()
    }

    /// How many files are kept.
    pub fn len(&self) -> usize {
        self.0
            .as_ref()
            .and_then(|k| k.lock().ok().map(|k| k.files.len()))
            .unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many files were read through this store since it was made (were not kept).
    pub fn fetched(&self) -> u64 {
        self.0
            .as_ref()
            .and_then(|k| k.lock().ok().map(|k| k.fetched))
            .unwrap_or(0)
    }

    /// How many bytes are kept.
    pub fn bytes(&self) -> usize {
        self.0
            .as_ref()
            .and_then(|k| k.lock().ok().map(|k| k.bytes))
            .unwrap_or(0)
    }
}

impl LoadedTable {
    /// Loads the pointer and then the metadata file it names.
    pub async fn load(catalog: &dyn Catalog, name: &TableName) -> Result<Self> {
        let pointer = catalog.load_pointer(name).await?;
        let file_io = catalog.table_file_io(name, &HashMap::new());
        let metadata = TableMetadata::read_from(&file_io, &pointer.metadata_location)
            .await
            .map_err(|e| {
                Error::file(
                    &pointer.metadata_location,
                    format!("cannot read metadata of table {name}"),
                    e,
                )
            })?;
        let file_io = catalog.table_file_io(name, metadata.properties());
        Ok(Self {
            name: name.clone(),
            pointer,
            metadata: Arc::new(metadata),
            file_io,
            kept_reads: KeptReads::default(),
        })
    }

    /// This table, keeping the manifest list and manifests read through it (and its
    /// clones) for the next read (see [`KeptReads`]).
    pub fn keeping_reads(mut self) -> Self {
        if self.kept_reads.0.is_none() {
            self.kept_reads = KeptReads::new_store();
        }
        self
    }

    /// This table, keeping what it reads in `store` (shared with whatever else uses it,
    /// such as the tables of a warm planner's earlier invocations); off, its own store.
    pub fn keeping_reads_in(mut self, store: &KeptReads) -> Self {
        if store.is_on() {
            self.kept_reads = store.clone();
            self
        } else {
            self.keeping_reads()
        }
    }

    /// An unencrypted manifest's bytes, kept or read.
    async fn manifest_bytes(&self, manifest: &ManifestFile) -> Result<bytes::Bytes> {
        self.kept_reads
            .get_or_read(
                &manifest.manifest_path,
                u64::try_from(manifest.manifest_length)
                    .ok()
                    .filter(|len| *len > 0),
                crate::manifest_decode::read_manifest_bytes(&self.file_io, manifest),
            )
            .await
    }

    /// A manifest's metadata and entries, as [`crate::manifest_decode::load_manifest`]
    /// reads them, from kept bytes where there are some.
    pub(crate) async fn load_manifest(
        &self,
        manifest: &ManifestFile,
    ) -> Result<(iceberg::spec::ManifestMetadata, Vec<ManifestEntry>)> {
        if manifest.key_metadata.is_some() || self.kept_reads.0.is_none() {
            return crate::manifest_decode::load_manifest(&self.file_io, manifest).await;
        }
        let bytes = self.manifest_bytes(manifest).await?;
        crate::manifest_decode::parse_manifest(manifest, &bytes)
    }

    /// The head snapshot of a branch; `None` for an empty table. A missing branch (other
    /// than `main`, which is implicit on an empty table) is an error.
    pub fn head(&self, branch: &str) -> Result<Option<SnapshotRef>> {
        match self.metadata.snapshot_for_ref(branch) {
            Some(s) => Ok(Some(s.clone())),
            None if branch == "main" && self.metadata.current_snapshot_id().is_none() => Ok(None),
            None => Err(Error::UnsupportedTable {
                table: self.name.to_string(),
                message: format!("branch '{branch}' does not exist"),
            }),
        }
    }

    /// Refuses a ref that eqdv must not commit to: a tag (an immutable name for one
    /// snapshot). A branch that does not exist is refused by [`LoadedTable::head`].
    pub fn require_branch(&self, branch: &str) -> Result<()> {
        match crate::refs::refs(&self.metadata)?.get(branch) {
            Some(reference) if crate::refs::is_tag(reference) => Err(Error::UnsupportedTable {
                table: self.name.to_string(),
                message: format!(
                    "'{branch}' is a tag, not a branch: tags are immutable, so eqdv converts \
                     branches only"
                ),
            }),
            _ => Ok(()),
        }
    }

    /// eqdv writes deletion vectors, which only format v3 tables have.
    pub fn require_v3(&self) -> Result<()> {
        match self.metadata.format_version() {
            FormatVersion::V3 => Ok(()),
            other => Err(Error::UnsupportedTable {
                table: self.name.to_string(),
                message: format!(
                    "table format {other} has no deletion vectors; upgrade the table to format v3 (format-version=3) first"
                ),
            }),
        }
    }

    pub fn location(&self) -> &str {
        self.metadata.location()
    }

    /// The table's partition spec `spec_id`; one the metadata does not hold is an error.
    pub fn partition_spec(&self, spec_id: i32) -> Result<iceberg::spec::PartitionSpecRef> {
        self.metadata
            .partition_spec_by_id(spec_id)
            .cloned()
            .ok_or_else(|| Error::UnsupportedTable {
                table: self.name.to_string(),
                message: format!("partition spec {spec_id} does not exist"),
            })
    }

    /// Refuses `fields` (top-level fields of the current schema that eqdv is about to
    /// read) whose `initial-default` the metadata file states but iceberg-rust dropped
    /// while parsing: 0.10.1 parses no default of a timestamp_ns / timestamptz_ns field
    /// and keeps no trace of it, so such a field would read as null in files that
    /// predate it. Only fields of those types cost a second read of the metadata file.
    pub async fn refuse_unparsed_defaults(&self, fields: &[NestedFieldRef]) -> Result<()> {
        let suspects: Vec<&NestedFieldRef> = fields
            .iter()
            .filter(|f| {
                f.initial_default.is_none()
                    && matches!(
                        f.field_type.as_ref(),
                        Type::Primitive(PrimitiveType::TimestampNs | PrimitiveType::TimestamptzNs)
                    )
            })
            .collect();
        if suspects.is_empty() {
            return Ok(());
        }
        let location = &self.pointer.metadata_location;
        let read_error = |e: &dyn std::fmt::Display| {
            Error::file(
                location,
                format!("cannot read metadata of table {} again", self.name),
                e.to_string(),
            )
        };
        // The storage error itself as the source: it says whether a retry can help.
        let bytes = self
            .file_io
            .new_input(location)?
            .read()
            .await
            .map_err(|e| {
                Error::file(
                    location,
                    format!("cannot read metadata of table {} again", self.name),
                    e,
                )
            })?;
        let json: serde_json::Value = if bytes.starts_with(&[0x1f, 0x8b]) {
            let mut text = Vec::new();
            std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&bytes[..]), &mut text)
                .map_err(|e| read_error(&e))?;
            serde_json::from_slice(&text)?
        } else {
            serde_json::from_slice(&bytes)?
        };
        let current = self.metadata.current_schema_id();
        let schema = json["schemas"]
            .as_array()
            .and_then(|schemas| {
                schemas
                    .iter()
                    .find(|s| s["schema-id"].as_i64() == Some(i64::from(current)))
            })
            .ok_or_else(|| read_error(&"the current schema is not in the metadata file"))?;
        for field in suspects {
            let stated = schema["fields"].as_array().is_some_and(|all| {
                all.iter().any(|f| {
                    f["id"].as_i64() == Some(i64::from(field.id)) && !f["initial-default"].is_null()
                })
            });
            if stated {
                return Err(Error::FieldUnresolvable {
                    path: location.clone(),
                    field: field.name.clone(),
                    field_id: field.id,
                    message: format!(
                        "its initial-default ({}) is not one eqdv can read, so files written \
                         before the field existed cannot be read faithfully",
                        field.field_type
                    ),
                });
            }
        }
        Ok(())
    }

    /// The table's name mapping (`schema.name-mapping.default`), which readers use to
    /// find the columns of files written without Parquet field ids. A mapping that does
    /// not parse is an error: guessing columns by name would misread them.
    pub fn name_mapping(&self) -> Result<Option<Arc<NameMapping>>> {
        let Some(json) = self.metadata.properties().get(DEFAULT_SCHEMA_NAME_MAPPING) else {
            return Ok(None);
        };
        serde_json::from_str::<NameMapping>(json)
            .map(|m| Some(Arc::new(m)))
            .map_err(|e| Error::UnsupportedTable {
                table: self.name.to_string(),
                message: format!(
                    "table property {DEFAULT_SCHEMA_NAME_MAPPING} is not a valid name mapping: {e}"
                ),
            })
    }
}

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
pub(crate) const MANIFEST_READS_IN_FLIGHT: usize = crate::resolve::DEFAULT_PARALLELISM;

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

/// The manifests that may list a live file (see [`has_no_live_files`]).
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

#[cfg(test)]
mod kept_reads_tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// Kept, a file is read once for the table and all its clones; a failed read keeps
    /// nothing; off (the default), every read is a read.
    #[tokio::test]
    async fn a_kept_file_is_read_once_for_the_table_and_its_clones() {
        let reads = AtomicUsize::new(0);
        let read = |ok: bool| {
            let reads = &reads;
            async move {
                reads.fetch_add(1, Ordering::SeqCst);
                if ok {
                    Ok(bytes::Bytes::from_static(b"manifest"))
                } else {
                    Err(Error::InvalidInput("unreadable".into()))
                }
            }
        };
        let kept = KeptReads::new_store();
        assert!(kept.get_or_read("m.avro", None, read(false)).await.is_err());
        assert!(kept.is_empty(), "a failed read is not kept");
        for table in [&kept, &kept.clone()] {
            let bytes = table.get_or_read("m.avro", None, read(true)).await.unwrap();
            assert_eq!(&bytes[..], b"manifest");
        }
        assert_eq!(reads.load(Ordering::SeqCst), 2, "one failed read, one read");
        assert_eq!(kept.len(), 1);

        let off = KeptReads::default();
        for _ in 0..2 {
            off.get_or_read("m.avro", None, read(true)).await.unwrap();
        }
        assert_eq!(reads.load(Ordering::SeqCst), 4);
        assert!(off.is_empty());
    }

    /// Across invocations a store keeps what the last few invocations read or used,
    /// and drops what none of them did (a snapshot no longer read); an invocation that
    /// used nothing does not count; a kept file of another length than the list gives
    /// is read again.
    #[tokio::test]
    async fn a_store_keeps_what_recent_invocations_used() {
        let reads = AtomicUsize::new(0);
        let read = |content: &'static [u8]| {
            let reads = &reads;
            async move {
                reads.fetch_add(1, Ordering::SeqCst);
                Ok(bytes::Bytes::from_static(content))
            }
        };
        let store = KeptReads::new_store();
        store.get_or_read("a", Some(1), read(b"a")).await.unwrap();
        store.get_or_read("b", None, read(b"bb")).await.unwrap();
        // Then invocations that use a only, and some that use nothing at all.
        for i in 0..KEPT_FOR_INVOCATIONS {
            store.next_invocation();
            store.next_invocation();
            assert_eq!(store.len(), 2, "b dropped after {i} invocations");
            store.get_or_read("a", Some(1), read(b"a")).await.unwrap();
        }
        assert_eq!(reads.load(Ordering::SeqCst), 2, "a was kept");
        store.next_invocation();
        assert_eq!(
            (store.len(), store.bytes()),
            (1, 1),
            "b, unused for long, dropped"
        );
        // a's list gives another length: it is read again and replaced.
        let again = store.get_or_read("a", Some(2), read(b"aa")).await.unwrap();
        assert_eq!(&again[..], b"aa");
        assert_eq!(reads.load(Ordering::SeqCst), 3);
        assert_eq!((store.len(), store.bytes()), (1, 2));

        // A store off keeps nothing across invocations either.
        let off = KeptReads::default();
        off.next_invocation();
        assert!(off.is_empty());
    }

    /// Over the bytes carried across invocations, the least recently used go first.
    #[tokio::test]
    async fn the_least_recently_used_go_first_over_the_bytes_carried() {
        let store = KeptReads::new_store();
        let big = bytes::Bytes::from(vec![0u8; KEPT_ACROSS_INVOCATIONS_MAX_BYTES / 2 + 1]);
        for path in ["x", "y"] {
            let bytes = big.clone();
            store
                .get_or_read(path, None, async move { Ok(bytes) })
                .await
                .unwrap();
            store.next_invocation();
        }
        assert_eq!(store.len(), 1, "both do not fit");
        let kept = store
            .get_or_read("y", None, async { Err(Error::InvalidInput("read".into())) })
            .await;
        assert!(kept.is_ok(), "the one used last is kept");
    }
}
