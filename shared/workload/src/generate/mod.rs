//! The CDC workload generator: builds v3 tables that look like what Flink upserts
//! leave behind (data files plus partition-scoped and global equality deletes, a hot
//! set of keys updated over and over, nulls in keys, a column added halfway), for the
//! tests, `eqdv demo` and the benchmarks.
//!
//! Every row is a pure function of the seed and the workload spec, and the generator
//! keeps an in-memory model of which rows are live under the spec's delete rules. The
//! model never looks at files: what it expects is computed independently of what was
//! written, so comparing it with a reader checks the reader. The state needed to replay
//! the model (spec + commits done) is a table property updated atomically with every
//! snapshot, so another process can continue a table or recompute its expected rows.
//! The generator only ever appends snapshots to `main`; it never removes a file.

mod filler;
mod key_rows;
mod model;
mod spec;
mod table;
#[cfg(test)]
mod tests;
mod values;
mod write;

use eqdv::catalog::{Catalog, TableName};
use eqdv::table::LoadedTable;
use eqdv::{Error, Result};
use model::Model;
pub use spec::{GeneratorState, KeyType, PartitionKind, WorkloadSpec, parse_key_types, state_of};
use table::{add_tag_column, create_table, initial_schema, schema_with_tag};
use write::commit_plan;

/// Table property holding the generator's [`GeneratorState`] as JSON.
pub const STATE_PROPERTY: &str = "eqdv.generator.state";
/// Snapshot summary property naming the generator commit a snapshot holds.
pub const COMMIT_SUMMARY_PROPERTY: &str = "eqdv.generator.commit";

/// Values of the `region` column (identity partition source).
pub const REGIONS: [&str; 5] = [
    "us-east-1",
    "eu-west-1",
    "ap-southeast-2",
    "sa-east-1",
    "me-south-1",
];
/// Values of the `tag` column added by `add_column`.
const TAGS: [&str; 4] = ["red", "green", "blue", "grün-😀"];
const DAY_MICROS: i64 = 86_400_000_000;
/// 2024-03-09T00:00:00Z: `ts` values fall on [`TS_DAYS`] days from here.
const TS_BASE: i64 = 1_709_942_400_000_000;
const TS_DAYS: i64 = 4;
const DECIMAL_PRECISION: u32 = 20;
const DECIMAL_SCALE: u32 = 4;
const FIXED_LEN: u64 = 12;
/// Java's default metrics mode keeps 16 characters (or bytes) of string/binary bounds.
const BOUND_TRUNCATE_LEN: usize = 16;
const MAX_KEYS: usize = 16;
/// Most filler columns (`WorkloadSpec::extra_columns`).
const MAX_EXTRA_COLUMNS: u32 = 200;
/// Kids of deletes for keys that do not exist lie this far above the next fresh kid.
const ABSENT_KID_OFFSET: u64 = 100_000;
/// Date keys stay within years 1..9999 (what Python's `datetime.date` can hold).
const MAX_DATE_KID: u64 = 3_600_000;
const COMMIT_ATTEMPTS: u32 = 5;

/// What one [`generate`] call did.
#[derive(Clone, Debug)]
pub struct GenerateReport {
    pub table: TableName,
    /// The table did not exist and was created.
    pub created: bool,
    /// Snapshots committed by this call.
    pub snapshots: u32,
    /// The state after this call (replay it with [`expected_rows`]).
    pub state: GeneratorState,
    pub data_files: u64,
    pub equality_delete_files: u64,
    pub rows_written: u64,
    pub equality_deletes_written: u64,
    /// Rows live after this call, by the model.
    pub live_rows: u64,
    pub metadata_location: String,
}

/// Creates the table if needed and commits the initial load, then `spec.commits` CDC
/// commits. An existing table continues from its stored state: its seed and sizes are
/// the stored ones, and its shape (keys, partition, nulls, global deletes, added
/// column) must match `spec`.
pub async fn generate(
    catalog: &dyn Catalog,
    name: &TableName,
    spec: &WorkloadSpec,
) -> Result<GenerateReport> {
    let (mut table, mut state, created) = match LoadedTable::load(catalog, name).await {
        Ok(table) => {
            let stored = state_of(&table.metadata)?.ok_or_else(|| {
                Error::InvalidInput(format!(
                    "table {name} has no {STATE_PROPERTY} property: the generator did not create it"
                ))
            })?;
            spec.check_continues(&stored.spec, name)?;
            (table, stored, false)
        }
        Err(Error::TableNotFound { .. }) => {
            spec.validate(spec.commits.saturating_add(1))?;
            let state = GeneratorState::new(spec);
            (create_table(catalog, name, &state).await?, state, true)
        }
        Err(e) => return Err(e),
    };
    table.require_v3()?;
    let target = state.done.max(1).saturating_add(spec.commits);
    state.spec.validate(target)?;

    let mut model = Model::replay(&state)?;
    let mut report = GenerateReport {
        table: name.clone(),
        created,
        snapshots: 0,
        state: state.clone(),
        data_files: 0,
        equality_delete_files: 0,
        rows_written: 0,
        equality_deletes_written: 0,
        live_rows: 0,
        metadata_location: table.pointer.metadata_location.clone(),
    };
    for commit in state.done..target {
        let tagged = state.tagged(commit);
        if tagged
            && table
                .metadata
                .current_schema()
                .field_by_name("tag")
                .is_none()
        {
            table = add_tag_column(catalog, &table).await?;
        }
        let plan = model.run(&state, commit)?;
        let next = GeneratorState {
            done: commit + 1,
            ..state.clone()
        };
        if let Some(landed) =
            commit_plan(catalog, table.clone(), &model, &plan, commit, &next).await?
        {
            report.snapshots += 1;
            report.data_files += landed.data_files;
            report.equality_delete_files += landed.delete_files;
            table = landed.table;
        }
        report.rows_written += plan.inserted.len() as u64;
        report.equality_deletes_written += plan.deletes.len() as u64;
        state = next;
    }
    report.state = state;
    report.live_rows = model.live.len() as u64;
    report.metadata_location = table.pointer.metadata_location.clone();
    Ok(report)
}

/// The rows the model expects live after `state.done` commits, in canonical form
/// (see [`crate::read`]), sorted.
pub fn expected_rows(state: &GeneratorState) -> Result<Vec<String>> {
    let with_tag = state.add_column_at.is_some_and(|a| state.done > a);
    let mut schema = initial_schema(&state.spec.keys, state.spec.extra_columns)?;
    if with_tag {
        schema = schema_with_tag(&schema, schema.highest_field_id() + 1)?;
    }
    Model::replay(state)?.canonical_live_rows(&schema)
}

/// The expected rows of a generated table, recomputed from the state stored in it (in
/// its current schema), so any process can check any reader against it.
pub async fn expected_rows_of(catalog: &dyn Catalog, name: &TableName) -> Result<Vec<String>> {
    let table = LoadedTable::load(catalog, name).await?;
    let state = state_of(&table.metadata)?.ok_or_else(|| {
        Error::InvalidInput(format!("table {name} has no {STATE_PROPERTY} property"))
    })?;
    Model::replay(&state)?.canonical_live_rows(table.metadata.current_schema())
}
