//! A fast decoder for Iceberg manifests (Avro object container files).
//!
//! iceberg-rust decodes a manifest through apache-avro's generic `Value` tree and serde:
//! about 15 µs per entry, so a 2,000-file table spends 25-40 ms of every conversion in
//! its data manifest alone (see BENCHMARKS.md). This decoder reads the container's
//! blocks straight into iceberg's `ManifestEntry`/`DataFile` with one pass over the
//! bytes, guided by the writer's schema, and skips the fields it does not know.
//!
//! It is an optimisation with a safety net, not a second source of truth: whatever it
//! does not handle exactly as iceberg-rust does (format v1, encrypted manifests, codecs
//! other than null/deflate/snappy/zstandard, unusual schemas or partition types) returns
//! [`DecodeError`], and [`load_manifest`] then parses the same bytes with iceberg-rust.
//! Tests compare both decoders entry by entry on manifests of every kind eqdv meets,
//! including Java's.
//!
//! `avro` reads the container and Avro values (`codec` decompresses its blocks);
//! `entries` turns the decoded records into iceberg's manifest entries.

mod avro;
mod codec;
mod entries;

use std::sync::Arc;

use iceberg::io::FileIO;
use iceberg::spec::{
    DataContentType, FormatVersion, Manifest, ManifestEntry, ManifestFile, ManifestMetadata,
    ManifestStatus, Struct,
};

use crate::{Error, Result};
use avro::{Container, Cursor};
use entries::{Context, EntryPlan};

/// Why the fast path declined a manifest (it is then parsed by iceberg-rust).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct DecodeError(String);

type Decoded<T> = std::result::Result<T, DecodeError>;

fn declined<T>(why: impl Into<String>) -> Decoded<T> {
    Err(DecodeError(why.into()))
}

/// Refuses an Avro file (a manifest list, a manifest, an Avro delete file) whose item
/// counts, lengths or blocks do not fit in its bytes, naming it. Run before apache-avro
/// reads a file: it sizes its collections by the counts it reads, so a few bytes of a
/// corrupt or hostile file could make it ask for gigabytes (and abort the process).
pub fn check_avro_file(path: &str, bytes: &[u8]) -> Result<()> {
    avro::check_container(bytes).map_err(|e| Error::file(path, "is not a well-formed Avro file", e))
}

/// Reads `manifest`'s metadata and entries, with the entries' inherited values filled
/// in from the manifest list as `ManifestFile::load_manifest` does, through the fast
/// decoder when it can. Entries are owned (not shared), so callers can move them.
pub async fn load_manifest(
    file_io: &FileIO,
    manifest: &ManifestFile,
) -> Result<(ManifestMetadata, Vec<ManifestEntry>)> {
    let path = &manifest.manifest_path;
    if manifest.key_metadata.is_some() {
        // Encrypted: iceberg-rust decrypts.
        return manifest
            .load_manifest(file_io)
            .await
            .map(owned_parts)
            .map_err(|e| Error::file(path, "cannot read manifest", e));
    }
    let bytes = read_manifest_bytes(file_io, manifest).await?;
    parse_manifest(manifest, &bytes)
}

/// An unencrypted manifest's whole file, a large one in parallel ranged reads.
pub async fn read_manifest_bytes(
    file_io: &FileIO,
    manifest: &ManifestFile,
) -> Result<bytes::Bytes> {
    crate::storage::read_all_sized(
        file_io,
        &manifest.manifest_path,
        u64::try_from(manifest.manifest_length).unwrap_or(0),
        crate::storage::PARALLEL_READ_CHUNK,
    )
    .await
}

