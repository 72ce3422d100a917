//! What the long runs share (the soak, the crash points, the burst): sizes from the
//! environment, and their totals appended to a results file as a row of tab-separated
//! values, which `tests/reliability-report` turns into docs/reliability.md's tables.

use std::io::Write;

/// `name`'s value as a number, or `default` when unset or empty; a value that is not a
/// number fails the run, naming it.
pub fn env_u64(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(v) if !v.trim().is_empty() => v
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v}: not a number")),
        _ => default,
    }
}

/// Appends one row of `columns` (name, value) to the file `<PREFIX>_RESULTS` names, if
/// it names one, after a header row when the file is new. `date` and `commit` come
/// first, from `<PREFIX>_DATE` and `<PREFIX>_COMMIT` (the run scripts set them).
pub fn record(prefix: &str, columns: &[(&str, String)]) {
    let Ok(path) = std::env::var(format!("{prefix}_RESULTS")) else {
        return;
    };
    let var = |suffix: &str| std::env::var(format!("{prefix}_{suffix}")).unwrap_or_default();
    let mut text = String::new();
    if !std::path::Path::new(&path).exists() {
        let names: Vec<&str> = columns.iter().map(|(name, _)| *name).collect();
        text.push_str(&format!("date\tcommit\t{}\n", names.join("\t")));
    }
    let values: Vec<&str> = columns.iter().map(|(_, value)| value.as_str()).collect();
    text.push_str(&format!(
        "{}\t{}\t{}\n",
        var("DATE"),
        var("COMMIT"),
        values.join("\t")
    ));
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .unwrap_or_else(|e| panic!("cannot record the results in {path}: {e}"));
}
