//! Carrying out an [`InstallPlan`]: every download first (verified against the signed index's
//! sha256), then each tarball unpacked into a directory of its own beside the prefix, gathered
//! into one staging directory, and committed: one rename into an empty prefix, else the
//! checked, journaled merge (merge.rs). Until the commit nothing in the prefix changes.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::Path;
use std::sync::atomic::Ordering;

use super::plan::{InstallPlan, Step};
use super::receipt::{self, Receipt};
use super::{InstallError, Report, Request, ioe, merge};
use crate::download::{DownloadOptions, download};
use crate::fsutil::Staged;
use crate::package::extract;
use crate::package::manifest::{Kind, Manifest};
use crate::package::tarball::Compression;
use crate::progress::Reporter;
use crate::units::{now_unix, rfc3339};

/// Carries out `plan` into `req.prefix`, whose installed components are `existing`; the caller
/// holds the prefix's lock (merge::lock).
pub(super) fn execute(
    plan: &InstallPlan,
    client: &reqwest::blocking::Client,
    req: &Request<'_>,
    existing: &[Receipt],
    reporter: &dyn Reporter,
) -> Result<Report, InstallError> {
    let mut report = Report {
        installed: Vec::new(),
        with_device_code: Vec::new(),
        repaired: Vec::new(),
        already: Vec::new(),
        signer: plan.signer.clone(),
        unsigned_reason: plan.unsigned_reason.clone(),
    };
    let (todo, kept): (Vec<&Step>, Vec<&Step>) = plan.steps.iter().partition(|s| s.changes());
    report.already = kept.iter().map(|s| s.name.clone()).collect();
    report.repaired = todo
        .iter()
        .filter(|s| s.action == super::plan::Action::Repair)
        .map(|s| (s.name.clone(), s.missing))
        .collect();
    if todo.is_empty() {
        return Ok(report);
    }
    // Staging first: a prefix that cannot be written fails before anything is downloaded.
    let staging = Staging::new(req.prefix)?;
    fetch_all(&todo, client, req, reporter)?;
    let mut staged = BTreeMap::new();
    let mut receipts = Vec::new();
    let mut elves: Vec<(String, String)> = Vec::new();
    let now = rfc3339(now_unix());
    for step in &todo {
        stopped(req)?;
        let x = unpack(step, req, reporter)?;
        extract::gather(
            x.own.path(),
            staging.path(),
            &x.entries,
            &step.file,
            &mut staged,
        )?;
        elves.extend(
            x.entries
                .iter()
                .filter(|e| e.kind == Kind::File)
                .map(|e| (step.file.clone(), e.path.clone())),
        );
        let mut r = receipt_of(&x.manifest, &x.entries);
        r.sha256 = step.sha256.to_string();
        r.url = step.url.clone();
        r.installed = now.clone();
        r.not_native = receipt::not_native(x.manifest.coverage.as_ref());
        r.declined = receipt::declined(x.manifest.coverage.as_ref());
        if receipt::carries_code(x.manifest.coverage.as_ref()) {
            report.with_device_code.push(r.name.clone());
        }
        r.signed_by = plan.signer.clone();
        receipts.push(r);
    }
    stopped(req)?;
    if req.runtime != super::RuntimeCheck::Skip {
        check_links(staging.path(), &elves, req.prefix, reporter)?;
    }
    crate::fault::point("install");
    staging.commit(req.prefix, &receipts, existing)?;
    report.installed = receipts;
    Ok(report)
}

/// Refuses an install whose files link a library that will not be found (links.rs).
fn check_links(
    staging: &Path,
    files: &[(String, String)],
    prefix: &Path,
    reporter: &dyn Reporter,
) -> Result<(), InstallError> {
    let task = reporter.task(
        "checking every library the install links is found",
        None,
        false,
    );
    let host = super::links::host_libraries();
    let staged: Vec<super::links::Staged<'_>> = files
        .iter()
        .map(|(artifact, path)| super::links::Staged { artifact, path })
        .collect();
    let missing = super::links::unresolved(staging, &staged, prefix, &host);
    if missing.is_empty() {
        task.finish("every library found");
        return Ok(());
    }
    task.finish(&format!("{} missing", missing.len()));
    Err(InstallError::Unresolved {
        missing,
        searched: host.searched,
    })
}

