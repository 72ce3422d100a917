//! Building a new snapshot on a base: manifests, manifest list, summary and the new
//! table metadata. Writes only new, uniquely named files and never touches the catalog;
//! `commit` decides whether the result is swapped in.
//!
//! Manifests that hold a removed entry are rewritten with that entry DELETED and the
//! others EXISTING (sequence numbers kept); every other manifest is reused as is.

use std::collections::{HashMap, HashSet};

use iceberg::spec::{
    DataContentType, DataFile, DataFileFormat, ManifestContentType, ManifestFile,
    ManifestListWriter, ManifestStatus, ManifestWriter, ManifestWriterBuilder, Operation,
    PartitionSpec, SchemaRef, Snapshot, Summary, TableMetadata,
};
use rand::Rng;

use crate::storage::new_metadata_file;
use crate::table::{FileEntryKey, LiveFile, LoadedTable, TableFiles};
use crate::{Error, Result};

/// Summary property naming the snapshot a conversion was planned on.
pub const CONVERTED_FROM_PROPERTY: &str = "eqdv.converted-from";
/// Summary property naming what ran the conversion (e.g. `eqdv-converter`, `eqdv-cli`).
pub const SOURCE_PROPERTY: &str = "eqdv.source";
/// Summary property naming the shard converted, when there was one.
pub const SHARD_PROPERTY: &str = "eqdv.shard-id";
/// Summary property counting the equality deletes live after a snapshot.
pub const TOTAL_EQUALITY_DELETES_PROPERTY: &str = "total-equality-deletes";

/// A file to add, with the partition spec it was written for.
#[derive(Clone, Debug)]
pub struct AddedFile {
    pub spec_id: i32,
    pub file: DataFile,
}

/// What a new snapshot changes relative to its base.
#[derive(Clone, Debug)]
pub struct SnapshotChanges {
    pub operation: Operation,
    pub added_data_files: Vec<AddedFile>,
    pub added_delete_files: Vec<AddedFile>,
    /// Live files of the base to remove (data or delete files).
    pub removed_files: Vec<LiveFile>,
    /// Extra summary properties (e.g. `eqdv.converted-from`).
    pub extra_summary: HashMap<String, String>,
}

impl SnapshotChanges {
    pub fn new(operation: Operation) -> Self {
        Self {
            operation,
            added_data_files: Vec::new(),
            added_delete_files: Vec::new(),
            removed_files: Vec::new(),
            extra_summary: HashMap::new(),
        }
    }
}

/// A snapshot ready to be committed: its metadata plus every file written for it.
#[derive(Clone, Debug)]
pub struct PreparedSnapshot {
    pub metadata: TableMetadata,
    pub snapshot_id: i64,
    pub sequence_number: i64,
    /// Manifests and manifest list written for this snapshot (to delete if it never lands).
    pub written_files: Vec<String>,
    pub summary: HashMap<String, String>,
}

/// Builds a snapshot of `changes` on top of `base` (the branch head that `base` was read from).
pub async fn build_snapshot(
    table: &LoadedTable,
    branch: &str,
    base: &TableFiles,
    changes: &SnapshotChanges,
) -> Result<PreparedSnapshot> {
    let mut written = Vec::new();
    let result = build_inner(table, branch, base, changes, &mut written).await;
    if result.is_err() {
        crate::storage::delete_files(&table.file_io, &written).await;
    }
    result
}

