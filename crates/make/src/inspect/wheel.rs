//! Wheels: a PyTorch wheel carries its GPU libraries inside it (`torch/lib/libtorch_hip.so`),
//! and a build whose GPU code is only there installs nothing else. So a `.whl` is read member by
//! member through its zip directory, and each member that can hold GPU code is inspected as a
//! file of its own, named `WHEEL!/MEMBER`.
//!
//! A wheel comes from outside (a release directory, a mirror), so nothing in it is trusted: a
//! member is read only up to [`MEMBER_LIMIT`] bytes whatever its header declares (a deflate
//! bomb cannot exhaust memory), a bad CRC or a damaged directory becomes an [`InspectError`]
//! naming the member, and member names are only displayed, never used as paths.

use std::io::{Read, Seek};
use std::path::Path;

use super::{FileReport, InspectError, inspect_bytes, known_magic};

/// A zip local file header, the first bytes of every wheel.
pub const MAGIC: &[u8] = b"PK\x03\x04";

/// The most bytes read from one member. PyTorch's largest library for every target AMD ships
/// is about 1.5 GB; a member past this is reported, not read.
pub const MEMBER_LIMIT: u64 = 4 << 30;

/// The most memory set aside for a member before its bytes arrive.
const RESERVE_LIMIT: u64 = 64 << 20;

/// True for a file inspect reads as a wheel: zip bytes under a `.whl` name. Other zip files
/// (a source archive, a Java jar) carry no libraries a ROCm user loads.
pub fn is_wheel(path: &Path, head: &[u8]) -> bool {
    head.starts_with(MAGIC) && path.extension().is_some_and(|e| e == "whl")
}

/// The separator between a wheel and a member in the names of reports.
pub const MEMBER_SEPARATOR: &str = "!/";

/// Reads every member of the wheel in `reader` that can hold GPU code. `path` is used in errors,
/// `display` to name the members' reports (`display!/torch/lib/libtorch_hip.so`).
pub fn walk<R: Read + Seek>(
    reader: R,
    path: &Path,
    display: &str,
) -> (Vec<FileReport>, Vec<InspectError>) {
    walk_limited(reader, path, display, MEMBER_LIMIT)
}

fn walk_limited<R: Read + Seek>(
    reader: R,
    path: &Path,
    display: &str,
    limit: u64,
) -> (Vec<FileReport>, Vec<InspectError>) {
    let (mut reports, mut errors) = (Vec::new(), Vec::new());
    let fail = |message: String| InspectError {
        file: path.to_path_buf(),
        offset: None,
        message,
    };
    let mut archive = match zip::ZipArchive::new(reader) {
        Ok(a) => a,
        Err(e) => {
            errors.push(fail(format!("not a readable wheel (zip): {e}")));
            return (reports, errors);
        }
    };
    for i in 0..archive.len() {
        let mut member = match archive.by_index(i) {
            Ok(m) => m,
            Err(e) => {
                errors.push(fail(format!("wheel member {i}: {e}")));
                continue;
            }
        };
        if member.is_dir() {
            continue;
        }
        let name = match member.name() {
            Ok(n) => n.to_string(),
            Err(e) => {
                errors.push(fail(format!("wheel member {i}: unreadable name: {e}")));
                continue;
            }
        };
        let offset = Some(member.header_start());
        let member_error = |message: String| InspectError {
            file: path.to_path_buf(),
            offset,
            message: format!("wheel member {name}: {message}"),
        };
        // The first bytes say whether the member can hold GPU code at all: most of a wheel is
        // Python and headers, not worth inflating.
        let mut head = Vec::with_capacity(8);
        if let Err(e) = (&mut member).take(8).read_to_end(&mut head) {
            errors.push(member_error(e.to_string()));
            continue;
        }
        if !known_magic(&head) {
            continue;
        }
        if member.size() > limit {
            errors.push(member_error(format!(
                "declares {} bytes, more than inspect reads from one member ({limit} bytes)",
                member.size(),
            )));
            continue;
        }
        let mut data = head;
        // What the header declares is only a hint: a small hostile wheel must not get a large
        // allocation for nothing.
        data.reserve(usize::try_from(member.size().min(RESERVE_LIMIT)).unwrap_or(0));
        // One byte past the limit tells a member that lied about its size from one that did not.
        let read = (&mut member)
            .take((limit + 1).saturating_sub(data.len() as u64))
            .read_to_end(&mut data);
        if let Err(e) = read {
            errors.push(member_error(e.to_string()));
            continue;
        }
        if data.len() as u64 > limit {
            errors.push(member_error(format!(
                "inflates past {limit} bytes, more than inspect reads from one member"
            )));
            continue;
        }
        let shown = format!("{display}{MEMBER_SEPARATOR}{name}");
        let (report, found) = inspect_bytes(path, &shown, &data);
        reports.extend(report);
        // Offsets inside an inflated member mean nothing in the wheel's own bytes.
        errors.extend(found.into_iter().map(|e| InspectError {
            message: match e.offset {
                Some(o) => format!("wheel member {name}, at its offset {o:#x}: {}", e.message),
                None => format!("wheel member {name}: {}", e.message),
            },
            offset: None,
            ..e
        }));
    }
    (reports, errors)
}

