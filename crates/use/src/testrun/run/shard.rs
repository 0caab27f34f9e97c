//! The shards of a gtest client, each started until its tests are done: a start that hung or
//! died inside a test is followed by one without the tests it finished and that one.

use std::collections::BTreeSet;
use std::time::Instant;

use super::attempt::{Attempt, attempt_once};
use super::filter::{Selection, list_tests};
use super::kernel::KernelLog;
use super::{
    EXCERPT_LINES, KEEP_LINES, RunError, RunResult, RunSpec, ShardSummary, client_name, log_path,
    read_log_tail, xml_path,
};
use crate::progress::Reporter;
use crate::testrun::classify::{self, Evidence, Outcome};
use crate::testrun::journal::{Journal, Record, TestRecord};

/// Runs every shard the journal has not finished.
pub(super) fn run_shards(
    spec: &RunSpec,
    journal: &mut Journal,
    result: &mut RunResult,
    mut kernel: Option<&mut KernelLog>,
    reporter: &dyn Reporter,
) -> Result<(), RunError> {
    let mut listing: Option<Option<Vec<String>>> = None;
    for shard in 0..spec.shards {
        if result.shards.iter().any(|s| s.shard == shard) {
            continue;
        }
        let clock = Instant::now();
        let task = reporter.task(&format!("shard {}/{}", shard + 1, spec.shards), None, false);
        let (exit_code, signal, attempts) = run_shard(
            spec,
            shard,
            &mut listing,
            journal,
            result,
            kernel.as_deref_mut(),
            task.as_ref(),
        )?;
        let summary = ShardSummary {
            shard,
            attempts,
            exit_code,
            signal,
            seconds: clock.elapsed().as_secs_f64(),
        };
        journal.append(&Record::Shard {
            shard,
            exit_code,
            signal,
            attempts,
            seconds: summary.seconds,
        })?;
        task.finish(&format!(
            "shard {}/{}: {} tests",
            shard + 1,
            spec.shards,
            result.tests.iter().filter(|t| t.shard == shard).count()
        ));
        result.shards.push(summary);
    }
    Ok(())
}

/// Starts the shard's client until it is done. Returns how it last exited and how many
/// starts it took. `listing` is the client's test list, read at the first restart.
fn run_shard(
    spec: &RunSpec,
    shard: u32,
    listing: &mut Option<Option<Vec<String>>>,
    journal: &mut Journal,
    result: &mut RunResult,
    mut kernel: Option<&mut KernelLog>,
    task: &dyn crate::progress::Task,
) -> Result<(Option<i32>, Option<i32>, u32), RunError> {
    let mut done: BTreeSet<String> = result
        .tests
        .iter()
        .filter(|t| t.shard == shard)
        .map(|t| t.name.clone())
        .collect();
    let mut attempt = result
        .tests
        .iter()
        .filter(|t| t.shard == shard)
        .map(|t| t.attempt)
        .max()
        .unwrap_or(0);
    loop {
        attempt += 1;
        let Some(selection) = next_selection(spec, shard, &done, listing) else {
            attempt -= 1; // nothing was started
            return Ok((Some(0), None, attempt));
        };
        let a = attempt_once(
            spec,
            shard,
            attempt,
            &selection,
            journal,
            &mut result.tests,
            &mut done,
            kernel.as_deref_mut(),
            task,
        )?;
        if let Some(x) = xml_path(spec, shard, attempt).filter(|p| p.is_file()) {
            result.xml.push(x);
        }
        if a.stop {
            return Ok((None, Some(libc::SIGKILL), attempt));
        }
        if a.interrupted {
            continue;
        }
        let clean_exit = a.signal.is_none() && a.exit_code == Some(0);
        let explained = a.failed > 0 && a.signal.is_none() && a.exit_code == Some(1);
        if !clean_exit && !explained {
            let t = client_failure(spec, shard, attempt, &a, kernel.as_deref_mut());
            journal.append(&Record::Test(t.clone()))?;
            result.tests.push(t);
            return Ok((a.exit_code, a.signal, attempt));
        }
        // A restart that ran a chunk of a long list goes on with the rest.
        if matches!(selection, Selection::Only(_)) && a.recorded > 0 {
            continue;
        }
        return Ok((a.exit_code, a.signal, attempt));
    }
}

/// What the next start runs; None when the shard has none of its tests left.
fn next_selection(
    spec: &RunSpec,
    shard: u32,
    done: &BTreeSet<String>,
    listing: &mut Option<Option<Vec<String>>>,
) -> Option<Selection> {
    // The first start uses gtest's own sharding; a restart names what is left.
    if done.is_empty() {
        return Some(Selection::Shard);
    }
    if listing.is_none() {
        *listing = Some(list_tests(spec));
    }
    match listing.as_ref().expect("just set") {
        Some(all) => {
            let mine: Vec<&String> = all
                .iter()
                .enumerate()
                .filter(|(i, _)| spec.shards == 1 || *i as u32 % spec.shards == shard)
                .map(|(_, t)| t)
                .collect();
            let remaining: Vec<&String> = mine
                .iter()
                .copied()
                .filter(|t| !done.contains(*t))
                .collect();
            if remaining.is_empty() {
                return None;
            }
            Some(Selection::filter(all, &remaining))
        }
        None => Some(Selection::Exclude(done.iter().cloned().collect())),
    }
}

/// The client failed outside any test (before the first, or after the last): that is
/// recorded as a test of its own so it is classified and reported.
fn client_failure(
    spec: &RunSpec,
    shard: u32,
    attempt: u32,
    a: &Attempt,
    kernel: Option<&mut KernelLog>,
) -> TestRecord {
    let name = format!("(shard {shard}) {}", client_name(spec));
    let log = read_log_tail(&log_path(spec, shard, attempt), KEEP_LINES);
    let resets = kernel.map(|k| k.new_resets()).unwrap_or_default();
    let (class, excerpt) = classify::classify(
        &Evidence {
            outcome: Outcome::Crashed,
            exit_code: a.exit_code,
            signal: a.signal,
            lines: &log,
            kernel: &resets,
        },
        EXCERPT_LINES,
    );
    TestRecord {
        shard,
        name: name.clone(),
        outcome: classify::settled(Outcome::Crashed, class),
        class,
        duration_ms: 0,
        excerpt,
        attempt,
    }
}
