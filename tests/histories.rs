//! Java-written v3 tables with real histories (tests/interop's `write-history`): files
//! without Parquet field ids read through a name mapping, a key column added later with
//! an initial default, an identity partition column promoted int -> long, a key column
//! renamed, promoted or widened, partition spec evolution with global deletes, an
//! equality field dropped after its deletes were written, and deletes in a few of many
//! partitions whose data manifests each hold one partition.
//!
//! Each convertible case: Java writes, Java dumps (with the row lineage columns) before,
//! eqdv converts, Java dumps after. The dumps must be equal as multisets (a lost delete
//! leaves a duplicate key behind, so nothing is deduplicated), Java's DV loader must
//! accept every DV with no equality delete left live, and PyIceberg (no lineage columns)
//! must read the same rows, and so must DuckDB, after the conversion and, where it can,
//! before it (with the equality deletes; where it cannot, its reader must refuse, and
//! the case pins why). The cases eqdv cannot convert correctly must be refused:
//! an error naming the file or field, the pointer unchanged, Java's rows unchanged and no
//! new object under the table's prefix. The expected rows are always Java's own dump
//! before the conversion. Needs the test services and the interop jar (`tests/run`).

mod common;

// Each test binary uses only some of the Java helpers.
use eqdv_test_support::java;
use std::collections::BTreeSet;

use eqdv::catalog::Catalog;
use eqdv::cleanup::list_files;
use eqdv::convert::{ConvertOptions, ConvertReport, Outcome, convert};
use eqdv::table::{LoadedTable, TableFiles};
use java::JavaTable;
use serde_json::Value;

/// Rows per history: small, so that a case takes seconds.
const ROWS: &str = "400";
const SEED: &str = "7";

/// A new table with the history `case`, and write-history's JSON report.
fn write_history(case: &str) -> (JavaTable, Value) {
    let t = JavaTable::new(&format!("hist_{}", case.replace('-', "_")));
    let written = t.java_json(
        "write-history",
        &["--case", case, "--seed", SEED, "--rows", ROWS],
    );
    eprintln!("{case}: Java wrote {written}");
    assert!(
        written["equality_delete_files"].as_u64().unwrap_or(0) > 0,
        "{written}"
    );
    (t, written)
}

/// Java's dump with `_row_id` and `_last_updated_sequence_number` at the end of each row,
/// as a multiset (sorted, duplicates kept).
fn dump_lineage(t: &JavaTable) -> Vec<String> {
    let mut rows: Vec<String> = t
        .java("dump", &["--lineage"])
        .lines()
        .map(str::to_string)
        .collect();
    rows.sort();
    common::record_read("java");
    rows
}

/// The rows without their two lineage columns, sorted: the canonical form of the table's
/// own columns (what `dump` without `--lineage` and PyIceberg print; serde_json prints the
/// canonical form, so re-serialising keeps every value's text).
fn without_lineage(rows: &[String]) -> Vec<String> {
    let mut out: Vec<String> = rows
        .iter()
        .map(|row| {
            let mut values: Vec<Value> = serde_json::from_str(row).expect("a canonical row");
            assert!(values.len() > 2, "no lineage columns in {row}");
            values.truncate(values.len() - 2);
            serde_json::to_string(&values).expect("json")
        })
        .collect();
    out.sort();
    out
}

/// Panics unless `after` equals `before` as a multiset, saying how many rows came back or
/// were lost.
fn assert_same_rows(case: &str, before: &[String], after: &[String], also: &str) {
    if before == after {
        return;
    }
    let came_back = common::multiset_minus(after, before);
    let lost = common::multiset_minus(before, after);
    panic!(
        "{case}: Java reads {} rows before the conversion, {} after: {} rows came back \
         (deleted rows live again), {} rows lost ({also}); first back: {:?}; first lost: {:?}",
        before.len(),
        after.len(),
        came_back.len(),
        lost.len(),
        came_back.iter().take(3).collect::<Vec<_>>(),
        lost.iter().take(3).collect::<Vec<_>>(),
    );
}

