//! One repository of a registry: pushing and pulling blobs, manifests and tags.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use reqwest::blocking::Client;
use reqwest::header::{ACCEPT, CONTENT_LENGTH, CONTENT_TYPE, LOCATION, WWW_AUTHENTICATE};

use super::auth::token_for;
use super::{
    Descriptor, DigestReader, IMAGE_INDEX, ImageManifest, MANIFEST_TYPES, OciError, PASSWORD_ENV,
    Repository, USER_ENV, challenge_params, digest_of,
};

/// What a registry answered to a manifest put.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PutManifest {
    pub digest: String,
    /// The `OCI-Subject` header: the subject digest a referrers-aware registry indexed.
    pub oci_subject: Option<String>,
}

/// A client for one repository, holding the credentials once the registry asked for them.
/// `'n` is how long its retry note may borrow (a reporter of the command running it).
pub struct Remote<'n> {
    client: Client,
    pub repo: Repository,
    token: std::sync::Mutex<Option<Auth>>,
    retry: Retry,
    /// Set by the first answer: a registry that answered once and then fails went away for a
    /// moment (a restart, a load balancer), and is worth waiting for; one that never answered
    /// is not there, and waiting would only delay the error.
    answered: AtomicBool,
    /// Set once an operation failed on every attempt: the registry is gone for this run, and
    /// the next operation fails at once instead of waiting again.
    gone: AtomicBool,
    on_retry: Option<RetryNote<'n>>,
}

/// Told of each retry: what failed, and when it is tried again.
type RetryNote<'n> = Box<dyn Fn(&str) + Send + Sync + 'n>;

/// How often, and after how long, a [`Remote`] tries again an operation that failed in a way
/// that can pass: the connection lost or refused, a timeout, or 408, 429, 500, 502, 503, 504.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retry {
    /// Attempts after the first.
    pub retries: u32,
    /// The wait before the first retry; doubled for each further one.
    pub backoff: Duration,
}

impl Default for Retry {
    /// Four retries over 15 s: long enough for a registry's restart or a proxy's blip, short
    /// enough that a build stopped at its time limit still saves its checkpoint in time.
    fn default() -> Self {
        Retry {
            retries: 4,
            backoff: Duration::from_secs(1),
        }
    }
}

/// What a registry accepted: a bearer token it handed out, or user and password.
#[derive(Clone)]
pub(super) enum Auth {
    Bearer(String),
    Basic(String, String),
}

impl Auth {
    /// reqwest marks both headers sensitive: they stay out of any debug output.
    pub(super) fn apply(
        &self,
        rb: reqwest::blocking::RequestBuilder,
    ) -> reqwest::blocking::RequestBuilder {
        match self {
            Auth::Bearer(t) => rb.bearer_auth(t),
            Auth::Basic(u, p) => rb.basic_auth(u, Some(p)),
        }
    }
}

type Response = reqwest::blocking::Response;

