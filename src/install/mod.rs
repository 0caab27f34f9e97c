//! `rocforge install`: a signed index → artifacts (with dependencies) → verified downloads →
//! safe extraction into a staging directory beside the prefix → renamed or merged in, with a
//! receipt per component. Until the final rename nothing in the prefix changes, so a failed or
//! interrupted install leaves it exactly as it was.

pub mod merge;
pub mod origin;
pub mod receipt;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use reqwest::Url;

use crate::package::extract;
use crate::package::index::{Artifact, INDEX_NAME, Index, MAX_INDEX_BYTES};
use crate::package::manifest::{HIP_RUNTIME, Kind, version_tuple};
use crate::package::tarball::Compression;
use crate::progress::Reporter;
use crate::sign::{PublicKey, SignError};
use crate::source::download::{DownloadError, DownloadOptions, download};
use crate::units::{now_unix, parse_rfc3339, rfc3339};
use receipt::Receipt;

pub use crate::package::extract::DEFAULT_MAX_BYTES;

#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    #[error("cannot read the index {from}: {message}")]
    Index { from: String, message: String },
    #[error("the index {from} is not signed (no {INDEX_NAME}.minisig)")]
    Unsigned { from: String },
    #[error("the index signature does not verify: {0}")]
    Signature(SignError),
    #[error("the index signature does not verify: {source}\n{}", notes.join("\n"))]
    SignatureNotes {
        source: SignError,
        /// Key lists beside the index that were not used, and why.
        notes: Vec<String>,
    },
    #[error(transparent)]
    Trust(crate::trust::TrustError),
    #[error("the index {from} expired at {expires}; it may be an old copy replayed by a mirror")]
    Expired { from: String, expires: String },
    #[error("the index {from} has an invalid date {value:?}")]
    BadDate { from: String, value: String },
    #[error("{component} for {targets} is not in the index{}", if available.is_empty() { String::new() } else { format!(" (it has: {})", available.join("; ")) })]
    NotInIndex {
        component: String,
        targets: String,
        available: Vec<String>,
    },
    #[error("{artifact} depends on {dependency} (key {key}), which the index does not list")]
    MissingDependency {
        artifact: String,
        dependency: String,
        key: String,
    },
    #[error("{artifact}: its URL {url} is on another host than the index ({index_host})")]
    OtherHost {
        artifact: String,
        url: String,
        index_host: String,
    },
    #[error("{artifact} needs glibc {need} or newer; this system has {have}")]
    Glibc {
        artifact: String,
        need: String,
        have: String,
    },
    /// `why`: which artifacts need which runtime libraries, where rocforge looked and what other
    /// version it saw.
    #[error("{why}, and the index does not offer one")]
    NoRuntime { why: String },
    #[error("--with-runtime: the index {from} offers no component that provides the HIP runtime")]
    NoRuntimeOffered { from: String },
    #[error("{artifact}: {source}")]
    Download {
        artifact: String,
        source: DownloadError,
    },
    #[error(transparent)]
    Extract(#[from] extract::ExtractError),
    #[error("{artifact}: the manifest says {found}, the index says {expected}")]
    ManifestMismatch {
        artifact: String,
        expected: String,
        found: String,
    },
    #[error("{path} already exists in the prefix{}", owner.as_ref().map(|o| format!(" and belongs to {o}")).unwrap_or_else(|| " and belongs to no installed component".into()))]
    Conflict { path: String, owner: Option<String> },
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("stopped; the prefix is unchanged")]
    Stopped,
    #[error("the index {from}: artifact {artifact}: {field} {value:?} {rule}")]
    BadField {
        from: String,
        artifact: String,
        field: &'static str,
        value: String,
        rule: &'static str,
    },
    #[error("{name} {installed} is installed; the index offers the older {offered}")]
    Downgrade {
        name: String,
        installed: String,
        offered: String,
    },
}

impl InstallError {
    pub fn hint(&self) -> String {
        match self {
            InstallError::Index { .. } => "check --from: a directory or URL holding index.json".into(),
            InstallError::Unsigned { .. } => "ask the publisher for a signed index, or pass --allow-unsigned if you trust the source and the connection".into(),
            InstallError::Signature(e) => e.hint(),
            InstallError::SignatureNotes { source, .. } => source.hint(),
            InstallError::Trust(e) => e.hint(),
            InstallError::Expired { .. } => "fetch a current index from the publisher; an expired index is never used".into(),
            InstallError::BadDate { .. } => "the index's issued/expires must be RFC 3339 UTC, e.g. 2025-06-01T00:00:00Z".into(),
            InstallError::NotInIndex { .. } => "check the component name and --arch against the index".into(),
            InstallError::MissingDependency { .. } => "the index is incomplete; the publisher must package the dependency too".into(),
            InstallError::OtherHost { .. } => "pass --allow-host HOST if you trust that host".into(),
            InstallError::Glibc { .. } => "install inside a container of a newer distribution (for the debian-6.4 line: its builder image, or debian:unstable), use a line built for an older glibc (rocm-6.4.4 builds on AlmaLinux 8: glibc 2.28), or build from source here with `rocforge build`".into(),
            InstallError::NoRuntime { .. } => format!(
                "install ROCm's HIP runtime (AMD's hip-runtime-amd package, under /opt/rocm or $ROCM_PATH), \
                 install from an index that offers rocm-runtime, or pass --no-runtime-check to install \
                 anyway (the libraries will not load until a runtime is found; {HOST_LIBS_ENV}=DIR:… \
                 names where to look instead of the ld.so cache)"
            ),
            InstallError::NoRuntimeOffered { .. } => {
                "drop --with-runtime to use this system's runtime, or install from an index that offers rocm-runtime".into()
            }
            InstallError::Download { source, .. } => match source {
                DownloadError::Checksum { .. } => "the file on the server is not the one the signed index lists (truncated or replaced); nothing was installed".into(),
                other => other.hint(),
            },
            // Writing failed (a full disk), not the tarball.
            InstallError::Extract(extract::ExtractError::Io { .. }) => "check free disk space and permissions beside the prefix; nothing was installed".into(),
            InstallError::Extract(_) => "the tarball is unsafe or damaged; nothing was installed. Report it to the publisher".into(),
            InstallError::ManifestMismatch { .. } => "the index and the tarball disagree; nothing was installed".into(),
            InstallError::Conflict { .. } => "uninstall the owner first, or install into another --prefix".into(),
            InstallError::Io { .. } => "check free disk space and permissions beside the prefix".into(),
            InstallError::Stopped => "run the same command again".into(),
            InstallError::BadField { .. } => "the index is malformed or hostile; nothing was installed. Report it to the publisher".into(),
            InstallError::Downgrade { .. } => "an old index (a mirror replaying it?) would replace a newer install; pass --allow-downgrade if you mean it".into(),
        }
    }
}

