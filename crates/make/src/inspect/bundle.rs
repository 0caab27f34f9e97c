//! Clang offload bundles, plain (`__CLANG_OFFLOAD_BUNDLE__`) and compressed (`CCOB`).
//!
//! Layouts from clang's `clang/lib/Driver/OffloadBundler.cpp`: the plain header is the magic,
//! a u64 entry count, then per entry u64 offset, u64 size, u64 ID length and the ID; the
//! compressed header (`RawCompressedBundleHeader`) is the magic, u16 version, u16 method
//! (`llvm::compression::Format`: zlib = 0, zstd = 1), then v1 u32 uncompressed size; v2 u32
//! total size, u32 uncompressed size; v3 u64 total size, u64 uncompressed size; each followed by
//! the low 64 bits (`MD5Result::low`, little-endian) of the MD5 of the uncompressed bundle.
//! All integers are little-endian.

use std::io::Read;

use md5::{Digest, Md5};
use serde::Serialize;

use super::codeobject::{self, CodeObject};
use crate::arch::TargetId;

pub const MAGIC: &[u8] = b"__CLANG_OFFLOAD_BUNDLE__";
pub const CCOB_MAGIC: &[u8] = b"CCOB";
/// No decompressed bundle may be larger than this, whatever its header claims.
pub const MAX_UNCOMPRESSED: u64 = 4 << 30;

/// A parse failure at an offset (absolute in the file when the caller passed the right base).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct At {
    pub offset: u64,
    pub message: String,
}

