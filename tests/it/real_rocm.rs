//! Real ROCm, from Debian's archive: Debian's own rocRAND binary against the coverage gate, and
//! rocRAND's library built from Debian's upstream tarball in the debian-6.4 builder image for
//! gfx90c and gfx902, as the line ships it. Needs the
//! Debian mirror and the builder image that `.ci/run` builds (scripts/debian-image.sh); in CI a
//! missing one fails the test.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::readme;
use common::*;

const BUILDER: &str = "localhost/rocforge/builder:debian-6.4";
/// Debian sid's librocrand1 (rocRAND 6.4.3, built by Debian for its 11 targets), pinned by the
/// sha256 of sid's Packages index.
const LIBROCRAND_DEB: &str =
    "http://deb.debian.org/debian/pool/main/r/rocrand/librocrand1_6.4.3-1_amd64.deb";
const LIBROCRAND_SHA256: &str = "94cd9fe750e99453154384affbe25f97021d0891a459fe665e5c36e9875384e8";

fn mirror_answers() -> bool {
    Command::new("curl")
        .args(["-fsSI", "--max-time", "20", LIBROCRAND_DEB])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Debian's binary package at `url`, downloaded, checked against `sha256` and unpacked into
/// `<dir>/root`; None (the test skipped, or failed in CI) without the mirror or dpkg-deb.
fn debian_package(url: &str, sha256: &str, only: &[&str]) -> Option<tempfile::TempDir> {
    if !require("the Debian mirror (deb.debian.org)", mirror_answers())
        || !require("dpkg-deb", which("dpkg-deb"))
    {
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let deb = dir.path().join("package.deb");
    let ok = Command::new("curl")
        .args(["-fsS", "--max-time", "900", "-o"])
        .arg(&deb)
        .arg(url)
        .status()
        .unwrap();
    assert!(ok.success(), "{url}");
    assert_eq!(sha256_file(&deb), sha256, "{url}");
    // Only the members the test reads (`only`: tar wildcards; none: all of it). Debian's
    // rocBLAS unpacks to 4 GB for its 11 targets, which a CI machine's disk may not have
    // beside the other tests.
    let root = dir.path().join("root");
    std::fs::create_dir_all(&root).unwrap();
    let script = r#"dpkg-deb --fsys-tarfile "$1" | tar -x -C "$2" --wildcards "${@:3}""#;
    let ok = Command::new("bash")
        .args(["-o", "pipefail", "-c", script, "unpack"])
        .arg(&deb)
        .arg(&root)
        .args(if only.is_empty() { &["*"][..] } else { only })
        .status()
        .unwrap();
    assert!(ok.success(), "unpacking {url}");
    std::fs::remove_file(&deb).unwrap();
    Some(dir)
}

#[test]
fn debians_own_rocrand_is_not_coverage_for_gfx90c() {
    let Some(dir) = debian_package(LIBROCRAND_DEB, LIBROCRAND_SHA256, &[]) else {
        return;
    };
    let lib = "root/usr/lib/x86_64-linux-gnu/librocrand.so.1";
    // Debian builds gfx900 code, which a Vega iGPU runs only when it pretends to be one.
    let o = rocforge(dir.path(), &["inspect", "--against", "gfx90c,gfx902", lib]);
    assert_eq!(o.code, 1, "{}", o.stdout);
    assert!(
        o.stdout.contains(
            "gfx90c: gfx900 code only: runs on gfx90c only under HSA_OVERRIDE_GFX_VERSION=9.0.0"
        ),
        "{}",
        o.stdout
    );
    // Its own targets it does carry.
    let o = rocforge(dir.path(), &["inspect", "--against", "gfx900,gfx906", lib]);
    assert_eq!(o.code, 0, "{}", o.stdout);
}

/// Debian sid's librocblas4 (rocBLAS 6.4.4 with its Tensile libraries, built by Debian for its
/// 11 targets), pinned by the sha256 of sid's Packages index.
const LIBROCBLAS_DEB: &str =
    "http://deb.debian.org/debian/pool/main/r/rocblas/librocblas4_6.4.4-4_amd64.deb";
const LIBROCBLAS_SHA256: &str = "05613a07d3fba2feaa8b81a86a22bc142dd4fb6630c44c416883a33bf22a1cdb";

/// Debian's real Tensile libraries, read through their catalogs: gfx900 has its own tuned
/// solutions; gfx90c has no catalog of its own and would run gfx900's only under a spoof; and
/// gfx1010's catalog leads only to Tensile's fallback kernels, which its code objects alone
/// would not show.
#[test]
fn debians_rocblas_tensile_catalogs_say_what_each_target_gets() {
    let Some(dir) = debian_package(
        LIBROCBLAS_DEB,
        LIBROCBLAS_SHA256,
        // Every catalog, and the kernels of the targets asked about (400 MB, not 4 GB).
        &["*.dat", "*gfx900*", "*gfx1010*"],
    ) else {
        return;
    };
    let library = "root/usr/lib/x86_64-linux-gnu/rocblas/4.4.1/library";
    let o = rocforge(
        dir.path(),
        &[
            "inspect",
            "--against",
            "gfx900,gfx90c,gfx1010",
            "--format",
            "json",
            library,
        ],
    );
    assert_eq!(o.code, 1, "{}", o.stdout);
    let v: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    let cell = |target: &str| {
        v["rows"][0]["targets"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["target"] == target)
            .unwrap()
            .clone()
    };
    assert_eq!(cell("gfx900")["status"], "present", "{}", o.stdout);
    assert_eq!(cell("gfx90c")["status"], "only-compatible", "{}", o.stdout);
    assert_eq!(cell("gfx90c")["nearest"], "gfx900", "{}", o.stdout);
    assert_eq!(cell("gfx1010")["status"], "incomplete", "{}", o.stdout);
    assert!(
        cell("gfx1010")["why"]
            .as_str()
            .unwrap()
            .contains("TensileLibrary_lazy_gfx1010.dat: only Tensile's fallback kernels"),
        "{}",
        o.stdout
    );
}

fn image_present(image: &str) -> bool {
    Command::new("podman")
        .args(["image", "exists", image])
        .env("CONTAINERS_CONF", containers_conf())
        .status()
        .is_ok_and(|s| s.success())
}

/// What a real build of the line needs: podman with the builder image, and the Debian mirror.
fn can_build() -> bool {
    require(
        &format!("podman with {BUILDER} (scripts/debian-image.sh)"),
        which("podman") && image_present(BUILDER),
    ) && require("the Debian mirror (deb.debian.org)", mirror_answers())
}

#[test]
fn rocrand_from_debians_archive_builds_for_gfx90c_and_gfx902() {
    if !can_build() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // The line's rocRAND exactly as the built-in catalog ships it (the library; this line
    // builds no test client).
    // ROCFORGE_TEST_CACHE: a source cache (and ccache) to reuse across runs on a developer's
    // machine; CI starts from nothing.
    // ROCFORGE_TEST_STORE: a store that already holds this build (the test then reuses it).
    let cache = std::env::var_os("ROCFORGE_TEST_CACHE")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| d.join("cache"));
    let store = std::env::var_os("ROCFORGE_TEST_STORE")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| d.join("store"));
    let env: [(&str, &Path); 3] = [
        ("CONTAINERS_CONF", &containers_conf()),
        ("ROCFORGE_STORE", &store),
        ("ROCFORGE_CACHE", &cache),
    ];
    // README's "What works today" lines, run as written (the store and cache are the test's,
    // through ROCFORGE_STORE and ROCFORGE_CACHE; HOME is the test's directory).
    let lines = readme::block("What works today", 0);
    assert!(
        lines.len() >= 5 && lines[0].starts_with("rocforge build rocm-smoke "),
        "README's first block: {lines:#?}"
    );
    let mut said = Vec::new();
    for line in &lines {
        let o = readme::run(d, &env, line);
        assert_eq!(o.code, 0, "README: {line}\n{}{}", o.stdout, o.stderr);
        said.push(o);
    }
    // The smoke test ran in the runtime image: rocRAND loaded and computed (the CPU half), then
    // the run said there is no GPU here and exited 3.
    let smoke = lines
        .iter()
        .position(|l| l.starts_with("podman run ") && l.contains("rocm-smoke"))
        .expect("README runs the smoke test in the image");
    let said_smoke = format!("{}{}", said[smoke].stdout, said[smoke].stderr);
    assert!(
        said_smoke.contains("no GPU")
            && said_smoke.contains("philox4x32-10 on the CPU: known answer")
            && said_smoke.contains("exit 3"),
        "{said_smoke}"
    );
    let inspect = lines
        .iter()
        .position(|l| l.starts_with("rocforge inspect --against gfx90c,gfx902"))
        .expect("README inspects the build");
    assert!(
        said[inspect]
            .stdout
            .contains("0 missing, 0 with another target's code only"),
        "{}",
        said[inspect].stdout
    );
    let tree = rocrand_tree(d, &store).display().to_string();
    assert!(
        Path::new(&tree).join("lib/librocrand.so").exists(),
        "{tree}"
    );
    // The code objects are the two targets' own.
    let o = rocforge(d, &["--format", "json", "inspect", &format!("{tree}/lib")]);
    assert_eq!(o.code, 0);
    for t in ["gfx90c", "gfx902"] {
        assert!(o.stdout.contains(&format!("amdgcn-amd-amdhsa--{t}")), "{t}");
    }
    assert!(!o.stdout.contains("--gfx900\""), "no gfx900 code");
    assert!(
        d.join(".config/rocforge/keys/rocforge.pub").is_file(),
        "README's key generate"
    );

    // Installed by rocforge from README's signed index into a fresh prefix of a sid container
    // (the libraries need sid's glibc), where a program built against the installed rocRAND
    // links and starts, and says there is no GPU.
    std::fs::write(d.join("prog.cpp"), PROGRAM).unwrap();
    let script = "set -e\n\
        rocforge install rocrand --release debian-6.4 --arch gfx90c,gfx902 --from /w/dist/index.json \
          --prefix /opt/fresh --key /w/.config/rocforge/keys/rocforge.pub\n\
        rocforge inspect --against gfx90c,gfx902 /opt/fresh\n\
        hipcc -o /tmp/prog /w/prog.cpp -I/opt/fresh/include -L/opt/fresh/lib -lrocrand\n\
        set +e\n\
        LD_LIBRARY_PATH=/opt/fresh/lib /tmp/prog\n\
        echo \"exit=$?\"\n";
    let out = Command::new("podman")
        .env("CONTAINERS_CONF", containers_conf())
        .args(["run", "--rm", "--network=none", "-v"])
        .arg(format!(
            "{}:/usr/local/bin/rocforge:ro",
            env!("CARGO_BIN_EXE_rocforge")
        ))
        .arg("-v")
        .arg(format!("{}:/w:ro", d.display()))
        .args([BUILDER, "bash", "-c", script])
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(text.contains("index signature: good"), "{text}");
    assert!(
        text.contains("0 missing, 0 with another target's code only"),
        "{text}"
    );
    assert!(
        text.contains("hipGetDeviceCount:"),
        "the program ran: {text}"
    );
    assert!(text.contains("exit=3"), "no GPU here: {text}");

    let Some(reg) = registry() else {
        return;
    };
    let runtime_tag = images_of_the_build(d, &env, &reg);
    readme_quick_start_after_the_first_block(d, &env);
    readme_quick_start_pipelines(d, &env, &reg);
    readme_install_a_release(d, &env, &reg);
    rocrand_stopped_at_its_time_limit_finishes_on_an_empty_machine(d, &store, &reg);
    let _ = podman(&["rmi", "-f", &runtime_tag]);
}

