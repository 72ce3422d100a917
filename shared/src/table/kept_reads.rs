//! The manifest lists and manifests a table read, kept by path for a later read of the
//! same table state (a planner converting what it just planned, a warm Lambda
//! instance's next invocation).

use std::collections::HashMap;
use std::sync::Arc;

#[cfg(doc)]
use super::LoadedTable;
use crate::Result;

/// The manifest lists and manifests a [`LoadedTable`] (and its clones) read, kept by
/// path: Iceberg never rewrites a file under its path, so a second read of the same
/// table state (the planner converting the shard it just planned) needs no request.
/// Off by default; at most [`KEPT_READS_MAX_BYTES`] are kept.
///
/// One store may also outlive the tables that use it: a warm Lambda process's planner
/// keeps one across its invocations (see [`KeptReads::next_invocation`]), since the
/// next commit's snapshot lists all but a few of the manifests the last one did.
#[derive(Clone, Debug, Default)]
pub struct KeptReads(Option<Arc<std::sync::Mutex<KeptFiles>>>);

#[derive(Debug, Default)]
struct KeptFiles {
    files: HashMap<String, KeptFile>,
    bytes: usize,
    /// Counts [`KeptReads::next_invocation`] calls: which invocation a use belongs to.
    invocation: u64,
    /// Files read through the store (not found kept), since it was made.
    fetched: u64,
}

#[derive(Debug)]
struct KeptFile {
    bytes: bytes::Bytes,
    /// The last invocation that read or used it.
    used_in: u64,
}

/// The most bytes of manifests one table keeps: a table whose manifests are larger is
/// not one a planner converts in its own invocation.
pub const KEPT_READS_MAX_BYTES: usize = 256 << 20;

/// The most bytes a store keeps from one invocation for the next: what a warm planner
/// holds between invocations (a streaming table's manifests are a few MB).
pub const KEPT_ACROSS_INVOCATIONS_MAX_BYTES: usize = 64 << 20;

/// Invocations (of those that used the store) a file stays kept without being used: a
/// planner serving a few tables in turn keeps each one's.
pub const KEPT_FOR_INVOCATIONS: u64 = 4;

impl KeptReads {
    /// A store that keeps reads (what [`LoadedTable::keeping_reads`] gives a table).
    pub fn new_store() -> Self {
        Self(Some(Default::default()))
    }

    /// The file at `path`: kept, or read by `read` (and kept while there is room). A
    /// kept file whose length is not `expected_len` (a manifest's length as its list
    /// gives it) is not used: it is read again and replaced.
    pub(crate) async fn get_or_read<F>(
        &self,
        path: &str,
        expected_len: Option<u64>,
        read: F,
    ) -> Result<bytes::Bytes>
    where
        F: std::future::Future<Output = Result<bytes::Bytes>>,
    {
        let Some(kept) = &self.0 else {
            return read.await;
        };
        if let Ok(mut k) = kept.lock() {
            let invocation = k.invocation;
            if let Some(file) = k.files.get_mut(path)
                && expected_len.is_none_or(|len| len == file.bytes.len() as u64)
            {
                file.used_in = invocation;
                return Ok(file.bytes.clone());
            }
        }
        let bytes = read.await?;
        if let Ok(mut k) = kept.lock() {
            k.fetched += 1;
            if let Some(stale) = k.files.remove(path) {
                k.bytes -= stale.bytes.len();
            }
            if k.bytes + bytes.len() <= KEPT_READS_MAX_BYTES {
                let used_in = k.invocation;
                k.bytes += bytes.len();
                k.files.insert(
                    path.to_string(),
                    KeptFile {
                        bytes: bytes.clone(),
                        used_in,
                    },
                );
            }
        }
        Ok(bytes)
    }

    /// Starts the next invocation of a process that keeps this store across them. A
    /// file stays while one of the last [`KEPT_FOR_INVOCATIONS`] invocations that used
    /// the store read or used it, and the least recently used go first while more than
    /// [`KEPT_ACROSS_INVOCATIONS_MAX_BYTES`] are kept. An invocation that used nothing
    /// (the event of eqdv's own commit, which needs no manifest) does not count: the
    /// files stay for the next commit's.
    pub fn next_invocation(&self) {
        let Some(kept) = &self.0 else {
            return;
        };
        let Ok(mut k) = kept.lock() else {
            return;
        };
        let ending = k.invocation;
        if !k.files.values().any(|f| f.used_in == ending) {
            return;
        }
        k.files
            .retain(|_, file| file.used_in + KEPT_FOR_INVOCATIONS > ending);
        k.bytes = k.files.values().map(|f| f.bytes.len()).sum();
        let KeptFiles { files, bytes, .. } = &mut *k;
        crate::lru::drop_least_recently_used(
            files,
            bytes,
            KEPT_ACROSS_INVOCATIONS_MAX_BYTES,
            |f| f.used_in,
            |f| f.bytes.len(),
        );
        k.invocation += 1;
    }