fn ioe(path: &Path) -> impl Fn(std::io::Error) -> InstallError + '_ {
    move |source| InstallError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// A fetched index, checked.
pub struct LoadedIndex {
    pub index: Index,
    pub url: Url,
    /// The key ID that signed it, None when unsigned and allowed.
    pub signer: Option<String>,
    /// Why an unsigned index was accepted (for a loud warning).
    pub unsigned_reason: Option<String>,
    /// The key list chain applied (keys.json beside the index), if any.
    pub key_list: Option<crate::trust::Chain>,
    /// Key lists found but not used, and why.
    pub trust_notes: Vec<String>,
}

/// Key lists beside an index, over HTTP(S) or from file:// URLs.
struct UrlSource<'a> {
    client: &'a reqwest::blocking::Client,
    index: &'a Url,
}

impl crate::trust::ListSource for UrlSource<'_> {
    fn fetch(&mut self, name: &str) -> Result<Option<crate::trust::Fetched>, String> {
        let u = self.index.join(name).map_err(|e| e.to_string())?;
        let Some(bytes) = fetch_small(self.client, &u)? else {
            return Ok(None);
        };
        let sig_url = Url::parse(&format!("{u}.minisig")).map_err(|e| e.to_string())?;
        let signature =
            fetch_small(self.client, &sig_url)?.map(|b| String::from_utf8_lossy(&b).into_owned());
        Ok(Some(crate::trust::Fetched { bytes, signature }))
    }

    fn describe(&self, name: &str) -> String {
        self.index.join(name).map_or_else(
            |_| name.to_string(),
            |u| crate::source::download::redact_url(u.as_str()),
        )
    }
}

/// Where `from` (a directory, a file, or a URL of either) puts index.json.
pub fn index_url(from: &str) -> Result<Url, InstallError> {
    let bad = |message: String| InstallError::Index {
        from: from.into(),
        message,
    };
    let p = Path::new(from);
    if !from.contains("://") {
        let abs = std::path::absolute(p).map_err(|e| bad(e.to_string()))?;
        let file = if abs.is_dir() {
            abs.join(INDEX_NAME)
        } else {
            abs
        };
        return Url::from_file_path(&file).map_err(|()| bad("not a usable path".into()));
    }
    let mut u = Url::parse(from).map_err(|e| bad(e.to_string()))?;
    if !u.path().ends_with(".json") {
        if !u.path().ends_with('/') {
            let p = format!("{}/", u.path());
            u.set_path(&p);
        }
        u = u.join(INDEX_NAME).map_err(|e| bad(e.to_string()))?;
    }
    Ok(u)
}

fn is_hex(s: &str, min: usize, max: usize) -> bool {
    (min..=max).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// What a signed index still must not say: names that are not component names (they become
/// receipt file names), digests and content keys that are not hex (they are cut and shown).
fn check_index(index: &Index, from: &str) -> Result<(), InstallError> {
    use crate::package::extract::shown;
    use crate::recipe::is_component_name;
    const NAME: &str = "is not a component name (lowercase letters, digits, - _ ., at most 64)";
    const KEY: &str = "is not a content key (hexadecimal digits)";
    const WORD: &str = "is not a plain word (at most 128 printable characters, no spaces)";
    for a in &index.artifacts {
        let bad = |field, value: &str, rule| InstallError::BadField {
            from: from.into(),
            artifact: shown(&a.name),
            field,
            value: shown(value),
            rule,
        };
        if !is_component_name(&a.name) {
            return Err(bad("name", &a.name, NAME));
        }
        if !crate::package::manifest::is_plain_word(&a.version) {
            return Err(bad("version", &a.version, WORD));
        }
        if let Some(t) = a
            .targets
            .iter()
            .find(|t| !crate::package::manifest::is_plain_word(t))
        {
            return Err(bad("target", t, WORD));
        }
        if !is_hex(&a.sha256, 64, 64) {
            return Err(bad("sha256", &a.sha256, "is not 64 hexadecimal digits"));
        }
        if !is_hex(&a.key, 1, 128) {
            return Err(bad("key", &a.key, KEY));
        }
        for d in &a.depends {
            if !is_component_name(&d.name) {
                return Err(bad("dependency", &d.name, NAME));
            }
            if !is_hex(&d.key, 1, 128) {
                return Err(bad("dependency key", &d.key, KEY));
            }
        }
    }
    Ok(())
}

/// The longest fetching one small file (index, signature, key list) may take.
const SMALL_DEADLINE: std::time::Duration = std::time::Duration::from_secs(300);

/// Up to `MAX_INDEX_BYTES + 1` bytes of `r`, within [`SMALL_DEADLINE`] of `start`.
fn read_small(mut r: impl Read, start: std::time::Instant) -> Result<Vec<u8>, String> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 64 * 1024];
    loop {
        if start.elapsed() > SMALL_DEADLINE {
            return Err(format!(
                "not done after {} s, the limit for a small file",
                SMALL_DEADLINE.as_secs()
            ));
        }
        let n = match r.read(&mut chunk) {
            Ok(0) => return Ok(buf),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e.to_string()),
        };
        buf.extend_from_slice(&chunk[..n]);
        if buf.len() as u64 > MAX_INDEX_BYTES {
            return Ok(buf);
        }
    }
}

