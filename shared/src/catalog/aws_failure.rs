//! What a failed AWS SDK call (Glue, S3 Tables) means, from the SDK's typed error: the
//! cause in a few words for the message, whether a later attempt can get past it, and
//! whether a failed pointer update may have landed.

use aws_sdk_glue::error::{ProvideErrorMetadata, SdkError};

use crate::Error;

/// A failed AWS SDK call as the SDK's typed error tells it.
pub(crate) struct Failure {
    /// The cause in a few words, with the service's status, error code and message when
    /// it answered: for operators, on one line (no headers).
    pub(crate) text: String,
    /// Whether a later attempt can get past it (see [`crate::Error::retryable`]).
    pub(crate) retryable: bool,
}

impl Failure {
    pub(crate) fn of<E: ProvideErrorMetadata>(e: &SdkError<E>) -> Self {
        let (text, retryable) = match e {
            SdkError::ServiceError(s) => {
                let status = s.raw().status();
                let err = s.err();
                // The error code the service answered (`ProvideErrorMetadata::code`, what
                // the SDK's own retry classifier reads): the operations' error enums
                // differ, their codes do not. Glue's codes, then S3 Tables'.
                let code = err.code().unwrap_or("unknown error");
                let (what, retryable) = match code {
                    "ThrottlingException" => ("throttled", true),
                    "ConcurrentModificationException" => ("conflict", true),
                    "OperationTimeoutException" => ("timeout", true),
                    "ResourceNotReadyException" | "FederationSourceRetryableException" => {
                        ("not ready", true)
                    }
                    "AccessDeniedException" => ("access denied", false),
                    "EntityNotFoundException" => ("not found", false),
                    "TooManyRequestsException" => ("throttled", true),
                    "ConflictException" => ("conflict", true),
                    "NotFoundException" => ("not found", false),
                    "ForbiddenException" => ("access denied", false),
                    _ if status.is_server_error() => ("server error", true),
                    _ if status.as_u16() == 429 => ("throttled", true),
                    // Refused for what the request is (invalid input, encryption,
                    // permissions): the same request is refused again.
                    _ => ("rejected", false),
                };
                let status = status.as_u16();
                let text = match err.message() {
                    Some(m) if !m.is_empty() => format!("{what} ({status} {code}: {m})"),
                    _ => format!("{what} ({status} {code})"),
                };
                (text, retryable)
            }
            SdkError::TimeoutError(_) => ("timeout".to_string(), true),
            SdkError::DispatchFailure(d) if d.is_timeout() => ("timeout".to_string(), true),
            SdkError::DispatchFailure(d) if d.is_io() => ("connection failed".to_string(), true),
            // The client refused the request itself (e.g. an invalid endpoint).
            SdkError::DispatchFailure(d) if d.is_user() => {
                ("request could not be sent".to_string(), false)
            }
            // Other connector failures, credentials that could not be loaded included.
            SdkError::DispatchFailure(_) => ("request could not be sent".to_string(), true),
            SdkError::ResponseError(r) => (
                format!("unreadable response (status {})", r.raw().status().as_u16()),
                true,
            ),
            SdkError::ConstructionFailure(_) => ("request could not be built".to_string(), false),
            _ => ("unknown SDK error".to_string(), true),
        };
        Self {
            text: crate::error::one_line(&text),
            retryable,
        }
    }
}

/// A failed call of `catalog` as an error: the operation and the cause in one line,
/// retryable as the SDK's typed error says ([`Failure::of`]); the SDK's raw error (HTTP
/// response, headers) is logged at debug and kept as the source.
pub(crate) fn catalog_error<E>(catalog: &str, what: &str, e: SdkError<E>) -> Error
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    tracing::debug!(catalog, operation = what, error = ?e, "AWS SDK call failed");
    let failure = Failure::of(&e);
    Error::Catalog {
        catalog: catalog.to_string(),
        message: format!("{what}: {}", failure.text),
        retryable: failure.retryable,
        source: Some(Box::new(e)),
    }
}

/// A failed pointer update (`what`, of `table` in `catalog`) as an error, said as
/// [`Error::CommitStateUnknown`] wherever the update may have landed: the SDK retries a
/// request whose answer was lost or was a 5xx, and the retry of a landed request meets
/// the stale version its own first attempt spent, answered as the service's conflict
/// (`is_conflict`). Only a request never sent, or refused for what it is (access
/// denied, a bad location), is a plain catalog error; even then `commit::publish` reads
/// the pointer back before it deletes anything.
pub(crate) fn update_error<E>(
    catalog: &str,
    table: &str,
    what: &str,
    e: SdkError<E>,
    is_conflict: impl FnOnce(&E) -> bool,
) -> Error
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    let may_have_landed = match &e {
        // Built but never sent: nothing happened.
        SdkError::ConstructionFailure(_) => false,
        SdkError::ServiceError(s) => is_conflict(s.err()) || s.raw().status().is_server_error(),
        // Sent, or maybe sent, with no answer.
        _ => true,
    };
    if !may_have_landed {
        return catalog_error(catalog, &format!("{what} {table}"), e);
    }
    tracing::debug!(table, error = ?e, "{what} failed");
    Error::CommitStateUnknown {
        table: table.to_string(),
        message: format!(
            "{what} in {catalog}: {} (a retried request may have landed)",
            Failure::of(&e).text
        ),
    }
}

