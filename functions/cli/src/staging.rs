//! `eqdv convert --staging-branch NAME`: the staging mode, which applies a staging
//! branch's snapshots to the target branch (`--branch`, `main` by default) as data files
//! and deletion vectors, so the target never holds an equality delete.

use anyhow::Result;
use eqdv::catalog::{Catalog, TableName};
use eqdv::convert::{ConvertOptions, Outcome};
use eqdv::staging::{StagingOptions, StagingReport, apply_staging};

use crate::exit;
use crate::output::{Summary, print_json, spinner};

/// Applies the pending snapshots of `staging` to `options.branch` and prints the report.
pub async fn run(
    catalog: &dyn Catalog,
    name: &TableName,
    staging: &StagingOptions,
    options: &ConvertOptions,
    json: bool,
) -> Result<u8> {
    let bar = spinner(
        &format!(
            "applying {name}'s branch {} to {}",
            staging.staging_branch, options.branch
        ),
        json,
    );
    let report = apply_staging(catalog, name, staging, options).await?;
    bar.finish_and_clear();
    if json {
        print_json(&report)?;
    } else {
        summary(&report).print();
    }
    Ok(match report.outcome {
        Outcome::NothingToDo => exit::NOTHING_TO_DO,
        Outcome::Converted | Outcome::DryRun => exit::OK,
    })
}

fn summary(r: &StagingReport) -> Summary {
    let outcome = match r.outcome {
        Outcome::NothingToDo => "nothing to apply",
        Outcome::Converted => "applied",
        Outcome::DryRun => "dry run (nothing written)",
    };
    let mut s = Summary::new(format!(
        "{}: {outcome} ({} -> {})",
        r.table, r.staging_branch, r.target_branch
    ));
    s.row(
        "staging snapshot reflected before",
        r.applied_before
            .map_or_else(|| "none".to_string(), |id| id.to_string()),
    )
    .row(
        "staging snapshots applied (commits)",
        format!(
            "{} ({})",
            r.applied.iter().map(|a| a.folded.len()).sum::<usize>(),
            r.applied.len()
        ),
    );
    for a in &r.applied {
        s.row(
            match a.folded.as_slice() {
                [first, .., last] => format!("  staging {first} .. {last} ({})", a.folded.len()),
                _ => format!("  staging {}", a.staging_snapshot_id),
            },
            format!(
                "-> {}: {} data files ({} rows), {} equality delete files ({} rows) and {} DVs \
                 applied as {} DVs ({} positions newly deleted)",
                a.target_snapshot_id
                    .map_or_else(|| "not committed".to_string(), |id| id.to_string()),
                a.data_files_added,
                a.records_added,
                a.equality_delete_files_applied,
                a.equality_deletes_applied,
                a.staged_dvs + a.staged_position_delete_files,
                a.dvs_written,
                a.positions_added
            ),
        );
    }
    s.row(
        "still pending",
        format!(
            "{} staging snapshots, the oldest {:.0} s old",
            r.lag.snapshots, r.lag.seconds
        ),
    )
    .row(
        "commit attempts (conflicts)",
        format!("{} ({})", r.commit_attempts, r.conflicts),
    )
    .row("duration", format!("{} ms", r.duration_ms));
    s
}

/// `inspect`'s line for a branch applied from a staging branch: how far behind it is.
pub fn describe_state(state: &eqdv::inspect::StagingState) -> String {
    match (&state.lag, &state.problem) {
        (Some(lag), _) => format!(
            "{}: {} snapshots, the oldest {:.0} s old (reflects staging snapshot {})",
            state.staging_branch,
            lag.snapshots,
            lag.seconds,
            state
                .applied
                .map_or_else(|| "none yet".to_string(), |id| id.to_string())
        ),
        (None, Some(problem)) => format!("{}: cannot apply: {problem}", state.staging_branch),
        (None, None) => format!("{}: unknown", state.staging_branch),
    }
}
