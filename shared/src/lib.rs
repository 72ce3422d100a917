//! eqdv's engine: converts the live equality deletes of an Apache Iceberg v3 table into
//! deletion vectors (DVs) and commits the result as a row-delta snapshot.
//!
//! One module per concern (see DESIGN.md): `catalog` (load + compare-and-swap),
//! `table` (manifests and live files, decoded by `manifest_decode`), `plan` (groups and shards), `resolve` (keys to
//! positions), `dv`/`puffin` (the blob codec and Puffin files), `snapshot` (building a
//! new snapshot), `convert` (the commit protocol with validation and retries),
//! `generate` (CDC workloads for tests and demos), `read` (a DV-aware reader used to
//! check results), `events` (what the planner is asked to do, and shard messages),
//! `planner` (triggers to shards, with reasons for what it skips), `verify` (DV checks
//! as readers make them) and `cleanup` (orphan files).

pub mod catalog;
pub mod cleanup;
pub mod commit;
pub mod convert;
pub mod dv;
pub mod error;
pub mod events;
pub mod generate;
pub mod inspect;
pub mod keys;
pub mod manifest_decode;
pub mod parquet_io;
pub mod parquet_reader;
pub mod plan;
pub mod planner;
pub mod position_deletes;
pub mod puffin;
pub mod read;
pub mod resolve;
pub mod snapshot;
pub mod storage;
pub mod table;
pub mod test_hooks;
pub mod verify;

pub use error::{Error, ErrorKind, Result};
