//! What a failure was, and the lines of its log that show it.

use serde::{Deserialize, Serialize};

/// Failure classes, in the order a report lists them.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Class {
    /// The client found no GPU to run on (no /dev/kfd, no device): nothing was tested, and the
    /// library is not at fault.
    NoGpu,
    /// The dynamic loader could not find a library (exit 127).
    MissingLibrary,
    /// The libraries hold no code for this GPU (hipErrorNoBinaryForGpu, no Tensile library).
    NoCodeObject,
    /// amdgpu reset the GPU while the test ran (kernel log).
    GpuReset,
    /// Host or device memory ran out.
    OutOfMemory,
    /// No progress for the timeout: the test was killed.
    Hang,
    /// The client died by a signal (segfault, abort, bus error).
    Crash,
    /// A test assertion or a numerical comparison failed.
    Assertion,
    /// The test skipped itself.
    Skipped,
    /// A failure none of the above explains (e.g. a non-zero exit outside any test).
    Other,
}

impl Class {
    pub const ALL: [Class; 10] = [
        Class::NoGpu,
        Class::MissingLibrary,
        Class::NoCodeObject,
        Class::GpuReset,
        Class::OutOfMemory,
        Class::Hang,
        Class::Crash,
        Class::Assertion,
        Class::Skipped,
        Class::Other,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Class::NoGpu => "no-gpu",
            Class::MissingLibrary => "missing-library",
            Class::NoCodeObject => "no-code-object",
            Class::GpuReset => "gpu-reset",
            Class::OutOfMemory => "out-of-memory",
            Class::Hang => "hang",
            Class::Crash => "crash",
            Class::Assertion => "assertion",
            Class::Skipped => "skipped",
            Class::Other => "other",
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            Class::NoGpu => "no GPU reached: not a library failure",
            Class::MissingLibrary => "missing shared library",
            Class::NoCodeObject => "no code object for this GPU",
            Class::GpuReset => "GPU reset",
            Class::OutOfMemory => "out of memory",
            Class::Hang => "timeout or hang",
            Class::Crash => "crash by signal",
            Class::Assertion => "assertion or numerical mismatch",
            Class::Skipped => "skipped",
            Class::Other => "other failure",
        }
    }
}

/// How a test ended, as the runner saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    Passed,
    Failed,
    Skipped,
    /// Killed after no progress for the timeout.
    Hung,
    /// The client died (signal or exit) while the test ran.
    Crashed,
    /// The client found no GPU (its log says so): the test did not run on a GPU, so it neither
    /// passed nor failed.
    NoGpu,
}

impl Outcome {
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Passed => "passed",
            Outcome::Failed => "failed",
            Outcome::Skipped => "skipped",
            Outcome::Hung => "hung",
            Outcome::Crashed => "crashed",
            Outcome::NoGpu => "no-gpu",
        }
    }

    pub fn is_failure(self) -> bool {
        matches!(self, Outcome::Failed | Outcome::Hung | Outcome::Crashed)
    }
}

/// What is known about one test's end.
pub struct Evidence<'a> {
    pub outcome: Outcome,
    /// The client's exit code, when it exited while this test ran.
    pub exit_code: Option<i32>,
    /// The signal that killed the client, when one did (not our own kill for a hang).
    pub signal: Option<i32>,
    /// The test's output lines.
    pub lines: &'a [String],
    /// amdgpu reset lines the kernel logged while the test ran.
    pub kernel: &'a [String],
}

/// What HIP, ROCr and the clients print when there is no device to open. Matched before the
/// other classes: a client without a GPU goes on to fail its checks, and those failures say
/// nothing about the library.
const NO_GPU: &[&str] = &[
    "no ROCm-capable device is detected",
    "hipErrorNoDevice",
    "Unable to open /dev/kfd",
    "/dev/kfd: No such file or directory",
    "No AMD GPU found",
];

const MISSING_LIB: &[&str] = &[
    "cannot open shared object file",
    "error while loading shared libraries",
];
const NO_CODE: &[&str] = &[
    "hipErrorNoBinaryForGpu",
    "no kernel image is available",
    "No compatible code objects found",
    "invalid device function",
];
const OOM: &[&str] = &[
    "hipErrorOutOfMemory",
    "out of memory",
    "Out of memory",
    "std::bad_alloc",
    "Cannot allocate memory",
    "HSA_STATUS_ERROR_OUT_OF_RESOURCES",
];
const ASSERT: &[&str] = &[
    "Failure",
    "Expected",
    "Value of:",
    "Assertion",
    "assert",
    "mismatch",
    "error:",
];

/// The outcome a test is recorded with once its class is known: a failure that found no GPU
/// is `no-gpu`, counted neither as passed nor as failed.
pub fn settled(outcome: Outcome, class: Option<Class>) -> Outcome {
    match class {
        Some(Class::NoGpu) if outcome.is_failure() => Outcome::NoGpu,
        _ => outcome,
    }
}

