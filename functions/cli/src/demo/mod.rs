//! `eqdv demo`: the whole job on a fresh local warehouse, with before/after evidence:
//! the rows read the same, and a reader other than eqdv's (DuckDB, where one is at hand)
//! reads the table faster with DVs than with equality deletes.

mod duckdb;

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Result, bail};
use clap::Args;
use eqdv::catalog::{SqliteCatalog, TableName};
use eqdv::convert::{ConvertOptions, ConvertReport, convert};
use eqdv::inspect::{Inspection, PartitionCounts, inspect};
use eqdv::table::LoadedTable;
use serde_json::json;

use duckdb::DuckDbReads;

use crate::args::{WorkloadArgs, WorkloadSize};
use crate::convert::convert_summary;
use crate::exit;
use crate::output::{Summary, conversion_progress, out, print_json, spinner};

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
    pub duckdb: DuckDbReads,
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
    let generated = eqdv_workload::generate::generate(
        &catalog,
        &name,
        &args.workload.spec(&WorkloadSize::DEMO)?,
    )
    .await?;
    bar.finish_and_clear();

    let table = LoadedTable::load(&catalog, &name).await?;
    let metadata_before = table.pointer.metadata_location.clone();
    let before = inspect(&table, "main").await?;
    let bar = spinner("reading the table with equality deletes", quiet);
    let (rows_before, read_eq_secs) = timed_read(&catalog, &name).await?;
    bar.finish_and_clear();

    let (bar, progress) =
        conversion_progress("converting equality deletes to deletion vectors", quiet);
    let mut options = ConvertOptions::default();
    options.resolve.progress = progress;
    let report = convert(&catalog, &name, &options).await?;
    bar.finish_and_clear();

    let table = LoadedTable::load(&catalog, &name).await?;
    let metadata_after = table.pointer.metadata_location.clone();
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
    let bar = spinner("reading both tables with DuckDB", quiet);
    let live_rows = rows_after.len() as u64;
    let duckdb = tokio::task::spawn_blocking(move || {
        duckdb::time_reads(
            &duckdb::python(),
            &metadata_before,
            &metadata_after,
            live_rows,
        )
    })
    .await?;
    bar.finish_and_clear();
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
            duckdb,
        },
        json_out,
    )?;
    Ok(exit::OK)
}

/// "812.0 ms  ->  95.2 ms (8.5x faster)": a read with equality deletes, then with DVs.
fn read_times(with_deletes: f64, with_dvs: f64) -> String {
    let speedup = if with_dvs > 0.0 {
        format!("{:.1}x faster", with_deletes / with_dvs)
    } else {
        "-".into()
    };
    format!(
        "{:.1} ms  ->  {:.1} ms ({speedup})",
        with_deletes * 1000.0,
        with_dvs * 1000.0
    )
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
            "duckdb": d.duckdb,
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
            "read time, eqdv's reader",
            read_times(d.read_eq_secs, d.read_dv_secs),
        );
    match &d.duckdb {
        DuckDbReads::Timed {
            version,
            seconds_with_equality_deletes,
            seconds_with_dvs,
        } => s.row(
            format!("read time, DuckDB {version} (best of <= {})", duckdb::READS),
            read_times(*seconds_with_equality_deletes, *seconds_with_dvs),
        ),
        DuckDbReads::Misread {
            version,
            rows_with_equality_deletes,
            rows_with_dvs,
        } => s.row(
            format!("DuckDB {version} (misreads this table)"),
            format!("{rows_with_equality_deletes}  ->  {rows_with_dvs} rows"),
        ),
        DuckDbReads::NotAtHand { reason } => s.row(
            "DuckDB",
            format!("not timed: {reason} ({})", duckdb::INSTALL),
        ),
        DuckDbReads::Failed { reason } => s.row("DuckDB", format!("failed: {reason}")),
    };
    s.print();
    convert_summary(report).print();
    out!(
        "Open it with PyIceberg: SqlCatalog(\"eqdv\", uri=\"sqlite:///{0}/catalog.db\", warehouse=\"file://{0}\")",
        d.warehouse.display()
    );
    Ok(())
}
