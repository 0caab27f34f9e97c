//! Fault injection: kill -9 at random points of `fetch`, `build`, `package`, `install` and
//! `publish`; a full disk; two rocforge processes on overlapping graphs. After each fault the
//! store, the source cache, the release directory and the install prefix are consistent (only
//! complete entries; no staging or temporary file once the next command has run; the prefix
//! exactly as it was or exactly as a clean install leaves it), the rerun succeeds, and each
//! component was built once (every build script logs its start to a file in the cache, outside
//! the store: a component committed before the kill is never started again).
//!
//! Where a process dies: at a crash point (`ROCFORGE_FAULT_AT=PHASE:N`, crates/infra/src/fault.rs; a phase's
//! points are counted in an uninterrupted run first), or after a random delay, by a SIGKILL from
//! here. Both come from a seeded generator: the seed is printed, `ROCFORGE_FAULT_SEED=N` makes
//! the same choices again (crash points replay exactly; delays land as timing allows) and
//! `ROCFORGE_FAULT_ITERATIONS=N` sets the kills per phase (default 5).
//!
//! Builds run `--runtime host` with script recipes, except in the podman test, which kills
//! builds whose script runs in the test builder image to prove the container side. The disk-full
//! test mounts small tmpfs filesystems (root; required when CI=true) and gives one `package` a
//! file-size limit. Needs git, tar, python3 (an HTTP server) and, for publish, docker-registry.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

const IMAGE: &str = "localhost/rocforge-test-builder:bookworm";

// ---------------------------------------------------------------------------------------------
// The seeded generator.

struct Rng(u64);

impl Rng {
    /// The run's seed (printed) mixed with the test's name, so tests draw independently.
    fn for_test(name: &str) -> Rng {
        let seed = std::env::var("ROCFORGE_FAULT_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_nanos() as u64
            });
        eprintln!("{name}: fault seed {seed} (ROCFORGE_FAULT_SEED={seed} replays it)");
        let mut h = seed;
        for b in name.bytes() {
            h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
        }
        Rng(h)
    }

    /// splitmix64.
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// True once in `n` draws.
    fn one_in(&mut self, n: u64) -> bool {
        self.next().is_multiple_of(n)
    }

    /// In 1..=n.
    fn pick(&mut self, n: u64) -> u64 {
        1 + self.next() % n.max(1)
    }
}

fn iterations() -> usize {
    std::env::var("ROCFORGE_FAULT_ITERATIONS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5)
}

// ---------------------------------------------------------------------------------------------
// The fixture: a catalog of script builds with git sources, one tarball source over HTTP.

/// The world and the HTTP server of the tarball source.
struct Fx {
    w: World,
    _http: HttpServer,
}

derefs_to_world!(Fx);

/// `name`'s recipe: a script build that logs its start and end to `$CCACHE_DIR/builds.log`,
/// sleeps a little (so a random kill can land inside it) and installs a program, a library
/// with a symlink and data.
fn script_recipe(name: &str, deps: &[&str], url: &str, sleep: &str) -> String {
    let deps_list = deps
        .iter()
        .map(|d| format!("\"{d}\""))
        .collect::<Vec<_>>()
        .join(", ");
    let dep_check: String = deps
        .iter()
        .map(|d| format!("cat \"$ROCFORGE_DEPS/share/{d}/VERSION\" >> \"$P/share/{name}/deps\"\n"))
        .collect();
    format!(
        "name = \"{name}\"\nversion = \"1.0\"\nsummary = \"fault-injection fixture\"\nlicense = \"MIT\"\ndepends = [{deps_list}]\n\n[source]\ngit = \"{url}\"\ntag = \"v1\"\n\n[build]\nsystem = \"script\"\nscript = \"\"\"\necho \"start {name}\" >> \"$CCACHE_DIR/builds.log\"\nP=\"$DESTDIR$PREFIX\"\nmkdir -p \"$P/bin\" \"$P/lib\" \"$P/share/{name}\"\nsleep {sleep}\ncp VERSION \"$P/share/{name}/VERSION\"\n{dep_check}printf '#!/bin/sh\\necho {name}\\n' > \"$P/bin/{name}\"\nchmod 755 \"$P/bin/{name}\"\necho \"lib {name}\" > \"$P/lib/lib{name}.so.1\"\nln -s lib{name}.so.1 \"$P/lib/lib{name}.so\"\necho \"end {name}\" >> \"$CCACHE_DIR/builds.log\"\n\"\"\"\n"
    )
}

/// base ← a; base ← b ← c (script builds, git sources); data (a tarball over HTTP, copied);
/// big (3 MiB of random bytes, for the disk-full test). `image` is the release's builder image.
fn fixture(image: &str) -> Fx {
    let w = World::new().release(image).build();
    let rel = w.release_dir();
    let origin = w.path("origin");
    for (name, deps) in [
        ("base", &[][..]),
        ("a", &["base"][..]),
        ("b", &["base"][..]),
        ("c", &["b"][..]),
    ] {
        let repo = origin.join(format!("{name}.git"));
        make_repo(
            &repo,
            &[("VERSION", &format!("{name} 1.0\n")), ("LICENSE", "MIT\n")],
            "v1",
        );
        let url = format!("file://{}", repo.display());
        std::fs::write(
            rel.join(format!("{name}.toml")),
            // In a container, long enough that a killed run's container is still running.
            script_recipe(name, deps, &url, if image == IMAGE { "1" } else { "0.1" }),
        )
        .unwrap();
    }
    let big = origin.join("big.git");
    make_repo(&big, &[("LICENSE", "MIT\n")], "v1");
    std::fs::write(
        rel.join("big.toml"),
        format!("name = \"big\"\nversion = \"1.0\"\nsummary = \"large output\"\nlicense = \"MIT\"\n\n[source]\ngit = \"file://{}\"\ntag = \"v1\"\n\n[build]\nsystem = \"script\"\nscript = \"\"\"\nmkdir -p \"$DESTDIR$PREFIX/share/big\"\nhead -c 3145728 /dev/urandom > \"$DESTDIR$PREFIX/share/big/blob\"\n\"\"\"\n", big.display()),
    )
    .unwrap();
    // The tarball: 256 KiB of incompressible bytes, so a download takes many writes.
    let data = origin.join("datasrc/data-1.0");
    std::fs::create_dir_all(&data).unwrap();
    let mut rng = Rng(7);
    let blob: Vec<u8> = (0..256 * 1024 / 8)
        .flat_map(|_| rng.next().to_le_bytes())
        .collect();
    std::fs::write(data.join("blob.bin"), blob).unwrap();
    std::fs::write(data.join("LICENSE"), "MIT\n").unwrap();
    let tarball = origin.join("data-1.0.tar.gz");
    tar_gz(&origin.join("datasrc"), "data-1.0", &tarball);
    let http = HttpServer::start(&origin);
    std::fs::write(
        rel.join("data.toml"),
        format!(
            "name = \"data\"\nversion = \"1.0\"\nsummary = \"data\"\nlicense = \"MIT\"\n\n[source]\nurl = \"{}data-1.0.tar.gz\"\nsha256 = \"{}\"\n\n[build]\nsystem = \"copy\"\ndest = \"share/data\"\n",
            http.url(),
            sha256_file(&tarball)
        ),
    )
    .unwrap();
    Fx { w, _http: http }
}

/// One run's store and cache (and anything else it needs), by name, under the world.
#[derive(Clone)]
struct Ctx<'w> {
    w: &'w World,
    store: PathBuf,
    cache: PathBuf,
    extra: Vec<(String, PathBuf)>,
}

