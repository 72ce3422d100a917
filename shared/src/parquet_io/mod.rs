//! Reading Parquet files by Iceberg field id, the way every Iceberg reader does.
//!
//! This module is the one place that decides which column of a file holds a table field,
//! and every read of a data or delete file goes through it, so eqdv's resolver and its
//! own reader follow the same rules (what readers such as Iceberg Java do):
//! - a file with Parquet field ids: columns are found by `PARQUET:field_id`, never by
//!   name, so renamed columns resolve correctly;
//! - a file without any field ids (imported by migrate / add_files, or written by a tool
//!   that is not Iceberg): columns are found through the table's name mapping
//!   (`schema.name-mapping.default`); without one the file cannot be read faithfully and
//!   reading it is an error that names the file and the field;
//! - a field the file lacks (written before the column was added) reads as the field's
//!   `initial-default` (v3), or as null when it has none;
//! - a column stored as a type the table's type was promoted from (int to long, decimal
//!   widening, ...) is cast to the table's type; any other type is an error: eqdv never
//!   compares values it cannot convert exactly (casts are strict, never lossy to null).
//!
//! Positions are the row's ordinal in the file: row-group first row + offset.

use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch, UInt32Array, new_null_array};
use arrow_cast::CastOptions;
use arrow_schema::{DataType, Field, Schema as ArrowSchema, SchemaRef as ArrowSchemaRef};
use futures::{Stream, StreamExt};
use iceberg::io::FileIO;
use iceberg::spec::{Literal, NameMapping, NestedField, NestedFieldRef};
use parquet::arrow::async_reader::ParquetRecordBatchStreamBuilder;
use parquet::arrow::{PARQUET_FIELD_ID_META_KEY, ProjectionMask};
use parquet::file::metadata::ParquetMetaData;

use crate::parquet_reader::FileReader;
use crate::{Error, Result};

/// The Arrow schema eqdv reads `fields` into (field ids kept in the metadata).
pub fn target_schema(fields: &[NestedFieldRef]) -> Result<ArrowSchemaRef> {
    let struct_type = iceberg::spec::StructType::new(fields.to_vec());
    let schema = iceberg::spec::Schema::builder()
        .with_fields(struct_type.fields().to_vec())
        .build()?;
    Ok(Arc::new(iceberg::arrow::schema_to_arrow_schema(&schema)?))
}

/// How a file's top-level columns were given Iceberg field ids.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldIdSource {
    /// The file carries Parquet field ids (every Iceberg writer writes them).
    FileIds,
    /// The file has none; ids come from the table's name mapping.
    NameMapping,
    /// The file has none and the table has no name mapping: nothing can be resolved.
    Unresolvable,
}

/// Where the values of one table field come from in one file.
#[derive(Clone, Debug, PartialEq)]
pub enum FieldSource {
    /// Top-level column `index` of the file's Arrow schema.
    Column { index: usize },
    /// The file lacks the field: every row reads this value (the field's initial
    /// default), or null when `None`.
    Constant(Option<Literal>),
}

/// An open Parquet file with its footer read.
pub struct ParquetFile {
    path: String,
    builder: ParquetRecordBatchStreamBuilder<FileReader>,
    /// Field id of each top-level column of the file's Arrow schema, as resolved.
    ids: Vec<Option<i32>>,
    id_source: FieldIdSource,
    /// Field ids the name mapping names (when ids come from it).
    mapped_ids: Vec<i32>,
}

impl ParquetFile {
    /// Opens `path` and reads its footer (without page indexes: see
    /// [`crate::parquet_reader`]). `file_size` comes from the manifest, which saves a
    /// HEAD request.
    pub async fn open(file_io: &FileIO, path: &str, file_size: Option<u64>) -> Result<Self> {
        let input = file_io.new_input(path)?;
        let size = match file_size {
            Some(size) => size,
            None => {
                input
                    .metadata()
                    .await
                    .map_err(|e| Error::file(path, "cannot stat data file (missing?)", e))?
                    .size
            }
        };
        let reader = input
            .reader()
            .await
            .map_err(|e| Error::file(path, "cannot open data file (missing?)", e))?;
        Self::open_reader(path, FileReader::new(path, size, reader)).await
    }

