//! Builds a plan: each component that the store lacks, in dependency order, independent ones in
//! parallel, in the chosen runtime, committed to the store.

pub mod driver;
pub mod follow;
pub mod image;
pub mod jobs;
pub mod license;
pub mod resume;
pub mod schedule;

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::ids::ComponentName;
use crate::plan::StoreView;
use crate::plan::{Plan, Step};
use crate::progress::{BuildEnd, Reporter, Task};
use crate::recipe::{BuildSystem, Recipe};
use crate::runtime::{ContainerRuntime, Kind, Mount, RunSpec};
use crate::source::prepare::{self, Sources};
use crate::store::{EntryMeta, Store};

#[derive(Debug, Clone)]
pub struct BuildOptions {
    /// Total compile jobs across concurrently building components.
    pub jobs: usize,
    /// Components built side by side at most.
    pub parallel: usize,
    pub keep_going: bool,
    /// Targets whose absence from a built library is accepted (recorded, not fatal).
    pub allow_missing: Vec<crate::arch::TargetId>,
    /// Targets for which another processor's code (the nearest target's, run under
    /// HSA_OVERRIDE_GFX_VERSION) is accepted; recorded in the store entry.
    pub allow_spoof: Vec<crate::arch::TargetId>,
    /// Discard what an interrupted build of the same key left instead of continuing it.
    pub fresh: bool,
}

#[derive(Debug, Clone, Serialize)]
#[serde(tag = "result", rename_all = "lowercase")]
pub enum StepResult {
    /// Already in the store (or built meanwhile by another rocforge process).
    Cached {
        tree: PathBuf,
    },
    Built {
        tree: PathBuf,
        seconds: f64,
    },
    /// Pulled from the shared build cache (`--cache`), signed by `signer`.
    Pulled {
        tree: PathBuf,
        signer: String,
    },
    Failed {
        error: String,
        hint: String,
        log: Option<PathBuf>,
        tail: Vec<String>,
    },
    /// Started, then stopped by Ctrl-C: what it did so far is kept for the next run.
    Interrupted {
        /// The build directory the next run continues from, when the build got that far.
        resumes: Option<PathBuf>,
    },
    /// Not built: a dependency failed (named), or the run was stopped before it started.
    Skipped {
        because: Option<String>,
    },
}

#[derive(Debug, Serialize)]
pub struct BuildReport {
    pub steps: Vec<(String, StepResult)>,
}

impl BuildReport {
    pub fn ok(&self) -> bool {
        self.steps.iter().all(|(_, r)| r.is_ok())
    }

    /// Whether Ctrl-C stopped the run before every step was done.
    pub fn interrupted(&self) -> bool {
        self.steps
            .iter()
            .any(|(_, r)| matches!(r, StepResult::Interrupted { .. }))
    }
}

/// What to tell the user after Ctrl-C: how to continue.
pub const CONTINUE_HINT: &str = "run the same command again to continue: finished components are in the store, and a stopped build resumes from its build directory (--fresh starts over)";

impl StepResult {
    /// The step's tree is in the store.
    pub fn is_ok(&self) -> bool {
        matches!(
            self,
            StepResult::Cached { .. } | StepResult::Built { .. } | StepResult::Pulled { .. }
        )
    }
}

