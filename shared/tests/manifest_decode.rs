//! eqdv's fast manifest decoder against iceberg-rust's: the same entries for every
//! partition type it accepts and every Avro codec, a fallback for what it declines, and
//! errors that name the manifest. (Generated tables of every layout are compared in
//! convert.rs; Java's manifests in tests/interop.rs.)

use std::collections::HashMap;
use std::sync::Arc;

use eqdv::manifest_decode::{decode_manifest, load_manifest};
use iceberg::io::FileIO;
use iceberg::spec::{
    DataContentType, DataFileBuilder, DataFileFormat, Datum, Literal, Manifest, ManifestEntry,
    ManifestFile, ManifestWriterBuilder, NestedField, PartitionSpec, PrimitiveType, Schema, Struct,
    Transform, Type,
};

fn schema() -> Schema {
    let fields = [
        (1, "b", PrimitiveType::Boolean),
        (2, "i", PrimitiveType::Int),
        (3, "l", PrimitiveType::Long),
        (4, "f", PrimitiveType::Float),
        (5, "d", PrimitiveType::Double),
        (6, "day", PrimitiveType::Date),
        (7, "ts", PrimitiveType::Timestamp),
        (8, "tstz", PrimitiveType::Timestamptz),
        (9, "s", PrimitiveType::String),
        (10, "bin", PrimitiveType::Binary),
        (11, "t", PrimitiveType::Time),
    ];
    Schema::builder()
        .with_schema_id(0)
        .with_fields(
            fields.into_iter().map(|(id, name, ty)| {
                Arc::new(NestedField::optional(id, name, Type::Primitive(ty)))
            }),
        )
        .build()
        .expect("schema")
}

/// Identity partitions on every primitive type the fast path converts, plus a bucket.
fn spec(schema: &Schema) -> PartitionSpec {
    let mut b = PartitionSpec::builder(schema.clone()).with_spec_id(3);
    for name in [
        "b", "i", "l", "f", "d", "day", "ts", "tstz", "s", "bin", "t",
    ] {
        b = b
            .add_partition_field(name, format!("{name}_p"), Transform::Identity)
            .expect("partition field");
    }
    b.add_partition_field("s", "s_bucket", Transform::Bucket(8))
        .expect("bucket")
        .build()
        .expect("spec")
}

fn partition(n: i64) -> Struct {
    // Every other file has nulls in half the fields.
    let null = |v: Literal| if n % 2 == 1 { None } else { Some(v) };
    Struct::from_iter([
        Some(Literal::bool(n % 3 == 0)),
        null(Literal::int(n as i32 - 5)),
        Some(Literal::long(n * 1_000_000_007)),
        null(Literal::float(n as f32 * 0.5 - 1.25)),
        Some(Literal::double(-(n as f64) / 3.0)),
        null(Literal::date(19_000 + n as i32)),
        Some(Literal::timestamp(1_700_000_000_000_000 + n)),
        null(Literal::timestamptz(-n)),
        Some(Literal::string(format!("région-{n}"))),
        null(Literal::binary(vec![0, 255, n as u8])),
        Some(Literal::time(n * 1_000)),
        Some(Literal::int((n % 8) as i32)),
    ])
}

