//! What eqdv's two Lambda functions share, apart from the Lambda runtime itself:
//! configuration from the environment, the planner and converter handlers, the shard
//! queue (SQS FIFO, or in-process for `eqdv backfill`), the split of big shards over
//! Step Functions, EMF metrics and JSON logs.
//!
//! The handlers take plain values (the event JSON, an SQS event, a deadline), so the
//! binaries in functions/planner and functions/converter are thin, and `eqdv backfill`
//! and the tests run the very same code in-process.

pub mod config;
pub mod converter;
pub mod events;
pub mod logging;
pub mod metrics;
pub mod planner;
pub mod queue;
pub mod secrets;
pub mod split;

pub use config::FunctionConfig;

/// What the functions can fail with.
#[derive(Debug, thiserror::Error)]
pub enum FunctionError {
    /// An environment variable is missing or malformed.
    #[error("configuration: {var}: {message}")]
    Config { var: String, message: String },

    /// The engine failed (planning, conversion, the catalog, storage).
    #[error(transparent)]
    Engine(#[from] eqdv::Error),

    /// An SQS request failed.
    #[error("queue {queue}: {message}")]
    Queue { queue: String, message: String },

    /// A Step Functions request failed (starting a split's execution).
    #[error("state machine {state_machine}: {message}")]
    StateMachine {
        state_machine: String,
        message: String,
    },

    /// A queue message that is not a shard eqdv can convert.
    #[error("message {message_id}: {message}")]
    BadMessage { message_id: String, message: String },

    /// The planner could not plan or send everything; the rest was done.
    #[error("planning incomplete: {0}")]
    PlanningIncomplete(String),
}

impl FunctionError {
    /// A short, stable name for the error's kind (Lambda's errorType, SQS attributes,
    /// logs and metrics): these names are a contract, new engine kinds map onto them.
    pub fn kind(&self) -> &'static str {
        use eqdv::ErrorKind as K;
        match self {
            FunctionError::Config { .. } => "ConfigurationError",
            FunctionError::Queue { .. } => "QueueError",
            FunctionError::StateMachine { .. } => "StateMachineError",
            FunctionError::BadMessage { .. } => "BadMessage",
            FunctionError::PlanningIncomplete(_) => "PlanningIncomplete",
            FunctionError::Engine(e) => match e.kind() {
                K::TableNotFound => "TableNotFound",
                K::Unsupported => "UnsupportedTable",
                K::InvalidInput => "InvalidInput",
                K::CommitConflict => "CommitConflict",
                K::CommitStateUnknown => "CommitStateUnknown",
                K::DeadlineExceeded => "DeadlineExceeded",
                K::TableExists | K::Storage | K::Catalog | K::DataInvalid | K::Internal => {
                    "EngineError"
                }
            },
        }
    }

    /// The engine's kind of the error, when the engine raised it.
    pub fn engine_kind(&self) -> Option<eqdv::ErrorKind> {
        match self {
            FunctionError::Engine(e) => Some(e.kind()),
            _ => None,
        }
    }

    /// True when trying again cannot help: the input or the configuration is at fault
    /// (a malformed shard, a table that is gone, not v3 or has an unsupported key,
    /// access denied). The engine says so for its errors ([`eqdv::Error::retryable`]);
    /// a queue failure or an incomplete plan is worth a retry.
    pub fn is_permanent(&self) -> bool {
        match self {
            FunctionError::Config { .. } | FunctionError::BadMessage { .. } => true,
            FunctionError::Queue { .. }
            | FunctionError::StateMachine { .. }
            | FunctionError::PlanningIncomplete(_) => false,
            FunctionError::Engine(e) => !e.retryable(),
        }
    }
}

