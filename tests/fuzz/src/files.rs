//! Targets over files: the bytes are a whole file at a known location in a memory
//! FileIO, read through the same functions a conversion reads it with.

use std::collections::HashMap;

use eqdv::dv::{deserialize_dv, deserialize_portable_treemap, serialize_dv};
use eqdv::key_index::format::LeafMeta;
use eqdv::key_index::leaf::{probe_leaf, read_leaf};
use eqdv::manifest_decode::{
    EntryHead, check_avro_file, decode_manifest, parse_manifest, parse_manifest_kept,
};
use eqdv::parquet_io::{FooterCache, ParquetFile};
use eqdv::puffin::{
    CARDINALITY_PROPERTY, DvEntryCheck, REFERENCED_DATA_FILE_PROPERTY, read_dv, read_puffin_footer,
    validate_dv_entry,
};
use futures::TryStreamExt;
use iceberg::io::FileIO;
use iceberg::spec::{
    FormatVersion, Manifest, ManifestContentType, ManifestFile, ManifestList, ManifestStatus,
};

use crate::{assert_names, block_on};

const TABLE: &str = "memory:///warehouse/db/fuzzed";

/// A memory FileIO holding `data` at `location`.
fn file_at(location: &str, data: &[u8]) -> FileIO {
    let file_io = FileIO::new_with_memory();
    let written = block_on(async {
        file_io
            .new_output(location)?
            .write(bytes::Bytes::copy_from_slice(data))
            .await
    });
    if let Err(e) = written {
        panic!("cannot put the input in memory: {e}");
    }
    file_io
}

/// A manifest as eqdv reads it, and when eqdv's own decoder accepts it, iceberg-rust's
/// decoder must read the same entries (eqdv's declines anything it would decode
/// otherwise). The kept read (entries skipped as they are decoded) keeps exactly what
/// the whole read filtered keeps.
pub fn manifest(data: &[u8]) {
    let path = format!("{TABLE}/metadata/fuzzed-m0.avro");
    let listed = ManifestFile {
        manifest_path: path.clone(),
        manifest_length: data.len() as i64,
        partition_spec_id: 0,
        content: ManifestContentType::Data,
        sequence_number: 7,
        min_sequence_number: 1,
        added_snapshot_id: 11,
        added_files_count: None,
        existing_files_count: None,
        deleted_files_count: None,
        added_rows_count: None,
        existing_rows_count: None,
        deleted_rows_count: None,
        partitions: None,
        key_metadata: None,
        first_row_id: None,
    };
    let whole = match parse_manifest(&listed, data) {
        Ok((_, entries)) => entries,
        Err(e) => return assert_names(&e, &path),
    };
    let keep = |head: &EntryHead<'_>| {
        head.status != ManifestStatus::Deleted && head.path.len().is_multiple_of(2)
    };
    match parse_manifest_kept(&listed, data, &keep) {
        Ok(kept) => {
            let expected: Vec<_> = whole
                .iter()
                .filter(|e| keep(&EntryHead::of(e)))
                .cloned()
                .collect();
            assert_eq!(
                kept.entries, expected,
                "the kept read differs from the whole read"
            );
            let live = whole
                .iter()
                .filter(|e| e.status() != ManifestStatus::Deleted)
                .count();
            assert_eq!(kept.live, live, "live entries counted differently");
        }
        Err(e) => panic!("the whole read accepted what the kept read refused: {e}"),
    }
    if let Ok((metadata, entries)) = decode_manifest(data) {
        match Manifest::parse_avro(data) {
            Ok(theirs) => {
                let (their_entries, their_metadata) = theirs.into_parts();
                assert_eq!(
                    metadata, their_metadata,
                    "metadata differs from iceberg-rust's"
                );
                let their_entries: Vec<_> = their_entries.iter().map(|e| (**e).clone()).collect();
                assert_eq!(entries, their_entries, "entries differ from iceberg-rust's");
            }
            Err(e) => panic!("eqdv's decoder accepted a manifest iceberg-rust refuses: {e}"),
        }
    }
}

/// A manifest list, parsed as eqdv parses one: checked, then read by iceberg-rust's
/// decoder (v3 and v2).
pub fn manifest_list(data: &[u8]) {
    let path = format!("{TABLE}/metadata/snap-1-1-fuzzed.avro");
    if let Err(e) = check_avro_file(&path, data) {
        return assert_names(&e, &path);
    }
    for version in [FormatVersion::V3, FormatVersion::V2] {
        let _ = ManifestList::parse_with_version(data, version);
    }
}

