use super::*;
use crate::keys::KeyColumns;
use arrow_array::Array;
use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use iceberg::spec::{NestedField, PrimitiveType, Schema, Type};

/// An Avro container of `rows` under `schema` (JSON), as Iceberg's writers lay it out.
fn container(schema: &str, rows: Vec<Vec<(&str, Value)>>) -> Vec<u8> {
    let schema = AvroSchema::parse_str(schema).expect("schema");
    let mut writer = apache_avro::Writer::new(&schema, Vec::new());
    for row in rows {
        let mut record = apache_avro::types::Record::new(&schema).expect("record");
        for (name, value) in row {
            record.put(name, value);
        }
        writer.append(record).expect("append");
    }
    writer.into_inner().expect("bytes")
}

fn decode_keys(
    path: &str,
    bytes: &[u8],
    keys: &KeyColumns,
    mapping: Option<&NameMapping>,
    batch_size: usize,
) -> Result<Vec<RecordBatch>> {
    decode_columns(
        path,
        bytes,
        (&keys.fields, &keys.arrow_schema),
        mapping,
        batch_size,
    )
}

fn key_columns(types: &[(i32, &str, PrimitiveType)], ids: &[i32]) -> KeyColumns {
    let schema = Schema::builder()
        .with_fields(types.iter().map(|(id, name, t)| {
            Arc::new(NestedField::optional(
                *id,
                *name,
                Type::Primitive(t.clone()),
            ))
        }))
        .build()
        .expect("schema");
    KeyColumns::new("t", &schema, ids).expect("keys")
}

const SCHEMA: &str = r#"{"type": "record", "name": "r", "fields": [
    {"name": "k", "type": "int", "field-id": 1},
    {"name": "s", "type": ["null", "string"], "default": null, "field-id": 2}]}"#;

#[test]
fn keys_are_found_by_field_id_and_promoted_exactly() {
    let bytes = container(
        SCHEMA,
        vec![
            vec![
                ("k", Value::Int(7)),
                ("s", Value::Union(1, Box::new(Value::String("a".into())))),
            ],
            vec![
                ("k", Value::Int(-3)),
                ("s", Value::Union(0, Box::new(Value::Null))),
            ],
            vec![
                ("k", Value::Int(9)),
                ("s", Value::Union(1, Box::new(Value::String("c".into())))),
            ],
        ],
    );
    // The table promoted k to long, and lists s before k.
    let keys = key_columns(
        &[
            (2, "s", PrimitiveType::String),
            (1, "k", PrimitiveType::Long),
        ],
        &[2, 1],
    );
    let batches = decode_keys("f.avro", &bytes, &keys, None, 2).expect("decoded");
    assert_eq!(
        batches.iter().map(|b| b.num_rows()).collect::<Vec<_>>(),
        vec![2, 1]
    );
    let longs: Vec<i64> = batches
        .iter()
        .flat_map(|b| b.column(1).as_primitive::<Int64Type>().values().to_vec())
        .collect();
    assert_eq!(longs, vec![7, -3, 9]);
    let strings = batches[0].column(0).as_string::<i32>();
    assert_eq!((strings.value(0), strings.is_null(1)), ("a", true));
}