/// A manifest whose partition spec is on a field its own schema dropped (Java writes
/// one when it rewrites entries of an older spec after the drop) cannot be read by
/// iceberg-rust, which types partition values from that schema: refused as the field
/// it cannot resolve, naming the manifest.
fn refuse_dropped_partition_source(path: &str, bytes: &[u8]) -> Result<()> {
    /// A field of the manifest's `partition-spec` (as much of it as is needed here).
    #[derive(serde::Deserialize)]
    struct SpecField {
        #[serde(rename = "source-id")]
        source_id: i32,
        name: String,
    }
    let Ok(container) = Container::parse(bytes) else {
        return Ok(());
    };
    let json = |key: &str| container.metadata.get(key).map(Vec::as_slice);
    let (Some(schema), Some(spec)) = (json("schema"), json("partition-spec")) else {
        return Ok(());
    };
    let (Ok(schema), Ok(spec)) = (
        serde_json::from_slice::<iceberg::spec::Schema>(schema),
        serde_json::from_slice::<Vec<SpecField>>(spec),
    ) else {
        return Ok(());
    };
    match spec
        .into_iter()
        .find(|f| schema.field_by_id(f.source_id).is_none())
    {
        None => Ok(()),
        Some(field) => Err(Error::FieldUnresolvable {
            path: path.to_string(),
            message: format!(
                "partition field {} is on a source field that was dropped from the \
                 manifest's schema; eqdv cannot read its partition values, so the table is \
                 not converted",
                field.name
            ),
            field: field.name,
            field_id: field.source_id,
        }),
    }
}

/// [`load_manifest`] of bytes already read (an unencrypted manifest's whole file).
pub fn parse_manifest(
    manifest: &ManifestFile,
    bytes: &[u8],
) -> Result<(ManifestMetadata, Vec<ManifestEntry>)> {
    let path = &manifest.manifest_path;
    let (metadata, mut entries) = match decode_manifest(bytes) {
        Ok(decoded) => decoded,
        Err(why) => {
            tracing::debug!(manifest = %path, reason = %why, "manifest decoded by iceberg-rust");
            check_avro_file(path, bytes)?;
            refuse_dropped_partition_source(path, bytes)?;
            Manifest::parse_avro(bytes)
                .map(owned_parts)
                .map_err(|e| Error::file(path, "cannot parse manifest", e))?
        }
    };
    for entry in &mut entries {
        inherit(entry, manifest);
    }
    Ok((metadata, entries))
}

/// What decides whether a manifest entry is kept, known before its counts and bounds
/// are decoded: its status, its sequence number (inherited from the manifest list entry
/// where it is null and may be), its content, its partition and its file's path.
pub struct EntryHead<'a> {
    pub status: ManifestStatus,
    pub sequence_number: Option<i64>,
    pub content: DataContentType,
    pub partition: &'a Struct,
    pub path: &'a str,
}

impl<'a> EntryHead<'a> {
    /// The head of a decoded entry whose inherited values are filled in.
    pub fn of(entry: &'a ManifestEntry) -> Self {
        EntryHead {
            status: entry.status(),
            sequence_number: entry.sequence_number(),
            content: entry.content_type(),
            partition: entry.data_file().partition(),
            path: entry.data_file().file_path(),
        }
    }
}