/// The steps a message names as done: `… (N ninja steps done)`.
fn ninja_steps_done(text: &str) -> usize {
    let end = text
        .find(" ninja steps done)")
        .unwrap_or_else(|| panic!("no ninja step count: {text}"));
    let start = text[..end].rfind('(').unwrap() + 1;
    text[start..end].parse().unwrap()
}

/// A field of a stored entry's meta.json.
fn stored_meta(tree: &Path, field: &str) -> serde_json::Value {
    let meta = std::fs::read(tree.parent().unwrap().join("meta.json")).unwrap();
    serde_json::from_slice::<serde_json::Value>(&meta).unwrap()[field].clone()
}

/// The checkpoint round trip on a real component: rocRAND from Debian's tarball, on a machine
/// with an empty store and compiler cache, stops at a time limit in the middle of its device
/// compiles and pushes a signed checkpoint to the registry. A second machine, also empty
/// (store, source cache, ccache, build directories), pulls it, continues without recompiling
/// the finished steps, and stores the same key, files and coverage as the uninterrupted build
/// in `store`.
fn rocrand_stopped_at_its_time_limit_finishes_on_an_empty_machine(
    d: &Path,
    store: &Path,
    reg: &Registry,
) {
    let whole = rocrand_tree(d, store);
    let cache = format!("oci://{}/rocforge/checkpoints", reg.host());
    let key_file = d.join(".config/rocforge/keys/rocforge.key");
    let public = std::fs::read_to_string(d.join(".config/rocforge/keys/rocforge.pub")).unwrap();
    let trusting = d.join("checkpoint-trust.toml");
    std::fs::write(
        &trusting,
        format!("[trust]\nkeys = [\"{}\"]\n", public.lines().nth(1).unwrap()),
    )
    .unwrap();
    let conf = containers_conf();
    let machine = |name: &str| {
        let m = d.join(name);
        let _ = std::fs::remove_dir_all(&m);
        std::fs::create_dir_all(&m).unwrap();
        (m.join("store"), m.join("cache"))
    };
    let build = |store: &Path, cache_dir: &Path, extra: &[&str]| {
        let env: [(&str, &Path); 4] = [
            ("CONTAINERS_CONF", &conf),
            ("ROCFORGE_STORE", store),
            ("ROCFORGE_CACHE", cache_dir),
            ("ROCFORGE_CONFIG", &trusting),
        ];
        let mut args = vec![
            "--release",
            "debian-6.4",
            "build",
            "rocrand",
            "--arch",
            "gfx90c,gfx902",
            "--cache",
            &cache,
        ];
        args.extend_from_slice(extra);
        let started = std::time::Instant::now();
        let o = rocforge_env(d, &env, &args);
        (o, started.elapsed())
    };

    // Machine A: cold. 150 s covers the download, configure and a few of rocRAND's 47 steps,
    // not all of them (5 min here from a cold compiler cache).
    let (a_store, a_cache) = machine("machine-a");
    let key = key_file.display().to_string();
    let (stopped, a_took) = build(
        &a_store,
        &a_cache,
        // The drain starts 90 s in, well after configure: the compiles then under way finish
        // into the checkpoint.
        &[
            "--cache-key",
            &key,
            "--time-limit",
            "150s",
            "--drain",
            "60s",
        ],
    );
    assert_eq!(stopped.code, 75, "{}", stopped.stderr);
    let pushed = stopped
        .stderr
        .lines()
        .find(|l| l.contains("rocrand: checkpoint pushed to"))
        .unwrap_or_else(|| panic!("no checkpoint pushed: {}", stopped.stderr));
    let done = ninja_steps_done(pushed);
    assert!(
        done > 0 && done < 47,
        "stopped mid-build, not before or after it: {pushed}"
    );
    let _ = std::fs::remove_dir_all(d.join("machine-a"));

    // Machine B: nothing of A's, only the registry.
    let (b_store, b_cache) = machine("machine-b");
    let (resumed, b_took) = build(&b_store, &b_cache, &[]);
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    assert!(
        resumed
            .stderr
            .contains("rocrand: pulled the checkpoint checkpoint-")
            && resumed.stderr.contains("(signed by"),
        "{}",
        resumed.stderr
    );
    let continuing = resumed
        .stderr
        .lines()
        .find(|l| l.contains("rocrand: continuing the build that stopped in"))
        .unwrap_or_else(|| panic!("not continued: {}", resumed.stderr));
    assert_eq!(ninja_steps_done(continuing), done, "{continuing}");
    // Ninja ran only what A had not finished: the restored objects were not out of date
    // against the source machine B unpacked again.
    let log = std::fs::read_to_string(
        rocrand_tree(d, &b_store)
            .parent()
            .unwrap()
            .join("build.log"),
    )
    .unwrap();
    let ran = log
        .lines()
        .filter(|l| l.starts_with('[') && l.contains('/') && l.contains("] "))
        .filter(|l| l.contains("Building") || l.contains("Linking"))
        .count();
    assert!(
        ran <= 47 - done,
        "machine B compiled {ran} steps, A had done {done} of 47:\n{log}"
    );

    let there = rocrand_tree(d, &b_store);
    assert_eq!(
        whole.parent().unwrap().file_name(),
        there.parent().unwrap().file_name(),
        "the same content key"
    );
    assert_eq!(
        tree_contents(&whole),
        tree_contents(&there),
        "the same files"
    );
    assert_eq!(
        stored_meta(&whole, "coverage"),
        stored_meta(&there, "coverage"),
        "the same coverage"
    );
    let uninterrupted = stored_meta(&whole, "duration_secs").as_f64().unwrap_or(0.0);
    eprintln!(
        "checkpoint of rocRAND: stopped after {:.0} s with {done} of 47 steps, resumed in {:.0} s; \
         {:.0} s in all, against {uninterrupted:.0} s for the uninterrupted build in the store \
         (ratio {:.2}; a fair one only where that build started from an empty compiler cache, \
         as in CI)",
        a_took.as_secs_f64(),
        b_took.as_secs_f64(),
        (a_took + b_took).as_secs_f64(),
        (a_took + b_took).as_secs_f64() / uninterrupted.max(1.0),
    );
    let _ = std::fs::remove_dir_all(d.join("machine-b"));
}

