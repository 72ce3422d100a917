//! Proving an index against a full scan: every live data file the index covers is read
//! again (key columns only) and its entries must be exactly the rows read, hash and
//! position alike. For operators (`eqdv inspect --verify-index`) and tests; never on a
//! conversion's path.

use std::collections::{BTreeMap, HashSet};

use serde::Serialize;

use super::build::{read_files, read_runs};
use super::format::CoveredFiles;
use super::{IndexState, open_for};
use crate::Result;
use crate::keys::KeyColumns;
use crate::table::{LiveFile, LoadedTable, TableFiles};

/// Files read at once by a verification.
const VERIFY_PARALLELISM: usize = 16;

/// What a verification of one index found.
#[derive(Clone, Debug, Default, Serialize)]
pub struct IndexVerification {
    pub equality_ids: Vec<i32>,
    /// Live data files the index covers, each read again.
    pub files_checked: u64,
    pub entries_checked: u64,
    /// Live data files it does not cover (a lookup reads them as without an index).
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
    for (ids, _) in super::named_indexes(table) {
        let mut verification = IndexVerification {
            equality_ids: ids.clone(),
            ..Default::default()
        };
        let index = match open_for(table, &ids).await {
            IndexState::Usable(index) => index,
            IndexState::Bypassed(why) => {
                verification.unusable = Some(why);
                out.push(verification);
                continue;
            }
            IndexState::Absent => {
                verification.unusable = Some("not found".into());
                out.push(verification);
                continue;
            }
        };
        let covered: Vec<LiveFile> = files
            .data_files
            .iter()
            .filter(|f| index.covers(f))
            .cloned()
            .collect();
        verification.files_not_covered = (files.data_files.len() - covered.len()) as u64;
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
            VERIFY_PARALLELISM,
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
        let (indexed, _) = read_runs(&table.file_io, &runs, &keep, VERIFY_PARALLELISM).await?;
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
