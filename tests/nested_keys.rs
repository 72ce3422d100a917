//! Equality keys nested in a struct, judged by Iceberg Java: tests/interop's
//! `write-nested` writes a v3 table `k long, s struct<id long, region string>, v string`
//! keyed on `s.id` (or on `k` and `s.region`), with rows whose `s` is null and rows whose
//! key under a present `s` is null, and equality deletes (in the projected schema, `s`
//! holding only the key) whose keys include both kinds of null. Java applies a delete of
//! a null `s` only to rows whose `s` is null, and a delete of a null key under a present
//! `s` only to rows with a present `s` and a null key: eqdv must write exactly the DVs
//! that make Java read the same rows after the conversion as before, with the key index
//! and without it (the same DVs), and leave no equality delete. Needs the test services
//! and the interop jar (`tests/run`).

use eqdv::catalog::GlueCatalog;
use eqdv::convert::{ConvertOptions, Outcome, convert};
use eqdv::table::{LoadedTable, TableFiles};
use eqdv_test_support::java::JavaTable;
use eqdv_test_support::{assert_key_index_agrees, key_index};
use serde_json::Value;

async fn head_files(catalog: &GlueCatalog, t: &JavaTable) -> (LoadedTable, TableFiles) {
    let table = LoadedTable::load(catalog, &t.name()).await.expect("load");
    let head = table.head("main").expect("head");
    let files = TableFiles::read(&table, head.as_ref())
        .await
        .expect("files");
    (table, files)
}

/// Java writes the table, eqdv resolves it with and without the key index (the same
/// DVs) and converts it with the index; Java must read the same rows as before, find
/// no equality delete left and load every DV.
async fn converts_like_java(test: &str, keys: &str, seed: &str, delete_format: &str) {
    converts_like_java_with(test, keys, seed, delete_format, false).await;
}

/// [`converts_like_java`], with `struct_added_later`: the table's first files were
/// written before `s` existed (Java reads their `s` as null; `s` is the last column).
async fn converts_like_java_with(
    test: &str,
    keys: &str,
    seed: &str,
    delete_format: &str,
    struct_added_later: bool,
) {
    let t = JavaTable::new(test);
    let mut args = vec![
        "--keys",
        keys,
        "--seed",
        seed,
        "--delete-format",
        delete_format,
    ];
    if struct_added_later {
        args.push("--struct-added-later");
    }
    let written = t.java_json("write-nested", &args);
    eprintln!("{test}: Java wrote {written}");
    assert!(
        written["equality_delete_files"].as_u64().unwrap_or(0) > 0,
        "{written}"
    );
    let before = t.dump();
    assert!(
        (before.len() as u64) < written["rows_written"].as_u64().unwrap_or(0),
        "{test}: Java's deletes deleted nothing"
    );
    // Both kinds of null are live before the conversion: what a conversion that did not
    // tell them apart could delete too much of.
    let leaf = if keys == "s.id" { 0 } else { 1 };
    let shapes: Vec<(bool, bool)> = before
        .iter()
        .map(|r| {
            let row: Vec<Value> = serde_json::from_str(r).expect("a canonical row");
            let s = &row[if struct_added_later { 2 } else { 1 }];
            (s.is_null(), s.get(leaf).is_some_and(Value::is_null))
        })
        .collect();
    assert!(
        shapes.iter().any(|s| s.0) && shapes.iter().any(|s| s.1),
        "{test}: Java reads no row with a null s or none with a null key under s"
    );

    if struct_added_later {
        // Java deleted some of the rows written before s existed (their s reads null),
        // not all.
        let old = before.iter().filter(|r| r.contains("\"old")).count() as u64;
        let written_old = written["rows_written_before_s"].as_u64().unwrap_or(0);
        assert!(
            old > 0 && old < written_old,
            "{test}: {old} of {written_old} older rows live"
        );
    }

    let catalog = t.catalog().await;
    let (table, files) = head_files(&catalog, &t).await;
    let avro = files
        .equality_deletes
        .iter()
        .filter(|d| d.file.file_format() == iceberg::spec::DataFileFormat::Avro)
        .count();
    let expected_avro = if delete_format == "avro" {
        files.equality_deletes.len()
    } else {
        0
    };
    assert_eq!(
        avro, expected_avro,
        "{test}: delete files in the wrong format"
    );
    assert_key_index_agrees(&table, &files, test).await;

    let options = ConvertOptions {
        resolve: key_index(true),
        ..Default::default()
    };
    let report = convert(&catalog, &t.name(), &options)
        .await
        .unwrap_or_else(|e| panic!("{test}: convert failed: {e}"));
    assert_eq!(report.outcome, Outcome::Converted, "{test}: {report:?}");
    let after = t.dump();
    eqdv_judges::assert_same_rows("Iceberg Java", &after, &before);
    let check = t.java_json("check-dvs", &[]);
    assert_eq!(check["equality_delete_files"], 0, "{test}: {check}");
    let (_, files) = head_files(&catalog, &t).await;
    assert!(!files.dvs.is_empty(), "{test}: no DV written");
    assert_eq!(
        check["dvs"].as_u64(),
        Some(files.dvs.len() as u64),
        "{check}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_nested_in_a_struct_converts_as_java_applies_it() {
    converts_like_java("nested_sid", "s.id", "3", "parquet").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_top_level_and_a_nested_key_convert_as_java_applies_them() {
    converts_like_java("nested_k_region", "k,s.region", "5", "parquet").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nested_keys_in_avro_delete_files_convert_as_java_applies_them() {
    converts_like_java("nested_avro", "k,s.region", "11", "avro").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_written_before_the_struct_existed_read_a_null_struct() {
    converts_like_java_with("nested_later", "k,s.region", "13", "parquet", true).await;
}
