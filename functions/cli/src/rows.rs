//! `eqdv rows`: a table's live rows in canonical form, the form tests compare.

use anyhow::Result;
use clap::Args;
use eqdv::table::LoadedTable;

use crate::args::TableArgs;
use crate::exit;
use crate::output;

#[derive(Args)]
pub struct RowsArgs {
    #[command(flatten)]
    table: TableArgs,
}

pub async fn run(args: &RowsArgs) -> Result<u8> {
    let table = &args.table;
    let catalog = table.catalog().await?;
    let loaded = LoadedTable::load(catalog.as_ref(), &table.name()?).await?;
    output::print_rows(&eqdv_workload::read::read_canonical(&loaded, &table.branch).await?);
    Ok(exit::OK)
}
