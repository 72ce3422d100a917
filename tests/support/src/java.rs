//! Apache Iceberg Java (tests/interop's jar) as writer and judge of test tables on the
//! test services' Glue and S3 (see `services`).

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use eqdv::catalog::{Catalog, GlueCatalog, GlueConfig, TableName};
use eqdv::convert::{ConvertOptions, Outcome, convert};
use eqdv::table::{LoadedTable, TableFiles};
use serde_json::{Value, json};

use super::services;

pub fn jar() -> PathBuf {
    let jar = std::env::var_os("EQDV_INTEROP_JAR").map(PathBuf::from);
    match jar {
        Some(j) if j.is_file() => j,
        _ => panic!(
            "EQDV_INTEROP_JAR is not set to the interop jar: build it with \
             `tests/interop/build.sh` and export EQDV_INTEROP_JAR (tests/run does both)"
        ),
    }
}

/// One test table: a unique warehouse prefix, database and name, in the test services'
/// Glue catalog, (`rest`) their Iceberg REST catalog or (`s3tables`) a table bucket of
/// their S3 Tables.
#[derive(Clone)]
pub struct JavaTable {
    pub warehouse: String,
    pub database: String,
    pub table: String,
    pub rest: bool,
    /// The ARN of the S3 Tables table bucket the table is in.
    pub s3tables: Option<String>,
}

impl JavaTable {
    pub fn new(test: &str) -> Self {
        let unique = services::unique_name(test);
        Self {
            warehouse: services::unique_warehouse(&unique),
            database: format!("java_{unique}"),
            table: "cdc".into(),
            rest: false,
            s3tables: None,
        }
    }

    /// A table of the test services' Iceberg REST catalog (`EQDV_REST_URI`), which
    /// places its files itself (under s3://warehouse/rest).
    pub fn new_rest(test: &str) -> Self {
        Self {
            rest: true,
            ..Self::new(test)
        }
    }

    /// A table of the S3 Tables table bucket `bucket_arn` (see
    /// [`services::s3tables_bucket`]), which places its files itself.
    pub fn new_s3tables(test: &str, bucket_arn: &str) -> Self {
        Self {
            s3tables: Some(bucket_arn.to_string()),
            ..Self::new(test)
        }
    }

    pub fn name(&self) -> TableName {
        TableName::new(self.database.clone(), self.table.clone())
    }

    pub fn command(&self, sub: &str, extra: &[&str]) -> Command {
        let mut c = Command::new("java");
        c.arg("-jar")
            .arg(jar())
            .arg(sub)
            .args(["--warehouse", &self.warehouse])
            .args(["--database", &self.database])
            .args(["--table", &self.table])
            .args(extra);
        if self.rest {
            c.env("EQDV_INTEROP_CATALOG", "rest");
        }
        if let Some(arn) = &self.s3tables {
            // The emulator serves the table bucket's storage too.
            let endpoint = services::s3tables_endpoint();
            c.env("EQDV_INTEROP_CATALOG", "s3tables")
                .env("EQDV_S3TABLES_BUCKET_ARN", arn)
                .env("AWS_ENDPOINT_URL_S3TABLES", &endpoint)
                .env("AWS_ENDPOINT_URL_S3", &endpoint);
        }
        c
    }

