//! Randomized histories: for each seed, one Java process (tests/interop's `serve`) writes a
//! random sequence of operations to a new v3 table on Glue + MinIO (appends, upserts =
//! equality delete + re-insert, deletes by key, columns added, renamed and promoted int ->
//! long, partition spec changes, compactions, snapshot expiry, commits to a second branch
//! `b`), and eqdv converts `main` (sometimes `b`) in between, in-process. Every conversion
//! is judged by Java: its rows of both branches, row lineage included, are the same multiset
//! before and after, and its DV loader accepts every DV with no equality delete left live on
//! the converted branch. The one refusal allowed is of a field the schema dropped (an
//! equality field, or the source of an older spec's partition: the soak's mix). It must
//! leave the pointer and Java's rows as they were, and the run goes on and counts it. Any
//! other error fails the history.
//!
//! Every conversion keeps eqdv's key index, and before each one the resolve runs with
//! and without the index on the head it converts: the positions must be the same; after
//! each one the index must match a full scan of the files it covers.
//!
//! By default 10 seeds of 8 operations. A soak run: `EQDV_RANDOM_SEEDS=300
//! EQDV_RANDOM_OPS=30 EQDV_RANDOM_SEED_START=1000 tests/run random_histories` (or the same
//! variables with `cargo test --test random_histories` under the test services). A failure
//! names the seed and the operations so far; `EQDV_RANDOM_SEED_START=<seed>
//! EQDV_RANDOM_SEEDS=1` with the same EQDV_RANDOM_OPS replays it. Snapshot expiry uses
//! Java's reachable-file cleanup; `EQDV_RANDOM_INCREMENTAL_EXPIRY=1` uses the incremental one
//! (see `incremental_expiry`). `EQDV_RANDOM_SOAK=1` asks Java for the soak's mix of operations
//! and `EQDV_RANDOM_RESULTS=FILE` records the totals: `tests/soak` runs both.

mod common;

use eqdv_test_support::{java, key_index};
use std::time::Instant;

use eqdv::catalog::{Catalog, GlueCatalog};
use eqdv::convert::{ConvertOptions, Outcome, convert};
use eqdv::resolve::resolve;
use eqdv::table::{LoadedTable, TableFiles};
use java::{JavaServer as Server, JavaTable};
use serde_json::json;

use eqdv_test_support::runs::env_u64;

/// `EQDV_RANDOM_INCREMENTAL_EXPIRY=1`: snapshot expiry with Java's incremental file cleanup,
/// which deletes a Puffin file that still holds live DVs once one of its DVs is removed (by a
/// compaction or a merged DV) and that snapshot expires; by default the reachable-file cleanup.
fn incremental_expiry() -> bool {
    env_u64("EQDV_RANDOM_INCREMENTAL_EXPIRY", 0) == 1
}

/// `EQDV_RANDOM_SOAK=1`: Java's soak mix of operations (branch `b` created sooner,
/// columns dropped, the key column among them, so that refusals are exercised).
fn soak_mix() -> bool {
    env_u64("EQDV_RANDOM_SOAK", 0) == 1
}

fn difference(before: &[String], after: &[String]) -> String {
    let back = common::multiset_minus(after, before);
    let lost = common::multiset_minus(before, after);
    format!(
        "{} rows before, {} after: {} rows came back or appeared, {} lost; first appeared: {:?}; \
         first lost: {:?}",
        before.len(),
        after.len(),
        back.len(),
        lost.len(),
        back.iter().take(3).collect::<Vec<_>>(),
        lost.iter().take(3).collect::<Vec<_>>()
    )
}