#[test]
fn logical_types_read_as_the_table_types() {
    let schema = r#"{"type": "record", "name": "r", "fields": [
        {"name": "d", "type": {"type": "fixed", "name": "fixed_5", "size": 5,
            "logicalType": "decimal", "precision": 10, "scale": 2}, "field-id": 1},
        {"name": "u", "type": {"type": "fixed", "name": "uuid_fixed", "size": 16,
            "logicalType": "uuid"}, "field-id": 2},
        {"name": "t", "type": {"type": "long", "logicalType": "timestamp-micros",
            "adjust-to-utc": true}, "field-id": 3},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}, "field-id": 4},
        {"name": "b", "type": "bytes", "field-id": 5}]}"#;
    let uuid = uuid::Uuid::from_u128(0x0123_4567_89ab_cdef_0123_4567_89ab_cdef);
    let bytes = container(
        schema,
        vec![vec![
            (
                "d",
                Value::Decimal(vec![0xff, 0xff, 0xff, 0xff, 0x85].into()),
            ),
            ("u", Value::Uuid(uuid)),
            ("t", Value::TimestampMicros(1_700_000_000_000_000)),
            ("day", Value::Date(19_000)),
            ("b", Value::Bytes(vec![1, 2, 3])),
        ]],
    );
    let keys = key_columns(
        &[
            (
                1,
                "d",
                PrimitiveType::Decimal {
                    precision: 18,
                    scale: 2,
                },
            ),
            (2, "u", PrimitiveType::Uuid),
            (3, "t", PrimitiveType::Timestamptz),
            (4, "day", PrimitiveType::Date),
            (5, "b", PrimitiveType::Binary),
        ],
        &[1, 2, 3, 4, 5],
    );
    let batches = decode_keys("f.avro", &bytes, &keys, None, 16).expect("decoded");
    let batch = &batches[0];
    assert_eq!(batch.schema(), keys.arrow_schema);
    let decimal = batch
        .column(0)
        .as_primitive::<arrow_array::types::Decimal128Type>();
    assert_eq!(decimal.value(0), -123);
    assert_eq!(
        batch.column(1).as_fixed_size_binary().value(0),
        uuid.as_bytes()
    );
    // Another scale is not an exact read.
    let rescaled = key_columns(
        &[(
            1,
            "d",
            PrimitiveType::Decimal {
                precision: 18,
                scale: 3,
            },
        )],
        &[1],
    );
    let e = decode_keys("f.avro", &bytes, &rescaled, None, 16)
        .unwrap_err()
        .to_string();
    assert!(e.contains("decimal(10, 2) in the file"), "{e}");
}

#[test]
fn without_field_ids_keys_are_found_through_the_name_mapping() {
    let schema = r#"{"type": "record", "name": "r", "fields": [
        {"name": "key", "type": "long"}]}"#;
    let bytes = container(schema, vec![vec![("key", Value::Long(5))]]);
    let keys = key_columns(&[(1, "k", PrimitiveType::Long)], &[1]);
    assert!(decode_keys("f.avro", &bytes, &keys, None, 16).is_err());
    let mapping = NameMapping::new(vec![iceberg::spec::MappedField::new(
        Some(1),
        vec!["k".into(), "key".into()],
        vec![],
    )]);
    let batches = decode_keys("f.avro", &bytes, &keys, Some(&mapping), 16).expect("mapped");
    assert_eq!(batches[0].column(0).as_primitive::<Int64Type>().value(0), 5);
}

#[test]
fn position_delete_columns_read_by_their_reserved_ids() {
    let schema = r#"{"type": "record", "name": "r", "fields": [
        {"name": "file_path", "type": "string", "field-id": 2147483546},
        {"name": "pos", "type": "long", "field-id": 2147483545}]}"#;
    let bytes = container(
        schema,
        vec![
            vec![
                ("file_path", Value::String("s3://b/d.parquet".into())),
                ("pos", Value::Long(4)),
            ],
            vec![
                ("file_path", Value::String("s3://b/d.parquet".into())),
                ("pos", Value::Long(9)),
            ],
        ],
    );
    let fields = vec![
        Arc::new(NestedField::required(
            2147483546,
            "file_path",
            Type::Primitive(PrimitiveType::String),
        )),
        Arc::new(NestedField::required(
            2147483545,
            "pos",
            Type::Primitive(PrimitiveType::Long),
        )),
    ];
    let schema = crate::parquet_io::target_schema(&fields).expect("schema");
    let batches = decode_columns("p.avro", &bytes, (&fields, &schema), None, 8192).expect("read");
    assert_eq!(
        batches[0].column(0).as_string::<i32>().value(1),
        "s3://b/d.parquet"
    );
    assert_eq!(
        batches[0]
            .column(1)
            .as_primitive::<Int64Type>()
            .values()
            .to_vec(),
        vec![4, 9]
    );
}

#[test]
fn a_key_that_would_not_read_exactly_is_refused_naming_file_and_field() {
    let bytes = container(
        SCHEMA,
        vec![vec![
            ("k", Value::Int(7)),
            ("s", Value::Union(0, Box::new(Value::Null))),
        ]],
    );
    // A string key stored as int, and a field id the file lacks.
    let wrong_type = key_columns(&[(1, "k", PrimitiveType::String)], &[1]);
    let e = decode_keys("f.avro", &bytes, &wrong_type, None, 16)
        .unwrap_err()
        .to_string();
    assert!(e.contains("f.avro") && e.contains("field k (id 1)"), "{e}");
    let missing = key_columns(&[(3, "x", PrimitiveType::Long)], &[3]);
    let e = decode_keys("f.avro", &bytes, &missing, None, 16)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("f.avro") && e.contains("lacks field id 3"),
        "{e}"
    );
    let e = decode_keys("f.avro", b"not avro", &missing, None, 16)
        .unwrap_err()
        .to_string();
    assert!(e.contains("f.avro"), "{e}");
}

