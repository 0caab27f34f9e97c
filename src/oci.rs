//! Just enough of the OCI distribution API to pin an image tag to its manifest digest, and to
//! push and pull artifacts (blobs, image manifests, tags) for publishing and the build cache.

use std::path::Path;

use reqwest::blocking::Client;
use reqwest::header::{
    ACCEPT, AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, LOCATION, WWW_AUTHENTICATE,
};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageName {
    pub registry: String,
    pub repository: String,
    pub tag: String,
}

#[derive(Debug, thiserror::Error)]
pub enum OciError {
    #[error("malformed image reference \"{0}\" (expected registry/name:tag)")]
    Malformed(String),
    #[error("cannot reach registry {registry} for {reference}: {message}")]
    Unreachable {
        registry: String,
        reference: String,
        message: String,
    },
    #[error("registry {registry} answered {status} for {reference}")]
    Status {
        registry: String,
        reference: String,
        status: u16,
    },
    #[error("registry {registry} gave no digest for {reference}")]
    NoDigest { registry: String, reference: String },
    #[error("{reference}: {message}")]
    Invalid { reference: String, message: String },
}

impl OciError {
    pub fn hint(&self) -> String {
        match self {
            OciError::Malformed(_) => "write e.g. ghcr.io/rocforge/builder:rocm-6.4.4".into(),
            OciError::Unreachable { .. } => {
                "check the network; without registry access run `rocforge lock --skip-images` to pin sources only".into()
            }
            OciError::Status { status: 401 | 403, .. } => "the registry refused the credentials: set ROCFORGE_REGISTRY_USER and ROCFORGE_REGISTRY_PASSWORD (a token with push rights to publish)".into(),
            OciError::Invalid { .. } => "the registry returned something else than what was asked for: do not use it; push the entry again".into(),
            OciError::Status { status: 404, .. } => "the image or tag does not exist (yet): publish it, or build it locally with `rocforge image build`".into(),
            OciError::Status { .. } | OciError::NoDigest { .. } => "check the image reference and your registry credentials".into(),
        }
    }
}

impl ImageName {
    pub fn parse(reference: &str) -> Result<ImageName, OciError> {
        let bad = || OciError::Malformed(reference.to_string());
        let (registry, rest) = reference.split_once('/').ok_or_else(bad)?;
        if !registry.contains('.') && !registry.contains(':') && registry != "localhost" {
            return Err(bad());
        }
        let (repository, tag) = rest.rsplit_once(':').ok_or_else(bad)?;
        if repository.is_empty() || tag.is_empty() || tag.contains('/') {
            return Err(bad());
        }
        Ok(ImageName {
            registry: registry.to_string(),
            repository: repository.to_string(),
            tag: tag.to_string(),
        })
    }

    /// Loopback registries speak plain HTTP (as test and local registries do); others HTTPS.
    pub fn base_url(&self) -> String {
        registry_url(&self.registry)
    }
}

/// `http://` for loopback registries (as test and local registries are), `https://` otherwise.
pub fn registry_url(registry: &str) -> String {
    let host = registry.split(':').next().unwrap_or("");
    let scheme = if host == "localhost" || host.starts_with("127.") {
        "http"
    } else {
        "https"
    };
    format!("{scheme}://{registry}")
}

const MANIFEST_TYPES: &str = "application/vnd.oci.image.index.v1+json, application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.list.v2+json, application/vnd.docker.distribution.manifest.v2+json";

/// The digest a tag points at, asking the registry (anonymous bearer tokens are fetched when
/// the registry asks for them, as ghcr.io does for public images).
pub fn resolve_digest(client: &Client, reference: &str) -> Result<String, OciError> {
    let name = ImageName::parse(reference)?;
    let url = format!(
        "{}/v2/{}/manifests/{}",
        name.base_url(),
        name.repository,
        name.tag
    );
    let unreachable = |e: reqwest::Error| OciError::Unreachable {
        registry: name.registry.clone(),
        reference: reference.to_string(),
        message: e.without_url().to_string(),
    };
    let mut resp = client
        .head(&url)
        .header(ACCEPT, MANIFEST_TYPES)
        .send()
        .map_err(unreachable)?;
    if resp.status().as_u16() == 401
        && let Some(challenge) = resp
            .headers()
            .get(WWW_AUTHENTICATE)
            .and_then(|v| v.to_str().ok())
        && let Some(token) = anonymous_token(client, challenge)
    {
        resp = client
            .head(&url)
            .header(ACCEPT, MANIFEST_TYPES)
            .header(AUTHORIZATION, format!("Bearer {token}"))
            .send()
            .map_err(unreachable)?;
    }
    if !resp.status().is_success() {
        return Err(OciError::Status {
            registry: name.registry.clone(),
            reference: reference.to_string(),
            status: resp.status().as_u16(),
        });
    }
    resp.headers()
        .get("docker-content-digest")
        .and_then(|v| v.to_str().ok())
        .filter(|d| d.starts_with("sha256:"))
        .map(str::to_string)
        .ok_or(OciError::NoDigest {
            registry: name.registry.clone(),
            reference: reference.to_string(),
        })
}

