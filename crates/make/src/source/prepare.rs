//! From recipe to exact, patched source tree: resolve the pin, fetch, patch, derive, overlay,
//! and commit the tree to the source cache under a key of everything that went into it.

mod error;
mod fetch;
mod inputs;
mod report;
mod unpack;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;
use sha2::{Digest, Sha256};

use super::cache::Cache;
use super::derive;
use super::git;
use super::patch::{self, PatchFile};
use super::resolved::Resolved;
use crate::arch::TargetId;
use crate::catalog::Catalog;
use crate::catalog::Overlay;
use crate::catalog::config::Config;
use crate::catalog::lock::Pin;
use crate::download::DownloadOptions;
use crate::ids::ComponentName;
use crate::progress::Reporter;
use crate::recipe::{BuildSystem, Derive, GitRef, Recipe, Source};
pub use error::{SourceError, VersionDiff};
pub use fetch::path_tree_digest;
use fetch::{fetch_file, fetch_origin};
use inputs::fetch_inputs;
pub use report::{FETCH_SCHEMA, Fetched};

pub const SOURCE_KEY_SCHEMA: &str = "rocforge.source/1";

/// Everything `prepare` needs besides the recipe, its resolved source and the targets. No lock:
/// the plan resolved the pins ([`Resolved`]).
pub struct Sources<'a> {
    pub catalog: &'a Catalog,
    pub config: &'a Config,
    pub cache: &'a Cache,
    pub overlays: &'a [Overlay],
    /// `--locked`: refuse unpinned or stale inputs instead of resolving them.
    pub locked: bool,
    pub reporter: &'a dyn Reporter,
    pub download: DownloadOptions,
    /// Never touch the network: an unlocked tag that the cache does not know is an error.
    pub offline: bool,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Prepared {
    pub component: ComponentName,
    pub key: String,
    /// The patched tree.
    pub tree: PathBuf,
    pub commit: Option<String>,
    /// SOURCE_DATE_EPOCH for the build, from the source alone: a git source's commit time, a
    /// tarball's newest entry, a path source's newest file (never a directory, whose time
    /// changes with every file made in it). The store entry records it for packaging.
    pub source_date_epoch: i64,
    /// True when the cache already held the tree: nothing was fetched.
    pub cached: bool,
    /// Extra inputs: name and the file or directory the build mounts at /inputs/<name>.
    #[serde(serialize_with = "named_paths")]
    #[schemars(with = "Vec<Input<'static>>")]
    pub inputs: Vec<(String, PathBuf)>,
}

/// An extra input as JSON shows it.
#[derive(Serialize, schemars::JsonSchema)]
struct Input<'a> {
    name: &'a str,
    path: &'a Path,
}

/// Inputs as `{name, path}` objects: JSON readers get names, not positions.
fn named_paths<S: serde::Serializer>(
    inputs: &[(String, PathBuf)],
    s: S,
) -> Result<S::Ok, S::Error> {
    s.collect_seq(inputs.iter().map(|(name, path)| Input { name, path }))
}

/// Where the source comes from, pinned: part of the source key.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
enum Origin {
    Git {
        url: String,
        commit: String,
        subdir: Option<String>,
        paths: Vec<String>,
        /// Absent when empty, so sources without it keep their keys.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        exclude: Vec<String>,
        submodules: bool,
    },
    Url {
        sha256: String,
    },
    Path {
        sha256: String,
    },
}

#[derive(Serialize)]
struct SourceKeyInput<'a> {
    schema: &'static str,
    origin: &'a Origin,
    /// Pinned by the archive's sha256 and the entries chosen; absent when there is none, so
    /// sources without a series keep their keys.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    series: &'a [crate::recipe::Series],
    patches: Vec<(String, String)>,
    derive: Vec<(&'a str, &'a Derive)>,
    /// What each of `derive` substitutes (arches.toml's KFD version among it): absent when
    /// there is no derivation, so those sources keep their keys.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    derive_vars: Vec<std::collections::BTreeMap<String, String>>,
    overlays: Vec<&'a Overlay>,
}

