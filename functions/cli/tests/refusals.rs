//! Refusals as an operator sees them: a table eqdv cannot convert faithfully makes
//! `eqdv convert` exit 1 with one line naming the file and the field, and leaves the
//! table and the disk as they were.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_schema::{Field, Schema};
use common::{eqdv_json, json};
use eqdv::catalog::{SqliteCatalog, TableName};
use eqdv::parquet_io::ParquetFile;
use eqdv::snapshot::{AddedFile, SnapshotChanges, build_snapshot};
use eqdv::table::{LoadedTable, TableFiles};
use futures::TryStreamExt;
use iceberg::spec::{DataContentType, DataFileBuilder, DataFileFormat, Operation};

fn table_args(dir: &Path) -> Vec<String> {
    vec![
        "--warehouse".into(),
        dir.display().to_string(),
        "--table".into(),
        "cdc.orders".into(),
    ]
}

fn all_files(dir: &Path) -> BTreeSet<PathBuf> {
    let mut out = BTreeSet::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                out.insert(path);
            }
        }
    }
    out
}

/// Appends a copy of the table's first data file written without Parquet field ids, as
/// an import (add_files, migrate) or a tool that is not Iceberg leaves it; returns its
/// path.
async fn append_file_without_field_ids(dir: &Path) -> String {
    let catalog = SqliteCatalog::open_warehouse(dir).unwrap();
    let name = TableName::new("cdc", "orders");
    let t = LoadedTable::load(&catalog, &name).await.unwrap();
    let head = t.head("main").unwrap();
    let files = TableFiles::read(&t, head.as_ref()).await.unwrap();
    let source = &files.data_files[0];
    let fields = t.metadata.current_schema().as_struct().fields().to_vec();
    let batches: Vec<(u64, RecordBatch)> = ParquetFile::open(&t.file_io, source.path(), None)
        .await
        .unwrap()
        .read(&fields, None, 8192)
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let schema = Arc::new(Schema::new(
        batches[0]
            .1
            .schema()
            .fields()
            .iter()
            .map(|f| Field::new(f.name(), f.data_type().clone(), true))
            .collect::<Vec<_>>(),
    ));
    let path = format!("{}/data/imported-no-field-ids.parquet", t.location());
    let local = path.trim_start_matches("file://").to_string();
    let mut writer = parquet::arrow::ArrowWriter::try_new(
        std::fs::File::create(&local).unwrap(),
        schema.clone(),
        None,
    )
    .unwrap();
    let mut rows = 0;
    for (_, batch) in &batches {
        rows += batch.num_rows();
        writer
            .write(&RecordBatch::try_new(schema.clone(), batch.columns().to_vec()).unwrap())
            .unwrap();
    }
    writer.close().unwrap();
    let size = std::fs::metadata(&local).unwrap().len();
    let file = DataFileBuilder::default()
        .content(DataContentType::Data)
        .file_path(path.clone())
        .file_format(DataFileFormat::Parquet)
        .partition(source.file.partition().clone())
        .partition_spec_id(source.spec_id)
        .record_count(rows as u64)
        .file_size_in_bytes(size)
        .build()
        .unwrap();
    let mut changes = SnapshotChanges::new(Operation::Append);
    changes.added_data_files.push(AddedFile {
        spec_id: source.spec_id,
        file,
    });
    let prepared = build_snapshot(&t, "main", &files, &changes).await.unwrap();
    eqdv::commit::publish(&catalog, &t, &prepared)
        .await
        .unwrap();
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_file_without_field_ids_and_no_name_mapping_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path();
    let args = table_args(w);
    let generate = |commits: &str| {
        let out = eqdv_json("generate", &args, &["--rows", "400", "--commits", commits]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    generate("1");
    let imported = append_file_without_field_ids(w).await;
    // Later deletes (higher sequence numbers) hit keys the imported copy holds.
    generate("2");

    let inspect_before = json(&eqdv_json("inspect", &args, &[]));
    let files_before = all_files(w);
    let out = eqdv_json("convert", &args, &[]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let report = json(&out);
    let error = report["error"].as_str().unwrap_or_default().to_string();
    let file_name = imported.rsplit('/').next().unwrap();
    assert!(error.contains(file_name), "{report}");
    assert!(error.contains("schema.name-mapping.default"), "{report}");
    assert!(error.contains("cannot resolve field"), "{report}");
    assert!(!error.contains('\n'), "one line: {error}");

    // Nothing changed: same snapshot, same files on disk, equality deletes still live.
    let inspect_after = json(&eqdv_json("inspect", &args, &[]));
    assert_eq!(inspect_after, inspect_before);
    assert!(
        inspect_after["totals"]["equality_delete_files"]
            .as_u64()
            .unwrap()
            > 0
    );
    assert_eq!(
        all_files(w),
        files_before,
        "the refusal left or removed files"
    );

    // The reader follows the same rule.
    let out = eqdv_json("rows", &args, &[]);
    assert_eq!(out.status.code(), Some(1));
}
