//! `ci github`: the release workflow and actionlint's configuration, generated from the
//! catalog's release lines and runners.toml, written or compared with what is committed.
//!
//! `ci runners`: which runner labels runners.toml declares and, with a token and a scope,
//! which of them GitHub's API has runners online for; the release workflow's GPU jobs start
//! only on those.

use std::path::{Path, PathBuf};

use super::Result;
use crate::catalog::{Catalog, CatalogRoot};
use crate::ci::discover::{self, Report, Scope};
use crate::ci::github::{self, ACTIONLINT_CONFIG_PATH, Line, WORKFLOW_PATH};
use crate::ci::runners::{RUNNERS_FILE, Runners};
use crate::ci::unified_diff;
use crate::diag::{Diagnostic, Hint};

/// A file `ci github` generates: where it goes under the repository root, and its text.
pub struct Generated {
    pub path: PathBuf,
    pub text: String,
}

/// What writing a generated file did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    Unchanged,
    Wrote,
}

/// Every release line of the catalog, oldest first, except previews (`preview = true` in
/// release.toml): a line still being brought up is built on request, not released.
fn lines(root: &CatalogRoot) -> Result<Vec<Line>> {
    let names = root
        .releases()
        .map_err(|e| Diagnostic::new(format!("cannot list the release lines: {e}")))?;
    let mut out = Vec::new();
    for name in names {
        let c = Catalog::load(root.clone(), Some(&name))?;
        if !c.release.preview {
            out.push(Line::from_catalog(&c));
        }
    }
    Ok(out)
}

/// The files `ci github` generates for the repository rooted at `dir` (runners.toml is read
/// there) from the catalog at `root`.
pub fn github_files(root: &CatalogRoot, dir: &Path) -> Result<Vec<Generated>> {
    let runners = Runners::read(&dir.join(RUNNERS_FILE)).map_err(|e| {
        Diagnostic::new(e.to_string()).hint(
            "run from the repository root, or pass --dir ROOT (the directory holding runners.toml)",
        )
    })?;
    let lines = lines(root)?;
    let rendered = |r: std::result::Result<String, github::RenderError>| {
        r.map_err(|e| {
            Diagnostic::new(e.to_string())
                .hint("a bug in rocforge's workflow template: please report it")
        })
    };
    Ok(vec![
        Generated {
            path: dir.join(WORKFLOW_PATH),
            text: rendered(github::workflow(&lines, &runners))?,
        },
        Generated {
            path: dir.join(ACTIONLINT_CONFIG_PATH),
            text: rendered(github::actionlint_config(&runners))?,
        },
    ])
}

/// A unified diff for each generated file that differs from the file on disk (a missing file
/// reads as empty); empty when everything is up to date.
pub fn drift(files: &[Generated]) -> Vec<String> {
    files
        .iter()
        .filter_map(|f| {
            let committed = std::fs::read_to_string(&f.path).unwrap_or_default();
            let shown = f.path.display().to_string();
            let diff = unified_diff(
                &committed,
                &f.text,
                &format!("{shown} (committed)"),
                &format!("{shown} (generated)"),
            );
            (!diff.is_empty()).then_some(diff)
        })
        .collect()
}

/// Writes each generated file whose text differs from what is there, atomically.
pub fn write(files: &[Generated]) -> Result<Vec<Written>> {
    let mut out = Vec::new();
    for f in files {
        if std::fs::read_to_string(&f.path).ok().as_deref() == Some(f.text.as_str()) {
            out.push(Written::Unchanged);
            continue;
        }
        if let Some(parent) = f.path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| Diagnostic::new(format!("cannot create {}: {e}", parent.display())))?;
        }
        crate::fsutil::write_atomic(&f.path, f.text.as_bytes())
            .map_err(|e| Diagnostic::new(format!("cannot write {}: {e}", f.path.display())))?;
        out.push(Written::Wrote);
    }
    Ok(out)
}

/// What `ci runners` is asked for.
pub struct RunnersRequest<'a> {
    /// The repository root holding runners.toml.
    pub dir: &'a Path,
    /// OWNER/REPO, or an organization, whose runners the API lists.
    pub repo: Option<&'a str>,
    pub org: Option<&'a str>,
    /// A token that may read them ("Administration: read").
    pub token: Option<&'a str>,
    /// The API's base URL.
    pub api: &'a str,
}

pub fn runners(req: &RunnersRequest<'_>) -> Result<Report> {
    let path = req.dir.join(RUNNERS_FILE);
    let runners = Runners::read(&path).map_err(|e| {
        Diagnostic::new(e.to_string()).hint(
            "run from the repository root, or pass --dir ROOT (the directory holding runners.toml)",
        )
    })?;
    let scope = match (req.repo, req.org) {
        (Some(r), _) => Some(Scope::parse_repo(r).ok_or_else(|| {
            Diagnostic::new(format!("--repo {r:?} is not OWNER/REPO"))
                .hint("e.g. --repo rocforge/rocforge")
        })?),
        (None, Some(o)) => Some(Scope::Org(o.to_string())),
        (None, None) => None,
    };
    let (source, listed) = match (&scope, req.token) {
        (Some(scope), Some(token)) => {
            let client = crate::net::try_client(&crate::net::HttpOptions::default())
                .map_err(|e| Diagnostic::new(format!("HTTP client: {e}")))?;
            let list = discover::list(&client, req.api, token, scope)
                .map_err(|e| Diagnostic::new(e.to_string()).hint(e.hint()))?;
            ("github-api", Some(list))
        }
        (Some(_), None) => {
            return Err(Diagnostic::new("--repo/--org given but no token is set")
                .hint("set ROCFORGE_RUNNERS_TOKEN (or GITHUB_TOKEN) to a token with \"Administration: read\", or drop --repo to use runners.toml alone")
                .into());
        }
        (None, _) => ("runners.toml", None),
    };
    let states = discover::states(&runners, listed.as_deref());
    Ok(Report::new(source, states, listed))
}
