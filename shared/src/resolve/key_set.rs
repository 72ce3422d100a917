//! Loading a group's deleted keys from its delete files (Parquet, Avro, ORC) into its
//! [`GroupKeys`], bounded by the read budget, feeding the early footer fetches as each
//! delete file is consumed, and refusing key fields it cannot resolve.

use std::collections::HashMap;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{Array, RecordBatch};
use arrow_schema::DataType;
use futures::channel::oneshot;
use futures::future::{BoxFuture, FutureExt};
use futures::{StreamExt, TryStreamExt};
use iceberg::spec::{DataFileFormat, NameMapping};
use tokio::sync::OwnedSemaphorePermit;

use super::budget::ReadBudget;
use super::early::GroupWatch;
use super::group_keys::{ColumnValues, GroupKeys, KeyPass, KeySet};
use super::key_hash::KeyHashBuilder;
use super::long_keys::LongKeysBuilder;
use super::string_keys::{StringKeysBuilder, for_each_string};
use super::{ResolveMetrics, ResolveOptions};
use crate::keys::KeyColumns;
use crate::plan::DeleteGroup;
use crate::table::{LiveFile, LoadedTable};
use crate::{Error, Result};

/// Loads `group`'s share of the keys for `pass`, feeding `watch` as its delete files are
/// consumed; returns them with the reads' counters (delete files and bytes read).
#[allow(clippy::too_many_arguments)]
pub(super) async fn load_group_keys(
    table: &LoadedTable,
    group: &DeleteGroup,
    pass: KeyPass,
    options: &ResolveOptions,
    name_mapping: Option<&NameMapping>,
    budget: &ReadBudget,
    mut watch: Option<GroupWatch<'_>>,
    with_index_hashes: bool,
) -> Result<(GroupKeys, ResolveMetrics)> {
    let mut metrics = ResolveMetrics::default();
    let schema = table.metadata.current_schema();
    refuse_dropped_fields(table, group)?;
    let key_columns = KeyColumns::new(&table.name.to_string(), schema, &group.equality_ids)?;
    // The one-column sets compare the leaf alone: a nested key is also its structs'
    // nulls (see `keys::nested`), so it goes through the encoded rows.
    let one_leaf = key_columns.len() == 1 && !key_columns.is_nested();
    let single_long = one_leaf && *key_columns.data_type(0) == DataType::Int64;
    let single_string = one_leaf
        && matches!(
            key_columns.data_type(0),
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
        );
    // This pass's share of the delete rows: enough room from the start, so that the
    // set does not grow past it on the way.
    let expected = usize::try_from(group.delete_rows().div_ceil(pass.passes.max(1)))
        .unwrap_or(usize::MAX)
        .saturating_add(1024);
    let mut loading = if single_long {
        Loading::Long(LongKeysBuilder::new(
            group.delete_files.iter().map(|d| d.data_sequence_number),
            expected,
        ))
    } else if single_string {
        Loading::Str {
            keys: StringKeysBuilder::new(expected),
            columns: ColumnValues::empty_columns(1),
        }
    } else {
        Loading::Rows {
            keys: HashMap::with_hasher(KeyHashBuilder::new()),
            columns: ColumnValues::empty_columns(key_columns.len()),
        }
    };
    // The files are fetched concurrently (each open and read is a few round trips to
    // object storage) but consumed in file order: the keys, their sequence numbers and
    // the first error are those of a sequential load. A file is admitted once its
    // decoded batches fit the read budget and holds its share until they are consumed.
    // Admission follows file order (each file waits for the one before it to be
    // admitted, a chain of one-shot signals), so a group's earliest unconsumed file is
    // never behind a later one for budget, and every group moves on. At most
    // `parallelism` files of this group are read ahead; all groups share `budget`.
    // Boxed as `Send` futures: left to inference, the stream's type asks for `Send` for
    // every lifetime of its references, and the resolve stops being `Send`.
    let columns = &key_columns;
    let mut turn: Option<oneshot::Receiver<()>> = None;
    let reads: Vec<BoxFuture<'_, Result<(LoadedDeleteFile<'_>, OwnedSemaphorePermit)>>> = group
        .delete_files
        .iter()
        .map(|delete| {
            let (admitted, next) = oneshot::channel::<()>();
            let previous = turn.replace(next);
            async move {
                if let Some(previous) = previous {
                    // Cancelled when the earlier file failed or was dropped: the order
                    // is kept either way.
                    let _ = previous.await;
                }
                let held = budget.bytes(decoded_bytes(delete, columns)).await;
                drop(admitted);
                let held = held?;
                let loaded =
                    read_delete_file(table, delete, columns, options, name_mapping, budget).await?;
                Ok((loaded, held))
            }
            .boxed()
        })
        .collect();
    let mut loads = futures::stream::iter(reads).buffered(options.parallelism.max(1));
    let mut index_hashes = Vec::new();
    while let Some((loaded, _held)) = loads.try_next().await? {
        let LoadedDeleteFile {
            delete,
            batches,
            bytes,
        } = loaded;
        metrics.bytes_read += bytes;
        metrics.delete_files_read += 1;
        let seq = delete.data_sequence_number;
        for batch in batches {
            if let Some(watch) = &mut watch {
                watch.add_batch(&key_columns, batch.columns());
            }
            if with_index_hashes {
                crate::key_index::hash::hash_keys(
                    &key_columns,
                    batch.columns(),
                    &mut index_hashes,
                )?;
            }
            match &mut loading {
                Loading::Long(keys) => {
                    let column =
                        batch
                            .column(0)
                            .as_primitive_opt::<Int64Type>()
                            .ok_or_else(|| {
                                Error::file(
                                    delete.path(),
                                    "key column is not a long",
                                    "type mismatch",
                                )
                            })?;
                    let seq = keys.seq_index(seq);
                    for value in column.iter().filter(|v| pass.owns_long(*v)) {
                        keys.push(value, seq);
                    }
                }
                Loading::Str { keys, columns } => {
                    let array = batch.column(0);
                    let mut mine = Vec::with_capacity(array.len());
                    let mut full = false;
                    let is_string = for_each_string(array.as_ref(), |_, value| {
                        let owned = pass.owns_string(value);
                        mine.push(owned);
                        if owned {
                            full |= keys.push(value, seq).is_none();
                        }
                    });
                    if !is_string {
                        return Err(Error::file(
                            delete.path(),
                            "key column is not a string",
                            "type mismatch",
                        ));
                    }
                    if full {
                        return Err(Error::InvalidInput(format!(
                            "equality delete file {} brings its group past {} distinct string keys in one pass; lower the key memory budget so that the keys are split into passes",
                            delete.path(),
                            u32::MAX / 2
                        )));
                    }
                    // The column's values for pruning, as for any other key.
                    let encoded = key_columns.encode_column(0, array)?;
                    for (row_index, row) in encoded.iter().enumerate() {
                        if !mine[row_index] {
                            continue;
                        }
                        if array.is_valid(row_index) {
                            columns[0].push(row.as_ref());
                        } else {
                            columns[0].has_null = true;
                        }
                    }
                }
                Loading::Rows { keys, columns } => {
                    let arrays = batch.columns().to_vec();
                    let rows = key_columns.encode(&arrays)?;
                    // Only this pass's share of the keys is kept.
                    let mine: Vec<bool> = rows.iter().map(|row| pass.owns(row.as_ref())).collect();
                    for (row, _) in rows.iter().zip(&mine).filter(|(_, m)| **m) {
                        let max = keys.entry(row.as_ref().into()).or_insert(i64::MIN);
                        *max = (*max).max(seq);
                    }
                    for (i, array) in arrays.iter().enumerate() {
                        // Per column, the leaf's values (null under a null struct too).
                        let array = crate::keys::leaf(array)?;
                        let encoded = key_columns.encode_column(i, &array)?;
                        for (row_index, row) in encoded.iter().enumerate() {
                            if !mine[row_index] {
                                continue;
                            }
                            if array.is_valid(row_index) {
                                columns[i].push(row.as_ref());
                            } else {
                                columns[i].has_null = true;
                            }
                        }
                    }
                }
            }
        }
        if let Some(watch) = &mut watch {
            watch.file_loaded(&key_columns);
        }
    }
    // It borrows `key_columns`, which moves into the result.
    drop(loads);
    if let Some(watch) = &mut watch {
        watch.all_loaded(&key_columns);
    }
    let (keys, columns) = match loading {
        Loading::Long(keys) => (KeySet::Long(keys.build()), Vec::new()),
        Loading::Str { keys, columns } => (
            KeySet::Str(keys.build()),
            columns.into_iter().map(ColumnValues::sorted).collect(),
        ),
        Loading::Rows { keys, columns } => (
            KeySet::Rows(keys),
            columns.into_iter().map(ColumnValues::sorted).collect(),
        ),
    };
    let keys = GroupKeys {
        group: group.clone(),
        key_columns,
        keys,
        columns,
        bloom_hashes: Default::default(),
        index_hashes,
    };
    Ok((keys, metrics))
}

