//! Tests of reading by field id, name mapping and defaults, and of type conversion on
//! read, over small Parquet files written here.

use std::collections::HashMap;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{ArrayRef, Int32Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema as ArrowSchema};
use futures::TryStreamExt;
use iceberg::spec::{
    Literal, MappedField, NameMapping, NestedField, NestedFieldRef, PrimitiveLiteral,
    PrimitiveType, Type,
};
use parquet::arrow::PARQUET_FIELD_ID_META_KEY;

use super::*;

/// The values of the first column, a long one, of `batches` as a file's read streams them.
pub(super) fn first_long_column(batches: &[(u64, RecordBatch)]) -> Vec<i64> {
    batches
        .iter()
        .flat_map(|(_, b)| {
            b.column(0)
                .as_any()
                .downcast_ref::<Int64Array>()
                .expect("a long column")
                .values()
                .to_vec()
        })
        .collect()
}

/// Writes one row group of `columns` (name, optional field id, values) to `path`.
fn write(path: &std::path::Path, columns: Vec<(&str, Option<i32>, ArrayRef)>) {
    let fields: Vec<Field> = columns
        .iter()
        .map(|(name, id, array)| {
            let f = Field::new(*name, array.data_type().clone(), true);
            match id {
                Some(id) => f.with_metadata(HashMap::from([(
                    PARQUET_FIELD_ID_META_KEY.to_string(),
                    id.to_string(),
                )])),
                None => f,
            }
        })
        .collect();
    let schema = Arc::new(ArrowSchema::new(fields));
    let batch =
        RecordBatch::try_new(schema.clone(), columns.into_iter().map(|c| c.2).collect()).unwrap();
    let file = std::fs::File::create(path).unwrap();
    let mut writer = parquet::arrow::ArrowWriter::try_new(file, schema, None).unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
}

async fn open(path: &std::path::Path) -> ParquetFile {
    let path = path.to_str().unwrap();
    ParquetFile::open(&FileIO::new_with_fs(), path, None)
        .await
        .unwrap()
}

fn long_field(id: i32, name: &str) -> NestedFieldRef {
    Arc::new(NestedField::optional(
        id,
        name,
        Type::Primitive(PrimitiveType::Long),
    ))
}

async fn read_longs(file: ParquetFile, fields: &[NestedFieldRef]) -> Result<Vec<Vec<Option<i64>>>> {
    let batches: Vec<(u64, RecordBatch)> = file.read(fields, None, 1024)?.try_collect().await?;
    Ok((0..fields.len())
        .map(|c| {
            batches
                .iter()
                .flat_map(|(_, b)| {
                    b.column(c)
                        .as_primitive::<Int64Type>()
                        .iter()
                        .collect::<Vec<_>>()
                })
                .collect()
        })
        .collect())
}

fn ids_123() -> ArrayRef {
    Arc::new(Int64Array::from(vec![1, 2, 3]))
}

#[tokio::test]
async fn files_without_field_ids_need_the_name_mapping() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("imported.parquet");
    write(&path, vec![("id", None, ids_123()), ("v", None, ids_123())]);
    let fields = [long_field(1, "id")];

    // No field ids and no mapping: refused, naming the file and the field.
    let file = open(&path).await;
    assert_eq!(file.id_source(), FieldIdSource::Unresolvable);
    let err = read_longs(file, &fields).await.unwrap_err();
    let message = err.to_string();
    assert!(
        matches!(err, Error::FieldUnresolvable { field_id: 1, .. }),
        "{err:?}"
    );
    assert!(
        message.contains("imported.parquet") && message.contains("field id"),
        "{message}"
    );
    assert!(message.contains("schema.name-mapping.default"), "{message}");

    // Through the mapping (by any of its names), the column is found.
    let mapping = NameMapping::new(vec![
        MappedField::new(Some(1), vec!["key".into(), "id".into()], vec![]),
        MappedField::new(Some(2), vec!["v".into()], vec![]),
    ]);
    let file = open(&path).await.with_name_mapping(Some(&mapping));
    assert_eq!(file.id_source(), FieldIdSource::NameMapping);
    assert_eq!(
        read_longs(file, &fields).await.unwrap(),
        vec![vec![Some(1), Some(2), Some(3)]]
    );

    // A field the mapping does not name cannot be told apart from a missing column.
    let unmapped = NameMapping::new(vec![MappedField::new(Some(2), vec!["v".into()], vec![])]);
    let file = open(&path).await.with_name_mapping(Some(&unmapped));
    let err = read_longs(file, &fields).await.unwrap_err();
    assert!(err.to_string().contains("does not name"), "{err}");

    // A field the mapping names but the file lacks (added after the import) is null.
    let later = NameMapping::new(vec![
        MappedField::new(Some(1), vec!["id".into()], vec![]),
        MappedField::new(Some(3), vec!["added".into()], vec![]),
    ]);
    let file = open(&path).await.with_name_mapping(Some(&later));
    assert_eq!(
        read_longs(file, &[long_field(3, "added")]).await.unwrap(),
        vec![vec![None, None, None]]
    );
}