/// Whether to keep an entry, by its head.
pub type KeepEntry<'a> = &'a (dyn Fn(&EntryHead<'_>) -> bool + Sync);

/// The entries of a manifest that a [`KeepEntry`] kept, with their inherited values.
pub struct KeptEntries {
    pub entries: Vec<ManifestEntry>,
    /// Entries listing a live file (not deleted), kept or not.
    pub live: usize,
}

impl KeptEntries {
    /// What `keep` keeps of `entries`, all of them decoded (by a decoder that cannot
    /// skip entries as it goes), with the count of live ones before the cut.
    pub fn of(mut entries: Vec<ManifestEntry>, keep: KeepEntry<'_>) -> Self {
        let live = entries
            .iter()
            .filter(|e| e.status() != ManifestStatus::Deleted)
            .count();
        entries.retain(|e| keep(&EntryHead::of(e)));
        Self { entries, live }
    }
}

/// [`parse_manifest`] keeping only the entries `keep` keeps: the fast decoder skips
/// the others as soon as their partition is read, so a shard pays little for the files
/// of other partitions in the manifests it must read.
pub fn parse_manifest_kept(
    manifest: &ManifestFile,
    bytes: &[u8],
    keep: KeepEntry<'_>,
) -> Result<KeptEntries> {
    let path = &manifest.manifest_path;
    match decode_entries(bytes, Some((keep, manifest.sequence_number))) {
        Ok((_, mut entries, live)) => {
            for entry in &mut entries {
                inherit(entry, manifest);
            }
            // What the decoder could not leave out early (see `EntryPlan::decide_early`).
            entries.retain(|e| keep(&EntryHead::of(e)));
            Ok(KeptEntries { entries, live })
        }
        Err(why) => {
            tracing::debug!(manifest = %path, reason = %why, "manifest decoded by iceberg-rust");
            check_avro_file(path, bytes)?;
            refuse_dropped_partition_source(path, bytes)?;
            let (_, mut entries) = Manifest::parse_avro(bytes)
                .map(owned_parts)
                .map_err(|e| Error::file(path, "cannot parse manifest", e))?;
            for entry in &mut entries {
                inherit(entry, manifest);
            }
            Ok(KeptEntries::of(entries, keep))
        }
    }
}

fn owned_parts(manifest: Manifest) -> (ManifestMetadata, Vec<ManifestEntry>) {
    let (entries, metadata) = manifest.into_parts();
    let entries = entries
        .into_iter()
        .map(|e| Arc::try_unwrap(e).unwrap_or_else(|shared| (*shared).clone()))
        .collect();
    (metadata, entries)
}

/// The values an entry inherits from its manifest list entry when they are null (the
/// rules of iceberg-rust's `ManifestEntry::inherit_data`, which is crate-private).
fn inherit(entry: &mut ManifestEntry, manifest: &ManifestFile) {
    if entry.snapshot_id.is_none() {
        entry.snapshot_id = Some(manifest.added_snapshot_id);
    }
    entry.sequence_number = inherited_sequence_number(
        entry.status,
        entry.sequence_number,
        manifest.sequence_number,
    );
    entry.file_sequence_number = inherited_sequence_number(
        entry.status,
        entry.file_sequence_number,
        manifest.sequence_number,
    );
}

/// An entry's sequence number (or file sequence number): its own, or where it is null
/// and the entry may inherit it (an added entry, or a manifest of the initial sequence
/// number), the manifest's.
fn inherited_sequence_number(
    status: ManifestStatus,
    explicit: Option<i64>,
    manifest_sequence_number: i64,
) -> Option<i64> {
    const INITIAL_SEQUENCE_NUMBER: i64 = 0;
    let inherits =
        status == ManifestStatus::Added || manifest_sequence_number == INITIAL_SEQUENCE_NUMBER;
    explicit.or(inherits.then_some(manifest_sequence_number))
}

/// Decodes a manifest's metadata and entries (inherited values left null, as in the
/// file). Declines anything it does not decode exactly as iceberg-rust would.
pub fn decode_manifest(bytes: &[u8]) -> Decoded<(ManifestMetadata, Vec<ManifestEntry>)> {
    decode_entries(bytes, None).map(|(metadata, entries, _)| (metadata, entries))
}

/// [`decode_manifest`] with the entries `keep` leaves out skipped (given the manifest's
/// sequence number for inheritance), and the count of live entries.
fn decode_entries(
    bytes: &[u8],
    keep: Option<(KeepEntry<'_>, i64)>,
) -> Decoded<(ManifestMetadata, Vec<ManifestEntry>, usize)> {
    let container = Container::parse(bytes)?;
    let metadata = ManifestMetadata::parse(&container.metadata)
        .map_err(|e| DecodeError(format!("manifest metadata: {e}")))?;
    if metadata.format_version == FormatVersion::V1 {
        return declined("format v1 manifest");
    }
    let partition_type = metadata
        .partition_spec
        .partition_type(&metadata.schema)
        .map_err(|e| DecodeError(format!("partition type: {e}")))?;
    let writer = container.writer_schema()?;
    let plan = EntryPlan::new(&writer, &partition_type)?;
    let context = Context {
        schema: &metadata.schema,
        partition_type: &partition_type,
        spec_id: metadata.partition_spec.spec_id(),
        keep,
    };
    let mut entries = Vec::new();
    let mut live = 0;
    for block in container.blocks() {
        let block = block?;
        let data = container.codec.decompress(block.data)?;
        avro::fits(block.count, writer.min_size(), data.len())?;
        let mut cursor = Cursor::new(&data);
        if context.keep.is_none() {
            entries.reserve(block.count);
        }
        for _ in 0..block.count {
            let (is_live, entry) = plan.decode(&mut cursor, &context)?;
            live += usize::from(is_live);
            entries.extend(entry);
        }
        if !cursor.is_empty() {
            return declined("bytes left over after a block's entries");
        }
    }
    Ok((metadata, entries, live))
}
