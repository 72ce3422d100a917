//! The DV blob codec against the Java reference's golden bytes, and DV Puffin files
//! written, read back and validated through FileIO.

use std::path::PathBuf;

use eqdv::dv::{
    DV_MAGIC, DvError, MAX_DV_KEY, deserialize_dv, deserialize_portable_treemap, serialize_dv,
};
use eqdv::puffin::{
    DvBlobInput, DvEntryCheck, POS_FIELD_ID, WrittenPuffin, encode_dv_puffin, read_dv,
    read_puffin_footer, validate_dv_entries, validate_dv_entry, validate_dv_in, write_dv_puffin,
};
use iceberg::io::FileIO;
use iceberg::puffin::{CompressionCodec, PuffinReader};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use roaring::RoaringTreemap;

fn golden(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("testdata/dv")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// P(b, c, v) = b * 2^32 + c * 2^16 + v, as in testdata/dv/README.md.
fn p(b: u64, c: u64, v: u64) -> u64 {
    (b << 32) + (c << 16) + v
}

fn set(values: impl IntoIterator<Item = u64>) -> RoaringTreemap {
    values.into_iter().collect()
}

/// Expected positions of every `*-position-index.bin` (README table; range ends exclusive).
fn position_index_goldens() -> Vec<(&'static str, RoaringTreemap)> {
    let mut all = set([p(0, 0, 5), p(0, 0, 7), p(1, 0, 10), p(1, 0, 20)]);
    all.insert_range(p(0, 1, 1)..p(0, 1, 1000));
    all.insert_range(p(0, 2, 1)..p(0, 2, 65535));
    all.insert_range(p(1, 1, 10)..p(1, 1, 500));
    all.insert_range(p(1, 2, 1)..p(1, 2, 65535));
    vec![
        ("empty-position-index.bin", RoaringTreemap::new()),
        (
            "small-alternating-values-position-index.bin",
            set([1, 3, 5, 7, 9]),
        ),
        (
            "small-and-large-values-position-index.bin",
            set([100, 101, 2_147_483_747, 2_147_483_748]),
        ),
        ("all-container-types-position-index.bin", all),
    ]
}

#[test]
fn golden_blobs_decode_to_the_listed_positions() {
    let expected_cardinalities = [0, 5, 4, 132_561];
    for ((name, expected), cardinality) in position_index_goldens()
        .into_iter()
        .zip(expected_cardinalities)
    {
        let decoded = deserialize_dv(&golden(name)).unwrap();
        assert_eq!(decoded.len(), cardinality, "{name}");
        assert_eq!(decoded, expected, "{name}");
    }
}

#[test]
fn golden_blobs_reencode_byte_for_byte() {
    for (name, expected) in position_index_goldens() {
        let bytes = golden(name);
        let reencoded = serialize_dv(&deserialize_dv(&bytes).unwrap()).unwrap();
        assert_eq!(deserialize_dv(&reencoded).unwrap(), expected, "{name}");
        // Same run-length optimization as the Java writer, so the same bytes.
        assert_eq!(reencoded, bytes, "{name}");
    }
}

#[test]
fn all_container_types_golden_uses_run_containers() {
    let bytes = golden("all-container-types-position-index.bin");
    // Vector starts at 8: u64 count, u32 key, then the 32-bit bitmap's cookie.
    assert_eq!(u16::from_le_bytes([bytes[20], bytes[21]]), 12347);
    let encoded = serialize_dv(&deserialize_dv(&bytes).unwrap()).unwrap();
    assert_eq!(u16::from_le_bytes([encoded[20], encoded[21]]), 12347);
}

#[test]
fn small_sets_round_trip() {
    let cases = [
        set([]),
        set([0]),
        set([u64::from(u32::MAX)]),
        set([1 << 32]),
        set([(u64::from(MAX_DV_KEY) << 32) | u64::from(u32::MAX)]),
        set([0, 1, 2, 65_535, 65_536, 1 << 40]),
        set(0..100_000),
    ];
    for positions in cases {
        let blob = serialize_dv(&positions).unwrap();
        assert_eq!(&blob[4..8], &DV_MAGIC);
        let len = u32::from_be_bytes(blob[..4].try_into().unwrap()) as usize;
        assert_eq!(len, blob.len() - 8);
        assert_eq!(deserialize_dv(&blob).unwrap(), positions);
    }
}

#[test]
fn random_sets_round_trip() {
    let mut rng = StdRng::seed_from_u64(0x00e9_d0dd);
    for round in 0..200 {
        let mut positions = RoaringTreemap::new();
        let keys = rng.random_range(1..4u64);
        for _ in 0..rng.random_range(0..2_000) {
            let key = rng.random_range(0..keys) * rng.random_range(0..=u64::from(MAX_DV_KEY)) / 3;
            let low = if rng.random_bool(0.5) {
                rng.random_range(0..4_096)
            } else {
                rng.random::<u32>().into()
            };
            positions.insert((key << 32) | low);
        }
        if rng.random_bool(0.3) {
            let start = rng.random_range(0..1u64 << 34);
            positions.insert_range(start..start + rng.random_range(1..200_000));
        }
        let blob = serialize_dv(&positions).unwrap();
        assert_eq!(deserialize_dv(&blob).unwrap(), positions, "round {round}");
    }
}

#[test]
fn portable_64bit_goldens() {
    for (name, expected) in [
        ("64mapempty.bin", RoaringTreemap::new()),
        ("64map32bitvals.bin", set(0..10)),
        (
            "64mapspreadvals.bin",
            set((0..10).flat_map(|key| (0..10).map(move |v| (key << 32) | v))),
        ),
    ] {
        let bytes = golden(name);
        let decoded = deserialize_portable_treemap(&bytes).unwrap();
        assert_eq!(decoded, expected, "{name}");
        let mut reencoded = Vec::new();
        decoded.serialize_into(&mut reencoded).unwrap();
        assert_eq!(reencoded, bytes, "{name}");
    }
}

#[test]
fn portable_64bit_high_keys_are_rejected() {
    // The true file: 11 bitmaps under the 11 highest keys, each holding the 11 highest
    // 32-bit values. Roaring itself reads it and writes the same bytes back, so the file
    // is intact and the rejection below is for its keys, not for mangled bytes.
    let bytes = golden("64maphighvals.bin");
    let top = u64::from(u32::MAX);
    let expected =
        set((top - 10..=top).flat_map(|key| (top - 10..=top).map(move |v| (key << 32) | v)));
    let raw = RoaringTreemap::deserialize_from(&bytes[..]).unwrap();
    assert_eq!(raw, expected);
    let mut reencoded = Vec::new();
    raw.serialize_into(&mut reencoded).unwrap();
    assert_eq!(reencoded, bytes);

    let err = deserialize_portable_treemap(&bytes).unwrap_err();
    assert!(
        matches!(err, DvError::KeyOutOfRange { key } if key > MAX_DV_KEY),
        "{err:?}"
    );
    assert!(err.to_string().contains("key"), "{err}");
}

#[test]
fn key_range_is_enforced_both_ways() {
    let bad = (u64::from(MAX_DV_KEY) + 1) << 32;
    let err = serialize_dv(&set([1, bad])).unwrap_err();
    assert!(
        matches!(err, DvError::PositionOutOfRange { position, key } if position == bad && key == MAX_DV_KEY + 1),
        "{err:?}"
    );
    assert!(err.to_string().contains(&bad.to_string()), "{err}");

    // Encoded by roaring directly, bypassing serialize_dv's check.
    let mut vector = Vec::new();
    set([bad]).serialize_into(&mut vector).unwrap();
    let err = deserialize_portable_treemap(&vector).unwrap_err();
    assert!(
        matches!(err, DvError::KeyOutOfRange { key } if key == MAX_DV_KEY + 1),
        "{err:?}"
    );
}

#[test]
fn flipped_crc_is_rejected() {
    let mut blob = golden("small-alternating-values-position-index.bin");
    *blob.last_mut().unwrap() ^= 0xFF;
    let err = deserialize_dv(&blob).unwrap_err();
    assert!(
        matches!(err, DvError::CrcMismatch { stored, computed } if stored != computed),
        "{err:?}"
    );
    assert!(err.to_string().contains("CRC"), "{err}");
}

#[test]
fn bad_magic_is_rejected() {
    let mut blob = golden("small-alternating-values-position-index.bin");
    blob[5] = 0x00;
    let err = deserialize_dv(&blob).unwrap_err();
    assert!(
        matches!(err, DvError::BadMagic { found } if found == [0xD1, 0x00, 0x39, 0x64]),
        "{err:?}"
    );
    assert!(err.to_string().contains("magic"), "{err}");
}

#[test]
fn wrong_length_field_is_rejected() {
    let mut blob = golden("small-alternating-values-position-index.bin");
    blob[3] += 1;
    let err = deserialize_dv(&blob).unwrap_err();
    assert!(
        matches!(
            err,
            DvError::LengthMismatch {
                expected: 42,
                found: 43,
                blob_size: 50
            }
        ),
        "{err:?}"
    );
}

#[test]
fn truncated_blobs_are_rejected() {
    let blob = golden("small-and-large-values-position-index.bin");
    let err = deserialize_dv(&blob[..blob.len() - 1]).unwrap_err();
    assert!(matches!(err, DvError::LengthMismatch { .. }), "{err:?}");
    assert!(err.to_string().contains("truncated"), "{err}");
    for len in [0, 3, 8, 11] {
        let err = deserialize_dv(&blob[..len]).unwrap_err();
        assert!(
            matches!(err, DvError::BlobTooShort { expected: 12, found } if found == len),
            "{err:?}"
        );
    }
    // Consistent framing around a cut-off vector still fails on the vector itself.
    let vector = &blob[8..blob.len() - 4];
    let err = deserialize_portable_treemap(&vector[..vector.len() - 2]).unwrap_err();
    assert!(matches!(err, DvError::MalformedBitmap { .. }), "{err:?}");
}

#[test]
fn trailing_and_unordered_vectors_are_rejected() {
    let mut vector = Vec::new();
    set([1, 2]).serialize_into(&mut vector).unwrap();
    vector.push(0);
    let err = deserialize_portable_treemap(&vector).unwrap_err();
    assert!(
        matches!(err, DvError::TrailingBytes { found: 1 }),
        "{err:?}"
    );

    // Two bitmaps with keys 5 then 3.
    let mut low = Vec::new();
    roaring::RoaringBitmap::from_iter([7u32])
        .serialize_into(&mut low)
        .unwrap();
    let mut vector = 2u64.to_le_bytes().to_vec();
    for key in [5u32, 3] {
        vector.extend(key.to_le_bytes());
        vector.extend(&low);
    }
    let err = deserialize_portable_treemap(&vector).unwrap_err();
    assert!(
        matches!(
            err,
            DvError::KeysNotAscending {
                previous: 5,
                key: 3
            }
        ),
        "{err:?}"
    );
}

#[test]
fn empty_bitmaps_for_key_gaps_are_accepted() {
    // Java writes empty bitmaps for keys between used ones.
    let mut vector = 3u64.to_le_bytes().to_vec();
    for (key, values) in [(0u32, vec![1u32]), (1, vec![]), (2, vec![9])] {
        vector.extend(key.to_le_bytes());
        roaring::RoaringBitmap::from_iter(values)
            .serialize_into(&mut vector)
            .unwrap();
    }
    let decoded = deserialize_portable_treemap(&vector).unwrap();
    assert_eq!(decoded, set([1, (2 << 32) | 9]));
}

// ---------------------------------------------------------------- Puffin

fn three_dvs() -> Vec<DvBlobInput> {
    let mut big = set([p(0, 0, 5), p(1, 2, 3)]);
    big.insert_range(10..50_000);
    vec![
        DvBlobInput {
            referenced_data_file: "s3://bucket/t/data/a.parquet".into(),
            positions: set([1, 3, 5, 7, 9]),
        },
        DvBlobInput {
            referenced_data_file: "s3://bucket/t/data/b.parquet".into(),
            positions: big,
        },
        DvBlobInput {
            referenced_data_file: "s3://bucket/t/data/c.parquet".into(),
            positions: set([0]),
        },
    ]
}

async fn write_three(dir: &tempfile::TempDir) -> (FileIO, WrittenPuffin, Vec<DvBlobInput>) {
    let file_io = FileIO::new_with_fs();
    let location = format!("file://{}/dvs/0001-dv.puffin", dir.path().display());
    let dvs = three_dvs();
    let written = write_dv_puffin(&file_io, &location, &dvs).await.unwrap();
    (file_io, written, dvs)
}

/// One DV of 300,000 scattered positions: a file far larger than a footer's read.
fn one_big_scattered_dv(seed: u64) -> Vec<DvBlobInput> {
    let mut rng = StdRng::seed_from_u64(seed);
    vec![DvBlobInput {
        referenced_data_file: "s3://bucket/t/data/big.parquet".into(),
        positions: (0..300_000)
            .map(|_| rng.random_range(0..1u64 << 34))
            .collect(),
    }]
}

fn entry<'a>(written: &'a WrittenPuffin, index: usize) -> DvEntryCheck<'a> {
    let dv = &written.dvs[index];
    DvEntryCheck {
        puffin_location: &written.location,
        referenced_data_file: &dv.referenced_data_file,
        content_offset: dv.content_offset,
        content_size_in_bytes: dv.content_size_in_bytes,
        record_count: dv.cardinality,
        file_size_in_bytes: written.file_size_in_bytes,
    }
}

