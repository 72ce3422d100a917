//! `eqdv-bench`: the Rust side of the benchmark harness (benches/run drives it).
//!
//! `build-base` and `build-scenario` make the tables (`build-big` the million-file one); `reset`, `convert`, `floor`, `s3-floor`,
//! `read-iceberg` and `read-eqdv` are the measured runs, one process each, so the
//! driver measures each one's wall time, CPU time and peak RSS on its own. Every
//! command prints one JSON object on stdout.

mod big_table;
mod runs;
mod s3_floor;
mod tables;

use std::path::PathBuf;

use anyhow::Result;
use clap::{Parser, Subcommand};

use crate::runs::{ConvertArgs, read_scenario};
use crate::tables::{DeleteSpec, Dist, KeyKind, Layout};

#[derive(Parser)]
#[command(
    name = "eqdv-bench",
    about = "eqdv's benchmark harness (see benches/run)"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Writes a base table (`bench.base`) of FILES data files x ROWS rows.
    BuildBase {
        #[arg(long)]
        warehouse: PathBuf,
        #[arg(long)]
        files: u64,
        #[arg(long)]
        rows_per_file: u64,
        #[arg(long, value_enum)]
        key: KeyKind,
        /// bucket[N](k) partitioning; 0 = unpartitioned.
        #[arg(long, default_value_t = 0)]
        buckets: u32,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Files written at once.
        #[arg(long, default_value_t = 2)]
        jobs: usize,
    },
    /// Creates `bench.NAME`: the base's data files plus equality deletes of KEYS rows.
    BuildScenario {
        #[arg(long)]
        warehouse: PathBuf,
        #[arg(long)]
        name: String,
        #[arg(long, value_enum)]
        dist: Dist,
        #[arg(long)]
        keys: u64,
        #[arg(long, default_value_t = 7)]
        seed: u64,
        /// Also delete this many keys that no row holds (long keys, unpartitioned).
        #[arg(long, default_value_t = 0)]
        absent: u64,
    },
    /// Creates `bench.big`: DAYS x FILES_PER_DAY data files, one append (one data
    /// manifest) a day, equality deletes in the last TOUCHED_DAYS days; only those
    /// days' data files are written.
    BuildBig {
        #[arg(long)]
        warehouse: PathBuf,
        #[arg(long)]
        days: u32,
        #[arg(long)]
        files_per_day: u32,
        #[arg(long)]
        rows_per_file: u32,
        #[arg(long)]
        touched_days: u32,
        #[arg(long)]
        keys_per_day: u32,
        /// Every append writes one file into every day (needs FILES_PER_DAY = DAYS):
        /// manifests that span every partition, instead of one day each.
        #[arg(long)]
        spread: bool,
        /// Files written at once.
        #[arg(long, default_value_t = 8)]
        jobs: usize,
    },
    /// Points a scenario's table back at its state with equality deletes.
    Reset {
        #[arg(long)]
        scenario: PathBuf,
    },
    /// eqdv's conversion of a scenario's table (committed; `reset` undoes it).
    Convert {
        #[arg(long)]
        scenario: PathBuf,
        /// Read every candidate (the #18003 baseline).
        #[arg(long)]
        no_pruning: bool,
        #[arg(long)]
        key_memory_mb: Option<u64>,
        #[arg(long)]
        parallelism: Option<usize>,
    },
    /// The data files eqdv's pruning leaves to open (a dry resolve, nothing committed),
    /// for DuckDB given the same candidates.
    Candidates {
        #[arg(long)]
        scenario: PathBuf,
    },
    /// Times the phases of a conversion (load, manifests, plan, resolve, whole).
    Phases {
        #[arg(long)]
        scenario: PathBuf,
    },
    /// The floor: decode only the key column of the files that truly hold a key.
    Floor {
        #[arg(long)]
        scenario: PathBuf,
        #[arg(long, default_value_t = 2)]
        threads: usize,
    },
    /// The S3 floor of a Glue table's resolve (benches/s3_latency): the delete files and
    /// the key column chunks that hold a deleted key, fetched at once, decoded, probed.
    S3Floor {
        #[arg(long)]
        warehouse: String,
        #[arg(long)]
        table: String,
        #[arg(long, default_value_t = 64)]
        parallelism: usize,
        #[arg(long, default_value_t = 3)]
        reps: usize,
        /// The S3 endpoint of the untimed preparation (default: the timed runs' one).
        #[arg(long)]
        prepare_s3_endpoint: Option<String>,
    },
    /// iceberg-rust's scan of a metadata file (optionally one snapshot): rows and sum(v).
    ReadIceberg {
        #[arg(long)]
        metadata: String,
        #[arg(long)]
        snapshot: Option<i64>,
    },
    /// eqdv's reference reader at the head of a metadata file: rows and sum(v).
    ReadEqdv {
        #[arg(long)]
        metadata: String,
    },
}

