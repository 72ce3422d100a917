//! Partition tuples compared as values (across int-to-long and float-to-double
//! promotions), cast to a spec's current types, and rendered as `name=value/...`.

use iceberg::spec::{
    Literal, PartitionSpec, PrimitiveLiteral, PrimitiveType, Struct, StructType, Type,
};
use ordered_float::OrderedFloat;

/// A partition tuple with each value in its widest type: manifests written before a
/// partition source column was promoted (int to long, float to double) carry the old
/// type, later ones the new, and both name the same partition. The spec forbids
/// promotions that would change a partition value, so widening is exact.
pub fn normalize_partition(partition: &Struct) -> Struct {
    partition
        .iter()
        .map(|value| {
            value.map(|v| match v {
                Literal::Primitive(PrimitiveLiteral::Int(i)) => {
                    Literal::Primitive(PrimitiveLiteral::Long(i64::from(*i)))
                }
                Literal::Primitive(PrimitiveLiteral::Float(f)) => Literal::Primitive(
                    PrimitiveLiteral::Double(OrderedFloat(f64::from(f.into_inner()))),
                ),
                other => other.clone(),
            })
        })
        .collect()
}

/// `partition` with its values in the types of `partition_type` (a spec's partition type
/// under the schema a new manifest is written with): a tuple read from a manifest written
/// before a promotion carries ints where the writer now expects longs.
pub fn partition_as_type(partition: &Struct, partition_type: &StructType) -> Struct {
    partition
        .iter()
        .zip(partition_type.fields())
        .map(|(value, field)| {
            value.map(|v| match (v, field.field_type.as_ref()) {
                (
                    Literal::Primitive(PrimitiveLiteral::Int(i)),
                    Type::Primitive(PrimitiveType::Long),
                ) => Literal::Primitive(PrimitiveLiteral::Long(i64::from(*i))),
                (
                    Literal::Primitive(PrimitiveLiteral::Float(f)),
                    Type::Primitive(PrimitiveType::Double),
                ) => Literal::Primitive(PrimitiveLiteral::Double(OrderedFloat(f64::from(
                    f.into_inner(),
                )))),
                (other, _) => other.clone(),
            })
        })
        .collect()
}

/// Whether two partition tuples of the same spec hold the same values, compared as
/// values (see [`normalize_partition`]), not as the types their manifests wrote.
pub fn same_partition(a: &Struct, b: &Struct) -> bool {
    a == b || normalize_partition(a) == normalize_partition(b)
}

/// Renders a partition tuple as `name=value/...`.
pub fn partition_label(spec: &PartitionSpec, partition: &Struct) -> String {
    if spec.is_unpartitioned() {
        return "<global>".to_string();
    }
    spec.fields()
        .iter()
        .zip(partition.iter())
        .map(|(field, value)| {
            let value = match value {
                None => "null".to_string(),
                Some(Literal::Primitive(p)) => format!("{p:?}"),
                Some(other) => format!("{other:?}"),
            };
            format!("{}={value}", field.name)
        })
        .collect::<Vec<_>>()
        .join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tuple(values: Vec<Option<PrimitiveLiteral>>) -> Struct {
        values
            .into_iter()
            .map(|v| v.map(Literal::Primitive))
            .collect()
    }

    #[test]
    fn partitions_compare_as_values_across_promotion() {
        use PrimitiveLiteral::*;
        // Written before and after `p` was promoted from int to long.
        let old = tuple(vec![Some(Int(7)), Some(String("eu".into())), None]);
        let new = tuple(vec![Some(Long(7)), Some(String("eu".into())), None]);
        assert!(same_partition(&old, &new));
        assert_eq!(normalize_partition(&old), normalize_partition(&new));
        let float = tuple(vec![Some(Float(OrderedFloat(1.5)))]);
        let double = tuple(vec![Some(Double(OrderedFloat(1.5)))]);
        assert!(same_partition(&float, &double));
        // Different values stay different; a null is no value.
        assert!(!same_partition(
            &old,
            &tuple(vec![Some(Long(8)), Some(String("eu".into())), None])
        ));
        assert!(!same_partition(
            &old,
            &tuple(vec![
                Some(Long(7)),
                Some(String("eu".into())),
                Some(Long(0))
            ])
        ));
        assert!(!same_partition(
            &tuple(vec![None]),
            &tuple(vec![Some(Long(0))])
        ));
    }
}
