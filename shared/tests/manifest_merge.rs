//! A streaming table's manifests stay few: eqdv's commits drop manifests with no live
//! file left and merge a spec's delete manifests once there are
//! `commit.manifest.min-count-to-merge` of them (below it, pack the ones a conversion
//! writes again anyway), carrying every live entry with the sequence numbers and
//! snapshot it had. Judged by PyIceberg (`assert_converted`) after
//! every conversion, and by the entries themselves.

use eqdv_test_support as support;
use std::collections::{HashMap, HashSet};

use eqdv::convert::{ConvertOptions, Outcome, convert};
use eqdv::snapshot::MIN_COUNT_TO_MERGE_PROPERTY;
use eqdv::table::{FileEntryKey, LiveFile, TableFiles, has_no_live_files};
use eqdv_workload::generate::{KeyType, PartitionKind, WorkloadSpec, expected_rows};
use iceberg::spec::ManifestContentType;
use support::*;

const MIN_COUNT: usize = 6;

/// What a reader inherits for a live delete entry: it must survive any rewrite or merge.
fn inherited(files: &TableFiles) -> HashMap<FileEntryKey, (i64, i64, i64)> {
    files
        .equality_deletes
        .iter()
        .chain(files.dvs.values())
        .chain(&files.position_deletes)
        .map(|f| {
            (
                f.entry_key(),
                (
                    f.data_sequence_number,
                    f.file_sequence_number,
                    f.snapshot_id,
                ),
            )
        })
        .collect()
}

/// Checks the head's manifest list: no manifest without a live file but the head's own,
/// and at most MIN_COUNT delete manifests per spec. Returns whether a delete manifest
/// holds live entries of more than one snapshot (a merged one).
fn check_manifests(files: &TableFiles) -> bool {
    let head = files.snapshot_id.expect("a snapshot");
    let mut per_spec: HashMap<i32, usize> = HashMap::new();
    for m in &files.manifests {
        assert!(
            !has_no_live_files(m) || m.added_snapshot_id == head,
            "manifest {} of an earlier snapshot holds no live file but was carried",
            m.manifest_path
        );
        if m.content == ManifestContentType::Deletes {
            *per_spec.entry(m.partition_spec_id).or_default() += 1;
        }
    }
    for (spec, count) in per_spec {
        assert!(
            count <= MIN_COUNT,
            "spec {spec} has {count} delete manifests, more than the {MIN_COUNT} merging allows"
        );
    }
    let mut snapshots_by_manifest: HashMap<&str, HashSet<i64>> = HashMap::new();
    let deletes: Vec<&LiveFile> = files
        .equality_deletes
        .iter()
        .chain(files.dvs.values())
        .collect();
    for f in deletes {
        snapshots_by_manifest
            .entry(f.manifest_path.as_str())
            .or_default()
            .insert(f.snapshot_id);
    }
    snapshots_by_manifest.values().any(|s| s.len() > 1)
}

