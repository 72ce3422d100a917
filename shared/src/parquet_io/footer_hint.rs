//! How many bytes to read from the end of a data file to open it, learned from the
//! table's files opened so far.
//!
//! A file is opened with one read of its last bytes: its footer, and whatever lies just
//! before it. [`DEFAULT_FOOTER_HINT`] (64 KiB) is sized for the footers of wide files
//! with many row groups, but the files of one table come from the same writers and
//! carry footers of much the same size: often a few KiB. Against object storage the
//! rest of those 64 KiB is bytes paid for nothing, on every file a resolve opens (with
//! random keys, every file): bandwidth a Lambda function shares across all its reads.
//!
//! [`FooterHint`] learns, from each large file opened, the end of it that opening uses
//! ([`tail_in_use`]: the footer and the bloom filters written after the file's last
//! column chunk, where Java's writer puts them all and parquet-rs's puts the last row
//! group's), and reads later files of no more row groups with half as much again. A file
//! whose footer is longer still is read with a second request, as before; a file of more
//! row groups than any measured (its footer can be longer), one without split offsets in
//! its manifest entry, and every file before the first is measured, get the default.
//! Files no larger than the default are read whole, as before: one request serves their
//! footer and their column chunks.

use std::sync::{Mutex, PoisonError};

use parquet::file::metadata::ParquetMetaData;

use super::footer_cache::FooterCache;
use super::reader::DEFAULT_FOOTER_HINT;

/// The least a learned hint reads: below it a request's bytes cost next to nothing.
const MIN_LEARNED_HINT: u64 = 16 * 1024;

/// Learned hints are whole multiples of this.
const HINT_GRANULE: u64 = 4 * 1024;

/// What one resolve has learned of its table's files (shared by its scans), and the
/// footers kept from earlier resolves, when it was given a cache of them.
#[derive(Debug, Default)]
pub struct FooterHint {
    learned: Mutex<Learned>,
    cache: FooterCache,
}

#[derive(Debug, Default)]
struct Learned {
    /// The largest [`tail_in_use`] measured; 0 before any.
    tail: u64,
    /// The most row groups among the files measured.
    row_groups: usize,
}

impl FooterHint {
    pub fn new() -> Self {
        Self::default()
    }

    /// A hint that also opens files from `cache` and keeps in it the footers it reads.
    pub fn with_cache(cache: FooterCache) -> Self {
        Self {
            cache,
            ..Self::default()
        }
    }

    /// Footers kept from earlier opens (off unless given).
    pub fn cache(&self) -> &FooterCache {
        &self.cache
    }

    fn learned(&self) -> std::sync::MutexGuard<'_, Learned> {
        // Two numbers, whole after any panic.
        self.learned.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Bytes to read from the end of a file of `size` bytes with `row_groups` row groups
    /// (from its manifest entry's split offsets, when the writer recorded them).
    pub fn for_file(&self, size: u64, row_groups: Option<usize>) -> usize {
        let default = DEFAULT_FOOTER_HINT as u64;
        if size <= default {
            return DEFAULT_FOOTER_HINT;
        }
        let learned = self.learned();
        let known = learned.tail > 0 && row_groups.is_some_and(|n| n <= learned.row_groups);
        if !known {
            return DEFAULT_FOOTER_HINT;
        }
        let wanted = learned.tail.saturating_add(learned.tail / 2);
        let rounded = wanted.div_ceil(HINT_GRANULE).saturating_mul(HINT_GRANULE);
        // At most the default, which fits in a usize.
        usize::try_from(rounded.clamp(MIN_LEARNED_HINT, default)).unwrap_or(DEFAULT_FOOTER_HINT)
    }

    /// Learns from a file of `size` bytes just opened, whose footer (the metadata
    /// without its 8-byte trailer) is `footer_len` bytes. Files the default reads whole
    /// say nothing of the larger ones.
    pub fn learn(&self, size: u64, metadata: &ParquetMetaData, footer_len: u64) {
        if size <= DEFAULT_FOOTER_HINT as u64 {
            return;
        }
        let tail = tail_in_use(size, metadata, footer_len);
        let mut learned = self.learned();
        learned.tail = learned.tail.max(tail);
        learned.row_groups = learned.row_groups.max(metadata.num_row_groups());
    }
}