/// A small deterministic generator for the Rust side's choices (splitmix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[derive(Default)]
struct Totals {
    seeds: u64,
    ops: u64,
    java_op_errors: u64,
    conversions: u64,
    nothing_to_do: u64,
    refusals: u64,
    /// Live equality delete files in Avro on the heads eqdv converted (not refused).
    avro_delete_files: u64,
    /// Live ORC data files, and ORC equality delete files, on the heads eqdv converted.
    orc_data_files: u64,
    orc_delete_files: u64,
    /// Live data files with a DV on the heads eqdv converted.
    files_with_dvs: u64,
    /// Heads eqdv's reference reader read as Java does (see `reference_reader_agrees`).
    reference_reads: u64,
    failures: Vec<String>,
}

impl Totals {
    /// Fails the test naming every seed that failed, with its replay line.
    fn assert_no_failures(&self) {
        assert!(
            self.failures.is_empty(),
            "{} of {} seeds failed:\n{}",
            self.failures.len(),
            self.seeds,
            self.failures.join("\n\n")
        );
    }
}

/// The table and the live files of `branch`'s head (`None` when the branch cannot be
/// read, as a conversion of it would refuse). `Err` is a failure message.
async fn branch_files(
    catalog: &GlueCatalog,
    t: &JavaTable,
    branch: &str,
) -> Result<Option<(LoadedTable, TableFiles)>, String> {
    let table = LoadedTable::load(catalog, &t.name())
        .await
        .map_err(|e| format!("load: {e}"))?;
    let Ok(head) = table.head(branch) else {
        return Ok(None);
    };
    let files = match TableFiles::read(&table, head.as_ref()).await {
        Ok(files) => files,
        // A manifest of a spec on a dropped field: eqdv refuses to read the branch.
        Err(e) if dropped_field(&e) => return Ok(None),
        Err(e) => return Err(format!("read {branch}: {e}")),
    };
    Ok(Some((table, files)))
}

/// Whether `e` is eqdv's refusal of a field the schema dropped (an equality field, or a
/// partition source of a manifest's spec): the one refusal a history may earn.
fn dropped_field(e: &eqdv::Error) -> bool {
    matches!(e, eqdv::Error::FieldUnresolvable { message, .. } if message.contains("was dropped"))
}

/// Resolves the live equality deletes of `branch`'s head without and with the key
/// index: the same DVs to write, or the same refusal. `Err` is a failure message.
async fn index_agrees_with_scan(
    catalog: &GlueCatalog,
    t: &JavaTable,
    branch: &str,
) -> Result<(), String> {
    let Some((table, files)) = branch_files(catalog, t, branch).await? else {
        return Ok(());
    };
    let Ok(groups) = eqdv::plan::group_equality_deletes(&table, &files) else {
        return Ok(());
    };
    let off = resolve(&table, &files, &groups, &key_index(false)).await;
    let on = resolve(&table, &files, &groups, &key_index(true)).await;
    match (off, on) {
        (Ok(off), Ok(on)) => {
            // The same DVs to write; the index may skip only files whose named rows an
            // existing DV deletes, and finds no position the scan does not in the files
            // it reads (fewer where it left out rows deleted when its runs merged).
            let dvs = |resolved| eqdv::convert::dvs_to_write(&table, &files, resolved, 16);
            let (dvs_off, dvs_on) = (dvs(&off).await, dvs(&on).await);
            let same_dvs = match (&dvs_off, &dvs_on) {
                (Ok(a), Ok(b)) => a == b,
                (Err(_), Err(_)) => true,
                _ => false,
            };
            let same_positions = on.positions.iter().all(|(path, positions)| {
                off.positions
                    .get(path)
                    .is_some_and(|off| positions.is_subset(off))
            });
            if same_dvs && same_positions {
                return Ok(());
            }
            Err(format!(
                "the key index changed the DVs of {branch} (same DVs: {same_dvs}, no position the scan did not find: {same_positions}): {} files without it, {} with it (index: {} looked up, {} files ruled out, {} by DVs, {} bypassed)",
                off.positions.len(),
                on.positions.len(),
                on.metrics.index_lookups,
                on.metrics.pruned_by_index,
                on.metrics.pruned_by_index_dvs,
                on.metrics.index_bypassed
            ))
        }
        (Err(_), Err(_)) => Ok(()),
        (off, on) => Err(format!(
            "the key index changed whether {branch} resolves: without it {:?}, with it {:?}",
            off.err().map(|e| e.to_string()),
            on.err().map(|e| e.to_string())
        )),
    }
}

