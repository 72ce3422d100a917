//! Proving an index against a full scan: every live data file the index covers is read
//! again (key columns only) and its entries must be exactly the rows read, hash and
//! position alike, but for the rows a merge left out as deleted, each of which a DV of
//! the verified snapshot must delete. For operators (`eqdv inspect --verify-index`) and
//! tests; never on a conversion's path.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::Serialize;

use super::build::{read_files, read_runs};
use super::format::CoveredFiles;
use super::{IndexState, open_for};
use crate::Result;
use crate::keys::KeyColumns;
use crate::progress::Progress;
use crate::table::{LiveFile, LoadedTable, TableFiles};

/// Files read at once by a verification.
const VERIFY_PARALLELISM: usize = 16;

/// What a verification of one index found.
#[derive(Clone, Debug, Default, Serialize)]
pub struct IndexVerification {
    pub equality_ids: Vec<i32>,
    /// The part of a partitioned table's index (empty: the whole-table part).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub part: String,
    /// Live data files the index covers, each read again.
    pub files_checked: u64,
    pub entries_checked: u64,
    /// Live data files of its part it does not cover (a lookup reads them as without
    /// an index).
    pub files_not_covered: u64,
    /// What differs, naming the data file (empty when the index is exact).
    pub mismatches: Vec<String>,
    /// Why the index could not be verified (unusable), if it could not.
    pub unusable: Option<String>,
}

/// Verifies every index the table names against the live data files of `files`.
pub async fn verify_indexes(
    table: &LoadedTable,
    files: &TableFiles,
) -> Result<Vec<IndexVerification>> {
    let mut out = Vec::new();
    for (key, _) in super::named_indexes(table) {
        let ids = key.equality_ids.clone();
        let mut verification = IndexVerification {
            equality_ids: ids.clone(),
            part: key.part.clone(),
            ..Default::default()
        };
        let index = match open_for(table, &key, None, files.snapshot_id).await {
            IndexState::Usable(index) => index,
            state => {
                verification.unusable =
                    Some(state.unusable_because().unwrap_or("not found").to_string());
                out.push(verification);
                continue;
            }
        };
        // Every live file it covers is checked, of its part or not (an index written
        // before parts covers every partition).
        let covered: Vec<LiveFile> = files
            .data_files
            .iter()
            .filter(|f| index.covers(f))
            .cloned()
            .collect();
        verification.files_not_covered = files
            .data_files
            .iter()
            .filter(|f| {
                !index.covers(f)
                    && super::part_of_file(&table.metadata, index.metadata.parts.unwrap_or(1), f)
                        == key.part
            })
            .count() as u64;
        let key_columns = KeyColumns::new(
            &table.name.to_string(),
            table.metadata.current_schema(),
            &ids,
        )?;
        let name_mapping = table.name_mapping()?;
        let (scanned, _) = read_files(
            &table.file_io,
            name_mapping.as_deref(),
            &key_columns,
            &covered,
            (VERIFY_PARALLELISM, &Progress::default()),
        )
        .await?;
        let live: HashSet<&str> = covered.iter().map(LiveFile::path).collect();
        let runs: Vec<(&super::format::RunMeta, &CoveredFiles)> = index
            .metadata
            .runs
            .iter()
            .zip(index.covered_lists.iter())
            .collect();
        let keep = |path: &str| live.contains(path);
        let none = HashMap::new();
        let (indexed, _) =
            read_runs(&table.file_io, &runs, &keep, &none, VERIFY_PARALLELISM).await?;
        let left_out: HashMap<&str, u64> = index
            .covered_lists
            .iter()
            .flat_map(|l| &l.files)
            .filter(|f| f.deleted_left_out > 0 && live.contains(f.path.as_str()))
            .map(|f| (f.path.as_str(), f.deleted_left_out))
            .collect();
        let deleted = crate::current_dv::read_deleted(
            &table.file_io,
            files,
            covered.iter().filter(|f| left_out.contains_key(f.path())),
            VERIFY_PARALLELISM,
        )
        .await?;
        let by_file = |run: &super::build::RunEntries| {
            let mut map: BTreeMap<String, Vec<(u64, i64)>> = BTreeMap::new();
            for i in 0..run.hashes.len() {
                map.entry(run.covered[run.files[i] as usize].path.clone())
                    .or_default()
                    .push((run.positions[i], run.hashes[i]));
            }
            for entries in map.values_mut() {
                entries.sort_unstable();
            }
            map
        };
        let (scanned, indexed) = (by_file(&scanned), by_file(&indexed));
        for data in &covered {
            let path = data.path();
            let empty = Vec::new();
            let want = scanned.get(path).unwrap_or(&empty);
            let have = indexed.get(path).unwrap_or(&empty);
            verification.files_checked += 1;
            verification.entries_checked += have.len() as u64;
            if let Some(&left_out) = left_out.get(path) {
                // Rows left out as deleted: the entries must be the rows read less as
                // many rows, each of them deleted by the file's DV now.
                let dv = deleted.get(path);
                let indexed: HashSet<&(u64, i64)> = have.iter().collect();
                let missing: Vec<u64> = want
                    .iter()
                    .filter(|e| !indexed.contains(e))
                    .map(|(pos, _)| *pos)
                    .collect();
                let extra = have.len() + missing.len() - want.len();
                let live_missing = missing
                    .iter()
                    .find(|pos| !dv.is_some_and(|dv| dv.contains(**pos)));
                if extra > 0 || missing.len() as u64 != left_out || live_missing.is_some() {
                    verification.mismatches.push(format!(
                        "{path}: {} rows read, {} entries indexed, {left_out} left out as \
                         deleted; {extra} entries no row matches, {} rows without an entry{}",
                        want.len(),
                        have.len(),
                        missing.len(),
                        live_missing.map_or_else(String::new, |pos| format!(
                            ", row {pos} among them though no DV deletes it"
                        )),
                    ));
                }
                continue;
            }
            if want != have {
                let first = want
                    .iter()
                    .zip(have.iter())
                    .position(|(a, b)| a != b)
                    .unwrap_or(want.len().min(have.len()));
                verification.mismatches.push(format!(
                    "{path}: {} rows read, {} entries indexed; first difference at entry {first}",
                    want.len(),
                    have.len()
                ));
            }
        }
        out.push(verification);
    }
    Ok(out)
}
