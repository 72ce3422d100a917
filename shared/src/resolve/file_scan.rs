//! The scan of one data file: its footer opened, row groups pruned by statistics and
//! bloom filters, and its key columns read (whole, or at the rows a key index named)
//! and matched against each group's key set.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{Array, ArrayRef, RecordBatch};
use futures::TryStreamExt;
use iceberg::spec::{DataFileFormat, NameMapping, NestedFieldRef};
use roaring::RoaringTreemap;

use super::ResolveOptions;
use super::bloom::BloomVerdict;
use super::budget::ReadBudget;
use super::early::{self, EarlyOpen};
use super::group_keys::{GroupKeys, KeySet};
use super::prune::ColumnRanges;
use crate::orc_io::OrcFile;
use crate::parquet_io::{FieldSource, FooterHint, FooterRead, ParquetFile, row_group_starts};
use crate::table::{LiveFile, LoadedTable};
use crate::{Error, Result};

/// One candidate's scan to do.
pub(super) struct ScanWork {
    pub(super) data: LiveFile,
    /// Its footer, when opened early.
    pub(super) open: Option<EarlyOpen>,
    /// The groups that may apply to it.
    pub(super) group_ids: Vec<usize>,
    pub(super) projection: Arc<KeyProjection>,
    /// The only rows that can hold a deleted key, when the groups' indexes named them.
    pub(super) named: Option<RoaringTreemap>,
    /// Groups (one per field set) whose key hashes the index's upkeep wants of every
    /// row, if the file is read whole.
    pub(super) index_keys: Vec<usize>,
}

/// Rows of a data page as the common writers cut them (parquet-mr's and parquet-rs'
/// default row limit): a file read at fewer positions than half its pages loads its
/// offset index, so that only the pages holding them are fetched.
const TYPICAL_PAGE_ROWS: u64 = 20_000;

/// The key columns a set of groups reads (their union), as read from each file.
pub(super) struct KeyProjection {
    fields: Vec<NestedFieldRef>,
    /// The equality field id each of `fields` is read for.
    ids: Vec<i32>,
    /// The Arrow schema `fields` are read into, built once for every file.
    target: arrow_schema::SchemaRef,
    /// Field id to column index in the batches read with `fields`.
    column_of: HashMap<i32, usize>,
}

impl KeyProjection {
    pub(super) fn new(loaded: &[GroupKeys], group_ids: &[usize]) -> Result<Self> {
        // By equality field id: two nested keys under one struct are two columns.
        let mut fields: Vec<NestedFieldRef> = Vec::new();
        let mut ids: Vec<i32> = Vec::new();
        for &g in group_ids {
            let key_columns = &loaded[g].key_columns;
            for (field, &id) in key_columns.fields.iter().zip(&key_columns.field_ids) {
                if !ids.contains(&id) {
                    ids.push(id);
                    fields.push(field.clone());
                }
            }
        }
        let column_of = ids.iter().enumerate().map(|(i, id)| (*id, i)).collect();
        let target = crate::parquet_io::target_schema(&fields)?;
        Ok(Self {
            fields,
            ids,
            target,
            column_of,
        })
    }
}

/// What every file scan of one pass shares.
pub(super) struct ScanContext<'a> {
    pub(super) table: &'a LoadedTable,
    pub(super) loaded: &'a [GroupKeys],
    pub(super) options: &'a ResolveOptions,
    pub(super) name_mapping: Option<&'a NameMapping>,
    pub(super) budget: &'a ReadBudget,
    pub(super) footer_hint: &'a FooterHint,
}