/// Every key index of the table, proved against a full scan of the live files of
/// `branch` it covers (after a conversion kept it through the foreign commits since).
async fn index_matches_a_full_scan(
    catalog: &GlueCatalog,
    t: &JavaTable,
    branch: &str,
) -> Result<(), String> {
    let Some((table, files)) = branch_files(catalog, t, branch).await? else {
        return Ok(());
    };
    let verified = eqdv::key_index::verify_indexes(&table, &files)
        .await
        .map_err(|e| format!("verifying the key index of {branch}: {e}"))?;
    for v in verified {
        if !v.mismatches.is_empty() {
            return Err(format!(
                "the key index of {:?} differs from a full scan of {branch}: {}",
                v.equality_ids,
                v.mismatches.join("; ")
            ));
        }
    }
    Ok(())
}

/// Files of a head about to be converted, by format.
#[derive(Default)]
struct Met {
    avro_deletes: u64,
    orc_deletes: u64,
    orc_data: u64,
    with_dvs: u64,
}

fn met_files(files: &TableFiles) -> Met {
    use iceberg::spec::DataFileFormat::{Avro, Orc};
    let deletes_in = |format| {
        files
            .equality_deletes
            .iter()
            .filter(|d| d.file.file_format() == format)
            .count() as u64
    };
    Met {
        avro_deletes: deletes_in(Avro),
        orc_deletes: deletes_in(Orc),
        orc_data: files
            .data_files
            .iter()
            .filter(|d| d.file.file_format() == Orc)
            .count() as u64,
        with_dvs: files.dvs.len() as u64,
    }
}

/// eqdv's reference reader (behind `eqdv rows`) reads on `branch` the rows Java reads,
/// equality deletes applied (unless some are in Avro, which it does not read). `Err` is a
/// failure message; `Ok(false)` when the reader could not be asked.
async fn reference_reader_agrees(
    server: &mut Server,
    catalog: &GlueCatalog,
    t: &JavaTable,
    branch: &str,
) -> Result<bool, String> {
    let Some((table, files)) = branch_files(catalog, t, branch).await? else {
        return Ok(false);
    };
    if met_files(&files).avro_deletes > 0 {
        return Ok(false);
    }
    let mut ours = eqdv_workload::read::read_canonical(&table, branch)
        .await
        .map_err(|e| format!("eqdv's reader of {branch}: {e}"))?;
    let mut java = server
        .dump_rows(branch, false)
        .map_err(|e| format!("java dump {branch}: {e}"))?;
    ours.sort();
    java.sort();
    if ours != java {
        return Err(format!(
            "eqdv's reader and Java read {branch} differently: {}",
            difference(&java, &ours)
        ));
    }
    Ok(true)
}

/// Java's rows of `branch` (lineage included), or `Err` with Java's refusal when it cannot
/// apply an equality delete whose field the schema dropped. Any other Java error fails.
fn java_rows(server: &mut Server, branch: &str) -> Result<Result<Vec<String>, String>, String> {
    match server.dump(branch) {
        Ok(rows) => Ok(Ok(rows)),
        Err(e) if e.contains("Cannot find required field") => Ok(Err(e)),
        Err(e) => Err(format!("java dump {branch}: {e}")),
    }
}