/// The auth-params of a `Bearer k=v, k="quoted, with commas"` challenge (RFC 7235): a quoted
/// value may hold commas (`scope="repository:r:push,pull"`) and `\`-escapes. None when it is
/// not a Bearer challenge or is malformed.
pub fn challenge_params(challenge: &str) -> Option<Vec<(String, String)>> {
    let rest = challenge.trim_start();
    let (scheme, rest) = rest.split_once(' ').unwrap_or((rest, ""));
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let mut out = Vec::new();
    let mut chars = rest.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| *c == ',' || c.is_whitespace()) {
            chars.next();
        }
        if chars.peek().is_none() {
            return Some(out);
        }
        let mut key = String::new();
        while let Some(&c) = chars.peek() {
            if c == '=' || c.is_whitespace() {
                break;
            }
            key.push(c);
            chars.next();
        }
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        if chars.next() != Some('=') || key.is_empty() {
            return None;
        }
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        let mut value = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            loop {
                match chars.next()? {
                    '"' => break,
                    '\\' => value.push(chars.next()?),
                    c => value.push(c),
                }
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c == ',' || c.is_whitespace() {
                    break;
                }
                value.push(c);
                chars.next();
            }
        }
        out.push((key.to_ascii_lowercase(), value));
    }
}

/// Follows a `Bearer realm="…",service="…",scope="…"` challenge for an anonymous token.
fn anonymous_token(client: &Client, challenge: &str) -> Option<String> {
    let mut realm = None;
    let mut query = Vec::new();
    for (k, v) in challenge_params(challenge)? {
        if k == "realm" {
            realm = Some(v);
        } else {
            query.push((k, v));
        }
    }
    let url = reqwest::Url::parse_with_params(&realm?, &query).ok()?;
    let resp = client.get(url).send().ok()?;
    let v: serde_json::Value = serde_json::from_reader(resp).ok()?;
    v.get("token")
        .or_else(|| v.get("access_token"))?
        .as_str()
        .map(str::to_string)
}

// ---------------------------------------------------------------------------------------------
// Pushing and pulling artifacts: blobs, image manifests, tags (`oci://REGISTRY/REPO`).

pub const IMAGE_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
pub const IMAGE_INDEX: &str = "application/vnd.oci.image.index.v1+json";
/// The layer type of a detached minisign signature (build cache entries, published files,
/// shared test results).
pub const SIGNATURE_TYPE: &str = "application/vnd.rocforge.signature.v1+minisign";
/// The annotation naming a layer's file.
pub const TITLE: &str = "org.opencontainers.image.title";
/// Credentials for registries that want them (a token with push rights to publish).
pub const USER_ENV: &str = "ROCFORGE_REGISTRY_USER";
pub const PASSWORD_ENV: &str = "ROCFORGE_REGISTRY_PASSWORD";

/// A content descriptor (OCI image spec).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    pub media_type: String,
    pub digest: String,
    pub size: u64,
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub annotations: std::collections::BTreeMap<String, String>,
}

/// An OCI image manifest (also the shape ORAS artifacts take).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageManifest {
    pub schema_version: u32,
    pub media_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact_type: Option<String>,
    pub config: Descriptor,
    pub layers: Vec<Descriptor>,
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub annotations: std::collections::BTreeMap<String, String>,
}

/// `sha256:<hex>` of `bytes`.
pub fn digest_of(bytes: &[u8]) -> String {
    format!(
        "sha256:{}",
        hex::encode(<sha2::Sha256 as sha2::Digest>::digest(bytes))
    )
}

/// A repository on a registry: `oci://REGISTRY/REPO` (or `REGISTRY/REPO`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repository {
    pub registry: String,
    pub repository: String,
}

