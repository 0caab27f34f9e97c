//! A recipe's source as one plan resolved it: how its git source is pinned, its path tree's
//! digest, and the pins of its extra inputs. Planning resolves it once and the plan's step
//! carries it; `prepare` fetches exactly this and asks the lock nothing, so the key a plan
//! shows and the tree a build gets cannot come from two readings of the lock, and a path
//! source's tree is walked once.

use crate::catalog::Catalog;
use crate::catalog::lock::{InputPin, Lockfile, Pin};
use crate::recipe::{Recipe, Source};

use super::prepare::{SourceError, path_tree_digest};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// A git source's pin ([`Pin::NotGit`] for the others, which their content pins).
    pub pin: Pin,
    /// A `path` source's tree digest (paths, modes, bytes); None for the others.
    pub tree: Option<String>,
    /// Each extra input's pin, in the recipe's order.
    pub inputs: Vec<(String, InputPin)>,
}

impl Resolved {
    pub fn of(catalog: &Catalog, lock: &Lockfile, recipe: &Recipe) -> Result<Self, SourceError> {
        let release = &catalog.release.name;
        let component = recipe.name.value.as_str();
        Ok(Resolved {
            pin: lock.pin(release, recipe),
            tree: match &recipe.source {
                Source::Path { path } => Some(path_tree_digest(catalog, component, path)?),
                _ => None,
            },
            inputs: recipe
                .inputs
                .iter()
                .map(|i| (i.name.clone(), lock.input_pin(release, component, i)))
                .collect(),
        })
    }

    /// The commit rocforge.lock (or the recipe's own rev) pins; None while unlocked or stale.
    pub fn locked_commit(&self) -> Option<&str> {
        match &self.pin {
            Pin::Commit(c) => Some(c),
            _ => None,
        }
    }

    /// Whether every pin comes from the lock or the recipe: nothing to resolve afresh.
    pub fn locked(&self) -> bool {
        !matches!(self.pin, Pin::Unlocked | Pin::Stale { .. })
    }

    /// The pin of the input `name`.
    pub fn input(&self, name: &str) -> Option<&InputPin> {
        self.inputs.iter().find(|(n, _)| n == name).map(|(_, p)| p)
    }
}
