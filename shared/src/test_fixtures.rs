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
