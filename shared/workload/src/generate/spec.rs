//! What to generate: key types, partitioning and the workload spec, and the state
//! stored in the table to replay the model.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use iceberg::spec::{PrimitiveType, TableMetadata};
use serde::{Deserialize, Serialize};

use eqdv::catalog::TableName;
use eqdv::{Error, Result};

use super::{
    ABSENT_KID_OFFSET, DECIMAL_PRECISION, DECIMAL_SCALE, FIXED_LEN, MAX_DATE_KID,
    MAX_EXTRA_COLUMNS, MAX_KEYS, STATE_PROPERTY,
};

/// The Iceberg type of a key column.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KeyType {
    Int,
    Long,
    String,
    Uuid,
    /// `decimal(20, 4)`
    Decimal,
    Date,
    Timestamp,
    Timestamptz,
    Binary,
    /// Only two values: meant as one column of a multi-column key.
    Boolean,
    /// `fixed[12]`
    Fixed,
}

impl KeyType {
    pub const ALL: [KeyType; 11] = [
        KeyType::Int,
        KeyType::Long,
        KeyType::String,
        KeyType::Uuid,
        KeyType::Decimal,
        KeyType::Date,
        KeyType::Timestamp,
        KeyType::Timestamptz,
        KeyType::Binary,
        KeyType::Boolean,
        KeyType::Fixed,
    ];

    pub fn name(self) -> &'static str {
        match self {
            KeyType::Int => "int",
            KeyType::Long => "long",
            KeyType::String => "string",
            KeyType::Uuid => "uuid",
            KeyType::Decimal => "decimal",
            KeyType::Date => "date",
            KeyType::Timestamp => "timestamp",
            KeyType::Timestamptz => "timestamptz",
            KeyType::Binary => "binary",
            KeyType::Boolean => "boolean",
            KeyType::Fixed => "fixed",
        }
    }

    /// The Iceberg type of the column.
    pub fn iceberg_type(self) -> PrimitiveType {
        match self {
            KeyType::Int => PrimitiveType::Int,
            KeyType::Long => PrimitiveType::Long,
            KeyType::String => PrimitiveType::String,
            KeyType::Uuid => PrimitiveType::Uuid,
            KeyType::Decimal => PrimitiveType::Decimal {
                precision: DECIMAL_PRECISION,
                scale: DECIMAL_SCALE,
            },
            KeyType::Date => PrimitiveType::Date,
            KeyType::Timestamp => PrimitiveType::Timestamp,
            KeyType::Timestamptz => PrimitiveType::Timestamptz,
            KeyType::Binary => PrimitiveType::Binary,
            KeyType::Boolean => PrimitiveType::Boolean,
            KeyType::Fixed => PrimitiveType::Fixed(FIXED_LEN),
        }
    }
}

impl fmt::Display for KeyType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for KeyType {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        let s = s.trim();
        KeyType::ALL
            .into_iter()
            .find(|k| k.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| {
                let names: Vec<_> = KeyType::ALL.iter().map(|k| k.name()).collect();
                Error::InvalidInput(format!(
                    "unknown key type '{s}' (expected one of {})",
                    names.join(", ")
                ))
            })
    }
}

/// Parses a comma-separated list of key types (`int,string`).
pub fn parse_key_types(text: &str) -> Result<Vec<KeyType>> {
    let keys = text
        .split(',')
        .map(KeyType::from_str)
        .collect::<Result<Vec<_>>>()?;
    if keys.is_empty() || keys.len() > MAX_KEYS {
        return Err(Error::InvalidInput(format!(
            "keys: expected 1 to {MAX_KEYS} key types, got '{text}'"
        )));
    }
    Ok(keys)
}

/// How the generated table is partitioned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum PartitionKind {
    /// Unpartitioned.
    None,
    /// `identity(region)`
    Identity,
    /// `bucket[N](k0)`
    Bucket(u32),
    /// `day(ts)`
    Day,
}

impl fmt::Display for PartitionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PartitionKind::None => f.write_str("none"),
            PartitionKind::Identity => f.write_str("identity"),
            PartitionKind::Bucket(n) => write!(f, "bucket:{n}"),
            PartitionKind::Day => f.write_str("day"),
        }
    }
}