    /// Opens `path` through `reader` (a [`FileReader`] of it) and reads its footer.
    pub async fn open_reader(path: &str, reader: FileReader) -> Result<Self> {
        let builder = ParquetRecordBatchStreamBuilder::new(reader)
            .await
            .map_err(|e| Error::file(path, "not a readable Parquet file", e))?;
        let ids: Vec<Option<i32>> = builder
            .schema()
            .fields()
            .iter()
            .map(|f| field_id_of(f))
            .collect();
        let has_ids = ids.iter().any(Option::is_some)
            || builder
                .metadata()
                .file_metadata()
                .schema_descr()
                .columns()
                .iter()
                .any(|c| c.self_type().get_basic_info().has_id());
        Ok(Self {
            path: path.to_string(),
            builder,
            ids,
            id_source: if has_ids {
                FieldIdSource::FileIds
            } else {
                FieldIdSource::Unresolvable
            },
            mapped_ids: Vec::new(),
        })
    }

    /// Resolves a file without field ids through the table's name mapping (as readers
    /// do). Files with field ids ignore the mapping.
    pub fn with_name_mapping(mut self, mapping: Option<&NameMapping>) -> Self {
        let Some(mapping) = mapping else {
            return self;
        };
        if self.id_source == FieldIdSource::FileIds {
            return self;
        }
        self.ids = self
            .builder
            .schema()
            .fields()
            .iter()
            .map(|f| {
                mapping
                    .fields()
                    .iter()
                    .find(|m| m.names().iter().any(|n| n == f.name()))
                    .and_then(|m| m.field_id())
            })
            .collect();
        self.mapped_ids = mapping
            .fields()
            .iter()
            .filter_map(|m| m.field_id())
            .collect();
        self.id_source = FieldIdSource::NameMapping;
        self
    }

    pub fn path(&self) -> &str {
        &self.path
    }

    pub fn id_source(&self) -> FieldIdSource {
        self.id_source
    }

    pub fn metadata(&self) -> &Arc<ParquetMetaData> {
        self.builder.metadata()
    }

    /// The bloom filter of column `leaf` in `row_group`, if the writer wrote one.
    pub async fn bloom_filter(
        &mut self,
        row_group: usize,
        leaf: usize,
    ) -> Result<Option<parquet::bloom_filter::Sbbf>> {
        self.builder
            .get_row_group_column_bloom_filter(row_group, leaf)
            .await
            .map_err(|e| Error::file(&self.path, "cannot read a bloom filter", e))
    }

    /// The file's Arrow schema (as the Parquet reader sees it).
    pub fn arrow_schema(&self) -> &ArrowSchemaRef {
        self.builder.schema()
    }

    fn top_level_index(&self, field_id: i32) -> Option<usize> {
        self.ids.iter().position(|id| *id == Some(field_id))
    }

    /// The file's top-level Arrow field holding Iceberg field id `field_id` (by its
    /// Parquet field id, or through the name mapping).
    pub fn field_by_id(&self, field_id: i32) -> Option<&Field> {
        self.top_level_index(field_id)
            .map(|i| self.builder.schema().field(i))
    }

    /// Where `field`'s values come from in this file, or an error naming the file and
    /// the field when they cannot be read faithfully: no field ids and no name mapping,
    /// a field the name mapping does not name, a required field the file lacks with no
    /// default, or a stored type that does not convert exactly to the table's type.
    pub fn source_of(&self, field: &NestedField) -> Result<FieldSource> {
        let refuse = |message: String| Error::FieldUnresolvable {
            path: self.path.clone(),
            field: field.name.clone(),
            field_id: field.id,
            message,
        };
        if let Some(index) = self.top_level_index(field.id) {
            let stored = self.builder.schema().field(index).data_type();
            let wanted = target_schema(&[Arc::new(field.clone())])?
                .field(0)
                .data_type()
                .clone();
            if !converts_exactly(stored, &wanted) {
                return Err(refuse(format!(
                    "the file stores it as {stored}, which eqdv cannot convert exactly to the \
                     table's type {}",
                    field.field_type
                )));
            }
            return Ok(FieldSource::Column { index });
        }
        match self.id_source {
            FieldIdSource::Unresolvable => {
                return Err(refuse(format!(
                    "the file has no Parquet field ids and the table has no {}, so its \
                     columns cannot be matched to the table's fields",
                    iceberg::spec::DEFAULT_SCHEMA_NAME_MAPPING
                )));
            }
            FieldIdSource::NameMapping if !self.mapped_ids.contains(&field.id) => {
                return Err(refuse(format!(
                    "the file has no Parquet field ids and the table's {} does not name \
                     this field",
                    iceberg::spec::DEFAULT_SCHEMA_NAME_MAPPING
                )));
            }
            _ => {}
        }
        // The file was written before the field existed.
        match &field.initial_default {
            Some(default) => Ok(FieldSource::Constant(Some(default.clone()))),
            None if field.required => Err(refuse(
                "the file lacks this required field and the field has no initial-default".into(),
            )),
            None => Ok(FieldSource::Constant(None)),
        }
    }

