//! The functions' configuration, from environment variables (docs/configuration.md).
//!
//! Read through a lookup function rather than `std::env` directly, so tests can give
//! their own. A bad value is an error naming the variable.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use eqdv::catalog::Catalog;
use eqdv::catalog::SqliteCatalog;
use eqdv::catalog::TableName;
use eqdv::catalog::{
    GlueCatalog, GlueConfig, RestAuth, RestCatalog, RestConfig, S3TablesCatalog, S3TablesConfig,
};
use eqdv::convert::MAX_RANGES;
use eqdv::plan::{PlanOptions, QUEUE_GROUPS};
use eqdv::planner::{Allowlist, PlannerConfig};
use eqdv::resolve::ResolveOptions;

use crate::{FunctionError, Result};

/// Which catalog the functions talk to.
#[derive(Clone, Debug)]
pub enum CatalogConfig {
    /// The AWS Glue Data Catalog (the deployed default).
    Glue(GlueConfig),
    /// A SQLite catalog warehouse on disk (local runs and tests).
    Sqlite { warehouse: String },
    /// An Iceberg REST catalog; its OAuth2 client credentials may be in a Secrets
    /// Manager secret, read when the catalog is connected (a function's cold start).
    Rest {
        config: RestConfig,
        credential_secret_arn: Option<String>,
    },
    /// An Amazon S3 Tables table bucket.
    S3Tables(S3TablesConfig),
}

impl CatalogConfig {
    /// The catalog the variables name (`EQDV_CATALOG`, Glue when unset, and the
    /// variables of that catalog), read through `lookup`; empty values count as unset.
    /// The functions and the CLI read their catalog here alike (the CLI's flags over the
    /// environment; see its `CatalogArgs`).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let get = |name: &str| value_of(&lookup, name);
        Ok(match get(ENV_CATALOG).as_deref() {
            None | Some("glue") => CatalogConfig::Glue(GlueConfig {
                warehouse: get(ENV_WAREHOUSE),
                catalog_id: get(ENV_GLUE_CATALOG_ID),
                region: get(ENV_REGION),
                glue_endpoint: get(ENV_GLUE_ENDPOINT),
                s3_endpoint: get(ENV_S3_ENDPOINT),
                skip_archive: get(ENV_GLUE_SKIP_ARCHIVE)
                    .map(|v| parse_bool(ENV_GLUE_SKIP_ARCHIVE, &v))
                    .transpose()?,
                s3_path_style: None,
                file_io_properties: HashMap::new(),
            }),
            Some("sqlite") => CatalogConfig::Sqlite {
                warehouse: get(ENV_WAREHOUSE).ok_or_else(|| {
                    bad(
                        ENV_WAREHOUSE,
                        "required with EQDV_CATALOG=sqlite (a directory)",
                    )
                })?,
            },
            Some("rest") => {
                let uri = get(ENV_REST_URI)
                    .ok_or_else(|| bad(ENV_REST_URI, "required with EQDV_CATALOG=rest"))?;
                // One way to authenticate, at most.
                let set: Vec<&str> = REST_AUTH_VARS
                    .into_iter()
                    .filter(|w| get(w).is_some())
                    .collect();
                if let [first, second, ..] = set[..] {
                    return Err(bad(
                        second,
                        format!("set one way to authenticate, not both {first} and {second}"),
                    ));
                }
                let client_credentials = |credential: &str| {
                    RestAuth::client_credentials(
                        credential,
                        get(ENV_REST_OAUTH2_SERVER_URI),
                        get(ENV_REST_SCOPE),
                    )
                };
                let credential_secret_arn = get(ENV_REST_CREDENTIAL_SECRET_ARN);
                let auth = match set.first().copied() {
                    Some(ENV_REST_TOKEN) => {
                        RestAuth::Token(get(ENV_REST_TOKEN).unwrap_or_default())
                    }
                    Some(ENV_REST_CREDENTIAL) => {
                        client_credentials(&get(ENV_REST_CREDENTIAL).unwrap_or_default())
                    }
                    Some(ENV_REST_SIGV4) => RestAuth::SigV4 {
                        signing_name: get(ENV_REST_SIGV4).unwrap_or_default(),
                        region: get(ENV_REGION),
                    },
                    // The secret's credential replaces the empty one at connect.
                    Some(_) => client_credentials(""),
                    None => RestAuth::None,
                };
                CatalogConfig::Rest {
                    config: RestConfig {
                        uri,
                        warehouse: get(ENV_WAREHOUSE),
                        auth,
                        vended_credentials: get(ENV_REST_VENDED_CREDENTIALS)
                            .map(|v| parse_bool(ENV_REST_VENDED_CREDENTIALS, &v))
                            .transpose()?,
                        region: get(ENV_REGION),
                        s3_endpoint: get(ENV_S3_ENDPOINT),
                        ..Default::default()
                    },
                    credential_secret_arn,
                }
            }
            Some("s3tables") => CatalogConfig::S3Tables(S3TablesConfig {
                table_bucket_arn: get(ENV_S3TABLES_BUCKET_ARN).ok_or_else(|| {
                    bad(
                        ENV_S3TABLES_BUCKET_ARN,
                        "required with EQDV_CATALOG=s3tables",
                    )
                })?,
                region: get(ENV_REGION),
                endpoint: get(ENV_S3TABLES_ENDPOINT),
                s3_endpoint: get(ENV_S3_ENDPOINT),
                ..Default::default()
            }),
            Some(other) => {
                return Err(bad(
                    ENV_CATALOG,
                    format!("expected glue, rest, s3tables or sqlite, got {other:?}"),
                ));
            }
        })
    }

    pub async fn connect(&self) -> Result<Box<dyn Catalog>> {
        Ok(match self {
            CatalogConfig::Glue(config) => Box::new(GlueCatalog::connect(config.clone()).await?),
            CatalogConfig::Sqlite { warehouse } => Box::new(SqliteCatalog::open_warehouse(
                std::path::Path::new(warehouse),
            )?),
            CatalogConfig::Rest {
                config,
                credential_secret_arn,
            } => {
                let mut config = config.clone();
                if let (
                    Some(arn),
                    RestAuth::ClientCredentials {
                        server_uri, scope, ..
                    },
                ) = (credential_secret_arn, &config.auth)
                {
                    let credential = crate::secrets::client_credential(arn).await.map_err(|e| {
                        FunctionError::Config {
                            var: ENV_REST_CREDENTIAL_SECRET_ARN.to_string(),
                            message: e.to_string(),
                        }
                    })?;
                    config.auth = RestAuth::client_credentials(
                        &credential,
                        server_uri.clone(),
                        scope.clone(),
                    );
                }
                Box::new(RestCatalog::connect(config).await?)
            }
            CatalogConfig::S3Tables(config) => {
                Box::new(S3TablesCatalog::connect(config.clone()).await?)
            }
        })
    }
}

