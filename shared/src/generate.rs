//! The CDC workload generator: builds v3 tables that look like what Flink upserts
//! leave behind (data files plus partition-scoped and global equality deletes, a hot
//! set of keys updated over and over, nulls in keys, a column added halfway), for the
//! tests, `eqdv demo` and the benchmarks.
//!
//! Every row is a pure function of the seed and the workload spec, and the generator
//! keeps an in-memory model of which rows are live under the spec's delete rules. The
//! model never looks at files: what it expects is computed independently of what was
//! written, so comparing it with a reader checks the reader. The state needed to replay
//! the model (spec + commits done) is a table property updated atomically with every
//! snapshot, so another process can continue a table or recompute its expected rows.
//! The generator only ever appends snapshots to `main`; it never removes a file.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use arrow_array::{
    ArrayRef, BooleanArray, Date32Array, Decimal128Array, FixedSizeBinaryArray, Int32Array,
    Int64Array, LargeBinaryArray, RecordBatch, StringArray, TimestampMicrosecondArray,
};
use arrow_schema::{DataType, TimeUnit};
use iceberg::io::FileIO;
use iceberg::spec::{
    DataContentType, DataFile, DataFileBuilder, Datum, FormatVersion, Literal, NestedField,
    Operation, PrimitiveLiteral, PrimitiveType, Schema, SchemaRef, Struct, TableMetadata,
    TableMetadataBuilder, Transform, Type, UnboundPartitionSpec,
};
use iceberg::transform::{BoxedTransformFunction, create_transform_function};
use iceberg::writer::file_writer::{FileWriter, FileWriterBuilder, ParquetWriterBuilder};
use iceberg::{MetadataLocation, TableCreation};
use parquet::file::properties::WriterProperties;
use serde::{Deserialize, Serialize};

use crate::catalog::{Catalog, TableName};
use crate::commit::publish;
use crate::read::canonical_rows_for_schema;
use crate::snapshot::{AddedFile, PreparedSnapshot, SnapshotChanges, build_snapshot};
use crate::storage::{delete_files, new_data_file};
use crate::table::{LoadedTable, TableFiles};
use crate::{Error, Result};

/// Table property holding the generator's [`GeneratorState`] as JSON.
pub const STATE_PROPERTY: &str = "eqdv.generator.state";
/// Snapshot summary property naming the generator commit a snapshot holds.
pub const COMMIT_SUMMARY_PROPERTY: &str = "eqdv.generator.commit";

/// Values of the `region` column (identity partition source).
pub const REGIONS: [&str; 5] = [
    "us-east-1",
    "eu-west-1",
    "ap-southeast-2",
    "sa-east-1",
    "me-south-1",
];
/// Values of the `tag` column added by `add_column`.
const TAGS: [&str; 4] = ["red", "green", "blue", "grün-😀"];
const DAY_MICROS: i64 = 86_400_000_000;
/// 2024-03-09T00:00:00Z: `ts` values fall on [`TS_DAYS`] days from here.
const TS_BASE: i64 = 1_709_942_400_000_000;
const TS_DAYS: i64 = 4;
const DECIMAL_PRECISION: u32 = 20;
const DECIMAL_SCALE: u32 = 4;
const FIXED_LEN: u64 = 12;
/// Java's default metrics mode keeps 16 characters (or bytes) of string/binary bounds.
const BOUND_TRUNCATE_LEN: usize = 16;
const MAX_KEYS: usize = 16;
/// Kids of deletes for keys that do not exist lie this far above the next fresh kid.
const ABSENT_KID_OFFSET: u64 = 100_000;
/// Date keys stay within years 1..9999 (what Python's `datetime.date` can hold).
const MAX_DATE_KID: u64 = 3_600_000;
const COMMIT_ATTEMPTS: u32 = 5;

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
        }
    }
}

impl WorkloadSpec {
    /// Checks the spec for `total_commits` generator commits (initial load included).
    fn validate(&self, total_commits: u32) -> Result<()> {
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
    fn check_continues(&self, stored: &WorkloadSpec, table: &TableName) -> Result<()> {
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
        ] {
            if s != g {
                return mismatch(field, s.to_string(), g.to_string());
            }
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
    fn new(spec: &WorkloadSpec) -> Self {
        Self {
            version: 1,
            spec: spec.clone(),
            done: 0,
            add_column_at: spec.add_column.then(|| spec.commits.div_ceil(2).max(1)),
        }
    }

    fn tagged(&self, commit: u32) -> bool {
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

/// What one [`generate`] call did.
#[derive(Clone, Debug)]
pub struct GenerateReport {
    pub table: TableName,
    /// The table did not exist and was created.
    pub created: bool,
    /// Snapshots committed by this call.
    pub snapshots: u32,
    /// The state after this call (replay it with [`expected_rows`]).
    pub state: GeneratorState,
    pub data_files: u64,
    pub equality_delete_files: u64,
    pub rows_written: u64,
    pub equality_deletes_written: u64,
    /// Rows live after this call, by the model.
    pub live_rows: u64,
    pub metadata_location: String,
}

/// Creates the table if needed and commits the initial load, then `spec.commits` CDC
/// commits. An existing table continues from its stored state: its seed and sizes are
/// the stored ones, and its shape (keys, partition, nulls, global deletes, added
/// column) must match `spec`.
pub async fn generate(
    catalog: &dyn Catalog,
    name: &TableName,
    spec: &WorkloadSpec,
) -> Result<GenerateReport> {
    let (mut table, mut state, created) = match LoadedTable::load(catalog, name).await {
        Ok(table) => {
            let stored = state_of(&table.metadata)?.ok_or_else(|| {
                Error::InvalidInput(format!(
                    "table {name} has no {STATE_PROPERTY} property: the generator did not create it"
                ))
            })?;
            spec.check_continues(&stored.spec, name)?;
            (table, stored, false)
        }
        Err(Error::TableNotFound { .. }) => {
            spec.validate(spec.commits.saturating_add(1))?;
            let state = GeneratorState::new(spec);
            (create_table(catalog, name, &state).await?, state, true)
        }
        Err(e) => return Err(e),
    };
    table.require_v3()?;
    let target = state.done.max(1).saturating_add(spec.commits);
    state.spec.validate(target)?;

    let mut model = Model::replay(&state)?;
    let mut report = GenerateReport {
        table: name.clone(),
        created,
        snapshots: 0,
        state: state.clone(),
        data_files: 0,
        equality_delete_files: 0,
        rows_written: 0,
        equality_deletes_written: 0,
        live_rows: 0,
        metadata_location: table.pointer.metadata_location.clone(),
    };
    for commit in state.done..target {
        let tagged = state.tagged(commit);
        if tagged
            && table
                .metadata
                .current_schema()
                .field_by_name("tag")
                .is_none()
        {
            table = add_tag_column(catalog, &table).await?;
        }
        let plan = model.run(&state, commit)?;
        let next = GeneratorState {
            done: commit + 1,
            ..state.clone()
        };
        if let Some(landed) =
            commit_plan(catalog, table.clone(), &model, &plan, commit, &next).await?
        {
            report.snapshots += 1;
            report.data_files += landed.data_files;
            report.equality_delete_files += landed.delete_files;
            table = landed.table;
        }
        report.rows_written += plan.inserted.len() as u64;
        report.equality_deletes_written += plan.deletes.len() as u64;
        state = next;
    }
    report.state = state;
    report.live_rows = model.live.len() as u64;
    report.metadata_location = table.pointer.metadata_location.clone();
    Ok(report)
}

/// The rows the model expects live after `state.done` commits, in canonical form
/// (see [`crate::read`]), sorted.
pub fn expected_rows(state: &GeneratorState) -> Result<Vec<String>> {
    let with_tag = state.add_column_at.is_some_and(|a| state.done > a);
    let mut schema = initial_schema(&state.spec.keys)?;
    if with_tag {
        schema = schema_with_tag(&schema, schema.highest_field_id() + 1)?;
    }
    Model::replay(state)?.canonical_live_rows(&schema)
}

/// The expected rows of a generated table, recomputed from the state stored in it (in
/// its current schema), so any process can check any reader against it.
pub async fn expected_rows_of(catalog: &dyn Catalog, name: &TableName) -> Result<Vec<String>> {
    let table = LoadedTable::load(catalog, name).await?;
    let state = state_of(&table.metadata)?.ok_or_else(|| {
        Error::InvalidInput(format!("table {name} has no {STATE_PROPERTY} property"))
    })?;
    Model::replay(&state)?.canonical_live_rows(table.metadata.current_schema())
}

// ---------------------------------------------------------------------------------
// Values. Every key value derives from a key id ("kid") and the column; each column's
// mapping is injective in the kid, except boolean (kid parity).

/// SplitMix64's finalizer: a bijection on u64 that scrambles well.
fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A small PRNG defined here, so replays never change with a dependency's version.
struct Rng(u64);

impl Rng {
    /// One independent stream per commit: replaying commit c needs no earlier stream.
    fn for_commit(seed: u64, commit: u32) -> Self {
        Rng(mix64(
            seed ^ mix64(u64::from(commit).wrapping_add(0x5851_f42d_4c95_7f2d)),
        ))
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix64(self.0)
    }

    /// Uniform in `0..n` (0 when n is 0).
    fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next()) * u128::from(n)) >> 64) as u64
    }

