//! The coverage record: what a build's gate found about its GPU code, kept in the store entry's
//! `meta.json` and every package manifest made from it, and read back by install.

use serde::{Deserialize, Serialize};

use super::CoverageReport;
use crate::arch::TargetId;
use crate::recipe::gpu_code::GpuCode;

/// The gate's record of one build; components without device code have none.
#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum CoverageRecord {
    /// A `[coverage]` kind other than ahead-of-time: its verdict, never code-object coverage.
    Declared(DeclaredRecord),
    /// Code objects compiled ahead of time, per library and target.
    CodeObjects(CodeObjectRecord),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CodeObjectRecord {
    /// Libraries with device code: the report's rows.
    pub libraries: usize,
    pub targets: Vec<TargetId>,
    /// (library, target) without the code the target needs, accepted by `--allow-missing`.
    pub missing_allowed: Vec<(String, TargetId)>,
    /// (library, target, nearest) with only the nearest target's code, accepted by
    /// `--allow-spoof`. None in records from before it was recorded, which stay without it
    /// so their entries package as they did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Vec<(String, TargetId, String)>")]
    pub spoof_allowed: Option<Vec<(String, TargetId, String)>>,
    pub report: CoverageReport,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DeclaredRecord {
    /// `declared`'s kind again: records have always carried it at the top.
    pub kind: String,
    pub targets: Vec<TargetId>,
    /// The recipe's `[coverage]`.
    pub declared: GpuCode,
    /// The verdict's lines, paths relative to the entry's tree.
    pub verdict: Vec<String>,
    /// What failed the verdict, accepted by `--allow-missing`.
    pub missing_allowed: Vec<String>,
}

// The record was written as a serde_json::Value before it had a type, so with the keys of every
// object in it sorted; published manifests hold those bytes, and packaging an entry again must
// give them back.
impl Serialize for CoverageRecord {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            CoverageRecord::Declared(r) => serde_json::to_value(r),
            CoverageRecord::CodeObjects(r) => serde_json::to_value(r),
        }
        .map_err(serde::ser::Error::custom)?
        .serialize(s)
    }
}

impl CoverageRecord {
    /// The library × target table, when the record is of code objects.
    pub fn report(&self) -> Option<&CoverageReport> {
        match self {
            CoverageRecord::CodeObjects(r) => Some(&r.report),
            CoverageRecord::Declared(_) => None,
        }
    }

    /// The recipe's `[coverage]`, when it declared a kind other than ahead-of-time.
    pub fn declared(&self) -> Option<&GpuCode> {
        match self {
            CoverageRecord::Declared(r) => Some(&r.declared),
            CoverageRecord::CodeObjects(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(saved: &str) {
        let record: CoverageRecord = serde_json::from_str(saved).unwrap();
        assert_eq!(serde_json::to_string_pretty(&record).unwrap(), saved);
    }

    #[test]
    fn code_object_records_read_and_write_as_saved() {
        round_trip(
            r#"{
  "libraries": 2,
  "missing_allowed": [
    [
      "lib/rocblas/library (Tensile)",
      "gfx90c:xnack-"
    ]
  ],
  "report": {
    "errors": [],
    "requested": [
      "gfx90c:xnack-",
      "gfx902:xnack+"
    ],
    "rows": [
      {
        "library": "lib/libhipcore.so",
        "targets": [
          {
            "by": [
              "gfx9-generic"
            ],
            "status": "present",
            "target": "gfx90c:xnack-"
          },
          {
            "by": [
              "gfx900:xnack+"
            ],
            "nearest": "gfx900",
            "status": "only-compatible",
            "target": "gfx902:xnack+"
          }
        ]
      },
      {
        "library": "lib/rocblas/library (Tensile)",
        "targets": [
          {
            "status": "incomplete",
            "target": "gfx90c:xnack-",
            "why": "only fallback kernels"
          },
          {
            "status": "missing",
            "target": "gfx902:xnack+"
          }
        ]
      }
    ]
  },
  "spoof_allowed": [
    [
      "lib/libhipcore.so",
      "gfx902:xnack+",
      "gfx900"
    ]
  ],
  "targets": [
    "gfx90c:xnack-",
    "gfx902:xnack+"
  ]
}"#,
        );
        // Before --allow-spoof there was no spoof_allowed.
        round_trip(
            r#"{
  "libraries": 0,
  "missing_allowed": [],
  "report": {
    "errors": [],
    "requested": [
      "gfx90c"
    ],
    "rows": []
  },
  "targets": [
    "gfx90c"
  ]
}"#,
        );
    }

    #[test]
    fn declared_records_read_and_write_as_saved() {
        round_trip(
            r#"{
  "declared": {
    "fallback": "hipBLAS",
    "kind": "declined",
    "reason": "kernels for matrix-core GPUs only"
  },
  "kind": "declined",
  "missing_allowed": [],
  "targets": [
    "gfx90c"
  ],
  "verdict": [
    "declines gfx90c: kernels for matrix-core GPUs only"
  ]
}"#,
        );
        round_trip(
            r#"{
  "declared": {
    "kind": "runtime-compiled",
    "method": "scripts/miopen-replay",
    "proof": {
      "gfx902": {
        "compiled": 131,
        "failed": 0
      },
      "gfx90c": {
        "compiled": 129,
        "failed": 0,
        "left_out": 2
      }
    },
    "reason": "kernels compiled at run time"
  },
  "kind": "runtime-compiled",
  "missing_allowed": [
    "gfx902: no proof"
  ],
  "targets": [
    "gfx90c",
    "gfx902"
  ],
  "verdict": []
}"#,
        );
    }
}
