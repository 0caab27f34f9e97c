//! `rocforge image create`: an OCI image made of a base image (pulled from a registry) plus one
//! layer holding the installed stack under the release prefix, with the environment set
//! (ROCM_PATH, PATH, LD_LIBRARY_PATH).
//!
//! Reproducible: the layer is a deterministic tar (sorted entries, 0:0, one mtime, modes
//! 0755/0644, written by [`crate::package::tarball::append_files`]) gzip-compressed with a zero
//! header time; the config and manifest are serialized from the base's config and fixed values
//! only (`created` is SOURCE_DATE_EPOCH, else the newest the store entries record, else 0). The
//! same store entries on the same base give the same manifest digest.
//!
//! The image is pushed to a registry ([`push`]) or written as an archive ([`write_archive`]:
//! oci-archive for `podman load`, docker-archive for `docker load`).

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::oci::{
    Descriptor, DigestReader, IMAGE_INDEX, IMAGE_MANIFEST, ImageManifest, OciError, Remote,
    Repository,
};
use crate::package::PackageError;
use crate::package::manifest::{FileEntry, Kind};
use crate::package::tarball::{self, HashingWriter};

pub const LAYER_TAR_GZIP: &str = "application/vnd.oci.image.layer.v1.tar+gzip";
pub const LAYER_TAR: &str = "application/vnd.oci.image.layer.v1.tar";
pub const OCI_CONFIG: &str = "application/vnd.oci.image.config.v1+json";
const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
const DOCKER_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";
const DOCKER_LAYER_GZIP: &str = "application/vnd.docker.image.rootfs.diff.tar.gzip";
const REF_NAME: &str = "org.opencontainers.image.ref.name";
/// PATH when the base image sets none (Docker's default).
const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error(transparent)]
    Oci(#[from] OciError),
    #[error(transparent)]
    Package(#[from] PackageError),
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
    #[error("base image {reference}: {message}")]
    Base { reference: String, message: String },
    #[error("{path} is in both {first} and {second}, with different contents")]
    Conflict {
        path: String,
        first: String,
        second: String,
    },
    #[error("`{tool} load` failed: {message}")]
    Load { tool: String, message: String },
    #[error("base image {reference} is not in {tool}'s local storage: {message}")]
    LocalMissing {
        reference: String,
        tool: String,
        message: String,
    },
    #[error(
        "base image {reference} has no HIP runtime ({soname}), which {needer} of the stack needs"
    )]
    NoHip {
        reference: String,
        soname: String,
        needer: String,
    },
    #[error(
        "base image {reference} lacks libraries the stack links: {}",
        missing.iter().map(|(soname, needer)| format!("{soname} (needed by {needer})")).collect::<Vec<_>>().join(", ")
    )]
    Unresolved {
        reference: String,
        /// (soname, the first component of the stack that needs it)
        missing: Vec<(String, String)>,
    },
    #[error("{tag} already exists in its registry as {existing}, not this image ({ours})")]
    TagTaken {
        tag: String,
        existing: String,
        ours: String,
    },
}

impl ImageError {
    pub fn hint(&self) -> String {
        match self {
            ImageError::Oci(e) => e.hint(),
            ImageError::Package(e) => e.hint(),
            ImageError::Io { .. } => "check free disk space and permissions".into(),
            ImageError::Base { .. } => {
                "use a linux/amd64 image in OCI or Docker v2 format, by REGISTRY/NAME:TAG or REGISTRY/NAME@sha256:…".into()
            }
            ImageError::Conflict { .. } => {
                "two components install the same file: put only one of them in the image".into()
            }
            ImageError::Load { tool, .. } => {
                format!("check that `{tool} images` works for this user; or push with --push and pull the image")
            }
            ImageError::LocalMissing { tool, .. } => format!(
                "`{tool} images` lists what is there; `rocforge image build --kind runtime|devel` builds the line's bases, and `image create --kind runtime|devel` picks (and builds) one itself"
            ),
            ImageError::NoHip { .. } => "use a base with HIP's runtime: `--kind runtime` or `--kind devel` (the line's bases), or add the release's rocm-runtime component to the stack".into(),
            ImageError::Unresolved { .. } => "a program of the image would fail to load: add the packages that ship them to the line's runtime Containerfile (containers/Containerfile.runtime-<release>), or pass --base with an image that has them".into(),
            ImageError::TagTaken { .. } => {
                "pick another --tag, or pass --force to move the tag to this image".into()
            }
        }
    }
}

