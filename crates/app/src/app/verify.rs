//! `verify --rebuild`: a published tarball rebuilt from the inputs its manifest records (release,
//! component, targets, content key) with this catalog, packaged the same way, and compared with
//! the published bytes.

use std::io::Read;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::runtime::RuntimeChoice;
use super::{Error, Result, Session};
use crate::diag::Diagnostic;
use crate::ids::ArtifactId;
use crate::package::manifest::MANIFEST_NAME;
use crate::package::tarball::Compression;
use crate::plan::StoreView;
use crate::runtime::RuntimeName;
use crate::store::Store;

pub const REPORT_SCHEMA: &str = "rocforge.verify-rebuild/1";

pub struct Request<'a> {
    /// A tarball's path or http(s) URL.
    pub artifact: &'a str,
    /// `--store`: rebuild there when it does not hold the artifact's key yet (the entry stays).
    pub store: Option<&'a Path>,
    pub jobs: Option<usize>,
}

/// What the comparison found.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Report {
    pub schema: &'static str,
    pub artifact: String,
    #[serde(flatten)]
    pub id: ArtifactId,
    pub runtime: String,
    #[serde(flatten)]
    pub outcome: Outcome,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(tag = "result", rename_all = "kebab-case")]
pub enum Outcome {
    /// Rebuilt and packaged: the same bytes.
    Identical { sha256: String, store: StoreUsed },
    /// Rebuilt and packaged: other bytes.
    Differs {
        published_sha256: String,
        rebuilt_sha256: String,
        difference: Difference,
        store: StoreUsed,
    },
    /// This catalog plans another key for the recorded inputs: nothing was built.
    KeyDiffers {
        recorded: String,
        planned: String,
        /// The hash input's fields that differ (`component.source`, `image`, …).
        changed: Vec<String>,
    },
}

impl Outcome {
    pub fn identical(&self) -> bool {
        matches!(self, Outcome::Identical { .. })
    }
}

/// Where the rebuild went.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct StoreUsed {
    pub path: PathBuf,
    /// False: a temporary store, removed afterwards.
    pub kept: bool,
}

/// The first difference, in the manifest's path order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Difference {
    /// A path of the tree, or `rocforge-manifest.json`, or the whole tarball.
    pub path: String,
    /// size, mode, bytes, kind, symlink-target, mtime, owner, missing, extra, manifest or
    /// compression.
    pub how: String,
    pub published: String,
    pub rebuilt: String,
}

fn io_err(what: &Path, e: impl std::fmt::Display) -> Error {
    Error::hinted(
        format!("{}: {e}", what.display()),
        "check the path, free disk space and permissions",
    )
}

/// The artifact as a local file: a path as it is, a URL downloaded into `dir`.
fn fetch(artifact: &str, dir: &Path) -> Result<PathBuf> {
    if !(artifact.starts_with("http://") || artifact.starts_with("https://")) {
        let p = PathBuf::from(artifact);
        if !p.is_file() {
            return Err(Diagnostic::new(format!("{artifact}: no such file"))
                .hint("name a tarball written by `rocforge package` (a path or an http(s) URL)")
                .into());
        }
        return Ok(p);
    }
    let name = artifact
        .rsplit('/')
        .next()
        .filter(|n| !n.is_empty())
        .unwrap_or("artifact.tar.zst");
    let client = crate::net::try_client(&crate::net::HttpOptions::default())
        .map_err(|e| Error::hinted(e, "check the TLS setup"))?;
    let shown = crate::redact::url(artifact);
    let net = |e: &dyn std::fmt::Display| {
        Error::hinted(
            format!("{shown}: {e}"),
            "check the URL and the network; a local copy works too",
        )
    };
    let mut resp = client.get(artifact).send().map_err(|e| net(&e))?;
    if !resp.status().is_success() {
        return Err(net(&format!("HTTP {}", resp.status())));
    }
    let path = dir.join(name);
    let mut f = std::fs::File::create(&path).map_err(|e| io_err(&path, e))?;
    std::io::copy(&mut resp, &mut f).map_err(|e| net(&e))?;
    Ok(path)
}

