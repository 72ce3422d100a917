//! Conversions split into data ranges and committed once (`eqdv::convert::ranges`),
//! against a real local warehouse (SQLite catalog, Parquet and Puffin files on disk):
//! every range's DVs land in one snapshot with the rows a full scan expects, judged by
//! readers other than eqdv's; a missing or mismatched range commits nothing and leaves
//! no file behind; a writer's commit before the fan-in, or racing its swap, is rebased
//! on, and a removed data file makes the ranges stale.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::atomic::Ordering;

use eqdv::Error;
use eqdv::cleanup::normalize_location;
use eqdv::convert::{
    ConvertOptions, DataRange, Membership, Outcome, RangeResult, commit_ranges, convert,
    convert_in_ranges, convert_range, discard_ranges,
};
use eqdv::snapshot::{SnapshotChanges, build_snapshot};
use eqdv::table::TableFiles;
use eqdv_test_support::race::interfering;
use eqdv_test_support::state::{TableState, expected_conversion};
use eqdv_test_support::*;
use eqdv_workload::generate::{PartitionKind, WorkloadSpec, expected_rows_of};
use iceberg::spec::{ManifestContentType, ManifestFile, Operation};

/// Every range of a split into `count` at the head, converted one by one.
async fn convert_every_range(w: &Warehouse, count: u32) -> Vec<RangeResult> {
    let head = load(&w.catalog)
        .await
        .head("main")
        .unwrap()
        .expect("a head")
        .snapshot_id();
    let mut results = Vec::new();
    for range in DataRange::all(count) {
        results.push(
            convert_range(
                &w.catalog,
                &table(),
                &ConvertOptions::default(),
                head,
                range,
            )
            .await
            .unwrap_or_else(|e| panic!("{range}: {e}")),
        );
    }
    results
}

/// Another writer's commit of the workload `s` (data and new equality deletes).
async fn another_writer_commits(w: &Warehouse, s: &WorkloadSpec) {
    let next = WorkloadSpec {
        commits: 1,
        ..s.clone()
    };
    eqdv_workload::generate::generate(&w.catalog, &table(), &next)
        .await
        .expect("the other writer");
}

/// Data file -> the number of positions its live DV deletes.
fn dv_cardinalities(state: &TableState) -> BTreeMap<String, u64> {
    state
        .dvs
        .iter()
        .map(|(data, dv)| (data.clone(), dv.cardinality))
        .collect()
}

fn puffins(results: &[RangeResult]) -> BTreeSet<String> {
    results
        .iter()
        .filter_map(|r| r.puffin.as_ref())
        .map(|p| normalize_location(&p.location))
        .collect()
}

