//! Builds a plan: each component that the store lacks, in dependency order, independent ones in
//! parallel, in the chosen runtime, committed to the store.

mod compile;
pub mod drain;
pub mod driver;
pub mod flavour;
pub mod follow;
mod gate;
pub mod image;
pub mod jobs;
pub mod license;
pub mod report;
pub mod resume;
pub mod schedule;
mod step;

use crate::diag::Hint;
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::ids::ComponentName;
use crate::plan::StoreView;
use crate::plan::{Plan, Step};
use crate::progress::{BuildEnd, Reporter};
use crate::runtime::ContainerRuntime;
use crate::source::prepare::{self, Sources};
use crate::store::Store;

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

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
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
        because: Option<ComponentName>,
    },
}

#[derive(Debug, Serialize)]
pub struct BuildReport {
    pub steps: Vec<(ComponentName, StepResult)>,
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
    /// A time limit's last stretch (with `stop` set): builds under way finish their compiles.
    pub drain: &'a drain::Drain,
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

/// A step that panicked: failed, with what the panic said.
fn internal_error(step: &Step, panic: &(dyn std::any::Any + Send)) -> StepResult {
    let said = panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".into());
    StepResult::Failed {
        error: format!("{}: rocforge stopped on an internal error: {said}", step.component),
        hint: "this is a bug in rocforge: please report it with the command and this message; the rest of the run went on".into(),
        log: None,
        tail: Vec::new(),
    }
}

impl Builder<'_> {
    /// The image `step` builds in, as the runtime must be told: pinned by digest or local ID
    /// when known. The line's builder image, or the flavour of it the recipe names.
    pub fn image_for_run(&self, step: &Step) -> String {
        let image = &step.hash_input.image;
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
                slotless: self.store.contains(&s.key),
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
                // A panic is a bug, but it must fail its step and let the run end, naming it,
                // not leave the other builds' results unreported.
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    self.step(&steps[i], &under_way)
                }))
                .unwrap_or_else(|panic| internal_error(&steps[i], panic.as_ref()));
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
                let r = r
                    .into_inner()
                    .expect("not poisoned")
                    .unwrap_or_else(|| self.not_run(s, &o));
                (s.component.clone(), r)
            })
            .collect();
        BuildReport { steps: steps_out }
    }

    /// What a step the scheduler never ran is: in the store already (a run stopped before it
    /// got to it is no reason to call it unbuilt), or not built, naming the failed dependency.
    fn not_run(&self, step: &Step, outcome: &schedule::Outcome) -> StepResult {
        if self.store.contains(&step.key) {
            return StepResult::Cached {
                tree: self.store.tree(&step.key),
            };
        }
        let steps = &self.plan.steps;
        StepResult::Skipped {
            because: match outcome {
                // A dependency stopped by Ctrl-C did not fail: nothing to name.
                schedule::Outcome::Skipped(Some(j)) if !self.stop.load(Ordering::SeqCst) => {
                    Some(steps[*j].component.clone())
                }
                _ => None,
            },
        }
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
            component: step.component.clone(),
            steps_done: resume::ninja_steps(&scratch.build()),
            ccache: scratch.began().map(|since| crate::cache::CompilerCache {
                dir: self.ccache_dir(step),
                since,
                max_bytes: crate::cache::CompilerCache::DEFAULT_MAX_BYTES,
            }),
        };
        let done = checkpoint
            .steps_done
            .map(|n| format!(" ({n} ninja steps done)"))
            .unwrap_or_default();
        let began = std::time::Instant::now();
        let pushed = cache.push_checkpoint(&checkpoint, &scratch.build());
        self.reporter.note(
            &match pushed {
                Ok(p) => format!(
                    "{component}: checkpoint pushed to {} as {}{done} in {:.1}s: build directory {}, compiler cache {}",
                    cache.describe(),
                    cache.checkpoint_name(&step.key),
                    began.elapsed().as_secs_f64(),
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
        let ccache = self.ccache_dir(step);
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
                    cache.checkpoint_name(&step.key),
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
}

impl Builder<'_> {
    /// The compiler cache of the builds made with `step`'s builder image.
    fn ccache_dir(&self, step: &Step) -> PathBuf {
        self.sources.cache.root().join("ccache").join(
            &hex::encode(<sha2::Sha256 as sha2::Digest>::digest(
                self.image_for_run(step).as_bytes(),
            ))[..16],
        )
    }

    /// Where a step builds, kept when it stops so the next run continues there.
    fn scratch_dir(&self, step: &Step) -> PathBuf {
        self.sources.cache.root().join("builds").join(&step.key)
    }
}
