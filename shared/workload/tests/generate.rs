//! The workload generator against eqdv's reader (the test oracle) and iceberg-rust's
//! own scan: what the generator's model expects live must be what both readers read.

use std::collections::BTreeSet;
use std::sync::Arc;

use arrow_array::{Int64Array, RecordBatch, StringArray};
use eqdv::catalog::{Catalog, SqliteCatalog, TableName};
use eqdv::commit::publish;
use eqdv::parquet_io::ParquetFile;
use eqdv::puffin::{DvBlobInput, write_dv_puffin};
use eqdv::snapshot::{AddedFile, SnapshotChanges, build_snapshot};
use eqdv::table::{LiveFile, LoadedTable, TableFiles};
use eqdv_workload::generate::{
    KeyType, PartitionKind, WorkloadSpec, expected_rows, expected_rows_of, generate,
    parse_key_types,
};
use eqdv_workload::read::{canonical_rows, canonical_rows_for_schema, read_canonical};
use futures::TryStreamExt;
use iceberg::TableIdent;
use iceberg::spec::{
    DataContentType, DataFileBuilder, DataFileFormat, FormatVersion, NestedField, Operation,
    PrimitiveLiteral, PrimitiveType, Schema, Type,
};
use iceberg::writer::file_writer::{FileWriter, FileWriterBuilder, ParquetWriterBuilder};
use parquet::file::properties::WriterProperties;
use roaring::RoaringTreemap;

type TestResult = Result<(), Box<dyn std::error::Error>>;

fn small(seed: u64) -> WorkloadSpec {
    WorkloadSpec {
        seed,
        rows: 1_500,
        commits: 4,
        changes_per_commit: 150,
        rows_per_file: 400,
        rows_per_row_group: 150,
        ..Default::default()
    }
}

/// Compares row lists, printing a short diff instead of thousands of rows.
fn assert_rows(actual: &[String], expected: &[String], what: &str) {
    if actual == expected {
        return;
    }
    let a: BTreeSet<&String> = actual.iter().collect();
    let e: BTreeSet<&String> = expected.iter().collect();
    let missing: Vec<_> = e.difference(&a).take(5).collect();
    let extra: Vec<_> = a.difference(&e).take(5).collect();
    panic!(
        "{what}: {} rows read, {} expected\nmissing (first 5): {missing:#?}\nextra (first 5): {extra:#?}",
        actual.len(),
        expected.len()
    );
}

async fn iceberg_scan(table: &LoadedTable) -> Result<Vec<String>, Box<dyn std::error::Error>> {
    let ice = iceberg::table::Table::builder()
        .metadata(table.metadata.clone())
        .metadata_location(table.pointer.metadata_location.clone())
        .identifier(TableIdent::from_strs([
            table.name.namespace.as_str(),
            table.name.name.as_str(),
        ])?)
        .file_io(table.file_io.clone())
        .readonly(true)
        .runtime(iceberg::Runtime::try_current()?)
        .build()?;
    let batches: Vec<RecordBatch> = ice
        .scan()
        .select_all()
        .build()?
        .to_arrow()
        .await?
        .try_collect()
        .await?;
    Ok(canonical_rows_for_schema(
        table.metadata.current_schema(),
        &batches,
    )?)
}

