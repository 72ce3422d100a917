//! Amazon S3 Tables: a table bucket's tables, each with its own warehouse location that
//! S3 Tables assigns.
//!
//! S3 Tables keeps an Iceberg table's pointer itself: `GetTableMetadataLocation` answers
//! the metadata location with a version token, and `UpdateTableMetadataLocation` swaps
//! it only if the token is still current (a stale one is a ConflictException). That is
//! a pointer swap like Glue's, with the token as the version. As for Glue, a
//! ConflictException or a 5xx from the update is an unknown outcome, never a plain
//! failure: the SDK retries a request whose answer was lost, and the retry of a landed
//! request meets a stale token. `commit::publish` reads the pointer back.
//!
//! The storage of a table bucket refuses object deletes and listings (S3 Tables removes
//! unreferenced files itself), so the files of a failed attempt stay until S3 Tables'
//! unreferenced file removal collects them, and `eqdv cleanup` cannot list a table here.
//! A table's location is assigned by `CreateTable`, before any metadata exists, which
//! eqdv's create (a metadata file first, then the pointer) cannot follow: tables are
//! created by the engines that write them.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use aws_sdk_s3tables::Client;
use iceberg::io::FileIO;

use super::aws_failure::{catalog_error, update_error};
use super::storage::{KeysOnly, S3Settings, build_file_io, table_file_io};
use super::{Catalog, TableName, TablePointer, not_found};
use crate::{Error, Result};

/// How to reach a table bucket and its storage. Unset values come from the standard AWS
/// configuration (environment, profile, role), including `AWS_ENDPOINT_URL_S3TABLES`
/// and `AWS_ENDPOINT_URL_S3`.
#[derive(Clone, Default)]
pub struct S3TablesConfig {
    /// The table bucket: `arn:aws:s3tables:REGION:ACCOUNT:bucket/NAME`.
    pub table_bucket_arn: String,
    /// Defaults to the bucket ARN's region.
    pub region: Option<String>,
    /// The S3 Tables API endpoint.
    pub endpoint: Option<String>,
    /// The S3 endpoint of the table bucket's storage.
    pub s3_endpoint: Option<String>,
    /// Path-style S3 addressing; defaults to true when an S3 endpoint is set.
    pub s3_path_style: Option<bool>,
    /// Extra FileIO properties (`s3.*`).
    pub file_io_properties: HashMap<String, String>,
}

impl std::fmt::Debug for S3TablesConfig {
    // The properties' values are left out: they may hold S3 secrets.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3TablesConfig")
            .field("table_bucket_arn", &self.table_bucket_arn)
            .field("region", &self.region)
            .field("endpoint", &self.endpoint)
            .field("s3_endpoint", &self.s3_endpoint)
            .field("s3_path_style", &self.s3_path_style)
            .field("file_io_properties", &KeysOnly(&self.file_io_properties))
            .finish()
    }
}

/// The parts of a table bucket ARN eqdv uses.
#[derive(Debug, PartialEq, Eq)]
struct BucketArn {
    region: String,
    bucket: String,
}

impl BucketArn {
    /// Parses `arn:PARTITION:s3tables:REGION:ACCOUNT:bucket/NAME`.
    fn parse(arn: &str) -> Result<Self> {
        let invalid = |why: &str| {
            Error::InvalidInput(format!(
                "S3 Tables bucket ARN '{arn}' {why}: expected arn:aws:s3tables:REGION:ACCOUNT:bucket/NAME"
            ))
        };
        let parts: Vec<&str> = arn.splitn(6, ':').collect();
        let [prefix, partition, service, region, account, resource] = parts[..] else {
            return Err(invalid("has too few parts"));
        };
        if prefix != "arn" || partition.is_empty() {
            return Err(invalid("is not an ARN"));
        }
        if service != "s3tables" {
            return Err(invalid("is not of service s3tables"));
        }
        if region.is_empty() || account.is_empty() {
            return Err(invalid("lacks its region or account"));
        }
        match resource.strip_prefix("bucket/") {
            Some(bucket) if !bucket.is_empty() && !bucket.contains('/') => Ok(Self {
                region: region.to_string(),
                bucket: bucket.to_string(),
            }),
            _ => Err(invalid("does not name a table bucket")),
        }
    }
}

