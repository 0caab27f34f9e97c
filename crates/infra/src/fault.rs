//! Crash points for the fault-injection tests (tests/it/faults.rs).
//!
//! `ROCFORGE_FAULT_AT=PHASE:N` makes the process kill itself with SIGKILL, exactly as `kill -9`
//! would (no destructor, no flush, no cleanup), the N-th time it reaches a crash point of PHASE
//! (`fetch`, `build`, `package`, `install`, `publish`). While the variable is set, each point of
//! PHASE reached is also announced on stderr (`rocforge-fault: PHASE N`), so a test can count a
//! phase's points in an uninterrupted run (`PHASE:0` never fires) and then pick one.
//!
//! Compiled in always, inert unless the variable is set: one environment lookup per process.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

pub const ENV: &str = "ROCFORGE_FAULT_AT";

fn spec() -> Option<&'static (String, u64)> {
    static SPEC: OnceLock<Option<(String, u64)>> = OnceLock::new();
    SPEC.get_or_init(|| {
        let v = std::env::var(ENV).ok()?;
        let (phase, n) = v.split_once(':')?;
        Some((phase.to_string(), n.parse().ok()?))
    })
    .as_ref()
}

/// A crash point of `phase`: a moment where a kill -9 must leave consistent state behind.
pub fn point(phase: &str) {
    let Some((want, n)) = spec() else { return };
    if want != phase {
        return;
    }
    static REACHED: AtomicU64 = AtomicU64::new(0);
    let k = REACHED.fetch_add(1, Ordering::SeqCst) + 1;
    eprintln!("rocforge-fault: {phase} {k}");
    if k == *n {
        // SAFETY: signalling our own process; SIGKILL cannot be caught, so nothing runs after.
        unsafe {
            libc::kill(libc::getpid(), libc::SIGKILL);
        }
        std::process::abort();
    }
}