#[derive(Debug, thiserror::Error)]
enum StepError {
    #[error("{0}")]
    Source(#[from] prepare::SourceError),
    #[error("{0}")]
    Store(#[from] crate::store::StoreError),
    #[error("{0}")]
    Runtime(#[from] crate::runtime::RuntimeError),
    #[error("{component}: the build failed (exit {code})")]
    Failed { component: String, code: String },
    #[error(
        "{component}: the build's container did not start ({runtime} exited {code}): {message}"
    )]
    ContainerStart {
        component: String,
        runtime: String,
        code: String,
        message: String,
        hint: String,
    },
    #[error("{component}: the build installed nothing under {prefix}")]
    NothingInstalled { component: String, prefix: String },
    #[error("{component}: {what}: {source}")]
    Io {
        component: String,
        what: String,
        source: std::io::Error,
    },
    #[error("{component}: stopped")]
    Stopped { component: String },
    #[error("{component}: built libraries lack native code for requested targets:\n{table}")]
    Coverage { component: String, table: String },
    #[error("{0}")]
    License(#[from] license::LicenseError),
    #[error("{component}: the build enables its tests, but {why}")]
    TestCorpus {
        component: String,
        recipe: String,
        why: String,
    },
    #[error("{message}")]
    DependencyVersion { message: String, hint: String },
}

/// What the container runtime said, when the log written since `from` shows that the build's
/// script never ran (no "==> " phase line): its last lines, without the command rocforge
/// logged. None when the script ran, or the log cannot be read.
fn runtime_words(log: &Path, from: u64) -> Option<String> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open(log).ok()?;
    f.seek(SeekFrom::Start(from)).ok()?;
    let mut bytes = Vec::new();
    f.take(1 << 20).read_to_end(&mut bytes).ok()?;
    let text = String::from_utf8_lossy(&bytes);
    if text.lines().any(|l| l.starts_with("==> ")) {
        return None;
    }
    // The logged command spans lines (the script is its last argument); podman and docker
    // put their reason on a line with "Error".
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let said = lines
        .iter()
        .rev()
        .find(|l| l.contains("Error") || l.contains("error:"))
        .or(lines.last().filter(|l| !l.starts_with("$ ")))
        .map_or("it printed nothing", |l| l);
    Some(said.to_string())
}

impl StepError {
    fn hint(&self) -> String {
        match self {
            StepError::Source(e) => e.hint(),
            StepError::Store(e) => e.hint(),
            StepError::Runtime(e) => e.hint(),
            StepError::Failed { .. } => "read the log; `rocforge fetch COMPONENT` gives the exact source tree to reproduce it. The build directory is kept: the same command continues from it, --fresh starts over".into(),
            StepError::ContainerStart { hint, .. } => hint.clone(),
            StepError::NothingInstalled { .. } => "the install step must install under the release prefix (DESTDIR is set for you)".into(),
            StepError::Io { .. } => "check free disk space".into(),
            StepError::Stopped { .. } => CONTINUE_HINT.into(),
            StepError::License(e) => e.hint(),
            StepError::TestCorpus { recipe, .. } => format!("make [test] in {recipe} name what the build installs (client for kind = \"gtest\", dir for \"each-binary\" and \"ctest\"), or install the tests where it points"),
            StepError::DependencyVersion { hint, .. } => hint.clone(),
            StepError::Coverage { .. } => "the GPU targets did not reach part of the build (check the recipe's arch-vars and patches); to accept and record the gap, pass --allow-missing TARGET (no code) or --allow-spoof TARGET (another processor's code, run under HSA_OVERRIDE_GFX_VERSION)".into(),
        }
    }
}

pub struct Builder<'a> {
    pub plan: &'a Plan,
    pub sources: Sources<'a>,
    pub store: &'a Store,
    pub runtime: &'a dyn ContainerRuntime,
    pub reporter: &'a dyn Reporter,
    pub options: BuildOptions,
    /// Set by Ctrl-C: no new component starts, running containers are stopped.
    pub stop: &'a AtomicBool,
    /// Names of running containers, for Ctrl-C.
    pub running: &'a Mutex<Vec<String>>,
    /// A shared build cache: hits are pulled instead of built, new entries pushed.
    pub cache: Option<&'a dyn crate::cache::BuildCache>,
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Builder<'_> {
    /// The image as the runtime must be told: pinned by digest or local ID when known.
    pub fn image_for_run(&self) -> String {
        let image = &self.plan.image;
        match (&image.digest, image.local) {
            (Some(id), true) => id.clone(),
            (Some(id), false) if image.runtime_id => id.clone(),
            (Some(digest), false) => {
                let repo = image
                    .reference
                    .rsplit_once(':')
                    .filter(|(_, tag)| !tag.contains('/'))
                    .map_or(image.reference.as_str(), |(r, _)| r);
                format!("{repo}@{digest}")
            }
            (None, _) => image.reference.clone(),
        }
    }

    pub fn run(&self) -> BuildReport {
        for name in self.runtime.reap_stale() {
            self.reporter.note(&format!(
                "removed container {name} left by a killed rocforge run"
            ));
        }
        for dir in self.store.clean_staging() {
            self.reporter
                .note(&format!("removed unfinished store entry {}", dir.display()));
        }
        let steps = &self.plan.steps;
        let index: std::collections::BTreeMap<&str, usize> = steps
            .iter()
            .enumerate()
            .map(|(i, s)| (s.component.as_str(), i))
            .collect();
        let nodes: Vec<schedule::Node> = steps
            .iter()
            .map(|s| schedule::Node {
                deps: s
                    .depends
                    .iter()
                    .filter_map(|d| index.get(d.as_str()).copied())
                    .collect(),
                weight: self
                    .store
                    .duration(&s.component)
                    .unwrap_or(s.resources.hours * 3600.0),
            })
            .collect();
        let results: Vec<Mutex<Option<StepResult>>> =
            steps.iter().map(|_| Mutex::new(None)).collect();
        let under_way = jobs::Running::default();
        let outcomes = schedule::run(
            &nodes,
            self.options.parallel,
            self.options.keep_going,
            self.stop,
            |i| {
                let r = self.step(&steps[i], &under_way);
                let ok = r.is_ok();
                *results[i].lock().expect("not poisoned") = Some(r);
                ok
            },
        );
        let steps_out = steps
            .iter()
            .zip(results)
            .zip(outcomes)
            .map(|((s, r), o)| {
                let r =
                    r.into_inner()
                        .expect("not poisoned")
                        .unwrap_or_else(|| StepResult::Skipped {
                            because: match o {
                                // A dependency stopped by Ctrl-C did not fail: nothing to name.
                                schedule::Outcome::Skipped(Some(j))
                                    if !self.stop.load(Ordering::SeqCst) =>
                                {
                                    Some(steps[j].component.clone())
                                }
                                _ => None,
                            },
                        });
                (s.component.clone(), r)
            })
            .collect();
        BuildReport { steps: steps_out }
    }

