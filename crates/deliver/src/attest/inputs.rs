//! What the documents are made from: a store entry's record of itself (its manifest, or its
//! `meta.json` and `hash-input.json`), read back through a typed view of the hash input.
//!
//! The view is lenient (every field defaults) because `hash-input.json` is written by
//! [`crate::plan::key::HashInput`], whose shape grows by schema; what the view does not know
//! stays out of the documents rather than failing a package.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use crate::ids::ComponentName;
use crate::package::manifest::{Dependency, Manifest};

/// The parts of `hash-input.json` the SBOM and provenance speak of.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct HashInputView {
    pub schema: String,
    pub driver: u32,
    pub release: ReleaseView,
    pub image: Option<ImageView>,
    pub runtime: String,
    pub component: ComponentView,
    pub targets: Vec<String>,
    pub dependencies: Vec<DependencyView>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct ReleaseView {
    pub name: String,
    pub prefix: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct ImageView {
    pub reference: String,
    pub digest: Option<String>,
    pub local: bool,
    /// The digest of what a locally built image is made from (its Containerfile and base
    /// recipe), when that and not its local ID keys it.
    pub built_from: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct ComponentView {
    pub name: String,
    pub version: String,
    pub source: Option<SourceView>,
    pub locked_commit: Option<String>,
    pub series: Vec<SeriesView>,
    pub patches: Vec<PatchView>,
    /// The build system, arguments, per-target arguments and environment, as the key has them.
    pub build: serde_json::Value,
    pub overlays: Vec<OverlayView>,
    pub inputs: Vec<InputView>,
    pub locked_inputs: BTreeMap<String, String>,
}

/// A recipe's `[source]` as the hash input records it (`kind` = git, url or path).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum SourceView {
    Git {
        url: String,
        #[serde(default)]
        tag: Option<String>,
        #[serde(default)]
        rev: Option<String>,
    },
    Url {
        url: String,
        sha256: String,
    },
    Path {
        path: String,
    },
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct SeriesView {
    pub url: String,
    pub sha256: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct PatchView {
    pub file: String,
    pub sha256: String,
}

#[derive(Debug, Clone, Default, Deserialize, serde::Serialize, PartialEq, Eq)]
#[serde(default)]
pub struct OverlayView {
    pub component: String,
    pub dest: String,
    pub sha256: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct InputView {
    pub name: String,
    pub url: String,
    pub sha256: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct DependencyView {
    pub name: String,
    pub key: String,
}

/// One built component as the documents describe it.
#[derive(Debug, Clone)]
pub struct ComponentRecord {
    pub name: ComponentName,
    pub version: String,
    pub release: String,
    pub targets: Vec<String>,
    pub key: String,
    /// The recipe's SPDX expression.
    pub license: Option<String>,
    /// License files the tree carries.
    pub license_files: Vec<String>,
    /// The commit a git source was built from, when the store recorded it.
    pub source_commit: Option<String>,
    pub source_date_epoch: u64,
    pub runtime: crate::runtime::RuntimeName,
    pub hash_input: HashInputView,
    /// Run-time dependencies, by the keys the release pins.
    pub depends: Vec<Dependency>,
    /// Build-only dependencies.
    pub build_depends: Vec<Dependency>,
}

impl ComponentRecord {
    /// From a tarball's manifest; `source_commit` from the store entry, when known.
    pub fn from_manifest(m: &Manifest, source_commit: Option<String>) -> ComponentRecord {
        ComponentRecord {
            name: m.id.name.clone(),
            version: m.id.version.clone(),
            release: m.id.release.clone(),
            targets: m.id.targets.iter().map(|t| t.to_string()).collect(),
            key: m.id.key.to_string(),
            license: m.license.clone(),
            license_files: m.licenses.clone(),
            source_commit,
            source_date_epoch: m.source_date_epoch,
            runtime: m.runtime.clone(),
            hash_input: serde_json::from_value(m.hash_input.clone()).unwrap_or_default(),
            depends: m.depends.clone(),
            build_depends: m.build_depends.clone(),
        }
    }

    /// From a store entry's `meta.json` and `hash-input.json` (what an image layer holds).
    /// Every dependency the hash input lists counts as a run-time one: the entry does not
    /// record which are build-only.
    pub fn from_store_entry(
        entry: &Path,
        license: Option<String>,
    ) -> Result<ComponentRecord, super::AttestError> {
        let read = |name: &str| -> Result<Vec<u8>, super::AttestError> {
            let p = entry.join(name);
            std::fs::read(&p).map_err(|source| super::AttestError::Io { path: p, source })
        };
        let meta: crate::store::EntryMeta =
            serde_json::from_slice(&read("meta.json")?).map_err(|e| {
                super::AttestError::Malformed {
                    what: entry.join("meta.json").display().to_string(),
                    kind: "store entry record",
                    reason: e.to_string(),
                }
            })?;
        let hash_input: HashInputView =
            serde_json::from_slice(&read("hash-input.json")?).map_err(|e| {
                super::AttestError::Malformed {
                    what: entry.join("hash-input.json").display().to_string(),
                    kind: "hash input",
                    reason: e.to_string(),
                }
            })?;
        let depends = hash_input
            .dependencies
            .iter()
            .filter_map(|d| {
                Some(Dependency {
                    name: d.name.parse().ok()?,
                    key: d.key.parse().ok()?,
                })
            })
            .collect();
        Ok(ComponentRecord {
            name: meta.component.clone(),
            version: meta.version.clone(),
            release: meta.release.clone(),
            targets: meta.targets.iter().map(|t| t.to_string()).collect(),
            key: meta.key.to_string(),
            license,
            license_files: meta.licenses.clone(),
            source_commit: meta.source_commit.clone(),
            source_date_epoch: meta.source_date(),
            runtime: meta.runtime.clone(),
            hash_input,
            depends,
            build_depends: Vec::new(),
        })
    }

    /// The builder image the build ran in: None for host builds, whose hash input still
    /// names the release's image though nothing ran in it.
    pub fn builder_image(&self) -> Option<&ImageView> {
        // The hash input's `container`/`host`; the entry's runtime for hash inputs without one.
        let runtime = if self.hash_input.runtime.is_empty() {
            self.runtime.as_str()
        } else {
            self.hash_input.runtime.as_str()
        };
        self.hash_input
            .image
            .as_ref()
            .filter(|i| runtime != "host" && !i.reference.is_empty())
    }

    /// The commit a git source was built from: the store's record, else the lock's.
    pub fn commit(&self) -> Option<&str> {
        self.source_commit
            .as_deref()
            .or(self.hash_input.component.locked_commit.as_deref())
    }

    /// Where the source comes from, as SPDX's downloadLocation and SLSA's uri spell it:
    /// `git+URL@COMMIT` (or `@TAG` while no commit is known), the archive's URL, or None for a
    /// local path (nothing anyone else can download).
    pub fn source_location(&self) -> Option<String> {
        match self.hash_input.component.source.as_ref()? {
            SourceView::Git { url, tag, rev } => {
                let at = self
                    .commit()
                    .map(str::to_string)
                    .or_else(|| rev.clone())
                    .or_else(|| tag.clone());
                Some(match at {
                    Some(a) => format!("git+{url}@{a}"),
                    None => format!("git+{url}"),
                })
            }
            SourceView::Url { url, .. } => Some(url.clone()),
            SourceView::Path { .. } => None,
        }
    }

    /// The source archive's sha256, when the recipe pins one.
    pub fn source_sha256(&self) -> Option<&str> {
        match self.hash_input.component.source.as_ref()? {
            SourceView::Url { sha256, .. } => Some(sha256),
            _ => None,
        }
    }
}
