//! S3 credentials loaded once per process, not once per request.
//!
//! iceberg's storage builds a new opendal operator for every file it opens, and each new
//! operator's signer starts with an empty cache: every request went through the whole
//! default chain again (for the environment's keys, a copy of the process environment a
//! request; a profile file or a web identity token file read again), a visible share of
//! a streaming conversion's CPU in a profile. The chain here is the one opendal builds
//! when nothing else is configured (reqsign's default: environment, profile, SSO, web
//! identity, ECS, instance metadata), asked once and its answer kept until it is about
//! to expire, as a single operator's signer keeps it.

use std::sync::{Arc, OnceLock};

use iceberg_storage_opendal::{AwsCredential, CustomAwsCredentialLoader, ProvideCredential};
use reqsign_core::{Context, SigningCredential};

/// Properties that make iceberg's storage build another chain than the default one
/// (static keys, an assumed role, anonymous access, parts of the chain turned off):
/// where any is set, iceberg's own per-operator chain is left in place.
const CREDENTIAL_PROPERTIES: &[&str] = &[
    iceberg::io::S3_ACCESS_KEY_ID,
    iceberg::io::S3_SECRET_ACCESS_KEY,
    iceberg::io::S3_SESSION_TOKEN,
    iceberg::io::S3_ASSUME_ROLE_ARN,
    iceberg::io::S3_ASSUME_ROLE_EXTERNAL_ID,
    iceberg::io::S3_ASSUME_ROLE_SESSION_NAME,
    iceberg::io::S3_ALLOW_ANONYMOUS,
    iceberg::io::S3_DISABLE_EC2_METADATA,
    iceberg::io::S3_DISABLE_CONFIG_LOAD,
];

/// The process's shared loader for FileIO properties that leave the default chain in
/// place, or `None` where they configure credentials of their own.
pub(super) fn shared_default_loader<'a>(
    mut property_names: impl Iterator<Item = &'a String>,
) -> Option<CustomAwsCredentialLoader> {
    if property_names.any(|k| CREDENTIAL_PROPERTIES.contains(&k.as_str())) {
        return None;
    }
    static LOADER: OnceLock<CustomAwsCredentialLoader> = OnceLock::new();
    Some(
        LOADER
            .get_or_init(|| {
                CustomAwsCredentialLoader::new(CachedCredentials::new(
                    reqsign_aws_v4::DefaultCredentialProvider::new(),
                ))
            })
            .clone(),
    )
}

/// `inner`'s credential, kept while it is valid (for a credential that expires, until
/// two minutes before: reqsign's margin) and loaded again after. Loads are serialized,
/// so requests that start together wait for one load instead of each making its own.
#[derive(Debug)]
pub(super) struct CachedCredentials<P> {
    inner: P,
    cached: Arc<tokio::sync::Mutex<Option<AwsCredential>>>,
}

impl<P> CachedCredentials<P> {
    pub(super) fn new(inner: P) -> Self {
        Self {
            inner,
            cached: Arc::default(),
        }
    }
}

impl<P> ProvideCredential for CachedCredentials<P>
where
    P: ProvideCredential<Credential = AwsCredential>,
{
    type Credential = AwsCredential;

    async fn provide_credential(
        &self,
        ctx: &Context,
    ) -> reqsign_core::Result<Option<AwsCredential>> {
        let mut cached = self.cached.lock().await;
        if let Some(credential) = cached.as_ref()
            && credential.is_valid()
        {
            return Ok(Some(credential.clone()));
        }
        // A failed load is not kept: the next request tries again.
        let loaded = self.inner.provide_credential(ctx).await?;
        cached.clone_from(&loaded);
        Ok(loaded)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use reqsign_core::time::Timestamp;

    use super::*;

    /// Hands out a credential expiring `valid_for` from now, counting its loads.
    #[derive(Debug)]
    struct Counting {
        loads: Arc<AtomicUsize>,
        valid_for: Option<Duration>,
    }

    impl ProvideCredential for Counting {
        type Credential = AwsCredential;

        async fn provide_credential(
            &self,
            _ctx: &Context,
        ) -> reqsign_core::Result<Option<AwsCredential>> {
            let n = self.loads.fetch_add(1, Ordering::SeqCst);
            Ok(Some(AwsCredential {
                access_key_id: format!("key-{n}"),
                secret_access_key: "secret".into(),
                session_token: None,
                expires_in: self.valid_for.map(|d| Timestamp::now() + d),
            }))
        }
    }

    fn cached(valid_for: Option<Duration>) -> (CachedCredentials<Counting>, Arc<AtomicUsize>) {
        let loads = Arc::new(AtomicUsize::new(0));
        let inner = Counting {
            loads: loads.clone(),
            valid_for,
        };
        (CachedCredentials::new(inner), loads)
    }

    #[tokio::test]
    async fn requests_that_start_together_share_one_load() {
        let (provider, loads) = cached(Some(Duration::from_secs(3600)));
        let ctx = Context::new();
        let answers =
            futures::future::join_all((0..64).map(|_| provider.provide_credential(&ctx))).await;
        for answer in answers {
            let credential = answer.expect("load").expect("a credential");
            assert_eq!(credential.access_key_id, "key-0");
        }
        assert_eq!(loads.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_credential_about_to_expire_is_loaded_again() {
        // Within reqsign's two-minute margin: never kept.
        let (provider, loads) = cached(Some(Duration::from_secs(60)));
        let ctx = Context::new();
        for expected in ["key-0", "key-1"] {
            let credential = provider.provide_credential(&ctx).await.expect("load");
            assert_eq!(credential.expect("a credential").access_key_id, expected);
        }
        assert_eq!(loads.load(Ordering::SeqCst), 2);
        // A credential without an expiry (the environment's keys) is kept.
        let (provider, loads) = cached(None);
        for _ in 0..3 {
            provider.provide_credential(&ctx).await.expect("load");
        }
        assert_eq!(loads.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn properties_that_configure_credentials_keep_iceberg_s_own_chain() {
        let props = |pairs: &[(&str, &str)]| -> HashMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let plain = props(&[
            (iceberg::io::S3_REGION, "us-east-1"),
            (iceberg::io::S3_ENDPOINT, "http://127.0.0.1:9000"),
        ]);
        assert!(shared_default_loader(plain.keys()).is_some());
        for key in CREDENTIAL_PROPERTIES {
            let mut with = plain.clone();
            with.insert(key.to_string(), "x".into());
            assert!(shared_default_loader(with.keys()).is_none(), "{key}");
        }
    }
}
