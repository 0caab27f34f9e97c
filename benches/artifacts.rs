//! `package` and `install` against the shell pipelines a packager would write by hand.
//!
//! package: rocforge packaging a synthetic install tree (hash every file, scan for build paths
//! and glibc needs, sorted tar, zstd -19 with 4 workers) vs `tar --sort=name -c | zstd -T0 -19`
//! plus `sha256sum` of every file. install: `rocforge install` of that tarball from an HTTP
//! server on 127.0.0.1 (signed index, download with sha256, safe extraction with per-file
//! sha256, staging + rename) vs `curl | tee | zstd -d | tar -x` plus `sha256sum` of the tarball.
//!
//! Run: `cargo bench --bench artifacts`. Size: ROCFORGE_BENCH_MB (default 256; the issue asks
//! for 1 GB, which takes several minutes per round at level 19 on a 2-core machine).

#[path = "common/mod.rs"]
mod common;

use std::io::{self, Write};
use std::path::Path;
use std::process::{Command, ExitCode, Stdio};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use rocforge::package::{self, tarball::Compression};
use rocforge::progress::Silent;
use rocforge::store::{EntryMeta, Store};

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("artifacts bench failed: {e}");
            ExitCode::FAILURE
        }
    }
}

fn sh(script: &str) -> io::Result<Duration> {
    let t = Instant::now();
    let st = Command::new("sh")
        .arg("-c")
        .arg(script)
        .stdout(Stdio::null())
        .status()?;
    if !st.success() {
        return Err(io::Error::other(format!("failed: {script}")));
    }
    Ok(t.elapsed())
}

/// Install-tree-like bytes: a third random (machine code compresses poorly), the rest repeated
/// text with variations (symbol tables, headers, CMake files).
fn generate(tree: &Path, total: u64) -> io::Result<()> {
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let file_size: u64 = 2 << 20;
    let files = total.div_ceil(file_size);
    for i in 0..files {
        let dir = tree.join(format!("lib/sub{}", i % 8));
        std::fs::create_dir_all(&dir)?;
        let mut f = io::BufWriter::new(std::fs::File::create(dir.join(format!("libx{i}.so")))?);
        let mut written = 0;
        while written < file_size {
            if next() % 3 == 0 {
                let block: Vec<u8> = (0..4096).map(|_| next() as u8).collect();
                f.write_all(&block)?;
            } else {
                let n = next();
                let line = format!("_ZN7rocblas{}kernel_{n:x}_gfx90c_{}\n", n % 97, n % 13);
                f.write_all(&line.repeat(4096 / line.len() + 1).as_bytes()[..4096])?;
            }
            written += 4096;
        }
    }
    Ok(())
}

