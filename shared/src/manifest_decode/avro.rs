//! The generic Avro side of the decoder: the object container (header, sync markers,
//! blocks), the binary encoding (zig-zag varints, strings, arrays, maps, unions) and
//! the writer's schema, which drives decoding and skipping of values.

use std::collections::HashMap;
use std::sync::Arc;

use super::codec::Codec;
use super::{DecodeError, Decoded, declined};

// ---------------------------------------------------------------------------------------
// The container: header and blocks (the codec is in `codec.rs`).

const MAGIC: &[u8; 4] = b"Obj\x01";
const SYNC_LEN: usize = 16;

pub(super) struct Container<'a> {
    pub(super) metadata: HashMap<String, Vec<u8>>,
    pub(super) codec: Codec,
    sync: &'a [u8],
    body: &'a [u8],
}

pub(super) struct Block<'a> {
    pub(super) count: usize,
    pub(super) data: &'a [u8],
}

impl<'a> Container<'a> {
    pub(super) fn parse(bytes: &'a [u8]) -> Decoded<Self> {
        if bytes.len() < MAGIC.len() || &bytes[..MAGIC.len()] != MAGIC {
            return declined("not an Avro object container file");
        }
        let mut cursor = Cursor::new(&bytes[MAGIC.len()..]);
        let mut metadata = HashMap::new();
        loop {
            // An entry is a key and a value of a byte each at least.
            let count = cursor.block_count(2)?;
            if count == 0 {
                break;
            }
            for _ in 0..count {
                let key = cursor.string()?.to_string();
                let value = cursor.bytes()?.to_vec();
                metadata.insert(key, value);
            }
        }
        let sync = cursor.take(SYNC_LEN)?;
        let codec = Codec::from_name(
            metadata
                .get("avro.codec")
                .map(|c| String::from_utf8_lossy(c).into_owned())
                .as_deref()
                .unwrap_or("null"),
        )?;
        Ok(Self {
            metadata,
            codec,
            sync,
            body: cursor.rest(),
        })
    }

    pub(super) fn writer_schema(&self) -> Decoded<AvroType> {
        let json = self
            .metadata
            .get("avro.schema")
            .ok_or_else(|| DecodeError("no avro.schema".into()))?;
        let json: serde_json::Value = serde_json::from_slice(json)
            .map_err(|e| DecodeError(format!("avro.schema is not JSON: {e}")))?;
        AvroType::parse(&json, &mut HashMap::new())
    }

    pub(super) fn blocks(&self) -> impl Iterator<Item = Decoded<Block<'a>>> + '_ {
        let mut cursor = Cursor::new(self.body);
        std::iter::from_fn(move || {
            if cursor.is_empty() {
                return None;
            }
            Some((|| {
                let count = usize::try_from(cursor.long()?)
                    .map_err(|_| DecodeError("negative block count".into()))?;
                let size = usize::try_from(cursor.long()?)
                    .map_err(|_| DecodeError("negative block size".into()))?;
                let data = cursor.take(size)?;
                if cursor.take(SYNC_LEN)? != self.sync {
                    return declined("block sync marker mismatch");
                }
                Ok(Block { count, data })
            })())
        })
    }
}

