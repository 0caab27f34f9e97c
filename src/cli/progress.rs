//! The binary's progress display: indicatif bars on a terminal, plain lines otherwise (logs,
//! CI), with GitHub Actions folding when GITHUB_ACTIONS=true; JSON lines for `build --format
//! json`. Under `-v` a build's log lines are printed as well, each after its component's name.

use std::io::IsTerminal;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use rocforge::progress::{BuildEnd, BuildStatus, Cadence, Event, Reporter, Task};

pub struct TermReporter {
    multi: Option<MultiProgress>,
    github: bool,
    quiet: bool,
    json: bool,
    /// `-v`: builds stream their log lines.
    verbose: bool,
    /// The longest a running build goes without a line when there is no terminal.
    every: Duration,
}

/// Overrides how often builds print their status without a terminal (seconds).
const INTERVAL_ENV: &str = "ROCFORGE_PROGRESS_INTERVAL";

fn interval(default: u64) -> Duration {
    let secs = std::env::var(INTERVAL_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(default);
    Duration::from_secs(secs.max(1))
}

impl TermReporter {
    /// The display the global flags ask for: silent with --quiet, log lines with -v.
    pub fn new(g: &super::Global) -> Self {
        let quiet = g.quiet;
        let tty = std::io::stderr().is_terminal() && !quiet;
        Self {
            multi: tty.then(|| MultiProgress::with_draw_target(ProgressDrawTarget::stderr())),
            github: std::env::var("GITHUB_ACTIONS").is_ok_and(|v| v == "true"),
            quiet,
            json: false,
            verbose: g.verbose > 0 && !quiet,
            every: interval(60),
        }
    }

    /// Events as JSON lines on stderr (`--format json`), leaving stdout to the report.
    pub fn json() -> Self {
        Self {
            multi: None,
            github: false,
            quiet: false,
            json: true,
            // stderr carries JSON lines, which a log line would break.
            verbose: false,
            every: interval(10),
        }
    }
}

fn emit(event: &Event<'_>) {
    eprintln!("{}", event.to_line());
}

/// The last status a build reported and when, so a bar's clock keeps running between reports
/// (while sources are fetched nothing reports for minutes).
type Latest = Arc<Mutex<Option<(BuildStatus, Instant)>>>;

fn advanced(latest: &Latest) -> Option<BuildStatus> {
    let (status, at) = latest.lock().ok()?.clone()?;
    let secs = at.elapsed().as_secs();
    Some(BuildStatus {
        elapsed_s: status.elapsed_s + secs,
        // Counted down to nothing, an estimate says nothing rather than "~0s left".
        eta_s: status
            .eta_s
            .and_then(|e| e.checked_sub(secs))
            .filter(|e| *e > 0),
        ..status
    })
}

/// A component's build on a terminal: a spinner and its status line, live.
struct BuildBar {
    bar: ProgressBar,
    multi: MultiProgress,
    latest: Latest,
    /// `-v`: the component's name, printed before each log line above the bars.
    log_prefix: Option<String>,
}

impl Task for BuildBar {
    fn inc(&self, _: u64) {}
    fn set_total(&self, _: u64) {}
    fn set_position(&self, _: u64) {}
    fn set_message(&self, _: &str) {}
    fn build_status(&self, status: &BuildStatus) {
        if let Ok(mut l) = self.latest.lock() {
            *l = Some((status.clone(), Instant::now()));
        }
    }
    fn finish(&self, message: &str) {
        self.finish_build(BuildEnd::Failed, message);
    }
    fn log_line(&self, line: &str) {
        if let Some(prefix) = &self.log_prefix {
            let _ = self.multi.println(format!("{prefix} | {line}"));
        }
    }
    fn finish_build(&self, _: BuildEnd, message: &str) {
        self.bar.finish_and_clear();
        let _ = self.multi.println(format!(
            "{message} ({})",
            indicatif::HumanDuration(self.bar.elapsed())
        ));
    }
}

/// A component's build without a terminal: a line at the start naming the log, a status line
/// at each phase and at least every interval, and a line at the end.
struct BuildLines {
    start: Instant,
    github: bool,
    quiet: bool,
    cadence: Mutex<Cadence>,
    /// `-v`: the component's name, printed before each log line.
    log_prefix: Option<String>,
}

impl Task for BuildLines {
    fn inc(&self, _: u64) {}
    fn set_total(&self, _: u64) {}
    fn set_position(&self, _: u64) {}
    fn build_status(&self, status: &BuildStatus) {
        if !self.quiet
            && self
                .cadence
                .lock()
                .is_ok_and(|mut c| c.due(status, Instant::now()))
        {
            eprintln!("{status}");
        }
    }
    fn log_line(&self, line: &str) {
        if let Some(prefix) = &self.log_prefix {
            eprintln!("{prefix} | {line}");
        }
    }
    fn finish(&self, message: &str) {
        eprintln!("{message} ({:.1}s)", self.start.elapsed().as_secs_f64());
        if self.github {
            eprintln!("::endgroup::");
        }
    }
}

/// A component's build as `--format json` events.
struct BuildEvents {
    component: String,
    start: Instant,
    cadence: Mutex<Cadence>,
}

impl Task for BuildEvents {
    fn inc(&self, _: u64) {}
    fn set_total(&self, _: u64) {}
    fn set_position(&self, _: u64) {}
    fn build_status(&self, status: &BuildStatus) {
        if self
            .cadence
            .lock()
            .is_ok_and(|mut c| c.due(status, Instant::now()))
        {
            emit(&Event::Progress(status));
        }
    }
    fn finish(&self, message: &str) {
        self.finish_build(BuildEnd::Failed, message);
    }
    fn finish_build(&self, end: BuildEnd, message: &str) {
        emit(&Event::Finish {
            component: &self.component,
            result: end,
            elapsed_s: self.start.elapsed().as_secs(),
            message,
        });
    }
}

/// Any task under `-q`: nothing but errors reach stderr, and a task's end is none.
struct Silent;

impl Task for Silent {
    fn inc(&self, _: u64) {}
    fn set_total(&self, _: u64) {}
    fn set_position(&self, _: u64) {}
    fn finish(&self, _: &str) {}
    fn finish_build(&self, _: BuildEnd, _: &str) {}
}

/// Any other task under `--format json`: its end as a note.
struct NoteTask;

impl Task for NoteTask {
    fn inc(&self, _: u64) {}
    fn set_total(&self, _: u64) {}
    fn set_position(&self, _: u64) {}
    fn finish(&self, message: &str) {
        emit(&Event::Note { message });
    }
}

struct BarTask {
    bar: ProgressBar,
    multi: MultiProgress,
}

impl Task for BarTask {
    fn inc(&self, n: u64) {
        self.bar.inc(n);
    }
    fn set_total(&self, total: u64) {
        self.bar.set_length(total);
    }
    fn set_position(&self, pos: u64) {
        self.bar.set_position(pos);
    }
    fn set_message(&self, message: &str) {
        self.bar.set_message(message.to_string());
    }
    fn finish(&self, message: &str) {
        self.bar.finish_and_clear();
        let _ = self.multi.println(format!(
            "{message} ({})",
            indicatif::HumanDuration(self.bar.elapsed())
        ));
    }
}

/// Plain lines: a start line, and an end line with the elapsed time.
struct LineTask {
    start: Instant,
    github: bool,
}

impl Task for LineTask {
    fn inc(&self, _: u64) {}
    fn set_total(&self, _: u64) {}
    fn set_position(&self, _: u64) {}
    fn finish(&self, message: &str) {
        eprintln!("{message} ({:.1}s)", self.start.elapsed().as_secs_f64());
        if self.github {
            eprintln!("::endgroup::");
        }
    }
}

impl Reporter for TermReporter {
    fn build_task(&self, component: &str, label: &str, log: &Path) -> Box<dyn Task> {
        if self.json {
            emit(&Event::Start { component, log });
            return Box::new(BuildEvents {
                component: component.into(),
                start: Instant::now(),
                cadence: Mutex::new(Cadence::new(self.every)),
            });
        }
        if self.quiet {
            return Box::new(Silent);
        }
        let log_prefix = self.verbose.then(|| component.to_string());
        let Some(multi) = &self.multi else {
            if self.github {
                eprintln!("::group::{label}");
            }
            eprintln!("{label}: building, log {}", log.display());
            return Box::new(BuildLines {
                start: Instant::now(),
                github: self.github,
                quiet: self.quiet,
                cadence: Mutex::new(Cadence::new(self.every)),
                log_prefix,
            });
        };
        let _ = multi.println(format!("{label}: building, log {}", log.display()));
        let latest: Latest = Arc::new(Mutex::new(None));
        let shown = latest.clone();
        let waiting = format!("{component}  waiting");
        let bar = multi.add(ProgressBar::new_spinner());
        bar.set_style(
            ProgressStyle::with_template("{spinner} {status}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner())
                .with_key(
                    "status",
                    move |_: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                        let _ = match advanced(&shown) {
                            Some(s) => write!(w, "{s}"),
                            None => write!(w, "{waiting}"),
                        };
                    },
                ),
        );
        bar.enable_steady_tick(Duration::from_millis(120));
        Box::new(BuildBar {
            bar,
            multi: multi.clone(),
            latest,
            log_prefix,
        })
    }

    fn task(&self, label: &str, total: Option<u64>, bytes: bool) -> Box<dyn Task> {
        if self.json {
            return Box::new(NoteTask);
        }
        if self.quiet {
            return Box::new(Silent);
        }
        match &self.multi {
            Some(multi) => {
                let bar = multi.add(match total {
                    Some(t) => ProgressBar::new(t),
                    None => ProgressBar::new_spinner(),
                });
                let template = if bytes {
                    "{spinner} {msg} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}"
                } else {
                    "{spinner} {msg} {elapsed}"
                };
                bar.set_style(
                    ProgressStyle::with_template(template)
                        .unwrap_or_else(|_| ProgressStyle::default_bar())
                        .progress_chars("=> "),
                );
                bar.set_message(label.to_string());
                bar.enable_steady_tick(Duration::from_millis(120));
                Box::new(BarTask {
                    bar,
                    multi: multi.clone(),
                })
            }
            None => {
                if self.github {
                    eprintln!("::group::{label}");
                } else {
                    eprintln!("{label} ...");
                }
                Box::new(LineTask {
                    start: Instant::now(),
                    github: self.github,
                })
            }
        }
    }

    fn note(&self, message: &str) {
        if self.json {
            return emit(&Event::Note { message });
        }
        // -q: nothing but errors (the command's result is on stdout, its failure on stderr).
        if self.quiet {
            return;
        }
        match &self.multi {
            Some(multi) => {
                let _ = multi.println(message);
            }
            None => eprintln!("{message}"),
        }
    }
}
