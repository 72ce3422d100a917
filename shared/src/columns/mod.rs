//! Which column of a data file holds a table field, whatever the file's format: by the
//! field id the writer stored (Parquet's `field_id`, ORC's `iceberg.id`), through the
//! table's name mapping for files without ids, or a constant (the field's
//! initial-default, or null) for a field the file lacks; and the stored types that
//! convert exactly to the table's.
//!
//! A reader of a format decodes the file's schema into Arrow (each field's id, when the
//! file has one, in the field's `PARQUET:field_id` metadata), and this module answers
//! from that; `project` then turns each decoded batch into the table's types.

mod cast;
mod nested;
mod project;

use arrow_schema::{DataType, Field, SchemaRef as ArrowSchemaRef};
use iceberg::spec::{Literal, MappedField, NameMapping, NestedField, Type};
use parquet::arrow::PARQUET_FIELD_ID_META_KEY;

pub use cast::{converts_exactly, datum_to_array, literal_to_array, target_schema};
pub(crate) use project::project;

use crate::{Error, Result};

/// How a file's top-level columns were given Iceberg field ids.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldIdSource {
    /// The file carries field ids (every Iceberg writer writes them).
    FileIds,
    /// The file has none; ids come from the table's name mapping.
    NameMapping,
    /// The file has none and the table has no name mapping: nothing can be resolved.
    Unresolvable,
}

/// Where the values of one table field come from in one file.
#[derive(Clone, Debug, PartialEq)]
pub enum FieldSource {
    /// Top-level column `index` of the file's Arrow schema; for a field nested in
    /// structs, `path` is the child index at each struct below it, down to the field.
    Column { index: usize, path: Vec<usize> },
    /// The file lacks the field: every row reads this value (the field's initial
    /// default), or null when `None`.
    Constant(Option<Literal>),
}

/// A file's top-level columns and the Iceberg field id of each, as resolved.
#[derive(Clone, Debug)]
pub struct FileColumns {
    path: String,
    /// The file's format, as errors name it ("Parquet", "ORC").
    format: &'static str,
    schema: ArrowSchemaRef,
    /// Field id of each top-level column of `schema`.
    ids: Vec<Option<i32>>,
    id_source: FieldIdSource,
    /// Field ids the name mapping names (when ids come from it).
    mapped_ids: Vec<i32>,
    /// The name mapping's top-level fields (when ids come from it), for nested ones.
    mapping: Vec<MappedField>,
}

impl FileColumns {
    /// The columns of the file at `path` whose schema decodes to `schema`; `has_ids`
    /// when the file stores field ids (on any column, nested ones included).
    pub fn new(path: &str, format: &'static str, schema: ArrowSchemaRef, has_ids: bool) -> Self {
        let ids: Vec<Option<i32>> = schema.fields().iter().map(|f| field_id_of(f)).collect();
        let has_ids = has_ids || ids.iter().any(Option::is_some);
        Self {
            path: path.to_string(),
            format,
            schema,
            ids,
            id_source: if has_ids {
                FieldIdSource::FileIds
            } else {
                FieldIdSource::Unresolvable
            },
            mapped_ids: Vec::new(),
            mapping: Vec::new(),
        }
    }

    pub fn schema(&self) -> &ArrowSchemaRef {
        &self.schema
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
            .schema
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
        self.mapping = mapping.fields().to_vec();
        self.id_source = FieldIdSource::NameMapping;
        self
    }

    pub fn id_source(&self) -> FieldIdSource {
        self.id_source
    }

    pub fn top_level_index(&self, field_id: i32) -> Option<usize> {
        self.ids.iter().position(|id| *id == Some(field_id))
    }

    /// The file's top-level Arrow field holding Iceberg field id `field_id` (by its
    /// Parquet field id, or through the name mapping).
    pub fn field_by_id(&self, field_id: i32) -> Option<&Field> {
        self.top_level_index(field_id).map(|i| self.schema.field(i))
    }

