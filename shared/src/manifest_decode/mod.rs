//! A fast decoder for Iceberg manifests (Avro object container files).
//!
//! iceberg-rust decodes a manifest through apache-avro's generic `Value` tree and serde:
//! about 15 µs per entry, so a 2,000-file table spends 25-40 ms of every conversion in
//! its data manifest alone (see BENCHMARKS.md). This decoder reads the container's
//! blocks straight into iceberg's `ManifestEntry`/`DataFile` with one pass over the
//! bytes, guided by the writer's schema, and skips the fields it does not know.
//!
//! It is an optimisation with a safety net, not a second source of truth: whatever it
//! does not handle exactly as iceberg-rust does (format v1, encrypted manifests, codecs
//! other than null/deflate/snappy/zstandard, unusual schemas or partition types) returns
//! [`DecodeError`], and [`load_manifest`] then parses the same bytes with iceberg-rust.
//! Tests compare both decoders entry by entry on manifests of every kind eqdv meets,
//! including Java's.

use std::collections::HashMap;
use std::io::Read;
use std::sync::Arc;

use iceberg::io::FileIO;
use iceberg::spec::{
    DataContentType, DataFile, DataFileBuilder, DataFileFormat, Datum, FormatVersion, Literal,
    Manifest, ManifestEntry, ManifestFile, ManifestMetadata, ManifestStatus, PrimitiveType, Schema,
    Struct, StructType, Type,
};

use crate::{Error, Result};

/// Why the fast path declined a manifest (it is then parsed by iceberg-rust).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct DecodeError(String);

type Decoded<T> = std::result::Result<T, DecodeError>;

fn declined<T>(why: impl Into<String>) -> Decoded<T> {
    Err(DecodeError(why.into()))
}

/// Reads `manifest`'s metadata and entries, with the entries' inherited values filled
/// in from the manifest list as `ManifestFile::load_manifest` does, through the fast
/// decoder when it can. Entries are owned (not shared), so callers can move them.
pub async fn load_manifest(
    file_io: &FileIO,
    manifest: &ManifestFile,
) -> Result<(ManifestMetadata, Vec<ManifestEntry>)> {
    let path = &manifest.manifest_path;
    if manifest.key_metadata.is_some() {
        // Encrypted: iceberg-rust decrypts.
        return manifest
            .load_manifest(file_io)
            .await
            .map(owned_parts)
            .map_err(|e| Error::file(path, "cannot read manifest", e));
    }
    let bytes = crate::storage::read_all(file_io, path).await?;
    let (metadata, mut entries) = match decode_manifest(&bytes) {
        Ok(decoded) => decoded,
        Err(why) => {
            tracing::debug!(manifest = %path, reason = %why, "manifest decoded by iceberg-rust");
            Manifest::parse_avro(&bytes)
                .map(owned_parts)
                .map_err(|e| Error::file(path, "cannot parse manifest", e))?
        }
    };
    for entry in &mut entries {
        inherit(entry, manifest);
    }
    Ok((metadata, entries))
}

fn owned_parts(manifest: Manifest) -> (ManifestMetadata, Vec<ManifestEntry>) {
    let (entries, metadata) = manifest.into_parts();
    let entries = entries
        .into_iter()
        .map(|e| Arc::try_unwrap(e).unwrap_or_else(|shared| (*shared).clone()))
        .collect();
    (metadata, entries)
}

/// The values an entry inherits from its manifest list entry when they are null (the
/// rules of iceberg-rust's `ManifestEntry::inherit_data`, which is crate-private).
fn inherit(entry: &mut ManifestEntry, manifest: &ManifestFile) {
    const INITIAL_SEQUENCE_NUMBER: i64 = 0;
    let inherits_sequence = entry.status == ManifestStatus::Added
        || manifest.sequence_number == INITIAL_SEQUENCE_NUMBER;
    if entry.snapshot_id.is_none() {
        entry.snapshot_id = Some(manifest.added_snapshot_id);
    }
    if entry.sequence_number.is_none() && inherits_sequence {
        entry.sequence_number = Some(manifest.sequence_number);
    }
    if entry.file_sequence_number.is_none() && inherits_sequence {
        entry.file_sequence_number = Some(manifest.sequence_number);
    }
}

