//! `rocforge nix export`: an overlay for nixpkgs' `rocmPackages` carrying our GPU targets and
//! patch series, so Nix users build the same patched components inside the Nix sandbox.
//! overlay.nix's text is the template `templates/overlay.nix.j2`; this module computes the
//! components, their patch files and `[[derive]]` scripts, and writes the files.

use std::fmt::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::arch::TargetId;
use crate::catalog::Catalog;

/// nixpkgs' `rocmPackages` attribute for each catalog component that has one.
pub const ATTRIBUTES: &[(&str, &str)] = &[
    ("hipblas", "hipblas"),
    ("hipblas-common", "hipblas-common"),
    ("hipblaslt", "hipblaslt"),
    ("hipcub", "hipcub"),
    ("hipfft", "hipfft"),
    ("hiprand", "hiprand"),
    ("hipsolver", "hipsolver"),
    ("hipsparse", "hipsparse"),
    ("miopen", "miopen"),
    ("rocblas", "rocblas"),
    ("rocfft", "rocfft"),
    ("rocm-runtime", "rocm-runtime"),
    ("rocprim", "rocprim"),
    ("rocrand", "rocrand"),
    ("rocsolver", "rocsolver"),
    ("rocsparse", "rocsparse"),
    ("rocthrust", "rocthrust"),
    ("tensile", "tensile"),
];

/// A nixpkgs revision and the NAR hash of its source tree (what `builtins.fetchTarball` checks).
#[derive(Debug, Clone, Copy)]
pub struct Pin {
    pub rev: &'static str,
    pub nar_hash: &'static str,
    pub branch: &'static str,
    pub date: &'static str,
    /// Which ROCm its rocmPackages is, and how that is known.
    pub rocm: &'static str,
}

/// The nixpkgs revision the overlay is meant for, when one is known for the release line.
/// None: no revision is known (docs/nix.md says what was found).
pub fn nixpkgs_pin(release: &str) -> Option<Pin> {
    match release {
        // nixos-25.11 carries rocmPackages 6.4.3: 6.3.3 -> 6.4.3 is NixOS/nixpkgs#427944 (2025),
        // 6.4.3 -> 7.0.2 is #469378, opened 2025-12-09, after 25.11 branched, and a stable
        // branch takes no major ROCm bumps. The revision and its NAR hash are those that public
        // flake.lock files record for nixos-25.11; not fetched or built here.
        "rocm-6.4.4" => Some(Pin {
            rev: "8fd9daa3db09ced9700431c5b7ad0e8ba199b575",
            nar_hash: "sha256-Ti+ZBvW6yrWWAg2szExVTwCd4qOJ3KlVr1tFHfyfi8Q=",
            branch: "nixos-25.11",
            date: "2026-05-10",
            rocm: "6.4.3 (inferred from the nixpkgs pull requests; not evaluated here)",
        }),
        _ => None,
    }
}

pub fn attribute(component: &str) -> Option<&'static str> {
    ATTRIBUTES
        .iter()
        .find(|(c, _)| *c == component)
        .map(|(_, a)| *a)
}

#[derive(Debug, thiserror::Error)]
pub enum NixError {
    #[error("cannot write {path}: {source}")]
    Write {
        path: String,
        source: std::io::Error,
    },
    #[error("cannot read patch {patch}: {source}")]
    Patch {
        patch: String,
        source: std::io::Error,
    },
    #[error("cannot render the overlay template: {0}")]
    Template(String),
}

/// What an export wrote and what it left out.
#[derive(Debug, Default)]
pub struct Export {
    pub files: Vec<PathBuf>,
    /// Components overridden in `rocmPackages`.
    pub mapped: Vec<String>,
    /// Components with no `rocmPackages` attribute.
    pub unmapped: Vec<String>,
    /// Components whose derived files (`[[derive]]`) the overlay redoes in `postPatch`.
    pub derived: Vec<String>,
}

/// `nix export --format json`: what an export wrote and what it left out.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct ExportReport {
    /// The directory written.
    pub out: String,
    pub files: Vec<String>,
    /// Components overridden in `rocmPackages`.
    pub components: Vec<String>,
    /// Components with no `rocmPackages` attribute.
    pub not_in_nixpkgs: Vec<String>,
    /// Components whose derived files (`[[derive]]`) the overlay redoes in `postPatch`.
    pub derived_in_post_patch: Vec<String>,
}

impl Export {
    pub fn report(&self, out: &Path) -> ExportReport {
        ExportReport {
            out: out.display().to_string(),
            files: self.files.iter().map(|f| f.display().to_string()).collect(),
            components: self.mapped.clone(),
            not_in_nixpkgs: self.unmapped.clone(),
            derived_in_post_patch: self.derived.clone(),
        }
    }
}

