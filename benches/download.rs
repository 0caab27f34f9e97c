//! `download()` (verification included) against `curl -s -o FILE URL && sha256sum FILE`, both
//! fetching the same 500 MB file from the same server on 127.0.0.1.
//!
//! Run: `cargo bench --bench download`. Goal: ours / peer <= 1.1.

#[path = "common/mod.rs"]
mod common;

use std::ffi::CString;
use std::fs::{self, File};
use std::io::{self, BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use rocforge::download::{DownloadOptions, client, download};
use rocforge::progress::Silent;
use sha2::{Digest, Sha256};

const SIZE: u64 = 500 * 1000 * 1000;
const NEEDED: u64 = 2 * 1000 * 1000 * 1000;
const ROUNDS: usize = 3;
const GOAL: f64 = 1.1;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("download bench failed: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> io::Result<()> {
    let dir = tempfile::tempdir()?;
    let free = free_space(dir.path())?;
    if free < NEEDED {
        println!(
            "download bench skipped: {} has {:.2} GB free, needs 2 GB (500 MB served + two copies)",
            dir.path().display(),
            free as f64 / 1e9
        );
        return Ok(());
    }
    let has_curl = tool_works("curl", "--version");
    let has_sha256sum = tool_works("sha256sum", "--version");

    let served = dir.path().join("served.tar.gz");
    let t = Instant::now();
    let digest = generate(&served, SIZE)?;
    println!(
        "generated {} MB in {:.2}s (sha256 {digest})",
        SIZE / 1_000_000,
        t.elapsed().as_secs_f64()
    );
    let url = serve(served)?;

    let client = client();
    let opts = DownloadOptions::default();
    let ours_path = dir.path().join("ours.tar.gz");
    let peer_path = dir.path().join("peer.tar.gz");
    let mut ours = Vec::new();
    let mut peer = Vec::new();
    for round in 0..ROUNDS {
        // Alternate which contender goes first, so neither always gets the warmer cache.
        for which in [round % 2, 1 - round % 2] {
            if which == 0 {
                let _ = fs::remove_file(&ours_path);
                let t = Instant::now();
                let got = download(&client, &url, &digest, &ours_path, &opts, &Silent)
                    .map_err(|e| io::Error::other(e.to_string()))?;
                let secs = t.elapsed().as_secs_f64();
                assert_eq!(got.bytes, SIZE);
                println!("round {}: rocforge download()        {secs:.3}s", round + 1);
                ours.push(secs);
                fs::remove_file(&ours_path)?;
            } else if has_curl && has_sha256sum {
                let _ = fs::remove_file(&peer_path);
                let t = Instant::now();
                let (curl_secs, sum_secs) = curl_then_sha256sum(&url, &peer_path, &digest)?;
                let secs = t.elapsed().as_secs_f64();
                println!(
                    "round {}: curl -s -o + sha256sum     {secs:.3}s \
                     (curl {curl_secs:.3}s + sha256sum {sum_secs:.3}s)",
                    round + 1
                );
                peer.push(secs);
                fs::remove_file(&peer_path)?;
            }
        }
    }

    let mb = SIZE as f64 / 1e6;
    let ours_median = median(&mut ours);
    println!(
        "rocforge download(): median {ours_median:.3}s ({:.0} MB/s) over {ROUNDS} rounds",
        mb / ours_median
    );
    let name = format!("download + verify {} MB from loopback", SIZE / 1_000_000);
    if !has_curl {
        println!("curl is missing: no peer figure (install curl to compare)");
        common::record(&name, ours_median, "s", None, None, "", None);
        return Ok(());
    }
    if !has_sha256sum {
        println!("sha256sum is missing: no peer figure (install coreutils to compare)");
        common::record(&name, ours_median, "s", None, None, "", None);
        return Ok(());
    }
    let peer_median = median(&mut peer);
    println!(
        "curl + sha256sum:    median {peer_median:.3}s ({:.0} MB/s) over {ROUNDS} rounds",
        mb / peer_median
    );
    let ratio = ours_median / peer_median;
    println!(
        "ratio ours/peer: {ratio:.3} (goal <= {GOAL}): {}",
        if ratio <= GOAL { "met" } else { "NOT met" }
    );
    common::record(
        &name,
        ours_median,
        "s",
        Some(("curl -s -o + sha256sum", peer_median)),
        Some(ratio),
        &format!("ratio <= {GOAL}"),
        Some(ratio <= GOAL),
    );
    Ok(())
}

/// Returns the seconds each of the two commands took.
fn curl_then_sha256sum(url: &str, path: &Path, digest: &str) -> io::Result<(f64, f64)> {
    let t = Instant::now();
    let status = Command::new("curl")
        .args(["-s", "-o"])
        .arg(path)
        .arg(url)
        .status()?;
    if !status.success() {
        return Err(io::Error::other(format!("curl failed: {status}")));
    }
    let curl_secs = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let out = Command::new("sha256sum")
        .arg(path)
        .stderr(Stdio::inherit())
        .output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() || !text.starts_with(digest) {
        return Err(io::Error::other(format!("sha256sum: {text}")));
    }
    Ok((curl_secs, t.elapsed().as_secs_f64()))
}

fn tool_works(tool: &str, arg: &str) -> bool {
    Command::new(tool)
        .arg(arg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn median(xs: &mut [f64]) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs.get(xs.len() / 2).copied().unwrap_or(f64::NAN)
}

fn free_space(path: &Path) -> io::Result<u64> {
    let c = CString::new(path.as_os_str().as_bytes()).map_err(io::Error::other)?;
    // SAFETY: `c` is a valid NUL-terminated path and `st` a properly sized out-parameter.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st.f_bavail as u64 * st.f_frsize as u64)
}

/// Writes `size` pseudo-random bytes (incompressible, like a tarball) and returns their sha256.
fn generate(path: &Path, size: u64) -> io::Result<String> {
    let mut file = File::create(path)?;
    let mut hasher = Sha256::new();
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut buf = vec![0u8; 8 << 20];
    let mut left = size;
    while left > 0 {
        let n = left.min(buf.len() as u64) as usize;
        for chunk in buf[..n].chunks_mut(8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            chunk.copy_from_slice(&x.to_le_bytes()[..chunk.len()]);
        }
        file.write_all(&buf[..n])?;
        hasher.update(&buf[..n]);
        left -= n as u64;
    }
    file.sync_all()?;
    Ok(hex::encode(hasher.finalize()))
}

/// Serves `path` to every GET (whole file, `Connection: close`) via `io::copy` (sendfile).
fn serve(path: PathBuf) -> io::Result<String> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let path = path.clone();
            thread::spawn(move || {
                if let Err(e) = answer(stream, &path) {
                    eprintln!("bench server: {e}");
                }
            });
        }
    });
    // Give the accept loop a moment; connects would queue in the backlog anyway.
    thread::sleep(Duration::from_millis(10));
    Ok(format!("http://{addr}/rocm/served.tar.gz"))
}

fn answer(mut stream: TcpStream, path: &Path) -> io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 || line == "\r\n" || line == "\n" {
            break;
        }
    }
    let mut file = File::open(path)?;
    let len = file.metadata()?.len();
    write!(
        stream,
        "HTTP/1.1 200 OK\r\nContent-Length: {len}\r\nContent-Type: application/gzip\r\n\
         Connection: close\r\n\r\n"
    )?;
    io::copy(&mut file, &mut stream)?;
    stream.flush()
}
