//! Sharing results bundles: `rocforge test --submit` pushes one, `rocforge report oci://…`
//! pulls every one a repository holds, so volunteers' runs compile into one report.
//!
//! - `oci://REGISTRY/REPO`: an OCI artifact tagged `results-<component>-<target>-<machine>-<finished>`
//!   (an image manifest whose config blob is a short summary of the run, with results.json and
//!   junit.xml as layers, and their minisign signatures as more layers when signed).
//! - `http://…` or `https://…`: an HTTP PUT of results.json to `URL/<machine>-<run-id>.json`
//!   (run id `<component>-<target>[-spoofed]-<finished>`), and of its signature to the same name
//!   with `.minisig` when signed; `Authorization: Bearer $ROCFORGE_SUBMIT_TOKEN` when set.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use reqwest::blocking::Client;

use super::bundle::Bundle;
use crate::oci::{
    Descriptor, IMAGE_MANIFEST, ImageManifest, OciError, Remote, Repository, SIGNATURE_TYPE, TITLE,
};
use crate::sign::{SecretKey, SignError};

pub const RESULTS_CONFIG: &str = "application/vnd.rocforge.results.config.v1+json";
pub const RESULTS_JSON: &str = "application/vnd.rocforge.results.v1+json";
pub const JUNIT_XML: &str = "application/vnd.rocforge.junit.v1+xml";
/// Results artifacts' tags start so; `rocforge report` pulls only these.
pub const TAG_PREFIX: &str = "results-";
/// The bearer token an HTTP submission sends, when set.
pub const TOKEN_ENV: &str = "ROCFORGE_SUBMIT_TOKEN";
/// A results.json larger than this is refused when pulled (300,000 tests are ~60 MiB): the
/// same limit as for a results.json read from disk.
pub const MAX_RESULTS: u64 = 256 << 20;
/// What all the results pulled from one repository may add up to, on disk before any is
/// trusted: a few hundred volunteers' runs of a few MiB each.
const MAX_PULLED: u64 = 2 << 30;
/// A minisign signature is a few hundred bytes; anything much larger is not one.
const MAX_SIGNATURE: u64 = 64 << 10;

#[derive(Debug, thiserror::Error)]
pub enum ShareError {
    #[error("unknown submission destination \"{0}\"")]
    Destination(String),
    #[error(transparent)]
    Oci(#[from] OciError),
    #[error("{url}: {message}")]
    Http { url: String, message: String },
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error(transparent)]
    Sign(#[from] SignError),
    #[error("{reference} is not a results bundle: {message}")]
    Invalid { reference: String, message: String },
}

impl crate::diag::Hint for ShareError {
    fn hint(&self) -> String {
        match self {
            ShareError::Destination(_) => {
                "submit to oci://REGISTRY/REPO (an OCI registry) or an http(s):// URL that takes PUT".into()
            }
            ShareError::Oci(e) => e.hint(),
            ShareError::Http { .. } => format!(
                "check the URL and that it accepts PUT; set {TOKEN_ENV} when it wants a bearer token"
            ),
            ShareError::Io { .. } => "check the results directory (--out)".into(),
            ShareError::Sign(e) => e.hint(),
            ShareError::Invalid { .. } => {
                "the repository holds something else under a results- tag: push results with `rocforge test --submit`".into()
            }
        }
    }
}

/// Where `--submit` sends a bundle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destination {
    Oci(Repository),
    Http(String),
}

impl Destination {
    pub fn parse(s: &str) -> Result<Destination, ShareError> {
        if s.starts_with("oci://") {
            Ok(Destination::Oci(Repository::parse(s)?))
        } else if s.starts_with("http://") || s.starts_with("https://") {
            Ok(Destination::Http(s.trim_end_matches('/').to_string()))
        } else {
            Err(ShareError::Destination(s.to_string()))
        }
    }
}

