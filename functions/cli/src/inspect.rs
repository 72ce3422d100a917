//! `eqdv inspect`: what a table holds per partition (data files, equality deletes, DVs,
//! position deletes), and optionally every DV checked as readers will check it.

use anyhow::Result;
use clap::Args;
use eqdv::table::{LoadedTable, TableFiles};

use crate::args::TableArgs;
use crate::exit;
use crate::output;

#[derive(Args)]
pub struct InspectArgs {
    #[command(flatten)]
    table: TableArgs,
    /// Also verify every deletion vector as readers will (Puffin footer, length,
    /// magic, CRC, cardinality, referenced data file, positions in range).
    #[arg(long)]
    verify: bool,
}

pub async fn run(args: &InspectArgs, json: bool) -> Result<u8> {
    let table = &args.table;
    let catalog = table.catalog().await?;
    let loaded = LoadedTable::load(catalog.as_ref(), &table.name()?).await?;
    let inspection = eqdv::inspect::inspect(&loaded, &table.branch).await?;
    let verified = if args.verify {
        let head = loaded.head(&table.branch)?;
        let files = TableFiles::read(&loaded, head.as_ref()).await?;
        Some(eqdv::verify::verify_dvs(&loaded, &files).await?)
    } else {
        None
    };
    output::print_inspection(&inspection, verified.as_ref(), json)?;
    Ok(exit::OK)
}
