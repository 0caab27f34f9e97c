//! What GPU code a built library, executable, object or install prefix carries.
//!
//! Host ELF files are read through the `object` crate, memory-mapped: a linked library's
//! `.hip_fatbin` holds one offload bundle per source file, padded and laid end to end;
//! `.llvm.offloading` holds LLVM OffloadBinaries; static archives are read member by member.
//! Bundles and raw code objects may also be files of their own (Tensile's `.co`, `.hsaco`).
//! Every size and offset read from a file is checked against the data before use: damaged
//! or hostile input gives an [`InspectError`] naming the file and offset, never a panic.

pub mod bundle;
pub mod codeobject;
pub mod coverage;
pub mod offload_binary;
pub mod record;
pub mod tensile;
pub mod verdict;
pub mod wheel;

use std::collections::BTreeMap;
use std::fmt;
use std::fs::File;
use std::io::{Read, Seek};
use std::path::{Path, PathBuf};

use object::read::archive::ArchiveFile;
use object::{Object, ObjectSection};
use serde::Serialize;

pub use bundle::{Bundle, Entry, Image};
pub use codeobject::CodeObject;
pub use coverage::{Cell, CoverageReport, Row, Status, coverage, coverage_of, satisfies};
pub use record::CoverageRecord;

use crate::arch::TargetId;

/// A file that could not be read (fully): the file, where in it, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Deserialize)]
pub struct InspectError {
    pub file: PathBuf,
    pub offset: Option<u64>,
    pub message: String,
}

impl fmt::Display for InspectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.offset {
            Some(o) => write!(
                f,
                "{}: at offset {o:#x}: {}",
                self.file.display(),
                self.message
            ),
            None => write!(f, "{}: {}", self.file.display(), self.message),
        }
    }
}

impl Serialize for InspectError {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("InspectError", 3)?;
        st.serialize_field("file", &self.file.display().to_string())?;
        st.serialize_field("offset", &self.offset)?;
        st.serialize_field("message", &self.message)?;
        st.end()
    }
}

// By hand, as its Serialize is: the file as text, whatever its bytes.
impl schemars::JsonSchema for InspectError {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "InspectError".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "object",
            "description": "A file that could not be read fully.",
            "properties": {
                "file": {"type": "string"},
                "offset": {"type": ["integer", "null"], "minimum": 0, "description": "Where in the file reading stopped, when known."},
                "message": {"type": "string"},
            },
            "required": ["file", "offset", "message"],
        })
    }
}

/// Where device code was found in a file: a section (`.hip_fatbin`), an archive member's
/// section (`a.o(.hip_fatbin)`) or the whole file.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Container {
    pub place: String,
    pub bundles: Vec<Bundle>,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct FileReport {
    /// Relative to the inspected directory, or the path as given.
    pub path: String,
    /// `shared-object`, `executable`, `object`, `archive`, `code-object`, `offload-bundle`,
    /// `compressed-offload-bundle` or `offload-binary`.
    pub kind: &'static str,
    /// For a file that is itself an AMDGPU code object.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code_object: Option<CodeObject>,
    pub containers: Vec<Container>,
    /// Things that are readable but wrong: hash mismatches, entries whose target ID
    /// disagrees with their code object.
    pub problems: Vec<String>,
}

impl FileReport {
    pub fn entries(&self) -> impl Iterator<Item = &Entry> {
        self.containers
            .iter()
            .flat_map(|c| c.bundles.iter())
            .flat_map(|b| b.entries.iter())
    }

    /// The AMDGPU targets of the code in this file (as the code objects' ELF headers say,
    /// else as the bundle entry IDs say), sorted and deduplicated.
    pub fn targets(&self) -> Vec<TargetId> {
        let mut v: Vec<TargetId> = self
            .code_object
            .iter()
            .map(|c| c.target.clone())
            .chain(self.entries().filter_map(|e| match &e.image {
                Image::CodeObject(c) => Some(c.target.clone()),
                _ => e.target.clone(),
            }))
            .collect();
        v.sort();
        v.dedup();
        v
    }
}

