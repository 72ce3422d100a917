//! The planner on a real local warehouse: triggers become tables, tables become shards,
//! and every table it leaves alone comes with the reason.

use eqdv::catalog::{Catalog, TableName};
use eqdv::convert::{ConvertOptions, convert};
use eqdv::planner::{Allowlist, PlannerConfig, TableDecision, Trigger, plan_triggers};
use eqdv_functions::events::parse_planner_event;
use eqdv_test_support as support;
use eqdv_workload::generate::{KeyType, PartitionKind, WorkloadSpec, generate};
use serde_json::json;
use support::*;

fn spec(seed: u64) -> WorkloadSpec {
    WorkloadSpec {
        seed,
        rows: 600,
        commits: 2,
        keys: vec![KeyType::Long],
        partition: PartitionKind::Identity,
        changes_per_commit: 60,
        rows_per_file: 200,
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn triggers_become_shards_and_reasons() {
    let w = warehouse();
    let orders = TableName::new("cdc", "orders");
    let users = TableName::new("cdc", "users");
    let other = TableName::new("ops", "audit");
    for (i, t) in [&orders, &users, &other].into_iter().enumerate() {
        generate(&w.catalog, t, &spec(80 + i as u64)).await.unwrap();
    }
    // users is already converted: its head is eqdv's and no equality delete is live.
    convert(&w.catalog, &users, &ConvertOptions::default())
        .await
        .unwrap();

    let config = PlannerConfig {
        allowlist: Allowlist {
            databases: vec!["cdc".into()],
            tables: Vec::new(),
        },
        ..Default::default()
    };
    // A Glue event for orders, a sweep, and a backfill of a table that does not exist.
    let mut triggers = parse_planner_event(&json!({
        "source": "aws.glue",
        "detail-type": "Glue Data Catalog Table State Change",
        "detail": {"databaseName": "cdc", "tableName": "orders", "typeOfChange": "UpdateTable"}
    }))
    .unwrap();
    triggers.push(Trigger::Sweep);
    triggers.extend(
        parse_planner_event(&json!({"backfill": {"tables": ["cdc.ghost"], "dry_run": true}}))
            .unwrap(),
    );

    let summary = plan_triggers(&w.catalog, &triggers, &config).await.unwrap();
    assert!(summary.dry_run);
    let decision = |t: &str| {
        summary
            .tables
            .get(t)
            .unwrap_or_else(|| panic!("no decision for {t}: {summary:?}"))
    };
    assert!(matches!(decision("cdc.orders"), TableDecision::Planned { shards } if *shards > 0));
    assert!(
        matches!(decision("cdc.users"), TableDecision::NothingToDo { reason } if reason.contains("eqdv's own")),
        "{:?}",
        decision("cdc.users")
    );
    assert!(
        matches!(decision("ops.audit"), TableDecision::Skipped { reason } if reason.contains("allowlist"))
    );
    assert!(
        matches!(decision("cdc.ghost"), TableDecision::Skipped { reason } if reason.contains("not found"))
    );
    // Every shard is for orders; together they cover its live equality deletes.
    assert!(summary.shards.iter().all(|s| s.table == orders));
    let planned: usize = summary
        .shards
        .iter()
        .map(|s| s.delete_files().count())
        .sum();
    let t = eqdv::table::LoadedTable::load(&w.catalog, &orders)
        .await
        .unwrap();
    let head = t.head("main").unwrap();
    let files = eqdv::table::TableFiles::read(&t, head.as_ref())
        .await
        .unwrap();
    assert_eq!(planned, files.equality_deletes.len());
    // Converting each shard then leaves the planner nothing to do for orders.
    for shard in &summary.shards {
        let options = ConvertOptions {
            shard: Some(shard.clone()),
            ..Default::default()
        };
        convert(&w.catalog, &orders, &options).await.unwrap();
    }
    let again = plan_triggers(&w.catalog, &[Trigger::Sweep], &config)
        .await
        .unwrap();
    assert!(again.shards.is_empty(), "{again:?}");
    assert!(matches!(
        again.tables.get("cdc.orders"),
        Some(TableDecision::NothingToDo { .. })
    ));
    assert!(w.catalog.list_tables(None).await.unwrap().len() == 3);
}

/// A table that fits one shard by its head's summary is planned from its delete
/// manifests alone: the same shards (ids, partitions, delete files, queue groups) as
/// from all it would read, each estimated at the table's size, and none of its data
/// manifests read. A bound below the table's size, or a shard target below it, reads
/// them as before. The shards so planned convert the table (PyIceberg reads it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_that_fits_one_shard_is_planned_from_its_delete_manifests() {
    use eqdv::plan::{PlanOptions, plan_head};
    let w = warehouse();
    let workload = WorkloadSpec {
        partition: PartitionKind::Bucket(8),
        commits: 3,
        ..spec(86)
    };
    let report = generate_table(&w.catalog, &workload).await;
    let t = load(&w.catalog).await;
    let head = t.head("main").unwrap().expect("a head");
    let total: u64 = head.summary().additional_properties
        [eqdv::snapshot::TOTAL_FILES_SIZE_PROPERTY]
        .parse()
        .unwrap();
    let all = files(&w.catalog).await;
    let with = |small_table_bytes: u64, target_shard_bytes: u64| PlanOptions {
        small_table_bytes,
        target_shard_bytes,
        default_queue_groups: 4,
        ..Default::default()
    };
    let full = plan_head(&t, "main", &with(0, 1 << 30)).await.unwrap();
    let small = plan_head(&t, "main", &with(u64::MAX, 1 << 30))
        .await
        .unwrap();

    let data_manifests = all
        .manifests
        .iter()
        .filter(|m| m.content == iceberg::spec::ManifestContentType::Data)
        .count();
    assert_eq!(small.skipped_data.manifests, data_manifests);
    assert_eq!(small.skipped_data.files, all.data_files.len() as u64);
    assert!(
        full.skipped_data.files < all.data_files.len() as u64,
        "the full plan read no data file: {:?}",
        full.skipped_data
    );
    let shape = |p: &eqdv::plan::Plan| {
        let mut shards: Vec<_> = p
            .shards
            .iter()
            .map(|s| {
                (
                    s.id.clone(),
                    s.partitions.clone(),
                    s.groups.clone(),
                    s.queue_group.clone(),
                )
            })
            .collect();
        shards.sort_by(|a, b| a.0.cmp(&b.0));
        shards
    };
    assert!(full.shards.len() > 1, "one queue group only: {full:?}");
    assert_eq!(shape(&small), shape(&full));
    for (s, f) in small.shards.iter().zip(&full.shards) {
        assert_eq!(s.estimated_bytes, total);
        assert!(f.estimated_bytes <= total);
    }
    assert_eq!(
        (
            small.equality_delete_files,
            small.equality_delete_rows,
            small.groups
        ),
        (
            full.equality_delete_files,
            full.equality_delete_rows,
            full.groups
        )
    );

    // Just too small a bound, or a shard target under the table's size: read as before.
    for options in [with(total - 1, 1 << 30), with(u64::MAX, total - 1)] {
        let plan = plan_head(&t, "main", &options).await.unwrap();
        assert_eq!(
            plan.skipped_data.files, full.skipped_data.files,
            "{options:?}"
        );
    }

    for shard in &small.shards {
        let options = ConvertOptions {
            shard: Some(shard.clone()),
            ..Default::default()
        };
        convert(&w.catalog, &table(), &options).await.unwrap();
    }
    let expected = eqdv_workload::generate::expected_rows(&report.state).unwrap();
    assert_converted(&w.catalog, &expected).await;
}

/// A caller that converts a plan's only shard in the same process (the planner
/// function) gets the table it was planned on: only when asked, only while the whole
/// plan is that one shard (a table after it with nothing to do does not drop it, one
/// with shards does), and converting the shard on it converts the table.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_of_one_shard_keeps_the_table_it_was_planned_on() {
    let w = warehouse();
    let orders = TableName::new("cdc", "orders");
    let users = TableName::new("cdc", "users");
    for (i, t) in [&orders, &users].into_iter().enumerate() {
        generate(&w.catalog, t, &spec(90 + i as u64)).await.unwrap();
    }
    let mut config = PlannerConfig::default();
    config.plan.default_queue_groups = 1;
    // As the planner function and `eqdv plan` set it: a table that fits one shard by
    // its summary is planned from its delete manifests alone.
    config.plan.small_table_bytes = u64::MAX;
    let sweep = [Trigger::Sweep];

    // Two tables with deletes: two shards, no table kept.
    config.keep_single_shard_table = true;
    let both = plan_triggers(&w.catalog, &sweep, &config).await.unwrap();
    assert_eq!(both.shards.len(), 2, "{both:?}");
    assert!(both.single_shard().is_none());

    // users converted: orders is the only shard, and users (after it) has nothing to do.
    convert(&w.catalog, &users, &ConvertOptions::default())
        .await
        .unwrap();
    config.keep_single_shard_table = false;
    let not_asked = plan_triggers(&w.catalog, &sweep, &config).await.unwrap();
    assert_eq!(not_asked.shards.len(), 1);
    assert!(
        not_asked.single_shard().is_none(),
        "kept without being asked"
    );
    config.keep_single_shard_table = true;
    let one = plan_triggers(&w.catalog, &sweep, &config).await.unwrap();
    assert!(matches!(
        one.tables.get("cdc.users"),
        Some(TableDecision::NothingToDo { .. })
    ));
    let (shard, table) = one
        .single_shard()
        .expect("the plan's one shard and its table");
    assert_eq!(shard.table, orders);
    // What the plan read is kept for the conversion: the manifest list, the delete
    // manifests, and (a table this small is planned from its delete manifests alone)
    // every data manifest with a live file, fetched while those were read.
    let kept = table.kept_reads.len();
    let head = table.head("main").unwrap().expect("a head");
    let manifests = eqdv::table::TableFiles::read(table, Some(&head))
        .await
        .unwrap()
        .manifests;
    let with_live = manifests
        .iter()
        .filter(|m| !eqdv::table::has_no_live_files(m))
        .count();
    assert!(
        manifests
            .iter()
            .any(|m| m.content == iceberg::spec::ManifestContentType::Data),
        "no data manifest"
    );
    assert_eq!(
        kept,
        with_live + 1,
        "{kept} kept of {} + 1",
        manifests.len()
    );
    // A whole read keeps the rest.
    assert_eq!(table.kept_reads.len(), manifests.len() + 1);
    assert_eq!(
        table.head("main").unwrap().map(|s| s.snapshot_id()),
        Some(shard.base_snapshot_id)
    );

    let options = ConvertOptions {
        shard: Some(shard.clone()),
        loaded_table: Some(table.clone()),
        ..Default::default()
    };
    let report = convert(&w.catalog, &orders, &options).await.unwrap();
    assert_eq!(report.outcome, eqdv::convert::Outcome::Converted);
    assert_eq!(report.base_snapshot_id, Some(shard.base_snapshot_id));
    assert_eq!(report.commit_attempts, 1);
    let again = plan_triggers(&w.catalog, &sweep, &config).await.unwrap();
    assert!(again.shards.is_empty(), "{again:?}");
    assert!(again.single_shard().is_none());
}

