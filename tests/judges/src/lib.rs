//! The judges of eqdv's tests: readers that are not eqdv.
//!
//! Every test that converts a table checks the result here, so that a bug shared by
//! eqdv's writer and eqdv's own reader (a position off by one, a partition rule read the
//! same wrong way twice) cannot pass. The judges:
//! - PyIceberg (`tests/pyiceberg/read_table.py`, [`pyiceberg`]): reads the live rows of a
//!   local (SQLite), Glue, REST-catalog or S3 Tables table, refuses live equality
//!   deletes, and checks every DV byte by byte (decoding the bitmaps with pyroaring)
//!   before reading;
//! - DuckDB's iceberg extension (`tests/pyiceberg/duckdb_read.py`): reads equality
//!   deletes and DVs alike, and refuses (exit status 3) the tables DuckDB 1.5.5 is known
//!   to misread;
//! - Iceberg Java (tests/interop's jar, driven from `eqdv_test_support::java`) for
//!   tables Java wrote, or where the shape needs it (equality deletes before a
//!   conversion).
//!
//! Rows are compared as multisets ([`rows`]), and the expected rows come from the
//! generator's model or a judge's dump taken before the step under test.

pub mod pyiceberg;
pub mod record;
pub mod rows;

use std::path::Path;

pub use pyiceberg::*;
pub use record::record_read;
pub use rows::{assert_same_rows, multiset_difference, multiset_minus};

/// Judges a converted local table (`warehouse/catalog.db`, `table` as `NS.NAME`) at the
/// head of `main`: PyIceberg reads exactly `expected` (as a multiset), no equality delete
/// is live, and every DV passes read_table.py's checks (it exits non-zero otherwise,
/// which panics here with its message). DuckDB reads exactly `expected` too, unless
/// duckdb_read.py refuses the table as one DuckDB is known to misread (exit status 3,
/// see its docstring). Returns what PyIceberg saw.
pub fn judge_converted_local(warehouse: &Path, table: &str, expected: &[String]) -> PyIcebergView {
    let view = judge_converted_local_branch(warehouse, table, "main", expected);
    match try_duckdb_read(warehouse, table) {
        Ok(rows) => assert_same_rows(&format!("DuckDB ({table})"), &rows, expected),
        // A known DuckDB limitation, named on stderr: PyIceberg alone judges this table.
        Err(e) if e.status == Some(3) => eprintln!("DuckDB cannot judge {table}: {e}"),
        Err(e) => panic!("{e}"),
    }
    view
}

/// [`judge_converted_local`] at the head of another branch.
pub fn judge_converted_local_branch(
    warehouse: &Path,
    table: &str,
    branch: &str,
    expected: &[String],
) -> PyIcebergView {
    let view = pyiceberg_read_branch(warehouse, table, branch);
    judge_view(&view, &format!("PyIceberg ({table} at {branch})"), expected);
    view
}

/// [`judge_converted_local`] for a Glue table (`DATABASE.TABLE`) on the test services.
pub fn judge_converted_glue(table: &str, expected: &[String]) -> PyIcebergView {
    let view = pyiceberg_read_glue(table);
    judge_view(&view, &format!("PyIceberg (Glue {table})"), expected);
    view
}

/// PyIceberg's verdict on a converted table of the REST catalog at `EQDV_REST_URI`, as
/// [`judge_converted_glue`]'s.
pub fn judge_converted_rest(table: &str, expected: &[String]) -> PyIcebergView {
    let view = pyiceberg_read_rest(table);
    judge_view(&view, &format!("PyIceberg (REST {table})"), expected);
    view
}

/// PyIceberg's verdict on a converted table (`NAMESPACE.TABLE`) of the S3 Tables table
/// bucket `bucket_arn` (through the emulator at `endpoint`), as [`judge_converted_glue`]'s.
pub fn judge_converted_s3tables(
    table: &str,
    bucket_arn: &str,
    endpoint: &str,
    expected: &[String],
) -> PyIcebergView {
    let view = pyiceberg_read_s3tables(table, bucket_arn, endpoint);
    judge_view(&view, &format!("PyIceberg (S3 Tables {table})"), expected);
    view
}

fn judge_view(view: &PyIcebergView, judge: &str, expected: &[String]) {
    assert_eq!(
        view.equality_delete_files, 0,
        "{judge}: equality delete files still live"
    );
    assert_same_rows(judge, &view.rows, expected);
}
