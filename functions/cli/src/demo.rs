//! `eqdv demo`: the whole job on a fresh local warehouse, with before/after evidence.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Result, bail};
use clap::Args;
use eqdv::catalog::{SqliteCatalog, TableName};
use eqdv::convert::{ConvertOptions, ConvertReport, convert};
use eqdv::inspect::{Inspection, inspect};
use eqdv::table::LoadedTable;

use crate::args::WorkloadArgs;
use crate::exit;
use crate::output::{self, spinner};

#[derive(Args)]
pub struct DemoArgs {
    /// Warehouse directory (default: a new temporary directory, kept afterwards).
    #[arg(long, value_name = "DIR")]
    warehouse: Option<PathBuf>,
    #[command(flatten)]
    workload: WorkloadArgs,
}

/// What a demo did and measured, for `output::print_demo`.
pub struct Demo {
    pub warehouse: PathBuf,
    pub table: TableName,
    pub before: Inspection,
    pub after: Inspection,
    pub report: ConvertReport,
    pub live_rows: usize,
    pub read_eq_secs: f64,
    pub read_dv_secs: f64,
}

/// Reads the live rows and times it; returns (canonical rows, seconds).
async fn timed_read(catalog: &SqliteCatalog, name: &TableName) -> Result<(Vec<String>, f64)> {
    let table = LoadedTable::load(catalog, name).await?;
    let started = Instant::now();
    let batches = eqdv_workload::read::read_live_rows(&table, "main").await?;
    let seconds = started.elapsed().as_secs_f64();
    let rows =
        eqdv_workload::read::canonical_rows_for_schema(table.metadata.current_schema(), &batches)?;
    Ok((rows, seconds))
}

pub async fn run(args: &DemoArgs, json_out: bool) -> Result<u8> {
    let warehouse = match &args.warehouse {
        Some(w) => w.to_path_buf(),
        None => std::env::temp_dir().join(format!(
            "eqdv-demo-{}-{}",
            std::process::id(),
            chrono_like_stamp()
        )),
    };
    let catalog = SqliteCatalog::open_warehouse(&warehouse)?;
    let name = TableName::new("demo", "events");
    let quiet = json_out;

    let bar = spinner("generating a CDC workload", quiet);
    let generated =
        eqdv_workload::generate::generate(&catalog, &name, &args.workload.spec()?).await?;
    bar.finish_and_clear();

    let table = LoadedTable::load(&catalog, &name).await?;
    let before = inspect(&table, "main").await?;
    let bar = spinner("reading the table with equality deletes", quiet);
    let (rows_before, read_eq_secs) = timed_read(&catalog, &name).await?;
    bar.finish_and_clear();

    let bar = spinner("converting equality deletes to deletion vectors", quiet);
    let report = convert(&catalog, &name, &ConvertOptions::default()).await?;
    bar.finish_and_clear();

    let table = LoadedTable::load(&catalog, &name).await?;
    let after = inspect(&table, "main").await?;
    let bar = spinner("reading the table with deletion vectors", quiet);
    let (rows_after, read_dv_secs) = timed_read(&catalog, &name).await?;
    bar.finish_and_clear();

    if rows_before != rows_after {
        bail!(
            "rows differ after conversion: {} before, {} after (warehouse kept at {})",
            rows_before.len(),
            rows_after.len(),
            warehouse.display()
        );
    }
    let expected = eqdv_workload::generate::expected_rows(&generated.state)?;
    if rows_before != expected {
        bail!(
            "the table's rows differ from the generator's model ({} read, {} expected)",
            rows_before.len(),
            expected.len()
        );
    }
    output::print_demo(
        &Demo {
            warehouse,
            table: name,
            before,
            after,
            report,
            live_rows: rows_after.len(),
            read_eq_secs,
            read_dv_secs,
        },
        json_out,
    )?;
    Ok(exit::OK)
}

fn chrono_like_stamp() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