impl<'n> Remote<'n> {
    pub fn new(client: Client, repo: Repository) -> Remote<'n> {
        Remote {
            client,
            repo,
            token: std::sync::Mutex::new(None),
            retry: Retry::default(),
            answered: AtomicBool::new(false),
            gone: AtomicBool::new(false),
            on_retry: None,
        }
    }

    /// This remote with another retry policy.
    pub fn with_retry(mut self, retry: Retry) -> Remote<'n> {
        self.retry = retry;
        self
    }

    /// This remote telling `note` of each retry: what failed, and when it is tried again.
    pub fn on_retry(mut self, note: impl Fn(&str) + Send + Sync + 'n) -> Remote<'n> {
        self.on_retry = Some(Box::new(note));
        self
    }

    /// Runs `op` until it succeeds, fails in a way another attempt cannot mend, or has failed
    /// [`Retry::retries`] times more; each retry is told to the `on_retry` note. An operation
    /// must be whole to be retried: an upload starts a new upload session, a download a new
    /// file.
    fn retrying<T>(&self, op: &dyn Fn() -> Result<T, OciError>) -> Result<T, OciError> {
        let mut delay = self.retry.backoff;
        let mut attempt = 0;
        loop {
            let e = match op() {
                Ok(v) => return Ok(v),
                Err(e) => e,
            };
            let worth = e.transient()
                && self.answered.load(Ordering::SeqCst)
                && !self.gone.load(Ordering::SeqCst);
            if !worth {
                return Err(e);
            }
            if attempt == self.retry.retries {
                self.gone.store(true, Ordering::SeqCst);
                return Err(OciError::GaveUp {
                    attempts: attempt + 1,
                    last: Box::new(e),
                });
            }
            attempt += 1;
            if let Some(note) = &self.on_retry {
                note(&format!(
                    "{e}; trying again in {}s ({attempt} of {} retries)",
                    delay.as_secs_f64(),
                    self.retry.retries
                ));
            }
            std::thread::sleep(delay);
            delay = delay.saturating_mul(2);
        }
    }

    fn url(&self, tail: &str) -> String {
        format!(
            "{}/v2/{}/{tail}",
            self.repo.base_url(),
            self.repo.repository
        )
    }

    fn err_unreachable(&self, what: &str, e: reqwest::Error) -> OciError {
        let mut message = e.to_string();
        // A refused redirect's reason (where to) is in the error's source, not its text.
        if e.is_redirect() {
            let mut cause = std::error::Error::source(&e);
            while let Some(c) = cause {
                message.push_str(&format!(": {c}"));
                cause = c.source();
            }
        }
        OciError::Unreachable {
            registry: self.repo.registry.clone(),
            reference: format!("{}/{}", self.repo.repository, what),
            message,
        }
    }

    fn err_status(&self, what: &str, status: u16) -> OciError {
        OciError::Status {
            registry: self.repo.registry.clone(),
            reference: format!("{}/{}", self.repo.repository, what),
            status,
        }
    }

    /// Sends the request `make` builds, answering one authentication challenge (Bearer token
    /// or Basic credentials from the environment) and retrying once.
    fn send(
        &self,
        what: &str,
        make: &dyn Fn(&Client) -> reqwest::blocking::RequestBuilder,
    ) -> Result<Response, OciError> {
        let with_auth = |rb: reqwest::blocking::RequestBuilder| match self
            .token
            .lock()
            .expect("not poisoned")
            .as_ref()
        {
            Some(auth) => auth.apply(rb),
            None => rb,
        };
        let resp = with_auth(make(&self.client))
            .send()
            .map_err(|e| self.err_unreachable(what, e))?;
        self.answered.store(true, Ordering::SeqCst);
        if resp.status().as_u16() != 401 {
            return Ok(resp);
        }
        let challenge = resp
            .headers()
            .get(WWW_AUTHENTICATE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let creds = match (std::env::var(USER_ENV), std::env::var(PASSWORD_ENV)) {
            (Ok(u), Ok(p)) if !u.is_empty() => Some((u, p)),
            _ => None,
        };
        let auth = if challenge_params(&challenge).is_some() {
            let scope = format!("repository:{}:pull,push", self.repo.repository);
            token_for(&self.client, &challenge, &scope, creds.as_ref()).map(Auth::Bearer)
        } else {
            creds.map(|(u, p)| Auth::Basic(u, p))
        };
        let Some(auth) = auth else {
            return Ok(resp);
        };
        *self.token.lock().expect("not poisoned") = Some(auth);
        with_auth(make(&self.client))
            .send()
            .map_err(|e| self.err_unreachable(what, e))
    }

    /// Whether the repository has the blob.
    pub fn has_blob(&self, digest: &str) -> Result<bool, OciError> {
        let url = self.url(&format!("blobs/{digest}"));
        let resp = self.send(digest, &|c| c.head(&url))?;
        match resp.status().as_u16() {
            200 => Ok(true),
            404 => Ok(false),
            s => Err(self.err_status(digest, s)),
        }
    }

    /// Uploads a blob (one monolithic PUT) unless the registry has it; `open` gives its bytes
    /// (called again if the registry asks for credentials first, or for a retry).
    pub fn push_blob_with(
        &self,
        digest: &str,
        size: u64,
        open: &dyn Fn() -> std::io::Result<reqwest::blocking::Body>,
    ) -> Result<(), OciError> {
        self.retrying(&|| self.push_blob_once(digest, size, open))
    }

    fn push_blob_once(
        &self,
        digest: &str,
        size: u64,
        open: &dyn Fn() -> std::io::Result<reqwest::blocking::Body>,
    ) -> Result<(), OciError> {
        if self.has_blob(digest)? {
            return Ok(());
        }
        let start = self.url("blobs/uploads/");
        let resp = self.send(digest, &|c| c.post(&start).header(CONTENT_LENGTH, "0"))?;
        if resp.status().as_u16() != 202 {
            return Err(self.err_status(digest, resp.status().as_u16()));
        }
        let location = resp
            .headers()
            .get(LOCATION)
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| OciError::Invalid {
                reference: self.repo.reference(digest),
                message: "the upload was accepted without a Location".into(),
            })?;
        let mut url = reqwest::Url::parse(&self.repo.base_url())
            .and_then(|b| b.join(location))
            .map_err(|e| OciError::Invalid {
                reference: self.repo.reference(digest),
                message: format!("bad upload location {location:?}: {e}"),
            })?;
        url.query_pairs_mut().append_pair("digest", digest);
        let failed: std::sync::Mutex<Option<std::io::Error>> = std::sync::Mutex::new(None);
        let resp = self.send(digest, &|c| {
            let body = open().unwrap_or_else(|e| {
                *failed.lock().expect("not poisoned") = Some(e);
                reqwest::blocking::Body::from(Vec::new())
            });
            c.put(url.clone())
                .header(CONTENT_TYPE, "application/octet-stream")
                .header(CONTENT_LENGTH, size.to_string())
                .body(body)
        })?;
        if let Some(e) = failed.lock().expect("not poisoned").take() {
            return Err(OciError::Invalid {
                reference: self.repo.reference(digest),
                message: format!("cannot read the blob: {e}"),
            });
        }
        if resp.status().as_u16() != 201 {
            return Err(self.err_status(digest, resp.status().as_u16()));
        }
        Ok(())
    }

    /// Mounts a blob from another repository of the same registry (no bytes move); false when
    /// the registry did not mount it (then upload it).
    pub fn mount_blob(&self, digest: &str, from: &str) -> Result<bool, OciError> {
        let mut url =
            reqwest::Url::parse(&self.url("blobs/uploads/")).map_err(|e| OciError::Invalid {
                reference: self.repo.reference(digest),
                message: e.to_string(),
            })?;
        url.query_pairs_mut()
            .append_pair("mount", digest)
            .append_pair("from", from);
        let resp = self.send(digest, &|c| c.post(url.clone()).header(CONTENT_LENGTH, "0"))?;
        match resp.status().as_u16() {
            201 => Ok(true),
            202 => Ok(false),
            s => Err(self.err_status(digest, s)),
        }
    }

    /// Uploads `bytes` as a blob; returns its descriptor.
    pub fn push_bytes(&self, media_type: &str, bytes: &[u8]) -> Result<Descriptor, OciError> {
        let digest = digest_of(bytes);
        let owned = bytes.to_vec();
        self.push_blob_with(&digest, bytes.len() as u64, &|| {
            Ok(reqwest::blocking::Body::from(owned.clone()))
        })?;
        Ok(Descriptor {
            media_type: media_type.into(),
            digest,
            size: bytes.len() as u64,
            annotations: Default::default(),
        })
    }

    /// Uploads a file (streamed) whose sha256 hex is known; returns its descriptor.
    pub fn push_file(
        &self,
        media_type: &str,
        path: &std::path::Path,
        sha256: &str,
        size: u64,
    ) -> Result<Descriptor, OciError> {
        let digest = format!("sha256:{sha256}");
        self.push_blob_with(&digest, size, &|| {
            let f = std::fs::File::open(path)?;
            Ok(reqwest::blocking::Body::sized(f, size))
        })?;
        Ok(Descriptor {
            media_type: media_type.into(),
            digest,
            size,
            annotations: Default::default(),
        })
    }

    /// Puts `manifest` under `tag`; returns the manifest's digest.
    pub fn put_manifest(&self, tag: &str, manifest: &ImageManifest) -> Result<String, OciError> {
        let bytes = serde_json::to_vec(manifest).expect("plain data");
        let url = self.url(&format!("manifests/{tag}"));
        self.retrying(&|| {
            let resp = self.send(tag, &|c| {
                c.put(&url)
                    .header(CONTENT_TYPE, manifest.media_type.as_str())
                    .body(bytes.clone())
            })?;
            if resp.status().as_u16() != 201 {
                return Err(self.err_status(tag, resp.status().as_u16()));
            }
            Ok(digest_of(&bytes))
        })
    }

    /// Puts manifest `bytes` of `media_type` under `reference` (a tag or its digest). The
    /// answer's `OCI-Subject` header says the registry indexed the manifest's `subject` itself
    /// (the referrers API).
    pub fn put_manifest_bytes(
        &self,
        reference: &str,
        media_type: &str,
        bytes: &[u8],
    ) -> Result<PutManifest, OciError> {
        let url = self.url(&format!("manifests/{reference}"));
        self.retrying(&|| {
            let resp = self.send(reference, &|c| {
                c.put(&url)
                    .header(CONTENT_TYPE, media_type)
                    .body(bytes.to_vec())
            })?;
            if resp.status().as_u16() != 201 {
                return Err(self.err_status(reference, resp.status().as_u16()));
            }
            Ok(PutManifest {
                digest: digest_of(bytes),
                oci_subject: resp
                    .headers()
                    .get("oci-subject")
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_string),
            })
        })
    }

    /// The referrers API's index for `digest` (`/v2/<name>/referrers/<digest>`); None when the
    /// registry has no such API (404), as distribution 2.8 has not.
    pub fn get_referrers(&self, digest: &str) -> Result<Option<Vec<u8>>, OciError> {
        let url = self.url(&format!("referrers/{digest}"));
        let resp = self.send(digest, &|c| c.get(&url).header(ACCEPT, IMAGE_INDEX))?;
        match resp.status().as_u16() {
            200 => {}
            404 => return Ok(None),
            s => return Err(self.err_status(digest, s)),
        }
        let is_index = resp
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| t.starts_with(IMAGE_INDEX));
        let bytes = self.read_body(digest, resp, 4 << 20)?;
        Ok(is_index.then_some(bytes))
    }

    /// The manifest `reference` (a tag or digest) names: its digest and bytes; None when absent.
    /// A manifest fetched by digest is checked against it.
    pub fn get_manifest(&self, reference: &str) -> Result<Option<(String, Vec<u8>)>, OciError> {
        self.retrying(&|| self.get_manifest_once(reference))
    }

    fn get_manifest_once(&self, reference: &str) -> Result<Option<(String, Vec<u8>)>, OciError> {
        let url = self.url(&format!("manifests/{reference}"));
        let resp = self.send(reference, &|c| c.get(&url).header(ACCEPT, MANIFEST_TYPES))?;
        match resp.status().as_u16() {
            200 => {}
            404 => return Ok(None),
            s => return Err(self.err_status(reference, s)),
        }
        let bytes = self.read_body(reference, resp, 4 << 20)?;
        let digest = digest_of(&bytes);
        if reference.starts_with("sha256:") && digest != reference {
            return Err(OciError::Invalid {
                reference: self.repo.reference(reference),
                message: format!("the manifest's digest is {digest}"),
            });
        }
        Ok(Some((digest, bytes)))
    }

    /// Every tag of the repository (`/v2/<name>/tags/list`, following `Link: <…>; rel="next"`
    /// pages); empty when the repository does not exist. A registry that pages for ever is cut
    /// off after [`MAX_TAG_PAGES`] pages, [`MAX_TAG_BYTES`] bytes or [`TAG_LIST_DEADLINE`].
    pub fn list_tags(&self) -> Result<Vec<String>, OciError> {
        self.list_tags_within(MAX_TAG_PAGES, TAG_LIST_DEADLINE)
    }

    /// [`Remote::list_tags`] with other page and time limits.
    pub fn list_tags_within(
        &self,
        max_pages: usize,
        deadline: std::time::Duration,
    ) -> Result<Vec<String>, OciError> {
        #[derive(serde::Deserialize)]
        struct Tags {
            #[serde(default)]
            tags: Option<Vec<String>>,
        }
        let invalid = |message: String| OciError::Invalid {
            reference: self.repo.reference("tags/list"),
            message,
        };
        let started = std::time::Instant::now();
        let base = self.repo.base_url();
        let mut url = self.url("tags/list?n=1000");
        let mut out = Vec::new();
        let mut read = 0u64;
        for page in 1.. {
            if page > max_pages {
                return Err(invalid(format!(
                    "the tag list goes on past {max_pages} pages; stopped"
                )));
            }
            if started.elapsed() > deadline {
                return Err(invalid(format!(
                    "the tag list is not done after {:.1} s; stopped",
                    deadline.as_secs_f64()
                )));
            }
            // The registry's credentials go to its own origin only: a next page elsewhere is
            // asked for without them, and a challenge from there is not answered.
            let resp = if same_origin(&url, &base) {
                self.send("tags/list", &|c| c.get(&url))?
            } else {
                self.client
                    .get(&url)
                    .send()
                    .map_err(|e| self.err_unreachable("tags/list", e))?
            };
            match resp.status().as_u16() {
                200 => {}
                404 => return Ok(out),
                s => return Err(self.err_status("tags/list", s)),
            }
            let next = resp
                .headers()
                .get(reqwest::header::LINK)
                .and_then(|v| v.to_str().ok())
                .filter(|l| l.contains("rel=\"next\""))
                .and_then(link_target);
            let left = MAX_TAG_BYTES.saturating_sub(read);
            let bytes = match read_capped(resp, left) {
                Ok(b) => b,
                Err(Capped::Lost(e)) => return Err(self.err_lost("tags/list", &e)),
                Err(Capped::TooLarge) => {
                    return Err(invalid(format!(
                        "the tag list is larger than {MAX_TAG_BYTES} bytes; stopped"
                    )));
                }
            };
            read += bytes.len() as u64;
            let tags: Tags = serde_json::from_slice(&bytes).map_err(|e| invalid(e.to_string()))?;
            out.extend(tags.tags.unwrap_or_default());
            match next {
                // The link is absolute or relative to the registry.
                Some(n) if n.starts_with("http") => url = n,
                Some(n) => url = format!("{base}{n}"),
                None => return Ok(out),
            }
        }
        unreachable!("the loop returns")
    }

    /// A blob's bytes as a stream. The caller checks the digest (see [`DigestReader`]). The
    /// request is retried; the stream, once returned, is the caller's.
    pub fn get_blob(&self, digest: &str) -> Result<Response, OciError> {
        self.retrying(&|| self.get_blob_once(digest))
    }

    fn get_blob_once(&self, digest: &str) -> Result<Response, OciError> {
        let url = self.url(&format!("blobs/{digest}"));
        let resp = self.send(digest, &|c| c.get(&url))?;
        if !resp.status().is_success() {
            return Err(self.err_status(digest, resp.status().as_u16()));
        }
        Ok(resp)
    }

    /// Streams a blob into a new file at `path`, at most `cap` bytes, checked against its digest
    /// as it is written; on any failure the file is removed. Returns its size.
    pub fn get_blob_to_file(&self, digest: &str, cap: u64, path: &Path) -> Result<u64, OciError> {
        self.retrying(&|| self.get_blob_to_file_once(digest, cap, path))
    }

    fn get_blob_to_file_once(&self, digest: &str, cap: u64, path: &Path) -> Result<u64, OciError> {
        use std::io::{Read, Write};
        let invalid = |message: String| OciError::Invalid {
            reference: self.repo.reference(digest),
            message,
        };
        let resp = self.get_blob_once(digest)?;
        let result = (|| {
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(path)
                .map_err(|e| invalid(format!("cannot write {}: {e}", path.display())))?;
            let mut reader = DigestReader::new(resp.take(cap + 1));
            let mut buf = vec![0u8; 256 << 10];
            loop {
                let n = reader
                    .read(&mut buf)
                    .map_err(|e| self.err_lost(digest, &e))?;
                if n == 0 {
                    break;
                }
                if reader.bytes > cap {
                    return Err(invalid(format!("larger than {cap} bytes; stopped")));
                }
                file.write_all(&buf[..n])
                    .map_err(|e| invalid(format!("cannot write {}: {e}", path.display())))?;
            }
            let (got, size) = reader.finish().map_err(|e| invalid(e.to_string()))?;
            if got != digest {
                return Err(invalid("the blob does not match its digest".into()));
            }
            Ok(size)
        })();
        if result.is_err() {
            let _ = std::fs::remove_file(path);
        }
        result
    }

    /// A small blob (at most `cap` bytes), checked against its digest.
    pub fn get_blob_bytes(&self, digest: &str, cap: u64) -> Result<Vec<u8>, OciError> {
        self.retrying(&|| {
            let resp = self.get_blob_once(digest)?;
            let bytes = self.read_body(digest, resp, cap)?;
            if digest_of(&bytes) != digest {
                return Err(OciError::Invalid {
                    reference: self.repo.reference(digest),
                    message: "the blob does not match its digest".into(),
                });
            }
            Ok(bytes)
        })
    }

    /// A body of at most `cap` bytes: more is refused as invalid, a connection lost on the way
    /// is an unreachable registry (which a retry may mend).
    fn read_body(&self, what: &str, resp: Response, cap: u64) -> Result<Vec<u8>, OciError> {
        read_capped(resp, cap).map_err(|e| match e {
            Capped::Lost(e) => self.err_lost(what, &e),
            Capped::TooLarge => OciError::Invalid {
                reference: self.repo.reference(what),
                message: format!("larger than {cap} bytes"),
            },
        })
    }

    /// A body cut off by the network.
    fn err_lost(&self, what: &str, e: &std::io::Error) -> OciError {
        OciError::Unreachable {
            registry: self.repo.registry.clone(),
            reference: format!("{}/{}", self.repo.repository, what),
            message: format!("the connection was lost while reading: {e}"),
        }
    }
}

