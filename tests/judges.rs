//! The judges are shown to fail. Every conversion in this suite is judged by two
//! independent readers: PyIceberg through `pyiceberg/read_table.py` (whose `check_dvs`
//! exits with status 4 on an invalid DV) and Iceberg Java through the interop jar
//! (`check-dvs`, which loads every DV with Java's own DV reader, and `dump`). A judge that
//! cannot fail proves nothing, so here eqdv converts a Java-written table, both judges
//! accept it, then one of eqdv's DVs is broken on purpose (`break-dv`: rewritten with
//! Java's Puffin writer and swapped in by a RowDelta) and each judge must reject the
//! table, naming the problem. Dropping a DV outright leaves every DV valid: then the row
//! comparison must find exactly the DV's rows back. Needs the test services and the
//! interop jar.

mod common;

use eqdv::convert::{ConvertOptions, Outcome, convert};
use eqdv_test_support::java;
use java::JavaTable;
use serde_json::Value;

/// A Java CDC table (`write-cdc`, key long) converted by eqdv and accepted by both judges,
/// so that a later rejection is the corruption's doing. Returns Java's rows before the
/// conversion and check-dvs's result after it.
async fn converted(test: &str, partition: &str, commits: &str) -> (JavaTable, Vec<String>, Value) {
    let t = JavaTable::new(test);
    t.write_cdc("21", commits, "300", "long", partition);
    let before = t.dump();
    let catalog = t.catalog().await;
    let r = convert(&catalog, &t.name(), &ConvertOptions::default())
        .await
        .expect("convert");
    assert_eq!(r.outcome, Outcome::Converted);
    // Java's rows, DV loader and PyIceberg all accept the conversion.
    let check = t.assert_converted(&before);
    assert_eq!(check["dvs"].as_u64(), Some(r.dvs_written as u64), "{check}");
    (t, before, check)
}

/// Breaks one DV of `t` (`break-dv --kind KIND`) and returns what it did.
fn break_dv(t: &JavaTable, kind: &str) -> Value {
    let broken = t.java_json("break-dv", &["--kind", kind]);
    eprintln!("break-dv: {broken}");
    broken
}

/// read_table.py's refusal: exit status 4 (an invalid DV); returns its stderr.
fn pyiceberg_rejects(t: &JavaTable) -> String {
    let err = common::try_pyiceberg_read_glue(&t.name().to_string())
        .expect_err("read_table.py accepted a table with a broken DV");
    assert_eq!(err.status, Some(4), "{err}");
    err.stderr
}

/// check-dvs's refusal: a non-zero exit; returns its stderr.
fn java_rejects(t: &JavaTable) -> String {
    let out = t.command("check-dvs", &[]).output().expect("run java");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        !out.status.success(),
        "check-dvs accepted a table with a broken DV: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    stderr
}

fn text<'a>(v: &'a Value, key: &str) -> &'a str {
    v[key].as_str().unwrap_or_else(|| panic!("no {key} in {v}"))
}

fn number(v: &Value, key: &str) -> u64 {
    v[key].as_u64().unwrap_or_else(|| panic!("no {key} in {v}"))
}

/// Both judges reject `t`, each for the one problem named: read_table.py (exit status 4)
/// with `py_needle` in its message, check-dvs with exactly one problem, `java_needle`.
fn assert_both_reject(t: &JavaTable, py_needle: &str, java_needle: &str) {
    assert_names("read_table.py", &pyiceberg_rejects(t), py_needle);
    let java = java_rejects(t);
    assert_names("check-dvs", &java, "1 problem(s)");
    assert_names("check-dvs", &java, java_needle);
}

