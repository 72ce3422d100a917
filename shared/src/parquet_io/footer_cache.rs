//! Footers of data files kept across resolves, for a process that converts the same
//! table again and again: a warm Lambda instance converting a streaming table after
//! each commit opens, every time, the data files that hold its hot keys.
//!
//! Iceberg never rewrites a file under its path, so a footer read once is that file's
//! footer for good. Kept by path and size (the manifest's), with the bytes its footer
//! read fetched (the footer, the bloom filters near it, and, in a small file, its
//! column chunks too), a file found here opens with no request and reads what that read
//! held with none: as if it had just been opened. Bounded in bytes (the decoded footer
//! and the bytes kept); the least recently used go first. Off unless made with a
//! capacity.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use parquet::arrow::arrow_reader::ArrowReaderMetadata;

/// Data file footers kept across resolves (clones share them).
#[derive(Clone, Debug, Default)]
pub struct FooterCache(Option<Arc<Mutex<Kept>>>);

#[derive(Debug, Default)]
struct Kept {
    files: HashMap<String, KeptFooter>,
    bytes: usize,
    max_bytes: usize,
    /// Counts uses: an entry's `used` is the count at its last use.
    clock: u64,
    hits: u64,
    range_hits: u64,
}

#[derive(Debug)]
struct KeptFooter {
    size: u64,
    footer: KeptOpen,
    /// Byte ranges of the file read after its footer (see [`FooterCache::keep_range`]):
    /// `(offset, bytes)`.
    ranges: Vec<(u64, Bytes)>,
    ranges_bytes: usize,
    /// The footer's and the ranges' bytes.
    bytes: usize,
    used: u64,
}

/// The most bytes of ranges kept for one file, as a share of the capacity: a file read
/// in a few places keeps them, one read through does not push out every other file.
const RANGES_SHARE_PER_FILE: usize = 16;

/// What opening a file read: its decoded footer, and the file's last bytes from
/// `tail.0` on as the footer's read fetched them.
#[derive(Clone, Debug)]
pub(crate) struct KeptOpen {
    pub metadata: ArrowReaderMetadata,
    pub tail: Option<(u64, Bytes)>,
}

impl Kept {
    /// Past the capacity, drops the least recently used files down to three quarters
    /// of it (so that a full cache does not sort its entries on every footer).
    fn make_room(&mut self) {
        if self.bytes <= self.max_bytes {
            return;
        }
        let target = self.max_bytes / 4 * 3;
        crate::lru::drop_least_recently_used(
            &mut self.files,
            &mut self.bytes,
            target,
            |f| f.used,
            |f| f.bytes,
        );
    }
}

impl FooterCache {
    /// A cache of at most `max_bytes` of footers and the bytes read with them; off for 0.
    pub fn with_capacity(max_bytes: usize) -> Self {
        if max_bytes == 0 {
            return Self(None);
        }
        Self(Some(Arc::new(Mutex::new(Kept {
            max_bytes,
            ..Default::default()
        }))))
    }

    pub fn is_on(&self) -> bool {
        self.0.is_some()
    }