pub(super) async fn scan_file(context: &ScanContext<'_>, work: ScanWork) -> Result<FileScan> {
    let (table, loaded, options) = (context.table, context.loaded, context.options);
    let ScanWork {
        data,
        open: early_open,
        group_ids,
        projection,
        named,
        index_keys,
    } = work;
    let (data, group_ids, projection) = (&data, &group_ids[..], &*projection);
    if data.file.file_format() == DataFileFormat::Orc {
        return scan_orc(context, data, group_ids, projection, &index_keys).await;
    }
    let by_position = named.as_ref().is_some_and(|rows| {
        rows.len().saturating_mul(2 * TYPICAL_PAGE_ROWS) <= data.file.record_count()
    });
    let file = match early_open {
        Some(open) => early::finish(data.path(), open).await?,
        None => {
            ParquetFile::open_learning(
                &table.file_io,
                data.path(),
                data.file.file_size_in_bytes(),
                data.row_groups(),
                context.footer_hint,
                by_position,
            )
            .await?
        }
    };
    let mut file = file.with_name_mapping(context.name_mapping);
    // The invariant: every candidate's key columns are resolved faithfully (by field id,
    // through the name mapping, or as a known default), or the whole resolve fails with
    // an error naming the file and the field. Checked before any pruning, so a file whose
    // row groups are all skipped is held to it too.
    let sources: HashMap<i32, FieldSource> = projection
        .fields
        .iter()
        .zip(&projection.ids)
        .map(|(f, &id)| Ok((id, file.source_of(f)?)))
        .collect::<Result<_>>()?;
    let total_groups = file.row_group_rows().len();
    let mut keep = vec![!options.row_group_pruning; total_groups];
    let mut pruned_by_bloom = 0;
    let mut bloom_filters_read = 0;
    // Had the file held no deleted value, the chance that the filters would have ruled
    // out every row group that statistics keep (so that it is not read). `None` once a
    // row group is kept without a filter's say: it is read whatever the filters say.
    let mut skip_chance: Option<f64> = options.row_group_pruning.then_some(1.0);
    if options.row_group_pruning {
        let candidates: Vec<Vec<Option<ColumnRanges>>> = group_ids
            .iter()
            .map(|&g| loaded[g].row_group_candidates(&file, &sources))
            .collect::<Result<_>>()?;
        for (rg, keep_rg) in keep.iter_mut().enumerate() {
            let mut by_stats = false;
            // Had it held none of the values, the chance that no group would keep it.
            let mut ruled_out_chance = Some(1.0);
            for (n, &g) in group_ids.iter().enumerate() {
                let Some(ranges) = &candidates[n][rg] else {
                    continue;
                };
                by_stats = true;
                let verdict = if options.bloom_pruning {
                    loaded[g]
                        .bloom_verdict(&mut file, rg, ranges, &mut bloom_filters_read)
                        .await?
                } else {
                    BloomVerdict::UNPROBED
                };
                ruled_out_chance = ruled_out_chance
                    .zip(verdict.pass_chance)
                    .map(|(c, pass)| c * (1.0 - pass));
                if !verdict.ruled_out {
                    // The groups after it are not probed: the chance leaves them out,
                    // so it understates, never overstates, the filters' false positives.
                    *keep_rg = true;
                    break;
                }
            }
            if by_stats && !*keep_rg {
                pruned_by_bloom += 1;
            }
            skip_chance = skip_chance.zip(ruled_out_chance).map(|(m, c)| m * c);
        }
    }
    let selected: Vec<usize> = (0..total_groups).filter(|&i| keep[i]).collect();
    let mut scan = FileScan {
        path: data.path().to_string(),
        positions: RoaringTreemap::new(),
        row_groups_read: selected.len() as u64,
        row_groups_pruned: (total_groups - selected.len()) as u64,
        row_groups_pruned_by_bloom: pruned_by_bloom,
        bloom_filters_read,
        read_chance_if_absent: skip_chance.map(|skip| 1.0 - skip),
        footer: file.footer_read(),
        offset_index: file.offset_index_read(),
        by_pages: by_position && file.has_offset_index(),
        holds_deleted_value: false,
        rows_scanned: 0,
        bytes_read: 0,
        index_keys: Vec::new(),
    };
    if selected.is_empty() {
        return Ok(scan);
    }

    // Read the union of the groups' key columns once.
    let leaves: Vec<usize> = projection
        .ids
        .iter()
        .filter_map(|&id| file.leaf_index(id))
        .collect();
    // Of the named rows, those in the row groups pruning kept.
    let rg_rows = file.row_group_rows();
    let starts = row_group_starts(&rg_rows);
    let named = named.map(|mut rows| {
        for (rg, &kept) in keep.iter().enumerate() {
            if !kept {
                rows.remove_range(starts[rg]..starts[rg] + rg_rows[rg]);
            }
        }
        rows
    });
    // The stream fetches one row group's chunks (or pages) at a time: the largest is
    // what this scan holds, until it is done.
    let largest = {
        let bytes_of = |row_groups: &[usize]| match &named {
            Some(rows) => file.positioned_bytes(&leaves, row_groups, rows),
            None => file.projected_bytes(&leaves, row_groups),
        };
        scan.bytes_read = bytes_of(&selected);
        if let Some(rows) = &named {
            // Only the row groups holding a named row are read.
            scan.row_groups_read = selected
                .iter()
                .filter(|&&rg| rows.range_cardinality(starts[rg]..starts[rg] + rg_rows[rg]) > 0)
                .count() as u64;
        }
        selected
            .iter()
            .map(|&rg| bytes_of(&[rg]))
            .max()
            .unwrap_or(0)
    };
    let _held = context.budget.bytes(largest).await?;

    let matches = |scan: &mut FileScan,
                   position_of: &(dyn Fn(usize) -> u64 + Sync),
                   batch: &RecordBatch|
     -> Result<()> {
        scan.rows_scanned += batch.num_rows() as u64;
        for &g in group_ids {
            scan.holds_deleted_value |= match_batch(
                &loaded[g],
                data,
                batch,
                &projection.column_of,
                position_of,
                &mut scan.positions,
            )?;
        }
        Ok(())
    };
    match named {
        Some(rows) => {
            let mut stream = Box::pin(file.read_positions_as(
                &projection.fields,
                projection.target.clone(),
                &rows,
                options.batch_size,
            )?);
            while let Some((at, batch)) = stream.try_next().await? {
                matches(&mut scan, &|i| at[i], &batch)?;
            }
        }
        None => {
            // Every row read, in position order: the index can have their hashes.
            let whole = selected.len() == total_groups;
            let mut hashes: Vec<Vec<i64>> = if whole {
                index_keys.iter().map(|_| Vec::new()).collect()
            } else {
                Vec::new()
            };
            let mut stream = Box::pin(file.read_as(
                &projection.fields,
                projection.target.clone(),
                Some(selected),
                options.batch_size,
            )?);
            while let Some((first, batch)) = stream.try_next().await? {
                matches(&mut scan, &|i| first + i as u64, &batch)?;
                hash_for_index(loaded, projection, &index_keys, &batch, &mut hashes)?;
            }
            scan.index_keys = index_hashes(loaded, &index_keys, hashes);
        }
    }
    Ok(scan)
}

