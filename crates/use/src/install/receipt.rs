//! Receipts: `<prefix>/.rocforge/receipts/<name>.json`, one per installed component, listing
//! exactly the files, symlinks and directories it put there, so `uninstall` removes those and
//! nothing else.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::ids::ArtifactId;
use crate::inspect::{CoverageRecord, Status};
use crate::package::manifest::{Dependency, has_reserved, normalize};
use crate::recipe::gpu_code::GpuCode;

pub const RECEIPT_SCHEMA: &str = "rocforge.receipt/1";

/// The targets an artifact does not serve natively, from its manifest's coverage record (the
/// gate's table: a cell `only-compatible` names the nearest target, `missing` has no code).
pub fn not_native(coverage: Option<&CoverageRecord>) -> std::collections::BTreeMap<String, String> {
    let mut out = std::collections::BTreeMap::new();
    let rows = coverage.and_then(CoverageRecord::report).map(|r| &r.rows);
    for cell in rows.into_iter().flatten().flat_map(|r| &r.targets) {
        match &cell.status {
            Status::OnlyCompatible { nearest, .. } => {
                out.insert(cell.target.to_string(), nearest.clone());
            }
            Status::Missing => {
                out.entry(cell.target.to_string()).or_default();
            }
            Status::Present { .. } | Status::Incomplete { .. } => {}
        }
    }
    out
}

/// Whether the coverage record lists any file with GPU code (header-only and host-code
/// components list none).
pub fn carries_code(coverage: Option<&CoverageRecord>) -> bool {
    coverage
        .and_then(CoverageRecord::report)
        .is_some_and(|r| !r.rows.is_empty())
}

/// A component whose build declared `declined` coverage: its own dispatch declines its
/// targets, so it carries no code for them by design.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Declined {
    pub reason: String,
    /// What its consumers use on those targets instead.
    pub fallback: String,
}

/// [`Declined`] from the manifest's coverage record, when its build declared it.
pub fn declined(coverage: Option<&CoverageRecord>) -> Option<Declined> {
    match coverage?.declared()? {
        GpuCode::Declined { reason, fallback } => Some(Declined {
            reason: reason.clone(),
            fallback: fallback.clone(),
        }),
        _ => None,
    }
}

/// An installed component's record in `<prefix>/.rocforge/receipts/<name>.json`: what was
/// installed from where, and every path it put there (uninstall removes exactly these).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Receipt {
    pub schema: String,
    #[serde(flatten)]
    pub id: ArtifactId,
    /// The artifact's sha256 and where it came from.
    pub sha256: String,
    pub url: String,
    /// RFC 3339 UTC.
    pub installed: String,
    #[serde(default)]
    pub depends: Vec<Dependency>,
    #[serde(default)]
    pub glibc_floor: Option<String>,
    /// What it needs and provides at run time (`hip-runtime`, and the exact libraries behind
    /// it), from its manifest.
    #[serde(flatten)]
    pub facts: crate::package::manifest::RuntimeFacts,
    /// Targets whose code the artifact lacks, as its build's coverage gate recorded them:
    /// target → the processor whose code it carries instead (run under
    /// HSA_OVERRIDE_GFX_VERSION), or "" when it carries none.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub not_native: std::collections::BTreeMap<String, String>,
    /// Set when its build declared that it declines its targets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub declined: Option<Declined>,
    /// Who signed the index it came from (a key ID), or None when installed unsigned.
    #[serde(default)]
    pub signed_by: Option<String>,
    /// Regular files and symlinks, relative to the prefix.
    pub files: Vec<String>,
    /// Directories, relative to the prefix (removed on uninstall when empty).
    pub dirs: Vec<String>,
}

crate::carries_artifact_id!(Receipt);

/// A path a receipt or journal may name: normalized, relative, no `..`, no `.rocforge` name.
pub fn check_path(p: &str) -> Result<(), String> {
    use crate::package::extract::shown;
    if normalize(p).as_deref() != Some(p) {
        return Err(format!(
            "path \"{}\" is absolute, climbs with .., or is not normalized",
            shown(p)
        ));
    }
    if has_reserved(p) {
        return Err(format!(
            "path \"{}\" is rocforge's own (.rocforge…)",
            shown(p)
        ));
    }
    Ok(())
}

impl Receipt {
    /// The rules every receipt read from disk (or a journal) must meet before anything acts on
    /// it: the recipes' component names, paths that stay in the prefix.
    pub fn check(&self) -> Result<(), String> {
        if !crate::recipe::is_component_name(&self.name) {
            return Err(format!(
                "name \"{}\" is not a component name",
                crate::package::extract::shown(&self.name)
            ));
        }
        if self.key.is_empty()
            || self.key.len() > 128
            || !self.key.bytes().all(|b| b.is_ascii_hexdigit())
        {
            return Err(format!(
                "content key \"{}\" is not hexadecimal",
                crate::package::extract::shown(&self.key)
            ));
        }
        for p in self.files.iter().chain(&self.dirs) {
            check_path(p)?;
        }
        Ok(())
    }
}