impl Fx {
    fn ctx(&self, name: &str) -> Ctx<'_> {
        Ctx {
            w: &self.w,
            store: self.path(name).join("store"),
            cache: self.path(name).join("cache"),
            extra: Vec::new(),
        }
    }
}

impl Ctx<'_> {
    fn command(&self, args: &[&str], fault: Option<(&str, u64)>) -> Command {
        let spec = fault.map(|(p, n)| format!("{p}:{n}"));
        let mut env: Vec<(&str, &Path)> = vec![
            ("ROCFORGE_STORE", &self.store),
            ("ROCFORGE_CACHE", &self.cache),
        ];
        for (k, v) in &self.extra {
            env.push((k, v));
        }
        if let Some(s) = &spec {
            env.push(("ROCFORGE_FAULT_AT", Path::new(s)));
        }
        self.w.command_env(&env, args)
    }

    /// [`Ctx::command`] started, its output thrown away: for a kill from here.
    fn spawn(&self, args: &[&str], fault: Option<(&str, u64)>) -> Child {
        self.command(args, fault)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    }

    fn run(&self, args: &[&str]) -> Out {
        Out::from(self.command(args, None).output().unwrap())
    }

    fn ok(&self, args: &[&str]) -> Out {
        let o = self.run(args);
        assert_eq!(
            o.code, 0,
            "rocforge {args:?} failed:\n{}\n{}",
            o.stdout, o.stderr
        );
        o
    }

    /// An uninterrupted run that counts `phase`'s crash points; and how long it took.
    fn calibrate(&self, args: &[&str], phase: &str) -> (u64, Duration) {
        let start = Instant::now();
        let o = self.command(args, Some((phase, 0))).output().unwrap();
        let took = start.elapsed();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "calibration {args:?}: {stderr}");
        let points = stderr
            .lines()
            .filter(|l| l.starts_with(&format!("rocforge-fault: {phase} ")))
            .count() as u64;
        assert!(points > 0, "{args:?} reached no {phase} crash point");
        (points, took)
    }

    /// Runs `args` and kills it: at a random crash point of `phase` (of `points`), or after a
    /// random delay below `took` (a late one can miss: the command has finished). Returns what
    /// happened.
    fn kill(
        &self,
        rng: &mut Rng,
        args: &[&str],
        phase: &str,
        points: u64,
        took: Duration,
    ) -> String {
        if !rng.one_in(3) {
            let n = rng.pick(points);
            let o = self.command(args, Some((phase, n))).output().unwrap();
            let killed = o.status.signal() == Some(libc::SIGKILL);
            assert!(
                killed,
                "{phase}:{n} of {points} did not kill {args:?}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            format!("crash point {phase}:{n} of {points}")
        } else {
            let ms = rng.next() % (took.as_millis() as u64).max(1);
            let mut child = self.spawn(args, None);
            std::thread::sleep(Duration::from_millis(ms));
            let _ = child.kill();
            let status = child.wait().unwrap();
            if status.signal() == Some(libc::SIGKILL) {
                format!("SIGKILL after {ms} ms")
            } else {
                format!("finished before a SIGKILL at {ms} ms")
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Consistency checks.

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Every entry under `dir`: directories (`path/`), symlinks (`-> target`), files (mode, sha256).
fn listing(dir: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        for e in rd.flatten() {
            let p = e.path();
            let rel = p.strip_prefix(root).unwrap().display().to_string();
            let t = e.file_type().unwrap();
            if t.is_symlink() {
                out.insert(
                    rel,
                    format!("-> {}", std::fs::read_link(&p).unwrap().display()),
                );
            } else if t.is_dir() {
                out.insert(format!("{rel}/"), String::new());
                walk(root, &p, out);
            } else {
                use sha2::{Digest, Sha256};
                let bytes = std::fs::read(&p).unwrap();
                let mode =
                    std::os::unix::fs::PermissionsExt::mode(&e.metadata().unwrap().permissions());
                out.insert(
                    rel,
                    format!("{:o} {}", mode & 0o777, hex::encode(Sha256::digest(&bytes))),
                );
            }
        }
    }
    walk(dir, dir, &mut out);
    out
}

/// The store holds only complete entries (meta.json naming its key, hash input, log, tree);
/// with `settled`, no staging either. Returns component → key.
fn check_store(store: &Path, settled: bool) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for n in names(store) {
        if n.starts_with('.') {
            assert!(
                [".locks", ".logs", ".images"].contains(&n.as_str()) || !settled,
                "{n} left in the store after the next run"
            );
            continue;
        }
        let e = store.join(&n);
        let meta: serde_json::Value =
            serde_json::from_slice(&std::fs::read(e.join("meta.json")).unwrap_or_else(|err| {
                panic!("store entry {n} has no meta.json ({err}): a partial entry")
            }))
            .unwrap();
        assert_eq!(meta["key"], n.as_str(), "meta.json of {n}");
        assert!(e.join("hash-input.json").is_file(), "{n}: hash-input.json");
        assert!(e.join("build.log").is_file(), "{n}: build.log");
        assert!(e.join("tree").is_dir(), "{n}: tree");
        out.insert(meta["component"].as_str().unwrap().to_string(), n);
    }
    out
}

/// The cache after a successful run: complete source entries only, no staging or partial
/// download, no lock file a killed libgit2 left, no build scratch.
fn check_cache(cache: &Path) {
    for n in names(&cache.join("src")) {
        assert!(!n.starts_with('.'), "source staging {n} left in the cache");
        let e = cache.join("src").join(&n);
        assert!(
            e.join("source.json").is_file() && e.join("tree").is_dir(),
            "incomplete source entry {n}"
        );
    }
    for n in names(&cache.join("downloads")) {
        assert!(!n.ends_with(".part"), "partial download {n} left");
        assert!(!n.starts_with('.'), "temporary {n} left in downloads");
    }
    for n in names(&cache.join("inputs")) {
        assert!(!n.starts_with('.'), "unpacking {n} left in inputs");
    }
    for repo in names(&cache.join("git")) {
        let dir = cache.join("git").join(&repo);
        let mut locks: Vec<String> = names(&dir)
            .into_iter()
            .filter(|n| n.ends_with(".lock"))
            .collect();
        locks.extend(
            listing(&dir.join("refs"))
                .into_keys()
                .filter(|n| n.ends_with(".lock")),
        );
        assert!(locks.is_empty(), "git lock files left in {repo}: {locks:?}");
    }
    assert!(
        names(&cache.join("builds")).is_empty(),
        "build scratch left: {:?}",
        names(&cache.join("builds"))
    );
}

/// The build log every script appends to (in the cache's ccache directory).
fn build_log(cache: &Path) -> Vec<String> {
    let mut lines = Vec::new();
    for d in names(&cache.join("ccache")) {
        if let Ok(t) = std::fs::read_to_string(cache.join("ccache").join(d).join("builds.log")) {
            lines.extend(t.lines().map(str::to_string));
        }
    }
    lines
}

fn starts(lines: &[String], component: &str) -> usize {
    lines
        .iter()
        .filter(|l| *l == &format!("start {component}"))
        .count()
}

/// Every store entry's tree (see [`listing`]), by component; only complete entries and no
/// staging may be there.
fn store_trees(store: &Path) -> BTreeMap<String, BTreeMap<String, String>> {
    check_store(store, true)
        .into_iter()
        .map(|(c, k)| (c, listing(&store.join(&k).join("tree"))))
        .collect()
}

/// A prefix as install leaves it: every entry (an absent prefix has none), receipts without
/// their time of install. No install staging may be left beside it.
fn prefix_state(prefix: &Path) -> BTreeMap<String, String> {
    let parent = prefix.parent().unwrap();
    let name = prefix.file_name().unwrap().to_string_lossy().into_owned();
    for n in names(parent) {
        assert!(
            !n.starts_with(&format!(".{name}.tmp-")),
            "install staging {n} left beside the prefix"
        );
    }
    let mut l = listing(prefix);
    for (path, v) in l.iter_mut() {
        if path.starts_with(".rocforge/receipts/") && path.ends_with(".json") {
            let mut r: serde_json::Value =
                serde_json::from_slice(&std::fs::read(prefix.join(path.as_str())).unwrap())
                    .unwrap();
            r["installed"] = serde_json::Value::Null;
            *v = r.to_string();
        }
    }
    l
}

// ---------------------------------------------------------------------------------------------
// kill -9 in each phase.

#[test]
fn kill_during_fetch_leaves_a_consistent_cache_and_the_rerun_completes() {
    let fx = fixture("localhost/rocforge-none:1");
    let mut rng = Rng::for_test("fetch");
    for component in ["data", "base"] {
        let args = ["fetch", component, "--arch", "gfx90c"];
        // Fresh: an empty cache. Warm: the download or the git object store of an earlier
        // fetch in place, its source tree gone (another patch series, say).
        let warm = |ctx: &Ctx| {
            ctx.ok(&args);
            std::fs::remove_dir_all(ctx.cache.join("src")).unwrap();
        };
        let fresh_ref = fx.ctx(&format!("ref-{component}"));
        let fresh = fresh_ref.calibrate(&args, "fetch");
        let want = listing(&PathBuf::from(fresh_ref.ok(&args).stdout.trim()));
        let warm_ref = fx.ctx(&format!("ref-warm-{component}"));
        warm(&warm_ref);
        let warmed = warm_ref.calibrate(&args, "fetch");
        for i in 0..iterations() {
            let ctx = fx.ctx(&format!("fetch-{component}-{i}"));
            let is_warm = rng.one_in(2);
            let (points, took) = if is_warm {
                warm(&ctx);
                warmed
            } else {
                fresh
            };
            // What a kill inside libgit2's ref update leaves (no crash point of ours is there):
            // lock files, which would fail every later fetch of that repository.
            if is_warm && rng.one_in(2) {
                for repo in names(&ctx.cache.join("git")) {
                    let dir = ctx.cache.join("git").join(repo);
                    std::fs::write(dir.join("refs/tags/v1.lock"), "").unwrap();
                    std::fs::write(dir.join("packed-refs.lock"), "").unwrap();
                }
            }
            let what = ctx.kill(&mut rng, &args, "fetch", points, took);
            eprintln!("fetch {component} #{i} (warm: {is_warm}): {what}");
            let rerun = ctx.ok(&args);
            let tree = PathBuf::from(rerun.stdout.trim());
            assert_eq!(listing(&tree), want, "{component} after {what}");
            check_cache(&ctx.cache);
        }
    }
}

#[test]
fn kill_during_build_keeps_the_store_consistent_and_builds_each_component_once() {
    let fx = fixture("localhost/rocforge-none:1");
    let mut rng = Rng::for_test("build");
    let args = [&BUILD_ALL[..], &["--format", "json"]].concat();
    let reference = fx.ctx("ref");
    let (points, took) = reference.calibrate(&args, "build");
    let want = store_trees(&reference.store);
    assert_eq!(want.len(), 5, "{want:?}");
    for i in 0..iterations() {
        let ctx = fx.ctx(&format!("build-{i}"));
        let what = ctx.kill(&mut rng, &args, "build", points, took);
        eprintln!("build #{i}: {what}");
        let committed = check_store(&ctx.store, false);
        let log = build_log(&ctx.cache);
        // The killed run's build scripts died with it: nothing more is written.
        std::thread::sleep(Duration::from_millis(400));
        assert_eq!(
            build_log(&ctx.cache),
            log,
            "a build outlived rocforge ({what})"
        );
        let rerun = ctx.ok(&args);
        let r = results(&rerun);
        let after = build_log(&ctx.cache);
        for (component, result) in &r {
            let expect = if committed.contains_key(component) {
                "cached"
            } else {
                "built"
            };
            assert_eq!(result, expect, "{component} in the rerun after {what}");
            if component != "data" {
                assert!(starts(&log, component) <= 1, "{component}: {log:?}");
                assert_eq!(
                    starts(&after, component) - starts(&log, component),
                    usize::from(expect == "built"),
                    "{component} started again after it was committed ({what}): {after:?}"
                );
            }
        }
        let entries = store_trees(&ctx.store);
        for (component, tree) in &entries {
            assert_eq!(tree, &want[component], "{component} after {what}");
        }
        assert_eq!(entries.len(), 5);
        check_cache(&ctx.cache);
        let third = ctx.ok(&args);
        assert!(results(&third).iter().all(|(_, r)| r == "cached"));
        assert_eq!(build_log(&ctx.cache), after);
    }
}

/// Every component (c and a pull in b and base) built with the host runtime.
const BUILD_ALL: [&str; 8] = [
    "build",
    "c",
    "a",
    "data",
    "--arch",
    "gfx90c",
    "--runtime",
    "host",
];

/// A store holding every component (host builds), and a signing key in keys/.
fn packaged(fx: &Fx) -> Ctx<'_> {
    let ctx = fx.ctx("shared");
    ctx.ok(&BUILD_ALL);
    ctx.ok(&["key", "generate", "--out", "keys"]);
    ctx
}

/// [`packaged`], and its signed release in dist/.
fn released(fx: &Fx) -> Ctx<'_> {
    let ctx = packaged(fx);
    ctx.ok(&strs(&package_args("dist")));
    ctx
}

