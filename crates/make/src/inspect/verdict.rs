//! The verdict for a component whose GPU code is not (only) code objects compiled ahead of
//! time: what its `[coverage]` kind says, checked against what the build holds. None of these
//! verdicts counts as ahead-of-time coverage of a target.

use serde::Serialize;

use super::CoverageReport;
use crate::arch::TargetId;
use crate::recipe::gpu_code::GpuCode;

#[derive(Debug, Clone, Serialize)]
pub struct Verdict {
    pub kind: &'static str,
    /// One line a user reads per finding, in order.
    pub lines: Vec<String>,
    /// What fails the verdict, one per target or library; empty when it holds.
    pub gaps: Vec<(Option<TargetId>, String)>,
    /// Libraries with code objects, which this kind does not count for any target.
    pub code_object_libraries: usize,
}

impl Verdict {
    pub fn holds(&self) -> bool {
        self.gaps.is_empty()
    }
}

pub const VERDICT_SCHEMA: &str = "rocforge.verdict/1";

/// `inspect --against --component --format json`, for a component whose GPU code is not
/// compiled ahead of time.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Judged {
    pub schema: &'static str,
    pub component: crate::ids::ComponentName,
    /// The recipe's `[coverage]`.
    pub declared: GpuCode,
    /// Nothing fails the verdict.
    pub holds: bool,
    /// One line a user reads per finding, in order.
    pub lines: Vec<String>,
    /// What fails the verdict, one per target or library.
    pub gaps: Vec<String>,
    /// Libraries with code objects, which this kind does not count for any target.
    pub code_object_libraries: usize,
}

impl Judged {
    pub fn new(component: &crate::ids::ComponentName, declared: &GpuCode, v: &Verdict) -> Judged {
        Judged {
            schema: VERDICT_SCHEMA,
            component: component.clone(),
            declared: declared.clone(),
            holds: v.holds(),
            lines: v.lines.clone(),
            gaps: v.gaps.iter().map(|(_, g)| g.clone()).collect(),
            code_object_libraries: v.code_object_libraries,
        }
    }
}

/// `None` for `ahead-of-time`: the coverage report itself is the verdict then.
pub fn verdict(code: &GpuCode, report: &CoverageReport, targets: &[TargetId]) -> Option<Verdict> {
    let with_code: Vec<String> = report
        .rows
        .iter()
        .filter(|r| !r.library.ends_with("(Tensile)"))
        .map(|r| r.library.clone())
        .collect();
    let names = targets
        .iter()
        .map(|t| t.to_string())
        .collect::<Vec<_>>()
        .join(", ");
    let mut lines = Vec::new();
    let mut gaps = Vec::new();
    match code {
        GpuCode::AheadOfTime => return None,
        GpuCode::HostOnly { reason } => {
            if with_code.is_empty() {
                lines.push(format!(
                    "host-only: no GPU code in the build, nothing to rebuild for {names} ({reason})"
                ));
            } else {
                for lib in &with_code {
                    gaps.push((
                        None,
                        format!("{lib}: carries GPU code, yet the recipe declares host-only"),
                    ));
                }
            }
        }
        GpuCode::RuntimeCompiled {
            reason,
            method,
            proof,
        } => {
            lines.push(format!("runtime-compiled: {reason}"));
            for t in targets {
                match proof.get(&t.arch) {
                    None => gaps.push((
                        Some(t.clone()),
                        format!("{t}: no recorded proof that its kernel sources compile for it"),
                    )),
                    Some(p) if p.failed > 0 || p.compiled == 0 => gaps.push((
                        Some(t.clone()),
                        format!(
                            "{t}: {} of {} kernel sources failed to compile through {method}",
                            p.failed,
                            p.failed + p.compiled
                        ),
                    )),
                    Some(p) if p.left_out > 0 => lines.push(format!(
                        "{t}: runtime-compiled, {} of {} kernels compile, {} left out by the library (their solutions skipped) ({method})",
                        p.compiled,
                        p.compiled + p.left_out,
                        p.left_out
                    )),
                    Some(p) => lines.push(format!(
                        "{t}: runtime-compiled, {} of {} kernel sources compile ({method})",
                        p.compiled, p.compiled
                    )),
                }
            }
        }
        GpuCode::Declined { reason, fallback } => {
            // Declined means no code for the target: a build that has some is covered ahead of
            // time, and saying otherwise would send its users to the fallback for nothing.
            for row in &report.rows {
                for cell in &row.targets {
                    if matches!(cell.status, super::coverage::Status::Present { .. }) {
                        gaps.push((
                            Some(cell.target.clone()),
                            format!(
                                "{}: carries code for {}, yet the recipe declares declined",
                                row.library, cell.target
                            ),
                        ));
                    }
                }
            }
            lines.push(format!(
                "declined: the library does not run on {names} ({reason}); its consumers fall back to {fallback}"
            ));
        }
    }
    if !with_code.is_empty() && !matches!(code, GpuCode::HostOnly { .. }) {
        lines.push(format!(
            "{} libraries carry code objects; a {} component's are not counted as coverage of {names}",
            with_code.len(),
            code.name()
        ));
    }
    for e in &report.errors {
        gaps.push((None, format!("unreadable: {e}")));
    }
    Some(Verdict {
        kind: code.name(),
        lines,
        gaps,
        code_object_libraries: with_code.len(),
    })
}
