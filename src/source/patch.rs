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

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs;
use std::io::{self, Write as _};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt, symlink};
use std::path::{Component, Path, PathBuf};

use git2::{
    Delta, Diff, DiffFindOptions, DiffFormat, DiffOptions, ErrorCode, Index, IndexEntry, IndexTime,
    ObjectType, Odb, Oid, Repository, Signature, Time, Tree,
};

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
    /// What the user can do about it.
    pub fn hint(&self) -> String {
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
    Writer {
        dir,
        journal: Vec::new(),
    }
    .write_all(&changes)
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

/// For each commit in `base..HEAD` (first parent, oldest first), writes
/// `NNNN-<slug-of-subject>.patch` into `out_dir`: the full commit message, a `---` line, then the
/// diff with 3 lines of context. Stale `*.patch` files in `out_dir` are removed. Commits that
/// change nothing are skipped. Returns the file names in order.
pub fn export_series(repo: &Path, base: &str, out_dir: &Path) -> Result<Vec<String>, PatchError> {
    let repo_name = repo.display().to_string();
    let rerr = git_err(&repo_name);
    let repo = Repository::open(repo).map_err(&rerr)?;
    let base = repo
        .revparse_single(base)
        .and_then(|o| o.peel_to_commit())
        .map_err(&rerr)?;
    let mut commit = repo
        .head()
        .and_then(|h| h.peel_to_commit())
        .map_err(&rerr)?;
    let mut commits = Vec::new();
    while commit.id() != base.id() {
        let parent = commit.parent(0).map_err(|_| PatchError::Git {
            patch: repo_name.clone(),
            message: format!(
                "{} is not an ancestor of HEAD (following first parents)",
                base.id()
            ),
        })?;
        commits.push(commit);
        commit = parent;
    }
    commits.reverse();

    let mut files: Vec<(String, Vec<u8>)> = Vec::new();
    for c in &commits {
        let cerr = git_err(&repo_name);
        let message = String::from_utf8_lossy(c.message_bytes()).into_owned();
        let message = clean_message(&message);
        if let Some(bad) = message
            .lines()
            .find(|l| l.trim_end() == "---" || l.starts_with("diff --git "))
        {
            return Err(PatchError::Git {
                patch: repo_name.clone(),
                message: format!(
                    "the message of commit {} has a line {bad:?}, which would end the header of its patch; reword the commit",
                    c.id()
                ),
            });
        }
        let parent_tree = c.parent(0).and_then(|p| p.tree()).map_err(&cerr)?;
        let tree = c.tree().map_err(&cerr)?;
        let mut opts = DiffOptions::new();
        opts.context_lines(3).interhunk_lines(0).show_binary(true);
        let mut diff = repo
            .diff_tree_to_tree(Some(&parent_tree), Some(&tree), Some(&mut opts))
            .map_err(&cerr)?;
        diff.find_similar(Some(DiffFindOptions::new().renames(true)))
            .map_err(&cerr)?;
        if diff.deltas().len() == 0 {
            continue;
        }
        let mut text = message.trim_end().as_bytes().to_vec();
        text.extend_from_slice(b"\n---\n");
        diff.print(DiffFormat::Patch, |_, _, line| {
            if matches!(line.origin(), '+' | '-' | ' ') {
                text.push(line.origin() as u8);
            }
            text.extend_from_slice(line.content());
            true
        })
        .map_err(&cerr)?;
        let subject = message.lines().next().unwrap_or_default();
        let name = format!("{:04}-{}.patch", files.len() + 1, slug(subject));
        files.push((name, text));
    }

    fs::create_dir_all(out_dir).map_err(io_err(out_dir))?;
    for (name, text) in &files {
        let path = out_dir.join(name);
        let staged = crate::fsutil::Staged::name_beside(&path);
        let written = fs::write(staged.path(), text).and_then(|()| staged.commit());
        if let Err(e) = written {
            return Err(PatchError::Io { path, source: e });
        }
    }
    let keep: BTreeSet<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
    for entry in fs::read_dir(out_dir).map_err(io_err(out_dir))? {
        let entry = entry.map_err(io_err(out_dir))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let is_file = entry.file_type().map(|t| t.is_file()).unwrap_or(false);
        if is_file && name.ends_with(".patch") && !keep.contains(name.as_str()) {
            fs::remove_file(entry.path()).map_err(io_err(&entry.path()))?;
        }
    }
    Ok(files.into_iter().map(|(n, _)| n).collect())
}

// ---------------------------------------------------------------------------------------------
// Parsing

struct Parsed {
    name: String,
    message: String,
    /// The diff part, normalised to `git diff` form: what libgit2 parses.
    diff_text: Vec<u8>,
    /// Parsed from `diff_text`. libgit2 edits a parsed patch's lines while applying it, so this is
    /// applied at most once; diagnosis parses `diff_text` again.
    diff: Diff<'static>,
    deltas: Vec<DeltaInfo>,
    hunks: usize,
}

#[derive(Debug, Clone)]
struct DeltaInfo {
    status: Delta,
    old: Option<String>,
    new: Option<String>,
    /// The patch states the new mode (an `index` line with a mode, `new mode`, `new file mode`).
    mode_given: bool,
}

fn parse(p: &PatchFile) -> Result<Parsed, PatchError> {
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

fn split_lines(b: &[u8]) -> Vec<&[u8]> {
    b.split_inclusive(|&c| c == b'\n').collect()
}

fn is_plain_start(lines: &[&[u8]], i: usize) -> bool {
    lines[i].starts_with(b"--- ")
        && lines.get(i + 1).is_some_and(|l| l.starts_with(b"+++ "))
        && lines.get(i + 2).is_some_and(|l| l.starts_with(b"@@ -"))
}

fn find_start(lines: &[&[u8]]) -> Option<usize> {
    for i in 0..lines.len() {
        if lines[i].starts_with(b"diff --git ") {
            return Some(i);
        }
        if is_plain_start(lines, i) {
            // `diff -ru a/x b/x` before a plain diff belongs to it, not to the header.
            let cmd = i > 0 && lines[i - 1].starts_with(b"diff ");
            return Some(if cmd { i - 1 } else { i });
        }
    }
    None
}

/// Splits a patch into its header text and its diff, normalised for libgit2: plain `diff -u`
/// sections get a `diff --git` header, modes are made canonical, and a patch whose every line
/// was converted to CRLF (header lines included) is converted back.
fn split_patch(bytes: &[u8]) -> Result<(String, Vec<u8>), String> {
    let lines = split_lines(bytes);
    let Some(start) = find_start(&lines) else {
        return Err("no `diff --git` or `---`/`+++`/`@@` lines found".into());
    };
    if lines[start].ends_with(b"\r\n") {
        let converted: Vec<u8> = lines
            .iter()
            .flat_map(|l| {
                l.strip_suffix(b"\r\n")
                    .map_or_else(|| l.to_vec(), |s| [s, b"\n"].concat())
            })
            .collect();
        return normalise(&converted);
    }
    normalise(bytes)
}

fn normalise(bytes: &[u8]) -> Result<(String, Vec<u8>), String> {
    let lines = split_lines(bytes);
    let Some(start) = find_start(&lines) else {
        return Err("no `diff --git` or `---`/`+++`/`@@` lines found".into());
    };
    let header = String::from_utf8_lossy(&lines[..start].concat()).into_owned();

    #[derive(PartialEq)]
    enum Section {
        None,
        Git,
        Plain,
    }
    let mut out: Vec<u8> = Vec::with_capacity(bytes.len() + 256);
    let mut section = Section::None;
    let mut git_header_open = false;
    let (mut old_left, mut new_left) = (0usize, 0usize);
    let mut hunk_line = 0;
    let mut i = start;
    while i < lines.len() {
        let line = lines[i];
        let lineno = i + 1;
        if old_left > 0 || new_left > 0 {
            match line.first() {
                Some(b' ') | Some(b'\n') => {
                    if old_left == 0 || new_left == 0 {
                        return Err(hunk_short(hunk_line, lineno));
                    }
                    old_left -= 1;
                    new_left -= 1;
                }
                Some(b'-') if old_left > 0 => old_left -= 1,
                Some(b'+') if new_left > 0 => new_left -= 1,
                Some(b'\\') => {}
                _ => return Err(hunk_short(hunk_line, lineno)),
            }
            out.extend_from_slice(line);
            i += 1;
            continue;
        }
        if line.starts_with(b"diff --git ") {
            section = Section::Git;
            git_header_open = true;
            out.extend_from_slice(line);
        } else if !git_header_open && is_plain_start(&lines, i) {
            section = Section::Plain;
            let old = plain_path(&lines[i][4..]).map_err(|e| format!("line {lineno}: {e}"))?;
            let new =
                plain_path(&lines[i + 1][4..]).map_err(|e| format!("line {}: {e}", lineno + 1))?;
            let (old, new) = match (old, new) {
                (None, None) => return Err(format!("line {lineno}: both sides are /dev/null")),
                (Some(o), Some(n)) if o != n => (Some(n.clone()), Some(n)),
                other => other,
            };
            let a = old.as_deref().or(new.as_deref()).unwrap_or_default();
            let b = new.as_deref().or(old.as_deref()).unwrap_or_default();
            out.extend_from_slice(
                format!(
                    "diff --git {} {}\n",
                    quote(&format!("a/{a}")),
                    quote(&format!("b/{b}"))
                )
                .as_bytes(),
            );
            if old.is_none() {
                out.extend_from_slice(b"new file mode 100644\n");
            }
            if new.is_none() {
                out.extend_from_slice(b"deleted file mode 100644\n");
            }
            let side = |p: &Option<String>, prefix: &str| {
                p.as_ref()
                    .map_or("/dev/null".to_string(), |p| quote(&format!("{prefix}/{p}")))
            };
            out.extend_from_slice(
                format!("--- {}\n+++ {}\n", side(&old, "a"), side(&new, "b")).as_bytes(),
            );
            i += 2;
            continue;
        } else if line.starts_with(b"@@ -") {
            if section == Section::None {
                return Err(format!("line {lineno}: hunk outside a file section"));
            }
            let (o, n) =
                hunk_counts(line).ok_or_else(|| format!("line {lineno}: bad hunk header"))?;
            (old_left, new_left) = (o, n);
            hunk_line = lineno;
            git_header_open = false;
            out.extend_from_slice(line);
        } else if line.starts_with(b"\\") {
            out.extend_from_slice(line);
        } else if section == Section::Git {
            if git_header_open {
                out.extend_from_slice(
                    &canonical_mode_line(line).map_err(|e| format!("line {lineno}: {e}"))?,
                );
                if line.starts_with(b"GIT binary patch") || line.starts_with(b"Binary files ") {
                    git_header_open = false;
                }
            } else {
                out.extend_from_slice(line);
            }
        }
        i += 1;
    }
    if old_left > 0 || new_left > 0 {
        return Err(format!(
            "the hunk at line {hunk_line} is cut short by the end of the patch"
        ));
    }
    if !out.ends_with(b"\n") {
        out.push(b'\n');
    }
    Ok((header, out))
}

fn hunk_short(hunk_line: usize, lineno: usize) -> String {
    format!("line {lineno}: the hunk at line {hunk_line} has fewer lines than its header says")
}

/// `@@ -a[,b] +c[,d] @@` → (b, d).
fn hunk_counts(line: &[u8]) -> Option<(usize, usize)> {
    let s = std::str::from_utf8(line).ok()?;
    let rest = s.strip_prefix("@@ -")?;
    let end = rest.find(" @@")?;
    let mut parts = rest[..end].split(" +");
    let count = |r: &str| -> Option<usize> {
        match r.split_once(',') {
            Some((start, n)) => {
                start.parse::<usize>().ok()?;
                n.parse().ok()
            }
            None => {
                r.parse::<usize>().ok()?;
                Some(1)
            }
        }
    };
    let old = count(parts.next()?)?;
    let new = count(parts.next()?)?;
    parts.next().is_none().then_some((old, new))
}

/// The path of a `---`/`+++` line of a plain diff, strip level 1; `None` for /dev/null.
fn plain_path(rest: &[u8]) -> Result<Option<String>, String> {
    let rest = rest.strip_suffix(b"\n").unwrap_or(rest);
    let rest = rest.strip_suffix(b"\r").unwrap_or(rest);
    let raw = String::from_utf8(rest.to_vec()).map_err(|_| "path is not UTF-8".to_string())?;
    let path = if raw.starts_with('"') {
        unquote(&raw).ok_or_else(|| format!("bad quoted path {raw}"))?
    } else {
        raw.split('\t').next().unwrap_or_default().to_string()
    };
    if path == "/dev/null" {
        return Ok(None);
    }
    match path.trim_start_matches('/').split_once('/') {
        Some((_, p)) if !p.is_empty() => Ok(Some(p.to_string())),
        _ => Err(format!("cannot strip one leading directory from {path:?}")),
    }
}

fn needs_quote(s: &str) -> bool {
    s.bytes()
        .any(|b| b < 0x20 || b == b'"' || b == b'\\' || b == b' ' || b == 0x7f)
}

fn quote(s: &str) -> String {
    if !needs_quote(s) {
        return s.to_string();
    }
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\{:03o}", c as u32))
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn unquote(s: &str) -> Option<String> {
    let inner = s.strip_prefix('"')?;
    let end = inner.rfind('"')?;
    let inner = &inner.as_bytes()[..end];
    let mut out = Vec::new();
    let mut i = 0;
    while i < inner.len() {
        if inner[i] != b'\\' {
            out.push(inner[i]);
            i += 1;
            continue;
        }
        let c = *inner.get(i + 1)?;
        i += 2;
        out.push(match c {
            b'n' => b'\n',
            b't' => b'\t',
            b'a' => 7,
            b'b' => 8,
            b'f' => 12,
            b'r' => b'\r',
            b'v' => 11,
            b'0'..=b'7' => {
                let digits = inner.get(i - 1..i + 2)?;
                i += 1;
                u8::from_str_radix(std::str::from_utf8(digits).ok()?, 8).ok()?
            }
            other => other,
        });
    }
    String::from_utf8(out).ok()
}

/// Git header lines that carry a file mode, with the mode made one git knows (as git does:
/// any regular file is 100644 or 100755).
fn canonical_mode_line(line: &[u8]) -> Result<Vec<u8>, String> {
    const KEYS: [&str; 4] = [
        "old mode ",
        "new mode ",
        "new file mode ",
        "deleted file mode ",
    ];
    let Ok(text) = std::str::from_utf8(line) else {
        return Ok(line.to_vec());
    };
    let (prefix, mode, suffix) = if let Some(k) = KEYS.iter().find(|k| text.starts_with(*k)) {
        let rest = &text[k.len()..];
        let end = rest
            .find(|c: char| c.is_ascii_whitespace())
            .unwrap_or(rest.len());
        (k.to_string(), &rest[..end], &rest[end..])
    } else if let Some(rest) = text.strip_prefix("index ") {
        let body = rest.trim_end();
        match body.split_once(' ') {
            Some((ids, mode)) => (format!("index {ids} "), mode, &rest[body.len()..]),
            None => return Ok(line.to_vec()),
        }
    } else {
        return Ok(line.to_vec());
    };
    let m = u32::from_str_radix(mode, 8).map_err(|_| format!("bad file mode {mode:?}"))?;
    let canonical = match m & 0o170000 {
        0o100000 if m & 0o111 != 0 => 0o100755,
        0o100000 => 0o100644,
        0o120000 => 0o120000,
        0o160000 => 0o160000,
        0o040000 => 0o040000,
        _ => return Err(format!("unknown file mode {mode:?}")),
    };
    Ok(format!("{prefix}{canonical:06o}{suffix}").into_bytes())
}

/// The commit message a patch's header gives: the subject (from a mail `Subject:` line, without
/// `[PATCH …]`) and body of `git format-patch` output, or the free text before the diff, up to
/// the first `---` line. Falls back to "Apply <file stem>".
fn message_from_header(header: &str, name: &str) -> String {
    let lines: Vec<&str> = header.lines().collect();
    let first_para_end = lines
        .iter()
        .position(|l| l.trim().is_empty())
        .unwrap_or(lines.len());
    let is_mail = lines.first().is_some_and(|l| l.starts_with("From "))
        && lines[..first_para_end]
            .iter()
            .any(|l| l.starts_with("Subject:"));
    let mut out: Vec<String> = Vec::new();
    let body: &[&str] = if is_mail {
        let mut subject = String::new();
        let mut in_subject = false;
        for l in &lines[..first_para_end] {
            if let Some(s) = l.strip_prefix("Subject:") {
                subject = s.trim().to_string();
                in_subject = true;
            } else if in_subject && l.starts_with([' ', '\t']) {
                subject.push(' ');
                subject.push_str(l.trim());
            } else {
                in_subject = false;
            }
        }
        while subject.starts_with('[') {
            match subject.find(']') {
                Some(end) => subject = subject[end + 1..].trim_start().to_string(),
                None => break,
            }
        }
        out.push(subject);
        out.push(String::new());
        &lines[(first_para_end + 1).min(lines.len())..]
    } else {
        &lines
    };
    for l in body {
        if l.trim_end() == "---" {
            break;
        }
        out.push(l.to_string());
    }
    let message = clean_message(&out.join("\n"));
    if message.trim().is_empty() {
        let stem = Path::new(name)
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        format!("Apply {stem}\n")
    } else {
        message
    }
}

/// Trailing whitespace off every line, blank lines off both ends, runs of blank lines collapsed,
/// one newline at the end (what `git commit` does to a message).
fn clean_message(message: &str) -> String {
    let mut out = String::new();
    let mut blank = false;
    for l in message.lines().map(str::trim_end) {
        if l.is_empty() {
            blank = !out.is_empty();
            continue;
        }
        if blank {
            out.push('\n');
            blank = false;
        }
        out.push_str(l);
        out.push('\n');
    }
    out
}

/// `Fix the GFX10 build!` → `fix-the-gfx10-build`, at most 52 characters, cut between words.
fn slug(subject: &str) -> String {
    let words: Vec<String> = subject
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_ascii_lowercase)
        .collect();
    let mut s = String::new();
    for w in words {
        let extra = w.len() + usize::from(!s.is_empty());
        if s.len() + extra > 52 {
            if s.is_empty() {
                s = w[..52].to_string();
            }
            break;
        }
        if !s.is_empty() {
            s.push('-');
        }
        s.push_str(&w);
    }
    if s.is_empty() { "patch".to_string() } else { s }
}

// ---------------------------------------------------------------------------------------------
// Applying

/// A repository whose objects live in memory only.
fn memory_repo() -> Result<Repository, git2::Error> {
    let odb = Odb::new()?;
    odb.add_new_mempack_backend(1000)?;
    Repository::from_odb(odb)
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct FileState {
    data: Vec<u8>,
    /// Git mode: 0o100644, 0o100755 or 0o120000.
    mode: u32,
    /// Permission bits on disk (regular files).
    perm: u32,
}

const MODE_FILE: u32 = 0o100644;
const MODE_EXEC: u32 = 0o100755;
const MODE_LINK: u32 = 0o120000;

/// The file at `rel` under `dir`, if there is one; refuses paths through symbolic links.
fn read_state(dir: &Path, rel: &str, patch: &str) -> Result<Option<FileState>, PatchError> {
    let mut cur = dir.to_path_buf();
    let parts: Vec<&str> = rel.split('/').collect();
    for (k, part) in parts.iter().enumerate() {
        cur.push(part);
        let meta = match fs::symlink_metadata(&cur) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) if e.kind() == io::ErrorKind::NotADirectory => return Ok(None),
            Err(e) => {
                return Err(PatchError::Io {
                    path: cur,
                    source: e,
                });
            }
        };
        let last = k + 1 == parts.len();
        if meta.file_type().is_symlink() {
            if !last {
                return Err(PatchError::BeyondSymlink {
                    patch: patch.to_string(),
                    file: rel.to_string(),
                });
            }
            let target = fs::read_link(&cur).map_err(io_err(&cur))?;
            return Ok(Some(FileState {
                data: target.as_os_str().as_bytes().to_vec(),
                mode: MODE_LINK,
                perm: 0,
            }));
        }
        if !last && !meta.is_dir() {
            return Ok(None);
        }
        if last {
            if !meta.is_file() {
                return Ok(None);
            }
            let data = fs::read(&cur).map_err(io_err(&cur))?;
            let perm = meta.permissions().mode() & 0o7777;
            let mode = if perm & 0o100 != 0 {
                MODE_EXEC
            } else {
                MODE_FILE
            };
            return Ok(Some(FileState { data, mode, perm }));
        }
    }
    Ok(None)
}

fn build_tree(repo: &Repository, files: &BTreeMap<String, FileState>) -> Result<Oid, git2::Error> {
    let mut index = Index::new()?;
    for (path, st) in files {
        let id = repo.blob(&st.data)?;
        index.add(&IndexEntry {
            ctime: IndexTime::new(0, 0),
            mtime: IndexTime::new(0, 0),
            dev: 0,
            ino: 0,
            mode: st.mode,
            uid: 0,
            gid: 0,
            file_size: st.data.len() as u32,
            id,
            flags: 0,
            flags_extended: 0,
            path: path.as_bytes().to_vec(),
        })?;
    }
    index.write_tree_to(repo)
}

/// A blob at `path` in `tree`: its content and mode.
fn tree_entry(
    repo: &Repository,
    tree: &Tree<'_>,
    path: &str,
) -> Result<Option<(Vec<u8>, u32)>, git2::Error> {
    match tree.get_path(Path::new(path)) {
        Ok(entry) if entry.kind() == Some(ObjectType::Blob) => {
            let blob = repo.find_blob(entry.id())?;
            Ok(Some((blob.content().to_vec(), entry.filemode() as u32)))
        }
        Ok(_) => Ok(None),
        Err(e) if e.code() == ErrorCode::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

fn exists(tree: &Tree<'_>, path: &str) -> bool {
    tree.get_path(Path::new(path)).is_ok()
}

/// Applies one parsed patch to `tree`, returning the new tree's id.
fn apply_one(repo: &Repository, tree: &Tree<'_>, p: &Parsed) -> Result<Oid, PatchError> {
    let perr = git_err(&p.name);
    // libgit2 overwrites a file a "new file" patch creates and reports a missing one as a bare
    // "apply failed": check both here, in delta order, as git does.
    let mut removed: BTreeSet<&str> = BTreeSet::new();
    let mut added: BTreeSet<&str> = BTreeSet::new();
    let present = |path: &str, removed: &BTreeSet<&str>, added: &BTreeSet<&str>| {
        added.contains(path) || (exists(tree, path) && !removed.contains(path))
    };
    for d in &p.deltas {
        if let Some(old) = d.old.as_deref() {
            if !present(old, &removed, &added) {
                return Err(PatchError::MissingFile {
                    patch: p.name.clone(),
                    file: old.to_string(),
                });
            }
            if matches!(d.status, Delta::Deleted | Delta::Renamed) {
                removed.insert(old);
                added.remove(old);
            }
        }
        if let Some(new) = d.new.as_deref()
            && matches!(d.status, Delta::Added | Delta::Renamed | Delta::Copied)
        {
            if present(new, &removed, &added) {
                return Err(PatchError::AlreadyExists {
                    patch: p.name.clone(),
                    file: new.to_string(),
                });
            }
            added.insert(new);
            removed.remove(new);
        }
    }

    let mut index = match repo.apply_to_tree(tree, &p.diff, None) {
        Ok(index) => index,
        Err(e) => {
            return Err(diagnose(repo, tree, p).unwrap_or_else(|| PatchError::Git {
                patch: p.name.clone(),
                message: format!("libgit2 could not apply the patch: {}", e.message()),
            }));
        }
    };
    // A patch that does not state the new mode (plain diffs, pure renames) keeps the old one;
    // libgit2 would make it 100644.
    for d in &p.deltas {
        if d.mode_given || d.status == Delta::Deleted {
            continue;
        }
        let (Some(old), Some(new)) = (d.old.as_deref(), d.new.as_deref()) else {
            continue;
        };
        let Ok(before) = tree.get_path(Path::new(old)) else {
            continue;
        };
        if let Some(mut entry) = index.get_path(Path::new(new), 0) {
            let mode = before.filemode() as u32;
            if entry.mode != mode {
                entry.mode = mode;
                index.add(&entry).map_err(&perr)?;
            }
        }
    }
    index.write_tree_to(repo).map_err(&perr)
}

/// Replays the patch's hunks the way libgit2 does (each hunk at its new-side start line, exact
/// match) to find the first line that does not match.
fn diagnose(repo: &Repository, tree: &Tree<'_>, p: &Parsed) -> Option<PatchError> {
    let diff = Diff::from_buffer(&p.diff_text).ok()?;
    let mut files: HashMap<String, Vec<u8>> = HashMap::new();
    for (i, d) in p.deltas.iter().enumerate() {
        let patch = git2::Patch::from_diff(&diff, i).ok()??;
        if patch.delta().flags().is_binary() {
            continue;
        }
        let content = match (d.status, d.old.as_deref()) {
            (Delta::Added, _) | (_, None) => Vec::new(),
            (status, Some(old)) => match files.get(old).filter(|_| status != Delta::Renamed) {
                Some(c) => c.clone(),
                None => tree_entry(repo, tree, old).ok()??.0,
            },
        };
        let file = d.old.clone().or_else(|| d.new.clone()).unwrap_or_default();
        let mut image: Vec<Vec<u8>> = split_lines(&content)
            .into_iter()
            .map(<[u8]>::to_vec)
            .collect();
        let mut shift: isize = 0;
        for h in 0..patch.num_hunks() {
            let (hunk, count) = patch.hunk(h).ok()?;
            let header = hunk_header(hunk.header());
            let mut lines: Vec<(char, Vec<u8>)> = Vec::new();
            for l in 0..count {
                let line = patch.line_in_hunk(h, l).ok()?;
                match line.origin() {
                    '=' | '>' | '<' => {
                        if let Some((_, last)) = lines.last_mut()
                            && last.ends_with(b"\n")
                        {
                            last.pop();
                        }
                    }
                    o => lines.push((o, line.content().to_vec())),
                }
            }
            let pre: Vec<&Vec<u8>> = lines
                .iter()
                .filter(|(o, _)| matches!(o, ' ' | '-'))
                .map(|(_, l)| l)
                .collect();
            let post: Vec<Vec<u8>> = lines
                .iter()
                .filter(|(o, _)| matches!(o, ' ' | '+'))
                .map(|(_, l)| l.clone())
                .collect();
            let pos = (hunk.new_start() as usize)
                .saturating_sub(1)
                .min(image.len());
            for (k, want) in pre.iter().enumerate() {
                let have = image.get(pos + k);
                if have != Some(*want) {
                    let line = ((pos + k) as isize - shift + 1).max(1) as usize;
                    return Some(PatchError::Conflict {
                        patch: p.name.clone(),
                        file,
                        hunk: header,
                        line,
                        expected: show_line(want),
                        found: have.map(|h| show_line(h)),
                    });
                }
            }
            shift += post.len() as isize - pre.len() as isize;
            image.splice(pos..pos + pre.len(), post);
        }
        if let Some(new) = d.new.clone() {
            files.insert(new, image.concat());
        }
    }
    None
}

/// `@@ -a,b +c,d @@ fn context` → `@@ -a,b +c,d @@`.
fn hunk_header(raw: &[u8]) -> String {
    let s = String::from_utf8_lossy(raw);
    match s.get(2..).and_then(|rest| rest.find("@@")) {
        Some(end) => s[..end + 4].to_string(),
        None => s.trim_end().to_string(),
    }
}

fn show_line(line: &[u8]) -> String {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    String::from_utf8_lossy(line).into_owned()
}

// ---------------------------------------------------------------------------------------------
// Writing back

struct Change {
    path: String,
    before: Option<FileState>,
    after: Option<(Vec<u8>, u32)>,
}

enum Undo {
    File {
        path: PathBuf,
        before: Option<FileState>,
    },
    CreatedDir(PathBuf),
    RemovedDir(PathBuf),
}

/// Applying a series changes many files in place, so it cannot be one rename of a staged copy
/// (the tree can be gigabytes); each file is still written through [`crate::fsutil::Staged`]
/// ([`put`]), and this undo log puts back what was changed when a later file fails.
struct Writer<'a> {
    dir: &'a Path,
    journal: Vec<Undo>,
}

impl Writer<'_> {
    fn write_all(mut self, changes: &[Change]) -> Result<(), PatchError> {
        let result = self.write_inner(changes);
        if result.is_err() {
            self.roll_back();
        }
        result
    }

    fn write_inner(&mut self, changes: &[Change]) -> Result<(), PatchError> {
        // Removals first, so that a file can replace a directory that the series empties.
        for c in changes.iter().filter(|c| c.after.is_none()) {
            let path = self.dir.join(&c.path);
            fs::remove_file(&path).map_err(io_err(&path))?;
            self.journal.push(Undo::File {
                path: path.clone(),
                before: c.before.clone(),
            });
            let mut parent = path.parent();
            while let Some(p) = parent {
                if p == self.dir || !p.starts_with(self.dir) || fs::remove_dir(p).is_err() {
                    break;
                }
                self.journal.push(Undo::RemovedDir(p.to_path_buf()));
                parent = p.parent();
            }
        }
        for c in changes {
            let Some((data, mode)) = &c.after else {
                continue;
            };
            let path = self.dir.join(&c.path);
            self.make_parents(&path)?;
            let perm = match &c.before {
                Some(b) if b.mode != MODE_LINK => {
                    Some(match (b.perm & 0o111 != 0, *mode == MODE_EXEC) {
                        (false, true) => b.perm | ((b.perm & 0o444) >> 2),
                        (true, false) => b.perm & !0o111,
                        _ => b.perm,
                    })
                }
                _ => None,
            };
            put(&path, data, *mode, perm)?;
            self.journal.push(Undo::File {
                path,
                before: c.before.clone(),
            });
        }
        Ok(())
    }

    fn make_parents(&mut self, path: &Path) -> Result<(), PatchError> {
        let mut missing = Vec::new();
        let mut cur = path.parent();
        while let Some(p) = cur {
            if p == self.dir || fs::symlink_metadata(p).is_ok() {
                break;
            }
            missing.push(p.to_path_buf());
            cur = p.parent();
        }
        for p in missing.into_iter().rev() {
            fs::create_dir(&p).map_err(io_err(&p))?;
            self.journal.push(Undo::CreatedDir(p));
        }
        Ok(())
    }

    /// Best effort: puts back every file and directory changed so far, newest first.
    fn roll_back(&mut self) {
        while let Some(undo) = self.journal.pop() {
            match undo {
                Undo::File {
                    path,
                    before: Some(b),
                } => {
                    let perm = (b.mode != MODE_LINK).then_some(b.perm);
                    let _ = put(&path, &b.data, b.mode, perm);
                }
                Undo::File { path, before: None } => {
                    let _ = fs::remove_file(&path);
                }
                Undo::CreatedDir(p) => {
                    let _ = fs::remove_dir(&p);
                }
                Undo::RemovedDir(p) => {
                    let _ = fs::create_dir(&p);
                }
            }
        }
    }
}

/// Writes a file (through a temporary name and a rename) or a symbolic link at `path`.
/// `perm` is the permission to give an existing file; new files get 0666/0777 less the umask.
fn put(path: &Path, data: &[u8], mode: u32, perm: Option<u32>) -> Result<(), PatchError> {
    let staged = crate::fsutil::Staged::name_beside(path);
    let tmp = staged.path();
    let result = (|| -> io::Result<()> {
        if mode == MODE_LINK {
            symlink(std::ffi::OsStr::from_bytes(data), tmp)?;
        } else {
            let create_mode = if mode == MODE_EXEC { 0o777 } else { 0o666 };
            let mut f = fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(create_mode)
                .open(tmp)?;
            f.write_all(data)?;
            f.sync_data()?;
            drop(f);
            if let Some(perm) = perm {
                fs::set_permissions(tmp, fs::Permissions::from_mode(perm))?;
            }
        }
        Ok(())
    })()
    .and_then(|()| staged.commit());
    result.map(drop).map_err(|e| PatchError::Io {
        path: path.to_path_buf(),
        source: e,
    })
}
