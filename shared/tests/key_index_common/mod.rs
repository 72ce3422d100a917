//! What the key index tests share: the index on and off, small CDC tables, and the
//! differential step (the same positions with and without the index, then a conversion
//! judged by PyIceberg).

#![allow(dead_code)]

use eqdv_test_support as support;

use eqdv::catalog::Catalog;
use eqdv::convert::{ConvertOptions, ConvertReport, Outcome, convert};
use eqdv::key_index::{self, KeyIndexMode, KeyIndexOptions};
use eqdv::resolve::{ResolveOptions, Resolved};
use eqdv::table::KeptReads;
use eqdv_workload::generate::{
    GenerateReport, KeyType, PartitionKind, WorkloadSpec, expected_rows,
};
use roaring::RoaringTreemap;
use std::collections::BTreeMap;
use support::*;

/// The key index on for every table, built from the first data file on, in leaves of
/// a few hundred entries (so that lookups probe some leaves and not others).
pub fn indexed() -> ResolveOptions {
    ResolveOptions {
        key_index: KeyIndexOptions {
            leaf_entries: 400,
            ..KeyIndexOptions::always()
        },
        ..Default::default()
    }
}

/// The key index off: the scan alone.
pub fn scan_only() -> ResolveOptions {
    ResolveOptions {
        key_index: KeyIndexOptions {
            mode: KeyIndexMode::Off,
            ..Default::default()
        },
        ..Default::default()
    }
}

pub fn spec(seed: u64, keys: Vec<KeyType>, partition: PartitionKind) -> WorkloadSpec {
    WorkloadSpec {
        seed,
        rows: 2_400,
        commits: 2,
        keys,
        partition,
        // Few changes over many small files: most files hold no deleted key, which is
        // what the index should find out without reading them.
        changes_per_commit: 16,
        rows_per_file: 80,
        rows_per_row_group: 40,
        ..Default::default()
    }
}

/// Resolves the table's live equality deletes without and with the index: the same DVs
/// to write, and no position the scan did not find (the index skips files whose named
/// rows an existing DV deletes, and leaves out rows deleted when its runs merged).
pub async fn resolve_both(catalog: &dyn Catalog) -> (Resolved, Resolved) {
    let (off, off_dvs) = resolve_with(catalog, &scan_only(), None).await;
    let (on, on_dvs) = resolve_with(catalog, &indexed(), None).await;
    assert_eq!(off_dvs, on_dvs, "the index changed the DVs to write");
    // The index leaves out rows a DV deleted when their run was merged, so a file it
    // names may be found at fewer positions: those rows were deleted already (the DVs
    // to write, compared above, are the same).
    for (path, positions) in &on.positions {
        let without = off.positions.get(path);
        assert!(
            without.is_some_and(|off| positions.is_subset(off)),
            "the index found positions in {path} that the scan did not: {positions:?} against {without:?}"
        );
    }
    // Files found without the index and not with it hold only rows deleted already:
    // the same DVs to write say so.
    (off, on)
}

/// Resolves the table's live equality deletes with `options`, the table read through
/// `kept` when given (a warm process's store): what the resolve found, and the DVs a
/// conversion would write from it.
pub async fn resolve_with(
    catalog: &dyn Catalog,
    options: &ResolveOptions,
    kept: Option<&KeptReads>,
) -> (Resolved, BTreeMap<String, RoaringTreemap>) {
    let mut t = load(catalog).await;
    if let Some(kept) = kept {
        t = t.keeping_reads_in(kept);
    }
    let f = files(catalog).await;
    let groups = eqdv::plan::group_equality_deletes(&t, &f).unwrap();
    let resolved = eqdv::resolve::resolve(&t, &f, &groups, options)
        .await
        .unwrap();
    let dvs = eqdv::convert::dvs_to_write(&t, &f, &resolved, 8)
        .await
        .unwrap();
    (resolved, dvs)
}