async fn live_files(catalog: &dyn Catalog, t: &JavaTable) -> TableFiles {
    let loaded = LoadedTable::load(catalog, &t.name()).await.expect("load");
    let head = loaded.head("main").expect("head");
    TableFiles::read(&loaded, head.as_ref())
        .await
        .expect("files")
}

/// What DuckDB must do with a history's table while its equality deletes are live.
#[derive(Clone, Copy)]
enum DuckDb {
    /// Read Java's rows.
    Reads,
    /// duckdb_read.py refuses (exit status 3) with a message containing this.
    Refuses(&'static str),
}

fn assert_duckdb_refuses(case: &str, t: &JavaTable, why: &str) {
    let err = common::try_duckdb_read_glue(&t.name().to_string())
        .expect_err("duckdb_read.py must refuse a case DuckDB cannot read");
    assert_eq!(err.status, Some(3), "{case}: {err}");
    assert!(err.stderr.contains(why), "{case}: {err}");
}

/// Java writes `case`, eqdv converts it, and Java reads exactly the rows it read before,
/// lineage included; so do PyIceberg and DuckDB (without lineage).
async fn converts_and_java_agrees(case: &str, duckdb_before: DuckDb) -> (JavaTable, ConvertReport) {
    converts_and_java_agrees_duckdb(case, duckdb_before, DuckDb::Reads).await
}

/// [`converts_and_java_agrees`] for a table DuckDB cannot judge after the conversion
/// either.
async fn converts_and_java_agrees_duckdb(
    case: &str,
    duckdb_before: DuckDb,
    duckdb_after: DuckDb,
) -> (JavaTable, ConvertReport) {
    let (t, written) = write_history(case);
    let before = dump_lineage(&t);
    assert_eq!(
        before.len() as u64,
        written["expected_live_rows"].as_u64().unwrap(),
        "{case}: Java's reader disagrees with the writer's own model"
    );
    assert!(
        before.iter().all(|r| !r.ends_with(",null,null]")),
        "{case}: Java's reader left the lineage columns empty"
    );
    match duckdb_before {
        DuckDb::Reads => assert!(
            common::duckdb_read_glue(&t.name().to_string()) == without_lineage(&before),
            "{case}: DuckDB applies the equality deletes differently from Java"
        ),
        DuckDb::Refuses(why) => assert_duckdb_refuses(case, &t, why),
    }
    let catalog = t.catalog().await;
    let report = convert(&catalog, &t.name(), &ConvertOptions::default())
        .await
        .unwrap_or_else(|e| panic!("{case}: convert failed: {e}"));
    eprintln!("{case}: eqdv {report:?}");
    let after = dump_lineage(&t);
    // The second reader, without lineage (PyIceberg's rows are the table's columns); read
    // now so that a failure below can say what it saw too.
    let plain = without_lineage(&after);
    let py = common::try_pyiceberg_read_glue(&t.name().to_string());
    let py_saw = match &py {
        Ok(v) => format!("PyIceberg reads {} rows", v.rows.len()),
        Err(e) => format!("PyIceberg cannot read the table: {e}"),
    };
    assert_same_rows(case, &before, &after, &py_saw);
    assert_eq!(report.outcome, Outcome::Converted, "{case}");

    let check = t.java_json("check-dvs", &[]);
    assert_eq!(check["equality_delete_files"], 0, "{case}: {check}");
    let files = live_files(&catalog, &t).await;
    assert_eq!(
        check["dvs"].as_u64(),
        Some(files.dvs.len() as u64),
        "{case}: {check}"
    );
    assert!(!files.dvs.is_empty(), "{case}: no DV written");
    let py = py.unwrap_or_else(|e| panic!("{case}: {e}"));
    assert!(
        py.rows == plain,
        "{case}: PyIceberg reads {} rows, Java {}",
        py.rows.len(),
        plain.len()
    );
    match duckdb_after {
        DuckDb::Reads => assert!(
            common::duckdb_read_glue(&t.name().to_string()) == plain,
            "{case}: DuckDB reads the converted table differently from Java"
        ),
        DuckDb::Refuses(why) => assert_duckdb_refuses(case, &t, why),
    }
    (t, report)
}

/// What a refused conversion must leave as it was.
struct Untouched {
    pointer: eqdv::catalog::TablePointer,
    objects: BTreeSet<String>,
    java: Result<Vec<String>, String>,
}

async fn untouched(catalog: &dyn Catalog, t: &JavaTable) -> Untouched {
    let loaded = LoadedTable::load(catalog, &t.name()).await.expect("load");
    let objects = list_files(&loaded)
        .await
        .expect("list the table's objects")
        .into_iter()
        .map(|f| f.path)
        .collect();
    let out = t
        .command("dump", &["--lineage"])
        .output()
        .expect("run java dump");
    let java = if out.status.success() {
        Ok(String::from_utf8(out.stdout)
            .expect("utf-8")
            .lines()
            .map(str::to_string)
            .collect())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    };
    Untouched {
        pointer: catalog.load_pointer(&t.name()).await.expect("pointer"),
        objects,
        java,
    }
}

/// `case` must be refused: an error that `names` accepts, and nothing changed. Returns the
/// table.
async fn is_refused(
    case: &str,
    names: impl Fn(&str, &TableFiles) -> Result<(), String>,
) -> JavaTable {
    let (t, _) = write_history(case);
    let catalog = t.catalog().await;
    let before = untouched(&catalog, &t).await;
    let files = live_files(&catalog, &t).await;
    let result = convert(&catalog, &t.name(), &ConvertOptions::default()).await;
    let after = untouched(&catalog, &t).await;
    match result {
        Ok(report) => {
            let rows = |r: &Result<Vec<String>, String>| match r {
                Ok(rows) => format!("{} rows", rows.len()),
                Err(e) => format!("an error ({})", e.trim()),
            };
            panic!(
                "{case}: eqdv did not refuse: outcome {:?}, {} DVs written; Java reads {} before, \
                 {} after",
                report.outcome,
                report.dvs_written,
                rows(&before.java),
                rows(&after.java)
            );
        }
        Err(e) => {
            let text = e.to_string();
            eprintln!("{case}: eqdv refused: {text}");
            if let Err(why) = names(&text, &files) {
                panic!("{case}: the error does not name {why}: {text}");
            }
        }
    }
    assert_eq!(
        after.pointer.metadata_location, before.pointer.metadata_location,
        "{case}: the pointer moved"
    );
    assert_eq!(
        after.pointer.version, before.pointer.version,
        "{case}: the Glue version changed"
    );
    assert!(after.java == before.java, "{case}: Java's rows changed");
    let new: Vec<_> = after.objects.difference(&before.objects).collect();
    assert!(new.is_empty(), "{case}: files left behind: {new:?}");
    t
}

/// `word` occurs in `text` as a whole word (not inside a longer identifier).
fn has_word(text: &str, word: &str) -> bool {
    text.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .any(|w| w == word)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn name_mapping_files_without_field_ids() {
    converts_and_java_agrees("name-mapping", DuckDb::Reads).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_without_field_ids_and_no_name_mapping_are_refused() {
    let t = is_refused("no-name-mapping", |text, files| {
        let imported: Vec<&str> = files
            .data_files
            .iter()
            .map(|d| d.path())
            .filter(|p| p.contains("/imported-"))
            .collect();
        assert!(!imported.is_empty(), "no imported data file is live");
        if !imported.iter().any(|p| text.contains(p)) {
            return Err(format!(
                "a data file without field ids (one of {imported:?})"
            ));
        }
        if !has_word(text, "k") {
            return Err("the equality field k".into());
        }
        Ok(())
    })
    .await;
    // DuckDB reads other rows than Java here (observed: 525 for Java's 390).
    assert_duckdb_refuses(
        "no-name-mapping",
        &t,
        "without Parquet field ids and no schema.name-mapping.default",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_field_added_with_an_initial_default() {
    converts_and_java_agrees(
        "initial-default",
        DuckDb::Refuses("may hold nulls in equality column(s) region"),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identity_partition_column_promoted_int_to_long() {
    converts_and_java_agrees("promote-partition", DuckDb::Reads).await;
}

/// The same with only data before the promotion: every live delete has long tuples.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identity_partition_promoted_with_only_data_before() {
    converts_and_java_agrees("promote-partition-data-only", DuckDb::Reads).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_column_renamed() {
    converts_and_java_agrees("rename-key", DuckDb::Reads).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_column_promoted_int_to_long() {
    converts_and_java_agrees("promote-key", DuckDb::Refuses("whose type was promoted")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decimal_key_widened() {
    converts_and_java_agrees(
        "widen-decimal-key",
        DuckDb::Refuses("whose type was promoted"),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partition_spec_evolution_with_global_deletes() {
    converts_and_java_agrees_duckdb(
        "spec-evolution",
        DuckDb::Refuses("files of partition specs"),
        DuckDb::Refuses("DVs on data files of partition specs"),
    )
    .await;
}

/// Seven partitions (one null), each appended in its own commit, and deletes in two of
/// them: eqdv must not read the data manifests whose partition summaries rule both out
/// (Java's summaries: bounds per partition, a null count), yet convert every delete; and
/// the snapshot totals it writes without those manifests must match a full count.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletes_in_two_of_seven_partitions_read_only_their_data_manifests() {
    let (t, report) = converts_and_java_agrees(
        "partition-clustered",
        DuckDb::Refuses("a table with a null partition value"),
    )
    .await;
    // Partitions 0, 1, 2, 3 and 5 are ruled out by their summaries; the null partition
    // and 4 are read (and so is the first upsert's data manifest).
    assert!(
        report.skipped_data.manifests >= 5,
        "only {} data manifests skipped: {report:?}",
        report.skipped_data.manifests
    );
    let catalog = t.catalog().await;
    let files = live_files(&catalog, &t).await;
    assert!(
        report.skipped_data.files > 0 && report.skipped_data.files < files.data_files.len() as u64
    );
    let loaded = LoadedTable::load(&catalog, &t.name()).await.expect("load");
    let head = loaded.head("main").expect("head").expect("a snapshot");
    let totals = &head.summary().additional_properties;
    let data_bytes: u64 = files
        .data_files
        .iter()
        .map(|f| f.file.file_size_in_bytes())
        .sum();
    let delete_bytes: u64 = files
        .equality_deletes
        .iter()
        .chain(&files.position_deletes)
        .map(|f| f.file.file_size_in_bytes())
        .chain(
            files
                .dvs
                .values()
                .map(|f| f.file.content_size_in_bytes().expect("a DV's blob size") as u64),
        )
        .sum();
    let records: u64 = files.data_files.iter().map(|f| f.file.record_count()).sum();
    for (key, expected) in [
        ("total-data-files", files.data_files.len() as u64),
        ("total-records", records),
        ("total-files-size", data_bytes + delete_bytes),
        (
            "total-delete-files",
            (files.dvs.len() + files.position_deletes.len()) as u64,
        ),
        ("total-equality-deletes", 0),
    ] {
        assert_eq!(
            totals.get(key).map(String::as_str),
            Some(expected.to_string().as_str()),
            "{key} in {totals:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_equality_field_is_refused() {
    let t = is_refused("drop-key", |text, _| {
        // The field is gone from the current schema: named by its last name and its id.
        if text.contains("cannot resolve field tag (id 2)") && text.contains("dropped") {
            Ok(())
        } else {
            Err("the dropped equality field tag (id 2)".into())
        }
    })
    .await;
    assert_duckdb_refuses("drop-key", &t, "keys on field id(s) [2]");
}