    fn step(&self, step: &Step, under_way: &jobs::Running) -> StepResult {
        if self.store.contains(&step.key) {
            if let Some(cache) = self.cache {
                self.seed(cache, step);
            }
            return StepResult::Cached {
                tree: self.store.tree(&step.key),
            };
        }
        if let Some(r) = self.cache.and_then(|c| self.pull(c, step)) {
            return r;
        }
        let log_dir = self.store.root().join(".logs");
        let log = log_dir.join(format!("{}-{}.log", step.component, step.key.short()));
        let component = step.component.as_str();
        let task = self.reporter.build_task(
            component,
            &format!("{component} {}", step.key.short()),
            &log,
        );
        let mut result = self.build_step(step, under_way, &log, &*task);
        // After Ctrl-C a failing step fails because it was stopped (its container killed, its
        // git fetch interrupted): say so, not FAILED with a log of the kill.
        if result.is_err() && self.stop.load(Ordering::SeqCst) {
            result = Err(StepError::Stopped {
                component: component.into(),
            });
        }
        match &result {
            Ok(Some(seconds)) => task.finish_build(
                BuildEnd::Built,
                &format!(
                    "{component}: built in {}",
                    crate::units::format_duration(*seconds as u64)
                ),
            ),
            Ok(None) => task.finish_build(
                BuildEnd::Cached,
                &format!("{component}: built by another rocforge process"),
            ),
            Err(StepError::Stopped { .. }) => {
                task.finish_build(BuildEnd::Stopped, &format!("{component}: interrupted"))
            }
            Err(_) => task.finish_build(BuildEnd::Failed, &format!("{component}: FAILED")),
        }
        match result {
            Ok(Some(seconds)) => {
                if let Some(cache) = self.cache {
                    let note = crate::cache::push_from_store(cache, self.store, &step.key)
                        .unwrap_or_else(|e| {
                            format!(
                                "{}: not pushed to {}: {e}",
                                step.component,
                                cache.describe()
                            )
                        });
                    self.reporter.note(&note);
                }
                StepResult::Built {
                    tree: self.store.tree(&step.key),
                    seconds,
                }
            }
            Ok(None) => StepResult::Cached {
                tree: self.store.tree(&step.key),
            },
            Err(StepError::Stopped { .. }) => {
                let scratch = resume::Scratch::new(self.scratch_dir(step));
                if scratch.resumable()
                    && let Some(cache) = self.cache
                {
                    self.push_checkpoint(cache, step, &scratch);
                }
                StepResult::Interrupted {
                    resumes: scratch.resumable().then(|| scratch.build()),
                }
            }
            Err(e) => {
                let tail = follow::tail(&log, 40);
                StepResult::Failed {
                    error: e.to_string(),
                    hint: e.hint(),
                    // A step that failed before its build started (fetching its sources) wrote
                    // nothing there: the error says all, and an empty log would only mislead.
                    log: log.metadata().is_ok_and(|m| m.len() > 0).then_some(log),
                    tail,
                }
            }
        }
    }

    /// The step pulled from the cache, or None to build it (a miss, or an entry refused with a
    /// note: unreachable cache, untrusted signer, damaged entry).
    fn seed(&self, cache: &dyn crate::cache::BuildCache, step: &Step) {
        if let Some(note) = crate::cache::seed(cache, self.store, &step.key) {
            self.reporter.note(&note);
        }
    }

