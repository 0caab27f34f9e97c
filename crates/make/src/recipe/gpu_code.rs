//! `[coverage]`: how a recipe's GPU code reaches gfx90c/gfx902 when it is not code objects
//! compiled ahead of time. Only `ahead-of-time` (the default) is counted as coverage of a
//! target; the other kinds are verdicts of their own, printed by `inspect` and the build gate.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use toml::de::{DeTable, DeValue};

use crate::arch::{ArchTable, is_arch_name};
use crate::diag::reader::{Sp, TableReader};
use crate::diag::{Diagnostic, Diagnostics, SourceFile};

/// Kernels compiled for one target by the library's own compiler path, as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ProofCount {
    pub compiled: u64,
    pub failed: u64,
    /// Kernels that do not build, which the library itself leaves out (their solutions are
    /// skipped, its other ones serve the same problems): not a failure of the target, said
    /// beside the count. Absent from the record when none.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub left_out: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
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
    let keys = Keys {
        reason: t.opt_str("reason", d),
        method: t.opt_str("method", d),
        fallback: t.opt_str("fallback", d),
        proof: t.opt_table("proof", d).map(|p| read_proof(p, arches, d)),
    };
    t.finish(d);
    let kind = kind?;
    let v = Verdict {
        file: &file,
        kind: &kind,
    };
    match kind.as_str() {
        "ahead-of-time" => {
            v.unused(d, "method", keys.method.is_some());
            v.unused(d, "fallback", keys.fallback.is_some());
            v.unused(d, "proof", keys.proof.is_some());
            Some(GpuCode::AheadOfTime)
        }
        "host-only" => {
            v.unused(d, "method", keys.method.is_some());
            v.unused(d, "fallback", keys.fallback.is_some());
            v.unused(d, "proof", keys.proof.is_some());
            Some(GpuCode::HostOnly {
                reason: v.need(d, "reason", &keys.reason, REASON_HINT)?,
            })
        }
        "runtime-compiled" => runtime_compiled(&v, keys, whole, d),
        "declined" => declined(&v, keys, d),
        other => {
            d.push(
                Diagnostic::new(format!("unknown coverage kind \"{other}\""))
                    .at(&file, kind.span.clone(), "not a coverage kind")
                    .hint(format!("use one of {}", KINDS.join(", "))),
            );
            None
        }
    }
}

const REASON_HINT: &str = "say why the library needs no code objects for our targets, e.g. \"host code only: links rocRAND\"";

/// The keys of `[coverage]` besides `kind`, as written.
struct Keys {
    reason: Option<Sp<String>>,
    method: Option<Sp<String>>,
    fallback: Option<Sp<String>>,
    /// None: no `[coverage.proof]`; `Some(None)`: one with problems (reported).
    proof: Option<Option<BTreeMap<String, ProofCount>>>,
}

/// The keys checked against the kind, which every message names.
struct Verdict<'k> {
    file: &'k Arc<SourceFile>,
    kind: &'k Sp<String>,
}

impl Verdict<'_> {
    fn need(
        &self,
        d: &mut Diagnostics,
        key: &str,
        v: &Option<Sp<String>>,
        hint: &str,
    ) -> Option<String> {
        match v {
            Some(s) if !s.trim().is_empty() => Some(s.value.clone()),
            _ => {
                d.push(
                    Diagnostic::new(format!("coverage kind \"{}\" needs {key}", self.kind.value))
                        .at(
                            self.file,
                            self.kind.span.clone(),
                            format!("add {key} = \"…\""),
                        )
                        .hint(hint.to_string()),
                );
                None
            }
        }
    }

    fn unused(&self, d: &mut Diagnostics, key: &str, present: bool) {
        if present {
            d.push(
                Diagnostic::new(format!(
                    "{key} does not apply to coverage kind \"{}\"",
                    self.kind.value
                ))
                .at(self.file, self.kind.span.clone(), "this kind")
                .hint(format!("drop {key}, or change the kind")),
            );
        }
    }
}

fn runtime_compiled(
    v: &Verdict<'_>,
    keys: Keys,
    whole: Range<usize>,
    d: &mut Diagnostics,
) -> Option<GpuCode> {
    v.unused(d, "fallback", keys.fallback.is_some());
    let reason = v.need(d, "reason", &keys.reason, REASON_HINT);
    let method = v.need(
        d,
        "method",
        &keys.method,
        "say how the proof was made: the compiler, its flags, where",
    );
    let Some(proof) = keys.proof else {
        d.push(
            Diagnostic::new("coverage kind \"runtime-compiled\" needs a [coverage.proof]")
                .at(v.file, whole, "no proof")
                .hint("record, per target, how many kernel sources compiled: [coverage.proof] gfx90c = { compiled = 131, failed = 0 }"),
        );
        return None;
    };
    let proof = proof?;
    Some(GpuCode::RuntimeCompiled {
        reason: reason?,
        method: method?,
        proof,
    })
}

