//! Real ROCm builds from Debian's archive (the debian-6.4 line and its builder image), side by
//! side in one run; no figure is asserted:
//!
//! 1. rocPRIM through `rocforge build` (fresh store each round, source already in the cache)
//!    against `cmake` + `ninja` run by hand in the same image, on the same tree, with the same
//!    flags (goal: at most 1.03x). rocPRIM is header-only in this line, so this is the overhead
//!    rocforge adds around a real configure and install: container, mounts, licence copy,
//!    coverage gate, store commit.
//! 2. One translation unit of rocRAND's library (`ROCFORGE_BENCH_TU`, default
//!    library/src/rng/generator_type_xorwow.cpp) compiled by hipcc for gfx90c alone against
//!    Debian's 11-target set, in the builder image: what building for one's own GPU saves.
//! 3. A rebuild of rocRAND after a one-line change to one .cpp file (a patch in a copy of the
//!    catalog, so a new content key and a fresh build tree), with the ccache the first build
//!    filled, against that cold build (goal: at most 0.15). Slow (the cold build is the whole
//!    library for two targets): only with ROCFORGE_BENCH_REBUILD=1.
//!
//! 4. Tensile (`ROCFORGE_BENCH_ONLY=tensile`, about 15 minutes here): TensileCreateLibrary on two
//!    of rocBLAS's derived logic files for gfx90c alone against gfx90c and gfx902; and again
//!    through ccache after one tuned winner changed, against its cold run. Tensile's pin is on
//!    GitHub: where that is out of reach, ROCFORGE_BENCH_CONFIG names a config with [mirrors].
//!
//! `--quick` (ROCFORGE_BENCH_QUICK=1) measures the first figure only; ROCFORGE_BENCH_ONLY=overhead,
//! one-target, rebuild or tensile measures that one alone.
//!
//! Needs podman and localhost/rocforge/builder:debian-6.4 (scripts/debian-image.sh) and the
//! Debian mirror; without them each figure says why it was skipped.
//!
//! cargo bench --bench real

#[path = "common/mod.rs"]
mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const IMAGE: &str = "localhost/rocforge/builder:debian-6.4";
const ARCH: &str = "gfx90c,gfx902";
const DEBIAN_TARGETS: &str =
    "gfx803,gfx900,gfx906,gfx908,gfx90a,gfx1010,gfx1030,gfx1100,gfx1101,gfx1102,gfx1200";
const ROUNDS: usize = 3;

fn manifest() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn containers_conf() -> PathBuf {
    manifest().join("containers/containers.conf")
}

fn rocforge(home: &Path) -> Command {
    // ROCFORGE_BENCH_CONFIG: a config with [mirrors], where GitHub (Tensile's pin) is out of reach.
    let config = std::env::var_os("ROCFORGE_BENCH_CONFIG")
        .map(PathBuf::from)
        .unwrap_or_else(|| home.join("no-user-config.toml"));
    if !config.exists() {
        std::fs::write(&config, "").unwrap();
    }
    let mut c = Command::new(env!("CARGO_BIN_EXE_rocforge"));
    c.current_dir(home)
        .env("NO_COLOR", "1")
        .env_remove("ROCFORGE_RECIPES")
        .env_remove("ROCFORGE_STORE")
        .env("ROCFORGE_RELEASE", "debian-6.4")
        .env("ROCFORGE_CACHE", home.join("cache"))
        .env("ROCFORGE_CONFIG", &config)
        .env("CONTAINERS_CONF", containers_conf())
        .env("HOME", home);
    c
}

fn podman() -> Command {
    let mut c = Command::new("podman");
    c.env("CONTAINERS_CONF", containers_conf());
    c
}

fn timed(cmd: &mut Command) -> (Duration, Output) {
    cmd.stdin(Stdio::null());
    let t = Instant::now();
    let out = cmd.output().expect("spawn");
    let wall = t.elapsed();
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (wall, out)
}

fn median(mut v: Vec<Duration>) -> f64 {
    v.sort();
    v[v.len() / 2].as_secs_f64()
}

fn ready() -> Option<&'static str> {
    let image = podman()
        .args(["image", "exists", IMAGE])
        .status()
        .is_ok_and(|s| s.success());
    if !image {
        return Some("podman with localhost/rocforge/builder:debian-6.4 (scripts/debian-image.sh)");
    }
    None
}

