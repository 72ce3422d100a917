//! Puffin files that hold deletion vectors, with the exact blob offsets manifests need.
//!
//! A DV manifest entry points into a Puffin file by (content_offset,
//! content_size_in_bytes); readers trust those numbers, so a wrong one silently
//! un-deletes or mis-deletes rows. This module writes DV Puffin files with iceberg's
//! [`iceberg::puffin::PuffinWriter`], then reads the footer back and refuses to report offsets the footer
//! does not confirm. It must never hand out an offset it has not checked, and
//! [`validate_dv_entry`] makes the same checks a reader makes before any DV is trusted.
//! [`WrittenPuffin::dv_entry`] builds the manifest entry from those checked numbers.
//!
//! Writing is `write`'s, the reader's checks `validate`'s, and reading footers (and
//! reading them ahead) `footer`'s.

use std::ops::Range;

use iceberg::puffin::FileMetadata;
use iceberg::spec::{DataContentType, DataFile, DataFileBuilder, DataFileFormat, Struct};
use roaring::RoaringTreemap;

/// Field id of the `_pos` metadata column, the field a DV is computed for.
pub const POS_FIELD_ID: i32 = 2_147_483_645;
/// Blob property naming the data file a DV applies to.
pub const REFERENCED_DATA_FILE_PROPERTY: &str = "referenced-data-file";
/// Blob property holding the DV's cardinality in decimal.
pub const CARDINALITY_PROPERTY: &str = "cardinality";

const PUFFIN_MAGIC: [u8; 4] = *b"PFA1";
/// The header magic; the first blob starts right after it.
const FIRST_BLOB_OFFSET: u64 = 4;
/// Footer tail: u32 LE payload length, 4 flag bytes, magic.
const FOOTER_STRUCT_LEN: u64 = 12;
/// Smallest possible Puffin file: header magic, footer magic, empty payload, tail.
const MIN_PUFFIN_LEN: u64 = 4 + 4 + FOOTER_STRUCT_LEN;
/// Length field + magic + CRC around every DV vector.
const MIN_DV_BLOB_LEN: i64 = 12;

/// One DV to write: the data file it applies to and its deleted positions.
#[derive(Debug, Clone)]
pub struct DvBlobInput {
    pub referenced_data_file: String,
    pub positions: RoaringTreemap,
}

/// Where one DV landed, as its manifest entry must record it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WrittenDv {
    pub referenced_data_file: String,
    pub content_offset: i64,
    pub content_size_in_bytes: i64,
    pub cardinality: u64,
}

/// A written Puffin file and its DVs, in input order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WrittenPuffin {
    pub location: String,
    pub file_size_in_bytes: u64,
    pub dvs: Vec<WrittenDv>,
}

impl WrittenPuffin {
    /// The manifest entry of `dv`, one of this file's DVs, in `partition` of spec
    /// `spec_id`: the entry points into this file at the offset and length written.
    pub fn dv_entry(
        &self,
        dv: &WrittenDv,
        spec_id: i32,
        partition: Struct,
    ) -> crate::Result<DataFile> {
        DataFileBuilder::default()
            .content(DataContentType::PositionDeletes)
            .file_path(self.location.clone())
            .file_format(DataFileFormat::Puffin)
            .partition(partition)
            .partition_spec_id(spec_id)
            .record_count(dv.cardinality)
            .file_size_in_bytes(self.file_size_in_bytes)
            .referenced_data_file(Some(dv.referenced_data_file.clone()))
            .content_offset(Some(dv.content_offset))
            .content_size_in_bytes(Some(dv.content_size_in_bytes))
            .build()
            .map_err(|e| crate::Error::InvalidInput(format!("building DV entry: {e}")))
    }
}

/// A DV manifest entry to check against the Puffin file it points into.
#[derive(Debug, Clone, Copy)]
pub struct DvEntryCheck<'a> {
    pub puffin_location: &'a str,
    pub referenced_data_file: &'a str,
    pub content_offset: i64,
    pub content_size_in_bytes: i64,
    pub record_count: u64,
    pub file_size_in_bytes: u64,
}

/// The footer of a Puffin file and the file's size.
#[derive(Debug, Clone)]
pub struct PuffinFooter {
    pub file_size_in_bytes: u64,
    pub metadata: FileMetadata,
    /// The file's last bytes, read with the footer, from offset `tail_start`: for the
    /// small files a streaming conversion writes, every blob too.
    tail: bytes::Bytes,
    tail_start: u64,
}

impl PuffinFooter {
    /// The bytes of `range` if the footer's read already holds them.
    fn cached(&self, range: &Range<u64>) -> Option<bytes::Bytes> {
        let start = range.start.checked_sub(self.tail_start)?;
        let end = range.end.checked_sub(self.tail_start)?;
        (end <= self.tail.len() as u64 && start <= end)
            .then(|| self.tail.slice(start as usize..end as usize))
    }
}

mod footer;
mod validate;
mod write;

pub use footer::{FooterPrefetch, read_puffin_footer};
pub use validate::{
    read_dv, validate_dv_entries, validate_dv_entries_prefetched, validate_dv_entry, validate_dv_in,
};
pub use write::{EncodedPuffin, encode_dv_puffin, write_dv_puffin};