/// Small files (index, signature): None when absent (404 or no such file).
fn fetch_small(client: &reqwest::blocking::Client, url: &Url) -> Result<Option<Vec<u8>>, String> {
    let start = std::time::Instant::now();
    if url.scheme() == "file" {
        let p = url
            .to_file_path()
            .map_err(|()| "bad file URL".to_string())?;
        return match std::fs::File::open(&p) {
            Ok(f) if f.metadata().is_ok_and(|m| !m.is_file()) => {
                Err(format!("{}: not a regular file", p.display()))
            }
            Ok(f) => read_small(f, start).map(Some),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(format!("{}: {e}", p.display())),
        };
    }
    // Errors without the URL: it may carry credentials, and the caller names the file.
    let resp = client
        .get(url.clone())
        .send()
        .map_err(|e| with_causes(&e.without_url()))?;
    if resp.status() == reqwest::StatusCode::NOT_FOUND {
        return Ok(None);
    }
    if !resp.status().is_success() {
        return Err(format!("HTTP {}", resp.status().as_u16()));
    }
    read_small(resp, start).map(Some)
}

/// An error and what caused it (DNS, refused, TLS), which reqwest's own message leaves out.
fn with_causes(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut next = e.source();
    while let Some(c) = next {
        let c_text = c.to_string();
        if !s.contains(&c_text) {
            s += &format!(": {c_text}");
        }
        next = c.source();
    }
    s
}

/// Fetches the index and its signature, applies the key list beside it (`keys.json`, see
/// [`crate::trust`]) to `keys`, checks the signature and the expiry.
pub fn load_index(
    client: &reqwest::blocking::Client,
    from: &str,
    keys: &[PublicKey],
    allow_unsigned: bool,
) -> Result<LoadedIndex, InstallError> {
    let url = index_url(from)?;
    let shown = crate::source::download::redact_url(url.as_str());
    let bad = |message: String| InstallError::Index {
        from: shown.clone(),
        message,
    };
    let bytes = fetch_small(client, &url)
        .map_err(&bad)?
        .ok_or_else(|| bad("not found".into()))?;
    if bytes.len() as u64 > MAX_INDEX_BYTES {
        return Err(bad(format!("larger than {MAX_INDEX_BYTES} bytes")));
    }
    let sig_url = Url::parse(&format!("{url}.minisig")).map_err(|e| bad(e.to_string()))?;
    let sig = fetch_small(client, &sig_url).map_err(&bad)?;
    let mut key_list = None;
    let mut trust_notes = Vec::new();
    let (signer, unsigned_reason) = match sig {
        None if allow_unsigned => (None, Some(format!("{shown} has no signature"))),
        None => return Err(InstallError::Unsigned { from: shown }),
        Some(sig) => {
            let text = String::from_utf8_lossy(&sig);
            let resolved = crate::trust::StateFile::load_default().and_then(|mut state| {
                crate::trust::resolve(
                    keys,
                    &mut UrlSource {
                        client,
                        index: &url,
                    },
                    crate::trust::KEY_LIST_NAME,
                    &mut state,
                )
            });
            let resolved = match resolved {
                Ok(r) => r,
                Err(e) if allow_unsigned => {
                    trust_notes.push(format!("key list not used: {e}"));
                    crate::trust::Resolved {
                        keys: keys.to_vec(),
                        revoked: Default::default(),
                        chain: None,
                        notes: Vec::new(),
                    }
                }
                Err(e) => return Err(InstallError::Trust(e)),
            };
            trust_notes.extend(resolved.notes.iter().cloned());
            key_list = resolved.chain.clone();
            match resolved.verify_bytes(&bytes, &text, &shown) {
                Ok(v) => (Some(v.key_id), None),
                Err(e) if allow_unsigned => (None, Some(e.to_string())),
                Err(crate::trust::TrustError::Sign(e)) if trust_notes.is_empty() => {
                    return Err(InstallError::Signature(e));
                }
                Err(crate::trust::TrustError::Sign(source)) => {
                    return Err(InstallError::SignatureNotes {
                        source,
                        notes: trust_notes,
                    });
                }
                Err(e) => return Err(InstallError::Trust(e)),
            }
        }
    };
    let index: Index =
        serde_json::from_slice(&bytes).map_err(|e| bad(format!("invalid JSON: {e}")))?;
    check_index(&index, &shown)?;
    let expires = parse_rfc3339(&index.expires).map_err(|_| InstallError::BadDate {
        from: shown.clone(),
        value: index.expires.clone(),
    })?;
    parse_rfc3339(&index.issued).map_err(|_| InstallError::BadDate {
        from: shown.clone(),
        value: index.issued.clone(),
    })?;
    if now_unix() > expires {
        return Err(InstallError::Expired {
            from: shown,
            expires: index.expires.clone(),
        });
    }
    Ok(LoadedIndex {
        index,
        url,
        signer,
        unsigned_reason,
        key_list,
        trust_notes,
    })
}

