//! `eqdv`: convert Iceberg equality deletes into deletion vectors from the command line.
//!
//! Wiring only: argument parsing, output and exit codes. The work is in the engine
//! (`shared/`), which the Lambdas use too.

mod cleanup;
mod demo;
mod output;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};
use eqdv::catalog::{Catalog, GlueCatalog, GlueConfig, SqliteCatalog, TableName};
use eqdv::convert::{ConvertOptions, ConvertReport, Outcome, convert};
use eqdv::plan::{Plan, PlanOptions, Shard};
use eqdv::table::{LoadedTable, TableFiles};

use crate::output::{Summary, print_table, spinner};

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

/// Which catalog holds the tables.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum CatalogKind {
    /// The embedded default: a SQLite catalog file in a warehouse directory.
    Sqlite,
    /// The AWS Glue Data Catalog, with table data on S3.
    Glue,
}

/// Which catalog.
#[derive(Args, Clone)]
struct CatalogArgs {
    /// The catalog: `sqlite` (DIR/catalog.db, catalog name `eqdv`) or `glue`.
    #[arg(long, value_enum, default_value = "sqlite", env = "EQDV_CATALOG")]
    catalog: CatalogKind,
    /// sqlite: the warehouse directory (catalog and table data). glue: where new tables
    /// go, as s3://bucket/prefix (existing tables keep their own location).
    #[arg(long, value_name = "DIR|S3_URI", env = "EQDV_WAREHOUSE")]
    warehouse: Option<String>,
    /// glue: the catalog's AWS account id, when it is not the caller's.
    #[arg(long, env = "EQDV_GLUE_CATALOG_ID")]
    glue_catalog_id: Option<String>,
    /// glue: the AWS region (default: the standard AWS configuration).
    #[arg(long, env = "EQDV_REGION")]
    region: Option<String>,
    /// glue: the Glue endpoint (default: AWS_ENDPOINT_URL_GLUE or AWS's).
    #[arg(long, env = "EQDV_GLUE_ENDPOINT")]
    glue_endpoint: Option<String>,
    /// glue: the S3 endpoint (default: AWS_ENDPOINT_URL_S3 or AWS's); path-style
    /// addressing is used when an endpoint is set.
    #[arg(long, env = "EQDV_S3_ENDPOINT")]
    s3_endpoint: Option<String>,
    /// glue: SkipArchive on UpdateTable (no Glue table version archived per commit).
    #[arg(long, env = "EQDV_GLUE_SKIP_ARCHIVE", default_value_t = true, action = clap::ArgAction::Set)]
    glue_skip_archive: bool,
}

impl CatalogArgs {
    async fn connect(&self) -> Result<Box<dyn Catalog>> {
        match self.catalog {
            CatalogKind::Sqlite => {
                let dir = self
                    .warehouse
                    .as_deref()
                    .context("--warehouse DIR is required with the sqlite catalog")?;
                let catalog = SqliteCatalog::open_warehouse(Path::new(dir))
                    .with_context(|| format!("opening warehouse {dir}"))?;
                Ok(Box::new(catalog))
            }
            CatalogKind::Glue => {
                let config = GlueConfig {
                    warehouse: self.warehouse.clone(),
                    catalog_id: self.glue_catalog_id.clone(),
                    region: self.region.clone(),
                    glue_endpoint: self.glue_endpoint.clone(),
                    s3_endpoint: self.s3_endpoint.clone(),
                    skip_archive: Some(self.glue_skip_archive),
                    ..Default::default()
                };
                Ok(Box::new(GlueCatalog::connect(config).await?))
            }
        }
    }
}

/// Which table, in which catalog.
#[derive(Args, Clone)]
struct TableArgs {
    #[command(flatten)]
    catalog: CatalogArgs,
    /// The table, as NAMESPACE.TABLE (for Glue: DATABASE.TABLE).
    #[arg(long, value_name = "NS.NAME")]
    table: String,
    /// The branch to read and commit to (`convert --plan` converts on the shard's
    /// branch; a tag is refused).
    #[arg(long, default_value = DEFAULT_BRANCH)]
    branch: String,
}