fn stopped(req: &Request<'_>) -> Result<(), InstallError> {
    if req.stop.load(Ordering::SeqCst) {
        return Err(InstallError::Stopped);
    }
    Ok(())
}

/// Downloads every tarball of `todo` into the download cache before anything is unpacked.
fn fetch_all(
    todo: &[&Step],
    client: &reqwest::blocking::Client,
    req: &Request<'_>,
    reporter: &dyn Reporter,
) -> Result<(), InstallError> {
    for step in todo {
        stopped(req)?;
        let opts = DownloadOptions {
            max_bytes: Some(step.size),
            ..req.download.clone()
        };
        download(
            client,
            step.source.as_str(),
            &step.sha256,
            &step.download,
            &opts,
            reporter,
        )
        .map_err(|source| InstallError::Download {
            artifact: extract::shown(&step.file),
            source,
        })?;
        crate::fault::point("install");
    }
    Ok(())
}

/// One tarball, unpacked into a staging directory of its own.
struct Unpacked {
    own: Staged,
    manifest: Manifest,
    entries: Vec<crate::package::manifest::FileEntry>,
}

/// Unpacks the downloaded tarball of `step` and checks its manifest against the index. Each
/// artifact gets a directory of its own, so nothing an earlier one left (a symlink above all)
/// is even there while it is extracted; its entries then move into the shared staging, where a
/// path two artifacts both have is a conflict.
fn unpack(
    step: &Step,
    req: &Request<'_>,
    reporter: &dyn Reporter,
) -> Result<Unpacked, InstallError> {
    let task = reporter.task(&format!("unpacking {}", step.file), Some(step.size), true);
    let file = &step.download;
    let f = crate::fsutil::open_regular(file).map_err(ioe(file))?;
    let counted = Progress {
        inner: f,
        task: task.as_ref(),
    };
    let reader: Box<dyn Read + '_> = match Compression::of(&step.file) {
        Some(Compression::Gz) => Box::new(flate2::read::GzDecoder::new(
            std::io::BufReader::with_capacity(1 << 20, counted),
        )),
        _ => Box::new(zstd::stream::read::Decoder::new(counted).map_err(ioe(file))?),
    };
    let own = Staging::new(req.prefix)?.0;
    let limit = step.installed_size.min(req.max_bytes);
    let x = extract::extract(reader, own.path(), &step.file, limit)?;
    task.finish(&format!("{}: unpacked", step.name));
    crate::fault::point("install");
    let m = &x.manifest;
    // Everything the index says the artifact is, the tarball must say too: a signed index's
    // entry is what was checked, so a tarball for other targets (or another version) is not it.
    let said = |id: &crate::ids::ArtifactId| {
        format!(
            "{} {} for {} ({})",
            id.name,
            id.version,
            crate::arch::comma_list(&id.targets),
            id.key
        )
    };
    let same_release =
        m.id.release.is_empty() || step.id.release.is_empty() || m.id.release == step.id.release;
    if m.key != step.key
        || m.name != step.name
        || m.id.version != step.id.version
        || m.id.targets != step.id.targets
        || !same_release
    {
        return Err(InstallError::ManifestMismatch {
            artifact: extract::shown(&step.file),
            expected: said(&step.id),
            found: extract::shown(&said(&m.id)),
        });
    }
    // Uninstall removes each file by its full path; a path the kernel would refuse there
    // (ENAMETOOLONG) would stay behind, owned by nothing: such an artifact is not installed.
    let prefix_len = req.prefix.as_os_str().len();
    if let Some(long) = x
        .entries
        .iter()
        .find(|e| prefix_len + 1 + e.path.len() >= PATH_MAX)
    {
        return Err(InstallError::Extract(extract::ExtractError::Unsafe {
            artifact: extract::shown(&step.file),
            path: extract::shown(&long.path),
            reason: format!(
                "its path in {} would be {} bytes, beyond the system's limit of {PATH_MAX}",
                req.prefix.display(),
                prefix_len + 1 + long.path.len()
            ),
        }));
    }
    Ok(Unpacked {
        own,
        manifest: x.manifest,
        entries: x.entries,
    })
}