    /// Runs a Java subcommand and returns its stdout; panics with stderr on failure.
    pub fn java(&self, sub: &str, extra: &[&str]) -> String {
        let out = self.command(sub, extra).output().expect("run java");
        assert!(
            out.status.success(),
            "java {sub} {extra:?} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("utf-8 output")
    }

    pub fn java_json(&self, sub: &str, extra: &[&str]) -> Value {
        let out = self.java(sub, extra);
        serde_json::from_str(out.trim())
            .unwrap_or_else(|e| panic!("java {sub}: not JSON ({e}): {out}"))
    }

    /// A CDC history written by Java (`write-cdc`: `commits` commits of upserts and
    /// deletes over `rows` rows keyed by `key`, partitioned by `partition`), which must
    /// have left equality deletes to convert. Returns write-cdc's report.
    pub fn write_cdc(
        &self,
        seed: &str,
        commits: &str,
        rows: &str,
        key: &str,
        partition: &str,
    ) -> Value {
        self.write_cdc_with(seed, commits, rows, key, partition, &[])
    }

    /// [`Self::write_cdc`] with more of write-cdc's options (e.g. `--bloom-filters`).
    pub fn write_cdc_with(
        &self,
        seed: &str,
        commits: &str,
        rows: &str,
        key: &str,
        partition: &str,
        options: &[&str],
    ) -> Value {
        let mut args = vec![
            "--seed",
            seed,
            "--commits",
            commits,
            "--rows",
            rows,
            "--key",
            key,
            "--partition",
            partition,
        ];
        args.extend_from_slice(options);
        let written = self.java_json("write-cdc", &args);
        assert!(
            written["equality_delete_files"]
                .as_u64()
                .is_some_and(|n| n > 0),
            "{written}"
        );
        written
    }

    /// Java's canonical dump: one row per line, sorted.
    pub fn dump(&self) -> Vec<String> {
        let rows = self.java("dump", &[]).lines().map(str::to_string).collect();
        eqdv_judges::record_read("java");
        rows
    }

    /// The Java handle of any table on the test services' Glue (Java reads a table it
    /// did not write as well as its own).
    pub fn of(warehouse: &str, name: &TableName) -> Self {
        Self {
            warehouse: warehouse.to_string(),
            database: name.namespace.clone(),
            table: name.name.clone(),
            rest: false,
            s3tables: None,
        }
    }

    /// The judges' verdict on a converted table: Java's reader reads exactly `expected`
    /// (as a multiset), Java's `check-dvs` loads every DV through Java's own DV reader
    /// and finds no live equality delete, and PyIceberg reads the same rows and accepts
    /// every DV. Returns check-dvs' report.
    pub fn assert_converted(&self, expected: &[String]) -> Value {
        eqdv_judges::assert_same_rows("Iceberg Java", &self.dump(), expected);
        let check = self.java_json("check-dvs", &[]);
        assert_eq!(check["equality_delete_files"], 0, "Java: {check}");
        if self.rest {
            eqdv_judges::judge_converted_rest(&self.name().to_string(), expected);
        } else if let Some(arn) = &self.s3tables {
            let endpoint = services::s3tables_endpoint();
            eqdv_judges::judge_converted_s3tables(
                &self.name().to_string(),
                arn,
                &endpoint,
                expected,
            );
        } else {
            eqdv_judges::judge_converted_glue(&self.name().to_string(), expected);
        }
        check
    }

    /// The judges' verdict on a table that must still read `expected` with its equality
    /// deletes live (a conversion that failed and changed nothing): only Java applies
    /// equality deletes (PyIceberg refuses them).
    pub fn assert_unconverted(&self, expected: &[String]) {
        eqdv_judges::assert_same_rows("Iceberg Java", &self.dump(), expected);
        let check = self.java_json("check-dvs", &[]);
        assert_ne!(
            check["equality_delete_files"], 0,
            "Java: the equality deletes are gone: {check}"
        );
    }

    /// The table's catalog as eqdv connects to it.
    pub async fn eqdv_catalog(&self) -> Box<dyn Catalog> {
        if self.rest {
            Box::new(services::rest_catalog().await)
        } else if let Some(arn) = &self.s3tables {
            Box::new(services::s3tables_catalog(arn).await)
        } else {
            Box::new(self.catalog().await)
        }
    }

    pub async fn catalog(&self) -> GlueCatalog {
        GlueCatalog::connect(GlueConfig {
            warehouse: Some(self.warehouse.clone()),
            ..Default::default()
        })
        .await
        .expect("glue catalog")
    }
}

/// After a conversion of `t` through `catalog`: the judges' verdict
/// ([`JavaTable::assert_converted`]: Java and PyIceberg read `expected` and accept every
/// DV, no equality delete is live), Java loads as many DVs as the table lists, and
/// eqdv's reader reads `expected` too.
pub async fn assert_java_agrees(t: &JavaTable, catalog: &dyn Catalog, expected: &[String]) {
    let check = t.assert_converted(expected);
    let table = LoadedTable::load(catalog, &t.name()).await.expect("load");
    let head = table.head("main").expect("head");
    let files = TableFiles::read(&table, head.as_ref())
        .await
        .expect("live files");
    assert_eq!(
        check["dvs"].as_u64(),
        Some(files.dvs.len() as u64),
        "{check}"
    );
    let rows = eqdv_workload::read::read_canonical(&table, "main")
        .await
        .expect("eqdv's reader");
    eqdv_judges::assert_same_rows("eqdv's reader", &rows, expected);
}

/// What [`convert_beside_a_java_writer`] saw.
#[derive(Debug)]
pub struct BesideAWriter {
    /// Conversions that landed while the writer ran.
    pub converted: u32,
    pub conflicts: u32,
    pub commit_attempts: u32,
    /// The writer's report.
    pub writer: Value,
}

/// Converts `t` again and again while Java's `concurrent-writer` commits appends and
/// equality deletes to it for `seconds`. Every conversion must end cleanly, at least
/// one must land, and the writer must succeed with no failed commit.
pub async fn convert_beside_a_java_writer(
    t: &JavaTable,
    catalog: &dyn Catalog,
    seconds: u64,
) -> BesideAWriter {
    let writer = t
        .command(
            "concurrent-writer",
            &[
                "--seconds",
                &seconds.to_string(),
                "--seed",
                "9",
                "--rows",
                "20",
            ],
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the Java writer");
    let (mut converted, mut conflicts, mut commit_attempts) = (0, 0, 0);
    let started = std::time::Instant::now();
    while started.elapsed() < std::time::Duration::from_secs(seconds.saturating_sub(1)) {
        let r = convert(catalog, &t.name(), &ConvertOptions::default())
            .await
            .expect("a conversion racing a Java writer must end cleanly");
        if r.outcome == Outcome::Converted {
            converted += 1;
        }
        conflicts += r.conflicts;
        commit_attempts += r.commit_attempts;
    }
    let out = writer.wait_with_output().expect("Java writer");
    assert!(
        out.status.success(),
        "Java writer failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stats: Value = serde_json::from_slice(&out.stdout).expect("writer JSON");
    let run = BesideAWriter {
        converted,
        conflicts,
        commit_attempts,
        writer: stats,
    };
    eprintln!("{run:?}");
    assert!(
        run.converted > 0,
        "no conversion landed while the writer ran"
    );
    assert_eq!(run.writer["failed_commits"], 0, "{run:?}");
    run
}

/// Every key (a canonical row's first column) is live at most once in `rows`: a row
/// deleted by an equality delete did not come back beside its update.
pub fn assert_keys_unique(rows: &[String]) {
    let mut keys: Vec<String> = rows
        .iter()
        .map(|row| serde_json::from_str::<Vec<Value>>(row).expect("row")[0].to_string())
        .collect();
    let total = keys.len();
    keys.sort();
    keys.dedup();
    assert_eq!(
        keys.len(),
        total,
        "a key is live twice: a deleted row came back"
    );
}

/// One `serve` JVM on one table: one JSON command per line in, one answer per line out
/// (see tests/interop's Serve.java).
pub struct JavaServer {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl JavaServer {
    pub fn start(t: &JavaTable) -> Self {
        let mut c = t.command("serve", &[]);
        c.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let mut child = c.spawn().expect("start java serve");
        let stdin = child.stdin.take().expect("serve's stdin");
        let stdout = BufReader::new(child.stdout.take().expect("serve's stdout"));
        Self {
            child,
            stdin,
            stdout,
        }
    }

    /// Sends one command; the answer, `Err(error)` when Java says `ok: false`.
    pub fn call(&mut self, cmd: Value) -> Result<Value, String> {
        writeln!(self.stdin, "{cmd}").expect("write to java serve");
        self.stdin.flush().expect("flush java serve's stdin");
        let mut line = String::new();
        let n = self.stdout.read_line(&mut line).expect("read java serve");
        assert!(n > 0, "java serve exited after {cmd}");
        let v: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("java serve: not JSON ({e}): {line}"));
        if v["ok"] == true {
            Ok(v)
        } else {
            Err(v["error"].as_str().unwrap_or("?").to_string())
        }
    }

    /// Java's live rows of `branch`, lineage columns included, sorted.
    pub fn dump(&mut self, branch: &str) -> Result<Vec<String>, String> {
        self.dump_rows(branch, true)
    }

    /// Java's live rows of `branch`, with the lineage columns or without, sorted.
    pub fn dump_rows(&mut self, branch: &str, lineage: bool) -> Result<Vec<String>, String> {
        let v = self.call(json!({"op": "dump", "branch": branch, "lineage": lineage}))?;
        eqdv_judges::record_read("java");
        let mut rows: Vec<String> = v["rows"]
            .as_array()
            .map(|rows| {
                rows.iter()
                    .filter_map(|r| r.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        rows.sort();
        Ok(rows)
    }

    /// The table's branches.
    pub fn branches(&mut self) -> Vec<String> {
        let v = self
            .call(json!({"op": "branches"}))
            .unwrap_or_else(|e| panic!("java branches: {e}"));
        v["branches"]
            .as_array()
            .map(|b| {
                b.iter()
                    .filter_map(|b| b.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    }
}

impl Drop for JavaServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