#[derive(Serialize)]
struct SourceMeta<'a> {
    release: &'a str,
    component: &'a str,
    targets: &'a [TargetId],
    key: &'a str,
    origin: &'a Origin,
    patches: Vec<(String, String)>,
    source_date_epoch: i64,
}

/// The commit a git source is pinned to, without fetching when its pin or the cache knows it.
fn resolve_commit(
    s: &Sources<'_>,
    recipe: &Recipe,
    resolved: &Resolved,
) -> Result<Option<String>, SourceError> {
    let Source::Git {
        url,
        reference,
        subdir,
        paths,
        exclude,
        submodules,
    } = &recipe.source
    else {
        return Ok(None);
    };
    let component = recipe.name.value.clone();
    match resolved.pin.clone() {
        Pin::Commit(c) => return Ok(Some(c)),
        Pin::NotGit => return Ok(None),
        Pin::Stale {
            locked,
            recipe: now,
        } => {
            if s.locked {
                return Err(SourceError::Stale {
                    component,
                    locked,
                    recipe: now,
                });
            }
            s.reporter.note(&format!(
                "{component}: rocforge.lock is stale ({locked}); resolving {now} afresh"
            ));
        }
        Pin::Unlocked => {
            if s.locked {
                let GitRef::Tag(tag) = reference else {
                    unreachable!("revs are always pinned")
                };
                return Err(SourceError::Unlocked {
                    component,
                    url: url.clone(),
                    tag: tag.clone(),
                });
            }
        }
    }
    let GitRef::Tag(tag) = reference else {
        unreachable!("revs are always pinned")
    };
    let fetch_url = s.config.resolve(url);
    let unknown = || SourceError::Unlocked {
        component: component.clone(),
        url: url.clone(),
        tag: tag.clone(),
    };
    // The libgit2 path keeps tags in its cached object store: no network for a repeat.
    if subdir.is_none()
        && paths.is_empty()
        && exclude.is_empty()
        && !submodules
        && let Ok(repo) = git2::Repository::open_bare(git::store_dir(s.cache.root(), &fetch_url))
        && let Ok(r) = repo.find_reference(&format!("refs/tags/{tag}"))
        && let Ok(c) = r.peel_to_commit()
    {
        return Ok(Some(c.id().to_string()));
    }
    if s.offline {
        return Err(unknown());
    }
    git::resolve_tag(&fetch_url, tag)
        .map(Some)
        .map_err(|source| SourceError::Git { component, source })
}

/// What a prepared tree is made of, and its key; computed without fetching anything.
pub struct SourcePlan {
    pub key: String,
    pub commit: Option<String>,
    origin: Origin,
    patch_files: Vec<PatchFile>,
    patch_ids: Vec<(String, String)>,
}

/// The targets a source is prepared for: none for a component without device code, which has
/// one source for every target set.
fn source_targets<'t>(recipe: &Recipe, targets: &'t [TargetId]) -> &'t [TargetId] {
    if recipe.build.device_code {
        targets
    } else {
        &[]
    }
}

