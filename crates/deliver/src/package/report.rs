//! What `package --format json` prints: each tarball made and the release files beside them.

use std::path::PathBuf;

use serde::Serialize;

use super::Packaged;
use crate::ids::ComponentName;

pub const PACKAGE_SCHEMA: &str = "rocforge.package/1";

/// One tarball.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct PackagedArtifact {
    pub component: ComponentName,
    /// The tarball's path.
    pub file: PathBuf,
    /// In bytes, compressed.
    pub size: u64,
    pub sha256: String,
    /// Entries its manifest lists.
    pub files: usize,
    /// In bytes, once installed.
    pub installed_size: u64,
    /// The highest GLIBC_x.y symbol version its ELF files need; null when none does.
    pub glibc_floor: Option<String>,
    /// License files it carries.
    pub licenses: Vec<String>,
    /// Run-time capabilities its ELF files need from outside it (e.g. the HIP runtime).
    pub needs: Vec<crate::package::manifest::Capability>,
    /// Capabilities it provides.
    pub provides: Vec<crate::package::manifest::Capability>,
    /// Its minisign signature; null when unsigned.
    pub signature: Option<PathBuf>,
}

impl From<&Packaged> for PackagedArtifact {
    fn from(p: &Packaged) -> PackagedArtifact {
        PackagedArtifact {
            component: p.component.clone(),
            file: p.tarball.path.clone(),
            size: p.tarball.size,
            sha256: p.tarball.sha256.clone(),
            files: p.manifest_files,
            installed_size: p.installed_size,
            glibc_floor: p.glibc_floor.clone(),
            licenses: p.licenses.clone(),
            needs: p.needs.clone(),
            provides: p.provides.clone(),
            signature: p.signature.clone(),
        }
    }
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Report {
    pub schema: &'static str,
    pub artifacts: Vec<PackagedArtifact>,
    /// The index, checksums and signatures written beside the tarballs.
    pub release_files: Vec<PathBuf>,
    /// When the index stops being accepted (RFC 3339).
    pub expires: String,
}

impl Report {
    pub fn new(packaged: &[Packaged], release_files: Vec<PathBuf>, expires: String) -> Report {
        Report {
            schema: PACKAGE_SCHEMA,
            artifacts: packaged.iter().map(PackagedArtifact::from).collect(),
            release_files,
            expires,
        }
    }
}