/// Rebuilds `req.artifact` and compares. The session gives the catalog, lock and configuration;
/// the manifest says the release line, targets and runtime.
pub fn rebuild(session: &Session, req: &Request<'_>) -> Result<Report> {
    let scratch = crate::fsutil::temp_dir_in(&ensure_dir(session.cache.root())?)
        .map_err(|e| io_err(session.cache.root(), e))?;
    let (published, compression, manifest) = read_published(req.artifact, scratch.path())?;
    let id = manifest.id.clone();
    let report = |outcome| Report {
        schema: REPORT_SCHEMA,
        artifact: req.artifact.to_string(),
        id: id.clone(),
        runtime: manifest.runtime.to_string(),
        outcome,
    };
    let runtime = match manifest.runtime {
        RuntimeName::Host => RuntimeChoice::Host,
        RuntimeName::Docker => RuntimeChoice::Docker,
        // Podman, and a runtime this version does not know: rebuilt in the default one.
        _ => RuntimeChoice::Podman,
    };
    let arch = crate::arch::comma_list(&id.targets);
    let open = |store: Option<PathBuf>| {
        Session::open(
            super::Options {
                release: Some(id.release.clone()),
                store,
                arch: (!id.targets.is_empty()).then(|| arch.clone()),
                ..session.options.clone()
            },
            session.reporter.clone(),
        )
    };
    let component = [id.name.to_string()];
    let build_req = super::build::Request {
        components: &component,
        jobs: req.jobs,
        runtime: Some(runtime),
        // Never continued from a build directory a stopped build of the key left.
        fresh: true,
        ..Default::default()
    };
    let planned = super::build::plan(&open(session.options.store.clone())?, &build_req)?;
    let step = planned
        .plan
        .step(&id.name)
        .expect("the plan holds what it was asked for");
    if step.key != id.key {
        return Ok(report(Outcome::KeyDiffers {
            recorded: id.key.to_string(),
            planned: step.key.to_string(),
            changed: crate::plan::key::changed_inputs(
                &manifest.hash_input,
                &step.hash_input.to_value(),
            ),
        }));
    }

    // A store that holds the key already would be packaged, not rebuilt.
    let temporary;
    let (store_path, kept) = match req.store {
        Some(s)
            if !Store::open(s)
                .entry_dir(&id.key)
                .join("meta.json")
                .is_file() =>
        {
            (s.to_path_buf(), true)
        }
        _ => {
            temporary = scratch.path().join("store");
            (temporary.clone(), false)
        }
    };
    let builder = open(Some(store_path.clone()))?;
    let out_dir = scratch.path().join("rebuilt");
    let rebuilt = build_and_package(&builder, &build_req, &id, compression, &out_dir)?;
    let store = StoreUsed {
        path: store_path,
        kept,
    };
    let published_sha256 = sha256(&published)?;
    if published_sha256 == rebuilt.tarball.sha256 {
        return Ok(report(Outcome::Identical {
            sha256: published_sha256,
            store,
        }));
    }
    let difference = first_difference(&published, &rebuilt.tarball.path, compression)?;
    Ok(report(Outcome::Differs {
        published_sha256,
        rebuilt_sha256: rebuilt.tarball.sha256.clone(),
        difference,
        store,
    }))
}

/// The published tarball as a local file, its compression, and its manifest.
fn read_published(
    artifact: &str,
    dir: &Path,
) -> Result<(PathBuf, Compression, crate::package::manifest::Manifest)> {
    let published = fetch(artifact, dir)?;
    let file_name = published
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let compression = Compression::of(&file_name).ok_or_else(|| {
        Error::from(
            Diagnostic::new(format!("{artifact}: not a .tar.zst or .tar.gz"))
                .hint("name a tarball written by `rocforge package`"),
        )
    })?;
    let manifest = crate::package::tarball::read_manifest(&published)?;
    Ok((published, compression, manifest))
}