/// Whether every directory above `rel` in `prefix` is a real directory (or absent): a path
/// through a symlink may lead anywhere, so nothing is removed or replaced through one.
pub fn no_link_above(prefix: &Path, rel: &str) -> bool {
    let mut p = prefix.to_path_buf();
    let mut parts: Vec<&str> = rel.split('/').collect();
    parts.pop();
    for c in parts {
        p.push(c);
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => return false,
            Err(_) => return true,
        }
    }
    true
}

pub fn dir(prefix: &Path) -> PathBuf {
    prefix.join(".rocforge").join("receipts")
}

pub fn path(prefix: &Path, name: &str) -> PathBuf {
    dir(prefix).join(format!("{name}.json"))
}

/// Every receipt in `prefix`, by name. Unreadable receipts are skipped, and so are those that
/// break [`Receipt::check`] or whose file is not `<its name>.json`.
pub fn read_all(prefix: &Path) -> Vec<Receipt> {
    let Ok(rd) = std::fs::read_dir(dir(prefix)) else {
        return Vec::new();
    };
    let mut out: Vec<Receipt> = rd
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".json"))
        .filter_map(|e| {
            let r: Receipt = serde_json::from_slice(&std::fs::read(e.path()).ok()?).ok()?;
            let ok =
                r.check().is_ok() && e.file_name().to_str() == Some(&format!("{}.json", r.name));
            if !ok {
                tracing::warn!("{}: not a valid receipt; ignored", e.path().display());
            }
            ok.then_some(r)
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

pub fn write(prefix: &Path, r: &Receipt) -> std::io::Result<()> {
    r.check()
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
    let mut bytes = serde_json::to_vec_pretty(r).expect("plain data");
    bytes.push(b'\n');
    crate::fsutil::write_atomic(&path(prefix, &r.name), &bytes)
}

#[derive(Debug, thiserror::Error)]
pub enum UninstallError {
    #[error("{name} is not installed in {}", prefix.display())]
    NotInstalled { name: String, prefix: PathBuf },
    #[error("{name} is needed by {}", by.join(", "))]
    Needed { name: String, by: Vec<String> },
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl crate::diag::Hint for UninstallError {
    fn hint(&self) -> String {
        match self {
            UninstallError::NotInstalled { .. } => {
                "`rocforge list --installed --prefix DIR` lists what is installed".into()
            }
            UninstallError::Needed { by, .. } => {
                format!(
                    "uninstall {} first, or all of them in one command",
                    by.join(", ")
                )
            }
            UninstallError::Io { .. } => "check the prefix's permissions".into(),
        }
    }
}

/// What uninstall removed.
#[derive(Debug, Default)]
pub struct Removed {
    pub files: usize,
    pub dirs: usize,
    /// Receipt entries already gone.
    pub missing: usize,
}

/// An uninstall under way: `<prefix>/.rocforge/uninstall.json`, the receipts of the components
/// being removed. Written (and synced) before the first file goes, removed after the last, so a
/// kill -9 in between leaves it for the next command on the prefix ([`super::merge::recover`])
/// to finish: removing is idempotent, and a half-removed component is never left looking
/// installed.
pub const UNINSTALL_JOURNAL: &str = "uninstall.json";

pub fn uninstall_journal(prefix: &Path) -> PathBuf {
    prefix.join(".rocforge").join(UNINSTALL_JOURNAL)
}

#[derive(Debug, Serialize, Deserialize)]
pub struct UninstallJournal {
    pub receipts: Vec<Receipt>,
}

/// The most an uninstall journal may hold: a few hundred thousand paths.
const MAX_UNINSTALL_JOURNAL_BYTES: u64 = 256 << 20;

/// The uninstall a killed run left in `prefix`, if any, its receipts checked like any read
/// from disk; a journal that breaks the rules is reported as an error naming it.
pub fn pending_uninstall(prefix: &Path) -> std::io::Result<Option<UninstallJournal>> {
    use std::io::Read;
    let p = uninstall_journal(prefix);
    let f = match std::fs::File::open(&p) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let bad = |why: String| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("{}: {why}", p.display()),
        )
    };
    if !f.metadata()?.is_file() {
        return Err(bad("not a regular file".into()));
    }
    let mut bytes = Vec::new();
    f.take(MAX_UNINSTALL_JOURNAL_BYTES + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_UNINSTALL_JOURNAL_BYTES {
        return Err(bad(format!(
            "larger than {MAX_UNINSTALL_JOURNAL_BYTES} bytes"
        )));
    }
    let j: UninstallJournal = match serde_json::from_slice(&bytes) {
        Ok(j) => j,
        // A torn journal cannot be: it is written to a temporary file and renamed. Unreadable
        // JSON was not written by an uninstall; it names nothing to remove.
        Err(e) => {
            tracing::warn!("{}: not an uninstall journal ({e}); dropped", p.display());
            std::fs::remove_file(&p)?;
            return Ok(None);
        }
    };
    // One that breaks the receipt rules was not written by an uninstall either (its paths
    // could lead out of the prefix): dropped unapplied, as a forged merge journal is.
    if let Some(e) = j.receipts.iter().find_map(|r| r.check().err()) {
        tracing::warn!("{}: uninstall journal not applied: {e}", p.display());
        std::fs::remove_file(&p)?;
        return Ok(None);
    }
    Ok(Some(j))
}

/// What a component's receipt lists that is no longer in the prefix as it was installed: a
/// file or symlink gone (or now a directory, or reached through a symlink).
pub fn missing_files(prefix: &Path, r: &Receipt) -> usize {
    r.files
        .iter()
        .filter(|f| {
            !no_link_above(prefix, f)
                || !std::fs::symlink_metadata(prefix.join(f)).is_ok_and(|m| !m.is_dir())
        })
        .count()
}

/// Removes the components `names` (together, so they may depend on each other). The caller
/// holds the prefix's lock ([`super::merge::lock`]) and has let [`super::merge::recover`]
/// finish what a killed run left.
pub fn uninstall(prefix: &Path, names: &[String]) -> Result<Removed, UninstallError> {
    let all = read_all(prefix);
    let mut chosen = Vec::new();
    for n in names {
        match all.iter().find(|r| &r.name == n) {
            Some(r) => chosen.push(r.clone()),
            None => {
                return Err(UninstallError::NotInstalled {
                    name: n.clone(),
                    prefix: prefix.to_path_buf(),
                });
            }
        }
    }
    for r in &chosen {
        let by: Vec<String> = all
            .iter()
            .filter(|o| !names.iter().any(|n| o.name == *n))
            .filter(|o| o.depends.iter().any(|d| d.name == r.name))
            .map(|o| o.name.to_string())
            .collect();
        if !by.is_empty() {
            return Err(UninstallError::Needed {
                name: r.name.to_string(),
                by,
            });
        }
    }
    let journal = UninstallJournal { receipts: chosen };
    let jp = uninstall_journal(prefix);
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| UninstallError::Io { path, source }
    };
    crate::fsutil::write_atomic(&jp, &serde_json::to_vec(&journal).expect("plain data"))
        .map_err(io(&jp))?;
    crate::fault::point("uninstall");
    finish_uninstall(prefix, &journal)
}

/// Carries out `journal` (again): the receipts go first, so a reader that does not recover
/// never sees a half-removed component as installed, then the files, then the directories
/// nothing else lists, then the journal. Every step skips what is already gone.
pub fn finish_uninstall(
    prefix: &Path,
    journal: &UninstallJournal,
) -> Result<Removed, UninstallError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| UninstallError::Io { path, source }
    };
    let leaving = |name: &str| journal.receipts.iter().any(|r| r.name.as_str() == name);
    for r in &journal.receipts {
        let rp = path(prefix, &r.name);
        match std::fs::remove_file(&rp) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io(&rp)(e)),
            _ => {}
        }
    }
    crate::fsutil::sync_dir(&dir(prefix));
    // Directories another remaining component also lists stay.
    let remaining = read_all(prefix);
    let kept_dirs: std::collections::BTreeSet<&String> = remaining
        .iter()
        .filter(|o| !leaving(&o.name))
        .flat_map(|o| o.dirs.iter())
        .collect();
    let mut removed = Removed::default();
    for r in &journal.receipts {
        for f in &r.files {
            let Some(f) = normalize(f) else { continue };
            if !no_link_above(prefix, &f) {
                // Moved under a symlink since (an upgrade swapped a directory for a link): the
                // path no longer names this component's file.
                removed.missing += 1;
                continue;
            }
            let p = prefix.join(&f);
            match std::fs::symlink_metadata(&p) {
                Ok(m) if !m.is_dir() => {
                    match std::fs::remove_file(&p) {
                        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                            return Err(io(&p)(e));
                        }
                        _ => {}
                    }
                    removed.files += 1;
                    crate::fault::point("uninstall");
                }
                _ => removed.missing += 1,
            }
        }
        let mut dirs: Vec<String> = r.dirs.iter().filter_map(|d| normalize(d)).collect();
        dirs.sort_by_key(|d| std::cmp::Reverse(d.matches('/').count()));
        for d in dirs {
            if kept_dirs.contains(&d) {
                continue;
            }
            // Only empty directories go: files a user added stay, with their directories.
            if no_link_above(prefix, &d) && std::fs::remove_dir(prefix.join(&d)).is_ok() {
                removed.dirs += 1;
            }
        }
    }
    let jp = uninstall_journal(prefix);
    match std::fs::remove_file(&jp) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io(&jp)(e)),
        _ => {}
    }
    crate::fsutil::sync_dir(&prefix.join(".rocforge"));
    Ok(removed)
}
