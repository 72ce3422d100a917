//! The planner's job, independent of how it is invoked (Lambda, CLI backfill): turn
//! triggers into the tables to look at, skip the ones eqdv must not or need not touch
//! (saying why), and plan shards for the rest. Reads only; never commits.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::catalog::{Catalog, TableName};
use crate::plan::{PlanOptions, Shard};
use crate::summary_keys::{CONVERTED_FROM_PROPERTY, TOTAL_EQUALITY_DELETES_PROPERTY};
use crate::table::{KeptReads, LoadedTable};
use crate::{Error, Result};

/// Which tables a backfill covers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BackfillScope {
    Tables(Vec<TableName>),
    /// Every Iceberg table of a database.
    Database(String),
}

/// One thing the planner was asked to do.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Trigger {
    /// A Glue table changed (a commit, most likely).
    TableChanged {
        table: TableName,
        type_of_change: Option<String>,
    },
    /// Look at every allowed table.
    Sweep,
    /// An operator's request.
    Backfill {
        scope: BackfillScope,
        branch: Option<String>,
        dry_run: bool,
    },
}

/// Which tables the planner may touch; empty lists allow everything.
#[derive(Clone, Debug, Default)]
pub struct Allowlist {
    pub databases: Vec<String>,
    pub tables: Vec<TableName>,
}

impl Allowlist {
    pub fn allows(&self, table: &TableName) -> bool {
        (self.databases.is_empty() && self.tables.is_empty())
            || self.databases.contains(&table.namespace)
            || self.tables.contains(table)
    }
}

/// Planner settings.
#[derive(Clone, Debug)]
pub struct PlannerConfig {
    pub allowlist: Allowlist,
    /// The branch when a trigger names none.
    pub branch: String,
    pub plan: PlanOptions,
    /// Keep the table a plan of one shard was made from ([`PlannerSummary::single_shard`]),
    /// for a caller that converts that shard in the same process.
    pub keep_single_shard_table: bool,
    /// Where a kept table keeps its reads: a store the caller keeps across invocations
    /// (a warm planner's, see [`KeptReads::next_invocation`]), or off for a store of
    /// the table's own.
    pub kept_reads: KeptReads,
}

impl Default for PlannerConfig {
    fn default() -> Self {
        Self {
            allowlist: Allowlist::default(),
            branch: "main".into(),
            plan: PlanOptions::default(),
            keep_single_shard_table: false,
            kept_reads: KeptReads::default(),
        }
    }
}

/// What the planner decided for one table.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "outcome", rename_all = "kebab-case")]
pub enum TableDecision {
    Planned { shards: usize },
    NothingToDo { reason: String },
    Skipped { reason: String },
    Failed { error: String },
}

/// The planner's answer: per table, and the shards to send.
#[derive(Clone, Debug, Default, Serialize)]
pub struct PlannerSummary {
    pub dry_run: bool,
    pub tables: BTreeMap<String, TableDecision>,
    pub shards: Vec<Shard>,
    /// With [`PlannerConfig::keep_single_shard_table`], when the plan is one shard: the
    /// table it was planned on.
    #[serde(skip)]
    pub single_shard_table: Option<LoadedTable>,
}

impl PlannerSummary {
    /// The plan's shard and the table it was planned on, when the whole plan is that one
    /// shard and the planner kept the table.
    pub fn single_shard(&self) -> Option<(&Shard, &LoadedTable)> {
        match (self.shards.as_slice(), &self.single_shard_table) {
            ([shard], Some(table)) if table.name == shard.table => Some((shard, table)),
            _ => None,
        }
    }
}

