//! Follows a build log while it grows, to say where the build stands: the driver's phase
//! (`==> build`), the build tool's steps (ninja's `[132/270]`, make's `[ 42%]`), and from those
//! and the recorded durations an estimate of the time left.
//!
//! Logs of large components reach hundreds of megabytes, so the follower reads only what was
//! appended since its last look, through a fixed buffer, and keeps at most one line.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::progress::{BuildStatus, EstimateFrom};

/// The longest line kept. A longer one (a link command listing thousands of objects, binary
/// output) is cut here and the rest skipped, so no line grows memory.
pub const MAX_LINE: usize = 64 * 1024;
const CHUNK: usize = 64 * 1024;

pub struct LogFollower {
    path: PathBuf,
    file: Option<File>,
    offset: u64,
    line: Vec<u8>,
    /// The current line reached MAX_LINE: the rest of it is skipped up to its end.
    overlong: bool,
    buf: Box<[u8]>,
    bytes_read: u64,
}

impl LogFollower {
    pub fn new(path: &Path) -> Self {
        Self {
            path: path.to_path_buf(),
            file: None,
            offset: 0,
            // Never grown past this: a line is cut at MAX_LINE.
            line: Vec::with_capacity(MAX_LINE),
            overlong: false,
            buf: vec![0; CHUNK].into_boxed_slice(),
            bytes_read: 0,
        }
    }

    /// Every byte read from the log so far: the cost of following it.
    pub fn bytes_read(&self) -> u64 {
        self.bytes_read
    }

    /// Reads what was appended since the last call and hands each complete line to `on_line`;
    /// a line still being written waits for its end. Returns the bytes read.
    pub fn poll(&mut self, on_line: &mut dyn FnMut(&str)) -> u64 {
        if self.file.is_none() {
            // Not there yet: the runtime creates it when the build starts.
            let Ok(f) = File::open(&self.path) else {
                return 0;
            };
            self.file = Some(f);
        }
        let Some(file) = self.file.as_mut() else {
            return 0;
        };
        // A log cut short under us (rewritten by a retry) is followed from its new start.
        if file.metadata().is_ok_and(|m| m.len() < self.offset) {
            if file.seek(SeekFrom::Start(0)).is_err() {
                return 0;
            }
            self.offset = 0;
            self.line.clear();
            self.overlong = false;
        }
        let mut read = 0u64;
        loop {
            let n = match file.read(&mut self.buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            };
            read += n as u64;
            // The buffer is split off for the loop; `line` and `overlong` are the state kept.
            let chunk = &self.buf[..n];
            let mut start = 0;
            for (i, &b) in chunk.iter().enumerate() {
                // ninja on a "smart" terminal and many progress meters end lines with \r alone.
                if b == b'\n' || b == b'\r' {
                    take(&mut self.line, &mut self.overlong, &chunk[start..i]);
                    emit(&mut self.line, &mut self.overlong, on_line);
                    start = i + 1;
                }
            }
            take(&mut self.line, &mut self.overlong, &chunk[start..]);
        }
        self.offset += read;
        self.bytes_read += read;
        read
    }

    /// Reads to the end of the log and hands on its last line even without a newline: for when
    /// the build has ended and nothing more will be written.
    pub fn finish(&mut self, on_line: &mut dyn FnMut(&str)) {
        self.poll(on_line);
        emit(&mut self.line, &mut self.overlong, on_line);
    }
}

fn take(line: &mut Vec<u8>, overlong: &mut bool, bytes: &[u8]) {
    if *overlong {
        return;
    }
    let room = MAX_LINE - line.len();
    if bytes.len() > room {
        line.extend_from_slice(&bytes[..room]);
        *overlong = true;
    } else {
        line.extend_from_slice(bytes);
    }
}

fn emit(line: &mut Vec<u8>, overlong: &mut bool, on_line: &mut dyn FnMut(&str)) {
    if !line.is_empty() {
        on_line(&String::from_utf8_lossy(line));
    }
    line.clear();
    *overlong = false;
}

