//! The test services (tests/services): their settings from the environment that
//! `tests/services/up` writes, and unique names so tests sharing them never collide.
//! Without the services a test fails and says how to start them; it never skips.

/// The S3 warehouse root (`EQDV_WAREHOUSE_S3`), after checking that the services'
/// endpoints are configured.
pub fn require_services() -> String {
    for var in [
        "AWS_ENDPOINT_URL_GLUE",
        "AWS_ENDPOINT_URL_S3",
        "EQDV_WAREHOUSE_S3",
    ] {
        assert!(
            std::env::var(var).is_ok_and(|v| !v.is_empty()),
            "{var} is not set: start the test services with `tests/services/up` and \
             `source tests/services/env` (tests/run does both)"
        );
    }
    std::env::var("EQDV_WAREHOUSE_S3").unwrap_or_default()
}

/// `test` plus the process id and the time in microseconds: unique per run.
pub fn unique_name(test: &str) -> String {
    format!(
        "{test}_{}_{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_micros())
            .unwrap_or(0)
    )
}

/// A warehouse prefix of the test's own under the services' bucket.
pub fn unique_warehouse(unique: &str) -> String {
    format!("{}/{unique}", require_services().trim_end_matches('/'))
}

/// The Iceberg REST catalog URI of the services (`EQDV_REST_URI`).
pub fn rest_uri() -> String {
    require_services();
    match std::env::var("EQDV_REST_URI") {
        Ok(uri) if !uri.is_empty() => uri,
        _ => panic!(
            "EQDV_REST_URI is not set: start the test services with `tests/services/up` and \
             `source tests/services/env` (tests/run does both)"
        ),
    }
}

/// The services' Amazon S3 Tables endpoint (`AWS_ENDPOINT_URL_S3TABLES`): moto's, which
/// also serves the table buckets' storage (S3 at the same address, not MinIO).
pub fn s3tables_endpoint() -> String {
    require_services();
    match std::env::var("AWS_ENDPOINT_URL_S3TABLES") {
        Ok(uri) if !uri.is_empty() => uri,
        _ => panic!(
            "AWS_ENDPOINT_URL_S3TABLES is not set: start the test services with \
             `tests/services/up` and `source tests/services/env` (tests/run does both)"
        ),
    }
}

/// A new S3 Tables table bucket of the test's own (its name lowercase, at most 63
/// characters); returns its ARN.
pub async fn s3tables_bucket(test: &str) -> String {
    let endpoint = s3tables_endpoint();
    let sdk = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .load()
        .await;
    let conf = aws_sdk_s3tables::config::Builder::from(&sdk)
        .endpoint_url(endpoint)
        .build();
    let client = aws_sdk_s3tables::Client::from_conf(conf);
    let mut name: String = unique_name(test)
        .to_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    name.truncate(63);
    let name = name.trim_end_matches('-').to_string();
    client
        .create_table_bucket()
        .name(&name)
        .send()
        .await
        .unwrap_or_else(|e| panic!("create table bucket {name}: {e:?}"))
        .arn
}

/// eqdv's client of the S3 Tables table bucket `bucket_arn` of the services.
pub async fn s3tables_catalog(bucket_arn: &str) -> eqdv::catalog::S3TablesCatalog {
    s3tables_catalog_at(bucket_arn, &s3tables_endpoint()).await
}

/// eqdv's client of the table bucket `bucket_arn` through the S3 Tables API at
/// `endpoint` (the services' own, or a fault proxy in front of it); its storage is the
/// services' S3 Tables emulator.
pub async fn s3tables_catalog_at(
    bucket_arn: &str,
    endpoint: &str,
) -> eqdv::catalog::S3TablesCatalog {
    eqdv::catalog::S3TablesCatalog::connect(eqdv::catalog::S3TablesConfig {
        table_bucket_arn: bucket_arn.to_string(),
        endpoint: Some(endpoint.to_string()),
        s3_endpoint: Some(s3tables_endpoint()),
        ..Default::default()
    })
    .await
    .expect("S3 Tables catalog")
}

/// eqdv's client of the services' Iceberg REST catalog, its tables' files on MinIO.
pub async fn rest_catalog() -> eqdv::catalog::RestCatalog {
    rest_catalog_at(&rest_uri(), eqdv::catalog::RestAuth::None).await
}

/// eqdv's client of the Iceberg REST catalog at `uri` (the services' own, or a fault
/// proxy in front of it), authenticating with `auth`.
pub async fn rest_catalog_at(
    uri: &str,
    auth: eqdv::catalog::RestAuth,
) -> eqdv::catalog::RestCatalog {
    eqdv::catalog::RestCatalog::connect(eqdv::catalog::RestConfig {
        uri: uri.to_string(),
        auth,
        ..Default::default()
    })
    .await
    .expect("REST catalog")
}

/// The workload the Glue/S3 tests generate: small, identity-partitioned, a two-column key.
pub fn glue_spec(seed: u64) -> eqdv_workload::generate::WorkloadSpec {
    use eqdv_workload::generate::{KeyType, PartitionKind, WorkloadSpec};
    WorkloadSpec {
        seed,
        rows: 1_000,
        commits: 3,
        keys: vec![KeyType::Long, KeyType::String],
        partition: PartitionKind::Identity,
        changes_per_commit: 100,
        rows_per_file: 250,
        rows_per_row_group: 100,
        ..Default::default()
    }
}