#[cfg(test)]
mod tests {
    use aws_sdk_glue::error::{ConnectorError, ErrorMetadata};
    use aws_sdk_glue::operation::get_table::GetTableError;
    use aws_smithy_runtime_api::http::{Response, StatusCode};
    use aws_smithy_types::body::SdkBody;

    use super::*;

    fn response(status: u16) -> Response {
        Response::new(
            StatusCode::try_from(status).expect("status"),
            SdkBody::empty(),
        )
    }

    /// The service answered `status` with error `code`.
    fn answered(status: u16, code: &str) -> SdkError<GetTableError> {
        let meta = ErrorMetadata::builder()
            .code(code)
            .message("from the test")
            .build();
        SdkError::service_error(GetTableError::generic(meta), response(status))
    }

    #[test]
    fn service_answers_are_judged_by_their_error_code_and_status() {
        for (status, code, retryable, text) in [
            (400, "ThrottlingException", true, "throttled"),
            (400, "ConcurrentModificationException", true, "conflict"),
            (400, "OperationTimeoutException", true, "timeout"),
            (400, "ResourceNotReadyException", true, "not ready"),
            (500, "InternalServiceException", true, "server error"),
            (503, "ServiceUnavailable", true, "server error"),
            (429, "TooManyRequests", true, "throttled"),
            (400, "AccessDeniedException", false, "access denied"),
            (400, "EntityNotFoundException", false, "not found"),
            (400, "InvalidInputException", false, "rejected"),
            (400, "GlueEncryptionException", false, "rejected"),
            (429, "TooManyRequestsException", true, "throttled"),
            (409, "ConflictException", true, "conflict"),
            (404, "NotFoundException", false, "not found"),
            (403, "ForbiddenException", false, "access denied"),
            (500, "InternalServerErrorException", true, "server error"),
            (400, "BadRequestException", false, "rejected"),
        ] {
            let failure = Failure::of(&answered(status, code));
            assert_eq!(failure.retryable, retryable, "{code}");
            assert_eq!(
                failure.text,
                format!("{text} ({status} {code}: from the test)")
            );
        }
    }

    #[test]
    fn requests_without_an_answer_are_retryable_unless_they_could_not_be_made() {
        let io = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
        for (error, retryable, text) in [
            (SdkError::timeout_error("attempt timeout"), true, "timeout"),
            (
                SdkError::dispatch_failure(ConnectorError::timeout("read timeout".into())),
                true,
                "timeout",
            ),
            (
                SdkError::dispatch_failure(ConnectorError::io(io.into())),
                true,
                "connection failed",
            ),
            (
                SdkError::dispatch_failure(ConnectorError::other("no credentials".into(), None)),
                true,
                "request could not be sent",
            ),
            (
                SdkError::dispatch_failure(ConnectorError::user("invalid endpoint".into())),
                false,
                "request could not be sent",
            ),
            (
                SdkError::response_error("truncated JSON", response(200)),
                true,
                "unreadable response (status 200)",
            ),
            (
                SdkError::construction_failure("missing field"),
                false,
                "request could not be built",
            ),
        ] {
            let error: SdkError<GetTableError> = error;
            let failure = Failure::of(&error);
            assert_eq!(
                (failure.retryable, failure.text.as_str()),
                (retryable, text)
            );
        }
    }

    #[test]
    fn an_update_is_unknown_wherever_it_may_have_landed() {
        let unknown = |e: SdkError<GetTableError>| {
            matches!(
                update_error("glue", "db.t", "UpdateTable", e, |e| e.code()
                    == Some("Conflict")),
                Error::CommitStateUnknown { .. }
            )
        };
        assert!(unknown(answered(400, "Conflict")), "a stale version");
        assert!(unknown(answered(500, "InternalServiceException")));
        assert!(unknown(SdkError::timeout_error("attempt timeout")));
        assert!(!unknown(answered(400, "AccessDeniedException")));
        assert!(!unknown(SdkError::construction_failure("missing field")));
        let refused = update_error(
            "glue",
            "db.t",
            "UpdateTable",
            answered(400, "AccessDeniedException"),
            |_: &GetTableError| false,
        );
        assert!(
            refused.to_string().contains("UpdateTable db.t") && !refused.retryable(),
            "{refused}"
        );
    }
}