impl FromStr for PartitionKind {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        let s = s.trim();
        let lower = s.to_ascii_lowercase();
        match lower.as_str() {
            "none" => Ok(PartitionKind::None),
            "identity" => Ok(PartitionKind::Identity),
            "day" => Ok(PartitionKind::Day),
            _ => match lower.strip_prefix("bucket:").map(str::parse::<u32>) {
                Some(Ok(n)) if n > 0 => Ok(PartitionKind::Bucket(n)),
                _ => Err(Error::InvalidInput(format!(
                    "partition: '{s}' is not none, identity, day or bucket:N (N >= 1)"
                ))),
            },
        }
    }
}

impl TryFrom<String> for PartitionKind {
    type Error = Error;

    fn try_from(s: String) -> Result<Self> {
        s.parse()
    }
}

impl From<PartitionKind> for String {
    fn from(p: PartitionKind) -> String {
        p.to_string()
    }
}

/// What to generate. Deserializes with defaults for missing fields.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct WorkloadSpec {
    pub seed: u64,
    /// Rows of the initial load.
    pub rows: u64,
    /// CDC commits after the initial load (for an existing table: further commits).
    pub commits: u32,
    /// Key columns `k0..`; the equality delete key.
    pub keys: Vec<KeyType>,
    pub partition: PartitionKind,
    /// About one key value in 16 is null (deletes of the null key included).
    pub null_keys: bool,
    /// Some equality deletes use an unpartitioned spec and apply to every partition.
    pub global_deletes: bool,
    /// Add an optional `tag` column halfway; later deletes also key on it.
    pub add_column: bool,
    /// Changes (insert, update or delete of one key) per CDC commit.
    pub changes_per_commit: u32,
    /// Most rows per data or delete file (files are per partition).
    pub rows_per_file: u32,
    /// Most rows per Parquet row group.
    pub rows_per_row_group: u32,
    /// Write Parquet bloom filters on the key columns of data files (as Java does with
    /// `write.parquet.bloom-filter-enabled.column.<k>`).
    pub bloom_filters: bool,
    /// Write each row group's bloom filters right after it (the Rust writer's default)
    /// rather than all of them before the footer (where Java's Parquet writer puts them,
    /// so a footer read of a small file holds them).
    pub bloom_filters_after_row_groups: bool,
    /// Properties the table is created with (besides the generator's own state), e.g.
    /// `eqdv.queue-groups` or `commit.manifest.min-count-to-merge`.
    pub table_properties: BTreeMap<String, String>,
    /// Long keys are a hash of the key id, spread over the whole range (as hashed ids
    /// are), so every file's bounds admit almost any key: only bloom filters prune.
    pub hashed_keys: bool,
    /// Filler columns `c01..` (long, string and double in turn) after `payload`, for a
    /// realistic width: wider footers and row groups whose key column is a small part.
    pub extra_columns: u32,
    /// Updates pick their keys by a scrambled Zipf distribution (exponent 0.99, YCSB's)
    /// over the initial load's keys: a few keys take most of the updates, and those keys
    /// are spread over all of it. Otherwise (and for deletes) every live key is as likely.
    pub zipf_keys: bool,
}

impl Default for WorkloadSpec {
    fn default() -> Self {
        Self {
            seed: 42,
            rows: 2_000,
            commits: 5,
            keys: vec![KeyType::Long],
            partition: PartitionKind::None,
            null_keys: false,
            global_deletes: false,
            add_column: false,
            changes_per_commit: 200,
            rows_per_file: 500,
            rows_per_row_group: 200,
            bloom_filters: false,
            bloom_filters_after_row_groups: false,
            table_properties: BTreeMap::new(),
            hashed_keys: false,
            extra_columns: 0,
            zipf_keys: false,
        }
    }
}