/// Adds the key hashes of `batch`'s rows to `hashes`, one list per group of
/// `index_keys` (see [`ScanWork::index_keys`]).
fn hash_for_index(
    loaded: &[GroupKeys],
    projection: &KeyProjection,
    index_keys: &[usize],
    batch: &RecordBatch,
    hashes: &mut [Vec<i64>],
) -> Result<()> {
    for (&g, out) in index_keys.iter().zip(hashes) {
        let key_columns = &loaded[g].key_columns;
        let columns: Vec<ArrayRef> = key_columns
            .field_ids
            .iter()
            .map(|id| batch.column(projection.column_of[id]).clone())
            .collect();
        crate::key_index::hash::hash_keys(key_columns, &columns, out)?;
    }
    Ok(())
}

/// The hashes of every row of a file read whole, by the field set of each group.
fn index_hashes(
    loaded: &[GroupKeys],
    index_keys: &[usize],
    hashes: Vec<Vec<i64>>,
) -> Vec<(Vec<i32>, Vec<i64>)> {
    index_keys
        .iter()
        .zip(hashes)
        .map(|(&g, hashes)| (loaded[g].group.equality_ids.clone(), hashes))
        .collect()
}

/// The scan of an ORC data file: read whole, every row matched (row positions named by
/// a key index are among them). eqdv prunes by Parquet row-group statistics and bloom
/// filters only: an ORC file's stripes are all read.
async fn scan_orc(
    context: &ScanContext<'_>,
    data: &LiveFile,
    group_ids: &[usize],
    projection: &KeyProjection,
    index_keys: &[usize],
) -> Result<FileScan> {
    let size = data.file.file_size_in_bytes();
    let file = OrcFile::open(&context.table.file_io, data.path(), Some(size))
        .await?
        .with_name_mapping(context.name_mapping);
    // The invariant of [`scan_file`]: every key column resolves faithfully, or the
    // resolve fails naming the file and the field.
    for field in &projection.fields {
        file.columns().source_of(field)?;
    }
    let fetched = file.fetched();
    let footer = FooterRead {
        requests: 1,
        bytes: fetched.load(Ordering::Relaxed),
    };
    let stripes = file.stripes();
    let _held = context.budget.bytes(size).await?;
    let mut scan = FileScan {
        path: data.path().to_string(),
        positions: RoaringTreemap::new(),
        row_groups_read: stripes,
        row_groups_pruned: 0,
        row_groups_pruned_by_bloom: 0,
        bloom_filters_read: 0,
        read_chance_if_absent: None,
        footer,
        offset_index: FooterRead::default(),
        by_pages: false,
        holds_deleted_value: false,
        rows_scanned: 0,
        bytes_read: 0,
        index_keys: Vec::new(),
    };
    let mut hashes: Vec<Vec<i64>> = index_keys.iter().map(|_| Vec::new()).collect();
    let mut stream = Box::pin(file.read_as(
        &projection.fields,
        projection.target.clone(),
        context.options.batch_size,
    )?);
    while let Some((first, batch)) = stream.try_next().await? {
        scan.rows_scanned += batch.num_rows() as u64;
        for &g in group_ids {
            scan.holds_deleted_value |= match_batch(
                &context.loaded[g],
                data,
                &batch,
                &projection.column_of,
                &|i| first + i as u64,
                &mut scan.positions,
            )?;
        }
        hash_for_index(context.loaded, projection, index_keys, &batch, &mut hashes)?;
    }
    scan.index_keys = index_hashes(context.loaded, index_keys, hashes);
    scan.bytes_read = fetched.load(Ordering::Relaxed) - footer.bytes;
    Ok(scan)
}

