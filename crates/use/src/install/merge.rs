//! Merging a staged install into a non-empty prefix so that a kill -9 at any moment leaves the
//! prefix as it was or, once the next rocforge command has looked at it, complete.
//!
//! Before the first change to the prefix the merge writes its journal,
//! `<staging>/.rocforge-merge.json`: the receipts being installed and the old files to remove.
//! From then on anyone can finish the merge: [`apply`] is idempotent (a file already moved is
//! skipped). [`recover`], run under the prefix's lock by `install`, `uninstall` and
//! `list --installed`, applies the journal of every staging directory a killed run left beside
//! the prefix and removes those directories; staging without a journal never touched the prefix
//! and is simply removed.
//!
//! This is the one place where staging is not [`crate::fsutil::Staged`]'s single rename: a
//! merge moves many entries into a prefix that stays, so it is made crash-safe by the journal
//! and finished forward by the next command, never rolled back.

use std::collections::BTreeSet;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::receipt::{self, Receipt};

pub const JOURNAL: &str = ".rocforge-merge.json";

#[derive(Debug, Serialize, Deserialize)]
pub struct Journal {
    pub receipts: Vec<Receipt>,
    /// Files of the components being replaced that the new versions do not have.
    pub remove: Vec<String>,
}

/// Records the merge in the staging directory: from here on it is finished, never undone.
pub fn begin(staging: &Path, journal: &Journal) -> std::io::Result<()> {
    let bytes = serde_json::to_vec(journal).expect("plain data");
    crate::fsutil::write_atomic(&staging.join(JOURNAL), &bytes)
}

/// The most a journal may hold: a few hundred thousand paths.
const MAX_JOURNAL_BYTES: u64 = 256 << 20;

impl Journal {
    /// The same rules as a receipt's for every path it names ([`Receipt::check`]): a journal is
    /// read back from disk, so it is input like any other.
    pub fn check(&self) -> Result<(), String> {
        for r in &self.receipts {
            r.check()?;
        }
        for f in &self.remove {
            receipt::check_path(f)?;
        }
        Ok(())
    }
}

/// Creates `rel` (a directory) and the directories above it in `prefix`; a file of a replaced
/// component in the way (`removable`) is removed first, anything else in the way, a symlink
/// above all, is an error: nothing is ever created through a link.
fn make_dirs(prefix: &Path, rel: &str, removable: &BTreeSet<&str>) -> std::io::Result<()> {
    let mut p = prefix.to_path_buf();
    let mut sofar = String::new();
    for c in rel.split('/') {
        p.push(c);
        if !sofar.is_empty() {
            sofar.push('/');
        }
        sofar.push_str(c);
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.is_dir() => continue,
            Ok(_) if removable.contains(sofar.as_str()) => std::fs::remove_file(&p)?,
            Ok(_) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("{sofar} is not a directory (a symlink or a file) in the prefix"),
                ));
            }
            Err(_) => {}
        }
        match std::fs::create_dir(&p) {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(e),
            _ => {}
        }
    }
    Ok(())
}

/// Removes the directory `rel` of `prefix` and what is in it, which must all be files the
/// journal removes; anything else stops the merge with the path (the next run finds the same).
fn clear_dir(prefix: &Path, rel: &str, removable: &BTreeSet<&str>) -> std::io::Result<()> {
    let dir = prefix.join(rel);
    for e in std::fs::read_dir(&dir)? {
        let e = e?;
        let child = format!("{rel}/{}", e.file_name().to_string_lossy());
        if e.file_type()?.is_dir() {
            clear_dir(prefix, &child, removable)?;
        } else if removable.contains(child.as_str()) {
            std::fs::remove_file(e.path())?;
        } else {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("{child} is in the way of the file {rel} and is not being replaced"),
            ));
        }
    }
    std::fs::remove_dir(&dir)
}

