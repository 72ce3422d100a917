//! The HTTP side of the Iceberg REST protocol: one client per catalog, its
//! authentication (a bearer token, OAuth2 client credentials exchanged for a token that
//! is renewed before it expires, or AWS SigV4 for AWS's endpoints), and what an answer
//! means for eqdv: the body of a success, or an error naming the catalog, the operation
//! and the server's message.
//!
//! Idempotent reads are retried a few times on transient failures (5xx, 429, a lost
//! connection). A commit is never retried here: a commit whose answer was lost may have
//! landed, and `commit::publish` reads the table back before anyone deletes a file.

use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use tokio::sync::Mutex;

use super::sigv4::Signer;
use crate::{Error, Result};

/// How eqdv authenticates to the catalog.
#[derive(Clone, Default)]
pub enum RestAuth {
    /// No `Authorization` header (a catalog behind a private network, the tests' server).
    #[default]
    None,
    /// A bearer token, sent as is.
    Token(String),
    /// OAuth2 client credentials, exchanged at the token endpoint (the catalog's
    /// `v1/oauth/tokens` unless `server_uri` names another) for a bearer token.
    ClientCredentials {
        client_id: String,
        client_secret: String,
        server_uri: Option<String>,
        scope: Option<String>,
    },
    /// AWS Signature Version 4 with the standard AWS configuration's credentials, for
    /// service `signing_name` (`glue` for the Glue Data Catalog's Iceberg endpoint,
    /// `s3tables` for S3 Tables'); the region defaults to the configuration's.
    SigV4 {
        signing_name: String,
        region: Option<String>,
    },
}

impl std::fmt::Debug for RestAuth {
    // Never prints a secret or a token.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RestAuth::None => f.write_str("None"),
            RestAuth::Token(_) => f.write_str("Token(..)"),
            RestAuth::ClientCredentials {
                client_id,
                server_uri,
                scope,
                ..
            } => f
                .debug_struct("ClientCredentials")
                .field("client_id", client_id)
                .field("server_uri", server_uri)
                .field("scope", scope)
                .finish_non_exhaustive(),
            RestAuth::SigV4 {
                signing_name,
                region,
            } => f
                .debug_struct("SigV4")
                .field("signing_name", signing_name)
                .field("region", region)
                .finish(),
        }
    }
}

impl RestAuth {
    /// Parses Iceberg's `credential` form, `CLIENT_ID:CLIENT_SECRET` (a bare secret
    /// has no client id).
    pub fn client_credentials(
        credential: &str,
        server_uri: Option<String>,
        scope: Option<String>,
    ) -> Self {
        let (client_id, client_secret) = match credential.split_once(':') {
            Some((id, secret)) => (id.to_string(), secret.to_string()),
            None => (String::new(), credential.to_string()),
        };
        RestAuth::ClientCredentials {
            client_id,
            client_secret,
            server_uri,
            scope,
        }
    }
}

/// A token and when to fetch the next one.
struct Token {
    value: String,
    renew_at: Option<Instant>,
}

/// What a request needs to know besides its path.
pub(super) struct Request<'a> {
    pub method: Method,
    pub url: String,
    /// JSON body.
    pub body: Option<Vec<u8>>,
    pub headers: &'a [(&'a str, &'a str)],
    /// What the request does, for errors ("LoadTable db.t").
    pub what: String,
}

/// An answer that was not a success.
pub(super) enum Failure {
    /// The server answered with this status and message.
    Status { status: StatusCode, text: String },
    /// No answer: the request may or may not have reached the server (`sent`).
    Transport { sent: bool, text: String },
}

impl Failure {
    pub(super) fn text(&self) -> String {
        match self {
            Failure::Status { status, text } => format!("{} {text}", status.as_u16()),
            Failure::Transport { text, .. } => text.clone(),
        }
    }

    /// Whether a later attempt can get past it.
    pub(super) fn retryable(&self) -> bool {
        match self {
            Failure::Status { status, .. } => {
                status.is_server_error()
                    || *status == StatusCode::TOO_MANY_REQUESTS
                    || *status == StatusCode::REQUEST_TIMEOUT
            }
            Failure::Transport { .. } => true,
        }
    }
}

/// The REST error model's body: `{"error": {"message", "type", "code"}}`.
#[derive(Deserialize)]
struct ErrorBody {
    error: ErrorModel,
}

