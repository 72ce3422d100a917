//! Orphan file cleanup for one table: files under the table's location that no version
//! of its metadata references.
//!
//! A commit that dies between writing its files and swapping the catalog pointer (a
//! killed process, a lost connection, an unknown commit outcome) leaves files nobody
//! references. This module finds them: it lists every object under the table location,
//! walks everything reachable from the current metadata and every metadata file in its
//! log (each snapshot's manifest list, each manifest, each entry's file, live or
//! DELETED, and statistics files), and deletes what is unreachable, older than a safety
//! age and inside `<location>/data/` or `<location>/metadata/`.
//!
//! It must never delete a file that a table version references: it deletes nothing
//! when the listing or the reachable walk fails (a partial reachable set would delete
//! live files), when the catalog pointer keeps moving during the walk, or for files
//! younger than the safety age (they may belong to a commit still in flight, whose
//! pointer swap has not happened yet). It never follows symbolic links and never
//! touches hidden files (`.name`, `_name`), `version-hint.text`, or anything outside the
//! table's data and metadata directories.
//!
//! This file holds the options, the report and the decision; `listing` lists the
//! table location (local disk or S3), `location` compares locations, `reachable` walks
//! the metadata versions and `age` parses the `--older-than` argument.

mod age;
mod listing;
mod reachable;

use std::time::{Duration, SystemTime};

use serde::Serialize;

use crate::catalog::{Catalog, TableName};
use crate::table::LoadedTable;
use crate::{Error, Result};

pub use crate::location::normalize_location;
pub use age::parse_age;
pub use listing::{ListedFile, list_files};
pub use reachable::{Reachable, reachable_files};

/// Files younger than this are kept by default: a commit may still be in flight.
pub const DEFAULT_MIN_AGE: Duration = Duration::from_secs(3 * 24 * 60 * 60);

/// How often the pointer may move during the walk before cleanup gives up.
const MAX_WALK_ROUNDS: usize = 5;

/// How to run a cleanup.
#[derive(Clone, Debug)]
pub struct CleanupOptions {
    /// Only files last modified at least this long ago are deleted.
    pub older_than: Duration,
    /// Report what would be deleted, delete nothing.
    pub dry_run: bool,
}

impl Default for CleanupOptions {
    fn default() -> Self {
        Self {
            older_than: DEFAULT_MIN_AGE,
            dry_run: false,
        }
    }
}

/// A file that could not be deleted.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct DeleteFailure {
    pub path: String,
    pub error: String,
}

/// What a cleanup found and did.
#[derive(Clone, Debug, Serialize)]
pub struct CleanupReport {
    pub table: String,
    pub location: String,
    /// The metadata file the reachable walk started from (the last one, if it moved).
    pub metadata_location: String,
    pub dry_run: bool,
    pub older_than_secs: u64,
    /// Files listed under the table location.
    pub scanned: usize,
    /// Distinct files referenced by the current metadata or a metadata file in its log.
    pub reachable: usize,
    /// Files referenced only by an older metadata version that no longer exist (skipped).
    pub missing_referenced: usize,
    /// Listed files that nothing references.
    pub orphans_found: usize,
    /// Orphans old enough and in `data/` or `metadata/`: deleted (or, in a dry run, to delete).
    pub eligible: Vec<String>,
    /// Orphans actually deleted (empty in a dry run).
    pub deleted: Vec<String>,
    /// Orphans younger than `older_than` (or of unknown age): they may belong to a commit in flight.
    pub kept_too_young: Vec<String>,
    /// Orphans outside `data/` and `metadata/`, hidden, or `version-hint.text`: never deleted.
    pub kept_unmanaged: Vec<String>,
    pub delete_failures: Vec<DeleteFailure>,
}