/// The last `n` lines of a log, reading at most its last megabyte: a failed build's log can
/// be hundreds of megabytes, and its end is what explains the failure.
pub fn tail(path: &Path, n: usize) -> Vec<String> {
    const WINDOW: u64 = 1 << 20;
    let Ok(mut file) = File::open(path) else {
        return Vec::new();
    };
    let len = file.metadata().map_or(0, |m| m.len());
    let from = len.saturating_sub(WINDOW);
    if file.seek(SeekFrom::Start(from)).is_err() {
        return Vec::new();
    }
    let mut bytes = Vec::new();
    if file.take(WINDOW).read_to_end(&mut bytes).is_err() {
        return Vec::new();
    }
    let text = String::from_utf8_lossy(&bytes);
    let mut lines: Vec<&str> = text.lines().collect();
    // The window's first line is likely cut.
    if from > 0 && !lines.is_empty() {
        lines.remove(0);
    }
    lines[lines.len().saturating_sub(n)..]
        .iter()
        .map(|l| l.to_string())
        .collect()
}

/// What a log line says about the build's progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark<'a> {
    /// `==> configure`: the driver started a phase.
    Phase(&'a str),
    /// ninja's `[132/270] Building CXX object …`.
    Steps { done: u64, total: u64 },
    /// make's (and CMake's Makefile generator's) `[ 42%] Building CXX object …`.
    Percent(u8),
}

pub fn parse(line: &str) -> Option<Mark<'_>> {
    if let Some(phase) = line.strip_prefix("==> ") {
        let phase = phase.trim();
        return (!phase.is_empty()).then_some(Mark::Phase(phase));
    }
    let inner = line.trim_start().strip_prefix('[')?;
    let (inner, _) = inner.split_once(']')?;
    let number = |s: &str| {
        (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse::<u64>().ok())
            .flatten()
    };
    if let Some((done, total)) = inner.split_once('/') {
        let (done, total) = (number(done)?, number(total)?);
        return (total > 0 && done <= total).then_some(Mark::Steps { done, total });
    }
    let percent = number(inner.strip_suffix('%')?.trim_start())?;
    (percent <= 100).then_some(Mark::Percent(percent as u8))
}

/// The expected duration of a whole build (sources to commit), and what it rests on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    pub secs: f64,
    pub from: EstimateFrom,
}

impl Estimate {
    /// The previous build of the component when there is one; else the recipe's `hours`,
    /// which are for an 8-core reference machine, scaled to the compile jobs this build has.
    pub fn new(recorded: Option<f64>, hours: f64, jobs: usize) -> Option<Estimate> {
        match recorded {
            Some(secs) if secs > 0.0 => Some(Estimate {
                secs,
                from: EstimateFrom::LastBuild,
            }),
            _ => (hours > 0.0).then(|| Estimate {
                secs: hours * 3600.0 * 8.0 / jobs.clamp(1, 64) as f64,
                from: EstimateFrom::Recipe,
            }),
        }
    }
}

/// The time left, in seconds, and what it rests on. `steps` is the build tool's (done, total)
/// and the seconds since its phase began; `recent` the steps done over the last
/// [`RATE_WINDOW`] and the seconds they took, when the phase has lasted that long.
///
/// A previous build is the best guess. Without one the recipe's hint is rough (machines and
/// caches differ by far more than the scaling covers), so once the tool has done a few percent
/// of its steps, for long enough to give a rate, that rate is used instead: the recent one when
/// there is one, since a build that continues in its kept directory replays its first steps
/// from the compiler cache in minutes and the whole phase's rate would promise the rest as fast.
/// Past the estimate nothing is claimed.
pub fn eta(
    elapsed: f64,
    estimate: Option<Estimate>,
    steps: Option<(u64, u64, f64)>,
    recent: Option<(u64, f64)>,
) -> Option<(u64, EstimateFrom)> {
    let from_estimate = |e: Estimate| {
        let left = (e.secs - elapsed).max(0.0) as u64;
        (left > 0).then_some((left, e.from))
    };
    match (estimate, steps) {
        (Some(e), _) if e.from == EstimateFrom::LastBuild => from_estimate(e),
        (_, Some((done, total, phase_secs)))
            if done > 0 && done * 50 >= total && phase_secs >= 30.0 && done < total =>
        {
            let (n, secs) = match recent {
                Some((n, secs)) if n > 0 && secs > 0.0 => (n, secs),
                _ => (done, phase_secs),
            };
            Some((
                (secs * (total - done) as f64 / n as f64) as u64,
                EstimateFrom::Steps,
            ))
        }
        (Some(e), _) => from_estimate(e),
        (None, _) => None,
    }
}

