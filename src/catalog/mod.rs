//! A catalog: the target table plus release lines of recipes, and the patches they name.
//!
//! The shipped catalog is embedded in the binary so an installed `rocforge` works anywhere;
//! `--recipes DIR` points at a directory tree of the same shape instead. The other inputs of a
//! plan sit beside the recipes: rocforge.lock ([`lock`]), rocforge.toml ([`config`]) and the
//! `--overlay` directories ([`Overlay`]), with what each targeted processor's Tensile logic is ([`logic`]).

pub mod config;
pub mod lock;
pub mod logic;
mod overlay;

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use include_dir::{Dir, include_dir};
use sha2::{Digest, Sha256};

use crate::arch::{ARCHES_FILE, ArchTable};
use crate::diag::{Diagnostic, Diagnostics, SourceFile, did_you_mean};
use crate::recipe::release::{self, RELEASE_FILE, Release};
use crate::recipe::{self, Recipe};

pub use overlay::Overlay;

static EMBEDDED_RECIPES: Dir<'static> = include_dir!("$CARGO_MANIFEST_DIR/recipes");
static EMBEDDED_PATCHES: Dir<'static> = include_dir!("$CARGO_MANIFEST_DIR/patches");
/// The shipped catalog's lockfile, embedded with it.
pub static EMBEDDED_LOCK: &str = include_str!("../../rocforge.lock");

/// Where recipe and patch files come from.
#[derive(Debug, Clone)]
pub enum CatalogRoot {
    Embedded,
    /// A `recipes/` directory; patches resolve from its sibling `patches/`.
    Dir(PathBuf),
}

impl CatalogRoot {
    fn patches_dir(recipes: &Path) -> PathBuf {
        recipes.parent().unwrap_or(Path::new(".")).join("patches")
    }

    /// The path a user sees for a file under `recipes/`.
    pub fn display(&self, rel: &str) -> String {
        match self {
            CatalogRoot::Embedded => format!("<built-in>/recipes/{rel}"),
            CatalogRoot::Dir(dir) => display_path(&dir.join(rel)),
        }
    }

    /// The directory holding recipes/, patches/, rocforge.toml and rocforge.lock; None for
    /// the built-in catalog.
    pub fn base_dir(&self) -> Option<PathBuf> {
        match self {
            CatalogRoot::Embedded => None,
            CatalogRoot::Dir(dir) => Some(
                dir.canonicalize()
                    .unwrap_or_else(|_| dir.clone())
                    .parent()
                    .map(Path::to_path_buf)
                    .unwrap_or_else(|| PathBuf::from(".")),
            ),
        }
    }

    /// The catalog's lockfile: rocforge.lock beside recipes/, or the embedded one.
    pub fn lockfile(&self) -> Result<lock::Lockfile, lock::LockError> {
        use lock::{LOCK_FILE, Lockfile};
        match self.base_dir() {
            None => Lockfile::parse("<built-in>/rocforge.lock", EMBEDDED_LOCK),
            Some(base) => Lockfile::read(&base.join(LOCK_FILE)),
        }
    }

    pub fn describe(&self) -> String {
        match self {
            CatalogRoot::Embedded => "the built-in catalog".into(),
            CatalogRoot::Dir(dir) => display_path(dir),
        }
    }

    pub fn read(&self, rel: &str) -> io::Result<String> {
        match self {
            CatalogRoot::Embedded => EMBEDDED_RECIPES
                .get_file(rel)
                .and_then(|f| f.contents_utf8())
                .map(str::to_owned)
                .ok_or_else(|| {
                    io::Error::new(io::ErrorKind::NotFound, "not in the built-in catalog")
                }),
            CatalogRoot::Dir(dir) => std::fs::read_to_string(dir.join(rel)),
        }
    }

    /// Release lines: directories with a release.toml, sorted by name.
    pub fn releases(&self) -> io::Result<Vec<String>> {
        let mut out = Vec::new();
        match self {
            CatalogRoot::Embedded => {
                for d in EMBEDDED_RECIPES.dirs() {
                    if d.get_file(d.path().join(RELEASE_FILE)).is_some() {
                        out.push(d.path().to_string_lossy().into_owned());
                    }
                }
            }
            CatalogRoot::Dir(dir) => {
                for entry in std::fs::read_dir(dir)? {
                    let entry = entry?;
                    if entry.path().join(RELEASE_FILE).is_file() {
                        out.push(entry.file_name().to_string_lossy().into_owned());
                    }
                }
            }
        }
        out.sort_by(|a, b| version_order(a, b));
        Ok(out)
    }

