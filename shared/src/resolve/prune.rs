//! Pruning a group's candidates without reading their rows: by the manifest's column
//! bounds (whole files), by Parquet row-group statistics and by bloom filters (row
//! groups). Always conservative: whatever may hold a deleted key is kept.

use std::collections::HashMap;

use arrow_array::{Array, ArrayRef};
use arrow_schema::DataType;
use iceberg::spec::Literal;
use parquet::arrow::arrow_reader::statistics::StatisticsConverter;

use super::group_keys::{GroupKeys, KeySet};
use crate::keys::KeyColumns;
use crate::parquet_io::{FieldSource, ParquetFile};
use crate::table::LiveFile;
use crate::{Error, Result};

/// A row group's deleted values per key column, as `row_group_candidates` finds them:
/// `Some(range)` indexes the values within the row group's exact statistics; `None`
/// when that is unknown (no usable statistics, column absent, null keys).
pub(super) type ColumnRanges = Vec<Option<std::ops::Range<usize>>>;

/// What bound pruning asks of a set of deleted values, per key column: a group's whole
/// key set, or the keys of the delete files loaded so far (`early`).
pub(super) trait DeletedValues {
    /// Whether key column `i` holds a deleted null.
    fn column_has_null(&self, i: usize) -> bool;
    /// Whether some deleted value of key column `i` lies within `[lower, upper]`
    /// (encoded as `KeyColumns` encodes them; either end may be open).
    fn column_any_within(
        &self,
        i: usize,
        lower: Option<&[u8]>,
        upper: Option<&[u8]>,
    ) -> Result<bool>;
}

/// False when the file's manifest bounds prove that none of `values` (of a group whose
/// key is `key_columns`) is in it. Monotone: true for some of a group's values implies
/// true for all of them, which is what lets a footer be opened before every key loaded.
pub(super) fn may_match_bounds(
    key_columns: &KeyColumns,
    values: &impl DeletedValues,
    data: &LiveFile,
) -> bool {
    let file = &data.file;
    for (i, &field_id) in key_columns.field_ids.iter().enumerate() {
        // A file written before the field existed has no statistics for it and reads
        // its initial-default: statistics cannot rule it out.
        let has_bounds = file.lower_bounds().contains_key(&field_id)
            && file.upper_bounds().contains_key(&field_id);
        if key_columns.fields[i].initial_default.is_some() && !has_bounds {
            continue;
        }
        let null_count = file.null_value_counts().get(&field_id).copied();
        let value_count = file.value_counts().get(&field_id).copied();
        let may_match_null = values.column_has_null(i) && null_count != Some(0);
        let all_null = matches!((null_count, value_count), (Some(n), Some(v)) if n == v);
        let may_match_value = !all_null && {
            let lower = file
                .lower_bounds()
                .get(&field_id)
                .and_then(|d| key_columns.encode_bound(i, d));
            let upper = file
                .upper_bounds()
                .get(&field_id)
                .and_then(|d| key_columns.encode_bound(i, d));
            // A bound that cannot be read back rules nothing out.
            values
                .column_any_within(
                    i,
                    lower.as_ref().map(|r| r.row().data()),
                    upper.as_ref().map(|r| r.row().data()),
                )
                .unwrap_or(true)
        };
        if !may_match_null && !may_match_value {
            return false;
        }
    }
    true
}

impl GroupKeys {
    /// False when the file's manifest bounds prove that no key of the group is in it.
    pub(super) fn may_match_file(&self, data: &LiveFile) -> bool {
        may_match_bounds(&self.key_columns, self, data)
    }