/// One eqdv conversion of `branch`, judged by Java. `Err` is a failure message.
async fn convert_and_judge(
    server: &mut Server,
    catalog: &GlueCatalog,
    t: &JavaTable,
    branch: &str,
    branches: &[String],
    totals: &mut Totals,
    log: &mut Vec<String>,
) -> Result<(), String> {
    let mut before = Vec::new();
    for b in branches {
        before.push(java_rows(server, b)?);
    }
    let pointer = catalog
        .load_pointer(&t.name())
        .await
        .map_err(|e| format!("pointer: {e}"))?;
    // The key index must change nothing: the same positions with it as without, on the
    // head about to be converted (an index kept across the foreign commits since).
    index_agrees_with_scan(catalog, t, branch).await?;
    let met = match branch_files(catalog, t, branch).await? {
        Some((_, files)) => met_files(&files),
        None => Met::default(),
    };
    let options = ConvertOptions {
        branch: branch.to_string(),
        resolve: key_index(true),
        ..Default::default()
    };
    let result = convert(catalog, &t.name(), &options).await;
    let mut after = Vec::new();
    for b in branches {
        after.push(java_rows(server, b).map_err(|e| format!("after the conversion: {e}"))?);
    }
    // Java cannot apply an equality delete on a field the schema dropped (it reads no row
    // of such a branch); eqdv must refuse that branch too, not convert what Java cannot read.
    let unreadable = branches
        .iter()
        .zip(&before)
        .any(|(b, rows)| b == branch && rows.is_err());
    if unreadable && result.is_ok() {
        return Err(format!(
            "Java cannot read {branch} (an equality field was dropped), yet eqdv converted it"
        ));
    }
    match result {
        Ok(report) => {
            let what = match report.outcome {
                Outcome::Converted => {
                    totals.conversions += 1;
                    totals.avro_delete_files += met.avro_deletes;
                    totals.orc_data_files += met.orc_data;
                    totals.orc_delete_files += met.orc_deletes;
                    totals.files_with_dvs += met.with_dvs;
                    format!("converted, {} DVs", report.dvs_written)
                }
                Outcome::NothingToDo => {
                    totals.nothing_to_do += 1;
                    "nothing to do".to_string()
                }
                Outcome::DryRun => return Err("a dry run without asking".into()),
            };
            log.push(format!("eqdv convert {branch}: {what}"));
        }
        Err(e) => {
            // The one refusal a history can earn: a field its schema dropped since (the
            // soak's column drops). Any other error is eqdv's failure.
            if !dropped_field(&e) {
                return Err(format!("eqdv convert {branch} failed: {e}"));
            }
            totals.refusals += 1;
            log.push(format!("eqdv convert {branch}: refused: {e}"));
            eprintln!("  refused: {e}");
            let now = catalog
                .load_pointer(&t.name())
                .await
                .map_err(|e| format!("pointer: {e}"))?;
            if now.metadata_location != pointer.metadata_location {
                return Err(format!(
                    "eqdv refused ({e}) but the pointer moved from {} to {}",
                    pointer.metadata_location, now.metadata_location
                ));
            }
        }
    }
    for ((b, before), after) in branches.iter().zip(&before).zip(&after) {
        match (before, after) {
            (Ok(before), Ok(after)) if before != after => {
                return Err(format!(
                    "Java's rows of {b} changed with the conversion of {branch}: {}",
                    difference(before, after)
                ));
            }
            (Ok(_), Err(e)) | (Err(e), Ok(_)) => {
                return Err(format!(
                    "Java's read of {b} changed with the conversion of {branch} (from \
                     readable to not, or back): {e}"
                ));
            }
            _ => {}
        }
    }
    index_matches_a_full_scan(catalog, t, branch).await?;
    let check = server
        .call(json!({"op": "check-dvs", "branch": branch}))
        .map_err(|e| format!("Java's check-dvs of {branch} fails: {e}"))?;
    let refused = log.last().is_some_and(|l| l.contains("refused"));
    if !refused && check["equality_delete_files"] != 0 {
        return Err(format!(
            "equality deletes still live on {branch} after the conversion: {check}"
        ));
    }
    Ok(())
}

