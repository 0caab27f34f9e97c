//! How many compile jobs a machine can afford. Out-of-memory kills are the most common
//! complaint in peer projects' trackers, so the budget follows memory, not just cores.

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

/// Jobs for one component when `running` components share `total`, limited by the
/// component's own per-job memory hint.
pub fn share(total: usize, running: usize, per_job_memory: u64, available: Option<u64>) -> usize {
    let even = (total / running.max(1)).max(1);
    let by_memory = available.map_or(even, |m| {
        ((m / running.max(1) as u64) / per_job_memory.max(1)) as usize
    });
    even.min(by_memory).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_caps_jobs() {
        assert_eq!(budget(16, Some(10 * GIB), DEFAULT_JOB_MEMORY), 4);
        assert_eq!(budget(2, Some(24 * GIB), DEFAULT_JOB_MEMORY), 2);
        assert_eq!(budget(8, Some(GIB), DEFAULT_JOB_MEMORY), 1);
        assert_eq!(share(8, 2, 2 * GIB, Some(16 * GIB)), 4);
        assert_eq!(share(8, 2, 4 * GIB, Some(16 * GIB)), 2);
    }
}
