//! Building a new snapshot on a base: manifests, manifest list, summary and the new
//! table metadata (and, with [`build_and_write_snapshot`], its metadata file). Writes
//! only new, uniquely named files and never touches the catalog; `commit` decides
//! whether the result is swapped in.
//!
//! Manifests that hold a removed entry are rewritten with that entry DELETED and the
//! others EXISTING (sequence numbers kept); manifests with no live entry are dropped;
//! delete manifests are merged once a spec has many (`merge`); every other manifest is
//! reused as is. `summary` computes the snapshot summary.

pub mod manifest_encode;
mod merge;
pub mod summary;

pub use merge::{
    MERGE_ENABLED_PROPERTY, MIN_COUNT_TO_MERGE_PROPERTY, MergePolicy, TARGET_SIZE_PROPERTY,
};

use std::collections::{HashMap, HashSet};

use futures::{FutureExt, StreamExt, TryStreamExt};
use iceberg::io::FileIO;
use iceberg::spec::{
    DataFile, ManifestContentType, ManifestFile, ManifestListWriter, ManifestStatus,
    ManifestWriterBuilder, Operation, PartitionSpec, SchemaRef, Snapshot, Summary, TableMetadata,
};
use rand::Rng;

use crate::storage::new_metadata_file;
use crate::table::{FileEntryKey, LiveFile, LoadedTable, TableFiles};
use crate::{Error, Result};
use manifest_encode::EntryWriter;

pub use crate::summary_keys::{
    CONVERTED_FROM_PROPERTY, SHARD_PROPERTY, SOURCE_PROPERTY, SPLIT_PROPERTY,
    TOTAL_EQUALITY_DELETES_PROPERTY, TOTAL_FILES_SIZE_PROPERTY,
};

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
    /// Table properties the new metadata sets (a key index's location).
    pub set_properties: Vec<PropertyUpdate>,
}

/// A table property that a snapshot's metadata sets, as long as the metadata it is
/// built on still holds `expected` there: another writer's newer value is kept, and the
/// files behind this one are left unreferenced (the caller removes them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PropertyUpdate {
    pub key: String,
    pub value: String,
    pub expected: Option<String>,
    /// Files the new value names that nothing else references.
    pub files: Vec<String>,
}

impl PropertyUpdate {
    /// Whether `metadata` still holds the value this update was made against.
    pub fn applies_to(&self, metadata: &TableMetadata) -> bool {
        metadata.properties().get(&self.key) == self.expected.as_ref()
    }
}

impl SnapshotChanges {
    pub fn new(operation: Operation) -> Self {
        Self {
            operation,
            added_data_files: Vec::new(),
            added_delete_files: Vec::new(),
            removed_files: Vec::new(),
            extra_summary: HashMap::new(),
            set_properties: Vec::new(),
        }
    }
}

/// A snapshot ready to be committed: its metadata plus every file written for it.
#[derive(Clone, Debug)]
pub struct PreparedSnapshot {
    pub metadata: TableMetadata,
    pub snapshot_id: i64,
    pub sequence_number: i64,
    /// Manifests and manifest list written for this snapshot, and its metadata file when
    /// [`build_and_write_snapshot`] wrote it (to delete if it never lands).
    pub written_files: Vec<String>,
    pub summary: HashMap<String, String>,
    /// What the metadata builder changed from the base (the snapshot, its branch, the
    /// properties): a commit to a catalog that takes changes sends them.
    pub updates: Vec<iceberg::TableUpdate>,
}

/// A prepared snapshot whose files are all written: all that is left is the commit
/// (`commit::publish_written`). For a catalog that takes a pointer swap its
/// metadata file is written too (`metadata_location`, among `written_files`); a catalog
/// that takes changes writes its own.
#[derive(Clone, Debug)]
pub struct WrittenSnapshot {
    pub prepared: PreparedSnapshot,
    pub metadata_location: Option<String>,
}

/// Builds a snapshot of `changes` on top of `base` (the branch head that `base` was read from).
pub async fn build_snapshot(
    table: &LoadedTable,
    branch: &str,
    base: &TableFiles,
    changes: &SnapshotChanges,
) -> Result<PreparedSnapshot> {
    Ok(build(table, branch, base, changes, false).await?.0)
}