#[cfg(test)]
mod tests {
    use std::io::{Cursor, Write};

    use zip::write::SimpleFileOptions;

    use super::*;

    /// An x86-64 ELF header and nothing else: known magic, no GPU code, a report of its own.
    fn elf() -> Vec<u8> {
        let mut v = vec![0u8; 64];
        v[..4].copy_from_slice(b"\x7fELF");
        v[4] = 2; // 64-bit
        v[5] = 1; // little-endian
        v[6] = 1;
        v[16] = 3; // ET_DYN
        v[18] = 62; // EM_X86_64
        v[20] = 1;
        v[52] = 64; // e_ehsize
        v
    }

    fn wheel(members: &[(&str, &[u8], zip::CompressionMethod)]) -> Vec<u8> {
        let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
        for (name, bytes, method) in members {
            w.start_file(
                *name,
                SimpleFileOptions::default().compression_method(*method),
            )
            .unwrap();
            w.write_all(bytes).unwrap();
        }
        w.finish().unwrap().into_inner()
    }

    fn read(bytes: &[u8], limit: u64) -> (Vec<FileReport>, Vec<InspectError>) {
        walk_limited(Cursor::new(bytes), Path::new("x.whl"), "x.whl", limit)
    }

    #[test]
    fn only_members_that_can_hold_gpu_code_are_read_and_named_inside_the_wheel() {
        use zip::CompressionMethod::{Deflated, Stored};
        let bytes = wheel(&[
            ("pkg/__init__.py", b"import os\n", Deflated),
            ("pkg/lib/libx.so", &elf(), Deflated),
            ("pkg/lib/liby.so", &elf(), Stored),
            ("pkg-1.0.dist-info/WHEEL", b"Wheel-Version: 1.0\n", Deflated),
        ]);
        let (reports, errors) = read(&bytes, MEMBER_LIMIT);
        assert!(errors.is_empty(), "{errors:?}");
        let names: Vec<&str> = reports.iter().map(|r| r.path.as_str()).collect();
        assert_eq!(names, ["x.whl!/pkg/lib/libx.so", "x.whl!/pkg/lib/liby.so"]);
    }

    #[test]
    fn damage_and_bombs_are_errors_naming_the_member() {
        use zip::CompressionMethod::Deflated;
        let mut big = elf();
        big.resize(1 << 20, 0);
        // Past the limit as declared.
        let (_, errors) = read(&wheel(&[("pkg/big.so", &big, Deflated)]), 4096);
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(
            errors[0]
                .message
                .contains("wheel member pkg/big.so: declares 1048576 bytes")
        );

        // Declared small, inflating past the limit: the directory's sizes lie.
        let mut bytes = wheel(&[("pkg/big.so", &big, Deflated)]);
        let cd = bytes.windows(4).rposition(|w| w == b"PK\x01\x02").unwrap();
        bytes[cd + 24..cd + 28].copy_from_slice(&100u32.to_le_bytes());
        bytes[22..26].copy_from_slice(&100u32.to_le_bytes());
        let (reports, errors) = read(&bytes, 4096);
        assert!(reports.is_empty());
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(
            errors[0].message.starts_with("wheel member pkg/big.so: "),
            "{errors:?}"
        );

        // A flipped byte in a member's deflate stream: a CRC or inflate error, not a report.
        let mut bytes = wheel(&[("pkg/a.so", &big, Deflated)]);
        let data = 30 + "pkg/a.so".len();
        bytes[data + 40] ^= 0xff;
        let (reports, errors) = read(&bytes, MEMBER_LIMIT);
        assert!(
            reports.is_empty() && errors.len() == 1,
            "{reports:?} {errors:?}"
        );
        assert!(errors[0].message.contains("pkg/a.so"), "{errors:?}");

        // Not a zip at all, and a zip cut in half.
        let (_, errors) = read(b"PK\x03\x04 but no more", MEMBER_LIMIT);
        assert!(
            errors[0].message.starts_with("not a readable wheel (zip)"),
            "{errors:?}"
        );
        let whole = wheel(&[("pkg/a.so", &elf(), Deflated)]);
        let (_, errors) = read(&whole[..whole.len() / 2], MEMBER_LIMIT);
        assert_eq!(errors.len(), 1, "{errors:?}");
    }
}