/// The `package=version` pins apt refused in a build log ("E: Version 'V' for 'P' was not
/// found"): a Containerfile pinned to a version the mirror has dropped.
pub fn apt_versions_gone(log: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for l in log.lines() {
        let Some(rest) = l.trim().strip_prefix("E: Version '") else {
            continue;
        };
        let Some((version, rest)) = rest.split_once("' for '") else {
            continue;
        };
        let Some((package, _)) = rest.split_once("' was not found") else {
            continue;
        };
        let pair = (package.to_string(), version.to_string());
        if !out.contains(&pair) {
            out.push(pair);
        }
    }
    out
}

fn io_err(path: &Path) -> impl Fn(io::Error) -> ImageError + '_ {
    move |source| ImageError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// One store entry going into the image.
#[derive(Debug, Clone)]
pub struct Component {
    pub name: String,
    pub version: String,
    pub key: String,
    pub tree: PathBuf,
}

/// The layer file, with its digests.
#[derive(Debug)]
pub struct Layer {
    pub path: tempfile::TempPath,
    /// `sha256:` of the compressed bytes (the blob).
    pub digest: String,
    pub size: u64,
    /// `sha256:` of the uncompressed tar (the config's rootfs.diff_ids).
    pub diff_id: String,
    pub entries: usize,
    /// DT_NEEDED names of the stack's ELF files that none of them provides (DT_SONAME), each
    /// with the first component (in the layer's order) that needs it: what the base must have.
    pub needs: BTreeMap<String, String>,
}

impl Layer {
    pub fn descriptor(&self) -> Descriptor {
        Descriptor {
            media_type: LAYER_TAR_GZIP.into(),
            digest: self.digest.clone(),
            size: self.size,
            annotations: BTreeMap::new(),
        }
    }
}

