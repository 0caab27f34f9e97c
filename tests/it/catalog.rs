//! The shipped catalog itself: it checks clean, its patch files and recipe references agree,
//! every patch parses as a unified diff, and patches/<release>/VERIFIED.toml records every patch
//! with exactly the files it touches. None of this needs the upstream sources, so CI runs it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use rocforge::source::patch::{ChangeKind, PatchFile, validate};

fn manifest() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn rocforge(args: &[&str]) -> (i32, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_rocforge"))
        .current_dir(manifest())
        .args(args)
        .env("NO_COLOR", "1")
        .env_remove("ROCFORGE_RECIPES")
        .env_remove("ROCFORGE_RELEASE")
        .env("ROCFORGE_STORE", dir.path().join("no-store"))
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The stdout of a `rocforge` run over the shipped catalog that must succeed.
fn rocforge_ok(args: &[&str]) -> String {
    let (code, stdout, stderr) = rocforge(args);
    assert_eq!(code, 0, "{stderr}");
    stdout
}

/// Release directories of the shipped catalog (those holding a release.toml).
fn releases() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(manifest().join("recipes"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("release.toml").is_file())
        .collect();
    out.sort();
    assert!(!out.is_empty(), "no release lines under recipes/");
    out
}

fn read_toml(path: &Path) -> toml::Table {
    let text = std::fs::read_to_string(path).unwrap();
    text.parse::<toml::Table>()
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every patch a recipe names, as a path relative to the repository root
/// (patches/<release>/<component>/<file>).
fn referenced_patches() -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for rel in releases() {
        let release = rel.file_name().unwrap().to_string_lossy().into_owned();
        for e in std::fs::read_dir(&rel).unwrap() {
            let path = e.unwrap().path();
            if path.extension().is_none_or(|x| x != "toml")
                || path.file_name().unwrap() == "release.toml"
            {
                continue;
            }
            let t = read_toml(&path);
            // An override in a line with a base is named by its file.
            let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
            let name = t
                .get("name")
                .and_then(|n| n.as_str())
                .map_or(stem, str::to_string);
            let Some(patches) = t.get("patches").and_then(|p| p.as_table()) else {
                continue;
            };
            for (_key, list) in patches {
                for p in list.as_array().unwrap() {
                    out.insert(format!("patches/{release}/{name}/{}", p.as_str().unwrap()));
                }
            }
        }
    }
    out
}

/// Every *.patch file under patches/, relative to the repository root.
fn patch_files() -> BTreeSet<String> {
    fn walk(dir: &Path, root: &Path, out: &mut BTreeSet<String>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, root, out);
            } else if p.extension().is_some_and(|x| x == "patch") {
                out.insert(p.strip_prefix(root).unwrap().to_string_lossy().into_owned());
            }
        }
    }
    let mut out = BTreeSet::new();
    walk(&manifest().join("patches"), &manifest(), &mut out);
    out
}

#[test]
fn shipped_catalog_checks_clean() {
    let (code, stdout, stderr) = rocforge(&["check"]);
    assert_eq!(code, 0, "rocforge check failed:\n{stdout}\n{stderr}");
}

#[test]
fn every_patch_is_referenced_and_every_reference_exists() {
    let files = patch_files();
    let referenced = referenced_patches();
    let unreferenced: Vec<_> = files.difference(&referenced).collect();
    let missing: Vec<_> = referenced.difference(&files).collect();
    assert!(
        unreferenced.is_empty(),
        "patch files no recipe names: {unreferenced:?}"
    );
    assert!(
        missing.is_empty(),
        "recipes name patches that do not exist: {missing:?}"
    );
    assert!(!files.is_empty(), "the shipped catalog has patches");
}

/// The files each patch touches, as validate() reports them.
fn touched(rel: &str) -> BTreeSet<String> {
    touched_with_kind(rel).into_keys().collect()
}

/// The files a patch touches, each with whether the patch adds it (a file it adds has no blob
/// in the tree the patch applies to).
fn touched_with_kind(rel: &str) -> BTreeMap<String, bool> {
    let bytes = std::fs::read(manifest().join(rel)).unwrap();
    let summary = validate(&PatchFile::new(rel, bytes))
        .unwrap_or_else(|e| panic!("{rel} is not a valid unified diff: {e}"));
    assert!(summary.hunks > 0, "{rel} has no hunks");
    assert!(
        !summary.subject.trim().is_empty(),
        "{rel} starts without a header line saying what it does"
    );
    summary
        .files
        .into_iter()
        .map(|f| (f.path, f.kind == ChangeKind::Added))
        .collect()
}

#[test]
fn every_patch_parses_as_a_unified_diff_with_a_header() {
    for rel in patch_files() {
        let files = touched(&rel);
        assert!(!files.is_empty(), "{rel} touches no file");
        let text = std::fs::read_to_string(manifest().join(&rel)).unwrap();
        assert!(
            text.contains("Checked against"),
            "{rel}: the header must name the upstream revision it was checked against"
        );
    }
}