/// How far back the recent step rate looks.
pub const RATE_WINDOW: std::time::Duration = std::time::Duration::from_secs(15 * 60);

/// A stretch without a step line this long is one step far longer than the others...
const LONG_STEP: std::time::Duration = std::time::Duration::from_secs(5 * 60);
/// ...when at least this many steps came in the minutes after it.
const STEPS_AFTER_LONG: u64 = 10;

/// How often the step count is sampled for the rate.
const SAMPLE_EVERY: std::time::Duration = std::time::Duration::from_secs(60);

/// Where one component's build stands, from the lines of its log.
pub struct Tracker {
    component: String,
    started: Instant,
    estimate: Option<Estimate>,
    phase: String,
    phase_started: Instant,
    steps: Option<(u64, u64)>,
    /// (when, steps done) of this phase, oldest first, at most one per minute, reaching back
    /// a little past [`RATE_WINDOW`].
    samples: std::collections::VecDeque<(Instant, u64)>,
    /// The last step line: when, and the count it gave.
    last_step: Option<(Instant, u64)>,
    /// The last stretch of at least [`LONG_STEP`] without a step line (one step that ran
    /// long): (began, ended, the count it held).
    quiet: Option<(Instant, Instant, u64)>,
    percent: Option<u8>,
    /// The build tool counted all its steps: what is left (install, the gate) is short, and
    /// the recipe's hint for the whole build would claim hours.
    tool_done: bool,
}

impl Tracker {
    pub fn new(component: &str, started: Instant, estimate: Option<Estimate>) -> Self {
        Self {
            component: component.into(),
            started,
            estimate,
            phase: "starting".into(),
            phase_started: started,
            steps: None,
            samples: std::collections::VecDeque::new(),
            last_step: None,
            quiet: None,
            percent: None,
            tool_done: false,
        }
    }

    /// Takes in one line of the log, seen at `now`.
    pub fn line(&mut self, line: &str, now: Instant) {
        match parse(line) {
            Some(Mark::Phase(p)) => self.set_phase(p, now),
            Some(Mark::Steps { done, total }) => {
                // Only a long stretch is kept: a minute's wait for the next compile soon after
                // it must not replace it while it still spans the rate's window.
                if let Some((t, d)) = self.last_step
                    && now.duration_since(t) >= LONG_STEP
                {
                    self.quiet = Some((t, now, d));
                }
                self.last_step = Some((now, done));
                self.sample(now, done);
                self.steps = Some((done, total));
                self.tool_done |= total > 0 && done >= total;
            }
            Some(Mark::Percent(p)) => self.percent = Some(p),
            None => {}
        }
    }

    /// A phase of rocforge's own (sources, license files), or one from the log.
    pub fn set_phase(&mut self, phase: &str, now: Instant) {
        if phase != self.phase {
            // Leaving the phase the build tool counted steps in is the tool's end: ninja prints
            // a step's count as it starts, so its last line reads [482/483], never [483/483].
            self.tool_done |= self.steps.is_some_and(|(_, total)| total > 0);
            self.phase = phase.into();
            self.phase_started = now;
            // A phase's counters are its own: install must not show the build's [270/270].
            self.steps = None;
            self.samples.clear();
            self.last_step = None;
            self.quiet = None;
            self.percent = None;
        }
    }

    fn sample(&mut self, now: Instant, done: u64) {
        if self
            .samples
            .back()
            .is_some_and(|(t, _)| now.duration_since(*t) < SAMPLE_EVERY)
        {
            return;
        }
        self.samples.push_back((now, done));
        // Keep one sample at least RATE_WINDOW old, and none older than needed.
        while self
            .samples
            .get(1)
            .is_some_and(|(t, _)| now.duration_since(*t) >= RATE_WINDOW)
        {
            self.samples.pop_front();
        }
    }