/// Writes one layer (in `work_dir`) holding every component's tree under `prefix`: the union
/// of the trees, sorted by path, with the prefix's parent directories first. The same path in
/// two components must be the same (directories always are).
pub fn write_layer(
    components: &[Component],
    prefix: &str,
    mtime: u64,
    work_dir: &Path,
) -> Result<Layer, ImageError> {
    let prefix = prefix.trim_matches('/');
    // path in the layer → (index of the component, entry relative to its tree)
    let mut all: BTreeMap<String, (Option<usize>, FileEntry)> = BTreeMap::new();
    let mut parent = String::new();
    for part in prefix.split('/').filter(|p| !p.is_empty()) {
        parent = if parent.is_empty() {
            part.to_string()
        } else {
            format!("{parent}/{part}")
        };
        all.insert(
            parent.clone(),
            (
                None,
                FileEntry {
                    path: parent.clone(),
                    kind: Kind::Dir,
                    size: 0,
                    sha256: None,
                    executable: false,
                    target: None,
                },
            ),
        );
    }
    let under = if prefix.is_empty() {
        String::new()
    } else {
        format!("{prefix}/")
    };
    let mut needed: BTreeMap<String, String> = BTreeMap::new();
    let mut provided = std::collections::BTreeSet::new();
    for (i, c) in components.iter().enumerate() {
        let scan = tarball::scan(&c.tree, &[])?;
        provided.extend(scan.sonames.iter().cloned());
        for n in &scan.needed {
            needed.entry(n.clone()).or_insert_with(|| c.name.clone());
        }
        for e in scan.files {
            let name = format!("{under}{}", e.path);
            match all.get(&name) {
                None => {
                    all.insert(name, (Some(i), e));
                }
                Some((_, old)) if old.kind == Kind::Dir && e.kind == Kind::Dir => {}
                Some((_, old))
                    if old.kind == e.kind
                        && old.sha256 == e.sha256
                        && old.executable == e.executable
                        && old.target == e.target => {}
                Some((j, _)) => {
                    return Err(ImageError::Conflict {
                        path: format!("/{name}"),
                        first: j.map_or("the prefix".into(), |j| components[j].name.clone()),
                        second: c.name.clone(),
                    });
                }
            }
        }
    }

    std::fs::create_dir_all(work_dir).map_err(io_err(work_dir))?;
    let tmp = tempfile::Builder::new()
        .prefix(".layer-")
        .suffix(".tar.gz")
        .tempfile_in(work_dir)
        .map_err(io_err(work_dir))?;
    let file = tmp.as_file().try_clone().map_err(io_err(tmp.path()))?;
    let compressed = HashingWriter {
        inner: io::BufWriter::with_capacity(1 << 20, file),
        hasher: Sha256::new(),
        bytes: 0,
    };
    let gz = flate2::GzBuilder::new()
        .mtime(0)
        .write(compressed, flate2::Compression::default());
    let plain = HashingWriter {
        inner: gz,
        hasher: Sha256::new(),
        bytes: 0,
    };
    let mut b = tar::Builder::new(plain);
    b.follow_symlinks(false);
    for (i, e) in all.values() {
        match i {
            Some(i) => tarball::append_files(
                &mut b,
                &components[*i].tree,
                std::slice::from_ref(e),
                &under,
                mtime,
            )?,
            None => tarball::append_files(&mut b, work_dir, std::slice::from_ref(e), "", mtime)?,
        }
    }
    let tmp_path = tmp.path().to_path_buf();
    let out = io_err(&tmp_path);
    let plain = b.into_inner().map_err(&out)?;
    let diff_id = format!("sha256:{}", hex::encode(plain.hasher.finalize()));
    let compressed = plain.inner.finish().map_err(&out)?;
    let HashingWriter {
        inner,
        hasher,
        bytes,
    } = compressed;
    inner
        .into_inner()
        .map_err(|e| out(e.into_error()))?
        .sync_all()
        .map_err(&out)?;
    Ok(Layer {
        path: tmp.into_temp_path(),
        digest: format!("sha256:{}", hex::encode(hasher.finalize())),
        size: bytes,
        diff_id,
        entries: all.len(),
        needs: needed
            .into_iter()
            .filter(|(n, _)| !provided.contains(n))
            .collect(),
    })
}

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
    Registry(Remote),
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
            let mut ar = tar::Archive::new(plain);
            let bad = |e: io::Error| ImageError::Base {
                reference: self.name.clone(),
                message: format!("its layer {} is not a readable tar: {e}", l.digest),
            };
            for e in ar.entries().map_err(bad)? {
                let e = e.map_err(bad)?;
                let path = e.path().map_err(bad)?;
                let in_lib = path.components().any(|c| {
                    c.as_os_str() == "lib"
                        || c.as_os_str().to_string_lossy().ends_with("-linux-gnu")
                });
                if in_lib
                    && let Some(name) = path.file_name().and_then(|n| n.to_str())
                    && visit(&path, name, &l.digest)
                {
                    return Ok(());
                }
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

/// What [`save`] recorded of each file it unpacked: its `sha256:` digest and size, computed
/// as the file was read from the tool's output.
const DIGESTS: &str = "digests.json";

/// `podman save --format oci-archive NAME` / `docker save NAME`, read from the tool's output
/// and unpacked into `dir` (made fresh; renamed into place only when complete), each file
/// hashed on the way.
fn save(tool: Loader, name: &str, shown: &str, dir: &Path) -> Result<(), ImageError> {
    let parent = dir.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(io_err(parent))?;
    let tmp = tempfile::Builder::new()
        .prefix(".save-")
        .tempdir_in(parent)
        .map_err(io_err(parent))?;
    let mut cmd = std::process::Command::new(tool.tool());
    cmd.arg("save");
    if tool == Loader::Podman {
        cmd.args(["--format", "oci-archive"]);
    }
    let mut child = cmd
        .arg(name)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| ImageError::LocalMissing {
            reference: shown.to_string(),
            tool: tool.tool().into(),
            message: e.to_string(),
        })?;
    let stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let errs = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let mut digests: BTreeMap<String, (String, u64)> = BTreeMap::new();
    let unpacked = (|| -> io::Result<()> {
        let mut ar = tar::Archive::new(io::BufReader::with_capacity(1 << 20, stdout));
        for e in ar.entries()? {
            let mut e = e?;
            if e.header().entry_type() != tar::EntryType::Regular {
                continue;
            }
            let rel = e.path()?.to_path_buf();
            if rel.is_absolute()
                || rel
                    .components()
                    .any(|c| !matches!(c, std::path::Component::Normal(_)))
            {
                return Err(io::Error::other(format!(
                    "the archive names {}",
                    rel.display()
                )));
            }
            let out = tmp.path().join(&rel);
            if let Some(d) = out.parent() {
                std::fs::create_dir_all(d)?;
            }
            let mut w = HashingWriter {
                inner: io::BufWriter::with_capacity(1 << 20, std::fs::File::create(&out)?),
                hasher: Sha256::new(),
                bytes: 0,
            };
            io::copy(&mut e, &mut w)?;
            w.inner.flush()?;
            digests.insert(
                rel.to_string_lossy().into_owned(),
                (
                    format!("sha256:{}", hex::encode(w.hasher.finalize())),
                    w.bytes,
                ),
            );
        }
        Ok(())
    })();
    let status = child.wait().map_err(io_err(Path::new(tool.tool())))?;
    let stderr = errs.join().unwrap_or_default();
    if !status.success() {
        return Err(ImageError::LocalMissing {
            reference: shown.to_string(),
            tool: tool.tool().into(),
            message: stderr.trim().lines().last().unwrap_or_default().to_string(),
        });
    }
    unpacked.map_err(|e| ImageError::Base {
        reference: shown.to_string(),
        message: format!("`{} save` gave an unreadable archive: {e}", tool.tool()),
    })?;
    let list = tmp.path().join(DIGESTS);
    std::fs::write(&list, serde_json::to_vec(&digests).expect("plain data"))
        .map_err(io_err(&list))?;
    let tmp = tmp.keep();
    if let Err(e) = std::fs::rename(&tmp, dir) {
        let _ = std::fs::remove_dir_all(&tmp);
        // Another create saved the same image meanwhile: its copy is as good.
        if !dir.join(DIGESTS).exists() {
            return Err(io_err(dir)(e));
        }
    }
    Ok(())
}

