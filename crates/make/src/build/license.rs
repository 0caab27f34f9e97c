//! License files: after a build, the source's license files are copied into the install tree
//! under `share/doc/<component>/`, so they are part of the store entry, of every tarball made
//! from it and of every installed prefix.
//!
//! Which files: the recipe's `license-files` (paths relative to the top of the source) when it
//! has them, each of which must exist; otherwise every regular file at the source root (the
//! `subdir` of a monorepo source first, then the repository's top) whose name starts with
//! LICENSE, LICENCE, COPYING, NOTICE or COPYRIGHT, case-insensitively.

use std::path::{Path, PathBuf};

use crate::recipe::{Recipe, Source};
use crate::store::{doc_dir, is_license_name};

#[derive(Debug, thiserror::Error)]
pub enum LicenseError {
    #[error("{at}: {component}: the license file {path} is not in the source")]
    Missing {
        component: String,
        /// `recipe file:line:col` of the entry.
        at: String,
        path: String,
    },
    #[error("{at}: {component}: the license file {path} is not a regular file inside the source")]
    Outside {
        component: String,
        at: String,
        path: String,
    },
    #[error("{component}: cannot copy license files into {}: {reason}", path.display())]
    Tree {
        component: String,
        path: PathBuf,
        reason: String,
    },
}

impl crate::diag::Hint for LicenseError {
    fn hint(&self) -> String {
        match self {
            LicenseError::Missing { .. } => {
                "fix the path in license-files (relative to the top of the source, e.g. \"LICENSE.md\"); `rocforge fetch COMPONENT` shows the source tree".into()
            }
            LicenseError::Outside { .. } => {
                "list a regular file of the source itself; a symlink must point inside the source".into()
            }
            LicenseError::Tree { .. } => {
                "the build's install tree must not make share/doc or share/doc/COMPONENT a symlink or a file; check free disk space".into()
            }
        }
    }
}

/// What [`collect`] did.
#[derive(Debug, Default)]
pub struct Collected {
    /// Paths relative to the tree, sorted.
    pub files: Vec<String>,
}

/// Copies the license files of `recipe`'s source (`source`: the top of the fetched, patched
/// tree) into `tree/share/doc/<name>/`. A file the build already installed there with the same
/// name is kept (and listed); one with other contents gets `source-` before the copy's name.
pub fn collect(recipe: &Recipe, source: &Path, tree: &Path) -> Result<Collected, LicenseError> {
    let component = recipe.name.value.clone();
    let source_root = source.canonicalize().map_err(|e| LicenseError::Tree {
        component: component.clone(),
        path: source.to_path_buf(),
        reason: e.to_string(),
    })?;
    // (path in the source, for names) → the file to read.
    let mut picked: Vec<(String, PathBuf)> = Vec::new();
    if recipe.license_files.is_empty() {
        let mut roots = Vec::new();
        if let Source::Git {
            subdir: Some(s), ..
        } = &recipe.source
        {
            roots.push((format!("{s}/"), source.join(s)));
        }
        roots.push((String::new(), source.to_path_buf()));
        for (prefix, dir) in roots {
            let Ok(rd) = std::fs::read_dir(&dir) else {
                continue;
            };
            let mut found: Vec<(String, PathBuf)> = rd
                .flatten()
                .filter_map(|e| {
                    let name = e.file_name().to_str()?.to_string();
                    if !is_license_name(&name) {
                        return None;
                    }
                    let p = e.path();
                    inside(&source_root, &p).then(|| (format!("{prefix}{name}"), p))
                })
                .collect();
            if !found.is_empty() {
                found.sort();
                picked = found;
                break;
            }
        }
    } else {
        for p in &recipe.license_files {
            let (line, col) = recipe.file.line_col(p.span.start);
            let at = format!("{}:{line}:{col}", recipe.file.display);
            let path = source.join(&p.value);
            if std::fs::symlink_metadata(&path).is_err() {
                return Err(LicenseError::Missing {
                    component,
                    at,
                    path: p.value.clone(),
                });
            }
            if !inside(&source_root, &path) {
                return Err(LicenseError::Outside {
                    component,
                    at,
                    path: p.value.clone(),
                });
            }
            picked.push((p.value.clone(), path));
        }
    }
    if picked.is_empty() {
        return Ok(Collected::default());
    }
    let rel_dir = doc_dir(&component);
    let tree_err = |path: &Path, reason: String| LicenseError::Tree {
        component: component.clone(),
        path: path.to_path_buf(),
        reason,
    };
    // Never write through a symlink the build left in the tree.
    let mut dir = tree.to_path_buf();
    for c in rel_dir.split('/') {
        dir.push(c);
        match std::fs::symlink_metadata(&dir) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => return Err(tree_err(&dir, "it is not a directory".into())),
            Err(_) => std::fs::create_dir(&dir).map_err(|e| tree_err(&dir, e.to_string()))?,
        }
    }
    let mut used: std::collections::BTreeSet<String> = std::collections::BTreeSet::new();
    let mut files = Vec::new();
    for (from_rel, from) in picked {
        let bytes = std::fs::read(&from).map_err(|e| tree_err(&from, e.to_string()))?;
        let base = from_rel.rsplit('/').next().unwrap_or(&from_rel).to_string();
        let mut name = if used.contains(&base) {
            from_rel.replace('/', "-")
        } else {
            base
        };
        let dest = dir.join(&name);
        match std::fs::symlink_metadata(&dest) {
            Ok(m) if m.is_file() && std::fs::read(&dest).ok().as_deref() == Some(&bytes[..]) => {
                used.insert(name.clone());
                files.push(format!("{rel_dir}/{name}"));
                continue;
            }
            Ok(_) => name = format!("source-{name}"),
            Err(_) => {}
        }
        let dest = dir.join(&name);
        if std::fs::symlink_metadata(&dest).is_ok() {
            return Err(tree_err(&dest, "it exists already".into()));
        }
        crate::fsutil::write_atomic(&dest, &bytes).map_err(|e| tree_err(&dest, e.to_string()))?;
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&dest, std::fs::Permissions::from_mode(0o644))
                .map_err(|e| tree_err(&dest, e.to_string()))?;
        }
        used.insert(name.clone());
        files.push(format!("{rel_dir}/{name}"));
    }
    files.sort();
    files.dedup();
    Ok(Collected { files })
}

/// Whether `path` resolves to a regular file inside `root` (canonical).
fn inside(root: &Path, path: &Path) -> bool {
    match path.canonicalize() {
        Ok(c) => c.starts_with(root) && c.is_file(),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn license_names() {
        for n in [
            "LICENSE",
            "LICENSE.md",
            "license.txt",
            "COPYING.LIB",
            "NOTICE",
            "Licence",
        ] {
            assert!(is_license_name(n), "{n}");
        }
        for n in ["README.md", "CMakeLists.txt", "LICENS"] {
            assert!(!is_license_name(n), "{n}");
        }
    }
}
