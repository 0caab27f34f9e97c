//! Which build `rocforge test` tests: one that carries the requested target, not only one built
//! for it alone.
//!
//! A release is built for several targets at once (a line's default `gfx90c,gfx902`) and what
//! is published is that build, so a test of gfx90c must be able to use it. Every target set the
//! store holds a build of the component for, including the requested target, is a candidate;
//! each is planned as a build would plan it, and taken only when the plan's component and all
//! its dependencies are in the store: so the tree tested is exactly what the current catalog
//! would build for those targets, never a stale entry. The build for the requested target alone
//! comes first (nothing else in it), then the newest.

use crate::arch::TargetId;
use crate::plan::Plan;
use crate::plan::StoreView;
use crate::plan::key::RuntimeKind;
use crate::store::EntryMeta;

/// A target set and runtime to plan the component for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub targets: Vec<TargetId>,
    pub runtime: RuntimeKind,
}

/// The build chosen, and why the user should know which.
#[derive(Debug)]
pub struct Chosen {
    pub plan: Plan,
    pub targets: Vec<TargetId>,
    pub runtime: RuntimeKind,
    /// Built for more targets than the one tested.
    pub wider: bool,
}

impl Chosen {
    /// One line for the user: which build is tested.
    pub fn describe(&self, component: &str) -> String {
        let key = self
            .plan
            .step(component)
            .map(|s| s.key.short())
            .unwrap_or_default();
        let targets = self
            .targets
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(",");
        let runtime = match self.runtime {
            RuntimeKind::Host => " (host build)",
            RuntimeKind::Container => "",
        };
        format!("using {component} {key} from the store, built for {targets}{runtime}")
    }
}

fn runtime_of(e: &EntryMeta) -> RuntimeKind {
    if e.runtime == rocforge_make::runtime::RuntimeName::Host {
        RuntimeKind::Host
    } else {
        RuntimeKind::Container
    }
}

/// The target sets to try, best first: `target` alone (container build, then host), then each
/// set the store's entries of `component` in `release` carry that includes `target`, newest
/// first. Entries with a target that does not parse are passed over.
pub fn candidates(
    entries: &[EntryMeta],
    release: &str,
    component: &str,
    target: &TargetId,
) -> Vec<Candidate> {
    let mut out: Vec<Candidate> = [RuntimeKind::Container, RuntimeKind::Host]
        .into_iter()
        .map(|runtime| Candidate {
            targets: vec![target.clone()],
            runtime,
        })
        .collect();
    let mut found: Vec<&EntryMeta> = entries
        .iter()
        .filter(|e| e.component == component && e.release == release)
        .filter(|e| e.targets.contains(target))
        .collect();
    found.sort_by_key(|e| std::cmp::Reverse(e.committed));
    for e in found {
        let c = Candidate {
            targets: e.targets.clone(),
            runtime: runtime_of(e),
        };
        if !out.contains(&c) {
            out.push(c);
        }
    }
    out
}

/// The first candidate whose plan is wholly in the store. `plan_for` plans the component for a
/// target set and runtime as `rocforge build` would.
pub fn choose<E>(
    candidates: Vec<Candidate>,
    store: &dyn StoreView,
    target: &TargetId,
    mut plan_for: impl FnMut(&Candidate) -> Result<Plan, E>,
) -> Result<Option<Chosen>, E> {
    for c in candidates {
        let plan = plan_for(&c)?;
        if plan.delivered().iter().all(|s| store.contains(&s.key)) {
            return Ok(Some(Chosen {
                wider: c.targets.len() > 1 || c.targets[0] != *target,
                plan,
                targets: c.targets,
                runtime: c.runtime,
            }));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(key: &str, targets: &[&str], runtime: &str, committed: u64) -> EntryMeta {
        serde_json::from_value(serde_json::json!({
            "component": "rocsparse",
            "key": key.repeat(64),
            "committed": committed,
            "release": "rocm-6.4.4",
            "targets": targets,
            "runtime": runtime,
        }))
        .expect("entry")
    }

    #[test]
    fn the_exact_set_first_then_the_newest_that_carries_the_target() {
        let t: TargetId = "gfx90c".parse().unwrap();
        let entries = vec![
            entry("a", &["gfx90c", "gfx902"], "podman", 10),
            entry("b", &["gfx1030"], "podman", 30),
            entry("c", &["gfx902", "gfx90c", "gfx1030"], "host", 20),
            entry("d", &["gfx90c", "gfx902"], "docker", 5),
        ];
        let got: Vec<(String, RuntimeKind)> = candidates(&entries, "rocm-6.4.4", "rocsparse", &t)
            .into_iter()
            .map(|c| {
                (
                    c.targets
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(","),
                    c.runtime,
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                ("gfx90c".into(), RuntimeKind::Container),
                ("gfx90c".into(), RuntimeKind::Host),
                ("gfx902,gfx90c,gfx1030".into(), RuntimeKind::Host),
                ("gfx90c,gfx902".into(), RuntimeKind::Container),
            ]
        );
    }
}