#[derive(Deserialize)]
struct ErrorModel {
    #[serde(default)]
    message: String,
    #[serde(default, rename = "type")]
    kind: String,
}

#[derive(Deserialize)]
struct TokenAnswer {
    access_token: String,
    #[serde(default)]
    expires_in: Option<u64>,
}

/// The catalog's HTTP client with its authentication.
pub(super) struct Client {
    pub(super) catalog: String,
    http: reqwest::Client,
    base_uri: String,
    auth: RestAuth,
    token: Mutex<Option<Token>>,
    /// With [`RestAuth::SigV4`].
    signer: Option<Signer>,
}

/// Attempts of an idempotent read (the first and its retries).
const READ_ATTEMPTS: u32 = 4;

impl Client {
    pub(super) async fn new(
        catalog: String,
        base_uri: &str,
        auth: RestAuth,
        timeout: Duration,
    ) -> Result<Self> {
        let signer = match &auth {
            RestAuth::SigV4 {
                signing_name,
                region,
            } => Some(Signer::from_environment(&catalog, signing_name, region.clone()).await?),
            _ => None,
        };
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10).min(timeout))
            .timeout(timeout)
            .build()
            .map_err(|e| Error::Catalog {
                catalog: catalog.clone(),
                message: format!("cannot build the HTTP client: {e}"),
                retryable: false,
                source: Some(Box::new(e)),
            })?;
        Ok(Self {
            catalog,
            http,
            base_uri: base_uri.trim_end_matches('/').to_string(),
            auth,
            token: Mutex::new(None),
            signer,
        })
    }

    /// An error of this catalog.
    pub(super) fn error(&self, what: &str, failure: &Failure) -> Error {
        Error::Catalog {
            catalog: self.catalog.clone(),
            message: format!("{what}: {}", failure.text()),
            retryable: failure.retryable(),
            source: None,
        }
    }

    /// The bearer token to send, fetched (or renewed) when needed.
    async fn bearer(&self) -> std::result::Result<Option<String>, Failure> {
        let (client_id, client_secret, server_uri, scope) = match &self.auth {
            RestAuth::None | RestAuth::SigV4 { .. } => return Ok(None),
            RestAuth::Token(t) => return Ok(Some(t.clone())),
            RestAuth::ClientCredentials {
                client_id,
                client_secret,
                server_uri,
                scope,
            } => (client_id, client_secret, server_uri, scope),
        };
        let mut token = self.token.lock().await;
        if let Some(t) = token.as_ref()
            && t.renew_at.is_none_or(|at| Instant::now() < at)
        {
            return Ok(Some(t.value.clone()));
        }
        let url = server_uri
            .clone()
            .unwrap_or_else(|| format!("{}/v1/oauth/tokens", self.base_uri));
        let form = {
            let mut form = url::form_urlencoded::Serializer::new(String::new());
            form.append_pair("grant_type", "client_credentials");
            if !client_id.is_empty() {
                form.append_pair("client_id", client_id);
            }
            form.append_pair("client_secret", client_secret);
            form.append_pair("scope", scope.as_deref().unwrap_or("catalog"));
            form.finish()
        };
        let request = self
            .http
            .post(&url)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(form);
        let body = send(request).await?;
        let answer: TokenAnswer = serde_json::from_slice(&body).map_err(|e| Failure::Status {
            status: StatusCode::OK,
            text: format!("the token endpoint answered no access_token ({e})"),
        })?;
        // Renewed a minute before it expires (or halfway, for short tokens).
        let renew_at = answer.expires_in.map(|s| {
            let margin = (s / 2).min(60);
            Instant::now() + Duration::from_secs(s - margin)
        });
        *token = Some(Token {
            value: answer.access_token.clone(),
            renew_at,
        });
        Ok(Some(answer.access_token))
    }

    /// Sends `request` once: the body of a 2xx answer, or why there was none.
    ///
    /// With OAuth2 client credentials, a 401 (a token expired or revoked before its
    /// time) fetches a new token and sends the request once more: a request refused
    /// for its credentials was not applied.
    pub(super) async fn send_once(
        &self,
        request: &Request<'_>,
    ) -> std::result::Result<Vec<u8>, Failure> {
        let answer = self.send_with_token(request).await;
        match &answer {
            Err(Failure::Status { status, .. })
                if *status == StatusCode::UNAUTHORIZED
                    && matches!(self.auth, RestAuth::ClientCredentials { .. }) =>
            {
                *self.token.lock().await = None;
                self.send_with_token(request).await
            }
            _ => answer,
        }
    }

    async fn send_with_token(
        &self,
        request: &Request<'_>,
    ) -> std::result::Result<Vec<u8>, Failure> {
        let bearer = self.bearer().await.map_err(|f| match f {
            // The token request's failure, said as such.
            Failure::Status { status, text } => Failure::Status {
                status,
                text: format!("OAuth2 token request failed: {text}"),
            },
            Failure::Transport { text, .. } => Failure::Transport {
                // The commit itself was never sent.
                sent: false,
                text: format!("OAuth2 token request failed: {text}"),
            },
        })?;
        let mut headers: Vec<(&str, &str)> = vec![("accept", "application/json")];
        headers.extend_from_slice(request.headers);
        if request.body.is_some() {
            headers.push(("content-type", "application/json"));
        }
        let signature = match &self.signer {
            Some(signer) => signer
                .sign(
                    request.method.as_str(),
                    &request.url,
                    &headers,
                    request.body.as_deref().unwrap_or_default(),
                )
                .await
                // Not signed: never sent.
                .map_err(|text| Failure::Transport { sent: false, text })?,
            None => Vec::new(),
        };
        let mut builder = self.http.request(request.method.clone(), &request.url);
        if let Some(token) = bearer {
            builder = builder.bearer_auth(token);
        }
        for (name, value) in headers {
            builder = builder.header(name, value);
        }
        for (name, value) in signature {
            builder = builder.header(name, value);
        }
        if let Some(body) = &request.body {
            builder = builder.body(body.clone());
        }
        send(builder).await
    }

    /// Sends an idempotent request, retrying transient failures with backoff.
    pub(super) async fn read(
        &self,
        request: &Request<'_>,
    ) -> std::result::Result<Vec<u8>, Failure> {
        let mut attempt = 1;
        loop {
            match self.send_once(request).await {
                Err(f) if f.retryable() && attempt < READ_ATTEMPTS => {
                    tracing::debug!(catalog = %self.catalog, operation = %request.what, attempt, error = %f.text(), "retrying");
                    tokio::time::sleep(Duration::from_millis(100 << attempt)).await;
                    attempt += 1;
                }
                answer => return answer,
            }
        }
    }

    /// [`Self::read`], the answer decoded as JSON.
    pub(super) async fn read_json<T: DeserializeOwned>(&self, request: &Request<'_>) -> Result<T> {
        let body = self
            .read(request)
            .await
            .map_err(|f| self.error(&request.what, &f))?;
        self.decode(&request.what, &body)
    }

    pub(super) fn decode<T: DeserializeOwned>(&self, what: &str, body: &[u8]) -> Result<T> {
        serde_json::from_slice(body).map_err(|e| Error::Catalog {
            catalog: self.catalog.clone(),
            message: format!("{what}: the answer is not what the REST protocol says: {e}"),
            retryable: false,
            source: Some(Box::new(e)),
        })
    }
}

