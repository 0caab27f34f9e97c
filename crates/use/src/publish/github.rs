//! Publishing to a GitHub release through the REST API: find the release for the tag or create
//! it, list its assets, upload each file (skipping one already there with the same size,
//! replacing one whose size differs), so a re-run after an interruption finishes the job.
//! An asset GitHub has finished (`state: uploaded`) and whose `digest` names other bytes is
//! another release under the same tag: refused before anything is uploaded.
//! The token goes only into the Authorization header: never into URLs, messages or logs.

use std::io::Read;
use std::path::PathBuf;

use reqwest::blocking::{Client, RequestBuilder, Response};
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE};

use super::{Outcome, PublishError};

/// The most of a GitHub API answer read: a release with its assets is a few KiB to a few MiB.
/// A longer one is cut and fails to parse, with the reason.
const MAX_REPLY: u64 = 16 << 20;
/// The most of an error answer read, for its message.
const MAX_ERROR_REPLY: u64 = 64 << 10;

pub struct GitHub {
    client: Client,
    api: String,
    token: String,
    owner: String,
    repo: String,
}

/// An asset already on the release.
#[derive(Debug, Clone)]
struct Asset {
    id: u64,
    name: String,
    size: u64,
    /// GitHub's `digest` (`sha256:HEX`) of a finished upload; older servers send none.
    digest: Option<String>,
}

impl std::fmt::Debug for GitHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the token.
        write!(f, "GitHub({}/{} at {})", self.owner, self.repo, self.api)
    }
}

fn content_type(name: &str) -> &'static str {
    if name.ends_with(".json") {
        "application/json"
    } else if name.ends_with(".minisig") || name == "SHA256SUMS" {
        "text/plain"
    } else if name.ends_with(".tar.zst") {
        "application/zstd"
    } else if name.ends_with(".tar.gz") {
        "application/gzip"
    } else if name.ends_with(".whl") {
        "application/zip"
    } else {
        "application/octet-stream"
    }
}

impl GitHub {
    pub fn new(client: Client, api: String, token: String, owner: &str, repo: &str) -> GitHub {
        GitHub {
            client,
            api: api.trim_end_matches('/').to_string(),
            token,
            owner: owner.into(),
            repo: repo.into(),
        }
    }

    fn authed(&self, rb: RequestBuilder) -> RequestBuilder {
        let mut auth = reqwest::header::HeaderValue::from_str(&format!("Bearer {}", self.token))
            .unwrap_or_else(|_| reqwest::header::HeaderValue::from_static(""));
        // Sensitive: left out of any debug output of the request.
        auth.set_sensitive(true);
        rb.header(AUTHORIZATION, auth)
            .header(ACCEPT, "application/vnd.github+json")
            .header("X-GitHub-Api-Version", "2022-11-28")
    }

    fn send(&self, what: &str, rb: RequestBuilder) -> Result<Response, PublishError> {
        self.authed(rb)
            .send()
            .map_err(|e| PublishError::Unreachable {
                what: what.into(),
                // Without the URL's query or any header: reqwest's message names the URL only.
                message: e.without_url().to_string(),
            })
    }

    fn fail(what: &str, resp: Response) -> PublishError {
        let status = resp.status().as_u16();
        let message = serde_json::from_reader::<_, serde_json::Value>(resp.take(MAX_ERROR_REPLY))
            .ok()
            .and_then(|v| v["message"].as_str().map(crate::redact::server_text))
            .unwrap_or_default();
        PublishError::GitHub {
            what: what.into(),
            status,
            message,
        }
    }

    fn json(what: &str, resp: Response) -> Result<serde_json::Value, PublishError> {
        serde_json::from_reader(resp.take(MAX_REPLY)).map_err(|e| PublishError::Unreachable {
            what: what.into(),
            message: format!("unreadable answer: {e}"),
        })
    }

    fn repo_url(&self, tail: &str) -> String {
        format!("{}/repos/{}/{}/{tail}", self.api, self.owner, self.repo)
    }

    /// The release for `tag` (id, upload URL without its template part), created if absent.
    fn release(&self, tag: &str) -> Result<(u64, String, bool), PublishError> {
        let what = format!("the release {tag}");
        let resp = self.send(
            &what,
            self.client
                .get(self.repo_url(&format!("releases/tags/{tag}"))),
        )?;
        let (v, created) = match resp.status().as_u16() {
            200 => (Self::json(&what, resp)?, false),
            404 => {
                let body = serde_json::json!({"tag_name": tag, "name": tag});
                let resp = self.send(
                    &format!("creating {what}"),
                    self.client
                        .post(self.repo_url("releases"))
                        .header(CONTENT_TYPE, "application/json")
                        .body(serde_json::to_vec(&body).expect("plain data")),
                )?;
                if resp.status().as_u16() != 201 {
                    return Err(Self::fail(&format!("creating {what}"), resp));
                }
                (Self::json(&what, resp)?, true)
            }
            _ => return Err(Self::fail(&what, resp)),
        };
        let id = v["id"].as_u64().ok_or_else(|| PublishError::GitHub {
            what: what.clone(),
            status: 200,
            message: "the release has no id".into(),
        })?;
        let upload = v["upload_url"]
            .as_str()
            .map(|u| u.split('{').next().unwrap_or(u).to_string())
            .ok_or_else(|| PublishError::GitHub {
                what: what.clone(),
                status: 200,
                message: "the release has no upload_url".into(),
            })?;
        Ok((id, upload, created))
    }

