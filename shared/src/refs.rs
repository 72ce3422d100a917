//! A table's branches and tags. iceberg-rust's metadata answers a ref's snapshot by
//! name but does not list its refs or say which are tags; the metadata's JSON form
//! has them all, and iceberg-rust's own `SnapshotReference` reads them.

use std::collections::BTreeMap;

use iceberg::spec::{SnapshotReference, SnapshotRetention, TableMetadata};

use crate::Result;

/// Every branch and tag of `metadata`, by name.
pub fn refs(metadata: &TableMetadata) -> Result<BTreeMap<String, SnapshotReference>> {
    let mut json = serde_json::to_value(metadata)?;
    match json.get_mut("refs").map(serde_json::Value::take) {
        None | Some(serde_json::Value::Null) => Ok(BTreeMap::new()),
        Some(refs) => Ok(serde_json::from_value(refs)?),
    }
}

/// Whether `reference` is a tag (an immutable name for one snapshot).
pub fn is_tag(reference: &SnapshotReference) -> bool {
    matches!(reference.retention, SnapshotRetention::Tag { .. })
}
