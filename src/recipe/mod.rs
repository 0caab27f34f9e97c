//! Component recipes: read as written (with spans) and checked into a resolved [`Recipe`].
//!
//! Only a resolved recipe reaches the planner. Checks that need one file alone live here;
//! checks across files (duplicates, unknown dependencies, cycles, patch files) live in the
//! catalog.

pub mod derive_vars;
pub mod gpu_code;
pub mod release;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;

use crate::arch::{ArchTable, check_target_in_file, is_arch_name};
use crate::diag::reader::{self, Sp, TableReader};
use crate::diag::{Diagnostic, Diagnostics, SourceFile, did_you_mean};
use crate::units::{parse_duration, parse_size};

#[derive(Debug, Clone)]
pub struct Recipe {
    pub name: Sp<String>,
    pub version: String,
    pub summary: String,
    pub license: String,
    /// License files to carry, relative to the source tree's top (`license-files`); empty:
    /// the build looks for LICENSE*, LICENCE*, COPYING*, NOTICE* and COPYRIGHT* itself.
    pub license_files: Vec<Sp<String>>,
    pub homepage: Option<String>,
    /// Components needed to build this one and to use it (libraries it links, headers its
    /// headers include): built first, mounted in its build, installed with it.
    pub depends: Vec<Sp<String>>,
    /// Components needed only to build this one (a code generator such as Tensile): built
    /// first and mounted in its build like `depends`, part of its key, never installed with it.
    pub build_depends: Vec<Sp<String>>,
    pub source: Source,
    pub patches: Patches,
    pub build: Build,
    pub test: Option<Test>,
    /// The test client is built apart, as `<name>-tests` only (the line's `tests = false`):
    /// the library's own build leaves it out.
    pub tests_apart: bool,
    /// What `<name>-tests` sets on top of the library's arguments to switch its test client
    /// on: the base line's test switches that a `tests = false` line turned off.
    pub test_args: Vec<String>,
    /// The GPU variables of the base line's build, kept for `<name>-tests` where the line's
    /// `device-code = false` took them from the library's own build (its tests compile device
    /// code; its headers do not).
    pub test_arch_vars: Vec<String>,
    pub resources: Resources,
    /// Files fetched with the source so configure never needs the network.
    pub inputs: Vec<ExtraInput>,
    /// Post-patch steps that derive per-target files upstream lacks.
    pub derive: Vec<Derive>,
    /// Patch series shipped in pinned archives (a distribution's `debian.tar.xz`), applied
    /// before the catalog's own patches.
    pub series: Vec<Series>,
    /// How the GPU code reaches the targets (`[coverage]`): ahead of time unless said.
    pub gpu_code: gpu_code::GpuCode,
    pub file: Arc<SourceFile>,
    /// In a line with a `base`: the file whose `[source]`, `version`, `[patches]` and
    /// `[[series]]` replaced the base line's (`file` is then the base line's recipe).
    pub overrides: Option<Arc<SourceFile>>,
    /// The file `depends` was read from when it is not `file` (an override's own list).
    pub depends_file: Option<Arc<SourceFile>>,
    /// The file `build-depends` was read from when it is not `file`.
    pub build_depends_file: Option<Arc<SourceFile>>,
}

/// A patch series taken by reference from an archive another project publishes (e.g. Debian's
/// `<pkg>_<version>.debian.tar.xz`): the archive is pinned by sha256, its `series` file is read
/// and the patches it lists are applied in order, so no such patch file is copied into the
/// catalog.
#[derive(Debug, Clone, Serialize)]
pub struct Series {
    pub url: String,
    pub sha256: String,
    /// The directory inside the archive that holds `series` and the patches.
    pub dir: String,
    /// When not empty: apply only these entries of `series`, in the series' order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub only: Vec<String>,
    /// Entries of `series` not to apply.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub skip: Vec<String>,
}

/// A file a build would otherwise download: a pip wheel, test data, a FetchContent archive.
/// Pinned by sha256 and mounted read-only at `/inputs/<name>` in the build.
///
/// Exactly one of `sha256` and `md5` is set. An `md5` (what some upstreams publish, e.g.
/// rocSPARSE's test matrices) is only a first-download check: `rocforge lock` downloads the
/// file, verifies the md5 and records its sha256 in rocforge.lock; fetches then verify that
/// sha256, and an md5 input without a lock entry is refused.
#[derive(Debug, Clone, Serialize)]
pub struct ExtraInput {
    pub name: String,
    pub url: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub md5: Option<String>,
    /// Unpack a tar archive (.tar, .tar.gz, .tgz, .tar.zst) into a directory instead of
    /// keeping the file as it is.
    pub unpack: bool,
}

/// Copies a tree of the patched source under a new name for each targeted processor and
/// rewrites text in the copies. The case that matters: Tensile logic for gfx90c/gfx902 derived
/// from the gfx900 (vega10) logic. `{arch}`, `{isa}` (`9, 0, 12`), `{major}`, `{minor}`,
/// `{stepping}` and the per-arch `vars` are substituted in `to`, `rename` and `replace`.
#[derive(Debug, Clone, Serialize)]
pub struct Derive {
    pub arches: Vec<String>,
    pub from: String,
    pub to: String,
    pub rename: Vec<(String, String)>,
    pub replace: Vec<(String, String)>,
    pub vars: BTreeMap<String, BTreeMap<String, String>>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum Source {
    Git {
        url: String,
        #[serde(flatten)]
        reference: GitRef,
        #[serde(skip_serializing_if = "Option::is_none")]
        subdir: Option<String>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        paths: Vec<String>,
        /// Files or directories of the repository left out of the checkout (never fetched): a
        /// snapshot that lacks their blobs, or data the build does not use.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        exclude: Vec<String>,
        submodules: bool,
    },
    Url {
        url: String,
        sha256: String,
    },
    Path {
        path: String,
    },
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum GitRef {
    Tag(String),
    Rev(String),
}

/// Patch file names, in order: `all` first, then each arch's own list.
#[derive(Debug, Clone, Default)]
pub struct Patches {
    pub all: Vec<Sp<String>>,
    pub per_arch: BTreeMap<String, Vec<Sp<String>>>,
    /// The release line whose `patches/` directory holds the files, when it is not the
    /// recipe's own line (patches a derived line inherits from its base).
    pub release: Option<String>,
    /// The file the spans point into, when it is not the recipe's `file` (an override's).
    pub file: Option<Arc<SourceFile>>,
}

impl Patches {
    /// The series for a set of processors: `all`, then each processor's list in target order.
    pub fn series<'a>(&'a self, arches: impl IntoIterator<Item = &'a str>) -> Vec<&'a Sp<String>> {
        let mut out: Vec<&Sp<String>> = self.all.iter().collect();
        for arch in arches {
            if let Some(list) = self.per_arch.get(arch) {
                out.extend(list.iter());
            }
        }
        out
    }

    pub fn every(&self) -> impl Iterator<Item = &Sp<String>> {
        self.all.iter().chain(self.per_arch.values().flatten())
    }
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
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
}

#[derive(Debug, Clone, Serialize)]
pub struct Test {
    pub kind: TestKind,
    /// gtest: the client, relative to the prefix. each-binary: the corpus `dir` (a directory
    /// or a glob), relative to the prefix.
    pub client: String,
    pub args: Vec<String>,
    pub shards: u32,
    /// gtest: per shard, without progress. each-binary: per binary.
    pub timeout_secs: u64,
    pub env: BTreeMap<String, String>,
    /// each-binary: the exit code a binary reports "skipped" with (e.g. 77, CTest's convention).
    pub skip_exit_code: Option<i32>,
}

/// How a `[test]` corpus is run.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum TestKind {
    /// One gtest client, sharded with gtest's variables.
    #[default]
    Gtest,
    /// Every executable in a directory, each one test with its own timeout.
    EachBinary,
    /// The tests an installed CTestTestfile.cmake (and its subdirs) declares, each one test.
    Ctest,
}

#[derive(Debug, Clone, Copy, Serialize, schemars::JsonSchema)]
pub struct Resources {
    pub disk_bytes: u64,
    /// Peak memory of one compile job.
    pub memory_bytes: u64,
    /// Build time on the reference machine (8 cores).
    pub hours: f64,
}

/// Resource hints as written: the keys a table left out are taken from elsewhere (the defaults,
/// or in a line's override the base recipe's values).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ResourceHints {
    pub disk_bytes: Option<u64>,
    pub memory_bytes: Option<u64>,
    pub hours: Option<f64>,
}

impl ResourceHints {
    pub fn over(self, base: Resources) -> Resources {
        Resources {
            disk_bytes: self.disk_bytes.unwrap_or(base.disk_bytes),
            memory_bytes: self.memory_bytes.unwrap_or(base.memory_bytes),
            hours: self.hours.unwrap_or(base.hours),
        }
    }
}

impl Default for Resources {
    fn default() -> Self {
        Self {
            disk_bytes: 2 << 30,
            memory_bytes: 2 << 30,
            hours: 0.5,
        }
    }
}

pub use crate::ids::is_component_name;

fn is_var_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn is_hex(s: &str, len: usize) -> bool {
    s.len() == len
        && s.chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
}

/// A relative path that stays inside the tree it is relative to.
pub fn is_inner_path(p: &str) -> bool {
    path_problem(p).is_none()
}

