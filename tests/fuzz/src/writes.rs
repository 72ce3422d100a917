//! Targets over what eqdv writes from values other writers chose: the bytes are not a
//! file but the choices (partition values, counts, sizes, paths, statistics) of the
//! entries a conversion writes, read from the input as it goes and zeros after its end.

use std::collections::HashMap;
use std::sync::Arc;

use eqdv::manifest_decode::decode_manifest;
use eqdv::snapshot::manifest_encode::EntryWriter;
use eqdv::snapshot::summary::summarize;
use eqdv::snapshot::{AddedFile, SnapshotChanges};
use eqdv::table::{LiveFile, SkippedData, TableFiles};
use iceberg::io::FileIO;
use iceberg::spec::{
    DataContentType, DataFile, DataFileBuilder, DataFileFormat, Datum, Literal, Manifest,
    ManifestContentType, ManifestFile, ManifestWriterBuilder, NestedField, Operation,
    PartitionSpec, PrimitiveType, Schema, Struct, Transform, Type,
};

use crate::block_on;

/// The input as a source of choices: zeros once it is used up.
struct Choices<'a> {
    data: &'a [u8],
}

impl Choices<'_> {
    fn u8(&mut self) -> u8 {
        match self.data.split_first() {
            Some((&b, rest)) => {
                self.data = rest;
                b
            }
            None => 0,
        }
    }

    fn bytes<const N: usize>(&mut self) -> [u8; N] {
        std::array::from_fn(|_| self.u8())
    }

    fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.bytes())
    }

    fn i64(&mut self) -> i64 {
        i64::from_le_bytes(self.bytes())
    }

    fn i32(&mut self) -> i32 {
        i32::from_le_bytes(self.bytes())
    }

    /// A count of any magnitude: small ones often, past a long now and then.
    fn count(&mut self) -> u64 {
        self.u64() >> (self.u8() % 64)
    }

    /// Up to `max` bytes.
    fn vec(&mut self, max: u8) -> Vec<u8> {
        let n = self.u8() % (max + 1);
        (0..n).map(|_| self.u8()).collect()
    }

    fn string(&mut self, max: u8) -> String {
        String::from_utf8_lossy(&self.vec(max)).into_owned()
    }

    fn exhausted(&self) -> bool {
        self.data.is_empty()
    }
}

/// A table with a column of each type a partition may be written from.
fn schema() -> Arc<Schema> {
    use PrimitiveType as P;
    let types = [
        P::Boolean,
        P::Int,
        P::Long,
        P::Float,
        P::Double,
        P::Date,
        P::Time,
        P::Timestamp,
        P::Timestamptz,
        P::TimestampNs,
        P::String,
        P::Binary,
        P::Decimal {
            precision: 9,
            scale: 2,
        },
        P::Decimal {
            precision: 38,
            scale: 0,
        },
        P::Fixed(4),
    ];
    let fields = types.into_iter().enumerate().map(|(i, ty)| {
        let id = i as i32 + 1;
        Arc::new(NestedField::optional(
            id,
            format!("c{id}"),
            Type::Primitive(ty),
        ))
    });
    match Schema::builder()
        .with_fields(fields.collect::<Vec<_>>())
        .build()
    {
        Ok(schema) => Arc::new(schema),
        Err(e) => panic!("the fuzz table's schema: {e}"),
    }
}

/// A spec of up to four fields over `schema`'s columns, as the input chooses.
fn spec(choices: &mut Choices<'_>, schema: &Arc<Schema>) -> Option<PartitionSpec> {
    let mut builder = PartitionSpec::builder(schema.clone()).with_spec_id(0);
    for i in 0..choices.u8() % 5 {
        let column = 1 + i32::from(choices.u8() % 15);
        let transform = match choices.u8() % 8 {
            0 => Transform::Bucket(1 + u32::from(choices.u8())),
            1 => Transform::Truncate(1 + u32::from(choices.u8() % 8)),
            2 => Transform::Day,
            3 => Transform::Hour,
            4 => Transform::Year,
            _ => Transform::Identity,
        };
        let name = format!("p{i}");
        // A transform the column's type does not take is no spec: the input chooses
        // another.
        builder = builder
            .add_partition_field(format!("c{column}"), name, transform)
            .ok()?;
    }
    builder.build().ok()
}