/// An image in podman's storage (`podman save --format oci-archive`) or docker's (`docker
/// save`): the same [`Base`] as a registry's, every blob checked against its digest. The saved
/// image is kept in `work_dir` by its image ID, so the next create from it reads no archive.
/// A docker archive has no manifest: one is written (OCI, its layers the archive's tars), so
/// the same image gives the same digest.
pub fn local_base(
    tool: Loader,
    name: &str,
    shown: &str,
    work_dir: &Path,
) -> Result<Base, ImageError> {
    use crate::process::{Cmd, ProcessError};
    let missing = |message: String| ImageError::LocalMissing {
        reference: shown.to_string(),
        tool: tool.tool().into(),
        message,
    };
    let id = match Cmd::new(tool.tool())
        .args(["image", "inspect", "--format", "{{.Id}}", name])
        .run()
    {
        Ok(out) => out.trim().trim_start_matches("sha256:").to_string(),
        Err(ProcessError::Spawn { source, .. }) => return Err(missing(source.to_string())),
        Err(ProcessError::Failed { stderr, .. }) => {
            return Err(missing(
                stderr.trim().lines().last().unwrap_or_default().to_string(),
            ));
        }
    };
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(missing(format!(
            "`{} image inspect` gave the ID {id:?}",
            tool.tool()
        )));
    }
    let unpacked = work_dir.join("bases").join(format!("{}-{id}", tool.tool()));
    if !unpacked.join(DIGESTS).exists() {
        save(tool, name, shown, &unpacked)?;
    }
    let digests: BTreeMap<String, (String, u64)> = {
        let p = unpacked.join(DIGESTS);
        let b = std::fs::read(&p).map_err(io_err(&p))?;
        serde_json::from_slice(&b).map_err(|e| ImageError::Base {
            reference: shown.to_string(),
            message: format!("{}: {e}", p.display()),
        })?
    };
    // A kept file whose size changed since it was hashed is no longer what was checked.
    let checked = |rel: &str| -> Result<(PathBuf, String, u64), ImageError> {
        let (d, size) = digests.get(rel).ok_or_else(|| ImageError::Base {
            reference: shown.to_string(),
            message: format!("its saved archive has no {rel}"),
        })?;
        let p = unpacked.join(rel);
        let now = std::fs::metadata(&p).map_err(io_err(&p))?.len();
        if now != *size {
            return Err(ImageError::Base {
                reference: shown.to_string(),
                message: format!(
                    "{} changed since it was saved ({now} bytes, not {size}): remove {}",
                    p.display(),
                    unpacked.display()
                ),
            });
        }
        Ok((p, d.clone(), *size))
    };
    let bad = |message: String| ImageError::Base {
        reference: shown.to_string(),
        message,
    };
    let read_json = |rel: &str| -> Result<(Vec<u8>, serde_json::Value), ImageError> {
        let (p, _, _) = checked(rel)?;
        let b = std::fs::read(&p).map_err(io_err(&p))?;
        let v = serde_json::from_slice(&b)
            .map_err(|e| bad(format!("{rel} in the saved archive is not JSON: {e}")))?;
        Ok((b, v))
    };
    let mut blobs = BTreeMap::new();
    let (digest, config, layers) = match tool {
        Loader::Podman => {
            let (_, index) = read_json("index.json")?;
            let manifests = index["manifests"].as_array().cloned().unwrap_or_default();
            let [m] = manifests.as_slice() else {
                return Err(bad(format!(
                    "its saved index lists {} manifests, not one",
                    manifests.len()
                )));
            };
            let digest = m["digest"].as_str().unwrap_or_default().to_string();
            let blob = |d: &str| -> Result<PathBuf, ImageError> {
                let hexd = d
                    .strip_prefix("sha256:")
                    .filter(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()));
                let hexd = hexd.ok_or_else(|| bad(format!("unsupported digest {d:?}")))?;
                let (p, got, _) = checked(&format!("blobs/sha256/{hexd}"))?;
                if got != d {
                    return Err(bad(format!("its blob {d} reads back as {got}")));
                }
                Ok(p)
            };
            let mp = blob(&digest)?;
            let mbytes = std::fs::read(&mp).map_err(io_err(&mp))?;
            let mut v: serde_json::Value = serde_json::from_slice(&mbytes)
                .map_err(|e| bad(format!("its manifest is not JSON: {e}")))?;
            if v["mediaType"].is_null() {
                v["mediaType"] = IMAGE_MANIFEST.into();
            }
            let m: ImageManifest = serde_json::from_value(v)
                .map_err(|e| bad(format!("its manifest is not an image manifest: {e}")))?;
            let cp = blob(&m.config.digest)?;
            let cbytes = std::fs::read(&cp).map_err(io_err(&cp))?;
            let config: serde_json::Value = serde_json::from_slice(&cbytes)
                .map_err(|e| bad(format!("its config is not JSON: {e}")))?;
            let mut layers = Vec::new();
            for l in m.layers {
                let p = blob(&l.digest)?;
                let media_type = match l.media_type.as_str() {
                    DOCKER_LAYER_GZIP => LAYER_TAR_GZIP.to_string(),
                    t if t.starts_with("application/vnd.oci.image.layer.v1.tar") => t.to_string(),
                    t => return Err(bad(format!("unsupported layer type {t} ({})", l.digest))),
                };
                blobs.insert(l.digest.clone(), p);
                layers.push(Descriptor { media_type, ..l });
            }
            (digest, config, layers)
        }
        Loader::Docker => {
            let (_, manifest) = read_json("manifest.json")?;
            let entries = manifest.as_array().cloned().unwrap_or_default();
            let [m] = entries.as_slice() else {
                return Err(bad(format!(
                    "its saved manifest.json lists {} images, not one",
                    entries.len()
                )));
            };
            let config_rel = m["Config"].as_str().unwrap_or_default().to_string();
            let (cbytes, config) = read_json(&config_rel)?;
            let config_digest = crate::oci::digest_of(&cbytes);
            let diff_ids: Vec<String> = config["rootfs"]["diff_ids"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|d| d.as_str().map(str::to_string))
                .collect();
            let rels: Vec<String> = m["Layers"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|d| d.as_str().map(str::to_string))
                .collect();
            if rels.len() != diff_ids.len() {
                return Err(bad(format!(
                    "its config lists {} layer(s), its archive {}",
                    diff_ids.len(),
                    rels.len()
                )));
            }
            let mut layers = Vec::new();
            for (rel, want) in rels.iter().zip(&diff_ids) {
                let (p, got, size) = checked(rel)?;
                // docker save writes each layer uncompressed: its digest is its diff_id.
                if &got != want {
                    return Err(bad(format!(
                        "its layer {rel} reads back as {got}, not {want}"
                    )));
                }
                blobs.insert(got.clone(), p);
                layers.push(Descriptor {
                    media_type: LAYER_TAR.into(),
                    digest: got,
                    size,
                    annotations: BTreeMap::new(),
                });
            }
            let manifest = ImageManifest {
                schema_version: 2,
                media_type: IMAGE_MANIFEST.into(),
                artifact_type: None,
                config: Descriptor {
                    media_type: OCI_CONFIG.into(),
                    digest: config_digest,
                    size: cbytes.len() as u64,
                    annotations: BTreeMap::new(),
                },
                layers: layers.clone(),
                annotations: BTreeMap::new(),
            };
            let digest = crate::oci::digest_of(&serde_json::to_vec(&manifest).expect("plain data"));
            (digest, config, layers)
        }
    };
    check_config(&config, layers.len()).map_err(bad)?;
    Ok(Base {
        name: name.to_string(),
        source: BaseSource::Local { blobs },
        digest,
        config,
        layers,
    })
}

