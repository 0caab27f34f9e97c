//! The wheels a stack carries (`share/rocforge/wheels/*.whl`: PyTorch's, torchvision's),
//! installed in the image's layer so that `python3 -c "import torch"` works in it.
//!
//! A wheel is unpacked as pip unpacks one whose `Root-Is-Purelib` holds: every member under one
//! `site-packages` directory of the prefix (`<prefix>/lib/python3/site-packages`), which the
//! image's `PYTHONPATH` names. Its `.dist-info` comes along, so `importlib.metadata` and
//! `pip list` see it. What pip would add beside (console scripts from entry points, a
//! RECORD rewritten with installed paths) is not made: the import is what the image is for.
//! A member under `NAME.data/` (headers, scripts, data outside the package) is refused: no
//! wheel this project builds has one, and placing them is pip's scheme logic.
//!
//! Member names come from a zip built in the store, but are still checked: relative, no `..`,
//! no absolute path, nothing a tar reader would put outside the layer's directory.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::ImageError;
// The most bytes one member may hold: inspect's limit, so a wheel inspect reads is one an image
// takes.
use crate::inspect::wheel::MEMBER_LIMIT;
use crate::package::manifest::{FileEntry, Kind};

/// Where a tree keeps the wheels its build made (as `package` finds them).
pub const WHEEL_DIR: &str = crate::package::WHEEL_DIR;

/// Under the prefix: the directory the wheels are unpacked into, on the image's PYTHONPATH.
pub const SITE_PACKAGES: &str = "lib/python3/site-packages";

/// One wheel of a component's tree.
#[derive(Debug, Clone)]
pub struct Wheel {
    /// Its file, absolute.
    pub path: PathBuf,
    pub file_name: String,
    /// The Python it needs: `3.13` for a `cp313` wheel, `3` for a `py3` one.
    pub python: String,
}

/// One member of a wheel, as it goes into the layer.
#[derive(Debug, Clone)]
pub struct Member {
    /// Index in the wheel's zip directory (None: a directory the members imply).
    pub index: Option<usize>,
    pub entry: FileEntry,
    /// DT_SONAME and DT_NEEDED, for an ELF member.
    pub soname: Option<String>,
    pub needed: Vec<String>,
}

/// The wheels under `tree`'s wheel directory, sorted by name.
pub fn wheels_of(tree: &Path) -> Result<Vec<Wheel>, ImageError> {
    let dir = tree.join(WHEEL_DIR);
    let rd = match std::fs::read_dir(&dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(super::io_err(&dir)(e)),
    };
    let mut out = Vec::new();
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.ends_with(".whl") || !e.file_type().is_ok_and(|t| t.is_file()) {
            continue;
        }
        let python = python_of(&name).ok_or_else(|| ImageError::Wheel {
            wheel: name.clone(),
            message: "its name has no Python tag (NAME-VERSION-PYTAG-ABI-PLATFORM.whl)".into(),
        })?;
        out.push(Wheel {
            path: e.path(),
            file_name: name,
            python,
        });
    }
    out.sort_by(|a, b| a.file_name.cmp(&b.file_name));
    Ok(out)
}

/// The Python a wheel's file name asks for: `cp313` → `3.13`, `py3` → `3` (any Python 3).
/// Of a compressed tag set (`py2.py3`), the Python 3 one.
pub fn python_of(file_name: &str) -> Option<String> {
    let stem = file_name.strip_suffix(".whl")?;
    let parts: Vec<&str> = stem.split('-').collect();
    if parts.len() < 5 {
        return None;
    }
    let tags = parts[parts.len() - 3];
    tags.split('.').find_map(|t| {
        let digits = t.strip_prefix("cp").or_else(|| t.strip_prefix("py"))?;
        let minor = digits.strip_prefix('3')?;
        if !minor.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        Some(if minor.is_empty() {
            "3".to_string()
        } else {
            format!("3.{minor}")
        })
    })
}

/// A member name as a relative path that stays where it is put.
fn checked_name(name: &str) -> Option<String> {
    let name = name.trim_end_matches('/');
    let ok = !name.is_empty()
        && !name.starts_with('/')
        && !name.contains('\\')
        && name
            .split('/')
            .all(|c| !c.is_empty() && c != "." && c != ".." && !c.contains('\0'));
    ok.then(|| name.to_string())
}

