//! `build`: plan the components, then build what the store lacks in the chosen runtime.

use crate::diag::Hint;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use super::runtime::{RuntimeChoice, open_runtime, runtime_image};
use super::{Error, Result, Session};
use crate::arch::TargetId;
use crate::build::{BuildOptions, BuildReport, Builder, StepResult, jobs};
use crate::cache_oci::OciCache;
use crate::catalog::Overlay;
use crate::catalog::config::Config;
use crate::plan::Plan;
use crate::runtime::ContainerRuntime;

/// What `rocforge build` was asked.
#[derive(Debug, Clone, Default)]
pub struct Request<'a> {
    /// Components to build; empty means the whole release line, which needs `all`.
    pub components: &'a [String],
    /// `--all`: the whole release line was asked for by name, not by leaving components out.
    pub all: bool,
    /// Total compile jobs [default: from memory and cores].
    pub jobs: Option<usize>,
    pub runtime: Option<RuntimeChoice>,
    pub keep_going: bool,
    /// Start each build over instead of continuing the build directory a stopped one left.
    pub fresh: bool,
    /// `--rebuild`: build the requested components again even when the store has them (the
    /// stored entry is kept aside and put back if the new build does not commit).
    pub rebuild: bool,
    /// `--overlay` specs.
    pub overlays: &'a [String],
    /// Targets whose code may be missing from built libraries (a comma list).
    pub allow_missing: Option<&'a str>,
    /// Targets whose code may be the nearest target's (a comma list).
    pub allow_spoof: Option<&'a str>,
    /// `oci://REGISTRY/REPO`: a shared build cache.
    pub cache: Option<&'a str>,
    /// The secret key that signs pushed cache entries.
    pub cache_key: Option<&'a Path>,
    /// `--time-limit`: stop the build (as Ctrl-C does) once it has run this long.
    pub time_limit: Option<std::time::Duration>,
    /// `--drain`: how long before the limit the build stops starting compiles, so those under
    /// way finish into the checkpoint. None: [`default_drain`].
    pub drain: Option<std::time::Duration>,
}

/// A tenth of the time limit, at most 30 minutes: room for the longest compiles of the line
/// (single rocSPARSE and PyTorch units take minutes on 2 cores) without idling much of a job.
pub fn default_drain(limit: std::time::Duration) -> std::time::Duration {
    (limit / 10).min(std::time::Duration::from_secs(30 * 60))
}

/// The plan of a build, before anything runs: what `--dry-run` shows.
pub struct Planned {
    pub plan: Plan,
    overlays: Vec<Overlay>,
}

pub fn plan(session: &Session, req: &Request<'_>) -> Result<Planned> {
    let (_, lock) = session.plan_inputs()?;
    let overlays = session.overlays(req.overlays)?;
    let config = session.config()?;
    let kind = RuntimeChoice::kind(req.runtime);
    let image = runtime_image(&session.catalog, lock, config, req.runtime, kind);
    let plan = session.plan(req.components, kind, image, overlays.clone())?;
    Ok(Planned { plan, overlays })
}

/// A planned build with its runtime and cache open, ready to run.
pub struct Build {
    pub plan: Plan,
    overlays: Vec<Overlay>,
    /// None when every step is in the store already.
    runtime: Option<Arc<dyn ContainerRuntime>>,
    cache: Option<OciCache>,
    options: BuildOptions,
    stop: Arc<AtomicBool>,
    running: Arc<Mutex<Vec<String>>>,
    /// Keys whose old entries `--rebuild` set aside: settled when the run ends.
    aside: Vec<String>,
    time_limit: Option<std::time::Duration>,
    drain_for: std::time::Duration,
    drain: Arc<crate::build::drain::Drain>,
}

/// Stops a running build from a signal handler.
pub struct Interrupt {
    stop: Arc<AtomicBool>,
    running: Arc<Mutex<Vec<String>>>,
    runtime: Arc<dyn ContainerRuntime>,
}

impl Interrupt {
    /// Starts nothing new and stops the containers the build started; staging entries are
    /// removed as their builds unwind, so the store keeps only complete entries.
    pub fn interrupt(&self) {
        self.stop.store(true, Ordering::SeqCst);
        crate::interrupt::request();
        for name in self.running.lock().map(|r| r.clone()).unwrap_or_default() {
            self.runtime.stop(&name);
        }
    }
}

