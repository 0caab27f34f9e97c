//! `inspect --against`: the code objects under the given paths checked against the targets
//! asked for, or, for a component whose recipe declares another kind of coverage (kernels
//! compiled at run time, kernels only for other GPUs), that kind's verdict.

use std::path::PathBuf;

use super::{Options, Result};
use crate::arch::{ArchTable, TargetId};
use crate::catalog::Catalog;
use crate::diag::{Diagnostic, Diagnostics, Hint};
use crate::inspect::coverage::{CoverageReport, DeclinedRows};
use crate::inspect::verdict::Verdict;
use crate::recipe::gpu_code::GpuCode;

/// What `inspect --against` is asked for.
pub struct Request<'a> {
    pub paths: &'a [PathBuf],
    /// `--against`: the targets, as a comma list.
    pub against: &'a str,
    /// `--allow-spoof`: targets whose gaps a spoofed nearest target may fill.
    pub allow_spoof: Option<&'a str>,
    /// The component the paths are a build of: its recipe's `[coverage]` kind decides.
    pub component: Option<&'a str>,
}

/// What the check found.
pub enum Checked {
    /// The recipe declares a kind of coverage other than code objects compiled ahead of time.
    Declared {
        component: crate::ids::ComponentName,
        /// The recipe file that declares it, as the user knows it.
        file: String,
        gpu_code: GpuCode,
        verdict: Verdict,
        requested: Vec<TargetId>,
    },
    /// Code objects against the targets.
    CodeObjects {
        report: CoverageReport,
        spoof_ok: Vec<TargetId>,
        table: ArchTable,
        /// Rows of an install prefix's components whose builds declined the targets, taken
        /// out of `report`.
        declined: Vec<DeclinedRows>,
    },
}

impl Checked {
    /// Whether every target is covered (or the declared kind's verdict holds).
    pub fn holds(&self) -> bool {
        match self {
            Checked::Declared { verdict, .. } => verdict.holds(),
            Checked::CodeObjects {
                report, spoof_ok, ..
            } => report.complete_allowing(spoof_ok),
        }
    }
}

pub fn against(options: &Options, req: &Request<'_>) -> Result<Checked> {
    let mut d = Diagnostics::default();
    let table = crate::catalog::load_arches(&options.root, &mut d)?;
    if !d.is_empty() {
        return Err(d.into());
    }
    let requested = table
        .resolve_list(req.against)
        .map_err(|e| Diagnostic::new(format!("--against: {e}")).hint(e.hint()))?;
    let spoof_ok = match req.allow_spoof {
        Some(l) => table
            .resolve_list(l)
            .map_err(|e| Diagnostic::new(format!("--allow-spoof: {e}")).hint(e.hint()))?,
        None => Vec::new(),
    };
    let mut report = crate::inspect::coverage(req.paths, &requested, &table).map_err(unreadable)?;
    if let Some(name) = req.component {
        let catalog = Catalog::load(options.root.clone(), options.release.as_deref())?;
        let Some(recipe) = catalog.recipes.get(name) else {
            return Err(Diagnostic::new(format!(
                "no component \"{name}\" in release line {}",
                catalog.release.name
            ))
            .hint(format!(
                "`rocforge --release {} list` shows its components",
                catalog.release.name
            ))
            .into());
        };
        if let Some(verdict) =
            crate::inspect::verdict::verdict(&recipe.gpu_code, &report, &requested)
        {
            return Ok(Checked::Declared {
                component: crate::ids::ComponentName::checked(name),
                file: recipe.display_file().to_string(),
                gpu_code: recipe.gpu_code.clone(),
                verdict,
                requested,
            });
        }
    }
    let declined = match req.paths {
        [prefix] => take_declined(&mut report, prefix),
        _ => Vec::new(),
    };
    Ok(Checked::CodeObjects {
        report,
        spoof_ok,
        table,
        declined,
    })
}

/// When `prefix` is an install prefix: the rows that lack code and belong to a component whose
/// receipt says its build declined the targets, taken out of `report`. Declining is the
/// build's declared verdict (hipBLASLt's kernels are for matrix-core GPUs only), which install
/// reports; a table of the prefix saying MISSING for it would contradict that, and counting it
/// as coverage would be false, so it is shown apart.
fn take_declined(report: &mut CoverageReport, prefix: &std::path::Path) -> Vec<DeclinedRows> {
    let receipts = crate::install::receipt::read_all(prefix);
    let mut out: Vec<DeclinedRows> = Vec::new();
    let rows = std::mem::take(&mut report.rows);
    for row in rows {
        let lacks = row
            .targets
            .iter()
            .any(|c| !matches!(c.status, crate::inspect::coverage::Status::Present { .. }));
        let path = row.library.trim_end_matches(" (Tensile)");
        let owner = receipts.iter().find(|r| {
            r.declined.is_some()
                && r.files.iter().any(|f| {
                    f == path
                        || f.strip_prefix(path)
                            .is_some_and(|rest| rest.starts_with('/'))
                })
        });
        match (lacks, owner) {
            (true, Some(r)) => {
                let d = r.declined.as_ref().expect("filtered on declined");
                let name = r.name.clone();
                match out.iter_mut().find(|o| o.component == name) {
                    Some(o) => o.rows.push(row),
                    None => out.push(DeclinedRows {
                        component: name,
                        reason: d.reason.clone(),
                        fallback: d.fallback.clone(),
                        rows: vec![row],
                    }),
                }
            }
            _ => report.rows.push(row),
        }
    }
    out
}

/// A path that is not what `inspect` reads, with what it does read.
pub fn unreadable(e: crate::inspect::InspectError) -> super::Error {
    Diagnostic::new(e.to_string())
        .hint(
            "give a file (library, executable, object, archive, code object) or an install prefix",
        )
        .into()
}
