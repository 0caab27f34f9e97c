//! Artifacts from the store: deterministic tarballs with a manifest (tarball.rs, manifest.rs),
//! `SHA256SUMS`, detached minisign signatures, and the signed release index (index.rs); and
//! the reverse, safe extraction (extract/) for installs and build cache pulls.

pub mod extract;
pub mod index;
pub mod manifest;
pub mod report;
pub mod tarball;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::ids::{ComponentName, ContentKey};
use crate::store::{EntryMeta, Store};
use manifest::{Dependency, MANIFEST_SCHEMA, Manifest};
use tarball::Compression;

#[derive(Debug, thiserror::Error)]
pub enum PackageError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot package {path}: {reason}")]
    BadEntry { path: String, reason: String },
    #[error("{path} changed while it was being packaged")]
    Changed { path: String },
    #[error("{path} is not the wheel {tarball} carries (sha256 {found}, the tarball's {recorded})")]
    ForeignWheel {
        path: String,
        tarball: String,
        found: String,
        recorded: String,
    },
    #[error("{component}: {} file(s) mention build paths, so the tree would not work elsewhere:\n{}",
        leaks.len(),
        leaks.iter().take(10).map(|(f, p)| format!("  {f} contains {p}")).collect::<Vec<_>>().join("\n"))]
    Leaks {
        component: String,
        leaks: Vec<(String, String)>,
    },
    #[error(transparent)]
    Sign(#[from] crate::sign::SignError),
    #[error(transparent)]
    Attest(#[from] crate::attest::AttestError),
}

impl crate::diag::Hint for PackageError {
    fn hint(&self) -> String {
        match self {
            PackageError::Io { .. } => "check the path, free disk space and permissions".into(),
            PackageError::BadEntry { .. } => {
                "fix the recipe's install step so the tree holds only relative symlinks, files and directories".into()
            }
            PackageError::Changed { .. } => "something modified the store entry; package again".into(),
            PackageError::ForeignWheel { .. } => {
                "the wheel beside the tarballs was replaced or is stale: package the component again into this directory, or remove the wheel".into()
            }
            PackageError::Leaks { .. } => {
                "build paths usually come from RPATHs, CMake config files or debug info: make the \
                 recipe install relocatable files (RPATH $ORIGIN, -ffile-prefix-map), or pass \
                 --allow-build-paths to package anyway"
                    .into()
            }
            PackageError::Sign(e) => e.hint(),
            PackageError::Attest(e) => e.hint(),
        }
    }
}

/// One packaged component.
#[derive(Debug, Clone)]
pub struct Packaged {
    pub component: ComponentName,
    pub tarball: tarball::Written,
    pub signature: Option<PathBuf>,
    pub manifest_files: usize,
    pub installed_size: u64,
    pub glibc_floor: Option<String>,
    /// License files the tarball carries (empty: none; the caller warns).
    pub licenses: Vec<String>,
    pub needs: Vec<crate::package::manifest::Capability>,
    pub provides: Vec<crate::package::manifest::Capability>,
    /// Build paths found and accepted (with `allow_build_paths`).
    pub leaks: Vec<(String, String)>,
    /// Python wheels the tree carries under [`WHEEL_DIR`], copied beside the tarball for the
    /// wheel index: (file name, sha256).
    pub wheels: Vec<(String, String)>,
    /// The SBOM and provenance written beside the tarball (signed with the tarball's key):
    /// (file name, sha256).
    pub documents: Vec<(String, String)>,
}

/// Where a build puts the Python wheels it makes (torch, torchvision): `package` copies them
/// out of the tree into the release directory, where `publish` indexes them per target.
pub const WHEEL_DIR: &str = "share/rocforge/wheels";

pub struct Options<'a> {
    pub compression: Compression,
    pub out_dir: &'a Path,
    /// Absolute paths that must not appear in a relocatable tree (store, caches).
    pub build_paths: Vec<String>,
    pub allow_build_paths: bool,
    pub license: Option<String>,
    /// The dependencies needed only to build the entry (its recipe's `build-depends`), by
    /// name: the manifest lists them apart from the run-time ones, which installs follow.
    pub build_only: Vec<ComponentName>,
    /// The keys of the dependencies this package is released beside (the plan's), by name.
    /// The hash input of a build without device code lists its dependencies' target-free
    /// keys, which no package carries; an install must find the ones packaged with it.
    pub dependency_keys: BTreeMap<ComponentName, ContentKey>,
    pub key: Option<&'a crate::sign::SecretKey>,
}