async fn write_manifest(
    file_io: &FileIO,
    dir: &std::path::Path,
    content: DataContentType,
) -> ManifestFile {
    let schema = schema();
    let spec = spec(&schema);
    let path = format!("{}/m-{content:?}.avro", dir.display());
    let builder = ManifestWriterBuilder::new(
        file_io.new_output(&path).expect("output"),
        Some(77),
        Arc::new(schema),
        spec,
    );
    let mut writer = match content {
        DataContentType::Data => builder.build_v3_data(),
        _ => builder.build_v3_deletes(),
    };
    for n in 0..40i64 {
        let mut f = DataFileBuilder::default();
        f.content(content)
            .file_path(format!("s3://bucket/t/data/{n}.parquet"))
            .file_format(DataFileFormat::Parquet)
            .partition(partition(n))
            .partition_spec_id(3)
            .record_count(100 + n as u64)
            .file_size_in_bytes(4096 + n as u64)
            .column_sizes(HashMap::from([(3, 10), (9, 20)]))
            .value_counts(HashMap::from([(3, 100), (9, 100)]))
            .null_value_counts(HashMap::from([(3, 0)]))
            .nan_value_counts(HashMap::from([(4, n as u64)]))
            .lower_bounds(HashMap::from([
                (3, Datum::long(n)),
                (9, Datum::string(format!("a{n}"))),
                (5, Datum::double(-1.5)),
            ]))
            .upper_bounds(HashMap::from([(3, Datum::long(n + 99))]))
            .split_offsets(Some(vec![4, 1024 + n]))
            .sort_order_id(0);
        match content {
            DataContentType::EqualityDeletes => {
                f.equality_ids(Some(vec![3, 9]));
            }
            DataContentType::PositionDeletes => {
                f.file_format(DataFileFormat::Puffin)
                    .referenced_data_file(Some(format!("s3://bucket/t/data/{n}.parquet")))
                    .content_offset(Some(4 + n * 50))
                    .content_size_in_bytes(Some(50));
            }
            DataContentType::Data => {
                f.first_row_id(Some(n * 100))
                    .key_metadata(Some(vec![1, 2, 3]));
            }
        }
        let file = f.build().expect("data file");
        match n % 3 {
            0 => writer.add_file(file, -1),
            1 => writer.add_existing_file(file, 55, 2, Some(2)),
            _ => writer.add_delete_file(file, 3, Some(1)),
        }
        .expect("add entry");
    }
    writer.write_manifest_file().await.expect("write manifest")
}

/// The entries iceberg-rust's own loader gives (inherited values filled in).
async fn iceberg_loaded_entries(file_io: &FileIO, m: &ManifestFile) -> Vec<ManifestEntry> {
    let manifest = m.load_manifest(file_io).await.expect("iceberg load");
    manifest
        .entries()
        .iter()
        .map(|e| e.as_ref().clone())
        .collect()
}

fn assert_alike(bytes: &[u8], reference: &Manifest) {
    let (metadata, entries) = decode_manifest(bytes).expect("fast decoder declined");
    assert!(&metadata == reference.metadata(), "metadata differs");
    assert_eq!(entries.len(), reference.entries().len());
    for (fast, slow) in entries.iter().zip(reference.entries()) {
        assert_eq!(fast, slow.as_ref());
    }
}

#[tokio::test]
async fn every_partition_type_and_content_decodes_like_iceberg() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file_io = FileIO::new_with_fs();
    for content in [
        DataContentType::Data,
        DataContentType::EqualityDeletes,
        DataContentType::PositionDeletes,
    ] {
        let m = write_manifest(&file_io, dir.path(), content).await;
        let bytes = std::fs::read(&m.manifest_path).expect("read");
        let reference = Manifest::parse_avro(&bytes).expect("iceberg parse");
        assert_eq!(reference.entries().len(), 40);
        assert_alike(&bytes, &reference);
        // Entries left out as they are decoded: the same as decoded, then filtered.
        eqdv_test_support::manifests::assert_kept_entries_alike(&m, &bytes);

        // Through load_manifest, inherited values match iceberg's own loader.
        let (_, ours) = load_manifest(&file_io, &m).await.expect("load");
        assert_eq!(ours, iceberg_loaded_entries(&file_io, &m).await);
    }
}

// --- Avro container rewriting, to produce the codecs iceberg-rust does not write. ---

fn zigzag(v: i64, out: &mut Vec<u8>) {
    let mut n = ((v << 1) ^ (v >> 63)) as u64;
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn varint(bytes: &[u8], pos: &mut usize) -> i64 {
    let (mut n, mut shift) = (0u64, 0);
    loop {
        let b = bytes[*pos];
        *pos += 1;
        n |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return ((n >> 1) as i64) ^ -((n & 1) as i64);
        }
        shift += 7;
    }
}

type Metadata = Vec<(String, Vec<u8>)>;
type Blocks = Vec<(i64, Vec<u8>)>;

