//! The index's own files, as JSON: the index metadata file (what the table property
//! names) and each run's list of the data files it covers. Leaf files are Parquet
//! (`leaf`).
//!
//! Everything here is immutable once written: an update writes new files under new
//! names and a new metadata file, which the table's own commit names.

use std::collections::HashMap;

use iceberg::io::FileIO;
use serde::{Deserialize, Serialize};

use crate::table::KeptReads;
use crate::{Error, Result};

/// The format of the files this module writes; an index of another version is bypassed
/// (and rebuilt by the next conversion that maintains it), never read.
/// Version 2 names data files in leaves by their ordinal in the run's covered list
/// (version 1 by path); version 3 may leave out rows deleted when a run was merged
/// ([`CoveredFile::deleted_left_out`]), which an eqdv that reads version 2 only would
/// take for rows no key is held by.
pub const FORMAT_VERSION: u32 = 3;

/// The versions this eqdv reads: version 2 is version 3 without left-out rows.
pub const READABLE_VERSIONS: [u32; 2] = [2, 3];

/// How a key becomes the index's `key_hash`: xxHash64 (seed 0) of the key's arrow-row
/// encoding in the table schema's types (`crate::keys::KeyColumns::encode`), as a
/// signed 64-bit integer. The encoding is arrow-row's of arrow 58; a new major of arrow
/// gets a new name here, so that indexes hashed otherwise are bypassed, not misread.
pub const KEY_HASH: &str = "xxh64-arrow-row-58";

/// The index metadata file: what one index of one equality field set holds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct IndexMetadata {
    pub format_version: u32,
    pub index_uuid: String,
    /// The table this index was built for.
    pub table_uuid: String,
    /// The equality field ids of the key, in the order the key is encoded.
    pub equality_ids: Vec<i32>,
    /// The part of a partitioned table's index it is (`super::IndexKey::part`); absent
    /// for the whole-table part.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub part: Option<String>,
    /// The parts of the index it is a part of (the table's queue groups when written);
    /// absent for the whole-table part.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parts: Option<u64>,
    /// See [`KEY_HASH`].
    pub key_hash: String,
    /// Each key field's Iceberg type when the index was written: a promoted type reads
    /// (and hashes) otherwise, so the index is bypassed.
    pub key_types: Vec<KeyFieldType>,
    /// The table's name mapping (`schema.name-mapping.default`) when it was written: a
    /// file without field ids reads its key columns through it.
    pub name_mapping: Option<String>,
    /// The table snapshot the last update reconciled with (for operators; the
    /// coverage is the runs' lists, not this snapshot).
    pub source_snapshot_id: Option<i64>,
    /// The branch whose head that snapshot was: an index serving one branch is left
    /// alone by the conversions of another, whose snapshots may not descend from it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_branch: Option<String>,
    /// Newest last. Every run covers its own data files; a path is in one run at most.
    pub runs: Vec<RunMeta>,
}

/// One key field's id and type.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct KeyFieldType {
    pub id: i32,
    #[serde(rename = "type")]
    pub field_type: String,
}

/// A run: leaf files written together, sorted by key hash and not overlapping, over the
/// data files its covered list names.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct RunMeta {
    /// The JSON file listing the data files this run covers ([`CoveredFiles`]).
    pub covered_location: String,
    pub covered_files: u64,
    /// Entries over all leaves: one per row of the covered files.
    pub entries: u64,
    /// In key-hash order.
    pub leaves: Vec<LeafMeta>,
}

/// One leaf file of a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct LeafMeta {
    pub location: String,
    pub file_size_in_bytes: u64,
    pub record_count: u64,
    pub min_key_hash: i64,
    pub max_key_hash: i64,
    /// Bytes from where its page indexes begin to its end (page indexes and footer):
    /// a probe reads them in one request. Absent in leaves written before eqdv recorded
    /// it (read with the default footer hint, then what the footer asks for).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tail_bytes: Option<u64>,
}

/// The data files a run covers: every row of each is in the run's leaves.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct CoveredFiles {
    pub files: Vec<CoveredFile>,
}

/// A covered data file, by its location and size: Iceberg never rewrites a file in
/// place, and a live file of another size at the same path is not covered.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct CoveredFile {
    pub path: String,
    pub file_size_in_bytes: u64,
    pub record_count: u64,
    /// Of its rows, those left out of the index because a DV of the snapshot the index
    /// was merged at deleted them (a deleted row stays deleted in every snapshot that
    /// descends from it): the index holds an entry for each of its other rows.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub deleted_left_out: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl IndexMetadata {
    /// Entries over all runs.
    pub fn entries(&self) -> u64 {
        self.runs.iter().map(|r| r.entries).sum()
    }

    /// Bytes of leaf files over all runs.
    pub fn leaf_bytes(&self) -> u64 {
        self.runs
            .iter()
            .flat_map(|r| &r.leaves)
            .map(|l| l.file_size_in_bytes)
            .sum()
    }

    /// Every file this index metadata names (leaves and covered lists), not itself.
    pub fn files(&self) -> Vec<String> {
        self.runs
            .iter()
            .flat_map(|r| {
                std::iter::once(r.covered_location.clone())
                    .chain(r.leaves.iter().map(|l| l.location.clone()))
            })
            .collect()
    }
}