/// What is wrong with a path that must stay inside its tree, in words for a caret label.
fn path_problem(p: &str) -> Option<&'static str> {
    if p.is_empty() {
        Some("empty path")
    } else if p.starts_with('/') {
        Some("absolute path")
    } else if p.contains('\\') {
        Some("backslash; separate directories with /")
    } else if p.split('/').any(|c| c == "..") {
        Some("\"..\" leaves the tree")
    } else if p.split('/').any(|c| c.is_empty() || c == ".") {
        Some("empty or \".\" path component")
    } else {
        None
    }
}

/// What is wrong with a hex digest or commit ID, in words for a caret label.
fn hex_problem(s: &str, len: usize) -> String {
    if s.len() != len {
        format!(
            "expected {len} hex digits, found {} characters",
            s.chars().count()
        )
    } else if s.chars().all(|c| c.is_ascii_hexdigit()) {
        "uppercase hex digits; write them in lowercase".to_string()
    } else {
        "contains characters that are not hex digits".to_string()
    }
}

/// The name and dependencies of a recipe that failed its checks, read leniently, so the
/// catalog can still check where its dependencies point and not call it unknown to others.
pub struct Outline {
    /// The file name without .toml, which by convention is the name when `name` is unreadable.
    pub stem: String,
    pub name: Option<Sp<String>>,
    pub depends: Vec<Sp<String>>,
    pub build_depends: Vec<Sp<String>>,
}

pub fn outline(file: &Arc<SourceFile>, stem: &str) -> Outline {
    let mut outline = Outline {
        stem: stem.to_string(),
        name: None,
        depends: Vec::new(),
        build_depends: Vec::new(),
    };
    let (doc, errors) = toml::de::DeTable::parse_recoverable(&file.text);
    if errors.is_empty() {
        // After a syntax error the table is a guess; only the stem is trusted then.
        let mut quiet = Diagnostics::default();
        let mut r = TableReader::new(file, &doc, "");
        outline.name = r.opt_str("name", &mut quiet);
        outline.depends = r.opt_str_list("depends", &mut quiet).unwrap_or_default();
        outline.build_depends = r
            .opt_str_list(BUILD_DEPENDS, &mut quiet)
            .unwrap_or_default();
    }
    outline
}

/// Reads one recipe file. `stem` is the file name without `.toml`, used in hints.
pub fn parse(
    file: &Arc<SourceFile>,
    stem: &str,
    arches: &ArchTable,
    d: &mut Diagnostics,
) -> Option<Recipe> {
    let errors_before = d.len();
    let doc = reader::parse(file, d)?;
    if doc.get_ref().is_empty() {
        // One message, not one per required key.
        d.push(
            Diagnostic::new("recipe file is empty")
                .at(file, 0..0, "no keys")
                .hint(format!(
                    "a recipe needs name, version, summary, license, [source] and [build]; e.g. name = \"{stem}\""
                )),
        );
        return None;
    }
    let mut r = TableReader::new(file, &doc, "");

    let name = r.str(
        "name",
        d,
        &format!("add name = \"{stem}\" (by convention, the file name)"),
    );
    if let Some(n) = &name
        && !is_component_name(n)
    {
        d.push(
            Diagnostic::new(format!("invalid component name \"{}\"", n.value))
                .at(file, n.span.clone(), "not a component name")
                .hint("names use lowercase letters, digits, '-', '_' and '.', and start with a letter or digit"),
        );
    }
    let version = r.str(
        "version",
        d,
        "add the component's upstream version, e.g. version = \"3.4.0\"",
    );
    if let Some(v) = &version {
        check_version(file, v, d);
    }
    let summary = r.str(
        "summary",
        d,
        "add a one-line summary, e.g. summary = \"ROCm sparse linear algebra\"",
    );
    let license = r.str(
        "license",
        d,
        "add the SPDX license of the component, e.g. license = \"MIT\"",
    );
    let license_files = read_license_files(&mut r, file, d).unwrap_or_default();
    let homepage = r.opt_str("homepage", d);
    let depends = r.opt_str_list("depends", d).unwrap_or_default();
    let build_depends = r.opt_str_list(BUILD_DEPENDS, d).unwrap_or_default();
    check_depends(
        file,
        name.as_ref().map(|n| n.as_str()),
        &depends,
        &build_depends,
        d,
    );

    let source = match r.opt_table("source", d) {
        Some(t) => read_source(t, d),
        None => {
            if !has_key(&doc, "source") {
                r.missing(
                    d,
                    "source",
                    "add a [source] table with git + tag, url + sha256, or path",
                );
            }
            None
        }
    };
    let patches = r
        .opt_table("patches", d)
        .map(|t| read_patches(t, arches, d))
        .unwrap_or_default();
    let build = match r.opt_table("build", d) {
        Some(t) => read_build(t, arches, d),
        None => {
            if !has_key(&doc, "build") {
                r.missing(d, "build", "add a [build] table, e.g. system = \"cmake\" and arch-vars = [\"GPU_TARGETS\"]");
            }
            None
        }
    };
    let test = r.opt_table("test", d).and_then(|t| read_test(t, d));
    let resources = r
        .opt_table("resources", d)
        .map(|t| read_resources(t, d))
        .unwrap_or_default();
    let inputs = r
        .opt_table_array("inputs", d)
        .map(|ts| read_inputs(ts, d))
        .unwrap_or_default();
    let derive = r
        .opt_table_array("derive", d)
        .map(|ts| read_derive(ts, arches, d))
        .unwrap_or_default();
    let series = r
        .opt_table_array("series", d)
        .map(|ts| read_series(ts, d))
        .unwrap_or_default();
    let coverage = r
        .opt_table("coverage", d)
        .map(|t| gpu_code::read(t, arches, d));
    r.finish(d);
    if build.as_ref().is_some_and(|b| !b.device_code) {
        // A component without device code is built once for every target set: nothing of its
        // source may depend on the targets.
        let per_target = patches
            .per_arch
            .iter()
            .next()
            .map(|(a, _)| format!("[patches] {a}"))
            .or_else(|| derive.first().map(|_| "[[derive]]".to_string()));
        if let Some(what) = per_target {
            d.push(
                Diagnostic::new(format!(
                    "a component with device-code = false has per-target source changes ({what})"
                ))
                .in_file(file)
                .hint("move the patches to [patches] all, or drop device-code = false"),
            );
        }
    }
    d.sort_from(errors_before);

    if d.len() > errors_before {
        return None;
    }
    Some(Recipe {
        name: name?,
        version: version?.value,
        summary: summary?.value,
        license: license?.value,
        license_files,
        homepage: homepage.map(|h| h.value),
        depends,
        build_depends,
        source: source?,
        patches,
        build: build?,
        test,
        tests_apart: false,
        test_args: Vec::new(),
        test_arch_vars: Vec::new(),
        resources,
        inputs,
        derive,
        series,
        gpu_code: match coverage {
            Some(c) => c?,
            None => gpu_code::GpuCode::AheadOfTime,
        },
        file: file.clone(),
        overrides: None,
        depends_file: None,
        build_depends_file: None,
    })
}

/// What a component file of a line with a `base` may change: where the source comes from and
/// how it is patched, never how the component builds (that stays in the base line's recipe).
#[derive(Debug, Clone)]
pub struct Override {
    pub version: Option<Sp<String>>,
    /// Where the licence is in this line's source, when its source is laid out differently.
    pub license_files: Option<Vec<Sp<String>>>,
    pub depends: Option<Vec<Sp<String>>>,
    pub build_depends: Option<Vec<Sp<String>>>,
    pub source: Option<Source>,
    pub patches: Option<Patches>,
    pub series: Option<Vec<Series>>,
    /// CMake `-DVAR=…` arguments that replace the base's setting of the same variable (or are
    /// added): what the line's builder image provides differently (a system FFTW, no hipRAND).
    pub args: Vec<String>,
    pub env: BTreeMap<String, String>,
    /// `Some("")` removes the base's pre-configure.
    pub pre_configure: Option<String>,
    /// `Some("")` removes the base's post-install.
    pub post_install: Option<String>,
    /// A script build's commands, replaced whole: the line takes the component from
    /// somewhere else (a distribution's binary package) and installs it its own way.
    pub script: Option<Sp<String>>,
    /// `device-code = false`: what this line builds of the component has no device code
    /// (a header-only library whose test client, the only GPU code, is built apart).
    pub device_code: Option<Sp<bool>>,
    pub inputs: Option<Vec<ExtraInput>>,
    /// `tests = false`: the library's build leaves its test client out (hours of compiling);
    /// `<name>-tests` builds it when asked for.
    pub tests: Option<bool>,
    /// The line's own hints: its image and flags build at their own speed.
    pub resources: ResourceHints,
    /// The line's own `[coverage]`: how its source's GPU code reaches the targets.
    pub gpu_code: Option<gpu_code::GpuCode>,
    pub file: Arc<SourceFile>,
}

/// The keys an override may hold, for the "cannot override" hint.
pub const OVERRIDE_KEYS: &[&str] = &[
    "version",
    "license-files",
    "depends",
    BUILD_DEPENDS,
    "source",
    "patches",
    "series",
    "build",
    "inputs",
    "tests",
    "resources",
    "coverage",
];