/// A value of a partition field of type `ty` (now and then one of another type, which
/// the writer must refuse), or none.
fn partition_value(choices: &mut Choices<'_>, ty: &PrimitiveType) -> Option<Literal> {
    use PrimitiveType as P;
    match choices.u8() {
        0..16 => return None,
        16 => return Some(Literal::string("not of its type")),
        _ => {}
    }
    Some(match ty {
        P::Boolean => Literal::bool(choices.u8() & 1 == 1),
        P::Int | P::Date => Literal::int(choices.i32()),
        P::Float => Literal::float(f32::from_bits(choices.i32() as u32)),
        P::Double => Literal::double(f64::from_bits(choices.u64())),
        P::String => Literal::string(choices.string(24)),
        P::Binary => Literal::binary(choices.vec(24)),
        P::Decimal { precision: 38, .. } => {
            Literal::decimal(i128::from(choices.i64()) << (choices.u8() % 64))
        }
        P::Decimal { .. } => Literal::decimal(i128::from(choices.i64())),
        // Of its length mostly, of another now and then.
        P::Fixed(len) => match choices.u8() {
            0..8 => Literal::fixed(choices.vec(8)),
            _ => Literal::fixed((0..*len).map(|_| choices.u8())),
        },
        _ => Literal::long(choices.i64()),
    })
}

/// Column statistics of up to four columns.
fn statistics(choices: &mut Choices<'_>) -> HashMap<i32, u64> {
    (0..choices.u8() % 5)
        .map(|_| (i32::from(choices.u8() % 16), choices.count()))
        .collect()
}

/// A file of `content` as the input chooses; `None` when the builder refuses it.
fn data_file(
    choices: &mut Choices<'_>,
    content: ManifestContentType,
    partition: Struct,
    i: usize,
) -> Option<DataFile> {
    let mut b = DataFileBuilder::default();
    b.partition(partition)
        .partition_spec_id(0)
        .record_count(choices.count())
        .file_size_in_bytes(choices.count())
        .key_metadata((choices.u8().is_multiple_of(4)).then(|| choices.vec(8)));
    let path = format!("s3://b/t/data/{i}-{}", choices.string(16));
    match (content, choices.u8() % 2) {
        (ManifestContentType::Data, _) => {
            b.content(DataContentType::Data)
                .file_path(format!("{path}.parquet"))
                .file_format(DataFileFormat::Parquet)
                .column_sizes(statistics(choices))
                .value_counts(statistics(choices))
                .null_value_counts(statistics(choices))
                .nan_value_counts(statistics(choices))
                .lower_bounds(HashMap::from([(3, Datum::long(choices.i64()))]))
                .upper_bounds(HashMap::from([(11, Datum::string(choices.string(8)))]))
                .split_offsets((choices.u8().is_multiple_of(2)).then(|| vec![4, choices.i64()]))
                .sort_order_id(choices.i32())
                .first_row_id((choices.u8().is_multiple_of(2)).then(|| choices.i64()));
        }
        (ManifestContentType::Deletes, 0) => {
            b.content(DataContentType::EqualityDeletes)
                .file_path(format!("{path}.parquet"))
                .file_format(DataFileFormat::Parquet)
                .equality_ids(Some(vec![1, choices.i32()]));
        }
        (ManifestContentType::Deletes, _) => {
            b.content(DataContentType::PositionDeletes)
                .file_path(format!("{path}.puffin"))
                .file_format(DataFileFormat::Puffin)
                .referenced_data_file(Some(choices.string(16)))
                .content_offset(Some(choices.i64()))
                .content_size_in_bytes(Some(choices.i64()));
        }
    }
    b.build().ok()
}

/// One entry to write: the file, and how (0 added, 1 carried, 2 removed) with the
/// snapshot that added it and its sequence numbers.
type Entry = (DataFile, u8, i64, i64, i64);

const MANIFEST: &str = "memory:///t/metadata/fuzzed-m.avro";

