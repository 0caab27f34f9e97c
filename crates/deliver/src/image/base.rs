//! The base image: how `--base` is named, and reading it from a registry.

use std::collections::BTreeMap;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use crate::oci::{
    Descriptor, IMAGE_INDEX, IMAGE_MANIFEST, ImageManifest, OciError, Remote, Repository,
};

use super::{
    DOCKER_LAYER_GZIP, DOCKER_LIST, DOCKER_MANIFEST, ImageError, LAYER_TAR_GZIP, Loader, io_err,
    local_base,
};

/// A base image reference: `REGISTRY/NAME:TAG` or `REGISTRY/NAME@sha256:…`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    pub repo: Repository,
    /// A tag or a `sha256:` digest.
    pub reference: String,
}

impl Reference {
    pub fn parse(s: &str) -> Result<Reference, OciError> {
        if let Some((name, digest)) = s.split_once('@') {
            let repo = Repository::parse(name)?;
            if crate::oci::ImageName::parse(&format!("{name}:x")).is_err()
                || !digest.starts_with("sha256:")
            {
                return Err(OciError::Malformed(s.to_string()));
            }
            return Ok(Reference {
                repo,
                reference: digest.to_string(),
            });
        }
        let n = crate::oci::ImageName::parse(s)?;
        let repo = Repository::parse(&format!("{}/{}", n.registry, n.repository))?;
        Ok(Reference {
            repo,
            reference: n.tag,
        })
    }

    /// As written: `REGISTRY/NAME:TAG` or `REGISTRY/NAME@DIGEST`.
    pub fn full(&self) -> String {
        let sep = if self.reference.starts_with("sha256:") {
            '@'
        } else {
            ':'
        };
        format!(
            "{}/{}{sep}{}",
            self.repo.registry, self.repo.repository, self.reference
        )
    }
}

/// The base image: its (platform) manifest digest, config and layers.
pub struct Base {
    /// As the image's labels name it: `REGISTRY/NAME:TAG` (or `@sha256:…`), or the local name.
    pub name: String,
    pub source: BaseSource,
    pub digest: String,
    pub config: serde_json::Value,
    /// With OCI media types (a Docker v2 layer's bytes are the same gzip tar).
    pub layers: Vec<Descriptor>,
}

/// Where a base's blobs are read from.
pub enum BaseSource {
    Registry(Remote<'static>),
    /// Saved out of podman's or docker's storage: each blob a file, its digest checked.
    Local {
        blobs: BTreeMap<String, PathBuf>,
    },
}

impl Base {
    /// A blob of the base, streamed (the reader checks nothing: callers hash what they copy).
    pub fn blob(&self, digest: &str) -> Result<Box<dyn Read + Send>, ImageError> {
        match &self.source {
            BaseSource::Registry(remote) => Ok(Box::new(remote.get_blob(digest)?)),
            BaseSource::Local { blobs, .. } => {
                let path = blobs.get(digest).ok_or_else(|| ImageError::Base {
                    reference: self.name.clone(),
                    message: format!("its saved archive has no blob {digest}"),
                })?;
                let f = std::fs::File::open(path).map_err(io_err(path))?;
                Ok(Box::new(io::BufReader::with_capacity(1 << 20, f)))
            }
        }
    }

    /// The label or file that shows the base has `soname` (`libamdhip64.so.6`): the base's
    /// `org.rocforge.hip-runtime` label when it names it, else a library of that name found in
    /// its layers (read through). None when it has none.
    pub fn provides(&self, soname: &str) -> Result<Option<String>, ImageError> {
        if let Some(l) = self.config["config"]["Labels"][HIP_LABEL].as_str()
            && l.split_whitespace().next() == Some(soname)
        {
            return Ok(Some(format!("label {HIP_LABEL}={l}")));
        }
        let mut found = None;
        self.scan_libraries(|path, name, layer| {
            if name == soname {
                found = Some(format!("/{} in layer {layer}", path.display()));
            }
            found.is_some()
        })?;
        Ok(found)
    }

