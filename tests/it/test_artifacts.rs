//! `<component>-tests`: a component's test client as its own artifact. A small CMake project
//! built here (host runtime, cc): a shared library and a test client linking it, whose
//! CTestTestfile declares a test that passes, one that fails and one that crashes. The derived
//! line builds the library without its client (`tests = false`); `tiny-tests` builds the client
//! from the same source and flags, keyed to the library's build, and keeps only what the
//! library's tree lacks. Then it is packaged, served over HTTP on 127.0.0.1, and `rocforge test`
//! installs both from the index and runs the client.

use crate::common;

use std::path::Path;

use common::*;
use serde_json::Value;

const CMAKE: &str = r#"cmake_minimum_required(VERSION 3.16)
project(tiny C)
option(BUILD_TEST "the test client" OFF)
add_library(tiny SHARED tiny.c)
set_target_properties(tiny PROPERTIES FLAG_FROM_ARGS "${TINY_FLAG}")
target_compile_definitions(tiny PRIVATE "TINY_FLAG=${TINY_FLAG}")
install(TARGETS tiny LIBRARY DESTINATION lib)
install(FILES tiny.h DESTINATION include)
if(BUILD_TEST)
  add_executable(tiny-test test.c)
  target_link_libraries(tiny-test tiny)
  set_target_properties(tiny-test PROPERTIES INSTALL_RPATH "$ORIGIN/../lib")
  install(TARGETS tiny-test RUNTIME DESTINATION bin)
  install(FILES CTestTestfile.install RENAME CTestTestfile.cmake DESTINATION bin/tiny)
endif()
"#;

const TINY_C: &str = "int tiny_answer(void) { return TINY_FLAG; }\n";
const TINY_H: &str = "int tiny_answer(void);\n";
const TEST_C: &str = r#"#include <signal.h>
#include <stdio.h>
#include <string.h>
int tiny_answer(void);
int main(int argc, char **argv) {
    const char *which = argc > 1 ? argv[1] : "";
    if (strcmp(which, "passes") == 0) return tiny_answer() == 42 ? 0 : 1;
    if (strcmp(which, "fails") == 0) { fprintf(stderr, "expected 41, got %d\n", tiny_answer()); return 1; }
    if (strcmp(which, "crashes") == 0) raise(SIGSEGV);
    return 2;
}
"#;
const CTEST: &str = "add_test(passes \"../tiny-test\" \"passes\")\nadd_test(fails \"../tiny-test\" \"fails\")\nadd_test(crashes \"../tiny-test\" \"crashes\")\n";

struct Fx {
    w: World,
}

derefs_to_world!(Fx);

impl Fx {
    /// A base line whose `tiny` builds its client, and a derived line that turns it off.
    fn new(flag: &str) -> Fx {
        // Two lines of their own rather than the test release; every command opens the derived one.
        let w = World::new()
            .config("no-config.toml")
            .args(&["--recipes", "recipes", "--release", "line-1.0"])
            .build();
        let root = w.root();
        let src = root.join("src/tiny");
        std::fs::create_dir_all(&src).unwrap();
        for (name, text) in [
            ("CMakeLists.txt", CMAKE),
            ("tiny.c", TINY_C),
            ("tiny.h", TINY_H),
            ("test.c", TEST_C),
            ("CTestTestfile.install", CTEST),
        ] {
            std::fs::write(src.join(name), text).unwrap();
        }
        let recipes = root.join("recipes");
        std::fs::create_dir_all(recipes.join("base-1.0")).unwrap();
        std::fs::create_dir_all(recipes.join("line-1.0")).unwrap();
        std::fs::copy(
            manifest().join("tests/fixtures/base/recipes/arches.toml"),
            recipes.join("arches.toml"),
        )
        .unwrap();
        std::fs::write(
            recipes.join("base-1.0/release.toml"),
            "name = \"base-1.0\"\nversion = \"1.0\"\nimage = \"localhost/none:1\"\nprefix = \"/opt/rocm\"\narches = [\"gfx90c\"]\n",
        )
        .unwrap();
        std::fs::write(
            recipes.join("base-1.0/tiny.toml"),
            "name = \"tiny\"\nversion = \"1.0\"\nsummary = \"a library and its test client\"\nlicense = \"MIT\"\n\n[source]\npath = \"../../src/tiny\"\n\n[build]\nsystem = \"cmake\"\narch-vars = [\"GPU_TARGETS\"]\nargs = [\"-DBUILD_TEST=ON\", \"-DTINY_FLAG=42\"]\n\n[test]\nkind = \"ctest\"\ndir = \"bin/tiny\"\ntimeout = \"30s\"\n",
        )
        .unwrap();
        std::fs::write(
            recipes.join("line-1.0/release.toml"),
            "name = \"line-1.0\"\nversion = \"1.0\"\nbase = \"base-1.0\"\nimage = \"localhost/none:1\"\nprefix = \"/opt/rocm\"\narches = [\"gfx90c\"]\n",
        )
        .unwrap();
        std::fs::write(
            recipes.join("line-1.0/tiny.toml"),
            format!("version = \"1.0\"\ntests = false\n\n[build]\nargs = [\"-DBUILD_TEST=OFF\", \"-DTINY_FLAG={flag}\"]\n"),
        )
        .unwrap();
        Fx { w }
    }

