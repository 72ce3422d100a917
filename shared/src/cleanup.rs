//! Orphan file cleanup for one table: files under the table's location that no version
//! of its metadata references.
//!
//! A commit that dies between writing its files and swapping the catalog pointer (a
//! killed process, a lost connection, an unknown commit outcome) leaves files nobody
//! references. This module finds them: it lists every object under the table location,
//! walks everything reachable from the current metadata and every metadata file in its
//! log (each snapshot's manifest list, each manifest, each entry's file, live or
//! DELETED, and statistics files), and deletes what is unreachable, older than a safety
//! age and inside `<location>/data/` or `<location>/metadata/`.
//!
//! It must never delete a file that a table version references: it deletes nothing
//! when the listing or the reachable walk fails (a partial reachable set would delete
//! live files), when the catalog pointer keeps moving during the walk, or for files
//! younger than the safety age (they may belong to a commit still in flight, whose
//! pointer swap has not happened yet). It never follows symbolic links and never
//! touches hidden files (`.name`, `_name`), `version-hint.text`, or anything outside the
//! table's data and metadata directories.

use std::collections::HashSet;
use std::path::{Component, Path, PathBuf};
use std::str::FromStr;
use std::time::{Duration, SystemTime};

use futures::{StreamExt, TryStreamExt};
use iceberg::spec::{FormatVersion, ManifestFile, ManifestList, TableMetadata};
use serde::Serialize;

use crate::catalog::{Catalog, TableName};
use crate::table::LoadedTable;
use crate::{Error, Result};

/// Files younger than this are kept by default: a commit may still be in flight.
pub const DEFAULT_MIN_AGE: Duration = Duration::from_secs(3 * 24 * 60 * 60);

/// How often the pointer may move during the walk before cleanup gives up.
const MAX_WALK_ROUNDS: usize = 5;

/// Manifests read at once during the reachable walk.
const WALK_PARALLELISM: usize = 16;

/// How to run a cleanup.
#[derive(Clone, Debug)]
pub struct CleanupOptions {
    /// Only files last modified at least this long ago are deleted.
    pub older_than: Duration,
    /// Report what would be deleted, delete nothing.
    pub dry_run: bool,
}

impl Default for CleanupOptions {
    fn default() -> Self {
        Self {
            older_than: DEFAULT_MIN_AGE,
            dry_run: false,
        }
    }
}

/// A file that could not be deleted.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct DeleteFailure {
    pub path: String,
    pub error: String,
}

/// What a cleanup found and did.
#[derive(Clone, Debug, Serialize)]
pub struct CleanupReport {
    pub table: String,
    pub location: String,
    /// The metadata file the reachable walk started from (the last one, if it moved).
    pub metadata_location: String,
    pub dry_run: bool,
    pub older_than_secs: u64,
    /// Files listed under the table location.
    pub scanned: usize,
    /// Distinct files referenced by the current metadata or a metadata file in its log.
    pub reachable: usize,
    /// Files referenced only by an older metadata version that no longer exist (skipped).
    pub missing_referenced: usize,
    /// Listed files that nothing references.
    pub orphans_found: usize,
    /// Orphans old enough and in `data/` or `metadata/`: deleted (or, in a dry run, to delete).
    pub eligible: Vec<String>,
    /// Orphans actually deleted (empty in a dry run).
    pub deleted: Vec<String>,
    /// Orphans younger than `older_than` (or of unknown age): they may belong to a commit in flight.
    pub kept_too_young: Vec<String>,
    /// Orphans outside `data/` and `metadata/`, hidden, or `version-hint.text`: never deleted.
    pub kept_unmanaged: Vec<String>,
    pub delete_failures: Vec<DeleteFailure>,
}

/// One file found under the table location.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListedFile {
    /// The location as FileIO takes it (same scheme as the table location).
    pub path: String,
    pub last_modified: Option<SystemTime>,
    pub size: u64,
}

/// Everything a table's metadata versions reference.
#[derive(Clone, Debug, Default)]
pub struct Reachable {
    /// Normalized locations (see [`normalize_location`]).
    pub files: HashSet<String>,
    /// Locations referenced only by older metadata versions that no longer exist.
    pub missing: HashSet<String>,
}

impl Reachable {
    pub fn contains(&self, location: &str) -> bool {
        self.files.contains(&normalize_location(location))
    }
}