impl Repository {
    pub fn parse(url: &str) -> Result<Repository, OciError> {
        let bad = || OciError::Malformed(url.to_string());
        let rest = url.strip_prefix("oci://").unwrap_or(url);
        let (registry, repository) = rest.trim_end_matches('/').split_once('/').ok_or_else(bad)?;
        let valid = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-/".contains(c);
        if registry.is_empty()
            || repository.is_empty()
            || !repository.chars().all(valid)
            || repository.contains(':')
        {
            return Err(bad());
        }
        Ok(Repository {
            registry: registry.to_string(),
            repository: repository.to_string(),
        })
    }

    pub fn base_url(&self) -> String {
        registry_url(&self.registry)
    }

    /// `REGISTRY/REPO:TAG`, for messages.
    pub fn reference(&self, tag: &str) -> String {
        format!("{}/{}:{tag}", self.registry, self.repository)
    }
}

/// A tag from arbitrary text: characters outside `[A-Za-z0-9_.-]` become `_`, at most 128.
pub fn sanitize_tag(s: &str) -> String {
    let mut t: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "_.-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    if t.starts_with(['.', '-']) {
        t.insert(0, '_');
    }
    t.truncate(128);
    t
}

/// What a registry answered to a manifest put.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PutManifest {
    pub digest: String,
    /// The `OCI-Subject` header: the subject digest a referrers-aware registry indexed.
    pub oci_subject: Option<String>,
}

/// A client for one repository, holding the credentials once the registry asked for them.
pub struct Remote {
    client: Client,
    pub repo: Repository,
    token: std::sync::Mutex<Option<Auth>>,
}

/// What a registry accepted: a bearer token it handed out, or user and password.
#[derive(Clone)]
enum Auth {
    Bearer(String),
    Basic(String, String),
}

impl Auth {
    /// reqwest marks both headers sensitive: they stay out of any debug output.
    fn apply(&self, rb: reqwest::blocking::RequestBuilder) -> reqwest::blocking::RequestBuilder {
        match self {
            Auth::Bearer(t) => rb.bearer_auth(t),
            Auth::Basic(u, p) => rb.basic_auth(u, Some(p)),
        }
    }
}

type Response = reqwest::blocking::Response;