    /// The line used when none is named: the newest one that is no preview (its release.toml
    /// records what was built from it, `built = [...]`, and does not say `preview = true`), or
    /// the newest of all when every line is a preview. A release.toml that does not parse
    /// counts as no preview; loading that line reports its problems.
    pub fn default_release(&self) -> io::Result<Option<String>> {
        let releases = self.releases()?;
        let is_preview = |name: &str| {
            self.read(&format!("{name}/{RELEASE_FILE}"))
                .ok()
                .and_then(|text| text.parse::<toml::Table>().ok())
                .is_some_and(|t| {
                    let built = t
                        .get("built")
                        .and_then(toml::Value::as_array)
                        .is_some_and(|b| !b.is_empty());
                    t.get("preview")
                        .and_then(toml::Value::as_bool)
                        .unwrap_or(!built)
                })
        };
        Ok(releases
            .iter()
            .rev()
            .find(|r| !is_preview(r))
            .or(releases.last())
            .cloned())
    }

    /// Recipe files of a release line (every `.toml` beside release.toml), sorted.
    pub fn recipe_files(&self, release: &str) -> io::Result<Vec<String>> {
        let mut out = Vec::new();
        match self {
            CatalogRoot::Embedded => {
                if let Some(d) = EMBEDDED_RECIPES.get_dir(release) {
                    for f in d.files() {
                        out.push(
                            f.path()
                                .file_name()
                                .unwrap_or_default()
                                .to_string_lossy()
                                .into_owned(),
                        );
                    }
                }
            }
            CatalogRoot::Dir(dir) => {
                for entry in std::fs::read_dir(dir.join(release))? {
                    out.push(entry?.file_name().to_string_lossy().into_owned());
                }
            }
        }
        out.retain(|f| f.ends_with(".toml") && f != RELEASE_FILE);
        out.sort();
        Ok(out)
    }

    pub fn patch_display(&self, release: &str, component: &str, name: &str) -> String {
        match self {
            CatalogRoot::Embedded => format!("<built-in>/patches/{release}/{component}/{name}"),
            CatalogRoot::Dir(dir) => display_path(
                &Self::patches_dir(dir)
                    .join(release)
                    .join(component)
                    .join(name),
            ),
        }
    }

    pub fn read_patch(&self, release: &str, component: &str, name: &str) -> io::Result<Vec<u8>> {
        let rel = format!("{release}/{component}/{name}");
        match self {
            CatalogRoot::Embedded => EMBEDDED_PATCHES
                .get_file(&rel)
                .map(|f| f.contents().to_vec())
                .ok_or_else(|| {
                    io::Error::new(io::ErrorKind::NotFound, "not in the built-in catalog")
                }),
            CatalogRoot::Dir(dir) => std::fs::read(Self::patches_dir(dir).join(rel)),
        }
    }

    /// Patch files that exist for a component, for "did you mean" hints.
    pub fn patch_names(&self, release: &str, component: &str) -> Vec<String> {
        let rel = format!("{release}/{component}");
        let mut out: Vec<String> = match self {
            CatalogRoot::Embedded => EMBEDDED_PATCHES
                .get_dir(&rel)
                .map(|d| {
                    d.files()
                        .filter_map(|f| {
                            f.path()
                                .file_name()
                                .map(|n| n.to_string_lossy().into_owned())
                        })
                        .collect()
                })
                .unwrap_or_default(),
            CatalogRoot::Dir(dir) => std::fs::read_dir(Self::patches_dir(dir).join(rel))
                .map(|rd| {
                    rd.filter_map(|e| e.ok())
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .collect()
                })
                .unwrap_or_default(),
        };
        out.sort();
        out
    }
}

/// Orders release names so that `rocm-6.10` sorts after `rocm-6.9`.
fn version_order(a: &str, b: &str) -> std::cmp::Ordering {
    fn key(s: &str) -> Vec<(u64, String)> {
        s.split(['.', '-'])
            .map(|p| (p.parse().unwrap_or(0), p.to_string()))
            .collect()
    }
    key(a).cmp(&key(b))
}

/// Relative to the working directory when below it, so messages stay short and stable.
pub fn display_path(p: &Path) -> String {
    if let Ok(cwd) = std::env::current_dir()
        && let Ok(rel) = p.strip_prefix(&cwd)
    {
        return rel.display().to_string();
    }
    p.display().to_string()
}

/// One loaded, checked release line.
#[derive(Debug)]
pub struct Catalog {
    pub root: CatalogRoot,
    pub arches: ArchTable,
    pub release: Release,
    pub recipes: BTreeMap<String, Recipe>,
    /// `<name>-tests` of every component with a `[test]` table: built only when named, never
    /// by a whole-line build, and not listed among the line's components.
    pub test_recipes: BTreeMap<String, Recipe>,
    /// sha256 of every patch file the recipes name, keyed by (component, file name).
    pub patch_digests: BTreeMap<(String, String), String>,
}

