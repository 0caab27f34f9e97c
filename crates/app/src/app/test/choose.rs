//! Which artifact a test runs: a store build (a container build first, else a host build),
//! else an index's artifacts, else, for a plan only, the build that would make it.

use crate::app::{Error, Result, Session};
use crate::arch::TargetId;
use crate::ids::ArtifactId;
use crate::install;
use crate::plan;
use crate::plan::key::RuntimeKind;
use crate::store::Store;
use crate::testrun::bundle::Artifact;
use crate::testrun::plan::Source;
use crate::testrun::select;

use super::Request;

/// The artifact under test and its dependencies: store entries (a container build first, else
/// a host build), or an index's artifacts when the store lacks them, chosen before anything
/// is installed so the journal knows the key.
pub(super) struct Chosen {
    pub source: Source,
    pub tested: Artifact,
    pub dependencies: Vec<Artifact>,
    /// A store build's keys, dependencies first: the trees linked into the prefix.
    pub trees: Vec<String>,
}

pub(super) fn choose(session: &Session, req: &Request<'_>, target: &TargetId) -> Result<Chosen> {
    let store = &session.store;
    let component = req.component;
    // The build for the target alone, else the newest that carries it (what a release
    // publishes: gfx90c,gfx902 for a test of gfx90c), planned as a build would plan it.
    let candidates = select::candidates(
        &store.entries(),
        &session.catalog.release.name,
        component,
        target,
    );
    let found = select::choose(candidates, store, target, |c| {
        let image = session.default_runtime_image(c.runtime)?;
        session.plan_for_targets(
            &[component.to_string()],
            &c.targets,
            c.runtime,
            image,
            Vec::new(),
        )
    })?;
    if let Some(c) = &found {
        session.reporter.note(&c.describe(component));
    }
    match (found, req.from) {
        (Some(c), _) => Ok(from_store(store, component, &c)),
        (None, Some(from)) => from_index(session, component, target, from),
        // A plan needs no build: it says what the run would test and how to make it.
        (None, None) if req.plan_only => not_built(session, component, target),
        (None, None) => Err(Error::hinted(
            format!("{component} for {target} is not in the store"),
            format!(
                "build it first: `rocforge build {component} --arch {target}` (add --runtime host to build without containers), or install it from an artifact index with --from URL_OR_DIR"
            ),
        )),
    }
}

/// A planned step as an artifact: its store entry's id, else the id its plan gives it.
fn entry(store: &Store, s: &plan::Step) -> Artifact {
    let meta = store.find(&s.key).ok();
    let id = meta
        .as_ref()
        .map(|m| m.artifact_id())
        .unwrap_or_else(|| ArtifactId {
            name: s.component.clone(),
            version: s.version.clone(),
            release: String::new(),
            targets: Vec::new(),
            key: s.key.clone(),
        });
    Artifact {
        id,
        runtime: meta.map(|m| m.runtime.to_string()).unwrap_or_default(),
    }
}

/// The store build `select` chose, with what an install of it would hold.
fn from_store(store: &Store, component: &str, c: &select::Chosen) -> Chosen {
    let plan = &c.plan;
    let step = plan
        .step(component)
        .expect("requested component is planned");
    let tested = entry(store, step);
    // What an install of the component would hold: a build-only dependency (Tensile
    // for rocBLAS) stays out of the prefix under test as it stays out of installs.
    let installed = plan.installed_with(&[component.to_string()]);
    let dependencies = installed
        .iter()
        .filter(|s| s.component != component)
        .map(|s| entry(store, s))
        .collect();
    Chosen {
        source: Source::Store {
            targets: c.targets.clone(),
            runtime: match c.runtime {
                RuntimeKind::Host => "host",
                RuntimeKind::Container => "container",
            }
            .into(),
            wider: c.wider,
        },
        tested,
        dependencies,
        trees: installed.iter().map(|s| s.key.to_string()).collect(),
    }
}

/// The component and its dependencies as the index at `from` resolves them for `target`.
fn from_index(session: &Session, component: &str, target: &TargetId, from: &str) -> Result<Chosen> {
    let loaded = super::signed_index(session, from)?;
    let chosen = install::resolve(
        &loaded.index,
        &[component.to_string()],
        std::slice::from_ref(target),
    )?;
    let as_entry = |x: &crate::package::index::Artifact| Artifact {
        id: x.id.clone(),
        runtime: "index".into(),
    };
    let tested = chosen
        .iter()
        .find(|x| x.name == component)
        .map(|x| as_entry(x))
        .expect("resolve returns the requested component");
    let dependencies = chosen
        .iter()
        .filter(|x| x.name != component)
        .map(|x| as_entry(x))
        .collect();
    Ok(Chosen {
        source: Source::Index {
            index: crate::redact::url(from),
        },
        tested,
        dependencies,
        trees: Vec::new(),
    })
}

/// What a container build for `target` alone would make, and the command that makes it.
fn not_built(session: &Session, component: &str, target: &TargetId) -> Result<Chosen> {
    let store = &session.store;
    let image = session.default_runtime_image(RuntimeKind::Container)?;
    let plan = session.plan_for_targets(
        &[component.to_string()],
        std::slice::from_ref(target),
        RuntimeKind::Container,
        image,
        Vec::new(),
    )?;
    let step = plan
        .step(component)
        .expect("requested component is planned");
    let installed = plan.installed_with(&[component.to_string()]);
    Ok(Chosen {
        source: Source::NotBuilt {
            build: format!("rocforge build {component} --arch {target}"),
        },
        tested: entry(store, step),
        dependencies: installed
            .iter()
            .filter(|s| s.component != component)
            .map(|s| entry(store, s))
            .collect(),
        trees: Vec::new(),
    })
}