/// How a build ended.
pub struct Outcome {
    pub report: BuildReport,
    /// Interrupted: finished components are in the store, the next run continues from there.
    pub stopped: bool,
    /// Stopped by `--time-limit` (then `stopped` too).
    pub timed_out: bool,
    /// The store trees of the requested components.
    pub trees: Vec<PathBuf>,
}

pub fn prepare(session: &Session, planned: Planned, req: &Request<'_>) -> Result<Build> {
    let config = session.config()?;
    let Planned { plan, overlays } = planned;
    if req.components.is_empty() && !req.all {
        return Err(whole_line_unasked(session, &plan));
    }
    // --rebuild: the requested components' stored entries go aside (dependencies stay), and
    // the plan, made again, builds them.
    let mut aside = Vec::new();
    if req.rebuild {
        for step in plan.requested.iter().filter_map(|n| plan.step(n)) {
            if !step.needs_build() {
                session.store.set_aside(&step.key)?;
                session.reporter.note(&format!(
                    "{}: rebuilding {} (the stored entry is kept until the new one is committed)",
                    step.component,
                    &step.key[..12]
                ));
                aside.push(step.key.to_string());
            }
        }
    }
    let Planned { plan, overlays } = if aside.is_empty() {
        Planned { plan, overlays }
    } else {
        self::plan(session, req)?
    };
    let runtime = if plan.steps.iter().all(|s| !s.needs_build()) {
        None
    } else {
        Some(open_runtime(req.runtime, config)?)
    };
    // The builder image before any source is fetched; one built now keys the builds by its
    // new ID, so the plan is made again.
    let (plan, overlays) = match &runtime {
        Some(rt) => match crate::build::image::ensure(
            rt.as_ref(),
            &session.catalog,
            &plan.image,
            &session.store,
            session.reporter.as_ref(),
        )
        .map_err(|e| super::image::image_error(session, e))?
        {
            crate::build::image::Ready::Built(_) => {
                let again = self::plan(session, req)?;
                (again.plan, again.overlays)
            }
            _ => (plan, overlays),
        },
        None => (plan, overlays),
    };
    // The flavours the steps to build name, FROM the line's image made ready above.
    if let Some(rt) = &runtime {
        let mut done = std::collections::BTreeSet::new();
        for step in plan.steps.iter().filter(|s| s.needs_build()) {
            let recipe = session.catalog.get(&step.component);
            let Some(flavour) = recipe.and_then(|r| r.build.image.as_ref()) else {
                continue;
            };
            if done.insert(flavour.as_str()) {
                crate::build::flavour::ensure(
                    rt.as_ref(),
                    &session.catalog,
                    flavour.as_str(),
                    &step.hash_input.image,
                    &session.store,
                    session.reporter.as_ref(),
                )
                .map_err(|e| super::image::image_error(session, e))?;
            }
        }
    }
    let cache = req
        .cache
        .map(|url| open_cache(url, req.cache_key, config, session.reporter.clone()))
        .transpose()?;
    let jobs = req.jobs.unwrap_or_else(jobs::default_budget);
    let targets_of = |flag: &str, list: Option<&str>| -> Result<Vec<TargetId>> {
        match list {
            Some(list) => session
                .catalog
                .arches
                .resolve_list(list)
                .map_err(|e| Error::hinted(format!("{flag} {list}: {e}"), e.hint())),
            None => Ok(Vec::new()),
        }
    };
    let options = BuildOptions {
        jobs,
        parallel: jobs.clamp(1, 4),
        keep_going: req.keep_going,
        allow_missing: targets_of("--allow-missing", req.allow_missing)?,
        allow_spoof: targets_of("--allow-spoof", req.allow_spoof)?,
        fresh: req.fresh,
    };
    Ok(Build {
        plan,
        overlays,
        runtime,
        cache,
        options,
        stop: Arc::default(),
        running: Arc::default(),
        aside,
        time_limit: req.time_limit,
        drain_for: match (req.time_limit, req.drain) {
            (Some(limit), Some(d)) => d.min(limit),
            (Some(limit), None) => default_drain(limit),
            (None, _) => std::time::Duration::ZERO,
        },
        drain: Arc::default(),
    })
}

