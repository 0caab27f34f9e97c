//! `ci runners`: which runner labels runners.toml declares and, with a token and a scope,
//! which of them GitHub's API has runners online for; the release workflow's GPU jobs start
//! only on those.

use std::path::Path;

use super::Result;
use crate::ci::discover::{self, Report, Scope};
use crate::ci::runners::{RUNNERS_FILE, Runners};
use crate::diag::{Diagnostic, Hint};

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
