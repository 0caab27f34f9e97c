//! Just enough of the OCI distribution API to pin an image tag to its manifest digest, and to
//! push and pull artifacts (blobs, image manifests, tags) for publishing and the build cache.

mod auth;
mod pin;
mod remote;

pub use auth::challenge_params;
pub use pin::resolve_digest;
pub use remote::{MAX_TAG_BYTES, MAX_TAG_PAGES, PutManifest, Remote, Retry, TAG_LIST_DEADLINE};

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
    #[error("{last} (gave up after {attempts} attempts)")]
    GaveUp { attempts: u32, last: Box<OciError> },
}

impl OciError {
    /// Whether another attempt in a few seconds may succeed: the connection was lost or
    /// refused, or the registry answered that it is busy or failing for now. A redirect
    /// refused, an answer it meant, or a bad reply stays as it is.
    pub fn transient(&self) -> bool {
        match self {
            OciError::Unreachable { message, .. } => !message.contains(crate::net::REDIRECTED_AWAY),
            OciError::Status { status, .. } => {
                matches!(status, 408 | 429 | 500 | 502 | 503 | 504)
            }
            _ => false,
        }
    }
}

impl crate::diag::Hint for OciError {
    fn hint(&self) -> String {
        match self {
            OciError::Malformed(_) => "write e.g. ghcr.io/rocforge/builder:rocm-6.4.4".into(),
            OciError::Unreachable { .. } => {
                "check the network; without registry access run `rocforge lock --skip-images` to pin sources only".into()
            }
            OciError::Status { status: 401 | 403, .. } => "the registry refused the credentials: set ROCFORGE_REGISTRY_USER and ROCFORGE_REGISTRY_PASSWORD (a token with push rights to publish)".into(),
            OciError::Invalid { .. } => "the registry returned something else than what was asked for: do not use it; push the entry again".into(),
            OciError::Status { status: 404, .. } => "the image or tag does not exist (yet): publish it, or build it locally with `rocforge image build`".into(),
            OciError::Status { .. } | OciError::NoDigest { .. } => "check the image reference and your registry credentials".into(),
            OciError::GaveUp { last, .. } => format!("the registry stopped answering; {}", last.hint()),
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

// ---------------------------------------------------------------------------------------------
// What artifacts are made of, pushed and pulled by [`Remote`] (`oci://REGISTRY/REPO`).

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

#[cfg(test)]
mod tests {
    use reqwest::header::AUTHORIZATION;

    use super::remote::Auth;
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

    /// A server on 127.0.0.1, one connection at a time: each request's head is read, then
    /// `answer` writes the reply and the connection is closed. Returns its port.
    fn serve(answer: impl Fn(&mut std::net::TcpStream) + Send + 'static) -> u16 {
        use std::io::{BufRead, BufReader};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let mut r = BufReader::new(conn.try_clone().unwrap());
                let mut w = conn;
                let mut line = String::new();
                while line != "\r\n" {
                    line.clear();
                    if r.read_line(&mut line).unwrap_or(0) == 0 {
                        break;
                    }
                }
                answer(&mut w);
            }
        });
        port
    }

