//! PyIceberg and DuckDB as judges: the Python interpreter of the test venv,
//! `tests/pyiceberg/read_table.py` (PyIceberg: reads a table's live rows and checks
//! every DV; see its docstring for what it checks and its exit statuses) and
//! `tests/pyiceberg/duckdb_read.py` (DuckDB's iceberg extension, which also applies
//! equality deletes, and refuses the cases DuckDB is known to misread).
//!
//! A test that needs Python never skips: without `EQDV_PYTHON` it fails and says how to
//! get one (`tests/run` creates the venv and sets it). A silently skipped judge would
//! make every conversion look right.

use std::ffi::OsStr;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde::Deserialize;

/// The Python interpreter with PyIceberg: `$EQDV_PYTHON`.
///
/// # Panics
/// When `EQDV_PYTHON` is unset or does not name a file.
pub fn python() -> PathBuf {
    let Some(path) = std::env::var_os("EQDV_PYTHON") else {
        panic!(
            "EQDV_PYTHON is not set: run the tests with `tests/run` (it creates the venv and sets \
             EQDV_PYTHON), or set EQDV_PYTHON to the python of a venv with \
             `pip install -r tests/pyiceberg/requirements.txt`"
        );
    };
    let path = PathBuf::from(path);
    assert!(
        path.is_file(),
        "EQDV_PYTHON={} is not a file: run `tests/run`, or point it at the python of a venv \
         with tests/pyiceberg/requirements.txt installed",
        path.display()
    );
    path
}

/// The directory with the Python side of the tests (`tests/pyiceberg`) of the checkout
/// under test.
///
/// Found at run time from the package cargo is testing (it sets `CARGO_MANIFEST_DIR` for
/// the test process): a build of this crate from another checkout sharing the target
/// directory must not send the judges to that checkout's scripts. This crate's own
/// location is the fallback.
pub fn pyiceberg_dir() -> PathBuf {
    let scripts = |root: &Path| root.join("tests").join("pyiceberg");
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .and_then(|package| {
            package
                .ancestors()
                .map(scripts)
                .find(|dir| dir.join("read_table.py").is_file())
        })
        // This crate sits in tests/judges, beside tests/pyiceberg.
        .unwrap_or_else(|| {
            Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../pyiceberg")).to_path_buf()
        })
}

/// `tests/pyiceberg/read_table.py`.
pub fn read_table_script() -> PathBuf {
    pyiceberg_dir().join("read_table.py")
}

/// `tests/pyiceberg/duckdb_read.py`.
pub fn duckdb_read_script() -> PathBuf {
    pyiceberg_dir().join("duckdb_read.py")
}

/// What PyIceberg sees at the head of a branch (read_table.py's output).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct PyIcebergView {
    /// Live rows in canonical form, sorted (the same form as `eqdv_workload::read::canonical_rows`).
    pub rows: Vec<String>,
    pub equality_delete_files: usize,
    pub dv_count: usize,
    pub position_delete_files: usize,
    pub data_files: usize,
    pub snapshot_id: Option<i64>,
    pub format_version: u8,
}

/// The file counts of a branch head that may still hold equality deletes (no rows).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct PyIcebergCounts {
    pub equality_delete_files: usize,
    pub dv_count: usize,
    pub position_delete_files: usize,
    pub data_files: usize,
    pub snapshot_id: Option<i64>,
    pub format_version: u8,
}

/// A reader script (read_table.py or duckdb_read.py) exited non-zero.
#[derive(Clone, Debug)]
pub struct ReadTableError {
    /// read_table.py: 3 = live equality deletes, 4 = an invalid DV; duckdb_read.py: 3 = a
    /// case DuckDB is known to misread or fail on; else 1 or 2.
    pub status: Option<i32>,
    pub stderr: String,
    pub command: String,
}

impl fmt::Display for ReadTableError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "`{}` failed (exit status {:?}):\n{}",
            self.command,
            self.status,
            self.stderr.trim_end()
        )
    }
}

impl std::error::Error for ReadTableError {}

/// Reads the head of `main` with PyIceberg.
///
/// # Panics
/// When read_table.py fails (the message holds its stderr), e.g. because the head still
/// has live equality deletes or an invalid DV.
pub fn pyiceberg_read(warehouse: &Path, table: &str) -> PyIcebergView {
    pyiceberg_read_branch(warehouse, table, "main")
}

/// [`pyiceberg_read`] for any branch.
pub fn pyiceberg_read_branch(warehouse: &Path, table: &str, branch: &str) -> PyIcebergView {
    try_pyiceberg_read(warehouse, table, branch).unwrap_or_else(|e| panic!("{e}"))
}

