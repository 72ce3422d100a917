//! A persisted key index: for one equality field set, every row of the data files it
//! covers as (key hash -> data file, position), so that resolving a few deleted keys
//! reads the few data files that hold them instead of every file whose bounds cannot
//! rule the keys out.
//!
//! Layout (docs/design.md, "The key index", says where it follows Iceberg's draft index
//! spec and where it departs): an index metadata file (`format`) names runs; a run is a
//! set of immutable Parquet leaf files sorted by key hash (`leaf`) and the list of data
//! files it covers. The table property `eqdv.key-index.location.<ids>` names the index
//! metadata file; eqdv sets it only in the metadata of its own conversion commit, so a
//! failed or lost commit leaves no pointer to files that were cleaned up.
//!
//! The index is an accelerator and never decides a result: the snapshot being
//! converted does. A lookup only rules out data files the index covers (same path and
//! size) and names none of the deleted keys' hashes; every other file is read as
//! without an index, live files it does not cover included. An index that cannot be
//! read or reconciled with the table (another key type, name mapping, format or table)
//! is bypassed with a log line and a metric, and rebuilt by the next conversion that
//! maintains it (`maintain`).

mod build;
pub mod format;
pub mod hash;
pub mod leaf;
mod lookup;
mod maintain;
mod part;
mod verify;

use std::collections::HashMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

pub use build::DEFAULT_LEAF_ENTRIES;
pub use format::{IndexMetadata, KEY_HASH};
pub use lookup::{IndexHits, OpenIndex, open_index};
pub use maintain::{IndexUpdate, Upkeep, update_index};
pub use part::{IndexKey, part_of_file, part_of_group};
pub use verify::{IndexVerification, verify_indexes};

use crate::table::LoadedTable;
use format::KeyFieldType;

/// Table property setting the key index's mode for one table (`true`, `false` or
/// `auto`, see [`KeyIndexMode`]), whatever the conversion's options say.
pub const ENABLED_PROPERTY: &str = "eqdv.key-index.enabled";
/// Table property: how many data files make an index worth building where there is
/// none. In mode `auto`, the fewest data files a conversion read in vain (holding none
/// of its deleted keys: what the index would have spared it); in mode `true`, the
/// fewest live data files in its scope. Below it a scan costs less.
pub const MIN_FILES_PROPERTY: &str = "eqdv.key-index.min-files";
/// Prefix of the table property naming the index of one equality field set, followed by
/// the field ids joined by commas (`eqdv.key-index.location.1,3`), and for a part of a
/// partitioned table's index by the part ([`IndexKey::property`]).
pub const LOCATION_PROPERTY_PREFIX: &str = "eqdv.key-index.location.";

/// The default of [`MIN_FILES_PROPERTY`].
pub const DEFAULT_MIN_FILES: u64 = 16;

/// Whether conversions use and keep a key index, and when they build one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KeyIndexMode {
    /// Neither look keys up in an index nor keep one.
    Off,
    /// Where it pays (the default): look keys up in the index the table has and keep it
    /// up to date; build one only after a conversion that read at least `min_files` data
    /// files holding none of its deleted keys. A table whose bounds prune well never gets
    /// one, nor does one whose every file holds some deleted key (a few big files): the
    /// index could not spare those reads.
    #[default]
    Auto,
    /// Look keys up and keep the index; build it in the first conversion with at least
    /// `min_files` live data files in scope.
    On,
}

impl std::str::FromStr for KeyIndexMode {
    type Err = String;

    fn from_str(value: &str) -> std::result::Result<Self, String> {
        match value.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(Self::Auto),
            "true" | "on" | "1" | "yes" => Ok(Self::On),
            "false" | "off" | "0" | "no" => Ok(Self::Off),
            other => Err(format!(
                "'{other}' is not a key index mode (auto, true or false)"
            )),
        }
    }
}

