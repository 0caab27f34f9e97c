//! `rocforge check --sources`: fetch each component's pristine source once, then apply its
//! patch series and derivations for every target set the release line builds, and say per
//! component whether they apply, conflict (and where) or the source cannot be reached.
//!
//! Nothing here writes to the source cache: the trees are scratch copies that are removed when
//! the check ends, so a check never leaves a half-patched tree where a build would find it.

// A failed step short-circuits with the row's own `Outcome`; it is built once per row.
#![allow(clippy::result_large_err)]

use crate::diag::Hint;
use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use super::derive;
use super::pairing::{self, Found, Want};
use super::patch::{self, PatchError};
use super::prepare::{self, SourceError, Sources};
use super::resolved::Resolved;
use crate::arch::TargetId;
use crate::catalog::lock::Lockfile;
use crate::recipe::Recipe;

/// The result of checking one component for one set of targets.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct SourceCheck {
    pub component: crate::ids::ComponentName,
    /// The processors whose series and derivations were applied together.
    pub arches: Vec<String>,
    #[serde(flatten)]
    pub outcome: Outcome,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(tag = "result", rename_all = "kebab-case")]
pub enum Outcome {
    /// Every patch applied and every derivation found its source.
    Applies { patches: usize, derived: usize },
    /// A patch does not apply; `hunk` and `line` locate the first mismatch when known.
    Conflict {
        patch: String,
        file: Option<String>,
        hunk: Option<String>,
        line: Option<usize>,
        message: String,
        hint: String,
    },
    /// A derivation could not run (its source path moved, or upstream now ships the files).
    DeriveFails { message: String, hint: String },
    /// The recipe's version is not the one the patched source declares.
    VersionDiffers { message: String, hint: String },
    /// The source asks for a version of a dependency (`find_package(Tensile 4.43.0 EXACT)`)
    /// that the dependency's pinned source is not.
    DependencyVersion {
        dependency: String,
        wanted: String,
        found: String,
        message: String,
        hint: String,
    },
    /// The source could not be fetched (network, mirror, missing tag, checksum).
    Unreachable { message: String, hint: String },
}

impl Outcome {
    pub fn ok(&self) -> bool {
        matches!(self, Outcome::Applies { .. })
    }
}

/// The target sets a component is checked for: all of the line's targets together (what a
/// multi-target build applies), then each processor alone when it has patches of its own, since
/// a per-arch series must also apply without the other processors' patches.
pub fn target_sets(recipe: &Recipe, targets: &[TargetId]) -> Vec<Vec<TargetId>> {
    let mut sets = vec![targets.to_vec()];
    if targets.len() > 1 {
        for t in targets {
            if recipe
                .patches
                .per_arch
                .get(&t.arch)
                .is_some_and(|l| !l.is_empty())
            {
                sets.push(vec![t.clone()]);
            }
        }
    }
    sets
}

/// The versions dependencies' sources declare, each read once per check from its patched
/// source in a scratch directory; None when it cannot be fetched or told (its own row says why).
#[derive(Default)]
pub struct DependencyVersions {
    found: BTreeMap<(String, String), Option<Found>>,
}

impl DependencyVersions {
    fn get(
        &mut self,
        s: &Sources<'_>,
        lock: &Lockfile,
        want: &Want,
        targets: &[TargetId],
        scratch: &Path,
    ) -> Option<Found> {
        let key = (want.dependency.clone(), want.package.clone());
        if let Some(f) = self.found.get(&key) {
            return f.clone();
        }
        let found = s.catalog.get(&want.dependency).and_then(|dep| {
            let dir = scratch.join(format!("dependency-{}", want.dependency));
            std::fs::create_dir_all(&dir).ok()?;
            let read = (|| {
                let resolved = Resolved::of(s.catalog, lock, dep).ok()?;
                prepare::fetch_pristine(s, dep, &resolved, targets, &dir).ok()?;
                let series = prepare::patch_series(s, dep, &resolved, targets).ok()?;
                if !series.is_empty() {
                    patch::apply_series(&dir, &series).ok()?;
                }
                pairing::found(&dir, &want.package)
            })();
            let _ = crate::fsutil::remove_tree(&dir);
            read
        });
        self.found.insert(key, found.clone());
        found
    }
}

/// Checks one component, its source pinned as `lock` says. `scratch` is an empty directory the
/// caller owns and removes.
pub fn check_component(
    s: &Sources<'_>,
    lock: &Lockfile,
    recipe: &Recipe,
    targets: &[TargetId],
    scratch: &Path,
    versions: &mut DependencyVersions,
) -> Vec<SourceCheck> {
    let component = recipe.name.value.clone();
    let sets = target_sets(recipe, targets);
    let arch_names =
        |set: &[TargetId]| -> Vec<String> { set.iter().map(|t| t.arch.clone()).collect() };
    let pristine = scratch.join("pristine");
    let fetched = std::fs::create_dir_all(&pristine)
        .map_err(|source| SourceError::Io {
            component: component.clone(),
            path: pristine.display().to_string(),
            source,
        })
        .and_then(|()| Resolved::of(s.catalog, lock, recipe))
        .and_then(|resolved| {
            prepare::fetch_pristine(s, recipe, &resolved, targets, &pristine).map(|()| resolved)
        });
    let resolved = match fetched {
        Ok(resolved) => resolved,
        Err(e) => {
            let outcome = unreachable_or(e);
            return sets
                .iter()
                .map(|set| SourceCheck {
                    component: crate::ids::ComponentName::checked(&component),
                    arches: arch_names(set),
                    outcome: outcome.clone(),
                })
                .collect();
        }
    };
    sets.iter()
        .enumerate()
        .map(|(i, set)| SourceCheck {
            component: crate::ids::ComponentName::checked(&component),
            arches: arch_names(set),
            outcome: apply_set(
                s,
                recipe,
                &resolved,
                set,
                &pristine,
                &scratch.join(format!("set-{i}")),
                &mut |w: &Want| versions.get(s, lock, w, targets, scratch),
            ),
        })
        .collect()
}

