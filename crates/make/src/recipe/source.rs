//! `[source]`: where a component's source comes from (git, a pinned tarball, a local path).

use std::ops::Range;
use std::sync::Arc;

use serde::Serialize;

use crate::diag::reader::{Sp, TableReader};
use crate::diag::{Diagnostic, Diagnostics, SourceFile};

use super::checks::{check_url, hex_problem, is_hex, path_problem};

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum Source {
    Git {
        url: String,
        #[serde(flatten)]
        reference: GitRef,
        #[serde(skip_serializing_if = "Option::is_none")]
        subdir: Option<String>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        paths: Vec<String>,
        /// Files or directories of the repository left out of the checkout (never fetched): a
        /// snapshot that lacks their blobs, or data the build does not use.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        exclude: Vec<String>,
        submodules: bool,
    },
    Url {
        url: String,
        sha256: String,
    },
    Path {
        path: String,
    },
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum GitRef {
    Tag(String),
    Rev(String),
}

/// The keys of a `[source]` table as written, before they are checked against each other.
struct Keys {
    git: Option<Sp<String>>,
    tag: Option<Sp<String>>,
    rev: Option<Sp<String>>,
    subdir: Option<Sp<String>>,
    paths: Vec<Sp<String>>,
    exclude: Vec<Sp<String>>,
    submodules: Option<Sp<bool>>,
    url: Option<Sp<String>>,
    sha256: Option<Sp<String>>,
    path: Option<Sp<String>>,
}

impl Keys {
    fn read(t: &mut TableReader<'_, '_>, d: &mut Diagnostics) -> Self {
        Self {
            git: t.opt_str("git", d),
            tag: t.opt_str("tag", d),
            rev: t.opt_str("rev", d),
            subdir: t.opt_str("subdir", d),
            paths: t.opt_str_list("paths", d).unwrap_or_default(),
            exclude: t.opt_str_list("exclude", d).unwrap_or_default(),
            submodules: t.opt_bool("submodules", d),
            url: t.opt_str("url", d),
            sha256: t.opt_str("sha256", d),
            path: t.opt_str("path", d),
        }
    }
}

pub(super) fn read_source(mut t: TableReader<'_, '_>, d: &mut Diagnostics) -> Option<Source> {
    let file = t.file().clone();
    let before = d.len();
    let mut keys = Keys::read(&mut t, d);
    let table_span = t.span();
    let meant = t.finish(d);

    if !one_kind(&file, &keys, table_span, before, d) {
        return None;
    }
    if let Some(git) = keys.git.take() {
        return git_source(&file, git, keys, &meant, before, d);
    }
    refuse_git_keys(&file, &keys, d);
    if let Some(url) = keys.url.take() {
        return url_source(&file, url, keys.sha256, &meant, before, d);
    }
    let path = keys.path.expect("one kind is present");
    path_source(&file, path, keys.sha256, before, d)
}

/// Exactly one of git, url and path.
fn one_kind(
    file: &Arc<SourceFile>,
    keys: &Keys,
    table_span: Range<usize>,
    before: usize,
    d: &mut Diagnostics,
) -> bool {
    let kinds: Vec<&Sp<String>> = [&keys.git, &keys.url, &keys.path]
        .into_iter()
        .flatten()
        .collect();
    if kinds.is_empty() {
        if d.len() == before {
            d.push(
                Diagnostic::new("[source] has neither git, url nor path")
                    .at(file, table_span, "no source kind")
                    .hint("use git = \"https://…\" with tag or rev, url = \"https://…\" with sha256, or path = \"dir\""),
            );
        }
        return false;
    }
    if kinds.len() > 1 {
        d.push(
            Diagnostic::new("[source] names more than one kind of source")
                .at(file, kinds[1].span.clone(), "second source kind")
                .related(file, kinds[0].span.clone(), "first source kind")
                .hint("keep exactly one of git, url and path"),
        );
        return false;
    }
    true
}

/// A key of another kind of source, which this kind would ignore.
fn stray(
    d: &mut Diagnostics,
    file: &Arc<SourceFile>,
    field: &Option<Sp<String>>,
    key: &str,
    kind: &str,
) {
    if let Some(f) = field {
        d.push(
            Diagnostic::new(format!("\"{key}\" does not apply to a {kind} source"))
                .at(file, f.span.clone(), format!("not used by {kind} sources"))
                .hint(format!("remove \"{key}\"")),
        );
    }
}

fn git_source(
    file: &Arc<SourceFile>,
    git: Sp<String>,
    keys: Keys,
    meant: &[&str],
    before: usize,
    d: &mut Diagnostics,
) -> Option<Source> {
    stray(d, file, &keys.sha256, "sha256", "git");
    check_url(file, &git, d);
    let reference = git_ref(file, &git, keys.tag, keys.rev, meant, d);
    let inner = keys.subdir.iter().chain(&keys.paths).chain(&keys.exclude);
    for p in inner {
        if let Some(problem) = path_problem(p) {
            d.push(
                Diagnostic::new(format!(
                    "source path \"{}\" must be relative and stay inside the repository",
                    p.value
                ))
                .at(file, p.span.clone(), problem)
                .hint("write a path inside the repository, e.g. \"projects/rocblas\""),
            );
        }
    }
    if d.len() > before {
        return None;
    }
    Some(Source::Git {
        url: git.value,
        reference: reference?,
        subdir: keys.subdir.map(|s| s.value),
        paths: keys.paths.into_iter().map(|p| p.value).collect(),
        exclude: keys.exclude.into_iter().map(|p| p.value).collect(),
        submodules: keys.submodules.is_some_and(|s| s.value),
    })
}

/// The commit of a git source: a tag or a full rev, exactly one.
fn git_ref(
    file: &Arc<SourceFile>,
    git: &Sp<String>,
    tag: Option<Sp<String>>,
    rev: Option<Sp<String>>,
    meant: &[&str],
    d: &mut Diagnostics,
) -> Option<GitRef> {
    match (tag, rev) {
        (Some(tag), None) => Some(GitRef::Tag(tag.value)),
        (None, Some(rev)) => full_rev(file, rev, d),
        (Some(tag), Some(rev)) => {
            d.push(
                Diagnostic::new("[source] gives both tag and rev")
                    .at(file, rev.span.clone(), "rev given here")
                    .related(file, tag.span.clone(), "tag given here")
                    .hint("keep one: the tag (its commit is pinned in rocforge.lock) or the rev"),
            );
            None
        }
        // A misspelt tag or rev was reported with a suggestion; saying it is missing is noise.
        (None, None) if meant.contains(&"tag") || meant.contains(&"rev") => None,
        (None, None) => {
            d.push(
                Diagnostic::new("git source has neither tag nor rev")
                    .at(file, git.span.clone(), "which commit of this repository?")
                    .hint("add tag = \"rocm-6.4.4\" or rev = \"<40 hex digits>\""),
            );
            None
        }
    }
}

fn full_rev(file: &Arc<SourceFile>, rev: Sp<String>, d: &mut Diagnostics) -> Option<GitRef> {
    if is_hex(&rev, 40) {
        return Some(GitRef::Rev(rev.value));
    }
    let label = if rev.len() < 40 && rev.chars().all(|c| c.is_ascii_hexdigit()) {
        "abbreviated; expected the full 40-hex-digit commit ID".to_string()
    } else {
        hex_problem(&rev, 40)
    };
    d.push(
        Diagnostic::new(format!("malformed rev \"{}\"", rev.value))
            .at(file, rev.span.clone(), label)
            .hint("write the full commit, e.g. `git rev-parse rocm-6.4.4^{commit}`; use tag = \"…\" for a tag"),
    );
    None
}

/// The keys only a git source takes, given to a url or path source.
fn refuse_git_keys(file: &Arc<SourceFile>, keys: &Keys, d: &mut Diagnostics) {
    if let Some(first) = keys.exclude.first() {
        d.push(
            Diagnostic::new("\"exclude\" applies to git sources only")
                .at(file, first.span.clone(), "not a git source")
                .hint("remove \"exclude\"; a tarball is taken whole"),
        );
    }
    let kind = if keys.url.is_some() { "url" } else { "path" };
    stray(d, file, &keys.tag, "tag", kind);
    stray(d, file, &keys.rev, "rev", kind);
}

fn url_source(
    file: &Arc<SourceFile>,
    url: Sp<String>,
    sha256: Option<Sp<String>>,
    meant: &[&str],
    before: usize,
    d: &mut Diagnostics,
) -> Option<Source> {
    check_url(file, &url, d);
    let Some(sha) = sha256 else {
        if meant.contains(&"sha256") {
            return None; // a misspelt sha256 key, already reported
        }
        d.push(
            Diagnostic::new("url source has no sha256")
                .at(file, url.span.clone(), "unverified download")
                .hint("add sha256 = \"<64 hex digits>\" (`sha256sum FILE` prints it)"),
        );
        return None;
    };
    if !is_hex(&sha, 64) {
        d.push(
            Diagnostic::new(format!("malformed sha256 \"{}\"", sha.value))
                .at(file, sha.span.clone(), hex_problem(&sha, 64))
                .hint("copy the digest as `sha256sum FILE` prints it: 64 lowercase hex digits"),
        );
        return None;
    }
    if d.len() > before {
        return None;
    }
    Some(Source::Url {
        url: url.value,
        sha256: sha.value,
    })
}

fn path_source(
    file: &Arc<SourceFile>,
    path: Sp<String>,
    sha256: Option<Sp<String>>,
    before: usize,
    d: &mut Diagnostics,
) -> Option<Source> {
    stray(d, file, &sha256, "sha256", "path");
    if path.starts_with('/') || path.is_empty() {
        d.push(
            Diagnostic::new(format!(
                "path source \"{}\" must be relative to the recipe's release directory",
                path.value
            ))
            .at(file, path.span.clone(), "absolute or empty")
            .hint("write a relative path; machine-specific paths belong in rocforge.toml mirrors"),
        );
    }
    if d.len() > before {
        return None;
    }
    Some(Source::Path { path: path.value })
}
