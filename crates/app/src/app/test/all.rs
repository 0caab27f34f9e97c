//! `rocforge test --all`: every testable component of an index run in turn into one bundle
//! with a summary.json.

use std::path::{Path, PathBuf};

use super::{Request, hostname, profile, sharing, start, test_plan};
use crate::app::{Error, Result, Session};
use crate::arch::{ArchTable, TargetId};
use crate::sign::SecretKey;
use crate::testrun::bundle::Summary;

/// What `rocforge test --all` was asked: every testable component of an index, one bundle.
#[derive(Debug, Clone)]
pub struct AllRequest<'a> {
    pub from: &'a str,
    /// The bundle's root: one directory per component, and summary.json.
    pub out: &'a Path,
    pub resume: bool,
    pub sysfs_root: Option<&'a Path>,
    pub machine: Option<&'a str>,
    pub submit: Option<&'a str>,
    /// Signs every component's results.json and junit.xml, and summary.json.
    pub key: Option<&'a Path>,
}

/// How one component's part of a `test --all` run ended.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum RunStatus {
    /// Its tests ran; the summary says how they went.
    Ran,
    /// It could not be planned or installed from the index: no test ran.
    InstallFailed,
    /// Installed, but the run itself stopped (the corpus missing, the results unwritable).
    RunFailed,
}

/// One component of a `test --all` bundle (summary.json's `components`).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct ComponentRun {
    pub component: crate::ids::ComponentName,
    pub status: RunStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<Summary>,
    /// Relative to the bundle's root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub results: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submitted: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl ComponentRun {
    /// `passed`, `failed`, `no GPU`, `crashed`…: the word the one-line summary shows.
    pub fn verdict(&self) -> String {
        let Some(s) = &self.summary else {
            return match self.status {
                RunStatus::InstallFailed => "install failed".into(),
                _ => "run failed".into(),
            };
        };
        let mut parts = Vec::new();
        for (n, word) in [
            (s.passed, "passed"),
            (s.failed, "failed"),
            (s.no_gpu, "no GPU"),
            (s.crashed, "crashed"),
            (s.hung, "hung"),
            (s.skipped, "skipped"),
        ] {
            if n > 0 {
                parts.push(format!("{n} {word}"));
            }
        }
        if parts.is_empty() {
            "no tests".into()
        } else {
            parts.join(", ")
        }
    }
}

pub const ALL_SCHEMA: &str = "rocforge.test-all/1";

/// summary.json of a `test --all` bundle.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct AllOutcome {
    pub schema: String,
    pub target: String,
    pub machine: String,
    pub index: String,
    pub components: Vec<ComponentRun>,
    /// summary.json's own minisign signature, when signed.
    #[serde(skip)]
    pub signed: bool,
}

impl AllOutcome {
    /// Every component ran and every test passed on a GPU.
    pub fn ok(&self) -> bool {
        self.components.iter().all(|c| {
            c.status == RunStatus::Ran
                && c.summary
                    .as_ref()
                    .is_some_and(|s| s.failures() == 0 && s.no_gpu == 0)
        })
    }
}

/// The target of this machine's first GPU, as `--arch` would name it.
pub fn detect_target(table: &ArchTable, sysfs_root: Option<&Path>) -> Result<String> {
    let p = profile(table, sysfs_root);
    match p.devices.iter().find_map(|d| d.target.clone()) {
        Some(t) => Ok(t),
        None if p.devices.is_empty() => Err(Error::hinted(
            format!("no GPU found under {}", p.root),
            "run where the GPU is (with /dev/kfd and /dev/dri passed into any container), or name the target with --arch gfx90c",
        )),
        None => Err(Error::hinted(
            format!(
                "the GPU under {} is no target rocforge knows (gfx_target_version {})",
                p.root, p.devices[0].gfx_target_version
            ),
            "`rocforge detect` shows what was read; name the target with --arch",
        )),
    }
}

/// The components of the index that `rocforge test` can run for `target`: test artifacts
/// (`<name>-tests`), and components whose own tree carries their client (a `[test]` table on a
/// line that builds it with the library), sorted by name.
pub fn testable(
    session: &Session,
    index: &crate::package::index::Index,
    target: &TargetId,
) -> Vec<crate::ids::ComponentName> {
    let mut names = std::collections::BTreeSet::new();
    for a in &index.artifacts {
        if !a.kind.is_tarball() || !a.id.targets.iter().any(|t| t.arch == target.arch) {
            continue;
        }
        let name = a.id.name.clone();
        let own_client = session
            .recipe(name.as_str())
            .is_ok_and(|r| r.test.is_some() && !r.tests_apart);
        if a.kind == crate::package::index::DeliveryKind::Tests || own_client {
            names.insert(name);
        }
    }
    names.into_iter().collect()
}