/// Deletes the orphan files of `name` that are older than `options.older_than`.
pub async fn cleanup(
    catalog: &dyn Catalog,
    name: &TableName,
    options: &CleanupOptions,
) -> Result<CleanupReport> {
    let table = LoadedTable::load(catalog, name).await?;
    let location = table.location().trim_end_matches('/').to_string();

    // List first, then walk from a pointer read after the listing: a commit that lands
    // in between is seen by the walk, and files of later commits are not listed.
    let listed = list_files(&table).await?;

    let mut reachable = Reachable::default();
    let mut current = table;
    let mut stable = false;
    for _ in 0..MAX_WALK_ROUNDS {
        let fresh = LoadedTable::load(catalog, name).await?;
        if fresh.location().trim_end_matches('/') != location {
            return Err(Error::UnsupportedTable {
                table: name.to_string(),
                message: format!(
                    "the table location changed from {location} to {} during cleanup",
                    fresh.location()
                ),
            });
        }
        let walked = reachable_files(&fresh).await?;
        reachable.files.extend(walked.files);
        reachable.missing.extend(walked.missing);
        current = fresh;
        // The pointer must not move between the walk and the decision: a commit that
        // landed meanwhile may reference listed files.
        let after = catalog.load_pointer(name).await?;
        if after.metadata_location == current.pointer.metadata_location {
            stable = true;
            break;
        }
        tracing::info!(table = %name, "the table moved during the reachable walk; walking again");
    }
    if !stable {
        return Err(Error::CommitConflict {
            table: name.to_string(),
            message: format!(
                "the metadata pointer moved {MAX_WALK_ROUNDS} times during cleanup; deleted nothing, try again later"
            ),
        });
    }

    let now = SystemTime::now();
    let managed = [
        normalize_location(&format!("{location}/data/")),
        normalize_location(&format!("{location}/metadata/")),
    ];
    let mut report = CleanupReport {
        table: name.to_string(),
        location: location.clone(),
        metadata_location: current.pointer.metadata_location.clone(),
        dry_run: options.dry_run,
        older_than_secs: options.older_than.as_secs(),
        scanned: listed.len(),
        reachable: reachable.files.len(),
        missing_referenced: reachable.missing.len(),
        orphans_found: 0,
        eligible: Vec::new(),
        deleted: Vec::new(),
        kept_too_young: Vec::new(),
        kept_unmanaged: Vec::new(),
        delete_failures: Vec::new(),
    };
    let base = normalize_location(&location);
    for file in &listed {
        let key = normalize_location(&file.path);
        if reachable.files.contains(&key) {
            continue;
        }
        report.orphans_found += 1;
        if !managed.iter().any(|m| key.starts_with(m.as_str())) || is_protected(&base, &key) {
            report.kept_unmanaged.push(file.path.clone());
            continue;
        }
        let old_enough = file
            .last_modified
            .and_then(|m| now.duration_since(m).ok())
            .is_some_and(|age| age >= options.older_than);
        if old_enough {
            report.eligible.push(file.path.clone());
        } else {
            report.kept_too_young.push(file.path.clone());
        }
    }
    report.eligible.sort();
    report.kept_too_young.sort();
    report.kept_unmanaged.sort();

    if !options.dry_run {
        for path in &report.eligible {
            match current.file_io.delete(path).await {
                Ok(()) => report.deleted.push(path.clone()),
                Err(e) => {
                    tracing::warn!(path = %path, error = %e, "could not delete an orphan file");
                    report.delete_failures.push(DeleteFailure {
                        path: path.clone(),
                        error: e.to_string(),
                    });
                }
            }
        }
    }
    tracing::info!(
        table = %name,
        scanned = report.scanned,
        reachable = report.reachable,
        orphans = report.orphans_found,
        deleted = report.deleted.len(),
        too_young = report.kept_too_young.len(),
        dry_run = options.dry_run,
        "cleanup"
    );
    Ok(report)
}