/// The range of a split of `base` into `count` that holds the data file at `path`.
fn range_of(base: &TableFiles, path: &str, count: u32) -> u32 {
    let layout = base.range_layout(count);
    assert_eq!(layout.membership(), Membership::ManifestLayout);
    let data = base
        .data_files
        .iter()
        .find(|f| f.path() == path)
        .unwrap_or_else(|| panic!("{path} is not a data file of the base"));
    let ranges: Vec<u32> = DataRange::all(count)
        .filter(|r| layout.holds(*r, &data.manifest_path, path))
        .map(|r| r.index)
        .collect();
    assert_eq!(ranges.len(), 1, "{path} is in ranges {ranges:?}");
    ranges[0]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_global_group_split_into_four_ranges_commits_once() {
    let w = warehouse();
    let s = global_deletes_spec(60);
    generate_table(&w.catalog, &s).await;
    let (t, f) = (load(&w.catalog).await, files(&w.catalog).await);
    let groups = eqdv::plan::group_equality_deletes(&t, &f).unwrap();
    assert!(
        groups.iter().any(|g| g.global),
        "the workload wrote no global group"
    );
    let before = TableState::read(&w.catalog, &table()).await;
    let planned = expected_conversion(&w.catalog, &table(), &before.rows).await;

    let report = convert_in_ranges(&w.catalog, &table(), &ConvertOptions::default(), 4)
        .await
        .expect("conversion in four ranges");
    assert_eq!(report.outcome, Outcome::Converted);
    assert_eq!(report.ranges, 4);
    assert_eq!(
        (report.commit_attempts, report.conflicts, report.replans),
        (1, 0, 0)
    );
    assert_eq!(report.dvs_written, planned.dvs.len());
    assert_eq!(report.resolve.live_data_files, f.data_files.len() as u64);

    let after = TableState::read(&w.catalog, &table()).await;
    // Exactly one snapshot, on the old head, converted from it.
    let new: Vec<i64> = after
        .snapshots
        .keys()
        .filter(|id| !before.snapshots.contains_key(id))
        .copied()
        .collect();
    assert_eq!(new, vec![after.head.expect("a head")]);
    let ours = &after.snapshots[&new[0]];
    assert_eq!(ours.parent, before.head);
    assert_eq!(ours.operation, "delete");
    assert_eq!(ours.converted_from, before.head.map(|id| id.to_string()));
    assert_eq!(after.data_files, before.data_files);
    assert!(after.equality_deletes.is_empty());
    assert_eq!(
        dv_cardinalities(&after),
        planned.dvs,
        "not the DVs a full scan expects"
    );
    assert_eq!(after.dv_check, Ok(planned.dvs.len()), "invalid DVs");
    // One Puffin file per range that found positions, each holding only its range's DVs.
    let mut ranges_by_puffin: BTreeMap<String, BTreeSet<u32>> = BTreeMap::new();
    for (data, dv) in &after.dvs {
        ranges_by_puffin
            .entry(normalize_location(&dv.puffin))
            .or_default()
            .insert(range_of(&f, data, 4));
    }
    assert!(
        ranges_by_puffin.len() > 1,
        "the DVs did not spread over ranges: {ranges_by_puffin:#?}"
    );
    for (puffin, ranges) in &ranges_by_puffin {
        assert_eq!(ranges.len(), 1, "{puffin} holds DVs of ranges {ranges:?}");
    }
    assert!(after.rows == before.rows, "live rows changed");
    assert_eq!(after.orphans, before.orphans, "the conversion left orphans");
    // Judged by readers that are not eqdv's, with no equality delete left.
    assert_converted(&w.catalog, &before.rows).await;
    // Converting again finds nothing to do.
    let again = convert_in_ranges(&w.catalog, &table(), &ConvertOptions::default(), 4)
        .await
        .unwrap();
    assert_eq!(again.outcome, Outcome::NothingToDo);
    assert_no_orphans(&w.catalog).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_split_with_a_missing_or_mismatched_range_commits_nothing() {
    let w = warehouse();
    generate_table(&w.catalog, &global_deletes_spec(61)).await;
    let before = TableState::read(&w.catalog, &table()).await;
    let options = ConvertOptions::default();
    let refused = |e: Error, wanted: &str| {
        assert!(
            matches!(e, Error::InvalidInput(_)) && e.to_string().contains(wanted),
            "wanted an invalid input naming {wanted:?}, got: {e}"
        );
    };

    let loaded = load(&w.catalog).await;
    let (file_io, location) = (loaded.file_io.clone(), loaded.location().to_string());
    // A range that never came back (failed, or timed out: a failed range removes what
    // it wrote).
    let mut results = convert_every_range(&w, 4).await;
    assert!(puffins(&results).len() > 1, "too few ranges wrote DVs");
    discard_ranges(&file_io, &location, &results[2..3]).await;
    results.remove(2);
    let e = commit_ranges(&w.catalog, &table(), &options, &results)
        .await
        .unwrap_err();
    refused(e, "data range 2 of 4 of table db.events is missing");
    before.assert_unchanged(&TableState::read(&w.catalog, &table()).await);

    // The same range twice (a duplicate delivery), in place of another.
    let mut results = convert_every_range(&w, 4).await;
    discard_ranges(&file_io, &location, &results[3..4]).await;
    results[3] = results[0].clone();
    let e = commit_ranges(&w.catalog, &table(), &options, &results)
        .await
        .unwrap_err();
    refused(e, "data range 0 of 4 of table db.events is given twice");

    // A range of another split.
    let mut results = convert_every_range(&w, 4).await;
    let other = convert_every_range(&w, 3).await;
    discard_ranges(&file_io, &location, &other[1..]).await;
    results.push(other[0].clone());
    let e = commit_ranges(&w.catalog, &table(), &options, &results)
        .await
        .unwrap_err();
    refused(e, "has range count 3, not 4");

    // A range that read another snapshot.
    let mut results = convert_every_range(&w, 2).await;
    results[1].base_snapshot_id += 1;
    let e = commit_ranges(&w.catalog, &table(), &options, &results)
        .await
        .unwrap_err();
    refused(e, "data range 1 of 2 of table db.events has base snapshot");

    // Nothing committed, and every range's Puffin file removed.
    before.assert_unchanged(&TableState::read(&w.catalog, &table()).await);
}

/// The ranges say where each DV's data file lies, so the fan-in reads none of the data
/// manifests (they are moved away while it runs, which a read of them would fail on);
/// given results that do not say (an earlier version's), it reads them itself. Either
/// way every DV sits in its data file's partition (date, string and bucket partitions),
/// as eqdv's checks and PyIceberg find.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fan_in_files_dvs_where_the_ranges_say_without_the_data_manifests() {
    for (seed, partition, ranges_say) in [
        (62, PartitionKind::Day, true),
        (63, PartitionKind::Identity, true),
        (64, PartitionKind::Bucket(3), false),
    ] {
        let w = warehouse();
        let s = WorkloadSpec {
            partition,
            ..global_deletes_spec(seed)
        };
        generate_table(&w.catalog, &s).await;
        let before = TableState::read(&w.catalog, &table()).await;
        let planned = expected_conversion(&w.catalog, &table(), &before.rows).await;
        let mut results = convert_every_range(&w, 3).await;
        let dvs = || {
            results
                .iter()
                .flat_map(|r| r.puffin.iter().flat_map(|p| &p.dvs))
        };
        assert_eq!(dvs().count(), planned.dvs.len(), "{partition}");
        assert!(
            dvs().all(|dv| dv.data_file.is_some()),
            "{partition}: a range did not say where a DV's data file lies"
        );
        let data_manifests: Vec<PathBuf> = files(&w.catalog)
            .await
            .manifests
            .iter()
            .filter(|m| m.content == ManifestContentType::Data)
            .map(|m| PathBuf::from(normalize_location(&m.manifest_path)))
            .collect();
        assert!(!data_manifests.is_empty());
        let hide = |hidden: bool| {
            for m in &data_manifests {
                let away = m.with_extension("away");
                let (from, to) = if hidden { (m, &away) } else { (&away, m) };
                std::fs::rename(from, to).unwrap();
            }
        };
        if ranges_say {
            hide(true);
            let t = load(&w.catalog).await;
            assert!(
                eqdv::table::TableFiles::read(&t, t.head("main").unwrap().as_ref())
                    .await
                    .is_err(),
                "the data manifests are not out of reach"
            );
        } else {
            for dv in results
                .iter_mut()
                .flat_map(|r| r.puffin.iter_mut().flat_map(|p| &mut p.dvs))
            {
                dv.data_file = None;
            }
        }
        let committed =
            commit_ranges(&w.catalog, &table(), &ConvertOptions::default(), &results).await;
        if ranges_say {
            hide(false);
        }
        let report = committed.unwrap_or_else(|e| panic!("{partition}: the fan-in failed: {e}"));
        assert_eq!(report.outcome, Outcome::Converted, "{partition}");
        let after = TableState::read(&w.catalog, &table()).await;
        assert_eq!(
            after.dv_check,
            Ok(planned.dvs.len()),
            "{partition}: invalid DVs"
        );
        assert_eq!(dv_cardinalities(&after), planned.dvs, "{partition}");
        assert!(after.equality_deletes.is_empty(), "{partition}");
        assert!(after.rows == before.rows, "{partition}: live rows changed");
        assert_converted(&w.catalog, &before.rows).await;
    }
}

/// Each range fetches only the data manifests its part of the base's layout covers: the
/// others are moved out of reach while it runs. Together the ranges still hold every data
/// file once and convert the table as a full scan does (PyIceberg reads the rows, every
/// DV checked); a range dealt another way (by path hash, as an earlier version did) is
/// refused by the fan-in, committing nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_range_fetches_only_the_data_manifests_of_its_part() {
    let w = warehouse();
    let s = WorkloadSpec {
        commits: 6,
        ..global_deletes_spec(65)
    };
    generate_table(&w.catalog, &s).await;
    let before = TableState::read(&w.catalog, &table()).await;
    let planned = expected_conversion(&w.catalog, &table(), &before.rows).await;
    let base = files(&w.catalog).await;
    let head = base.snapshot_id.expect("a head");

    // Another version's range among them.
    let mut mixed = convert_every_range(&w, 3).await;
    assert!(
        mixed
            .iter()
            .all(|r| r.membership == Membership::ManifestLayout)
    );
    mixed[1].membership = Membership::PathHash;
    let e = commit_ranges(&w.catalog, &table(), &ConvertOptions::default(), &mixed)
        .await
        .unwrap_err();
    assert!(
        matches!(e, Error::InvalidInput(_))
            && e.to_string().contains("data range 1 of 3")
            && e.to_string().contains("must be of one version"),
        "{e}"
    );
    before.assert_unchanged(&TableState::read(&w.catalog, &table()).await);

    let layout = base.range_layout(3);
    assert_eq!(layout.membership(), Membership::ManifestLayout);
    let data_manifests: Vec<&ManifestFile> = base
        .manifests
        .iter()
        .filter(|m| m.content == ManifestContentType::Data)
        .collect();
    let mut results = Vec::new();
    let mut unfetched = 0;
    for range in DataRange::all(3) {
        let away: Vec<PathBuf> = data_manifests
            .iter()
            .filter(|m| !layout.may_hold(range, m))
            .map(|m| PathBuf::from(normalize_location(&m.manifest_path)))
            .collect();
        unfetched += away.len();
        for m in &away {
            std::fs::rename(m, m.with_extension("away")).unwrap();
        }
        let converted = convert_range(
            &w.catalog,
            &table(),
            &ConvertOptions::default(),
            head,
            range,
        )
        .await;
        for m in &away {
            std::fs::rename(m.with_extension("away"), m).unwrap();
        }
        let result = converted.unwrap_or_else(|e| panic!("{range}: {e}"));
        assert_eq!(result.membership, Membership::ManifestLayout);
        results.push(result);
    }
    assert!(
        unfetched >= data_manifests.len(),
        "the ranges left only {unfetched} of {} data manifests unfetched",
        data_manifests.len()
    );
    let held: u64 = results.iter().map(|r| r.resolve.live_data_files).sum();
    assert_eq!(held, base.data_files.len() as u64, "not every file once");

    let report = commit_ranges(&w.catalog, &table(), &ConvertOptions::default(), &results)
        .await
        .expect("the fan-in");
    assert_eq!(report.outcome, Outcome::Converted);
    let after = TableState::read(&w.catalog, &table()).await;
    assert_eq!(after.dv_check, Ok(planned.dvs.len()), "invalid DVs");
    assert_eq!(dv_cardinalities(&after), planned.dvs);
    assert!(after.equality_deletes.is_empty());
    assert!(after.rows == before.rows, "live rows changed");
    assert_converted(&w.catalog, &before.rows).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_commit_before_the_fan_in_is_rebased_on() {
    let w = warehouse();
    let s = global_deletes_spec(62);
    generate_table(&w.catalog, &s).await;
    let before = TableState::read(&w.catalog, &table()).await;
    let planned = expected_conversion(&w.catalog, &table(), &before.rows).await;
    let results = convert_every_range(&w, 3).await;

    // Another writer commits (data and new equality deletes) before the fan-in.
    another_writer_commits(&w, &s).await;
    let theirs = TableState::read(&w.catalog, &table()).await;

    let report = commit_ranges(&w.catalog, &table(), &ConvertOptions::default(), &results)
        .await
        .expect("fan-in on a moved head");
    assert_eq!(report.outcome, Outcome::Converted);
    assert_eq!((report.rebases, report.replans), (1, 0));
    let after = TableState::read(&w.catalog, &table()).await;
    let head = after.head.expect("a head");
    assert_eq!(after.snapshots[&head].parent, theirs.head);
    assert_eq!(
        after.snapshots[&head].converted_from,
        before.head.map(|id| id.to_string())
    );
    assert_eq!(
        dv_cardinalities(&after),
        planned.dvs,
        "not the DVs planned on the ranges' snapshot"
    );
    // The other writer's deletes are live and unconverted; the rows are all of history's.
    assert_eq!(after.equality_deletes, {
        let older: BTreeSet<String> = before.equality_deletes.clone();
        theirs
            .equality_deletes
            .difference(&older)
            .cloned()
            .collect::<BTreeSet<_>>()
    });
    let expected = expected_rows_of(&w.catalog, &table()).await.unwrap();
    assert!(
        after.rows == expected,
        "rows differ after the rebased fan-in"
    );
    // Converting the rest finishes the table.
    convert(&w.catalog, &table(), &ConvertOptions::default())
        .await
        .unwrap();
    assert_converted(&w.catalog, &expected).await;
    assert_no_orphans(&w.catalog).await;
}

/// The fan-in reads of the base only the data files its ranges wrote DVs for; a writer
/// commit that beats its swap is still told apart from the base (the base is then read
/// whole) and rebased on, not taken for a stale split.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_commit_racing_the_fan_ins_swap_is_rebased_on() {
    let w = warehouse();
    // Few changes a commit: most data files get no DV, so the fan-in's base leaves out
    // files the head still lists.
    let s = WorkloadSpec {
        rows: 6_000,
        changes_per_commit: 10,
        ..global_deletes_spec(64)
    };
    generate_table(&w.catalog, &s).await;
    let before = TableState::read(&w.catalog, &table()).await;
    let planned = expected_conversion(&w.catalog, &table(), &before.rows).await;
    assert!(
        before.data_files.len() > planned.dvs.len() + 10,
        "{} data files, {} DVs planned",
        before.data_files.len(),
        planned.dvs.len()
    );
    let results = convert_every_range(&w, 3).await;

    let racing = interfering(&w, &s, 1);
    let report = commit_ranges(&racing, &table(), &ConvertOptions::default(), &results)
        .await
        .expect("fan-in that lost its first swap");
    assert_eq!(report.outcome, Outcome::Converted);
    assert_eq!(
        (report.conflicts, report.rebases, report.replans),
        (1, 1, 0),
        "{report:#?}"
    );
    assert_eq!(racing.state.swaps.load(Ordering::SeqCst), 2);
    let after = TableState::read(&w.catalog, &table()).await;
    let head = after.head.expect("a head");
    let theirs = after.snapshots[&head]
        .parent
        .expect("the other writer's snapshot");
    assert_eq!(after.snapshots[&theirs].parent, before.head);
    assert_eq!(
        dv_cardinalities(&after),
        planned.dvs,
        "not the DVs planned on the ranges' snapshot"
    );
    assert!(after.equality_deletes.is_disjoint(&before.equality_deletes));
    let expected = expected_rows_of(&w.catalog, &table()).await.unwrap();
    assert!(after.rows == expected, "rows differ after the raced fan-in");
    convert(&w.catalog, &table(), &ConvertOptions::default())
        .await
        .unwrap();
    assert_converted(&w.catalog, &expected).await;
    assert_no_orphans(&w.catalog).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_file_removed_before_the_fan_in_makes_the_ranges_stale() {
    let w = warehouse();
    generate_table(&w.catalog, &global_deletes_spec(63)).await;
    let results = convert_every_range(&w, 3).await;
    let target = results
        .iter()
        .filter_map(|r| r.puffin.as_ref())
        .flat_map(|p| &p.dvs)
        .map(|dv| dv.referenced_data_file.clone())
        .next()
        .expect("a range wrote a DV");

    // Another writer removes a data file a range wrote a DV for (as a compaction does).
    let (t, f) = (load(&w.catalog).await, files(&w.catalog).await);
    let removed = f
        .data_files
        .iter()
        .find(|d| d.path() == target)
        .expect("the DV's data file is live")
        .clone();
    let mut changes = SnapshotChanges::new(Operation::Delete);
    changes.removed_files.push(removed);
    let prepared = build_snapshot(&t, "main", &f, &changes).await.unwrap();
    eqdv::commit::publish(&w.catalog, &t, &prepared)
        .await
        .unwrap();
    let before = TableState::read(&w.catalog, &table()).await;

    let e = commit_ranges(&w.catalog, &table(), &ConvertOptions::default(), &results)
        .await
        .unwrap_err();
    assert!(
        matches!(&e, Error::RangesStale { reason, .. } if reason.contains(&target)),
        "{e}"
    );
    assert!(e.retryable(), "a stale split converts again: {e}");
    // Nothing committed, and every range's Puffin file (orphans until then) removed.
    assert!(!puffins(&results).is_empty());
    before.assert_only_removed(
        &TableState::read(&w.catalog, &table()).await,
        &puffins(&results),
    );
    // The in-process split plans again by itself; the rows are the table's as it was
    // before (the removed file's rows gone with it).
    let expected = before.rows.clone();
    let report = convert_in_ranges(&w.catalog, &table(), &ConvertOptions::default(), 3)
        .await
        .unwrap();
    assert_eq!(report.outcome, Outcome::Converted);
    assert_converted(&w.catalog, &expected).await;
    assert_no_orphans(&w.catalog).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_build_on_a_snapshot_other_than_the_head_is_refused() {
    let w = warehouse();
    let s = global_deletes_spec(64);
    generate_table(&w.catalog, &s).await;
    let old = files(&w.catalog).await;
    another_writer_commits(&w, &s).await;
    // The files of the old head, with the table as it is now: a swap of this build
    // would drop the other writer's snapshot.
    let now = load(&w.catalog).await;
    let e = build_snapshot(&now, "main", &old, &SnapshotChanges::new(Operation::Delete))
        .await
        .unwrap_err();
    assert!(
        e.to_string().contains("refusing to build a snapshot"),
        "{e}"
    );
}
