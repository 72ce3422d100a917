//! Verifies a table's deletion vectors the way readers will use them: each DV names a
//! live data file, sits in that file's partition, passes the checks Java's reader makes
//! (Puffin footer offsets, length, magic, CRC, cardinality = record count) and deletes
//! no position past the end of its data file. Read-only.

use serde::Serialize;

use crate::puffin::{DvEntryCheck, validate_dv_entries};
use crate::storage::DEFAULT_PARALLELISM;
use crate::table::{LoadedTable, TableFiles};
use crate::{Error, Result};

/// What [`verify_dvs`] checked.
#[derive(Clone, Debug, Default, Serialize)]
pub struct DvVerification {
    pub dvs: usize,
    pub positions: u64,
}

/// Verifies every live DV of `files` (read from `table`); the first problem is an error
/// naming the DV and the data file.
pub async fn verify_dvs(table: &LoadedTable, files: &TableFiles) -> Result<DvVerification> {
    let mut checked = DvVerification::default();
    // The checks the manifests alone answer, then every DV read and checked against its
    // Puffin file (each footer once, many reads in flight), then the positions.
    let mut entries = Vec::with_capacity(files.dvs.len());
    for (data_path, dv) in &files.dvs {
        let invalid = |message: String| invalid_dv(table, dv.path(), data_path, message);
        let Some(data) = files.data_files.iter().find(|d| d.path() == data_path) else {
            return Err(invalid("the data file it references is not live".into()));
        };
        if dv.spec_id != data.spec_id
            || !crate::partition::same_partition(dv.file.partition(), data.file.partition())
        {
            return Err(invalid("its partition differs from the data file's".into()));
        }
        let (Some(offset), Some(size)) =
            (dv.file.content_offset(), dv.file.content_size_in_bytes())
        else {
            return Err(invalid("no content_offset/content_size_in_bytes".into()));
        };
        entries.push((
            data,
            DvEntryCheck {
                puffin_location: dv.path(),
                referenced_data_file: data_path,
                content_offset: offset,
                content_size_in_bytes: size,
                record_count: dv.file.record_count(),
                file_size_in_bytes: dv.file.file_size_in_bytes(),
            },
        ));
    }
    let checks: Vec<DvEntryCheck<'_>> = entries.iter().map(|(_, check)| *check).collect();
    let read = validate_dv_entries(&table.file_io, &checks, DEFAULT_PARALLELISM).await?;
    for ((data, check), positions) in entries.iter().zip(read) {
        if let Some(max) = positions.max()
            && max >= data.file.record_count()
        {
            return Err(invalid_dv(
                table,
                check.puffin_location,
                check.referenced_data_file,
                format!(
                    "position {max} is past the data file's {} rows",
                    data.file.record_count()
                ),
            ));
        }
        checked.dvs += 1;
        checked.positions += positions.len();
    }
    Ok(checked)
}

fn invalid_dv(table: &LoadedTable, puffin: &str, data_path: &str, message: String) -> Error {
    Error::file(
        puffin,
        format!(
            "deletion vector for {data_path} in table {}: {message}",
            table.name
        ),
        "invalid deletion vector",
    )
}
