//! A corpus of programs each run once as one test: an each-binary corpus (rocm-examples) or an
//! installed CTest tree. Unit i runs in shard i % shards, with its own timeout.

use std::collections::BTreeSet;
use std::io::Write;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::kernel::KernelLog;
use super::{
    Corpus, EXCERPT_LINES, KEEP_LINES, RunError, RunResult, RunSpec, ShardSummary, command_for, io,
    kill_group, record,
};
use crate::process::{Heard, Pumped};
use crate::progress::Reporter;
use crate::testrun::classify::{self, Class, Evidence, Outcome};
use crate::testrun::journal::{Journal, Record, TestRecord};

/// One program an each-binary or CTest corpus runs as one test.
pub(super) struct Unit<'a> {
    name: &'a str,
    program: &'a Path,
    args: Vec<String>,
    workdir: Option<PathBuf>,
    env: &'a [(String, String)],
    timeout: Duration,
    skip_exit_code: Option<i32>,
    will_fail: bool,
    disabled: bool,
}

pub(super) fn units<'a>(spec: &'a RunSpec) -> Vec<Unit<'a>> {
    match &spec.corpus {
        Corpus::Gtest => Vec::new(),
        Corpus::EachBinary {
            binaries,
            skip_exit_code,
        } => binaries
            .iter()
            .map(|(name, path)| Unit {
                name,
                program: path,
                args: spec.args.clone(),
                workdir: path.parent().map(Path::to_path_buf),
                env: &[],
                timeout: spec.timeout,
                skip_exit_code: *skip_exit_code,
                will_fail: false,
                disabled: false,
            })
            .collect(),
        Corpus::Ctest { tests } => tests
            .iter()
            .map(|t| Unit {
                name: &t.name,
                program: &t.program,
                args: t.args.iter().chain(&spec.args).cloned().collect(),
                workdir: Some(t.workdir.clone()),
                env: &t.env,
                // The recipe's timeout bounds every test; CTest's own may only shorten it.
                timeout: t.timeout.map_or(spec.timeout, |c| c.min(spec.timeout)),
                skip_exit_code: t.skip_return_code,
                will_fail: t.will_fail,
                disabled: t.disabled,
            })
            .collect(),
    }
}

