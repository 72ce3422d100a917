//! The Iceberg REST catalog protocol (Apache Polaris, Nessie, Lakekeeper, Unity
//! Catalog, Gravitino, Iceberg Java's own REST server, ...), with table files on S3 or
//! a local disk.
//!
//! A REST catalog keeps the pointer itself and writes the new metadata file: a commit
//! sends the updates eqdv's metadata builder recorded (`add-snapshot`,
//! `set-snapshot-ref`, `set-properties`) with requirements that make the server refuse
//! them when the table moved ([`changes`]). 409 is a conflict; a 5xx, a timeout or an
//! answer lost on the way is an unknown outcome, read back by `commit::publish` before
//! anything is deleted.
//!
//! eqdv speaks the protocol itself rather than through iceberg-rust's REST client
//! (iceberg-catalog-rest 0.10): that client reads vended credentials into a FileIO of
//! its own but does not ask for them (`X-Iceberg-Access-Delegation`), folds a lost
//! answer and a refused request into one error, and has no hook for request signing.
//! iceberg-rust still serves where it fits: the metadata builder's recorded changes are
//! the commit's updates, and its `TableUpdate`/`TableRequirement` types are the wire
//! form.

mod answers;
mod changes;
mod http;
mod sigv4;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use iceberg::TableUpdate;
use iceberg::io::FileIO;
use iceberg::spec::TableMetadata;
use reqwest::{Method, StatusCode};
use serde::de::DeserializeOwned;
use serde_json::json;

pub use http::RestAuth;
use http::{Client, Failure, Request};

use answers::{
    CommitAnswer, ConfigAnswer, LoadTableAnswer, NamespacesPage, TablesPage, is_storage_setting,
};

use super::storage::{KeysOnly, S3Settings, build_file_io, env, table_file_io};
use super::{Catalog, TableName, TablePointer, already_exists, not_found};
use crate::{Error, Result};

/// How to reach a REST catalog and the storage of its tables.
#[derive(Clone, Default)]
pub struct RestConfig {
    /// The catalog's base URI (the one before `/v1/...`).
    pub uri: String,
    /// The warehouse to ask the catalog's configuration for (`GET v1/config?warehouse=`).
    pub warehouse: Option<String>,
    pub auth: RestAuth,
    /// Ask for credentials scoped to each table's files (`X-Iceberg-Access-Delegation:
    /// vended-credentials`) and use them when the catalog sends some. On by default.
    pub vended_credentials: Option<bool>,
    /// Per-request timeout (default 60 s).
    pub timeout: Option<Duration>,
    pub region: Option<String>,
    pub s3_endpoint: Option<String>,
    /// Path-style S3 addressing; defaults to true when an S3 endpoint is set (MinIO).
    pub s3_path_style: Option<bool>,
    /// Extra FileIO properties (`s3.*`); the catalog's and the table's own win.
    pub file_io_properties: HashMap<String, String>,
}

impl std::fmt::Debug for RestConfig {
    // The properties' values are left out: they may hold S3 secrets.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RestConfig")
            .field("uri", &self.uri)
            .field("warehouse", &self.warehouse)
            .field("auth", &self.auth)
            .field("vended_credentials", &self.vended_credentials)
            .field("timeout", &self.timeout)
            .field("region", &self.region)
            .field("s3_endpoint", &self.s3_endpoint)
            .field("s3_path_style", &self.s3_path_style)
            .field("file_io_properties", &KeysOnly(&self.file_io_properties))
            .finish()
    }
}

/// An Iceberg REST catalog client with the storage its tables live on.
#[derive(Clone)]
pub struct RestCatalog {
    client: Arc<Client>,
    /// `<uri>/v1/<prefix>/`, where table paths start.
    root: String,
    /// How a multi-part namespace is joined in a path (the catalog may override the
    /// protocol's `%1F`).
    separator: String,
    warehouse: Option<String>,
    vended_credentials: bool,
    io_properties: Arc<HashMap<String, String>>,
    file_io: FileIO,
    /// The storage configuration each table was last loaded with (vended credentials
    /// and the table's `config`), for its FileIO.
    table_storage: Arc<Mutex<HashMap<TableName, HashMap<String, String>>>>,
}