/// Encoding writes nothing: the file appears only on upload, as the bytes whose layout
/// the encoding reported, which every DV entry check then accepts.
#[tokio::test]
async fn an_encoded_puffin_is_written_only_by_its_upload() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dvs/0002-dv.puffin");
    let location = format!("file://{}", path.display());
    let encoded = encode_dv_puffin(&location, &three_dvs()).await.unwrap();
    assert!(!path.exists(), "encoding wrote {}", path.display());
    let file_io = FileIO::new_with_fs();
    encoded.upload(&file_io).await.unwrap();
    let written = &encoded.written;
    assert_eq!(written.location, location);
    assert_eq!(
        std::fs::metadata(&path).unwrap().len(),
        written.file_size_in_bytes
    );
    let checks: Vec<DvEntryCheck> = (0..3).map(|i| entry(written, i)).collect();
    let read = validate_dv_entries(&file_io, &checks, 4).await.unwrap();
    assert_eq!(read.len(), 3);
    // The same DVs encode to the same layout written file by file.
    let again = write_dv_puffin(&file_io, &format!("{location}.2"), &three_dvs())
        .await
        .unwrap();
    assert_eq!(again.dvs, written.dvs);
    assert_eq!(again.file_size_in_bytes, written.file_size_in_bytes);
}

