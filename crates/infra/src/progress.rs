//! Progress reporting from library code. The library says what it is doing; the binary decides
//! how to show it (bars on a terminal, plain lines in logs and CI).

/// One unit of long work: a download, a clone, a patch series.
pub trait Task: Send + Sync {
    /// Adds to the amount done (bytes for transfers, items otherwise).
    fn inc(&self, n: u64);
    /// Sets or corrects the total once known (e.g. from Content-Length).
    fn set_total(&self, total: u64);
    /// Sets the amount done outright (e.g. after resuming a partial download).
    fn set_position(&self, pos: u64);
    fn finish(&self, message: &str);
    /// What the task is doing now (a build phase); shown beside its label.
    fn set_message(&self, _message: &str) {}
    /// Where a component's build stands. Called a few times a second while the build runs;
    /// the display decides what to show and how often.
    fn build_status(&self, status: &BuildStatus) {
        self.set_message(&status.phase);
    }
    /// Ends a component's build task.
    fn finish_build(&self, _end: BuildEnd, message: &str) {
        self.finish(message);
    }
    /// One line of a component's build log, as the build writes it. Most displays show the
    /// status instead; a verbose one prints the lines.
    fn log_line(&self, _line: &str) {}
}

pub trait Reporter: Send + Sync {
    /// Starts a task. `total` is in bytes when `bytes` is true.
    fn task(&self, label: &str, total: Option<u64>, bytes: bool) -> Box<dyn Task>;
    /// A one-line note that is not a task (a retry, a mirror used, a cache hit).
    fn note(&self, message: &str);
    /// Starts one component's build, whose output goes to `log`: displays name the log at
    /// once, so a person can follow it during a long build.
    fn build_task(&self, _component: &str, label: &str, _log: &std::path::Path) -> Box<dyn Task> {
        self.task(label, None, false)
    }
}

/// Reports nothing: for tests and for callers that want silence.
pub struct Silent;

struct SilentTask;

impl Task for SilentTask {
    fn inc(&self, _: u64) {}
    fn set_total(&self, _: u64) {}
    fn set_position(&self, _: u64) {}
    fn finish(&self, _: &str) {}
}

impl Reporter for Silent {
    fn task(&self, _: &str, _: Option<u64>, _: bool) -> Box<dyn Task> {
        Box::new(SilentTask)
    }
    fn note(&self, _: &str) {}
}

/// How a component's build ended, for displays and `--format json` events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BuildEnd {
    Built,
    Failed,
    Stopped,
    /// Another rocforge process committed the same key meanwhile.
    Cached,
}

/// Where a build's remaining-time estimate comes from, so a reader can judge it: the previous
/// build of the component is a good guess, the recipe's `hours` hint a rough one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum EstimateFrom {
    LastBuild,
    Recipe,
    /// The build tool's step rate so far (no earlier build to go by).
    Steps,
}

/// Where one component's build stands.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct BuildStatus {
    pub component: String,
    /// The driver's phase (`sources`, `configure`, `build`, `install`, …).
    pub phase: String,
    /// The build tool's steps (ninja's `[done/total]`), when it prints them.
    pub done: Option<u64>,
    pub total: Option<u64>,
    /// make's `[ 42%]`, when that is all the build tool prints.
    pub percent: Option<u8>,
    pub elapsed_s: u64,
    /// None when unknown, or when the build already took longer than the estimate.
    pub eta_s: Option<u64>,
    pub estimate_from: Option<EstimateFrom>,
}

/// `rocsparse  build [132/270]  12m04s elapsed, ~14m left`: one line a person reads in a
/// terminal or a CI log.
impl std::fmt::Display for BuildStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}  {}", self.component, self.phase)?;
        match (self.done, self.total, self.percent) {
            (Some(d), Some(t), _) => write!(f, " [{d}/{t}]")?,
            (_, _, Some(p)) => write!(f, " [{p}%]")?,
            _ => {}
        }
        write!(
            f,
            "  {} elapsed",
            crate::units::format_duration(self.elapsed_s)
        )?;
        if let Some(eta) = self.eta_s {
            write!(f, ", ~{} left", coarse(eta))?;
        }
        Ok(())
    }
}

/// An estimate to the minute (to the second under one): more digits would claim a precision
/// the estimate does not have.
fn coarse(secs: u64) -> String {
    if secs < 60 {
        crate::units::format_duration(secs)
    } else {
        crate::units::format_duration((secs + 30) / 60 * 60)
    }
}

