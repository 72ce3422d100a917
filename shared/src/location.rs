//! Table locations: one comparable form, so that a path a manifest names and the same
//! path a listing returns (another scheme alias, `file:` spelling or `.`) match; and
//! the confinement of what eqdv writes and deletes to its table's own directories.

use std::path::{Component, PathBuf};

use crate::{Error, Result};

/// A location's comparable form: `s3a://` and `s3n://` become `s3://`; local paths
/// (`file:///p`, `file:/p`, `/p`) become the plain path without `.` or doubled `/`.
///
/// ```
/// use eqdv::location::normalize_location;
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

pub(crate) fn scheme(location: &str) -> Option<&str> {
    let (scheme, _) = location.split_once(':')?;
    let valid = !scheme.is_empty()
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    // A one-letter "scheme" is a Windows drive letter.
    (valid && scheme.len() > 1).then_some(scheme)
}

pub(crate) fn local_path(location: &str) -> PathBuf {
    let rest = location.strip_prefix("file:").unwrap_or(location);
    if location.starts_with("file:") {
        // file:///p, file://localhost/p and file:/p all name /p.
        let rest = rest.strip_prefix("//localhost").unwrap_or(rest);
        PathBuf::from(format!("/{}", rest.trim_start_matches('/')))
    } else {
        PathBuf::from(rest)
    }
}

pub(crate) fn split_bucket(location: &str) -> Result<(&str, &str)> {
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

/// The directories of a table eqdv writes in and may delete from (the spec's defaults
/// for data and metadata files; eqdv's DVs, metadata, index files and split results all
/// go there).
const OWN_DIRECTORIES: [&str; 2] = ["data/", "metadata/"];

/// Why `path` is not a file eqdv may write or delete for the table at `table_location`,
/// or `None` when it is: it must lie in the table's `data/` or `metadata/` directory
/// (after [`normalize_location`], so an `s3a://` spelling of the table's own bucket is
/// the same place), and name it plainly. A `.` or `..` segment, an empty segment, a
/// backslash, a control character or a percent-encoded separator or dot could make a
/// store or a later reader resolve it elsewhere: refused, whatever the prefix says.
pub fn outside_reason(table_location: &str, path: &str) -> Option<String> {
    let base = normalize_location(table_location.trim_end_matches('/'));
    let base = format!("{}/", base.trim_end_matches('/'));
    let normalized = normalize_location(path);
    let Some(rest) = normalized.strip_prefix(&base) else {
        return Some(format!(
            "it is not under the table location {table_location}"
        ));
    };
    if !OWN_DIRECTORIES.iter().any(|d| rest.starts_with(d)) {
        return Some(format!(
            "it is not in the table's data/ or metadata/ directory ({table_location})"
        ));
    }
    // Segments of the path as given (normalizing a local path resolves `.` away), after
    // its scheme and bucket (or its root).
    let raw = path.split_once("://").map_or(path, |(_, rest)| rest);
    if raw
        .split('/')
        .skip(1)
        .any(|s| s.is_empty() || s == "." || s == "..")
    {
        return Some("it has an empty, `.` or `..` segment".to_string());
    }
    if path.contains('\\') || path.chars().any(char::is_control) {
        return Some("it holds a backslash or a control character".to_string());
    }
    let lower = path.to_ascii_lowercase();
    if ["%2f", "%5c", "%2e", "%00"]
        .iter()
        .any(|e| lower.contains(e))
    {
        return Some("it holds a percent-encoded separator or dot".to_string());
    }
    None
}

/// Refuses a path eqdv would write or delete outside its table's own directories (see
/// [`outside_reason`]), with an error naming the path, the table location and why.
pub fn check_confined(table_location: &str, path: &str) -> Result<()> {
    match outside_reason(table_location, path) {
        None => Ok(()),
        Some(why) => Err(Error::InvalidInput(format!(
            "refusing to write or delete {path}: {why}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_paths_in_the_tables_own_directories_are_confined() {
        let table = "s3://bucket/warehouse/db/t";
        for inside in [
            "s3://bucket/warehouse/db/t/data/eqdv-dv-1.puffin",
            "s3a://bucket/warehouse/db/t/metadata/00001-a.metadata.json",
            "s3://bucket/warehouse/db/t/data/k0_bucket=1/x.parquet",
            "s3://bucket/warehouse/db/t/metadata/eqdv-splits/job-r2/range-0-of-2.json",
        ] {
            assert_eq!(outside_reason(table, inside), None, "{inside}");
            assert!(
                check_confined(&format!("{table}/"), inside).is_ok(),
                "{inside}"
            );
        }
        for outside in [
            "s3://other-bucket/warehouse/db/t/data/x.puffin",
            "s3://bucket/warehouse/db/t2/data/x.puffin",
            "s3://bucket/warehouse/db/t/x.puffin",
            "s3://bucket/warehouse/db/t/other/x.puffin",
            "s3://bucket/warehouse/db/t/data/../../t2/data/x.puffin",
            "s3://bucket/warehouse/db/t/data/./x.puffin",
            "s3://bucket/warehouse/db/t/data//x.puffin",
            "s3://bucket/warehouse/db/t/data/..%2F..%2Ft2/x.puffin",
            "s3://bucket/warehouse/db/t/data/%2e%2e/x.puffin",
            "s3://bucket/warehouse/db/t/data/a\\..\\x.puffin",
            "s3://bucket/warehouse/db/t/data/a\nb.puffin",
            "gs://bucket/warehouse/db/t/data/x.puffin",
            "/warehouse/db/t/data/x.puffin",
        ] {
            let why = outside_reason(table, outside);
            assert!(why.is_some(), "{outside} passed");
            let err = check_confined(table, outside).unwrap_err().to_string();
            assert!(err.contains(outside) && err.contains("refusing"), "{err}");
        }
        let local = "/tmp/wh/db/t";
        assert_eq!(
            outside_reason(local, "file:///tmp/wh/db/t/data/a.puffin"),
            None
        );
        assert!(outside_reason(local, "/tmp/wh/db/t/data/../../t2/data/a.puffin").is_some());
        assert!(outside_reason(local, "/tmp/wh/db/t/data/./a.puffin").is_some());
        assert!(outside_reason(local, "/tmp/wh/db/t2/data/a.puffin").is_some());
    }
}
