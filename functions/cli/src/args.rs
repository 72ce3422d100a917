//! The arguments several subcommands share: which catalog, which table and branch, and
//! the shape of a generated workload.

use anyhow::Result;
use clap::Args;
use eqdv::catalog::{Catalog, TableName};
use eqdv_functions::FunctionError;
use eqdv_functions::config::{self, CatalogConfig};

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

impl CatalogKind {
    /// The kind as `EQDV_CATALOG` spells it.
    fn name(self) -> &'static str {
        match self {
            CatalogKind::Sqlite => "sqlite",
            CatalogKind::Glue => "glue",
            CatalogKind::Rest => "rest",
            CatalogKind::S3tables => "s3tables",
        }
    }
}

/// Which catalog. Each option is also the variable the functions read (named in its
/// help), and the CLI reads its catalog as they do (`CatalogConfig::from_lookup`): an
/// option given wins over the variable. The one default of its own: the embedded
/// catalog (`sqlite`) when neither `--catalog` nor `EQDV_CATALOG` names one.
#[derive(Args, Clone)]
pub struct CatalogArgs {
    /// The catalog (EQDV_CATALOG): `sqlite` (DIR/catalog.db, catalog name `eqdv`; the
    /// default), `glue`, `rest` or `s3tables`.
    #[arg(long, value_enum)]
    catalog: Option<CatalogKind>,
    /// sqlite: the warehouse directory (catalog and table data). glue: where new tables
    /// go, as s3://bucket/prefix (existing tables keep their own location). rest: the
    /// warehouse to ask the catalog's configuration for (optional). (EQDV_WAREHOUSE)
    #[arg(long, value_name = "DIR|S3_URI")]
    warehouse: Option<String>,
    /// glue: the catalog's AWS account id, when it is not the caller's.
    /// (EQDV_GLUE_CATALOG_ID)
    #[arg(long)]
    glue_catalog_id: Option<String>,
    /// glue, s3tables: the AWS region (default: the standard AWS configuration; for
    /// s3tables, the table bucket's). (EQDV_REGION)
    #[arg(long)]
    region: Option<String>,
    /// glue: the Glue endpoint (default: AWS_ENDPOINT_URL_GLUE or AWS's).
    /// (EQDV_GLUE_ENDPOINT)
    #[arg(long)]
    glue_endpoint: Option<String>,
    /// glue, rest, s3tables: the S3 endpoint (default: AWS_ENDPOINT_URL_S3 or AWS's);
    /// path-style addressing is used when an endpoint is set. (EQDV_S3_ENDPOINT)
    #[arg(long)]
    s3_endpoint: Option<String>,
    /// glue: SkipArchive on UpdateTable (no Glue table version archived per commit;
    /// default true). (EQDV_GLUE_SKIP_ARCHIVE)
    #[arg(long, value_name = "BOOL", action = clap::ArgAction::Set)]
    glue_skip_archive: Option<bool>,
    /// rest: the catalog's base URI (before /v1/...). (EQDV_REST_URI)
    #[arg(long, value_name = "URI")]
    rest_uri: Option<String>,
    /// rest: OAuth2 client credentials, CLIENT_ID:CLIENT_SECRET, exchanged for a token.
    /// (EQDV_REST_CREDENTIAL)
    #[arg(long, value_name = "ID:SECRET", conflicts_with = "rest_token")]
    rest_credential: Option<String>,
    /// rest: a bearer token, sent as is. (EQDV_REST_TOKEN)
    #[arg(long)]
    rest_token: Option<String>,
    /// rest: sign requests with AWS SigV4 for this service, with the standard AWS
    /// credentials: `glue` (the Glue Data Catalog's Iceberg endpoint) or `s3tables` (S3
    /// Tables'). (EQDV_REST_SIGV4)
    #[arg(
        long,
        value_name = "SERVICE",
        conflicts_with_all = ["rest_token", "rest_credential"]
    )]
    rest_sigv4: Option<String>,
    /// rest: the OAuth2 token endpoint (default: the catalog's v1/oauth/tokens).
    /// (EQDV_REST_OAUTH2_SERVER_URI)
    #[arg(long)]
    rest_oauth2_server_uri: Option<String>,
    /// rest: the OAuth2 scope (default: catalog). (EQDV_REST_SCOPE)
    #[arg(long)]
    rest_scope: Option<String>,
    /// rest: ask for credentials vended for each table's files, and use them (default
    /// true). (EQDV_REST_VENDED_CREDENTIALS)
    #[arg(long, value_name = "BOOL", action = clap::ArgAction::Set)]
    rest_vended_credentials: Option<bool>,
    /// s3tables: the table bucket, arn:aws:s3tables:REGION:ACCOUNT:bucket/NAME.
    /// (EQDV_S3TABLES_BUCKET_ARN)
    #[arg(long, value_name = "ARN")]
    s3tables_bucket_arn: Option<String>,
    /// s3tables: the S3 Tables endpoint (default: AWS_ENDPOINT_URL_S3TABLES or AWS's).
    /// (EQDV_S3TABLES_ENDPOINT)
    #[arg(long, value_name = "URL")]
    s3tables_endpoint: Option<String>,
}