impl Remote {
    pub fn new(client: Client, repo: Repository) -> Remote {
        Remote {
            client,
            repo,
            token: std::sync::Mutex::new(None),
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
    /// (called again if the registry asks for credentials first).
    pub fn push_blob_with(
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
        let resp = self.send(tag, &|c| {
            c.put(&url)
                .header(CONTENT_TYPE, manifest.media_type.as_str())
                .body(bytes.clone())
        })?;
        if resp.status().as_u16() != 201 {
            return Err(self.err_status(tag, resp.status().as_u16()));
        }
        Ok(digest_of(&bytes))
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
        let bytes = read_capped(resp, 4 << 20).map_err(|e| OciError::Invalid {
            reference: self.repo.reference(digest),
            message: e.to_string(),
        })?;
        Ok(is_index.then_some(bytes))
    }

    /// The manifest `reference` (a tag or digest) names: its digest and bytes; None when absent.
    /// A manifest fetched by digest is checked against it.
    pub fn get_manifest(&self, reference: &str) -> Result<Option<(String, Vec<u8>)>, OciError> {
        let url = self.url(&format!("manifests/{reference}"));
        let resp = self.send(reference, &|c| c.get(&url).header(ACCEPT, MANIFEST_TYPES))?;
        match resp.status().as_u16() {
            200 => {}
            404 => return Ok(None),
            s => return Err(self.err_status(reference, s)),
        }
        let bytes = read_capped(resp, 4 << 20).map_err(|e| OciError::Invalid {
            reference: self.repo.reference(reference),
            message: e.to_string(),
        })?;
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
                .and_then(|l| Some(l[l.find('<')? + 1..l.find('>')?].to_string()));
            let left = MAX_TAG_BYTES.saturating_sub(read);
            let bytes = read_capped(resp, left).map_err(|_| {
                invalid(format!(
                    "the tag list is larger than {MAX_TAG_BYTES} bytes; stopped"
                ))
            })?;
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

    /// A blob's bytes as a stream. The caller checks the digest (see [`DigestReader`]).
    pub fn get_blob(&self, digest: &str) -> Result<Response, OciError> {
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
        use std::io::{Read, Write};
        let invalid = |message: String| OciError::Invalid {
            reference: self.repo.reference(digest),
            message,
        };
        let resp = self.get_blob(digest)?;
        let result = (|| {
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(path)
                .map_err(|e| invalid(format!("cannot write {}: {e}", path.display())))?;
            let mut reader = DigestReader::new(resp.take(cap + 1));
            let mut buf = vec![0u8; 256 << 10];
            loop {
                let n = reader.read(&mut buf).map_err(|e| invalid(e.to_string()))?;
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
        let resp = self.get_blob(digest)?;
        let bytes = read_capped(resp, cap).map_err(|e| OciError::Invalid {
            reference: self.repo.reference(digest),
            message: e.to_string(),
        })?;
        if digest_of(&bytes) != digest {
            return Err(OciError::Invalid {
                reference: self.repo.reference(digest),
                message: "the blob does not match its digest".into(),
            });
        }
        Ok(bytes)
    }
}

/// The most pages [`Remote::list_tags`] follows (1000 tags a page).
pub const MAX_TAG_PAGES: usize = 1000;
/// The most bytes of tag-list pages [`Remote::list_tags`] reads in all.
pub const MAX_TAG_BYTES: u64 = 64 << 20;
/// The longest [`Remote::list_tags`] keeps paging.
pub const TAG_LIST_DEADLINE: std::time::Duration = std::time::Duration::from_secs(300);

/// Whether `url` has the scheme, host and port of `base` (both absolute URLs).
fn same_origin(url: &str, base: &str) -> bool {
    match (reqwest::Url::parse(url), reqwest::Url::parse(base)) {
        (Ok(a), Ok(b)) => a.origin() == b.origin(),
        _ => false,
    }
}

fn read_capped(r: impl std::io::Read, cap: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut buf = Vec::new();
    r.take(cap + 1).read_to_end(&mut buf)?;
    if buf.len() as u64 > cap {
        return Err(std::io::Error::other(format!("larger than {cap} bytes")));
    }
    Ok(buf)
}

/// Reads through while hashing; `finish` says whether all bytes matched `digest`.
pub struct DigestReader<R> {
    inner: R,
    hasher: sha2::Sha256,
    pub bytes: u64,
}

impl<R: std::io::Read> DigestReader<R> {
    pub fn new(inner: R) -> Self {
        DigestReader {
            inner,
            hasher: <sha2::Sha256 as sha2::Digest>::new(),
            bytes: 0,
        }
    }

    /// Reads what is left; returns the `sha256:` digest and the size of everything read.
    pub fn finish(mut self) -> std::io::Result<(String, u64)> {
        std::io::copy(&mut self, &mut std::io::sink())?;
        Ok((
            format!(
                "sha256:{}",
                hex::encode(<sha2::Sha256 as sha2::Digest>::finalize(self.hasher))
            ),
            self.bytes,
        ))
    }
}

impl<R: std::io::Read> std::io::Read for DigestReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        <sha2::Sha256 as sha2::Digest>::update(&mut self.hasher, &buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }
}

/// A token for `scope` from a Bearer challenge's realm (with Basic credentials when given).
fn token_for(
    client: &Client,
    challenge: &str,
    scope: &str,
    creds: Option<&(String, String)>,
) -> Option<String> {
    let mut realm = None;
    let mut query = Vec::new();
    for (k, v) in challenge_params(challenge)? {
        match k.as_str() {
            "realm" => realm = Some(v),
            "scope" => {}
            _ => query.push((k, v)),
        }
    }
    query.push(("scope".into(), scope.to_string()));
    let url = reqwest::Url::parse_with_params(&realm?, &query).ok()?;
    let mut rb = client.get(url);
    if let Some((u, p)) = creds {
        rb = rb.basic_auth(u, Some(p));
    }
    let resp = rb.send().ok()?;
    if !resp.status().is_success() {
        return None;
    }
    let v: serde_json::Value = serde_json::from_reader(resp).ok()?;
    v.get("token")
        .or_else(|| v.get("access_token"))?
        .as_str()
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_challenges_keep_quoted_commas() {
        let p = challenge_params(
            r#"Bearer realm="https://r.example/token",service="r.example",scope="repository:r:push,pull", error="a \"q\"""#,
        )
        .unwrap();
        assert_eq!(
            p,
            [
                ("realm".into(), "https://r.example/token".into()),
                ("service".into(), "r.example".into()),
                ("scope".into(), "repository:r:push,pull".into()),
                ("error".into(), "a \"q\"".into()),
            ]
        );
        assert!(challenge_params("Basic realm=\"x\"").is_none());
        assert!(challenge_params("Bearer realm=\"unterminated").is_none());
        assert_eq!(challenge_params("Bearer").unwrap(), []);
    }

    #[test]
    fn parses_references() {
        let n = ImageName::parse("ghcr.io/rocforge/builder:rocm-6.4.4").unwrap();
        assert_eq!(
            (n.registry.as_str(), n.repository.as_str(), n.tag.as_str()),
            ("ghcr.io", "rocforge/builder", "rocm-6.4.4")
        );
        assert_eq!(
            ImageName::parse("localhost:5000/x:1").unwrap().base_url(),
            "http://localhost:5000"
        );
        assert!(ImageName::parse("builder:latest").is_err());
        assert!(ImageName::parse("ghcr.io/x").is_err());
    }

    #[test]
    fn repositories_tags_and_basic_auth() {
        let r = Repository::parse("oci://127.0.0.1:5000/rocforge/cache").unwrap();
        assert_eq!(r.registry, "127.0.0.1:5000");
        assert_eq!(r.repository, "rocforge/cache");
        assert_eq!(r.base_url(), "http://127.0.0.1:5000");
        assert!(Repository::parse("oci://ghcr.io").is_err());
        assert!(Repository::parse("oci://ghcr.io/X:1").is_err());
        assert_eq!(sanitize_tag("a+b:c"), "a_b_c");
        let client = crate::net::client(&Default::default());
        let req = Auth::Basic("user".into(), "pw".into())
            .apply(client.get("http://127.0.0.1:9/"))
            .build()
            .unwrap();
        let auth = req.headers().get(AUTHORIZATION).unwrap();
        assert_eq!(auth.to_str().unwrap(), "Basic dXNlcjpwdw==");
        assert!(auth.is_sensitive());
    }

    /// A registry that sends one tag a page, slowly, with a next page every time: the time
    /// limit stops the listing even though the page limit is far away.
    #[test]
    fn tag_paging_stops_at_the_time_limit() {
        use std::io::{BufRead, BufReader, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                std::thread::spawn(move || {
                    let mut r = BufReader::new(conn.try_clone().unwrap());
                    let mut w = conn;
                    loop {
                        let mut line = String::new();
                        while line != "\r\n" {
                            line.clear();
                            if r.read_line(&mut line).unwrap_or(0) == 0 {
                                return;
                            }
                        }
                        std::thread::sleep(std::time::Duration::from_millis(50));
                        let body = r#"{"tags":["t"]}"#;
                        let resp = format!(
                            "HTTP/1.1 200 OK\r\nLink: </v2/x/tags/list?last=t>; rel=\"next\"\r\nContent-Length: {}\r\n\r\n{body}",
                            body.len()
                        );
                        if w.write_all(resp.as_bytes()).is_err() {
                            return;
                        }
                    }
                });
            }
        });
        let repo = Repository::parse(&format!("oci://127.0.0.1:{port}/x")).unwrap();
        let remote = Remote::new(crate::net::client(&Default::default()), repo);
        let started = std::time::Instant::now();
        let err = remote
            .list_tags_within(100_000, std::time::Duration::from_millis(500))
            .unwrap_err();
        assert!(err.to_string().contains("is not done after"), "{err}");
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
    }

    /// A blob larger than the limit is stopped at the limit and leaves no file; one that does
    /// not match its digest leaves none either; one within both is written whole.
    #[test]
    fn blobs_are_streamed_to_disk_within_a_limit() {
        use std::io::{BufRead, BufReader, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let body = vec![b'x'; 100_000];
        let served = body.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let body = served.clone();
                std::thread::spawn(move || {
                    let mut r = BufReader::new(conn.try_clone().unwrap());
                    let mut w = conn;
                    let mut line = String::new();
                    while line != "\r\n" {
                        line.clear();
                        if r.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                    }
                    let head = format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        body.len()
                    );
                    let _ = w.write_all(head.as_bytes());
                    let _ = w.write_all(&body);
                });
            }
        });
        let repo = Repository::parse(&format!("oci://127.0.0.1:{port}/x")).unwrap();
        let remote = Remote::new(crate::net::client(&Default::default()), repo);
        let dir = tempfile::tempdir().unwrap();
        let digest = digest_of(&body);
        let path = dir.path().join("blob");
        let err = remote.get_blob_to_file(&digest, 1000, &path).unwrap_err();
        assert!(err.to_string().contains("larger than 1000 bytes"), "{err}");
        assert!(!path.exists());
        let err = remote
            .get_blob_to_file(&digest_of(b"other"), 1 << 20, &path)
            .unwrap_err();
        assert!(
            err.to_string().contains("does not match its digest"),
            "{err}"
        );
        assert!(!path.exists());
        assert_eq!(
            remote.get_blob_to_file(&digest, 1 << 20, &path).unwrap(),
            100_000
        );
        assert_eq!(std::fs::read(&path).unwrap(), body);
    }
}