#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error("cannot read the catalog at {path}: {source}")]
    Io { path: String, source: io::Error },
    #[error("no release line \"{name}\" in {root}")]
    UnknownRelease {
        name: String,
        root: String,
        known: Vec<String>,
    },
    #[error("{root} holds no release line (no recipes/<release>/release.toml)")]
    NoReleases { root: String },
    #[error("the catalog has {} problem(s)", .0.len())]
    Invalid(Diagnostics),
}

impl CatalogError {
    pub fn hint(&self) -> Option<String> {
        match self {
            CatalogError::UnknownRelease { name, known, .. } => Some(
                did_you_mean(name, known.iter().map(String::as_str))
                    .unwrap_or_else(|| format!("known release lines: {}", known.join(", "))),
            ),
            CatalogError::NoReleases { .. } | CatalogError::Io { .. } => {
                Some("--recipes names a recipes/ directory; `rocforge catalog export DIR` writes an example".into())
            }
            CatalogError::Invalid(_) => Some("run `rocforge check` to see every problem".into()),
        }
    }
}

pub fn load_arches(root: &CatalogRoot, d: &mut Diagnostics) -> Result<ArchTable, CatalogError> {
    let text = root.read(ARCHES_FILE).map_err(|source| CatalogError::Io {
        path: root.display(ARCHES_FILE),
        source,
    })?;
    let file = SourceFile::new(root.display(ARCHES_FILE), text);
    Ok(ArchTable::parse(&file, d))
}

impl Catalog {
    /// Loads one release line (when `release` is None, the newest line that is not a preview:
    /// see [`CatalogRoot::default_release`]), failing with every problem.
    pub fn load(root: CatalogRoot, release: Option<&str>) -> Result<Catalog, CatalogError> {
        let io_err = |source| CatalogError::Io {
            path: root.describe(),
            source,
        };
        let releases = root.releases().map_err(io_err)?;
        let name =
            match release {
                Some(r) if releases.iter().any(|x| x == r) => r.to_string(),
                Some(r) => {
                    return Err(CatalogError::UnknownRelease {
                        name: r.to_string(),
                        root: root.describe(),
                        known: releases,
                    });
                }
                None => root.default_release().map_err(io_err)?.ok_or_else(|| {
                    CatalogError::NoReleases {
                        root: root.describe(),
                    }
                })?,
            };
        let mut d = Diagnostics::default();
        let arches = load_arches(&root, &mut d)?;
        let catalog = load_line(root, arches, &name, &mut d)?;
        match catalog {
            Some(c) if d.is_empty() => Ok(c),
            _ => Err(CatalogError::Invalid(d)),
        }
    }

    /// Checks every release line; returns every problem found.
    pub fn check_all(root: &CatalogRoot) -> Result<(Vec<String>, Diagnostics), CatalogError> {
        let releases = root.releases().map_err(|source| CatalogError::Io {
            path: root.describe(),
            source,
        })?;
        if releases.is_empty() {
            return Err(CatalogError::NoReleases {
                root: root.describe(),
            });
        }
        let mut d = Diagnostics::default();
        let arches = load_arches(root, &mut d)?;
        for r in &releases {
            load_line(root.clone(), arches.clone(), r, &mut d)?;
        }
        Ok((releases, d))
    }

    pub fn get(&self, name: &str) -> Option<&Recipe> {
        self.recipes
            .get(name)
            .or_else(|| self.test_recipes.get(name))
    }

    /// Component names for a list of components and bundles, in order, without repeats.
    pub fn expand(&self, names: &[String]) -> Result<Vec<String>, Diagnostic> {
        let mut out: Vec<String> = Vec::new();
        for n in names {
            let members: Vec<String> = if self.get(n).is_some() {
                vec![n.clone()]
            } else if let Some(b) = self.release.bundles.get(n) {
                b.iter().map(|m| m.value.clone()).collect()
            } else {
                return Err(self.unknown_component(n));
            };
            for m in members {
                if !out.contains(&m) {
                    out.push(m);
                }
            }
        }
        Ok(out)
    }

    pub fn unknown_component(&self, name: &str) -> Diagnostic {
        if let Some(r) = name
            .strip_suffix(Recipe::TESTS_SUFFIX)
            .and_then(|c| self.recipes.get(c))
        {
            return Diagnostic::new(format!(
                "{} has no test client to build as {name}",
                r.name.value
            ))
            .hint(format!(
                "a <component>-tests artifact exists for a CMake recipe with a [test] table; {} has none",
                r.file.display
            ));
        }
        Diagnostic::new(format!(
            "no component \"{name}\" in release line {}",
            self.release.name
        ))
        .hint(
            did_you_mean(
                name,
                self.recipes
                    .keys()
                    .chain(self.release.bundles.keys())
                    .map(String::as_str),
            )
            .unwrap_or_else(|| {
                "`rocforge list` shows the components and bundles of this line".into()
            }),
        )
    }
}

