//! Content keys: sha256 over a canonical, versioned encoding of everything that can change a
//! component's output.
//!
//! The encoding is JSON produced from fixed-order structs and sorted maps, so it is stable across
//! runs, machines and compiler versions; it is written next to every artifact
//! (`hash-input.json`) so "why did this rebuild?" has an answer. Fields that cannot change the
//! output (summary, license, test client, resource hints) are left out on purpose.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::arch::TargetId;
use crate::recipe::{BuildSystem, Source};

/// Bumped when the encoding below changes shape.
pub const HASH_INPUT_SCHEMA: &str = "rocforge.hash-input/1";
/// Bumped when the build driver changes how it turns a recipe into commands or what it adds to
/// a build's output. 2: the source's license files are copied into `share/doc/<component>/`.
pub const BUILD_DRIVER_SCHEMA: u32 = 2;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum RuntimeKind {
    /// podman or docker: same image, same key.
    Container,
    /// Directly on the host: never shares a key with a container build.
    Host,
}

#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq, Eq, schemars::JsonSchema)]
pub struct ImageRef {
    pub reference: String,
    /// `sha256:…` from rocforge.lock, or a local image ID; None when `built_from` keys it.
    pub digest: Option<String>,
    /// Built locally by `rocforge image build`. Keyed by its image ID (and then never pushed to
    /// a shared cache: no other machine has that image) unless `built_from` keys it.
    pub local: bool,
    /// For an image `rocforge image build` makes from inputs that pin it (a Containerfile
    /// FROM the line's debootstrap `[image-base]` or a digest, copying nothing in):
    /// `sha256:…` of the Containerfile's bytes and the base's suite and variant. Keys hold
    /// this instead of the local image ID, which differs on every machine that builds the same
    /// image; `image build` checks the image against the Containerfile's version pins. Absent
    /// for other images, so their keys are what they were.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub built_from: Option<String>,
    /// `digest` is the ID the local runtime reports for the reference (the image is not pinned
    /// by the lock): builds run that exact image. Not part of keys: the ID itself is.
    #[serde(skip)]
    pub runtime_id: bool,
}

/// What a content key is the sha256 of (its compact JSON): `hash-input.json` beside every
/// artifact, and `plan --explain COMPONENT --format json`, which prints it in this order.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct HashInput {
    pub schema: &'static str,
    pub driver: u32,
    pub release: ReleaseInput,
    pub image: ImageRef,
    pub runtime: RuntimeKind,
    pub component: ComponentInput,
    pub targets: Vec<TargetId>,
    pub dependencies: Vec<DependencyInput>,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ReleaseInput {
    pub name: String,
    pub prefix: String,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ComponentInput {
    pub name: String,
    pub version: String,
    pub source: Source,
    /// A `path` source's tree digest (paths, modes, bytes): the source is its contents, not
    /// its name. Absent for other sources, whose pins say what they hold.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_tree: Option<String>,
    /// The commit a tag resolved to (from rocforge.lock); None while unlocked.
    pub locked_commit: Option<String>,
    /// Patch series from pinned archives (`[[series]]`); absent when there is none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub series: Vec<crate::recipe::Series>,
    pub patches: Vec<PatchInput>,
    pub build: BuildInput,
    /// Post-patch derivations that run for the targeted processors.
    pub derivations: Vec<crate::recipe::Derive>,
    /// What each derivation substitutes, per targeted processor (`{isa}` and the KFD version
    /// come from arches.toml, not the recipe); absent when there is no derivation.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub derive_vars: Vec<BTreeMap<String, BTreeMap<String, String>>>,
    /// User overlays (`--overlay`), by destination and content digest.
    pub overlays: Vec<crate::catalog::Overlay>,
    /// Extra inputs, pinned by sha256.
    pub inputs: Vec<crate::recipe::ExtraInput>,
    /// For inputs the recipe pins by md5 only: input name → the sha256 rocforge.lock records
    /// (absent while unlocked, as `locked_commit` is for an unlocked tag).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub locked_inputs: BTreeMap<String, String>,
    /// The recipe's `license-files` (copied into the tree); absent when the recipe has none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub license_files: Vec<String>,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct PatchInput {
    pub file: String,
    pub sha256: String,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct BuildInput {
    #[serde(flatten)]
    pub system: BuildSystem,
    pub arch_vars: Vec<String>,
    pub args: Vec<String>,
    /// Only the per-arch arguments of the targets being built.
    pub arch_args: BTreeMap<String, Vec<String>>,
    pub env: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DependencyInput {
    pub name: String,
    pub key: String,
}

/// What later stages read back from a stored `hash-input.json`: the dependencies it was keyed
/// with. The rest stays as written (manifests carry the whole document verbatim).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct RecordedInputs {
    #[serde(default)]
    pub dependencies: Vec<DependencyInput>,
}

impl HashInput {
    /// The canonical bytes that are hashed.
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("hash input is plain data")
    }

    pub fn key(&self) -> ContentKey {
        ContentKey::from_digest(&Sha256::digest(self.encode()))
    }

    pub fn to_value(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("hash input is plain data")
    }
}

pub use crate::ids::ContentKey;

/// Which inputs differ between two hash inputs, named as dotted paths
/// (`component.patches`, `dependencies.rocprim`, `targets`).
pub fn changed_inputs(old: &serde_json::Value, new: &serde_json::Value) -> Vec<String> {
    use serde_json::Value;
    let mut out = Vec::new();
    let (Value::Object(o), Value::Object(n)) = (old, new) else {
        return vec!["everything".into()];
    };
    let keys: std::collections::BTreeSet<&String> = o.keys().chain(n.keys()).collect();
    for k in keys {
        let (a, b) = (o.get(k), n.get(k));
        if a == b {
            continue;
        }
        match (k.as_str(), a, b) {
            ("component", Some(Value::Object(ca)), Some(Value::Object(cb))) => {
                let sub: std::collections::BTreeSet<&String> = ca.keys().chain(cb.keys()).collect();
                for s in sub {
                    if ca.get(s) != cb.get(s) {
                        out.push(format!("component.{s}"));
                    }
                }
            }
            ("dependencies", Some(Value::Array(da)), Some(Value::Array(db))) => {
                let by_name = |v: &Vec<Value>| -> BTreeMap<String, Value> {
                    v.iter()
                        .filter_map(|d| {
                            Some((d.get("name")?.as_str()?.to_string(), d.get("key")?.clone()))
                        })
                        .collect()
                };
                let (ma, mb) = (by_name(da), by_name(db));
                let names: std::collections::BTreeSet<&String> =
                    ma.keys().chain(mb.keys()).collect();
                for name in names {
                    if ma.get(name) != mb.get(name) {
                        out.push(format!("dependencies.{name}"));
                    }
                }
            }
            _ => out.push(k.clone()),
        }
    }
    out
}
