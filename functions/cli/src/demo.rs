//! `eqdv demo`: the whole job on a fresh local warehouse, with before/after evidence.

use std::path::Path;
use std::time::Instant;

use anyhow::{Result, bail};
use eqdv::catalog::{SqliteCatalog, TableName};
use eqdv::convert::{ConvertOptions, convert};
use eqdv::inspect::inspect;
use eqdv::table::LoadedTable;
use serde_json::json;

use crate::output::{Summary, spinner};
use crate::{WorkloadArgs, exit, print_report};

/// Reads the live rows and times it; returns (canonical rows, seconds).
async fn timed_read(catalog: &SqliteCatalog, name: &TableName) -> Result<(Vec<String>, f64)> {
    let table = LoadedTable::load(catalog, name).await?;
    let started = Instant::now();
    let batches = eqdv::read::read_live_rows(&table, "main").await?;
    let seconds = started.elapsed().as_secs_f64();
    let rows = eqdv::read::canonical_rows_for_schema(table.metadata.current_schema(), &batches)?;
    Ok((rows, seconds))
}

pub async fn run(warehouse: Option<&Path>, workload: &WorkloadArgs, json_out: bool) -> Result<u8> {
    let warehouse = match warehouse {
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
    let generated = eqdv::generate::generate(&catalog, &name, &workload.spec()?).await?;
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
    let expected = eqdv::generate::expected_rows(&generated.state)?;
    if rows_before != expected {
        bail!(
            "the table's rows differ from the generator's model ({} read, {} expected)",
            rows_before.len(),
            expected.len()
        );
    }
    let ratio = if read_dv_secs > 0.0 {
        read_eq_secs / read_dv_secs
    } else {
        f64::INFINITY
    };

    if json_out {
        let out = json!({
            "warehouse": warehouse,
            "table": name.to_string(),
            "before": before,
            "after": after,
            "convert": report,
            "live_rows": rows_after.len(),
            "rows_identical": true,
            "read_seconds_with_equality_deletes": read_eq_secs,
            "read_seconds_with_dvs": read_dv_secs,
            "read_speedup": ratio,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(exit::OK);
    }

    let mut s = Summary::new(format!("eqdv demo: {} in {}", name, warehouse.display()));
    s.row("", "before  ->  after")
        .row(
            "equality delete files",
            format!(
                "{}  ->  {}",
                before.totals.equality_delete_files, after.totals.equality_delete_files
            ),
        )
        .row(
            "equality delete rows",
            format!(
                "{}  ->  {}",
                before.totals.equality_deletes, after.totals.equality_deletes
            ),
        )
        .row(
            "deletion vectors",
            format!("{}  ->  {}", before.totals.dvs, after.totals.dvs),
        )
        .row(
            "positions in DVs",
            format!(
                "{}  ->  {}",
                before.totals.dv_positions, after.totals.dv_positions
            ),
        )
        .row(
            "data files",
            format!(
                "{}  ->  {}",
                before.totals.data_files, after.totals.data_files
            ),
        )
        .row("live rows (identical)", rows_after.len())
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
            format!("{:.1} ms", read_eq_secs * 1000.0),
        )
        .row(
            "read time, deletion vectors",
            format!("{:.1} ms", read_dv_secs * 1000.0),
        )
        .row("read speedup", format!("{ratio:.1}x"));
    s.print();
    print_report(&report);
    println!(
        "Open it with PyIceberg: SqlCatalog(\"eqdv\", uri=\"sqlite:///{0}/catalog.db\", warehouse=\"file://{0}\")",
        warehouse.display()
    );
    Ok(exit::OK)
}

fn chrono_like_stamp() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
