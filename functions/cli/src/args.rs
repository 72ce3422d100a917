//! The arguments several subcommands share: which catalog, which table and branch, and
//! the shape of a generated workload.

use std::path::Path;

use anyhow::{Context, Result};
use clap::Args;
use eqdv::catalog::{
    Catalog, GlueCatalog, GlueConfig, RestAuth, RestCatalog, RestConfig, S3TablesCatalog,
    S3TablesConfig, SqliteCatalog, TableName,
};

/// Which catalog holds the tables.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum CatalogKind {
    /// The embedded default: a SQLite catalog file in a warehouse directory.
    Sqlite,
    /// The AWS Glue Data Catalog, with table data on S3.
    Glue,
    /// An Iceberg REST catalog (Polaris, Nessie, Lakekeeper, Unity, Gravitino, ...).
    Rest,
    /// An Amazon S3 Tables table bucket.
    S3tables,
}

/// Which catalog.
#[derive(Args, Clone)]
pub struct CatalogArgs {
    /// The catalog: `sqlite` (DIR/catalog.db, catalog name `eqdv`), `glue`, `rest` or
    /// `s3tables`.
    #[arg(long, value_enum, default_value = "sqlite", env = "EQDV_CATALOG")]
    catalog: CatalogKind,
    /// sqlite: the warehouse directory (catalog and table data). glue: where new tables
    /// go, as s3://bucket/prefix (existing tables keep their own location). rest: the
    /// warehouse to ask the catalog's configuration for (optional).
    #[arg(long, value_name = "DIR|S3_URI", env = "EQDV_WAREHOUSE")]
    warehouse: Option<String>,
    /// glue: the catalog's AWS account id, when it is not the caller's.
    #[arg(long, env = "EQDV_GLUE_CATALOG_ID")]
    glue_catalog_id: Option<String>,
    /// glue, s3tables: the AWS region (default: the standard AWS configuration; for
    /// s3tables, the table bucket's).
    #[arg(long, env = "EQDV_REGION")]
    region: Option<String>,
    /// glue: the Glue endpoint (default: AWS_ENDPOINT_URL_GLUE or AWS's).
    #[arg(long, env = "EQDV_GLUE_ENDPOINT")]
    glue_endpoint: Option<String>,
    /// glue, rest, s3tables: the S3 endpoint (default: AWS_ENDPOINT_URL_S3 or AWS's);
    /// path-style addressing is used when an endpoint is set.
    #[arg(long, env = "EQDV_S3_ENDPOINT")]
    s3_endpoint: Option<String>,
    /// glue: SkipArchive on UpdateTable (no Glue table version archived per commit).
    #[arg(long, env = "EQDV_GLUE_SKIP_ARCHIVE", default_value_t = true, action = clap::ArgAction::Set)]
    glue_skip_archive: bool,
    /// rest: the catalog's base URI (before /v1/...).
    #[arg(long, value_name = "URI", env = "EQDV_REST_URI")]
    rest_uri: Option<String>,
    /// rest: OAuth2 client credentials, CLIENT_ID:CLIENT_SECRET, exchanged for a token.
    #[arg(
        long,
        value_name = "ID:SECRET",
        env = "EQDV_REST_CREDENTIAL",
        hide_env_values = true,
        conflicts_with = "rest_token"
    )]
    rest_credential: Option<String>,
    /// rest: a bearer token, sent as is.
    #[arg(long, env = "EQDV_REST_TOKEN", hide_env_values = true)]
    rest_token: Option<String>,
    /// rest: sign requests with AWS SigV4 for this service, with the standard AWS
    /// credentials: `glue` (the Glue Data Catalog's Iceberg endpoint) or `s3tables` (S3
    /// Tables').
    #[arg(
        long,
        value_name = "SERVICE",
        env = "EQDV_REST_SIGV4",
        conflicts_with_all = ["rest_token", "rest_credential"]
    )]
    rest_sigv4: Option<String>,
    /// rest: the OAuth2 token endpoint (default: the catalog's v1/oauth/tokens).
    #[arg(long, env = "EQDV_REST_OAUTH2_SERVER_URI")]
    rest_oauth2_server_uri: Option<String>,
    /// rest: the OAuth2 scope (default: catalog).
    #[arg(long, env = "EQDV_REST_SCOPE")]
    rest_scope: Option<String>,
    /// rest: ask for credentials vended for each table's files, and use them.
    #[arg(long, env = "EQDV_REST_VENDED_CREDENTIALS", default_value_t = true, action = clap::ArgAction::Set)]
    rest_vended_credentials: bool,
    /// s3tables: the table bucket, arn:aws:s3tables:REGION:ACCOUNT:bucket/NAME.
    #[arg(long, value_name = "ARN", env = "EQDV_S3TABLES_BUCKET_ARN")]
    s3tables_bucket_arn: Option<String>,
    /// s3tables: the S3 Tables endpoint (default: AWS_ENDPOINT_URL_S3TABLES or AWS's).
    #[arg(long, value_name = "URL", env = "EQDV_S3TABLES_ENDPOINT")]
    s3tables_endpoint: Option<String>,
}

