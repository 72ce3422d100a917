//! Pins the judges: a table written by PyIceberg itself reads, through
//! `pyiceberg/read_table.py` and through DuckDB (`pyiceberg/duckdb_read.py`), as
//! hand-computed canonical rows for every type, and eqdv's own reader gives exactly the
//! same rows. Also pins what PyIceberg 0.12 does with equality deletes (refuses them) and
//! that it cannot write v3 tables, and what DuckDB 1.5.5 does with v2 position and
//! equality deletes (applies them, but misreads rows with a null key column), so an
//! upgrade that changes any of these fails here instead of silently changing what the
//! other tests prove.

mod common;

use std::ffi::OsStr;
use std::path::Path;

use common::{
    PyIcebergView, duckdb_read, duckdb_read_unguarded, pyiceberg_counts, pyiceberg_read,
    run_pyiceberg_script, run_python, try_duckdb_read,
};
use eqdv::catalog::{SqliteCatalog, TableName};
use eqdv::table::LoadedTable;

const TABLE: &str = "db.all_types";

/// Creates `db.all_types` (format v2: PyIceberg 0.12 cannot write v3 metadata) with two
/// appends of two rows each.
const CREATE_ALL_TYPES: &str = r#"
import datetime as dt, decimal, sys, uuid
import pyarrow as pa
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.schema import Schema
from pyiceberg.types import (BinaryType, BooleanType, DateType, DecimalType, DoubleType, FixedType,
    FloatType, IntegerType, LongType, NestedField, StringType, TimestampType, TimestamptzType,
    TimeType, UUIDType)

wh = sys.argv[1]
catalog = SqlCatalog("eqdv", uri=f"sqlite:///{wh}/catalog.db", warehouse=f"file://{wh}")
catalog.create_namespace_if_not_exists("db")
types = [("i", IntegerType()), ("l", LongType()), ("b", BooleanType()), ("s", StringType()),
         ("bin", BinaryType()), ("fx", FixedType(4)), ("u", UUIDType()), ("dec", DecimalType(9, 2)),
         ("big", DecimalType(38, 10)), ("d", DateType()), ("t", TimeType()), ("ts", TimestampType()),
         ("tstz", TimestamptzType()), ("f", FloatType()), ("db", DoubleType())]
schema = Schema(NestedField(1, "id", LongType(), required=True),
                *[NestedField(i + 2, n, t, required=False) for i, (n, t) in enumerate(types)])
table = catalog.create_table("db.all_types", schema)
utc = dt.timezone.utc
D = decimal.Decimal
rows = [
    dict(id=1, i=-2147483648, l=9223372036854775807, b=True, s='zürich "q" \\ ☃', bin=b"\x00\xff\x10",
         fx=b"\xde\xad\xbe\xef", u=uuid.UUID("01234567-89AB-CDEF-0011-223344556677"), dec=D("12.5"),
         big=D("1234567890123456789012345678.0123456789"), d=dt.date(1969, 12, 31), t=dt.time(0, 0, 1),
         ts=dt.datetime(1970, 1, 1, 0, 0, 0, 1), tstz=dt.datetime(2024, 1, 1, tzinfo=utc), f=0.1, db=1e-7),
    dict(id=2, i=7, l=-9223372036854775808, b=False, s="line\nbreak\ttab\x01", bin=b"", fx=b"\0\0\0\0",
         u=uuid.UUID("FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF"), dec=D("-0.07"), big=D("-1E-10"),
         d=dt.date(2024, 2, 29), t=dt.time(23, 59, 59, 999999), ts=dt.datetime(1969, 12, 31, 23, 59, 59, 999999),
         tstz=dt.datetime(1900, 1, 1, tzinfo=utc), f=float("nan"), db=-0.0),
    dict(id=3, i=0, l=0, s="", dec=D("0"), big=D("-9999999999999999999999999999.9999999999"),
         f=float("-inf"), db=1e16),
    dict(id=4, f=float("inf"), db=1e-05),
]
arrow = table.schema().as_arrow()
table.append(pa.Table.from_pylist(rows[:2], schema=arrow))
table.append(pa.Table.from_pylist(rows[2:], schema=arrow))
print(table.metadata.format_version)
"#;

