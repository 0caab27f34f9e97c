//! The SPDX 2.3 JSON document of a tarball or an image: the subject (what was signed and
//! shipped) contains the components built into it; each component names its source (download
//! location, the archive's sha256 where the recipe pins one), its declared license and license
//! files, the patches applied to it (files with their sha256), its pinned extra inputs, the
//! builder image and the dependencies, run-time (DEPENDS_ON) and build-only
//! (BUILD_DEPENDENCY_OF), by content key. Same inputs, same bytes: the namespace comes from
//! the subject's content key or digest and `created` is the source date the entries record.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::inputs::{ComponentRecord, ImageView};
use super::{Subject, SubjectKind};

pub const SPDX_VERSION: &str = "SPDX-2.3";
pub const DATA_LICENSE: &str = "CC0-1.0";
pub const DOCUMENT_ID: &str = "SPDXRef-DOCUMENT";
pub const SUBJECT_ID: &str = "SPDXRef-Subject";
pub const NOASSERTION: &str = "NOASSERTION";
/// The external reference type that carries a component's content key.
pub const KEY_REF_TYPE: &str = "rocforge-content-key";
/// Where the namespaces live (they are identifiers, never fetched).
pub const NAMESPACE_BASE: &str = "https://github.com/rocforge/rocforge/spdx";

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Document {
    pub spdx_version: String,
    pub data_license: String,
    #[serde(rename = "SPDXID")]
    pub spdx_id: String,
    pub name: String,
    pub document_namespace: String,
    pub creation_info: CreationInfo,
    pub packages: Vec<Package>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<File>,
    pub relationships: Vec<Relationship>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CreationInfo {
    pub created: String,
    pub creators: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Package {
    #[serde(rename = "SPDXID")]
    pub spdx_id: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version_info: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub package_file_name: Option<String>,
    pub download_location: String,
    pub files_analyzed: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checksums: Vec<Checksum>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub license_declared: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub license_concluded: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub license_comments: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copyright_text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_info: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub primary_package_purpose: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub external_refs: Vec<ExternalRef>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Checksum {
    pub algorithm: String,
    pub checksum_value: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ExternalRef {
    pub reference_category: String,
    pub reference_type: String,
    pub reference_locator: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct File {
    #[serde(rename = "SPDXID")]
    pub spdx_id: String,
    pub file_name: String,
    pub checksums: Vec<Checksum>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Relationship {
    pub spdx_element_id: String,
    pub relationship_type: String,
    pub related_spdx_element: String,
}

fn sha256(hex: &str) -> Checksum {
    Checksum {
        algorithm: "SHA256".into(),
        checksum_value: hex.trim_start_matches("sha256:").to_string(),
    }
}

/// An SPDX ID from free text: `SPDXRef-` and only letters, digits, `.` and `-`.
pub fn spdx_id(kind: &str, parts: &[&str]) -> String {
    let body: String = parts
        .join("-")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect();
    format!("SPDXRef-{kind}-{body}")
}

fn component_id(name: &str, key: &str) -> String {
    spdx_id("Package", &[name, &key[..key.len().min(12)]])
}

/// A package URL where one fits: GitHub sources as `pkg:github/OWNER/REPO@VERSION`, anything
/// else as `pkg:generic/NAME@VERSION`.
fn purl(c: &ComponentRecord) -> String {
    let url = match c.hash_input.component.source.as_ref() {
        Some(super::inputs::SourceView::Git { url, .. })
        | Some(super::inputs::SourceView::Url { url, .. }) => url.as_str(),
        _ => "",
    };
    let github = url
        .strip_prefix("https://github.com/")
        .map(|r| r.trim_end_matches(".git"))
        .and_then(|r| {
            let mut it = r.split('/');
            Some((it.next()?.to_string(), it.next()?.to_string()))
        });
    match github {
        Some((owner, repo)) if !owner.is_empty() && !repo.is_empty() => format!(
            "pkg:github/{}/{}@{}",
            owner.to_ascii_lowercase(),
            repo.to_ascii_lowercase(),
            c.version
        ),
        _ => format!("pkg:generic/{}@{}", c.name, c.version),
    }
}

fn key_ref(key: &str) -> ExternalRef {
    ExternalRef {
        reference_category: "OTHER".into(),
        reference_type: KEY_REF_TYPE.into(),
        reference_locator: key.to_string(),
    }
}

fn rel(a: &str, kind: &str, b: &str) -> Relationship {
    Relationship {
        spdx_element_id: a.to_string(),
        relationship_type: kind.to_string(),
        related_spdx_element: b.to_string(),
    }
}

/// The package of a component built into the subject.
fn component_package(c: &ComponentRecord) -> Package {
    let targets = if c.targets.is_empty() {
        "no GPU target".to_string()
    } else {
        c.targets.join(", ")
    };
    Package {
        spdx_id: component_id(&c.name, &c.key),
        name: c.name.to_string(),
        version_info: Some(c.version.clone()),
        package_file_name: None,
        download_location: c
            .source_location()
            .unwrap_or_else(|| NOASSERTION.to_string()),
        files_analyzed: false,
        checksums: c.source_sha256().map(sha256).into_iter().collect(),
        license_declared: Some(c.license.clone().unwrap_or_else(|| NOASSERTION.into())),
        license_concluded: Some(NOASSERTION.into()),
        license_comments: (!c.license_files.is_empty())
            .then(|| format!("license files in the tree: {}", c.license_files.join(", "))),
        copyright_text: Some(NOASSERTION.into()),
        source_info: Some(format!(
            "built by rocforge from this source with {} patch(es), for {targets}, in release {}",
            c.hash_input.component.patches.len(),
            c.release
        )),
        primary_package_purpose: Some("LIBRARY".into()),
        external_refs: vec![
            ExternalRef {
                reference_category: "PACKAGE-MANAGER".into(),
                reference_type: "purl".into(),
                reference_locator: purl(c),
            },
            key_ref(&c.key),
        ],
    }
}

/// A dependency known only by name and key (not built into the subject).
fn dependency_package(name: &str, key: &str, known: Option<&ComponentRecord>) -> Package {
    Package {
        spdx_id: component_id(name, key),
        name: name.to_string(),
        version_info: known.map(|k| k.version.clone()),
        package_file_name: None,
        download_location: known
            .and_then(ComponentRecord::source_location)
            .unwrap_or_else(|| NOASSERTION.to_string()),
        files_analyzed: false,
        checksums: known
            .and_then(ComponentRecord::source_sha256)
            .map(sha256)
            .into_iter()
            .collect(),
        license_declared: known.map(|k| k.license.clone().unwrap_or_else(|| NOASSERTION.into())),
        license_concluded: None,
        license_comments: None,
        copyright_text: None,
        source_info: Some("a separate rocforge artifact, named by its content key".into()),
        primary_package_purpose: Some("LIBRARY".into()),
        external_refs: vec![key_ref(key)],
    }
}

fn plain_package(id: String, name: &str, version: Option<String>, location: &str) -> Package {
    Package {
        spdx_id: id,
        name: name.to_string(),
        version_info: version,
        package_file_name: None,
        download_location: location.to_string(),
        files_analyzed: false,
        checksums: Vec::new(),
        license_declared: None,
        license_concluded: None,
        license_comments: None,
        copyright_text: None,
        source_info: None,
        primary_package_purpose: None,
        external_refs: Vec::new(),
    }
}

/// The SBOM of `subject`, which holds `components`; `known` describes dependencies that are
/// not built into it (their version and source), when the store has them.
pub fn document(
    subject: &Subject,
    components: &[ComponentRecord],
    known: &[ComponentRecord],
) -> Document {
    let created = components
        .iter()
        .map(|c| c.source_date_epoch)
        .max()
        .unwrap_or(0);
    let mut parts = Parts {
        packages: Vec::new(),
        files: Vec::new(),
        rels: vec![rel(DOCUMENT_ID, "DESCRIBES", SUBJECT_ID)],
        seen: BTreeSet::new(),
    };
    parts.packages.push(subject_package(subject));
    if let Some((reference, digest)) = &subject.base {
        let id = spdx_id("BaseImage", &[reference]);
        let mut p = plain_package(id.clone(), reference, None, NOASSERTION);
        p.checksums = vec![sha256(digest)];
        p.primary_package_purpose = Some("CONTAINER".into());
        parts.packages.push(p);
        parts.rels.push(rel(SUBJECT_ID, "DESCENDANT_OF", &id));
    }
    let inside: BTreeSet<&str> = components.iter().map(|c| c.key.as_str()).collect();
    for c in components {
        parts.add_component(c, &inside, known);
    }
    Document {
        spdx_version: SPDX_VERSION.into(),
        data_license: DATA_LICENSE.into(),
        spdx_id: DOCUMENT_ID.into(),
        name: subject.name.clone(),
        document_namespace: format!("{NAMESPACE_BASE}/{}", subject.namespace_id()),
        creation_info: CreationInfo {
            created: crate::units::rfc3339(created),
            creators: vec![format!("Tool: rocforge-{}", env!("CARGO_PKG_VERSION"))],
        },
        packages: parts.packages,
        files: parts.files,
        relationships: parts.rels,
    }
}

/// The package of what was signed and shipped: a tarball or an image.
fn subject_package(subject: &Subject) -> Package {
    let mut p = plain_package(
        SUBJECT_ID.into(),
        &subject.name,
        subject.version.clone(),
        subject.location.as_deref().unwrap_or(NOASSERTION),
    );
    p.checksums = vec![sha256(&subject.sha256)];
    p.primary_package_purpose = Some(
        match subject.kind {
            SubjectKind::Tarball => "ARCHIVE",
            SubjectKind::Image => "CONTAINER",
        }
        .into(),
    );
    if subject.kind == SubjectKind::Tarball {
        p.package_file_name = Some(subject.name.clone());
    }
    p
}

/// The document's packages, files and relationships as they are gathered, in document order.
struct Parts {
    packages: Vec<Package>,
    files: Vec<File>,
    rels: Vec<Relationship>,
    /// Builder images and outside dependencies already listed: each is listed once.
    seen: BTreeSet<String>,
}

impl Parts {
    /// Component `c`, what it was built from and with, and its dependencies (those not
    /// `inside` the subject listed as packages of their own, described by `known`).
    fn add_component(
        &mut self,
        c: &ComponentRecord,
        inside: &BTreeSet<&str>,
        known: &[ComponentRecord],
    ) {
        let cid = component_id(&c.name, &c.key);
        self.packages.push(component_package(c));
        self.rels.push(rel(SUBJECT_ID, "CONTAINS", &cid));
        self.add_inputs(c, &cid);
        if let Some(img) = c.builder_image() {
            let id = spdx_id("BuilderImage", &[&img.reference]);
            if self.seen.insert(id.clone()) {
                self.packages.push(builder_package(id.clone(), img));
            }
            self.rels.push(rel(&id, "BUILD_TOOL_OF", &cid));
        }
        let deps = c
            .depends
            .iter()
            .map(|d| (d, false))
            .chain(c.build_depends.iter().map(|d| (d, true)));
        for (d, build_only) in deps {
            let (name, key) = (d.name.to_string(), d.key.to_string());
            let did = component_id(&name, &key);
            if !inside.contains(key.as_str()) && self.seen.insert(did.clone()) {
                let k = known.iter().find(|k| k.key == key);
                self.packages.push(dependency_package(&name, &key, k));
            }
            self.rels.push(if build_only {
                rel(&did, "BUILD_DEPENDENCY_OF", &cid)
            } else {
                rel(&cid, "DEPENDS_ON", &did)
            });
        }
    }

    /// The patches applied to component `c` (its SPDX ID `cid`), its patch series and its
    /// pinned extra inputs.
    fn add_inputs(&mut self, c: &ComponentRecord, cid: &str) {
        for (i, p) in c.hash_input.component.patches.iter().enumerate() {
            let fid = spdx_id("Patch", &[&c.name, &(i + 1).to_string()]);
            self.files.push(File {
                spdx_id: fid.clone(),
                file_name: format!("./patches/{}/{}/{}", c.release, c.name, p.file),
                checksums: vec![sha256(&p.sha256)],
            });
            self.rels.push(rel(&fid, "PATCH_APPLIED", cid));
        }
        for (i, s) in c.hash_input.component.series.iter().enumerate() {
            let id = spdx_id("Series", &[&c.name, &(i + 1).to_string()]);
            let mut p = plain_package(
                id.clone(),
                &format!("{} patch series", c.name),
                None,
                &s.url,
            );
            p.checksums = vec![sha256(&s.sha256)];
            self.packages.push(p);
            self.rels.push(rel(&id, "BUILD_DEPENDENCY_OF", cid));
        }
        for input in &c.hash_input.component.inputs {
            let id = spdx_id("Input", &[&c.name, &input.name]);
            let mut p = plain_package(id.clone(), &input.name, None, &input.url);
            let sha = input.sha256.clone().or_else(|| {
                c.hash_input
                    .component
                    .locked_inputs
                    .get(&input.name)
                    .cloned()
            });
            p.checksums = sha.as_deref().map(sha256).into_iter().collect();
            self.packages.push(p);
            self.rels.push(rel(&id, "BUILD_DEPENDENCY_OF", cid));
        }
    }
}

/// The builder image a component was built in, and how far its identity is pinned.
fn builder_package(id: String, img: &ImageView) -> Package {
    let mut p = plain_package(id, &img.reference, None, NOASSERTION);
    p.checksums = img.digest.as_deref().map(sha256).into_iter().collect();
    p.primary_package_purpose = Some("CONTAINER".into());
    p.source_info = Some(
        match (img.local, &img.digest) {
            (true, _) => "built locally by `rocforge image build`, keyed by its image ID",
            (false, Some(_)) => "pinned by digest in rocforge.lock",
            (false, None) => "not pinned: no digest was recorded for it",
        }
        .into(),
    );
    p
}

impl Document {
    /// The package the document DESCRIBES.
    pub fn subject(&self) -> Option<&Package> {
        let id = self
            .relationships
            .iter()
            .find(|r| r.spdx_element_id == DOCUMENT_ID && r.relationship_type == "DESCRIBES")?
            .related_spdx_element
            .as_str();
        self.packages.iter().find(|p| p.spdx_id == id)
    }

    /// The subject's sha256 (hex), from its checksums.
    pub fn subject_sha256(&self) -> Option<&str> {
        self.subject()?
            .checksums
            .iter()
            .find(|c| c.algorithm == "SHA256")
            .map(|c| c.checksum_value.as_str())
    }

    /// The (name, content key) of every component the subject CONTAINS.
    pub fn contained(&self) -> Vec<(String, String)> {
        let Some(subject) = self.subject() else {
            return Vec::new();
        };
        self.relationships
            .iter()
            .filter(|r| r.spdx_element_id == subject.spdx_id && r.relationship_type == "CONTAINS")
            .filter_map(|r| {
                self.packages
                    .iter()
                    .find(|p| p.spdx_id == r.related_spdx_element)
            })
            .map(|p| {
                let key = p
                    .external_refs
                    .iter()
                    .find(|e| e.reference_type == KEY_REF_TYPE)
                    .map(|e| e.reference_locator.clone())
                    .unwrap_or_default();
                (p.name.clone(), key)
            })
            .collect()
    }
}