    fn percent(&mut self, p: u64) -> bool {
        self.below(100) < p
    }
}

fn int_key(kid: u64) -> i32 {
    (kid as i64 - 500) as i32
}

fn long_key(kid: u64) -> i64 {
    kid as i64 * 1_000_003 - 1_000_000_000
}

/// Several families: long shared prefixes (> 16 characters), non-ASCII, a family whose
/// first 16 characters are U+10FFFF (no truncated upper bound exists), short ASCII.
fn string_key(kid: u64, col: usize) -> String {
    match (kid + col as u64) % 6 {
        0 => format!("tenant/eu-central-1/customer/{kid:010}"),
        1 => format!("Zürich/Bahnhofstraße/Kunde/{kid}"),
        2 => format!("k{kid}"),
        3 => format!("日本語のキー/顧客番号/東京都/{kid}"),
        4 => format!("{}{kid}", "\u{10FFFF}".repeat(17)),
        _ => format!("🔑 κλειδί πελάτη {kid}"),
    }
}

fn uuid_key(kid: u64, col: usize) -> uuid::Uuid {
    let high = mix64(kid ^ ((col as u64) << 56));
    uuid::Uuid::from_u128((u128::from(high) << 64) | u128::from(kid))
}

fn decimal_key(kid: u64) -> i128 {
    i128::from(kid) * 10_007 - 5_000_000
}

fn date_key(kid: u64) -> i32 {
    (kid as i64 - 700_000) as i32
}

fn timestamp_key(kid: u64) -> i64 {
    (kid as i64 - 400_000) * 3_600_000_017
}

fn timestamptz_key(kid: u64) -> i64 {
    kid as i64 * 999_983 + 1_500_000_000_000_000
}

/// Families told apart by length; one starts with 0xff bytes (increment carries).
fn binary_key(kid: u64, col: usize) -> Vec<u8> {
    match (kid + col as u64) % 3 {
        0 => [&[0xffu8; 20][..], &kid.to_be_bytes()].concat(),
        1 => [&b"shared-binary-prefix/"[..], &kid.to_le_bytes()].concat(),
        _ => kid.to_be_bytes().to_vec(),
    }
}

fn fixed_key(kid: u64, col: usize) -> Vec<u8> {
    [&[0xab, 0xcd, col as u8, 0][..], &kid.to_be_bytes()].concat()
}

/// The key of a row, equal iff the key values are equal (null equals null).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct KeyCode {
    /// Bit j set: column j is null.
    nulls: u32,
    /// The kid when a non-null, non-boolean column exists, else the boolean value(s).
    value: u64,
}

struct Keys {
    types: Vec<KeyType>,
    seed: u64,
    null_keys: bool,
}

impl Keys {
    fn is_null(&self, kid: u64, col: usize) -> bool {
        self.null_keys
            && mix64(
                self.seed.rotate_left(17) ^ kid.wrapping_mul(0x9e37_79b9) ^ ((col as u64) << 48),
            )
            .is_multiple_of(16)
    }

    fn code(&self, kid: u64) -> KeyCode {
        let mut nulls = 0u32;
        let mut exact = false;
        let mut parity = false;
        for (j, t) in self.types.iter().enumerate() {
            if self.is_null(kid, j) {
                nulls |= 1 << j;
            } else if *t == KeyType::Boolean {
                parity = true;
            } else {
                exact = true;
            }
        }
        let value = if exact {
            kid
        } else if parity {
            kid & 1
        } else {
            0
        };
        KeyCode { nulls, value }
    }

    /// Column `col` of key `kid` as a datum (null keys give `None`).
    fn datum(&self, kid: u64, col: usize) -> Result<Option<Datum>> {
        if self.is_null(kid, col) {
            return Ok(None);
        }
        Ok(Some(match self.types[col] {
            KeyType::Int => Datum::int(int_key(kid)),
            KeyType::Long => Datum::long(long_key(kid)),
            KeyType::String => Datum::string(string_key(kid, col)),
            KeyType::Uuid => Datum::uuid(uuid_key(kid, col)),
            KeyType::Decimal => Datum::try_from_bytes(
                &decimal_key(kid).to_be_bytes(),
                KeyType::Decimal.iceberg_type(),
            )?,
            KeyType::Date => Datum::date(date_key(kid)),
            KeyType::Timestamp => Datum::timestamp_micros(timestamp_key(kid)),
            KeyType::Timestamptz => Datum::timestamptz_micros(timestamptz_key(kid)),
            KeyType::Binary => Datum::binary(binary_key(kid, col)),
            KeyType::Boolean => Datum::bool(kid & 1 == 1),
            KeyType::Fixed => Datum::fixed(fixed_key(kid, col)),
        }))
    }

