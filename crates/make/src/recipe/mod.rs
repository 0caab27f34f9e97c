//! Component recipes: read as written (with spans) and checked into a resolved [`Recipe`].
//!
//! Only a resolved recipe reaches the planner. Checks that need one file alone live here;
//! checks across files (duplicates, unknown dependencies, cycles, patch files) live in the
//! catalog.

pub mod derive_vars;
pub mod gpu_code;
pub mod release;

mod build;
mod checks;
mod depends;
mod derive;
mod inputs;
mod overrides;
mod patches;
mod resources;
mod series;
mod source;
mod test;
mod tests_artifact;

use std::sync::Arc;

use crate::arch::ArchTable;
use crate::diag::reader::{self, Sp, TableReader};
use crate::diag::{Diagnostic, Diagnostics, SourceFile};

pub use build::{Build, BuildSystem, Flavour};
pub use checks::is_inner_path;
pub use depends::BUILD_DEPENDS;
pub use derive::{Derive, placeholders};
pub use inputs::{ExtraInput, is_input_name};
pub use overrides::{OVERRIDE_KEYS, Override, parse_override};
pub use patches::Patches;
pub use resources::{ResourceHints, Resources};
pub use series::Series;
pub use source::{GitRef, Source};
pub use test::{Test, TestKind};

use build::read_build;
use checks::{check_version, path_problem};
use depends::check_depends;
use derive::read_derive;
use inputs::read_inputs;
use patches::read_patches;
use resources::read_resources;
use series::read_series;
use source::read_source;
use test::read_test;

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

pub use crate::ids::is_component_name;

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
    let head = read_head(&mut r, file, stem, d);
    let sections = read_sections(&mut r, &doc, arches, d);
    r.finish(d);
    if sections.build.as_ref().is_some_and(|b| !b.device_code) {
        check_source_serves_every_target(file, &sections, d);
    }
    d.sort_from(errors_before);

    if d.len() > errors_before {
        return None;
    }
    Some(Recipe {
        name: head.name?,
        version: head.version?.value,
        summary: head.summary?.value,
        license: head.license?.value,
        license_files: head.license_files,
        homepage: head.homepage.map(|h| h.value),
        depends: head.depends,
        build_depends: head.build_depends,
        source: sections.source?,
        patches: sections.patches,
        build: sections.build?,
        test: sections.test,
        tests_apart: false,
        test_args: Vec::new(),
        test_arch_vars: Vec::new(),
        resources: sections.resources,
        inputs: sections.inputs,
        derive: sections.derive,
        series: sections.series,
        gpu_code: match sections.coverage {
            Some(c) => c?,
            None => gpu_code::GpuCode::AheadOfTime,
        },
        file: file.clone(),
        overrides: None,
        depends_file: None,
        build_depends_file: None,
    })
}

/// The keys of a recipe's top table: what the component is and what it needs.
struct Head {
    name: Option<Sp<String>>,
    version: Option<Sp<String>>,
    summary: Option<Sp<String>>,
    license: Option<Sp<String>>,
    license_files: Vec<Sp<String>>,
    homepage: Option<Sp<String>>,
    depends: Vec<Sp<String>>,
    build_depends: Vec<Sp<String>>,
}

fn read_head(
    r: &mut TableReader<'_, '_>,
    file: &Arc<SourceFile>,
    stem: &str,
    d: &mut Diagnostics,
) -> Head {
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
    let license_files = read_license_files(r, file, d).unwrap_or_default();
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
    Head {
        name,
        version,
        summary,
        license,
        license_files,
        homepage,
        depends,
        build_depends,
    }
}

/// A recipe's tables, each read by the module named after it.
struct Sections {
    source: Option<Source>,
    patches: Patches,
    build: Option<Build>,
    test: Option<Test>,
    resources: Resources,
    inputs: Vec<ExtraInput>,
    derive: Vec<Derive>,
    series: Vec<Series>,
    /// None: no `[coverage]`; `Some(None)`: one with problems (reported).
    coverage: Option<Option<gpu_code::GpuCode>>,
}

fn read_sections(
    r: &mut TableReader<'_, '_>,
    doc: &toml::Spanned<toml::de::DeTable<'_>>,
    arches: &ArchTable,
    d: &mut Diagnostics,
) -> Sections {
    let source = match r.opt_table("source", d) {
        Some(t) => read_source(t, d),
        None => {
            if !has_key(doc, "source") {
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
            if !has_key(doc, "build") {
                r.missing(d, "build", "add a [build] table, e.g. system = \"cmake\" and arch-vars = [\"GPU_TARGETS\"]");
            }
            None
        }
    };
    Sections {
        source,
        patches,
        build,
        test: r.opt_table("test", d).and_then(|t| read_test(t, d)),
        resources: r
            .opt_table("resources", d)
            .map(|t| read_resources(t, d))
            .unwrap_or_default(),
        inputs: r
            .opt_table_array("inputs", d)
            .map(|ts| read_inputs(ts, d))
            .unwrap_or_default(),
        derive: r
            .opt_table_array("derive", d)
            .map(|ts| read_derive(ts, arches, d))
            .unwrap_or_default(),
        series: r
            .opt_table_array("series", d)
            .map(|ts| read_series(ts, d))
            .unwrap_or_default(),
        coverage: r
            .opt_table("coverage", d)
            .map(|t| gpu_code::read(t, arches, d)),
    }
}

/// A component without device code is built once for every target set: nothing of its source
/// may depend on the targets.
fn check_source_serves_every_target(
    file: &Arc<SourceFile>,
    sections: &Sections,
    d: &mut Diagnostics,
) {
    let per_target = sections
        .patches
        .per_arch
        .iter()
        .next()
        .map(|(a, _)| format!("[patches] {a}"))
        .or_else(|| sections.derive.first().map(|_| "[[derive]]".to_string()));
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

    /// The file a user edits to change this component in its line.
    pub fn display_file(&self) -> &str {
        self.overrides
            .as_ref()
            .map_or(self.file.display.as_str(), |f| f.display.as_str())
    }
}

fn has_key(doc: &toml::Spanned<toml::de::DeTable<'_>>, key: &str) -> bool {
    doc.get_ref().contains_key(key)
}
