//! Leaves written and read back: probes, whole reads, page ranges and damaged files.

use super::*;

fn io(dir: &std::path::Path) -> (FileIO, String) {
    let io = FileIO::new_with_fs();
    (io, format!("{}/leaf.parquet", dir.display()))
}

/// Writes a leaf of `n` entries, entry `i` at position `i` with hash `hash(i)` of
/// data file `file(i)`; returns it with its hashes.
async fn write_entries(
    file_io: &FileIO,
    location: &str,
    n: usize,
    hash: impl Fn(i64) -> i64,
    file: impl Fn(u32) -> u32,
) -> (LeafMeta, Vec<i64>) {
    let hashes: Vec<i64> = (0..n as i64).map(hash).collect();
    let files: Vec<u32> = (0..n as u32).map(file).collect();
    let positions: Vec<u64> = (0..n as u64).collect();
    let entries = Entries {
        hashes: &hashes,
        files: &files,
        positions: &positions,
    };
    let leaf = write_leaf(file_io, location, &entries).await.unwrap();
    (leaf, hashes)
}

/// The entries of `leaf` holding one of `probes` (per data file, the positions), and
/// what probing read.
async fn probe(
    file_io: &FileIO,
    footers: &FooterCache,
    leaf: &LeafMeta,
    probes: &[i64],
) -> (HashMap<u32, RoaringTreemap>, ProbeRead) {
    let mut named = HashMap::new();
    let read = probe_leaf(file_io, footers, leaf, probes, &mut named)
        .await
        .unwrap();
    (named, read)
}

#[tokio::test]
async fn a_probe_names_the_files_holding_a_hash_and_reads_few_row_groups() {
    let dir = tempfile::tempdir().unwrap();
    let (file_io, location) = io(dir.path());
    // 100,000 entries: hash i*10, alternating files 0 and 1.
    let n = 100_000usize;
    let (leaf, hashes) =
        write_entries(&file_io, &location, n, |i| i * 10 - 500_000, |i| i % 2).await;
    assert_eq!(leaf.record_count, n as u64);
    assert_eq!(leaf.min_key_hash, -500_000);
    assert_eq!(leaf.max_key_hash, (n as i64 - 1) * 10 - 500_000);

    // A warm process's footer cache: the first probe keeps the footer and page index,
    // the next ones open the leaf from there.
    let footers = FooterCache::with_capacity(16 << 20);
    // hashes[3] (file 1, position 3) and one absent value.
    let (named, read) = probe(&file_io, &footers, &leaf, &[hashes[3], hashes[3] + 1]).await;
    assert!(!read.footer_from_cache);
    assert_eq!(footers.len(), 1);
    assert_eq!(
        named,
        HashMap::from([(1, RoaringTreemap::from_iter([3u64]))])
    );
    assert_eq!(read.row_groups_read, 1);
    // One page of hashes (and of paths) read, not the row group: a few KiB of a
    // leaf of hundreds.
    assert!(
        read.bytes_read < leaf.file_size_in_bytes / 50,
        "{read:?} of a leaf of {} bytes",
        leaf.file_size_in_bytes
    );
    let one_page = read.bytes_read;
    // The same hash again: its pages come from the cache, with the same entries.
    let hits = footers.range_hits();
    let (again, _) = probe(&file_io, &footers, &leaf, &[hashes[3], hashes[3] + 1]).await;
    assert_eq!(again, named);
    assert!(footers.range_hits() > hits, "no page came from the cache");
    // Two hashes far apart: two pages, in two row groups.
    let (two, read) = probe(&file_io, &footers, &leaf, &[hashes[0], hashes[n - 1]]).await;
    assert!(read.footer_from_cache);
    assert_eq!(two.len(), 2);
    assert_eq!(two[&0], RoaringTreemap::from_iter([0u64]));
    assert_eq!(two[&1], RoaringTreemap::from_iter([n as u64 - 1]));
    assert_eq!(read.row_groups_read, 2);
    assert!(
        read.bytes_read <= 3 * one_page,
        "{read:?}, one page {one_page}"
    );

    // A hash out of every range reads no row group.
    let (none, read) = probe(&file_io, &footers, &leaf, &[i64::MAX]).await;
    assert!(none.is_empty());
    assert_eq!(read.row_groups_read, 0);

    // Every entry reads back in order.
    let mut back = Vec::new();
    let rows = read_leaf(&file_io, &leaf, |h, f, pos| back.push((h, f, pos)))
        .await
        .unwrap();
    assert_eq!(rows, n as u64);
    assert_eq!(back[5], (hashes[5], 1, 5));
    // About 12 bytes an entry: the hash, a delta-encoded ordinal and position.
    assert!(
        leaf.file_size_in_bytes < 13 * n as u64,
        "{} bytes for {n} entries",
        leaf.file_size_in_bytes
    );
}

#[tokio::test]
async fn a_leafs_footer_and_page_indexes_are_read_in_one_request() {
    let dir = tempfile::tempdir().unwrap();
    let (file_io, location) = io(dir.path());
    let (leaf, _) = write_entries(&file_io, &location, 1_000_000, |i| i * 7, |_| 0).await;
    let tail = leaf.tail_bytes.expect("recorded");
    // Thousands of pages: their indexes outgrow the default hint (64 KiB).
    assert!(tail > 64 * 1024, "{tail}");
    let mut reader = leaf_reader(&file_io, &leaf, true).await.unwrap();
    let options = ArrowReaderOptions::new().with_page_index_policy(PageIndexPolicy::Required);
    let metadata = ArrowReaderMetadata::load_async(&mut reader, options)
        .await
        .unwrap();
    assert!(metadata.metadata().offset_index().is_some());
    assert!(metadata.metadata().column_index().is_some());
    assert_eq!(reader.reads(), 1);
    assert_eq!(reader.footer_bytes(), tail);
}

#[tokio::test]
async fn a_truncated_leaf_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let (file_io, location) = io(dir.path());
    let entries = Entries {
        hashes: &[1, 2, 3],
        files: &[0, 0, 0],
        positions: &[0, 1, 2],
    };
    let mut leaf = write_leaf(&file_io, &location, &entries).await.unwrap();
    let bytes = std::fs::read(&location).unwrap();
    std::fs::write(&location, &bytes[..bytes.len() / 2]).unwrap();
    leaf.file_size_in_bytes = (bytes.len() / 2) as u64;
    let error = probe_leaf(
        &file_io,
        &FooterCache::default(),
        &leaf,
        &[1],
        &mut HashMap::new(),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(error.contains(&location), "{error}");
}