/// Hidden files and directories (`.x`, `_x` but not a `_x=1` partition directory) and
/// Hadoop tables' `version-hint.text` are never deleted.
fn is_protected(base: &str, key: &str) -> bool {
    let relative = key.strip_prefix(base).unwrap_or(key);
    relative
        .split('/')
        .filter(|c| !c.is_empty())
        .any(|c| c.starts_with('.') || (c.starts_with('_') && !c.contains('=')))
        || relative.ends_with("/version-hint.text")
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

/// Everything reachable from the table's current metadata and every metadata file in
/// its log. Fails if anything the current metadata references cannot be read; files
/// referenced only by older versions may be missing (expired) and are then skipped.
pub async fn reachable_files(table: &LoadedTable) -> Result<Reachable> {
    let io = &table.file_io;
    let mut reachable = Reachable::default();
    let add = |files: &mut HashSet<String>, p: &str| {
        files.insert(normalize_location(p));
    };

    // Metadata files: the current one (already read) and the log.
    add(&mut reachable.files, &table.pointer.metadata_location);
    let mut versions: Vec<(TableMetadata, bool)> = vec![(table.metadata.as_ref().clone(), true)];
    for entry in table.metadata.metadata_log() {
        let path = &entry.metadata_file;
        if normalize_location(path) == normalize_location(&table.pointer.metadata_location) {
            continue;
        }
        add(&mut reachable.files, path);
        if !exists(io, path).await? {
            reachable.missing.insert(normalize_location(path));
            continue;
        }
        let metadata = TableMetadata::read_from(io, path)
            .await
            .map_err(|e| Error::file(path, "cannot read a metadata file in the log", e))?;
        versions.push((metadata, false));
    }

    // Manifest lists (a current snapshot's list is required; an expired one's may be
    // gone). The current version comes first, so a list it references is required.
    let mut lists: Vec<(String, FormatVersion, bool)> = Vec::new();
    let mut seen_lists: HashSet<String> = HashSet::new();
    for (metadata, current) in &versions {
        for stats in metadata.statistics_iter() {
            add(&mut reachable.files, &stats.statistics_path);
        }
        for stats in metadata.partition_statistics_iter() {
            add(&mut reachable.files, &stats.statistics_path);
        }
        for snapshot in metadata.snapshots() {
            let path = snapshot.manifest_list().to_string();
            add(&mut reachable.files, &path);
            if seen_lists.insert(normalize_location(&path)) {
                lists.push((path, metadata.format_version(), *current));
            }
        }
    }

    let read_lists: Vec<Found<(ManifestList, bool)>> = futures::stream::iter(
        lists
            .into_iter()
            .map(|(path, version, required)| async move {
                if !required && !exists(io, &path).await? {
                    return Ok::<_, Error>(Found::Missing(path));
                }
                let bytes = crate::storage::read_all(io, &path).await?;
                let list = ManifestList::parse_with_version(&bytes, version)
                    .map_err(|e| Error::file(&path, "cannot parse manifest list", e))?;
                Ok(Found::Read((list, required)))
            }),
    )
    .buffer_unordered(WALK_PARALLELISM)
    .try_collect()
    .await?;

    let mut manifests: Vec<(ManifestFile, bool)> = Vec::new();
    let mut seen_manifests: HashSet<String> = HashSet::new();
    let mut required_manifests: HashSet<String> = HashSet::new();
    for read in read_lists {
        let (list, required) = match read {
            Found::Read(read) => read,
            Found::Missing(path) => {
                reachable.missing.insert(normalize_location(&path));
                continue;
            }
        };
        for m in list.entries() {
            let key = normalize_location(&m.manifest_path);
            reachable.files.insert(key.clone());
            if required {
                required_manifests.insert(key.clone());
            }
            if seen_manifests.insert(key) {
                manifests.push((m.clone(), required));
            }
        }
    }
    for (m, required) in &mut manifests {
        *required |= required_manifests.contains(&normalize_location(&m.manifest_path));
    }

    let entries: Vec<Found<Vec<String>>> =
        futures::stream::iter(manifests.into_iter().map(|(m, required)| async move {
            if !required && !exists(io, &m.manifest_path).await? {
                return Ok::<_, Error>(Found::Missing(m.manifest_path));
            }
            let (_, entries) = crate::manifest_decode::load_manifest(io, &m).await?;
            // Live and DELETED entries alike: some snapshot references each.
            Ok(Found::Read(
                entries
                    .into_iter()
                    .map(|e| e.data_file.file_path().to_string())
                    .collect(),
            ))
        }))
        .buffer_unordered(WALK_PARALLELISM)
        .try_collect()
        .await?;
    for read in entries {
        match read {
            Found::Read(files) => {
                for f in files {
                    add(&mut reachable.files, &f);
                }
            }
            Found::Missing(path) => {
                reachable.missing.insert(normalize_location(&path));
            }
        }
    }
    Ok(reachable)
}

/// A file of an older version read, or found missing (expired).
enum Found<T> {
    Read(T),
    Missing(String),
}

async fn exists(io: &iceberg::io::FileIO, path: &str) -> Result<bool> {
    io.exists(path)
        .await
        .map_err(|e| Error::file(path, "cannot check whether the file exists", e))
}

/// A location's comparable form: `s3a://` and `s3n://` become `s3://`; local paths
/// (`file:///p`, `file:/p`, `/p`) become the plain path without `.` or doubled `/`.
///
/// ```
/// use eqdv::cleanup::normalize_location;
/// assert_eq!(normalize_location("file:/w/t/data/a.parquet"), "/w/t/data/a.parquet");
/// assert_eq!(normalize_location("file:///w//t/./data/a.parquet"), "/w/t/data/a.parquet");
/// assert_eq!(normalize_location("s3a://b/t/data/a.parquet"), "s3://b/t/data/a.parquet");
/// assert_eq!(normalize_location("/w/t/data/"), "/w/t/data/");
/// ```
pub fn normalize_location(location: &str) -> String {
    match scheme(location) {
        Some("s3a" | "s3n") => format!("s3{}", &location[location.find("://").unwrap_or(0)..]),
        None | Some("file") => {
            let path = local_path(location);
            let mut out = String::new();
            for c in path.components() {
                match c {
                    Component::RootDir => out.push('/'),
                    Component::CurDir => {}
                    Component::Normal(s) => {
                        if !out.is_empty() && !out.ends_with('/') {
                            out.push('/');
                        }
                        out.push_str(&s.to_string_lossy());
                    }
                    Component::ParentDir => {
                        if !out.ends_with('/') {
                            out.push('/');
                        }
                        out.push_str("..");
                    }
                    Component::Prefix(p) => out.push_str(&p.as_os_str().to_string_lossy()),
                }
            }
            if location.ends_with('/') && !out.ends_with('/') {
                out.push('/');
            }
            out
        }
        Some(_) => location.to_string(),
    }
}

fn scheme(location: &str) -> Option<&str> {
    let (scheme, _) = location.split_once(':')?;
    let valid = !scheme.is_empty()
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    // A one-letter "scheme" is a Windows drive letter.
    (valid && scheme.len() > 1).then_some(scheme)
}

fn local_path(location: &str) -> PathBuf {
    let rest = location.strip_prefix("file:").unwrap_or(location);
    if location.starts_with("file:") {
        // file:///p, file://localhost/p and file:/p all name /p.
        let rest = rest.strip_prefix("//localhost").unwrap_or(rest);
        PathBuf::from(format!("/{}", rest.trim_start_matches('/')))
    } else {
        PathBuf::from(rest)
    }
}

fn split_bucket(location: &str) -> Result<(&str, &str)> {
    let rest = location
        .split_once("://")
        .map(|(_, r)| r)
        .ok_or_else(|| Error::InvalidInput(format!("not an s3 location: {location}")))?;
    let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
    if bucket.is_empty() {
        return Err(Error::InvalidInput(format!(
            "s3 location {location} has no bucket"
        )));
    }
    Ok((bucket, key))
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

/// Parses an age such as `72h`, `3d`, `90m`, `0s` or `1d12h` (units `s`, `m`, `h`, `d`).
///
/// ```
/// use std::time::Duration;
/// use eqdv::cleanup::parse_age;
/// assert_eq!(parse_age("72h").unwrap(), Duration::from_secs(72 * 3600));
/// assert_eq!(parse_age("1d12h").unwrap(), Duration::from_secs(36 * 3600));
/// assert_eq!(parse_age("0s").unwrap(), Duration::ZERO);
/// assert!(parse_age("72").is_err());
/// assert!(parse_age("3w").is_err());
/// ```
pub fn parse_age(text: &str) -> Result<Duration> {
    let bad = |why: &str| {
        Error::InvalidInput(format!(
            "age '{text}' {why}: use a number with a unit s, m, h or d, e.g. 72h, 3d, 30m, 0s"
        ))
    };
    let text = text.trim();
    if text.is_empty() {
        return Err(bad("is empty"));
    }
    let mut total: u64 = 0;
    let mut digits = String::new();
    for c in text.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let unit: u64 = match c {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            'd' => 86_400,
            _ => return Err(bad(&format!("has an unknown unit '{c}'"))),
        };
        if digits.is_empty() {
            return Err(bad("has a unit without a number"));
        }
        let n = u64::from_str(&digits).map_err(|_| bad("is too large"))?;
        total = n
            .checked_mul(unit)
            .and_then(|s| total.checked_add(s))
            .ok_or_else(|| bad("is too large"))?;
        digits.clear();
    }
    if !digits.is_empty() {
        return Err(bad("ends without a unit"));
    }
    Ok(Duration::from_secs(total))
}
