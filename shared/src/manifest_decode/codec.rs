//! Compression codecs of Avro container blocks: null, deflate, snappy (with its CRC-32
//! trailer) and zstandard; any other codec declines the manifest.

use std::io::Read;

use super::{DecodeError, Decoded, declined};

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

    pub(super) fn decompress<'a>(&self, data: &'a [u8]) -> Decoded<std::borrow::Cow<'a, [u8]>> {
        use std::borrow::Cow;
        let fail = |e: std::io::Error| DecodeError(format!("block decompression: {e}"));
        match self {
            Self::Null => Ok(Cow::Borrowed(data)),
            Self::Deflate => {
                let mut out = Vec::with_capacity(data.len() * 4);
                flate2::read::DeflateDecoder::new(data)
                    .read_to_end(&mut out)
                    .map_err(fail)?;
                Ok(Cow::Owned(out))
            }
            Self::Snappy => {
                // Avro's snappy blocks end with the CRC-32 of the uncompressed bytes.
                let Some(split) = data.len().checked_sub(4) else {
                    return declined("snappy block shorter than its checksum");
                };
                let (compressed, crc) = data.split_at(split);
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
                    .and_then(|mut d| d.read_to_end(&mut out))
                    .map_err(fail)?;
                Ok(Cow::Owned(out))
            }
        }
    }
}
