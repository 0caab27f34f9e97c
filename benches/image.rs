//! `rocforge image create` against the way a user would otherwise make the same image, side by
//! side in one run; no figure is asserted:
//!
//! 1. `image create C --kind runtime --load podman` (the built stack as one layer on the
//!    debian-6.4 runtime base, loaded into podman) against `podman build --no-cache` of a
//!    Containerfile that COPYs the same install tree onto the same base (goal: at most 1.5x; the
//!    base's export is cached by rocforge after the first run, which is not timed). Each round
//!    ends with the image in podman's storage.
//! 2. The runtime image's size against the install tree it carries and the base alone: what the
//!    image costs above the libraries themselves.
//!
//! The stack is a component already built for gfx90c,gfx902 in the debian-6.4 line:
//! `ROCFORGE_BENCH_COMPONENT` (default rocrand) in `ROCFORGE_BENCH_STORE` (default: the user's
//! store). Nothing is built: without the build or the runtime base
//! (`rocforge --release debian-6.4 image build --kind runtime`), each figure says why it was
//! skipped.
//!
//! cargo bench --bench image

#[path = "common/mod.rs"]
mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const BASE: &str = "localhost/rocforge/runtime:debian-6.4";
const ARCH: &str = "gfx90c,gfx902";
const ROUNDS: usize = 3;

fn containers_conf() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("containers/containers.conf")
}

fn rocforge(home: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_rocforge"));
    c.current_dir(home)
        .env("NO_COLOR", "1")
        .env_remove("ROCFORGE_RECIPES")
        .env("ROCFORGE_RELEASE", "debian-6.4")
        .env("CONTAINERS_CONF", containers_conf());
    if let Some(store) = std::env::var_os("ROCFORGE_BENCH_STORE") {
        c.env("ROCFORGE_STORE", store);
    }
    c
}

fn podman() -> Command {
    let mut c = Command::new("podman");
    c.env("CONTAINERS_CONF", containers_conf());
    c
}

fn run(cmd: &mut Command) -> Output {
    cmd.stdin(Stdio::null());
    let out = cmd.output().expect("spawn");
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn timed(cmd: &mut Command) -> Duration {
    let t = Instant::now();
    run(cmd);
    t.elapsed()
}

fn median(mut v: Vec<Duration>) -> f64 {
    v.sort();
    v[v.len() / 2].as_secs_f64()
}

fn image_size(image: &str) -> f64 {
    let out = run(podman().args(["image", "inspect", "--format", "{{.Size}}", image]));
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

fn tree_size(dir: &Path) -> f64 {
    let out = run(Command::new("du").args(["-sb"]).arg(dir));
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// Why the figures cannot be measured here, if they cannot.
fn unready(home: &Path, component: &str) -> Result<PathBuf, String> {
    let base = podman()
        .args(["image", "exists", BASE])
        .status()
        .is_ok_and(|s| s.success());
    if !base {
        return Err(format!(
            "podman with {BASE} (rocforge --release debian-6.4 image build --kind runtime)"
        ));
    }
    let out = rocforge(home)
        .args(["store", "path", component, "--arch", ARCH])
        .output()
        .expect("spawn");
    if !out.status.success() {
        return Err(format!(
            "{component} built for {ARCH} in the debian-6.4 line: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
}

fn main() {
    let component =
        std::env::var("ROCFORGE_BENCH_COMPONENT").unwrap_or_else(|_| "rocrand".to_string());
    let home = tempfile::tempdir().unwrap();
    let tree = match unready(home.path(), &component) {
        Ok(t) => t,
        Err(why) => {
            println!("skipped: needs {why}");
            return;
        }
    };
    let ctx = home.path().join("ctx");
    std::fs::create_dir_all(&ctx).unwrap();
    run(Command::new("cp")
        .arg("-a")
        .arg(&tree)
        .arg(ctx.join("rocm")));
    std::fs::write(
        ctx.join("Containerfile"),
        format!("FROM {BASE}\nCOPY rocm/ /opt/rocm/\n"),
    )
    .unwrap();
    let ours = |n: usize| format!("localhost/rocforge-bench/create:{n}");
    let theirs = |n: usize| format!("localhost/rocforge-bench/build:{n}");
    let create = |n: usize| {
        let tag = ours(n);
        let mut c = rocforge(home.path());
        c.args(["image", "create", &component, "--arch", ARCH])
            .args(["--kind", "runtime", "--tag", &tag, "--load", "podman"])
            .args(["--runtime", "podman"]);
        c
    };
    // The first run exports the base from podman's storage into rocforge's cache: untimed, as
    // podman's own storage needs no such step.
    run(&mut create(0));
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for n in 1..=ROUNDS {
        a.push(timed(&mut create(n)));
        b.push(timed(
            podman()
                .args(["build", "--no-cache", "--timestamp", "0", "-q", "-t"])
                .arg(theirs(n))
                .arg("-f")
                .arg(ctx.join("Containerfile"))
                .arg(&ctx),
        ));
    }
    let (ta, tb) = (median(a), median(b));
    println!("image create {component}: {ta:.1} s; podman build COPY of the same tree: {tb:.1} s");
    common::record(
        &format!("image create {component} (runtime) vs podman build COPY of the same tree"),
        ta,
        "s",
        Some(("podman build --no-cache", tb)),
        Some(ta / tb),
        "<= 1.5",
        Some(ta / tb <= 1.5),
    );

    let (image, base, stack) = (image_size(&ours(1)), image_size(BASE), tree_size(&tree));
    let theirs_size = image_size(&theirs(1));
    println!(
        "sizes: image {:.0} MB (base {:.0} MB, stack {:.0} MB); podman build's {:.0} MB",
        image / 1e6,
        base / 1e6,
        stack / 1e6,
        theirs_size / 1e6
    );
    common::record(
        &format!("runtime image of {component}: bytes above its base vs the install tree"),
        image - base,
        "bytes",
        Some(("install tree (du -sb)", stack)),
        Some((image - base) / stack),
        "—",
        None,
    );
    common::record(
        &format!("runtime image of {component} vs podman build's of the same tree"),
        image,
        "bytes",
        Some(("podman build COPY", theirs_size)),
        Some(image / theirs_size),
        "—",
        None,
    );
    for n in 0..=ROUNDS {
        let _ = podman().args(["rmi", "-f", &ours(n), &theirs(n)]).output();
    }
}
