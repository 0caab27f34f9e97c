//! Build benchmark, three figures side by side in one run (no figure is asserted):
//!
//! 1. A no-op `rocforge build` of the whole shipped catalog with every entry in the store
//!    (goal: at most 300 ms), beside a no-op `cmake --build` of an already-built tiny project,
//!    the command a user would otherwise run to learn "is everything built".
//! 2. The per-component overhead of a real container build of a one-line script component
//!    (fresh store each round), beside a bare `podman run` of the same command (goal: at most
//!    1.2x). Skipped, saying so, without podman and the test builder image.
//! 3. The scheduler (`rocforge::build::schedule::run`) on sleep-based graphs: makespan over
//!    the lower bound max(critical path, work / slots) (goal: within 5% where the bound is
//!    attainable), and on random DAGs beside a naive FIFO scheduler; each also simulated with
//!    exact durations, to tell the policy's gap from the machine's timing noise.
//!
//! cargo bench --bench build

#[path = "common/mod.rs"]
mod common;

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::AtomicBool;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use rocforge::build::schedule::{self, Node};

const IMAGE: &str = "localhost/rocforge-test-builder:bookworm";
const ARCH: &str = "gfx90c,gfx902";
const NOOP_RUNS: usize = 7;
const CONTAINER_RUNS: usize = 5;
const SCRIPT: &str = r#"mkdir -p "$DESTDIR$PREFIX/share" && echo hi > "$DESTDIR$PREFIX/share/x""#;

fn manifest() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn containers_conf() -> PathBuf {
    manifest().join("containers/containers.conf")
}

fn median(mut v: Vec<Duration>) -> f64 {
    v.sort();
    v[v.len() / 2].as_secs_f64() * 1e3
}

fn verdict(met: bool) -> &'static str {
    if met { "met" } else { "MISSED" }
}

/// rocforge with a private home, cache and (empty) user config, as the tests run it.
fn rocforge(home: &Path) -> Command {
    let config = home.join("no-user-config.toml");
    if !config.exists() {
        std::fs::write(&config, "").unwrap();
    }
    let mut c = Command::new(env!("CARGO_BIN_EXE_rocforge"));
    c.current_dir(home)
        .env("NO_COLOR", "1")
        .env_remove("ROCFORGE_RECIPES")
        .env_remove("ROCFORGE_RELEASE")
        .env_remove("ROCFORGE_STORE")
        .env_remove("GITHUB_ACTIONS")
        .env("ROCFORGE_CACHE", home.join("cache"))
        .env("ROCFORGE_CONFIG", &config)
        .env("CONTAINERS_CONF", containers_conf())
        .env("HOME", home);
    c
}

/// Runs `cmd` to completion, timing it; panics with its output when it fails.
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

fn stdout(cmd: &mut Command) -> String {
    String::from_utf8(timed(cmd).1.stdout).unwrap()
}

fn json(cmd: &mut Command) -> serde_json::Value {
    serde_json::from_str(&stdout(cmd)).unwrap()
}

// ---------------------------------------------------------------------------------------------
// 1. No-op build of the shipped catalog.

/// Fills `store` with a complete entry for every step of the shipped catalog's plan: what a
/// finished build leaves (meta.json, hash-input.json, tree/). Returns the number of steps.
fn populate_store(home: &Path, store: &Path) -> usize {
    let plan = json(
        rocforge(home)
            .arg("--store")
            .arg(store)
            .args(["plan", "--arch", ARCH, "--format", "json"]),
    );
    let steps = plan["steps"].as_array().unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    for s in steps {
        let component = s["component"].as_str().unwrap();
        let key = s["key"].as_str().unwrap();
        let hash_input = json(rocforge(home).arg("--store").arg(store).args([
            "plan",
            "--arch",
            ARCH,
            "--explain",
            component,
            "--format",
            "json",
        ]));
        let entry = store.join(key);
        std::fs::create_dir_all(entry.join("tree")).unwrap();
        let meta = serde_json::json!({
            "component": component,
            "key": key,
            "committed": now,
            "version": s["version"],
            "release": plan["release"],
            "targets": plan["targets"],
            "runtime": "podman",
            "reproducible": true,
            "image": plan["image"],
            "started": now,
            "duration_secs": s["resources"]["hours"].as_f64().unwrap_or(1.0) * 3600.0,
            "source_commit": null,
            "coverage": null,
        });
        std::fs::write(
            entry.join("hash-input.json"),
            serde_json::to_vec_pretty(&hash_input).unwrap(),
        )
        .unwrap();
        std::fs::write(
            entry.join("meta.json"),
            serde_json::to_vec_pretty(&meta).unwrap(),
        )
        .unwrap();
    }
    steps.len()
}