/// `rocforge test --all`: every testable component of the index installed with its
/// dependencies and run in turn, each into OUT/<component>, then OUT/summary.json. A component
/// that fails to install or run is recorded and the next one runs.
pub fn run_all(session: &Session, req: &AllRequest<'_>) -> Result<AllOutcome> {
    let targets = session.targets()?;
    let [target] = targets else {
        return Err(Error::hinted(
            "`rocforge test --all` runs one target's artifacts",
            "pass --arch with one target, e.g. --arch gfx90c, or leave it out to use the detected GPU's",
        ));
    };
    let (_, key) = sharing(&Request {
        submit: req.submit,
        key: req.key,
        ..Default::default()
    })?;
    let names = index_testable(session, req.from, target)?;
    let io_err = |p: &Path, e: std::io::Error| {
        Error::hinted(
            format!("{}: {e}", p.display()),
            "check free disk space and permissions of --out",
        )
    };
    std::fs::create_dir_all(req.out).map_err(|e| io_err(req.out, e))?;
    let machine = req.machine.map_or_else(hostname, str::to_string);
    let mut components = Vec::new();
    for (i, name) in names.iter().enumerate() {
        session
            .reporter
            .note(&format!("[{}/{}] {name}", i + 1, names.len()));
        components.push(test_one(session, req, name, &machine, key.as_ref())?);
    }
    let mut all = AllOutcome {
        schema: ALL_SCHEMA.into(),
        target: target.to_string(),
        machine,
        index: crate::redact::url(req.from),
        components,
        signed: false,
    };
    let path = req.out.join("summary.json");
    let text = serde_json::to_vec_pretty(&all).expect("a summary serializes");
    crate::fsutil::write_atomic(&path, &text).map_err(|e| io_err(&path, e))?;
    if let Some(k) = &key {
        crate::sign::sign_file(k, &path)?;
        all.signed = true;
    }
    Ok(all)
}

/// The components of the index at `from` that can be tested for `target`; none is an error
/// that says what the index holds for it.
fn index_testable(
    session: &Session,
    from: &str,
    target: &TargetId,
) -> Result<Vec<crate::ids::ComponentName>> {
    let loaded = super::signed_index(session, from)?;
    let names = testable(session, &loaded.index, target);
    if !names.is_empty() {
        return Ok(names);
    }
    let present: std::collections::BTreeSet<String> = loaded
        .index
        .artifacts
        .iter()
        .filter(|a| a.id.targets.iter().any(|t| t.arch == target.arch))
        .map(|a| a.id.name.to_string())
        .collect();
    Err(Error::hinted(
        format!(
            "{} has nothing to test for {target}: {}",
            crate::redact::url(from),
            if present.is_empty() {
                "no artifact of it is built for that target".to_string()
            } else {
                format!(
                    "its artifacts for it ({}) carry no test client",
                    present.into_iter().collect::<Vec<_>>().join(", ")
                )
            }
        ),
        format!(
            "package the test clients too (`rocforge package COMPONENT-tests --arch {target}`, or a component with a [test] table such as rocm-examples), or pick the index of this GPU's target"
        ),
    ))
}

/// One component installed from the index and tested into OUT/<component>. Its failure to
/// install or run is its record's; only signing its results stops the whole run.
fn test_one(
    session: &Session,
    req: &AllRequest<'_>,
    name: &crate::ids::ComponentName,
    machine: &str,
    key: Option<&SecretKey>,
) -> Result<ComponentRun> {
    let dir = req.out.join(name);
    let one = Request {
        component: name,
        spoof: false,
        resume: req.resume,
        sysfs_root: req.sysfs_root,
        out: Some(&dir),
        machine: Some(machine),
        submit: req.submit,
        key: req.key,
        from: Some(req.from),
        plan_only: false,
    };
    let failed = |status, e: Error| ComponentRun {
        component: name.clone(),
        status,
        summary: None,
        results: None,
        submitted: None,
        error: Some(e.render(false).trim().to_string()),
    };
    let prepared = match test_plan(session, &one).and_then(|p| start(session, p)) {
        Ok(p) => p,
        Err(e) => return Ok(failed(RunStatus::InstallFailed, e)),
    };
    let outcome = match prepared.run(session.reporter.as_ref()) {
        Ok(o) => o,
        Err(e) => return Ok(failed(RunStatus::RunFailed, e)),
    };
    if let Some(k) = key {
        for f in [&outcome.results, &outcome.junit] {
            crate::sign::sign_file(k, f)?;
        }
    }
    Ok(ComponentRun {
        component: name.clone(),
        status: RunStatus::Ran,
        summary: Some(outcome.bundle.summary.clone()),
        results: Some(PathBuf::from(name.as_str()).join("results.json")),
        submitted: outcome.submitted,
        error: None,
    })
}
