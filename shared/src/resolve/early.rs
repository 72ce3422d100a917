//! Footers fetched while the delete files still load.
//!
//! Against object storage a resolve is two waves of round trips: the delete files (bound
//! pruning needs their keys), then the surviving candidates' footers. But bound pruning
//! is monotone: once a key already loaded lies within a candidate's bounds, the candidate
//! survives whatever the other keys are. So as a group's delete files are consumed, its
//! in-scope candidates are checked against the keys loaded so far, and the footer of each
//! one confirmed is fetched at once, sharing the delete files' reads in flight. Its row
//! groups are pruned and its key columns read only once every key is loaded, as before.
//!
//! Exact, never speculative: a footer opened early is one the scan opens anyway, so no
//! request is added. Bounded: at most `4 x parallelism` footers are held before the scan
//! takes them; the candidates are checked at 1, 2, 4, 8... delete files consumed (and
//! when the keys gathered since the last check grow large), at most `MAX_CHECKS_PER_FILE`
//! times each, so a group with few survivors among many candidates costs a few bound
//! checks per candidate, not one per delete file. Only a resolve in one key pass opens
//! early (a later pass's keys are another share).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use arrow_array::{Array, ArrayRef};
use iceberg::io::FileIO;
use tokio::task::JoinHandle;

use super::budget::ReadBudget;
use super::group_keys::ColumnValues;
use super::prune::{DeletedValues, may_match_bounds};
use crate::keys::KeyColumns;
use crate::parquet_io::{FooterHint, ParquetFile};
use crate::table::LiveFile;
use crate::{Error, Result};

/// Footers opened early per read in flight (the most held before the scan takes them).
const HELD_PER_READ: usize = 4;

/// Times a candidate is checked against newly loaded keys before the group stops
/// checking: with checks at 1, 2, 4, 8... files, the last covers half the keys of a
/// group of up to 2^(n-1) files.
const MAX_CHECKS_PER_FILE: usize = 8;

/// Encoded bytes of keys gathered between two checks before they are checked early.
const GATHERED_BYTES: usize = 8 << 20;

/// An open of a data file's footer in flight or done, as the scan takes it over.
pub(super) type EarlyOpen = JoinHandle<Result<ParquetFile>>;

/// The footers opened early, shared by the groups' loads and taken by the scans.
pub(super) struct EarlyOpens {
    file_io: FileIO,
    budget: Arc<ReadBudget>,
    footer_hint: Arc<FooterHint>,
    limit: usize,
    state: Mutex<Opened>,
}

#[derive(Default)]
struct Opened {
    /// By path, until the scan takes it.
    opens: HashMap<String, EarlyOpen>,
    /// Footers opened early so far (taken or not).
    count: usize,
}

