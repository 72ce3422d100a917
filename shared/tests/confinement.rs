//! eqdv writes and deletes only in its table's own directories, whatever a file it reads
//! back says: crafted tables and split results on a real local warehouse (SQLite
//! catalog, Parquet and Puffin files on disk).
//!
//! - A range result (read back by a split's fan-in) naming a Puffin file outside the
//!   table: the commit is refused naming it, the table is unchanged, and the file named
//!   is not deleted when the fan-in discards the split's files.
//! - A table whose metadata file lies outside its declared location (its location may
//!   be another table's): `cleanup` refuses it and deletes nothing.
//! - `storage::delete_files` leaves every path outside the table's directories alone.

use eqdv::Error;
use eqdv::catalog::Catalog;
use eqdv::cleanup::{CleanupOptions, cleanup};
use eqdv::convert::{ConvertOptions, SplitJob, run_commit_task, run_range_task};
use eqdv_test_support::*;

/// A file outside the table's location, in a sibling table's data directory.
fn victim(w: &Warehouse, name: &str) -> String {
    let dir = w.dir.path().join("other.db").join("victim").join("data");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let path = dir.join(name);
    std::fs::write(&path, b"not eqdv's").expect("write victim");
    path.display().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_range_result_naming_a_file_outside_the_table_is_refused_and_that_file_kept() {
    let w = warehouse();
    generate_table(&w.catalog, &global_deletes_spec(70)).await;
    let t = load(&w.catalog).await;
    let plan =
        eqdv::plan::plan(&t, "main", &files(&w.catalog).await, &Default::default()).expect("plan");
    let job = SplitJob::new(plan.shards[0].clone(), 2).expect("split job");
    let options = ConvertOptions::default();
    let before = w.catalog.load_pointer(&table()).await.expect("pointer");

    let mut outputs = Vec::new();
    for index in 0..2 {
        let out = run_range_task(&w.catalog, &job, &options, index)
            .await
            .unwrap_or_else(|e| panic!("range {index}: {e}"));
        outputs.push(out);
    }
    let crafted = outputs
        .iter()
        .find(|o| o.dvs > 0)
        .expect("a range found positions");
    let other = outputs
        .iter()
        .find(|o| o.range != crafted.range)
        .expect("the other range");
    // Rewrite the stored result: its Puffin file is now another table's file, outside
    // this table's location, and then one that climbs out of it with `..`.
    let location = t.location().trim_end_matches('/').to_string();
    let escaping = format!("{location}/data/../../other.db/victim/data/escape.puffin");
    for (target, kept) in [
        (victim(&w, "eqdv-dv-1.puffin"), None),
        (escaping.clone(), Some(victim(&w, "escape.puffin"))),
    ] {
        // Each round rewrites a fresh result: the previous round's was removed.
        let out = run_range_task(&w.catalog, &job, &options, crafted.range)
            .await
            .expect("range again");
        let path = out
            .result_location
            .strip_prefix("file://")
            .unwrap_or(&out.result_location);
        let mut result: serde_json::Value =
            serde_json::from_slice(&std::fs::read(path).expect("read result")).expect("json");
        result["puffin"]["location"] = serde_json::Value::from(target.clone());
        std::fs::write(path, serde_json::to_vec(&result).unwrap()).expect("rewrite result");
        if !std::path::Path::new(other.result_location.trim_start_matches("file://")).exists() {
            run_range_task(&w.catalog, &job, &options, other.range)
                .await
                .expect("other range again");
        }

        let err = run_commit_task(&w.catalog, &job, &options)
            .await
            .expect_err("a result naming a file outside the table commits");
        let message = err.to_string();
        assert!(
            matches!(err, Error::InvalidInput(_))
                && message.contains("refusing")
                && message.contains(&target),
            "{message}"
        );
        let after = w.catalog.load_pointer(&table()).await.expect("pointer");
        assert_eq!(
            after.metadata_location, before.metadata_location,
            "the table changed"
        );
        // The file the result named is not deleted by the fan-in's discard.
        let named = kept.unwrap_or(target.clone());
        assert!(std::path::Path::new(&named).exists(), "{named} was deleted");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cleanup_refuses_a_table_whose_metadata_lies_outside_its_location() {
    let w = warehouse();
    generate_table(&w.catalog, &global_deletes_spec(71)).await;
    let pointer = w.catalog.load_pointer(&table()).await.expect("pointer");
    // The table's metadata, registered from another directory: its declared location
    // (where cleanup would list and delete) is then not where its metadata lives.
    let elsewhere = w.dir.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).expect("mkdir");
    let source = pointer
        .metadata_location
        .strip_prefix("file://")
        .unwrap_or(&pointer.metadata_location)
        .to_string();
    let moved = elsewhere.join("00099-moved.metadata.json");
    std::fs::copy(&source, &moved).expect("copy metadata");
    let moved = moved.display().to_string();
    w.catalog
        .swap_pointer(&table(), &pointer, &moved)
        .await
        .expect("register elsewhere");
    // An orphan cleanup would otherwise delete.
    let t = load(&w.catalog).await;
    let orphan = format!(
        "{}/data/orphan.parquet",
        t.location()
            .trim_start_matches("file://")
            .trim_end_matches('/')
    );
    std::fs::write(&orphan, b"x").expect("orphan");

    let options = CleanupOptions {
        older_than: std::time::Duration::ZERO,
        ..Default::default()
    };
    let err = cleanup(&w.catalog, &table(), &options)
        .await
        .expect_err("cleanup of a table whose metadata is elsewhere");
    let message = err.to_string();
    assert!(
        message.contains(&moved) && message.contains("not one of its own"),
        "{message}"
    );
    assert!(
        std::path::Path::new(&orphan).exists(),
        "cleanup deleted a file"
    );
}

#[tokio::test]
async fn deletes_outside_the_tables_directories_are_refused() {
    let w = warehouse();
    let table_dir = w.dir.path().join("db.db").join("t");
    std::fs::create_dir_all(table_dir.join("data")).expect("mkdir");
    let inside = table_dir.join("data").join("eqdv-dv-1.puffin");
    std::fs::write(&inside, b"x").expect("inside");
    let outside = [
        victim(&w, "a.puffin"),
        format!(
            "{}/data/../../../other.db/victim/data/b.puffin",
            table_dir.display()
        ),
        table_dir.join("c.puffin").display().to_string(),
    ];
    victim(&w, "b.puffin");
    std::fs::write(table_dir.join("c.puffin"), b"x").expect("c");
    let mut paths = vec![inside.display().to_string()];
    paths.extend(outside.iter().cloned());
    let location = table_dir.display().to_string();
    eqdv::storage::delete_files(w.catalog.file_io(), &location, &paths).await;
    assert!(!inside.exists(), "the table's own file was not deleted");
    for path in [
        w.dir.path().join("other.db/victim/data/a.puffin"),
        w.dir.path().join("other.db/victim/data/b.puffin"),
        table_dir.join("c.puffin"),
    ] {
        assert!(path.exists(), "{} was deleted", path.display());
    }
}
