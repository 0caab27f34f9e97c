//! Tests on hardware without hardware: KFD sysfs trees written here for gfx90c, gfx902, gfx1151
//! and a machine without a GPU node; a gtest-speaking client compiled here (cc) that passes,
//! fails, skips, segfaults, hangs, reports hipErrorNoBinaryForGpu or a missing Tensile library,
//! runs out of memory or logs an amdgpu reset; and a client whose shared library is missing
//! (exit 127). Components reach the store through `rocforge build --runtime host` (copy builds).
//! The report is opened in headless Chromium; its screenshot is kept under target/.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::kfd::machines;
use common::{Out, World, listing, manifest, rocforge, rocforge_command, which};
use serde_json::Value;

fn ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// Whether a tool works here; in CI its absence is a failure, locally a skip.
fn require(what: &str, ok: bool) -> bool {
    if ok {
        return true;
    }
    if ci() {
        panic!("{what} is required in CI (.ci/setup-machine.sh installs it)");
    }
    eprintln!("skipping: {what} is not available here (run .ci/setup-machine.sh)");
    false
}

fn cc_works() -> bool {
    Command::new("cc")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// rocforge in `dir` with its own store, cache and HOME (see [`rocforge_command`]).
fn base_cmd(dir: &Path, args: &[&str]) -> Command {
    rocforge_command(dir, &[], args)
}

fn rf(dir: &Path, args: &[&str]) -> Out {
    rocforge(dir, args)
}

const MIXED: &str = "Mixed.pass1 pass
Mixed.fail1 fail
Mixed.skip1 skip
Mixed.segv segv
Mixed.hang hang
Mixed.nobinary nobinary
Mixed.tensile tensile
Mixed.oom oom
Mixed.reset reset
Mixed.after_crash pass
Mixed.after_hang pass
Mixed.last pass
";

/// rocFFT's client started without a device: one test's message names no device (HIP's 100),
/// the others of that process fail in ways that name none. Sharded round-robin: `NoDev.*` run
/// in shard 0's process, `Other.*` in shard 1's; `NoDev.after_segv` in shard 0's second start.
const NODEV: &str = "NoDev.callback nodevice
Other.plan fail
NoDev.plan fail
Other.host pass
NoDev.alloc oom
Other.last pass
NoDev.segv segv
Other.end pass
NoDev.after_segv fail
";

/// Runs of `mixed` log an amdgpu reset to the one recorded kernel log: they take turns, so no
/// run reads another's reset.
static KMSG: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn kmsg_turn() -> std::sync::MutexGuard<'static, ()> {
    KMSG.lock().unwrap_or_else(|e| e.into_inner())
}

/// The recorded machine `m`'s root (see [`common::kfd::machines`]) in `f`, as an argument.
fn sysfs_root(f: &World, m: &str) -> String {
    f.path(m).display().to_string()
}

fn recipe(
    name: &str,
    client: &str,
    shards: u32,
    timeout: &str,
    tests: &Path,
    kmsg: &Path,
) -> String {
    format!(
        "name = \"{name}\"\nversion = \"1.0\"\nsummary = \"fake test client\"\nlicense = \"MIT\"\n\n[source]\npath = \"src/{name}\"\n\n[build]\nsystem = \"copy\"\ndest = \"bin\"\n\n[test]\nclient = \"bin/{client}\"\nshards = {shards}\ntimeout = \"{timeout}\"\nenv = {{ FAKE_TESTS = \"{}\", FAKE_KMSG = \"{}\" }}\n",
        tests.display(),
        kmsg.display()
    )
}

/// The catalog, the clients and the store, built once for every test here. None when cc is
/// missing (and not in CI).
fn fixture() -> Option<&'static World> {
    static F: OnceLock<Option<World>> = OnceLock::new();
    F.get_or_init(|| {
        if !require("a C compiler (cc)", cc_works()) {
            return None;
        }
        let w = World::new().shared("testrun").build();
        w.machines();
        let dir = w.root().to_path_buf();
        let rel = hw_release(&dir);
        // The gtest client, and a client linked against a library that is not installed.
        let bin = dir.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let cc = |args: &[&str]| {
            let o = Command::new("cc").args(args).output().unwrap();
            assert!(o.status.success(), "cc {args:?}: {}", String::from_utf8_lossy(&o.stderr));
        };
        let fake = bin.join("fakegtest");
        cc(&["-O1", "-o", fake.to_str().unwrap(), manifest().join("tests/fixtures/testrun/fakegtest.c").to_str().unwrap()]);
        std::fs::write(bin.join("gone.c"), "int gone(void) { return 0; }\n").unwrap();
        std::fs::write(bin.join("missing.c"), "int gone(void);\nint main(void) { return gone(); }\n").unwrap();
        cc(&["-shared", "-fPIC", "-o", bin.join("libgone.so").to_str().unwrap(), bin.join("gone.c").to_str().unwrap()]);
        cc(&["-o", bin.join("missing-test").to_str().unwrap(), bin.join("missing.c").to_str().unwrap(), "-L", bin.to_str().unwrap(), "-lgone"]);
        let kmsg = dir.join("m-gfx90c/dev/kmsg");
        let lists = dir.join("lists");
        std::fs::create_dir_all(&lists).unwrap();
        let passing: String = (0..6).map(|i| format!("Pass.t{i} pass\n")).collect();
        let slow: String = (0..20).map(|i| format!("Slow.t{i:02} slow\n")).collect();
        for (name, client, shards, timeout, list) in [
            ("passing", "fakegtest", 3, "5s", passing.as_str()),
            ("mixed", "fakegtest", 2, "2s", MIXED),
            ("slow", "fakegtest", 1, "10s", slow.as_str()),
            ("nodev", "fakegtest", 2, "5s", NODEV),
            ("missing", "missing-test", 1, "5s", "Never.runs pass\n"),
        ] {
            let src = rel.join("src").join(name);
            std::fs::create_dir_all(&src).unwrap();
            std::fs::copy(bin.join(client), src.join(client)).unwrap();
            let l = lists.join(format!("{name}.txt"));
            std::fs::write(&l, list).unwrap();
            std::fs::write(rel.join(format!("{name}.toml")), recipe(name, client, shards, timeout, &l, &kmsg)).unwrap();
        }
        // An each-binary corpus (rocm-examples' shape): one program, behaving by its name.
        let src = rel.join("src/examples");
        std::fs::create_dir_all(&src).unwrap();
        let ex = bin.join("example");
        std::fs::write(bin.join("example.c"), EXAMPLE_C).unwrap();
        cc(&["-o", ex.to_str().unwrap(), bin.join("example.c").to_str().unwrap()]);
        for name in EXAMPLES.iter().map(|(n, _, _)| *n).chain(["notme"]) {
            std::fs::copy(&ex, src.join(name)).unwrap();
        }
        std::fs::write(src.join("ex_README"), "not executable\n").unwrap();
        std::fs::write(
            rel.join("examples.toml"),
            "name = \"examples\"\nversion = \"1.0\"\nsummary = \"fake examples\"\nlicense = \"MIT\"\n\n[source]\npath = \"src/examples\"\n\n[build]\nsystem = \"copy\"\ndest = \"bin\"\n\n[test]\nkind = \"each-binary\"\ndir = \"bin/ex_*\"\nshards = 2\ntimeout = \"2s\"\nskip-exit-code = 77\nargs = [\"--quick\"]\n",
        )
        .unwrap();
        for arch in ["gfx90c", "gfx900", "gfx902"] {
            let o = w.run(&["--recipes", "recipes", "build", "passing", "mixed", "slow", "nodev", "missing", "examples", "--arch", arch, "--runtime", "host"]);
            assert_eq!(o.code, 0, "build for {arch}:\n{}\n{}", o.stdout, o.stderr);
        }
        Some(w)
    })
    .as_ref()
}

fn test_run(f: &World, args: &[&str]) -> Out {
    let mut full = vec!["--recipes", "recipes", "--quiet", "test"];
    full.extend_from_slice(args);
    f.run(&full)
}

fn results(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path.join("results.json")).unwrap()).unwrap()
}

fn by_name<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["tests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("no test {name} in {v:#}"))
}

// ---------------------------------------------------------------- detect

fn detect_text(base: &Path, machine: &str, json: bool) -> (i32, String) {
    let root = base.join(machine);
    let mut args = vec!["detect", "--sysfs-root", root.to_str().unwrap()];
    if json {
        args.extend(["--format", "json"]);
    }
    let o = rf(base, &args);
    (o.code, o.stdout.replace(root.to_str().unwrap(), "[ROOT]"))
}

#[test]
fn detect_reads_recorded_machines() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("no-user-config.toml"), "").unwrap();
    machines(tmp.path());
    for m in ["m-gfx90c", "m-gfx902", "m-gfx1151", "m-none"] {
        let (code, text) = detect_text(tmp.path(), m, false);
        assert_eq!(code, if m == "m-none" { 1 } else { 0 }, "{text}");
        insta::assert_snapshot!(format!("detect_{m}"), text);
        let (_, json) = detect_text(tmp.path(), m, true);
        insta::assert_snapshot!(format!("detect_{m}_json"), json);
        let doc: Value = serde_json::from_str(&json).unwrap();
        crate::common::schema::assert_matches_schema(tmp.path(), "device", &doc);
    }
    // HSA_XNACK=1 with retry enabled (noretry=0) turns xnack on.
    let root = tmp.path().join("m-gfx902");
    let o = base_cmd(
        tmp.path(),
        &["detect", "--sysfs-root", root.to_str().unwrap()],
    )
    .env("HSA_XNACK", "1")
    .output()
    .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("gfx902:xnack+"), "{text}");
}

// ---------------------------------------------------------------- test

#[test]
fn shards_run_with_gtest_variables() {
    let Some(f) = fixture() else { return };
    let out = f.path("r-passing");
    let started = Instant::now();
    let o = test_run(
        f,
        &[
            "passing",
            "--arch",
            "gfx90c",
            "--sysfs-root",
            &sysfs_root(f, "m-gfx90c"),
            "--out",
            out.to_str().unwrap(),
            "--machine",
            "laptop-a",
        ],
    );
    assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    assert!(started.elapsed() < Duration::from_secs(20));
    let v = results(&out);
    assert_eq!(v["summary"]["passed"], 6);
    assert_eq!(v["spoofed"], false);
    assert_eq!(v["shards"].as_array().unwrap().len(), 3);
    // gtest's rule: test i runs in shard i % 3.
    for i in 0..6 {
        assert_eq!(by_name(&v, &format!("Pass.t{i}"))["shard"], i % 3);
    }
    for s in 0..3 {
        let log =
            std::fs::read_to_string(out.join(format!("logs/shard-{s}.attempt-1.log"))).unwrap();
        assert_eq!(log.matches("[ RUN      ]").count(), 2, "{log}");
    }
    assert_eq!(v["xml_check"]["agree"], 6);
    assert!(
        v["environment"]["LD_LIBRARY_PATH"]
            .as_str()
            .unwrap()
            .contains("prefix/lib")
    );
    assert!(
        v["environment"]["ROCM_PATH"]
            .as_str()
            .unwrap()
            .ends_with("prefix")
    );
    let junit = std::fs::read_to_string(out.join("junit.xml")).unwrap();
    assert!(
        junit.contains("<testcase classname=\"Pass\" name=\"t0\""),
        "{junit}"
    );
    assert!(o.stdout.contains("6 tests: 6 passed"), "{}", o.stdout);
}