/// Reads a component file of a line whose release.toml names a `base` line; `component` is
/// the one it overrides (the file's name).
/// `license-files`: paths inside the source, each checked.
fn read_license_files(
    r: &mut TableReader<'_, '_>,
    file: &Arc<SourceFile>,
    d: &mut Diagnostics,
) -> Option<Vec<Sp<String>>> {
    let license_files = r.opt_str_list("license-files", d)?;
    for p in &license_files {
        if let Some(problem) = path_problem(p) {
            d.push(
                Diagnostic::new(format!(
                    "license file \"{}\" must be a path inside the source",
                    p.value
                ))
                .at(file, p.span.clone(), problem)
                .hint("write a path relative to the top of the source, e.g. \"LICENSE.md\""),
            );
        }
    }
    Some(license_files)
}

pub fn parse_override(
    file: &Arc<SourceFile>,
    component: &str,
    base_line: &str,
    arches: &ArchTable,
    d: &mut Diagnostics,
) -> Option<Override> {
    let before = d.len();
    let doc = reader::parse(file, d)?;
    for (k, _) in doc.get_ref().iter() {
        let key: &str = k.get_ref();
        if !OVERRIDE_KEYS.contains(&key) {
            d.push(
                Diagnostic::new(format!(
                    "\"{key}\" cannot be overridden in a line based on {base_line}"
                ))
                .at(file, k.span(), "not an override key")
                .hint(format!(
                    "this line changes only {}; change how the component builds in {base_line}'s recipe, which every line based on it shares",
                    OVERRIDE_KEYS.join(", ")
                )),
            );
        }
    }
    let mut r = TableReader::new(file, &doc, "");
    let version = r.opt_str("version", d);
    if let Some(v) = &version {
        check_version(file, v, d);
    }
    let license_files = read_license_files(&mut r, file, d);
    let source = r.opt_table("source", d).and_then(|t| read_source(t, d));
    let patches = r.opt_table("patches", d).map(|t| {
        let mut p = read_patches(t, arches, d);
        p.file = Some(file.clone());
        p
    });
    let series = r.opt_table_array("series", d).map(|ts| read_series(ts, d));
    let depends = r.opt_str_list("depends", d);
    let build_depends = r.opt_str_list(BUILD_DEPENDS, d);
    // A list the override leaves alone is the base's, checked against the other once both are
    // known (`Override::check_against`).
    check_depends(
        file,
        Some(component),
        depends.as_deref().unwrap_or_default(),
        build_depends.as_deref().unwrap_or_default(),
        d,
    );
    let mut args = Vec::new();
    let mut env = BTreeMap::new();
    let mut pre_configure = None;
    let mut post_install = None;
    let mut script = None;
    let mut device_code = None;
    if let Some(mut b) = r.opt_table("build", d) {
        for a in b.opt_str_list("args", d).unwrap_or_default() {
            if !a.starts_with("-D") || !a.contains('=') {
                d.push(
                    Diagnostic::new(format!("override argument \"{}\" does not set a CMake variable", a.value))
                        .at(file, a.span.clone(), "not -DVAR=VALUE")
                        .hint("a line sets CMake variables (-DVAR=VALUE), replacing the base's value of VAR"),
                );
            }
            args.push(a.value);
        }
        env = b
            .opt_str_map("env", d)
            .map(|m| m.into_iter().map(|(k, v)| (k, v.value)).collect())
            .unwrap_or_default();
        pre_configure = b.opt_str("pre-configure", d).map(|p| p.value);
        post_install = b.opt_str("post-install", d).map(|p| p.value);
        script = b.opt_str("script", d);
        device_code = b.opt_bool("device-code", d);
        b.finish(d);
    }
    let inputs = r.opt_table_array("inputs", d).map(|ts| read_inputs(ts, d));
    let tests = r.opt_bool("tests", d).map(|b| b.value);
    let resources = r
        .opt_table("resources", d)
        .map(|t| read_resource_hints(t, d))
        .unwrap_or_default();
    let gpu_code = r
        .opt_table("coverage", d)
        .and_then(|t| gpu_code::read(t, arches, d));
    // Not `r.finish`: unknown keys were reported above, with the override's own hint.
    d.sort_from(before);
    if d.len() > before {
        return None;
    }
    Some(Override {
        version,
        license_files,
        depends,
        build_depends,
        source,
        patches,
        series,
        args,
        env,
        pre_configure,
        post_install,
        script,
        device_code,
        inputs,
        tests,
        resources,
        gpu_code,
        file: file.clone(),
    })
}

impl Override {
    /// A name this override puts in one dependency list while the base recipe's other list,
    /// which the override keeps, has it: the merged recipe would list it in both. (An override
    /// that sets both lists was checked whole by [`parse_override`].)
    pub fn check_against(&self, base: &Recipe, base_line: &str, d: &mut Diagnostics) {
        if let Some(script) = &self.script
            && !matches!(base.build.system, BuildSystem::Script { .. })
        {
            d.push(
                Diagnostic::new(format!(
                    "[build] script replaces the commands of a script build, and {} in {base_line} is not one",
                    base.name.value
                ))
                .at(&self.file, script.span.clone(), "a script for a cmake or copy build")
                .related(&base.file, base.name.span.clone(), format!("{base_line}'s recipe"))
                .hint("a line changes a cmake build through [build] args, env, pre-configure and post-install"),
            );
        }
        if let Some(dc) = &self.device_code {
            let problem = if dc.value {
                (!base.build.device_code).then(|| {
                    format!(
                        "{} has no device code in {base_line}: a line cannot give it some",
                        base.name.value
                    )
                })
            } else if !base.build.arch_args.is_empty() || !base.derive.is_empty() {
                Some(format!(
                    "{} has per-target arguments or derivations in {base_line}, so its build does depend on the targets",
                    base.name.value
                ))
            } else if base.test.is_some() && self.tests != Some(false) {
                Some(format!(
                    "{} builds its test client, which compiles device code, unless this line sets tests = false",
                    base.name.value
                ))
            } else {
                None
            };
            if let Some(problem) = problem {
                d.push(
                    Diagnostic::new(problem)
                        .at(&self.file, dc.span.clone(), "device-code set here")
                        .related(&base.file, base.name.span.clone(), format!("{base_line}'s recipe"))
                        .hint("device-code = false is for a line whose build of the component compiles no GPU code (headers, with tests = false)"),
                );
            }
        }
        let (ours, key, theirs, other) = match (&self.depends, &self.build_depends) {
            (Some(run), None) => (run, "depends", &base.build_depends, BUILD_DEPENDS),
            (None, Some(build)) => (build, BUILD_DEPENDS, &base.depends, "depends"),
            _ => return,
        };
        for dep in ours {
            let Some(kept) = theirs.iter().find(|t| t.value == dep.value) else {
                continue;
            };
            d.push(
                Diagnostic::new(format!(
                    "dependency \"{}\" is in both depends and {BUILD_DEPENDS}",
                    dep.value
                ))
                .at(
                    &self.file,
                    dep.span.clone(),
                    format!("in this line's {key}"),
                )
                .related(
                    &base.file,
                    kept.span.clone(),
                    format!("in {base_line}'s {other}, which this line keeps"),
                )
                .hint(format!(
                    "set {other} in this file too, without \"{}\", or leave it out of {key}",
                    dep.value
                )),
            );
        }
    }
}

impl Recipe {
    /// Everything built before this component and mounted in its build: `depends`, then
    /// `build-depends`.
    pub fn all_depends(&self) -> impl Iterator<Item = &Sp<String>> {
        self.depends.iter().chain(&self.build_depends)
    }

    /// The dependency named `dependency` with the file its span points into: the override's
    /// when the line replaced that list, else the recipe's.
    pub fn dependency_at(&self, dependency: &str) -> Option<(&Arc<SourceFile>, &Sp<String>)> {
        if let Some(d) = self.depends.iter().find(|d| d.value == dependency) {
            return Some((self.depends_file.as_ref().unwrap_or(&self.file), d));
        }
        self.build_depends
            .iter()
            .find(|d| d.value == dependency)
            .map(|d| (self.build_depends_file.as_ref().unwrap_or(&self.file), d))
    }

    /// Whether `dependency` is needed only to build this component (`build-depends`).
    pub fn is_build_only(&self, dependency: &str) -> bool {
        self.build_depends.iter().any(|b| b.value == dependency)
    }

    /// The suffix of a component's test-client artifact: `rocrand-tests`.
    pub const TESTS_SUFFIX: &'static str = "-tests";