    /// Compressed bytes of the given leaf columns over the given row groups: what a
    /// projected read fetches.
    pub fn projected_bytes(&self, leaves: &[usize], row_groups: &[usize]) -> u64 {
        let meta = self.metadata();
        row_groups
            .iter()
            .map(|&rg| {
                leaves
                    .iter()
                    .map(|&c| meta.row_group(rg).column(c).compressed_size().max(0) as u64)
                    .sum::<u64>()
            })
            .sum()
    }

    /// Rows per row group, in file order.
    pub fn row_group_rows(&self) -> Vec<u64> {
        self.metadata()
            .row_groups()
            .iter()
            .map(|rg| rg.num_rows().max(0) as u64)
            .collect()
    }

    /// The Parquet leaf column index holding field `field_id`, if the file has it.
    pub fn leaf_index(&self, field_id: i32) -> Option<usize> {
        let top = self.top_level_index(field_id)?;
        // Only top-level primitive columns are keys; their leaf index equals their
        // position among leaves, which we find through the Parquet schema descriptor.
        let descr = self.metadata().file_metadata().schema_descr();
        let name = self.builder.schema().field(top).name();
        (0..descr.num_columns()).find(|&i| {
            let col = descr.column(i);
            col.path().parts().len() == 1 && col.path().parts()[0] == *name
        })
    }

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
    ) -> Result<impl Stream<Item = Result<(u64, RecordBatch)>> + Send> {
        let target = target_schema(fields)?;
        let sources = fields
            .iter()
            .map(|f| self.source_of(f))
            .collect::<Result<Vec<_>>>()?;
        let mut projected: Vec<Projected> = Vec::with_capacity(fields.len());
        for (source, field) in sources.iter().zip(target.fields()) {
            projected.push(match source {
                FieldSource::Column { index } => {
                    Projected::Column(self.builder.schema().field(*index).name().clone())
                }
                FieldSource::Constant(None) => Projected::Null,
                FieldSource::Constant(Some(value)) => {
                    let one = crate::keys::literal_to_array(value, field.data_type()).ok_or_else(
                        || {
                            Error::file(
                                &self.path,
                                format!(
                                    "the initial-default of field {} cannot be read as {}",
                                    field.name(),
                                    field.data_type()
                                ),
                                "unsupported default",
                            )
                        },
                    )?;
                    Projected::Constant(one)
                }
            });
        }

        let path = self.path.clone();
        let rg_rows = self.row_group_rows();
        let selected: Vec<usize> = row_groups.unwrap_or_else(|| (0..rg_rows.len()).collect());
        let rg_start: Vec<u64> = rg_rows
            .iter()
            .scan(0u64, |acc, n| {
                let start = *acc;
                *acc += n;
                Some(start)
            })
            .collect();

        // Whole top-level columns (a nested one with all its leaves); the Arrow schema's
        // top-level fields are the Parquet schema's roots, in order.
        let mut roots: Vec<usize> = sources
            .iter()
            .filter_map(|s| match s {
                FieldSource::Column { index } => Some(*index),
                FieldSource::Constant(_) => None,
            })
            .collect();
        roots.sort_unstable();
        roots.dedup();
        let mask = ProjectionMask::roots(self.metadata().file_metadata().schema_descr(), roots);
        let stream = self
            .builder
            .with_projection(mask)
            .with_row_groups(selected.clone())
            .with_batch_size(batch_size)
            .build()
            .map_err(|e| Error::file(&path, "cannot read Parquet file", e))?;

        // Track positions: batches never span row groups' boundaries in position terms
        // because we count rows in the order the selected groups are read.
        let mut group_iter = selected.into_iter().map(move |g| (rg_start[g], rg_rows[g]));
        let mut current = group_iter.next();
        let mut consumed_in_group = 0u64;
        let path2 = path.clone();
        Ok(stream.map(move |batch| {
            let batch = batch.map_err(|e| Error::file(&path2, "cannot decode Parquet data", e))?;
            let Some((start, rows)) = current else {
                return Err(Error::file(
                    &path2,
                    "more rows than row groups declare",
                    "corrupt file",
                ));
            };
            let first = start + consumed_in_group;
            consumed_in_group += batch.num_rows() as u64;
            if consumed_in_group >= rows {
                if consumed_in_group > rows {
                    return Err(Error::file(
                        &path2,
                        "a batch spans row groups",
                        "unexpected reader behaviour",
                    ));
                }
                current = group_iter.next();
                consumed_in_group = 0;
            }
            let projected = project(&batch, &target, &projected).map_err(|e| {
                Error::file(&path2, "cannot project columns to the table schema", e)
            })?;
            Ok((first, projected))
        }))
    }
}