fn package_args(out: &str) -> Vec<String> {
    [
        "package",
        "c",
        "a",
        "data",
        "--arch",
        "gfx90c",
        "--runtime",
        "host",
        "--out",
        out,
        "--sign-key",
        "keys/rocforge.key",
    ]
    .map(String::from)
    .to_vec()
}

fn tarballs(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    names(dir)
        .into_iter()
        .filter(|n| n.ends_with(".tar.zst"))
        .map(|n| {
            let b = std::fs::read(dir.join(&n)).unwrap();
            (n, b)
        })
        .collect()
}

/// A release directory: nothing temporary, the same tarballs as a clean run, an index and
/// SHA256SUMS that list exactly them, every signature good.
fn check_dist(ctx: &Ctx, dist: &Path, want: &BTreeMap<String, Vec<u8>>) {
    for n in names(dist) {
        assert!(!n.starts_with('.'), "{n} left in the release directory");
    }
    let got = tarballs(dist);
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        want.keys().collect::<Vec<_>>()
    );
    assert!(got == *want, "tarballs differ from a clean package");
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dist.join("index.json")).unwrap()).unwrap();
    let listed: BTreeMap<String, String> = index["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["url"].as_str().unwrap().to_string(),
                a["sha256"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let sums: BTreeMap<String, String> = std::fs::read_to_string(dist.join("SHA256SUMS"))
        .unwrap()
        .lines()
        .map(|l| {
            let (s, n) = l.split_once("  ").unwrap();
            (n.to_string(), s.to_string())
        })
        .collect();
    for n in got.keys() {
        let sha = sha256_file(&dist.join(n));
        assert_eq!(listed.get(n), Some(&sha), "index entry of {n}");
        assert_eq!(sums.get(n), Some(&sha), "SHA256SUMS line of {n}");
        assert!(dist.join(format!("{n}.minisig")).is_file());
    }
    assert_eq!(listed.len(), got.len());
    let d = dist.display().to_string();
    for f in ["index.json", "SHA256SUMS"] {
        ctx.ok(&["verify", &format!("{d}/{f}"), "--key", "keys/rocforge.pub"]);
    }
    for n in got.keys() {
        ctx.ok(&["verify", &format!("{d}/{n}"), "--key", "keys/rocforge.pub"]);
    }
}

#[test]
fn kill_during_package_leaves_no_partial_release_and_the_rerun_matches_a_clean_one() {
    let fx = fixture("localhost/rocforge-none:1");
    let mut rng = Rng::for_test("package");
    let ctx = packaged(&fx);
    let args = package_args("dist-ref");
    let args = strs(&args);
    let (points, took) = ctx.calibrate(&args, "package");
    let want = tarballs(&fx.path("dist-ref"));
    assert_eq!(want.len(), 5);
    for i in 0..iterations() {
        let out = format!("dist-{i}");
        let args = package_args(&out);
        let args = strs(&args);
        let what = ctx.kill(&mut rng, &args, "package", points, took);
        eprintln!("package #{i}: {what}");
        ctx.ok(&args);
        check_dist(&ctx, &fx.path(&out), &want);
    }
}

#[test]
fn kill_during_install_leaves_the_prefix_old_or_new_and_the_rerun_completes() {
    let fx = fixture("localhost/rocforge-none:1");
    let mut rng = Rng::for_test("install");
    let ctx = released(&fx);
    let install = |prefix: &str, what: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = vec!["install".into()];
        v.extend(what.iter().map(|s| s.to_string()));
        v.extend(
            [
                "--arch",
                "gfx90c",
                "--from",
                "dist",
                "--prefix",
                prefix,
                "--key",
                "keys/rocforge.pub",
            ]
            .map(String::from),
        );
        v
    };
    let full = ["c", "a", "data"];
    // The old state: base installed. The new one: everything, as a clean install leaves it.
    ctx.ok(&strs(&install("prefix-ref", &["base"])));
    let old = prefix_state(&fx.path("prefix-ref"));
    let (points, took) = ctx.calibrate(&strs(&install("prefix-ref", &full)), "install");
    let new = prefix_state(&fx.path("prefix-ref"));
    assert_ne!(old, new);
    // Into an empty prefix the install is one rename: fewer crash points.
    let (points_empty, _) = ctx.calibrate(&strs(&install("prefix-empty", &full)), "install");
    assert_eq!(prefix_state(&fx.path("prefix-empty")), new);
    for i in 0..iterations() {
        let name = format!("prefix-{i}");
        let prefix = fx.path(&name);
        // Half the runs start from an empty prefix (one rename), half merge into base.
        let from_empty = rng.one_in(2);
        if !from_empty {
            ctx.ok(&strs(&install(&name, &["base"])));
            assert_eq!(prefix_state(&prefix), old);
        }
        let args = install(&name, &full);
        let n = if from_empty { points_empty } else { points };
        let what = ctx.kill(&mut rng, &strs(&args), "install", n, took);
        eprintln!("install #{i} (from empty: {from_empty}): {what}");
        // Any command that reads the prefix first finishes a merge the kill cut short.
        ctx.ok(&["list", "--installed", "--prefix", &name]);
        let now = prefix_state(&prefix);
        let before = if from_empty {
            BTreeMap::new()
        } else {
            old.clone()
        };
        assert!(
            now == before || now == new,
            "after {what} the prefix is neither as it was nor complete:\n{now:#?}"
        );
        ctx.ok(&strs(&args));
        assert_eq!(prefix_state(&prefix), new, "after {what} and a rerun");
        let again = ctx.ok(&strs(&args));
        assert!(
            again.stderr.contains("already installed"),
            "{}",
            again.stderr
        );
        assert_eq!(prefix_state(&prefix), new);
    }
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

#[test]
fn kill_during_publish_and_the_rerun_pushes_everything_intact() {
    let Some(reg) = registry() else {
        return;
    };
    let fx = fixture("localhost/rocforge-none:1");
    let mut rng = Rng::for_test("publish");
    let ctx = released(&fx);
    let dist = fx.path("dist");
    let before = listing(&dist);
    let to = |repo: &str| format!("oci://{}/faults/{repo}", reg.host());
    let (points, took) = ctx.calibrate(&["publish", "dist", "--to", &to("ref")], "publish");
    let client = reqwest::blocking::Client::new();
    let get = |url: String, accept: &str| -> Vec<u8> {
        let mut r = client.get(&url).header("Accept", accept).send().unwrap();
        assert_eq!(r.status().as_u16(), 200, "GET {url}");
        let mut b = Vec::new();
        std::io::Read::read_to_end(&mut r, &mut b).unwrap();
        b
    };
    for i in 0..iterations() {
        let repo = format!("it{i}");
        let args = ["publish", "dist", "--to", &to(&repo)];
        let what = ctx.kill(&mut rng, &args, "publish", points, took);
        eprintln!("publish #{i}: {what}");
        assert_eq!(
            listing(&dist),
            before,
            "publish changed the release directory"
        );
        ctx.ok(&args);
        // Every artifact and the index pull back byte for byte.
        let base = format!("http://{}/v2/faults/{repo}", reg.host());
        let mut tags: Vec<(String, Vec<PathBuf>)> = tarballs(&dist)
            .into_keys()
            .map(|n| {
                let tag = n.strip_suffix(".tar.zst").unwrap().to_string();
                let mut files = vec![dist.join(&n), dist.join(format!("{n}.minisig"))];
                // Its SBOM and provenance travel in the same artifact, each with its signature.
                for doc in [format!("{tag}.spdx.json"), format!("{tag}.intoto.json")] {
                    if dist.join(&doc).is_file() {
                        files.push(dist.join(&doc));
                        files.push(dist.join(format!("{doc}.minisig")));
                    }
                }
                (tag, files)
            })
            .collect();
        tags.push((
            "test-1.0".into(),
            vec![dist.join("index.json"), dist.join("index.json.minisig")],
        ));
        for (tag, files) in tags {
            let m: serde_json::Value = serde_json::from_slice(&get(
                format!("{base}/manifests/{tag}"),
                "application/vnd.oci.image.manifest.v1+json",
            ))
            .unwrap();
            for (layer, file) in m["layers"].as_array().unwrap().iter().zip(&files) {
                let blob = get(
                    format!("{base}/blobs/{}", layer["digest"].as_str().unwrap()),
                    "*/*",
                );
                assert!(
                    blob == std::fs::read(file).unwrap(),
                    "{tag}: {} differs after {what}",
                    file.display()
                );
            }
            assert_eq!(m["layers"].as_array().unwrap().len(), files.len());
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The container side: builds killed while their script runs in podman.

#[test]
fn kill_during_a_podman_build_reaps_its_container_and_the_rerun_completes() {
    if !podman_ready(IMAGE) {
        return;
    }
    let fx = fixture(IMAGE);
    let mut rng = Rng::for_test("podman");
    let args = [
        "build",
        "c",
        "--arch",
        "gfx90c",
        "--runtime",
        "podman",
        "--format",
        "json",
    ];
    let mut reference = fx.ctx("ref");
    reference
        .extra
        .push(("CONTAINERS_CONF".into(), containers_conf()));
    let (points, _) = reference.calibrate(&args, "build");
    let want = store_trees(&reference.store);
    for (i, at_point) in [(0, false), (1, true)] {
        let mut ctx = fx.ctx(&format!("podman-{i}"));
        ctx.extra = reference.extra.clone();
        let what;
        let pid;
        if at_point {
            let n = rng.pick(points);
            let child = ctx.spawn(&args, Some(("build", n)));
            pid = child.id();
            let o = child.wait_with_output().unwrap();
            assert_eq!(o.status.signal(), Some(libc::SIGKILL));
            what = format!("crash point build:{n} of {points}");
        } else {
            // While a script runs in its container: killed a random moment after it started.
            let mut child = ctx.spawn(&args, None);
            pid = child.id();
            let start = Instant::now();
            while !build_log(&ctx.cache).iter().any(|l| l.starts_with("start")) {
                assert!(
                    start.elapsed() < Duration::from_secs(120),
                    "no build started"
                );
                std::thread::sleep(Duration::from_millis(20));
            }
            let ms = rng.next() % 150;
            std::thread::sleep(Duration::from_millis(ms));
            child.kill().unwrap();
            child.wait().unwrap();
            what = format!("SIGKILL {ms} ms into a container's script");
        }
        let running = containers_of(pid);
        eprintln!("podman #{i}: {what}; left running: {running:?}");
        let committed = check_store(&ctx.store, false);
        let log = build_log(&ctx.cache);
        // The container may finish its script on its own after the kill (a loaded machine is
        // slow to get here): the rerun reaps only what is still there.
        let still = containers_of(pid);
        let rerun = ctx.ok(&args);
        assert_eq!(
            containers_of(pid),
            "",
            "containers of the killed run remain"
        );
        if !still.is_empty() {
            assert!(
                rerun
                    .stderr
                    .contains(&format!("removed container {running} left by a killed")),
                "{}",
                rerun.stderr
            );
        }
        let after = build_log(&ctx.cache);
        for (component, result) in results(&rerun) {
            let built = !committed.contains_key(&component);
            assert_eq!(
                result,
                if built { "built" } else { "cached" },
                "{component}"
            );
            assert_eq!(
                starts(&after, &component) - starts(&log, &component),
                usize::from(built),
                "{component} after {what}: {after:?}"
            );
        }
        let entries = store_trees(&ctx.store);
        assert_eq!(entries.len(), want.len());
        for (component, tree) in &entries {
            assert_eq!(tree, &want[component], "{component} after {what}");
        }
        check_cache(&ctx.cache);
    }
}

// ---------------------------------------------------------------------------------------------
// Two processes on overlapping graphs.

#[test]
fn two_processes_on_overlapping_graphs_build_each_component_once() {
    let fx = fixture("localhost/rocforge-none:1");
    let mut rng = Rng::for_test("overlap");
    for i in 0..iterations() {
        let ctx = fx.ctx(&format!("overlap-{i}"));
        let delay = Duration::from_millis(rng.next() % 150);
        let one = [
            "build",
            "a",
            "b",
            "--arch",
            "gfx90c",
            "--runtime",
            "host",
            "--format",
            "json",
        ];
        let two = [
            "build",
            "b",
            "c",
            "--arch",
            "gfx90c",
            "--runtime",
            "host",
            "--format",
            "json",
        ];
        let (x, y) = std::thread::scope(|s| {
            let x = s.spawn(|| ctx.run(&one));
            std::thread::sleep(delay);
            let y = s.spawn(|| ctx.run(&two));
            (x.join().unwrap(), y.join().unwrap())
        });
        assert_eq!(x.code, 0, "{}", x.stderr);
        assert_eq!(y.code, 0, "{}", y.stderr);
        let log = build_log(&ctx.cache);
        for c in ["base", "a", "b", "c"] {
            assert_eq!(
                starts(&log, c),
                1,
                "{c} (second started {delay:?} later): {log:?}"
            );
        }
        // Both report the shared components as done, one of them as built.
        let by_component =
            |o: &Out| -> BTreeMap<String, String> { results(o).into_iter().collect() };
        let (rx, ry) = (by_component(&x), by_component(&y));
        for c in ["base", "b"] {
            let built = [&rx, &ry].iter().filter(|r| r[c] == "built").count();
            assert_eq!(built, 1, "{c}: {rx:?} {ry:?}");
        }
        check_store(&ctx.store, true);
        check_cache(&ctx.cache);
    }
}

// ---------------------------------------------------------------------------------------------
// A full disk.

/// A tmpfs of `size` at `dir`, unmounted on drop.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, size: &str) -> Option<Tmpfs> {
        std::fs::create_dir_all(dir).unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| Tmpfs(dir.to_path_buf()))
    }

    fn resize(&self, size: &str) {
        let st = Command::new("mount")
            .args(["-o", &format!("remount,size={size}")])
            .arg(&self.0)
            .status()
            .unwrap();
        assert!(st.success());
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

#[test]
fn a_full_disk_fails_clearly_and_leaves_consistent_state() {
    let fx = fixture("localhost/rocforge-none:1");
    // Without root (or a mount namespace allowing it) there is no small filesystem to fill.
    let probe = Tmpfs::mount(&fx.path("probe"), "64k");
    if !require("root, to mount a small tmpfs", probe.is_some()) {
        return;
    }
    drop(probe);

    // The store's filesystem fills while the build's output moves in.
    let fs = Tmpfs::mount(&fx.path("small-store"), "1m").unwrap();
    let mut ctx = fx.ctx("disk-store");
    ctx.store = fs.0.join("store");
    let args = ["build", "big", "--arch", "gfx90c", "--runtime", "host"];
    let o = ctx.run(&args);
    assert_eq!(o.code, 1, "{}", o.stderr);
    eprintln!("store full:\n{}", o.stderr);
    assert!(
        o.stderr.contains("No space left on device") && o.stderr.contains("small-store/store/"),
        "{}",
        o.stderr
    );
    assert!(o.stderr.contains("disk space"), "the hint: {}", o.stderr);
    assert!(check_store(&ctx.store, true).is_empty());
    fs.resize("16m");
    ctx.ok(&args);
    assert_eq!(check_store(&ctx.store, true).len(), 1);
    check_cache(&ctx.cache);

    // The cache's filesystem fills during a download.
    let fs = Tmpfs::mount(&fx.path("small-cache"), "128k").unwrap();
    let mut ctx = fx.ctx("disk-cache");
    ctx.cache = fs.0.join("cache");
    let args = ["fetch", "data", "--arch", "gfx90c"];
    let o = ctx.run(&args);
    assert_eq!(o.code, 1, "{}", o.stderr);
    eprintln!("cache full:\n{}", o.stderr);
    assert!(
        o.stderr.contains("No space left on device") && o.stderr.contains("cache/downloads/"),
        "{}",
        o.stderr
    );
    assert!(
        names(&ctx.cache.join("src")).is_empty(),
        "{:?}",
        names(&ctx.cache.join("src"))
    );
    fs.resize("16m");
    ctx.ok(&args);
    check_cache(&ctx.cache);

    // The prefix's filesystem fills during extraction: the prefix is left as it was.
    let ctx = fx.ctx("disk-install");
    ctx.ok(&[
        "build",
        "big",
        "base",
        "--arch",
        "gfx90c",
        "--runtime",
        "host",
    ]);
    ctx.ok(&[
        "package",
        "big",
        "base",
        "--arch",
        "gfx90c",
        "--runtime",
        "host",
        "--out",
        "dist-big",
    ]);
    let fs = Tmpfs::mount(&fx.path("small-prefix"), "1m").unwrap();
    let prefix = fs.0.join("rocm").display().to_string();
    let install = |what: &str| {
        ctx.run(&[
            "install",
            what,
            "--arch",
            "gfx90c",
            "--from",
            "dist-big",
            "--prefix",
            &prefix,
            "--allow-unsigned",
        ])
    };
    assert_eq!(install("base").code, 0);
    let old = prefix_state(Path::new(&prefix));
    let o = install("big");
    assert_eq!(o.code, 1, "{}", o.stderr);
    eprintln!("prefix full:\n{}", o.stderr);
    assert!(
        o.stderr.contains("No space left on device")
            && o.stderr.contains("rocm.tmp-")
            && o.stderr.contains("check free disk space"),
        "{}",
        o.stderr
    );
    assert_eq!(prefix_state(Path::new(&prefix)), old, "the prefix changed");
    fs.resize("16m");
    assert_eq!(install("big").code, 0);

    // A file-size limit (RLIMIT_FSIZE, SIGXFSZ ignored) while a tarball is written.
    let limited = [
        "package",
        "big",
        "--arch",
        "gfx90c",
        "--runtime",
        "host",
        "--out",
        "dist-limited",
    ];
    let mut cmd = ctx.command(&limited, None);
    // SAFETY: setrlimit and signal are async-signal-safe.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
            let lim = libc::rlimit {
                rlim_cur: 1 << 20,
                rlim_max: 1 << 20,
            };
            libc::setrlimit(libc::RLIMIT_FSIZE, &lim);
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            Ok(())
        });
    }
    let o = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    eprintln!("file size limit:\n{stderr}");
    assert!(
        stderr.contains("File too large")
            && stderr.contains("dist-limited/big-")
            && stderr.contains("free disk space"),
        "{stderr}"
    );
    let left: BTreeSet<String> = names(&fx.path("dist-limited")).into_iter().collect();
    assert!(
        left.iter()
            .all(|n| !n.starts_with('.') && !n.ends_with(".tar.zst")),
        "{left:?}"
    );
    ctx.ok(&limited);
}