    /// Whether reads are kept at all.
    pub fn is_on(&self) -> bool {
        self.0.is_some()
    }

    /// How many files are kept.
    pub fn len(&self) -> usize {
        self.0
            .as_ref()
            .and_then(|k| k.lock().ok().map(|k| k.files.len()))
            .unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many files were read through this store since it was made (were not kept).
    pub fn fetched(&self) -> u64 {
        self.0
            .as_ref()
            .and_then(|k| k.lock().ok().map(|k| k.fetched))
            .unwrap_or(0)
    }

    /// How many bytes are kept.
    pub fn bytes(&self) -> usize {
        self.0
            .as_ref()
            .and_then(|k| k.lock().ok().map(|k| k.bytes))
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod kept_reads_tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::Error;

    /// Kept, a file is read once for the table and all its clones; a failed read keeps
    /// nothing; off (the default), every read is a read.
    #[tokio::test]
    async fn a_kept_file_is_read_once_for_the_table_and_its_clones() {
        let reads = AtomicUsize::new(0);
        let read = |ok: bool| {
            let reads = &reads;
            async move {
                reads.fetch_add(1, Ordering::SeqCst);
                if ok {
                    Ok(bytes::Bytes::from_static(b"manifest"))
                } else {
                    Err(Error::InvalidInput("unreadable".into()))
                }
            }
        };
        let kept = KeptReads::new_store();
        assert!(kept.get_or_read("m.avro", None, read(false)).await.is_err());
        assert!(kept.is_empty(), "a failed read is not kept");
        for table in [&kept, &kept.clone()] {
            let bytes = table.get_or_read("m.avro", None, read(true)).await.unwrap();
            assert_eq!(&bytes[..], b"manifest");
        }
        assert_eq!(reads.load(Ordering::SeqCst), 2, "one failed read, one read");
        assert_eq!(kept.len(), 1);

        let off = KeptReads::default();
        for _ in 0..2 {
            off.get_or_read("m.avro", None, read(true)).await.unwrap();
        }
        assert_eq!(reads.load(Ordering::SeqCst), 4);
        assert!(off.is_empty());
    }

    /// Across invocations a store keeps what the last few invocations read or used,
    /// and drops what none of them did (a snapshot no longer read); an invocation that
    /// used nothing does not count; a kept file of another length than the list gives
    /// is read again.
    #[tokio::test]
    async fn a_store_keeps_what_recent_invocations_used() {
        let reads = AtomicUsize::new(0);
        let read = |content: &'static [u8]| {
            let reads = &reads;
            async move {
                reads.fetch_add(1, Ordering::SeqCst);
                Ok(bytes::Bytes::from_static(content))
            }
        };
        let store = KeptReads::new_store();
        store.get_or_read("a", Some(1), read(b"a")).await.unwrap();
        store.get_or_read("b", None, read(b"bb")).await.unwrap();
        // Then invocations that use a only, and some that use nothing at all.
        for i in 0..KEPT_FOR_INVOCATIONS {
            store.next_invocation();
            store.next_invocation();
            assert_eq!(store.len(), 2, "b dropped after {i} invocations");
            store.get_or_read("a", Some(1), read(b"a")).await.unwrap();
        }
        assert_eq!(reads.load(Ordering::SeqCst), 2, "a was kept");
        store.next_invocation();
        assert_eq!(
            (store.len(), store.bytes()),
            (1, 1),
            "b, unused for long, dropped"
        );
        // a's list gives another length: it is read again and replaced.
        let again = store.get_or_read("a", Some(2), read(b"aa")).await.unwrap();
        assert_eq!(&again[..], b"aa");
        assert_eq!(reads.load(Ordering::SeqCst), 3);
        assert_eq!((store.len(), store.bytes()), (1, 2));

        // A store off keeps nothing across invocations either.
        let off = KeptReads::default();
        off.next_invocation();
        assert!(off.is_empty());
    }

    /// Over the bytes carried across invocations, the least recently used go first.
    #[tokio::test]
    async fn the_least_recently_used_go_first_over_the_bytes_carried() {
        let store = KeptReads::new_store();
        let big = bytes::Bytes::from(vec![0u8; KEPT_ACROSS_INVOCATIONS_MAX_BYTES / 2 + 1]);
        for path in ["x", "y"] {
            let bytes = big.clone();
            store
                .get_or_read(path, None, async move { Ok(bytes) })
                .await
                .unwrap();
            store.next_invocation();
        }
        assert_eq!(store.len(), 1, "both do not fit");
        let kept = store
            .get_or_read("y", None, async { Err(Error::InvalidInput("read".into())) })
            .await;
        assert!(kept.is_ok(), "the one used last is kept");
    }
}