/// Writes `entries` with eqdv's writer (`ours`) or iceberg's.
fn write(
    spec: &PartitionSpec,
    schema: &Arc<Schema>,
    content: ManifestContentType,
    entries: &[Entry],
    ours: bool,
) -> eqdv::Result<(Vec<u8>, ManifestFile, bool)> {
    let staging = FileIO::new_with_memory();
    let partition_type = spec
        .partition_type(schema)
        .unwrap_or_else(|e| panic!("a built spec has no partition type: {e}"));
    let output = staging
        .new_output(MANIFEST)
        .unwrap_or_else(|e| panic!("memory output: {e}"));
    let builder = ManifestWriterBuilder::new(output, Some(77), schema.clone(), spec.clone());
    let header = match content {
        ManifestContentType::Data => builder.build_v3_data(),
        ManifestContentType::Deletes => builder.build_v3_deletes(),
    };
    let mut writer = if ours {
        EntryWriter::new(header, MANIFEST, &staging, 77, content, &partition_type)
    } else {
        EntryWriter::iceberg(header, &partition_type)
    };
    let fast = matches!(writer, EntryWriter::Fast(_));
    for (file, how, added_by, seq, file_seq) in entries {
        match how {
            0 => writer.add_file(file.clone())?,
            1 => writer.carry(file.clone(), *added_by, *seq, *file_seq, false)?,
            _ => writer.carry(file.clone(), *added_by, *seq, *file_seq, true)?,
        }
    }
    let manifest = block_on(writer.finish(MANIFEST))?;
    let bytes = block_on(async { staging.new_input(MANIFEST)?.read().await })
        .unwrap_or_else(|e| panic!("cannot read back the manifest written: {e}"));
    Ok((bytes.to_vec(), manifest, fast))
}

/// The entries' blocks of an Avro file: what follows the first copy of its sync marker
/// (its last 16 bytes), with every later copy taken out. The header before it differs
/// between two writers of the same entries (a map in no fixed order), and so do the
/// markers, chosen at random.
fn blocks(bytes: &[u8]) -> Vec<u8> {
    let Some(marker) = bytes.len().checked_sub(16).map(|at| &bytes[at..]) else {
        return bytes.to_vec();
    };
    let Some(first) = bytes.windows(16).position(|w| w == marker) else {
        return bytes.to_vec();
    };
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = first + 16;
    while at < bytes.len() {
        if bytes[at..].starts_with(marker) {
            at += 16;
        } else {
            out.push(bytes[at]);
            at += 1;
        }
    }
    out
}

/// The manifest encoder round trip: entries of the input's choosing, written by eqdv's
/// encoder, are either refused with an error naming the file at fault, or written as
/// the very blocks of entries iceberg's writer writes, with the same entry
/// for the manifest list; eqdv's decoder and iceberg-rust's read them back alike, with
/// each file's path, counts and partition as written.
pub fn manifest_encode(data: &[u8]) {
    let mut choices = Choices { data };
    let schema = schema();
    let Some(spec) = spec(&mut choices, &schema) else {
        return;
    };
    let Ok(partition_type) = spec.partition_type(&schema) else {
        return;
    };
    let content = if choices.u8().is_multiple_of(2) {
        ManifestContentType::Data
    } else {
        ManifestContentType::Deletes
    };
    let mut entries: Vec<Entry> = Vec::new();
    for i in 0..usize::from(choices.u8()) {
        if choices.exhausted() && i > 0 {
            break;
        }
        let partition = Struct::from_iter(partition_type.fields().iter().map(|f| {
            match f.field_type.as_primitive_type() {
                Some(ty) => partition_value(&mut choices, ty),
                None => None,
            }
        }));
        let Some(file) = data_file(&mut choices, content, partition, i) else {
            continue;
        };
        let how = choices.u8() % 3;
        entries.push((file, how, choices.i64(), choices.i64(), choices.i64()));
    }
    let (ours, ours_list, fast) = match write(&spec, &schema, content, &entries, true) {
        Ok(written) => written,
        Err(e) => {
            let named = entries
                .iter()
                .any(|(f, ..)| e.to_string().contains(f.file_path()))
                || e.to_string().contains(MANIFEST);
            assert!(
                named,
                "the error names neither the manifest nor a file: {e}"
            );
            return;
        }
    };
    if !fast {
        return;
    }
    // What iceberg's writer accepts of the same: the same bytes and list entry. (That
    // writer leaks partition field names by design: tests/fuzz/lsan.supp.)
    if let Ok((theirs, theirs_list, _)) = write(&spec, &schema, content, &entries, false) {
        assert!(
            blocks(&ours) == blocks(&theirs) && ours.len() == theirs.len(),
            "eqdv's encoder wrote other entries than iceberg's writer ({} bytes against {})",
            ours.len(),
            theirs.len()
        );
        assert_eq!(ours_list, theirs_list, "the manifest list entries differ");
    }
    let Ok((_, read)) = decode_manifest(&ours) else {
        // eqdv's decoder declines some of what it could read otherwise (iceberg's then
        // reads it); what it declines here is covered by the manifest target.
        return;
    };
    assert_eq!(read.len(), entries.len(), "entries read back");
    for (entry, (file, how, ..)) in read.iter().zip(&entries) {
        let back = entry.data_file();
        assert_eq!(back.file_path(), file.file_path(), "path");
        assert_eq!(back.record_count(), file.record_count(), "record count");
        assert_eq!(back.file_size_in_bytes(), file.file_size_in_bytes(), "size");
        assert_eq!(back.partition(), file.partition(), "partition");
        assert_eq!(entry.status() as u8, [1, 0, 2][usize::from(*how)], "status");
    }
    if let Ok(theirs) = Manifest::parse_avro(&ours) {
        let (their_entries, _) = theirs.into_parts();
        let their_entries: Vec<_> = their_entries.iter().map(|e| (**e).clone()).collect();
        assert_eq!(
            read, their_entries,
            "eqdv and iceberg-rust read it differently"
        );
    }
}