async fn build_inner(
    table: &LoadedTable,
    branch: &str,
    base: &TableFiles,
    changes: &SnapshotChanges,
    written: &mut Vec<String>,
) -> Result<PreparedSnapshot> {
    let metadata = &table.metadata;
    let snapshot_id = new_snapshot_id(metadata);
    let sequence_number = metadata.next_sequence_number();
    let schema = metadata.current_schema().clone();
    let location = table.location().to_string();

    let mut new_manifests: Vec<ManifestFile> = Vec::new();

    // New manifests: one per (content, spec).
    for (content, files) in [
        (ManifestContentType::Data, &changes.added_data_files),
        (ManifestContentType::Deletes, &changes.added_delete_files),
    ] {
        let mut by_spec: HashMap<i32, Vec<&DataFile>> = HashMap::new();
        for added in files {
            by_spec.entry(added.spec_id).or_default().push(&added.file);
        }
        let mut spec_ids: Vec<_> = by_spec.keys().copied().collect();
        spec_ids.sort_unstable();
        for spec_id in spec_ids {
            let spec =
                metadata
                    .partition_spec_by_id(spec_id)
                    .ok_or_else(|| Error::UnsupportedTable {
                        table: table.name.to_string(),
                        message: format!("partition spec {spec_id} does not exist"),
                    })?;
            let (path, mut writer) = manifest_writer(
                table,
                written,
                snapshot_id,
                content,
                schema.clone(),
                spec.as_ref().clone(),
            )?;
            for file in &by_spec[&spec_id] {
                writer.add_file((*file).clone(), -1)?;
            }
            new_manifests.push(finish_manifest(&path, writer).await?);
        }
    }

    // Rewritten manifests: the ones holding a removed entry.
    let mut removed_by_manifest: HashMap<&str, HashSet<FileEntryKey>> = HashMap::new();
    for removed in &changes.removed_files {
        removed_by_manifest
            .entry(removed.manifest_path.as_str())
            .or_default()
            .insert(removed.entry_key());
    }
    let mut found_removed = 0usize;
    let mut kept_manifests = Vec::new();
    for manifest_file in &base.manifests {
        let Some(removed) = removed_by_manifest.get(manifest_file.manifest_path.as_str()) else {
            kept_manifests.push(manifest_file.clone());
            continue;
        };
        let manifest = manifest_file
            .load_manifest(&table.file_io)
            .await
            .map_err(|e| Error::file(&manifest_file.manifest_path, "cannot read manifest", e))?;
        let (path, mut writer) = manifest_writer(
            table,
            written,
            snapshot_id,
            manifest_file.content,
            manifest.metadata().schema().clone(),
            manifest.metadata().partition_spec().clone(),
        )?;
        for entry in manifest.entries() {
            if entry.status() == ManifestStatus::Deleted {
                continue;
            }
            let (Some(seq), Some(added_by)) = (entry.sequence_number(), entry.snapshot_id()) else {
                return Err(Error::file(
                    &manifest_file.manifest_path,
                    "live entry without sequence number",
                    "invalid manifest",
                ));
            };
            let file_seq = Some(entry.file_sequence_number.unwrap_or(seq));
            let key = FileEntryKey {
                path: entry.file_path().to_string(),
                content_offset: entry.data_file().content_offset(),
            };
            if removed.contains(&key) {
                found_removed += 1;
                writer.add_delete_file(entry.data_file().clone(), seq, file_seq)?;
            } else {
                writer.add_existing_file(entry.data_file().clone(), added_by, seq, file_seq)?;
            }
        }
        new_manifests.push(finish_manifest(&path, writer).await?);
    }
    if found_removed != changes.removed_files.len() {
        return Err(Error::CommitConflict {
            table: table.name.to_string(),
            message: format!(
                "{} of {} files to remove are no longer in their manifests",
                changes.removed_files.len() - found_removed,
                changes.removed_files.len()
            ),
        });
    }

    // Manifest list: new and rewritten manifests first, then the untouched ones.
    let list_path = new_metadata_file(&location, &format!("snap-{snapshot_id}-1"), "avro");
    let list_output = table.file_io.new_output(&list_path)?;
    written.push(list_path.clone());
    let first_row_id = metadata.next_row_id();
    let list_error = |e| Error::file(&list_path, "cannot write manifest list", e);
    let mut list_writer = ManifestListWriter::v3(
        list_output.writer().await.map_err(list_error)?,
        snapshot_id,
        base.snapshot_id,
        sequence_number,
        Some(first_row_id),
    );
    list_writer.add_manifests(new_manifests.into_iter().chain(kept_manifests))?;
    let added_rows = list_writer
        .next_row_id()
        .map(|next| next.saturating_sub(first_row_id))
        .unwrap_or(0);
    list_writer.close().await.map_err(list_error)?;

    let parent_summary = base
        .snapshot_id
        .and_then(|id| metadata.snapshot_by_id(id))
        .map(|parent| &parent.summary().additional_properties);
    let summary = summarize(base, parent_summary, changes);
    let snapshot = Snapshot::builder()
        .with_snapshot_id(snapshot_id)
        .with_parent_snapshot_id(base.snapshot_id)
        .with_sequence_number(sequence_number)
        .with_timestamp_ms(now_ms(metadata))
        .with_manifest_list(list_path)
        .with_summary(Summary {
            operation: changes.operation.clone(),
            additional_properties: summary.clone(),
        })
        .with_schema_id(metadata.current_schema_id())
        .with_row_range(first_row_id, added_rows)
        .build();
    let new_metadata = metadata
        .as_ref()
        .clone()
        .into_builder(Some(table.pointer.metadata_location.clone()))
        .set_branch_snapshot(snapshot, branch)?
        .build()?
        .metadata;
    Ok(PreparedSnapshot {
        metadata: new_metadata,
        snapshot_id,
        sequence_number,
        written_files: std::mem::take(written),
        summary,
    })
}

