//! The new image's config and manifest: the base's, with the layer, environment and labels added.

use std::collections::BTreeMap;

use crate::oci::{Descriptor, IMAGE_MANIFEST, ImageManifest};

use super::{Base, Component, DEFAULT_PATH, Layer, OCI_CONFIG, host_arch};

/// What goes into the config besides the base and the layer.
pub struct Spec<'a> {
    pub components: &'a [Component],
    /// The release prefix, e.g. /opt/rocm.
    pub prefix: &'a str,
    pub release: &'a str,
    pub targets: &'a [String],
    /// Seconds since the epoch for `created` (and the layer's mtimes).
    pub created: u64,
}

/// The new image: config bytes and manifest.
pub struct Image {
    pub config: Vec<u8>,
    pub manifest: ImageManifest,
}

impl Image {
    pub fn manifest_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(&self.manifest).expect("plain data")
    }
    pub fn digest(&self) -> String {
        crate::oci::digest_of(&self.manifest_bytes())
    }
    /// The image ID podman and docker show: the config's digest.
    pub fn id(&self) -> String {
        self.manifest.config.digest.clone()
    }
}

/// `PATH`-like: `first` then what `old` had (without `first`).
pub(super) fn prepend(first: &str, old: Option<&str>) -> String {
    match old {
        Some(o) if !o.is_empty() => {
            let rest: Vec<&str> = o.split(':').filter(|p| *p != first).collect();
            if rest.is_empty() {
                first.to_string()
            } else {
                format!("{first}:{}", rest.join(":"))
            }
        }
        _ => first.to_string(),
    }
}

/// The config (base config, layer added, environment and labels set) and the manifest.
pub fn compose(base: &Base, layer: &Layer, spec: &Spec<'_>) -> Image {
    let prefix = format!("/{}", spec.prefix.trim_matches('/'));
    let created = crate::units::rfc3339(spec.created);
    let mut c = base.config.clone();
    c["created"] = created.clone().into();
    if !c["architecture"].is_string() {
        c["architecture"] = host_arch().into();
    }
    if !c["os"].is_string() {
        c["os"] = "linux".into();
    }
    // rootfs
    let mut diff_ids = c["rootfs"]["diff_ids"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    diff_ids.push(layer.diff_id.clone().into());
    c["rootfs"] = serde_json::json!({"type": "layers", "diff_ids": diff_ids});
    if !c["config"].is_object() {
        c["config"] = serde_json::json!({});
    }
    let env = environment(&c["config"]["Env"], &prefix, layer.site_packages.as_deref());
    c["config"]["Env"] = env.into();
    let names: Vec<&str> = spec.components.iter().map(|c| c.name.as_str()).collect();
    let labels = labels(&c["config"]["Labels"], base, spec, &prefix, &created);
    c["config"]["Labels"] = serde_json::to_value(&labels).expect("plain data");
    // history
    let mut history = c["history"].as_array().cloned().unwrap_or_default();
    history.push(serde_json::json!({
        "created": created,
        "created_by": format!("rocforge image create {} (installed in {prefix})", names.join(" ")),
        "comment": format!("rocforge {}", env!("CARGO_PKG_VERSION")),
    }));
    c["history"] = history.into();
    let config = serde_json::to_vec(&c).expect("plain data");
    let mut layers = base.layers.clone();
    layers.push(layer.descriptor());
    let manifest = ImageManifest {
        schema_version: 2,
        media_type: IMAGE_MANIFEST.into(),
        artifact_type: None,
        config: Descriptor {
            media_type: OCI_CONFIG.into(),
            digest: crate::oci::digest_of(&config),
            size: config.len() as u64,
            annotations: BTreeMap::new(),
        },
        layers,
        annotations: [
            (
                "org.opencontainers.image.base.name".to_string(),
                base.name.clone(),
            ),
            (
                "org.opencontainers.image.base.digest".to_string(),
                base.digest.clone(),
            ),
            ("org.opencontainers.image.created".to_string(), created),
        ]
        .into(),
    };
    Image { config, manifest }
}

/// The base's environment (`env`, its `Env`) with ours set for the stack under `prefix`:
/// ordered as the base had it, ours replaced in place or appended.
fn environment(env: &serde_json::Value, prefix: &str, site_packages: Option<&str>) -> Vec<String> {
    let env: Vec<String> = env
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e.as_str().map(str::to_string))
        .collect();
    let get = |k: &str| {
        env.iter()
            .find_map(|e| e.strip_prefix(k).and_then(|r| r.strip_prefix('=')))
    };
    let mut ours = vec![
        (
            "PATH",
            prepend(
                &format!("{prefix}/bin"),
                Some(get("PATH").unwrap_or(DEFAULT_PATH)),
            ),
        ),
        ("ROCM_PATH", prefix.to_string()),
        (
            "LD_LIBRARY_PATH",
            prepend(&format!("{prefix}/lib"), get("LD_LIBRARY_PATH")),
        ),
    ];
    // Only an image with wheels unpacked names them: the other images' configs stay as they were.
    if let Some(site) = site_packages {
        ours.push(("PYTHONPATH", prepend(site, get("PYTHONPATH"))));
    }
    let mut new_env: Vec<String> = env
        .iter()
        .map(|e| {
            let k = e.split_once('=').map_or(e.as_str(), |(k, _)| k);
            match ours.iter().find(|(o, _)| *o == k) {
                Some((o, v)) => format!("{o}={v}"),
                None => e.clone(),
            }
        })
        .collect();
    for (k, v) in &ours {
        if get(k).is_none() {
            new_env.push(format!("{k}={v}"));
        }
    }
    new_env
}

/// The base's labels (`old`, its `Labels`) with the image's own added: what it holds, what it
/// was made from, and where the stack is.
fn labels(
    old: &serde_json::Value,
    base: &Base,
    spec: &Spec<'_>,
    prefix: &str,
    created: &str,
) -> BTreeMap<String, String> {
    let names: Vec<&str> = spec.components.iter().map(|c| c.name.as_str()).collect();
    let mut labels: BTreeMap<String, String> = old
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
        .collect();
    labels.extend(
        [
            ("org.opencontainers.image.created", created.to_string()),
            (
                "org.opencontainers.image.title",
                format!("rocforge {}", names.join(" ")),
            ),
            (
                "org.opencontainers.image.description",
                format!(
                    "{} ({}) for {}, built by rocforge, installed in {prefix}",
                    names.join(", "),
                    spec.release,
                    spec.targets.join(",")
                ),
            ),
            ("org.opencontainers.image.version", spec.release.to_string()),
            ("org.opencontainers.image.base.name", base.name.clone()),
            ("org.opencontainers.image.base.digest", base.digest.clone()),
            (
                "rocforge.components",
                spec.components
                    .iter()
                    .map(|c| format!("{}={}", c.name, c.version))
                    .collect::<Vec<_>>()
                    .join(","),
            ),
            (
                "rocforge.keys",
                spec.components
                    .iter()
                    .map(|c| format!("{}={}", c.name, c.key))
                    .collect::<Vec<_>>()
                    .join(","),
            ),
            ("rocforge.targets", spec.targets.join(",")),
            ("rocforge.prefix", prefix.to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v)),
    );
    labels
}