/// Tensile library files for one target in one directory, by file name.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct TensileTarget {
    pub target: TargetId,
    /// Index files (`TensileLibrary*.dat` / `.yaml`, lazy-loading or not).
    pub index: usize,
    /// Kernel files (`.co`, `.hsaco`).
    pub code_objects: usize,
    pub files: Vec<String>,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct TensileDir {
    pub dir: String,
    pub targets: Vec<TensileTarget>,
    /// The lazy-loading master catalogs, read: what each target really gets.
    pub catalogs: Vec<tensile::Catalog>,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Inventory {
    pub root: String,
    pub files: Vec<FileReport>,
    pub tensile: Vec<TensileDir>,
    /// Per component that records it, where each target's Tensile logic came from.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub logic: BTreeMap<String, BTreeMap<String, crate::catalog::logic::LogicSource>>,
    pub errors: Vec<InspectError>,
}

pub const INSPECT_SCHEMA: &str = "rocforge.inspect/1";

/// What `inspect PATH… --format json` prints: an inventory per path. Written as it is
/// serialized (each object's fields in the order below), not with its keys sorted as the other
/// outputs are: a large library's inventory is tens of MB of JSON.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Inspected<'a> {
    pub schema: &'static str,
    /// In the order the paths were given.
    pub inventories: &'a [Inventory],
}

impl<'a> Inspected<'a> {
    pub fn new(inventories: &'a [Inventory]) -> Self {
        Inspected {
            schema: INSPECT_SCHEMA,
            inventories,
        }
    }
}

/// Inspects a file or a directory tree (an install prefix). Fails only when `path` itself
/// cannot be read, or is a single file of no known kind; damaged files become `errors`.
pub fn inspect(path: &Path) -> Result<Inventory, InspectError> {
    let meta = std::fs::metadata(path).map_err(|e| io_error(path, &e))?;
    let mut inv = Inventory {
        root: path.display().to_string(),
        files: Vec::new(),
        tensile: Vec::new(),
        logic: BTreeMap::new(),
        errors: Vec::new(),
    };
    if !meta.is_dir() {
        let display = path.display().to_string();
        let (reports, errors) = inspect_file(path, &display);
        if reports.is_none() && errors.is_empty() {
            return Err(InspectError {
                file: path.to_path_buf(),
                offset: None,
                message: "not an ELF file, static archive, offload bundle, OffloadBinary or wheel"
                    .into(),
            });
        }
        inv.files.extend(reports.into_iter().flatten());
        inv.errors.extend(errors);
        return Ok(inv);
    }
    let mut files = Vec::new();
    walk_dir(path, path, &mut files, &mut inv.errors);
    files.sort();
    let mut tensile: BTreeMap<String, BTreeMap<TargetId, TensileTarget>> = BTreeMap::new();
    for rel in &files {
        let full = path.join(rel);
        let display = rel.to_string_lossy().replace('\\', "/");
        if let Some((dir, name)) = tensile_file(&display) {
            let target = target_in_name(name);
            if let Some(target) = target {
                let e = tensile
                    .entry(dir.to_string())
                    .or_default()
                    .entry(target.clone())
                    .or_insert_with(|| TensileTarget {
                        target,
                        index: 0,
                        code_objects: 0,
                        files: Vec::new(),
                    });
                if name.ends_with(".co") || name.ends_with(".hsaco") {
                    e.code_objects += 1;
                } else {
                    e.index += 1;
                }
                e.files.push(name.to_string());
            }
        }
        if let Some(component) = logic_record(&display) {
            match std::fs::read(&full)
                .map_err(|e| e.to_string())
                .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
            {
                Ok(record) => {
                    inv.logic.insert(component.to_string(), record);
                }
                Err(message) => inv.errors.push(InspectError {
                    file: full.clone(),
                    offset: None,
                    message: format!("not a Tensile logic record: {message}"),
                }),
            }
            continue;
        }
        let (reports, errors) = inspect_file(&full, &display);
        inv.files.extend(reports.into_iter().flatten());
        inv.errors.extend(errors);
    }
    inv.tensile = tensile
        .into_iter()
        .map(|(dir, t)| {
            let targets: Vec<TensileTarget> = t.into_values().collect();
            let names: Vec<&str> = targets
                .iter()
                .flat_map(|x| x.files.iter().map(String::as_str))
                .collect();
            // The code objects were read above; the catalogs only need their processors.
            let prefix = if dir.is_empty() {
                String::new()
            } else {
                format!("{dir}/")
            };
            let codes: BTreeMap<&str, Vec<TargetId>> = inv
                .files
                .iter()
                .filter_map(|f| Some((f.path.strip_prefix(&prefix)?, f.targets())))
                .filter(|(name, _)| !name.contains('/'))
                .collect();
            let catalogs = tensile::read_dir(&path.join(&dir), &names, &codes);
            TensileDir {
                dir,
                targets,
                catalogs,
            }
        })
        .collect();
    Ok(inv)
}