/// What one output column of a read is made of.
enum Projected {
    /// The file's column of this name, cast to the table's type.
    Column(String),
    /// A one-element array repeated for every row (an initial default).
    Constant(ArrayRef),
    Null,
}

fn field_id_of(field: &Field) -> Option<i32> {
    field
        .metadata()
        .get(PARQUET_FIELD_ID_META_KEY)
        .and_then(|v| v.parse().ok())
}

/// True when values stored as `stored` convert to `wanted` without loss or change:
/// the same type, a promotion the Iceberg spec allows (int to long, float to double,
/// decimal widening at the same scale), a narrower integer or a coarser timestamp unit
/// that files from other writers store (tinyint, TIMESTAMP_MILLIS), or another Arrow
/// spelling of the same values (string and binary layouts, a timestamp's time zone name,
/// dictionary encoding). Nested columns (never keys) convert as Arrow casts them, field
/// by field; the cast is strict, so a value that does not fit fails the read.
pub fn converts_exactly(stored: &DataType, wanted: &DataType) -> bool {
    use DataType::*;
    match (stored, wanted) {
        (a, b) if a == b => true,
        (Dictionary(_, values), b) => converts_exactly(values, b),
        (Int8 | Int16 | UInt8 | UInt16, Int32 | Int64) | (Int32 | UInt32, Int64) => true,
        (Float16 | Float32, Float64) => true,
        (Decimal128(p1, s1), Decimal128(p2, s2)) => s1 == s2 && p1 <= p2,
        (Utf8 | LargeUtf8 | Utf8View, Utf8 | LargeUtf8) => true,
        (Binary | LargeBinary | BinaryView, Binary | LargeBinary) => true,
        (Timestamp(u1, tz1), Timestamp(u2, tz2)) => {
            unit_rank(u1) <= unit_rank(u2) && tz1.is_some() == tz2.is_some()
        }
        (Struct(_), Struct(_))
        | (List(_) | LargeList(_), List(_) | LargeList(_))
        | (Map(..), Map(..)) => arrow_cast::can_cast_types(stored, wanted),
        _ => false,
    }
}

/// Finer units rank higher: converting to a finer unit multiplies, exactly.
fn unit_rank(unit: &arrow_schema::TimeUnit) -> u8 {
    match unit {
        arrow_schema::TimeUnit::Second => 0,
        arrow_schema::TimeUnit::Millisecond => 1,
        arrow_schema::TimeUnit::Microsecond => 2,
        arrow_schema::TimeUnit::Nanosecond => 3,
    }
}

