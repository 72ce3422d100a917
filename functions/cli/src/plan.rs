//! `eqdv plan`: the conversion plan of one table (groups of equality deletes and the
//! shards they are converted in), optionally saved for `convert --plan`.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use eqdv::catalog::{Catalog, TableName};
use eqdv::plan::{Plan, PlanOptions};
use eqdv::table::LoadedTable;

use crate::args::TableArgs;
use crate::exit;
use crate::output::{Summary, fmt_opt, print_json, print_table};

#[derive(Args)]
pub struct PlanArgs {
    #[command(flatten)]
    table: TableArgs,
    /// Target bytes of candidate data per shard.
    #[arg(long, default_value_t = 512 * 1024 * 1024)]
    target_shard_bytes: u64,
    /// Write the plan as JSON to this file (for `convert --shard`).
    #[arg(long, value_name = "FILE")]
    output: Option<PathBuf>,
}

pub async fn run(args: &PlanArgs, json: bool) -> Result<u8> {
    let catalog = args.table.catalog().await?;
    let plan = make_plan(
        catalog.as_ref(),
        &args.table.name()?,
        &args.table.branch,
        args.target_shard_bytes,
    )
    .await?;
    if let Some(path) = &args.output {
        std::fs::write(path, serde_json::to_vec_pretty(&plan)?)
            .with_context(|| format!("writing plan to {}", path.display()))?;
    }
    print_plan(&plan, json)?;
    Ok(if plan.shards.is_empty() {
        exit::NOTHING_TO_DO
    } else {
        exit::OK
    })
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
    // As the planner function plans: a table that fits one shard by its summary is
    // planned from its delete manifests alone.
    Ok(eqdv::plan::plan_head(
        &table,
        branch,
        &PlanOptions {
            target_shard_bytes,
            small_table_bytes: u64::MAX,
            ..Default::default()
        },
    )
    .await?)
}

/// `eqdv plan`.
pub fn print_plan(plan: &Plan, json: bool) -> Result<()> {
    if json {
        return print_json(plan);
    }
    let mut s = Summary::new(format!("plan for {} ({})", plan.table, plan.branch));
    s.row("base snapshot", fmt_opt(plan.base_snapshot_id))
        .row("live equality delete files", plan.equality_delete_files)
        .row("equality delete rows", plan.equality_delete_rows)
        .row("groups", plan.groups)
        .row(
            "out of scope: data manifests / files skipped",
            format!(
                "{} / {}",
                plan.skipped_data.manifests, plan.skipped_data.files
            ),
        )
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
    Ok(())
}
