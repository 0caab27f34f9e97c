//! The Nix path: every .nix file parses, and the exported overlay evaluates against a small
//! `rocmPackages` the test provides (Debian's nix-bin evaluates without a daemon).

use crate::common;

use std::path::Path;
use std::process::Command;

use common::{manifest, ok, require};

fn nix_instantiate(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new("nix-instantiate")
        .current_dir(dir)
        .args(args)
        // No build users exist on these machines; evaluation needs none.
        .env("NIX_CONFIG", "build-users-group =")
        .env("HOME", dir)
        .output()
        .expect("run nix-instantiate")
}

fn have_nix() -> bool {
    require(
        "nix-instantiate (Debian nix-bin)",
        Command::new("nix-instantiate")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success()),
    )
}

fn nix_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if p.is_dir() {
            if !matches!(name.as_str(), "target" | ".git" | "node_modules") {
                nix_files(&p, out);
            }
        } else if name.ends_with(".nix") {
            out.push(p);
        }
    }
}

#[test]
fn every_nix_file_parses() {
    if !have_nix() {
        return;
    }
    let mut files = Vec::new();
    nix_files(&manifest(), &mut files);
    assert!(
        files.iter().any(|f| f.ends_with("nix/flake.nix")),
        "{files:?}"
    );
    for f in files {
        let o = nix_instantiate(&manifest(), &["--parse", f.to_str().unwrap()]);
        assert!(
            o.status.success(),
            "{}: {}",
            f.display(),
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

/// A stand-in for nixpkgs' rocmPackages: packages whose `override` carries the function's
/// arguments as nixpkgs' does (`__functionArgs`), `overrideAttrs` taking `old: { … }`, and a
/// scope with `overrideScope`.
const FAKE_PKGS: &str = r#"
let
  mkPkg = name: args: attrs:
    let
      self = {
        pname = name;
        version = attrs.version or "6.4.3";
        patches = attrs.patches or [ ];
        postPatch = attrs.postPatch or "";
        gpuTargets = args.gpuTargets or [ "default" ];
        override = {
          __functionArgs = if attrs.takesTargets or true then { gpuTargets = true; } else { };
          __functor = _: newArgs: mkPkg name (args // newArgs) attrs;
        };
        overrideAttrs = f: mkPkg name args (attrs // f self);
      };
    in
    self;
  base = {
    rocblas = mkPkg "rocblas" { } { patches = [ ./upstream.patch ]; };
    rocsparse = mkPkg "rocsparse" { } { };
    rocprim = mkPkg "rocprim" { } { version = "6.3.3"; };
    tensile = mkPkg "tensile" { } { takesTargets = false; };
    clr = mkPkg "clr" { } { };
  };
  scope = pkgs: pkgs // {
    overrideScope = f: let next = pkgs // f next pkgs; in scope next;
  };
  prev = { rocmPackages = scope base; };
  result = prev // (import ./export/overlay.nix) result prev;
  r = result.rocmPackages;
  show = p: {
    inherit (p) version gpuTargets postPatch;
    patches = map (x: baseNameOf (toString x)) p.patches;
    patchesExist = builtins.all builtins.pathExists p.patches;
  };
in
{
  rocblas = show r.rocblas;
  rocsparse = show r.rocsparse;
  rocprim = show r.rocprim;
  tensile = show r.tensile;
  clr = show r.clr;
  attributes = builtins.attrNames (removeAttrs r [ "overrideScope" ]);
}
"#;

#[test]
fn exported_overlay_evaluates_against_a_rocm_package_set() {
    if !have_nix() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = ok(
        dir.path(),
        &[
            "--release",
            "rocm-6.4.4",
            "nix",
            "export",
            "--arch",
            "gfx90c",
            "--out",
            "export",
        ],
    );
    assert!(out.contains("rocmPackages overridden"), "{out}");
    assert!(
        out.contains("not in nixpkgs' rocmPackages: rocm-examples"),
        "{out}"
    );
    let pin: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("export/nixpkgs.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(pin["release"], "rocm-6.4.4");
    assert_eq!(pin["rev"], "8fd9daa3db09ced9700431c5b7ad0e8ba199b575");
    assert_eq!(pin["branch"], "nixos-25.11");
    let default = std::fs::read_to_string(dir.path().join("export/default.nix")).unwrap();
    assert!(
        default.contains(
            "archive/8fd9daa3db09ced9700431c5b7ad0e8ba199b575.tar.gz\"; sha256 = \"sha256-"
        ),
        "{default}"
    );
    std::fs::write(dir.path().join("upstream.patch"), "").unwrap();
    std::fs::write(dir.path().join("test.nix"), FAKE_PKGS).unwrap();
    for f in ["export/overlay.nix", "export/default.nix", "test.nix"] {
        let o = nix_instantiate(dir.path(), &["--parse", f]);
        assert!(
            o.status.success(),
            "{f}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let o = nix_instantiate(dir.path(), &["--eval", "--strict", "--json", "test.nix"]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    // rocBLAS: retargeted, upstream's patches kept and ours appended, files present.
    assert_eq!(v["rocblas"]["gpuTargets"], serde_json::json!(["gfx90c"]));
    assert_eq!(
        v["rocblas"]["patches"],
        serde_json::json!([
            "upstream.patch",
            "0001-gfx902-gfx90c-device-arch-and-lazy-loading.patch"
        ])
    );
    assert_eq!(v["rocblas"]["patchesExist"], true);
    // No patches of ours: retargeted only.
    assert_eq!(v["rocsparse"]["gpuTargets"], serde_json::json!(["gfx90c"]));
    assert_eq!(v["rocsparse"]["patches"], serde_json::json!([]));
    // Tensile's function takes no gpuTargets: not retargeted, still patched.
    assert_eq!(v["tensile"]["gpuTargets"], serde_json::json!(["default"]));
    assert_eq!(v["tensile"]["patches"].as_array().unwrap().len(), 2);
    assert_eq!(v["tensile"]["patchesExist"], true);
    // What the catalog does not map is left alone; nothing the set lacks is added.
    assert_eq!(v["clr"]["gpuTargets"], serde_json::json!(["default"]));
    assert_eq!(
        v["attributes"],
        serde_json::json!(["clr", "rocblas", "rocprim", "rocsparse", "tensile"])
    );
    // rocprim 6.3.3 in a 6.4 overlay: retargeted, and no warning since it has no patches.
    assert_eq!(v["rocprim"]["gpuTargets"], serde_json::json!(["gfx90c"]));
    assert!(!stderr.contains("rocforge overlay: rocblas"), "{stderr}");
    assert_eq!(
        v["rocsparse"]["postPatch"], "",
        "no [[derive]], no postPatch"
    );

    // rocBLAS's derived Tensile logic: the postPatch the overlay adds, run by bash in a tree,
    // gives exactly what rocforge's own [[derive]] step gives for the same tree.
    let script = v["rocblas"]["postPatch"].as_str().unwrap();
    assert!(script.contains("asm_full/renoir"), "{script}");
    let logic = "library/src/blas3/Tensile/Logic/asm_full/vega10";
    let nix_tree = dir.path().join("by-postpatch");
    let rf_tree = dir.path().join("by-rocforge");
    for t in [&nix_tree, &rf_tree] {
        std::fs::create_dir_all(t.join(logic).join("sub")).unwrap();
        std::fs::write(
            t.join(logic).join("vega10_Cijk_Ailk_Bljk_SB.yaml"),
            "- {MinimumRequiredVersion: 4.33.0}\n- vega10\n- gfx900\n- [Device 6863]\n- ISA: [9, 0, 0]\n",
        )
        .unwrap();
        std::fs::write(
            t.join(logic).join("sub/vega10_notes.txt"),
            "vega10 [9, 0, 0]\n",
        )
        .unwrap();
        // Binary files are copied untouched by both; text in another encoding is rewritten.
        std::fs::write(t.join(logic).join("vega10_kernels.bin"), b"vega10\0gfx900").unwrap();
        std::fs::write(
            t.join(logic).join("latin1.txt"),
            b"vega10 \xe9t\xe9 gfx900\n",
        )
        .unwrap();
    }
    // nixpkgs' substituteInPlace --replace-quiet: literal replacement, in order.
    let stdenv = r#"substituteInPlace() {
  local f=$1; shift; local c; c=$(cat "$f"; printf x); c=${c%x}
  while [ $# -gt 0 ]; do
    case $1 in --replace-quiet) c=${c//"$2"/"$3"}; shift 3 ;; *) echo "unknown $1" >&2; return 1 ;; esac
  done
  printf '%s' "$c" > "$f"
}
set -euo pipefail
"#;
    let run_post_patch = || {
        Command::new("bash")
            .arg("-c")
            .arg(format!("{stdenv}{script}"))
            .current_dir(&nix_tree)
            .output()
            .unwrap()
    };
    let o = run_post_patch();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let catalog = rocforge::catalog::Catalog::load(
        rocforge::catalog::CatalogRoot::Embedded,
        Some("rocm-6.4.4"),
    )
    .unwrap();
    let rocblas = catalog.get("rocblas").unwrap();
    rocforge::source::derive::apply(
        "rocblas",
        &rf_tree,
        &rocblas.derive,
        &["gfx90c"],
        &catalog.arches,
    )
    .unwrap();
    let (a, b) = (
        common::tree_contents(&nix_tree),
        common::tree_contents(&rf_tree),
    );
    assert_eq!(a, b, "postPatch and rocforge's derive differ");
    assert!(
        a.iter().any(|(p, c)| p.ends_with("renoir/latin1.txt")
            && c.as_slice() == b"renoir \xe9t\xe9 gfx90c\n")
    );
    assert!(a.iter().any(
        |(p, c)| p.ends_with("renoir/renoir_kernels.bin") && c.as_slice() == b"vega10\0gfx900"
    ));
    assert!(
        a.iter()
            .any(|(p, c)| p.ends_with("asm_full/renoir/renoir_Cijk_Ailk_Bljk_SB.yaml")
                && c.as_slice() == b"- {MinimumRequiredVersion: 4.33.0}\n- renoir\n- gfx90c\n- [Device 6863]\n- ISA: [9, 0, 12]\n"),
        "{:?}",
        a.iter().map(|(p, _)| p).collect::<Vec<_>>()
    );
    // Run again: the target exists, so the script stops instead of deriving twice.
    let o = run_post_patch();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("already exists: upstream ships it now"));
}
