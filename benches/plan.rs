//! Plan benchmark: `rocforge plan` over the shipped catalog and over a generated catalog of
//! 2,000 components with about 4 dependencies each, as a user runs it (a fresh process that
//! loads, validates, hashes and orders everything). Prints wall time, peak RSS, the goal, and a
//! ratio against the floor a script would pay to merely parse the same TOML (python's tomllib).
//!
//! cargo bench --bench plan                      run it
//! cargo bench --bench plan -- --generate DIR    only write the generated catalog to DIR

#[path = "common/mod.rs"]
mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const COMPONENTS: usize = 2000;
const DEPS: usize = 4;
const RUNS: usize = 7;

/// A deterministic pseudo-random graph: component i depends on up to DEPS earlier ones, so it
/// is acyclic by construction, with a patch file every tenth component.
fn generate(dir: &Path) {
    let line = dir.join("recipes/gen-1.0");
    std::fs::create_dir_all(&line).unwrap();
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("recipes/arches.toml"),
        dir.join("recipes/arches.toml"),
    )
    .unwrap();
    std::fs::write(
        line.join("release.toml"),
        "name = \"gen-1.0\"\nversion = \"1.0\"\nimage = \"localhost/gen:1.0\"\nprefix = \"/opt/rocm\"\narches = [\"gfx90c\", \"gfx902\"]\n",
    )
    .unwrap();
    let mut seed: u64 = 0x9e3779b97f4a7c15;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for i in 0..COMPONENTS {
        let mut deps: Vec<usize> = (0..DEPS.min(i)).map(|_| (next() as usize) % i).collect();
        deps.sort_unstable();
        deps.dedup();
        let deps: Vec<String> = deps.iter().map(|d| format!("\"c{d:04}\"")).collect();
        let patches = if i % 10 == 0 {
            let pdir = dir.join(format!("patches/gen-1.0/c{i:04}"));
            std::fs::create_dir_all(&pdir).unwrap();
            std::fs::write(
                pdir.join("0001-gfx90c.patch"),
                format!("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-{i}\n+{i} gfx90c\n"),
            )
            .unwrap();
            "[patches]\nall = [\"0001-gfx90c.patch\"]\n"
        } else {
            ""
        };
        let text = format!(
            "name = \"c{i:04}\"\nversion = \"1.{i}.0\"\nsummary = \"generated component {i}\"\nlicense = \"MIT\"\ndepends = [{}]\n\n[source]\ngit = \"https://example.invalid/c{i:04}.git\"\ntag = \"v1.{i}.0\"\n\n{patches}\n[build]\nsystem = \"cmake\"\narch-vars = [\"GPU_TARGETS\", \"AMDGPU_TARGETS\"]\nargs = [\"-DCMAKE_BUILD_TYPE=Release\", \"-DBUILD_CLIENTS_TESTS=ON\"]\n\n[test]\nclient = \"bin/c{i:04}-test\"\nshards = 4\ntimeout = \"30m\"\n\n[resources]\ndisk = \"2GiB\"\nmemory = \"2.5GiB\"\nhours = {}\n",
            deps.join(", "),
            (i % 7) as f64 * 0.25 + 0.25
        );
        std::fs::write(line.join(format!("c{i:04}.toml")), text).unwrap();
    }
}

struct Run {
    wall: Duration,
    max_rss_kib: i64,
}

