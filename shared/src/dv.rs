//! The `deletion-vector-v1` blob codec: Iceberg v3 deletion vectors as bytes.
//!
//! Every DV eqdv writes is read later by other engines (Java, Spark, Trino, ...), so
//! this module is the one place that knows the byte layout, and it checks everything a
//! reader checks before a blob leaves it. It must never produce a blob that a reader
//! rejects (keys above [`MAX_DV_KEY`], a wrong length or CRC), and never accept bytes it
//! cannot fully account for: decoding fails loudly instead of guessing.
//!
//! Blob layout (all of it is covered by the CRC except the length and the CRC itself):
//! ```text
//! u32 BE  len = 4 + len(vector)
//! 4 B     magic D1 D3 39 64
//! vector  portable 64-bit Roaring: u64 LE bitmap count, then per bitmap in ascending
//!         key order a u32 LE key (high 32 bits) and a portable 32-bit Roaring bitmap
//! u32 BE  CRC-32 (IEEE) over magic + vector
//! ```
//!
//! A round trip:
//! ```
//! use roaring::RoaringTreemap;
//! use eqdv::dv::{DV_MAGIC, deserialize_dv, serialize_dv};
//!
//! let positions: RoaringTreemap = [1u64, 3, 5, 1 << 32].into_iter().collect();
//! let blob = serialize_dv(&positions).unwrap();
//! assert_eq!(blob[4..8], DV_MAGIC);
//! assert_eq!(deserialize_dv(&blob).unwrap(), positions);
//!
//! // A flipped CRC byte is rejected.
//! let mut bad = blob.clone();
//! *bad.last_mut().unwrap() ^= 1;
//! assert!(deserialize_dv(&bad).is_err());
//! ```

use std::io;

use roaring::{RoaringBitmap, RoaringTreemap};

/// Puffin blob type of a deletion vector.
pub const DV_BLOB_TYPE: &str = "deletion-vector-v1";

/// Magic bytes that open every deletion-vector blob (after the length field).
pub const DV_MAGIC: [u8; 4] = [0xD1, 0xD3, 0x39, 0x64];

/// Largest 32-bit key (high half of a position) a deletion vector may hold.
// Java rejects keys above 2^31-2: its bitmap array is indexed by key + 1.
pub const MAX_DV_KEY: u32 = (i32::MAX - 1) as u32;

/// Bytes around the vector: length field, magic and CRC.
const FRAMING_BYTES: usize = 12;

