//! Reading keys nested in structs from Parquet: by field id, through the name mapping,
//! with null structs kept apart from null keys, and the files that cannot be read
//! exactly refused.

use std::collections::HashMap;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{
    Array, ArrayRef, BooleanArray, Int64Array, RecordBatch, StringArray, StructArray,
};
use arrow_schema::{DataType, Field, Fields, Schema as ArrowSchema};
use futures::TryStreamExt;
use iceberg::spec::{
    MappedField, NameMapping, NestedField, PrimitiveType, Schema, StructType, Type,
};
use parquet::arrow::PARQUET_FIELD_ID_META_KEY;

use super::*;
use crate::keys::KeyColumns;

fn with_id(field: Field, id: Option<i32>) -> Field {
    match id {
        Some(id) => field.with_metadata(HashMap::from([(
            PARQUET_FIELD_ID_META_KEY.to_string(),
            id.to_string(),
        )])),
        None => field,
    }
}

/// The table: k long (1), s struct<id long (3), region string (4)> (2).
fn table_schema() -> Schema {
    let s = StructType::new(vec![
        NestedField::optional(3, "id", Type::Primitive(PrimitiveType::Long)).into(),
        NestedField::optional(4, "region", Type::Primitive(PrimitiveType::String)).into(),
    ]);
    Schema::builder()
        .with_fields(vec![
            NestedField::optional(1, "k", Type::Primitive(PrimitiveType::Long)).into(),
            NestedField::optional(2, "s", Type::Struct(s)).into(),
        ])
        .build()
        .expect("schema")
}

/// Writes k and s (with ids when `ids`; s holding `id` only when `with_key`): rows
/// 0 and 1 a null s, 2 a null s.id, 3 and 4 ids 5 and 9.
fn write(path: &std::path::Path, ids: bool, with_key: bool) {
    let id = |n| ids.then_some(n);
    let mut children: Vec<(Field, ArrayRef)> = Vec::new();
    if with_key {
        children.push((
            with_id(Field::new("id", DataType::Int64, true), id(3)),
            Arc::new(Int64Array::from(vec![
                None,
                Some(7),
                None,
                Some(5),
                Some(9),
            ])),
        ));
    }
    children.push((
        with_id(Field::new("region", DataType::Utf8, true), id(4)),
        Arc::new(StringArray::from(vec![
            None,
            None,
            Some("x"),
            Some("a"),
            Some("b"),
        ])),
    ));
    let (fields, arrays): (Vec<Field>, Vec<ArrayRef>) = children.into_iter().unzip();
    let valid = BooleanArray::from(vec![false, false, true, true, true]);
    let s = StructArray::new(
        Fields::from(fields),
        arrays,
        Some(valid.values().clone().into()),
    );
    let schema = Arc::new(ArrowSchema::new(vec![
        with_id(Field::new("k", DataType::Int64, true), id(1)),
        with_id(Field::new("s", s.data_type().clone(), true), id(2)),
    ]));
    let k: ArrayRef = Arc::new(Int64Array::from(vec![1, 2, 3, 4, 5]));
    let batch = RecordBatch::try_new(schema.clone(), vec![k, Arc::new(s)]).expect("batch");
    let file = std::fs::File::create(path).expect("create");
    let mut writer = parquet::arrow::ArrowWriter::try_new(file, schema, None).expect("writer");
    writer.write(&batch).expect("write");
    writer.close().expect("close");
}

async fn open(path: &std::path::Path) -> ParquetFile {
    ParquetFile::open(&FileIO::new_with_fs(), path.to_str().expect("path"), None)
        .await
        .expect("open")
}

async fn read_keys(file: ParquetFile, keys: &KeyColumns) -> Vec<RecordBatch> {
    file.read(&keys.fields, None, 1024)
        .expect("read")
        .map_ok(|(_, b)| b)
        .try_collect()
        .await
        .expect("batches")
}