/// A small Puffin file's blobs come with its footer's read: they decode (and are
/// checked) with the file gone. A blob of a larger file, outside the footer's read,
/// is read from the file.
#[tokio::test]
async fn blobs_read_with_the_footer_cost_no_request() {
    let dir = tempfile::tempdir().unwrap();
    let (file_io, written, dvs) = write_three(&dir).await;
    let footer = read_puffin_footer(&file_io, &written.location)
        .await
        .unwrap();
    std::fs::remove_file(dir.path().join("dvs/0001-dv.puffin")).unwrap();
    for (index, dv) in dvs.iter().enumerate() {
        let read = validate_dv_in(&file_io, &entry(&written, index), &footer)
            .await
            .unwrap();
        assert_eq!(read, dv.positions);
    }

    let big = one_big_scattered_dv(8);
    let location = format!("file://{}/big.puffin", dir.path().display());
    let written = write_dv_puffin(&file_io, &location, &big).await.unwrap();
    assert!(written.file_size_in_bytes > 2 * 64 * 1024);
    let footer = read_puffin_footer(&file_io, &location).await.unwrap();
    let read = validate_dv_in(&file_io, &entry(&written, 0), &footer)
        .await
        .unwrap();
    assert_eq!(read, big[0].positions);
    std::fs::remove_file(dir.path().join("big.puffin")).unwrap();
    let err = validate_dv_in(&file_io, &entry(&written, 0), &footer)
        .await
        .unwrap_err();
    assert!(matches!(err, DvError::Io { .. }), "{err:?}");
}