/// Decodes a manifest's metadata and entries (inherited values left null, as in the
/// file). Declines anything it does not decode exactly as iceberg-rust would.
pub fn decode_manifest(bytes: &[u8]) -> Decoded<(ManifestMetadata, Vec<ManifestEntry>)> {
    let container = Container::parse(bytes)?;
    let metadata = ManifestMetadata::parse(&container.metadata)
        .map_err(|e| DecodeError(format!("manifest metadata: {e}")))?;
    if metadata.format_version == FormatVersion::V1 {
        return declined("format v1 manifest");
    }
    let partition_type = metadata
        .partition_spec
        .partition_type(&metadata.schema)
        .map_err(|e| DecodeError(format!("partition type: {e}")))?;
    let writer = container.writer_schema()?;
    let plan = EntryPlan::new(&writer, &partition_type)?;
    let context = Context {
        schema: &metadata.schema,
        partition_type: &partition_type,
        spec_id: metadata.partition_spec.spec_id(),
    };
    let mut entries = Vec::new();
    for block in container.blocks() {
        let block = block?;
        let data = container.codec.decompress(block.data)?;
        let mut cursor = Cursor::new(&data);
        entries.reserve(block.count);
        for _ in 0..block.count {
            entries.push(plan.decode(&mut cursor, &context)?);
        }
        if !cursor.is_empty() {
            return declined("bytes left over after a block's entries");
        }
    }
    Ok((metadata, entries))
}

// ---------------------------------------------------------------------------------------
// The container: header, codec, blocks.

const MAGIC: &[u8; 4] = b"Obj\x01";
const SYNC_LEN: usize = 16;

struct Container<'a> {
    metadata: HashMap<String, Vec<u8>>,
    codec: Codec,
    sync: &'a [u8],
    body: &'a [u8],
}

struct Block<'a> {
    count: usize,
    data: &'a [u8],
}