/// Whether and when conversions use and keep a key index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyIndexOptions {
    /// See [`KeyIndexMode`]; the table's [`ENABLED_PROPERTY`] overrides it.
    pub mode: KeyIndexMode,
    /// See [`MIN_FILES_PROPERTY`] (which overrides it).
    pub min_files: u64,
    /// Entries per leaf file written.
    pub leaf_entries: usize,
    /// The parts a partitioned table's index is kept in when the table has no
    /// `eqdv.queue-groups` property: the deployment's queue groups
    /// ([`crate::plan::PlanOptions::default_queue_groups`]), so that a shard is one part.
    pub default_parts: u64,
}

impl Default for KeyIndexOptions {
    fn default() -> Self {
        Self {
            mode: KeyIndexMode::default(),
            min_files: DEFAULT_MIN_FILES,
            leaf_entries: DEFAULT_LEAF_ENTRIES,
            default_parts: crate::plan::QUEUE_GROUPS,
        }
    }
}

impl KeyIndexOptions {
    /// The index on from the first file on (`On`, `min_files` 1): for tests and for
    /// callers that want it whatever the table's size.
    pub fn always() -> Self {
        Self {
            mode: KeyIndexMode::On,
            min_files: 1,
            ..Default::default()
        }
    }

    /// Whether keys are looked up in the table's index and the index is kept.
    pub fn enabled(&self) -> bool {
        self.mode != KeyIndexMode::Off
    }

    /// Whether a conversion builds an index where there is none: `live_files` in its
    /// scope, of which its resolve read `read_in_vain` that hold none of its keys.
    pub fn builds(&self, live_files: u64, read_in_vain: u64) -> bool {
        match self.mode {
            KeyIndexMode::Off => false,
            KeyIndexMode::Auto => read_in_vain >= self.min_files,
            KeyIndexMode::On => live_files >= self.min_files,
        }
    }

    /// The parts `table`'s index is kept in: its queue groups (one part, the whole
    /// table, when they are one or the property cannot be read).
    pub fn parts(&self, table: &LoadedTable) -> u64 {
        crate::plan::queue_groups_of(table, self.default_parts).unwrap_or(1)
    }

    /// These options with the table's properties applied (a value that is not a mode
    /// leaves the options' own).
    pub fn for_table(&self, table: &LoadedTable) -> Self {
        let props = table.metadata.properties();
        let mut options = self.clone();
        if let Some(mode) = props
            .get(ENABLED_PROPERTY)
            .and_then(|v| v.parse::<KeyIndexMode>().ok())
        {
            options.mode = mode;
        }
        if let Some(min) = props
            .get(MIN_FILES_PROPERTY)
            .and_then(|v| v.trim().parse::<u64>().ok())
        {
            options.min_files = min;
        }
        options
    }
}

/// What a table is now, as far as its index's keys read and hash: an index written
/// under another fingerprint is bypassed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyFingerprint {
    pub table_uuid: String,
    pub equality_ids: Vec<i32>,
    /// The part of the index ([`IndexKey::part`]).
    pub part: String,
    /// The parts of the table's index now, when known: a part written for another
    /// count holds other partitions.
    pub parts: Option<u64>,
    pub key_types: Vec<KeyFieldType>,
    pub name_mapping: Option<String>,
}

impl KeyFingerprint {
    /// The fingerprint of `table`'s current schema for the index `key`, of an index in
    /// `parts` parts (`None`: any).
    pub fn of(table: &LoadedTable, key: &IndexKey, parts: Option<u64>) -> Self {
        let equality_ids = &key.equality_ids;
        let schema = table.metadata.current_schema();
        Self {
            table_uuid: table.metadata.uuid().to_string(),
            equality_ids: equality_ids.to_vec(),
            part: key.part.clone(),
            parts,
            key_types: equality_ids
                .iter()
                .map(|id| KeyFieldType {
                    id: *id,
                    field_type: schema
                        .field_by_id(*id)
                        .map_or_else(|| "missing".to_string(), |f| f.field_type.to_string()),
                })
                .collect(),
            name_mapping: table
                .metadata
                .properties()
                .get(iceberg::spec::DEFAULT_SCHEMA_NAME_MAPPING)
                .cloned(),
        }
    }