/// Kernel log lines that say amdgpu reset or lost the GPU.
pub fn is_reset_line(line: &str) -> bool {
    line.contains("amdgpu")
        && [
            "GPU reset",
            "gpu reset",
            "ring gfx timeout",
            "timeout, signaled seq",
            "GPU recovery",
            "device lost",
            "VRAM is lost",
            "MODE2 reset",
        ]
        .iter()
        .any(|p| line.contains(p))
}

fn tensile_missing(line: &str) -> bool {
    line.contains("Cannot read") && line.contains("TensileLibrary")
}

/// Classifies one test and picks the lines that prove it (at most `max` lines).
pub fn classify(e: &Evidence<'_>, max: usize) -> (Option<Class>, String) {
    let find = |pred: &dyn Fn(&str) -> bool| e.lines.iter().position(|l| pred(l));
    let around = |i: usize| excerpt(e.lines, i, max);
    match e.outcome {
        Outcome::Passed => return (None, String::new()),
        Outcome::Skipped => {
            let i = find(&|l| l.contains("SKIPPED") || l.contains("Skipped"));
            return (
                Some(Class::Skipped),
                i.map(around).unwrap_or_else(|| tail(e.lines, 3)),
            );
        }
        _ => {}
    }
    if !e.kernel.is_empty() {
        let mut s = String::from("kernel log:\n");
        for l in e.kernel.iter().take(max) {
            s += l;
            s.push('\n');
        }
        s += &tail(e.lines, max.saturating_sub(e.kernel.len()).max(3));
        return (Some(Class::GpuReset), s);
    }
    if let Some(i) = find(&|l| MISSING_LIB.iter().any(|p| l.contains(p))) {
        return (Some(Class::MissingLibrary), around(i));
    }
    // A hang or a crash is the library's whatever the log says; an ordinary failure that the
    // log shows began with no device is not.
    if e.outcome != Outcome::Hung
        && e.signal.is_none()
        && let Some(i) = find(&|l| NO_GPU.iter().any(|p| l.contains(p)))
    {
        return (Some(Class::NoGpu), around(i));
    }
    // An abort whose uncaught exception says there is no device (rocThrust throws
    // `bad_alloc` carrying hipErrorNoDevice when it cannot allocate on a GPU it never found)
    // began with no device too; any other signal, or an abort with another message, is a crash.
    if e.signal == Some(6)
        && let Some(i) = find(&|l| l.contains("what():") && NO_GPU.iter().any(|p| l.contains(p)))
    {
        return (Some(Class::NoGpu), around(i));
    }
    // So is an abort right after the client says so itself (rocRAND's "rocRAND internal error:
    // hipErrorNoDevice in function …", then abort()): only its last lines count.
    if e.signal == Some(6) {
        let from = e.lines.len().saturating_sub(3);
        if let Some(i) = (from..e.lines.len())
            .rev()
            .find(|&i| NO_GPU.iter().any(|p| e.lines[i].contains(p)))
        {
            return (Some(Class::NoGpu), around(i));
        }
    }
    // A GoogleTest expectation that a HIP call returns hipSuccess, which got 100: HIP's
    // hipErrorNoDevice by number (rocRAND's tests print the code, not its name).
    if e.outcome == Outcome::Failed
        && e.signal.is_none()
        && let Some(i) = (0..e.lines.len()).find(|&i| {
            e.lines[i].trim() == "Which is: 100"
                && e.lines.get(i + 1).is_some_and(|l| l.trim() == "hipSuccess")
        })
    {
        return (Some(Class::NoGpu), around(i));
    }
    if let Some(i) = find(&|l| NO_CODE.iter().any(|p| l.contains(p)) || tensile_missing(l)) {
        return (Some(Class::NoCodeObject), around(i));
    }
    if e.exit_code == Some(127) {
        return (Some(Class::MissingLibrary), tail(e.lines, max));
    }
    if let Some(i) = find(&|l| OOM.iter().any(|p| l.contains(p))) {
        return (Some(Class::OutOfMemory), around(i));
    }
    if e.outcome == Outcome::Hung {
        return (Some(Class::Hang), tail(e.lines, max));
    }
    if let Some(sig) = e.signal {
        let mut s = tail(e.lines, max.saturating_sub(1));
        s += &format!("killed by signal {sig} ({})\n", signal_name(sig));
        return (Some(Class::Crash), s);
    }
    if e.outcome == Outcome::Failed {
        if let Some(i) = find(&|l| ASSERT.iter().any(|p| l.contains(p))) {
            return (Some(Class::Assertion), around(i));
        }
        return (Some(Class::Assertion), tail(e.lines, max));
    }
    let mut s = tail(e.lines, max.saturating_sub(1));
    if let Some(c) = e.exit_code {
        s += &format!("exit code {c}\n");
    }
    (Some(Class::Other), s)
}

pub fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGILL => "SIGILL",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGTERM => "SIGTERM",
        _ => "signal",
    }
}

/// Up to `max` lines centred on line `i` (more after it than before: a message's detail
/// follows it).
fn excerpt(lines: &[String], i: usize, max: usize) -> String {
    let before = max / 4;
    let start = i.saturating_sub(before);
    let end = (start + max).min(lines.len());
    join(&lines[start..end])
}