/// A tiny C project configured and built with Ninja: `cmake --build` on it is a no-op.
fn built_cmake_project(dir: &Path) -> Option<Command> {
    let works = |tool: &str| {
        Command::new(tool)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if !works("cmake") || !works("ninja") {
        println!("  (cmake or ninja not found: no peer figure)");
        return None;
    }
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(
        dir.join("CMakeLists.txt"),
        "cmake_minimum_required(VERSION 3.16)\nproject(tiny C)\nadd_executable(tiny main.c)\n",
    )
    .unwrap();
    std::fs::write(dir.join("main.c"), "int main(void) { return 0; }\n").unwrap();
    let build = dir.join("build");
    let ok = Command::new("cmake")
        .args(["-G", "Ninja", "-S"])
        .arg(dir)
        .arg("-B")
        .arg(&build)
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
        && Command::new("cmake")
            .arg("--build")
            .arg(&build)
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
    if !ok {
        println!("  (the tiny cmake project did not configure and build: no peer figure)");
        return None;
    }
    let mut c = Command::new("cmake");
    c.arg("--build").arg(&build).stdout(Stdio::null());
    Some(c)
}

fn noop_build(tmp: &Path) {
    println!("1. no-op build: shipped catalog, whole line, {ARCH}, every entry in the store");
    let home = tmp.join("noop");
    std::fs::create_dir_all(&home).unwrap();
    let store = home.join("store");
    let steps = populate_store(&home, &store);
    // No PATH at all: a build that tried to start a container (or any tool) would fail.
    let empty_path = home.join("empty-path");
    std::fs::create_dir_all(&empty_path).unwrap();
    let build = || {
        let mut c = rocforge(&home);
        c.arg("--store")
            .arg(&store)
            .args(["build", "--arch", ARCH])
            .env("PATH", &empty_path);
        c
    };
    let (_, out) = timed(&mut build());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let cached = stderr.lines().filter(|l| l.ends_with(" cached")).count();
    assert_eq!(
        cached, steps,
        "every one of the {steps} steps must be cached:\n{stderr}"
    );
    assert!(
        !stderr.contains("building"),
        "a no-op build must start nothing:\n{stderr}"
    );
    let mut peer = built_cmake_project(&home.join("cmake"));
    let mut ours = Vec::new();
    let mut theirs = Vec::new();
    for _ in 0..NOOP_RUNS {
        ours.push(timed(&mut build()).0);
        if let Some(p) = peer.as_mut() {
            theirs.push(timed(p).0);
        }
    }
    let ms = median(ours);
    println!(
        "  rocforge build ({steps} steps, all cached)   {ms:8.1} ms   goal <= 300 ms   {}",
        verdict(ms <= 300.0)
    );
    let mut peer_figure = None;
    if !theirs.is_empty() {
        let peer_ms = median(theirs);
        println!(
            "  cmake --build (no-op, ninja)            {peer_ms:8.1} ms   ratio rocforge/peer = {:.2}",
            ms / peer_ms
        );
        peer_figure = Some(("cmake --build (no-op, ninja)", peer_ms));
    }
    common::record(
        &format!("no-op build: shipped catalog, {ARCH}, {steps} steps all in the store"),
        ms,
        "ms",
        peer_figure,
        peer_figure.map(|(_, p)| ms / p),
        "<= 300 ms",
        Some(ms <= 300.0),
    );
}

// ---------------------------------------------------------------------------------------------
// 2. Per-component container overhead.

fn podman_ready() -> bool {
    Command::new("podman")
        .args(["image", "exists", IMAGE])
        .env("CONTAINERS_CONF", containers_conf())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// A catalog with one script component whose source is a `path` directory.
fn script_catalog(dir: &Path) -> PathBuf {
    let recipes = dir.join("recipes");
    let line = recipes.join("bench-1.0");
    std::fs::create_dir_all(line.join("src-one")).unwrap();
    std::fs::copy(
        manifest().join("tests/fixtures/base/recipes/arches.toml"),
        recipes.join("arches.toml"),
    )
    .unwrap();
    std::fs::write(
        line.join("release.toml"),
        format!("name = \"bench-1.0\"\nversion = \"1.0\"\nimage = \"{IMAGE}\"\nprefix = \"/opt/rocm\"\narches = [\"gfx90c\", \"gfx902\"]\n"),
    )
    .unwrap();
    std::fs::write(line.join("src-one/README"), "one\n").unwrap();
    std::fs::write(
        line.join("one.toml"),
        format!(
            "name = \"one\"\nversion = \"1.0\"\nsummary = \"writes one file\"\nlicense = \"MIT\"\n\n[source]\npath = \"src-one\"\n\n[build]\nsystem = \"script\"\nscript = '''\n{SCRIPT}\n'''\n"
        ),
    )
    .unwrap();
    recipes
}

fn podman(args: &[&str]) -> Command {
    let mut c = Command::new("podman");
    c.env("CONTAINERS_CONF", containers_conf()).args(args);
    c
}

fn container_overhead(tmp: &Path) {
    println!("2. one script component built in a container, fresh store each round");
    if !podman_ready() {
        println!("  skipped: podman with the image {IMAGE} is not available here");
        return;
    }
    let home = tmp.join("container");
    std::fs::create_dir_all(&home).unwrap();
    let recipes = script_catalog(&home);
    let mut round = 0;
    let mut ours = || {
        round += 1;
        let store = home.join(format!("store-{round}"));
        let (wall, _) = timed(
            rocforge(&home)
                .arg("--recipes")
                .arg(&recipes)
                .arg("--store")
                .arg(&store)
                .args(["-q", "build", "--arch", ARCH, "--runtime", "podman"]),
        );
        let trees: Vec<PathBuf> = std::fs::read_dir(&store)
            .unwrap()
            .flatten()
            .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
            .map(|e| e.path().join("tree/share/x"))
            .collect();
        assert_eq!(trees.len(), 1, "one entry in {}", store.display());
        assert_eq!(std::fs::read_to_string(&trees[0]).unwrap(), "hi\n");
        wall
    };
    let mut peer_round = 0;
    let mut peer = || {
        peer_round += 1;
        let out = home.join(format!("peer-{peer_round}"));
        std::fs::create_dir_all(&out).unwrap();
        let (wall, _) = timed(
            podman(&["run", "--rm", "--network=none", "-v"])
                .arg(format!("{}:/out", out.display()))
                .args(["-e", "DESTDIR=/out", "-e", "PREFIX=/opt/rocm", IMAGE])
                .args(["sh", "-c", SCRIPT]),
        );
        assert_eq!(
            std::fs::read_to_string(out.join("opt/rocm/share/x")).unwrap(),
            "hi\n"
        );
        wall
    };
    // One discarded round of each: the image's layers and rocforge's caches come in warm.
    ours();
    peer();
    let mut a = Vec::new();
    let mut b = Vec::new();
    for _ in 0..CONTAINER_RUNS {
        a.push(ours());
        b.push(peer());
    }
    let ms = median(a);
    let peer_ms = median(b);
    let ratio = ms / peer_ms;
    println!("  rocforge build (1 component)            {ms:8.1} ms");
    println!(
        "  podman run --rm (same script)           {peer_ms:8.1} ms   ratio rocforge/peer = {ratio:.2}   goal <= 1.2   {}",
        verdict(ratio <= 1.2)
    );
    common::record(
        "container build: one script component in podman, fresh store",
        ms,
        "ms",
        Some(("podman run --rm --network=none (same script)", peer_ms)),
        Some(ratio),
        "ratio <= 1.2",
        Some(ratio <= 1.2),
    );
    // Not part of the ratio: the other podman calls a build makes besides `run`.
    let mut version = Vec::new();
    let mut ps = Vec::new();
    for _ in 0..CONTAINER_RUNS {
        version.push(
            timed(podman(&["version", "--format", "{{.Client.Version}}"]).stdout(Stdio::null())).0,
        );
        ps.push(
            timed(
                podman(&[
                    "ps",
                    "--all",
                    "--filter",
                    "label=rocforge",
                    "--format",
                    "{{.Names}}",
                ])
                .stdout(Stdio::null()),
            )
            .0,
        );
    }
    let (version_ms, ps_ms) = (median(version), median(ps));
    println!(
        "  of which, besides run: podman version {version_ms:.1} ms, podman ps {ps_ms:.1} ms (each build calls both)"
    );
    common::record(
        "container build: podman version (a call besides run)",
        version_ms,
        "ms",
        None,
        None,
        "",
        None,
    );
    common::record(
        "container build: podman ps (a call besides run)",
        ps_ms,
        "ms",
        None,
        None,
        "",
        None,
    );
}

// ---------------------------------------------------------------------------------------------
// 3. The scheduler.

fn sleep_ms(ms: f64) {
    std::thread::sleep(Duration::from_secs_f64(ms / 1e3));
}

/// Makespan (ms) of rocforge's scheduler running `nodes` as sleeps of their weight (ms).
fn ours(nodes: &[Node], slots: usize) -> f64 {
    let stop = AtomicBool::new(false);
    let t = Instant::now();
    let out = schedule::run(nodes, slots, false, &stop, |i| {
        sleep_ms(nodes[i].weight);
        true
    });
    let ms = t.elapsed().as_secs_f64() * 1e3;
    assert!(out.iter().all(|o| *o == schedule::Outcome::Done));
    ms
}

/// Makespan (ms) of a naive scheduler: a FIFO ready queue (initially in index order, newly
/// ready nodes appended in index order), the same slots, the same sleeps.
fn fifo(nodes: &[Node], slots: usize) -> f64 {
    let mut waiting: Vec<usize> = nodes.iter().map(|n| n.deps.len()).collect();
    let mut dependents = vec![Vec::new(); nodes.len()];
    for (i, n) in nodes.iter().enumerate() {
        for &d in &n.deps {
            dependents[d].push(i);
        }
    }
    let mut ready: VecDeque<usize> = (0..nodes.len()).filter(|&i| waiting[i] == 0).collect();
    let mut running = 0;
    let mut done = 0;
    let (tx, rx) = mpsc::channel::<usize>();
    let t = Instant::now();
    std::thread::scope(|scope| {
        loop {
            while running < slots {
                let Some(i) = ready.pop_front() else { break };
                running += 1;
                let tx = tx.clone();
                scope.spawn(move || {
                    sleep_ms(nodes[i].weight);
                    let _ = tx.send(i);
                });
            }
            if running == 0 {
                break;
            }
            let i = rx.recv().unwrap();
            running -= 1;
            done += 1;
            for &j in &dependents[i] {
                waiting[j] -= 1;
                if waiting[j] == 0 {
                    ready.push_back(j);
                }
            }
        }
    });
    assert_eq!(done, nodes.len());
    t.elapsed().as_secs_f64() * 1e3
}

/// The makespan (ms) the same policy reaches with exact durations and no overhead: the
/// figure without the machine's timing noise. `fifo` false mimics `schedule::run` (highest
/// priority first, then lowest index); true mimics `fifo`.
fn simulate(nodes: &[Node], slots: usize, fifo: bool) -> f64 {
    let prio = schedule::priorities(nodes);
    let mut waiting: Vec<usize> = nodes.iter().map(|n| n.deps.len()).collect();
    let mut dependents = vec![Vec::new(); nodes.len()];
    for (i, n) in nodes.iter().enumerate() {
        for &d in &n.deps {
            dependents[d].push(i);
        }
    }
    let mut ready: Vec<usize> = (0..nodes.len()).filter(|&i| waiting[i] == 0).collect();
    let mut running: Vec<(f64, usize)> = Vec::new();
    let mut now = 0.0f64;
    loop {
        while running.len() < slots && !ready.is_empty() {
            let k = if fifo {
                0
            } else {
                (0..ready.len())
                    .max_by_key(|&k| ((prio[ready[k]] * 1e6) as u64, std::cmp::Reverse(ready[k])))
                    .unwrap()
            };
            let i = ready.remove(k);
            running.push((now + nodes[i].weight, i));
        }
        let Some(k) = (0..running.len()).min_by(|&a, &b| {
            running[a]
                .0
                .total_cmp(&running[b].0)
                .then(running[a].1.cmp(&running[b].1))
        }) else {
            break;
        };
        let (t, i) = running.swap_remove(k);
        now = t;
        for &j in &dependents[i] {
            waiting[j] -= 1;
            if waiting[j] == 0 {
                ready.push(j);
            }
        }
    }
    now
}

fn chain(nodes: &mut Vec<Node>, weights: &[f64]) {
    for (k, &w) in weights.iter().enumerate() {
        let deps = if k == 0 {
            vec![]
        } else {
            vec![nodes.len() - 1]
        };
        nodes.push(Node {
            deps,
            weight: w,
            slotless: false,
        });
    }
}

/// Independent chains that pack exactly into `slots`: 2 x (slots - 1) short chains of 6 x 20 ms
/// (listed first, so index order is the wrong order) and one 240 ms chain of 6 nodes. Critical
/// path = work / slots = 240 ms, and a schedule reaching it exists.
fn packed(slots: usize) -> Vec<Node> {
    let mut nodes = Vec::new();
    for _ in 0..2 * (slots - 1) {
        chain(&mut nodes, &[20.0; 6]);
    }
    chain(&mut nodes, &[30.0, 50.0, 40.0, 40.0, 50.0, 30.0]);
    nodes
}

/// A random DAG: `n` nodes of 5-50 ms, each depending on up to 3 random earlier nodes.
fn random_dag(seed: u64, n: usize) -> Vec<Node> {
    let mut s = seed.wrapping_mul(0x9e3779b97f4a7c15) | 1;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    (0..n)
        .map(|i| {
            let weight = 5.0 + (next() % 46) as f64;
            let k = if i == 0 { 0 } else { (next() % 4) as usize };
            let mut deps: Vec<usize> = (0..k).map(|_| (next() as usize) % i).collect();
            deps.sort_unstable();
            deps.dedup();
            Node {
                deps,
                weight,
                slotless: false,
            }
        })
        .collect()
}

fn scheduler() {
    println!(
        "3. scheduler (sleep-based work; makespan / lower bound max(critical path, work/slots))"
    );
    println!("   simulated: the same policy with exact durations and no overhead, free of noise");
    println!("  (a) independent chains packing exactly into the slots, median of 3");
    for slots in [2, 4] {
        let nodes = packed(slots);
        let lb = schedule::lower_bound(&nodes, slots);
        let mut a = Vec::new();
        let mut b = Vec::new();
        for _ in 0..3 {
            a.push(Duration::from_secs_f64(ours(&nodes, slots) / 1e3));
            b.push(Duration::from_secs_f64(fifo(&nodes, slots) / 1e3));
        }
        let (ms, fifo_ms) = (median(a), median(b));
        let (sim, sim_fifo) = (
            simulate(&nodes, slots, false) / lb,
            simulate(&nodes, slots, true) / lb,
        );
        println!(
            "    slots {slots}, {:2} nodes, bound {lb:5.0} ms: rocforge {ms:6.1} ms = {:.3}x (simulated {sim:.3}x)   goal <= 1.05x   {}   FIFO {fifo_ms:6.1} ms = {:.3}x (simulated {sim_fifo:.3}x)",
            nodes.len(),
            ms / lb,
            verdict(ms / lb <= 1.05),
            fifo_ms / lb,
        );
        common::record(
            &format!("scheduler: packed chains, {slots} slots, makespan / bound"),
            ms / lb,
            "x bound",
            Some(("FIFO ready queue", fifo_ms / lb)),
            Some(ms / fifo_ms),
            "<= 1.05x bound",
            Some(ms / lb <= 1.05),
        );
        common::record(
            &format!("scheduler: packed chains, {slots} slots, makespan / bound, simulated"),
            sim,
            "x bound",
            Some(("FIFO ready queue, simulated", sim_fifo)),
            Some(sim / sim_fifo),
            "<= 1.05x bound",
            Some(sim <= 1.05),
        );
    }
    println!("  (b) random DAGs, 40 nodes, 5-50 ms, up to 3 deps on earlier nodes");
    for slots in [2, 4] {
        let mut ratios = Vec::new();
        for seed in 1..=5u64 {
            let nodes = random_dag(seed, 40);
            let lb = schedule::lower_bound(&nodes, slots);
            let ms = ours(&nodes, slots);
            let fifo_ms = fifo(&nodes, slots);
            let total: f64 = nodes.iter().map(|n| n.weight).sum();
            println!(
                "    slots {slots}, seed {seed}: bound {lb:5.0} ms (work {total:4.0} ms): rocforge {:.3}x (simulated {:.3}x)   FIFO {:.3}x (simulated {:.3}x)",
                ms / lb,
                simulate(&nodes, slots, false) / lb,
                fifo_ms / lb,
                simulate(&nodes, slots, true) / lb
            );
            ratios.push((ms / lb, fifo_ms / lb));
        }
        let mean = |f: fn(&(f64, f64)) -> f64| ratios.iter().map(f).sum::<f64>() / 5.0;
        println!(
            "    slots {slots}, mean: rocforge {:.3}x   FIFO {:.3}x",
            mean(|r| r.0),
            mean(|r| r.1)
        );
        common::record(
            &format!("scheduler: 5 random 40-node DAGs, {slots} slots, mean makespan / bound"),
            mean(|r| r.0),
            "x bound",
            Some(("FIFO ready queue", mean(|r| r.1))),
            Some(mean(|r| r.0) / mean(|r| r.1)),
            "",
            None,
        );
    }
}

fn main() {
    let tmp = tempfile::tempdir().unwrap();
    println!(
        "rocforge build benchmark ({} cores)",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    noop_build(tmp.path());
    container_overhead(tmp.path());
    scheduler();
}