impl std::fmt::Debug for RestCatalog {
    // Deliberately omits the properties and the authentication: they hold secrets.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RestCatalog")
            .field("name", &self.client.catalog)
            .field("root", &self.root)
            .field("warehouse", &self.warehouse)
            .finish()
    }
}

impl RestCatalog {
    /// Connects: authenticates and reads the catalog's configuration (its prefix, its
    /// namespace separator, its storage defaults).
    pub async fn connect(config: RestConfig) -> Result<Self> {
        let uri = config.uri.trim_end_matches('/').to_string();
        let name = format!("rest {uri}");
        if !(uri.starts_with("http://") || uri.starts_with("https://")) {
            return Err(Error::InvalidInput(format!(
                "REST catalog URI '{uri}' must start with http:// or https://"
            )));
        }
        let timeout = config.timeout.unwrap_or(Duration::from_secs(60));
        let client = Client::new(name, &uri, config.auth.clone(), timeout).await?;
        let mut url = format!("{uri}/v1/config");
        if let Some(w) = &config.warehouse {
            url.push_str("?warehouse=");
            url.push_str(&encode(w));
        }
        let answer: ConfigAnswer = client
            .read_json(&Request {
                method: Method::GET,
                url,
                body: None,
                headers: &[],
                what: "GetConfig".into(),
            })
            .await?;
        // The protocol's order: the catalog's defaults, then the client's, then its
        // overrides.
        let mut merged = answer.defaults;
        merged.extend(
            config
                .warehouse
                .iter()
                .map(|w| ("warehouse".to_string(), w.clone())),
        );
        merged.extend(answer.overrides);
        let prefix = merged.get("prefix").filter(|p| !p.is_empty());
        let root = match prefix {
            Some(p) => format!("{uri}/v1/{}/", p.trim_matches('/')),
            None => format!("{uri}/v1/"),
        };
        let separator = merged
            .get("namespace-separator")
            .cloned()
            .unwrap_or_else(|| "%1F".into());

        let mut props = S3Settings {
            region: config.region.clone().or_else(|| env("AWS_REGION")),
            endpoint: config.s3_endpoint.clone(),
            path_style: config.s3_path_style,
            extra: config.file_io_properties.clone(),
        }
        .properties();
        // The catalog's storage settings (an S3 endpoint, a region) win over the
        // environment's.
        props.extend(
            merged
                .iter()
                .filter(|(k, _)| is_storage_setting(k))
                .map(|(k, v)| (k.clone(), v.clone())),
        );
        let file_io = build_file_io(&props);
        Ok(Self {
            client: Arc::new(client),
            root,
            separator,
            warehouse: merged.get("warehouse").cloned(),
            vended_credentials: config.vended_credentials.unwrap_or(true),
            io_properties: Arc::new(props),
            file_io,
            table_storage: Arc::default(),
        })
    }

    fn namespace_path(&self, namespace: &str) -> String {
        namespace
            .split('.')
            .map(encode)
            .collect::<Vec<_>>()
            .join(&self.separator)
    }

    fn table_url(&self, table: &TableName) -> String {
        format!(
            "{}namespaces/{}/tables/{}",
            self.root,
            self.namespace_path(&table.namespace),
            encode(&table.name)
        )
    }

    fn identifier(table: &TableName) -> serde_json::Value {
        json!({
            "namespace": table.namespace.split('.').collect::<Vec<_>>(),
            "name": table.name,
        })
    }

    /// An error of `table`'s operation `what`: a missing table is
    /// [`Error::TableNotFound`], everything else names the catalog, the table and the
    /// server's answer on one line.
    fn table_error(&self, table: &TableName, what: &str, failure: &Failure) -> Error {
        match failure {
            Failure::Status { status, .. } if *status == StatusCode::NOT_FOUND => {
                not_found(&self.client.catalog, table)
            }
            _ => self.client.error(&format!("{what} {table}"), failure),
        }
    }

    /// A commit that may have landed: the catalog and its answer, for the read-back.
    fn unknown(&self, table: &TableName, what: &str, failure: &Failure) -> Error {
        Error::CommitStateUnknown {
            table: table.to_string(),
            message: format!(
                "catalog {}: {what}: {}",
                self.client.catalog,
                failure.text()
            ),
        }
    }