/// The rows of `db.all_types` in canonical form, computed by hand (sorted).
const EXPECTED_ROWS: [&str; 4] = [
    r#"[1,-2147483648,9223372036854775807,true,"zürich \"q\" \\ ☃","00ff10","deadbeef","01234567-89ab-cdef-0011-223344556677","12.50","1234567890123456789012345678.0123456789",-1,1000000,1,1704067200000000,0.10000000149011612,1e-7]"#,
    r#"[2,7,-9223372036854775808,false,"line\nbreak\ttab\u0001","","00000000","ffffffff-ffff-ffff-ffff-ffffffffffff","-0.07","-0.0000000001",19782,86399999999,-1,-2208988800000000,"NaN",-0.0]"#,
    r#"[3,0,0,null,"",null,null,null,"0.00","-9999999999999999999999999999.9999999999",null,null,null,null,"-Infinity",1e+16]"#,
    "[4,null,null,null,null,null,null,null,null,null,null,null,null,null,\"Infinity\",0.00001]",
];

fn create_all_types(warehouse: &Path) {
    let version = run_python(CREATE_ALL_TYPES, &[warehouse.as_os_str()]);
    assert_eq!(version.trim(), "2", "PyIceberg created a v{version} table");
}

async fn rust_rows(warehouse: &Path, table: &str) -> Vec<String> {
    let catalog = SqliteCatalog::open_warehouse(warehouse).expect("open the SQLite catalog");
    let name = TableName::parse(table).expect("table name");
    let loaded = LoadedTable::load(&catalog, &name)
        .await
        .expect("load the table with eqdv");
    eqdv_workload::read::read_canonical(&loaded, "main")
        .await
        .expect("read the table with eqdv")
}

fn expected(ids: &[usize]) -> Vec<String> {
    ids.iter()
        .map(|&i| EXPECTED_ROWS[i - 1].to_string())
        .collect()
}

#[tokio::test]
async fn canonical_rows_of_every_type_match_on_both_sides() {
    let dir = tempfile::tempdir().unwrap();
    create_all_types(dir.path());

    let view = pyiceberg_read(dir.path(), TABLE);
    assert_eq!(view.rows, expected(&[1, 2, 3, 4]), "PyIceberg side");
    assert_eq!(
        (
            view.equality_delete_files,
            view.dv_count,
            view.position_delete_files
        ),
        (0, 0, 0)
    );
    assert_eq!(view.data_files, 2);
    assert_eq!(view.format_version, 2);
    assert!(view.snapshot_id.is_some());

    assert_eq!(
        rust_rows(dir.path(), TABLE).await,
        view.rows,
        "eqdv::read and PyIceberg disagree on the canonical rows"
    );
}

#[tokio::test]
async fn duckdb_reads_every_type_as_pyiceberg_does() {
    let dir = tempfile::tempdir().unwrap();
    create_all_types(dir.path());
    assert_eq!(
        duckdb_read(dir.path(), TABLE),
        expected(&[1, 2, 3, 4]),
        "DuckDB side"
    );
}

/// Runs a tests/pyiceberg fixture that commits a delete file to `db.all_types`.
fn add_delete(warehouse: &Path, script: &str, rows_flag: &str, rows: &str) {
    run_pyiceberg_script(
        script,
        &[
            OsStr::new("--warehouse"),
            warehouse.as_os_str(),
            OsStr::new("--table"),
            OsStr::new(TABLE),
            OsStr::new(rows_flag),
            OsStr::new(rows),
        ],
    );
}

#[tokio::test]
async fn duckdb_applies_v2_position_and_equality_deletes() {
    let dir = tempfile::tempdir().unwrap();
    create_all_types(dir.path());
    // Rows 1 and 4 are in different data files.
    add_delete(
        dir.path(),
        "add_position_delete.py",
        "--rows",
        r#"[{"id": 1}, {"id": 4}]"#,
    );
    let view = pyiceberg_read(dir.path(), TABLE);
    assert_eq!(view.position_delete_files, 1);
    assert_eq!(view.rows, expected(&[2, 3]), "PyIceberg side");
    assert_eq!(duckdb_read(dir.path(), TABLE), view.rows, "DuckDB side");

    add_delete(
        dir.path(),
        "add_equality_delete.py",
        "--keys",
        r#"[{"id": 2}]"#,
    );
    assert_eq!(
        duckdb_read(dir.path(), TABLE),
        expected(&[3]),
        "DuckDB side"
    );
    assert_eq!(rust_rows(dir.path(), TABLE).await, expected(&[3]));
}