/// A snapshot's summary, from live, added and removed files of the input's counts and
/// sizes and a parent summary of its text: no counter wraps or panics, every total is a
/// number, and a total of an exact read is the sum of the live files' counts.
pub fn summary(data: &[u8]) {
    let mut choices = Choices { data };
    let partial = choices.u8().is_multiple_of(2);
    let parent: HashMap<String, String> = (0..choices.u8() % 6)
        .map(|_| {
            let key = match choices.u8() % 4 {
                0 => "total-records".to_string(),
                1 => "total-files-size".to_string(),
                2 => "total-data-files".to_string(),
                _ => choices.string(12),
            };
            (key, choices.string(24))
        })
        .collect();
    let mut files = Vec::new();
    for i in 0..usize::from(choices.u8() % 24) {
        let content = if choices.u8().is_multiple_of(2) {
            ManifestContentType::Data
        } else {
            ManifestContentType::Deletes
        };
        if let Some(file) = data_file(&mut choices, content, Struct::empty(), i) {
            files.push((file, choices.u8() % 3));
        }
    }
    let live = |file: &DataFile| LiveFile {
        file: file.clone(),
        spec_id: 0,
        data_sequence_number: 1,
        file_sequence_number: 1,
        snapshot_id: 1,
        manifest_path: MANIFEST.to_string(),
    };
    let mut base = TableFiles {
        snapshot_id: Some(1),
        skipped_data: SkippedData {
            manifests: usize::from(partial),
            files: 0,
        },
        ..TableFiles::default()
    };
    let mut changes = SnapshotChanges {
        operation: Operation::Overwrite,
        added_data_files: Vec::new(),
        added_delete_files: Vec::new(),
        removed_files: Vec::new(),
        extra_summary: HashMap::new(),
        set_properties: Vec::new(),
    };
    for (file, what) in &files {
        let is_data = file.content_type() == DataContentType::Data;
        match what {
            0 if is_data => changes.added_data_files.push(AddedFile {
                spec_id: 0,
                file: file.clone(),
            }),
            0 => changes.added_delete_files.push(AddedFile {
                spec_id: 0,
                file: file.clone(),
            }),
            _ => {
                match file.content_type() {
                    DataContentType::Data => base.data_files.push(live(file)),
                    DataContentType::EqualityDeletes => base.equality_deletes.push(live(file)),
                    DataContentType::PositionDeletes => base.position_deletes.push(live(file)),
                }
                if *what == 2 {
                    changes.removed_files.push(live(file));
                }
            }
        }
    }
    let summary = summarize(&base, Some(&parent), &changes);
    for (key, value) in &summary {
        assert!(value.parse::<u64>().is_ok(), "{key} is {value:?}");
    }
    if !partial {
        // The live data after the change: the base's but the removed, and the added.
        let records = files
            .iter()
            .filter(|(f, what)| f.content_type() == DataContentType::Data && *what != 2)
            .map(|(f, _)| f.record_count())
            .fold(0, u64::saturating_add);
        assert_eq!(
            summary.get("total-records"),
            Some(&records.to_string()),
            "total-records of an exact read"
        );
    }
}

#[cfg(test)]
mod tests {
    /// The blocks follow the header's sync marker, without the markers between them.
    #[test]
    fn blocks_follow_the_header() {
        let marker = [7u8; 16];
        let mut file = b"head".to_vec();
        file.extend(marker);
        file.extend(b"block");
        file.extend(marker);
        file.extend(b"two");
        file.extend(marker);
        assert_eq!(super::blocks(&file), b"blocktwo");
    }
}
