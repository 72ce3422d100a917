//! Compares eqdv's fast manifest decoder with iceberg-rust's on a real table's manifests
//! (also used by tests/interop.rs on Java's tables).

use std::collections::HashSet;

use eqdv::table::LoadedTable;
use iceberg::spec::ManifestList;

/// Every manifest of every snapshot decodes to the same metadata and entries through
/// eqdv's fast decoder as through iceberg-rust's, and the fast decoder did not decline
/// it (so the fast path is what conversions of such tables use). Returns the number of
/// manifests compared.
pub async fn assert_manifests_decode_alike(t: &LoadedTable) -> usize {
    let mut seen = HashSet::new();
    for snapshot in t.metadata.snapshots() {
        let list_bytes = eqdv::storage::read_all(&t.file_io, snapshot.manifest_list())
            .await
            .expect("read manifest list");
        let list = ManifestList::parse_with_version(&list_bytes, t.metadata.format_version())
            .expect("parse manifest list");
        for m in list.entries() {
            if !seen.insert(m.manifest_path.clone()) {
                continue;
            }
            let bytes = eqdv::storage::read_all(&t.file_io, &m.manifest_path)
                .await
                .expect("read manifest");
            let reference = iceberg::spec::Manifest::parse_avro(&bytes).expect("iceberg parse");
            let (metadata, entries) = eqdv::manifest_decode::decode_manifest(&bytes)
                .unwrap_or_else(|e| panic!("fast decoder declined {}: {e}", m.manifest_path));
            assert!(
                &metadata == reference.metadata(),
                "metadata differs for {}",
                m.manifest_path
            );
            assert_eq!(
                entries.len(),
                reference.entries().len(),
                "{}",
                m.manifest_path
            );
            for (fast, slow) in entries.iter().zip(reference.entries()) {
                assert_eq!(fast, slow.as_ref(), "entry differs in {}", m.manifest_path);
            }
        }
    }
    assert!(!seen.is_empty(), "the table has no manifests to compare");
    seen.len()
}
