//! `eqdv cleanup`: argument parsing for orphan file cleanup. The work (and every safety
//! rule) is in the engine's `eqdv::cleanup`.

use std::time::Duration;

use anyhow::Result;
use clap::Args;
use eqdv::cleanup::CleanupReport;

use crate::args::TableArgs;
use crate::exit;
use crate::output::{Summary, out, print_json};

#[derive(Args)]
pub struct CleanupArgs {
    #[command(flatten)]
    table: TableArgs,
    /// Delete only orphans last modified at least this long ago (units s, m, h, d:
    /// 72h, 3d, 0s); younger files may belong to a commit still in flight.
    #[arg(long, value_name = "AGE", default_value = "72h", value_parser = parse_age)]
    older_than: Duration,
    /// Report what would be deleted; delete nothing.
    #[arg(long)]
    dry_run: bool,
}

/// clap value parser for `--older-than` (`72h`, `3d`, `30m`, `0s`, `1d12h`).
fn parse_age(text: &str) -> Result<Duration, String> {
    eqdv::cleanup::parse_age(text).map_err(|e| e.to_string())
}

pub async fn run(args: &CleanupArgs, json: bool) -> Result<u8> {
    let catalog = args.table.catalog().await?;
    let options = eqdv::cleanup::CleanupOptions {
        older_than: args.older_than,
        dry_run: args.dry_run,
    };
    let report = eqdv::cleanup::cleanup(catalog.as_ref(), &args.table.name()?, &options).await?;
    print_cleanup_report(&report, json)?;
    Ok(if report.delete_failures.is_empty() {
        exit::OK
    } else {
        exit::FAILED
    })
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

/// `259200` -> `3d`, `5400` -> `90m`: the largest unit that divides evenly.
fn format_age(secs: u64) -> String {
    for (unit, n) in [("d", 86_400), ("h", 3600), ("m", 60)] {
        if secs > 0 && secs.is_multiple_of(n) {
            return format!("{}{unit}", secs / n);
        }
    }
    format!("{secs}s")
}
