//! Patch series taken by reference from another project's archive (`[[series]]`): a Debian
//! `debian.tar.xz` is downloaded (pinned by sha256), its `<dir>/series` file read, and the
//! patches it lists handed to the same all-or-nothing patch applier as the catalog's own.
//! Nothing is unpacked to disk; reads are bounded so a hostile archive cannot exhaust memory.

use std::io::Read;
use std::path::Path;

use crate::recipe::Series;
use crate::source::patch::PatchFile;

/// Uncompressed bytes read from one archive at most (a Debian packaging tarball is tens of KiB
/// to a few MiB).
const MAX_ARCHIVE_BYTES: u64 = 256 << 20;
/// One patch or series file at most.
const MAX_FILE_BYTES: u64 = 32 << 20;

#[derive(Debug, thiserror::Error)]
pub enum SeriesError {
    #[error("{archive}: {why}")]
    Read { archive: String, why: String },
    #[error("{archive} has no {dir}/series")]
    NoSeries { archive: String, dir: String },
    #[error("{archive}: {dir}/series lists {entry}, which the archive does not hold")]
    MissingPatch {
        archive: String,
        dir: String,
        entry: String,
    },
    #[error("{archive}: {dir}/series has no entry {entry}")]
    NotInSeries {
        archive: String,
        dir: String,
        entry: String,
        entries: Vec<String>,
    },
    #[error("{archive}: {dir}/series entry {entry} asks for {option}, which is not applied")]
    Option {
        archive: String,
        dir: String,
        entry: String,
        option: String,
    },
}

impl crate::diag::Hint for SeriesError {
    fn hint(&self) -> String {
        match self {
            SeriesError::Read { .. } => {
                "the archive must be a tar file, optionally xz-, gzip- or zstd-compressed".into()
            }
            SeriesError::NoSeries { .. } => {
                "set dir = \"…\" in [[series]] to the directory that holds the series file".into()
            }
            SeriesError::MissingPatch { .. } => {
                "the archive is inconsistent; pin another version of it".into()
            }
            SeriesError::NotInSeries { entries, .. } => format!(
                "the series lists: {}; fix only/skip in [[series]] (the archive's version may have changed its patches)",
                entries.join(", ")
            ),
            SeriesError::Option { .. } => {
                "only -p1 patches are applied; leave this entry out with skip = [\"…\"]".into()
            }
        }
    }
}

/// One `series` line: the patch name, and options such as `-p1`.
fn entries(text: &str) -> Vec<(String, Vec<String>)> {
    text.lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .filter(|l| !l.is_empty())
        .map(|l| {
            let mut words = l.split_whitespace();
            let name = words.next().unwrap_or_default().to_string();
            (name, words.map(str::to_string).collect())
        })
        .collect()
}

/// A Debian binary package (`.deb`): an `ar` archive whose `data.tar.*` member holds the files.
pub fn is_deb(path: &Path) -> bool {
    let mut magic = [0u8; 8];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok_and(|()| &magic == b"!<arch>\n")
}

/// The `data.tar.*` member of a Debian binary package, as a reader of its compressed bytes.
fn deb_data(path: &Path) -> std::io::Result<Box<dyn Read>> {
    use object::read::archive::ArchiveFile;
    use std::io::{Seek, SeekFrom};
    let bad = |why: String| std::io::Error::new(std::io::ErrorKind::InvalidData, why);
    let file = std::fs::File::open(path)?;
    let cache = object::ReadCache::new(file);
    let ar = ArchiveFile::parse(&cache).map_err(|e| bad(format!("not a Debian package: {e}")))?;
    for member in ar.members() {
        let member = member.map_err(|e| bad(format!("not a Debian package: {e}")))?;
        if member.name().starts_with(b"data.tar") {
            let (offset, size) = member.file_range();
            let mut f = std::fs::File::open(path)?;
            f.seek(SeekFrom::Start(offset))?;
            return Ok(Box::new(f.take(size)));
        }
    }
    Err(bad("a Debian package without a data.tar member".into()))
}