/// What a base's config must say of its manifest's layers and its OS, wherever it was read.
fn check_config(config: &serde_json::Value, layers: usize) -> Result<(), String> {
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
fn prepend(first: &str, old: Option<&str>) -> String {
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
    // environment: ordered as the base had it, ours replaced in place or appended
    if !c["config"].is_object() {
        c["config"] = serde_json::json!({});
    }
    let env: Vec<String> = c["config"]["Env"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e.as_str().map(str::to_string))
        .collect();
    let get = |k: &str| {
        env.iter()
            .find_map(|e| e.strip_prefix(k).and_then(|r| r.strip_prefix('=')))
    };
    let ours = [
        (
            "PATH",
            prepend(
                &format!("{prefix}/bin"),
                Some(get("PATH").unwrap_or(DEFAULT_PATH)),
            ),
        ),
        ("ROCM_PATH", prefix.clone()),
        (
            "LD_LIBRARY_PATH",
            prepend(&format!("{prefix}/lib"), get("LD_LIBRARY_PATH")),
        ),
    ];
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
    c["config"]["Env"] = new_env.into();
    // labels
    let names: Vec<&str> = spec.components.iter().map(|c| c.name.as_str()).collect();
    let mut labels: BTreeMap<String, String> = c["config"]["Labels"]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
        .collect();
    let base_name = base.name.clone();
    labels.extend(
        [
            ("org.opencontainers.image.created", created.clone()),
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
            ("org.opencontainers.image.base.name", base_name.clone()),
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
            ("rocforge.prefix", prefix.clone()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v)),
    );
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
            ("org.opencontainers.image.base.name".to_string(), base_name),
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

/// Pushes the image to `target` (`REGISTRY/NAME:TAG`): base layers mounted (same registry) or
/// copied, the new layer, the config, the manifest. Returns the manifest digest.
pub fn push(
    client: reqwest::blocking::Client,
    target: &Reference,
    base: &Base,
    layer: &Layer,
    image: &Image,
    reporter: &dyn crate::progress::Reporter,
) -> Result<String, ImageError> {
    let dest = Remote::new(client, api_repo(&target.repo));
    for l in &base.layers {
        if dest.has_blob(&l.digest)? {
            continue;
        }
        if let BaseSource::Registry(from) = &base.source
            && dest.repo.registry == from.repo.registry
            && dest
                .mount_blob(&l.digest, &from.repo.repository)
                .unwrap_or(false)
        {
            continue;
        }
        let task = reporter.task(&format!("copying base layer {}", l.digest), None, false);
        let size = l.size;
        dest.push_blob_with(&l.digest, size, &|| {
            let r = base.blob(&l.digest).map_err(io::Error::other)?;
            Ok(reqwest::blocking::Body::sized(r, size))
        })?;
        task.finish(&format!("copied base layer {}", l.digest));
    }
    let task = reporter.task("pushing the layer", None, false);
    dest.push_file(
        LAYER_TAR_GZIP,
        &layer.path,
        layer.digest.trim_start_matches("sha256:"),
        layer.size,
    )?;
    task.finish(&format!("pushed the layer {}", layer.digest));
    dest.push_bytes(OCI_CONFIG, &image.config)?;
    let digest = dest.put_manifest(&target.reference, &image.manifest)?;
    Ok(digest)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Loader {
    Podman,
    Docker,
}

impl Loader {
    pub fn tool(self) -> &'static str {
        match self {
            Loader::Podman => "podman",
            Loader::Docker => "docker",
        }
    }
}

/// Adds one blob (streamed, its digest checked) to an archive.
fn append_blob<W: Write>(
    b: &mut tar::Builder<W>,
    name: &str,
    size: u64,
    digest: &str,
    r: impl Read,
) -> Result<(), ImageError> {
    let mut h = tarball::header(tar::EntryType::Regular, 0o644, size, 0);
    let mut dr = DigestReader::new(r.take(size));
    b.append_data(&mut h, name, &mut dr)
        .map_err(io_err(Path::new(name)))?;
    let (got, n) = dr.finish().map_err(io_err(Path::new(name)))?;
    if got != digest || n != size {
        return Err(ImageError::Oci(OciError::Invalid {
            reference: digest.to_string(),
            message: format!("the blob read back as {got} ({n} bytes)"),
        }));
    }
    Ok(())
}

fn append_bytes<W: Write>(
    b: &mut tar::Builder<W>,
    name: &str,
    bytes: &[u8],
) -> Result<(), ImageError> {
    let mut h = tarball::header(tar::EntryType::Regular, 0o644, bytes.len() as u64, 0);
    b.append_data(&mut h, name, bytes)
        .map_err(io_err(Path::new(name)))
}

fn append_dir<W: Write>(b: &mut tar::Builder<W>, name: &str) -> Result<(), ImageError> {
    let mut h = tarball::header(tar::EntryType::Directory, 0o755, 0, 0);
    b.append_data(&mut h, name, io::empty())
        .map_err(io_err(Path::new(name)))
}

/// Writes the image as an archive `loader` loads: an OCI image layout in a tar (oci-archive) for
/// podman, a docker-archive (manifest.json, config, layers) for docker. Base layers are
/// downloaded into it. `name` is the image name the loader gives it.
pub fn write_archive(
    path: &Path,
    loader: Loader,
    name: &str,
    base: &Base,
    layer: &Layer,
    image: &Image,
) -> Result<(), ImageError> {
    let f = std::fs::File::create(path).map_err(io_err(path))?;
    let mut b = tar::Builder::new(io::BufWriter::with_capacity(1 << 20, f));
    let hex = |d: &str| d.trim_start_matches("sha256:").to_string();
    type Out = tar::Builder<io::BufWriter<std::fs::File>>;
    let blob = |b: &mut Out, entry: String, d: &Descriptor| -> Result<(), ImageError> {
        if d.digest == layer.digest {
            let f = std::fs::File::open(&layer.path).map_err(io_err(&layer.path))?;
            append_blob(b, &entry, d.size, &d.digest, io::BufReader::new(f))
        } else {
            append_blob(b, &entry, d.size, &d.digest, base.blob(&d.digest)?)
        }
    };
    match loader {
        Loader::Podman => {
            append_bytes(&mut b, "oci-layout", br#"{"imageLayoutVersion":"1.0.0"}"#)?;
            let manifest = image.manifest_bytes();
            let index = serde_json::json!({
                "schemaVersion": 2,
                "mediaType": IMAGE_INDEX,
                "manifests": [{
                    "mediaType": IMAGE_MANIFEST,
                    "digest": image.digest(),
                    "size": manifest.len(),
                    "annotations": {REF_NAME: name},
                }],
            });
            append_bytes(
                &mut b,
                "index.json",
                &serde_json::to_vec(&index).expect("plain data"),
            )?;
            append_dir(&mut b, "blobs/")?;
            append_dir(&mut b, "blobs/sha256/")?;
            let mut blobs: BTreeMap<String, Option<&Descriptor>> = BTreeMap::new();
            blobs.insert(image.digest(), None);
            blobs.insert(image.manifest.config.digest.clone(), None);
            for l in &image.manifest.layers {
                blobs.insert(l.digest.clone(), Some(l));
            }
            for (d, desc) in blobs {
                let entry = format!("blobs/sha256/{}", hex(&d));
                match desc {
                    Some(desc) => blob(&mut b, entry, desc)?,
                    None if d == image.digest() => append_bytes(&mut b, &entry, &manifest)?,
                    None => append_bytes(&mut b, &entry, &image.config)?,
                }
            }
        }
        Loader::Docker => {
            let config_name = format!("{}.json", hex(&image.manifest.config.digest));
            let mut layer_names = Vec::new();
            for l in &image.manifest.layers {
                layer_names.push(format!("{}.tar.gz", hex(&l.digest)));
            }
            let manifest = serde_json::json!([{
                "Config": config_name,
                "RepoTags": [name],
                "Layers": layer_names,
            }]);
            append_bytes(
                &mut b,
                "manifest.json",
                &serde_json::to_vec(&manifest).expect("plain data"),
            )?;
            append_bytes(&mut b, &config_name, &image.config)?;
            let mut seen = std::collections::BTreeSet::new();
            for (l, n) in image.manifest.layers.iter().zip(&layer_names) {
                if seen.insert(n.clone()) {
                    blob(&mut b, n.clone(), l)?;
                }
            }
        }
    }
    let w = b.into_inner().map_err(io_err(path))?;
    w.into_inner()
        .map_err(|e| io_err(path)(e.into_error()))?
        .sync_all()
        .map_err(io_err(path))?;
    Ok(())
}

/// `podman load -i FILE` / `docker load -i FILE`; returns what it printed.
pub fn load(loader: Loader, archive: &Path) -> Result<String, ImageError> {
    use crate::process::{Cmd, ProcessError};
    let tool = loader.tool();
    let message = match Cmd::new(tool).arg("load").arg("-i").arg(archive).run() {
        Ok(stdout) => return Ok(stdout.trim().to_string()),
        Err(ProcessError::Spawn { source, .. }) => source.to_string(),
        Err(ProcessError::Failed { stdout, stderr, .. }) => {
            format!("{}\n{}", stderr.trim(), stdout.trim())
        }
    };
    Err(ImageError::Load {
        tool: tool.into(),
        message,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apt_pins_the_mirror_dropped() {
        let log = "Reading package lists...\nE: Version '7.0.2+dfsg-3' for 'hipcc' was not found\nE: Version '1.0' for 'zstd' was not found\nE: Version '1.0' for 'zstd' was not found\n";
        assert_eq!(
            apt_versions_gone(log),
            [
                ("hipcc".to_string(), "7.0.2+dfsg-3".to_string()),
                ("zstd".to_string(), "1.0".to_string())
            ]
        );
        assert!(apt_versions_gone("E: Unable to locate package x\n").is_empty());
    }

    #[test]
    fn references_and_paths() {
        assert_eq!(
            api_repo(&Reference::parse("docker.io/ubuntu:24.04").unwrap().repo).repository,
            "library/ubuntu"
        );
        let r = Reference::parse("127.0.0.1:5000/base:1").unwrap();
        assert_eq!(r.repo.repository, "base");
        assert_eq!(r.reference, "1");
        assert_eq!(r.full(), "127.0.0.1:5000/base:1");
        let d = format!("sha256:{}", "a".repeat(64));
        let r = Reference::parse(&format!("ghcr.io/x/y@{d}")).unwrap();
        assert_eq!(r.repo.repository, "x/y");
        assert_eq!(r.reference, d);
        assert_eq!(r.full(), format!("ghcr.io/x/y@{d}"));
        assert!(Reference::parse("base:1").is_err());
        assert_eq!(
            prepend("/opt/rocm/bin", Some("/usr/bin:/bin")),
            "/opt/rocm/bin:/usr/bin:/bin"
        );
        assert_eq!(prepend("/opt/rocm/lib", None), "/opt/rocm/lib");
        assert_eq!(prepend("/a", Some("/a:/b")), "/a:/b");
    }
}
