//! What `image create --format json` prints.

use serde::Serialize;

use super::{Created, CreatedComponent};

pub const IMAGE_SCHEMA: &str = "rocforge.image/1";

/// The layer rocforge added to the base: the install prefix.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Layer {
    pub digest: String,
    pub diff_id: String,
    /// Compressed, in bytes.
    pub size: u64,
    /// Files, directories and links in it.
    pub entries: usize,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Report {
    pub schema: &'static str,
    pub tag: String,
    /// The manifest's digest.
    pub digest: String,
    /// The config's digest: the ID a container runtime shows.
    pub id: String,
    pub base: String,
    pub base_digest: String,
    pub layer: Layer,
    pub components: Vec<CreatedComponent>,
    pub targets: Vec<String>,
    /// Where the components are installed in the image (ROCM_PATH).
    pub prefix: String,
    /// Seconds since the epoch: SOURCE_DATE_EPOCH when set, else the newest build's.
    pub created: u64,
    /// `NAME@DIGEST` as pushed; null when not pushed.
    pub pushed: Option<String>,
    /// The tool that loaded the image (podman or docker); null when not loaded.
    pub loaded: Option<&'static str>,
    /// Where HIP's runtime was found in the base, when the stack needs it.
    pub hip_runtime: Option<String>,
}

impl Created {
    pub fn report(&self) -> Report {
        Report {
            schema: IMAGE_SCHEMA,
            tag: self.tag.clone(),
            digest: self.digest.clone(),
            id: self.id.clone(),
            base: self.base.clone(),
            base_digest: self.base_digest.clone(),
            layer: Layer {
                digest: self.layer_digest.clone(),
                diff_id: self.layer_diff_id.clone(),
                size: self.layer_size,
                entries: self.layer_entries,
            },
            components: self.components.clone(),
            targets: self.targets.clone(),
            prefix: self.prefix.clone(),
            created: self.created,
            pushed: self.pushed.clone(),
            loaded: self.loaded.as_ref().map(|(l, _)| l.tool()),
            hip_runtime: self.hip.clone(),
        }
    }
}
