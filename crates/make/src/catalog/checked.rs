//! What `check --format json` prints: the catalog, its lines and every problem found in them.

use serde::Serialize;

use super::CatalogRoot;
use crate::diag::{Diagnostic, Diagnostics};

pub const CHECK_SCHEMA: &str = "rocforge.check/1";

/// One diagnostic, flattened for a reader without rocforge's renderer.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Problem {
    pub message: String,
    /// `FILE:LINE:COLUMN`, or the file alone; null when the problem has no place.
    pub location: Option<String>,
    pub hint: Option<String>,
}

impl From<&Diagnostic> for Problem {
    fn from(d: &Diagnostic) -> Problem {
        Problem {
            message: d.message.clone(),
            location: d.position(),
            hint: d.hint.clone(),
        }
    }
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct CheckReport {
    pub schema: &'static str,
    /// The catalog checked, as rocforge names it (a directory, or the built-in catalog).
    pub catalog: String,
    pub releases: Vec<String>,
    /// No problem was found.
    pub ok: bool,
    pub problems: Vec<Problem>,
}

impl CheckReport {
    pub fn new(root: &CatalogRoot, releases: Vec<String>, diags: &Diagnostics) -> CheckReport {
        CheckReport {
            schema: CHECK_SCHEMA,
            catalog: root.describe(),
            releases,
            ok: diags.is_empty(),
            problems: diags.iter().map(Problem::from).collect(),
        }
    }
}