/// Walks every value of an Avro object container file with its writer's schema, refusing
/// a file whose counts, lengths or blocks do not fit in its bytes (see [`fits`]): run
/// before a reader that sizes its collections by the file's counts reads it.
pub(super) fn check_container(bytes: &[u8]) -> Decoded<()> {
    let container = Container::parse(bytes)?;
    let writer = container.writer_schema()?;
    for block in container.blocks() {
        let block = block?;
        let data = container.codec.decompress(block.data)?;
        fits(block.count, writer.min_size(), data.len())?;
        let mut cursor = Cursor::new(&data);
        for _ in 0..block.count {
            writer.skip(&mut cursor)?;
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Avro binary encoding.

pub(super) struct Cursor<'a> {
    data: &'a [u8],
}

impl<'a> Cursor<'a> {
    pub(super) fn new(data: &'a [u8]) -> Self {
        Self { data }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    fn rest(&self) -> &'a [u8] {
        self.data
    }

    pub(super) fn take(&mut self, n: usize) -> Decoded<&'a [u8]> {
        if n > self.data.len() {
            return declined("truncated Avro data");
        }
        let (head, tail) = self.data.split_at(n);
        self.data = tail;
        Ok(head)
    }

    /// A zig-zag varint (Avro's int and long).
    pub(super) fn long(&mut self) -> Decoded<i64> {
        let mut value: u64 = 0;
        let mut shift = 0;
        loop {
            let Some((&byte, tail)) = self.data.split_first() else {
                return declined("truncated varint");
            };
            self.data = tail;
            if shift >= 64 {
                return declined("varint longer than 64 bits");
            }
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                break;
            }
            shift += 7;
        }
        Ok(((value >> 1) as i64) ^ -((value & 1) as i64))
    }

    /// Steps over a varint without decoding it: up to and including its first byte
    /// without the continuation bit (what skipping a manifest entry's counts is made of).
    fn skip_varint(&mut self) -> Decoded<()> {
        let data = self.data;
        // An index loop, not iterator adapters: this runs for every value skipped.
        let mut i = 0;
        while i < data.len() && i < 10 {
            if data[i] & 0x80 == 0 {
                self.data = &data[i + 1..];
                return Ok(());
            }
            i += 1;
        }
        declined("truncated or overlong varint")
    }

    pub(super) fn int(&mut self) -> Decoded<i32> {
        i32::try_from(self.long()?).map_err(|_| DecodeError("int out of range".into()))
    }

    fn len(&mut self) -> Decoded<usize> {
        usize::try_from(self.long()?).map_err(|_| DecodeError("negative length".into()))
    }

    pub(super) fn bytes(&mut self) -> Decoded<&'a [u8]> {
        let n = self.len()?;
        self.take(n)
    }

    pub(super) fn string(&mut self) -> Decoded<&'a str> {
        std::str::from_utf8(self.bytes()?).map_err(|_| DecodeError("string is not UTF-8".into()))
    }

    /// The item count of an array or map block (a negative count is followed by the
    /// block's size in bytes, which a reader may use to skip it), refused when its
    /// items, of `item_min` bytes each at least, cannot fit in the bytes left.
    fn block_count(&mut self, item_min: usize) -> Decoded<usize> {
        let count = self.long()?;
        if count < 0 {
            self.long()?;
        }
        let count =
            usize::try_from(count.unsigned_abs()).map_err(|_| DecodeError("block count".into()))?;
        fits(count, item_min, self.data.len())?;
        Ok(count)
    }
}

/// Refuses `count` items of at least `item_min` bytes each in `left` bytes. This keeps
/// what a reader allocates for them bounded by the input's size: a count is read from
/// the file, and Avro readers (apache-avro, which iceberg-rust uses, among them) size
/// their collections by it. Items that may take no bytes at all count as one byte: no
/// Iceberg file has an array of nulls or of empty records.
pub(super) fn fits(count: usize, item_min: usize, left: usize) -> Decoded<()> {
    if count.saturating_mul(item_min.max(1)) > left {
        return declined(format!(
            "a block of {count} items does not fit in the {left} bytes left"
        ));
    }
    Ok(())
}