    async fn load_table(&self, table: &TableName) -> Result<LoadTableAnswer> {
        let delegation = [("X-Iceberg-Access-Delegation", "vended-credentials")];
        let request = Request {
            method: Method::GET,
            url: self.table_url(table),
            body: None,
            headers: if self.vended_credentials {
                &delegation
            } else {
                &[]
            },
            what: format!("LoadTable {table}"),
        };
        let body = self
            .client
            .read(&request)
            .await
            .map_err(|f| self.table_error(table, "LoadTable", &f))?;
        self.client.decode(&request.what, &body)
    }

    async fn ensure_namespace(&self, namespace: &str) -> Result<()> {
        let body = serde_json::to_vec(&json!({
            "namespace": namespace.split('.').collect::<Vec<_>>(),
        }))?;
        let request = Request {
            method: Method::POST,
            url: format!("{}namespaces", self.root),
            body: Some(body),
            headers: &[],
            what: format!("CreateNamespace {namespace}"),
        };
        match self.client.send_once(&request).await {
            Ok(_) => Ok(()),
            Err(Failure::Status { status, .. }) if status == StatusCode::CONFLICT => Ok(()),
            Err(f) => Err(self.client.error(&request.what, &f)),
        }
    }

    /// Every namespace, nested ones included: the top level, then each namespace's
    /// children (`ListNamespaces` with `parent`), level after level.
    async fn list_namespaces(&self) -> Result<Vec<String>> {
        let mut all = Vec::new();
        let mut seen = std::collections::HashSet::new();
        let mut parents: Vec<Option<String>> = vec![None];
        while let Some(parent) = parents.pop() {
            let (url, what) = match &parent {
                None => (
                    format!("{}namespaces", self.root),
                    "ListNamespaces".to_string(),
                ),
                Some(p) => (
                    format!("{}namespaces?parent={}", self.root, self.namespace_path(p)),
                    format!("ListNamespaces {p}"),
                ),
            };
            let children = self
                .pages(&url, &what, |page: NamespacesPage| {
                    let names = page.namespaces.into_iter().map(|parts| parts.join("."));
                    (names.collect::<Vec<_>>(), page.next_page_token)
                })
                .await?;
            for child in children {
                // A server that answers a parent with itself would loop forever.
                if Some(&child) != parent.as_ref() && seen.insert(child.clone()) {
                    parents.push(Some(child.clone()));
                    all.push(child);
                }
            }
        }
        Ok(all)
    }

    /// Every item of the paged listing at `url`, page after page (the protocol's
    /// `pageToken` and `next-page-token`).
    async fn pages<P: DeserializeOwned, T>(
        &self,
        url: &str,
        what: &str,
        items: impl Fn(P) -> (Vec<T>, Option<String>),
    ) -> Result<Vec<T>> {
        let mut all = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let url = match &token {
                Some(t) if url.contains('?') => format!("{url}&pageToken={}", encode(t)),
                Some(t) => format!("{url}?pageToken={}", encode(t)),
                None => url.to_string(),
            };
            let page: P = self
                .client
                .read_json(&Request {
                    method: Method::GET,
                    url,
                    body: None,
                    headers: &[],
                    what: what.to_string(),
                })
                .await?;
            let (mut found, next) = items(page);
            all.append(&mut found);
            match next.filter(|t| !t.is_empty()) {
                Some(t) => token = Some(t),
                None => return Ok(all),
            }
        }
    }
}

#[async_trait]
impl Catalog for RestCatalog {
    fn name(&self) -> &str {
        &self.client.catalog
    }

    fn file_io(&self) -> &FileIO {
        &self.file_io
    }

    fn table_file_io(
        &self,
        table: &TableName,
        table_properties: &HashMap<String, String>,
    ) -> FileIO {
        let vended = self
            .table_storage
            .lock()
            .ok()
            .and_then(|m| m.get(table).cloned())
            .unwrap_or_default();
        table_file_io(
            &self.file_io,
            &self.io_properties,
            table_properties,
            &vended,
        )
    }

    fn default_table_location(&self, table: &TableName) -> String {
        match &self.warehouse {
            Some(w) => format!(
                "{}/{}/{}",
                w.trim_end_matches('/'),
                table.namespace,
                table.name
            ),
            None => format!("s3://unset-warehouse/{}/{}", table.namespace, table.name),
        }
    }