/// The branch when none is named.
const DEFAULT_BRANCH: &str = "main";

impl TableArgs {
    async fn catalog(&self) -> Result<Box<dyn Catalog>> {
        self.catalog.connect().await
    }

    fn name(&self) -> Result<TableName> {
        Ok(TableName::parse(&self.table)?)
    }
}

#[derive(Args, Clone)]
struct WorkloadArgs {
    /// Seed for the workload (same seed, same rows).
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Rows of the initial load.
    #[arg(long, default_value_t = 10_000)]
    rows: u64,
    /// CDC commits after the initial load.
    #[arg(long, default_value_t = 5)]
    commits: u32,
    /// Key column type(s): long|int|string|uuid|decimal|date|timestamp|timestamptz|binary|boolean|fixed,
    /// comma-separated for a multi-column key.
    #[arg(long, default_value = "long")]
    key: String,
    /// Partitioning: none|identity|bucket:N|day.
    #[arg(long, default_value = "none")]
    partition: String,
    /// Some keys are null (null equals null in equality deletes).
    #[arg(long)]
    null_keys: bool,
    /// Also write equality deletes with an unpartitioned spec (they apply everywhere).
    #[arg(long)]
    global_deletes: bool,
    /// Add a column halfway through the workload.
    #[arg(long)]
    add_column: bool,
}

impl WorkloadArgs {
    fn spec(&self) -> Result<eqdv::generate::WorkloadSpec> {
        Ok(eqdv::generate::WorkloadSpec {
            seed: self.seed,
            rows: self.rows,
            commits: self.commits,
            keys: eqdv::generate::parse_key_types(&self.key)?,
            partition: self.partition.parse()?,
            null_keys: self.null_keys,
            global_deletes: self.global_deletes,
            add_column: self.add_column,
            ..Default::default()
        })
    }
}

#[derive(Subcommand)]
enum Command {
    /// Create a v3 table (if needed) and commit CDC batches with equality deletes.
    Generate {
        #[command(flatten)]
        table: TableArgs,
        #[command(flatten)]
        workload: WorkloadArgs,
    },
    /// Show the conversion plan: groups of equality deletes and shards.
    Plan {
        #[command(flatten)]
        table: TableArgs,
        /// Target bytes of candidate data per shard.
        #[arg(long, default_value_t = 512 * 1024 * 1024)]
        target_shard_bytes: u64,
        /// Write the plan as JSON to this file (for `convert --shard`).
        #[arg(long, value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Convert live equality deletes into deletion vectors and commit.
    Convert {
        #[command(flatten)]
        table: TableArgs,
        /// Convert one shard: a plan file written by `plan --output` ...
        #[arg(long, value_name = "PLAN_FILE", requires = "shard_id")]
        plan: Option<PathBuf>,
        /// ... and the id of the shard in it.
        #[arg(long, value_name = "ID", requires = "plan")]
        shard_id: Option<String>,
        /// Resolve and report, but write and commit nothing.
        #[arg(long)]
        dry_run: bool,
        /// Data files read at once.
        #[arg(long)]
        parallelism: Option<usize>,
        /// Read every candidate data file: do not trust manifest column bounds,
        /// Parquet row-group statistics or bloom filters (for tables whose writers
        /// recorded bad ones).
        #[arg(long)]
        no_pruning: bool,
        /// Memory for deleted keys, in MiB; more keys are resolved in several passes.
        #[arg(
            long,
            value_name = "MIB",
            default_value_t = 1024,
            env = "EQDV_KEY_MEMORY_MB"
        )]
        key_memory_mb: u64,
    },
    /// Show data files, equality deletes, DVs and position deletes per partition.
    Inspect {
        #[command(flatten)]
        table: TableArgs,
        /// Also verify every deletion vector as readers will (Puffin footer, length,
        /// magic, CRC, cardinality, referenced data file, positions in range).
        #[arg(long)]
        verify: bool,
    },
    /// Print the table's live rows in canonical form (one JSON array per line, sorted).
    Rows {
        #[command(flatten)]
        table: TableArgs,
    },
    /// Delete files under the table location that no metadata version references
    /// (left by crashed or failed commits). Deletes nothing if any metadata is unreadable.
    Cleanup {
        #[command(flatten)]
        table: TableArgs,
        /// Delete only orphans last modified at least this long ago (units s, m, h, d:
        /// 72h, 3d, 0s); younger files may belong to a commit still in flight.
        #[arg(long, value_name = "AGE", default_value = "72h", value_parser = cleanup::parse_age)]
        older_than: std::time::Duration,
        /// Report what would be deleted; delete nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Plan and convert many tables in-process, as the planner and converter Lambdas
    /// would: a database, some tables, or every table of the catalog.
    Backfill {
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
    },
    /// A fresh local warehouse: generate, convert, and show before/after with timings.
    Demo {
        /// Warehouse directory (default: a new temporary directory, kept afterwards).
        #[arg(long, value_name = "DIR")]
        warehouse: Option<PathBuf>,
        #[command(flatten)]
        workload: WorkloadArgs,
    },
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
            let line = error_line(&e);
            tracing::debug!(error = ?e, "error detail");
            if cli.json {
                let msg = serde_json::json!({ "error": line, "detail": format!("{e:#}") });
                println!("{msg}");
            }
            eprintln!("error: {line}");
            ExitCode::from(exit::FAILED)
        }
    }
}

