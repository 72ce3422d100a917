//! Iceberg's side of the decoder: maps the writer's manifest-entry schema to entry and
//! data-file fields once per file, then builds iceberg's `ManifestEntry`/`DataFile`
//! from each record, converting partition values, counts and bounds as iceberg-rust does.

use std::collections::HashMap;

use iceberg::spec::{
    DataContentType, DataFile, DataFileBuilder, DataFileFormat, Datum, Literal, ManifestEntry,
    ManifestStatus, PrimitiveType, Schema, Struct, StructType, Type,
};

use super::avro::{
    AvroType, Cursor, optional, read_bytes, read_int, read_int_map, read_list, read_long,
    read_string, required,
};
use super::{DecodeError, Decoded, EntryHead, KeepEntry, declined, inherited_sequence_number};

pub(super) struct Context<'a> {
    pub(super) schema: &'a Schema,
    pub(super) partition_type: &'a StructType,
    pub(super) spec_id: i32,
    /// Which entries to keep, and the manifest's sequence number they inherit: an entry
    /// left out is skipped as soon as its head is known, its counts and bounds unread.
    pub(super) keep: Option<(KeepEntry<'a>, i64)>,
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
pub(super) struct EntryPlan {
    entry: Vec<(EntryField, AvroType)>,
    file: Vec<(FileField, AvroType)>,
    /// For each writer partition field: its position in the partition type, if any.
    partition: Vec<(Option<usize>, AvroType)>,
    partition_is_optional: bool,
    /// The data-file field after which its content, path and partition are all
    /// decoded, so that whether to keep the entry can be decided.
    decide_after: usize,
    /// Whether the entry's status and sequence number precede its data file (as in
    /// every writer's schema): else nothing is left out early.
    decide_early: bool,
}

impl EntryPlan {
    pub(super) fn new(writer: &AvroType, partition_type: &StructType) -> Decoded<Self> {
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
        let position_of = |wanted: fn(&FileField) -> bool| file.iter().position(|(f, _)| wanted(f));
        let decide_after = position_of(|f| matches!(f, FileField::Partition))
            .max(position_of(|f| matches!(f, FileField::Content)))
            .max(position_of(|f| matches!(f, FileField::FilePath)))
            .unwrap_or(0);
        let entry_position =
            |wanted: fn(&EntryField) -> bool| entry.iter().position(|(f, _)| wanted(f));
        let data_file_at = entry_position(|f| matches!(f, EntryField::DataFile));
        let decide_early = entry_position(|f| matches!(f, EntryField::Status)) < data_file_at
            && entry_position(|f| matches!(f, EntryField::SequenceNumber))
                .is_none_or(|at| Some(at) < data_file_at);
        Ok(Self {
            entry,
            file,
            partition: plan,
            partition_is_optional,
            decide_after,
            decide_early,
        })
    }

    /// Decodes one entry: whether it is live (not deleted), and the entry unless the
    /// context's `keep` left it out.
    pub(super) fn decode(
        &self,
        cursor: &mut Cursor<'_>,
        ctx: &Context<'_>,
    ) -> Decoded<(bool, Option<ManifestEntry>)> {
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
                    let head = status
                        .filter(|_| self.decide_early)
                        .map(|s| (s, sequence_number));
                    data_file = Some(required("data_file", ty, cursor, |_, cursor| {
                        self.decode_file(cursor, ctx, head)
                    })?)
                }
                EntryField::Skip => ty.skip(cursor)?,
            }
        }
        let (Some(status), Some(data_file)) = (status, data_file) else {
            return declined("entry without status or data_file");
        };
        let live = status != ManifestStatus::Deleted;
        Ok((
            live,
            data_file.map(|data_file| ManifestEntry {
                status,
                snapshot_id,
                sequence_number,
                file_sequence_number,
                data_file,
            }),
        ))
    }

    /// The entry's data file, or `None` when the context's `keep` leaves the entry out
    /// (given `head`, the entry's status and explicit sequence number).
    fn decode_file(
        &self,
        cursor: &mut Cursor<'_>,
        ctx: &Context<'_>,
        head: Option<(ManifestStatus, Option<i64>)>,
    ) -> Decoded<Option<DataFile>> {
        let mut b = DataFileBuilder::default();
        b.partition_spec_id(ctx.spec_id);
        // iceberg-rust's serde defaults: content 0 (data) when absent, empty maps.
        let mut content = DataContentType::Data;
        let (mut path, mut format, mut records, mut size) = (None, None, None, None);
        let mut partition = Struct::empty();
        for (i, (field, ty)) in self.file.iter().enumerate() {
            match field {
                FileField::Content => {
                    let value = required("content", ty, cursor, read_int)?;
                    content = match value {
                        0 => DataContentType::Data,
                        1 => DataContentType::PositionDeletes,
                        2 => DataContentType::EqualityDeletes,
                        other => return declined(format!("content {other}")),
                    };
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
            if i == self.decide_after
                && let (Some((keep, manifest_sequence_number)), Some((status, explicit))) =
                    (ctx.keep, head)
            {
                let Some(path) = path.as_deref() else {
                    return declined("data_file lacks file_path");
                };
                let head = EntryHead {
                    path,
                    status,
                    sequence_number: inherited_sequence_number(
                        status,
                        explicit,
                        manifest_sequence_number,
                    ),
                    content,
                    partition: &partition,
                };
                if !keep(&head) {
                    for (_, rest) in &self.file[i + 1..] {
                        rest.skip(cursor)?;
                    }
                    return Ok(None);
                }
            }
        }
        let (Some(path), Some(format), Some(records), Some(size)) = (path, format, records, size)
        else {
            return declined("data_file lacks a required field");
        };
        b.content(content);
        let unsigned = |v: i64, what: &str| {
            u64::try_from(v).map_err(|_| DecodeError(format!("negative {what}")))
        };
        b.file_path(path)
            .file_format(format)
            .record_count(unsigned(records, "record_count")?)
            .file_size_in_bytes(unsigned(size, "file_size_in_bytes")?)
            .partition(partition);
        b.build()
            .map(Some)
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