impl CatalogArgs {
    pub async fn connect(&self) -> Result<Box<dyn Catalog>> {
        match self.catalog {
            CatalogKind::Sqlite => {
                let dir = self
                    .warehouse
                    .as_deref()
                    .context("--warehouse DIR is required with the sqlite catalog")?;
                let catalog = SqliteCatalog::open_warehouse(Path::new(dir))
                    .with_context(|| format!("opening warehouse {dir}"))?;
                Ok(Box::new(catalog))
            }
            CatalogKind::Glue => {
                let config = GlueConfig {
                    warehouse: self.warehouse.clone(),
                    catalog_id: self.glue_catalog_id.clone(),
                    region: self.region.clone(),
                    glue_endpoint: self.glue_endpoint.clone(),
                    s3_endpoint: self.s3_endpoint.clone(),
                    skip_archive: Some(self.glue_skip_archive),
                    ..Default::default()
                };
                Ok(Box::new(GlueCatalog::connect(config).await?))
            }
            CatalogKind::Rest => {
                let uri = self
                    .rest_uri
                    .clone()
                    .context("--rest-uri URI is required with the rest catalog")?;
                let auth = match (&self.rest_token, &self.rest_credential) {
                    _ if self.rest_sigv4.is_some() => RestAuth::SigV4 {
                        signing_name: self.rest_sigv4.clone().unwrap_or_default(),
                        region: self.region.clone(),
                    },
                    (Some(token), _) => RestAuth::Token(token.clone()),
                    (None, Some(credential)) => RestAuth::client_credentials(
                        credential,
                        self.rest_oauth2_server_uri.clone(),
                        self.rest_scope.clone(),
                    ),
                    (None, None) => RestAuth::None,
                };
                let config = RestConfig {
                    uri,
                    warehouse: self.warehouse.clone(),
                    auth,
                    vended_credentials: Some(self.rest_vended_credentials),
                    region: self.region.clone(),
                    s3_endpoint: self.s3_endpoint.clone(),
                    ..Default::default()
                };
                Ok(Box::new(RestCatalog::connect(config).await?))
            }
            CatalogKind::S3tables => {
                let table_bucket_arn = self
                    .s3tables_bucket_arn
                    .clone()
                    .context("--s3tables-bucket-arn ARN is required with the s3tables catalog")?;
                let config = S3TablesConfig {
                    table_bucket_arn,
                    region: self.region.clone(),
                    endpoint: self.s3tables_endpoint.clone(),
                    s3_endpoint: self.s3_endpoint.clone(),
                    ..Default::default()
                };
                Ok(Box::new(S3TablesCatalog::connect(config).await?))
            }
        }
    }
}

/// Which table, in which catalog.
#[derive(Args, Clone)]
pub struct TableArgs {
    #[command(flatten)]
    catalog: CatalogArgs,
    /// The table, as NAMESPACE.TABLE (for Glue: DATABASE.TABLE).
    #[arg(long, value_name = "NS.NAME")]
    table: String,
    /// The branch to read and commit to (`convert --plan` converts on the shard's
    /// branch; a tag is refused).
    #[arg(long, default_value = DEFAULT_BRANCH)]
    pub branch: String,
}