/// Whether `name` is an Avro name (`[A-Za-z_][A-Za-z0-9_]*`): apache-avro refuses a
/// schema with any other, and this decoder declines what apache-avro refuses.
fn is_avro_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A writer schema, as far as decoding needs it (logical types do not change the
/// encoding).
#[derive(Clone, Debug)]
pub(super) enum AvroType {
    Null,
    Boolean,
    Int,
    Long,
    Float,
    Double,
    Bytes,
    String,
    Fixed(usize),
    Enum,
    Array(Box<AvroType>),
    Map(Box<AvroType>),
    Union(Vec<AvroType>),
    Record(Arc<Vec<(String, AvroType)>>),
}

impl AvroType {
    fn parse(json: &serde_json::Value, named: &mut HashMap<String, AvroType>) -> Decoded<Self> {
        use serde_json::Value;
        match json {
            Value::String(name) => Self::primitive(name)
                .or_else(|| named.get(name).cloned())
                .ok_or_else(|| DecodeError(format!("unknown Avro type {name}"))),
            Value::Array(variants) => Ok(Self::Union(
                variants
                    .iter()
                    .map(|v| Self::parse(v, named))
                    .collect::<Decoded<_>>()?,
            )),
            Value::Object(object) => {
                let Some(kind) = object.get("type") else {
                    return declined("Avro schema object without a type");
                };
                let parsed = match kind.as_str() {
                    Some("record") | Some("error") => {
                        let fields = object
                            .get("fields")
                            .and_then(Value::as_array)
                            .ok_or_else(|| DecodeError("record without fields".into()))?;
                        let mut parsed = Vec::with_capacity(fields.len());
                        for field in fields {
                            let name = field
                                .get("name")
                                .and_then(Value::as_str)
                                .ok_or_else(|| DecodeError("field without a name".into()))?;
                            if !is_avro_name(name) {
                                return declined(format!(
                                    "field name {name:?} is not an Avro name"
                                ));
                            }
                            if parsed.iter().any(|(seen, _)| seen == name) {
                                return declined(format!("field name {name:?} appears twice"));
                            }
                            let ty = field
                                .get("type")
                                .ok_or_else(|| DecodeError(format!("field {name} without type")))?;
                            parsed.push((name.to_string(), Self::parse(ty, named)?));
                        }
                        Self::Record(Arc::new(parsed))
                    }
                    Some("enum") => Self::Enum,
                    Some("array") => Self::Array(Box::new(Self::parse(
                        object
                            .get("items")
                            .ok_or_else(|| DecodeError("array without items".into()))?,
                        named,
                    )?)),
                    Some("map") => Self::Map(Box::new(Self::parse(
                        object
                            .get("values")
                            .ok_or_else(|| DecodeError("map without values".into()))?,
                        named,
                    )?)),
                    Some("fixed") => Self::Fixed(
                        object
                            .get("size")
                            .and_then(Value::as_u64)
                            .and_then(|s| usize::try_from(s).ok())
                            .ok_or_else(|| DecodeError("fixed without size".into()))?,
                    ),
                    // A primitive with attributes (e.g. a logical type), or a nested form.
                    _ => Self::parse(kind, named)?,
                };
                let named_kind =
                    matches!(kind.as_str(), Some("record" | "error" | "enum" | "fixed"));
                if named_kind && object.get("name").and_then(Value::as_str).is_none() {
                    return declined("a named Avro type without a name");
                }
                if let Some(name) = object.get("name").and_then(Value::as_str) {
                    // A full name (`ns.name`) or a simple one, as apache-avro accepts.
                    if !name.split('.').all(is_avro_name) {
                        return declined(format!("type name {name:?} is not an Avro name"));
                    }
                    named.insert(name.to_string(), parsed.clone());
                    if let Some(ns) = object.get("namespace").and_then(Value::as_str) {
                        named.insert(format!("{ns}.{name}"), parsed.clone());
                    }
                }
                Ok(parsed)
            }
            _ => declined("unexpected Avro schema JSON"),
        }
    }

    fn primitive(name: &str) -> Option<Self> {
        Some(match name {
            "null" => Self::Null,
            "boolean" => Self::Boolean,
            "int" => Self::Int,
            "long" => Self::Long,
            "float" => Self::Float,
            "double" => Self::Double,
            "bytes" => Self::Bytes,
            "string" => Self::String,
            _ => return None,
        })
    }

    /// The fewest bytes a value of this type takes.
    pub(super) fn min_size(&self) -> usize {
        match self {
            Self::Null => 0,
            Self::Float => 4,
            Self::Double => 8,
            Self::Fixed(n) => *n,
            // A boolean, a varint, a length, an array's or map's final count, a union's
            // branch: a byte each.
            Self::Boolean
            | Self::Int
            | Self::Long
            | Self::Enum
            | Self::Bytes
            | Self::String
            | Self::Array(_)
            | Self::Map(_)
            | Self::Union(_) => 1,
            Self::Record(fields) => fields
                .iter()
                .fold(0, |sum: usize, (_, ty)| sum.saturating_add(ty.min_size())),
        }
    }

    pub(super) fn skip(&self, cursor: &mut Cursor<'_>) -> Decoded<()> {
        match self {
            Self::Null => {}
            Self::Boolean => {
                cursor.take(1)?;
            }
            Self::Int | Self::Long | Self::Enum => cursor.skip_varint()?,
            Self::Float => {
                cursor.take(4)?;
            }
            Self::Double => {
                cursor.take(8)?;
            }
            Self::Bytes => {
                cursor.bytes()?;
            }
            // apache-avro decodes every string, skipped or not, and refuses one that is
            // not UTF-8 (found by fuzzing): so does this decoder.
            Self::String => {
                cursor.string()?;
            }
            Self::Fixed(n) => {
                cursor.take(*n)?;
            }
            Self::Array(items) => loop {
                let n = cursor.block_count(items.min_size())?;
                if n == 0 {
                    break;
                }
                for _ in 0..n {
                    items.skip(cursor)?;
                }
            },
            Self::Map(values) => loop {
                let n = cursor.block_count(1 + values.min_size())?;
                if n == 0 {
                    break;
                }
                for _ in 0..n {
                    cursor.string()?;
                    values.skip(cursor)?;
                }
            },
            Self::Union(variants) => variant(variants, cursor)?.skip(cursor)?,
            Self::Record(fields) => {
                for (_, ty) in fields.iter() {
                    ty.skip(cursor)?;
                }
            }
        }
        Ok(())
    }
}

fn variant<'t>(variants: &'t [AvroType], cursor: &mut Cursor<'_>) -> Decoded<&'t AvroType> {
    let index = cursor.long()?;
    usize::try_from(index)
        .ok()
        .and_then(|i| variants.get(i))
        .ok_or_else(|| DecodeError(format!("union branch {index} out of range")))
}

/// Reads a value that may be wrapped in a `["null", T]` union: `None` for null.
pub(super) fn optional<'t, T>(
    ty: &'t AvroType,
    cursor: &mut Cursor<'_>,
    read: impl FnOnce(&'t AvroType, &mut Cursor<'_>) -> Decoded<T>,
) -> Decoded<Option<T>> {
    let ty = match ty {
        AvroType::Union(variants) => variant(variants, cursor)?,
        other => other,
    };
    match ty {
        AvroType::Null => Ok(None),
        AvroType::Union(_) => declined("nested union"),
        other => read(other, cursor).map(Some),
    }
}

