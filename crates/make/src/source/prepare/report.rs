//! What `fetch --format json` prints: each component's prepared source.

use serde::Serialize;

use super::Prepared;

pub const FETCH_SCHEMA: &str = "rocforge.fetch/1";

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Fetched {
    pub schema: &'static str,
    /// In the order the components were named.
    pub sources: Vec<Prepared>,
}

impl Fetched {
    pub fn new(sources: Vec<Prepared>) -> Fetched {
        Fetched {
            schema: FETCH_SCHEMA,
            sources,
        }
    }
}