/// A tar archive's bytes, decompressed by what its first bytes say: xz, gzip, zstd or none.
/// Source tarballs and packaging archives both come this way, and so do the files of a Debian
/// binary package (its `data.tar.*`).
pub fn open_archive(path: &Path) -> std::io::Result<Box<dyn Read>> {
    let raw: Box<dyn Read> = if is_deb(path) {
        deb_data(path)?
    } else {
        Box::new(std::fs::File::open(path)?)
    };
    decompress(raw)
}

fn decompress(mut raw: Box<dyn Read>) -> std::io::Result<Box<dyn Read>> {
    let mut magic = [0u8; 6];
    let mut n = 0;
    while n < magic.len() {
        match raw.read(&mut magic[n..])? {
            0 => break,
            k => n += k,
        }
    }
    let f = std::io::Cursor::new(magic[..n].to_vec()).chain(raw);
    Ok(if n >= 6 && magic == [0xfd, b'7', b'z', b'X', b'Z', 0] {
        Box::new(liblzma::read::XzDecoder::new(f))
    } else if n >= 2 && magic[..2] == [0x1f, 0x8b] {
        Box::new(flate2::read::GzDecoder::new(f))
    } else if n >= 4 && magic[..4] == [0x28, 0xb5, 0x2f, 0xfd] {
        Box::new(zstd::stream::read::Decoder::new(f)?)
    } else {
        Box::new(f)
    })
}

/// The patches `series` selects from the archive at `path`, in the series' order. `archive`
/// names it in messages (the file name of its URL).
pub fn read(path: &Path, archive: &str, series: &Series) -> Result<Vec<PatchFile>, SeriesError> {
    let err = |why: String| SeriesError::Read {
        archive: archive.to_string(),
        why,
    };
    let dir = series.dir.trim_end_matches('/');
    let mut files: std::collections::BTreeMap<String, Vec<u8>> = Default::default();
    let reader = open_archive(path).map_err(|e| err(e.to_string()))?;
    let mut tar = tar::Archive::new(reader.take(MAX_ARCHIVE_BYTES));
    for entry in tar.entries().map_err(|e| err(e.to_string()))? {
        let mut entry = entry.map_err(|e| err(e.to_string()))?;
        if !entry.header().entry_type().is_file() {
            continue;
        }
        let name = entry
            .path()
            .map_err(|e| err(e.to_string()))?
            .to_string_lossy()
            .trim_start_matches("./")
            .to_string();
        let Some(rest) = name.strip_prefix(&format!("{dir}/")) else {
            continue;
        };
        if entry.size() > MAX_FILE_BYTES {
            return Err(err(format!(
                "{name} is {} bytes, more than a patch can be",
                entry.size()
            )));
        }
        let mut bytes = Vec::new();
        entry
            .read_to_end(&mut bytes)
            .map_err(|e| err(e.to_string()))?;
        files.insert(rest.to_string(), bytes);
    }
    let list = files.get("series").ok_or_else(|| SeriesError::NoSeries {
        archive: archive.to_string(),
        dir: dir.to_string(),
    })?;
    let list = entries(&String::from_utf8_lossy(list));
    let names: Vec<String> = list.iter().map(|(n, _)| n.clone()).collect();
    for wanted in series.only.iter().chain(&series.skip) {
        if !names.contains(wanted) {
            return Err(SeriesError::NotInSeries {
                archive: archive.to_string(),
                dir: dir.to_string(),
                entry: wanted.clone(),
                entries: names.clone(),
            });
        }
    }
    let mut out = Vec::new();
    for (name, options) in &list {
        let selected = if series.only.is_empty() {
            !series.skip.contains(name)
        } else {
            series.only.contains(name)
        };
        if !selected {
            continue;
        }
        if let Some(o) = options.iter().find(|o| o.as_str() != "-p1") {
            return Err(SeriesError::Option {
                archive: archive.to_string(),
                dir: dir.to_string(),
                entry: name.clone(),
                option: o.clone(),
            });
        }
        let bytes = files
            .get(name)
            .ok_or_else(|| SeriesError::MissingPatch {
                archive: archive.to_string(),
                dir: dir.to_string(),
                entry: name.clone(),
            })?
            .clone();
        out.push(PatchFile {
            name: format!("{archive}:{dir}/{name}"),
            bytes,
        });
    }
    Ok(out)
}