/// The source key of `recipe` for `targets`, its source resolved as `resolved`.
pub fn source_plan(
    s: &Sources<'_>,
    recipe: &Recipe,
    resolved: &Resolved,
    targets: &[TargetId],
) -> Result<SourcePlan, SourceError> {
    let targets = source_targets(recipe, targets);
    let component = recipe.name.value.as_str();
    let release = &s.catalog.release.name;
    let arches: Vec<&str> = targets.iter().map(|t| t.arch.as_str()).collect();
    let io = |path: &Path| {
        let path = path.display().to_string();
        move |source| SourceError::Io {
            component: component.to_string(),
            path,
            source,
        }
    };
    let commit = resolve_commit(s, recipe, resolved)?;
    let origin = origin_of(s, recipe, resolved, commit.as_deref())?;
    // Patches a derived line inherits resolve from its base line's patches/ directory.
    let release = recipe.patches.release.as_deref().unwrap_or(release);
    let patch_files: Vec<PatchFile> = recipe
        .patches
        .series(arches.iter().copied())
        .into_iter()
        .map(|p| {
            let bytes = s
                .catalog
                .root
                .read_patch(release, component, p)
                .map_err(io(Path::new(
                    &s.catalog.root.patch_display(release, component, p),
                )))?;
            Ok(PatchFile {
                name: s.catalog.root.patch_display(release, component, p),
                bytes,
            })
        })
        .collect::<Result<_, SourceError>>()?;
    let patch_ids: Vec<(String, String)> = recipe
        .patches
        .series(arches.iter().copied())
        .iter()
        .zip(&patch_files)
        .map(|(name, f)| (name.value.clone(), hex::encode(Sha256::digest(&f.bytes))))
        .collect();
    let derives: Vec<(&str, &Derive)> = arches
        .iter()
        .flat_map(|a| {
            recipe
                .derive
                .iter()
                .filter(move |d| d.arches.iter().any(|x| x == a))
                .map(move |d| (*a, d))
        })
        .collect();
    let overlays: Vec<&Overlay> = s
        .overlays
        .iter()
        .filter(|o| o.component == component)
        .collect();
    // Planning is the last moment before hours of building: a processor's logic overlay that
    // Tensile would not use as that processor's is refused here.
    crate::catalog::logic::check_overlays(recipe, &arches, &s.catalog.arches, &overlays).map_err(
        |source| SourceError::Logic {
            component: component.to_string(),
            source: Box::new(source),
        },
    )?;
    let key_input = SourceKeyInput {
        schema: SOURCE_KEY_SCHEMA,
        origin: &origin,
        series: &recipe.series,
        patches: patch_ids.clone(),
        derive_vars: derives
            .iter()
            .map(|(arch, d)| derive::vars_for(arch, &s.catalog.arches, d))
            .collect(),
        derive: derives,
        overlays,
    };
    let key = hex::encode(Sha256::digest(
        serde_json::to_vec(&key_input).expect("plain data"),
    ));
    Ok(SourcePlan {
        key,
        commit,
        origin,
        patch_files,
        patch_ids,
    })
}

/// Where the source comes from, pinned: the resolved commit, the tarball's sha256, the path
/// tree's digest.
fn origin_of(
    s: &Sources<'_>,
    recipe: &Recipe,
    resolved: &Resolved,
    commit: Option<&str>,
) -> Result<Origin, SourceError> {
    Ok(match &recipe.source {
        Source::Git {
            url,
            subdir,
            paths,
            exclude,
            submodules,
            ..
        } => Origin::Git {
            url: url.clone(),
            commit: commit.expect("git sources resolve to a commit").to_string(),
            subdir: subdir.clone(),
            paths: paths.clone(),
            exclude: exclude.clone(),
            submodules: *submodules,
        },
        Source::Url { sha256, .. } => Origin::Url {
            sha256: sha256.clone(),
        },
        Source::Path { path } => Origin::Path {
            sha256: match &resolved.tree {
                Some(digest) => digest.clone(),
                None => path_tree_digest(s.catalog, &recipe.name.value, path)?,
            },
        },
    })
}

