//! The in-toto Statement v1 with an SLSA Provenance v1 predicate: the subject (a tarball, or
//! an image manifest) by sha256, what was asked for (component, release, targets, overlays:
//! `externalParameters`), how rocforge ran it (driver, runtime, prefix and the build system's
//! arguments and environment: `internalParameters`), and every input the content key covers
//! (`resolvedDependencies`: builder image, source, patch series, patches, extra inputs and the
//! dependency artifacts by content key). Made from the hash input alone, so the same inputs
//! give the same bytes; no timestamps.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::inputs::{ComponentRecord, OverlayView, SourceView};
use super::{Subject, SubjectKind};

pub const STATEMENT_TYPE: &str = "https://in-toto.io/Statement/v1";
pub const PREDICATE_TYPE: &str = "https://slsa.dev/provenance/v1";
/// What the parameters mean: docs/security.md describes this build type.
pub const BUILD_TYPE: &str =
    "https://github.com/rocforge/rocforge/blob/main/docs/security.md#build-type-component-v1";
pub const IMAGE_BUILD_TYPE: &str =
    "https://github.com/rocforge/rocforge/blob/main/docs/security.md#build-type-image-v1";
pub const BUILDER_ID: &str =
    "https://github.com/rocforge/rocforge/blob/main/docs/security.md#builder";

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Statement {
    #[serde(rename = "_type")]
    pub type_: String,
    pub subject: Vec<ResourceDescriptor>,
    pub predicate_type: String,
    pub predicate: Provenance,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Provenance {
    pub build_definition: BuildDefinition,
    pub run_details: RunDetails,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct BuildDefinition {
    pub build_type: String,
    pub external_parameters: ExternalParameters,
    pub internal_parameters: InternalParameters,
    pub resolved_dependencies: Vec<ResourceDescriptor>,
}

/// What the caller asked for. A component build names one component; an image names the
/// components it stacks.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct ExternalParameters {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub component: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub components: Vec<ComponentRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    pub release: String,
    pub targets: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overlays: Vec<OverlayView>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ComponentRef {
    pub name: String,
    pub version: String,
    pub key: String,
}

/// How rocforge ran the build: what the content key covers besides the inputs.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct InternalParameters {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<u32>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub runtime: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub prefix: String,
    /// The build system, its arguments, per-target arguments and environment.
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub build: serde_json::Value,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct ResourceDescriptor {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uri: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub digest: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RunDetails {
    pub builder: Builder,
    pub metadata: Metadata,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Builder {
    pub id: String,
    pub version: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Metadata {
    /// The content key (a component) or the image's reference (an image).
    pub invocation_id: String,
}

fn digest(alg: &str, hex: &str) -> BTreeMap<String, String> {
    [(
        alg.to_string(),
        hex.trim_start_matches("sha256:").to_string(),
    )]
    .into()
}

fn annotated(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A content key as a resource: `rocforge:NAME@KEY`.
fn artifact_ref(name: &str, key: &str, role: &str) -> ResourceDescriptor {
    ResourceDescriptor {
        name: Some(name.to_string()),
        uri: Some(format!("rocforge:{name}@{key}")),
        digest: BTreeMap::new(),
        annotations: annotated(&[("role", role), ("contentKey", key)]),
    }
}

/// Every input of one component's build, in the hash input's order.
fn component_inputs(c: &ComponentRecord) -> Vec<ResourceDescriptor> {
    let mut out = Vec::new();
    let comp = &c.hash_input.component;
    if let Some(img) = c.builder_image() {
        out.push(ResourceDescriptor {
            name: Some("builder-image".into()),
            uri: Some(format!("oci://{}", img.reference)),
            // An image keyed by what it is made from is named by that digest: its local ID
            // means nothing on another machine.
            digest: img
                .built_from
                .as_deref()
                .or(img.digest.as_deref())
                .filter(|d| d.starts_with("sha256:"))
                .map(|d| digest("sha256", d))
                .unwrap_or_default(),
            annotations: annotated(&[(
                "role",
                match (&img.built_from, img.local) {
                    (Some(_), _) => {
                        "builder image (built here, keyed by its Containerfile and base recipe)"
                    }
                    (None, true) => "builder image (local, keyed by its image ID)",
                    (None, false) => "builder image",
                },
            )]),
        });
    }
    match &comp.source {
        Some(SourceView::Git { .. }) => out.push(ResourceDescriptor {
            name: Some("source".into()),
            uri: c.source_location(),
            digest: c
                .commit()
                .map(|commit| digest("gitCommit", commit))
                .unwrap_or_default(),
            annotations: annotated(&[("role", "source")]),
        }),
        Some(SourceView::Url { url, sha256 }) => out.push(ResourceDescriptor {
            name: Some("source".into()),
            uri: Some(url.clone()),
            digest: digest("sha256", sha256),
            annotations: annotated(&[("role", "source")]),
        }),
        Some(SourceView::Path { path }) => out.push(ResourceDescriptor {
            name: Some("source".into()),
            uri: Some(format!("file:{path}")),
            digest: BTreeMap::new(),
            annotations: annotated(&[("role", "source (a local directory, not pinned)")]),
        }),
        None => {}
    }
    for s in &comp.series {
        out.push(ResourceDescriptor {
            name: Some("patch-series".into()),
            uri: Some(s.url.clone()),
            digest: digest("sha256", &s.sha256),
            annotations: annotated(&[("role", "patch series")]),
        });
    }
    for p in &comp.patches {
        out.push(ResourceDescriptor {
            name: Some(p.file.clone()),
            uri: Some(format!("file:patches/{}/{}/{}", c.release, c.name, p.file)),
            digest: digest("sha256", &p.sha256),
            annotations: annotated(&[("role", "patch")]),
        });
    }
    for i in &comp.inputs {
        let sha = i
            .sha256
            .clone()
            .or_else(|| comp.locked_inputs.get(&i.name).cloned());
        out.push(ResourceDescriptor {
            name: Some(i.name.clone()),
            uri: Some(i.url.clone()),
            digest: sha.map(|s| digest("sha256", &s)).unwrap_or_default(),
            annotations: annotated(&[("role", "extra input")]),
        });
    }
    for d in &c.depends {
        out.push(artifact_ref(d.name.as_str(), d.key.as_str(), "dependency"));
    }
    for d in &c.build_depends {
        out.push(artifact_ref(
            d.name.as_str(),
            d.key.as_str(),
            "build-only dependency",
        ));
    }
    out
}

fn builder() -> Builder {
    Builder {
        id: BUILDER_ID.into(),
        version: [(
            "rocforge".to_string(),
            env!("CARGO_PKG_VERSION").to_string(),
        )]
        .into(),
    }
}

fn subject_descriptor(subject: &Subject) -> ResourceDescriptor {
    ResourceDescriptor {
        name: Some(subject.name.clone()),
        uri: None,
        digest: digest("sha256", &subject.sha256),
        annotations: BTreeMap::new(),
    }
}

/// The provenance of a tarball made from `c`.
pub fn component_statement(subject: &Subject, c: &ComponentRecord) -> Statement {
    let hi = &c.hash_input;
    Statement {
        type_: STATEMENT_TYPE.into(),
        subject: vec![subject_descriptor(subject)],
        predicate_type: PREDICATE_TYPE.into(),
        predicate: Provenance {
            build_definition: BuildDefinition {
                build_type: BUILD_TYPE.into(),
                external_parameters: ExternalParameters {
                    component: Some(c.name.to_string()),
                    version: Some(c.version.clone()),
                    release: c.release.clone(),
                    targets: c.targets.clone(),
                    overlays: hi.component.overlays.clone(),
                    ..Default::default()
                },
                internal_parameters: InternalParameters {
                    driver: (hi.driver != 0).then_some(hi.driver),
                    runtime: if hi.runtime.is_empty() {
                        c.runtime.to_string()
                    } else {
                        hi.runtime.clone()
                    },
                    prefix: hi.release.prefix.clone(),
                    build: hi.component.build.clone(),
                },
                resolved_dependencies: component_inputs(c),
            },
            run_details: RunDetails {
                builder: builder(),
                metadata: Metadata {
                    invocation_id: c.key.clone(),
                },
            },
        },
    }
}

/// The provenance of an image stacking `components` on its base.
pub fn image_statement(
    subject: &Subject,
    components: &[ComponentRecord],
    prefix: &str,
) -> Statement {
    debug_assert_eq!(subject.kind, SubjectKind::Image);
    let mut deps = Vec::new();
    if let Some((reference, d)) = &subject.base {
        deps.push(ResourceDescriptor {
            name: Some("base-image".into()),
            uri: Some(format!("oci://{reference}")),
            digest: digest("sha256", d),
            annotations: annotated(&[("role", "base image")]),
        });
    }
    for c in components {
        deps.push(artifact_ref(&c.name, &c.key, "component"));
    }
    let mut targets: Vec<String> = components.iter().flat_map(|c| c.targets.clone()).collect();
    targets.sort();
    targets.dedup();
    Statement {
        type_: STATEMENT_TYPE.into(),
        subject: vec![subject_descriptor(subject)],
        predicate_type: PREDICATE_TYPE.into(),
        predicate: Provenance {
            build_definition: BuildDefinition {
                build_type: IMAGE_BUILD_TYPE.into(),
                external_parameters: ExternalParameters {
                    components: components
                        .iter()
                        .map(|c| ComponentRef {
                            name: c.name.to_string(),
                            version: c.version.clone(),
                            key: c.key.clone(),
                        })
                        .collect(),
                    image: Some(subject.name.clone()),
                    release: components
                        .first()
                        .map(|c| c.release.clone())
                        .unwrap_or_default(),
                    targets,
                    ..Default::default()
                },
                internal_parameters: InternalParameters {
                    prefix: prefix.to_string(),
                    ..Default::default()
                },
                resolved_dependencies: deps,
            },
            run_details: RunDetails {
                builder: builder(),
                metadata: Metadata {
                    invocation_id: subject.name.clone(),
                },
            },
        },
    }
}

impl Statement {
    /// The first subject's sha256 (hex).
    pub fn subject_sha256(&self) -> Option<&str> {
        self.subject
            .first()?
            .digest
            .get("sha256")
            .map(String::as_str)
    }
}
