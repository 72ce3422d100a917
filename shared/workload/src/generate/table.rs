//! Tables: the schema, the partition spec, creating the table and adding the `tag`
//! column, and where each partition's files go.

use std::sync::Arc;

use iceberg::spec::{
    FormatVersion, Literal, NestedField, PrimitiveType, Schema, Struct, TableMetadata,
    TableMetadataBuilder, Transform, Type, UnboundPartitionSpec,
};
use iceberg::{MetadataLocation, TableCreation};

use eqdv::catalog::{Catalog, TableName};
use eqdv::storage::delete_files;
use eqdv::table::LoadedTable;
use eqdv::{Error, Result};

use super::model::Part;
use super::spec::{GeneratorState, KeyType, PartitionKind};
use super::{REGIONS, STATE_PROPERTY};

pub(super) fn initial_schema(keys: &[KeyType], extra_columns: u32) -> Result<Schema> {
    let mut fields = Vec::new();
    let mut id = 0;
    let mut next = || {
        id += 1;
        id
    };
    for (j, t) in keys.iter().enumerate() {
        fields.push(Arc::new(NestedField::optional(
            next(),
            format!("k{j}"),
            Type::Primitive(t.iceberg_type()),
        )));
    }
    fields.push(Arc::new(NestedField::optional(
        next(),
        "region",
        Type::Primitive(PrimitiveType::String),
    )));
    fields.push(Arc::new(NestedField::optional(
        next(),
        "ts",
        Type::Primitive(PrimitiveType::Timestamp),
    )));
    fields.push(Arc::new(NestedField::optional(
        next(),
        "payload",
        Type::Primitive(PrimitiveType::String),
    )));
    for j in 1..=extra_columns {
        fields.push(Arc::new(NestedField::optional(
            next(),
            filler_name(j),
            Type::Primitive(filler_type(j)),
        )));
    }
    fields.push(Arc::new(NestedField::required(
        next(),
        "version",
        Type::Primitive(PrimitiveType::Long),
    )));
    Ok(Schema::builder()
        .with_schema_id(0)
        .with_fields(fields)
        .build()?)
}

/// The name of filler column `j` (1-based): `c01`, `c02`, ...
pub(super) fn filler_name(j: u32) -> String {
    format!("c{j:02}")
}

/// Filler columns are long, string and double in turn.
pub(super) fn filler_type(j: u32) -> PrimitiveType {
    match j % 3 {
        1 => PrimitiveType::Long,
        2 => PrimitiveType::String,
        _ => PrimitiveType::Double,
    }
}

pub(super) fn schema_with_tag(schema: &Schema, tag_id: i32) -> Result<Schema> {
    let mut fields = schema.as_struct().fields().to_vec();
    fields.push(Arc::new(NestedField::optional(
        tag_id,
        "tag",
        Type::Primitive(PrimitiveType::String),
    )));
    Ok(Schema::builder()
        .with_schema_id(schema.schema_id() + 1)
        .with_fields(fields)
        .build()?)
}

pub(super) fn field_id(schema: &Schema, name: &str) -> Result<i32> {
    schema
        .field_by_name(name)
        .map(|f| f.id)
        .ok_or_else(|| Error::InvalidInput(format!("the generated table has no column '{name}'")))
}

pub(super) fn unbound_partition(
    kind: PartitionKind,
    schema: &Schema,
) -> Result<UnboundPartitionSpec> {
    let builder = UnboundPartitionSpec::builder();
    Ok(match kind {
        PartitionKind::None => builder.build(),
        PartitionKind::Identity => builder
            .add_partition_field(field_id(schema, "region")?, "region", Transform::Identity)?
            .build(),
        PartitionKind::Bucket(n) => builder
            .add_partition_field(field_id(schema, "k0")?, "k0_bucket", Transform::Bucket(n))?
            .build(),
        PartitionKind::Day => builder
            .add_partition_field(field_id(schema, "ts")?, "ts_day", Transform::Day)?
            .build(),
    })
}