    /// Where the base has Python `version` (`3.13`, or `3` for any Python 3): its standard
    /// library's directory, `/usr/lib/python3.13` or `/usr/local/lib/python3.13`.
    pub fn python(&self, version: &str) -> Result<Option<String>, ImageError> {
        let wanted = |name: &str| match name.strip_prefix("python") {
            Some(v) if version == "3" => v
                .strip_prefix("3.")
                .is_some_and(|m| !m.is_empty() && m.bytes().all(|b| b.is_ascii_digit())),
            Some(v) => v == version,
            None => false,
        };
        let mut found = None;
        self.scan_libraries(|path, name, layer| {
            let parent = path.parent().and_then(|p| p.file_name());
            if parent.is_some_and(|p| p == "lib") && wanted(name) {
                found = Some(format!("/{} in layer {layer}", path.display()));
            }
            found.is_some()
        })?;
        Ok(found)
    }

    /// Calls `visit` with the path, file name and layer digest of every entry of the base's
    /// layers in a library directory (`…/lib/…`, `…-linux-gnu/…`), until it returns true.
    fn scan_libraries(
        &self,
        mut visit: impl FnMut(&Path, &str, &str) -> bool,
    ) -> Result<(), ImageError> {
        for l in &self.layers {
            let r = self.blob(&l.digest)?;
            let plain: Box<dyn Read> = if l.media_type.ends_with("+gzip") {
                Box::new(flate2::read::GzDecoder::new(r))
            } else if l.media_type.ends_with("+zstd") {
                Box::new(zstd::stream::read::Decoder::new(r).map_err(io_err(Path::new(&l.digest)))?)
            } else {
                r
            };
            let mut found = false;
            crate::package::extract::visit_entries(plain, &l.digest, |path| {
                use std::os::unix::ffi::OsStrExt;
                let path = Path::new(std::ffi::OsStr::from_bytes(path));
                let in_lib = path.components().any(|c| {
                    c.as_os_str() == "lib"
                        || c.as_os_str().to_string_lossy().ends_with("-linux-gnu")
                });
                found = in_lib
                    && path
                        .file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|name| visit(path, name, &l.digest));
                found
            })
            .map_err(|e| ImageError::Base {
                reference: self.name.clone(),
                message: format!("its layer {} is not a readable tar: {e}", l.digest),
            })?;
            if found {
                return Ok(());
            }
        }
        Ok(())
    }
}

impl Base {
    /// Those of `needs` (soname → the stack's file that needs it) that no library directory of
    /// the base holds, read in one pass over its layers. A name found anywhere in a layer counts,
    /// a later layer's deletion (whiteout) not being followed: the bases are Debian's own.
    pub fn lacks(
        &self,
        needs: &BTreeMap<String, String>,
    ) -> Result<Vec<(String, String)>, ImageError> {
        let mut left: BTreeMap<&str, &str> = needs
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        if !left.is_empty() {
            self.scan_libraries(|_, name, _| {
                left.remove(name);
                left.is_empty()
            })?;
        }
        Ok(left
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect())
    }
}

/// The label a base carries when it has HIP's runtime: `SONAME VERSION`.
pub const HIP_LABEL: &str = "org.rocforge.hip-runtime";

/// The HIP runtime library a stack built with HIP links.
pub const HIP_SONAME: &str = "libamdhip64.so.6";

/// Where a `--base` is read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BaseRef {
    /// `REGISTRY/NAME:TAG` or `REGISTRY/NAME@sha256:…`, pulled through the registry API.
    Registry(String),
    /// `containers-storage:NAME` or a plain `localhost/NAME:TAG` (podman's), or
    /// `docker-daemon:NAME` (docker's): read with `podman save` / `docker save`.
    Local { tool: Loader, name: String },
}

impl BaseRef {
    pub fn parse(s: &str) -> BaseRef {
        if let Some(name) = s.strip_prefix("containers-storage:") {
            return BaseRef::Local {
                tool: Loader::Podman,
                name: name.to_string(),
            };
        }
        if let Some(name) = s.strip_prefix("docker-daemon:") {
            return BaseRef::Local {
                tool: Loader::Docker,
                name: name.to_string(),
            };
        }
        // No registry answers at `localhost` without a port: that is podman's name for what
        // it built or imported.
        if s.starts_with("localhost/") {
            return BaseRef::Local {
                tool: Loader::Podman,
                name: s.to_string(),
            };
        }
        BaseRef::Registry(s.to_string())
    }
}

/// Reads the base `reference` names: from its registry ([`pull_base`]) or from local storage
/// ([`local_base`], its blobs kept in `work_dir`).
pub fn read_base(
    client: reqwest::blocking::Client,
    reference: &str,
    work_dir: &Path,
) -> Result<Base, ImageError> {
    match BaseRef::parse(reference) {
        BaseRef::Registry(r) => pull_base(client, &r),
        BaseRef::Local { tool, name } => local_base(tool, &name, reference, work_dir),
    }
}

