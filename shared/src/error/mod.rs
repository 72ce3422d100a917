//! The engine's typed error. Every variant names the thing at fault (table, file,
//! field, catalog) so an operator can act on the message alone; every error also has an
//! [`ErrorKind`] and says whether a later attempt can succeed ([`Error::retryable`]), so
//! callers decide (retry, dead-letter) without reading messages.

pub(crate) mod storage;

use crate::dv::DvError;
use storage::Storage;
pub use storage::cause;
pub(crate) use storage::one_line;

/// What failed, in the terms a caller acts on. Unlike the [`Error`] variants (which say
/// where, with the names an operator needs), a kind groups failures that call for the
/// same reaction. Not `non_exhaustive` on purpose: a new kind must be mapped by every
/// caller that names kinds (the functions' stable error names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// eqdv refuses the table as it is: not an Iceberg v3 table, a key type it cannot
    /// compare, a field it cannot read faithfully, a feature iceberg-rust does not support.
    Unsupported,
    /// The input (arguments, an event, a plan, JSON) is malformed.
    InvalidInput,
    /// The table is not in the catalog.
    TableNotFound,
    /// The table to create is already in the catalog.
    TableExists,
    /// Another writer moved the table first (or the commit attempts ran out against them).
    CommitConflict,
    /// A commit may or may not have landed.
    CommitStateUnknown,
    /// The conversion stopped at its deadline with nothing committed.
    DeadlineExceeded,
    /// Object storage (S3 through OpenDAL) or the local file system failed or refused.
    Storage,
    /// The catalog failed or refused, other than with a conflict or a missing table.
    Catalog,
    /// A file holds what it must not: corrupt, or at odds with its manifest entry. Its
    /// bytes were read in full (a read cut short is a [`ErrorKind::Storage`] failure).
    DataInvalid,
    /// Anything else: a scan task that panicked, Arrow, an iceberg-rust failure of no
    /// finer kind.
    Internal,
}

/// Result alias used throughout the engine.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in the engine.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An error raised by iceberg-rust (spec types, manifests, FileIO).
    #[error("iceberg: {}", cause(.0))]
    Iceberg(#[from] iceberg::Error),

    /// A deletion vector or Puffin file is malformed or does not match its manifest entry.
    #[error(transparent)]
    Dv(#[from] DvError),

    /// The catalog failed for a reason other than a commit conflict. `retryable` is the
    /// catalog's judgement of the cause (it has the typed SDK or SQLite error).
    #[error("catalog {catalog}: {message}")]
    Catalog {
        catalog: String,
        message: String,
        retryable: bool,
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

    /// A staging branch's history cannot be applied faithfully to its target branch (a
    /// staging commit that removes data files, a staging branch rolled back or replaced
    /// since the target last applied it, a history cut by expiry): the target is left
    /// as it is.
    #[error(
        "table {table}: cannot apply staging branch '{staging_branch}' to branch '{target_branch}'{}: {message}",
        .snapshot_id.map(|id| format!(" at staging snapshot {id}")).unwrap_or_default()
    )]
    StagingDiverged {
        table: String,
        staging_branch: String,
        target_branch: String,
        snapshot_id: Option<i64>,
        message: String,
    },

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

    /// A file the table references is missing, unreadable or corrupt. The message ends
    /// with the cause in short (see [`cause`]); the raw detail is in `source`.
    #[error("file {path}: {message}{}", cause_suffix(.source.as_deref()))]
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

    /// The head moved, since the data ranges of a split conversion read the table, in a
    /// way that invalidates their work: nothing was committed; convert the group again.
    #[error(
        "table {table}: the head moved in a way that invalidates the converted data ranges ({reason}); nothing was committed, convert the group again"
    )]
    RangesStale { table: String, reason: String },

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

    /// What failed, for callers that act on it. Files, DVs and iceberg-rust errors are
    /// [`ErrorKind::Storage`] when a storage failure is among their causes.
    pub fn kind(&self) -> ErrorKind {
        use ErrorKind as K;
        match self {
            Error::UnsupportedTable { .. }
            | Error::StagingDiverged { .. }
            | Error::UnsupportedKeyType { .. }
            | Error::FieldUnresolvable { .. } => K::Unsupported,
            Error::InvalidInput(_) | Error::Json(_) => K::InvalidInput,
            Error::TableNotFound { .. } => K::TableNotFound,
            Error::TableExists { .. } => K::TableExists,
            Error::CommitConflict { .. }
            | Error::RetriesExhausted { .. }
            | Error::RangesStale { .. } => K::CommitConflict,
            Error::CommitStateUnknown { .. } => K::CommitStateUnknown,
            Error::DeadlineExceeded { .. } => K::DeadlineExceeded,
            Error::Catalog { .. } => K::Catalog,
            Error::ScanTask { .. } | Error::Arrow(_) => K::Internal,
            Error::Iceberg(_) | Error::Dv(_) | Error::File { .. } if self.storage().is_some() => {
                K::Storage
            }
            Error::Iceberg(e) => match e.kind() {
                iceberg::ErrorKind::DataInvalid => K::DataInvalid,
                iceberg::ErrorKind::FeatureUnsupported => K::Unsupported,
                _ => K::Internal,
            },
            Error::Dv(_) | Error::File { .. } => K::DataInvalid,
        }
    }

    /// True when a later attempt of the same work can succeed with nobody changing the
    /// table, the input or the configuration: the failure was transient (storage or
    /// catalog unavailable, throttled, timed out), caused by a concurrent writer, or of
    /// unknown outcome. False when the input, the table or the configuration is at
    /// fault (a refusal, a malformed input or file, a missing table, access denied).
    ///
    /// Storage failures are judged by OpenDAL's typed kind of the failure, catalog
    /// failures by the catalog where it raised them (from the SDK's or SQLite's typed
    /// error).
    pub fn retryable(&self) -> bool {
        use ErrorKind as K;
        match self {
            Error::Catalog { retryable, .. } => *retryable,
            // iceberg-rust marks some of its errors retryable itself.
            Error::Iceberg(e) if e.retryable() => true,
            _ => match self.kind() {
                K::Storage => self.storage().is_none_or(|s| s.retryable()),
                // (Catalog errors carry their own flag, above.)
                K::CommitConflict
                | K::CommitStateUnknown
                | K::DeadlineExceeded
                | K::Internal
                | K::Catalog => true,
                K::Unsupported
                | K::InvalidInput
                | K::TableNotFound
                | K::TableExists
                | K::DataInvalid => false,
            },
        }
    }

    /// The storage failure among this error's causes, if any.
    fn storage(&self) -> Option<Storage<'_>> {
        Storage::find(self)
    }
}

