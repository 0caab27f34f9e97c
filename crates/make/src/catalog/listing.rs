//! `list`: the components and bundles of release lines, and whether each has been built.

use std::collections::BTreeSet;

use serde::Serialize;

use super::{Catalog, CatalogError, CatalogRoot};

pub const LIST_SCHEMA: &str = "rocforge.list/1";

/// One component of one release line.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Listed {
    pub name: String,
    pub version: String,
    pub release: String,
    /// The line is a preview: nothing built from it has been recorded.
    pub preview: bool,
    /// The line is the one used without --release.
    pub default: bool,
    /// Built from this line and recorded in its release.toml (`built`).
    pub built: bool,
    /// This machine's store holds a build of it (any targets).
    pub stored: bool,
    pub summary: String,
}

/// A name `build`, `install` and `package` take like a component's, for its members.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ListedBundle {
    pub name: String,
    pub release: String,
    pub components: Vec<String>,
}

/// `list --format json`.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Listing {
    pub schema: &'static str,
    pub components: Vec<Listed>,
    pub bundles: Vec<ListedBundle>,
}

/// The components and bundles of each line in `releases`, in order. `stored` holds the
/// (release line, component) pairs this machine's store has a build of.
pub fn listing(
    root: &CatalogRoot,
    releases: &[String],
    default: Option<&str>,
    stored: &BTreeSet<(String, String)>,
) -> Result<Listing, CatalogError> {
    let mut components = Vec::new();
    let mut bundles = Vec::new();
    for r in releases {
        let c = Catalog::load(root.clone(), Some(r))?;
        for (name, members) in &c.release.bundles {
            bundles.push(ListedBundle {
                name: name.clone(),
                release: r.clone(),
                components: members.iter().map(|m| m.value.clone()).collect(),
            });
        }
        for recipe in c.recipes.values() {
            let name = recipe.name.value.clone();
            components.push(Listed {
                built: c.release.built.iter().any(|b| b.value == name),
                stored: stored.contains(&(r.clone(), name.clone())),
                name,
                version: recipe.version.clone(),
                release: r.clone(),
                preview: c.release.preview,
                default: default == Some(r.as_str()),
                summary: recipe.summary.clone(),
            });
        }
    }
    Ok(Listing {
        schema: LIST_SCHEMA,
        components,
        bundles,
    })
}
