//! What `install --format json` prints: what was installed, and the environment that uses it.

use std::path::PathBuf;

use serde::Serialize;

use super::{NotNative, Outcome};
use crate::arch::TargetId;
use crate::ids::{ComponentName, ContentKey};
use crate::install::receipt::Declined;

pub const INSTALL_SCHEMA: &str = "rocforge.install/1";

/// One component this install put in the prefix (or repaired there).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct InstalledArtifact {
    pub name: ComponentName,
    pub version: String,
    pub targets: Vec<TargetId>,
    pub key: ContentKey,
    /// Files its receipt lists.
    pub files: usize,
    /// For a repair: how many files were missing; null for a fresh install.
    pub repaired_missing: Option<usize>,
    /// Its build's coverage record lists libraries with GPU code.
    pub device_code: bool,
    /// Set when its build declared that it declines its targets.
    pub declined: Option<Declined>,
}

/// The variables that put the prefix to use.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Environment {
    #[serde(rename = "ROCM_PATH")]
    pub rocm_path: String,
    #[serde(rename = "PATH")]
    pub path: String,
    #[serde(rename = "LD_LIBRARY_PATH")]
    pub ld_library_path: String,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Report {
    pub schema: &'static str,
    pub prefix: PathBuf,
    pub installed: Vec<InstalledArtifact>,
    /// Components asked for that were installed already, whole.
    pub already: Vec<ComponentName>,
    /// The key that signed the index; null when it was unsigned or not verified.
    pub signed_by: Option<String>,
    /// Installed libraries without native code for one of their targets.
    pub not_native: Vec<NotNative>,
    /// The prefix's directories, to prepend to each variable (PATH and LD_LIBRARY_PATH keep
    /// what they held).
    pub environment: Environment,
}

impl Outcome {
    pub fn report(&self) -> Report {
        let report = &self.report;
        let p = self.prefix.display();
        Report {
            schema: INSTALL_SCHEMA,
            prefix: self.prefix.clone(),
            installed: report
                .installed
                .iter()
                .map(|r| InstalledArtifact {
                    name: r.name.clone(),
                    version: r.version.clone(),
                    targets: r.targets.clone(),
                    key: r.key.clone(),
                    files: r.files.len(),
                    repaired_missing: report
                        .repaired
                        .iter()
                        .find(|(n, _)| *n == r.name.as_str())
                        .map(|(_, missing)| *missing),
                    device_code: report
                        .with_device_code
                        .iter()
                        .any(|n| *n == r.name.as_str()),
                    declined: r.declined.clone(),
                })
                .collect(),
            already: report.already.clone(),
            signed_by: report.signer.clone(),
            not_native: self.not_native.clone(),
            environment: Environment {
                rocm_path: format!("{p}"),
                path: format!("{p}/bin"),
                ld_library_path: format!("{p}/lib"),
            },
        }
    }
}