fn tail(lines: &[String], n: usize) -> String {
    join(&lines[lines.len().saturating_sub(n)..])
}

fn join(lines: &[String]) -> String {
    let mut s = String::new();
    for l in lines {
        // Very long lines (a dumped matrix) are cut: an excerpt proves, it does not archive.
        if l.len() > 400 {
            s += &l[..crate::diag::floor_char_boundary(l, 400)];
            s += " …";
        } else {
            s += l;
        }
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(outcome: Outcome, code: Option<i32>, sig: Option<i32>, lines: &[&str]) -> Option<Class> {
        let lines: Vec<String> = lines.iter().map(|s| s.to_string()).collect();
        classify(
            &Evidence {
                outcome,
                exit_code: code,
                signal: sig,
                lines: &lines,
                kernel: &[],
            },
            20,
        )
        .0
    }

    #[test]
    fn classes() {
        use Outcome::*;
        assert_eq!(c(Passed, None, None, &[]), None);
        assert_eq!(
            c(
                Crashed,
                Some(127),
                None,
                &[
                    "x: error while loading shared libraries: libz.so.1: cannot open shared object file: No such file or directory"
                ]
            ),
            Some(Class::MissingLibrary)
        );
        assert_eq!(
            c(
                Failed,
                None,
                None,
                &[
                    "rocBLAS error: Cannot read /opt/rocm/lib/rocblas/library/TensileLibrary.dat: No such file or directory"
                ]
            ),
            Some(Class::NoCodeObject)
        );
        assert_eq!(c(Hung, None, None, &["x"]), Some(Class::Hang));
        assert_eq!(c(Crashed, None, Some(11), &["x"]), Some(Class::Crash));
        assert_eq!(
            c(
                Failed,
                None,
                None,
                &["a.cpp:3: Failure", "Expected equality"]
            ),
            Some(Class::Assertion)
        );
        assert_eq!(
            c(Failed, None, None, &["hipErrorOutOfMemory"]),
            Some(Class::OutOfMemory)
        );
        // The programs of rocm-examples and rocforge's own: HIP_CHECK's message, then exit 1.
        assert_eq!(
            c(
                Failed,
                Some(1),
                None,
                &["An error encountered: \"no ROCm-capable device is detected\" at main.hip:42"]
            ),
            Some(Class::NoGpu)
        );
        assert_eq!(
            c(
                Crashed,
                Some(1),
                None,
                &["hipGetDeviceCount: hipErrorNoDevice"]
            ),
            Some(Class::NoGpu)
        );
        // A crash by signal stays a crash, whatever the log says before it.
        assert_eq!(
            c(Crashed, None, Some(11), &["hipErrorNoDevice"]),
            Some(Class::Crash)
        );
        // Unless it is the abort of an exception that says there is no device (rocThrust's
        // examples, run with no GPU).
        let thrust = [
            "terminate called after throwing an instance of 'thrust::THRUST_200600_400_NS::system::detail::bad_alloc'",
            "  what():  std::bad_alloc: hipErrorNoDevice: no ROCm-capable device is detected",
        ];
        assert_eq!(c(Crashed, None, Some(6), &thrust), Some(Class::NoGpu));
        assert_eq!(
            c(Crashed, None, Some(11), &thrust),
            Some(Class::OutOfMemory),
            "not an abort: the message's bad_alloc is what is left"
        );
        // rocRAND's tests without a device: an abort after its own no-device message, and an
        // expectation of hipSuccess that got 100 (hipErrorNoDevice).
        assert_eq!(
            c(
                Crashed,
                None,
                Some(6),
                &[
                    "[ RUN      ] rocrand_basic_tests.rocrand_create_destroy_generator_test/0",
                    "rocRAND internal error: hipErrorNoDevice in function ~poisson_distribution_manager at poisson.hpp:215",
                ]
            ),
            Some(Class::NoGpu)
        );
        let expectation = [
            "../src/test/test_rocrand_kernel_xorwow.cpp:458: Failure",
            "Expected equality of these values:",
            "  hipMallocHelper(&output, output_size * sizeof(unsigned int))",
            "    Which is: 100",
            "  hipSuccess",
            "    Which is: 0",
        ];
        assert_eq!(c(Failed, Some(1), None, &expectation), Some(Class::NoGpu));
        let other = expectation.map(|l| l.replace("Which is: 100", "Which is: 2"));
        let other: Vec<&str> = other.iter().map(String::as_str).collect();
        assert_eq!(
            c(Failed, Some(1), None, &other),
            Some(Class::Assertion),
            "another HIP error (hipErrorOutOfMemory is 2) is the library's"
        );
        // A no-device line long before an abort is not what the abort was about.
        assert_eq!(
            c(
                Crashed,
                None,
                Some(6),
                &["hipErrorNoDevice", "a", "b", "c", "Assertion `x' failed."]
            ),
            Some(Class::Crash)
        );
        assert!(is_reset_line(
            "amdgpu 0000:03:00.0: amdgpu: GPU reset begin!"
        ));
    }
}