impl<'a> Container<'a> {
    fn parse(bytes: &'a [u8]) -> Decoded<Self> {
        if bytes.len() < MAGIC.len() || &bytes[..MAGIC.len()] != MAGIC {
            return declined("not an Avro object container file");
        }
        let mut cursor = Cursor::new(&bytes[MAGIC.len()..]);
        let mut metadata = HashMap::new();
        loop {
            let count = cursor.block_count()?;
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

    fn writer_schema(&self) -> Decoded<AvroType> {
        let json = self
            .metadata
            .get("avro.schema")
            .ok_or_else(|| DecodeError("no avro.schema".into()))?;
        let json: serde_json::Value = serde_json::from_slice(json)
            .map_err(|e| DecodeError(format!("avro.schema is not JSON: {e}")))?;
        AvroType::parse(&json, &mut HashMap::new())
    }

    fn blocks(&self) -> impl Iterator<Item = Decoded<Block<'a>>> + '_ {
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

enum Codec {
    Null,
    Deflate,
    Snappy,
    Zstandard,
}

impl Codec {
    fn from_name(name: &str) -> Decoded<Self> {
        match name {
            "null" => Ok(Self::Null),
            "deflate" => Ok(Self::Deflate),
            "snappy" => Ok(Self::Snappy),
            "zstandard" => Ok(Self::Zstandard),
            other => declined(format!("codec {other}")),
        }
    }

    fn decompress<'a>(&self, data: &'a [u8]) -> Decoded<std::borrow::Cow<'a, [u8]>> {
        use std::borrow::Cow;
        let fail = |e: std::io::Error| DecodeError(format!("block decompression: {e}"));
        match self {
            Self::Null => Ok(Cow::Borrowed(data)),
            Self::Deflate => {
                let mut out = Vec::with_capacity(data.len() * 4);
                flate2::read::DeflateDecoder::new(data)
                    .read_to_end(&mut out)
                    .map_err(fail)?;
                Ok(Cow::Owned(out))
            }
            Self::Snappy => {
                // Avro's snappy blocks end with the CRC-32 of the uncompressed bytes.
                let Some(split) = data.len().checked_sub(4) else {
                    return declined("snappy block shorter than its checksum");
                };
                let (compressed, crc) = data.split_at(split);
                let out = snap::raw::Decoder::new()
                    .decompress_vec(compressed)
                    .map_err(|e| DecodeError(format!("snappy: {e}")))?;
                if crc32fast::hash(&out).to_be_bytes() != crc {
                    return declined("snappy block checksum mismatch");
                }
                Ok(Cow::Owned(out))
            }
            Self::Zstandard => {
                let mut out = Vec::with_capacity(data.len() * 4);
                zstd::stream::read::Decoder::new(data)
                    .and_then(|mut d| d.read_to_end(&mut out))
                    .map_err(fail)?;
                Ok(Cow::Owned(out))
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Avro binary encoding.

struct Cursor<'a> {
    data: &'a [u8],
}

impl<'a> Cursor<'a> {
    fn new(data: &'a [u8]) -> Self {
        Self { data }
    }

    fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    fn rest(&self) -> &'a [u8] {
        self.data
    }

    fn take(&mut self, n: usize) -> Decoded<&'a [u8]> {
        if n > self.data.len() {
            return declined("truncated Avro data");
        }
        let (head, tail) = self.data.split_at(n);
        self.data = tail;
        Ok(head)
    }

    /// A zig-zag varint (Avro's int and long).
    fn long(&mut self) -> Decoded<i64> {
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

    fn int(&mut self) -> Decoded<i32> {
        i32::try_from(self.long()?).map_err(|_| DecodeError("int out of range".into()))
    }

    fn len(&mut self) -> Decoded<usize> {
        usize::try_from(self.long()?).map_err(|_| DecodeError("negative length".into()))
    }

    fn bytes(&mut self) -> Decoded<&'a [u8]> {
        let n = self.len()?;
        self.take(n)
    }

    fn string(&mut self) -> Decoded<&'a str> {
        std::str::from_utf8(self.bytes()?).map_err(|_| DecodeError("string is not UTF-8".into()))
    }

    /// The item count of an array or map block (a negative count is followed by the
    /// block's size in bytes, which a reader may use to skip it).
    fn block_count(&mut self) -> Decoded<usize> {
        let count = self.long()?;
        if count < 0 {
            self.long()?;
        }
        usize::try_from(count.unsigned_abs()).map_err(|_| DecodeError("block count".into()))
    }
}

/// A writer schema, as far as decoding needs it (logical types do not change the
/// encoding).
#[derive(Clone, Debug)]
enum AvroType {
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
                if let Some(name) = object.get("name").and_then(Value::as_str) {
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

    fn skip(&self, cursor: &mut Cursor<'_>) -> Decoded<()> {
        match self {
            Self::Null => {}
            Self::Boolean => {
                cursor.take(1)?;
            }
            Self::Int | Self::Long | Self::Enum => {
                cursor.long()?;
            }
            Self::Float => {
                cursor.take(4)?;
            }
            Self::Double => {
                cursor.take(8)?;
            }
            Self::Bytes | Self::String => {
                cursor.bytes()?;
            }
            Self::Fixed(n) => {
                cursor.take(*n)?;
            }
            Self::Array(items) => loop {
                let n = cursor.block_count()?;
                if n == 0 {
                    break;
                }
                for _ in 0..n {
                    items.skip(cursor)?;
                }
            },
            Self::Map(values) => loop {
                let n = cursor.block_count()?;
                if n == 0 {
                    break;
                }
                for _ in 0..n {
                    cursor.bytes()?;
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
fn optional<'t, T>(
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

fn required<'t, T>(
    what: &str,
    ty: &'t AvroType,
    cursor: &mut Cursor<'_>,
    read: impl FnOnce(&'t AvroType, &mut Cursor<'_>) -> Decoded<T>,
) -> Decoded<T> {
    optional(ty, cursor, read)?.ok_or_else(|| DecodeError(format!("{what} is null")))
}

fn read_long(ty: &AvroType, cursor: &mut Cursor<'_>) -> Decoded<i64> {
    match ty {
        AvroType::Int | AvroType::Long => cursor.long(),
        other => declined(format!("expected a long, found {other:?}")),
    }
}

fn read_int(ty: &AvroType, cursor: &mut Cursor<'_>) -> Decoded<i32> {
    match ty {
        AvroType::Int => cursor.int(),
        other => declined(format!("expected an int, found {other:?}")),
    }
}

fn read_string(ty: &AvroType, cursor: &mut Cursor<'_>) -> Decoded<String> {
    match ty {
        AvroType::String => cursor.string().map(str::to_string),
        other => declined(format!("expected a string, found {other:?}")),
    }
}

fn read_bytes(ty: &AvroType, cursor: &mut Cursor<'_>) -> Decoded<Vec<u8>> {
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
        let n = cursor.block_count()?;
        if n == 0 {
            return Ok(());
        }
        for _ in 0..n {
            item(items, cursor)?;
        }
    }
}

/// Reads every item of an array into a `Vec`.
fn read_list<T>(
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
fn read_int_map<V>(
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

// ---------------------------------------------------------------------------------------
// Manifest entries.

struct Context<'a> {
    schema: &'a Schema,
    partition_type: &'a StructType,
    spec_id: i32,
}

#[derive(Clone, Copy)]
enum EntryField {
    Status,
    SnapshotId,
    SequenceNumber,
    FileSequenceNumber,
    DataFile,
    Skip,
}

#[derive(Clone, Copy)]
enum FileField {
    Content,
    FilePath,
    FileFormat,
    Partition,
    RecordCount,
    FileSizeInBytes,
    ColumnSizes,
    ValueCounts,
    NullValueCounts,
    NanValueCounts,
    LowerBounds,
    UpperBounds,
    KeyMetadata,
    SplitOffsets,
    EqualityIds,
    SortOrderId,
    FirstRowId,
    ReferencedDataFile,
    ContentOffset,
    ContentSizeInBytes,
    Skip,
}

/// The writer's field order mapped to what each field means, worked out once per file.
struct EntryPlan {
    entry: Vec<(EntryField, AvroType)>,
    file: Vec<(FileField, AvroType)>,
    /// For each writer partition field: its position in the partition type, if any.
    partition: Vec<(Option<usize>, AvroType)>,
    partition_is_optional: bool,
}

impl EntryPlan {
    fn new(writer: &AvroType, partition_type: &StructType) -> Decoded<Self> {
        let AvroType::Record(entry_fields) = writer else {
            return declined("manifest entry schema is not a record");
        };
        let mut entry = Vec::new();
        let mut data_file = None;
        for (name, ty) in entry_fields.iter() {
            let field = match name.as_str() {
                "status" => EntryField::Status,
                "snapshot_id" => EntryField::SnapshotId,
                "sequence_number" => EntryField::SequenceNumber,
                "file_sequence_number" => EntryField::FileSequenceNumber,
                "data_file" => {
                    data_file = Some(ty);
                    EntryField::DataFile
                }
                _ => EntryField::Skip,
            };
            entry.push((field, ty.clone()));
        }
        let Some(AvroType::Record(file_fields)) = data_file else {
            return declined("manifest entry has no data_file record");
        };
        let mut file = Vec::new();
        let mut partition = None;
        let mut partition_is_optional = false;
        for (name, ty) in file_fields.iter() {
            let field = match name.as_str() {
                "content" => FileField::Content,
                "file_path" => FileField::FilePath,
                "file_format" => FileField::FileFormat,
                "partition" => {
                    let record = match ty {
                        AvroType::Record(fields) => fields,
                        AvroType::Union(v) => match v.as_slice() {
                            [AvroType::Null, AvroType::Record(fields)] => {
                                partition_is_optional = true;
                                fields
                            }
                            _ => return declined("partition union shape"),
                        },
                        _ => return declined("partition is not a record"),
                    };
                    partition = Some(record.clone());
                    FileField::Partition
                }
                "record_count" => FileField::RecordCount,
                "file_size_in_bytes" => FileField::FileSizeInBytes,
                "column_sizes" => FileField::ColumnSizes,
                "value_counts" => FileField::ValueCounts,
                "null_value_counts" => FileField::NullValueCounts,
                "nan_value_counts" => FileField::NanValueCounts,
                "lower_bounds" => FileField::LowerBounds,
                "upper_bounds" => FileField::UpperBounds,
                "key_metadata" => FileField::KeyMetadata,
                "split_offsets" => FileField::SplitOffsets,
                "equality_ids" => FileField::EqualityIds,
                "sort_order_id" => FileField::SortOrderId,
                "first_row_id" => FileField::FirstRowId,
                "referenced_data_file" => FileField::ReferencedDataFile,
                "content_offset" => FileField::ContentOffset,
                "content_size_in_bytes" => FileField::ContentSizeInBytes,
                _ => FileField::Skip,
            };
            file.push((field, ty.clone()));
        }
        let Some(partition_fields) = partition else {
            return declined("data_file has no partition");
        };
        // iceberg-rust resolves partition fields by name; every field of the partition
        // type must be present in the file, with a type this decoder converts.
        let mut seen = vec![false; partition_type.fields().len()];
        let mut plan = Vec::with_capacity(partition_fields.len());
        for (name, ty) in partition_fields.iter() {
            let position = partition_type.fields().iter().position(|f| &f.name == name);
            if let Some(p) = position {
                seen[p] = true;
                let Type::Primitive(prim) = partition_type.fields()[p].field_type.as_ref() else {
                    return declined("non-primitive partition field");
                };
                partition_literal_supported(prim)?;
            }
            plan.push((position, ty.clone()));
        }
        if seen.iter().any(|s| !s) {
            return declined("a partition field is missing from the file");
        }
        Ok(Self {
            entry,
            file,
            partition: plan,
            partition_is_optional,
        })
    }

    fn decode(&self, cursor: &mut Cursor<'_>, ctx: &Context<'_>) -> Decoded<ManifestEntry> {
        let mut status = None;
        let mut snapshot_id = None;
        let mut sequence_number = None;
        let mut file_sequence_number = None;
        let mut data_file = None;
        for (field, ty) in &self.entry {
            match field {
                EntryField::Status => {
                    let value = required("status", ty, cursor, read_int)?;
                    status = Some(match value {
                        0 => ManifestStatus::Existing,
                        1 => ManifestStatus::Added,
                        2 => ManifestStatus::Deleted,
                        other => return declined(format!("status {other}")),
                    });
                }
                EntryField::SnapshotId => snapshot_id = optional(ty, cursor, read_long)?,
                EntryField::SequenceNumber => sequence_number = optional(ty, cursor, read_long)?,
                EntryField::FileSequenceNumber => {
                    file_sequence_number = optional(ty, cursor, read_long)?
                }
                EntryField::DataFile => {
                    data_file = Some(required("data_file", ty, cursor, |_, cursor| {
                        self.decode_file(cursor, ctx)
                    })?)
                }
                EntryField::Skip => ty.skip(cursor)?,
            }
        }
        let (Some(status), Some(data_file)) = (status, data_file) else {
            return declined("entry without status or data_file");
        };
        Ok(ManifestEntry {
            status,
            snapshot_id,
            sequence_number,
            file_sequence_number,
            data_file,
        })
    }

    fn decode_file(&self, cursor: &mut Cursor<'_>, ctx: &Context<'_>) -> Decoded<DataFile> {
        let mut b = DataFileBuilder::default();
        b.partition_spec_id(ctx.spec_id);
        // iceberg-rust's serde defaults: content 0 (data) when absent, empty maps.
        b.content(DataContentType::Data);
        let (mut path, mut format, mut records, mut size) = (None, None, None, None);
        let mut partition = Struct::empty();
        for (field, ty) in &self.file {
            match field {
                FileField::Content => {
                    let value = required("content", ty, cursor, read_int)?;
                    b.content(match value {
                        0 => DataContentType::Data,
                        1 => DataContentType::PositionDeletes,
                        2 => DataContentType::EqualityDeletes,
                        other => return declined(format!("content {other}")),
                    });
                }
                FileField::FilePath => path = Some(required("file_path", ty, cursor, read_string)?),
                FileField::FileFormat => {
                    let name = required("file_format", ty, cursor, read_string)?;
                    format = Some(
                        name.parse::<DataFileFormat>()
                            .map_err(|e| DecodeError(format!("file_format: {e}")))?,
                    );
                }
                FileField::Partition => {
                    partition = if self.partition_is_optional {
                        optional(ty, cursor, |_, c| self.decode_partition(c, ctx))?
                            .unwrap_or_else(Struct::empty)
                    } else {
                        self.decode_partition(cursor, ctx)?
                    };
                }
                FileField::RecordCount => {
                    records = Some(required("record_count", ty, cursor, read_long)?)
                }
                FileField::FileSizeInBytes => {
                    size = Some(required("file_size_in_bytes", ty, cursor, read_long)?)
                }
                FileField::ColumnSizes => {
                    b.column_sizes(counts(ty, cursor)?);
                }
                FileField::ValueCounts => {
                    b.value_counts(counts(ty, cursor)?);
                }
                FileField::NullValueCounts => {
                    b.null_value_counts(counts(ty, cursor)?);
                }
                FileField::NanValueCounts => {
                    b.nan_value_counts(counts(ty, cursor)?);
                }
                FileField::LowerBounds => {
                    b.lower_bounds(bounds(ty, cursor, ctx.schema)?);
                }
                FileField::UpperBounds => {
                    b.upper_bounds(bounds(ty, cursor, ctx.schema)?);
                }
                FileField::KeyMetadata => {
                    b.key_metadata(optional(ty, cursor, read_bytes)?);
                }
                FileField::SplitOffsets => {
                    b.split_offsets(optional(ty, cursor, |ty, c| read_list(ty, c, read_long))?);
                }
                FileField::EqualityIds => {
                    b.equality_ids(optional(ty, cursor, |ty, c| read_list(ty, c, read_int))?);
                }
                FileField::SortOrderId => {
                    if let Some(id) = optional(ty, cursor, read_int)? {
                        b.sort_order_id(id);
                    }
                }
                FileField::FirstRowId => {
                    b.first_row_id(optional(ty, cursor, read_long)?);
                }
                FileField::ReferencedDataFile => {
                    b.referenced_data_file(optional(ty, cursor, read_string)?);
                }
                FileField::ContentOffset => {
                    b.content_offset(optional(ty, cursor, read_long)?);
                }
                FileField::ContentSizeInBytes => {
                    b.content_size_in_bytes(optional(ty, cursor, read_long)?);
                }
                FileField::Skip => ty.skip(cursor)?,
            }
        }
        let (Some(path), Some(format), Some(records), Some(size)) = (path, format, records, size)
        else {
            return declined("data_file lacks a required field");
        };
        let unsigned = |v: i64, what: &str| {
            u64::try_from(v).map_err(|_| DecodeError(format!("negative {what}")))
        };
        b.file_path(path)
            .file_format(format)
            .record_count(unsigned(records, "record_count")?)
            .file_size_in_bytes(unsigned(size, "file_size_in_bytes")?)
            .partition(partition);
        b.build()
            .map_err(|e| DecodeError(format!("data file: {e}")))
    }

    fn decode_partition(&self, cursor: &mut Cursor<'_>, ctx: &Context<'_>) -> Decoded<Struct> {
        let fields = ctx.partition_type.fields();
        let mut values: Vec<Option<Literal>> = vec![None; fields.len()];
        for (position, ty) in &self.partition {
            let Some(p) = *position else {
                ty.skip(cursor)?;
                continue;
            };
            let Type::Primitive(prim) = fields[p].field_type.as_ref() else {
                return declined("non-primitive partition field");
            };
            values[p] = optional(ty, cursor, |ty, c| partition_literal(ty, c, prim))?;
        }
        Ok(Struct::from_iter(values))
    }
}

/// Partition types whose Avro values this decoder converts the way iceberg-rust does.
fn partition_literal_supported(prim: &PrimitiveType) -> Decoded<()> {
    match prim {
        PrimitiveType::Boolean
        | PrimitiveType::Int
        | PrimitiveType::Long
        | PrimitiveType::Float
        | PrimitiveType::Double
        | PrimitiveType::Date
        | PrimitiveType::Time
        | PrimitiveType::Timestamp
        | PrimitiveType::Timestamptz
        | PrimitiveType::String
        | PrimitiveType::Binary => Ok(()),
        other => declined(format!("partition type {other}")),
    }
}

fn partition_literal(
    ty: &AvroType,
    cursor: &mut Cursor<'_>,
    prim: &PrimitiveType,
) -> Decoded<Literal> {
    let mismatch = || DecodeError(format!("partition value of type {prim} stored as {ty:?}"));
    Ok(match (ty, prim) {
        (AvroType::Boolean, PrimitiveType::Boolean) => match cursor.take(1)? {
            [0] => Literal::bool(false),
            [1] => Literal::bool(true),
            _ => return declined("boolean byte"),
        },
        (AvroType::Int, PrimitiveType::Int) => Literal::int(cursor.int()?),
        (AvroType::Int, PrimitiveType::Long) => Literal::long(i64::from(cursor.int()?)),
        (AvroType::Int, PrimitiveType::Date) => Literal::date(cursor.int()?),
        (AvroType::Long, PrimitiveType::Long) => Literal::long(cursor.long()?),
        (AvroType::Long, PrimitiveType::Time) => Literal::time(cursor.long()?),
        (AvroType::Long, PrimitiveType::Timestamp) => Literal::timestamp(cursor.long()?),
        (AvroType::Long, PrimitiveType::Timestamptz) => Literal::timestamptz(cursor.long()?),
        (AvroType::Float, PrimitiveType::Float) => {
            let b = cursor.take(4)?;
            Literal::float(f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        }
        (AvroType::Double, PrimitiveType::Double) => {
            let b = cursor.take(8)?;
            let mut a = [0u8; 8];
            a.copy_from_slice(b);
            Literal::double(f64::from_le_bytes(a))
        }
        (AvroType::String, PrimitiveType::String) => Literal::string(cursor.string()?),
        (AvroType::Bytes, PrimitiveType::Binary) => Literal::binary(cursor.bytes()?.to_vec()),
        _ => return Err(mismatch()),
    })
}

/// Column counts: iceberg-rust drops negative values (counts cannot be negative).
fn counts(ty: &AvroType, cursor: &mut Cursor<'_>) -> Decoded<HashMap<i32, u64>> {
    let entries = optional(ty, cursor, |ty, c| read_int_map(ty, c, read_long))?;
    Ok(entries
        .unwrap_or_default()
        .into_iter()
        .filter_map(|(k, v)| u64::try_from(v).ok().map(|v| (k, v)))
        .collect())
}

/// Column bounds, typed by the manifest's schema; bounds of columns the schema no
/// longer has are dropped, as iceberg-rust does.
fn bounds(ty: &AvroType, cursor: &mut Cursor<'_>, schema: &Schema) -> Decoded<HashMap<i32, Datum>> {
    let entries = optional(ty, cursor, |ty, c| read_int_map(ty, c, read_bytes))?;
    let mut out = HashMap::new();
    for (id, bytes) in entries.unwrap_or_default() {
        let Some(field) = schema.field_by_id(id) else {
            if iceberg::metadata_columns::get_metadata_field(id).is_ok() {
                return declined("bound of a metadata column");
            }
            continue;
        };
        let Some(prim) = field.field_type.as_primitive_type() else {
            return declined("bound of a non-primitive column");
        };
        let datum = Datum::try_from_bytes(&bytes, prim.clone())
            .map_err(|e| DecodeError(format!("bound of field {id}: {e}")))?;
        out.insert(id, datum);
    }
    Ok(out)
}
