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
    /// Also prove each key index against a full scan: every live data file it covers
    /// read again, its entries compared with the rows (exit 1 on a difference).
    #[arg(long)]
    verify_index: bool,
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
    let indexes = if args.verify_index {
        let head = loaded.head(&table.branch)?;
        let files = TableFiles::read(&loaded, head.as_ref()).await?;
        Some(eqdv::key_index::verify_indexes(&loaded, &files).await?)
    } else {
        None
    };
    output::print_inspection(&inspection, verified.as_ref(), indexes.as_deref(), json)?;
    let wrong: Vec<&String> = indexes
        .iter()
        .flatten()
        .flat_map(|v| &v.mismatches)
        .collect();
    if !wrong.is_empty() {
        anyhow::bail!(
            "the key index does not match the data files: {}",
            wrong
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join("; ")
        );
    }
    Ok(exit::OK)
}
