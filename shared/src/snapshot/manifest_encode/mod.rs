//! Writing a manifest's entries without apache-avro's per-record work.
//!
//! iceberg's `ManifestWriter` turns every entry into an Avro `Value` tree, resolves it
//! against the schema (name lookups hashed per field) and then encodes it; in a profile
//! of a streaming conversion, rewriting a delete manifest of a few thousand DVs that way
//! was most of the CPU on its commit's critical path. This writer encodes each entry
//! straight into the Avro binary layout of iceberg's v2/v3 manifest schema (the same
//! bytes, in the same blocks), and leaves everything else to iceberg: the file's header
//! (the Avro schema and the manifest's metadata) is the one iceberg's writer writes for a
//! manifest with no entries, and the `ManifestFile` it returns is completed with the
//! counts and partition summaries iceberg computes the same way.
//!
//! It takes manifests whose partition fields are of every type but UUID: iceberg-rust
//! declares a UUID partition field an Avro string while giving it 16 raw bytes, so a
//! partition of UUIDs goes through iceberg's writer as before (see [`EntryWriter`]).
//! Decimals and fixed-length values are Avro fixeds here as there; writing them here
//! also keeps them out of iceberg's writer, whose Avro serde leaks memory on them.

use iceberg::io::FileIO;
use iceberg::spec::{
    DataContentType, DataFile, Datum, FieldSummary, ManifestContentType, ManifestFile,
    ManifestStatus, ManifestWriter, PrimitiveLiteral, PrimitiveType, StructType, Type,
};

use crate::{Error, Result};

mod avro;

use avro::{
    datum, decimal_fits, encodes, put_block_len, put_bytes, put_long, put_optional_long,
    put_optional_longs, put_primitive, to_i64,
};

/// apache-avro closes a block once its data reaches this many bytes; the same here, so
/// that the file's blocks are the ones iceberg's writer would write.
const BLOCK_SIZE: usize = 16_000;

/// A manifest's writer: eqdv's encoder where the partition type allows it, iceberg's
/// otherwise.
pub enum EntryWriter {
    Fast(Box<FastManifest>),
    /// iceberg's writer, and the byte width of each partition field that is a decimal:
    /// apache-avro panics on a value wider than its fixed size, so such a value is
    /// refused first.
    Iceberg(Box<ManifestWriter>, Vec<Option<u32>>),
}

impl EntryWriter {
    /// `header` is iceberg's writer for the same file, given no entries: its header is
    /// the file's.
    pub fn new(
        header: ManifestWriter,
        path: &str,
        staging: &FileIO,
        snapshot_id: i64,
        content: ManifestContentType,
        partition_type: &StructType,
    ) -> Self {
        // Each partition field's type (and whether it is required), when every one has
        // an encoding here.
        let partition: Option<Vec<(PrimitiveType, bool)>> = partition_type
            .fields()
            .iter()
            .map(|field| match &*field.field_type {
                Type::Primitive(p) if encodes(p) => Some((p.clone(), field.required)),
                _ => None,
            })
            .collect();
        let Some(partition) = partition else {
            return EntryWriter::iceberg(header, partition_type);
        };
        let (partition_types, partition_required): (Vec<_>, Vec<_>) = partition.into_iter().unzip();
        EntryWriter::Fast(Box::new(FastManifest {
            header,
            path: path.to_string(),
            staging: staging.clone(),
            snapshot_id,
            content,
            stats: partition_types
                .iter()
                .map(|t| PartitionStats::new(t.clone()))
                .collect(),
            partition_types,
            partition_required,
            blocks: Vec::new(),
            block: Vec::with_capacity(BLOCK_SIZE + 1024),
            block_count: 0,
            counts: Counts::default(),
        }))
    }

    /// iceberg's writer for a manifest of `partition_type`.
    pub fn iceberg(header: ManifestWriter, partition_type: &StructType) -> Self {
        let decimal_bytes = partition_type
            .fields()
            .iter()
            .map(|field| match &*field.field_type {
                Type::Primitive(PrimitiveType::Decimal { precision, .. }) => {
                    Type::decimal_required_bytes(*precision).ok()
                }
                _ => None,
            })
            .collect();
        EntryWriter::Iceberg(Box::new(header), decimal_bytes)
    }

