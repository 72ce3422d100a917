//! DuckDB as the demo's reader other than eqdv's, where one is at hand: a Python with
//! duckdb and its iceberg and avro extension wheels (`EQDV_PYTHON`, else `python3`).
//! It reads the table before the conversion (equality deletes) and after it (DVs).

use std::process::Command;

use serde::Serialize;

/// The script, run with `python -c`: it ships inside the binary.
const SCRIPT: &str = include_str!("duckdb_read_times.py");
/// Most reads of each table; the fastest counts (the first also warms the page cache).
/// A read over a second is not repeated.
pub const READS: u32 = 3;
/// What a user installs for it (the wheels are built for one DuckDB version each).
pub const INSTALL: &str =
    "pip install duckdb==1.5.5 duckdb-extension-iceberg==1.5.5 duckdb-extension-avro==1.5.5";

/// What DuckDB did with the table before and after.
#[derive(Debug, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum DuckDbReads {
    /// Both read, with the live rows eqdv and the generator's model agree on.
    Timed {
        version: String,
        seconds_with_equality_deletes: f64,
        seconds_with_dvs: f64,
    },
    /// Read, but other rows than the model's: DuckDB misreads this table (as it does
    /// with null keys, for one), so its times say nothing.
    Misread {
        version: String,
        rows_with_equality_deletes: u64,
        rows_with_dvs: u64,
    },
    /// No DuckDB here (the reason), or it failed (its one-line error).
    NotAtHand {
        reason: String,
    },
    Failed {
        reason: String,
    },
}

#[derive(serde::Deserialize)]
struct ScriptOutput {
    duckdb: String,
    reads: Vec<TimedRead>,
}

#[derive(serde::Deserialize)]
struct TimedRead {
    rows: u64,
    seconds: f64,
}

/// The Python the demo runs DuckDB with: `EQDV_PYTHON`, else `python3`.
pub fn python() -> String {
    std::env::var("EQDV_PYTHON").unwrap_or_else(|_| "python3".into())
}

/// Times DuckDB (run by `python`) reading the table at metadata file `before` and at
/// `after`; `live_rows` is what both must hold.
pub fn time_reads(python: &str, before: &str, after: &str, live_rows: u64) -> DuckDbReads {
    let output = Command::new(python)
        .arg("-c")
        .arg(SCRIPT)
        .arg(READS.to_string())
        .arg(local_path(before))
        .arg(local_path(after))
        .output();
    let output = match output {
        Ok(output) => output,
        Err(e) => {
            return DuckDbReads::NotAtHand {
                reason: format!("cannot run {python}: {e}"),
            };
        }
    };
    let stderr = String::from_utf8_lossy(&output.stderr);
    let reason = stderr.lines().last().unwrap_or("no message").to_string();
    match output.status.code() {
        Some(0) => {}
        Some(3) => return DuckDbReads::NotAtHand { reason },
        _ => return DuckDbReads::Failed { reason },
    }
    let parsed: ScriptOutput = match serde_json::from_slice(&output.stdout) {
        Ok(parsed) => parsed,
        Err(e) => {
            return DuckDbReads::Failed {
                reason: format!("unreadable output of the DuckDB script: {e}"),
            };
        }
    };
    let [with_deletes, with_dvs] = parsed.reads.as_slice() else {
        return DuckDbReads::Failed {
            reason: format!(
                "the DuckDB script timed {} reads, not 2",
                parsed.reads.len()
            ),
        };
    };
    if with_deletes.rows != live_rows || with_dvs.rows != live_rows {
        return DuckDbReads::Misread {
            version: parsed.duckdb,
            rows_with_equality_deletes: with_deletes.rows,
            rows_with_dvs: with_dvs.rows,
        };
    }
    DuckDbReads::Timed {
        version: parsed.duckdb,
        seconds_with_equality_deletes: with_deletes.seconds,
        seconds_with_dvs: with_dvs.seconds,
    }
}

/// DuckDB reads a local metadata file by its path, not a `file:` URI.
fn local_path(location: &str) -> &str {
    location
        .strip_prefix("file://")
        .or_else(|| location.strip_prefix("file:"))
        .unwrap_or(location)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_metadata_is_read_by_its_path() {
        assert_eq!(
            local_path("file:///w/t/metadata/1.json"),
            "/w/t/metadata/1.json"
        );
        assert_eq!(local_path("/w/t/metadata/1.json"), "/w/t/metadata/1.json");
        assert_eq!(
            local_path("s3://b/t/metadata/1.json"),
            "s3://b/t/metadata/1.json"
        );
    }

    #[test]
    fn without_python_duckdb_is_not_at_hand() {
        let reads = time_reads("/nonexistent/python3", "/a.json", "/b.json", 1);
        match reads {
            DuckDbReads::NotAtHand { reason } => {
                assert!(reason.contains("/nonexistent/python3"), "{reason}")
            }
            other => panic!("{other:?}"),
        }
    }
}