/// The longest path, with its terminating NUL, that system calls take (Linux's PATH_MAX).
const PATH_MAX: usize = libc::PATH_MAX as usize;

/// The receipt of a manifest's component, listing `entries`; where it came from (digest, URL,
/// signer) and when are the caller's to fill in.
fn receipt_of(m: &Manifest, entries: &[crate::package::manifest::FileEntry]) -> Receipt {
    let mut r = Receipt {
        schema: receipt::RECEIPT_SCHEMA.into(),
        id: m.id.clone(),
        sha256: String::new(),
        url: String::new(),
        installed: String::new(),
        depends: m.depends.clone(),
        glibc_floor: m.glibc_floor.clone(),
        facts: m.facts.clone(),
        not_native: Default::default(),
        declined: None,
        signed_by: None,
        files: Vec::new(),
        dirs: Vec::new(),
    };
    for e in entries {
        match e.kind {
            Kind::Dir => r.dirs.push(e.path.clone()),
            _ => r.files.push(e.path.clone()),
        }
    }
    r
}

struct Progress<'a, R> {
    inner: R,
    task: &'a dyn crate::progress::Task,
}

impl<R: Read> Read for Progress<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.task.inc(n as u64);
        Ok(n)
    }
}

/// The extract-and-merge half of an install, for one uncompressed tarball already at hand: safe
/// extraction into a staging directory beside `prefix`, then the same commit (a rename into an
/// empty prefix, else the checked, journaled merge) under the prefix's lock. No index, no
/// download, no signature: the fuzz target drives it with arbitrary bytes to check that nothing
/// outside `prefix` ever changes.
pub fn unpack_into(
    prefix: &Path,
    tar: impl Read,
    artifact: &str,
    limit: u64,
) -> Result<Receipt, InstallError> {
    let _lock = merge::lock(prefix, false, &|| {})
        .map_err(ioe(prefix))?
        .ok_or_else(|| ioe(prefix)(std::io::Error::other("locked by another process")))?;
    merge::recover(prefix).map_err(ioe(prefix))?;
    let existing = receipt::read_all(prefix);
    let staging = Staging::new(prefix)?;
    let x = extract::extract(tar, staging.path(), artifact, limit)?;
    let mut r = receipt_of(&x.manifest, &x.entries);
    r.installed = rfc3339(now_unix());
    // A manifest's key is not checked against an index here; the receipt rules still apply.
    r.check().map_err(|message| InstallError::Index {
        from: artifact.into(),
        message,
    })?;
    staging.commit(prefix, std::slice::from_ref(&r), &existing)?;
    Ok(r)
}

/// `<parent>/.<prefix name>.tmp-…`, removed on drop unless committed.
struct Staging(Staged);

impl Staging {
    fn new(prefix: &Path) -> Result<Staging, InstallError> {
        if crate::fsutil::is_mount_point(prefix) {
            Staged::dir_in(&merge::staging_inside(prefix), ".tmp-", prefix)
        } else {
            Staged::dir_beside(prefix)
        }
        .map(Staging)
        .map_err(ioe(prefix))
    }

    fn path(&self) -> &Path {
        self.0.path()
    }

