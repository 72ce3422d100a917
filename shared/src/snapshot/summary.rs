//! The snapshot summary: the added, removed and total counters the spec defines.

use std::collections::{HashMap, HashSet};

use iceberg::spec::{DataContentType, DataFile, DataFileFormat};

use super::{SnapshotChanges, TOTAL_EQUALITY_DELETES_PROPERTY, TOTAL_FILES_SIZE_PROPERTY};
use crate::table::{FileEntryKey, TableFiles};

#[derive(Default)]
struct Counts {
    data_files: u64,
    records: u64,
    files_size: u64,
    delete_files: u64,
    equality_delete_files: u64,
    equality_deletes: u64,
    position_delete_files: u64,
    dvs: u64,
    position_deletes: u64,
}

/// Summary keys of the added counters, in the order of [`Counts::values`].
const ADDED_KEYS: [&str; 9] = [
    "added-data-files",
    "added-records",
    "added-files-size",
    "added-delete-files",
    "added-equality-delete-files",
    "added-equality-deletes",
    "added-position-delete-files",
    "added-dvs",
    "added-position-deletes",
];

/// Summary keys of the removed counters, in the order of [`Counts::values`] (the spec
/// names two of them `deleted-`).
const REMOVED_KEYS: [&str; 9] = [
    "deleted-data-files",
    "deleted-records",
    "removed-files-size",
    "removed-delete-files",
    "removed-equality-delete-files",
    "removed-equality-deletes",
    "removed-position-delete-files",
    "removed-dvs",
    "removed-position-deletes",
];

impl Counts {
    fn of<'a>(files: impl IntoIterator<Item = &'a DataFile>) -> Self {
        let mut counts = Self::default();
        for f in files {
            counts.add(f);
        }
        counts
    }

    /// The counters in the order of [`ADDED_KEYS`] and [`REMOVED_KEYS`].
    fn values(&self) -> [u64; 9] {
        [
            self.data_files,
            self.records,
            self.files_size,
            self.delete_files,
            self.equality_delete_files,
            self.equality_deletes,
            self.position_delete_files,
            self.dvs,
            self.position_deletes,
        ]
    }

    /// Adds `file`'s counts. They come from manifests other writers wrote: summed
    /// saturating, so that a hostile count cannot wrap a total.
    fn add(&mut self, file: &DataFile) {
        let plus = |total: &mut u64, n: u64| *total = total.saturating_add(n);
        match file.content_type() {
            DataContentType::Data => {
                plus(&mut self.data_files, 1);
                plus(&mut self.records, file.record_count());
                plus(&mut self.files_size, file.file_size_in_bytes());
            }
            DataContentType::EqualityDeletes => {
                plus(&mut self.delete_files, 1);
                plus(&mut self.equality_delete_files, 1);
                plus(&mut self.equality_deletes, file.record_count());
                plus(&mut self.files_size, file.file_size_in_bytes());
            }
            DataContentType::PositionDeletes => {
                plus(&mut self.delete_files, 1);
                plus(&mut self.position_deletes, file.record_count());
                if file.file_format() == DataFileFormat::Puffin {
                    plus(&mut self.dvs, 1);
                    // A DV occupies only its blob of the shared Puffin file.
                    let size = file
                        .content_size_in_bytes()
                        .map(|s| s.max(0) as u64)
                        .unwrap_or_else(|| file.file_size_in_bytes());
                    plus(&mut self.files_size, size);
                } else {
                    plus(&mut self.position_delete_files, 1);
                    plus(&mut self.files_size, file.file_size_in_bytes());
                }
            }
        }
    }
}