/// Under --format json a finished run prints where its results went and how its tests ended
/// (rocforge.test/1), as its schema says; its exit status is the run's.
#[test]
fn a_finished_run_speaks_json() {
    let Some(f) = fixture() else { return };
    let out = f.path("r-passing-json");
    let o = test_run(
        f,
        &[
            "passing",
            "--arch",
            "gfx90c",
            "--sysfs-root",
            &sysfs_root(f, "m-gfx90c"),
            "--out",
            out.to_str().unwrap(),
            "--machine",
            "laptop-a",
            "--format",
            "json",
        ],
    );
    assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    let v: Value = serde_json::from_str(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", o.stdout));
    crate::common::schema::assert_matches_schema(f.root(), "test", &v);
    assert_eq!(v["summary"]["passed"], 6, "{v:#}");
    assert_eq!(v["classes"], serde_json::json!({}), "{v:#}");
    assert_eq!(v["submitted"], Value::Null);
    assert_eq!(v["results"], out.join("results.json").to_str().unwrap());
    assert_eq!(v["junit"], out.join("junit.xml").to_str().unwrap());
}

#[test]
fn hangs_and_crashes_restart_the_shard_and_every_failure_is_classified() {
    let Some(f) = fixture() else { return };
    let out = f.path("r-mixed");
    let turn = kmsg_turn();
    let o = test_run(
        f,
        &[
            "mixed",
            "--arch",
            "gfx90c",
            "--sysfs-root",
            &sysfs_root(f, "m-gfx90c"),
            "--out",
            out.to_str().unwrap(),
            "--machine",
            "laptop-a",
        ],
    );
    drop(turn);
    assert_eq!(o.code, 1, "{}\n{}", o.stdout, o.stderr);
    let v = results(&out);
    let expect = [
        ("Mixed.pass1", "passed", None),
        ("Mixed.fail1", "failed", Some("assertion")),
        ("Mixed.skip1", "skipped", Some("skipped")),
        ("Mixed.segv", "crashed", Some("crash")),
        ("Mixed.hang", "hung", Some("hang")),
        ("Mixed.nobinary", "failed", Some("no-code-object")),
        ("Mixed.tensile", "failed", Some("no-code-object")),
        ("Mixed.oom", "failed", Some("out-of-memory")),
        ("Mixed.reset", "hung", Some("gpu-reset")),
        ("Mixed.after_crash", "passed", None),
        ("Mixed.after_hang", "passed", None),
        ("Mixed.last", "passed", None),
    ];
    assert_eq!(
        v["tests"].as_array().unwrap().len(),
        expect.len(),
        "{:#}",
        v["tests"]
    );
    for (name, outcome, class) in expect {
        let t = by_name(&v, name);
        assert_eq!(t["outcome"], outcome, "{name}: {t:#}");
        assert_eq!(t["class"].as_str(), class, "{name}: {t:#}");
    }
    // Excerpts prove the class.
    assert!(
        by_name(&v, "Mixed.nobinary")["excerpt"]
            .as_str()
            .unwrap()
            .contains("hipErrorNoBinaryForGpu")
    );
    assert!(
        by_name(&v, "Mixed.tensile")["excerpt"]
            .as_str()
            .unwrap()
            .contains("TensileLibrary.dat")
    );
    assert!(
        by_name(&v, "Mixed.fail1")["excerpt"]
            .as_str()
            .unwrap()
            .contains("Expected equality")
    );
    assert!(
        by_name(&v, "Mixed.segv")["excerpt"]
            .as_str()
            .unwrap()
            .contains("SIGSEGV")
    );
    assert!(
        by_name(&v, "Mixed.reset")["excerpt"]
            .as_str()
            .unwrap()
            .contains("GPU reset begin")
    );
    // The per-shard timeout (2 s without progress) killed the hung tests, not much later.
    for name in ["Mixed.hang", "Mixed.reset"] {
        let ms = by_name(&v, name)["duration_ms"].as_u64().unwrap();
        assert!((1900..5000).contains(&ms), "{name} took {ms} ms");
    }
    // Shard 0 restarted twice (hang, reset), shard 1 once (segv); restarts left out what had run.
    let shards = v["shards"].as_array().unwrap();
    assert_eq!(shards[0]["attempts"], 3, "{shards:?}");
    assert_eq!(shards[1]["attempts"], 2, "{shards:?}");
    let restart = std::fs::read_to_string(out.join("logs/shard-0.attempt-2.log")).unwrap();
    assert!(!restart.contains("[ RUN      ] Mixed.hang"), "{restart}");
    assert!(restart.contains("[ RUN      ] Mixed.tensile"), "{restart}");
    assert!(
        !restart.contains("[ RUN      ] Mixed.fail1"),
        "a restart must stay in its shard: {restart}"
    );
    let journal = std::fs::read_to_string(out.join("journal.jsonl")).unwrap();
    assert_eq!(
        journal
            .lines()
            .filter(|l| l.contains("\"type\":\"test\""))
            .count(),
        12
    );
    assert_eq!(v["classes"]["no-code-object"], 2);
    assert_eq!(v["kernel_log"], "read");
}

#[test]
fn failures_in_a_process_that_found_no_gpu_are_no_gpu() {
    let Some(f) = fixture() else { return };
    let out = f.path("r-nodev");
    let o = test_run(
        f,
        &[
            "nodev",
            "--arch",
            "gfx90c",
            "--sysfs-root",
            &sysfs_root(f, "m-gfx90c"),
            "--out",
            out.to_str().unwrap(),
        ],
    );
    assert_eq!(o.code, 1, "{}\n{}", o.stdout, o.stderr);
    let v = results(&out);
    for (name, outcome, class) in [
        ("NoDev.callback", "no-gpu", "no-gpu"),
        ("NoDev.plan", "no-gpu", "no-gpu"),
        ("NoDev.alloc", "no-gpu", "no-gpu"),
        // A crash is the client's whatever the device; the test after it ran in a new process
        // that showed nothing, and another shard's process showed nothing either.
        ("NoDev.segv", "crashed", "crash"),
        ("NoDev.after_segv", "failed", "assertion"),
        ("Other.plan", "failed", "assertion"),
        ("Other.host", "passed", ""),
    ] {
        let t = by_name(&v, name);
        assert_eq!(t["outcome"], outcome, "{name}: {t:#}");
        assert_eq!(t["class"].as_str().unwrap_or(""), class, "{name}: {t:#}");
    }
    let plan = by_name(&v, "NoDev.plan")["excerpt"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        plan.starts_with("no GPU in the same process: NoDev.callback found no GPU in this client process; this test failed without one (read alone: assertion)"),
        "{plan}"
    );
    assert!(
        plan.contains("Which is: 1.5"),
        "the test's own lines are kept: {plan}"
    );
    // Resuming replays the journal and settles the same way.
    let again = test_run(
        f,
        &[
            "nodev",
            "--arch",
            "gfx90c",
            "--sysfs-root",
            &sysfs_root(f, "m-gfx90c"),
            "--out",
            out.to_str().unwrap(),
            "--resume",
        ],
    );
    assert_eq!(again.code, 1, "{}\n{}", again.stdout, again.stderr);
    assert_eq!(results(&out)["tests"], v["tests"]);
}

#[test]
fn missing_library_is_exit_127() {
    let Some(f) = fixture() else { return };
    let out = f.path("r-missing");
    let o = test_run(
        f,
        &[
            "missing",
            "--arch",
            "gfx90c",
            "--sysfs-root",
            &sysfs_root(f, "m-gfx90c"),
            "--out",
            out.to_str().unwrap(),
        ],
    );
    assert_eq!(o.code, 1, "{}\n{}", o.stdout, o.stderr);
    let v = results(&out);
    let t = &v["tests"][0];
    assert_eq!(t["class"], "missing-library", "{t:#}");
    assert!(
        t["excerpt"].as_str().unwrap().contains("libgone.so"),
        "{t:#}"
    );
    assert_eq!(v["shards"][0]["exit_code"], 127);
}

/// The report counts what `rocforge test` printed, category for category: the mixed suite's
/// hung and crashed tests and the exit-127 run's missing library, from real runs.
#[test]
fn report_counts_match_what_test_printed() {
    let Some(f) = fixture() else { return };
    let mut printed = Vec::new();
    let mut bundles = Vec::new();
    for (component, dir) in [("mixed", "rc-mixed"), ("missing", "rc-missing")] {
        let out = f.root().join(dir);
        let turn = kmsg_turn();
        let o = test_run(
            f,
            &[
                component,
                "--arch",
                "gfx90c",
                "--sysfs-root",
                &sysfs_root(f, "m-gfx90c"),
                "--out",
                out.to_str().unwrap(),
                "--machine",
                "laptop-a",
            ],
        );
        drop(turn);
        assert_eq!(o.code, 1, "{}\n{}", o.stdout, o.stderr);
        printed.push(o.stdout);
        bundles.push(out.join("results.json"));
    }
    assert!(
        printed[0].starts_with("12 tests: 4 passed, 4 failed, 1 skipped, 2 hung, 1 crashed\n"),
        "{}",
        printed[0]
    );
    let report = |bundles: &[PathBuf], to: &str| -> String {
        let out = f.root().join(to);
        let mut args = vec!["report", "--out", out.to_str().unwrap()];
        args.extend(bundles.iter().map(|b| b.to_str().unwrap()));
        let o = f.run(&args);
        assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
        std::fs::read_to_string(out.join("report.md")).unwrap()
    };
    // The class lines `test` printed: "  <class> <n>".
    let classes = |stdout: &str| -> Vec<(String, String)> {
        stdout
            .lines()
            .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
            .filter_map(|l| {
                let mut w = l.split_whitespace();
                let (c, n) = (w.next()?, w.next()?);
                (w.next().is_none() && n.parse::<usize>().is_ok()).then(|| (c.into(), n.into()))
            })
            .collect()
    };
    for (i, stdout) in printed.iter().enumerate() {
        let md = report(&bundles[i..=i], &format!("rc-report-{i}"));
        let line = stdout.lines().next().unwrap();
        assert!(
            md.contains(&format!("\n## Totals\n\n{line}\n")),
            "{line}\n{md}"
        );
        let cs = classes(stdout);
        assert!(!cs.is_empty(), "{stdout}");
        for (c, n) in cs {
            assert!(
                md.lines()
                    .any(|l| l.starts_with(&format!("| {c} | "))
                        && l.ends_with(&format!(" | {n} |"))),
                "{c} {n} not in the report:\n{md}"
            );
        }
    }
    let md = report(&bundles, "rc-report-both");
    assert!(
        md.contains("\n13 tests: 4 passed, 4 failed, 1 skipped, 2 hung, 2 crashed\n"),
        "{md}"
    );
    // One row, one column: both runs of gfx90c on laptop-a, each with its counts.
    assert!(
        md.contains("| mixed | ")
            && md.contains("<br>4 passed, 4 failed, 1 skipped, 2 hung, 1 crashed |"),
        "{md}"
    );
    // The loader's exit 127 ended the client inside the test: crashed, class missing-library.
    assert!(md.contains("<br>1 crashed |"), "{md}");
}

/// Ctrl-C stops at once, records nothing as crashed, and says the command that continues.
#[test]
fn ctrl_c_says_how_to_resume() {
    let Some(f) = fixture() else { return };
    let out = f.path("r-slow-interrupted");
    let root = sysfs_root(f, "m-gfx90c");
    let args = [
        "--recipes",
        "recipes",
        "--quiet",
        "test",
        "slow",
        "--arch",
        "gfx90c",
        "--sysfs-root",
        &root,
        "--out",
        out.to_str().unwrap(),
    ];
    let child = f
        .command(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let journal = out.join("journal.jsonl");
    let start = Instant::now();
    while std::fs::read_to_string(&journal).map_or(0, |j| j.matches("\"type\":\"test\"").count())
        < 3
    {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no progress in the journal"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: signals our own child, as a terminal's Ctrl-C would.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let o = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(130), "{stderr}");
    let resume = format!(
        "rocforge test slow --arch gfx90c --out {} --resume",
        out.display()
    );
    assert!(
        stderr.contains(&format!(
            "interrupted: the tests that finished are kept; `{resume}` continues"
        )),
        "{stderr}"
    );
    let text = std::fs::read_to_string(&journal).unwrap();
    assert!(!text.contains("\"crashed\""), "{text}");
    let mut resumed = args.to_vec();
    resumed.push("--resume");
    let o = f.run(&resumed);
    assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    assert_eq!(results(&out)["summary"]["passed"], 20);
}

#[test]
fn resume_after_the_runner_is_killed() {
    let Some(f) = fixture() else { return };
    let out = f.path("r-slow");
    let root = sysfs_root(f, "m-gfx90c");
    let args = [
        "--recipes",
        "recipes",
        "--quiet",
        "test",
        "slow",
        "--arch",
        "gfx90c",
        "--sysfs-root",
        &root,
        "--out",
        out.to_str().unwrap(),
    ];
    let mut child = f
        .command(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let journal = out.join("journal.jsonl");
    let start = Instant::now();
    loop {
        let n =
            std::fs::read_to_string(&journal).map_or(0, |j| j.matches("\"type\":\"test\"").count());
        if n >= 5 {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no progress in the journal"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let before = std::fs::read_to_string(&journal)
        .unwrap()
        .matches("\"type\":\"test\"")
        .count();
    assert!(before < 20);
    // Starting over is refused while the journal holds an unfinished run.
    let o = f.run(&args);
    assert_eq!(o.code, 1);
    assert!(
        o.stderr.contains("unfinished run") && o.stderr.contains("--resume"),
        "{}",
        o.stderr
    );
    let mut resumed = args.to_vec();
    resumed.push("--resume");
    let o = f.run(&resumed);
    assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    let v = results(&out);
    assert_eq!(v["summary"]["passed"], 20, "{:#}", v["summary"]);
    let text = std::fs::read_to_string(&journal).unwrap();
    for i in 0..20 {
        let name = format!("\"name\":\"Slow.t{i:02}\"");
        assert_eq!(
            text.matches(&name).count(),
            1,
            "Slow.t{i:02} journaled once:\n{text}"
        );
    }
    // The resumed run did not run the journaled tests again.
    let log = std::fs::read_to_string(out.join("logs/shard-0.attempt-2.log")).unwrap();
    assert!(!log.contains("[ RUN      ] Slow.t00"), "{log}");
}

/// A release built for gfx90c,gfx902 (a line's default) is what `test --arch gfx90c` tests,
/// saying so; once a build for gfx90c alone exists, that one is taken.
#[test]
fn a_build_for_several_targets_is_tested_for_one_of_them() {
    let Some(f) = fixture() else { return };
    // A catalog of its own, so its store holds only what this test builds.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    rocforge::fsutil::copy_tree(&f.path("recipes"), &dir.join("recipes")).unwrap();
    std::fs::write(dir.join("no-user-config.toml"), "").unwrap();
    let build = |arch: &str| {
        let o = rf(
            dir,
            &[
                "--recipes",
                "recipes",
                "build",
                "passing",
                "--arch",
                arch,
                "--runtime",
                "host",
            ],
        );
        assert_eq!(o.code, 0, "build for {arch}:\n{}", o.stderr);
    };
    let root = sysfs_root(f, "m-gfx90c");
    let test = |out: &str| {
        let o = rf(
            dir,
            &[
                "--recipes",
                "recipes",
                "test",
                "passing",
                "--arch",
                "gfx90c",
                "--sysfs-root",
                &root,
                "--out",
                out,
            ],
        );
        assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
        let line = o
            .stderr
            .lines()
            .find(|l| l.starts_with("using passing "))
            .unwrap_or_else(|| panic!("which build is not said:\n{}", o.stderr))
            .to_string();
        let key = line.split(' ').nth(2).unwrap().to_string();
        let v = results(&dir.join(out));
        assert!(
            v.to_string().contains(&format!("\"key\":\"{key}")),
            "{line}: {v:#}"
        );
        line.replace(&key, "[KEY]")
    };
    build("gfx90c,gfx902");
    assert_eq!(
        test("wide"),
        "using passing [KEY] from the store, built for gfx902,gfx90c (host build)"
    );
    build("gfx90c");
    assert_eq!(
        test("exact"),
        "using passing [KEY] from the store, built for gfx90c (host build)"
    );
}

#[test]
fn target_mismatch_spoof_and_missing_artifacts() {
    let Some(f) = fixture() else { return };
    // A gfx90c artifact on a machine whose KFD reports gfx902 (old kernels report Renoir so).
    let o = test_run(
        f,
        &[
            "passing",
            "--arch",
            "gfx90c",
            "--sysfs-root",
            &sysfs_root(f, "m-gfx902"),
            "--out",
            "x",
        ],
    );
    assert_eq!(o.code, 1);
    assert!(
        o.stderr
            .contains("this machine's GPU is gfx902, not gfx90c"),
        "{}",
        o.stderr
    );
    assert!(o.stderr.contains("--spoof"), "{}", o.stderr);
    // No GPU at all.
    let o = test_run(
        f,
        &[
            "passing",
            "--arch",
            "gfx90c",
            "--sysfs-root",
            &sysfs_root(f, "m-none"),
            "--out",
            "x",
        ],
    );
    assert_eq!(o.code, 1);
    assert!(
        o.stderr.contains("no GPU found") && o.stderr.contains("render"),
        "{}",
        o.stderr
    );
    // Not built for gfx1151.
    let o = test_run(
        f,
        &[
            "passing",
            "--arch",
            "gfx1151",
            "--sysfs-root",
            &sysfs_root(f, "m-gfx1151"),
            "--out",
            "x",
        ],
    );
    assert_eq!(o.code, 1);
    assert!(
        o.stderr.contains("rocforge build passing --arch gfx1151"),
        "{}",
        o.stderr
    );
    // --spoof of the wrong target names the right one.
    let o = test_run(
        f,
        &[
            "passing",
            "--arch",
            "gfx902",
            "--spoof",
            "--sysfs-root",
            &sysfs_root(f, "m-gfx90c"),
            "--out",
            "x",
        ],
    );
    assert_eq!(o.code, 1);
    assert!(o.stderr.contains("--arch gfx900 --spoof"), "{}", o.stderr);
    // The gfx900 artifact on the gfx90c under HSA_OVERRIDE_GFX_VERSION=9.0.0.
    let out = f.path("r-spoofed");
    let o = test_run(
        f,
        &[
            "passing",
            "--arch",
            "gfx900",
            "--spoof",
            "--sysfs-root",
            &sysfs_root(f, "m-gfx90c"),
            "--out",
            out.to_str().unwrap(),
            "--machine",
            "laptop-a",
        ],
    );
    assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    let v = results(&out);
    assert_eq!(v["spoofed"], true);
    assert_eq!(v["hsa_override"], "9.0.0");
    assert_eq!(v["environment"]["HSA_OVERRIDE_GFX_VERSION"], "9.0.0");
    assert_eq!(v["device"]["target"], "gfx90c");
    assert_eq!(v["arch"], "gfx900");
}

// ---------------------------------------------------------------- the plan (--dry-run)

/// Content keys (and any other hex run of 8 or more) as [KEY].
fn hex_redacted(text: &str) -> String {
    let mut out = String::new();
    for word in text.split_inclusive([' ', '\n', ',', ':', '/']) {
        let core = word.trim_end_matches([' ', '\n', ',', ':', '/']);
        if core.len() >= 8 && core.chars().all(|c| c.is_ascii_hexdigit()) {
            out += &format!("[KEY]{}", &word[core.len()..]);
        } else {
            out += word;
        }
    }
    out
}

/// `test --dry-run` prints the plan: the store build chosen (its key), the GPU or the spoof,
/// the client, shards, timeout and environment; it writes nothing (no results directory, no
/// prefix, no journal), and refuses what the run would refuse.
#[test]
fn dry_run_prints_the_plan_and_writes_nothing() {
    let Some(f) = fixture() else { return };
    // A catalog and store of its own, so nothing else writes to the tree compared.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    rocforge::fsutil::copy_tree(&f.path("recipes"), &dir.join("recipes")).unwrap();
    std::fs::write(dir.join("no-user-config.toml"), "").unwrap();
    for (arch, component) in [
        ("gfx90c", "passing"),
        ("gfx90c", "examples"),
        ("gfx900", "passing"),
    ] {
        let o = rf(
            dir,
            &[
                "--recipes",
                "recipes",
                "build",
                component,
                "--arch",
                arch,
                "--runtime",
                "host",
            ],
        );
        assert_eq!(o.code, 0, "build {component} for {arch}:\n{}", o.stderr);
    }
    let root = sysfs_root(f, "m-gfx90c");
    let dry = |extra: &[&str]| -> Out {
        let mut args = vec!["--recipes", "recipes", "--quiet"];
        args.extend_from_slice(extra);
        args.extend([
            "--sysfs-root",
            root.as_str(),
            "--out",
            "res",
            "--machine",
            "laptop-a",
            "--dry-run",
        ]);
        // A fixed PATH: the client's PATH is the prefix's bin, then the inherited one.
        let out = base_cmd(dir, &args)
            .env("PATH", "/usr/bin:/bin")
            .output()
            .unwrap();
        Out {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    };
    let shown = |text: &str| {
        hex_redacted(
            &text
                .replace(&dir.display().to_string(), "[DIR]")
                .replace(&f.root().display().to_string(), "[FIXTURE]"),
        )
    };
    let before = listing(dir);

    let o = dry(&["test", "passing", "--arch", "gfx90c"]);
    assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    insta::assert_snapshot!("test_dry_run", shown(&o.stdout));
    assert_eq!(listing(dir), before, "a dry run writes nothing");
    assert!(!dir.join("res").exists());

    // On a machine without the GPU the plan for --arch is still made, and says so; running it
    // is refused.
    let none = sysfs_root(f, "m-none");
    let on_none = |extra: &[&str]| {
        let mut args = vec![
            "--recipes",
            "recipes",
            "test",
            "passing",
            "--arch",
            "gfx90c",
            "--sysfs-root",
        ];
        args.push(none.as_str());
        args.extend(["--out", "res"]);
        args.extend_from_slice(extra);
        rf(dir, &args)
    };
    let o = on_none(&["--dry-run"]);
    assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    assert!(o.stdout.contains("device   no GPU\n"), "{}", o.stdout);
    assert!(
        o.stdout.contains(
            "no GPU here (none under [FIXTURE]"
                .replace("[FIXTURE]", &f.root().display().to_string())
                .as_str()
        ),
        "{}",
        o.stdout
    );
    assert!(
        o.stdout.contains("this is the plan for gfx90c"),
        "{}",
        o.stdout
    );
    let o = on_none(&[]);
    assert_eq!(o.code, 1, "{}\n{}", o.stdout, o.stderr);
    assert!(o.stderr.contains("no GPU found under"), "{}", o.stderr);
    // Nor does a plan need the build: for a target nothing is built for, it says what the run
    // would test and the command that builds it.
    let on_gfx902 = |format: &str| {
        rf(
            dir,
            &[
                "--recipes",
                "recipes",
                "--format",
                format,
                "test",
                "passing",
                "--arch",
                "gfx902",
                "--sysfs-root",
                none.as_str(),
                "--out",
                "res",
                "--dry-run",
            ],
        )
    };
    let o = on_gfx902("text");
    assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    assert!(
        o.stdout.contains("from     nothing yet: ")
            && o.stdout
                .contains("`rocforge build passing --arch gfx902` builds it"),
        "{}",
        o.stdout
    );
    let o = on_gfx902("json");
    let plan: Value =
        serde_json::from_str(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", o.stderr));
    crate::common::schema::assert_matches_schema(dir, "test-plan", &plan);
    assert_eq!(plan["source"]["kind"], "not-built", "{plan:#}");
    assert_eq!(
        plan["source"]["build"],
        "rocforge build passing --arch gfx902"
    );
    assert_eq!(listing(dir), before, "nothing written either way");

    let o = dry(&["--format", "json", "test", "passing", "--arch", "gfx90c"]);
    assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    let plan: Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(plan["schema"], "rocforge.test-plan/1");
    crate::common::schema::assert_matches_schema(dir, "test-plan", &plan);
    let store = rf(dir, &["--format", "json", "store", "list"]);
    let entries: Value = serde_json::from_str(&store.stdout).unwrap();
    let built = entries["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["component"] == "passing" && e["targets"] == serde_json::json!(["gfx90c"]))
        .unwrap_or_else(|| panic!("no gfx90c build of passing: {entries:#}"));
    assert_eq!(plan["tested"]["key"], built["key"]);
    assert_eq!(plan["source"]["kind"], "store");
    assert_eq!(plan["device"]["target"], "gfx90c");
    assert_eq!(plan["spoofed"], false);
    assert_eq!(
        plan["env_remove"],
        serde_json::json!(["HSA_OVERRIDE_GFX_VERSION"])
    );
    let shards = plan["shards"].as_array().unwrap();
    assert_eq!(shards.len(), 3);
    for (i, s) in shards.iter().enumerate() {
        assert_eq!(s["shard"], i);
        assert_eq!(s["env"]["GTEST_TOTAL_SHARDS"], "3");
        assert_eq!(s["env"]["GTEST_SHARD_INDEX"], i.to_string());
    }
    assert_eq!(plan["corpus"]["client"], "bin/fakegtest");
    assert_eq!(plan["corpus"]["timeout_secs"], 5);
    assert!(
        plan["prefix"].as_str().unwrap().ends_with("res/prefix"),
        "{plan:#}"
    );

    // A corpus of programs: each shard's programs are known before the run.
    let o = dry(&["--format", "json", "test", "examples", "--arch", "gfx90c"]);
    assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    let plan: Value = serde_json::from_str(&o.stdout).unwrap();
    let names: Vec<String> = EXAMPLES
        .iter()
        .map(|(n, _, _)| format!("bin/{n}"))
        .collect();
    assert_eq!(plan["corpus"]["tests"], names.len());
    for shard in 0..2 {
        let mine: Vec<&String> = names.iter().skip(shard).step_by(2).collect();
        assert_eq!(
            plan["shards"][shard]["tests"],
            serde_json::json!(mine),
            "{plan:#}"
        );
    }

    // The spoof: the gfx900 build on the gfx90c, under HSA_OVERRIDE_GFX_VERSION.
    let o = dry(&["test", "passing", "--arch", "gfx900", "--spoof"]);
    assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    insta::assert_snapshot!("test_dry_run_spoofed", shown(&o.stdout));
    let o = dry(&[
        "--format", "json", "test", "passing", "--arch", "gfx900", "--spoof",
    ]);
    let plan: Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(plan["spoofed"], true);
    assert_eq!(plan["hsa_override"], "9.0.0");
    assert_eq!(plan["env"]["HSA_OVERRIDE_GFX_VERSION"], "9.0.0");
    assert_eq!(plan["env_remove"], serde_json::json!([]));
    assert_eq!(plan["device"]["target"], "gfx90c");
    assert_eq!(plan["target"], "gfx900");

    // A refusal is the run's own.
    let other = sysfs_root(f, "m-gfx902");
    let o = rf(
        dir,
        &[
            "--recipes",
            "recipes",
            "test",
            "passing",
            "--arch",
            "gfx90c",
            "--sysfs-root",
            &other,
            "--dry-run",
        ],
    );
    assert_eq!(o.code, 1);
    assert!(
        o.stderr
            .contains("this machine's GPU is gfx902, not gfx90c"),
        "{}",
        o.stderr
    );
    assert_eq!(listing(dir), before, "a dry run writes nothing");
}

// ---------------------------------------------------------------- each-binary corpora

/// A stand-in for a self-checking example program: what it does depends on its name.
const EXAMPLE_C: &str = r#"#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
int main(int argc, char **argv) {
    const char *me = strrchr(argv[0], '/');
    me = me ? me + 1 : argv[0];
    char cwd[4096];
    printf("%s in %s with %s\n", me, getcwd(cwd, sizeof cwd) ? cwd : "?", argc > 1 ? argv[1] : "no args");
    fflush(stdout);
    if (!strcmp(me, "ex_fail")) { fprintf(stderr, "Validation failed: 3 mismatches\n"); return 1; }
    if (!strcmp(me, "ex_skip")) { printf("no suitable device: skipped\n"); return 77; }
    if (!strcmp(me, "ex_segv")) raise(SIGSEGV);
    if (!strcmp(me, "ex_hang")) for (;;) sleep(1);
    if (!strcmp(me, "ex_nobinary")) { fprintf(stderr, "hipErrorNoBinaryForGpu: Unable to find code object for all current devices!\n"); return 1; }
    if (!strcmp(me, "ex_nogpu")) { fprintf(stderr, "An error encountered: \"no ROCm-capable device is detected\" at main.hip:57\n"); return 1; }
    if (!strcmp(me, "ex_slow")) sleep(1);
    printf("Validation passed.\n");
    return 0;
}
"#;

/// The corpus, sorted by name: (binary, outcome, class).
const EXAMPLES: [(&str, &str, Option<&str>); 8] = [
    ("ex_fail", "failed", Some("assertion")),
    ("ex_hang", "hung", Some("hang")),
    ("ex_nobinary", "failed", Some("no-code-object")),
    // What every rocm-examples program prints on a machine without a GPU (HIP_CHECK).
    ("ex_nogpu", "no-gpu", Some("no-gpu")),
    ("ex_pass", "passed", None),
    ("ex_segv", "crashed", Some("crash")),
    ("ex_skip", "skipped", Some("skipped")),
    ("ex_slow", "passed", None),
];

#[test]
fn each_binary_corpus_runs_every_executable_as_one_test() {
    let Some(f) = fixture() else { return };
    let out = f.path("r-examples");
    let args = |resume: bool| {
        let mut v = vec![
            "--recipes".to_string(),
            "recipes".into(),
            "--quiet".into(),
            "test".into(),
            "examples".into(),
            "--arch".into(),
            "gfx90c".into(),
            "--sysfs-root".into(),
            sysfs_root(f, "m-gfx90c"),
            "--out".into(),
            out.display().to_string(),
            "--machine".into(),
            "laptop-a".into(),
        ];
        if resume {
            v.push("--resume".into());
        }
        v
    };
    // Killed while ex_slow (shard 1's last binary) runs; then resumed.
    let journal = out.join("journal.jsonl");
    let turn = kmsg_turn();
    // Once ex_segv is journaled, ex_slow runs for a second: killed in the middle of it.
    kill_when_journaled(f.root(), &args(false), &journal, "bin/ex_segv", 100);
    let o = f.run(&args(true).iter().map(String::as_str).collect::<Vec<_>>());
    drop(turn);
    assert_eq!(o.code, 1, "{}\n{}", o.stdout, o.stderr);
    let v = results(&out);
    assert_eq!(
        v["tests"].as_array().unwrap().len(),
        EXAMPLES.len(),
        "{:#}",
        v["tests"]
    );
    for (i, (bin, outcome, class)) in EXAMPLES.iter().enumerate() {
        let t = by_name(&v, &format!("bin/{bin}"));
        assert_eq!(t["outcome"], *outcome, "{bin}: {t:#}");
        assert_eq!(t["class"].as_str(), *class, "{bin}: {t:#}");
        assert_eq!(t["shard"], i % 2, "{bin}: binary i runs in shard i % 2");
    }
    // Excerpts prove the class; the binary ran in its directory with the recipe's args.
    let excerpt = |b: &str| {
        by_name(&v, &format!("bin/{b}"))["excerpt"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert!(
        excerpt("ex_fail").contains("Validation failed"),
        "{}",
        excerpt("ex_fail")
    );
    assert!(excerpt("ex_nobinary").contains("hipErrorNoBinaryForGpu"));
    assert!(
        excerpt("ex_segv").contains("SIGSEGV"),
        "{}",
        excerpt("ex_segv")
    );
    assert!(
        excerpt("ex_fail").contains("prefix/bin with --quick"),
        "{}",
        excerpt("ex_fail")
    );
    // The per-binary timeout killed the hang.
    let ms = by_name(&v, "bin/ex_hang")["duration_ms"].as_u64().unwrap();
    assert!((1900..5000).contains(&ms), "ex_hang took {ms} ms");
    // Resumed: each binary journaled once; shard 0 ran once (before the kill), shard 1 twice.
    let text = std::fs::read_to_string(&journal).unwrap();
    for (bin, _, _) in EXAMPLES {
        let name = format!("\"name\":\"bin/{bin}\"");
        assert_eq!(
            text.matches(&name).count(),
            1,
            "{bin} journaled once:\n{text}"
        );
    }
    let slow = text
        .lines()
        .find(|l| l.contains("\"bin/ex_slow\""))
        .unwrap();
    assert!(
        slow.ends_with("\"attempt\":2}"),
        "the interrupted binary ran again: {slow}"
    );
    let shards = v["shards"].as_array().unwrap();
    assert_eq!(
        (
            shards[0]["attempts"].as_u64(),
            shards[1]["attempts"].as_u64()
        ),
        (Some(1), Some(2))
    );
    assert!(out.join("logs/bin-0007-ex_slow.attempt-2.log").is_file());
    assert_eq!(v["client"]["path"], "bin/ex_*");
    assert_eq!(v["summary"]["total"], 8);
    // No GPU is neither a pass nor a failure: counted apart, said apart, and the run is not ok.
    assert_eq!(v["summary"]["no_gpu"], 1);
    assert!(
        excerpt("ex_nogpu").contains("no ROCm-capable device"),
        "{}",
        excerpt("ex_nogpu")
    );
    assert!(o.stdout.contains("1 found no GPU"), "{}", o.stdout);
    assert!(
        o.stdout
            .contains("1 test(s) found no GPU (no /dev/kfd or no device)"),
        "{}",
        o.stdout
    );
    assert!(v["environment"].get("GTEST_TOTAL_SHARDS").is_none());
    // Not in the corpus: the glob leaves out notme, and ex_README is not executable.
    assert!(!text.contains("notme") && !text.contains("ex_README"));
    let junit = std::fs::read_to_string(out.join("junit.xml")).unwrap();
    assert!(junit.contains("name=\"bin/ex_segv\""), "{junit}");
    assert!(
        junit.contains("name=\"bin/ex_nogpu\" time=")
            && junit.contains("<skipped message=\"no GPU\"/>"),
        "{junit}"
    );
}

// ---------------------------------------------------------------- submit

#[test]
fn two_machines_submit_to_a_registry_and_one_report_pulls_both() {
    let Some(f) = fixture() else { return };
    let Some(reg) = common::registry() else {
        return;
    };
    let repo = format!("oci://{}/volunteers/results", reg.host());
    // Machine A signs its submission; machine B (a gfx902 laptop) does not.
    let keys = f.path("submit-keys");
    let o = f.run(&["key", "generate", "--out", keys.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let key = keys.join("rocforge.key");
    let runs = [
        ("laptop-a", "gfx90c", "m-gfx90c", Some(&key)),
        ("laptop-b", "gfx902", "m-gfx902", None),
    ];
    for (machine, arch, root, key) in runs {
        let out = f.path(&format!("r-submit-{machine}"));
        let (root, out_s) = (sysfs_root(f, root), out.display().to_string());
        let mut args = vec![
            "passing",
            "--arch",
            arch,
            "--sysfs-root",
            &root,
            "--out",
            &out_s,
            "--machine",
            machine,
            "--submit",
            &repo,
        ];
        if let Some(k) = key {
            args.extend(["--sign-key", k.to_str().unwrap()]);
        }
        let o = test_run(f, &args);
        assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
        assert!(o.stdout.contains("submitted: "), "{}", o.stdout);
        if key.is_some() {
            assert!(out.join("results.json.minisig").is_file());
        }
    }
    // The registry holds two results artifacts, tagged results-<component>-<target>-<machine>-<time>.
    let client = reqwest::blocking::Client::new();
    let base = format!("http://{}/v2/volunteers/results", reg.host());
    let tags: Value = client
        .get(format!("{base}/tags/list"))
        .send()
        .unwrap()
        .bytes()
        .map(|b| serde_json::from_slice(&b).unwrap())
        .unwrap();
    let tags: Vec<String> = tags["tags"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap().to_string())
        .collect();
    assert_eq!(tags.len(), 2, "{tags:?}");
    let a = tags
        .iter()
        .find(|t| t.starts_with("results-passing-gfx90c-laptop-a-"))
        .unwrap_or_else(|| panic!("{tags:?}"));
    assert!(
        tags.iter()
            .any(|t| t.starts_with("results-passing-gfx902-laptop-b-"))
    );
    let m: Value = client
        .get(format!("{base}/manifests/{a}"))
        .header("Accept", "application/vnd.oci.image.manifest.v1+json")
        .send()
        .unwrap()
        .bytes()
        .map(|b| serde_json::from_slice(&b).unwrap())
        .unwrap();
    let media: Vec<&str> = m["layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["mediaType"].as_str().unwrap())
        .collect();
    assert_eq!(
        media,
        [
            "application/vnd.rocforge.results.v1+json",
            "application/vnd.rocforge.signature.v1+minisign",
            "application/vnd.rocforge.junit.v1+xml",
            "application/vnd.rocforge.signature.v1+minisign",
        ],
        "{m:#}"
    );
    // The pushed signature verifies against the submitter's public key.
    let blob = |digest: &str| {
        client
            .get(format!("{base}/blobs/{digest}"))
            .send()
            .unwrap()
            .bytes()
            .unwrap()
    };
    let pulled = f.path("r-submit-pulled");
    std::fs::create_dir_all(&pulled).unwrap();
    std::fs::write(
        pulled.join("results.json"),
        blob(m["layers"][0]["digest"].as_str().unwrap()),
    )
    .unwrap();
    std::fs::write(
        pulled.join("results.json.minisig"),
        blob(m["layers"][1]["digest"].as_str().unwrap()),
    )
    .unwrap();
    let o = f.run(&[
        "verify",
        pulled.join("results.json").to_str().unwrap(),
        "--key",
        keys.join("rocforge.pub").to_str().unwrap(),
    ]);
    assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    // Pulled results must be signed by a trusted key: A's key is not trusted yet and B signed
    // nothing, so nothing is left and the report says how to trust a submitter.
    let report = f.path("report-oci");
    let report_from = |from: &str, extra: &[&str]| {
        let mut args = vec!["report", from, "--out", report.to_str().unwrap()];
        args.extend_from_slice(extra);
        f.run(&args)
    };
    let o = report_from(&repo, &[]);
    assert_eq!(o.code, 1, "{}\n{}", o.stdout, o.stderr);
    assert!(
        o.stderr.contains("laptop-a") && o.stderr.contains("refused"),
        "{}",
        o.stderr
    );
    assert!(o.stderr.contains("unsigned, left out"), "{}", o.stderr);
    assert!(o.stderr.contains("--key"), "{}", o.stderr);
    assert!(!report.join("report.html").exists());
    // Trusting A's key: A's signed results are in, B's unsigned ones are not.
    let public = keys.join("rocforge.pub");
    let o = report_from(&repo, &["--key", public.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    assert!(
        o.stderr
            .contains("1 signed by trusted keys, 0 unsigned included, 1 left out"),
        "{}",
        o.stderr
    );
    let html = std::fs::read_to_string(report.join("report.html")).unwrap();
    assert!(html.contains("laptop-a"));
    assert!(!html.contains("laptop-b"), "unsigned results stay out");
    // Reports are for others to read: world-readable, as a CI summary or a web page needs.
    for f in ["report.html", "report.md"] {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(report.join(f))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o644, "{f}");
    }
    // --allow-unsigned: one report from the repository holds both machines.
    let o = report_from(
        &repo,
        &["--key", public.to_str().unwrap(), "--allow-unsigned"],
    );
    assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    let html = std::fs::read_to_string(report.join("report.html")).unwrap();
    for machine in ["laptop-a", "laptop-b"] {
        assert!(html.contains(machine), "{machine} missing from the report");
    }
    let md = std::fs::read_to_string(report.join("report.md")).unwrap();
    assert!(md.contains("laptop-a") && md.contains("laptop-b"), "{md}");
    // An empty repository is an error that says how to fill it.
    let empty = format!("oci://{}/nobody/results", reg.host());
    let o = report_from(&empty, &[]);
    assert_eq!(o.code, 1);
    assert!(
        o.stderr.contains("holds no results artifacts"),
        "{}",
        o.stderr
    );
}

/// An HTTP server that answers every PUT with 201 and keeps (path, body).
type Received = std::sync::Arc<std::sync::Mutex<Vec<(String, Vec<u8>)>>>;

fn put_server() -> (String, Received) {
    use std::io::{BufRead, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let got = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let keep = got.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut r = std::io::BufReader::new(stream.try_clone().unwrap());
            let mut first = String::new();
            r.read_line(&mut first).unwrap();
            let mut len = 0usize;
            loop {
                let mut h = String::new();
                r.read_line(&mut h).unwrap();
                if h.trim().is_empty() {
                    break;
                }
                if let Some((k, v)) = h.split_once(':')
                    && k.eq_ignore_ascii_case("content-length")
                {
                    len = v.trim().parse().unwrap();
                }
            }
            let mut body = vec![0; len];
            r.read_exact(&mut body).unwrap();
            let mut parts = first.split_whitespace();
            let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
            let status = if method == "PUT" {
                "201 Created"
            } else {
                "405 Method Not Allowed"
            };
            keep.lock().unwrap().push((path.to_string(), body));
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            );
        }
    });
    (url, got)
}

#[test]
fn submit_to_an_http_url_puts_the_results() {
    let Some(f) = fixture() else { return };
    let (url, got) = put_server();
    let out = f.path("r-submit-http");
    let o = test_run(
        f,
        &[
            "passing",
            "--arch",
            "gfx90c",
            "--sysfs-root",
            &sysfs_root(f, "m-gfx90c"),
            "--out",
            out.to_str().unwrap(),
            "--machine",
            "laptop-c",
            "--submit",
            &format!("{url}/incoming/"),
        ],
    );
    assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    let got = got.lock().unwrap();
    assert_eq!(
        got.len(),
        1,
        "{:?}",
        got.iter().map(|g| &g.0).collect::<Vec<_>>()
    );
    let (path, body) = &got[0];
    let v = results(&out);
    assert_eq!(
        path,
        &format!("/incoming/laptop-c-passing-gfx90c-{}.json", v["finished"])
    );
    assert_eq!(body, &std::fs::read(out.join("results.json")).unwrap());
    // A destination that is neither is refused before anything runs.
    let o = test_run(f, &["passing", "--arch", "gfx90c", "--submit", "ftp://x/y"]);
    assert_eq!(o.code, 1);
    assert!(
        o.stderr.contains("unknown submission destination"),
        "{}",
        o.stderr
    );
}

// ---------------------------------------------------------------- install from an index

#[test]
fn test_installs_from_an_artifact_index_when_the_store_lacks_the_component() {
    let Some(f) = fixture() else { return };
    if !require("python3 (http.server)", which("python3")) {
        return;
    }
    // A signed index of `passing` for gfx90c, served over HTTP; the key trusted by the config.
    let work = f.path("from-index");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap();
    let keys = work.join("keys");
    let o = f.run(&["key", "generate", "--out", keys.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let config = work.join("trust.toml");
    std::fs::write(
        &config,
        format!("[trust]\nkeys = [\"{}\"]\n", o.stdout.trim()),
    )
    .unwrap();
    let dist = work.join("dist");
    let o = f.run(&[
        "--recipes",
        "recipes",
        "package",
        "passing",
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
    let key = index["artifacts"][0]["key"].as_str().unwrap().to_string();
    let server = common::HttpServer::start(&dist);
    // An empty store: the component must come from the index.
    let store = work.join("empty-store");
    let out = work.join("r");
    let run = |extra: &[&str]| {
        let root = sysfs_root(f, "m-gfx90c");
        let mut args = vec![
            "--recipes",
            "recipes",
            "--quiet",
            "test",
            "passing",
            "--arch",
            "gfx90c",
            "--sysfs-root",
            &root,
            "--out",
            out.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        f.command(&args)
            .env("ROCFORGE_STORE", &store)
            .env("ROCFORGE_CONFIG", &config)
            .output()
            .unwrap()
    };
    let o = run(&[]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("not in the store") && stderr.contains("--from"),
        "{stderr}"
    );
    // The plan names the index's artifact and installs nothing: the corpus waits for the install.
    let o = run(&["--from", &server.url(), "--dry-run", "--format", "json"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let plan: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(plan["source"]["kind"], "index", "{plan:#}");
    assert_eq!(plan["source"]["index"], server.url().as_str());
    assert_eq!(plan["tested"]["key"], key.as_str());
    assert_eq!(plan["tested"]["runtime"], "index");
    assert!(plan["shards"][0].get("tests").is_none(), "{plan:#}");
    assert!(!out.exists(), "a dry run writes nothing");
    let o = run(&["--from", &server.url()]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let v = results(&out);
    assert_eq!(v["summary"]["passed"], 6, "{:#}", v["summary"]);
    assert_eq!(v["component"]["key"], key.as_str());
    assert_eq!(v["component"]["runtime"], "index");
    assert_eq!(v["component"]["targets"][0], "gfx90c");
    // Installed (with a receipt), not linked from a store.
    assert!(out.join("prefix/bin/fakegtest").is_file());
    assert!(!store.join(&key).exists());
    let journal = std::fs::read_to_string(out.join("journal.jsonl")).unwrap();
    assert!(journal.lines().next().unwrap().contains(&key), "{journal}");
    // An index signed by an untrusted key is refused.
    std::fs::write(&config, "").unwrap();
    let o = run(&["--from", &server.url()]);
    assert_eq!(o.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("no trusted keys"), "{stderr}");
}

// ---------------------------------------------------------------- report

fn chromium() -> Option<PathBuf> {
    ["chromium", "chromium-browser"].iter().find_map(|c| {
        Command::new(c)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .ok()
            .filter(|s| s.success())
            .map(|_| PathBuf::from(c))
    })
}

/// Runs headless Chromium with a deadline (a stuck browser must not stall the suite).
fn headless(browser: &Path, profile: &Path, extra: &[&str], url: &str) -> String {
    let mut child = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(extra)
        .arg(url)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromium");
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut stdout, &mut s).ok();
        s
    });
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(90) {
            child.kill().ok();
            panic!("chromium did not finish in 90 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    reader.join().unwrap()
}

/// Rows of the table with this id, as lists of cell texts.
fn table_rows(dom: &str, id: &str) -> Vec<Vec<String>> {
    let start = dom
        .find(&format!("<table id=\"{id}\""))
        .unwrap_or_else(|| panic!("no table {id}"));
    let end = start + dom[start..].find("</table>").unwrap();
    dom[start..end]
        .split("<tr>")
        .skip(1)
        .map(|row| {
            row.split("<td")
                .skip(1)
                .map(|c| {
                    let c = &c[c.find('>').unwrap() + 1..];
                    let c = &c[..c.find("</td>").unwrap_or(c.len())];
                    let mut text = String::new();
                    let mut tag = false;
                    for ch in c.chars() {
                        match ch {
                            '<' => tag = true,
                            '>' => tag = false,
                            _ if !tag => text.push(ch),
                            _ => {}
                        }
                    }
                    text.replace("&amp;", "&")
                })
                .collect()
        })
        .filter(|r: &Vec<String>| !r.is_empty())
        .collect()
}

#[test]
fn report_from_two_machines_in_headless_chromium() {
    let Some(f) = fixture() else { return };
    // Machine A (gfx90c): the mixed suite, passing natively and spoofed as gfx900.
    // Machine B (gfx902): passing natively.
    let runs = [
        (
            "ra-mixed",
            vec!["mixed", "--arch", "gfx90c"],
            "m-gfx90c",
            "laptop-a",
        ),
        (
            "ra-native",
            vec!["passing", "--arch", "gfx90c"],
            "m-gfx90c",
            "laptop-a",
        ),
        (
            "ra-spoofed",
            vec!["passing", "--arch", "gfx900", "--spoof"],
            "m-gfx90c",
            "laptop-a",
        ),
        (
            "rb-native",
            vec!["passing", "--arch", "gfx902"],
            "m-gfx902",
            "laptop-b",
        ),
    ];
    let mut bundles = Vec::new();
    for (dir, args, machine, name) in &runs {
        let out = f.root().join(dir);
        let root = sysfs_root(f, machine);
        let mut a = args.clone();
        a.extend([
            "--sysfs-root",
            &root,
            "--out",
            out.to_str().unwrap(),
            "--machine",
            name,
        ]);
        let turn = kmsg_turn();
        let o = test_run(f, &a);
        drop(turn);
        assert!(
            o.code == 0 || *dir == "ra-mixed",
            "{dir}: {}\n{}",
            o.stdout,
            o.stderr
        );
        bundles.push(out.join("results.json").display().to_string());
    }
    let report = f.path("report");
    let mut args = vec!["report", "--out", report.to_str().unwrap()];
    args.extend(bundles.iter().map(String::as_str));
    let o = f.run(&args);
    assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    let html = std::fs::read_to_string(report.join("report.html")).unwrap();
    let md = std::fs::read_to_string(report.join("report.md")).unwrap();
    // Self-contained: nothing fetched from elsewhere.
    for bad in ["<script src", "<link", "http://", "https://", "<img"] {
        assert!(!html.contains(bad), "report.html contains {bad}");
    }
    assert!(html.contains("<svg id=\"classes-chart\""));
    for text in [&html, &md] {
        assert!(
            text.contains("These results come only from the 2 machine(s) listed"),
            "{text}"
        );
        assert!(text.contains("recorded sysfs tree"), "{text}");
        assert!(
            text.contains("None of these results was produced on real GPU hardware"),
            "{text}"
        );
    }
    assert!(md.contains("| passing | gfx900 | gfx90c (Radeon Vega (Renoir, Lucienne, Cezanne, Barcelo APUs)) | laptop-a | spoofed | 6 | 0 | 0 | 0 | 0 | 0 | 6 | "), "{md}");

    let Some(browser) = chromium() else {
        require("chromium (Debian package chromium)", false);
        return;
    };
    let artifacts = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .unwrap()
        .join("test-artifacts");
    std::fs::create_dir_all(&artifacts).unwrap();
    let shot = artifacts.join("testrun-report.png");
    let _ = std::fs::remove_file(&shot);
    let url = format!("file://{}", report.join("report.html").display());
    let profile = f.path("chromium-profile");
    headless(
        &browser,
        &profile,
        &[
            &format!("--screenshot={}", shot.display()),
            "--window-size=1280,2400",
        ],
        &url,
    );
    let png = std::fs::read(&shot).expect("chromium wrote the screenshot");
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 10_000,
        "screenshot of {} bytes",
        png.len()
    );
    let dom = headless(&browser, &profile, &["--dump-dom"], &url);
    let matrix = table_rows(&dom, "matrix");
    let find = |c: &str, t: &str, m: &str, mode: &str| -> Vec<String> {
        matrix
            .iter()
            .find(|r| r[0] == c && r[1] == t && r[3] == m && r[4] == mode)
            .unwrap_or_else(|| panic!("no row {c} {t} {m} {mode} in {matrix:?}"))
            .clone()
    };
    assert_eq!(matrix.len(), 4, "{matrix:?}");
    // passed, failed, skipped, hung, crashed, no GPU, total: as `rocforge test` counts them
    assert_eq!(
        find("mixed", "gfx90c", "laptop-a", "native")[5..12],
        ["4", "4", "1", "2", "1", "0", "12"]
    );
    assert_eq!(
        find("passing", "gfx90c", "laptop-a", "native")[5..12],
        ["6", "0", "0", "0", "0", "0", "6"]
    );
    assert_eq!(
        find("passing", "gfx900", "laptop-a", "spoofed")[5..12],
        ["6", "0", "0", "0", "0", "0", "6"]
    );
    // The grid: a component per row, a (target, machine) per column.
    let grid = table_rows(&dom, "grid");
    let row = |c: &str| grid.iter().find(|r| r[0] == c).unwrap().clone();
    assert_eq!(grid.len(), 2, "{grid:?}");
    assert!(
        row("mixed")
            .iter()
            .any(|c| c.contains("4 passed, 4 failed, 1 skipped, 2 hung, 1 crashed")),
        "{grid:?}"
    );
    assert!(row("mixed").iter().any(|c| c == "not run"), "{grid:?}");
    assert!(find("passing", "gfx902", "laptop-b", "native")[2].starts_with("gfx902"));
    let cmp = table_rows(&dom, "comparison");
    assert_eq!(cmp.len(), 1, "{cmp:?}");
    assert_eq!(cmp[0][3], "gfx90c");
    assert!(
        cmp[0][5].starts_with("gfx900 (HSA_OVERRIDE_GFX_VERSION=9.0.0)"),
        "{cmp:?}"
    );
    let machines = table_rows(&dom, "machines");
    assert_eq!(
        machines.iter().map(|r| r[0].as_str()).collect::<Vec<_>>(),
        ["laptop-a", "laptop-b"]
    );
    assert!(dom.contains("Mixed.nobinary") && dom.contains("hipErrorNoBinaryForGpu"));
    eprintln!("screenshot: {}", shot.display());
}

// ---------------------------------------------------------------- CTest trees

/// A gtest-speaking shell script behaving by its first argument, printing where it ran, what
/// its environment held and its arguments.
const FAKE_GTEST_SH: &str = r#"#!/bin/sh
echo "[==========] Running 1 test from 1 test suite."
echo "cwd $(pwd) who ${FAKE_WHO:-none} x ${FAKE_X:-none} recipe ${FAKE_RECIPE:-none} args $*"
case "$1" in
pass) echo "[  PASSED  ] 1 test."; exit 0 ;;
fail) echo "test_main.cpp:12: Failure"; echo "Expected equality of these values"; echo "[  FAILED  ] 1 test"; exit 1 ;;
segv) kill -SEGV $$ ;;
hang) exec sleep 30 ;;
127) echo "fake-gtest: error while loading shared libraries: libgone.so: cannot open shared object file: No such file or directory" >&2; exit 127 ;;
skip) echo "[  SKIPPED ] no device"; exit 77 ;;
esac
exit 3
"#;

/// rocRAND's layout: programs in bin/, the CTest tree in bin/trees with a subdirectory; the
/// commands are absolute build-prefix paths, relative paths and ${CMAKE_CURRENT_LIST_DIR}.
const TREES_CTEST: &str = r#"# CMake generated Testfile for
# Source directory: /src/test
add_test([=[t_pass]=] "/opt/rocm/bin/fake-gtest" "pass")
set_tests_properties([=[t_pass]=] PROPERTIES  ENVIRONMENT "FAKE_WHO=ctest;FAKE_X=a\;b" WORKING_DIRECTORY "/opt/rocm/bin/trees/sub" _BACKTRACE_TRIPLES "/src/test/CMakeLists.txt;5;add_test;/src/test/CMakeLists.txt;0;")
add_test(t_fail "../fake-gtest" "fail")
add_test(NAME t_segv COMMAND ../fake-gtest segv)
add_test(t_hang ../fake-gtest hang)
set_tests_properties(t_hang PROPERTIES TIMEOUT 1 LABELS "slow")
add_test(t_127 ../fake-gtest 127)
add_test(t_disabled ../fake-gtest fail)
set_tests_properties(t_disabled PROPERTIES DISABLED ON)
add_test(t_willfail ../fake-gtest fail)
set_tests_properties(t_willfail PROPERTIES WILL_FAIL TRUE)
add_test(t_skip ../fake-gtest skip)
set_tests_properties(t_skip PROPERTIES SKIP_RETURN_CODE 77)
subdirs("sub")
"#;

const CMK_LISTS: &str = r#"cmake_minimum_required(VERSION 3.16)
project(cmk NONE)
enable_testing()
install(PROGRAMS fake-gtest DESTINATION bin)
add_test(NAME cmk_pass COMMAND ${CMAKE_INSTALL_PREFIX}/bin/fake-gtest pass)
set_tests_properties(cmk_pass PROPERTIES ENVIRONMENT "FAKE_WHO=cmake" TIMEOUT 20)
add_test(NAME cmk_fail COMMAND ${CMAKE_INSTALL_PREFIX}/bin/fake-gtest fail)
add_test(NAME cmk_willfail COMMAND ${CMAKE_INSTALL_PREFIX}/bin/fake-gtest fail)
set_tests_properties(cmk_willfail PROPERTIES WILL_FAIL TRUE)
install(FILES ${CMAKE_BINARY_DIR}/CTestTestfile.cmake DESTINATION bin/cmk)
"#;

fn cmake_works() -> bool {
    Command::new("cmake")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// A release of CTest-tree components: `trees` (a copy build of a hand-written tree) and
/// `cmk` plus three variants (cmake builds installing the CTestTestfile.cmake CMake itself
/// generated), built for gfx90c on the host. None when cmake is missing (and not in CI).
fn ctest_fixture() -> Option<&'static World> {
    static F: OnceLock<Option<World>> = OnceLock::new();
    F.get_or_init(|| {
        if !require("cmake", cmake_works()) {
            return None;
        }
        let w = World::new().shared("ctest-trees").build();
        w.machines();
        let dir = w.root().to_path_buf();
        let rel = hw_release(&dir);
        let exe = |p: &Path, text: &str| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::write(p, text).unwrap();
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
        };
        let src = rel.join("src/trees");
        std::fs::create_dir_all(src.join("trees/sub")).unwrap();
        exe(&src.join("fake-gtest"), FAKE_GTEST_SH);
        std::fs::write(src.join("trees/CTestTestfile.cmake"), TREES_CTEST).unwrap();
        std::fs::write(
            src.join("trees/sub/CTestTestfile.cmake"),
            "add_test(t_sub \"${CMAKE_CURRENT_LIST_DIR}/../../fake-gtest\" pass)\n",
        )
        .unwrap();
        std::fs::write(
            rel.join("trees.toml"),
            "name = \"trees\"\nversion = \"1.0\"\nsummary = \"a CTest tree\"\nlicense = \"MIT\"\n\n[source]\npath = \"src/trees\"\n\n[build]\nsystem = \"copy\"\ndest = \"bin\"\n\n[test]\nkind = \"ctest\"\ndir = \"bin/trees\"\nargs = [\"--extra\"]\nshards = 2\ntimeout = \"3s\"\nenv = { FAKE_RECIPE = \"yes\" }\n",
        )
        .unwrap();
        let cmk = rel.join("src/cmk");
        std::fs::create_dir_all(&cmk).unwrap();
        exe(&cmk.join("fake-gtest"), FAKE_GTEST_SH);
        std::fs::write(cmk.join("CMakeLists.txt"), CMK_LISTS).unwrap();
        // A test that runs its program from the build tree, which is not installed.
        let bt = rel.join("src/cmk-bt");
        std::fs::create_dir_all(&bt).unwrap();
        exe(&bt.join("fake-gtest"), FAKE_GTEST_SH);
        std::fs::write(
            bt.join("CMakeLists.txt"),
            CMK_LISTS.replace(
                "enable_testing()\n",
                "enable_testing()\nadd_test(NAME cmk_buildtree COMMAND ${CMAKE_BINARY_DIR}/fake-gtest pass)\n",
            ),
        )
        .unwrap();
        for (name, src, switch, test) in [
            ("cmk", "cmk", "ON", "kind = \"ctest\"\ndir = \"bin/cmk\""),
            // A CTest directory named as a gtest client (the shipped recipes' old shape).
            ("cmk-client", "cmk", "ON", "client = \"bin/cmk\""),
            // The tree installed somewhere else than [test] says.
            ("cmk-elsewhere", "cmk", "ON", "kind = \"ctest\"\ndir = \"bin/cmk-tests\""),
            // The same, with the tests switched off: neither a failure nor a warning.
            ("cmk-off", "cmk", "OFF", "kind = \"ctest\"\ndir = \"bin/cmk-tests\""),
            ("cmk-buildtree", "cmk-bt", "ON", "kind = \"ctest\"\ndir = \"bin/cmk\""),
        ] {
            std::fs::write(
                rel.join(format!("{name}.toml")),
                format!("name = \"{name}\"\nversion = \"1.0\"\nsummary = \"CTest tree written by CMake\"\nlicense = \"MIT\"\n\n[source]\npath = \"src/{src}\"\n\n[build]\nsystem = \"cmake\"\narch-vars = [\"GPU_TARGETS\"]\nargs = [\"-DBUILD_TEST={switch}\"]\n\n[test]\n{test}\ntimeout = \"20s\"\n"),
            )
            .unwrap();
        }
        let o = rf(
            &dir,
            &["--recipes", "recipes", "build", "trees", "cmk", "--arch", "gfx90c", "--runtime", "host"],
        );
        assert_eq!(o.code, 0, "build:\n{}\n{}", o.stdout, o.stderr);
        Some(w)
    })
    .as_ref()
}

#[test]
fn ctest_tree_runs_each_test_sharded_hang_proof_and_classified() {
    let Some(f) = ctest_fixture() else { return };
    let out = f.path("r-trees");
    let args = |resume: bool| {
        let mut v = vec![
            "--recipes".to_string(),
            "recipes".into(),
            "--quiet".into(),
            "test".into(),
            "trees".into(),
            "--arch".into(),
            "gfx90c".into(),
            "--sysfs-root".into(),
            sysfs_root(f, "m-gfx90c"),
            "--out".into(),
            out.display().to_string(),
        ];
        if resume {
            v.push("--resume".into());
        }
        v
    };
    // Tests in file order: t_pass t_fail t_segv t_hang t_127 t_disabled t_willfail t_skip
    // t_sub; shard 0 runs the even ones, shard 1 the odd. Killed while t_hang (shard 1's
    // second) runs, then resumed.
    let journal = out.join("journal.jsonl");
    // Once t_fail is journaled, t_hang runs for a second: killed in the middle of it.
    kill_when_journaled(f.root(), &args(false), &journal, "\"t_fail\"", 200);
    let o = f.run(&args(true).iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(o.code, 1, "{}\n{}", o.stdout, o.stderr);
    let v = results(&out);
    let expected = [
        ("t_pass", "passed", None),
        ("t_fail", "failed", Some("assertion")),
        ("t_segv", "crashed", Some("crash")),
        ("t_hang", "hung", Some("hang")),
        ("t_127", "failed", Some("missing-library")),
        ("t_disabled", "skipped", Some("skipped")),
        ("t_willfail", "passed", None),
        ("t_skip", "skipped", Some("skipped")),
        ("t_sub", "passed", None),
    ];
    assert_eq!(
        v["tests"].as_array().unwrap().len(),
        expected.len(),
        "{:#}",
        v["tests"]
    );
    for (i, (name, outcome, class)) in expected.iter().enumerate() {
        let t = by_name(&v, name);
        assert_eq!(t["outcome"], *outcome, "{name}: {t:#}");
        assert_eq!(t["class"].as_str(), *class, "{name}: {t:#}");
        assert_eq!(t["shard"], i % 2, "{name}: test i runs in shard i % 2");
    }
    let excerpt = |n: &str| by_name(&v, n)["excerpt"].as_str().unwrap().to_string();
    assert!(
        excerpt("t_segv").contains("SIGSEGV"),
        "{}",
        excerpt("t_segv")
    );
    assert!(
        excerpt("t_127").contains("libgone.so"),
        "{}",
        excerpt("t_127")
    );
    assert!(
        excerpt("t_fail").contains("Failure"),
        "{}",
        excerpt("t_fail")
    );
    assert!(excerpt("t_disabled").contains("DISABLED"));
    // CTest's TIMEOUT 1 is shorter than the recipe's 3s, so it applies.
    let ms = by_name(&v, "t_hang")["duration_ms"].as_u64().unwrap();
    assert!((900..2900).contains(&ms), "t_hang took {ms} ms");
    // The build prefix was mapped into the tree under test; WORKING_DIRECTORY, ENVIRONMENT
    // (with an escaped ;), the recipe's env and args reached the program.
    let log = std::fs::read_to_string(out.join("logs/bin-0000-t_pass.attempt-1.log")).unwrap();
    let prefix = out.join("prefix");
    assert!(
        log.contains(&format!(
            "cwd {}/bin/trees/sub who ctest x a;b recipe yes args pass --extra",
            prefix.display()
        )),
        "{log}"
    );
    let log = std::fs::read_to_string(out.join("logs/bin-0008-t_sub.attempt-1.log")).unwrap();
    assert!(
        log.contains(&format!("cwd {}/bin/trees/sub who none", prefix.display())),
        "{log}"
    );
    // Resumed: each test journaled once, the interrupted one again in a second attempt.
    let text = std::fs::read_to_string(&journal).unwrap();
    for (name, _, _) in expected {
        assert_eq!(
            text.matches(&format!("\"name\":\"{name}\"")).count(),
            1,
            "{name} journaled once:\n{text}"
        );
    }
    let hang = text.lines().find(|l| l.contains("\"t_hang\"")).unwrap();
    assert!(hang.ends_with("\"attempt\":2}"), "{hang}");
    assert_eq!(v["client"]["path"], "bin/trees");
    assert!(v["environment"].get("GTEST_TOTAL_SHARDS").is_none());
}

#[test]
fn ctest_tree_cmake_wrote_runs_and_the_build_checks_the_installed_corpus() {
    let Some(f) = ctest_fixture() else { return };
    // What CMake itself generated (bracket arguments, _BACKTRACE_TRIPLES, absolute paths
    // under the build's prefix) runs without cmake.
    let out = f.path("r-cmk");
    let o = f.run(&[
        "--recipes",
        "recipes",
        "--quiet",
        "test",
        "cmk",
        "--arch",
        "gfx90c",
        "--sysfs-root",
        &sysfs_root(f, "m-gfx90c"),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.code, 1, "{}\n{}", o.stdout, o.stderr);
    let v = results(&out);
    assert_eq!(by_name(&v, "cmk_pass")["outcome"], "passed");
    assert_eq!(by_name(&v, "cmk_fail")["class"], "assertion");
    assert_eq!(by_name(&v, "cmk_willfail")["outcome"], "passed");
    let log = std::fs::read_to_string(out.join("logs/bin-0000-cmk_pass.attempt-1.log")).unwrap();
    assert!(log.contains("who cmake"), "{log}");

    // A build that enables its tests fails when [test] does not match what it installed.
    let o = build_on_host(f.root(), "cmk-client");
    assert_ne!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    let all = format!("{}{}", o.stdout, o.stderr);
    assert!(
        all.contains("cmk-client: the build enables its tests, but the test client bin/cmk is a CTest directory")
            && all.contains("write kind = \"ctest\" and dir = \"bin/cmk\"")
            && all.contains("cmk-client.toml"),
        "{all}"
    );
    let o = build_on_host(f.root(), "cmk-elsewhere");
    assert_ne!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    let all = format!("{}{}", o.stdout, o.stderr);
    assert!(
        all.contains("the test dir bin/cmk-tests holds no CTestTestfile.cmake")
            && all.contains("bin/cmk"),
        "{all}"
    );
    // A test whose program stayed in the build tree: named, with its line.
    let o = build_on_host(f.root(), "cmk-buildtree");
    assert_ne!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    let all = format!("{}{}", o.stdout, o.stderr);
    assert!(
        all.contains("test \"cmk_buildtree\" (bin/cmk/CTestTestfile.cmake:7) runs /")
            && all.contains("/build/fake-gtest, which is not an installed executable"),
        "{all}"
    );
    // Tests switched off: none installed is what the build says it does, so it builds
    // without a word about them.
    let o = build_on_host(f.root(), "cmk-off");
    assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    let all = format!("{}{}", o.stdout, o.stderr);
    assert!(!all.contains("CTestTestfile.cmake"), "{all}");
    assert!(!all.contains("[test] in"), "{all}");
}

/// Runs rocforge with `args` until its journal names `marker`, lets it run `settle_ms` longer,
/// then kills it: a runner stopped in the middle of a test.
fn kill_when_journaled(dir: &Path, args: &[String], journal: &Path, marker: &str, settle_ms: u64) {
    let mut child = base_cmd(dir, &[])
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    loop {
        let text = std::fs::read_to_string(journal).unwrap_or_default();
        if text.contains(marker) {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no progress: {text}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(settle_ms));
    child.kill().unwrap();
    child.wait().unwrap();
}

/// `rocforge build COMPONENT` for gfx90c on the host runtime, from the test's catalog.
fn build_on_host(dir: &Path, component: &str) -> Out {
    rf(
        dir,
        &[
            "--recipes",
            "recipes",
            "build",
            component,
            "--arch",
            "gfx90c",
            "--runtime",
            "host",
        ],
    )
}

// ---------------------------------------------------------------- a volunteer's run (test --all)

/// `test --all --from INDEX`: the GPU detected from the recorded gfx90c tree, every testable
/// component of a signed index (a gtest client that passes, an example corpus whose program
/// finds no device; not the component without a client) installed into an empty store's
/// machine and run into one signed bundle that `report` reads; a component whose tarball is
/// gone is recorded and the next runs; an index with nothing to test, or unreachable, is refused.
#[test]
fn test_all_runs_every_testable_component_of_an_index_into_one_bundle() {
    let Some(f) = fixture() else { return };
    if !require("python3 (http.server)", which("python3")) {
        return;
    }
    let work = f.path("test-all");
    let _ = std::fs::remove_dir_all(&work);
    let rel = hw_release(&work);
    std::fs::write(work.join("no-user-config.toml"), "").unwrap();
    let copy_recipe = |name: &str, test: &str| {
        format!(
            "name = \"{name}\"\nversion = \"1.0\"\nsummary = \"fake\"\nlicense = \"MIT\"\n\n[source]\npath = \"src/{name}\"\n\n[build]\nsystem = \"copy\"\ndest = \"bin\"\n{test}"
        )
    };
    for name in ["unit", "demos", "plain"] {
        std::fs::create_dir_all(rel.join("src").join(name)).unwrap();
    }
    let list = work.join("unit.txt");
    std::fs::write(&list, "Unit.a pass\nUnit.b pass\nUnit.c pass\n").unwrap();
    std::fs::copy(f.path("bin/fakegtest"), rel.join("src/unit/fakegtest")).unwrap();
    std::fs::copy(f.path("bin/example"), rel.join("src/demos/ex_nogpu")).unwrap();
    std::fs::write(rel.join("src/plain/README"), "no client\n").unwrap();
    std::fs::write(
        rel.join("unit.toml"),
        copy_recipe(
            "unit",
            &format!(
                "\n[test]\nclient = \"bin/fakegtest\"\nshards = 2\ntimeout = \"5s\"\nenv = {{ FAKE_TESTS = \"{}\" }}\n",
                list.display()
            ),
        ),
    )
    .unwrap();
    std::fs::write(
        rel.join("demos.toml"),
        copy_recipe(
            "demos",
            "\n[test]\nkind = \"each-binary\"\ndir = \"bin/ex_*\"\ntimeout = \"5s\"\n",
        ),
    )
    .unwrap();
    std::fs::write(rel.join("plain.toml"), copy_recipe("plain", "")).unwrap();
    let rfw = |args: &[&str]| {
        let mut full = vec!["--recipes", "recipes"];
        full.extend_from_slice(args);
        rf(&work, &full)
    };
    let o = rfw(&[
        "build",
        "unit",
        "demos",
        "plain",
        "--arch",
        "gfx90c",
        "--runtime",
        "host",
    ]);
    assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    let keys = work.join("keys");
    let o = rfw(&["key", "generate", "--out", keys.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let config = work.join("trust.toml");
    std::fs::write(
        &config,
        format!("[trust]\nkeys = [\"{}\"]\n", o.stdout.trim()),
    )
    .unwrap();
    let secret = keys.join("rocforge.key");
    let package = |components: &[&str], dist: &Path| {
        let mut args = vec!["package"];
        args.extend_from_slice(components);
        args.extend([
            "--arch",
            "gfx90c",
            "--runtime",
            "host",
            "--out",
            dist.to_str().unwrap(),
        ]);
        args.extend(["--sign-key", secret.to_str().unwrap()]);
        let o = rfw(&args);
        assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    };
    let dist = work.join("dist");
    package(&["unit", "demos", "plain"], &dist);
    let server = common::HttpServer::start(&dist);
    let store = work.join("empty-store");
    let root = sysfs_root(f, "m-gfx90c");
    let all = |from: &str, out: &Path, extra: &[&str]| {
        let mut args = vec![
            "--recipes",
            "recipes",
            "--quiet",
            "test",
            "--all",
            "--from",
            from,
            "--sysfs-root",
            &root,
            "--out",
            out.to_str().unwrap(),
            "--machine",
            "volunteer-a",
        ];
        args.extend_from_slice(extra);
        // A cache of its own: a tarball gone from the server is not found in an earlier run's.
        let o = base_cmd(&work, &args)
            .env("ROCFORGE_STORE", &store)
            .env("ROCFORGE_CACHE", out.with_extension("cache"))
            .env("ROCFORGE_CONFIG", &config)
            .env_remove("ROCFORGE_SIGNING_KEY")
            .output()
            .unwrap();
        Out {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    };
    let bundle = work.join("bundle");
    let o = all(
        &server.url(),
        &bundle,
        &["--sign-key", secret.to_str().unwrap()],
    );
    // A test that found no GPU is not a pass: the run is not ok.
    assert_eq!(o.code, 1, "{}\n{}", o.stdout, o.stderr);
    let lines: Vec<&str> = o.stdout.lines().collect();
    assert_eq!(
        lines[0].split_whitespace().collect::<Vec<_>>(),
        ["demos", "1", "no", "GPU"],
        "{}",
        o.stdout
    );
    assert_eq!(
        lines[1].split_whitespace().collect::<Vec<_>>(),
        ["unit", "3", "passed"],
        "{}",
        o.stdout
    );
    assert!(o.stdout.contains("1 test(s) found no GPU"), "{}", o.stdout);
    assert!(
        o.stdout
            .contains(&format!("bundle:  {} (signed)", bundle.display())),
        "{}",
        o.stdout
    );
    let submit = format!(
        "submit:  rocforge test --all --from {} --arch gfx90c --out {} --resume --submit oci://REGISTRY/REPO --sysfs-root {root} --machine volunteer-a --sign-key {}",
        server.url(),
        bundle.display(),
        secret.display()
    );
    assert!(o.stdout.contains(&submit), "{}", o.stdout);
    let summary: Value =
        serde_json::from_slice(&std::fs::read(bundle.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["schema"], "rocforge.test-all/1");
    assert_eq!(
        summary["target"], "gfx90c",
        "detected from the recorded tree"
    );
    let names: Vec<&str> = summary["components"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["component"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["demos", "unit"], "plain has no client: {summary:#}");
    let demos = results(&bundle.join("demos"));
    let t = by_name(&demos, "bin/ex_nogpu");
    assert_eq!(
        (t["outcome"].as_str(), t["class"].as_str()),
        (Some("no-gpu"), Some("no-gpu"))
    );
    assert_eq!(demos["summary"]["passed"], 0);
    assert_eq!(demos["summary"]["failed"], 0);
    assert_eq!(demos["component"]["runtime"], "index");
    assert_eq!(results(&bundle.join("unit"))["summary"]["passed"], 3);
    // Signed on disk, each file by the key that was passed.
    let pubkey = keys.join("rocforge.pub");
    for file in [
        "summary.json",
        "demos/results.json",
        "demos/junit.xml",
        "unit/results.json",
    ] {
        let o = rfw(&[
            "verify",
            bundle.join(file).to_str().unwrap(),
            "--key",
            pubkey.to_str().unwrap(),
        ]);
        assert_eq!(o.code, 0, "{file}: {}\n{}", o.stdout, o.stderr);
    }
    // The printed command, with a real destination, sends the bundle without running again.
    let (put_url, got) = put_server();
    let journals = |b: &Path| {
        ["demos", "unit"].map(|c| std::fs::read_to_string(b.join(c).join("journal.jsonl")).unwrap())
    };
    let before = journals(&bundle);
    let printed = submit
        .strip_prefix("submit:  rocforge ")
        .unwrap()
        .replace("oci://REGISTRY/REPO", &put_url);
    let mut words: Vec<&str> = vec!["--recipes", "recipes", "--quiet"];
    words.extend(printed.split(' '));
    let o = base_cmd(&work, &words)
        .env("ROCFORGE_STORE", &store)
        .env("ROCFORGE_CACHE", bundle.with_extension("cache"))
        .env("ROCFORGE_CONFIG", &config)
        .output()
        .unwrap();
    let o = Out {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    };
    assert_eq!(o.code, 1, "{}\n{}", o.stdout, o.stderr);
    assert!(
        o.stdout.contains(&format!("submitted to {put_url}")),
        "{}",
        o.stdout
    );
    let paths: Vec<String> = got.lock().unwrap().iter().map(|(p, _)| p.clone()).collect();
    for c in ["demos", "unit"] {
        assert!(
            paths.iter().any(
                |p| p.starts_with(&format!("/volunteer-a-{c}-gfx90c-")) && p.ends_with(".json")
            ),
            "{c}'s results sent, and signed: {paths:?}"
        );
        assert!(
            paths
                .iter()
                .any(|p| p.contains(&format!("-{c}-")) && p.ends_with(".json.minisig")),
            "{paths:?}"
        );
    }
    assert_eq!(journals(&bundle), before, "no test ran again");

    // The report reads the bundle's directory: one row per component, no GPU apart.
    let rep = work.join("report");
    let o = rfw(&[
        "report",
        bundle.to_str().unwrap(),
        "--out",
        rep.to_str().unwrap(),
    ]);
    assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    let md = std::fs::read_to_string(rep.join("report.md")).unwrap();
    // The keys follow the recipes, which name this run's scratch paths; the day is today.
    let mut redacted = md.clone();
    for c in ["demos", "unit"] {
        let key = results(&bundle.join(c))["component"]["key"]
            .as_str()
            .unwrap()
            .to_string();
        redacted = redacted.replace(&key[..8], "[KEY]");
    }
    let is_day = |w: &[u8]| {
        w.len() == 10
            && w.iter().enumerate().all(|(i, b)| {
                if i == 4 || i == 7 {
                    *b == b'-'
                } else {
                    b.is_ascii_digit()
                }
            })
    };
    let days: Vec<String> = redacted
        .as_bytes()
        .windows(10)
        .filter(|w| is_day(w))
        .map(|w| String::from_utf8_lossy(w).into_owned())
        .collect();
    assert!(!days.is_empty(), "the runs' finishing day is shown: {md}");
    for d in days {
        redacted = redacted.replace(&d, "[DAY]");
    }
    insta::assert_snapshot!("test_all_report", redacted);

    // The demos tarball is gone from the index's server: recorded, and unit still runs.
    let demos_tarball = std::fs::read_dir(&dist)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            let n = p.file_name().unwrap().to_string_lossy().into_owned();
            n.starts_with("demos-") && n.ends_with(".tar.zst")
        })
        .unwrap();
    std::fs::remove_file(&demos_tarball).unwrap();
    let broken = work.join("bundle-broken");
    let o = all(&server.url(), &broken, &["--arch", "gfx90c"]);
    assert_eq!(o.code, 1, "{}\n{}", o.stdout, o.stderr);
    assert!(
        o.stdout
            .starts_with("demos                    install failed\n"),
        "{}",
        o.stdout
    );
    assert!(o.stdout.contains("404"), "the error is shown: {}", o.stdout);
    assert!(
        o.stdout.contains("\nunit                     3 passed\n"),
        "{}",
        o.stdout
    );
    let summary: Value =
        serde_json::from_slice(&std::fs::read(broken.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["components"][0]["status"], "install-failed");
    assert_eq!(summary["components"][1]["status"], "ran");
    assert!(
        !broken.join("summary.json.minisig").exists(),
        "unsigned without a key"
    );
    // --format json prints summary.json's content, the failed install's error with it.
    let o = all(
        &server.url(),
        &work.join("bundle-json"),
        &["--arch", "gfx90c", "--format", "json"],
    );
    assert_eq!(o.code, 1, "{}\n{}", o.stdout, o.stderr);
    let v: Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(v["schema"], "rocforge.test-all/1");
    crate::common::schema::assert_matches_schema(f.root(), "test-all", &v);
    assert_eq!(v["components"][0]["status"], "install-failed");
    assert!(
        v["components"][0]["error"]
            .as_str()
            .unwrap()
            .contains("demos-"),
        "{v:#}"
    );
    assert_eq!(v["components"][1]["summary"]["passed"], 3);

    // Nothing testable for the target: refused with what the index holds and a hint.
    let plain_dist = work.join("dist-plain");
    package(&["plain"], &plain_dist);
    let o = all(plain_dist.to_str().unwrap(), &work.join("b-plain"), &[]);
    assert_eq!(o.code, 1, "{}\n{}", o.stdout, o.stderr);
    assert!(
        o.stderr.contains(
            "has nothing to test for gfx90c: its artifacts for it (plain) carry no test client"
        ),
        "{}",
        o.stderr
    );
    assert!(
        o.stderr.contains("rocforge package COMPONENT-tests"),
        "{}",
        o.stderr
    );
    assert!(!work.join("b-plain").exists(), "nothing written");
    // An unreachable index names its URL.
    let o = all("http://127.0.0.1:9/index.json", &work.join("b-gone"), &[]);
    assert_eq!(o.code, 1, "{}\n{}", o.stdout, o.stderr);
    assert!(o.stderr.contains("127.0.0.1:9"), "{}", o.stderr);
    assert!(!work.join("b-gone").exists(), "nothing written");
    // A machine without a GPU and no --arch: nothing to detect.
    let none = sysfs_root(f, "m-none");
    let o = base_cmd(
        &work,
        &[
            "--recipes",
            "recipes",
            "test",
            "--all",
            "--from",
            &server.url(),
            "--sysfs-root",
            &none,
        ],
    )
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("no GPU found under") && stderr.contains("--arch gfx90c"),
        "{stderr}"
    );
}

/// The test release line `hw-1.0` (the shipped GPU table, gfx90c) under `dir/recipes`; returns
/// its recipe directory.
fn hw_release(dir: &Path) -> PathBuf {
    let rel = dir.join("recipes/hw-1.0");
    std::fs::create_dir_all(&rel).unwrap();
    std::fs::copy(
        manifest().join("recipes/arches.toml"),
        dir.join("recipes/arches.toml"),
    )
    .unwrap();
    std::fs::write(
        rel.join("release.toml"),
        "name = \"hw-1.0\"\nversion = \"1.0\"\nimage = \"localhost/none:1\"\nprefix = \"/opt/rocm\"\narches = [\"gfx90c\"]\n",
    )
    .unwrap();
    rel
}

// ---------------------------------------------------------------- README's hardware block

/// README's Quick start block for a gfx90c machine, run as written against stand-ins: the KFD
/// tree of a recorded gfx90c (ROCFORGE_SYSFS_ROOT), a catalog whose rocrand and rocfft carry
/// this file's gtest-speaking client (ROCFORGE_RECIPES), and their signed index served on
/// 127.0.0.1 in place of URL, its key trusted in the config. Every line exits 0: detect names
/// the gfx90c, both test runs pass, and the report counts every test of both runs.
#[test]
fn readmes_hardware_block_runs_as_written_on_a_recorded_gfx90c() {
    let Some(f) = fixture() else { return };
    if !require("python3 (http.server)", which("python3")) {
        return;
    }
    let lines = common::readme::block("Quick start", 3);
    assert!(lines.iter().any(|l| l.contains("--from URL")), "{lines:#?}");
    let work = f.path("readme-hw");
    let _ = std::fs::remove_dir_all(&work);
    let rel = hw_release(&work);
    let kmsg = PathBuf::from(sysfs_root(f, "m-gfx90c")).join("dev/kmsg");
    for (name, tests) in [("rocrand", 4), ("rocfft", 3)] {
        let src = rel.join("src").join(name);
        std::fs::create_dir_all(&src).unwrap();
        std::fs::copy(f.path("bin/fakegtest"), src.join("fakegtest")).unwrap();
        let list = work.join(format!("{name}.txt"));
        let cases: String = (0..tests).map(|i| format!("Case.t{i} pass\n")).collect();
        std::fs::write(&list, cases).unwrap();
        std::fs::write(
            rel.join(format!("{name}.toml")),
            recipe(name, "fakegtest", 2, "5s", &list, &kmsg),
        )
        .unwrap();
    }
    std::fs::write(work.join("no-user-config.toml"), "").unwrap();
    let rfw = |args: &[&str]| {
        let mut full = vec!["--recipes", "recipes"];
        full.extend_from_slice(args);
        rf(&work, &full)
    };
    let o = rfw(&[
        "build",
        "rocrand",
        "rocfft",
        "--arch",
        "gfx90c",
        "--runtime",
        "host",
    ]);
    assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    let keys = work.join("keys");
    let o = rfw(&["key", "generate", "--out", keys.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let config = work.join("trust.toml");
    std::fs::write(
        &config,
        format!("[trust]\nkeys = [\"{}\"]\n", o.stdout.trim()),
    )
    .unwrap();
    let secret = keys.join("rocforge.key");
    let o = rfw(&[
        "package",
        "rocrand",
        "rocfft",
        "--arch",
        "gfx90c",
        "--runtime",
        "host",
        "--out",
        "dist",
        "--sign-key",
        secret.to_str().unwrap(),
    ]);
    assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    let server = common::HttpServer::start(&work.join("dist"));

    // The volunteer's machine: an empty store, its own directory, the recorded gfx90c.
    let home = work.join("volunteer");
    std::fs::create_dir_all(&home).unwrap();
    let (recipes, sysfs) = (
        work.join("recipes"),
        PathBuf::from(sysfs_root(f, "m-gfx90c")),
    );
    let (store, cache) = (home.join("store"), home.join("cache"));
    let release = PathBuf::from("hw-1.0");
    let env: [(&str, &Path); 6] = [
        ("ROCFORGE_RECIPES", &recipes),
        ("ROCFORGE_RELEASE", &release),
        ("ROCFORGE_SYSFS_ROOT", &sysfs),
        ("ROCFORGE_STORE", &store),
        ("ROCFORGE_CACHE", &cache),
        ("ROCFORGE_CONFIG", &config),
    ];
    let mut said = Vec::new();
    for line in &lines {
        let line = line.replace(" URL", &format!(" {}", server.url()));
        let o = common::readme::run(&home, &env, &line);
        assert_eq!(o.code, 0, "README: {line}\n{}\n{}", o.stdout, o.stderr);
        said.push(format!("{}{}", o.stdout, o.stderr));
    }
    assert!(said[0].contains("gfx90c"), "detect: {}", said[0]);
    let md = std::fs::read_to_string(home.join("report/report.md")).unwrap();
    // rocrand twice (alone, then in --all) and rocfft once: 4 + 4 + 3 tests, all passed.
    assert!(md.contains("rocrand") && md.contains("rocfft"), "{md}");
    let runs: Vec<PathBuf> = std::fs::read_dir(home.join("rocforge-results"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(runs.len(), 2, "one run and one --all bundle: {runs:?}");
    let passed: u64 = ["rocrand-gfx90c", "all-gfx90c/rocrand", "all-gfx90c/rocfft"]
        .iter()
        .map(|r| {
            results(&home.join("rocforge-results").join(r))["summary"]["passed"]
                .as_u64()
                .unwrap()
        })
        .sum();
    assert_eq!(passed, 11);
    assert!(md.contains("11"), "the report counts 11 passed: {md}");
}
