//! `rocforge build` for real: a HIP shared library and a program linking it, both for
//! gfx90c,gfx902, compiled by Debian's hipcc inside the test builder image, in podman (root and
//! rootless) and docker. The machine set-up (.ci/setup-machine.sh) builds the images; when
//! CI=true a missing tool fails these tests, locally they skip and say why.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;

const IMAGE: &str = "localhost/rocforge-test-builder:bookworm";
const PATCH: &str = "Accept gfx90c and gfx902 in the target list.\n\n--- a/CMakeLists.txt\n+++ b/CMakeLists.txt\n@@ -11,7 +11,7 @@ foreach(t IN LISTS GPU_TARGETS)\n   list(APPEND OFFLOAD \"--offload-arch=${t}\")\n endforeach()\n \n-set(SUPPORTED_TARGETS gfx900)\n+set(SUPPORTED_TARGETS gfx900 gfx90c gfx902)\n add_library(hipcore SHARED src/scale.hip)\n set_source_files_properties(src/scale.hip PROPERTIES LANGUAGE CXX)\n target_compile_options(hipcore PRIVATE -x hip ${OFFLOAD})\n";

const ARCHES: &str = "gfx90c,gfx902";

/// The world (the test-1.0 line for gfx90c and gfx902, podman's test configuration) and the
/// git repositories beside it, served by a git daemon.
struct Fx {
    w: World,
    origin: PathBuf,
    _daemon: GitDaemon,
    _origin: tempfile::TempDir,
}

derefs_to_world!(Fx);

impl Fx {
    /// `build --arch gfx90c,gfx902 args`, in the world's environment then `env`.
    fn build(&self, env: &[(&str, &Path)], args: &[&str]) -> Out {
        let mut full = vec!["build", "--arch", ARCHES];
        full.extend_from_slice(args);
        self.run_env(env, &full)
    }
}

/// The fixture catalog: hipcore (a HIP shared library, patched), hipapp (links it) and
/// hipextra (independent of both), sources in git repositories served by git daemon.
fn fixture() -> Fx {
    let origin_dir = tempfile::tempdir().unwrap();
    let origin = origin_dir.path().join("origin");
    let src = manifest().join("tests/fixtures/hip-build");
    for name in ["hipcore", "hipapp"] {
        let repo = origin.join(format!("{name}.git"));
        rocforge::fsutil::copy_tree(&src.join(name), &repo).unwrap();
        git(&repo, &["init", "-q", "-b", "main"]);
        git(&repo, &["add", "-A"]);
        git(&repo, &["commit", "-q", "-m", "import"]);
        git(&repo, &["tag", "v1"]);
    }
    make_repo(
        &origin.join("hipextra.git"),
        &[("share/hipextra/README", "extra data\n")],
        "v1",
    );
    let daemon = GitDaemon::start(&origin);
    let w = World::new()
        .release(IMAGE)
        .arches(&["gfx90c", "gfx902"])
        .containers()
        .build();
    let url = daemon.url();
    w.write(
        "recipes/test-1.0/hipcore.toml",
        &format!("name = \"hipcore\"\nversion = \"1.0\"\nsummary = \"HIP library\"\nlicense = \"MIT\"\n\n[source]\ngit = \"{url}hipcore.git\"\ntag = \"v1\"\n\n[patches]\nall = [\"0001-accept-gfx90c-and-gfx902.patch\"]\n\n[build]\nsystem = \"cmake\"\narch-vars = [\"GPU_TARGETS\"]\nargs = [\"-DCMAKE_CXX_COMPILER=hipcc\", \"-DCMAKE_BUILD_TYPE=Release\"]\n\n[resources]\nhours = 0.1\n"),
    );
    w.write(
        "recipes/test-1.0/hipapp.toml",
        &format!("name = \"hipapp\"\nversion = \"1.0\"\nsummary = \"program linking hipcore\"\nlicense = \"MIT\"\ndepends = [\"hipcore\"]\n\n[source]\ngit = \"{url}hipapp.git\"\ntag = \"v1\"\n\n[build]\nsystem = \"cmake\"\narch-vars = [\"GPU_TARGETS\"]\nargs = [\"-DCMAKE_BUILD_TYPE=Release\"]\npost-install = \"\"\"\ntest -x \"$DESTDIR$PREFIX/bin/hipapp\"\nmkdir -p \"$DESTDIR$PREFIX/share/hipapp\"\nprintf 'post-install after install, build tree %s\\\\n' \"$(test -f \"$BUILD/CMakeCache.txt\" && echo found)\" > \"$DESTDIR$PREFIX/share/hipapp/post-install.txt\"\n\"\"\"\n"),
    );
    w.write(
        "recipes/test-1.0/hipextra.toml",
        &format!("name = \"hipextra\"\nversion = \"1.0\"\nsummary = \"independent data\"\nlicense = \"MIT\"\n\n[source]\ngit = \"{url}hipextra.git\"\ntag = \"v1\"\n\n[build]\nsystem = \"copy\"\ndest = \"share/hipextra-src\"\n"),
    );
    w.write(
        "patches/test-1.0/hipcore/0001-accept-gfx90c-and-gfx902.patch",
        PATCH,
    );
    Fx {
        w,
        origin,
        _daemon: daemon,
        _origin: origin_dir,
    }
}

fn keys(f: &Fx) -> Vec<(String, String, String)> {
    let v: serde_json::Value =
        serde_json::from_str(&f.ok(&["plan", "--arch", ARCHES, "--format", "json"]).stdout)
            .unwrap();
    v["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["component"].as_str().unwrap().into(),
                s["key"].as_str().unwrap().into(),
                s["status"].as_str().unwrap().into(),
            )
        })
        .collect()
}

fn store_tree(f: &Fx, key: &str) -> PathBuf {
    f.store().join(key).join("tree")
}

