//! Reading a table: its metadata, a branch head, and the live files of a snapshot with
//! their data sequence numbers, split by what they are (data, equality deletes, DVs,
//! v2 position deletes).
//!
//! Read-only: nothing here writes. Sequence numbers come from the manifest list by
//! inheritance, never guessed.

use std::collections::HashMap;
use std::str::FromStr;
use std::sync::Arc;

use iceberg::MetadataLocation;
use iceberg::io::FileIO;
use iceberg::spec::{
    DEFAULT_SCHEMA_NAME_MAPPING, FormatVersion, ManifestEntry, ManifestFile, NameMapping,
    NestedFieldRef, PrimitiveType, SnapshotRef, TableMetadata, TableMetadataRef, Type,
};

use crate::catalog::{Catalog, TableName, TablePointer};
use crate::{Error, Result};

mod kept_reads;
mod live_files;
mod scope;

pub use kept_reads::{
    KEPT_ACROSS_INVOCATIONS_MAX_BYTES, KEPT_FOR_INVOCATIONS, KEPT_READS_MAX_BYTES, KeptReads,
};
pub use live_files::{
    DataSelection, FileEntryKey, LiveFile, PathFilter, SkippedData, TableFiles, has_no_live_files,
};
pub(crate) use live_files::{MANIFEST_READS_IN_FLIGHT, read_manifest_list};
pub use scope::{DataScope, PartitionTarget};

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

impl LoadedTable {
    /// Where the metadata file of the commit after this table state, holding
    /// `metadata`, goes: the next version number with a new UUID (and the compression
    /// `metadata`'s properties ask).
    pub fn next_metadata_location(&self, metadata: &TableMetadata) -> Result<MetadataLocation> {
        let current = MetadataLocation::from_str(&self.pointer.metadata_location).map_err(|e| {
            Error::file(
                &self.pointer.metadata_location,
                "metadata location does not follow <table>/metadata/<version>-<uuid>.metadata.json",
                e,
            )
        })?;
        Ok(current.with_next_version().with_new_metadata(metadata))
    }

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
        if !self.kept_reads.is_on() {
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
        if manifest.key_metadata.is_some() || !self.kept_reads.is_on() {
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
