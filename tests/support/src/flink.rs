//! Apache Flink's Iceberg sink in upsert mode (tests/flink's jar) as a writer of test
//! tables on the test services' Glue and S3, for the same [`JavaTable`] handles the
//! interop jar reads.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

use super::java::JavaTable;

/// The Flink writer's jar, from `EQDV_FLINK_JAR`.
pub fn jar() -> PathBuf {
    let jar = std::env::var_os("EQDV_FLINK_JAR").map(PathBuf::from);
    match jar {
        Some(j) if j.is_file() => j,
        _ => panic!(
            "EQDV_FLINK_JAR is not set to the Flink writer's jar: build it with \
             `tests/flink/build.sh` and export EQDV_FLINK_JAR (tests/run does both)"
        ),
    }
}

/// What one `write-flink` run reported: the writer's model of the branch's live rows
/// (canonical, sorted) and what its commits added.
#[derive(Debug)]
pub struct FlinkWrite {
    pub report: Value,
    pub rows: Vec<String>,
}

impl FlinkWrite {
    fn count(&self, field: &str) -> u64 {
        self.report[field]
            .as_u64()
            .unwrap_or_else(|| panic!("write-flink reported no {field}: {}", self.report))
    }

    /// The snapshots the run committed to its branch.
    pub fn commits(&self) -> u64 {
        self.count("commits")
    }

    pub fn equality_delete_files(&self) -> u64 {
        self.count("equality_delete_files")
    }

    pub fn dvs(&self) -> u64 {
        self.count("dvs")
    }

    pub fn position_delete_files(&self) -> u64 {
        self.count("position_delete_files")
    }

    /// The report without its rows, for messages.
    pub fn summary(&self) -> String {
        let mut r = self.report.clone();
        if let Some(o) = r.as_object_mut() {
            o.remove("rows");
        }
        r.to_string()
    }
}

/// Runs `write-flink` on `t`: `checkpoints` checkpoints of the changelog of `seed`
/// committed by Flink's upsert sink to `branch`; `create` creates the v3 table first with
/// that partitioning (`none`, `identity` or `bucket`), otherwise the changelog continues
/// from the branch's rows. Panics with Flink's stderr when the run fails.
pub fn write_flink(
    t: &JavaTable,
    seed: u64,
    checkpoints: u32,
    branch: &str,
    create: Option<&str>,
) -> FlinkWrite {
    let mut c = Command::new("java");
    // A run is a few seconds of work: the client compiler alone and the serial collector
    // halve its CPU time (the tests run beside each other on two cores).
    c.args(["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-jar"])
        .arg(jar())
        .arg("write-flink")
        .args(["--warehouse", &t.warehouse])
        .args(["--database", &t.database])
        .args(["--table", &t.table])
        .args(["--seed", &seed.to_string()])
        .args(["--checkpoints", &checkpoints.to_string()])
        .args(["--branch", branch]);
    if let Some(partition) = create {
        c.args(["--create", "--partition", partition]);
    }
    let out = c.output().expect("run java -jar eqdv-flink.jar");
    assert!(
        out.status.success(),
        "write-flink on {} (seed {seed}, branch {branch}) failed ({}): {}",
        t.name(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report: Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("write-flink: not JSON ({e}): {stdout}"));
    let mut rows: Vec<String> = report["rows"]
        .as_array()
        .unwrap_or_else(|| panic!("write-flink reported no rows: {report}"))
        .iter()
        .map(|r| r.as_str().expect("a canonical row").to_string())
        .collect();
    rows.sort();
    FlinkWrite { report, rows }
}
