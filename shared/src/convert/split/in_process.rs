//! A split run within one process (`eqdv convert --ranges N`, `eqdv backfill`): every
//! range at once, then the fan-in, again from a new head when the ranges went stale.

use super::fan_in::commit_ranges;
use super::range::convert_range_of;
use super::result::discard_ranges;
use crate::catalog::{Catalog, TableName};
use crate::convert::{ConvertOptions, ConvertReport, Outcome};
use crate::data_range::DataRange;
use crate::table::LoadedTable;
use crate::{Error, Result};

/// Times an in-process split is converted again from a new head when the head moved in a
/// way that invalidates the ranges' work (as a conversion plans again).
const MAX_RANGE_REPLANS: u32 = 4;

/// Converts in `count` ranges in this process, all at once (each with its share of the
/// options' parallelism and memory), then commits them together; converted again from a
/// new head when that invalidated them. `count` 1 is one range, committed the same way.
pub async fn convert_in_ranges(
    catalog: &dyn Catalog,
    name: &TableName,
    options: &ConvertOptions,
    count: u32,
) -> Result<ConvertReport> {
    DataRange::new(0, count)?;
    let mut per_range = options.clone();
    let share = |v: u64| (v / u64::from(count)).max(1);
    per_range.resolve.parallelism = (options.resolve.parallelism / count as usize).max(1);
    per_range.resolve.read_memory_budget = share(options.resolve.read_memory_budget);
    per_range.resolve.key_memory_budget = share(options.resolve.key_memory_budget);
    let mut replans = 0;
    loop {
        let table = LoadedTable::load(catalog, name).await?;
        let Some(head) = table.head(&options.branch)? else {
            return Ok(ConvertReport::new(name, options, Outcome::NothingToDo));
        };
        let base = head.snapshot_id();
        let converted = futures::future::join_all(
            DataRange::all(count).map(|range| convert_range_of(&table, &per_range, base, range)),
        )
        .await;
        let mut results = Vec::with_capacity(converted.len());
        let mut failed = None;
        for (range, outcome) in DataRange::all(count).zip(converted) {
            match outcome {
                Ok(result) => results.push(result),
                Err(e) => {
                    tracing::warn!(table = %name, %range, error = %e, "range failed");
                    failed.get_or_insert(e);
                }
            }
        }
        if let Some(e) = failed {
            discard_ranges(&table.file_io, table.location(), &results).await;
            return Err(e);
        }
        match commit_ranges(catalog, name, options, &results).await {
            Err(Error::RangesStale { .. }) if replans < MAX_RANGE_REPLANS => {
                replans += 1;
                tracing::info!(table = %name, "head moved; converting the ranges again");
            }
            Ok(mut report) => {
                report.replans += replans;
                return Ok(report);
            }
            Err(e) => return Err(e),
        }
    }
}
