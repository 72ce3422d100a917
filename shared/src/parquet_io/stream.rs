//! Reading a file's batches in the table's types: the chosen columns and row groups,
//! fields the file lacks filled in, promoted types cast, each batch with the position of
//! its first row.

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef as ArrowSchemaRef;
use futures::{Stream, StreamExt};
use iceberg::spec::NestedFieldRef;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{RowSelection, RowSelector};
use roaring::RoaringTreemap;

use super::{FieldSource, ParquetFile, target_schema};
use crate::columns::project;
use crate::{Error, Result};

impl ParquetFile {
    /// Streams `(first position, batch)` for the chosen row groups (all when `None`),
    /// with batches of `fields` in the table's types (see [`target_schema`]): fields the
    /// file lacks as their default or nulls, promoted types cast. Fails, naming the file
    /// and the field, when a field cannot be read faithfully (see
    /// [`ParquetFile::source_of`]).
    pub fn read(
        self,
        fields: &[NestedFieldRef],
        row_groups: Option<Vec<usize>>,
        batch_size: usize,
    ) -> Result<impl Stream<Item = Result<(u64, RecordBatch)>> + Send + use<>> {
        let target = target_schema(fields)?;
        self.read_as(fields, target, row_groups, batch_size)
    }

    /// [`ParquetFile::read`], with `target` the [`target_schema`] of `fields` (which a
    /// caller reading the same fields from many files builds once).
    pub fn read_as(
        self,
        fields: &[NestedFieldRef],
        target: ArrowSchemaRef,
        row_groups: Option<Vec<usize>>,
        batch_size: usize,
    ) -> Result<impl Stream<Item = Result<(u64, RecordBatch)>> + Send + use<>> {
        let rg_rows = self.row_group_rows();
        let selected: Vec<usize> = row_groups.unwrap_or_else(|| (0..rg_rows.len()).collect());
        let rg_start = row_group_starts(&rg_rows);
        let path = self.path.clone();
        let batches = self.read_selected(fields, target, selected.clone(), None, batch_size)?;

        // Track positions: batches never span row groups' boundaries in position terms
        // because we count rows in the order the selected groups are read.
        let mut group_iter = selected.into_iter().map(move |g| (rg_start[g], rg_rows[g]));
        let mut current = group_iter.next();
        let mut consumed_in_group = 0u64;
        Ok(batches.map(move |batch| {
            let batch = batch?;
            let Some((start, rows)) = current else {
                return Err(Error::file(
                    &path,
                    "more rows than row groups declare",
                    "corrupt file",
                ));
            };
            let first = start + consumed_in_group;
            consumed_in_group += batch.num_rows() as u64;
            if consumed_in_group >= rows {
                if consumed_in_group > rows {
                    return Err(Error::file(
                        &path,
                        "a batch spans row groups",
                        "unexpected reader behaviour",
                    ));
                }
                current = group_iter.next();
                consumed_in_group = 0;
            }
            Ok((first, batch))
        }))
    }

    /// Streams `(positions, batch)` of the rows at `positions` (ascending) and nowhere
    /// else, each batch with the position of each of its rows: [`ParquetFile::read_as`]
    /// for a few known rows. Only the row groups holding them are read and, when the
    /// file was opened `by_position` and has an offset index, only the pages holding
    /// them. A position past the file's last row is an error (the caller's positions
    /// did not come from this file).
    pub fn read_positions_as(
        self,
        fields: &[NestedFieldRef],
        target: ArrowSchemaRef,
        positions: &RoaringTreemap,
        batch_size: usize,
    ) -> Result<impl Stream<Item = Result<(Vec<u64>, RecordBatch)>> + Send> {
        let rows: u64 = self.row_group_rows().iter().sum();
        if let Some(last) = positions.max().filter(|&p| p >= rows) {
            return Err(Error::file(
                &self.path,
                format!("position {last} is past the file's {rows} rows"),
                "positions of another file",
            ));
        }
        let (selected, selection) = select_positions(&self.row_group_rows(), positions);
        let path = self.path.clone();
        let batches = self.read_selected(fields, target, selected, Some(selection), batch_size)?;
        let mut wanted = positions.iter();
        Ok(batches.map(move |batch| {
            let batch = batch?;
            let at: Vec<u64> = wanted.by_ref().take(batch.num_rows()).collect();
            if at.len() != batch.num_rows() {
                return Err(Error::file(
                    &path,
                    "more rows than were selected",
                    "unexpected reader behaviour",
                ));
            }
            Ok((at, batch))
        }))
    }