/// Prepares the patched source of `recipe` for `targets`, its source resolved as `resolved`
/// (a plan's step carries it).
pub fn prepare(
    s: &Sources<'_>,
    recipe: &Recipe,
    resolved: &Resolved,
    targets: &[TargetId],
) -> Result<Prepared, SourceError> {
    let targets = source_targets(recipe, targets);
    let component = recipe.name.value.as_str();
    let io = |path: &Path| {
        let path = path.display().to_string();
        move |source| SourceError::Io {
            component: component.to_string(),
            path,
            source,
        }
    };
    let plan = source_plan(s, recipe, resolved, targets)?;
    let key = plan.key.clone();
    let entry = s.cache.source_dir(&key);
    let inputs = fetch_inputs(s, component, &recipe.inputs, resolved)?;

    let done = |cached: bool, epoch: i64| Prepared {
        component: ComponentName::checked(component),
        key: key.clone(),
        tree: entry.join("tree"),
        commit: plan.commit.clone(),
        source_date_epoch: epoch,
        cached,
        inputs: inputs.clone(),
    };
    if let Some(epoch) = cached_epoch(recipe, &entry)? {
        return Ok(done(true, epoch));
    }
    let _lock = s
        .cache
        .lock(
            &format!("src-{key}"),
            Duration::from_secs(6 * 3600),
            &|| {
                s.reporter.note(&format!(
                    "{component}: waiting for another rocforge process preparing the same source"
                ))
            },
        )
        .map_err(io(s.cache.root()))?;
    if let Some(epoch) = cached_epoch(recipe, &entry)? {
        return Ok(done(true, epoch));
    }
    // Staging of this key that a killed run left behind (the lock is ours now).
    if let Some(parent) = entry.parent() {
        crate::fsutil::reap_temp(parent, &format!(".{key}.tmp-"));
    }

    // Whatever happens below, a failure removes the staging directory: no half-made entry.
    let staged = crate::fsutil::Staged::dir_beside(&entry).map_err(io(&entry))?;
    crate::fault::point("fetch");
    let epoch = build_entry(s, recipe, targets, &plan, staged.path())?;
    crate::fault::point("fetch");
    staged.commit().map_err(io(&entry))?;
    crate::fault::point("fetch");
    Ok(done(false, epoch))
}

/// The source date of the tree the cache already holds at `entry`, if it holds one.
fn cached_epoch(recipe: &Recipe, entry: &Path) -> Result<Option<i64>, SourceError> {
    let Some(epoch) = read_epoch(entry) else {
        return Ok(None);
    };
    // The recipe's version is not part of the key: a cached tree is held to it as well.
    check_version(recipe, &entry.join("tree"))?;
    Ok(Some(epoch))
}

/// Makes the cache entry in `staging`: the source fetched into `tree/`, patched, derived and
/// overlaid, then `source.json`. Returns the source date.
fn build_entry(
    s: &Sources<'_>,
    recipe: &Recipe,
    targets: &[TargetId],
    plan: &SourcePlan,
    staging: &Path,
) -> Result<i64, SourceError> {
    let component = recipe.name.value.as_str();
    let arches: Vec<&str> = targets.iter().map(|t| t.arch.as_str()).collect();
    let io = |path: &Path| {
        let path = path.display().to_string();
        move |source| SourceError::Io {
            component: component.to_string(),
            path,
            source,
        }
    };
    let overlays: Vec<&Overlay> = s
        .overlays
        .iter()
        .filter(|o| o.component == component)
        .collect();
    let tree = staging.join("tree");
    std::fs::create_dir_all(&tree).map_err(io(&tree))?;
    let task = s.reporter.task(&format!("fetch {component}"), None, false);
    let epoch = fetch_origin(s, recipe, &plan.origin, &tree, staging)?;
    crate::fault::point("fetch");
    task.finish(&format!("fetched {component}"));
    let mut patch_files = plan.patch_files.clone();
    patch_files.splice(0..0, series_patches(s, recipe)?);
    if !patch_files.is_empty() {
        patch::apply_series(&tree, &patch_files).map_err(|source| SourceError::Patch {
            component: component.to_string(),
            source: Box::new(source),
        })?;
    }
    derive::apply(component, &tree, &recipe.derive, &arches, &s.catalog.arches).map_err(
        |source| SourceError::Derive {
            component: component.to_string(),
            source,
        },
    )?;
    for o in &overlays {
        o.apply(&tree).map_err(|source| SourceError::Derive {
            component: component.to_string(),
            source,
        })?;
    }
    check_version(recipe, &tree)?;
    let meta = SourceMeta {
        release: &s.catalog.release.name,
        component,
        targets,
        key: &plan.key,
        origin: &plan.origin,
        patches: plan.patch_ids.clone(),
        source_date_epoch: epoch,
    };
    crate::fault::point("fetch");
    let meta_path = staging.join("source.json");
    crate::fsutil::write_atomic(
        &meta_path,
        &serde_json::to_vec_pretty(&meta).expect("plain data"),
    )
    .map_err(io(&meta_path))?;
    Ok(epoch)
}

