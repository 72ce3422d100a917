//! The bulk table builder: base tables of N data files x M rows written straight to
//! Parquet (no per-row model, so 200M rows fit), and scenario tables that append the
//! same data files and add equality deletes for a chosen set of keys.
//!
//! Row `i` (0-based, in ingestion order) has key `k = key(i)`, `v = i` (unique, so a
//! reader's `count` and `sum(v)` identify its rows) and a short `payload`. Data files
//! hold ingestion batches: unpartitioned, batch `b` is rows `[b*M, (b+1)*M)` in one
//! file; with `bucket[B](k)`, a batch of `B*M` rows is split into one file per bucket.
//! So file bounds on `k` are tight, as in tables whose keys grow with time.

use eqdv_workload::rng::{Rng, mix64};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result, anyhow, bail};
use arrow_array::{ArrayRef, Int32Array, Int64Array, RecordBatch, StringArray};
use eqdv::catalog::{Catalog, SqliteCatalog, TableName};
use eqdv::commit::publish;
use eqdv::snapshot::{AddedFile, SnapshotChanges, build_snapshot};
use eqdv::table::{LoadedTable, TableFiles};
use futures::StreamExt;
use iceberg::spec::{
    DataContentType, DataFile, FormatVersion, Literal, NestedField, Operation, PrimitiveType,
    Schema, SchemaRef, Struct, TableMetadataBuilder, Transform, Type, UnboundPartitionSpec,
};
use iceberg::transform::create_transform_function;
use iceberg::writer::file_writer::{FileWriter, FileWriterBuilder, ParquetWriterBuilder};
use iceberg::{MetadataLocation, TableCreation};
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;
use serde::{Deserialize, Serialize};

/// Rows per Arrow batch handed to the Parquet writer.
const WRITE_CHUNK: u64 = 131_072;
/// Most rows per equality delete file.
const DELETE_FILE_ROWS: usize = 1_000_000;
pub const NAMESPACE: &str = "bench";

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum KeyKind {
    Long,
    String,
}

/// Where the deleted keys lie.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Dist {
    /// Clustered: drawn from one window of `2n` consecutive rows (recent rows updated).
    Hot,
    /// Uniform over all rows.
    Scattered,
    /// 90% hot, 10% scattered.
    Mixed,
}

/// The shape of a base table; its JSON is the cache key of the built data.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Layout {
    pub files: u64,
    pub rows_per_file: u64,
    pub key: KeyKind,
    /// `bucket[buckets](k)`; 0 = unpartitioned.
    pub buckets: u32,
    pub seed: u64,
}

impl Layout {
    pub fn total_rows(&self) -> u64 {
        self.files * self.rows_per_file
    }

    fn batches(&self) -> u64 {
        if self.buckets == 0 {
            self.files
        } else {
            self.files / u64::from(self.buckets)
        }
    }

    fn rows_per_batch(&self) -> u64 {
        self.total_rows() / self.batches()
    }

    fn validate(&self) -> Result<()> {
        if self.files == 0 || self.rows_per_file == 0 {
            bail!("files and rows_per_file must be >= 1");
        }
        if self.buckets > 0 && !self.files.is_multiple_of(u64::from(self.buckets)) {
            bail!("files must be a multiple of buckets");
        }
        Ok(())
    }
}

pub fn long_key(i: u64) -> i64 {
    1_000_000_000 + i as i64
}

pub fn string_key(i: u64) -> String {
    format!("ord-{i:012}")
}

fn schema(key: KeyKind) -> Result<Schema> {
    let key_type = match key {
        KeyKind::Long => PrimitiveType::Long,
        KeyKind::String => PrimitiveType::String,
    };
    Ok(Schema::builder()
        .with_schema_id(0)
        .with_fields(vec![
            Arc::new(NestedField::optional(1, "k", Type::Primitive(key_type))),
            Arc::new(NestedField::required(
                2,
                "v",
                Type::Primitive(PrimitiveType::Long),
            )),
            Arc::new(NestedField::optional(
                3,
                "payload",
                Type::Primitive(PrimitiveType::String),
            )),
        ])
        .build()?)
}

fn key_array(key: KeyKind, rows: &[u64]) -> ArrayRef {
    match key {
        KeyKind::Long => Arc::new(Int64Array::from_iter_values(
            rows.iter().map(|&i| long_key(i)),
        )),
        KeyKind::String => Arc::new(StringArray::from_iter_values(
            rows.iter().map(|&i| string_key(i)),
        )),
    }
}