    /// A new file (status ADDED), its sequence numbers inherited from the snapshot.
    pub fn add_file(&mut self, file: DataFile) -> Result<()> {
        match self {
            EntryWriter::Fast(w) => {
                let snapshot_id = w.snapshot_id;
                w.add(ManifestStatus::Added, Some(snapshot_id), None, None, file)
            }
            EntryWriter::Iceberg(w, decimal_bytes) => {
                check_decimals(&file, decimal_bytes)?;
                let path = file.file_path().to_string();
                unless_panicked(&path, || w.add_file(file, -1))
            }
        }
    }

    /// A base entry in a rewritten or merged manifest: DELETED when this snapshot
    /// removes it, else EXISTING, with the snapshot and sequence numbers it had.
    pub fn carry(
        &mut self,
        file: DataFile,
        added_by: i64,
        sequence_number: i64,
        file_sequence_number: i64,
        removed: bool,
    ) -> Result<()> {
        let file_seq = Some(file_sequence_number);
        match self {
            EntryWriter::Fast(w) if removed => {
                let snapshot_id = w.snapshot_id;
                w.add(
                    ManifestStatus::Deleted,
                    Some(snapshot_id),
                    Some(sequence_number),
                    file_seq,
                    file,
                )
            }
            EntryWriter::Fast(w) => w.add(
                ManifestStatus::Existing,
                Some(added_by),
                Some(sequence_number),
                file_seq,
                file,
            ),
            EntryWriter::Iceberg(w, decimal_bytes) if removed => {
                check_decimals(&file, decimal_bytes)?;
                let path = file.file_path().to_string();
                unless_panicked(&path, || w.add_delete_file(file, sequence_number, file_seq))
            }
            EntryWriter::Iceberg(w, decimal_bytes) => {
                check_decimals(&file, decimal_bytes)?;
                let path = file.file_path().to_string();
                unless_panicked(&path, || {
                    w.add_existing_file(file, added_by, sequence_number, file_seq)
                })
            }
        }
    }

    /// Writes the file (to the staging IO it was made with) and returns its entry for
    /// the manifest list.
    pub async fn finish(self, path: &str) -> Result<ManifestFile> {
        let written = match self {
            EntryWriter::Fast(w) => w.finish().await,
            // apache-avro panics on some values it cannot encode (a decimal wider than
            // its fixed size): an error naming the manifest, not a crash.
            EntryWriter::Iceberg(w, _) => {
                crate::parquet_io::unless_panicked(
                    path,
                    "iceberg's manifest writer",
                    (*w).write_manifest_file(),
                )
                .await?
            }
        };
        written.map_err(|e| Error::file(path, "cannot write manifest", e))
    }
}

/// Entries encoded as they are added; see the module's documentation.
pub struct FastManifest {
    header: ManifestWriter,
    path: String,
    staging: FileIO,
    snapshot_id: i64,
    content: ManifestContentType,
    partition_types: Vec<PrimitiveType>,
    partition_required: Vec<bool>,
    /// Closed blocks (count, size, data; the sync marker is known at the end).
    blocks: Vec<(usize, Vec<u8>)>,
    block: Vec<u8>,
    block_count: usize,
    counts: Counts,
    stats: Vec<PartitionStats>,
}

#[derive(Default)]
struct Counts {
    added_files: u32,
    added_rows: u64,
    existing_files: u32,
    existing_rows: u64,
    deleted_files: u32,
    deleted_rows: u64,
    min_sequence_number: Option<i64>,
}