/// A bare `rocforge build` would start the whole line (many hours, a hundred GiB or more): it
/// says what that is and how to ask for it, or for less.
fn whole_line_unasked(session: &Session, plan: &Plan) -> Error {
    let e = &plan.estimate;
    let bundles: Vec<&str> = session
        .catalog
        .release
        .bundles
        .keys()
        .map(String::as_str)
        .collect();
    let message = if e.components_to_build == 0 {
        format!(
            "no component named: every one of the {} components of {} is in the store already",
            e.components_cached, plan.release
        )
    } else {
        format!(
            "no component named: the whole release line {} is {} components to build ({} in the store), about {} on the 8-core reference machine and {} of disk",
            plan.release,
            e.components_to_build,
            e.components_cached,
            crate::units::format_hours(e.build_hours_total),
            crate::units::format_size(e.disk_bytes),
        )
    };
    let bundle = if bundles.is_empty() {
        String::new()
    } else {
        format!(" or a bundle ({})", bundles.join(", "))
    };
    Error::hinted(
        message,
        format!(
            "name components{bundle}, e.g. `rocforge build {} --arch {}`; `rocforge list` shows them. `rocforge build --all` builds the whole line, `--dry-run` shows its plan",
            // A library of its own (device code, nothing to build first) makes the example.
            plan.steps
                .iter()
                .find(|s| {
                    s.depends.is_empty()
                        && session
                            .catalog
                            .recipes
                            .get(s.component.as_str())
                            .is_some_and(|r| r.build.device_code)
                })
                .or(plan.steps.first())
                .map_or("COMPONENT", |s| s.component.as_str()),
            crate::arch::comma_list(&plan.targets),
        ),
    )
}

impl Build {
    /// What a Ctrl-C handler calls; None when nothing will run.
    pub fn interrupt(&self) -> Option<Interrupt> {
        self.runtime.as_ref().map(|rt| Interrupt {
            stop: self.stop.clone(),
            running: self.running.clone(),
            runtime: rt.clone(),
        })
    }

    pub fn run(&self, session: &Session) -> Result<Outcome> {
        let timed_out = AtomicBool::new(false);
        let (done, finished) = std::sync::mpsc::channel::<()>();
        let outcome = std::thread::scope(|s| {
            if let (Some(limit), Some(interrupt)) = (self.time_limit, self.interrupt()) {
                let timed_out = &timed_out;
                let (drain, drain_for) = (&self.drain, self.drain_for);
                let reporter = session.reporter.as_ref();
                s.spawn(move || {
                    use std::sync::mpsc::RecvTimeoutError::Timeout;
                    // Woken early when the run ends (the sender is dropped).
                    if !drain_for.is_zero() {
                        if finished.recv_timeout(limit - drain_for) != Err(Timeout) {
                            return;
                        }
                        timed_out.store(true, Ordering::SeqCst);
                        interrupt.stop.store(true, Ordering::SeqCst);
                        let n = drain.begin();
                        reporter.note(&format!(
                            "time limit in {}: no component or compile starts now; the {n} build(s) under way finish the compiles they run, then stop",
                            crate::units::format_duration(drain_for.as_secs())
                        ));
                    }
                    let last = if drain_for.is_zero() { limit } else { drain_for };
                    if finished.recv_timeout(last) == Err(Timeout) {
                        timed_out.store(true, Ordering::SeqCst);
                        interrupt.interrupt();
                    }
                });
            }
            let outcome = self.run_plan(session);
            drop(done);
            outcome
        });
        // A drain that let everything finish stopped nothing: the run did not time out.
        let outcome = outcome.map(|mut o| {
            o.timed_out = timed_out.load(Ordering::SeqCst) && o.stopped;
            o
        });
        for key in &self.aside {
            if let Err(e) = session.store.settle_aside(key, true) {
                session
                    .reporter
                    .note(&format!("warning: {e}: {}", e.hint()));
            }
        }
        outcome
    }