/// The bytes at the end of a file of `size` bytes that opening and pruning it use: its
/// footer (`footer_len` bytes of metadata and the 8-byte trailer), and the bloom
/// filters written after its last column chunk, with whatever lies between them and the
/// footer (parquet-rs writes page indexes there).
pub fn tail_in_use(size: u64, metadata: &ParquetMetaData, footer_len: u64) -> u64 {
    let columns = || metadata.row_groups().iter().flat_map(|rg| rg.columns());
    let data_end = columns()
        .map(|c| {
            let (start, len) = c.byte_range();
            start.saturating_add(len)
        })
        .max()
        .unwrap_or(0);
    let footer_start = size.saturating_sub(footer_len.saturating_add(8));
    let start = columns()
        .filter_map(|c| u64::try_from(c.bloom_filter_offset()?).ok())
        .filter(|&offset| offset >= data_end)
        .fold(footer_start, u64::min);
    size.saturating_sub(start)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::path::Path;
    use std::sync::Arc;

    use arrow_array::{ArrayRef, Int64Array, RecordBatch};
    use arrow_schema::{DataType, Field, Schema};
    use iceberg::io::FileIO;
    use parquet::arrow::{ArrowWriter, PARQUET_FIELD_ID_META_KEY};
    use parquet::file::properties::{BloomFilterPosition, WriterProperties};

    use super::*;
    use crate::parquet_io::ParquetFile;

    /// Writes `rows` rows of 20 long columns (field ids 1..) in row groups of
    /// `group_rows`, with a bloom filter on the first column placed at `position`: a
    /// file well over the default hint.
    fn write_wide(path: &Path, rows: usize, group_rows: usize, position: BloomFilterPosition) {
        let fields: Vec<Field> = (1..=20)
            .map(|id| {
                Field::new(format!("c{id}"), DataType::Int64, false).with_metadata(HashMap::from([
                    (PARQUET_FIELD_ID_META_KEY.to_string(), id.to_string()),
                ]))
            })
            .collect();
        let schema = Arc::new(Schema::new(fields));
        let columns: Vec<ArrayRef> = (0..20i64)
            .map(|c| {
                // Spread values, so the pages do not shrink to nothing.
                let values = (0..rows as i64).map(|r| (r * 7919 + c).wrapping_mul(0x9E37_79B9));
                Arc::new(Int64Array::from_iter_values(values)) as ArrayRef
            })
            .collect();
        let batch = RecordBatch::try_new(schema.clone(), columns).unwrap();
        let props = WriterProperties::builder()
            .set_max_row_group_row_count(Some(group_rows))
            .set_column_bloom_filter_enabled("c1".into(), true)
            .set_column_bloom_filter_ndv("c1".into(), 1000)
            .set_bloom_filter_position(position)
            .build();
        let mut writer =
            ArrowWriter::try_new(std::fs::File::create(path).unwrap(), schema, Some(props))
                .unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
    }

    async fn open(path: &Path, row_groups: usize, hint: &FooterHint) -> ParquetFile {
        let size = std::fs::metadata(path).unwrap().len();
        let path = path.to_str().unwrap();
        ParquetFile::open_learning(
            &FileIO::new_with_fs(),
            path,
            size,
            Some(row_groups),
            hint,
            false,
        )
        .await
        .unwrap()
    }

    /// The bloom filters of the first column that lie after the last column chunk.
    fn trailing_filters(file: &ParquetFile) -> Vec<i64> {
        let meta = file.metadata();
        let data_end = meta
            .row_groups()
            .iter()
            .flat_map(|rg| rg.columns())
            .map(|c| c.byte_range().0 + c.byte_range().1)
            .max()
            .unwrap();
        meta.row_groups()
            .iter()
            .filter_map(|rg| rg.column(0).bloom_filter_offset())
            .filter(|&offset| offset as u64 >= data_end)
            .collect()
    }

    #[tokio::test]
    async fn later_files_read_the_learned_tail_with_their_filters_in_it() {
        let dir = tempfile::tempdir().unwrap();
        for (position, filters_after_data) in [
            (BloomFilterPosition::End, 2),
            (BloomFilterPosition::AfterRowGroup, 1),
        ] {
            let hint = FooterHint::new();
            let paths: Vec<_> = (0..3)
                .map(|n| {
                    let path = dir.path().join(format!("{position:?}-{n}.parquet"));
                    write_wide(&path, 20_000, 10_000, position);
                    path
                })
                .collect();
            let size = std::fs::metadata(&paths[0]).unwrap().len();
            assert!(size > 4 * DEFAULT_FOOTER_HINT as u64, "{size} bytes");

            // The first file: the default read, learned from.
            let first = open(&paths[0], 2, &hint).await;
            assert_eq!(first.footer_read().requests, 1);
            assert_eq!(first.footer_read().bytes, DEFAULT_FOOTER_HINT as u64);
            let filters = trailing_filters(&first);
            assert_eq!(filters.len(), filters_after_data, "{position:?}");
            // What it measured: from the first trailing filter to the end.
            let bytes = std::fs::read(&paths[0]).unwrap();
            let footer_len = u32::from_le_bytes(bytes[bytes.len() - 8..][..4].try_into().unwrap());
            let first_filter = *filters.iter().min().unwrap() as u64;
            assert!(first_filter < size - u64::from(footer_len) - 8);
            assert_eq!(
                tail_in_use(size, first.metadata(), u64::from(footer_len)),
                size - first_filter
            );
            let learned = hint.for_file(size, Some(2));
            assert!(learned < DEFAULT_FOOTER_HINT, "{position:?}: {learned}");

            // The next: one read of the learned bytes, which hold the footer and the
            // filters that came with the default read.
            let second = open(&paths[1], 2, &hint).await;
            assert_eq!(second.footer_read().requests, 1, "{position:?}");
            assert_eq!(second.footer_read().bytes, learned as u64, "{position:?}");
            let filters = trailing_filters(&second);
            assert_eq!(filters.len(), filters_after_data, "{position:?}");
            assert!(
                filters.iter().all(|&o| second.in_footer_read(o)),
                "{position:?}"
            );
            // The filters read from there still say which values the file holds.
            let mut second = second;
            let row_group = second.metadata().num_row_groups() - 1;
            let filter = second.bloom_filter(row_group, 0).await.unwrap().unwrap();
            let held = (19_999i64 * 7919).wrapping_mul(0x9E37_79B9);
            assert!(filter.check(&held));

            // A file of more row groups than any measured: the default again.
            let third = open(&paths[2], 3, &hint).await;
            assert_eq!(third.footer_read().bytes, DEFAULT_FOOTER_HINT as u64);
        }
    }

    #[test]
    fn nothing_learned_reads_the_default() {
        let hint = FooterHint::new();
        assert_eq!(hint.for_file(10 << 20, Some(1)), DEFAULT_FOOTER_HINT);
        assert_eq!(hint.for_file(1000, Some(1)), DEFAULT_FOOTER_HINT);
    }

    #[test]
    fn learned_hint_covers_half_again_within_bounds() {
        let hint = FooterHint::new();
        hint.learned().tail = 14_000;
        hint.learned().row_groups = 2;
        // 21,000 rounded up to 4 KiB.
        assert_eq!(hint.for_file(400_000, Some(2)), 24 * 1024);
        assert_eq!(hint.for_file(400_000, Some(1)), 24 * 1024);
        // More row groups than measured, or unknown: the default.
        assert_eq!(hint.for_file(400_000, Some(3)), DEFAULT_FOOTER_HINT);
        assert_eq!(hint.for_file(400_000, None), DEFAULT_FOOTER_HINT);
        // Small files are still read whole.
        assert_eq!(hint.for_file(50_000, Some(1)), DEFAULT_FOOTER_HINT);
        // Tiny footers read the floor, huge ones the default.
        hint.learned().tail = 500;
        assert_eq!(hint.for_file(400_000, Some(1)), MIN_LEARNED_HINT as usize);
        hint.learned().tail = 60_000;
        assert_eq!(hint.for_file(400_000, Some(1)), DEFAULT_FOOTER_HINT);
    }

    /// The c1 values a file reads, through a stream of its first column.
    async fn first_column(file: ParquetFile) -> Vec<i64> {
        use futures::TryStreamExt;
        let field = Arc::new(iceberg::spec::NestedField::required(
            1,
            "c1",
            iceberg::spec::Type::Primitive(iceberg::spec::PrimitiveType::Long),
        ));
        let batches: Vec<_> = file
            .read(&[field], None, 1024)
            .unwrap()
            .try_collect()
            .await
            .unwrap();
        crate::parquet_io::tests::first_long_column(&batches)
    }

    /// A later resolve with the same cache opens a file without a request and reads the
    /// same rows; a file of another size than the one kept is not served from it; over
    /// its capacity the least recently used footer goes.
    #[tokio::test]
    async fn a_kept_footer_opens_the_file_without_a_request() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.parquet");
        write_wide(&a, 4000, 1000, BloomFilterPosition::End);
        let cache = FooterCache::with_capacity(64 << 20);

        let cold = open(&a, 4, &FooterHint::with_cache(cache.clone())).await;
        assert!(cold.footer_read().requests >= 1);
        assert_eq!((cache.len(), cache.hits()), (1, 0));
        let cold_rows = first_column(cold).await;

        let warm = open(&a, 4, &FooterHint::with_cache(cache.clone())).await;
        assert_eq!(warm.footer_read().requests, 0, "opened from the cache");
        assert_eq!(warm.footer_read().bytes, 0);
        assert!(!warm.in_footer_read(0), "every read of it is a request");
        assert_eq!(warm.row_group_rows(), vec![1000; 4]);
        assert_eq!(cache.hits(), 1);
        assert_eq!(first_column(warm).await, cold_rows, "the same rows");

        let size = std::fs::metadata(&a).unwrap().len();
        let path = a.to_str().unwrap();
        assert!(cache.get(path, size).is_some());
        assert!(
            cache.get(path, size + 1).is_none(),
            "another size is another file"
        );

        // Room for four and a half footers: a fifth file drops the least recently used
        // (down to three quarters of the room), not the one used again since.
        let one = cache.bytes();
        let room = one * 4 + one / 2;
        let small = FooterCache::with_capacity(room);
        let files: Vec<_> = (0..5)
            .map(|i| {
                let f = dir.path().join(format!("f{i}.parquet"));
                write_wide(&f, 4000, 1000, BloomFilterPosition::End);
                f
            })
            .collect();
        for f in &files[..4] {
            open(f, 4, &FooterHint::with_cache(small.clone())).await;
        }
        assert_eq!(small.len(), 4, "four fit");
        let again = open(&files[0], 4, &FooterHint::with_cache(small.clone())).await;
        assert_eq!(again.footer_read().requests, 0);
        open(&files[4], 4, &FooterHint::with_cache(small.clone())).await;
        assert!(small.bytes() <= room / 4 * 3, "{} of {room}", small.bytes());
        let kept = |i: usize| {
            let size = std::fs::metadata(&files[i]).unwrap().len();
            small.get(files[i].to_str().unwrap(), size).is_some()
        };
        assert_eq!(
            (0..5).map(kept).collect::<Vec<_>>(),
            vec![true, false, false, true, true],
            "the least recently used went"
        );

        // Off, nothing is kept and every open reads.
        let off = FooterCache::default();
        let read = open(&a, 4, &FooterHint::with_cache(off.clone())).await;
        assert!(read.footer_read().requests >= 1);
        assert!(off.is_empty());
    }
}