impl FastManifest {
    fn add(
        &mut self,
        status: ManifestStatus,
        snapshot_id: Option<i64>,
        sequence_number: Option<i64>,
        file_sequence_number: Option<i64>,
        file: DataFile,
    ) -> Result<()> {
        self.check_content(&file)?;
        let records = file.record_count();
        // Counts a manifest read elsewhere states, summed: saturating, never wrapping (a
        // count past a long is refused below, naming the file).
        let (files, rows) = match status {
            ManifestStatus::Added => (&mut self.counts.added_files, &mut self.counts.added_rows),
            ManifestStatus::Existing => (
                &mut self.counts.existing_files,
                &mut self.counts.existing_rows,
            ),
            ManifestStatus::Deleted => (
                &mut self.counts.deleted_files,
                &mut self.counts.deleted_rows,
            ),
        };
        *files = files.saturating_add(1);
        *rows = rows.saturating_add(records);
        if status != ManifestStatus::Deleted
            && let Some(seq) = sequence_number
        {
            let min = self.counts.min_sequence_number.get_or_insert(seq);
            *min = (*min).min(seq);
        }
        for ((value, stats), ty) in file
            .partition()
            .iter()
            .zip(&mut self.stats)
            .zip(&self.partition_types)
        {
            let literal = match value {
                None => None,
                Some(literal) => Some(literal.as_primitive_literal().ok_or_else(|| {
                    partition_error(&file, format!("a partition value of type {ty} is nested"))
                })?),
            };
            stats
                .update(literal)
                .map_err(|m| partition_error(&file, m))?;
        }
        if file.partition().fields().len() != self.partition_types.len() {
            return Err(partition_error(
                &file,
                format!(
                    "{} partition values for a partition type of {} fields",
                    file.partition().fields().len(),
                    self.partition_types.len()
                ),
            ));
        }

        let out = &mut self.block;
        put_long(out, status as i64);
        put_optional_long(out, snapshot_id);
        put_optional_long(out, sequence_number);
        put_optional_long(out, file_sequence_number);
        // data_file, in the order of iceberg's v2/v3 manifest schema.
        put_long(out, file.content_type() as i64);
        put_bytes(out, file.file_path().as_bytes());
        put_bytes(
            out,
            file.file_format()
                .to_string()
                .to_ascii_uppercase()
                .as_bytes(),
        );
        for ((value, ty), required) in file
            .partition()
            .iter()
            .zip(&self.partition_types)
            .zip(&self.partition_required)
        {
            let literal = value.and_then(|v| v.as_primitive_literal());
            match (literal, required) {
                (None, true) => {
                    return Err(partition_error(
                        &file,
                        format!("no value for a required partition field of type {ty}"),
                    ));
                }
                (None, false) => put_long(out, 0),
                (Some(literal), required) => {
                    if !required {
                        put_long(out, 1);
                    }
                    put_primitive(out, ty, &literal).map_err(|m| partition_error(&file, m))?;
                }
            }
        }
        put_long(out, to_i64(&file, "record count", records)?);
        put_long(out, to_i64(&file, "file size", file.file_size_in_bytes())?);
        for counts in [
            file.column_sizes(),
            file.value_counts(),
            file.null_value_counts(),
            file.nan_value_counts(),
        ] {
            put_long(out, 1);
            put_block_len(out, counts.len());
            for (key, value) in counts {
                put_long(out, i64::from(*key));
                put_long(out, to_i64(&file, "column statistic", *value)?);
            }
            put_long(out, 0);
        }
        for bounds in [file.lower_bounds(), file.upper_bounds()] {
            put_long(out, 1);
            put_block_len(out, bounds.len());
            for (key, datum) in bounds {
                put_long(out, i64::from(*key));
                put_bytes(out, &datum.to_bytes()?);
            }
            put_long(out, 0);
        }
        match file.key_metadata() {
            None => put_long(out, 0),
            Some(key) => {
                put_long(out, 1);
                put_bytes(out, key);
            }
        }
        put_optional_longs(out, file.split_offsets().map(|o| o.iter().copied()));
        put_optional_longs(
            out,
            file.equality_ids()
                .map(|ids| ids.into_iter().map(i64::from)),
        );
        put_optional_long(out, file.sort_order_id().map(i64::from));
        put_optional_long(out, file.first_row_id());
        match file.referenced_data_file() {
            None => put_long(out, 0),
            Some(path) => {
                put_long(out, 1);
                put_bytes(out, path.as_bytes());
            }
        }
        put_optional_long(out, file.content_offset());
        put_optional_long(out, file.content_size_in_bytes());

        self.block_count += 1;
        if self.block.len() >= BLOCK_SIZE {
            self.close_block();
        }
        Ok(())
    }

    fn close_block(&mut self) {
        if self.block_count > 0 {
            let data = std::mem::replace(&mut self.block, Vec::with_capacity(BLOCK_SIZE + 1024));
            self.blocks.push((self.block_count, data));
            self.block_count = 0;
        }
    }

    fn check_content(&self, file: &DataFile) -> Result<()> {
        let fits = match self.content {
            ManifestContentType::Data => file.content_type() == DataContentType::Data,
            ManifestContentType::Deletes => file.content_type() != DataContentType::Data,
        };
        if fits {
            return Ok(());
        }
        Err(Error::file(
            &self.path,
            format!(
                "{} ({:?}) does not belong in a {} manifest",
                file.file_path(),
                file.content_type(),
                self.content
            ),
            "invalid manifest entry",
        ))
    }

