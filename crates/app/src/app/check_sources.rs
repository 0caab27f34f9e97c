//! `check --sources`: every component's patches and derivations applied to its real source,
//! for every target set, in scratch copies (the source cache is not written).

use std::sync::Arc;

use serde::Serialize;

use super::{Error, Options, Result, Session, release_names};
use crate::diag::Diagnostic;
use crate::progress::Reporter;
use crate::source::verify::{self, SourceCheck};

/// The `schema` of `check --sources --format json`.
pub const CHECK_SOURCES_SCHEMA: &str = "rocforge.check-sources/1";

/// One component and target set of one release line.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Row {
    pub release: String,
    #[serde(flatten)]
    pub check: SourceCheck,
}

/// The `rocforge.check-sources/1` report.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Report {
    pub checks: Vec<Row>,
    /// Every check applies.
    pub ok: bool,
    pub schema: &'static str,
}

impl Report {
    pub fn failed(&self) -> usize {
        self.checks.iter().filter(|r| !r.check.outcome.ok()).count()
    }
}

/// Checks `components` (every component when empty) of `--release`, else of every release
/// line; a name must belong to at least one line.
pub fn check_sources(
    options: &Options,
    reporter: Arc<dyn Reporter>,
    components: &[String],
    only_patched: bool,
) -> Result<Report> {
    let releases = release_names(&options.root, options.release.as_deref())?;
    let sessions = releases
        .iter()
        .map(|r| {
            let o = Options {
                release: Some(r.clone()),
                ..options.clone()
            };
            Session::open(o, reporter.clone())
        })
        .collect::<Result<Vec<_>>>()?;
    let mut checks = Vec::new();
    let mut known_somewhere = vec![false; components.len()];
    let mut versions = verify::DependencyVersions::default();
    for session in &sessions {
        let catalog = &session.catalog;
        let sources = session.sources(&[], false)?;
        let (targets, lock) = session.plan_inputs()?;
        let mut wanted: Vec<String> = Vec::new();
        if components.is_empty() {
            wanted.extend(catalog.recipes.keys().cloned());
        } else {
            for (i, name) in components.iter().enumerate() {
                // A name may belong to one release line only; it must belong to at least one.
                if let Ok(members) = catalog.expand(std::slice::from_ref(name)) {
                    known_somewhere[i] = true;
                    wanted.extend(members);
                }
            }
        }
        wanted.sort();
        wanted.dedup();
        for recipe in wanted.iter().filter_map(|name| catalog.get(name)) {
            let patched = recipe.patches.every().next().is_some() || !recipe.derive.is_empty();
            if only_patched && !patched {
                continue;
            }
            let scratch = scratch_dir(session)?;
            for check in verify::check_component(
                &sources,
                lock,
                recipe,
                targets,
                scratch.path(),
                &mut versions,
            ) {
                checks.push(Row {
                    release: catalog.release.name.clone(),
                    check,
                });
            }
        }
    }
    if let Some(i) = known_somewhere.iter().position(|k| !k) {
        return Err(sessions
            .first()
            .map(|s| s.catalog.unknown_component(&components[i]))
            .unwrap_or_else(|| Diagnostic::new(format!("no component \"{}\"", components[i])))
            .into());
    }
    Ok(Report {
        ok: checks.iter().all(|r| r.check.outcome.ok()),
        checks,
        schema: CHECK_SOURCES_SCHEMA,
    })
}

/// A directory for one component's trial copies, in the source cache's file system.
fn scratch_dir(session: &Session) -> Result<tempfile::TempDir> {
    let root = session.cache.root();
    let make = || {
        tempfile::Builder::new()
            .prefix(".check-sources-")
            .tempdir_in(root)
    };
    make()
        .or_else(|_| {
            std::fs::create_dir_all(root)?;
            make()
        })
        .map_err(|e| {
            Error::hinted(
                format!("cannot make a scratch directory in {}: {e}", root.display()),
                "check free disk space and permissions of ROCFORGE_CACHE",
            )
        })
}
