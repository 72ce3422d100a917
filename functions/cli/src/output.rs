//! Everything the CLI prints: JSON on stdout with `--json`, otherwise aligned summary
//! tables; progress spinners (hidden when stderr is not a terminal or `--json` is given)
//! and the one-line error.

use std::io::Write;
use std::time::Duration;

use anyhow::Result;
use eqdv::catalog::TableName;
use eqdv::cleanup::CleanupReport;
use eqdv::convert::{ConvertReport, Outcome};
use eqdv::inspect::{Inspection, PartitionCounts};
use eqdv::plan::Plan;
use eqdv::planner::TableDecision;
use eqdv::verify::DvVerification;
use eqdv_functions::planner::PlannerRun;
use eqdv_workload::generate::GenerateReport;
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use serde_json::{Value, json};

/// `println!` for stdout that a closed pipe does not turn into a panic: when the reader
/// stops reading (`eqdv rows | head`), the process ends quietly with status 0, as
/// command-line tools do; any other write error ends it with status 1 and one line.
macro_rules! out {
    () => {
        $crate::output::write_stdout(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::output::write_stdout(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// Writes to stdout; see [`out!`].
pub fn write_stdout(text: std::fmt::Arguments<'_>) {
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout.write_fmt(text).and_then(|()| stdout.flush()) {
        stdout_failed(&e);
    }
}

fn stdout_failed(error: &std::io::Error) -> ! {
    if error.kind() == std::io::ErrorKind::BrokenPipe {
        std::process::exit(i32::from(crate::exit::OK));
    }
    eprintln!("error: writing to stdout: {error}");
    std::process::exit(i32::from(crate::exit::FAILED));
}

use crate::demo::Demo;

/// A two-column summary table.
#[derive(Default)]
pub struct Summary {
    title: String,
    rows: Vec<(String, String)>,
}

impl Summary {
    pub fn new(title: impl Into<String>) -> Self {
        Self {
            title: title.into(),
            rows: Vec::new(),
        }
    }

    pub fn row(&mut self, key: impl Into<String>, value: impl ToString) -> &mut Self {
        self.rows.push((key.into(), value.to_string()));
        self
    }

    pub fn print(&self) {
        let width = self.rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
        out!("{}", self.title);
        out!("{}", "-".repeat(self.title.len().max(8)));
        for (k, v) in &self.rows {
            out!("  {k:<width$}  {v}");
        }
        out!();
    }
}

/// A table with a header row.
pub fn print_table(header: &[&str], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if i < widths.len() {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
    }
    let line = |cells: Vec<String>| {
        let parts: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        out!("  {}", parts.join("  ").trim_end());
    };
    line(header.iter().map(|h| h.to_string()).collect());
    line(widths.iter().map(|w| "-".repeat(*w)).collect());
    for row in rows {
        line(row.clone());
    }
    out!();
}

/// A spinner for a long phase; a no-op when `quiet`.
pub fn spinner(message: &str, quiet: bool) -> ProgressBar {
    if quiet {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new_spinner();
    if let Ok(style) = ProgressStyle::with_template("{spinner} {msg} ({elapsed})") {
        bar.set_style(style);
    }
    bar.set_message(message.to_string());
    bar.enable_steady_tick(Duration::from_millis(120));
    bar
}

/// Pretty JSON on stdout.
pub fn print_json(value: &impl Serialize) -> Result<()> {
    out!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

fn fmt_opt<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(|| "-".to_string(), |v| v.to_string())
}

/// A failed command: the error line on stderr and, with `--json`, as an object on stdout.
pub fn print_error(e: &anyhow::Error, json: bool) {
    let line = error_line(e);
    if json {
        let msg = json!({ "error": line, "detail": format!("{e:#}") });
        out!("{msg}");
    }
    eprintln!("error: {line}");
}

/// The error for operators, on one line: the context chain down to the first engine
/// error, whose message already names the operation, the table or file and the cause.
/// What lies below it (the raw SDK or storage error, with HTTP headers) is only in the
/// debug log and the JSON `detail`.
fn error_line(e: &anyhow::Error) -> String {
    let mut parts = Vec::new();
    for cause in e.chain() {
        parts.push(cause.to_string());
        if cause.downcast_ref::<eqdv::Error>().is_some() {
            break;
        }
    }
    parts
        .join(": ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// `eqdv generate`.
pub fn print_generated(
    name: &TableName,
    catalog: &str,
    report: &GenerateReport,
    expected_rows: usize,
    json: bool,
) -> Result<()> {
    if json {
        return print_json(&json!({
            "table": name.to_string(),
            "created": report.created,
            "snapshots": report.snapshots,
            "data_files": report.data_files,
            "equality_delete_files": report.equality_delete_files,
            "rows_written": report.rows_written,
            "equality_deletes_written": report.equality_deletes_written,
            "live_rows": report.live_rows,
            "expected_rows": expected_rows,
            "metadata_location": report.metadata_location,
        }));
    }
    let mut s = Summary::new(format!("generated {name}"));
    s.row("catalog", catalog)
        .row("created", report.created)
        .row("snapshots committed", report.snapshots)
        .row("data files written", report.data_files)
        .row(
            "equality delete files written",
            report.equality_delete_files,
        )
        .row("rows written", report.rows_written)
        .row(
            "equality delete rows written",
            report.equality_deletes_written,
        )
        .row("live rows", report.live_rows);
    s.print();
    Ok(())
}

/// `eqdv plan`.
pub fn print_plan(plan: &Plan, json: bool) -> Result<()> {
    if json {
        return print_json(plan);
    }
    let mut s = Summary::new(format!("plan for {} ({})", plan.table, plan.branch));
    s.row("base snapshot", fmt_opt(plan.base_snapshot_id))
        .row("live equality delete files", plan.equality_delete_files)
        .row("equality delete rows", plan.equality_delete_rows)
        .row("groups", plan.groups)
        .row(
            "out of scope: data manifests / files skipped",
            format!(
                "{} / {}",
                plan.skipped_data.manifests, plan.skipped_data.files
            ),
        )
        .row("shards", plan.shards.len());
    s.print();
    if !plan.shards.is_empty() {
        let rows: Vec<Vec<String>> = plan
            .shards
            .iter()
            .map(|sh| {
                vec![
                    sh.id.clone(),
                    sh.partitions.join(" "),
                    sh.groups.len().to_string(),
                    sh.delete_files().count().to_string(),
                    sh.estimated_bytes.to_string(),
                ]
            })
            .collect();
        print_table(
            &[
                "shard",
                "partitions",
                "groups",
                "delete files",
                "est. bytes",
            ],
            &rows,
        );
    }
    Ok(())
}

/// `eqdv convert`.
pub fn print_convert_report(r: &ConvertReport, json: bool) -> Result<()> {
    if json {
        return print_json(r);
    }
    convert_summary(r).print();
    Ok(())
}

fn convert_summary(r: &ConvertReport) -> Summary {
    let outcome = match r.outcome {
        Outcome::NothingToDo => "nothing to do",
        Outcome::Converted => "converted",
        Outcome::DryRun => "dry run (nothing written)",
    };
    let m = &r.resolve;
    let mut s = Summary::new(format!("{}: {outcome}", r.table));
    if !r.equality_deletes_elsewhere.is_empty() {
        let elsewhere: Vec<String> = r
            .equality_deletes_elsewhere
            .iter()
            .map(|b| {
                format!(
                    "{}: {} rows (convert it with --branch {}, or apply it here with \
                     --staging-branch {})",
                    b.branch, b.equality_delete_rows, b.branch, b.branch
                )
            })
            .collect();
        s.row(
            format!("equality deletes on other branches than {}", r.branch),
            elsewhere.join("; "),
        );
    }
    s.row("base snapshot", fmt_opt(r.base_snapshot_id))
        .row("new snapshot", fmt_opt(r.new_snapshot_id))
        .row("groups", r.groups)
        .row(
            "equality delete files removed",
            r.equality_delete_files_removed,
        )
        .row("equality delete rows removed", r.equality_deletes_removed)
        .row("deletion vectors written", r.dvs_written)
        .row("deletion vectors replaced", r.dvs_replaced)
        .row(
            "position delete files removed",
            r.position_delete_files_removed,
        )
        .row("positions newly deleted", r.positions_added)
        .row("deleted keys", m.delete_keys)
        .row("live data files in scope", m.live_data_files)
        .row(
            "out of scope: data manifests / files skipped",
            format!("{} / {}", r.skipped_data.manifests, r.skipped_data.files),
        )
        .row("candidate data files", m.candidate_files)
        .row("pruned by column bounds", m.pruned_by_bounds)
        .row("data files opened", m.files_opened)
        .row(
            "footer bytes read (footers read twice)",
            format!("{} ({})", m.footer_bytes_read, m.footers_read_twice),
        )
        .row("data files with matches", m.files_with_matches)
        .row(
            "data files holding a deleted key",
            m.files_holding_deleted_values,
        )
        .row(
            "bloom filter false positives expected",
            format!("{:.1}", m.expected_bloom_false_positives),
        )
        .row(
            "row groups read / pruned",
            format!("{} / {}", m.row_groups_read, m.row_groups_pruned),
        )
        .row("rows scanned", m.rows_scanned)
        .row("column chunk bytes read", m.bytes_read)
        .row(
            "data ranges (committed together)",
            if r.ranges == 0 {
                "not split".to_string()
            } else {
                r.ranges.to_string()
            },
        )
        .row("commit attempts", r.commit_attempts)
        .row(
            "conflicts (rebased / re-planned)",
            format!("{} ({} / {})", r.conflicts, r.rebases, r.replans),
        )
        .row("duration", format!("{} ms", r.duration_ms));
    s
}

/// `eqdv inspect`, with the DV verification when `--verify` asked for it.
pub fn print_inspection(
    i: &Inspection,
    verified: Option<&DvVerification>,
    indexes: Option<&[eqdv::key_index::IndexVerification]>,
    json: bool,
) -> Result<()> {
    if json {
        let mut value = serde_json::to_value(i)?;
        if let (Some(v), Some(obj)) = (verified, value.as_object_mut()) {
            obj.insert("verified".into(), serde_json::to_value(v)?);
        }
        if let (Some(v), Some(obj)) = (indexes, value.as_object_mut()) {
            obj.insert("verified_indexes".into(), serde_json::to_value(v)?);
        }
        return print_json(&value);
    }
    let t = &i.totals;
    let mut s = Summary::new(format!(
        "{} ({}), format {}",
        i.table, i.branch, i.format_version
    ));
    s.row("snapshot", fmt_opt(i.snapshot_id))
        .row(
            "operation",
            i.operation.clone().unwrap_or_else(|| "-".into()),
        )
        .row("data files", t.data_files)
        .row("records", t.records)
        .row("equality delete files", t.equality_delete_files)
        .row("equality delete rows", t.equality_deletes)
        .row("deletion vectors", t.dvs)
        .row("positions in DVs", t.dv_positions)
        .row("v2 position delete files", t.position_delete_files);
    if let Some(state) = &i.staging {
        s.row(
            "behind the staging branch",
            crate::staging::describe_state(state),
        );
    }
    s.print();
    let rows: Vec<Vec<String>> = i
        .partitions
        .iter()
        .map(|(p, c)| {
            vec![
                p.clone(),
                c.data_files.to_string(),
                c.records.to_string(),
                c.equality_delete_files.to_string(),
                c.equality_deletes.to_string(),
                c.dvs.to_string(),
                c.dv_positions.to_string(),
            ]
        })
        .collect();
    print_table(
        &[
            "partition",
            "data files",
            "records",
            "eq files",
            "eq rows",
            "DVs",
            "DV positions",
        ],
        &rows,
    );
    for index in &i.key_indexes {
        let mut s = Summary::new(index_name(&index.equality_ids, &index.part));
        s.row("location", &index.location);
        match &index.bypassed_because {
            Some(why) => {
                s.row("usable", format!("no: {why}"));
            }
            None => {
                s.row("usable", "yes")
                    .row(
                        "reconciled with snapshot",
                        fmt_opt(index.source_snapshot_id),
                    )
                    .row("of branch", fmt_opt(index.source_branch.as_deref()))
                    .row("runs", index.runs)
                    .row("leaf files", index.leaves)
                    .row("entries", index.entries)
                    .row("leaf bytes", index.leaf_bytes)
                    .row("covered data files", index.covered_files)
                    .row("live files not covered (delta)", fmt_opt(index.delta_files))
                    .row("covered files no longer live", fmt_opt(index.dead_files))
                    .row("rows left out as deleted", index.deleted_rows_left_out);
            }
        }
        s.print();
    }
    for v in indexes.unwrap_or_default() {
        match &v.unusable {
            Some(why) => out!(
                "{}: not verified, unusable: {why}",
                index_name(&v.equality_ids, &v.part)
            ),
            None if v.mismatches.is_empty() => out!(
                "{}: {} covered live files ({} entries) match a full scan; {} live files not covered",
                index_name(&v.equality_ids, &v.part),
                v.files_checked,
                v.entries_checked,
                v.files_not_covered
            ),
            None => out!(
                "{}: {} of {} covered live files differ from a full scan",
                index_name(&v.equality_ids, &v.part),
                v.mismatches.len(),
                v.files_checked
            ),
        }
    }
    if let Some(v) = verified {
        out!(
            "verified {} deletion vectors ({} positions): all valid",
            v.dvs,
            v.positions
        );
    }
    Ok(())
}

/// `eqdv rows`: one canonical row a line, with or without `--json`.
pub fn print_rows(rows: &[String]) {
    // One lock and one buffer for what may be millions of lines.
    let mut stdout = std::io::BufWriter::new(std::io::stdout().lock());
    let written = rows
        .iter()
        .try_for_each(|row| writeln!(stdout, "{row}"))
        .and_then(|()| stdout.flush());
    if let Err(e) = written {
        stdout_failed(&e);
    }
}

/// `259200` -> `3d`, `5400` -> `90m`: the largest unit that divides evenly.
fn format_age(secs: u64) -> String {
    for (unit, n) in [("d", 86_400), ("h", 3600), ("m", 60)] {
        if secs > 0 && secs.is_multiple_of(n) {
            return format!("{}{unit}", secs / n);
        }
    }
    format!("{secs}s")
}

/// `eqdv cleanup`.
pub fn print_cleanup_report(r: &CleanupReport, json: bool) -> Result<()> {
    if json {
        return print_json(r);
    }
    let title = if r.dry_run {
        format!("{}: cleanup dry run (nothing deleted)", r.table)
    } else {
        format!("{}: cleanup", r.table)
    };
    let mut s = Summary::new(title);
    s.row("location", &r.location)
        .row("metadata", &r.metadata_location)
        .row("files scanned", r.scanned)
        .row("files reachable", r.reachable)
        .row(
            "referenced but missing (old versions)",
            r.missing_referenced,
        )
        .row("orphans found", r.orphans_found)
        .row(
            if r.dry_run {
                "orphans to delete"
            } else {
                "orphans eligible"
            },
            r.eligible.len(),
        )
        .row("deleted", r.deleted.len())
        .row(
            format!("kept: younger than {}", format_age(r.older_than_secs)),
            r.kept_too_young.len(),
        )
        .row(
            "kept: outside data/ and metadata/, or hidden",
            r.kept_unmanaged.len(),
        )
        .row("delete failures", r.delete_failures.len());
    s.print();
    let listed = if r.dry_run { &r.eligible } else { &r.deleted };
    for path in listed {
        out!(
            "  {} {path}",
            if r.dry_run { "would delete" } else { "deleted" }
        );
    }
    for f in &r.delete_failures {
        out!("  FAILED {}: {}", f.path, f.error);
    }
    Ok(())
}

/// `eqdv backfill`: the planner's decision per table, then how the shards converted.
pub fn print_backfill(
    run: &PlannerRun,
    conversions: &[Value],
    failed: usize,
    dry_run: bool,
    json: bool,
) -> Result<()> {
    let summary = &run.response;
    if json {
        return print_json(
            &json!({ "plan": summary, "conversions": conversions, "failures": run.failures }),
        );
    }
    let rows: Vec<Vec<String>> = summary
        .tables
        .iter()
        .map(|(t, d)| {
            let (what, why) = match d {
                TableDecision::Planned { shards } => {
                    ("planned".to_string(), format!("{shards} shard(s)"))
                }
                TableDecision::NothingToDo { reason } => {
                    ("nothing to do".to_string(), reason.clone())
                }
                TableDecision::Skipped { reason } => ("skipped".to_string(), reason.clone()),
                TableDecision::Failed { error } => ("failed".to_string(), error.clone()),
            };
            vec![t.clone(), what, why]
        })
        .collect();
    print_table(&["table", "decision", "why"], &rows);
    if !dry_run {
        out!(
            "converted {} shard(s), {failed} failed",
            conversions.len() - failed
        );
    }
    Ok(())
}

/// `eqdv demo`: before and after, the read times, then the conversion's own report.
pub fn print_demo(d: &Demo, json: bool) -> Result<()> {
    let (before, after, report) = (&d.before, &d.after, &d.report);
    let ratio = if d.read_dv_secs > 0.0 {
        d.read_eq_secs / d.read_dv_secs
    } else {
        f64::INFINITY
    };
    if json {
        return print_json(&json!({
            "warehouse": d.warehouse,
            "table": d.table.to_string(),
            "before": before,
            "after": after,
            "convert": report,
            "live_rows": d.live_rows,
            "rows_identical": true,
            "read_seconds_with_equality_deletes": d.read_eq_secs,
            "read_seconds_with_dvs": d.read_dv_secs,
            "read_speedup": ratio,
        }));
    }
    let mut s = Summary::new(format!(
        "eqdv demo: {} in {}",
        d.table,
        d.warehouse.display()
    ));
    // One table count before and after the conversion.
    let change = |count: fn(&PartitionCounts) -> u64| {
        format!("{}  ->  {}", count(&before.totals), count(&after.totals))
    };
    s.row("", "before  ->  after")
        .row("equality delete files", change(|t| t.equality_delete_files))
        .row("equality delete rows", change(|t| t.equality_deletes))
        .row("deletion vectors", change(|t| t.dvs))
        .row("positions in DVs", change(|t| t.dv_positions))
        .row("data files", change(|t| t.data_files))
        .row("live rows (identical)", d.live_rows)
        .row(
            "data files opened / candidates",
            format!(
                "{} / {}",
                report.resolve.files_opened, report.resolve.candidate_files
            ),
        )
        .row("pruned by column bounds", report.resolve.pruned_by_bounds)
        .row(
            "read time, equality deletes",
            format!("{:.1} ms", d.read_eq_secs * 1000.0),
        )
        .row(
            "read time, deletion vectors",
            format!("{:.1} ms", d.read_dv_secs * 1000.0),
        )
        .row("read speedup", format!("{ratio:.1}x"));
    s.print();
    convert_summary(report).print();
    out!(
        "Open it with PyIceberg: SqlCatalog(\"eqdv\", uri=\"sqlite:///{0}/catalog.db\", warehouse=\"file://{0}\")",
        d.warehouse.display()
    );
    Ok(())
}

/// How `inspect` names an index: its field ids, and its part of a partitioned table's
/// index.
fn index_name(equality_ids: &[i32], part: &str) -> String {
    if part.is_empty() {
        format!("key index of field ids {equality_ids:?}")
    } else {
        format!("key index of field ids {equality_ids:?}, part {part}")
    }
}
