//! An ORC file's tail (postscript and footer), read and checked before orc-rust sees it.
//!
//! orc-rust builds its schema by recursing through the footer's types, and asserts what a
//! well-formed file holds: a damaged footer can panic it or overflow the stack (a type
//! that names itself as a child). So eqdv decodes the footer first (it needs the types'
//! `iceberg.id` attributes anyway) and hands the file on only when the types form a
//! tree orc-rust can walk: a struct at the root, every child after its parent and named,
//! no deeper than [`MAX_DEPTH`].

use std::io::Read;

use bytes::Bytes;
use orc_rust::proto;
use orc_rust::proto::CompressionKind;
use prost::Message;

/// The largest decoded footer accepted: a footer's length fields come from the file, and
/// a damaged one must not make eqdv allocate what it claims.
const MAX_FOOTER_BYTES: u64 = 256 << 20;

/// Nesting deeper than this is refused (orc-rust recurses once per level).
const MAX_DEPTH: usize = 64;

/// The file's last bytes from the postscript's length byte: how many bytes of the tail
/// hold the postscript, the footer and the metadata section, and the postscript.
pub(super) fn postscript(tail: &[u8]) -> Result<(u64, proto::PostScript), String> {
    let Some((&ps_len, rest)) = tail.split_last() else {
        return Err("the file is empty".into());
    };
    let ps_len = usize::from(ps_len);
    let Some(start) = rest.len().checked_sub(ps_len) else {
        return Err(format!("postscript length {ps_len} past the file's start"));
    };
    let postscript = proto::PostScript::decode(&rest[start..])
        .map_err(|e| format!("cannot decode the postscript: {e}"))?;
    if postscript.magic.as_deref() != Some("ORC") {
        return Err("the postscript lacks ORC's magic (not an ORC file?)".into());
    }
    let footer = postscript.footer_length.unwrap_or(0);
    let metadata = postscript.metadata_length.unwrap_or(0);
    let needed = footer
        .checked_add(metadata)
        .and_then(|n| n.checked_add(ps_len as u64 + 1))
        .ok_or_else(|| format!("footer length {footer} overflows"))?;
    Ok((needed, postscript))
}

/// The footer from its stored bytes, decompressed and checked (see the module's note).
pub(super) fn footer(
    stored: Bytes,
    postscript: &proto::PostScript,
) -> Result<proto::Footer, String> {
    let decoded = decompress(postscript, &stored)?;
    let footer = proto::Footer::decode(decoded.as_slice())
        .map_err(|e| format!("cannot decode the footer: {e}"))?;
    check_types(&footer.types)?;
    Ok(footer)
}

/// A stream's bytes as stored: chunks of a 3-byte header (length and an "original"
/// bit) and the codec's block, or the bytes themselves without a codec.
fn decompress(postscript: &proto::PostScript, stored: &[u8]) -> Result<Vec<u8>, String> {
    let kind = postscript.compression();
    if kind == CompressionKind::None {
        return Ok(stored.to_vec());
    }
    // A block decompresses to at most the codec's block size (256 KiB unless set).
    let block = postscript
        .compression_block_size
        .unwrap_or(256 * 1024)
        .min(MAX_FOOTER_BYTES);
    let mut out = Vec::new();
    let mut rest = stored;
    while !rest.is_empty() {
        let [a, b, c, ..] = *rest else {
            return Err("a compressed block's header is cut short".into());
        };
        let header = u32::from(a) | u32::from(b) << 8 | u32::from(c) << 16;
        let (original, len) = (header & 1 == 1, (header >> 1) as usize);
        let Some(chunk) = rest.get(3..3 + len) else {
            return Err(format!("a compressed block of {len} bytes is cut short"));
        };
        rest = &rest[3 + len..];
        if original {
            out.extend_from_slice(chunk);
        } else {
            let limit = usize::try_from(block).unwrap_or(usize::MAX);
            let decoded = match kind {
                CompressionKind::Zlib => {
                    let mut decoded = Vec::new();
                    flate2::read::DeflateDecoder::new(chunk)
                        .take(block)
                        .read_to_end(&mut decoded)
                        .map_err(|e| format!("zlib: {e}"))?;
                    decoded
                }
                CompressionKind::Snappy => {
                    let len =
                        snap::raw::decompress_len(chunk).map_err(|e| format!("snappy: {e}"))?;
                    if len > limit {
                        return Err(format!(
                            "a snappy block of {len} bytes, past the block size"
                        ));
                    }
                    snap::raw::Decoder::new()
                        .decompress_vec(chunk)
                        .map_err(|e| format!("snappy: {e}"))?
                }
                CompressionKind::Zstd => {
                    zstd::bulk::decompress(chunk, limit).map_err(|e| format!("zstd: {e}"))?
                }
                CompressionKind::Lz4 => {
                    lz4_flex::block::decompress(chunk, limit).map_err(|e| format!("lz4: {e}"))?
                }
                other => return Err(format!("its footer's codec {other:?} is not supported")),
            };
            out.extend_from_slice(&decoded);
        }
        if out.len() as u64 > MAX_FOOTER_BYTES {
            return Err(format!("a footer of more than {MAX_FOOTER_BYTES} bytes"));
        }
    }
    Ok(out)
}

/// The types form a tree orc-rust can walk: a struct at the root, each child after its
/// parent (ORC numbers types in pre-order) and named in a struct, each a child of one
/// parent, nested at most [`MAX_DEPTH`] deep.
fn check_types(types: &[proto::Type]) -> Result<(), String> {
    use proto::r#type::Kind;
    let Some(root) = types.first() else {
        return Err("the footer has no types".into());
    };
    if root.kind() != Kind::Struct {
        return Err(format!("the root type is {:?}, not a struct", root.kind()));
    }
    let mut depth = vec![0usize; types.len()];
    let mut has_parent = vec![false; types.len()];
    for (at, ty) in types.iter().enumerate() {
        if ty.kind() == Kind::Struct && ty.field_names.len() != ty.subtypes.len() {
            return Err(format!(
                "struct type {at} has {} children and {} names",
                ty.subtypes.len(),
                ty.field_names.len()
            ));
        }
        let children = match ty.kind() {
            Kind::List => 1,
            Kind::Map => 2,
            Kind::Struct | Kind::Union => ty.subtypes.len(),
            _ => 0,
        };
        if ty.subtypes.len() != children {
            return Err(format!(
                "type {at} ({:?}) has {} children",
                ty.kind(),
                ty.subtypes.len()
            ));
        }
        for &child in &ty.subtypes {
            let child = child as usize;
            if child <= at || child >= types.len() || has_parent[child] {
                return Err(format!("type {at} names type {child} as a child"));
            }
            has_parent[child] = true;
            depth[child] = depth[at] + 1;
            if depth[child] > MAX_DEPTH {
                return Err(format!("types nested deeper than {MAX_DEPTH}"));
            }
        }
    }
    Ok(())
}