    /// `<name>-tests`: the test client built as its own artifact, from the same source,
    /// patches and flags as the library (plus the test switches a `tests = false` line turned
    /// off). It depends on the library, so the library's content key is part of its hash input,
    /// and it keeps only what the library's tree lacks (the client, its CTestTestfile and its
    /// data), so at run time it uses the library artifact's shared libraries. None without a
    /// `[test]` table or for a build rocforge cannot switch (a copy).
    pub fn tests_artifact(&self) -> Option<Recipe> {
        let test = self.test.as_ref()?;
        let BuildSystem::Cmake {
            pre_configure,
            post_install,
        } = &self.build.system
        else {
            return None;
        };
        let mut r = self.clone();
        let name = format!("{}{}", self.name.value, Self::TESTS_SUFFIX);
        r.name = Sp::new(name.clone(), self.name.span.clone());
        r.summary = format!("the test client of {}", self.name.value);
        r.depends = std::iter::once(Sp::new(self.name.value.clone(), self.name.span.clone()))
            .chain(self.depends.iter().cloned())
            .collect();
        for a in &self.test_args {
            let var = cmake_var(a);
            match r.build.args.iter_mut().find(|b| cmake_var(b) == var) {
                Some(b) => *b = a.clone(),
                None => r.build.args.push(a.clone()),
            }
        }
        let keep = test.client.trim_end_matches('/');
        let prune = format!(
            "# Only what the library's tree lacks is this artifact's: the client, its\n\
             # CTestTestfile and its data. The library's files come from the library artifact.\n\
             keep={keep}\n\
             cd \"$DESTDIR$PREFIX\"\n\
             find . ! -type d | while IFS= read -r f; do\n\
             \x20 f=${{f#./}}\n\
             \x20 case \"$f\" in \"$keep\"|\"$keep\"/*) continue ;; esac\n\
             \x20 if [ -e \"$ROCFORGE_DEPS/$f\" ] || [ -L \"$ROCFORGE_DEPS/$f\" ]; then rm -f \"$f\"; fi\n\
             done\n\
             find . -depth -mindepth 1 -type d -empty -exec rmdir {{}} \\;\n\
             if [ ! -e \"$keep\" ]; then\n\
             \x20 echo \"{name}: the build installed no $keep: is the test client switched on?\" >&2\n\
             \x20 exit 1\n\
             fi\n",
            keep = crate::process::shell_quote(keep),
        );
        r.build.system = BuildSystem::Cmake {
            pre_configure: pre_configure.clone(),
            post_install: Some(match post_install {
                Some(p) => format!("{p}\n{prune}"),
                None => prune,
            }),
        };
        r.tests_apart = false;
        r.test_args = Vec::new();
        if !self.test_arch_vars.is_empty() {
            r.build.device_code = true;
            r.build.arch_vars = self.test_arch_vars.clone();
            r.test_arch_vars = Vec::new();
        }
        Some(r)
    }

    /// The base line's recipe with an override applied.
    pub fn with_override(mut self, o: &Override, base_line: &str) -> Recipe {
        if let Some(v) = &o.version {
            self.version = v.value.clone();
        }
        if let Some(l) = &o.license_files {
            self.license_files = l.clone();
        }
        match &o.source {
            Some(s) => self.source = s.clone(),
            // A path source resolves against the directory of the line that declared it.
            None => {
                if let Source::Path { path } = &mut self.source {
                    *path = format!("../{base_line}/{path}");
                }
            }
        }
        match &o.patches {
            Some(p) => self.patches = p.clone(),
            None => {
                if self.patches.release.is_none() {
                    self.patches.release = Some(base_line.to_string());
                }
            }
        }
        if let Some(s) = &o.series {
            self.series = s.clone();
        }
        if let Some(deps) = &o.depends {
            self.depends = deps.clone();
            self.depends_file = Some(o.file.clone());
        }
        if let Some(deps) = &o.build_depends {
            self.build_depends = deps.clone();
            self.build_depends_file = Some(o.file.clone());
        }
        for a in &o.args {
            let var = cmake_var(a);
            if o.tests == Some(false)
                && let Some(base) = self
                    .build
                    .args
                    .iter()
                    .find(|b| var.is_some() && cmake_var(b) == var)
                && crate::corpus::installed::switches_tests_on(base)
            {
                self.test_args.push(base.clone());
            }
            match self
                .build
                .args
                .iter_mut()
                .find(|b| var.is_some() && cmake_var(b) == var)
            {
                Some(b) => *b = a.clone(),
                None => self.build.args.push(a.clone()),
            }
        }
        self.build
            .env
            .extend(o.env.iter().map(|(k, v)| (k.clone(), v.clone())));
        if let BuildSystem::Cmake {
            pre_configure,
            post_install,
        } = &mut self.build.system
        {
            if let Some(p) = &o.pre_configure {
                *pre_configure = (!p.trim().is_empty()).then(|| p.clone());
            }
            if let Some(p) = &o.post_install {
                *post_install = (!p.trim().is_empty()).then(|| p.clone());
            }
        }
        if let (BuildSystem::Script { script }, Some(ours)) = (&mut self.build.system, &o.script) {
            *script = ours.value.clone();
        }
        if let Some(i) = &o.inputs {
            self.inputs = i.clone();
        }
        // The client stays described: `<name>-tests` builds it when asked for.
        if o.tests == Some(false) {
            self.tests_apart = true;
        }
        if let Some(dc) = &o.device_code
            && !dc.value
            && self.build.device_code
        {
            self.build.device_code = false;
            self.test_arch_vars = std::mem::take(&mut self.build.arch_vars);
        }
        self.resources = o.resources.over(self.resources);
        if let Some(g) = &o.gpu_code {
            self.gpu_code = g.clone();
        }
        self.overrides = Some(o.file.clone());
        self
    }

    /// The file a user edits to change this component in its line.
    pub fn display_file(&self) -> &str {
        self.overrides
            .as_ref()
            .map_or(self.file.display.as_str(), |f| f.display.as_str())
    }
}

/// `VAR` of a `-DVAR=…` or `-DVAR:TYPE=…` argument.
fn cmake_var(arg: &str) -> Option<&str> {
    let rest = arg.strip_prefix("-D")?;
    let name = rest.split('=').next()?;
    Some(name.split(':').next().unwrap_or(name))
}

/// Versions end up in file names (tarballs, store listings): no separators, no `..`.
fn check_version(file: &Arc<SourceFile>, v: &Sp<String>, d: &mut Diagnostics) {
    if !is_version(v) {
        d.push(
            Diagnostic::new(format!("invalid version \"{}\"", v.value))
                .at(
                    file,
                    v.span.clone(),
                    "empty, or has characters other than letters, digits and . _ + ~ -",
                )
                .hint("write the upstream version, e.g. version = \"3.4.0\""),
        );
    }
}

fn is_version(v: &str) -> bool {
    !v.is_empty()
        && v.len() <= 64
        && !v.contains("..")
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || "._+~-".contains(c))
}

fn read_series(tables: Vec<TableReader<'_, '_>>, d: &mut Diagnostics) -> Vec<Series> {
    let mut out = Vec::new();
    for mut t in tables {
        let file = t.file().clone();
        let before = d.len();
        let url = t.str(
            "url",
            d,
            "url = \"https://…/pkg_1.0-1.debian.tar.xz\": the archive that holds the series",
        );
        let sha256 = t.str(
            "sha256",
            d,
            "add sha256 = \"<64 hex digits>\" of the archive (a Debian .dsc or Sources index lists it)",
        );
        let dir = t.opt_str("dir", d);
        let only = t.opt_str_list("only", d).unwrap_or_default();
        let skip = t.opt_str_list("skip", d).unwrap_or_default();
        t.finish(d);
        if let Some(u) = &url {
            check_url(&file, u, d);
        }
        if let Some(sha) = &sha256
            && !is_hex(sha, 64)
        {
            d.push(
                Diagnostic::new(format!("malformed sha256 \"{}\"", sha.value))
                    .at(&file, sha.span.clone(), hex_problem(sha, 64))
                    .hint("copy the digest as `sha256sum FILE` prints it: 64 lowercase hex digits"),
            );
        }
        if let Some(dir) = &dir
            && let Some(problem) = path_problem(dir)
        {
            d.push(
                Diagnostic::new(format!(
                    "series dir \"{}\" must be a path inside the archive",
                    dir.value
                ))
                .at(&file, dir.span.clone(), problem)
                .hint("e.g. dir = \"debian/patches\""),
            );
        }
        if let (Some(o), Some(s)) = (only.first(), skip.first()) {
            d.push(
                Diagnostic::new("a series takes only or skip, not both")
                    .at(&file, s.span.clone(), "skip beside only")
                    .related(&file, o.span.clone(), "only given here")
                    .hint("list the entries to apply in only, or the ones to leave out in skip"),
            );
        }
        for n in only.iter().chain(&skip) {
            if n.is_empty() || n.contains("..") || n.starts_with('/') {
                d.push(
                    Diagnostic::new(format!("series entry \"{}\" is not a patch name", n.value))
                        .at(&file, n.span.clone(), "not an entry of a series file")
                        .hint("write the entry as the series file lists it, e.g. \"fix-hiprtc-link.patch\""),
                );
            }
        }
        if d.len() > before {
            continue;
        }
        if let (Some(url), Some(sha256)) = (url, sha256) {
            out.push(Series {
                url: url.value,
                sha256: sha256.value,
                dir: dir.map_or_else(|| "debian/patches".to_string(), |d| d.value),
                only: only.into_iter().map(|s| s.value).collect(),
                skip: skip.into_iter().map(|s| s.value).collect(),
            });
        }
    }
    out
}

fn has_key(doc: &toml::Spanned<toml::de::DeTable<'_>>, key: &str) -> bool {
    doc.get_ref().contains_key(key)
}

/// The key of a recipe's build-only dependencies.
pub const BUILD_DEPENDS: &str = "build-depends";

/// One file's `depends` and `build-depends`: no self-dependency, no name twice in a list or
/// in both, only component names. Names the line lacks are the catalog's to report.
fn check_depends(
    file: &Arc<SourceFile>,
    name: Option<&str>,
    depends: &[Sp<String>],
    build_depends: &[Sp<String>],
    d: &mut Diagnostics,
) {
    check_dependency_list(file, name, "depends", depends, d);
    check_dependency_list(file, name, BUILD_DEPENDS, build_depends, d);
    for (i, b) in build_depends.iter().enumerate() {
        // A name listed twice in build-depends was reported above; its first listing speaks.
        if build_depends[..i].iter().any(|p| p.value == b.value) {
            continue;
        }
        if let Some(r) = depends.iter().find(|r| r.value == b.value) {
            d.push(listed_in_both(file, r, b));
        }
    }
}