#[tokio::main]
async fn main() -> Result<()> {
    let cli = Cli::parse();
    let out = match cli.command {
        Command::BuildBase {
            warehouse,
            files,
            rows_per_file,
            key,
            buckets,
            seed,
            jobs,
        } => {
            let layout = Layout {
                files,
                rows_per_file,
                key,
                buckets,
                seed,
            };
            let base = tables::build_base(&warehouse, &layout, jobs).await?;
            serde_json::json!({
                "table": base.table,
                "files": base.files.len(),
                "data_bytes": base.data_bytes,
                "metadata_location": base.metadata_location,
            })
        }
        Command::BuildScenario {
            warehouse,
            name,
            dist,
            keys,
            seed,
            absent,
        } => {
            let spec = DeleteSpec {
                dist,
                keys,
                seed,
                absent,
            };
            let s = tables::build_scenario(&warehouse, &name, &spec).await?;
            serde_json::json!({
                "table": s.table,
                "delete_files": s.delete_files.len(),
                "truth_files": s.truth_files.len(),
                "metadata_before": s.metadata_before,
            })
        }
        Command::BuildBig {
            warehouse,
            days,
            files_per_day,
            rows_per_file,
            touched_days,
            keys_per_day,
            spread,
            jobs,
        } => {
            let layout = big_table::BigLayout {
                days,
                files_per_day,
                rows_per_file,
                touched_days,
                keys_per_day,
                clustered: !spread,
            };
            serde_json::to_value(big_table::build_big(&warehouse, &layout, jobs).await?)?
        }
        Command::Reset { scenario } => runs::reset(&read_scenario(&scenario)?).await?,
        Command::Convert {
            scenario,
            no_pruning,
            key_memory_mb,
            parallelism,
        } => {
            let args = ConvertArgs {
                no_pruning,
                key_memory_mb,
                parallelism,
            };
            runs::run_convert(&read_scenario(&scenario)?, &args).await?
        }
        Command::Candidates { scenario } => {
            runs::run_candidates(&read_scenario(&scenario)?).await?
        }
        Command::Phases { scenario } => runs::run_phases(&read_scenario(&scenario)?).await?,
        Command::Floor { scenario, threads } => {
            let scenario = read_scenario(&scenario)?;
            tokio::task::spawn_blocking(move || runs::run_floor(&scenario, threads)).await??
        }
        Command::S3Floor {
            warehouse,
            table,
            parallelism,
            reps,
            prepare_s3_endpoint,
        } => s3_floor::run(&warehouse, &table, parallelism, reps, prepare_s3_endpoint).await?,
        Command::ReadIceberg { metadata, snapshot } => {
            runs::read_iceberg(&metadata, snapshot).await?
        }
        Command::ReadEqdv { metadata } => runs::read_eqdv(&metadata).await?,
    };
    println!("{out}");
    Ok(())
}