/// Reads and parses a JSON file of the index, with the bytes it took (0 when `kept`
/// held it: eqdv never rewrites an index file under its name, so a warm process that
/// read it before reads it again from there).
pub(super) async fn read_json<T: for<'de> Deserialize<'de>>(
    file_io: &FileIO,
    kept: &KeptReads,
    location: &str,
    what: &str,
) -> Result<(T, u64)> {
    let mut fetched = 0;
    let bytes = kept
        .get_or_read(location, None, async {
            let bytes = crate::storage::read_all(file_io, location).await?;
            fetched = bytes.len() as u64;
            Ok(bytes)
        })
        .await?;
    let value = serde_json::from_slice(&bytes).map_err(|e| {
        Error::file(
            location,
            format!("not a readable key index {what} (eqdv format {FORMAT_VERSION})"),
            e,
        )
    })?;
    Ok((value, fetched))
}

/// Writes `value` as JSON at `location` (a new, unique name).
pub(super) async fn write_json<T: Serialize>(
    file_io: &FileIO,
    location: &str,
    value: &T,
) -> Result<u64> {
    let bytes = serde_json::to_vec(value)
        .map_err(|e| Error::file(location, "cannot encode a key index file", e))?;
    let len = bytes.len() as u64;
    write_file(file_io, location, bytes, "file").await?;
    Ok(len)
}

/// Writes `bytes` at `location` (a new, unique name), an error naming it as the key
/// index's `what` (a leaf, a file).
pub(super) async fn write_file(
    file_io: &FileIO,
    location: &str,
    bytes: Vec<u8>,
    what: &str,
) -> Result<()> {
    file_io
        .new_output(location)?
        .write(bytes.into())
        .await
        .map_err(|e| Error::file(location, format!("cannot write a key index {what}"), e))
}

/// A leaf entry names a data file its run's covered list does not hold.
pub(super) fn ordinal_out_of_list(leaf: &str, list: &str) -> Error {
    Error::file(
        leaf,
        format!("an entry names a data file past the end of its run's covered list {list}"),
        "inconsistent key index",
    )
}

/// The covered files of every run, by path: `(size, run)`. Fails when two runs cover the
/// same path (an index eqdv did not write that way cannot be reconciled).
pub(super) fn covered_by_path(
    location: &str,
    runs: &[CoveredFiles],
) -> Result<HashMap<String, (u64, usize)>> {
    let mut covered = HashMap::new();
    for (run, files) in runs.iter().enumerate() {
        for file in &files.files {
            if covered
                .insert(file.path.clone(), (file.file_size_in_bytes, run))
                .is_some()
            {
                return Err(Error::file(
                    location,
                    format!(
                        "data file {} is covered by two runs of the index",
                        file.path
                    ),
                    "inconsistent key index",
                ));
            }
        }
    }
    Ok(covered)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_round_trips_through_json_in_kebab_case() {
        let metadata = IndexMetadata {
            format_version: FORMAT_VERSION,
            index_uuid: "u".into(),
            table_uuid: "t".into(),
            equality_ids: vec![1, 3],
            part: Some("g05".into()),
            parts: Some(16),
            key_hash: KEY_HASH.into(),
            key_types: vec![KeyFieldType {
                id: 1,
                field_type: "long".into(),
            }],
            name_mapping: None,
            source_snapshot_id: Some(7),
            source_branch: Some("main".into()),
            runs: vec![RunMeta {
                covered_location: "c".into(),
                covered_files: 1,
                entries: 2,
                leaves: vec![LeafMeta {
                    tail_bytes: None,
                    location: "l".into(),
                    file_size_in_bytes: 10,
                    record_count: 2,
                    min_key_hash: -5,
                    max_key_hash: 9,
                }],
            }],
        };
        let json = serde_json::to_string(&metadata).unwrap();
        assert!(json.contains("\"equality-ids\":[1,3]"), "{json}");
        assert!(json.contains("\"min-key-hash\":-5"), "{json}");
        assert!(json.contains("\"type\":\"long\""), "{json}");
        let back: IndexMetadata = serde_json::from_str(&json).unwrap();
        assert_eq!(back, metadata);
        assert_eq!(back.entries(), 2);
        assert_eq!(back.leaf_bytes(), 10);
        assert_eq!(back.files(), vec!["c".to_string(), "l".to_string()]);
    }

    #[test]
    fn a_path_covered_twice_is_refused() {
        let file = CoveredFile {
            path: "p".into(),
            file_size_in_bytes: 1,
            record_count: 1,
            deleted_left_out: 0,
        };
        let runs = vec![
            CoveredFiles {
                files: vec![file.clone()],
            },
            CoveredFiles { files: vec![file] },
        ];
        let error = covered_by_path("index.json", &runs)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("index.json") && error.contains("covered by two runs"),
            "{error}"
        );
        let one = covered_by_path("index.json", &runs[..1]).unwrap();
        assert_eq!(one.get("p"), Some(&(1, 0)));
    }
}
