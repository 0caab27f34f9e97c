//! `build --time-limit` with `--cache oci://…`: a build stopped at its time limit pushes its
//! build directory as a signed checkpoint to a real registry (Debian's docker-registry on
//! 127.0.0.1); a build on a machine with an empty store and cache pulls it and continues
//! without redoing the finished ninja step, to the same key and tree as a build that never
//! stopped. Checkpoints signed by an untrusted key, made for another key or cut short are
//! refused with the reason, and the build starts clean. A registry that drops the upload is
//! tried again, with the reason; one that goes away leaves no checkpoint, and the next machine
//! starts clean.

use crate::common;

use std::path::{Path, PathBuf};

use common::*;

const MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";

struct Fx {
    w: World,
    counter: PathBuf,
    flag: PathBuf,
}

derefs_to_world!(Fx);

impl Fx {
    fn build(&self, config: &str, extra: &[&str]) -> Out {
        let config = self.path(config);
        let mut args = vec![
            "build",
            "resumable",
            "--arch",
            "gfx90c",
            "--runtime",
            "host",
        ];
        args.extend_from_slice(extra);
        self.run_env(&[("ROCFORGE_CONFIG", config.as_path())], &args)
    }

    /// A build with an 8 s limit, pushing its checkpoint to `cache` signed by `keys/`: exit 75.
    fn stop_at_limit(&self, cache: &str) -> Out {
        let key_file = self.root().join("keys/rocforge.key").display().to_string();
        let stopped = self.build(
            "trust.toml",
            &[
                "--cache",
                cache,
                "--cache-key",
                &key_file,
                "--time-limit",
                "8s",
            ],
        );
        assert_eq!(stopped.code, 75, "{}", stopped.stderr);
        stopped
    }

    /// How often the first ninja step has run, over every build so far.
    fn runs(&self) -> usize {
        std::fs::read_to_string(&self.counter)
            .unwrap_or_default()
            .lines()
            .count()
    }

    /// A fresh machine: no store, no source cache, no build directory.
    fn wipe(&self) {
        for d in ["store", "cache"] {
            let _ = std::fs::remove_dir_all(self.path(d));
        }
    }

    fn write_recipe(&self, extra_arg: &str) {
        std::fs::write(
            self.release_dir().join("resumable.toml"),
            format!(
                "name = \"resumable\"\nversion = \"1.0\"\nsummary = \"two ninja steps\"\nlicense = \"MIT\"\n\n[source]\npath = \"src/resumable\"\n\n[build]\nsystem = \"cmake\"\narch-vars = [\"GPU_TARGETS\"]\nargs = [\"-DCOUNTER={}\", \"-DFLAG={}\"{extra_arg}]\n",
                self.counter.display(),
                self.flag.display()
            ),
        )
        .unwrap();
    }
}

/// Two ninja steps: the first appends to a counter outside the build; the second waits two
/// minutes unless `flag` exists, so a short time limit stops the build in it.
fn fixture() -> Fx {
    let w = World::new().release("localhost/rocforge-none:1").build();
    let src = w.release_dir().join("src/resumable");
    two_step_source(
        &src,
        "test -e \"$1\" || sleep 120\ncat first.txt > second.txt\necho two >> second.txt\n",
    );
    // The first step stands for a compile: it leaves an entry where ccache would (a result
    // file two levels down), which must reach the resuming machine with the build directory.
    std::fs::write(
        src.join("first.sh"),
        "echo ran >> \"$1\"\necho one > first.txt\nmkdir -p \"$CCACHE_DIR/a/b\"\necho object > \"$CCACHE_DIR/a/b/0123R\"\n",
    )
    .unwrap();
    let fx = Fx {
        counter: w.path("first-step-runs"),
        flag: w.path("second-step-may-run"),
        w,
    };
    fx.write_recipe("");
    fx.write("empty.toml", "");
    for (dir, trust) in [("keys", "trust.toml"), ("other-keys", "other.toml")] {
        fx.trust_new_key(dir, trust);
    }
    fx
}

