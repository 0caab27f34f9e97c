//! A component file of a line whose release.toml names a `base` line: what it may change, and
//! the base line's recipe with it applied.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::arch::ArchTable;
use crate::diag::reader::{self, Sp, TableReader};
use crate::diag::{Diagnostic, Diagnostics, SourceFile};

use super::build::{BuildSystem, cmake_var};
use super::checks::check_version;
use super::depends::{BUILD_DEPENDS, check_depends};
use super::inputs::{ExtraInput, read_inputs};
use super::patches::{Patches, read_patches};
use super::resources::{ResourceHints, read_resource_hints};
use super::series::{Series, read_series};
use super::source::{Source, read_source};
use super::{Recipe, gpu_code, read_license_files};

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
    /// `[build] image`: the builder image flavour this line builds the component in.
    pub image: Option<super::build::Flavour>,
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
pub fn parse_override(
    file: &Arc<SourceFile>,
    component: &str,
    base_line: &str,
    arches: &ArchTable,
    d: &mut Diagnostics,
) -> Option<Override> {
    let before = d.len();
    let doc = reader::parse(file, d)?;
    refuse_other_keys(file, &doc, base_line, d);
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
    let build = r
        .opt_table("build", d)
        .map(|b| read_build_override(b, d))
        .unwrap_or_default();
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
        args: build.args,
        env: build.env,
        pre_configure: build.pre_configure,
        post_install: build.post_install,
        script: build.script,
        device_code: build.device_code,
        image: build.image,
        inputs,
        tests,
        resources,
        gpu_code,
        file: file.clone(),
    })
}

/// Keys of the base line's recipe are refused with the override's own hint (not `finish`'s).
fn refuse_other_keys(
    file: &Arc<SourceFile>,
    doc: &toml::Spanned<toml::de::DeTable<'_>>,
    base_line: &str,
    d: &mut Diagnostics,
) {
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
}

/// What an override's `[build]` may change (see the fields of the same names in [`Override`]).
#[derive(Default)]
struct BuildOverride {
    args: Vec<String>,
    env: BTreeMap<String, String>,
    pre_configure: Option<String>,
    post_install: Option<String>,
    script: Option<Sp<String>>,
    device_code: Option<Sp<bool>>,
    image: Option<super::build::Flavour>,
}

fn read_build_override(mut b: TableReader<'_, '_>, d: &mut Diagnostics) -> BuildOverride {
    let file = b.file();
    let mut args = Vec::new();
    for a in b.opt_str_list("args", d).unwrap_or_default() {
        if !a.starts_with("-D") || !a.contains('=') {
            d.push(
                Diagnostic::new(format!(
                    "override argument \"{}\" does not set a CMake variable",
                    a.value
                ))
                .at(file, a.span.clone(), "not -DVAR=VALUE")
                .hint(
                    "a line sets CMake variables (-DVAR=VALUE), replacing the base's value of VAR",
                ),
            );
        }
        args.push(a.value);
    }
    let build = BuildOverride {
        args,
        env: b
            .opt_str_map("env", d)
            .map(|m| m.into_iter().map(|(k, v)| (k, v.value)).collect())
            .unwrap_or_default(),
        pre_configure: b.opt_str("pre-configure", d).map(|p| p.value),
        post_install: b.opt_str("post-install", d).map(|p| p.value),
        script: b.opt_str("script", d),
        device_code: b.opt_bool("device-code", d),
        image: super::build::read_flavour(&mut b, d),
    };
    b.finish(d);
    build
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
        self.apply_build_override(o);
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

    /// The override's `[build]`: CMake arguments replaced by variable (a `tests = false` line
    /// keeps the base's test switches for `<name>-tests`), env added, hooks and script replaced.
    fn apply_build_override(&mut self, o: &Override) {
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
        if o.image.is_some() {
            self.build.image = o.image.clone();
        }
    }
}
