//! `eqdv split`: one shard split into data ranges, run one task at a time, as the
//! deployed state machine runs it on Lambda (`eqdv::convert::split`): `job` writes the
//! split's job, `range` converts one range (each may run in its own process or on its
//! own machine), `commit` commits them all in one snapshot, `cleanup` removes what a
//! split that will not commit wrote. An operator also uses `commit` and `cleanup` on a
//! deployed split's job (the execution's input, as the Step Functions console shows it),
//! e.g. after its fan-in ended in `eqdv.CommitStateUnknown`.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use eqdv::convert::{
    ConvertOptions, MAX_RANGES, Outcome, SplitJob, run_cleanup_task, run_commit_task,
    run_range_task,
};
use eqdv::plan::PlanOptions;
use eqdv::table::LoadedTable;
use serde::Serialize;

use crate::args::{CatalogArgs, TableArgs};
use crate::convert::load_shard;
use crate::exit;
use crate::output;

#[derive(Args)]
pub struct SplitArgs {
    #[command(subcommand)]
    task: SplitCommand,
}

#[derive(Subcommand)]
enum SplitCommand {
    /// Split the table's one shard (or a shard of a saved plan) into N data ranges: write
    /// the split's job (JSON) for the other tasks.
    Job(JobArgs),
    /// Convert one data range of a split: its DVs and result are stored beside the
    /// table; nothing is committed.
    Range(RangeArgs),
    /// Commit every range of a split in one snapshot (or report the snapshot an earlier
    /// commit of the split made). A range without a result commits nothing.
    Commit(TaskArgs),
    /// Remove every range's files of a split that will not commit (nothing, if it did).
    Cleanup(TaskArgs),
}

#[derive(Args)]
struct JobArgs {
    #[command(flatten)]
    table: TableArgs,
    /// How many data ranges.
    #[arg(
        long,
        value_name = "N",
        value_parser = clap::value_parser!(u32).range(2..=i64::from(MAX_RANGES))
    )]
    ranges: u32,
    /// Split a shard of this plan file (written by `plan --output`) ...
    #[arg(long, value_name = "PLAN_FILE", requires = "shard_id")]
    plan: Option<PathBuf>,
    /// ... with this id. Without them, the table is planned now and must make one shard.
    #[arg(long, value_name = "ID", requires = "plan")]
    shard_id: Option<String>,
    /// Write the job here (it is printed either way).
    #[arg(long, value_name = "FILE")]
    output: Option<PathBuf>,
}

#[derive(Args)]
struct TaskArgs {
    #[command(flatten)]
    catalog: CatalogArgs,
    /// The split's job: a file written by `split job`, or a split execution's input
    /// (`{"split": JOB, ...}`).
    #[arg(long, value_name = "FILE")]
    job: PathBuf,
}

#[derive(Args)]
struct RangeArgs {
    #[command(flatten)]
    task: TaskArgs,
    /// The range to convert, 0 to N-1.
    #[arg(long, value_name = "I")]
    range: u32,
}

pub async fn run(args: &SplitArgs, json: bool) -> Result<u8> {
    match &args.task {
        SplitCommand::Job(a) => job(a).await,
        SplitCommand::Range(a) => {
            let job = read_job(&a.task.job)?;
            let catalog = a.task.catalog.connect().await?;
            let out = run_range_task(catalog.as_ref(), &job, &options(), a.range).await?;
            print(&out)?;
            Ok(exit::OK)
        }
        SplitCommand::Commit(a) => {
            let job = read_job(&a.job)?;
            let catalog = a.catalog.connect().await?;
            let report = run_commit_task(catalog.as_ref(), &job, &options()).await?;
            crate::convert::print_convert_report(&report, json)?;
            Ok(match report.outcome {
                Outcome::NothingToDo => exit::NOTHING_TO_DO,
                Outcome::Converted | Outcome::DryRun => exit::OK,
            })
        }
        SplitCommand::Cleanup(a) => {
            let job = read_job(&a.job)?;
            let catalog = a.catalog.connect().await?;
            let cleanup = run_cleanup_task(catalog.as_ref(), &job).await?;
            print(&cleanup)?;
            Ok(exit::OK)
        }
    }
}

async fn job(args: &JobArgs) -> Result<u8> {
    let name = args.table.name()?;
    let shard = match (&args.plan, &args.shard_id) {
        (Some(plan), Some(id)) => load_shard(plan, id)?,
        _ => {
            let catalog = args.table.catalog().await?;
            let table = LoadedTable::load(catalog.as_ref(), &name).await?;
            table.require_v3()?;
            let branch = &args.table.branch;
            table.require_branch(branch)?;
            let files = eqdv::plan::read_for_plan(&table, table.head(branch)?.as_ref()).await?;
            // One shard for the whole table unless its groups are apart: a split is
            // what carries the size.
            let options = PlanOptions {
                target_shard_bytes: u64::MAX,
                ..Default::default()
            };
            let mut plan = eqdv::plan::plan(&table, branch, &files, &options)?;
            match plan.shards.len() {
                0 => {
                    output::write_stdout(format_args!(
                        "{name}: no live equality deletes on branch {branch}: nothing to split\n"
                    ));
                    return Ok(exit::NOTHING_TO_DO);
                }
                1 => plan.shards.remove(0),
                n => anyhow::bail!(
                    "{name} plans {n} shards on branch {branch}: save the plan (`eqdv plan --output FILE`) and name one with --plan FILE --shard-id ID"
                ),
            }
        }
    };
    let job = SplitJob::new(shard, args.ranges)?;
    if let Some(path) = &args.output {
        std::fs::write(path, serde_json::to_vec_pretty(&job)?)
            .with_context(|| format!("writing the split job to {}", path.display()))?;
    }
    print(&job)?;
    Ok(exit::OK)
}

/// A split's job from `path`: the job itself, or an execution input holding it.
fn read_job(path: &Path) -> Result<SplitJob> {
    let bytes =
        std::fs::read(path).with_context(|| format!("reading split job {}", path.display()))?;
    let value: serde_json::Value = serde_json::from_slice(&bytes)
        .with_context(|| format!("split job {} is not JSON", path.display()))?;
    let value = match value.get("split") {
        Some(inner) => inner.clone(),
        None => value,
    };
    let job: SplitJob = serde_json::from_value(value).with_context(|| {
        format!(
            "{} is not a split job written by `eqdv split job` (or a split execution's input)",
            path.display()
        )
    })?;
    job.check()?;
    Ok(job)
}

fn options() -> ConvertOptions {
    ConvertOptions {
        source: "eqdv split (CLI)".into(),
        ..Default::default()
    }
}

/// The tasks' outputs are records for scripts: JSON with or without `--json`.
fn print(value: &impl Serialize) -> Result<()> {
    output::write_stdout(format_args!("{}\n", serde_json::to_string_pretty(value)?));
    Ok(())
}