/// One more writer commit of the workload `spec` (the generator goes on from the table's
/// state).
pub async fn one_more_commit(catalog: &dyn Catalog, spec: &WorkloadSpec) -> GenerateReport {
    generate_table(
        catalog,
        &WorkloadSpec {
            commits: 1,
            ..spec.clone()
        },
    )
    .await
}

/// Converts the table with `resolve`'s options (the rest default); panics naming `step`.
pub async fn convert_with(
    catalog: &dyn Catalog,
    resolve: ResolveOptions,
    step: &str,
) -> ConvertReport {
    convert(
        catalog,
        &table(),
        &ConvertOptions {
            resolve,
            ..Default::default()
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{step}: conversion failed: {e}"))
}

/// One step: the same positions with and without the index, then the conversion that
/// keeps it, judged by PyIceberg.
pub async fn differential_step(
    catalog: &dyn Catalog,
    expected: &[String],
    step: &str,
) -> (Resolved, ConvertReport) {
    let (off, on) = resolve_both(catalog).await;
    assert_eq!(
        off.metrics.index_lookups, 0,
        "{step}: the index was asked though off"
    );
    assert!(
        on.metrics.files_opened <= off.metrics.files_opened,
        "{step}: the index opened more files ({} > {})",
        on.metrics.files_opened,
        off.metrics.files_opened
    );
    let report = convert_with(catalog, indexed(), step).await;
    assert_eq!(report.outcome, Outcome::Converted, "{step}");
    assert_converted(catalog, expected).await;
    (on, report)
}

/// What the indexes the conversion kept cover, against the live data files: every live
/// file of the conversion's scope (all of them when it read the whole table), each with
/// one entry per row.
pub async fn assert_index_covers_live_files(
    catalog: &dyn Catalog,
    converted: &ConvertReport,
    step: &str,
) {
    let t = load(catalog).await;
    let f = files(catalog).await;
    let summaries = key_index::summaries(&t, Some(&f)).await;
    assert!(!summaries.is_empty(), "{step}: no index");
    let parts = key_index::KeyIndexOptions::default().parts(&t);
    let mut covered = 0;
    for summary in &summaries {
        assert!(summary.usable, "{step}: {summary:?}");
        // An index is kept by the conversions of its own equality field set only (a
        // table whose deletes moved on to another key keeps the old index as it was).
        if !converted
            .key_index
            .iter()
            .any(|u| u.equality_ids == summary.equality_ids)
        {
            continue;
        }
        let key = key_index::IndexKey {
            equality_ids: summary.equality_ids.clone(),
            part: summary.part.clone(),
        };
        let state = key_index::open_for(&t, &key, None, f.snapshot_id).await;
        let index = state.usable().expect("usable");
        // A partitioned table's index is kept in parts, each covering its partitions.
        let of_part = f
            .data_files
            .iter()
            .filter(|data| key_index::part_of_file(&t.metadata, parts, data) == key.part);
        for data in of_part {
            if index.covers(data) {
                covered += 1;
                let listed = index
                    .covered_lists
                    .iter()
                    .flat_map(|l| &l.files)
                    .find(|c| c.path == data.path())
                    .expect("listed");
                assert_eq!(
                    listed.record_count,
                    data.file.record_count(),
                    "{step}: entries of {}",
                    data.path()
                );
            } else {
                assert!(
                    converted.skipped_data.is_partial(),
                    "{step}: live data file {} of a conversion that read them all is not covered by {:?}",
                    data.path(),
                    summary.equality_ids
                );
            }
        }
    }
    assert!(covered > 0, "{step}: the index covers no live data file");
    // A conversion that read the whole table keeps a part for every live file's
    // partition (the loop above checks the parts that exist).
    if !converted.skipped_data.is_partial() {
        for upkeep in &converted.key_index {
            for data in &f.data_files {
                let part = key_index::part_of_file(&t.metadata, parts, data);
                assert!(
                    summaries
                        .iter()
                        .any(|s| s.equality_ids == upkeep.equality_ids && s.part == part),
                    "{step}: no part {part:?} of the index of {:?} for {}",
                    upkeep.equality_ids,
                    data.path()
                );
            }
        }
    }
}

/// Every index of the table, proved against a full scan of the live files it covers.
pub async fn assert_index_matches_a_full_scan(catalog: &dyn Catalog, step: &str) {
    let t = load(catalog).await;
    let f = files(catalog).await;
    let verified = key_index::verify_indexes(&t, &f).await.unwrap();
    assert!(!verified.is_empty(), "{step}: no index to verify");
    for v in &verified {
        assert_eq!(v.unusable, None, "{step}");
        assert!(v.mismatches.is_empty(), "{step}: {:?}", v.mismatches);
        assert!(
            v.files_checked > 0 && v.entries_checked > 0,
            "{step}: {v:?}"
        );
    }
}

/// What [`rounds`] saw the index do.
#[derive(Debug, Default)]
pub struct Rounds {
    /// Files ruled out because existing DVs delete every row the index named in them.
    pub ruled_out_by_dvs: u64,
    /// Entries of deleted rows that merges left out.
    pub deleted_entries_dropped: u64,
}

/// A table converted over several rounds of CDC commits with the index kept by each
/// conversion: the same DVs with and without it in every round, the index built,
/// folded and merged, and (from the second round on) data files ruled out by it.
pub async fn rounds(spec: WorkloadSpec, rounds: usize) -> Rounds {
    let w = warehouse();
    let mut report = generate_table(&w.catalog, &spec).await;
    let mut pruned = 0;
    let mut seen = Rounds::default();
    let mut merged = 0;
    let mut by_position = 0;
    let mut from_scan = 0;
    for round in 0..rounds {
        let step = format!(
            "{} seed {} round {round}",
            spec.keys
                .iter()
                .map(|k| k.name())
                .collect::<Vec<_>>()
                .join("+"),
            spec.seed
        );
        let expected = expected_rows(&report.state).expect("expected rows");
        let (resolved, converted) = differential_step(&w.catalog, &expected, &step).await;
        if round == 0 {
            assert_eq!(resolved.metrics.index_lookups, 0, "{step}: no index yet");
            assert!(
                converted.key_index.iter().all(|u| u.built),
                "{step}: the first conversion builds the index: {:?}",
                converted.key_index
            );
        } else {
            assert!(
                resolved.metrics.index_lookups > 0,
                "{step}: the index was not asked"
            );
            assert!(
                converted.key_index.iter().all(|u| !u.built),
                "{step}: an index that serves is folded into, not rebuilt"
            );
        }
        assert!(
            !converted.key_index.is_empty(),
            "{step}: the index was not kept"
        );
        pruned += resolved.metrics.pruned_by_index;
        by_position += resolved.metrics.files_read_by_position;
        seen.ruled_out_by_dvs += resolved.metrics.pruned_by_index_dvs;
        seen.deleted_entries_dropped += converted
            .key_index
            .iter()
            .map(|u| u.deleted_entries_dropped)
            .sum::<u64>();
        merged += converted
            .key_index
            .iter()
            .map(|u| u.runs_merged)
            .sum::<u64>();
        from_scan += converted
            .key_index
            .iter()
            .map(|u| u.data_files_from_scan)
            .sum::<u64>();
        assert_index_covers_live_files(&w.catalog, &converted, &step).await;
        assert_index_matches_a_full_scan(&w.catalog, &step).await;
        report = one_more_commit(&w.catalog, &spec).await;
    }
    assert!(
        pruned > 0,
        "the index ruled out no data file in {rounds} rounds"
    );
    assert!(merged > 0, "no run was ever merged in {rounds} rounds");
    assert!(
        from_scan > 0,
        "the index's upkeep took no file's keys from the scan in {rounds} rounds"
    );
    assert!(
        by_position > 0,
        "no file was read at the rows the index named in {rounds} rounds"
    );
    assert_no_orphans(&w.catalog).await;
    seen
}
