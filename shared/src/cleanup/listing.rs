//! Listing every file under a table's location: local directories with `std::fs`, S3
//! prefixes with an OpenDAL operator built from the table's FileIO properties.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::location::{local_path, scheme, split_bucket};
use crate::table::LoadedTable;
use crate::{Error, Result};

/// One file found under the table location.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListedFile {
    /// The location as FileIO takes it (same scheme as the table location).
    pub path: String,
    pub last_modified: Option<SystemTime>,
    pub size: u64,
}

/// Every file under the table's location (recursively; directories are not listed).
///
/// `file://` (or scheme-less) locations are listed with `std::fs`, `s3://` (`s3a`,
/// `s3n`) locations with an OpenDAL S3 operator configured from the table's FileIO
/// properties (endpoint, region, path style, credentials), falling back to the
/// environment (`AWS_ENDPOINT_URL_S3`, `AWS_REGION`, the standard credential chain).
pub async fn list_files(table: &LoadedTable) -> Result<Vec<ListedFile>> {
    let location = table.location().trim_end_matches('/');
    match scheme(location) {
        None | Some("file") => {
            let dir = local_path(location);
            let prefix = if location.starts_with("file:") {
                "file://"
            } else {
                ""
            };
            let root = dir.clone();
            tokio::task::spawn_blocking(move || {
                let mut out = Vec::new();
                walk_local(&root, &mut out)?;
                Ok(out
                    .into_iter()
                    .map(|(p, modified, size)| ListedFile {
                        path: format!("{prefix}{}", p.display()),
                        last_modified: modified,
                        size,
                    })
                    .collect())
            })
            .await
            .map_err(|e| Error::file(location, "listing the table location failed", e))?
        }
        Some(s @ ("s3" | "s3a" | "s3n")) => {
            let (bucket, key) = split_bucket(location)?;
            let op = s3_operator(table.file_io.config().props(), bucket)?;
            let prefix = format!("{}/", key.trim_matches('/'));
            let entries = op
                .list_with(&prefix)
                .recursive(true)
                .await
                .map_err(|e| Error::file(location, "listing the table location failed", e))?;
            Ok(entries
                .into_iter()
                .filter(|e| e.metadata().is_file() && !e.path().ends_with('/'))
                .map(|e| ListedFile {
                    path: format!("{s}://{bucket}/{}", e.path().trim_start_matches('/')),
                    last_modified: e.metadata().last_modified().map(SystemTime::from),
                    size: e.metadata().content_length(),
                })
                .collect())
        }
        Some(other) => Err(Error::UnsupportedTable {
            table: table.name.to_string(),
            message: format!(
                "cleanup lists file:// and s3:// locations only, not {other}:// ({location})"
            ),
        }),
    }
}

fn walk_local(dir: &Path, out: &mut Vec<(PathBuf, Option<SystemTime>, u64)>) -> Result<()> {
    let entries = std::fs::read_dir(dir)
        .map_err(|e| Error::file(dir.display().to_string(), "cannot list directory", e))?;
    for entry in entries {
        let entry = entry
            .map_err(|e| Error::file(dir.display().to_string(), "cannot list directory", e))?;
        let path = entry.path();
        let meta = std::fs::symlink_metadata(&path)
            .map_err(|e| Error::file(path.display().to_string(), "cannot stat", e))?;
        if meta.is_dir() {
            walk_local(&path, out)?;
        } else if meta.is_file() {
            out.push((path, meta.modified().ok(), meta.len()));
        }
        // Symbolic links and special files are neither followed nor listed.
    }
    Ok(())
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

fn truthy(v: &str) -> bool {
    matches!(
        v.trim().to_ascii_lowercase().as_str(),
        "true" | "t" | "1" | "on" | "yes"
    )
}

/// An OpenDAL S3 operator for `bucket`, from the same FileIO properties the catalog
/// gives iceberg's S3 storage (`s3.endpoint`, `s3.region`, `s3.path-style-access`,
/// `s3.access-key-id`, ...). Unset: endpoint from `AWS_ENDPOINT_URL_S3` (or
/// `AWS_ENDPOINT_URL`), region from `AWS_REGION` (or `AWS_DEFAULT_REGION`), path-style
/// addressing when an endpoint is set, credentials from the standard AWS chain.
fn s3_operator(
    props: &std::collections::HashMap<String, String>,
    bucket: &str,
) -> Result<opendal::Operator> {
    use iceberg::io::{
        CLIENT_REGION, S3_ACCESS_KEY_ID, S3_ALLOW_ANONYMOUS, S3_ASSUME_ROLE_ARN,
        S3_ASSUME_ROLE_EXTERNAL_ID, S3_ASSUME_ROLE_SESSION_NAME, S3_DISABLE_CONFIG_LOAD,
        S3_DISABLE_EC2_METADATA, S3_ENDPOINT, S3_PATH_STYLE_ACCESS, S3_REGION,
        S3_SECRET_ACCESS_KEY, S3_SESSION_TOKEN,
    };
    let get = |k: &str| props.get(k).filter(|v| !v.trim().is_empty()).cloned();
    let mut builder = opendal::services::S3::default().bucket(bucket).root("/");
    let endpoint = get(S3_ENDPOINT)
        .or_else(|| env("AWS_ENDPOINT_URL_S3"))
        .or_else(|| env("AWS_ENDPOINT_URL"));
    let path_style = get(S3_PATH_STYLE_ACCESS)
        .map(|v| truthy(&v))
        .unwrap_or(endpoint.is_some());
    if let Some(endpoint) = &endpoint {
        builder = builder.endpoint(endpoint);
    }
    if !path_style {
        builder = builder.enable_virtual_host_style();
    }
    if let Some(region) = get(CLIENT_REGION)
        .or_else(|| get(S3_REGION))
        .or_else(|| env("AWS_REGION"))
        .or_else(|| env("AWS_DEFAULT_REGION"))
    {
        builder = builder.region(&region);
    }
    if let Some(v) = get(S3_ACCESS_KEY_ID) {
        builder = builder.access_key_id(&v);
    }
    if let Some(v) = get(S3_SECRET_ACCESS_KEY) {
        builder = builder.secret_access_key(&v);
    }
    if let Some(v) = get(S3_SESSION_TOKEN) {
        builder = builder.session_token(&v);
    }
    if let Some(v) = get(S3_ASSUME_ROLE_ARN) {
        builder = builder.role_arn(&v);
    }
    if let Some(v) = get(S3_ASSUME_ROLE_EXTERNAL_ID) {
        builder = builder.external_id(&v);
    }
    if let Some(v) = get(S3_ASSUME_ROLE_SESSION_NAME) {
        builder = builder.role_session_name(&v);
    }
    if get(S3_ALLOW_ANONYMOUS).is_some_and(|v| truthy(&v)) {
        builder = builder.skip_signature();
    }
    if get(S3_DISABLE_EC2_METADATA).is_some_and(|v| truthy(&v)) {
        builder = builder.disable_ec2_metadata();
    }
    if get(S3_DISABLE_CONFIG_LOAD).is_some_and(|v| truthy(&v)) {
        builder = builder.disable_config_load();
    }
    let op = opendal::Operator::new(builder)
        .map_err(|e| Error::InvalidInput(format!("S3 configuration for bucket {bucket}: {e}")))?
        .finish();
    // As iceberg's own S3 storage: a per-attempt timeout inside a retry of transient errors.
    Ok(op
        .layer(opendal::layers::TimeoutLayer::new())
        .layer(opendal::layers::RetryLayer::new()))
}
