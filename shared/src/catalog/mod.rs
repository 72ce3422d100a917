//! Catalogs: where a table's current metadata pointer lives.
//!
//! eqdv needs only two things from a catalog: read the pointer (with a version token
//! for optimistic concurrency) and swap it atomically. A swap must never succeed
//! against a pointer that moved since it was read; that is what keeps concurrent
//! writers safe. Creating and listing tables serve the workload generator and sweeps.

mod aws_failure;
mod glue;
mod rest;
mod s3tables;
mod sqlite;
mod storage;

use std::fmt;

use async_trait::async_trait;
pub use glue::{GlueCatalog, GlueConfig};
use iceberg::TableUpdate;
use iceberg::io::FileIO;
use iceberg::spec::TableMetadata;
pub use rest::{RestAuth, RestCatalog, RestConfig};
pub use s3tables::{S3TablesCatalog, S3TablesConfig};
use serde::{Deserialize, Serialize};
pub use sqlite::SqliteCatalog;

use crate::{Error, Result};

/// A table's name within a catalog: a namespace (possibly dotted) and a table name.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TableName {
    pub namespace: String,
    pub name: String,
}

impl TableName {
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    /// Parses `NS.NAME` (the namespace may itself contain dots: the last dot splits).
    ///
    /// ```
    /// use eqdv::catalog::TableName;
    /// let t = TableName::parse("lake.cdc.orders").unwrap();
    /// assert_eq!((t.namespace.as_str(), t.name.as_str()), ("lake.cdc", "orders"));
    /// assert!(TableName::parse("orders").is_err());
    /// ```
    pub fn parse(text: &str) -> Result<Self> {
        match text.rsplit_once('.') {
            Some((ns, name)) if !ns.is_empty() && !name.is_empty() => Ok(Self::new(ns, name)),
            _ => Err(Error::InvalidInput(format!(
                "table name {text:?} must be NAMESPACE.TABLE"
            ))),
        }
    }
}

impl fmt::Display for TableName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.namespace, self.name)
    }
}

/// The current metadata pointer of a table and the token that guards its swap.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TablePointer {
    pub metadata_location: String,
    /// Catalog-specific version (Glue's VersionId). `None` when the location itself is
    /// the compare-and-swap token (SQL catalogs).
    pub version: Option<String>,
}

/// A catalog that eqdv can read and commit to.
#[async_trait]
pub trait Catalog: Send + Sync + fmt::Debug {
    /// The catalog's name (appears in errors and in the SQL catalog's rows).
    fn name(&self) -> &str;

    /// Storage for the catalog's tables.
    fn file_io(&self) -> &FileIO;

    /// Storage for one table, given its properties (which may override storage settings,
    /// such as `s3.*`) and what the catalog said of it when it was last loaded (a REST
    /// catalog's vended credentials). The catalog's storage by default.
    fn table_file_io(
        &self,
        _table: &TableName,
        _table_properties: &std::collections::HashMap<String, String>,
    ) -> FileIO {
        self.file_io().clone()
    }

    /// Where a new table's files go.
    fn default_table_location(&self, table: &TableName) -> String;

    /// Reads the table's current pointer.
    async fn load_pointer(&self, table: &TableName) -> Result<TablePointer>;

    /// Atomically replaces the pointer if it still equals `expected`.
    ///
    /// Returns [`Error::CommitConflict`] only when the swap certainly was not applied
    /// (the pointer had moved), and [`Error::CommitStateUnknown`] when the outcome
    /// cannot be known. Callers read the pointer back after any other error before
    /// deleting files (`commit::commit_outcome`).
    async fn swap_pointer(
        &self,
        table: &TableName,
        expected: &TablePointer,
        new_metadata_location: &str,
    ) -> Result<()>;

    /// Whether a commit is a set of changes the catalog applies and writes the metadata
    /// file of (the Iceberg REST protocol, [`Self::commit_changes`]) rather than a swap
    /// of the pointer to a metadata file eqdv wrote ([`Self::swap_pointer`]).
    fn commits_changes(&self) -> bool {
        false
    }

    /// Commits `updates` (what iceberg-rust's metadata builder recorded while making the
    /// new metadata from `base`) if the table is still the one `base` describes, and
    /// returns the new metadata location. Errors as [`Self::swap_pointer`]'s:
    /// [`Error::CommitConflict`] only when the commit certainly was not applied.
    async fn commit_changes(
        &self,
        table: &TableName,
        _base: &TableMetadata,
        _updates: &[TableUpdate],
    ) -> Result<String> {
        Err(Error::InvalidInput(format!(
            "catalog {}: commits swap the pointer of table {table}, not changes",
            self.name()
        )))
    }

    /// Whether the tables' storage lets eqdv list and delete objects (`eqdv cleanup`).
    /// S3 Tables' does not: it removes unreferenced files itself.
    fn manages_own_files(&self) -> bool {
        false
    }

    /// Registers a new table whose metadata file was already written.
    async fn create_table(&self, table: &TableName, metadata_location: &str) -> Result<()>;

    /// Lists tables, of one namespace or of all.
    async fn list_tables(&self, namespace: Option<&str>) -> Result<Vec<TableName>>;
}

/// `table` is not in `catalog` (its answer to a load, whichever catalog it is).
fn not_found(catalog: &str, table: &TableName) -> Error {
    Error::TableNotFound {
        catalog: catalog.to_string(),
        table: table.to_string(),
    }
}

/// `table` is already in `catalog` (its answer to a create).
fn already_exists(catalog: &str, table: &TableName) -> Error {
    Error::TableExists {
        catalog: catalog.to_string(),
        table: table.to_string(),
    }
}
