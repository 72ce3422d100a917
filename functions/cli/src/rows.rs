//! `eqdv rows`: a table's live rows in canonical form, the form tests compare.

use std::io::Write;

use anyhow::Result;
use clap::Args;
use eqdv::table::LoadedTable;

use crate::args::TableArgs;
use crate::exit;
use crate::output::stdout_failed;

#[derive(Args)]
pub struct RowsArgs {
    #[command(flatten)]
    table: TableArgs,
}

pub async fn run(args: &RowsArgs) -> Result<u8> {
    let table = &args.table;
    let catalog = table.catalog().await?;
    let loaded = LoadedTable::load(catalog.as_ref(), &table.name()?).await?;
    print_rows(&eqdv_workload::read::read_canonical(&loaded, &table.branch).await?);
    Ok(exit::OK)
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