/// Everything both functions read.
#[derive(Clone, Debug)]
pub struct FunctionConfig {
    pub catalog: CatalogConfig,
    pub allowlist: Allowlist,
    /// The branch converted when an event names none.
    pub branch: String,
    /// CloudWatch namespace of the EMF metrics.
    pub metrics_namespace: String,
    /// Print EMF metric lines on stdout (off for the CLI, whose stdout is its output).
    pub emit_metrics: bool,
    // Planner.
    /// The SQS FIFO queue shards are sent to.
    pub shard_queue_url: Option<String>,
    pub plan: PlanOptions,
    // Converter.
    pub resolve: ResolveOptions,
    /// Overrides the tables' `commit.retry.num-retries`.
    pub commit_retries: Option<u32>,
    /// Time kept free before the invocation's deadline: the conversion starts no new
    /// phase after `deadline - margin`, so that a commit under way and the cleanup of
    /// an abandoned attempt finish in time.
    pub deadline_margin: Duration,
    /// The shard queue's DLQ: a shard that cannot succeed is sent there with its error.
    pub dead_letter_queue_url: Option<String>,
    /// The shard queue's maxReceiveCount: on that receive a failing shard goes to the DLQ
    /// with its error instead of back to the queue.
    pub max_receives: u32,
    /// The Step Functions state machine that converts a shard split into data ranges;
    /// without one every shard goes to the queue, whatever its size.
    pub split_state_machine_arn: Option<String>,
    /// A shard whose estimated bytes exceed this is split (when there is a state machine),
    /// into ranges of at most this much; 0 splits every shard into `max_ranges`.
    pub split_above_bytes: u64,
    /// The most data ranges one split has.
    pub max_ranges: u32,
    /// A plan whose only shard is estimated at no more than this (and is not split) is
    /// converted by the planner itself, in the same invocation, instead of queued: one
    /// invocation and one table read instead of two. 0: every shard is queued.
    pub convert_in_planner_bytes: u64,
}