/// String and binary bounds are at most 16 characters/bytes and still bound the values
/// (compared as bytes); returns how many bounds were truncated.
async fn check_bounds(
    table: &LoadedTable,
    files: &[LiveFile],
) -> Result<usize, Box<dyn std::error::Error>> {
    let mut truncated = 0;
    for f in files {
        let schema = table.metadata.current_schema();
        let fields: Vec<_> = schema
            .as_struct()
            .fields()
            .iter()
            .filter(|field| {
                matches!(
                    *field.field_type,
                    Type::Primitive(PrimitiveType::String | PrimitiveType::Binary)
                ) && f.file.value_counts().contains_key(&field.id)
            })
            .cloned()
            .collect();
        if fields.is_empty() {
            continue;
        }
        let file =
            ParquetFile::open(&table.file_io, f.path(), Some(f.file.file_size_in_bytes())).await?;
        let batches: Vec<(u64, RecordBatch)> =
            file.read(&fields, None, 4096)?.try_collect().await?;
        for (i, field) in fields.iter().enumerate() {
            let mut values: Vec<Vec<u8>> = Vec::new();
            for (_, batch) in &batches {
                let col = batch.column(i);
                if let Some(s) = col.as_any().downcast_ref::<StringArray>() {
                    values.extend(s.iter().flatten().map(|v| v.as_bytes().to_vec()));
                } else if let Some(b) = col.as_any().downcast_ref::<arrow_array::LargeBinaryArray>()
                {
                    values.extend(b.iter().flatten().map(|v| v.to_vec()));
                }
            }
            let (Some(min), Some(max)) = (values.iter().min(), values.iter().max()) else {
                continue;
            };
            let bytes = |lit: &PrimitiveLiteral| match lit {
                PrimitiveLiteral::String(s) => {
                    assert!(
                        s.chars().count() <= 16,
                        "bound {s:?} of {} too long",
                        f.path()
                    );
                    s.as_bytes().to_vec()
                }
                PrimitiveLiteral::Binary(b) => {
                    assert!(b.len() <= 16, "bound {b:?} of {} too long", f.path());
                    b.clone()
                }
                other => panic!("unexpected bound {other:?}"),
            };
            let lower = f
                .file
                .lower_bounds()
                .get(&field.id)
                .unwrap_or_else(|| panic!("no lower bound for {} in {}", field.name, f.path()));
            let lower = bytes(lower.literal());
            assert!(
                &lower <= min,
                "lower bound above the minimum in {}",
                f.path()
            );
            if lower != *min {
                truncated += 1;
            }
            // An upper bound may be missing (nothing could be incremented), never too low.
            if let Some(upper) = f.file.upper_bounds().get(&field.id) {
                let upper = bytes(upper.literal());
                assert!(
                    &upper >= max,
                    "upper bound below the maximum in {}",
                    f.path()
                );
                if upper != *max {
                    truncated += 1;
                }
            }
        }
    }
    Ok(truncated)
}

struct Checked {
    _dir: tempfile::TempDir,
    table: LoadedTable,
    files: TableFiles,
    expected: Vec<String>,
}

/// Generates `spec` into a fresh warehouse and checks eqdv's reader (and iceberg-rust's
/// scan when `cross_check`) against the model.
async fn check_case(
    name: &str,
    spec: WorkloadSpec,
    cross_check: bool,
) -> Result<Checked, Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let catalog = SqliteCatalog::open_warehouse(dir.path())?;
    let table_name = TableName::new("gen", name);
    let report = generate(&catalog, &table_name, &spec).await?;
    assert!(report.created);
    assert_eq!(report.state.done, spec.commits + 1);
    assert_eq!(report.snapshots, spec.commits + 1);

    let expected = expected_rows(&report.state)?;
    assert_eq!(expected.len() as u64, report.live_rows);
    assert_eq!(expected_rows_of(&catalog, &table_name).await?, expected);
    assert!(!expected.is_empty());

    let table = LoadedTable::load(&catalog, &table_name).await?;
    let actual = read_canonical(&table, "main").await?;
    assert_rows(&actual, &expected, &format!("{name}: eqdv reader"));

    if cross_check {
        let scanned = iceberg_scan(&table).await?;
        assert_rows(&scanned, &expected, &format!("{name}: iceberg-rust scan"));
    }

    // The table's shape: v3 with row lineage, live equality deletes, no DVs yet.
    let metadata = &table.metadata;
    assert_eq!(metadata.format_version(), FormatVersion::V3);
    assert_eq!(metadata.next_row_id(), report.rows_written);
    let head = table.head("main")?.expect("a snapshot");
    assert!(head.first_row_id().is_some());
    let files = TableFiles::read(&table, Some(&head)).await?;
    assert!(
        !files.equality_deletes.is_empty(),
        "{name}: no live equality deletes"
    );
    assert!(files.dvs.is_empty() && files.position_deletes.is_empty());
    assert_eq!(files.data_files.len() as u64, report.data_files);
    assert_eq!(
        files.equality_deletes.len() as u64,
        report.equality_delete_files
    );
    let data_rows: u64 = files.data_files.iter().map(|f| f.file.record_count()).sum();
    assert_eq!(data_rows, report.rows_written);
    // Full column statistics (delete files of only null keys have no bounds).
    for f in files.data_files.iter().chain(&files.equality_deletes) {
        assert!(!f.file.value_counts().is_empty() && !f.file.column_sizes().is_empty());
    }
    assert!(
        files
            .data_files
            .iter()
            .all(|f| !f.file.lower_bounds().is_empty())
    );
    Ok(Checked {
        _dir: dir,
        table,
        files,
        expected,
    })
}

