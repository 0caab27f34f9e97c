//! Patch series with `git apply` semantics: exact context, no offset search, no fuzz, strip
//! level 1, all or nothing.
//!
//! Patches are unified diffs as `git format-patch` / `git diff` write them (including new,
//! deleted and renamed files and mode changes) or plain `diff -u` output. libgit2 parses and
//! applies them to trees held in memory; the results are written back to the directory only when
//! the whole series applied, and the write-back itself is rolled back if it fails half-way. When
//! libgit2 refuses a hunk, the hunk is replayed here against the file to name the first line that
//! does not match, which is what a patch author needs to refresh it.

// `PatchError::Conflict` carries the five strings a patch author reads; errors are cold, and
// boxing them would only make matching on them clumsier.
#![allow(clippy::result_large_err)]

mod apply;
mod diagnose;
mod export;
mod message;
mod normalise;
mod parse;
mod write_back;

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use git2::{Delta, Repository, Signature, Time};

use apply::{FileState, apply_one, build_tree, memory_repo, read_state, tree_entry};
pub use export::export_series;
use parse::parse;
use write_back::{Change, Writer};

/// One patch of a series: its text and the name it is shown under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PatchFile {
    /// Shown in messages, e.g. `patches/rocm-6.4.4/rocblas/0001-x.patch`.
    pub name: String,
    pub bytes: Vec<u8>,
}

impl PatchFile {
    pub fn new(name: impl Into<String>, bytes: impl Into<Vec<u8>>) -> Self {
        Self {
            name: name.into(),
            bytes: bytes.into(),
        }
    }

