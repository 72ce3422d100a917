//! Secrets the functions read at cold start from AWS Secrets Manager, so that they never
//! sit in the Lambda environment: the REST catalog's OAuth2 client credentials.

use serde::Deserialize;

/// Why a secret gave no credential, in one line that never holds the secret's value.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct SecretError(String);

/// A secret's JSON form: `{"client_id": "...", "client_secret": "..."}`.
#[derive(Deserialize)]
struct ClientCredentials {
    client_id: String,
    client_secret: String,
}

/// The OAuth2 client credential (`CLIENT_ID:CLIENT_SECRET`) in the secret `arn`: its
/// SecretString as is, or built from its JSON form.
pub async fn client_credential(arn: &str) -> Result<String, SecretError> {
    let sdk = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .load()
        .await;
    let client = aws_sdk_secretsmanager::Client::new(&sdk);
    let answer = client
        .get_secret_value()
        .secret_id(arn)
        .send()
        .await
        .map_err(|e| {
            bad(format!(
                "cannot read secret {arn}: {}",
                aws_sdk_secretsmanager::error::DisplayErrorContext(&e)
            ))
        })?;
    let text = answer
        .secret_string()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| bad(format!("secret {arn} has no SecretString")))?;
    parse(text).ok_or_else(|| {
        // Never the value: it is the secret.
        bad(format!(
            "secret {arn} is neither CLIENT_ID:CLIENT_SECRET nor JSON with client_id and client_secret"
        ))
    })
}

/// `CLIENT_ID:CLIENT_SECRET`, from either form of the secret.
fn parse(text: &str) -> Option<String> {
    if text.starts_with('{') {
        let json: ClientCredentials = serde_json::from_str(text).ok()?;
        return Some(format!("{}:{}", json.client_id, json.client_secret));
    }
    text.contains(':').then(|| text.to_string())
}

fn bad(message: String) -> SecretError {
    // One line: the SDK's error context may span several.
    SecretError(message.split_whitespace().collect::<Vec<_>>().join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_forms_of_the_secret_give_the_credential() {
        assert_eq!(parse("eqdv:s3cr:et").as_deref(), Some("eqdv:s3cr:et"));
        assert_eq!(
            parse(r#"{"client_id": "eqdv", "client_secret": "s3cret"}"#).as_deref(),
            Some("eqdv:s3cret")
        );
        assert_eq!(parse("no-colon"), None);
        assert_eq!(parse(r#"{"client_id": "eqdv"}"#), None);
    }
}