/// Builds a batch in `target`'s shape from `batch`.
fn project(
    batch: &RecordBatch,
    target: &ArrowSchemaRef,
    projected: &[Projected],
) -> std::result::Result<RecordBatch, arrow_schema::ArrowError> {
    let rows = batch.num_rows();
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(target.fields().len());
    for (field, source) in target.fields().iter().zip(projected) {
        let column = match source {
            Projected::Column(name) => match batch.column_by_name(name) {
                Some(col) if col.data_type() == field.data_type() => col.clone(),
                Some(col) => strict_cast(col, field.data_type())?,
                None => {
                    return Err(arrow_schema::ArrowError::SchemaError(format!(
                        "column {name} missing from a decoded batch"
                    )));
                }
            },
            Projected::Constant(one) => {
                let indices = UInt32Array::from(vec![0u32; rows]);
                arrow_select::take::take(one.as_ref(), &indices, None)?
            }
            Projected::Null => new_null_array(field.data_type(), rows),
        };
        columns.push(column);
    }
    let schema = Arc::new(ArrowSchema::new(
        target
            .fields()
            .iter()
            .map(|f| f.as_ref().clone().with_nullable(true))
            .collect::<Vec<_>>(),
    ));
    RecordBatch::try_new_with_options(
        schema,
        columns,
        &arrow_array::RecordBatchOptions::new().with_row_count(Some(rows)),
    )
}