/// A bash script that redoes rocforge's `[[derive]]` steps for `arches` in a nixpkgs
/// `postPatch`: copy `from` to `to`, rename entries (children before parents, as rocforge
/// renames each name on the way down), then replace text in every non-binary file with
/// stdenv's `substituteInPlace --replace-quiet` (literal, in order, like rocforge). Both skip
/// binary files by the same rule: a NUL byte (`LC_ALL=C grep -I`).
pub fn derive_script(
    derives: &[crate::recipe::Derive],
    arches: &[&str],
    table: &crate::arch::ArchTable,
) -> String {
    use crate::process::shell_quote as sh;
    use crate::source::derive::{substitute, vars_for};
    let mut o = String::new();
    for d in derives {
        for arch in arches.iter().filter(|a| d.arches.iter().any(|x| x == *a)) {
            let vars = vars_for(arch, table, d);
            let to = substitute(&d.to, &vars);
            let _ = writeln!(o, "# rocforge [[derive]] for {arch}: {} -> {to}", d.from);
            let _ = writeln!(o, "src={} dst={}", sh(&d.from), sh(&to));
            o += "[ -d \"$src\" ] || { echo \"rocforge overlay: $src is not in the source\" >&2; exit 1; }\n";
            o += "[ ! -e \"$dst\" ] || { echo \"rocforge overlay: $dst already exists: upstream ships it now\" >&2; exit 1; }\n";
            o += "cp -r \"$src\" \"$dst\"\n";
            if !d.rename.is_empty() {
                o += "find \"$dst\" -depth -mindepth 1 -print0 | while IFS= read -r -d '' f; do\n";
                o += "  b=${f##*/}; n=$b\n";
                for (a, b) in &d.rename {
                    let _ = writeln!(o, "  n=${{n//{}/{}}}", sh(a), sh(&substitute(b, &vars)));
                }
                o += "  [ \"$n\" = \"$b\" ] || mv \"$f\" \"${f%/*}/$n\"\n";
                o += "done\n";
            }
            if !d.replace.is_empty() {
                o += "find \"$dst\" -type f -print0 | while IFS= read -r -d '' f; do\n";
                o += "  LC_ALL=C grep -Iq . \"$f\" || continue\n";
                o += "  substituteInPlace \"$f\"";
                for (a, b) in &d.replace {
                    let _ = write!(
                        o,
                        " --replace-quiet {} {}",
                        sh(a),
                        sh(&substitute(b, &vars))
                    );
                }
                o += "\ndone\n";
            }
        }
    }
    o
}

fn nix_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '$' => out.push_str("\\$"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// One `rocmPackages` attribute the overlay overrides.
#[derive(Debug, Serialize)]
struct Overridden<'a> {
    name: &'a str,
    version: &'a str,
    /// The attribute and the `postPatch` addition as Nix strings.
    attr: String,
    derive: String,
    /// Whether rocforge's `[[derive]]` steps are redone in `postPatch`.
    derived: bool,
    /// The patch files, relative to the overlay (`patches/<component>/<file>`).
    patches: Vec<String>,
}

/// What `templates/overlay.nix.j2` is given.
#[derive(Debug, Serialize)]
struct Overlay<'a> {
    release: &'a str,
    /// The ROCm minor version (`6.4`) as text and as a Nix string.
    minor_text: &'a str,
    minor: String,
    /// The GPU targets as Nix strings.
    targets: Vec<String>,
    components: Vec<Overridden<'a>>,
    unmapped: &'a [String],
}

/// overlay.nix from its template. An error is a mistake in `templates/overlay.nix.j2` or in the
/// context built here (caught by the export tests), never something a catalog can cause.
fn render_overlay(o: &Overlay<'_>) -> Result<String, NixError> {
    // Nix text, not HTML: the values that need quoting arrive quoted (nix_string).
    let err = |e: crate::template::RenderError| NixError::Template(e.to_string());
    let env = crate::template::environment(
        &[("overlay.nix", OVERLAY_TEMPLATE)],
        crate::template::Delimiters::Jinja,
    )
    .map_err(err)?;
    crate::template::render(&env, "overlay.nix", o).map_err(err)
}

const OVERLAY_TEMPLATE: &str = include_str!("templates/overlay.nix.j2");

