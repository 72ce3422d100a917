//! A table's whole state as the fault and race tests judge it: the pointer, the
//! snapshots, the live files by kind, the rows, every object under the table's location
//! and which of them no metadata version references. A failed conversion must leave it
//! as it was (plus the leftovers a test expects); a conversion must add exactly one eqdv
//! snapshot whose files are the before-state's minus its equality deletes plus the DVs
//! a full scan expects.
//!
//! What is reachable is this module's own walk of the metadata, not the cleanup code
//! under test; the listing is `eqdv::cleanup`'s.

use std::collections::{BTreeMap, BTreeSet};

use eqdv::catalog::{Catalog, TableName, TablePointer};
use eqdv::cleanup::normalize_location;
use eqdv::table::{LoadedTable, TableFiles};
use iceberg::io::FileIO;
use iceberg::spec::{ManifestList, TableMetadata};

/// One snapshot, as far as the tests care.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotInfo {
    pub parent: Option<i64>,
    pub operation: String,
    /// `eqdv.converted-from`: the snapshot an eqdv conversion was planned on.
    pub converted_from: Option<String>,
}

/// One live DV: the Puffin file holding it and how many positions it deletes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dv {
    pub puffin: String,
    pub cardinality: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableState {
    pub pointer: TablePointer,
    /// The metadata file the current one follows (the last entry of its log).
    pub previous_metadata: Option<String>,
    pub head: Option<i64>,
    pub snapshots: BTreeMap<i64, SnapshotInfo>,
    pub data_files: BTreeSet<String>,
    pub equality_deletes: BTreeSet<String>,
    pub position_deletes: BTreeSet<String>,
    /// Data file -> its DV.
    pub dvs: BTreeMap<String, Dv>,
    /// What the DV checks (`eqdv::verify`) say: the number of DVs checked, or the error.
    pub dv_check: Result<usize, String>,
    pub rows: Vec<String>,
    /// Every object under the table's location (normalized); where storage cannot be
    /// listed (S3 Tables), the objects some metadata version references.
    pub objects: BTreeSet<String>,
    /// The objects no metadata version references.
    pub orphans: BTreeSet<String>,
    /// Files a metadata version references that do not exist.
    pub missing: BTreeSet<String>,
}

/// What converting a table that has no DVs or position deletes yet must give.
#[derive(Clone, Debug)]
pub struct Conversion {
    pub rows: Vec<String>,
    /// Data file -> the number of positions its DV deletes.
    pub dvs: BTreeMap<String, u64>,
}

impl TableState {
    pub async fn read(catalog: &dyn Catalog, name: &TableName) -> TableState {
        Self::read_with(catalog, name, true).await
    }

    /// The state of a table whose storage refuses listings (an S3 Tables table bucket):
    /// its objects are the referenced ones, so no orphan can be seen.
    pub async fn read_referenced(catalog: &dyn Catalog, name: &TableName) -> TableState {
        Self::read_with(catalog, name, false).await
    }