fn check_dependency_list(
    file: &Arc<SourceFile>,
    name: Option<&str>,
    key: &str,
    list: &[Sp<String>],
    d: &mut Diagnostics,
) {
    for (i, dep) in list.iter().enumerate() {
        if Some(dep.as_str()) == name {
            let message = if key == BUILD_DEPENDS {
                format!("component \"{}\" lists itself in {key}", dep.value)
            } else {
                format!("component \"{}\" depends on itself", dep.value)
            };
            d.push(
                Diagnostic::new(message)
                    .at(file, dep.span.clone(), "self-dependency")
                    .hint(format!("remove it from {key}")),
            );
        } else if let Some(first) = list[..i].iter().find(|p| p.value == dep.value) {
            d.push(
                Diagnostic::new(format!("dependency \"{}\" is listed twice", dep.value))
                    .at(file, dep.span.clone(), "listed again here")
                    .related(file, first.span.clone(), "first listed here")
                    .hint("list each dependency once"),
            );
        } else if !is_component_name(dep) {
            let example = if key == BUILD_DEPENDS {
                "tensile"
            } else {
                "rocprim"
            };
            d.push(
                Diagnostic::new(format!("invalid dependency name \"{}\"", dep.value))
                    .at(file, dep.span.clone(), "not a component name")
                    .hint(format!(
                        "{key} lists component names of this release line, e.g. [\"{example}\"]"
                    )),
            );
        }
    }
}

/// A dependency in both lists: whether it is installed with the component would be unclear.
fn listed_in_both(file: &Arc<SourceFile>, run: &Sp<String>, build: &Sp<String>) -> Diagnostic {
    Diagnostic::new(format!(
        "dependency \"{}\" is in both depends and {BUILD_DEPENDS}",
        build.value
    ))
    .at(file, build.span.clone(), "needed only to build, says build-depends")
    .related(file, run.span.clone(), "needed at run time, says depends")
    .hint(format!(
        "keep it only in depends when the installed component uses it (depends are built first and mounted in the build too), else only in {BUILD_DEPENDS}"
    ))
}

fn read_source(mut t: TableReader<'_, '_>, d: &mut Diagnostics) -> Option<Source> {
    let file = t.file().clone();
    let before = d.len();
    let git = t.opt_str("git", d);
    let tag = t.opt_str("tag", d);
    let rev = t.opt_str("rev", d);
    let subdir = t.opt_str("subdir", d);
    let paths = t.opt_str_list("paths", d).unwrap_or_default();
    let exclude = t.opt_str_list("exclude", d).unwrap_or_default();
    let submodules = t.opt_bool("submodules", d);
    let url = t.opt_str("url", d);
    let sha256 = t.opt_str("sha256", d);
    let path = t.opt_str("path", d);
    let table_span = t.span();
    let meant = t.finish(d);

    let kinds: Vec<&Sp<String>> = [&git, &url, &path].into_iter().flatten().collect();
    if kinds.is_empty() {
        if d.len() == before {
            d.push(
                Diagnostic::new("[source] has neither git, url nor path")
                    .at(&file, table_span, "no source kind")
                    .hint("use git = \"https://…\" with tag or rev, url = \"https://…\" with sha256, or path = \"dir\""),
            );
        }
        return None;
    }
    if kinds.len() > 1 {
        d.push(
            Diagnostic::new("[source] names more than one kind of source")
                .at(&file, kinds[1].span.clone(), "second source kind")
                .related(&file, kinds[0].span.clone(), "first source kind")
                .hint("keep exactly one of git, url and path"),
        );
        return None;
    }
    let stray = |d: &mut Diagnostics, field: &Option<Sp<String>>, key: &str, kind: &str| {
        if let Some(f) = field {
            d.push(
                Diagnostic::new(format!("\"{key}\" does not apply to a {kind} source"))
                    .at(&file, f.span.clone(), format!("not used by {kind} sources"))
                    .hint(format!("remove \"{key}\"")),
            );
        }
    };
    if let Some(git) = git {
        stray(d, &sha256, "sha256", "git");
        check_url(&file, &git, d);
        let reference = match (tag, rev) {
            (Some(tag), None) => Some(GitRef::Tag(tag.value)),
            (None, Some(rev)) => {
                if is_hex(&rev, 40) {
                    Some(GitRef::Rev(rev.value))
                } else {
                    let label = if rev.len() < 40 && rev.chars().all(|c| c.is_ascii_hexdigit()) {
                        "abbreviated; expected the full 40-hex-digit commit ID".to_string()
                    } else {
                        hex_problem(&rev, 40)
                    };
                    d.push(
                        Diagnostic::new(format!("malformed rev \"{}\"", rev.value))
                            .at(&file, rev.span.clone(), label)
                            .hint("write the full commit, e.g. `git rev-parse rocm-6.4.4^{commit}`; use tag = \"…\" for a tag"),
                    );
                    None
                }
            }
            (Some(tag), Some(rev)) => {
                d.push(
                    Diagnostic::new("[source] gives both tag and rev")
                        .at(&file, rev.span.clone(), "rev given here")
                        .related(&file, tag.span.clone(), "tag given here")
                        .hint(
                            "keep one: the tag (its commit is pinned in rocforge.lock) or the rev",
                        ),
                );
                None
            }
            // A misspelt tag or rev was reported with a suggestion; saying it is missing is noise.
            (None, None) if meant.contains(&"tag") || meant.contains(&"rev") => None,
            (None, None) => {
                d.push(
                    Diagnostic::new("git source has neither tag nor rev")
                        .at(&file, git.span.clone(), "which commit of this repository?")
                        .hint("add tag = \"rocm-6.4.4\" or rev = \"<40 hex digits>\""),
                );
                None
            }
        };
        for p in subdir.iter().chain(paths.iter()).chain(exclude.iter()) {
            if let Some(problem) = path_problem(p) {
                d.push(
                    Diagnostic::new(format!(
                        "source path \"{}\" must be relative and stay inside the repository",
                        p.value
                    ))
                    .at(&file, p.span.clone(), problem)
                    .hint("write a path inside the repository, e.g. \"projects/rocblas\""),
                );
            }
        }
        if d.len() > before {
            return None;
        }
        return Some(Source::Git {
            url: git.value,
            reference: reference?,
            subdir: subdir.map(|s| s.value),
            paths: paths.into_iter().map(|p| p.value).collect(),
            exclude: exclude.into_iter().map(|p| p.value).collect(),
            submodules: submodules.is_some_and(|s| s.value),
        });
    }
    if let Some(first) = exclude.first() {
        d.push(
            Diagnostic::new("\"exclude\" applies to git sources only")
                .at(&file, first.span.clone(), "not a git source")
                .hint("remove \"exclude\"; a tarball is taken whole"),
        );
    }
    stray(d, &tag, "tag", if url.is_some() { "url" } else { "path" });
    stray(d, &rev, "rev", if url.is_some() { "url" } else { "path" });
    if let Some(url) = url {
        check_url(&file, &url, d);
        let Some(sha) = sha256 else {
            if meant.contains(&"sha256") {
                return None; // a misspelt sha256 key, already reported
            }
            d.push(
                Diagnostic::new("url source has no sha256")
                    .at(&file, url.span.clone(), "unverified download")
                    .hint("add sha256 = \"<64 hex digits>\" (`sha256sum FILE` prints it)"),
            );
            return None;
        };
        if !is_hex(&sha, 64) {
            d.push(
                Diagnostic::new(format!("malformed sha256 \"{}\"", sha.value))
                    .at(&file, sha.span.clone(), hex_problem(&sha, 64))
                    .hint("copy the digest as `sha256sum FILE` prints it: 64 lowercase hex digits"),
            );
            return None;
        }
        if d.len() > before {
            return None;
        }
        return Some(Source::Url {
            url: url.value,
            sha256: sha.value,
        });
    }
    let path = path.expect("one kind is present");
    stray(d, &sha256, "sha256", "path");
    if path.starts_with('/') || path.is_empty() {
        d.push(
            Diagnostic::new(format!(
                "path source \"{}\" must be relative to the recipe's release directory",
                path.value
            ))
            .at(&file, path.span.clone(), "absolute or empty")
            .hint("write a relative path; machine-specific paths belong in rocforge.toml mirrors"),
        );
    }
    if d.len() > before {
        return None;
    }
    Some(Source::Path { path: path.value })
}

fn check_url(file: &Arc<SourceFile>, url: &Sp<String>, d: &mut Diagnostics) {
    let ok = ["https://", "http://", "file://", "git://", "ssh://"]
        .iter()
        .any(|p| url.starts_with(p) && url.len() > p.len());
    if !ok || url.chars().any(char::is_whitespace) {
        d.push(
            Diagnostic::new(format!("malformed URL \"{}\"", url.value))
                .at(
                    file,
                    url.span.clone(),
                    "expected https://, http://, file://, git:// or ssh://",
                )
                .hint("write the full URL, e.g. \"https://github.com/ROCm/rocSPARSE.git\""),
        );
    }
}

