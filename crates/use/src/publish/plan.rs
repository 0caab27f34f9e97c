//! The plan of a publish, computed from the release directory alone: which files go where
//! (each with its sha256 and size), what the index tells installers, which files are signed,
//! and the wheel index pages to write. `publish --dry-run` prints it; [`super::execute`]
//! carries it out. The plan does not ask the destination what it holds: the run skips what is
//! already there (same size on GitHub, same blob in a registry).

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::{Destination, PublishError, files, oci, sha256_file, wheels};
use crate::package::index::{INDEX_NAME, Index};

/// The `schema` of `publish --dry-run --format json`.
pub const PLAN_SCHEMA: &str = "rocforge.publish-plan/1";

/// What a publish will do.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct PublishPlan {
    pub schema: &'static str,
    pub dir: PathBuf,
    /// The destination as given; None: only the wheel index is written.
    pub to: Option<String>,
    /// Each file sent, in order.
    pub uploads: Vec<Upload>,
    /// What the release's index.json lists, None when the directory has none.
    pub index: Option<IndexSummary>,
    /// The wheel index pages written into the directory.
    pub wheel_index: Vec<PathBuf>,
    /// What would stop or change the run (a missing token).
    pub notes: Vec<String>,
    #[serde(skip)]
    pub(super) destination: Option<Destination>,
    #[serde(skip)]
    pub(super) pages: Vec<(PathBuf, String)>,
    #[serde(skip)]
    pub(super) oci: Option<oci::OciPlan>,
}