fn declined(v: &Verdict<'_>, keys: Keys, d: &mut Diagnostics) -> Option<GpuCode> {
    v.unused(d, "method", keys.method.is_some());
    v.unused(d, "proof", keys.proof.is_some());
    let reason = v.need(
        d,
        "reason",
        &keys.reason,
        "say where the library declines our targets",
    );
    let fallback = v.need(
        d,
        "fallback",
        &keys.fallback,
        "name what the consumer uses instead, e.g. \"hipBLAS (rocBLAS)\"",
    );
    Some(GpuCode::Declined {
        reason: reason?,
        fallback: fallback?,
    })
}

const PROOF_PATH: &str = "coverage.proof";

/// `[coverage.proof]`: one count per known processor. None when an entry has problems
/// (reported).
fn read_proof(
    mut p: TableReader<'_, '_>,
    arches: &ArchTable,
    d: &mut Diagnostics,
) -> Option<BTreeMap<String, ProofCount>> {
    let file = p.file();
    let mut proof = BTreeMap::new();
    let mut bad = false;
    for (k, v) in p.rest() {
        let arch = k.get_ref().as_ref().to_string();
        if !is_arch_name(&arch) || arches.get(&arch).is_none() {
            d.push(
                Diagnostic::new(format!("[coverage.proof] names \"{arch}\", not a known processor"))
                    .at(file, k.span(), "not in arches.toml")
                    .hint("one table per target the proof was made for, e.g. gfx90c = { compiled = 131, failed = 0 }"),
            );
            bad = true;
            continue;
        }
        let DeValue::Table(inner) = v.get_ref() else {
            d.push(
                Diagnostic::new(format!("[coverage.proof] {arch} must be a table"))
                    .at(file, v.span(), "expected { compiled = N, failed = M }")
                    .hint("write e.g. gfx90c = { compiled = 131, failed = 0 }"),
            );
            bad = true;
            continue;
        };
        match read_count(file, &arch, inner, v.span(), d) {
            Some(count) => {
                proof.insert(arch, count);
            }
            None => bad = true,
        }
    }
    (!bad).then_some(proof)
}

/// One processor's `{ compiled = N, failed = M }`.
fn read_count(
    file: &Arc<SourceFile>,
    arch: &str,
    inner: &DeTable<'_>,
    span: Range<usize>,
    d: &mut Diagnostics,
) -> Option<ProofCount> {
    let mut r = TableReader::with_span(file, inner, span.clone(), format!("{PROOF_PATH}.{arch}"));
    let compiled = count(&mut r, arch, &span, "compiled", d);
    let failed = count(&mut r, arch, &span, "failed", d);
    let left_out = match r.opt_int("left-out", d) {
        Some(n) if n.value < 0 => {
            d.push(
                Diagnostic::new(format!(
                    "{PROOF_PATH}.{arch}.left-out = {} is negative",
                    n.value
                ))
                .at(r.file(), n.span.clone(), "a count of kernels")
                .hint("write how many kernels do not build and are left out by the library"),
            );
            None
        }
        n => Some(n.map_or(0, |n| n.value as u64)),
    };
    r.finish(d);
    Some(ProofCount {
        compiled: compiled?,
        failed: failed?,
        left_out: left_out?,
    })
}

fn count(
    r: &mut TableReader<'_, '_>,
    arch: &str,
    span: &Range<usize>,
    key: &'static str,
    d: &mut Diagnostics,
) -> Option<u64> {
    match r.opt_int(key, d) {
        Some(n) if n.value >= 0 => Some(n.value as u64),
        Some(n) => {
            d.push(
                Diagnostic::new(format!(
                    "{PROOF_PATH}.{arch}.{key} = {} is negative",
                    n.value
                ))
                .at(r.file(), n.span.clone(), "a count of kernel sources")
                .hint("write how many kernel sources compiled and how many failed"),
            );
            None
        }
        None => {
            d.push(
                Diagnostic::new(format!("{PROOF_PATH}.{arch} has no {key}"))
                    .at(r.file(), span.clone(), format!("add {key} = N"))
                    .hint("a proof records both compiled = N and failed = M"),
            );
            None
        }
    }
}