impl EarlyOpens {
    pub(super) fn new(
        file_io: FileIO,
        budget: Arc<ReadBudget>,
        footer_hint: Arc<FooterHint>,
        parallelism: usize,
    ) -> Self {
        Self {
            file_io,
            budget,
            footer_hint,
            limit: parallelism.max(1).saturating_mul(HELD_PER_READ),
            state: Mutex::default(),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, Opened> {
        // The state is a map and a count, whole after any panic.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether no more footers are opened early.
    fn full(&self) -> bool {
        self.state().count >= self.limit
    }

    /// Starts fetching `data`'s footer, unless it is being fetched or the limit is met.
    /// Each open holds one of the delete file reads' slots, so the reads in flight stay
    /// within the parallelism.
    fn open(&self, data: &LiveFile) {
        // Only Parquet footers steer a scan (row groups pruned by statistics and
        // bloom filters); files in other formats are read whole when scanned.
        if data.file.file_format() != iceberg::spec::DataFileFormat::Parquet {
            return;
        }
        let mut state = self.state();
        if state.count >= self.limit || state.opens.contains_key(data.path()) {
            return;
        }
        let (file_io, budget) = (self.file_io.clone(), self.budget.clone());
        let hint = self.footer_hint.clone();
        let (path, size) = (data.path().to_string(), data.file.file_size_in_bytes());
        let row_groups = data.row_groups();
        let task = {
            let path = path.clone();
            tokio::spawn(async move {
                let _slot = budget.file().await?;
                ParquetFile::open_learning(&file_io, &path, size, row_groups, &hint, false).await
            })
        };
        state.opens.insert(path, task);
        state.count += 1;
    }

    /// The open of `path`'s footer, if one was started early: the scan's to await.
    pub(super) fn take(&self, path: &str) -> Option<EarlyOpen> {
        self.state().opens.remove(path)
    }
}

impl EarlyOpens {
    /// Opens started early that no scan took.
    pub(super) fn left_over(&self) -> usize {
        self.state().opens.len()
    }
}

impl Drop for EarlyOpens {
    /// Opens no scan took (the resolve failed or was dropped) stop.
    fn drop(&mut self) {
        for (_, open) in self.state().opens.drain() {
            open.abort();
        }
    }
}

/// One group's in-scope candidates not yet confirmed, checked as its delete files load.
pub(super) struct GroupWatch<'a> {
    opens: &'a EarlyOpens,
    candidates: Vec<&'a LiveFile>,
    /// Per key column, the values loaded since the last check (unsorted).
    gathered: Vec<ColumnValues>,
    files_loaded: usize,
    next_check_at: usize,
    checks_left: usize,
}

impl<'a> GroupWatch<'a> {
    /// Watches `candidates` (the group's data files in scope). Without bound pruning
    /// every one of them is read, so each is opened at once.
    pub(super) fn new(
        opens: &'a EarlyOpens,
        candidates: Vec<&'a LiveFile>,
        key_columns: usize,
        bound_pruning: bool,
    ) -> Self {
        let mut watch = Self {
            opens,
            candidates,
            gathered: ColumnValues::empty_columns(key_columns),
            files_loaded: 0,
            next_check_at: 1,
            checks_left: MAX_CHECKS_PER_FILE,
        };
        if !bound_pruning {
            for data in watch.candidates.drain(..) {
                opens.open(data);
            }
        }
        watch
    }

    /// Whether there is nothing left to do (then keys are no longer gathered).
    fn done(&self) -> bool {
        self.candidates.is_empty() || self.checks_left == 0 || self.opens.full()
    }

    /// Gathers a loaded batch of the group's key columns (in key order). An optimisation
    /// only: a batch it cannot encode stops the watch (the load itself reports errors).
    pub(super) fn add_batch(&mut self, key_columns: &KeyColumns, columns: &[ArrayRef]) {
        if self.done() {
            return;
        }
        for (i, column) in columns.iter().enumerate() {
            // The leaf's values, null under a null struct too.
            let Ok(column) = crate::keys::leaf(column) else {
                self.checks_left = 0;
                return;
            };
            let Ok(encoded) = key_columns.encode_column(i, &column) else {
                self.checks_left = 0;
                return;
            };
            let gathered = &mut self.gathered[i];
            for (row, value) in encoded.iter().enumerate() {
                if column.is_valid(row) {
                    gathered.push(value.as_ref());
                } else {
                    gathered.has_null = true;
                }
            }
        }
        if self
            .gathered
            .iter()
            .map(ColumnValues::byte_len)
            .sum::<usize>()
            >= GATHERED_BYTES
        {
            self.check(key_columns);
        }
    }

    /// One more delete file of the group is consumed.
    pub(super) fn file_loaded(&mut self, key_columns: &KeyColumns) {
        self.files_loaded += 1;
        if self.files_loaded >= self.next_check_at {
            self.next_check_at = self.files_loaded.saturating_mul(2);
            self.check(key_columns);
        }
    }

    /// Every delete file of the group is consumed: the group's survivors open while
    /// other groups may still load.
    pub(super) fn all_loaded(&mut self, key_columns: &KeyColumns) {
        self.check(key_columns);
    }

    /// Opens every candidate whose bounds admit a value gathered since the last check.
    fn check(&mut self, key_columns: &KeyColumns) {
        if self.done() {
            return;
        }
        self.checks_left -= 1;
        let gathered = Gathered(
            std::mem::take(&mut self.gathered)
                .into_iter()
                .map(ColumnValues::sorted)
                .collect(),
        );
        self.gathered = ColumnValues::empty_columns(key_columns.len());
        let opens = self.opens;
        self.candidates.retain(|data| {
            if opens.full() || !may_match_bounds(key_columns, &gathered, data) {
                return true;
            }
            opens.open(data);
            false
        });
    }
}

/// Values gathered between two checks, sorted per key column.
struct Gathered(Vec<ColumnValues>);

impl DeletedValues for Gathered {
    fn column_has_null(&self, i: usize) -> bool {
        self.0[i].has_null
    }

    fn column_any_within(
        &self,
        i: usize,
        lower: Option<&[u8]>,
        upper: Option<&[u8]>,
    ) -> Result<bool> {
        Ok(self.0[i].any_within(lower, upper))
    }
}

/// The footer of an open started early, as the scan takes it over.
pub(super) async fn finish(path: &str, open: EarlyOpen) -> Result<ParquetFile> {
    open.await.map_err(|e| Error::ScanTask {
        path: path.to_string(),
        message: e.to_string(),
    })?
}