    /// Steps done and seconds taken over the recent part of the phase: the last
    /// [`RATE_WINDOW`], or the later half of a younger phase, so that a continued build's
    /// first minutes, its finished steps replayed from the compiler cache hundreds a minute,
    /// soon fall out of the rate. None until the phase is two sample intervals old.
    fn recent(&self, now: Instant) -> Option<(u64, f64)> {
        let age = now.duration_since(self.phase_started);
        let window = RATE_WINDOW.min(age / 2);
        if window < SAMPLE_EVERY {
            return None;
        }
        let (mut since, mut from) = *self
            .samples
            .iter()
            .rev()
            .find(|(t, _)| now.duration_since(*t) >= window)?;
        let (done, _) = self.steps?;
        // One step far longer than the rest (Tensile's library in rocBLAS: 40 minutes, then 480
        // compiles of seconds) holds the count still across the window's start: the rate counts
        // from when steps came again, not across the wait, which would promise hours for
        // minutes of work. Only once steps have come quickly since: in a build of long steps
        // (rocSOLVER's units take minutes each) the one or two after a long one say nothing.
        if let Some((began, ended, held)) = self.quiet
            && now.duration_since(began) >= window
            && now.duration_since(ended) < window
            && now.duration_since(ended) >= SAMPLE_EVERY
            && done.saturating_sub(held) >= STEPS_AFTER_LONG
        {
            (since, from) = (ended, held);
        }
        Some((
            done.saturating_sub(from),
            now.duration_since(since).as_secs_f64(),
        ))
    }

    pub fn status(&self, now: Instant) -> BuildStatus {
        let elapsed = now.duration_since(self.started).as_secs_f64();
        let phase_secs = now.duration_since(self.phase_started).as_secs_f64();
        let estimate = self
            .estimate
            .filter(|e| !(self.tool_done && e.from == EstimateFrom::Recipe));
        let eta = eta(
            elapsed,
            estimate,
            self.steps.map(|(d, t)| (d, t, phase_secs)),
            self.recent(now),
        );
        BuildStatus {
            component: self.component.clone(),
            phase: self.phase.clone(),
            done: self.steps.map(|s| s.0),
            total: self.steps.map(|s| s.1),
            percent: self.percent,
            elapsed_s: elapsed as u64,
            eta_s: eta.map(|e| e.0),
            estimate_from: eta.map(|e| e.1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::time::Duration;

    struct Log {
        _dir: tempfile::TempDir,
        path: PathBuf,
        file: File,
    }

    impl Log {
        fn new() -> Log {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("build.log");
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .unwrap();
            Log {
                _dir: dir,
                path,
                file,
            }
        }

        fn append(&mut self, bytes: &[u8]) {
            self.file.write_all(bytes).unwrap();
        }
    }

    fn lines(f: &mut LogFollower) -> Vec<String> {
        let mut out = Vec::new();
        f.poll(&mut |l| out.push(l.to_string()));
        out
    }

    #[test]
    fn a_missing_log_is_waited_for() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("later.log");
        let mut f = LogFollower::new(&path);
        assert!(lines(&mut f).is_empty());
        std::fs::write(&path, "==> build\n").unwrap();
        assert_eq!(lines(&mut f), ["==> build"]);
    }

    #[test]
    fn appended_pieces_give_whole_lines_once() {
        let mut log = Log::new();
        let mut f = LogFollower::new(&log.path);
        log.append(b"==> conf");
        assert!(lines(&mut f).is_empty(), "half a line waits");
        log.append(b"igure\n-- The CXX compiler\n[1/");
        assert_eq!(lines(&mut f), ["==> configure", "-- The CXX compiler"]);
        log.append(b"270] Building a.o\r[2/270] Building b.o\r\n\n");
        assert_eq!(
            lines(&mut f),
            ["[1/270] Building a.o", "[2/270] Building b.o"]
        );
        assert!(lines(&mut f).is_empty(), "nothing new, nothing again");
        log.append(b"no newline at the end");
        assert!(lines(&mut f).is_empty());
        let mut last = Vec::new();
        f.finish(&mut |l| last.push(l.to_string()));
        assert_eq!(last, ["no newline at the end"]);
        assert_eq!(f.bytes_read(), std::fs::metadata(&log.path).unwrap().len());
    }

    #[test]
    fn a_huge_line_is_cut_not_kept() {
        let mut log = Log::new();
        let mut f = LogFollower::new(&log.path);
        let piece = vec![b'x'; 1 << 20];
        for _ in 0..8 {
            log.append(&piece);
            assert!(lines(&mut f).is_empty());
            assert!(f.line.capacity() <= MAX_LINE);
        }
        log.append(b"\n[3/4] next\n");
        let got = lines(&mut f);
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].len(), MAX_LINE);
        assert_eq!(got[1], "[3/4] next");
    }