/// Writes the receipts, moves every staged entry into `prefix`, removes the replaced files.
pub fn apply(staging: &Path, prefix: &Path, journal: &Journal) -> std::io::Result<()> {
    journal
        .check()
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
    let removable: BTreeSet<&str> = journal.remove.iter().map(String::as_str).collect();
    // Receipts first: even cut short here, uninstall knows every file.
    for r in &journal.receipts {
        receipt::write(prefix, r)?;
    }
    crate::fault::point("install");
    for r in &journal.receipts {
        for d in &r.dirs {
            make_dirs(prefix, d, &removable)?;
        }
        for f in &r.files {
            let from = staging.join(f);
            if std::fs::symlink_metadata(&from).is_err() {
                continue; // moved by the run that was cut short
            }
            if let Some((parent, _)) = f.rsplit_once('/') {
                make_dirs(prefix, parent, &removable)?;
            }
            let to = prefix.join(f);
            if std::fs::symlink_metadata(&to).is_ok_and(|m| m.is_dir()) {
                // A directory of the replaced version becomes this file: it goes, with the
                // replaced files in it (install checked it holds nothing else).
                clear_dir(prefix, f, &removable)?;
            }
            std::fs::rename(&from, &to)?;
            crate::fault::point("install");
        }
    }
    for f in &journal.remove {
        if receipt::no_link_above(prefix, f) {
            let _ = std::fs::remove_file(prefix.join(f));
        }
    }
    crate::fsutil::sync_dir(prefix);
    Ok(())
}

/// The lock that makes installs into `prefix` take turns: `<parent>/.rocforge-install-<name>.lock`
/// (not `.<name>…`, which would look like staging). None when
/// `wait` is false and another process holds it; `on_wait` is called when waiting.
pub fn lock(
    prefix: &Path,
    wait: bool,
    on_wait: &dyn Fn(),
) -> std::io::Result<Option<crate::fsutil::Lock>> {
    let (parent, name) = parts(prefix);
    std::fs::create_dir_all(&parent)?;
    let timeout = std::time::Duration::from_secs(if wait { 24 * 3600 } else { 0 });
    let on_wait = || {
        if wait {
            on_wait()
        }
    };
    match crate::fsutil::lock(
        &parent,
        &format!(".rocforge-install-{name}"),
        timeout,
        &on_wait,
    ) {
        Ok(l) => Ok(Some(l)),
        Err(e) if !wait && e.kind() == std::io::ErrorKind::TimedOut => Ok(None),
        Err(e) => Err(e),
    }
}

fn parts(prefix: &Path) -> (PathBuf, String) {
    let parent = prefix
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .to_path_buf();
    let name = prefix
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    (parent, name)
}

/// Where installs into a prefix that is a mount point stage, inside it: see
/// [`crate::fsutil::is_mount_point`]. Merged from there, never renamed over the prefix.
pub fn staging_inside(prefix: &Path) -> PathBuf {
    prefix.join(".rocforge").join("staging")
}

/// The staging directories of `prefix` (`.<name>.tmp-…` beside it, `.tmp-…` in
/// [`staging_inside`]): a running install's, or what a killed one left.
pub fn staging(prefix: &Path) -> Vec<PathBuf> {
    let (parent, name) = parts(prefix);
    let mut out = dirs_named(&parent, &format!(".{name}.tmp-"));
    out.extend(dirs_named(&staging_inside(prefix), ".tmp-"));
    out
}

fn dirs_named(parent: &Path, start: &str) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(parent) else {
        return Vec::new();
    };
    rd.flatten()
        .filter(|e| {
            e.file_name().to_string_lossy().starts_with(start)
                && e.file_type().is_ok_and(|t| t.is_dir())
        })
        .map(|e| e.path())
        .collect()
}

/// What [`recover`] finished of the runs a kill cut short.
#[derive(Debug, Default, PartialEq)]
pub struct Recovered {
    /// Components whose install was completed.
    pub installed: Vec<String>,
    /// Components whose uninstall was completed.
    pub uninstalled: Vec<String>,
}

/// Whether a killed run left anything in `prefix` for [`recover`] to finish (or a running one
/// is at work).
pub fn pending(prefix: &Path) -> bool {
    !staging(prefix).is_empty() || receipt::uninstall_journal(prefix).exists()
}

