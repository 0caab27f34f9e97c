//! What a rocBLAS (or hipBLASLt) Tensile library directory really serves, read from its
//! catalogs rather than guessed from file names.
//!
//! With lazy loading (rocBLAS's default) each target has a master catalog,
//! `TensileLibrary_lazy_<arch>.dat` (msgpack). Its `Hardware` library has one row whose
//! predicate names the processor (`AMDGPU` / `Processor`), under which sit the target's own
//! tuned solutions, and a `TruePred` row of fallbacks: Tensile's generic source kernels, which
//! run anywhere and slowly. Every leaf is a `Placeholder` naming a catalog of solutions,
//! `<name>.dat`, whose kernels are in `<name>.co` (assembly) and `<name>.hsaco` (source), or, for
//! a fallback, `<name>_<arch>.hsaco`. A GPU whose master catalog is missing, or names another
//! processor, or leads only to fallbacks, has no tuned GEMMs, whatever code objects lie beside.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::Path;

use rmpv::Value;
use serde::Serialize;

use super::coverage::satisfies;
use crate::arch::TargetId;

/// Catalogs larger than this are not read (the largest of Debian's rocBLAS is 12.5 MB).
const MAX_CATALOG: u64 = 256 << 20;
/// Tensile's trees are a few levels of `Problem` maps; a deeper file is not one of them.
const MAX_DEPTH: usize = 256;

/// One catalog of solutions a master catalog names.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Part {
    pub name: String,
    pub solutions: usize,
    /// Distinct kernel names among the solutions.
    pub kernels: usize,
    /// The code object files found for it, with the targets each carries code for.
    pub code_objects: Vec<(String, Vec<TargetId>)>,
}

/// One master catalog: `TensileLibrary_lazy_<arch>.dat`.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Catalog {
    pub file: String,
    /// The target the file name names.
    pub target: TargetId,
    /// The processors its hardware predicates name.
    pub processors: Vec<String>,
    /// The target's own solutions.
    pub native: Vec<Part>,
    /// Tensile's generic fallback kernels.
    pub fallback: Vec<Part>,
    /// What makes it unusable or incomplete for its target; empty when it serves it.
    pub problems: Vec<String>,
}

impl Catalog {
    pub fn solutions(&self) -> usize {
        self.native.iter().map(|p| p.solutions).sum()
    }

    pub fn kernels(&self) -> usize {
        self.native.iter().map(|p| p.kernels).sum()
    }

    /// The gap, if any, that keeps this catalog from serving its target with tuned kernels.
    pub fn gap(&self) -> Option<String> {
        if let Some(p) = self.problems.first() {
            return Some(p.clone());
        }
        if self.native.is_empty() || self.solutions() == 0 {
            return Some(format!(
                "{}: only Tensile's fallback kernels ({} catalog(s)), no solutions for {}",
                self.file,
                self.fallback.len(),
                self.target.arch
            ));
        }
        None
    }
}

/// Reads every master catalog in `dir` (a directory of Tensile library files); `names` are the
/// files in it. A catalog that cannot be read is reported as a problem of its own.
/// `codes` are the processors of the code objects in it, by file name, as inspect read them.
pub fn read_dir(dir: &Path, names: &[&str], codes: &BTreeMap<&str, Vec<TargetId>>) -> Vec<Catalog> {
    let present: BTreeSet<&str> = names.iter().copied().collect();
    let mut out = Vec::new();
    for name in names {
        let Some(arch) = name
            .strip_prefix("TensileLibrary_lazy_")
            .and_then(|n| n.strip_suffix(".dat"))
        else {
            continue;
        };
        let Some(target) = super::target_in_name(arch) else {
            continue;
        };
        out.push(read_catalog(dir, name, target, &present, codes));
    }
    out
}

