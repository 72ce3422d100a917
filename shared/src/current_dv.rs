//! A data file's current deletion vector in the snapshot being converted: whether it
//! applies to the file and how its blob is checked and read. The resolve (ruling out
//! files whose named rows are deleted already) and the merge (unioning new positions
//! with it) decide both the same way here.

use std::collections::HashMap;

use iceberg::io::FileIO;
use roaring::RoaringTreemap;

use crate::puffin::DvEntryCheck;
use crate::table::{LiveFile, TableFiles};
use crate::{Error, Result};

/// The check of the DV that `files` holds for `data`, if one applies (a DV older than
/// its data file deletes nothing of it, as a position delete's sequence number rule
/// says); an error naming the Puffin file when its manifest entry lacks the blob's
/// offset or size.
pub fn applicable<'a>(
    files: &'a TableFiles,
    data: &'a LiveFile,
) -> Option<Result<DvEntryCheck<'a>>> {
    let dv = files.dvs.get(data.path())?;
    if dv.data_sequence_number < data.data_sequence_number {
        return None;
    }
    let (Some(offset), Some(size)) = (dv.file.content_offset(), dv.file.content_size_in_bytes())
    else {
        return Some(Err(Error::file(
            dv.path(),
            "deletion vector entry lacks content_offset/content_size_in_bytes",
            "invalid manifest entry",
        )));
    };
    Some(Ok(DvEntryCheck {
        puffin_location: dv.path(),
        referenced_data_file: data.path(),
        content_offset: offset,
        content_size_in_bytes: size,
        record_count: dv.file.record_count(),
        file_size_in_bytes: dv.file.file_size_in_bytes(),
    }))
}

/// Where a DV's blob lies: the key under which a DV read once is kept for reuse.
pub fn blob_key(check: &DvEntryCheck<'_>) -> (String, i64) {
    (check.puffin_location.to_string(), check.content_offset)
}

/// The positions the applicable DVs of `files` delete in each of `data` that has one,
/// by data file path, read `parallelism` at once; an error names the Puffin file.
pub async fn read_deleted<'a>(
    file_io: &FileIO,
    files: &'a TableFiles,
    data: impl IntoIterator<Item = &'a LiveFile>,
    parallelism: usize,
) -> Result<HashMap<String, RoaringTreemap>> {
    let mut checks = Vec::new();
    let mut paths = Vec::new();
    for data in data {
        if let Some(check) = applicable(files, data) {
            checks.push(check?);
            paths.push(data.path().to_string());
        }
    }
    let read = crate::puffin::validate_dv_entries(file_io, &checks, parallelism).await?;
    Ok(paths.into_iter().zip(read).collect())
}