/// README's Quick start block for after "What works today", run as written where that block
/// left the user: rocRAND stored, a key made, `dist` written, the runtime image loaded. Nothing
/// is built again; the install runs in the runtime image into a bind-mounted prefix, and `dev`
/// checks out the exported catalog's rocRAND.
fn readme_quick_start_after_the_first_block(d: &Path, env: &[(&str, &Path)]) {
    let export = readme::block("Quick start", 0)
        .into_iter()
        .find(|l| l.starts_with("rocforge catalog export "))
        .expect("the Quick start exports the catalog");
    let o = readme::run(d, env, &export);
    assert_eq!(o.code, 0, "README: {export}\n{}{}", o.stdout, o.stderr);
    let lines = readme::block("Quick start", 1);
    assert!(lines.len() >= 7, "{lines:#?}");
    let mut said = Vec::new();
    for line in &lines {
        let o = readme::run(d, env, line);
        assert_eq!(o.code, 0, "README: {line}\n{}{}", o.stdout, o.stderr);
        said.push((line.as_str(), format!("{}{}", o.stdout, o.stderr)));
    }
    let by = |start: &str| -> &str {
        &said
            .iter()
            .find(|(l, _)| l.starts_with(start))
            .unwrap_or_else(|| panic!("README's Quick start has no `{start}`"))
            .1
    };
    assert!(
        by("rocforge build rocrand").contains("cached"),
        "{}",
        by("rocforge build rocrand")
    );
    assert!(
        by("rocforge inspect --against gfx90c ").contains("0 missing"),
        "{}",
        by("rocforge inspect")
    );
    assert!(by("rocforge package rocrand").contains("dist/index.json"));
    let install = by("mkdir -p ~/rocm && podman run");
    assert!(install.contains("index signature: good"), "{install}");
    assert!(
        d.join("rocm/debian-6.4/lib/librocrand.so").exists(),
        "installed into ~/rocm/debian-6.4: {install}"
    );
    assert!(
        d.join("rocforge-dev/rocrand/.git").exists(),
        "dev checked out rocRAND: {}",
        by("rocforge --recipes ./my-catalog/recipes dev")
    );
}