/// The artifacts to install for `components` on `targets` (sorted target IDs; empty = any),
/// dependencies first.
pub fn resolve<'a>(
    index: &'a Index,
    components: &[String],
    targets: &[String],
) -> Result<Vec<&'a Artifact>, InstallError> {
    let mut order: Vec<&Artifact> = Vec::new();
    let mut seen: BTreeSet<&str> = BTreeSet::new();
    fn visit<'a>(
        index: &'a Index,
        a: &'a Artifact,
        order: &mut Vec<&'a Artifact>,
        seen: &mut BTreeSet<&'a str>,
    ) -> Result<(), InstallError> {
        if !seen.insert(&a.key) {
            return Ok(());
        }
        for d in &a.depends {
            let dep = index
                .artifacts
                .iter()
                .find(|x| x.key == d.key)
                .ok_or_else(|| InstallError::MissingDependency {
                    artifact: extract::shown(&a.url),
                    dependency: d.name.clone(),
                    key: d.key.clone(),
                })?;
            visit(index, dep, order, seen)?;
        }
        order.push(a);
        Ok(())
    }
    for c in components {
        let candidates: Vec<&Artifact> = index.artifacts.iter().filter(|a| &a.name == c).collect();
        let sorted = |a: &Artifact| {
            let mut t = a.targets.clone();
            t.sort();
            t
        };
        let exact: Vec<&Artifact> = candidates
            .iter()
            .copied()
            .filter(|a| targets.is_empty() || sorted(a) == targets)
            .collect();
        let pool = if exact.is_empty() {
            candidates
                .iter()
                .copied()
                .filter(|a| targets.iter().all(|t| a.targets.contains(t)))
                .collect()
        } else {
            exact
        };
        let best = pool
            .into_iter()
            .max_by(|a, b| version_tuple(&a.version).cmp(&version_tuple(&b.version)));
        let Some(best) = best else {
            return Err(InstallError::NotInIndex {
                component: c.clone(),
                targets: if targets.is_empty() {
                    "any target".into()
                } else {
                    targets.join(",")
                },
                available: candidates
                    .iter()
                    .map(|a| format!("{} {} for {}", a.name, a.version, a.targets.join(",")))
                    .collect(),
            });
        };
        visit(index, best, &mut order, &mut seen)?;
    }
    Ok(order)
}

/// The host's glibc version (`gnu_get_libc_version`), None on other C libraries.
pub fn host_glibc() -> Option<String> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: returns a pointer to a static NUL-terminated string.
        let p = unsafe { libc::gnu_get_libc_version() };
        if p.is_null() {
            return None;
        }
        // SAFETY: non-null, static, NUL-terminated.
        let s = unsafe { std::ffi::CStr::from_ptr(p) };
        Some(s.to_string_lossy().into_owned())
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        None
    }
}

fn origin(u: &Url) -> String {
    match u.host_str() {
        Some(h) => match u.port_or_known_default() {
            Some(p) => format!("{}://{h}:{p}", u.scheme()),
            None => format!("{}://{h}", u.scheme()),
        },
        None => format!("{}://", u.scheme()),
    }
}

pub struct Request<'a> {
    pub components: &'a [String],
    /// Sorted, deduplicated target IDs; empty when not given.
    pub targets: &'a [String],
    pub from: &'a str,
    pub prefix: &'a Path,
    pub allow_unsigned: bool,
    /// Replace an installed component by an older version (`--allow-downgrade`).
    pub allow_downgrade: bool,
    /// Hosts (`host` or `host:port`) artifacts may come from besides the index's.
    pub allowed_hosts: &'a [String],
    pub keys: &'a [PublicKey],
    /// Where downloads are kept (resumable, reused).
    pub cache_dir: PathBuf,
    pub max_bytes: u64,
    pub download: DownloadOptions,
    /// What to do about the HIP runtime artifacts need.
    pub runtime: RuntimeCheck,
    pub stop: &'a AtomicBool,
}

/// How install treats the HIP runtime that artifacts need (their `needs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RuntimeCheck {
    /// The prefix's or this system's runtime, else the index's provider (added), else an error.
    #[default]
    Auto,
    /// Install the index's provider whatever this system has (`--with-runtime`).
    With,
    /// Do not check (`--no-runtime-check`).
    Skip,
}

/// Names directories (`:`-separated) to look for the HIP runtime in, instead of the ld.so cache,
/// `$ROCM_PATH/lib`, `/opt/rocm/lib` and `$LD_LIBRARY_PATH`: for tests and unusual systems.
pub const HOST_LIBS_ENV: &str = "ROCFORGE_HOST_LIBS";

/// What the search for the HIP runtime on this system found.
#[derive(Debug, Default)]
pub struct HostRuntime {
    /// Where the wanted runtime is (the first wanted library's path), when every wanted library
    /// was found in one place.
    pub found: Option<PathBuf>,
    /// Where rocforge looked.
    pub searched: Vec<String>,
    /// HIP runtime libraries seen that are not the wanted ones (another ROCm major version).
    pub others: Vec<PathBuf>,
}