#[tokio::test]
async fn puffin_offsets_match_the_footer() {
    let dir = tempfile::tempdir().unwrap();
    let (file_io, written, dvs) = write_three(&dir).await;

    let size = std::fs::metadata(dir.path().join("dvs/0001-dv.puffin"))
        .unwrap()
        .len();
    assert_eq!(written.file_size_in_bytes, size);
    assert_eq!(written.dvs.len(), 3);

    // Read back with iceberg's own reader, independent of ours.
    let reader = PuffinReader::new(file_io.new_input(&written.location).unwrap());
    let footer = reader.file_metadata().await.unwrap().clone();
    assert_eq!(
        footer.properties().get("created-by").map(String::as_str),
        Some(concat!("eqdv ", env!("CARGO_PKG_VERSION")))
    );
    let mut next_offset = 4;
    for ((meta, dv), input) in footer.blobs().iter().zip(&written.dvs).zip(&dvs) {
        assert_eq!(dv.content_offset, next_offset);
        assert_eq!(meta.offset(), dv.content_offset as u64);
        assert_eq!(meta.length(), dv.content_size_in_bytes as u64);
        assert_eq!(meta.blob_type(), "deletion-vector-v1");
        assert_eq!(meta.fields(), &[POS_FIELD_ID]);
        assert_eq!(meta.fields(), &[2_147_483_645]);
        assert_eq!(meta.snapshot_id(), -1);
        assert_eq!(meta.sequence_number(), -1);
        assert_eq!(meta.compression_codec(), CompressionCodec::None);
        assert_eq!(
            meta.properties().get("referenced-data-file"),
            Some(&input.referenced_data_file)
        );
        assert_eq!(
            meta.properties().get("cardinality"),
            Some(&input.positions.len().to_string())
        );
        assert_eq!(dv.cardinality, input.positions.len());
        assert_eq!(dv.referenced_data_file, input.referenced_data_file);
        let blob = reader.blob(meta).await.unwrap();
        assert_eq!(deserialize_dv(blob.data()).unwrap(), input.positions);
        next_offset += dv.content_size_in_bytes;
    }
    assert_eq!(footer.blobs().len(), 3);

    let ours = read_puffin_footer(&file_io, &written.location)
        .await
        .unwrap();
    assert_eq!(ours.file_size_in_bytes, size);
    assert_eq!(ours.metadata, footer);
}