/// README's pipeline block, run as written against stand-ins: a registry on 127.0.0.1 in place
/// of ghcr.io, a GitHub-like server holding the release OWNER/REPO@TAG (ROCFORGE_GITHUB_API).
/// The stored rocRAND is pushed to the cache; "another machine" (an empty store and cache, a
/// config trusting the key) pulls it, builds nothing, and gets the same key and files.
fn readme_quick_start_pipelines(d: &Path, env: &[(&str, &Path)], reg: &Registry) {
    let gh = common::github::FakeGitHub::start_release("OWNER", "REPO", "TAG");
    let api = std::path::PathBuf::from(gh.url());
    let token = std::path::PathBuf::from("ghp_test");
    let public = std::fs::read_to_string(d.join(".config/rocforge/keys/rocforge.pub")).unwrap();
    let key = public.lines().nth(1).expect("a minisign public key line");
    let other = d.join("another-machine");
    std::fs::create_dir_all(&other).unwrap();
    let trusting = other.join("config.toml");
    std::fs::write(&trusting, format!("[trust]\nkeys = [\"{key}\"]\n")).unwrap();
    let (other_store, other_cache) = (other.join("store"), other.join("cache"));
    let lines = readme::block("Quick start", 2);
    assert!(lines.len() >= 4, "{lines:#?}");
    let cache_builds: Vec<usize> = (0..lines.len())
        .filter(|&i| {
            lines[i].starts_with("rocforge build rocrand ") && lines[i].contains("--cache ")
        })
        .collect();
    assert_eq!(cache_builds.len(), 2, "{lines:#?}");
    let mut said = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let line = line.replace("ghcr.io", &reg.host());
        let mut env = env.to_vec();
        env.push(("ROCFORGE_GITHUB_API", &api));
        env.push(("GITHUB_TOKEN", &token));
        if i == cache_builds[1] {
            env.push(("ROCFORGE_STORE", &other_store));
            env.push(("ROCFORGE_CACHE", &other_cache));
            env.push(("ROCFORGE_CONFIG", &trusting));
        }
        let o = readme::run(d, &env, &line);
        assert_eq!(o.code, 0, "README: {line}\n{}{}", o.stdout, o.stderr);
        said.push(format!("{}{}", o.stdout, o.stderr));
    }
    let dry = &said[0];
    assert!(dry.contains("index.json"), "{dry}");
    let names: Vec<String> = gh
        .state
        .lock()
        .unwrap()
        .assets
        .iter()
        .map(|a| a.name.clone())
        .collect();
    assert!(
        names.iter().any(|n| n == "index.json")
            && names
                .iter()
                .any(|n| n.starts_with("rocrand-") && n.ends_with(".tar.zst")),
        "released to OWNER/REPO@TAG: {names:?}"
    );
    let pushed = &said[cache_builds[0]];
    assert!(pushed.contains("rocrand: pushed to"), "{pushed}");
    let pulled = &said[cache_builds[1]];
    assert!(pulled.contains("rocrand: pulled from"), "{pulled}");
    assert!(
        !pulled.contains("built in"),
        "nothing built on the other machine: {pulled}"
    );
    let store = env.iter().find(|(k, _)| *k == "ROCFORGE_STORE").unwrap().1;
    let (here, there) = (rocrand_tree(d, store), rocrand_tree(d, &other_store));
    assert_eq!(
        here.parent().unwrap().file_name(),
        there.parent().unwrap().file_name(),
        "the same key"
    );
    assert_eq!(
        tree_contents(&here),
        tree_contents(&there),
        "the same files"
    );
}

