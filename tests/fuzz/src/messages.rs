//! Targets over messages: JSON that reaches eqdv from events, queues, the split state
//! machine and the key index's metadata, parsed as the functions parse it, and what is
//! derived from an accepted message checked against the limits it must keep (paths under
//! the table, AWS's name limits).

use eqdv::convert::{RangeResult, SplitJob};
use eqdv::key_index::IndexMetadata;
use eqdv::plan::Shard;
use eqdv_functions::events::parse_planner_event;
use eqdv_functions::queue::message_group_id;
use eqdv_functions::split::{attempt_job, execution_name, parse_task};
use serde_json::Value;

const TABLE: &str = "s3://bucket/warehouse/db/fuzzed";

fn json(data: &[u8]) -> Option<Value> {
    serde_json::from_slice(data).ok()
}

/// An event the planner Lambda receives (EventBridge, CloudTrail, a schedule, a
/// backfill request).
pub fn planner_event(data: &[u8]) {
    if let Some(event) = json(data)
        && let Err(e) = parse_planner_event(&event)
    {
        // It goes to the dead letters and the logs: one short line.
        let message = e.to_string();
        assert!(
            message.len() <= 2048 && !message.contains('\n'),
            "an event's error is {} bytes or several lines: {message:?}",
            message.len()
        );
    }
}

/// A shard as the converter receives it from the queue: its FIFO group id stays within
/// SQS's limits (1 to 128 printable ASCII characters), and a split of it is one the
/// converter accepts.
pub fn shard(data: &[u8]) {
    let Ok(shard) = serde_json::from_slice::<Shard>(data) else {
        return;
    };
    let group = message_group_id(&shard);
    assert!(
        !group.is_empty() && group.len() <= 128 && group.chars().all(|c| c.is_ascii_graphic()),
        "message group id {group:?} breaks SQS's rule"
    );
    for ranges in [1, 2, 7] {
        if let Ok(job) = SplitJob::new(shard.clone(), ranges) {
            if let Err(e) = job.check() {
                panic!("a split made of a shard fails its own check: {e}");
            }
            split_limits(&job);
        }
    }
}

/// A split task (the state machine's payload): a job the converter accepts keeps its
/// files under the table's metadata and data directories and its execution names
/// within Step Functions' limit.
pub fn split_task(data: &[u8]) {
    let Some(payload) = json(data) else {
        return;
    };
    let Ok(task) = parse_task(&payload) else {
        return;
    };
    let job = task.split();
    if job.check().is_err() {
        return;
    }
    split_limits(job);
    for attempt in [2, 3, 9] {
        if let Ok(retried) = attempt_job(job, attempt, 64) {
            split_limits(&retried);
        }
    }
}

/// What a checked split derives stays where it belongs.
fn split_limits(job: &SplitJob) {
    let prefix = format!("{TABLE}/metadata/eqdv-splits/");
    for index in 0..job.ranges.min(8) {
        let Ok(range) = job.range(index) else {
            panic!(
                "range {index} of a checked {}-range split is refused",
                job.ranges
            );
        };
        let location = job.result_location(TABLE, range);
        let rest = location.strip_prefix(&prefix).unwrap_or_else(|| {
            panic!("result {location} is not under {prefix}");
        });
        assert!(
            rest.split('/').count() == 2 && !rest.split('/').any(|s| s == ".." || s == "."),
            "result {location} escapes its split's directory"
        );
        let stem = job.dv_file_stem(range);
        assert!(
            !stem.contains('/') && !stem.starts_with('.'),
            "DV file stem {stem:?}"
        );
    }
    for attempt in [1, 2, 10] {
        let name = execution_name(job, attempt);
        assert!(
            !name.is_empty()
                && name.len() <= 80
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)),
            "execution name {name:?} breaks Step Functions' rule"
        );
    }
}

/// A range's stored result (read back by the split's fan-in).
pub fn range_result(data: &[u8]) {
    let Ok(result) = serde_json::from_slice::<RangeResult>(data) else {
        return;
    };
    let text = serde_json::to_string(&result).unwrap_or_else(|e| panic!("cannot write back: {e}"));
    if let Err(e) = serde_json::from_str::<RangeResult>(&text) {
        panic!("a result eqdv wrote does not read back: {e}");
    }
}

/// A key index's metadata file: the sums a lookup and a verification take over its
/// runs never overflow.
pub fn index_metadata(data: &[u8]) {
    let Ok(metadata) = serde_json::from_slice::<IndexMetadata>(data) else {
        return;
    };
    let _ = (metadata.entries(), metadata.leaf_bytes(), metadata.files());
}

/// A table's properties (one `key=value` per line), read as eqdv reads its own: the
/// commit retry policy, manifest merging, the staging branch, the key index's mode,
/// minimum and per-part locations. Whatever a property says, the policies keep
/// usable values.
pub fn properties(data: &[u8]) {
    use eqdv::convert::RetryPolicy;
    use eqdv::key_index::{IndexKey, KeyIndexMode};
    use eqdv::snapshot::MergePolicy;
    let text = String::from_utf8_lossy(data);
    let map: std::collections::HashMap<String, String> = text
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let retry = RetryPolicy::from_properties(&map);
    let _ = format!("{retry:?}");
    let merge = MergePolicy::from_properties(&map);
    let _ = format!("{merge:?}");
    let _ = eqdv::staging::staging_branch_of(&map, "main");
    for (key, value) in &map {
        let _ = value.parse::<KeyIndexMode>();
        if key.starts_with(eqdv::key_index::LOCATION_PROPERTY_PREFIX)
            && let Some(index) = IndexKey::from_property(key)
        {
            // What it parsed names the same property again.
            assert_eq!(
                IndexKey::from_property(&index.property()).as_ref(),
                Some(&index),
                "{key} does not read back"
            );
        }
    }
}
