//! `[coverage]`: how a recipe's GPU code reaches gfx90c/gfx902 when it is not code objects
//! compiled ahead of time. Only `ahead-of-time` (the default) is counted as coverage of a
//! target; the other kinds are verdicts of their own, printed by `inspect` and the build gate.

use std::collections::BTreeMap;

use serde::Serialize;
use toml::de::DeValue;

use crate::arch::{ArchTable, is_arch_name};
use crate::diag::reader::TableReader;
use crate::diag::{Diagnostic, Diagnostics};

/// Kernels compiled for one target by the library's own compiler path, as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProofCount {
    pub compiled: u64,
    pub failed: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum GpuCode {
    /// Code objects in the libraries, checked per target by the coverage gate.
    AheadOfTime,
    /// No GPU code at all (a host wrapper, a tracer): the gate checks that none is there.
    HostOnly { reason: String },
    /// Kernels compiled at run time for the device present; coverage is the recorded proof
    /// that every kernel source compiles for each target (`proof`), made by `method`.
    RuntimeCompiled {
        reason: String,
        method: String,
        proof: BTreeMap<String, ProofCount>,
    },
    /// The library's own dispatch declines these targets; the consumer uses `fallback`.
    Declined { reason: String, fallback: String },
}

impl GpuCode {
    pub fn name(&self) -> &'static str {
        match self {
            GpuCode::AheadOfTime => "ahead-of-time",
            GpuCode::HostOnly { .. } => "host-only",
            GpuCode::RuntimeCompiled { .. } => "runtime-compiled",
            GpuCode::Declined { .. } => "declined",
        }
    }
}

pub const KINDS: &[&str] = &["ahead-of-time", "host-only", "runtime-compiled", "declined"];

