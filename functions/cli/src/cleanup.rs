//! `eqdv cleanup`: argument parsing for orphan file cleanup. The work (and every safety
//! rule) is in the engine's `eqdv::cleanup`.

use std::time::Duration;

use anyhow::Result;
use clap::Args;

use crate::args::TableArgs;
use crate::exit;
use crate::output;

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
    output::print_cleanup_report(&report, json)?;
    Ok(if report.delete_failures.is_empty() {
        exit::OK
    } else {
        exit::FAILED
    })
}