pub const ENV_CATALOG: &str = "EQDV_CATALOG";
pub const ENV_WAREHOUSE: &str = "EQDV_WAREHOUSE";
pub const ENV_GLUE_CATALOG_ID: &str = "EQDV_GLUE_CATALOG_ID";
pub const ENV_REGION: &str = "EQDV_REGION";
pub const ENV_GLUE_ENDPOINT: &str = "EQDV_GLUE_ENDPOINT";
pub const ENV_S3_ENDPOINT: &str = "EQDV_S3_ENDPOINT";
pub const ENV_GLUE_SKIP_ARCHIVE: &str = "EQDV_GLUE_SKIP_ARCHIVE";
pub const ENV_REST_URI: &str = "EQDV_REST_URI";
/// `CLIENT_ID:CLIENT_SECRET` for OAuth2 client credentials.
pub const ENV_REST_CREDENTIAL: &str = "EQDV_REST_CREDENTIAL";
pub const ENV_REST_TOKEN: &str = "EQDV_REST_TOKEN";
pub const ENV_REST_OAUTH2_SERVER_URI: &str = "EQDV_REST_OAUTH2_SERVER_URI";
pub const ENV_REST_SCOPE: &str = "EQDV_REST_SCOPE";
pub const ENV_REST_VENDED_CREDENTIALS: &str = "EQDV_REST_VENDED_CREDENTIALS";
/// A Secrets Manager secret holding the REST catalog's OAuth2 client credentials
/// (`CLIENT_ID:CLIENT_SECRET`, or JSON with `client_id` and `client_secret`).
pub const ENV_REST_CREDENTIAL_SECRET_ARN: &str = "EQDV_REST_CREDENTIAL_SECRET_ARN";
/// The AWS service a REST catalog's requests are signed for with SigV4 (`glue`,
/// `s3tables`).
pub const ENV_REST_SIGV4: &str = "EQDV_REST_SIGV4";
/// The table bucket of `EQDV_CATALOG=s3tables`.
pub const ENV_S3TABLES_BUCKET_ARN: &str = "EQDV_S3TABLES_BUCKET_ARN";
pub const ENV_S3TABLES_ENDPOINT: &str = "EQDV_S3TABLES_ENDPOINT";
/// The variables that each name a way to authenticate to a REST catalog: at most one
/// may be set.
pub const REST_AUTH_VARS: [&str; 4] = [
    ENV_REST_TOKEN,
    ENV_REST_CREDENTIAL,
    ENV_REST_CREDENTIAL_SECRET_ARN,
    ENV_REST_SIGV4,
];
pub const ENV_ALLOWED_DATABASES: &str = "EQDV_ALLOWED_DATABASES";
pub const ENV_ALLOWED_TABLES: &str = "EQDV_ALLOWED_TABLES";
pub const ENV_BRANCH: &str = "EQDV_BRANCH";
pub const ENV_METRICS_NAMESPACE: &str = "EQDV_METRICS_NAMESPACE";
pub const ENV_SHARD_QUEUE_URL: &str = "EQDV_SHARD_QUEUE_URL";
pub const ENV_SHARD_TARGET_MB: &str = "EQDV_SHARD_TARGET_MB";
pub const ENV_QUEUE_GROUPS: &str = "EQDV_QUEUE_GROUPS";
pub const ENV_KEY_MEMORY_MB: &str = "EQDV_KEY_MEMORY_MB";
pub const ENV_PARALLELISM: &str = "EQDV_PARALLELISM";
pub const ENV_READ_MEMORY_MB: &str = "EQDV_READ_MEMORY_MB";
pub const ENV_FOOTER_CACHE_MB: &str = "EQDV_FOOTER_CACHE_MB";
/// The key index's mode for every table the functions convert: `auto` (the default:
/// where it pays), `true` or `false` (a table's `eqdv.key-index.enabled` property
/// overrides it).
pub const ENV_KEY_INDEX: &str = "EQDV_KEY_INDEX";
pub const ENV_COMMIT_RETRIES: &str = "EQDV_COMMIT_RETRIES";
pub const ENV_DEADLINE_MARGIN_SECONDS: &str = "EQDV_DEADLINE_MARGIN_SECONDS";
pub const ENV_DEAD_LETTER_QUEUE_URL: &str = "EQDV_DEAD_LETTER_QUEUE_URL";
pub const ENV_MAX_RECEIVES: &str = "EQDV_MAX_RECEIVES";
pub const ENV_SPLIT_STATE_MACHINE_ARN: &str = "EQDV_SPLIT_STATE_MACHINE_ARN";
pub const ENV_SPLIT_ABOVE_MB: &str = "EQDV_SPLIT_ABOVE_MB";
pub const ENV_MAX_RANGES: &str = "EQDV_MAX_RANGES";
pub const ENV_CONVERT_IN_PLANNER_MAX_MB: &str = "EQDV_CONVERT_IN_PLANNER_MAX_MB";

/// Lambda's variable for the function's memory (MB).
const ENV_LAMBDA_MEMORY_MB: &str = "AWS_LAMBDA_FUNCTION_MEMORY_SIZE";

/// Data file footers a function instance keeps across its invocations: a streaming
/// table's hot files, converted commit after commit by a warm instance. By default a
/// sixteenth of the function's memory (128 MB at 2,048 MB), or this outside Lambda.
pub const DEFAULT_FOOTER_CACHE_MB: u64 = 128;
/// Defaults that are not the engine's own.
pub const DEFAULT_DEADLINE_MARGIN: Duration = Duration::from_secs(30);
pub const DEFAULT_MAX_RECEIVES: u32 = 5;
/// A shard is split above 1 GiB of estimated work: about what a 2,048 MB converter
/// resolves in a few minutes through S3, well inside Lambda's 15.
pub const DEFAULT_SPLIT_ABOVE_MB: u64 = 1024;
pub const DEFAULT_MAX_RANGES: u32 = 32;

