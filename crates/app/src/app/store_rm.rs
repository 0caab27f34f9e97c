//! `store rm`: which store entries a user's words name (content keys, key prefixes, or
//! component names, narrowed by targets), then each removed under its lock.

use super::{Error, Result};
use crate::arch::TargetId;
use crate::diag::Hint;
use crate::store::{EntryMeta, Store, StoreError};

/// The entries `specs` name. A spec of 8 or more hex characters that starts one key is that
/// entry; otherwise it is a component name, every build of it (those for `targets` when
/// given). A spec that names nothing is an error: a typo never removes less than asked
/// silently, and nothing is removed until every spec has been resolved.
pub fn select(
    store: &Store,
    specs: &[String],
    targets: Option<&[TargetId]>,
) -> Result<Vec<EntryMeta>> {
    let entries = store.entries();
    let mut chosen: Vec<EntryMeta> = Vec::new();
    for spec in specs {
        let by_key: Vec<&EntryMeta> = entries
            .iter()
            .filter(|e| spec.len() >= 8 && e.key.as_str().starts_with(spec.as_str()))
            .collect();
        let found: Vec<&EntryMeta> = if by_key.len() > 1 {
            return Err(Error::hinted(
                format!("key prefix {spec} names {} store entries", by_key.len()),
                "give more characters of the key (`rocforge store list`)",
            ));
        } else if !by_key.is_empty() {
            by_key
        } else {
            entries
                .iter()
                .filter(|e| e.component.as_str() == spec.as_str())
                .filter(|e| targets.is_none_or(|t| same_targets(&e.targets, t)))
                .collect()
        };
        if found.is_empty() {
            let known = entries
                .iter()
                .any(|e| e.component.as_str() == spec.as_str());
            return Err(Error::hinted(
                match (known, targets) {
                    (true, Some(t)) => format!(
                        "the store has no build of {spec} for {}",
                        crate::arch::comma_list(t)
                    ),
                    _ => format!("the store has no entry or component named {spec}"),
                },
                format!(
                    "`rocforge store list` shows the entries of {}: keys (a prefix of 8 or more characters is enough) and components",
                    store.root().display()
                ),
            ));
        }
        for e in found {
            if !chosen.iter().any(|c| c.key == e.key) {
                chosen.push(e.clone());
            }
        }
    }
    Ok(chosen)
}

fn same_targets(a: &[TargetId], b: &[TargetId]) -> bool {
    let mut a: Vec<_> = a.iter().map(|t| t.to_string()).collect();
    let mut b: Vec<_> = b.iter().map(|t| t.to_string()).collect();
    a.sort();
    b.sort();
    a == b
}

/// Removes one entry, refusing one that another process is building or replacing.
pub fn remove(store: &Store, entry: &EntryMeta) -> Result<()> {
    store
        .remove_unless_busy(entry.key.as_str())
        .map_err(|e: StoreError| {
            let hint = e.hint();
            Error::hinted(e, hint)
        })
}