    /// A blob larger than the limit is stopped at the limit and leaves no file; one that does
    /// not match its digest leaves none either; one within both is written whole.
    #[test]
    fn blobs_are_streamed_to_disk_within_a_limit() {
        use std::io::Write;
        let body = vec![b'x'; 100_000];
        let served = body.clone();
        let port = serve(move |w| {
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                served.len()
            );
            let _ = w.write_all(head.as_bytes());
            let _ = w.write_all(&served);
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

    /// A registry that answers, then fails for a moment (503, then a body cut short), is tried
    /// again, each retry told; one that never answered fails at once; one that keeps failing is
    /// given up on, and the next operation fails without waiting again.
    #[test]
    fn transient_failures_are_retried_once_the_registry_has_answered() {
        use std::io::Write;
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::sync::{Arc, Mutex};
        let body = vec![b'y'; 5000];
        let digest = digest_of(&body);
        let served = Arc::new(AtomicUsize::new(0));
        let count = served.clone();
        let sent = body.clone();
        let port = serve(move |w| {
            // 1: found; 2: busy; 3: half the body; 4: whole; 5 and on: busy for good.
            let n = count.fetch_add(1, Ordering::SeqCst) + 1;
            let head = |status: &str, len: usize| {
                format!("HTTP/1.1 {status}\r\nContent-Length: {len}\r\nConnection: close\r\n\r\n")
            };
            let _ = match n {
                1 | 4 => w
                    .write_all(head("200 OK", sent.len()).as_bytes())
                    .and_then(|()| w.write_all(&sent)),
                3 => w
                    .write_all(head("200 OK", sent.len()).as_bytes())
                    .and_then(|()| w.write_all(&sent[..100])),
                _ => w.write_all(head("503 Service Unavailable", 0).as_bytes()),
            };
        });
        let notes = Arc::new(Mutex::new(Vec::<String>::new()));
        let told = notes.clone();
        let repo = Repository::parse(&format!("oci://127.0.0.1:{port}/x")).unwrap();
        let remote = Remote::new(crate::net::client(&Default::default()), repo)
            .with_retry(Retry {
                retries: 2,
                backoff: std::time::Duration::from_millis(10),
            })
            .on_retry(move |n| told.lock().unwrap().push(n.to_string()));
        assert_eq!(remote.get_blob_bytes(&digest, 1 << 20).unwrap(), body);
        assert_eq!(remote.get_blob_bytes(&digest, 1 << 20).unwrap(), body);
        assert_eq!(served.load(Ordering::SeqCst), 4);
        let notes_now = notes.lock().unwrap().clone();
        assert_eq!(notes_now.len(), 2, "{notes_now:?}");
        assert!(
            notes_now[0].contains("answered 503") && notes_now[0].contains("(1 of 2 retries)"),
            "{notes_now:?}"
        );
        assert!(
            notes_now[1].contains("the connection was lost while reading"),
            "{notes_now:?}"
        );

        let err = remote.get_blob_bytes(&digest, 1 << 20).unwrap_err();
        assert!(
            matches!(err, OciError::GaveUp { attempts: 3, .. }) && !err.transient(),
            "{err}"
        );
        assert!(
            err.to_string().ends_with("(gave up after 3 attempts)"),
            "{err}"
        );
        assert_eq!(served.load(Ordering::SeqCst), 7);
        // Gone for this run: one request, no wait.
        let err = remote.get_blob_bytes(&digest, 1 << 20).unwrap_err();
        assert!(matches!(err, OciError::Status { status: 503, .. }), "{err}");
        assert_eq!(served.load(Ordering::SeqCst), 8);

        // Nobody ever answered on this port: no retry.
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = closed.local_addr().unwrap().port();
        drop(closed);
        let repo = Repository::parse(&format!("oci://127.0.0.1:{port}/x")).unwrap();
        let before = notes.lock().unwrap().len();
        let told = notes.clone();
        let remote = Remote::new(crate::net::client(&Default::default()), repo)
            .on_retry(move |n| told.lock().unwrap().push(n.to_string()));
        let started = std::time::Instant::now();
        let err = remote.get_manifest("t").unwrap_err();
        assert!(matches!(err, OciError::Unreachable { .. }), "{err}");
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
        assert_eq!(notes.lock().unwrap().len(), before);
    }

    /// A tag list or referrers index cut off by the network is a lost connection (which a
    /// later run may mend), not a reply too large; one over its cap is still refused as such.
    #[test]
    fn a_listing_cut_short_is_a_lost_connection_not_a_large_one() {
        use std::io::Write;
        let port = serve(|w| {
            let body = br#"{"name":"x","tags":["a","b"]}"#;
            let _ = w.write_all(
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: {}\r\nContent-Length: 1000\r\n\
                     Connection: close\r\n\r\n",
                    IMAGE_INDEX
                )
                .as_bytes(),
            );
            let _ = w.write_all(body);
        });
        let repo = Repository::parse(&format!("oci://127.0.0.1:{port}/x")).unwrap();
        let remote = Remote::new(crate::net::client(&Default::default()), repo);
        let err = remote.list_tags().unwrap_err();
        assert!(
            matches!(err, OciError::Unreachable { .. })
                && err.to_string().contains("lost while reading"),
            "{err}"
        );
        let err = remote.get_referrers(&digest_of(b"m")).unwrap_err();
        assert!(
            matches!(err, OciError::Unreachable { .. })
                && err.to_string().contains("lost while reading"),
            "{err}"
        );

        let big = serve(|w| {
            let body = vec![b' '; (4 << 20) + 1];
            let _ = w.write_all(
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                )
                .as_bytes(),
            );
            let _ = w.write_all(&body);
        });
        let repo = Repository::parse(&format!("oci://127.0.0.1:{big}/x")).unwrap();
        let remote = Remote::new(crate::net::client(&Default::default()), repo);
        let err = remote.get_referrers(&digest_of(b"m")).unwrap_err();
        assert!(
            matches!(err, OciError::Invalid { .. })
                && err.to_string().contains("larger than 4194304 bytes"),
            "{err}"
        );
    }

    /// A `Link` header with its `>` before its `<` ends the listing; it used to panic.
    #[test]
    fn a_backwards_link_header_ends_the_tag_list() {
        use std::io::Write;
        let port = serve(|w| {
            let body = br#"{"name":"x","tags":["a"]}"#;
            let _ = w.write_all(
                format!(
                    "HTTP/1.1 200 OK\r\nLink: >; rel=\"next\"<\r\nContent-Length: {}\r\n\
                     Connection: close\r\n\r\n",
                    body.len()
                )
                .as_bytes(),
            );
            let _ = w.write_all(body);
        });
        let repo = Repository::parse(&format!("oci://127.0.0.1:{port}/x")).unwrap();
        let remote = Remote::new(crate::net::client(&Default::default()), repo);
        assert_eq!(remote.list_tags().unwrap(), ["a"]);
    }
}
