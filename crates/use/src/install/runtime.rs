//! The HIP runtime check of an install plan: whether the artifacts that need ROCm's HIP runtime
//! find one (in the plan, in the prefix, on this system), else which provider the index offers.
//! It only looks (the ld.so cache, a few directories); it never changes anything.

use std::path::{Path, PathBuf};

use super::plan::Resolver;
use super::receipt::Receipt;
use super::{InstallError, Request, RuntimeCheck};
use crate::package::index::{Artifact, Index};

/// Names directories (`:`-separated) to look for the HIP runtime in, instead of the ld.so cache,
/// `$ROCM_PATH/lib`, `/opt/rocm/lib` and `$LD_LIBRARY_PATH`: for tests and unusual systems.
pub const HOST_LIBS_ENV: &str = "ROCFORGE_HOST_LIBS";

/// What the search for the HIP runtime on this system found.
#[derive(Debug, Default)]
pub struct HostRuntime {
    /// Where the wanted runtime is (the first wanted library's path), when every wanted library
    /// was found in one place.
    pub found: Option<PathBuf>,
    /// Where rocforge looked.
    pub searched: Vec<String>,
    /// HIP runtime libraries seen that are not the wanted ones (another ROCm major version).
    pub others: Vec<PathBuf>,
}

/// Looks for the HIP runtime on this system. `wanted` are exact library names (e.g.
/// libamdhip64.so.6, libhsa-runtime64.so.1), all of which must be found in one place (the ld.so
/// cache, or one directory); empty (an index from before the names were recorded) accepts any
/// `libamdhip64.so*`.
pub fn host_hip_runtime(wanted: &[String]) -> HostRuntime {
    let any = ["libamdhip64.so".to_string()];
    let matches = |name: &str, w: &str| {
        if wanted.is_empty() {
            name.starts_with(w)
        } else {
            name == w
        }
    };
    let want: &[String] = if wanted.is_empty() { &any } else { wanted };
    let mut out = HostRuntime::default();
    // Every wanted name among `names` (name, path): the first one's path when all are there.
    let take = |names: &[(String, PathBuf)], out: &mut HostRuntime| -> Option<PathBuf> {
        let paths: Option<Vec<&PathBuf>> = want
            .iter()
            .map(|w| names.iter().find(|(n, _)| matches(n, w)).map(|(_, p)| p))
            .collect();
        match paths {
            Some(p) => p.first().map(|p| (*p).clone()),
            None => {
                out.others.extend(
                    names
                        .iter()
                        .filter(|(n, _)| n.starts_with("libamdhip64.so"))
                        .map(|(_, p)| p.clone()),
                );
                None
            }
        }
    };
    let list_dir = |dir: &Path| -> Vec<(String, PathBuf)> {
        let mut v: Vec<(String, PathBuf)> = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| Some((e.file_name().to_str()?.to_string(), e.path())))
            .filter(|(n, _)| crate::package::manifest::is_hip_runtime_lib(n))
            .collect();
        v.sort();
        v
    };
    let dirs: Vec<PathBuf> = if let Some(v) = std::env::var_os(HOST_LIBS_ENV) {
        std::env::split_paths(&v).collect()
    } else {
        out.searched
            .push("the ld.so cache (ldconfig -p)".to_string());
        if let Some(cached) = super::links::ld_cache() {
            let hip: Vec<(String, PathBuf)> = cached
                .into_iter()
                .filter(|(n, _)| crate::package::manifest::is_hip_runtime_lib(n))
                .collect();
            if let Some(p) = take(&hip, &mut out) {
                out.found = Some(p);
                return out;
            }
        }
        super::links::rocm_dirs()
    };
    for d in &dirs {
        out.searched.push(d.display().to_string());
        if let Some(p) = take(&list_dir(d), &mut out) {
            out.found = Some(p);
            return out;
        }
    }
    out.others.sort();
    out.others.dedup();
    out
}