/// The tree of rocRAND for gfx90c,gfx902 in `store`, as `rocforge store path` names it.
fn rocrand_tree(d: &Path, store: &Path) -> std::path::PathBuf {
    let o = rocforge_env(
        d,
        &[("ROCFORGE_STORE", store)],
        &[
            "--release",
            "debian-6.4",
            "store",
            "path",
            "rocrand",
            "--arch",
            "gfx90c,gfx902",
        ],
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    std::path::PathBuf::from(o.stdout.trim())
}

/// README's "Install a release" block, run word for word with the two addresses swapped for a
/// release published here: the maintainer's side publishes rocRAND and rocm-smoke with
/// scripts/publish-line.sh to a GitHub-like server (the runtime image is in the registry from
/// [`images_of_the_build`]); the user's side points the index at it, pulls the image, installs
/// into a bind-mounted prefix from inside it and runs the smoke test, which finds no GPU, runs
/// its CPU halves and exits 3. The release key in `[trust] keys` stands for the project's key.
fn readme_install_a_release(d: &Path, env: &[(&str, &Path)], reg: &Registry) {
    let o = rocforge_env(
        d,
        env,
        &[
            "--release",
            "debian-6.4",
            "build",
            "rocm-smoke",
            "--arch",
            "gfx90c,gfx902",
        ],
    );
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    let gh = common::github::FakeGitHub::start_release("rocforge", "rocforge", "debian-6.4-1");
    let api = gh.url();
    let publish = format!(
        "GITHUB_TOKEN=ghp_test ROCFORGE_GITHUB_API={api} bash {}/scripts/publish-line.sh \
         --arch gfx90c,gfx902 --out release --github github://rocforge/rocforge@debian-6.4-1 \
         -- rocrand rocm-smoke",
        manifest().display()
    );
    let o = readme::run(d, env, &publish);
    assert_eq!(o.code, 0, "publish-line.sh: {}{}", o.stdout, o.stderr);

    let keys = d.join(".config/rocforge");
    let public = std::fs::read_to_string(keys.join("keys/rocforge.pub")).unwrap();
    let key = public.lines().nth(1).expect("a minisign public key line");
    std::fs::write(
        keys.join("config.toml"),
        format!("[trust]\nkeys = [\"{key}\"]\n"),
    )
    .unwrap();
    let registries = d.join("registries.conf");
    std::fs::write(
        &registries,
        format!(
            "[[registry]]\nlocation = \"{}\"\ninsecure = true\n",
            reg.host()
        ),
    )
    .unwrap();
    let lines = readme::block("Install a release", 0);
    assert!(
        lines
            .iter()
            .any(|l| l.contains("rocforge install rocm-smoke")),
        "README's Install a release block: {lines:#?}"
    );
    let script = lines
        .iter()
        .map(|l| {
            l.replace("https://github.com", &api)
                .replace("ghcr.io", &reg.host())
        })
        .collect::<Vec<_>>()
        .join("\n");
    let mut env = env.to_vec();
    env.push(("CONTAINERS_REGISTRIES_CONF", &registries));
    let o = readme::run(d, &env, &script);
    let text = format!("{}{}", o.stdout, o.stderr);
    eprintln!("README's Install a release block:\n{text}");
    assert!(text.contains("index signature: good"), "{text}");
    // rocRAND is there already: the Quick start installed it into the same prefix.
    assert!(
        text.contains("rocrand              already installed")
            && text.contains("rocm-smoke carries native code for its targets"),
        "{text}"
    );
    assert!(
        text.contains("rocm-smoke 1.0.0"),
        "the smoke test ran: {text}"
    );
    assert!(text.contains("no GPU: hipGetDeviceCount"), "{text}");
    assert!(
        text.contains("cpu-only random   rocRAND") && text.contains("cpu-only kernel   HIP"),
        "its CPU halves passed: {text}"
    );
    assert_eq!(o.code, 3, "no GPU here, the CPU halves passed: {text}");
    // Installed into the bind-mounted prefix, with nothing of the staging left.
    let prefix = d.join("rocm/debian-6.4");
    for f in [
        "bin/rocm-smoke",
        "lib/librocrand.so",
        ".rocforge/receipts/rocm-smoke.json",
    ] {
        assert!(prefix.join(f).exists(), "{f}");
    }
}

/// The reproducibility promise (docs/reproducibility.md) on a real component: rocPRIM of the
/// debian-6.4 line, built twice from cold caches into separate stores, packages to the same
/// tarball byte for byte, and `verify --rebuild` of the first, from a third cold store and
/// cache, says it is identical.
#[test]
fn rocprim_built_twice_from_cold_caches_packages_to_the_same_bytes() {
    if !can_build() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let conf = containers_conf();
    let mut tarballs = Vec::new();
    for run in ["a", "b"] {
        let (store, cache) = (d.join(run).join("store"), d.join(run).join("cache"));
        let env: [(&str, &Path); 3] = [
            ("CONTAINERS_CONF", &conf),
            ("ROCFORGE_STORE", &store),
            ("ROCFORGE_CACHE", &cache),
        ];
        let out = format!("{run}/dist");
        let o = rocforge_env(
            d,
            &env,
            &[
                "--release",
                "debian-6.4",
                "build",
                "rocprim",
                "--arch",
                "gfx90c,gfx902",
                "--runtime",
                "podman",
            ],
        );
        assert_eq!(o.code, 0, "{}", o.stderr);
        let o = rocforge_env(
            d,
            &env,
            &[
                "--release",
                "debian-6.4",
                "package",
                "rocprim",
                "--arch",
                "gfx90c,gfx902",
                "--runtime",
                "podman",
                "--out",
                &out,
            ],
        );
        assert_eq!(o.code, 0, "{}", o.stderr);
        let found: Vec<_> = std::fs::read_dir(d.join(&out))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.to_string_lossy().ends_with(".tar.zst"))
            .collect();
        assert_eq!(found.len(), 1, "{found:?}");
        tarballs.push(found[0].clone());
    }
    assert_eq!(
        tarballs[0].file_name(),
        tarballs[1].file_name(),
        "the same content key"
    );
    let (a, b) = (
        std::fs::read(&tarballs[0]).unwrap(),
        std::fs::read(&tarballs[1]).unwrap(),
    );
    assert!(a.len() > 100_000, "rocPRIM's headers: {} bytes", a.len());
    assert!(a == b, "two cold builds gave different tarballs");

    let (store, cache) = (d.join("c/store"), d.join("c/cache"));
    let env: [(&str, &Path); 3] = [
        ("CONTAINERS_CONF", &conf),
        ("ROCFORGE_STORE", &store),
        ("ROCFORGE_CACHE", &cache),
    ];
    let o = rocforge_env(
        d,
        &env,
        &[
            "--format",
            "json",
            "verify",
            tarballs[0].to_str().unwrap(),
            "--rebuild",
        ],
    );
    let v: serde_json::Value =
        serde_json::from_str(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}{}", o.stdout, o.stderr));
    assert_eq!(o.code, 0, "{v}\n{}", o.stderr);
    assert_eq!(v["result"], "identical", "{v}");
}

