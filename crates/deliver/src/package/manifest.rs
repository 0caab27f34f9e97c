//! The manifest inside every tarball: what it is, how it was built, and every file with its
//! size and sha256. It is the tarball's first entry, so an installer knows each file's size and
//! digest before the file's bytes arrive.

use serde::{Deserialize, Serialize};

use crate::ids::{ArtifactId, ComponentName, ContentKey};

/// The manifest's name inside the tarball (never extracted into a prefix).
pub const MANIFEST_NAME: &str = "rocforge-manifest.json";
pub const MANIFEST_SCHEMA: &str = "rocforge.manifest/1";
/// The largest manifest an installer reads.
pub const MAX_MANIFEST_BYTES: u64 = 64 << 20;

/// `rocforge-manifest.json`, the first entry of every tarball: what the tarball is, how it was
/// built, and every file with its size and digest (docs/artifacts.md).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Manifest {
    pub schema: String,
    /// What it is: name, version, release, targets and the store entry's content key.
    #[serde(flatten)]
    pub id: ArtifactId,
    /// `tests` for a component's test client built as its own artifact (`<name>-tests`);
    /// absent for everything else (a library, a tool, data).
    #[serde(default, skip_serializing_if = "ArtifactKind::is_default")]
    pub kind: ArtifactKind,
    /// For kind `tests`: the library build it tests, by name and content key (installs refuse
    /// it beside another build of that library).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tests: Option<Dependency>,
    /// Components this one needs at run time, by name and content key.
    #[serde(default)]
    pub depends: Vec<Dependency>,
    /// Components it was built with that it does not need at run time (the recipe's
    /// `build-depends`, e.g. Tensile for rocBLAS), by name and content key: provenance only,
    /// installs never fetch them. Absent when there are none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub build_depends: Vec<Dependency>,
    /// SPDX expression from the recipe.
    #[serde(default)]
    pub license: Option<String>,
    /// The license files the tree carries (`share/doc/<name>/…`), relative paths.
    #[serde(default)]
    pub licenses: Vec<String>,
    /// What it needs from and gives to the system it is installed on.
    #[serde(flatten)]
    pub facts: RuntimeFacts,
    /// The builder image, by reference and digest (None for host builds).
    #[serde(default)]
    pub image: Option<crate::plan::key::ImageRef>,
    #[serde(default)]
    pub runtime: crate::runtime::RuntimeName,
    #[serde(default)]
    pub reproducible: bool,
    /// The highest GLIBC_x.y symbol version any ELF file needs; the host's glibc must be at
    /// least this.
    #[serde(default)]
    pub glibc_floor: Option<String>,
    /// The code-object coverage gate's result, from the store entry.
    #[serde(default)]
    pub coverage: Option<crate::inspect::CoverageRecord>,
    /// Every tar entry's mtime.
    #[serde(default)]
    pub source_date_epoch: u64,
    /// Sum of the regular files' sizes.
    pub installed_size: u64,
    /// The content key's hash input (why this key).
    #[serde(default)]
    pub hash_input: serde_json::Value,
    /// Every entry of the tree, sorted by path.
    pub files: Vec<FileEntry>,
}

crate::carries_artifact_id!(Manifest);

#[derive(
    Debug, Clone, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord, schemars::JsonSchema,
)]
pub struct Dependency {
    pub name: ComponentName,
    pub key: ContentKey,
}

/// What an artifact is, as far as installs and test runs care.
#[derive(
    Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum ArtifactKind {
    /// A component's install tree (libraries, headers, tools, data).
    #[default]
    Component,
    /// A component's test client (`<name>-tests`), run against the library artifact's files.
    Tests,
}

impl ArtifactKind {
    pub fn is_default(&self) -> bool {
        *self == ArtifactKind::Component
    }
}

