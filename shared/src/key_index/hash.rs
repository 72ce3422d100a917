//! The index key: one 64-bit hash per key value, the same for a deleted key and for the
//! data row that holds it (see [`super::format::KEY_HASH`]).
//!
//! Both sides hash the arrow-row encoding that the resolve itself compares (the key
//! columns cast to the table schema's types, null equal to null), so a row the scan
//! would match always hashes like its delete. Two keys that share a hash only make a
//! lookup name a file it need not read: never the other way round.

use arrow_array::ArrayRef;
use twox_hash::XxHash64;

use crate::Result;
use crate::keys::KeyColumns;

/// Appends the key hash of each row of `columns` (the key columns, in `key_columns`'s
/// order and Arrow types) to `out`.
pub fn hash_keys(key_columns: &KeyColumns, columns: &[ArrayRef], out: &mut Vec<i64>) -> Result<()> {
    let rows = key_columns.encode(columns)?;
    out.reserve(rows.num_rows());
    out.extend(rows.iter().map(|row| hash_encoded(row.as_ref())));
    Ok(())
}

/// The key hash of one arrow-row encoded key.
pub fn hash_encoded(encoded: &[u8]) -> i64 {
    XxHash64::oneshot(0, encoded) as i64
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{Int32Array, Int64Array, StringArray};
    use iceberg::spec::{NestedField, PrimitiveType, Schema, Type};

    use super::*;

    fn key_columns(types: &[PrimitiveType]) -> KeyColumns {
        let fields = types
            .iter()
            .enumerate()
            .map(|(i, t)| {
                Arc::new(NestedField::optional(
                    i as i32 + 1,
                    format!("k{i}"),
                    Type::Primitive(t.clone()),
                ))
            })
            .collect::<Vec<_>>();
        let schema = Schema::builder().with_fields(fields).build().unwrap();
        let ids: Vec<i32> = (1..=types.len() as i32).collect();
        KeyColumns::new("t", &schema, &ids).unwrap()
    }

    #[test]
    fn equal_keys_hash_alike_and_null_is_a_value_of_its_own() {
        let keys = key_columns(&[PrimitiveType::Long]);
        let a: ArrayRef = Arc::new(Int64Array::from(vec![Some(1), Some(2), None, Some(1)]));
        let mut hashes = Vec::new();
        hash_keys(&keys, &[a], &mut hashes).unwrap();
        assert_eq!(hashes.len(), 4);
        assert_eq!(hashes[0], hashes[3]);
        assert_ne!(hashes[0], hashes[1]);
        assert_ne!(hashes[2], hashes[0]);
        assert_ne!(hashes[2], hashes[1]);
        // Another null hashes as the first.
        let b: ArrayRef = Arc::new(Int64Array::from(vec![None::<i64>]));
        let mut again = Vec::new();
        hash_keys(&keys, &[b], &mut again).unwrap();
        assert_eq!(again[0], hashes[2]);
    }

    #[test]
    fn composite_keys_tell_their_columns_apart() {
        let keys = key_columns(&[PrimitiveType::Int, PrimitiveType::String]);
        let ints: ArrayRef = Arc::new(Int32Array::from(vec![1, 1, 2]));
        let strings: ArrayRef = Arc::new(StringArray::from(vec!["a", "b", "a"]));
        let mut hashes = Vec::new();
        hash_keys(&keys, &[ints, strings], &mut hashes).unwrap();
        assert_ne!(hashes[0], hashes[1]);
        assert_ne!(hashes[0], hashes[2]);
        assert_ne!(hashes[1], hashes[2]);
    }

    #[test]
    fn the_hash_is_stable_across_releases() {
        // Persisted in leaf files: a change here must change `KEY_HASH`'s name.
        let keys = key_columns(&[PrimitiveType::Long]);
        let a: ArrayRef = Arc::new(Int64Array::from(vec![42]));
        let mut hashes = Vec::new();
        hash_keys(&keys, &[a], &mut hashes).unwrap();
        let encoded = keys
            .encode(&[Arc::new(Int64Array::from(vec![42])) as ArrayRef])
            .unwrap();
        assert_eq!(encoded.row(0).as_ref(), &[1, 128, 0, 0, 0, 0, 0, 0, 42]);
        assert_eq!(
            hashes[0],
            XxHash64::oneshot(0, &[1, 128, 0, 0, 0, 0, 0, 0, 42]) as i64
        );
    }
}
