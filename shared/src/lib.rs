//! eqdv's engine: converts the live equality deletes of an Apache Iceberg v3 table into
//! deletion vectors (DVs) and commits the result as a row-delta snapshot. The rules it
//! follows (which rows a delete removes, the DV bytes, the commit protocol) are written
//! down in docs/design.md.
//!
//! The modules, in the order data flows through a conversion:
//! - `catalog`: where a table's metadata pointer lives (Glue, SQLite) and its
//!   compare-and-swap.
//! - `table`: loading a table, the live files of a snapshot (pruned by a `DataScope`)
//!   and the reads a warm instance keeps; `manifest_decode` is its fast manifest
//!   decoder; `partition` compares partition tuples as values; `summary_keys` names
//!   the snapshot summary properties read and written.
//! - `plan`: which equality deletes are live, how they group, and how work splits into
//!   shards; `planner` turns triggers (a table changed, a backfill, a sweep) into shards
//!   with reasons for what it skips. Lambda event shapes and SQS ids live with the
//!   functions (`eqdv_functions::events`, `eqdv_functions::queue`).
//! - `resolve`: deleted keys to row positions (keys, pruning, the parallel scan), over
//!   `parquet_io` (columns by field id, name mapping, defaults, exact casts; its
//!   `reader` is the byte source); `keys` encodes key values as bytes;
//!   `position_deletes` reads v2 position delete files; `key_index` is the persisted
//!   index of key hashes to data files that lets a resolve read only the files holding
//!   a deleted key (kept up to date by each conversion).
//! - `dv`: the deletion-vector blob codec; `puffin`: Puffin files of DVs.
//! - `snapshot`: a new snapshot on a base (manifests, list, summary); `commit`: the
//!   metadata write, the pointer swap and reading an unknown outcome back.
//! - `convert`: the conversion job: attempts, merging with existing deletes,
//!   validation and retries, and one conversion split into data ranges committed once;
//!   `data_range` says which range of a split a data file belongs to.
//! - `staging`: the staging mode: a staging branch's snapshots applied to a target
//!   branch as data files and DVs, reusing the conversion's resolve and merge.
//! - `inspect`: what a table holds, for operators; `verify`: DV checks as readers make
//!   them; `cleanup`: orphan files.
//! - `storage`: file names and I/O helpers; `error`: the typed error;
//!   `test_hooks`: named pause points for fault tests.
//!
//! Arrows point one way: no module imports one that imports it back, directly or
//! through others (`tests/module_arrows.rs` keeps it so).
//!
//! The CDC workload generator and eqdv's own reader (the test oracle) live in the
//! `eqdv-workload` crate (shared/workload), outside what the functions run; the tests'
//! shared harness is `eqdv-test-support` (tests/support).

mod avro_columns;
pub mod catalog;
pub mod cleanup;
pub mod columns;
pub mod commit;
pub mod convert;
pub mod current_dv;
pub mod data_range;
pub mod dv;
pub mod error;
pub mod file_rows;
pub mod inspect;
pub mod key_index;
pub mod keys;
pub mod location;
mod lru;
pub mod manifest_decode;
pub mod orc_io;
pub mod parquet_io;
pub mod partition;
pub mod plan;
pub mod planner;
pub mod position_deletes;
pub mod progress;
pub mod puffin;
pub mod refs;
pub mod resolve;
pub mod snapshot;
pub mod staging;
pub mod storage;
pub mod summary_keys;
pub mod table;
#[cfg(test)]
mod test_fixtures;
pub mod test_hooks;
pub mod verify;

pub use error::{Error, ErrorKind, Result};
