//! The million-file table: `bench.big`, partitioned by `identity(d)` (a day number), with
//! one append per day (so one data manifest per day, as a table loaded day by day has
//! before its manifests are merged) and then one commit of equality deletes in the most
//! recent days. Only the data files of those days exist as Parquet objects: a converter
//! opens no other (their manifest entries are real, with partition values, counts and
//! column bounds, but their paths name nothing). What it measures is what a table's size
//! costs before any data is read: the metadata, the manifests, the plan, one shard.
//!
//! Row `i` of the table (day-major, then file, then row) has key `k = i`, so each
//! file's bounds on `k` are tight; the deleted keys of a day are spread over its files.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Result, bail};
use arrow_array::{ArrayRef, Int32Array, Int64Array, RecordBatch, StringArray};
use eqdv::catalog::{Catalog, TableName};
use eqdv::commit::publish;
use eqdv::plan::DataScope;
use eqdv::snapshot::{AddedFile, SnapshotChanges, build_snapshot};
use eqdv::table::{LoadedTable, TableFiles};
use futures::StreamExt;
use iceberg::spec::{
    DataContentType, DataFile, DataFileBuilder, DataFileFormat, Datum, Literal, NestedField,
    Operation, PrimitiveType, Schema, Struct, Transform, Type, UnboundPartitionSpec,
};
use serde::{Deserialize, Serialize};

use crate::tables::{
    NAMESPACE, create_v3_table, warehouse_catalog, write_delete_file, write_parquet, writer_props,
};

pub const TABLE: &str = "big";

/// The shape of the big table; its JSON is the cache key of the built warehouse.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BigLayout {
    pub days: u32,
    pub files_per_day: u32,
    pub rows_per_file: u32,
    /// The most recent days get equality deletes (and real data files).
    pub touched_days: u32,
    pub keys_per_day: u32,
    /// True: append `c` writes day `c` (each data manifest holds one partition, as a
    /// table loaded day by day has). False: every append writes one file into every
    /// day, `files_per_day == days` (each manifest spans every partition, as a
    /// streaming table bucketed by key has): there summaries rule out nothing.
    pub clustered: bool,
}

impl BigLayout {
    fn validate(&self) -> Result<()> {
        if self.days == 0 || self.files_per_day == 0 || self.rows_per_file == 0 {
            bail!("days, files per day and rows per file must be >= 1");
        }
        if self.touched_days == 0 || self.touched_days > self.days {
            bail!("touched days must be 1..=days");
        }
        let rows_per_day = u64::from(self.files_per_day) * u64::from(self.rows_per_file);
        if self.keys_per_day == 0 || u64::from(self.keys_per_day) > rows_per_day {
            bail!("keys per day must be 1..={rows_per_day}");
        }
        if !self.clustered && self.files_per_day != self.days {
            bail!("a table that is not clustered needs files per day = days");
        }
        Ok(())
    }

    /// The first row (and key) of file `file` of append `commit`.
    fn first_row(&self, commit: u32, file: u32) -> u64 {
        (u64::from(commit) * u64::from(self.files_per_day) + u64::from(file))
            * u64::from(self.rows_per_file)
    }

    /// The day (partition) of file `file` of append `commit`.
    fn day_of(&self, commit: u32, file: u32) -> u32 {
        if self.clustered { commit } else { file }
    }

    /// The files of `day`, as (append, file), in append order.
    fn files_of(&self, day: u32) -> Vec<(u32, u32)> {
        if self.clustered {
            (0..self.files_per_day).map(|f| (day, f)).collect()
        } else {
            (0..self.days).map(|c| (c, day)).collect()
        }
    }

    fn is_touched(&self, day: u32) -> bool {
        day >= self.days - self.touched_days
    }
}

fn schema() -> Result<Schema> {
    Ok(Schema::builder()
        .with_schema_id(0)
        .with_fields(vec![
            NestedField::required(1, "k", Type::Primitive(PrimitiveType::Long)).into(),
            NestedField::required(2, "d", Type::Primitive(PrimitiveType::Int)).into(),
            NestedField::optional(3, "v", Type::Primitive(PrimitiveType::Long)).into(),
            NestedField::optional(4, "payload", Type::Primitive(PrimitiveType::String)).into(),
        ])
        .build()?)
}