    fn plan(&self) -> Value {
        let o = self.run(&[
            "plan",
            "tiny-tests",
            "--arch",
            "gfx90c",
            "--runtime",
            "host",
            "--format",
            "json",
        ]);
        assert_eq!(o.code, 0, "{}", o.stderr);
        let mut plan: Value = serde_json::from_str(&o.stdout).unwrap();
        // Each step with its hash input (`--explain`: the key's line, a blank line, the JSON).
        for s in plan["steps"].as_array_mut().unwrap() {
            let name = s["component"].as_str().unwrap().to_string();
            let o = self.run(&[
                "plan",
                "tiny-tests",
                "--arch",
                "gfx90c",
                "--runtime",
                "host",
                "--explain",
                &name,
            ]);
            assert_eq!(o.code, 0, "{}", o.stderr);
            let json = &o.stdout[o.stdout.find("\n\n").unwrap()..];
            s["hash_input"] = serde_json::from_str(json).unwrap();
        }
        plan
    }
}

fn step<'a>(plan: &'a Value, name: &str) -> &'a Value {
    plan["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["component"] == name)
        .unwrap_or_else(|| panic!("no step {name} in {plan:#}"))
}

#[test]
fn tests_artifact_is_its_own_step_keyed_to_the_library_build() {
    let fx = Fx::new("42");
    let plan = fx.plan();
    let lib = step(&plan, "tiny");
    let tests = step(&plan, "tiny-tests");
    assert_eq!(tests["depends"], serde_json::json!(["tiny"]), "{plan:#}");
    let deps = &tests["hash_input"]["dependencies"];
    assert_eq!(deps[0]["name"], "tiny");
    assert_eq!(deps[0]["key"], lib["key"], "{plan:#}");
    // The library keeps its switch off; the tests artifact turns the base line's back on and
    // keeps the library's other flags.
    let args = |s: &Value| s["hash_input"]["component"]["build"]["args"].clone();
    assert_eq!(
        args(lib),
        serde_json::json!(["-DBUILD_TEST=OFF", "-DTINY_FLAG=42"])
    );
    assert_eq!(
        args(tests),
        serde_json::json!(["-DBUILD_TEST=ON", "-DTINY_FLAG=42"])
    );
    // A whole-line plan does not build test clients.
    let o = fx.run(&["plan", "--arch", "gfx90c", "--runtime", "host"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(!o.stdout.contains("tiny-tests"), "{}", o.stdout);

    // A component without a [test] table has no tests artifact, and says so.
    let o = rocforge(
        fx.root(),
        &[
            "--release",
            "debian-6.4",
            "plan",
            "tensile-tests",
            "--arch",
            "gfx90c",
        ],
    );
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(
        o.stderr
            .contains("tensile has no test client to build as tensile-tests")
            && o.stderr.contains("tensile.toml has none"),
        "{}",
        o.stderr
    );

    // Another library flag: another library key, so another tests key.
    let other = Fx::new("41").plan();
    assert_ne!(step(&other, "tiny")["key"], lib["key"]);
    assert_ne!(step(&other, "tiny-tests")["key"], tests["key"]);
    assert_eq!(
        step(&other, "tiny-tests")["hash_input"]["dependencies"][0]["key"],
        step(&other, "tiny")["key"]
    );
}

/// A line whose build of a component compiles no GPU code (headers, the test client apart) says
/// `device-code = false`: the library then has one key for every target set and no GPU
/// variable, while `<name>-tests`, which compiles the device code, keeps the base's variable and
/// a key per target set. Said where it cannot hold (the client still on), it is refused.
#[test]
fn a_line_can_build_a_header_library_once_for_every_target_set() {
    let fx = Fx::new("42");
    let line = fx.root().join("recipes/line-1.0/tiny.toml");
    std::fs::write(
        &line,
        "version = \"1.0\"\ntests = false\n\n[build]\nargs = [\"-DBUILD_TEST=OFF\", \"-DTINY_FLAG=42\"]\ndevice-code = false\n",
    )
    .unwrap();
    let plan = |arch: &str| -> Value {
        let o = fx.run(&[
            "plan",
            "tiny-tests",
            "--arch",
            arch,
            "--runtime",
            "host",
            "--format",
            "json",
        ]);
        assert_eq!(o.code, 0, "{}", o.stderr);
        serde_json::from_str(&o.stdout).unwrap()
    };
    let (one, two) = (plan("gfx90c"), plan("gfx90c,gfx902"));
    assert_eq!(
        step(&one, "tiny")["key"],
        step(&two, "tiny")["key"],
        "{one:#}"
    );
    assert_eq!(
        step(&one, "tiny")["gpu_flags"]["cmake"],
        serde_json::json!([])
    );
    assert_ne!(
        step(&one, "tiny-tests")["key"],
        step(&two, "tiny-tests")["key"]
    );
    assert_eq!(
        step(&two, "tiny-tests")["gpu_flags"]["cmake"],
        serde_json::json!(["-DGPU_TARGETS=gfx902;gfx90c"]),
        "{two:#}"
    );
    // With the client left on, the build would compile device code: refused, naming the line.
    std::fs::write(&line, "version = \"1.0\"\n\n[build]\ndevice-code = false\n").unwrap();
    let o = fx.run(&["check"]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(
        o.stderr.contains("tiny builds its test client, which compiles device code, unless this line sets tests = false")
            && o.stderr.contains("recipes/line-1.0/tiny.toml:4"),
        "{}",
        o.stderr
    );
}

fn files(dir: &Path) -> Vec<String> {
    listing(dir)
}

#[test]
fn tests_artifact_holds_only_the_client_and_runs_from_an_index() {
    if !require("cmake", which("cmake")) || !require("python3 (http.server)", which("python3")) {
        return;
    }
    let fx = Fx::new("42");
    let o = fx.run(&[
        "build",
        "tiny-tests",
        "--arch",
        "gfx90c",
        "--runtime",
        "host",
    ]);
    assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    let plan = fx.plan();
    let tests_key = step(&plan, "tiny-tests")["key"]
        .as_str()
        .unwrap()
        .to_string();
    let lib_key = step(&plan, "tiny")["key"].as_str().unwrap().to_string();
    let tree = fx.root().join("store").join(&tests_key).join("tree");
    let listed = files(&tree);
    eprintln!("{listed:#?}");
    assert!(
        tree.join("opt/rocm/bin/tiny-test").is_file() || tree.join("bin/tiny-test").is_file(),
        "{listed:#?}"
    );
    assert!(
        !listed.iter().any(|f| f.contains("libtiny")),
        "the library's files are the library artifact's: {listed:#?}"
    );
    assert!(!listed.iter().any(|f| f.ends_with("tiny.h")), "{listed:#?}");

    // Packaged and signed, served over HTTP: the index lists both, the tests artifact with the
    // library's key.
    let keys = fx.root().join("keys");
    let o = fx.run(&["key", "generate", "--out", keys.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let config = fx.root().join("trust.toml");
    std::fs::write(
        &config,
        format!("[trust]\nkeys = [\"{}\"]\n", o.stdout.trim()),
    )
    .unwrap();
    let dist = fx.root().join("dist");
    let o = fx.run(&[
        "package",
        "tiny-tests",
        "--arch",
        "gfx90c",
        "--runtime",
        "host",
        "--out",
        dist.to_str().unwrap(),
        "--sign-key",
        keys.join("rocforge.key").to_str().unwrap(),
    ]);
    assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    let index: Value =
        serde_json::from_slice(&std::fs::read(dist.join("index.json")).unwrap()).unwrap();
    let arts = index["artifacts"].as_array().unwrap();
    let tests_art = arts
        .iter()
        .find(|a| a["name"] == "tiny-tests")
        .unwrap_or_else(|| panic!("{index:#}"));
    assert_eq!(tests_art["key"], tests_key.as_str());
    assert_eq!(tests_art["depends"][0]["name"], "tiny", "{index:#}");
    assert_eq!(
        tests_art["depends"][0]["key"],
        lib_key.as_str(),
        "{index:#}"
    );
    assert!(
        tests_art["url"]
            .as_str()
            .unwrap()
            .starts_with("tiny-tests-1.0-gfx90c-"),
        "{index:#}"
    );
    let server = HttpServer::start(&dist);

    // A tester's machine: an empty store, a gfx90c in sysfs. `test tiny` runs tiny-tests,
    // installed with its library from the index; nothing is built.
    let machine = fx.root().join("m-gfx90c");
    crate::common::kfd::write_machine(
        &machine,
        Some(crate::common::kfd::gfx90c(512 << 20)),
        Some("1"),
        None,
    );
    let out = fx.root().join("results");
    let empty = fx.root().join("tester-store");
    let o = rocforge_env(
        fx.root(),
        &[("ROCFORGE_STORE", &empty), ("ROCFORGE_CONFIG", &config)],
        &[
            "--recipes",
            "recipes",
            "--release",
            "line-1.0",
            "--quiet",
            "test",
            "tiny",
            "--arch",
            "gfx90c",
            "--sysfs-root",
            machine.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--from",
            &server.url(),
        ],
    );
    assert_eq!(
        o.code, 1,
        "one test fails, one crashes\n{}\n{}",
        o.stdout, o.stderr
    );
    let v: Value =
        serde_json::from_slice(&std::fs::read(out.join("results.json")).unwrap()).unwrap();
    assert_eq!(v["component"]["key"], tests_key.as_str(), "{v:#}");
    assert_eq!(v["component"]["runtime"], "index");
    let outcome = |name: &str| {
        v["tests"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("no {name}: {v:#}"))["outcome"]
            .clone()
    };
    assert_eq!(outcome("passes"), "passed", "{v:#}");
    assert_eq!(outcome("fails"), "failed", "{v:#}");
    assert_eq!(outcome("crashes"), "crashed", "{v:#}");
    assert!(
        !empty.join(&tests_key).exists(),
        "installed from the index, not built"
    );

    // Another build of the library (another flag) installed in a prefix: the tests artifact of
    // the first build is refused there, and the prefix is left as it was.
    let other = Fx::new("41");
    let o = other.run(&["build", "tiny", "--arch", "gfx90c", "--runtime", "host"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let dist2 = other.root().join("dist");
    let o = other.run(&[
        "package",
        "tiny",
        "--arch",
        "gfx90c",
        "--runtime",
        "host",
        "--out",
        dist2.to_str().unwrap(),
        "--sign-key",
        keys.join("rocforge.key").to_str().unwrap(),
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let prefix = fx.root().join("prefix");
    let install = |from: &Path, what: &str, prefix: &Path| {
        rocforge_env(
            fx.root(),
            &[
                ("ROCFORGE_CONFIG", &config),
                ("ROCFORGE_STATE", &fx.root().join("state")),
            ],
            &[
                "--recipes",
                "recipes",
                "--release",
                "line-1.0",
                "install",
                what,
                "--arch",
                "gfx90c",
                "--from",
                from.to_str().unwrap(),
                "--prefix",
                prefix.to_str().unwrap(),
            ],
        )
    };
    let o = install(&dist2, "tiny", &prefix);
    assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    let before = tree_contents(&prefix);
    let o = install(&dist, "tiny-tests", &prefix);
    assert_eq!(o.code, 1, "{}\n{}", o.stdout, o.stderr);
    assert!(
        o.stderr.contains(&format!(
            "tiny-tests tests tiny 1.0 (key {})",
            &lib_key[..12]
        )) && o.stderr.contains("the installed tiny is 1.0 (key")
            && o.stderr
                .contains("from the index that published the installed tiny"),
        "{}",
        o.stderr
    );
    assert_eq!(
        tree_contents(&prefix),
        before,
        "a refused install changes nothing"
    );
    // Where the library build it tests is installed (or none is), it installs, library and all.
    let fresh = fx.root().join("prefix-ok");
    let o = install(&dist, "tiny-tests", &fresh);
    assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    assert!(fresh.join("bin/tiny-test").is_file() && fresh.join("lib/libtiny.so").exists());
}