/// A line of `rocforge build --format json` on stderr (schema in docs/builds.md).
#[derive(Debug, serde::Serialize)]
#[serde(tag = "event", rename_all = "lowercase")]
pub enum Event<'a> {
    Start {
        component: &'a str,
        log: &'a std::path::Path,
    },
    Progress(&'a BuildStatus),
    Finish {
        component: &'a str,
        result: BuildEnd,
        elapsed_s: u64,
        message: &'a str,
    },
    /// Anything else the build says (a cache hit, a retry, a download finished).
    Note {
        message: &'a str,
    },
}

impl Event<'_> {
    pub fn to_line(&self) -> String {
        serde_json::to_string(self).expect("plain data")
    }
}

/// When a display without a terminal (a CI log, `--format json`) prints a build's status: at
/// each phase change and at least every `every`, so a log never goes quiet for long while
/// staying short (a line per ninja step would bury the build's own output).
#[derive(Debug)]
pub struct Cadence {
    every: std::time::Duration,
    last: Option<(String, std::time::Instant)>,
}

impl Cadence {
    pub fn new(every: std::time::Duration) -> Self {
        Self { every, last: None }
    }

    /// Whether `status`, seen at `now`, is to be printed; if so it counts as printed.
    pub fn due(&mut self, status: &BuildStatus, now: std::time::Instant) -> bool {
        let due = match &self.last {
            None => true,
            Some((phase, at)) => *phase != status.phase || now.duration_since(*at) >= self.every,
        };
        if due {
            self.last = Some((status.phase.clone(), now));
        }
        due
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn status(
        phase: &str,
        steps: Option<(u64, u64)>,
        elapsed_s: u64,
        eta_s: Option<u64>,
    ) -> BuildStatus {
        BuildStatus {
            component: "rocsparse".into(),
            phase: phase.into(),
            done: steps.map(|s| s.0),
            total: steps.map(|s| s.1),
            percent: None,
            elapsed_s,
            eta_s,
            estimate_from: eta_s.map(|_| EstimateFrom::LastBuild),
        }
    }

    #[test]
    fn status_lines() {
        let mut make = status("build", None, 65, Some(20));
        make.percent = Some(42);
        let lines = [
            status("build", Some((132, 270)), 724, Some(14 * 60 + 10)),
            status("configure", None, 9, Some(1700)),
            status("install", None, 3700, None),
            make,
        ]
        .map(|s| s.to_string());
        insta::assert_snapshot!(lines.join("\n"), @r"
        rocsparse  build [132/270]  12m04s elapsed, ~14m left
        rocsparse  configure  9s elapsed, ~28m left
        rocsparse  install  1h01m elapsed
        rocsparse  build [42%]  1m05s elapsed, ~20s left
        ");
    }

    #[test]
    fn events() {
        let s = status("build", Some((132, 270)), 724, Some(850));
        let lines = [
            Event::Start {
                component: "rocsparse",
                log: std::path::Path::new("/store/.logs/rocsparse-1a2b.log"),
            },
            Event::Progress(&s),
            Event::Finish {
                component: "rocsparse",
                result: BuildEnd::Built,
                elapsed_s: 1580,
                message: "rocsparse: built in 26m20s",
            },
            Event::Note {
                message: "removed container x",
            },
        ]
        .map(|e| e.to_line());
        insta::assert_snapshot!(lines.join("\n"), @r#"
        {"event":"start","component":"rocsparse","log":"/store/.logs/rocsparse-1a2b.log"}
        {"event":"progress","component":"rocsparse","phase":"build","done":132,"total":270,"percent":null,"elapsed_s":724,"eta_s":850,"estimate_from":"last-build"}
        {"event":"finish","component":"rocsparse","result":"built","elapsed_s":1580,"message":"rocsparse: built in 26m20s"}
        {"event":"note","message":"removed container x"}
        "#);
    }

    #[test]
    fn cadence_prints_phase_changes_and_at_least_every_interval() {
        let t0 = Instant::now();
        let at = |s| t0 + Duration::from_secs(s);
        let mut c = Cadence::new(Duration::from_secs(60));
        let b = status("build", Some((1, 9)), 0, None);
        assert!(c.due(&status("configure", None, 0, None), at(0)));
        assert!(!c.due(&status("configure", None, 0, None), at(59)));
        assert!(c.due(&b, at(59)), "a new phase");
        assert!(!c.due(&b, at(118)));
        assert!(c.due(&b, at(119)), "a minute after the last line");
        assert!(!c.due(&b, at(120)));
    }
}
