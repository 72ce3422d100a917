//! Compares eqdv's fast manifest decoder with iceberg-rust's on a real table's manifests
//! (also used by tests/interop.rs on Java's tables).

use std::collections::HashSet;

use eqdv::manifest_decode::{EntryHead, parse_manifest, parse_manifest_kept};
use eqdv::table::LoadedTable;
use iceberg::spec::{ManifestFile, ManifestList, ManifestStatus};

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
            assert_kept_entries_alike(m, &bytes);
        }
    }
    assert!(!seen.is_empty(), "the table has no manifests to compare");
    seen.len()
}

/// Decoding with entries left out as they are read keeps exactly the entries that
/// decoding them all and then filtering keeps, for predicates on every part of an
/// entry's head, and counts the same live entries.
pub fn assert_kept_entries_alike(m: &ManifestFile, bytes: &[u8]) {
    let (_, all) = parse_manifest(m, bytes).expect("parse manifest");
    let live = all
        .iter()
        .filter(|e| e.status() != ManifestStatus::Deleted)
        .count();
    let predicates: [&(dyn Fn(&EntryHead<'_>) -> bool + Sync); 4] = [
        &|_| true,
        &|h| h.status != ManifestStatus::Deleted,
        // Some partitions, sequence numbers and contents, not others.
        &|h| {
            let partition = format!("{:?}", h.partition);
            let sequence = h.sequence_number.map_or(1, |s| s.unsigned_abs());
            (partition.len() as u64 + sequence + h.content as u64).is_multiple_of(2)
        },
        // Some paths, not others (as a split's range keeps its own files).
        &|h| eqdv::convert::DataRange { index: 1, count: 3 }.holds(h.path),
    ];
    for (i, keep) in predicates.iter().enumerate() {
        let kept = parse_manifest_kept(m, bytes, *keep).expect("parse manifest, kept");
        let expected: Vec<_> = all.iter().filter(|e| keep(&EntryHead::of(e))).collect();
        assert_eq!(
            kept.entries.iter().collect::<Vec<_>>(),
            expected,
            "predicate {i} kept other entries of {}",
            m.manifest_path
        );
        assert_eq!(kept.live, live, "live entries of {}", m.manifest_path);
    }
}