/// An S3 Tables table bucket as a catalog.
#[derive(Clone)]
pub struct S3TablesCatalog {
    name: String,
    client: Client,
    bucket_arn: String,
    io_properties: Arc<HashMap<String, String>>,
    file_io: FileIO,
}

impl std::fmt::Debug for S3TablesCatalog {
    // Deliberately omits the properties: they may hold credentials.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3TablesCatalog")
            .field("name", &self.name)
            .field("bucket_arn", &self.bucket_arn)
            .finish()
    }
}

impl S3TablesCatalog {
    /// Builds the catalog from `config` and the standard AWS configuration.
    pub async fn connect(config: S3TablesConfig) -> Result<Self> {
        let arn = BucketArn::parse(&config.table_bucket_arn)?;
        let region = config.region.clone().unwrap_or(arn.region);
        let sdk = aws_config::defaults(aws_config::BehaviorVersion::latest())
            .region(aws_config::Region::new(region.clone()))
            .load()
            .await;
        let mut s3tables = aws_sdk_s3tables::config::Builder::from(&sdk);
        if let Some(endpoint) = &config.endpoint {
            s3tables = s3tables.endpoint_url(endpoint);
        }
        let props = S3Settings {
            region: Some(region),
            endpoint: config.s3_endpoint.clone(),
            path_style: config.s3_path_style,
            extra: config.file_io_properties.clone(),
        }
        .properties();
        Ok(Self {
            name: format!("s3tables:{}", arn.bucket),
            client: Client::from_conf(s3tables.build()),
            bucket_arn: config.table_bucket_arn,
            file_io: build_file_io(&props),
            io_properties: Arc::new(props),
        })
    }
}

/// S3 Tables namespaces have one level: a dotted namespace cannot be one of them.
fn namespace_of<'a>(catalog: &str, table: &'a TableName) -> Result<&'a str> {
    if table.namespace.contains('.') {
        return Err(Error::InvalidInput(format!(
            "catalog {catalog}: table {table}: S3 Tables namespaces have one level, '{}' has several",
            table.namespace
        )));
    }
    Ok(&table.namespace)
}

#[async_trait]
impl Catalog for S3TablesCatalog {
    fn name(&self) -> &str {
        &self.name
    }

    fn file_io(&self) -> &FileIO {
        &self.file_io
    }

    fn table_file_io(
        &self,
        _table: &TableName,
        table_properties: &HashMap<String, String>,
    ) -> FileIO {
        table_file_io(
            &self.file_io,
            &self.io_properties,
            table_properties,
            &HashMap::new(),
        )
    }

    fn manages_own_files(&self) -> bool {
        true
    }

    fn default_table_location(&self, table: &TableName) -> String {
        // Never used to write: `create_table` refuses. S3 Tables names the location.
        format!("s3://{}/{}/{}", self.name, table.namespace, table.name)
    }

    async fn load_pointer(&self, table: &TableName) -> Result<TablePointer> {
        let namespace = namespace_of(&self.name, table)?;
        let answer = self
            .client
            .get_table_metadata_location()
            .table_bucket_arn(&self.bucket_arn)
            .namespace(namespace)
            .name(&table.name)
            .send()
            .await;
        let out = match answer {
            Ok(out) => out,
            Err(e)
                if e.as_service_error()
                    .is_some_and(|s| s.is_not_found_exception()) =>
            {
                return Err(not_found(&self.name, table));
            }
            Err(e) => {
                return Err(catalog_error(
                    &self.name,
                    &format!("GetTableMetadataLocation {table}"),
                    e,
                ));
            }
        };
        let metadata_location = out
            .metadata_location()
            .filter(|l| !l.is_empty())
            .ok_or_else(|| Error::UnsupportedTable {
                table: table.to_string(),
                message: format!(
                    "S3 Tables table in {} has no metadata location yet (created, never committed)",
                    self.name
                ),
            })?;
        Ok(TablePointer {
            metadata_location: metadata_location.to_string(),
            version: Some(out.version_token().to_string()),
        })
    }