/// Deletes the orphan files of `name` that are older than `options.older_than`.
pub async fn cleanup(
    catalog: &dyn Catalog,
    name: &TableName,
    options: &CleanupOptions,
) -> Result<CleanupReport> {
    if catalog.manages_own_files() {
        return Err(Error::InvalidInput(format!(
            "catalog {}: table {name}: its storage refuses listings and deletes, and removes \
             unreferenced files itself (S3 Tables' unreferenced file removal): nothing for \
             eqdv cleanup to do",
            catalog.name()
        )));
    }
    let table = LoadedTable::load(catalog, name).await?;
    let location = table.location().trim_end_matches('/').to_string();
    // Its metadata in its own location's metadata/ directory, or the location may be
    // another table's: everything there would look unreferenced.
    let metadata_file = &table.pointer.metadata_location;
    if let Some(why) = crate::location::outside_reason(&location, metadata_file) {
        return Err(Error::UnsupportedTable {
            table: name.to_string(),
            message: format!(
                "its metadata file {metadata_file} is not one of its own files ({why}): \
                 cleanup deletes only under a location whose metadata it reads there"
            ),
        });
    }

    // List first, then walk from a pointer read after the listing: a commit that lands
    // in between is seen by the walk, and files of later commits are not listed.
    let listed = list_files(&table).await?;

    let mut reachable = Reachable::default();
    let mut current = table;
    let mut stable = false;
    for _ in 0..MAX_WALK_ROUNDS {
        let fresh = LoadedTable::load(catalog, name).await?;
        if fresh.location().trim_end_matches('/') != location {
            return Err(Error::UnsupportedTable {
                table: name.to_string(),
                message: format!(
                    "the table location changed from {location} to {} during cleanup",
                    fresh.location()
                ),
            });
        }
        let walked = reachable_files(&fresh).await?;
        reachable.files.extend(walked.files);
        reachable.missing.extend(walked.missing);
        current = fresh;
        // The pointer must not move between the walk and the decision: a commit that
        // landed meanwhile may reference listed files.
        let after = catalog.load_pointer(name).await?;
        if after.metadata_location == current.pointer.metadata_location {
            stable = true;
            break;
        }
        tracing::info!(table = %name, "the table moved during the reachable walk; walking again");
    }
    if !stable {
        return Err(Error::CommitConflict {
            table: name.to_string(),
            message: format!(
                "the metadata pointer moved {MAX_WALK_ROUNDS} times during cleanup; deleted nothing, try again later"
            ),
        });
    }

    let now = SystemTime::now();
    let managed = [
        normalize_location(&format!("{location}/data/")),
        normalize_location(&format!("{location}/metadata/")),
    ];
    let mut report = CleanupReport {
        table: name.to_string(),
        location: location.clone(),
        metadata_location: current.pointer.metadata_location.clone(),
        dry_run: options.dry_run,
        older_than_secs: options.older_than.as_secs(),
        scanned: listed.len(),
        reachable: reachable.files.len(),
        missing_referenced: reachable.missing.len(),
        orphans_found: 0,
        eligible: Vec::new(),
        deleted: Vec::new(),
        kept_too_young: Vec::new(),
        kept_unmanaged: Vec::new(),
        delete_failures: Vec::new(),
    };
    let base = normalize_location(&location);
    for file in &listed {
        let key = normalize_location(&file.path);
        if reachable.files.contains(&key) {
            continue;
        }
        report.orphans_found += 1;
        // Listed under the table's prefix, but a key may still spell a path outside its
        // directories (`..`, encoded separators): never deleted.
        let confined = crate::location::outside_reason(&location, &file.path).is_none();
        if !managed.iter().any(|m| key.starts_with(m.as_str()))
            || is_protected(&base, &key)
            || !confined
        {
            report.kept_unmanaged.push(file.path.clone());
            continue;
        }
        let old_enough = file
            .last_modified
            .and_then(|m| now.duration_since(m).ok())
            .is_some_and(|age| age >= options.older_than);
        if old_enough {
            report.eligible.push(file.path.clone());
        } else {
            report.kept_too_young.push(file.path.clone());
        }
    }
    report.eligible.sort();
    report.kept_too_young.sort();
    report.kept_unmanaged.sort();

    if !options.dry_run {
        for path in &report.eligible {
            match current.file_io.delete(path).await {
                Ok(()) => report.deleted.push(path.clone()),
                Err(e) => {
                    tracing::warn!(path = %path, error = %e, "could not delete an orphan file");
                    report.delete_failures.push(DeleteFailure {
                        path: path.clone(),
                        error: e.to_string(),
                    });
                }
            }
        }
    }
    tracing::info!(
        table = %name,
        scanned = report.scanned,
        reachable = report.reachable,
        orphans = report.orphans_found,
        deleted = report.deleted.len(),
        too_young = report.kept_too_young.len(),
        dry_run = options.dry_run,
        "cleanup"
    );
    Ok(report)
}

/// Hidden files and directories (`.x`, `_x` but not a `_x=1` partition directory) and
/// Hadoop tables' `version-hint.text` are never deleted.
fn is_protected(base: &str, key: &str) -> bool {
    let relative = key.strip_prefix(base).unwrap_or(key);
    relative
        .split('/')
        .filter(|c| !c.is_empty())
        .any(|c| c.starts_with('.') || (c.starts_with('_') && !c.contains('=')))
        || relative.ends_with("/version-hint.text")
}
