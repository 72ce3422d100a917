//! The `eqdv` binary as scripts use it: exit codes, JSON output, plans and shards.

mod common;

use std::path::Path;
use std::process::Output;

use common::{assert_converted, eqdv, json};

fn table_args(dir: &Path) -> Vec<String> {
    vec![
        "--warehouse".into(),
        dir.display().to_string(),
        "--table".into(),
        "cdc.orders".into(),
    ]
}

fn run(cmd: &str, dir: &Path, extra: &[&str]) -> Output {
    let mut args: Vec<String> = vec![cmd.to_string(), "--json".into()];
    args.extend(table_args(dir));
    args.extend(extra.iter().map(|s| s.to_string()));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    eqdv(&refs)
}

#[test]
fn generate_convert_and_exit_codes() {
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path();
    let out = run(
        "generate",
        w,
        &[
            "--rows",
            "800",
            "--commits",
            "3",
            "--key",
            "long,string",
            "--partition",
            "bucket:3",
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let generated = json(&out);
    assert!(generated["equality_delete_files"].as_u64().unwrap() > 0);

    let rows_before = eqdv(&[
        "rows",
        "--warehouse",
        &w.display().to_string(),
        "--table",
        "cdc.orders",
    ]);
    assert_eq!(rows_before.status.code(), Some(0));

    let out = run("inspect", w, &[]);
    assert_eq!(out.status.code(), Some(0));
    let before = json(&out);
    assert!(before["totals"]["equality_delete_files"].as_u64().unwrap() > 0);
    assert_eq!(before["totals"]["dvs"].as_u64(), Some(0));

    let out = run("convert", w, &["--dry-run"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(json(&out)["outcome"], "dry-run");

    let out = run("convert", w, &[]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report = json(&out);
    assert_eq!(report["outcome"], "converted");
    assert!(report["dvs_written"].as_u64().unwrap() > 0);

    let after = json(&run("inspect", w, &["--verify"]));
    assert_eq!(after["verified"]["dvs"], after["totals"]["dvs"], "{after}");
    assert_eq!(after["totals"]["equality_delete_files"].as_u64(), Some(0));
    assert!(after["totals"]["dvs"].as_u64().unwrap() > 0);
    let rows_after = eqdv(&[
        "rows",
        "--warehouse",
        &w.display().to_string(),
        "--table",
        "cdc.orders",
    ]);
    assert!(rows_before.stdout == rows_after.stdout, "rows changed");
    assert_converted(w, "cdc.orders");

    // Nothing left: exit code 3.
    let out = run("convert", w, &[]);
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(json(&out)["outcome"], "nothing-to-do");
}

/// A bucket[3] table whose equality deletes are global (one group, one shard).
fn generate_global_group(w: &Path) {
    let out = run(
        "generate",
        w,
        &[
            "--rows",
            "1200",
            "--commits",
            "3",
            "--partition",
            "bucket:3",
            "--global-deletes",
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `convert --ranges N`: a global group split into data ranges, committed in one
/// snapshot, judged by readers other than eqdv's; a dry run and a bad count first.
#[test]
fn ranges_split_a_global_group_and_commit_once() {
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path();
    generate_global_group(w);
    let out = run("convert", w, &["--ranges", "0"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "a split into no ranges is refused"
    );

    let out = run("convert", w, &["--ranges", "4", "--dry-run"]);
    assert_eq!(out.status.code(), Some(0));
    let dry = json(&out);
    assert_eq!(dry["outcome"], "dry-run");
    let before = json(&run("inspect", w, &[]));

    let out = run("convert", w, &["--ranges", "4"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report = json(&out);
    assert_eq!(report["outcome"], "converted");
    assert_eq!(report["ranges"], 4);
    assert_eq!(report["commit_attempts"], 1);
    assert_eq!(report["dvs_written"], dry["dvs_written"]);
    assert!(report["dvs_written"].as_u64().unwrap() > 0);
    // One snapshot: the next sequence number, converted from the head before.
    let after = json(&run("inspect", w, &[]));
    assert_eq!(
        after["sequence_number"].as_i64(),
        before["sequence_number"].as_i64().map(|n| n + 1),
        "not exactly one new snapshot: {after}"
    );
    assert_eq!(
        after["summary"]["eqdv.converted-from"].as_str(),
        Some(before["snapshot_id"].to_string().as_str())
    );
    assert_converted(w, "cdc.orders");
    let out = run("convert", w, &["--ranges", "4"]);
    assert_eq!(out.status.code(), Some(3));
}

/// `eqdv backfill` splits a shard over `EQDV_SPLIT_ABOVE_MB` as the planner would on
/// Lambda, in this process: one commit of all its ranges.
#[test]
fn backfill_splits_a_shard_over_the_threshold_in_process() {
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path();
    generate_global_group(w);
    let before = json(&run("inspect", w, &[]));
    let backfill = |threshold: &str| {
        common::eqdv_command()
            .args(["backfill", "--json", "--warehouse"])
            .arg(w)
            .args(["--database", "cdc"])
            .env("EQDV_SPLIT_ABOVE_MB", threshold)
            .env("EQDV_MAX_RANGES", "3")
            .output()
            .expect("run eqdv")
    };
    let out = backfill("0");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let done = json(&out);
    let conversions = done["conversions"].as_array().unwrap();
    assert_eq!(conversions.len(), 1, "a global group is one shard: {done}");
    assert_eq!(conversions[0]["outcome"], "converted", "{done}");
    assert_eq!(conversions[0]["ranges"], 3, "{done}");
    let after = json(&run("inspect", w, &[]));
    assert_eq!(
        after["sequence_number"].as_i64(),
        before["sequence_number"].as_i64().map(|n| n + 1),
        "not exactly one new snapshot: {after}"
    );
    assert_converted(w, "cdc.orders");
    assert_eq!(backfill("0").status.code(), Some(3), "nothing left to do");
}

/// `eqdv split TASK --json --warehouse DIR ARGS...`.
fn split(task: &str, w: &Path, args: &[&str]) -> Output {
    let w = w.display().to_string();
    let mut all = vec!["split", task, "--json", "--warehouse", w.as_str()];
    all.extend(args);
    eqdv(&all)
}

fn ok_json(out: &Output) -> serde_json::Value {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    json(out)
}

/// The files below `dir` whose path contains `needle`.
fn files_named(dir: &Path, needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for entry in std::fs::read_dir(&d).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.display().to_string().contains(needle) {
                found.push(path.display().to_string());
            }
        }
    }
    found
}

/// `eqdv split`: a global group split into 3 ranges. A split missing a range commits
/// nothing, and its cleanup removes what the other ranges wrote; then every range is
/// converted by its own process and a fourth commits them once (run again, it reports
/// the same snapshot), judged by readers other than eqdv's.
#[test]
fn split_tasks_in_separate_processes_commit_once() {
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path();
    generate_global_group(w);
    let jobs = tempfile::tempdir().unwrap();
    let job_file = jobs.path().join("job.json");
    let job_path = job_file.display().to_string();
    let before = json(&run("inspect", w, &[]));
    let job = ok_json(&split(
        "job",
        w,
        &[
            "--table",
            "cdc.orders",
            "--ranges",
            "3",
            "--output",
            &job_path,
        ],
    ));
    let id = job["id"].as_str().expect("split id").to_string();
    assert_eq!(job["ranges"], 3);
    let task = |name: &str, extra: &[&str]| {
        let mut args = vec!["--job", job_path.as_str()];
        args.extend(extra);
        split(name, w, &args)
    };

    // Ranges 0 and 1 only: the commit names the missing range and changes nothing.
    for range in ["0", "1"] {
        let out = ok_json(&task("range", &["--range", range]));
        assert_eq!(out["split_id"], id.as_str());
    }
    let refused = task("commit", &[]);
    assert_eq!(refused.status.code(), Some(1));
    let error = String::from_utf8_lossy(&refused.stderr);
    assert!(
        error.contains("range 2 of 3") && error.contains("no readable result"),
        "{error}"
    );
    assert_eq!(json(&run("inspect", w, &[])), before, "the table moved");
    assert!(!files_named(w, &id).is_empty(), "the ranges wrote nothing");
    let cleanup = ok_json(&task("cleanup", &[]));
    assert_eq!(cleanup["committed"], false);
    assert_eq!(files_named(w, &id), Vec::<String>::new());

    // Every range in its own process, then one commit.
    for range in ["0", "1", "2"] {
        ok_json(&task("range", &["--range", range]));
    }
    let report = ok_json(&task("commit", &[]));
    assert_eq!(report["outcome"], "converted", "{report}");
    assert_eq!(report["ranges"], 3, "{report}");
    let after = json(&run("inspect", w, &[]));
    assert_eq!(
        after["sequence_number"].as_i64(),
        before["sequence_number"].as_i64().map(|n| n + 1),
        "not exactly one new snapshot: {after}"
    );
    assert_eq!(
        after["summary"]["eqdv.split-id"].as_str(),
        Some(id.as_str())
    );
    assert_converted(w, "cdc.orders");

    // Again: the split's snapshot is reported, nothing is written or removed.
    let again = ok_json(&task("commit", &[]));
    assert_eq!(again["new_snapshot_id"], after["snapshot_id"], "{again}");
    assert_eq!(ok_json(&task("cleanup", &[]))["committed"], true);
    assert_eq!(json(&run("inspect", w, &[])), after);
    assert!(
        files_named(w, &id).iter().all(|f| f.ends_with(".puffin")),
        "a committed split keeps its DVs and nothing else"
    );
}

#[test]
fn shards_from_a_plan_file() {
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path();
    let out = run(
        "generate",
        w,
        &["--rows", "800", "--commits", "2", "--partition", "identity"],
    );
    assert_eq!(out.status.code(), Some(0));
    let plan_file = w.join("plan.json");
    let plan_path = plan_file.display().to_string();
    let out = run(
        "plan",
        w,
        &["--target-shard-bytes", "1", "--output", &plan_path],
    );
    assert_eq!(out.status.code(), Some(0));
    let plan = json(&out);
    let shards = plan["shards"].as_array().unwrap();
    assert!(shards.len() > 1, "expected several shards");
    for shard in shards {
        let id = shard["id"].as_str().unwrap();
        let out = run("convert", w, &["--plan", &plan_path, "--shard-id", id]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "shard {id}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let out = run("convert", w, &["--plan", &plan_path, "--shard-id", id]);
        assert_eq!(out.status.code(), Some(3), "shard {id} twice");
    }
    assert_converted(w, "cdc.orders");
    let out = run("plan", w, &[]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "a converted table has nothing to plan"
    );
    // An unknown shard id is an error naming the plan file and the id.
    let out = run("convert", w, &["--plan", &plan_path, "--shard-id", "nope"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("nope") && err.contains("plan.json"), "{err}");
}

/// `convert --plan` converts on the branch the shard was planned on, never silently on
/// main; a --branch that contradicts the shard is refused.
#[test]
fn shards_convert_on_their_own_branch() {
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path();
    let out = run("generate", w, &["--rows", "400", "--commits", "2"]);
    assert_eq!(out.status.code(), Some(0));
    let plan_file = w.join("plan.json");
    let plan_path = plan_file.display().to_string();
    let out = run("plan", w, &["--output", &plan_path]);
    assert_eq!(out.status.code(), Some(0));
    let mut plan: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&plan_file).unwrap()).unwrap();
    let id = plan["shards"][0]["id"].as_str().unwrap().to_string();
    let rows_before = run("rows", w, &[]).stdout;

    let out = run(
        "convert",
        w,
        &["--plan", &plan_path, "--shard-id", &id, "--branch", "audit"],
    );
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("planned on branch 'main'"), "{err}");

    // The same shard said to be planned on a branch the table lacks: refused, since
    // eqdv converts where the shard says, and that branch does not exist.
    plan["shards"][0]["branch"] = "audit".into();
    std::fs::write(&plan_file, serde_json::to_vec(&plan).unwrap()).unwrap();
    let out = run("convert", w, &["--plan", &plan_path, "--shard-id", &id]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("branch 'audit' does not exist"), "{err}");
    assert_eq!(run("rows", w, &[]).stdout, rows_before);
    let out = run("inspect", w, &[]);
    assert_eq!(
        json(&out)["totals"]["dvs"].as_u64(),
        Some(0),
        "nothing converted"
    );
}

#[test]
fn missing_table_fails_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = run("convert", dir.path(), &[]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cdc.orders") && err.contains("not found"),
        "{err}"
    );
    assert!(json(&out)["error"].as_str().unwrap().contains("cdc.orders"));
    // A malformed table name is a clear error too.
    let out = eqdv(&[
        "convert",
        "--warehouse",
        &dir.path().display().to_string(),
        "--table",
        "orders",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("NAMESPACE.TABLE"));
}

#[test]
fn tuning_options_and_variables_are_checked_alike() {
    // `convert` reads the functions' tuning variables through their parser: a bad
    // value, given as an option or in the environment, names both.
    let dir = tempfile::tempdir().unwrap();
    let out = run("convert", dir.path(), &["--queue-groups", "0"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--queue-groups (EQDV_QUEUE_GROUPS): must be from 1 to 16, got 0"),
        "{err}"
    );
    let mut command = common::eqdv_command();
    command.env("EQDV_KEY_MEMORY_MB", "0");
    command
        .args(["convert", "--json"])
        .args(table_args(dir.path()));
    let out = command.output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--key-memory-mb (EQDV_KEY_MEMORY_MB): must be at least 1"),
        "{err}"
    );
    // An option given wins over the variable.
    let mut command = common::eqdv_command();
    command.env("EQDV_KEY_INDEX", "sometimes");
    command
        .args(["convert", "--json", "--no-key-index"])
        .args(table_args(dir.path()));
    let out = command.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("key index mode"), "{err}");
    assert!(
        err.contains("cdc.orders") && err.contains("not found"),
        "{err}"
    );
}

#[test]
fn demo_converts_and_reports() {
    let dir = tempfile::tempdir().unwrap();
    let out = eqdv(&[
        "demo",
        "--json",
        "--warehouse",
        &dir.path().join("wh").display().to_string(),
        "--rows",
        "2000",
        "--commits",
        "3",
        // `generate`'s sizes, not the demo's own (a table of a few files): DuckDB, one
        // of the judges below, misreads the DVs of some such tables (docs/limits.md).
        "--changes-per-commit",
        "200",
        "--rows-per-file",
        "500",
        "--rows-per-row-group",
        "200",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let demo = json(&out);
    assert_eq!(demo["rows_identical"], true);
    assert!(
        demo["before"]["totals"]["equality_delete_files"]
            .as_u64()
            .unwrap()
            > 0
    );
    assert_eq!(
        demo["after"]["totals"]["equality_delete_files"].as_u64(),
        Some(0)
    );
    assert!(demo["after"]["totals"]["dvs"].as_u64().unwrap() > 0);
    assert!(demo["convert"]["resolve"]["files_opened"].as_u64().unwrap() > 0);
    // tests/run gives the demo its venv's DuckDB, which read the table both times: timed
    // when it read the live rows both times, else reported with the rows it read.
    if std::env::var_os("EQDV_PYTHON").is_some() {
        let duckdb = &demo["duckdb"];
        let live = demo["live_rows"].as_u64().unwrap();
        match duckdb["outcome"].as_str() {
            Some("timed") => {
                assert!(duckdb["seconds_with_equality_deletes"].as_f64().unwrap() > 0.0);
                assert!(duckdb["seconds_with_dvs"].as_f64().unwrap() > 0.0);
            }
            Some("misread") => assert!(
                duckdb["rows_with_equality_deletes"].as_u64() != Some(live)
                    || duckdb["rows_with_dvs"].as_u64() != Some(live),
                "{duckdb}"
            ),
            _ => panic!("DuckDB did not read the demo's table: {duckdb}"),
        }
    }
    // `rows_identical` is eqdv's own reader speaking; PyIceberg and the model decide.
    assert_converted(&dir.path().join("wh"), "demo.events");
}

#[test]
fn backfill_a_database() {
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path().display().to_string();
    for (table, seed) in [("cdc.orders", "1"), ("cdc.users", "2")] {
        let out = eqdv(&[
            "generate",
            "--warehouse",
            &w,
            "--table",
            table,
            "--rows",
            "500",
            "--commits",
            "2",
            "--partition",
            "identity",
            "--seed",
            seed,
        ]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // A dry run plans both tables and converts nothing.
    let out = eqdv(&[
        "backfill",
        "--json",
        "--warehouse",
        &w,
        "--database",
        "cdc",
        "--dry-run",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let plan = json(&out);
    assert_eq!(
        plan["plan"]["tables"]["cdc.orders"]["outcome"], "planned",
        "{plan}"
    );
    assert_eq!(
        plan["plan"]["tables"]["cdc.users"]["outcome"], "planned",
        "{plan}"
    );
    assert_eq!(plan["conversions"].as_array().unwrap().len(), 0);
    // The real run converts every shard; a second finds nothing to do (exit 3).
    let out = eqdv(&["backfill", "--json", "--warehouse", &w, "--database", "cdc"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let done = json(&out);
    let conversions = done["conversions"].as_array().unwrap();
    assert!(!conversions.is_empty());
    assert!(
        conversions.iter().all(|c| c["outcome"] == "converted"),
        "{done}"
    );
    for table in ["cdc.orders", "cdc.users"] {
        let inspect = eqdv(&[
            "inspect",
            "--json",
            "--verify",
            "--warehouse",
            &w,
            "--table",
            table,
        ]);
        let i = json(&inspect);
        assert_eq!(i["totals"]["equality_delete_files"], 0, "{table}: {i}");
        assert_converted(dir.path(), table);
    }
    let out = eqdv(&["backfill", "--warehouse", &w, "--database", "cdc"]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// A reader that stops reading (`eqdv rows | head -1`) ends `rows`, whose output
/// outgrows the pipe, quietly with status 0, not with a panic and status 101; the line
/// it did read is the first line of the full output. `inspect` read the same way prints
/// its header first (the format as `v3`, once written `vv3`).
#[test]
fn a_closed_pipe_ends_the_output_quietly() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;

    let dir = tempfile::tempdir().unwrap();
    let w = dir.path();
    // Enough rows that the output outgrows the pipe's buffer (64 KiB on Linux).
    let out = run("generate", w, &["--rows", "3000", "--commits", "1"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let args = table_args(w);
    let full = common::eqdv_command()
        .arg("rows")
        .args(&args)
        .output()
        .unwrap();
    assert_eq!(full.status.code(), Some(0));
    let full = String::from_utf8(full.stdout).unwrap();
    assert!(full.len() > 256 * 1024, "only {} bytes of rows", full.len());
    let first = full.lines().next().unwrap().to_string();

    for command in ["rows", "inspect"] {
        let mut child = common::eqdv_command()
            .arg(command)
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        // The reader is gone: the stdout pipe closed after one line.
        let done = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&done.stderr);
        assert_eq!(done.status.code(), Some(0), "{command}: {stderr}");
        assert!(!stderr.contains("panicked"), "{command}: {stderr}");
        if command == "rows" {
            assert_eq!(line.trim_end(), first);
        } else {
            assert!(line.starts_with("cdc.orders (main), format v3"), "{line}");
        }
    }
}