    async fn finish(mut self) -> iceberg::Result<ManifestFile> {
        self.close_block();
        // iceberg's file with no entries: the header (magic, metadata, sync marker).
        let mut manifest = self.header.write_manifest_file().await?;
        let header = self.staging.new_input(&self.path)?.read().await?;
        let sync = header
            .len()
            .checked_sub(16)
            .map(|start| header.slice(start..))
            .ok_or_else(|| {
                iceberg::Error::new(
                    iceberg::ErrorKind::Unexpected,
                    format!(
                        "the manifest header of {} is {} bytes",
                        self.path,
                        header.len()
                    ),
                )
            })?;
        let body: usize = self.blocks.iter().map(|(_, d)| d.len() + 36).sum();
        let mut bytes = Vec::with_capacity(header.len() + body);
        bytes.extend_from_slice(&header);
        for (count, data) in &self.blocks {
            put_block_len(&mut bytes, *count);
            put_block_len(&mut bytes, data.len());
            bytes.extend_from_slice(data);
            bytes.extend_from_slice(&sync);
        }
        let length = bytes.len();
        self.staging
            .new_output(&self.path)?
            .write(bytes.into())
            .await?;

        let c = &self.counts;
        manifest.manifest_length = length as i64;
        manifest.added_files_count = Some(c.added_files);
        manifest.existing_files_count = Some(c.existing_files);
        manifest.deleted_files_count = Some(c.deleted_files);
        manifest.added_rows_count = Some(c.added_rows);
        manifest.existing_rows_count = Some(c.existing_rows);
        manifest.deleted_rows_count = Some(c.deleted_rows);
        if let Some(min) = c.min_sequence_number {
            manifest.min_sequence_number = min;
        }
        manifest.partitions = Some(
            self.stats
                .into_iter()
                .map(PartitionStats::finish)
                .collect::<iceberg::Result<_>>()?,
        );
        Ok(manifest)
    }
}

/// Refuses a decimal partition value wider than its field's Avro fixed size, naming
/// the file (`decimal_bytes` as [`EntryWriter::iceberg`] computes them).
fn check_decimals(file: &DataFile, decimal_bytes: &[Option<u32>]) -> Result<()> {
    for (value, bytes) in file.partition().iter().zip(decimal_bytes) {
        let (Some(value), Some(bytes)) = (value, bytes) else {
            continue;
        };
        let Some(PrimitiveLiteral::Int128(v)) = value.as_primitive_literal() else {
            continue;
        };
        if !decimal_fits(v, *bytes) {
            return Err(partition_error(
                file,
                format!("decimal partition value {v} does not fit its {bytes}-byte fixed"),
            ));
        }
    }
    Ok(())
}

/// `add`'s result, or an error naming the file when iceberg's writer panicked on it.
fn unless_panicked(path: &str, add: impl FnOnce() -> iceberg::Result<()>) -> Result<()> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(add)) {
        Ok(added) => Ok(added?),
        Err(_) => Err(Error::file(
            path,
            "iceberg's manifest writer cannot encode the entry",
            "invalid manifest entry",
        )),
    }
}

fn partition_error(file: &DataFile, message: String) -> Error {
    Error::file(file.file_path(), message, "invalid partition value")
}

/// A partition field's summary, as iceberg's writer computes it: nulls, NaNs, and the
/// least and greatest other value.
struct PartitionStats {
    ty: PrimitiveType,
    contains_null: bool,
    contains_nan: bool,
    lower: Option<Datum>,
    upper: Option<Datum>,
}

impl PartitionStats {
    fn new(ty: PrimitiveType) -> Self {
        Self {
            ty,
            contains_null: false,
            contains_nan: false,
            lower: None,
            upper: None,
        }
    }

    fn update(&mut self, value: Option<PrimitiveLiteral>) -> std::result::Result<(), String> {
        let Some(value) = value else {
            self.contains_null = true;
            return Ok(());
        };
        let value = datum(&self.ty, &value)?;
        if value.is_nan() {
            self.contains_nan = true;
            return Ok(());
        }
        if self.lower.as_ref().is_none_or(|lower| value < *lower) {
            self.lower = Some(value.clone());
        }
        if self.upper.as_ref().is_none_or(|upper| value > *upper) {
            self.upper = Some(value);
        }
        Ok(())
    }

