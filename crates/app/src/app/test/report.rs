//! What `test --format json` prints once the run is over: where the results went and how the
//! tests ended.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;

use super::Outcome;
use crate::testrun::bundle::Summary;
use crate::testrun::classify::Class;

pub const TEST_SCHEMA: &str = "rocforge.test/1";

/// A finished run: its exit status is 1 unless every test passed on a GPU.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Report {
    pub schema: &'static str,
    /// The results.json written.
    pub results: PathBuf,
    /// The junit.xml written beside it.
    pub junit: PathBuf,
    /// Where `--submit` put the results; null without `--submit`.
    pub submitted: Option<String>,
    pub summary: Summary,
    /// How many tests ended in each failure class.
    pub classes: BTreeMap<Class, usize>,
}

impl Outcome {
    pub fn report(&self) -> Report {
        Report {
            schema: TEST_SCHEMA,
            results: self.results.clone(),
            junit: self.junit.clone(),
            submitted: self.submitted.clone(),
            summary: self.bundle.summary.clone(),
            classes: self.bundle.classes.clone(),
        }
    }
}