fn run() -> io::Result<()> {
    let mb: u64 = std::env::var("ROCFORGE_BENCH_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256);
    let rounds: usize = std::env::var("ROCFORGE_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2);
    let total = mb << 20;
    let dir = tempfile::tempdir()?;
    let d = dir.path();
    let key = "ab".repeat(32);
    let store = Store::open(d.join("store"));
    let tree = store.tree(&key);
    generate(&tree, total)?;
    let meta = EntryMeta {
        component: "bench".parse().expect("a name"),
        key: key.parse().expect("a key"),
        committed: 0,
        version: "1.0".into(),
        release: "bench".into(),
        targets: vec!["gfx90c".parse().expect("a target")],
        runtime: "podman".into(),
        reproducible: true,
        image: None,
        started: 0,
        duration_secs: 0.0,
        source_commit: None,
        source_date_epoch: Some(1_700_000_000),
        coverage: None,
        licenses: Vec::new(),
        tree_bytes: None,
        build_bytes: None,
    };
    std::fs::write(
        store.entry_dir(&key).join("meta.json"),
        serde_json::to_vec(&meta)?,
    )?;
    let keys = rocforge::sign::generate(&d.join("keys"), None).map_err(io::Error::other)?;
    let sk = rocforge::sign::load_secret(&keys.secret, None).map_err(io::Error::other)?;
    println!(
        "artifacts bench: {mb} MiB tree ({} files), {rounds} rounds, {} cores",
        total.div_ceil(2 << 20),
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    );

    // package
    let (mut ours, mut peer) = (Duration::MAX, Duration::MAX);
    let out = d.join("dist");
    for _ in 0..rounds {
        let _ = std::fs::remove_dir_all(&out);
        let t = Instant::now();
        let opts = package::Options {
            compression: Compression::Zst,
            out_dir: &out,
            build_paths: vec![store.root().display().to_string()],
            allow_build_paths: false,
            license: None,
            build_only: Vec::new(),
            dependency_keys: Default::default(),
            key: Some(&sk),
        };
        let p = package::package_entry(&store, &key, &opts).map_err(io::Error::other)?;
        package::finish_release(&out, &[p], Some(&sk), 30).map_err(io::Error::other)?;
        ours = ours.min(t.elapsed());
        let script = format!(
            "cd '{t}' && tar --sort=name --owner=0 --group=0 --mtime=@0 -cf - . | zstd -q -T0 -19 -f -o '{d}/peer.tar.zst' && find . -type f -print0 | xargs -0 sha256sum > /dev/null",
            t = tree.display(),
            d = d.display()
        );
        peer = peer.min(sh(&script)?);
    }
    let ours_size = std::fs::metadata(
        package::tarball::read_manifest(
            &out.join(format!("bench-1.0-gfx90c-{}.tar.zst", &key[..8])),
        )
        .map(|_| out.join(format!("bench-1.0-gfx90c-{}.tar.zst", &key[..8])))
        .map_err(io::Error::other)?,
    )?
    .len();
    let peer_size = std::fs::metadata(d.join("peer.tar.zst"))?.len();
    report("package", mb, ours, peer);
    println!(
        "  tarball: ours {:.1} MiB, peer {:.1} MiB",
        ours_size as f64 / 1048576.0,
        peer_size as f64 / 1048576.0
    );
    common::record(
        &format!("package: tarball size, {mb} MiB tree"),
        ours_size as f64 / 1048576.0,
        "MiB",
        Some(("tar | zstd -T0 -19", peer_size as f64 / 1048576.0)),
        Some(ours_size as f64 / peer_size as f64),
        "",
        None,
    );

    // install
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let mut server = Command::new("python3")
        .args([
            "-m",
            "http.server",
            "--bind",
            "127.0.0.1",
            &port.to_string(),
            "--directory",
        ])
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let start = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err()
        && start.elapsed() < Duration::from_secs(10)
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    let url = format!("http://127.0.0.1:{port}/");
    let pk = rocforge::sign::parse_public(&keys.public_key).map_err(io::Error::other)?;
    let stop = AtomicBool::new(false);
    let (mut ours_i, mut peer_i) = (Duration::MAX, Duration::MAX);
    let name = format!("bench-1.0-gfx90c-{}.tar.zst", &key[..8]);
    let result = (|| -> io::Result<()> {
        for r in 0..rounds {
            let prefix = d.join(format!("prefix{r}"));
            let cache = d.join(format!("cache{r}"));
            let t = Instant::now();
            let req = rocforge::install::Request {
                allow_downgrade: false,
                components: &["bench".to_string()],
                targets: &[rocforge::arch::TargetId::plain("gfx90c")],
                from: &url,
                prefix: &prefix,
                allow_unsigned: false,
                allowed_hosts: &[],
                keys: std::slice::from_ref(&pk),
                cache_dir: cache.clone(),
                max_bytes: u64::MAX,
                download: Default::default(),
                runtime: rocforge::install::RuntimeCheck::Auto,
                stop: &stop,
            };
            rocforge::install::install(&req, &Silent).map_err(io::Error::other)?;
            ours_i = ours_i.min(t.elapsed());
            let peer_dir = d.join(format!("peer{r}"));
            std::fs::create_dir_all(&peer_dir)?;
            let script = format!(
                "curl -s {url}{name} | tee '{d}/dl{r}.tar.zst' | zstd -q -d | tar -x -C '{p}' && sha256sum '{d}/dl{r}.tar.zst' > /dev/null",
                d = d.display(),
                p = peer_dir.display()
            );
            peer_i = peer_i.min(sh(&script)?);
            std::fs::remove_dir_all(&prefix)?;
            std::fs::remove_dir_all(&peer_dir)?;
            std::fs::remove_dir_all(&cache)?;
        }
        Ok(())
    })();
    let _ = server.kill();
    let _ = server.wait();
    result?;
    report("install", mb, ours_i, peer_i);
    Ok(())
}

fn report(what: &str, mb: u64, ours: Duration, peer: Duration) {
    let (o, p) = (ours.as_secs_f64(), peer.as_secs_f64());
    println!(
        "{what}: ours {o:.2}s ({:.0} MiB/s), peer {p:.2}s ({:.0} MiB/s), ours/peer = {:.2} (goal <= 1.0)",
        mb as f64 / o,
        mb as f64 / p,
        o / p
    );
    let (name, peer) = if what == "package" {
        (
            format!("package: {mb} MiB synthetic install tree, zstd -19"),
            "tar --sort=name | zstd -T0 -19 + sha256sum",
        )
    } else {
        (
            format!("install: the {mb} MiB tree's tarball from loopback"),
            "curl | tee | zstd -d | tar -x + sha256sum",
        )
    };
    common::record(
        &name,
        o,
        "s",
        Some((peer, p)),
        Some(o / p),
        "ratio <= 1.0",
        Some(o / p <= 1.0),
    );
}