/// Runs the built program in the builder image with the store trees as the prefix: it loads
/// libhipcore and the HIP runtime, then finds no GPU (there is none here) and says so.
fn run_program(f: &Fx, app: &str, core: &str) -> (Option<i32>, String) {
    let out = Command::new("podman")
        .env("CONTAINERS_CONF", containers_conf())
        .args(["run", "--rm", "--network=none"])
        .arg("-v")
        .arg(format!("{}:/opt/app:ro", store_tree(f, app).display()))
        .arg("-v")
        .arg(format!("{}:/opt/core:ro", store_tree(f, core).display()))
        .args([
            "-e",
            "LD_LIBRARY_PATH=/opt/core/lib",
            IMAGE,
            "/opt/app/bin/hipapp",
        ])
        .output()
        .unwrap();
    (
        out.status.code(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

#[test]
fn podman_builds_the_library_and_program_and_a_second_build_is_a_no_op() {
    if !podman_ready(IMAGE) {
        return;
    }
    let f = fixture();
    let first = f.build(&[], &["--all", "--format", "json"]);
    assert_eq!(first.code, 0, "{}\n{}", first.stdout, first.stderr);
    let mut r = results(&first);
    r.sort();
    assert_eq!(
        r,
        [
            ("hipapp", "built"),
            ("hipcore", "built"),
            ("hipextra", "built")
        ]
        .map(|(a, b)| (a.to_string(), b.to_string()))
    );
    let k = keys(&f);
    let key = |c: &str| k.iter().find(|x| x.0 == c).unwrap().1.clone();
    let lib = store_tree(&f, &key("hipcore")).join("lib/libhipcore.so");
    let bytes = std::fs::read(&lib).unwrap();
    assert!(
        contains(&bytes, "hipv4-amdgcn-amd-amdhsa--gfx90c"),
        "no gfx90c code object in {}",
        lib.display()
    );
    assert!(
        contains(&bytes, "hipv4-amdgcn-amd-amdhsa--gfx902"),
        "no gfx902 code object"
    );
    assert!(
        store_tree(&f, &key("hipcore"))
            .join("include/hipcore.h")
            .is_file()
    );
    assert!(
        store_tree(&f, &key("hipextra"))
            .join("share/hipextra-src/share/hipextra/README")
            .is_file()
    );
    // The recipe's post-install ran after `cmake --install`, with the build tree at hand.
    assert_eq!(
        std::fs::read_to_string(
            store_tree(&f, &key("hipapp")).join("share/hipapp/post-install.txt")
        )
        .unwrap(),
        "post-install after install, build tree found\n"
    );
    let (code, text) = run_program(&f, &key("hipapp"), &key("hipcore"));
    assert_eq!(
        code,
        Some(2),
        "the program links libhipcore, loads, and reports no GPU: {text}"
    );
    assert!(text.contains("no GPU"), "{text}");
    // Metadata records how it was built.
    let meta: serde_json::Value = serde_json::from_slice(
        &std::fs::read(f.store().join(key("hipcore")).join("meta.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(meta["runtime"], "podman");
    assert_eq!(meta["reproducible"], true);
    assert!(f.store().join(key("hipcore")).join("build.log").is_file());
    // And the disk it took: its tree as du counts it, its build directory before it went.
    let tree_bytes = meta["tree_bytes"].as_u64().expect("tree_bytes recorded");
    assert_eq!(tree_bytes, du_blocks(&store_tree(&f, &key("hipcore"))));
    let build_bytes = meta["build_bytes"].as_u64().expect("build_bytes recorded");
    assert!(build_bytes > tree_bytes, "{build_bytes} {tree_bytes}");

    let second = f.build(&[], &["--all", "--format", "json"]);
    assert_eq!(second.code, 0, "{}", second.stderr);
    assert!(
        results(&second).iter().all(|(_, r)| r == "cached"),
        "{:?}",
        results(&second)
    );
    assert!(keys(&f).iter().all(|(_, _, s)| s == "cached"));

    // Changing one patch rebuilds exactly that component and its dependents.
    let p = f.path("patches/test-1.0/hipcore/0001-accept-gfx90c-and-gfx902.patch");
    std::fs::write(
        &p,
        PATCH.replace(
            "Accept gfx90c and gfx902 in the target list.",
            "Accept gfx90c and gfx902 (Raven, Renoir) in the target list.",
        ),
    )
    .unwrap();
    // The plan of that rebuild takes hipcore's disk from its last build, not its hints.
    let plan: serde_json::Value =
        serde_json::from_str(&f.ok(&["plan", "--arch", ARCHES, "--format", "json"]).stdout)
            .unwrap();
    let core = plan["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["component"] == "hipcore")
        .unwrap();
    assert_eq!(core["measured_disk"]["installed_bytes"], tree_bytes);
    assert_eq!(core["measured_disk"]["build_bytes"], build_bytes);
    assert_eq!(plan["estimate"]["disk_measured_components"], 2, "{plan}");
    let third = f.build(&[], &["--all", "--format", "json"]);
    assert_eq!(third.code, 0, "{}", third.stderr);
    let r = results(&third);
    assert_eq!(r.iter().find(|x| x.0 == "hipcore").unwrap().1, "built");
    assert_eq!(r.iter().find(|x| x.0 == "hipapp").unwrap().1, "built");
    assert_eq!(r.iter().find(|x| x.0 == "hipextra").unwrap().1, "cached");
}

fn tree_hashes(dir: &Path) -> Vec<(String, String)> {
    tree_contents(dir)
        .into_iter()
        .map(|(p, b)| {
            use sha2::{Digest, Sha256};
            (p, hex::encode(Sha256::digest(&b)))
        })
        .collect()
}

#[test]
fn two_clean_builds_into_two_stores_give_identical_trees() {
    if !podman_ready(IMAGE) {
        return;
    }
    let f = fixture();
    let a = f.path("store-a");
    let b = f.path("store-b");
    for (store, cache) in [(&a, "cache-a"), (&b, "cache-b")] {
        let cache = f.path(cache);
        let o = f.build(
            &[
                ("ROCFORGE_STORE", store.as_path()),
                ("ROCFORGE_CACHE", cache.as_path()),
            ],
            &["hipapp"],
        );
        assert_eq!(o.code, 0, "{}", o.stderr);
    }
    let k = keys(&f);
    for (component, key, _) in k.iter().filter(|x| x.0 != "hipextra") {
        let ta = tree_hashes(&a.join(key).join("tree"));
        let tb = tree_hashes(&b.join(key).join("tree"));
        assert!(!ta.is_empty());
        assert_eq!(ta, tb, "{component} differs between two clean builds");
    }
}

#[test]
fn a_kill_during_a_build_leaves_a_consistent_store_and_the_rerun_completes() {
    if !podman_ready(IMAGE) {
        return;
    }
    let f = fixture();
    let mut child = f
        .command(&["build", "--arch", ARCHES, "hipapp"])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Wait until a build is under way (its log says so), then kill -9.
    let logs = f.path("store/.logs");
    let start = std::time::Instant::now();
    loop {
        let busy = std::fs::read_dir(&logs)
            .map(|d| {
                d.flatten().any(|e| {
                    std::fs::read_to_string(e.path()).is_ok_and(|t| t.contains("==> build"))
                })
            })
            .unwrap_or(false);
        if busy {
            break;
        }
        assert!(start.elapsed().as_secs() < 300, "no build started");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    // Whatever was committed is complete; nothing half-made sits under a key.
    for e in std::fs::read_dir(f.store()).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.starts_with('.') {
            assert!(
                e.path().join("meta.json").is_file(),
                "incomplete entry {name}"
            );
        }
    }
    let rerun = f.build(&[], &["hipapp", "--format", "json"]);
    assert_eq!(rerun.code, 0, "{}", rerun.stderr);
    assert!(
        rerun.stderr.contains("left by a killed rocforge run")
            || rerun.stderr.contains("unfinished store entry"),
        "the rerun cleans up: {}",
        rerun.stderr
    );
    let leftovers: Vec<_> = std::fs::read_dir(f.store())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(".tmp-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    let (code, text) = {
        let k = keys(&f);
        let key = |c: &str| k.iter().find(|x| x.0 == c).unwrap().1.clone();
        run_program(&f, &key("hipapp"), &key("hipcore"))
    };
    assert_eq!(code, Some(2), "{text}");
    let _ = &f.origin;
}

/// Makes hipcore's build ignore GPU_TARGETS and compile for `target` alone, under a new tag
/// the recipe then names.
fn ignore_gpu_targets(f: &Fx, target: &str, tag: &str) {
    let repo = f.origin.join("hipcore.git");
    let cmake = std::fs::read_to_string(repo.join("CMakeLists.txt")).unwrap();
    commit_files(
        &repo,
        &[(
            "CMakeLists.txt",
            &cmake.replace(
                "foreach(t IN LISTS GPU_TARGETS)",
                &format!("foreach(t IN ITEMS {target})"),
            ),
        )],
        &format!("only {target}"),
    );
    git(&repo, &["tag", "-f", tag]);
    let recipe = f.path("recipes/test-1.0/hipcore.toml");
    std::fs::write(
        &recipe,
        std::fs::read_to_string(&recipe)
            .unwrap()
            .replace("tag = \"v1\"", &format!("tag = \"{tag}\"")),
    )
    .unwrap();
}

#[test]
fn the_coverage_gate_fails_a_library_that_lacks_a_requested_target() {
    if !podman_ready(IMAGE) {
        return;
    }
    let f = fixture();
    // A library whose build ignores GPU_TARGETS and targets gfx902 only: the seed's problem.
    ignore_gpu_targets(&f, "gfx902", "v2");
    let o = f.build(&[], &["hipcore"]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(
        o.stderr
            .contains("lib/libhipcore.so: no gfx90c code object"),
        "{}",
        o.stderr
    );
    assert!(!o.stderr.contains("no gfx902 code object"), "{}", o.stderr);
    assert!(o.stderr.contains("--allow-missing"), "{}", o.stderr);
    let entries: Vec<_> = std::fs::read_dir(f.store())
        .unwrap()
        .flatten()
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .collect();
    assert!(entries.is_empty(), "nothing committed: {entries:?}");

    // Allowed explicitly, it builds and the gap is recorded with the entry.
    let o = f.build(&[], &["hipcore", "--allow-missing", "gfx90c"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let coverage = stored_coverage(&f, "hipcore");
    assert_eq!(
        coverage.missing_allowed,
        [("lib/libhipcore.so".to_string(), "gfx90c".parse().unwrap())]
    );
}

/// A build that installs its GPU library only inside a wheel (as PyTorch's does) is gated on
/// the library in the wheel: a missing target fails it, naming the wheel's member.
#[test]
fn the_coverage_gate_reads_the_libraries_inside_a_wheel() {
    if !podman_ready(IMAGE) {
        return;
    }
    let f = fixture();
    ignore_gpu_targets(&f, "gfx902", "v2");
    let recipe = f.path("recipes/test-1.0/hipcore.toml");
    let text = std::fs::read_to_string(&recipe).unwrap().replace(
        "[resources]",
        "post-install = \"\"\"\ncd \"$DESTDIR$PREFIX\"\nmkdir -p share/rocforge/wheels hipcore\nmv lib/libhipcore.so hipcore/\ncmake -E tar cf share/rocforge/wheels/hipcore-1.0-py3-none-linux_x86_64.whl --format=zip hipcore\nrm -r hipcore\n\"\"\"\n\n[resources]",
    );
    std::fs::write(&recipe, text).unwrap();
    let o = f.build(&[], &["hipcore"]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    let member =
        "share/rocforge/wheels/hipcore-1.0-py3-none-linux_x86_64.whl!/hipcore/libhipcore.so";
    assert!(
        o.stderr
            .contains(&format!("{member}: no gfx90c code object")),
        "{}",
        o.stderr
    );
    let o = f.build(&[], &["hipcore", "--allow-missing", "gfx90c"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let coverage = stored_coverage(&f, "hipcore");
    assert_eq!(coverage.libraries, 1);
    assert_eq!(
        coverage.missing_allowed,
        [(member.to_string(), "gfx90c".parse().unwrap())]
    );
}

/// The code-object coverage record of a component's store entry.
fn stored_coverage(f: &Fx, component: &str) -> rocforge::inspect::record::CodeObjectRecord {
    let key = keys(f).into_iter().find(|k| k.0 == component).unwrap().1;
    let meta: rocforge::store::EntryMeta =
        serde_json::from_slice(&std::fs::read(f.store().join(&key).join("meta.json")).unwrap())
            .unwrap();
    match meta.coverage {
        Some(rocforge::inspect::CoverageRecord::CodeObjects(c)) => c,
        other => panic!("not a code-object record: {other:?}"),
    }
}

#[test]
fn the_coverage_gate_refuses_the_nearest_targets_code() {
    if !podman_ready(IMAGE) {
        return;
    }
    let f = fixture();
    // A library whose build ignores GPU_TARGETS and builds gfx900 code: it "runs" on gfx90c
    // and gfx902 only under HSA_OVERRIDE_GFX_VERSION=9.0.0, which is never coverage.
    ignore_gpu_targets(&f, "gfx900", "v3");
    let o = f.build(&[], &["hipcore"]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    for t in ["gfx90c", "gfx902"] {
        let want = format!(
            "lib/libhipcore.so: gfx900 code only: runs on {t} only under HSA_OVERRIDE_GFX_VERSION=9.0.0"
        );
        assert!(o.stderr.contains(&want), "{want}\n{}", o.stderr);
    }
    assert!(o.stderr.contains("--allow-spoof"), "{}", o.stderr);
    // --allow-missing is about absent code: it does not accept another processor's.
    let o = f.build(&[], &["hipcore", "--allow-missing", "gfx90c,gfx902"]);
    assert_eq!(o.code, 1, "{}", o.stderr);

    let o = f.build(&[], &["hipcore", "--allow-spoof", "gfx90c,gfx902"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let coverage = stored_coverage(&f, "hipcore");
    let spoofed = coverage.spoof_allowed.clone().unwrap_or_default();
    assert_eq!(spoofed.len(), 2, "{spoofed:?}");
    assert_eq!(spoofed[0].0, "lib/libhipcore.so");
    assert_eq!(spoofed[0].2, "gfx900");
    // The install-side reading of that record: what `install` advises from.
    let record = rocforge::inspect::CoverageRecord::CodeObjects(coverage);
    let not_native = rocforge::install::receipt::not_native(Some(&record));
    assert_eq!(not_native.get("gfx90c").map(String::as_str), Some("gfx900"));
    assert_eq!(not_native.get("gfx902").map(String::as_str), Some("gfx900"));
}

const DOCKER_HOST: &str = "unix:///run/rocforge-test/docker.sock";

#[test]
fn docker_builds_the_same_trees() {
    let ok = Command::new("docker")
        .args(["image", "inspect", IMAGE])
        .env("DOCKER_HOST", DOCKER_HOST)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !require(
        &format!("a docker daemon at {DOCKER_HOST} with {IMAGE} (scripts/start-docker.sh)"),
        ok,
    ) || !podman_ready(IMAGE)
    {
        return;
    }
    let f = fixture();
    let host = Path::new(DOCKER_HOST);
    let d = f.build(
        &[
            ("DOCKER_HOST", host),
            ("ROCFORGE_STORE", &f.path("store-docker")),
        ],
        &["hipapp", "--runtime", "docker"],
    );
    assert_eq!(d.code, 0, "{}", d.stderr);
    let p = f.build(
        &[
            ("ROCFORGE_STORE", &f.path("store-podman")),
            ("ROCFORGE_CACHE", &f.path("cache-podman")),
        ],
        &["hipapp", "--runtime", "podman"],
    );
    assert_eq!(p.code, 0, "{}", p.stderr);
    // Same image, same inputs: podman and docker share content keys and produce the same trees.
    for (component, key, _) in keys(&f).iter().filter(|k| k.0 != "hipextra") {
        let a = tree_hashes(&f.path("store-docker").join(key).join("tree"));
        let b = tree_hashes(&f.path("store-podman").join(key).join("tree"));
        assert!(!a.is_empty(), "{component} missing from the docker store");
        assert_eq!(a, b, "{component} differs between docker and podman");
    }
    let meta: serde_json::Value = serde_json::from_slice(
        &std::fs::read(
            f.path("store-docker")
                .join(&keys(&f)[0].1)
                .join("meta.json"),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(meta["runtime"], "docker");
}

/// The rootless user's uid, when this test runs as root and scripts/rootless-user.sh made the
/// user (and `also` holds); None skips (or fails in CI) naming `what`.
fn rootless_user(what: &str, also: bool) -> Option<u32> {
    let user = Command::new("id")
        .args(["-u", "rocforge-test"])
        .output()
        .ok()
        .filter(|o| o.status.success());
    let is_root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    if !require(what, user.is_some() && is_root && also) {
        return None;
    }
    String::from_utf8_lossy(&user?.stdout).trim().parse().ok()
}

/// Gives the rootless user the fixture (owned, its parents passable) and a copy of this build's
/// rocforge in it; returns that copy.
fn hand_to_rootless_user(dir: &Path) -> PathBuf {
    std::fs::write(dir.join("no-user-config.toml"), "").unwrap();
    let status = Command::new("chown")
        .args(["-R", "rocforge-test:"])
        .arg(dir)
        .status()
        .unwrap();
    assert!(status.success());
    let mut p = dir.to_path_buf();
    while let Some(parent) = p.parent() {
        if parent == Path::new("/") {
            break;
        }
        let _ = Command::new("chmod").arg("o+x").arg(parent).status();
        p = parent.to_path_buf();
    }
    let shared = dir.join("rocforge");
    std::fs::copy(
        std::fs::canonicalize(env!("CARGO_BIN_EXE_rocforge")).unwrap(),
        &shared,
    )
    .unwrap();
    let _ = Command::new("chmod").arg("755").arg(&shared).status();
    shared
}

/// `program args` as the rootless user in `dir`, with the fixture's cache, store and config.
fn as_rootless_user(uid: u32, dir: &Path, program: &Path, args: &[&str]) -> std::process::Output {
    Command::new("runuser")
        .args([
            "-u",
            "rocforge-test",
            "--",
            "env",
            "-i",
            "PATH=/usr/local/bin:/usr/bin:/usr/sbin:/bin",
            "HOME=/home/rocforge-test",
            "USER=rocforge-test",
            "LOGNAME=rocforge-test",
        ])
        .arg(format!("XDG_RUNTIME_DIR=/run/user/{uid}"))
        .arg(format!("ROCFORGE_CACHE={}", dir.join("cache").display()))
        .arg(format!("ROCFORGE_STORE={}", dir.join("store").display()))
        .arg(format!(
            "ROCFORGE_CONFIG={}",
            dir.join("no-user-config.toml").display()
        ))
        .arg(program)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

#[test]
fn rootless_podman_builds_as_the_invoking_user() {
    let Some(uid) = rootless_user(
        "root, and the rootless user rocforge-test (scripts/rootless-user.sh)",
        true,
    ) else {
        return;
    };
    if !podman_ready(IMAGE) {
        return;
    }
    let f = fixture();
    let shared = hand_to_rootless_user(f.root());
    let out = as_rootless_user(
        uid,
        f.root(),
        &shared,
        &[
            "--recipes",
            "recipes",
            "build",
            "--arch",
            "gfx90c,gfx902",
            "hipapp",
            "--runtime",
            "podman",
        ],
    );
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let k = keys(&f);
    let key = |c: &str| k.iter().find(|x| x.0 == c).unwrap().1.clone();
    use std::os::unix::fs::MetadataExt;
    let lib = store_tree(&f, &key("hipcore")).join("lib/libhipcore.so");
    assert_eq!(
        std::fs::metadata(&lib).unwrap().uid(),
        uid,
        "outputs belong to the invoking user"
    );
    let bytes = std::fs::read(&lib).unwrap();
    assert!(contains(&bytes, "hipv4-amdgcn-amd-amdhsa--gfx90c"));
}

#[test]
fn two_concurrent_builds_build_each_component_once() {
    if !podman_ready(IMAGE) {
        return;
    }
    let f = fixture();
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(|| f.build(&[], &["hipapp", "--format", "json"]));
        let b = s.spawn(|| f.build(&[], &["hipapp", "--format", "json"]));
        (a.join().unwrap(), b.join().unwrap())
    });
    assert_eq!(a.code, 0, "{}", a.stderr);
    assert_eq!(b.code, 0, "{}", b.stderr);
    for component in ["hipcore", "hipapp"] {
        let built = [&a, &b]
            .iter()
            .filter(|o| {
                results(o)
                    .iter()
                    .any(|(c, r)| c == component && r == "built")
            })
            .count();
        assert_eq!(built, 1, "{component} built {built} times");
    }
}

#[test]
fn ctrl_c_stops_the_build_and_its_container() {
    interrupted_build_stops_its_container(libc::SIGINT);
}

/// What a CI runner cancelling a job, `kill`, or the end of a login session sends.
#[test]
fn sigterm_stops_the_build_and_its_container() {
    interrupted_build_stops_its_container(libc::SIGTERM);
}

fn interrupted_build_stops_its_container(signal: i32) {
    if !podman_ready(IMAGE) {
        return;
    }
    let f = fixture();
    let child = f
        .command(&["build", "--arch", ARCHES, "hipapp"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let logs = f.path("store/.logs");
    let start = std::time::Instant::now();
    while !std::fs::read_dir(&logs)
        .map(|d| {
            d.flatten().any(|e| {
                std::fs::read_to_string(e.path()).is_ok_and(|t| t.contains("==> configure"))
            })
        })
        .unwrap_or(false)
    {
        assert!(start.elapsed().as_secs() < 300, "no build started");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let pid = child.id();
    // SAFETY: sending a signal to our own child.
    unsafe { libc::kill(pid as i32, signal) };
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(
        stderr.contains("hipcore              interrupted"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("FAILED") && !stderr.contains("which failed"),
        "{stderr}"
    );
    // No container of that run is left, and the store holds only complete entries.
    assert_eq!(containers_of(pid), "", "containers left running");
    let leftovers: Vec<_> = std::fs::read_dir(f.store())
        .unwrap()
        .flatten()
        .filter(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.starts_with(".tmp-") || (!n.starts_with('.') && !e.path().join("meta.json").is_file())
        })
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    // The next run continues and completes.
    let rerun = f.build(&[], &["hipapp"]);
    assert_eq!(rerun.code, 0, "{}", rerun.stderr);
}

#[test]
fn doctor_store_and_image_build() {
    if !podman_ready(IMAGE) {
        return;
    }
    let f = fixture();
    let doctor = f.run(&["doctor", "hipapp", "--arch", "gfx90c"]);
    assert_eq!(doctor.code, 0, "{}\n{}", doctor.stdout, doctor.stderr);
    assert!(
        doctor.stdout.contains("ok   container runtime  podman"),
        "{}",
        doctor.stdout
    );
    assert!(
        doctor.stdout.contains(&format!("{IMAGE} present")),
        "{}",
        doctor.stdout
    );

    let o = f.build(&[], &["hipcore"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let list = f.run(&["store", "list"]);
    assert!(list.stdout.contains("hipcore"), "{}", list.stdout);
    let key = keys(&f).into_iter().find(|k| k.0 == "hipcore").unwrap().1;
    let show = f.run(&["store", "show", &key[..10]]);
    assert!(
        show.stdout.contains(&key) && show.stdout.contains("podman"),
        "{}",
        show.stdout
    );

    // A locally built builder image enters keys by its ID, marked local.
    std::fs::create_dir_all(f.path("containers")).unwrap();
    std::fs::write(
        f.path("containers/Containerfile.test-1.0"),
        format!("FROM {IMAGE}\nLABEL org.rocforge.test=local-image\n"),
    )
    .unwrap();
    let release = f.path("recipes/test-1.0/release.toml");
    std::fs::write(
        &release,
        std::fs::read_to_string(&release)
            .unwrap()
            .replace(IMAGE, "localhost/rocforge-test-local:1"),
    )
    .unwrap();
    let built = f.run(&["image", "build", "--runtime", "podman"]);
    assert_eq!(built.code, 0, "{}", built.stderr);
    let plan: serde_json::Value = serde_json::from_str(
        &f.ok(&["plan", "--arch", "gfx90c", "--format", "json"])
            .stdout,
    )
    .unwrap();
    assert_eq!(plan["image"]["local"], true, "{}", plan["image"]);
    assert!(
        plan["image"]["digest"]
            .as_str()
            .unwrap()
            .starts_with("sha256:")
    );
    let _ = Command::new("podman")
        .env("CONTAINERS_CONF", containers_conf())
        .args(["rmi", "localhost/rocforge-test-local:1"])
        .output();
}

/// `image build` with an `[image-base]`: a Containerfile that does not build FROM it is refused
/// before anything runs, and a pinned apt version the mirror no longer has is named.
#[test]
fn image_build_names_a_wrong_base_and_a_vanished_apt_version() {
    if !podman_ready(IMAGE) {
        return;
    }
    let f = fixture();
    let release = f.path("recipes/test-1.0/release.toml");
    let text = std::fs::read_to_string(&release)
        .unwrap()
        .replace(IMAGE, "localhost/rocforge-test-apt:1");
    // The test image already exists under this name, so nothing is debootstrapped.
    std::fs::write(
        &release,
        format!("{text}\n[image-base]\nname = \"{IMAGE}\"\ndebootstrap = \"bookworm\"\n"),
    )
    .unwrap();
    std::fs::create_dir_all(f.path("containers")).unwrap();
    let containerfile = f.path("containers/Containerfile.test-1.0");
    std::fs::write(&containerfile, "FROM localhost/somewhere-else:1\n").unwrap();
    let args = ["image", "build", "--runtime", "podman"];
    let o = f.run(&args);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(
        o.stderr
            .contains("does not build FROM localhost/rocforge-test-builder:bookworm")
            && o.stderr
                .contains("it builds FROM localhost/somewhere-else:1"),
        "{}",
        o.stderr
    );
    std::fs::write(
        &containerfile,
        format!(
            "FROM {IMAGE}\nRUN apt-get update -qq && apt-get install -y --no-install-recommends zstd=0.0.1-gone\n"
        ),
    )
    .unwrap();
    let o = f.run(&args);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(
        o.stderr
            .contains("pins zstd 0.0.1-gone, which the mirror no longer has"),
        "{}",
        o.stderr
    );
    assert!(o.stderr.contains("apt-cache policy"), "{}", o.stderr);
}

#[test]
fn an_image_rebuilt_under_the_same_tag_by_podman_build_changes_the_keys() {
    if !podman_ready(IMAGE) {
        return;
    }
    let f = fixture();
    let conf = containers_conf();
    let tag = format!("localhost/rocforge-test-rebuilt-{}:1", std::process::id());
    let release = f.path("recipes/test-1.0/release.toml");
    std::fs::write(
        &release,
        std::fs::read_to_string(&release)
            .unwrap()
            .replace(IMAGE, &tag),
    )
    .unwrap();
    // Plain `podman build`, not `rocforge image build`: nothing is recorded in the store.
    let podman_build = |label: &str| {
        let dir = f.path(&format!("image-{label}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("Containerfile"),
            format!("FROM {IMAGE}\nLABEL org.rocforge.test={label}\n"),
        )
        .unwrap();
        let o = Command::new("podman")
            .env("CONTAINERS_CONF", &conf)
            .args(["build", "-q", "-t", &tag])
            .arg(&dir)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let id = Command::new("podman")
            .env("CONTAINERS_CONF", &conf)
            .args(["image", "inspect", "--format", "{{.Id}}", &tag])
            .output()
            .unwrap();
        format!("sha256:{}", String::from_utf8_lossy(&id.stdout).trim())
    };
    let plan = || -> serde_json::Value {
        serde_json::from_str(
            &f.ok(&[
                "plan",
                "hipextra",
                "--arch",
                "gfx90c,gfx902",
                "--format",
                "json",
            ])
            .stdout,
        )
        .unwrap()
    };
    let first = podman_build("one");
    let before = plan();
    assert_eq!(
        before["image"]["digest"],
        first.as_str(),
        "{}",
        before["image"]
    );
    // Not made by `rocforge image build`: keyed by its ID, but not marked local.
    assert_eq!(before["image"]["local"], false);
    let o = f.build(&[], &["hipextra"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(plan()["steps"][0]["status"], "cached");

    let second = podman_build("two");
    assert_ne!(first, second);
    let _ = Command::new("podman")
        .env("CONTAINERS_CONF", &conf)
        .args(["rmi", &first])
        .output();
    let after = plan();
    assert_eq!(after["image"]["digest"], second.as_str());
    assert_ne!(after["steps"][0]["key"], before["steps"][0]["key"]);
    assert_eq!(
        after["steps"][0]["status"], "build",
        "the result built with the old image is not reused: {}",
        after["steps"][0]
    );
    let text = f.ok(&["plan", "hipextra", "--arch", "gfx90c"]).stdout;
    assert!(
        text.contains(&format!("{tag} @ {second} (local image ID)")),
        "{text}"
    );

    // Without the image the plan is unpinned, as before, and says nothing of either ID.
    let _ = Command::new("podman")
        .env("CONTAINERS_CONF", &conf)
        .args(["rmi", "--force", &tag])
        .output();
    let gone = plan();
    assert_eq!(gone["image"]["digest"], serde_json::Value::Null);
    assert_eq!(gone["image"]["local"], false);
}

/// A catalog of one script build on the host that prints two ninja steps and, between them,
/// waits until `flag` exists: the test holds the build at `[1/2]` until it has seen that step
/// reported, so what it checks does not depend on timing.
fn steps_catalog(root: &Path, flag: &Path) {
    let rel = test_release(root, "localhost/rocforge-none:1");
    std::fs::create_dir_all(rel.join("src/steps")).unwrap();
    std::fs::write(rel.join("src/steps/VERSION"), "1.0\n").unwrap();
    std::fs::write(rel.join("src/steps/LICENSE"), "MIT\n").unwrap();
    std::fs::write(
        rel.join("steps.toml"),
        format!(
            "name = \"steps\"\nversion = \"1.0\"\nsummary = \"two ninja steps\"\nlicense = \"MIT\"\n\n[source]\npath = \"src/steps\"\n\n[build]\nsystem = \"script\"\nscript = \"\"\"\necho '[1/2] Building CXX object steps.o'\ni=0\nwhile [ ! -e '{flag}' ] && [ $i -lt 1200 ]; do sleep 0.1; i=$((i+1)); done\necho '[2/2] Linking CXX shared library libsteps.so'\nP=\"$DESTDIR$PREFIX\"\nmkdir -p \"$P/share/steps\"\ncp VERSION \"$P/share/steps/VERSION\"\n\"\"\"\n",
            flag = flag.display()
        ),
    )
    .unwrap();
}

/// Runs `rocforge build steps` reading its stderr as it comes; once a line contains `held`,
/// creates `flag` so the build goes on. Returns the output and stderr's lines.
fn build_steps(root: &Path, flag: &Path, extra: &[&str], held: &str) -> (Out, Vec<String>) {
    use std::io::BufRead;
    let mut args = vec![
        "--recipes",
        "recipes",
        "build",
        "steps",
        "--arch",
        "gfx90c",
        "--runtime",
        "host",
    ];
    args.extend_from_slice(extra);
    let mut child = rocforge_command(
        root,
        // Status lines every second rather than every minute, so one comes during the hold.
        &[("ROCFORGE_PROGRESS_INTERVAL", Path::new("1"))],
        &args,
    )
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut lines = Vec::new();
    // Bounded only so that a broken build fails the test instead of hanging it.
    while let Ok(line) = rx.recv_timeout(std::time::Duration::from_secs(300)) {
        let seen = line.contains(held);
        lines.push(line);
        if seen {
            break;
        }
    }
    std::fs::write(flag, "").unwrap();
    lines.extend(rx.iter());
    reader.join().unwrap();
    let out = Out::from(child.wait_with_output().unwrap());
    (
        Out {
            stderr: lines.join("\n"),
            ..out
        },
        lines,
    )
}

#[test]
fn progress_without_a_terminal_names_the_log_and_shows_ninja_steps() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let flag = root.join("go-on");
    steps_catalog(root, &flag);
    let (out, lines) = build_steps(root, &flag, &[], "[1/2]");
    assert_eq!(out.code, 0, "{}", out.stderr);
    let start = lines
        .iter()
        .find(|l| l.starts_with("steps ") && l.contains(": building, log "))
        .unwrap_or_else(|| panic!("no start line:\n{}", out.stderr));
    let log = PathBuf::from(start.rsplit_once(", log ").unwrap().1);
    assert!(log.starts_with(root.join("store/.logs")), "{start}");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("[2/2] Linking"), "{text}");
    let step = lines
        .iter()
        .find(|l| l.starts_with("steps  build [1/2]  "))
        .unwrap_or_else(|| panic!("no [1/2] status line:\n{}", out.stderr));
    assert!(step.contains(" elapsed"), "{step}");
    assert!(!out.stderr.contains('\u{1b}'), "no ANSI: {}", out.stderr);

    // What a person reads in a CI log, with the key, paths and times made stable.
    let short = log
        .file_stem()
        .unwrap()
        .to_str()
        .unwrap()
        .trim_start_matches("steps-")
        .to_string();
    let stable = |l: &str| {
        l.replace(&root.display().to_string(), "[ROOT]")
            .replace(&short, "[KEY]")
            .split(' ')
            .map(|w| {
                let t = w
                    .trim_start_matches(['(', '~'])
                    .trim_end_matches([')', ',']);
                let time = t.starts_with(|c: char| c.is_ascii_digit())
                    && t.ends_with(['s', 'm'])
                    && t.chars().all(|c| c.is_ascii_digit() || "hms.".contains(c));
                if time {
                    w.replace(t, "[T]")
                } else {
                    w.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join(" ")
    };
    // The build phase's lines depend on when the log was looked at; the first [1/2] does not.
    let mut read: Vec<String> = lines
        .iter()
        .filter(|l| l.contains("steps") && (!l.starts_with("steps  build") || *l == step))
        .map(|l| stable(l))
        .collect();
    read.dedup();
    insta::assert_snapshot!("progress_without_a_terminal", read.join("\n"));
}

#[test]
fn progress_as_json_events() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let flag = root.join("go-on");
    steps_catalog(root, &flag);
    let (out, lines) = build_steps(root, &flag, &["--format", "json"], "\"done\":1");
    assert_eq!(out.code, 0, "{}", out.stderr);
    let events: Vec<serde_json::Value> = lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let of = |kind: &str| {
        events
            .iter()
            .filter(|e| e["event"] == kind && e["component"] == "steps")
            .collect::<Vec<_>>()
    };
    let start = of("start");
    assert_eq!(start.len(), 1, "{}", out.stderr);
    let log = PathBuf::from(start[0]["log"].as_str().unwrap());
    assert!(std::fs::read_to_string(&log).unwrap().contains("[1/2]"));
    let step = of("progress")
        .into_iter()
        .find(|e| e["done"] == 1)
        .unwrap_or_else(|| panic!("no [1/2] event:\n{}", out.stderr));
    assert_eq!(
        (&step["phase"], &step["total"]),
        (&serde_json::json!("build"), &serde_json::json!(2))
    );
    assert!(step["elapsed_s"].is_u64(), "{step}");
    // No earlier build, and too short a time for a step rate: the recipe's hours.
    assert_eq!(step["estimate_from"], "recipe", "{step}");
    let finish = of("finish");
    assert_eq!(finish.len(), 1, "{}", out.stderr);
    assert_eq!(finish[0]["result"], "built");
    // The report stays on stdout, as before.
    let report: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(step_results(&report), [("steps".into(), "built".into())]);
}

/// The debian-6.4 line's builder image: Python with venv and pip, as rocBLAS's Tensile venv
/// needs (the test builder image has no pip). Made by scripts/debian-image.sh, not by the
/// machine set-up; CI builds it before the tests, so there its absence fails the test.
const PIP_IMAGE: &str = "localhost/rocforge/builder:debian-6.4";

/// A `copy` dependency holding a Python package, and a cmake build that pip-installs it from
/// the read-only dependency mount as rocBLAS installs Tensile: pip builds in the tree it is
/// given, so that fails, and a `pre-configure` copy into the build directory makes it work,
/// with no network and no index.
#[test]
fn a_pip_install_from_a_dependency_builds_in_a_pre_configure_copy() {
    let present = Command::new("podman")
        .args(["image", "exists", PIP_IMAGE])
        .env("CONTAINERS_CONF", containers_conf())
        .status()
        .is_ok_and(|s| s.success());
    if !require(
        &format!("{PIP_IMAGE} (scripts/debian-image.sh, which .ci/run runs)"),
        present,
    ) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let rel = test_release(root, PIP_IMAGE);
    let fixtures = manifest().join("tests/fixtures/pip-install");
    for name in ["pylib", "consumer"] {
        rocforge::fsutil::copy_tree(&fixtures.join(name), &root.join("src").join(name)).unwrap();
    }
    std::fs::write(
        rel.join("pylib.toml"),
        "name = \"pylib\"\nversion = \"4.43.0\"\nsummary = \"Python package\"\nlicense = \"MIT\"\n\n[source]\npath = \"../../src/pylib\"\n\n[build]\nsystem = \"copy\"\ndest = \"share/rocforge/pylib\"\n",
    )
    .unwrap();
    let consumer = |build: &str| {
        std::fs::write(
            rel.join("consumer.toml"),
            format!("name = \"consumer\"\nversion = \"1.0\"\nsummary = \"pip-installs pylib\"\nlicense = \"MIT\"\ndepends = [\"pylib\"]\n\n[source]\npath = \"../../src/consumer\"\n\n[build]\nsystem = \"cmake\"\narch-vars = [\"GPU_TARGETS\"]\nenv = {{ PIP_NO_INDEX = \"1\" }}\n{build}"),
        )
        .unwrap();
    };
    let build = || {
        rocforge_env(
            root,
            &[("CONTAINERS_CONF", containers_conf().as_path())],
            &[
                "--recipes",
                "recipes",
                "build",
                "consumer",
                "--arch",
                "gfx90c",
                "--runtime",
                "podman",
            ],
        )
    };
    let logs = || {
        let mut text = String::new();
        for dir in [root.join("store"), root.join("cache")] {
            for e in walk(&dir) {
                if e.extension().is_some_and(|x| x == "log") {
                    text.push_str(&std::fs::read_to_string(&e).unwrap_or_default());
                }
            }
        }
        text
    };

    consumer("args = [\"-DPYLIB_LOCAL_PATH=/opt/rocm/share/rocforge/pylib\"]\n");
    let before = build();
    assert_ne!(before.code, 0, "{}\n{}", before.stdout, before.stderr);
    let log = logs();
    assert!(log.contains("Read-only file system"), "{log}");

    consumer(
        "args = [\"-DPYLIB_LOCAL_PATH=/build/pylib-source\"]\npre-configure = \"\"\"\ncp -R \"$ROCFORGE_DEPS/share/rocforge/pylib\" \"$BUILD/pylib-source\"\nchmod -R u+w \"$BUILD/pylib-source\"\n\"\"\"\n",
    );
    let after = build();
    assert_eq!(
        after.code,
        0,
        "{}\n{}\n{}",
        after.stdout,
        after.stderr,
        logs()
    );
    let installed: Vec<PathBuf> = walk(&root.join("store"))
        .into_iter()
        .filter(|p| p.ends_with("share/consumer/pylib-version.txt"))
        .collect();
    assert_eq!(installed.len(), 1, "{installed:?}");
    assert_eq!(std::fs::read_to_string(&installed[0]).unwrap(), "4.43.0\n");
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let p = e.path();
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// A stopped or failed build continues from its build directory: CMake reconfigures over it and
/// ninja skips the steps already done. The first step appends to a counter outside the build, the
/// second fails until `flag` exists, so the counter says how often the first really ran.
#[test]
fn a_failed_build_resumes_from_its_build_directory_and_fresh_starts_over() {
    if !require("cmake and ninja", which("cmake") && which("ninja")) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let rel = test_release(root, "localhost/rocforge-none:1");
    let counter = root.join("first-step-runs");
    let flag = root.join("second-step-may-run");
    let src = rel.join("src/resumable");
    two_step_source(&src, "test -e \"$1\" || exit 1\necho two > second.txt\n");
    std::fs::write(
        rel.join("resumable.toml"),
        format!(
            "name = \"resumable\"\nversion = \"1.0\"\nsummary = \"two ninja steps\"\nlicense = \"MIT\"\n\n[source]\npath = \"src/resumable\"\n\n[build]\nsystem = \"cmake\"\narch-vars = [\"GPU_TARGETS\"]\nargs = [\"-DCOUNTER={}\", \"-DFLAG={}\"]\n",
            counter.display(),
            flag.display()
        ),
    )
    .unwrap();
    let build = |extra: &[&str]| {
        let mut args = vec![
            "--recipes",
            "recipes",
            "build",
            "resumable",
            "--arch",
            "gfx90c",
            "--runtime",
            "host",
        ];
        args.extend_from_slice(extra);
        rocforge(root, &args)
    };
    let runs = || {
        std::fs::read_to_string(&counter)
            .unwrap_or_default()
            .lines()
            .count()
    };

    let failed = build(&[]);
    assert_ne!(failed.code, 0, "{}", failed.stderr);
    assert_eq!(runs(), 1, "{}", failed.stderr);
    assert!(
        failed.stderr.contains("The build directory is kept"),
        "{}",
        failed.stderr
    );

    let again = build(&[]);
    assert_ne!(again.code, 0, "{}", again.stderr);
    assert_eq!(runs(), 1, "the finished first step ran again");
    assert!(
        again
            .stderr
            .contains("resumable: continuing the build that stopped in"),
        "{}",
        again.stderr
    );

    let fresh = build(&["--fresh"]);
    assert_ne!(fresh.code, 0, "{}", fresh.stderr);
    assert_eq!(runs(), 2, "--fresh did not start over");

    std::fs::write(&flag, "").unwrap();
    let done = build(&[]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert_eq!(runs(), 2, "the resumed build redid the first step");
    assert!(
        std::fs::read_dir(root.join("cache/builds"))
            .map(|d| d.count() == 0)
            .unwrap_or(true),
        "a finished build leaves no build directory"
    );
}

/// Starts `rocforge build steps after` (host runtime) on [`steps_catalog`]'s catalog plus
/// `after`, which depends on `steps`; once stderr shows `held`, sends SIGINT to rocforge alone
/// (as a terminal's Ctrl-C reaches it; the build's own processes are its to stop) and returns
/// what it said and its exit code.
fn interrupt_build(root: &Path, held: &str) -> Out {
    interrupt_build_of(root, &["after"], held)
}

/// [`interrupt_build`] of `what` (components, then any further arguments).
fn interrupt_build_of(root: &Path, what: &[&str], held: &str) -> Out {
    use std::io::BufRead;
    let mut args = vec!["--recipes", "recipes", "build"];
    args.extend_from_slice(what);
    args.extend_from_slice(&["--arch", "gfx90c", "--runtime", "host"]);
    let mut child = rocforge_command(root, &[], &args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let mut lines = Vec::new();
    let mut reader = std::io::BufReader::new(stderr).lines();
    for line in reader.by_ref() {
        let line = line.unwrap();
        let seen = line.contains(held);
        lines.push(line);
        if seen {
            // SAFETY: signals our own child.
            unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
            break;
        }
    }
    lines.extend(reader.map_while(Result::ok));
    let out = Out::from(child.wait_with_output().unwrap());
    Out {
        stderr: lines.join("\n"),
        ..out
    }
}

fn after_recipe(root: &Path) {
    std::fs::write(
        root.join("recipes/test-1.0/after.toml"),
        "name = \"after\"\nversion = \"1.0\"\nsummary = \"after steps\"\nlicense = \"MIT\"\ndepends = [\"steps\"]\n\n[source]\npath = \"src/steps\"\n\n[build]\nsystem = \"copy\"\ndest = \"share/after\"\n",
    )
    .unwrap();
}

#[test]
fn ctrl_c_reports_interrupted_and_the_same_command_continues() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let flag = root.join("go-on");
    steps_catalog(root, &flag);
    after_recipe(root);
    let out = interrupt_build(root, "[1/2]");
    assert_eq!(out.code, 130, "{}", out.stderr);
    let text = out.stderr;
    assert!(
        text.contains("  steps                interrupted: continues from "),
        "{text}"
    );
    assert!(
        text.contains("  after                not built: interrupted before it started"),
        "{text}"
    );
    assert!(
        text.contains("interrupted: run the same command again to continue"),
        "{text}"
    );
    assert!(text.contains("--fresh starts over"), "{text}");
    for never in ["FAILED", "which failed", "--- last", "error:"] {
        assert!(!text.contains(never), "{never:?} in:\n{text}");
    }
    // The report as the user reads it, paths and the content key made stable.
    let report: Vec<String> = text
        .lines()
        .filter(|l| {
            l.starts_with("  steps ") || l.starts_with("  after ") || l.starts_with("interrupted:")
        })
        .map(|l| {
            let l = l.replace(&root.display().to_string(), "[ROOT]");
            match l.split_once("/builds/") {
                Some((head, tail)) => format!(
                    "{head}/builds/[KEY]/{}",
                    tail.split_once('/').map_or("", |(_, rest)| rest)
                ),
                None => l,
            }
        })
        .collect();
    insta::assert_snapshot!("ctrl_c_build_report", report.join("\n"));

    // The same command continues the stopped build and finishes.
    std::fs::write(&flag, "").unwrap();
    let again = rocforge_env(
        root,
        &[],
        &[
            "--recipes",
            "recipes",
            "build",
            "after",
            "--arch",
            "gfx90c",
            "--runtime",
            "host",
        ],
    );
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert!(
        again
            .stderr
            .contains("steps: continuing the build that stopped in "),
        "{}",
        again.stderr
    );
}

/// A component the store already has is cached whether or not the run got to it: with one
/// build at a time and the long chain holding it, the stored leaf neither waits behind the
/// chain nor is called unbuilt when the run is stopped.
#[test]
fn a_stored_component_is_cached_when_the_run_stops_before_its_turn() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let flag = root.join("go-on");
    steps_catalog(root, &flag);
    after_recipe(root);
    std::fs::write(
        root.join("recipes/test-1.0/leaf.toml"),
        "name = \"leaf\"\nversion = \"1.0\"\nsummary = \"a stored leaf\"\nlicense = \"MIT\"\n\n[source]\npath = \"src/steps\"\n\n[build]\nsystem = \"copy\"\ndest = \"share/leaf\"\n",
    )
    .unwrap();
    ok(
        root,
        &[
            "--recipes",
            "recipes",
            "build",
            "leaf",
            "--arch",
            "gfx90c",
            "--runtime",
            "host",
        ],
    );
    let out = interrupt_build_of(root, &["after", "leaf", "-j", "1"], "[1/2]");
    assert_eq!(out.code, 130, "{}", out.stderr);
    let text = out.stderr;
    assert!(text.contains("  leaf                 cached"), "{text}");
    assert!(
        text.contains("  after                not built: interrupted before it started"),
        "{text}"
    );
    assert!(!text.contains("leaf                 not built"), "{text}");
}

#[test]
fn ctrl_c_ends_the_wait_for_another_process_at_once() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let flag = root.join("go-on");
    steps_catalog(root, &flag);
    after_recipe(root);
    let plan: serde_json::Value = serde_json::from_str(&ok(
        root,
        &[
            "--recipes",
            "recipes",
            "plan",
            "after",
            "--arch",
            "gfx90c",
            "--runtime",
            "host",
            "--format",
            "json",
        ],
    ))
    .unwrap();
    let key = plan["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["component"] == "steps")
        .unwrap()["key"]
        .as_str()
        .unwrap()
        .to_string();
    // Another process building the same key: it holds the entry's lock for as long as this
    // test runs, so only Ctrl-C can end the wait.
    let locks = root.join("store/.locks");
    std::fs::create_dir_all(&locks).unwrap();
    let held = std::fs::File::create(locks.join(format!("{key}.lock"))).unwrap();
    held.lock().unwrap();
    let out = interrupt_build(root, "waiting for another rocforge process");
    assert_eq!(out.code, 130, "{}", out.stderr);
    assert!(
        out.stderr.contains("  steps                interrupted"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("FAILED"), "{}", out.stderr);
    drop(held);
}

/// A `podman` that builds nothing: it records its arguments, keeps the Containerfile it is given
/// and from then on reports an image ID. Enough to see what rocforge asks of the runtime, on
/// any machine and without network.
fn fake_podman(dir: &Path) -> String {
    let bin = dir.join("fake-bin");
    std::fs::create_dir_all(&bin).unwrap();
    let state = dir.join("fake-podman");
    std::fs::create_dir_all(&state).unwrap();
    let script = format!(
        "#!/bin/sh\nS='{}'\necho \"$*\" >> \"$S/calls\"\ncase \"$1\" in\n  image) if [ -f \"$S/id\" ]; then cat \"$S/id\"; else echo 'Error: image not known' >&2; exit 125; fi ;;\n  build) while [ $# -gt 0 ]; do [ \"$1\" = --file ] && cp \"$2\" \"$S/Containerfile\"; shift; done\n    echo 'STEP 1/2: FROM somewhere'\n    echo sha256:{} > \"$S/id\" ;;\n  pull) touch \"$S/pulled\"; echo sha256:{} > \"$S/id\" ;;\n  version) echo 5.0.0 ;;\nesac\n",
        state.display(),
        "7".repeat(64),
        "8".repeat(64)
    );
    let podman = bin.join("podman");
    std::fs::write(&podman, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&podman, std::fs::Permissions::from_mode(0o755)).unwrap();
    format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// Run niced, a container build says that the niceness does not reach its containers and how
/// to give them a lower weight; not when the config gives one, nor when rocforge is not niced.
#[test]
fn a_niced_build_says_how_to_make_its_containers_yield() {
    if !podman_ready(IMAGE) {
        return;
    }
    let w = World::new().release(IMAGE).containers().build();
    w.write("src/data/README", "data\n");
    w.write(
        "recipes/test-1.0/data.toml",
        "name = \"data\"\nversion = \"1.0\"\nsummary = \"data\"\nlicense = \"MIT\"\n\n[source]\npath = \"../../src/data\"\n\n[build]\nsystem = \"copy\"\ndest = \"share/data\"\n",
    );
    // SAFETY: getpriority reads this process's niceness. Raised to 5 at least: lowering it
    // would need privileges.
    let want = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) }.max(5);
    let niced = |config: &str, args: &[&str]| -> Out {
        let cfg = w.write("niced-config.toml", config);
        let mut cmd = w.command_env(&[("ROCFORGE_CONFIG", cfg.as_path())], args);
        use std::os::unix::process::CommandExt;
        // SAFETY: setpriority is async-signal-safe; it changes only the child about to exec.
        unsafe {
            cmd.pre_exec(move || {
                libc::setpriority(libc::PRIO_PROCESS, 0, want);
                Ok(())
            });
        }
        Out::from(cmd.output().unwrap())
    };
    let build = ["build", "data", "--arch", "gfx90c", "--runtime", "podman"];
    let o = niced("", &build);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stderr.contains(&format!(
            "rocforge runs at niceness {want}, which does not reach the build containers"
        )) && o
            .stderr
            .contains(r#"[runtime] podman-run = ["--cpu-shares", "128"]"#),
        "{}",
        o.stderr
    );
    let weighted = "[runtime]\npodman-run = [\"--cpu-shares\", \"128\"]\n";
    let rebuild = [&build[..], &["--rebuild"]].concat();
    let o = niced(weighted, &rebuild);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(!o.stderr.contains("niceness"), "{}", o.stderr);
    // Not niced (unless this test runs niced itself: then rocforge inherits it).
    // SAFETY: getpriority reads this process's niceness.
    if unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) } == 0 {
        let o = w.run(&rebuild);
        assert_eq!(o.code, 0, "{}", o.stderr);
        assert!(!o.stderr.contains("niceness"), "{}", o.stderr);
    }
}

/// From an empty directory with a fresh HOME, the builder image is built from the Containerfile
/// built into the binary: by `image build`, and by `build` before it fetches anything (offline,
/// the fetch then fails; the image was made first). `doctor`'s advice is a command that works
/// there.
#[test]
fn the_builder_image_is_made_from_the_embedded_containerfile_anywhere() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let path = fake_podman(dir);
    let env: Vec<(&str, &Path)> = vec![("PATH", Path::new(&path))];
    let state = dir.join("fake-podman");
    let shipped =
        std::fs::read_to_string(manifest().join("containers/Containerfile.rocm-6.4.4")).unwrap();

    let doctor = rocforge_env(
        dir,
        &env,
        &[
            "--release",
            "rocm-6.4.4",
            "doctor",
            "rocprim",
            "--arch",
            "gfx90c",
            "--runtime",
            "podman",
        ],
    );
    let line = doctor
        .stdout
        .lines()
        .find(|l| l.contains("builder image"))
        .unwrap_or_else(|| panic!("{}", doctor.stdout))
        .to_string();
    insta::assert_snapshot!("doctor_missing_builder_image", line);

    let built = rocforge_env(
        dir,
        &env,
        &[
            "--release",
            "rocm-6.4.4",
            "image",
            "build",
            "--runtime",
            "podman",
        ],
    );
    assert_eq!(built.code, 0, "{}", built.stderr);
    assert_eq!(
        std::fs::read_to_string(state.join("Containerfile")).unwrap(),
        shipped
    );
    assert!(
        built.stderr.contains(
            "building the builder image ghcr.io/rocforge/builder:rocm-6.4.4 from <built-in>/containers/Containerfile.rocm-6.4.4 (log: "
        ),
        "{}",
        built.stderr
    );

    // `build` with the image absent: built first, then the (offline) fetch.
    std::fs::remove_file(state.join("id")).unwrap();
    std::fs::write(
        dir.join("offline.toml"),
        "[mirrors]\n\"https://github.com/\" = \"http://rocforge-test.invalid/\"\n",
    )
    .unwrap();
    std::fs::remove_file(state.join("Containerfile")).unwrap();
    let o = rocforge_env(
        dir,
        &[
            ("PATH", Path::new(&path)),
            // Offline: every source URL goes to a name that does not resolve.
            ("ROCFORGE_CONFIG", &dir.join("offline.toml")),
        ],
        &[
            "--release",
            "rocm-6.4.4",
            "build",
            "rocprim",
            "--arch",
            "gfx90c",
            "--runtime",
            "podman",
        ],
    );
    assert_eq!(o.code, 1, "{}", o.stderr);
    let building = o
        .stderr
        .find("building the builder image ghcr.io/rocforge/builder:rocm-6.4.4 from <built-in>/containers/Containerfile.rocm-6.4.4 (log: ")
        .unwrap_or_else(|| panic!("{}", o.stderr));
    let fetch_error = o
        .stderr
        .find("rocforge-test.invalid")
        .unwrap_or_else(|| panic!("{}", o.stderr));
    assert!(building < fetch_error, "{}", o.stderr);
    assert_eq!(
        std::fs::read_to_string(state.join("Containerfile")).unwrap(),
        shipped
    );
    assert!(!o.stderr.contains("exit 125"), "{}", o.stderr);
    // The fetch failed before the build wrote a line: no pointer to an empty log.
    assert!(!o.stderr.contains("  log: "), "{}", o.stderr);
}

/// A catalog of one component whose source is on a name that does not resolve, building in
/// `image`.
fn offline_catalog(dir: &Path, image: &str) {
    let rel = test_release(dir, image);
    std::fs::write(
        rel.join("pkg.toml"),
        format!(
            "name = \"pkg\"\nversion = \"1.0\"\nsummary = \"s\"\nlicense = \"MIT\"\n\n[source]\nurl = \"http://rocforge-test.invalid/pkg.tar.gz\"\nsha256 = \"{}\"\n\n[build]\nsystem = \"cmake\"\narch-vars = [\"GPU_TARGETS\"]\n",
            "0".repeat(64)
        ),
    )
    .unwrap();
}

/// A registry image rocforge.lock pins is pulled by its digest before anything is fetched.
#[test]
fn a_pinned_builder_image_is_pulled_by_digest_first() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let path = fake_podman(dir);
    offline_catalog(dir, "registry.invalid/rocforge/builder:1");
    let digest = format!("sha256:{}", "9".repeat(64));
    std::fs::write(
        dir.join("rocforge.lock"),
        format!(
            "version = 1\n\n[[image]]\nrelease = \"test-1.0\"\nreference = \"registry.invalid/rocforge/builder:1\"\ndigest = \"{digest}\"\n"
        ),
    )
    .unwrap();
    let o = rocforge_env(
        dir,
        &[("PATH", Path::new(&path))],
        &[
            "--recipes",
            "recipes",
            "build",
            "pkg",
            "--arch",
            "gfx90c",
            "--runtime",
            "podman",
        ],
    );
    assert_eq!(o.code, 1, "{}", o.stderr);
    let calls = std::fs::read_to_string(dir.join("fake-podman/calls")).unwrap();
    assert!(
        calls.contains(&format!("pull registry.invalid/rocforge/builder@{digest}")),
        "{calls}"
    );
    let pulling = o
        .stderr
        .find(&format!(
            "pulling the builder image registry.invalid/rocforge/builder@{digest} (pinned by rocforge.lock; log: "
        ))
        .unwrap_or_else(|| panic!("{}", o.stderr));
    let fetch_error = o
        .stderr
        .find("cannot download http://rocforge-test.invalid/pkg.tar.gz")
        .unwrap_or_else(|| panic!("{}", o.stderr));
    assert!(pulling < fetch_error, "{}", o.stderr);
}

/// A release line whose image is neither present, pinned nor buildable stops before anything
/// is fetched, naming the image and what provides it.
#[test]
fn a_builder_image_that_cannot_be_had_is_named_before_any_fetch() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let path = fake_podman(dir);
    offline_catalog(dir, "localhost/rocforge-test-none:1");
    let o = rocforge_env(
        dir,
        &[("PATH", Path::new(&path))],
        &[
            "--recipes",
            "recipes",
            "build",
            "pkg",
            "--arch",
            "gfx90c",
            "--runtime",
            "podman",
        ],
    );
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(!o.stderr.contains("rocforge-test.invalid"), "{}", o.stderr);
    insta::assert_snapshot!(
        "builder_image_cannot_be_had",
        o.stderr.replace(&dir.display().to_string(), "[ROOT]")
    );
}

/// The logic each target's Tensile kernels come from travels inside the artifact, and
/// `inspect` says it: derived from gfx900's for one target, a user's overlay (by digest) for
/// the other.
#[test]
fn the_built_tree_records_where_each_targets_tensile_logic_came_from() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let rel = test_release(root, "localhost/rocforge-none:1");
    let src = rel.join("src/blas");
    std::fs::create_dir_all(src.join("logic/vega10")).unwrap();
    std::fs::write(src.join("LICENSE"), "MIT\n").unwrap();
    std::fs::write(
        src.join("logic/vega10/vega10_Cijk_SB.yaml"),
        "- {MinimumRequiredVersion: 4.33.0}\n- vega10\n- gfx900\n",
    )
    .unwrap();
    std::fs::write(
        rel.join("blas.toml"),
        "name = \"blas\"\nversion = \"1.0\"\nsummary = \"s\"\nlicense = \"MIT\"\n\n[source]\npath = \"src/blas\"\n\n[build]\nsystem = \"script\"\nscript = \"mkdir -p \\\"$DESTDIR$PREFIX/share/blas\\\" && cp -R logic \\\"$DESTDIR$PREFIX/share/blas/\\\"\"\n\n[[derive]]\narches = [\"gfx90c\", \"gfx902\"]\nfrom = \"logic/vega10\"\nto = \"logic/{codename}\"\nrename = [[\"vega10_\", \"{codename}_\"]]\nreplace = [[\"vega10\", \"{codename}\"], [\"gfx900\", \"{arch}\"]]\n\n[derive.vars.gfx90c]\ncodename = \"renoir\"\n\n[derive.vars.gfx902]\ncodename = \"raven\"\n",
    )
    .unwrap();
    let tuned = root.join("tuned");
    std::fs::create_dir_all(&tuned).unwrap();
    std::fs::write(
        tuned.join("raven_Cijk_SB.yaml"),
        "- {MinimumRequiredVersion: 4.33.0}\n- raven\n- gfx902\n- tuned on a Ryzen 5 2500U\n",
    )
    .unwrap();
    let overlay = format!("blas:logic/raven={}", tuned.display());
    let out = rocforge(
        root,
        &[
            "--recipes",
            "recipes",
            "--store",
            "store",
            "build",
            "blas",
            "--arch",
            "gfx90c,gfx902",
            "--runtime",
            "host",
            "--overlay",
            &overlay,
            "-q",
        ],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let tree = root.join(out.stdout.trim());
    assert!(tree.is_dir(), "{}", out.stdout);
    assert_eq!(
        std::fs::read_to_string(tree.join("share/blas/logic/raven/raven_Cijk_SB.yaml")).unwrap(),
        "- {MinimumRequiredVersion: 4.33.0}\n- raven\n- gfx902\n- tuned on a Ryzen 5 2500U\n"
    );
    let sha = rocforge::source::derive::hash_tree(&tuned).unwrap();
    let o = rocforge(root, &["inspect", tree.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}", o.stdout);
    assert!(
        o.stdout.contains(&format!(
            "Tensile logic of blas: gfx902 overlay {} (at logic/raven); gfx90c derived from logic/vega10",
            &sha[..12]
        )),
        "{}",
        o.stdout
    );

    // Packaging names the build by its content key, which the overlay is part of: without it
    // there is nothing to package, and the hint gives the build that would make it.
    let package = |extra: &[&str]| {
        let mut args = vec![
            "--recipes",
            "recipes",
            "--store",
            "store",
            "package",
            "blas",
            "--arch",
            "gfx90c,gfx902",
            "--runtime",
            "host",
            "--out",
            "dist",
        ];
        args.extend(extra);
        rocforge(root, &args)
    };
    let refused = package(&[]);
    assert_ne!(refused.code, 0);
    assert!(
        refused
            .stderr
            .contains("not in the store for gfx902,gfx90c: blas")
            && refused.stderr.contains(&format!(
                "the store holds a build for gfx902,gfx90c from other inputs (blas {})",
                &tree
                    .parent()
                    .unwrap()
                    .file_name()
                    .unwrap()
                    .to_str()
                    .unwrap()[..12]
            ))
            && refused
                .stderr
                .contains("found only with the same --overlay"),
        "{}",
        refused.stderr
    );
    let packaged = package(&["--overlay", &overlay]);
    assert_eq!(packaged.code, 0, "{}", packaged.stderr);
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(root.join("dist/index.json")).unwrap()).unwrap();
    assert_eq!(
        index["artifacts"][0]["key"].as_str().unwrap(),
        tree.parent()
            .unwrap()
            .file_name()
            .unwrap()
            .to_str()
            .unwrap(),
        "the overlay build's entry is the one packaged"
    );
}

/// A component without device code (`device-code = false`) has one content key for every
/// target set: built for gfx90c, it is not built again for gfx902, and no coverage gate runs on
/// its library, which carries no GPU code.
#[test]
fn a_component_without_device_code_is_built_once_for_every_target_set() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let rel = test_release(root, "localhost/rocforge-none:1");
    let src = rel.join("src/wrap");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("LICENSE"), "MIT\n").unwrap();
    std::fs::write(
        rel.join("wrap.toml"),
        "name = \"wrap\"\nversion = \"1.0\"\nsummary = \"host-side wrapper\"\nlicense = \"MIT\"\n\n[source]\npath = \"src/wrap\"\n\n[build]\nsystem = \"script\"\ndevice-code = false\nscript = \"mkdir -p \\\"$DESTDIR$PREFIX/lib\\\" && echo 'int x;' > \\\"$DESTDIR$PREFIX/lib/wrap.c\\\"\"\n",
    )
    .unwrap();
    let key = |arch: &str| -> String {
        let v: serde_json::Value = serde_json::from_str(&ok(
            root,
            &[
                "--recipes",
                "recipes",
                "plan",
                "wrap",
                "--arch",
                arch,
                "--format",
                "json",
            ],
        ))
        .unwrap();
        v["steps"][0]["key"].as_str().unwrap().to_string()
    };
    assert_eq!(key("gfx90c"), key("gfx902"));
    assert_eq!(key("gfx90c"), key("gfx90c,gfx902"));
    let build = |arch: &str| {
        rocforge(
            root,
            &[
                "--recipes",
                "recipes",
                "build",
                "wrap",
                "--arch",
                arch,
                "--runtime",
                "host",
                "--format",
                "json",
            ],
        )
    };
    let first = build("gfx90c");
    assert_eq!(first.code, 0, "{}", first.stderr);
    let second = build("gfx902");
    assert_eq!(second.code, 0, "{}", second.stderr);
    let results = results(&second);
    assert_eq!(
        results,
        vec![("wrap".to_string(), "cached".to_string())],
        "{}",
        second.stdout
    );
}

/// A script component that records the compile jobs it was given (MAX_JOBS) in the shared
/// `dir`, after running `body`.
fn jobs_recipe(name: &str, extra: &str, body: &str, dir: &Path) -> String {
    format!(
        "name = \"{name}\"\nversion = \"1.0\"\nsummary = \"records its jobs\"\nlicense = \"MIT\"\n{extra}\n[source]\npath = \"src/{name}\"\n\n[build]\nsystem = \"script\"\nscript = \"\"\"\n{body}\necho \"$MAX_JOBS\" > '{dir}/{name}.jobs'\nmkdir -p \"$DESTDIR$PREFIX/share/{name}\"\ncp LICENSE \"$DESTDIR$PREFIX/share/{name}/\"\n\"\"\"\n",
        dir = dir.display()
    )
}

/// `long` (hours) waits for `first` (seconds); `quick` (seconds) is still running when `long`
/// starts: it waits until `long` has begun. With two jobs, `long` must get both, since its share
/// is fixed for its whole length and `quick` is expected to end long before. (Which of `first`
/// and `quick` gets both depends on which registers first; jobs::tests covers equal siblings.)
#[test]
fn a_long_build_started_beside_a_short_one_gets_the_whole_job_budget() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let rel = test_release(root, "localhost/rocforge-none:1");
    let seen = root.join("seen");
    std::fs::create_dir_all(&seen).unwrap();
    for name in ["first", "long", "quick"] {
        std::fs::create_dir_all(rel.join("src").join(name)).unwrap();
        std::fs::write(rel.join("src").join(name).join("LICENSE"), "MIT\n").unwrap();
    }
    let started = seen.join("long.started");
    let wait_for_long = format!(
        "i=0; while [ ! -e '{}' ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done\ntest -e '{}' && touch '{}/quick.overlapped'",
        started.display(),
        started.display(),
        seen.display()
    );
    let recipes = [
        (
            "first",
            "\n[resources]\nhours = 0.0005\n".to_string(),
            String::new(),
        ),
        (
            "long",
            "depends = [\"first\"]\n\n[resources]\nhours = 3.0\n".to_string(),
            format!("touch '{}'", started.display()),
        ),
        (
            "quick",
            "\n[resources]\nhours = 0.0005\n".to_string(),
            wait_for_long,
        ),
    ];
    for (name, extra, body) in &recipes {
        std::fs::write(
            rel.join(format!("{name}.toml")),
            jobs_recipe(name, extra, body, &seen),
        )
        .unwrap();
    }
    let out = rocforge(
        root,
        &[
            "--recipes",
            "recipes",
            "build",
            "long",
            "quick",
            "--arch",
            "gfx90c",
            "--runtime",
            "host",
            "--jobs",
            "2",
        ],
    );
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        seen.join("quick.overlapped").exists(),
        "quick ran while long started"
    );
    let jobs = |name: &str| std::fs::read_to_string(seen.join(format!("{name}.jobs"))).unwrap();
    assert_eq!(
        jobs("long"),
        "2\n",
        "a sibling ending soon does not halve it"
    );
}

/// A builder image `image build` makes from a Containerfile FROM the line's `[image-base]` is
/// keyed by what it is made from: the keys are the same before it is built, after, and once it
/// is gone, and hold no image ID; one byte of the Containerfile changes them. What it built is
/// checked against the Containerfile's apt pins: a pin the image does not hold is refused,
/// naming the package and both versions, and the package list is recorded with the image.
#[test]
fn an_image_built_from_pinned_inputs_keys_builds_by_them_and_is_checked_against_its_pins() {
    if !podman_ready(IMAGE) {
        return;
    }
    const KEYED: &str = "localhost/rocforge-test-keyed:1";
    let f = fixture();
    let conf = containers_conf();
    let podman = |args: &[&str]| {
        let o = Command::new("podman")
            .env("CONTAINERS_CONF", &conf)
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    };
    let _ = podman(&["rmi", KEYED]);
    let make = podman(&[
        "run",
        "--rm",
        "--network",
        "none",
        IMAGE,
        "dpkg-query",
        "-W",
        "-f",
        "${Version}",
        "make",
    ]);
    assert!(!make.is_empty(), "the test image has make");
    let release = f.path("recipes/test-1.0/release.toml");
    let text = std::fs::read_to_string(&release)
        .unwrap()
        .replace(IMAGE, KEYED);
    // The test image already exists under the base's name, so nothing is debootstrapped.
    std::fs::write(
        &release,
        format!("{text}\n[image-base]\nname = \"{IMAGE}\"\ndebootstrap = \"bookworm\"\n"),
    )
    .unwrap();
    std::fs::create_dir_all(f.path("containers")).unwrap();
    let containerfile = f.path("containers/Containerfile.test-1.0");
    // The pin is one apt would leave as it is: make is installed at that version already.
    let write = |label: &str, pinned: &str| {
        std::fs::write(
            &containerfile,
            format!(
                "FROM {IMAGE}\nLABEL org.rocforge.test={label}\nRUN if false; then apt-get install -y make={pinned}; fi\n"
            ),
        )
        .unwrap()
    };
    write("keyed", &make);
    let plan = || -> serde_json::Value {
        serde_json::from_str(
            &f.ok(&["plan", "hipcore", "--arch", "gfx90c", "--format", "json"])
                .stdout,
        )
        .unwrap()
    };
    let before = plan();
    let built_from = before["image"]["built_from"].as_str().unwrap().to_string();
    assert!(before["image"]["digest"].is_null(), "{}", before["image"]);
    let image_build = || f.run(&["image", "build", "--runtime", "podman"]);
    let built = image_build();
    assert_eq!(built.code, 0, "{}", built.stderr);
    let id = podman(&["image", "inspect", "--format", "{{.Id}}", KEYED]);
    assert!(!id.is_empty());
    let after = plan();
    assert_eq!(
        after["steps"], before["steps"],
        "built or not, the same keys"
    );
    let shown = after.to_string();
    assert!(
        !shown.contains(&id),
        "the image ID reached the plan: {shown}"
    );
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(f.path("store/.images/test-1.0.json")).unwrap())
            .unwrap();
    assert_eq!(record["inputs"], built_from.as_str(), "{record}");
    assert!(record["id"].as_str().unwrap().ends_with(&id), "{record}");
    let packages: Vec<&str> = record["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    assert!(
        packages.contains(&format!("make={make}").as_str()),
        "{packages:?}"
    );

    // The image says what it was made from; a store that never recorded it (another
    // machine's, which pulled or loaded it) keys it by that too, not by its ID.
    let label = podman(&[
        "image",
        "inspect",
        "--format",
        "{{index .Config.Labels \"org.rocforge.image-inputs\"}}",
        KEYED,
    ]);
    assert_eq!(label, built_from);
    let elsewhere = f.path("another-store");
    let o = f.run_env(
        &[("ROCFORGE_STORE", elsewhere.as_path())],
        &["plan", "hipcore", "--arch", "gfx90c", "--format", "json"],
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let there: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(
        there["steps"], before["steps"],
        "another store, the same keys"
    );
    assert_eq!(there["image"]["built_from"], built_from.as_str());

    // Gone from the runtime (another machine, before it builds): the same keys.
    podman(&["rmi", KEYED]);
    assert_eq!(plan()["steps"], before["steps"]);

    // One byte of the Containerfile: other keys.
    write("keyeD", &make);
    let changed = plan();
    assert_ne!(
        changed["image"]["built_from"],
        before["image"]["built_from"]
    );
    assert_ne!(changed["steps"][0]["key"], before["steps"][0]["key"]);

    // A pin the image does not hold.
    write("keyed", "0.0-not-this");
    let o = image_build();
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(
        o.stderr.contains(&format!(
            "does not hold what {} pins: make pinned 0.0-not-this, installed {make}",
            containerfile.display()
        )),
        "{}",
        o.stderr
    );
    // The record still describes the image that passed.
    let kept: serde_json::Value =
        serde_json::from_slice(&std::fs::read(f.path("store/.images/test-1.0.json")).unwrap())
            .unwrap();
    assert_eq!(kept["inputs"], built_from.as_str());
    let _ = podman(&["rmi", KEYED]);
}

/// `build --rebuild` builds a stored component again and replaces its entry; one that fails,
/// or is killed, puts the old entry back. `store rm` removes by key or component (narrowed by
/// --arch), refuses what names nothing, and `--dry-run` removes nothing.
#[test]
fn rebuild_replaces_an_entry_keeps_it_on_failure_and_store_rm_removes_it() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let rel = test_release(root, "localhost/rocforge-none:1");
    let (counter, fail, hold, go) = (
        root.join("runs"),
        root.join("fail"),
        root.join("hold"),
        root.join("go"),
    );
    let src = rel.join("src/counted");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("LICENSE"), "MIT\n").unwrap();
    std::fs::write(
        rel.join("counted.toml"),
        format!(
            "name = \"counted\"\nversion = \"1.0\"\nsummary = \"counts its builds\"\nlicense = \"MIT\"\n\n[source]\npath = \"src/counted\"\n\n[build]\nsystem = \"script\"\nscript = \"\"\"\necho ran >> {c}\nif [ -e {h} ]; then while [ ! -e {g} ]; do sleep 0.1; done; fi\nif [ -e {f} ]; then exit 1; fi\nP=/opt; P=\"$DESTDIR$P/rocm\"\nmkdir -p \"$P/share/counted\"\nwc -l < {c} > \"$P/share/counted/build\"\n\"\"\"\n",
            c = counter.display(),
            h = hold.display(),
            g = go.display(),
            f = fail.display(),
        ),
    )
    .unwrap();
    let args = |extra: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = [
            "--recipes",
            "recipes",
            "build",
            "counted",
            "--arch",
            "gfx90c",
            "--runtime",
            "host",
        ]
        .map(String::from)
        .to_vec();
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    let build = |extra: &[&str]| {
        let a = args(extra);
        rocforge(root, &a.iter().map(String::as_str).collect::<Vec<_>>())
    };
    let runs = || {
        std::fs::read_to_string(&counter)
            .unwrap_or_default()
            .lines()
            .count()
    };
    let o = build(&[]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let tree = PathBuf::from(o.stdout.trim());
    let built = || std::fs::read_to_string(tree.join("share/counted/build")).unwrap();
    assert_eq!((runs(), built().trim()), (1, "1"));
    assert_eq!(build(&[]).code, 0);
    assert_eq!(runs(), 1, "stored: not built again");

    let o = build(&["--rebuild"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stderr.contains("counted: rebuilding"), "{}", o.stderr);
    assert_eq!(PathBuf::from(o.stdout.trim()), tree, "the same key");
    assert_eq!(
        (runs(), built().trim()),
        (2, "2"),
        "built again, entry replaced"
    );

    // A rebuild that fails puts the old entry back.
    std::fs::write(&fail, "").unwrap();
    let o = build(&["--rebuild"]);
    assert_ne!(o.code, 0, "{}", o.stderr);
    assert_eq!((runs(), built().trim()), (3, "2"), "the old entry is back");
    std::fs::remove_file(&fail).unwrap();

    // Killed mid-rebuild: the next command that tidies the store puts the old entry back.
    std::fs::write(&hold, "").unwrap();
    let a = args(&["--rebuild"]);
    let mut child = rocforge_command(root, &[], &a.iter().map(String::as_str).collect::<Vec<_>>())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while runs() < 4 {
        assert!(start.elapsed().as_secs() < 60, "the rebuild never started");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(!tree.exists(), "set aside while it builds");
    child.kill().unwrap();
    child.wait().unwrap();
    std::fs::write(&go, "").unwrap();
    let o = rocforge(root, &["store", "gc"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(built().trim(), "2", "the old entry is back after the kill");
    let store = root.join("store");
    let left: Vec<_> = std::fs::read_dir(&store)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".rebuild-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    std::fs::remove_file(&hold).unwrap();

    let o = rocforge(root, &["store", "rm", "nosuch"]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(
        o.stderr
            .contains("the store has no entry or component named nosuch"),
        "{}",
        o.stderr
    );
    assert!(o.stderr.contains("rocforge store list"), "{}", o.stderr);
    let o = rocforge(
        root,
        &[
            "--recipes",
            "recipes",
            "store",
            "rm",
            "counted",
            "--arch",
            "gfx902",
        ],
    );
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(
        o.stderr
            .contains("the store has no build of counted for gfx902"),
        "{}",
        o.stderr
    );
    let o = rocforge(root, &["store", "rm", "counted", "--dry-run"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stdout.starts_with("would remove "), "{}", o.stdout);
    assert!(tree.exists());
    let key = tree
        .parent()
        .unwrap()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let o = rocforge(root, &["store", "rm", &key[..10]]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stdout
            .starts_with(&format!("removed {}  counted 1.0 gfx90c", &key[..12])),
        "{}",
        o.stdout
    );
    assert!(!tree.parent().unwrap().exists());
    assert_eq!(rocforge(root, &["store", "list"]).stdout, "");
}

/// `plan` estimates a component built here before from its measured build: after a build, a
/// changed source plans a rebuild whose `measured_secs` is the stored build's duration, and the
/// text says how many of the components to build that covers.
#[test]
fn plan_estimates_from_the_builds_measured_here() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let rel = test_release(root, "localhost/rocforge-none:1");
    std::fs::create_dir_all(rel.join("src/slow")).unwrap();
    std::fs::write(rel.join("src/slow/VERSION"), "1.0\n").unwrap();
    std::fs::write(
        rel.join("slow.toml"),
        "name = \"slow\"\nversion = \"1.0\"\nsummary = \"a build that takes a while\"\nlicense = \"MIT\"\n\n[source]\npath = \"src/slow\"\n\n[build]\nsystem = \"script\"\nscript = \"\"\"\nsleep 2\nP=\"$DESTDIR$PREFIX\"\nmkdir -p \"$P/share/slow\"\ncp VERSION \"$P/share/slow/VERSION\"\n\"\"\"\n\n[resources]\nhours = 3\n",
    )
    .unwrap();
    let args = |cmd: &'static str| -> Vec<&'static str> {
        vec![
            "--recipes",
            "recipes",
            cmd,
            "slow",
            "--arch",
            "gfx90c",
            "--runtime",
            "host",
        ]
    };
    let fresh = ok(root, &args("plan"));
    assert!(!fresh.contains("  here "), "no history yet: {fresh}");
    ok(root, &args("build"));
    let o = rocforge(
        root,
        &["--recipes", "recipes", "--format", "json", "store", "list"],
    );
    let listed: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    let entries = listed["entries"].as_array().or(listed.as_array()).cloned();
    let entry = entries
        .unwrap_or_default()
        .into_iter()
        .find(|e| e["component"] == "slow")
        .unwrap_or_else(|| panic!("{listed}"));
    let measured = entry["duration_secs"].as_f64().unwrap();
    assert!(measured >= 2.0, "{entry}");
    // And the disk it took, which `store list` shows beside each entry and sums.
    let key = entry["key"].as_str().unwrap();
    let tree_bytes = entry["tree_bytes"].as_u64().unwrap();
    let tree = root.join("store").join(key).join("tree");
    assert!(tree.is_dir(), "{}", tree.display());
    assert_eq!(tree_bytes, du_blocks(&tree));
    assert!(entry["build_bytes"].as_u64().is_some(), "{entry}");
    let o = rocforge(root, &["--recipes", "recipes", "store", "list"]);
    let size = rocforge::units::format_size(tree_bytes);
    assert!(
        o.stdout
            .lines()
            .any(|l| l.contains("slow") && l.ends_with(&size)),
        "{}",
        o.stdout
    );
    assert!(
        o.stderr.contains(&format!("1 entry, {size} in ")),
        "{}",
        o.stderr
    );

    std::fs::write(rel.join("src/slow/VERSION"), "1.1\n").unwrap();
    let mut json = vec!["--format", "json"];
    json.extend(args("plan"));
    let plan: serde_json::Value = serde_json::from_str(&ok(root, &json)).unwrap();
    assert_eq!(plan["steps"][0]["status"], "build", "{plan}");
    assert_eq!(plan["steps"][0]["measured_secs"].as_f64(), Some(measured));
    assert_eq!(plan["estimate"]["measured_components"], 1);
    let text = ok(root, &args("plan"));
    assert!(
        text.contains(&format!(
            "  here    {}s for the 1 of 1 built on this machine before",
            measured.round()
        )),
        "{text}"
    );
    assert!(text.contains("1 of 1 as measured here)"), "{text}");
    // The hint (3 h on the reference machine) is still what the plan sizes runners by.
    assert!(text.contains("time    3h of builds"), "{text}");
}

/// A host whose container runtime cannot start the build's container (here: a file limit above
/// what the kernel allows, which podman's `--ulimit` asks for and the OCI runtime refuses). The
/// build says its container did not start, with the runtime's words and the exact [runtime]
/// lines that fix it, not "the build failed … read the log"; `doctor` fails the same way and
/// prints the same fix.
#[test]
fn a_container_that_cannot_start_is_a_runtime_error_with_the_fix() {
    if !podman_ready(IMAGE) {
        return;
    }
    let f = fixture();
    std::fs::write(
        f.path("rocforge.toml"),
        "[runtime]\npodman-run = [\"--ulimit\", \"nofile=999999999:999999999\"]\n",
    )
    .unwrap();
    let o = f.build(&[], &["hipcore"]);
    eprintln!("{}", o.stderr);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(
        o.stderr
            .contains("hipcore: the build's container did not start (podman exited"),
        "{}",
        o.stderr
    );
    assert!(!o.stderr.contains("the build failed"), "{}", o.stderr);
    assert!(o.stderr.contains("[runtime]"), "the fix: {}", o.stderr);
    assert!(
        o.stderr.contains("podman-run = [\"--ulimit\", \"nofile="),
        "{}",
        o.stderr
    );
    let doctor = f.run(&["doctor", "hipcore", "--arch", "gfx90c"]);
    assert_eq!(doctor.code, 1, "{}\n{}", doctor.stdout, doctor.stderr);
    let all = format!("{}{}", doctor.stdout, doctor.stderr);
    assert!(all.contains("FAIL"), "{all}");
    assert!(
        all.contains("podman-run = [\"--ulimit\", \"nofile="),
        "{all}"
    );
    // The lines doctor prints are ones a container started with on this host: written into
    // rocforge.toml as they stand, the next doctor passes the container start.
    let fix = all
        .lines()
        .find(|l| l.trim_start().starts_with("podman-run = ["))
        .unwrap();
    let fix = &fix[..fix.rfind(']').unwrap() + 1];
    std::fs::write(
        f.path("rocforge.toml"),
        format!("[runtime]\n{}\n", fix.trim()),
    )
    .unwrap();
    let again = f.run(&["doctor", "hipcore", "--arch", "gfx90c"]);
    let all = format!("{}{}", again.stdout, again.stderr);
    assert!(
        all.lines()
            .any(|l| l.starts_with("ok") && l.contains("container start")),
        "{all}"
    );
}

/// A user without root makes a line's Debian base image with mmdebstrap in a user namespace (as
/// rootless podman runs its containers), then the builder image on it: what a new user on a
/// laptop with rootless podman meets first. debootstrap would need root.
#[test]
fn a_user_without_root_makes_the_debian_base_with_mmdebstrap() {
    let mirror = Command::new("curl")
        .args([
            "-fsSI",
            "--max-time",
            "20",
            "http://deb.debian.org/debian/dists/sid/InRelease",
        ])
        .output()
        .is_ok_and(|o| o.status.success());
    let Some(uid) = rootless_user(
        "root, the rootless user rocforge-test (scripts/rootless-user.sh), mmdebstrap and the Debian mirror",
        which("mmdebstrap") && mirror,
    ) else {
        return;
    };
    let f = fixture();
    let base = format!("localhost/rocforge-test-mm-base:{}", std::process::id());
    let builder = format!("localhost/rocforge-test-mm-builder:{}", std::process::id());
    let release = f.path("recipes/test-1.0/release.toml");
    let text = std::fs::read_to_string(&release)
        .unwrap()
        .replace(IMAGE, &builder);
    std::fs::write(
        &release,
        format!(
            "{text}\n[image-base]\nname = \"{base}\"\ndebootstrap = \"sid\"\nmirror = \"http://deb.debian.org/debian\"\n"
        ),
    )
    .unwrap();
    std::fs::create_dir_all(f.path("containers")).unwrap();
    std::fs::write(
        f.path("containers/Containerfile.test-1.0"),
        format!("FROM {base}\nRUN test -f /etc/debian_version\n"),
    )
    .unwrap();
    let shared = hand_to_rootless_user(f.root());
    let as_user = |program: &Path, args: &[&str]| as_rootless_user(uid, f.root(), program, args);
    let out = as_user(
        &shared,
        &[
            "--recipes",
            "recipes",
            "image",
            "build",
            "--runtime",
            "podman",
        ],
    );
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let podman = Path::new("/usr/bin/podman");
    let exists = |image: &str| {
        as_user(podman, &["image", "exists", image])
            .status
            .success()
    };
    let made = (exists(&base), exists(&builder));
    let _ = as_user(podman, &["rmi", "-f", &builder, &base]);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains(&format!("making the base image {base} with mmdebstrap")),
        "{text}"
    );
    assert_eq!(made, (true, true), "{text}");
}

/// A recipe that names a flavour of the builder image (`[build] image`) builds in the image its
/// `Containerfile.builder-<flavour>-<line>` makes FROM the line's image, and only its key
/// depends on that file: the other components keep theirs. A flavour without its Containerfile,
/// or one FROM another image, is refused at load, naming the recipe's line and the file.
#[test]
fn a_builder_image_flavour_builds_its_recipe_and_keys_nothing_else() {
    if !podman_ready(IMAGE) {
        return;
    }
    let f = fixture();
    let conf = containers_conf();
    let flavoured = format!("{IMAGE}-extra");
    let podman = |args: &[&str]| {
        Command::new("podman")
            .env("CONTAINERS_CONF", &conf)
            .args(args)
            .output()
            .unwrap()
    };
    let _ = podman(&["rmi", &flavoured]);
    let plan = || -> serde_json::Value {
        let o = f.run(&["plan", "--arch", "gfx90c", "--format", "json"]);
        assert_eq!(o.code, 0, "{}", o.stderr);
        serde_json::from_str(&o.stdout).unwrap()
    };
    let key_of = |plan: &serde_json::Value, c: &str| -> String {
        plan["steps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["component"] == c)
            .map(|s| s["key"].as_str().unwrap().to_string())
            .unwrap_or_default()
    };
    let before = plan();
    let recipe = f.path("recipes/test-1.0/flavoured.toml");
    std::fs::write(
        &recipe,
        "name = \"flavoured\"\nversion = \"1.0\"\nsummary = \"built in a flavour\"\nlicense = \"MIT\"\n\n[source]\npath = \"flavoured-src\"\n\n[build]\nsystem = \"script\"\ndevice-code = false\nimage = \"extra\"\nscript = '''\nmkdir -p \"$DESTDIR$PREFIX/share/flavoured\"\ncp /etc/rocforge-flavour \"$DESTDIR$PREFIX/share/flavoured/which\"\n'''\n",
    )
    .unwrap();
    std::fs::create_dir_all(f.path("recipes/test-1.0/flavoured-src")).unwrap();
    std::fs::write(f.path("recipes/test-1.0/flavoured-src/README"), "x\n").unwrap();

    // Named, but no Containerfile yet.
    let o = f.run(&["plan", "flavoured"]);
    assert_eq!(o.code, 1, "{}", o.stdout);
    assert!(
        o.stderr
            .contains("no containers/Containerfile.builder-extra-test-1.0")
            && o.stderr.contains("flavoured.toml:12"),
        "{}",
        o.stderr
    );
    let containerfile = f.path("containers/Containerfile.builder-extra-test-1.0");
    std::fs::create_dir_all(containerfile.parent().unwrap()).unwrap();
    std::fs::write(&containerfile, "FROM localhost/other:1\n").unwrap();
    let o = f.run(&["plan", "flavoured"]);
    assert_eq!(o.code, 1, "{}", o.stdout);
    assert!(
        o.stderr
            .contains("builds FROM localhost/other:1, not the line's builder image"),
        "{}",
        o.stderr
    );

    std::fs::write(
        &containerfile,
        format!("FROM {IMAGE}\nRUN echo extra > /etc/rocforge-flavour\n"),
    )
    .unwrap();
    let with = plan();
    for c in ["hipcore", "hipapp", "hipextra"] {
        assert_eq!(
            key_of(&with, c),
            key_of(&before, c),
            "{c}: a flavour keyed it"
        );
    }
    let step = with["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["component"] == "flavoured")
        .unwrap()
        .clone();
    assert_eq!(step["image"]["reference"], flavoured.as_str());
    let inputs = step["image"]["built_from"]
        .as_str()
        .expect("keyed by its inputs")
        .to_string();
    let shown = f.run(&["plan", "flavoured"]);
    assert!(
        shown
            .stdout
            .contains(&format!("and {flavoured} built from {inputs}"))
            && shown.stdout.contains("for flavoured"),
        "{}",
        shown.stdout
    );

    let built = f.run(&["build", "flavoured", "--runtime", "podman"]);
    assert_eq!(built.code, 0, "{}", built.stderr);
    assert!(
        built
            .stderr
            .contains(&format!("building the builder image {flavoured}")),
        "{}",
        built.stderr
    );
    let key = key_of(&with, "flavoured");
    let which = f.store().join(&key).join("tree/share/flavoured/which");
    assert_eq!(std::fs::read_to_string(&which).unwrap(), "extra\n");
    let record: serde_json::Value = serde_json::from_slice(
        &std::fs::read(f.path("store/.images/test-1.0+extra.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(record["inputs"], inputs.as_str(), "{record}");
    assert_eq!(record["reference"], flavoured.as_str(), "{record}");
    let label = podman(&[
        "image",
        "inspect",
        "--format",
        "{{index .Labels \"org.rocforge.image-inputs\"}}",
        &flavoured,
    ]);
    assert_eq!(String::from_utf8_lossy(&label.stdout).trim(), inputs);

    // A second build finds it made; one byte of its file changes the flavoured key alone.
    let again = f.run(&["build", "flavoured", "--runtime", "podman"]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert!(
        !again.stderr.contains("building the builder image"),
        "{}",
        again.stderr
    );
    std::fs::write(
        &containerfile,
        format!("FROM {IMAGE}\nRUN echo extra > /etc/rocforge-flavour\n\n"),
    )
    .unwrap();
    let changed = plan();
    assert_ne!(key_of(&changed, "flavoured"), key);
    for c in ["hipcore", "hipapp", "hipextra"] {
        assert_eq!(key_of(&changed, c), key_of(&before, c), "{c}");
    }

    // `image build --flavour` makes it ahead of a build: labelled with the changed inputs,
    // recorded, and found ready by the build that follows.
    let new_inputs = changed["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["component"] == "flavoured")
        .and_then(|s| s["image"]["built_from"].as_str())
        .unwrap()
        .to_string();
    assert_ne!(new_inputs, inputs);
    let made = f.run(&[
        "image",
        "build",
        "--flavour",
        "extra",
        "--runtime",
        "podman",
    ]);
    assert_eq!(made.code, 0, "{}", made.stderr);
    let (reference, id) = made.stdout.trim().split_once(' ').unwrap();
    assert_eq!(reference, flavoured);
    assert!(
        made.stderr.contains(&format!(
            "recorded as the extra flavour: the recipes built in it key it by what it is made from ({new_inputs})"
        )),
        "{}",
        made.stderr
    );
    let label = podman(&[
        "image",
        "inspect",
        "--format",
        "{{.Id}} {{index .Labels \"org.rocforge.image-inputs\"}}",
        &flavoured,
    ]);
    assert_eq!(
        String::from_utf8_lossy(&label.stdout).trim(),
        format!("{} {new_inputs}", id.trim_start_matches("sha256:"))
    );
    let after = f.run(&["build", "flavoured", "--runtime", "podman"]);
    assert_eq!(after.code, 0, "{}", after.stderr);
    assert!(
        !after.stderr.contains("building the builder image"),
        "{}",
        after.stderr
    );
    assert!(
        f.store()
            .join(key_of(&changed, "flavoured"))
            .join("tree")
            .is_dir()
    );

    // A flavour no recipe names, and one asked for with another kind.
    let typo = f.run(&["image", "build", "--flavour", "extr", "--runtime", "podman"]);
    assert_eq!(typo.code, 1, "{}", typo.stdout);
    assert!(
        typo.stderr.contains(
            "--flavour extr: no recipe of test-1.0 builds in a builder image flavour of that name"
        ) && typo.stderr.contains("did you mean \"extra\"?"),
        "{}",
        typo.stderr
    );
    let both = f.run(&["image", "build", "--flavour", "extra", "--kind", "runtime"]);
    assert_eq!(both.code, 2, "{}", both.stderr);
    assert!(
        both.stderr.contains("cannot be used with"),
        "{}",
        both.stderr
    );
    let _ = podman(&["rmi", &flavoured]);
}