#[tokio::test]
async fn field_ids_win_over_the_name_mapping() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("with-ids.parquet");
    // Column "id" carries field id 7: a mapping naming "id" as field 1 is ignored.
    write(&path, vec![("id", Some(7), ids_123())]);
    let mapping = NameMapping::new(vec![MappedField::new(Some(1), vec!["id".into()], vec![])]);
    let file = open(&path).await.with_name_mapping(Some(&mapping));
    assert_eq!(file.id_source(), FieldIdSource::FileIds);
    assert_eq!(
        read_longs(file, &[long_field(1, "id"), long_field(7, "renamed")])
            .await
            .unwrap(),
        vec![vec![None, None, None], vec![Some(1), Some(2), Some(3)]]
    );
}

#[tokio::test]
async fn missing_fields_read_their_initial_default() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.parquet");
    write(&path, vec![("id", Some(1), ids_123())]);
    let mut region = NestedField::optional(2, "region", Type::Primitive(PrimitiveType::String));
    region.initial_default = Some(Literal::Primitive(PrimitiveLiteral::String("eu".into())));
    let mut required = NestedField::required(3, "tier", Type::Primitive(PrimitiveType::Long));
    let file = open(&path).await;
    assert_eq!(
        file.source_of(&region).unwrap(),
        FieldSource::Constant(Some(Literal::Primitive(PrimitiveLiteral::String(
            "eu".into()
        ))))
    );
    // A required field the file lacks needs a default.
    assert!(file.source_of(&required).is_err());
    required.initial_default = Some(Literal::Primitive(PrimitiveLiteral::Long(5)));
    let batches: Vec<(u64, RecordBatch)> = file
        .read(&[Arc::new(region), Arc::new(required)], None, 2)
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let regions: Vec<Option<String>> = batches
        .iter()
        .flat_map(|(_, b)| {
            b.column(0)
                .as_string::<i32>()
                .iter()
                .map(|v| v.map(str::to_string))
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(regions, vec![Some("eu".to_string()); 3]);
    let tiers: Vec<Option<i64>> = batches
        .iter()
        .flat_map(|(_, b)| {
            b.column(1)
                .as_primitive::<Int64Type>()
                .iter()
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(tiers, vec![Some(5); 3]);
}

#[tokio::test]
async fn promoted_types_are_cast_and_other_types_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("typed.parquet");
    write(
        &path,
        vec![
            (
                "small",
                Some(1),
                Arc::new(Int32Array::from(vec![1, -2, 3])) as ArrayRef,
            ),
            (
                "text",
                Some(2),
                Arc::new(StringArray::from(vec!["1", "2", "3"])) as ArrayRef,
            ),
        ],
    );
    // int to long: a promotion the spec allows.
    let file = open(&path).await;
    assert_eq!(
        read_longs(file, &[long_field(1, "small")]).await.unwrap(),
        vec![vec![Some(1), Some(-2), Some(3)]]
    );
    // A string column where the table says long: never cast (nor read as null).
    let file = open(&path).await;
    let err = read_longs(file, &[long_field(2, "text")])
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::FieldUnresolvable { field_id: 2, .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("typed.parquet"), "{err}");
    assert!(err.to_string().contains("cannot convert exactly"), "{err}");
}

#[tokio::test]
async fn nested_columns_are_read_field_by_field() {
    use arrow_array::StructArray;
    use iceberg::spec::StructType;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nested.parquet");
    let child = Field::new("n", DataType::Int64, true).with_metadata(HashMap::from([(
        PARQUET_FIELD_ID_META_KEY.to_string(),
        "3".to_string(),
    )]));
    let nested: ArrayRef = Arc::new(StructArray::from(vec![(Arc::new(child), ids_123())]));
    write(
        &path,
        vec![("id", Some(1), ids_123()), ("s", Some(2), nested)],
    );
    let s_field = Arc::new(NestedField::optional(
        2,
        "s",
        Type::Struct(StructType::new(vec![long_field(3, "n")])),
    ));
    let file = open(&path).await;
    let batches: Vec<(u64, RecordBatch)> = file
        .read(&[long_field(1, "id"), s_field], None, 1024)
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let s = batches[0].1.column(1).as_struct();
    let n: Vec<Option<i64>> = s.column(0).as_primitive::<Int64Type>().iter().collect();
    assert_eq!(n, vec![Some(1), Some(2), Some(3)]);
}
