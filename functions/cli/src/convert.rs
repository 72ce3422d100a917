//! `eqdv convert`: convert one table's live equality deletes (or one shard of a saved
//! plan) into deletion vectors and commit.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::Args;
use eqdv::convert::{ConvertOptions, ConvertReport, Outcome, convert, convert_in_ranges};
use eqdv::plan::{Plan, Shard};
use eqdv::staging::StagingOptions;

use eqdv_functions::config::{self, ResolveTuning};

use crate::args::{DEFAULT_BRANCH, TableArgs, with_option};
use crate::exit;
use crate::output::{Summary, conversion_progress, fmt_opt, print_json};

#[derive(Args)]
pub struct ConvertArgs {
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
    /// Files read at once (data file scans, delete file reads); 0 is eqdv's default, 64
    /// (EQDV_PARALLELISM).
    #[arg(long, value_name = "N")]
    parallelism: Option<u64>,
    /// Memory the reads in flight may hold, in MiB: reads wait for their share
    /// [default: 64] (EQDV_READ_MEMORY_MB).
    #[arg(long, value_name = "MIB")]
    read_memory_mb: Option<u64>,
    /// Read every data manifest and every candidate data file: do not trust
    /// manifest partition summaries or column bounds, Parquet row-group statistics
    /// or bloom filters (for tables whose writers recorded bad ones).
    #[arg(long)]
    no_pruning: bool,
    /// Look keys up in the table's key index and keep it up to date, and build it where
    /// there is none (from 16 live data files, eqdv.key-index.min-files): a conversion
    /// then reads the data files that hold a deleted key and the files the index does not
    /// cover yet, not every file whose bounds allow a key. Without this flag or
    /// --no-key-index the index is used where it pays: the index a table has is used and
    /// kept, and one is built after a conversion that read at least 16 data files holding
    /// none of its deleted keys. The
    /// table property eqdv.key-index.enabled (true, false or auto) overrides both, and
    /// EQDV_KEY_INDEX (the same values) stands in for both flags.
    #[arg(long, conflicts_with = "no_key_index")]
    key_index: bool,
    /// Neither use nor keep a key index (see --key-index).
    #[arg(long)]
    no_key_index: bool,
    /// The queue groups of a table without the eqdv.queue-groups property, as the
    /// deployment's planner has them (the stacks' default, 1, unless set): a partitioned
    /// table's key index is kept in a part per group, so give it the Lambdas' value for
    /// both to keep the same parts. With 1 (the default here, where the functions' is
    /// 16) the index is one part, which suits a whole table's conversion best.
    /// (EQDV_QUEUE_GROUPS)
    #[arg(long, value_name = "N")]
    queue_groups: Option<u64>,
    /// Memory for deleted keys, in MiB; more keys are resolved in several passes
    /// [default: 1024] (EQDV_KEY_MEMORY_MB).
    #[arg(long, value_name = "MIB")]
    key_memory_mb: Option<u64>,
    /// Split the data files into N ranges (by their place in the data manifests),
    /// converted at once in this process, each with its share of --parallelism and of the
    /// memory budgets, and committed together in one snapshot: the split a fan-out across
    /// invocations runs. 1 does not split.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 1,
        value_parser = clap::value_parser!(u32).range(1..=1024)
    )]
    ranges: u32,
    /// The staging mode: apply the snapshots a writer committed to branch NAME (equality
    /// deletes and all) to --branch (main by default, created if the table has none yet)
    /// as data files and deletion vectors, one commit per staging snapshot, oldest first,
    /// so that --branch never holds an equality delete. Without this flag, a table whose
    /// property eqdv.staging-branch names a branch other than --branch is applied from it.
    #[arg(long, value_name = "NAME", conflicts_with_all = ["plan", "ranges"])]
    staging_branch: Option<String>,
    /// In the staging mode, apply at most N staging snapshots (the rest stay pending).
    #[arg(long, value_name = "N")]
    max_snapshots: Option<usize>,
    /// In the staging mode, fold up to N pending staging snapshots into one commit (the
    /// result is the same as one commit each; 1 makes one commit per staging snapshot).
    #[arg(
        long,
        value_name = "N",
        default_value_t = eqdv::staging::DEFAULT_SNAPSHOTS_PER_COMMIT,
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1024)
    )]
    snapshots_per_commit: usize,
}

/// The queue groups of a table without the property, unless set: one index part, which
/// suits a whole table's conversion (the functions' default is `QUEUE_GROUPS`, as their
/// shards are a group each).
const CLI_QUEUE_GROUPS: u64 = 1;

impl ConvertArgs {
    /// The functions' tuning variables as this command sees them: an option given, else
    /// the environment.
    fn tuning_lookup(&self) -> impl Fn(&str) -> Option<String> + '_ {
        move |name| {
            let option = match name {
                config::ENV_PARALLELISM => self.parallelism.map(|n| n.to_string()),
                config::ENV_READ_MEMORY_MB => self.read_memory_mb.map(|n| n.to_string()),
                config::ENV_KEY_MEMORY_MB => self.key_memory_mb.map(|n| n.to_string()),
                config::ENV_QUEUE_GROUPS => self.queue_groups.map(|n| n.to_string()),
                config::ENV_KEY_INDEX if self.key_index => Some("true".into()),
                config::ENV_KEY_INDEX if self.no_key_index => Some("false".into()),
                _ => None,
            };
            option.or_else(|| std::env::var(name).ok())
        }
    }
}