#[tokio::test]
async fn long_keys_unpartitioned() -> TestResult {
    check_case("long_none", small(1), true).await?;
    Ok(())
}

#[tokio::test]
async fn string_keys_identity_partitions_with_truncated_bounds() -> TestResult {
    let spec = WorkloadSpec {
        keys: vec![KeyType::String],
        partition: PartitionKind::Identity,
        ..small(2)
    };
    let c = check_case("string_identity", spec, true).await?;
    let data = check_bounds(&c.table, &c.files.data_files).await?;
    let deletes = check_bounds(&c.table, &c.files.equality_deletes).await?;
    assert!(
        data > 0 && deletes > 0,
        "no truncated bounds ({data}, {deletes})"
    );
    // Equality deletes sit in the partitions of the rows they delete.
    assert!(
        c.files
            .equality_deletes
            .iter()
            .all(|f| f.file.partition().fields().len() == 1)
    );
    Ok(())
}

#[tokio::test]
async fn int_string_keys_bucket_partitions() -> TestResult {
    let spec = WorkloadSpec {
        keys: parse_key_types("int,string")?,
        partition: PartitionKind::Bucket(4),
        ..small(3)
    };
    let c = check_case("int_string_bucket", spec, true).await?;
    let eq_ids = c.files.equality_deletes[0].file.equality_ids();
    assert_eq!(eq_ids, Some(vec![1, 2]));
    Ok(())
}

#[tokio::test]
async fn global_deletes_day_partitions() -> TestResult {
    let spec = WorkloadSpec {
        partition: PartitionKind::Day,
        global_deletes: true,
        ..small(4)
    };
    let c = check_case("long_day_global", spec, true).await?;
    let metadata = &c.table.metadata;
    let global: Vec<_> = c
        .files
        .equality_deletes
        .iter()
        .filter(|f| {
            metadata
                .partition_spec_by_id(f.spec_id)
                .is_some_and(|s| s.is_unpartitioned())
        })
        .collect();
    assert!(!global.is_empty(), "no global equality deletes");
    assert!(
        c.files
            .equality_deletes
            .iter()
            .any(|f| f.spec_id == metadata.default_partition_spec_id())
    );
    assert!(!metadata.default_partition_spec().is_unpartitioned());
    Ok(())
}

#[tokio::test]
async fn null_keys_with_global_deletes() -> TestResult {
    // iceberg-rust 0.10.1 drops rows with null keys when applying equality deletes
    // (upstream #2780), so only eqdv's reader is checked here.
    let spec = WorkloadSpec {
        keys: parse_key_types("string")?,
        partition: PartitionKind::Bucket(4),
        null_keys: true,
        global_deletes: true,
        ..small(5)
    };
    let c = check_case("null_keys_bucket", spec, false).await?;
    let null_rows = c
        .expected
        .iter()
        .filter(|r| r.starts_with("[null,"))
        .count();
    assert!(null_rows > 0, "no live rows with a null key");
    // Some delete files delete the null key.
    let mut null_deletes = 0;
    for f in &c.files.equality_deletes {
        null_deletes += f.file.null_value_counts().get(&1).copied().unwrap_or(0);
    }
    assert!(null_deletes > 0, "no equality delete of the null key");
    Ok(())
}

#[tokio::test]
async fn null_keys_multi_column_identity() -> TestResult {
    let spec = WorkloadSpec {
        keys: parse_key_types("long,boolean")?,
        partition: PartitionKind::Identity,
        null_keys: true,
        ..small(6)
    };
    check_case("null_keys_identity", spec, false).await?;
    Ok(())
}

