//! `[patches]`: the catalog's patch files, for every target and per processor.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::arch::{ArchTable, is_arch_name};
use crate::diag::reader::{self, Sp, TableReader};
use crate::diag::{Diagnostic, Diagnostics, SourceFile, did_you_mean};

/// Patch file names, in order: `all` first, then each arch's own list.
#[derive(Debug, Clone, Default)]
pub struct Patches {
    pub all: Vec<Sp<String>>,
    pub per_arch: BTreeMap<String, Vec<Sp<String>>>,
    /// The release line whose `patches/` directory holds the files, when it is not the
    /// recipe's own line (patches a derived line inherits from its base).
    pub release: Option<String>,
    /// The file the spans point into, when it is not the recipe's `file` (an override's).
    pub file: Option<Arc<SourceFile>>,
}

impl Patches {
    /// The series for a set of processors: `all`, then each processor's list in target order.
    pub fn series<'a>(&'a self, arches: impl IntoIterator<Item = &'a str>) -> Vec<&'a Sp<String>> {
        let mut out: Vec<&Sp<String>> = self.all.iter().collect();
        for arch in arches {
            if let Some(list) = self.per_arch.get(arch) {
                out.extend(list.iter());
            }
        }
        out
    }

    pub fn every(&self) -> impl Iterator<Item = &Sp<String>> {
        self.all.iter().chain(self.per_arch.values().flatten())
    }
}

pub(super) fn read_patches(
    mut t: TableReader<'_, '_>,
    arches: &ArchTable,
    d: &mut Diagnostics,
) -> Patches {
    let file = t.file().clone();
    let mut patches = Patches {
        all: t.opt_str_list("all", d).unwrap_or_default(),
        ..Patches::default()
    };
    for (k, v) in t.rest() {
        let arch = k.get_ref().to_string();
        if arches.get(&arch).is_none() && arches.already_reported(&arch) {
            continue; // refused in arches.toml, reported there
        }
        if arches.get(&arch).is_none() {
            let hint = did_you_mean(&arch, arches.names().chain(["all"])).unwrap_or_else(|| {
                "keys of [patches] are \"all\" and processor names from recipes/arches.toml".into()
            });
            let msg = if is_arch_name(&arch) || arch.contains(':') {
                format!("unknown GPU target \"{arch}\" in [patches]")
            } else {
                format!("unknown key \"{arch}\" in [patches]")
            };
            d.push(
                Diagnostic::new(msg)
                    .at(&file, k.span(), "not a known processor")
                    .hint(hint),
            );
            continue;
        }
        if let Some(list) = reader::read_str_list(&file, &format!("patches.{arch}"), v, d) {
            patches.per_arch.insert(arch, list);
        }
    }
    for p in patches.every() {
        if p.contains('/') || p.contains('\\') || p.starts_with('.') || p.is_empty() {
            d.push(
                Diagnostic::new(format!(
                    "patch name \"{}\" must be a plain file name",
                    p.value
                ))
                .at(&file, p.span.clone(), "paths are not allowed here")
                .hint("patches live in patches/<release>/<component>/; name the file only"),
            );
        } else if !p.ends_with(".patch") {
            d.push(
                Diagnostic::new(format!("patch \"{}\" does not end in .patch", p.value))
                    .at(&file, p.span.clone(), "not a .patch file")
                    .hint("name patches NNNN-what-it-does.patch"),
            );
        }
    }
    patches
}
