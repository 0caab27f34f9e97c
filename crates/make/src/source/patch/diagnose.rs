//! The first line a refused hunk does not match, found by replaying the patch.

use std::collections::HashMap;

use git2::{Delta, Diff, Repository, Tree};

use super::PatchError;
use super::apply::tree_entry;
use super::normalise::split_lines;
use super::parse::Parsed;

/// Replays the patch's hunks the way libgit2 does (each hunk at its new-side start line, exact
/// match) to find the first line that does not match.
pub(super) fn diagnose(repo: &Repository, tree: &Tree<'_>, p: &Parsed) -> Option<PatchError> {
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