fn load_line(
    root: CatalogRoot,
    arches: ArchTable,
    name: &str,
    d: &mut Diagnostics,
) -> Result<Option<Catalog>, CatalogError> {
    let before = d.len();
    let rel = format!("{name}/{RELEASE_FILE}");
    let text = root.read(&rel).map_err(|source| CatalogError::Io {
        path: root.display(&rel),
        source,
    })?;
    let release_file = SourceFile::new(root.display(&rel), text);
    let mut release = release::parse(&release_file, name, &arches, d);

    let files = root.recipe_files(name).map_err(|source| CatalogError::Io {
        path: root.display(name),
        source,
    })?;
    let base = release.as_ref().and_then(|r| r.base.clone());
    let (recipes, failed) = match &base {
        None => read_recipes(&root, name, &files, &arches, d),
        Some(base) => {
            let Some(base_line) = load_base(&root, &arches, &release_file, base, d)? else {
                return Ok(None);
            };
            let recipes = read_overrides(&root, name, &files, &base_line, &arches, d);
            if let Some(r) = &mut release
                && r.bundles.is_empty()
            {
                // The base's bundles, with only the components this line has.
                for (bundle, members) in &base_line.release.bundles {
                    let kept: Vec<_> = members
                        .iter()
                        .filter(|m| recipes.contains_key(m.as_str()))
                        .cloned()
                        .map(|m| reader_sp(m.value))
                        .collect();
                    if !kept.is_empty() {
                        r.bundles.insert(bundle.clone(), kept);
                    }
                }
            }
            (recipes, Vec::new())
        }
    };
    // A derived line's dependencies and bundles were checked in its base, and its missing
    // dependencies by read_overrides; its overrides' `depends` can still close a loop through
    // the base's recipes, which only the resolved graph shows.
    if base.is_none() {
        check_dependencies(&recipes, &failed, d);
        if let Some(rel) = &release {
            check_bundles(rel, &recipes, &failed, d);
        }
    } else {
        report_cycles(&recipes, d);
    }
    if let Some(rel) = &release {
        check_built(rel, &recipes, &failed, d);
    }
    let patch_digests = check_patches(&root, name, &recipes, d);
    let Some(release) = release else {
        return Ok(None);
    };
    let test_recipes = recipes
        .values()
        .filter_map(Recipe::tests_artifact)
        .map(|r| (r.name.value.clone(), r))
        .collect();
    Ok((d.len() == before).then_some(Catalog {
        root,
        arches,
        release,
        recipes,
        test_recipes,
        patch_digests,
    }))
}

/// A bundle member inherited from a base line: its span points into the base's release.toml,
/// which messages about this line never show.
fn reader_sp(value: String) -> crate::diag::reader::Sp<String> {
    crate::diag::reader::Sp::new(value, 0..0)
}

type Failed = Vec<(Arc<SourceFile>, recipe::Outline)>;

/// `<line>/<file>` of the catalog; None (reported) when it cannot be read.
fn read_recipe_file(
    root: &CatalogRoot,
    line: &str,
    f: &str,
    d: &mut Diagnostics,
) -> Option<Arc<SourceFile>> {
    let rel = format!("{line}/{f}");
    match root.read(&rel) {
        Ok(text) => Some(SourceFile::new(root.display(&rel), text)),
        Err(e) => {
            d.push(
                Diagnostic::new(format!("cannot read {}: {e}", root.display(&rel)))
                    .hint("recipes must be readable UTF-8 TOML files"),
            );
            None
        }
    }
}

fn read_recipes(
    root: &CatalogRoot,
    name: &str,
    files: &[String],
    arches: &ArchTable,
    d: &mut Diagnostics,
) -> (BTreeMap<String, Recipe>, Failed) {
    let mut recipes: BTreeMap<String, Recipe> = BTreeMap::new();
    let mut failed: Failed = Vec::new();
    for f in files {
        let Some(file) = read_recipe_file(root, name, f, d) else {
            continue;
        };
        let stem = f.trim_end_matches(".toml");
        let Some(r) = recipe::parse(&file, stem, arches, d) else {
            let outline = recipe::outline(&file, stem);
            failed.push((file, outline));
            continue;
        };
        if let Some(first) = recipes.get(r.name.as_str()) {
            d.push(
                Diagnostic::new(format!("component \"{}\" is defined twice", r.name.value))
                    .at(&r.file, r.name.span.clone(), "defined again here")
                    .related(&first.file, first.name.span.clone(), "first defined here")
                    .hint("each component has one recipe per release line; rename or remove one"),
            );
            continue;
        }
        recipes.insert(r.name.value.clone(), r);
    }
    (recipes, failed)
}

