//! A tally of which tests a judge read rows for, so that tests/run can say how many
//! tests an engine other than eqdv judged (not a guess from reading the code). With
//! `EQDV_JUDGE_LOG` set, every successful read appends one line `BINARY TEST JUDGE` to
//! that file; without it, nothing is recorded.

use std::io::Write;

/// Records that `judge` ("pyiceberg", "java", "duckdb") read a table's rows for the
/// running test. Best effort: a tally that cannot be written never fails a test.
pub fn record_read(judge: &str) {
    let Some(log) = std::env::var_os("EQDV_JUDGE_LOG") else {
        return;
    };
    // libtest names each test's thread after the test.
    let test = std::thread::current()
        .name()
        .unwrap_or("unnamed")
        .replace(' ', "_");
    let binary = std::env::current_exe()
        .ok()
        .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .map(|stem| match stem.rsplit_once('-') {
            // Cargo names test binaries NAME-HASH.
            Some((name, _hash)) => name.to_string(),
            None => stem,
        })
        .unwrap_or_else(|| "unknown".into());
    let line = format!("{binary} {test} {judge}\n");
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log)
    {
        // One write of a short line in append mode: lines of parallel tests never mix.
        let _ = f.write_all(line.as_bytes());
    }
}