/// `results-<component>-<target>-<machine>-<finished>`, as a valid tag.
pub fn results_tag(b: &Bundle) -> String {
    crate::oci::sanitize_tag(&format!(
        "{TAG_PREFIX}{}-{}{}-{}-{}",
        b.component.name,
        b.arch,
        if b.spoofed { "-spoofed" } else { "" },
        b.machine,
        b.finished
    ))
}

/// `<machine>-<component>-<target>[-spoofed]-<finished>.json`, the name an HTTP submission PUTs.
pub fn results_file_name(b: &Bundle) -> String {
    format!(
        "{}.json",
        crate::oci::sanitize_tag(&format!(
            "{}-{}-{}{}-{}",
            b.machine,
            b.component.name,
            b.arch,
            if b.spoofed { "-spoofed" } else { "" },
            b.finished
        ))
    )
}

/// Pushes `dir`'s results.json and junit.xml (signed with `key` first, when given). Returns
/// where they went.
pub fn submit(
    client: &Client,
    dest: &Destination,
    dir: &Path,
    bundle: &Bundle,
    key: Option<&SecretKey>,
) -> Result<String, ShareError> {
    let files = ["results.json", "junit.xml"].map(|f| dir.join(f));
    let mut sigs = Vec::new();
    if let Some(k) = key {
        for f in &files {
            sigs.push(crate::sign::sign_file(k, f)?);
        }
    }
    match dest {
        Destination::Oci(repo) => {
            let remote = Remote::new(client.clone(), repo.clone());
            let mut layers = Vec::new();
            for (i, (f, media)) in files.iter().zip([RESULTS_JSON, JUNIT_XML]).enumerate() {
                layers.push(push_file(&remote, media, f)?);
                if let Some(s) = sigs.get(i) {
                    layers.push(push_file(&remote, SIGNATURE_TYPE, s)?);
                }
            }
            let config = serde_json::json!({
                "schema": "rocforge.results-artifact/1",
                "component": bundle.component.name,
                "version": bundle.component.version,
                "key": bundle.component.key,
                "arch": bundle.arch,
                "spoofed": bundle.spoofed,
                "machine": bundle.machine,
                "finished": bundle.finished,
                "summary": bundle.summary,
            });
            let config = remote.push_bytes(
                RESULTS_CONFIG,
                &serde_json::to_vec_pretty(&config).expect("plain data"),
            )?;
            let annotations: BTreeMap<String, String> = [
                (TITLE, "results.json".to_string()),
                (
                    "org.opencontainers.image.version",
                    bundle.component.version.clone(),
                ),
                ("rocforge.component", bundle.component.name.to_string()),
                ("rocforge.arch", bundle.arch.clone()),
                ("rocforge.machine", bundle.machine.clone()),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
            let tag = results_tag(bundle);
            remote.put_manifest(
                &tag,
                &ImageManifest {
                    schema_version: 2,
                    media_type: IMAGE_MANIFEST.into(),
                    artifact_type: Some(RESULTS_CONFIG.into()),
                    config,
                    layers,
                    annotations,
                },
            )?;
            Ok(repo.reference(&tag))
        }
        Destination::Http(base) => {
            let name = results_file_name(bundle);
            let url = format!("{base}/{name}");
            put(client, &url, &files[0])?;
            if let Some(s) = sigs.first() {
                put(client, &format!("{url}.minisig"), s)?;
            }
            Ok(url)
        }
    }
}

fn read(path: &Path) -> Result<Vec<u8>, ShareError> {
    std::fs::read(path).map_err(|source| ShareError::Io {
        path: path.display().to_string(),
        source,
    })
}

fn push_file(remote: &Remote, media: &str, path: &Path) -> Result<Descriptor, ShareError> {
    let mut d = remote.push_bytes(media, &read(path)?)?;
    if let Some(n) = path.file_name() {
        d.annotations
            .insert(TITLE.into(), n.to_string_lossy().into_owned());
    }
    Ok(d)
}

fn put(client: &Client, url: &str, path: &Path) -> Result<(), ShareError> {
    let mut rb = client
        .put(url)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(read(path)?);
    if let Ok(t) = std::env::var(TOKEN_ENV)
        && !t.is_empty()
    {
        rb = rb.bearer_auth(t);
    }
    let shown = crate::download::redact_url(url);
    let resp = rb.send().map_err(|e| ShareError::Http {
        url: shown.clone(),
        message: e.without_url().to_string(),
    })?;
    if !resp.status().is_success() {
        return Err(ShareError::Http {
            url: shown,
            message: format!("the server answered {}", resp.status()),
        });
    }
    Ok(())
}

/// One results artifact pulled from a registry.
pub struct Pulled {
    /// `REGISTRY/REPO:TAG`.
    pub reference: String,
    /// results.json, streamed to disk (within the size limit, digest checked): read it only
    /// after deciding to trust it.
    pub results: PathBuf,
    /// The minisign signature of `results` pushed with it, when the submitter signed.
    pub signature: Option<String>,
}

/// Every results bundle the repository holds (tags starting with `results-`), in tag order.
/// Signatures are returned, not checked: which keys to trust is the caller's decision. Each
/// results.json is streamed into `dir` (held to [`MAX_RESULTS`] and its digest as it arrives),
/// so no bundle is held in memory before it is trusted.
pub fn pull_all(client: &Client, repo: &Repository, dir: &Path) -> Result<Vec<Pulled>, ShareError> {
    let remote = Remote::new(client.clone(), repo.clone());
    let mut out = Vec::new();
    let mut pulled: u64 = 0;
    for tag in remote.list_tags()? {
        if !tag.starts_with(TAG_PREFIX) {
            continue;
        }
        let reference = repo.reference(&tag);
        let invalid = |message: String| ShareError::Invalid {
            reference: reference.clone(),
            message,
        };
        let Some((_, bytes)) = remote.get_manifest(&tag)? else {
            continue; // deleted between listing and fetching
        };
        let m: ImageManifest =
            serde_json::from_slice(&bytes).map_err(|e| invalid(e.to_string()))?;
        if m.config.media_type != RESULTS_CONFIG {
            return Err(invalid(format!(
                "its config is {}, not {RESULTS_CONFIG}",
                m.config.media_type
            )));
        }
        let at = m
            .layers
            .iter()
            .position(|l| l.media_type == RESULTS_JSON)
            .ok_or_else(|| invalid(format!("no {RESULTS_JSON} layer")))?;
        let layer = &m.layers[at];
        if layer.size > MAX_RESULTS {
            return Err(invalid(format!("results.json is {} bytes", layer.size)));
        }
        pulled = pulled.saturating_add(layer.size);
        if pulled > MAX_PULLED {
            return Err(invalid(format!(
                "the results up to this one add up to more than {}, the most one report pulls; pass the runs to report as files instead",
                crate::units::format_size(MAX_PULLED)
            )));
        }
        // `submit` pushes each file's signature as the layer right after it.
        let signature =
            match m.layers.get(at + 1) {
                Some(l) if l.media_type == SIGNATURE_TYPE => {
                    if l.size > MAX_SIGNATURE {
                        return Err(invalid(format!("its signature is {} bytes", l.size)));
                    }
                    let bytes = remote.get_blob_bytes(&l.digest, MAX_SIGNATURE)?;
                    Some(String::from_utf8(bytes).map_err(|_| {
                        invalid("its signature layer is not minisign text".to_string())
                    })?)
                }
                _ => None,
            };
        let file = dir.join(format!("{}.json", out.len()));
        remote.get_blob_to_file(&layer.digest, MAX_RESULTS, &file)?;
        out.push(Pulled {
            results: file,
            reference,
            signature,
        });
    }
    Ok(out)
}
