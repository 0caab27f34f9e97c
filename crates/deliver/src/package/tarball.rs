//! Deterministic tarballs from a store entry's install tree.
//!
//! Entries are sorted by path, owned by 0:0 with empty user and group names, dated
//! SOURCE_DATE_EPOCH, with modes normalized to 0755/0644 (the execute bit is what matters) and
//! symlinks kept as symlinks. The manifest comes first. zstd runs multi-threaded, one worker per
//! core (with one or more workers zstd cuts the input into jobs by size alone, so the output is
//! the same whatever the worker count: checked with zstd -T1/-T2/-T4), gzip with a zero header
//! time: the same tree gives the same bytes on any machine.

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use sha2::{Digest, Sha256};

use super::PackageError;
use super::manifest::{FileEntry, Kind, MANIFEST_NAME, Manifest};

/// zstd level: slow to compress once, fast to decompress many times.
pub const ZSTD_LEVEL: i32 = 19;
/// zstd workers: one per core, at least one (never zero, which is single-threaded mode and
/// frames the output differently).
pub fn zstd_workers() -> u32 {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(16) as u32)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Compression {
    Zst,
    Gz,
}

impl Compression {
    pub fn extension(self) -> &'static str {
        match self {
            Compression::Zst => "tar.zst",
            Compression::Gz => "tar.gz",
        }
    }

    /// The compression of a file, by its name.
    pub fn of(name: &str) -> Option<Compression> {
        if name.ends_with(".tar.zst") {
            Some(Compression::Zst)
        } else if name.ends_with(".tar.gz") {
            Some(Compression::Gz)
        } else {
            None
        }
    }
}

/// A file's size and sha256, or why it could not be read.
type Hashed = Result<(u64, String), PackageError>;

/// What scanning a tree found.
pub struct Scan {
    pub files: Vec<FileEntry>,
    pub glibc_floor: Option<String>,
    pub installed_size: u64,
    /// Files (or symlinks) that mention a build path: (path in the tree, the build path).
    pub leaks: Vec<(String, String)>,
    /// The DT_SONAME of every ELF file, sorted.
    pub sonames: Vec<String>,
    /// Every DT_NEEDED entry of the ELF files, sorted.
    pub needed: Vec<String>,
}

