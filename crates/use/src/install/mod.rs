//! `rocforge install`: a signed index → artifacts (with dependencies) → verified downloads →
//! safe extraction into a staging directory beside the prefix → renamed or merged in, with a
//! receipt per component. Until the final rename nothing in the prefix changes, so a failed or
//! interrupted install leaves it exactly as it was.
//!
//! In two halves: [`plan`] decides everything that can be decided without downloading (what,
//! from where, into what) and writes nothing, so `install --dry-run` prints it; [`execute`]
//! carries the plan out.

mod execute;
pub mod links;
pub mod merge;
pub mod origin;
pub mod plan;
pub mod receipt;
pub mod report;
mod runtime;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use reqwest::Url;

use crate::download::{DownloadError, DownloadOptions};
use crate::ids::ComponentName;
use crate::package::extract;
use crate::package::index::{INDEX_NAME, Index, MAX_INDEX_BYTES};
use crate::progress::Reporter;
use crate::sign::{PublicKey, SignError};
use crate::units::{now_unix, parse_rfc3339};
use receipt::Receipt;

pub use crate::package::extract::DEFAULT_MAX_BYTES;
pub use execute::unpack_into;
pub use plan::{InstallPlan, PLAN_SCHEMA, host_glibc, resolve};
pub use runtime::{HOST_LIBS_ENV, HostRuntime, host_hip_runtime};

#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    #[error("cannot read the index {from}: {message}")]
    Index { from: String, message: String },
    /// The index's server answered, and has no index.json: nothing was published there.
    #[error("no rocforge release has been published at {from} yet (HTTP 404)")]
    NotPublished { from: String },
    /// No answer at all: the name did not resolve, or the connection was refused or timed out.
    #[error("cannot reach the index {from}: {message}")]
    Unreachable { from: String, message: String },
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
        /// A near name the index does hold, when the component is not there at all.
        near: Option<String>,
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
    /// Libraries the install's files link that nothing installed or on this system provides.
    #[error("{}", unresolved_message(missing, searched))]
    Unresolved {
        missing: Vec<links::Missing>,
        /// Where this system's libraries were looked for.
        searched: Vec<String>,
    },
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
    /// A test-client artifact tests one library build: it is never installed beside another.
    #[error(
        "{tests} tests {library} {wanted}, but the installed {library} is {installed}: the test client would run against another build than the one it was built with"
    )]
    TestsLibraryMismatch {
        tests: String,
        library: String,
        /// The library key the tests artifact was built against (short form).
        wanted: String,
        installed: String,
    },
    #[error("{name} {installed} is installed; the index offers the older {offered}")]
    Downgrade {
        name: String,
        installed: String,
        offered: String,
    },
}

