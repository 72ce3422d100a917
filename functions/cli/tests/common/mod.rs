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