    #[test]
    fn a_large_log_is_read_once_in_bounded_memory() {
        let mut log = Log::new();
        let mut f = LogFollower::new(&log.path);
        let line = format!(
            "{:<99}\n",
            "[ 1/10] c++ -O2 -c some/source/file.cpp -o file.o"
        );
        let block = line.repeat(10_000);
        let mut total = 0u64;
        let mut seen = 0usize;
        // 100 MB in 100 appends, followed after each: every byte is read exactly once.
        for i in 0..100 {
            log.append(block.as_bytes());
            total += block.len() as u64;
            let read = f.poll(&mut |_| seen += 1);
            assert_eq!(read, block.len() as u64, "append {i}: only the new bytes");
            assert!(f.line.capacity() <= MAX_LINE, "at most one line is kept");
        }
        assert_eq!(total, 100_000_000);
        assert_eq!(f.bytes_read(), total);
        assert_eq!(seen, 1_000_000);
        assert_eq!(f.buf.len(), CHUNK);
    }

    #[test]
    fn a_truncated_log_is_followed_from_its_start() {
        let mut log = Log::new();
        let mut f = LogFollower::new(&log.path);
        log.append(b"==> build\n[5/9] x\n");
        assert_eq!(lines(&mut f).len(), 2);
        log.file.set_len(0).unwrap();
        log.append(b"==> configure\n");
        assert_eq!(lines(&mut f), ["==> configure"]);
    }

    #[test]
    fn the_tail_is_read_from_the_end() {
        let mut log = Log::new();
        for i in 0..100_000 {
            log.append(format!("line {i}\n").as_bytes());
        }
        assert_eq!(tail(&log.path, 2), ["line 99998", "line 99999"]);
        let short = Log::new();
        std::fs::write(&short.path, "a\nb\n").unwrap();
        assert_eq!(tail(&short.path, 40), ["a", "b"]);
    }

    #[test]
    fn marks() {
        assert_eq!(parse("==> post-install"), Some(Mark::Phase("post-install")));
        assert_eq!(
            parse("[132/270] Building CXX object library/src/x.cpp.o"),
            Some(Mark::Steps {
                done: 132,
                total: 270
            })
        );
        assert_eq!(
            parse("[ 42%] Building CXX object x.o"),
            Some(Mark::Percent(42))
        );
        assert_eq!(
            parse("[100%] Built target rocsparse"),
            Some(Mark::Percent(100))
        );
        for no in [
            "",
            "==> ",
            "[==========] 12 tests ran",
            "[ RUN      ] Foo.Bar",
            "[0/0] nothing",
            "[9/3] backwards",
            "[-1/3] negative",
            "[142%] over",
            "[1/2 unclosed",
            "warning: [1/2] inside a line",
            "x==> not at the start",
        ] {
            assert_eq!(parse(no), None, "{no:?}");
        }
    }

    #[test]
    fn estimates() {
        let last = Estimate::new(Some(1200.0), 2.0, 4).unwrap();
        assert_eq!(last.from, EstimateFrom::LastBuild);
        assert_eq!(last.secs, 1200.0);
        let hint = Estimate::new(None, 1.5, 4).unwrap();
        assert_eq!(hint.from, EstimateFrom::Recipe);
        assert_eq!(
            hint.secs,
            1.5 * 3600.0 * 2.0,
            "8 reference cores over 4 jobs"
        );
        assert_eq!(Estimate::new(None, 0.0, 4), None);

        assert_eq!(
            eta(200.0, Some(last), Some((10, 100, 50.0)), None),
            Some((1000, EstimateFrom::LastBuild)),
            "a previous build beats the step rate"
        );
        assert_eq!(
            eta(1300.0, Some(last), None, None),
            None,
            "past the estimate"
        );
        assert_eq!(
            eta(100.0, Some(hint), Some((1, 270, 5.0)), None),
            Some((10700, EstimateFrom::Recipe)),
            "too few steps to go by"
        );
        assert_eq!(
            eta(400.0, Some(hint), Some((135, 270, 300.0)), None),
            Some((300, EstimateFrom::Steps))
        );
        assert_eq!(
            eta(400.0, None, Some((90, 270, 300.0)), None),
            Some((600, EstimateFrom::Steps))
        );
        assert_eq!(eta(400.0, None, None, None), None);
        assert_eq!(
            eta(20.0, Some(hint), Some((135, 270, 10.0)), None),
            Some((10780, EstimateFrom::Recipe)),
            "too short a time to give a rate"
        );
        assert_eq!(eta(20.0, None, Some((270, 270, 100.0)), None), None);
    }