pub(super) fn required<'t, T>(
    what: &str,
    ty: &'t AvroType,
    cursor: &mut Cursor<'_>,
    read: impl FnOnce(&'t AvroType, &mut Cursor<'_>) -> Decoded<T>,
) -> Decoded<T> {
    optional(ty, cursor, read)?.ok_or_else(|| DecodeError(format!("{what} is null")))
}

pub(super) fn read_long(ty: &AvroType, cursor: &mut Cursor<'_>) -> Decoded<i64> {
    match ty {
        AvroType::Int | AvroType::Long => cursor.long(),
        other => declined(format!("expected a long, found {other:?}")),
    }
}

pub(super) fn read_int(ty: &AvroType, cursor: &mut Cursor<'_>) -> Decoded<i32> {
    match ty {
        AvroType::Int => cursor.int(),
        other => declined(format!("expected an int, found {other:?}")),
    }
}

pub(super) fn read_string(ty: &AvroType, cursor: &mut Cursor<'_>) -> Decoded<String> {
    match ty {
        AvroType::String => cursor.string().map(str::to_string),
        other => declined(format!("expected a string, found {other:?}")),
    }
}

pub(super) fn read_bytes(ty: &AvroType, cursor: &mut Cursor<'_>) -> Decoded<Vec<u8>> {
    match ty {
        AvroType::Bytes => cursor.bytes().map(<[u8]>::to_vec),
        AvroType::Fixed(n) => cursor.take(*n).map(<[u8]>::to_vec),
        other => declined(format!("expected bytes, found {other:?}")),
    }
}

/// Reads every item of an array.
fn read_array<'t>(
    ty: &'t AvroType,
    cursor: &mut Cursor<'_>,
    mut item: impl FnMut(&'t AvroType, &mut Cursor<'_>) -> Decoded<()>,
) -> Decoded<()> {
    let AvroType::Array(items) = ty else {
        return declined(format!("expected an array, found {ty:?}"));
    };
    loop {
        let n = cursor.block_count(items.min_size())?;
        if n == 0 {
            return Ok(());
        }
        for _ in 0..n {
            item(items, cursor)?;
        }
    }
}