/// Checks the (k, s.id) keys read from the file described at [`write`].
fn check(keys: &KeyColumns, batches: &[RecordBatch]) {
    let batch = &batches[0];
    assert_eq!(batch.num_rows(), 5);
    let rows = keys.encode(batch.columns()).expect("encode");
    let s_id = crate::keys::leaf(batch.column(1)).expect("leaf");
    assert_eq!(
        s_id.as_primitive::<Int64Type>().iter().collect::<Vec<_>>(),
        vec![None, None, None, Some(5), Some(9)]
    );
    // The key (k, s.id) of row 1 under a null s (whatever the file holds under it)
    // differs from a present s with a null id, as Java compares them.
    let only_s = KeyColumns::new("t", &table_schema(), &[3]).expect("s.id");
    let s_rows = only_s.encode(&[batch.column(1).clone()]).expect("encode");
    assert_eq!(s_rows.row(0), s_rows.row(1));
    assert_ne!(s_rows.row(1), s_rows.row(2));
    assert_ne!(rows.row(0), rows.row(1));
}

#[tokio::test]
async fn a_nested_key_reads_by_field_id_with_its_structs_nulls() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("nested.parquet");
    write(&path, true, true);
    let keys = KeyColumns::new("t", &table_schema(), &[1, 3]).expect("keys");
    let file = open(&path).await;
    assert_eq!(file.leaf_index(3), Some(1));
    assert_eq!(file.leaf_index(4), Some(2));
    assert!(file.has_field(3) && !file.has_field(8));
    check(&keys, &read_keys(file, &keys).await);
}

#[tokio::test]
async fn a_nested_key_reads_through_the_name_mapping() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("mapped.parquet");
    write(&path, false, true);
    let keys = KeyColumns::new("t", &table_schema(), &[1, 3]).expect("keys");
    let mapping = NameMapping::new(vec![
        MappedField::new(Some(1), vec!["k".into()], vec![]),
        MappedField::new(
            Some(2),
            vec!["s".into()],
            vec![
                MappedField::new(Some(3), vec!["id".into()], vec![]),
                MappedField::new(Some(4), vec!["region".into()], vec![]),
            ],
        ),
    ]);
    let file = open(&path).await.with_name_mapping(Some(&mapping));
    assert_eq!(file.leaf_index(3), Some(1));
    check(&keys, &read_keys(file, &keys).await);
    // A mapping that names s but not its id cannot place the key.
    let partial = NameMapping::new(vec![MappedField::new(Some(2), vec!["s".into()], vec![])]);
    let file = open(&path).await.with_name_mapping(Some(&partial));
    let err = file.source_of(&keys.fields[1]).expect_err("unmapped");
    assert!(err.to_string().contains("without its field id"), "{err}");
}

#[tokio::test]
async fn a_struct_without_the_key_is_refused_and_a_missing_struct_is_null() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("no_key.parquet");
    write(&path, true, false);
    let keys = KeyColumns::new("t", &table_schema(), &[3]).expect("keys");
    let file = open(&path).await;
    // Java reads such an s as null or not depending on its projection.
    let err = file
        .source_of(&keys.fields[0])
        .expect_err("struct without the key");
    let message = err.to_string();
    assert!(
        message.contains("no_key.parquet") && message.contains("id"),
        "{message}"
    );
    assert!(
        matches!(&err, crate::Error::FieldUnresolvable { field, field_id: 3, .. } if field == "s.id"),
        "{err}"
    );

    // A file written before s existed reads every s as null.
    let later = Schema::builder()
        .with_fields(vec![
            NestedField::optional(1, "k", Type::Primitive(PrimitiveType::Long)).into(),
            NestedField::optional(
                30,
                "t",
                Type::Struct(StructType::new(vec![
                    NestedField::optional(31, "id", Type::Primitive(PrimitiveType::Long)).into(),
                ])),
            )
            .into(),
        ])
        .build()
        .expect("schema");
    let keys = KeyColumns::new("t", &later, &[31]).expect("keys");
    let batches = read_keys(open(&path).await, &keys).await;
    let column = batches[0].column(0);
    assert!(matches!(column.data_type(), DataType::Struct(_)));
    assert_eq!(column.null_count(), 5);
}