fn io_error(path: &Path, e: &std::io::Error) -> InspectError {
    InspectError {
        file: path.to_path_buf(),
        offset: None,
        message: e.to_string(),
    }
}

/// Regular files under `dir`, relative to `root`. Symbolic links are not followed, so a
/// library reached through its versioned links is read once.
fn walk_dir(root: &Path, dir: &Path, out: &mut Vec<PathBuf>, errors: &mut Vec<InspectError>) {
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) => return errors.push(io_error(dir, &e)),
    };
    for entry in rd.flatten() {
        let p = entry.path();
        let Ok(ft) = entry.file_type() else { continue };
        if ft.is_dir() {
            walk_dir(root, &p, out, errors);
        } else if ft.is_file()
            && let Ok(rel) = p.strip_prefix(root)
        {
            out.push(rel.to_path_buf());
        }
    }
}

/// The component whose `share/rocforge/<component>/tensile-logic.json` this is.
fn logic_record(path: &str) -> Option<&str> {
    use crate::catalog::logic::{PROVENANCE_DIR, PROVENANCE_FILE};
    let rest = path.strip_prefix(PROVENANCE_DIR)?.strip_prefix('/')?;
    let (component, file) = rest.split_once('/')?;
    (file == PROVENANCE_FILE).then_some(component)
}

/// `(dir, name)` of a Tensile library file: a `TensileLibrary*` index or kernel file, or a
/// Tensile kernel code object (`Kernels.so-000-gfx90c.hsaco`), naming a gfx target.
///
/// Tensile's own test fixtures (`Tensile/Tests/…/test_data/…`, in the source tree the tensile
/// component installs for rocBLAS's build) hold small libraries for other processors on
/// purpose; no library loads them, so they are not counted.
fn tensile_file(path: &str) -> Option<(&str, &str)> {
    let (dir, name) = path.rsplit_once('/').unwrap_or(("", path));
    if dir.split('/').any(|c| c == "Tests" || c == "test_data") {
        return None;
    }
    let tensile_name = name.starts_with("TensileLibrary") || name.starts_with("Kernels.so");
    let ext_ok = [".dat", ".yaml", ".co", ".hsaco"]
        .iter()
        .any(|e| name.ends_with(e));
    (tensile_name && ext_ok && name.contains("gfx")).then_some((dir, name))
}

/// The target a Tensile file name names: `..._gfx90c.co`, `...-gfx90c-xnack-.hsaco`.
pub fn target_in_name(name: &str) -> Option<TargetId> {
    let start = name.find("gfx")?;
    let rest = &name[start + 3..];
    let len = rest
        .bytes()
        .take_while(|b| b.is_ascii_digit() || b.is_ascii_lowercase())
        .count();
    if len == 0 {
        return None;
    }
    let mut t = TargetId::plain(&name[start..start + 3 + len]);
    let mut tail = &rest[len..];
    while let Some(after) = tail.strip_prefix(['-', ':', '_']) {
        let (feature, slot) = if let Some(r) = after.strip_prefix("xnack") {
            (r, &mut t.xnack)
        } else if let Some(r) = after.strip_prefix("sramecc") {
            (r, &mut t.sramecc)
        } else {
            break;
        };
        match feature.as_bytes().first() {
            Some(b'+') => *slot = Some(true),
            Some(b'-') => *slot = Some(false),
            _ => break,
        }
        tail = &feature[1..];
    }
    Some(t)
}

/// Opens `path` for reading if it is a regular file. `O_NONBLOCK`, so that a FIFO (or a device)
/// given as the path cannot block the open; its type is then checked on the descriptor itself,
/// so a file swapped in between cannot slip through.
fn open_regular(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    let ft = f.metadata()?.file_type();
    if !ft.is_file() {
        let kind = if ft.is_fifo() {
            "a FIFO"
        } else if ft.is_char_device() || ft.is_block_device() {
            "a device"
        } else if ft.is_socket() {
            "a socket"
        } else {
            "not a regular file"
        };
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{kind}; inspect reads regular files only"),
        ));
    }
    Ok(f)
}