#[tokio::test]
async fn read_dv_and_validate_each_entry() {
    let dir = tempfile::tempdir().unwrap();
    let (file_io, written, dvs) = write_three(&dir).await;
    for (index, input) in dvs.iter().enumerate() {
        let dv = &written.dvs[index];
        let read = read_dv(
            &file_io,
            &written.location,
            dv.content_offset,
            dv.content_size_in_bytes,
        )
        .await
        .unwrap();
        assert_eq!(read, input.positions);
        let validated = validate_dv_entry(&file_io, &entry(&written, index))
            .await
            .unwrap();
        assert_eq!(validated, input.positions);
    }
}

#[tokio::test]
async fn validate_rejects_wrong_record_count() {
    let dir = tempfile::tempdir().unwrap();
    let (file_io, written, _) = write_three(&dir).await;
    let check = DvEntryCheck {
        record_count: written.dvs[1].cardinality + 1,
        ..entry(&written, 1)
    };
    let err = validate_dv_entry(&file_io, &check).await.unwrap_err();
    assert!(
        matches!(&err, DvError::CardinalityMismatch { what: "cardinality property", expected, found, .. }
            if *expected == check.record_count && *found == written.dvs[1].cardinality),
        "{err:?}"
    );
    assert!(err.to_string().contains("record_count"), "{err}");
}

#[tokio::test]
async fn validate_rejects_wrong_referenced_file() {
    let dir = tempfile::tempdir().unwrap();
    let (file_io, written, _) = write_three(&dir).await;
    let check = DvEntryCheck {
        referenced_data_file: "s3://bucket/t/data/other.parquet",
        ..entry(&written, 0)
    };
    let err = validate_dv_entry(&file_io, &check).await.unwrap_err();
    assert!(
        matches!(&err, DvError::ReferencedFileMismatch { expected, found: Some(found), .. }
            if expected == "s3://bucket/t/data/other.parquet" && found == "s3://bucket/t/data/a.parquet"),
        "{err:?}"
    );
    assert!(err.to_string().contains("other.parquet"), "{err}");
}

#[tokio::test]
async fn validate_rejects_wrong_offset_length_and_size() {
    let dir = tempfile::tempdir().unwrap();
    let (file_io, written, _) = write_three(&dir).await;

    let check = DvEntryCheck {
        content_offset: written.dvs[1].content_offset + 1,
        ..entry(&written, 1)
    };
    let err = validate_dv_entry(&file_io, &check).await.unwrap_err();
    assert!(
        matches!(&err, DvError::BlobNotFound { offset, available, .. }
            if *offset == check.content_offset && available.len() == 3),
        "{err:?}"
    );
    assert!(err.to_string().contains("no blob at offset"), "{err}");

    let check = DvEntryCheck {
        content_size_in_bytes: written.dvs[1].content_size_in_bytes - 1,
        ..entry(&written, 1)
    };
    let err = validate_dv_entry(&file_io, &check).await.unwrap_err();
    assert!(
        matches!(&err, DvError::BlobLengthMismatch { .. }),
        "{err:?}"
    );

    let check = DvEntryCheck {
        file_size_in_bytes: written.file_size_in_bytes + 1,
        ..entry(&written, 1)
    };
    let err = validate_dv_entry(&file_io, &check).await.unwrap_err();
    assert!(
        matches!(&err, DvError::FileSizeMismatch { expected, found, .. }
            if *expected == written.file_size_in_bytes + 1 && *found == written.file_size_in_bytes),
        "{err:?}"
    );

    let check = DvEntryCheck {
        content_offset: -1,
        ..entry(&written, 1)
    };
    let err = validate_dv_entry(&file_io, &check).await.unwrap_err();
    assert!(
        matches!(&err, DvError::InvalidRange { offset: -1, .. }),
        "{err:?}"
    );
}