    fn assets(&self, id: u64) -> Result<Vec<Asset>, PublishError> {
        let mut out = Vec::new();
        for page in 1.. {
            let what = "the release's assets";
            let resp = self.send(
                what,
                self.client
                    .get(self.repo_url(&format!("releases/{id}/assets?per_page=100&page={page}"))),
            )?;
            if !resp.status().is_success() {
                return Err(Self::fail(what, resp));
            }
            let v = Self::json(what, resp)?;
            let list = v.as_array().cloned().unwrap_or_default();
            for a in &list {
                if let (Some(id), Some(name), Some(size)) =
                    (a["id"].as_u64(), a["name"].as_str(), a["size"].as_u64())
                {
                    // An interrupted upload (`state` other than uploaded) is the size rule's to
                    // replace, whatever digest it carries.
                    let finished = a["state"].as_str().is_none_or(|s| s == "uploaded");
                    let digest = a["digest"]
                        .as_str()
                        .and_then(|d| d.strip_prefix("sha256:"))
                        .filter(|_| finished)
                        .map(str::to_ascii_lowercase);
                    out.push(Asset {
                        id,
                        name: name.into(),
                        size,
                        digest,
                    });
                }
            }
            if list.len() < 100 {
                break;
            }
        }
        Ok(out)
    }

    /// The release for `tag` already holds a file of this name whose digest is not this file's:
    /// refused before the first upload, so a release is never half one and half another.
    fn refuse_other_content(
        &self,
        tag: &str,
        files: &[PathBuf],
        existing: &[Asset],
    ) -> Result<(), PublishError> {
        let mut differ = Vec::new();
        for path in files {
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let Some(theirs) = existing
                .iter()
                .find(|a| a.name == name)
                .and_then(|a| a.digest.as_deref())
            else {
                continue;
            };
            let (ours, _) = super::sha256_file(path)?;
            if ours != theirs {
                differ.push(format!("{name} (sha256 {theirs} there, {ours} here)"));
            }
        }
        if differ.is_empty() {
            return Ok(());
        }
        Err(PublishError::TagTaken {
            release: format!("{}/{}@{tag}", self.owner, self.repo),
            assets: differ,
        })
    }

    /// Uploads `files` to the release for `tag`.
    pub fn publish(
        &self,
        tag: &str,
        files: &[PathBuf],
        reporter: &dyn crate::progress::Reporter,
    ) -> Result<Vec<Outcome>, PublishError> {
        let (id, upload, created) = self.release(tag)?;
        if created {
            reporter.note(&format!(
                "created the release {tag} of {}/{}",
                self.owner, self.repo
            ));
        }
        let existing = if created {
            Vec::new()
        } else {
            self.assets(id)?
        };
        self.refuse_other_content(tag, files, &existing)?;
        let mut out = Vec::new();
        for path in files {
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let size = std::fs::metadata(path)
                .map_err(|source| PublishError::Io {
                    path: path.clone(),
                    source,
                })?
                .len();
            let mut action = "uploaded";
            if let Some(a) = existing.iter().find(|a| a.name == name) {
                if a.size == size {
                    out.push(Outcome {
                        file: name,
                        action: "present".into(),
                    });
                    continue;
                }
                let what = format!("deleting the old {name}");
                let resp = self.send(
                    &what,
                    self.client
                        .delete(self.repo_url(&format!("releases/assets/{}", a.id))),
                )?;
                if !resp.status().is_success() {
                    return Err(Self::fail(&what, resp));
                }
                crate::fault::point("publish");
                action = "replaced";
            }
            let mut url = reqwest::Url::parse(&upload).map_err(|e| PublishError::GitHub {
                what: "the release".into(),
                status: 200,
                message: format!("bad upload_url: {e}"),
            })?;
            url.query_pairs_mut().append_pair("name", &name);
            let task = reporter.task(&format!("uploading {name}"), Some(size), true);
            let file = std::fs::File::open(path).map_err(|source| PublishError::Io {
                path: path.clone(),
                source,
            })?;
            let what = format!("uploading {name}");
            let resp = self.send(
                &what,
                self.client
                    .post(url)
                    .header(CONTENT_TYPE, content_type(&name))
                    .header(CONTENT_LENGTH, size.to_string())
                    .body(reqwest::blocking::Body::sized(file, size)),
            )?;
            if resp.status().as_u16() != 201 {
                return Err(Self::fail(&what, resp));
            }
            crate::fault::point("publish");
            task.finish(&format!("{name}: {action}"));
            out.push(Outcome {
                file: name,
                action: action.into(),
            });
        }
        Ok(out)
    }
}