    /// Why an index written as `metadata` cannot serve this table, if it cannot.
    pub fn mismatch(&self, metadata: &IndexMetadata) -> Option<String> {
        if !format::READABLE_VERSIONS.contains(&metadata.format_version) {
            return Some(format!(
                "format version {} (this eqdv reads {})",
                metadata.format_version,
                format::FORMAT_VERSION
            ));
        }
        if metadata.key_hash != KEY_HASH {
            return Some(format!(
                "key hash {} (this eqdv hashes {KEY_HASH})",
                metadata.key_hash
            ));
        }
        if metadata.table_uuid != self.table_uuid {
            return Some(format!("written for table {}", metadata.table_uuid));
        }
        if metadata.equality_ids != self.equality_ids {
            return Some(format!("equality ids {:?}", metadata.equality_ids));
        }
        if metadata.part.as_deref().unwrap_or("") != self.part {
            return Some(format!(
                "written as part {:?}, named as part {:?}",
                metadata.part.as_deref().unwrap_or(""),
                self.part
            ));
        }
        if let Some(parts) = self.parts
            && !self.part.is_empty()
            && metadata.parts != Some(parts)
        {
            return Some(format!(
                "written as a part of {} parts, the table's index is in {parts}",
                metadata
                    .parts
                    .map_or_else(|| "?".to_string(), |p| p.to_string())
            ));
        }
        if metadata.key_types != self.key_types {
            return Some(format!(
                "key types {:?}, the table's are {:?}",
                metadata.key_types, self.key_types
            ));
        }
        if metadata.name_mapping != self.name_mapping {
            return Some("the table's name mapping changed since it was written".into());
        }
        None
    }
}

/// The index of one equality field set as a conversion found it.
#[derive(Clone, Debug)]
pub enum IndexState {
    /// No index, or the key index is off.
    Absent,
    /// An index that reads and matches the table.
    Usable(Arc<OpenIndex>),
    /// An index the table names but that cannot be used (why).
    Bypassed(String),
    /// An index that left out rows deleted in a snapshot the one being converted does
    /// not descend from (why), last updated by a conversion of `source_branch`: that
    /// branch's conversions rebuild it, another branch's leave it alone.
    Diverged {
        why: String,
        source_branch: Option<String>,
    },
}

impl IndexState {
    pub fn usable(&self) -> Option<&Arc<OpenIndex>> {
        match self {
            IndexState::Usable(index) => Some(index),
            _ => None,
        }
    }

    /// Why the index cannot be used, when the table names one that cannot.
    pub fn unusable_because(&self) -> Option<&str> {
        match self {
            IndexState::Bypassed(why) | IndexState::Diverged { why, .. } => Some(why),
            _ => None,
        }
    }

    /// Whether a conversion of `branch` leaves the index as it is rather than
    /// rebuild it: it diverged, and serves another branch.
    pub fn serves_another_branch(&self, branch: &str) -> bool {
        matches!(self, IndexState::Diverged { source_branch: Some(b), .. } if b != branch)
    }
}

/// The indexes of a conversion, by equality field ids and part.
pub type IndexStates = HashMap<IndexKey, IndexState>;

