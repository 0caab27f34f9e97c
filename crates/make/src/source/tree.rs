//! What a prepared source tree may hold and where writes into it may go.
//!
//! A source comes from someone else (a tarball, a git mirror, a directory): it must not carry
//! repository state that a later `git` on the host would obey (an fsmonitor command, hooks), nor
//! modes that make the shared source cache a setuid or writable-by-anyone store, and every
//! later step that writes into the tree must stay inside it even when the tree plants links.

use std::ffi::OsStr;
use std::path::{Component, Path, PathBuf};

/// Version-control directories (and gitlink files) a source tree never keeps: git, Mercurial,
/// Subversion and Bazaar read their config and hooks from these.
const VCS_DIRS: [&str; 4] = [".git", ".hg", ".svn", ".bzr"];

/// Mode bits a source-cache entry never has: setuid, setgid, sticky, group- and world-write.
const DROPPED_MODE: u32 = 0o7022;

/// Whether `name` is a VCS control directory's name. Any case: git on a case-insensitive file
/// system reads `.GIT` as `.git`.
pub fn is_vcs_name(name: &OsStr) -> bool {
    let bytes = name.as_encoded_bytes();
    VCS_DIRS
        .iter()
        .any(|v| bytes.eq_ignore_ascii_case(v.as_bytes()))
}

/// Removes every VCS control entry under `dir` (at any depth) and clears the mode bits in
/// [`DROPPED_MODE`] on every file and directory. Links are neither followed nor changed.
pub fn sanitize(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        let meta = std::fs::symlink_metadata(&path)?;
        if is_vcs_name(&entry.file_name()) {
            if meta.is_dir() {
                crate::fsutil::remove_tree(&path)?;
            } else {
                std::fs::remove_file(&path)?;
            }
            continue;
        }
        if meta.file_type().is_symlink() {
            continue;
        }
        let mode = meta.permissions().mode() & 0o7777;
        if mode & DROPPED_MODE != 0 {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode & !DROPPED_MODE))?;
        }
        if meta.is_dir() {
            sanitize(&path)?;
        }
    }
    Ok(())
}

/// A path inside a tree that the tree itself would lead elsewhere.
#[derive(Debug, thiserror::Error)]
#[error("{path} leaves the source tree: {link} is a symbolic link (to {target})")]
pub struct Escape {
    /// The path asked for, relative to the tree.
    pub path: String,
    /// The link met on the way, relative to the tree.
    pub link: String,
    pub target: String,
}

/// `tree.join(rel)` when no existing ancestor of it inside `tree` is a symbolic link (so a write
/// there lands inside the tree); `rel` itself may be absent. With `follow_last`, the final
/// component may not be a link either (a path that is read or replaced).
pub fn inside(tree: &Path, rel: &str, follow_last: bool) -> Result<PathBuf, Escape> {
    let parts: Vec<_> = Path::new(rel)
        .components()
        .filter(|c| matches!(c, Component::Normal(_)))
        .collect();
    let mut at = tree.to_path_buf();
    let mut shown = PathBuf::new();
    for (i, c) in parts.iter().enumerate() {
        at.push(c);
        shown.push(c);
        let last = i + 1 == parts.len();
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_symlink() && (!last || follow_last) => {
                return Err(Escape {
                    path: rel.to_string(),
                    link: shown.display().to_string(),
                    target: std::fs::read_link(&at)
                        .map(|t| t.display().to_string())
                        .unwrap_or_default(),
                });
            }
            Ok(_) => {}
            // Nothing exists below a missing component: creating it stays inside.
            Err(_) => break,
        }
    }
    Ok(at)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn vcs_dirs_go_at_any_depth_and_modes_are_normalised() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path();
        std::fs::create_dir_all(d.join(".GIT/hooks")).unwrap();
        std::fs::create_dir_all(d.join("sub/.hg")).unwrap();
        std::fs::create_dir_all(d.join("sub/deeper/.Svn")).unwrap();
        std::fs::write(d.join("sub/.git"), "gitdir: /elsewhere\n").unwrap();
        std::fs::write(d.join("sub/.gitignore"), "x\n").unwrap();
        std::fs::write(d.join("tool"), "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(d.join("tool"), std::fs::Permissions::from_mode(0o4777)).unwrap();
        std::fs::set_permissions(d.join("sub"), std::fs::Permissions::from_mode(0o3777)).unwrap();
        sanitize(d).unwrap();
        assert!(!d.join(".GIT").exists());
        assert!(!d.join("sub/.hg").exists());
        assert!(!d.join("sub/deeper/.Svn").exists());
        assert!(std::fs::symlink_metadata(d.join("sub/.git")).is_err());
        assert!(d.join("sub/.gitignore").exists(), "only control dirs go");
        let mode = |p: &str| std::fs::metadata(d.join(p)).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode("tool"), 0o755);
        assert_eq!(mode("sub"), 0o755);
    }

    #[test]
    fn a_linked_ancestor_is_refused_and_a_missing_path_allowed() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path();
        std::fs::create_dir_all(d.join("a/b")).unwrap();
        std::os::unix::fs::symlink("/tmp", d.join("a/out")).unwrap();
        assert!(inside(d, "a/b/new/file", true).is_ok());
        let e = inside(d, "a/out/x", false).unwrap_err();
        assert_eq!(e.link, "a/out");
        assert_eq!(e.target, "/tmp");
        assert!(
            inside(d, "a/out", false).is_ok(),
            "the last one may be a link"
        );
        assert!(inside(d, "a/out", true).is_err());
    }
}