pub(super) async fn create_table(
    catalog: &dyn Catalog,
    name: &TableName,
    state: &GeneratorState,
) -> Result<LoadedTable> {
    let schema = initial_schema(&state.spec.keys, state.spec.extra_columns)?;
    let partition = unbound_partition(state.spec.partition, &schema)?;
    let location = catalog.default_table_location(name);
    let creation = TableCreation::builder()
        .name(name.name.clone())
        .location(location.clone())
        .schema(schema)
        .partition_spec(partition)
        .format_version(FormatVersion::V3)
        .properties(
            state
                .spec
                .table_properties
                .clone()
                .into_iter()
                .chain([(STATE_PROPERTY.to_string(), serde_json::to_string(state)?)]),
        )
        .build();
    let mut builder = TableMetadataBuilder::from_table_creation(creation)?;
    if state.spec.global_deletes && state.spec.partition != PartitionKind::None {
        // Global deletes need an unpartitioned spec; the partitioned one stays default.
        builder = builder.add_partition_spec(UnboundPartitionSpec::builder().build())?;
    }
    let metadata = builder.build()?.metadata;
    let location = MetadataLocation::new_with_metadata(&location, &metadata);
    metadata.write_to(catalog.file_io(), &location).await?;
    if let Err(e) = catalog.create_table(name, &location.to_string()).await {
        delete_files(
            catalog.file_io(),
            metadata.location(),
            &[location.to_string()],
        )
        .await;
        return Err(e);
    }
    LoadedTable::load(catalog, name).await
}

/// Writes `metadata` as the table's next version and swaps the pointer to it.
pub(super) async fn commit_metadata(
    catalog: &dyn Catalog,
    table: &LoadedTable,
    metadata: TableMetadata,
) -> Result<LoadedTable> {
    let next = table.next_metadata_location(&metadata)?;
    metadata.write_to(&table.file_io, &next).await?;
    let next = next.to_string();
    if let Err(e) = catalog
        .swap_pointer(&table.name, &table.pointer, &next)
        .await
    {
        match eqdv::commit::commit_outcome(catalog, table, Some(&next), None, &e).await {
            eqdv::commit::CommitOutcome::Landed { .. } => {}
            eqdv::commit::CommitOutcome::Absent => {
                delete_files(&table.file_io, table.location(), &[next]).await;
                return Err(eqdv::commit::absent(e));
            }
            eqdv::commit::CommitOutcome::Unknown(_) => return Err(e),
        }
    }
    LoadedTable::load(catalog, &table.name).await
}

/// Adds the optional `tag` column as its own metadata change.
pub(super) async fn add_tag_column(
    catalog: &dyn Catalog,
    table: &LoadedTable,
) -> Result<LoadedTable> {
    let schema = schema_with_tag(
        table.metadata.current_schema(),
        table.metadata.last_column_id() + 1,
    )?;
    let metadata = table
        .metadata
        .as_ref()
        .clone()
        .into_builder(Some(table.pointer.metadata_location.clone()))
        .add_current_schema(schema)?
        .build()?
        .metadata;
    commit_metadata(catalog, table, metadata).await
}

/// The partition tuple of `part`.
pub(super) fn partition_value(part: Part) -> Struct {
    match part {
        Part::Unpartitioned => Struct::empty(),
        Part::Region(r) => Struct::from_iter([Some(Literal::string(REGIONS[usize::from(r)]))]),
        Part::Day(d) => Struct::from_iter([Some(Literal::date(d))]),
        Part::Bucket(b) => Struct::from_iter([b.map(Literal::int)]),
    }
}

/// The directory of a partition under `data/` (Hive style, for people browsing files).
pub(super) fn partition_dir(part: Part) -> Option<String> {
    match part {
        Part::Unpartitioned => None,
        Part::Region(r) => Some(format!("region={}", REGIONS[usize::from(r)])),
        Part::Day(d) => Some(format!(
            "ts_day={}",
            chrono::DateTime::from_timestamp(i64::from(d) * 86_400, 0)
                .map(|t| t.format("%Y-%m-%d").to_string())
                .unwrap_or_else(|| d.to_string())
        )),
        Part::Bucket(Some(b)) => Some(format!("k0_bucket={b}")),
        Part::Bucket(None) => Some("k0_bucket=null".to_string()),
    }
}