#[test]
fn unscaled_decimals_sign_extend() {
    assert_eq!(unscaled(&[]), Some(0));
    assert_eq!(unscaled(&[0x01, 0x00]), Some(256));
    assert_eq!(unscaled(&[0xff]), Some(-1));
    assert_eq!(unscaled(&[0xff, 0x00]), Some(-256));
    assert_eq!(unscaled(&[0; 17]), None);
}

/// The table: k long (1), s struct<id long (3), region string (4)> (2).
fn nested_keys(ids: &[i32]) -> KeyColumns {
    let s = iceberg::spec::StructType::new(vec![
        NestedField::optional(3, "id", Type::Primitive(PrimitiveType::Long)).into(),
        NestedField::optional(4, "region", Type::Primitive(PrimitiveType::String)).into(),
    ]);
    let schema = Schema::builder()
        .with_fields(vec![
            NestedField::optional(1, "k", Type::Primitive(PrimitiveType::Long)).into(),
            NestedField::optional(2, "s", Type::Struct(s)).into(),
        ])
        .build()
        .expect("schema");
    KeyColumns::new("t", &schema, ids).expect("keys")
}

/// A delete file in the projected schema Java writes for s.id (with field ids when
/// `ids`): a null s, an s with a null id, ids 5 and 5.
fn nested_container(ids: bool) -> Vec<u8> {
    let id = |n: i32| {
        if ids {
            format!(r#", "field-id": {n}"#)
        } else {
            String::new()
        }
    };
    let schema = format!(
        r#"{{"type": "record", "name": "r", "fields": [
            {{"name": "s", "default": null{}, "type": ["null", {{"type": "record",
              "name": "r2", "fields": [
                {{"name": "id", "type": ["null", "long"], "default": null{}}}]}}]}}]}}"#,
        id(2),
        id(3)
    );
    let inner = |v: Value| Value::Union(1, Box::new(Value::Record(vec![("id".into(), v)])));
    container(
        &schema,
        vec![
            vec![("s", Value::Union(0, Box::new(Value::Null)))],
            vec![("s", inner(Value::Union(0, Box::new(Value::Null))))],
            vec![("s", inner(Value::Union(1, Box::new(Value::Long(5)))))],
            vec![("s", inner(Value::Union(1, Box::new(Value::Long(5)))))],
        ],
    )
}

fn check_nested(keys: &KeyColumns, batches: &[RecordBatch]) {
    let column = batches[0].column(0);
    assert!(matches!(
        column.data_type(),
        arrow_schema::DataType::Struct(_)
    ));
    let leaf = crate::keys::leaf(column).expect("leaf");
    assert_eq!(
        leaf.as_primitive::<Int64Type>().iter().collect::<Vec<_>>(),
        vec![None, None, Some(5), Some(5)]
    );
    let rows = keys.encode(std::slice::from_ref(column)).expect("encode");
    // A null s and a null id under a present s are different keys, as in Java.
    assert_ne!(rows.row(0), rows.row(1));
    assert_eq!(rows.row(2), rows.row(3));
}

#[test]
fn nested_keys_keep_their_structs_nulls() {
    let keys = nested_keys(&[3]);
    let batches = decode_keys("n.avro", &nested_container(true), &keys, None, 8).expect("read");
    check_nested(&keys, &batches);

    // Without field ids, through the name mapping's nested fields.
    let bytes = nested_container(false);
    let mapping = NameMapping::new(vec![iceberg::spec::MappedField::new(
        Some(2),
        vec!["s".into()],
        vec![iceberg::spec::MappedField::new(
            Some(3),
            vec!["id".into()],
            vec![],
        )],
    )]);
    let batches = decode_keys("n.avro", &bytes, &keys, Some(&mapping), 8).expect("mapped");
    check_nested(&keys, &batches);

    // A struct without the key (here: asked for s.region) is refused naming the file.
    let region = nested_keys(&[4]);
    let err =
        decode_keys("n.avro", &nested_container(true), &region, None, 8).expect_err("no region");
    let message = err.to_string();
    assert!(
        message.contains("n.avro") && message.contains("region"),
        "{message}"
    );
}