fn read_patches(mut t: TableReader<'_, '_>, arches: &ArchTable, d: &mut Diagnostics) -> Patches {
    let file = t.file().clone();
    let mut patches = Patches {
        all: t.opt_str_list("all", d).unwrap_or_default(),
        ..Patches::default()
    };
    for (k, v) in t.rest() {
        let arch = k.get_ref().to_string();
        if arches.get(&arch).is_none() && arches.already_reported(&arch) {
            continue; // refused in arches.toml, reported there
        }
        if arches.get(&arch).is_none() {
            let hint = did_you_mean(&arch, arches.names().chain(["all"])).unwrap_or_else(|| {
                "keys of [patches] are \"all\" and processor names from recipes/arches.toml".into()
            });
            let msg = if is_arch_name(&arch) || arch.contains(':') {
                format!("unknown GPU target \"{arch}\" in [patches]")
            } else {
                format!("unknown key \"{arch}\" in [patches]")
            };
            d.push(
                Diagnostic::new(msg)
                    .at(&file, k.span(), "not a known processor")
                    .hint(hint),
            );
            continue;
        }
        if let Some(list) = reader::read_str_list(&file, &format!("patches.{arch}"), v, d) {
            patches.per_arch.insert(arch, list);
        }
    }
    for p in patches.every() {
        if p.contains('/') || p.contains('\\') || p.starts_with('.') || p.is_empty() {
            d.push(
                Diagnostic::new(format!(
                    "patch name \"{}\" must be a plain file name",
                    p.value
                ))
                .at(&file, p.span.clone(), "paths are not allowed here")
                .hint("patches live in patches/<release>/<component>/; name the file only"),
            );
        } else if !p.ends_with(".patch") {
            d.push(
                Diagnostic::new(format!("patch \"{}\" does not end in .patch", p.value))
                    .at(&file, p.span.clone(), "not a .patch file")
                    .hint("name patches NNNN-what-it-does.patch"),
            );
        }
    }
    patches
}

fn read_build(
    mut t: TableReader<'_, '_>,
    arches: &ArchTable,
    d: &mut Diagnostics,
) -> Option<Build> {
    let file = t.file().clone();
    let before = d.len();
    let system = t.str("system", d, "system = \"cmake\", \"script\" or \"copy\"");
    let arch_vars = t.opt_str_list("arch-vars", d);
    let device_code = t.opt_bool("device-code", d);
    let args = t.opt_str_list("args", d).unwrap_or_default();
    let script = t.opt_str("script", d);
    let dest = t.opt_str("dest", d);
    let pre_configure = t.opt_str("pre-configure", d);
    let post_install = t.opt_str("post-install", d);
    let env = t.opt_str_map("env", d).unwrap_or_default();
    let mut arch_args = BTreeMap::new();
    if let Some(mut aa) = t.opt_table("arch-args", d) {
        for (k, v) in aa.rest() {
            let key = Sp::new(k.get_ref().to_string(), k.span());
            if let Some(target) = check_target_in_file(arches, &file, &key, "[build.arch-args]", d)
            {
                if target.xnack.is_some() || target.sramecc.is_some() {
                    d.push(
                        Diagnostic::new(format!(
                            "[build.arch-args] is keyed by processor, not target ID: \"{}\"",
                            key.value
                        ))
                        .at(&file, key.span.clone(), "features are not allowed here")
                        .hint(format!("write [build.arch-args] {} = [...]", target.arch)),
                    );
                    continue;
                }
                if let Some(list) =
                    reader::read_str_list(&file, &format!("build.arch-args.{}", key.value), v, d)
                {
                    arch_args.insert(key.value, list.into_iter().map(|s| s.value).collect());
                }
            }
        }
    }
    let meant = t.finish(d);

    for v in arch_vars.iter().flatten() {
        if !is_var_name(v) {
            d.push(
                Diagnostic::new(format!("\"{}\" is not a variable name", v.value))
                    .at(&file, v.span.clone(), "expected letters, digits and _")
                    .hint("arch-vars names the variables that receive the targets, e.g. [\"GPU_TARGETS\"]"),
            );
        }
    }
    for (k, v) in &env {
        if !is_var_name(k) {
            d.push(
                Diagnostic::new(format!("\"{k}\" is not an environment variable name"))
                    .at(&file, v.span.clone(), "value of an invalid name")
                    .hint("environment variable names use letters, digits and _"),
            );
        }
    }
    let system = system?;
    if let Some(p) = &pre_configure
        && system.as_str() != "cmake"
    {
        d.push(
            Diagnostic::new(format!(
                "pre-configure is for cmake builds, not \"{}\"",
                system.value
            ))
            .at(&file, p.span.clone(), "runs before CMake configures only")
            .hint(
                "a script build does the same at the start of its script; a copy build runs nothing",
            ),
        );
    }
    if let Some(p) = &post_install
        && system.as_str() != "cmake"
    {
        d.push(
            Diagnostic::new(format!(
                "post-install is for cmake builds, not \"{}\"",
                system.value
            ))
            .at(&file, p.span.clone(), "runs after `cmake --install` only")
            .hint(
                "a script build does the same at the end of its script; a copy build runs nothing",
            ),
        );
    }
    let host_only = device_code.as_ref().is_some_and(|b| !b.value);
    if host_only {
        if let Some(v) = arch_vars.as_ref().and_then(|v| v.first()) {
            d.push(
                Diagnostic::new("a component with device-code = false names a GPU variable")
                    .at(&file, v.span.clone(), "the targets never reach a build without device code")
                    .hint("drop arch-vars, or drop device-code = false if the project does compile GPU code"),
            );
        }
        if let Some((arch, _)) = arch_args.iter().next() {
            d.push(
                Diagnostic::new(format!(
                    "a component with device-code = false has [build.arch-args] for {arch}"
                ))
                .in_file(&file)
                .hint("its content key does not depend on the targets, so per-target arguments cannot reach it: drop them, or drop device-code = false"),
            );
        }
    }
    let kind = match system.as_str() {
        "cmake" => {
            // A misspelt arch-vars key was reported with a suggestion; do not report it twice.
            if !host_only
                && arch_vars.as_ref().is_none_or(|v| v.is_empty())
                && !meant.contains(&"arch-vars")
            {
                d.push(
                    Diagnostic::new("a cmake build names no variable for the GPU targets")
                        .at(&file, system.span.clone(), "targets would never reach this build")
                        .hint("add arch-vars = [\"GPU_TARGETS\"] (or the variable this project reads, e.g. AMDGPU_TARGETS)"),
                );
            }
            BuildSystem::Cmake {
                pre_configure: pre_configure
                    .filter(|p| !p.trim().is_empty())
                    .map(|p| p.value),
                post_install: post_install
                    .filter(|p| !p.trim().is_empty())
                    .map(|p| p.value),
            }
        }
        "script" => {
            match script {
                Some(s) if !s.trim().is_empty() => BuildSystem::Script { script: s.value },
                None if meant.contains(&"script") => return None,
                _ => {
                    d.push(
                    Diagnostic::new("a script build has no script")
                        .at(&file, system.span.clone(), "system = \"script\" needs script = \"…\"")
                        .hint("add script = \"\"\"…\"\"\" holding the shell commands, one per line"),
                );
                    return None;
                }
            }
        }
        "copy" => match dest {
            Some(p) if is_inner_path(&p) => BuildSystem::Copy { dest: p.value },
            Some(p) => {
                d.push(
                    Diagnostic::new(format!(
                        "copy destination \"{}\" must be relative to the prefix",
                        p.value
                    ))
                    .at(
                        &file,
                        p.span.clone(),
                        path_problem(&p).unwrap_or("leaves the prefix"),
                    )
                    .hint("e.g. dest = \"share/rocforge/tensile\""),
                );
                return None;
            }
            None if meant.contains(&"dest") => return None,
            None => {
                d.push(
                    Diagnostic::new("a copy build has no destination")
                        .at(
                            &file,
                            system.span.clone(),
                            "system = \"copy\" needs dest = \"…\"",
                        )
                        .hint("e.g. dest = \"share/rocforge/tensile\""),
                );
                return None;
            }
        },
        other => {
            d.push(
                Diagnostic::new(format!("unknown build system \"{other}\""))
                    .at(&file, system.span.clone(), "not a build system rocforge drives")
                    .hint(did_you_mean(other, ["cmake", "script", "copy"]).unwrap_or_else(|| {
                        "use \"cmake\", \"copy\" or \"script\"; run other build tools (meson, make) from a script".to_string()
                    })),
            );
            return None;
        }
    };
    if d.len() > before {
        return None;
    }
    Some(Build {
        system: kind,
        arch_vars: arch_vars
            .unwrap_or_default()
            .into_iter()
            .map(|s| s.value)
            .collect(),
        args: args.into_iter().map(|s| s.value).collect(),
        arch_args,
        env: env.into_iter().map(|(k, v)| (k, v.value)).collect(),
        device_code: !host_only,
    })
}

/// Options of ctest itself: a gtest client or a CTest tree's programs do not take them, and a
/// recipe that passes them most likely names a CTest directory as its client.
const CTEST_OPTIONS: &[&str] = &[
    "--output-on-failure",
    "--test-dir",
    "--tests-regex",
    "--exclude-regex",
    "--label-regex",
    "--label-exclude",
    "--repeat",
    "--repeat-until-fail",
    "--schedule-random",
    "--stop-on-failure",
    "--rerun-failed",
    "--no-tests",
    "--timeout",
    "--parallel",
    "--extra-verbose",
    "--build-config",
    "-R",
    "-E",
    "-L",
    "-LE",
    "-C",
    "-VV",
    "-j",
];

fn ctest_option(arg: &str) -> bool {
    let head = arg.split('=').next().unwrap_or(arg);
    CTEST_OPTIONS.contains(&head)
        || arg
            .strip_prefix("-j")
            .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
}