    fn pull(&self, cache: &dyn crate::cache::BuildCache, step: &Step) -> Option<StepResult> {
        let on_wait = || {
            self.reporter.note(&format!(
                "{}: waiting for another rocforge process building the same key",
                step.component
            ))
        };
        let hash_input = step.hash_input.to_value();
        match crate::cache::pull_into_store(cache, self.store, &step.key, &hash_input, &on_wait) {
            Ok(crate::cache::Pulled::Miss) => None,
            Ok(crate::cache::Pulled::Pulled { tree, signer }) => {
                self.reporter.note(&format!(
                    "{}: pulled from {} (signed by {signer})",
                    step.component,
                    cache.describe()
                ));
                Some(StepResult::Pulled { tree, signer })
            }
            Ok(crate::cache::Pulled::Present { tree }) => Some(StepResult::Cached { tree }),
            Err(e) => {
                self.reporter.note(&format!(
                    "{}: not using the cache entry: {e}; building it here ({})",
                    step.component,
                    e.hint()
                ));
                None
            }
        }
    }

    /// Pushes the build directory of a stopped build as its key's checkpoint; says what
    /// happened in a note (a failed push does not change how the build ended).
    fn push_checkpoint(
        &self,
        cache: &dyn crate::cache::BuildCache,
        step: &Step,
        scratch: &resume::Scratch,
    ) {
        let component = step.component.as_str();
        if !cache.can_push() {
            self.reporter.note(&format!(
                "{component}: no checkpoint pushed to {}: no cache signing key (--cache-key or ROCFORGE_CACHE_KEY)",
                cache.describe()
            ));
            return;
        }
        let checkpoint = crate::cache::Checkpoint {
            key: step.key.to_string(),
            component: component.into(),
            steps_done: resume::ninja_steps(&scratch.build()),
            ccache: scratch.began().map(|since| crate::cache::CompilerCache {
                dir: self.ccache_dir(),
                since,
                max_bytes: crate::cache::CompilerCache::DEFAULT_MAX_BYTES,
            }),
        };
        let done = checkpoint
            .steps_done
            .map(|n| format!(" ({n} ninja steps done)"))
            .unwrap_or_default();
        self.reporter.note(
            &match cache.push_checkpoint(&checkpoint, &scratch.build()) {
                Ok(p) => format!(
                    "{component}: checkpoint pushed to {} as {}{done}: build directory {}, compiler cache {}",
                    cache.describe(),
                    crate::cache::oci::checkpoint_tag(&step.key),
                    crate::units::format_size(p.tree_bytes),
                    match (p.ccache_files, p.ccache_left_out) {
                        (0, _) => "none".to_string(),
                        (n, 0) => format!("{n} files, {}", crate::units::format_size(p.ccache_bytes)),
                        (n, left) => format!(
                            "{n} files, {} ({left} older ones over the cap left out)",
                            crate::units::format_size(p.ccache_bytes)
                        ),
                    }
                ),
                Err(e) => format!(
                    "{component}: no checkpoint pushed to {}: {e} ({})",
                    cache.describe(),
                    e.hint()
                ),
            },
        );
    }

    /// On a machine without the build directory of a stopped build, the checkpoint another
    /// one pushed becomes it. One that is refused is a note: the build starts clean.
    fn pull_checkpoint(&self, step: &Step, work: &resume::Scratch) -> std::io::Result<()> {
        let Some(cache) = self.cache else {
            return Ok(());
        };
        if self.options.fresh || work.resumable() {
            return Ok(());
        }
        let component = step.component.as_str();
        crate::fsutil::remove_tree(&work.root)?;
        std::fs::create_dir_all(&work.root)?;
        let began = SystemTime::now();
        let ccache = self.ccache_dir();
        match cache.pull_checkpoint(&step.key, component, &work.build(), Some(&ccache)) {
            Ok(None) => crate::fsutil::remove_tree(&work.root)?,
            Ok(Some(pulled)) => {
                // Marked last: a pull cut short leaves an unmarked directory, discarded.
                work.mark(began)?;
                let compiled = pulled
                    .ccache
                    .map(|(n, b)| {
                        format!(
                            ", {n} compiler cache entries ({}) restored",
                            crate::units::format_size(b)
                        )
                    })
                    .unwrap_or_default();
                self.reporter.note(&format!(
                    "{component}: pulled the checkpoint {} from {} (signed by {}{compiled}) in {:.1}s",
                    crate::cache::oci::checkpoint_tag(&step.key),
                    cache.describe(),
                    pulled.signer,
                    began.elapsed().unwrap_or_default().as_secs_f64()
                ));
            }
            Err(e) => {
                crate::fsutil::remove_tree(&work.root)?;
                self.reporter.note(&format!(
                    "{component}: not using the checkpoint in {}: {e}; starting the build clean ({})",
                    cache.describe(),
                    e.hint()
                ));
            }
        }
        Ok(())
    }