/// Looks for the HIP runtime on this system. `wanted` are exact library names (e.g.
/// libamdhip64.so.6, libhsa-runtime64.so.1), all of which must be found in one place (the ld.so
/// cache, or one directory); empty (an index from before the names were recorded) accepts any
/// `libamdhip64.so*`.
pub fn host_hip_runtime(wanted: &[String]) -> HostRuntime {
    let any = ["libamdhip64.so".to_string()];
    let matches = |name: &str, w: &str| {
        if wanted.is_empty() {
            name.starts_with(w)
        } else {
            name == w
        }
    };
    let want: &[String] = if wanted.is_empty() { &any } else { wanted };
    let mut out = HostRuntime::default();
    // Every wanted name among `names` (name, path): the first one's path when all are there.
    let take = |names: &[(String, PathBuf)], out: &mut HostRuntime| -> Option<PathBuf> {
        let paths: Option<Vec<&PathBuf>> = want
            .iter()
            .map(|w| names.iter().find(|(n, _)| matches(n, w)).map(|(_, p)| p))
            .collect();
        match paths {
            Some(p) => p.first().map(|p| (*p).clone()),
            None => {
                out.others.extend(
                    names
                        .iter()
                        .filter(|(n, _)| n.starts_with("libamdhip64.so"))
                        .map(|(_, p)| p.clone()),
                );
                None
            }
        }
    };
    let list_dir = |dir: &Path| -> Vec<(String, PathBuf)> {
        let mut v: Vec<(String, PathBuf)> = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| Some((e.file_name().to_str()?.to_string(), e.path())))
            .filter(|(n, _)| crate::package::manifest::is_hip_runtime_lib(n))
            .collect();
        v.sort();
        v
    };
    let dirs: Vec<PathBuf> = if let Some(v) = std::env::var_os(HOST_LIBS_ENV) {
        std::env::split_paths(&v).collect()
    } else {
        out.searched
            .push("the ld.so cache (ldconfig -p)".to_string());
        for ldconfig in ["ldconfig", "/sbin/ldconfig", "/usr/sbin/ldconfig"] {
            let Ok(text) = crate::process::Cmd::new(ldconfig).arg("-p").run() else {
                continue;
            };
            // Lines look like "\tlibamdhip64.so.6 (libc6,x86-64) => /opt/rocm/lib/libamdhip64.so.6".
            let cached: Vec<(String, PathBuf)> = text
                .lines()
                .filter_map(|l| {
                    let (name, rest) = l.trim_start().split_once(' ')?;
                    let (_, path) = rest.rsplit_once("=> ")?;
                    crate::package::manifest::is_hip_runtime_lib(name)
                        .then(|| (name.to_string(), PathBuf::from(path.trim())))
                })
                .collect();
            if let Some(p) = take(&cached, &mut out) {
                out.found = Some(p);
                return out;
            }
            break;
        }
        let mut dirs = Vec::new();
        if let Some(r) = std::env::var_os("ROCM_PATH") {
            dirs.push(PathBuf::from(r).join("lib"));
        }
        dirs.push(PathBuf::from("/opt/rocm/lib"));
        if let Some(l) = std::env::var_os("LD_LIBRARY_PATH") {
            dirs.extend(std::env::split_paths(&l).filter(|p| p.is_absolute()));
        }
        dirs
    };
    for d in &dirs {
        out.searched.push(d.display().to_string());
        if let Some(p) = take(&list_dir(d), &mut out) {
            out.found = Some(p);
            return out;
        }
    }
    out.others.sort();
    out.others.dedup();
    out
}

/// Adds the index's HIP runtime provider (and its dependencies) to `chosen` when an artifact
/// needs the runtime and neither `chosen`, the prefix (`existing`) nor this system has it, or
/// always with [`RuntimeCheck::With`].
fn add_runtime<'a>(
    index: &'a Index,
    from: &str,
    chosen: &mut Vec<&'a Artifact>,
    existing: &[Receipt],
    req: &Request<'_>,
    reporter: &dyn Reporter,
) -> Result<(), InstallError> {
    let needy: Vec<String> = chosen
        .iter()
        .filter(|a| a.needs.iter().any(|n| n == HIP_RUNTIME))
        .map(|a| a.name.clone())
        .collect();
    let in_set = chosen
        .iter()
        .any(|a| a.provides.iter().any(|p| p == HIP_RUNTIME));
    let in_prefix = existing.iter().find(|r| {
        r.provides.iter().any(|p| p == HIP_RUNTIME)
            || (r.provides.is_empty() && r.name == "rocm-runtime")
    });
    let why = match req.runtime {
        RuntimeCheck::Skip => {
            if !needy.is_empty() && !in_set && in_prefix.is_none() {
                reporter.note(&format!(
                    "warning: --no-runtime-check: {} need the HIP runtime; not checking that this system has it",
                    needy.join(", ")
                ));
            }
            return Ok(());
        }
        RuntimeCheck::Auto => {
            if needy.is_empty() || in_set {
                return Ok(());
            }
            if let Some(r) = in_prefix {
                reporter.note(&format!(
                    "HIP runtime: {} {} in the prefix",
                    r.name, r.version
                ));
                return Ok(());
            }
            let mut wanted: Vec<String> = chosen
                .iter()
                .flat_map(|a| a.runtime_libs.iter().cloned())
                .collect();
            wanted.sort();
            wanted.dedup();
            let host = host_hip_runtime(&wanted);
            if let Some(p) = host.found {
                reporter.note(&format!(
                    "HIP runtime: {} (for {})",
                    p.display(),
                    needy.join(", ")
                ));
                return Ok(());
            }
            let what = if wanted.is_empty() {
                "the HIP runtime".to_string()
            } else {
                format!("the HIP runtime ({})", wanted.join(", "))
            };
            let other = if host.others.is_empty() {
                String::new()
            } else {
                format!(
                    "; it has another version: {}",
                    host.others
                        .iter()
                        .map(|p| p.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            };
            let why = format!(
                "{} need{} {what}, which this system lacks (searched {}){other}",
                needy.join(", "),
                if needy.len() == 1 { "s" } else { "" },
                host.searched.join(", ")
            );
            why
        }
        RuntimeCheck::With => {
            if in_set {
                return Ok(());
            }
            "--with-runtime".to_string()
        }
    };
    let providers = providers(index, req.targets);
    let Some(first) = providers.first() else {
        return Err(if req.runtime == RuntimeCheck::With {
            InstallError::NoRuntimeOffered { from: from.into() }
        } else {
            InstallError::NoRuntime { why }
        });
    };
    let mut added: Vec<&'a Artifact> = Vec::new();
    for a in first {
        if !chosen.iter().any(|c| c.key == a.key) && !added.iter().any(|c| c.key == a.key) {
            added.push(a);
        }
    }
    if let Some(p) = added.last() {
        reporter.note(&format!(
            "adding {} {} from the index: {why}",
            p.name, p.version
        ));
    }
    added.append(chosen);
    *chosen = added;
    Ok(())
}

/// The index's HIP runtime providers, each resolved with its dependencies (dependencies
/// first): those for `targets` first, else any.
fn providers<'a>(index: &'a Index, targets: &[String]) -> Vec<Vec<&'a Artifact>> {
    let mut names: Vec<String> = index
        .artifacts
        .iter()
        .filter(|a| a.provides.iter().any(|p| p == HIP_RUNTIME))
        .map(|a| a.name.clone())
        .collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .filter_map(|n| {
            let one = std::slice::from_ref(&n);
            resolve(index, one, targets)
                .or_else(|_| resolve(index, one, &[]))
                .ok()
        })
        .collect()
}