fn new_snapshot_id(metadata: &TableMetadata) -> i64 {
    let mut rng = rand::rng();
    loop {
        let id = rng.random_range(1..i64::MAX);
        if metadata.snapshot_by_id(id).is_none() {
            return id;
        }
    }
}

/// Wall-clock time, but never before the table's last update (clock skew between writers).
/// A v3 manifest writer of `content` at a new file in the table's metadata directory,
/// recorded in `written` first so that a build that fails later deletes it.
fn manifest_writer(
    table: &LoadedTable,
    written: &mut Vec<String>,
    snapshot_id: i64,
    content: ManifestContentType,
    schema: SchemaRef,
    spec: PartitionSpec,
) -> Result<(String, ManifestWriter)> {
    let path = new_metadata_file(table.location(), "eqdv", "avro");
    let output = table.file_io.new_output(&path)?;
    written.push(path.clone());
    let builder = ManifestWriterBuilder::new(output, Some(snapshot_id), schema, spec);
    let writer = match content {
        ManifestContentType::Data => builder.build_v3_data(),
        ManifestContentType::Deletes => builder.build_v3_deletes(),
    };
    Ok((path, writer))
}

async fn finish_manifest(path: &str, writer: ManifestWriter) -> Result<ManifestFile> {
    writer
        .write_manifest_file()
        .await
        .map_err(|e| Error::file(path, "cannot write manifest", e))
}

fn now_ms(metadata: &TableMetadata) -> i64 {
    let now = chrono::Utc::now().timestamp_millis();
    now.max(metadata.last_updated_ms() + 1)
}

#[derive(Default)]
struct Counts {
    data_files: u64,
    records: u64,
    files_size: u64,
    delete_files: u64,
    equality_delete_files: u64,
    equality_deletes: u64,
    position_delete_files: u64,
    dvs: u64,
    position_deletes: u64,
}

/// Summary keys of the added counters, in the order of [`Counts::values`].
const ADDED_KEYS: [&str; 9] = [
    "added-data-files",
    "added-records",
    "added-files-size",
    "added-delete-files",
    "added-equality-delete-files",
    "added-equality-deletes",
    "added-position-delete-files",
    "added-dvs",
    "added-position-deletes",
];

/// Summary keys of the removed counters, in the order of [`Counts::values`] (the spec
/// names two of them `deleted-`).
const REMOVED_KEYS: [&str; 9] = [
    "deleted-data-files",
    "deleted-records",
    "removed-files-size",
    "removed-delete-files",
    "removed-equality-delete-files",
    "removed-equality-deletes",
    "removed-position-delete-files",
    "removed-dvs",
    "removed-position-deletes",
];

