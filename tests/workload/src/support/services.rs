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
pub fn glue_spec(seed: u64) -> crate::generate::WorkloadSpec {
    use crate::generate::{KeyType, PartitionKind, WorkloadSpec};
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
