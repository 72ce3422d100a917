//! `eqdv convert --catalog s3tables` and `eqdv backfill --catalog s3tables`, the real
//! binary, on tables Apache Iceberg Java wrote into a table bucket of the test services'
//! S3 Tables (moto's emulator, which also serves the bucket's storage), judged by Java's
//! reader and PyIceberg.
//!
//! `tests/services/up` starts the services and writes tests/services/env; without its
//! variables these tests fail and say so, they never skip.

mod common;

use std::process::Output;

use common::{assert_exit, eqdv_command, eqdv_json, json};
use eqdv::catalog::TableName;
use eqdv_test_support::java::JavaTable;
use eqdv_test_support::services::{s3tables_bucket, s3tables_endpoint};

/// `--catalog s3tables --s3tables-bucket-arn ARN --s3-endpoint URL` (the emulator's
/// storage; the API's endpoint comes from AWS_ENDPOINT_URL_S3TABLES).
fn catalog_args(bucket_arn: &str) -> Vec<String> {
    [
        "--catalog",
        "s3tables",
        "--s3tables-bucket-arn",
        bucket_arn,
        "--s3-endpoint",
        &s3tables_endpoint(),
    ]
    .map(String::from)
    .to_vec()
}

/// `eqdv COMMAND --json <catalog args> --table NS.NAME EXTRA...`.
fn eqdv(bucket_arn: &str, name: &TableName, command: &str, extra: &[&str]) -> Output {
    let mut args = catalog_args(bucket_arn);
    args.extend(["--table".to_string(), name.to_string()]);
    eqdv_json(command, &args, extra)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eqdv_convert_and_backfill_with_s3_tables_convert_java_tables() {
    let bucket = s3tables_bucket("cli_s3t").await;
    let t = JavaTable::new_s3tables("cli_s3t", &bucket);
    t.write_cdc("15", "3", "600", "long", "identity");
    let before = t.dump();

    let out = eqdv(&bucket, &t.name(), "convert", &[]);
    assert_exit(&out, 0, "eqdv convert --catalog s3tables");
    let report = json(&out);
    assert_eq!(report["outcome"], "converted", "{report}");
    assert!(
        report["dvs_written"].as_u64().is_some_and(|n| n > 0),
        "{report}"
    );
    t.assert_converted(&before);

    // Nothing left: exit 3, as for every catalog.
    let out = eqdv(&bucket, &t.name(), "convert", &[]);
    assert_exit(&out, 3, "nothing left to convert");

    // `eqdv backfill` of the namespace converts a second table Java wrote there, split
    // into data ranges in this process (one commit of all its ranges).
    let second = JavaTable {
        table: "orders".into(),
        ..t.clone()
    };
    second.write_cdc("16", "3", "600", "string", "bucket:3");
    let second_before = second.dump();
    let out = eqdv_command()
        .arg("backfill")
        .arg("--json")
        .args(catalog_args(&bucket))
        .args(["--database", &t.database])
        .env("EQDV_SPLIT_ABOVE_MB", "0")
        .env("EQDV_MAX_RANGES", "3")
        .env_remove(eqdv::test_hooks::PAUSE_AT_ENV)
        .output()
        .expect("run eqdv backfill");
    assert_exit(&out, 0, "eqdv backfill --catalog s3tables");
    let done = json(&out);
    let conversions = done["conversions"].as_array().expect("conversions");
    assert!(!conversions.is_empty(), "{done}");
    for c in conversions {
        assert_eq!(c["outcome"], "converted", "{done}");
        assert_eq!(c["ranges"], 3, "{done}");
    }
    second.assert_converted(&second_before);
    t.assert_converted(&before);
}

/// A bucket ARN that is not one, a cleanup (a table bucket's storage cleans itself) and
/// a table S3 Tables does not have: one line each, naming what is at fault, exit 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_bucket_arn_or_a_missing_table_is_named() {
    let name = TableName::new("ns", "t");
    let out = eqdv(
        "arn:aws:s3:us-east-1:123456789012:bucket/lake",
        &name,
        "convert",
        &[],
    );
    assert_exit(&out, 1, "a bucket ARN of the wrong service");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("arn:aws:s3:us-east-1:123456789012:bucket/lake")
            && stderr.contains("s3tables"),
        "{stderr}"
    );

    let bucket = s3tables_bucket("cli_s3t_missing").await;
    // `eqdv cleanup` has nothing to do on a table bucket, and says why.
    let out = eqdv(&bucket, &name, "cleanup", &[]);
    assert_exit(&out, 1, "cleanup on S3 Tables");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("unreferenced file removal") && stderr.contains("ns.t"),
        "{stderr}"
    );
    let out = eqdv(&bucket, &name, "convert", &[]);
    assert_exit(&out, 1, "a table the bucket lacks");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let bucket_name = bucket.rsplit('/').next().unwrap_or_default();
    assert!(
        stderr.contains("ns.t") && stderr.contains(&format!("s3tables:{bucket_name}")),
        "the error names the table and the catalog: {stderr}"
    );
}