fn podman(args: &[&str]) -> std::process::Output {
    Command::new("podman")
        .env("CONTAINERS_CONF", containers_conf())
        .args(args)
        .output()
        .unwrap()
}

/// The images a gfx90c owner runs, made of the build above (not built again): the stack on the
/// line's runtime base (Debian's HIP runtime, no compiler) and on its devel base, both made
/// here from Debian's packages by `image create --kind` and read from podman's storage. A
/// program compiled in the devel image links, starts and says there is no GPU (exit 3) in the
/// runtime image, where every library the stack links resolves and `inspect --against` passes.
/// Created twice, pushed to a registry on 127.0.0.1, the runtime image has one digest. A base
/// without HIP's runtime is refused.
fn images_of_the_build(d: &Path, env: &[(&str, &Path)], reg: &Registry) -> String {
    let create = |extra: &[&str]| {
        let mut args = vec![
            "--release",
            "debian-6.4",
            "--format",
            "json",
            "image",
            "create",
            "rocrand",
            "--arch",
            "gfx90c,gfx902",
            "--runtime",
            "podman",
        ];
        args.extend_from_slice(extra);
        rocforge_env(d, env, &args)
    };
    let json = |o: &Out| -> serde_json::Value {
        assert_eq!(o.code, 0, "{}", o.stderr);
        serde_json::from_str(&o.stdout).unwrap()
    };
    let runtime = json(&create(&["--kind", "runtime", "--load", "podman"]));
    let runtime_tag = runtime["tag"].as_str().unwrap().to_string();
    assert_eq!(
        runtime_tag,
        "localhost/rocforge/rocm:debian-6.4-runtime-gfx902-gfx90c"
    );
    assert_eq!(
        runtime["base"],
        "containers-storage:localhost/rocforge/runtime:debian-6.4"
    );
    assert_eq!(
        runtime["hip_runtime"], "label org.rocforge.hip-runtime=libamdhip64.so.6 6.4.3-5",
        "{runtime}"
    );
    // Again, pushed: the same digest, and the registry's tag names it.
    let pushed_tag = format!(
        "{}/rocforge/rocm:debian-6.4-runtime-gfx902-gfx90c",
        reg.host()
    );
    let again = json(&create(&[
        "--kind",
        "runtime",
        "--push",
        "--tag",
        &pushed_tag,
    ]));
    assert_eq!(again["digest"], runtime["digest"]);
    assert_eq!(
        rocforge::oci::resolve_digest(&reqwest::blocking::Client::new(), &pushed_tag).unwrap(),
        runtime["digest"].as_str().unwrap()
    );
    // README's `image create … --kind devel --load podman` made it under its default tag.
    let devel_tag = "localhost/rocforge/rocm:debian-6.4-devel-gfx902-gfx90c".to_string();
    assert!(
        podman(&["image", "exists", &devel_tag]).status.success(),
        "README's devel image {devel_tag}"
    );

    // README's block for a GPU owner, run as written with what needs a GPU or a terminal
    // left out (this machine has no /dev/kfd, and a test has no tty): compiled in the devel
    // image in $PWD, run in the runtime image by podman, then by docker (README: `--load
    // docker` for docker). The program links, starts and says there is no GPU: exit 3.
    let work = d.join("image-prog");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(work.join("prog.cpp"), PROGRAM).unwrap();
    let no_gpu = |line: &str| {
        let mut l = line.replace(" -it ", " ");
        for flag in [
            "--device /dev/kfd ",
            "--device /dev/dri ",
            "--group-add keep-groups ",
            "--group-add video ",
            "--group-add render ",
        ] {
            l = l.replace(flag, "");
        }
        l
    };
    let docker_host = std::path::PathBuf::from("unix:///run/rocforge-test/docker.sock");
    let mut denv = env.to_vec();
    denv.push(("DOCKER_HOST", &docker_host));
    let docker_ready = which("docker") && readme::run(&work, &denv, "docker version").code == 0;
    let device_block = readme::block("What works today", 1);
    assert_eq!(device_block.len(), 3, "{device_block:#?}");
    for line in &device_block {
        let line = no_gpu(line);
        if line.starts_with("docker ") {
            if !require(
                "a docker daemon at /run/rocforge-test/docker.sock",
                docker_ready,
            ) {
                continue;
            }
            let load = readme::block("What works today", 0)
                .into_iter()
                .find(|l| l.contains("--kind runtime --load podman"))
                .expect("README makes the runtime image")
                .replace("--load podman", "--load docker");
            let o = readme::run(d, &denv, &load);
            assert_eq!(o.code, 0, "{load}\n{}{}", o.stdout, o.stderr);
        }
        let o = readme::run(&work, &denv, &line);
        let text = format!("{}{}", o.stdout, o.stderr);
        if line.contains("hipcc") {
            assert_eq!(o.code, 0, "README: {line}\n{text}");
        } else {
            assert!(
                text.contains("hipGetDeviceCount:"),
                "README: {line}: the program ran: {text}"
            );
            assert_eq!(o.code, 3, "README: {line}: no GPU here: {text}");
        }
    }
    if docker_ready {
        let _ = readme::run(
            &work,
            &denv,
            "docker rmi -f localhost/rocforge/rocm:debian-6.4-runtime-gfx902-gfx90c",
        );
    }
    // Run in the runtime image, with no compiler there.
    let script = "set -e\n\
        if command -v hipcc || command -v clang-21 || command -v c++; then echo has-a-compiler; fi\n\
        ldd /opt/rocm/lib/librocrand.so /w/prog | grep 'not found' || echo all-resolved\n\
        rocforge inspect --against gfx90c,gfx902 /opt/rocm\n\
        set +e\n\
        /w/prog\n\
        echo \"exit=$?\"\n";
    let o = podman(&[
        "run",
        "--rm",
        "--network=none",
        "-v",
        &format!(
            "{}:/usr/local/bin/rocforge:ro",
            env!("CARGO_BIN_EXE_rocforge")
        ),
        "-v",
        &format!("{}:/w:ro", work.display()),
        &runtime_tag,
        "bash",
        "-c",
        script,
    ]);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success(), "{text}");
    assert!(!text.contains("has-a-compiler"), "{text}");
    assert!(text.contains("all-resolved"), "{text}");
    assert!(
        text.contains("0 missing, 0 with another target's code only"),
        "{text}"
    );
    assert!(
        text.contains("hipGetDeviceCount:"),
        "the program ran: {text}"
    );
    assert!(text.contains("exit=3"), "no GPU here: {text}");

    // The line's debootstrap base has no HIP runtime: refused, naming it, before anything is
    // loaded.
    let o = create(&[
        "--base",
        "containers-storage:localhost/rocforge/debootstrap:sid",
        "--tag",
        "localhost/rocforge-test/no-hip:1",
        "--load",
        "podman",
    ]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(
        o.stderr.contains(
            "base image containers-storage:localhost/rocforge/debootstrap:sid has no HIP runtime (libamdhip64.so.6), which rocrand of the stack needs"
        ),
        "{}",
        o.stderr
    );
    assert!(o.stderr.contains("--kind runtime"), "{}", o.stderr);
    assert!(
        !podman(&["image", "exists", "localhost/rocforge-test/no-hip:1"])
            .status
            .success()
    );
    let _ = podman(&["rmi", "-f", &devel_tag]);
    runtime_tag
}