/// A warm planner (one store of kept reads across its invocations) after each of a
/// writer's commits: every invocation converts the table to what a reader that is not
/// eqdv reads as the history's rows, and fetches only the manifest list and the
/// manifests the commits since its last invocation added; the rest come from the store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warm_planner_fetches_only_what_the_commits_since_added() {
    let w = warehouse();
    let name = table();
    let history = spec(95);
    generate(&w.catalog, &name, &history).await.unwrap();
    let store = eqdv::table::KeptReads::new_store();
    let mut config = PlannerConfig::default();
    config.plan.default_queue_groups = 1;
    config.plan.small_table_bytes = u64::MAX;
    config.keep_single_shard_table = true;
    config.kept_reads = store.clone();
    let trigger = [Trigger::Sweep];
    // The manifest list and live manifests of the head the last invocation converted.
    let mut last_read: Option<std::collections::BTreeSet<String>> = None;
    for invocation in 0..3 {
        store.next_invocation();
        let fetched_before = store.fetched();
        let summary = plan_triggers(&w.catalog, &trigger, &config).await.unwrap();
        let (shard, planned) = summary.single_shard().expect("one shard, kept");
        let head = planned.head("main").unwrap().expect("a head");
        let options = ConvertOptions {
            shard: Some(shard.clone()),
            loaded_table: Some(planned.clone()),
            ..Default::default()
        };
        let report = convert(&w.catalog, &name, &options).await.unwrap();
        assert_eq!(report.outcome, eqdv::convert::Outcome::Converted);
        let expected = eqdv_workload::generate::expected_rows_of(&w.catalog, &name)
            .await
            .unwrap();
        assert_converted(&w.catalog, &expected).await;

        let manifests = eqdv::table::TableFiles::read(planned, Some(&head))
            .await
            .unwrap()
            .manifests;
        let read: std::collections::BTreeSet<String> = manifests
            .iter()
            .filter(|m| !eqdv::table::has_no_live_files(m))
            .map(|m| m.manifest_path.clone())
            .chain([head.manifest_list().to_string()])
            .collect();
        let fetched = store.fetched() - fetched_before;
        match &last_read {
            None => assert_eq!(fetched, read.len() as u64, "a cold store fetches all"),
            Some(last) => {
                let new = read.difference(last).count();
                assert!(
                    new < read.len(),
                    "invocation {invocation}: nothing carried over"
                );
                assert_eq!(
                    fetched,
                    new as u64,
                    "invocation {invocation}: fetched {fetched} of {} files, {new} new",
                    read.len()
                );
            }
        }
        last_read = Some(read);
        // The writer's next commit.
        let next = eqdv_workload::generate::WorkloadSpec {
            commits: 1,
            ..history.clone()
        };
        generate(&w.catalog, &name, &next).await.unwrap();
    }
}

