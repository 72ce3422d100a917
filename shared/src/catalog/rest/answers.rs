//! What a REST catalog answers, as far as eqdv reads it (serde ignores the rest), and
//! the storage settings a table's answer gives its files.

use std::collections::HashMap;

use serde::Deserialize;

/// The catalog's answer to `GET v1/config`.
#[derive(Deserialize, Default)]
pub(super) struct ConfigAnswer {
    #[serde(default)]
    pub(super) defaults: HashMap<String, String>,
    #[serde(default)]
    pub(super) overrides: HashMap<String, String>,
}

/// A table as `LoadTable` answers it; the metadata itself is read from its file, as for
/// every catalog.
#[derive(Deserialize)]
pub(super) struct LoadTableAnswer {
    #[serde(rename = "metadata-location")]
    pub(super) metadata_location: Option<String>,
    #[serde(default)]
    pub(super) config: HashMap<String, String>,
    #[serde(default, rename = "storage-credentials")]
    pub(super) storage_credentials: Vec<StorageCredential>,
}

#[derive(Deserialize)]
pub(super) struct StorageCredential {
    #[serde(default)]
    pub(super) prefix: String,
    #[serde(default)]
    pub(super) config: HashMap<String, String>,
}

#[derive(Deserialize)]
pub(super) struct CommitAnswer {
    #[serde(rename = "metadata-location")]
    pub(super) metadata_location: String,
}

#[derive(Deserialize)]
pub(super) struct NamespacesPage {
    #[serde(default)]
    pub(super) namespaces: Vec<Vec<String>>,
    #[serde(default, rename = "next-page-token")]
    pub(super) next_page_token: Option<String>,
}

#[derive(Deserialize)]
pub(super) struct TablesPage {
    #[serde(default)]
    pub(super) identifiers: Vec<Identifier>,
    #[serde(default, rename = "next-page-token")]
    pub(super) next_page_token: Option<String>,
}

#[derive(Deserialize)]
pub(super) struct Identifier {
    pub(super) namespace: Vec<String>,
    pub(super) name: String,
}

impl LoadTableAnswer {
    /// The storage settings of the table's files: the `s3.*` and `client.*` entries of
    /// its `config`, then the credentials vended for the longest prefix that holds
    /// `metadata_location` (a catalog may vend per prefix; none match: none used).
    pub(super) fn storage_settings(self, metadata_location: &str) -> HashMap<String, String> {
        let mut storage: HashMap<String, String> = self
            .config
            .into_iter()
            .filter(|(k, _)| is_storage_setting(k))
            .collect();
        if let Some(credential) = self
            .storage_credentials
            .into_iter()
            .filter(|c| metadata_location.starts_with(&c.prefix))
            .max_by_key(|c| c.prefix.len())
        {
            storage.extend(credential.config);
        }
        storage
    }
}

/// A catalog or table setting that configures storage (FileIO properties).
pub(super) fn is_storage_setting(key: &str) -> bool {
    key.starts_with("s3.") || key.starts_with("client.")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vended_credentials_of_the_longest_matching_prefix_win_over_the_config() {
        let answer: LoadTableAnswer = serde_json::from_value(serde_json::json!({
            "metadata-location": "s3://lake/db/t/metadata/00003-x.metadata.json",
            "metadata": {"ignored": true},
            "config": {
                "s3.endpoint": "https://s3.example.com",
                "s3.access-key-id": "from-config",
                "token": "not a storage setting"
            },
            "storage-credentials": [
                {"prefix": "s3://lake/", "config": {"s3.access-key-id": "bucket-wide"}},
                {"prefix": "s3://lake/db/t", "config": {
                    "s3.access-key-id": "table",
                    "s3.secret-access-key": "table-secret",
                    "s3.session-token": "table-token"
                }},
                {"prefix": "s3://other/", "config": {"s3.access-key-id": "other"}}
            ]
        }))
        .unwrap();
        let location = answer.metadata_location.clone().unwrap();
        let storage = answer.storage_settings(&location);
        assert_eq!(storage["s3.access-key-id"], "table");
        assert_eq!(storage["s3.secret-access-key"], "table-secret");
        assert_eq!(storage["s3.session-token"], "table-token");
        assert_eq!(storage["s3.endpoint"], "https://s3.example.com");
        assert!(!storage.contains_key("token"));
    }

    #[test]
    fn without_vended_credentials_only_the_config_counts() {
        let answer: LoadTableAnswer = serde_json::from_value(serde_json::json!({
            "metadata-location": "s3://lake/t/metadata/1.metadata.json",
            "storage-credentials": [
                {"prefix": "s3://elsewhere/", "config": {"s3.access-key-id": "no"}}
            ]
        }))
        .unwrap();
        assert!(
            answer
                .storage_settings("s3://lake/t/metadata/1.metadata.json")
                .is_empty()
        );
    }
}