    /// Column `col` for the given kids (`None`: a null row), as `data_type`.
    fn column(&self, col: usize, kids: &[u64], data_type: &DataType) -> Result<ArrayRef> {
        let vals = || {
            kids.iter()
                .map(move |&k| (!self.is_null(k, col)).then_some(k))
        };
        let array: ArrayRef = match self.types[col] {
            KeyType::Int => Arc::new(Int32Array::from_iter(vals().map(|k| k.map(int_key)))),
            KeyType::Long => Arc::new(Int64Array::from_iter(vals().map(|k| k.map(long_key)))),
            KeyType::String => Arc::new(StringArray::from_iter(
                vals().map(|k| k.map(|k| string_key(k, col))),
            )),
            KeyType::Uuid => Arc::new(FixedSizeBinaryArray::try_from_sparse_iter_with_size(
                vals().map(|k| k.map(|k| uuid_key(k, col).into_bytes())),
                16,
            )?),
            KeyType::Decimal => Arc::new(
                Decimal128Array::from_iter(vals().map(|k| k.map(decimal_key)))
                    .with_precision_and_scale(DECIMAL_PRECISION as u8, DECIMAL_SCALE as i8)?,
            ),
            KeyType::Date => Arc::new(Date32Array::from_iter(vals().map(|k| k.map(date_key)))),
            KeyType::Timestamp | KeyType::Timestamptz => {
                let f = if self.types[col] == KeyType::Timestamp {
                    timestamp_key
                } else {
                    timestamptz_key
                };
                let tz = match data_type {
                    DataType::Timestamp(TimeUnit::Microsecond, tz) => tz.clone(),
                    _ => None,
                };
                Arc::new(
                    TimestampMicrosecondArray::from_iter(vals().map(|k| k.map(f)))
                        .with_timezone_opt(tz),
                )
            }
            KeyType::Binary => Arc::new(LargeBinaryArray::from_iter(
                vals().map(|k| k.map(|k| binary_key(k, col))),
            )),
            KeyType::Boolean => Arc::new(BooleanArray::from_iter(
                vals().map(|k| k.map(|k| k & 1 == 1)),
            )),
            KeyType::Fixed => Arc::new(FixedSizeBinaryArray::try_from_sparse_iter_with_size(
                vals().map(|k| k.map(|k| fixed_key(k, col))),
                FIXED_LEN as i32,
            )?),
        };
        if array.data_type() != data_type {
            return Err(Error::InvalidInput(format!(
                "column k{col}: the table has type {data_type}, the generator writes {}",
                array.data_type()
            )));
        }
        Ok(array)
    }
}

// ---------------------------------------------------------------------------------
// The model.

/// A row's partition under the table's spec.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Part {
    Unpartitioned,
    Region(u8),
    Day(i32),
    Bucket(Option<i32>),
}

/// Where an equality delete applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Scope {
    /// Written with the unpartitioned spec: every partition.
    Global,
    Part(Part),
}

#[derive(Clone, Debug)]
struct Row {
    kid: u64,
    /// The commit that wrote it (its data file's sequence order).
    version: u32,
    region: u8,
    ts: i64,
    salt: u32,
    /// `None`: null (always for rows written before the column existed).
    tag: Option<u8>,
    part: Part,
}

impl Row {
    fn payload(&self) -> String {
        format!(
            "payload of key {} written by commit {} / {:08x}",
            self.kid, self.version, self.salt
        )
    }
}

/// One equality delete row.
#[derive(Clone, Debug, PartialEq, Eq)]
struct DeleteRow {
    kid: u64,
    /// `None`: `tag` is not an equality column; `Some(t)`: it is, with value `t`.
    tag: Option<Option<u8>>,
    scope: Scope,
}

/// What one commit writes.
#[derive(Debug, Default)]
struct CommitPlan {
    /// Row ids (into `Model::rows`) of the rows written.
    inserted: Vec<usize>,
    deletes: Vec<DeleteRow>,
}

struct Model {
    keys: Keys,
    partition: PartitionKind,
    global_deletes: bool,
    bucket: Option<BoxedTransformFunction>,
    /// Every row ever written; `live` indexes the live ones.
    rows: Vec<Row>,
    live: Vec<usize>,
    /// Position of a row in `live` (`usize::MAX` once deleted).
    live_pos: Vec<usize>,
    by_key: HashMap<KeyCode, Vec<usize>>,
    next_kid: u64,
    hot: Vec<u64>,
    dead_kids: Vec<u64>,
}

impl Model {
    fn new(spec: &WorkloadSpec) -> Result<Self> {
        let bucket = match spec.partition {
            PartitionKind::Bucket(n) => Some(create_transform_function(&Transform::Bucket(n))?),
            _ => None,
        };
        Ok(Self {
            keys: Keys {
                types: spec.keys.clone(),
                seed: spec.seed,
                null_keys: spec.null_keys,
            },
            partition: spec.partition,
            global_deletes: spec.global_deletes && spec.partition != PartitionKind::None,
            bucket,
            rows: Vec::new(),
            live: Vec::new(),
            live_pos: Vec::new(),
            by_key: HashMap::new(),
            next_kid: 0,
            hot: Vec::new(),
            dead_kids: Vec::new(),
        })
    }

    /// The model after `state.done` commits.
    fn replay(state: &GeneratorState) -> Result<Self> {
        let mut model = Self::new(&state.spec)?;
        for commit in 0..state.done {
            model.run(state, commit)?;
        }
        Ok(model)
    }

    fn part_of(&self, kid: u64, region: u8, ts: i64) -> Result<Part> {
        Ok(match self.partition {
            PartitionKind::None => Part::Unpartitioned,
            PartitionKind::Identity => Part::Region(region),
            PartitionKind::Day => Part::Day(ts.div_euclid(DAY_MICROS) as i32),
            PartitionKind::Bucket(_) => {
                let bucket = match (&self.bucket, self.keys.datum(kid, 0)?) {
                    (Some(f), Some(datum)) => match f.transform_literal(&datum)? {
                        Some(d) => match d.literal() {
                            PrimitiveLiteral::Int(b) => Some(*b),
                            other => {
                                return Err(Error::InvalidInput(format!(
                                    "bucket transform gave {other:?}"
                                )));
                            }
                        },
                        None => None,
                    },
                    _ => None,
                };
                Part::Bucket(bucket)
            }
        })
    }

    fn add_row(&mut self, row: Row) -> usize {
        let id = self.rows.len();
        let code = self.keys.code(row.kid);
        self.rows.push(row);
        self.live_pos.push(self.live.len());
        self.live.push(id);
        self.by_key.entry(code).or_default().push(id);
        id
    }