/// Reads every item of an array into a `Vec`.
pub(super) fn read_list<T>(
    ty: &AvroType,
    cursor: &mut Cursor<'_>,
    mut item: impl FnMut(&AvroType, &mut Cursor<'_>) -> Decoded<T>,
) -> Decoded<Vec<T>> {
    let mut out = Vec::new();
    read_array(ty, cursor, |ty, c| {
        out.push(item(ty, c)?);
        Ok(())
    })?;
    Ok(out)
}

/// Reads Iceberg's int-keyed map, stored as an array of `{key, value}` records.
pub(super) fn read_int_map<V>(
    ty: &AvroType,
    cursor: &mut Cursor<'_>,
    mut value: impl FnMut(&AvroType, &mut Cursor<'_>) -> Decoded<V>,
) -> Decoded<Vec<(i32, V)>> {
    read_list(ty, cursor, |item, cursor| {
        let AvroType::Record(fields) = item else {
            return declined("int map item is not a record");
        };
        let [(k_name, k_ty), (v_name, v_ty)] = fields.as_slice() else {
            return declined("int map item does not have two fields");
        };
        if k_name != "key" || v_name != "value" {
            return declined("int map item fields are not key, value");
        }
        let key = read_int(k_ty, cursor)?;
        Ok((key, required("map value", v_ty, cursor, &mut value)?))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_fixtures::zigzag_varint as zigzag;

    #[test]
    fn skipping_a_varint_steps_exactly_over_it() {
        for v in [0, -1, 1, 63, 64, -65, 1 << 40, i64::MAX, i64::MIN] {
            let mut bytes = zigzag(v);
            bytes.push(0x2a);
            let mut decoded = Cursor::new(&bytes);
            assert_eq!(decoded.long().unwrap(), v);
            let mut skipped = Cursor::new(&bytes);
            skipped.skip_varint().unwrap();
            assert_eq!(skipped.rest(), decoded.rest(), "{v}");
            assert_eq!(skipped.rest(), &[0x2a]);
        }
        assert!(Cursor::new(&[0x80, 0x80]).skip_varint().is_err());
        assert!(Cursor::new(&[0xff; 11]).skip_varint().is_err());
    }

    /// An object container of `schema` whose one block holds `count` records in `data`.
    fn container(schema: &str, count: i64, data: &[u8]) -> Vec<u8> {
        let mut file = MAGIC.to_vec();
        file.extend(zigzag(1));
        for s in ["avro.schema", schema] {
            file.extend(zigzag(s.len() as i64));
            file.extend(s.as_bytes());
        }
        file.extend(zigzag(0));
        file.extend([7; SYNC_LEN]);
        file.extend(zigzag(count));
        file.extend(zigzag(data.len() as i64));
        file.extend(data);
        file.extend([7; SYNC_LEN]);
        file
    }

    /// Counts read from a file are checked against the bytes left before anything is
    /// sized by them (found by fuzzing: a manifest list's header claiming millions of
    /// entries made apache-avro allocate hundreds of megabytes).
    #[test]
    fn counts_that_cannot_fit_in_the_file_are_refused() {
        let schema = r#"{"type":"record","name":"r","fields":[{"name":"xs","type":{"type":"array","items":"long"}}]}"#;
        let mut good = zigzag(2);
        good.extend([zigzag(5), zigzag(6), zigzag(0)].concat());
        assert!(check_container(&container(schema, 1, &good)).is_ok());

        let mut huge_array = zigzag(1 << 40);
        huge_array.extend(zigzag(0));
        let err = check_container(&container(schema, 1, &huge_array)).unwrap_err();
        assert!(err.to_string().contains("does not fit"), "{err}");

        let err = check_container(&container(schema, 1 << 30, &good)).unwrap_err();
        assert!(err.to_string().contains("does not fit"), "{err}");

        let mut header = MAGIC.to_vec();
        header.extend(zigzag(1 << 50));
        header.extend([0; 64]);
        let err = check_container(&header).unwrap_err();
        assert!(err.to_string().contains("does not fit"), "{err}");
    }

    /// A skipped string must be UTF-8 too, as apache-avro decodes it (found by fuzzing);
    /// skipped bytes need not be.
    #[test]
    fn skipped_strings_must_be_utf8() {
        let mut bad = zigzag(2);
        bad.extend([0xff, 0xfe]);
        assert!(AvroType::String.skip(&mut Cursor::new(&bad)).is_err());
        assert!(AvroType::Bytes.skip(&mut Cursor::new(&bad)).is_ok());
        let mut map = zigzag(1);
        map.extend(&bad);
        map.extend(zigzag(7));
        map.extend(zigzag(0));
        let ty = AvroType::Map(Box::new(AvroType::Long));
        assert!(
            ty.skip(&mut Cursor::new(&map)).is_err(),
            "a map key is a string"
        );
    }

    /// apache-avro refuses schemas with names that are not Avro names, named types
    /// without a name, or a record with a field name twice; this decoder declines them
    /// too (found by fuzzing).
    #[test]
    fn schemas_apache_avro_refuses_are_declined() {
        for bad in [
            r#"{"type":"record","name":"r","fields":[{"name":"a?b","type":"long"}]}"#,
            r#"{"type":"record","name":"r","fields":[{"name":"1a","type":"long"}]}"#,
            r#"{"type":"record","fields":[{"name":"a","type":"long"}]}"#,
            r#"{"type":"fixed","size":4}"#,
            r#"{"type":"record","name":"a-b","fields":[]}"#,
            r#"{"type":"record","name":"r","fields":[{"name":"a","type":"long"},{"name":"a","type":"int"}]}"#,
        ] {
            let json = serde_json::from_str(bad).unwrap();
            assert!(
                AvroType::parse(&json, &mut HashMap::new()).is_err(),
                "{bad}"
            );
        }
        let good = r#"{"type":"record","name":"ns.r_1","fields":[{"name":"_a9","type":"long"}]}"#;
        let json = serde_json::from_str(good).unwrap();
        assert!(AvroType::parse(&json, &mut HashMap::new()).is_ok());
    }
}
