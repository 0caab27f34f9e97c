//! The pristine source fetched into a tree: a git checkout (whole or sparse), a verified
//! tarball unpacked, or a `path` source copied from the catalog.

use std::path::{Path, PathBuf};

use super::unpack::{newest_entry, newest_file, unpack_tar};
use super::{Origin, SourceError, Sources};
use crate::catalog::{Catalog, CatalogRoot};
use crate::download;
use crate::recipe::{Recipe, Source};
use crate::source::derive::{self, hash_tree};
use crate::source::git;

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

pub(super) fn fetch_origin(
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
    crate::source::tree::sanitize(tree).map_err(|source| SourceError::Io {
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

pub(super) fn fetch_file(
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
