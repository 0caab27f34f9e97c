//! What the planner asks of a store: the plan owns the question, the store answers it, so
//! plans can be computed against a fake in unit tests and against a directory everywhere else.

use serde::{Deserialize, Serialize};

/// The store as the planner sees it.
pub trait StoreView {
    fn contains(&self, key: &str) -> bool;
    /// Hash input of the newest entry for `component`, if any.
    fn previous(&self, component: &str) -> Option<serde_json::Value>;
    /// Recorded build durations, to schedule the longest path first.
    fn duration(&self, _component: &str) -> Option<f64> {
        None
    }
    /// The newest build of `component` recorded here, for the plan's estimate.
    fn measured(&self, _component: &str) -> Option<Measured> {
        None
    }
    /// A builder image built locally by `rocforge image build` for this release line.
    fn local_image(&self, _release: &str) -> Option<LocalImage> {
        None
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct LocalImage {
    pub reference: String,
    pub id: String,
    /// What it was built from (`ImageRef::built_from`); None when its inputs do not pin it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inputs: Option<String>,
    /// Its installed Debian packages, `name=version` sorted (`dpkg-query -W`), as checked
    /// against the Containerfile's pins when it was built.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub packages: Vec<String>,
}

/// A build's wall time as the store recorded it, how many targets it was for, and the disk
/// it took (None in entries from before that was recorded).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Measured {
    pub secs: f64,
    pub targets: usize,
    pub disk: Option<MeasuredDisk>,
}

/// The disk a build took, as measured when it ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct MeasuredDisk {
    /// What it installed: its store entry.
    pub installed_bytes: u64,
    /// Its build directory, gone once the entry was committed.
    pub build_bytes: u64,
}

/// A store that has nothing: every component is new.
pub struct EmptyStore;

impl StoreView for EmptyStore {
    fn contains(&self, _: &str) -> bool {
        false
    }
    fn previous(&self, _: &str) -> Option<serde_json::Value> {
        None
    }
}
