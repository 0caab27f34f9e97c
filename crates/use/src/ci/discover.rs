//! Which runner labels have a runner today, asked of the GitHub API (`GET
//! /repos/{owner}/{repo}/actions/runners` or `/orgs/{org}/actions/runners`) and compared with
//! runners.toml. The release workflow's plan job does this when a token with the rights is
//! configured, so a GPU target whose machine is offline is reported as untested instead of its
//! job queuing until GitHub cancels it a day later.
//!
//! Listing runners needs administration read access (a fine-grained token with "Administration:
//! read" on the repository, or "Self-hosted runners: read" on the organization); the workflow's
//! own `GITHUB_TOKEN` never has it.

use std::collections::BTreeMap;

use reqwest::blocking::Client;
use serde::{Deserialize, Serialize};

use super::runners::Runners;

/// Whose runners to list.
#[derive(Debug, Clone)]
pub enum Scope {
    Repo { owner: String, repo: String },
    Org(String),
}

impl Scope {
    pub fn parse_repo(s: &str) -> Option<Scope> {
        let (owner, repo) = s.split_once('/')?;
        let ok = |p: &str| {
            !p.is_empty()
                && p.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        };
        (ok(owner) && ok(repo)).then(|| Scope::Repo {
            owner: owner.into(),
            repo: repo.into(),
        })
    }

    fn path(&self) -> String {
        match self {
            Scope::Repo { owner, repo } => format!("repos/{owner}/{repo}/actions/runners"),
            Scope::Org(org) => format!("orgs/{org}/actions/runners"),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DiscoverError {
    #[error("GET {url}: {message}")]
    Http { url: String, message: String },
    #[error("GET {url}: HTTP {status}: {message}")]
    Status {
        url: String,
        status: u16,
        message: String,
    },
    #[error("GET {url}: unexpected answer: {message}")]
    Answer { url: String, message: String },
}

impl crate::diag::Hint for DiscoverError {
    fn hint(&self) -> String {
        match self {
            DiscoverError::Status { status: 401, .. } => {
                "the token was refused: check ROCFORGE_RUNNERS_TOKEN (or GITHUB_TOKEN)".into()
            }
            DiscoverError::Status {
                status: 403 | 404, ..
            } => "listing runners needs a token with \"Administration: read\" on the repository (or \"Self-hosted runners: read\" on the organization); the workflow's own GITHUB_TOKEN cannot".into(),
            _ => "check the network and ROCFORGE_GITHUB_API (default https://api.github.com)".into(),
        }
    }
}

/// One runner as the API reports it.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ApiRunner {
    pub name: String,
    /// `online` or `offline`.
    pub status: String,
    #[serde(default)]
    pub busy: bool,
    pub labels: Vec<String>,
}

#[derive(Deserialize)]
struct Page {
    total_count: usize,
    runners: Vec<RawRunner>,
}

#[derive(Deserialize)]
struct RawRunner {
    name: String,
    status: String,
    #[serde(default)]
    busy: bool,
    labels: Vec<RawLabel>,
}

#[derive(Deserialize)]
struct RawLabel {
    name: String,
}

const PER_PAGE: usize = 100;

/// Every runner of `scope`, following the pages.
pub fn list(
    client: &Client,
    api: &str,
    token: &str,
    scope: &Scope,
) -> Result<Vec<ApiRunner>, DiscoverError> {
    let mut out = Vec::new();
    for page in 1.. {
        let url = format!(
            "{}/{}?per_page={PER_PAGE}&page={page}",
            api.trim_end_matches('/'),
            scope.path()
        );
        let mut auth =
            reqwest::header::HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
                DiscoverError::Http {
                    url: url.clone(),
                    message: "the token contains characters a header cannot carry".into(),
                }
            })?;
        // The token never reaches a debug print of the request.
        auth.set_sensitive(true);
        let resp = client
            .get(&url)
            .header(reqwest::header::AUTHORIZATION, auth)
            .header(reqwest::header::ACCEPT, "application/vnd.github+json")
            .header("X-GitHub-Api-Version", "2022-11-28")
            .header(reqwest::header::USER_AGENT, "rocforge")
            .send()
            .map_err(|e| DiscoverError::Http {
                url: url.clone(),
                message: e.without_url().to_string(),
            })?;
        let status = resp.status();
        if !status.is_success() {
            let body = resp.text().unwrap_or_default();
            let message = serde_json::from_str::<serde_json::Value>(&body)
                .ok()
                .and_then(|v| v["message"].as_str().map(crate::redact::server_text))
                .unwrap_or_else(|| crate::redact::server_text(&body));
            return Err(DiscoverError::Status {
                url,
                status: status.as_u16(),
                message,
            });
        }
        let body = resp.bytes().map_err(|e| DiscoverError::Http {
            url: url.clone(),
            message: e.without_url().to_string(),
        })?;
        let page: Page = serde_json::from_slice(&body).map_err(|e| DiscoverError::Answer {
            url: url.clone(),
            message: e.to_string(),
        })?;
        let n = page.runners.len();
        out.extend(page.runners.into_iter().map(|r| ApiRunner {
            name: r.name,
            status: r.status,
            busy: r.busy,
            labels: r.labels.into_iter().map(|l| l.name).collect(),
        }));
        if n < PER_PAGE || out.len() >= page.total_count {
            break;
        }
    }
    Ok(out)
}