/// Asserts `message` names `needle` (the judge rejected for this reason, not another).
fn assert_names(judge: &str, message: &str, needle: &str) {
    assert!(
        message.contains(needle),
        "{judge} rejected, but not for `{needle}`:\n{message}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_crc_is_rejected_by_both_judges() {
    let (t, _, _) = converted("judge_crc", "identity", "2").await;
    let b = break_dv(&t, "crc");
    let data_file = text(&b, "data_file");
    assert_both_reject(
        &t,
        &format!(
            "for {data_file}: CRC {} != computed {}",
            text(&b, "crc_stored"),
            text(&b, "crc_computed")
        ),
        &format!(
            "for {data_file}: Java's delete loader rejects it: IllegalArgumentException: Invalid CRC for deletion vector"
        ),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_cardinality_is_rejected_by_both_judges() {
    let (t, _, _) = converted("judge_card", "identity", "2").await;
    let b = break_dv(&t, "cardinality");
    let (data_file, held) = (text(&b, "data_file"), number(&b, "cardinality"));
    assert_eq!(number(&b, "record_count"), held + 1, "{b}");
    assert_both_reject(
        &t,
        &format!(
            "for {data_file}: bitmap holds {held} positions, record_count {}",
            held + 1
        ),
        &format!(
            "for {data_file}: Java's delete loader rejects it: IllegalArgumentException: Invalid cardinality: {held}, expected {}",
            held + 1
        ),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dv_for_a_file_that_is_not_live_is_rejected_by_both_judges() {
    let (t, _, _) = converted("judge_ref", "identity", "2").await;
    let b = break_dv(&t, "referenced");
    let named = text(&b, "referenced_data_file");
    assert_ne!(named, text(&b, "data_file"));
    assert_both_reject(
        &t,
        &format!(
            "for {named}: the referenced data file is not live in the snapshot (a dangling DV)"
        ),
        &format!(
            "for {named}: the referenced data file is not live in this snapshot (dangling DV)"
        ),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dv_moved_to_another_data_file_is_rejected_by_both_judges() {
    let (t, _, check) = converted("judge_other", "identity", "2").await;
    assert!(number(&check, "dvs") >= 2, "{check}");
    let b = break_dv(&t, "other-file");
    let named = text(&b, "referenced_data_file");
    assert_ne!(named, text(&b, "data_file"));
    let py = pyiceberg_rejects(&t);
    assert_names(
        "read_table.py",
        &py,
        &format!("for {named}: a second live DV for the data file"),
    );
    let java = java_rejects(&t);
    assert_names(
        "check-dvs",
        &java,
        &format!("for {named}: a second DV for the data file"),
    );
    // Java's own scan planning refuses it too.
    assert_names(
        "check-dvs",
        &java,
        &format!("planning the scan: ValidationException: Can't index multiple DVs for {named}"),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dv_filed_under_another_partition_is_rejected_by_both_judges() {
    let (t, _, _) = converted("judge_part", "identity", "2").await;
    let b = break_dv(&t, "partition");
    let data_file = text(&b, "data_file");
    assert_eq!(text(&b, "referenced_data_file"), data_file);
    let py = pyiceberg_rejects(&t);
    assert_names(
        "read_table.py",
        &py,
        &format!("for {data_file}: spec/partition 0/Record["),
    );
    assert_names("read_table.py", &py, "!= the data file's 0/Record[");
    let java = java_rejects(&t);
    assert_names(
        "check-dvs",
        &java,
        &format!("for {data_file}: partition region="),
    );
    assert_names("check-dvs", &java, "differs from its data file's region=");
    // Java's own scan planning refuses it too.
    assert_names(
        "check-dvs",
        &java,
        "planning the scan: ValidationException: Mismatched partition tuples",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_position_past_the_last_row_is_rejected_by_both_judges() {
    let (t, _, _) = converted("judge_range", "identity", "2").await;
    let b = break_dv(&t, "range");
    let (data_file, rows) = (text(&b, "data_file"), number(&b, "data_file_records"));
    assert_eq!(number(&b, "record_count"), number(&b, "cardinality") + 1);
    assert_both_reject(
        &t,
        &format!("for {data_file}: position {rows} >= the data file's {rows} rows"),
        &format!(
            "for {data_file}: 1 positions at or past the data file's {rows} rows (max {rows})"
        ),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_dv_is_rejected_by_both_judges() {
    let (t, _, _) = converted("judge_empty", "identity", "2").await;
    let b = break_dv(&t, "empty");
    let data_file = text(&b, "data_file");
    assert_eq!(number(&b, "record_count"), 0);
    assert_both_reject(
        &t,
        &format!("for {data_file}: bitmap holds 0 positions, record_count 0"),
        &format!("for {data_file}: an empty DV (no positions)"),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blob_with_a_snapshot_id_is_rejected_by_both_judges() {
    let (t, _, _) = converted("judge_blob", "identity", "2").await;
    let b = break_dv(&t, "blob-metadata");
    let data_file = text(&b, "data_file");
    let ids = format!(
        "{}/{}",
        b["blob_snapshot_id"].as_i64().expect("snapshot id"),
        number(&b, "blob_sequence_number")
    );
    assert_both_reject(
        &t,
        &format!("for {data_file}: blob metadata: snapshot-id/sequence-number {ids} (must be -1)"),
        &format!("for {data_file}: the blob's snapshot-id/sequence-number are {ids} (must be -1)"),
    );
}

/// Java's rows after a DV was dropped: every DV left is valid, and exactly the dropped
/// DV's rows are back.
fn assert_rows_came_back(t: &JavaTable, before: &[String], dropped: &Value) -> Vec<String> {
    let mut back: Vec<String> = dropped["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| r.as_str().expect("row").to_string())
        .collect();
    back.sort();
    assert_eq!(
        back.len() as u64,
        number(dropped, "cardinality"),
        "{dropped}"
    );
    assert!(!back.is_empty());
    let check = t.java_json("check-dvs", &[]);
    assert_eq!(check["equality_delete_files"], 0, "{check}");
    let after = t.dump();
    assert!(
        common::multiset_minus(before, &after).is_empty(),
        "dropping a DV hid rows"
    );
    let returned = common::multiset_minus(&after, before);
    assert_eq!(
        returned, back,
        "Java's rows differ from the pre-conversion rows by other rows than the dropped DV's"
    );
    after
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_dv_brings_its_rows_back_for_both_judges() {
    // One commit of equality deletes on an unpartitioned table: they hit only the first
    // data file, so the conversion writes a single DV, alone in its Puffin file.
    let (t, before, check) = converted("judge_drop", "none", "1").await;
    assert_eq!(number(&check, "dvs"), 1, "{check}");
    let dropped = break_dv(&t, "drop");
    assert_eq!(number(&dropped, "other_dvs_in_its_puffin_file"), 0);
    let after = assert_rows_came_back(&t, &before, &dropped);
    let py = common::pyiceberg_read_glue(&t.name().to_string());
    assert_eq!(py.dv_count, 0);
    assert!(py.rows == after, "PyIceberg and Java read different rows");
    assert_eq!(
        common::multiset_minus(&py.rows, &before).len() as u64,
        number(&dropped, "cardinality"),
        "PyIceberg does not see the dropped DV's rows back"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_dv_whose_puffin_file_lives_on_is_caught_by_read_table() {
    // Several DVs in one Puffin file (eqdv writes one per conversion), in one partition.
    let (t, before, check) = converted("judge_drop_shared", "none", "3").await;
    let dvs = number(&check, "dvs");
    assert!(dvs >= 2, "{check}");
    let dropped = break_dv(&t, "drop");
    assert_eq!(number(&dropped, "other_dvs_in_its_puffin_file"), dvs - 1);
    assert_rows_came_back(&t, &before, &dropped);
    // PyIceberg reads the whole Puffin file for the partition's other DVs and applies the
    // dropped DV's blob too (it matches blobs by their referenced-data-file property, not
    // by live entries): it would return the old rows. read_table.py counts the rows the
    // live DVs leave and refuses.
    let err = common::try_pyiceberg_read_glue(&t.name().to_string())
        .expect_err("read_table.py accepted PyIceberg applying a dropped DV");
    assert_eq!(err.status, Some(1), "{err}");
    let live = before.len() as u64 + number(&dropped, "cardinality");
    assert_names(
        "read_table.py",
        &err.stderr,
        &format!("PyIceberg read {} rows;", before.len()),
    );
    assert_names("read_table.py", &err.stderr, &format!("so {live} are live"));
}