/// `<name>-<version>-<targets joined by _>-<key8>.<ext>`; `:` in target IDs becomes `.`.
pub fn file_name(meta: &EntryMeta, compression: Compression) -> String {
    let targets = meta
        .targets
        .iter()
        .map(|t| t.to_string().replace(':', "."))
        .collect::<Vec<_>>()
        .join("_");
    format!(
        "{}-{}-{}-{}.{}",
        meta.component,
        meta.version,
        if targets.is_empty() { "any" } else { &targets },
        &meta.key[..8.min(meta.key.len())],
        compression.extension()
    )
}

/// Packages one store entry into `opts.out_dir` (and signs it when a key is given).
pub fn package_entry(
    store: &Store,
    key: &str,
    opts: &Options<'_>,
) -> Result<Packaged, PackageError> {
    let dir = store.entry_dir(key);
    let io = |p: &Path, source| PackageError::Io {
        path: p.to_path_buf(),
        source,
    };
    let meta_path = dir.join("meta.json");
    let meta: EntryMeta =
        serde_json::from_slice(&std::fs::read(&meta_path).map_err(|e| io(&meta_path, e))?)
            .map_err(|e| PackageError::BadEntry {
                path: meta_path.display().to_string(),
                reason: e.to_string(),
            })?;
    let hi_path = dir.join("hash-input.json");
    let hash_input: serde_json::Value = std::fs::read(&hi_path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or(serde_json::Value::Null);
    let (depends, build_depends) =
        dependencies(&hash_input, &opts.build_only, &opts.dependency_keys);
    let tree = store.tree(key);
    let mut build_paths = opts.build_paths.clone();
    build_paths.push(tree.display().to_string());
    let scan = tarball::scan(&tree, &build_paths)?;
    if !scan.leaks.is_empty() && !opts.allow_build_paths {
        return Err(PackageError::Leaks {
            component: meta.component.to_string(),
            leaks: scan.leaks,
        });
    }
    let facts = manifest::RuntimeFacts::of(&scan.sonames, &scan.needed);
    let licenses = licenses(&meta, &scan.files);
    let tests = manifest::tested_library(meta.component.as_str(), &depends);
    let manifest = Manifest {
        schema: MANIFEST_SCHEMA.into(),
        id: meta.artifact_id(),
        kind: if tests.is_some() {
            manifest::ArtifactKind::Tests
        } else {
            manifest::ArtifactKind::Component
        },
        tests,
        depends,
        build_depends,
        license: opts.license.clone(),
        licenses,
        facts,
        image: meta.image.clone(),
        runtime: meta.runtime.clone(),
        reproducible: meta.reproducible,
        glibc_floor: scan.glibc_floor.clone(),
        coverage: meta.coverage.clone(),
        source_date_epoch: meta.source_date(),
        installed_size: scan.installed_size,
        hash_input,
        files: scan.files,
    };
    let name = file_name(&meta, opts.compression);
    let written = tarball::write_tarball(&tree, &manifest, opts.compression, opts.out_dir, &name)?;
    let signature = match opts.key {
        Some(k) => Some(crate::sign::sign_file(k, &written.path)?),
        None => None,
    };
    let documents = write_documents(store, &meta, &manifest, &written, opts.key)?;
    let wheels = export_wheels(&tree, &manifest.files, opts)?;
    crate::fault::point("package");
    Ok(Packaged {
        component: meta.component.clone(),
        tarball: written,
        signature,
        manifest_files: manifest.files.len(),
        installed_size: manifest.installed_size,
        glibc_floor: manifest.glibc_floor,
        licenses: manifest.licenses,
        needs: manifest.facts.needs,
        provides: manifest.facts.provides,
        leaks: scan.leaks,
        wheels,
        documents,
    })
}

/// The tarball's SBOM and provenance, written and signed beside it. The dependencies the
/// store holds are described by version and source; others by name and key only.
fn write_documents(
    store: &Store,
    meta: &EntryMeta,
    manifest: &Manifest,
    written: &tarball::Written,
    key: Option<&crate::sign::SecretKey>,
) -> Result<Vec<(String, String)>, PackageError> {
    let known: Vec<crate::attest::ComponentRecord> = manifest
        .depends
        .iter()
        .chain(&manifest.build_depends)
        .filter_map(|d| {
            crate::attest::ComponentRecord::from_store_entry(&store.entry_dir(d.key.as_str()), None)
                .ok()
        })
        .collect();
    let docs = crate::attest::tarball_documents(
        manifest,
        meta.source_commit.clone(),
        &written.file_name,
        &written.sha256,
        &known,
        key,
    )?;
    crate::attest::write_beside(&written.path, &docs)?;
    crate::fault::point("package");
    Ok([crate::attest::Kind::Sbom, crate::attest::Kind::Provenance]
        .into_iter()
        .map(|k| {
            let path = crate::attest::document_path(&written.path, k);
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let (bytes, _) = docs.get(k);
            (
                name,
                hex::encode(<sha2::Sha256 as sha2::Digest>::digest(bytes)),
            )
        })
        .collect())
}

/// The dependencies a build's hash input lists, sorted, split into those needed at run time
/// and those in `build_only`. The hash input does not tell them apart: being needed only to
/// build changes nothing in the build, so it is no input of the key.
fn dependencies(
    hash_input: &serde_json::Value,
    build_only: &[ComponentName],
    actual: &BTreeMap<ComponentName, ContentKey>,
) -> (Vec<Dependency>, Vec<Dependency>) {
    let recorded: crate::plan::key::RecordedInputs =
        serde_json::from_value(hash_input.clone()).unwrap_or_default();
    let mut all: Vec<Dependency> = recorded
        .dependencies
        .into_iter()
        .filter_map(|d| {
            Some(Dependency {
                key: match actual.get(d.name.as_str()) {
                    Some(k) => k.clone(),
                    None => d.key.parse().ok()?,
                },
                name: d.name.parse().ok()?,
            })
        })
        .collect();
    all.sort();
    all.into_iter().partition(|d| !build_only.contains(&d.name))
}

/// Copies the tree's wheels into the release directory (through a temporary file and a rename,
/// so a crash never leaves half a wheel under its real name), signed like the tarballs.
fn export_wheels(
    tree: &Path,
    files: &[manifest::FileEntry],
    opts: &Options<'_>,
) -> Result<Vec<(String, String)>, PackageError> {
    let mut out = Vec::new();
    let prefix = format!("{WHEEL_DIR}/");
    for f in files {
        let Some(name) = f.path.strip_prefix(&prefix) else {
            continue;
        };
        if f.kind != manifest::Kind::File || name.contains('/') || !name.ends_with(".whl") {
            continue;
        }
        let (Some(sha), from) = (f.sha256.clone(), tree.join(&f.path)) else {
            continue;
        };
        let dest = opts.out_dir.join(name);
        let io = |p: &Path, source| PackageError::Io {
            path: p.to_path_buf(),
            source,
        };
        let tmp = crate::fsutil::temp_file_in(opts.out_dir).map_err(|e| io(opts.out_dir, e))?;
        std::fs::copy(&from, tmp.path()).map_err(|e| io(&from, e))?;
        tmp.as_file().sync_all().map_err(|e| io(tmp.path(), e))?;
        tmp.persist(&dest).map_err(|e| io(&dest, e.error))?;
        if let Some(k) = opts.key {
            crate::sign::sign_file(k, &dest)?;
        }
        out.push((name.to_string(), sha));
    }
    Ok(out)
}

/// The license files of a tree: those the build recorded, and any regular file directly in
/// `share/doc/<component>/` whose name mentions a license (a build that installs its own).
fn licenses(meta: &EntryMeta, files: &[manifest::FileEntry]) -> Vec<String> {
    let dir = format!("{}/", crate::store::doc_dir(&meta.component));
    let mut out: Vec<String> = files
        .iter()
        .filter(|f| f.kind == manifest::Kind::File)
        .filter(|f| {
            meta.licenses.contains(&f.path)
                || f.path
                    .strip_prefix(&dir)
                    .is_some_and(|n| !n.contains('/') && crate::store::mentions_license(n))
        })
        .map(|f| f.path.clone())
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Writes SHA256SUMS for `packaged` (merged with the directory's other tarballs), signs it, and
/// regenerates the signed index of the directory. Returns every release file (see
/// [`index::release_files`]) and the index.
pub fn finish_release(
    out_dir: &Path,
    packaged: &[Packaged],
    key: Option<&crate::sign::SecretKey>,
    valid_days: u64,
) -> Result<(Vec<PathBuf>, index::Index), PackageError> {
    // Temporary files of a `package` killed mid-write (named for their dead process).
    crate::fsutil::reap_temp(out_dir, ".tmp-");
    let sums: BTreeMap<String, String> = packaged
        .iter()
        .flat_map(|p| {
            std::iter::once((p.tarball.file_name.clone(), p.tarball.sha256.clone()))
                .chain(p.wheels.iter().cloned())
                .chain(p.documents.iter().cloned())
        })
        .collect();
    let sums_path = tarball::update_sha256sums(out_dir, &sums)?;
    crate::fault::point("package");
    if let Some(k) = key {
        crate::sign::sign_file(k, &sums_path)?;
        crate::fault::point("package");
    }
    let idx = index::build(out_dir, valid_days)?;
    index::write(out_dir, &idx, key)?;
    crate::fault::point("package");
    Ok((index::release_files(out_dir)?, idx))
}