    async fn read_with(catalog: &dyn Catalog, name: &TableName, list: bool) -> TableState {
        let t = LoadedTable::load(catalog, name).await.expect("load table");
        let head = t.head("main").expect("head");
        let files = TableFiles::read(&t, head.as_ref())
            .await
            .expect("read live files");
        let paths = |v: &[eqdv::table::LiveFile]| -> BTreeSet<String> {
            v.iter().map(|f| f.path().to_string()).collect()
        };
        let dvs = files
            .dvs
            .iter()
            .map(|(data, dv)| {
                let dv = Dv {
                    puffin: dv.path().to_string(),
                    cardinality: dv.file.record_count(),
                };
                (data.clone(), dv)
            })
            .collect();
        let dv_check = eqdv::verify::verify_dvs(&t, &files)
            .await
            .map(|c| c.dvs)
            .map_err(|e| e.to_string());
        let rows = eqdv_workload::read::read_canonical(&t, "main")
            .await
            .expect("read rows");
        let snapshots = t
            .metadata
            .snapshots()
            .map(|s| {
                let summary = s.summary();
                let info = SnapshotInfo {
                    parent: s.parent_snapshot_id(),
                    operation: summary.operation.as_str().to_string(),
                    converted_from: summary
                        .additional_properties
                        .get(eqdv::convert::CONVERTED_FROM_PROPERTY)
                        .cloned(),
                };
                (s.snapshot_id(), info)
            })
            .collect();
        let mut versions = vec![t.pointer.metadata_location.clone()];
        versions.extend(
            t.metadata
                .metadata_log()
                .iter()
                .map(|m| m.metadata_file.clone()),
        );
        let mut walk = Walk::default();
        for location in &versions {
            walk.metadata(&t.file_io, location, false).await;
        }
        let objects: BTreeSet<String> = if list {
            eqdv::cleanup::list_files(&t)
                .await
                .expect("list the table's objects")
                .into_iter()
                .map(|f| normalize_location(&f.path))
                .collect()
        } else {
            walk.files.clone()
        };
        let orphans = objects.difference(&walk.files).cloned().collect();
        TableState {
            previous_metadata: t
                .metadata
                .metadata_log()
                .last()
                .map(|m| m.metadata_file.clone()),
            pointer: t.pointer.clone(),
            head: head.map(|s| s.snapshot_id()),
            snapshots,
            data_files: paths(&files.data_files),
            equality_deletes: paths(&files.equality_deletes),
            position_deletes: paths(&files.position_deletes),
            dvs,
            dv_check,
            rows,
            objects,
            orphans,
            missing: walk.missing,
        }
    }

    /// Everything but the objects and orphans.
    fn assert_same_table(&self, after: &TableState) {
        assert_eq!(after.pointer, self.pointer, "the pointer moved");
        assert_eq!(after.previous_metadata, self.previous_metadata);
        assert_eq!(after.head, self.head, "the head moved");
        assert_eq!(after.snapshots, self.snapshots, "the snapshots changed");
        assert_eq!(
            after.data_files, self.data_files,
            "the live data files changed"
        );
        assert_eq!(
            after.equality_deletes, self.equality_deletes,
            "the live equality deletes changed"
        );
        assert_eq!(
            after.position_deletes, self.position_deletes,
            "the live position deletes changed"
        );
        assert_eq!(after.dvs, self.dvs, "the live DVs changed");
        assert_eq!(after.dv_check, self.dv_check);
        assert_eq!(
            after.rows.len(),
            self.rows.len(),
            "the live row count changed"
        );
        assert!(after.rows == self.rows, "the live rows changed");
        assert_eq!(after.missing, self.missing, "referenced files went missing");
    }

    /// A failed conversion: the table as it was, and the only new objects are
    /// `leftovers`, every one of them an orphan. Nothing was deleted.
    pub fn assert_failed(&self, after: &TableState, leftovers: &BTreeSet<String>) {
        self.assert_same_table(after);
        let added: BTreeSet<String> = after.objects.difference(&self.objects).cloned().collect();
        let deleted: BTreeSet<&String> = self.objects.difference(&after.objects).collect();
        assert!(deleted.is_empty(), "objects were deleted: {deleted:#?}");
        assert_eq!(&added, leftovers, "not the expected leftovers");
        let orphans: BTreeSet<String> = self.orphans.union(leftovers).cloned().collect();
        assert_eq!(after.orphans, orphans, "not the expected orphans");
    }

    /// Nothing changed, on disk either.
    pub fn assert_unchanged(&self, after: &TableState) {
        self.assert_failed(after, &BTreeSet::new());
    }

    /// The table as it was, with exactly the objects `removed` gone (a cleanup): they
    /// were orphans.
    pub fn assert_only_removed(&self, after: &TableState, removed: &BTreeSet<String>) {
        self.assert_same_table(after);
        assert!(
            removed.is_subset(&self.orphans),
            "removed objects that were not orphans: {:#?}",
            removed.difference(&self.orphans).collect::<Vec<_>>()
        );
        let objects: BTreeSet<String> = self.objects.difference(removed).cloned().collect();
        assert_eq!(after.objects, objects, "not exactly those objects removed");
        let orphans: BTreeSet<String> = self.orphans.difference(removed).cloned().collect();
        assert_eq!(after.orphans, orphans);
    }