/// The error for operators, on one line: the context chain down to the first engine
/// error, whose message already names the operation, the table or file and the cause.
/// What lies below it (the raw SDK or storage error, with HTTP headers) is only in the
/// debug log and the JSON `detail`.
fn error_line(e: &anyhow::Error) -> String {
    let mut parts = Vec::new();
    for cause in e.chain() {
        parts.push(cause.to_string());
        if cause.downcast_ref::<eqdv::Error>().is_some() {
            break;
        }
    }
    parts
        .join(": ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

fn init_logging(filter: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .or_else(|_| tracing_subscriber::EnvFilter::try_new(filter))
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

async fn run(cli: &Cli) -> Result<u8> {
    match &cli.command {
        Command::Generate { table, workload } => {
            let catalog = table.catalog().await?;
            let name = table.name()?;
            let bar = spinner(&format!("generating {name}"), cli.json);
            let report =
                eqdv::generate::generate(catalog.as_ref(), &name, &workload.spec()?).await?;
            bar.finish_and_clear();
            let expected = eqdv::generate::expected_rows(&report.state)?.len();
            if cli.json {
                let out = serde_json::json!({
                    "table": name.to_string(),
                    "created": report.created,
                    "snapshots": report.snapshots,
                    "data_files": report.data_files,
                    "equality_delete_files": report.equality_delete_files,
                    "rows_written": report.rows_written,
                    "equality_deletes_written": report.equality_deletes_written,
                    "live_rows": report.live_rows,
                    "expected_rows": expected,
                    "metadata_location": report.metadata_location,
                });
                println!("{}", serde_json::to_string_pretty(&out)?);
            } else {
                let mut s = Summary::new(format!("generated {name}"));
                s.row("catalog", catalog.name())
                    .row("created", report.created)
                    .row("snapshots committed", report.snapshots)
                    .row("data files written", report.data_files)
                    .row(
                        "equality delete files written",
                        report.equality_delete_files,
                    )
                    .row("rows written", report.rows_written)
                    .row(
                        "equality delete rows written",
                        report.equality_deletes_written,
                    )
                    .row("live rows", report.live_rows);
                s.print();
            }
            Ok(exit::OK)
        }
        Command::Plan {
            table,
            target_shard_bytes,
            output,
        } => {
            let catalog = table.catalog().await?;
            let plan = make_plan(
                catalog.as_ref(),
                &table.name()?,
                &table.branch,
                *target_shard_bytes,
            )
            .await?;
            if let Some(path) = output {
                std::fs::write(path, serde_json::to_vec_pretty(&plan)?)
                    .with_context(|| format!("writing plan to {}", path.display()))?;
            }
            if cli.json {
                println!("{}", serde_json::to_string_pretty(&plan)?);
            } else {
                print_plan(&plan);
            }
            Ok(if plan.shards.is_empty() {
                exit::NOTHING_TO_DO
            } else {
                exit::OK
            })
        }
        Command::Convert {
            table,
            plan,
            shard_id,
            dry_run,
            parallelism,
            no_pruning,
            key_memory_mb,
        } => {
            let catalog = table.catalog().await?;
            let name = table.name()?;
            let mut options = ConvertOptions {
                branch: table.branch.clone(),
                dry_run: *dry_run,
                source: "eqdv convert (CLI)".into(),
                ..Default::default()
            };
            if let Some(p) = parallelism {
                options.resolve.parallelism = (*p).max(1);
            }
            if *no_pruning {
                options.resolve.bound_pruning = false;
                options.resolve.row_group_pruning = false;
                options.resolve.bloom_pruning = false;
            }
            options.resolve.key_memory_budget = key_memory_mb.saturating_mul(1024 * 1024).max(1);
            if let (Some(plan), Some(id)) = (plan, shard_id) {
                let shard = load_shard(plan, id)?;
                // A shard converts on the branch it was planned on; naming another one
                // explicitly is a mistake, not a request to convert elsewhere.
                if table.branch != DEFAULT_BRANCH && table.branch != shard.branch {
                    anyhow::bail!(
                        "shard {id} of {} was planned on branch '{}', but --branch is '{}'",
                        plan.display(),
                        shard.branch,
                        table.branch
                    );
                }
                options.branch = shard.branch.clone();
                options.shard = Some(shard);
            }
            let bar = spinner(&format!("converting {name}"), cli.json);
            let report = convert(catalog.as_ref(), &name, &options).await?;
            bar.finish_and_clear();
            if cli.json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                print_report(&report);
            }
            Ok(match report.outcome {
                Outcome::NothingToDo => exit::NOTHING_TO_DO,
                Outcome::Converted | Outcome::DryRun => exit::OK,
            })
        }
        Command::Inspect { table, verify } => {
            let catalog = table.catalog().await?;
            let loaded = LoadedTable::load(catalog.as_ref(), &table.name()?).await?;
            let inspection = eqdv::inspect::inspect(&loaded, &table.branch).await?;
            let verified = if *verify {
                let head = loaded.head(&table.branch)?;
                let files = TableFiles::read(&loaded, head.as_ref()).await?;
                Some(eqdv::verify::verify_dvs(&loaded, &files).await?)
            } else {
                None
            };
            if cli.json {
                let mut value = serde_json::to_value(&inspection)?;
                if let (Some(v), Some(obj)) = (&verified, value.as_object_mut()) {
                    obj.insert("verified".into(), serde_json::to_value(v)?);
                }
                println!("{}", serde_json::to_string_pretty(&value)?);
            } else {
                print_inspection(&inspection);
                if let Some(v) = verified {
                    println!(
                        "verified {} deletion vectors ({} positions): all valid",
                        v.dvs, v.positions
                    );
                }
            }
            Ok(exit::OK)
        }
        Command::Rows { table } => {
            let catalog = table.catalog().await?;
            let loaded = LoadedTable::load(catalog.as_ref(), &table.name()?).await?;
            for row in eqdv::read::read_canonical(&loaded, &table.branch).await? {
                println!("{row}");
            }
            Ok(exit::OK)
        }
        Command::Cleanup {
            table,
            older_than,
            dry_run,
        } => {
            let catalog = table.catalog().await?;
            let options = eqdv::cleanup::CleanupOptions {
                older_than: *older_than,
                dry_run: *dry_run,
            };
            let report = eqdv::cleanup::cleanup(catalog.as_ref(), &table.name()?, &options).await?;
            if cli.json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                cleanup::print_report(&report);
            }
            Ok(if report.delete_failures.is_empty() {
                exit::OK
            } else {
                exit::FAILED
            })
        }
        Command::Backfill {
            catalog,
            database,
            table,
            branch,
            dry_run,
        } => {
            backfill(
                catalog,
                database.as_deref(),
                table.as_deref(),
                branch,
                *dry_run,
                cli.json,
            )
            .await
        }
        Command::Demo {
            warehouse,
            workload,
        } => demo::run(warehouse.as_deref(), workload, cli.json).await,
    }
}

/// Runs the planner and converter functions' own handlers in-process: the planner's
/// shards go to a queue in memory, and each is converted as the converter would.
async fn backfill(
    args: &CatalogArgs,
    database: Option<&str>,
    table: Option<&str>,
    branch: &str,
    dry_run: bool,
    json_out: bool,
) -> Result<u8> {
    use eqdv::planner::{BackfillScope, TableDecision, Trigger};
    use eqdv_functions::FunctionConfig;
    use eqdv_functions::converter::Converter;
    use eqdv_functions::planner::Planner;
    use eqdv_functions::queue::InProcessQueue;

    // The same variables as the functions (allowlist, memory budget, retries).
    let mut config = FunctionConfig::from_env()?;
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
    let queue = std::sync::Arc::new(InProcessQueue::default());
    let planner = Planner {
        catalog: args.connect().await?,
        config: config.clone(),
        queue: Box::new(queue.clone()),
    };
    let run = planner.run_triggers(&[trigger]).await?;
    let converter = Converter {
        catalog: args.connect().await?,
        config,
        dead_letters: None,
        source: "eqdv backfill (CLI)".into(),
    };
    let mut reports = Vec::new();
    let mut failed = 0usize;
    // A sweep has no dry-run flag of its own: its shards are simply not converted.
    let shards = if dry_run { Vec::new() } else { queue.drain() };
    for shard in shards {
        match converter.convert_shard(&shard, None).await {
            Ok(r) => reports.push(serde_json::to_value(&r)?),
            Err(e) => {
                failed += 1;
                reports.push(serde_json::json!({ "table": shard.table.to_string(), "shard": shard.id, "error": e.to_string() }));
            }
        }
    }
    let summary = &run.response;
    if json_out {
        let out = serde_json::json!({ "plan": summary, "conversions": reports, "failures": run.failures });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
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
            println!(
                "converted {} shard(s), {failed} failed",
                reports.len() - failed
            );
        }
    }
    Ok(if failed > 0 || !run.failures.is_empty() {
        exit::FAILED
    } else if summary.shards.is_empty() {
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

async fn make_plan(
    catalog: &dyn Catalog,
    name: &TableName,
    branch: &str,
    target_shard_bytes: u64,
) -> Result<Plan> {
    let table = LoadedTable::load(catalog, name).await?;
    table.require_v3()?;
    table.require_branch(branch)?;
    let head = table.head(branch)?;
    let files = TableFiles::read(&table, head.as_ref()).await?;
    Ok(eqdv::plan::plan(
        &table,
        branch,
        &files,
        &PlanOptions {
            target_shard_bytes,
            ..Default::default()
        },
    )?)
}

fn load_shard(plan_file: &Path, id: &str) -> Result<Shard> {
    let bytes = std::fs::read(plan_file)
        .with_context(|| format!("reading plan file {}", plan_file.display()))?;
    let plan: Plan = serde_json::from_slice(&bytes).with_context(|| {
        format!(
            "plan file {} is not a plan written by `eqdv plan`",
            plan_file.display()
        )
    })?;
    plan.shards
        .into_iter()
        .find(|s| s.id == id)
        .with_context(|| format!("plan file {} has no shard {id}", plan_file.display()))
}

fn print_plan(plan: &Plan) {
    let mut s = Summary::new(format!("plan for {} ({})", plan.table, plan.branch));
    s.row("base snapshot", fmt_opt(plan.base_snapshot_id))
        .row("live equality delete files", plan.equality_delete_files)
        .row("equality delete rows", plan.equality_delete_rows)
        .row("groups", plan.groups)
        .row("shards", plan.shards.len());
    s.print();
    if !plan.shards.is_empty() {
        let rows: Vec<Vec<String>> = plan
            .shards
            .iter()
            .map(|sh| {
                vec![
                    sh.id.clone(),
                    sh.partitions.join(" "),
                    sh.groups.len().to_string(),
                    sh.delete_files().count().to_string(),
                    sh.estimated_bytes.to_string(),
                ]
            })
            .collect();
        print_table(
            &[
                "shard",
                "partitions",
                "groups",
                "delete files",
                "est. bytes",
            ],
            &rows,
        );
    }
}

pub(crate) fn print_report(r: &ConvertReport) {
    let outcome = match r.outcome {
        Outcome::NothingToDo => "nothing to do",
        Outcome::Converted => "converted",
        Outcome::DryRun => "dry run (nothing written)",
    };
    let m = &r.resolve;
    let mut s = Summary::new(format!("{}: {outcome}", r.table));
    s.row("base snapshot", fmt_opt(r.base_snapshot_id))
        .row("new snapshot", fmt_opt(r.new_snapshot_id))
        .row("groups", r.groups)
        .row(
            "equality delete files removed",
            r.equality_delete_files_removed,
        )
        .row("equality delete rows removed", r.equality_deletes_removed)
        .row("deletion vectors written", r.dvs_written)
        .row("deletion vectors replaced", r.dvs_replaced)
        .row(
            "position delete files removed",
            r.position_delete_files_removed,
        )
        .row("positions newly deleted", r.positions_added)
        .row("deleted keys", m.delete_keys)
        .row("live data files", m.live_data_files)
        .row("candidate data files", m.candidate_files)
        .row("pruned by column bounds", m.pruned_by_bounds)
        .row("data files opened", m.files_opened)
        .row("data files with matches", m.files_with_matches)
        .row(
            "row groups read / pruned",
            format!("{} / {}", m.row_groups_read, m.row_groups_pruned),
        )
        .row("rows scanned", m.rows_scanned)
        .row("bytes read", m.bytes_read)
        .row("commit attempts", r.commit_attempts)
        .row(
            "conflicts (rebased / re-planned)",
            format!("{} ({} / {})", r.conflicts, r.rebases, r.replans),
        )
        .row("duration", format!("{} ms", r.duration_ms));
    s.print();
}

pub(crate) fn print_inspection(i: &eqdv::inspect::Inspection) {
    let t = &i.totals;
    let mut s = Summary::new(format!(
        "{} ({}), format v{}",
        i.table, i.branch, i.format_version
    ));
    s.row("snapshot", fmt_opt(i.snapshot_id))
        .row(
            "operation",
            i.operation.clone().unwrap_or_else(|| "-".into()),
        )
        .row("data files", t.data_files)
        .row("records", t.records)
        .row("equality delete files", t.equality_delete_files)
        .row("equality delete rows", t.equality_deletes)
        .row("deletion vectors", t.dvs)
        .row("positions in DVs", t.dv_positions)
        .row("v2 position delete files", t.position_delete_files);
    s.print();
    let rows: Vec<Vec<String>> = i
        .partitions
        .iter()
        .map(|(p, c)| {
            vec![
                p.clone(),
                c.data_files.to_string(),
                c.records.to_string(),
                c.equality_delete_files.to_string(),
                c.equality_deletes.to_string(),
                c.dvs.to_string(),
                c.dv_positions.to_string(),
            ]
        })
        .collect();
    print_table(
        &[
            "partition",
            "data files",
            "records",
            "eq files",
            "eq rows",
            "DVs",
            "DV positions",
        ],
        &rows,
    );
}

fn fmt_opt<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(|| "-".to_string(), |v| v.to_string())
}
