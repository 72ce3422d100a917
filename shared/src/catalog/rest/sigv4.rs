//! AWS Signature Version 4 for the Iceberg REST requests to AWS's own endpoints: the
//! Glue Data Catalog's (`https://glue.REGION.amazonaws.com/iceberg`, signing name
//! `glue`) and S3 Tables' (`https://s3tables.REGION.amazonaws.com/iceberg`, signing name
//! `s3tables`). The credentials are the standard AWS configuration's (environment,
//! profile, the Lambda role), asked of its provider for each request so that expiring
//! credentials are renewed by the provider, not held here.

use std::time::SystemTime;

use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;

use crate::{Error, Result};

/// Signs requests for one AWS service in one region.
pub(super) struct Signer {
    signing_name: String,
    region: String,
    credentials: SharedCredentialsProvider,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Signer")
            .field("signing_name", &self.signing_name)
            .field("region", &self.region)
            .finish_non_exhaustive()
    }
}

impl Signer {
    /// A signer with the standard AWS configuration's credentials; `region` defaults to
    /// its region.
    pub(super) async fn from_environment(
        catalog: &str,
        signing_name: &str,
        region: Option<String>,
    ) -> Result<Self> {
        let sdk = aws_config::defaults(aws_config::BehaviorVersion::latest())
            .load()
            .await;
        let region = region
            .or_else(|| sdk.region().map(|r| r.to_string()))
            .ok_or_else(|| {
                Error::InvalidInput(format!(
                    "catalog {catalog}: SigV4 signing needs a region (set --region or AWS_REGION)"
                ))
            })?;
        let credentials = sdk.credentials_provider().ok_or_else(|| {
            Error::InvalidInput(format!(
                "catalog {catalog}: SigV4 signing found no AWS credentials provider"
            ))
        })?;
        Ok(Self {
            signing_name: signing_name.to_string(),
            region,
            credentials,
        })
    }

    /// A signer with fixed credentials (the tests' known keys).
    #[cfg(test)]
    fn with_credentials(
        signing_name: &str,
        region: &str,
        credentials: aws_credential_types::Credentials,
    ) -> Self {
        Self {
            signing_name: signing_name.to_string(),
            region: region.to_string(),
            credentials: SharedCredentialsProvider::new(credentials),
        }
    }

    /// The headers that sign a request of `method` to `url` with `headers` (those that
    /// are sent as given) and `body`: `authorization`, `x-amz-date` and, for temporary
    /// credentials, `x-amz-security-token`.
    pub(super) async fn sign(
        &self,
        method: &str,
        url: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> std::result::Result<Vec<(String, String)>, String> {
        let credentials = self
            .credentials
            .provide_credentials()
            .await
            .map_err(|e| format!("no AWS credentials to sign with ({e})"))?;
        self.sign_at(method, url, headers, body, credentials, SystemTime::now())
    }

    fn sign_at(
        &self,
        method: &str,
        url: &str,
        headers: &[(&str, &str)],
        body: &[u8],
        credentials: aws_credential_types::Credentials,
        time: SystemTime,
    ) -> std::result::Result<Vec<(String, String)>, String> {
        let identity = credentials.into();
        let params = v4::SigningParams::builder()
            .identity(&identity)
            .region(&self.region)
            .name(&self.signing_name)
            .time(time)
            .settings(SigningSettings::default())
            .build()
            .map_err(|e| format!("cannot sign: {e}"))?
            .into();
        let request = SignableRequest::new(
            method,
            url,
            headers.iter().copied(),
            SignableBody::Bytes(body),
        )
        .map_err(|e| format!("cannot sign {method} {url}: {e}"))?;
        let (instructions, _) = sign(request, &params)
            .map_err(|e| format!("cannot sign {method} {url}: {e}"))?
            .into_parts();
        Ok(instructions
            .headers()
            .map(|(name, value)| (name.to_string(), value.to_string()))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// The signature of a request with known keys at a known time, as the SigV4
    /// specification's algorithm gives it: recomputed independently by botocore in the
    /// REST tests (`tests/rest.rs`); here, that the signature covers what it must.
    #[tokio::test]
    async fn signatures_name_the_service_region_and_day_and_change_with_the_body() {
        let signer = Signer::with_credentials(
            "glue",
            "eu-west-1",
            aws_credential_types::Credentials::new("AKIDEXAMPLE", "secret", None, None, "test"),
        );
        let time = SystemTime::UNIX_EPOCH + Duration::from_secs(1_764_892_800); // 2025-12-05
        let sign = |body: &[u8]| {
            let credentials =
                aws_credential_types::Credentials::new("AKIDEXAMPLE", "secret", None, None, "test");
            signer
                .sign_at(
                    "POST",
                    "https://glue.eu-west-1.amazonaws.com/iceberg/v1/namespaces/db/tables/t",
                    &[("content-type", "application/json")],
                    body,
                    credentials,
                    time,
                )
                .unwrap()
        };
        let headers = sign(b"{}");
        let auth = &headers
            .iter()
            .find(|(n, _)| n == "authorization")
            .expect("an authorization header")
            .1;
        assert!(
            auth.starts_with(
                "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20251205/eu-west-1/glue/aws4_request"
            ),
            "{auth}"
        );
        assert!(
            auth.contains("SignedHeaders=content-type;host;x-amz-date"),
            "{auth}"
        );
        assert!(
            headers
                .iter()
                .any(|(n, v)| n == "x-amz-date" && v == "20251205T000000Z")
        );
        assert_ne!(headers, sign(b"{ }"), "the body is signed");
        assert_eq!(headers, sign(b"{}"), "deterministic");
    }
}