impl CatalogArgs {
    /// The option given for the functions' variable `name`, if any.
    fn option(&self, name: &str) -> Option<String> {
        let text = |b: Option<bool>| b.map(|b| b.to_string());
        match name {
            config::ENV_CATALOG => self.catalog.map(|k| k.name().to_string()),
            config::ENV_WAREHOUSE => self.warehouse.clone(),
            config::ENV_GLUE_CATALOG_ID => self.glue_catalog_id.clone(),
            config::ENV_REGION => self.region.clone(),
            config::ENV_GLUE_ENDPOINT => self.glue_endpoint.clone(),
            config::ENV_S3_ENDPOINT => self.s3_endpoint.clone(),
            config::ENV_GLUE_SKIP_ARCHIVE => text(self.glue_skip_archive),
            config::ENV_REST_URI => self.rest_uri.clone(),
            config::ENV_REST_CREDENTIAL => self.rest_credential.clone(),
            config::ENV_REST_TOKEN => self.rest_token.clone(),
            config::ENV_REST_SIGV4 => self.rest_sigv4.clone(),
            config::ENV_REST_OAUTH2_SERVER_URI => self.rest_oauth2_server_uri.clone(),
            config::ENV_REST_SCOPE => self.rest_scope.clone(),
            config::ENV_REST_VENDED_CREDENTIALS => text(self.rest_vended_credentials),
            config::ENV_S3TABLES_BUCKET_ARN => self.s3tables_bucket_arn.clone(),
            config::ENV_S3TABLES_ENDPOINT => self.s3tables_endpoint.clone(),
            _ => None,
        }
    }

    /// The functions' variables as this command sees them: an option given, else the
    /// environment, else (for `EQDV_CATALOG` only) the embedded catalog.
    pub fn lookup(&self) -> impl Fn(&str) -> Option<String> + '_ {
        move |name| {
            // A way to authenticate given as an option replaces those of the environment
            // (the functions accept one at most).
            let auth = config::REST_AUTH_VARS;
            let auth_given = auth.iter().any(|v| self.option(v).is_some());
            if auth_given && auth.contains(&name) {
                return self.option(name);
            }
            self.option(name)
                .or_else(|| std::env::var(name).ok().filter(|v| !v.trim().is_empty()))
                .or_else(|| {
                    (name == config::ENV_CATALOG).then(|| CatalogKind::Sqlite.name().into())
                })
        }
    }

    /// The catalog these options and the environment name.
    pub fn config(&self) -> Result<CatalogConfig> {
        CatalogConfig::from_lookup(self.lookup()).map_err(with_option)
    }

    pub async fn connect(&self) -> Result<Box<dyn Catalog>> {
        self.config()?.connect().await.map_err(with_option)
    }
}

/// A configuration error naming the option beside its variable (`--warehouse`
/// beside `EQDV_WAREHOUSE`): the user of the CLI may have given either.
pub fn with_option(error: FunctionError) -> anyhow::Error {
    match error {
        FunctionError::Config { var, message } => {
            let option = var
                .strip_prefix("EQDV_")
                .map(|v| v.to_lowercase().replace('_', "-"));
            match option {
                Some(option) if var != config::ENV_REST_CREDENTIAL_SECRET_ARN => {
                    anyhow::anyhow!("--{option} ({var}): {message}")
                }
                _ => anyhow::anyhow!("{var}: {message}"),
            }
        }
        other => other.into(),
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
    /// Rows of the initial load [default: 10000; demo: 200000].
    #[arg(long)]
    rows: Option<u64>,
    /// CDC commits after the initial load [default: 5; demo: 20].
    #[arg(long)]
    commits: Option<u32>,
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
    /// Changes (insert, update or delete of one key) per CDC commit [default: 200;
    /// demo: 1000].
    #[arg(long)]
    changes_per_commit: Option<u32>,
    /// Most rows per data or delete file (files are per partition) [default: 500; demo:
    /// 20000].
    #[arg(long)]
    rows_per_file: Option<u32>,
    /// Most rows per Parquet row group [default: 200; demo: 5000].
    #[arg(long)]
    rows_per_row_group: Option<u32>,
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

/// The sizes of a workload that its options leave out: `generate`'s are small (a table
/// for tests and scripts), the demo's big enough that equality deletes slow a reader.
pub struct WorkloadSize {
    pub rows: u64,
    pub commits: u32,
    pub changes_per_commit: u32,
    pub rows_per_file: u32,
    pub rows_per_row_group: u32,
}

impl WorkloadSize {
    pub const GENERATE: Self = Self {
        rows: 10_000,
        commits: 5,
        changes_per_commit: 200,
        rows_per_file: 500,
        rows_per_row_group: 200,
    };
    pub const DEMO: Self = Self {
        rows: 200_000,
        commits: 20,
        changes_per_commit: 1_000,
        rows_per_file: 20_000,
        rows_per_row_group: 5_000,
    };
}

impl WorkloadArgs {
    /// The workload these options describe, with `size` for the sizes they leave out.
    pub fn spec(&self, size: &WorkloadSize) -> Result<eqdv_workload::generate::WorkloadSpec> {
        Ok(eqdv_workload::generate::WorkloadSpec {
            seed: self.seed,
            rows: self.rows.unwrap_or(size.rows),
            commits: self.commits.unwrap_or(size.commits),
            keys: eqdv_workload::generate::parse_key_types(&self.key)?,
            partition: self.partition.parse()?,
            null_keys: self.null_keys,
            global_deletes: self.global_deletes,
            add_column: self.add_column,
            changes_per_commit: self.changes_per_commit.unwrap_or(size.changes_per_commit),
            rows_per_file: self.rows_per_file.unwrap_or(size.rows_per_file),
            rows_per_row_group: self.rows_per_row_group.unwrap_or(size.rows_per_row_group),
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