/// `": <cause>"` of an optional source, or nothing.
fn cause_suffix(source: Option<&(dyn std::error::Error + Send + Sync + 'static)>) -> String {
    match source {
        Some(s) => format!(": {}", cause(s)),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iceberg::ErrorKind as IcebergKind;
    use opendal::ErrorKind as OpenDalKind;

    /// An OpenDAL failure as iceberg-rust's FileIO hands it on.
    fn through_file_io(e: opendal::Error) -> iceberg::Error {
        iceberg::Error::new(IcebergKind::Unexpected, "Failure in doing io operation").with_source(e)
    }

    fn storage(kind: OpenDalKind) -> iceberg::Error {
        through_file_io(opendal::Error::new(kind, "injected"))
    }

    fn throttled() -> iceberg::Error {
        through_file_io(opendal::Error::new(OpenDalKind::RateLimited, "injected").set_temporary())
    }

    #[test]
    fn every_variant_has_a_kind_and_a_retry_verdict() {
        use ErrorKind as K;
        let table = || "db.orders".to_string();
        let path = "s3://b/db/orders/data/a.parquet";
        let cases: Vec<(Error, ErrorKind, bool)> = vec![
            (
                Error::UnsupportedTable {
                    table: table(),
                    message: "format version 2".into(),
                },
                K::Unsupported,
                false,
            ),
            (
                Error::UnsupportedKeyType {
                    table: table(),
                    field: "v".into(),
                    field_id: 2,
                    field_type: "map".into(),
                },
                K::Unsupported,
                false,
            ),
            (
                Error::FieldUnresolvable {
                    path: path.into(),
                    field: "id".into(),
                    field_id: 1,
                    message: "no field ids and no name mapping".into(),
                },
                K::Unsupported,
                false,
            ),
            (
                Error::InvalidInput("no table".into()),
                K::InvalidInput,
                false,
            ),
            (
                Error::Json(serde_json::from_str::<u8>("{").unwrap_err()),
                K::InvalidInput,
                false,
            ),
            (
                Error::TableNotFound {
                    catalog: "glue".into(),
                    table: table(),
                },
                K::TableNotFound,
                false,
            ),
            (
                Error::TableExists {
                    catalog: "glue".into(),
                    table: table(),
                },
                K::TableExists,
                false,
            ),
            (
                Error::CommitConflict {
                    table: table(),
                    message: "pointer moved".into(),
                },
                K::CommitConflict,
                true,
            ),
            (
                Error::RetriesExhausted {
                    table: table(),
                    attempts: 5,
                    last: "pointer moved".into(),
                },
                K::CommitConflict,
                true,
            ),
            (
                Error::CommitStateUnknown {
                    table: table(),
                    message: "UpdateTable: timeout".into(),
                },
                K::CommitStateUnknown,
                true,
            ),
            (
                Error::DeadlineExceeded {
                    table: table(),
                    phase: "resolving".into(),
                },
                K::DeadlineExceeded,
                true,
            ),
            (
                Error::ScanTask {
                    path: path.into(),
                    message: "task 7 panicked".into(),
                },
                K::Internal,
                true,
            ),
            (
                Error::Arrow(arrow_schema::ArrowError::ComputeError("overflow".into())),
                K::Internal,
                true,
            ),
            // A catalog says itself whether a retry can help.
            (
                Error::Catalog {
                    catalog: "glue".into(),
                    message: "GetTable: throttled".into(),
                    retryable: true,
                    source: None,
                },
                K::Catalog,
                true,
            ),
            (
                Error::Catalog {
                    catalog: "glue".into(),
                    message: "GetTable: access denied".into(),
                    retryable: false,
                    source: None,
                },
                K::Catalog,
                false,
            ),
            // iceberg-rust's kinds, and its own retryable flag.
            (
                Error::Iceberg(iceberg::Error::new(IcebergKind::DataInvalid, "bad JSON")),
                K::DataInvalid,
                false,
            ),
            (
                Error::Iceberg(iceberg::Error::new(IcebergKind::FeatureUnsupported, "v4")),
                K::Unsupported,
                false,
            ),
            (
                Error::Iceberg(iceberg::Error::new(IcebergKind::Unexpected, "?")),
                K::Internal,
                true,
            ),
            (
                Error::Iceberg(
                    iceberg::Error::new(IcebergKind::DataInvalid, "stale").with_retryable(true),
                ),
                K::DataInvalid,
                true,
            ),
            // Storage below an iceberg-rust error, a DV read, a file read (also through
            // Parquet's reader, which wraps the engine's own error), the local disk.
            (
                Error::Iceberg(storage(OpenDalKind::NotFound)),
                K::Storage,
                true,
            ),
            (
                Error::Dv(DvError::Io {
                    location: path.into(),
                    source: Box::new(storage(OpenDalKind::PermissionDenied)),
                }),
                K::Storage,
                false,
            ),
            (
                Error::file(path, "cannot read", throttled()),
                K::Storage,
                true,
            ),
            (
                Error::file(
                    path,
                    "not a readable Parquet file",
                    parquet::errors::ParquetError::External(Box::new(Error::file(
                        path,
                        "cannot read",
                        throttled(),
                    ))),
                ),
                K::Storage,
                true,
            ),
            (
                Error::file(
                    path,
                    "cannot create warehouse directory",
                    std::io::Error::from(std::io::ErrorKind::PermissionDenied),
                ),
                K::Storage,
                false,
            ),
            (
                Error::file(
                    path,
                    "cannot list directory",
                    std::io::Error::from(std::io::ErrorKind::NotFound),
                ),
                K::Storage,
                true,
            ),
            // A file read in full whose content is wrong.
            (
                Error::Dv(DvError::KeyOutOfRange { key: u32::MAX }),
                K::DataInvalid,
                false,
            ),
            (
                Error::file(path, "invalid manifest entry", "no sequence number"),
                K::DataInvalid,
                false,
            ),
            (
                Error::file(
                    path,
                    "cannot decode Parquet data",
                    parquet::errors::ParquetError::General("bad page header".into()),
                ),
                K::DataInvalid,
                false,
            ),
        ];
        for (error, kind, retryable) in cases {
            assert_eq!(
                (error.kind(), error.retryable()),
                (kind, retryable),
                "{error:?}"
            );
        }
    }

    #[test]
    fn the_cause_of_a_storage_failure_comes_from_opendal_not_its_text() {
        let err = Error::file(
            "s3://b/t/metadata/x.avro",
            "cannot write manifest",
            throttled(),
        );
        assert_eq!(
            err.to_string(),
            "file s3://b/t/metadata/x.avro: cannot write manifest: throttled"
        );
        let corrupt = Error::file(
            "s3://b/t/metadata/x.avro",
            "cannot parse manifest",
            iceberg::Error::new(IcebergKind::DataInvalid, "bad magic"),
        );
        assert!(
            corrupt
                .to_string()
                .ends_with(": corrupt: DataInvalid => bad magic"),
            "{corrupt}"
        );
    }
}