#[tokio::test]
async fn validate_rejects_a_corrupted_blob() {
    let dir = tempfile::tempdir().unwrap();
    let (file_io, written, _) = write_three(&dir).await;
    let path = dir.path().join("dvs/0001-dv.puffin");
    let mut bytes = std::fs::read(&path).unwrap();
    let dv = &written.dvs[2];
    // Last CRC byte of the third blob.
    bytes[(dv.content_offset + dv.content_size_in_bytes - 1) as usize] ^= 0x01;
    std::fs::write(&path, bytes).unwrap();

    let err = validate_dv_entry(&file_io, &entry(&written, 2))
        .await
        .unwrap_err();
    let DvError::InBlob { offset, source, .. } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(*offset, dv.content_offset);
    assert!(
        matches!(**source, DvError::CrcMismatch { .. }),
        "{source:?}"
    );
    assert!(err.to_string().contains("0001-dv.puffin"), "{err}");

    // The other blobs are untouched.
    validate_dv_entry(&file_io, &entry(&written, 0))
        .await
        .unwrap();
}

#[tokio::test]
async fn truncated_puffin_is_rejected_without_panicking() {
    let dir = tempfile::tempdir().unwrap();
    let (file_io, written, _) = write_three(&dir).await;
    let path = dir.path().join("dvs/0001-dv.puffin");
    let bytes = std::fs::read(&path).unwrap();
    for len in [0, 10, 30, bytes.len() - 1] {
        std::fs::write(&path, &bytes[..len]).unwrap();
        let err = read_puffin_footer(&file_io, &written.location)
            .await
            .unwrap_err();
        assert!(
            matches!(err, DvError::InvalidPuffin { .. }),
            "{len}: {err:?}"
        );
        let err = validate_dv_entry(&file_io, &entry(&written, 0))
            .await
            .unwrap_err();
        assert!(
            matches!(err, DvError::FileSizeMismatch { .. }),
            "{len}: {err:?}"
        );
    }
}

#[tokio::test]
async fn writer_rejects_bad_input_before_writing() {
    let dir = tempfile::tempdir().unwrap();
    let file_io = FileIO::new_with_fs();
    let location = format!("file://{}/bad.puffin", dir.path().display());

    let mut dvs = three_dvs();
    dvs[2].referenced_data_file = dvs[0].referenced_data_file.clone();
    let err = write_dv_puffin(&file_io, &location, &dvs)
        .await
        .unwrap_err();
    assert!(matches!(err, DvError::DuplicateDataFile { .. }), "{err:?}");

    let mut dvs = three_dvs();
    dvs[1].positions = RoaringTreemap::new();
    let err = write_dv_puffin(&file_io, &location, &dvs)
        .await
        .unwrap_err();
    assert!(matches!(err, DvError::EmptyDv { .. }), "{err:?}");

    let mut dvs = three_dvs();
    dvs[1].positions.insert(u64::MAX);
    let err = write_dv_puffin(&file_io, &location, &dvs)
        .await
        .unwrap_err();
    let DvError::ForDataFile {
        referenced_data_file,
        source,
    } = &err
    else {
        panic!("{err:?}")
    };
    assert_eq!(referenced_data_file, "s3://bucket/t/data/b.parquet");
    assert!(
        matches!(**source, DvError::PositionOutOfRange { .. }),
        "{source:?}"
    );

    assert!(!dir.path().join("bad.puffin").exists());
}

/// A Puffin file as another writer might produce it, to reach checks ours never fails.
async fn write_foreign(
    file_io: &FileIO,
    location: &str,
    blob_type: &str,
    cardinality: &str,
    codec: CompressionCodec,
) -> (i64, i64, u64) {
    use std::collections::HashMap;

    use iceberg::puffin::{Blob, PuffinWriter};

    let data = serialize_dv(&set([1, 3, 5, 7, 9])).unwrap();
    let blob = Blob::builder()
        .r#type(blob_type.to_string())
        .fields(vec![POS_FIELD_ID])
        .snapshot_id(-1)
        .sequence_number(-1)
        .data(data)
        .properties(HashMap::from([
            ("referenced-data-file".to_string(), "f.parquet".to_string()),
            ("cardinality".to_string(), cardinality.to_string()),
        ]))
        .build();
    let output = file_io.new_output(location).unwrap();
    let mut writer = PuffinWriter::new(&output, HashMap::new(), false)
        .await
        .unwrap();
    writer.add(blob, codec).await.unwrap();
    writer.close().await.unwrap();
    let footer = read_puffin_footer(file_io, location).await.unwrap();
    let meta = &footer.metadata.blobs()[0];
    (
        meta.offset() as i64,
        meta.length() as i64,
        footer.file_size_in_bytes,
    )
}