/// Bucket numbers of the keys of `rows`.
fn buckets_of(key: KeyKind, buckets: u32, rows: &[u64]) -> Result<Vec<i32>> {
    let f = create_transform_function(&Transform::Bucket(buckets))?;
    let out = f.transform(key_array(key, rows))?;
    let out = out
        .as_any()
        .downcast_ref::<Int32Array>()
        .ok_or_else(|| anyhow!("bucket transform did not give int32"))?;
    Ok(out.values().to_vec())
}

pub(crate) fn writer_props(max_rows_per_group: usize) -> WriterProperties {
    WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::default()))
        .set_max_row_group_row_count(Some(max_rows_per_group))
        .build()
}

pub(crate) fn warehouse_catalog(warehouse: &Path) -> Result<SqliteCatalog> {
    Ok(SqliteCatalog::open_warehouse(warehouse)?)
}

/// Creates an empty v3 table of `layout`'s schema and spec.
async fn create_table(catalog: &dyn Catalog, name: &TableName, layout: &Layout) -> Result<()> {
    let mut spec = UnboundPartitionSpec::builder();
    if layout.buckets > 0 {
        spec = spec.add_partition_field(1, "k_bucket", Transform::Bucket(layout.buckets))?;
    }
    create_v3_table(catalog, name, schema(layout.key)?, spec.build()).await
}

/// Creates an empty v3 table of `schema` and `spec` at the catalog's default location.
pub(crate) async fn create_v3_table(
    catalog: &dyn Catalog,
    name: &TableName,
    schema: Schema,
    spec: UnboundPartitionSpec,
) -> Result<()> {
    let location = catalog.default_table_location(name);
    let creation = TableCreation::builder()
        .name(name.name.clone())
        .location(location.clone())
        .schema(schema)
        .partition_spec(spec)
        .format_version(FormatVersion::V3)
        .build();
    let metadata = TableMetadataBuilder::from_table_creation(creation)?
        .build()?
        .metadata;
    let location = MetadataLocation::new_with_metadata(&location, &metadata);
    metadata.write_to(catalog.file_io(), &location).await?;
    catalog.create_table(name, &location.to_string()).await?;
    Ok(())
}

/// Commits one snapshot of `changes` on `main`.
async fn commit(
    catalog: &dyn Catalog,
    name: &TableName,
    changes: &SnapshotChanges,
) -> Result<(String, i64)> {
    let table = LoadedTable::load(catalog, name).await?;
    let base = TableFiles::read(&table, table.head("main")?.as_ref()).await?;
    let prepared = build_snapshot(&table, "main", &base, changes).await?;
    let published = publish(catalog, &table, &prepared).await?;
    Ok((published.metadata_location, prepared.snapshot_id))
}

/// Writes one Parquet file with the iceberg writer (which records the column metrics).
pub(crate) async fn write_parquet(
    file_io: &iceberg::io::FileIO,
    path: &str,
    props: WriterProperties,
    schema: SchemaRef,
    batches: impl Iterator<Item = Result<RecordBatch>>,
) -> Result<iceberg::spec::DataFileBuilder> {
    let output = file_io.new_output(path)?;
    let mut writer = ParquetWriterBuilder::new(props, schema)
        .build(output)
        .await?;
    for batch in batches {
        writer.write(&batch?).await?;
    }
    writer
        .close()
        .await?
        .pop()
        .ok_or_else(|| anyhow!("no file written at {path}"))
}

fn rows_batch(schema: &Schema, key: KeyKind, seed: u64, rows: &[u64]) -> Result<RecordBatch> {
    let arrow = Arc::new(iceberg::arrow::schema_to_arrow_schema(schema)?);
    let columns: Vec<ArrayRef> = vec![
        key_array(key, rows),
        Arc::new(Int64Array::from_iter_values(rows.iter().map(|&i| i as i64))),
        Arc::new(StringArray::from_iter_values(
            rows.iter()
                .map(|&i| format!("{:08x}", mix64(i ^ seed) as u32)),
        )),
    ];
    Ok(RecordBatch::try_new(arrow, columns)?)
}

/// One data file of a base table.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BaseFile {
    pub path: String,
    pub batch: u64,
    pub bucket: Option<i32>,
    pub rows: u64,
}

/// What `build-base` leaves in `<warehouse>/base.json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Base {
    pub layout: Layout,
    pub warehouse: PathBuf,
    pub table: String,
    pub metadata_location: String,
    pub files: Vec<BaseFile>,
    pub data_bytes: u64,
}

