//! A patch read into what libgit2 applies and what the series checks: its message, its
//! normalised diff and the files each section touches.

use std::path::{Component, Path};

use git2::{Delta, Diff};

use super::message::message_from_header;
use super::normalise::split_patch;
use super::{PatchError, PatchFile};

pub(super) struct Parsed {
    pub(super) name: String,
    pub(super) message: String,
    /// The diff part, normalised to `git diff` form: what libgit2 parses.
    pub(super) diff_text: Vec<u8>,
    /// Parsed from `diff_text`. libgit2 edits a parsed patch's lines while applying it, so this is
    /// applied at most once; diagnosis parses `diff_text` again.
    pub(super) diff: Diff<'static>,
    pub(super) deltas: Vec<DeltaInfo>,
    pub(super) hunks: usize,
}

#[derive(Debug, Clone)]
pub(super) struct DeltaInfo {
    pub(super) status: Delta,
    pub(super) old: Option<String>,
    pub(super) new: Option<String>,
    /// The patch states the new mode (an `index` line with a mode, `new mode`, `new file mode`).
    pub(super) mode_given: bool,
}

pub(super) fn parse(p: &PatchFile) -> Result<Parsed, PatchError> {
    let malformed = |reason: String| PatchError::Malformed {
        patch: p.name.clone(),
        reason,
    };
    if p.bytes.contains(&0) {
        return Err(malformed("it contains NUL bytes".into()));
    }
    let (header, diff_text) = split_patch(&p.bytes).map_err(malformed)?;
    let diff = Diff::from_buffer(&diff_text).map_err(|e| malformed(e.message().to_string()))?;
    let mut deltas = Vec::new();
    let mut hunks = 0;
    for (i, d) in diff.deltas().enumerate() {
        let status = d.status();
        if !matches!(
            status,
            Delta::Added | Delta::Deleted | Delta::Modified | Delta::Renamed | Delta::Copied
        ) {
            return Err(malformed(format!(
                "unsupported kind of change ({status:?})"
            )));
        }
        let path = |f: git2::DiffFile<'_>| -> Result<Option<String>, PatchError> {
            match f.path_bytes() {
                None => Ok(None),
                Some(b) => {
                    let s = std::str::from_utf8(b).map_err(|_| {
                        malformed(format!(
                            "path {:?} is not UTF-8",
                            String::from_utf8_lossy(b)
                        ))
                    })?;
                    check_path(s).map_err(malformed)?;
                    Ok(Some(s.to_string()))
                }
            }
        };
        let old = if status == Delta::Added {
            None
        } else {
            path(d.old_file())?
        };
        let new = if status == Delta::Deleted {
            None
        } else {
            path(d.new_file())?
        };
        if old.is_none() && new.is_none() {
            return Err(malformed("a file section has no path".into()));
        }
        if status != Delta::Added && old.is_none() {
            return Err(malformed("a file section has no old path".into()));
        }
        // Modes were checked by `split_patch`, so `mode()` cannot meet one it does not know.
        let mode_given =
            status != Delta::Deleted && d.new_file().mode() != git2::FileMode::Unreadable;
        if status != Delta::Deleted
            && matches!(
                d.new_file().mode(),
                git2::FileMode::Commit | git2::FileMode::Tree
            )
        {
            return Err(malformed(format!(
                "`{}` is a submodule or directory, which patches cannot change",
                new.as_deref().unwrap_or("")
            )));
        }
        let patch =
            git2::Patch::from_diff(&diff, i).map_err(|e| malformed(e.message().to_string()))?;
        hunks += patch.map_or(0, |p| p.num_hunks());
        deltas.push(DeltaInfo {
            status,
            old,
            new,
            mode_given,
        });
    }
    if deltas.is_empty() {
        return Err(malformed("it changes no file".into()));
    }
    let message = message_from_header(&header, &p.name);
    Ok(Parsed {
        name: p.name.clone(),
        message,
        diff_text,
        diff,
        deltas,
        hunks,
    })
}

/// A path a patch may touch: relative, no `..`, nothing inside `.git`.
fn check_path(path: &str) -> Result<(), String> {
    let p = Path::new(path);
    if path.is_empty() {
        return Err("empty path".into());
    }
    for c in p.components() {
        match c {
            Component::Normal(n) if !n.eq_ignore_ascii_case(".git") => {}
            _ => {
                return Err(format!(
                    "unsafe path {path:?} (absolute, `..` or inside .git)"
                ));
            }
        }
    }
    Ok(())
}