/// The line a `base = "…"` names, loaded whole; None (with diagnostics) when it is unknown,
/// has a base itself, or has problems of its own.
fn load_base(
    root: &CatalogRoot,
    arches: &ArchTable,
    release_file: &Arc<SourceFile>,
    base: &crate::diag::reader::Sp<String>,
    d: &mut Diagnostics,
) -> Result<Option<Catalog>, CatalogError> {
    let known = root.releases().map_err(|source| CatalogError::Io {
        path: root.describe(),
        source,
    })?;
    if !known.iter().any(|k| k == base.as_str()) {
        d.push(
            Diagnostic::new(format!("base line \"{}\" does not exist", base.value))
                .at(release_file, base.span.clone(), "no such release line")
                .hint(
                    did_you_mean(base, known.iter().map(String::as_str))
                        .unwrap_or_else(|| format!("release lines: {}", known.join(", "))),
                ),
        );
        return Ok(None);
    }
    let mut base_d = Diagnostics::default();
    let line = load_line(root.clone(), arches.clone(), base, &mut base_d)?;
    if !base_d.is_empty() {
        d.push(
            Diagnostic::new(format!(
                "base line \"{}\" has {} problem(s) of its own",
                base.value,
                base_d.len()
            ))
            .at(release_file, base.span.clone(), "based on it here")
            .hint(format!(
                "`rocforge check` lists them; fix {} first",
                base.value
            )),
        );
        return Ok(None);
    }
    let Some(line) = line else {
        return Ok(None);
    };
    if let Some(grand) = &line.release.base {
        d.push(
            Diagnostic::new(format!(
                "base line \"{}\" is itself based on \"{}\"",
                base.value, grand.value
            ))
            .at(release_file, base.span.clone(), "a derived line")
            .hint(format!(
                "base this line on {} directly: a line overrides one base, never a chain",
                grand.value
            )),
        );
        return Ok(None);
    }
    Ok(Some(line))
}

/// A derived line's components: each file overrides the base component of the same name.
fn read_overrides(
    root: &CatalogRoot,
    name: &str,
    files: &[String],
    base: &Catalog,
    arches: &ArchTable,
    d: &mut Diagnostics,
) -> BTreeMap<String, Recipe> {
    let base_name = base.release.name.as_str();
    let mut recipes = BTreeMap::new();
    for f in files {
        let Some(file) = read_recipe_file(root, name, f, d) else {
            continue;
        };
        let stem = f.trim_end_matches(".toml");
        let Some(base_recipe) = base.recipes.get(stem) else {
            d.push(
                Diagnostic::new(format!(
                    "{} overrides \"{stem}\", which {base_name} does not have",
                    file.display
                ))
                .in_file(&file)
                .hint(
                    did_you_mean(stem, base.recipes.keys().map(String::as_str))
                        .map(|h| format!("{h} (a file is named after the component it overrides)"))
                        .unwrap_or_else(|| {
                            format!("a file here is named after a component of {base_name}: `rocforge --release {base_name} list` shows them")
                        }),
                ),
            );
            continue;
        };
        let Some(o) = recipe::parse_override(&file, stem, base_name, arches, d) else {
            continue;
        };
        let before = d.len();
        o.check_against(base_recipe, base_name, d);
        if d.len() > before {
            continue;
        }
        recipes.insert(
            stem.to_string(),
            base_recipe.clone().with_override(&o, base_name),
        );
    }
    // A dependency of an overridden component must be in this line too: its build would
    // otherwise take a dependency this line does not build.
    for r in recipes.values() {
        for dep in r.all_depends() {
            if !recipes.contains_key(dep.as_str()) {
                let o = r.overrides.as_ref().unwrap_or(&r.file);
                let needs = needs(r.is_build_only(dep), &r.name, &format!("\"{}\"", dep.value));
                d.push(
                    Diagnostic::new(format!(
                        "{needs} ({}), which line {name} does not have",
                        r.file.display
                    ))
                    .in_file(o)
                    .hint(format!(
                        "add recipes/{name}/{}.toml with its [source] for this line",
                        dep.value
                    )),
                );
            }
        }
    }
    recipes
}

