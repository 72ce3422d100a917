//! The AWS Glue Data Catalog, with table data on S3.
//!
//! Glue stores an Iceberg table's pointer in the table parameter `metadata_location`.
//! A commit is an UpdateTable guarded by the VersionId read with GetTable: Glue rejects a
//! stale VersionId with ConcurrentModificationException, which is what makes concurrent
//! writers safe. The update keeps every other field and parameter of the table and sets
//! `previous_metadata_location`, as Iceberg's own Glue catalog does. A request that may
//! have reached Glue but gave no answer is reported as an unknown outcome, never as a
//! failure, so nobody deletes files a landed commit references; so is a
//! ConcurrentModificationException or a 5xx from UpdateTable, since the SDK retries a
//! request whose answer was lost and the retry of a landed request meets a stale
//! VersionId.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use aws_sdk_glue::Client;
use aws_sdk_glue::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_glue::types::{DatabaseInput, StorageDescriptor, Table, TableInput};
use iceberg::io::FileIO;

use super::aws_failure::{catalog_error, update_error};
use super::storage::{KeysOnly, S3Settings, build_file_io, table_file_io};
use super::{Catalog, TableName, TablePointer, already_exists, not_found};
use crate::{Error, Result};

const METADATA_LOCATION: &str = "metadata_location";
const PREVIOUS_METADATA_LOCATION: &str = "previous_metadata_location";
const TABLE_TYPE: &str = "table_type";
const ICEBERG: &str = "ICEBERG";

/// How to reach Glue and S3. Unset values come from the standard AWS configuration
/// (environment, profile, instance role), including `AWS_ENDPOINT_URL_GLUE` and
/// `AWS_ENDPOINT_URL_S3`.
#[derive(Clone, Default)]
pub struct GlueConfig {
    /// Where new tables go: `s3://bucket/prefix` (tables at `<warehouse>/<db>.db/<table>`).
    pub warehouse: Option<String>,
    /// The AWS account id of the catalog, when it is not the caller's.
    pub catalog_id: Option<String>,
    pub region: Option<String>,
    pub glue_endpoint: Option<String>,
    pub s3_endpoint: Option<String>,
    /// Path-style S3 addressing; defaults to true when an S3 endpoint is set (MinIO).
    pub s3_path_style: Option<bool>,
    /// Glue's SkipArchive on UpdateTable (no table version archived per commit).
    /// Defaults to true, as in Iceberg Java.
    pub skip_archive: Option<bool>,
    /// Extra FileIO properties (`s3.*`).
    pub file_io_properties: HashMap<String, String>,
}

impl std::fmt::Debug for GlueConfig {
    // The properties' values are left out: they may hold S3 secrets.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GlueConfig")
            .field("warehouse", &self.warehouse)
            .field("catalog_id", &self.catalog_id)
            .field("region", &self.region)
            .field("glue_endpoint", &self.glue_endpoint)
            .field("s3_endpoint", &self.s3_endpoint)
            .field("s3_path_style", &self.s3_path_style)
            .field("skip_archive", &self.skip_archive)
            .field("file_io_properties", &KeysOnly(&self.file_io_properties))
            .finish()
    }
}

/// A Glue Data Catalog client with S3 storage.
#[derive(Clone)]
pub struct GlueCatalog {
    name: String,
    client: Client,
    catalog_id: Option<String>,
    warehouse: Option<String>,
    skip_archive: bool,
    io_properties: Arc<HashMap<String, String>>,
    file_io: FileIO,
}

impl std::fmt::Debug for GlueCatalog {
    // Deliberately omits the properties: they may hold credentials.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GlueCatalog")
            .field("name", &self.name)
            .field("catalog_id", &self.catalog_id)
            .field("warehouse", &self.warehouse)
            .finish()
    }
}

impl GlueCatalog {
    /// Builds the catalog from `config` and the standard AWS configuration.
    pub async fn connect(config: GlueConfig) -> Result<Self> {
        let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest());
        if let Some(region) = &config.region {
            loader = loader.region(aws_config::Region::new(region.clone()));
        }
        let sdk = loader.load().await;
        let mut glue = aws_sdk_glue::config::Builder::from(&sdk);
        if let Some(endpoint) = &config.glue_endpoint {
            glue = glue.endpoint_url(endpoint);
        }
        let client = Client::from_conf(glue.build());

