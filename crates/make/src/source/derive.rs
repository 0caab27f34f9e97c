//! Derived files and overlays: declarative steps after patching.
//!
//! Tensile picks logic files by a codename prefix in the file name (its architecture map sends
//! gfx900 to `vega10`). A derivation copies the vega10 logic under the target's own prefix,
//! renaming files and rewriting the architecture fields and ISA inside them; the Tensile patch
//! maps the target to that prefix. An overlay replaces a directory of the source with the
//! user's own (e.g. tuned logic).

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::arch::ArchTable;
use crate::catalog::Overlay;
use crate::recipe::{Derive, is_inner_path};

#[derive(Debug, thiserror::Error)]
pub enum DeriveError {
    #[error("derivation source {from} does not exist in the patched tree of {component}")]
    MissingFrom { component: String, from: String },
    #[error(
        "derivation for {arch} would overwrite {path}, which already exists in {component}'s source"
    )]
    Exists {
        component: String,
        arch: String,
        path: String,
    },
    #[error("overlay {spec}: {why}")]
    Overlay { spec: String, why: String },
    /// A path the source tree itself would lead out of the tree, through a link it planted.
    #[error("{what}: {source}")]
    Outside {
        what: String,
        source: Box<super::tree::Escape>,
    },
    #[error("cannot write {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
}

impl crate::diag::Hint for DeriveError {
    fn hint(&self) -> String {
        match self {
            DeriveError::MissingFrom { .. } => "the upstream layout changed: fix `from` in the recipe's [[derive]]".into(),
            DeriveError::Exists { .. } => "upstream now ships this target's files: drop the [[derive]] for it".into(),
            DeriveError::Overlay { .. } => "write --overlay COMPONENT:PATH_IN_SOURCE=LOCAL_DIR, e.g. rocblas:library/src/blas3/Tensile/Logic/asm_full/gfx90c=./my-logic".into(),
            DeriveError::Outside { .. } => "a derivation or overlay writes and reads only inside the source: point it at a real directory of the source, not one reached through a link".into(),
            DeriveError::Io { .. } => "check free disk space".into(),
        }
    }
}

pub use crate::recipe::derive_vars::{substitute, vars_for};

/// Runs every derivation whose arches include a targeted processor.
pub fn apply(
    component: &str,
    tree: &Path,
    derives: &[Derive],
    arches: &[&str],
    table: &ArchTable,
) -> Result<(), DeriveError> {
    for d in derives {
        for arch in arches.iter().filter(|a| d.arches.iter().any(|x| x == *a)) {
            let vars = vars_for(arch, table, d);
            let outside = |what: &str| {
                let what = what.to_string();
                move |source| DeriveError::Outside {
                    what: format!("derivation for {arch}: {what}"),
                    source: Box::new(source),
                }
            };
            // The source's own links must not take a read or a write out of the tree: a host
            // file would be copied into the artifact, or a file created outside the cache.
            let from = super::tree::inside(tree, &d.from, false).map_err(outside("from"))?;
            if std::fs::symlink_metadata(&from).is_err() {
                return Err(DeriveError::MissingFrom {
                    component: component.into(),
                    from: d.from.clone(),
                });
            }
            let to_rel = substitute(&d.to, &vars);
            let to = super::tree::inside(tree, &to_rel, true).map_err(outside("to"))?;
            if std::fs::symlink_metadata(&to).is_ok() {
                return Err(DeriveError::Exists {
                    component: component.into(),
                    arch: arch.to_string(),
                    path: to_rel,
                });
            }
            let rename: Vec<(String, String)> = d
                .rename
                .iter()
                .map(|(a, b)| (a.clone(), substitute(b, &vars)))
                .collect();
            let replace: Vec<(String, String)> = d
                .replace
                .iter()
                .map(|(a, b)| (a.clone(), substitute(b, &vars)))
                .collect();
            copy_rewritten(&from, &to, &rename, &replace)?;
        }
    }
    Ok(())
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> DeriveError + '_ {
    move |source| DeriveError::Io {
        path: path.display().to_string(),
        source,
    }
}

fn copy_rewritten(
    from: &Path,
    to: &Path,
    rename: &[(String, String)],
    replace: &[(String, String)],
) -> Result<(), DeriveError> {
    let meta = std::fs::symlink_metadata(from).map_err(io(from))?;
    if meta.is_dir() {
        std::fs::create_dir_all(to).map_err(io(to))?;
        let mut entries: Vec<_> = std::fs::read_dir(from)
            .map_err(io(from))?
            .flatten()
            .collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let mut name = e.file_name().to_string_lossy().into_owned();
            for (a, b) in rename {
                name = name.replace(a.as_str(), b);
            }
            copy_rewritten(&e.path(), &to.join(name), rename, replace)?;
        }
        return Ok(());
    }
    if meta.file_type().is_symlink() {
        let target = std::fs::read_link(from).map_err(io(from))?;
        std::os::unix::fs::symlink(target, to).map_err(io(to))?;
        return Ok(());
    }
    let mut out = std::fs::read(from).map_err(io(from))?;
    // Binary files (any NUL byte, grep's rule, which the Nix overlay's postPatch uses too) are
    // copied as they are: text rewriting would corrupt them. Text is rewritten as bytes, so a
    // file in another encoding than UTF-8 is treated like grep and bash treat it.
    if !out.contains(&0) {
        for (a, b) in replace {
            out = replace_bytes(&out, a.as_bytes(), b.as_bytes());
        }
    }
    std::fs::write(to, out).map_err(io(to))?;
    std::fs::set_permissions(to, meta.permissions()).map_err(io(to))?;
    Ok(())
}

