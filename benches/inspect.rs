//! Inspect benchmark: `rocforge inspect --format json` on a ~500 MB ELF file whose `.hip_fatbin`
//! holds tens of thousands of real offload bundles, against what a person does by hand:
//! `llvm-objcopy-15 --dump-section .hip_fatbin=out.bin` then `clang-offload-bundler-15 --list`.
//! The peer does less work: the bundler lists only the first bundle of the section, where
//! rocforge walks and decodes every bundle and every code object's ELF header.
//!
//! The file: a kernel compiled with Debian's hipcc for gfx90c and gfx902, its `.hip_fatbin`
//! bundle (host entry and two code objects) repeated, each copy padded to 4096 bytes as the
//! linker lays one bundle per object file in a linked library, added as the `.hip_fatbin`
//! section of a small host shared object with `llvm-objcopy-15 --add-section`.
//!
//! Prints the median of 3 interleaved runs, rocforge's peak RSS from wait4 and its peak
//! anonymous memory (sampled from /proc every millisecond): the input is memory-mapped, so the
//! pages of it that are read count in RSS as file pages of the page cache, shared and not a
//! copy; anonymous memory is what rocforge itself allocates. Without hipcc it says so and exits 0.
//!
//! cargo bench --bench inspect

#[path = "common/mod.rs"]
mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const TARGET_BYTES: u64 = 500_000_000;
const ALIGN: usize = 4096;
const RUNS: usize = 3;
const GOAL_S: f64 = 1.0;
/// "No full copy in memory": rocforge's own (anonymous) memory stays under this share of the
/// file size.
const GOAL_ANON_SHARE: f64 = 0.25;

fn which(tool: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(tool))
            .find(|f| f.is_file())
    })
}