    /// Row groups of `file` that may hold a key, by Parquet statistics: `None` for a
    /// row group that cannot, else the deleted values in its range per key column.
    pub(super) fn row_group_candidates(
        &self,
        file: &ParquetFile,
        sources: &HashMap<i32, FieldSource>,
    ) -> Result<Vec<Option<ColumnRanges>>> {
        let row_groups = file.metadata().row_groups();
        let columns = self.key_columns.field_ids.len();
        let mut keep = vec![true; row_groups.len()];
        let mut ranges: Vec<ColumnRanges> = vec![vec![None; columns]; row_groups.len()];
        let parquet_schema = file.metadata().file_metadata().schema_descr();
        for (i, &field_id) in self.key_columns.field_ids.iter().enumerate() {
            let constant = match sources.get(&field_id) {
                Some(FieldSource::Column { .. }) => None,
                Some(FieldSource::Constant(value)) => Some(value),
                None => {
                    return Err(Error::file(
                        file.path(),
                        format!("key field id {field_id} was not resolved before pruning"),
                        "internal error",
                    ));
                }
            };
            if let Some(value) = constant {
                // Column absent from this file: every row reads the field's default (or
                // null), so the row groups may match only if that value was deleted.
                if !self.may_match_constant(i, value.as_ref())? {
                    keep.iter_mut().for_each(|k| *k = false);
                }
                continue;
            }
            let Some(field) = file.field_by_id(field_id) else {
                continue;
            };
            let Some(leaf) = file.leaf_index(field_id) else {
                continue;
            };
            let Ok(converter) =
                StatisticsConverter::try_new(field.name(), file.arrow_schema(), parquet_schema)
            else {
                continue;
            };
            let target = self.key_columns.data_type(i);
            let (Ok(mins), Ok(maxes), Ok(nulls)) = (
                converter.row_group_mins(row_groups.iter()),
                converter.row_group_maxes(row_groups.iter()),
                converter.row_group_null_counts(row_groups.iter()),
            ) else {
                continue;
            };
            let (Some(mins), Some(maxes)) = (cast_to(&mins, target), cast_to(&maxes, target))
            else {
                continue;
            };
            let (Ok(min_rows), Ok(max_rows)) = (
                self.key_columns.encode_column(i, &mins),
                self.key_columns.encode_column(i, &maxes),
            ) else {
                continue;
            };
            let byte_like = matches!(
                target,
                DataType::Utf8 | DataType::LargeUtf8 | DataType::Binary | DataType::LargeBinary
            );
            for (rg, keep_rg) in keep.iter_mut().enumerate() {
                if !*keep_rg {
                    continue;
                }
                let stats = row_groups[rg].column(leaf).statistics();
                // Truncated (inexact) byte statistics are not safe bounds.
                let exact =
                    stats.is_some_and(|s| !byte_like || (s.min_is_exact() && s.max_is_exact()));
                let num_rows = row_groups[rg].num_rows().max(0) as u64;
                let null_count = (!nulls.is_null(rg)).then(|| nulls.value(rg));
                let may_match_null = self.column_has_null(i) && null_count != Some(0);
                let all_null = null_count == Some(num_rows);
                let may_match_value = !all_null
                    && (!exact || mins.is_null(rg) || maxes.is_null(rg) || {
                        let lo = min_rows.row(rg);
                        let hi = max_rows.row(rg);
                        let range = self.column_range_within(i, lo.data(), hi.data())?;
                        let any = !range.is_empty();
                        if !may_match_null {
                            ranges[rg][i] = Some(range);
                        }
                        any
                    });
                if !may_match_null && !may_match_value {
                    *keep_rg = false;
                }
            }
        }
        Ok(keep
            .into_iter()
            .zip(ranges)
            .map(|(k, r)| k.then_some(r))
            .collect())
    }

    /// Whether key column `index` of the group holds `value` (null when `None`) among its
    /// deleted values: what every row of a file that lacks the column reads.
    fn may_match_constant(&self, index: usize, value: Option<&Literal>) -> Result<bool> {
        let Some(value) = value else {
            return Ok(self.column_has_null(index));
        };
        let data_type = self.key_columns.data_type(index);
        let Some(array) = crate::columns::literal_to_array(value, data_type) else {
            // Cannot encode it: the rows must be read (and then fail loudly if need be).
            return Ok(true);
        };
        let encoded = self.key_columns.encode_column(index, &array)?;
        let row = encoded.row(0);
        Ok(!self
            .column_range_within(index, row.data(), row.data())?
            .is_empty())
    }
}

impl DeletedValues for GroupKeys {
    fn column_has_null(&self, i: usize) -> bool {
        match &self.keys {
            KeySet::Long(keys) => keys.has_null(),
            KeySet::Rows(_) | KeySet::Str(_) => self.columns[i].has_null,
        }
    }

    fn column_any_within(
        &self,
        i: usize,
        lower: Option<&[u8]>,
        upper: Option<&[u8]>,
    ) -> Result<bool> {
        match &self.keys {
            KeySet::Long(keys) => {
                let range =
                    keys.range_within(self.long_bound(i, lower)?, self.long_bound(i, upper)?);
                Ok(!range.is_empty())
            }
            KeySet::Rows(_) | KeySet::Str(_) => Ok(self.columns[i].any_within(lower, upper)),
        }
    }
}

fn cast_to(array: &ArrayRef, to: &DataType) -> Option<ArrayRef> {
    if array.data_type() == to {
        Some(array.clone())
    } else {
        arrow_cast::cast(array, to).ok()
    }
}
