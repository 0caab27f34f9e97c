//! `package`: the store entries a built plan delivers written as tarballs (manifests, SBOMs,
//! provenance and signatures beside them), then the release's checksums and signed index.
//! Nothing is built: a component not in the store is refused with the build that makes it.

use std::path::{Path, PathBuf};

use super::{Result, Session};
use crate::package::tarball::Compression;
use crate::package::{self, Packaged, index::Index};
use crate::plan::key::RuntimeKind;
use crate::sign::SecretKey;
use crate::source::cache::Cache;

/// What `package` is asked for.
pub struct Request<'a> {
    /// Components (with their run-time dependencies); bundles are expanded.
    pub components: &'a [String],
    /// The overlays the build was given (COMPONENT:PATH=DIR): part of the content keys.
    pub overlay_specs: &'a [String],
    /// Whose builds: the container runtime's or the host's.
    pub runtime: RuntimeKind,
    pub out: &'a Path,
    pub compression: Compression,
    /// Signs the tarballs and the index; None writes them unsigned (and says so).
    pub key: Option<&'a SecretKey>,
    pub expires_days: u64,
    /// Package files that name the store or cache paths (they will not relocate).
    pub allow_build_paths: bool,
}

/// A packaged release directory.
pub struct Released {
    pub packaged: Vec<Packaged>,
    /// Every file written beside the tarballs (checksums, index, signatures).
    pub files: Vec<PathBuf>,
    pub index: Index,
}

pub fn package(session: &Session, req: &Request<'_>) -> Result<Released> {
    let (catalog, store) = (&session.catalog, &session.store);
    let reporter = session.reporter.as_ref();
    let plan = session.built_plan(req.components, req.runtime, req.overlay_specs)?;
    if req.key.is_none() {
        reporter.note(
            "WARNING: no signing key (--key, ROCFORGE_SIGNING_KEY or `rocforge key generate`): \
             the tarballs and index are UNSIGNED and `rocforge install` refuses them without --allow-unsigned",
        );
    }
    let build_paths = build_paths(store.root(), &Cache::default_root());
    let mut packaged = Vec::new();
    // Not a build-only dependency unless it was asked for: no install would take it.
    for step in plan.delivered() {
        let task = reporter.task(&format!("packaging {}", step.component), None, false);
        let opts = package::Options {
            compression: req.compression,
            out_dir: req.out,
            build_paths: build_paths.clone(),
            allow_build_paths: req.allow_build_paths,
            license: catalog.get(&step.component).map(|r| r.license.clone()),
            build_only: step.build_only.clone(),
            dependency_keys: step
                .depends
                .iter()
                .filter_map(|d| Some((d.clone(), plan.step(d)?.key.clone())))
                .collect(),
            key: req.key,
        };
        let p = package::package_entry(store, &step.key, &opts)?;
        task.finish(&format!("{}: {}", step.component, p.tarball.file_name));
        if p.licenses.is_empty() {
            reporter.note(&format!(
                "warning: {}: the tarball carries no license file (none was found in its source \
                 when it was built; list them with license-files = [\"…\"] in its recipe and \
                 build again)",
                p.component
            ));
        }
        for (f, path) in &p.leaks {
            reporter.note(&format!(
                "warning: {}: {f} contains the build path {path}",
                p.component
            ));
        }
        packaged.push(p);
    }
    let (files, index) = package::finish_release(req.out, &packaged, req.key, req.expires_days)?;
    Ok(Released {
        packaged,
        files,
        index,
    })
}

/// The paths a packaged file must not name: the store's and the source cache's, as given and
/// as resolved.
fn build_paths(store: &Path, cache: &Path) -> Vec<String> {
    let mut out = vec![store.display().to_string(), cache.display().to_string()];
    for p in [store, cache] {
        if let Ok(c) = p.canonicalize() {
            out.push(c.display().to_string());
        }
    }
    out.sort();
    out.dedup();
    out
}
