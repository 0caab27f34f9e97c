//! Runs a gtest client sharded and hang-proof.
//!
//! Each shard's client runs in its own process group with its output streamed line by line.
//! Every test end is appended to the journal at once. When no test starts or ends for the
//! timeout, the process group is killed, the running test is recorded as hung, and the shard
//! starts again without the tests it finished and the hung one; a client that dies inside a
//! test is restarted the same way. `--resume` feeds the journal back in as `previous`.
//!
//! A corpus of plain programs (`kind = "each-binary"`, e.g. rocm-examples) runs each binary
//! once as one test named by its path, with the timeout per binary: exit 0 passes, the recipe's
//! skip-exit-code skips, another exit fails, a signal crashes, the timeout hangs.

mod attempt;
mod each;
mod filter;
mod kernel;
mod shard;

use std::collections::BTreeSet;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use super::classify::{Class, Outcome};
use super::ctest::CtestTest;
use super::journal::{Journal, JournalError, Record, TestRecord};
use crate::progress::Reporter;
use kernel::KernelLog;
pub use kernel::read_kernel_log;

/// Lines of a test's output kept for its excerpt.
const KEEP_LINES: usize = 200;
/// Lines in an excerpt.
pub const EXCERPT_LINES: usize = 24;

pub struct RunSpec {
    /// The gtest client (unused by an each-binary corpus).
    pub client: PathBuf,
    pub corpus: Corpus,
    pub args: Vec<String>,
    /// Environment set for the client (on top of the inherited one).
    pub env: Vec<(String, String)>,
    /// Inherited variables the client must not see (e.g. a stray HSA_OVERRIDE_GFX_VERSION).
    pub env_remove: Vec<String>,
    pub shards: u32,
    /// No test starting or ending for this long kills the shard's client.
    pub timeout: Duration,
    /// Logs and XML reports go here.
    pub dir: PathBuf,
    /// Where the kernel log is read for amdgpu reset lines (`/dev/kmsg`), if at all.
    pub kernel_log: Option<PathBuf>,
}

/// What `run` runs.
#[derive(Debug, Clone, Default)]
pub enum Corpus {
    /// `client`, a gtest client sharded with gtest's variables.
    #[default]
    Gtest,
    /// Each binary once, as the test named by its first element (its path in the prefix);
    /// binary i runs in shard i % shards; the timeout is per binary.
    EachBinary {
        binaries: Vec<(String, PathBuf)>,
        skip_exit_code: Option<i32>,
    },
    /// The tests of an installed CTest tree, each run once like an each-binary program (test
    /// i in shard i % shards) with its own command, directory, environment and timeout; the
    /// recipe's args are appended to each test's own.
    Ctest { tests: Vec<CtestTest> },
}

pub use crate::corpus::binaries::find_binaries;

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct ShardSummary {
    pub shard: u32,
    pub attempts: u32,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub seconds: f64,
}

#[derive(Debug, Default)]
pub struct RunResult {
    pub tests: Vec<TestRecord>,
    pub shards: Vec<ShardSummary>,
    /// gtest XML reports the client wrote.
    pub xml: Vec<PathBuf>,
    /// Whether the kernel log could be read (None: not asked for).
    pub kernel_log: Option<Result<(), String>>,
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("cannot run the test client {client}: {source}")]
    Spawn {
        client: String,
        source: std::io::Error,
    },
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
    #[error(transparent)]
    Journal(#[from] JournalError),
}

