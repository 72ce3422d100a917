//! Test support: warehouses, generated tables, the invariants every conversion must
//! keep (rows, no equality deletes, DVs the Java reader would accept, no orphan files).

use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};

use eqdv::catalog::{Catalog, SqliteCatalog, TableName};
use eqdv::table::{LoadedTable, TableFiles};
use eqdv_workload::generate::{GenerateReport, KeyType, PartitionKind, WorkloadSpec, generate};
use iceberg::spec::{ManifestList, TableMetadata};

pub mod before_swap;
pub mod captured;
pub mod fault_proxy;
pub mod flink;
pub mod java;
pub mod manifests;
pub mod race;
pub mod runs;
pub mod services;
pub mod state;

/// Resolves `files` (the head of `table`) with the key index on and off and asserts
/// that both would write the same, non-empty DVs; returns how many.
pub async fn assert_key_index_agrees(
    table: &eqdv::table::LoadedTable,
    files: &eqdv::table::TableFiles,
    what: &str,
) -> usize {
    use eqdv::convert::dvs_to_write;
    use eqdv::resolve::resolve;
    let groups = eqdv::plan::group_equality_deletes(table, files).expect("groups");
    let off = resolve(table, files, &groups, &key_index(false))
        .await
        .expect("resolve without the index");
    let on = resolve(table, files, &groups, &key_index(true))
        .await
        .expect("resolve with the index");
    let dvs_off = dvs_to_write(table, files, &off, 4).await.expect("dvs");
    let dvs_on = dvs_to_write(table, files, &on, 4).await.expect("dvs");
    assert!(!dvs_off.is_empty(), "{what}: nothing to delete");
    assert_eq!(dvs_off, dvs_on, "{what}: the key index changed the DVs");
    dvs_off.len()
}

/// Resolve options with the key index on from the first data file (leaves of 64
/// entries, so that even small tables have several), or off: a conversion must write
/// the same DVs either way.
pub fn key_index(on: bool) -> eqdv::resolve::ResolveOptions {
    use eqdv::key_index::{KeyIndexMode, KeyIndexOptions};
    let key_index = if on {
        KeyIndexOptions {
            leaf_entries: 64,
            ..KeyIndexOptions::always()
        }
    } else {
        KeyIndexOptions {
            mode: KeyIndexMode::Off,
            ..Default::default()
        }
    };
    eqdv::resolve::ResolveOptions {
        key_index,
        ..Default::default()
    }
}

pub struct Warehouse {
    pub dir: tempfile::TempDir,
    pub catalog: SqliteCatalog,
}

pub fn warehouse() -> Warehouse {
    let dir = tempfile::tempdir().expect("tempdir");
    let catalog = SqliteCatalog::open_warehouse(dir.path()).expect("catalog");
    Warehouse { dir, catalog }
}

impl Warehouse {
    /// A second, independent catalog handle (its own SQLite connection), as another process would have.
    pub fn another_handle(&self) -> SqliteCatalog {
        SqliteCatalog::open_warehouse(self.dir.path()).expect("catalog")
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

pub fn table() -> TableName {
    TableName::new("db", "events")
}

/// A small bucket[3] table whose equality deletes are written under an unpartitioned
/// spec: one global group, one shard for the whole table, which no partition split can
/// divide (the case data ranges and splits exist for).
pub fn global_deletes_spec(seed: u64) -> WorkloadSpec {
    WorkloadSpec {
        seed,
        rows: 2_400,
        commits: 3,
        keys: vec![KeyType::Long],
        partition: PartitionKind::Bucket(3),
        global_deletes: true,
        changes_per_commit: 150,
        rows_per_file: 200,
        rows_per_row_group: 100,
        ..Default::default()
    }
}

pub async fn generate_table(catalog: &dyn Catalog, spec: &WorkloadSpec) -> GenerateReport {
    generate(catalog, &table(), spec).await.expect("generate")
}

pub async fn load(catalog: &dyn Catalog) -> LoadedTable {
    LoadedTable::load(catalog, &table())
        .await
        .expect("load table")
}

pub async fn files(catalog: &dyn Catalog) -> TableFiles {
    let t = load(catalog).await;
    let head = t.head("main").expect("head");
    TableFiles::read(&t, head.as_ref())
        .await
        .expect("read files")
}

/// The invariants after a successful conversion, judged first by a reader that is not
/// eqdv: PyIceberg reads exactly `expected` (as a multiset), sees no live equality
/// delete, and checks every DV byte by byte (`eqdv_judges::judge_converted_local`).
/// Then eqdv's own reader and DV checks as a second opinion: the same rows, at most one
/// DV per data file (TableFiles::read enforces it), every DV in its data file's
/// partition.
pub async fn assert_converted(catalog: &dyn Catalog, expected: &[String]) {
    let t = load(catalog).await;
    let warehouse = warehouse_of(&t);
    eqdv_judges::judge_converted_local(&warehouse, &table().to_string(), expected);
    let rows = eqdv_workload::read::read_canonical(&t, "main")
        .await
        .expect("read rows");
    eqdv_judges::assert_same_rows("eqdv's reader", &rows, expected);
    let f = files(catalog).await;
    assert!(
        f.equality_deletes.is_empty(),
        "{} equality delete files still live",
        f.equality_deletes.len()
    );
    assert_dvs_valid(catalog).await;
}

/// The warehouse directory of a local table: the nearest directory above its location
/// that holds the SQLite catalog (`catalog.db`), which is what PyIceberg opens.
pub fn warehouse_of(t: &LoadedTable) -> PathBuf {
    let location = local(t.location());
    location
        .ancestors()
        .find(|dir| dir.join("catalog.db").is_file())
        .unwrap_or_else(|| {
            panic!(
                "no catalog.db above the table location {}",
                location.display()
            )
        })
        .to_path_buf()
}

/// Every live DV passes the checks Java's reader makes (see `eqdv::verify`).
pub async fn assert_dvs_valid(catalog: &dyn Catalog) {
    let t = load(catalog).await;
    let f = files(catalog).await;
    let checked = eqdv::verify::verify_dvs(&t, &f)
        .await
        .unwrap_or_else(|e| panic!("invalid DV: {e}"));
    assert_eq!(checked.dvs, f.dvs.len());
}

fn local(path: &str) -> PathBuf {
    PathBuf::from(path.trim_start_matches("file://"))
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else {
                out.push(p);
            }
        }
    }
}

