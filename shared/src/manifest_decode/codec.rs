//! Compression codecs of Avro container blocks: null, deflate, snappy (with its CRC-32
//! trailer) and zstandard; any other codec declines the manifest.

use std::io::Read;

use super::{DecodeError, Decoded, declined};

/// The most bytes one block may decompress to: far above any manifest's blocks (Java and
/// iceberg-rust flush a block every few hundred kilobytes to a megabyte), far below
/// what a decompression bomb of a few kilobytes would ask for.
pub(super) const MAX_BLOCK_BYTES: u64 = 256 << 20;

fn within_limit(out: Vec<u8>) -> Decoded<std::borrow::Cow<'static, [u8]>> {
    if out.len() as u64 > MAX_BLOCK_BYTES {
        return declined(format!(
            "a block decompresses to more than {MAX_BLOCK_BYTES} bytes"
        ));
    }
    Ok(std::borrow::Cow::Owned(out))
}

pub(super) enum Codec {
    Null,
    Deflate,
    Snappy,
    Zstandard,
}

impl Codec {
    pub(super) fn from_name(name: &str) -> Decoded<Self> {
        match name {
            "null" => Ok(Self::Null),
            "deflate" => Ok(Self::Deflate),
            "snappy" => Ok(Self::Snappy),
            "zstandard" => Ok(Self::Zstandard),
            other => declined(format!("codec {other}")),
        }
    }

    /// A block's bytes, decompressed; refused past [`MAX_BLOCK_BYTES`].
    pub(super) fn decompress<'a>(&self, data: &'a [u8]) -> Decoded<std::borrow::Cow<'a, [u8]>> {
        use std::borrow::Cow;
        let fail = |e: std::io::Error| DecodeError(format!("block decompression: {e}"));
        match self {
            Self::Null => Ok(Cow::Borrowed(data)),
            Self::Deflate => {
                let mut out = Vec::with_capacity(data.len() * 4);
                flate2::read::DeflateDecoder::new(data)
                    .take(MAX_BLOCK_BYTES + 1)
                    .read_to_end(&mut out)
                    .map_err(fail)?;
                within_limit(out)
            }
            Self::Snappy => {
                // Avro's snappy blocks end with the CRC-32 of the uncompressed bytes.
                let Some(split) = data.len().checked_sub(4) else {
                    return declined("snappy block shorter than its checksum");
                };
                let (compressed, crc) = data.split_at(split);
                let declared = snap::raw::decompress_len(compressed)
                    .map_err(|e| DecodeError(format!("snappy: {e}")))?;
                if declared as u64 > MAX_BLOCK_BYTES {
                    return declined(format!("snappy block of {declared} bytes"));
                }
                let out = snap::raw::Decoder::new()
                    .decompress_vec(compressed)
                    .map_err(|e| DecodeError(format!("snappy: {e}")))?;
                if crc32fast::hash(&out).to_be_bytes() != crc {
                    return declined("snappy block checksum mismatch");
                }
                Ok(Cow::Owned(out))
            }
            Self::Zstandard => {
                let mut out = Vec::with_capacity(data.len() * 4);
                zstd::stream::read::Decoder::new(data)
                    .and_then(|d| d.take(MAX_BLOCK_BYTES + 1).read_to_end(&mut out))
                    .map_err(fail)?;
                within_limit(out)
            }
        }
    }
}
