//! What `list --installed` and `uninstall` print as JSON: a prefix's receipts, read back.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::receipt::{self, Receipt, Removed};
use crate::arch::TargetId;
use crate::ids::{ComponentName, ContentKey};

pub const INSTALLED_SCHEMA: &str = "rocforge.installed/1";
pub const UNINSTALL_SCHEMA: &str = "rocforge.uninstall/1";

/// One installed component and whether its files are all there.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct InstalledComponent {
    pub name: ComponentName,
    pub version: String,
    pub targets: Vec<TargetId>,
    pub key: ContentKey,
    /// Files its receipt lists.
    pub files: usize,
    /// Of those, how many are gone from the prefix.
    pub missing: usize,
    /// `installed`, or `damaged` when files are missing.
    pub state: &'static str,
    /// When it was installed (RFC 3339).
    pub installed: String,
    /// The key that signed the index it came from; null when installed unsigned.
    pub signed_by: Option<String>,
    /// Run-time capabilities it needs and provides (`hip-runtime`).
    pub needs: Vec<crate::package::manifest::Capability>,
    pub provides: Vec<crate::package::manifest::Capability>,
}

impl InstalledComponent {
    /// `missing`: how many of the receipt's files are gone ([`receipt::missing_files`]).
    pub fn new(r: &Receipt, missing: usize) -> InstalledComponent {
        InstalledComponent {
            name: r.name.clone(),
            version: r.version.clone(),
            targets: r.targets.clone(),
            key: r.key.clone(),
            files: r.files.len(),
            missing,
            state: if missing == 0 { "installed" } else { "damaged" },
            installed: r.installed.clone(),
            signed_by: r.signed_by.clone(),
            needs: r.facts.needs.clone(),
            provides: r.facts.provides.clone(),
        }
    }
}

/// `list --installed --format json`.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct InstalledList {
    pub schema: &'static str,
    pub prefix: PathBuf,
    pub components: Vec<InstalledComponent>,
}

impl InstalledList {
    pub fn new(prefix: &Path, receipts: &[Receipt]) -> InstalledList {
        InstalledList {
            schema: INSTALLED_SCHEMA,
            prefix: prefix.to_path_buf(),
            components: receipts
                .iter()
                .map(|r| InstalledComponent::new(r, receipt::missing_files(prefix, r)))
                .collect(),
        }
    }
}

/// `uninstall --format json`.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Uninstalled {
    pub schema: &'static str,
    pub prefix: PathBuf,
    /// The components removed, as named.
    pub removed: Vec<String>,
    /// Files and directories removed.
    pub files: usize,
    pub directories: usize,
    /// Receipt entries that were gone already.
    pub already_gone: usize,
}

impl Uninstalled {
    pub fn new(prefix: &Path, names: &[String], removed: &Removed) -> Uninstalled {
        Uninstalled {
            schema: UNINSTALL_SCHEMA,
            prefix: prefix.to_path_buf(),
            removed: names.to_vec(),
            files: removed.files,
            directories: removed.dirs,
            already_gone: removed.missing,
        }
    }
}