/// [`build_snapshot`], and (when `write_metadata`: the catalog takes a pointer swap)
/// the new metadata file written in the same round trip as the manifests and the
/// manifest list: nothing references it until the pointer is swapped, so writing it
/// before the others have landed is as safe as after, and the commit waits for one
/// round of uploads instead of two.
pub async fn build_and_write_snapshot(
    table: &LoadedTable,
    branch: &str,
    base: &TableFiles,
    changes: &SnapshotChanges,
    write_metadata: bool,
) -> Result<WrittenSnapshot> {
    let (prepared, metadata_location) = build(table, branch, base, changes, write_metadata).await?;
    Ok(WrittenSnapshot {
        prepared,
        metadata_location,
    })
}

async fn build(
    table: &LoadedTable,
    branch: &str,
    base: &TableFiles,
    changes: &SnapshotChanges,
    write_metadata: bool,
) -> Result<(PreparedSnapshot, Option<String>)> {
    // Built on anything but the branch's head as loaded, the swap would silently drop
    // every snapshot between the two.
    // (A branch that does not exist yet has no head: this snapshot creates it.)
    let head = table
        .metadata
        .snapshot_for_ref(branch)
        .map(|s| s.snapshot_id());
    if head != base.snapshot_id {
        return Err(Error::InvalidInput(format!(
            "refusing to build a snapshot of table {} on snapshot {:?}: the head of branch '{branch}' is {head:?}",
            table.name, base.snapshot_id
        )));
    }
    let mut written = Vec::new();
    let result = build_inner(table, branch, base, changes, write_metadata, &mut written).await;
    if result.is_err() {
        crate::storage::delete_files(&table.file_io, table.location(), &written).await;
    }
    result
}

