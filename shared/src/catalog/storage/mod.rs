//! The storage of a catalog's tables, as the Glue and REST catalogs configure it: S3
//! properties from the configuration and the environment, a FileIO over them that
//! shares the process's S3 credentials, and a table's own FileIO where its properties
//! (or credentials a catalog vended for it) override them.

use std::collections::HashMap;
use std::sync::Arc;

use iceberg::io::{FileIO, FileIOBuilder};
use iceberg_storage_opendal::OpenDalResolvingStorageFactory;

mod credentials;

/// FileIO properties in a debug form that names their keys and never their values
/// (`s3.secret-access-key`, `s3.session-token` hold secrets): what a configuration's
/// `Debug` prints.
pub(super) struct KeysOnly<'a>(pub &'a HashMap<String, String>);

impl std::fmt::Debug for KeysOnly<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut keys: Vec<&str> = self.0.keys().map(String::as_str).collect();
        keys.sort_unstable();
        f.debug_list().entries(keys).finish()
    }
}

/// Where S3 is, as a catalog's configuration says; unset values come from the
/// environment (`AWS_ENDPOINT_URL_S3`, `AWS_ENDPOINT_URL`).
pub(super) struct S3Settings {
    pub region: Option<String>,
    pub endpoint: Option<String>,
    /// Path-style addressing; defaults to true when an endpoint is set (MinIO).
    pub path_style: Option<bool>,
    /// Extra FileIO properties (`s3.*`), which win.
    pub extra: HashMap<String, String>,
}

impl S3Settings {
    /// The FileIO properties.
    pub(super) fn properties(self) -> HashMap<String, String> {
        let mut props = HashMap::new();
        if let Some(region) = self.region {
            props.insert(iceberg::io::S3_REGION.to_string(), region);
        }
        let endpoint = self
            .endpoint
            .or_else(|| env("AWS_ENDPOINT_URL_S3"))
            .or_else(|| env("AWS_ENDPOINT_URL"));
        let path_style = self.path_style.unwrap_or(endpoint.is_some());
        if let Some(endpoint) = endpoint {
            props.insert(iceberg::io::S3_ENDPOINT.to_string(), endpoint);
        }
        props.insert(
            iceberg::io::S3_PATH_STYLE_ACCESS.to_string(),
            path_style.to_string(),
        );
        props.extend(self.extra);
        props
    }
}

/// A non-empty environment variable.
pub(super) fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// A FileIO that resolves `s3://` and `file://` locations. Unless `props` configure
/// credentials of their own, its S3 requests share the process's credentials (see
/// `credentials`) instead of loading them for each request.
pub(super) fn build_file_io(props: &HashMap<String, String>) -> FileIO {
    let mut storage = OpenDalResolvingStorageFactory::new();
    if let Some(loader) = credentials::shared_default_loader(props.keys()) {
        storage = storage.with_s3_credential_loader(loader);
    }
    FileIOBuilder::new(Arc::new(storage))
        .with_props(props.iter())
        .build()
}

/// The FileIO of one table: `file_io` (built from `props`) unless the table's own
/// `s3.*` properties (e.g. server-side encryption) or `vended` settings override some
/// of them, in which case one with those on top.
pub(super) fn table_file_io(
    file_io: &FileIO,
    props: &Arc<HashMap<String, String>>,
    table_properties: &HashMap<String, String>,
    vended: &HashMap<String, String>,
) -> FileIO {
    let overrides: Vec<(&String, &String)> = table_properties
        .iter()
        .filter(|(k, _)| k.starts_with("s3."))
        .chain(vended.iter())
        .collect();
    if overrides.is_empty() {
        return file_io.clone();
    }
    let mut merged = props.as_ref().clone();
    merged.extend(overrides.into_iter().map(|(k, v)| (k.clone(), v.clone())));
    build_file_io(&merged)
}

#[cfg(test)]
mod redaction_tests {
    use std::collections::HashMap;

    use crate::catalog::{GlueConfig, RestConfig, S3TablesConfig};

    /// A configuration's debug form names its FileIO properties, never their values.
    #[test]
    fn configurations_print_property_keys_not_values() {
        let properties = HashMap::from([
            (
                "s3.secret-access-key".to_string(),
                "SECRET-1f2e".to_string(),
            ),
            ("s3.session-token".to_string(), "TOKEN-9a8b".to_string()),
        ]);
        let printed = [
            format!(
                "{:?}",
                GlueConfig {
                    file_io_properties: properties.clone(),
                    ..Default::default()
                }
            ),
            format!(
                "{:?}",
                RestConfig {
                    file_io_properties: properties.clone(),
                    ..Default::default()
                }
            ),
            format!(
                "{:?}",
                S3TablesConfig {
                    file_io_properties: properties.clone(),
                    ..Default::default()
                }
            ),
        ];
        for text in printed {
            assert!(text.contains("s3.secret-access-key"), "{text}");
            assert!(
                !text.contains("SECRET-1f2e") && !text.contains("TOKEN-9a8b"),
                "{text}"
            );
        }
    }
}