/// A group's keys while its delete files are read.
enum Loading {
    Long(LongKeysBuilder),
    Str {
        keys: StringKeysBuilder,
        columns: Vec<ColumnValues>,
    },
    Rows {
        keys: HashMap<Box<[u8]>, i64, KeyHashBuilder>,
        columns: Vec<ColumnValues>,
    },
}

/// One equality delete file's key columns, read whole.
struct LoadedDeleteFile<'a> {
    delete: &'a LiveFile,
    batches: Vec<RecordBatch>,
    /// Compressed bytes of the key column chunks.
    bytes: u64,
}

/// What the decoded key columns of a delete file hold, estimated before it is read:
/// at least its size on storage, and 8 bytes a value per key column (more for wide
/// values, which the file size then reflects).
fn decoded_bytes(delete: &LiveFile, key_columns: &KeyColumns) -> u64 {
    let rows = delete.file.record_count();
    let values = rows.saturating_mul(8 * key_columns.len() as u64);
    values.max(delete.file.file_size_in_bytes())
}

async fn read_delete_file<'a>(
    table: &LoadedTable,
    delete: &'a LiveFile,
    key_columns: &KeyColumns,
    options: &ResolveOptions,
    name_mapping: Option<&NameMapping>,
    budget: &ReadBudget,
) -> Result<LoadedDeleteFile<'a>> {
    // One permit a read, released when the read is done (not when its batches are
    // consumed: a group waiting for an earlier file must not starve the others).
    let _permit = budget.file().await?;
    match delete.file.file_format() {
        DataFileFormat::Parquet | DataFileFormat::Orc => {}
        DataFileFormat::Avro => {
            let batches = crate::avro_columns::read_avro_columns(
                &table.file_io,
                delete.path(),
                (&key_columns.fields, &key_columns.arrow_schema),
                name_mapping,
                options.batch_size,
            )
            .await?;
            return Ok(LoadedDeleteFile {
                delete,
                batches,
                bytes: delete.file.file_size_in_bytes(),
            });
        }
        other => {
            return Err(Error::file(
                delete.path(),
                format!(
                    "equality delete files in {other:?} are not supported (Parquet, Avro and \
                     ORC are)"
                ),
                "unsupported delete file",
            ));
        }
    }
    let opened = crate::file_rows::read_rows(
        &table.file_io,
        delete.path(),
        delete.file.file_size_in_bytes(),
        delete.file.file_format(),
        name_mapping,
        (&key_columns.fields, key_columns.arrow_schema.clone()),
        options.batch_size,
    )
    .await?;
    require_key_fields(delete, key_columns, |id| {
        opened.columns.names_of(id).is_some()
    })?;
    let batches = opened.rows.map_ok(|(_, batch)| batch).try_collect().await?;
    let bytes = opened.bytes.load(std::sync::atomic::Ordering::Relaxed);
    Ok(LoadedDeleteFile {
        delete,
        batches,
        bytes,
    })
}

