//! Shared test machinery: the real binary, git repositories made by the test, and a git daemon
//! serving them on 127.0.0.1.
#![allow(dead_code)]

pub mod github;
pub mod kfd;
pub mod proxy;
pub mod readme;
pub mod schema;
pub mod world;

pub(crate) use world::{World, derefs_to_world};

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

pub struct Out {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl From<std::process::Output> for Out {
    fn from(out: std::process::Output) -> Out {
        Out {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

/// Runs rocforge in `dir` with a private cache, store and config.
pub fn rocforge_env(dir: &Path, env: &[(&str, &Path)], args: &[&str]) -> Out {
    Out::from(
        rocforge_command(dir, env, args)
            .output()
            .expect("run rocforge"),
    )
}

/// The same command as [`rocforge_env`] runs, not started: for tests that kill it or run two.
pub fn rocforge_command(dir: &Path, env: &[(&str, &Path)], args: &[&str]) -> Command {
    std::fs::write(dir.join("no-user-config.toml"), "").unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rocforge"));
    cmd.current_dir(dir)
        .args(args)
        .env("NO_COLOR", "1")
        .env_remove("ROCFORGE_RECIPES")
        .env_remove("ROCFORGE_RELEASE")
        .env_remove("GITHUB_ACTIONS")
        // A developer's GPU settings would change what `test` runs and reports.
        .env_remove("HSA_XNACK")
        .env_remove("HSA_OVERRIDE_GFX_VERSION")
        .env("ROCFORGE_CACHE", dir.join("cache"))
        .env("ROCFORGE_STORE", dir.join("store"))
        .env("ROCFORGE_CONFIG", dir.join("no-user-config.toml"))
        .env("HOME", dir);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

pub fn rocforge(dir: &Path, args: &[&str]) -> Out {
    rocforge_env(dir, &[], args)
}

pub fn ok(dir: &Path, args: &[&str]) -> String {
    let o = rocforge(dir, args);
    assert_eq!(
        o.code, 0,
        "rocforge {args:?} failed:\nstdout: {}\nstderr: {}",
        o.stdout, o.stderr
    );
    o.stdout
}

pub fn fails(dir: &Path, args: &[&str]) -> String {
    let o = rocforge(dir, args);
    assert_eq!(
        o.code, 1,
        "rocforge {args:?} should fail:\nstdout: {}\nstderr: {}",
        o.stdout, o.stderr
    );
    o.stderr
}

/// Runs git with a fixed identity and dates, so commits are reproducible.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .current_dir(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@localhost")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@localhost")
        .env("GIT_AUTHOR_DATE", "2024-01-01T00:00:00Z")
        .env("GIT_COMMITTER_DATE", "2024-01-01T00:00:00Z")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .output()
        .expect("git");
    assert!(
        out.status.success(),
        "git {args:?} in {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A repository at `dir` holding `files`, committed and tagged.
pub fn make_repo(dir: &Path, files: &[(&str, &str)], tag: &str) -> String {
    std::fs::create_dir_all(dir).unwrap();
    git(dir, &["init", "-q", "-b", "main"]);
    // Served repositories allow partial clones (servers like GitHub do).
    git(dir, &["config", "uploadpack.allowFilter", "true"]);
    git(dir, &["config", "uploadpack.allowAnySHA1InWant", "true"]);
    commit_files(dir, files, "initial");
    git(dir, &["tag", "-a", tag, "-m", tag]);
    git(dir, &["rev-parse", "HEAD"])
}

pub fn commit_files(dir: &Path, files: &[(&str, &str)], message: &str) -> String {
    for (path, text) in files {
        let p = dir.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", message]);
    git(dir, &["rev-parse", "HEAD"])
}

/// `git daemon` on 127.0.0.1 serving every repository under `base`; killed on drop.
pub struct GitDaemon {
    child: Child,
    pub port: u16,
}

impl GitDaemon {
    pub fn start(base: &Path) -> GitDaemon {
        let port = free_port();
        // Run git-daemon itself: killing a `git daemon` wrapper would orphan the real server.
        let exec_path = Command::new("git")
            .arg("--exec-path")
            .output()
            .expect("git must be installed");
        let exec_path = PathBuf::from(String::from_utf8_lossy(&exec_path.stdout).trim());
        let child = Command::new(exec_path.join("git-daemon"))
            .args(["--reuseaddr", "--export-all", "--listen=127.0.0.1"])
            .arg(format!("--port={port}"))
            .arg(format!("--base-path={}", base.display()))
            .arg(base)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("git daemon (part of git) must be installed");
        let start = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "git daemon did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        GitDaemon { child, port }
    }

    pub fn url(&self) -> String {
        format!("git://127.0.0.1:{}/", self.port)
    }
}

impl Drop for GitDaemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub fn manifest() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// containers/containers.conf: podman's configuration for the tests and CI.
pub fn containers_conf() -> PathBuf {
    manifest().join("containers/containers.conf")
}

/// Whether podman (with [`containers_conf`]) holds `image`; in CI its absence fails the test,
/// as [`require`] does.
pub fn podman_ready(image: &str) -> bool {
    let ok = Command::new("podman")
        .args(["image", "exists", image])
        .env("CONTAINERS_CONF", containers_conf())
        .status()
        .is_ok_and(|s| s.success());
    require(&format!("podman with the image {image}"), ok)
}

/// The names of the containers a rocforge process `pid` started (labelled rocforge.pid), running
/// or not; empty when none is left.
pub fn containers_of(pid: u32) -> String {
    let ps = Command::new("podman")
        .env("CONTAINERS_CONF", containers_conf())
        .args([
            "ps",
            "--all",
            "--filter",
            &format!("label=rocforge.pid={pid}"),
            "--format",
            "{{.Names}}",
        ])
        .output()
        .unwrap();
    String::from_utf8_lossy(&ps.stdout).trim().to_string()
}

/// `tar -C dir -czf archive entry`.
pub fn tar_gz(dir: &Path, entry: &str, archive: &Path) {
    let status = Command::new("tar")
        .arg("-C")
        .arg(dir)
        .arg("-czf")
        .arg(archive)
        .arg(entry)
        .status()
        .unwrap();
    assert!(status.success(), "tar -czf {}", archive.display());
}

/// The release the test catalogs build: `recipes/arches.toml` (the base fixture's) and
/// `recipes/test-1.0/release.toml` (prefix /opt/rocm, gfx90c, builder image `image`) under
/// `root`. Returns the release's recipe directory.
pub fn test_release(root: &Path, image: &str) -> PathBuf {
    let rel = root.join("recipes/test-1.0");
    std::fs::create_dir_all(&rel).unwrap();
    std::fs::copy(
        manifest().join("tests/fixtures/base/recipes/arches.toml"),
        root.join("recipes/arches.toml"),
    )
    .unwrap();
    std::fs::write(
        rel.join("release.toml"),
        format!("name = \"test-1.0\"\nversion = \"1.0\"\nimage = \"{image}\"\nprefix = \"/opt/rocm\"\narches = [\"gfx90c\"]\n"),
    )
    .unwrap();
    rel
}

/// What `build --format json` reports per step: (component, result).
pub fn step_results(report: &serde_json::Value) -> Vec<(String, String)> {
    report["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["component"].as_str().unwrap().to_string(),
                s["result"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// [`step_results`] of a run's stdout.
pub fn results(out: &Out) -> Vec<(String, String)> {
    let v: serde_json::Value = serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", out.stdout, out.stderr));
    step_results(&v)
}

/// Every file under `dir` with its contents, for comparing trees.
pub fn tree_contents(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, Vec<u8>)>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().flatten().collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let p = e.path();
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                out.push((
                    p.strip_prefix(root).unwrap().display().to_string(),
                    std::fs::read(&p).unwrap(),
                ));
            }
        }
    }
    walk(dir, dir, &mut out);
    out
}

/// Python's http.server on 127.0.0.1 serving `dir`; killed on drop.
pub struct HttpServer {
    child: Child,
    pub port: u16,
}

impl HttpServer {
    pub fn start(dir: &Path) -> HttpServer {
        let port = free_port();
        let child = Command::new("python3")
            .args(["-m", "http.server", "--bind", "127.0.0.1"])
            .arg(port.to_string())
            .arg("--directory")
            .arg(dir)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("python3 must be installed");
        let start = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "http.server did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        HttpServer { child, port }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn sha256_file(path: &Path) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(std::fs::read(path).unwrap()))
}

/// A CNCF distribution registry (Debian's docker-registry) on 127.0.0.1; killed on drop.
pub struct Registry {
    child: Child,
    pub port: u16,
    _dir: tempfile::TempDir,
}

impl Registry {
    /// None when docker-registry is not installed.
    pub fn start() -> Option<Registry> {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let config = dir.path().join("config.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: 127.0.0.1:{port}\n",
                dir.path().join("data").display()
            ),
        )
        .unwrap();
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(&config)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .ok()?;
        let start = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "docker-registry did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Some(Registry {
            child,
            port,
            _dir: dir,
        })
    }

    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Where the registry keeps the bytes of blob `digest` (`sha256:…`): for tests that damage
    /// what it serves.
    pub fn blob_file(&self, digest: &str) -> PathBuf {
        let hex = digest.trim_start_matches("sha256:");
        self._dir
            .path()
            .join("data/docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(hex)
            .join("data")
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether `tool` is on PATH.
pub fn which(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// A registry for the test; None where docker-registry is missing (the test is skipped; in CI
/// it fails, as [`require`] does).
pub fn registry() -> Option<Registry> {
    if !require("docker-registry", which("docker-registry")) {
        return None;
    }
    Some(Registry::start().expect("docker-registry starts"))
}

/// In CI a missing tool fails the test; elsewhere the test is skipped with the reason printed.
pub fn require(what: &str, ok: bool) -> bool {
    if ok {
        return true;
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{what} is required in CI (.ci/setup-machine.sh installs it)");
    }
    eprintln!("skipping: {what} is not available here (run .ci/setup-machine.sh)");
    false
}

/// One request a [`JsonServer`] answered: method, path with query, and headers (lowercase names).
#[derive(Debug, Clone)]
pub struct JsonRequest {
    pub method: String,
    pub target: String,
    pub headers: std::collections::BTreeMap<String, String>,
}

/// A tiny HTTP/1.1 server on 127.0.0.1 answering each request with `(status, JSON body)` from
/// `answer`, recording every request. For API clients (GitHub's runners list) in tests.
pub struct JsonServer {
    pub port: u16,
    requests: std::sync::Arc<std::sync::Mutex<Vec<JsonRequest>>>,
}

impl JsonServer {
    pub fn start(
        answer: impl Fn(&JsonRequest) -> (u16, String) + Send + Sync + 'static,
    ) -> JsonServer {
        use std::io::{BufRead, BufReader, Write};
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let requests = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (log, answer) = (requests.clone(), std::sync::Arc::new(answer));
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let (log, answer) = (log.clone(), answer.clone());
                std::thread::spawn(move || {
                    let mut r = BufReader::new(conn.try_clone().unwrap());
                    let mut w = conn;
                    loop {
                        let mut line = String::new();
                        if r.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        let mut parts = line.split_whitespace();
                        let method = parts.next().unwrap_or_default().to_string();
                        let target = parts.next().unwrap_or_default().to_string();
                        let mut headers = std::collections::BTreeMap::new();
                        loop {
                            let mut h = String::new();
                            if r.read_line(&mut h).unwrap_or(0) == 0 {
                                return;
                            }
                            let h = h.trim_end();
                            if h.is_empty() {
                                break;
                            }
                            if let Some((k, v)) = h.split_once(':') {
                                headers.insert(k.to_ascii_lowercase(), v.trim().to_string());
                            }
                        }
                        let req = JsonRequest {
                            method,
                            target,
                            headers,
                        };
                        let (status, body) = answer(&req);
                        log.lock().unwrap().push(req);
                        let resp = format!(
                            "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                            body.len()
                        );
                        if w.write_all(resp.as_bytes()).is_err() {
                            return;
                        }
                    }
                });
            }
        });
        JsonServer { port, requests }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn requests(&self) -> Vec<JsonRequest> {
        self.requests.lock().unwrap().clone()
    }
}

/// A header with its name written raw (the tar crate refuses to write `..` or absolute names).
pub fn raw(
    kind: tar::EntryType,
    name: &str,
    mode: u32,
    size: u64,
    link: Option<&str>,
) -> tar::Header {
    let mut h = tar::Header::new_old();
    h.set_entry_type(kind);
    h.set_mode(mode);
    h.set_size(size);
    {
        let old = h.as_old_mut();
        old.name = [0; 100];
        old.name[..name.len()].copy_from_slice(name.as_bytes());
        if let Some(l) = link {
            old.linkname = [0; 100];
            old.linkname[..l.len()].copy_from_slice(l.as_bytes());
        }
    }
    h.set_cksum();
    h
}

/// An artifact tarball the test writes itself: `manifest` first, then `entries` as given
/// (hostile ones included), zstd-compressed.
pub fn write_artifact(
    path: &Path,
    manifest: &rocforge::package::manifest::Manifest,
    entries: &[(tar::Header, Vec<u8>)],
) {
    let f = std::fs::File::create(path).unwrap();
    let mut b = tar::Builder::new(zstd::stream::write::Encoder::new(f, 3).unwrap());
    let json = serde_json::to_vec(manifest).unwrap();
    let mut h = tar::Header::new_gnu();
    h.set_size(json.len() as u64);
    h.set_mode(0o644);
    h.set_cksum();
    b.append_data(
        &mut h,
        rocforge::package::manifest::MANIFEST_NAME,
        &json[..],
    )
    .unwrap();
    for (h, data) in entries {
        b.append(h, &data[..]).unwrap();
    }
    b.into_inner().unwrap().finish().unwrap();
}

/// Every path under `dir` with its mode, size and link target, sorted: what must stay as it
/// was (a dry run, a refused install).
pub fn listing(dir: &Path) -> Vec<String> {
    use std::os::unix::fs::PermissionsExt;
    let mut out = Vec::new();
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        for e in rd.flatten() {
            let p = e.path();
            let m = std::fs::symlink_metadata(&p).unwrap();
            out.push(format!(
                "{} {:o} {} {}",
                p.strip_prefix(root).unwrap().display(),
                m.permissions().mode(),
                m.len(),
                if m.file_type().is_symlink() {
                    std::fs::read_link(&p).unwrap().display().to_string()
                } else {
                    String::new()
                }
            ));
            if m.is_dir() {
                walk(root, &p, out);
            }
        }
    }
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// A CMake project of two ninja steps in `src`, for the tests of stopped and resumed builds:
/// the first appends a line to the file `-DCOUNTER=` names (so its runs are counted), the second
/// runs `second` (a shell script given `-DFLAG=`'s path as `$1`) and makes what is installed.
pub fn two_step_source(src: &Path, second: &str) {
    std::fs::create_dir_all(src).unwrap();
    std::fs::write(src.join("LICENSE"), "MIT\n").unwrap();
    std::fs::write(
        src.join("first.sh"),
        "echo ran >> \"$1\"\necho one > first.txt\n",
    )
    .unwrap();
    std::fs::write(src.join("second.sh"), second).unwrap();
    std::fs::write(
        src.join("CMakeLists.txt"),
        "cmake_minimum_required(VERSION 3.16)\nproject(resumable NONE)\n\
         add_custom_command(OUTPUT first.txt COMMAND sh ${CMAKE_SOURCE_DIR}/first.sh ${COUNTER} VERBATIM)\n\
         add_custom_command(OUTPUT second.txt DEPENDS first.txt COMMAND sh ${CMAKE_SOURCE_DIR}/second.sh ${FLAG} VERBATIM)\n\
         add_custom_target(steps ALL DEPENDS second.txt)\n\
         install(FILES ${CMAKE_BINARY_DIR}/second.txt DESTINATION share/resumable)\n",
    )
    .unwrap();
}

/// The disk `dir` takes as `du` counts it (blocks, hard links once), for checking what
/// rocforge records against the tool a user would ask.
pub fn du_blocks(dir: &Path) -> u64 {
    let out = Command::new("du")
        .args(["-s", "--block-size=1"])
        .arg(dir)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .expect("du's figure")
}
