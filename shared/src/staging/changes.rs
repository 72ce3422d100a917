//! What one staging snapshot changed: the files it added and removed, read from the
//! manifests it wrote (an entry a snapshot adds or removes is in a manifest that
//! snapshot wrote; older entries a merged manifest carries are left out by their
//! snapshot id).

use std::collections::HashSet;

use iceberg::spec::{
    DataContentType, DataFile, DataFileBuilder, DataFileFormat, ManifestStatus, SnapshotRef,
};

use super::history::Branches;
use crate::table::{LiveFile, LoadedTable};
use crate::{Error, Result};

/// The files one staging snapshot added, by kind, and what it removed that matters.
#[derive(Clone, Debug, Default)]
pub struct StagingChanges {
    pub data_files: Vec<LiveFile>,
    pub equality_deletes: Vec<LiveFile>,
    pub dvs: Vec<LiveFile>,
    /// v2 position delete files (Parquet or Avro).
    pub position_deletes: Vec<LiveFile>,
    /// Equality delete files the snapshot removed (an in-place conversion of the
    /// staging branch): the target never held them, so nothing follows from it.
    pub removed_equality_deletes: usize,
}

impl StagingChanges {
    /// Adds what a later snapshot changed (of a fold of several into one commit).
    pub fn absorb(&mut self, later: StagingChanges) {
        self.data_files.extend(later.data_files);
        self.equality_deletes.extend(later.equality_deletes);
        self.dvs.extend(later.dvs);
        self.position_deletes.extend(later.position_deletes);
        self.removed_equality_deletes += later.removed_equality_deletes;
    }

    pub fn deletes_anything(&self) -> bool {
        !(self.equality_deletes.is_empty()
            && self.dvs.is_empty()
            && self.position_deletes.is_empty())
    }
}

/// Reads what `snapshot` (of the staging branch) changed. Refuses what cannot be applied
/// faithfully to a target by adding files: a removed data file, a removed DV that no DV
/// of the same snapshot replaces, a removed v2 position delete file.
pub async fn read_changes(
    table: &LoadedTable,
    snapshot: &SnapshotRef,
    branches: Branches<'_>,
) -> Result<StagingChanges> {
    let id = snapshot.snapshot_id();
    let manifests = crate::table::read_manifest_list(table, snapshot).await?;
    let own: Vec<_> = manifests
        .into_iter()
        .filter(|m| m.added_snapshot_id == id)
        .collect();
    let loaded = futures::future::try_join_all(own.iter().map(|m| async move {
        let (_, entries) = table.load_manifest(m).await?;
        Ok::<_, Error>((m, entries))
    }))
    .await?;
    let mut changes = StagingChanges::default();
    let mut removed_dvs: Vec<String> = Vec::new();
    for (manifest, entries) in loaded {
        for entry in entries {
            if entry.snapshot_id() != Some(id) {
                continue;
            }
            let status = entry.status();
            if status == ManifestStatus::Existing {
                continue;
            }
            let content = entry.content_type();
            let is_dv = entry.data_file().file_format() == DataFileFormat::Puffin;
            if status == ManifestStatus::Deleted {
                match content {
                    DataContentType::Data => {
                        return Err(branches.diverged(
                            Some(id),
                            format!(
                                "it removes data file {} (a compaction, an overwrite or a \
                                 delete of whole files on the staging branch); eqdv applies \
                                 staging commits that add files and delete rows only",
                                entry.file_path()
                            ),
                        ));
                    }
                    DataContentType::EqualityDeletes => changes.removed_equality_deletes += 1,
                    DataContentType::PositionDeletes if is_dv => removed_dvs.push(
                        entry
                            .data_file()
                            .referenced_data_file()
                            .unwrap_or_else(|| entry.file_path().to_string()),
                    ),
                    DataContentType::PositionDeletes => {
                        return Err(branches.diverged(
                            Some(id),
                            format!(
                                "it removes position delete file {}; eqdv applies staging \
                                 commits that add files and delete rows only",
                                entry.file_path()
                            ),
                        ));
                    }
                }
                continue;
            }
            let Some(sequence_number) = entry.sequence_number().or(snapshot_sequence(snapshot))
            else {
                return Err(Error::file(
                    &manifest.manifest_path,
                    format!("entry {} has no sequence number", entry.file_path()),
                    "missing inherited value",
                ));
            };
            let file_sequence_number = entry.file_sequence_number.unwrap_or(sequence_number);
            let live = LiveFile {
                file: entry.data_file,
                spec_id: manifest.partition_spec_id,
                data_sequence_number: sequence_number,
                file_sequence_number,
                snapshot_id: id,
                manifest_path: manifest.manifest_path.clone(),
            };
            match content {
                DataContentType::Data => changes.data_files.push(live),
                DataContentType::EqualityDeletes => changes.equality_deletes.push(live),
                DataContentType::PositionDeletes if is_dv => changes.dvs.push(live),
                DataContentType::PositionDeletes => changes.position_deletes.push(live),
            }
        }
    }
    // A DV removed is fine only when the snapshot writes the file's next DV (which
    // holds the old one's positions, as the one-DV-per-file rule requires).
    let replaced: HashSet<String> = changes
        .dvs
        .iter()
        .filter_map(|dv| dv.file.referenced_data_file())
        .collect();
    if let Some(dropped) = removed_dvs.iter().find(|path| !replaced.contains(*path)) {
        return Err(branches.diverged(
            Some(id),
            format!(
                "it removes the deletion vector of data file {dropped} without writing another \
                 (rows restored on the staging branch); eqdv applies staging commits that add \
                 files and delete rows only"
            ),
        ));
    }
    Ok(changes)
}

fn snapshot_sequence(snapshot: &SnapshotRef) -> Option<i64> {
    Some(snapshot.sequence_number())
}

/// `file` as a new snapshot of another branch adds it: without the first row id a
/// staging commit may have assigned, so that the target gives its rows ids of its own
/// (two branches of one table must not hand out the same row ids).
pub fn with_fresh_row_ids(file: &LiveFile) -> Result<DataFile> {
    let f = &file.file;
    let mut b = DataFileBuilder::default();
    b.content(f.content_type())
        .file_path(f.file_path().to_string())
        .file_format(f.file_format())
        .partition(f.partition().clone())
        .record_count(f.record_count())
        .file_size_in_bytes(f.file_size_in_bytes())
        .column_sizes(f.column_sizes().clone())
        .value_counts(f.value_counts().clone())
        .null_value_counts(f.null_value_counts().clone())
        .nan_value_counts(f.nan_value_counts().clone())
        .lower_bounds(f.lower_bounds().clone())
        .upper_bounds(f.upper_bounds().clone())
        .key_metadata(f.key_metadata().map(<[u8]>::to_vec))
        .split_offsets(f.split_offsets().map(<[i64]>::to_vec))
        .equality_ids(f.equality_ids())
        .first_row_id(None)
        .partition_spec_id(file.spec_id)
        .referenced_data_file(f.referenced_data_file())
        .content_offset(f.content_offset())
        .content_size_in_bytes(f.content_size_in_bytes());
    if let Some(order) = f.sort_order_id() {
        b.sort_order_id(order);
    }
    b.build().map_err(|e| {
        Error::file(
            f.file_path(),
            "cannot copy the staging data file's manifest entry",
            e,
        )
    })
}