    /// One eqdv snapshot on top of this state (see [`TableState::assert_converted_on`]).
    pub fn assert_converted_once(&self, after: &TableState, expected: &Conversion) {
        self.assert_converted_on(after, expected, &[]);
    }

    /// This state, then the metadata files `others` committed by another writer (which
    /// change no live file), then exactly one eqdv snapshot: its parent is this state's
    /// head, its metadata follows the last of `others` (or this state's), the data
    /// files and position deletes are as before, no equality delete is live, the DVs
    /// are `expected.dvs`, all in one new Puffin file, valid; the rows are
    /// `expected.rows`; no object was deleted, and the new objects are all referenced.
    pub fn assert_converted_on(&self, after: &TableState, expected: &Conversion, others: &[&str]) {
        let base = others
            .last()
            .map_or(self.pointer.metadata_location.as_str(), |o| *o);
        assert_ne!(after.pointer, self.pointer, "the pointer did not move");
        assert_eq!(
            after.previous_metadata.as_deref(),
            Some(base),
            "the converted metadata does not directly follow {base}"
        );
        let new: Vec<(&i64, &SnapshotInfo)> = after
            .snapshots
            .iter()
            .filter(|(id, _)| !self.snapshots.contains_key(id))
            .collect();
        let head = after.head.expect("a head after the conversion");
        let parent = self.head.map(|id| id.to_string());
        assert_eq!(
            new,
            vec![(
                &head,
                &SnapshotInfo {
                    parent: self.head,
                    operation: "delete".into(),
                    converted_from: parent,
                }
            )],
            "not exactly one eqdv snapshot on the old head"
        );
        for (id, info) in &self.snapshots {
            assert_eq!(after.snapshots.get(id), Some(info), "snapshot {id} changed");
        }
        assert_eq!(
            after.data_files, self.data_files,
            "the live data files changed"
        );
        assert!(
            after.equality_deletes.is_empty(),
            "equality deletes still live: {:#?}",
            after.equality_deletes
        );
        assert_eq!(after.position_deletes, self.position_deletes);
        let dvs: BTreeMap<String, u64> = after
            .dvs
            .iter()
            .map(|(data, dv)| (data.clone(), dv.cardinality))
            .collect();
        assert_eq!(dvs, expected.dvs, "not the DVs a full scan expects");
        let puffins: BTreeSet<String> = after
            .dvs
            .values()
            .map(|dv| normalize_location(&dv.puffin))
            .collect();
        assert_eq!(
            puffins.len(),
            1,
            "one Puffin file per conversion: {puffins:#?}"
        );
        assert_eq!(after.dv_check, Ok(expected.dvs.len()), "invalid DVs");
        assert_eq!(after.rows.len(), expected.rows.len(), "the live row count");
        assert!(
            after.rows == expected.rows,
            "live rows differ from the expected rows"
        );
        assert_eq!(after.missing, self.missing, "referenced files went missing");

        let deleted: BTreeSet<&String> = self.objects.difference(&after.objects).collect();
        assert!(deleted.is_empty(), "objects were deleted: {deleted:#?}");
        let added: BTreeSet<String> = after.objects.difference(&self.objects).cloned().collect();
        assert_eq!(after.orphans, self.orphans, "the conversion left orphans");
        for wanted in puffins
            .iter()
            .cloned()
            .chain(others.iter().map(|o| normalize_location(o)))
            .chain([normalize_location(&after.pointer.metadata_location)])
        {
            assert!(added.contains(&wanted), "{wanted} is not a new object");
        }
    }

    /// The objects an unreferenced commit of `metadata_location` wrote on top of this
    /// state: the metadata file and whatever its head snapshot references that this
    /// state did not hold (its manifest list, new manifests, the Puffin file).
    pub async fn written_by(
        &self,
        catalog: &dyn Catalog,
        metadata_location: &str,
    ) -> BTreeSet<String> {
        let mut walk = Walk::default();
        walk.metadata(catalog.file_io(), metadata_location, true)
            .await;
        assert!(
            walk.missing.is_empty(),
            "{metadata_location} references missing files: {:#?}",
            walk.missing
        );
        walk.files.difference(&self.objects).cloned().collect()
    }
}