/// Writes the data files of `layout` into table `bench.base` of `warehouse`.
pub async fn build_base(warehouse: &Path, layout: &Layout, jobs: usize) -> Result<Base> {
    layout.validate()?;
    let catalog = warehouse_catalog(warehouse)?;
    let name = TableName::new(NAMESPACE, "base");
    create_table(&catalog, &name, layout).await?;
    let table = LoadedTable::load(&catalog, &name).await?;
    let schema = table.metadata.current_schema().clone();
    let spec_id = table.metadata.default_partition_spec_id();
    let location = table.location().to_string();
    let rows_per_batch = layout.rows_per_batch();
    // One row group per data file, as Java's 128 MB default gives for files this size.
    let group_rows = rows_per_batch.min(1 << 21) as usize;

    let layout2 = layout.clone();
    let files: Vec<Vec<(BaseFile, DataFile)>> =
        futures::stream::iter((0..layout.batches()).map(|batch| {
            let (file_io, schema, location, layout) = (
                table.file_io.clone(),
                schema.clone(),
                location.clone(),
                layout2.clone(),
            );
            tokio::spawn(async move {
                let start = batch * rows_per_batch;
                let rows: Vec<u64> = (start..start + rows_per_batch).collect();
                let mut parts: BTreeMap<Option<i32>, Vec<u64>> = BTreeMap::new();
                if layout.buckets == 0 {
                    parts.insert(None, rows);
                } else {
                    for (row, b) in rows
                        .iter()
                        .zip(buckets_of(layout.key, layout.buckets, &rows)?)
                    {
                        parts.entry(Some(b)).or_default().push(*row);
                    }
                }
                let mut out = Vec::new();
                for (bucket, rows) in parts {
                    let dir = bucket.map(|b| format!("k_bucket={b}"));
                    let path = eqdv::storage::new_data_file(
                        &location,
                        dir.as_deref(),
                        "bench-data",
                        "parquet",
                    );
                    let chunks = rows
                        .chunks(WRITE_CHUNK as usize)
                        .map(|c| rows_batch(&schema, layout.key, layout.seed, c));
                    let mut builder = write_parquet(
                        &file_io,
                        &path,
                        writer_props(group_rows),
                        schema.clone(),
                        chunks,
                    )
                    .await?;
                    let partition = match bucket {
                        None => Struct::empty(),
                        Some(b) => Struct::from_iter([Some(Literal::int(b))]),
                    };
                    builder
                        .content(DataContentType::Data)
                        .partition(partition)
                        .partition_spec_id(spec_id);
                    let file = builder.build()?;
                    out.push((
                        BaseFile {
                            path: path.clone(),
                            batch,
                            bucket,
                            rows: rows.len() as u64,
                        },
                        file,
                    ));
                }
                Ok::<_, anyhow::Error>(out)
            })
        }))
        .buffer_unordered(jobs.max(1))
        .map(|r| r.map_err(anyhow::Error::from).and_then(|r| r))
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<_>>()?;
    let mut files: Vec<(BaseFile, DataFile)> = files.into_iter().flatten().collect();
    files.sort_by_key(|f| (f.0.batch, f.0.bucket));
    let data_bytes = files.iter().map(|f| f.1.file_size_in_bytes()).sum();
    let mut changes = SnapshotChanges::new(Operation::Append);
    changes.added_data_files = files
        .iter()
        .map(|(_, f)| AddedFile {
            spec_id,
            file: f.clone(),
        })
        .collect();
    let (metadata_location, _) = commit(&catalog, &name, &changes).await?;
    let base = Base {
        layout: layout.clone(),
        warehouse: catalog.warehouse().to_path_buf(),
        table: name.to_string(),
        metadata_location,
        files: files.into_iter().map(|(b, _)| b).collect(),
        data_bytes,
    };
    std::fs::write(
        warehouse.join("base.json"),
        serde_json::to_vec_pretty(&base)?,
    )?;
    Ok(base)
}

/// The deleted keys of a scenario.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeleteSpec {
    pub dist: Dist,
    pub keys: u64,
    pub seed: u64,
    /// Keys deleted besides `keys` that no row holds (CDC streams delete such keys too):
    /// they cost the converter memory and probes but match nothing. Long keys,
    /// unpartitioned layouts only.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub absent: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The `n` absent keys of a scenario: distinct (a bijection of `0..n`), spread over the
/// whole long range, and none of them a row's key (those lie near 10^9).
fn absent_keys(seed: u64, n: u64) -> impl Iterator<Item = i64> {
    (0..n)
        .map(move |i| mix64(i ^ (seed << 40)) as i64)
        .filter(|&k| !(0..4_000_000_000).contains(&k))
}

