//! Which column of a file holds a table field: by Parquet field id, through the
//! table's name mapping for files without ids, or a constant (the field's
//! initial-default, or null) for a field the file lacks.

use arrow_schema::Field;
use iceberg::spec::{Literal, NameMapping, NestedField};
use parquet::arrow::PARQUET_FIELD_ID_META_KEY;

use super::{ParquetFile, converts_exactly};
use crate::{Error, Result};

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

impl ParquetFile {
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

    pub fn id_source(&self) -> FieldIdSource {
        self.id_source
    }

    pub(super) fn top_level_index(&self, field_id: i32) -> Option<usize> {
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
            // The type `target_schema` gives the field (the same conversion).
            let wanted = iceberg::arrow::type_to_arrow_type(&field.field_type)?;
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
}

pub(super) fn field_id_of(field: &Field) -> Option<i32> {
    field
        .metadata()
        .get(PARQUET_FIELD_ID_META_KEY)
        .and_then(|v| v.parse().ok())
}
