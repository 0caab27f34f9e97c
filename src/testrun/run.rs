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

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::classify::{self, Class, Evidence, Outcome};
use super::ctest::CtestTest;
use super::gtest::{self, Line};
use super::journal::{Journal, JournalError, Record, TestRecord};
use crate::process::{Heard, Pumped};
use crate::progress::Reporter;

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

/// One program an each-binary or CTest corpus runs as one test.
struct Unit<'a> {
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

fn units<'a>(spec: &'a RunSpec) -> Vec<Unit<'a>> {
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

impl RunError {
    pub fn hint(&self) -> String {
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

/// How one start of a client ended.
struct Attempt {
    /// Tests recorded by this attempt.
    recorded: usize,
    failed: usize,
    /// The running test was recorded as hung or crashed.
    interrupted: bool,
    exit_code: Option<i32>,
    signal: Option<i32>,
    /// The client hung outside any test: restarting cannot help.
    stop: bool,
}

struct KernelLog {
    path: PathBuf,
    seen: usize,
    error: Option<String>,
}

impl KernelLog {
    fn open(path: &Path) -> KernelLog {
        let mut k = KernelLog {
            path: path.to_path_buf(),
            seen: 0,
            error: None,
        };
        match read_kernel_log(path) {
            Ok(lines) => k.seen = lines.len(),
            Err(e) => k.error = Some(e),
        }
        k
    }

    /// amdgpu reset lines logged since the last call.
    fn new_resets(&mut self) -> Vec<String> {
        if self.error.is_some() {
            return Vec::new();
        }
        let Ok(lines) = read_kernel_log(&self.path) else {
            return Vec::new();
        };
        let new: Vec<String> = lines
            .iter()
            .skip(self.seen)
            .filter(|l| classify::is_reset_line(l))
            .cloned()
            .collect();
        self.seen = lines.len();
        new
    }
}

/// Reads a kernel log without blocking: `/dev/kmsg` (one record per read) or a file.
pub fn read_kernel_log(path: &Path) -> Result<Vec<String>, String> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let mut bytes = Vec::new();
    let mut buf = vec![0u8; 16384];
    loop {
        match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => bytes.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            // /dev/kmsg: a record overwritten while reading (EPIPE); go on with the next.
            Err(e) if e.raw_os_error() == Some(libc::EPIPE) => continue,
            Err(e) => return Err(format!("{}: {e}", path.display())),
        }
    }
    Ok(String::from_utf8_lossy(&bytes)
        .lines()
        .map(str::to_string)
        .collect())
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
    if !matches!(spec.corpus, Corpus::Gtest) {
        run_each(
            spec,
            &units(spec),
            journal,
            &mut result,
            kernel.as_mut(),
            reporter,
        )?;
        result.shards.sort_by_key(|s| s.shard);
        return Ok(result);
    }
    let mut listing: Option<Option<Vec<String>>> = None;
    for shard in 0..spec.shards {
        if result.shards.iter().any(|s| s.shard == shard) {
            continue;
        }
        let clock = Instant::now();
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
        let task = reporter.task(&format!("shard {}/{}", shard + 1, spec.shards), None, false);
        let (exit_code, signal) = loop {
            attempt += 1;
            // The first start uses gtest's own sharding; a restart names what is left.
            let selection = if done.is_empty() {
                Selection::Shard
            } else {
                if listing.is_none() {
                    listing = Some(list_tests(spec));
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
                            attempt -= 1; // nothing was started
                            break (Some(0), None);
                        }
                        Selection::filter(all, &remaining)
                    }
                    None => Selection::Exclude(done.iter().cloned().collect()),
                }
            };
            let a = attempt_once(
                spec,
                shard,
                attempt,
                &selection,
                journal,
                &mut result.tests,
                &mut done,
                kernel.as_mut(),
                task.as_ref(),
            )?;
            if let Some(x) = xml_path(spec, shard, attempt).filter(|p| p.is_file()) {
                result.xml.push(x);
            }
            if a.stop {
                break (None, Some(libc::SIGKILL));
            }
            if a.interrupted {
                continue;
            }
            let clean_exit = a.signal.is_none() && a.exit_code == Some(0);
            let explained = a.failed > 0 && a.signal.is_none() && a.exit_code == Some(1);
            if !clean_exit && !explained {
                // The client failed outside any test (before the first, or after the last):
                // record that as a test of its own so it is classified and reported.
                let name = format!("(shard {shard}) {}", client_name(spec));
                let log = read_log_tail(&log_path(spec, shard, attempt), KEEP_LINES);
                let resets = kernel.as_mut().map(|k| k.new_resets()).unwrap_or_default();
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
                let t = TestRecord {
                    shard,
                    name: name.clone(),
                    outcome: classify::settled(Outcome::Crashed, class),
                    class,
                    duration_ms: 0,
                    excerpt,
                    attempt,
                };
                journal.append(&Record::Test(t.clone()))?;
                result.tests.push(t);
                break (a.exit_code, a.signal);
            }
            // A restart that ran a chunk of a long list goes on with the rest.
            if matches!(selection, Selection::Only(_)) && a.recorded > 0 {
                continue;
            }
            break (a.exit_code, a.signal);
        };
        let summary = ShardSummary {
            shard,
            attempts: attempt,
            exit_code,
            signal,
            seconds: clock.elapsed().as_secs_f64(),
        };
        journal.append(&Record::Shard {
            shard,
            exit_code,
            signal,
            attempts: attempt,
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
    result.shards.sort_by_key(|s| s.shard);
    no_gpu_in_process(&mut result.tests);
    Ok(result)
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

/// Which tests one start of the client runs.
enum Selection {
    /// gtest's sharding variables; no filter.
    Shard,
    /// Everything but these (with the sharding variables kept: the client could not list).
    Exclude(Vec<String>),
    /// Exactly these, unsharded.
    Only(Vec<String>),
    /// All but these, unsharded.
    AllBut(Vec<String>),
}

impl Selection {
    /// The shorter of "only the remaining" and "all but the others"; a list longer than one
    /// argument may be is run in chunks.
    fn filter(all: &[String], remaining: &[&String]) -> Selection {
        let keep: BTreeSet<&str> = remaining.iter().map(|s| s.as_str()).collect();
        let others: Vec<String> = all
            .iter()
            .filter(|t| !keep.contains(t.as_str()))
            .cloned()
            .collect();
        let len = |v: &mut dyn Iterator<Item = &String>| v.map(|s| s.len() + 1).sum::<usize>();
        let pos = len(&mut remaining.iter().copied());
        let neg = len(&mut others.iter());
        if neg < pos && neg < gtest::MAX_FILTER {
            return Selection::AllBut(others);
        }
        let mut chunk = Vec::new();
        let mut size = 0;
        for t in remaining {
            if size + t.len() + 1 > gtest::MAX_FILTER && !chunk.is_empty() {
                break;
            }
            size += t.len() + 1;
            chunk.push((*t).clone());
        }
        Selection::Only(chunk)
    }

    fn filter_arg(&self) -> Option<String> {
        match self {
            Selection::Shard => None,
            Selection::Exclude(v) | Selection::AllBut(v) => Some(format!("-{}", v.join(":"))),
            Selection::Only(v) => Some(v.join(":")),
        }
    }
}

/// Merges our filter into the recipe's arguments (a recipe's own positive filter is kept).
fn client_args(spec: &RunSpec, sel: &Selection) -> Vec<String> {
    let Some(ours) = sel.filter_arg() else {
        return spec.args.clone();
    };
    let mut args = Vec::new();
    let mut merged = false;
    for a in &spec.args {
        if let Some(theirs) = a.strip_prefix("--gtest_filter=")
            && !merged
            && ours.starts_with('-')
        {
            let sep = if theirs.contains('-') { ":" } else { "-" };
            args.push(format!("--gtest_filter={theirs}{sep}{}", &ours[1..]));
            merged = true;
        } else if a.starts_with("--gtest_filter=") && !ours.starts_with('-') {
            // Our positive list already is a subset of the recipe's filter.
        } else {
            args.push(a.clone());
        }
    }
    if !merged {
        args.push(format!("--gtest_filter={ours}"));
    }
    args
}

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

/// `--gtest_list_tests`, or None when the client cannot list (then restarts exclude by name).
fn list_tests(spec: &RunSpec) -> Option<Vec<String>> {
    let mut args: Vec<String> = spec.args.clone();
    args.push("--gtest_list_tests".into());
    let mut cmd = command(spec, &args);
    cmd.stdout(Stdio::piped()).stderr(Stdio::null());
    let mut child = cmd.spawn().ok()?;
    let mut stdout = child.stdout.take()?;
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                let text = reader.join().unwrap_or_default();
                let list = gtest::parse_list(&text);
                return (status.success() && !list.is_empty()).then_some(list);
            }
            Ok(None) if start.elapsed() < spec.timeout => {
                std::thread::sleep(Duration::from_millis(5))
            }
            _ => {
                kill_group(child.id());
                let _ = child.wait();
                return None;
            }
        }
    }
}

