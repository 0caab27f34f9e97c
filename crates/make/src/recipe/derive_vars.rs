//! The variables a `[[derive]]` substitutes for one processor (`{arch}`, `{codename}`, its KFD
//! version, the recipe's own per-arch `vars`): what a derivation writes, where a processor's
//! Tensile logic lives, and what the Nix export rewrites all read them from here.

use std::collections::BTreeMap;

use crate::arch::ArchTable;
use crate::recipe::Derive;

/// The variables of one processor, built in plus the recipe's own.
pub fn vars_for(arch: &str, table: &ArchTable, d: &Derive) -> BTreeMap<String, String> {
    let mut vars = BTreeMap::new();
    vars.insert("arch".to_string(), arch.to_string());
    if let Some(a) = table.get(arch) {
        let (maj, min, step) = a.kfd_triple();
        vars.insert("major".into(), maj.to_string());
        vars.insert("minor".into(), min.to_string());
        vars.insert("stepping".into(), step.to_string());
        vars.insert("isa".into(), format!("{maj}, {min}, {step}"));
    }
    if let Some(own) = d.vars.get(arch) {
        vars.extend(own.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    vars
}

pub fn substitute(template: &str, vars: &BTreeMap<String, String>) -> String {
    let mut out = template.to_string();
    for (k, v) in vars {
        out = out.replace(&format!("{{{k}}}"), v);
    }
    out
}