    /// Moves the staged tree into `prefix`: one rename when the prefix is new or empty,
    /// otherwise a merge that first checks every path for conflicts, writes the receipts, then
    /// renames each entry in.
    fn commit(
        self,
        prefix: &Path,
        receipts: &[Receipt],
        existing: &[Receipt],
    ) -> Result<(), InstallError> {
        // The unpacked files reach the disk before anything in the prefix points at them: a
        // power cut after the rename must not leave receipts beside empty files.
        crate::fsutil::sync_filesystem(self.path());
        // Staged inside the prefix (a mount point), the tree is merged in, never renamed.
        let empty = !self.path().starts_with(prefix)
            && match std::fs::read_dir(prefix) {
                Ok(mut rd) => rd.next().is_none(),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => true,
                Err(e) => return Err(ioe(prefix)(e)),
            };
        if empty {
            for r in receipts {
                receipt::write(self.path(), r).map_err(ioe(self.path()))?;
            }
            return self.0.commit_over_empty().map(drop).map_err(ioe(prefix));
        }
        let replacing: BTreeSet<&str> = receipts.iter().map(|r| r.name.as_str()).collect();
        check_conflicts(prefix, receipts, existing, &replacing)?;
        let new_files: BTreeSet<&str> = receipts
            .iter()
            .flat_map(|r| r.files.iter().map(String::as_str))
            .collect();
        let journal = merge::Journal {
            receipts: receipts.to_vec(),
            remove: existing
                .iter()
                .filter(|r| replacing.contains(r.name.as_str()))
                .flat_map(|r| r.files.iter())
                .filter(|f| !new_files.contains(f.as_str()))
                .cloned()
                .collect(),
        };
        // The merge cannot be one rename, so it is journaled first: a merge cut short is
        // finished by the next command (merge::recover), never undone; the staging directory,
        // emptied by the merge, is still removed when `self` drops.
        merge::begin(self.path(), &journal).map_err(ioe(self.path()))?;
        crate::fault::point("install");
        merge::apply(self.path(), prefix, &journal).map_err(ioe(prefix))?;
        drop(self);
        // Staged inside the prefix: the directory that held it goes once empty.
        let _ = std::fs::remove_dir(merge::staging_inside(prefix));
        Ok(())
    }
}

/// Whether `rel` is a directory (not a link) holding nothing but files of the components
/// being replaced, at any depth: a version that turns it into a file may take its place, the
/// merge removing it first (merge::apply).
fn given_up_dir(
    prefix: &Path,
    rel: &str,
    owner: &BTreeMap<&str, &str>,
    replacing: &BTreeSet<&str>,
) -> bool {
    let dir = prefix.join(rel);
    if !std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir()) {
        return false;
    }
    let Ok(rd) = std::fs::read_dir(&dir) else {
        return false;
    };
    rd.flatten().all(|e| {
        let name = e.file_name().to_string_lossy().into_owned();
        let child = format!("{rel}/{name}");
        match e.file_type() {
            Ok(t) if t.is_dir() => given_up_dir(prefix, &child, owner, replacing),
            Ok(_) => owner
                .get(child.as_str())
                .is_some_and(|o| replacing.contains(o)),
            Err(_) => false,
        }
    })
}

/// Refuses a merge that would put a file where another component's file or directory is, or
/// a directory where a file is; the components being replaced (`replacing`) give up theirs.
fn check_conflicts(
    prefix: &Path,
    receipts: &[Receipt],
    existing: &[Receipt],
    replacing: &BTreeSet<&str>,
) -> Result<(), InstallError> {
    let mut owner: BTreeMap<&str, &str> = BTreeMap::new();
    for r in existing {
        for f in &r.files {
            owner.insert(f, &r.name);
        }
    }
    let conflict = |path: &str| InstallError::Conflict {
        path: path.to_string(),
        owner: owner.get(path).map(|s| s.to_string()),
    };
    // A file of a component being replaced may stand where a directory now goes: the merge
    // removes it first (merge::apply).
    let in_the_way = |p: &str| {
        std::fs::symlink_metadata(prefix.join(p)).is_ok_and(|m| !m.is_dir())
            && !owner.get(p).is_some_and(|o| replacing.contains(o))
    };
    for r in receipts {
        for f in &r.files {
            let mut anc = Path::new(f.as_str()).parent();
            while let Some(a) = anc.filter(|a| !a.as_os_str().is_empty()) {
                let a_str = a.to_str().unwrap_or_default();
                if in_the_way(a_str) {
                    return Err(conflict(a_str));
                }
                anc = a.parent();
            }
            if std::fs::symlink_metadata(prefix.join(f)).is_ok()
                && !owner.get(f.as_str()).is_some_and(|o| replacing.contains(o))
                && !given_up_dir(prefix, f, &owner, replacing)
            {
                return Err(conflict(f));
            }
        }
        if let Some(d) = r.dirs.iter().find(|d| in_the_way(d)) {
            return Err(conflict(d));
        }
    }
    Ok(())
}