fn kind_name(kind: TestKind) -> &'static str {
    match kind {
        TestKind::Gtest => "gtest",
        TestKind::EachBinary => "each-binary",
        TestKind::Ctest => "ctest",
    }
}

const KINDS_HINT: &str = "kind = \"gtest\" (the default) runs one client; kind = \"each-binary\" runs every executable in dir; kind = \"ctest\" runs the tests of the CTestTestfile.cmake in dir";

fn read_test(mut t: TableReader<'_, '_>, d: &mut Diagnostics) -> Option<Test> {
    let file = t.file().clone();
    let before = d.len();
    let kind_str = t.opt_str("kind", d);
    let kind = match kind_str.as_ref().map(|k| k.value.as_str()) {
        None | Some("gtest") => Some(TestKind::Gtest),
        Some("each-binary") => Some(TestKind::EachBinary),
        Some("ctest") => Some(TestKind::Ctest),
        Some(other) => {
            let k = kind_str.as_ref().expect("matched Some");
            d.push(
                Diagnostic::new(format!("unknown test kind \"{other}\""))
                    .at(&file, k.span.clone(), "expected \"gtest\", \"each-binary\" or \"ctest\"")
                    .hint(did_you_mean(other, ["gtest", "each-binary", "ctest"]).unwrap_or_else(|| {
                        "use \"gtest\" (one sharded gtest client, the default), \"each-binary\" (every executable in dir, one test each) or \"ctest\" (the tests of an installed CTestTestfile.cmake)".to_string()
                    })),
            );
            None
        }
    };
    // The key the kind needs is required; the other kind's key is refused below.
    let (client, dir) = match kind {
        Some(TestKind::EachBinary) => (
            t.opt_str("client", d),
            t.str(
                "dir",
                d,
                "dir = \"bin/examples\" (or a glob, \"bin/example_*\"), relative to the install prefix",
            ),
        ),
        Some(TestKind::Ctest) => (
            t.opt_str("client", d),
            t.str(
                "dir",
                d,
                "dir = \"bin/rocRAND\", the directory holding the installed CTestTestfile.cmake, relative to the install prefix",
            ),
        ),
        Some(TestKind::Gtest) => (
            t.str(
                "client",
                d,
                "client = \"bin/<name>-test\", relative to the install prefix",
            ),
            t.opt_str("dir", d),
        ),
        None => (t.opt_str("client", d), t.opt_str("dir", d)),
    };
    let args = t.opt_str_list("args", d).unwrap_or_default();
    let shards = t.opt_int("shards", d);
    let timeout = t.opt_str("timeout", d);
    let env = t.opt_str_map("env", d).unwrap_or_default();
    let skip = t.opt_int("skip-exit-code", d);
    t.finish(d);
    let misplaced = match kind {
        Some(TestKind::EachBinary | TestKind::Ctest) => {
            client.as_ref().map(|c| (c, "client", "dir"))
        }
        Some(TestKind::Gtest) => dir.as_ref().map(|c| (c, "dir", "client")),
        None => None,
    };
    if let (Some((v, key, other)), Some(kind)) = (misplaced, kind) {
        d.push(
            Diagnostic::new(format!(
                "\"{key}\" does not belong to a kind = \"{}\" test",
                kind_name(kind)
            ))
            .at(&file, v.span.clone(), format!("use \"{other}\" here"))
            .hint(KINDS_HINT),
        );
    }
    if let (Some(s), Some(kind @ (TestKind::Gtest | TestKind::Ctest))) = (&skip, kind) {
        d.push(
            Diagnostic::new("skip-exit-code applies to kind = \"each-binary\" only")
                .at(
                    &file,
                    s.span.clone(),
                    if kind == TestKind::Gtest {
                        "not used by a gtest client"
                    } else {
                        "not used by a CTest tree"
                    },
                )
                .hint(if kind == TestKind::Gtest {
                    "a gtest client reports skipped tests itself ([  SKIPPED ])"
                } else {
                    "a CTest tree sets SKIP_RETURN_CODE per test in its CTestTestfile.cmake, and rocforge honours it"
                }),
        );
    }
    // A CTest directory named as a gtest client: the shape the shipped recipes once had.
    if kind == Some(TestKind::Gtest)
        && let Some(c) = &client
    {
        let ctest_arg = args.iter().find(|a| ctest_option(a));
        if c.ends_with("CTestTestfile.cmake") {
            let dir = c.trim_end_matches('/');
            let dir = dir.strip_suffix("/CTestTestfile.cmake").unwrap_or(dir);
            d.push(
                Diagnostic::new(format!("test client \"{}\" is not a program", c.value))
                    .at(
                        &file,
                        c.span.clone(),
                        "a directory or a CTest file, not a gtest client",
                    )
                    .hint(format!(
                        "for an installed CTest tree write kind = \"ctest\" and dir = \"{dir}\""
                    )),
            );
        } else if let Some(a) = ctest_arg {
            d.push(
                Diagnostic::new(format!(
                    "\"{}\" is an option of ctest, not of a gtest client",
                    a.value
                ))
                .at(&file, a.span.clone(), "ctest option")
                .related(&file, c.span.clone(), "so this is probably a CTest directory")
                .hint(format!(
                    "for an installed CTest tree write kind = \"ctest\" and dir = \"{}\", and drop the ctest options: rocforge runs each test itself and keeps every log",
                    c.value
                )),
            );
        }
    }
    if kind == Some(TestKind::Ctest) {
        if let Some(dv) = &dir {
            if dv.contains(['*', '?']) {
                d.push(
                    Diagnostic::new(format!("ctest dir \"{}\" is a glob", dv.value))
                        .at(&file, dv.span.clone(), "a CTest tree is one directory")
                        .hint("name the directory that holds CTestTestfile.cmake, e.g. dir = \"bin/rocRAND\""),
                );
            } else if let Some(parent) = dv.strip_suffix("CTestTestfile.cmake") {
                d.push(
                    Diagnostic::new(format!("ctest dir \"{}\" names the file", dv.value))
                        .at(&file, dv.span.clone(), "the directory, not the file")
                        .hint(format!("write dir = \"{}\"", parent.trim_end_matches('/'))),
                );
            }
        }
        for a in args.iter().filter(|a| ctest_option(a)) {
            d.push(
                Diagnostic::new(format!(
                    "\"{}\" is an option of ctest; rocforge runs the tests without ctest",
                    a.value
                ))
                .at(&file, a.span.clone(), "ctest option")
                .hint("drop it: every test's log is kept, shards and timeout are [test] keys, and args are appended to each test's own command"),
            );
        }
    }
    let skip_exit_code = match skip {
        Some(s) if (1..=255).contains(&s.value) => Some(s.value as i32),
        Some(s) => {
            d.push(
                Diagnostic::new(format!("skip-exit-code = {} is out of range", s.value))
                    .at(&file, s.span.clone(), "expected 1 to 255")
                    .hint("CTest's convention is 77"),
            );
            None
        }
        None => None,
    };
    let client = match kind {
        Some(TestKind::EachBinary | TestKind::Ctest) => dir,
        _ => client,
    };
    let shards = match shards {
        None => 1,
        Some(s) if (1..=256).contains(&s.value) => s.value as u32,
        Some(s) => {
            d.push(
                Diagnostic::new(format!("shards = {} is out of range", s.value))
                    .at(&file, s.span.clone(), "expected 1 to 256")
                    .hint("shards splits the test client's cases into that many runs"),
            );
            1
        }
    };
    let timeout_secs = match timeout {
        None => 3600,
        Some(t) => match parse_duration(&t) {
            Some(secs) if secs > 0 => secs,
            _ => {
                d.push(
                    Diagnostic::new(format!("malformed duration \"{}\"", t.value))
                        .at(&file, t.span.clone(), "expected e.g. 45m, 1h30m or 90s")
                        .hint("durations are numbers with units s, m, h, d and no spaces"),
                );
                0
            }
        },
    };
    if let Some(c) = &client
        && let Some(problem) = path_problem(c)
    {
        let (key, example) = match kind {
            Some(TestKind::EachBinary) => ("dir", "e.g. dir = \"bin/examples\""),
            Some(TestKind::Ctest) => ("dir", "e.g. dir = \"bin/rocRAND\""),
            _ => ("client", "e.g. client = \"bin/rocsparse-test\""),
        };
        d.push(
            Diagnostic::new(format!(
                "test {key} \"{}\" must be relative to the install prefix",
                c.value
            ))
            .at(&file, c.span.clone(), problem)
            .hint(example),
        );
    }
    if d.len() > before {
        return None;
    }
    Some(Test {
        kind: kind?,
        client: client?.value,
        args: args.into_iter().map(|s| s.value).collect(),
        shards,
        timeout_secs,
        env: env.into_iter().map(|(k, v)| (k, v.value)).collect(),
        skip_exit_code,
    })
}

fn read_resources(t: TableReader<'_, '_>, d: &mut Diagnostics) -> Resources {
    read_resource_hints(t, d).over(Resources::default())
}

