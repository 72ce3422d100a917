//! Files and commits: data and equality delete files written from a commit's plan,
//! with the column bounds Java would write, and committed as one snapshot.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use arrow_array::RecordBatch;
use iceberg::io::FileIO;
use iceberg::spec::{
    DataContentType, DataFile, DataFileBuilder, Datum, Operation, PrimitiveLiteral, PrimitiveType,
    Schema, SchemaRef, Struct,
};
use iceberg::writer::file_writer::{FileWriter, FileWriterBuilder, ParquetWriterBuilder};
use parquet::file::properties::{BloomFilterPosition, WriterProperties};

use eqdv::catalog::Catalog;
use eqdv::commit::publish;
use eqdv::snapshot::{AddedFile, PreparedSnapshot, SnapshotChanges, build_snapshot};
use eqdv::storage::{delete_files, new_data_file};
use eqdv::table::{LoadedTable, TableFiles};
use eqdv::{Error, Result};

use super::model::{CommitPlan, DeleteRow, Model, Part, Row, Scope};
use super::spec::{GeneratorState, state_of};
use super::table::{partition_dir, partition_value};
use super::{BOUND_TRUNCATE_LEN, COMMIT_ATTEMPTS, COMMIT_SUMMARY_PROPERTY, STATE_PROPERTY};

/// Java keeps at most 16 characters of a string bound: the lower bound is the prefix,
/// the upper bound the prefix with its last character incremented (the character
/// before it when that one is U+10FFFF, and so on; no upper bound if none can be).
pub(super) fn truncate_string_bound(s: &str, upper: bool) -> Option<String> {
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
pub(super) fn truncate_binary_bound(b: &[u8], upper: bool) -> Option<Vec<u8>> {
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
pub(super) fn truncate_bounds(bounds: &HashMap<i32, Datum>, upper: bool) -> HashMap<i32, Datum> {
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
pub(super) struct FileSpec {
    content: DataContentType,
    equality_ids: Option<Vec<i32>>,
    spec_id: i32,
    partition: Struct,
    dir: Option<String>,
}

pub(super) async fn write_file(
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

pub(super) struct Landed {
    pub(super) table: LoadedTable,
    pub(super) data_files: u64,
    pub(super) delete_files: u64,
}

/// Writes the files of `plan` and commits them as one snapshot carrying `next` as the
/// generator state. `None` when the plan is empty (no snapshot).
pub(super) async fn commit_plan(
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
            delete_files(&table.file_io, table.location(), &written).await;
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
                delete_files(&table.file_io, table.location(), &written).await;
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
                delete_files(&table.file_io, table.location(), &prepared.written_files).await;
                last = e.to_string();
            }
            Err(e @ Error::CommitStateUnknown { .. }) => return Err(e),
            Err(e) => {
                delete_files(&table.file_io, table.location(), &prepared.written_files).await;
                delete_files(&table.file_io, table.location(), &written).await;
                return Err(e);
            }
        }
    }
    delete_files(&table.file_io, table.location(), &written).await;
    Err(Error::RetriesExhausted {
        table: table.name.to_string(),
        attempts: COMMIT_ATTEMPTS,
        last,
    })
}

/// Writes the data and equality delete files of `plan` (paths go to `written` as they
/// are created, so a failure can remove them).
pub(super) async fn write_plan(
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
        props = props.set_bloom_filter_position(if spec.bloom_filters_after_row_groups {
            BloomFilterPosition::AfterRowGroup
        } else {
            BloomFilterPosition::End
        });
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
