//! One start of a shard's gtest client: its output streamed into its log, each test's end
//! recorded as it comes, and a test the client hung or died in recorded as such.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::io::Write;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::time::Instant;

use super::filter::{Selection, client_args};
use super::kernel::KernelLog;
use super::{
    EXCERPT_LINES, KEEP_LINES, RunError, RunSpec, client_name, command, io, kill_group, log_path,
    read_log_tail, record, xml_path,
};
use crate::process::{Heard, Pumped};
use crate::progress::Task;
use crate::testrun::classify::{self, Evidence, Outcome};
use crate::testrun::gtest::{self, Line};
use crate::testrun::journal::{Journal, TestRecord};

/// How one start of a client ended.
pub(super) struct Attempt {
    /// Tests recorded by this attempt.
    pub recorded: usize,
    pub failed: usize,
    /// The running test was recorded as hung or crashed.
    pub interrupted: bool,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    /// The client hung outside any test: restarting cannot help.
    pub stop: bool,
}

struct Running {
    name: String,
    started: Instant,
    lines: Vec<String>,
}

/// Which start of which shard.
struct Client<'a> {
    spec: &'a RunSpec,
    shard: u32,
    attempt: u32,
}

/// Where an attempt's test records go: the journal at once, the run's tests, and the names
/// the shard has done.
struct Sink<'r> {
    journal: &'r mut Journal,
    tests: &'r mut Vec<TestRecord>,
    done: &'r mut BTreeSet<String>,
}

impl Sink<'_> {
    fn record(&mut self, t: TestRecord) -> Result<(), RunError> {
        record(self.journal, self.tests, self.done, t)
    }
}

type Log = std::io::BufWriter<std::fs::File>;

#[allow(clippy::too_many_arguments)]
pub(super) fn attempt_once(
    spec: &RunSpec,
    shard: u32,
    attempt: u32,
    selection: &Selection,
    journal: &mut Journal,
    tests: &mut Vec<TestRecord>,
    done: &mut BTreeSet<String>,
    mut kernel: Option<&mut KernelLog>,
    task: &dyn Task,
) -> Result<Attempt, RunError> {
    let c = Client {
        spec,
        shard,
        attempt,
    };
    let log_file = log_path(spec, shard, attempt);
    let (child, mut log) = start_client(&c, selection, &log_file)?;
    let mut sink = Sink {
        journal,
        tests,
        done,
    };
    let mut out = Attempt {
        recorded: 0,
        failed: 0,
        interrupted: false,
        exit_code: None,
        signal: None,
        stop: false,
    };
    let (mut running, hung) = follow_output(&c, &child, &mut log, &mut sink, task, &mut out)?;
    let (status, hung) = wait_for_exit(spec, child, &mut log, &mut running, hung)?;
    out.exit_code = status.code();
    out.signal = if hung { None } else { status.signal() };
    if hung && running.is_none() {
        // Hung outside any test (start-up or tear-down): the shard cannot go on.
        out.signal = Some(libc::SIGKILL);
        sink.record(hung_outside(&c, &log_file, kernel.as_deref_mut()))?;
        out.recorded += 1;
        out.stop = true;
        return Ok(out);
    }
    if running.is_none() && !hung {
        // A clean exit: resets logged meanwhile belong to no test this runner can name; the
        // shard-level record (if the exit was not clean) reads them instead.
        if out.exit_code == Some(0)
            && let Some(k) = kernel.as_deref_mut()
        {
            k.new_resets();
        }
    }
    if let Some(r) = running.take() {
        let outcome = if hung {
            Outcome::Hung
        } else {
            Outcome::Crashed
        };
        let resets = kernel.map(|k| k.new_resets()).unwrap_or_default();
        let t = finish(
            shard,
            attempt,
            r,
            outcome,
            None,
            out.exit_code,
            out.signal,
            &resets,
        );
        sink.record(t)?;
        out.recorded += 1;
        out.interrupted = true;
        task.inc(1);
    }
    Ok(out)
}

/// The client started on `selection`, its log opened with the command it runs.
fn start_client(
    c: &Client<'_>,
    selection: &Selection,
    log_file: &Path,
) -> Result<(Pumped, Log), RunError> {
    let (spec, shard, attempt) = (c.spec, c.shard, c.attempt);
    let args = client_args(spec, selection);
    let mut log = std::io::BufWriter::new(
        std::fs::File::create(log_file).map_err(io(format!("{}", log_file.display())))?,
    );
    let mut cmd = command(spec, &args);
    if matches!(selection, Selection::Shard | Selection::Exclude(_)) && spec.shards > 1 {
        cmd.env("GTEST_TOTAL_SHARDS", spec.shards.to_string())
            .env("GTEST_SHARD_INDEX", shard.to_string());
    }
    if let Some(x) = xml_path(spec, shard, attempt) {
        let mut v = OsString::from("xml:");
        v.push(x.as_os_str());
        cmd.env("GTEST_OUTPUT", v);
    }
    let _ = writeln!(
        log,
        "# rocforge: shard {shard} attempt {attempt}: {} {}",
        spec.client.display(),
        args.iter()
            // Cut where a character ends: the filter holds test names the client printed.
            .map(|a| crate::process::shell_quote(&a[..crate::diag::floor_char_boundary(a, 300)]))
            .collect::<Vec<_>>()
            .join(" ")
    );
    let child = Pumped::spawn(cmd).map_err(|source| RunError::Spawn {
        client: spec.client.display().to_string(),
        source,
    })?;
    Ok((child, log))
}

