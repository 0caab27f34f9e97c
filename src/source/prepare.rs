//! From recipe to exact, patched source tree: resolve the pin, fetch, patch, derive, overlay,
//! and commit the tree to the source cache under a key of everything that went into it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;
use sha2::{Digest, Sha256};

use super::cache::Cache;
use super::derive::{self, DeriveError, hash_tree};
use super::download::{self, DownloadError, DownloadOptions};
use super::git::{self, GitError};
use super::patch::{self, PatchError, PatchFile};
use crate::arch::TargetId;
use crate::catalog::Overlay;
use crate::catalog::config::Config;
use crate::catalog::lock::{InputPin, Lockfile, Pin};
use crate::catalog::{Catalog, CatalogRoot};
use crate::progress::Reporter;
use crate::recipe::{BuildSystem, Derive, ExtraInput, GitRef, Recipe, Source};

pub const SOURCE_KEY_SCHEMA: &str = "rocforge.source/1";

#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("{component}: {source}")]
    Git { component: String, source: GitError },
    #[error("{component}: {source}")]
    Download {
        component: String,
        source: DownloadError,
    },
    #[error("{component}: {source}")]
    Patch {
        component: String,
        source: Box<PatchError>,
    },
    #[error("{component}: {source}")]
    Derive {
        component: String,
        source: DeriveError,
    },
    #[error("{component}: {source}")]
    Logic {
        component: String,
        source: Box<crate::catalog::logic::LogicError>,
    },
    #[error(
        "{component}: tag {tag} of {url} is not pinned in rocforge.lock, and --locked refuses unpinned inputs"
    )]
    Unlocked {
        component: String,
        url: String,
        tag: String,
    },
    #[error(
        "{component}: input {input} ({url}) is pinned by md5 only and rocforge.lock has no sha256 for it"
    )]
    InputUnlocked {
        component: String,
        input: String,
        url: String,
    },
    #[error(
        "{component}: input {input}: rocforge.lock has {locked}, but the recipe now says {recipe}"
    )]
    InputStale {
        component: String,
        input: String,
        locked: String,
        recipe: String,
    },
    #[error("{component}: rocforge.lock pins {locked}, but the recipe now says {recipe}")]
    Stale {
        component: String,
        locked: String,
        recipe: String,
    },
    #[error("{component}: path source {path}: {why}")]
    Path {
        component: String,
        path: String,
        why: String,
    },
    #[error("{component}: cannot unpack {what}: {why}")]
    Unpack {
        component: String,
        what: String,
        why: String,
    },
    #[error(
        "{component}: {} says version {}, but the source declares {} ({})",
        .diff.recipe_at, .diff.recipe, .diff.declared, .diff.cmake_at
    )]
    Version {
        component: String,
        diff: Box<VersionDiff>,
    },
    #[error("{component}: {path}: {source}")]
    Io {
        component: String,
        path: String,
        source: std::io::Error,
    },
    #[error("{component}: [[series]] {source}")]
    Series {
        component: String,
        source: Box<super::series::SeriesError>,
    },
}

impl SourceError {
    pub fn hint(&self) -> String {
        match self {
            SourceError::Git { source, .. } => source.hint(),
            SourceError::Download { source, .. } => source.hint(),
            SourceError::Patch { source, .. } => source.hint(),
            SourceError::Derive { source, .. } => source.hint(),
            SourceError::Logic { source, .. } => source.hint(),
            SourceError::Unlocked { .. } => "run `rocforge lock` and commit rocforge.lock".into(),
            SourceError::InputUnlocked { .. } | SourceError::InputStale { .. } => "run `rocforge lock`: it downloads the file, checks the md5 and records its sha256 in rocforge.lock (the built-in catalog's lock is fixed: `rocforge catalog export DIR`, then `rocforge --recipes DIR/recipes lock`); without --locked the md5 is checked at each fetch instead".into(),
            SourceError::Stale { .. } => "the recipe changed since the lock was written: run `rocforge lock` (or `rocforge lock --check` in CI)".into(),
            SourceError::Path { .. } => "path sources are relative to the recipe's release directory and need a catalog on disk (--recipes)".into(),
            SourceError::Unpack { .. } => "the archive is damaged or not a tar archive (.tar, .tar.gz, .tgz, .tar.xz, .tar.zst)".into(),
            SourceError::Version { diff, .. } => format!("a package is named by the version of the source it holds: write version = \"{}\" at {}, or pin the tag or commit whose source declares {}", diff.declared, diff.recipe_at, diff.recipe),
            SourceError::Io { .. } => "check free disk space and permissions of the cache directory (ROCFORGE_CACHE)".into(),
            SourceError::Series { source, .. } => source.hint(),
        }
    }
}

