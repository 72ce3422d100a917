//! What a failed AWS SDK call (Glue, S3 Tables) means, from the SDK's typed error: the
//! cause in a few words for the message, and whether a later attempt can get past it.

use aws_sdk_glue::error::{ProvideErrorMetadata, SdkError};

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
}