    /// Some(seconds) when built here, None when another process committed it meanwhile.
    fn build_step(
        &self,
        step: &Step,
        under_way: &jobs::Running,
        log: &Path,
        task: &dyn Task,
    ) -> Result<Option<f64>, StepError> {
        let component = step.component.as_str();
        let io = |what: &str| {
            let what = what.to_string();
            move |source| StepError::Io {
                component: component.to_string(),
                what,
                source,
            }
        };
        let recipe = self
            .sources
            .catalog
            .get(component)
            .expect("plan steps come from the catalog");
        let Some(staging) = self.store.reserve_unless(
            &step.key,
            &|| {
                self.reporter.note(&format!(
                    "{component}: waiting for another rocforge process building the same key"
                ))
            },
            self.stop,
        )?
        else {
            return Ok(None);
        };
        crate::fault::point("build");
        if self.stop.load(Ordering::SeqCst) {
            return Err(StepError::Stopped {
                component: component.into(),
            });
        }
        std::fs::create_dir_all(log.parent().unwrap_or(Path::new(".")))
            .map_err(io("log directory"))?;
        std::fs::write(log, "").map_err(io("log"))?;
        let started = now();
        let clock = Instant::now();
        let recorded = self.store.duration(component);
        // Expected at the whole budget's rate, the unit every build's expectation shares.
        let expected = follow::Estimate::new(recorded, step.resources.hours, self.options.jobs)
            .map(|e| std::time::Duration::from_secs_f64(e.secs));
        let slot = under_way.start(expected, clock);
        let jobs = jobs::share(
            self.options.jobs,
            slot.overlap,
            slot.count,
            step.resources.memory_bytes,
            jobs::available_memory(),
        );
        let tracker = Mutex::new(follow::Tracker::new(
            component,
            clock,
            follow::Estimate::new(recorded, step.resources.hours, jobs),
        ));
        let phase = |p: &str| {
            let mut t = tracker.lock().expect("not poisoned");
            let now = Instant::now();
            t.set_phase(p, now);
            task.build_status(&t.status(now));
        };
        phase("sources");
        let prepared = prepare::prepare(&self.sources, recipe, &self.plan.targets)?;
        crate::fault::point("build");
        let prefix = self.sources.catalog.release.prefix.clone();
        let prefix_rel = prefix.trim_start_matches('/').to_string();

        match &recipe.build.system {
            BuildSystem::Copy { dest } => {
                phase("copy");
                crate::fsutil::copy_tree(&prepared.tree, &staging.tree().join(dest))
                    .map_err(io("copy"))?;
            }
            _ => {
                let work = resume::Scratch::new(self.scratch_dir(step));
                self.pull_checkpoint(step, &work)
                    .map_err(io("build directory"))?;
                let start = work
                    .prepare(self.options.fresh)
                    .map_err(io("build directory"))?;
                if let resume::Start::Resumed { steps_done } = start {
                    let done = steps_done
                        .map(|n| format!(" ({n} ninja steps done)"))
                        .unwrap_or_default();
                    self.reporter.note(&format!(
                        "{component}: continuing the build that stopped in {}{done}; --fresh starts over",
                        work.build().display()
                    ));
                }
                let scratch = work.root.clone();
                let deps = scratch.join("deps");
                for d in &step.depends {
                    let dep = self.plan.step(d).expect("dependencies are in the plan");
                    crate::fsutil::link_tree(&self.store.tree(&dep.key), &deps)
                        .map_err(io("dependency tree"))?;
                }
                // What find_package(X V EXACT) will refuse at configure time, said before it runs
                // (for rocBLAS and Tensile that is after the venv is made): the dependencies'
                // installed package version files are what CMake reads.
                let found = |w: &crate::source::pairing::Want| {
                    crate::source::pairing::found(&deps, &w.package).map(|mut f| {
                        f.at = format!("{}/{}", prefix.trim_end_matches('/'), f.at);
                        f
                    })
                };
                if let Some(m) = crate::source::pairing::mismatches(recipe, &prepared.tree, found)
                    .into_iter()
                    .next()
                {
                    task.finish(&format!("{component}: FAILED"));
                    return Err(StepError::DependencyVersion {
                        message: m.to_string(),
                        hint: m.hint(),
                    });
                }
                let ccache = self.ccache_dir();
                std::fs::create_dir_all(&ccache).map_err(io("ccache"))?;
                let mut mounts = vec![
                    Mount {
                        host: prepared.tree.clone(),
                        container: driver::SRC.into(),
                        read_only: true,
                    },
                    Mount {
                        host: scratch.join("build"),
                        container: driver::BUILD.into(),
                        read_only: false,
                    },
                    Mount {
                        host: scratch.join("out"),
                        container: driver::OUT.into(),
                        read_only: false,
                    },
                    Mount {
                        host: deps.clone(),
                        container: prefix.clone(),
                        read_only: true,
                    },
                    Mount {
                        host: ccache,
                        container: driver::CCACHE.into(),
                        read_only: false,
                    },
                ];
                for (name, path) in &prepared.inputs {
                    mounts.push(Mount {
                        host: path.clone(),
                        container: format!("{}/{name}", driver::INPUTS),
                        read_only: true,
                    });
                }
                let script = driver::script(recipe, &step.gpu_flags, &prefix, jobs)
                    .expect("cmake and script builds have a script");
                // In a container the directories have fixed paths; on the host, their own.
                let paths = if self.runtime.kind() == Kind::Host {
                    let inputs = scratch.join("inputs");
                    std::fs::create_dir_all(&inputs).map_err(io("inputs"))?;
                    for (name, path) in &prepared.inputs {
                        std::os::unix::fs::symlink(path, inputs.join(name))
                            .map_err(io("inputs"))?;
                    }
                    let host = |p: &Path| p.display().to_string();
                    driver::Paths {
                        src: host(&prepared.tree),
                        build: host(&scratch.join("build")),
                        out: host(&scratch.join("out")),
                        deps: host(&deps),
                        ccache: host(&mounts[4].host),
                        inputs: host(&inputs),
                    }
                } else {
                    driver::Paths::container(&prefix)
                };
                let spec = RunSpec {
                    name: format!(
                        "rocforge-{component}-{}-{}",
                        step.key.short(),
                        std::process::id()
                    ),
                    image: self.image_for_run(),
                    mounts,
                    env: driver::environment(
                        recipe,
                        &step.gpu_flags,
                        &prefix,
                        &paths,
                        jobs,
                        prepared.source_date_epoch,
                    ),
                    workdir: paths.build.clone(),
                    script,
                    network: false,
                    labels: [
                        ("rocforge.component".to_string(), component.to_string()),
                        ("rocforge.key".to_string(), step.key.to_string()),
                    ]
                    .into(),
                };
                phase("starting");
                crate::fault::point("build");
                let log_start = std::fs::metadata(log).map_or(0, |m| m.len());
                self.running
                    .lock()
                    .expect("not poisoned")
                    .push(spec.name.clone());
                let exit = with_progress(log, task, &tracker, || self.runtime.run(&spec, log));
                self.running
                    .lock()
                    .expect("not poisoned")
                    .retain(|n| n != &spec.name);
                let exit = exit?;
                if self.stop.load(Ordering::SeqCst) {
                    return Err(StepError::Stopped {
                        component: component.into(),
                    });
                }
                if !exit.success() {
                    let code = exit
                        .0
                        .map_or("killed by a signal".into(), |c| c.to_string());
                    // The driver's script announces each phase ("==> …") from its first line:
                    // a run that printed none never got into its container.
                    if self.runtime.kind() != crate::runtime::Kind::Host
                        && let Some(said) = runtime_words(log, log_start)
                    {
                        let failure = self.runtime.start_failure(&said);
                        return Err(StepError::ContainerStart {
                            component: component.into(),
                            runtime: self.runtime.kind().to_string(),
                            code,
                            message: failure.message.clone(),
                            hint: failure.hint(),
                        });
                    }
                    return Err(StepError::Failed {
                        component: component.into(),
                        code,
                    });
                }
                crate::fault::point("build");
                let installed = scratch.join("out").join(&prefix_rel);
                if !installed.is_dir() {
                    return Err(StepError::NothingInstalled {
                        component: component.into(),
                        prefix,
                    });
                }
                std::fs::remove_dir(staging.tree()).map_err(io("store staging"))?;
                let into_store = format!("moving the output into {}", staging.tree().display());
                match std::fs::rename(&installed, staging.tree()) {
                    // The scratch directory is in the cache, the staging entry in the store:
                    // on two filesystems (a store on another disk) only a copy gets it there.
                    Err(e) if e.raw_os_error() == Some(libc::EXDEV) => {
                        crate::fsutil::copy_tree(&installed, &staging.tree())
                            .map_err(io(&into_store))?
                    }
                    r => r.map_err(io(&into_store))?,
                }
                // Ninja's per-step start and end times outlive the build directory beside the
                // log: where a long build's hours went (Tensile's share of rocBLAS, say).
                let _ = std::fs::copy(
                    work.build().join(".ninja_log"),
                    log.with_extension("ninja_log"),
                );
                crate::fault::point("build");
                let _ = work.remove();
            }
        }
        // Which Tensile logic each target's kernels were generated from travels with the
        // artifact, where `inspect` finds it: derived, upstream, or a user's overlay.
        let arches: Vec<&str> = self.plan.targets.iter().map(|t| t.arch.as_str()).collect();
        let overlays: Vec<&crate::catalog::Overlay> = self.sources.overlays.iter().collect();
        let logic = crate::catalog::logic::sources(
            recipe,
            &arches,
            &self.sources.catalog.arches,
            &overlays,
        );
        if !logic.is_empty() {
            let file = staging
                .tree()
                .join(crate::catalog::logic::PROVENANCE_DIR)
                .join(component)
                .join(crate::catalog::logic::PROVENANCE_FILE);
            std::fs::create_dir_all(file.parent().expect("a file in a directory"))
                .map_err(io("Tensile logic record"))?;
            let json = serde_json::to_vec_pretty(&logic).expect("plain data");
            std::fs::write(&file, json).map_err(io("Tensile logic record"))?;
        }
        phase("license files");
        let licenses = license::collect(recipe, &prepared.tree, &staging.tree())?.files;
        if licenses.is_empty() {
            self.reporter.note(&format!(
                "warning: {component}: no license file (LICENSE*, LICENCE*, COPYING*, NOTICE*, \
                 COPYRIGHT*) at the top of its source, so its packages carry none; list them with \
                 license-files = [\"…\"] in {}",
                recipe.file.display
            ));
        }
        let coverage = match &recipe.build.system {
            _ if recipe.gpu_code != crate::recipe::gpu_code::GpuCode::AheadOfTime => {
                phase("checking the declared GPU code");
                Some(self.verdict_gate(component, recipe, &staging.tree())?)
            }
            BuildSystem::Copy { .. } => None,
            _ if !recipe.build.device_code => None,
            _ => {
                phase("checking code objects");
                Some(self.gate(component, &staging.tree())?)
            }
        };
        if let Some(test) = &recipe.test {
            task.set_message("checking the test corpus");
            let enabled = crate::corpus::installed::tests_enabled(recipe);
            if let Err(why) = crate::corpus::installed::check(
                test,
                &staging.tree(),
                &self.sources.catalog.release.prefix,
            ) {
                // Only a build known to build its tests must have installed them; otherwise
                // the tests may simply be off (or built by a script rocforge cannot read).
                if enabled == Some(true) {
                    task.finish(&format!("{component}: FAILED"));
                    return Err(StepError::TestCorpus {
                        component: component.into(),
                        recipe: recipe.file.display.clone(),
                        why,
                    });
                }
                self.reporter.note(&format!(
                    "warning: {component}: {why} ([test] in {}{})",
                    recipe.file.display,
                    if enabled == Some(false) {
                        "; the build switches its tests off"
                    } else {
                        ""
                    }
                ));
            }
        }
        std::fs::copy(log, staging.log()).map_err(io("log"))?;
        crate::fault::point("build");
        let seconds = clock.elapsed().as_secs_f64();
        let meta = EntryMeta {
            component: ComponentName::checked(component),
            key: step.key.clone(),
            committed: now(),
            version: step.version.clone(),
            release: self.plan.release.clone(),
            targets: self.plan.targets.clone(),
            runtime: self.runtime.kind().to_string(),
            reproducible: self.runtime.kind() != Kind::Host,
            image: Some(self.plan.image.clone()),
            started,
            duration_secs: seconds,
            source_commit: prepared.commit.clone(),
            source_date_epoch: Some(u64::try_from(prepared.source_date_epoch).unwrap_or(0)),
            coverage,
            licenses,
        };
        staging.commit(&meta, &step.hash_input.to_value())?;
        Ok(Some(seconds))
    }
}