/// Everything that can go wrong encoding, decoding, writing or checking a DV.
///
/// Each message names the thing at fault and, where there is one, the expected and the
/// found value.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DvError {
    /// A position to encode does not fit a deletion vector.
    #[error(
        "position {position} has key {key} (its high 32 bits), above the largest \
         deletion-vector key {MAX_DV_KEY}"
    )]
    PositionOutOfRange { position: u64, key: u32 },

    /// A serialized vector holds a key readers reject.
    #[error("deletion vector holds key {key}, above the largest allowed key {MAX_DV_KEY}")]
    KeyOutOfRange { key: u32 },

    /// Bitmap keys of a serialized vector are not strictly ascending.
    #[error("deletion-vector keys are not ascending: key {key} follows key {previous}")]
    KeysNotAscending { previous: u32, key: u32 },

    /// The blob cannot even hold the length field, magic and CRC.
    #[error("deletion-vector blob is {found} bytes, expected at least {expected}")]
    BlobTooShort { expected: usize, found: usize },

    /// The length field disagrees with the blob's size.
    #[error(
        "deletion-vector length field is {found}, expected {expected} \
         (blob size {blob_size} minus 8): truncated or mis-sized blob"
    )]
    LengthMismatch {
        expected: u64,
        found: u32,
        blob_size: usize,
    },

    /// The magic bytes are wrong.
    #[error("deletion-vector magic is {found:02X?}, expected {DV_MAGIC:02X?}")]
    BadMagic { found: [u8; 4] },

    /// The stored CRC does not match the bytes.
    #[error("deletion-vector CRC-32 mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    CrcMismatch { stored: u32, computed: u32 },

    /// The portable Roaring bytes are malformed.
    #[error("malformed portable 64-bit Roaring bitmap: {reason}")]
    MalformedBitmap { reason: String },

    /// Bytes remain after the portable Roaring bitmap.
    #[error("{found} unexpected bytes after the portable 64-bit Roaring bitmap, expected none")]
    TrailingBytes { found: usize },

    /// The vector is larger than a u32 length field can describe.
    #[error("deletion vector serializes to {found} bytes, more than a u32 length field allows")]
    BlobTooLarge { found: usize },

    /// Writing the bitmap into memory failed (not expected to happen).
    #[error("failed to serialize the deletion vector: {0}")]
    Encode(#[source] io::Error),

    /// A DV to write has no positions.
    #[error("deletion vector for {referenced_data_file} is empty; an empty DV is never written")]
    EmptyDv { referenced_data_file: String },

    /// Two DVs to write reference the same data file.
    #[error("two deletion vectors reference {referenced_data_file}; at most one is allowed")]
    DuplicateDataFile { referenced_data_file: String },

    /// A codec error while writing the DV of one data file.
    #[error("deletion vector for {referenced_data_file}: {source}")]
    ForDataFile {
        referenced_data_file: String,
        #[source]
        source: Box<DvError>,
    },

    /// A codec error in one blob of a Puffin file.
    #[error("deletion-vector blob in {location} at offset {offset} (length {length}): {source}")]
    InBlob {
        location: String,
        offset: i64,
        length: i64,
        #[source]
        source: Box<DvError>,
    },

    /// Reading or writing a file failed.
    // iceberg::Error is boxed here and below: it is large and would bloat every Result.
    #[error("I/O on {location}: {}", crate::error::storage::cause(.source.as_ref()))]
    Io {
        location: String,
        #[source]
        source: Box<iceberg::Error>,
    },

    /// The Puffin file is structurally broken (magic, footer, JSON).
    #[error("invalid Puffin file {location}: {reason}")]
    InvalidPuffin {
        location: String,
        reason: String,
        #[source]
        source: Option<Box<iceberg::Error>>,
    },

    /// The Puffin footer does not list the blobs where they were written.
    #[error(
        "Puffin writer layout of {location} is not as expected: blob {index} is at \
         (offset {found_offset}, length {found_length}), expected ({expected_offset}, \
         {expected_length})"
    )]
    UnexpectedLayout {
        location: String,
        index: usize,
        expected_offset: u64,
        expected_length: u64,
        found_offset: u64,
        found_length: u64,
    },

    /// content_offset / content_size_in_bytes cannot describe a blob.
    #[error(
        "invalid deletion-vector range for {location}: offset {offset}, length {length} \
         (offset must be >= 4 and length >= 12)"
    )]
    InvalidRange {
        location: String,
        offset: i64,
        length: i64,
    },

    /// The Puffin file's size differs from the manifest's file_size_in_bytes.
    #[error("Puffin file {location} is {found} bytes, expected {expected} (file_size_in_bytes)")]
    FileSizeMismatch {
        location: String,
        expected: u64,
        found: u64,
    },

    /// No blob in the footer starts at content_offset.
    #[error(
        "Puffin file {location} has no blob at offset {offset}; its blobs are at \
         (offset, length) {available:?}"
    )]
    BlobNotFound {
        location: String,
        offset: i64,
        available: Vec<(u64, u64)>,
    },

    /// The blob at content_offset has another length.
    #[error(
        "blob at offset {offset} of {location} is {found} bytes, expected {expected} \
         (content_size_in_bytes)"
    )]
    BlobLengthMismatch {
        location: String,
        offset: i64,
        expected: i64,
        found: u64,
    },

    /// The blob at content_offset is not a deletion vector.
    #[error("blob at offset {offset} of {location} has type {found:?}, expected {DV_BLOB_TYPE:?}")]
    WrongBlobType {
        location: String,
        offset: i64,
        found: String,
    },

    /// The blob is compressed; DV blobs never are.
    #[error(
        "blob at offset {offset} of {location} is compressed with {found}, expected no \
         compression"
    )]
    CompressedBlob {
        location: String,
        offset: i64,
        found: String,
    },

    /// The blob's referenced-data-file property names another file (or is missing).
    #[error(
        "blob at offset {offset} of {location} references data file {found:?}, expected \
         {expected:?}"
    )]
    ReferencedFileMismatch {
        location: String,
        offset: i64,
        expected: String,
        found: Option<String>,
    },

    /// The blob's cardinality property is missing or not a number.
    #[error(
        "blob at offset {offset} of {location} has cardinality property {found:?}, expected \
         a decimal count"
    )]
    InvalidCardinalityProperty {
        location: String,
        offset: i64,
        found: Option<String>,
    },

    /// A cardinality disagrees with the manifest's record_count.
    #[error(
        "{what} of the blob at offset {offset} of {location} is {found}, expected {expected} \
         (record_count)"
    )]
    CardinalityMismatch {
        location: String,
        offset: i64,
        what: &'static str,
        expected: u64,
        found: u64,
    },
}

