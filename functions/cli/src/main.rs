//! `eqdv`: convert Iceberg equality deletes into deletion vectors from the command line.
//!
//! Wiring only: the top-level command and its dispatch here, one module per subcommand
//! (its arguments, what it runs and what it prints), the printing helpers they share in
//! `output`. The work is in the engine (`shared/`), which the Lambdas use too.

mod args;
mod backfill;
mod cleanup;
mod convert;
mod demo;
mod generate;
mod inspect;
mod output;
mod plan;
mod rows;
mod split;
mod staging;

use std::process::ExitCode;

use anyhow::Result;
use clap::{Parser, Subcommand};

/// Exit codes scripts can rely on.
pub mod exit {
    /// Converted (or the command succeeded).
    pub const OK: u8 = 0;
    /// Failed: the error is printed; the table is unchanged.
    pub const FAILED: u8 = 1;
    /// Nothing to do: no live equality deletes in scope.
    pub const NOTHING_TO_DO: u8 = 3;
}

#[derive(Parser)]
#[command(
    name = "eqdv",
    version,
    about = "Converts Apache Iceberg equality deletes into deletion vectors"
)]
struct Cli {
    /// Print machine-readable JSON on stdout instead of tables.
    #[arg(long, global = true)]
    json: bool,
    /// Log filter (RUST_LOG syntax), e.g. `info` or `eqdv=debug`. The default leaves out
    /// the storage layer's retry notices (each holds a whole HTTP response); `debug`
    /// shows them, and the raw detail of an error.
    #[arg(long, global = true, default_value = "warn,opendal=error")]
    log: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Create a v3 table (if needed) and commit CDC batches with equality deletes.
    Generate(generate::GenerateArgs),
    /// Show the conversion plan: groups of equality deletes and shards.
    Plan(plan::PlanArgs),
    /// Convert live equality deletes into deletion vectors and commit.
    Convert(convert::ConvertArgs),
    /// Show data files, equality deletes, DVs and position deletes per partition.
    Inspect(inspect::InspectArgs),
    /// Print the table's live rows in canonical form (one JSON array per line, sorted).
    Rows(rows::RowsArgs),
    /// Delete files under the table location that no metadata version references
    /// (left by crashed or failed commits). Deletes nothing if any metadata is unreadable.
    Cleanup(cleanup::CleanupArgs),
    /// Plan and convert many tables in-process, as the planner and converter Lambdas
    /// would: a database, some tables, or every table of the catalog.
    Backfill(backfill::BackfillArgs),
    /// One shard split into data ranges, task by task, as the deployed state machine
    /// runs it: write the job, convert each range, commit them once, or clean up.
    Split(split::SplitArgs),
    /// A fresh local warehouse: generate, convert, and show before/after with timings.
    Demo(demo::DemoArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(&cli.log);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(exit::FAILED);
        }
    };
    match runtime.block_on(run(&cli)) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            tracing::debug!(error = ?e, "error detail");
            output::print_error(&e, cli.json);
            ExitCode::from(exit::FAILED)
        }
    }
}

fn init_logging(filter: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .or_else(|_| tracing_subscriber::EnvFilter::try_new(filter))
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(eqdv_functions::logging::without_credentials(filter))
        .with_writer(std::io::stderr)
        .init();
}

async fn run(cli: &Cli) -> Result<u8> {
    let json = cli.json;
    match &cli.command {
        Command::Generate(args) => generate::run(args, json).await,
        Command::Plan(args) => plan::run(args, json).await,
        Command::Convert(args) => convert::run(args, json).await,
        Command::Inspect(args) => inspect::run(args, json).await,
        Command::Rows(args) => rows::run(args).await,
        Command::Cleanup(args) => cleanup::run(args, json).await,
        Command::Backfill(args) => backfill::run(args, json).await,
        Command::Split(args) => split::run(args, json).await,
        Command::Demo(args) => demo::run(args, json).await,
    }
}