    fn kill(&mut self, id: usize) {
        let pos = self.live_pos[id];
        if pos == usize::MAX {
            return;
        }
        self.live.swap_remove(pos);
        if let Some(&moved) = self.live.get(pos) {
            self.live_pos[moved] = pos;
        }
        self.live_pos[id] = usize::MAX;
        let code = self.keys.code(self.rows[id].kid);
        if let Some(ids) = self.by_key.get_mut(&code) {
            ids.retain(|&i| i != id);
            if ids.is_empty() {
                self.by_key.remove(&code);
            }
        }
    }

    /// Applies an equality delete of commit `version` by the spec's rule: rows of older
    /// commits with equal key (and tag, when it is an equality column) in its scope.
    fn apply_delete(&mut self, d: &DeleteRow, version: u32) {
        let Some(ids) = self.by_key.get(&self.keys.code(d.kid)) else {
            return;
        };
        let victims: Vec<usize> = ids
            .iter()
            .copied()
            .filter(|&id| {
                let r = &self.rows[id];
                r.version < version
                    && d.tag.is_none_or(|t| t == r.tag)
                    && match d.scope {
                        Scope::Global => true,
                        Scope::Part(p) => p == r.part,
                    }
            })
            .collect();
        for id in victims {
            self.kill(id);
        }
    }

    fn is_live(&self, kid: u64) -> bool {
        self.by_key.contains_key(&self.keys.code(kid))
    }

    fn random_ts(rng: &mut Rng) -> i64 {
        TS_BASE + rng.below((TS_DAYS * DAY_MICROS) as u64) as i64
    }

    fn new_row(
        &self,
        kid: u64,
        version: u32,
        region: u8,
        ts: i64,
        rng: &mut Rng,
        tagged: bool,
    ) -> Result<Row> {
        let salt = rng.next() as u32;
        let tag = if tagged && !rng.percent(10) {
            Some(rng.below(TAGS.len() as u64) as u8)
        } else {
            None
        };
        Ok(Row {
            kid,
            version,
            region,
            ts,
            salt,
            tag,
            part: self.part_of(kid, region, ts)?,
        })
    }

    /// Plans commit `commit` and applies it to the model.
    fn run(&mut self, state: &GeneratorState, commit: u32) -> Result<CommitPlan> {
        let mut rng = Rng::for_commit(state.spec.seed, commit);
        if commit == 0 {
            self.initial_load(&state.spec, &mut rng)
        } else {
            self.cdc_commit(&state.spec, commit, state.tagged(commit), &mut rng)
        }
    }

    fn initial_load(&mut self, spec: &WorkloadSpec, rng: &mut Rng) -> Result<CommitPlan> {
        let mut plan = CommitPlan::default();
        for _ in 0..spec.rows {
            let kid = self.next_kid;
            self.next_kid += 1;
            let region = rng.below(REGIONS.len() as u64) as u8;
            let ts = Self::random_ts(rng);
            let row = self.new_row(kid, 0, region, ts, rng, false)?;
            plan.inserted.push(self.add_row(row));
        }
        if spec.rows > 0 {
            for i in 0..8u64 {
                let kid = i * spec.rows / 8;
                if !self.hot.contains(&kid) {
                    self.hot.push(kid);
                }
            }
        }
        Ok(plan)
    }

    fn cdc_commit(
        &mut self,
        spec: &WorkloadSpec,
        commit: u32,
        tagged: bool,
        rng: &mut Rng,
    ) -> Result<CommitPlan> {
        let mut plan = CommitPlan::default();
        // Keys this commit already changed: a key changes at most once per commit, so a
        // delete never targets a row written by the same commit.
        let mut touched: HashSet<KeyCode> = HashSet::new();
        for _ in 0..spec.changes_per_commit {
            let roll = rng.below(100);
            if roll < 35 || self.live.is_empty() {
                self.op_insert(commit, tagged, rng, &mut touched, &mut plan)?;
            } else if roll < 97 {
                let update = roll < 80;
                self.op_change(commit, tagged, update, rng, &mut touched, &mut plan)?;
            } else {
                self.op_delete_absent(commit, tagged, rng, &mut touched, &mut plan)?;
            }
        }
        Ok(plan)
    }

    fn op_insert(
        &mut self,
        commit: u32,
        tagged: bool,
        rng: &mut Rng,
        touched: &mut HashSet<KeyCode>,
        plan: &mut CommitPlan,
    ) -> Result<()> {
        // Now and then a deleted key comes back (hot keys first).
        let mut kid = None;
        if rng.percent(10) {
            kid = self
                .hot
                .iter()
                .copied()
                .find(|&k| !self.is_live(k) && !touched.contains(&self.keys.code(k)));
            if kid.is_none() && !self.dead_kids.is_empty() {
                let i = rng.below(self.dead_kids.len() as u64) as usize;
                let k = self.dead_kids.swap_remove(i);
                if !self.is_live(k) && !touched.contains(&self.keys.code(k)) {
                    kid = Some(k);
                }
            }
        }
        let kid = match kid {
            Some(k) => k,
            None => {
                let k = self.next_kid;
                self.next_kid += 1;
                if self.hot.len() < 8 && rng.percent(5) {
                    self.hot.push(k);
                }
                k
            }
        };
        if !touched.insert(self.keys.code(kid)) {
            return Ok(());
        }
        let region = rng.below(REGIONS.len() as u64) as u8;
        let ts = Self::random_ts(rng);
        let row = self.new_row(kid, commit, region, ts, rng, tagged)?;
        plan.inserted.push(self.add_row(row));
        Ok(())
    }

    /// An update (delete + new row, like a Flink upsert) or a delete of a live key.
    fn op_change(
        &mut self,
        commit: u32,
        tagged: bool,
        update: bool,
        rng: &mut Rng,
        touched: &mut HashSet<KeyCode>,
        plan: &mut CommitPlan,
    ) -> Result<()> {
        let hot_pick = if update && rng.percent(30) {
            let candidates: Vec<u64> = self
                .hot
                .iter()
                .copied()
                .filter(|&k| self.is_live(k) && !touched.contains(&self.keys.code(k)))
                .collect();
            (!candidates.is_empty())
                .then(|| candidates[rng.below(candidates.len() as u64) as usize])
        } else {
            None
        };
        let kid = match hot_pick {
            Some(k) => k,
            None => self.rows[self.live[rng.below(self.live.len() as u64) as usize]].kid,
        };
        let code = self.keys.code(kid);
        if !touched.insert(code) {
            return Ok(());
        }
        let victims: Vec<usize> = self.by_key.get(&code).cloned().unwrap_or_default();
        let Some(&first) = victims.first() else {
            return Ok(());
        };
        let global = self.global_deletes && rng.percent(30);
        let mut deletes: Vec<DeleteRow> = Vec::new();
        for &id in &victims {
            let r = &self.rows[id];
            let d = DeleteRow {
                kid: r.kid,
                tag: tagged.then_some(r.tag),
                scope: if global {
                    Scope::Global
                } else {
                    Scope::Part(r.part)
                },
            };
            // Rows of one key share key values, so one delete row per (tag, scope).
            if !deletes.iter().any(|e| e.tag == d.tag && e.scope == d.scope) {
                deletes.push(d);
            }
        }
        for d in &deletes {
            self.apply_delete(d, commit);
        }
        plan.deletes.extend(deletes);

        let old = self.rows[first].clone();
        if update {
            let region = if rng.percent(80) {
                old.region
            } else {
                rng.below(REGIONS.len() as u64) as u8
            };
            let ts = if rng.percent(70) {
                old.ts + rng.below(6 * 3_600_000_000) as i64
            } else {
                Self::random_ts(rng)
            };
            let row = self.new_row(old.kid, commit, region, ts, rng, tagged)?;
            plan.inserted.push(self.add_row(row));
        } else {
            self.dead_kids.push(old.kid);
        }
        Ok(())
    }

