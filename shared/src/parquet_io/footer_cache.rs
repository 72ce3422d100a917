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
}

#[derive(Debug)]
struct KeptFooter {
    size: u64,
    footer: KeptOpen,
    bytes: usize,
    used: u64,
}

/// What opening a file read: its decoded footer, and the file's last bytes from
/// `tail.0` on as the footer's read fetched them.
#[derive(Clone, Debug)]
pub(crate) struct KeptOpen {
    pub metadata: ArrowReaderMetadata,
    pub tail: Option<(u64, Bytes)>,
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
                bytes,
                used,
            },
        ) {
            kept.bytes -= old.bytes;
        }
        kept.bytes += bytes;
        if kept.bytes > kept.max_bytes {
            let target = kept.max_bytes / 4 * 3;
            let Kept {
                files,
                bytes: kept_bytes,
                ..
            } = &mut *kept;
            crate::lru::drop_least_recently_used(
                files,
                kept_bytes,
                target,
                |f| f.used,
                |f| f.bytes,
            );
        }
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
}