/// The file formats of a history's table.
#[derive(Clone, Copy, Default)]
struct Formats {
    /// The format Java writes equality deletes in: "parquet", "avro" or "orc" (by default
    /// the data files' format, but Avro for one table in three).
    deletes: Option<&'static str>,
    /// The format Java writes data files in: "parquet" (the default) or "orc".
    data: Option<&'static str>,
    /// Java also deletes rows by position (a DV, merged with the file's own) after an
    /// operation one time in three: conversions meet files with DVs of Java's.
    position_deletes: bool,
}

/// One seed's history of `ops` Java operations, eqdv converting in between.
async fn history(seed: u64, ops: u64, formats: Formats, totals: &mut Totals) {
    let t = JavaTable::new(&format!("rand{seed}"));
    let mut server = Server::start(&t);
    let catalog = t.catalog().await;
    let mut rng = Rng(seed ^ 0x5EED_0000);
    let mut log: Vec<String> = Vec::new();
    let fail = |totals: &mut Totals, log: &[String], why: String| {
        let msg = format!(
            "seed {seed} (EQDV_RANDOM_SEED_START={seed} EQDV_RANDOM_SEEDS=1 EQDV_RANDOM_OPS={ops}), \
             table {}: {why}\n  operations so far:\n    {}",
            t.name(),
            log.join("\n    ")
        );
        eprintln!("FAILURE {msg}");
        totals.failures.push(msg);
    };
    let create = json!({
        "op": "create",
        "seed": seed,
        "delete_format": formats.deletes,
        "data_format": formats.data,
    });
    match server.call(create) {
        Ok(v) => log.push(v["desc"].as_str().unwrap_or("?").to_string()),
        Err(e) => return fail(totals, &log, format!("java create: {e}")),
    }
    for i in 0..ops {
        let op_seed = seed.wrapping_mul(1_000_003).wrapping_add(i);
        totals.ops += 1;
        let cmd = json!({"op": "random-op", "seed": op_seed, "incremental_expiry": incremental_expiry(), "soak": soak_mix()});
        match server.call(cmd) {
            Ok(v) => log.push(v["desc"].as_str().unwrap_or("?").to_string()),
            Err(e) => {
                totals.java_op_errors += 1;
                log.push(format!("java random-op {op_seed} failed: {e}"));
            }
        }
        if formats.position_deletes && rng.below(3) == 0 {
            let cmd = json!({"op": "delete-by-position", "seed": op_seed, "branch": "main"});
            match server.call(cmd) {
                Ok(v) => log.push(v["desc"].as_str().unwrap_or("?").to_string()),
                Err(e) => {
                    totals.java_op_errors += 1;
                    log.push(format!("java delete-by-position {op_seed} failed: {e}"));
                }
            }
        }
        // Every branch must still be readable after a Java operation (Java's DV loader).
        for b in server.branches() {
            if let Err(e) = server.call(json!({"op": "check-dvs", "branch": b})) {
                return fail(
                    totals,
                    &log,
                    format!("after the last Java operation, Java's check-dvs of {b} fails: {e}"),
                );
            }
        }
        let last = i + 1 == ops;
        if last || rng.below(100) < 45 {
            let branches = server.branches();
            let branch = if branches.iter().any(|b| b == "b") && rng.below(100) < 30 {
                "b"
            } else {
                "main"
            };
            if formats.data.is_some() {
                match reference_reader_agrees(&mut server, &catalog, &t, branch).await {
                    Ok(read) => totals.reference_reads += u64::from(read),
                    Err(why) => return fail(totals, &log, why),
                }
            }
            let outcome = convert_and_judge(
                &mut server,
                &catalog,
                &t,
                branch,
                &branches,
                totals,
                &mut log,
            )
            .await;
            if let Err(why) = outcome {
                return fail(totals, &log, why);
            }
        }
    }
    eprintln!("seed {seed}: {}", log.join("; "));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_histories_java_agrees() {
    let seeds = env_u64("EQDV_RANDOM_SEEDS", 10);
    let ops = env_u64("EQDV_RANDOM_OPS", 8);
    let start = env_u64("EQDV_RANDOM_SEED_START", 1);
    let t0 = Instant::now();
    let mut totals = Totals::default();
    for seed in start..start + seeds {
        totals.seeds += 1;
        history(seed, ops, Formats::default(), &mut totals).await;
    }
    eprintln!(
        "random histories: {} seeds (from {start}), {} operations ({} refused by Java), {} \
         conversions, {} with nothing to do, {} refusals, {} failures, {} Avro delete \
         files met, {:.0} s",
        totals.seeds,
        totals.ops,
        totals.java_op_errors,
        totals.conversions,
        totals.nothing_to_do,
        totals.refusals,
        totals.failures.len(),
        totals.avro_delete_files,
        t0.elapsed().as_secs_f64()
    );
    // `EQDV_RANDOM_RESULTS=FILE` records the totals (tests/soak/run sets it).
    eqdv_test_support::runs::record(
        "EQDV_RANDOM",
        &[
            ("seed_start", start.to_string()),
            ("seeds", totals.seeds.to_string()),
            ("ops_per_seed", ops.to_string()),
            ("operations", totals.ops.to_string()),
            ("java_op_errors", totals.java_op_errors.to_string()),
            ("conversions", totals.conversions.to_string()),
            ("nothing_to_do", totals.nothing_to_do.to_string()),
            ("refusals", totals.refusals.to_string()),
            ("failures", totals.failures.len().to_string()),
            ("soak_mix", u8::from(soak_mix()).to_string()),
            ("seconds", format!("{:.0}", t0.elapsed().as_secs_f64())),
        ],
    );
    totals.assert_no_failures();
}

/// Java writes its equality deletes in Avro (`write.delete.format.default=avro`), as
/// Flink's and Java's writers do when a table asks for it: eqdv converts them like
/// Parquet ones, judged by Java as every history is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_histories_with_avro_equality_deletes_java_agrees() {
    let mut totals = Totals::default();
    for seed in 501..504 {
        totals.seeds += 1;
        let formats = Formats {
            deletes: Some("avro"),
            ..Formats::default()
        };
        history(seed, 8, formats, &mut totals).await;
    }
    totals.assert_no_failures();
    assert!(
        totals.avro_delete_files > 0 && totals.conversions > 0,
        "no Avro equality delete converted: {} files met, {} conversions",
        totals.avro_delete_files,
        totals.conversions
    );
}