/// How a conversion resolves keys, from the variables the functions and `eqdv convert`
/// read alike (the CLI's flags over the environment): one parser, one set of defaults,
/// the engine's. The one default that differs is the queue groups', given by the caller.
#[derive(Clone, Debug)]
pub struct ResolveTuning {
    /// Queue groups of a table without the `eqdv.queue-groups` property
    /// (`EQDV_QUEUE_GROUPS`); a partitioned table's key index is kept in a part per group.
    pub queue_groups: u64,
    pub resolve: ResolveOptions,
}

impl ResolveTuning {
    /// Reads `EQDV_QUEUE_GROUPS` (else `default_queue_groups`), `EQDV_KEY_MEMORY_MB`,
    /// `EQDV_READ_MEMORY_MB`, `EQDV_PARALLELISM` (0 is the default) and `EQDV_KEY_INDEX`
    /// through `lookup`; empty values count as unset.
    pub fn from_lookup(
        lookup: impl Fn(&str) -> Option<String>,
        default_queue_groups: u64,
    ) -> Result<Self> {
        let number = |name: &str| number_of(&lookup, name);
        let queue_groups = match number(ENV_QUEUE_GROUPS)? {
            None => default_queue_groups,
            Some(groups) if (1..=QUEUE_GROUPS).contains(&groups) => groups,
            Some(groups) => {
                return Err(bad(
                    ENV_QUEUE_GROUPS,
                    format!("must be from 1 to {QUEUE_GROUPS}, got {groups}"),
                ));
            }
        };
        let mut resolve = ResolveOptions::default();
        // A partitioned table's key index is kept in a part per queue group, so that a
        // shard (one group) opens and updates one part.
        resolve.key_index.default_parts = queue_groups;
        if let Some(mb) = number(ENV_KEY_MEMORY_MB)? {
            if mb == 0 {
                return Err(bad(ENV_KEY_MEMORY_MB, "must be at least 1"));
            }
            resolve.key_memory_budget = mb.saturating_mul(1 << 20);
        }
        if let Some(mb) = number(ENV_READ_MEMORY_MB)? {
            if mb == 0 {
                return Err(bad(ENV_READ_MEMORY_MB, "must be at least 1"));
            }
            resolve.read_memory_budget = mb.saturating_mul(1 << 20);
        }
        match number(ENV_PARALLELISM)? {
            None | Some(0) => {}
            Some(n) => resolve.parallelism = usize::try_from(n).unwrap_or(usize::MAX),
        }
        if let Some(v) = value_of(&lookup, ENV_KEY_INDEX) {
            resolve.key_index.mode = v.parse().map_err(|e: String| bad(ENV_KEY_INDEX, e))?;
        }
        Ok(Self {
            queue_groups,
            resolve,
        })
    }
}