/// Reads the head of `branch` with PyIceberg; an error carries read_table.py's exit status
/// and stderr (for tests that expect a refusal).
pub fn try_pyiceberg_read(
    warehouse: &Path,
    table: &str,
    branch: &str,
) -> Result<PyIcebergView, ReadTableError> {
    let stdout = read_table(warehouse, table, &["--branch", branch])?;
    let view = parse_json(&stdout, "read_table.py");
    crate::record_read("pyiceberg");
    Ok(view)
}

/// Reads the head of `main` of a Glue table (`DATABASE.TABLE`) with PyIceberg's Glue
/// catalog, configured from the AWS_* environment of the test services.
///
/// # Panics
/// When read_table.py fails.
pub fn pyiceberg_read_glue(table: &str) -> PyIcebergView {
    try_pyiceberg_read_glue(table).unwrap_or_else(|e| panic!("{e}"))
}

/// [`pyiceberg_read_glue`], with read_table.py's failure as an error (for tables PyIceberg
/// may not be able to read).
pub fn try_pyiceberg_read_glue(table: &str) -> Result<PyIcebergView, ReadTableError> {
    let stdout = run_script(
        &read_table_script(),
        &["--catalog", "glue", "--table", table].map(OsStr::new),
    )?;
    let view = parse_json(&stdout, "read_table.py --catalog glue");
    crate::record_read("pyiceberg");
    Ok(view)
}