/// Every member of `wheel` (and the directories they imply), read once for its digest and,
/// for an ELF file, its dynamic names. Paths are relative to [`SITE_PACKAGES`].
pub fn members(wheel: &Wheel) -> Result<Vec<Member>, ImageError> {
    let bad = |message: String| ImageError::Wheel {
        wheel: wheel.file_name.clone(),
        message,
    };
    let f = std::fs::File::open(&wheel.path).map_err(super::io_err(&wheel.path))?;
    let mut zip = zip::ZipArchive::new(std::io::BufReader::new(f))
        .map_err(|e| bad(format!("not a readable wheel (zip): {e}")))?;
    let mut out: BTreeMap<String, Member> = BTreeMap::new();
    for i in 0..zip.len() {
        let mut m = zip
            .by_index(i)
            .map_err(|e| bad(format!("member {i}: {e}")))?;
        let raw = m
            .name()
            .map_err(|e| bad(format!("member {i}: {e}")))?
            .to_string();
        let name = checked_name(&raw)
            .ok_or_else(|| bad(format!("member {raw:?} would land outside its directory")))?;
        if name.split('/').next().is_some_and(|c| c.ends_with(".data")) {
            return Err(bad(format!(
                "member {name} is in the wheel's .data directory, which rocforge does not place"
            )));
        }
        // The directories above it, which a zip need not list.
        let mut parent = String::new();
        for c in name
            .split('/')
            .collect::<Vec<_>>()
            .split_last()
            .map_or(&[][..], |(_, p)| p)
        {
            parent = if parent.is_empty() {
                c.to_string()
            } else {
                format!("{parent}/{c}")
            };
            let dir = out
                .entry(parent.clone())
                .or_insert_with(|| dir_member(&parent));
            if dir.entry.kind != Kind::Dir {
                return Err(bad(format!(
                    "member {parent} is both a file and a directory"
                )));
            }
        }
        let is_dir = out.get(&name).is_some_and(|m| m.entry.kind == Kind::Dir);
        if m.is_dir() {
            if out.get(&name).is_some_and(|m| m.entry.kind != Kind::Dir) {
                return Err(bad(format!("member {name} is both a file and a directory")));
            }
            out.entry(name.clone()).or_insert_with(|| dir_member(&name));
            continue;
        }
        if is_dir {
            return Err(bad(format!("member {name} is both a file and a directory")));
        }
        let executable = m.unix_mode().is_some_and(|mode| mode & 0o111 != 0);
        let mut bytes = Vec::new();
        (&mut m)
            .take(MEMBER_LIMIT + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| bad(format!("member {name}: {e}")))?;
        if bytes.len() as u64 > MEMBER_LIMIT {
            return Err(bad(format!(
                "member {name} is larger than {MEMBER_LIMIT} bytes"
            )));
        }
        let (soname, needed) = crate::package::tarball::dynamic_names(&bytes).unwrap_or_default();
        out.insert(
            name.clone(),
            Member {
                index: Some(i),
                entry: FileEntry {
                    path: name,
                    kind: Kind::File,
                    size: bytes.len() as u64,
                    sha256: Some(hex::encode(Sha256::digest(&bytes))),
                    executable,
                    target: None,
                },
                soname,
                needed,
            },
        );
    }
    Ok(out.into_values().collect())
}

fn dir_member(path: &str) -> Member {
    Member {
        index: None,
        entry: FileEntry::dir(path),
        soname: None,
        needed: Vec::new(),
    }
}

/// Open wheels while the layer is written: each zip directory is read once, not once a member.
#[derive(Default)]
pub struct Open {
    zips: BTreeMap<PathBuf, zip::ZipArchive<std::io::BufReader<std::fs::File>>>,
}