/// An equality delete file must hold every one of its equality fields.
fn require_key_fields(
    delete: &LiveFile,
    key_columns: &KeyColumns,
    has_field: impl Fn(i32) -> bool,
) -> Result<()> {
    match key_columns.field_ids.iter().find(|&&id| !has_field(id)) {
        Some(id) => Err(Error::file(
            delete.path(),
            format!("equality delete file lacks equality field id {id}"),
            "invalid delete file",
        )),
        None => Ok(()),
    }
}

/// An equality field that the current schema dropped cannot be resolved: data files
/// written after the drop lack the column, and what they would compare as is unknown.
/// The error names the delete file and the field (by its last name).
fn refuse_dropped_fields(table: &LoadedTable, group: &DeleteGroup) -> Result<()> {
    let current = table.metadata.current_schema();
    for &id in &group.equality_ids {
        if current.field_by_id(id).is_some() {
            continue;
        }
        let mut schemas: Vec<_> = table.metadata.schemas_iter().collect();
        schemas.sort_by_key(|s| std::cmp::Reverse(s.schema_id()));
        let name = schemas
            .iter()
            .find_map(|s| s.field_by_id(id).map(|f| f.name.clone()))
            .unwrap_or_else(|| "<unknown>".into());
        let path = group
            .delete_files
            .first()
            .map_or_else(String::new, |f| f.path().to_string());
        return Err(Error::FieldUnresolvable {
            path,
            field: name,
            field_id: id,
            message: format!(
                "the equality delete's field was dropped from table {}'s current schema; \
                 eqdv cannot apply it faithfully to every data file, so the group is not \
                 converted",
                table.name
            ),
        });
    }
    Ok(())
}