    /// A delete of a key that has no live row (CDC streams carry those too).
    fn op_delete_absent(
        &mut self,
        commit: u32,
        tagged: bool,
        rng: &mut Rng,
        touched: &mut HashSet<KeyCode>,
        plan: &mut CommitPlan,
    ) -> Result<()> {
        let kid = self.next_kid + ABSENT_KID_OFFSET + rng.below(ABSENT_KID_OFFSET);
        if !touched.insert(self.keys.code(kid)) {
            return Ok(());
        }
        let scope = if self.global_deletes && rng.percent(30) {
            Scope::Global
        } else {
            let region = rng.below(REGIONS.len() as u64) as u8;
            Scope::Part(self.part_of(kid, region, Self::random_ts(rng))?)
        };
        let d = DeleteRow {
            kid,
            tag: tagged.then_some(None),
            scope,
        };
        // With null keys the "absent" key may be the live null key: apply by the rule.
        self.apply_delete(&d, commit);
        plan.deletes.push(d);
        Ok(())
    }

    /// Builds a batch in `schema` (fields found by name) from rows.
    fn rows_batch(&self, schema: &Schema, rows: &[&Row]) -> Result<RecordBatch> {
        let arrow = Arc::new(iceberg::arrow::schema_to_arrow_schema(schema)?);
        let kids: Vec<u64> = rows.iter().map(|r| r.kid).collect();
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(arrow.fields().len());
        for field in arrow.fields() {
            let column: ArrayRef = match field.name().as_str() {
                "region" => Arc::new(StringArray::from_iter_values(
                    rows.iter().map(|r| REGIONS[usize::from(r.region)]),
                )),
                "ts" => Arc::new(TimestampMicrosecondArray::from_iter_values(
                    rows.iter().map(|r| r.ts),
                )),
                "payload" => Arc::new(StringArray::from_iter_values(
                    rows.iter().map(|r| r.payload()),
                )),
                "version" => Arc::new(Int64Array::from_iter_values(
                    rows.iter().map(|r| i64::from(r.version)),
                )),
                "tag" => Arc::new(StringArray::from_iter(
                    rows.iter().map(|r| r.tag.map(|t| TAGS[usize::from(t)])),
                )),
                name => self.key_column(name, &kids, field.data_type())?,
            };
            columns.push(column);
        }
        Ok(RecordBatch::try_new(arrow, columns)?)
    }

    /// Builds an equality delete batch in `schema` (key columns, maybe `tag`).
    fn deletes_batch(&self, schema: &Schema, deletes: &[&DeleteRow]) -> Result<RecordBatch> {
        let arrow = Arc::new(iceberg::arrow::schema_to_arrow_schema(schema)?);
        let kids: Vec<u64> = deletes.iter().map(|d| d.kid).collect();
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(arrow.fields().len());
        for field in arrow.fields() {
            let column: ArrayRef = match field.name().as_str() {
                "tag" => Arc::new(StringArray::from_iter(
                    deletes
                        .iter()
                        .map(|d| d.tag.flatten().map(|t| TAGS[usize::from(t)])),
                )),
                name => self.key_column(name, &kids, field.data_type())?,
            };
            columns.push(column);
        }
        Ok(RecordBatch::try_new(arrow, columns)?)
    }

    fn key_column(&self, name: &str, kids: &[u64], data_type: &DataType) -> Result<ArrayRef> {
        let col = name
            .strip_prefix('k')
            .and_then(|n| n.parse::<usize>().ok())
            .filter(|&j| j < self.keys.types.len())
            .ok_or_else(|| {
                Error::InvalidInput(format!(
                    "the table has a column '{name}' that the generator does not know"
                ))
            })?;
        self.keys.column(col, kids, data_type)
    }

    /// The live rows in canonical form in `schema`, sorted.
    fn canonical_live_rows(&self, schema: &Schema) -> Result<Vec<String>> {
        let mut out = Vec::with_capacity(self.live.len());
        let mut ids = self.live.clone();
        ids.sort_unstable();
        for chunk in ids.chunks(8192) {
            let rows: Vec<&Row> = chunk.iter().map(|&id| &self.rows[id]).collect();
            let batch = self.rows_batch(schema, &rows)?;
            out.extend(canonical_rows_for_schema(schema, &[batch])?);
        }
        out.sort_unstable();
        Ok(out)
    }
}

// ---------------------------------------------------------------------------------
// Tables, files and commits.

fn initial_schema(keys: &[KeyType]) -> Result<Schema> {
    let mut fields = Vec::new();
    let mut id = 0;
    let mut next = || {
        id += 1;
        id
    };
    for (j, t) in keys.iter().enumerate() {
        fields.push(Arc::new(NestedField::optional(
            next(),
            format!("k{j}"),
            Type::Primitive(t.iceberg_type()),
        )));
    }
    fields.push(Arc::new(NestedField::optional(
        next(),
        "region",
        Type::Primitive(PrimitiveType::String),
    )));
    fields.push(Arc::new(NestedField::optional(
        next(),
        "ts",
        Type::Primitive(PrimitiveType::Timestamp),
    )));
    fields.push(Arc::new(NestedField::optional(
        next(),
        "payload",
        Type::Primitive(PrimitiveType::String),
    )));
    fields.push(Arc::new(NestedField::required(
        next(),
        "version",
        Type::Primitive(PrimitiveType::Long),
    )));
    Ok(Schema::builder()
        .with_schema_id(0)
        .with_fields(fields)
        .build()?)
}

fn schema_with_tag(schema: &Schema, tag_id: i32) -> Result<Schema> {
    let mut fields = schema.as_struct().fields().to_vec();
    fields.push(Arc::new(NestedField::optional(
        tag_id,
        "tag",
        Type::Primitive(PrimitiveType::String),
    )));
    Ok(Schema::builder()
        .with_schema_id(schema.schema_id() + 1)
        .with_fields(fields)
        .build()?)
}

fn field_id(schema: &Schema, name: &str) -> Result<i32> {
    schema
        .field_by_name(name)
        .map(|f| f.id)
        .ok_or_else(|| Error::InvalidInput(format!("the generated table has no column '{name}'")))
}