#[tokio::test]
async fn added_column_joins_the_equality_key() -> TestResult {
    let spec = WorkloadSpec {
        keys: parse_key_types("string")?,
        partition: PartitionKind::Bucket(4),
        add_column: true,
        ..small(7)
    };
    // Older files read `tag` as null and later deletes match it (null == null).
    let c = check_case("add_column", spec, true).await?;
    let schema = c.table.metadata.current_schema();
    let tag = schema.field_by_name("tag").expect("tag column").id;
    assert_eq!(c.table.metadata.schemas_iter().len(), 2);
    let with_tag: Vec<_> = c
        .files
        .equality_deletes
        .iter()
        .filter(|f| f.file.equality_ids() == Some(vec![1, tag]))
        .collect();
    assert!(!with_tag.is_empty());
    assert!(
        c.files
            .equality_deletes
            .iter()
            .any(|f| f.file.equality_ids() == Some(vec![1]))
    );
    // Rows written before the column existed read it as null; later ones carry tags.
    assert!(c.expected.iter().any(|r| r.ends_with(",null]")));
    assert!(c.expected.iter().any(|r| r.ends_with("\"red\"]")));
    Ok(())
}

#[tokio::test]
async fn every_key_type_at_once() -> TestResult {
    let spec = WorkloadSpec {
        keys: KeyType::ALL.to_vec(),
        partition: PartitionKind::Day,
        rows: 800,
        changes_per_commit: 100,
        ..small(8)
    };
    // iceberg-rust 0.10.1 cannot apply equality deletes keyed on a uuid column (it
    // binds the delete values as fixed(16)); the next test cross-checks the others.
    let c = check_case("all_types", spec, false).await?;
    // Canonical forms: uuid hyphenated, decimal with 4 digits, binary as hex.
    let row: serde_json::Value = serde_json::from_str(&c.expected[0])?;
    let uuid = row[3].as_str().expect("uuid string");
    assert_eq!(uuid.len(), 36);
    assert_eq!(uuid.matches('-').count(), 4);
    let decimal = row[4].as_str().expect("decimal string");
    assert_eq!(decimal.split('.').nth(1).map(str::len), Some(4));
    assert!(
        row[8]
            .as_str()
            .expect("binary hex")
            .chars()
            .all(|c| c.is_ascii_hexdigit())
    );
    assert_eq!(row[10].as_str().expect("fixed hex").len(), 24);
    assert!(row[9].is_boolean());
    Ok(())
}

#[tokio::test]
async fn every_key_type_but_uuid_cross_checked() -> TestResult {
    let spec = WorkloadSpec {
        keys: KeyType::ALL
            .into_iter()
            .filter(|k| *k != KeyType::Uuid)
            .collect(),
        partition: PartitionKind::Bucket(3),
        rows: 800,
        changes_per_commit: 100,
        ..small(13)
    };
    check_case("all_types_but_uuid", spec, true).await?;
    Ok(())
}

#[tokio::test]
async fn continuing_a_table_equals_generating_it_at_once() -> TestResult {
    let spec = |commits| WorkloadSpec {
        keys: vec![KeyType::Long],
        partition: PartitionKind::Identity,
        null_keys: true,
        global_deletes: true,
        commits,
        ..small(9)
    };

    let dir = tempfile::tempdir()?;
    let table_name = TableName::new("gen", "continued");
    {
        let catalog = SqliteCatalog::open_warehouse(dir.path())?;
        generate(&catalog, &table_name, &spec(3)).await?;
    }
    // Another "process": a new catalog handle, the rest from the table's state.
    let catalog = SqliteCatalog::open_warehouse(dir.path())?;
    let continued = generate(&catalog, &table_name, &spec(2)).await?;
    assert!(!continued.created);
    assert_eq!(continued.snapshots, 2);
    assert_eq!(continued.state.done, 6);

    let other = tempfile::tempdir()?;
    let catalog2 = SqliteCatalog::open_warehouse(other.path())?;
    let at_once = generate(&catalog2, &table_name, &spec(5)).await?;

    let expected = expected_rows_of(&catalog, &table_name).await?;
    assert_eq!(expected, expected_rows(&at_once.state)?);
    let table = LoadedTable::load(&catalog, &table_name).await?;
    assert_rows(
        &read_canonical(&table, "main").await?,
        &expected,
        "continued",
    );
    let table2 = LoadedTable::load(&catalog2, &table_name).await?;
    assert_rows(
        &read_canonical(&table2, "main").await?,
        &expected,
        "at once",
    );

    // The shape cannot change on continuation.
    let err = generate(
        &catalog,
        &table_name,
        &WorkloadSpec {
            keys: vec![KeyType::String],
            ..spec(1)
        },
    )
    .await
    .expect_err("keys changed");
    assert!(err.to_string().contains("keys"), "{err}");
    Ok(())
}