/// The artifact's entry built into `builder`'s store, then packaged into `out_dir` as
/// `rocforge package` would.
fn build_and_package(
    builder: &Session,
    build_req: &super::build::Request<'_>,
    id: &ArtifactId,
    compression: Compression,
    out_dir: &Path,
) -> Result<crate::package::Packaged> {
    let planned = super::build::plan(builder, build_req)?;
    let build = super::build::prepare(builder, planned, build_req)?;
    let outcome = build.run(builder)?;
    if let Some((c, crate::build::StepResult::Failed { error, hint, .. })) = outcome
        .report
        .steps
        .iter()
        .find(|(_, r)| matches!(r, crate::build::StepResult::Failed { .. }))
    {
        return Err(Error::hinted(
            format!("the rebuild of {} failed at {c}: {error}", id.name),
            hint.clone(),
        ));
    }
    if outcome.stopped || !builder.store.contains(&id.key) {
        return Err(Diagnostic::new(format!(
            "the rebuild of {} did not make the entry {}",
            id.name, id.key
        ))
        .hint("run the same command again (an interrupted rebuild continues)")
        .into());
    }
    let step = build.plan.step(&id.name).expect("planned");
    let mut build_paths = vec![
        builder.store.root().display().to_string(),
        builder.cache.root().display().to_string(),
    ];
    for p in [builder.store.root(), builder.cache.root()] {
        if let Ok(c) = p.canonicalize() {
            build_paths.push(c.display().to_string());
        }
    }
    let opts = crate::package::Options {
        compression,
        out_dir,
        build_paths,
        // Build paths in the rebuilt tree show as a difference, named below.
        allow_build_paths: true,
        license: builder.catalog.get(&id.name).map(|r| r.license.clone()),
        build_only: step.build_only.clone(),
        dependency_keys: step
            .depends
            .iter()
            .filter_map(|d| Some((d.clone(), build.plan.step(d)?.key.clone())))
            .collect(),
        key: None,
    };
    crate::package::package_entry(&builder.store, &id.key, &opts).map_err(Error::from)
}

fn ensure_dir(p: &Path) -> Result<PathBuf> {
    std::fs::create_dir_all(p).map_err(|e| io_err(p, e))?;
    Ok(p.to_path_buf())
}

fn sha256(p: &Path) -> Result<String> {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    let f = std::fs::File::open(p).map_err(|e| io_err(p, e))?;
    hash_into(f, &mut h).map_err(|e| io_err(p, e))?;
    Ok(hex::encode(h.finalize()))
}

fn hash_into(mut r: impl Read, h: &mut sha2::Sha256) -> std::io::Result<()> {
    use sha2::Digest;
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match r.read(&mut buf)? {
            0 => return Ok(()),
            n => h.update(&buf[..n]),
        }
    }
}

/// One tar entry as the comparison sees it.
struct Entry {
    path: String,
    kind: String,
    mode: u32,
    mtime: u64,
    owner: (u64, u64),
    size: u64,
    link: Option<String>,
    sha256: String,
    bytes: Vec<u8>,
}

fn entries(path: &Path, compression: Compression) -> Result<Vec<Entry>> {
    let f = std::fs::File::open(path).map_err(|e| io_err(path, e))?;
    let r: Box<dyn Read> = match compression {
        Compression::Gz => Box::new(flate2::read::GzDecoder::new(std::io::BufReader::new(f))),
        Compression::Zst => {
            Box::new(zstd::stream::read::Decoder::new(f).map_err(|e| io_err(path, e))?)
        }
    };
    let mut ar = tar::Archive::new(r);
    let mut out = Vec::new();
    for e in ar.entries().map_err(|e| io_err(path, e))? {
        use sha2::{Digest, Sha256};
        let mut e = e.map_err(|e| io_err(path, e))?;
        let h = e.header().clone();
        let name = String::from_utf8_lossy(&e.path_bytes()).into_owned();
        let mut hasher = Sha256::new();
        // Only the manifest's bytes are kept: it is compared field by field.
        let mut bytes = Vec::new();
        if name == MANIFEST_NAME {
            e.read_to_end(&mut bytes).map_err(|e| io_err(path, e))?;
            hasher.update(&bytes);
        } else {
            hash_into(&mut e, &mut hasher).map_err(|e| io_err(path, e))?;
        }
        out.push(Entry {
            path: name,
            kind: format!("{:?}", h.entry_type()),
            mode: h.mode().unwrap_or(0),
            mtime: h.mtime().unwrap_or(0),
            owner: (h.uid().unwrap_or(0), h.gid().unwrap_or(0)),
            size: h.size().unwrap_or(0),
            link: e
                .link_name_bytes()
                .map(|l| String::from_utf8_lossy(&l).into_owned()),
            sha256: hex::encode(hasher.finalize()),
            bytes,
        });
    }
    Ok(out)
}

