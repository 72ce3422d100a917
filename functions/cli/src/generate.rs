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
    let expected = eqdv_workload::generate::expected_rows(&report.state)?.len();
    output::print_generated(&name, catalog.name(), &report, expected, json)?;
    Ok(exit::OK)
}