pub struct Report {
    pub installed: Vec<Receipt>,
    pub already: Vec<String>,
    pub signer: Option<String>,
    pub unsigned_reason: Option<String>,
}

pub fn install(req: &Request<'_>, reporter: &dyn Reporter) -> Result<Report, InstallError> {
    let client = crate::source::download::client_confined(
        &req.download,
        &index_url(req.from)?,
        req.allowed_hosts,
    );
    let loaded = load_index(&client, req.from, req.keys, req.allow_unsigned)?;
    if let Some(why) = &loaded.unsigned_reason {
        reporter.note(&format!(
            "WARNING: installing WITHOUT a verified signature (--allow-unsigned): {why}"
        ));
    }
    for n in &loaded.trust_notes {
        reporter.note(&format!("warning: {n}"));
    }
    if let Some(c) = &loaded.key_list {
        reporter.note(&format!(
            "key list: sequence {} ({} list{} from key {})",
            c.sequence,
            c.lists,
            if c.lists == 1 { "" } else { "s" },
            c.anchor
        ));
    }
    let mut chosen = resolve(&loaded.index, req.components, req.targets)?;
    // Installs into one prefix take turns; one that a kill -9 cut short is finished first.
    let _lock = merge::lock(req.prefix, true, &|| {
        reporter.note(&format!(
            "waiting for another rocforge process installing into {}",
            req.prefix.display()
        ))
    })
    .map_err(ioe(req.prefix))?;
    for name in merge::recover(req.prefix).map_err(ioe(req.prefix))? {
        reporter.note(&format!(
            "completed the install of {name} that a killed run had begun"
        ));
    }
    let existing = receipt::read_all(req.prefix);
    add_runtime(
        &loaded.index,
        loaded.url.as_str(),
        &mut chosen,
        &existing,
        req,
        reporter,
    )?;
    if !req.allow_downgrade {
        for a in &chosen {
            if let Some(r) = existing.iter().find(|r| r.name == a.name)
                && version_tuple(&a.version) < version_tuple(&r.version)
            {
                return Err(InstallError::Downgrade {
                    name: a.name.clone(),
                    installed: r.version.clone(),
                    offered: a.version.clone(),
                });
            }
        }
    }
    let index_origin = origin(&loaded.url);
    let mut urls = Vec::new();
    for a in &chosen {
        let u = loaded.url.join(&a.url).map_err(|e| InstallError::Index {
            from: loaded.url.to_string(),
            message: format!("{}: bad url \"{}\": {e}", a.name, extract::shown(&a.url)),
        })?;
        let o = origin(&u);
        let host_port = match (u.host_str(), u.port_or_known_default()) {
            (Some(h), Some(p)) => vec![h.to_string(), format!("{h}:{p}")],
            (Some(h), None) => vec![h.to_string()],
            _ => vec![],
        };
        if o != index_origin && !host_port.iter().any(|h| req.allowed_hosts.contains(h)) {
            return Err(InstallError::OtherHost {
                artifact: extract::shown(&a.url),
                url: crate::source::download::redact_url(u.as_str()),
                index_host: index_origin.clone(),
            });
        }
        urls.push(u);
    }
    if let Some(have) = host_glibc() {
        for a in &chosen {
            if let Some(need) = &a.glibc_floor
                && version_tuple(need) > version_tuple(&have)
            {
                return Err(InstallError::Glibc {
                    artifact: extract::shown(&a.url),
                    need: need.clone(),
                    have,
                });
            }
        }
    }
    let mut report = Report {
        installed: Vec::new(),
        already: Vec::new(),
        signer: loaded.signer.clone(),
        unsigned_reason: loaded.unsigned_reason.clone(),
    };
    let mut todo = Vec::new();
    for (a, u) in chosen.iter().zip(urls) {
        if existing.iter().any(|r| r.key == a.key) {
            report.already.push(a.name.clone());
        } else {
            todo.push((*a, u));
        }
    }
    if todo.is_empty() {
        return Ok(report);
    }
    let total: u64 = todo.iter().map(|(a, _)| a.installed_size).sum();
    if total > req.max_bytes {
        return Err(extract::ExtractError::TooBig {
            artifact: todo
                .iter()
                .map(|(a, _)| a.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            size: total,
            limit: req.max_bytes,
        }
        .into());
    }

    // Download everything first (verified against the signed index's sha256).
    let dl_dir = req.cache_dir.join("artifacts");
    let mut files = Vec::new();
    for (a, u) in &todo {
        if req.stop.load(Ordering::SeqCst) {
            return Err(InstallError::Stopped);
        }
        let base = artifact_file(&a.url);
        let dest = dl_dir.join(format!(
            "{}-{base}",
            a.sha256.get(..16).unwrap_or("artifact")
        ));
        let opts = DownloadOptions {
            max_bytes: Some(a.size),
            ..req.download.clone()
        };
        download(&client, u.as_str(), &a.sha256, &dest, &opts, reporter).map_err(|source| {
            InstallError::Download {
                artifact: extract::shown(&base),
                source,
            }
        })?;
        files.push(dest);
        crate::fault::point("install");
    }

    // Extract into a staging directory beside the prefix.
    let staging = Staging::new(req.prefix)?;
    let mut staged = BTreeMap::new();
    let mut receipts = Vec::new();
    let now = rfc3339(now_unix());
    for ((a, u), file) in todo.iter().zip(&files) {
        if req.stop.load(Ordering::SeqCst) {
            return Err(InstallError::Stopped);
        }
        let base = artifact_file(&a.url);
        let task = reporter.task(&format!("unpacking {base}"), Some(a.size), true);
        let f = std::fs::File::open(file).map_err(ioe(file))?;
        let counted = Progress {
            inner: f,
            task: task.as_ref(),
        };
        let reader: Box<dyn Read + '_> = match Compression::of(&base) {
            Some(Compression::Gz) => Box::new(flate2::read::GzDecoder::new(
                std::io::BufReader::with_capacity(1 << 20, counted),
            )),
            _ => Box::new(zstd::stream::read::Decoder::new(counted).map_err(ioe(file))?),
        };
        // Each artifact is unpacked into a directory of its own, so nothing an earlier one left
        // (a symlink above all) is even there while it is extracted; its entries then move into
        // the shared staging, where a path two artifacts both have is a conflict.
        let own = Staging::new(req.prefix)?;
        let x = extract::extract(reader, &own.dir, &base, a.installed_size.min(req.max_bytes))?;
        task.finish(&format!("{}: unpacked", a.name));
        crate::fault::point("install");
        let m = &x.manifest;
        if m.key != a.key || m.name != a.name {
            return Err(InstallError::ManifestMismatch {
                artifact: extract::shown(&base),
                expected: format!("{} {}", a.name, a.key),
                found: extract::shown(&format!("{} {}", m.name, m.key)),
            });
        }
        extract::gather(&own.dir, &staging.dir, &x.entries, &base, &mut staged)?;
        let mut r = Receipt {
            schema: receipt::RECEIPT_SCHEMA.into(),
            name: m.name.clone(),
            version: m.version.clone(),
            release: m.release.clone(),
            targets: m.targets.clone(),
            key: m.key.clone(),
            sha256: a.sha256.clone(),
            url: crate::source::download::redact_url(u.as_str()),
            installed: now.clone(),
            depends: m.depends.clone(),
            glibc_floor: m.glibc_floor.clone(),
            needs: m.needs.clone(),
            provides: m.provides.clone(),
            not_native: receipt::not_native(m.coverage.as_ref()),
            signed_by: loaded.signer.clone(),
            files: Vec::new(),
            dirs: Vec::new(),
        };
        for e in &x.entries {
            match e.kind {
                Kind::Dir => r.dirs.push(e.path.clone()),
                _ => r.files.push(e.path.clone()),
            }
        }
        receipts.push(r);
    }
    if req.stop.load(Ordering::SeqCst) {
        return Err(InstallError::Stopped);
    }
    crate::fault::point("install");
    staging.commit(req.prefix, &receipts, &existing)?;
    report.installed = receipts;
    Ok(report)
}