/// Walks `tree`, hashing every regular file (two threads), finding the highest GLIBC version
/// needed by its ELF files, and looking for `build_paths` in every file and symlink target.
pub fn scan(tree: &Path, build_paths: &[String]) -> Result<Scan, PackageError> {
    let mut entries = Vec::new();
    walk(tree, tree, &mut entries)?;
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    let finders: Vec<(memchr::memmem::Finder<'_>, &String)> = build_paths
        .iter()
        .filter(|p| p.len() > 1)
        .map(|p| (memchr::memmem::Finder::new(p.as_bytes()), p))
        .collect();
    let leaks = Mutex::new(Vec::new());
    let glibc = Mutex::new(None::<(Vec<u64>, String)>);
    let dynamic = Mutex::new((
        std::collections::BTreeSet::<String>::new(),
        std::collections::BTreeSet::<String>::new(),
    ));
    let results: Vec<Mutex<Option<Hashed>>> = entries.iter().map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .clamp(1, 8);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some((rel, kind, _)) = entries.get(i) else {
                        break;
                    };
                    if *kind != Kind::File {
                        continue;
                    }
                    let r = hash_file(&tree.join(rel), |bytes| {
                        for (f, p) in &finders {
                            if f.find(bytes).is_some() {
                                leaks
                                    .lock()
                                    .expect("lock")
                                    .push((rel.clone(), (*p).clone()));
                            }
                        }
                        if let Some(v) = glibc_needed(bytes) {
                            let mut g = glibc.lock().expect("lock");
                            let t = super::manifest::version_tuple(&v);
                            if g.as_ref().is_none_or(|(old, _)| *old < t) {
                                *g = Some((t, v));
                            }
                        }
                        if let Some((soname, needed)) = dynamic_names(bytes) {
                            let mut d = dynamic.lock().expect("lock");
                            d.0.extend(soname);
                            d.1.extend(needed);
                        }
                    });
                    *results[i].lock().expect("lock") = Some(r);
                }
            });
        }
    });
    let mut files = Vec::with_capacity(entries.len());
    let mut installed_size = 0;
    let mut leaks = leaks.into_inner().expect("lock");
    for ((rel, kind, meta), r) in entries.into_iter().zip(results) {
        let mut e = FileEntry {
            path: rel.clone(),
            kind,
            size: 0,
            sha256: None,
            executable: false,
            target: None,
        };
        match kind {
            Kind::File => {
                let (size, sha) = r.into_inner().expect("lock").expect("hashed")?;
                e.size = size;
                e.sha256 = Some(sha);
                e.executable = meta & 0o111 != 0;
                installed_size += size;
            }
            Kind::Symlink => {
                let t = std::fs::read_link(tree.join(&rel)).map_err(io(&tree.join(&rel)))?;
                let t = t.to_str().ok_or_else(|| PackageError::BadEntry {
                    path: rel.clone(),
                    reason: "its symlink target is not UTF-8".into(),
                })?;
                for (_, p) in &finders {
                    if t.contains(p.as_str()) {
                        leaks.push((rel.clone(), (*p).clone()));
                    }
                }
                if !super::manifest::symlink_inside(&rel, t) {
                    return Err(PackageError::BadEntry {
                        path: rel.clone(),
                        reason: format!(
                            "it is a symlink to {t}, outside the install tree (an installed copy would point elsewhere)"
                        ),
                    });
                }
                e.target = Some(t.to_string());
            }
            Kind::Dir => {}
        }
        files.push(e);
    }
    leaks.sort();
    leaks.dedup();
    let (sonames, needed) = dynamic.into_inner().expect("lock");
    Ok(Scan {
        files,
        glibc_floor: glibc.into_inner().expect("lock").map(|(_, v)| v),
        installed_size,
        leaks,
        sonames: sonames.into_iter().collect(),
        needed: needed.into_iter().collect(),
    })
}

fn io(path: &Path) -> impl Fn(io::Error) -> PackageError + '_ {
    move |source| PackageError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, Kind, u32)>) -> Result<(), PackageError> {
    for e in std::fs::read_dir(dir).map_err(io(dir))? {
        let e = e.map_err(io(dir))?;
        let p = e.path();
        let rel = p
            .strip_prefix(root)
            .expect("under root")
            .to_str()
            .ok_or_else(|| PackageError::BadEntry {
                path: p.display().to_string(),
                reason: "its name is not UTF-8".into(),
            })?
            .to_string();
        let meta = std::fs::symlink_metadata(&p).map_err(io(&p))?;
        let ft = meta.file_type();
        let mode = meta.permissions().mode();
        if ft.is_symlink() {
            out.push((rel, Kind::Symlink, mode));
        } else if ft.is_dir() {
            out.push((rel, Kind::Dir, mode));
            walk(root, &p, out)?;
        } else if ft.is_file() {
            out.push((rel, Kind::File, mode));
        } else {
            return Err(PackageError::BadEntry {
                path: rel,
                reason: "it is not a regular file, directory or symlink".into(),
            });
        }
    }
    Ok(())
}

fn hash_file(path: &Path, mut inspect: impl FnMut(&[u8])) -> Result<(u64, String), PackageError> {
    let f = std::fs::File::open(path).map_err(io(path))?;
    let len = f.metadata().map_err(io(path))?.len();
    if len == 0 {
        inspect(&[]);
        return Ok((0, hex::encode(Sha256::digest([]))));
    }
    // SAFETY: the store entry is immutable once committed; a concurrent writer would only
    // change what we hash, and the tarball is hashed again as it is written.
    let map = unsafe { memmap2::Mmap::map(&f) }.map_err(io(path))?;
    inspect(&map);
    Ok((len, hex::encode(Sha256::digest(&map[..]))))
}

