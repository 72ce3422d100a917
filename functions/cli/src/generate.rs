//! `eqdv generate`: a v3 table (created if needed) with CDC commits that write equality
//! deletes, for tests and demos.

use anyhow::Result;
use clap::Args;
use eqdv::catalog::TableName;
use eqdv_workload::generate::GenerateReport;
use serde_json::json;

use crate::args::{TableArgs, WorkloadArgs, WorkloadSize};
use crate::exit;
use crate::output::{Summary, print_json, spinner};

#[derive(Args)]
pub struct GenerateArgs {
    #[command(flatten)]
    table: TableArgs,
    #[command(flatten)]
    workload: WorkloadArgs,
}

pub async fn run(args: &GenerateArgs, json: bool) -> Result<u8> {
    let catalog = args.table.catalog().await?;
    let name = args.table.name()?;
    let bar = spinner(&format!("generating {name}"), json);
    let report = eqdv_workload::generate::generate(
        catalog.as_ref(),
        &name,
        &args.workload.spec(&WorkloadSize::GENERATE)?,
    )
    .await?;
    bar.finish_and_clear();
    // The model's live rows are the rows a reader must see: counted, not rebuilt (a
    // replay to canonical rows would hold every row of a big table as text).
    let expected = usize::try_from(report.live_rows)?;
    print_generated(&name, catalog.name(), &report, expected, json)?;
    Ok(exit::OK)
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