/// The artifact's file name, for the download cache and messages: the URL's last segment when
/// it is a plain file name, else a fixed one (the URL is the index's; it names no local path).
fn artifact_file(url: &str) -> String {
    let base = url.rsplit('/').next().unwrap_or_default();
    let base = base.split(['?', '#']).next().unwrap_or_default();
    let plain = !base.is_empty()
        && base.len() <= 200
        && !base.starts_with('.')
        && base
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_' | b'+'));
    if plain {
        base.to_string()
    } else if base.ends_with(".gz") {
        "artifact.tar.gz".into()
    } else {
        "artifact.tar.zst".into()
    }
}

struct Progress<'a, R> {
    inner: R,
    task: &'a dyn crate::progress::Task,
}

impl<R: Read> Read for Progress<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.task.inc(n as u64);
        Ok(n)
    }
}

/// The extract-and-merge half of [`install`], for one uncompressed tarball already at hand: safe
/// extraction into a staging directory beside `prefix`, then the same commit (a rename into an
/// empty prefix, else the checked, journaled merge) under the prefix's lock. No index, no
/// download, no signature: the fuzz target drives it with arbitrary bytes to check that nothing
/// outside `prefix` ever changes.
pub fn unpack_into(
    prefix: &Path,
    tar: impl Read,
    artifact: &str,
    limit: u64,
) -> Result<Receipt, InstallError> {
    let _lock = merge::lock(prefix, false, &|| {})
        .map_err(ioe(prefix))?
        .ok_or_else(|| ioe(prefix)(std::io::Error::other("locked by another process")))?;
    merge::recover(prefix).map_err(ioe(prefix))?;
    let existing = receipt::read_all(prefix);
    let staging = Staging::new(prefix)?;
    let x = extract::extract(tar, &staging.dir, artifact, limit)?;
    let m = &x.manifest;
    let mut r = Receipt {
        schema: receipt::RECEIPT_SCHEMA.into(),
        name: m.name.clone(),
        version: m.version.clone(),
        release: m.release.clone(),
        targets: m.targets.clone(),
        key: m.key.clone(),
        sha256: String::new(),
        url: String::new(),
        installed: rfc3339(now_unix()),
        depends: m.depends.clone(),
        glibc_floor: m.glibc_floor.clone(),
        needs: m.needs.clone(),
        provides: m.provides.clone(),
        not_native: Default::default(),
        signed_by: None,
        files: Vec::new(),
        dirs: Vec::new(),
    };
    for e in &x.entries {
        match e.kind {
            Kind::Dir => r.dirs.push(e.path.clone()),
            _ => r.files.push(e.path.clone()),
        }
    }
    // A manifest's key is not checked against an index here; the receipt rules still apply.
    r.check().map_err(|message| InstallError::Index {
        from: artifact.into(),
        message,
    })?;
    staging.commit(prefix, std::slice::from_ref(&r), &existing)?;
    Ok(r)
}