/// A walk of what metadata files reference; each manifest list and manifest is read once.
#[derive(Default)]
struct Walk {
    files: BTreeSet<String>,
    /// Referenced but unreadable: a metadata file, manifest list or manifest.
    missing: BTreeSet<String>,
    lists: BTreeSet<String>,
    manifests: BTreeSet<String>,
}

impl Walk {
    /// Adds what `metadata_location` references (itself included): of every snapshot,
    /// or only of main's head when `head_only`. A metadata file that cannot be read is
    /// missing (as an expired one is); so is a manifest list or manifest.
    async fn metadata(&mut self, io: &FileIO, metadata_location: &str, head_only: bool) {
        let Ok(metadata) = TableMetadata::read_from(io, metadata_location).await else {
            self.missing.insert(normalize_location(metadata_location));
            return;
        };
        self.files.insert(normalize_location(metadata_location));
        let snapshots: Vec<_> = if head_only {
            metadata
                .snapshot_for_ref("main")
                .cloned()
                .into_iter()
                .collect()
        } else {
            metadata.snapshots().cloned().collect()
        };
        for snapshot in snapshots {
            let list_path = normalize_location(snapshot.manifest_list());
            if !self.lists.insert(list_path.clone()) {
                continue;
            }
            let Ok(list) = read_manifest_list(io, snapshot.manifest_list(), &metadata).await else {
                self.missing.insert(list_path);
                continue;
            };
            self.files.insert(list_path);
            for m in list.entries() {
                let path = normalize_location(&m.manifest_path);
                if !self.manifests.insert(path.clone()) {
                    continue;
                }
                let Ok(manifest) = m.load_manifest(io).await else {
                    self.missing.insert(path);
                    continue;
                };
                self.files.insert(path);
                for e in manifest.entries() {
                    self.files.insert(normalize_location(e.file_path()));
                }
            }
        }
        for s in metadata.statistics_iter() {
            self.files.insert(normalize_location(&s.statistics_path));
        }
        // eqdv's key index, named by a table property.
        match eqdv::key_index::referenced_files(io, metadata.properties()).await {
            Ok(files) => self
                .files
                .extend(files.iter().map(|f| normalize_location(f))),
            Err(_) => {
                self.missing.insert(normalize_location(metadata_location));
            }
        }
        for s in metadata.partition_statistics_iter() {
            self.files.insert(normalize_location(&s.statistics_path));
        }
    }
}

async fn read_manifest_list(
    io: &FileIO,
    location: &str,
    metadata: &TableMetadata,
) -> iceberg::Result<ManifestList> {
    let bytes = io.new_input(location)?.read().await?;
    ManifestList::parse_with_version(&bytes, metadata.format_version())
}

/// What converting the table must give: `rows`, and a DV for every data file a full
/// scan (no pruning) finds deleted positions in, with that many positions. Only for a
/// table with no DV and no position delete yet (no merging to predict).
pub async fn expected_conversion(
    catalog: &dyn Catalog,
    name: &TableName,
    rows: &[String],
) -> Conversion {
    let t = LoadedTable::load(catalog, name).await.expect("load table");
    let head = t.head("main").expect("head");
    let f = TableFiles::read(&t, head.as_ref())
        .await
        .expect("read live files");
    assert!(
        f.dvs.is_empty() && f.position_deletes.is_empty(),
        "expected_conversion predicts a table without older deletes"
    );
    let groups = eqdv::plan::group_equality_deletes(&t, &f).expect("groups");
    let full_scan = eqdv::resolve::ResolveOptions {
        bound_pruning: false,
        row_group_pruning: false,
        bloom_pruning: false,
        ..Default::default()
    };
    let resolved = eqdv::resolve::resolve(&t, &f, &groups, &full_scan)
        .await
        .expect("resolve");
    let dvs = resolved
        .positions
        .iter()
        .filter(|(_, p)| !p.is_empty())
        .map(|(data, p)| (data.clone(), p.len()))
        .collect();
    Conversion {
        rows: rows.to_vec(),
        dvs,
    }
}