fn apply_set(
    s: &Sources<'_>,
    recipe: &Recipe,
    resolved: &Resolved,
    set: &[TargetId],
    pristine: &Path,
    work: &Path,
    dependency_version: &mut dyn FnMut(&Want) -> Option<Found>,
) -> Outcome {
    let component = recipe.name.value.as_str();
    let task = s.reporter.task(
        &format!(
            "apply {component} for {}",
            set.iter()
                .map(|t| t.arch.as_str())
                .collect::<Vec<_>>()
                .join(",")
        ),
        None,
        false,
    );
    let outcome = (|| {
        let series = prepare::patch_series(s, recipe, resolved, set).map_err(unreachable_or)?;
        crate::fsutil::copy_tree(pristine, work).map_err(|e| Outcome::Unreachable {
            message: format!(
                "{component}: cannot copy the source to {}: {e}",
                work.display()
            ),
            hint: "check free disk space in the cache directory (ROCFORGE_CACHE)".into(),
        })?;
        if !series.is_empty() {
            patch::apply_series(work, &series).map_err(conflict)?;
        }
        let arches: Vec<&str> = set.iter().map(|t| t.arch.as_str()).collect();
        derive::apply(component, work, &recipe.derive, &arches, &s.catalog.arches).map_err(
            |e| Outcome::DeriveFails {
                message: e.to_string(),
                hint: e.hint(),
            },
        )?;
        prepare::check_version(recipe, work).map_err(|e| Outcome::VersionDiffers {
            message: e.to_string(),
            hint: e.hint(),
        })?;
        if let Some(m) = pairing::mismatches(recipe, work, dependency_version)
            .into_iter()
            .next()
        {
            return Err(Outcome::DependencyVersion {
                dependency: m.want.dependency.clone(),
                wanted: m.want.version.clone(),
                found: m.found.version.clone(),
                message: m.to_string(),
                hint: m.hint(),
            });
        }
        let derived = recipe
            .derive
            .iter()
            .map(|d| {
                d.arches
                    .iter()
                    .filter(|a| arches.contains(&a.as_str()))
                    .count()
            })
            .sum();
        Ok::<_, Outcome>(Outcome::Applies {
            patches: series.len(),
            derived,
        })
    })()
    .unwrap_or_else(|o| o);
    let _ = crate::fsutil::remove_tree(work);
    task.finish(&format!("{component}: {}", outcome_word(&outcome)));
    outcome
}

fn outcome_word(o: &Outcome) -> &'static str {
    match o {
        Outcome::Applies { .. } => "applies",
        Outcome::Conflict { .. } => "conflict",
        Outcome::DeriveFails { .. } => "derivation fails",
        Outcome::VersionDiffers { .. } => "version differs",
        Outcome::DependencyVersion { .. } => "dependency version",
        Outcome::Unreachable { .. } => "source unreachable",
    }
}

fn conflict(e: PatchError) -> Outcome {
    let hint = e.hint();
    let message = e.to_string();
    match e {
        PatchError::Conflict {
            patch,
            file,
            hunk,
            line,
            ..
        } => Outcome::Conflict {
            patch,
            file: Some(file),
            hunk: Some(hunk),
            line: Some(line),
            message,
            hint,
        },
        PatchError::MissingFile { patch, file }
        | PatchError::AlreadyExists { patch, file }
        | PatchError::BeyondSymlink { patch, file } => Outcome::Conflict {
            patch,
            file: Some(file),
            hunk: None,
            line: None,
            message,
            hint,
        },
        PatchError::Malformed { patch, .. } | PatchError::Git { patch, .. } => Outcome::Conflict {
            patch,
            file: None,
            hunk: None,
            line: None,
            message,
            hint,
        },
        PatchError::Io { path, .. } => Outcome::Conflict {
            patch: path.display().to_string(),
            file: None,
            hunk: None,
            line: None,
            message,
            hint,
        },
    }
}

fn unreachable_or(e: SourceError) -> Outcome {
    match e {
        SourceError::Patch { source, .. } => conflict(*source),
        SourceError::Derive { source, .. } => Outcome::DeriveFails {
            message: source.to_string(),
            hint: source.hint(),
        },
        SourceError::Logic { source, .. } => Outcome::DeriveFails {
            message: source.to_string(),
            hint: source.hint(),
        },
        other => Outcome::Unreachable {
            hint: other.hint(),
            message: other.to_string(),
        },
    }
}
