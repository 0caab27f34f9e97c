//! A catalog: the target table plus release lines of recipes, and the patches they name.
//!
//! The shipped catalog is embedded in the binary so an installed `rocforge` works anywhere;
//! `--recipes DIR` points at a directory tree of the same shape instead. The other inputs of a
//! plan sit beside the recipes: rocforge.lock ([`lock`]), rocforge.toml ([`config`]) and the
//! `--overlay` directories ([`Overlay`]), with what each targeted processor's Tensile logic is ([`logic`]).

pub mod checked;
pub mod config;
pub mod containers;
pub mod listing;
pub mod lock;
pub mod logic;

mod checks;
mod cycles;
mod embedded;
mod load;
mod overlay;
mod root;

use std::collections::BTreeMap;
use std::io;

use crate::arch::{ARCHES_FILE, ArchTable};
use crate::diag::{Diagnostic, Diagnostics, SourceFile, did_you_mean};
use crate::recipe::Recipe;
use crate::recipe::release::Release;

pub use cycles::find_cycles;
pub use embedded::{
    EMBEDDED_LOCK, ExportError, embedded_path_source, export_embedded, write_embedded,
};
use load::load_line;
pub use overlay::Overlay;
pub use root::{CatalogRoot, display_path};

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

/// An invalid catalog is every problem found, not one message.
impl From<CatalogError> for crate::diag::error::Error {
    fn from(e: CatalogError) -> Self {
        use crate::diag::error::Error;
        let hint = e.hint();
        match e {
            CatalogError::Invalid(d) => Error::Diagnostics(d),
            other => Error::One(crate::diag::Diagnostic::new(other.to_string()).maybe_hint(hint)),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_default_line_is_one_that_has_been_built() {
        let name = CatalogRoot::Embedded.default_release().unwrap().unwrap();
        assert_eq!(name, "debian-6.4");
        let c = Catalog::load(CatalogRoot::Embedded, None).unwrap();
        assert!(!c.release.preview);
        assert_eq!(c.release.built.len(), 20, "{:?}", c.release.built);
        // The lines never built are previews, and a line may be based on one (debian-6.4's
        // recipes are rocm-6.4.4's).
        for preview in ["rocm-6.4.4", "rocm-7.14.0"] {
            let c = Catalog::load(CatalogRoot::Embedded, Some(preview)).unwrap();
            assert!(c.release.preview, "{preview}");
            assert!(c.release.built.is_empty(), "{preview}");
        }
    }
}
