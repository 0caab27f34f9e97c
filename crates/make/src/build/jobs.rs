//! How many compile jobs a machine can afford. Out-of-memory kills are the most common
//! complaint in peer projects' trackers, so the budget follows memory, not just cores.

use std::sync::Mutex;
use std::time::{Duration, Instant};

pub const GIB: u64 = 1 << 30;
/// Memory one compile job is assumed to need when a recipe gives no hint.
pub const DEFAULT_JOB_MEMORY: u64 = GIB * 5 / 2;

pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// MemAvailable from /proc/meminfo, in bytes.
pub fn available_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The whole machine's budget: one job per 2.5 GiB of available memory, capped by cores.
pub fn default_budget() -> usize {
    budget(cores(), available_memory(), DEFAULT_JOB_MEMORY)
}

pub fn budget(cores: usize, available: Option<u64>, per_job: u64) -> usize {
    let by_memory = available.map_or(cores, |m| (m / per_job.max(1)) as usize);
    by_memory.min(cores).max(1)
}

/// Jobs for one component that shares `total` with the other builds under way, weighed by
/// `overlap` ([`Slot::overlap`]), limited by the component's own per-job memory hint. A
/// build's jobs are fixed when it starts (ninja's `-j`, TensileCreateLibrary's `--jobs`), so
/// dividing by the number of builds running at that instant would halve an hours-long build
/// for a sibling that ends a minute later. Memory is not lent that way: every build running
/// now counts in full, since an out-of-memory kill costs more than idle cores.
pub fn share(
    total: usize,
    overlap: f64,
    running: usize,
    per_job_memory: u64,
    available: Option<u64>,
) -> usize {
    let even = ((total as f64 / overlap.max(1.0)).round() as usize).max(1);
    let by_memory = available.map_or(even, |m| {
        ((m / running.max(1) as u64) / per_job_memory.max(1)) as usize
    });
    even.min(by_memory).max(1)
}

/// The builds under way and when each is expected to end.
#[derive(Default)]
pub struct Running {
    builds: Mutex<Vec<(u64, Option<Instant>)>>,
    next: std::sync::atomic::AtomicU64,
}

/// A build's place among [`Running`] builds, given up when dropped.
pub struct Slot<'a> {
    running: &'a Running,
    id: u64,
    /// 1 plus, for each other build under way, the fraction of this build's expected time it
    /// is expected to go on for (1 when either estimate is unknown).
    pub overlap: f64,
    /// The builds under way, this one included.
    pub count: usize,
}

impl Running {
    /// Registers a build expected to take `expected` (None: unknown), starting `now`.
    pub fn start(&self, expected: Option<Duration>, now: Instant) -> Slot<'_> {
        let id = self.next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let mut builds = self.builds.lock().expect("not poisoned");
        let overlap = 1.0
            + builds
                .iter()
                .map(|(_, end)| match (end, expected) {
                    (Some(end), Some(mine)) if !mine.is_zero() => {
                        (end.saturating_duration_since(now).as_secs_f64() / mine.as_secs_f64())
                            .min(1.0)
                    }
                    _ => 1.0,
                })
                .sum::<f64>();
        builds.push((id, expected.map(|e| now + e)));
        Slot {
            running: self,
            id,
            overlap,
            count: builds.len(),
        }
    }
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        let mut builds = self.running.builds.lock().expect("not poisoned");
        builds.retain(|(id, _)| *id != self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_caps_jobs() {
        assert_eq!(budget(16, Some(10 * GIB), DEFAULT_JOB_MEMORY), 4);
        assert_eq!(budget(2, Some(24 * GIB), DEFAULT_JOB_MEMORY), 2);
        assert_eq!(budget(8, Some(GIB), DEFAULT_JOB_MEMORY), 1);
        assert_eq!(share(8, 2.0, 2, 2 * GIB, Some(16 * GIB)), 4);
        assert_eq!(share(8, 2.0, 2, 4 * GIB, Some(16 * GIB)), 2);
        // A sibling ending soon lends its cores; its memory counts while it runs.
        assert_eq!(share(8, 1.02, 2, 2 * GIB, Some(64 * GIB)), 8);
        assert_eq!(share(8, 1.02, 2, 2 * GIB, Some(16 * GIB)), 4);
    }

    #[test]
    fn a_short_sibling_does_not_halve_a_long_build() {
        let running = Running::default();
        let t0 = Instant::now();
        let mins = |m: u64| Some(Duration::from_secs(m * 60));
        // rocPRIM (a minute) is under way when rocBLAS (an hour) starts.
        let rocprim = running.start(mins(1), t0);
        assert_eq!(rocprim.overlap, 1.0);
        let rocblas = running.start(mins(60), t0);
        assert!((rocblas.overlap - (1.0 + 1.0 / 60.0)).abs() < 1e-9);
        assert_eq!(rocblas.count, 2);
        assert_eq!(share(2, rocblas.overlap, rocblas.count, GIB, None), 2);
        // Two long builds split the machine; an unknown estimate counts in full.
        let rocsparse = running.start(mins(50), t0);
        assert!(
            (rocsparse.overlap - 2.02).abs() < 1e-9,
            "{}",
            rocsparse.overlap
        );
        assert_eq!(share(2, rocsparse.overlap, rocsparse.count, GIB, None), 1);
        assert_eq!(running.start(None, t0).overlap, 4.0);
        // Ended builds no longer count.
        drop((rocprim, rocblas, rocsparse));
        assert_eq!(running.start(mins(5), t0).overlap, 1.0);
    }
}
