//! `[build]`: how a component is built (cmake, a script, a copy) and what reaches the build.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;

use crate::arch::{ArchTable, check_target_in_file};
use crate::diag::reader::{self, Sp, TableReader};
use crate::diag::{Diagnostic, Diagnostics, SourceFile, did_you_mean};

use super::checks::{is_inner_path, is_var_name, path_problem};

#[derive(Debug, Clone, Serialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case", tag = "system")]
pub enum BuildSystem {
    Cmake {
        /// Shell commands run before configuring, with the dependencies and the build directory
        /// in place (e.g. a writable copy of a dependency the project builds in its own tree).
        /// Absent from the hash input when unset, so recipes without it keep their keys.
        #[serde(skip_serializing_if = "Option::is_none")]
        pre_configure: Option<String>,
        /// Shell commands run after `cmake --install` (e.g. copying build-tree test data the
        /// project does not install). Absent from the hash input when unset, so recipes without
        /// it keep their keys.
        #[serde(skip_serializing_if = "Option::is_none")]
        post_install: Option<String>,
    },
    /// Shell commands run in the builder image with the source as working directory.
    Script { script: String },
    /// The patched source tree copied into the prefix (e.g. Tensile, which rocBLAS consumes).
    Copy { dest: String },
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct Build {
    #[serde(flatten)]
    pub system: BuildSystem,
    /// CMake cache variables (cmake) or environment variables (script) that receive the
    /// `;`-joined target IDs.
    pub arch_vars: Vec<String>,
    pub args: Vec<String>,
    pub arch_args: BTreeMap<String, Vec<String>>,
    pub env: BTreeMap<String, String>,
    /// False for a component with no device code (a host-side wrapper, headers, a Python
    /// package): no GPU variable, no coverage gate, and a content key the target set does not
    /// change, so one build serves every target set.
    pub device_code: bool,
    /// A flavour of the line's builder image this component builds in (`[build] image`): the
    /// line's image plus what `containers/Containerfile.builder-<flavour>-<line>` adds, so what
    /// one component needs (PyTorch's Python) changes no other component's key.
    #[serde(skip)]
    pub image: Option<Flavour>,
}

/// `[build] image`: a flavour name and the file that set it (a line's override or the recipe).
#[derive(Debug, Clone)]
pub struct Flavour {
    pub name: Sp<String>,
    pub file: Arc<SourceFile>,
}

impl Flavour {
    pub fn as_str(&self) -> &str {
        &self.name.value
    }
}

/// The keys of a `[build]` table as written, before they are checked against each other.
struct Keys {
    system: Option<Sp<String>>,
    arch_vars: Option<Vec<Sp<String>>>,
    device_code: Option<Sp<bool>>,
    args: Vec<Sp<String>>,
    script: Option<Sp<String>>,
    dest: Option<Sp<String>>,
    pre_configure: Option<Sp<String>>,
    post_install: Option<Sp<String>>,
    env: BTreeMap<String, Sp<String>>,
    arch_args: BTreeMap<String, Vec<String>>,
    image: Option<Flavour>,
}

impl Keys {
    fn read(t: &mut TableReader<'_, '_>, arches: &ArchTable, d: &mut Diagnostics) -> Self {
        Self {
            system: t.str("system", d, "system = \"cmake\", \"script\" or \"copy\""),
            arch_vars: t.opt_str_list("arch-vars", d),
            device_code: t.opt_bool("device-code", d),
            args: t.opt_str_list("args", d).unwrap_or_default(),
            script: t.opt_str("script", d),
            dest: t.opt_str("dest", d),
            pre_configure: t.opt_str("pre-configure", d),
            post_install: t.opt_str("post-install", d),
            env: t.opt_str_map("env", d).unwrap_or_default(),
            arch_args: read_arch_args(t, arches, d),
            image: read_flavour(t, d),
        }
    }
}

pub(super) fn read_build(
    mut t: TableReader<'_, '_>,
    arches: &ArchTable,
    d: &mut Diagnostics,
) -> Option<Build> {
    let file = t.file().clone();
    let before = d.len();
    let mut keys = Keys::read(&mut t, arches, d);
    let meant = t.finish(d);

    check_var_names(&file, &keys, d);
    let system = keys.system.take()?;
    check_cmake_only(&file, &system, &keys, d);
    let host_only = keys.device_code.as_ref().is_some_and(|b| !b.value);
    if host_only {
        check_host_only(&file, &keys, d);
    }
    let kind = build_system(&file, &system, &mut keys, host_only, &meant, d)?;
    if d.len() > before {
        return None;
    }
    Some(Build {
        system: kind,
        arch_vars: keys
            .arch_vars
            .unwrap_or_default()
            .into_iter()
            .map(|s| s.value)
            .collect(),
        args: keys.args.into_iter().map(|s| s.value).collect(),
        arch_args: keys.arch_args,
        env: keys.env.into_iter().map(|(k, v)| (k, v.value)).collect(),
        device_code: !host_only,
        image: keys.image,
    })
}

/// `image = "<flavour>"`: a name that becomes part of an image tag and a file name.
pub(super) fn read_flavour(t: &mut TableReader<'_, '_>, d: &mut Diagnostics) -> Option<Flavour> {
    let file = t.file().clone();
    let v = t.opt_str("image", d)?;
    let ok = !v.is_empty()
        && v.len() <= 32
        && v.starts_with(|c: char| c.is_ascii_lowercase())
        && v.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if !ok {
        d.push(
            Diagnostic::new(format!("\"{}\" is not an image flavour name", v.value))
                .at(&file, v.span.clone(), "expected a short lowercase name")
                .hint("name a flavour of the line's builder image, e.g. image = \"python\": lowercase letters, digits and -, at most 32"),
        );
        return None;
    }
    Some(Flavour { name: v, file })
}

/// `[build.arch-args]`: extra arguments per processor.
fn read_arch_args(
    t: &mut TableReader<'_, '_>,
    arches: &ArchTable,
    d: &mut Diagnostics,
) -> BTreeMap<String, Vec<String>> {
    let file = t.file();
    let mut arch_args = BTreeMap::new();
    let Some(mut aa) = t.opt_table("arch-args", d) else {
        return arch_args;
    };
    for (k, v) in aa.rest() {
        let key = Sp::new(k.get_ref().to_string(), k.span());
        let Some(target) = check_target_in_file(arches, file, &key, "[build.arch-args]", d) else {
            continue;
        };
        if target.xnack.is_some() || target.sramecc.is_some() {
            d.push(
                Diagnostic::new(format!(
                    "[build.arch-args] is keyed by processor, not target ID: \"{}\"",
                    key.value
                ))
                .at(file, key.span.clone(), "features are not allowed here")
                .hint(format!("write [build.arch-args] {} = [...]", target.arch)),
            );
            continue;
        }
        if let Some(list) =
            reader::read_str_list(file, &format!("build.arch-args.{}", key.value), v, d)
        {
            arch_args.insert(key.value, list.into_iter().map(|s| s.value).collect());
        }
    }
    arch_args
}

/// The names in arch-vars and env become variables of the build: letters, digits and `_`.
fn check_var_names(file: &Arc<SourceFile>, keys: &Keys, d: &mut Diagnostics) {
    for v in keys.arch_vars.iter().flatten() {
        if !is_var_name(v) {
            d.push(
                Diagnostic::new(format!("\"{}\" is not a variable name", v.value))
                    .at(file, v.span.clone(), "expected letters, digits and _")
                    .hint("arch-vars names the variables that receive the targets, e.g. [\"GPU_TARGETS\"]"),
            );
        }
    }
    for (k, v) in &keys.env {
        if !is_var_name(k) {
            d.push(
                Diagnostic::new(format!("\"{k}\" is not an environment variable name"))
                    .at(file, v.span.clone(), "value of an invalid name")
                    .hint("environment variable names use letters, digits and _"),
            );
        }
    }
}

/// pre-configure and post-install hook into CMake's steps, which other systems lack.
fn check_cmake_only(file: &Arc<SourceFile>, system: &Sp<String>, keys: &Keys, d: &mut Diagnostics) {
    if let Some(p) = &keys.pre_configure
        && system.as_str() != "cmake"
    {
        d.push(
            Diagnostic::new(format!(
                "pre-configure is for cmake builds, not \"{}\"",
                system.value
            ))
            .at(file, p.span.clone(), "runs before CMake configures only")
            .hint(
                "a script build does the same at the start of its script; a copy build runs nothing",
            ),
        );
    }
    if let Some(p) = &keys.post_install
        && system.as_str() != "cmake"
    {
        d.push(
            Diagnostic::new(format!(
                "post-install is for cmake builds, not \"{}\"",
                system.value
            ))
            .at(file, p.span.clone(), "runs after `cmake --install` only")
            .hint(
                "a script build does the same at the end of its script; a copy build runs nothing",
            ),
        );
    }
}

/// `device-code = false`: the targets never reach the build, so nothing may be set per target.
fn check_host_only(file: &Arc<SourceFile>, keys: &Keys, d: &mut Diagnostics) {
    if let Some(v) = keys.arch_vars.as_ref().and_then(|v| v.first()) {
        d.push(
            Diagnostic::new("a component with device-code = false names a GPU variable")
                .at(file, v.span.clone(), "the targets never reach a build without device code")
                .hint("drop arch-vars, or drop device-code = false if the project does compile GPU code"),
        );
    }
    if let Some((arch, _)) = keys.arch_args.iter().next() {
        d.push(
            Diagnostic::new(format!(
                "a component with device-code = false has [build.arch-args] for {arch}"
            ))
            .in_file(file)
            .hint("its content key does not depend on the targets, so per-target arguments cannot reach it: drop them, or drop device-code = false"),
        );
    }
}

/// `system` and the keys that system needs.
fn build_system(
    file: &Arc<SourceFile>,
    system: &Sp<String>,
    keys: &mut Keys,
    host_only: bool,
    meant: &[&str],
    d: &mut Diagnostics,
) -> Option<BuildSystem> {
    match system.as_str() {
        "cmake" => {
            // A misspelt arch-vars key was reported with a suggestion; do not report it twice.
            if !host_only
                && keys.arch_vars.as_ref().is_none_or(|v| v.is_empty())
                && !meant.contains(&"arch-vars")
            {
                d.push(
                    Diagnostic::new("a cmake build names no variable for the GPU targets")
                        .at(file, system.span.clone(), "targets would never reach this build")
                        .hint("add arch-vars = [\"GPU_TARGETS\"] (or the variable this project reads, e.g. AMDGPU_TARGETS)"),
                );
            }
            Some(BuildSystem::Cmake {
                pre_configure: keys
                    .pre_configure
                    .take()
                    .filter(|p| !p.trim().is_empty())
                    .map(|p| p.value),
                post_install: keys
                    .post_install
                    .take()
                    .filter(|p| !p.trim().is_empty())
                    .map(|p| p.value),
            })
        }
        "script" => script_build(file, system, keys.script.take(), meant, d),
        "copy" => copy_build(file, system, keys.dest.take(), meant, d),
        other => {
            d.push(
                Diagnostic::new(format!("unknown build system \"{other}\""))
                    .at(file, system.span.clone(), "not a build system rocforge drives")
                    .hint(did_you_mean(other, ["cmake", "script", "copy"]).unwrap_or_else(|| {
                        "use \"cmake\", \"copy\" or \"script\"; run other build tools (meson, make) from a script".to_string()
                    })),
            );
            None
        }
    }
}

fn script_build(
    file: &Arc<SourceFile>,
    system: &Sp<String>,
    script: Option<Sp<String>>,
    meant: &[&str],
    d: &mut Diagnostics,
) -> Option<BuildSystem> {
    match script {
        Some(s) if !s.trim().is_empty() => Some(BuildSystem::Script { script: s.value }),
        None if meant.contains(&"script") => None,
        _ => {
            d.push(
                Diagnostic::new("a script build has no script")
                    .at(
                        file,
                        system.span.clone(),
                        "system = \"script\" needs script = \"…\"",
                    )
                    .hint("add script = \"\"\"…\"\"\" holding the shell commands, one per line"),
            );
            None
        }
    }
}

fn copy_build(
    file: &Arc<SourceFile>,
    system: &Sp<String>,
    dest: Option<Sp<String>>,
    meant: &[&str],
    d: &mut Diagnostics,
) -> Option<BuildSystem> {
    match dest {
        Some(p) if is_inner_path(&p) => Some(BuildSystem::Copy { dest: p.value }),
        Some(p) => {
            d.push(
                Diagnostic::new(format!(
                    "copy destination \"{}\" must be relative to the prefix",
                    p.value
                ))
                .at(
                    file,
                    p.span.clone(),
                    path_problem(&p).unwrap_or("leaves the prefix"),
                )
                .hint("e.g. dest = \"share/rocforge/tensile\""),
            );
            None
        }
        None if meant.contains(&"dest") => None,
        None => {
            d.push(
                Diagnostic::new("a copy build has no destination")
                    .at(
                        file,
                        system.span.clone(),
                        "system = \"copy\" needs dest = \"…\"",
                    )
                    .hint("e.g. dest = \"share/rocforge/tensile\""),
            );
            None
        }
    }
}

/// `VAR` of a `-DVAR=…` or `-DVAR:TYPE=…` argument.
pub(super) fn cmake_var(arg: &str) -> Option<&str> {
    let rest = arg.strip_prefix("-D")?;
    let name = rest.split('=').next()?;
    Some(name.split(':').next().unwrap_or(name))
}
