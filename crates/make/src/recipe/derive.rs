//! `[[derive]]`: per-target copies of the patched source, rewritten for each processor.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;

use crate::arch::ArchTable;
use crate::diag::reader::{Sp, TableReader};
use crate::diag::{Diagnostic, Diagnostics, SourceFile, did_you_mean};

use super::checks::path_problem;

/// Copies a tree of the patched source under a new name for each targeted processor and
/// rewrites text in the copies. The case that matters: Tensile logic for gfx90c/gfx902 derived
/// from the gfx900 (vega10) logic. `{arch}`, `{isa}` (`9, 0, 12`), `{major}`, `{minor}`,
/// `{stepping}` and the per-arch `vars` are substituted in `to`, `rename` and `replace`.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Derive {
    pub arches: Vec<String>,
    pub from: String,
    pub to: String,
    pub rename: Vec<(String, String)>,
    pub replace: Vec<(String, String)>,
    pub vars: BTreeMap<String, BTreeMap<String, String>>,
}

const DERIVE_VARS: [&str; 5] = ["arch", "isa", "major", "minor", "stepping"];

/// The `vars` of a `[[derive]]`, per processor: name to value.
type Vars = BTreeMap<String, BTreeMap<String, String>>;

pub(super) fn read_derive(
    tables: Vec<TableReader<'_, '_>>,
    arches: &ArchTable,
    d: &mut Diagnostics,
) -> Vec<Derive> {
    tables
        .into_iter()
        .filter_map(|t| read_one(t, arches, d))
        .collect()
}

/// One `[[derive]]` table; None when it has problems (reported).
fn read_one(mut t: TableReader<'_, '_>, arches: &ArchTable, d: &mut Diagnostics) -> Option<Derive> {
    let file = t.file().clone();
    let before = d.len();
    let for_arches = t.opt_str_list("arches", d);
    let from = t.str(
        "from",
        d,
        "from = \"<directory of the patched source to copy>\"",
    );
    let to = t.str(
        "to",
        d,
        "to = \"<destination, e.g. …/asm_full/{codename}>\"",
    );
    let rename = t.opt_pair_list("rename", d).unwrap_or_default();
    let replace = t.opt_pair_list("replace", d).unwrap_or_default();
    let vars = t
        .opt_table("vars", d)
        .map(|vt| read_vars(vt, arches, d))
        .unwrap_or_default();
    let table_span = t.span();
    t.finish(d);
    let for_arches = match for_arches {
        Some(list) if !list.is_empty() => list,
        _ => {
            d.push(
                Diagnostic::new("[[derive]] names no arches")
                    .at(
                        &file,
                        table_span.start..table_span.start,
                        "which targets is this derivation for?",
                    )
                    .hint("add arches = [\"gfx90c\", \"gfx902\"]"),
            );
            return None;
        }
    };
    check_arches(&file, &for_arches, arches, d);
    check_paths(&file, from.iter().chain(to.iter()), d);
    let texts = to
        .iter()
        .cloned()
        .chain(rename.iter().chain(replace.iter()).map(|(_, b)| b.clone()));
    check_placeholders(&file, texts, &for_arches, &vars, d);
    if d.len() > before {
        return None;
    }
    Some(Derive {
        arches: for_arches.into_iter().map(|a| a.value).collect(),
        from: from?.value,
        to: to?.value,
        rename: rename
            .into_iter()
            .map(|(a, b)| (a.value, b.value))
            .collect(),
        replace: replace
            .into_iter()
            .map(|(a, b)| (a.value, b.value))
            .collect(),
        vars,
    })
}

/// `[derive.vars]`: a table of strings per known processor.
fn read_vars(mut vt: TableReader<'_, '_>, arches: &ArchTable, d: &mut Diagnostics) -> Vars {
    let file = vt.file();
    let mut vars = Vars::new();
    for (k, v) in vt.rest() {
        let arch = k.get_ref().to_string();
        if arches.get(&arch).is_none() {
            d.push(
                Diagnostic::new(format!("unknown GPU target \"{arch}\" in [derive.vars]"))
                    .at(file, k.span(), "not a known processor")
                    .maybe_hint(did_you_mean(&arch, arches.names())),
            );
            continue;
        }
        let toml::de::DeValue::Table(table) = v.get_ref() else {
            d.push(
                Diagnostic::new(format!("[derive.vars.{arch}] must be a table of strings"))
                    .at(file, v.span(), "expected a table")
                    .hint(format!("e.g. [derive.vars.{arch}] codename = \"renoir\"")),
            );
            continue;
        };
        let mut map = BTreeMap::new();
        for (vk, vv) in table.iter() {
            match vv.get_ref().as_str() {
                Some(s) => {
                    map.insert(vk.get_ref().to_string(), s.to_string());
                }
                None => d.push(
                    Diagnostic::new(format!(
                        "derive variable \"{}\" must be a string",
                        vk.get_ref()
                    ))
                    .at(file, vv.span(), "expected a string")
                    .hint("quote the value"),
                ),
            }
        }
        vars.insert(arch, map);
    }
    vars
}

fn check_arches(
    file: &Arc<SourceFile>,
    for_arches: &[Sp<String>],
    arches: &ArchTable,
    d: &mut Diagnostics,
) {
    for a in for_arches {
        if arches.get(a).is_none() {
            d.push(
                Diagnostic::new(format!(
                    "unknown GPU target \"{}\" in [[derive]] arches",
                    a.value
                ))
                .at(file, a.span.clone(), "not a known processor")
                .maybe_hint(did_you_mean(a, arches.names())),
            );
        }
    }
}

fn check_paths<'s>(
    file: &Arc<SourceFile>,
    paths: impl Iterator<Item = &'s Sp<String>>,
    d: &mut Diagnostics,
) {
    for p in paths {
        if let Some(problem) = path_problem(p) {
            d.push(
                Diagnostic::new(format!("derive path \"{}\" must stay inside the source tree", p.value))
                    .at(file, p.span.clone(), problem)
                    .hint("write a relative path inside the source, e.g. \"library/src/blas3/Tensile/Logic/asm_full/vega10\""),
            );
        }
    }
}

/// Every {placeholder} must be known for every arch the derivation runs for.
fn check_placeholders(
    file: &Arc<SourceFile>,
    texts: impl Iterator<Item = Sp<String>>,
    for_arches: &[Sp<String>],
    vars: &Vars,
    d: &mut Diagnostics,
) {
    for text in texts {
        for var in placeholders(&text) {
            if DERIVE_VARS.contains(&var.as_str()) {
                continue;
            }
            for a in for_arches {
                if !vars.get(a.as_str()).is_some_and(|m| m.contains_key(&var)) {
                    d.push(
                        Diagnostic::new(format!("placeholder {{{var}}} has no value for {}", a.value))
                            .at(file, text.span.clone(), format!("uses {{{var}}}"))
                            .hint(format!("add [derive.vars.{}] {var} = \"…\" (built in: arch, isa, major, minor, stepping)", a.value)),
                    );
                }
            }
        }
    }
}

/// Names inside `{…}` in a template.
pub fn placeholders(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find('{') {
        let Some(len) = rest[start + 1..].find('}') else {
            break;
        };
        let name = &rest[start + 1..start + 1 + len];
        if !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            out.push(name.to_string());
        }
        rest = &rest[start + 1 + len..];
    }
    out
}
