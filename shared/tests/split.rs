//! A split run as separate tasks (`eqdv::convert::split`), as the Step Functions
//! orchestration runs them, against a real local warehouse (SQLite catalog, Parquet and
//! Puffin files on disk): the range tasks store their results beside the table and the
//! fan-in commits them once, marked with the split; a redrive of a committed split
//! writes and commits nothing; a missing range commits nothing and the cleanup leaves
//! nothing behind; a job that is not a planner's is refused.

use eqdv::Error;
use eqdv::catalog::Catalog;
use eqdv::convert::{
    ConvertOptions, Outcome, RangePhases, RangeTaskOutput, SPLIT_PROPERTY, SplitJob,
    run_cleanup_task, run_commit_task, run_range_task,
};
use eqdv_test_support::state::{TableState, expected_conversion};
use eqdv_test_support::*;

/// The table's one shard (its global group), split into `ranges`.
async fn split_job(w: &Warehouse, ranges: u32) -> SplitJob {
    let (t, f) = (load(&w.catalog).await, files(&w.catalog).await);
    let plan = eqdv::plan::plan(&t, "main", &f, &Default::default()).expect("plan");
    assert_eq!(plan.shards.len(), 1, "a global group makes one shard");
    SplitJob::new(plan.shards[0].clone(), ranges).expect("split job")
}

async fn exists(w: &Warehouse, location: &str) -> bool {
    w.catalog.file_io().exists(location).await.expect("exists")
}

