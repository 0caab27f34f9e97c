//! Cross-file checks of a line: bundles and `built` name its components, dependencies name
//! recipes that exist, and the patches recipes name are there.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use sha2::{Digest, Sha256};

use super::CatalogRoot;
use super::cycles::{needs, report_cycles};
use crate::diag::{Diagnostic, Diagnostics, SourceFile, did_you_mean};
use crate::recipe::release::Release;
use crate::recipe::{self, Recipe};

/// Every bundle names components of the line, and no bundle shadows a component.
pub(super) fn check_bundles(
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
pub(super) fn check_built(
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
pub(super) fn check_dependencies(
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

pub(super) fn check_patches(
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

/// Every builder image flavour a recipe names has its Containerfile, built FROM the line's
/// builder image: what the flavour adds is all that differs from the image the others build in.
pub(super) fn check_flavours(
    root: &CatalogRoot,
    release: &Release,
    recipes: &BTreeMap<String, Recipe>,
    d: &mut Diagnostics,
) {
    use super::containers::{find, flavour_file_name, from_of};
    for r in recipes.values() {
        let Some(f) = &r.build.image else { continue };
        let file = flavour_file_name(&release.name, f.as_str());
        let Some(found) = find(root, &file) else {
            d.push(
                Diagnostic::new(format!(
                    "{}: no containers/{file} for the builder image flavour \"{}\"",
                    r.name.value,
                    f.as_str()
                ))
                .at(&f.file, f.name.span.clone(), "flavour named here")
                .hint(format!(
                    "write containers/{file} beside the recipes, FROM {}, adding what this build needs",
                    release.image
                )),
            );
            continue;
        };
        let from = from_of(&found.text);
        // Relative, as the recipes are shown: where the catalog lies is the user's to know.
        let shown = match found.path {
            Some(_) => format!("containers/{file}"),
            None => found.shown.clone(),
        };
        if from.as_deref() != Some(release.image.as_str()) {
            d.push(
                Diagnostic::new(format!(
                    "{}: {} builds FROM {}, not the line's builder image {}",
                    r.name.value,
                    shown,
                    from.as_deref().unwrap_or("nothing"),
                    release.image
                ))
                .at(&f.file, f.name.span.clone(), "flavour named here")
                .hint(format!(
                    "a flavour is the line's image plus what it adds: start it with FROM {}",
                    release.image
                )),
            );
        }
    }
}
