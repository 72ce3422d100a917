//! The engine's typed error. Every variant names the thing at fault (table, file,
//! field, catalog) so an operator can act on the message alone.

use crate::dv::DvError;

/// Result alias used throughout the engine.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in the engine.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An error raised by iceberg-rust (spec types, manifests, FileIO).
    #[error("iceberg: {0}")]
    Iceberg(#[from] iceberg::Error),

    /// A deletion vector or Puffin file is malformed or does not match its manifest entry.
    #[error(transparent)]
    Dv(#[from] DvError),

    /// The catalog failed for a reason other than a commit conflict.
    #[error("catalog {catalog}: {message}")]
    Catalog {
        catalog: String,
        message: String,
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },

    /// The table does not exist in the catalog.
    #[error("table {table} not found in catalog {catalog}")]
    TableNotFound { catalog: String, table: String },

    /// The table already exists (when creating one).
    #[error("table {table} already exists in catalog {catalog}")]
    TableExists { catalog: String, table: String },

    /// The table is not a format that eqdv can convert.
    #[error("table {table}: {message}")]
    UnsupportedTable { table: String, message: String },

    /// An equality field has a type eqdv cannot compare.
    #[error(
        "table {table}: equality field {field} (id {field_id}) has type {field_type}, which eqdv does not support as a key"
    )]
    UnsupportedKeyType {
        table: String,
        field: String,
        field_id: i32,
        field_type: String,
    },

    /// A file the table references is missing, unreadable or corrupt.
    #[error("file {path}: {message}")]
    File {
        path: String,
        message: String,
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },

    /// A table field cannot be read faithfully from a file (no field ids and no name
    /// mapping, a field the mapping does not name, a stored type eqdv cannot convert
    /// exactly): eqdv refuses rather than read it as null.
    #[error("file {path}: cannot resolve field {field} (id {field_id}): {message}")]
    FieldUnresolvable {
        path: String,
        field: String,
        field_id: i32,
        message: String,
    },

    /// A background scan of one data file ended without a result (it panicked or was
    /// cancelled). Nothing about the table is wrong: worth a retry.
    #[error("scan of data file {path} failed: {message}")]
    ScanTask { path: String, message: String },

    /// The catalog pointer moved since the table was loaded (another writer committed).
    #[error("commit conflict on table {table}: {message}")]
    CommitConflict { table: String, message: String },

    /// The commit request may or may not have been applied.
    #[error("commit outcome unknown for table {table}: {message}")]
    CommitStateUnknown { table: String, message: String },

    /// Retries ran out; the last conflict is attached.
    #[error("table {table}: gave up after {attempts} commit attempts: {last}")]
    RetriesExhausted {
        table: String,
        attempts: u32,
        last: String,
    },

    /// The conversion stopped before its deadline (a Lambda invocation's end, less a
    /// margin): nothing was committed and the attempt's files were removed.
    #[error("table {table}: stopped before the deadline while {phase}; nothing was committed")]
    DeadlineExceeded { table: String, phase: String },

    /// Input given by the user or an event is invalid.
    #[error("invalid input: {0}")]
    InvalidInput(String),

    /// Arrow compute or conversion failed.
    #[error("arrow: {0}")]
    Arrow(#[from] arrow_schema::ArrowError),

    /// JSON (de)serialization of a plan or event failed.
    #[error("json: {0}")]
    Json(#[from] serde_json::Error),
}

impl Error {
    /// A file-level error with its cause.
    pub fn file(
        path: impl Into<String>,
        message: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Error::File {
            path: path.into(),
            message: message.into(),
            source: Some(source.into()),
        }
    }

    /// True for errors that a retry of the commit protocol can resolve.
    pub fn is_commit_conflict(&self) -> bool {
        matches!(self, Error::CommitConflict { .. })
    }
}
