//! `eqdv demo`: the whole job on a fresh local warehouse, with before/after evidence.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Result, bail};
use clap::Args;
use eqdv::catalog::{SqliteCatalog, TableName};
use eqdv::convert::{ConvertOptions, ConvertReport, convert};
use eqdv::inspect::{Inspection, PartitionCounts, inspect};
use eqdv::table::LoadedTable;
use serde_json::json;

use crate::args::WorkloadArgs;
use crate::convert::convert_summary;
use crate::exit;
use crate::output::{Summary, out, print_json, spinner};

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
    print_demo(
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

/// `eqdv demo`: before and after, the read times, then the conversion's own report.
pub fn print_demo(d: &Demo, json: bool) -> Result<()> {
    let (before, after, report) = (&d.before, &d.after, &d.report);
    let ratio = if d.read_dv_secs > 0.0 {
        d.read_eq_secs / d.read_dv_secs
    } else {
        f64::INFINITY
    };
    if json {
        return print_json(&json!({
            "warehouse": d.warehouse,
            "table": d.table.to_string(),
            "before": before,
            "after": after,
            "convert": report,
            "live_rows": d.live_rows,
            "rows_identical": true,
            "read_seconds_with_equality_deletes": d.read_eq_secs,
            "read_seconds_with_dvs": d.read_dv_secs,
            "read_speedup": ratio,
        }));
    }
    let mut s = Summary::new(format!(
        "eqdv demo: {} in {}",
        d.table,
        d.warehouse.display()
    ));
    // One table count before and after the conversion.
    let change = |count: fn(&PartitionCounts) -> u64| {
        format!("{}  ->  {}", count(&before.totals), count(&after.totals))
    };
    s.row("", "before  ->  after")
        .row("equality delete files", change(|t| t.equality_delete_files))
        .row("equality delete rows", change(|t| t.equality_deletes))
        .row("deletion vectors", change(|t| t.dvs))
        .row("positions in DVs", change(|t| t.dv_positions))
        .row("data files", change(|t| t.data_files))
        .row("live rows (identical)", d.live_rows)
        .row(
            "data files opened / candidates",
            format!(
                "{} / {}",
                report.resolve.files_opened, report.resolve.candidate_files
            ),
        )
        .row("pruned by column bounds", report.resolve.pruned_by_bounds)
        .row(
            "read time, equality deletes",
            format!("{:.1} ms", d.read_eq_secs * 1000.0),
        )
        .row(
            "read time, deletion vectors",
            format!("{:.1} ms", d.read_dv_secs * 1000.0),
        )
        .row("read speedup", format!("{ratio:.1}x"));
    s.print();
    convert_summary(report).print();
    out!(
        "Open it with PyIceberg: SqlCatalog(\"eqdv\", uri=\"sqlite:///{0}/catalog.db\", warehouse=\"file://{0}\")",
        d.warehouse.display()
    );
    Ok(())
}