async fn create_table(catalog: &dyn Catalog, name: &TableName) -> Result<()> {
    let spec = UnboundPartitionSpec::builder()
        .add_partition_field(2, "d", Transform::Identity)?
        .build();
    create_v3_table(catalog, name, schema()?, spec).await
}

fn day_partition(day: u32) -> Struct {
    Struct::from_iter([Some(Literal::int(day as i32))])
}

/// The manifest entry of a data file that is never written: what a writer would have
/// recorded for it (counts and bounds of every column), at a path that names nothing.
fn absent_file(
    layout: &BigLayout,
    location: &str,
    spec_id: i32,
    commit: u32,
    file: u32,
) -> Result<DataFile> {
    let day = layout.day_of(commit, file);
    let first = layout.first_row(commit, file) as i64;
    let last = first + i64::from(layout.rows_per_file) - 1;
    let rows = u64::from(layout.rows_per_file);
    let per_column = |v: u64| (1..=4).map(|id| (id, v)).collect::<HashMap<i32, u64>>();
    Ok(DataFileBuilder::default()
        .content(DataContentType::Data)
        .file_path(format!(
            "{location}/data/d={day}/never-written-{commit:06}-{file:06}.parquet"
        ))
        .file_format(DataFileFormat::Parquet)
        .partition(day_partition(day))
        .partition_spec_id(spec_id)
        .record_count(rows)
        .file_size_in_bytes(rows * 24)
        .column_sizes(per_column(rows * 6))
        .value_counts(per_column(rows))
        .null_value_counts(per_column(0))
        .lower_bounds(HashMap::from([
            (1, Datum::long(first)),
            (2, Datum::int(day as i32)),
            (3, Datum::long(first)),
            (4, Datum::string("00000000")),
        ]))
        .upper_bounds(HashMap::from([
            (1, Datum::long(last)),
            (2, Datum::int(day as i32)),
            (3, Datum::long(last)),
            (4, Datum::string("ffffffff")),
        ]))
        .build()?)
}

/// Writes one real data file of `day`.
async fn real_file(
    table: &LoadedTable,
    layout: &BigLayout,
    spec_id: i32,
    commit: u32,
    file: u32,
) -> Result<DataFile> {
    let day = layout.day_of(commit, file);
    let schema = table.metadata.current_schema().clone();
    let arrow = Arc::new(iceberg::arrow::schema_to_arrow_schema(&schema)?);
    let first = layout.first_row(commit, file);
    let rows: Vec<u64> = (first..first + u64::from(layout.rows_per_file)).collect();
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from_iter_values(rows.iter().map(|&i| i as i64))),
        Arc::new(Int32Array::from_iter_values(
            rows.iter().map(|_| day as i32),
        )),
        Arc::new(Int64Array::from_iter_values(rows.iter().map(|&i| i as i64))),
        Arc::new(StringArray::from_iter_values(rows.iter().map(|&i| {
            format!("{:08x}", eqdv_workload::rng::mix64(i) as u32)
        }))),
    ];
    let batch = RecordBatch::try_new(arrow, columns)?;
    let path = eqdv::storage::new_data_file(
        table.location(),
        Some(&format!("d={day}")),
        "bench-big",
        "parquet",
    );
    let mut builder = write_parquet(
        &table.file_io,
        &path,
        writer_props(layout.rows_per_file as usize),
        schema,
        std::iter::once(Ok(batch)),
    )
    .await?;
    builder
        .content(DataContentType::Data)
        .partition(day_partition(day))
        .partition_spec_id(spec_id);
    Ok(builder.build()?)
}

/// Commits `changes` on the head; the base is the head's manifest list alone (nothing of
/// the data is read, so the snapshot's data totals come from the parent's summary).
async fn commit_on_head(
    catalog: &dyn Catalog,
    name: &TableName,
    changes: &SnapshotChanges,
) -> Result<()> {
    let table = LoadedTable::load(catalog, name).await?;
    let (base, ()) = TableFiles::read_scoped(&table, table.head("main")?.as_ref(), |_| {
        Ok((DataScope::Partitions(Vec::new()), ()))
    })
    .await?;
    let prepared = build_snapshot(&table, "main", &base, changes).await?;
    publish(catalog, &table, &prepared).await?;
    Ok(())
}