/// The allowlist is applied before anything of a table is read, at every entry point:
/// a table event, a sweep, a backfill of tables or of a database, a queued shard and a
/// split task. The table outside it is booby-trapped (its pointer names a metadata file
/// that does not exist): reading it at all would fail, so every entry point must say it
/// is not in the allowlist instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_allowlist_is_applied_before_any_read_at_every_entry_point() {
    use eqdv::convert::SplitJob;
    use eqdv_functions::FunctionConfig;
    use eqdv_functions::converter::Converter;
    use eqdv_functions::split::SplitTask;

    let w = warehouse();
    let allowed = TableName::new("cdc", "orders");
    let outside = TableName::new("ops", "audit");
    for (i, t) in [&allowed, &outside].into_iter().enumerate() {
        generate(&w.catalog, t, &spec(90 + i as u64)).await.unwrap();
    }
    // A shard of the outside table, as a planner without the allowlist would make it.
    let t = eqdv::table::LoadedTable::load(&w.catalog, &outside)
        .await
        .unwrap();
    let files = eqdv::table::TableFiles::read(&t, t.head("main").unwrap().as_ref())
        .await
        .unwrap();
    let plan = eqdv::plan::plan(&t, "main", &files, &Default::default()).unwrap();
    let shard = plan.shards[0].clone();
    let job = SplitJob::new(shard.clone(), 2).unwrap();
    // The trap.
    let pointer = w.catalog.load_pointer(&outside).await.unwrap();
    let missing = pointer
        .metadata_location
        .replace(".metadata.json", "-missing.metadata.json");
    w.catalog
        .swap_pointer(&outside, &pointer, &missing)
        .await
        .unwrap();

    let planner = |allow: bool| PlannerConfig {
        allowlist: Allowlist {
            databases: if allow {
                Vec::new()
            } else {
                vec!["cdc".into()]
            },
            tables: Vec::new(),
        },
        ..Default::default()
    };
    let events = [
        json!({
            "source": "aws.glue",
            "detail-type": "Glue Data Catalog Table State Change",
            "detail": {"databaseName": "ops", "tableName": "audit", "typeOfChange": "UpdateTable"}
        }),
        json!({"source": "aws.events", "detail-type": "Scheduled Event"}),
        json!({"backfill": {"tables": ["ops.audit"]}}),
        json!({"backfill": {"database": "ops"}}),
    ];
    for event in &events {
        let triggers = parse_planner_event(event).unwrap();
        // Without the allowlist the trap goes off: the entry point reads the table.
        let open = plan_triggers(&w.catalog, &triggers, &planner(true))
            .await
            .unwrap();
        assert!(
            matches!(
                open.tables.get("ops.audit"),
                Some(TableDecision::Failed { .. })
            ),
            "{event}: the trap did not go off: {open:?}"
        );
        let summary = plan_triggers(&w.catalog, &triggers, &planner(false))
            .await
            .unwrap();
        assert!(
            matches!(
                summary.tables.get("ops.audit"),
                Some(TableDecision::Skipped { reason }) if reason == "not in the allowlist"
            ),
            "{event}: {summary:?}"
        );
        assert!(summary.shards.iter().all(|s| s.table != outside));
    }

    // The converter, given the shard and a split task of it anyway.
    let dir = w.path().display().to_string();
    let config = FunctionConfig::from_lookup(|name| match name {
        "EQDV_CATALOG" => Some("sqlite".into()),
        "EQDV_WAREHOUSE" => Some(dir.clone()),
        "EQDV_ALLOWED_DATABASES" => Some("cdc".into()),
        _ => None,
    })
    .unwrap();
    let converter = Converter {
        catalog: Box::new(w.another_handle()),
        config,
        dead_letters: None,
        source: "test".into(),
        kept_reads: Default::default(),
    };
    let err = converter.convert_shard(&shard, None).await.unwrap_err();
    assert!(
        err.to_string().contains("not in the allowlist"),
        "a queued shard: {err}"
    );
    for task in [
        SplitTask::Range {
            split: job.clone(),
            range: 0,
        },
        SplitTask::Commit { split: job.clone() },
        SplitTask::Cleanup { split: job.clone() },
    ] {
        let Err(err) = converter.handle_split_task(&task, None).await else {
            panic!("a split task of a table outside the allowlist ran");
        };
        assert!(
            err.cause.contains("not in the allowlist"),
            "a split task: {}",
            err.cause
        );
    }
}