fn sniff(f: &mut File) -> std::io::Result<[u8; 8]> {
    let mut head = [0u8; 8];
    let mut n = 0;
    while n < head.len() {
        match f.read(&mut head[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(head)
}

pub(crate) fn known_magic(head: &[u8]) -> bool {
    head.starts_with(b"\x7fELF")
        || head.starts_with(b"!<arch>\n")
        || head.starts_with(&bundle::MAGIC[..8])
        || head.starts_with(bundle::CCOB_MAGIC)
        || head.starts_with(offload_binary::MAGIC)
}

/// One file: its reports (several for a wheel, one per member with GPU code), or `None` and no
/// error when it is of no kind that can hold GPU code.
fn inspect_file(path: &Path, display: &str) -> (Option<Vec<FileReport>>, Vec<InspectError>) {
    let fail = |e: std::io::Error| (None, vec![io_error(path, &e)]);
    let mut file = match open_regular(path) {
        Ok(f) => f,
        Err(e) => return fail(e),
    };
    let head = match sniff(&mut file) {
        Ok(h) => h,
        Err(e) => return fail(e),
    };
    if wheel::is_wheel(path, &head) {
        // Read through its directory, member by member: a wheel is mostly Python, and its
        // libraries are inflated one at a time.
        if let Err(e) = file.seek(std::io::SeekFrom::Start(0)) {
            return fail(e);
        }
        let (reports, errors) = wheel::walk(std::io::BufReader::new(file), path, display);
        return (Some(reports), errors);
    }
    if !known_magic(&head) {
        return (None, Vec::new());
    }
    // Read, not mapped: a mapped file that another process truncates raises SIGBUS on the next
    // access, which no parser can catch and Rust cannot handle soundly. A read of a shrinking
    // file just ends early, and the parsers take any bytes. The cost is one copy of one file
    // at a time (inspect holds no two), the size of the largest library inspected.
    let mut data = head.to_vec();
    let len = file.metadata().map_or(0, |m| m.len());
    data.reserve(usize::try_from(len).unwrap_or(0).saturating_sub(data.len()));
    if let Err(e) = file.read_to_end(&mut data) {
        return fail(e);
    }
    let (report, errors) = inspect_bytes(path, display, &data);
    (report.map(|r| vec![r]), errors)
}

/// Inspects the bytes of one file (`path` is used in errors, `display` in the report).
/// Never panics, whatever the bytes.
pub fn inspect_bytes(
    path: &Path,
    display: &str,
    data: &[u8],
) -> (Option<FileReport>, Vec<InspectError>) {
    let mut errors = Vec::new();
    let mut report = FileReport {
        path: display.to_string(),
        kind: "",
        code_object: None,
        containers: Vec::new(),
        problems: Vec::new(),
    };
    let mut err = |at: bundle::At| {
        errors.push(InspectError {
            file: path.to_path_buf(),
            offset: Some(at.offset),
            message: at.message,
        })
    };
    if codeobject::is_amdgpu_elf(data) {
        report.kind = "code-object";
        match codeobject::parse(data) {
            Ok(c) => report.code_object = Some(c),
            Err(m) => err(bundle::At {
                offset: 0,
                message: m,
            }),
        }
    } else if data.starts_with(b"\x7fELF") {
        report.kind = scan_elf(data, 0, "", &mut report.containers, &mut err);
    } else if data.starts_with(b"!<arch>\n") {
        report.kind = "archive";
        scan_archive(data, &mut report.containers, &mut err);
    } else if data.starts_with(bundle::MAGIC) || data.starts_with(bundle::CCOB_MAGIC) {
        report.kind = if data.starts_with(bundle::MAGIC) {
            "offload-bundle"
        } else {
            "compressed-offload-bundle"
        };
        let (bundles, e) = bundle::walk(data, 0);
        e.into_iter().for_each(&mut err);
        push(&mut report.containers, "file", bundles);
    } else if data.starts_with(offload_binary::MAGIC) {
        report.kind = "offload-binary";
        let (bundles, e) = offload_binary::walk(data, 0);
        e.into_iter().for_each(&mut err);
        push(&mut report.containers, "file", bundles);
    } else {
        return (None, errors);
    }
    report.problems = problems(&report);
    (Some(report), errors)
}

fn push(containers: &mut Vec<Container>, place: &str, bundles: Vec<Bundle>) {
    if !bundles.is_empty() {
        containers.push(Container {
            place: place.to_string(),
            bundles,
        });
    }
}

fn problems(report: &FileReport) -> Vec<String> {
    let mut out = Vec::new();
    for c in &report.containers {
        for b in &c.bundles {
            if let Some(z) = &b.compression
                && !z.hash_ok
            {
                out.push(format!(
                    "{} bundle at {:#x}: stored hash {} does not match the MD5 of its contents",
                    c.place, b.offset, z.hash
                ));
            }
            for e in &b.entries {
                match (&e.target, &e.image) {
                    (Some(t), Image::CodeObject(co)) if *t != co.target => out.push(format!(
                        "{} bundle at {:#x}: entry {} holds a code object for {}",
                        c.place, b.offset, e.id, co.target
                    )),
                    (_, Image::Invalid { reason }) => out.push(format!(
                        "{} bundle at {:#x}: entry {}: {reason}",
                        c.place, b.offset, e.id
                    )),
                    _ => {}
                }
            }
        }
    }
    out
}

/// Reads the offload sections of a host ELF file at `base` in its file; returns its kind.
fn scan_elf(
    data: &[u8],
    base: u64,
    member: &str,
    containers: &mut Vec<Container>,
    err: &mut dyn FnMut(bundle::At),
) -> &'static str {
    let file = match object::File::parse(data) {
        Ok(f) => f,
        Err(e) => {
            err(bundle::At {
                offset: base,
                message: format!("unreadable ELF file: {e}"),
            });
            return "elf";
        }
    };
    let kind = match file.kind() {
        object::ObjectKind::Relocatable => "object",
        object::ObjectKind::Executable => "executable",
        object::ObjectKind::Dynamic if file.section_by_name(".interp").is_some() => "executable",
        object::ObjectKind::Dynamic => "shared-object",
        _ => "elf",
    };
    for section in file.sections() {
        let Ok(name) = section.name() else { continue };
        let is_fatbin = name == ".hip_fatbin";
        let is_offloading = name.starts_with(".llvm.offloading");
        if !is_fatbin && !is_offloading {
            continue;
        }
        let Some((off, size)) = section.file_range() else {
            continue;
        };
        let range = usize::try_from(off)
            .ok()
            .zip(usize::try_from(size).ok())
            .and_then(|(o, s)| Some(o..o.checked_add(s)?))
            .filter(|r| r.end <= data.len());
        let Some(range) = range else {
            err(bundle::At {
                offset: base,
                message: format!(
                    "{member}section {name} at {off:#x} of {size} bytes runs past the end of the file"
                ),
            });
            continue;
        };
        let here = base + off;
        let (bundles, e) = if is_fatbin {
            bundle::walk(&data[range], here)
        } else {
            offload_binary::walk(&data[range], here)
        };
        e.into_iter().for_each(&mut *err);
        let place = if member.is_empty() {
            name.to_string()
        } else {
            format!("{member}({name})")
        };
        push(containers, &place, bundles);
    }
    kind
}

fn scan_archive(data: &[u8], containers: &mut Vec<Container>, err: &mut dyn FnMut(bundle::At)) {
    let archive = match ArchiveFile::parse(data) {
        Ok(a) => a,
        Err(e) => {
            return err(bundle::At {
                offset: 0,
                message: format!("unreadable archive: {e}"),
            });
        }
    };
    for member in archive.members() {
        let member = match member {
            Ok(m) => m,
            Err(e) => {
                return err(bundle::At {
                    offset: 0,
                    message: format!("unreadable archive member: {e}"),
                });
            }
        };
        let (off, _) = member.file_range();
        let name = String::from_utf8_lossy(member.name()).into_owned();
        let Ok(bytes) = member.data(data) else {
            err(bundle::At {
                offset: off,
                message: format!("archive member {name} runs past the end of the file"),
            });
            continue;
        };
        if bytes.starts_with(b"\x7fELF") && !codeobject::is_amdgpu_elf(bytes) {
            scan_elf(bytes, off, &name, containers, err);
        } else if bytes.starts_with(bundle::MAGIC) || bytes.starts_with(bundle::CCOB_MAGIC) {
            let (bundles, e) = bundle::walk(bytes, off);
            e.into_iter().for_each(&mut *err);
            push(containers, &name, bundles);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tensile_names() {
        let t = |n: &str| target_in_name(n).map(|t| t.to_string());
        assert_eq!(
            t("TensileLibrary_lazy_gfx90c.dat").as_deref(),
            Some("gfx90c")
        );
        assert_eq!(
            t("Kernels.so-000-gfx90c-xnack-.hsaco").as_deref(),
            Some("gfx90c:xnack-")
        );
        assert_eq!(
            t("TensileLibrary_Type_HH_Contraction_l_Ailk_Bjlk_Cijk_Dijk_gfx1030.co").as_deref(),
            Some("gfx1030")
        );
        assert!(tensile_file("lib/rocblas/library/TensileLibrary_gfx90c.dat").is_some());
        assert!(tensile_file("lib/librocblas.so").is_none());
        assert!(
            tensile_file(
                "share/rocforge/tensile/Tensile/Tests/test_data/unit/library_data/library/TensileLibrary_gfx803.co"
            )
            .is_none()
        );
    }
}