impl Counts {
    fn of<'a>(files: impl IntoIterator<Item = &'a DataFile>) -> Self {
        let mut counts = Self::default();
        for f in files {
            counts.add(f);
        }
        counts
    }

    /// The counters in the order of [`ADDED_KEYS`] and [`REMOVED_KEYS`].
    fn values(&self) -> [u64; 9] {
        [
            self.data_files,
            self.records,
            self.files_size,
            self.delete_files,
            self.equality_delete_files,
            self.equality_deletes,
            self.position_delete_files,
            self.dvs,
            self.position_deletes,
        ]
    }

    fn add(&mut self, file: &DataFile) {
        match file.content_type() {
            DataContentType::Data => {
                self.data_files += 1;
                self.records += file.record_count();
                self.files_size += file.file_size_in_bytes();
            }
            DataContentType::EqualityDeletes => {
                self.delete_files += 1;
                self.equality_delete_files += 1;
                self.equality_deletes += file.record_count();
                self.files_size += file.file_size_in_bytes();
            }
            DataContentType::PositionDeletes => {
                self.delete_files += 1;
                self.position_deletes += file.record_count();
                if file.file_format() == DataFileFormat::Puffin {
                    self.dvs += 1;
                    // A DV occupies only its blob of the shared Puffin file.
                    self.files_size += file
                        .content_size_in_bytes()
                        .map(|s| s.max(0) as u64)
                        .unwrap_or_else(|| file.file_size_in_bytes());
                } else {
                    self.position_delete_files += 1;
                    self.files_size += file.file_size_in_bytes();
                }
            }
        }
    }
}

/// The standard summary counters. Totals are computed from the live files, not
/// inherited, except where `base` is a scoped read missing some data files: then the
/// data totals (records, data files, files size) are the parent's plus what was added
/// less what was removed, and are left out where the parent has none. The delete
/// totals are always exact: every delete manifest is read.
fn summarize(
    base: &TableFiles,
    parent: Option<&HashMap<String, String>>,
    changes: &SnapshotChanges,
) -> HashMap<String, String> {
    let added_files = || {
        changes
            .added_data_files
            .iter()
            .chain(&changes.added_delete_files)
            .map(|f| &f.file)
    };
    let added = Counts::of(added_files());
    let removed = Counts::of(changes.removed_files.iter().map(|f| &f.file));
    let removed_keys: HashSet<FileEntryKey> = changes
        .removed_files
        .iter()
        .map(|f| f.entry_key())
        .collect();
    let live = base
        .data_files
        .iter()
        .chain(&base.equality_deletes)
        .chain(base.dvs.values())
        .chain(&base.position_deletes)
        .filter(|f| !removed_keys.contains(&f.entry_key()))
        .map(|f| &f.file);
    let total = Counts::of(live.chain(added_files()));

    let mut s = HashMap::new();
    // The added and removed counters appear only when not zero.
    let changed = ADDED_KEYS
        .iter()
        .zip(added.values())
        .chain(REMOVED_KEYS.iter().zip(removed.values()));
    for (k, v) in changed {
        if v > 0 {
            s.insert(k.to_string(), v.to_string());
        }
    }
    // The data totals: exact, or after a scoped read the parent's moved by this change.
    let data_totals = [
        (
            "total-records",
            [total.records, added.records, removed.records],
        ),
        (
            "total-files-size",
            [total.files_size, added.files_size, removed.files_size],
        ),
        (
            "total-data-files",
            [total.data_files, added.data_files, removed.data_files],
        ),
    ];
    for (key, [exact, plus, minus]) in data_totals {
        let value = if base.skipped_data.is_partial() {
            parent
                .and_then(|p| p.get(key)?.parse::<u64>().ok())
                .map(|before| (before + plus).saturating_sub(minus))
        } else {
            Some(exact)
        };
        if let Some(value) = value {
            s.insert(key.to_string(), value.to_string());
        }
    }
    for (k, v) in [
        ("total-delete-files", total.delete_files),
        ("total-position-deletes", total.position_deletes),
        (TOTAL_EQUALITY_DELETES_PROPERTY, total.equality_deletes),
    ] {
        s.insert(k.to_string(), v.to_string());
    }
    for (k, v) in &changes.extra_summary {
        s.insert(k.clone(), v.clone());
    }
    s
}