        let region = config
            .region
            .clone()
            .or_else(|| sdk.region().map(|r| r.to_string()));
        let props = S3Settings {
            region,
            endpoint: config.s3_endpoint.clone(),
            path_style: config.s3_path_style,
            extra: config.file_io_properties.clone(),
        }
        .properties();
        let file_io = build_file_io(&props);
        let name = match &config.catalog_id {
            Some(id) => format!("glue:{id}"),
            None => "glue".to_string(),
        };
        Ok(Self {
            name,
            client,
            catalog_id: config.catalog_id,
            warehouse: config
                .warehouse
                .map(|w| w.trim_end_matches('/').to_string()),
            skip_archive: config.skip_archive.unwrap_or(true),
            io_properties: Arc::new(props),
            file_io,
        })
    }

    /// A request eqdv could not build (a table definition Glue's model rejects): a
    /// retry builds the same one.
    fn error(&self, what: &str, e: impl std::error::Error + Send + Sync + 'static) -> Error {
        Error::Catalog {
            catalog: self.name.clone(),
            message: format!("{what}: {}", crate::error::cause(&e)),
            retryable: false,
            source: Some(Box::new(e)),
        }
    }

    /// A Glue call's outcome: `Some` answer, `None` for the one service error `expected`
    /// picks out (the entity does not exist, or already does), and any other failure as
    /// [`catalog_error`] of `what`.
    fn answer<T, E>(
        &self,
        what: &str,
        result: std::result::Result<T, SdkError<E>>,
        expected: impl FnOnce(&E) -> bool,
    ) -> Result<Option<T>>
    where
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    {
        match result {
            Ok(out) => Ok(Some(out)),
            Err(e) if e.as_service_error().is_some_and(expected) => Ok(None),
            Err(e) => Err(catalog_error(&self.name, what, e)),
        }
    }

    async fn get_table(&self, table: &TableName) -> Result<Table> {
        let result = self
            .client
            .get_table()
            .set_catalog_id(self.catalog_id.clone())
            .database_name(&table.namespace)
            .name(&table.name)
            .send()
            .await;
        self.answer(&format!("GetTable {table}"), result, |s| {
            s.is_entity_not_found_exception()
        })?
        .and_then(|out| out.table)
        .ok_or_else(|| not_found(&self.name, table))
    }

    fn pointer_of(&self, table: &TableName, glue: &Table) -> Result<TablePointer> {
        let params = glue.parameters();
        let table_type = params.and_then(|p| p.get(TABLE_TYPE));
        if !table_type.is_some_and(|t| t.eq_ignore_ascii_case(ICEBERG)) {
            return Err(Error::UnsupportedTable {
                table: table.to_string(),
                message: format!(
                    "Glue table parameter table_type is {:?}, not ICEBERG: not an Iceberg table",
                    table_type
                ),
            });
        }
        let metadata_location = params
            .and_then(|p| p.get(METADATA_LOCATION))
            .cloned()
            .ok_or_else(|| Error::UnsupportedTable {
                table: table.to_string(),
                message: "Glue table has no metadata_location parameter".into(),
            })?;
        Ok(TablePointer {
            metadata_location,
            version: glue.version_id().map(str::to_string),
        })
    }

    async fn ensure_database(&self, database: &str) -> Result<()> {
        let exists = self
            .client
            .get_database()
            .set_catalog_id(self.catalog_id.clone())
            .name(database)
            .send()
            .await;
        let found = self.answer(&format!("GetDatabase {database}"), exists, |s| {
            s.is_entity_not_found_exception()
        })?;
        if found.is_some() {
            return Ok(());
        }
        let input = DatabaseInput::builder()
            .name(database)
            .build()
            .map_err(|e| self.error("database input", e))?;
        let created = self
            .client
            .create_database()
            .set_catalog_id(self.catalog_id.clone())
            .database_input(input)
            .send()
            .await;
        // Already there: someone else created it meanwhile.
        self.answer(&format!("CreateDatabase {database}"), created, |s| {
            s.is_already_exists_exception()
        })?;
        Ok(())
    }
}

/// A table definition identical to `glue`'s but for `parameters`.
fn table_input_from(
    glue: &Table,
    parameters: HashMap<String, String>,
) -> Result<TableInput, aws_smithy_types::error::operation::BuildError> {
    TableInput::builder()
        .name(glue.name())
        .set_description(glue.description().map(str::to_string))
        .set_owner(glue.owner().map(str::to_string))
        .set_last_access_time(glue.last_access_time().cloned())
        .set_last_analyzed_time(glue.last_analyzed_time().cloned())
        .retention(glue.retention())
        .set_storage_descriptor(glue.storage_descriptor().cloned())
        .set_partition_keys(Some(glue.partition_keys().to_vec()).filter(|k| !k.is_empty()))
        .set_view_original_text(glue.view_original_text().map(str::to_string))
        .set_view_expanded_text(glue.view_expanded_text().map(str::to_string))
        .set_table_type(glue.table_type().map(str::to_string))
        .set_target_table(glue.target_table().cloned())
        .set_parameters(Some(parameters))
        .build()
}

