//! The real binary against the shipped catalog and test catalogs: what users read is
//! snapshot-tested, and plan behaviour (keys, order, status) is asserted.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use crate::common::World;

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

fn rocforge(dir: &Path, args: &[&str]) -> Out {
    let out = Command::new(env!("CARGO_BIN_EXE_rocforge"))
        .current_dir(dir)
        .args(args)
        .env("NO_COLOR", "1")
        .env_remove("ROCFORGE_RECIPES")
        .env_remove("ROCFORGE_RELEASE")
        .env("ROCFORGE_STORE", dir.join("no-store"))
        .output()
        .unwrap();
    Out {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn ok(dir: &Path, args: &[&str]) -> String {
    let o = rocforge(dir, args);
    assert_eq!(o.code, 0, "rocforge {args:?} failed:\n{}", o.stderr);
    o.stdout
}

fn manifest() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A copy of tests/fixtures/base in a world, with a second component depending on the first,
/// so plans have a graph; commands get `--recipes recipes`.
fn fixture() -> World {
    let w = World::new()
        .catalog("base")
        .args(&["--recipes", "recipes"])
        .build();
    w.write(
        "recipes/line-1.0/hip-app.toml",
        r#"name = "hip-app"
version = "2.0.0"
summary = "links hip-core"
license = "MIT"
depends = ["hip-core"]

[source]
git = "https://example.invalid/hip-app.git"
rev = "0123456789abcdef0123456789abcdef01234567"

[build]
system = "cmake"
arch-vars = ["AMDGPU_TARGETS", "GPU_TARGETS"]
args = ["-DBUILD_CLIENTS_TESTS=ON"]

[build.arch-args]
gfx902 = ["-DRAVEN_WORKAROUND=ON"]

[resources]
disk = "20GiB"
memory = "3GiB"
hours = 2
"#,
    );
    w
}

#[test]
fn shipped_catalog_checks_clean() {
    let o = ok(&manifest(), &["check"]);
    insta::assert_snapshot!(o);
}

#[test]
fn list_shows_the_shipped_components() {
    insta::assert_snapshot!(ok(&manifest(), &["list"]));
    let json: Value =
        serde_json::from_str(&ok(&manifest(), &["list", "--format", "json"])).unwrap();
    let names: Vec<&str> = json["components"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    for c in ["rocprim", "rocsparse", "tensile", "rocblas", "rocsolver"] {
        assert!(names.contains(&c), "{c} missing from {names:?}");
    }
    // The bundles a hint may name are listed, with their members, and build takes one.
    let bundles = json["bundles"].as_array().unwrap();
    let math = bundles
        .iter()
        .find(|b| b["name"] == "rocm-math" && b["release"] == "debian-6.4")
        .unwrap_or_else(|| panic!("{bundles:?}"));
    assert!(
        math["components"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c == "rocblas")
    );
    let plan = ok(&manifest(), &["plan", "rocm-math", "--arch", "gfx90c"]);
    assert!(plan.contains("rocblas"), "{plan}");
}

/// `list` marks the default line and the previews, says what "preview" means, and shows which
/// components have been built: recorded in the line's release.toml, and in this machine's store.
#[test]
fn list_marks_the_default_line_and_what_was_built() {
    let dir = tempfile::tempdir().unwrap();
    let key = "ab".repeat(32);
    // This file's rocforge() points ROCFORGE_STORE at DIR/no-store.
    let entry = dir.path().join("no-store").join(&key);
    std::fs::create_dir_all(entry.join("tree")).unwrap();
    std::fs::write(
        entry.join("meta.json"),
        json!({"component": "hipfft", "key": key, "committed": 1, "version": "1.0.18", "release": "rocm-6.4.4"})
            .to_string(),
    )
    .unwrap();
    let out = ok(dir.path(), &["list"]);
    let row = |component: &str, release: &str| {
        out.lines()
            .find(|l| l.split_whitespace().next() == Some(component) && l.contains(release))
            .unwrap_or_else(|| panic!("no {component} of {release}:\n{out}"))
            .to_string()
    };
    assert!(
        row("hipfft", "rocm-6.4.4 (preview)").contains("  here  "),
        "{out}"
    );
    assert!(
        row("hipfft", "debian-6.4 (default)").contains("  recorded  "),
        "{out}"
    );
    assert!(
        row("rocprim", "rocm-7.14.0 (preview)").contains("  -  "),
        "{out}"
    );
    assert!(
        out.contains("\ndefault: debian-6.4, the line used without --release\n"),
        "{out}"
    );
    assert!(
        out.contains("\npreview: nothing built from the line has been recorded"),
        "{out}"
    );
    let json: Value = serde_json::from_str(&ok(dir.path(), &["list", "--format", "json"])).unwrap();
    let item = |name: &str, release: &str| {
        json["components"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name && c["release"] == release)
            .unwrap()
            .clone()
    };
    let stored = item("hipfft", "rocm-6.4.4");
    assert_eq!(
        (
            &stored["stored"],
            &stored["built"],
            &stored["default"],
            &stored["preview"]
        ),
        (&json!(true), &json!(false), &json!(false), &json!(true))
    );
    let recorded = item("hipfft", "debian-6.4");
    assert_eq!(
        (
            &recorded["stored"],
            &recorded["built"],
            &recorded["default"],
            &recorded["preview"]
        ),
        (&json!(false), &json!(true), &json!(true), &json!(false))
    );
}

/// A bare `rocforge build` starts nothing: it says what the whole line is (components, hours,
/// disk) and how to ask for it (`--all`) or for less (components, a bundle).
#[test]
fn a_bare_build_refuses_and_sizes_the_whole_line() {
    let dir = tempfile::tempdir().unwrap();
    let o = rocforge(dir.path(), &["build", "--arch", "gfx90c"]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    insta::assert_snapshot!(o.stderr);
    // Naming components and asking for all of them at once is a command-line error.
    assert_eq!(rocforge(dir.path(), &["build", "--all", "rocrand"]).code, 2);
}

#[test]
fn plan_rocsolver_for_both_igpus() {
    let text = ok(
        &manifest(),
        &[
            "--release",
            "rocm-6.4.4",
            "plan",
            "rocsolver",
            "--arch",
            "gfx90c,gfx902",
        ],
    );
    insta::assert_snapshot!(text);
    // The order a user types targets in does not change the plan.
    assert_eq!(
        text,
        ok(
            &manifest(),
            &[
                "--release",
                "rocm-6.4.4",
                "plan",
                "rocsolver",
                "--arch",
                "gfx902,gfx90c"
            ]
        )
    );
}

#[test]
fn plan_json_schema() {
    let json = ok(
        &manifest(),
        &[
            "--release",
            "rocm-6.4.4",
            "plan",
            "rocsolver",
            "--arch",
            "gfx90c,gfx902",
            "--format",
            "json",
        ],
    );
    insta::assert_snapshot!(json);
    let v: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["schema"], "rocforge.plan/1");
    let order: Vec<&str> = v["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["component"].as_str().unwrap())
        .collect();
    let pos = |c: &str| order.iter().position(|x| *x == c).unwrap();
    assert!(pos("tensile") < pos("rocblas"));
    assert!(pos("rocblas") < pos("rocsolver"));
    assert!(pos("rocprim") < pos("rocsolver"));
    for s in v["steps"].as_array().unwrap() {
        assert_eq!(s["key"].as_str().unwrap().len(), 64);
    }
}

#[test]
fn plan_github_matrix_has_one_list_per_level() {
    let json = ok(
        &manifest(),
        &[
            "--release",
            "rocm-6.4.4",
            "plan",
            "--arch",
            "gfx90c,gfx902",
            "--format",
            "github-matrix",
        ],
    );
    insta::assert_snapshot!(json);
    let v: Value = serde_json::from_str(&json).unwrap();
    for level in v["levels"].as_array().unwrap() {
        let include = level["matrix"]["include"].as_array().unwrap();
        assert!(!include.is_empty() && include.len() <= 256);
        for e in include {
            for field in ["component", "targets", "key", "runner"] {
                assert!(e[field].is_string(), "{field} missing in {e}");
            }
        }
    }
}

#[test]
fn github_matrix_splits_levels_over_256_entries() {
    let w = fixture();
    // Path sources are digested when planned: the tree must exist.
    w.write("recipes/line-1.0/src/CMakeLists.txt", "");
    for i in 0..300 {
        w.write(&format!("recipes/line-1.0/leaf-{i:03}.toml"), &format!(
                "name = \"leaf-{i:03}\"\nversion = \"1\"\nsummary = \"s\"\nlicense = \"MIT\"\n\n[source]\npath = \"src\"\n\n[build]\nsystem = \"cmake\"\narch-vars = [\"GPU_TARGETS\"]\n"
            ));
    }
    let v: Value =
        serde_json::from_str(&w.ok(&["plan", "--format", "github-matrix"]).stdout).unwrap();
    let levels = v["levels"].as_array().unwrap();
    let sizes: Vec<(u64, u64, usize)> = levels
        .iter()
        .map(|l| {
            (
                l["level"].as_u64().unwrap(),
                l["part"].as_u64().unwrap(),
                l["matrix"]["include"].as_array().unwrap().len(),
            )
        })
        .collect();
    // 300 leaves + hip-core at level 0; hip-app at level 1.
    assert_eq!(sizes, vec![(0, 0, 256), (0, 1, 45), (1, 0, 1)]);
}

#[test]
fn explain_prints_the_hash_input() {
    let text = ok(
        &manifest(),
        &[
            "--release",
            "rocm-6.4.4",
            "plan",
            "rocblas",
            "--arch",
            "gfx90c",
            "--explain",
            "tensile",
        ],
    );
    insta::assert_snapshot!(text);
    let json: Value = serde_json::from_str(&ok(
        &manifest(),
        &[
            "--release",
            "rocm-6.4.4",
            "plan",
            "rocblas",
            "--arch",
            "gfx90c",
            "--explain",
            "rocblas",
            "--format",
            "json",
        ],
    ))
    .unwrap();
    assert_eq!(json["schema"], "rocforge.hash-input/1");
    assert_eq!(json["dependencies"][0]["name"], "tensile");
}

#[test]
fn arch_table_views() {
    insta::assert_snapshot!("arch_list", ok(&manifest(), &["arch", "list"]));
    insta::assert_snapshot!(
        "arch_show_gfx90c",
        ok(&manifest(), &["arch", "show", "gfx90c"])
    );
    // A KFD gfx_target_version finds the same target.
    assert_eq!(
        ok(&manifest(), &["arch", "show", "90012"]),
        ok(&manifest(), &["arch", "show", "gfx90c"])
    );
    let v: Value = serde_json::from_str(&ok(
        &manifest(),
        &["arch", "show", "gfx902", "--format", "json"],
    ))
    .unwrap();
    assert_eq!(v["arch"]["kfd_version"], 90002);
    assert_eq!(v["arch"]["nearest"], "gfx900");
    // Debian's targets and AMD's datacenter ones are known, with their facts.
    insta::assert_snapshot!(
        "arch_show_gfx90a",
        ok(&manifest(), &["arch", "show", "gfx90a"])
    );
    assert_eq!(
        ok(&manifest(), &["arch", "show", "90010"]),
        ok(&manifest(), &["arch", "show", "gfx90a"])
    );
    insta::assert_snapshot!(
        "arch_show_gfx11_generic",
        ok(&manifest(), &["arch", "show", "gfx11-generic"])
    );
    let v: Value = serde_json::from_str(&ok(
        &manifest(),
        &["arch", "show", "gfx942:sramecc+:xnack-", "--format", "json"],
    ))
    .unwrap();
    assert_eq!(v["target"], "gfx942:sramecc+:xnack-");
    assert_eq!(v["arch"]["matrix"], "mfma");
    assert_eq!(v["arch"]["kfd_version"], 90402);
    for t in [
        "gfx600",
        "gfx700",
        "gfx803",
        "gfx908",
        "gfx90a",
        "gfx940",
        "gfx941",
        "gfx942",
        "gfx950",
        "gfx1010",
        "gfx1030",
        "gfx1101",
        "gfx1102",
        "gfx1150",
        "gfx1151",
        "gfx1152",
        "gfx1153",
        "gfx1200",
        "gfx1201",
        "gfx9-generic",
        "gfx9-4-generic",
        "gfx10-1-generic",
        "gfx10-3-generic",
        "gfx11-generic",
        "gfx12-generic",
    ] {
        ok(&manifest(), &["arch", "show", t]);
    }
    // A generic target is never what a device reports.
    let o = rocforge(&manifest(), &["arch", "show", "0"]);
    assert_eq!(o.code, 1, "{}", o.stdout);
}

#[test]
fn bad_flags_get_clear_errors() {
    let m = manifest();
    let cases: &[&[&str]] = &[
        &["plan", "rocsparse", "--arch", "gfx91c"],
        &["plan", "rocsparse", "--arch", "gfx90c:sramecc+"],
        &["plan", "rocsparse", "--arch", "gfx90c:xnack"],
        &["plan", "rocsparse", "--arch", "gfx90c:xnack-,gfx90c:xnack+"],
        // What the shell makes of `--arch gfx90c, gfx902`.
        &["plan", "rocsparse", "--arch", "gfx90c,", "gfx902"],
        &["plan", "rocsparse", "--arch", "GFX90C"],
        &["plan", "rocsparse", "--arch", "gfx90c,gfx902:XNACK-"],
        &["plan", "rocsparce", "--arch", "gfx90c"],
        &["plan", "--release", "rocm-6.4.3"],
        &["arch", "show", "gfx9000"],
        &["--recipes", "/nonexistent/recipes", "list"],
    ];
    let mut all = String::new();
    for args in cases {
        let o = rocforge(&m, args);
        assert_eq!(o.code, 1, "{args:?}: {}", o.stderr);
        assert!(
            o.stderr.contains("help:"),
            "{args:?} gives no hint: {}",
            o.stderr
        );
        all += &format!("$ rocforge {}\n{}\n", args.join(" "), o.stderr);
    }
    insta::assert_snapshot!(all);
}

#[test]
fn keys_track_exactly_what_changes_the_output() {
    let w = fixture();
    let keys = |args: &[&str]| -> Vec<(String, String)> {
        let mut full = vec!["plan", "--format", "json"];
        full.extend_from_slice(args);
        let v: Value = serde_json::from_str(&w.ok(&full).stdout).unwrap();
        v["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                (
                    s["component"].as_str().unwrap().to_string(),
                    s["key"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    let base = keys(&["--arch", "gfx90c"]);
    assert_eq!(
        base,
        keys(&["--arch", "gfx90c"]),
        "keys are stable across runs"
    );
    assert_eq!(
        base.iter().map(|(c, _)| c.as_str()).collect::<Vec<_>>(),
        ["hip-core", "hip-app"]
    );

    // Another target: every key changes.
    let other = keys(&["--arch", "gfx902"]);
    assert!(base.iter().zip(&other).all(|(a, b)| a.1 != b.1));
    // Host builds never share keys with container builds.
    let host = keys(&["--arch", "gfx90c", "--runtime", "host"]);
    assert!(base.iter().zip(&host).all(|(a, b)| a.1 != b.1));

    // The summary cannot change the output: same keys.
    let recipe = w.path("recipes/line-1.0/hip-app.toml");
    let text = std::fs::read_to_string(&recipe).unwrap();
    std::fs::write(
        &recipe,
        text.replace("links hip-core", "links hip-core (reworded)"),
    )
    .unwrap();
    assert_eq!(base, keys(&["--arch", "gfx90c"]));

    // Needed only to build, a dependency is built and mounted as before: the build cannot
    // differ, so no key does (a store entry built before build-depends existed still serves).
    let text = std::fs::read_to_string(&recipe).unwrap();
    std::fs::write(
        &recipe,
        text.replace("depends = [\"hip-core\"]", "build-depends = [\"hip-core\"]"),
    )
    .unwrap();
    assert_eq!(base, keys(&["--arch", "gfx90c"]));
    let explained = w
        .ok(&["plan", "--arch", "gfx90c", "--explain", "hip-app"])
        .stdout;
    assert!(
        explained.contains("build-only hip-core (built and mounted like the others"),
        "{explained}"
    );
    std::fs::write(&recipe, &text).unwrap();

    // A patch byte changes hip-core and, through its key, hip-app.
    let patch = w.path("patches/line-1.0/hip-core/0001-accept-gfx90c.patch");
    let mut bytes = std::fs::read(&patch).unwrap();
    bytes.extend_from_slice(b"\n");
    std::fs::write(&patch, bytes).unwrap();
    let patched = keys(&["--arch", "gfx90c"]);
    assert_ne!(base[0].1, patched[0].1);
    assert_ne!(base[1].1, patched[1].1);
}

/// Writes a store entry the way the builder commits one, from the plan's own hash input.
fn commit_to_store(w: &World, store: &Path, component: &str, committed: u64) {
    let store_arg = store.to_str().unwrap();
    let input = w
        .ok(&[
            "--store",
            store_arg,
            "plan",
            "--arch",
            "gfx90c",
            "--explain",
            component,
            "--format",
            "json",
        ])
        .stdout;
    let key = {
        let plan: Value = serde_json::from_str(
            &w.ok(&[
                "--store", store_arg, "plan", "--arch", "gfx90c", "--format", "json",
            ])
            .stdout,
        )
        .unwrap();
        plan["steps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["component"] == component)
            .unwrap()["key"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let entry = store.join(&key);
    std::fs::create_dir_all(entry.join("tree")).unwrap();
    std::fs::write(entry.join("hash-input.json"), input).unwrap();
    std::fs::write(
        entry.join("meta.json"),
        serde_json::json!({"component": component, "key": key, "committed": committed}).to_string(),
    )
    .unwrap();
}

#[test]
fn status_says_cached_or_which_input_changed() {
    let w = fixture();
    let store = w.store();
    let store_arg = store.to_str().unwrap();
    commit_to_store(&w, &store, "hip-core", 1);
    commit_to_store(&w, &store, "hip-app", 2);
    let plan = |extra: &[&str]| {
        let mut args = vec!["--store", store_arg, "plan", "--arch", "gfx90c"];
        args.extend_from_slice(extra);
        w.ok(&args).stdout
    };
    let cached = plan(&[]);
    assert!(cached.contains("0 to build, 2 cached"), "{cached}");

    let patch = w.path("patches/line-1.0/hip-core/0001-accept-gfx90c.patch");
    let text = std::fs::read_to_string(&patch).unwrap();
    std::fs::write(
        &patch,
        text.replace("gfx900 gfx90c", "gfx900 gfx90c gfx902"),
    )
    .unwrap();
    let changed = plan(&[]);
    let v: Value = serde_json::from_str(&plan(&["--format", "json"])).unwrap();
    assert_eq!(
        v["steps"][0]["reason"]["inputs"],
        serde_json::json!(["component.patches"])
    );
    assert_eq!(
        v["steps"][1]["reason"]["inputs"],
        serde_json::json!(["dependencies.hip-core"])
    );
    insta::assert_snapshot!(changed.replace(store_arg, "[STORE]"));
}

#[test]
fn exported_catalog_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("catalog");
    let o = ok(dir.path(), &["catalog", "export", "catalog"]);
    assert!(o.contains("wrote"), "{o}");
    for f in [
        "recipes/arches.toml",
        "recipes/rocm-6.4.4/release.toml",
        "recipes/rocm-6.4.4/rocblas.toml",
        "patches/README.md",
    ] {
        assert!(dest.join(f).is_file(), "{f} not exported");
    }
    // The exported copy plans exactly like the built-in one.
    let builtin = ok(
        &manifest(),
        &["plan", "rocsolver", "--arch", "gfx90c", "--format", "json"],
    );
    let exported = ok(
        dir.path(),
        &[
            "--recipes",
            "catalog/recipes",
            "plan",
            "rocsolver",
            "--arch",
            "gfx90c",
            "--format",
            "json",
        ],
    );
    assert_eq!(builtin, exported);
    // A second export refuses to overwrite.
    let again = rocforge(dir.path(), &["catalog", "export", "catalog"]);
    assert_eq!(again.code, 1);
    assert!(again.stderr.contains("already exists"), "{}", again.stderr);
}

#[test]
fn help_teaches() {
    let o = ok(&manifest(), &["--help"]);
    for word in ["plan", "check", "arch", "--recipes", "--arch", "Examples"] {
        assert!(o.contains(word), "--help lacks {word}");
    }
    let p = ok(&manifest(), &["plan", "--help"]);
    assert!(
        p.contains("--explain") && p.contains("github-matrix"),
        "{p}"
    );
}

#[test]
fn bundles_expand_to_their_components() {
    let v: Value = serde_json::from_str(&ok(
        &manifest(),
        &["plan", "rocm-math", "--arch", "gfx90c", "--format", "json"],
    ))
    .unwrap();
    let requested: Vec<&str> = v["requested"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    assert!(
        requested.contains(&"rocblas") && requested.contains(&"hipfft"),
        "{requested:?}"
    );
    assert!(!requested.contains(&"miopen"));
    let o = rocforge(&manifest(), &["plan", "rocm-mat", "--arch", "gfx90c"]);
    assert!(
        o.stderr.contains("did you mean \"rocm-math\""),
        "{}",
        o.stderr
    );
}

/// `rocforge list | head -1`: the reader goes away before rocforge writes; rocforge exits like a
/// SIGPIPE'd command (141) without a panic message.
#[test]
fn a_closed_stdout_is_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rocforge"))
        .args(["list"])
        .current_dir(dir.path())
        .env("ROCFORGE_CONFIG", dir.path().join("none.toml"))
        .stdout(writer)
        .stderr(std::process::Stdio::piped())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(out.status.code(), Some(141), "{err}");
}

/// Completions and man pages come from the same definitions as the parser. The completion
/// script is run by bash as a shell runs it (sourced, then asked with COMP_WORDS), so what it
/// offers is what the binary answers: commands, flags, and the names of the catalog in use
/// (components and bundles of the line, GPU targets after a comma, release lines). Every command
/// has a page that documents its flags. Neither takes --format.
#[test]
fn completions_and_man_pages_follow_the_commands() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let bash = ok(d, &["completions", "bash"]);
    std::fs::write(d.join("rocforge.bash"), &bash).unwrap();
    let parsed = Command::new("bash")
        .arg("-n")
        .arg(d.join("rocforge.bash"))
        .output()
        .unwrap();
    assert!(
        parsed.status.success(),
        "{}",
        String::from_utf8_lossy(&parsed.stderr)
    );
    // The script runs `rocforge` from PATH, as an installed one would be.
    let bin = d.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_rocforge"), bin.join("rocforge")).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    std::fs::write(d.join("no-user-config.toml"), "").unwrap();
    let complete = |line: &str, env: &[(&str, &Path)]| -> Vec<String> {
        // The word being completed is the last one (empty after a trailing space).
        let script = format!(
            r#"source {script}
words=({line})
[[ '{line}' == *' ' ]] && words+=('')
COMP_WORDS=("${{words[@]}}"); COMP_CWORD=$(( ${{#words[@]}} - 1 ))
f=$(complete -p rocforge | sed -E 's/.* -F ([^ ]+) .*/\1/')
"$f" rocforge "${{words[-1]}}" "${{words[-2]}}"
printf '%s\n' "${{COMPREPLY[@]}}""#,
            script = d.join("rocforge.bash").display()
        );
        let out = Command::new("bash")
            .arg("-c")
            .arg(&script)
            .current_dir(d)
            .env("PATH", &path)
            .env("HOME", d)
            .env("ROCFORGE_CACHE", d.join("cache"))
            .env("ROCFORGE_STORE", d.join("store"))
            .env("ROCFORGE_CONFIG", d.join("no-user-config.toml"))
            .env_remove("ROCFORGE_RECIPES")
            .env_remove("ROCFORGE_RELEASE")
            .envs(env.iter().map(|(k, v)| (*k, v.as_os_str())))
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| l.trim().to_string())
            .filter(|l| !l.is_empty())
            .collect()
    };
    let offered = complete("rocforge bu", &[]);
    assert_eq!(offered, ["build"], "{offered:?}");
    let offered = complete("rocforge build --fre", &[]);
    assert_eq!(offered, ["--fresh"], "{offered:?}");
    let line = Path::new("debian-6.4");
    let offered = complete("rocforge build hipbl", &[("ROCFORGE_RELEASE", line)]);
    assert_eq!(
        offered,
        ["hipblas", "hipblas-common", "hipblaslt"],
        "{offered:?}"
    );
    // A bundle is a name too; `install` and `store rm` take the same names.
    let offered = complete("rocforge install rocm-m", &[("ROCFORGE_RELEASE", line)]);
    assert_eq!(offered, ["rocm-math"], "{offered:?}");
    let offered = complete("rocforge store rm rocs", &[("ROCFORGE_RELEASE", line)]);
    assert_eq!(offered, ["rocsolver", "rocsparse"], "{offered:?}");
    // After a comma, the list so far is kept and a target already in it is not offered again.
    let offered = complete("rocforge build --arch gfx90c,gfx90", &[]);
    assert!(
        offered.contains(&"gfx90c,gfx902".to_string()),
        "{offered:?}"
    );
    assert!(
        !offered.contains(&"gfx90c,gfx90c".to_string()),
        "{offered:?}"
    );
    assert!(
        offered.iter().all(|o| o.starts_with("gfx90c,gfx90")),
        "{offered:?}"
    );
    let offered = complete("rocforge plan --release deb", &[]);
    assert_eq!(offered, ["debian-6.4"], "{offered:?}");
    // --recipes reaches the completion through its variable: the names are that catalog's.
    let root = d.join("own");
    let rel = crate::common::test_release(&root, "localhost/none:1");
    std::fs::write(
        rel.join("zzlib.toml"),
        "name = \"zzlib\"\nversion = \"1.0\"\nsummary = \"a test library\"\nlicense = \"MIT\"\n\n[source]\ngit = \"https://example.invalid/zz.git\"\ntag = \"v1.0\"\n\n[build]\nsystem = \"cmake\"\narch-vars = [\"GPU_TARGETS\"]\n",
    )
    .unwrap();
    let recipes = root.join("recipes");
    let offered = complete("rocforge build zz", &[("ROCFORGE_RECIPES", &recipes)]);
    assert_eq!(offered, ["zzlib"], "{offered:?}");
    // zsh and fish get the same protocol, each in its own syntax.
    for (shell, marker) in [
        ("zsh", "#compdef rocforge"),
        ("fish", "COMPLETE=fish rocforge"),
    ] {
        let script = ok(d, &["completions", shell]);
        assert!(script.contains(marker), "{shell}: {script}");
    }
    let page = ok(d, &["man"]);
    assert!(
        page.starts_with(".ie") && page.contains(".TH rocforge 1"),
        "{page}"
    );
    let out = d.join("man1");
    ok(d, &["man", "--out", out.to_str().unwrap()]);
    let build = std::fs::read_to_string(out.join("rocforge-build.1")).unwrap();
    assert!(
        build.contains("fresh") && build.contains("keep\\-going"),
        "{build}"
    );
    assert!(out.join("rocforge-inspect.1").is_file());
    let refused = rocforge(d, &["--format", "json", "completions", "bash"]);
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert!(
        refused.stderr.contains(
            "--format json is not available for `rocforge completions` (its formats: text)"
        ),
        "{}",
        refused.stderr
    );
}

/// README's examples are accepted as written: every command they name exists (its `--help`
/// works), and every registry or release URL in them parses as the flag it is given to would
/// parse it (an OCI repository with capitals did not).
#[test]
fn the_readmes_examples_are_accepted_as_written() {
    let readme = std::fs::read_to_string(manifest().join("README.md")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut in_sh = false;
    let mut commands = 0;
    for line in readme.lines() {
        if line.starts_with("```") {
            in_sh = line == "```sh";
            continue;
        }
        if !in_sh {
            continue;
        }
        let code = line.split("  #").next().unwrap_or(line).trim();
        let Some(rest) = code.strip_prefix("rocforge ") else {
            continue;
        };
        commands += 1;
        let words: Vec<&str> = rest.split_whitespace().collect();
        // Global flags with a value come before the command in some examples.
        let mut i = 0;
        while i < words.len() && words[i].starts_with("--") {
            i += 2;
        }
        let mut path = vec![words[i]];
        if matches!(
            words[i],
            "arch" | "catalog" | "ci" | "image" | "key" | "nix" | "patch" | "store"
        ) {
            path.push(words[i + 1]);
        }
        let mut args = path.clone();
        args.push("--help");
        let o = rocforge(dir.path(), &args);
        assert_eq!(
            o.code,
            0,
            "README: `{code}`: `rocforge {}` is no command",
            path.join(" ")
        );
        for w in &words {
            if let Some(url) = w.strip_prefix("oci://").map(|_| *w) {
                rocforge::oci::Repository::parse(url)
                    .unwrap_or_else(|e| panic!("README: `{code}`: {url}: {e}"));
            }
            if w.starts_with("github://") {
                rocforge::publish::Destination::parse(w)
                    .unwrap_or_else(|e| panic!("README: `{code}`: {w}: {e}"));
            }
        }
    }
    assert!(
        commands > 20,
        "README's examples were not found ({commands})"
    );
}

/// The exit codes `--help` documents: 2 for a command line clap refuses, 1 for a problem found.
#[test]
fn exit_codes_are_the_documented_ones() {
    let dir = tempfile::tempdir().unwrap();
    let help = ok(dir.path(), &["--help"]);
    assert!(
        help.contains("Exit codes: 0 done; 1 what was asked failed"),
        "{help}"
    );
    assert_eq!(rocforge(dir.path(), &["build", "--no-such-flag"]).code, 2);
    assert_eq!(rocforge(dir.path(), &["--format", "yaml", "list"]).code, 2);
    let missing = dir.path().join("absent.so");
    let o = rocforge(dir.path(), &["inspect", missing.to_str().unwrap()]);
    assert_eq!(o.code, 1, "{}", o.stderr);
}

/// What a user reads first: the top-level help and a command's, at 100 columns. Global flags
/// come under their own heading after the command's own.
#[test]
fn help_pages() {
    let dir = tempfile::tempdir().unwrap();
    let help = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_rocforge"))
            .current_dir(dir.path())
            .args(args)
            .env("COLUMNS", "100")
            .env("NO_COLOR", "1")
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let top = help(&["--help"]);
    let build = help(&["build", "--help"]);
    let own = build.find("--keep-going").unwrap();
    let global = build.find("Global options:").unwrap();
    assert!(
        own < global && global < build.find("--recipes").unwrap(),
        "{build}"
    );
    insta::assert_snapshot!("rocforge_help", top);
    insta::assert_snapshot!("rocforge_build_help", build);
}

/// Without --arch, the GPU this machine has is the target, and the output says so; a machine
/// without one gets the line's targets. The machines are recorded KFD trees
/// (ROCFORGE_SYSFS_ROOT).
#[test]
fn the_detected_gpu_is_the_default_target() {
    let tmp = tempfile::tempdir().unwrap();
    crate::common::kfd::machines(tmp.path());
    let plan_on = |machine: &str, extra: &[&str]| {
        let root = tmp.path().join(machine);
        let mut args = vec![
            "--release",
            "debian-6.4",
            "--format",
            "json",
            "plan",
            "rocrand",
        ];
        args.extend_from_slice(extra);
        crate::common::rocforge_env(
            tmp.path(),
            &[("ROCFORGE_SYSFS_ROOT", root.as_path())],
            &args,
        )
    };
    let plan = |machine: &str| plan_on(machine, &[]);
    let targets = |o: &crate::common::Out| -> serde_json::Value {
        assert_eq!(o.code, 0, "{}", o.stderr);
        serde_json::from_str::<serde_json::Value>(&o.stdout).unwrap()["targets"].clone()
    };
    let o = plan("m-gfx902");
    assert_eq!(targets(&o), serde_json::json!(["gfx902"]));
    assert!(
        o.stderr.contains(
            "target gfx902: the GPU of this machine (KFD node 1); --arch builds for others (the line's: gfx902,gfx90c)"
        ),
        "{}",
        o.stderr
    );
    assert_eq!(targets(&plan("m-gfx90c")), serde_json::json!(["gfx90c"]));
    // Any processor of the target table, not only the line's own.
    assert_eq!(targets(&plan("m-gfx1151")), serde_json::json!(["gfx1151"]));
    let o = plan("m-none");
    assert_eq!(targets(&o), serde_json::json!(["gfx902", "gfx90c"]));
    assert!(
        !o.stderr.contains("the GPU of this machine"),
        "{}",
        o.stderr
    );
    // --arch wins over the detected GPU.
    let o = plan_on("m-gfx902", &["--arch", "gfx90c"]);
    assert_eq!(targets(&o), serde_json::json!(["gfx90c"]));
    // A command that opens the line but uses no targets says nothing about them (`image build`,
    // here refused for the host runtime before anything runs).
    let root = tmp.path().join("m-gfx902");
    let o = crate::common::rocforge_env(
        tmp.path(),
        &[("ROCFORGE_SYSFS_ROOT", root.as_path())],
        &[
            "--release",
            "debian-6.4",
            "image",
            "build",
            "--runtime",
            "host",
        ],
    );
    assert_ne!(o.code, 0, "{}", o.stderr);
    assert!(
        !o.stderr.contains("the GPU of this machine"),
        "{}",
        o.stderr
    );
}

/// Under --format json a failed command prints its error as JSON on stdout (rocforge.error/1:
/// each problem's message, location and hint), the rendering on stderr, and exits 1.
#[test]
fn errors_under_format_json_are_json() {
    let o = rocforge(&manifest(), &["--format", "json", "plan", "rocrnad"]);
    assert_eq!(o.code, 1);
    let v: Value = serde_json::from_str(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", o.stdout));
    assert_eq!(v["schema"], "rocforge.error/1");
    assert_eq!(v["ok"], false);
    let e = &v["errors"][0];
    assert!(e["message"].as_str().unwrap().contains("rocrnad"), "{v}");
    assert!(
        e["hint"].as_str().unwrap().contains("rocrand"),
        "did you mean: {v}"
    );
    assert!(o.stderr.contains("error:"), "{}", o.stderr);
    // A catalog problem carries its file:line:col.
    let tmp = tempfile::tempdir().unwrap();
    let rel = tmp.path().join("recipes/x-1.0");
    std::fs::create_dir_all(&rel).unwrap();
    std::fs::copy(
        manifest().join("tests/fixtures/base/recipes/arches.toml"),
        tmp.path().join("recipes/arches.toml"),
    )
    .unwrap();
    std::fs::write(rel.join("release.toml"), "name = \"x-1.0\"\nversion = 1\n").unwrap();
    let o = rocforge(
        tmp.path(),
        &["--recipes", "recipes", "--format", "json", "plan", "a"],
    );
    assert_eq!(o.code, 1, "{}", o.stderr);
    let v: Value = serde_json::from_str(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", o.stdout));
    assert!(
        v["errors"].as_array().unwrap().iter().any(|e| e["location"]
            .as_str()
            .is_some_and(|l| l.contains("release.toml:"))),
        "{v}"
    );
}

/// Every JSON document the command line writes has one shape: an object whose first key is
/// `schema`, with named fields all the way down (no `[name, {…}]` pairs a reader must know
/// the positions of). The sweep runs each command that needs no build or network, plus an error.
#[test]
fn json_outputs_have_one_shape() {
    fn pairs(v: &Value, at: &str, found: &mut Vec<String>) {
        match v {
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    if let Value::Array(pair) = item
                        && pair.len() == 2
                        && pair[0].is_string()
                        && (pair[1].is_object() || pair[1].is_string())
                    {
                        found.push(format!("{at}[{i}]"));
                    }
                    pairs(item, &format!("{at}[{i}]"), found);
                }
            }
            Value::Object(map) => {
                for (k, item) in map {
                    pairs(item, &format!("{at}.{k}"), found);
                }
            }
            _ => {}
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let sysfs = d.join("no-gpu");
    std::fs::create_dir_all(&sysfs).unwrap();
    let commands: &[&[&str]] = &[
        &["list"],
        &["check"],
        &["plan", "rocrand"],
        &["arch", "list"],
        &["arch", "show", "gfx90c"],
        &["store", "list"],
        &["schema"],
        &["detect", "--sysfs-root", sysfs.to_str().unwrap()],
        &["plan", "rocrnad"],
    ];
    for args in commands {
        let mut argv = vec!["--format", "json"];
        argv.extend_from_slice(args);
        let o = rocforge(d, &argv);
        assert!(
            o.stdout.starts_with("{\n  \"schema\": \"rocforge."),
            "{args:?}: schema is not first:\n{}\n{}",
            o.stdout,
            o.stderr
        );
        let v: Value = serde_json::from_str(&o.stdout).unwrap_or_else(|e| panic!("{e}: {args:?}"));
        let mut found = Vec::new();
        pairs(&v, "", &mut found);
        assert!(found.is_empty(), "{args:?}: pairs at {found:?}");
    }
}

/// README's first Quick start block (seconds each, no build, GPU or network) runs whole as
/// written, in order, in a fresh HOME (the catalog export is then what `check` reads).
#[test]
fn the_quick_starts_first_block_runs_as_written() {
    let lines = crate::common::readme::block("Quick start", 0);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let none = d.join("no-gpu");
    std::fs::create_dir_all(&none).unwrap();
    for cmd in &lines {
        // No GPU here, whatever the machine running the test has.
        let o = crate::common::readme::run(d, &[("ROCFORGE_SYSFS_ROOT", &none)], cmd);
        assert_eq!(o.code, 0, "README: {cmd}\n{}{}", o.stdout, o.stderr);
        assert!(!o.stdout.is_empty(), "README: {cmd} printed nothing");
    }
    assert!(lines.len() >= 9, "{lines:#?}");
    assert!(
        d.join("my-catalog/recipes/debian-6.4/release.toml")
            .is_file()
    );
}
