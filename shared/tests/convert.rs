//! The conversion job against a real local warehouse (SQLite catalog, Parquet and
//! Puffin files on disk): rows are preserved, equality deletes are gone, DVs are valid,
//! repeated and racing runs are safe, and failures leave the table and disk untouched.

use eqdv_test_support as support;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use eqdv::Error;
use eqdv::catalog::{Catalog, TableName};
use eqdv::convert::{ConvertOptions, Outcome, RetryPolicy, convert};
use eqdv_workload::generate::{KeyType, PartitionKind, WorkloadSpec, expected_rows};
use support::race::{
    assert_lost_the_race, course, interfering, meeting, overtaken_by, winner_and_loser,
};
use support::state::{TableState, expected_conversion};
use support::*;

fn spec(seed: u64, keys: Vec<KeyType>, partition: PartitionKind) -> WorkloadSpec {
    WorkloadSpec {
        seed,
        rows: 1_200,
        commits: 3,
        keys,
        partition,
        changes_per_commit: 120,
        rows_per_file: 300,
        rows_per_row_group: 100,
        ..Default::default()
    }
}

/// Generate, convert, check; convert again (no-op); more CDC; convert (merge); check.
async fn round_trip(spec: WorkloadSpec) {
    let w = warehouse();
    let report = generate_table(&w.catalog, &spec).await;
    let expected = expected_rows(&report.state).expect("expected rows");
    let before = eqdv_workload::read::read_canonical(&load(&w.catalog).await, "main")
        .await
        .expect("read before");
    assert!(
        before == expected,
        "generated table does not read as the model expects"
    );
    assert!(
        !files(&w.catalog).await.equality_deletes.is_empty(),
        "workload wrote no equality deletes"
    );

    let first = convert(&w.catalog, &table(), &ConvertOptions::default())
        .await
        .expect("first conversion");
    assert_eq!(first.outcome, Outcome::Converted);
    assert!(first.dvs_written > 0, "no DV written");
    assert_converted(&w.catalog, &expected).await;
    let head = load(&w.catalog).await;
    let summary = &head.head("main").unwrap().unwrap().summary().clone();
    assert_eq!(summary.operation.as_str(), "delete");
    assert_eq!(
        summary.additional_properties.get("eqdv.converted-from"),
        first.base_snapshot_id.map(|id| id.to_string()).as_ref()
    );
    assert_eq!(
        summary.additional_properties.get("added-dvs"),
        Some(&first.dvs_written.to_string())
    );

    // Converting twice is a no-op that commits nothing.
    let pointer = head.pointer.clone();
    let again = convert(&w.catalog, &table(), &ConvertOptions::default())
        .await
        .expect("second conversion");
    assert_eq!(again.outcome, Outcome::NothingToDo);
    assert_eq!(load(&w.catalog).await.pointer, pointer);

    // More CDC, then convert: merged into the existing DVs, one DV per data file.
    let more = generate_table(
        &w.catalog,
        &WorkloadSpec {
            commits: 2,
            ..spec.clone()
        },
    )
    .await;
    let expected = expected_rows(&more.state).expect("expected rows");
    let dvs_before = files(&w.catalog).await.dvs.len();
    let merged = convert(&w.catalog, &table(), &ConvertOptions::default())
        .await
        .expect("merging conversion");
    assert_eq!(merged.outcome, Outcome::Converted);
    assert_converted(&w.catalog, &expected).await;
    let dvs_after = files(&w.catalog).await.dvs.len();
    assert!(
        dvs_after >= dvs_before,
        "DVs lost: {dvs_before} -> {dvs_after}"
    );
    assert_eq!(
        dvs_after,
        dvs_before + merged.dvs_written - merged.dvs_replaced,
        "DV count does not add up"
    );
    assert_no_orphans(&w.catalog).await;
    // Data, equality delete, DV and rewritten delete manifests (with DELETED entries)
    // of this layout all decode alike through the fast path.
    assert_manifests_decode_alike(&w.catalog).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_key_unpartitioned() {
    for seed in [1, 2, 3] {
        round_trip(spec(seed, vec![KeyType::Long], PartitionKind::None)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn string_key_identity_partitioned() {
    for seed in [4, 5] {
        round_trip(spec(seed, vec![KeyType::String], PartitionKind::Identity)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bucket_and_day_partitions() {
    round_trip(spec(6, vec![KeyType::Int], PartitionKind::Bucket(4))).await;
    round_trip(spec(7, vec![KeyType::Timestamp], PartitionKind::Day)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_key_type() {
    for (i, key) in [
        KeyType::Int,
        KeyType::Long,
        KeyType::String,
        KeyType::Date,
        KeyType::Timestamp,
        KeyType::Timestamptz,
        KeyType::Decimal,
        KeyType::Uuid,
        KeyType::Binary,
        KeyType::Boolean,
        KeyType::Fixed,
    ]
    .into_iter()
    .enumerate()
    {
        let mut s = spec(100 + i as u64, vec![key], PartitionKind::None);
        if key == KeyType::Boolean {
            // A boolean key alone has two values; pair it so keys stay distinct.
            s.keys = vec![KeyType::Boolean, KeyType::Long];
        }
        round_trip(s).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_column_keys_with_nulls() {
    let mut s = spec(
        8,
        vec![KeyType::Int, KeyType::String],
        PartitionKind::Identity,
    );
    s.null_keys = true;
    round_trip(s).await;
    let mut s = spec(9, vec![KeyType::Long], PartitionKind::None);
    s.null_keys = true;
    round_trip(s).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn global_deletes_on_a_partitioned_table() {
    let mut s = spec(10, vec![KeyType::Long], PartitionKind::Bucket(3));
    s.global_deletes = true;
    round_trip(s).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn column_added_mid_workload() {
    let mut s = spec(11, vec![KeyType::Long], PartitionKind::Identity);
    s.add_column = true;
    s.commits = 4;
    round_trip(s).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_run_writes_nothing() {
    let w = warehouse();
    generate_table(
        &w.catalog,
        &spec(12, vec![KeyType::Long], PartitionKind::None),
    )
    .await;
    let pointer = load(&w.catalog).await.pointer;
    let report = convert(
        &w.catalog,
        &table(),
        &ConvertOptions {
            dry_run: true,
            ..Default::default()
        },
    )
    .await
    .expect("dry run");
    assert_eq!(report.outcome, Outcome::DryRun);
    assert!(report.dvs_written > 0);
    assert_eq!(load(&w.catalog).await.pointer, pointer);
    assert_no_orphans(&w.catalog).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shards_convert_independently() {
    let w = warehouse();
    let report = generate_table(
        &w.catalog,
        &spec(13, vec![KeyType::Long], PartitionKind::Bucket(4)),
    )
    .await;
    let expected = expected_rows(&report.state).unwrap();
    let plan = shard_per_partition(&w.catalog).await;
    assert!(
        plan.shards.len() >= 2,
        "expected several shards, got {}",
        plan.shards.len()
    );
    // The plan travels as JSON (as in a queue message).
    let plan: eqdv::plan::Plan =
        serde_json::from_str(&serde_json::to_string(&plan).unwrap()).unwrap();
    for shard in &plan.shards {
        let options = ConvertOptions {
            shard: Some(shard.clone()),
            ..Default::default()
        };
        let r = convert(&w.catalog, &table(), &options).await.unwrap();
        assert_eq!(r.outcome, Outcome::Converted, "shard {}", shard.id);
        let again = convert(&w.catalog, &table(), &options).await.unwrap();
        assert_eq!(
            again.outcome,
            Outcome::NothingToDo,
            "shard {} twice",
            shard.id
        );
    }
    assert_converted(&w.catalog, &expected).await;
    assert_no_orphans(&w.catalog).await;
}

/// A partition whose delete files do not fit one queue message is split into shards of
/// the same partition; converted one after another they give the whole conversion.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shards_too_big_for_a_message_are_split() {
    for (seed, partition, global_deletes) in [
        (31, PartitionKind::None, false),
        // One shard of many groups (global deletes make the table one shard).
        (32, PartitionKind::Bucket(3), true),
    ] {
        let w = warehouse();
        let spec = WorkloadSpec {
            commits: 8,
            changes_per_commit: 40,
            global_deletes,
            ..spec(seed, vec![KeyType::String], partition)
        };
        let report = generate_table(&w.catalog, &spec).await;
        let expected = expected_rows(&report.state).unwrap();
        let t = load(&w.catalog).await;
        let f = files(&w.catalog).await;
        let whole = eqdv::plan::plan(&t, "main", &f, &Default::default()).unwrap();
        assert_eq!(whole.shards.len(), 1, "{partition}: one shard unsplit");
        let whole_json = whole.shards[0].to_json().unwrap().len();
        let max = whole_json / 3;
        let split = eqdv::plan::plan(
            &t,
            "main",
            &f,
            &eqdv::plan::PlanOptions {
                max_shard_json_bytes: max,
                ..Default::default()
            },
        )
        .unwrap();
        assert!(
            split.shards.len() >= 3,
            "{partition}: {whole_json} bytes in shards of {max} gave {} shards",
            split.shards.len()
        );
        let mut listed: Vec<String> = Vec::new();
        for shard in &split.shards {
            assert!(
                shard.to_json().unwrap().len() <= max,
                "shard {} too big",
                shard.id
            );
            assert_eq!(shard.partitions, whole.shards[0].partitions);
            listed.extend(shard.delete_files().map(str::to_string));
        }
        let mut live: Vec<String> = f
            .equality_deletes
            .iter()
            .map(|d| d.path().to_string())
            .collect();
        live.sort();
        listed.sort();
        assert_eq!(
            listed, live,
            "{partition}: every delete file in exactly one shard"
        );
        let ids: std::collections::HashSet<_> = split.shards.iter().map(|s| &s.id).collect();
        assert_eq!(ids.len(), split.shards.len(), "shard ids are distinct");

        for shard in &split.shards {
            let options = ConvertOptions {
                shard: Some(shard.clone()),
                ..Default::default()
            };
            let r = convert(&w.catalog, &table(), &options).await.unwrap();
            assert_eq!(r.outcome, Outcome::Converted, "shard {}", shard.id);
        }
        assert_converted(&w.catalog, &expected).await;
        assert_no_orphans(&w.catalog).await;
    }

    // One path longer than the whole budget is an error naming it, not a lost file.
    let w = warehouse();
    generate_table(
        &w.catalog,
        &spec(33, vec![KeyType::Long], PartitionKind::None),
    )
    .await;
    let t = load(&w.catalog).await;
    let f = files(&w.catalog).await;
    let err = eqdv::plan::plan(
        &t,
        "main",
        &f,
        &eqdv::plan::PlanOptions {
            max_shard_json_bytes: 300,
            ..Default::default()
        },
    )
    .expect_err("nothing fits 300 bytes");
    assert!(err.to_string().contains(".parquet"), "{err}");
}

/// Two converters load the same head; B converts the whole table while A waits right
/// before its swap. A's swap conflicts, and it ends as [`assert_lost_the_race`] says.
/// The table is converted once: one eqdv snapshot, one DV per data file, the rows kept,
/// A's files removed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_converter_overtaken_before_its_swap_plans_again() {
    for seed in [20, 21] {
        let w = warehouse();
        let report = generate_table(
            &w.catalog,
            &spec(seed, vec![KeyType::Long], PartitionKind::Identity),
        )
        .await;
        let expected = expected_rows(&report.state).unwrap();
        let before = TableState::read(&w.catalog, &table()).await;
        let conversion = expected_conversion(&w.catalog, &table(), &expected).await;
        let a = overtaken_by(w.another_handle(), w.another_handle());
        let ra = convert(&a, &table(), &ConvertOptions::default())
            .await
            .expect("converter A");
        let rb = a.state.report();
        assert_lost_the_race(&ra, &rb);
        let after = TableState::read(&w.catalog, &table()).await;
        before.assert_converted_once(&after, &conversion);
        assert_eq!(after.head, rb.new_snapshot_id);
        assert_converted(&w.catalog, &expected).await;
    }
}

/// Two converters really concurrent (own catalog connections), held only so that both
/// plan on the same head: exactly one swap lands, the other conflicts once and ends as
/// [`assert_lost_the_race`] says. Which one wins is the race's; the rest is exact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_converters_convert_once() {
    for seed in [20, 21, 22] {
        let w = warehouse();
        let report = generate_table(
            &w.catalog,
            &spec(seed, vec![KeyType::Long], PartitionKind::Identity),
        )
        .await;
        let expected = expected_rows(&report.state).unwrap();
        let before = TableState::read(&w.catalog, &table()).await;
        let conversion = expected_conversion(&w.catalog, &table(), &expected).await;
        let both = Arc::new(tokio::sync::Barrier::new(2));
        let a = meeting(w.another_handle(), both.clone());
        let b = meeting(w.another_handle(), both);
        let options = ConvertOptions::default();
        let name = table();
        let (ra, rb) = tokio::join!(convert(&a, &name, &options), convert(&b, &name, &options));
        let (ra, rb) = (ra.expect("converter A"), rb.expect("converter B"));
        eprintln!("seed {seed}: A {:?}, B {:?}", course(&ra), course(&rb));
        let (winner, loser) = winner_and_loser(&ra, &rb);
        assert_lost_the_race(loser, winner);
        let after = TableState::read(&w.catalog, &table()).await;
        before.assert_converted_once(&after, &conversion);
        assert_eq!(after.head, winner.new_snapshot_id);
        assert_converted(&w.catalog, &expected).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pointer_moved_mid_commit_rebases() {
    let w = warehouse();
    let s = spec(30, vec![KeyType::Long], PartitionKind::Identity);
    generate_table(&w.catalog, &s).await;
    let before = TableState::read(&w.catalog, &table()).await;
    let planned = expected_conversion(&w.catalog, &table(), &before.rows).await;
    let catalog = interfering(&w, &s, 1);
    let report = convert(&catalog, &table(), &ConvertOptions::default())
        .await
        .expect("conversion with a concurrent writer");
    assert_eq!(report.outcome, Outcome::Converted);
    // The other commit only added files: nothing eqdv removes or targets changed, so
    // the same Puffin file is committed on the new head, without planning again.
    assert_eq!(
        (report.conflicts, report.rebases, report.replans),
        (1, 1, 0),
        "{report:#?}"
    );
    assert_eq!(report.commit_attempts, 2);
    assert_eq!(catalog.state.swaps.load(Ordering::SeqCst), 2);
    // The other writer's snapshot, then eqdv's on top of it with the DVs planned on the
    // first head; the other writer's (new) equality deletes are still live.
    let after = TableState::read(&w.catalog, &table()).await;
    let head = after.head.expect("head");
    let ours = &after.snapshots[&head];
    assert_eq!(
        ours.converted_from,
        before.head.map(|id| id.to_string()),
        "eqdv's snapshot"
    );
    let theirs = ours.parent.expect("a parent");
    assert_eq!(after.snapshots[&theirs].parent, before.head);
    let new: Vec<&i64> = after
        .snapshots
        .keys()
        .filter(|id| !before.snapshots.contains_key(id))
        .collect();
    assert_eq!(new, {
        let mut both = vec![&theirs, &head];
        both.sort();
        both
    });
    let dvs: std::collections::BTreeMap<String, u64> = after
        .dvs
        .iter()
        .map(|(data, dv)| (data.clone(), dv.cardinality))
        .collect();
    assert_eq!(dvs, planned.dvs, "not the DVs planned on the first head");
    assert_eq!(
        after.dvs.values().next().map(|dv| &dv.puffin),
        report.puffin_file.as_ref()
    );
    assert!(before.data_files.is_subset(&after.data_files));
    assert!(!after.equality_deletes.is_empty());
    assert!(after.equality_deletes.is_disjoint(&before.equality_deletes));
    assert_eq!(
        after.orphans, before.orphans,
        "the first attempt left files"
    );
    // The concurrent commit's rows and its (new, unconverted) deletes are all there.
    let t = load(&w.catalog).await;
    let expected = eqdv_workload::generate::expected_rows_of(&w.catalog, &table())
        .await
        .unwrap();
    let rows = eqdv_workload::read::read_canonical(&t, "main")
        .await
        .unwrap();
    assert!(rows == expected, "rows differ after a rebased conversion");
    assert_dvs_valid(&w.catalog).await;
    // Converting the rest finishes the table.
    convert(&w.catalog, &table(), &ConvertOptions::default())
        .await
        .unwrap();
    assert_converted(&w.catalog, &expected).await;
    assert_no_orphans(&w.catalog).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endless_conflicts_give_up_and_clean_up() {
    let w = warehouse();
    let s = spec(31, vec![KeyType::Long], PartitionKind::None);
    generate_table(&w.catalog, &s).await;
    let catalog = interfering(&w, &s, u32::MAX);
    let options = ConvertOptions {
        retry: Some(RetryPolicy {
            num_retries: 2,
            min_wait: Duration::from_millis(1),
            max_wait: Duration::from_millis(5),
            total_timeout: Duration::from_secs(60),
        }),
        ..Default::default()
    };
    let err = convert(&catalog, &table(), &options)
        .await
        .expect_err("must give up");
    assert!(
        matches!(err, Error::RetriesExhausted { attempts: 3, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("db.events"), "{err}");
    assert_eq!(catalog.state.swaps.load(Ordering::SeqCst), 3);
    // Only the interfering writer's snapshots landed; eqdv left nothing behind.
    let t = load(&w.catalog).await;
    for s in t.metadata.snapshots() {
        assert!(
            !s.summary()
                .additional_properties
                .contains_key("eqdv.converted-from"),
            "an eqdv snapshot landed"
        );
    }
    assert_no_orphans(&w.catalog).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v2_table_is_rejected() {
    use iceberg::spec::{
        FormatVersion, NestedField, PrimitiveType, Schema, TableMetadataBuilder, Type,
    };
    use iceberg::{MetadataLocation, TableCreation};
    let w = warehouse();
    let name = TableName::new("db", "old");
    let schema = Schema::builder()
        .with_fields(vec![
            NestedField::required(1, "id", Type::Primitive(PrimitiveType::Long)).into(),
        ])
        .build()
        .unwrap();
    let location = w.catalog.default_table_location(&name);
    let creation = TableCreation::builder()
        .name("old".into())
        .location(location.clone())
        .schema(schema)
        .format_version(FormatVersion::V2)
        .build();
    let metadata = TableMetadataBuilder::from_table_creation(creation)
        .unwrap()
        .build()
        .unwrap()
        .metadata;
    let meta_location = MetadataLocation::new_with_metadata(&location, &metadata);
    metadata
        .write_to(w.catalog.file_io(), &meta_location)
        .await
        .unwrap();
    w.catalog
        .create_table(&name, &meta_location.to_string())
        .await
        .unwrap();
    let err = convert(&w.catalog, &name, &ConvertOptions::default())
        .await
        .expect_err("v2 must be rejected");
    let msg = err.to_string();
    assert!(matches!(err, Error::UnsupportedTable { .. }), "{msg}");
    assert!(msg.contains("db.old") && msg.contains("format v2"), "{msg}");
}

#[test]
fn unsupported_key_type_names_the_field() {
    use iceberg::spec::{NestedField, PrimitiveType, Schema, Type};
    let schema = Schema::builder()
        .with_fields(vec![
            NestedField::optional(1, "id", Type::Primitive(PrimitiveType::Long)).into(),
            NestedField::optional(2, "score", Type::Primitive(PrimitiveType::Double)).into(),
        ])
        .build()
        .unwrap();
    let err = eqdv::keys::KeyColumns::new("db.t", &schema, &[1, 2]).expect_err("double key");
    let msg = err.to_string();
    assert!(
        matches!(err, Error::UnsupportedKeyType { field_id: 2, .. }),
        "{msg}"
    );
    assert!(
        msg.contains("score") && msg.contains("double") && msg.contains("db.t"),
        "{msg}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupt_dv_fails_cleanly() {
    let w = warehouse();
    let s = spec(40, vec![KeyType::Long], PartitionKind::None);
    generate_table(&w.catalog, &s).await;
    convert(&w.catalog, &table(), &ConvertOptions::default())
        .await
        .unwrap();
    generate_table(
        &w.catalog,
        &WorkloadSpec {
            commits: 2,
            ..s.clone()
        },
    )
    .await;
    // Flip a byte inside every DV blob's bitmap.
    let f = files(&w.catalog).await;
    let puffin = f.dvs.values().next().expect("a DV").path().to_string();
    let local = puffin.trim_start_matches("file://").to_string();
    let mut bytes = std::fs::read(&local).unwrap();
    for dv in f.dvs.values() {
        let at = dv.file.content_offset().unwrap() as usize + 10;
        bytes[at] ^= 0x5a;
    }
    std::fs::write(&local, &bytes).unwrap();
    let pointer = load(&w.catalog).await.pointer;
    let err = convert(&w.catalog, &table(), &ConvertOptions::default())
        .await
        .expect_err("corrupt DV must fail");
    let msg = err.to_string();
    assert!(matches!(err, Error::Dv(_)), "{msg}");
    assert!(
        msg.contains(&puffin),
        "error does not name the Puffin file: {msg}"
    );
    assert_eq!(load(&w.catalog).await.pointer, pointer, "table changed");
    assert_no_orphans(&w.catalog).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_data_file_fails_cleanly() {
    let w = warehouse();
    generate_table(
        &w.catalog,
        &spec(41, vec![KeyType::Long], PartitionKind::None),
    )
    .await;
    let t = load(&w.catalog).await;
    let f = files(&w.catalog).await;
    let groups = eqdv::plan::group_equality_deletes(&t, &f).unwrap();
    let candidates: Vec<String> = f
        .data_files
        .iter()
        .filter(|d| groups.iter().any(|g| g.may_apply_to(d)))
        .map(|d| d.path().to_string())
        .collect();
    assert!(!candidates.is_empty());
    for c in &candidates {
        std::fs::remove_file(c.trim_start_matches("file://")).unwrap();
    }
    let err = convert(&w.catalog, &table(), &ConvertOptions::default())
        .await
        .expect_err("missing data file must fail");
    let msg = err.to_string();
    assert!(
        candidates.iter().any(|c| msg.contains(c.as_str())),
        "error does not name a missing file: {msg}"
    );
    assert_eq!(load(&w.catalog).await.pointer, t.pointer, "table changed");
}

/// Several bad delete files in one group (one undecodable, later ones missing): the
/// error names the first of them in the group's order, as a sequential load would,
/// though the files are fetched concurrently.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_delete_files_fail_naming_the_first() {
    let w = warehouse();
    generate_table(
        &w.catalog,
        &WorkloadSpec {
            commits: 5,
            ..spec(42, vec![KeyType::Long], PartitionKind::None)
        },
    )
    .await;
    let t = load(&w.catalog).await;
    let f = files(&w.catalog).await;
    let groups = eqdv::plan::group_equality_deletes(&t, &f).unwrap();
    assert_eq!(groups.len(), 1, "an unpartitioned table has one group");
    let deletes: Vec<String> = groups[0]
        .delete_files
        .iter()
        .map(|d| d.path().to_string())
        .collect();
    assert!(deletes.len() >= 4, "{deletes:?}");
    // The second: its footer reads, its pages (between the leading magic and the
    // footer, whose length precedes the trailing magic) do not decode.
    let late = deletes[1].trim_start_matches("file://");
    let mut bytes = std::fs::read(late).unwrap();
    let n = bytes.len();
    let footer = u32::from_le_bytes(bytes[n - 8..n - 4].try_into().unwrap()) as usize;
    bytes[4..n - 8 - footer].fill(0xff);
    std::fs::write(late, &bytes).unwrap();
    // From the fourth on they are gone. The third stays readable.
    for d in &deletes[3..] {
        std::fs::remove_file(d.trim_start_matches("file://")).unwrap();
    }
    let options = ConvertOptions {
        resolve: eqdv::resolve::ResolveOptions {
            parallelism: deletes.len(),
            ..Default::default()
        },
        ..Default::default()
    };
    let err = convert(&w.catalog, &table(), &options)
        .await
        .expect_err("bad delete files must fail");
    let msg = err.to_string();
    assert!(msg.contains(&deletes[1]), "not the first bad file: {msg}");
    for later in &deletes[3..] {
        assert!(!msg.contains(later.as_str()), "a later file: {msg}");
    }
    assert_eq!(load(&w.catalog).await.pointer, t.pointer, "table changed");
}

/// Every pruning off: the positions a scan of every candidate finds.
fn full_scan() -> eqdv::resolve::ResolveOptions {
    eqdv::resolve::ResolveOptions {
        bound_pruning: false,
        row_group_pruning: false,
        bloom_pruning: false,
        ..Default::default()
    }
}

/// Resolves the table's live equality deletes once with each of `options`.
async fn resolve_each<const N: usize>(
    catalog: &dyn Catalog,
    options: [eqdv::resolve::ResolveOptions; N],
) -> [eqdv::resolve::Resolved; N] {
    let t = load(catalog).await;
    let f = files(catalog).await;
    let groups = eqdv::plan::group_equality_deletes(&t, &f).unwrap();
    let mut out = Vec::with_capacity(N);
    for o in &options {
        out.push(eqdv::resolve::resolve(&t, &f, &groups, o).await.unwrap());
    }
    out.try_into()
        .unwrap_or_else(|_| unreachable!("one result per option"))
}

/// A CDC workload with bloom filters on the keys, whose updates move old keys into new
/// files (their bounds then span most keys).
fn bloom_workload(
    seed: u64,
    keys: Vec<KeyType>,
    partition: PartitionKind,
    null_keys: bool,
) -> WorkloadSpec {
    WorkloadSpec {
        seed,
        rows: 3_000,
        commits: 4,
        keys,
        partition,
        null_keys,
        changes_per_commit: 30,
        rows_per_file: 200,
        rows_per_row_group: 25,
        bloom_filters: true,
        ..Default::default()
    }
}

/// Pruning is an optimisation only: with and without it the same positions are found.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pruning_never_changes_the_result() {
    let mut pruned_somewhere = 0;
    for (seed, keys, partition, null_keys) in [
        (59, vec![KeyType::Long], PartitionKind::None, false),
        (60, vec![KeyType::String], PartitionKind::Identity, false),
        (
            61,
            vec![KeyType::Int, KeyType::String],
            PartitionKind::None,
            true,
        ),
        (62, vec![KeyType::Decimal], PartitionKind::Bucket(2), false),
        (63, vec![KeyType::Binary], PartitionKind::None, true),
    ] {
        let w = warehouse();
        // Few deletes over many small files: most files and row groups hold no key.
        let s = WorkloadSpec {
            seed,
            rows: 3_000,
            commits: 2,
            keys,
            partition,
            null_keys,
            changes_per_commit: 6,
            rows_per_file: 100,
            rows_per_row_group: 25,
            ..Default::default()
        };
        generate_table(&w.catalog, &s).await;
        let [pruned, full] = resolve_each(&w.catalog, [Default::default(), full_scan()]).await;
        eprintln!(
            "seed {seed}: pruned {} files by bounds, {} row groups",
            pruned.metrics.pruned_by_bounds, pruned.metrics.row_groups_pruned
        );
        assert_eq!(
            pruned.positions, full.positions,
            "seed {seed}: pruning changed the result"
        );
        assert!(pruned.metrics.rows_scanned <= full.metrics.rows_scanned);
        pruned_somewhere += pruned.metrics.pruned_by_bounds + pruned.metrics.row_groups_pruned;
        assert_eq!(full.metrics.pruned_by_bounds, 0);
        assert_eq!(full.metrics.files_opened, full.metrics.candidate_files);
        // The list of files opened (what benchmarks hand other engines) is the files
        // bound pruning kept: every file with a match, none that bounds ruled out.
        assert_eq!(
            pruned.opened.len() as u64,
            pruned.metrics.files_opened,
            "seed {seed}"
        );
        assert!(pruned.opened.is_subset(&pruned.candidates), "seed {seed}");
        assert!(
            pruned.positions.keys().all(|p| pruned.opened.contains(p)),
            "seed {seed}: a file with a match is missing from the opened list"
        );
        assert_eq!(full.opened, full.candidates, "seed {seed}");
    }
    assert!(
        pruned_somewhere > 0,
        "the workloads never exercised pruning"
    );
}

/// With bloom filters on the key columns, row groups whose range holds deleted keys
/// they do not contain are skipped, and the positions stay those of a full scan.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bloom_filters_skip_row_groups_without_changing_the_result() {
    let mut by_bloom = 0;
    for (seed, keys, partition, null_keys) in [
        (80, vec![KeyType::Long], PartitionKind::None, false),
        (81, vec![KeyType::String], PartitionKind::Identity, false),
        (
            82,
            vec![KeyType::Int, KeyType::String],
            PartitionKind::None,
            true,
        ),
        (83, vec![KeyType::Date], PartitionKind::Bucket(2), false),
    ] {
        let w = warehouse();
        // Filters where Java's writer puts them (before the footer) and after each row
        // group (the Rust writer's default: then they are a read of their own).
        let s = WorkloadSpec {
            bloom_filters_after_row_groups: seed % 2 == 1,
            ..bloom_workload(seed, keys, partition, null_keys)
        };
        let report = generate_table(&w.catalog, &s).await;
        let without_bloom = eqdv::resolve::ResolveOptions {
            bloom_pruning: false,
            ..Default::default()
        };
        let [with_bloom, without, full] =
            resolve_each(&w.catalog, [Default::default(), without_bloom, full_scan()]).await;
        eprintln!(
            "seed {seed}: {} row groups pruned by bloom, {} rows scanned (without: {})",
            with_bloom.metrics.row_groups_pruned_by_bloom,
            with_bloom.metrics.rows_scanned,
            without.metrics.rows_scanned
        );
        assert_eq!(
            with_bloom.positions, full.positions,
            "seed {seed}: bloom pruning changed the result"
        );
        assert_eq!(without.positions, full.positions);
        assert_eq!(without.metrics.row_groups_pruned_by_bloom, 0);
        // Every row group the filter skipped is one fewer read, and nothing else changed.
        assert_eq!(
            with_bloom.metrics.row_groups_read + with_bloom.metrics.row_groups_pruned_by_bloom,
            without.metrics.row_groups_read,
            "seed {seed}"
        );
        if with_bloom.metrics.row_groups_pruned_by_bloom > 0 {
            assert!(with_bloom.metrics.rows_scanned < without.metrics.rows_scanned);
        }
        by_bloom += with_bloom.metrics.row_groups_pruned_by_bloom;
        if !s.bloom_filters_after_row_groups {
            // Filters in the footer's read are probed wherever they may rule out.
            assert_false_positives_as_expected(
                &format!("seed {seed}"),
                &with_bloom.metrics,
                &full.metrics,
            );
        }

        // The conversion with bloom pruning gives the table the generator expects.
        let expected = expected_rows(&report.state).unwrap();
        convert(&w.catalog, &table(), &ConvertOptions::default())
            .await
            .unwrap();
        assert_converted(&w.catalog, &expected).await;
    }
    assert!(by_bloom > 0, "bloom filters never skipped a row group");
}

/// The files bloom filters let through that hold no deleted key are about as many as
/// the filters' expected false positives say: within four standard deviations (and two
/// files). Every file holding a deleted key is read, as a full scan reads it.
fn assert_false_positives_as_expected(
    label: &str,
    with_bloom: &eqdv::resolve::ResolveMetrics,
    full: &eqdv::resolve::ResolveMetrics,
) {
    let m = with_bloom;
    assert_eq!(
        m.files_holding_deleted_values, full.files_holding_deleted_values,
        "{label}: a file holding a deleted key went unread"
    );
    assert!(
        m.files_holding_deleted_values >= m.files_with_matches,
        "{label}"
    );
    let read = m.files_opened - m.files_pruned_by_footer;
    let passed_without_key = (read - m.files_holding_deleted_values) as f64;
    let expected = m.expected_bloom_false_positives;
    eprintln!(
        "{label}: {read} files read, {} holding a deleted key, {passed_without_key} without; {expected:.1} false positives expected",
        m.files_holding_deleted_values
    );
    assert!(
        (passed_without_key - expected).abs() <= 4.0 * expected.sqrt() + 2.0,
        "{label}: {passed_without_key} files read without a deleted key, {expected:.1} expected"
    );
    assert_eq!(full.expected_bloom_false_positives, 0.0, "{label}");
}

/// Random keys (UUIDs, long ids hashed over all of i64) in a wide table: no file's
/// bounds rule out a deleted key, so bloom filters do the pruning, uuid keys (stored as
/// 16-byte fixed-length values) included; the positions stay those of a full scan, and
/// the conversion gives the rows the generator expects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bloom_filters_prune_random_keys_in_wide_tables() {
    for (seed, key, hashed_keys) in [(90, KeyType::Uuid, false), (91, KeyType::Long, true)] {
        let w = warehouse();
        let s = WorkloadSpec {
            seed,
            rows: 4_000,
            commits: 2,
            keys: vec![key],
            changes_per_commit: 12,
            rows_per_file: 200,
            rows_per_row_group: 50,
            bloom_filters: true,
            hashed_keys,
            extra_columns: 6,
            ..Default::default()
        };
        let report = generate_table(&w.catalog, &s).await;
        let schema = load(&w.catalog).await.metadata.current_schema().clone();
        for name in ["c01", "c02", "c06"] {
            assert!(schema.field_by_name(name).is_some(), "{key:?}: no {name}");
        }
        let without_bloom = eqdv::resolve::ResolveOptions {
            bloom_pruning: false,
            ..Default::default()
        };
        let [with_bloom, without, full] =
            resolve_each(&w.catalog, [Default::default(), without_bloom, full_scan()]).await;
        let m = &with_bloom.metrics;
        eprintln!(
            "{key:?}: {} of {} candidates pruned by bounds; bloom: {} filters read, {} row groups pruned; rows scanned {} (without: {})",
            m.pruned_by_bounds,
            m.candidate_files,
            m.bloom_filters_read,
            m.row_groups_pruned_by_bloom,
            m.rows_scanned,
            without.metrics.rows_scanned
        );
        assert_eq!(with_bloom.positions, full.positions, "{key:?}");
        assert_eq!(without.positions, full.positions, "{key:?}");
        // Random keys: bounds keep almost every file, the filters skip most row groups.
        assert!(
            m.pruned_by_bounds * 4 < m.candidate_files,
            "{key:?}: bounds pruned {} of {}",
            m.pruned_by_bounds,
            m.candidate_files
        );
        assert!(m.bloom_filters_read > 0, "{key:?}: no filter read");
        assert!(
            m.row_groups_pruned_by_bloom * 2 > without.metrics.row_groups_read,
            "{key:?}: bloom pruned {} of {} row groups",
            m.row_groups_pruned_by_bloom,
            without.metrics.row_groups_read
        );
        assert_eq!(without.metrics.bloom_filters_read, 0);
        assert_false_positives_as_expected(&format!("{key:?}"), m, &full.metrics);

        let expected = expected_rows(&report.state).unwrap();
        convert(&w.catalog, &table(), &ConvertOptions::default())
            .await
            .unwrap();
        assert_converted(&w.catalog, &expected).await;
    }
}

/// Files larger than the default footer read: after the first ones, each is opened with
/// the tail the table's files have been seen to need (footer and trailing bloom
/// filters), in one request, and every filter is still probed from it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn footer_reads_shrink_to_what_the_tables_files_need() {
    let w = warehouse();
    let s = WorkloadSpec {
        seed: 92,
        rows: 24_000,
        commits: 1,
        keys: vec![KeyType::Uuid],
        changes_per_commit: 20,
        rows_per_file: 4_000,
        rows_per_row_group: 1_000,
        bloom_filters: true,
        extra_columns: 6,
        ..Default::default()
    };
    generate_table(&w.catalog, &s).await;
    let f = files(&w.catalog).await;
    let default_read = eqdv::parquet_io::reader::DEFAULT_FOOTER_HINT as u64;
    let large = f
        .data_files
        .iter()
        .filter(|d| d.file.file_size_in_bytes() > default_read)
        .count();
    assert!(
        large >= 6,
        "{large} data files over the default footer read"
    );
    // The writer records split offsets: how a file's row groups are known before it opens.
    assert!(f.data_files.iter().all(|d| d.row_groups().is_some()));
    // One scan at a time, so each file learns from those before it.
    let one_at_a_time = eqdv::resolve::ResolveOptions {
        parallelism: 1,
        ..Default::default()
    };
    let [learned, full] = resolve_each(&w.catalog, [one_at_a_time, full_scan()]).await;
    let m = &learned.metrics;
    assert_eq!(learned.positions, full.positions);
    assert_eq!(m.footers_read_twice, 0);
    // Every row group's filter came with the footer's read and was probed.
    assert_eq!(m.bloom_filters_read, m.files_opened * 4, "{m:?}");
    // The first file is read with the default, the rest with much less.
    assert!(
        m.footer_bytes_read < default_read + (m.files_opened - 1) * default_read / 2,
        "{} footer bytes for {} files",
        m.footer_bytes_read,
        m.files_opened
    );
    assert_eq!(full.metrics.footers_read_twice, 0);
}

/// A bloom filter that cannot be read only costs the read it would have saved.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreadable_bloom_filters_are_ignored() {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    let w = warehouse();
    let s = bloom_workload(81, vec![KeyType::String], PartitionKind::Identity, false);
    generate_table(&w.catalog, &s).await;
    let f = files(&w.catalog).await;
    // Garble the header of every data file's bloom filters.
    let mut garbled = 0;
    for data in &f.data_files {
        let path = data.path().trim_start_matches("file://").to_string();
        let offsets: Vec<u64> = {
            let reader = SerializedFileReader::new(std::fs::File::open(&path).unwrap()).unwrap();
            reader
                .metadata()
                .row_groups()
                .iter()
                .filter_map(|rg| rg.column(0).bloom_filter_offset())
                .map(|o| o as u64)
                .collect()
        };
        let mut bytes = std::fs::read(&path).unwrap();
        for o in offsets {
            bytes[o as usize..o as usize + 4].copy_from_slice(&[0xff; 4]);
            garbled += 1;
        }
        std::fs::write(&path, bytes).unwrap();
    }
    assert!(garbled > 0, "the generator wrote no bloom filters");
    let [with_bloom, full] = resolve_each(&w.catalog, [Default::default(), full_scan()]).await;
    assert_eq!(with_bloom.positions, full.positions);
    assert_eq!(with_bloom.metrics.row_groups_pruned_by_bloom, 0);
}

/// Keys beyond the memory budget are processed in passes: same positions, same table.
/// For a key of several columns (arrow-row encoded keys) and for a single string
/// column (its own packed set), null keys among them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_memory_budget_splits_work_into_passes() {
    for (seed, keys, partition) in [
        (
            70,
            vec![KeyType::Long, KeyType::String],
            PartitionKind::Bucket(2),
        ),
        (72, vec![KeyType::String], PartitionKind::None),
    ] {
        key_passes_match_one_pass(seed, keys, partition).await;
    }
}

async fn key_passes_match_one_pass(seed: u64, keys: Vec<KeyType>, partition: PartitionKind) {
    use eqdv::resolve::{ResolveOptions, resolve};
    let w = warehouse();
    let mut s = spec(seed, keys, partition);
    s.null_keys = true;
    let report = generate_table(&w.catalog, &s).await;
    let t = load(&w.catalog).await;
    let f = files(&w.catalog).await;
    let groups = eqdv::plan::group_equality_deletes(&t, &f).unwrap();
    let delete_rows: u64 = groups.iter().map(|g| g.delete_rows()).sum();
    let one_pass = resolve(&t, &f, &groups, &ResolveOptions::default())
        .await
        .unwrap();
    assert_eq!(one_pass.metrics.key_passes, 1);
    // A budget a third of what the keys need: three passes.
    let budget = (delete_rows * 160).div_ceil(3);
    let small = ResolveOptions {
        key_memory_budget: budget,
        ..Default::default()
    };
    let three = resolve(&t, &f, &groups, &small).await.unwrap();
    assert_eq!(three.metrics.key_passes, 3);
    assert_eq!(
        three.positions, one_pass.positions,
        "passes changed the result"
    );
    assert_eq!(
        three.metrics.delete_keys, one_pass.metrics.delete_keys,
        "keys lost or repeated"
    );

    let options = ConvertOptions {
        resolve: small,
        ..Default::default()
    };
    let r = convert(&w.catalog, &table(), &options).await.unwrap();
    assert_eq!(r.outcome, Outcome::Converted);
    assert_eq!(r.resolve.key_passes, 3);
    assert_converted(&w.catalog, &expected_rows(&report.state).unwrap()).await;
}

/// A read budget smaller than any file: every read takes the whole budget and waits for
/// the one before it, with many delete files per group and many groups loading at once
/// (the admission in file order must not deadlock), and the result is the one a
/// generous budget gives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_budget_smaller_than_any_file_still_resolves_everything() {
    use eqdv::resolve::{ResolveOptions, resolve};
    let w = warehouse();
    let report = generate_table(
        &w.catalog,
        &WorkloadSpec {
            commits: 8,
            ..spec(71, vec![KeyType::Long], PartitionKind::Bucket(4))
        },
    )
    .await;
    let t = load(&w.catalog).await;
    let f = files(&w.catalog).await;
    let groups = eqdv::plan::group_equality_deletes(&t, &f).unwrap();
    assert!(groups.len() >= 2, "want several groups loading at once");
    assert!(
        groups.iter().any(|g| g.delete_files.len() >= 3),
        "want a group with several delete files"
    );
    let generous = resolve(&t, &f, &groups, &ResolveOptions::default())
        .await
        .unwrap();
    let tiny = ResolveOptions {
        read_memory_budget: 1,
        parallelism: 64,
        ..Default::default()
    };
    let starved = tokio::time::timeout(Duration::from_secs(60), resolve(&t, &f, &groups, &tiny))
        .await
        .expect("reads waiting for the budget never finished")
        .unwrap();
    assert!(!generous.positions.is_empty(), "nothing to resolve");
    assert_eq!(starved.positions, generous.positions);
    assert_eq!(starved.metrics.delete_keys, generous.metrics.delete_keys);
    assert_eq!(
        starved.metrics.delete_files_read,
        generous.metrics.delete_files_read
    );

    let options = ConvertOptions {
        resolve: tiny,
        ..Default::default()
    };
    let r = convert(&w.catalog, &table(), &options).await.unwrap();
    assert_eq!(r.outcome, Outcome::Converted);
    assert_converted(&w.catalog, &expected_rows(&report.state).unwrap()).await;
}

/// Footers are fetched while the delete files still load, for the candidates that the
/// keys loaded so far already confirm: the same positions as a full scan, no file opened
/// that bound pruning rules out (the resolve checks that every footer opened early is
/// scanned), and none opened early when the keys are split into passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn footers_open_while_delete_files_load_and_only_those_bounds_keep() {
    use eqdv::resolve::ResolveOptions;
    let (mut opened_early, mut pruned) = (0, 0);
    for (seed, keys, partition, null_keys) in [
        (81, vec![KeyType::Long], PartitionKind::None, false),
        (82, vec![KeyType::String], PartitionKind::Bucket(4), false),
        (
            83,
            vec![KeyType::Int, KeyType::String],
            PartitionKind::None,
            true,
        ),
    ] {
        let w = warehouse();
        // Many small delete files a group, and few deletes over many files: bounds rule
        // most files out and confirm the rest as the delete files load.
        let s = WorkloadSpec {
            seed,
            rows: 3_000,
            commits: 8,
            keys,
            partition,
            null_keys,
            changes_per_commit: 6,
            rows_per_file: 100,
            rows_per_row_group: 50,
            ..Default::default()
        };
        generate_table(&w.catalog, &s).await;
        let one_at_a_time = ResolveOptions {
            parallelism: 1,
            ..Default::default()
        };
        let in_passes = ResolveOptions {
            key_memory_budget: 1,
            ..Default::default()
        };
        let [default, narrow, passes, full] = resolve_each(
            &w.catalog,
            [Default::default(), one_at_a_time, in_passes, full_scan()],
        )
        .await;
        assert!(
            !full.positions.is_empty(),
            "seed {seed}: nothing to resolve"
        );
        for (name, r) in [("default", &default), ("parallelism 1", &narrow)] {
            let m = &r.metrics;
            eprintln!(
                "seed {seed}, {name}: {} candidates, {} pruned by bounds, {} opened, {} early",
                m.candidate_files, m.pruned_by_bounds, m.files_opened, m.footers_opened_early
            );
            assert_eq!(
                r.positions, full.positions,
                "seed {seed}, {name}: positions"
            );
            assert_eq!(
                m.files_opened,
                m.candidate_files - m.pruned_by_bounds,
                "seed {seed}, {name}: a file opened that bounds rule out"
            );
            assert!(
                m.footers_opened_early <= m.files_opened,
                "seed {seed}, {name}"
            );
        }
        // At most 4 footers a read in flight are held for the scan.
        assert!(narrow.metrics.footers_opened_early <= 4, "seed {seed}");
        assert!(passes.metrics.key_passes > 1, "seed {seed}: one pass");
        assert_eq!(passes.positions, full.positions, "seed {seed}: passes");
        assert_eq!(
            passes.metrics.footers_opened_early, 0,
            "seed {seed}: passes"
        );
        // Without bound pruning every candidate in scope is read, so any may open early.
        assert_eq!(full.metrics.files_opened, full.metrics.candidate_files);
        assert!(
            full.metrics.footers_opened_early > 0,
            "seed {seed}: full scan"
        );
        opened_early += default.metrics.footers_opened_early;
        pruned += default.metrics.pruned_by_bounds;
    }
    assert!(opened_early > 0, "no footer was opened early");
    assert!(
        pruned > 0,
        "bounds never pruned: exactness was not exercised"
    );
}

/// Adds a ref (a branch or a tag) at main's head, as another engine would.
async fn add_ref(catalog: &dyn Catalog, name: &str, retention: iceberg::spec::SnapshotRetention) {
    let head = load(catalog)
        .await
        .head("main")
        .unwrap()
        .expect("a snapshot");
    commit_metadata_change(catalog, |m| {
        m.set_ref(
            name,
            iceberg::spec::SnapshotReference::new(head.snapshot_id(), retention),
        )
    })
    .await;
}

/// Converting a branch commits to that branch only: main keeps its snapshot and its
/// equality deletes, and both read the rows they read before. A tag is refused before
/// any work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn branches_convert_alone_and_tags_are_refused() {
    let w = warehouse();
    let report = generate_table(
        &w.catalog,
        &spec(61, vec![KeyType::Long], PartitionKind::None),
    )
    .await;
    let expected = expected_rows(&report.state).unwrap();
    add_ref(
        &w.catalog,
        "audit",
        iceberg::spec::SnapshotRetention::branch(None, None, None),
    )
    .await;
    add_ref(
        &w.catalog,
        "v1",
        iceberg::spec::SnapshotRetention::Tag {
            max_ref_age_ms: None,
        },
    )
    .await;
    let before = load(&w.catalog).await;
    let main_head = before.head("main").unwrap().unwrap().snapshot_id();
    let main_deletes = files(&w.catalog).await.equality_deletes.len();
    assert!(main_deletes > 0);

    let tag = ConvertOptions {
        branch: "v1".into(),
        ..Default::default()
    };
    let err = convert(&w.catalog, &table(), &tag).await.unwrap_err();
    assert!(err.to_string().contains("'v1' is a tag"), "{err}");
    assert_eq!(load(&w.catalog).await.pointer, before.pointer);
    assert_no_orphans(&w.catalog).await;

    let audit = ConvertOptions {
        branch: "audit".into(),
        ..Default::default()
    };
    let r = convert(&w.catalog, &table(), &audit).await.unwrap();
    assert_eq!(r.outcome, Outcome::Converted);
    assert_eq!(r.branch, "audit");
    let after = load(&w.catalog).await;
    assert_eq!(
        after.head("main").unwrap().unwrap().snapshot_id(),
        main_head
    );
    assert_eq!(after.head("v1").unwrap().unwrap().snapshot_id(), main_head);
    let audit_head = after.head("audit").unwrap().unwrap();
    assert_ne!(audit_head.snapshot_id(), main_head);
    assert_eq!(files(&w.catalog).await.equality_deletes.len(), main_deletes);
    let audit_files = eqdv::table::TableFiles::read(&after, Some(&audit_head))
        .await
        .unwrap();
    assert!(audit_files.equality_deletes.is_empty());
    assert!(!audit_files.dvs.is_empty());
    // PyIceberg judges the converted branch; main keeps its equality deletes, which
    // only eqdv's reader (here) applies.
    let view = eqdv_judges::judge_converted_local_branch(
        &warehouse_of(&after),
        &table().to_string(),
        "audit",
        &expected,
    );
    assert_eq!(view.snapshot_id, Some(audit_head.snapshot_id()));
    for branch in ["main", "audit"] {
        let rows = eqdv_workload::read::read_canonical(&after, branch)
            .await
            .unwrap();
        assert!(
            rows == expected,
            "{branch} reads other rows after converting audit"
        );
    }
    // A shard planned on one branch does not convert on another.
    let plan = eqdv::plan::plan(
        &before,
        "main",
        &files(&w.catalog).await,
        &Default::default(),
    )
    .unwrap();
    let shard = plan.shards[0].clone();
    // The same delete files planned on another branch are another message.
    let audit_plan = eqdv::plan::plan(
        &before,
        "audit",
        &files(&w.catalog).await,
        &Default::default(),
    )
    .unwrap();
    let on_audit = &audit_plan.shards[0];
    assert_eq!(
        on_audit.delete_files().collect::<Vec<_>>(),
        shard.delete_files().collect::<Vec<_>>()
    );
    assert_ne!(
        eqdv_functions::queue::deduplication_id(on_audit),
        eqdv_functions::queue::deduplication_id(&shard)
    );
    assert_ne!(
        eqdv_functions::queue::message_group_id(on_audit),
        eqdv_functions::queue::message_group_id(&shard)
    );
    assert!(eqdv_functions::queue::message_group_id(on_audit).contains("@audit"));
    let wrong = ConvertOptions {
        branch: "audit".into(),
        shard: Some(shard),
        ..Default::default()
    };
    let err = convert(&w.catalog, &table(), &wrong).await.unwrap_err();
    assert!(
        err.to_string().contains("planned on branch 'main'"),
        "{err}"
    );
}

/// A partition's queue group does not depend on the plan it lands in: packed with others
/// or alone, after more commits or before, its shards share one FIFO message group, so
/// one partition is never converted by two converters at once. Converting shard by
/// shard still gives the whole conversion.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_keeps_its_queue_group_across_plans() {
    use std::collections::HashMap;
    let w = warehouse();
    let spec = WorkloadSpec {
        commits: 4,
        ..spec(71, vec![KeyType::Long], PartitionKind::Bucket(24))
    };
    let report = generate_table(&w.catalog, &spec).await;
    let expected = expected_rows(&report.state).unwrap();
    let t = load(&w.catalog).await;
    let f = files(&w.catalog).await;
    let group_of = |plan: &eqdv::plan::Plan| {
        let mut out: HashMap<String, String> = HashMap::new();
        for shard in &plan.shards {
            for partition in &shard.partitions {
                let group = eqdv_functions::queue::message_group_id(shard);
                assert!(
                    out.insert(partition.clone(), group).is_none(),
                    "{partition} is in two shards of one plan"
                );
            }
        }
        out
    };
    let packed = eqdv::plan::plan(&t, "main", &f, &Default::default()).unwrap();
    let alone = eqdv::plan::plan(
        &t,
        "main",
        &f,
        &eqdv::plan::PlanOptions {
            target_shard_bytes: 1,
            ..Default::default()
        },
    )
    .unwrap();
    assert!(
        alone.shards.len() > packed.shards.len(),
        "the plans must differ"
    );
    let (packed_groups, alone_groups) = (group_of(&packed), group_of(&alone));
    assert_eq!(packed_groups.len(), 24, "{packed_groups:?}");
    assert_eq!(packed_groups, alone_groups);
    let distinct: std::collections::HashSet<&String> = packed_groups.values().collect();
    assert!(distinct.len() > 1, "partitions spread over several groups");
    assert!(distinct.len() as u64 <= eqdv::plan::QUEUE_GROUPS);

    for shard in &alone.shards {
        let options = ConvertOptions {
            shard: Some(shard.clone()),
            ..Default::default()
        };
        convert(&w.catalog, &table(), &options).await.unwrap();
    }
    assert_converted(&w.catalog, &expected).await;
    assert_no_orphans(&w.catalog).await;
}

/// `eqdv.queue-groups` deals a table's partitions into fewer message groups: with 1, a
/// commit's partitions all share one group and pack into one shard (one converter
/// invocation), and each partition keeps its group across plans whatever the count.
/// A value outside 1..=16 is refused, naming the table and the property.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_groups_property_packs_a_tables_partitions_into_fewer_groups() {
    use eqdv::plan::{PlanOptions, QUEUE_GROUPS_PROPERTY, plan};
    use eqdv_functions::queue::message_group_id;
    use std::collections::{HashMap, HashSet};
    let w = warehouse();
    let spec = WorkloadSpec {
        commits: 4,
        table_properties: [(QUEUE_GROUPS_PROPERTY.to_string(), "1".to_string())].into(),
        ..spec(72, vec![KeyType::Long], PartitionKind::Bucket(24))
    };
    let report = generate_table(&w.catalog, &spec).await;
    let expected = expected_rows(&report.state).unwrap();
    let alone = PlanOptions {
        target_shard_bytes: 1,
        ..Default::default()
    };
    let set_groups = |value: &'static str| {
        commit_metadata_change(&w.catalog, move |m| {
            m.set_properties(HashMap::from([(
                QUEUE_GROUPS_PROPERTY.to_string(),
                value.to_string(),
            )]))
        })
    };
    let group_of = |plan: &eqdv::plan::Plan| -> HashMap<String, String> {
        plan.shards
            .iter()
            .flat_map(|s| {
                s.partitions
                    .iter()
                    .map(|p| (p.clone(), message_group_id(s)))
            })
            .collect()
    };

    // One group: the packed plan is one shard of all 24 partitions; planned alone, the
    // 24 shards all queue in that one group.
    let (t, f) = (load(&w.catalog).await, files(&w.catalog).await);
    let packed = plan(&t, "main", &f, &Default::default()).unwrap();
    assert_eq!(packed.shards.len(), 1, "{:?}", packed.shards);
    assert_eq!(packed.shards[0].partitions.len(), 24);
    let one = plan(&t, "main", &f, &alone).unwrap();
    assert_eq!(one.shards.len(), 24);
    let groups: HashSet<String> = group_of(&one).into_values().collect();
    assert_eq!(groups.len(), 1, "{groups:?}");

    // Four groups: each partition keeps its group between plans, and the packed plan
    // has one shard per group used.
    set_groups("4").await;
    let (t, f) = (load(&w.catalog).await, files(&w.catalog).await);
    let packed4 = plan(&t, "main", &f, &Default::default()).unwrap();
    let alone4 = plan(&t, "main", &f, &alone).unwrap();
    assert_eq!(group_of(&packed4), group_of(&alone4));
    let groups: HashSet<String> = group_of(&alone4).into_values().collect();
    assert!((2..=4).contains(&groups.len()), "{groups:?}");
    assert_eq!(packed4.shards.len(), groups.len());

    for bad in ["0", "17", "two"] {
        set_groups(bad).await;
        let (t, f) = (load(&w.catalog).await, files(&w.catalog).await);
        let err = plan(&t, "main", &f, &Default::default()).unwrap_err();
        let message = err.to_string();
        assert!(
            message.contains(QUEUE_GROUPS_PROPERTY)
                && message.contains(&table().to_string())
                && message.contains(&format!("{bad:?}")),
            "{message}"
        );
    }

    // Back to one group: its single shard converts the whole table.
    set_groups("1").await;
    let (t, f) = (load(&w.catalog).await, files(&w.catalog).await);
    let packed = plan(&t, "main", &f, &Default::default()).unwrap();
    assert_eq!(packed.shards.len(), 1);
    let options = ConvertOptions {
        shard: Some(packed.shards[0].clone()),
        ..Default::default()
    };
    convert(&w.catalog, &table(), &options).await.unwrap();
    assert_converted(&w.catalog, &expected).await;
    assert_no_orphans(&w.catalog).await;
}

/// iceberg-rust 0.10.1 drops the initial-default of a timestamp_ns field while parsing
/// the metadata, silently: eqdv reads the metadata file itself for such fields and
/// refuses, since files that predate the field would read null instead of the default.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_default_iceberg_rust_cannot_parse_is_refused() {
    for with_default in [true, false] {
        let w = warehouse();
        generate_table(
            &w.catalog,
            &spec(81, vec![KeyType::Long], PartitionKind::None),
        )
        .await;
        let t = load(&w.catalog).await;
        // Another engine adds `ts` (timestamp_ns), with or without an initial-default.
        let mut json = serde_json::to_value(t.metadata.as_ref()).unwrap();
        let current = json["current-schema-id"].as_i64().unwrap();
        let mut schema = json["schemas"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["schema-id"].as_i64() == Some(current))
            .unwrap()
            .clone();
        let mut field = serde_json::json!({
            "id": 900, "name": "ts_ns", "required": false, "type": "timestamp_ns"
        });
        if with_default {
            field["initial-default"] = "2024-01-01T00:00:00.000000001".into();
        }
        schema["fields"].as_array_mut().unwrap().push(field);
        schema["schema-id"] = (current + 1).into();
        json["schemas"].as_array_mut().unwrap().push(schema);
        json["current-schema-id"] = (current + 1).into();
        json["last-column-id"] = 900.into();
        let location = format!(
            "{}/metadata/00900-{}.metadata.json",
            t.location(),
            uuid::Uuid::new_v4()
        );
        std::fs::write(
            location.trim_start_matches("file://"),
            serde_json::to_vec(&json).unwrap(),
        )
        .unwrap();
        w.catalog
            .swap_pointer(&table(), &t.pointer, &location)
            .await
            .unwrap();

        let t = load(&w.catalog).await;
        let ts = t
            .metadata
            .current_schema()
            .field_by_id(900)
            .unwrap()
            .clone();
        assert!(
            ts.initial_default.is_none(),
            "iceberg-rust now parses it: retire this check"
        );
        let checked = t.refuse_unparsed_defaults(&[ts]).await;
        let read = eqdv_workload::read::read_canonical(&t, "main").await;
        if with_default {
            let err = checked.unwrap_err().to_string();
            assert!(
                err.contains("ts") && err.contains("initial-default"),
                "{err}"
            );
            assert!(read.is_err(), "eqdv rows must refuse too");
        } else {
            checked.unwrap();
            read.unwrap();
        }
    }
}

/// Footers kept from an earlier resolve (what a warm Lambda instance keeps) open every
/// file without a request and change nothing else: the same positions, row groups
/// pruned by statistics and by bloom filters alike, in one key pass or three; and the
/// conversion made on them reads as PyIceberg expects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kept_footers_change_nothing_but_the_requests() {
    use eqdv::parquet_io::FooterCache;
    use eqdv::resolve::ResolveOptions;
    let w = warehouse();
    let s = bloom_workload(83, vec![KeyType::String], PartitionKind::Identity, false);
    let report = generate_table(&w.catalog, &s).await;
    let cached = ResolveOptions {
        footer_cache: FooterCache::with_capacity(64 << 20),
        ..Default::default()
    };
    let f = files(&w.catalog).await;
    let delete_rows: u64 = f
        .equality_deletes
        .iter()
        .map(|d| d.file.record_count())
        .sum();
    let in_passes = ResolveOptions {
        key_memory_budget: (delete_rows * 160).div_ceil(3),
        ..cached.clone()
    };
    let [plain, cold, warm, warm_passes] = resolve_each(
        &w.catalog,
        [
            ResolveOptions::default(),
            cached.clone(),
            cached.clone(),
            in_passes,
        ],
    )
    .await;
    let (c, m) = (&cold.metrics, &warm.metrics);
    assert!(m.files_opened > 0 && m.row_groups_pruned > 0, "{m:?}");
    assert_eq!(c.footers_from_cache, 0);
    assert_eq!(m.footers_from_cache, m.files_opened, "{m:?}");
    assert_eq!(m.footer_bytes_read, 0);
    assert!(warm_passes.metrics.key_passes > 1);
    assert_eq!(
        warm_passes.metrics.footers_from_cache,
        warm_passes.metrics.files_opened
    );
    for other in [&cold, &warm, &warm_passes] {
        assert_eq!(other.positions, plain.positions);
    }
    for other in [&cold.metrics, m] {
        assert_eq!(
            other.files_opened, plain.metrics.files_opened,
            "{other:?}\n{:?}",
            plain.metrics
        );
        assert_eq!(other.row_groups_pruned, plain.metrics.row_groups_pruned);
        assert_eq!(
            other.row_groups_pruned_by_bloom,
            plain.metrics.row_groups_pruned_by_bloom
        );
    }

    let options = ConvertOptions {
        resolve: cached.clone(),
        ..Default::default()
    };
    let converted = convert(&w.catalog, &table(), &options).await.unwrap();
    assert_eq!(converted.outcome, Outcome::Converted);
    assert_eq!(
        converted.resolve.footers_from_cache,
        converted.resolve.files_opened
    );
    let expected = expected_rows(&report.state).expect("expected rows");
    assert_converted(&w.catalog, &expected).await;
}

/// A conversion that finds nothing to do on its branch names the other branches whose
/// heads hold equality deletes (a writer committing to a staging branch): here
/// `staging`, left at the head that main had before its conversion; once `staging` is
/// converted too, nothing is named.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_to_do_names_the_branches_that_hold_equality_deletes() {
    let w = warehouse();
    generate_table(
        &w.catalog,
        &spec(71, vec![KeyType::Long], PartitionKind::None),
    )
    .await;
    let head = load(&w.catalog)
        .await
        .metadata
        .current_snapshot_id()
        .expect("a head");
    commit_metadata_change(&w.catalog, |metadata| {
        metadata.set_ref(
            "staging",
            iceberg::spec::SnapshotReference::new(
                head,
                iceberg::spec::SnapshotRetention::branch(None, None, None),
            ),
        )
    })
    .await;
    let on = |branch: &str| ConvertOptions {
        branch: branch.to_string(),
        ..Default::default()
    };
    let first = convert(&w.catalog, &table(), &on("main")).await.unwrap();
    assert_eq!(first.outcome, Outcome::Converted);
    let again = convert(&w.catalog, &table(), &on("main")).await.unwrap();
    assert_eq!(again.outcome, Outcome::NothingToDo);
    let named: Vec<&str> = again
        .equality_deletes_elsewhere
        .iter()
        .map(|b| b.branch.as_str())
        .collect();
    assert_eq!(named, vec!["staging"]);
    assert_eq!(
        again.equality_deletes_elsewhere[0].equality_delete_rows,
        first.equality_deletes_removed
    );
    let staging = convert(&w.catalog, &table(), &on("staging")).await.unwrap();
    assert_eq!(staging.outcome, Outcome::Converted);
    let last = convert(&w.catalog, &table(), &on("main")).await.unwrap();
    assert_eq!(last.outcome, Outcome::NothingToDo);
    assert!(
        last.equality_deletes_elsewhere.is_empty(),
        "{:?}",
        last.equality_deletes_elsewhere
    );
    assert_no_orphans(&w.catalog).await;
}