/// Every bundle names components of the line, and no bundle shadows a component.
fn check_bundles(
    release: &Release,
    recipes: &BTreeMap<String, Recipe>,
    failed: &[(Arc<SourceFile>, recipe::Outline)],
    d: &mut Diagnostics,
) {
    let known = |n: &str| {
        recipes.contains_key(n)
            || failed
                .iter()
                .any(|(_, o)| o.stem == n || o.name.as_ref().is_some_and(|x| x.value == n))
    };
    for (name, members) in &release.bundles {
        if recipes.contains_key(name) {
            d.push(
                Diagnostic::new(format!("bundle \"{name}\" has the name of a component"))
                    .at(
                        &release.file,
                        release.bundle_spans[name].clone(),
                        "also a component",
                    )
                    .hint("give the bundle another name"),
            );
        }
        for m in members {
            if !known(m) {
                d.push(
                    Diagnostic::new(format!(
                        "bundle \"{name}\" names unknown component \"{}\"",
                        m.value
                    ))
                    .at(
                        &release.file,
                        m.span.clone(),
                        "no recipe with this name in the release line",
                    )
                    .maybe_hint(did_you_mean(m, recipes.keys().map(String::as_str))),
                );
            }
        }
    }
}

/// What `built` records names components of this line: a record of something the line does
/// not hold is a stale record, and the default line is chosen by it.
fn check_built(
    release: &Release,
    recipes: &BTreeMap<String, Recipe>,
    failed: &[(Arc<SourceFile>, recipe::Outline)],
    d: &mut Diagnostics,
) {
    for b in &release.built {
        let known = recipes.contains_key(b.as_str())
            || failed.iter().any(|(_, o)| {
                o.stem == b.value || o.name.as_ref().is_some_and(|x| x.value == b.value)
            });
        if !known {
            d.push(
                Diagnostic::new(format!(
                    "built names unknown component \"{}\" of release line \"{}\"",
                    b.value, release.name
                ))
                .at(
                    &release.file,
                    b.span.clone(),
                    "no recipe with this name in the release line",
                )
                .maybe_hint(did_you_mean(b, recipes.keys().map(String::as_str))),
            );
        }
    }
}

/// `failed` holds recipes that did not pass their own checks (already reported): their names
/// still exist for dependents, and where their own dependencies point is still checked.
fn check_dependencies(
    recipes: &BTreeMap<String, Recipe>,
    failed: &[(Arc<SourceFile>, recipe::Outline)],
    d: &mut Diagnostics,
) {
    let failed_names: BTreeSet<&str> = failed
        .iter()
        .flat_map(|(_, o)| [Some(o.stem.as_str()), o.name.as_ref().map(|n| n.as_str())])
        .flatten()
        .collect();
    let candidates: BTreeSet<&str> = recipes
        .keys()
        .map(String::as_str)
        .chain(failed_names.iter().copied())
        .collect();
    let good = recipes.values().flat_map(|r| {
        [
            (&r.file, Some(&r.name), &r.depends, false),
            (&r.file, Some(&r.name), &r.build_depends, true),
        ]
    });
    let bad = failed.iter().flat_map(|(f, o)| {
        [
            (f, o.name.as_ref(), &o.depends, false),
            (f, o.name.as_ref(), &o.build_depends, true),
        ]
    });
    for (file, name, depends, build_only) in good.chain(bad) {
        let who = name.map_or("this recipe", |n| n.as_str());
        for (i, dep) in depends.iter().enumerate() {
            if depends[..i].iter().any(|p| p.value == dep.value) {
                continue; // listed twice: reported by the recipe check, once is enough here
            }
            let known = recipes.contains_key(dep.as_str()) || failed_names.contains(dep.as_str());
            // Self-dependencies and invalid names are reported by the recipe check.
            if !known
                && Some(dep.as_str()) != name.map(|n| n.as_str())
                && recipe::is_component_name(dep)
            {
                d.push(
                    Diagnostic::new(needs(build_only, who, &format!("unknown component \"{}\"", dep.value)))
                        .at(file, dep.span.clone(), "no recipe with this name in the release line")
                        .hint(did_you_mean(dep, candidates.iter().copied().filter(|c| Some(*c) != name.map(|n| n.as_str()))).unwrap_or_else(|| {
                            "add a recipe for it, or remove it (the builder image provides the toolchain and HIP)".into()
                        })),
                );
            }
        }
    }
    report_cycles(recipes, d);
}

/// Every dependency cycle of a line's resolved recipes (a derived line's after its overrides),
/// each edge shown where it is written: an override's `depends` or the base recipe's.
fn report_cycles(recipes: &BTreeMap<String, Recipe>, d: &mut Diagnostics) {
    for cycle in find_cycles(recipes) {
        let edge = |from: &str, to: &str| {
            let r = &recipes[from];
            let (file, span) = r
                .dependency_at(to)
                .map(|(f, x)| (f.clone(), x.span.clone()))
                .unwrap_or_else(|| (r.file.clone(), 0..0));
            (file, span, needs(r.is_build_only(to), from, to))
        };
        let (file, span, label) = edge(&cycle[0], &cycle[1]);
        let mut diag = Diagnostic::new(format!("dependency cycle: {}", cycle.join(" -> ")))
            .at(&file, span, label);
        for w in cycle[1..].windows(2) {
            let (f, s, label) = edge(&w[0], &w[1]);
            diag = diag.related(&f, s, label);
        }
        d.push(diag.hint(
            "a component cannot need itself, even indirectly; remove one of these dependencies",
        ));
    }
}