fn check(cmd: &mut Command) {
    let out = cmd.output().expect("spawn");
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

struct Run {
    wall: Duration,
    max_rss_kib: i64,
    /// Highest RssAnon seen while the process ran, in KiB.
    anon_kib: u64,
}

fn rss_anon_kib(pid: libc::pid_t) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("RssAnon:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Runs a command with stdout discarded; its wall time, its own peak RSS (wait4) and its peak
/// anonymous memory, sampled while it runs.
fn run(cmd: &mut Command) -> Run {
    use std::os::unix::process::ExitStatusExt;
    cmd.stdout(Stdio::null());
    let start = Instant::now();
    let child = cmd.spawn().expect("spawn");
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let mut anon_kib = 0;
    loop {
        // SAFETY: pid is our child; status and usage are valid out-pointers.
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        if r == pid {
            break;
        }
        assert_eq!(r, 0, "wait4 failed");
        if let Some(kib) = rss_anon_kib(pid) {
            anon_kib = anon_kib.max(kib);
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let wall = start.elapsed();
    let exit = std::process::ExitStatus::from_raw(status);
    assert!(exit.success(), "{cmd:?} failed: {exit}");
    std::mem::forget(child);
    Run {
        wall,
        max_rss_kib: usage.ru_maxrss,
        anon_kib,
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Builds the big file in `dir`; returns its path and the number of bundles in it.
fn build_file(dir: &Path, hipcc: &Path) -> (PathBuf, usize) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/inspect/a.hip");
    check(
        Command::new(hipcc)
            .current_dir(dir)
            .args(["--offload-arch=gfx90c", "--offload-arch=gfx902", "-c"])
            .arg(&src)
            .args(["-o", "a.o"]),
    );
    check(Command::new("llvm-objcopy-15").current_dir(dir).args([
        "--dump-section",
        ".hip_fatbin=bundle.bin",
        "a.o",
    ]));
    // The object's whole section, as the linker copies it, then padding to the next bundle.
    let mut bundle = std::fs::read(dir.join("bundle.bin")).unwrap();
    let bundle_len = bundle.len();
    bundle.resize(bundle_len.next_multiple_of(ALIGN), 0);
    let copies = TARGET_BYTES.div_ceil(bundle.len() as u64) as usize;
    {
        let f = std::fs::File::create(dir.join("big.bin")).unwrap();
        let mut w = std::io::BufWriter::with_capacity(1 << 20, f);
        for _ in 0..copies {
            w.write_all(&bundle).unwrap();
        }
        w.flush().unwrap();
    }
    // A small host shared object to carry the section.
    std::fs::write(
        dir.join("host.c"),
        "int host_function(void) { return 42; }\n",
    )
    .unwrap();
    check(
        Command::new("clang-15")
            .current_dir(dir)
            .args(["-shared", "-fPIC", "host.c", "-o", "host.so"]),
    );
    check(Command::new("llvm-objcopy-15").current_dir(dir).args([
        "--add-section",
        ".hip_fatbin=big.bin",
        "--set-section-alignment",
        ".hip_fatbin=4096",
        "host.so",
        "libbig.so",
    ]));
    std::fs::remove_file(dir.join("big.bin")).unwrap();
    println!(
        "file: {copies} bundles of {bundle_len} bytes (host + gfx90c + gfx902), each padded to {} bytes",
        bundle.len()
    );
    (dir.join("libbig.so"), copies)
}

fn main() {
    println!(
        "rocforge inspect benchmark (median of {RUNS} interleaved runs; {} cores)",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    let Some(hipcc) = which("hipcc") else {
        println!("skipped: hipcc is not installed (apt-get install hipcc llvm-15 clang-tools-15)");
        return;
    };
    for tool in ["llvm-objcopy-15", "clang-offload-bundler-15", "clang-15"] {
        if which(tool).is_none() {
            println!(
                "skipped: {tool} is not installed (apt-get install hipcc llvm-15 clang-tools-15)"
            );
            return;
        }
    }
    let exe = env!("CARGO_BIN_EXE_rocforge");
    let tmp = tempfile::tempdir().unwrap();
    let t = Instant::now();
    let (file, copies) = build_file(tmp.path(), &hipcc);
    let size = std::fs::metadata(&file).unwrap().len();
    println!(
        "      {:.1} MB ELF file written in {:.1} s",
        size as f64 / 1e6,
        t.elapsed().as_secs_f64()
    );

    // Once, untimed: checks both tools see the bundles, and warms the page cache for both.
    let out = Command::new(exe)
        .args(["inspect", "--format", "json"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(out.status.success(), "rocforge inspect failed: {out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let report = &v["inventories"][0]["files"][0];
    let bundles = report["containers"][0]["bundles"].as_array().unwrap();
    assert_eq!(bundles.len(), copies, "rocforge found every bundle");
    println!(
        "rocforge: {} bundles, {} code objects, {:.1} MB of JSON",
        bundles.len(),
        bundles
            .iter()
            .flat_map(|b| b["entries"].as_array().unwrap())
            .filter(|e| e["image"]["kind"] == "code-object")
            .count(),
        out.stdout.len() as f64 / 1e6
    );
    let dumped = tmp.path().join("out.bin");
    let dump = || {
        let mut c = Command::new("llvm-objcopy-15");
        c.arg("--dump-section")
            .arg(format!(".hip_fatbin={}", dumped.display()))
            .arg(&file);
        c
    };
    let list = || {
        let mut c = Command::new("clang-offload-bundler-15");
        c.args(["--list", "--type=o"])
            .arg(format!("--input={}", dumped.display()));
        c
    };
    check(&mut dump());
    let listed = list().output().unwrap();
    let listed = String::from_utf8_lossy(&listed.stdout);
    println!(
        "clang-offload-bundler --list: {} entries ({}), of the first bundle only",
        listed.lines().count(),
        listed.lines().collect::<Vec<_>>().join(", ")
    );

    let (mut ours, mut peer_dump, mut peer_list) = (Vec::new(), Vec::new(), Vec::new());
    let (mut rss, mut anon) = (0, 0);
    for _ in 0..RUNS {
        let r = run(Command::new(exe)
            .args(["inspect", "--format", "json"])
            .arg(&file));
        ours.push(r.wall);
        rss = rss.max(r.max_rss_kib);
        anon = anon.max(r.anon_kib);
        std::fs::remove_file(&dumped).ok();
        peer_dump.push(run(&mut dump()).wall);
        peer_list.push(run(&mut list()).wall);
    }
    let s = median(ours).as_secs_f64();
    let dump_s = median(peer_dump).as_secs_f64();
    let list_s = median(peer_list).as_secs_f64();
    let peer_s = dump_s + list_s;
    let mib = |kib: u64| kib as f64 / 1024.0;
    let file_mib = size as f64 / (1 << 20) as f64;
    let anon_goal = file_mib * GOAL_ANON_SHARE;
    println!(
        "inspect a {:.0} MB library, {copies} bundles, JSON",
        size as f64 / 1e6
    );
    println!(
        "  rocforge inspect   {:8.3} s    goal <= {GOAL_S} s   {}",
        s,
        if s <= GOAL_S { "met" } else { "MISSED" }
    );
    println!(
        "  peak RSS           {:8.1} MiB  (mapped file pages of the {file_mib:.0} MiB input count here; shared page cache, not a copy)",
        mib(rss as u64)
    );
    println!(
        "  peak anonymous     {:8.1} MiB  goal <= {anon_goal:.0} MiB ({:.0}% of the file)   {}",
        mib(anon),
        GOAL_ANON_SHARE * 100.0,
        if mib(anon) <= anon_goal {
            "met"
        } else {
            "MISSED"
        }
    );
    println!(
        "  peer: llvm-objcopy --dump-section {dump_s:.3} s + clang-offload-bundler --list {list_s:.3} s = {peer_s:.3} s   ratio rocforge/peer = {:.2}",
        s / peer_s
    );
    println!("  (the peer does less: the bundler lists the first of the {copies} bundles only)");
    let name = format!(
        "inspect a {:.0} MB library, {copies} bundles, JSON",
        size as f64 / 1e6
    );
    common::record(
        &name,
        s,
        "s",
        Some((
            "llvm-objcopy --dump-section + clang-offload-bundler --list",
            peer_s,
        )),
        Some(s / peer_s),
        &format!("<= {GOAL_S} s"),
        Some(s <= GOAL_S),
    );
    common::record(
        &format!("{name}: peak RSS (mapped file pages count)"),
        mib(rss as u64),
        "MiB",
        None,
        None,
        "",
        None,
    );
    common::record(
        &format!("{name}: peak anonymous memory"),
        mib(anon),
        "MiB",
        None,
        None,
        &format!("<= {anon_goal:.0} MiB"),
        Some(mib(anon) <= anon_goal),
    );
}