/// What a base's config must say of its manifest's layers and its OS, wherever it was read.
pub(super) fn check_config(config: &serde_json::Value, layers: usize) -> Result<(), String> {
    let diff_ids = config["rootfs"]["diff_ids"].as_array().map_or(0, Vec::len);
    if diff_ids != layers {
        return Err(format!(
            "its config lists {diff_ids} layer(s), its manifest {layers}"
        ));
    }
    if !matches!(config["os"].as_str(), Some("linux") | None) {
        return Err(format!("it is an image for {}", config["os"]));
    }
    Ok(())
}

/// The GOARCH name of this machine's architecture.
pub fn host_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

/// Where a repository's API is: Docker Hub's (`docker.io/NAME`) is on registry-1.docker.io,
/// with official images under library/.
pub fn api_repo(repo: &Repository) -> Repository {
    let mut api = repo.clone();
    if api.registry == "docker.io" {
        api.registry = "registry-1.docker.io".into();
        if !api.repository.contains('/') {
            api.repository = format!("library/{}", api.repository);
        }
    }
    api
}

/// Pulls the base's manifest (choosing linux/<host arch> from an index or manifest list) and
/// config. Layers are not downloaded here.
pub fn pull_base(client: reqwest::blocking::Client, reference: &str) -> Result<Base, ImageError> {
    let r = Reference::parse(reference)?;
    let remote = Remote::new(client, api_repo(&r.repo));
    let bad = |message: String| ImageError::Base {
        reference: reference.to_string(),
        message,
    };
    let (mut digest, mut bytes) = remote.get_manifest(&r.reference)?.ok_or_else(|| {
        ImageError::Oci(OciError::Status {
            registry: r.repo.registry.clone(),
            reference: reference.to_string(),
            status: 404,
        })
    })?;
    let parse = |b: &[u8]| {
        serde_json::from_slice::<serde_json::Value>(b)
            .map_err(|e| bad(format!("its manifest is not JSON: {e}")))
    };
    let mut v = parse(&bytes)?;
    let is_index = |v: &serde_json::Value| {
        matches!(v["mediaType"].as_str(), Some(IMAGE_INDEX | DOCKER_LIST))
            || (v["mediaType"].is_null() && v["manifests"].is_array())
    };
    if is_index(&v) {
        let arch = host_arch();
        let chosen = v["manifests"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|m| m["platform"]["os"] == "linux" && m["platform"]["architecture"] == arch)
            .and_then(|m| m["digest"].as_str())
            .ok_or_else(|| bad(format!("it has no linux/{arch} image")))?
            .to_string();
        (digest, bytes) = remote
            .get_manifest(&chosen)?
            .ok_or_else(|| bad(format!("its linux/{arch} manifest {chosen} is missing")))?;
        v = parse(&bytes)?;
        if is_index(&v) {
            return Err(bad("its index points at another index".into()));
        }
    }
    match v["mediaType"].as_str() {
        Some(IMAGE_MANIFEST | DOCKER_MANIFEST) | None => {}
        Some(other) => return Err(bad(format!("unsupported manifest type {other}"))),
    }
    if v["mediaType"].is_null() {
        // Optional in OCI manifests (podman leaves it out).
        v["mediaType"] = IMAGE_MANIFEST.into();
    }
    let m: ImageManifest = serde_json::from_value(v)
        .map_err(|e| bad(format!("its manifest is not an image manifest: {e}")))?;
    let mut layers = Vec::new();
    for l in m.layers {
        let media_type = match l.media_type.as_str() {
            DOCKER_LAYER_GZIP => LAYER_TAR_GZIP.to_string(),
            t if t.starts_with("application/vnd.oci.image.layer.v1.tar") => t.to_string(),
            t => return Err(bad(format!("unsupported layer type {t} ({})", l.digest))),
        };
        layers.push(Descriptor { media_type, ..l });
    }
    let config_bytes = remote.get_blob_bytes(&m.config.digest, 16 << 20)?;
    let config: serde_json::Value = serde_json::from_slice(&config_bytes)
        .map_err(|e| bad(format!("its config is not JSON: {e}")))?;
    check_config(&config, layers.len()).map_err(bad)?;
    Ok(Base {
        name: r.full(),
        source: BaseSource::Registry(remote),
        digest,
        config,
        layers,
    })
}