/// Gives the client the timeout to exit once its output ended (it may have closed its output
/// and gone on running), then kills its process group; drains what it still printed and
/// notes in the log how it ended. Returns its status and whether it hung.
fn wait_for_exit(
    spec: &RunSpec,
    mut child: Pumped,
    log: &mut Log,
    running: &mut Option<Running>,
    mut hung: bool,
) -> Result<(std::process::ExitStatus, bool), RunError> {
    let (status, killed) = child
        .wait_until(Instant::now() + spec.timeout, &kill_group)
        .map_err(io("waiting for the test client"))?;
    hung |= killed;
    // Drain what the pump still holds (the kill closed the pipe).
    for bytes in child.rest() {
        let _ = log.write_all(&bytes);
        if let Some(r) = running.as_mut() {
            r.lines
                .push(String::from_utf8_lossy(&bytes).trim_end().to_string());
        }
    }
    let _ = writeln!(
        log,
        "# rocforge: {}",
        if hung {
            format!(
                "no progress for {}s: killed the process group",
                spec.timeout.as_secs()
            )
        } else {
            format!("client exited: {status}")
        }
    );
    let _ = log.flush();
    Ok((status, hung))
}

/// Reads the client's output until it closes, or until no test starts or ends for the
/// timeout (then the process group is killed). Returns the test still running, and whether
/// the client hung.
fn follow_output(
    c: &Client<'_>,
    child: &Pumped,
    log: &mut Log,
    sink: &mut Sink<'_>,
    task: &dyn Task,
    out: &mut Attempt,
) -> Result<(Option<Running>, bool), RunError> {
    let pid = child.id();
    let mut running: Option<Running> = None;
    let mut last_progress = Instant::now();
    let mut hung = false;
    loop {
        let wait = c.spec.timeout.saturating_sub(last_progress.elapsed());
        match child.next(wait) {
            Heard::Line(bytes) => {
                let _ = log.write_all(&bytes);
                let text = String::from_utf8_lossy(&bytes);
                let line = text.trim_end_matches(['\n', '\r']);
                let ended = test_ended(&mut running, line, task, &mut last_progress);
                if let Some((outcome, ms)) = ended {
                    let mut r = running.take().expect("checked above");
                    r.lines.push(line.to_string());
                    last_progress = Instant::now();
                    // The kernel log is read only once the client is dead (hung or crashed
                    // tests): while it runs, its output lags behind what it has done, so a
                    // reset logged now may belong to a later test.
                    let t = finish(c.shard, c.attempt, r, outcome, ms, None, None, &[]);
                    if t.outcome.is_failure() {
                        out.failed += 1;
                    }
                    sink.record(t)?;
                    out.recorded += 1;
                    task.inc(1);
                }
            }
            Heard::Silent => {
                hung = true;
                kill_group(pid);
                break;
            }
            Heard::Closed => break,
        }
    }
    Ok((running, hung))
}

/// What one line of output says of the running test: the end of it (its outcome and time),
/// or None. A line that starts a test makes it the running one; any other is kept for its
/// excerpt.
fn test_ended(
    running: &mut Option<Running>,
    line: &str,
    task: &dyn Task,
    last_progress: &mut Instant,
) -> Option<(Outcome, Option<u64>)> {
    match gtest::parse_line(line) {
        Line::Run(name) => {
            *running = Some(Running {
                name: name.to_string(),
                started: Instant::now(),
                lines: Vec::new(),
            });
            task.set_message(name);
            *last_progress = Instant::now();
            None
        }
        Line::Ok(name, ms) if running.as_ref().is_some_and(|r| r.name == name) => {
            Some((Outcome::Passed, ms))
        }
        Line::Failed(name, ms) if running.as_ref().is_some_and(|r| r.name == name) => {
            Some((Outcome::Failed, ms))
        }
        Line::Skipped(name, ms) if running.as_ref().is_some_and(|r| r.name == name) => {
            Some((Outcome::Skipped, ms))
        }
        _ => {
            if let Some(r) = running.as_mut() {
                if r.lines.len() >= KEEP_LINES {
                    r.lines.drain(..KEEP_LINES / 2);
                }
                r.lines.push(line.to_string());
            }
            None
        }
    }
}

/// The record of a client that hung outside any test, named after the shard and the client.
fn hung_outside(c: &Client<'_>, log_file: &Path, kernel: Option<&mut KernelLog>) -> TestRecord {
    let name = format!("(shard {}) {}", c.shard, client_name(c.spec));
    let lines = read_log_tail(log_file, KEEP_LINES);
    let (class, excerpt) = classify::classify(
        &Evidence {
            outcome: Outcome::Hung,
            exit_code: None,
            signal: None,
            lines: &lines,
            kernel: &kernel.map(|k| k.new_resets()).unwrap_or_default(),
        },
        EXCERPT_LINES,
    );
    TestRecord {
        shard: c.shard,
        name,
        outcome: Outcome::Hung,
        class,
        duration_ms: c.spec.timeout.as_millis() as u64,
        excerpt,
        attempt: c.attempt,
    }
}

#[allow(clippy::too_many_arguments)]
fn finish(
    shard: u32,
    attempt: u32,
    r: Running,
    outcome: Outcome,
    ms: Option<u64>,
    exit_code: Option<i32>,
    signal: Option<i32>,
    resets: &[String],
) -> TestRecord {
    let (class, excerpt) = classify::classify(
        &Evidence {
            outcome,
            exit_code,
            signal,
            lines: &r.lines,
            kernel: resets,
        },
        EXCERPT_LINES,
    );
    TestRecord {
        shard,
        name: r.name,
        outcome: classify::settled(outcome, class),
        class,
        duration_ms: ms.unwrap_or_else(|| r.started.elapsed().as_millis() as u64),
        excerpt,
        attempt,
    }
}