/// The patched source tree of `component` in the cache, fetched once.
fn fetched(home: &Path, component: &str) -> PathBuf {
    let (_, out) = timed(rocforge(home).args(["fetch", component, "--arch", ARCH]));
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

/// The configure arguments rocforge gives `component` (its content key's input), so the run
/// by hand uses the same flags.
fn cmake_args(home: &Path, component: &str) -> Vec<String> {
    let (_, out) = timed(rocforge(home).args([
        "plan",
        component,
        "--arch",
        ARCH,
        "--explain",
        component,
        "--format",
        "json",
    ]));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let input = if v.get("component").is_some() {
        &v
    } else {
        &v["input"]
    };
    let build = &input["component"]["build"];
    let mut args: Vec<String> = vec![
        "-DCMAKE_INSTALL_PREFIX=/opt/rocm".into(),
        "-DFETCHCONTENT_FULLY_DISCONNECTED=ON".into(),
    ];
    args.extend(
        build["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().to_string()),
    );
    let targets = ARCH.split(',').rev().collect::<Vec<_>>().join(";");
    for var in build["arch_vars"].as_array().unwrap() {
        args.push(format!("-D{}={targets}", var.as_str().unwrap()));
    }
    args
}

fn overhead(home: &Path) {
    let tree = fetched(home, "rocprim");
    let args = cmake_args(home, "rocprim");
    let script = format!(
        "set -e; cmake -S /src -B /build -G Ninja -DCMAKE_PREFIX_PATH=/opt/rocm {} >/dev/null; cmake --build /build --parallel 2 >/dev/null; DESTDIR=/out cmake --install /build >/dev/null",
        args.iter()
            .map(|a| format!("'{a}'"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    let (mut ours, mut peer) = (Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        let store = home.join(format!("store-{round}"));
        let (t, _) = timed(rocforge(home).arg("--store").arg(&store).args([
            "build",
            "rocprim",
            "--arch",
            ARCH,
            "--runtime",
            "podman",
            "-q",
        ]));
        ours.push(t);
        let (t, _) = timed(
            podman()
                .args([
                    "run",
                    "--rm",
                    "--network=none",
                    "--tmpfs",
                    "/build",
                    "--tmpfs",
                    "/out",
                ])
                .arg("-v")
                .arg(format!("{}:/src:ro", tree.display()))
                .args([IMAGE, "sh", "-c", &script]),
        );
        peer.push(t);
    }
    let (a, b) = (median(ours), median(peer));
    println!(
        "rocPRIM (debian-6.4, real configure + install): rocforge build {a:.2} s, cmake + ninja in the same image {b:.2} s: {:.3}x (goal <= 1.03)",
        a / b
    );
    common::record(
        "real component: rocforge build rocPRIM vs cmake + ninja by hand",
        a,
        "s",
        Some(("podman run cmake + ninja", b)),
        Some(a / b),
        "<= 1.03",
        Some(a / b <= 1.03),
    );
}

fn one_target(home: &Path) {
    let tree = fetched(home, "rocrand");
    let tu = std::env::var("ROCFORGE_BENCH_TU")
        .unwrap_or_else(|_| "library/src/rng/generator_type_xorwow.cpp".into());
    let compile = |targets: &str| {
        let arches: String = targets
            .split(',')
            .map(|t| format!(" --offload-arch={t}"))
            .collect();
        // rocrand_version.h is written by CMake at configure time from a template; the template
        // with its two @…@ variables substituted, as CMake would, is what one unit needs.
        let script = format!(
            "set -e; mkdir -p /tmp/b/inc/rocrand && cd /tmp/b && sed -e 's/@rocrand_VERSION_NUMBER@/300300/' -e 's/@rocrand_ENABLE_INLINE_ASM@//' /src/library/include/rocrand/rocrand_version.h.in > inc/rocrand/rocrand_version.h && hipcc -O3 -std=c++17 -fPIC -I/tmp/b/inc -I/src/library/include -I/src/library/src{arches} -c /src/{tu} -o x.o"
        );
        let (t, _) = timed(
            podman()
                .args(["run", "--rm", "--network=none", "-v"])
                .arg(format!("{}:/src:ro", tree.display()))
                .args([IMAGE, "sh", "-c", &script]),
        );
        t
    };
    let ours = compile("gfx90c");
    let debian = compile(DEBIAN_TARGETS);
    let (a, b) = (ours.as_secs_f64(), debian.as_secs_f64());
    println!(
        "rocRAND {tu}: gfx90c alone {a:.1} s, Debian's 11 targets {b:.1} s: {:.3}x",
        a / b
    );
    common::record(
        "one target (gfx90c) vs Debian's 11, one rocRAND translation unit",
        a,
        "s",
        Some(("Debian's 11-target set", b)),
        Some(a / b),
        "—",
        None,
    );
}

fn rebuild(home: &Path) {
    // A copy of the catalog whose rocRAND carries one more (one-line) patch: a new key, so a
    // fresh build tree, and the ccache the cold build filled.
    let catalog = home.join("catalog");
    timed(rocforge(home).args(["catalog", "export"]).arg(&catalog));
    let recipes = catalog.join("recipes");
    let store = home.join("store-rebuild");
    let build = |home: &Path| {
        timed(
            rocforge(home)
                .arg("--recipes")
                .arg(&recipes)
                .arg("--store")
                .arg(&store)
                .args([
                    "build",
                    "rocrand",
                    "--arch",
                    ARCH,
                    "--runtime",
                    "podman",
                    "-q",
                ]),
        )
        .0
    };
    let cold = build(home);
    let patch = "One line.\n\n--- a/library/src/rocrand.cpp\n+++ b/library/src/rocrand.cpp\n@@ -1,1 +1,2 @@\n+// rebuilt\n";
    let tree = fetched(home, "rocrand");
    let first = std::fs::read_to_string(tree.join("library/src/rocrand.cpp")).unwrap();
    let first = first.lines().next().unwrap_or_default();
    let patch = format!("{patch} {first}\n");
    let dir = catalog.join("patches/debian-6.4/rocrand");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("0001-one-line.patch"), patch).unwrap();
    let over = recipes.join("debian-6.4/rocrand.toml");
    let text = std::fs::read_to_string(&over).unwrap();
    std::fs::write(
        &over,
        text.replace(
            "[source]",
            "[patches]\nall = [\"0001-one-line.patch\"]\n\n[source]",
        ),
    )
    .unwrap();
    let warm = build(home);
    let (a, b) = (warm.as_secs_f64(), cold.as_secs_f64());
    println!(
        "rocRAND rebuild after a one-line change, with ccache: {a:.1} s against the cold {b:.1} s: {:.3}x (goal <= 0.15)",
        a / b
    );
    common::record(
        "rebuild after a one-line .cpp change (ccache) vs cold build, rocRAND",
        a,
        "s",
        Some(("cold build", b)),
        Some(a / b),
        "<= 0.15",
        Some(a / b <= 0.15),
    );
}

/// Two of rocBLAS's logic files, derived for gfx90c (renoir) and gfx902 (raven): SGEMM NN with
/// 632 solutions and the small DGEMM NN.
const TENSILE_LOGIC: [&str; 2] = ["Cijk_Ailk_Bljk_SB", "Cijk_Ailk_Bljk_DB"];

/// TensileCreateLibrary as rocBLAS's build runs it (its command line, the recipe's environment),
/// in the builder image, on `TENSILE_LOGIC`: for gfx90c alone against gfx90c and gfx902 together;
/// then through ccache, as the debian-6.4 recipe runs Tensile's assembler, again after a tuned
/// winner in the SGEMM file changed, against that cold run.
fn tensile(home: &Path) {
    let tensile = fetched(home, "tensile");
    let logic_src = fetched(home, "rocblas").join("library/src/blas3/Tensile/Logic/asm_full");
    let work = home.join("tensile-bench");
    for codename in ["renoir", "raven"] {
        let dir = work.join("logic").join(codename);
        std::fs::create_dir_all(&dir).unwrap();
        for f in TENSILE_LOGIC {
            let name = format!("{codename}_{f}.yaml");
            std::fs::copy(logic_src.join(codename).join(&name), dir.join(&name)).unwrap();
        }
    }
    let (_, explained) = timed(rocforge(home).args([
        "plan",
        "rocblas",
        "--arch",
        ARCH,
        "--explain",
        "rocblas",
        "--format",
        "json",
    ]));
    let v: serde_json::Value = serde_json::from_slice(&explained.stdout).unwrap();
    let input = v.get("input").unwrap_or(&v);
    let env = input["component"]["build"]["env"]
        .as_object()
        .unwrap()
        .clone();
    let mounts = |c: &mut Command| {
        c.args(["run", "--rm", "--network=none", "-v"])
            .arg(format!("{}:/tensile:ro", tensile.display()))
            .arg("-v")
            .arg(format!("{}:/w", work.display()));
    };
    // Tensile's virtualenv, made once (not timed), as rocBLAS's configure makes it.
    let mut venv = podman();
    mounts(&mut venv);
    for (k, v) in env.iter().filter(|(k, _)| k.starts_with("PIP_")) {
        venv.args(["-e", &format!("{k}={}", v.as_str().unwrap())]);
    }
    timed(venv.args([
        IMAGE,
        "sh",
        "-c",
        "cp -R /tensile /tmp/t && python3 -m venv --system-site-packages /w/venv && /w/venv/bin/pip install -q /tmp/t",
    ]));
    let run = |arch: &str, ccache: bool| -> f64 {
        let mut c = podman();
        mounts(&mut c);
        for (k, v) in &env {
            let launcher = k.ends_with("_COMPILER_LAUNCHER");
            if !k.starts_with("PIP_") && (ccache || !launcher) {
                c.args(["-e", &format!("{k}={}", v.as_str().unwrap())]);
            }
        }
        let script = format!(
            "rm -rf /w/out && cd /tmp && /w/venv/bin/TensileCreateLibrary --merge-files --separate-architectures --lazy-library-loading --no-short-file-names --verbose=0 --code-object-version=default --cxx-compiler=hipcc --jobs={jobs} --library-format=msgpack --architecture={arch} /w/logic /w/out HIP > /w/out.log 2>&1 || {{ tail -20 /w/out.log; exit 1; }}",
            jobs = std::thread::available_parallelism().map_or(1, |n| n.get()),
        );
        timed(c.args(["-e", "CCACHE_DIR=/w/ccache", IMAGE, "sh", "-c", &script]))
            .0
            .as_secs_f64()
    };
    let one = run("gfx90c", false);
    let both = run("gfx90c_gfx902", false);
    println!(
        "TensileCreateLibrary, {} logic files: gfx90c alone {one:.1} s, gfx90c and gfx902 {both:.1} s: {:.3}x",
        TENSILE_LOGIC.len(),
        one / both
    );
    common::record(
        "Tensile libraries for one target (gfx90c) vs two (gfx90c,gfx902), two rocBLAS logic files",
        one,
        "s",
        Some(("gfx90c and gfx902", both)),
        Some(one / both),
        "—",
        None,
    );
    let _ = std::fs::remove_dir_all(work.join("ccache"));
    let cold = run("gfx90c", true);
    // A tuned winner: the last size of the SGEMM table goes to its neighbouring solution.
    let file = work.join(format!("logic/renoir/renoir_{}.yaml", TENSILE_LOGIC[0]));
    let text = std::fs::read_to_string(&file).unwrap();
    let at = text.rfind("\n    - [").expect("an exact-logic table") + "\n    - [".len();
    let end = at + text[at..].find(',').unwrap();
    let index: usize = text[at..end].parse().unwrap();
    let retuned = if index > 0 { index - 1 } else { 1 };
    std::fs::write(&file, format!("{}{retuned}{}", &text[..at], &text[end..])).unwrap();
    let warm = run("gfx90c", true);
    println!(
        "TensileCreateLibrary after one winner changed, with ccache: {warm:.1} s against the cold {cold:.1} s: {:.3}x",
        warm / cold
    );
    common::record(
        "Tensile rerun after one logic file's winner changed (ccache) vs cold, gfx90c",
        warm,
        "s",
        Some(("cold run", cold)),
        Some(warm / cold),
        "—",
        None,
    );
}

fn main() {
    println!(
        "rocforge real-ROCm benchmark ({} cores)",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    if let Some(why) = ready() {
        println!("skipped: needs {why}");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    // One figure alone, when the others were measured in an earlier run: each compiles for minutes.
    match std::env::var("ROCFORGE_BENCH_ONLY").as_deref() {
        Ok("overhead") => return overhead(tmp.path()),
        Ok("one-target") => return one_target(tmp.path()),
        Ok("rebuild") => return rebuild(tmp.path()),
        Ok("tensile") => return tensile(tmp.path()),
        _ => {}
    }
    overhead(tmp.path());
    if std::env::var("ROCFORGE_BENCH_QUICK").is_ok_and(|v| v == "1") {
        println!("quick: the one-target and rebuild figures are skipped (they compile rocRAND)");
        return;
    }
    one_target(tmp.path());
    if std::env::var("ROCFORGE_BENCH_REBUILD").is_ok_and(|v| v == "1") {
        rebuild(tmp.path());
    } else {
        println!("rebuild figure skipped: set ROCFORGE_BENCH_REBUILD=1 (two builds of rocRAND)");
    }
}