fn read_catalog(
    dir: &Path,
    file: &str,
    target: TargetId,
    present: &BTreeSet<&str>,
    isa: &BTreeMap<&str, Vec<TargetId>>,
) -> Catalog {
    let mut c = Catalog {
        file: file.to_string(),
        target,
        processors: Vec::new(),
        native: Vec::new(),
        fallback: Vec::new(),
        problems: Vec::new(),
    };
    let root = match read_msgpack(&dir.join(file)) {
        Ok(v) => v,
        Err(e) => {
            c.problems.push(format!("{file}: {e}"));
            return c;
        }
    };
    let rows = get(&root, "library")
        .filter(|l| str_of(get(l, "type")) == Some("Hardware"))
        .and_then(|l| get(l, "rows"))
        .and_then(Value::as_array);
    let Some(rows) = rows else {
        c.problems.push(format!(
            "{file}: not a lazy-loading master catalog (no Hardware library rows)"
        ));
        return c;
    };
    let mut native = Vec::new();
    let mut fallback = Vec::new();
    for row in rows {
        let mut processors = Vec::new();
        if let Some(p) = get(row, "predicate") {
            processors_in(p, &mut processors, 0);
        }
        let mut leaves = Vec::new();
        if let Some(l) = get(row, "library") {
            named_catalogs(l, &mut leaves, 0);
        }
        if processors.is_empty() {
            fallback.extend(leaves);
        } else {
            c.processors.extend(processors);
            native.extend(leaves);
        }
    }
    c.processors.sort();
    c.processors.dedup();
    let arch = c.target.arch.clone();
    let foreign: Vec<&String> = c.processors.iter().filter(|p| **p != arch).collect();
    if !foreign.is_empty() {
        c.problems.push(format!(
            "{file} is named for {arch} but selects {}: rocBLAS on {arch} would load another target's solutions",
            foreign
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    for name in dedup(native) {
        let codes = code_files(present, &name, None);
        let p = part(dir, &name, codes, &arch, isa, &mut c.problems);
        c.native.push(p);
    }
    for name in dedup(fallback) {
        let codes = code_files(present, &name, Some(&arch));
        let p = part(dir, &name, codes, &arch, isa, &mut c.problems);
        c.fallback.push(p);
    }
    c
}

fn dedup(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v.dedup();
    v
}

/// The code object files of catalog `name`: `<name>.co`, `<name>.hsaco` and their feature
/// variants (`<name>-xnack+.hsaco`); for a fallback, `<name>_<arch>[features].hsaco`.
fn code_files(present: &BTreeSet<&str>, name: &str, fallback_arch: Option<&str>) -> Vec<String> {
    let stem = match fallback_arch {
        Some(arch) => format!("{name}_{arch}"),
        None => name.to_string(),
    };
    present
        .range(stem.as_str()..)
        .take_while(|f| f.starts_with(&stem))
        .filter(|f| {
            let rest = &f[stem.len()..];
            let rest = rest
                .strip_suffix(".co")
                .or_else(|| rest.strip_suffix(".hsaco"));
            rest.is_some_and(features_only)
        })
        .map(|f| f.to_string())
        .collect()
}

/// True for `""`, `-xnack+`, `-xnack-:sramecc+` and the like: nothing but feature settings.
fn features_only(mut rest: &str) -> bool {
    while !rest.is_empty() {
        let Some(r) = rest.strip_prefix(['-', ':']) else {
            return false;
        };
        let Some(r) = ["xnack+", "xnack-", "sramecc+", "sramecc-"]
            .iter()
            .find_map(|f| r.strip_prefix(f))
        else {
            return false;
        };
        rest = r;
    }
    true
}

fn part(
    dir: &Path,
    name: &str,
    codes: Vec<String>,
    arch: &str,
    isa_of: &BTreeMap<&str, Vec<TargetId>>,
    problems: &mut Vec<String>,
) -> Part {
    let mut p = Part {
        name: name.to_string(),
        solutions: 0,
        kernels: 0,
        code_objects: Vec::new(),
    };
    let dat = format!("{name}.dat");
    match read_msgpack(&dir.join(&dat)) {
        Ok(v) => {
            let solutions = get(&v, "solutions").and_then(Value::as_array);
            p.solutions = solutions.map_or(0, Vec::len);
            let names: BTreeSet<&str> = solutions
                .into_iter()
                .flatten()
                .filter_map(|s| str_of(get(s, "name")))
                .collect();
            p.kernels = names.len();
        }
        Err(e) => problems.push(format!("{dat}: {e}")),
    }
    if codes.is_empty() {
        problems.push(format!(
            "{name}: no code object ({}) beside its catalog",
            if name.ends_with("_fallback") {
                format!("{name}_{arch}.hsaco")
            } else {
                format!("{name}.co or {name}.hsaco")
            }
        ));
    }
    for file in codes {
        let isa = isa_of.get(file.as_str()).cloned().unwrap_or_default();
        // The processor decides; the file's own feature settings are its variant's business.
        let serves = |t: &TargetId| satisfies(&TargetId::plain(&t.arch), &TargetId::plain(arch));
        if isa.is_empty() {
            problems.push(format!("{file}: not an AMDGPU code object"));
        } else if !isa.iter().any(serves) {
            let list: Vec<String> = isa.iter().map(ToString::to_string).collect();
            problems.push(format!("{file}: code for {}, not {arch}", list.join(", ")));
        }
        p.code_objects.push((file, isa));
    }
    p
}

fn read_msgpack(path: &Path) -> Result<Value, String> {
    let f = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let len = f.metadata().map_err(|e| e.to_string())?.len();
    if len > MAX_CATALOG {
        return Err(format!(
            "{len} bytes, more than the {MAX_CATALOG} a catalog is read up to"
        ));
    }
    let mut data = Vec::with_capacity(len as usize);
    f.take(MAX_CATALOG)
        .read_to_end(&mut data)
        .map_err(|e| e.to_string())?;
    let mut slice = data.as_slice();
    rmpv::decode::read_value_with_max_depth(&mut slice, MAX_DEPTH)
        .map_err(|e| format!("not a msgpack Tensile catalog: {e}"))
}

fn get<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    v.as_map()?
        .iter()
        .find(|(k, _)| k.as_str() == Some(key))
        .map(|(_, v)| v)
}

fn str_of(v: Option<&Value>) -> Option<&str> {
    v?.as_str()
}

/// Processor names in a hardware predicate (`AMDGPU` → `Processor`, possibly under `And`).
fn processors_in(v: &Value, out: &mut Vec<String>, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    if str_of(get(v, "type")) == Some("Processor")
        && let Some(p) = str_of(get(v, "value"))
    {
        out.push(p.to_string());
        return;
    }
    match v {
        Value::Map(m) => m.iter().for_each(|(_, x)| processors_in(x, out, depth + 1)),
        Value::Array(a) => a.iter().for_each(|x| processors_in(x, out, depth + 1)),
        _ => {}
    }
}

/// The catalogs a library tree names: Tensile marks each leaf that stands for a catalog file
/// loaded on first use with `type: Placeholder`.
fn named_catalogs(v: &Value, out: &mut Vec<String>, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    if str_of(get(v, "type")) == Some("Placeholder")
        && let Some(p) = str_of(get(v, "value"))
    {
        // A name with a path in it would lead the loader out of the directory.
        if !p.contains('/') && !p.is_empty() {
            out.push(p.to_string());
        }
        return;
    }
    match v {
        Value::Map(m) => m
            .iter()
            .for_each(|(_, x)| named_catalogs(x, out, depth + 1)),
        Value::Array(a) => a.iter().for_each(|x| named_catalogs(x, out, depth + 1)),
        _ => {}
    }
}

/// Catalogs by target, for the coverage table.
pub fn by_target(catalogs: &[Catalog]) -> BTreeMap<String, &Catalog> {
    catalogs
        .iter()
        .map(|c| (c.target.arch.clone(), c))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: Vec<(&str, Value)>) -> Value {
        Value::Map(
            pairs
                .into_iter()
                .map(|(k, v)| (Value::from(k), v))
                .collect(),
        )
    }

    fn write(dir: &Path, name: &str, v: &Value) {
        let mut buf = Vec::new();
        rmpv::encode::write_value(&mut buf, v).unwrap();
        std::fs::write(dir.join(name), buf).unwrap();
    }

    #[test]
    fn a_catalog_that_names_another_processor_is_a_problem_and_a_missing_part_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let row = |pred: Value, leaf: &str| {
            map(vec![
                ("predicate", pred),
                (
                    "library",
                    map(vec![("type", "Placeholder".into()), ("value", leaf.into())]),
                ),
            ])
        };
        let processor = |p: &str| {
            map(vec![
                ("type", "AMDGPU".into()),
                (
                    "value",
                    map(vec![("type", "Processor".into()), ("value", p.into())]),
                ),
            ])
        };
        let master = map(vec![
            ("solutions", Value::Array(vec![])),
            (
                "library",
                map(vec![
                    ("type", "Hardware".into()),
                    (
                        "rows",
                        Value::Array(vec![
                            row(processor("gfx900"), "T_SS_gfx90c"),
                            row(map(vec![("type", "TruePred".into())]), "T_SS_fallback"),
                        ]),
                    ),
                ]),
            ),
        ]);
        write(dir.path(), "TensileLibrary_lazy_gfx90c.dat", &master);
        let names = ["TensileLibrary_lazy_gfx90c.dat"];
        let c = &read_dir(dir.path(), &names, &BTreeMap::new())[0];
        assert_eq!(c.processors, vec!["gfx900".to_string()]);
        assert!(
            c.problems[0].contains("is named for gfx90c but selects gfx900"),
            "{:?}",
            c.problems
        );
        assert!(
            c.problems
                .iter()
                .any(|p| p
                    .contains("T_SS_gfx90c: no code object (T_SS_gfx90c.co or T_SS_gfx90c.hsaco)")),
            "{:?}",
            c.problems
        );
        assert!(c.gap().is_some());
    }

    #[test]
    fn code_files_take_feature_variants_and_nothing_else() {
        let present: BTreeSet<&str> = [
            "P.co",
            "P.hsaco",
            "P-xnack+.hsaco",
            "P_more.co",
            "P.dat",
            "F_gfx90a-xnack-.hsaco",
            "F_gfx90a-xnack+.hsaco",
            "F_gfx900.hsaco",
        ]
        .into_iter()
        .collect();
        assert_eq!(
            code_files(&present, "P", None),
            vec!["P-xnack+.hsaco", "P.co", "P.hsaco"]
        );
        assert_eq!(
            code_files(&present, "F", Some("gfx90a")),
            vec!["F_gfx90a-xnack+.hsaco", "F_gfx90a-xnack-.hsaco"]
        );
    }
}
