//! Running the `eqdv` binary under test and reading what it prints.
#![allow(dead_code)]

use std::process::{Command, Output};

use eqdv::test_hooks::PAUSE_AT_ENV;

/// The `eqdv` binary built for these tests.
pub fn eqdv_command() -> Command {
    Command::new(env!("CARGO_BIN_EXE_eqdv"))
}

/// Runs `eqdv ARGS...` to completion.
pub fn eqdv(args: &[&str]) -> Output {
    eqdv_command().args(args).output().expect("run eqdv")
}

/// `eqdv COMMAND --json TABLE_ARGS... EXTRA...` to completion, never paused at a test hook.
pub fn eqdv_json(command: &str, table_args: &[String], extra: &[&str]) -> Output {
    eqdv_command()
        .arg(command)
        .arg("--json")
        .args(table_args)
        .args(extra)
        .env_remove(PAUSE_AT_ENV)
        .output()
        .expect("run eqdv")
}

/// The JSON document `eqdv --json` printed; panics with both streams if there is none.
pub fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// The exit code is `code`; otherwise panics with `what` and both streams.
pub fn assert_exit(out: &Output, code: i32, what: &str) {
    assert_eq!(
        out.status.code(),
        Some(code),
        "{what}\nstdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The rows the generator's model says a table `eqdv generate` wrote in `warehouse`
/// holds (recomputed from the state stored in the table, in its current schema): what
/// every judge must read, whatever eqdv did to the table since.
pub fn model_rows(warehouse: &std::path::Path, table: &str) -> Vec<String> {
    let name = eqdv::catalog::TableName::parse(table).expect("table name");
    let catalog = eqdv::catalog::SqliteCatalog::open_warehouse(warehouse).expect("catalog");
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime")
        .block_on(eqdv_workload::generate::expected_rows_of(&catalog, &name))
        .expect("the generator's model of the table")
}

/// A table the CLI converted, judged by PyIceberg against the generator's model: the
/// same rows as a multiset, no live equality delete, every DV valid.
pub fn assert_converted(warehouse: &std::path::Path, table: &str) {
    eqdv_judges::judge_converted_local(warehouse, table, &model_rows(warehouse, table));
}

/// A JSON array of paths (e.g. `eqdv cleanup`'s `deleted`), normalized, as a set.
pub fn path_set(value: &serde_json::Value) -> std::collections::BTreeSet<String> {
    value
        .as_array()
        .unwrap_or_else(|| panic!("not a JSON array of paths: {value}"))
        .iter()
        .map(|p| eqdv::cleanup::normalize_location(p.as_str().expect("path")))
        .collect()
}