/// A bucketed table of long keys whose commits update `changes` rows.
fn streaming(seed: u64, buckets: u32, changes: u32) -> WorkloadSpec {
    WorkloadSpec {
        seed,
        rows: 1_200,
        commits: 2,
        keys: vec![KeyType::Long],
        partition: PartitionKind::Bucket(buckets),
        changes_per_commit: changes,
        rows_per_file: 300,
        rows_per_row_group: 100,
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_manifests_are_merged_and_emptied_ones_dropped() {
    let w = warehouse();
    let spec = streaming(91, 8, 120);
    let mut report = generate_table(&w.catalog, &spec).await;
    commit_metadata_change(&w.catalog, |m| {
        m.set_properties(HashMap::from([(
            MIN_COUNT_TO_MERGE_PROPERTY.to_string(),
            MIN_COUNT.to_string(),
        )]))
    })
    .await;

    let mut merged = false;
    let mut conversions = 0;
    for round in 0..4 {
        if round > 0 {
            report = generate_table(&w.catalog, &spec).await;
        }
        let expected = expected_rows(&report.state).expect("expected rows");
        // One shard per partition, converted one after another as the converter
        // Lambdas would: a DV manifest per shard, and the writer's delete manifest
        // rewritten by each.
        let plan = shard_per_partition(&w.catalog).await;
        assert!(plan.shards.len() > 1, "round {round}: one shard only");
        for shard in &plan.shards {
            let before = files(&w.catalog).await;
            let options = ConvertOptions {
                shard: Some(shard.clone()),
                ..Default::default()
            };
            let report = convert(&w.catalog, &table(), &options).await.unwrap();
            assert_eq!(report.outcome, Outcome::Converted);
            conversions += 1;
            let after = files(&w.catalog).await;
            // Every entry carried keeps what readers inherit for it.
            let (was, now) = (inherited(&before), inherited(&after));
            for (key, values) in &now {
                if let Some(old) = was.get(key) {
                    assert_eq!(
                        old, values,
                        "{key:?} changed its sequence numbers or snapshot"
                    );
                }
            }
            // What left is what the conversion removed: its equality deletes and the
            // DVs it replaced, nothing else.
            let left = was.keys().filter(|k| !now.contains_key(*k)).count();
            assert_eq!(
                left,
                report.equality_delete_files_removed + report.dvs_replaced,
                "entries lost besides the removed ones"
            );
            let data = |f: &TableFiles| -> HashSet<String> {
                f.data_files.iter().map(|d| d.path().to_string()).collect()
            };
            assert_eq!(data(&before), data(&after), "data files changed");
            merged |= check_manifests(&after);
        }
        assert_converted(&w.catalog, &expected).await;
    }
    assert!(conversions > MIN_COUNT, "too few conversions to merge");
    assert!(merged, "no delete manifest was ever merged");
    assert_no_orphans(&w.catalog).await;
    assert_manifests_decode_alike(&w.catalog).await;
}

/// Below the minimum count, a conversion that replaces DVs listed in several manifests
/// (one per earlier conversion) writes them again as one manifest, not one each: what
/// it adds is its new DV manifest and that one. Every entry keeps what readers inherit,
/// and the table reads the same (PyIceberg).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manifests_written_again_by_a_conversion_are_packed_into_one() {
    let w = warehouse();
    let spec = streaming(92, 4, 150);
    let mut report = generate_table(&w.catalog, &spec).await;
    // One shard per partition: a DV manifest per partition's conversion.
    let plan = shard_per_partition(&w.catalog).await;
    assert!(plan.shards.len() > 1, "one shard only");
    for shard in &plan.shards {
        let options = ConvertOptions {
            shard: Some(shard.clone()),
            ..Default::default()
        };
        let converted = convert(&w.catalog, &table(), &options).await.unwrap();
        assert_eq!(converted.outcome, Outcome::Converted);
    }
    assert_converted(&w.catalog, &expected_rows(&report.state).unwrap()).await;

    // More updates of the same keys, converted at once: the DVs it replaces are listed
    // by the several manifests of the shards' conversions.
    report = generate_table(&w.catalog, &spec).await;
    let before = files(&w.catalog).await;
    let converted = convert(&w.catalog, &table(), &ConvertOptions::default())
        .await
        .unwrap();
    assert_eq!(converted.outcome, Outcome::Converted);
    let after = files(&w.catalog).await;
    let now = inherited(&after);
    let replaced_from: HashSet<&str> = before
        .dvs
        .values()
        .filter(|dv| !now.contains_key(&dv.entry_key()))
        .map(|dv| dv.manifest_path.as_str())
        .collect();
    assert!(
        converted.dvs_replaced > 0 && replaced_from.len() > 1,
        "the conversion replaced {} DVs from {} manifests: too few to pack",
        converted.dvs_replaced,
        replaced_from.len()
    );
    let head = after.snapshot_id.expect("a snapshot");
    let written: Vec<_> = after
        .manifests
        .iter()
        .filter(|m| m.added_snapshot_id == head && m.content == ManifestContentType::Deletes)
        .collect();
    assert_eq!(
        written.len(),
        2,
        "a DV manifest and one for the {} manifests written again: {written:#?}",
        replaced_from.len()
    );
    for (key, values) in &inherited(&before) {
        if let Some(new) = now.get(key) {
            assert_eq!(
                values, new,
                "{key:?} changed its sequence numbers or snapshot"
            );
        }
    }
    check_manifests(&after);
    assert_converted(&w.catalog, &expected_rows(&report.state).unwrap()).await;
    assert_no_orphans(&w.catalog).await;
    assert_manifests_decode_alike(&w.catalog).await;
}