/// Links rocRAND and HIP, then asks for a device: on a machine without an AMD GPU it reports
/// none and exits 3; a loader or link failure would exit otherwise (127, or no output).
const PROGRAM: &str = r#"#include <cstdio>
#include <hip/hip_runtime.h>
#include <rocrand/rocrand.h>

int main() {
    int version = 0;
    rocrand_get_version(&version);
    std::printf("rocRAND %d\n", version);
    int n = 0;
    hipError_t e = hipGetDeviceCount(&n);
    std::printf("hipGetDeviceCount: %s, %d device(s)\n", hipGetErrorString(e), n);
    if (e != hipSuccess || n == 0) {
        return 3;
    }
    rocrand_generator g;
    return rocrand_create_generator(&g, ROCRAND_RNG_PSEUDO_DEFAULT) == ROCRAND_STATUS_SUCCESS ? 0 : 1;
}
"#;

/// hipSOLVER's run-time loader of rocSPARSE needs rocSPARSE's headers, and the image carries
/// them alone: a Debian rocSPARSE library or CMake package in the image could be found in
/// place of the one the line builds.
#[test]
fn the_builder_image_has_rocsparses_headers_and_not_debians_rocsparse() {
    if !require(
        &format!("podman with {BUILDER} (scripts/debian-image.sh)"),
        which("podman") && image_present(BUILDER),
    ) {
        return;
    }
    let o = Command::new("podman")
        .env("CONTAINERS_CONF", containers_conf())
        .args([
            "run",
            "--rm",
            "--network=none",
            BUILDER,
            "sh",
            "-c",
            "grep -h '#define ROCSPARSE_VERSION_M' /usr/include/rocsparse/rocsparse-version.h; \
             find / -xdev \\( -name 'librocsparse*' -o -name 'rocsparse-config*.cmake' \\) -print",
        ])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let lines: Vec<String> = out
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    assert_eq!(
        lines,
        [
            "#define ROCSPARSE_VERSION_MAJOR 3",
            "#define ROCSPARSE_VERSION_MINOR 4",
        ],
        "rocSPARSE 3.4 (6.4.3) headers and no library or CMake package"
    );
}