#[tokio::test]
async fn validate_checks_foreign_blob_metadata_and_bitmap() {
    let dir = tempfile::tempdir().unwrap();
    let file_io = FileIO::new_with_fs();
    let location = format!("file://{}/foreign.puffin", dir.path().display());
    let check = |offset, length, size, record_count| DvEntryCheck {
        puffin_location: "",
        referenced_data_file: "f.parquet",
        content_offset: offset,
        content_size_in_bytes: length,
        record_count,
        file_size_in_bytes: size,
    };

    // Property agrees with record_count, the bitmap (5 positions) does not.
    let (o, l, s) = write_foreign(
        &file_io,
        &location,
        "deletion-vector-v1",
        "4",
        CompressionCodec::None,
    )
    .await;
    let err = validate_dv_entry(
        &file_io,
        &DvEntryCheck {
            puffin_location: &location,
            ..check(o, l, s, 4)
        },
    )
    .await
    .unwrap_err();
    assert!(
        matches!(
            err,
            DvError::CardinalityMismatch {
                what: "bitmap cardinality",
                expected: 4,
                found: 5,
                ..
            }
        ),
        "{err:?}"
    );

    let (o, l, s) = write_foreign(
        &file_io,
        &location,
        "deletion-vector-v1",
        "five",
        CompressionCodec::None,
    )
    .await;
    let err = validate_dv_entry(
        &file_io,
        &DvEntryCheck {
            puffin_location: &location,
            ..check(o, l, s, 5)
        },
    )
    .await
    .unwrap_err();
    assert!(
        matches!(err, DvError::InvalidCardinalityProperty { .. }),
        "{err:?}"
    );

    let (o, l, s) = write_foreign(
        &file_io,
        &location,
        "apache-datasketches-theta-v1",
        "5",
        CompressionCodec::None,
    )
    .await;
    let err = validate_dv_entry(
        &file_io,
        &DvEntryCheck {
            puffin_location: &location,
            ..check(o, l, s, 5)
        },
    )
    .await
    .unwrap_err();
    assert!(matches!(err, DvError::WrongBlobType { .. }), "{err:?}");

    let (o, l, s) = write_foreign(
        &file_io,
        &location,
        "deletion-vector-v1",
        "5",
        CompressionCodec::zstd_default(),
    )
    .await;
    let err = validate_dv_entry(
        &file_io,
        &DvEntryCheck {
            puffin_location: &location,
            ..check(o, l, s, 5)
        },
    )
    .await
    .unwrap_err();
    assert!(matches!(err, DvError::CompressedBlob { .. }), "{err:?}");

    // And the well-formed case passes.
    let (o, l, s) = write_foreign(
        &file_io,
        &location,
        "deletion-vector-v1",
        "5",
        CompressionCodec::None,
    )
    .await;
    let positions = validate_dv_entry(
        &file_io,
        &DvEntryCheck {
            puffin_location: &location,
            ..check(o, l, s, 5)
        },
    )
    .await
    .unwrap();
    assert_eq!(positions, set([1, 3, 5, 7, 9]));
}

/// Many entries over two Puffin files, checked together: results in the order of the
/// entries whatever order the reads finish in, the first bad entry in that order is the
/// error, and an entry whose file size disagrees with its file's is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validate_many_entries_keeps_their_order_and_the_first_error() {
    let dir = tempfile::tempdir().unwrap();
    let (file_io, first, dvs) = write_three(&dir).await;
    let location = format!("file://{}/dvs/0002-dv.puffin", dir.path().display());
    let second = write_dv_puffin(&file_io, &location, &dvs).await.unwrap();

    let order = [
        (&first, 0),
        (&second, 1),
        (&first, 2),
        (&second, 0),
        (&first, 1),
    ];
    let checks: Vec<DvEntryCheck<'_>> = order.iter().map(|(w, i)| entry(w, *i)).collect();
    let read = validate_dv_entries(&file_io, &checks, 8).await.unwrap();
    let expected: Vec<_> = order
        .iter()
        .map(|(_, i)| dvs[*i].positions.clone())
        .collect();
    assert_eq!(read, expected);
    // One read at a time gives the same.
    assert_eq!(
        validate_dv_entries(&file_io, &checks, 1).await.unwrap(),
        expected
    );

    // Two bad entries: the earlier one (a wrong record count) is the error, not the
    // later one (an offset with no blob).
    let mut bad = checks.clone();
    bad[1].record_count += 1;
    bad[3].content_offset += 1;
    let err = validate_dv_entries(&file_io, &bad, 8).await.unwrap_err();
    assert!(
        matches!(&err, DvError::CardinalityMismatch { location, .. } if *location == second.location),
        "{err:?}"
    );

    // The file's size comes from its first entry; a later entry expecting another size
    // is refused rather than trusted.
    let mut bad = checks.clone();
    bad[2].file_size_in_bytes += 1;
    let err = validate_dv_entries(&file_io, &bad, 8).await.unwrap_err();
    assert!(
        matches!(&err, DvError::FileSizeMismatch { expected, found, .. }
            if *expected == first.file_size_in_bytes + 1 && *found == first.file_size_in_bytes),
        "{err:?}"
    );

    assert!(
        validate_dv_entries(&file_io, &[], 8)
            .await
            .unwrap()
            .is_empty()
    );
}