    fn kept(&self) -> Option<std::sync::MutexGuard<'_, Kept>> {
        // Counters and whole entries: usable after any panic.
        self.0
            .as_ref()
            .map(|k| k.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// The footer of the file at `path` if it is kept for a file of `size` bytes.
    pub(crate) fn get(&self, path: &str, size: u64) -> Option<KeptOpen> {
        let mut kept = self.kept()?;
        kept.clock += 1;
        let clock = kept.clock;
        let found = kept.files.get_mut(path).filter(|f| f.size == size)?;
        found.used = clock;
        let footer = found.footer.clone();
        kept.hits += 1;
        Some(footer)
    }

    /// Keeps the footer of the file at `path` of `size` bytes, making room by dropping
    /// the least recently used (down to three quarters of the capacity, so that a full
    /// cache does not sort its entries on every footer). A footer larger than a quarter
    /// of the capacity is not kept.
    pub(crate) fn keep(&self, path: &str, size: u64, footer: KeptOpen) {
        let Some(mut kept) = self.kept() else {
            return;
        };
        let bytes = footer.metadata.metadata().memory_size()
            + footer.tail.as_ref().map_or(0, |(_, tail)| tail.len());
        if bytes > kept.max_bytes / 4 {
            return;
        }
        kept.clock += 1;
        let used = kept.clock;
        if let Some(old) = kept.files.insert(
            path.to_string(),
            KeptFooter {
                size,
                footer,
                ranges: Vec::new(),
                ranges_bytes: 0,
                bytes,
                used,
            },
        ) {
            kept.bytes -= old.bytes;
        }
        kept.bytes += bytes;
        kept.make_room();
    }

    /// The bytes `range` of the file at `path` of `size` bytes, if a read kept with
    /// [`FooterCache::keep_range`] holds all of them.
    pub(crate) fn get_range(&self, path: &str, size: u64, range: &Range<u64>) -> Option<Bytes> {
        let mut kept = self.kept()?;
        kept.clock += 1;
        let clock = kept.clock;
        let file = kept.files.get_mut(path).filter(|f| f.size == size)?;
        let bytes = file
            .ranges
            .iter()
            .find_map(|(offset, bytes)| super::reader::slice_within(*offset, bytes, range))?;
        file.used = clock;
        kept.range_hits += 1;
        Some(bytes)
    }

    /// Keeps `bytes`, read at `offset` from the file at `path` of `size` bytes, for later
    /// reads of the same place: Iceberg and eqdv never rewrite a file under its path, so
    /// they stay its bytes. Only for a file whose footer is kept (it goes with it), and
    /// while its ranges take at most a sixteenth of the capacity.
    pub(crate) fn keep_range(&self, path: &str, size: u64, offset: u64, bytes: Bytes) {
        let Some(mut kept) = self.kept() else {
            return;
        };
        let per_file = kept.max_bytes / RANGES_SHARE_PER_FILE;
        let Some(file) = kept.files.get_mut(path).filter(|f| f.size == size) else {
            return;
        };
        let wanted = offset..offset + bytes.len() as u64;
        let held = file
            .ranges
            .iter()
            .any(|(at, kept)| super::reader::slice_within(*at, kept, &wanted).is_some());
        if held || file.ranges_bytes + bytes.len() > per_file {
            return;
        }
        let len = bytes.len();
        file.ranges.push((offset, bytes));
        file.ranges_bytes += len;
        file.bytes += len;
        kept.bytes += len;
        kept.make_room();
    }

    /// The most bytes kept (0 when off).
    pub fn capacity(&self) -> usize {
        self.kept().map_or(0, |k| k.max_bytes)
    }

    /// Footers kept.
    pub fn len(&self) -> usize {
        self.kept().map_or(0, |k| k.files.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes kept (decoded footers and the bytes their reads fetched).
    pub fn bytes(&self) -> usize {
        self.kept().map_or(0, |k| k.bytes)
    }

    /// Opens served from the cache since it was made.
    pub fn hits(&self) -> u64 {
        self.kept().map_or(0, |k| k.hits)
    }

    /// Reads of byte ranges served from the cache since it was made.
    pub fn range_hits(&self) -> u64 {
        self.kept().map_or(0, |k| k.range_hits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Int64Array, RecordBatch};
    use parquet::arrow::ArrowWriter;
    use parquet::arrow::arrow_reader::ArrowReaderOptions;

    fn footer() -> KeptOpen {
        let batch = RecordBatch::try_from_iter([(
            "k",
            Arc::new(Int64Array::from(vec![1, 2, 3])) as arrow_array::ArrayRef,
        )])
        .unwrap();
        let mut out = Vec::new();
        let mut writer = ArrowWriter::try_new(&mut out, batch.schema(), None).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
        let metadata =
            ArrowReaderMetadata::load(&Bytes::from(out), ArrowReaderOptions::new()).unwrap();
        KeptOpen {
            metadata,
            tail: None,
        }
    }

    #[test]
    fn ranges_are_kept_with_their_files_footer_and_found_inside_what_was_read() {
        let cache = FooterCache::with_capacity(16 << 20);
        let bytes = Bytes::from_static(b"0123456789");
        // No footer kept for the file: nothing to keep the range with.
        cache.keep_range("a", 100, 20, bytes.clone());
        assert_eq!(cache.get_range("a", 100, &(20..30)), None);

        cache.keep("a", 100, footer());
        let before = cache.bytes();
        cache.keep_range("a", 100, 20, bytes.clone());
        assert_eq!(cache.bytes(), before + 10);
        // Bytes already held (two readers of the same pages at once) are kept once.
        cache.keep_range("a", 100, 22, bytes.slice(2..5));
        assert_eq!(cache.bytes(), before + 10);
        assert_eq!(
            cache.get_range("a", 100, &(22..25)),
            Some(Bytes::from_static(b"234"))
        );
        assert_eq!(cache.get_range("a", 100, &(20..30)), Some(bytes.clone()));
        assert_eq!(cache.range_hits(), 2);
        // Not wholly inside, another size of the file, another file: not found.
        assert_eq!(cache.get_range("a", 100, &(25..31)), None);
        assert_eq!(cache.get_range("a", 101, &(22..25)), None);
        assert_eq!(cache.get_range("b", 100, &(22..25)), None);
        assert_eq!(cache.range_hits(), 2);

        // A file's ranges take at most a sixteenth of the capacity.
        let small = FooterCache::with_capacity(64 * 1024);
        small.keep("a", 100, footer());
        assert_eq!(small.len(), 1);
        small.keep_range("a", 100, 0, Bytes::from(vec![0u8; 4097]));
        assert_eq!(small.get_range("a", 100, &(0..1)), None);
        small.keep_range("a", 100, 0, Bytes::from(vec![0u8; 4000]));
        assert!(small.get_range("a", 100, &(0..1)).is_some());
        // A footer kept again starts with no ranges.
        small.keep("a", 100, footer());
        assert_eq!(small.get_range("a", 100, &(0..1)), None);
    }
}