/// rocm-examples in the default line: its Applications/monte_carlo_pi needs hipRAND, whose tarball
/// Debian's mirror does not serve, so the line takes hipRAND from its git repository, which a
/// machine without GitHub maps to a snapshot of its own in `[mirrors]`. Cheap: a plan and a fetch
/// from a repository made here (the real build is recorded in docs/catalog.md, not run in CI).
#[test]
fn rocm_examples_plans_hiprand_and_fetches_it_through_mirrors() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let plan = ok(
        d,
        &[
            "--release",
            "debian-6.4",
            "plan",
            "rocm-examples",
            "--arch",
            "gfx90c,gfx902",
        ],
    );
    // The table: from its header to the blank line before the totals.
    let rows: Vec<Vec<&str>> = plan
        .lines()
        .skip_while(|l| !l.starts_with("#  component"))
        .skip(1)
        .take_while(|l| !l.is_empty())
        .map(|l| l.split_whitespace().collect())
        .collect();
    let order: Vec<&str> = rows.iter().map(|r| r[1]).collect();
    assert_eq!(
        order,
        [
            "rocprim",
            "hipcub",
            "rocrand",
            "hiprand",
            "rocthrust",
            "rocm-examples"
        ],
        "{plan}"
    );
    let hiprand = &rows[3];
    assert_eq!(
        (hiprand[2], *hiprand.last().unwrap()),
        ("2.11.0", "rocrand"),
        "{plan}"
    );
    assert!(
        plan.contains("hipcub, hiprand, rocprim, rocrand, rocthrust"),
        "{plan}"
    );

    // The mirror answers but lacks the pinned commit: the error names the mirror, not GitHub.
    let repo = d.join("hipRAND.git");
    make_repo(&repo, &[("CMakeLists.txt", "project(hipRAND)\n")], "t");
    let url = format!("file://{}", repo.display());
    let config = d.join("mirrors.toml");
    std::fs::write(
        &config,
        format!("[mirrors]\n\"https://github.com/ROCm/hipRAND.git\" = \"{url}\"\n"),
    )
    .unwrap();
    let o = rocforge_env(
        d,
        &[("ROCFORGE_CONFIG", &config)],
        &["--release", "debian-6.4", "fetch", "hiprand"],
    );
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(
        o.stderr.contains(&format!(
            "hiprand: fetching https://github.com/ROCm/hipRAND.git from mirror {url}"
        )),
        "{}",
        o.stderr
    );
    assert!(
        o.stderr.contains(&format!(
            "error: hiprand: {url} has no commit 2d9a226b515d259af1f0850a0523ae852a7ad826"
        )),
        "{}",
        o.stderr
    );
}

/// The debian-6.4 line's python base (`image build --kind python`: the runtime base plus CPython
/// 3.13 and PyTorch's CPU libraries) with a cp313 wheel on it, as a PyTorch image is made: the
/// wheel's library is a real HIP compile for gfx90c and gfx902 in the line's builder image;
/// `image create` unpacks the wheel on PYTHONPATH; in a container of the image Python imports it
/// and the library calls Debian's HIP 6.4 runtime, which finds no GPU here (hipErrorNoDevice).
#[test]
fn the_python_base_imports_a_wheel_whose_library_calls_hip() {
    if !can_build() {
        return;
    }
    const PYTHON_BASE: &str = "localhost/rocforge/python:debian-6.4";
    let scratch = tempfile::tempdir().unwrap();
    let conf = containers_conf();
    let o = rocforge_env(
        scratch.path(),
        &[("CONTAINERS_CONF", &conf)],
        &[
            "--release",
            "debian-6.4",
            "image",
            "build",
            "--kind",
            "python",
            "--runtime",
            "podman",
        ],
    );
    assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    assert!(o.stdout.starts_with(PYTHON_BASE), "{}", o.stdout);

    let w = World::new()
        .release("localhost/rocforge-none:1")
        .containers()
        .args(&["--arch", "gfx90c,gfx902"])
        .build();
    let d = w.root();
    std::fs::create_dir_all(d.join("src/wheels")).unwrap();
    std::fs::write(
        d.join("hello.hip"),
        "#include <hip/hip_runtime.h>\n__global__ void twice(float* x) { x[threadIdx.x] *= 2.0f; }\n\
         extern \"C\" int device_count(void) { int n = -1; hipError_t e = hipGetDeviceCount(&n); \
         return e == hipSuccess ? n : -(int)e; }\n",
    )
    .unwrap();
    let mount = format!("{}:/w:Z", d.display());
    let o = podman(&[
        "run",
        "--rm",
        "-v",
        &mount,
        "-w",
        "/w",
        BUILDER,
        "hipcc",
        "-fPIC",
        "-shared",
        "--offload-arch=gfx90c",
        "--offload-arch=gfx902",
        "hello.hip",
        "-o",
        "libgpuhello.so",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    {
        use std::io::Write;
        let wheel = d.join("src/wheels/gpuhello-1.0-cp313-cp313-linux_x86_64.whl");
        let mut z = zip::ZipWriter::new(std::fs::File::create(wheel).unwrap());
        let opts = zip::write::SimpleFileOptions::default();
        let lib = std::fs::read(d.join("libgpuhello.so")).unwrap();
        let init = "import ctypes, os\n_lib = ctypes.CDLL(os.path.join(os.path.dirname(__file__), 'libgpuhello.so'))\ndef device_count():\n    return _lib.device_count()\n";
        for (name, bytes) in [
            ("gpuhello/libgpuhello.so", &lib[..]),
            ("gpuhello/__init__.py", init.as_bytes()),
            (
                "gpuhello-1.0.dist-info/METADATA",
                b"Metadata-Version: 2.1\nName: gpuhello\nVersion: 1.0\n",
            ),
        ] {
            z.start_file(name, opts).unwrap();
            z.write_all(bytes).unwrap();
        }
        z.finish().unwrap();
    }
    std::fs::write(
        w.release_dir().join("gpuhello.toml"),
        "name = \"gpuhello\"\nversion = \"1.0\"\nsummary = \"a wheel with a HIP library\"\nlicense = \"MIT\"\n\n[source]\npath = \"../../src/wheels\"\n\n[build]\nsystem = \"copy\"\ndest = \"share/rocforge/wheels\"\n",
    )
    .unwrap();
    w.ok(&["build", "gpuhello", "--runtime", "host"]);
    let tag = "localhost/rocforge-test-gpuhello:1";
    let o = w.run(&[
        "image",
        "create",
        "gpuhello",
        "--runtime",
        "host",
        "--base",
        PYTHON_BASE,
        "--tag",
        tag,
        "--load",
        "podman",
    ]);
    assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    assert!(
        o.stderr
            .contains("Python 3.13 for gpuhello-1.0-cp313-cp313-linux_x86_64.whl"),
        "{}",
        o.stderr
    );
    let o = podman(&[
        "run",
        "--rm",
        tag,
        "python3.13",
        "-c",
        "import gpuhello, importlib.metadata as m; print(gpuhello.device_count(), m.version('gpuhello'), gpuhello.__file__)",
    ]);
    let _ = podman(&["rmi", tag]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        "-100 1.0 /opt/rocm/lib/python3/site-packages/gpuhello/__init__.py"
    );
}