/// Files under the table's location that no metadata version references.
pub async fn orphan_files(catalog: &dyn Catalog) -> Vec<PathBuf> {
    let t = load(catalog).await;
    let mut reachable: HashSet<PathBuf> = HashSet::new();
    let mut metadata_files = vec![t.pointer.metadata_location.clone()];
    metadata_files.extend(
        t.metadata
            .metadata_log()
            .iter()
            .map(|m| m.metadata_file.clone()),
    );
    for location in metadata_files {
        reachable.insert(local(&location));
        let Ok(metadata) = TableMetadata::read_from(&t.file_io, &location).await else {
            continue;
        };
        // The key index a version names is the table's too.
        for file in eqdv::key_index::referenced_files(&t.file_io, metadata.properties())
            .await
            .expect("the key index's files")
        {
            reachable.insert(local(&file));
        }
        for snapshot in metadata.snapshots() {
            reachable.insert(local(snapshot.manifest_list()));
            let bytes = std::fs::read(local(snapshot.manifest_list())).expect("manifest list");
            let list = ManifestList::parse_with_version(&bytes, metadata.format_version())
                .expect("parse manifest list");
            for m in list.entries() {
                reachable.insert(local(&m.manifest_path));
                let manifest = m.load_manifest(&t.file_io).await.expect("manifest");
                for e in manifest.entries() {
                    reachable.insert(local(e.file_path()));
                }
            }
        }
    }
    let mut all = Vec::new();
    walk(&local(t.location()), &mut all);
    let mut orphans: Vec<PathBuf> = all.into_iter().filter(|p| !reachable.contains(p)).collect();
    orphans.sort();
    orphans
}

/// Every file under `dir`, recursively (panics on an unreadable directory).
pub fn all_files(dir: &Path) -> BTreeSet<PathBuf> {
    fn walk(dir: &Path, out: &mut BTreeSet<PathBuf>) {
        for e in std::fs::read_dir(dir).expect("read_dir").flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else {
                out.insert(p);
            }
        }
    }
    let mut out = BTreeSet::new();
    walk(dir, &mut out);
    out
}

pub async fn assert_no_orphans(catalog: &dyn Catalog) {
    let orphans = orphan_files(catalog).await;
    assert!(orphans.is_empty(), "orphan files left behind: {orphans:#?}");
}

/// Commits a change of the table's metadata alone (a property, a ref), as another
/// writer would: `change` edits the head's metadata, which is then published on it.
pub async fn commit_metadata_change(
    catalog: &dyn Catalog,
    change: impl FnOnce(
        iceberg::spec::TableMetadataBuilder,
    ) -> iceberg::Result<iceberg::spec::TableMetadataBuilder>,
) {
    let t = load(catalog).await;
    let head = t.head("main").expect("head").expect("a snapshot");
    let builder = t
        .metadata
        .as_ref()
        .clone()
        .into_builder(Some(t.pointer.metadata_location.clone()));
    let built = change(builder)
        .expect("metadata change")
        .build()
        .expect("metadata");
    let prepared = eqdv::snapshot::PreparedSnapshot {
        metadata: built.metadata,
        snapshot_id: head.snapshot_id(),
        sequence_number: head.sequence_number(),
        written_files: Vec::new(),
        summary: Default::default(),
        updates: built.changes,
    };
    eqdv::commit::publish(catalog, &t, &prepared)
        .await
        .expect("publish the metadata change");
}

/// Every manifest of the table decodes alike through eqdv's fast decoder and
/// iceberg-rust's (see `manifests.rs`).
pub async fn assert_manifests_decode_alike(catalog: &dyn Catalog) -> usize {
    manifests::assert_manifests_decode_alike(&load(catalog).await).await
}

/// A plan of the head with a shard per partition, as the converter Lambdas of a table
/// with many queue groups convert it.
pub async fn shard_per_partition(catalog: &dyn Catalog) -> eqdv::plan::Plan {
    let t = load(catalog).await;
    eqdv::plan::plan(
        &t,
        "main",
        &files(catalog).await,
        &eqdv::plan::PlanOptions {
            target_shard_bytes: 1,
            ..Default::default()
        },
    )
    .unwrap()
}