/// Fetches the pristine (unpatched) source of `recipe` into `tree`, for `rocforge check
/// --sources`, which applies [`patch_series`] itself per target set without touching the source
/// cache.
pub fn fetch_pristine(
    s: &Sources<'_>,
    recipe: &Recipe,
    resolved: &Resolved,
    targets: &[TargetId],
    tree: &Path,
) -> Result<(), SourceError> {
    let plan = source_plan(s, recipe, resolved, targets)?;
    let staging = tree.parent().unwrap_or(tree);
    fetch_origin(s, recipe, &plan.origin, tree, staging).map(drop)
}

/// The patches of the recipe's `[[series]]`, downloaded (pinned by sha256) and read in order:
/// they go before the catalog's own patches, which are written against the patched tree.
pub fn series_patches(s: &Sources<'_>, recipe: &Recipe) -> Result<Vec<PatchFile>, SourceError> {
    let component = recipe.name.value.as_str();
    let mut out = Vec::new();
    for series in &recipe.series {
        let file = fetch_file(s, component, &series.url, &series.sha256)?;
        let name = super::series::archive_name(&series.url);
        out.extend(super::series::read(&file, name, series).map_err(|source| {
            SourceError::Series {
                component: component.to_string(),
                source: Box::new(source),
            }
        })?);
    }
    Ok(out)
}

/// The patch series `targets` would apply: the recipe's `[[series]]` (downloaded, pinned),
/// then the catalog's own patches, in the order a fetch applies them.
pub fn patch_series(
    s: &Sources<'_>,
    recipe: &Recipe,
    resolved: &Resolved,
    targets: &[TargetId],
) -> Result<Vec<PatchFile>, SourceError> {
    let plan = source_plan(s, recipe, resolved, targets)?;
    let mut patches = series_patches(s, recipe)?;
    patches.extend(plan.patch_files);
    Ok(patches)
}

/// Fails when a CMake component's recipe names another version than its (patched) source
/// declares. A source whose version cannot be read is not checked.
pub fn check_version(recipe: &Recipe, tree: &Path) -> Result<(), SourceError> {
    if !matches!(recipe.build.system, BuildSystem::Cmake { .. }) {
        return Ok(());
    }
    let top = match &recipe.source {
        Source::Git {
            subdir: Some(s), ..
        } => format!("{s}/"),
        _ => String::new(),
    };
    let cmakelists = tree.join(&top).join("CMakeLists.txt");
    let declared =
        super::version::declared(&tree.join(&top)).map_err(|source| SourceError::Io {
            component: recipe.name.value.clone(),
            path: cmakelists.display().to_string(),
            source,
        })?;
    let Some(declared) = declared else {
        return Ok(());
    };
    if super::version::matches(&recipe.version, &declared.version) {
        return Ok(());
    }
    // The line of the top-level `version =`: recipes keep it before any table.
    let line = recipe
        .file
        .text
        .lines()
        .take_while(|l| !l.trim_start().starts_with('['))
        .position(|l| {
            l.trim_start()
                .strip_prefix("version")
                .is_some_and(|rest| rest.trim_start().starts_with('='))
        })
        .map_or(String::new(), |i| format!(":{}", i + 1));
    Err(SourceError::Version {
        component: recipe.name.value.clone(),
        diff: Box::new(VersionDiff {
            recipe_at: format!("{}{line}", recipe.file.display),
            recipe: recipe.version.clone(),
            declared: declared.version,
            cmake_at: format!("{top}CMakeLists.txt:{}", declared.line),
        }),
    })
}

fn read_epoch(entry: &Path) -> Option<i64> {
    let text = std::fs::read(entry.join("source.json")).ok()?;
    let v: serde_json::Value = serde_json::from_slice(&text).ok()?;
    v.get("source_date_epoch")?.as_i64()
}
