//! `eqdv cleanup`: argument parsing and output for orphan file cleanup. The work (and
//! every safety rule) is in the engine's `eqdv::cleanup`.

use std::time::Duration;

use eqdv::cleanup::CleanupReport;

use crate::output::Summary;

/// clap value parser for `--older-than` (`72h`, `3d`, `30m`, `0s`, `1d12h`).
pub fn parse_age(text: &str) -> Result<Duration, String> {
    eqdv::cleanup::parse_age(text).map_err(|e| e.to_string())
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

pub fn print_report(r: &CleanupReport) {
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
        println!(
            "  {} {path}",
            if r.dry_run { "would delete" } else { "deleted" }
        );
    }
    for f in &r.delete_failures {
        println!("  FAILED {}: {}", f.path, f.error);
    }
}