/// Sends a built request: the body of a 2xx answer, or the status and the server's
/// message, or the transport failure.
async fn send(request: reqwest::RequestBuilder) -> std::result::Result<Vec<u8>, Failure> {
    let response = request.send().await.map_err(|e| Failure::Transport {
        // A connection that was never made carried nothing.
        sent: !e.is_connect(),
        text: transport_text(&e),
    })?;
    let status = response.status();
    let body = response.bytes().await.map_err(|e| Failure::Transport {
        sent: true,
        text: format!("{} and then {}", status.as_u16(), transport_text(&e)),
    })?;
    if status.is_success() {
        return Ok(body.to_vec());
    }
    let text = match serde_json::from_slice::<ErrorBody>(&body) {
        Ok(b) if !b.error.kind.is_empty() => {
            format!(
                "{}: {}",
                b.error.kind,
                crate::error::one_line(&b.error.message)
            )
        }
        Ok(b) => crate::error::one_line(&b.error.message),
        Err(_) => status
            .canonical_reason()
            .unwrap_or("no message")
            .to_string(),
    };
    Err(Failure::Status { status, text })
}

fn transport_text(e: &reqwest::Error) -> String {
    if e.is_timeout() {
        "timed out".into()
    } else if e.is_connect() {
        format!("cannot connect ({})", crate::error::cause(e))
    } else {
        format!("no answer ({})", crate::error::cause(e))
    }
}