    fn run_plan(&self, session: &Session) -> Result<Outcome> {
        let plan = &self.plan;
        let store = &session.store;
        let to_build = plan.steps.iter().filter(|s| s.needs_build()).count();
        if to_build > 0 {
            session.reporter.note(&format!(
                "building {to_build} component(s) for {} with {} ({} compile jobs)",
                crate::arch::comma_list(&plan.targets),
                self.runtime
                    .as_ref()
                    .map_or("no runtime".into(), |r| r.kind().to_string()),
                self.options.jobs
            ));
            if let Some(runtime) = &self.runtime
                && let Some(note) = niceness_note(runtime.kind(), &session.config_or_default())
            {
                session.reporter.note(&note);
            }
        }
        let report = match &self.runtime {
            None => {
                if let Some(cache) = &self.cache {
                    for s in &plan.steps {
                        if let Some(note) = crate::cache::seed(cache, store, &s.key) {
                            session.reporter.note(&note);
                        }
                    }
                }
                BuildReport {
                    steps: plan
                        .steps
                        .iter()
                        .map(|s| {
                            (
                                s.component.clone(),
                                StepResult::Cached {
                                    tree: store.tree(&s.key),
                                },
                            )
                        })
                        .collect(),
                }
            }
            Some(rt) => Builder {
                plan,
                sources: session.sources(&self.overlays, false)?,
                store,
                runtime: rt.as_ref(),
                reporter: session.reporter.as_ref(),
                options: self.options.clone(),
                stop: &self.stop,
                drain: &self.drain,
                running: &self.running,
                cache: self
                    .cache
                    .as_ref()
                    .map(|c| c as &dyn crate::cache::BuildCache),
            }
            .run(),
        };
        let trees = plan
            .requested
            .iter()
            .filter_map(|c| plan.step(c))
            .map(|s| store.tree(&s.key))
            .collect();
        // A drain that let every build under way finish stopped nothing.
        let stopped = self.stop.load(Ordering::SeqCst) && !report.ok();
        Ok(Outcome {
            report,
            stopped,
            timed_out: false,
            trees,
        })
    }
}

/// The `--cache` registry, trusting the config's keys; pushing when a signing key is given.
/// A retry against the registry is a note: a build waits on it, at most seconds.
/// When rocforge runs niced and builds in containers without a CPU weight of their own: the
/// niceness does not reach them (each container is a CPU cgroup of its own, which the kernel
/// weighs against the others whatever the niceness inside), so say how to make a build yield.
fn niceness_note(
    kind: crate::runtime::Kind,
    config: &crate::catalog::config::Config,
) -> Option<String> {
    use crate::runtime::Kind;
    let (args, key) = match kind {
        Kind::Podman => (&config.podman_run_args, "podman-run"),
        Kind::Docker => (&config.docker_run_args, "docker-run"),
        Kind::Host => return None,
    };
    // SAFETY: getpriority reads this process's niceness; -1 is also a valid niceness, so errno
    // is not consulted (an error reads as not niced).
    let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
    let weighted = args.iter().any(|a| {
        a.starts_with("--cpu-shares") || a.starts_with("--cpus") || a.starts_with("--cpu-quota")
    });
    (nice > 0 && !weighted).then(|| {
        format!(
            "rocforge runs at niceness {nice}, which does not reach the build containers (each has a CPU cgroup of its own); to keep the builds in the background give them a lower weight: [runtime] {key} = [\"--cpu-shares\", \"128\"] in ~/.config/rocforge/config.toml (docs/builds.md)"
        )
    })
}

fn open_cache(
    url: &str,
    key: Option<&Path>,
    config: &Config,
    reporter: Arc<dyn crate::progress::Reporter>,
) -> Result<OciCache> {
    let repo = crate::oci::Repository::parse(url).map_err(|e| {
        Error::hinted(
            format!("--cache {url}: {e}"),
            "write oci://REGISTRY/REPO, e.g. oci://ghcr.io/me/rocforge-cache",
        )
    })?;
    let sign_err = <Error as From<crate::sign::SignError>>::from;
    let trusted = crate::sign::trusted_keys(&config.trust_keys).map_err(sign_err)?;
    let password = std::env::var(crate::sign::PASSWORD_ENV)
        .ok()
        .filter(|p| !p.is_empty());
    let secret = key
        .map(|k| crate::sign::load_secret(k, password))
        .transpose()
        .map_err(sign_err)?;
    let client = crate::net::try_client(&crate::net::HttpOptions::default())
        .map_err(|e| Error::hinted(e, "check the TLS setup"))?;
    let shown = url.to_string();
    Ok(OciCache::new(client, repo, trusted, secret)
        .on_retry(move |what| reporter.note(&format!("cache {shown}: {what}"))))
}
