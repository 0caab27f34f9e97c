//! `fetch`: each named component's patched source prepared in the source cache, not its
//! dependencies', every name checked before anything is downloaded. Each source is resolved
//! against the lock as a plan would resolve it.

use super::{Result, Session};
use crate::arch::TargetId;
use crate::recipe::Recipe;
use crate::source::prepare::{self, Prepared};
use crate::source::resolved::Resolved;

/// Prepares each of `components` (with `overlay_specs`, COMPONENT:PATH=DIR), calling
/// `done` after each (with the targets it was prepared for), so a caller shows it before the
/// next one starts.
pub fn fetch(
    session: &Session,
    components: &[String],
    overlay_specs: &[String],
    done: &mut dyn FnMut(&Recipe, &Prepared, &[TargetId]),
) -> Result<Vec<Prepared>> {
    let lock = session.lock()?;
    session.config()?;
    let overlays = session.overlays(overlay_specs)?;
    let targets = session.targets()?;
    let recipes = components
        .iter()
        .map(|c| session.recipe(c))
        .collect::<Result<Vec<_>>>()?;
    let sources = session.sources(&overlays, false)?;
    let mut fetched = Vec::new();
    for recipe in recipes {
        let resolved = Resolved::of(&session.catalog, lock, recipe)?;
        let prepared = prepare::prepare(&sources, recipe, &resolved, targets)?;
        done(recipe, &prepared, targets);
        fetched.push(prepared);
    }
    Ok(fetched)
}