    /// Reads a patch file; its name is the path as given.
    pub fn read(path: &Path) -> Result<Self, PatchError> {
        let bytes = fs::read(path).map_err(io_err(path))?;
        Ok(Self {
            name: path.display().to_string(),
            bytes,
        })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PatchError {
    #[error("{}", conflict_message(.patch, .file, .hunk, *.line, .expected, .found.as_deref()))]
    Conflict {
        patch: String,
        file: String,
        /// The `@@ -a,b +c,d @@` header of the hunk that does not apply.
        hunk: String,
        /// 1-based line in the file (as it is before this patch) where the mismatch is.
        line: usize,
        /// The patch's line, without its line terminator.
        expected: String,
        /// The file's line, without its line terminator; `None` past the end of the file.
        found: Option<String>,
    },
    #[error("{patch}: cannot patch `{file}`: it does not exist in the source tree")]
    MissingFile { patch: String, file: String },
    #[error("{patch}: cannot create `{file}`: it already exists in the source tree")]
    AlreadyExists { patch: String, file: String },
    #[error("{patch}: cannot patch `{file}`: it is beyond a symbolic link")]
    BeyondSymlink { patch: String, file: String },
    #[error("{patch} is not a valid patch: {reason}")]
    Malformed { patch: String, reason: String },
    #[error("{patch}: {message}")]
    Git { patch: String, message: String },
    #[error("{}: {source}", .path.display())]
    Io { path: PathBuf, source: io::Error },
}

fn conflict_message(
    patch: &str,
    file: &str,
    hunk: &str,
    line: usize,
    expected: &str,
    found: Option<&str>,
) -> String {
    let mut msg = format!("{patch}: hunk `{hunk}` does not apply to `{file}`: ");
    match found {
        Some(found) => {
            msg += &format!("line {line} is {found:?}, but the patch expects {expected:?}");
            if found == expected {
                msg += " (they differ in the line ending or the newline at the end of the file)";
            }
        }
        None => {
            msg += &format!(
                "the file ends after line {}, but the patch expects line {line} to be {expected:?}",
                line.saturating_sub(1)
            )
        }
    }
    msg
}

impl PatchError {
    /// The patch the error is about, if any.
    pub fn patch(&self) -> Option<&str> {
        match self {
            PatchError::Conflict { patch, .. }
            | PatchError::MissingFile { patch, .. }
            | PatchError::AlreadyExists { patch, .. }
            | PatchError::BeyondSymlink { patch, .. }
            | PatchError::Malformed { patch, .. }
            | PatchError::Git { patch, .. } => Some(patch),
            PatchError::Io { .. } => None,
        }
    }
}

impl crate::diag::Hint for PatchError {
    /// What the user can do about it.
    fn hint(&self) -> String {
        match self {
            PatchError::Conflict { patch, .. } | PatchError::MissingFile { patch, .. } => {
                let c = component_of(patch);
                format!(
                    "the patch does not match this source revision: refresh it with `rocforge dev {c}` then `rocforge patch export {c}`"
                )
            }
            PatchError::AlreadyExists { patch, .. } => {
                let c = component_of(patch);
                format!(
                    "the source revision already has this file (or an earlier patch creates it): refresh the series with `rocforge dev {c}` then `rocforge patch export {c}`"
                )
            }
            PatchError::BeyondSymlink { .. } => {
                "patches may not change files through a symbolic link; patch the link's target path instead".to_string()
            }
            PatchError::Malformed { .. } => "a patch must be a unified diff as `git format-patch`, `git diff` or `diff -u` write it, with paths one directory deep (a/src/x.c, b/src/x.c)".to_string(),
            PatchError::Git { .. } => "libgit2 refused the operation; check that the repository is not in the middle of another operation and that its working tree is clean".to_string(),
            PatchError::Io { .. } => "check that the path exists and is writable".to_string(),
        }
    }
}

/// `patches/<release>/<component>/NNNN-x.patch` → `<component>`.
fn component_of(patch: &str) -> String {
    Path::new(patch)
        .parent()
        .and_then(Path::file_name)
        .map(|c| c.to_string_lossy().into_owned())
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| "<component>".to_string())
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> PatchError + '_ {
    move |source| PatchError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn git_err(patch: &str) -> impl Fn(git2::Error) -> PatchError + '_ {
    move |e| PatchError::Git {
        patch: patch.to_string(),
        message: e.message().to_string(),
    }
}

/// What a patch touches, for `rocforge check`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PatchSummary {
    /// First line of the commit message the patch's header gives.
    pub subject: String,
    pub files: Vec<FileChange>,
    pub hunks: usize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileChange {
    pub kind: ChangeKind,
    /// The file after the change (before it, for a deletion).
    pub path: String,
    /// The source of a rename or copy.
    pub old_path: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    Added,
    Deleted,
    Modified,
    Renamed,
    Copied,
}

/// Parse check without applying: the patch is a unified diff touching at least one file.
pub fn validate(patch: &PatchFile) -> Result<PatchSummary, PatchError> {
    let parsed = parse(patch)?;
    let files = parsed
        .deltas
        .iter()
        .map(|d| {
            let kind = match d.status {
                Delta::Added => ChangeKind::Added,
                Delta::Deleted => ChangeKind::Deleted,
                Delta::Renamed => ChangeKind::Renamed,
                Delta::Copied => ChangeKind::Copied,
                _ => ChangeKind::Modified,
            };
            let path = d.new.clone().or_else(|| d.old.clone()).unwrap_or_default();
            let old_path = matches!(kind, ChangeKind::Renamed | ChangeKind::Copied)
                .then(|| d.old.clone())
                .flatten();
            FileChange {
                kind,
                path,
                old_path,
            }
        })
        .collect();
    let subject = parsed
        .message
        .lines()
        .next()
        .unwrap_or_default()
        .to_string();
    Ok(PatchSummary {
        subject,
        files,
        hunks: parsed.hunks,
    })
}

/// Applies the series in order to the directory tree `dir` (any directory, not necessarily a git
/// repository). Exact context, no fuzz, strip level 1. On any failure `dir` is left as it was.
pub fn apply_series(dir: &Path, patches: &[PatchFile]) -> Result<(), PatchError> {
    let parsed = patches.iter().map(parse).collect::<Result<Vec<_>, _>>()?;
    if parsed.is_empty() {
        return Ok(());
    }
    let repo = memory_repo().map_err(git_err(&parsed[0].name))?;

    // Only the files the series touches are loaded; the rest of the tree cannot matter.
    let mut touched: BTreeMap<String, &str> = BTreeMap::new();
    for p in &parsed {
        for d in &p.deltas {
            for path in d.old.iter().chain(d.new.iter()) {
                touched.entry(path.clone()).or_insert(&p.name);
            }
        }
    }
    let mut before: BTreeMap<String, FileState> = BTreeMap::new();
    for (path, patch) in &touched {
        if let Some(state) = read_state(dir, path, patch)? {
            before.insert(path.clone(), state);
        }
    }

    let mut tree_id = build_tree(&repo, &before).map_err(git_err(&parsed[0].name))?;
    for p in &parsed {
        let tree = repo.find_tree(tree_id).map_err(git_err(&p.name))?;
        tree_id = apply_one(&repo, &tree, p)?;
    }
    let tree = repo.find_tree(tree_id).map_err(git_err(&parsed[0].name))?;

    let mut changes = Vec::new();
    for path in touched.keys() {
        let after = tree_entry(&repo, &tree, path).map_err(git_err(&parsed[0].name))?;
        let old = before.get(path);
        let same = match (old, &after) {
            (None, None) => true,
            (Some(o), Some((data, mode))) => &o.data == data && o.mode == *mode,
            _ => false,
        };
        if !same {
            changes.push(Change {
                path: path.clone(),
                before: old.cloned(),
                after,
            });
        }
    }
    Writer::new(dir).write_all(&changes)
}

/// In the git repository at `repo`, whose HEAD is the pristine source, applies each patch and
/// commits it (one commit per patch, author and committer `rocforge <rocforge@localhost>` at the
/// time of HEAD's commit, so that commit ids are reproducible). All patches are applied before
/// anything changes; then HEAD (or the branch it points at), the index and the working tree move
/// to the last commit. Returns the commit ids, in order.
pub fn commit_series(repo: &Path, patches: &[PatchFile]) -> Result<Vec<String>, PatchError> {
    let repo_name = repo.display().to_string();
    let rerr = git_err(&repo_name);
    let parsed = patches.iter().map(parse).collect::<Result<Vec<_>, _>>()?;
    let repo = Repository::open(repo).map_err(&rerr)?;
    let head = repo
        .head()
        .and_then(|h| h.peel_to_commit())
        .map_err(&rerr)?;
    let when = Time::new(head.committer().when().seconds(), 0);
    let sig = Signature::new("rocforge", "rocforge@localhost", &when).map_err(&rerr)?;

    let mut parent = head.clone();
    let mut ids = Vec::new();
    for p in &parsed {
        let perr = git_err(&p.name);
        let tree = parent.tree().map_err(&perr)?;
        let new_tree = repo.find_tree(apply_one(&repo, &tree, p)?).map_err(&perr)?;
        let id = repo
            .commit(None, &sig, &sig, &p.message, &new_tree, &[&parent])
            .map_err(&perr)?;
        parent = repo.find_commit(id).map_err(&perr)?;
        ids.push(id.to_string());
    }
    if ids.is_empty() {
        return Ok(ids);
    }

    // Working tree first (a safe checkout changes nothing if local edits are in the way), then
    // the reference.
    let mut checkout = git2::build::CheckoutBuilder::new();
    checkout.safe();
    repo.checkout_tree(parent.as_object(), Some(&mut checkout))
        .map_err(&rerr)?;
    let head_ref = repo.find_reference("HEAD").map_err(&rerr)?;
    match head_ref.symbolic_target().map_err(&rerr)? {
        Some(branch) => {
            repo.reference(branch, parent.id(), true, "rocforge: apply patch series")
                .map_err(&rerr)?;
        }
        None => repo.set_head_detached(parent.id()).map_err(&rerr)?,
    }
    Ok(ids)
}