/// A recipe's version against the one its source declares, each with where it is written.
#[derive(Debug)]
pub struct VersionDiff {
    /// `recipes/<release>/<component>.toml:<line>`
    pub recipe_at: String,
    pub recipe: String,
    pub declared: String,
    /// `[<subdir>/]CMakeLists.txt:<line>`
    pub cmake_at: String,
}

/// Everything `prepare` needs besides the recipe and targets.
pub struct Sources<'a> {
    pub catalog: &'a Catalog,
    pub lock: &'a Lockfile,
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

#[derive(Debug, Clone, Serialize)]
pub struct Prepared {
    pub component: String,
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
    pub inputs: Vec<(String, PathBuf)>,
}

/// Inputs as `{name, path}` objects: JSON readers get names, not positions.
fn named_paths<S: serde::Serializer>(
    inputs: &[(String, PathBuf)],
    s: S,
) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    struct Input<'a> {
        name: &'a str,
        path: &'a Path,
    }
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

/// The commit a git source is pinned to, without fetching when the lock or cache knows it.
pub fn resolve_commit(s: &Sources<'_>, recipe: &Recipe) -> Result<Option<String>, SourceError> {
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
    match s.lock.pin(&s.catalog.release.name, recipe) {
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

/// The source key of `recipe` for `targets`.
pub fn source_plan(
    s: &Sources<'_>,
    recipe: &Recipe,
    targets: &[TargetId],
) -> Result<SourcePlan, SourceError> {
    // A component without device code has one source for every target set.
    let targets = if recipe.build.device_code {
        targets
    } else {
        &[]
    };
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
    let commit = resolve_commit(s, recipe)?;
    let origin = match &recipe.source {
        Source::Git {
            url,
            subdir,
            paths,
            exclude,
            submodules,
            ..
        } => Origin::Git {
            url: url.clone(),
            commit: commit.clone().expect("git sources resolve to a commit"),
            subdir: subdir.clone(),
            paths: paths.clone(),
            exclude: exclude.clone(),
            submodules: *submodules,
        },
        Source::Url { sha256, .. } => Origin::Url {
            sha256: sha256.clone(),
        },
        Source::Path { path } => Origin::Path {
            sha256: path_tree_digest(s.catalog, component, path)?,
        },
    };
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

/// Prepares the patched source of `recipe` for `targets`.
pub fn prepare(
    s: &Sources<'_>,
    recipe: &Recipe,
    targets: &[TargetId],
) -> Result<Prepared, SourceError> {
    // A component without device code has one source for every target set.
    let targets = if recipe.build.device_code {
        targets
    } else {
        &[]
    };
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
    let SourcePlan {
        key,
        commit,
        origin,
        patch_files,
        patch_ids,
    } = source_plan(s, recipe, targets)?;
    let overlays: Vec<&Overlay> = s
        .overlays
        .iter()
        .filter(|o| o.component == component)
        .collect();
    let entry = s.cache.source_dir(&key);
    let inputs = fetch_inputs(s, component, &recipe.inputs)?;

    let done = |cached: bool, epoch: i64| Prepared {
        component: component.to_string(),
        key: key.clone(),
        tree: entry.join("tree"),
        commit: commit.clone(),
        source_date_epoch: epoch,
        cached,
        inputs: inputs.clone(),
    };
    if let Some(epoch) = read_epoch(&entry) {
        // The recipe's version is not part of the key: a cached tree is held to it as well.
        check_version(recipe, &entry.join("tree"))?;
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
    if let Some(epoch) = read_epoch(&entry) {
        // The recipe's version is not part of the key: a cached tree is held to it as well.
        check_version(recipe, &entry.join("tree"))?;
        return Ok(done(true, epoch));
    }
    // Staging of this key that a killed run left behind (the lock is ours now).
    if let Some(parent) = entry.parent() {
        crate::fsutil::reap_temp(parent, &format!(".{key}.tmp-"));
    }

    // Whatever happens below, a failure removes the staging directory: no half-made entry.
    let staged = crate::fsutil::Staged::dir_beside(&entry).map_err(io(&entry))?;
    let staging = staged.path();
    crate::fault::point("fetch");
    let epoch = (|| -> Result<i64, SourceError> {
        let tree = staging.join("tree");
        std::fs::create_dir_all(&tree).map_err(io(&tree))?;
        let task = s.reporter.task(&format!("fetch {component}"), None, false);
        let epoch = fetch_origin(s, recipe, &origin, &tree, staging)?;
        crate::fault::point("fetch");
        task.finish(&format!("fetched {component}"));
        let mut patch_files = patch_files.clone();
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
            release,
            component,
            targets,
            key: &key,
            origin: &origin,
            patches: patch_ids.clone(),
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
    })()?;
    crate::fault::point("fetch");
    staged.commit().map_err(io(&entry))?;
    crate::fault::point("fetch");
    Ok(done(false, epoch))
}

/// Fetches the pristine (unpatched) source of `recipe` into `tree`, for `rocforge check
/// --sources`, which applies [`patch_series`] itself per target set without touching the source
/// cache.
pub fn fetch_pristine(
    s: &Sources<'_>,
    recipe: &Recipe,
    targets: &[TargetId],
    tree: &Path,
) -> Result<(), SourceError> {
    let plan = source_plan(s, recipe, targets)?;
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
    targets: &[TargetId],
) -> Result<Vec<PatchFile>, SourceError> {
    let plan = source_plan(s, recipe, targets)?;
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

/// The content digest of a `path` source's tree (paths, modes, bytes, symlink targets): one
/// walk for the source cache's key and the plan's content key, so an edit there changes both.
pub fn path_tree_digest(
    catalog: &Catalog,
    component: &str,
    path: &str,
) -> Result<String, SourceError> {
    match path_source_dir(catalog, component, path)? {
        PathSource::Embedded(dir) => Ok(derive::hash_embedded(dir)),
        PathSource::Dir(dir) => hash_tree(&dir).map_err(|source| SourceError::Io {
            component: component.to_string(),
            path: dir.display().to_string(),
            source,
        }),
    }
}

/// Where a `path` source's tree is: a directory beside the line's recipes, or compiled into the
/// binary with the built-in catalog.
enum PathSource {
    Dir(PathBuf),
    Embedded(&'static include_dir::Dir<'static>),
}

fn path_source_dir(
    catalog: &Catalog,
    component: &str,
    path: &str,
) -> Result<PathSource, SourceError> {
    let err = |why: String| SourceError::Path {
        component: component.to_string(),
        path: path.to_string(),
        why,
    };
    match &catalog.root {
        CatalogRoot::Embedded => crate::catalog::embedded_path_source(&catalog.release.name, path)
            .map(PathSource::Embedded)
            .ok_or_else(|| {
                err(format!(
                    "the built-in catalog has no directory recipes/{}/{path}",
                    catalog.release.name
                ))
            }),
        CatalogRoot::Dir(recipes) => {
            let dir = recipes.join(&catalog.release.name).join(path);
            if dir.is_dir() {
                Ok(PathSource::Dir(dir))
            } else {
                Err(err(format!("{} is not a directory", dir.display())))
            }
        }
    }
}

fn fetch_origin(
    s: &Sources<'_>,
    recipe: &Recipe,
    origin: &Origin,
    tree: &Path,
    staging: &Path,
) -> Result<i64, SourceError> {
    let component = recipe.name.value.as_str();
    let epoch = fetch_origin_raw(s, recipe, origin, tree, staging)?;
    // Whatever the origin, the tree keeps no repository state and no setuid or shared-write
    // modes (a git checkout writes neither, a tarball or a local directory may carry both).
    super::tree::sanitize(tree).map_err(|source| SourceError::Io {
        component: component.to_string(),
        path: tree.display().to_string(),
        source,
    })?;
    Ok(epoch)
}

fn fetch_origin_raw(
    s: &Sources<'_>,
    recipe: &Recipe,
    origin: &Origin,
    tree: &Path,
    staging: &Path,
) -> Result<i64, SourceError> {
    let component = recipe.name.value.as_str();
    match (&recipe.source, origin) {
        (
            Source::Git {
                url,
                reference,
                subdir,
                paths,
                exclude,
                submodules,
            },
            Origin::Git { commit, .. },
        ) => {
            let fetch_url = s.config.resolve(url);
            if fetch_url != *url {
                s.reporter.note(&format!(
                    "{component}: fetching {url} from mirror {fetch_url}"
                ));
            }
            let locked = Some(commit.as_str());
            let git_err = |source| SourceError::Git {
                component: component.to_string(),
                source,
            };
            let fetched =
                if subdir.is_none() && paths.is_empty() && exclude.is_empty() && !submodules {
                    git::fetch_and_checkout(s.cache.root(), &fetch_url, reference, locked, tree)
                        .map_err(git_err)?
                } else {
                    // A monorepo component: its root plus the other paths it needs. The tree's root
                    // is the repository root so relative paths between them keep working.
                    let mut wanted: Vec<String> = subdir.iter().cloned().collect();
                    wanted.extend(paths.iter().cloned());
                    git::sparse_fetch(
                        &fetch_url,
                        reference,
                        locked,
                        &git::Sparse {
                            paths: &wanted,
                            exclude,
                        },
                        *submodules,
                        tree,
                    )
                    .map_err(git_err)?
                };
            Ok(fetched.time)
        }
        (Source::Url { url, sha256 }, _) => {
            let file = fetch_file(s, component, url, sha256)?;
            unpack_tar(component, &file, tree, true)?;
            let _ = staging;
            newest_entry(component, &file)
        }
        (Source::Path { path }, _) => match path_source_dir(s.catalog, component, path)? {
            PathSource::Dir(dir) => {
                let io = |source| SourceError::Io {
                    component: component.to_string(),
                    path: dir.display().to_string(),
                    source,
                };
                crate::fsutil::copy_tree(&dir, tree).map_err(io)?;
                newest_file(&dir).map_err(io)
            }
            PathSource::Embedded(dir) => {
                crate::catalog::write_embedded(dir, tree).map_err(|source| SourceError::Io {
                    component: component.to_string(),
                    path: tree.display().to_string(),
                    source,
                })?;
                // The binary keeps no file times: one fixed date, so the tree's files and what is
                // packaged from them are the same bytes from every build of rocforge.
                Ok(0)
            }
        },
        _ => unreachable!("origin is built from the same source"),
    }
}

fn fetch_file(
    s: &Sources<'_>,
    component: &str,
    url: &str,
    sha256: &str,
) -> Result<PathBuf, SourceError> {
    let dest = s.cache.download_path(sha256);
    let fetch_url = s.config.resolve(url);
    if fetch_url != url {
        s.reporter.note(&format!(
            "{component}: downloading {url} from mirror {fetch_url}"
        ));
    }
    let client = download::client_with(&s.download);
    download::download(&client, &fetch_url, sha256, &dest, &s.download, s.reporter)
        .map(|d| d.path)
        .map_err(|source| SourceError::Download {
            component: component.to_string(),
            source,
        })
}

fn fetch_inputs(
    s: &Sources<'_>,
    component: &str,
    inputs: &[ExtraInput],
) -> Result<Vec<(String, PathBuf)>, SourceError> {
    let mut out = Vec::new();
    let release = &s.catalog.release.name;
    for input in inputs {
        // An md5-only input is fetched by the sha256 `rocforge lock` recorded, never by its md5.
        let sha256 = match s.lock.input_pin(release, component, input) {
            InputPin::Sha256(sha) => sha,
            // As with an unlocked tag: without --locked the md5 is checked afresh (the sha256
            // of what passed is remembered in the cache); `rocforge lock` makes it a pin.
            InputPin::Unlocked | InputPin::Stale { .. } if !s.locked && !s.offline => {
                md5_checked(s, component, input)?
            }
            InputPin::Unlocked => {
                return Err(SourceError::InputUnlocked {
                    component: component.to_string(),
                    input: input.name.clone(),
                    url: input.url.clone(),
                });
            }
            InputPin::Stale { locked, recipe } => {
                return Err(SourceError::InputStale {
                    component: component.to_string(),
                    input: input.name.clone(),
                    locked,
                    recipe,
                });
            }
        };
        let sha256 = &sha256;
        let file = fetch_file(s, component, &input.url, sha256)?;
        if !input.unpack {
            out.push((input.name.clone(), file));
            continue;
        }
        let dir = s.cache.root().join("inputs").join(sha256);
        if !dir.is_dir() {
            // Unpacking left half-done by a killed run.
            crate::fsutil::reap_temp(&s.cache.root().join("inputs"), &format!(".{}.tmp-", sha256));
            let staged =
                crate::fsutil::Staged::dir_beside(&dir).map_err(|source| SourceError::Io {
                    component: component.to_string(),
                    path: dir.display().to_string(),
                    source,
                })?;
            unpack_tar(component, &file, staged.path(), false)?;
            super::tree::sanitize(staged.path()).map_err(|source| SourceError::Io {
                component: component.to_string(),
                path: dir.display().to_string(),
                source,
            })?;
            // Another process may have won the race (the commit fails, ours is removed); its
            // copy is identical.
            let _ = staged.commit();
        }
        out.push((input.name.clone(), dir));
    }
    Ok(out)
}

/// An input pinned by md5 only and not by rocforge.lock: downloaded and checked against the
/// md5 once, then found again through `downloads/md5-<md5>` (the sha256 of the verified file,
/// which is stored under that sha256 like any download). Returns the sha256.
fn md5_checked(
    s: &Sources<'_>,
    component: &str,
    input: &ExtraInput,
) -> Result<String, SourceError> {
    let md5 = input
        .md5
        .as_deref()
        .expect("only md5 inputs lack a sha256")
        .to_ascii_lowercase();
    let memo = s.cache.root().join("downloads").join(format!("md5-{md5}"));
    if let Ok(sha) = std::fs::read_to_string(&memo)
        && s.cache.download_path(sha.trim()).is_file()
    {
        return Ok(sha.trim().to_string());
    }
    let fetch_url = s.config.resolve(&input.url);
    let client = download::client_with(&s.download);
    let (_, sha) = download::download_md5(
        &client,
        &fetch_url,
        &md5,
        &s.cache.root().join("downloads"),
        &s.download,
        s.reporter,
    )
    .map_err(|source| SourceError::Download {
        component: component.to_string(),
        source,
    })?;
    crate::fsutil::write_atomic(&memo, sha.as_bytes()).map_err(|source| SourceError::Io {
        component: component.to_string(),
        path: memo.display().to_string(),
        source,
    })?;
    s.reporter.note(&format!(
        "{component}: input {} is pinned by md5 only ({}): checked; run `rocforge lock` to pin its sha256 {sha}",
        input.name, input.url
    ));
    Ok(sha)
}

/// The newest mtime of a tar archive's entries (0 for an empty one): read from the headers,
/// as unpacking sets directories' times as it goes.
fn newest_entry(component: &str, file: &Path) -> Result<i64, SourceError> {
    let err = |why: String| SourceError::Unpack {
        component: component.to_string(),
        what: file.display().to_string(),
        why,
    };
    let reader = super::series::open_archive(file).map_err(|e| err(e.to_string()))?;
    let mut archive = tar::Archive::new(reader);
    let mut newest = 0u64;
    for entry in archive.entries().map_err(|e| err(e.to_string()))? {
        let entry = entry.map_err(|e| err(e.to_string()))?;
        newest = newest.max(entry.header().mtime().unwrap_or(0));
    }
    Ok(i64::try_from(newest).unwrap_or(i64::MAX))
}

/// The newest mtime of the files and symlinks under `dir` (0 when it holds none); times before
/// 1970 count as 0.
fn newest_file(dir: &Path) -> std::io::Result<i64> {
    let mut newest = 0i64;
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let meta = std::fs::symlink_metadata(e.path())?;
        let t = if meta.is_dir() {
            newest_file(&e.path())?
        } else {
            use std::os::unix::fs::MetadataExt;
            meta.mtime()
        };
        newest = newest.max(t);
    }
    Ok(newest)
}

/// Unpacks a tar archive (plain, gzip or zstd, told apart by magic bytes). With `strip_top`, a
/// single top-level directory is removed, as source tarballs wrap everything in one.
/// The tar crate refuses absolute paths and `..` components while unpacking.
fn unpack_tar(
    component: &str,
    file: &Path,
    dest: &Path,
    strip_top: bool,
) -> Result<(), SourceError> {
    let err = |why: String| SourceError::Unpack {
        component: component.to_string(),
        what: file.display().to_string(),
        why,
    };
    let reader = super::series::open_archive(file).map_err(|e| err(e.to_string()))?;
    let unpacked = dest.join(".unpack");
    std::fs::create_dir_all(&unpacked).map_err(|e| err(e.to_string()))?;
    let mut archive = tar::Archive::new(reader);
    archive.set_preserve_permissions(true);
    archive.set_overwrite(false);
    archive.unpack(&unpacked).map_err(|e| err(e.to_string()))?;
    let entries: Vec<_> = std::fs::read_dir(&unpacked)
        .map_err(|e| err(e.to_string()))?
        .flatten()
        .collect();
    // A Debian package's files sit at their installed paths (usr/…): nothing to strip.
    let strip_top = strip_top && !super::series::is_deb(file);
    let root =
        if strip_top && entries.len() == 1 && entries[0].file_type().is_ok_and(|t| t.is_dir()) {
            entries[0].path()
        } else {
            unpacked.clone()
        };
    for e in std::fs::read_dir(&root)
        .map_err(|e| err(e.to_string()))?
        .flatten()
    {
        std::fs::rename(e.path(), dest.join(e.file_name())).map_err(|e| err(e.to_string()))?;
    }
    crate::fsutil::remove_tree(&unpacked).map_err(|e| err(e.to_string()))
}
