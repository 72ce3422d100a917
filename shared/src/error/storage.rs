//! Storage failures among an error's causes (S3 or local files through OpenDAL, under
//! iceberg-rust's FileIO, or the local file system used directly): whether a later
//! attempt can get past one, and its cause in a few words for a one-line message.

use std::borrow::Cow;
use std::error::Error as StdError;

/// The longest cause text an error message carries (the raw detail stays in the error's
/// source chain, for `--log debug` and the CLI's JSON `detail`).
const MAX_CAUSE_CHARS: usize = 160;

/// The cause of `error` in a few words, for a one-line message: not found, access
/// denied, throttled, timeout, connection failed, a 5xx server error, corrupt, ...
///
/// Storage errors come from OpenDAL through iceberg-rust's FileIO: their Display holds
/// the whole HTTP response (every header) and repeats itself along the source chain, so
/// the cause is taken from the typed OpenDAL error instead.
pub fn cause(error: &(dyn std::error::Error + 'static)) -> String {
    if let Some(Storage::OpenDal(e)) = Storage::find(error) {
        return opendal_cause(e);
    }
    // No storage error below: the error's own text (with its context) is short.
    let text = match error.downcast_ref::<iceberg::Error>() {
        Some(e) if e.kind() == iceberg::ErrorKind::DataInvalid => format!("corrupt: {e}"),
        _ => error.to_string(),
    };
    one_line(&text)
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

/// A storage failure found along an error's source chain.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Storage<'a> {
    /// S3 or a local file, through OpenDAL.
    OpenDal(&'a opendal::Error),
    /// The local file system used directly (the SQLite warehouse, local listings).
    Local(&'a std::io::Error),
}

impl<'a> Storage<'a> {
    /// The first OpenDAL error along `error`'s source chain, else its first I/O error
    /// (OpenDAL's local backend keeps the I/O error below its own).
    pub(crate) fn find(error: &'a (dyn StdError + 'static)) -> Option<Self> {
        let chain = || std::iter::successors(Some(error), |&e| e.source());
        chain()
            .find_map(|e| e.downcast_ref::<opendal::Error>())
            .map(Storage::OpenDal)
            .or_else(|| {
                chain()
                    .find_map(|e| e.downcast_ref::<std::io::Error>())
                    .map(Storage::Local)
            })
    }

    /// Whether a later attempt can get past the failure (see [`super::Error::retryable`]).
    pub(crate) fn retryable(self) -> bool {
        match self {
            Storage::OpenDal(e) => opendal_retryable(e),
            Storage::Local(e) => local_retryable(e),
        }
    }
}

/// Judged by OpenDAL's kind of the failure: only a configuration or a file layout at
/// fault is final. Its status cannot tell: OpenDAL marks what may pass (a 5xx,
/// throttling, a timeout, a dropped connection) temporary, but its retry layer (which
/// iceberg-rust's FileIO and `cleanup` use) marks every error it hands on persistent,
/// retried or not.
fn opendal_retryable(e: &opendal::Error) -> bool {
    use opendal::ErrorKind as K;
    if e.is_temporary() {
        return true;
    }
    match e.kind() {
        // Credentials, bucket, endpoint or the path itself: the same request fails again.
        K::PermissionDenied
        | K::ConfigInvalid
        | K::Unsupported
        | K::IsADirectory
        | K::NotADirectory
        | K::IsSameFile => false,
        // A file shorter than its manifest entry says.
        K::RangeNotSatisfied => false,
        // A file the table named is gone: another writer may have replaced the metadata
        // and removed the old file, or expired the snapshot that held it; the next
        // attempt loads the table again.
        K::NotFound => true,
        // Another writer got there first.
        K::AlreadyExists | K::ConditionNotMatch => true,
        // OpenDAL could not tell (an answer it does not map): nothing proves the input
        // at fault.
        _ => true,
    }
}

/// The local file system: only a permission or a path that cannot be one is final.
fn local_retryable(e: &std::io::Error) -> bool {
    use std::io::ErrorKind as K;
    !matches!(
        e.kind(),
        K::PermissionDenied
            | K::ReadOnlyFilesystem
            | K::IsADirectory
            | K::NotADirectory
            | K::InvalidFilename
            | K::InvalidInput
    )
}

/// The cause of an OpenDAL (S3, local file) error in a few words: its kind, refined by
/// the HTTP status and S3 error code of the response, the HTTP client's typed error
/// (timeout or failed connection) and whether OpenDAL's retries ran out.
pub(crate) fn opendal_cause(e: &opendal::Error) -> String {
    use opendal::ErrorKind as K;
    let response = ResponseText::of(e);
    let client = http_client_error(e);
    let what: Cow<'static, str> = match e.kind() {
        K::NotFound => "not found".into(),
        K::PermissionDenied => "access denied".into(),
        K::RateLimited => "throttled".into(),
        K::ConditionNotMatch => "precondition failed".into(),
        K::AlreadyExists => "already exists".into(),
        K::ConfigInvalid => "invalid storage configuration".into(),
        K::Unexpected if response.status.is_some_and(|s| (500..600).contains(&s)) => {
            "server error".into()
        }
        K::Unexpected if response.timed_out || client.is_some_and(reqwest::Error::is_timeout) => {
            "timeout".into()
        }
        K::Unexpected if response.status.is_none() && client.is_some() => {
            "connection failed".into()
        }
        kind => kind.into_static().to_lowercase().into(),
    };
    let mut out = what.to_string();
    match (response.status, &response.code) {
        (Some(s), Some(c)) => out.push_str(&format!(" ({s} {c})")),
        (Some(s), None) => out.push_str(&format!(" ({s})")),
        (None, _) => {}
    }
    if e.is_persistent() && retried(e, &response) {
        out.push_str(", after retries");
    }
    one_line(&out)
}

/// Whether OpenDAL's retry layer retried `e` before it gave up: it retries temporary
/// errors only, and marks all it hands on persistent. For S3 the temporary ones are
/// throttling, 5xx (and 499) answers and requests without an answer.
fn retried(e: &opendal::Error, response: &ResponseText) -> bool {
    use opendal::ErrorKind as K;
    match e.kind() {
        K::RateLimited => true,
        K::Unexpected => response.status.is_none_or(|s| s >= 499),
        _ => false,
    }
}

/// The HTTP client's own error below an OpenDAL error (a request that got no answer),
/// typed: it tells a timeout from a failed or dropped connection.
fn http_client_error(e: &opendal::Error) -> Option<&reqwest::Error> {
    std::iter::successors(StdError::source(e), |&s| s.source())
        .find_map(|s| s.downcast_ref::<reqwest::Error>())
}

/// What OpenDAL keeps of a failure only as text, with no accessor: the HTTP status of
/// the response (in the error's context, `response: Parts { status: 503, ... }`), S3's
/// error code (in the message, `S3Error { code: "SlowDown", ... }`) and the mark of its
/// timeout layer (the message `... timeout reached`). This is the one place that reads
/// OpenDAL's text, for messages only: retry decisions use its typed kind.
struct ResponseText {
    status: Option<u16>,
    code: Option<String>,
    timed_out: bool,
}

impl ResponseText {
    fn of(e: &opendal::Error) -> Self {
        let text = e.to_string();
        Self {
            status: field_after(&text, "status: ")
                .filter(|s| s.len() == 3)
                .and_then(|s| s.parse().ok()),
            code: field_after(e.message(), "code: \"").map(str::to_string),
            timed_out: e.message().contains("timeout"),
        }
    }
}

/// The run of characters after `key` up to a delimiter (`"`, `,`, space, `}`, `)`).
fn field_after<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    let start = text.find(key)? + key.len();
    let rest = &text[start..];
    let end = rest.find(['"', ',', ' ', '}', ')']).unwrap_or(rest.len());
    Some(&rest[..end]).filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    use std::io::{BufRead, BufReader, Write};
    use std::time::Duration;

    use opendal::ErrorKind as K;

    use super::*;
    use crate::error::cause;

    #[test]
    fn opendal_failures_are_retryable_unless_configuration_or_layout_is_at_fault() {
        let e = |kind| opendal::Error::new(kind, "injected");
        let cases = [
            (e(K::Unexpected).set_temporary(), true),
            (e(K::Unexpected).set_persistent(), true),
            // OpenDAL's retry layer marks every error persistent, retried or not.
            (e(K::PermissionDenied).set_persistent(), false),
            (e(K::NotFound).set_persistent(), true),
            (e(K::RateLimited).set_temporary(), true),
            // Temporary wins whatever the kind (OpenDAL's S3 marks a 409 so).
            (e(K::ConditionNotMatch).set_temporary(), true),
            (e(K::NotFound), true),
            (e(K::AlreadyExists), true),
            (e(K::ConditionNotMatch), true),
            (e(K::Unexpected), true),
            (e(K::PermissionDenied), false),
            (e(K::ConfigInvalid), false),
            (e(K::Unsupported), false),
            (e(K::IsADirectory), false),
            (e(K::NotADirectory), false),
            (e(K::IsSameFile), false),
            (e(K::RangeNotSatisfied), false),
        ];
        for (error, retryable) in cases {
            assert_eq!(Storage::OpenDal(&error).retryable(), retryable, "{error}");
        }
    }

    #[test]
    fn local_failures_are_retryable_unless_a_permission_or_the_path_is_at_fault() {
        use std::io::ErrorKind as IoKind;
        for (kind, retryable) in [
            (IoKind::NotFound, true),
            (IoKind::Interrupted, true),
            (IoKind::StorageFull, true),
            (IoKind::PermissionDenied, false),
            (IoKind::ReadOnlyFilesystem, false),
            (IoKind::NotADirectory, false),
        ] {
            let error = std::io::Error::from(kind);
            assert_eq!(Storage::Local(&error).retryable(), retryable, "{kind:?}");
        }
    }

    /// An S3 endpoint on 127.0.0.1 that answers every request with `status` and an S3
    /// error document with `code`, or never answers (`None`).
    fn s3_answering(answer: Option<(u16, &'static str)>) -> String {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        std::thread::spawn(move || {
            let mut held = Vec::new();
            for mut client in listener.incoming().flatten() {
                let mut reader = BufReader::new(client.try_clone().expect("clone"));
                let mut line = String::new();
                while reader.read_line(&mut line).is_ok_and(|n| n > 0) && line != "\r\n" {
                    line.clear();
                }
                let Some((status, code)) = answer else {
                    held.push(client);
                    continue;
                };
                let body = format!(
                    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{code}</Code>\
                     <Message>from the eqdv unit test</Message></Error>"
                );
                let _ = write!(
                    client,
                    "HTTP/1.1 {status} Test\r\nContent-Type: application/xml\r\n\
                     Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        url
    }

    /// OpenDAL's S3 service at `endpoint`, without the retry layer (one request a read).
    fn s3(endpoint: &str) -> opendal::Operator {
        let builder = opendal::services::S3::default()
            .bucket("b")
            .root("/")
            .endpoint(endpoint)
            .region("us-east-1")
            .access_key_id("k")
            .secret_access_key("s")
            .disable_config_load()
            .disable_ec2_metadata();
        opendal::Operator::new(builder).expect("operator").finish()
    }

    /// A failed read of `op`, as the engine reports it.
    async fn failed_read(op: &opendal::Operator) -> crate::Error {
        let e = op
            .read("t/metadata/x.avro")
            .await
            .expect_err("the read fails");
        let through_file_io =
            iceberg::Error::new(iceberg::ErrorKind::Unexpected, "io").with_source(e);
        crate::Error::file("s3://b/t/metadata/x.avro", "cannot read", through_file_io)
    }

    /// Real answers through OpenDAL, with and without its retry layer (as FileIO sets it
    /// up, but quick): the verdict comes from its typed classification, the message from
    /// the status and code it keeps as text.
    #[tokio::test]
    async fn s3_answers_get_opendal_s_verdict_and_a_short_cause() {
        // (status, S3 code, cause, retryable, retried by the retry layer)
        for (status, code, what, retryable, retried) in [
            (503, "SlowDown", "throttled", true, true),
            (500, "InternalError", "server error", true, true),
            (403, "AccessDenied", "access denied", false, false),
            (404, "NoSuchKey", "not found", true, false),
            (400, "InvalidArgument", "unexpected", true, false),
        ] {
            let endpoint = s3_answering(Some((status, code)));
            let expected = format!("{what} ({status} {code})");
            let err = failed_read(&s3(&endpoint)).await;
            assert_eq!(err.kind(), crate::ErrorKind::Storage, "{err}");
            assert_eq!(err.retryable(), retryable, "{err}");
            assert_eq!(cause(&err), expected);

            let retrying = s3(&endpoint).layer(
                opendal::layers::RetryLayer::new()
                    .with_max_times(1)
                    .with_min_delay(Duration::from_millis(1))
                    .with_max_delay(Duration::from_millis(1)),
            );
            let err = failed_read(&retrying).await;
            assert_eq!(err.retryable(), retryable, "{err}");
            let expected = match retried {
                true => format!("{expected}, after retries"),
                false => expected,
            };
            assert_eq!(cause(&err), expected);
        }
    }

    /// No answer: the HTTP client's typed error says the connection failed; OpenDAL's
    /// timeout layer says it timed out. Both are worth a retry.
    #[tokio::test]
    async fn requests_without_an_answer_are_retryable() {
        let closed = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            format!("http://{}", listener.local_addr().expect("addr"))
        };
        let err = failed_read(&s3(&closed)).await;
        assert!(err.retryable(), "{err}");
        assert_eq!(cause(&err), "connection failed");

        let silent = s3(&s3_answering(None)).layer(
            opendal::layers::TimeoutLayer::new()
                .with_timeout(Duration::from_millis(300))
                .with_io_timeout(Duration::from_millis(300)),
        );
        let err = failed_read(&silent).await;
        assert!(err.retryable(), "{err}");
        assert_eq!(cause(&err), "timeout");
    }
}