/// One file of the release directory and where it goes.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Upload {
    pub file: String,
    /// tarball, wheel, sbom, provenance, image-record, signature, index, key-list or checksums
    pub kind: &'static str,
    pub sha256: String,
    pub size: u64,
    /// A GitHub release asset (`github://OWNER/REPO@TAG`) or a registry reference (`REG/REPO:TAG`).
    pub to: String,
    #[serde(skip)]
    pub(super) path: PathBuf,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct IndexSummary {
    pub issued: String,
    pub expires: String,
    /// Whether index.json.minisig is beside it.
    pub signed: bool,
    pub artifacts: Vec<IndexEntry>,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct IndexEntry {
    #[serde(flatten)]
    pub id: crate::ids::ArtifactId,
    pub file: String,
    pub sha256: crate::ids::Sha256Digest,
    /// Whether the tarball's .minisig is beside it.
    pub signed: bool,
}

crate::carries_artifact_id!(IndexEntry);

/// The publish of `dir` to `to` (`github://…` or `oci://…`; None: only the wheel index).
pub fn plan(dir: &Path, to: Option<&str>) -> Result<PublishPlan, PublishError> {
    let destination = to.map(Destination::parse).transpose()?;
    let index = read_index(dir);
    // Every target of the release gets a page, not only those the wheels name.
    let mut targets: Vec<String> = index
        .iter()
        .flat_map(|i| {
            i.artifacts
                .iter()
                .flat_map(|a| a.targets.iter().map(|t| t.to_string()))
        })
        .collect();
    targets.sort();
    targets.dedup();
    let pages = wheels::pages(dir, &targets)?;
    let mut notes = Vec::new();
    let (uploads, oci) = match &destination {
        None => (Vec::new(), None),
        Some(Destination::GitHub { owner, repo, tag }) => {
            if super::github_token().is_none() {
                notes.push("GITHUB_TOKEN is not set: the publish would stop".into());
            }
            let to = format!("github://{owner}/{repo}@{tag}");
            let index = index
                .as_ref()
                .ok_or_else(|| PublishError::NoIndex(dir.to_path_buf()))?;
            let (uploads, unclaimed) = github_uploads(dir, index, &to)?;
            if !unclaimed.is_empty() {
                notes.push(format!(
                    "not in index.json, not sent: {}",
                    unclaimed.join(", ")
                ));
            }
            (uploads, None)
        }
        Some(Destination::Oci(repo)) => {
            let p = oci::plan(dir)?;
            (oci_uploads(&p, repo)?, Some(p))
        }
    };
    Ok(PublishPlan {
        schema: PLAN_SCHEMA,
        dir: dir.to_path_buf(),
        to: to.map(str::to_string),
        uploads,
        index: index.as_ref().map(|i| summary(dir, i)),
        wheel_index: pages.iter().map(|(p, _)| p.clone()).collect(),
        notes,
        destination,
        pages,
        oci,
    })
}

fn read_index(dir: &Path) -> Option<Index> {
    std::fs::read(dir.join(INDEX_NAME))
        .ok()
        .and_then(|b| serde_json::from_slice::<Index>(&b).ok())
}

fn summary(dir: &Path, index: &Index) -> IndexSummary {
    let signed = |file: &str| crate::sign::signature_path(&dir.join(file)).is_file();
    IndexSummary {
        issued: index.issued.clone(),
        expires: index.expires.clone(),
        signed: signed(INDEX_NAME),
        artifacts: index
            .artifacts
            .iter()
            .map(|a| IndexEntry {
                id: a.id.clone(),
                file: a.url.clone(),
                sha256: a.sha256.clone(),
                signed: signed(&a.url),
            })
            .collect(),
    }
}

/// `file`, digested: by the sha256 the index pins (not read again), else by reading it.
fn upload(file: &super::ReleaseFile, to: String) -> Result<Upload, PublishError> {
    let (sha256, size) = match &file.sha256 {
        Some(sha) => {
            let size = std::fs::metadata(&file.path)
                .map_err(|source| PublishError::Io {
                    path: file.path.clone(),
                    source,
                })?
                .len();
            (sha.clone(), size)
        }
        None => sha256_file(&file.path)?,
    };
    Ok(Upload {
        kind: file.kind,
        file: file
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        sha256,
        size,
        to,
        path: file.path.clone(),
    })
}

/// Each file the release sends, and those not sent (no delivery claims them).
fn github_uploads(
    dir: &Path,
    index: &Index,
    to: &str,
) -> Result<(Vec<Upload>, Vec<String>), PublishError> {
    let (sent, unclaimed) = files(dir, index)?;
    let uploads = sent
        .iter()
        .map(|f| upload(f, to.to_string()))
        .collect::<Result<_, _>>()?;
    Ok((uploads, unclaimed))
}

fn oci_uploads(
    p: &oci::OciPlan,
    repo: &crate::oci::Repository,
) -> Result<Vec<Upload>, PublishError> {
    let mut out = Vec::new();
    for t in &p.tarballs {
        for l in &t.layers {
            out.push(upload(&l.file(), repo.reference(&t.tag))?);
        }
    }
    for l in &p.index_layers {
        out.push(upload(&l.file(), repo.reference(&p.release_tag))?);
    }
    Ok(out)
}

impl PublishPlan {
    /// The plan as text, for `publish --dry-run`.
    pub fn render_text(&self) -> String {
        let mut s = format!("release {}\n", self.dir.display());
        s += &format!(
            "to      {}\n",
            self.to
                .as_deref()
                .unwrap_or("nowhere (only the wheel index)")
        );
        if let Some(i) = &self.index {
            s += &format!(
                "index   issued {}, expires {}, {}\n",
                i.issued,
                i.expires,
                if i.signed { "signed" } else { "NOT signed" }
            );
            for a in &i.artifacts {
                s += &format!(
                    "  {:<20} {:<10} {:<14} {}{}\n",
                    a.name,
                    a.version,
                    a.target_list(),
                    a.file,
                    if a.signed { " (signed)" } else { "" }
                );
            }
        }
        if !self.uploads.is_empty() {
            s += "\nuploads\n";
        }
        for u in &self.uploads {
            s += &format!(
                "  {:<10} {} → {}\n    sha256 {}, {}\n",
                u.kind,
                u.file,
                u.to,
                u.sha256,
                crate::units::format_size(u.size)
            );
        }
        if !self.wheel_index.is_empty() {
            s += &format!("\nwheel index: {} pages\n", self.wheel_index.len());
        }
        for p in &self.wheel_index {
            s += &format!("  {}\n", p.display());
        }
        for n in &self.notes {
            s += &format!("note: {n}\n");
        }
        s
    }
}