/// What `build-big` prints and leaves in `<warehouse>/big.json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BigTable {
    pub layout: BigLayout,
    pub table: String,
    pub data_files: u64,
    pub real_data_files: u64,
    pub data_manifests: u64,
    pub delete_files: u64,
    pub deleted_keys: u64,
    pub build_s: f64,
}

/// Builds `bench.big` of `layout` in `warehouse` (a new directory).
pub async fn build_big(warehouse: &Path, layout: &BigLayout, jobs: usize) -> Result<BigTable> {
    layout.validate()?;
    let started = Instant::now();
    let catalog = warehouse_catalog(warehouse)?;
    let name = TableName::new(NAMESPACE, TABLE);
    create_table(&catalog, &name).await?;
    let table = LoadedTable::load(&catalog, &name).await?;
    let spec_id = table.metadata.default_partition_spec_id();
    let location = table.location().to_string();
    let mut real = 0u64;
    for commit in 0..layout.days {
        let (touched, absent): (Vec<u32>, Vec<u32>) =
            (0..layout.files_per_day).partition(|&f| layout.is_touched(layout.day_of(commit, f)));
        real += touched.len() as u64;
        let mut files: Vec<DataFile> = futures::stream::iter(
            touched
                .into_iter()
                .map(|f| real_file(&table, layout, spec_id, commit, f)),
        )
        .buffered(jobs.max(1))
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<_>>()?;
        for f in absent {
            files.push(absent_file(layout, &location, spec_id, commit, f)?);
        }
        let mut append = SnapshotChanges::new(Operation::Append);
        append.added_data_files = files
            .into_iter()
            .map(|file| AddedFile { spec_id, file })
            .collect();
        commit_on_head(&catalog, &name, &append).await?;
    }

    // One equality delete file per touched day, its keys spread over the day's rows.
    let table = LoadedTable::load(&catalog, &name).await?;
    let eq_schema = Arc::new(
        Schema::builder()
            .with_fields(vec![
                NestedField::required(1, "k", Type::Primitive(PrimitiveType::Long)).into(),
            ])
            .build()?,
    );
    let rows_per_day = u64::from(layout.files_per_day) * u64::from(layout.rows_per_file);
    let stride = rows_per_day / u64::from(layout.keys_per_day);
    let mut deletes = SnapshotChanges::new(Operation::Delete);
    for day in layout.days - layout.touched_days..layout.days {
        let day_files = layout.files_of(day);
        let rows = u64::from(layout.rows_per_file);
        let keys: ArrayRef = Arc::new(Int64Array::from_iter_values(
            (0..u64::from(layout.keys_per_day)).map(|j| {
                // The j-th of keys_per_day rows spread evenly over the day's rows.
                let q = j * stride + j % stride.max(1);
                let (commit, file) = day_files[(q / rows) as usize];
                (layout.first_row(commit, file) + q % rows) as i64
            }),
        ));
        let (file, _) = write_delete_file(
            &table,
            Some(&format!("d={day}")),
            &eq_schema,
            std::iter::once(keys),
            day_partition(day),
            spec_id,
        )
        .await?;
        deletes.added_delete_files.push(file);
    }
    commit_on_head(&catalog, &name, &deletes).await?;

    let big = BigTable {
        layout: layout.clone(),
        table: name.to_string(),
        data_files: u64::from(layout.days) * u64::from(layout.files_per_day),
        real_data_files: real,
        data_manifests: u64::from(layout.days),
        delete_files: u64::from(layout.touched_days),
        deleted_keys: u64::from(layout.touched_days) * u64::from(layout.keys_per_day),
        build_s: started.elapsed().as_secs_f64(),
    };
    std::fs::write(warehouse.join("big.json"), serde_json::to_vec_pretty(&big)?)?;
    Ok(big)
}