    /// Where `field`'s values come from in this file, or an error naming the file and
    /// the field when they cannot be read faithfully: no field ids and no name mapping,
    /// a field the name mapping does not name, a required field the file lacks with no
    /// default, or a stored type that does not convert exactly to the table's type.
    pub fn source_of(&self, field: &NestedField) -> Result<FieldSource> {
        // A nested key is named by its path and its own id.
        let (name, id) = key_name(field);
        let refuse = |message: String| Error::FieldUnresolvable {
            path: self.path.clone(),
            field: name.clone(),
            field_id: id,
            message,
        };
        if let Some(index) = self.top_level_index(field.id) {
            let root = self.schema.field(index);
            // A key nested in structs: its ancestors, pruned to the path, down to it.
            let (mut stored, mut wanted) = (root, field);
            let mut path = Vec::new();
            let mut mapped = self.mapping.iter().find(|m| m.field_id() == Some(field.id));
            while let Type::Struct(pruned) = wanted.field_type.as_ref() {
                let Some(child) = pruned.fields().first() else {
                    break;
                };
                let DataType::Struct(children) = stored.data_type() else {
                    return Err(refuse(format!(
                        "the file stores {} as {}, not a struct",
                        stored.name(),
                        stored.data_type()
                    )));
                };
                let at = children.iter().position(|c| match self.id_source {
                    FieldIdSource::FileIds => field_id_of(c) == Some(child.id),
                    _ => mapped.is_some_and(|m| {
                        m.fields()
                            .iter()
                            .any(|n| n.field_id() == Some(child.id) && n.names().contains(c.name()))
                    }),
                });
                let Some(at) = at else {
                    // Java reads such a struct as null or not depending on which other
                    // columns a reader asks for: no exact answer to match.
                    return Err(refuse(format!(
                        "the file has struct {} without its field {} (id {}), which Iceberg \
                         readers read differently depending on the columns they project",
                        stored.name(),
                        child.name,
                        child.id
                    )));
                };
                mapped = mapped_child(mapped, child.id);
                path.push(at);
                stored = &children[at];
                wanted = child.as_ref();
            }
            let stored = stored.data_type();
            // The type `target_schema` gives the field (the same conversion).
            let wanted_type = iceberg::arrow::type_to_arrow_type(&wanted.field_type)?;
            if !converts_exactly(stored, &wanted_type) {
                return Err(refuse(format!(
                    "the file stores it as {stored}, which eqdv cannot convert exactly to the \
                     table's type {}",
                    wanted.field_type
                )));
            }
            return Ok(FieldSource::Column { index, path });
        }
        match self.id_source {
            FieldIdSource::Unresolvable => {
                return Err(refuse(format!(
                    "the file has no {} field ids and the table has no {}, so its \
                     columns cannot be matched to the table's fields",
                    self.format,
                    iceberg::spec::DEFAULT_SCHEMA_NAME_MAPPING
                )));
            }
            FieldIdSource::NameMapping if !self.mapped_ids.contains(&field.id) => {
                return Err(refuse(format!(
                    "the file has no {} field ids and the table's {} does not name \
                     this field",
                    self.format,
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

impl FileColumns {
    /// The names from the file's top-level column down to the column holding field
    /// `field_id` (at any depth of structs), by field id or the name mapping.
    pub fn names_of(&self, field_id: i32) -> Option<Vec<String>> {
        let schema = &self.schema;
        for (i, id) in self.ids.iter().enumerate() {
            let field = schema.field(i);
            let mapped = id.and_then(|id| self.mapping.iter().find(|m| m.field_id() == Some(id)));
            let mut names = vec![field.name().clone()];
            if *id == Some(field_id) || self.find_in(field, mapped, field_id, &mut names) {
                return Some(names);
            }
        }
        None
    }

    /// Whether `field_id` is under struct `field`, pushing the names on the way.
    fn find_in(
        &self,
        field: &Field,
        mapped: Option<&MappedField>,
        field_id: i32,
        names: &mut Vec<String>,
    ) -> bool {
        let DataType::Struct(children) = field.data_type() else {
            return false;
        };
        for child in children {
            let child_mapped = mapped.and_then(|m| {
                m.fields()
                    .iter()
                    .find(|n| n.names().contains(child.name()))
                    .map(|n| n.as_ref())
            });
            let id = match self.id_source {
                FieldIdSource::FileIds => field_id_of(child),
                _ => child_mapped.and_then(MappedField::field_id),
            };
            names.push(child.name().clone());
            if id == Some(field_id) || self.find_in(child, child_mapped, field_id, names) {
                return true;
            }
            names.pop();
        }
        false
    }
}

/// The dotted path and id of the key `field` reads (itself, or the one field at the
/// bottom of its chain of one-field structs).
pub(crate) fn key_name(field: &NestedField) -> (String, i32) {
    let (mut name, mut at) = (field.name.clone(), field);
    while let Type::Struct(pruned) = at.field_type.as_ref() {
        let Some(child) = pruned.fields().first() else {
            break;
        };
        name = format!("{name}.{}", child.name);
        at = child;
    }
    (name, at.id)
}

/// The entry under name-mapping entry `mapped` that maps field `id`.
pub(crate) fn mapped_child(mapped: Option<&MappedField>, id: i32) -> Option<&MappedField> {
    mapped.and_then(|m| {
        m.fields()
            .iter()
            .find(|n| n.field_id() == Some(id))
            .map(|n| n.as_ref())
    })
}

/// The field id a decoded Arrow field carries, if any.
pub fn field_id_of(field: &Field) -> Option<i32> {
    field
        .metadata()
        .get(PARQUET_FIELD_ID_META_KEY)
        .and_then(|v| v.parse().ok())
}
