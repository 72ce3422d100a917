//! Values the engine's unit tests build in several modules.

use iceberg::spec::{ManifestContentType, ManifestFile};

/// A manifest list entry of `content` listing one added file, in spec 0 at sequence
/// number 1; tests set what they look at with struct update syntax.
pub(crate) fn manifest_file(content: ManifestContentType) -> ManifestFile {
    ManifestFile {
        manifest_path: "m.avro".into(),
        manifest_length: 1,
        partition_spec_id: 0,
        content,
        sequence_number: 1,
        min_sequence_number: 1,
        added_snapshot_id: 1,
        added_files_count: Some(1),
        existing_files_count: Some(0),
        deleted_files_count: Some(0),
        added_rows_count: Some(1),
        existing_rows_count: Some(0),
        deleted_rows_count: Some(0),
        partitions: None,
        key_metadata: None,
        first_row_id: None,
    }
}

/// `v` as a zigzag varint: an Avro long, and a Thrift compact integer alike.
pub(crate) fn zigzag_varint(v: i64) -> Vec<u8> {
    let mut n = ((v << 1) ^ (v >> 63)) as u64;
    let mut out = Vec::new();
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
    out
}
