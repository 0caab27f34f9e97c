//! One release line read and checked: its release.toml, its recipes, and for a derived line
//! its base loaded whole with this line's overrides applied.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::checks::{
    check_built, check_bundles, check_dependencies, check_flavours, check_patches,
};
use super::cycles::{needs, report_cycles};
use super::{Catalog, CatalogError, CatalogRoot};
use crate::arch::ArchTable;
use crate::diag::{Diagnostic, Diagnostics, SourceFile, did_you_mean};
use crate::recipe::release::{self, RELEASE_FILE};
use crate::recipe::{self, Recipe};

pub(super) fn load_line(
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
    if let Some(rel) = &release {
        check_flavours(&root, rel, &recipes, d);
    }
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