/// The keys of a `[resources]` table that were given: a line's override changes only those.
fn read_resource_hints(mut t: TableReader<'_, '_>, d: &mut Diagnostics) -> ResourceHints {
    let file = t.file().clone();
    let disk = t.opt_str("disk", d);
    let memory = t.opt_str("memory", d);
    let hours = t.opt_number("hours", d);
    t.finish(d);
    let size = |d: &mut Diagnostics, v: Option<Sp<String>>| {
        let s = v?;
        let parsed = parse_size(&s);
        if parsed.is_none() {
            d.push(
                Diagnostic::new(format!("malformed size \"{}\"", s.value))
                    .at(&file, s.span.clone(), "expected e.g. 8GiB or 512MiB")
                    .hint(
                        "sizes are a number and a unit: B, KiB, MiB, GiB, TiB (or KB, MB, GB, TB)",
                    ),
            );
        }
        parsed
    };
    let disk_bytes = size(d, disk);
    let memory_bytes = size(d, memory);
    let hours = hours.and_then(|h| {
        if h.value >= 0.0 && h.value < 1000.0 {
            return Some(h.value);
        }
        d.push(
            Diagnostic::new(format!("hours = {} is out of range", h.value))
                .at(&file, h.span.clone(), "expected 0 to 1000")
                .hint("hours is the build time on an 8-core reference machine"),
        );
        None
    });
    ResourceHints {
        disk_bytes,
        memory_bytes,
        hours,
    }
}

fn read_inputs(tables: Vec<TableReader<'_, '_>>, d: &mut Diagnostics) -> Vec<ExtraInput> {
    let mut out: Vec<ExtraInput> = Vec::new();
    for mut t in tables {
        let file = t.file().clone();
        let before = d.len();
        let name = t.str(
            "name",
            d,
            "name the input; the build sees it at /inputs/<name>",
        );
        let url = t.str(
            "url",
            d,
            "url = \"https://…\" of the file the build would otherwise download",
        );
        let before_digest = d.len();
        let sha256 = t.opt_str("sha256", d);
        let md5 = t.opt_str("md5", d);
        if sha256.is_none() && md5.is_none() && d.len() == before_digest {
            t.missing(
                d,
                "sha256",
                "add sha256 = \"<64 hex digits>\" (`sha256sum FILE` prints it); when upstream publishes only an MD5, write md5 = \"<32 hex digits>\" and run `rocforge lock`, which records the sha256",
            );
        }
        let unpack = t.opt_bool("unpack", d).is_some_and(|b| b.value);
        t.finish(d);
        if let Some(n) = &name {
            if !is_input_name(n) {
                d.push(
                    Diagnostic::new(format!("invalid input name \"{}\"", n.value))
                        .at(&file, n.span.clone(), "not a plain file name")
                        .hint("input names are file names: letters, digits, '-', '_' and '.', not starting with '.'"),
                );
            } else if out.iter().any(|i| i.name == n.value) {
                d.push(
                    Diagnostic::new(format!("input \"{}\" is listed twice", n.value))
                        .at(&file, n.span.clone(), "second input of this name")
                        .hint("give each [[inputs]] entry its own name"),
                );
            }
        }
        if let Some(u) = &url {
            check_url(&file, u, d);
        }
        if let Some(sha) = &sha256
            && !is_hex(sha, 64)
        {
            d.push(
                Diagnostic::new(format!("malformed sha256 \"{}\"", sha.value))
                    .at(&file, sha.span.clone(), hex_problem(sha, 64))
                    .hint("copy the digest from `sha256sum FILE`"),
            );
        }
        if let Some(m) = &md5 {
            if sha256.is_some() {
                d.push(
                    Diagnostic::new("an input takes sha256 or md5, not both")
                        .at(&file, m.span.clone(), "md5 beside a sha256")
                        .hint("keep the sha256 and remove the md5: md5 is only for files whose upstream publishes nothing stronger"),
                );
            } else if !is_hex(m, 32) {
                d.push(
                    Diagnostic::new(format!("malformed md5 \"{}\"", m.value))
                        .at(&file, m.span.clone(), hex_problem(m, 32))
                        .hint("copy the digest upstream publishes, or `md5sum FILE` prints it"),
                );
            }
        }
        if d.len() > before {
            continue;
        }
        if let (Some(name), Some(url)) = (name, url) {
            out.push(ExtraInput {
                name: name.value,
                url: url.value,
                sha256: sha256.map(|s| s.value),
                md5: md5.map(|m| m.value),
                unpack,
            });
        }
    }
    out
}

/// An extra input's name: the file name the build sees under /inputs. Letters (either case:
/// upstream file names such as rocSPARSE's `Chebyshev4.tar.gz` keep theirs), digits, `-`, `_`
/// and `.`; not starting with `.`.
pub fn is_input_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && s.len() <= 128
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

const DERIVE_VARS: [&str; 5] = ["arch", "isa", "major", "minor", "stepping"];

fn read_derive(
    tables: Vec<TableReader<'_, '_>>,
    arches: &ArchTable,
    d: &mut Diagnostics,
) -> Vec<Derive> {
    let mut out = Vec::new();
    for mut t in tables {
        let file = t.file().clone();
        let before = d.len();
        let for_arches = t.opt_str_list("arches", d);
        let from = t.str(
            "from",
            d,
            "from = \"<directory of the patched source to copy>\"",
        );
        let to = t.str(
            "to",
            d,
            "to = \"<destination, e.g. …/asm_full/{codename}>\"",
        );
        let rename = t.opt_pair_list("rename", d).unwrap_or_default();
        let replace = t.opt_pair_list("replace", d).unwrap_or_default();
        let mut vars: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
        if let Some(mut vt) = t.opt_table("vars", d) {
            for (k, v) in vt.rest() {
                let arch = k.get_ref().to_string();
                if arches.get(&arch).is_none() {
                    d.push(
                        Diagnostic::new(format!("unknown GPU target \"{arch}\" in [derive.vars]"))
                            .at(&file, k.span(), "not a known processor")
                            .maybe_hint(did_you_mean(&arch, arches.names())),
                    );
                    continue;
                }
                let toml::de::DeValue::Table(table) = v.get_ref() else {
                    d.push(
                        Diagnostic::new(format!("[derive.vars.{arch}] must be a table of strings"))
                            .at(&file, v.span(), "expected a table")
                            .hint(format!("e.g. [derive.vars.{arch}] codename = \"renoir\"")),
                    );
                    continue;
                };
                let mut map = BTreeMap::new();
                for (vk, vv) in table.iter() {
                    match vv.get_ref().as_str() {
                        Some(s) => {
                            map.insert(vk.get_ref().to_string(), s.to_string());
                        }
                        None => d.push(
                            Diagnostic::new(format!(
                                "derive variable \"{}\" must be a string",
                                vk.get_ref()
                            ))
                            .at(&file, vv.span(), "expected a string")
                            .hint("quote the value"),
                        ),
                    }
                }
                vars.insert(arch, map);
            }
        }
        let table_span = t.span();
        t.finish(d);
        let for_arches = match for_arches {
            Some(list) if !list.is_empty() => list,
            _ => {
                d.push(
                    Diagnostic::new("[[derive]] names no arches")
                        .at(
                            &file,
                            table_span.start..table_span.start,
                            "which targets is this derivation for?",
                        )
                        .hint("add arches = [\"gfx90c\", \"gfx902\"]"),
                );
                continue;
            }
        };
        for a in &for_arches {
            if arches.get(a).is_none() {
                d.push(
                    Diagnostic::new(format!(
                        "unknown GPU target \"{}\" in [[derive]] arches",
                        a.value
                    ))
                    .at(&file, a.span.clone(), "not a known processor")
                    .maybe_hint(did_you_mean(a, arches.names())),
                );
            }
        }
        for p in from.iter().chain(to.iter()) {
            if let Some(problem) = path_problem(p) {
                d.push(
                    Diagnostic::new(format!("derive path \"{}\" must stay inside the source tree", p.value))
                        .at(&file, p.span.clone(), problem)
                        .hint("write a relative path inside the source, e.g. \"library/src/blas3/Tensile/Logic/asm_full/vega10\""),
                );
            }
        }
        // Every {placeholder} must be known for every arch the derivation runs for.
        let texts = to
            .iter()
            .cloned()
            .chain(rename.iter().chain(replace.iter()).map(|(_, b)| b.clone()));
        for text in texts {
            for var in placeholders(&text) {
                if DERIVE_VARS.contains(&var.as_str()) {
                    continue;
                }
                for a in &for_arches {
                    if !vars.get(a.as_str()).is_some_and(|m| m.contains_key(&var)) {
                        d.push(
                            Diagnostic::new(format!("placeholder {{{var}}} has no value for {}", a.value))
                                .at(&file, text.span.clone(), format!("uses {{{var}}}"))
                                .hint(format!("add [derive.vars.{}] {var} = \"…\" (built in: arch, isa, major, minor, stepping)", a.value)),
                        );
                    }
                }
            }
        }
        if d.len() > before {
            continue;
        }
        if let (Some(from), Some(to)) = (from, to) {
            out.push(Derive {
                arches: for_arches.into_iter().map(|a| a.value).collect(),
                from: from.value,
                to: to.value,
                rename: rename
                    .into_iter()
                    .map(|(a, b)| (a.value, b.value))
                    .collect(),
                replace: replace
                    .into_iter()
                    .map(|(a, b)| (a.value, b.value))
                    .collect(),
                vars,
            });
        }
    }
    out
}

/// Names inside `{…}` in a template.
pub fn placeholders(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find('{') {
        let Some(len) = rest[start + 1..].find('}') else {
            break;
        };
        let name = &rest[start + 1..start + 1 + len];
        if !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            out.push(name.to_string());
        }
        rest = &rest[start + 1 + len..];
    }
    out
}