/// `<parent>/.<prefix name>.tmp-…`, removed on drop unless committed.
struct Staging {
    dir: PathBuf,
}

impl Staging {
    fn new(prefix: &Path) -> Result<Staging, InstallError> {
        let dir = crate::fsutil::staging_dir(prefix).map_err(ioe(prefix))?;
        Ok(Staging { dir })
    }

    /// Moves the staged tree into `prefix`: one rename when the prefix is new or empty,
    /// otherwise a merge that first checks every path for conflicts, writes the receipts, then
    /// renames each entry in.
    fn commit(
        self,
        prefix: &Path,
        receipts: &[Receipt],
        existing: &[Receipt],
    ) -> Result<(), InstallError> {
        let empty = match std::fs::read_dir(prefix) {
            Ok(mut rd) => rd.next().is_none(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => true,
            Err(e) => return Err(ioe(prefix)(e)),
        };
        if empty {
            for r in receipts {
                receipt::write(&self.dir, r).map_err(ioe(&self.dir))?;
            }
            if prefix.exists() {
                std::fs::remove_dir(prefix).map_err(ioe(prefix))?;
            }
            std::fs::rename(&self.dir, prefix).map_err(ioe(prefix))?;
            crate::fsutil::sync_dir(prefix.parent().unwrap_or(Path::new(".")));
            return Ok(());
        }
        // Who owns what now; the components being replaced (same name) give up their files.
        let replacing: BTreeSet<&str> = receipts.iter().map(|r| r.name.as_str()).collect();
        let mut owner: BTreeMap<&str, &str> = BTreeMap::new();
        for r in existing {
            for f in &r.files {
                owner.insert(f, &r.name);
            }
        }
        for r in receipts {
            // A file of a component being replaced may stand where a directory now goes: the
            // merge removes it first (merge::apply).
            let in_the_way = |p: &str| {
                std::fs::symlink_metadata(prefix.join(p)).is_ok_and(|m| !m.is_dir())
                    && !owner.get(p).is_some_and(|o| replacing.contains(o))
            };
            for f in &r.files {
                let dest = prefix.join(f);
                let mut anc = Path::new(f.as_str()).parent();
                while let Some(a) = anc.filter(|a| !a.as_os_str().is_empty()) {
                    let a_str = a.to_str().unwrap_or_default();
                    if in_the_way(a_str) {
                        return Err(InstallError::Conflict {
                            path: a.display().to_string(),
                            owner: owner.get(a_str).map(|s| s.to_string()),
                        });
                    }
                    anc = a.parent();
                }
                if std::fs::symlink_metadata(&dest).is_ok() {
                    match owner.get(f.as_str()) {
                        Some(o) if replacing.contains(o) => {}
                        o => {
                            return Err(InstallError::Conflict {
                                path: f.clone(),
                                owner: o.map(|s| s.to_string()),
                            });
                        }
                    }
                }
            }
            for d in &r.dirs {
                if in_the_way(d) {
                    return Err(InstallError::Conflict {
                        path: d.clone(),
                        owner: owner.get(d.as_str()).map(|s| s.to_string()),
                    });
                }
            }
        }
        let new_files: BTreeSet<&str> = receipts
            .iter()
            .flat_map(|r| r.files.iter().map(String::as_str))
            .collect();
        let journal = merge::Journal {
            receipts: receipts.to_vec(),
            remove: existing
                .iter()
                .filter(|r| replacing.contains(r.name.as_str()))
                .flat_map(|r| r.files.iter())
                .filter(|f| !new_files.contains(f.as_str()))
                .cloned()
                .collect(),
        };
        // Journaled first, so a merge cut short is finished by the next command (merge.rs).
        merge::begin(&self.dir, &journal).map_err(ioe(&self.dir))?;
        crate::fault::point("install");
        merge::apply(&self.dir, prefix, &journal).map_err(ioe(prefix))
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        let _ = crate::fsutil::remove_tree(&self.dir);
    }
}
