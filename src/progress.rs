//! Progress reporting from library code. The library says what it is doing; the binary decides
//! how to show it (bars on a terminal, plain lines in logs and CI).

/// One unit of long work: a download, a clone, a patch series.
pub trait Task: Send + Sync {
    /// Adds to the amount done (bytes for transfers, items otherwise).
    fn inc(&self, n: u64);
    /// Sets or corrects the total once known (e.g. from Content-Length).
    fn set_total(&self, total: u64);
    /// Sets the amount done outright (e.g. after resuming a partial download).
    fn set_position(&self, pos: u64);
    fn finish(&self, message: &str);
    /// What the task is doing now (a build phase); shown beside its label.
    fn set_message(&self, _message: &str) {}
}

pub trait Reporter: Send + Sync {
    /// Starts a task. `total` is in bytes when `bytes` is true.
    fn task(&self, label: &str, total: Option<u64>, bytes: bool) -> Box<dyn Task>;
    /// A one-line note that is not a task (a retry, a mirror used, a cache hit).
    fn note(&self, message: &str);
}

/// Reports nothing: for tests and for callers that want silence.
pub struct Silent;

struct SilentTask;

impl Task for SilentTask {
    fn inc(&self, _: u64) {}
    fn set_total(&self, _: u64) {}
    fn set_position(&self, _: u64) {}
    fn finish(&self, _: &str) {}
}

impl Reporter for Silent {
    fn task(&self, _: &str, _: Option<u64>, _: bool) -> Box<dyn Task> {
        Box::new(SilentTask)
    }
    fn note(&self, _: &str) {}
}