fn is_hex(s: &str, n: usize) -> bool {
    s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A VERIFIED.toml record names what the patch was checked against in one of two ways:
/// - an upstream git repository: `repo` (https), `rev` (a full commit id) and `ref` (whether rev
///   is the tag or the nearest branch); each file's `blob` is `git rev-parse REV:path`;
/// - a release tarball that no reachable git serves (a distribution's orig tarball): `source =
///   { url, sha256 }`, which must be the component's own `[source]` in the release's recipe, and
///   `after`, what is applied before the patch (the recipe's `[[series]]`, named by their
///   archive's file name, and the earlier patches of ours); each file's `blob` is
///   `git hash-object` of the file in that tree.
///
/// Either way a file the patch adds is listed with `added = true` and no blob (it is in no tree
/// before the patch), and every other file with its blob.
#[test]
fn verified_records_list_every_patch_and_every_file_it_touches() {
    let all = patch_files();
    let mut recorded_patches = BTreeSet::new();
    for rel in releases() {
        let release = rel.file_name().unwrap().to_string_lossy().into_owned();
        let dir = manifest().join("patches").join(&release);
        let has_patches = all
            .iter()
            .any(|p| p.starts_with(&format!("patches/{release}/")));
        let record = dir.join("VERIFIED.toml");
        if !has_patches {
            continue;
        }
        assert!(record.is_file(), "{} is missing", record.display());
        let t = read_toml(&record);
        for entry in t["patch"].as_array().expect("[[patch]] entries") {
            let e = entry.as_table().unwrap();
            let file = e["file"].as_str().unwrap();
            let path = format!("patches/{release}/{file}");
            assert!(
                all.contains(&path),
                "VERIFIED.toml lists {path}, which does not exist"
            );
            assert!(
                recorded_patches.insert(path.clone()),
                "{path} is listed twice in VERIFIED.toml"
            );
            match (e.get("repo"), e.get("source")) {
                (Some(_), None) => check_git_record(&path, e),
                (None, Some(_)) => check_tarball_record(&path, &rel, file, e),
                _ => panic!("{path}: name either repo (with rev and ref) or source (with after)"),
            }
            let mut recorded: BTreeMap<String, bool> = BTreeMap::new();
            for f in e["files"].as_array().unwrap() {
                let f = f.as_table().unwrap();
                let p = f["path"].as_str().unwrap().to_string();
                let added = match (f.get("blob"), f.get("added")) {
                    (Some(blob), None) => {
                        let blob = blob.as_str().unwrap();
                        assert!(
                            is_hex(blob, 40),
                            "{path}: blob of {p} is not a git object id"
                        );
                        false
                    }
                    (None, Some(added)) => {
                        assert_eq!(
                            added.as_bool(),
                            Some(true),
                            "{path}: {p} has no blob, so it must be added = true"
                        );
                        true
                    }
                    _ => panic!("{path}: {p} needs either a blob or added = true"),
                };
                assert!(
                    recorded.insert(p.clone(), added).is_none(),
                    "{path}: {p} listed twice"
                );
            }
            assert_eq!(
                recorded.keys().collect::<BTreeSet<_>>(),
                touched(&path).iter().collect::<BTreeSet<_>>(),
                "{path}: VERIFIED.toml must list exactly the files the patch touches"
            );
            assert_eq!(
                recorded,
                touched_with_kind(&path),
                "{path}: exactly the files the patch adds are added = true"
            );
        }
    }
    let unrecorded: Vec<_> = all.difference(&recorded_patches).collect();
    assert!(
        unrecorded.is_empty(),
        "patches without a VERIFIED.toml record: {unrecorded:?}"
    );
}

fn check_git_record(path: &str, e: &toml::Table) {
    assert!(
        e["repo"].as_str().unwrap().starts_with("https://"),
        "{path}: repo must be the upstream URL"
    );
    let rev = e["rev"].as_str().unwrap();
    assert!(
        is_hex(rev, 40),
        "{path}: rev {rev:?} is not a full commit id"
    );
    assert!(
        !e["ref"].as_str().unwrap().trim().is_empty(),
        "{path}: say whether rev is the tag or the nearest branch"
    );
    assert!(
        e.get("after").is_none(),
        "{path}: `after` belongs to a tarball record; a git record's ref says the order"
    );
}

/// `file` is `<component>/<patch>`: the record's tarball must be that component's `[source]` in
/// the release's recipe, and `after` must name each `[[series]]` archive the recipe applies first.
fn check_tarball_record(path: &str, release_dir: &Path, file: &str, e: &toml::Table) {
    let source = e["source"]
        .as_table()
        .unwrap_or_else(|| panic!("{path}: source = {{ url, sha256 }}"));
    let url = source["url"].as_str().unwrap();
    let sha256 = source["sha256"].as_str().unwrap();
    assert!(
        url.starts_with("https://") || url.starts_with("http://"),
        "{path}: source url {url:?} must be the tarball's URL"
    );
    assert!(
        is_hex(sha256, 64) && sha256.bytes().all(|b| !b.is_ascii_uppercase()),
        "{path}: source sha256 {sha256:?} is not 64 lowercase hex digits"
    );
    assert_eq!(source.len(), 2, "{path}: source holds url and sha256 only");
    for key in ["rev", "ref"] {
        assert!(
            e.get(key).is_none(),
            "{path}: `{key}` belongs to a git record"
        );
    }
    let after = e["after"]
        .as_str()
        .unwrap_or_else(|| panic!("{path}: say in `after` what is applied before the patch"));
    assert!(
        !after.trim().is_empty(),
        "{path}: say in `after` what is applied before the patch"
    );
    let component = file.split('/').next().unwrap();
    let recipe = read_toml(&release_dir.join(format!("{component}.toml")));
    let src = recipe["source"].as_table().unwrap();
    assert_eq!(
        (
            src.get("url").and_then(|v| v.as_str()),
            src.get("sha256").and_then(|v| v.as_str())
        ),
        (Some(url), Some(sha256)),
        "{path}: the record's tarball is not {component}'s [source]"
    );
    for series in recipe
        .get("series")
        .and_then(|s| s.as_array())
        .into_iter()
        .flatten()
    {
        let archive = series["url"].as_str().unwrap().rsplit('/').next().unwrap();
        assert!(
            after.contains(archive),
            "{path}: `after` must name the series {archive} that the recipe applies first"
        );
    }
}

#[test]
fn plan_rocsolver_for_both_igpus_json() {
    let stdout = rocforge_ok(&[
        "--release",
        "rocm-6.4.4",
        "plan",
        "rocsolver",
        "--arch",
        "gfx90c,gfx902",
        "--format",
        "json",
    ]);
    insta::assert_snapshot!(stdout);
}

/// The `pytorch` bundle for gfx90c: the whole dependency graph (torch needs most of the math
/// stack, MIOpen and hipBLASLt), each step's content key, and the GPU flags: PYTORCH_ROCM_ARCH
/// in the environment of the two wheel builds.
#[test]
fn plan_pytorch_for_gfx90c_json() {
    let stdout = rocforge_ok(&[
        "--release",
        "rocm-6.4.4",
        "plan",
        "pytorch",
        "--arch",
        "gfx90c",
        "--format",
        "json",
    ]);
    insta::assert_snapshot!(stdout);
}

/// rocBLAS of the rocm-7.14.0 preview line (monorepo source: projects/rocblas plus shared/tensile)
/// for both iGPUs: one step (Tensile is built inside rocBLAS), its content key (which covers
/// gfx902's patch series) and the GPU flags. A preview line is reached only with `--release`.
#[test]
fn plan_rocblas_7_14_for_both_igpus_json() {
    let stdout = rocforge_ok(&[
        "plan",
        "rocblas",
        "--release",
        "rocm-7.14.0",
        "--arch",
        "gfx90c,gfx902",
        "--format",
        "json",
    ]);
    insta::assert_snapshot!(stdout);
}

/// A preview line is never the default: without `--release` the line that has been built and
/// recorded is used (debian-6.4), not rocm-6.4.4, which it is based on and which was never built.
#[test]
fn the_default_release_line_is_not_a_preview() {
    let stdout = rocforge_ok(&["plan", "rocblas", "--arch", "gfx90c"]);
    let first = stdout.lines().next().unwrap_or_default();
    assert!(first.contains("(release debian-6.4,"), "{first}");
}

/// What the default line's release.toml records as built is what docs/catalog.md's record of
/// that line says was built: each `built` component has a row in its Status table that does
/// not begin "not built". The record is the evidence the policy rests on.
#[test]
fn the_default_lines_built_components_are_in_its_record() {
    let release =
        std::fs::read_to_string(manifest().join("recipes/debian-6.4/release.toml")).unwrap();
    let table: toml::Table = release.parse().unwrap();
    let built: Vec<&str> = table["built"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(built.len(), 20, "{built:?}");
    let catalog = std::fs::read_to_string(manifest().join("docs/catalog.md")).unwrap();
    let section = &catalog[catalog
        .find("\n# debian-6.4")
        .expect("a debian-6.4 section")..];
    let status = &section[section.find("\n## Status").expect("its Status")..];
    for c in built {
        let recorded = status.lines().any(|l| {
            let mut cells = l.split('|').map(str::trim).skip(1);
            let (Some(name), Some(state)) = (cells.next(), cells.next()) else {
                return false;
            };
            (name == c || name.starts_with(&format!("{c},")))
                && !state.starts_with("not")
                && !state.is_empty()
        });
        assert!(
            recorded,
            "{c}: no row of docs/catalog.md's debian-6.4 Status says it was built"
        );
    }
}
