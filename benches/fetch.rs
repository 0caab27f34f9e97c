//! Cached fetch: `rocforge fetch` of a source already in the cache (goal: at most 20 ms, a
//! no-op), side by side with what a user would otherwise run to make sure a checkout is at
//! its tag: `git -C checkout checkout -q TAG`.

#[path = "common/mod.rs"]
mod common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const RUNS: usize = 15;

fn sh(dir: &Path, cmd: &str, args: &[&str]) {
    let st = Command::new(cmd)
        .current_dir(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "b")
        .env("GIT_AUTHOR_EMAIL", "b@localhost")
        .env("GIT_COMMITTER_NAME", "b")
        .env("GIT_COMMITTER_EMAIL", "b@localhost")
        .status()
        .unwrap();
    assert!(st.success(), "{cmd} {args:?}");
}

fn time(mut f: impl FnMut()) -> Duration {
    let t = Instant::now();
    f();
    t.elapsed()
}

fn median(mut v: Vec<Duration>) -> f64 {
    v.sort();
    v[v.len() / 2].as_secs_f64() * 1e3
}

fn main() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    // A source repository with a few thousand files, like a ROCm library.
    let repo = d.join("origin");
    std::fs::create_dir_all(&repo).unwrap();
    for i in 0..3000 {
        let p = repo.join(format!("library/src/f{:02}/file{i}.cpp", i % 50));
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, format!("// file {i}\nint f{i}() {{ return {i}; }}\n")).unwrap();
    }
    sh(&repo, "git", &["init", "-q"]);
    sh(&repo, "git", &["add", "-A"]);
    sh(&repo, "git", &["commit", "-qm", "init"]);
    sh(&repo, "git", &["tag", "v1"]);
    let cat = d.join("catalog");
    std::fs::create_dir_all(cat.join("recipes/b-1")).unwrap();
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("recipes/arches.toml"),
        cat.join("recipes/arches.toml"),
    )
    .unwrap();
    std::fs::write(cat.join("recipes/b-1/release.toml"), "name = \"b-1\"\nversion = \"1\"\nimage = \"localhost/b:1\"\nprefix = \"/opt/rocm\"\narches = [\"gfx90c\"]\n").unwrap();
    std::fs::write(
        cat.join("recipes/b-1/lib.toml"),
        format!(
            "name = \"lib\"\nversion = \"1\"\nsummary = \"s\"\nlicense = \"MIT\"\n\n[source]\ngit = \"file://{}\"\ntag = \"v1\"\n\n[build]\nsystem = \"cmake\"\narch-vars = [\"GPU_TARGETS\"]\n",
            repo.display()
        ),
    )
    .unwrap();
    let exe = env!("CARGO_BIN_EXE_rocforge");
    let fetch = || {
        let out = Command::new(exe)
            .current_dir(&cat)
            .args(["--recipes", "recipes", "--quiet", "fetch", "lib"])
            .env("ROCFORGE_CACHE", d.join("cache"))
            .env("ROCFORGE_CONFIG", d.join("none.toml"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    std::fs::write(d.join("none.toml"), "").unwrap();
    let st = Command::new(exe)
        .current_dir(&cat)
        .args(["--recipes", "recipes", "--quiet", "lock", "--skip-images"])
        .env("ROCFORGE_CONFIG", d.join("none.toml"))
        .status()
        .unwrap();
    assert!(st.success());
    let cold = time(fetch);
    let checkout = d.join("checkout");
    sh(
        d,
        "git",
        &[
            "clone",
            "-q",
            repo.to_str().unwrap(),
            checkout.to_str().unwrap(),
        ],
    );
    let mut ours = Vec::new();
    let mut peer = Vec::new();
    for _ in 0..RUNS {
        ours.push(time(fetch));
        peer.push(time(|| sh(&checkout, "git", &["checkout", "-q", "v1"])));
    }
    let (o, p) = (median(ours), median(peer));
    println!("cached fetch benchmark (3,000-file source, median of {RUNS})");
    println!(
        "  first fetch (clone + checkout)      {:8.1} ms",
        cold.as_secs_f64() * 1e3
    );
    println!(
        "  rocforge fetch, cached              {o:8.1} ms   goal <= 20 ms   {}",
        if o <= 20.0 { "met" } else { "MISSED" }
    );
    println!(
        "  git checkout -q v1 (already there)  {p:8.1} ms   ratio rocforge/git = {:.2}",
        o / p
    );
    let cold_ms = cold.as_secs_f64() * 1e3;
    common::record(
        "fetch: first fetch of a 3,000-file source (clone + checkout)",
        cold_ms,
        "ms",
        None,
        None,
        "",
        None,
    );
    common::record(
        "fetch: cached fetch of a 3,000-file source",
        o,
        "ms",
        Some(("git checkout -q v1 (already there)", p)),
        Some(o / p),
        "<= 20 ms",
        Some(o <= 20.0),
    );
}
