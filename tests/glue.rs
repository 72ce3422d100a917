//! eqdv on its production parts: the Glue Data Catalog (the emulator from
//! tests/services) and S3 (MinIO). `tests/run` starts them and exports their endpoints;
//! without them these tests fail and say so, they never skip.

mod common;
use eqdv::catalog::{Catalog, GlueCatalog, GlueConfig, TableName, TablePointer};
use eqdv::convert::{ConvertOptions, Outcome, convert};
use eqdv::table::{LoadedTable, TableFiles};
use eqdv_test_support::services;
use eqdv_workload::generate::{WorkloadSpec, expected_rows, generate};

/// A Glue catalog with a warehouse prefix of its own, and a fresh database name.
async fn catalog(test: &str) -> (GlueCatalog, String) {
    let unique = services::unique_name(test);
    let config = GlueConfig {
        warehouse: Some(services::unique_warehouse(&unique)),
        ..Default::default()
    };
    let catalog = GlueCatalog::connect(config).await.expect("glue catalog");
    (catalog, format!("eqdv_{unique}"))
}

async fn head_files(catalog: &dyn Catalog, name: &TableName) -> TableFiles {
    let t = LoadedTable::load(catalog, name).await.expect("load");
    let head = t.head("main").expect("head");
    TableFiles::read(&t, head.as_ref()).await.expect("files")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generated_table_on_glue_and_minio_converts() {
    let (catalog, db) = catalog("gen").await;
    let name = TableName::new(db, "orders");
    let report = generate(&catalog, &name, &services::glue_spec(1))
        .await
        .expect("generate on Glue/S3");
    let expected = expected_rows(&report.state).unwrap();
    let t = LoadedTable::load(&catalog, &name).await.unwrap();
    assert!(t.location().starts_with("s3://"), "{}", t.location());
    assert!(t.pointer.version.is_some(), "Glue returned no VersionId");
    assert!(
        !head_files(&catalog, &name)
            .await
            .equality_deletes
            .is_empty()
    );

    let r = convert(&catalog, &name, &ConvertOptions::default())
        .await
        .expect("convert");
    assert_eq!(r.outcome, Outcome::Converted);
    // PyIceberg, through its own Glue catalog and S3 client, judges first.
    let view = common::judge_converted_glue(&name.to_string(), &expected);
    assert_eq!(view.dv_count, r.dvs_written);
    // eqdv's reader and DV checks as a second opinion.
    let t = LoadedTable::load(&catalog, &name).await.unwrap();
    let rows = eqdv_workload::read::read_canonical(&t, "main")
        .await
        .unwrap();
    common::assert_same_rows("eqdv's reader", &rows, &expected);
    let files = head_files(&catalog, &name).await;
    assert!(files.equality_deletes.is_empty());
    assert_eq!(files.dvs.len(), r.dvs_written);
    let checked = eqdv::verify::verify_dvs(&t, &files)
        .await
        .expect("valid DVs");
    assert_eq!(checked.dvs, r.dvs_written);
    let again = convert(&catalog, &name, &ConvertOptions::default())
        .await
        .unwrap();
    assert_eq!(again.outcome, Outcome::NothingToDo);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_version_is_a_conflict_and_changes_nothing() {
    let (catalog, db) = catalog("stale").await;
    let name = TableName::new(db, "t");
    generate(
        &catalog,
        &name,
        &WorkloadSpec {
            commits: 1,
            ..services::glue_spec(2)
        },
    )
    .await
    .unwrap();
    let before = catalog.load_pointer(&name).await.unwrap();
    // Another writer commits: the pointer and Glue's VersionId move on.
    generate(
        &catalog,
        &name,
        &WorkloadSpec {
            commits: 1,
            ..services::glue_spec(2)
        },
    )
    .await
    .unwrap();
    let moved = catalog.load_pointer(&name).await.unwrap();
    assert_ne!(before.version, moved.version, "Glue did not bump VersionId");
    // A swap from the stale pointer is a conflict...
    let err = catalog
        .swap_pointer(
            &name,
            &before,
            "s3://warehouse/nowhere/metadata/99999-x.metadata.json",
        )
        .await
        .expect_err("stale swap must fail");
    assert!(err.is_commit_conflict(), "{err}");
    // ...and so is a stale VersionId with the current location.
    let forged = TablePointer {
        metadata_location: moved.metadata_location.clone(),
        version: before.version.clone(),
    };
    let err = catalog
        .swap_pointer(
            &name,
            &forged,
            "s3://warehouse/nowhere/metadata/99999-y.metadata.json",
        )
        .await
        .expect_err("stale VersionId must fail");
    assert!(err.is_commit_conflict(), "{err}");
    assert_eq!(catalog.load_pointer(&name).await.unwrap(), moved);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_table_and_non_iceberg_errors_name_the_table() {
    let (catalog, db) = catalog("missing").await;
    let name = TableName::new(db, "nope");
    let err = convert(&catalog, &name, &ConvertOptions::default())
        .await
        .expect_err("missing table");
    let msg = err.to_string();
    assert!(matches!(err, eqdv::Error::TableNotFound { .. }), "{msg}");
    assert!(msg.contains(&name.to_string()), "{msg}");
}