/// The branch when none is named.
pub const DEFAULT_BRANCH: &str = "main";

impl TableArgs {
    pub async fn catalog(&self) -> Result<Box<dyn Catalog>> {
        self.catalog.connect().await
    }

    pub fn name(&self) -> Result<TableName> {
        Ok(TableName::parse(&self.table)?)
    }
}

#[derive(Args, Clone)]
pub struct WorkloadArgs {
    /// Seed for the workload (same seed, same rows).
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Rows of the initial load.
    #[arg(long, default_value_t = 10_000)]
    rows: u64,
    /// CDC commits after the initial load.
    #[arg(long, default_value_t = 5)]
    commits: u32,
    /// Key column type(s): long|int|string|uuid|decimal|date|timestamp|timestamptz|binary|boolean|fixed,
    /// comma-separated for a multi-column key.
    #[arg(long, default_value = "long")]
    key: String,
    /// Partitioning: none|identity|bucket:N|day.
    #[arg(long, default_value = "none")]
    partition: String,
    /// Some keys are null (null equals null in equality deletes).
    #[arg(long)]
    null_keys: bool,
    /// Also write equality deletes with an unpartitioned spec (they apply everywhere).
    #[arg(long)]
    global_deletes: bool,
    /// Add a column halfway through the workload.
    #[arg(long)]
    add_column: bool,
    /// A property the table is created with, KEY=VALUE (repeatable; e.g.
    /// `eqdv.queue-groups=1`). Ignored for a table that already exists.
    #[arg(long = "table-property", value_name = "KEY=VALUE")]
    table_properties: Vec<String>,
    /// Changes (insert, update or delete of one key) per CDC commit.
    #[arg(long, default_value_t = 200)]
    changes_per_commit: u32,
    /// Most rows per data or delete file (files are per partition).
    #[arg(long, default_value_t = 500)]
    rows_per_file: u32,
    /// Most rows per Parquet row group.
    #[arg(long, default_value_t = 200)]
    rows_per_row_group: u32,
    /// Write Parquet bloom filters on the key columns of data files (1% false positives).
    #[arg(long)]
    bloom_filters: bool,
    /// Write each row group's bloom filters right after it, not all before the footer
    /// (where Java's Parquet writer puts them).
    #[arg(long, requires = "bloom_filters")]
    bloom_filters_after_row_groups: bool,
    /// Long keys are hashed ids spread over all of i64, so file bounds prune nothing.
    #[arg(long)]
    hashed_keys: bool,
    /// Filler columns c01.. (long, string, double) for a realistic width.
    #[arg(long, default_value_t = 0)]
    extra_columns: u32,
    /// Updates pick keys by a scrambled Zipf distribution (a few hot keys anywhere in
    /// the initial load take most updates) instead of uniformly.
    #[arg(long)]
    zipf_keys: bool,
}

impl WorkloadArgs {
    pub fn spec(&self) -> Result<eqdv_workload::generate::WorkloadSpec> {
        Ok(eqdv_workload::generate::WorkloadSpec {
            seed: self.seed,
            rows: self.rows,
            commits: self.commits,
            keys: eqdv_workload::generate::parse_key_types(&self.key)?,
            partition: self.partition.parse()?,
            null_keys: self.null_keys,
            global_deletes: self.global_deletes,
            add_column: self.add_column,
            changes_per_commit: self.changes_per_commit,
            rows_per_file: self.rows_per_file,
            rows_per_row_group: self.rows_per_row_group,
            bloom_filters: self.bloom_filters,
            bloom_filters_after_row_groups: self.bloom_filters_after_row_groups,
            hashed_keys: self.hashed_keys,
            extra_columns: self.extra_columns,
            zipf_keys: self.zipf_keys,
            table_properties: self
                .table_properties
                .iter()
                .map(|kv| match kv.split_once('=') {
                    Some((k, v)) if !k.trim().is_empty() => {
                        Ok((k.trim().to_string(), v.to_string()))
                    }
                    _ => Err(anyhow::anyhow!(
                        "--table-property {kv:?}: expected KEY=VALUE"
                    )),
                })
                .collect::<Result<_>>()?,
        })
    }
}