impl WorkloadSpec {
    /// Checks the spec for `total_commits` generator commits (initial load included).
    pub(super) fn validate(&self, total_commits: u32) -> Result<()> {
        if self.keys.is_empty() || self.keys.len() > MAX_KEYS {
            return Err(Error::InvalidInput(format!(
                "keys: expected 1 to {MAX_KEYS} key types, got {}",
                self.keys.len()
            )));
        }
        if let PartitionKind::Bucket(n) = self.partition {
            if n == 0 {
                return Err(Error::InvalidInput(
                    "partition: bucket count must be >= 1".into(),
                ));
            }
            if self.keys[0] == KeyType::Boolean {
                return Err(Error::InvalidInput(
                    "partition: bucket[N](k0) needs k0 of a type other than boolean".into(),
                ));
            }
        }
        if self.extra_columns > MAX_EXTRA_COLUMNS {
            return Err(Error::InvalidInput(format!(
                "extra_columns: at most {MAX_EXTRA_COLUMNS}, got {}",
                self.extra_columns
            )));
        }
        if self.rows_per_file == 0 || self.rows_per_row_group == 0 {
            return Err(Error::InvalidInput(
                "rows_per_file and rows_per_row_group must be >= 1".into(),
            ));
        }
        let max_kid = self.rows
            + u64::from(total_commits) * u64::from(self.changes_per_commit)
            + 2 * ABSENT_KID_OFFSET;
        if self.keys.contains(&KeyType::Date) && max_kid >= MAX_DATE_KID {
            return Err(Error::InvalidInput(format!(
                "keys: date keys support up to {MAX_DATE_KID} distinct keys; rows + commits * changes_per_commit is too large"
            )));
        }
        if max_kid >= 1 << 31 {
            return Err(Error::InvalidInput(
                "rows + commits * changes_per_commit must stay below 2^31".into(),
            ));
        }
        Ok(())
    }

    /// Fields that decide the table's shape must not change when a table is continued.
    pub(super) fn check_continues(&self, stored: &WorkloadSpec, table: &TableName) -> Result<()> {
        let mismatch = |field: &str, stored: String, given: String| {
            Err(Error::InvalidInput(format!(
                "table {table} was generated with {field}={stored}, not {given}"
            )))
        };
        let keys = |k: &[KeyType]| k.iter().map(|k| k.name()).collect::<Vec<_>>().join(",");
        if self.keys != stored.keys {
            return mismatch("keys", keys(&stored.keys), keys(&self.keys));
        }
        if self.partition != stored.partition {
            return mismatch(
                "partition",
                stored.partition.to_string(),
                self.partition.to_string(),
            );
        }
        for (field, s, g) in [
            ("null_keys", stored.null_keys, self.null_keys),
            ("global_deletes", stored.global_deletes, self.global_deletes),
            ("add_column", stored.add_column, self.add_column),
            ("hashed_keys", stored.hashed_keys, self.hashed_keys),
            // A replay draws every commit's keys with the stored spec.
            ("zipf_keys", stored.zipf_keys, self.zipf_keys),
        ] {
            if s != g {
                return mismatch(field, s.to_string(), g.to_string());
            }
        }
        if self.extra_columns != stored.extra_columns {
            return mismatch(
                "extra_columns",
                stored.extra_columns.to_string(),
                self.extra_columns.to_string(),
            );
        }
        Ok(())
    }
}

/// What the generator stores in the table ([`STATE_PROPERTY`]) to replay its model.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GeneratorState {
    /// Layout version of this record.
    pub version: u32,
    /// The spec the table was created with (`commits` is that first call's).
    pub spec: WorkloadSpec,
    /// Generator commits done: the initial load is commit 0, CDC commits follow.
    pub done: u32,
    /// The commit before which the `tag` column is added.
    pub add_column_at: Option<u32>,
}

impl GeneratorState {
    pub(super) fn new(spec: &WorkloadSpec) -> Self {
        Self {
            version: 1,
            spec: spec.clone(),
            done: 0,
            add_column_at: spec.add_column.then(|| spec.commits.div_ceil(2).max(1)),
        }
    }

    pub(super) fn tagged(&self, commit: u32) -> bool {
        self.add_column_at.is_some_and(|a| commit >= a)
    }
}

/// The generator state stored in a table's metadata, if the generator made it.
pub fn state_of(metadata: &TableMetadata) -> Result<Option<GeneratorState>> {
    match metadata.properties().get(STATE_PROPERTY) {
        None => Ok(None),
        Some(json) => serde_json::from_str(json).map(Some).map_err(|e| {
            Error::InvalidInput(format!(
                "table property {STATE_PROPERTY} is not a generator state: {e}"
            ))
        }),
    }
}