/// Serializes `positions` as a whole `deletion-vector-v1` blob.
///
/// Containers are run-length optimized first (on a copy), as the Java writer does.
pub fn serialize_dv(positions: &RoaringTreemap) -> Result<Vec<u8>, DvError> {
    // The largest position carries the largest key, so one check covers them all.
    if let Some(position) = positions.max() {
        let key = (position >> 32) as u32;
        if key > MAX_DV_KEY {
            return Err(DvError::PositionOutOfRange { position, key });
        }
    }
    let mut optimized = positions.clone();
    // Also drops empty bitmaps, which would otherwise be written as empty keys.
    optimized.optimize();

    let mut blob = Vec::with_capacity(optimized.serialized_size() + FRAMING_BYTES);
    blob.extend_from_slice(&[0; 4]); // length, patched below
    blob.extend_from_slice(&DV_MAGIC);
    optimized
        .serialize_into(&mut blob)
        .map_err(DvError::Encode)?;
    // Measured rather than predicted, so the field can never disagree with the bytes.
    let len = u32::try_from(blob.len() - 4).map_err(|_| DvError::BlobTooLarge {
        found: blob.len() + 4,
    })?;
    blob[..4].copy_from_slice(&len.to_be_bytes());
    let crc = crc32fast::hash(&blob[4..]);
    blob.extend_from_slice(&crc.to_be_bytes());
    Ok(blob)
}

/// Decodes a whole `deletion-vector-v1` blob, checking length field, magic, CRC, key
/// range and that no bytes are left over.
pub fn deserialize_dv(blob: &[u8]) -> Result<RoaringTreemap, DvError> {
    let too_short = || DvError::BlobTooShort {
        expected: FRAMING_BYTES,
        found: blob.len(),
    };
    let (len_bytes, rest) = blob.split_first_chunk::<4>().ok_or_else(too_short)?;
    let (covered, crc_bytes) = rest.split_last_chunk::<4>().ok_or_else(too_short)?;
    let (magic, vector) = covered.split_first_chunk::<4>().ok_or_else(too_short)?;

    let found = u32::from_be_bytes(*len_bytes);
    let expected = covered.len() as u64;
    if u64::from(found) != expected {
        return Err(DvError::LengthMismatch {
            expected,
            found,
            blob_size: blob.len(),
        });
    }
    if *magic != DV_MAGIC {
        return Err(DvError::BadMagic { found: *magic });
    }
    let stored = u32::from_be_bytes(*crc_bytes);
    let computed = crc32fast::hash(covered);
    if stored != computed {
        return Err(DvError::CrcMismatch { stored, computed });
    }
    deserialize_portable_treemap(vector)
}

/// Decodes a bare portable 64-bit Roaring bitmap (no length, magic or CRC), rejecting
/// keys above [`MAX_DV_KEY`], keys out of order and trailing bytes.
///
/// Empty 32-bit bitmaps (Java writes them for key gaps) are accepted and dropped.
pub fn deserialize_portable_treemap(bytes: &[u8]) -> Result<RoaringTreemap, DvError> {
    // Parsed by hand rather than with RoaringTreemap::deserialize_from, which neither
    // checks key order nor lets us reject a bad key before parsing its bitmap.
    let Some((count_bytes, mut rest)) = bytes.split_first_chunk::<8>() else {
        return Err(malformed(format!(
            "expected 8 bytes for the bitmap count, found {}",
            bytes.len()
        )));
    };
    let count = u64::from_le_bytes(*count_bytes);
    let mut bitmaps = Vec::new();
    let mut previous: Option<u32> = None;
    for index in 0..count {
        let Some((key_bytes, after_key)) = rest.split_first_chunk::<4>() else {
            return Err(malformed(format!(
                "bitmap {index} of {count}: no bytes left for its key"
            )));
        };
        let key = u32::from_le_bytes(*key_bytes);
        if key > MAX_DV_KEY {
            return Err(DvError::KeyOutOfRange { key });
        }
        if let Some(previous) = previous
            && key <= previous
        {
            return Err(DvError::KeysNotAscending { previous, key });
        }
        previous = Some(key);
        rest = after_key;
        // Reading from a slice advances it past exactly the bitmap's bytes.
        let bitmap = RoaringBitmap::deserialize_from(&mut rest).map_err(|e| {
            malformed(format!(
                "32-bit bitmap {index} of {count} (key {key}) is invalid: {e}"
            ))
        })?;
        if !bitmap.is_empty() {
            bitmaps.push((key, bitmap));
        }
    }
    if !rest.is_empty() {
        return Err(DvError::TrailingBytes { found: rest.len() });
    }
    Ok(RoaringTreemap::from_bitmaps(bitmaps))
}

fn malformed(reason: String) -> DvError {
    DvError::MalformedBitmap { reason }
}