/// Writes `overlay.nix`, `patches/<component>/…`, `default.nix` and `nixpkgs.json` into `out`.
pub fn export(catalog: &Catalog, targets: &[TargetId], out: &Path) -> Result<Export, NixError> {
    let write = |path: PathBuf, bytes: &[u8]| -> Result<PathBuf, NixError> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|source| NixError::Write {
                path: dir.display().to_string(),
                source,
            })?;
        }
        std::fs::write(&path, bytes).map_err(|source| NixError::Write {
            path: path.display().to_string(),
            source,
        })?;
        Ok(path)
    };
    let release = &catalog.release;
    let arches: Vec<&str> = targets.iter().map(|t| t.arch.as_str()).collect();
    let mut ex = Export::default();
    let mut components = Vec::new();
    for (name, recipe) in &catalog.recipes {
        let Some(attr) = attribute(name) else {
            ex.unmapped.push(name.clone());
            continue;
        };
        ex.mapped.push(name.clone());
        let series = recipe.patches.series(arches.iter().copied());
        let recipe_patch_release = recipe.patches.release.as_deref();
        let script = derive_script(&recipe.derive, &arches, &catalog.arches);
        if !script.is_empty() {
            ex.derived.push(name.clone());
        }
        let mut patches = Vec::new();
        for p in series {
            let bytes = catalog
                .root
                .read_patch(
                    recipe_patch_release.unwrap_or(&release.name),
                    name,
                    &p.value,
                )
                .map_err(|source| NixError::Patch {
                    patch: format!("{name}/{}", p.value),
                    source,
                })?;
            let rel = format!("patches/{name}/{}", p.value);
            ex.files.push(write(out.join(&rel), &bytes)?);
            patches.push(rel);
        }
        components.push(Overridden {
            name,
            version: &recipe.version,
            attr: nix_string(attr),
            derived: !script.is_empty(),
            derive: nix_string(&script),
            patches,
        });
    }
    let version = release.name.trim_start_matches("rocm-");
    let minor: String = version.splitn(3, '.').take(2).collect::<Vec<_>>().join(".");
    let o = render_overlay(&Overlay {
        release: &release.name,
        minor_text: &minor,
        minor: nix_string(&minor),
        targets: targets.iter().map(|t| nix_string(&t.to_string())).collect(),
        components,
        unmapped: &ex.unmapped,
    })?;
    ex.files.push(write(out.join("overlay.nix"), o.as_bytes())?);

    let pin = nixpkgs_pin(&release.name);
    let default = format!(
        "# Generated by `rocforge nix export`. nixpkgs with rocforge's overlay; its rocmPackages.\n\
         # nix-build -A rocblas (pass --arg nixpkgs <path or fetchTarball …> for another nixpkgs)\n\
         {{ nixpkgs ? {} }}:\n\
         (import nixpkgs {{ overlays = [ (import ./overlay.nix) ]; }}).rocmPackages\n",
        match pin {
            Some(p) => format!(
                "builtins.fetchTarball {{ url = \"https://github.com/NixOS/nixpkgs/archive/{}.tar.gz\"; sha256 = \"{}\"; }}",
                p.rev, p.nar_hash
            ),
            None => "<nixpkgs>".into(),
        }
    );
    ex.files
        .push(write(out.join("default.nix"), default.as_bytes())?);
    let pin_json = serde_json::json!({
        "release": release.name,
        "rocm": version,
        "rev": pin.map(|p| p.rev),
        "nar-hash": pin.map(|p| p.nar_hash),
        "branch": pin.map(|p| p.branch),
        "date": pin.map(|p| p.date),
        "note": match pin {
            Some(p) => format!(
                "{} of {}: rocmPackages {}, the nearest nixpkgs ROCm to {version}; the overlay's patches have not been applied there yet (docs/nix.md)",
                p.rev, p.branch, p.rocm
            ),
            None => format!(
                "TODO: no nixpkgs revision with rocmPackages {version} verified; rocmPackages went 6.3.3 -> 6.4.3 \
                 in NixOS/nixpkgs#427944. Use a nixpkgs whose rocmPackages is {minor}.x (docs/nix.md)"
            ),
        },
        "targets": targets.iter().map(|t| t.to_string()).collect::<Vec<_>>(),
        "components": ex.mapped,
        "not-in-nixpkgs": ex.unmapped,
        "derived-in-postPatch": ex.derived,
    });
    let text = serde_json::to_string_pretty(&pin_json).expect("plain data") + "\n";
    ex.files
        .push(write(out.join("nixpkgs.json"), text.as_bytes())?);
    Ok(ex)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nix_strings_are_escaped() {
        assert_eq!(nix_string("a\"b${c}\\"), "\"a\\\"b\\${c}\\\\\"");
    }

    #[test]
    fn every_shipped_component_is_mapped_or_known_unmapped() {
        let c = Catalog::load(crate::catalog::CatalogRoot::Embedded, None).unwrap();
        for name in c.recipes.keys() {
            // No rocmPackages attribute: rocm-examples has none in nixpkgs, nor has rocm-smoke
            // (this project's own program); roctx is host code that rocmPackages.roctracer
            // carries unchanged, nothing for a GPU target to override; torch and torchvision
            // are python3Packages.{torch,torchvision} with rocmSupport, outside the
            // rocmPackages scope this overlay overrides (docs/nix.md).
            assert!(
                attribute(name).is_some()
                    || [
                        "rocm-examples",
                        "rocm-smoke",
                        "roctx",
                        "torch",
                        "torchvision"
                    ]
                    .contains(&name.as_str()),
                "{name} has no rocmPackages mapping"
            );
        }
    }
}
