//! `eqdv inspect`: what a table holds per partition (data files, equality deletes, DVs,
//! position deletes), and optionally every DV checked as readers will check it.

use anyhow::Result;
use clap::Args;
use eqdv::inspect::Inspection;
use eqdv::table::{LoadedTable, TableFiles};
use eqdv::verify::DvVerification;

use crate::args::TableArgs;
use crate::exit;
use crate::output::{Summary, fmt_opt, out, print_json, print_table};

#[derive(Args)]
pub struct InspectArgs {
    #[command(flatten)]
    table: TableArgs,
    /// Also verify every deletion vector as readers will (Puffin footer, length,
    /// magic, CRC, cardinality, referenced data file, positions in range).
    #[arg(long)]
    verify: bool,
    /// Also prove each key index against a full scan: every live data file it covers
    /// read again, its entries compared with the rows (exit 1 on a difference).
    #[arg(long)]
    verify_index: bool,
}

pub async fn run(args: &InspectArgs, json: bool) -> Result<u8> {
    let table = &args.table;
    let catalog = table.catalog().await?;
    let loaded = LoadedTable::load(catalog.as_ref(), &table.name()?).await?;
    let inspection = eqdv::inspect::inspect(&loaded, &table.branch).await?;
    let verified = if args.verify {
        let head = loaded.head(&table.branch)?;
        let files = TableFiles::read(&loaded, head.as_ref()).await?;
        Some(eqdv::verify::verify_dvs(&loaded, &files).await?)
    } else {
        None
    };
    let indexes = if args.verify_index {
        let head = loaded.head(&table.branch)?;
        let files = TableFiles::read(&loaded, head.as_ref()).await?;
        Some(eqdv::key_index::verify_indexes(&loaded, &files).await?)
    } else {
        None
    };
    print_inspection(&inspection, verified.as_ref(), indexes.as_deref(), json)?;
    let wrong: Vec<&String> = indexes
        .iter()
        .flatten()
        .flat_map(|v| &v.mismatches)
        .collect();
    if !wrong.is_empty() {
        anyhow::bail!(
            "the key index does not match the data files: {}",
            wrong
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join("; ")
        );
    }
    Ok(exit::OK)
}

/// `eqdv inspect`, with the DV verification when `--verify` asked for it.
pub fn print_inspection(
    i: &Inspection,
    verified: Option<&DvVerification>,
    indexes: Option<&[eqdv::key_index::IndexVerification]>,
    json: bool,
) -> Result<()> {
    if json {
        let mut value = serde_json::to_value(i)?;
        if let (Some(v), Some(obj)) = (verified, value.as_object_mut()) {
            obj.insert("verified".into(), serde_json::to_value(v)?);
        }
        if let (Some(v), Some(obj)) = (indexes, value.as_object_mut()) {
            obj.insert("verified_indexes".into(), serde_json::to_value(v)?);
        }
        return print_json(&value);
    }
    let t = &i.totals;
    let mut s = Summary::new(format!(
        "{} ({}), format {}",
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
    if let Some(state) = &i.staging {
        s.row(
            "behind the staging branch",
            crate::staging::describe_state(state),
        );
    }
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
    for index in &i.key_indexes {
        let mut s = Summary::new(index_name(&index.equality_ids, &index.part));
        s.row("location", &index.location);
        match &index.bypassed_because {
            Some(why) => {
                s.row("usable", format!("no: {why}"));
            }
            None => {
                s.row("usable", "yes")
                    .row(
                        "reconciled with snapshot",
                        fmt_opt(index.source_snapshot_id),
                    )
                    .row("of branch", fmt_opt(index.source_branch.as_deref()))
                    .row("runs", index.runs)
                    .row("leaf files", index.leaves)
                    .row("entries", index.entries)
                    .row("leaf bytes", index.leaf_bytes)
                    .row("covered data files", index.covered_files)
                    .row("live files not covered (delta)", fmt_opt(index.delta_files))
                    .row("covered files no longer live", fmt_opt(index.dead_files))
                    .row("rows left out as deleted", index.deleted_rows_left_out);
            }
        }
        s.print();
    }
    for v in indexes.unwrap_or_default() {
        match &v.unusable {
            Some(why) => out!(
                "{}: not verified, unusable: {why}",
                index_name(&v.equality_ids, &v.part)
            ),
            None if v.mismatches.is_empty() => out!(
                "{}: {} covered live files ({} entries) match a full scan; {} live files not covered",
                index_name(&v.equality_ids, &v.part),
                v.files_checked,
                v.entries_checked,
                v.files_not_covered
            ),
            None => out!(
                "{}: {} of {} covered live files differ from a full scan",
                index_name(&v.equality_ids, &v.part),
                v.mismatches.len(),
                v.files_checked
            ),
        }
    }
    if let Some(v) = verified {
        out!(
            "verified {} deletion vectors ({} positions): all valid",
            v.dvs,
            v.positions
        );
    }
    Ok(())
}

/// How `inspect` names an index: its field ids, and its part of a partitioned table's
/// index.
fn index_name(equality_ids: &[i32], part: &str) -> String {
    if part.is_empty() {
        format!("key index of field ids {equality_ids:?}")
    } else {
        format!("key index of field ids {equality_ids:?}, part {part}")
    }
}