fn kill_group(pid: u32) {
    // SAFETY: signals the process group the client leads (it was started with pgid = pid).
    unsafe {
        libc::kill(-(pid as i32), libc::SIGKILL);
    }
}

struct Running {
    name: String,
    started: Instant,
    lines: Vec<String>,
}

#[allow(clippy::too_many_arguments)]
fn attempt_once(
    spec: &RunSpec,
    shard: u32,
    attempt: u32,
    selection: &Selection,
    journal: &mut Journal,
    tests: &mut Vec<TestRecord>,
    done: &mut BTreeSet<String>,
    mut kernel: Option<&mut KernelLog>,
    task: &dyn crate::progress::Task,
) -> Result<Attempt, RunError> {
    let args = client_args(spec, selection);
    let log_file = log_path(spec, shard, attempt);
    let mut log = std::io::BufWriter::new(
        std::fs::File::create(&log_file).map_err(io(format!("{}", log_file.display())))?,
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
            .map(|a| crate::process::shell_quote(if a.len() > 300 { &a[..300] } else { a }))
            .collect::<Vec<_>>()
            .join(" ")
    );
    let mut child = Pumped::spawn(cmd).map_err(|source| RunError::Spawn {
        client: spec.client.display().to_string(),
        source,
    })?;
    let pid = child.id();
    let mut out = Attempt {
        recorded: 0,
        failed: 0,
        interrupted: false,
        exit_code: None,
        signal: None,
        stop: false,
    };
    let mut running: Option<Running> = None;
    let mut last_progress = Instant::now();
    let mut hung = false;
    loop {
        let wait = spec.timeout.saturating_sub(last_progress.elapsed());
        match child.next(wait) {
            Heard::Line(bytes) => {
                let _ = log.write_all(&bytes);
                let text = String::from_utf8_lossy(&bytes);
                let line = text.trim_end_matches(['\n', '\r']);
                let ended = match gtest::parse_line(line) {
                    Line::Run(name) => {
                        running = Some(Running {
                            name: name.to_string(),
                            started: Instant::now(),
                            lines: Vec::new(),
                        });
                        task.set_message(name);
                        last_progress = Instant::now();
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
                };
                if let Some((outcome, ms)) = ended {
                    let mut r = running.take().expect("checked above");
                    r.lines.push(line.to_string());
                    last_progress = Instant::now();
                    // The kernel log is read only once the client is dead (hung or crashed
                    // tests): while it runs, its output lags behind what it has done, so a
                    // reset logged now may belong to a later test.
                    let t = finish(shard, attempt, r, outcome, ms, None, None, &[]);
                    if t.outcome.is_failure() {
                        out.failed += 1;
                    }
                    record(journal, tests, done, t)?;
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
    // The output ended; the client gets the timeout to exit (it may have closed its output
    // and gone on running).
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
    out.exit_code = status.code();
    out.signal = if hung { None } else { status.signal() };
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
    if hung && running.is_none() {
        // Hung outside any test (start-up or tear-down): the shard cannot go on.
        out.signal = Some(libc::SIGKILL);
        let name = format!("(shard {shard}) {}", client_name(spec));
        let lines = read_log_tail(&log_file, KEEP_LINES);
        let (class, excerpt) = classify::classify(
            &Evidence {
                outcome: Outcome::Hung,
                exit_code: None,
                signal: None,
                lines: &lines,
                kernel: &kernel
                    .as_deref_mut()
                    .map(|k| k.new_resets())
                    .unwrap_or_default(),
            },
            EXCERPT_LINES,
        );
        let t = TestRecord {
            shard,
            name,
            outcome: Outcome::Hung,
            class,
            duration_ms: spec.timeout.as_millis() as u64,
            excerpt,
            attempt,
        };
        record(journal, tests, done, t)?;
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
        record(journal, tests, done, t)?;
        out.recorded += 1;
        out.interrupted = true;
        task.inc(1);
    }
    Ok(out)
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

/// Runs every unit of an each-binary or CTest corpus not journaled yet, shard by shard.
fn run_each(
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
    let mut keep = |log: &mut std::io::BufWriter<std::fs::File>, bytes: &[u8]| {
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
            Heard::Line(bytes) => keep(&mut log, &bytes),
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
        keep(&mut log, &bytes);
    }
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
        name: name.to_string(),
        outcome: classify::settled(outcome, class),
        class,
        duration_ms: elapsed.as_millis() as u64,
        excerpt,
        attempt,
    };
    Ok((t, exit_code, signal))
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