/// The library a `<name>-tests` artifact tests: `<name>` among its dependencies.
pub fn tested_library(component: &str, depends: &[Dependency]) -> Option<Dependency> {
    let library = component.strip_suffix(crate::recipe::Recipe::TESTS_SUFFIX)?;
    depends.iter().find(|d| d.name.as_str() == library).cloned()
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    File,
    Dir,
    Symlink,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
pub struct FileEntry {
    /// Relative, `/`-separated, no `.` or `..` components.
    pub path: String,
    pub kind: Kind,
    /// Regular files: size in bytes.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub size: u64,
    /// Regular files: lowercase hex sha256.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// Regular files: whether any execute bit is set (mode 0755, else 0644).
    #[serde(default, skip_serializing_if = "is_false")]
    pub executable: bool,
    /// Symlinks: the target, relative and inside the tree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
}

impl FileEntry {
    /// A directory at `path`.
    pub fn dir(path: &str) -> Self {
        FileEntry {
            path: path.to_string(),
            kind: Kind::Dir,
            size: 0,
            sha256: None,
            executable: false,
            target: None,
        }
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// `path` as a normalized relative path (`a/b/c`), or None when it is absolute, empty, or
/// climbs with `..`. `.` components and repeated slashes are dropped.
pub fn normalize(path: &str) -> Option<String> {
    if path.starts_with('/') || path.contains('\0') || path.contains('\\') {
        return None;
    }
    let mut parts = Vec::new();
    for c in path.split('/') {
        match c {
            "" | "." => {}
            ".." => return None,
            c => parts.push(c),
        }
    }
    if parts.is_empty() {
        return None;
    }
    Some(parts.join("/"))
}

/// Whether a symlink at `link` (normalized) pointing to `target` stays inside the tree.
///
/// `..` may only lead the target (`../../lib/x`), never follow a name (`up/../..`): resolving a
/// name can cross another symlink, after which `..` climbs from wherever that link points, not
/// from the name's lexical parent. With leading `..` only, the climb starts from the link's own
/// directory, which extraction and the merge keep a real directory, so the lexical count is
/// the real one; the names after it are inside the tree and so, link by link, is what they
/// resolve to.
pub fn symlink_inside(link: &str, target: &str) -> bool {
    symlink_refusal(link, target).is_none()
}

/// Why [`symlink_inside`] refuses `target` for a link at `link`, as a rule for messages.
pub fn symlink_refusal(link: &str, target: &str) -> Option<&'static str> {
    if target.is_empty() || target.contains('\0') {
        return Some("its target is empty or holds a NUL");
    }
    if target.starts_with('/') {
        return Some("its target is absolute");
    }
    let mut depth = link.split('/').count() - 1;
    let mut named = false;
    for c in target.split('/') {
        match c {
            "" | "." => {}
            ".." if named => {
                return Some(
                    "its target climbs with .. after a name (through a link, that climbs from elsewhere)",
                );
            }
            ".." => match depth.checked_sub(1) {
                Some(d) => depth = d,
                None => return Some("its target climbs out of the prefix"),
            },
            c if is_reserved(c) => {
                return Some("its target names .rocforge…, which rocforge keeps for itself");
            }
            _ => named = true,
        }
    }
    None
}

/// A version or target as an index or manifest may give it: what is printed and recorded, so
/// no spaces, control characters or escapes, and short.
pub fn is_plain_word(s: &str) -> bool {
    !s.is_empty() && s.len() <= 128 && s.bytes().all(|b| b.is_ascii_graphic())
}

/// Names rocforge keeps for itself in a prefix (`.rocforge/` with the receipts, the merge
/// journal `.rocforge-merge.json`): no artifact may ship or point at one, at any depth.
pub fn is_reserved(component: &str) -> bool {
    component.starts_with(".rocforge")
}

/// Whether any component of the normalized `path` is reserved ([`is_reserved`]).
pub fn has_reserved(path: &str) -> bool {
    path.split('/').any(is_reserved)
}

/// The HIP runtime (libamdhip64 and the ROCr runtime libhsa-runtime64 it loads), as manifests,
/// indexes and receipts spell it.
pub const HIP_RUNTIME: &str = "hip-runtime";

rocforge_core::open_enum! {
    /// A run-time capability an artifact needs from the system or another artifact, or provides.
    pub enum Capability {
        /// [`HIP_RUNTIME`]: ROCm's HIP runtime.
        HipRuntime = "hip-runtime",
    }
    description = "A run-time capability: `hip-runtime` (ROCm's HIP runtime); other names come from later versions and are kept as written.";
}

/// Whether a DT_NEEDED entry belongs to the HIP runtime.
pub fn is_hip_runtime_lib(soname: &str) -> bool {
    soname.starts_with("libamdhip64.so") || soname.starts_with("libhsa-runtime64.so")
}

/// What an artifact needs from, and gives to, the system it is installed on: read from its ELF
/// files when it is packaged, then carried as they are by its manifest, its index entry and its
/// install receipt (each flattens it, so the fields sit where they always did).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct RuntimeFacts {
    /// Run-time capabilities the artifact's ELF files need from outside it, e.g.
    /// [`HIP_RUNTIME`] when a library's DT_NEEDED names libamdhip64 or libhsa-runtime64.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub needs: Vec<Capability>,
    /// Capabilities the artifact provides, e.g. [`HIP_RUNTIME`] when it holds libamdhip64.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub provides: Vec<Capability>,
    /// The exact runtime libraries behind `needs` (DT_NEEDED names such as libamdhip64.so.6):
    /// a ROCm 7 system's libamdhip64.so.7 does not serve a tree built against ROCm 6.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runtime_libs: Vec<String>,
}

impl RuntimeFacts {
    /// From a tree's ELF files' DT_SONAME and DT_NEEDED entries.
    pub fn of(sonames: &[String], needed: &[String]) -> Self {
        let (needs, provides) = runtime_capabilities(sonames, needed);
        RuntimeFacts {
            needs,
            provides,
            runtime_libs: runtime_libs(sonames, needed),
        }
    }

    /// Whether it provides HIP's runtime.
    pub fn provides_hip(&self) -> bool {
        self.provides.contains(&Capability::HipRuntime)
    }

    /// Whether it needs HIP's runtime from outside.
    pub fn needs_hip(&self) -> bool {
        self.needs.contains(&Capability::HipRuntime)
    }
}

/// What a tree needs and provides at run time, from its ELF files' DT_SONAME and DT_NEEDED
/// entries: it provides [`HIP_RUNTIME`] when a library's SONAME is libamdhip64.so.N, and needs
/// it when an ELF file needs libamdhip64 or libhsa-runtime64 and it does not provide it.
pub fn runtime_capabilities(
    sonames: &[String],
    needed: &[String],
) -> (Vec<Capability>, Vec<Capability>) {
    let provides = sonames.iter().any(|s| s.starts_with("libamdhip64.so"));
    let needs = !provides && needed.iter().any(|n| is_hip_runtime_lib(n));
    let cap = |b: bool| {
        if b {
            vec![Capability::HipRuntime]
        } else {
            Vec::new()
        }
    };
    (cap(needs), cap(provides))
}

/// The HIP runtime libraries a tree needs by exact name (sorted), empty when it needs none or
/// provides the runtime itself.
pub fn runtime_libs(sonames: &[String], needed: &[String]) -> Vec<String> {
    if sonames.iter().any(|s| s.starts_with("libamdhip64.so")) {
        return Vec::new();
    }
    let mut libs: Vec<String> = needed
        .iter()
        .filter(|n| is_hip_runtime_lib(n))
        .cloned()
        .collect();
    libs.sort();
    libs.dedup();
    libs
}

/// Dotted numeric version comparison ("2.34" < "2.38", "2.9" < "2.10").
pub fn version_tuple(v: &str) -> Vec<u64> {
    v.split(['.', '-', '_'])
        .map(|p| p.parse::<u64>().unwrap_or(0))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths() {
        assert_eq!(normalize("./a//b/").as_deref(), Some("a/b"));
        assert_eq!(normalize("/etc/passwd"), None);
        assert_eq!(normalize("a/../../b"), None);
        assert_eq!(normalize("."), None);
        assert!(symlink_inside("lib/libx.so", "libx.so.1"));
        assert!(symlink_inside("lib/a/x", "../../bin/y"));
        assert!(!symlink_inside("lib/x", "../../etc"));
        assert!(!symlink_inside("lib/x", "/etc"));
        // `..` after a name climbs from wherever that name's link points: refused.
        assert!(!symlink_inside("d/esc", "up/../../../outside"));
        assert!(!symlink_inside("d/x", "sub/../y"));
        assert!(symlink_inside("d/root", ".."));
        assert!(!symlink_inside("d/r", "../.rocforge/receipts"));
        assert!(version_tuple("2.9") < version_tuple("2.10"));
    }

    #[test]
    fn hip_runtime_capabilities() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(
            runtime_capabilities(
                &s(&["librocsparse.so.1"]),
                &s(&["libamdhip64.so.6", "libc.so.6"])
            ),
            (vec![Capability::HipRuntime], vec![])
        );
        assert_eq!(
            runtime_capabilities(
                &s(&["libamdhip64.so.6", "libhsa-runtime64.so.1"]),
                &s(&["libhsa-runtime64.so.1"])
            ),
            (vec![], vec![Capability::HipRuntime])
        );
        assert_eq!(
            runtime_capabilities(&s(&[]), &s(&["libc.so.6"])),
            (vec![], vec![])
        );
    }

    /// A capability reads and writes as its name; one this rocforge does not know is kept.
    #[test]
    fn capabilities_keep_their_names() {
        let read = |j: &str| serde_json::from_str::<Vec<Capability>>(j).unwrap();
        let caps = read(r#"["hip-runtime", "vulkan-runtime"]"#);
        assert_eq!(
            caps,
            [
                Capability::HipRuntime,
                Capability::Other("vulkan-runtime".into())
            ]
        );
        assert_eq!(
            serde_json::to_string(&caps).unwrap(),
            r#"["hip-runtime","vulkan-runtime"]"#
        );
    }
}
