//! `rocforge patch export`: a dev repository's commits written back as a patch series.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

use git2::{DiffFindOptions, DiffFormat, DiffOptions, Repository};

use super::message::clean_message;
use super::{PatchError, git_err, io_err};

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