async fn build_inner(
    table: &LoadedTable,
    branch: &str,
    base: &TableFiles,
    changes: &SnapshotChanges,
    write_metadata: bool,
    written: &mut Vec<String>,
) -> Result<(PreparedSnapshot, Option<String>)> {
    let metadata = &table.metadata;
    let snapshot_id = new_snapshot_id(metadata);
    let sequence_number = metadata.next_sequence_number();
    let schema = metadata.current_schema().clone();
    let location = table.location().to_string();

    // Every manifest this snapshot writes, finished together at the end: the new ones
    // first, then those rewritten or merged from the base. They and the manifest list
    // are written to memory first (the list needs each manifest's length), then
    // uploaded together: one round trip to object storage, not one for the manifests
    // and one more for the list.
    let staging = FileIO::new_with_memory();
    let mut pending: Vec<(String, EntryWriter)> = Vec::new();

    // New manifests: one per (content, spec).
    let mut new_delete_manifests_by_spec: HashMap<i32, usize> = HashMap::new();
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
            let spec = table.partition_spec(spec_id)?;
            let (path, mut writer) = manifest_writer(
                table,
                &staging,
                written,
                snapshot_id,
                content,
                schema.clone(),
                spec.as_ref().clone(),
            )?;
            for file in &by_spec[&spec_id] {
                writer.add_file((*file).clone())?;
            }
            if content == ManifestContentType::Deletes {
                *new_delete_manifests_by_spec.entry(spec_id).or_default() += 1;
            }
            pending.push((path, writer));
        }
    }

    // The base's manifests: dropped when nothing in them is live any more, rewritten
    // when they hold a removed entry, merged when a spec has many (see `merge`).
    let mut removed_by_manifest: HashMap<&str, HashSet<FileEntryKey>> = HashMap::new();
    for removed in &changes.removed_files {
        removed_by_manifest
            .entry(removed.manifest_path.as_str())
            .or_default()
            .insert(removed.entry_key());
    }
    let live_deletes = merge::live_entries_by_manifest(
        base.equality_deletes
            .iter()
            .chain(base.dvs.values())
            .chain(&base.position_deletes),
    );
    let mut kept_manifests: Vec<ManifestFile> = Vec::new();
    let mut rewrite_from_file: Vec<&ManifestFile> = Vec::new();
    let mut from_memory_by_spec: HashMap<i32, Vec<&ManifestFile>> = HashMap::new();
    let mut delete_manifests_by_spec = new_delete_manifests_by_spec;
    let mut partition_types = HashMap::new();
    for manifest_file in &base.manifests {
        let path = manifest_file.manifest_path.as_str();
        let removes = removed_by_manifest.contains_key(path);
        if manifest_file.content != ManifestContentType::Deletes {
            if removes {
                rewrite_from_file.push(manifest_file);
            } else if !crate::table::has_no_live_files(manifest_file) {
                kept_manifests.push(manifest_file.clone());
            }
            continue;
        }
        // Every delete manifest of the base was read: what is not among its live
        // files is not live, and a manifest with none left is not carried (as Java).
        let Some(live) = live_deletes.get(path) else {
            continue;
        };
        *delete_manifests_by_spec
            .entry(manifest_file.partition_spec_id)
            .or_default() += 1;
        let spec_id = manifest_file.partition_spec_id;
        let partition_type = match partition_types.get(&spec_id) {
            Some(t) => t,
            None => {
                let t = table.partition_spec(spec_id)?.partition_type(&schema)?;
                partition_types.entry(spec_id).or_insert(t)
            }
        };
        if merge::writable_from_memory(live, partition_type) {
            from_memory_by_spec
                .entry(spec_id)
                .or_default()
                .push(manifest_file);
        } else if removes {
            rewrite_from_file.push(manifest_file);
        } else {
            kept_manifests.push(manifest_file.clone());
        }
    }

    // Delete manifests written again from their live entries in memory: alone when
    // they hold a removed entry, or merged with others of their spec.
    let policy = merge::MergePolicy::from_properties(metadata.properties());
    let mut found_removed = 0usize;
    let mut spec_ids: Vec<i32> = from_memory_by_spec.keys().copied().collect();
    spec_ids.sort_unstable();
    for spec_id in spec_ids {
        let candidates = &from_memory_by_spec[&spec_id];
        let total = delete_manifests_by_spec.get(&spec_id).copied().unwrap_or(0);
        let rewritten: Vec<bool> = candidates
            .iter()
            .map(|m| removed_by_manifest.contains_key(m.manifest_path.as_str()))
            .collect();
        for bin in policy.bins_rewriting(candidates, total, &rewritten) {
            let sources: Vec<&ManifestFile> = bin.iter().map(|&i| candidates[i]).collect();
            let removes = sources
                .iter()
                .any(|m| removed_by_manifest.contains_key(m.manifest_path.as_str()));
            if let [only] = sources[..]
                && !removes
            {
                kept_manifests.push(only.clone());
                continue;
            }
            let spec = table.partition_spec(spec_id)?;
            let (path, mut writer) = manifest_writer(
                table,
                &staging,
                written,
                snapshot_id,
                ManifestContentType::Deletes,
                schema.clone(),
                spec.as_ref().clone(),
            )?;
            for source in &sources {
                let removed = removed_by_manifest.get(source.manifest_path.as_str());
                for live in &live_deletes[source.manifest_path.as_str()] {
                    let goes = removed.is_some_and(|r| r.contains(&live.entry_key()));
                    found_removed += usize::from(goes);
                    writer.carry(
                        live.file.clone(),
                        live.snapshot_id,
                        live.data_sequence_number,
                        live.file_sequence_number,
                        goes,
                    )?;
                }
            }
            pending.push((path, writer));
        }
    }

    // Manifests rewritten from their own file (data manifests, and delete manifests
    // whose partition tuples predate a type promotion), read at once.
    // Owned and boxed: a stream of closures borrowing from here would not be provably Send.
    let loads: Vec<futures::future::BoxFuture<'static, Result<_>>> = rewrite_from_file
        .iter()
        .map(|m| {
            let (file_io, manifest_file) = (table.file_io.clone(), (*m).clone());
            async move {
                let loaded =
                    crate::manifest_decode::load_manifest(&file_io, &manifest_file).await?;
                Ok((manifest_file, loaded))
            }
            .boxed()
        })
        .collect();
    let loaded: Vec<_> = futures::stream::iter(loads)
        .buffered(crate::table::MANIFEST_READS_IN_FLIGHT)
        .try_collect()
        .await?;
    for (manifest_file, (manifest_metadata, entries)) in loaded {
        let removed = &removed_by_manifest[manifest_file.manifest_path.as_str()];
        let (path, mut writer) = manifest_writer(
            table,
            &staging,
            written,
            snapshot_id,
            manifest_file.content,
            manifest_metadata.schema.clone(),
            manifest_metadata.partition_spec.clone(),
        )?;
        for entry in entries {
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
            let file_seq = entry.file_sequence_number.unwrap_or(seq);
            let key = FileEntryKey {
                path: entry.file_path().to_string(),
                content_offset: entry.data_file().content_offset(),
            };
            let goes = removed.contains(&key);
            found_removed += usize::from(goes);
            writer.carry(entry.data_file, added_by, seq, file_seq, goes)?;
        }
        pending.push((path, writer));
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
    let new_manifests = futures::future::try_join_all(
        pending
            .into_iter()
            .map(|(path, writer)| async move { writer.finish(&path).await }),
    )
    .await?;

    // Manifest list: new and rewritten manifests first, then the untouched ones.
    let list_path = new_metadata_file(&location, &format!("snap-{snapshot_id}-1"), "avro");
    let list_output = staging.new_output(&list_path)?;
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
    let summary = summary::summarize(base, parent_summary, changes);
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
    let properties: HashMap<String, String> = changes
        .set_properties
        .iter()
        .filter(|p| p.applies_to(metadata))
        .map(|p| (p.key.clone(), p.value.clone()))
        .collect();
    let mut builder = metadata
        .as_ref()
        .clone()
        .into_builder(Some(table.pointer.metadata_location.clone()))
        .set_branch_snapshot(snapshot, branch)?;
    if !properties.is_empty() {
        builder = builder.set_properties(properties)?;
    }
    let built = builder.build()?;
    let (new_metadata, updates) = (built.metadata, built.changes);
    let metadata_location = if write_metadata {
        let next = table.next_metadata_location(&new_metadata)?;
        let location = next.to_string();
        written.push(location.clone());
        new_metadata
            .write_to(&staging, &next)
            .await
            .map_err(|e| Error::file(&location, "cannot encode new metadata", e))?;
        Some(location)
    } else {
        None
    };
    upload_staged(&staging, &table.file_io, written).await?;
    let prepared = PreparedSnapshot {
        metadata: new_metadata,
        snapshot_id,
        sequence_number,
        written_files: std::mem::take(written),
        summary,
        updates,
    };
    Ok((prepared, metadata_location))
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

/// A v3 manifest writer of `content` at a new file in the table's metadata directory,
/// recorded in `written` first so that a build that fails later deletes it.
fn manifest_writer(
    table: &LoadedTable,
    staging: &FileIO,
    written: &mut Vec<String>,
    snapshot_id: i64,
    content: ManifestContentType,
    schema: SchemaRef,
    spec: PartitionSpec,
) -> Result<(String, EntryWriter)> {
    let path = new_metadata_file(table.location(), "eqdv", "avro");
    let output = staging.new_output(&path)?;
    written.push(path.clone());
    let partition_type = spec.partition_type(&schema)?;
    let builder = ManifestWriterBuilder::new(output, Some(snapshot_id), schema, spec);
    let header = match content {
        ManifestContentType::Data => builder.build_v3_data(),
        ManifestContentType::Deletes => builder.build_v3_deletes(),
    };
    let writer = EntryWriter::new(
        header,
        &path,
        staging,
        snapshot_id,
        content,
        &partition_type,
    );
    Ok((path, writer))
}

/// Uploads the files `staging` holds at the paths of `written` to `file_io`, all at
/// once. Every upload runs to its end before an error is returned, so that the files
/// the caller then removes are not still being written.
async fn upload_staged(staging: &FileIO, file_io: &FileIO, written: &[String]) -> Result<()> {
    let uploads = written.iter().map(|path| async move {
        let bytes = staging.new_input(path)?.read().await?;
        file_io
            .new_output(path)?
            .write(bytes)
            .await
            .map_err(|e| Error::file(path, "cannot write snapshot file", e))
    });
    futures::future::join_all(uploads)
        .await
        .into_iter()
        .collect::<Result<Vec<()>>>()?;
    Ok(())
}

/// Wall-clock time, but never before the table's last update (clock skew between writers).
fn now_ms(metadata: &TableMetadata) -> i64 {
    let now = chrono::Utc::now().timestamp_millis();
    now.max(metadata.last_updated_ms() + 1)
}