impl Open {
    /// Appends member `index` of `wheel` to the tar as `name`, exactly `size` bytes.
    pub fn append<W: std::io::Write>(
        &mut self,
        b: &mut tar::Builder<W>,
        wheel: &Path,
        index: usize,
        name: &str,
        entry: &FileEntry,
        mtime: u64,
    ) -> Result<(), ImageError> {
        let changed = || ImageError::Wheel {
            wheel: wheel.display().to_string(),
            message: format!("member {} changed while the layer was written", entry.path),
        };
        if !self.zips.contains_key(wheel) {
            let f = std::fs::File::open(wheel).map_err(super::io_err(wheel))?;
            let zip = zip::ZipArchive::new(std::io::BufReader::new(f)).map_err(|_| changed())?;
            self.zips.insert(wheel.to_path_buf(), zip);
        }
        let zip = self.zips.get_mut(wheel).expect("inserted above");
        let m = zip.by_index(index).map_err(|_| changed())?;
        let mode = if entry.executable { 0o755 } else { 0o644 };
        let mut h =
            crate::package::tarball::header(tar::EntryType::Regular, mode, entry.size, mtime);
        let mut r = m.take(entry.size);
        let mut counted = crate::package::tarball::CountingReader {
            inner: &mut r,
            n: 0,
        };
        b.append_data(&mut h, name, &mut counted)
            .map_err(super::io_err(Path::new(name)))?;
        if counted.n != entry.size {
            return Err(changed());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wheel_of(members: &[&str]) -> (tempfile::TempDir, Wheel) {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w-1.0-py3-none-any.whl");
        let mut z = zip::ZipWriter::new(std::fs::File::create(&path).unwrap());
        for m in members {
            z.start_file(*m, zip::write::SimpleFileOptions::default())
                .unwrap();
            z.write_all(b"x").unwrap();
        }
        z.finish().unwrap();
        let wheel = Wheel {
            path,
            file_name: "w-1.0-py3-none-any.whl".into(),
            python: "3".into(),
        };
        (dir, wheel)
    }

    #[test]
    fn members_and_the_directories_they_imply_or_a_clear_refusal() {
        let (_d, w) = wheel_of(&["pkg/sub/a.py", "pkg/b.py"]);
        let paths: Vec<(String, Kind)> = members(&w)
            .unwrap()
            .into_iter()
            .map(|m| (m.entry.path, m.entry.kind))
            .collect();
        assert_eq!(
            paths,
            [
                ("pkg".to_string(), Kind::Dir),
                ("pkg/b.py".to_string(), Kind::File),
                ("pkg/sub".to_string(), Kind::Dir),
                ("pkg/sub/a.py".to_string(), Kind::File),
            ]
        );
        for (bad, says) in [
            (
                &["pkg", "pkg/a.py"][..],
                "member pkg is both a file and a directory",
            ),
            (
                &["pkg/a.py", "pkg"][..],
                "member pkg is both a file and a directory",
            ),
            (&["../a.py"][..], "would land outside its directory"),
            (&["w-1.0.data/scripts/x"][..], ".data directory"),
        ] {
            let (_d, w) = wheel_of(bad);
            let e = members(&w).unwrap_err().to_string();
            assert!(e.contains(says), "{bad:?}: {e}");
        }
    }

    #[test]
    fn python_tags_and_member_names() {
        assert_eq!(
            python_of("torch-2.6.0+rocm6.4.3.gfx902.gfx90c-cp313-cp313-linux_x86_64.whl")
                .as_deref(),
            Some("3.13")
        );
        assert_eq!(python_of("demo-1.0-py3-none-any.whl").as_deref(), Some("3"));
        assert_eq!(
            python_of("six-1.16.0-py2.py3-none-any.whl").as_deref(),
            Some("3")
        );
        assert_eq!(python_of("old-1.0-py2-none-any.whl"), None);
        assert_eq!(
            python_of("x-1.0-build1-cp311-cp311-linux_x86_64.whl").as_deref(),
            Some("3.11")
        );
        assert_eq!(python_of("broken.whl"), None);
        assert_eq!(
            checked_name("torch/lib/libc10.so").as_deref(),
            Some("torch/lib/libc10.so")
        );
        assert_eq!(checked_name("torch/").as_deref(), Some("torch"));
        for bad in ["/etc/passwd", "../x", "a/../../b", "a//b", "./a", ""] {
            assert_eq!(checked_name(bad), None, "{bad}");
        }
    }
}