/// DuckDB 1.5.5 compares equality keys with SQL NULL semantics: row 3 (b null) does not
/// match the delete row (id 3, b true), yet DuckDB drops it. duckdb_read.py refuses such
/// a table; this pins both the refusal and DuckDB's wrong answer, so a DuckDB that fixes
/// it fails here and the refusal can be narrowed.
#[tokio::test]
async fn duckdb_drops_rows_with_a_null_key_column_so_the_reader_refuses() {
    let dir = tempfile::tempdir().unwrap();
    create_all_types(dir.path());
    add_delete(
        dir.path(),
        "add_equality_delete.py",
        "--keys",
        r#"[{"id": 3, "b": true}]"#,
    );
    assert_eq!(
        rust_rows(dir.path(), TABLE).await,
        expected(&[1, 2, 3, 4]),
        "eqdv: the delete matches no row"
    );
    let err = try_duckdb_read(dir.path(), TABLE)
        .expect_err("duckdb_read.py must refuse a null in an equality column");
    assert_eq!(err.status, Some(3), "{err}");
    assert!(
        err.stderr
            .contains("may hold nulls in equality column(s) b"),
        "{err}"
    );
    assert_eq!(
        duckdb_read_unguarded(dir.path(), TABLE),
        expected(&[1, 2, 4]),
        "DuckDB no longer drops row 3: narrow duckdb_read.py's null-key refusal"
    );
}

#[tokio::test]
async fn equality_deletes_are_refused_not_ignored() {
    let dir = tempfile::tempdir().unwrap();
    create_all_types(dir.path());
    let before: PyIcebergView = pyiceberg_read(dir.path(), TABLE);
    run_pyiceberg_script(
        "add_equality_delete.py",
        &[
            OsStr::new("--warehouse"),
            dir.path().as_os_str(),
            OsStr::new("--table"),
            OsStr::new(TABLE),
            OsStr::new("--keys"),
            OsStr::new(r#"[{"id": 2}, {"id": 4}]"#),
        ],
    );

    // PyIceberg itself raises rather than returning rows with the deletes ignored.
    let raised = run_python(
        r#"
import sys
from pyiceberg.catalog.sql import SqlCatalog
wh = sys.argv[1]
table = SqlCatalog("eqdv", uri=f"sqlite:///{wh}/catalog.db", warehouse=f"file://{wh}").load_table("db.all_types")
try:
    print("read", table.scan().to_arrow().num_rows, "rows")
except ValueError as e:
    print("ValueError:", e)
"#,
        &[dir.path().as_os_str()],
    );
    assert!(
        raised.starts_with("ValueError: PyIceberg does not yet support equality deletes"),
        "PyIceberg no longer refuses equality deletes; update read_table.py's docstring: {raised}"
    );

    // read_table.py refuses before PyIceberg is asked, with its own status and message.
    let err = common::try_pyiceberg_read(dir.path(), TABLE, "main")
        .expect_err("read_table.py must refuse a snapshot with live equality deletes");
    assert_eq!(err.status, Some(3), "{err}");
    assert!(
        err.stderr.contains("1 live equality delete file(s)"),
        "{err}"
    );

    let counts = pyiceberg_counts(dir.path(), TABLE);
    assert_eq!(counts.equality_delete_files, 1);
    assert_eq!((counts.dv_count, counts.position_delete_files), (0, 0));
    assert_eq!(counts.data_files, 2);
    assert_ne!(counts.snapshot_id, before.snapshot_id);

    // eqdv's reader applies the equality delete to PyIceberg-written data.
    assert_eq!(rust_rows(dir.path(), TABLE).await, expected(&[1, 3]));
}

#[test]
fn read_table_names_a_missing_table() {
    let dir = tempfile::tempdir().unwrap();
    create_all_types(dir.path());
    let err = common::try_pyiceberg_read(dir.path(), "db.missing", "main").unwrap_err();
    assert_eq!(err.status, Some(1), "{err}");
    assert!(err.stderr.contains("no table db.missing"), "{err}");
    let err = common::try_pyiceberg_read(dir.path(), TABLE, "nope").unwrap_err();
    assert!(err.stderr.contains("no branch 'nope'"), "{err}");
}

#[test]
fn pyiceberg_cannot_write_v3_tables() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_python(
        r#"
import sys
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField
wh = sys.argv[1]
catalog = SqlCatalog("eqdv", uri=f"sqlite:///{wh}/catalog.db", warehouse=f"file://{wh}")
catalog.create_namespace("db")
try:
    t = catalog.create_table("db.v3", Schema(NestedField(1, "id", LongType())), properties={"format-version": "3"})
    print("created v", t.metadata.format_version)
except NotImplementedError as e:
    print("NotImplementedError:", e)
"#,
        &[dir.path().as_os_str()],
    );
    assert!(
        out.starts_with("NotImplementedError: Writing V3 is not yet supported"),
        "PyIceberg's v3 support changed; update read_table.py's docstring and use it: {out}"
    );
}
