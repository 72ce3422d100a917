//! Test hooks: named points in the commit protocol where a fault test can freeze a
//! conversion and kill the process, to prove that a crash at that point leaves the
//! table unchanged and only unreferenced files behind (which `cleanup` removes).
//!
//! A runtime check, not a build feature, so that the real `eqdv` binary the tests run is
//! the one users run. It does nothing unless the environment variable
//! `EQDV_TEST_PAUSE_AT` names the point, and it never changes what is written or
//! committed: it only prints a marker line to stderr and sleeps. Never set it outside
//! tests.
//!
//! Points: `after-files` (a conversion wrote its DV Puffin file, its manifests, its
//! manifest list and its metadata.json, all at once, and has not checked its deadline),
//! `before-swap` (any commit, through `commit::publish` (the generator's included) or
//! `commit::publish_written` (a conversion's), wrote its manifests, manifest list and
//! metadata.json; the catalog pointer is not swapped), `key-index-upkeep` (a conversion
//! keeping its key index wrote the new run, not yet the index metadata file),
//! `before-range-result` (a split's range task wrote its Puffin file, not yet its
//! result).

use std::time::Duration;

/// The variable naming the point to pause at.
pub const PAUSE_AT_ENV: &str = "EQDV_TEST_PAUSE_AT";
/// How long to pause, in seconds (default 600).
pub const PAUSE_SECS_ENV: &str = "EQDV_TEST_PAUSE_SECS";
/// The stderr line printed on pausing is this prefix followed by the point's name.
pub const PAUSED_MARKER: &str = "eqdv-test-paused-at=";

/// In a conversion's first commit attempt: after the DV Puffin file, the manifests, the
/// manifest list and the metadata.json are written (at once), before the deadline check
/// that precedes the swap.
pub const AFTER_FILES: &str = "after-files";
/// In `commit::publish` and `commit::publish_written`: after the new metadata.json is
/// written, before the pointer swap.
pub const BEFORE_SWAP: &str = "before-swap";

/// In a conversion's key index upkeep: after the new run's leaves and covered list are
/// written, before the index metadata file.
pub const KEY_INDEX_UPKEEP: &str = "key-index-upkeep";

/// In a split's range task: after the range's Puffin file is written, before its result
/// is stored beside the table.
pub const BEFORE_RANGE_RESULT: &str = "before-range-result";

/// Pauses here if `EQDV_TEST_PAUSE_AT` is `point`; returns at once otherwise.
pub async fn pause_point(point: &str) {
    if std::env::var(PAUSE_AT_ENV).ok().as_deref() != Some(point) {
        return;
    }
    let secs = std::env::var(PAUSE_SECS_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(600);
    eprintln!("{PAUSED_MARKER}{point}");
    tokio::time::sleep(Duration::from_secs(secs)).await;
}
