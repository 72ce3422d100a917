//! The key index never costs a conversion its deadline: an upkeep that runs past half
//! the time left is abandoned (its files removed) and the conversion commits without
//! it. A test binary of its own: it pauses the upkeep through `EQDV_TEST_PAUSE_AT`,
//! which is read process-wide.

use eqdv_test_support as support;

use std::time::{Duration, Instant};

use eqdv::convert::{ConvertOptions, Outcome, convert};
use eqdv::key_index::KeyIndexOptions;
use eqdv::resolve::ResolveOptions;
use eqdv::test_hooks::{KEY_INDEX_UPKEEP, PAUSE_AT_ENV, PAUSE_SECS_ENV};
use eqdv_workload::generate::{KeyType, PartitionKind, WorkloadSpec, expected_rows};
use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upkeep_past_half_the_time_left_is_abandoned_and_the_conversion_commits() {
    let w = warehouse();
    let spec = WorkloadSpec {
        seed: 31,
        rows: 1_200,
        commits: 2,
        keys: vec![KeyType::Long],
        partition: PartitionKind::None,
        changes_per_commit: 40,
        rows_per_file: 100,
        rows_per_row_group: 50,
        ..Default::default()
    };
    let report = generate_table(&w.catalog, &spec).await;
    let expected = expected_rows(&report.state).unwrap();
    // SAFETY of the test: this binary holds this one test, so nothing else reads the
    // variables while they are set.
    unsafe {
        std::env::set_var(PAUSE_AT_ENV, KEY_INDEX_UPKEEP);
        std::env::set_var(PAUSE_SECS_ENV, "60");
    }
    let started = Instant::now();
    let converted = convert(
        &w.catalog,
        &table(),
        &ConvertOptions {
            resolve: ResolveOptions {
                key_index: KeyIndexOptions::always(),
                ..Default::default()
            },
            deadline: Some(Instant::now() + Duration::from_secs(20)),
            ..Default::default()
        },
    )
    .await
    .expect("the conversion commits without the index");
    unsafe {
        std::env::remove_var(PAUSE_AT_ENV);
    }
    assert_eq!(converted.outcome, Outcome::Converted);
    assert!(converted.key_index.is_empty(), "{:?}", converted.key_index);
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "ran to the deadline: {:?}",
        started.elapsed()
    );
    let t = load(&w.catalog).await;
    assert!(eqdv::key_index::summaries(&t, None).await.is_empty());
    assert_converted(&w.catalog, &expected).await;
    // The abandoned run's leaves and covered list were removed.
    assert_no_orphans(&w.catalog).await;
}
