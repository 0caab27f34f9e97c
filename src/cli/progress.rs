//! The binary's progress display: indicatif bars on a terminal, plain lines otherwise (logs,
//! CI), with GitHub Actions folding when GITHUB_ACTIONS=true.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use rocforge::progress::{Reporter, Task};

pub struct TermReporter {
    multi: Option<MultiProgress>,
    github: bool,
}

impl TermReporter {
    pub fn new(quiet: bool) -> Self {
        let tty = std::io::stderr().is_terminal() && !quiet;
        Self {
            multi: tty.then(|| MultiProgress::with_draw_target(ProgressDrawTarget::stderr())),
            github: std::env::var("GITHUB_ACTIONS").is_ok_and(|v| v == "true"),
        }
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
    fn task(&self, label: &str, total: Option<u64>, bytes: bool) -> Box<dyn Task> {
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
        match &self.multi {
            Some(multi) => {
                let _ = multi.println(message);
            }
            None => eprintln!("{message}"),
        }
    }
}
