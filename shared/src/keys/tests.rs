use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{Array, ArrayRef, Int64Array, StringArray, StructArray};
use arrow_schema::{DataType, Fields};
use iceberg::spec::{ListType, MapType, NestedField, PrimitiveType, Schema, StructType, Type};

use super::*;

fn long(id: i32, name: &str) -> NestedFieldRef {
    NestedField::optional(id, name, Type::Primitive(PrimitiveType::Long)).into()
}

/// k long, s struct<id long, region string, t struct<x long, f double>>,
/// l list<struct<e long>>, m map<string, long>.
fn schema() -> Schema {
    let t = StructType::new(vec![
        long(7, "x"),
        NestedField::optional(8, "f", Type::Primitive(PrimitiveType::Double)).into(),
    ]);
    let s = StructType::new(vec![
        long(3, "id"),
        NestedField::optional(4, "region", Type::Primitive(PrimitiveType::String)).into(),
        NestedField::optional(6, "t", Type::Struct(t)).into(),
    ]);
    let element = NestedField::list_element(
        11,
        Type::Struct(StructType::new(vec![long(12, "e")])),
        false,
    );
    let map = MapType::new(
        NestedField::map_key_element(21, Type::Primitive(PrimitiveType::String)).into(),
        NestedField::map_value_element(22, Type::Primitive(PrimitiveType::Long), false).into(),
    );
    Schema::builder()
        .with_fields(vec![
            long(1, "k"),
            NestedField::optional(2, "s", Type::Struct(s)).into(),
            NestedField::optional(10, "l", Type::List(ListType::new(element.into()))).into(),
            NestedField::optional(20, "m", Type::Map(map)).into(),
        ])
        .build()
        .expect("schema")
}

#[test]
fn nested_fields_are_keys_read_through_their_ancestors() {
    let keys = KeyColumns::new("t", &schema(), &[1, 7, 4]).expect("keys");
    assert_eq!(keys.field_ids, vec![1, 7, 4]);
    assert!(keys.is_nested());
    assert_eq!(
        keys.leaves
            .iter()
            .map(|f| f.name.as_str())
            .collect::<Vec<_>>(),
        ["k", "x", "region"]
    );
    // Read through the top-level struct, pruned to the path.
    assert_eq!(keys.fields[1].id, 2);
    let Type::Struct(s) = keys.fields[1].field_type.as_ref() else {
        panic!("s is a struct");
    };
    assert_eq!(s.fields().len(), 1);
    assert_eq!(s.fields()[0].id, 6);
    assert_eq!(*keys.data_type(0), DataType::Int64);
    assert_eq!(*keys.data_type(1), DataType::Int64);
    assert_eq!(*keys.data_type(2), DataType::Utf8);
    assert!(matches!(
        keys.arrow_schema.field(1).data_type(),
        DataType::Struct(_)
    ));
    assert!(
        !KeyColumns::new("t", &schema(), &[1])
            .expect("k")
            .is_nested()
    );
}

#[test]
fn keys_inside_lists_maps_and_floats_are_refused() {
    for (id, path) in [(12, "l.element.e"), (21, "m.key"), (22, "m.value")] {
        let err = KeyColumns::new("t", &schema(), &[id]).expect_err("in a collection");
        let message = err.to_string();
        assert!(matches!(err, Error::UnsupportedTable { .. }), "{message}");
        assert!(message.contains(path), "{message}");
        assert!(message.contains("list or a map"), "{message}");
    }
    let float = KeyColumns::new("t", &schema(), &[8]).expect_err("double");
    assert!(
        matches!(&float, Error::UnsupportedKeyType { field, field_id: 8, .. } if field == "s.t.f"),
        "{float}"
    );
    // A struct is not a key itself.
    let whole = KeyColumns::new("t", &schema(), &[6]).expect_err("struct");
    assert!(matches!(
        whole,
        Error::UnsupportedKeyType { field_id: 6, .. }
    ));
    let missing = KeyColumns::new("t", &schema(), &[99]).expect_err("missing");
    assert!(missing.to_string().contains("not in the table schema"));
}

/// A `s struct<id long>` column: rows 0 and 1 null structs, 2 a null id, 3 and 4 ids.
fn shaped(keys: &KeyColumns) -> ArrayRef {
    let DataType::Struct(fields) = keys.arrow_schema.field(0).data_type().clone() else {
        panic!("struct");
    };
    let ids: ArrayRef = Arc::new(Int64Array::from(vec![
        Some(9),
        None,
        None,
        Some(5),
        Some(9),
    ]));
    let valid = arrow_array::BooleanArray::from(vec![false, false, true, true, true]);
    Arc::new(StructArray::new(
        Fields::from(fields.to_vec()),
        vec![ids],
        Some(valid.values().clone().into()),
    ))
}

#[test]
fn a_null_struct_and_a_null_key_differ_as_in_java() {
    let keys = KeyColumns::new("t", &schema(), &[3]).expect("keys");
    let column = shaped(&keys);
    let rows = keys.encode(std::slice::from_ref(&column)).expect("encode");
    // Null structs equal each other whatever lies under them.
    assert_eq!(rows.row(0), rows.row(1));
    // A present struct with a null key is another key.
    assert_ne!(rows.row(1), rows.row(2));
    assert_ne!(rows.row(0), rows.row(4));
    // The leaf folds the struct's nulls in.
    let leaf = leaf(&column).expect("leaf");
    let leaf = leaf.as_primitive::<Int64Type>();
    assert_eq!(
        leaf.iter().collect::<Vec<_>>(),
        vec![None, None, None, Some(5), Some(9)]
    );
    // Per-column encodings are of the leaf (what bounds compare with).
    let per_column = keys.encode_column(0, &column).expect("column");
    assert_eq!(per_column.row(0), per_column.row(2));
    let bound = keys
        .encode_bound(0, &iceberg::spec::Datum::long(5))
        .expect("bound");
    assert_eq!(per_column.row(3), bound.row());
    let top = leaf_type(&DataType::Utf8);
    assert_eq!(top, DataType::Utf8);
    let plain: ArrayRef = Arc::new(StringArray::from(vec![Some("a"), None]));
    assert_eq!(super::leaf(&plain).expect("same").null_count(), 1);
}
