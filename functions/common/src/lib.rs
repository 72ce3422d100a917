//! What eqdv's two Lambda functions share, apart from the Lambda runtime itself:
//! configuration from the environment, the planner and converter handlers, the shard
//! queue (SQS FIFO, or in-process for `eqdv backfill`), EMF metrics and JSON logs.
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

    /// A queue message that is not a shard eqdv can convert.
    #[error("message {message_id}: {message}")]
    BadMessage { message_id: String, message: String },

    /// The planner could not plan or send everything; the rest was done.
    #[error("planning incomplete: {0}")]
    PlanningIncomplete(String),
}

impl FunctionError {
    /// A short, stable name for the error's kind (Lambda's errorType, SQS attributes).
    pub fn kind(&self) -> &'static str {
        match self {
            FunctionError::Config { .. } => "ConfigurationError",
            FunctionError::Queue { .. } => "QueueError",
            FunctionError::BadMessage { .. } => "BadMessage",
            FunctionError::PlanningIncomplete(_) => "PlanningIncomplete",
            FunctionError::Engine(e) => match e {
                eqdv::Error::TableNotFound { .. } => "TableNotFound",
                eqdv::Error::UnsupportedTable { .. }
                | eqdv::Error::UnsupportedKeyType { .. }
                | eqdv::Error::FieldUnresolvable { .. } => "UnsupportedTable",
                eqdv::Error::InvalidInput(_) | eqdv::Error::Json(_) => "InvalidInput",
                eqdv::Error::CommitConflict { .. } | eqdv::Error::RetriesExhausted { .. } => {
                    "CommitConflict"
                }
                eqdv::Error::CommitStateUnknown { .. } => "CommitStateUnknown",
                eqdv::Error::DeadlineExceeded { .. } => "DeadlineExceeded",
                _ => "EngineError",
            },
        }
    }

    /// True when trying again cannot help: the input itself is at fault (a malformed
    /// shard, a table that is gone, not v3 or has an unsupported key). Storage, catalog
    /// and concurrency errors, and running out of time, are worth a retry.
    pub fn is_permanent(&self) -> bool {
        matches!(
            self.kind(),
            "ConfigurationError"
                | "BadMessage"
                | "TableNotFound"
                | "UnsupportedTable"
                | "InvalidInput"
        )
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
}