/// Reads `[coverage]`. Every kind but `ahead-of-time` must say why (`reason`), so a verdict is
/// never a bare word.
pub fn read(
    mut t: TableReader<'_, '_>,
    arches: &ArchTable,
    d: &mut Diagnostics,
) -> Option<GpuCode> {
    let file = t.file().clone();
    let whole = t.span();
    let kind = t.str(
        "kind",
        d,
        "add kind = \"host-only\", \"runtime-compiled\", \"declined\" or \"ahead-of-time\"",
    );
    let reason = t.opt_str("reason", d);
    let method = t.opt_str("method", d);
    let fallback = t.opt_str("fallback", d);
    let proof_table = t.opt_table("proof", d);
    let mut proof = BTreeMap::new();
    let mut bad = false;
    let proof_span = proof_table.as_ref().map(|p| p.span());
    if let Some(mut p) = proof_table {
        let path = "coverage.proof";
        for (k, v) in p.rest() {
            let arch = k.get_ref().as_ref().to_string();
            if !is_arch_name(&arch) || arches.get(&arch).is_none() {
                d.push(
                    Diagnostic::new(format!("[coverage.proof] names \"{arch}\", not a known processor"))
                        .at(&file, k.span(), "not in arches.toml")
                        .hint("one table per target the proof was made for, e.g. gfx90c = { compiled = 131, failed = 0 }"),
                );
                bad = true;
                continue;
            }
            let DeValue::Table(inner) = v.get_ref() else {
                d.push(
                    Diagnostic::new(format!("[coverage.proof] {arch} must be a table"))
                        .at(&file, v.span(), "expected { compiled = N, failed = M }")
                        .hint("write e.g. gfx90c = { compiled = 131, failed = 0 }"),
                );
                bad = true;
                continue;
            };
            let mut r = TableReader::with_span(&file, inner, v.span(), format!("{path}.{arch}"));
            let count = |r: &mut TableReader<'_, '_>, key: &'static str, d: &mut Diagnostics| {
                let n = r.opt_int(key, d);
                match n {
                    Some(n) if n.value >= 0 => Some(n.value as u64),
                    Some(n) => {
                        d.push(
                            Diagnostic::new(format!(
                                "{path}.{arch}.{key} = {} is negative",
                                n.value
                            ))
                            .at(&file, n.span.clone(), "a count of kernel sources")
                            .hint("write how many kernel sources compiled and how many failed"),
                        );
                        None
                    }
                    None => {
                        d.push(
                            Diagnostic::new(format!("{path}.{arch} has no {key}"))
                                .at(&file, v.span(), format!("add {key} = N"))
                                .hint("a proof records both compiled = N and failed = M"),
                        );
                        None
                    }
                }
            };
            let compiled = count(&mut r, "compiled", d);
            let failed = count(&mut r, "failed", d);
            r.finish(d);
            match (compiled, failed) {
                (Some(compiled), Some(failed)) => {
                    proof.insert(arch, ProofCount { compiled, failed });
                }
                _ => bad = true,
            }
        }
    }
    t.finish(d);
    let kind = kind?;
    let need = |d: &mut Diagnostics,
                key: &str,
                v: &Option<crate::diag::reader::Sp<String>>,
                hint: &str|
     -> Option<String> {
        match v {
            Some(s) if !s.trim().is_empty() => Some(s.value.clone()),
            _ => {
                d.push(
                    Diagnostic::new(format!("coverage kind \"{}\" needs {key}", kind.value))
                        .at(&file, kind.span.clone(), format!("add {key} = \"…\""))
                        .hint(hint.to_string()),
                );
                None
            }
        }
    };
    let unused = |d: &mut Diagnostics, key: &str, present: bool| {
        if present {
            d.push(
                Diagnostic::new(format!(
                    "{key} does not apply to coverage kind \"{}\"",
                    kind.value
                ))
                .at(&file, kind.span.clone(), "this kind")
                .hint(format!("drop {key}, or change the kind")),
            );
        }
    };
    let reason_hint = "say why the library needs no code objects for our targets, e.g. \"host code only: links rocRAND\"";
    let out = match kind.as_str() {
        "ahead-of-time" => {
            unused(d, "method", method.is_some());
            unused(d, "fallback", fallback.is_some());
            unused(d, "proof", proof_span.is_some());
            GpuCode::AheadOfTime
        }
        "host-only" => {
            unused(d, "method", method.is_some());
            unused(d, "fallback", fallback.is_some());
            unused(d, "proof", proof_span.is_some());
            GpuCode::HostOnly {
                reason: need(d, "reason", &reason, reason_hint)?,
            }
        }
        "runtime-compiled" => {
            unused(d, "fallback", fallback.is_some());
            let reason = need(d, "reason", &reason, reason_hint);
            let method = need(
                d,
                "method",
                &method,
                "say how the proof was made: the compiler, its flags, where",
            );
            if proof_span.is_none() {
                d.push(
                    Diagnostic::new("coverage kind \"runtime-compiled\" needs a [coverage.proof]")
                        .at(&file, whole.clone(), "no proof")
                        .hint("record, per target, how many kernel sources compiled: [coverage.proof] gfx90c = { compiled = 131, failed = 0 }"),
                );
                return None;
            }
            if bad {
                return None;
            }
            GpuCode::RuntimeCompiled {
                reason: reason?,
                method: method?,
                proof,
            }
        }
        "declined" => {
            unused(d, "method", method.is_some());
            unused(d, "proof", proof_span.is_some());
            let reason = need(
                d,
                "reason",
                &reason,
                "say where the library declines our targets",
            );
            let fallback = need(
                d,
                "fallback",
                &fallback,
                "name what the consumer uses instead, e.g. \"hipBLAS (rocBLAS)\"",
            );
            GpuCode::Declined {
                reason: reason?,
                fallback: fallback?,
            }
        }
        other => {
            d.push(
                Diagnostic::new(format!("unknown coverage kind \"{other}\""))
                    .at(&file, kind.span.clone(), "not a coverage kind")
                    .hint(format!("use one of {}", KINDS.join(", "))),
            );
            return None;
        }
    };
    Some(out)
}