fn unbound_partition(kind: PartitionKind, schema: &Schema) -> Result<UnboundPartitionSpec> {
    let builder = UnboundPartitionSpec::builder();
    Ok(match kind {
        PartitionKind::None => builder.build(),
        PartitionKind::Identity => builder
            .add_partition_field(field_id(schema, "region")?, "region", Transform::Identity)?
            .build(),
        PartitionKind::Bucket(n) => builder
            .add_partition_field(field_id(schema, "k0")?, "k0_bucket", Transform::Bucket(n))?
            .build(),
        PartitionKind::Day => builder
            .add_partition_field(field_id(schema, "ts")?, "ts_day", Transform::Day)?
            .build(),
    })
}

async fn create_table(
    catalog: &dyn Catalog,
    name: &TableName,
    state: &GeneratorState,
) -> Result<LoadedTable> {
    let schema = initial_schema(&state.spec.keys)?;
    let partition = unbound_partition(state.spec.partition, &schema)?;
    let location = catalog.default_table_location(name);
    let creation = TableCreation::builder()
        .name(name.name.clone())
        .location(location.clone())
        .schema(schema)
        .partition_spec(partition)
        .format_version(FormatVersion::V3)
        .properties([(STATE_PROPERTY.to_string(), serde_json::to_string(state)?)])
        .build();
    let mut builder = TableMetadataBuilder::from_table_creation(creation)?;
    if state.spec.global_deletes && state.spec.partition != PartitionKind::None {
        // Global deletes need an unpartitioned spec; the partitioned one stays default.
        builder = builder.add_partition_spec(UnboundPartitionSpec::builder().build())?;
    }
    let metadata = builder.build()?.metadata;
    let location = MetadataLocation::new_with_metadata(&location, &metadata);
    metadata.write_to(catalog.file_io(), &location).await?;
    if let Err(e) = catalog.create_table(name, &location.to_string()).await {
        delete_files(catalog.file_io(), &[location.to_string()]).await;
        return Err(e);
    }
    LoadedTable::load(catalog, name).await
}

/// Writes `metadata` as the table's next version and swaps the pointer to it.
async fn commit_metadata(
    catalog: &dyn Catalog,
    table: &LoadedTable,
    metadata: TableMetadata,
) -> Result<LoadedTable> {
    let current = MetadataLocation::from_str(&table.pointer.metadata_location).map_err(|e| {
        Error::file(
            &table.pointer.metadata_location,
            "not a versioned metadata location",
            e,
        )
    })?;
    let next = current.with_next_version().with_new_metadata(&metadata);
    metadata.write_to(&table.file_io, &next).await?;
    let next = next.to_string();
    if let Err(e) = catalog
        .swap_pointer(&table.name, &table.pointer, &next)
        .await
    {
        match crate::commit::commit_outcome(catalog, table, &next, None, &e).await {
            crate::commit::CommitOutcome::Landed => {}
            crate::commit::CommitOutcome::Absent => {
                delete_files(&table.file_io, &[next]).await;
                return Err(crate::commit::absent(e));
            }
            crate::commit::CommitOutcome::Unknown(_) => return Err(e),
        }
    }
    LoadedTable::load(catalog, &table.name).await
}

/// Adds the optional `tag` column as its own metadata change.
async fn add_tag_column(catalog: &dyn Catalog, table: &LoadedTable) -> Result<LoadedTable> {
    let schema = schema_with_tag(
        table.metadata.current_schema(),
        table.metadata.last_column_id() + 1,
    )?;
    let metadata = table
        .metadata
        .as_ref()
        .clone()
        .into_builder(Some(table.pointer.metadata_location.clone()))
        .add_current_schema(schema)?
        .build()?
        .metadata;
    commit_metadata(catalog, table, metadata).await
}

/// The partition tuple of `part`.
fn partition_value(part: Part) -> Struct {
    match part {
        Part::Unpartitioned => Struct::empty(),
        Part::Region(r) => Struct::from_iter([Some(Literal::string(REGIONS[usize::from(r)]))]),
        Part::Day(d) => Struct::from_iter([Some(Literal::date(d))]),
        Part::Bucket(b) => Struct::from_iter([b.map(Literal::int)]),
    }
}

/// The directory of a partition under `data/` (Hive style, for people browsing files).
fn partition_dir(part: Part) -> Option<String> {
    match part {
        Part::Unpartitioned => None,
        Part::Region(r) => Some(format!("region={}", REGIONS[usize::from(r)])),
        Part::Day(d) => Some(format!(
            "ts_day={}",
            chrono::DateTime::from_timestamp(i64::from(d) * 86_400, 0)
                .map(|t| t.format("%Y-%m-%d").to_string())
                .unwrap_or_else(|| d.to_string())
        )),
        Part::Bucket(Some(b)) => Some(format!("k0_bucket={b}")),
        Part::Bucket(None) => Some("k0_bucket=null".to_string()),
    }
}

/// Java keeps at most 16 characters of a string bound: the lower bound is the prefix,
/// the upper bound the prefix with its last character incremented (the character
/// before it when that one is U+10FFFF, and so on; no upper bound if none can be).
fn truncate_string_bound(s: &str, upper: bool) -> Option<String> {
    if s.chars().count() <= BOUND_TRUNCATE_LEN {
        return Some(s.to_string());
    }
    let mut chars: Vec<char> = s.chars().take(BOUND_TRUNCATE_LEN).collect();
    if !upper {
        return Some(chars.into_iter().collect());
    }
    while let Some(last) = chars.pop() {
        let next = match last as u32 + 1 {
            // Skip the surrogate range, which holds no characters.
            0xd800 => Some('\u{e000}'),
            n => char::from_u32(n),
        };
        if let Some(c) = next {
            chars.push(c);
            return Some(chars.into_iter().collect());
        }
    }
    None
}

/// The byte version of [`truncate_string_bound`] for binary bounds.
fn truncate_binary_bound(b: &[u8], upper: bool) -> Option<Vec<u8>> {
    if b.len() <= BOUND_TRUNCATE_LEN {
        return Some(b.to_vec());
    }
    let mut bytes = b[..BOUND_TRUNCATE_LEN].to_vec();
    if !upper {
        return Some(bytes);
    }
    while let Some(last) = bytes.pop() {
        if last < 0xff {
            bytes.push(last + 1);
            return Some(bytes);
        }
    }
    None
}

/// Truncates string and binary bounds like Java writers do (iceberg-rust keeps them whole).
fn truncate_bounds(bounds: &HashMap<i32, Datum>, upper: bool) -> HashMap<i32, Datum> {
    bounds
        .iter()
        .filter_map(|(id, datum)| {
            let truncated = match (datum.data_type(), datum.literal()) {
                (PrimitiveType::String, PrimitiveLiteral::String(s)) => {
                    truncate_string_bound(s, upper).map(Datum::string)
                }
                (PrimitiveType::Binary, PrimitiveLiteral::Binary(b)) => {
                    truncate_binary_bound(b, upper).map(Datum::binary)
                }
                _ => Some(datum.clone()),
            };
            truncated.map(|d| (*id, d))
        })
        .collect()
}