/// Finishes the uninstall, then the merges, and removes the staging that killed runs left
/// beside `prefix`; the caller holds [`lock`]. (Every run recovers first under the lock, so at
/// most one run's leftovers are ever pending.)
pub fn recover(prefix: &Path) -> std::io::Result<Recovered> {
    let mut done = Recovered::default();
    if let Some(j) = receipt::pending_uninstall(prefix)? {
        receipt::finish_uninstall(prefix, &j).map_err(|e| match e {
            receipt::UninstallError::Io { path, source } => std::io::Error::new(
                source.kind(),
                format!(
                    "finishing an interrupted uninstall: {}: {source}",
                    path.display()
                ),
            ),
            other => std::io::Error::other(other.to_string()),
        })?;
        done.uninstalled
            .extend(j.receipts.iter().map(|r| r.name.to_string()));
    }
    for dir in staging(prefix) {
        let mut bytes = Vec::new();
        let journal: Option<Journal> = std::fs::File::open(dir.join(JOURNAL))
            .and_then(|f| f.take(MAX_JOURNAL_BYTES).read_to_end(&mut bytes))
            .ok()
            .and_then(|_| serde_json::from_slice(&bytes).ok());
        // A journal that breaks the rules was not written by a merge: the staging is dropped
        // unapplied, as one without a journal is.
        if let Some(j) = journal.filter(|j| {
            j.check()
                .inspect_err(|e| tracing::warn!("{}: journal not applied: {e}", dir.display()))
                .is_ok()
        }) {
            apply(&dir, prefix, &j)?;
            done.installed
                .extend(j.receipts.iter().map(|r| r.name.to_string()));
        }
        crate::fsutil::remove_tree(&dir)?;
    }
    let _ = std::fs::remove_dir(staging_inside(prefix));
    crate::fsutil::reap_temp(&receipt::dir(prefix), ".tmp-");
    crate::fsutil::reap_temp(&prefix.join(".rocforge"), ".tmp-");
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_merge_cut_short_is_finished_and_dead_staging_removed() {
        let tmp = tempfile::tempdir().unwrap();
        let prefix = tmp.path().join("p");
        std::fs::create_dir_all(prefix.join("lib")).unwrap();
        std::fs::write(prefix.join("lib/libx.so.0"), "old").unwrap();
        let receipt: Receipt = serde_json::from_value(serde_json::json!({
            "schema": receipt::RECEIPT_SCHEMA, "name": "x", "version": "2", "targets": ["gfx90c"],
            "key": "ab12".repeat(16), "sha256": "s", "url": "file:///x", "installed": "2025-01-01T00:00:00Z",
            "files": ["bin/x", "lib/libx.so.1"], "dirs": ["bin", "lib"],
        }))
        .unwrap();
        let journal = Journal {
            receipts: vec![receipt],
            remove: vec!["lib/libx.so.0".into()],
        };
        // Killed after moving lib/libx.so.1, before bin/x.
        let stage = crate::fsutil::staging_dir(&prefix).unwrap();
        std::fs::create_dir_all(stage.join("bin")).unwrap();
        std::fs::write(stage.join("bin/x"), "x").unwrap();
        std::fs::write(prefix.join("lib/libx.so.1"), "new").unwrap();
        begin(&stage, &journal).unwrap();
        // And an earlier run killed while extracting: no journal, never touched the prefix (under
        // the lock every staging directory is dead, whatever its pid).
        let unpacking = tmp.path().join(".p.tmp-1-abc");
        std::fs::create_dir_all(unpacking.join("lib")).unwrap();
        std::fs::write(unpacking.join("lib/libx.so.1"), "partial").unwrap();

        assert_eq!(staging(&prefix).len(), 2);
        assert_eq!(recover(&prefix).unwrap().installed, ["x"]);
        assert_eq!(staging(&prefix).len(), 0);
        assert_eq!(std::fs::read_to_string(prefix.join("bin/x")).unwrap(), "x");
        assert_eq!(
            std::fs::read_to_string(prefix.join("lib/libx.so.1")).unwrap(),
            "new"
        );
        assert!(!prefix.join("lib/libx.so.0").exists());
        assert_eq!(receipt::read_all(&prefix)[0].version, "2");
        // Nothing left to do: a second recovery changes nothing.
        assert_eq!(recover(&prefix).unwrap(), Recovered::default());
    }
}