    /// A build continued in its kept directory: its first 600 steps come from the compiler
    /// cache in 5 minutes, then one compile takes 30 s. The estimate follows the last 15
    /// minutes' rate (3 h left), not the whole phase's (14 min).
    #[test]
    fn a_continued_build_is_estimated_from_its_recent_rate() {
        let t0 = Instant::now();
        let at = |s| t0 + Duration::from_secs(s);
        let mut t = Tracker::new("torch", t0, Estimate::new(None, 100.0, 2));
        t.line("==> build", at(0));
        for s in 1..=300 {
            t.line(&format!("[{}/1000] cached", 2 * s), at(s));
        }
        for k in 1..=40 {
            t.line(&format!("[{}/1000] compiled", 600 + k), at(300 + 30 * k));
        }
        let s = t.status(at(1500));
        assert_eq!(s.estimate_from, Some(EstimateFrom::Steps));
        let left = s.eta_s.unwrap();
        assert!(
            (10_000..=11_600).contains(&left),
            "360 steps left at 30 s each: {left}"
        );
        // With no step over the recent half of the phase (one long compile), the whole
        // phase's rate: 600 steps in 600 s.
        let mut early = Tracker::new("torch", t0, None);
        early.line("==> build", at(0));
        early.line("[600/1000] cached", at(300));
        assert_eq!(early.status(at(600)).eta_s, Some(400));
    }

    /// rocBLAS: Tensile's library is one ninja step of 40 minutes, then 480 compiles of
    /// seconds each. Five minutes after they began, the estimate follows them (about 35
    /// minutes left), not the 15-minute window that still holds most of the wait (hours).
    #[test]
    fn a_long_step_does_not_slow_the_rate_of_the_steps_after_it() {
        let t0 = Instant::now();
        let at = |s| t0 + Duration::from_secs(s);
        let mut t = Tracker::new("rocblas", t0, Estimate::new(None, 0.7, 2));
        t.line("==> build", at(0));
        t.line("[1/483] Generating prototypes", at(20));
        t.line("[2/483] Generating Tensile libraries", at(60));
        for k in 1..=60 {
            t.line(&format!("[{}/483] compiled", 2 + k), at(2400 + 5 * k));
        }
        let s = t.status(at(2700));
        assert_eq!(s.estimate_from, Some(EstimateFrom::Steps));
        let left = s.eta_s.unwrap();
        assert!(
            (1_900..=2_300).contains(&left),
            "421 steps left at 5 s each: {left}"
        );
    }

    /// rocBLAS as it ran (2026-12-07): after Tensile's library the first compiles came with
    /// a minute or two between them (the line said "~17h31m left" for what took about an
    /// hour), and a gap of a minute after the long step must not make the estimate forget it.
    #[test]
    fn a_short_gap_after_a_long_step_does_not_hide_it() {
        let t0 = Instant::now();
        let at = |s| t0 + Duration::from_secs(s);
        let mut t = Tracker::new("rocblas", t0, Estimate::new(None, 0.7, 2));
        t.line("==> build", at(0));
        t.line("[1/483] Generating prototypes", at(20));
        t.line("[2/483] Generating Tensile libraries", at(120));
        t.line("[3/483] compiled", at(1500));
        t.line("[4/483] compiled", at(1620));
        for k in 1..=9 {
            t.line(&format!("[{}/483] compiled", 4 + k), at(1620 + 10 * k));
        }
        let s = t.status(at(1780));
        assert_eq!(s.estimate_from, Some(EstimateFrom::Steps));
        let left = s.eta_s.unwrap();
        // 10 steps in the 280 s since the long one ended: 470 left at 28 s each.
        assert!(
            (11_000..=15_000).contains(&left),
            "470 steps left at about 28 s each: {left}"
        );
    }