/// Splits a null-codec container into its metadata, sync marker and block payloads.
fn split(bytes: &[u8]) -> (Metadata, Vec<u8>, Blocks) {
    assert_eq!(&bytes[..4], b"Obj\x01");
    let mut pos = 4;
    let mut meta = Vec::new();
    loop {
        let count = varint(bytes, &mut pos);
        if count == 0 {
            break;
        }
        for _ in 0..count {
            let n = varint(bytes, &mut pos) as usize;
            let key = String::from_utf8(bytes[pos..pos + n].to_vec()).expect("key");
            pos += n;
            let n = varint(bytes, &mut pos) as usize;
            meta.push((key, bytes[pos..pos + n].to_vec()));
            pos += n;
        }
    }
    let sync = bytes[pos..pos + 16].to_vec();
    pos += 16;
    let mut blocks = Vec::new();
    while pos < bytes.len() {
        let count = varint(bytes, &mut pos);
        let size = varint(bytes, &mut pos) as usize;
        blocks.push((count, bytes[pos..pos + size].to_vec()));
        pos += size + 16;
    }
    (meta, sync, blocks)
}

fn join(
    meta: &[(String, Vec<u8>)],
    codec: &str,
    sync: &[u8],
    blocks: &[(i64, Vec<u8>)],
    compress: impl Fn(&[u8]) -> Vec<u8>,
) -> Vec<u8> {
    let mut out = b"Obj\x01".to_vec();
    zigzag(meta.len() as i64, &mut out);
    for (k, v) in meta {
        let v = if k == "avro.codec" {
            codec.as_bytes()
        } else {
            v.as_slice()
        };
        zigzag(k.len() as i64, &mut out);
        out.extend_from_slice(k.as_bytes());
        zigzag(v.len() as i64, &mut out);
        out.extend_from_slice(v);
    }
    out.push(0);
    out.extend_from_slice(sync);
    for (count, data) in blocks {
        let data = compress(data);
        zigzag(*count, &mut out);
        zigzag(data.len() as i64, &mut out);
        out.extend_from_slice(&data);
        out.extend_from_slice(sync);
    }
    out
}

#[tokio::test]
async fn every_avro_codec_decodes_alike() {
    use std::io::Write;
    let dir = tempfile::tempdir().expect("tempdir");
    let file_io = FileIO::new_with_fs();
    let m = write_manifest(&file_io, dir.path(), DataContentType::Data).await;
    let bytes = std::fs::read(&m.manifest_path).expect("read");
    let reference = Manifest::parse_avro(&bytes).expect("iceberg parse");
    let (meta, sync, blocks) = split(&bytes);
    assert!(
        meta.iter().any(|(k, v)| k == "avro.codec" && v == b"null"),
        "expected iceberg-rust to write the null codec"
    );

    let deflate = join(&meta, "deflate", &sync, &blocks, |d| {
        let mut e = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::best());
        e.write_all(d).expect("deflate");
        e.finish().expect("deflate")
    });
    // apache-avro reads deflate too: the rewritten file is a valid container.
    assert_eq!(
        Manifest::parse_avro(&deflate)
            .expect("iceberg parses deflate")
            .entries(),
        reference.entries()
    );
    assert_alike(&deflate, &reference);

    let snappy = join(&meta, "snappy", &sync, &blocks, |d| {
        let mut c = snap::raw::Encoder::new().compress_vec(d).expect("snappy");
        c.extend_from_slice(&crc32fast::hash(d).to_be_bytes());
        c
    });
    assert_alike(&snappy, &reference);

    let zstd = join(&meta, "zstandard", &sync, &blocks, |d| {
        zstd::encode_all(d, 3).expect("zstd")
    });
    assert_alike(&zstd, &reference);

    // A codec it does not know is declined (and left to iceberg-rust), as is a corrupt
    // snappy checksum.
    let xz = join(&meta, "xz", &sync, &blocks, |d| d.to_vec());
    let err = decode_manifest(&xz).expect_err("xz must be declined");
    assert!(err.to_string().contains("xz"), "{err}");
    let bad_crc = join(&meta, "snappy", &sync, &blocks, |d| {
        let mut c = snap::raw::Encoder::new().compress_vec(d).expect("snappy");
        c.extend_from_slice(&(crc32fast::hash(d) ^ 1).to_be_bytes());
        c
    });
    assert!(decode_manifest(&bad_crc).is_err());
}