impl crate::diag::Hint for RunError {
    fn hint(&self) -> String {
        match self {
            RunError::Spawn { .. } => {
                "check the recipe's [test] client path and that the file is executable".into()
            }
            RunError::Io { .. } => "check free disk space and permissions of --out".into(),
            RunError::Journal(e) => e.hint(),
        }
    }
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> RunError {
    let what = what.into();
    move |source| RunError::Io { what, source }
}

/// Runs every shard not finished in `previous`, appending to `journal`.
pub fn run(
    spec: &RunSpec,
    journal: &mut Journal,
    previous: &[Record],
    reporter: &dyn Reporter,
) -> Result<RunResult, RunError> {
    std::fs::create_dir_all(spec.dir.join("logs")).map_err(io("creating the log directory"))?;
    std::fs::create_dir_all(spec.dir.join("xml")).map_err(io("creating the XML directory"))?;
    let mut result = RunResult::default();
    let mut kernel = spec.kernel_log.as_deref().map(KernelLog::open);
    result.kernel_log = kernel.as_ref().map(|k| match &k.error {
        Some(e) => Err(e.clone()),
        None => Ok(()),
    });
    replay(previous, &mut result);
    if !matches!(spec.corpus, Corpus::Gtest) {
        each::run_each(
            spec,
            &each::units(spec),
            journal,
            &mut result,
            kernel.as_mut(),
            reporter,
        )?;
        result.shards.sort_by_key(|s| s.shard);
        return Ok(result);
    }
    shard::run_shards(spec, journal, &mut result, kernel.as_mut(), reporter)?;
    result.shards.sort_by_key(|s| s.shard);
    no_gpu_in_process(&mut result.tests);
    Ok(result)
}

/// What a resumed run had done: its tests and its finished shards.
fn replay(previous: &[Record], result: &mut RunResult) {
    for r in previous {
        match r {
            Record::Test(t) => result.tests.push(t.clone()),
            Record::Shard {
                shard,
                exit_code,
                signal,
                attempts,
                seconds,
            } => result.shards.push(ShardSummary {
                shard: *shard,
                attempts: *attempts,
                exit_code: *exit_code,
                signal: *signal,
                seconds: *seconds,
            }),
            Record::Start { .. } => {}
        }
    }
}

/// A GoogleTest client enumerates devices once per process: when one of its tests shows that
/// there was no device, every test that failed in that same process (one shard's attempt) ran
/// without one too, and its failure says nothing about the library. rocFFT's client, started
/// with no /dev/kfd, fails `rocfft_plan_create` and its buffer allocations with messages that
/// name no device, beside tests whose `hipSuccess` expectation got 100. Crashes, hangs and
/// missing libraries stay what they are: those are the client's whatever the device.
/// Applied to every record, replayed ones included, so a resumed run settles the same way.
fn no_gpu_in_process(tests: &mut [TestRecord]) {
    let mut witness: std::collections::BTreeMap<(u32, u32), String> = Default::default();
    for t in tests.iter() {
        if t.class == Some(Class::NoGpu) && !t.excerpt.starts_with(SAME_PROCESS) {
            witness
                .entry((t.shard, t.attempt))
                .or_insert_with(|| t.name.clone());
        }
    }
    for t in tests.iter_mut() {
        let Some(w) = witness.get(&(t.shard, t.attempt)) else {
            continue;
        };
        if t.outcome != Outcome::Failed || t.class == Some(Class::MissingLibrary) {
            continue;
        }
        let was = t.class.map(|c| c.name()).unwrap_or("failed");
        t.excerpt = format!(
            "{SAME_PROCESS} {w} found no GPU in this client process; this test failed without one (read alone: {was})\n{}",
            t.excerpt
        );
        t.outcome = Outcome::NoGpu;
        t.class = Some(Class::NoGpu);
    }
}

/// How an excerpt starts when its test is no-gpu by another test's evidence.
const SAME_PROCESS: &str = "no GPU in the same process:";

fn client_name(spec: &RunSpec) -> String {
    spec.client
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn log_path(spec: &RunSpec, shard: u32, attempt: u32) -> PathBuf {
    spec.dir
        .join("logs")
        .join(format!("shard-{shard}.attempt-{attempt}.log"))
}

fn xml_path(spec: &RunSpec, shard: u32, attempt: u32) -> Option<PathBuf> {
    Some(
        spec.dir
            .join("xml")
            .join(format!("shard-{shard}.attempt-{attempt}.xml")),
    )
}

fn read_log_tail(path: &Path, n: usize) -> Vec<String> {
    let text = std::fs::read(path).unwrap_or_default();
    let text = String::from_utf8_lossy(&text);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

fn command(spec: &RunSpec, args: &[String]) -> Command {
    command_for(spec, &spec.client, args)
}

fn command_for(spec: &RunSpec, program: &Path, args: &[String]) -> Command {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .env_remove("GTEST_TOTAL_SHARDS")
        .env_remove("GTEST_SHARD_INDEX")
        .env_remove("GTEST_FILTER")
        .env_remove("GTEST_OUTPUT")
        .env("GTEST_COLOR", "no")
        .stdin(Stdio::null())
        .process_group(0);
    for k in &spec.env_remove {
        cmd.env_remove(k);
    }
    for (k, v) in &spec.env {
        cmd.env(k, v);
    }
    // SAFETY: prctl is async-signal-safe; the client dies with the runner, so a killed runner
    // leaves no client holding the GPU.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    cmd
}

fn kill_group(pid: u32) {
    // SAFETY: signals the process group the client leads (it was started with pgid = pid).
    unsafe {
        libc::kill(-(pid as i32), libc::SIGKILL);
    }
}

fn record(
    journal: &mut Journal,
    tests: &mut Vec<TestRecord>,
    done: &mut BTreeSet<String>,
    t: TestRecord,
) -> Result<(), RunError> {
    journal.append(&Record::Test(t.clone()))?;
    done.insert(t.name.clone());
    tests.push(t);
    Ok(())
}

/// Counts by class, for summaries.
pub fn class_counts(tests: &[TestRecord]) -> std::collections::BTreeMap<Class, usize> {
    let mut m = std::collections::BTreeMap::new();
    for t in tests {
        if let Some(c) = t.class {
            *m.entry(c).or_insert(0) += 1;
        }
    }
    m
}