    fn finish(self) -> iceberg::Result<FieldSummary> {
        Ok(FieldSummary {
            contains_null: self.contains_null,
            contains_nan: Some(self.contains_nan),
            lower_bound: self.lower.map(|d| d.to_bytes()).transpose()?,
            upper_bound: self.upper.map(|d| d.to_bytes()).transpose()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Arc;

    use iceberg::spec::{
        DataFileBuilder, DataFileFormat, Literal, Manifest, ManifestWriterBuilder, NestedField,
        PartitionSpec, Schema, Struct, Transform,
    };
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    use super::*;

    /// A table of one column of each type a partition is written from here.
    fn schema() -> Arc<Schema> {
        let types = [
            ("b", PrimitiveType::Boolean),
            ("i", PrimitiveType::Int),
            ("l", PrimitiveType::Long),
            ("f", PrimitiveType::Float),
            ("d", PrimitiveType::Double),
            ("day", PrimitiveType::Date),
            ("t", PrimitiveType::Time),
            ("ts", PrimitiveType::Timestamp),
            ("tstz", PrimitiveType::Timestamptz),
            ("tsns", PrimitiveType::TimestampNs),
            ("s", PrimitiveType::String),
            ("bin", PrimitiveType::Binary),
            (
                "dec",
                PrimitiveType::Decimal {
                    precision: 9,
                    scale: 2,
                },
            ),
            (
                "dec38",
                PrimitiveType::Decimal {
                    precision: 38,
                    scale: 0,
                },
            ),
            ("fx", PrimitiveType::Fixed(3)),
            ("u", PrimitiveType::Uuid),
        ];
        let fields: Vec<_> = types
            .into_iter()
            .enumerate()
            .map(|(i, (name, ty))| {
                Arc::new(NestedField::optional(
                    i as i32 + 1,
                    name,
                    Type::Primitive(ty),
                ))
            })
            .collect();
        Arc::new(
            Schema::builder()
                .with_fields(fields)
                .build()
                .expect("schema"),
        )
    }

    fn spec(schema: &Arc<Schema>, fields: &[(&str, Transform)]) -> PartitionSpec {
        let mut builder = PartitionSpec::builder(schema.clone()).with_spec_id(0);
        for (source, transform) in fields {
            builder = builder
                .add_partition_field(*source, format!("{source}_p"), *transform)
                .expect("partition field");
        }
        builder.build().expect("spec")
    }

    /// A random value of a partition field's type; one in five is null.
    fn value(rng: &mut StdRng, ty: &PrimitiveType) -> Option<Literal> {
        if rng.random_range(0..5) == 0 {
            return None;
        }
        Some(match ty {
            PrimitiveType::Boolean => Literal::bool(rng.random::<bool>()),
            PrimitiveType::Int | PrimitiveType::Date => Literal::int(rng.random_range(-500..500)),
            PrimitiveType::Long
            | PrimitiveType::Time
            | PrimitiveType::Timestamp
            | PrimitiveType::Timestamptz
            | PrimitiveType::TimestampNs => Literal::long(rng.random_range(-1_000_000..1_000_000)),
            PrimitiveType::Float => match rng.random_range(0..4) {
                0 => Literal::float(f32::NAN),
                _ => Literal::float(rng.random_range(-10.0..10.0)),
            },
            PrimitiveType::Double => match rng.random_range(0..4) {
                0 => Literal::double(f64::NAN),
                _ => Literal::double(rng.random_range(-10.0..10.0)),
            },
            PrimitiveType::String => Literal::string(format!("v{}", rng.random_range(0..300))),
            PrimitiveType::Binary => {
                Literal::binary((0..rng.random_range(0..6)).map(|_| rng.random::<u8>()))
            }
            PrimitiveType::Decimal { precision: 38, .. } => {
                Literal::decimal(rng.random_range(-(10i128.pow(37))..10i128.pow(37)))
            }
            PrimitiveType::Decimal { .. } => Literal::decimal(rng.random_range(-9999..9999)),
            PrimitiveType::Fixed(len) => Literal::fixed((0..*len).map(|_| rng.random::<u8>())),
            PrimitiveType::Uuid => Literal::uuid(uuid::Uuid::from_u128(rng.random())),
            other => panic!("no values of {other}"),
        })
    }

    /// Entries of every kind a conversion writes: data files with statistics, equality
    /// deletes, DVs; added, carried and removed.
    fn entries(
        rng: &mut StdRng,
        content: ManifestContentType,
        partition_type: &StructType,
        n: usize,
    ) -> Vec<(DataFile, u8)> {
        (0..n)
            .map(|i| {
                let partition = Struct::from_iter(
                    partition_type
                        .fields()
                        .iter()
                        .map(|f| value(rng, f.field_type.as_primitive_type().expect("primitive"))),
                );
                let counts = |rng: &mut StdRng| -> HashMap<i32, u64> {
                    (1..rng.random_range(1..6))
                        .map(|k| (k, rng.random_range(0..10_000)))
                        .collect()
                };
                let mut b = DataFileBuilder::default();
                b.partition(partition)
                    .partition_spec_id(0)
                    .record_count(rng.random_range(1..100_000))
                    .file_size_in_bytes(rng.random_range(1..1 << 40));
                let kind = rng.random_range(0..3);
                match (content, kind) {
                    (ManifestContentType::Data, _) => {
                        b.content(DataContentType::Data)
                            .file_path(format!("s3://b/t/data/{i}-{}.parquet", rng.random::<u32>()))
                            .file_format(DataFileFormat::Parquet)
                            .column_sizes(counts(rng))
                            .value_counts(counts(rng))
                            .null_value_counts(counts(rng))
                            .nan_value_counts(counts(rng))
                            .lower_bounds(HashMap::from([
                                (3, Datum::long(rng.random_range(0..100))),
                                (11, Datum::string("a")),
                            ]))
                            .upper_bounds(HashMap::from([(3, Datum::long(1000))]))
                            .split_offsets(Some(vec![4, rng.random_range(5..1000)]))
                            .sort_order_id(0)
                            .first_row_id((kind == 1).then_some(rng.random_range(0..1_000_000)));
                    }
                    (ManifestContentType::Deletes, 0) => {
                        b.content(DataContentType::EqualityDeletes)
                            .file_path(format!("s3://b/t/data/eq-{i}.parquet"))
                            .file_format(DataFileFormat::Parquet)
                            .equality_ids(Some(vec![1, 3]))
                            .key_metadata(Some(vec![1, 2, 3]));
                    }
                    (ManifestContentType::Deletes, _) => {
                        b.content(DataContentType::PositionDeletes)
                            .file_path("s3://b/t/data/dvs.puffin".into())
                            .file_format(DataFileFormat::Puffin)
                            .referenced_data_file(Some(format!("s3://b/t/data/{i}.parquet")))
                            .content_offset(Some(rng.random_range(4..1 << 30)))
                            .content_size_in_bytes(Some(rng.random_range(1..1 << 20)));
                    }
                }
                (b.build().expect("a data file"), rng.random_range(0..3))
            })
            .collect()
    }

    /// The files' Avro blocks, as (count, data): the header is skipped.
    fn blocks(bytes: &[u8]) -> Vec<(i64, Vec<u8>)> {
        let mut at = 4;
        let long = |at: &mut usize| -> i64 {
            let (mut n, mut shift) = (0u64, 0);
            loop {
                let b = bytes[*at];
                *at += 1;
                n |= u64::from(b & 0x7f) << shift;
                shift += 7;
                if b & 0x80 == 0 {
                    return (n >> 1) as i64 ^ -((n & 1) as i64);
                }
            }
        };
        // The metadata map: blocks of string pairs, then 0.
        loop {
            let count = long(&mut at);
            if count == 0 {
                break;
            }
            for _ in 0..count.abs() * 2 {
                let len = long(&mut at) as usize;
                at += len;
            }
        }
        at += 16;
        let mut out = Vec::new();
        while at < bytes.len() {
            let count = long(&mut at);
            let size = long(&mut at) as usize;
            out.push((count, bytes[at..at + size].to_vec()));
            at += size + 16;
        }
        out
    }

    /// The blocks are equal; otherwise where they first differ, briefly.
    fn assert_same_blocks(ours: &[(i64, Vec<u8>)], theirs: &[(i64, Vec<u8>)], what: &str) {
        let counts =
            |b: &[(i64, Vec<u8>)]| b.iter().map(|(c, d)| (*c, d.len())).collect::<Vec<_>>();
        let (a, b): (Vec<u8>, Vec<u8>) = (
            ours.iter().flat_map(|(_, d)| d.clone()).collect(),
            theirs.iter().flat_map(|(_, d)| d.clone()).collect(),
        );
        if let Some(at) = a.iter().zip(&b).position(|(x, y)| x != y) {
            let from = at.saturating_sub(24);
            panic!(
                "{what}: entries differ at byte {at}: ours {:?} theirs {:?}",
                &a[from..(at + 24).min(a.len())],
                &b[from..(at + 24).min(b.len())]
            );
        }
        assert_eq!(a.len(), b.len(), "{what}: lengths");
        assert_eq!(counts(ours), counts(theirs), "{what}: blocks");
    }

    struct Written {
        bytes: Vec<u8>,
        manifest: ManifestFile,
        fast: bool,
    }

    const PATH: &str = "memory:///t/metadata/m.avro";

    /// A writer of a manifest of `spec` at [`PATH`] in memory: eqdv's (`ours`, which may
    /// still be iceberg's for some partition types) or iceberg's.
    fn writer(
        spec: &PartitionSpec,
        schema: &Arc<Schema>,
        content: ManifestContentType,
        ours: bool,
    ) -> (EntryWriter, FileIO) {
        let staging = FileIO::new_with_memory();
        let partition_type = spec.partition_type(schema).expect("partition type");
        let builder = ManifestWriterBuilder::new(
            staging.new_output(PATH).expect("output"),
            Some(77),
            schema.clone(),
            spec.clone(),
        );
        let header = match content {
            ManifestContentType::Data => builder.build_v3_data(),
            ManifestContentType::Deletes => builder.build_v3_deletes(),
        };
        let writer = if ours {
            EntryWriter::new(header, PATH, &staging, 77, content, &partition_type)
        } else {
            EntryWriter::iceberg(header, &partition_type)
        };
        (writer, staging)
    }

    async fn write(
        spec: &PartitionSpec,
        schema: &Arc<Schema>,
        content: ManifestContentType,
        files: &[(DataFile, u8)],
        ours: bool,
    ) -> Written {
        let (mut writer, staging) = writer(spec, schema, content, ours);
        let fast = matches!(writer, EntryWriter::Fast(_));
        for (i, (file, how)) in files.iter().enumerate() {
            let seq = 3 + i as i64 % 5;
            match how {
                0 => writer.add_file(file.clone()).expect("add"),
                1 => writer
                    .carry(file.clone(), 11, seq, seq - 1, false)
                    .expect("carry"),
                _ => writer
                    .carry(file.clone(), 11, seq, seq, true)
                    .expect("remove"),
            }
        }
        let manifest = writer.finish(PATH).await.expect("finish");
        let bytes = staging
            .new_input(PATH)
            .expect("input")
            .read()
            .await
            .expect("read");
        Written {
            bytes: bytes.to_vec(),
            manifest,
            fast,
        }
    }

    /// Byte for byte the entries iceberg's writer writes, in the same blocks, and the
    /// same entry for the manifest list; iceberg's reader reads the same entries back.
    #[tokio::test]
    async fn entries_are_encoded_as_iceberg_encodes_them() {
        let schema = schema();
        let specs = [
            vec![],
            vec![("l", Transform::Identity)],
            vec![("l", Transform::Bucket(16)), ("s", Transform::Identity)],
            vec![("day", Transform::Identity), ("ts", Transform::Day)],
            vec![
                ("b", Transform::Identity),
                ("i", Transform::Identity),
                ("f", Transform::Identity),
                ("d", Transform::Identity),
                ("t", Transform::Identity),
                ("tstz", Transform::Hour),
                ("tsns", Transform::Identity),
                ("bin", Transform::Identity),
                ("s", Transform::Truncate(2)),
            ],
            vec![
                ("dec", Transform::Identity),
                ("dec38", Transform::Identity),
                ("fx", Transform::Identity),
            ],
            vec![
                ("dec", Transform::Bucket(8)),
                ("dec38", Transform::Truncate(10)),
            ],
        ];
        let mut rng = StdRng::seed_from_u64(7);
        for fields in &specs {
            let spec = spec(&schema, fields);
            let partition_type = spec.partition_type(&schema).expect("partition type");
            for content in [ManifestContentType::Data, ManifestContentType::Deletes] {
                // Enough entries for several blocks.
                let files = entries(&mut rng, content, &partition_type, 400);
                let theirs = write(&spec, &schema, content, &files, false).await;
                let ours = write(&spec, &schema, content, &files, true).await;
                let what = format!("{fields:?} {content:?}");
                assert!(ours.fast, "{what}: not written by the encoder");
                let (their_blocks, our_blocks) = (blocks(&theirs.bytes), blocks(&ours.bytes));
                assert!(their_blocks.len() > 1, "{what}: one block");
                assert_same_blocks(&our_blocks, &their_blocks, &what);
                assert_eq!(ours.manifest, theirs.manifest, "{what}: manifest file");
                // iceberg-rust's reader reads back what it wrote, but for nanosecond
                // timestamps in a partition, which it cannot read at all.
                match (
                    Manifest::parse_avro(&ours.bytes),
                    Manifest::parse_avro(&theirs.bytes),
                ) {
                    (Ok(read), Ok(expected)) => {
                        assert_eq!(read.entries(), expected.entries(), "{what}: entries")
                    }
                    (Err(ours), Err(theirs)) => {
                        assert_eq!(ours.to_string(), theirs.to_string(), "{what}");
                        assert!(ours.to_string().contains("timestamp_ns"), "{what}: {ours}");
                    }
                    (ours, theirs) => {
                        panic!("{what}: read {:?} against {:?}", ours.err(), theirs.err())
                    }
                }
            }
        }
    }

    /// A partition of UUIDs goes through iceberg's writer (see the module's doc), which
    /// cannot encode one: the manifest is refused, named, and nothing is written.
    #[tokio::test]
    async fn uuid_partitions_are_refused_naming_the_manifest() {
        let schema = schema();
        let spec = spec(&schema, &[("u", Transform::Identity)]);
        let (mut writer, staging) = writer(&spec, &schema, ManifestContentType::Data, true);
        assert!(!matches!(writer, EntryWriter::Fast(_)));
        let id = Struct::from_iter([Some(Literal::uuid(uuid::Uuid::from_u128(7)))]);
        writer
            .add_file(data_file("s3://b/t/data/u.parquet", id, 1))
            .expect("taken");
        let err = writer.finish(PATH).await.expect_err("refused").to_string();
        assert!(err.contains("m.avro"), "{err}");
        assert!(
            !staging.exists(PATH).await.expect("exists"),
            "a file was left"
        );
    }

    /// A value of another type than its partition field's is refused, naming the file.
    #[tokio::test]
    async fn a_partition_value_of_the_wrong_type_is_refused() {
        let schema = schema();
        let spec = spec(&schema, &[("l", Transform::Identity)]);
        let (mut writer, _) = writer(&spec, &schema, ManifestContentType::Data, true);
        let odd = Struct::from_iter([Some(Literal::string("x"))]);
        let file = data_file("s3://b/t/data/odd.parquet", odd, 1);
        let err = writer.add_file(file).expect_err("refused").to_string();
        assert!(err.contains("odd.parquet"), "{err}");
    }

    /// A data file of `records` rows in `partition`.
    fn data_file(path: &str, partition: Struct, records: u64) -> DataFile {
        DataFileBuilder::default()
            .content(DataContentType::Data)
            .file_path(path.into())
            .file_format(DataFileFormat::Parquet)
            .partition(partition)
            .record_count(records)
            .file_size_in_bytes(1)
            .build()
            .expect("a data file")
    }

    /// A decimal wider than its Avro fixed size (which makes apache-avro panic under
    /// iceberg's writer) and a fixed value of another length are refused, naming the
    /// file, by eqdv's encoder and before iceberg's writer alike.
    #[tokio::test]
    async fn values_that_do_not_fit_their_fixed_are_refused_naming_the_file() {
        let schema = schema();
        let wide = Literal::decimal(i128::from(i64::MAX));
        let cases = [
            ("dec", wide, "4-byte"),
            ("fx", Literal::fixed([1, 2]), "2 bytes"),
        ];
        for (column, value, why) in cases {
            let spec = spec(&schema, &[(column, Transform::Identity)]);
            for ours in [true, false] {
                let (mut writer, _) = writer(&spec, &schema, ManifestContentType::Data, ours);
                assert_eq!(matches!(writer, EntryWriter::Fast(_)), ours, "{column}");
                let file = data_file(
                    "s3://b/t/data/wide.parquet",
                    Struct::from_iter([Some(value.clone())]),
                    1,
                );
                let added = writer.add_file(file);
                if !ours && column == "fx" {
                    // iceberg's writer takes it; the file it writes fails.
                    added.expect("iceberg's writer takes the entry");
                    let err = writer.finish(PATH).await.expect_err("refused");
                    assert!(err.to_string().contains("m.avro"), "{err}");
                    continue;
                }
                let err = added.expect_err("refused").to_string();
                assert!(err.contains("wide.parquet") && err.contains(why), "{err}");
            }
        }
    }

    /// Row counts other writers stated are summed saturating for the manifest list.
    #[tokio::test]
    async fn row_counts_past_a_long_do_not_wrap() {
        let schema = schema();
        let spec = spec(&schema, &[]);
        let files: Vec<_> = (0..3)
            .map(|i| {
                let path = format!("s3://b/t/data/{i}.parquet");
                (data_file(&path, Struct::empty(), i64::MAX as u64), 1)
            })
            .collect();
        let written = write(&spec, &schema, ManifestContentType::Data, &files, true).await;
        assert!(written.fast);
        assert_eq!(written.manifest.existing_rows_count, Some(u64::MAX));
    }
}
