//! The filler columns `c01..` of a realistic width (`WorkloadSpec::extra_columns`): their
//! values are fixed by the row, so a replay writes the same ones.

use std::sync::Arc;

use arrow_array::{ArrayRef, Float64Array, Int64Array, StringArray};
use arrow_schema::DataType;
use eqdv::{Error, Result};

/// `Some(j)` for filler column `c{j:02}` (see `table::filler_name`).
pub(super) fn filler_index(name: &str) -> Option<u32> {
    let digits = name.strip_prefix('c')?;
    (digits.len() >= 2 && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().ok())
        .flatten()
}

/// Filler column `j` of the rows whose seeds (fixed by each row: its key, commit and
/// salt) are `rows`.
pub(super) fn filler_column(j: u32, rows: &[u64], data_type: &DataType) -> Result<ArrayRef> {
    let value = |seed: &u64| crate::rng::mix64(seed ^ u64::from(j));
    let column: ArrayRef = match data_type {
        DataType::Int64 => Arc::new(Int64Array::from_iter_values(
            rows.iter().map(|r| value(r) as i64),
        )),
        DataType::Utf8 => Arc::new(StringArray::from_iter_values(
            rows.iter().map(|r| format!("{:016x}", value(r))),
        )),
        DataType::Float64 => Arc::new(Float64Array::from_iter_values(
            rows.iter()
                .map(|r| (value(r) >> 11) as f64 / (1u64 << 53) as f64 * 1000.0),
        )),
        other => {
            return Err(Error::InvalidInput(format!(
                "filler column c{j:02}: unexpected type {other}"
            )));
        }
    };
    Ok(column)
}