/// "a depends on b", or "a needs b to build" for a build-only dependency.
fn needs(build_only: bool, who: &str, what: &str) -> String {
    if build_only {
        format!("{who} needs {what} to build")
    } else {
        format!("{who} depends on {what}")
    }
}

/// Each elementary cycle reported once, starting at its smallest name (deterministic output).
pub fn find_cycles(recipes: &BTreeMap<String, Recipe>) -> Vec<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Active,
        Done,
    }
    let names: Vec<&str> = recipes.keys().map(String::as_str).collect();
    let index: BTreeMap<&str, usize> = names.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    let edges: Vec<Vec<usize>> = names
        .iter()
        .map(|n| {
            recipes[*n]
                .all_depends()
                .filter_map(|d| index.get(d.as_str()).copied())
                .collect()
        })
        .collect();
    let mut mark = vec![Mark::New; names.len()];
    let mut seen: BTreeSet<Vec<String>> = BTreeSet::new();
    let mut out = Vec::new();
    for start in 0..names.len() {
        if mark[start] != Mark::New {
            continue;
        }
        // Iterative DFS: deep graphs must not overflow the stack.
        let mut stack: Vec<(usize, usize)> = vec![(start, 0)];
        mark[start] = Mark::Active;
        while let Some(&mut (node, ref mut next)) = stack.last_mut() {
            if let Some(&child) = edges[node].get(*next) {
                *next += 1;
                match mark[child] {
                    Mark::New => {
                        mark[child] = Mark::Active;
                        stack.push((child, 0));
                    }
                    Mark::Active => {
                        let pos = stack.iter().position(|(n, _)| *n == child).unwrap_or(0);
                        let mut cycle: Vec<String> = stack[pos..]
                            .iter()
                            .map(|(n, _)| names[*n].to_string())
                            .collect();
                        let min = cycle
                            .iter()
                            .enumerate()
                            .min_by_key(|(_, n)| n.as_str())
                            .map_or(0, |(i, _)| i);
                        cycle.rotate_left(min);
                        cycle.push(cycle[0].clone());
                        if seen.insert(cycle.clone()) {
                            out.push(cycle);
                        }
                    }
                    Mark::Done => {}
                }
            } else {
                mark[node] = Mark::Done;
                stack.pop();
            }
        }
    }
    out
}

fn check_patches(
    root: &CatalogRoot,
    release: &str,
    recipes: &BTreeMap<String, Recipe>,
    d: &mut Diagnostics,
) -> BTreeMap<(String, String), String> {
    let mut digests = BTreeMap::new();
    for r in recipes.values() {
        let release = r.patches.release.as_deref().unwrap_or(release);
        let file = r.patches.file.as_ref().unwrap_or(&r.file);
        for p in r.patches.every() {
            if p.contains('/') || !p.ends_with(".patch") {
                continue; // already reported by the recipe check
            }
            match root.read_patch(release, &r.name, p) {
                Ok(bytes) => {
                    digests.insert(
                        (r.name.value.clone(), p.value.clone()),
                        hex::encode(Sha256::digest(&bytes)),
                    );
                }
                Err(_) => {
                    let existing = root.patch_names(release, &r.name);
                    let hint =
                        did_you_mean(p, existing.iter().map(String::as_str)).unwrap_or_else(|| {
                            format!(
                                "create {} or remove it from [patches]",
                                root.patch_display(release, &r.name, p)
                            )
                        });
                    d.push(
                        Diagnostic::new(format!(
                            "patch file not found: {}",
                            root.patch_display(release, &r.name, p)
                        ))
                        .at(file, p.span.clone(), "no such file")
                        .hint(hint),
                    );
                }
            }
        }
    }
    digests
}

#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error("{path} already exists and is not empty")]
    NotEmpty { path: String },
    #[error("cannot write {path}: {source}")]
    Io { path: String, source: io::Error },
}

