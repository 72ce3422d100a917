//! `eqdv generate`: a v3 table (created if needed) with CDC commits that write equality
//! deletes, for tests and demos.

use anyhow::Result;
use clap::Args;

use crate::args::{TableArgs, WorkloadArgs};
use crate::exit;
use crate::output::{self, spinner};

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
    let report =
        eqdv_workload::generate::generate(catalog.as_ref(), &name, &args.workload.spec()?).await?;
    bar.finish_and_clear();
    // The model's live rows are the rows a reader must see: counted, not rebuilt (a
    // replay to canonical rows would hold every row of a big table as text).
    let expected = usize::try_from(report.live_rows)?;
    output::print_generated(&name, catalog.name(), &report, expected, json)?;
    Ok(exit::OK)
}
