//! `rocforge image create`: an OCI image made of a base image (pulled from a registry) plus one
//! layer holding the installed stack under the release prefix, with the environment set
//! (ROCM_PATH, PATH, LD_LIBRARY_PATH), and the stack's wheels unpacked on PYTHONPATH.
//!
//! Reproducible: the layer is a deterministic tar (sorted entries, 0:0, one mtime, modes
//! 0755/0644, written by [`crate::package::tarball::append_files`]) gzip-compressed with a zero
//! header time; the config and manifest are serialized from the base's config and fixed values
//! only (`created` is SOURCE_DATE_EPOCH, else the newest the store entries record, else 0). The
//! same store entries on the same base give the same manifest digest.
//!
//! The image is pushed to a registry ([`push`]) or written as an archive ([`write_archive`]:
//! oci-archive for `podman load`, docker-archive for `docker load`).

use std::io;
use std::path::{Path, PathBuf};

use crate::oci::OciError;
use crate::package::PackageError;

mod archive;
mod base;
mod compose;
mod layer;
mod local;
mod push;
mod wheels;

pub use archive::{Loader, load, write_archive};
pub use base::{
    Base, BaseRef, BaseSource, HIP_LABEL, HIP_SONAME, Reference, api_repo, host_arch, pull_base,
    read_base,
};
pub use compose::{Image, Spec, compose};
pub use layer::{Component, Layer, write_layer};
pub use local::local_base;
pub use push::push;
pub use wheels::{SITE_PACKAGES, python_of};

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
    #[error("wheel {wheel}: {message}")]
    Wheel { wheel: String, message: String },
    #[error(
        "base image {reference} has no Python {python}, which the wheel {wheel} of the stack needs"
    )]
    NoPython {
        reference: String,
        python: String,
        wheel: String,
    },
    #[error("{tag} already exists in its registry as {existing}, not this image ({ours})")]
    TagTaken {
        tag: String,
        existing: String,
        ours: String,
    },
}

impl crate::diag::Hint for ImageError {
    fn hint(&self) -> String {
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
            ImageError::Wheel { .. } => "rebuild the component that made the wheel (`rocforge build COMPONENT --rebuild`); its store entry holds it under share/rocforge/wheels".into(),
            ImageError::NoPython { python, .. } => format!(
                "use a base with Python {python}: `--kind python` (the line's runtime base with CPython 3.13 and PyTorch's CPU libraries), or --base REF; or leave the wheel's component out of the image"
            ),
            ImageError::TagTaken { .. } => {
                "pick another --tag, or pass --force to move the tag to this image".into()
            }
        }
    }
}

fn io_err(path: &Path) -> impl Fn(io::Error) -> ImageError + '_ {
    move |source| ImageError::Io {
        path: path.to_path_buf(),
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::compose::prepend;
    use super::*;

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