/// Plans every table the triggers name. A table that fails is reported, not fatal:
/// one broken table must not stop the others.
pub async fn plan_triggers(
    catalog: &dyn Catalog,
    triggers: &[Trigger],
    config: &PlannerConfig,
) -> Result<PlannerSummary> {
    let mut summary = PlannerSummary::default();
    // Table -> branch; later triggers for the same table and branch add nothing.
    let mut wanted: BTreeMap<(TableName, String), ()> = BTreeMap::new();
    for trigger in triggers {
        match trigger {
            Trigger::TableChanged { table, .. } => {
                wanted.insert((table.clone(), config.branch.clone()), ());
            }
            Trigger::Sweep => {
                for table in catalog.list_tables(None).await? {
                    wanted.insert((table, config.branch.clone()), ());
                }
            }
            Trigger::Backfill {
                scope,
                branch,
                dry_run,
            } => {
                summary.dry_run |= dry_run;
                let branch = branch.clone().unwrap_or_else(|| config.branch.clone());
                let tables = match scope {
                    BackfillScope::Tables(t) => t.clone(),
                    BackfillScope::Database(db) => catalog.list_tables(Some(db)).await?,
                };
                for table in tables {
                    wanted.insert((table, branch.clone()), ());
                }
            }
        }
    }
    for (table, branch) in wanted.into_keys() {
        let key = if branch == config.branch {
            table.to_string()
        } else {
            format!("{table}@{branch}")
        };
        let decision = if !config.allowlist.allows(&table) {
            TableDecision::Skipped {
                reason: "not in the allowlist".into(),
            }
        } else {
            let keep = config.keep_single_shard_table.then_some(&config.kept_reads);
            match plan_table(catalog, &table, &branch, &config.plan, keep).await {
                Ok((decision, shards, loaded)) => {
                    if !shards.is_empty() {
                        summary.shards.extend(shards);
                        // Only a plan of one shard keeps its table: at most one is held.
                        summary.single_shard_table = (config.keep_single_shard_table
                            && summary.shards.len() == 1)
                            .then_some(loaded)
                            .flatten();
                    }
                    decision
                }
                Err(e @ (Error::UnsupportedTable { .. } | Error::TableNotFound { .. })) => {
                    TableDecision::Skipped {
                        reason: e.to_string(),
                    }
                }
                Err(e) => TableDecision::Failed {
                    error: e.to_string(),
                },
            }
        };
        match &decision {
            TableDecision::Skipped { reason } => {
                tracing::info!(table = %key, %reason, "skipped")
            }
            TableDecision::Failed { error } => {
                tracing::warn!(table = %key, %error, "planning failed")
            }
            _ => {}
        }
        summary.tables.insert(key, decision);
    }
    Ok(summary)
}

/// The decision for a table in the staging mode (its property `eqdv.staging-branch`
/// names `staging`): one shard that applies the pending staging snapshots to `branch`,
/// or nothing to do. A staging history that cannot be applied is an error (the table
/// fails planning, naming the snapshot, every time until an operator acts).
fn plan_staging(
    table: LoadedTable,
    branch: &str,
    staging: &str,
) -> Result<(TableDecision, Vec<Shard>, Option<LoadedTable>)> {
    let table_name = table.name.to_string();
    let branches = crate::staging::Branches {
        table: &table_name,
        staging,
        target: branch,
    };
    let standing = crate::staging::standing(&table.metadata, branches)?;
    let Some(staging_head) = standing.pending.last() else {
        let reflects = standing.applied.map_or_else(
            || "none of its snapshots".to_string(),
            |id| format!("staging snapshot {id}"),
        );
        return Ok((
            TableDecision::NothingToDo {
                reason: format!("branch '{branch}' reflects {reflects} of '{staging}', its head"),
            },
            Vec::new(),
            None,
        ));
    };
    let lag = crate::staging::StagingLag::of(&standing);
    tracing::info!(table = %table.name, staging_branch = staging, target_branch = branch, pending = lag.snapshots, lag_seconds = lag.seconds, "staging snapshots to apply");
    let shard = Shard::staging(
        table.name.clone(),
        branch,
        staging,
        standing.target_head.as_ref().map_or(0, |s| s.snapshot_id()),
        staging_head.snapshot_id(),
    );
    Ok((
        TableDecision::Planned { shards: 1 },
        vec![shard],
        Some(table),
    ))
}

/// The decision for one table, its shards and the table they were planned on (keeping
/// what it read, in `keep_reads` when that store is on).
async fn plan_table(
    catalog: &dyn Catalog,
    name: &TableName,
    branch: &str,
    options: &PlanOptions,
    keep_reads: Option<&KeptReads>,
) -> Result<(TableDecision, Vec<Shard>, Option<LoadedTable>)> {
    let mut table = LoadedTable::load(catalog, name).await?;
    // Its manifests are read again by a conversion of its shard in this process.
    if let Some(store) = keep_reads {
        table = table.keeping_reads_in(store);
    }
    table.require_v3()?;
    table.require_branch(branch)?;
    if let Some(staging) = crate::staging::staging_branch_of(table.metadata.properties(), branch) {
        return plan_staging(table, branch, &staging);
    }
    let head = table.head(branch)?;
    // A head eqdv wrote whose summary counts no equality deletes needs no manifest reads.
    if let Some(snapshot) = &head {
        let props = &snapshot.summary().additional_properties;
        if props.contains_key(CONVERTED_FROM_PROPERTY)
            && props
                .get(TOTAL_EQUALITY_DELETES_PROPERTY)
                .map(String::as_str)
                == Some("0")
        {
            return Ok((
                TableDecision::NothingToDo {
                    reason: "the head is eqdv's own conversion and no equality deletes are live"
                        .into(),
                },
                Vec::new(),
                None,
            ));
        }
    }
    let planned = crate::plan::plan_head(&table, branch, options).await?;
    if planned.shards.is_empty() {
        return Ok((
            TableDecision::NothingToDo {
                reason: "no live equality deletes".into(),
            },
            Vec::new(),
            None,
        ));
    }
    Ok((
        TableDecision::Planned {
            shards: planned.shards.len(),
        },
        planned.shards,
        Some(table),
    ))
}
