//! Killing the real binary at an engine test pause point (`eqdv::test_hooks`).

use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use eqdv::test_hooks::{PAUSE_AT_ENV, PAUSE_SECS_ENV, PAUSED_MARKER};

/// Runs `command` (an `eqdv` invocation) until it reports pausing at `point`, then
/// SIGKILLs it and checks that the signal killed it.
pub fn kill_when_paused(mut command: Command, point: &str) {
    let started = Instant::now();
    let mut child = command
        .env(PAUSE_AT_ENV, point)
        // Bounds the life of a child a failing test does not kill; it is killed long before.
        .env(PAUSE_SECS_ENV, "300")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn eqdv");
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut seen = Vec::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.starts_with(PAUSED_MARKER) {
                let _ = tx.send(Ok(line));
                return;
            }
            seen.push(line);
        }
        let _ = tx.send(Err(seen.join("\n")));
    });
    match rx.recv_timeout(Duration::from_secs(120)) {
        Ok(Ok(line)) => assert_eq!(line, format!("{PAUSED_MARKER}{point}")),
        other => {
            let _ = child.kill();
            let _ = child.wait();
            panic!("eqdv never paused at {point}: {other:?}");
        }
    }
    child.kill().expect("SIGKILL"); // std's kill is SIGKILL on Unix
    let status = child.wait().expect("wait");
    assert_eq!(
        status.signal(),
        Some(9),
        "not killed by SIGKILL: {status:?}"
    );
    eprintln!("killed at {point} after {:?}", started.elapsed());
}