/// Writes the built-in catalog to `dest` (recipes/ and patches/), atomically: a crash leaves
/// either nothing or the whole tree.
pub fn export_embedded(dest: &Path) -> Result<Vec<PathBuf>, ExportError> {
    let io_err = |path: &Path| {
        let path = display_path(path);
        move |source| ExportError::Io { path, source }
    };
    if dest.exists()
        && std::fs::read_dir(dest)
            .map_err(io_err(dest))?
            .next()
            .is_some()
    {
        return Err(ExportError::NotEmpty {
            path: display_path(dest),
        });
    }
    let staged = crate::fsutil::Staged::dir_beside(dest).map_err(io_err(dest))?;
    let tmp = staged.path().to_path_buf();
    let mut written = Vec::new();
    for (sub, dir) in [
        ("recipes", &EMBEDDED_RECIPES),
        ("patches", &EMBEDDED_PATCHES),
    ] {
        write_dir(dir, &tmp.join(sub), &mut written).map_err(io_err(&tmp))?;
    }
    staged.commit_over_empty().map_err(io_err(dest))?;
    Ok(written
        .into_iter()
        .map(|p| dest.join(p.strip_prefix(&tmp).unwrap_or(&p)))
        .collect())
}

/// A `path` source of the built-in catalog: the directory `recipes/<release>/<path>` compiled
/// into the binary, so a line's own programs build from any directory as its recipes do.
/// `..` steps out of the line's directory as on disk (a based line's recipe names its base
/// line's directory so); nothing leaves `recipes/`.
pub fn embedded_path_source(release: &str, path: &str) -> Option<&'static Dir<'static>> {
    let mut rel = PathBuf::new();
    for c in Path::new(release).join(path).components() {
        match c {
            std::path::Component::Normal(n) => rel.push(n),
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir if rel.pop() => {}
            _ => return None,
        }
    }
    EMBEDDED_RECIPES.get_dir(rel)
}

/// Writes a directory of the built-in catalog to `dest` (files mode 0644, as `catalog export`).
pub fn write_embedded(dir: &Dir<'_>, dest: &Path) -> io::Result<()> {
    write_dir(dir, dest, &mut Vec::new())
}

fn write_dir(dir: &Dir<'_>, dest: &Path, written: &mut Vec<PathBuf>) -> io::Result<()> {
    std::fs::create_dir_all(dest)?;
    for f in dir.files() {
        let name = f.path().file_name().unwrap_or_default();
        let p = dest.join(name);
        std::fs::write(&p, f.contents())?;
        written.push(p);
    }
    for sub in dir.dirs() {
        let name = sub.path().file_name().unwrap_or_default();
        write_dir(sub, &dest.join(name), written)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(recipes: &Path, name: &str, preview: &str) {
        let dir = recipes.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join(RELEASE_FILE),
            format!("name = \"{name}\"\nversion = \"1\"\nimage = \"x\"\nprefix = \"/opt/rocm\"\n{preview}"),
        )
        .unwrap();
    }

    #[test]
    fn the_default_line_is_the_newest_that_has_been_built() {
        let dir = tempfile::tempdir().unwrap();
        let recipes = dir.path().join("recipes");
        line(&recipes, "rocm-6.9", "built = [\"a\"]\n");
        line(&recipes, "rocm-6.10", "preview = false\nbuilt = [\"a\"]\n");
        line(&recipes, "rocm-7.14.0", "preview = true\n");
        // Nothing recorded as built: a preview, though it does not say so.
        line(&recipes, "rocm-7.15", "");
        line(&recipes, "rocm-7.16", "built = []\n");
        let root = CatalogRoot::Dir(recipes.clone());
        assert_eq!(
            root.default_release().unwrap().as_deref(),
            Some("rocm-6.10")
        );
        // Every line a preview: the newest of them.
        line(&recipes, "rocm-6.9", "preview = true\nbuilt = [\"a\"]\n");
        line(&recipes, "rocm-6.10", "preview = true\n");
        assert_eq!(
            root.default_release().unwrap().as_deref(),
            Some("rocm-7.16")
        );
        // An unreadable release.toml is no preview; loading that line reports it.
        line(&recipes, "rocm-6.10", "preview = \n");
        assert_eq!(
            root.default_release().unwrap().as_deref(),
            Some("rocm-6.10")
        );
    }

    #[test]
    fn the_shipped_default_line_is_one_that_has_been_built() {
        let name = CatalogRoot::Embedded.default_release().unwrap().unwrap();
        assert_eq!(name, "debian-6.4");
        let c = Catalog::load(CatalogRoot::Embedded, None).unwrap();
        assert!(!c.release.preview);
        assert_eq!(c.release.built.len(), 19, "{:?}", c.release.built);
        // The lines never built are previews, and a line may be based on one (debian-6.4's
        // recipes are rocm-6.4.4's).
        for preview in ["rocm-6.4.4", "rocm-7.14.0"] {
            let c = Catalog::load(CatalogRoot::Embedded, Some(preview)).unwrap();
            assert!(c.release.preview, "{preview}");
            assert!(c.release.built.is_empty(), "{preview}");
        }
    }
}