#[tokio::test]
async fn continuing_adds_the_column_when_its_turn_comes() -> TestResult {
    let dir = tempfile::tempdir()?;
    let catalog = SqliteCatalog::open_warehouse(dir.path())?;
    let table_name = TableName::new("gen", "late_column");
    let spec = WorkloadSpec {
        add_column: true,
        commits: 2,
        ..small(10)
    };
    // Two CDC commits: the column comes before commit 1, then two more commits.
    generate(&catalog, &table_name, &spec).await?;
    let report = generate(&catalog, &table_name, &spec).await?;
    assert_eq!(report.state.done, 5);
    let table = LoadedTable::load(&catalog, &table_name).await?;
    assert!(
        table
            .metadata
            .current_schema()
            .field_by_name("tag")
            .is_some()
    );
    let expected = expected_rows_of(&catalog, &table_name).await?;
    assert_eq!(expected, expected_rows(&report.state)?);
    assert_rows(
        &read_canonical(&table, "main").await?,
        &expected,
        "late column",
    );
    Ok(())
}

/// Writes a v2 position delete file for `positions` of `data_file`.
async fn write_position_deletes(
    table: &LoadedTable,
    data_file: &LiveFile,
    positions: &[i64],
) -> Result<AddedFile, Box<dyn std::error::Error>> {
    let schema = Arc::new(
        Schema::builder()
            .with_fields(vec![
                Arc::new(NestedField::required(
                    2_147_483_546,
                    "file_path",
                    Type::Primitive(PrimitiveType::String),
                )),
                Arc::new(NestedField::required(
                    2_147_483_545,
                    "pos",
                    Type::Primitive(PrimitiveType::Long),
                )),
            ])
            .build()?,
    );
    let arrow = Arc::new(iceberg::arrow::schema_to_arrow_schema(&schema)?);
    let batch = RecordBatch::try_new(
        arrow,
        vec![
            Arc::new(StringArray::from(vec![data_file.path(); positions.len()])),
            Arc::new(Int64Array::from(positions.to_vec())),
        ],
    )?;
    let path = format!(
        "{}/data/test-pos-deletes-{}.parquet",
        table.location(),
        uuid::Uuid::new_v4()
    );
    let mut writer = ParquetWriterBuilder::new(WriterProperties::builder().build(), schema)
        .build(table.file_io.new_output(&path)?)
        .await?;
    writer.write(&batch).await?;
    let mut builder = writer.close().await?.pop().expect("a file");
    builder
        .content(DataContentType::PositionDeletes)
        .partition(data_file.file.partition().clone())
        .partition_spec_id(data_file.spec_id);
    Ok(AddedFile {
        spec_id: data_file.spec_id,
        file: builder.build()?,
    })
}

/// The canonical rows at `positions` of a data file (deletes not applied).
async fn rows_at(
    table: &LoadedTable,
    data_file: &LiveFile,
    positions: &[u64],
) -> Result<Vec<String>, Box<dyn std::error::Error>> {
    let fields = table
        .metadata
        .current_schema()
        .as_struct()
        .fields()
        .to_vec();
    let file = ParquetFile::open(&table.file_io, data_file.path(), None).await?;
    let batches: Vec<(u64, RecordBatch)> = file.read(&fields, None, 4096)?.try_collect().await?;
    let mut out = Vec::new();
    for (first, batch) in batches {
        for &p in positions {
            if p >= first && p < first + batch.num_rows() as u64 {
                out.extend(canonical_rows(&[batch.slice((p - first) as usize, 1)])?);
            }
        }
    }
    Ok(out)
}

