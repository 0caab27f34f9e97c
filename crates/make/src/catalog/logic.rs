//! Tensile logic for each targeted processor: where it comes from (upstream, derived from
//! another processor's, or a user's tuned overlay) and whether an overlay is logic Tensile will
//! pick for the processor it replaces.
//!
//! A recipe's `[[derive]]` names, per processor, the directory its logic lives in
//! (`asm_full/{codename}`). An `--overlay` onto one of those directories is that processor's
//! logic: it must be for a processor being built, and every file must be one Tensile selects for
//! it. Tensile picks logic files by the codename in their name and writes kernels for the
//! architecture the file names on its third line; a file for another processor under the
//! codename would be built silently as that processor's code. Both are checked here, before a
//! build that takes hours.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::arch::ArchTable;
use crate::catalog::Overlay;
use crate::recipe::Recipe;
use crate::recipe::derive_vars::{substitute, vars_for};

/// Where a build records, inside the install tree, each target's logic source:
/// `share/rocforge/<component>/tensile-logic.json`.
pub const PROVENANCE_DIR: &str = "share/rocforge";
pub const PROVENANCE_FILE: &str = "tensile-logic.json";

/// Where one processor's Tensile logic comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum LogicSource {
    /// The source tree carries it.
    Upstream,
    /// Copied from another processor's logic and rewritten (`[[derive]]`).
    Derived { from: String, to: String },
    /// A user's directory (`--overlay`), by content digest.
    Overlay { to: String, sha256: String },
}

#[derive(Debug, thiserror::Error)]
pub enum LogicError {
    #[error(
        "overlay {dest} of {component} is {arch}'s Tensile logic, but {arch} is not being built (targets: {targets})"
    )]
    NotRequested {
        component: String,
        dest: String,
        arch: String,
        targets: String,
    },
    #[error("overlay {dir} for {arch}: no Tensile logic file (*.yaml) in it")]
    Empty { dir: String, arch: String },
    #[error(
        "{file}: Tensile picks logic for {arch} by \"{codename}\" in the file name, and this name lacks it"
    )]
    Name {
        file: String,
        arch: String,
        codename: String,
    },
    #[error("{file}:{line}: logic for {named}, in the overlay for {arch}")]
    Architecture {
        file: String,
        line: usize,
        named: String,
        arch: String,
    },
    #[error(
        "{file}: no architecture line (\"- gfx…\") among its first lines: not a Tensile logic file"
    )]
    NotLogic { file: String },
    #[error("cannot read {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
}

impl crate::diag::Hint for LogicError {
    fn hint(&self) -> String {
        match self {
            LogicError::NotRequested { arch, .. } => format!(
                "add {arch} to --arch, or drop the overlay"
            ),
            LogicError::Empty { .. } | LogicError::NotLogic { .. } => {
                "give the directory of Tensile logic YAML files (Tensile's own tuning writes them as <codename>_<problem>.yaml)".into()
            }
            LogicError::Name { codename, .. } => {
                format!("rename the file so that it starts with {codename}_, as Tensile's own are")
            }
            LogicError::Architecture { arch, .. } => format!(
                "this overlay replaces {arch}'s logic: use logic tuned for {arch}, or put this file where its own processor's logic lives"
            ),
            LogicError::Io { .. } => "check the directory's permissions".into(),
        }
    }
}

/// The directory `[[derive]]` gives `arch`'s logic in, and its codename (what Tensile looks
/// for in file names), for every processor a derivation of `recipe` covers.
fn logic_dirs(recipe: &Recipe, table: &ArchTable) -> Vec<(String, String, String, String)> {
    let mut out = Vec::new();
    for d in &recipe.derive {
        for arch in &d.arches {
            let vars = vars_for(arch, table, d);
            let codename = vars
                .get("codename")
                .cloned()
                .unwrap_or_else(|| arch.clone());
            out.push((
                arch.clone(),
                substitute(&d.to, &vars),
                d.from.clone(),
                codename,
            ));
        }
    }
    out
}

fn same_path(a: &str, b: &str) -> bool {
    a.trim_matches('/') == b.trim_matches('/')
}

