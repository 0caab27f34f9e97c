//! One component's build, stage by stage: reserve its store entry, prepare its sources and its
//! share of the compile jobs, run the build (`compile`), gate what it installed (`gate`), and
//! commit the entry to the store.

use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::Ordering;
use std::time::Instant;

use super::{Builder, StepError, follow, jobs, now};
use crate::plan::{Step, StoreView};
use crate::progress::Task;
use crate::recipe::{BuildSystem, Recipe};
use crate::runtime::Kind;
use crate::source::prepare::{self, Prepared};
use crate::store::{EntryMeta, Staging};

/// What every stage of one step's build reads.
pub(super) struct Stage<'s> {
    pub step: &'s Step,
    pub component: &'s str,
    pub recipe: &'s Recipe,
    pub log: &'s Path,
    pub task: &'s dyn Task,
}

impl Stage<'_> {
    /// A failed file operation of this step, named by what it was for.
    pub fn io(&self, what: &str) -> impl FnOnce(std::io::Error) -> StepError {
        let component = self.component.to_string();
        let what = what.to_string();
        move |source| StepError::Io {
            component,
            what,
            source,
        }
    }

    pub fn stopped(&self) -> StepError {
        StepError::Stopped {
            component: self.component.into(),
        }
    }
}

/// Where a step's build stands, told to its task at each change of phase.
pub(super) struct Progress<'s> {
    pub task: &'s dyn Task,
    pub tracker: Mutex<follow::Tracker>,
}

impl Progress<'_> {
    pub fn phase(&self, p: &str) {
        let mut t = self.tracker.lock().expect("not poisoned");
        let now = Instant::now();
        t.set_phase(p, now);
        self.task.build_status(&t.status(now));
    }
}

/// What a finished build hands to its commit.
struct Done {
    gated: super::gate::Gated,
    started: u64,
    clock: Instant,
    /// The build directory's disk at the end (Some(0) for a copy, which has none).
    build_bytes: Option<u64>,
}

impl Builder<'_> {
    /// Some(seconds) when built here, None when another process committed it meanwhile.
    pub(super) fn build_step(
        &self,
        step: &Step,
        under_way: &jobs::Running,
        log: &Path,
        task: &dyn Task,
    ) -> Result<Option<f64>, StepError> {
        let component = step.component.as_str();
        let recipe = self
            .sources
            .catalog
            .get(component)
            .expect("plan steps come from the catalog");
        let s = Stage {
            step,
            component,
            recipe,
            log,
            task,
        };
        let Some(staging) = self.reserve(&s)? else {
            return Ok(None);
        };
        let started = now();
        let clock = Instant::now();
        let (_slot, jobs, progress) = self.share_jobs(&s, under_way, clock);
        progress.phase("sources");
        let prepared = prepare::prepare(&self.sources, recipe, &step.source, &self.plan.targets)?;
        crate::fault::point("build");

        let build_bytes = match &recipe.build.system {
            BuildSystem::Copy { dest } => {
                progress.phase("copy");
                crate::fsutil::copy_tree(&prepared.tree, &staging.tree().join(dest))
                    .map_err(s.io("copy"))?;
                Some(0)
            }
            _ => self.compile(&s, &staging, &prepared, jobs, &progress)?,
        };
        let gated = self.gate_entry(&s, &staging, &prepared, &progress)?;
        let done = Done {
            gated,
            started,
            clock,
            build_bytes,
        };
        self.commit(&s, staging, &prepared, done)
    }

    /// The step's store entry reserved, and its log started empty; None when another process
    /// committed the key while this one waited for it.
    fn reserve(&self, s: &Stage<'_>) -> Result<Option<Staging>, StepError> {
        let component = s.component;
        let Some(staging) = self.store.reserve_unless(
            &s.step.key,
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
            return Err(s.stopped());
        }
        std::fs::create_dir_all(s.log.parent().unwrap_or(Path::new(".")))
            .map_err(s.io("log directory"))?;
        std::fs::write(s.log, "").map_err(s.io("log"))?;
        Ok(Some(staging))
    }

    /// The step's place among the builds under way (held until it ends), its share of the
    /// compile jobs, and the tracker its progress is told through.
    fn share_jobs<'u>(
        &self,
        s: &Stage<'u>,
        under_way: &'u jobs::Running,
        clock: Instant,
    ) -> (jobs::Slot<'u>, usize, Progress<'u>) {
        let step = s.step;
        let recorded = self.store.duration(s.component);
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
            s.component,
            clock,
            follow::Estimate::new(recorded, step.resources.hours, jobs),
        ));
        let progress = Progress {
            task: s.task,
            tracker,
        };
        (slot, jobs, progress)
    }

    /// The staged entry committed with its log and its record: what it was built from, how,
    /// how long it took, and what the gates found.
    fn commit(
        &self,
        s: &Stage<'_>,
        staging: Staging,
        prepared: &Prepared,
        done: Done,
    ) -> Result<Option<f64>, StepError> {
        let Done {
            gated,
            started,
            clock,
            build_bytes,
        } = done;
        let step = s.step;
        std::fs::copy(s.log, staging.log()).map_err(s.io("log"))?;
        crate::fault::point("build");
        let seconds = clock.elapsed().as_secs_f64();
        let meta = EntryMeta {
            component: step.component.clone(),
            key: step.key.clone(),
            committed: now(),
            version: step.version.clone(),
            release: self.plan.release.clone(),
            targets: self.plan.targets.clone(),
            runtime: self.runtime.kind().into(),
            reproducible: self.runtime.kind() != Kind::Host,
            image: Some(step.hash_input.image.clone()),
            started,
            duration_secs: seconds,
            source_commit: prepared.commit.clone(),
            source_date_epoch: Some(u64::try_from(prepared.source_date_epoch).unwrap_or(0)),
            coverage: gated.coverage,
            licenses: gated.licenses,
            tree_bytes: crate::fsutil::disk_usage(&staging.tree()).ok(),
            build_bytes,
        };
        staging.commit(&meta, &step.hash_input.to_value())?;
        Ok(Some(seconds))
    }
}