/// The head's summary property `key`.
async fn head_property(w: &Warehouse, key: &str) -> Option<String> {
    let t = load(&w.catalog).await;
    let head = t.head("main").unwrap().expect("a head");
    head.summary().additional_properties.get(key).cloned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn range_tasks_and_the_fan_in_commit_once_and_a_redrive_changes_nothing() {
    let w = warehouse();
    generate_table(&w.catalog, &global_deletes_spec(70)).await;
    let before = TableState::read(&w.catalog, &table()).await;
    let planned = expected_conversion(&w.catalog, &table(), &before.rows).await;
    let job = split_job(&w, 4).await;
    let options = ConvertOptions::default();

    // Each range stores its result beside the table, and its Puffin file (if it found
    // positions) under the name the split fixes; a retried range overwrites its own.
    let mut outputs = Vec::new();
    for index in 0..4 {
        let out = run_range_task(&w.catalog, &job, &options, index)
            .await
            .unwrap_or_else(|e| panic!("range {index}: {e}"));
        assert_eq!((out.range, out.committed_snapshot_id), (index, None));
        assert!(exists(&w, &out.result_location).await, "{out:?}");
        outputs.push(out);
    }
    let retried = run_range_task(&w.catalog, &job, &options, 1).await.unwrap();
    // The same work (its timings aside), and the timings reported.
    let work = |o: &RangeTaskOutput| RangeTaskOutput {
        phases: RangePhases::default(),
        ..o.clone()
    };
    assert_eq!(work(&retried), work(&outputs[1]), "a retried range differs");
    for out in &outputs {
        let p = &out.phases;
        assert!(
            p.load_ms > 0.0 && p.read_table_ms > 0.0 && p.resolve_ms > 0.0 && p.write_ms > 0.0,
            "a phase of a range that converted is not reported: {out:?}"
        );
    }
    assert!(
        outputs.iter().filter(|o| o.dvs > 0).count() > 1,
        "too few ranges found positions: {outputs:?}"
    );
    let location = load(&w.catalog).await.location().to_string();
    let puffin = |index: u32| {
        format!(
            "{location}/data/{}.puffin",
            job.dv_file_stem(job.range(index).unwrap())
        )
    };
    for out in &outputs {
        assert_eq!(exists(&w, &puffin(out.range)).await, out.dvs > 0, "{out:?}");
    }
    let ranged = TableState::read(&w.catalog, &table()).await;
    assert_eq!(ranged.pointer, before.pointer, "a range task committed");

    // The fan-in commits one snapshot marked with the split, and removes the results.
    let report = run_commit_task(&w.catalog, &job, &options)
        .await
        .expect("fan-in");
    assert_eq!((report.outcome, report.ranges), (Outcome::Converted, 4));
    assert_eq!(report.dvs_written, planned.dvs.len());
    let after = TableState::read(&w.catalog, &table()).await;
    assert_eq!(after.snapshots.len(), before.snapshots.len() + 1);
    assert_eq!(after.head, report.new_snapshot_id);
    assert_eq!(
        head_property(&w, SPLIT_PROPERTY).await.as_deref(),
        Some(job.id.as_str())
    );
    for out in &outputs {
        assert!(!exists(&w, &out.result_location).await, "{out:?} left");
    }
    assert_converted(&w.catalog, &before.rows).await;

    // A redrive of the same split: the ranges find it committed and write nothing (their
    // Puffin files are the table's DVs now), the fan-in reports the commit, the cleanup
    // removes nothing.
    let committed: Vec<(String, Vec<u8>)> = {
        let mut files = Vec::new();
        for out in outputs.iter().filter(|o| o.dvs > 0) {
            let bytes = eqdv::storage::read_all(w.catalog.file_io(), &puffin(out.range))
                .await
                .unwrap();
            files.push((puffin(out.range), bytes.to_vec()));
        }
        files
    };
    for index in 0..4 {
        let out = run_range_task(&w.catalog, &job, &options, index)
            .await
            .unwrap();
        assert_eq!(out.committed_snapshot_id, after.head);
        assert!(!exists(&w, &out.result_location).await);
    }
    let again = run_commit_task(&w.catalog, &job, &options).await.unwrap();
    assert_eq!(
        (again.outcome, again.new_snapshot_id),
        (Outcome::Converted, after.head)
    );
    let cleanup = run_cleanup_task(&w.catalog, &job).await.unwrap();
    assert!(
        cleanup.committed && cleanup.removed.is_empty(),
        "{cleanup:?}"
    );
    for (location, bytes) in &committed {
        let now = eqdv::storage::read_all(w.catalog.file_io(), location)
            .await
            .unwrap();
        assert!(now.as_ref() == bytes.as_slice(), "{location} changed");
    }
    after.assert_unchanged(&TableState::read(&w.catalog, &table()).await);
    assert_converted(&w.catalog, &before.rows).await;
    assert_no_orphans(&w.catalog).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_range_commits_nothing_and_the_cleanup_leaves_nothing() {
    let w = warehouse();
    generate_table(&w.catalog, &global_deletes_spec(71)).await;
    let before = TableState::read(&w.catalog, &table()).await;
    let job = split_job(&w, 4).await;
    let options = ConvertOptions::default();
    for index in [0, 1, 3] {
        run_range_task(&w.catalog, &job, &options, index)
            .await
            .unwrap();
    }
    let e = run_commit_task(&w.catalog, &job, &options)
        .await
        .unwrap_err();
    assert!(
        matches!(e, Error::InvalidInput(_))
            && e.to_string().contains("data range 2 of 4")
            && e.to_string().contains(&job.id),
        "{e}"
    );
    // Nothing committed; the ranges' files stay until the cleanup removes them all.
    let after = TableState::read(&w.catalog, &table()).await;
    assert_eq!(after.head, before.head);
    assert_eq!(after.equality_deletes, before.equality_deletes);
    assert!(after.orphans.len() > before.orphans.len());
    let cleanup = run_cleanup_task(&w.catalog, &job).await.unwrap();
    assert!(!cleanup.committed);
    assert_eq!(cleanup.removed.len(), 8, "4 Puffin files and 4 results");
    before.assert_unchanged(&TableState::read(&w.catalog, &table()).await);
    assert_no_orphans(&w.catalog).await;
    // The table converts later as if nothing had happened.
    eqdv::convert::convert(&w.catalog, &table(), &options)
        .await
        .unwrap();
    assert_converted(&w.catalog, &before.rows).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_split_job_that_is_not_a_planners_is_refused() {
    let w = warehouse();
    generate_table(&w.catalog, &global_deletes_spec(72)).await;
    let job = split_job(&w, 2).await;
    assert_eq!(job, split_job(&w, 2).await, "the id is stable");
    assert_ne!(job.id, split_job(&w, 3).await.id, "the id names the count");
    assert!(job.id.len() <= 80, "{}", job.id);
    let options = ConvertOptions::default();
    for (bad, wanted) in [
        (
            SplitJob {
                id: "../../escape".into(),
                ..job.clone()
            },
            "is not 1 to 80",
        ),
        (
            SplitJob {
                ranges: 0,
                ..job.clone()
            },
            "does not exist",
        ),
        (
            SplitJob {
                ranges: 5000,
                ..job.clone()
            },
            "at most 1024",
        ),
    ] {
        let e = run_range_task(&w.catalog, &bad, &options, 0)
            .await
            .unwrap_err();
        assert!(e.to_string().contains(wanted), "{e}");
        let e = run_cleanup_task(&w.catalog, &bad).await.unwrap_err();
        assert!(e.to_string().contains(wanted), "{e}");
    }
    let e = run_range_task(&w.catalog, &job, &options, 2)
        .await
        .unwrap_err();
    assert!(
        e.to_string().contains("data range 2 of 2 does not exist"),
        "{e}"
    );
    assert_no_orphans(&w.catalog).await;
}