    async fn load_pointer(&self, table: &TableName) -> Result<TablePointer> {
        let answer = self.load_table(table).await?;
        let metadata_location = answer.metadata_location.clone().ok_or_else(|| {
            Error::UnsupportedTable {
                table: table.to_string(),
                message: format!(
                    "catalog {} has no metadata location for it (a table staged in a transaction)",
                    self.client.catalog
                ),
            }
        })?;
        let storage = answer.storage_settings(&metadata_location);
        if let Ok(mut m) = self.table_storage.lock() {
            m.insert(table.clone(), storage);
        }
        Ok(TablePointer {
            metadata_location,
            version: None,
        })
    }

    async fn swap_pointer(
        &self,
        table: &TableName,
        _expected: &TablePointer,
        _new_metadata_location: &str,
    ) -> Result<()> {
        Err(Error::InvalidInput(format!(
            "catalog {}: a REST catalog takes a commit's changes, not a metadata pointer (table {table})",
            self.client.catalog
        )))
    }

    fn commits_changes(&self) -> bool {
        true
    }

    async fn commit_changes(
        &self,
        table: &TableName,
        base: &TableMetadata,
        updates: &[TableUpdate],
    ) -> Result<String> {
        let requirements = changes::requirements(&table.to_string(), base, updates)?;
        let body = serde_json::to_vec(&json!({
            "identifier": Self::identifier(table),
            "requirements": requirements,
            "updates": updates,
        }))?;
        let request = Request {
            method: Method::POST,
            url: self.table_url(table),
            body: Some(body),
            headers: &[],
            what: format!("CommitTable {table}"),
        };
        match self.client.send_once(&request).await {
            Ok(body) => {
                let answer: CommitAnswer = self.client.decode(&request.what, &body)?;
                Ok(answer.metadata_location)
            }
            Err(Failure::Status { status, text }) if status == StatusCode::CONFLICT => {
                Err(Error::CommitConflict {
                    table: table.to_string(),
                    message: format!("catalog {} refused: {text}", self.client.catalog),
                })
            }
            // Answered 5xx, or sent and not answered: it may have landed.
            Err(f @ Failure::Status { status, .. }) if status.is_server_error() => {
                Err(self.unknown(table, &request.what, &f))
            }
            Err(f @ Failure::Transport { sent: true, .. }) => {
                Err(self.unknown(table, &request.what, &f))
            }
            // Refused for what it is, never sent, or throttled before it was looked
            // at (the read-back still checks).
            Err(f) => Err(self.table_error(table, "CommitTable", &f)),
        }
    }

    async fn create_table(&self, table: &TableName, metadata_location: &str) -> Result<()> {
        self.ensure_namespace(&table.namespace).await?;
        let body = serde_json::to_vec(&json!({
            "name": table.name,
            "metadata-location": metadata_location,
        }))?;
        let request = Request {
            method: Method::POST,
            url: format!(
                "{}namespaces/{}/register",
                self.root,
                self.namespace_path(&table.namespace)
            ),
            body: Some(body),
            headers: &[],
            what: format!("RegisterTable {table}"),
        };
        match self.client.send_once(&request).await {
            Ok(_) => Ok(()),
            Err(Failure::Status { status, .. }) if status == StatusCode::CONFLICT => {
                Err(already_exists(&self.client.catalog, table))
            }
            Err(f) => Err(self.client.error(&request.what, &f)),
        }
    }

    async fn list_tables(&self, namespace: Option<&str>) -> Result<Vec<TableName>> {
        let namespaces = match namespace {
            Some(ns) => vec![ns.to_string()],
            None => self.list_namespaces().await?,
        };
        let mut tables = Vec::new();
        for ns in namespaces {
            let url = format!(
                "{}namespaces/{}/tables",
                self.root,
                self.namespace_path(&ns)
            );
            let found = self
                .pages(&url, &format!("ListTables {ns}"), |page: TablesPage| {
                    let names = page
                        .identifiers
                        .into_iter()
                        .map(|id| TableName::new(id.namespace.join("."), id.name));
                    (names.collect(), page.next_page_token)
                })
                .await?;
            tables.extend(found);
        }
        tables.sort();
        Ok(tables)
    }
}

/// Percent-encodes one path segment or query value.
fn encode(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes())
        .collect::<String>()
        .replace('+', "%20")
}