pub async fn run(args: &ConvertArgs, json: bool) -> Result<u8> {
    let table = &args.table;
    let catalog = table.catalog().await?;
    let name = table.name()?;
    let mut options = ConvertOptions {
        branch: table.branch.clone(),
        dry_run: args.dry_run,
        source: "eqdv convert (CLI)".into(),
        ..Default::default()
    };
    let tuning =
        ResolveTuning::from_lookup(args.tuning_lookup(), CLI_QUEUE_GROUPS).map_err(with_option)?;
    options.resolve = tuning.resolve;
    if args.no_pruning {
        options.resolve.bound_pruning = false;
        options.resolve.row_group_pruning = false;
        options.resolve.bloom_pruning = false;
    }
    if let (Some(plan), Some(id)) = (&args.plan, &args.shard_id) {
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
    if args.plan.is_none() {
        let staging_branch = match &args.staging_branch {
            Some(branch) => Some(branch.clone()),
            None => {
                let loaded = eqdv::table::LoadedTable::load(catalog.as_ref(), &name).await?;
                eqdv::staging::staging_branch_of(loaded.metadata.properties(), &options.branch)
            }
        };
        if let Some(staging_branch) = staging_branch {
            let staging = StagingOptions {
                max_snapshots: args.max_snapshots,
                snapshots_per_commit: args.snapshots_per_commit,
                ..StagingOptions::new(staging_branch)
            };
            return crate::staging::run(catalog.as_ref(), &name, &staging, &options, json).await;
        }
    }
    let (bar, progress) = conversion_progress(&format!("converting {name}"), json);
    options.resolve.progress = progress;
    let report = if args.ranges > 1 {
        convert_in_ranges(catalog.as_ref(), &name, &options, args.ranges).await?
    } else {
        convert(catalog.as_ref(), &name, &options).await?
    };
    bar.finish_and_clear();
    print_convert_report(&report, json)?;
    Ok(match report.outcome {
        Outcome::NothingToDo => exit::NOTHING_TO_DO,
        Outcome::Converted | Outcome::DryRun => exit::OK,
    })
}

pub(crate) fn load_shard(plan_file: &Path, id: &str) -> Result<Shard> {
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

/// `eqdv convert`.
pub fn print_convert_report(r: &ConvertReport, json: bool) -> Result<()> {
    if json {
        return print_json(r);
    }
    convert_summary(r).print();
    Ok(())
}

pub fn convert_summary(r: &ConvertReport) -> Summary {
    let outcome = match r.outcome {
        Outcome::NothingToDo => "nothing to do",
        Outcome::Converted => "converted",
        Outcome::DryRun => "dry run (nothing written)",
    };
    let m = &r.resolve;
    let mut s = Summary::new(format!("{}: {outcome}", r.table));
    if !r.equality_deletes_elsewhere.is_empty() {
        let elsewhere: Vec<String> = r
            .equality_deletes_elsewhere
            .iter()
            .map(|b| {
                format!(
                    "{}: {} rows (convert it with --branch {}, or apply it here with \
                     --staging-branch {})",
                    b.branch, b.equality_delete_rows, b.branch, b.branch
                )
            })
            .collect();
        s.row(
            format!("equality deletes on other branches than {}", r.branch),
            elsewhere.join("; "),
        );
    }
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
        .row("live data files in scope", m.live_data_files)
        .row(
            "out of scope: data manifests / files skipped",
            format!("{} / {}", r.skipped_data.manifests, r.skipped_data.files),
        )
        .row("candidate data files", m.candidate_files)
        .row("pruned by column bounds", m.pruned_by_bounds)
        .row("data files opened", m.files_opened)
        .row(
            "footer bytes read (footers read twice)",
            format!("{} ({})", m.footer_bytes_read, m.footers_read_twice),
        )
        .row("data files with matches", m.files_with_matches)
        .row(
            "data files holding a deleted key",
            m.files_holding_deleted_values,
        )
        .row(
            "bloom filter false positives expected",
            format!("{:.1}", m.expected_bloom_false_positives),
        )
        .row(
            "row groups read / pruned",
            format!("{} / {}", m.row_groups_read, m.row_groups_pruned),
        )
        .row("rows scanned", m.rows_scanned)
        .row("column chunk bytes read", m.bytes_read)
        .row(
            "data ranges (committed together)",
            if r.ranges == 0 {
                "not split".to_string()
            } else {
                r.ranges.to_string()
            },
        )
        .row("commit attempts", r.commit_attempts)
        .row(
            "conflicts (rebased / re-planned)",
            format!("{} ({} / {})", r.conflicts, r.rebases, r.replans),
        )
        .row("duration", format!("{} ms", r.duration_ms));
    s
}