/// Runs every unit of an each-binary or CTest corpus not journaled yet, shard by shard.
pub(super) fn run_each(
    spec: &RunSpec,
    binaries: &[Unit<'_>],
    journal: &mut Journal,
    result: &mut RunResult,
    mut kernel: Option<&mut KernelLog>,
    reporter: &dyn Reporter,
) -> Result<(), RunError> {
    for shard in 0..spec.shards {
        if result.shards.iter().any(|s| s.shard == shard) {
            continue;
        }
        let clock = Instant::now();
        let mine: Vec<(usize, &Unit<'_>)> = binaries
            .iter()
            .enumerate()
            .filter(|(i, _)| *i as u32 % spec.shards == shard)
            .collect();
        let mut done: BTreeSet<String> = result
            .tests
            .iter()
            .filter(|t| t.shard == shard)
            .map(|t| t.name.clone())
            .collect();
        // A resumed shard is the next start; its logs do not overwrite the interrupted one's.
        let attempt = result
            .tests
            .iter()
            .filter(|t| t.shard == shard)
            .map(|t| t.attempt)
            .max()
            .map_or(1, |a| a + 1);
        let task = reporter.task(
            &format!("shard {}/{}", shard + 1, spec.shards),
            Some(mine.len() as u64),
            false,
        );
        task.inc(done.len() as u64);
        let (mut exit_code, mut signal) = (Some(0), None);
        for (index, unit) in mine {
            if done.contains(unit.name) {
                continue;
            }
            task.set_message(unit.name);
            let (t, code, sig) = if unit.disabled {
                (disabled(shard, attempt, unit.name), Some(0), None)
            } else {
                run_binary(spec, shard, attempt, index, unit, kernel.as_deref_mut())?
            };
            (exit_code, signal) = (code, sig);
            record(journal, &mut result.tests, &mut done, t)?;
            task.inc(1);
        }
        let seconds = clock.elapsed().as_secs_f64();
        journal.append(&Record::Shard {
            shard,
            exit_code,
            signal,
            attempts: attempt,
            seconds,
        })?;
        task.finish(&format!(
            "shard {}/{}: {} tests",
            shard + 1,
            spec.shards,
            result.tests.iter().filter(|t| t.shard == shard).count()
        ));
        result.shards.push(ShardSummary {
            shard,
            attempts: attempt,
            exit_code,
            signal,
            seconds,
        });
    }
    Ok(())
}

/// A test the CTest tree marks DISABLED: reported as skipped, never started (as ctest does).
fn disabled(shard: u32, attempt: u32, name: &str) -> TestRecord {
    TestRecord {
        shard,
        name: name.to_string(),
        outcome: Outcome::Skipped,
        class: Some(Class::Skipped),
        duration_ms: 0,
        excerpt: "not run: DISABLED in its CTestTestfile.cmake".into(),
        attempt,
    }
}

/// Runs one unit in its directory, killing its process group at its timeout. Returns its
/// record and its exit code and signal.
fn run_binary(
    spec: &RunSpec,
    shard: u32,
    attempt: u32,
    index: usize,
    unit: &Unit<'_>,
    kernel: Option<&mut KernelLog>,
) -> Result<(TestRecord, Option<i32>, Option<i32>), RunError> {
    let mut log = unit_log(spec, shard, attempt, index, unit)?;
    let Ended {
        status,
        hung,
        elapsed,
        mut lines,
    } = run_unit(spec, unit, &mut log)?;
    let exit_code = status.code();
    let signal = if hung { None } else { status.signal() };
    let _ = writeln!(
        log,
        "# rocforge: {}",
        if hung {
            format!(
                "still running after {}s: killed the process group",
                unit.timeout.as_secs()
            )
        } else {
            format!("exited: {status}")
        }
    );
    let _ = log.flush();
    let outcome = if hung {
        Outcome::Hung
    } else if signal.is_some() {
        Outcome::Crashed
    } else if exit_code.is_some() && exit_code == unit.skip_exit_code {
        Outcome::Skipped
    } else if (exit_code == Some(0)) != unit.will_fail {
        Outcome::Passed
    } else {
        Outcome::Failed
    };
    if unit.will_fail && outcome == Outcome::Failed {
        // The output of a test that was meant to fail explains nothing; say why it failed.
        lines.push("WILL_FAIL is set in its CTestTestfile.cmake, but the test passed".into());
    }
    // The binary is gone: resets logged meanwhile are its own (read even when it passed, so
    // they are not pinned on the next one).
    let resets = kernel.map(|k| k.new_resets()).unwrap_or_default();
    let (class, excerpt) = classify::classify(
        &Evidence {
            outcome,
            exit_code,
            signal,
            lines: &lines,
            kernel: if matches!(outcome, Outcome::Hung | Outcome::Crashed) {
                &resets
            } else {
                &[]
            },
        },
        EXCERPT_LINES,
    );
    let t = TestRecord {
        shard,
        name: unit.name.to_string(),
        outcome: classify::settled(outcome, class),
        class,
        duration_ms: elapsed.as_millis() as u64,
        excerpt,
        attempt,
    };
    Ok((t, exit_code, signal))
}

type Log = std::io::BufWriter<std::fs::File>;

/// The unit's log, opened with the command it runs.
fn unit_log(
    spec: &RunSpec,
    shard: u32,
    attempt: u32,
    index: usize,
    unit: &Unit<'_>,
) -> Result<Log, RunError> {
    let (name, path) = (unit.name, unit.program);
    // Test names may hold anything; the log's name keeps only what is safe in a file name.
    let file: String = match &spec.corpus {
        Corpus::Ctest { .. } => name,
        _ => path
            .file_name()
            .and_then(|f| f.to_str())
            .unwrap_or_default(),
    }
    .chars()
    .map(|c| {
        if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
            c
        } else {
            '_'
        }
    })
    .take(80)
    .collect();
    let log_file = spec
        .dir
        .join("logs")
        .join(format!("bin-{index:04}-{file}.attempt-{attempt}.log"));
    let mut log = std::io::BufWriter::new(
        std::fs::File::create(&log_file).map_err(io(format!("{}", log_file.display())))?,
    );
    let _ = writeln!(
        log,
        "# rocforge: shard {shard} attempt {attempt}: {} {}",
        path.display(),
        unit.args
            .iter()
            .map(|a| crate::process::shell_quote(a))
            .collect::<Vec<_>>()
            .join(" ")
    );
    Ok(log)
}

/// How a unit's process ended, and the last lines it printed.
struct Ended {
    status: std::process::ExitStatus,
    /// Killed at its timeout.
    hung: bool,
    elapsed: Duration,
    lines: Vec<String>,
}

/// Runs the unit to its end or its timeout, its output written to `log` as it comes.
fn run_unit(spec: &RunSpec, unit: &Unit<'_>, log: &mut Log) -> Result<Ended, RunError> {
    let path = unit.program;
    let mut cmd = command_for(spec, path, &unit.args);
    if let Some(dir) = &unit.workdir {
        cmd.current_dir(dir);
    }
    for (k, v) in unit.env {
        cmd.env(k, v);
    }
    let started = Instant::now();
    let deadline = started + unit.timeout;
    let mut child = Pumped::spawn(cmd).map_err(|source| RunError::Spawn {
        client: path.display().to_string(),
        source,
    })?;
    let pid = child.id();
    let mut lines: Vec<String> = Vec::new();
    let mut keep = |log: &mut Log, bytes: &[u8]| {
        let _ = log.write_all(bytes);
        if lines.len() >= KEEP_LINES {
            lines.drain(..KEEP_LINES / 2);
        }
        lines.push(
            String::from_utf8_lossy(bytes)
                .trim_end_matches(['\n', '\r'])
                .to_string(),
        );
    };
    let mut hung = false;
    loop {
        match child.next(deadline.saturating_duration_since(Instant::now())) {
            Heard::Line(bytes) => keep(log, &bytes),
            Heard::Silent => {
                hung = true;
                kill_group(pid);
                break;
            }
            Heard::Closed => break,
        }
    }
    // The output ended; the binary has what is left of its timeout to exit.
    let (status, killed) = child
        .wait_until(deadline, &kill_group)
        .map_err(io("waiting for a test binary"))?;
    hung |= killed;
    let elapsed = started.elapsed();
    for bytes in child.rest() {
        keep(log, &bytes);
    }
    Ok(Ended {
        status,
        hung,
        elapsed,
        lines,
    })
}