/// The highest `GLIBC_x.y` version an ELF file's dynamic string table names (its version needs).
pub fn glibc_needed(bytes: &[u8]) -> Option<String> {
    use object::{Object, ObjectSection};
    if !bytes.starts_with(b"\x7fELF") {
        return None;
    }
    let file = object::File::parse(bytes).ok()?;
    file.section_by_name(".gnu.version_r")?;
    let dynstr = file.section_by_name(".dynstr")?.data().ok()?;
    let mut best: Option<(Vec<u64>, String)> = None;
    for s in dynstr.split(|b| *b == 0) {
        let Some(v) = s.strip_prefix(b"GLIBC_") else {
            continue;
        };
        let Ok(v) = std::str::from_utf8(v) else {
            continue;
        };
        if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
            continue;
        }
        let t = super::manifest::version_tuple(v);
        if best.as_ref().is_none_or(|(b, _)| *b < t) {
            best = Some((t, v.to_string()));
        }
    }
    best.map(|(_, v)| v)
}

/// The DT_SONAME and DT_NEEDED entries of the file at `path` when it is an ELF file with a
/// dynamic section (None for other files), read through a map of it: a library of hundreds of
/// megabytes is not read whole for a few strings.
pub fn file_dynamic_names(path: &Path) -> io::Result<Option<(Option<String>, Vec<String>)>> {
    let mut f = std::fs::File::open(path)?;
    let mut magic = [0u8; 4];
    if f.read_exact(&mut magic).is_err() || &magic != b"\x7fELF" {
        return Ok(None);
    }
    // SAFETY: callers pass files they unpacked themselves and nobody else writes; a concurrent
    // change could only change the names read, which are checked, never trusted.
    let map = unsafe { memmap2::Mmap::map(&f) }?;
    Ok(dynamic_names(&map))
}

/// An ELF file's DT_SONAME and DT_NEEDED entries (None for other files).
pub fn dynamic_names(bytes: &[u8]) -> Option<(Option<String>, Vec<String>)> {
    if !bytes.starts_with(b"\x7fELF") || bytes.len() < 6 {
        return None;
    }
    match (bytes[4], bytes[5]) {
        (1, 1) => elf_dynamic::<object::elf::FileHeader32<object::LittleEndian>>(bytes),
        (2, 1) => elf_dynamic::<object::elf::FileHeader64<object::LittleEndian>>(bytes),
        (1, 2) => elf_dynamic::<object::elf::FileHeader32<object::BigEndian>>(bytes),
        (2, 2) => elf_dynamic::<object::elf::FileHeader64<object::BigEndian>>(bytes),
        _ => None,
    }
}

fn elf_dynamic<Elf: object::read::elf::FileHeader>(
    bytes: &[u8],
) -> Option<(Option<String>, Vec<String>)> {
    let file = object::read::elf::ElfFile::<Elf>::parse(bytes).ok()?;
    let table = file.elf_dynamic_table().ok()?;
    if table.is_empty() {
        return None;
    }
    let mut soname = None;
    let mut needed = Vec::new();
    for d in table.iter() {
        if d.tag != object::elf::DT_NEEDED && d.tag != object::elf::DT_SONAME {
            continue;
        }
        let Some(name) = table
            .string(d)
            .ok()
            .and_then(|b| std::str::from_utf8(b).ok())
        else {
            continue;
        };
        if d.tag == object::elf::DT_SONAME {
            soname = Some(name.to_string());
        } else {
            needed.push(name.to_string());
        }
    }
    Some((soname, needed))
}