/// A prefix that is itself a mount point, as a bind mount given to a container is (README's
/// "Install a release"): a rename can neither replace it (EBUSY) nor move a tree into it from
/// beside it (EXDEV). The install stages inside it and merges, the prefix ends up holding the
/// component and nothing of the staging, and uninstall leaves the mount point in place. Both a
/// filesystem of its own and a bind mount of the parent's filesystem (same device).
#[test]
fn an_install_into_a_prefix_that_is_a_mount_point_stages_inside_it() {
    let fx = fixture("localhost/rocforge-none:1");
    let probe = Tmpfs::mount(&fx.path("probe-mount"), "64k");
    if !require("root, to mount a small tmpfs", probe.is_some()) {
        return;
    }
    drop(probe);
    let ctx = fx.ctx("mount-prefix");
    let host = ["--arch", "gfx90c", "--runtime", "host"];
    ctx.ok(&[&["build", "base"][..], &host].concat());
    ctx.ok(&[&["package", "base"][..], &host, &["--out", "dist-mount"]].concat());
    let tmpfs = Tmpfs::mount(&fx.path("mounted"), "16m").unwrap();
    let shared = fx.path("bind-source");
    std::fs::create_dir_all(&shared).unwrap();
    let bound = fx.path("bound");
    std::fs::create_dir_all(&bound).unwrap();
    assert!(
        Command::new("mount")
            .arg("--bind")
            .args([&shared, &bound])
            .status()
            .unwrap()
            .success()
    );
    let _unbind = Tmpfs(bound.clone());
    let install = |p: &str| {
        ctx.run(&[
            "install",
            "base",
            "--arch",
            "gfx90c",
            "--from",
            "dist-mount",
            "--prefix",
            p,
            "--allow-unsigned",
        ])
    };
    for prefix in [tmpfs.0.clone(), bound.clone()] {
        let p = prefix.display().to_string();
        let o = install(&p);
        assert_eq!(o.code, 0, "{p}: {}", o.stderr);
        let state = prefix_state(&prefix);
        assert!(
            state.contains_key(".rocforge/receipts/base.json"),
            "{p}: {state:?}"
        );
        assert!(
            state.keys().all(|k| !k.starts_with(".rocforge/staging/")),
            "{p}: staging left in the prefix: {state:?}"
        );
        let o = ctx.run(&["list", "--installed", "--prefix", &p]);
        assert_eq!(o.code, 0, "{}", o.stderr);
        assert!(o.stdout.contains("base"), "{}", o.stdout);
        assert!(!o.stdout.contains("DAMAGED"), "{}", o.stdout);
        let o = ctx.run(&["uninstall", "base", "--prefix", &p]);
        assert_eq!(o.code, 0, "{p}: {}", o.stderr);
        assert!(prefix.is_dir(), "{p}: the mount point stays");
    }
    // A prefix that cannot be written (a read-only mount) fails before anything is downloaded,
    // naming the prefix.
    let ro = fx.path("read-only");
    std::fs::create_dir_all(&ro).unwrap();
    assert!(
        Command::new("mount")
            .args(["-t", "tmpfs", "-o", "ro,size=1m", "tmpfs"])
            .arg(&ro)
            .status()
            .unwrap()
            .success()
    );
    let _unmount = Tmpfs(ro.clone());
    let p = ro.display().to_string();
    let o = install(&p);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(
        o.stderr.contains(&p) && o.stderr.contains("Read-only file system"),
        "{}",
        o.stderr
    );
    assert!(
        !o.stderr.contains(".tar.zst"),
        "downloaded first: {}",
        o.stderr
    );

    // The bind mount shows what the installs wrote through it, and nothing else.
    assert!(
        listing(&shared).keys().all(|k| k.starts_with(".rocforge/")),
        "{:?}",
        listing(&shared)
    );
}