/// The standard summary counters. Totals are computed from the live files, not
/// inherited, except where `base` is a scoped read missing some data files: then the
/// data totals (records, data files, files size) are the parent's plus what was added
/// less what was removed, and are left out where the parent has none. The delete
/// totals are always exact: every delete manifest is read.
pub fn summarize(
    base: &TableFiles,
    parent: Option<&HashMap<String, String>>,
    changes: &SnapshotChanges,
) -> HashMap<String, String> {
    let added_files = || {
        changes
            .added_data_files
            .iter()
            .chain(&changes.added_delete_files)
            .map(|f| &f.file)
    };
    let added = Counts::of(added_files());
    let removed = Counts::of(changes.removed_files.iter().map(|f| &f.file));
    let removed_keys: HashSet<FileEntryKey> = changes
        .removed_files
        .iter()
        .map(|f| f.entry_key())
        .collect();
    let live = base
        .data_files
        .iter()
        .chain(&base.equality_deletes)
        .chain(base.dvs.values())
        .chain(&base.position_deletes)
        .filter(|f| !removed_keys.contains(&f.entry_key()))
        .map(|f| &f.file);
    let total = Counts::of(live.chain(added_files()));

    let mut s = HashMap::new();
    // The added and removed counters appear only when not zero.
    let changed = ADDED_KEYS
        .iter()
        .zip(added.values())
        .chain(REMOVED_KEYS.iter().zip(removed.values()));
    for (k, v) in changed {
        if v > 0 {
            s.insert(k.to_string(), v.to_string());
        }
    }
    // The data totals: exact, or after a scoped read the parent's moved by this change.
    let data_totals = [
        (
            "total-records",
            [total.records, added.records, removed.records],
        ),
        (
            TOTAL_FILES_SIZE_PROPERTY,
            [total.files_size, added.files_size, removed.files_size],
        ),
        (
            "total-data-files",
            [total.data_files, added.data_files, removed.data_files],
        ),
    ];
    for (key, [exact, plus, minus]) in data_totals {
        let value = if base.skipped_data.is_partial() {
            parent
                .and_then(|p| p.get(key)?.parse::<u64>().ok())
                .map(|before| before.saturating_add(plus).saturating_sub(minus))
        } else {
            Some(exact)
        };
        if let Some(value) = value {
            s.insert(key.to_string(), value.to_string());
        }
    }
    for (k, v) in [
        ("total-delete-files", total.delete_files),
        ("total-position-deletes", total.position_deletes),
        (TOTAL_EQUALITY_DELETES_PROPERTY, total.equality_deletes),
    ] {
        s.insert(k.to_string(), v.to_string());
    }
    for (k, v) in &changes.extra_summary {
        s.insert(k.clone(), v.clone());
    }
    s
}

#[cfg(test)]
mod tests {
    use iceberg::spec::{DataFileBuilder, Operation, Struct};

    use super::*;
    use crate::table::LiveFile;

    /// Counts other writers stated, up to a long each, are summed saturating: three of
    /// them overflow a 64-bit sum.
    #[test]
    fn totals_of_counts_past_a_long_do_not_wrap() {
        let file = |i: usize| LiveFile {
            file: DataFileBuilder::default()
                .content(DataContentType::Data)
                .file_path(format!("s3://b/t/data/{i}.parquet"))
                .file_format(DataFileFormat::Parquet)
                .partition(Struct::empty())
                .record_count(i64::MAX as u64)
                .file_size_in_bytes(i64::MAX as u64)
                .build()
                .expect("a data file"),
            spec_id: 0,
            data_sequence_number: 1,
            file_sequence_number: 1,
            snapshot_id: 1,
            manifest_path: "s3://b/t/metadata/m.avro".into(),
        };
        let base = TableFiles {
            data_files: (0..3).map(file).collect(),
            ..TableFiles::default()
        };
        let changes = SnapshotChanges {
            operation: Operation::Delete,
            added_data_files: Vec::new(),
            added_delete_files: Vec::new(),
            removed_files: Vec::new(),
            extra_summary: HashMap::new(),
            set_properties: Vec::new(),
        };
        let summary = summarize(&base, None, &changes);
        assert_eq!(summary["total-records"], u64::MAX.to_string());
        assert_eq!(summary["total-files-size"], u64::MAX.to_string());
    }
}