impl crate::diag::Hint for InstallError {
    fn hint(&self) -> String {
        match self {
            InstallError::Index { .. } => "check --from: a directory or URL holding index.json".into(),
            InstallError::NotPublished { .. } => format!("build it here instead: {}", build_it_yourself(&[], &[])),
            InstallError::Unreachable { .. } => format!("check the network (DNS, a proxy: HTTPS_PROXY); or build it here: {}", build_it_yourself(&[], &[])),
            InstallError::Unsigned { .. } => "ask the publisher for a signed index, or pass --allow-unsigned if you trust the source and the connection".into(),
            InstallError::Signature(e) => e.hint(),
            InstallError::SignatureNotes { source, .. } => source.hint(),
            InstallError::Trust(e) => e.hint(),
            InstallError::Expired { .. } => "fetch a current index from the publisher; an expired index is never used".into(),
            InstallError::BadDate { .. } => "the index's issued/expires must be RFC 3339 UTC, e.g. 2025-06-01T00:00:00Z".into(),
            InstallError::NotInIndex { near: Some(near), .. } => format!("did you mean \"{near}\"? (a name the index holds)"),
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
            InstallError::Unresolved { missing, .. } => format!(
                "install the system's package that provides {} (Debian: `apt-file search {}`), or \
                 install where the line runs (the debian-6.4 line: inside its runtime image, \
                 `rocforge image create COMPONENTS --kind runtime`), or pass --no-runtime-check to \
                 install anyway ({HOST_LIBS_ENV}=DIR:… names where to look instead)",
                missing.iter().map(|m| m.soname.as_str()).collect::<Vec<_>>().join(", "),
                missing.first().map(|m| m.soname.as_str()).unwrap_or_default()
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
            InstallError::TestsLibraryMismatch { tests, library, .. } => format!("install {tests} from the index that published the installed {library}, or first replace it with the {library} {tests} was built against (`rocforge install {library} --from URL` from this index), or `rocforge build {tests}` against the installed build"),
            InstallError::Downgrade { .. } => "an old index (a mirror replaying it?) would replace a newer install; pass --allow-downgrade if you mean it".into(),
        }
    }
}

fn unresolved_message(missing: &[links::Missing], searched: &[String]) -> String {
    let lines: Vec<String> = missing
        .iter()
        .map(|m| format!("  {} (needed by {} of {})", m.soname, m.path, m.artifact))
        .collect();
    format!(
        "{} librar{} the install links {} not in it, in the prefix, or on this system (searched {}); nothing was installed:\n{}",
        missing.len(),
        if missing.len() == 1 { "y" } else { "ies" },
        if missing.len() == 1 { "is" } else { "are" },
        searched.join(", "),
        lines.join("\n")
    )
}

/// The commands that make and install a build of `components` without any published release.
pub fn build_it_yourself(components: &[String], targets: &[crate::arch::TargetId]) -> String {
    let c = if components.is_empty() {
        "COMPONENT".to_string()
    } else {
        components.join(" ")
    };
    let arch = if targets.is_empty() {
        "TARGET".to_string()
    } else {
        crate::arch::comma_list(targets)
    };
    format!(
        "`rocforge build {c} --arch {arch}`, then `rocforge package {c} --arch {arch} --out dist`, then `rocforge install {c} --arch {arch} --from ./dist` (docs/artifacts.md)"
    )
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
            |u| crate::download::redact_url(u.as_str()),
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

/// What a signed index still must not say that its types do not already refuse when it is
/// read (names, targets, keys and digests are checked by [`crate::ids`]): a version that is
/// not a plain word (it becomes part of messages and paths).
fn check_index(index: &Index, from: &str) -> Result<(), InstallError> {
    use crate::package::extract::shown;
    const WORD: &str = "is not a plain word (at most 128 printable characters, no spaces)";
    for a in &index.artifacts {
        if !crate::package::manifest::is_plain_word(&a.version) {
            return Err(InstallError::BadField {
                from: from.into(),
                artifact: shown(&a.name),
                field: "version",
                value: shown(&a.version),
                rule: WORD,
            });
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
/// Why a small file could not be read; `unreachable`: no server answered (DNS, refused, a
/// timeout), as against one that answered with an error.
struct FetchError {
    message: String,
    unreachable: bool,
}

impl From<String> for FetchError {
    fn from(message: String) -> Self {
        FetchError {
            message,
            unreachable: false,
        }
    }
}

impl From<FetchError> for String {
    fn from(e: FetchError) -> Self {
        e.message
    }
}

fn fetch_small(
    client: &reqwest::blocking::Client,
    url: &Url,
) -> Result<Option<Vec<u8>>, FetchError> {
    let start = std::time::Instant::now();
    if url.scheme() == "file" {
        let p = url
            .to_file_path()
            .map_err(|()| "bad file URL".to_string())?;
        return match crate::fsutil::open_regular(&p) {
            Ok(f) => Ok(Some(read_small(f, start)?)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(format!("{}: {e}", p.display()).into()),
        };
    }
    // Errors without the URL: it may carry credentials, and the caller names the file.
    let resp = client.get(url.clone()).send().map_err(|e| FetchError {
        unreachable: e.is_connect() || e.is_timeout(),
        message: with_causes(&e.without_url()),
    })?;
    if resp.status() == reqwest::StatusCode::NOT_FOUND {
        return Ok(None);
    }
    if !resp.status().is_success() {
        return Err(format!("HTTP {}", resp.status().as_u16()).into());
    }
    Ok(Some(read_small(resp, start)?))
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
    load_index_as(client, from, keys, allow_unsigned, true)
}

/// [`load_index`]; `save_trust`: whether the key lists seen are recorded in the trust state
/// (their sequence, against replays), which a dry run leaves alone.
fn load_index_as(
    client: &reqwest::blocking::Client,
    from: &str,
    keys: &[PublicKey],
    allow_unsigned: bool,
    save_trust: bool,
) -> Result<LoadedIndex, InstallError> {
    let url = index_url(from)?;
    let shown = crate::download::redact_url(url.as_str());
    let bad = |message: String| InstallError::Index {
        from: shown.clone(),
        message,
    };
    let remote = url.scheme() != "file";
    let bytes = match fetch_small(client, &url) {
        Ok(Some(b)) => b,
        Ok(None) if remote => return Err(InstallError::NotPublished { from: shown }),
        Ok(None) => return Err(bad("not found".into())),
        Err(e) if e.unreachable => {
            return Err(InstallError::Unreachable {
                from: shown,
                message: e.message,
            });
        }
        Err(e) => return Err(bad(e.message)),
    };
    if bytes.len() as u64 > MAX_INDEX_BYTES {
        return Err(bad(format!("larger than {MAX_INDEX_BYTES} bytes")));
    }
    let sig_url = Url::parse(&format!("{url}.minisig")).map_err(|e| bad(e.to_string()))?;
    let sig = fetch_small(client, &sig_url).map_err(|e| bad(e.message))?;
    let mut key_list = None;
    let mut trust_notes = Vec::new();
    let (signer, unsigned_reason) = match sig {
        None if allow_unsigned => (None, Some(format!("{shown} has no signature"))),
        None => return Err(InstallError::Unsigned { from: shown }),
        Some(sig) => {
            let text = String::from_utf8_lossy(&sig);
            let state = crate::trust::StateFile::load_default()
                .map(|s| if save_trust { s } else { s.read_only() });
            let resolved = state.and_then(|mut state| {
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
    Ok(LoadedIndex {
        index: parse_index(&bytes, &shown)?,
        url,
        signer,
        unsigned_reason,
        key_list,
        trust_notes,
    })
}

/// The index's JSON, its fields checked ([`check_index`]), its dates valid and not expired.
pub fn parse_index(bytes: &[u8], shown: &str) -> Result<Index, InstallError> {
    // The path names the artifact a typed value refused (`artifacts[3]: "…" is not a content
    // key`), which serde's own message leaves out.
    let index: Index =
        serde_path_to_error::deserialize(&mut serde_json::Deserializer::from_slice(bytes))
            .map_err(|e| InstallError::Index {
                from: shown.to_string(),
                message: match e.path().to_string() {
                    p if p == "." => format!("invalid JSON: {}", e.inner()),
                    p => format!("{p}: {}", e.inner()),
                },
            })?;
    check_index(&index, shown)?;
    let date = |value: &String| {
        parse_rfc3339(value).map_err(|_| InstallError::BadDate {
            from: shown.to_string(),
            value: value.clone(),
        })
    };
    let expires = date(&index.expires)?;
    date(&index.issued)?;
    if now_unix() > expires {
        return Err(InstallError::Expired {
            from: shown.to_string(),
            expires: index.expires.clone(),
        });
    }
    Ok(index)
}

pub struct Request<'a> {
    pub components: &'a [String],
    /// Sorted, deduplicated target IDs; empty when not given.
    pub targets: &'a [crate::arch::TargetId],
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

pub struct Report {
    pub installed: Vec<Receipt>,
    /// Those of `installed` whose build's coverage record lists libraries with GPU code.
    pub with_device_code: Vec<ComponentName>,
    /// Those of `installed` that were installed already with files missing, and how many.
    pub repaired: Vec<(ComponentName, usize)>,
    pub already: Vec<ComponentName>,
    pub signer: Option<String>,
    pub unsigned_reason: Option<String>,
}

/// The client for the index and its artifacts: a redirect may only go where the index's
/// artifacts may (its origin and `--allow-host`).
fn client(req: &Request<'_>) -> Result<reqwest::blocking::Client, InstallError> {
    Ok(crate::download::client_confined(
        &req.download,
        &index_url(req.from)?,
        req.allowed_hosts,
    ))
}

/// What the checked index says about its own trust, for the user to read before anything else.
fn index_notes(loaded: &LoadedIndex) -> Vec<String> {
    let mut notes = Vec::new();
    if let Some(why) = &loaded.unsigned_reason {
        notes.push(format!(
            "WARNING: installing WITHOUT a verified signature (--allow-unsigned): {why}"
        ));
    }
    notes.extend(loaded.trust_notes.iter().map(|n| format!("warning: {n}")));
    if let Some(c) = &loaded.key_list {
        notes.push(format!(
            "key list: sequence {} ({} list{} from key {})",
            c.sequence,
            c.lists,
            if c.lists == 1 { "" } else { "s" },
            c.anchor
        ));
    }
    notes
}

/// The plan [`install`] would carry out now, and nothing else: no lock, no download, no
/// staging, not even the trust state of key lists is saved. A merge a killed install left
/// pending is not completed (the next install does that first); a note says so.
pub fn plan(req: &Request<'_>) -> Result<InstallPlan, InstallError> {
    let loaded = load_index_as(&client(req)?, req.from, req.keys, req.allow_unsigned, false)?;
    let existing = receipt::read_all(req.prefix);
    let mut plan = plan::make(&loaded, req, &existing)?;
    let mut notes = index_notes(&loaded);
    if merge::pending(req.prefix) {
        notes.push(format!(
            "an install or uninstall in {} was cut short or is running; the next install completes it first, which may change this plan",
            req.prefix.display()
        ));
    }
    notes.append(&mut plan.notes);
    plan.notes = notes;
    Ok(plan)
}

pub fn install(req: &Request<'_>, reporter: &dyn Reporter) -> Result<Report, InstallError> {
    let client = client(req)?;
    let loaded = load_index(&client, req.from, req.keys, req.allow_unsigned)?;
    for n in index_notes(&loaded) {
        reporter.note(&n);
    }
    // Resolved before the lock: a component the index lacks needs no wait.
    resolve(&loaded.index, req.components, req.targets)?;
    // Installs into one prefix take turns; one that a kill -9 cut short is finished first.
    let _lock = merge::lock(req.prefix, true, &|| {
        reporter.note(&format!(
            "waiting for another rocforge process installing into {}",
            req.prefix.display()
        ))
    })
    .map_err(ioe(req.prefix))?;
    let done = merge::recover(req.prefix).map_err(ioe(req.prefix))?;
    for name in &done.uninstalled {
        reporter.note(&format!(
            "completed the uninstall of {name} that a killed run had begun"
        ));
    }
    for name in &done.installed {
        reporter.note(&format!(
            "completed the install of {name} that a killed run had begun"
        ));
    }
    let existing = receipt::read_all(req.prefix);
    let plan = plan::make(&loaded, req, &existing)?;
    for n in &plan.notes {
        reporter.note(n);
    }
    execute::execute(&plan, &client, req, &existing, reporter)
}