/// The first entry, in tar order (the manifest's path order), where the two tarballs differ;
/// the manifest itself is compared last, field by field, as its file list differs wherever a
/// file does.
pub fn first_difference(
    published: &Path,
    rebuilt: &Path,
    compression: Compression,
) -> Result<Difference> {
    let (a, b) = (
        entries(published, compression)?,
        entries(rebuilt, compression)?,
    );
    let diff = |path: &str, how: &str, p: String, r: String| Difference {
        path: path.to_string(),
        how: how.to_string(),
        published: p,
        rebuilt: r,
    };
    let files = |v: &[Entry]| -> Vec<usize> {
        (0..v.len())
            .filter(|&i| v[i].path != MANIFEST_NAME)
            .collect()
    };
    let (fa, fb) = (files(&a), files(&b));
    let mut j = 0;
    for &i in &fa {
        let x = &a[i];
        let Some(y) = fb.get(j).map(|&k| &b[k]) else {
            return Ok(diff(&x.path, "missing", "present".into(), "absent".into()));
        };
        if y.path != x.path {
            // Sorted by path: the smaller name is the one the other tarball lacks.
            return Ok(if y.path < x.path {
                diff(&y.path, "extra", "absent".into(), "present".into())
            } else {
                diff(&x.path, "missing", "present".into(), "absent".into())
            });
        }
        j += 1;
        if let Some(d) = entry_difference(x, y) {
            return Ok(d);
        }
    }
    if let Some(&k) = fb.get(j) {
        return Ok(diff(&b[k].path, "extra", "absent".into(), "present".into()));
    }
    let manifest = |v: &[Entry]| -> Option<serde_json::Value> {
        let m = v.iter().find(|e| e.path == MANIFEST_NAME)?;
        serde_json::from_slice(&m.bytes).ok()
    };
    if let (Some(serde_json::Value::Object(ma)), Some(serde_json::Value::Object(mb))) =
        (manifest(&a), manifest(&b))
    {
        let fields: Vec<String> = ma
            .keys()
            .chain(mb.keys())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .filter(|k| ma.get(*k) != mb.get(*k))
            .cloned()
            .collect();
        if !fields.is_empty() {
            let show = |m: &serde_json::Map<String, serde_json::Value>| {
                fields
                    .iter()
                    .map(|f| {
                        let v = m.get(f).map_or("absent".into(), |v| v.to_string());
                        let v = if v.chars().count() > 80 {
                            format!("{}…", v.chars().take(80).collect::<String>())
                        } else {
                            v
                        };
                        format!("{f}={v}")
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            return Ok(diff(MANIFEST_NAME, "manifest", show(&ma), show(&mb)));
        }
    }
    // Manifest entries' headers (mtime) and anything else of the tar stream.
    let pair = (
        a.iter().find(|e| e.path == MANIFEST_NAME),
        b.iter().find(|e| e.path == MANIFEST_NAME),
    );
    if let (Some(x), Some(y)) = pair
        && (x.mtime, x.mode) != (y.mtime, y.mode)
    {
        return Ok(diff(
            MANIFEST_NAME,
            "mtime",
            x.mtime.to_string(),
            y.mtime.to_string(),
        ));
    }
    Ok(diff(
        "",
        "compression",
        "the same entries, other compressed bytes".into(),
        "the same entries, other compressed bytes".into(),
    ))
}

/// The first of the two same-path entries' attributes that differs, the bytes by their hash.
fn entry_difference(x: &Entry, y: &Entry) -> Option<Difference> {
    let checks: [(&str, String, String); 7] = [
        ("kind", x.kind.clone(), y.kind.clone()),
        ("size", x.size.to_string(), y.size.to_string()),
        ("mode", format!("{:o}", x.mode), format!("{:o}", y.mode)),
        (
            "symlink-target",
            x.link.clone().unwrap_or_default(),
            y.link.clone().unwrap_or_default(),
        ),
        ("bytes", x.sha256.clone(), y.sha256.clone()),
        ("mtime", x.mtime.to_string(), y.mtime.to_string()),
        (
            "owner",
            format!("{}:{}", x.owner.0, x.owner.1),
            format!("{}:{}", y.owner.0, y.owner.1),
        ),
    ];
    let (how, p, r) = checks.into_iter().find(|(_, p, r)| p != r)?;
    let (p, r) = if how == "bytes" {
        (format!("sha256 {p}"), format!("sha256 {r}"))
    } else {
        (p, r)
    };
    Some(Difference {
        path: x.path.clone(),
        how: how.to_string(),
        published: p,
        rebuilt: r,
    })
}