/// A Puffin file's footer, then each of its blobs as a DV, read and validated as a
/// conversion reads the DVs it merges with.
pub fn puffin(data: &[u8]) {
    let location = format!("{TABLE}/data/fuzzed-dv.puffin");
    let file_io = file_at(&location, data);
    let footer = match block_on(read_puffin_footer(&file_io, &location)) {
        Ok(footer) => footer,
        Err(e) => return assert_names(&e, &location),
    };
    assert_eq!(footer.file_size_in_bytes, data.len() as u64);
    for blob in footer.metadata.blobs() {
        let (offset, length) = (blob.offset() as i64, blob.length() as i64);
        if let Err(e) = block_on(read_dv(&file_io, &location, offset, length)) {
            assert_names(&e, &location);
        }
        let properties = blob.properties();
        let referenced = properties
            .get(REFERENCED_DATA_FILE_PROPERTY)
            .map_or("none", String::as_str);
        let cardinality = properties
            .get(CARDINALITY_PROPERTY)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let check = DvEntryCheck {
            puffin_location: &location,
            referenced_data_file: referenced,
            content_offset: offset,
            content_size_in_bytes: length,
            record_count: cardinality,
            file_size_in_bytes: data.len() as u64,
        };
        match block_on(validate_dv_entry(&file_io, &check)) {
            Ok(positions) => assert_eq!(positions.len(), cardinality),
            Err(e) => assert_names(&e, &location),
        }
    }
}

/// A `deletion-vector-v1` blob, and a bare portable Roaring bitmap: what decodes
/// encodes back to what decodes to the same positions.
pub fn dv(data: &[u8]) {
    if let Ok(positions) = deserialize_dv(data) {
        let encoded = serialize_dv(&positions).unwrap_or_else(|e| panic!("cannot re-encode: {e}"));
        let again = deserialize_dv(&encoded).unwrap_or_else(|e| panic!("cannot decode own: {e}"));
        assert_eq!(positions, again, "a DV changed through a round trip");
    }
    if let Ok(positions) = deserialize_portable_treemap(data) {
        let mut bytes = Vec::new();
        if positions.serialize_into(&mut bytes).is_ok() {
            // roaring's own encoding of a treemap is the same portable format.
            let again = deserialize_portable_treemap(&bytes)
                .unwrap_or_else(|e| panic!("cannot decode roaring's encoding: {e}"));
            assert_eq!(positions, again, "a bitmap changed through a round trip");
        }
    }
}

/// A Parquet data file: its footer, every column chunk's bloom filter, and every
/// column iceberg can type, read as a conversion reads key columns.
pub fn parquet(data: &[u8]) {
    let location = format!("{TABLE}/data/fuzzed.parquet");
    let file_io = file_at(&location, data);
    let size = Some(data.len() as u64);
    let mut file = match block_on(ParquetFile::open(&file_io, &location, size)) {
        Ok(file) => file,
        Err(e) => return assert_names(&e, &location),
    };
    let leaves = file.metadata().file_metadata().schema_descr().num_columns();
    for row_group in 0..file.row_group_rows().len() {
        for leaf in 0..leaves {
            match block_on(file.bloom_filter(row_group, leaf)) {
                Ok(Some(filter)) => {
                    let _ = filter.check(&42_i64);
                }
                Ok(None) => {}
                Err(e) => assert_names(&e, &location),
            }
        }
    }
    let Ok(schema) = iceberg::arrow::arrow_schema_to_schema(file.arrow_schema()) else {
        return;
    };
    let fields: Vec<_> = schema.as_struct().fields().to_vec();
    let read = file.read(&fields, None, 1024);
    let rows =
        match read {
            Ok(stream) => block_on(stream.try_fold(0_usize, |n, (_, batch)| async move {
                Ok(n + batch.num_rows())
            })),
            Err(e) => Err(e),
        };
    if let Err(e) = rows {
        assert_names(&e, &location);
    }
}

/// A key index leaf (a Parquet file eqdv wrote, or so its index metadata says): read
/// whole, as a merge of runs does, and probed, as a lookup does.
pub fn index_leaf(data: &[u8]) {
    let location = format!("{TABLE}/metadata/key-index/fuzzed-leaf.parquet");
    let file_io = file_at(&location, data);
    let leaf = LeafMeta {
        location: location.clone(),
        file_size_in_bytes: data.len() as u64,
        record_count: 0,
        min_key_hash: i64::MIN,
        max_key_hash: i64::MAX,
        tail_bytes: None,
    };
    if let Err(e) = block_on(read_leaf(&file_io, &leaf, |_, _, _| {})) {
        assert_names(&e, &location);
    }
    let footers = FooterCache::with_capacity(1 << 20);
    let mut named = HashMap::new();
    let probes = [i64::MIN, -1, 0, 42, i64::MAX];
    if let Err(e) = block_on(probe_leaf(&file_io, &footers, &leaf, &probes, &mut named)) {
        assert_names(&e, &location);
    }
}