/// Adds the positions of `batch` that `group` deletes; true when some row holds a
/// deleted key at all (whether or not the delete is newer than the data file).
fn match_batch(
    group: &GroupKeys,
    data: &LiveFile,
    batch: &RecordBatch,
    column_of: &HashMap<i32, usize>,
    position_of: &(dyn Fn(usize) -> u64 + Sync),
    positions: &mut RoaringTreemap,
) -> Result<bool> {
    let mut held = false;
    let mut deletes = |seq: Option<i64>| {
        held |= seq.is_some();
        seq.is_some_and(|seq| data.data_sequence_number < seq)
    };
    match &group.keys {
        KeySet::Long(keys) => {
            let column = batch
                .column(column_of[&group.key_columns.field_ids[0]])
                .as_primitive_opt::<Int64Type>()
                .ok_or_else(|| {
                    Error::file(data.path(), "key column is not a long", "type mismatch")
                })?;
            if column.null_count() == 0 {
                for (offset, &value) in column.values().iter().enumerate() {
                    if deletes(keys.get(value)) {
                        positions.insert(position_of(offset));
                    }
                }
            } else {
                for (offset, value) in column.iter().enumerate() {
                    let seq = match value {
                        Some(v) => keys.get(v),
                        None => keys.null(),
                    };
                    if deletes(seq) {
                        positions.insert(position_of(offset));
                    }
                }
            }
        }
        KeySet::Str(keys) => {
            let column = batch.column(column_of[&group.key_columns.field_ids[0]]);
            let is_string =
                super::string_keys::for_each_string(column.as_ref(), |offset, value| {
                    let seq = match value {
                        Some(v) => keys.get(v),
                        None => keys.null(),
                    };
                    if deletes(seq) {
                        positions.insert(position_of(offset));
                    }
                });
            if !is_string {
                return Err(Error::file(
                    data.path(),
                    "key column is not a string",
                    "type mismatch",
                ));
            }
        }
        KeySet::Rows(keys) => {
            let columns: Vec<ArrayRef> = group
                .key_columns
                .field_ids
                .iter()
                .map(|id| batch.column(column_of[id]).clone())
                .collect();
            let rows = group.key_columns.encode(&columns)?;
            for (offset, row) in rows.iter().enumerate() {
                if deletes(keys.get(row.as_ref()).copied()) {
                    positions.insert(position_of(offset));
                }
            }
        }
    }
    Ok(held)
}

/// Result of scanning one data file.
pub(super) struct FileScan {
    pub(super) path: String,
    pub(super) positions: RoaringTreemap,
    pub(super) row_groups_read: u64,
    pub(super) row_groups_pruned: u64,
    pub(super) row_groups_pruned_by_bloom: u64,
    pub(super) bloom_filters_read: u64,
    /// Had the file held no deleted value, the chance that the bloom filters would have
    /// let it be read anyway; `None` when some row group was kept without their say.
    pub(super) read_chance_if_absent: Option<f64>,
    /// Some row read holds a deleted key (a newer row of it included).
    pub(super) holds_deleted_value: bool,
    pub(super) footer: FooterRead,
    pub(super) offset_index: FooterRead,
    /// Read by position with an offset index: only the pages holding the named rows.
    pub(super) by_pages: bool,
    pub(super) rows_scanned: u64,
    /// Per field set, the key hash of every row (the file read whole; see
    /// [`ScanWork::index_keys`]).
    pub(super) index_keys: Vec<(Vec<i32>, Vec<i64>)>,
    pub(super) bytes_read: u64,
}