/// A variable's value, trimmed; empty counts as unset.
fn value_of(lookup: &impl Fn(&str) -> Option<String>, name: &str) -> Option<String> {
    lookup(name)
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

/// A variable's whole number, or an error naming it.
fn number_of(lookup: &impl Fn(&str) -> Option<String>, name: &str) -> Result<Option<u64>> {
    value_of(lookup, name)
        .map(|v| {
            v.parse::<u64>()
                .map_err(|_| bad(name, format!("expected a whole number, got {v:?}")))
        })
        .transpose()
}

impl FunctionConfig {
    /// Reads the process environment.
    pub fn from_env() -> Result<Self> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads variables through `lookup`; empty values count as unset.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let get = |name: &str| value_of(&lookup, name);
        let number = |name: &str| number_of(&lookup, name);

        let catalog = CatalogConfig::from_lookup(&lookup)?;

        let databases = list(get(ENV_ALLOWED_DATABASES));
        let tables = list(get(ENV_ALLOWED_TABLES))
            .iter()
            .map(|t| {
                TableName::parse(t).map_err(|e| bad(ENV_ALLOWED_TABLES, format!("{t:?}: {e}")))
            })
            .collect::<Result<Vec<_>>>()?;

        let mut plan = PlanOptions::default();
        if let Some(mb) = number(ENV_SHARD_TARGET_MB)? {
            if mb == 0 {
                return Err(bad(ENV_SHARD_TARGET_MB, "must be at least 1"));
            }
            plan.target_shard_bytes = mb.saturating_mul(1 << 20);
        }
        let ResolveTuning {
            queue_groups,
            mut resolve,
        } = ResolveTuning::from_lookup(&lookup, QUEUE_GROUPS)?;
        plan.default_queue_groups = queue_groups;
        // One cache per process (the config is cloned into every conversion): 0 is off.
        let footer_cache_mb = match number(ENV_FOOTER_CACHE_MB)? {
            Some(mb) => mb,
            None => number(ENV_LAMBDA_MEMORY_MB)?.map_or(DEFAULT_FOOTER_CACHE_MB, |mb| mb / 16),
        };
        resolve.footer_cache = eqdv::parquet_io::FooterCache::with_capacity(
            usize::try_from(footer_cache_mb.saturating_mul(1 << 20)).unwrap_or(usize::MAX),
        );

        let max_receives = match number(ENV_MAX_RECEIVES)? {
            None => DEFAULT_MAX_RECEIVES,
            Some(0) => return Err(bad(ENV_MAX_RECEIVES, "must be at least 1")),
            Some(n) => u32::try_from(n).map_err(|_| bad(ENV_MAX_RECEIVES, "too large"))?,
        };

        let split_above_bytes = number(ENV_SPLIT_ABOVE_MB)?
            .unwrap_or(DEFAULT_SPLIT_ABOVE_MB)
            .saturating_mul(1 << 20);
        let max_ranges = match number(ENV_MAX_RANGES)? {
            None => DEFAULT_MAX_RANGES,
            Some(n) if (2..=u64::from(MAX_RANGES)).contains(&n) => n as u32,
            Some(n) => {
                return Err(bad(
                    ENV_MAX_RANGES,
                    format!("must be from 2 to {MAX_RANGES}, got {n}"),
                ));
            }
        };

        // A table that fits one shard by its summary is planned from its delete
        // manifests alone, unless that shard could be split: then its data decides.
        let split_state_machine_arn = get(ENV_SPLIT_STATE_MACHINE_ARN);
        plan.small_table_bytes = match (&split_state_machine_arn, split_above_bytes) {
            (Some(_), share) if share > 0 => share,
            _ => u64::MAX,
        };

        Ok(Self {
            catalog,
            allowlist: Allowlist { databases, tables },
            branch: get(ENV_BRANCH).unwrap_or_else(|| "main".into()),
            metrics_namespace: get(ENV_METRICS_NAMESPACE).unwrap_or_else(|| "eqdv".into()),
            emit_metrics: true,
            shard_queue_url: get(ENV_SHARD_QUEUE_URL),
            plan,
            resolve,
            commit_retries: number(ENV_COMMIT_RETRIES)?
                .map(|n| u32::try_from(n).map_err(|_| bad(ENV_COMMIT_RETRIES, "too large")))
                .transpose()?,
            deadline_margin: number(ENV_DEADLINE_MARGIN_SECONDS)?
                .map_or(DEFAULT_DEADLINE_MARGIN, Duration::from_secs),
            dead_letter_queue_url: get(ENV_DEAD_LETTER_QUEUE_URL),
            max_receives,
            split_state_machine_arn,
            split_above_bytes,
            max_ranges,
            convert_in_planner_bytes: number(ENV_CONVERT_IN_PLANNER_MAX_MB)?
                .unwrap_or(0)
                .saturating_mul(1 << 20),
        })
    }

    /// The data ranges the planner splits a shard of `estimated_bytes` into: none (0)
    /// without a state machine to run them, else [`FunctionConfig::split_ranges`].
    pub fn ranges_for(&self, estimated_bytes: u64) -> u32 {
        if self.split_state_machine_arn.is_none() {
            return 0;
        }
        self.split_ranges(estimated_bytes)
    }

    /// The data ranges a shard of `estimated_bytes` is split into wherever it runs: none
    /// (0) when it is no more than one converter's share, else enough that each holds at
    /// most that share, at least 2 and at most `max_ranges`. A share of 0 splits every
    /// shard into `max_ranges`.
    pub fn split_ranges(&self, estimated_bytes: u64) -> u32 {
        if estimated_bytes == 0 || estimated_bytes <= self.split_above_bytes {
            return 0;
        }
        let wanted = match self.split_above_bytes {
            0 => u64::from(self.max_ranges),
            share => estimated_bytes.div_ceil(share),
        };
        wanted.clamp(2, u64::from(self.max_ranges)) as u32
    }

    pub fn planner(&self) -> PlannerConfig {
        PlannerConfig {
            allowlist: self.allowlist.clone(),
            branch: self.branch.clone(),
            plan: self.plan.clone(),
            keep_single_shard_table: self.convert_in_planner_bytes > 0,
            kept_reads: Default::default(),
        }
    }

    /// The instant the engine starts no new phase after, for an invocation that ends at
    /// `deadline` (Lambda's hard stop): `deadline_margin` before it, or now.
    pub fn engine_deadline(&self, deadline: Option<Instant>) -> Option<Instant> {
        deadline.map(|d| {
            d.checked_sub(self.deadline_margin)
                .unwrap_or_else(Instant::now)
        })
    }

    /// Whether the planner converts a plan's only shard, of `estimated_bytes`, itself
    /// (see [`FunctionConfig::convert_in_planner_bytes`]); a shard it splits never is.
    pub fn converts_in_planner(&self, estimated_bytes: u64) -> bool {
        self.convert_in_planner_bytes > 0
            && estimated_bytes <= self.convert_in_planner_bytes
            && self.ranges_for(estimated_bytes) < 2
    }
}

fn bad(var: &str, message: impl Into<String>) -> FunctionError {
    FunctionError::Config {
        var: var.to_string(),
        message: message.into(),
    }
}

fn parse_bool(var: &str, value: &str) -> Result<bool> {
    match value.to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" => Ok(true),
        "false" | "0" | "no" => Ok(false),
        _ => Err(bad(var, format!("expected true or false, got {value:?}"))),
    }
}