/// Opens the index the table names for `key`, a part of an index in `parts` parts
/// (`None`: whatever count it was written for), to serve snapshot `snapshot_id`:
/// absent when it names none, bypassed (logged) when it cannot be read, does not match
/// the table, or left out rows deleted in a snapshot that `snapshot_id` is not known to
/// descend from.
pub async fn open_for(
    table: &LoadedTable,
    key: &IndexKey,
    parts: Option<u64>,
    snapshot_id: Option<i64>,
) -> IndexState {
    let Some(location) = table.metadata.properties().get(&key.property()) else {
        return IndexState::Absent;
    };
    let why = match open_index(&table.file_io, &table.kept_reads, location).await {
        Ok(index) => match KeyFingerprint::of(table, key, parts).mismatch(&index.metadata) {
            None => match deleted_rows_may_live(table, &index, snapshot_id) {
                None => return IndexState::Usable(Arc::new(index)),
                Some(why) => {
                    tracing::warn!(
                        table = %table.name,
                        index = %location,
                        reason = %why,
                        "the key index serves another line of history; resolving without it"
                    );
                    return IndexState::Diverged {
                        why: format!("{location}: {why}"),
                        source_branch: index.metadata.source_branch.clone(),
                    };
                }
            },
            Some(why) => why,
        },
        Err(e) => e.to_string(),
    };
    tracing::warn!(
        table = %table.name,
        index = %location,
        reason = %why,
        "the key index cannot be used; resolving without it"
    );
    IndexState::Bypassed(format!("{location}: {why}"))
}

/// Why `index` cannot serve snapshot `snapshot_id`, if it cannot: it left out rows that
/// a DV of its source snapshot deleted, and `snapshot_id` is not known to descend from
/// that snapshot (a rollback, another branch, or history expired past it), where those
/// rows may be live.
fn deleted_rows_may_live(
    table: &LoadedTable,
    index: &OpenIndex,
    snapshot_id: Option<i64>,
) -> Option<String> {
    if !index.leaves_out_deleted_rows() {
        return None;
    }
    let source = index.metadata.source_snapshot_id?;
    let descends = snapshot_id.is_some_and(|id| descends_from(&table.metadata, id, source));
    (!descends).then(|| {
        format!(
            "it leaves out rows deleted as of snapshot {source}, and snapshot {} is not known \
             to descend from it",
            snapshot_id.map_or_else(|| "none".to_string(), |id| id.to_string())
        )
    })
}

/// Whether `snapshot_id` is `ancestor` or descends from it, by the parents the table's
/// metadata still holds (an expired parent ends the walk: not known).
pub fn descends_from(
    metadata: &iceberg::spec::TableMetadata,
    snapshot_id: i64,
    ancestor: i64,
) -> bool {
    let mut current = Some(snapshot_id);
    // Bounded by the snapshots held: a cycle in corrupt metadata ends the walk too.
    for _ in 0..=metadata.snapshots().len() {
        let Some(id) = current else {
            return false;
        };
        if id == ancestor {
            return true;
        }
        current = metadata
            .snapshot_by_id(id)
            .and_then(|s| s.parent_snapshot_id());
    }
    false
}

/// The files of every index `properties` names (index metadata files, their leaves and
/// covered lists), for the reachable walk. An index metadata file that no longer exists
/// names only itself; one that cannot be read is an error, so that nothing it may
/// reference is taken for an orphan.
pub async fn referenced_files(
    file_io: &iceberg::io::FileIO,
    properties: &HashMap<String, String>,
) -> crate::Result<Vec<String>> {
    let mut files = Vec::new();
    for (key, location) in properties {
        if !key.starts_with(LOCATION_PROPERTY_PREFIX) {
            continue;
        }
        files.push(location.clone());
        let exists = file_io.exists(location).await.map_err(|e| {
            crate::Error::file(location, "cannot tell whether the key index exists", e)
        })?;
        if exists {
            let (metadata, _): (IndexMetadata, u64) = format::read_json(
                file_io,
                &crate::table::KeptReads::default(),
                location,
                "metadata file",
            )
            .await?;
            files.extend(metadata.files());
        }
    }
    Ok(files)
}

