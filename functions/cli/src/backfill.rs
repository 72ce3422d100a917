//! `eqdv backfill`: the planner and converter functions' own handlers run in-process on
//! a database, one table, or (a sweep) every allowed table of the catalog.

use std::sync::Arc;

use anyhow::Result;
use clap::Args;
use eqdv::catalog::TableName;
use eqdv::planner::{BackfillScope, TableDecision, Trigger};
use eqdv_functions::FunctionConfig;
use eqdv_functions::converter::Converter;
use eqdv_functions::planner::{InPlanner, Planner, PlannerRun};
use eqdv_functions::queue::InProcessQueue;
use serde_json::{Value, json};

use crate::args::{CatalogArgs, with_option};
use crate::exit;
use crate::output::{out, print_json, print_table, progress_bytes, spinner};

#[derive(Args)]
pub struct BackfillArgs {
    #[command(flatten)]
    catalog: CatalogArgs,
    /// Every Iceberg table of this database (or, with --table, one table of it).
    #[arg(long)]
    database: Option<String>,
    /// A table of --database.
    #[arg(long, requires = "database")]
    table: Option<String>,
    /// The branch to convert.
    #[arg(long, default_value = "main")]
    branch: String,
    /// Plan only: print the shards, convert nothing.
    #[arg(long)]
    dry_run: bool,
}

/// Recorded as `eqdv.source` in the summaries of the snapshots a backfill commits.
const SOURCE: &str = "eqdv backfill (CLI)";

/// The planner's shards go to a queue in memory, and each is converted as the
/// converter would.
pub async fn run(args: &BackfillArgs, json: bool) -> Result<u8> {
    let BackfillArgs {
        catalog,
        database,
        table,
        branch,
        dry_run,
    } = args;
    let dry_run = *dry_run;
    // The same variables as the functions (allowlist, memory budget, retries), the
    // catalog's options over them.
    let mut config = FunctionConfig::from_lookup(catalog.lookup()).map_err(with_option)?;
    config.emit_metrics = false;
    config.branch = branch.to_string();
    // The trigger the planner function would parse from a backfill request (a sweep
    // without --database), with the same refusal of blank names.
    let trigger = match (database, table) {
        (Some(db), table) => {
            let branch = non_blank("branch", branch)?.to_string();
            let db = non_blank("database", db)?;
            let scope = match table {
                Some(t) => BackfillScope::Tables(vec![TableName::new(db, non_blank("table", t)?)]),
                None => BackfillScope::Database(db.to_string()),
            };
            Trigger::Backfill {
                scope,
                branch: Some(branch),
                dry_run,
            }
        }
        (None, _) => Trigger::Sweep,
    };
    let queue = Arc::new(InProcessQueue::default());
    // As on Lambda, a plan's only shard within EQDV_CONVERT_IN_PLANNER_MAX_MB is
    // converted by the planner itself.
    let in_planner = match config.convert_in_planner_bytes {
        0 => None,
        _ => Some(Converter {
            catalog: config.catalog.connect().await.map_err(with_option)?,
            config: config.clone(),
            dead_letters: None,
            source: SOURCE.into(),
            kept_reads: Default::default(),
        }),
    };
    let planner = Planner {
        catalog: config.catalog.connect().await.map_err(with_option)?,
        config: config.clone(),
        queue: Box::new(queue.clone()),
        // Nothing starts executions in-process: the shards are queued, and the big ones
        // split below, in this process.
        splits: None,
        converter: in_planner,
        // One invocation per process: each table keeps its own reads.
        kept_reads: Default::default(),
    };
    let planning = spinner("planning the tables", json);
    let run = planner.run_triggers(&[trigger], None).await?;
    planning.finish_and_clear();
    let converter = Converter {
        catalog: config.catalog.connect().await.map_err(with_option)?,
        config,
        dead_letters: None,
        source: SOURCE.into(),
        // One process per backfill: nothing to keep across invocations.
        kept_reads: Default::default(),
    };
    let mut reports = Vec::new();
    let mut failed = 0usize;
    // A shard the planner converted itself is not queued: its report is the planner's.
    for shard in &run.response.shards {
        if let Some(InPlanner::Converted(report)) = &shard.in_planner {
            reports.push(serde_json::to_value(report)?);
        }
    }
    // A sweep has no dry-run flag of its own: its shards are simply not converted.
    let shards = if dry_run { Vec::new() } else { queue.drain() };
    // Progress in the shards' estimated bytes of work, the unit the planner sized them in.
    let bar = progress_bytes(shards.iter().map(|s| s.estimated_bytes).sum(), json);
    let count = shards.len();
    for (done, shard) in shards.into_iter().enumerate() {
        bar.set_message(format!("shard {} of {count}: {}", done + 1, shard.table));
        // A shard the planner would split on Lambda is split here too, in this process.
        let ranges = converter.config.split_ranges(shard.estimated_bytes);
        match converter
            .convert_shard_in_ranges(&shard, None, ranges)
            .await
        {
            Ok(r) => reports.push(serde_json::to_value(&r)?),
            Err(e) => {
                failed += 1;
                reports.push(serde_json::json!({ "table": shard.table.to_string(), "shard": shard.id, "error": e.to_string() }));
            }
        }
        bar.inc(shard.estimated_bytes);
    }
    bar.finish_and_clear();
    print_backfill(&run, &reports, failed, dry_run, json)?;
    Ok(if failed > 0 || !run.failures.is_empty() {
        exit::FAILED
    } else if run.response.shards.is_empty() {
        exit::NOTHING_TO_DO
    } else {
        exit::OK
    })
}

/// A name from the command line; blank ones are refused.
fn non_blank<'a>(flag: &str, value: &'a str) -> Result<&'a str> {
    if value.trim().is_empty() {
        return Err(eqdv::Error::InvalidInput(format!("--{flag}: must not be empty")).into());
    }
    Ok(value)
}

/// `eqdv backfill`: the planner's decision per table, then how the shards converted.
pub fn print_backfill(
    run: &PlannerRun,
    conversions: &[Value],
    failed: usize,
    dry_run: bool,
    json: bool,
) -> Result<()> {
    let summary = &run.response;
    if json {
        return print_json(
            &json!({ "plan": summary, "conversions": conversions, "failures": run.failures }),
        );
    }
    let rows: Vec<Vec<String>> = summary
        .tables
        .iter()
        .map(|(t, d)| {
            let (what, why) = match d {
                TableDecision::Planned { shards } => {
                    ("planned".to_string(), format!("{shards} shard(s)"))
                }
                TableDecision::NothingToDo { reason } => {
                    ("nothing to do".to_string(), reason.clone())
                }
                TableDecision::Skipped { reason } => ("skipped".to_string(), reason.clone()),
                TableDecision::Failed { error } => ("failed".to_string(), error.clone()),
            };
            vec![t.clone(), what, why]
        })
        .collect();
    print_table(&["table", "decision", "why"], &rows);
    if !dry_run {
        out!(
            "converted {} shard(s), {failed} failed",
            conversions.len() - failed
        );
    }
    Ok(())
}