/// Counts and hashes what passes through.
pub struct HashingWriter<W> {
    pub inner: W,
    pub hasher: Sha256,
    pub bytes: u64,
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

pub fn header(kind: tar::EntryType, mode: u32, size: u64, mtime: u64) -> tar::Header {
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(kind);
    h.set_mode(mode);
    h.set_size(size);
    h.set_uid(0);
    h.set_gid(0);
    h.set_mtime(mtime);
    h
}

/// Writes the tar stream (manifest first, then every entry in manifest order) to `out`.
pub fn write_tar<W: Write>(tree: &Path, manifest: &Manifest, out: W) -> Result<W, PackageError> {
    let mtime = manifest.source_date_epoch;
    let mut b = tar::Builder::new(out);
    b.follow_symlinks(false);
    let io_out = |source: io::Error| PackageError::Io {
        path: PathBuf::from("<tarball>"),
        source,
    };
    let json = serde_json::to_vec_pretty(manifest).expect("plain data");
    let mut h = header(tar::EntryType::Regular, 0o644, json.len() as u64, mtime);
    b.append_data(&mut h, MANIFEST_NAME, &json[..])
        .map_err(io_out)?;
    append_files(&mut b, tree, &manifest.files, "", mtime)?;
    b.into_inner().map_err(io_out)
}

/// Appends `files` (paths relative to `tree`, in the given order) as entries named
/// `under` + path: 0:0, `mtime`, modes 0755/0644, symlinks as symlinks. `under` is empty or
/// ends with `/` (an image layer puts the tree under the release prefix).
pub fn append_files<W: Write>(
    b: &mut tar::Builder<W>,
    tree: &Path,
    files: &[FileEntry],
    under: &str,
    mtime: u64,
) -> Result<(), PackageError> {
    let io_out = |source: io::Error| PackageError::Io {
        path: PathBuf::from("<tarball>"),
        source,
    };
    for e in files {
        let p = tree.join(&e.path);
        let name = format!("{under}{}", e.path);
        match e.kind {
            Kind::Dir => {
                let mut h = header(tar::EntryType::Directory, 0o755, 0, mtime);
                b.append_data(&mut h, format!("{name}/"), io::empty())
                    .map_err(io_out)?;
            }
            Kind::Symlink => {
                let mut h = header(tar::EntryType::Symlink, 0o777, 0, mtime);
                b.append_link(&mut h, &name, e.target.as_deref().unwrap_or_default())
                    .map_err(io_out)?;
            }
            Kind::File => {
                let f = std::fs::File::open(&p).map_err(io(&p))?;
                let mode = if e.executable { 0o755 } else { 0o644 };
                let mut h = header(tar::EntryType::Regular, mode, e.size, mtime);
                // Exactly the size the manifest records, even if the file changed meanwhile.
                let mut r = f.take(e.size);
                let mut counted = CountingReader {
                    inner: &mut r,
                    n: 0,
                };
                b.append_data(&mut h, &name, &mut counted).map_err(io_out)?;
                if counted.n != e.size {
                    return Err(PackageError::Changed {
                        path: e.path.clone(),
                    });
                }
            }
        }
    }
    Ok(())
}

/// Counts the bytes read through it: a file or member that changed size while it was being
/// written is caught.
pub(crate) struct CountingReader<'a, R> {
    pub inner: &'a mut R,
    pub n: u64,
}

impl<R: Read> Read for CountingReader<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.n += n as u64;
        Ok(n)
    }
}

/// The written tarball.
#[derive(Debug, Clone)]
pub struct Written {
    pub path: PathBuf,
    pub file_name: String,
    pub size: u64,
    pub sha256: String,
}

