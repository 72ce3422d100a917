//! Writing a Puffin file of DVs: encoded in memory, checked against its own footer, and
//! only then uploaded, so that no offset is reported that the footer does not confirm.

use std::collections::{HashMap, HashSet};

use iceberg::io::FileIO;
use iceberg::puffin::{Blob, CREATED_BY_PROPERTY, CompressionCodec, PuffinWriter};

use super::footer::{read_puffin_footer, to_i64};
use super::{
    CARDINALITY_PROPERTY, DvBlobInput, FIRST_BLOB_OFFSET, POS_FIELD_ID,
    REFERENCED_DATA_FILE_PROPERTY, WrittenDv, WrittenPuffin,
};
use crate::dv::{DV_BLOB_TYPE, DvError, serialize_dv};

/// Writes `dvs` into a new Puffin file at `location` (the caller picks a fresh name;
/// an existing file would be overwritten) and returns each DV's offset and length:
/// [`encode_dv_puffin`], then [`EncodedPuffin::upload`].
///
/// Rejects empty DVs and two DVs for the same data file before writing anything.
pub async fn write_dv_puffin(
    file_io: &FileIO,
    location: &str,
    dvs: &[DvBlobInput],
) -> Result<WrittenPuffin, DvError> {
    let encoded = encode_dv_puffin(location, dvs).await?;
    encoded.upload(file_io).await?;
    Ok(encoded.written)
}

/// A Puffin file of DVs encoded in memory, and where each of its DVs lies: enough for
/// the manifest entries, so a conversion writes its manifests while the file uploads.
#[derive(Debug, Clone)]
pub struct EncodedPuffin {
    pub written: WrittenPuffin,
    bytes: bytes::Bytes,
}

impl EncodedPuffin {
    /// Uploads the file to its location in one request.
    pub async fn upload(&self, file_io: &FileIO) -> Result<(), DvError> {
        let location = &self.written.location;
        let io_err = |source| DvError::Io {
            location: location.clone(),
            source: Box::new(source),
        };
        file_io
            .new_output(location)
            .map_err(io_err)?
            .write(self.bytes.clone())
            .await
            .map_err(io_err)
    }
}

/// Encodes `dvs` as the Puffin file to be written at `location`, in memory (nothing is
/// written to storage), and checks its layout against its own footer.
///
/// Rejects empty DVs and two DVs for the same data file.
pub async fn encode_dv_puffin(
    location: &str,
    dvs: &[DvBlobInput],
) -> Result<EncodedPuffin, DvError> {
    let mut seen = HashSet::new();
    let mut blobs = Vec::with_capacity(dvs.len());
    let mut written = Vec::with_capacity(dvs.len());
    let mut offset = FIRST_BLOB_OFFSET;
    for dv in dvs {
        let file = &dv.referenced_data_file;
        if dv.positions.is_empty() {
            return Err(DvError::EmptyDv {
                referenced_data_file: file.clone(),
            });
        }
        if !seen.insert(file.as_str()) {
            return Err(DvError::DuplicateDataFile {
                referenced_data_file: file.clone(),
            });
        }
        let data = serialize_dv(&dv.positions).map_err(|e| DvError::ForDataFile {
            referenced_data_file: file.clone(),
            source: Box::new(e),
        })?;
        let length = data.len() as u64;
        let cardinality = dv.positions.len();
        written.push(WrittenDv {
            referenced_data_file: file.clone(),
            content_offset: to_i64(offset),
            content_size_in_bytes: to_i64(length),
            cardinality,
        });
        offset += length;
        blobs.push(
            Blob::builder()
                .r#type(DV_BLOB_TYPE.to_string())
                .fields(vec![POS_FIELD_ID])
                .snapshot_id(-1)
                .sequence_number(-1)
                .data(data)
                .properties(HashMap::from([
                    (REFERENCED_DATA_FILE_PROPERTY.to_string(), file.clone()),
                    (CARDINALITY_PROPERTY.to_string(), cardinality.to_string()),
                ]))
                .build(),
        );
    }

    let io_err = |source| DvError::Io {
        location: location.to_string(),
        source: Box::new(source),
    };
    // iceberg's PuffinWriter writes to a FileIO: a memory one, keyed by the real
    // location so that any error names it.
    let memory = FileIO::new_with_memory();
    let output = memory.new_output(location).map_err(io_err)?;
    let properties = HashMap::from([(
        CREATED_BY_PROPERTY.to_string(),
        format!("eqdv {}", env!("CARGO_PKG_VERSION")),
    )]);
    let mut writer = PuffinWriter::new(&output, properties, false)
        .await
        .map_err(io_err)?;
    for blob in blobs {
        writer
            .add(blob, CompressionCodec::None)
            .await
            .map_err(io_err)?;
    }
    writer.close().await.map_err(io_err)?;

    // PuffinWriter reports no offsets: ours assume blobs back to back from offset 4,
    // uncompressed. Confirm against the footer, read as any reader will read it.
    let bytes = memory
        .new_input(location)
        .map_err(io_err)?
        .read()
        .await
        .map_err(io_err)?;
    let footer = read_puffin_footer(&memory, location).await?;
    let blob_metas = footer.metadata.blobs();
    if blob_metas.len() != written.len() {
        return Err(DvError::InvalidPuffin {
            location: location.to_string(),
            reason: format!(
                "footer lists {} blobs after writing, expected {}",
                blob_metas.len(),
                written.len()
            ),
            source: None,
        });
    }
    for (index, (meta, dv)) in blob_metas.iter().zip(&written).enumerate() {
        let expected_offset = dv.content_offset as u64;
        let expected_length = dv.content_size_in_bytes as u64;
        if meta.offset() != expected_offset || meta.length() != expected_length {
            return Err(DvError::UnexpectedLayout {
                location: location.to_string(),
                index,
                expected_offset,
                expected_length,
                found_offset: meta.offset(),
                found_length: meta.length(),
            });
        }
    }
    Ok(EncodedPuffin {
        written: WrittenPuffin {
            location: location.to_string(),
            file_size_in_bytes: footer.file_size_in_bytes,
            dvs: written,
        },
        bytes,
    })
}
