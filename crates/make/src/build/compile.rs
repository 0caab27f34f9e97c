//! The run stage of a step that builds (cmake or a script): its build directory (continued,
//! pulled from a checkpoint, or new), its dependencies' trees, the container run, and the
//! installed output moved into the staged store entry.

use crate::diag::Hint;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::Ordering;
use std::time::Instant;

use super::step::{Progress, Stage};
use super::{Builder, StepError, driver, follow, resume};
use crate::progress::Task;
use crate::runtime::{Kind, Mount, RunSpec};
use crate::source::prepare::Prepared;
use crate::store::Staging;

impl Builder<'_> {
    pub(super) fn compile(
        &self,
        s: &Stage<'_>,
        staging: &Staging,
        prepared: &Prepared,
        jobs: usize,
        progress: &Progress<'_>,
    ) -> Result<Option<u64>, StepError> {
        let prefix = self.sources.catalog.release.prefix.clone();
        let work = self.build_directory(s)?;
        let scratch = work.root.clone();
        let deps = scratch.join("deps");
        self.link_dependencies(s, prepared, &deps, &prefix)?;
        let spec = self.run_spec(s, prepared, &scratch, &deps, &prefix, jobs)?;
        let entered = self
            .drain
            .enter(&work.build())
            .map_err(s.io("build directory"))?;
        let ran = self.run_container(s, &spec, progress);
        drop(entered);
        ran?;
        crate::fault::point("build");
        self.take_output(s, staging, &work, prefix)
    }

    /// The step's build directory: a stopped build's continued (or the checkpoint another
    /// machine pushed), else a new one.
    fn build_directory(&self, s: &Stage<'_>) -> Result<resume::Scratch, StepError> {
        let work = resume::Scratch::new(self.scratch_dir(s.step));
        self.pull_checkpoint(s.step, &work)
            .map_err(s.io("build directory"))?;
        let start = work
            .prepare(self.options.fresh)
            .map_err(s.io("build directory"))?;
        if let resume::Start::Resumed { steps_done } = start {
            let done = steps_done
                .map(|n| format!(" ({n} ninja steps done)"))
                .unwrap_or_default();
            self.reporter.note(&format!(
                "{}: continuing the build that stopped in {}{done}; --fresh starts over",
                s.component,
                work.build().display()
            ));
        }
        Ok(work)
    }

    /// The dependencies' store trees linked into `deps`, the prefix the build sees them in.
    fn link_dependencies(
        &self,
        s: &Stage<'_>,
        prepared: &Prepared,
        deps: &Path,
        prefix: &str,
    ) -> Result<(), StepError> {
        for d in &s.step.depends {
            let dep = self.plan.step(d).expect("dependencies are in the plan");
            crate::fsutil::link_tree(&self.store.tree(&dep.key), deps)
                .map_err(s.io("dependency tree"))?;
        }
        // What find_package(X V EXACT) will refuse at configure time, said before it runs
        // (for rocBLAS and Tensile that is after the venv is made): the dependencies'
        // installed package version files are what CMake reads.
        let found = |w: &crate::source::pairing::Want| {
            crate::source::pairing::found(deps, &w.package).map(|mut f| {
                f.at = format!("{}/{}", prefix.trim_end_matches('/'), f.at);
                f
            })
        };
        if let Some(m) = crate::source::pairing::mismatches(s.recipe, &prepared.tree, found)
            .into_iter()
            .next()
        {
            s.task.finish(&format!("{}: FAILED", s.component));
            return Err(StepError::DependencyVersion {
                message: m.to_string(),
                hint: m.hint(),
            });
        }
        Ok(())
    }

    /// The build's run: its mounts, environment and script, and its container's name and labels.
    fn run_spec(
        &self,
        s: &Stage<'_>,
        prepared: &Prepared,
        scratch: &Path,
        deps: &Path,
        prefix: &str,
        jobs: usize,
    ) -> Result<RunSpec, StepError> {
        let (component, step, recipe) = (s.component, s.step, s.recipe);
        let ccache = self.ccache_dir(step);
        std::fs::create_dir_all(&ccache).map_err(s.io("ccache"))?;
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
                host: deps.to_path_buf(),
                container: prefix.to_string(),
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
        let script = driver::script(recipe, &step.gpu_flags, prefix, jobs)
            .expect("cmake and script builds have a script");
        let paths = self.driver_paths(s, prepared, scratch, deps, &mounts[4].host, prefix)?;
        Ok(RunSpec {
            name: format!(
                "rocforge-{component}-{}-{}",
                step.key.short(),
                std::process::id()
            ),
            image: self.image_for_run(step),
            mounts,
            env: driver::environment(
                recipe,
                &step.gpu_flags,
                prefix,
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
        })
    }

    /// Where the build's directories are as its script sees them.
    fn driver_paths(
        &self,
        s: &Stage<'_>,
        prepared: &Prepared,
        scratch: &Path,
        deps: &Path,
        ccache: &Path,
        prefix: &str,
    ) -> Result<driver::Paths, StepError> {
        // In a container the directories have fixed paths; on the host, their own.
        if self.runtime.kind() != Kind::Host {
            return Ok(driver::Paths::container(prefix));
        }
        let inputs = scratch.join("inputs");
        std::fs::create_dir_all(&inputs).map_err(s.io("inputs"))?;
        for (name, path) in &prepared.inputs {
            std::os::unix::fs::symlink(path, inputs.join(name)).map_err(s.io("inputs"))?;
        }
        let host = |p: &Path| p.display().to_string();
        Ok(driver::Paths {
            src: host(&prepared.tree),
            build: host(&scratch.join("build")),
            out: host(&scratch.join("out")),
            deps: host(deps),
            ccache: host(ccache),
            inputs: host(&inputs),
        })
    }

    /// Runs the build, its container named for Ctrl-C while it runs; an exit that is not a
    /// success is the build's failure, or the container's that never started.
    fn run_container(
        &self,
        s: &Stage<'_>,
        spec: &RunSpec,
        progress: &Progress<'_>,
    ) -> Result<(), StepError> {
        let component = s.component;
        progress.phase("starting");
        crate::fault::point("build");
        let log_start = std::fs::metadata(s.log).map_or(0, |m| m.len());
        self.running
            .lock()
            .expect("not poisoned")
            .push(spec.name.clone());
        let exit = with_progress(s.log, s.task, &progress.tracker, || {
            self.runtime.run(spec, s.log)
        });
        self.running
            .lock()
            .expect("not poisoned")
            .retain(|n| n != &spec.name);
        let exit = exit?;
        // A build that finished while the run drained is done: only one that did not is stopped.
        if self.stop.load(Ordering::SeqCst) && !(self.drain.is_on() && exit.success()) {
            return Err(s.stopped());
        }
        if exit.success() {
            return Ok(());
        }
        let code = exit
            .0
            .map_or("killed by a signal".into(), |c| c.to_string());
        // The driver's script announces each phase ("==> …") from its first line:
        // a run that printed none never got into its container.
        if self.runtime.kind() != crate::runtime::Kind::Host
            && let Some(said) = runtime_words(s.log, log_start)
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
        Err(StepError::Failed {
            component: component.into(),
            code,
        })
    }

    /// What the build installed under the prefix, moved into the staged entry; the build
    /// directory removed, its ninja log kept beside the step's log. Returns the disk the build
    /// directory took at the end (None if it could not be read): with the installed tree, the
    /// most the build took at once, which the plan's disk estimate learns from.
    fn take_output(
        &self,
        s: &Stage<'_>,
        staging: &Staging,
        work: &resume::Scratch,
        prefix: String,
    ) -> Result<Option<u64>, StepError> {
        let prefix_rel = prefix.trim_start_matches('/').to_string();
        let installed = work.root.join("out").join(&prefix_rel);
        if !installed.is_dir() {
            return Err(StepError::NothingInstalled {
                component: s.component.into(),
                prefix,
            });
        }
        std::fs::remove_dir(staging.tree()).map_err(s.io("store staging"))?;
        let into_store = format!("moving the output into {}", staging.tree().display());
        match std::fs::rename(&installed, staging.tree()) {
            // The scratch directory is in the cache, the staging entry in the store:
            // on two filesystems (a store on another disk) only a copy gets it there.
            Err(e) if e.raw_os_error() == Some(libc::EXDEV) => {
                crate::fsutil::copy_tree(&installed, &staging.tree()).map_err(s.io(&into_store))?
            }
            r => r.map_err(s.io(&into_store))?,
        }
        // Ninja's per-step start and end times outlive the build directory beside the
        // log: where a long build's hours went (Tensile's share of rocBLAS, say).
        let _ = std::fs::copy(
            work.build().join(".ninja_log"),
            s.log.with_extension("ninja_log"),
        );
        let build_bytes = crate::fsutil::disk_usage(&work.build()).ok();
        crate::fault::point("build");
        let _ = work.remove();
        Ok(build_bytes)
    }
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