/// Writes `<out_dir>/<file_name>` atomically: compressed tar of `tree` with `manifest` first.
pub fn write_tarball(
    tree: &Path,
    manifest: &Manifest,
    compression: Compression,
    out_dir: &Path,
    file_name: &str,
) -> Result<Written, PackageError> {
    std::fs::create_dir_all(out_dir).map_err(io(out_dir))?;
    // `.tmp-<pid>-…`: what a killed run leaves, the next `package` removes.
    let tmp = crate::fsutil::temp_file_in(out_dir).map_err(io(out_dir))?;
    let file = tmp.as_file().try_clone().map_err(io(out_dir))?;
    let sink = HashingWriter {
        inner: io::BufWriter::with_capacity(1 << 20, file),
        hasher: Sha256::new(),
        bytes: 0,
    };
    let io_out = |source: io::Error| PackageError::Io {
        path: out_dir.join(file_name),
        source,
    };
    let sink = match compression {
        Compression::Zst => {
            let mut enc = zstd::stream::write::Encoder::new(sink, ZSTD_LEVEL).map_err(io_out)?;
            enc.multithread(zstd_workers()).map_err(io_out)?;
            enc.include_checksum(true).map_err(io_out)?;
            let enc = write_tar(tree, manifest, enc)?;
            enc.finish().map_err(io_out)?
        }
        Compression::Gz => {
            let enc = flate2::GzBuilder::new()
                .mtime(0)
                .write(sink, flate2::Compression::best());
            let enc = write_tar(tree, manifest, enc)?;
            enc.finish().map_err(io_out)?
        }
    };
    let HashingWriter {
        inner,
        hasher,
        bytes,
    } = sink;
    inner
        .into_inner()
        .map_err(|e| io_out(e.into_error()))?
        .sync_all()
        .map_err(io_out)?;
    let path = out_dir.join(file_name);
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o644)).map_err(io_out)?;
    crate::fault::point("package");
    tmp.persist(&path).map_err(|e| io_out(e.error))?;
    crate::fault::point("package");
    Ok(Written {
        path,
        file_name: file_name.to_string(),
        size: bytes,
        sha256: hex::encode(hasher.finalize()),
    })
}

/// Reads only the manifest (the first entry) of a tarball.
pub fn read_manifest(path: &Path) -> Result<Manifest, PackageError> {
    let f = std::fs::File::open(path).map_err(io(path))?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let r: Box<dyn Read> = match Compression::of(&name) {
        Some(Compression::Gz) => Box::new(flate2::read::GzDecoder::new(io::BufReader::new(f))),
        _ => Box::new(zstd::stream::read::Decoder::new(f).map_err(io(path))?),
    };
    let mut ar = tar::Archive::new(r);
    let bad = |reason: String| PackageError::BadEntry {
        path: path.display().to_string(),
        reason,
    };
    // Raw: the manifest is the first entry under its own short name, and the tar crate would
    // read a long name or PAX header before it whole into memory, whatever size it declares.
    let mut entries = ar.entries().map_err(io(path))?.raw(true);
    let mut first = entries
        .next()
        .ok_or_else(|| bad("the tarball is empty".into()))?
        .map_err(io(path))?;
    if first.path_bytes().as_ref() != MANIFEST_NAME.as_bytes() {
        return Err(bad(format!("its first entry is not {MANIFEST_NAME}")));
    }
    let mut buf = Vec::new();
    (&mut first)
        .take(super::manifest::MAX_MANIFEST_BYTES)
        .read_to_end(&mut buf)
        .map_err(io(path))?;
    serde_json::from_slice(&buf).map_err(|e| bad(format!("its manifest is invalid: {e}")))
}

/// `SHA256SUMS` in `dir` updated with `sums` (file name → sha256), sorted by name.
pub fn update_sha256sums(
    dir: &Path,
    sums: &BTreeMap<String, String>,
) -> Result<PathBuf, PackageError> {
    let path = dir.join("SHA256SUMS");
    let mut all: BTreeMap<String, String> = BTreeMap::new();
    if let Ok(text) = std::fs::read_to_string(&path) {
        for line in text.lines() {
            if let Some((sha, name)) = line.split_once("  ")
                && dir.join(name).is_file()
            {
                all.insert(name.to_string(), sha.to_string());
            }
        }
    }
    all.extend(sums.iter().map(|(k, v)| (k.clone(), v.clone())));
    let text: String = all.iter().map(|(n, s)| format!("{s}  {n}\n")).collect();
    crate::fsutil::write_atomic(&path, text.as_bytes())
        .and_then(|()| crate::sign::readable(&path))
        .map_err(io(&path))?;
    Ok(path)
}