fn list(value: Option<String>) -> Vec<String> {
    value
        .map(|v| {
            v.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(vars: &[(&str, &str)]) -> Result<FunctionConfig> {
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        FunctionConfig::from_lookup(|name| vars.get(name).cloned())
    }

    /// The footer cache: a sixteenth of the function's memory on Lambda, 128 MB outside
    /// it, what EQDV_FOOTER_CACHE_MB says when set (0: off).
    #[test]
    fn the_footer_cache_follows_the_function_memory() {
        let mb =
            |vars: &[(&str, &str)]| config(vars).unwrap().resolve.footer_cache.capacity() >> 20;
        assert_eq!(mb(&[]), 128);
        assert_eq!(mb(&[("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "1024")]), 64);
        assert_eq!(mb(&[("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "10240")]), 640);
        let set = [
            ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "1024"),
            (ENV_FOOTER_CACHE_MB, "200"),
        ];
        assert_eq!(mb(&set), 200);
        assert_eq!(mb(&[(ENV_FOOTER_CACHE_MB, "0")]), 0);
    }

    /// The key index: where it pays unless EQDV_KEY_INDEX says otherwise; a value that is
    /// not a mode is refused, naming the variable.
    #[test]
    fn the_key_index_is_auto_unless_set() {
        use eqdv::key_index::KeyIndexMode;
        let mode = |vars: &[(&str, &str)]| config(vars).unwrap().resolve.key_index.mode;
        assert_eq!(mode(&[]), KeyIndexMode::Auto);
        assert_eq!(mode(&[(ENV_KEY_INDEX, "true")]), KeyIndexMode::On);
        assert_eq!(mode(&[(ENV_KEY_INDEX, "0")]), KeyIndexMode::Off);
        assert_eq!(mode(&[(ENV_KEY_INDEX, "auto")]), KeyIndexMode::Auto);
        let error = config(&[(ENV_KEY_INDEX, "sometimes")])
            .unwrap_err()
            .to_string();
        assert!(error.contains(ENV_KEY_INDEX), "{error}");
    }

    #[test]
    fn defaults_are_glue_and_the_engine_defaults() {
        let c = config(&[]).unwrap();
        assert!(matches!(c.catalog, CatalogConfig::Glue(_)));
        assert_eq!(c.branch, "main");
        assert_eq!(c.max_receives, DEFAULT_MAX_RECEIVES);
        assert_eq!(c.deadline_margin, DEFAULT_DEADLINE_MARGIN);
        assert!(c.allowlist.databases.is_empty() && c.allowlist.tables.is_empty());
        assert_eq!(
            c.plan.target_shard_bytes,
            PlanOptions::default().target_shard_bytes
        );
        assert_eq!(c.plan.default_queue_groups, QUEUE_GROUPS);
    }

    #[test]
    fn every_variable_is_read() {
        let c = config(&[
            (ENV_GLUE_CATALOG_ID, "123456789012"),
            (ENV_REGION, "eu-west-1"),
            (ENV_ALLOWED_DATABASES, "cdc, sales ,"),
            (ENV_ALLOWED_TABLES, "other.orders"),
            (ENV_BRANCH, "audit"),
            (ENV_SHARD_QUEUE_URL, "https://sqs/q.fifo"),
            (ENV_SHARD_TARGET_MB, "64"),
            (ENV_QUEUE_GROUPS, "1"),
            (ENV_KEY_MEMORY_MB, "256"),
            (ENV_PARALLELISM, "3"),
            (ENV_READ_MEMORY_MB, "96"),
            (ENV_FOOTER_CACHE_MB, "0"),
            (ENV_COMMIT_RETRIES, "9"),
            (ENV_DEADLINE_MARGIN_SECONDS, "45"),
            (ENV_DEAD_LETTER_QUEUE_URL, "https://sqs/dlq.fifo"),
            (ENV_MAX_RECEIVES, "3"),
            (ENV_METRICS_NAMESPACE, "lake/eqdv"),
        ])
        .unwrap();
        let CatalogConfig::Glue(glue) = &c.catalog else {
            panic!("expected glue")
        };
        assert_eq!(glue.catalog_id.as_deref(), Some("123456789012"));
        assert_eq!(glue.region.as_deref(), Some("eu-west-1"));
        assert_eq!(c.allowlist.databases, vec!["cdc", "sales"]);
        assert_eq!(c.allowlist.tables, vec![TableName::new("other", "orders")]);
        assert_eq!(c.branch, "audit");
        assert_eq!(c.shard_queue_url.as_deref(), Some("https://sqs/q.fifo"));
        assert_eq!(c.plan.target_shard_bytes, 64 << 20);
        assert_eq!(c.plan.default_queue_groups, 1);
        assert_eq!(c.resolve.key_index.default_parts, 1);
        assert_eq!(c.resolve.key_memory_budget, 256 << 20);
        assert_eq!(c.resolve.parallelism, 3);
        assert_eq!(c.resolve.read_memory_budget, 96 << 20);
        assert!(
            !c.resolve.footer_cache.is_on(),
            "0 turns the footer cache off"
        );
        assert_eq!(c.commit_retries, Some(9));
        assert_eq!(c.deadline_margin, Duration::from_secs(45));
        assert_eq!(
            c.dead_letter_queue_url.as_deref(),
            Some("https://sqs/dlq.fifo")
        );
        assert_eq!(c.max_receives, 3);
        assert_eq!(c.metrics_namespace, "lake/eqdv");
    }

    /// The deployment stacks (template.yaml, infra/) set the variables listed in
    /// tests/infra/contract.json, which their own tests check: each must be one this
    /// crate reads, and each it reads must be set by the stacks or be local-only.
    #[test]
    fn the_stacks_set_the_variables_read_here() {
        let contract: serde_json::Value =
            serde_json::from_str(include_str!("../../../tests/infra/contract.json")).unwrap();
        let mut deployed: Vec<String> = Vec::new();
        for group in ["common", "planner", "converter"] {
            for var in contract["env"][group].as_array().unwrap() {
                deployed.push(var.as_str().unwrap().to_string());
            }
        }
        let read = [
            ENV_CATALOG,
            ENV_GLUE_CATALOG_ID,
            ENV_S3TABLES_BUCKET_ARN,
            ENV_REST_URI,
            ENV_WAREHOUSE,
            ENV_REST_CREDENTIAL_SECRET_ARN,
            ENV_REST_SCOPE,
            ENV_REST_OAUTH2_SERVER_URI,
            ENV_ALLOWED_DATABASES,
            ENV_ALLOWED_TABLES,
            ENV_BRANCH,
            ENV_METRICS_NAMESPACE,
            ENV_SHARD_QUEUE_URL,
            ENV_SHARD_TARGET_MB,
            ENV_QUEUE_GROUPS,
            ENV_KEY_MEMORY_MB,
            ENV_KEY_INDEX,
            ENV_PARALLELISM,
            ENV_READ_MEMORY_MB,
            ENV_COMMIT_RETRIES,
            ENV_DEADLINE_MARGIN_SECONDS,
            ENV_DEAD_LETTER_QUEUE_URL,
            ENV_MAX_RECEIVES,
            ENV_SPLIT_STATE_MACHINE_ARN,
            ENV_SPLIT_ABOVE_MB,
            ENV_MAX_RANGES,
            ENV_CONVERT_IN_PLANNER_MAX_MB,
        ];
        // Only for local runs and tests: endpoints, the region (Lambda sets AWS_REGION),
        // Glue's SkipArchive (default true), and a REST catalog's credential or token in
        // plain text (the stacks pass the ARN of a Secrets Manager secret instead).
        let local_only = [
            ENV_REST_CREDENTIAL,
            ENV_REST_TOKEN,
            ENV_REGION,
            ENV_GLUE_ENDPOINT,
            ENV_S3_ENDPOINT,
            ENV_S3TABLES_ENDPOINT,
            ENV_GLUE_SKIP_ARCHIVE,
        ];
        for var in &deployed {
            assert!(
                var == "RUST_LOG" || read.contains(&var.as_str()),
                "the stacks set {var}, which the functions do not read"
            );
        }
        for var in read {
            assert!(
                deployed.iter().any(|d| d == var) && !local_only.contains(&var),
                "the functions read {var}, which the stacks do not set"
            );
        }
    }

    /// A shard is split only with a state machine and above the threshold, into ranges
    /// of at most the threshold, within 2 and the maximum; a threshold of 0 splits every
    /// shard into the maximum.
    #[test]
    fn shards_over_the_threshold_split_into_ranges_of_at_most_the_threshold() {
        let mb = 1u64 << 20;
        let machine = (
            ENV_SPLIT_STATE_MACHINE_ARN,
            "arn:aws:states:us-east-1:1:stateMachine:s",
        );
        let no_machine = config(&[(ENV_SPLIT_ABOVE_MB, "100")]).unwrap();
        assert_eq!(
            no_machine.ranges_for(10_000 * mb),
            0,
            "nothing runs a split"
        );
        assert_eq!(
            no_machine.split_ranges(10_000 * mb),
            32,
            "in-process, it splits"
        );
        let c = config(&[machine, (ENV_SPLIT_ABOVE_MB, "100"), (ENV_MAX_RANGES, "8")]).unwrap();
        assert_eq!(c.ranges_for(100 * mb), 0, "at the threshold: one converter");
        assert_eq!(c.ranges_for(100 * mb + 1), 2, "just over it: 2 ranges");
        assert_eq!(c.ranges_for(500 * mb), 5, "100 MB each");
        assert_eq!(c.ranges_for(501 * mb), 6);
        assert_eq!(c.ranges_for(100_000 * mb), 8, "at most EQDV_MAX_RANGES");
        let always = config(&[machine, (ENV_SPLIT_ABOVE_MB, "0"), (ENV_MAX_RANGES, "4")]).unwrap();
        assert_eq!(
            always.ranges_for(1),
            4,
            "0 splits every shard into the maximum"
        );
        assert_eq!(always.ranges_for(0), 0, "an empty shard is not split");
        let defaults = config(&[machine]).unwrap();
        assert_eq!(defaults.split_above_bytes, DEFAULT_SPLIT_ABOVE_MB * mb);
        assert_eq!(defaults.max_ranges, DEFAULT_MAX_RANGES);

        // A table is planned from its delete manifests alone only where its size by
        // its summary could not split its shard: at most the threshold, when a split
        // can run and the threshold is not 0 (which splits any shard, whatever its size).
        assert_eq!(c.plan.small_table_bytes, 100 * mb);
        assert_eq!(no_machine.plan.small_table_bytes, u64::MAX);
        assert_eq!(always.plan.small_table_bytes, u64::MAX);
        assert_eq!(defaults.plan.small_table_bytes, DEFAULT_SPLIT_ABOVE_MB * mb);
    }

    /// The planner converts a plan's only shard up to the bound, unless it would split
    /// it; without the variable (or at 0) it converts none and keeps no table.
    #[test]
    fn the_planner_converts_shards_up_to_its_bound_that_it_would_not_split() {
        let mb = 1u64 << 20;
        let off = config(&[]).unwrap();
        assert!(!off.converts_in_planner(1));
        assert!(!off.planner().keep_single_shard_table);
        let zero = config(&[(ENV_CONVERT_IN_PLANNER_MAX_MB, "0")]).unwrap();
        assert!(!zero.converts_in_planner(1));
        let on = config(&[(ENV_CONVERT_IN_PLANNER_MAX_MB, "256")]).unwrap();
        assert!(on.planner().keep_single_shard_table);
        assert!(on.converts_in_planner(0));
        assert!(on.converts_in_planner(256 * mb));
        assert!(!on.converts_in_planner(256 * mb + 1));
        let splitting = config(&[
            (ENV_CONVERT_IN_PLANNER_MAX_MB, "256"),
            (
                ENV_SPLIT_STATE_MACHINE_ARN,
                "arn:aws:states:us-east-1:1:stateMachine:s",
            ),
            (ENV_SPLIT_ABOVE_MB, "100"),
        ])
        .unwrap();
        assert!(splitting.converts_in_planner(100 * mb));
        assert!(
            !splitting.converts_in_planner(100 * mb + 1),
            "a shard it splits runs on the state machine"
        );
    }

    #[test]
    fn bad_values_name_the_variable() {
        for (var, value) in [
            (ENV_CATALOG, "hive"),
            (ENV_SHARD_TARGET_MB, "lots"),
            (ENV_QUEUE_GROUPS, "0"),
            (ENV_QUEUE_GROUPS, "17"),
            (ENV_KEY_MEMORY_MB, "0"),
            (ENV_READ_MEMORY_MB, "0"),
            (ENV_ALLOWED_TABLES, "no_namespace"),
            (ENV_GLUE_SKIP_ARCHIVE, "maybe"),
            (ENV_MAX_RECEIVES, "-1"),
            (ENV_SPLIT_ABOVE_MB, "-1"),
            (ENV_MAX_RANGES, "1"),
            (ENV_MAX_RANGES, "1025"),
            (ENV_CONVERT_IN_PLANNER_MAX_MB, "some"),
        ] {
            let err = config(&[(var, value)]).unwrap_err().to_string();
            assert!(err.contains(var), "{var}={value}: {err}");
        }
        let err = config(&[(ENV_CATALOG, "sqlite")]).unwrap_err().to_string();
        assert!(err.contains(ENV_WAREHOUSE), "{err}");
        let err = config(&[(ENV_CATALOG, "s3tables")])
            .unwrap_err()
            .to_string();
        assert!(err.contains(ENV_S3TABLES_BUCKET_ARN), "{err}");
        let err = config(&[
            (ENV_CATALOG, "rest"),
            (ENV_REST_URI, "https://glue.eu-west-1.amazonaws.com/iceberg"),
            (ENV_REST_SIGV4, "glue"),
            (ENV_REST_TOKEN, "t"),
        ])
        .unwrap_err()
        .to_string();
        assert!(err.contains(ENV_REST_SIGV4), "{err}");
        let err = config(&[
            (ENV_CATALOG, "rest"),
            (ENV_REST_URI, "https://catalog.example.com"),
            (ENV_REST_CREDENTIAL, "id:secret"),
            (
                ENV_REST_CREDENTIAL_SECRET_ARN,
                "arn:aws:secretsmanager:eu-west-1:123456789012:secret:eqdv-AbCdEf",
            ),
        ])
        .unwrap_err()
        .to_string();
        assert!(
            err.contains(ENV_REST_CREDENTIAL) && err.contains(ENV_REST_CREDENTIAL_SECRET_ARN),
            "{err}"
        );
    }
}
