//! The reachable walk: every file that the current metadata or a metadata file in its
//! log references (manifest lists, manifests, their entries, statistics files).

use std::collections::HashSet;

use futures::{StreamExt, TryStreamExt};
use iceberg::spec::{FormatVersion, ManifestFile, ManifestList, TableMetadata};

use crate::location::normalize_location;
use crate::table::LoadedTable;
use crate::{Error, Result};

/// Manifests read at once during the reachable walk.
const WALK_PARALLELISM: usize = 16;

/// Everything a table's metadata versions reference.
#[derive(Clone, Debug, Default)]
pub struct Reachable {
    /// Normalized locations (see [`normalize_location`]).
    pub files: HashSet<String>,
    /// Locations referenced only by older metadata versions that no longer exist.
    pub missing: HashSet<String>,
}

impl Reachable {
    pub fn contains(&self, location: &str) -> bool {
        self.files.contains(&normalize_location(location))
    }
}

/// Everything reachable from the table's current metadata and every metadata file in
/// its log. Fails if anything the current metadata references cannot be read; files
/// referenced only by older versions may be missing (expired) and are then skipped.
pub async fn reachable_files(table: &LoadedTable) -> Result<Reachable> {
    let io = &table.file_io;
    let mut reachable = Reachable::default();
    let add = |files: &mut HashSet<String>, p: &str| {
        files.insert(normalize_location(p));
    };

    // Metadata files: the current one (already read) and the log.
    add(&mut reachable.files, &table.pointer.metadata_location);
    let mut versions: Vec<(TableMetadata, bool)> = vec![(table.metadata.as_ref().clone(), true)];
    for entry in table.metadata.metadata_log() {
        let path = &entry.metadata_file;
        if normalize_location(path) == normalize_location(&table.pointer.metadata_location) {
            continue;
        }
        add(&mut reachable.files, path);
        if !exists(io, path).await? {
            reachable.missing.insert(normalize_location(path));
            continue;
        }
        let metadata = TableMetadata::read_from(io, path)
            .await
            .map_err(|e| Error::file(path, "cannot read a metadata file in the log", e))?;
        versions.push((metadata, false));
    }

    // Manifest lists (a current snapshot's list is required; an expired one's may be
    // gone). The current version comes first, so a list it references is required.
    let mut lists: Vec<(String, FormatVersion, bool)> = Vec::new();
    let mut seen_lists: HashSet<String> = HashSet::new();
    for (metadata, current) in &versions {
        // eqdv's key index, named by a table property (see `key_index`).
        for file in crate::key_index::referenced_files(io, metadata.properties()).await? {
            add(&mut reachable.files, &file);
        }
        for stats in metadata.statistics_iter() {
            add(&mut reachable.files, &stats.statistics_path);
        }
        for stats in metadata.partition_statistics_iter() {
            add(&mut reachable.files, &stats.statistics_path);
        }
        for snapshot in metadata.snapshots() {
            let path = snapshot.manifest_list().to_string();
            add(&mut reachable.files, &path);
            if seen_lists.insert(normalize_location(&path)) {
                lists.push((path, metadata.format_version(), *current));
            }
        }
    }

    let read_lists: Vec<Found<(ManifestList, bool)>> = futures::stream::iter(
        lists
            .into_iter()
            .map(|(path, version, required)| async move {
                if !required && !exists(io, &path).await? {
                    return Ok::<_, Error>(Found::Missing(path));
                }
                let bytes = crate::storage::read_all(io, &path).await?;
                crate::manifest_decode::check_avro_file(&path, &bytes)?;
                let list = ManifestList::parse_with_version(&bytes, version)
                    .map_err(|e| Error::file(&path, "cannot parse manifest list", e))?;
                Ok(Found::Read((list, required)))
            }),
    )
    .buffer_unordered(WALK_PARALLELISM)
    .try_collect()
    .await?;

    let mut manifests: Vec<(ManifestFile, bool)> = Vec::new();
    let mut seen_manifests: HashSet<String> = HashSet::new();
    let mut required_manifests: HashSet<String> = HashSet::new();
    for read in read_lists {
        let (list, required) = match read {
            Found::Read(read) => read,
            Found::Missing(path) => {
                reachable.missing.insert(normalize_location(&path));
                continue;
            }
        };
        for m in list.entries() {
            let key = normalize_location(&m.manifest_path);
            reachable.files.insert(key.clone());
            if required {
                required_manifests.insert(key.clone());
            }
            if seen_manifests.insert(key) {
                manifests.push((m.clone(), required));
            }
        }
    }
    for (m, required) in &mut manifests {
        *required |= required_manifests.contains(&normalize_location(&m.manifest_path));
    }

    let entries: Vec<Found<Vec<String>>> =
        futures::stream::iter(manifests.into_iter().map(|(m, required)| async move {
            if !required && !exists(io, &m.manifest_path).await? {
                return Ok::<_, Error>(Found::Missing(m.manifest_path));
            }
            let (_, entries) = crate::manifest_decode::load_manifest(io, &m).await?;
            // Live and DELETED entries alike: some snapshot references each.
            Ok(Found::Read(
                entries
                    .into_iter()
                    .map(|e| e.data_file.file_path().to_string())
                    .collect(),
            ))
        }))
        .buffer_unordered(WALK_PARALLELISM)
        .try_collect()
        .await?;
    for read in entries {
        match read {
            Found::Read(files) => {
                for f in files {
                    add(&mut reachable.files, &f);
                }
            }
            Found::Missing(path) => {
                reachable.missing.insert(normalize_location(&path));
            }
        }
    }
    Ok(reachable)
}

/// A file of an older version read, or found missing (expired).
enum Found<T> {
    Read(T),
    Missing(String),
}

async fn exists(io: &iceberg::io::FileIO, path: &str) -> Result<bool> {
    io.exists(path)
        .await
        .map_err(|e| Error::file(path, "cannot check whether the file exists", e))
}