/// Java writes its data files in ORC (`write.format.default=orc`), its equality deletes
/// in ORC too (its writers' default for such a table) or in Avro, and deletes rows by
/// position besides: eqdv converts the equality deletes of ORC data files, with and
/// without Java's DVs on them, judged by Java as every history is (key index on and off
/// agreeing, Java's rows unchanged, no equality delete left).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_histories_with_orc_data_files_java_agrees() {
    let mut totals = Totals::default();
    for seed in 601..605 {
        totals.seeds += 1;
        let formats = Formats {
            data: Some("orc"),
            position_deletes: true,
            ..Formats::default()
        };
        history(seed, 8, formats, &mut totals).await;
    }
    eprintln!(
        "ORC histories: {} conversions, {} refusals; met {} ORC data files, {} ORC and {} \
         Avro equality delete files, {} DVs; eqdv's reader agreed with Java on {} heads",
        totals.conversions,
        totals.refusals,
        totals.orc_data_files,
        totals.orc_delete_files,
        totals.avro_delete_files,
        totals.files_with_dvs,
        totals.reference_reads
    );
    totals.assert_no_failures();
    assert!(
        totals.orc_data_files > 0
            && totals.orc_delete_files > 0
            && totals.files_with_dvs > 0
            && totals.reference_reads > 0,
        "the histories met no ORC data file, ORC equality delete or DV, or eqdv's reader read \
         none: {} ORC data files, {} ORC delete files, {} DVs, {} reads",
        totals.orc_data_files,
        totals.orc_delete_files,
        totals.files_with_dvs,
        totals.reference_reads
    );
}