/// Adds the index's HIP runtime provider (and its dependencies) to `chosen` when an artifact
/// needs the runtime and neither `chosen`, the prefix (`existing`) nor this system has it, or
/// always with [`RuntimeCheck::With`]. What it found or decided goes to `notes`.
pub(super) fn add_runtime<'a>(
    index: &'a Index,
    from: &str,
    chosen: &mut Vec<&'a Artifact>,
    existing: &[Receipt],
    req: &Request<'_>,
    notes: &mut Vec<String>,
) -> Result<(), InstallError> {
    let needy: Vec<String> = chosen
        .iter()
        .filter(|a| a.facts.needs_hip())
        .map(|a| a.name.to_string())
        .collect();
    let in_set = chosen.iter().any(|a| a.facts.provides_hip());
    let in_prefix = existing.iter().find(|r| {
        r.facts.provides_hip() || (r.facts.provides.is_empty() && r.name == "rocm-runtime")
    });
    let why = match req.runtime {
        RuntimeCheck::Skip => {
            if !needy.is_empty() && !in_set && in_prefix.is_none() {
                notes.push(format!(
                    "warning: --no-runtime-check: {} need the HIP runtime; not checking that this system has it",
                    needy.join(", ")
                ));
            }
            return Ok(());
        }
        RuntimeCheck::Auto if needy.is_empty() || in_set => return Ok(()),
        RuntimeCheck::Auto => {
            if let Some(r) = in_prefix {
                notes.push(format!(
                    "HIP runtime: {} {} in the prefix",
                    r.name, r.version
                ));
                return Ok(());
            }
            match on_host(chosen, &needy) {
                Ok(note) => {
                    notes.push(note);
                    return Ok(());
                }
                Err(why) => why,
            }
        }
        RuntimeCheck::With if in_set => return Ok(()),
        RuntimeCheck::With => "--with-runtime".to_string(),
    };
    let providers = providers(index, req.targets);
    let Some(first) = providers.first() else {
        return Err(if req.runtime == RuntimeCheck::With {
            InstallError::NoRuntimeOffered { from: from.into() }
        } else {
            InstallError::NoRuntime { why }
        });
    };
    let mut added: Vec<&'a Artifact> = Vec::new();
    for a in first {
        if !chosen.iter().any(|c| c.key == a.key) && !added.iter().any(|c| c.key == a.key) {
            added.push(a);
        }
    }
    if let Some(p) = added.last() {
        notes.push(format!(
            "adding {} {} from the index: {why}",
            p.name, p.version
        ));
    }
    added.append(chosen);
    *chosen = added;
    Ok(())
}

/// This system's HIP runtime for the `needy` artifacts of `chosen`: a note naming it, or why
/// none will do (what was wanted, where rocforge looked, which other version it saw).
fn on_host(chosen: &[&Artifact], needy: &[String]) -> Result<String, String> {
    let mut wanted: Vec<String> = chosen
        .iter()
        .flat_map(|a| a.facts.runtime_libs.iter().cloned())
        .collect();
    wanted.sort();
    wanted.dedup();
    let host = host_hip_runtime(&wanted);
    if let Some(p) = host.found {
        return Ok(format!(
            "HIP runtime: {} (for {})",
            p.display(),
            needy.join(", ")
        ));
    }
    let what = if wanted.is_empty() {
        "the HIP runtime".to_string()
    } else {
        format!("the HIP runtime ({})", wanted.join(", "))
    };
    let other = if host.others.is_empty() {
        String::new()
    } else {
        format!(
            "; it has another version: {}",
            host.others
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    Err(format!(
        "{} need{} {what}, which this system lacks (searched {}){other}",
        needy.join(", "),
        if needy.len() == 1 { "s" } else { "" },
        host.searched.join(", ")
    ))
}

/// The most HIP runtime providers of an index considered (by name, in order).
const MAX_PROVIDERS: usize = 64;

/// The index's HIP runtime providers, each resolved with its dependencies (dependencies
/// first): those for `targets` first, else any.
fn providers<'a>(index: &'a Index, targets: &[crate::arch::TargetId]) -> Vec<Vec<&'a Artifact>> {
    let mut names: Vec<String> = index
        .artifacts
        .iter()
        .filter(|a| a.kind.is_tarball() && a.facts.provides_hip())
        .map(|a| a.name.to_string())
        .collect();
    names.sort();
    names.dedup();
    let resolver = Resolver::new(index);
    // An index names one or two providers; a hostile one naming thousands, each needing a long
    // chain, would make this quadratic.
    names
        .into_iter()
        .take(MAX_PROVIDERS)
        .filter_map(|n| {
            let one = std::slice::from_ref(&n);
            resolver
                .resolve(one, targets)
                .or_else(|_| resolver.resolve(one, &[]))
                .ok()
        })
        .collect()
}