/// What `build-scenario` leaves in `<warehouse>/<table>.json`: everything the runs and
/// the baselines need, with plain file system paths.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Scenario {
    pub spec: DeleteSpec,
    pub layout: Layout,
    pub warehouse: PathBuf,
    pub table: String,
    /// The pointer with the equality deletes (the state every conversion run starts from).
    pub metadata_before: String,
    pub snapshot_before: i64,
    pub data_files: Vec<String>,
    pub data_bytes: u64,
    pub delete_files: Vec<String>,
    /// Data files that hold at least one deleted key (the truth pruning is judged by).
    pub truth_files: Vec<String>,
    pub deleted_rows: u64,
    pub expected_rows: u64,
    pub expected_sum_v: u64,
}

pub fn local_path(location: &str) -> String {
    location
        .strip_prefix("file://")
        .unwrap_or(location)
        .to_string()
}

/// Picks `n` distinct rows of `0..total` with the distribution.
fn pick_rows(spec: &DeleteSpec, total: u64) -> Result<Vec<u64>> {
    if spec.keys > total / 2 {
        bail!("{} keys is more than half of the {total} rows", spec.keys);
    }
    let mut rng = Rng::new(mix64(spec.seed ^ 0x5eed));
    let mut taken = vec![0u64; total.div_ceil(64) as usize];
    let mut out = Vec::with_capacity(spec.keys as usize);
    let mut take = |lo: u64, width: u64, count: u64, out: &mut Vec<u64>, rng: &mut Rng| {
        let mut got = 0;
        while got < count {
            let i = lo + rng.below(width);
            let (w, b) = ((i / 64) as usize, i % 64);
            if taken[w] & (1 << b) == 0 {
                taken[w] |= 1 << b;
                out.push(i);
                got += 1;
            }
        }
    };
    let hot = match spec.dist {
        Dist::Hot => spec.keys,
        Dist::Scattered => 0,
        Dist::Mixed => spec.keys * 9 / 10,
    };
    if hot > 0 {
        let width = (2 * hot).min(total);
        let lo = (total - width) * 7 / 10;
        take(lo, width, hot, &mut out, &mut rng);
    }
    take(0, total, spec.keys - hot, &mut out, &mut rng);
    // Shuffle: CDC streams delete keys in no particular order.
    for i in (1..out.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        out.swap(i, j);
    }
    Ok(out)
}

/// Writes one equality delete file on `k` (field 1) of `keys`, one batch an array, in
/// `dir` under the table's data directory; returns its entry and its local path.
pub(crate) async fn write_delete_file(
    table: &LoadedTable,
    dir: Option<&str>,
    eq_schema: &SchemaRef,
    keys: impl Iterator<Item = ArrayRef>,
    partition: Struct,
    spec_id: i32,
) -> Result<(AddedFile, String)> {
    let eq_arrow = Arc::new(iceberg::arrow::schema_to_arrow_schema(eq_schema)?);
    let path = eqdv::storage::new_data_file(table.location(), dir, "bench-eq-delete", "parquet");
    let batches = keys.map(|k| Ok(RecordBatch::try_new(eq_arrow.clone(), vec![k])?));
    let mut builder = write_parquet(
        &table.file_io,
        &path,
        writer_props(DELETE_FILE_ROWS),
        eq_schema.clone(),
        batches,
    )
    .await?;
    builder
        .content(DataContentType::EqualityDeletes)
        .equality_ids(Some(vec![1]))
        .partition(partition)
        .partition_spec_id(spec_id);
    let file = AddedFile {
        spec_id,
        file: builder.build()?,
    };
    Ok((file, local_path(&path)))
}