/// Reads the head of `main` of a table (`NS.TABLE`) of the Iceberg REST catalog at
/// `EQDV_REST_URI` with PyIceberg's REST client, its files on S3 (the test services'
/// AWS_* environment).
///
/// # Panics
/// When read_table.py fails.
pub fn pyiceberg_read_rest(table: &str) -> PyIcebergView {
    let stdout = run_script(
        &read_table_script(),
        &["--catalog", "rest", "--table", table].map(OsStr::new),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let view = parse_json(&stdout, "read_table.py --catalog rest");
    crate::record_read("pyiceberg");
    view
}

/// Reads the head of `main` of a table (`NAMESPACE.TABLE`) of the Amazon S3 Tables table
/// bucket `bucket_arn` with PyIceberg (read_table.py `--catalog s3tables`: the table's
/// metadata location from S3 Tables' API at `endpoint`, its files from the S3 there too,
/// as the test services' emulator serves both).
///
/// # Panics
/// When read_table.py fails.
pub fn pyiceberg_read_s3tables(table: &str, bucket_arn: &str, endpoint: &str) -> PyIcebergView {
    let script = read_table_script();
    let args = ["--catalog", "s3tables", "--table", table];
    let mut all: Vec<&OsStr> = vec![script.as_os_str()];
    all.extend(args.iter().map(OsStr::new));
    let output = run_with_env(
        &python(),
        &all,
        &[
            ("EQDV_S3TABLES_BUCKET_ARN", bucket_arn),
            ("AWS_ENDPOINT_URL_S3TABLES", endpoint),
            ("AWS_ENDPOINT_URL_S3", endpoint),
        ],
    );
    let stdout = into_stdout(output, &format!("read_table.py {}", args.join(" ")))
        .unwrap_or_else(|e| panic!("{e}"));
    let view = parse_json(&stdout, "read_table.py --catalog s3tables");
    crate::record_read("pyiceberg");
    view
}

/// The file counts of `main`'s head, allowed to hold equality deletes (no rows read).
///
/// # Panics
/// When read_table.py fails.
pub fn pyiceberg_counts(warehouse: &Path, table: &str) -> PyIcebergCounts {
    let stdout = read_table(warehouse, table, &["--allow-equality-deletes"])
        .unwrap_or_else(|e| panic!("{e}"));
    parse_json(&stdout, "read_table.py --allow-equality-deletes")
}

fn read_table(warehouse: &Path, table: &str, extra: &[&str]) -> Result<String, ReadTableError> {
    let mut args = warehouse_args(warehouse, table);
    args.extend(extra.iter().map(OsStr::new));
    run_script(&read_table_script(), &args)
}

/// `--warehouse DIR --table NS.NAME`, as both reader scripts take them.
fn warehouse_args<'a>(warehouse: &'a Path, table: &'a str) -> Vec<&'a OsStr> {
    vec![
        OsStr::new("--warehouse"),
        warehouse.as_os_str(),
        OsStr::new("--table"),
        OsStr::new(table),
    ]
}

/// What duckdb_read.py prints.
#[derive(Deserialize)]
struct DuckDbView {
    rows: Vec<String>,
    row_count: usize,
}

/// Reads the current snapshot (the head of `main`) with DuckDB: the live rows in
/// canonical form, sorted (the same form as [`pyiceberg_read`]'s).
///
/// # Panics
/// When duckdb_read.py fails (the message holds its stderr), e.g. on a case DuckDB is
/// known to misread (exit status 3).
pub fn duckdb_read(warehouse: &Path, table: &str) -> Vec<String> {
    try_duckdb_read(warehouse, table).unwrap_or_else(|e| panic!("{e}"))
}

/// [`duckdb_read`], with duckdb_read.py's failure as an error (for tests that expect a
/// refusal).
pub fn try_duckdb_read(warehouse: &Path, table: &str) -> Result<Vec<String>, ReadTableError> {
    duckdb(&warehouse_args(warehouse, table))
}

/// [`duckdb_read`] without the refusals duckdb_read.py makes before the scan (null
/// equality keys, files without field ids, dropped equality fields): DuckDB's own answer,
/// wrong where DuckDB is, for the tests that pin what DuckDB does.
pub fn duckdb_read_unguarded(warehouse: &Path, table: &str) -> Vec<String> {
    let mut args = warehouse_args(warehouse, table);
    args.push(OsStr::new("--unguarded"));
    duckdb(&args).unwrap_or_else(|e| panic!("{e}"))
}

/// Reads the head of `main` of a Glue table (`DATABASE.TABLE`) with DuckDB, its files on
/// S3 (endpoint and credentials from the AWS_* environment of the test services).
///
/// # Panics
/// When duckdb_read.py fails.
pub fn duckdb_read_glue(table: &str) -> Vec<String> {
    try_duckdb_read_glue(table).unwrap_or_else(|e| panic!("{e}"))
}

/// [`duckdb_read_glue`], with duckdb_read.py's failure as an error.
pub fn try_duckdb_read_glue(table: &str) -> Result<Vec<String>, ReadTableError> {
    duckdb(&["--catalog", "glue", "--table", table].map(OsStr::new))
}

fn duckdb(args: &[&OsStr]) -> Result<Vec<String>, ReadTableError> {
    let stdout = run_script(&duckdb_read_script(), args)?;
    let view: DuckDbView = parse_json(&stdout, "duckdb_read.py");
    assert_eq!(
        view.row_count,
        view.rows.len(),
        "duckdb_read.py: row_count and rows disagree"
    );
    crate::record_read("duckdb");
    Ok(view.rows)
}

/// Runs a script with the PyIceberg interpreter; its stdout, or its failure.
fn run_script(script: &Path, args: &[&OsStr]) -> Result<String, ReadTableError> {
    let mut all: Vec<&OsStr> = vec![script.as_os_str()];
    all.extend_from_slice(args);
    let output = run(&python(), &all);
    let name = script.file_name().unwrap_or(script.as_os_str());
    let command = std::iter::once(name)
        .chain(args.iter().copied())
        .map(|a| a.to_string_lossy())
        .collect::<Vec<_>>()
        .join(" ");
    into_stdout(output, &command)
}

/// Runs `code` with the PyIceberg interpreter (`python -c code args...`) and returns its
/// stdout.
///
/// # Panics
/// When the interpreter cannot start or exits non-zero (the message holds its stderr).
pub fn run_python(code: &str, args: &[&OsStr]) -> String {
    let mut all: Vec<&OsStr> = vec![OsStr::new("-c"), OsStr::new(code)];
    all.extend_from_slice(args);
    let output = run(&python(), &all);
    into_stdout(output, "python -c <snippet>").unwrap_or_else(|e| panic!("{e}"))
}

/// Runs a script from `tests/pyiceberg` with the PyIceberg interpreter and returns its
/// stdout.
///
/// # Panics
/// When it exits non-zero (the message holds its stderr).
pub fn run_pyiceberg_script(script: &str, args: &[&OsStr]) -> String {
    run_script(&pyiceberg_dir().join(script), args).unwrap_or_else(|e| panic!("{e}"))
}

pub(crate) fn run(program: &Path, args: &[&OsStr]) -> Output {
    run_with_env(program, args, &[])
}

/// [`run`] with `env` set on top of the calling process's environment.
fn run_with_env(program: &Path, args: &[&OsStr], env: &[(&str, &str)]) -> Output {
    Command::new(program)
        .args(args)
        .env("PYTHONUTF8", "1")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .envs(env.iter().copied())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", program.display()))
}

pub(crate) fn into_stdout(output: Output, command: &str) -> Result<String, ReadTableError> {
    if !output.status.success() {
        return Err(ReadTableError {
            status: output.status.code(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
            command: command.to_string(),
        });
    }
    String::from_utf8(output.stdout).map_err(|e| ReadTableError {
        status: output.status.code(),
        stderr: format!("stdout is not UTF-8: {e}"),
        command: command.to_string(),
    })
}

pub(crate) fn parse_json<T: for<'de> Deserialize<'de>>(stdout: &str, what: &str) -> T {
    serde_json::from_str(stdout.trim_end())
        .unwrap_or_else(|e| panic!("{what} printed unexpected JSON ({e}):\n{stdout}"))
}
