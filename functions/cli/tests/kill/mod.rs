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

/// What an attempt killed at `eqdv::test_hooks::AFTER_FILES` leaves, given the table's
/// `data/` and `metadata/` prefixes: the Puffin file, one manifest list and the
/// manifests (written at once); no metadata.json and nothing else.
pub fn assert_after_files_objects(
    dead: &std::collections::BTreeSet<String>,
    data: &str,
    metadata: &str,
) {
    let count = |f: &dyn Fn(&str) -> bool| dead.iter().filter(|n| f(n)).count();
    let puffins = count(&|n| n.starts_with(data) && n.ends_with(".puffin"));
    let list_prefix = format!("{metadata}snap-");
    let lists = count(&|n| n.starts_with(&list_prefix) && n.ends_with(".avro"));
    let manifests =
        count(&|n| n.starts_with(metadata) && !n.starts_with(&list_prefix) && n.ends_with(".avro"));
    assert_eq!((puffins, lists), (1, 1), "{dead:#?}");
    assert!(manifests >= 1, "no manifest: {dead:#?}");
    assert_eq!(puffins + lists + manifests, dead.len(), "{dead:#?}");
}