    /// Batches of `fields` in `target`'s types from the `row_groups` (in that order),
    /// of the rows `selection` selects in them (all when `None`).
    fn read_selected(
        self,
        fields: &[NestedFieldRef],
        target: ArrowSchemaRef,
        row_groups: Vec<usize>,
        selection: Option<RowSelection>,
        batch_size: usize,
    ) -> Result<impl Stream<Item = Result<RecordBatch>> + Send + use<>> {
        let (sources, projected) = self.columns.projection(fields, &target)?;

        let path = self.path.clone();
        // Whole top-level columns (a nested one with all its leaves; the Arrow schema's
        // top-level fields are the Parquet schema's roots, in order), but of a struct
        // holding a key only the key's leaf.
        let descr = self.metadata().file_metadata().schema_descr();
        let mut leaves: Vec<usize> = Vec::new();
        for source in &sources {
            let FieldSource::Column { index, path } = source else {
                continue;
            };
            let (root, names) = self.columns.path_names(*index, path);
            for i in 0..descr.num_columns() {
                let whole = path.is_empty() && descr.get_column_root_idx(i) == *index;
                let column = descr.column(i);
                let parts = column.path().parts();
                let on_path = !path.is_empty()
                    && parts.len() == names.len() + 1
                    && parts[0] == root
                    && parts[1..].iter().zip(&names).all(|(p, n)| p == n);
                if whole || on_path {
                    leaves.push(i);
                }
            }
        }
        leaves.sort_unstable();
        leaves.dedup();
        let mask = ProjectionMask::leaves(descr, leaves);
        let mut builder = self
            .builder
            .with_projection(mask)
            .with_row_groups(row_groups)
            .with_batch_size(batch_size);
        if let Some(selection) = selection {
            builder = builder.with_row_selection(selection);
        }
        let stream = builder
            .build()
            .map_err(|e| Error::file(&path, "cannot read Parquet file", e))?;
        let batches = stream.map(move |batch| {
            let batch = batch.map_err(|e| Error::file(&path, "cannot decode Parquet data", e))?;
            project(&batch, &target, &projected)
                .map_err(|e| Error::file(&path, "cannot project columns to the table schema", e))
        });
        Ok(super::stream_unless_panicked(
            self.path.clone(),
            "cannot decode Parquet data",
            batches,
        ))
    }
}

/// The position of each row group's first row.
pub fn row_group_starts(rg_rows: &[u64]) -> Vec<u64> {
    rg_rows
        .iter()
        .scan(0u64, |acc, n| {
            let start = *acc;
            *acc += n;
            Some(start)
        })
        .collect()
}

/// The row groups (ascending) holding some of `positions`, and the selection of exactly
/// those rows within them, in the reader's terms (rows of the chosen groups, in order).
fn select_positions(rg_rows: &[u64], positions: &RoaringTreemap) -> (Vec<usize>, RowSelection) {
    let starts = row_group_starts(rg_rows);
    let mut groups = Vec::new();
    let mut selectors: Vec<RowSelector> = Vec::new();
    let mut push = |selector: RowSelector| match selectors.last_mut() {
        Some(last) if last.skip == selector.skip => last.row_count += selector.row_count,
        _ => selectors.push(selector),
    };
    let mut positions = positions.iter().peekable();
    for (g, (&start, &rows)) in starts.iter().zip(rg_rows).enumerate() {
        let end = start + rows;
        let mut cursor = start;
        while let Some(p) = positions.next_if(|&p| p < end) {
            if cursor == start {
                groups.push(g);
            }
            if p > cursor {
                push(RowSelector::skip(usize_of(p - cursor)));
            }
            push(RowSelector::select(1));
            cursor = p + 1;
        }
        if cursor > start && cursor < end {
            push(RowSelector::skip(usize_of(end - cursor)));
        }
    }
    (groups, RowSelection::from(selectors))
}

fn usize_of(rows: u64) -> usize {
    usize::try_from(rows).unwrap_or(usize::MAX)
}