pub type Result<T, E = FunctionError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transient_scan_failures_are_retried_and_refusals_are_not() {
        let scan = FunctionError::Engine(eqdv::Error::ScanTask {
            path: "s3://b/t/data/a.parquet".into(),
            message: "task 7 panicked".into(),
        });
        assert!(!scan.is_permanent(), "{}", scan.kind());
        let refused = FunctionError::Engine(eqdv::Error::FieldUnresolvable {
            path: "s3://b/t/data/imported.parquet".into(),
            field: "id".into(),
            field_id: 1,
            message: "no field ids and no name mapping".into(),
        });
        assert!(refused.is_permanent());
        assert_eq!(refused.kind(), "UnsupportedTable");
    }

    /// The stable names and the retry-or-dead-letter verdict, for every engine kind and
    /// each function error.
    #[test]
    fn every_error_maps_to_its_stable_name_and_verdict() {
        let table = || "db.orders".to_string();
        let throttled = iceberg::Error::new(iceberg::ErrorKind::Unexpected, "io").with_source(
            opendal::Error::new(opendal::ErrorKind::RateLimited, "slow").set_temporary(),
        );
        let denied = iceberg::Error::new(iceberg::ErrorKind::Unexpected, "io").with_source(
            opendal::Error::new(opendal::ErrorKind::PermissionDenied, "denied"),
        );
        let gone = iceberg::Error::new(iceberg::ErrorKind::Unexpected, "io")
            .with_source(opendal::Error::new(opendal::ErrorKind::NotFound, "gone"));
        let engine = |e: eqdv::Error| FunctionError::Engine(e);
        let cases: Vec<(FunctionError, &str, bool)> = vec![
            (
                FunctionError::Config {
                    var: "EQDV_CATALOG".into(),
                    message: "missing".into(),
                },
                "ConfigurationError",
                true,
            ),
            (
                FunctionError::BadMessage {
                    message_id: "m-1".into(),
                    message: "not an eqdv shard".into(),
                },
                "BadMessage",
                true,
            ),
            (
                FunctionError::Queue {
                    queue: "q".into(),
                    message: "throttled".into(),
                },
                "QueueError",
                false,
            ),
            (
                FunctionError::StateMachine {
                    state_machine: "arn:aws:states:us-east-1:1:stateMachine:s".into(),
                    message: "throttled".into(),
                },
                "StateMachineError",
                false,
            ),
            (
                FunctionError::PlanningIncomplete("1 table failed".into()),
                "PlanningIncomplete",
                false,
            ),
            (
                engine(eqdv::Error::TableNotFound {
                    catalog: "glue".into(),
                    table: table(),
                }),
                "TableNotFound",
                true,
            ),
            (
                engine(eqdv::Error::UnsupportedTable {
                    table: table(),
                    message: "format version 2".into(),
                }),
                "UnsupportedTable",
                true,
            ),
            (
                engine(eqdv::Error::InvalidInput("bad shard".into())),
                "InvalidInput",
                true,
            ),
            (
                engine(eqdv::Error::RetriesExhausted {
                    table: table(),
                    attempts: 5,
                    last: "pointer moved".into(),
                }),
                "CommitConflict",
                false,
            ),
            (
                engine(eqdv::Error::CommitStateUnknown {
                    table: table(),
                    message: "UpdateTable: timeout".into(),
                }),
                "CommitStateUnknown",
                false,
            ),
            (
                engine(eqdv::Error::DeadlineExceeded {
                    table: table(),
                    phase: "resolving".into(),
                }),
                "DeadlineExceeded",
                false,
            ),
            // Storage: OpenDAL's verdict. A missing file is retried (another writer may
            // have moved the table on); access denied is the configuration's fault.
            (
                engine(eqdv::Error::file(
                    "s3://b/t/m.avro",
                    "cannot read",
                    throttled,
                )),
                "EngineError",
                false,
            ),
            (
                engine(eqdv::Error::file(
                    "s3://b/t/v1.metadata.json",
                    "cannot read",
                    gone,
                )),
                "EngineError",
                false,
            ),
            (
                engine(eqdv::Error::file("s3://b/t/m.avro", "cannot read", denied)),
                "EngineError",
                true,
            ),
            // Catalog: the catalog's verdict.
            (
                engine(eqdv::Error::Catalog {
                    catalog: "glue".into(),
                    message: "GetTable: throttled".into(),
                    retryable: true,
                    source: None,
                }),
                "EngineError",
                false,
            ),
            (
                engine(eqdv::Error::Catalog {
                    catalog: "glue".into(),
                    message: "GetTable: access denied".into(),
                    retryable: false,
                    source: None,
                }),
                "EngineError",
                true,
            ),
            (
                engine(eqdv::Error::file(
                    "s3://b/t/m.avro",
                    "invalid manifest entry",
                    "no sequence number",
                )),
                "EngineError",
                true,
            ),
        ];
        for (error, kind, permanent) in cases {
            assert_eq!(
                (error.kind(), error.is_permanent()),
                (kind, permanent),
                "{error}"
            );
        }
    }
}
