//! Table locations in one comparable form, so that a path a manifest names and the same
//! path a listing returns (another scheme alias, `file:` spelling or `.`) match.

use std::path::{Component, PathBuf};

use crate::{Error, Result};

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

pub(super) fn scheme(location: &str) -> Option<&str> {
    let (scheme, _) = location.split_once(':')?;
    let valid = !scheme.is_empty()
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    // A one-letter "scheme" is a Windows drive letter.
    (valid && scheme.len() > 1).then_some(scheme)
}

pub(super) fn local_path(location: &str) -> PathBuf {
    let rest = location.strip_prefix("file:").unwrap_or(location);
    if location.starts_with("file:") {
        // file:///p, file://localhost/p and file:/p all name /p.
        let rest = rest.strip_prefix("//localhost").unwrap_or(rest);
        PathBuf::from(format!("/{}", rest.trim_start_matches('/')))
    } else {
        PathBuf::from(rest)
    }
}

pub(super) fn split_bucket(location: &str) -> Result<(&str, &str)> {
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