#[tokio::test]
async fn reader_applies_dvs_and_position_deletes() -> TestResult {
    let dir = tempfile::tempdir()?;
    let catalog = SqliteCatalog::open_warehouse(dir.path())?;
    let table_name = TableName::new("gen", "with_dvs");
    let spec = WorkloadSpec {
        partition: PartitionKind::Identity,
        commits: 2,
        ..small(11)
    };
    generate(&catalog, &table_name, &spec).await?;
    let table = LoadedTable::load(&catalog, &table_name).await?;
    let head = table.head("main")?;
    let files = TableFiles::read(&table, head.as_ref()).await?;
    let mut data: Vec<&LiveFile> = files
        .data_files
        .iter()
        .filter(|f| f.file.record_count() > 160)
        .collect();
    data.sort_by_key(|f| f.path().to_string());
    let (dv_target, pos_target) = (data[0], data[1]);

    // Rows 0, 5 and 155 (second row group) of one file by DV; rows 1 and 2 of another
    // by a v2 position delete file.
    let dv_positions = [0u64, 5, 155];
    let puffin_path = format!(
        "{}/data/test-dv-{}.puffin",
        table.location(),
        uuid::Uuid::new_v4()
    );
    let written = write_dv_puffin(
        &table.file_io,
        &puffin_path,
        &[DvBlobInput {
            referenced_data_file: dv_target.path().to_string(),
            positions: RoaringTreemap::from_iter(dv_positions),
        }],
    )
    .await?;
    let dv = &written.dvs[0];
    let dv_file = DataFileBuilder::default()
        .content(DataContentType::PositionDeletes)
        .file_path(puffin_path.clone())
        .file_format(DataFileFormat::Puffin)
        .partition(dv_target.file.partition().clone())
        .partition_spec_id(dv_target.spec_id)
        .record_count(dv.cardinality)
        .file_size_in_bytes(written.file_size_in_bytes)
        .referenced_data_file(Some(dv.referenced_data_file.clone()))
        .content_offset(Some(dv.content_offset))
        .content_size_in_bytes(Some(dv.content_size_in_bytes))
        .build()?;
    let pos_file = write_position_deletes(&table, pos_target, &[1, 2]).await?;

    let mut changes = SnapshotChanges::new(Operation::Delete);
    changes.added_delete_files = vec![
        AddedFile {
            spec_id: dv_target.spec_id,
            file: dv_file,
        },
        pos_file,
    ];
    let prepared = build_snapshot(&table, "main", &files, &changes).await?;
    publish(&catalog, &table, &prepared).await?;

    let mut deleted = rows_at(&table, dv_target, &dv_positions).await?;
    deleted.extend(rows_at(&table, pos_target, &[1, 2]).await?);
    assert_eq!(deleted.len(), 5);
    let deleted: BTreeSet<String> = deleted.into_iter().collect();
    let expected: Vec<String> = expected_rows_of(&catalog, &table_name)
        .await?
        .into_iter()
        .filter(|r| !deleted.contains(r))
        .collect();
    let table = LoadedTable::load(&catalog, &table_name).await?;
    let files = TableFiles::read(&table, table.head("main")?.as_ref()).await?;
    assert_eq!(files.dvs.len(), 1);
    assert_eq!(files.position_deletes.len(), 1);
    assert_rows(
        &read_canonical(&table, "main").await?,
        &expected,
        "with a DV and position deletes",
    );

    // Later commits' equality deletes and data combine with the DV and position deletes.
    let more = generate(&catalog, &table_name, &WorkloadSpec { commits: 1, ..spec }).await?;
    let table = LoadedTable::load(&catalog, &table_name).await?;
    let expected: Vec<String> = expected_rows(&more.state)?
        .into_iter()
        .filter(|r| !deleted.contains(r))
        .collect();
    assert_rows(
        &read_canonical(&table, "main").await?,
        &expected,
        "after more commits",
    );
    Ok(())
}

#[tokio::test]
async fn bad_specs_are_rejected_before_anything_is_written() -> TestResult {
    let dir = tempfile::tempdir()?;
    let catalog = SqliteCatalog::open_warehouse(dir.path())?;
    let table_name = TableName::new("gen", "bad");
    let spec = WorkloadSpec {
        keys: vec![KeyType::Boolean],
        partition: PartitionKind::Bucket(4),
        ..small(12)
    };
    let err = generate(&catalog, &table_name, &spec)
        .await
        .expect_err("bucket on boolean");
    assert!(err.to_string().contains("bucket"), "{err}");
    assert!(catalog.list_tables(None).await?.is_empty());
    Ok(())
}
