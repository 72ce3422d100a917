//! The engine's typed error. Every variant names the thing at fault (table, file,
//! field, catalog) so an operator can act on the message alone.

use crate::dv::DvError;

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

/// `": <cause>"` of an optional source, or nothing.
fn cause_suffix(source: Option<&(dyn std::error::Error + Send + Sync + 'static)>) -> String {
    match source {
        Some(s) => format!(": {}", cause(s)),
        None => String::new(),
    }
}

/// The longest cause text an error message carries (the raw detail stays in the error's
/// source chain, for `--log debug` and the CLI's JSON `detail`).
const MAX_CAUSE_CHARS: usize = 160;

/// The cause of `error` in a few words, for a one-line message: not found, access
/// denied, throttled, timeout, connection failed, a 5xx server error, corrupt, ...
///
/// Storage errors come from OpenDAL through iceberg-rust's FileIO: their Display holds
/// the whole HTTP response (every header) and repeats itself along the source chain, so
/// the cause is taken from the typed OpenDAL error (its kind, and the status and S3
/// error code of the response) instead.
pub fn cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut current: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = current {
        if let Some(io) = e.downcast_ref::<opendal::Error>() {
            return storage_cause(io);
        }
        current = e.source();
    }
    // No storage error below: the error's own text (with its context) is short.
    let text = match error.downcast_ref::<iceberg::Error>() {
        Some(e) if e.kind() == iceberg::ErrorKind::DataInvalid => format!("corrupt: {e}"),
        _ => error.to_string(),
    };
    one_line(&text)
}

/// The cause of an OpenDAL (S3, local file) error.
fn storage_cause(e: &opendal::Error) -> String {
    use opendal::ErrorKind as K;
    // OpenDAL keeps the response only as text in the error's context ("response: Parts
    // { status: 503, ... }") and the S3 error as the message (`S3Error { code: "..." }`):
    // no accessor exists for either.
    let text = e.to_string();
    let status = field_after(&text, "status: ").filter(|s| s.len() == 3);
    let code = field_after(e.message(), "code: \"");
    let what = match e.kind() {
        K::NotFound => "not found".to_string(),
        K::PermissionDenied => "access denied".to_string(),
        K::RateLimited => "throttled".to_string(),
        K::ConditionNotMatch => "precondition failed".to_string(),
        K::AlreadyExists => "already exists".to_string(),
        K::ConfigInvalid => "invalid storage configuration".to_string(),
        K::Unexpected if status.is_some_and(|s| s.starts_with('5')) => "server error".to_string(),
        K::Unexpected if e.message().contains("timeout") => "timeout".to_string(),
        K::Unexpected if status.is_none() && e.message().starts_with("send http request") => {
            "connection failed".to_string()
        }
        kind => kind.into_static().to_lowercase(),
    };
    let mut out = what;
    match (status, code) {
        (Some(s), Some(c)) => out.push_str(&format!(" ({s} {c})")),
        (Some(s), None) => out.push_str(&format!(" ({s})")),
        (None, _) => {}
    }
    if e.is_persistent() {
        out.push_str(", after retries");
    }
    one_line(&out)
}

/// The run of characters after `key` up to a delimiter (`"`, `,`, space, `}`).
fn field_after<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    let start = text.find(key)? + key.len();
    let rest = &text[start..];
    let end = rest.find(['"', ',', ' ', '}', ')']).unwrap_or(rest.len());
    Some(&rest[..end]).filter(|s| !s.is_empty())
}

/// `text` on one line, at most [`MAX_CAUSE_CHARS`] characters.
pub(crate) fn one_line(text: &str) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= MAX_CAUSE_CHARS {
        return flat;
    }
    let mut cut: String = flat.chars().take(MAX_CAUSE_CHARS).collect();
    cut.push('…');
    cut
}