/// What a file to write is.
struct FileSpec {
    content: DataContentType,
    equality_ids: Option<Vec<i32>>,
    spec_id: i32,
    partition: Struct,
    dir: Option<String>,
}

async fn write_file(
    file_io: &FileIO,
    table_location: &str,
    props: &WriterProperties,
    schema: &SchemaRef,
    batch: &RecordBatch,
    spec: FileSpec,
    written: &mut Vec<String>,
) -> Result<DataFile> {
    let stem = match spec.content {
        DataContentType::EqualityDeletes => "eqdv-gen-eq-delete",
        _ => "eqdv-gen-data",
    };
    let path = new_data_file(table_location, spec.dir.as_deref(), stem, "parquet");
    // Tracked before the first byte, so a failure anywhere can remove it.
    written.push(path.clone());
    let output = file_io.new_output(&path)?;
    let mut writer = ParquetWriterBuilder::new(props.clone(), schema.clone())
        .build(output)
        .await?;
    writer.write(batch).await?;
    let mut builder: DataFileBuilder =
        writer.close().await?.pop().ok_or_else(|| {
            Error::file(&path, "the Parquet writer produced no file", "empty batch")
        })?;
    builder
        .content(spec.content)
        .partition(spec.partition)
        .partition_spec_id(spec.spec_id)
        .equality_ids(spec.equality_ids);
    let file = builder
        .build()
        .map_err(|e| Error::file(&path, "cannot describe the written file", e))?;
    builder
        .lower_bounds(truncate_bounds(file.lower_bounds(), false))
        .upper_bounds(truncate_bounds(file.upper_bounds(), true));
    builder
        .build()
        .map_err(|e| Error::file(&path, "cannot describe the written file", e))
}

struct Landed {
    table: LoadedTable,
    data_files: u64,
    delete_files: u64,
}

/// Writes the files of `plan` and commits them as one snapshot carrying `next` as the
/// generator state. `None` when the plan is empty (no snapshot).
async fn commit_plan(
    catalog: &dyn Catalog,
    mut table: LoadedTable,
    model: &Model,
    plan: &CommitPlan,
    commit: u32,
    next: &GeneratorState,
) -> Result<Option<Landed>> {
    if plan.inserted.is_empty() && plan.deletes.is_empty() {
        return Ok(None);
    }
    let mut written: Vec<String> = Vec::new();
    let result = write_plan(&table, model, plan, next, &mut written).await;
    let mut changes = match result {
        Ok(changes) => changes,
        Err(e) => {
            delete_files(&table.file_io, &written).await;
            return Err(e);
        }
    };
    changes
        .extra_summary
        .insert(COMMIT_SUMMARY_PROPERTY.to_string(), commit.to_string());
    let state_json = serde_json::to_string(next)?;

    let mut last = String::new();
    for attempt in 0..COMMIT_ATTEMPTS {
        if attempt > 0 {
            table = LoadedTable::load(catalog, &table.name).await?;
            // Another generator run may have committed this commit meanwhile.
            let done = state_of(&table.metadata)?.map(|s| s.done);
            if done != Some(commit) {
                delete_files(&table.file_io, &written).await;
                return Err(Error::CommitConflict {
                    table: table.name.to_string(),
                    message: format!(
                        "generator state moved to {done:?} commits while committing commit {commit}"
                    ),
                });
            }
        }
        let base = TableFiles::read(&table, table.head("main")?.as_ref()).await?;
        let prepared = build_snapshot(&table, "main", &base, &changes).await?;
        let metadata = prepared
            .metadata
            .clone()
            .into_builder(None)
            .set_properties(HashMap::from([(
                STATE_PROPERTY.to_string(),
                state_json.clone(),
            )]))?
            .build()?
            .metadata;
        let prepared = PreparedSnapshot {
            metadata,
            ..prepared
        };
        match publish(catalog, &table, &prepared).await {
            Ok(_) => {
                let table = LoadedTable::load(catalog, &table.name).await?;
                return Ok(Some(Landed {
                    table,
                    data_files: changes.added_data_files.len() as u64,
                    delete_files: changes.added_delete_files.len() as u64,
                }));
            }
            Err(e) if e.is_commit_conflict() => {
                delete_files(&table.file_io, &prepared.written_files).await;
                last = e.to_string();
            }
            Err(e @ Error::CommitStateUnknown { .. }) => return Err(e),
            Err(e) => {
                delete_files(&table.file_io, &prepared.written_files).await;
                delete_files(&table.file_io, &written).await;
                return Err(e);
            }
        }
    }
    delete_files(&table.file_io, &written).await;
    Err(Error::RetriesExhausted {
        table: table.name.to_string(),
        attempts: COMMIT_ATTEMPTS,
        last,
    })
}