#[tokio::test]
async fn a_corrupt_manifest_is_an_error_naming_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file_io = FileIO::new_with_fs();
    let m = write_manifest(&file_io, dir.path(), DataContentType::Data).await;
    let bytes = std::fs::read(&m.manifest_path).expect("read");
    // Truncated mid-block: both decoders fail, and the error names the file.
    std::fs::write(&m.manifest_path, &bytes[..bytes.len() - 100]).expect("truncate");
    let err = load_manifest(&file_io, &m).await.expect_err("truncated");
    assert!(
        err.to_string().contains(&m.manifest_path),
        "error does not name the manifest: {err}"
    );
    // Not Avro at all.
    std::fs::write(&m.manifest_path, b"PAR1 not a manifest").expect("write");
    let err = load_manifest(&file_io, &m).await.expect_err("garbage");
    assert!(err.to_string().contains(&m.manifest_path), "{err}");
}

#[tokio::test]
async fn a_v1_manifest_is_left_to_iceberg_and_still_loads() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file_io = FileIO::new_with_fs();
    let schema = schema();
    let spec = PartitionSpec::builder(schema.clone())
        .with_spec_id(0)
        .build()
        .expect("spec");
    let path = format!("{}/v1.avro", dir.path().display());
    let mut writer = ManifestWriterBuilder::new(
        file_io.new_output(&path).expect("output"),
        Some(9),
        Arc::new(schema),
        spec,
    )
    .build_v1();
    for n in 0..3u64 {
        let file = DataFileBuilder::default()
            .content(DataContentType::Data)
            .file_path(format!("/t/{n}.parquet"))
            .file_format(DataFileFormat::Parquet)
            .partition(Struct::empty())
            .record_count(n + 1)
            .file_size_in_bytes(100)
            .build()
            .expect("file");
        writer.add_file(file, -1).expect("add");
    }
    let m = writer.write_manifest_file().await.expect("write");
    let bytes = std::fs::read(&path).expect("read");
    let err = decode_manifest(&bytes).expect_err("v1 is declined");
    assert!(err.to_string().contains("v1"), "{err}");
    let (_, ours) = load_manifest(&file_io, &m).await.expect("falls back");
    assert_eq!(ours, iceberg_loaded_entries(&file_io, &m).await);
    assert_eq!(ours.len(), 3);
}

/// A manifest whose spec is on a field its own schema dropped (Java writes one when it
/// rewrites entries of an older spec after the drop): neither decoder can type its
/// partition values, and the load refuses it as that field, naming the manifest.
#[tokio::test]
async fn a_partition_source_its_schema_dropped_is_refused_naming_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file_io = FileIO::new_with_fs();
    let m = write_manifest(&file_io, dir.path(), DataContentType::Data).await;
    let bytes = std::fs::read(&m.manifest_path).expect("read");
    let (mut meta, sync, blocks) = split(&bytes);
    let schema = meta
        .iter_mut()
        .find(|(k, _)| k == "schema")
        .expect("a schema in the manifest's metadata");
    let mut json: serde_json::Value = serde_json::from_slice(&schema.1).expect("schema json");
    let fields = json["fields"].as_array_mut().expect("fields");
    fields.retain(|f| f["id"] != 3);
    schema.1 = serde_json::to_vec(&json).expect("json");
    std::fs::write(
        &m.manifest_path,
        join(&meta, "null", &sync, &blocks, <[u8]>::to_vec),
    )
    .expect("write");
    let err = load_manifest(&file_io, &m).await.expect_err("refused");
    match &err {
        eqdv::Error::FieldUnresolvable {
            path,
            field,
            field_id,
            ..
        } => {
            assert_eq!(path, &m.manifest_path);
            assert_eq!((field.as_str(), *field_id), ("l_p", 3));
        }
        other => panic!("not refused as the field: {other}"),
    }
}
