//! What `build --format json` prints: each step's result beside its component's name.

use serde::Serialize;

use super::{BuildReport, StepResult};
use crate::ids::ComponentName;

/// Version 2 makes each step one object (version 1 had `[name, result]` pairs).
pub const BUILD_SCHEMA: &str = "rocforge.build/2";

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct StepRecord {
    pub component: ComponentName,
    #[serde(flatten)]
    pub result: StepResult,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Report {
    pub schema: &'static str,
    /// Every step's tree is in the store.
    pub ok: bool,
    /// In the plan's order.
    pub steps: Vec<StepRecord>,
}

impl BuildReport {
    pub fn report(&self) -> Report {
        Report {
            schema: BUILD_SCHEMA,
            ok: self.ok(),
            steps: self
                .steps
                .iter()
                .map(|(component, result)| StepRecord {
                    component: component.clone(),
                    result: result.clone(),
                })
                .collect(),
        }
    }
}