impl Builder<'_> {
    /// Where a step builds, kept when it stops so the next run continues there.
    /// The compiler cache of the builds made with this run's builder image.
    fn ccache_dir(&self) -> PathBuf {
        self.sources.cache.root().join("ccache").join(
            &hex::encode(<sha2::Sha256 as sha2::Digest>::digest(
                self.image_for_run().as_bytes(),
            ))[..16],
        )
    }

    fn scratch_dir(&self, step: &Step) -> PathBuf {
        self.sources.cache.root().join("builds").join(&step.key)
    }

    /// The gate of a component whose `[coverage]` kind is not ahead-of-time: its verdict must
    /// hold (a runtime-compiled proof for each target, no GPU code in a host-only one), and it
    /// is recorded under its kind, never as code-object coverage.
    fn verdict_gate(
        &self,
        component: &str,
        recipe: &Recipe,
        tree: &Path,
    ) -> Result<serde_json::Value, StepError> {
        let report = self.tree_coverage(component, tree)?;
        let v = crate::inspect::verdict::verdict(&recipe.gpu_code, &report, &self.plan.targets)
            .expect("not ahead-of-time");
        let strip = |s: &str| s.replace(&format!("{}/", tree.display()), "");
        let gaps: Vec<String> = v
            .gaps
            .iter()
            .filter(|(t, _)| {
                t.as_ref().is_none_or(|t| {
                    !crate::inspect::coverage::allows(&self.options.allow_missing, t)
                })
            })
            .map(|(_, g)| format!("  {}", strip(g)))
            .collect();
        if !gaps.is_empty() {
            return Err(StepError::Coverage {
                component: component.into(),
                table: format!(
                    "{} (declared in {})\n{}",
                    v.kind,
                    recipe.display_file(),
                    gaps.join("\n")
                )
                .trim()
                .to_string(),
            });
        }
        for line in &v.lines {
            self.reporter.note(&format!("{component}: {}", strip(line)));
        }
        Ok(serde_json::json!({
            "kind": v.kind,
            "targets": self.plan.targets.iter().map(|t| t.to_string()).collect::<Vec<_>>(),
            "declared": recipe.gpu_code,
            "verdict": v.lines.iter().map(|l| strip(l)).collect::<Vec<_>>(),
            "missing_allowed": v.gaps.iter().map(|(_, g)| strip(g)).collect::<Vec<_>>(),
        }))
    }

    /// What code objects the built tree carries for the plan's targets.
    fn tree_coverage(
        &self,
        component: &str,
        tree: &Path,
    ) -> Result<crate::inspect::CoverageReport, StepError> {
        crate::inspect::coverage(
            &[tree.to_path_buf()],
            &self.plan.targets,
            &self.sources.catalog.arches,
        )
        .map_err(|e| StepError::Coverage {
            component: component.into(),
            table: format!("  {e}"),
        })
    }

    /// The coverage gate: every library with device code must carry each requested target.
    fn gate(&self, component: &str, tree: &Path) -> Result<serde_json::Value, StepError> {
        let report = self.tree_coverage(component, tree)?;
        let strip = |lib: &str| {
            lib.strip_prefix(&format!("{}/", tree.display()))
                .unwrap_or(lib)
                .to_string()
        };
        use crate::inspect::coverage::{allows, spoof_note};
        let table = &self.sources.catalog.arches;
        let mut gaps: Vec<String> = report
            .missing()
            .filter(|(_, t)| !allows(&self.options.allow_missing, t))
            .map(|(lib, t)| format!("  {}: {}", strip(lib), report.gap_of(lib, t)))
            .collect();
        gaps.extend(
            report
                .spoofed()
                .filter(|(_, t, _)| !allows(&self.options.allow_spoof, t))
                .map(|(lib, t, n)| format!("  {}: {}", strip(lib), spoof_note(table, t, n))),
        );
        if !gaps.is_empty() || !report.errors.is_empty() {
            let mut table = gaps.join("\n");
            for e in &report.errors {
                table += &format!("\n  unreadable: {e}");
            }
            return Err(StepError::Coverage {
                component: component.into(),
                table: table.trim().to_string(),
            });
        }
        let allowed: Vec<(String, String)> = report
            .missing()
            .map(|(lib, t)| (strip(lib), t.to_string()))
            .collect();
        let spoof_allowed: Vec<(String, String, String)> = report
            .spoofed()
            .map(|(lib, t, n)| (strip(lib), t.to_string(), n.to_string()))
            .collect();
        Ok(serde_json::json!({
            "libraries": report.rows.len(),
            "targets": self.plan.targets.iter().map(|t| t.to_string()).collect::<Vec<_>>(),
            "missing_allowed": allowed,
            "spoof_allowed": spoof_allowed,
            "report": report,
        }))
    }
}

/// Runs `f` while following `log`, telling `task` where the build stands a few times a second.
fn with_progress<T>(
    log: &Path,
    task: &dyn Task,
    tracker: &Mutex<follow::Tracker>,
    f: impl FnOnce() -> T,
) -> T {
    let (done, wake) = std::sync::mpsc::channel::<()>();
    std::thread::scope(|s| {
        s.spawn(move || {
            let mut follower = follow::LogFollower::new(log);
            loop {
                // Wakes at once when the run ends, so no build waits on the follower.
                let ended = !matches!(
                    wake.recv_timeout(std::time::Duration::from_millis(250)),
                    Err(std::sync::mpsc::RecvTimeoutError::Timeout)
                );
                let now = Instant::now();
                let mut t = tracker.lock().expect("not poisoned");
                let mut on_line = |l: &str| {
                    t.line(l, now);
                    task.log_line(l);
                };
                if ended {
                    follower.finish(&mut on_line);
                } else {
                    follower.poll(&mut on_line);
                }
                task.build_status(&t.status(now));
                if ended {
                    break;
                }
            }
        });
        let out = f();
        let _ = done.send(());
        out
    })
}