    async fn swap_pointer(
        &self,
        table: &TableName,
        expected: &TablePointer,
        new_metadata_location: &str,
    ) -> Result<()> {
        let namespace = namespace_of(&self.name, table)?;
        let Some(token) = expected.version.as_deref() else {
            return Err(Error::InvalidInput(format!(
                "catalog {}: table {table}: a pointer without its version token cannot be swapped",
                self.name
            )));
        };
        let result = self
            .client
            .update_table_metadata_location()
            .table_bucket_arn(&self.bucket_arn)
            .namespace(namespace)
            .name(&table.name)
            .version_token(token)
            .metadata_location(new_metadata_location)
            .send()
            .await;
        // A stale token is a ConflictException, and so is the retry of a landed request.
        result.map(|_| ()).map_err(|e| {
            update_error(
                &self.name,
                &table.to_string(),
                "UpdateTableMetadataLocation",
                e,
                |e| e.is_conflict_exception(),
            )
        })
    }

    async fn create_table(&self, table: &TableName, _metadata_location: &str) -> Result<()> {
        Err(Error::InvalidInput(format!(
            "catalog {}: cannot create table {table}: S3 Tables assigns a table's location \
             when it is created, so create it with the engine that writes it",
            self.name
        )))
    }

    async fn list_tables(&self, namespace: Option<&str>) -> Result<Vec<TableName>> {
        let mut pages = self
            .client
            .list_tables()
            .table_bucket_arn(&self.bucket_arn)
            .set_namespace(namespace.map(str::to_string))
            .into_paginator()
            .send();
        let mut tables = Vec::new();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| catalog_error(&self.name, "ListTables", e))?;
            for t in page.tables() {
                // A table bucket holds only Iceberg tables; one namespace level.
                if let Some(ns) = t.namespace().first() {
                    tables.push(TableName::new(ns.clone(), t.name()));
                }
            }
        }
        tables.sort();
        Ok(tables)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_bucket_arn_gives_its_region_and_name() {
        assert_eq!(
            BucketArn::parse("arn:aws:s3tables:eu-west-1:123456789012:bucket/lake").unwrap(),
            BucketArn {
                region: "eu-west-1".into(),
                bucket: "lake".into()
            }
        );
        for (arn, why) in [
            ("lake", "too few parts"),
            (
                "arn:aws:s3:eu-west-1:123456789012:bucket/lake",
                "service s3tables",
            ),
            (
                "arn:aws:s3tables::123456789012:bucket/lake",
                "region or account",
            ),
            (
                "arn:aws:s3tables:eu-west-1:123456789012:table/lake",
                "table bucket",
            ),
            (
                "arn:aws:s3tables:eu-west-1:123456789012:bucket/lake/table/t",
                "table bucket",
            ),
            (
                "nra:aws:s3tables:eu-west-1:123456789012:bucket/lake",
                "not an ARN",
            ),
        ] {
            let e = BucketArn::parse(arn).unwrap_err().to_string();
            assert!(e.contains(arn) && e.contains(why), "{arn}: {e}");
        }
    }

    #[test]
    fn dotted_namespaces_are_refused_with_the_table_named() {
        let e = namespace_of("s3tables:lake", &TableName::new("a.b", "t"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("s3tables:lake") && e.contains("a.b.t"), "{e}");
        assert_eq!(
            namespace_of("s3tables:lake", &TableName::new("a", "t")).unwrap(),
            "a"
        );
    }
}