/// Our footer read against iceberg's reader, on a file and its DV entries.
async fn footer_agrees_with_iceberg(file_io: &FileIO, written: &WrittenPuffin) {
    let reader = PuffinReader::new(file_io.new_input(&written.location).unwrap());
    let theirs = reader.file_metadata().await.unwrap().clone();
    let ours = read_puffin_footer(file_io, &written.location)
        .await
        .unwrap();
    assert_eq!(ours.metadata, theirs);
    assert_eq!(ours.file_size_in_bytes, written.file_size_in_bytes);
}

/// A footer is read in one request from the file's last 64 KiB when it fits there; a
/// longer footer, and a file whose header lies before those bytes, take one read more.
#[tokio::test]
async fn footers_longer_than_one_read_and_files_larger_are_read_whole() {
    let dir = tempfile::tempdir().unwrap();
    let file_io = FileIO::new_with_fs();

    // 700 DVs: a footer of some 150 KB.
    let many: Vec<DvBlobInput> = (0..700)
        .map(|i| DvBlobInput {
            referenced_data_file: format!("s3://bucket/t/data/{i:05}-a-long-enough-name.parquet"),
            positions: set([i, i + 3]),
        })
        .collect();
    let location = format!("file://{}/many.puffin", dir.path().display());
    let written = write_dv_puffin(&file_io, &location, &many).await.unwrap();
    let footer_len = written.file_size_in_bytes - written.dvs[699].content_offset as u64;
    assert!(footer_len > 64 * 1024, "footer of {footer_len} bytes");
    footer_agrees_with_iceberg(&file_io, &written).await;
    let checks: Vec<DvEntryCheck> = (0..many.len()).map(|i| entry(&written, i)).collect();
    let read = validate_dv_entries(&file_io, &checks, 8).await.unwrap();
    assert!(read.iter().zip(&many).all(|(r, m)| *r == m.positions));

    // One DV of 300,000 scattered positions: a small footer after a large blob.
    let big = one_big_scattered_dv(7);
    let location = format!("file://{}/big.puffin", dir.path().display());
    let written = write_dv_puffin(&file_io, &location, &big).await.unwrap();
    assert!(written.file_size_in_bytes > 2 * 64 * 1024);
    footer_agrees_with_iceberg(&file_io, &written).await;
    let read = validate_dv_entry(&file_io, &entry(&written, 0))
        .await
        .unwrap();
    assert_eq!(read, big[0].positions);

    // Its header magic, outside the last 64 KiB, is still checked.
    let path = dir.path().join("big.puffin");
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[0] ^= 0xFF;
    std::fs::write(&path, &bytes).unwrap();
    let err = validate_dv_entry(&file_io, &entry(&written, 0))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, DvError::InvalidPuffin { reason, .. } if reason.contains("header magic")),
        "{err:?}"
    );
}

/// Footer flags (bit 0: an LZ4-compressed payload) go to iceberg's reader, which
/// cannot decompress LZ4 today: the file is refused by name, not misread.
#[tokio::test]
async fn a_footer_with_flags_set_is_left_to_icebergs_reader() {
    let dir = tempfile::tempdir().unwrap();
    let (file_io, written, _) = write_three(&dir).await;
    let path = dir.path().join("dvs/0001-dv.puffin");
    let mut bytes = std::fs::read(&path).unwrap();
    let flags_at = bytes.len() - 8;
    bytes[flags_at] |= 0x01;
    std::fs::write(&path, &bytes).unwrap();
    let err = validate_dv_entry(&file_io, &entry(&written, 0))
        .await
        .unwrap_err();
    let DvError::InvalidPuffin {
        location, source, ..
    } = &err
    else {
        panic!("{err:?}")
    };
    assert!(location.ends_with("0001-dv.puffin"), "{location}");
    let cause = source.as_ref().map(|e| e.to_string()).unwrap_or_default();
    assert!(cause.contains("LZ4"), "{cause}");
}