    /// rocSOLVER: every unit takes minutes. The step after a long one is no sign that the
    /// rest go fast: the estimate stays on the window's rate.
    #[test]
    fn a_build_of_long_steps_is_not_estimated_from_the_step_after_one() {
        let t0 = Instant::now();
        let at = |s| t0 + Duration::from_secs(s);
        let mut t = Tracker::new("rocsolver", t0, None);
        t.line("==> build", at(0));
        for k in 1..=10 {
            t.line(&format!("[{k}/248] compiled"), at(1200 * k));
        }
        // 90 s after the tenth step: a step every 20 minutes, 238 left.
        let left = t.status(at(12_090)).eta_s.unwrap();
        assert!(left > 238 * 600, "{left}");
    }

    /// Five minutes into a continued build (600 steps replayed in its first minute, then one
    /// every 30 s) the estimate already follows the compiles, not the replay.
    #[test]
    fn a_young_continued_build_is_not_estimated_from_its_replay() {
        let t0 = Instant::now();
        let at = |s| t0 + Duration::from_secs(s);
        let mut t = Tracker::new("torch", t0, None);
        t.line("==> build", at(0));
        for s in 1..=60 {
            t.line(&format!("[{}/1000] cached", 10 * s), at(s));
        }
        for k in 1..=8 {
            t.line(&format!("[{}/1000] compiled", 600 + k), at(60 + 30 * k));
        }
        let left = t.status(at(300)).eta_s.unwrap();
        assert!(
            (10_000..=13_000).contains(&left),
            "392 steps left at 30 s each: {left}"
        );
        // Too young for a recent rate: the whole phase's.
        assert_eq!(t.status(at(100)).eta_s.map(|s| s < 100), Some(true));
    }

    #[test]
    fn the_tracker_follows_phases_and_steps() {
        let t0 = Instant::now();
        let at = |s| t0 + Duration::from_secs(s);
        let mut t = Tracker::new("rocsparse", t0, Estimate::new(Some(1600.0), 1.0, 8));
        t.set_phase("sources", at(0));
        for (s, l) in [
            (30, "==> configure"),
            (60, "-- Configuring done"),
            (100, "==> build"),
            (700, "[132/270] Building CXX object a.o"),
        ] {
            t.line(l, at(s));
        }
        assert_eq!(
            t.status(at(724)).to_string(),
            "rocsparse  build [132/270]  12m04s elapsed, ~15m left"
        );
        t.line("==> install", at(1500));
        let s = t.status(at(1510));
        assert_eq!(
            (s.phase.as_str(), s.done, s.eta_s),
            ("install", None, Some(90))
        );
    }

    /// After the build tool's last step, a recipe's hint for the whole build (hours) says
    /// nothing about install and the gate: no estimate rather than "~15h57m left".
    #[test]
    fn a_recipe_hint_is_not_shown_after_the_last_step() {
        let t0 = Instant::now();
        let at = |s| t0 + Duration::from_secs(s);
        let hint = Estimate::new(None, 18.0, 8);
        assert_eq!(hint.map(|e| e.from), Some(EstimateFrom::Recipe));
        let mut t = Tracker::new("rocblas", t0, hint);
        t.line("==> build", at(0));
        t.line(
            "[474/474] Linking CXX shared library librocblas.so",
            at(7300),
        );
        t.line("==> install", at(7310));
        let s = t.status(at(7320));
        assert_eq!((s.phase.as_str(), s.eta_s), ("install", None));

        // Ninja's log as written: its last line is the last step's start, one short of the total.
        let mut t = Tracker::new("rocblas", t0, hint);
        t.line("==> build", at(0));
        t.line(
            "[482/483] Linking CXX shared library library/src/librocblas.so.4.4",
            at(4380),
        );
        assert!(t.status(at(4381)).eta_s.is_some(), "still building");
        t.line("==> install", at(4390));
        let s = t.status(at(4391));
        assert_eq!((s.phase.as_str(), s.eta_s), ("install", None));
        t.set_phase("license files", at(4400));
        assert_eq!(t.status(at(4401)).eta_s, None);
    }
}