/// The file name at the end of a URL, for messages.
pub fn archive_name(url: &str) -> &str {
    url.rsplit('/')
        .next()
        .filter(|s| !s.is_empty())
        .unwrap_or(url)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diag::Hint;

    fn archive(files: &[(&str, &str)]) -> tempfile::NamedTempFile {
        let f = tempfile::NamedTempFile::new().unwrap();
        let enc = liblzma::write::XzEncoder::new(f.reopen().unwrap(), 6);
        let mut b = tar::Builder::new(enc);
        for (name, text) in files {
            let mut h = tar::Header::new_gnu();
            h.set_size(text.len() as u64);
            h.set_mode(0o644);
            h.set_cksum();
            b.append_data(&mut h, name, text.as_bytes()).unwrap();
        }
        b.into_inner().unwrap().finish().unwrap();
        f
    }

    fn series(only: &[&str], skip: &[&str]) -> Series {
        Series {
            url: "http://x/p_1-1.debian.tar.xz".into(),
            sha256: "0".repeat(64),
            dir: "debian/patches".into(),
            only: only.iter().map(|s| s.to_string()).collect(),
            skip: skip.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn reads_the_series_in_order_with_only_and_skip() {
        let a = archive(&[
            ("debian/patches/b.patch", "B"),
            ("debian/patches/a.patch", "A"),
            ("debian/patches/c.patch", "C"),
            (
                "debian/patches/series",
                "# comment\nb.patch\na.patch -p1\n\nc.patch\n",
            ),
            ("debian/rules", "x"),
        ]);
        let names = |v: Vec<PatchFile>| v.into_iter().map(|p| p.name).collect::<Vec<_>>();
        let all = read(a.path(), "p.tar.xz", &series(&[], &[])).unwrap();
        assert_eq!(
            names(all),
            [
                "p.tar.xz:debian/patches/b.patch",
                "p.tar.xz:debian/patches/a.patch",
                "p.tar.xz:debian/patches/c.patch"
            ]
        );
        let only = read(a.path(), "p.tar.xz", &series(&["c.patch", "b.patch"], &[])).unwrap();
        assert_eq!(
            only.iter().map(|p| &p.bytes[..]).collect::<Vec<_>>(),
            [b"B", b"C"]
        );
        let skip = read(a.path(), "p.tar.xz", &series(&[], &["a.patch"])).unwrap();
        assert_eq!(skip.len(), 2);
    }

    #[test]
    fn names_what_is_wrong() {
        let a = archive(&[
            (
                "debian/patches/series",
                "a.patch\nb.patch -p0\nmissing.patch\n",
            ),
            ("debian/patches/a.patch", "A"),
            ("debian/patches/b.patch", "B"),
        ]);
        let e = read(a.path(), "p.tar.xz", &series(&["nope.patch"], &[])).unwrap_err();
        assert!(matches!(e, SeriesError::NotInSeries { .. }), "{e}");
        assert!(e.hint().contains("a.patch, b.patch, missing.patch"));
        let e = read(a.path(), "p.tar.xz", &series(&["b.patch"], &[])).unwrap_err();
        assert!(e.to_string().contains("-p0"), "{e}");
        let e = read(a.path(), "p.tar.xz", &series(&["missing.patch"], &[])).unwrap_err();
        assert!(matches!(e, SeriesError::MissingPatch { .. }), "{e}");
        let none = archive(&[("debian/rules", "x")]);
        let e = read(none.path(), "p.tar.xz", &series(&[], &[])).unwrap_err();
        assert!(matches!(e, SeriesError::NoSeries { .. }), "{e}");
        let garbage = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(garbage.path(), b"\xfd7zXZ\0not really").unwrap();
        assert!(read(garbage.path(), "p.tar.xz", &series(&[], &[])).is_err());
    }
}