/// A runner label of runners.toml and what is known about it.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct LabelState {
    pub label: String,
    /// `gpu` or `build`.
    pub kind: &'static str,
    /// What runners.toml says.
    pub registered: bool,
    /// Runners carrying the label (with `self-hosted` and `linux`) and online; None without the API.
    pub online: Option<usize>,
    pub offline: Option<usize>,
}

impl LabelState {
    /// A job on this label would start: the API's answer when there is one, else runners.toml's.
    pub fn ready(&self) -> bool {
        match self.online {
            Some(n) => n > 0,
            None => self.registered,
        }
    }
}

/// The self-hosted labels of runners.toml, with the API's counts when `api` is given.
pub const RUNNERS_SCHEMA: &str = "rocforge.runners/1";

/// `ci runners --format json`.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Report {
    pub schema: &'static str,
    /// Where the states come from: `runners.toml`, or `github-api` with a token.
    pub source: &'static str,
    pub labels: Vec<LabelState>,
    /// The GPU labels a job would start on.
    pub gpu_ready: Vec<String>,
    /// Every runner the API listed; null without the API.
    pub runners: Option<Vec<ApiRunner>>,
}

impl Report {
    pub fn new(
        source: &'static str,
        labels: Vec<LabelState>,
        runners: Option<Vec<ApiRunner>>,
    ) -> Report {
        Report {
            schema: RUNNERS_SCHEMA,
            source,
            gpu_ready: labels
                .iter()
                .filter(|s| s.kind == "gpu" && s.ready())
                .map(|s| s.label.clone())
                .collect(),
            labels,
            runners,
        }
    }
}

pub fn states(runners: &Runners, api: Option<&[ApiRunner]>) -> Vec<LabelState> {
    let count = |label: &str| -> (Option<usize>, Option<usize>) {
        let Some(list) = api else {
            return (None, None);
        };
        let mut by_status: BTreeMap<&str, usize> = BTreeMap::new();
        for r in list {
            let has = |l: &str| r.labels.iter().any(|x| x.eq_ignore_ascii_case(l));
            // The workflow asks for [self-hosted, linux, <label>]; a runner must carry all three.
            if has("self-hosted") && has("linux") && has(label) {
                *by_status.entry(r.status.as_str()).or_default() += 1;
            }
        }
        let online = by_status.get("online").copied().unwrap_or(0);
        let total: usize = by_status.values().sum();
        (Some(online), Some(total - online))
    };
    let gpu = runners.gpu.iter().map(|g| (&g.target, "gpu", g.registered));
    let build = runners
        .build
        .iter()
        .map(|b| (&b.label, "build", b.registered));
    gpu.chain(build)
        .map(|(label, kind, registered)| {
            let (online, offline) = count(label);
            LabelState {
                label: label.clone(),
                kind,
                registered,
                online,
                offline,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runner(name: &str, status: &str, labels: &[&str]) -> ApiRunner {
        ApiRunner {
            name: name.into(),
            status: status.into(),
            busy: false,
            labels: labels.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn a_label_is_ready_when_a_runner_with_all_three_labels_is_online() {
        let r = Runners::embedded();
        let without = states(&r, None);
        assert!(
            without.iter().all(|s| s.ready() == s.registered),
            "runners.toml decides without the API"
        );
        let api = vec![
            runner(
                "laptop",
                "online",
                &["self-hosted", "Linux", "X64", "gfx90c"],
            ),
            runner("desk", "offline", &["self-hosted", "linux", "gfx902"]),
            // Missing `linux`: the workflow's runs-on would not match it.
            runner("mac", "online", &["self-hosted", "gfx902"]),
        ];
        let s = states(&r, Some(&api));
        let get = |l: &str| s.iter().find(|x| x.label == l).unwrap();
        if r.gpu.iter().any(|g| g.target == "gfx90c") {
            assert!(get("gfx90c").ready());
            assert_eq!(get("gfx90c").online, Some(1));
        }
        if r.gpu.iter().any(|g| g.target == "gfx902") {
            assert!(!get("gfx902").ready());
            assert_eq!(get("gfx902").offline, Some(1));
        }
    }

    #[test]
    fn repo_scopes_are_owner_slash_name() {
        assert!(Scope::parse_repo("rocforge/rocforge").is_some());
        assert!(Scope::parse_repo("rocforge").is_none());
        assert!(Scope::parse_repo("a/b/c").is_none());
        assert!(Scope::parse_repo("a/$(x)").is_none());
    }
}
