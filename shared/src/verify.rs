//! Verifies a table's deletion vectors the way readers will use them: each DV names a
//! live data file, sits in that file's partition, passes the checks Java's reader makes
//! (Puffin footer offsets, length, magic, CRC, cardinality = record count) and deletes
//! no position past the end of its data file. Read-only.

use serde::Serialize;

use crate::puffin::{DvEntryCheck, validate_dv_entry};
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
    for (data_path, dv) in &files.dvs {
        let invalid = |message: String| {
            Error::file(
                dv.path(),
                format!(
                    "deletion vector for {data_path} in table {}: {message}",
                    table.name
                ),
                "invalid deletion vector",
            )
        };
        let Some(data) = files.data_files.iter().find(|d| d.path() == data_path) else {
            return Err(invalid("the data file it references is not live".into()));
        };
        if dv.spec_id != data.spec_id
            || !crate::plan::same_partition(dv.file.partition(), data.file.partition())
        {
            return Err(invalid("its partition differs from the data file's".into()));
        }
        let (Some(offset), Some(size)) =
            (dv.file.content_offset(), dv.file.content_size_in_bytes())
        else {
            return Err(invalid("no content_offset/content_size_in_bytes".into()));
        };
        let positions = validate_dv_entry(
            &table.file_io,
            &DvEntryCheck {
                puffin_location: dv.path(),
                referenced_data_file: data_path,
                content_offset: offset,
                content_size_in_bytes: size,
                record_count: dv.file.record_count(),
                file_size_in_bytes: dv.file.file_size_in_bytes(),
            },
        )
        .await?;
        if let Some(max) = positions.max()
            && max >= data.file.record_count()
        {
            return Err(invalid(format!(
                "position {max} is past the data file's {} rows",
                data.file.record_count()
            )));
        }
        checked.dvs += 1;
        checked.positions += positions.len();
    }
    Ok(checked)
}
