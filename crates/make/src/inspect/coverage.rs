//! Which requested targets the code in a library serves: LLVM's target ID compatibility rules
//! (AMDGPUUsage "Target ID"; `areTargetsCompatible` in llvm/lib/Object/OffloadBinary.cpp) plus
//! generic processors, and the library × target table the build gate checks.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::codeobject::generic_members;
use super::{InspectError, Inventory, inspect};
use crate::arch::{ArchTable, TargetId};

fn feature_ok(code: Option<bool>, requested: Option<bool>) -> bool {
    match (code, requested) {
        (None, _) => true,
        (Some(c), Some(r)) => c == r,
        // Code for one mode does not run in "either mode" on its own.
        (Some(_), None) => false,
    }
}

/// True when one code object built for `code` runs wherever `requested` asks.
pub fn satisfies(code: &TargetId, requested: &TargetId) -> bool {
    let processor = code.arch == requested.arch
        || generic_members(&code.arch).is_some_and(|m| m.contains(&requested.arch.as_str()));
    processor
        && feature_ok(code.xnack, requested.xnack)
        && feature_ok(code.sramecc, requested.sramecc)
}

/// The code objects that together serve `requested`; empty when they do not. A request that
/// leaves a feature unset needs code for either setting: one "any" object, or one of each.
pub fn served_by<'a>(codes: &'a [TargetId], requested: &TargetId) -> Vec<&'a TargetId> {
    let direct: Vec<&TargetId> = codes.iter().filter(|c| satisfies(c, requested)).collect();
    if !direct.is_empty() {
        return direct;
    }
    let split = |set: &dyn Fn(&mut TargetId, bool)| {
        let (mut on, mut off) = (requested.clone(), requested.clone());
        set(&mut on, true);
        set(&mut off, false);
        let (a, b) = (served_by(codes, &on), served_by(codes, &off));
        if a.is_empty() || b.is_empty() {
            Vec::new()
        } else {
            let mut both = a;
            both.extend(b);
            both.sort();
            both.dedup();
            both
        }
    };
    if requested.xnack.is_none() {
        let v = split(&|t, on| t.xnack = Some(on));
        if !v.is_empty() {
            return v;
        }
    }
    if requested.sramecc.is_none() {
        return split(&|t, on| t.sramecc = Some(on));
    }
    Vec::new()
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case", tag = "status")]
pub enum Status {
    /// Code for the target (or a generic target covering it) is there.
    Present {
        by: Vec<TargetId>,
    },
    /// Only code for the target's nearest supported target: it runs only with a spoof
    /// (HSA_OVERRIDE_GFX_VERSION).
    OnlyCompatible {
        nearest: String,
        by: Vec<TargetId>,
    },
    Missing,
    /// Code for the target is there, but not what its users need from it: a Tensile catalog
    /// that leads only to fallback kernels, names another processor, or misses files.
    Incomplete {
        why: String,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Cell {
    pub target: TargetId,
    #[serde(flatten)]
    pub status: Status,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Row {
    /// A file with device code, or a Tensile library directory (`dir (Tensile)`).
    pub library: String,
    /// One cell per requested target, in the requested order.
    pub targets: Vec<Cell>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CoverageReport {
    pub requested: Vec<TargetId>,
    pub rows: Vec<Row>,
    /// Files that could not be read fully: the gate must not pass over them.
    pub errors: Vec<InspectError>,
}

pub const COVERAGE_SCHEMA: &str = "rocforge.coverage/1";

/// `inspect --against --format json`: the table and the two ways of judging it.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Covered {
    pub schema: &'static str,
    #[serde(flatten)]
    pub report: CoverageReport,
    /// Every requested target has code, counting the spoofs --allow-spoof accepts.
    pub complete: bool,
    /// Every requested target has code of its own, no spoof counted.
    pub native: bool,
    /// Rows of an install prefix whose component's build declared it declines the targets:
    /// taken out of `rows`, never counted as coverage. Absent when there are none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub declined: Vec<DeclinedRows>,
}

/// The rows of one installed component that its build declared declines the targets (its
/// kernels are for other GPUs, and its consumers fall back to another library there).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DeclinedRows {
    pub component: crate::ids::ComponentName,
    pub reason: String,
    /// What its consumers use on these targets instead.
    pub fallback: String,
    pub rows: Vec<Row>,
}

impl Covered {
    pub fn new(
        report: CoverageReport,
        spoof_ok: &[TargetId],
        declined: Vec<DeclinedRows>,
    ) -> Covered {
        Covered {
            schema: COVERAGE_SCHEMA,
            complete: report.complete_allowing(spoof_ok),
            native: report.complete(),
            report,
            declined,
        }
    }
}

/// True when `allowed` (from `--allow-missing` or `--allow-spoof`) covers `target`: the same
/// target ID, or the bare processor, which covers every feature setting of it.
pub fn allows(allowed: &[TargetId], target: &TargetId) -> bool {
    allowed
        .iter()
        .any(|a| a == target || (a.arch == target.arch && a.xnack.is_none() && a.sramecc.is_none()))
}

impl CoverageReport {
    /// Every (library, target) pair with no code at all, or not the code it needs
    /// ([`Status::Incomplete`]); `--allow-missing` accepts either.
    pub fn missing(&self) -> impl Iterator<Item = (&str, &TargetId)> {
        self.rows.iter().flat_map(|r| {
            r.targets
                .iter()
                .filter(|c| matches!(c.status, Status::Missing | Status::Incomplete { .. }))
                .map(move |c| (r.library.as_str(), &c.target))
        })
    }

    /// Why a (library, target) pair is missing: "no <target> code object", or the gap.
    pub fn gap_of(&self, library: &str, target: &TargetId) -> String {
        let status = self
            .rows
            .iter()
            .find(|r| r.library == library)
            .and_then(|r| r.targets.iter().find(|c| &c.target == target))
            .map(|c| &c.status);
        match status {
            Some(Status::Incomplete { why }) => why.clone(),
            _ => format!("no {target} code object"),
        }
    }

    /// Every (library, target, nearest) where the library carries only the nearest target's
    /// code: it runs on that GPU only under HSA_OVERRIDE_GFX_VERSION, which is never coverage.
    pub fn spoofed(&self) -> impl Iterator<Item = (&str, &TargetId, &str)> {
        self.rows.iter().flat_map(|r| {
            r.targets.iter().filter_map(move |c| match &c.status {
                Status::OnlyCompatible { nearest, .. } => {
                    Some((r.library.as_str(), &c.target, nearest.as_str()))
                }
                _ => None,
            })
        })
    }

    /// True when every library carries native code for every target and every file was read.
    pub fn complete(&self) -> bool {
        self.complete_allowing(&[])
    }

    /// As [`complete`](Self::complete), but another target's code counts for the targets in
    /// `spoof_ok` (`--allow-spoof`).
    pub fn complete_allowing(&self, spoof_ok: &[TargetId]) -> bool {
        self.missing().next().is_none()
            && self.spoofed().all(|(_, t, _)| allows(spoof_ok, t))
            && self.errors.is_empty()
    }
}

/// What a library that carries only `nearest`'s code for `target` means to its user.
pub fn spoof_note(table: &ArchTable, target: &TargetId, nearest: &str) -> String {
    match table.get(nearest) {
        Some(n) => format!(
            "{nearest} code only: runs on {} only under HSA_OVERRIDE_GFX_VERSION={}",
            target.arch,
            n.hsa_override()
        ),
        None => format!(
            "{nearest} code only: runs on {} only under a spoofed target",
            target.arch
        ),
    }
}

fn status(
    codes: &[TargetId],
    requested: &TargetId,
    table: &ArchTable,
    index_ok: &dyn Fn(&str) -> bool,
) -> Status {
    let by = served_by(codes, requested);
    if !by.is_empty() && index_ok(&requested.arch) {
        return Status::Present {
            by: by.into_iter().cloned().collect(),
        };
    }
    if let Some(nearest) = table.get(&requested.arch).and_then(|a| a.nearest.clone()) {
        let spoofed = TargetId {
            arch: nearest.clone(),
            ..requested.clone()
        };
        let by = served_by(codes, &spoofed);
        if !by.is_empty() && index_ok(&nearest) {
            return Status::OnlyCompatible {
                nearest,
                by: by.into_iter().cloned().collect(),
            };
        }
    }
    Status::Missing
}

/// The library × target table of an inventory: one row per file with AMDGPU code (outside
/// Tensile directories) and one per Tensile library directory.
pub fn coverage_of(inv: &Inventory, requested: &[TargetId], table: &ArchTable) -> CoverageReport {
    let mut rows = Vec::new();
    let tensile_dirs: Vec<&str> = inv.tensile.iter().map(|t| t.dir.as_str()).collect();
    let in_tensile = |path: &str| {
        let parent = path.rsplit_once('/').map_or("", |(d, _)| d);
        tensile_dirs.contains(&parent)
    };
    for f in &inv.files {
        if in_tensile(&f.path) {
            continue;
        }
        let codes = f.targets();
        if codes.is_empty() {
            continue;
        }
        rows.push(Row {
            library: f.path.clone(),
            targets: requested
                .iter()
                .map(|r| Cell {
                    target: r.clone(),
                    status: status(&codes, r, table, &|_| true),
                })
                .collect(),
        });
    }
    for t in &inv.tensile {
        let mut codes: Vec<TargetId> = inv
            .files
            .iter()
            .filter(|f| f.path.rsplit_once('/').map_or("", |(d, _)| d) == t.dir)
            .flat_map(|f| f.targets())
            .collect();
        codes.sort();
        codes.dedup();
        let index: Vec<&str> = t
            .targets
            .iter()
            .filter(|x| x.index > 0)
            .map(|x| x.target.arch.as_str())
            .collect();
        let index_ok = |arch: &str| index.is_empty() || index.contains(&arch);
        let catalogs = super::tensile::by_target(&t.catalogs);
        rows.push(Row {
            library: format!("{} (Tensile)", if t.dir.is_empty() { "." } else { &t.dir }),
            targets: requested
                .iter()
                .map(|r| Cell {
                    target: r.clone(),
                    // The target's catalog, where there is one, says what is wrong with it
                    // better than the code objects around it can.
                    status: match catalogs.get(&r.arch).and_then(|c| c.gap()) {
                        Some(why) => Status::Incomplete { why },
                        None => status(&codes, r, table, &index_ok),
                    },
                })
                .collect(),
        });
    }
    CoverageReport {
        requested: requested.to_vec(),
        rows,
        errors: inv.errors.clone(),
    }
}

/// Inspects files or install prefixes and checks them against the requested targets.
/// Fails only when a path cannot be read at all; damaged files are listed in `errors`.
pub fn coverage(
    paths: &[PathBuf],
    requested: &[TargetId],
    table: &ArchTable,
) -> Result<CoverageReport, InspectError> {
    let mut report = CoverageReport {
        requested: requested.to_vec(),
        rows: Vec::new(),
        errors: Vec::new(),
    };
    for p in paths {
        let inv = inspect(p)?;
        let part = coverage_of(&inv, requested, table);
        report.rows.extend(part.rows);
        report.errors.extend(part.errors);
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> TargetId {
        super::super::bundle::parse_target_id(s).unwrap()
    }

    #[test]
    fn target_id_rules() {
        // (code objects present, request, served?)
        let cases: &[(&[&str], &str, bool)] = &[
            (&["gfx90c"], "gfx90c", true),
            (&["gfx90c"], "gfx90c:xnack-", true),
            (&["gfx90c"], "gfx90c:xnack+", true),
            (&["gfx90c:xnack-"], "gfx90c:xnack-", true),
            (&["gfx90c:xnack-"], "gfx90c:xnack+", false),
            (&["gfx90c:xnack-"], "gfx90c", false),
            (&["gfx90c:xnack+"], "gfx90c", false),
            (&["gfx90c:xnack-", "gfx90c:xnack+"], "gfx90c", true),
            (&["gfx902"], "gfx90c", false),
            (&["gfx900"], "gfx90c", false),
            (&["gfx9-generic"], "gfx90c", true),
            (&["gfx9-generic"], "gfx902:xnack+", true),
            (&["gfx9-generic:xnack-"], "gfx90c:xnack-", true),
            (&["gfx9-generic:xnack-"], "gfx90c", false),
            (&["gfx9-generic"], "gfx1030", false),
            (&["gfx10-3-generic"], "gfx1035", true),
            (&["gfx11-generic"], "gfx1151", true),
            (&["gfx906:sramecc-:xnack-"], "gfx906:xnack-", false),
            (&["gfx906:xnack-"], "gfx906:sramecc+:xnack-", true),
            (
                &[
                    "gfx906:sramecc-:xnack-",
                    "gfx906:sramecc+:xnack-",
                    "gfx906:sramecc-:xnack+",
                    "gfx906:sramecc+:xnack+",
                ],
                "gfx906",
                true,
            ),
            (
                &["gfx906:sramecc-:xnack-", "gfx906:sramecc+:xnack+"],
                "gfx906",
                false,
            ),
            (&["gfx1030"], "gfx1030", true),
        ];
        for (codes, req, want) in cases {
            let codes: Vec<TargetId> = codes.iter().map(|c| t(c)).collect();
            let got = !served_by(&codes, &t(req)).is_empty();
            assert_eq!(got, *want, "{codes:?} serving {req}");
        }
    }
}