fn at(offset: u64, message: impl Into<String>) -> At {
    At {
        offset,
        message: message.into(),
    }
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Bundle {
    /// `offload-bundle` (clang-offload-bundler) or `offload-binary` (`.llvm.offloading`).
    pub format: &'static str,
    /// Where the bundle starts (in the file, or in the decompressed data it came from).
    pub offset: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compression: Option<Compression>,
    pub entries: Vec<Entry>,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Compression {
    pub version: u16,
    pub method: &'static str,
    /// Bytes of the compressed bundle including its header (v1: up to the next bundle).
    pub compressed_size: u64,
    pub uncompressed_size: u64,
    /// The stored hash, 16 hex digits.
    pub hash: String,
    pub hash_ok: bool,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Entry {
    /// The whole bundle entry ID, e.g. `hipv4-amdgcn-amd-amdhsa--gfx90c:xnack-`.
    pub id: String,
    /// Offload kind: `host`, `hip`, `hipv4`, `openmp`.
    pub kind: String,
    pub triple: String,
    /// The target ID the entry claims (AMDGPU entries only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<TargetId>,
    pub size: u64,
    pub image: Image,
}

/// What an entry (or an OffloadBinary image) holds.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Image {
    Empty,
    CodeObject(CodeObject),
    Bitcode,
    Other,
    Invalid { reason: String },
}

impl Image {
    pub fn classify(data: &[u8]) -> Image {
        if data.is_empty() {
            Image::Empty
        } else if data.starts_with(b"BC\xc0\xde") {
            Image::Bitcode
        } else if codeobject::is_amdgpu_elf(data) {
            match codeobject::parse(data) {
                Ok(c) => Image::CodeObject(c),
                Err(reason) => Image::Invalid { reason },
            }
        } else {
            Image::Other
        }
    }

    pub fn code_object(&self) -> Option<&CodeObject> {
        match self {
            Image::CodeObject(c) => Some(c),
            _ => None,
        }
    }
}

/// Parses a target ID as it appears in bundles and code objects: unlike the target table's
/// parser it accepts generic processors (`gfx9-generic`) and unknown `gfx` names.
pub fn parse_target_id(s: &str) -> Option<TargetId> {
    let mut parts = s.split(':');
    let arch = parts.next()?;
    let name_ok = arch.strip_prefix("gfx").is_some_and(|r| {
        !r.is_empty()
            && r.bytes()
                .all(|b| b.is_ascii_digit() || b.is_ascii_lowercase() || b == b'-')
    });
    if !name_ok {
        return None;
    }
    let mut t = TargetId::plain(arch);
    for f in parts {
        let (name, on) = if let Some(n) = f.strip_suffix('+') {
            (n, true)
        } else {
            (f.strip_suffix('-')?, false)
        };
        match name {
            "xnack" => t.xnack = Some(on),
            "sramecc" => t.sramecc = Some(on),
            _ => return None,
        }
    }
    Some(t)
}

/// Splits `<kind>-<arch>-<vendor>-<os>-<env>[-<target id>]` as clang's `OffloadTargetInfo`
/// does (at most six parts; host IDs may have fewer).
pub fn split_id(id: &str) -> (String, String, Option<TargetId>) {
    let parts: Vec<&str> = id.splitn(6, '-').collect();
    let kind = parts.first().copied().unwrap_or_default().to_string();
    let triple_end = parts.len().min(5);
    let triple = parts.get(1..triple_end).unwrap_or_default().join("-");
    let target = if parts.len() == 6 && triple.starts_with("amdgcn") {
        parse_target_id(parts[5])
    } else {
        None
    };
    (kind, triple, target)
}

fn u64_at(d: &[u8], pos: usize) -> Option<u64> {
    let b = d.get(pos..pos.checked_add(8)?)?;
    Some(u64::from_le_bytes(b.try_into().ok()?))
}

fn u32_at(d: &[u8], pos: usize) -> Option<u32> {
    let b = d.get(pos..pos.checked_add(4)?)?;
    Some(u32::from_le_bytes(b.try_into().ok()?))
}

fn u16_at(d: &[u8], pos: usize) -> Option<u16> {
    let b = d.get(pos..pos.checked_add(2)?)?;
    Some(u16::from_le_bytes(b.try_into().ok()?))
}

/// Parses one plain bundle at the start of `data`; returns it and the offset of its end
/// (the end of its last entry). `base` is the offset of `data` for messages.
pub fn parse_plain(data: &[u8], base: u64) -> Result<(Bundle, usize), At> {
    if !data.starts_with(MAGIC) {
        return Err(at(base, "not a clang offload bundle (no magic)"));
    }
    let mut pos = MAGIC.len();
    let count = u64_at(data, pos).ok_or_else(|| at(base, "bundle truncated in its header"))?;
    pos += 8;
    // Each entry header takes at least 24 bytes: refuse counts the data cannot hold before
    // looping or allocating anything from them.
    if count > (data.len().saturating_sub(pos) / 24) as u64 {
        return Err(at(
            base,
            format!(
                "bundle claims {count} entries but only {} bytes follow",
                data.len() - pos
            ),
        ));
    }
    let mut entries = Vec::with_capacity(count as usize);
    let mut end = pos;
    for i in 0..count {
        let here = base + pos as u64;
        let trunc = || at(here, format!("bundle truncated in the header of entry {i}"));
        let offset = u64_at(data, pos).ok_or_else(trunc)?;
        let size = u64_at(data, pos + 8).ok_or_else(trunc)?;
        let id_len = u64_at(data, pos + 16).ok_or_else(trunc)?;
        pos += 24;
        let id_bytes = usize::try_from(id_len)
            .ok()
            .and_then(|l| data.get(pos..pos.checked_add(l)?))
            .ok_or_else(|| {
                at(
                    here,
                    format!("entry {i}'s ID of {id_len} bytes runs past the end of the data"),
                )
            })?;
        pos += id_bytes.len();
        let id = String::from_utf8_lossy(id_bytes).into_owned();
        let range = offset
            .checked_add(size)
            .filter(|&e| e <= data.len() as u64 && offset != 0)
            .map(|e| offset as usize..e as usize)
            .ok_or_else(|| {
                at(
                    here,
                    format!(
                        "entry {i} ({id}) at offset {offset} with size {size} lies outside the {} bytes of the bundle",
                        data.len()
                    ),
                )
            })?;
        end = end.max(range.end);
        let (kind, triple, target) = split_id(&id);
        entries.push(Entry {
            id,
            kind,
            triple,
            target,
            size,
            image: Image::classify(&data[range]),
        });
    }
    Ok((
        Bundle {
            format: "offload-bundle",
            offset: base,
            compression: None,
            entries,
        },
        end.max(pos),
    ))
}

/// Parses one compressed bundle at the start of `data`; returns it and its length.
pub fn parse_compressed(data: &[u8], base: u64) -> Result<(Bundle, usize), At> {
    let trunc = || at(base, "compressed bundle truncated in its header");
    if !data.starts_with(CCOB_MAGIC) {
        return Err(at(base, "not a compressed offload bundle (no CCOB magic)"));
    }
    let version = u16_at(data, 4).ok_or_else(trunc)?;
    let method = u16_at(data, 6).ok_or_else(trunc)?;
    let (header_len, total, uncompressed, hash) = match version {
        1 => (
            20usize,
            None,
            u64::from(u32_at(data, 8).ok_or_else(trunc)?),
            u64_at(data, 12).ok_or_else(trunc)?,
        ),
        2 => (
            24,
            Some(u64::from(u32_at(data, 8).ok_or_else(trunc)?)),
            u64::from(u32_at(data, 12).ok_or_else(trunc)?),
            u64_at(data, 16).ok_or_else(trunc)?,
        ),
        3 => (
            32,
            Some(u64_at(data, 8).ok_or_else(trunc)?),
            u64_at(data, 16).ok_or_else(trunc)?,
            u64_at(data, 24).ok_or_else(trunc)?,
        ),
        v => {
            return Err(at(
                base,
                format!("unknown compressed bundle version {v} (known: 1, 2, 3)"),
            ));
        }
    };
    let method_name = match method {
        0 => "zlib",
        1 => "zstd",
        m => {
            return Err(at(
                base,
                format!("unknown compression method {m} (known: 0 zlib, 1 zstd)"),
            ));
        }
    };
    let end = match total {
        Some(t) => {
            if t < header_len as u64 || t > data.len() as u64 {
                return Err(at(
                    base,
                    format!(
                        "compressed bundle v{version} declares {t} bytes but {} remain (header {header_len})",
                        data.len()
                    ),
                ));
            }
            t as usize
        }
        // v1 records no size: the bundle runs to the next bundle's magic or the end.
        None => next_magic(data, header_len).unwrap_or(data.len()),
    };
    let payload = decompress(method, &data[header_len..end], uncompressed)
        .map_err(|m| at(base, format!("compressed bundle v{version}: {m}")))?;
    let digest = Md5::digest(&payload);
    let mut low = [0u8; 8];
    low.copy_from_slice(&digest[..8]);
    let hash_ok = u64::from_le_bytes(low) == hash;
    let (mut bundle, _) = parse_plain(&payload, 0).map_err(|e| {
        at(
            base,
            format!(
                "in the decompressed bundle at byte {}: {}",
                e.offset, e.message
            ),
        )
    })?;
    bundle.offset = base;
    bundle.compression = Some(Compression {
        version,
        method: method_name,
        compressed_size: end as u64,
        uncompressed_size: uncompressed,
        hash: format!("{hash:016x}"),
        hash_ok,
    });
    Ok((bundle, end))
}

/// Where the next bundle of either kind starts. One pass that stops at the first: searching for
/// each magic to the end of the data made a run of v1 bundles, none of the other kind, quadratic
/// (1.7 MB of 54-byte bundles took 24 s).
fn next_magic(data: &[u8], from: usize) -> Option<usize> {
    let hay = data.get(from..)?;
    (0..hay.len())
        .find(|&i| hay[i..].starts_with(MAGIC) || hay[i..].starts_with(CCOB_MAGIC))
        .map(|p| p + from)
}

/// Decompresses with the declared size as a hard limit (and `MAX_UNCOMPRESSED` above that):
/// nothing is allocated from the declared size, and a stream that inflates past it stops.
pub fn decompress(method: u16, data: &[u8], declared: u64) -> Result<Vec<u8>, String> {
    if declared > MAX_UNCOMPRESSED {
        return Err(format!(
            "declared uncompressed size {declared} exceeds the {MAX_UNCOMPRESSED}-byte limit"
        ));
    }
    let reader: Box<dyn Read> = match method {
        0 => Box::new(flate2::read::ZlibDecoder::new(data)),
        1 => Box::new(
            zstd::stream::read::Decoder::with_buffer(data)
                .map_err(|e| format!("zstd: {e}"))?
                .single_frame(),
        ),
        m => return Err(format!("unknown compression method {m}")),
    };
    // Start small: growth is paid only for bytes that really come out of the stream.
    let mut out = Vec::with_capacity((data.len().saturating_mul(4)).min(declared as usize));
    reader
        .take(declared + 1)
        .read_to_end(&mut out)
        .map_err(|e| format!("decompression failed: {e}"))?;
    if out.len() as u64 != declared {
        return Err(if out.len() as u64 > declared {
            format!("decompresses to more than the declared {declared} bytes")
        } else {
            format!(
                "decompresses to {} bytes, the header declares {declared}",
                out.len()
            )
        });
    }
    Ok(out)
}

/// Every bundle in a section or file: plain and compressed bundles laid end to end, with
/// zero padding between them (as in a linked library's `.hip_fatbin`). Returns what was read
/// before the first error, and that error.
pub fn walk(data: &[u8], base: u64) -> (Vec<Bundle>, Option<At>) {
    let mut bundles = Vec::new();
    let mut pos = 0usize;
    loop {
        match data[pos..].iter().position(|&b| b != 0) {
            None => return (bundles, None),
            Some(skip) => pos += skip,
        }
        let rest = &data[pos..];
        let here = base + pos as u64;
        let parsed = if rest.starts_with(MAGIC) {
            parse_plain(rest, here)
        } else if rest.starts_with(CCOB_MAGIC) {
            parse_compressed(rest, here)
        } else {
            Err(at(
                here,
                "data that is neither an offload bundle nor padding",
            ))
        };
        match parsed {
            Ok((b, len)) => {
                bundles.push(b);
                pos += len.max(1);
            }
            Err(e) => return (bundles, Some(e)),
        }
    }
}

#[cfg(test)]
mod tests {

    /// The next bundle is the first magic of either kind, wherever the other kind is.
    #[test]
    fn the_next_bundle_is_the_nearest_magic_of_either_kind() {
        let mut data = b"CCOBxxxx".to_vec();
        data.extend_from_slice(b"yyCCOB");
        data.extend_from_slice(MAGIC);
        assert_eq!(next_magic(&data, 4), Some(10));
        assert_eq!(next_magic(&data, 11), Some(14));
        assert_eq!(next_magic(&data, 15), None);
        assert_eq!(next_magic(&data, data.len() + 1), None);
        let tail = data.len() - 3;
        assert_eq!(next_magic(&data, tail), None);
    }

    use super::*;

    #[test]
    fn ids_split_like_clang() {
        let (k, t, id) = split_id("hipv4-amdgcn-amd-amdhsa--gfx90c:xnack-");
        assert_eq!((k.as_str(), t.as_str()), ("hipv4", "amdgcn-amd-amdhsa-"));
        assert_eq!(id.unwrap().to_string(), "gfx90c:xnack-");
        let (k, t, id) = split_id("host-x86_64-unknown-linux");
        assert_eq!(
            (k.as_str(), t.as_str(), id),
            ("host", "x86_64-unknown-linux", None)
        );
        let (_, _, id) = split_id("hipv4-amdgcn-amd-amdhsa--gfx9-generic");
        assert_eq!(id.unwrap().arch, "gfx9-generic");
    }

    #[test]
    fn decompression_is_bounded_by_the_declared_size() {
        let raw = vec![7u8; 100_000];
        let z = zstd::encode_all(&raw[..], 3).unwrap();
        assert_eq!(decompress(1, &z, 100_000).unwrap().len(), 100_000);
        assert!(decompress(1, &z, 10).unwrap_err().contains("more than"));
        assert!(
            decompress(1, &z, u32::MAX as u64)
                .unwrap_err()
                .contains("declares")
        );
        assert!(decompress(1, &z, 1 << 63).unwrap_err().contains("limit"));
    }
}