/// Creates table `bench.<name>` in the base's warehouse: the base's data files, then one
/// snapshot of equality deletes on `k` for the chosen rows.
pub async fn build_scenario(warehouse: &Path, name: &str, spec: &DeleteSpec) -> Result<Scenario> {
    let base: Base = serde_json::from_slice(
        &std::fs::read(warehouse.join("base.json"))
            .context("reading base.json (run build-base)")?,
    )?;
    let layout = base.layout.clone();
    let catalog = warehouse_catalog(warehouse)?;
    let base_name = TableName::parse(&base.table)?;
    let base_table = LoadedTable::load(&catalog, &base_name).await?;
    let base_files = TableFiles::read(&base_table, base_table.head("main")?.as_ref()).await?;

    let table_name = TableName::new(NAMESPACE, name);
    create_table(&catalog, &table_name, &layout).await?;
    let table = LoadedTable::load(&catalog, &table_name).await?;
    let spec_id = table.metadata.default_partition_spec_id();
    let mut append = SnapshotChanges::new(Operation::Append);
    append.added_data_files = base_files
        .data_files
        .iter()
        .map(|f| AddedFile {
            spec_id,
            file: f.file.clone(),
        })
        .collect();
    commit(&catalog, &table_name, &append).await?;

    // The deleted rows, their partitions and the files that hold them.
    let rows = pick_rows(spec, layout.total_rows())?;
    if spec.absent > 0 && (layout.key != KeyKind::Long || layout.buckets != 0) {
        bail!("absent keys need long keys and an unpartitioned layout");
    }
    let buckets: Vec<Option<i32>> = if layout.buckets == 0 {
        vec![None; rows.len()]
    } else {
        let mut out = Vec::with_capacity(rows.len());
        for chunk in rows.chunks(1 << 20) {
            out.extend(
                buckets_of(layout.key, layout.buckets, chunk)?
                    .into_iter()
                    .map(Some),
            );
        }
        out
    };
    let by_place: HashMap<(u64, Option<i32>), &str> = base
        .files
        .iter()
        .map(|f| ((f.batch, f.bucket), f.path.as_str()))
        .collect();
    let rows_per_batch = layout.rows_per_batch();
    let mut truth: HashSet<&str> = HashSet::new();
    for (row, bucket) in rows.iter().zip(&buckets) {
        let place = (row / rows_per_batch, *bucket);
        let path = by_place
            .get(&place)
            .ok_or_else(|| anyhow!("no data file for batch/bucket {place:?}"))?;
        truth.insert(path);
    }

    // Equality delete files: per partition, at most DELETE_FILE_ROWS rows each.
    let mut by_bucket: BTreeMap<Option<i32>, Vec<u64>> = BTreeMap::new();
    for (row, bucket) in rows.iter().zip(&buckets) {
        by_bucket.entry(*bucket).or_default().push(*row);
    }
    let key_field = table
        .metadata
        .current_schema()
        .field_by_id(1)
        .ok_or_else(|| anyhow!("no field 1"))?
        .clone();
    let eq_schema: SchemaRef = Arc::new(Schema::builder().with_fields(vec![key_field]).build()?);
    let mut deletes = SnapshotChanges::new(Operation::Delete);
    let mut delete_paths = Vec::new();
    for (bucket, rows) in &by_bucket {
        for chunk in rows.chunks(DELETE_FILE_ROWS) {
            let dir = bucket.map(|b| format!("k_bucket={b}"));
            let partition = match bucket {
                None => Struct::empty(),
                Some(b) => Struct::from_iter([Some(Literal::int(*b))]),
            };
            let keys = chunk
                .chunks(WRITE_CHUNK as usize)
                .map(|c| key_array(layout.key, c));
            let (file, path) =
                write_delete_file(&table, dir.as_deref(), &eq_schema, keys, partition, spec_id)
                    .await?;
            deletes.added_delete_files.push(file);
            delete_paths.push(path);
        }
    }
    if spec.absent > 0 {
        let absent: Vec<i64> = absent_keys(spec.seed, spec.absent).collect();
        for chunk in absent.chunks(DELETE_FILE_ROWS) {
            let keys = chunk
                .chunks(WRITE_CHUNK as usize)
                .map(|c| Arc::new(Int64Array::from(c.to_vec())) as ArrayRef);
            let (file, path) =
                write_delete_file(&table, None, &eq_schema, keys, Struct::empty(), spec_id).await?;
            deletes.added_delete_files.push(file);
            delete_paths.push(path);
        }
    }
    let (metadata_before, snapshot_before) = commit(&catalog, &table_name, &deletes).await?;

    let total = layout.total_rows();
    let all_sum = (u128::from(total) * u128::from(total.saturating_sub(1)) / 2) as u64;
    let deleted_sum: u64 = rows.iter().sum();
    let mut truth_files: Vec<String> = truth.into_iter().map(local_path).collect();
    truth_files.sort();
    let scenario = Scenario {
        spec: spec.clone(),
        layout,
        warehouse: catalog.warehouse().to_path_buf(),
        table: table_name.to_string(),
        metadata_before,
        snapshot_before,
        data_files: base.files.iter().map(|f| local_path(&f.path)).collect(),
        data_bytes: base.data_bytes,
        delete_files: delete_paths,
        truth_files,
        deleted_rows: rows.len() as u64,
        expected_rows: total - rows.len() as u64,
        expected_sum_v: all_sum - deleted_sum,
    };
    std::fs::write(
        warehouse.join(format!("{name}.json")),
        serde_json::to_vec_pretty(&scenario)?,
    )?;
    Ok(scenario)
}