/// The most pages [`Remote::list_tags`] follows (1000 tags a page).
pub const MAX_TAG_PAGES: usize = 1000;
/// The most bytes of tag-list pages [`Remote::list_tags`] reads in all.
pub const MAX_TAG_BYTES: u64 = 64 << 20;
/// The longest [`Remote::list_tags`] keeps paging.
pub const TAG_LIST_DEADLINE: std::time::Duration = std::time::Duration::from_secs(300);

/// The URL between `<` and the `>` after it in a `Link` header; None when there is none (a
/// `>` before the `<` included: the registry's text, not ours).
fn link_target(link: &str) -> Option<String> {
    let start = link.find('<')? + 1;
    let len = link[start..].find('>')?;
    Some(link[start..start + len].to_string())
}

/// Whether `url` has the scheme, host and port of `base` (both absolute URLs).
fn same_origin(url: &str, base: &str) -> bool {
    match (reqwest::Url::parse(url), reqwest::Url::parse(base)) {
        (Ok(a), Ok(b)) => a.origin() == b.origin(),
        _ => false,
    }
}

/// Why a capped read stopped: the two are told apart because a lost connection is worth
/// another try and a body over the cap is not.
enum Capped {
    Lost(std::io::Error),
    TooLarge,
}

fn read_capped(r: impl std::io::Read, cap: u64) -> Result<Vec<u8>, Capped> {
    use std::io::Read;
    let mut buf = Vec::new();
    r.take(cap + 1)
        .read_to_end(&mut buf)
        .map_err(Capped::Lost)?;
    if buf.len() as u64 > cap {
        return Err(Capped::TooLarge);
    }
    Ok(buf)
}