/// Every non-overlapping occurrence of `from`, left to right (as `str::replace` and bash's
/// `${x//from/to}` do).
fn replace_bytes(hay: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    if from.is_empty() {
        return hay.to_vec();
    }
    let mut out = Vec::with_capacity(hay.len());
    let mut i = 0;
    while i < hay.len() {
        if hay[i..].starts_with(from) {
            out.extend_from_slice(to);
            i += from.len();
        } else {
            out.push(hay[i]);
            i += 1;
        }
    }
    out
}

/// Reading and applying an overlay are source work; the plan sees only what it names.
impl Overlay {
    pub fn parse(spec: &str) -> Result<Overlay, DeriveError> {
        let err = |why: &str| DeriveError::Overlay {
            spec: spec.to_string(),
            why: why.to_string(),
        };
        let (component, rest) = spec
            .split_once(':')
            .ok_or_else(|| err("missing COMPONENT:"))?;
        let component: crate::ids::ComponentName = component
            .parse()
            .map_err(|_| err("COMPONENT is not a component name (`rocforge list` names them)"))?;
        let (dest, dir) = rest
            .split_once('=')
            .ok_or_else(|| err("missing =LOCAL_DIR"))?;
        if !is_inner_path(dest) {
            return Err(err(
                "the path inside the source must be relative and stay inside it",
            ));
        }
        let dir = PathBuf::from(dir);
        if !dir.is_dir() {
            return Err(err(&format!("{} is not a directory", dir.display())));
        }
        let sha256 = hash_tree(&dir).map_err(|source| DeriveError::Io {
            path: dir.display().to_string(),
            source,
        })?;
        Ok(Overlay {
            component,
            dest: dest.to_string(),
            dir,
            sha256,
        })
    }

    pub fn apply(&self, tree: &Path) -> Result<(), DeriveError> {
        // The destination is removed, then written: neither may go through a link the source
        // planted (it would delete or fill a directory outside the tree).
        let dest =
            super::tree::inside(tree, &self.dest, true).map_err(|source| DeriveError::Outside {
                what: format!("overlay {}", self.dest),
                source: Box::new(source),
            })?;
        if dest.exists() {
            crate::fsutil::remove_tree(&dest).map_err(io(&dest))?;
        }
        copy_rewritten(&self.dir, &dest, &[], &[])
    }
}

/// A content digest of a directory: relative paths, kinds, exec bits and contents, in sorted
/// order, so the same tree hashes the same on every machine.
pub fn hash_tree(dir: &Path) -> std::io::Result<String> {
    let mut h = Sha256::new();
    hash_into(dir, Path::new(""), &mut h)?;
    Ok(hex::encode(h.finalize()))
}

/// [`hash_tree`] of a directory of the built-in catalog: the digest its exported copy has
/// (`catalog export` writes plain files, none executable), so a path source keys the same
/// whether it is read from the binary or from an exported catalog.
pub fn hash_embedded(dir: &include_dir::Dir<'_>) -> String {
    let mut h = Sha256::new();
    hash_embedded_into(dir.path(), dir, &mut h);
    hex::encode(h.finalize())
}

fn hash_embedded_into(root: &Path, dir: &include_dir::Dir<'_>, h: &mut Sha256) {
    let mut entries: Vec<&include_dir::DirEntry<'_>> = dir.entries().iter().collect();
    entries.sort_by_key(|e| e.path().file_name().map(|n| n.to_os_string()));
    for e in entries {
        // Relative to the source's root, as hash_tree's walk names them.
        let name = e.path().strip_prefix(root).unwrap_or(e.path());
        let name = name.to_string_lossy();
        match e {
            include_dir::DirEntry::Dir(d) => {
                h.update(format!("d {name}\0").as_bytes());
                hash_embedded_into(root, d, h);
            }
            include_dir::DirEntry::File(f) => {
                let bytes = f.contents();
                h.update(format!("f {name}\0{}\0{}\0", 0u8, bytes.len()).as_bytes());
                h.update(bytes);
            }
        }
    }
}

fn hash_into(root: &Path, rel: &Path, h: &mut Sha256) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mut entries: Vec<_> = std::fs::read_dir(root.join(rel))?.collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let path = rel.join(e.file_name());
        let meta = std::fs::symlink_metadata(e.path())?;
        let name = path.to_string_lossy();
        if meta.is_dir() {
            h.update(format!("d {name}\0").as_bytes());
            hash_into(root, &path, h)?;
        } else if meta.file_type().is_symlink() {
            let target = std::fs::read_link(e.path())?;
            h.update(format!("l {name}\0{}\0", target.to_string_lossy()).as_bytes());
        } else {
            let exec = meta.permissions().mode() & 0o111 != 0;
            let bytes = std::fs::read(e.path())?;
            h.update(format!("f {name}\0{}\0{}\0", exec as u8, bytes.len()).as_bytes());
            h.update(&bytes);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn substitution_uses_every_var() {
        let mut v = std::collections::BTreeMap::new();
        v.insert("arch".into(), "gfx90c".into());
        v.insert("codename".into(), "renoir".into());
        assert_eq!(
            substitute("asm_full/{codename}/{arch}_{x}", &v),
            "asm_full/renoir/gfx90c_{x}"
        );
    }
}