/// Runs a command, returning its wall time and its own peak RSS (from wait4, not the
/// cumulative children figure).
fn run(cmd: &mut Command) -> Run {
    use std::os::unix::process::ExitStatusExt;
    cmd.stdout(std::process::Stdio::null());
    let start = Instant::now();
    let child = cmd.spawn().expect("spawn");
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: pid is our child; status and usage are valid out-pointers.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let wall = start.elapsed();
    assert_eq!(r, pid, "wait4 failed");
    let exit = std::process::ExitStatus::from_raw(status);
    assert!(exit.success(), "{cmd:?} failed: {exit}");
    std::mem::forget(child);
    Run {
        wall,
        max_rss_kib: usage.ru_maxrss,
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn bench(
    name: &str,
    goal_ms: f64,
    goal_rss_mib: Option<f64>,
    mut ours: impl FnMut() -> Command,
    peer: Option<(&str, Command)>,
) {
    let mut walls = Vec::new();
    let mut peer_walls = Vec::new();
    let mut rss = 0;
    let mut peer_cmd = peer;
    // Interleave ours and the peer so machine noise hits both alike.
    for _ in 0..RUNS {
        let r = run(&mut ours());
        walls.push(r.wall);
        rss = rss.max(r.max_rss_kib);
        if let Some((_, cmd)) = peer_cmd.as_mut() {
            peer_walls.push(run(cmd).wall);
        }
    }
    let ms = median(walls).as_secs_f64() * 1e3;
    let rss_mib = rss as f64 / 1024.0;
    println!("{name}");
    println!(
        "  rocforge plan      {ms:8.1} ms   goal <= {goal_ms} ms   {}",
        if ms <= goal_ms { "met" } else { "MISSED" }
    );
    match goal_rss_mib {
        Some(g) => println!(
            "  peak RSS           {rss_mib:8.1} MiB  goal <= {g} MiB  {}",
            if rss_mib <= g { "met" } else { "MISSED" }
        ),
        None => println!("  peak RSS           {rss_mib:8.1} MiB"),
    }
    let mut peer_figure = None;
    if let Some((peer_name, _)) = peer_cmd {
        let peer_ms = median(peer_walls).as_secs_f64() * 1e3;
        println!(
            "  {peer_name:<18} {peer_ms:8.1} ms   ratio rocforge/peer = {:.2}",
            ms / peer_ms
        );
        peer_figure = Some((peer_name, peer_ms));
    }
    common::record(
        &format!("plan: {name}"),
        ms,
        "ms",
        peer_figure,
        peer_figure.map(|(_, p)| ms / p),
        &format!("<= {goal_ms} ms"),
        Some(ms <= goal_ms),
    );
    common::record(
        &format!("plan peak RSS: {name}"),
        rss_mib,
        "MiB",
        None,
        None,
        &goal_rss_mib.map_or(String::new(), |g| format!("<= {g} MiB")),
        goal_rss_mib.map(|g| rss_mib <= g),
    );
}

fn tomllib_parse(dir: &Path) -> Option<(&'static str, Command)> {
    let ok = Command::new("python3")
        .args(["-c", "import tomllib"])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        println!("  (python3 with tomllib not found: no parse-only peer figure)");
        return None;
    }
    let mut cmd = Command::new("python3");
    cmd.args([
        "-c",
        "import sys, tomllib, pathlib\nfor p in sorted(pathlib.Path(sys.argv[1]).rglob('*.toml')):\n    tomllib.loads(p.read_text())",
    ])
    .arg(dir);
    Some(("tomllib parse only", cmd))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--generate") {
        let dir = PathBuf::from(args.get(i + 1).expect("--generate DIR"));
        generate(&dir);
        println!(
            "wrote a {COMPONENTS}-component catalog to {}",
            dir.display()
        );
        return;
    }
    let exe = env!("CARGO_BIN_EXE_rocforge");
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");

    println!(
        "rocforge plan benchmark (median of {RUNS} runs; {} cores)",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("recipes");
    bench(
        "shipped catalog, whole release line, gfx90c,gfx902",
        50.0,
        None,
        || {
            let mut c = Command::new(exe);
            c.args(["--recipes"])
                .arg(&shipped)
                .args(["--store"])
                .arg(&store)
                .args(["plan", "--arch", "gfx90c,gfx902"]);
            c
        },
        tomllib_parse(&shipped),
    );

    let gen_dir = tmp.path().join("gen");
    let t = Instant::now();
    generate(&gen_dir);
    println!(
        "generated {COMPONENTS} components x ~{DEPS} deps in {:.0} ms",
        t.elapsed().as_secs_f64() * 1e3
    );
    let recipes = gen_dir.join("recipes");
    bench(
        "generated catalog: 2,000 components, ~4 dependencies each, gfx90c,gfx902",
        1000.0,
        Some(200.0),
        || {
            let mut c = Command::new(exe);
            c.args(["--recipes"])
                .arg(&recipes)
                .args(["--store"])
                .arg(&store)
                .args(["plan", "--arch", "gfx90c,gfx902", "--format", "json"]);
            c
        },
        tomllib_parse(&recipes),
    );
}