/// Writes the data and equality delete files of `plan` (paths go to `written` as they
/// are created, so a failure can remove them).
async fn write_plan(
    table: &LoadedTable,
    model: &Model,
    plan: &CommitPlan,
    state: &GeneratorState,
    written: &mut Vec<String>,
) -> Result<SnapshotChanges> {
    let metadata = table.metadata.as_ref();
    let schema = metadata.current_schema().clone();
    let spec = &state.spec;
    let mut props = WriterProperties::builder()
        // Exact Parquet statistics; the bounds are then truncated like Java's.
        .set_statistics_truncate_length(None)
        .set_max_row_group_row_count(Some(spec.rows_per_row_group as usize));
    if spec.bloom_filters {
        for j in 0..spec.keys.len() {
            let column = parquet::schema::types::ColumnPath::from(format!("k{j}"));
            props = props
                .set_column_bloom_filter_enabled(column.clone(), true)
                .set_column_bloom_filter_fpp(column.clone(), 0.01)
                .set_column_bloom_filter_ndv(column, u64::from(spec.rows_per_row_group));
        }
    }
    let props = props.build();
    let location = table.location().to_string();
    let default_spec_id = metadata.default_partition_spec_id();
    let global_spec_id = metadata
        .partition_specs_iter()
        .find(|s| s.is_unpartitioned())
        .map(|s| s.spec_id())
        .unwrap_or(default_spec_id);
    let per_file = spec.rows_per_file as usize;

    let mut data_by_part: BTreeMap<Part, Vec<&Row>> = BTreeMap::new();
    for &id in &plan.inserted {
        let row = &model.rows[id];
        data_by_part.entry(row.part).or_default().push(row);
    }
    let mut deletes_by_scope: BTreeMap<Scope, Vec<&DeleteRow>> = BTreeMap::new();
    for d in &plan.deletes {
        deletes_by_scope.entry(d.scope).or_default().push(d);
    }

    let operation = match (data_by_part.is_empty(), deletes_by_scope.is_empty()) {
        (false, true) => Operation::Append,
        (true, false) => Operation::Delete,
        _ => Operation::Overwrite,
    };
    let mut changes = SnapshotChanges::new(operation);

    for (part, rows) in &data_by_part {
        for chunk in rows.chunks(per_file) {
            let batch = model.rows_batch(&schema, chunk)?;
            let file = write_file(
                &table.file_io,
                &location,
                &props,
                &schema,
                &batch,
                FileSpec {
                    content: DataContentType::Data,
                    equality_ids: None,
                    spec_id: default_spec_id,
                    partition: partition_value(*part),
                    dir: partition_dir(*part),
                },
                written,
            )
            .await?;
            changes.added_data_files.push(AddedFile {
                spec_id: default_spec_id,
                file,
            });
        }
    }

    if !deletes_by_scope.is_empty() {
        // The equality columns: the keys, plus `tag` once it exists.
        let mut eq_fields = Vec::new();
        for j in 0..spec.keys.len() {
            let name = format!("k{j}");
            eq_fields.push(schema.field_by_name(&name).cloned().ok_or_else(|| {
                Error::InvalidInput(format!("the generated table has no column '{name}'"))
            })?);
        }
        let tagged = plan.deletes.iter().any(|d| d.tag.is_some());
        if tagged {
            eq_fields.push(schema.field_by_name("tag").cloned().ok_or_else(|| {
                Error::InvalidInput("the generated table has no column 'tag'".into())
            })?);
        }
        let equality_ids: Vec<i32> = eq_fields.iter().map(|f| f.id).collect();
        let eq_schema: SchemaRef = Arc::new(Schema::builder().with_fields(eq_fields).build()?);
        for (scope, deletes) in &deletes_by_scope {
            let (spec_id, partition, dir) = match scope {
                Scope::Global => (
                    global_spec_id,
                    Struct::empty(),
                    Some("global-deletes".to_string()),
                ),
                Scope::Part(p) => (default_spec_id, partition_value(*p), partition_dir(*p)),
            };
            for chunk in deletes.chunks(per_file) {
                let batch = model.deletes_batch(&eq_schema, chunk)?;
                let file = write_file(
                    &table.file_io,
                    &location,
                    &props,
                    &eq_schema,
                    &batch,
                    FileSpec {
                        content: DataContentType::EqualityDeletes,
                        equality_ids: Some(equality_ids.clone()),
                        spec_id,
                        partition: partition.clone(),
                        dir: dir.clone(),
                    },
                    written,
                )
                .await?;
                changes.added_delete_files.push(AddedFile { spec_id, file });
            }
        }
    }
    Ok(changes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_specs() {
        assert_eq!(
            parse_key_types("int, String,uuid").unwrap(),
            vec![KeyType::Int, KeyType::String, KeyType::Uuid]
        );
        assert!(parse_key_types("int,float").is_err());
        assert_eq!(
            "bucket:4".parse::<PartitionKind>().unwrap(),
            PartitionKind::Bucket(4)
        );
        assert_eq!("Day".parse::<PartitionKind>().unwrap(), PartitionKind::Day);
        assert!("bucket:0".parse::<PartitionKind>().is_err());
        assert!("hour".parse::<PartitionKind>().is_err());
        let spec = WorkloadSpec {
            partition: PartitionKind::Bucket(8),
            keys: vec![KeyType::Int, KeyType::Fixed],
            ..Default::default()
        };
        let json = serde_json::to_string(&spec).unwrap();
        assert!(json.contains(r#""partition":"bucket:8""#), "{json}");
        assert!(json.contains(r#""keys":["int","fixed"]"#), "{json}");
        assert_eq!(serde_json::from_str::<WorkloadSpec>(&json).unwrap(), spec);
        let partial: WorkloadSpec = serde_json::from_str(r#"{"seed": 7}"#).unwrap();
        assert_eq!(partial.seed, 7);
        assert_eq!(partial.rows, WorkloadSpec::default().rows);
    }

    #[test]
    fn truncates_bounds_like_java() {
        let long = "tenant/eu-central-1/customer/0000000001";
        assert_eq!(
            truncate_string_bound(long, false).unwrap(),
            "tenant/eu-centra"
        );
        assert_eq!(
            truncate_string_bound(long, true).unwrap(),
            "tenant/eu-centrb"
        );
        assert_eq!(truncate_string_bound("short", true).unwrap(), "short");
        // 16 characters, not 16 bytes.
        let jp = "日本語のキー/顧客番号/東京都/123";
        assert_eq!(
            truncate_string_bound(jp, false).unwrap(),
            "日本語のキー/顧客番号/東京都/"
        );
        assert_eq!(
            truncate_string_bound(jp, true).unwrap(),
            "日本語のキー/顧客番号/東京都0"
        );
        let max = format!("a{}", "\u{10FFFF}".repeat(20));
        assert_eq!(truncate_string_bound(&max, true).unwrap(), "b");
        assert_eq!(truncate_string_bound(&"\u{10FFFF}".repeat(17), true), None);
        let before_surrogates = format!("{}x", "\u{D7FF}".repeat(17));
        assert_eq!(
            truncate_string_bound(&before_surrogates, true).unwrap(),
            format!("{}\u{E000}", "\u{D7FF}".repeat(15))
        );
        let bin = [&[0x01u8, 0xff][..], &[0xffu8; 20][..]].concat();
        assert_eq!(truncate_binary_bound(&bin, true).unwrap(), vec![0x02]);
        assert_eq!(
            truncate_binary_bound(&bin, false).unwrap(),
            bin[..16].to_vec()
        );
        assert_eq!(truncate_binary_bound(&[0xff; 17], true), None);
    }

    #[test]
    fn key_codes_match_key_values() {
        let keys = Keys {
            types: vec![KeyType::String, KeyType::Boolean],
            seed: 3,
            null_keys: true,
        };
        let mut seen: HashMap<KeyCode, String> = HashMap::new();
        for kid in 0..5_000u64 {
            let values = format!(
                "{:?}|{:?}",
                keys.datum(kid, 0).unwrap(),
                keys.datum(kid, 1).unwrap()
            );
            let code = keys.code(kid);
            if let Some(previous) = seen.insert(code, values.clone()) {
                assert_eq!(previous, values, "kid {kid}");
            }
        }
        // Distinct values must give distinct codes too.
        let distinct: HashSet<&String> = seen.values().collect();
        assert_eq!(distinct.len(), seen.len());
    }

    #[test]
    fn replay_is_deterministic() {
        let spec = WorkloadSpec {
            rows: 300,
            commits: 4,
            null_keys: true,
            partition: PartitionKind::Identity,
            global_deletes: true,
            add_column: true,
            changes_per_commit: 60,
            ..Default::default()
        };
        let mut state = GeneratorState::new(&spec);
        state.done = 5;
        let a = expected_rows(&state).unwrap();
        let b = expected_rows(&state).unwrap();
        assert_eq!(a, b);
        assert!(!a.is_empty());
        state.spec.seed += 1;
        assert_ne!(expected_rows(&state).unwrap(), a);
    }
}