/// A cast that fails rather than turning a value it cannot convert into a null.
fn strict_cast(
    col: &ArrayRef,
    to: &DataType,
) -> std::result::Result<ArrayRef, arrow_schema::ArrowError> {
    let options = CastOptions {
        safe: false,
        ..Default::default()
    };
    arrow_cast::cast_with_options(col, to, &options)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use arrow_array::cast::AsArray;
    use arrow_array::types::Int64Type;
    use arrow_array::{Int32Array, Int64Array, StringArray};
    use futures::TryStreamExt;
    use iceberg::spec::{MappedField, PrimitiveLiteral, PrimitiveType, Type};

    use super::*;

    /// Writes one row group of `columns` (name, optional field id, values) to `path`.
    fn write(path: &std::path::Path, columns: Vec<(&str, Option<i32>, ArrayRef)>) {
        let fields: Vec<Field> = columns
            .iter()
            .map(|(name, id, array)| {
                let f = Field::new(*name, array.data_type().clone(), true);
                match id {
                    Some(id) => f.with_metadata(HashMap::from([(
                        PARQUET_FIELD_ID_META_KEY.to_string(),
                        id.to_string(),
                    )])),
                    None => f,
                }
            })
            .collect();
        let schema = Arc::new(ArrowSchema::new(fields));
        let batch =
            RecordBatch::try_new(schema.clone(), columns.into_iter().map(|c| c.2).collect())
                .unwrap();
        let file = std::fs::File::create(path).unwrap();
        let mut writer = parquet::arrow::ArrowWriter::try_new(file, schema, None).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
    }

    async fn open(path: &std::path::Path) -> ParquetFile {
        let path = path.to_str().unwrap();
        ParquetFile::open(&FileIO::new_with_fs(), path, None)
            .await
            .unwrap()
    }

    fn long_field(id: i32, name: &str) -> NestedFieldRef {
        Arc::new(NestedField::optional(
            id,
            name,
            Type::Primitive(PrimitiveType::Long),
        ))
    }

    async fn read_longs(
        file: ParquetFile,
        fields: &[NestedFieldRef],
    ) -> Result<Vec<Vec<Option<i64>>>> {
        let batches: Vec<(u64, RecordBatch)> = file.read(fields, None, 1024)?.try_collect().await?;
        Ok((0..fields.len())
            .map(|c| {
                batches
                    .iter()
                    .flat_map(|(_, b)| {
                        b.column(c)
                            .as_primitive::<Int64Type>()
                            .iter()
                            .collect::<Vec<_>>()
                    })
                    .collect()
            })
            .collect())
    }

    fn ids_123() -> ArrayRef {
        Arc::new(Int64Array::from(vec![1, 2, 3]))
    }

    #[tokio::test]
    async fn files_without_field_ids_need_the_name_mapping() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("imported.parquet");
        write(&path, vec![("id", None, ids_123()), ("v", None, ids_123())]);
        let fields = [long_field(1, "id")];

        // No field ids and no mapping: refused, naming the file and the field.
        let file = open(&path).await;
        assert_eq!(file.id_source(), FieldIdSource::Unresolvable);
        let err = read_longs(file, &fields).await.unwrap_err();
        let message = err.to_string();
        assert!(
            matches!(err, Error::FieldUnresolvable { field_id: 1, .. }),
            "{err:?}"
        );
        assert!(
            message.contains("imported.parquet") && message.contains("field id"),
            "{message}"
        );
        assert!(message.contains("schema.name-mapping.default"), "{message}");

        // Through the mapping (by any of its names), the column is found.
        let mapping = NameMapping::new(vec![
            MappedField::new(Some(1), vec!["key".into(), "id".into()], vec![]),
            MappedField::new(Some(2), vec!["v".into()], vec![]),
        ]);
        let file = open(&path).await.with_name_mapping(Some(&mapping));
        assert_eq!(file.id_source(), FieldIdSource::NameMapping);
        assert_eq!(
            read_longs(file, &fields).await.unwrap(),
            vec![vec![Some(1), Some(2), Some(3)]]
        );

        // A field the mapping does not name cannot be told apart from a missing column.
        let unmapped = NameMapping::new(vec![MappedField::new(Some(2), vec!["v".into()], vec![])]);
        let file = open(&path).await.with_name_mapping(Some(&unmapped));
        let err = read_longs(file, &fields).await.unwrap_err();
        assert!(err.to_string().contains("does not name"), "{err}");

        // A field the mapping names but the file lacks (added after the import) is null.
        let later = NameMapping::new(vec![
            MappedField::new(Some(1), vec!["id".into()], vec![]),
            MappedField::new(Some(3), vec!["added".into()], vec![]),
        ]);
        let file = open(&path).await.with_name_mapping(Some(&later));
        assert_eq!(
            read_longs(file, &[long_field(3, "added")]).await.unwrap(),
            vec![vec![None, None, None]]
        );
    }

    #[tokio::test]
    async fn field_ids_win_over_the_name_mapping() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("with-ids.parquet");
        // Column "id" carries field id 7: a mapping naming "id" as field 1 is ignored.
        write(&path, vec![("id", Some(7), ids_123())]);
        let mapping = NameMapping::new(vec![MappedField::new(Some(1), vec!["id".into()], vec![])]);
        let file = open(&path).await.with_name_mapping(Some(&mapping));
        assert_eq!(file.id_source(), FieldIdSource::FileIds);
        assert_eq!(
            read_longs(file, &[long_field(1, "id"), long_field(7, "renamed")])
                .await
                .unwrap(),
            vec![vec![None, None, None], vec![Some(1), Some(2), Some(3)]]
        );
    }

    #[tokio::test]
    async fn missing_fields_read_their_initial_default() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.parquet");
        write(&path, vec![("id", Some(1), ids_123())]);
        let mut region = NestedField::optional(2, "region", Type::Primitive(PrimitiveType::String));
        region.initial_default = Some(Literal::Primitive(PrimitiveLiteral::String("eu".into())));
        let mut required = NestedField::required(3, "tier", Type::Primitive(PrimitiveType::Long));
        let file = open(&path).await;
        assert_eq!(
            file.source_of(&region).unwrap(),
            FieldSource::Constant(Some(Literal::Primitive(PrimitiveLiteral::String(
                "eu".into()
            ))))
        );
        // A required field the file lacks needs a default.
        assert!(file.source_of(&required).is_err());
        required.initial_default = Some(Literal::Primitive(PrimitiveLiteral::Long(5)));
        let batches: Vec<(u64, RecordBatch)> = file
            .read(&[Arc::new(region), Arc::new(required)], None, 2)
            .unwrap()
            .try_collect()
            .await
            .unwrap();
        let regions: Vec<Option<String>> = batches
            .iter()
            .flat_map(|(_, b)| {
                b.column(0)
                    .as_string::<i32>()
                    .iter()
                    .map(|v| v.map(str::to_string))
                    .collect::<Vec<_>>()
            })
            .collect();
        assert_eq!(regions, vec![Some("eu".to_string()); 3]);
        let tiers: Vec<Option<i64>> = batches
            .iter()
            .flat_map(|(_, b)| {
                b.column(1)
                    .as_primitive::<Int64Type>()
                    .iter()
                    .collect::<Vec<_>>()
            })
            .collect();
        assert_eq!(tiers, vec![Some(5); 3]);
    }

    #[tokio::test]
    async fn promoted_types_are_cast_and_other_types_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("typed.parquet");
        write(
            &path,
            vec![
                (
                    "small",
                    Some(1),
                    Arc::new(Int32Array::from(vec![1, -2, 3])) as ArrayRef,
                ),
                (
                    "text",
                    Some(2),
                    Arc::new(StringArray::from(vec!["1", "2", "3"])) as ArrayRef,
                ),
            ],
        );
        // int to long: a promotion the spec allows.
        let file = open(&path).await;
        assert_eq!(
            read_longs(file, &[long_field(1, "small")]).await.unwrap(),
            vec![vec![Some(1), Some(-2), Some(3)]]
        );
        // A string column where the table says long: never cast (nor read as null).
        let file = open(&path).await;
        let err = read_longs(file, &[long_field(2, "text")])
            .await
            .unwrap_err();
        assert!(
            matches!(err, Error::FieldUnresolvable { field_id: 2, .. }),
            "{err:?}"
        );
        assert!(err.to_string().contains("typed.parquet"), "{err}");
        assert!(err.to_string().contains("cannot convert exactly"), "{err}");
    }

    #[tokio::test]
    async fn nested_columns_are_read_field_by_field() {
        use arrow_array::StructArray;
        use iceberg::spec::StructType;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nested.parquet");
        let child = Field::new("n", DataType::Int64, true).with_metadata(HashMap::from([(
            PARQUET_FIELD_ID_META_KEY.to_string(),
            "3".to_string(),
        )]));
        let nested: ArrayRef = Arc::new(StructArray::from(vec![(Arc::new(child), ids_123())]));
        write(
            &path,
            vec![("id", Some(1), ids_123()), ("s", Some(2), nested)],
        );
        let s_field = Arc::new(NestedField::optional(
            2,
            "s",
            Type::Struct(StructType::new(vec![long_field(3, "n")])),
        ));
        let file = open(&path).await;
        let batches: Vec<(u64, RecordBatch)> = file
            .read(&[long_field(1, "id"), s_field], None, 1024)
            .unwrap()
            .try_collect()
            .await
            .unwrap();
        let s = batches[0].1.column(1).as_struct();
        let n: Vec<Option<i64>> = s.column(0).as_primitive::<Int64Type>().iter().collect();
        assert_eq!(n, vec![Some(1), Some(2), Some(3)]);
    }

    #[test]
    fn exact_conversions() {
        use DataType::*;
        assert!(converts_exactly(&Int32, &Int64));
        assert!(!converts_exactly(&Int64, &Int32));
        assert!(converts_exactly(&Decimal128(9, 2), &Decimal128(18, 2)));
        assert!(!converts_exactly(&Decimal128(9, 2), &Decimal128(18, 3)));
        assert!(!converts_exactly(&Decimal128(18, 2), &Decimal128(9, 2)));
        assert!(converts_exactly(
            &Dictionary(Box::new(Int32), Box::new(Utf8)),
            &Utf8
        ));
        assert!(!converts_exactly(&Utf8, &Int64));
        assert!(!converts_exactly(&Int32, &Date32));
        let utc = Some("UTC".into());
        assert!(converts_exactly(
            &Timestamp(arrow_schema::TimeUnit::Microsecond, utc.clone()),
            &Timestamp(arrow_schema::TimeUnit::Microsecond, Some("+00:00".into()))
        ));
        assert!(!converts_exactly(
            &Timestamp(arrow_schema::TimeUnit::Microsecond, None),
            &Timestamp(arrow_schema::TimeUnit::Microsecond, utc.clone())
        ));
        // TIMESTAMP_MILLIS from another writer scales up exactly; nanos would truncate.
        assert!(converts_exactly(
            &Timestamp(arrow_schema::TimeUnit::Millisecond, utc.clone()),
            &Timestamp(arrow_schema::TimeUnit::Microsecond, utc.clone())
        ));
        assert!(!converts_exactly(
            &Timestamp(arrow_schema::TimeUnit::Nanosecond, utc.clone()),
            &Timestamp(arrow_schema::TimeUnit::Microsecond, utc)
        ));
        assert!(converts_exactly(&Int8, &Int32) && converts_exactly(&UInt32, &Int64));
        assert!(!converts_exactly(&UInt32, &Int32) && !converts_exactly(&UInt64, &Int64));
    }
}