/// What `eqdv inspect` shows of an index.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct IndexSummary {
    pub equality_ids: Vec<i32>,
    /// The part of a partitioned table's index ([`IndexKey::part`]); empty for the
    /// whole-table part.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub part: String,
    pub location: String,
    pub usable: bool,
    pub bypassed_because: Option<String>,
    pub source_snapshot_id: Option<i64>,
    pub runs: usize,
    pub leaves: usize,
    pub entries: u64,
    pub leaf_bytes: u64,
    pub covered_files: u64,
    /// Of the live data files given, those the index does not cover (read as a delta
    /// by a lookup, folded in by the next conversion that keeps the index).
    pub delta_files: Option<u64>,
    /// Covered data files that are no longer live (their entries are dropped when their
    /// run is merged).
    pub dead_files: Option<u64>,
    /// Rows of covered files left out as deleted when their run was merged (the index
    /// then serves only snapshots that descend from its source snapshot).
    #[serde(default)]
    pub deleted_rows_left_out: u64,
    /// The branch whose conversion last updated it.
    #[serde(default)]
    pub source_branch: Option<String>,
}

/// Every index (field ids and part) the table's properties name, with its index
/// metadata location, in the order of the indexes.
pub fn named_indexes(table: &LoadedTable) -> Vec<(IndexKey, String)> {
    let mut named: Vec<(IndexKey, String)> = table
        .metadata
        .properties()
        .iter()
        .filter_map(|(k, location)| Some((IndexKey::from_property(k)?, location.clone())))
        .collect();
    named.sort();
    named
}

/// Summaries of every index the table names; with `live` (the live files of a whole
/// snapshot), its delta and its dead files too.
pub async fn summaries(
    table: &LoadedTable,
    live: Option<&crate::table::TableFiles>,
) -> Vec<IndexSummary> {
    let mut out = Vec::new();
    let snapshot_id = live.map_or_else(
        || table.metadata.current_snapshot_id(),
        |live| live.snapshot_id,
    );
    for (key, location) in named_indexes(table) {
        let state = open_for(table, &key, None, snapshot_id).await;
        let (delta_files, dead_files) = match (state.usable(), live) {
            (Some(index), Some(live)) => {
                let paths: std::collections::HashSet<&str> =
                    live.data_files.iter().map(|f| f.path()).collect();
                let delta = live
                    .data_files
                    .iter()
                    .filter(|f| {
                        part_of_file(&table.metadata, index.metadata.parts.unwrap_or(1), f)
                            == key.part
                    })
                    .filter(|f| !index.covers(f))
                    .count() as u64;
                let dead = index
                    .covered_lists
                    .iter()
                    .flat_map(|l| &l.files)
                    .filter(|c| !paths.contains(c.path.as_str()))
                    .count() as u64;
                (Some(delta), Some(dead))
            }
            _ => (None, None),
        };
        let (usable, why, metadata) = match &state {
            IndexState::Usable(index) => (true, None, Some(index.metadata.clone())),
            state => (
                false,
                Some(state.unusable_because().unwrap_or("not found").to_string()),
                None,
            ),
        };
        out.push(IndexSummary {
            equality_ids: key.equality_ids,
            part: key.part,
            location,
            usable,
            bypassed_because: why,
            source_snapshot_id: metadata.as_ref().and_then(|m| m.source_snapshot_id),
            runs: metadata.as_ref().map_or(0, |m| m.runs.len()),
            leaves: metadata
                .as_ref()
                .map_or(0, |m| m.runs.iter().map(|r| r.leaves.len()).sum()),
            entries: metadata.as_ref().map_or(0, IndexMetadata::entries),
            leaf_bytes: metadata.as_ref().map_or(0, IndexMetadata::leaf_bytes),
            covered_files: metadata
                .as_ref()
                .map_or(0, |m| m.runs.iter().map(|r| r.covered_files).sum()),
            delta_files,
            dead_files,
            deleted_rows_left_out: state.usable().map_or(0, |index| {
                index
                    .covered_lists
                    .iter()
                    .flat_map(|l| &l.files)
                    .map(|f| f.deleted_left_out)
                    .sum()
            }),
            source_branch: metadata.as_ref().and_then(|m| m.source_branch.clone()),
        });
    }
    out
}