/// The store key and tree of the one component a successful build printed.
fn built(o: &Out) -> (String, Vec<(String, Vec<u8>)>) {
    assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    let tree = PathBuf::from(o.stdout.lines().last().unwrap().trim());
    let key = tree
        .parent()
        .unwrap()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    (key, tree_contents(&tree))
}

fn planned_key(fx: &Fx) -> String {
    let o = fx.run(&[
        "build",
        "resumable",
        "--arch",
        "gfx90c",
        "--runtime",
        "host",
        "--dry-run",
        "--format",
        "json",
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let plan: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    plan["steps"][0]["key"].as_str().unwrap().to_string()
}

fn manifest_url(host: &str, tag: &str) -> String {
    format!("http://{host}/v2/rocforge/ckpt/manifests/{tag}")
}

#[test]
fn a_build_stopped_at_its_time_limit_continues_elsewhere_from_its_signed_checkpoint() {
    if !require("cmake and ninja", which("cmake") && which("ninja")) {
        return;
    }
    let Some(reg) = registry() else {
        return;
    };
    let fx = fixture();
    let cache = format!("oci://{}/rocforge/ckpt", reg.host());
    let key = planned_key(&fx);
    let tag = format!("checkpoint-{key}");

    // Machine A: the limit is reached while the second step waits.
    let started = std::time::Instant::now();
    let stopped = fx.stop_at_limit(&cache);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(100),
        "the build was not stopped at its limit"
    );
    assert!(
        stopped.stderr.contains("stopped at the time limit (8s)"),
        "{}",
        stopped.stderr
    );
    assert!(
        stopped.stderr.contains(&format!(
            "resumable: checkpoint pushed to {cache} as {tag} ("
        )),
        "{}",
        stopped.stderr
    );
    assert_eq!(fx.runs(), 1, "{}", stopped.stderr);
    let client = reqwest::blocking::Client::new();
    let manifest: serde_json::Value = serde_json::from_slice(
        &client
            .get(manifest_url(&reg.host(), &tag))
            .header("Accept", MANIFEST)
            .send()
            .unwrap()
            .bytes()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        manifest["config"]["mediaType"],
        "application/vnd.rocforge.checkpoint.config.v1+json"
    );
    std::fs::write(&fx.flag, "").unwrap();

    // Machine B trusts another key only: the checkpoint is refused, the build starts clean.
    fx.wipe();
    let untrusted = fx.build("other.toml", &["--cache", &cache]);
    assert_eq!(untrusted.code, 0, "{}", untrusted.stderr);
    assert!(
        untrusted.stderr.contains(&format!(
            "resumable: not using the checkpoint in {cache}: cache entry {key}:"
        )) && untrusted.stderr.contains("starting the build clean"),
        "{}",
        untrusted.stderr
    );
    assert_eq!(fx.runs(), 2, "an untrusted checkpoint was used");

    // Machine C trusts the signer: it continues where A stopped.
    fx.wipe();
    let resumed = fx.build("trust.toml", &["--cache", &cache]);
    assert!(
        resumed.stderr.contains(&format!(
            "resumable: pulled the checkpoint {tag} from {cache} (signed by"
        )) && resumed
            .stderr
            .contains("resumable: continuing the build that stopped in"),
        "{}",
        resumed.stderr
    );
    let (resumed_key, resumed_tree) = built(&resumed);
    assert_eq!(fx.runs(), 2, "the resumed build redid the first step");
    assert!(
        resumed
            .stderr
            .contains("1 compiler cache entries (7 B) restored"),
        "{}",
        resumed.stderr
    );
    let restored: Vec<_> = std::fs::read_dir(fx.root().join("cache/ccache"))
        .unwrap()
        .map(|d| d.unwrap().path().join("a/b/0123R"))
        .filter(|p| p.is_file())
        .collect();
    assert_eq!(
        restored.len(),
        1,
        "the compiler cache entry was not restored"
    );
    assert_eq!(std::fs::read_to_string(&restored[0]).unwrap(), "object\n");

    // An uninterrupted build of the same inputs: the same key and the same tree.
    fx.wipe();
    let whole = built(&fx.build("trust.toml", &[]));
    assert_eq!(fx.runs(), 3);
    assert_eq!((resumed_key.clone(), resumed_tree), whole);
    assert_eq!(resumed_key, key);

    // A's checkpoint put under another build's tag: refused as not this build's.
    fx.write_recipe(", \"-DOTHER=1\"");
    let other = planned_key(&fx);
    assert_ne!(other, key);
    let bytes = client
        .get(manifest_url(&reg.host(), &tag))
        .header("Accept", MANIFEST)
        .send()
        .unwrap()
        .bytes()
        .unwrap();
    let put = client
        .put(manifest_url(&reg.host(), &format!("checkpoint-{other}")))
        .header("Content-Type", MANIFEST)
        .body(bytes)
        .send()
        .unwrap();
    assert!(put.status().is_success(), "{:?}", put.status());
    fx.wipe();
    let misfiled = fx.build("trust.toml", &["--cache", &cache]);
    assert_eq!(misfiled.code, 0, "{}", misfiled.stderr);
    assert!(
        misfiled.stderr.contains(&format!(
            "the signed checkpoint is {key} of resumable (rocforge.checkpoint/1), not this build's; starting the build clean"
        )),
        "{}",
        misfiled.stderr
    );
    assert_eq!(fx.runs(), 4, "another key's checkpoint was used");
    fx.write_recipe("");

    // The registry serves the checkpoint's tree cut short: refused before it is unpacked.
    let blob = reg.blob_file(manifest["layers"][0]["digest"].as_str().unwrap());
    let full = std::fs::read(&blob).unwrap();
    std::fs::write(&blob, &full[..full.len() / 2]).unwrap();
    fx.wipe();
    let truncated = fx.build("trust.toml", &["--cache", &cache]);
    assert_eq!(truncated.code, 0, "{}", truncated.stderr);
    assert!(
        truncated.stderr.contains("the signed config says")
            && truncated.stderr.contains("starting the build clean"),
        "{}",
        truncated.stderr
    );
    assert_eq!(fx.runs(), 5, "a truncated checkpoint was used");
    assert!(
        !Path::new(&fx.root().join("cache/builds")).exists()
            || std::fs::read_dir(fx.root().join("cache/builds"))
                .unwrap()
                .count()
                == 0,
        "a finished build leaves no build directory"
    );
}

/// A stopping machine whose push goes through a proxy that cuts its first blob upload halfway,
/// then does `after`: the fixture, the registry behind the proxy, the proxy's cache URL and what
/// the stopped build said. None where cmake, ninja or the registry are missing.
fn stop_through_a_cut(
    after: common::proxy::AfterCut,
) -> Option<(Fx, Registry, common::proxy::FlakyProxy, String, Out)> {
    if !require("cmake and ninja", which("cmake") && which("ninja")) {
        return None;
    }
    let reg = registry()?;
    let fx = fixture();
    let proxy = common::proxy::FlakyProxy::start(reg.port, after);
    let cache = format!("oci://{}/rocforge/ckpt", proxy.host());
    let stopped = fx.stop_at_limit(&cache);
    assert_eq!(proxy.cuts(), 1, "no upload was cut: {}", stopped.stderr);
    assert_eq!(fx.runs(), 1, "{}", stopped.stderr);
    std::fs::write(&fx.flag, "").unwrap();
    Some((fx, reg, proxy, cache, stopped))
}

#[test]
fn a_checkpoint_upload_the_registry_drops_is_tried_again_and_continued_elsewhere() {
    let Some((fx, reg, proxy, cache, stopped)) =
        stop_through_a_cut(common::proxy::AfterCut::CarryOn)
    else {
        return;
    };
    let retried = stopped
        .stderr
        .lines()
        .find(|l| {
            l.contains(&format!(
                "cache {cache}: cannot reach registry {}",
                proxy.host()
            ))
        })
        .unwrap_or_else(|| panic!("no retry said: {}", stopped.stderr));
    assert!(
        retried.contains("trying again in 1s (1 of 4 retries)"),
        "{retried}"
    );
    assert!(
        stopped.stderr.contains(&format!(
            "resumable: checkpoint pushed to {cache} as checkpoint-"
        )),
        "{}",
        stopped.stderr
    );

    fx.wipe();
    let resumed = fx.build(
        "trust.toml",
        &["--cache", &format!("oci://{}/rocforge/ckpt", reg.host())],
    );
    assert!(
        resumed
            .stderr
            .contains("resumable: continuing the build that stopped in"),
        "{}",
        resumed.stderr
    );
    built(&resumed);
    assert_eq!(fx.runs(), 1, "the resumed build redid the first step");
}

#[test]
fn a_registry_that_goes_away_mid_upload_leaves_no_checkpoint_and_the_next_machine_starts_clean() {
    let Some((fx, reg, _proxy, cache, stopped)) =
        stop_through_a_cut(common::proxy::AfterCut::GoAway)
    else {
        return;
    };
    let said = stopped
        .stderr
        .lines()
        .find(|l| l.contains(&format!("resumable: no checkpoint pushed to {cache}: ")))
        .unwrap_or_else(|| panic!("the failed push was not said: {}", stopped.stderr));
    assert!(
        said.contains("(gave up after 5 attempts)")
            && said.contains("the registry stopped answering"),
        "{said}"
    );
    assert_eq!(
        stopped.stderr.matches("trying again in").count(),
        4,
        "{}",
        stopped.stderr
    );

    // The same machine still has its build directory: it continues without the registry.
    let here = fx.build("trust.toml", &[]);
    assert!(
        here.stderr
            .contains("resumable: continuing the build that stopped in"),
        "{}",
        here.stderr
    );
    built(&here);
    assert_eq!(fx.runs(), 1);

    // Another machine, the registry back: the upload cut short made no checkpoint.
    fx.wipe();
    let direct = format!("oci://{}/rocforge/ckpt", reg.host());
    let elsewhere = fx.build("trust.toml", &["--cache", &direct]);
    assert!(
        !elsewhere.stderr.contains("continuing the build")
            && !elsewhere.stderr.contains("pulled the checkpoint"),
        "{}",
        elsewhere.stderr
    );
    built(&elsewhere);
    assert_eq!(
        fx.runs(),
        2,
        "the build on a new machine did not start clean"
    );
}

#[test]
fn a_time_limit_that_is_not_a_duration_is_refused_with_the_form_it_takes() {
    let w = World::new().build();
    for bad in ["soon", "0s", "5x"] {
        let o = w.run(&["build", "rocprim", "--time-limit", bad]);
        assert_eq!(o.code, 2, "{bad}: {}", o.stderr);
        assert!(
            o.stderr.contains(&format!(
                "`{bad}` is not a duration: write e.g. 45m, 5h30m or 90s"
            )),
            "{}",
            o.stderr
        );
    }
}

/// `--drain`: before the time limit no compile starts, and the one under way finishes into the
/// build directory, so the run that continues it compiles only what was never started. The
/// first of two C compiles waits until the drain has begun (its marker is in the build
/// directory), then finishes; the second is refused by the gate, and the build stops, exit 75,
/// long before its limit. The next run compiles the second source alone.
#[test]
fn a_draining_build_finishes_its_compile_under_way_and_starts_no_other() {
    if !require(
        "cmake, ninja and cc",
        which("cmake") && which("ninja") && which("cc"),
    ) {
        return;
    }
    let w = World::new().release("localhost/rocforge-none:1").build();
    let src = w.release_dir().join("src/drained");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("LICENSE"), "MIT\n").unwrap();
    std::fs::write(src.join("a.c"), "int a(void) { return 1; }\n").unwrap();
    std::fs::write(src.join("b.c"), "int b(void) { return 2; }\n").unwrap();
    std::fs::write(
        src.join("CMakeLists.txt"),
        "cmake_minimum_required(VERSION 3.16)\nproject(drained C)\nadd_library(drained STATIC a.c b.c)\ninstall(TARGETS drained DESTINATION lib)\n",
    )
    .unwrap();
    let log = w.path("compiles.log");
    // The compiler: the first compile of a.c or b.c waits for the drain, then compiles; every
    // compile of either is logged. CMake's own probes pass straight through.
    let cc = w.executable(
        "cc-logged",
        &format!(
            "#!/bin/sh\ncase \"$*\" in\n*/a.c*|*/b.c*)\n  if mkdir \"$BUILD/.first-compile\" 2>/dev/null; then\n    n=0\n    while [ ! -e \"$BUILD/.rocforge-drain\" ] && [ $n -lt 600 ]; do sleep 0.1; n=$((n+1)); done\n  fi\n  for x in \"$@\"; do case \"$x\" in *.c) echo \"${{x##*/}}\" >> {log};; esac; done ;;\nesac\nexec cc \"$@\"\n",
            log = log.display()
        ),
    );
    std::fs::write(
        w.release_dir().join("drained.toml"),
        format!(
            "name = \"drained\"\nversion = \"1.0\"\nsummary = \"two compiles\"\nlicense = \"MIT\"\n\n[source]\npath = \"src/drained\"\n\n[build]\nsystem = \"cmake\"\narch-vars = [\"GPU_TARGETS\"]\nargs = [\"-DCMAKE_C_COMPILER={}\"]\n",
            cc.display()
        ),
    )
    .unwrap();
    let args = [
        "build",
        "drained",
        "--arch",
        "gfx90c",
        "--runtime",
        "host",
        "--jobs",
        "1",
    ];
    let compiled = || -> Vec<String> {
        let mut l: Vec<String> = std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect();
        l.sort();
        l
    };

    let started = std::time::Instant::now();
    let mut limited = args.to_vec();
    limited.extend(["--time-limit", "90s", "--drain", "80s"]);
    let stopped = w.run(&limited);
    assert_eq!(stopped.code, 75, "{}", stopped.stderr);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(60),
        "the drain did not end the build before its limit"
    );
    assert!(
        stopped
            .stderr
            .contains("time limit in 1m20s: no component or compile starts now"),
        "{}",
        stopped.stderr
    );
    let first = compiled();
    assert_eq!(
        first.len(),
        1,
        "one compile ran, the other never started: {first:?}"
    );

    let done = w.run(&args);
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert!(
        done.stderr
            .contains("drained: continuing the build that stopped in"),
        "{}",
        done.stderr
    );
    assert_eq!(
        compiled(),
        ["a.c", "b.c"],
        "the compile that finished while draining was not done again"
    );

    // A build whose last compile finishes in the drain is done: stored, exit 0, no time-out.
    std::fs::write(src.join("CMakeLists.txt"), "cmake_minimum_required(VERSION 3.16)\nproject(drained C)\nadd_library(drained STATIC a.c)\ninstall(TARGETS drained DESTINATION lib)\n").unwrap();
    let finished = w.run(&limited);
    assert_eq!(finished.code, 0, "{}", finished.stderr);
    assert!(
        finished.stderr.contains("time limit in 1m20s")
            && !finished.stderr.contains("stopped at the time limit"),
        "{}",
        finished.stderr
    );
    assert_eq!(
        compiled(),
        ["a.c", "a.c", "b.c"],
        "the new source compiled once"
    );
}