#[async_trait]
impl Catalog for GlueCatalog {
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
        // The table's own s3.* properties (e.g. server-side encryption) win.
        table_file_io(
            &self.file_io,
            &self.io_properties,
            table_properties,
            &HashMap::new(),
        )
    }

    fn default_table_location(&self, table: &TableName) -> String {
        match &self.warehouse {
            Some(w) => format!("{w}/{}.db/{}", table.namespace, table.name),
            None => format!("s3://unset-warehouse/{}.db/{}", table.namespace, table.name),
        }
    }

    async fn load_pointer(&self, table: &TableName) -> Result<TablePointer> {
        let glue = self.get_table(table).await?;
        self.pointer_of(table, &glue)
    }

    async fn swap_pointer(
        &self,
        table: &TableName,
        expected: &TablePointer,
        new_metadata_location: &str,
    ) -> Result<()> {
        // Read the definition to update; fail fast when the pointer already moved.
        let glue = self.get_table(table).await?;
        let current = self.pointer_of(table, &glue)?;
        if current.metadata_location != expected.metadata_location
            || (expected.version.is_some() && current.version != expected.version)
        {
            return Err(Error::CommitConflict {
                table: table.to_string(),
                message: format!(
                    "Glue pointer moved to {} (version {:?})",
                    current.metadata_location, current.version
                ),
            });
        }
        let mut parameters = glue.parameters().cloned().unwrap_or_default();
        parameters.insert(METADATA_LOCATION.into(), new_metadata_location.to_string());
        parameters.insert(
            PREVIOUS_METADATA_LOCATION.into(),
            expected.metadata_location.clone(),
        );
        parameters.insert(TABLE_TYPE.into(), ICEBERG.into());
        let input = table_input_from(&glue, parameters)
            .map_err(|e| self.error("building UpdateTable input", e))?;
        let result = self
            .client
            .update_table()
            .set_catalog_id(self.catalog_id.clone())
            .database_name(&table.namespace)
            .table_input(input)
            .set_version_id(expected.version.clone())
            .skip_archive(self.skip_archive)
            .send()
            .await;
        // Glue answers the retry of a landed request with a stale VersionId.
        result.map(|_| ()).map_err(|e| {
            update_error(&self.name, &table.to_string(), "UpdateTable", e, |e| {
                e.is_concurrent_modification_exception()
            })
        })
    }

    async fn create_table(&self, table: &TableName, metadata_location: &str) -> Result<()> {
        self.ensure_database(&table.namespace).await?;
        let location = metadata_location
            .rsplit_once("/metadata/")
            .map(|(base, _)| base.to_string());
        let input = TableInput::builder()
            .name(&table.name)
            .table_type("EXTERNAL_TABLE")
            .parameters(TABLE_TYPE, ICEBERG)
            .parameters(METADATA_LOCATION, metadata_location)
            .set_storage_descriptor(
                location.map(|l| StorageDescriptor::builder().location(l).build()),
            )
            .build()
            .map_err(|e| self.error("building CreateTable input", e))?;
        let created = self
            .client
            .create_table()
            .set_catalog_id(self.catalog_id.clone())
            .database_name(&table.namespace)
            .table_input(input)
            .send()
            .await;
        self.answer(&format!("CreateTable {table}"), created, |s| {
            s.is_already_exists_exception()
        })?
        .map(|_| ())
        .ok_or_else(|| already_exists(&self.name, table))
    }

    async fn list_tables(&self, namespace: Option<&str>) -> Result<Vec<TableName>> {
        let databases: Vec<String> = match namespace {
            Some(ns) => vec![ns.to_string()],
            None => {
                let mut names = Vec::new();
                let mut pages = self
                    .client
                    .get_databases()
                    .set_catalog_id(self.catalog_id.clone())
                    .into_paginator()
                    .send();
                while let Some(page) = pages.next().await {
                    let page = page.map_err(|e| catalog_error(&self.name, "GetDatabases", e))?;
                    names.extend(page.database_list().iter().map(|d| d.name().to_string()));
                }
                names
            }
        };
        let mut tables = Vec::new();
        for db in databases {
            let mut pages = self
                .client
                .get_tables()
                .set_catalog_id(self.catalog_id.clone())
                .database_name(&db)
                .into_paginator()
                .send();
            while let Some(page) = pages.next().await {
                let page =
                    page.map_err(|e| catalog_error(&self.name, &format!("GetTables {db}"), e))?;
                for t in page.table_list() {
                    let iceberg = t
                        .parameters()
                        .and_then(|p| p.get(TABLE_TYPE))
                        .is_some_and(|v| v.eq_ignore_ascii_case(ICEBERG));
                    if iceberg {
                        tables.push(TableName::new(db.clone(), t.name()));
                    }
                }
            }
        }
        tables.sort();
        Ok(tables)
    }
}
