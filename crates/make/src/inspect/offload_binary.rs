//! LLVM's OffloadBinary format (magic 0x10FF10AD), found in `.llvm.offloading` sections of
//! objects compiled with `--offload-new-driver`.
//!
//! Layout from `llvm/include/llvm/Object/OffloadBinary.h` and `llvm/lib/Object/OffloadBinary.cpp`:
//! header {magic[4], u32 version, u64 size, u64 entry offset, u64 entry size (v1) or entry
//! count (v2+), u64 inflated size (v3)}; entry {u16 image kind, u16 offload kind, u32 flags,
//! u64 string offset, u64 string count, u64 image offset, u64 image size}; string entries
//! {u64 key offset, u64 value offset[, u64 value size (v2+)]}, strings NUL-terminated.
//! Binaries in one section are aligned to 8 bytes and laid end to end.

use super::bundle::{At, Bundle, Entry, Image, parse_target_id};

pub const MAGIC: &[u8] = &[0x10, 0xff, 0x10, 0xad];
const HEADER_LEN: usize = 32;
const ENTRY_LEN: u64 = 40;

fn at(offset: u64, message: impl Into<String>) -> At {
    At {
        offset,
        message: message.into(),
    }
}

fn u64_at(d: &[u8], pos: u64) -> Option<u64> {
    let pos = usize::try_from(pos).ok()?;
    let b = d.get(pos..pos.checked_add(8)?)?;
    Some(u64::from_le_bytes(b.try_into().ok()?))
}

fn u16_at(d: &[u8], pos: u64) -> Option<u16> {
    let pos = usize::try_from(pos).ok()?;
    let b = d.get(pos..pos.checked_add(2)?)?;
    Some(u16::from_le_bytes(b.try_into().ok()?))
}

fn cstr_at(d: &[u8], pos: u64) -> Option<&str> {
    let rest = d.get(usize::try_from(pos).ok()?..)?;
    let len = rest.iter().position(|&b| b == 0)?;
    std::str::from_utf8(&rest[..len]).ok()
}

fn offload_kind(k: u16) -> &'static str {
    match k {
        0 => "none",
        1 => "openmp",
        2 => "cuda",
        // LLVM 19 numbers the kinds (HIP = 3); newer LLVM uses bit flags (HIP = 4, SYCL = 8).
        3 | 4 => "hip",
        8 => "sycl",
        _ => "unknown",
    }
}

/// Parses one OffloadBinary at the start of `data`; returns it and its size.
pub fn parse_one(data: &[u8], base: u64) -> Result<(Bundle, usize), At> {
    if !data.starts_with(MAGIC) {
        return Err(at(base, "not an OffloadBinary (no 0x10FF10AD magic)"));
    }
    if data.len() < HEADER_LEN {
        return Err(at(base, "OffloadBinary truncated in its header"));
    }
    let version = u32::from_le_bytes([data[4], data[5], data[6], data[7]]);
    let size = u64_at(data, 8).unwrap_or(0);
    let entries_offset = u64_at(data, 16).unwrap_or(0);
    let count_field = u64_at(data, 24).unwrap_or(0);
    if !(1..=3).contains(&version) {
        return Err(at(
            base,
            format!("unknown OffloadBinary version {version} (known: 1 to 3)"),
        ));
    }
    if size < HEADER_LEN as u64 || size > data.len() as u64 {
        return Err(at(
            base,
            format!(
                "OffloadBinary declares {size} bytes but {} remain",
                data.len()
            ),
        ));
    }
    let data = &data[..size as usize];
    if version >= 3 && u64_at(data, 32).is_some_and(|inflated| inflated != 0) {
        return Err(at(
            base,
            "compressed OffloadBinary (version 3 with an inflated size) is not supported yet",
        ));
    }
    let count = if version == 1 { 1 } else { count_field };
    if count > size / ENTRY_LEN {
        return Err(at(
            base,
            format!("OffloadBinary claims {count} entries in {size} bytes"),
        ));
    }
    let string_len: u64 = if version == 1 { 16 } else { 24 };
    let mut entries = Vec::new();
    for i in 0..count {
        let e = entries_offset
            .checked_add(i * ENTRY_LEN)
            .filter(|e| e.checked_add(ENTRY_LEN).is_some_and(|end| end <= size))
            .ok_or_else(|| at(base, format!("OffloadBinary entry {i} lies outside it")))?;
        let here = base + e;
        let bad = |what: &str| at(here, format!("OffloadBinary entry {i}: {what}"));
        let offload = u16_at(data, e + 2).ok_or_else(|| bad("truncated"))?;
        let strings = u64_at(data, e + 8).ok_or_else(|| bad("truncated"))?;
        let nstrings = u64_at(data, e + 16).ok_or_else(|| bad("truncated"))?;
        let image_offset = u64_at(data, e + 24).ok_or_else(|| bad("truncated"))?;
        let image_size = u64_at(data, e + 32).ok_or_else(|| bad("truncated"))?;
        if nstrings > size / string_len {
            return Err(bad(&format!("{nstrings} strings cannot fit")));
        }
        let (mut triple, mut arch) = (String::new(), String::new());
        for s in 0..nstrings {
            let se = strings
                .checked_add(s * string_len)
                .ok_or_else(|| bad("string table offset overflows"))?;
            let key = u64_at(data, se)
                .and_then(|k| cstr_at(data, k))
                .ok_or_else(|| bad("string key outside the binary"))?;
            let value = u64_at(data, se + 8)
                .and_then(|v| cstr_at(data, v))
                .ok_or_else(|| bad("string value outside the binary"))?;
            match key {
                "triple" => triple = value.to_string(),
                "arch" => arch = value.to_string(),
                _ => {}
            }
        }
        let image = image_offset
            .checked_add(image_size)
            .filter(|&end| end <= size)
            .map(|end| &data[image_offset as usize..end as usize])
            .ok_or_else(|| {
                bad(&format!(
                    "image at {image_offset} of {image_size} bytes lies outside the binary"
                ))
            })?;
        let kind = offload_kind(offload).to_string();
        let target = if triple.starts_with("amdgcn") {
            parse_target_id(&arch)
        } else {
            None
        };
        entries.push(Entry {
            id: format!("{kind}-{triple}-{arch}"),
            kind,
            triple,
            target,
            size: image_size,
            image: Image::classify(image),
        });
    }
    Ok((
        Bundle {
            format: "offload-binary",
            offset: base,
            compression: None,
            entries,
        },
        size as usize,
    ))
}

/// Every OffloadBinary in a `.llvm.offloading` section.
pub fn walk(data: &[u8], base: u64) -> (Vec<Bundle>, Option<At>) {
    let mut out = Vec::new();
    let mut pos = 0usize;
    while pos < data.len() {
        if data[pos..].iter().all(|&b| b == 0) {
            break;
        }
        match parse_one(&data[pos..], base + pos as u64) {
            Ok((b, len)) => {
                out.push(b);
                pos = pos.saturating_add(len.max(1)).next_multiple_of(8);
            }
            Err(e) => return (out, Some(e)),
        }
    }
    (out, None)
}
