//! Reading ORC files by name mapping, positions across stripes and batches, type
//! promotion on read, and clean errors for files cut short or damaged (ORC files
//! written here by orc-rust, which stores no field ids; Java-written ones, with ids, are
//! read in the integration tests).

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{ArrayRef, Int32Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema as ArrowSchema};
use futures::TryStreamExt;
use iceberg::io::FileIO;
use iceberg::spec::{MappedField, NameMapping, NestedField, PrimitiveType, Type};

use super::OrcFile;
use crate::Error;

/// Writes `batches` of `k` (long) and `n` (int) to an ORC file of small stripes.
fn write_orc(path: &std::path::Path, batches: &[(Vec<i64>, Vec<i32>)]) {
    let schema = Arc::new(ArrowSchema::new(vec![
        Field::new("k", DataType::Int64, true),
        Field::new("n", DataType::Int32, true),
        Field::new("v", DataType::Utf8, true),
    ]));
    let file = std::fs::File::create(path).unwrap();
    let mut writer = orc_rust::ArrowWriterBuilder::new(file, schema.clone())
        .try_build()
        .unwrap();
    for (k, n) in batches {
        let v: Vec<String> = k.iter().map(|k| format!("row {k}")).collect();
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from(k.clone())),
            Arc::new(Int32Array::from(n.clone())),
            Arc::new(StringArray::from(v)),
        ];
        writer
            .write(&RecordBatch::try_new(schema.clone(), columns).unwrap())
            .unwrap();
        // One stripe per batch: positions must run on across stripes.
        writer.flush_stripe().unwrap();
    }
    writer.close().unwrap();
}

fn mapping() -> NameMapping {
    NameMapping::new(vec![
        MappedField::new(Some(1), vec!["k".into()], vec![]),
        MappedField::new(Some(2), vec!["n".into()], vec![]),
        MappedField::new(Some(3), vec!["v".into()], vec![]),
    ])
}

fn long_field(id: i32, name: &str) -> Arc<NestedField> {
    Arc::new(NestedField::optional(
        id,
        name,
        Type::Primitive(PrimitiveType::Long),
    ))
}

async fn open(path: &std::path::Path) -> crate::Result<OrcFile> {
    OrcFile::open(&FileIO::new_with_fs(), path.to_str().unwrap(), None).await
}

/// `(position, k, n)` of every row read.
async fn read_rows(file: OrcFile, batch_size: usize) -> crate::Result<Vec<(u64, i64, i64)>> {
    let fields = [long_field(1, "k"), long_field(2, "n")];
    let batches: Vec<(u64, RecordBatch)> = file.read(&fields, batch_size)?.try_collect().await?;
    let mut rows = Vec::new();
    for (first, batch) in batches {
        let k = batch.column(0).as_primitive::<Int64Type>();
        let n = batch.column(1).as_primitive::<Int64Type>();
        for i in 0..batch.num_rows() {
            rows.push((first + i as u64, k.value(i), n.value(i)));
        }
    }
    Ok(rows)
}

#[tokio::test]
async fn rows_are_read_by_name_mapping_at_their_positions_across_stripes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data.orc");
    let batches: Vec<(Vec<i64>, Vec<i32>)> = (0..3)
        .map(|s| {
            let k: Vec<i64> = (0..700).map(|i| s * 1000 + i).collect();
            let n: Vec<i32> = k.iter().map(|&k| (k % 97) as i32).collect();
            (k, n)
        })
        .collect();
    write_orc(&path, &batches);

    let file = open(&path)
        .await
        .unwrap()
        .with_name_mapping(Some(&mapping()));
    assert_eq!((file.rows(), file.stripes()), (2100, 3));
    let has = |id| file.columns().names_of(id).is_some();
    assert!(has(1) && has(3) && !has(9));
    // Batches of 256 rows cut across each stripe's 700: positions still run 0..2100.
    let rows = read_rows(file, 256).await.unwrap();
    let expected: Vec<(u64, i64, i64)> = batches
        .iter()
        .flat_map(|(k, n)| k.iter().zip(n).map(|(&k, &n)| (k, i64::from(n))))
        .enumerate()
        .map(|(p, (k, n))| (p as u64, k, n))
        .collect();
    assert_eq!(rows, expected);
}

#[tokio::test]
async fn a_file_without_ids_and_no_name_mapping_is_refused_naming_file_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("imported.orc");
    write_orc(&path, &[(vec![1, 2], vec![3, 4])]);
    let err = read_rows(open(&path).await.unwrap(), 1024)
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::FieldUnresolvable { field_id: 1, .. }),
        "{err:?}"
    );
    let message = err.to_string();
    assert!(
        message.contains("imported.orc") && message.contains("ORC field ids"),
        "{message}"
    );
}

#[tokio::test]
async fn a_stored_type_that_does_not_convert_exactly_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("strings.orc");
    write_orc(&path, &[(vec![1], vec![2])]);
    let file = open(&path)
        .await
        .unwrap()
        .with_name_mapping(Some(&mapping()));
    // Field 3 is a string in the file; the table asks for a long.
    let err = match file.read(&[long_field(3, "v")], 1024) {
        Ok(_) => panic!("a string column read as a long"),
        Err(e) => e,
    };
    assert!(
        matches!(err, Error::FieldUnresolvable { field_id: 3, .. }),
        "{err:?}"
    );
}

/// Every cut of a valid file is an error naming the file, and every damaged byte an
/// error naming it or a read of the file's rows (ORC keeps no checksums: a damaged value
/// can read as another): never a panic, a hang or a stack overflow.
#[tokio::test]
async fn files_cut_short_or_damaged_give_errors_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let whole = dir.path().join("whole.orc");
    write_orc(&whole, &[((0..50).collect(), (0..50).collect())]);
    let bytes = std::fs::read(&whole).unwrap();
    let broken = dir.path().join("broken.orc");
    let mut cases: Vec<Vec<u8>> = (0..bytes.len()).map(|n| bytes[..n].to_vec()).collect();
    for at in 0..bytes.len() {
        for flip in [0x01u8, 0x80, 0xff] {
            let mut damaged = bytes.clone();
            damaged[at] ^= flip;
            cases.push(damaged);
        }
    }
    let mut errors = 0;
    for case in cases {
        std::fs::write(&broken, &case).unwrap();
        let read = match open(&broken).await {
            Ok(file) => read_rows(file.with_name_mapping(Some(&mapping())), 1024).await,
            Err(e) => Err(e),
        };
        match read {
            Err(e) => {
                assert!(e.to_string().contains("broken.orc"), "{e}");
                errors += 1;
            }
            // A flip in a byte the reader does not need (a statistic) may read right.
            Ok(rows) => assert!(rows.len() == 50 || case.len() < bytes.len(), "{rows:?}"),
        }
    }
    assert!(errors >= bytes.len(), "{errors} errors");
}