/// Per targeted processor, where its logic comes from; empty for a recipe without
/// derivations (nothing to say: not a Tensile logic consumer).
pub fn sources(
    recipe: &Recipe,
    arches: &[&str],
    table: &ArchTable,
    overlays: &[&Overlay],
) -> BTreeMap<String, LogicSource> {
    let dirs = logic_dirs(recipe, table);
    if dirs.is_empty() {
        return BTreeMap::new();
    }
    arches
        .iter()
        .map(|arch| {
            let mine = dirs.iter().find(|(a, ..)| a == arch);
            let source = match mine {
                None => LogicSource::Upstream,
                Some((_, to, from, _)) => match overlays
                    .iter()
                    .find(|o| o.component == recipe.name.value && same_path(&o.dest, to))
                {
                    Some(o) => LogicSource::Overlay {
                        to: to.clone(),
                        sha256: o.sha256.clone(),
                    },
                    None => LogicSource::Derived {
                        from: from.clone(),
                        to: to.clone(),
                    },
                },
            };
            (arch.to_string(), source)
        })
        .collect()
}

/// Checks every overlay of `recipe` that replaces a processor's logic directory.
pub fn check_overlays(
    recipe: &Recipe,
    arches: &[&str],
    table: &ArchTable,
    overlays: &[&Overlay],
) -> Result<(), LogicError> {
    let dirs = logic_dirs(recipe, table);
    for o in overlays.iter().filter(|o| o.component == recipe.name.value) {
        let Some((arch, _, _, codename)) = dirs.iter().find(|(_, to, ..)| same_path(&o.dest, to))
        else {
            continue;
        };
        if !arches.contains(&arch.as_str()) {
            return Err(LogicError::NotRequested {
                component: o.component.to_string(),
                dest: o.dest.clone(),
                arch: arch.clone(),
                targets: arches.join(","),
            });
        }
        check_dir(&o.dir, arch, codename)?;
    }
    Ok(())
}

fn check_dir(dir: &Path, arch: &str, codename: &str) -> Result<(), LogicError> {
    let io = |p: &Path| {
        let path = p.display().to_string();
        move |source| LogicError::Io { path, source }
    };
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .map_err(io(dir))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(LogicError::Empty {
            dir: dir.display().to_string(),
            arch: arch.into(),
        });
    }
    for f in &files {
        let name = f.file_name().map(|n| n.to_string_lossy().into_owned());
        let file = f.display().to_string();
        if !name.as_deref().is_some_and(|n| n.contains(codename)) {
            return Err(LogicError::Name {
                file,
                arch: arch.into(),
                codename: codename.into(),
            });
        }
        let text = read_head(f).map_err(io(f))?;
        match named_architecture(&text) {
            Some((line, named)) if named != arch => {
                return Err(LogicError::Architecture {
                    file,
                    line,
                    named,
                    arch: arch.into(),
                });
            }
            Some(_) => {}
            None => return Err(LogicError::NotLogic { file }),
        }
    }
    Ok(())
}

/// The first 64 KiB: the header of a logic file is its first few lines, and the rest can be
/// hundreds of megabytes.
fn read_head(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    let mut buf = Vec::new();
    std::fs::File::open(path)?
        .take(64 << 10)
        .read_to_end(&mut buf)?;
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// The architecture a logic file names: its first top-level list item that is a processor
/// (`- gfx900`), or an `Architecture: gfx900` field among its first lines; (line, name).
fn named_architecture(text: &str) -> Option<(usize, String)> {
    for (i, line) in text.lines().take(12).enumerate() {
        let value = line
            .strip_prefix("- ")
            .map(str::trim)
            .filter(|v| v.starts_with("gfx"))
            .or_else(|| {
                let at = line.find("Architecture:")?;
                Some(line[at + "Architecture:".len()..].trim_start())
            });
        if let Some(v) = value {
            let name: String = v
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric())
                .collect();
            if name.starts_with("gfx") {
                return Some((i + 1, name));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_architecture_line_is_read_in_both_forms() {
        let v = "- {MinimumRequiredVersion: 4.26.0}\n- vega10\n- gfx900\n- [Device 6863]\n";
        assert_eq!(named_architecture(v), Some((3, "gfx900".into())));
        let v = "- {MinimumRequiredVersion: 4.33.0}\n- aquavanjaram\n- {Architecture: gfx942, CUCount: 304}\n";
        assert_eq!(named_architecture(v), Some((3, "gfx942".into())));
        assert_eq!(named_architecture("key: value\n"), None);
    }
}
