//! Containment, tried as an attacker would: a publisher whose key leaked signs releases with
//! hostile entries, a hostile mirror (a server on 127.0.0.1) answers with endless, dripping or
//! redirected bodies, and a prefix holds forged receipts and journals. Whatever they try,
//! nothing outside the prefix changes, nothing panics, and the error names the artifact, the
//! entry and the rule.

use crate::common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use rocforge::package::manifest::{FileEntry, Kind, MANIFEST_SCHEMA, Manifest};

struct Fx {
    w: World,
}

derefs_to_world!(Fx);

impl Fx {
    /// An empty catalog and a trusted key pair: all an attacker with the key needs. The
    /// attacker's world has its own config, state and caches.
    fn new() -> Fx {
        let w = World::new()
            .release("localhost/rocforge-none:1")
            .with_keys()
            .state()
            .under("ROCFORGE_CACHE", "cache")
            .under("XDG_CACHE_HOME", "xdg-cache")
            .build();
        // The victim's files beside the prefix.
        w.write("outside/victim", "precious");
        Fx { w }
    }
    /// Fails cleanly (exit 1: an error, not a panic) and returns stderr.
    fn fails(&self, args: &[&str]) -> String {
        let o = self.run(args);
        assert_eq!(
            o.code, 1,
            "{args:?} should fail:\n{}\n{}",
            o.stdout, o.stderr
        );
        assert!(!o.stderr.contains("panicked"), "{}", o.stderr);
        o.stderr
    }
    fn prefix(&self) -> PathBuf {
        self.root().join("prefix")
    }
    fn p(&self) -> String {
        self.prefix().display().to_string()
    }
    /// A signed release of `tarballs` (name, version, listed, entries) in a new directory.
    fn release(&self, dir: &str, tarballs: &[Tarball]) -> PathBuf {
        let d = self.root().join(dir);
        std::fs::create_dir_all(&d).unwrap();
        for t in tarballs {
            t.write(&d);
        }
        let key = self.root().join("keys/rocforge.key").display().to_string();
        self.ok(&["index", &d.display().to_string(), "--sign-key", &key]);
        d
    }
    fn resign(&self, dir: &Path) {
        let key = self.root().join("keys/rocforge.key").display().to_string();
        let idx = dir.join("index.json").display().to_string();
        self.ok(&["sign", &idx, "--sign-key", &key]);
    }
    fn install(&self, component: &str, from: &str, extra: &[&str]) -> Out {
        let p = self.p();
        let mut args = vec![
            "install", component, "--arch", "gfx90c", "--from", from, "--prefix", &p,
        ];
        args.extend_from_slice(extra);
        self.run(&args)
    }
    /// A signed release of component `tool`, one file at `path` (named by a GNU long-name
    /// header), and an empty prefix: the release's path for `--from`.
    fn long_path_release(&self, path: &str, data: &[u8]) -> String {
        let tool = Tarball::new(
            "tool",
            vec![file(path, data)],
            vec![long_name(path), e_file("x", data)],
        );
        let rel = self.release("rel", &[tool]);
        std::fs::create_dir_all(self.prefix()).unwrap();
        rel.display().to_string()
    }
    /// `install COMPONENT --arch gfx90c --from FROM` into the prefix fails cleanly: its stderr.
    fn install_fails(&self, component: &str, from: &str) -> String {
        let p = self.p();
        self.fails(&[
            "install", component, "--arch", "gfx90c", "--from", from, "--prefix", &p,
        ])
    }
    /// Nothing outside the prefix changed: the victim is intact and alone.
    fn outside_intact(&self) {
        assert_eq!(
            std::fs::read_to_string(self.root().join("outside/victim")).unwrap(),
            "precious"
        );
        let names: Vec<_> = std::fs::read_dir(self.root().join("outside"))
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(names.len(), 1, "written outside the prefix: {names:?}");
        assert!(!self.root().join("victim").exists());
        assert!(!self.root().parent().unwrap().join("victim").exists());
    }
}

fn edit_index(dir: &Path, f: impl FnOnce(&mut serde_json::Value)) {
    let p = dir.join("index.json");
    let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
    f(&mut v);
    std::fs::write(&p, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
}

/// A tar header and the entry's bytes.
type Entry = (tar::Header, Vec<u8>);

struct Tarball {
    name: &'static str,
    version: &'static str,
    listed: Vec<FileEntry>,
    entries: Vec<(tar::Header, Vec<u8>)>,
    depends: Vec<&'static str>,
}

impl Tarball {
    fn new(
        name: &'static str,
        listed: Vec<FileEntry>,
        entries: Vec<(tar::Header, Vec<u8>)>,
    ) -> Self {
        Tarball {
            name,
            version: "1.0",
            listed,
            entries,
            depends: vec![],
        }
    }
    fn key(name: &str, version: &str) -> String {
        format!("{:0>64}", hex::encode(format!("{name}{version}")))
    }
    fn write(&self, dir: &Path) {
        let m = Manifest {
            schema: MANIFEST_SCHEMA.into(),
            kind: Default::default(),
            tests: None,
            id: rocforge::ids::ArtifactId {
                name: self.name.parse().unwrap(),
                version: self.version.into(),
                release: "test-1.0".into(),
                targets: vec!["gfx90c".parse().unwrap()],
                key: Tarball::key(self.name, self.version).parse().unwrap(),
            },
            depends: self
                .depends
                .iter()
                .map(|d| rocforge::package::manifest::Dependency {
                    name: d.parse().unwrap(),
                    key: Tarball::key(d, "1.0").parse().unwrap(),
                })
                .collect(),
            build_depends: vec![],
            license: None,
            licenses: vec![],
            facts: Default::default(),
            image: None,
            runtime: "host".into(),
            reproducible: false,
            glibc_floor: None,
            coverage: None,
            source_date_epoch: 0,
            installed_size: self.listed.iter().map(|f| f.size).sum(),
            hash_input: serde_json::Value::Null,
            files: self.listed.clone(),
        };
        write_artifact(
            &dir.join(format!(
                "{}-{}-gfx90c-00000000.tar.zst",
                self.name, self.version
            )),
            &m,
            &self.entries,
        );
    }
}

fn file(path: &str, data: &[u8]) -> FileEntry {
    use sha2::Digest;
    FileEntry {
        path: path.into(),
        kind: Kind::File,
        size: data.len() as u64,
        sha256: Some(hex::encode(sha2::Sha256::digest(data))),
        executable: false,
        target: None,
    }
}

fn dir(path: &str) -> FileEntry {
    FileEntry {
        path: path.into(),
        kind: Kind::Dir,
        size: 0,
        sha256: None,
        executable: false,
        target: None,
    }
}

fn link(path: &str, target: &str) -> FileEntry {
    FileEntry {
        path: path.into(),
        kind: Kind::Symlink,
        size: 0,
        sha256: None,
        executable: false,
        target: Some(target.into()),
    }
}

fn e_dir(path: &str) -> (tar::Header, Vec<u8>) {
    (
        raw(
            tar::EntryType::Directory,
            &format!("{path}/"),
            0o755,
            0,
            None,
        ),
        vec![],
    )
}

/// A GNU long-name header giving the entry after it the name `path`.
fn long_name(path: &str) -> (tar::Header, Vec<u8>) {
    let mut long = tar::Header::new_gnu();
    long.set_entry_type(tar::EntryType::GNULongName);
    long.set_size(path.len() as u64 + 1);
    long.set_mode(0o644);
    long.set_cksum();
    let mut name = path.as_bytes().to_vec();
    name.push(0);
    (long, name)
}

fn e_file(path: &str, data: &[u8]) -> (tar::Header, Vec<u8>) {
    (
        raw(
            tar::EntryType::Regular,
            path,
            0o644,
            data.len() as u64,
            None,
        ),
        data.to_vec(),
    )
}

fn e_link(path: &str, target: &str) -> (tar::Header, Vec<u8>) {
    (
        raw(tar::EntryType::Symlink, path, 0o777, 0, Some(target)),
        vec![],
    )
}

#[test]
fn symlink_chains_cannot_lead_a_write_or_a_delete_outside() {
    let fx = Fx::new();
    // `d/up -> ..` is inside; `d/esc -> up/../../../outside` is inside only if `up` is not a
    // link: lexically it climbs from d, really from where `up` points.
    let chain = Tarball::new(
        "chain",
        vec![
            dir("d"),
            link("d/up", ".."),
            link("d/esc", "up/../../../outside"),
        ],
        vec![
            e_dir("d"),
            e_link("d/up", ".."),
            e_link("d/esc", "up/../../../outside"),
        ],
    );
    let rel = fx.release("chain", &[chain]);
    let err = fx.fails(&fx_install_args(&fx, "chain", &rel));
    assert!(err.contains("d/esc"), "{err}");
    assert!(err.contains("climbs with .. after a name"), "{err}");
    assert!(!fx.prefix().exists(), "the prefix was created");

    // Two artifacts of one install: the first ships a link that is inside, the second writes
    // through it.
    let base = Tarball::new(
        "base",
        vec![dir("lib"), dir("share"), link("lib/l", "../share")],
        vec![e_dir("lib"), e_dir("share"), e_link("lib/l", "../share")],
    );
    let mut writer = Tarball::new(
        "writer",
        vec![dir("lib"), dir("lib/l"), file("lib/l/evil", b"evil")],
        vec![e_dir("lib"), e_dir("lib/l"), e_file("lib/l/evil", b"evil")],
    );
    writer.depends = vec!["base"];
    let rel = fx.release("two", &[base, writer]);
    let err = fx.fails(&fx_install_args(&fx, "writer", &rel));
    assert!(err.contains("lib/l"), "{err}");
    assert!(err.contains("a file or symlink in base-1.0"), "{err}");
    assert!(!fx.prefix().exists());
    // Two artifacts of one install that ship the same file: a conflict, naming both.
    let one = Tarball::new("one", vec![file("same", b"1")], vec![e_file("same", b"1")]);
    let mut two = Tarball::new("two", vec![file("same", b"2")], vec![e_file("same", b"2")]);
    two.depends = vec!["one"];
    let rel_twins = fx.release("twins", &[one, two]);
    let err = fx.fails(&fx_install_args(&fx, "two", &rel_twins));
    assert!(
        err.contains("\"same\": one-1.0-gfx90c-00000000.tar.zst has it too"),
        "{err}"
    );
    assert!(!fx.prefix().exists());

    // The same across two installs: base is in the prefix, writer comes later.
    let r = rel.display().to_string();
    assert_eq!(fx.install("base", &r, &[]).code, 0);
    let err = fx.fails(&fx_install_args(&fx, "writer", &rel));
    assert!(err.contains("lib/l"), "{err}");
    assert!(!fx.prefix().join("share/evil").exists());
    fx.outside_intact();

    // A prefix whose directory was swapped for a link (by hand, or by an older rocforge): the
    // receipt still lists d2/f, but d2/f now resolves outside. Uninstall must not follow it.
    let prefix = fx.prefix();
    std::fs::create_dir_all(prefix.join(".rocforge/receipts")).unwrap();
    std::os::unix::fs::symlink("../outside", prefix.join("d2")).unwrap();
    std::fs::write(
        prefix.join(".rocforge/receipts/swapped.json"),
        serde_json::json!({
            "schema": "rocforge.receipt/1", "name": "swapped", "version": "1", "targets": [],
            "key": "ab".repeat(32), "sha256": "00", "url": "file:///x", "installed": "2025-01-01T00:00:00Z",
            "files": ["d2/victim"], "dirs": ["d2"],
        })
        .to_string(),
    )
    .unwrap();
    fx.ok(&["uninstall", "swapped", "--prefix", &fx.p()]);
    fx.outside_intact();
}

fn fx_install_args<'a>(fx: &'a Fx, c: &'a str, rel: &Path) -> Vec<&'a str> {
    let from: &'a str = Box::leak(rel.display().to_string().into_boxed_str());
    let p: &'a str = Box::leak(fx.p().into_boxed_str());
    vec![
        "install", c, "--arch", "gfx90c", "--from", from, "--prefix", p,
    ]
}

#[test]
fn rocforge_names_in_a_tarball_are_refused() {
    let fx = Fx::new();
    let forged = serde_json::json!({
        "schema": "rocforge.receipt/1", "name": "victim", "version": "9", "targets": [],
        "key": Tarball::key("victim", "1.0"), "sha256": "00", "url": "file:///x",
        "installed": "2025-01-01T00:00:00Z", "files": ["../outside/victim"], "dirs": [],
    })
    .to_string();
    let journal = serde_json::json!({"receipts": [], "remove": ["../outside/victim"]}).to_string();
    let cases: Vec<(&'static str, Vec<FileEntry>, Vec<Entry>)> = vec![
        (
            "receipt",
            vec![
                dir(".rocforge"),
                dir(".rocforge/receipts"),
                file(".rocforge/receipts/victim.json", forged.as_bytes()),
            ],
            vec![
                e_dir(".rocforge"),
                e_dir(".rocforge/receipts"),
                e_file(".rocforge/receipts/victim.json", forged.as_bytes()),
            ],
        ),
        (
            "journal",
            vec![file(".rocforge-merge.json", journal.as_bytes())],
            vec![e_file(".rocforge-merge.json", journal.as_bytes())],
        ),
        (
            "unlisted",
            vec![file("ok", b"ok")],
            vec![
                e_file("ok", b"ok"),
                e_file(".rocforge-merge.json", journal.as_bytes()),
            ],
        ),
        (
            "link",
            vec![dir("lib"), link("lib/r", "../.rocforge/receipts")],
            vec![e_dir("lib"), e_link("lib/r", "../.rocforge/receipts")],
        ),
    ];
    for (name, listed, entries) in cases {
        let comp: &'static str = Box::leak(format!("forge{name}").into_boxed_str());
        let rel = fx.release(&format!("r-{name}"), &[Tarball::new(comp, listed, entries)]);
        let err = fx.fails(&fx_install_args(&fx, comp, &rel));
        assert!(err.contains(".rocforge"), "{name}: {err}");
        assert!(err.contains(comp), "{name}: the artifact is named: {err}");
        assert!(!fx.prefix().exists(), "{name}");
    }
    fx.outside_intact();
}

#[test]
fn hostile_names_digests_and_keys_in_a_signed_index_are_refused_without_panic() {
    let fx = Fx::new();
    let rel = fx.release(
        "names",
        &[Tarball::new(
            "plain",
            vec![file("ok", b"ok")],
            vec![e_file("ok", b"ok")],
        )],
    );
    let cases: Vec<(&str, &str, serde_json::Value, &str)> = vec![
        (
            "name",
            "name",
            "../../../../victim/evil".into(),
            "is not a component name",
        ),
        (
            "sha256",
            "sha256",
            "é".repeat(40).into(),
            "is not a sha256 digest",
        ),
        (
            "key",
            "key",
            "ключ".repeat(10).into(),
            "is not a content key",
        ),
        (
            "escape",
            "name",
            "evil\u{1b}[2J".into(),
            "is not a component name",
        ),
        (
            "version",
            "version",
            "1.0\u{1b}[2J\r".into(),
            "is not a plain word",
        ),
    ];
    for (case, field, value, rule) in cases {
        let d = fx.root().join(format!("names-{case}"));
        rocforge::fsutil::copy_tree(&rel, &d).unwrap();
        edit_index(&d, |v| v["artifacts"][0][field] = value.clone());
        fx.resign(&d);
        let c = if field == "name" {
            value.as_str().unwrap()
        } else {
            "plain"
        };
        let err = fx.fails(&fx_install_args(&fx, c, &d));
        assert!(err.contains(rule), "{case}: {err}");
        // Refused by its type where the index is read, naming the artifact (the identity's
        // fields are flattened into it, so the path ends there) or the field; or by the
        // index's own rules, naming the field.
        assert!(
            err.contains("artifacts[0]") || err.contains(&format!("{field} ")),
            "{case}: {err}"
        );
        assert!(!err.contains('\x1b'), "{case}: a raw escape was printed");
    }
    assert!(!fx.prefix().exists());
    assert!(!fx.root().parent().unwrap().join("victim").exists());

    // A receipt with a non-ASCII content key or a hostile name, left in the prefix: listed
    // without a panic, and ignored.
    let receipts = fx.prefix().join(".rocforge/receipts");
    std::fs::create_dir_all(&receipts).unwrap();
    for (file, name, key) in [
        ("odd.json", "odd", "ключключключключ"),
        ("evil.json", "../../evil", "ab"),
    ] {
        std::fs::write(
            receipts.join(file),
            serde_json::json!({
                "schema": "rocforge.receipt/1", "name": name, "version": "1", "targets": [],
                "key": key, "sha256": "00", "url": "file:///x",
                "installed": "2025-01-01T00:00:00Z", "files": [], "dirs": [],
            })
            .to_string(),
        )
        .unwrap();
    }
    let list = fx.ok(&["list", "--installed", "--prefix", &fx.p()]);
    assert!(
        !list.stdout.contains("odd") && !list.stdout.contains("evil"),
        "{}",
        list.stdout
    );
}

#[test]
fn a_forged_journal_beside_the_prefix_is_not_replayed() {
    let fx = Fx::new();
    let prefix = fx.prefix();
    std::fs::create_dir_all(&prefix).unwrap();
    std::fs::write(prefix.join("keep"), "keep").unwrap();
    // What a killed merge leaves: a staging directory with a journal. This one removes a file
    // outside and writes a receipt outside.
    let stage = fx.root().join(".prefix.tmp-1-abc");
    std::fs::create_dir_all(&stage).unwrap();
    std::fs::write(
        stage.join(".rocforge-merge.json"),
        serde_json::json!({
            "receipts": [{
                "schema": "rocforge.receipt/1", "name": "../../../outside/evil", "version": "1",
                "targets": [], "key": "ab", "sha256": "00", "url": "file:///x",
                "installed": "2025-01-01T00:00:00Z", "files": [], "dirs": [],
            }],
            "remove": ["../outside/victim"],
        })
        .to_string(),
    )
    .unwrap();
    fx.ok(&["list", "--installed", "--prefix", &fx.p()]);
    fx.outside_intact();
    assert!(!stage.exists(), "the forged staging is dropped");
    assert_eq!(
        std::fs::read_to_string(prefix.join("keep")).unwrap(),
        "keep"
    );
}

#[test]
fn tar_extension_headers_are_capped_and_hostile_paths_shown_short() {
    let fx = Fx::new();
    // A GNU long name of 64 MiB of one byte: a few KB once compressed.
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(tar::EntryType::GNULongName);
    h.set_size(64 << 20);
    h.set_mode(0o644);
    h.set_cksum();
    let bomb = (h, vec![b'a'; 64 << 20]);
    // A path full of control characters and terminal escapes, 3000 bytes long.
    let nasty = format!("lib/{}", "\x1b[2J\r\x07".repeat(750));
    let cases: Vec<(&'static str, Vec<Entry>, &str)> = vec![
        (
            "bomb",
            vec![bomb, e_file("x", b"x")],
            "a long name or PAX header may hold",
        ),
        (
            "escapes",
            vec![long_name(&nasty), e_file("x", b"x")],
            "is not in the manifest",
        ),
    ];
    for (name, entries, rule) in cases {
        let comp: &'static str = Box::leak(format!("ext{name}").into_boxed_str());
        let rel = fx.release(
            comp,
            &[Tarball::new(comp, vec![file("ok", b"ok")], entries)],
        );
        let o = fx.run(&fx_install_args(&fx, comp, &rel));
        assert_eq!(o.code, 1, "{name}: {}", o.stderr);
        assert!(o.stderr.contains(rule), "{name}: {}", o.stderr);
        assert!(
            o.stderr.len() < 4096,
            "{name}: {} bytes of stderr",
            o.stderr.len()
        );
        assert!(
            !o.stderr.contains('\x1b'),
            "{name}: a raw escape reached the terminal"
        );
    }
}

/// How the hostile mirror answers a request for `path`.
enum Answer {
    Bytes(Vec<u8>),
    /// Status 200 and bytes for ever.
    Endless,
    /// One byte every `Duration`, for ever.
    Drip(Duration),
    /// 302 to this URL.
    Redirect(String),
    NotFound,
}

/// A raw HTTP/1.0 server on 127.0.0.1: one thread per connection, `answer` per path.
struct Mirror {
    port: u16,
}

impl Mirror {
    fn start(answer: impl Fn(&str) -> Answer + Send + Sync + 'static) -> Mirror {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let answer = Arc::new(answer);
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let answer = answer.clone();
                std::thread::spawn(move || {
                    let mut r = BufReader::new(conn.try_clone().unwrap());
                    let mut w = conn;
                    let mut line = String::new();
                    if r.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    loop {
                        let mut h = String::new();
                        if r.read_line(&mut h).unwrap_or(0) == 0 || h.trim().is_empty() {
                            break;
                        }
                    }
                    let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
                    let _ = match answer(&path) {
                        Answer::Bytes(b) => w
                            .write_all(
                                format!("HTTP/1.0 200 OK\r\nContent-Length: {}\r\n\r\n", b.len())
                                    .as_bytes(),
                            )
                            .and_then(|()| w.write_all(&b)),
                        Answer::NotFound => {
                            w.write_all(b"HTTP/1.0 404 Not Found\r\nContent-Length: 0\r\n\r\n")
                        }
                        Answer::Redirect(to) => w.write_all(
                            format!(
                                "HTTP/1.0 302 Found\r\nLocation: {to}\r\nContent-Length: 0\r\n\r\n"
                            )
                            .as_bytes(),
                        ),
                        Answer::Endless => {
                            let chunk = vec![b'z'; 64 * 1024];
                            let _ = w.write_all(b"HTTP/1.0 200 OK\r\n\r\n");
                            loop {
                                if w.write_all(&chunk).is_err() {
                                    break Ok(());
                                }
                            }
                        }
                        Answer::Drip(every) => {
                            let _ = w.write_all(b"HTTP/1.0 200 OK\r\n\r\n");
                            loop {
                                if w.write_all(b"z").and_then(|()| w.flush()).is_err() {
                                    break Ok(());
                                }
                                std::thread::sleep(every);
                            }
                        }
                    };
                });
            }
        });
        Mirror { port }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }
}

/// Serves the files of `dir`, except the artifact tarballs, which `artifact` answers.
fn hostile(dir: &Path, artifact: impl Fn() -> Answer + Send + Sync + 'static) -> Mirror {
    let dir = dir.to_path_buf();
    Mirror::start(move |path| {
        let name = path.trim_start_matches('/');
        if name.ends_with(".tar.zst") {
            return artifact();
        }
        match std::fs::read(dir.join(name)) {
            Ok(b) => Answer::Bytes(b),
            Err(_) => Answer::NotFound,
        }
    })
}

fn du(dir: &Path) -> u64 {
    let mut n = 0;
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let m = std::fs::symlink_metadata(e.path()).unwrap();
        n += if m.is_dir() { du(&e.path()) } else { m.len() };
    }
    n
}

#[test]
fn a_hostile_mirror_can_neither_fill_the_disk_nor_stall_install_for_ever() {
    let fx = Fx::new();
    let rel = fx.release(
        "m",
        &[Tarball::new(
            "small",
            vec![file("ok", b"ok")],
            vec![e_file("ok", b"ok")],
        )],
    );
    let size = du(&rel);

    // An endless body for an artifact the signed index says is a few KB.
    let m = hostile(&rel, || Answer::Endless);
    let started = Instant::now();
    let err = fx.fails(&fx_install_args(&fx, "small", Path::new(&m.url())));
    assert!(err.contains("more than the"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(60));
    let cached = du(&fx.root().join("cache")) + du(&fx.root().join("xdg-cache"));
    assert!(
        cached <= size + 4096,
        "{cached} bytes kept for a {size}-byte release"
    );

    // A byte every half second: the idle timeout never trips, the deadline does.
    let m = hostile(&rel, || Answer::Drip(Duration::from_millis(500)));
    let started = Instant::now();
    let mut args = fx_install_args(&fx, "small", Path::new(&m.url()));
    args.extend(["--timeout", "3s"]);
    let err = fx.fails(&args);
    assert!(err.contains("not done after 3.0s"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(30));
    assert!(!fx.prefix().exists());
}

#[test]
fn redirects_to_another_host_are_held_to_the_host_rule() {
    let fx = Fx::new();
    let rel = fx.release(
        "redir",
        &[Tarball::new(
            "moved",
            vec![file("ok", b"ok")],
            vec![e_file("ok", b"ok")],
        )],
    );
    // The same bytes on another origin (another port is another origin).
    let other = HttpServer::start(&rel);
    let to = other.url();
    let m = hostile(&rel, move || {
        Answer::Redirect(format!("{to}moved-1.0-gfx90c-00000000.tar.zst"))
    });
    let err = fx.fails(&fx_install_args(&fx, "moved", Path::new(&m.url())));
    assert!(err.contains("another host than the index's"), "{err}");
    assert!(!fx.prefix().exists());
    // Allowed explicitly, it is followed.
    let mut args = fx_install_args(&fx, "moved", Path::new(&m.url()));
    let host = format!("127.0.0.1:{}", other.port);
    args.extend(["--allow-host", &host]);
    fx.ok(&args);
}

#[test]
fn downgrades_are_refused_unless_asked_for_and_file_to_dir_upgrades_work() {
    let fx = Fx::new();
    let pkg = |version: &'static str, data: &'static [u8]| Tarball {
        version,
        ..Tarball::new(
            "pkg",
            vec![file("pkg.txt", data)],
            vec![e_file("pkg.txt", data)],
        )
    };
    let mut tool = Tarball::new(
        "tool",
        vec![dir("share"), file("share/x", b"v1")],
        vec![e_dir("share"), e_file("share/x", b"v1")],
    );
    let old = fx.release("old", &[tool_clone(&tool), pkg("1.0", b"1")]);
    // 2.0 turns the file share/x into a directory.
    tool.version = "2.0";
    tool.listed = vec![dir("share"), dir("share/x"), file("share/x/y", b"v2")];
    tool.entries = vec![e_dir("share"), e_dir("share/x"), e_file("share/x/y", b"v2")];
    let new = fx.release("new", &[tool, pkg("2.0", b"2")]);
    let (o, n) = (old.display().to_string(), new.display().to_string());
    assert_eq!(fx.install("tool", &o, &[]).code, 0);
    assert_eq!(fx.install("pkg", &o, &[]).code, 0);
    let up = fx.install("tool", &n, &[]);
    assert_eq!(up.code, 0, "{}", up.stderr);
    assert_eq!(std::fs::read(fx.prefix().join("share/x/y")).unwrap(), b"v2");
    assert_eq!(fx.install("pkg", &n, &[]).code, 0);
    // The old (still valid, signed) index replayed.
    let err = fx.fails(&fx_install_args(&fx, "tool", &old));
    assert!(
        err.contains("tool 2.0 is installed; the index offers the older 1.0"),
        "{err}"
    );
    assert!(err.contains("--allow-downgrade"), "{err}");
    assert_eq!(std::fs::read(fx.prefix().join("share/x/y")).unwrap(), b"v2");
    fx.fails(&fx_install_args(&fx, "pkg", &old));
    let down = fx.install("pkg", &o, &["--allow-downgrade"]);
    assert_eq!(down.code, 0, "{}", down.stderr);
    assert_eq!(std::fs::read(fx.prefix().join("pkg.txt")).unwrap(), b"1");
}

/// The reverse of the upgrade above: a directory of the old version (with its files) becomes a
/// file; the directory goes with the old files, and one holding another component's file is
/// refused with the prefix unchanged.
#[test]
fn an_upgrade_that_turns_a_directory_into_a_file_installs() {
    let fx = Fx::new();
    let mut tool = Tarball::new(
        "tool",
        vec![
            dir("share"),
            dir("share/x"),
            dir("share/x/deep"),
            file("share/x/deep/y", b"v1"),
        ],
        vec![
            e_dir("share"),
            e_dir("share/x"),
            e_dir("share/x/deep"),
            e_file("share/x/deep/y", b"v1"),
        ],
    );
    let old = fx.release("old", &[tool_clone(&tool)]);
    tool.version = "2.0";
    tool.listed = vec![dir("share"), file("share/x", b"v2")];
    tool.entries = vec![e_dir("share"), e_file("share/x", b"v2")];
    let new = fx.release("new", &[tool]);
    let (o, n) = (old.display().to_string(), new.display().to_string());
    assert_eq!(fx.install("tool", &o, &[]).code, 0);
    // A file of the user's in the directory: refused, nothing changed.
    let mine = fx.prefix().join("share/x/mine.txt");
    std::fs::write(&mine, b"mine").unwrap();
    let refused = fx.install("tool", &n, &[]);
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert!(
        refused
            .stderr
            .contains("share/x already exists in the prefix"),
        "{}",
        refused.stderr
    );
    assert_eq!(
        std::fs::read(fx.prefix().join("share/x/deep/y")).unwrap(),
        b"v1"
    );
    std::fs::remove_file(&mine).unwrap();
    let up = fx.install("tool", &n, &[]);
    assert_eq!(up.code, 0, "{}", up.stderr);
    assert_eq!(std::fs::read(fx.prefix().join("share/x")).unwrap(), b"v2");
}

/// A signed index entry is what install checks: a tarball whose manifest names other targets
/// (or another version) than its entry is refused, naming both, and nothing is installed.
#[test]
fn a_manifest_that_disagrees_with_its_index_entry_is_refused() {
    let fx = Fx::new();
    let tool = Tarball::new("tool", vec![file("t", b"t")], vec![e_file("t", b"t")]);
    let rel = fx.release("rel", &[tool]);
    edit_index(&rel, |v| {
        v["artifacts"][0]["targets"] = serde_json::json!(["gfx902", "gfx90c"]);
    });
    fx.resign(&rel);
    let p = fx.p();
    let from = rel.display().to_string();
    let err = fx.fails(&[
        "install",
        "tool",
        "--arch",
        "gfx90c,gfx902",
        "--from",
        &from,
        "--prefix",
        &p,
    ]);
    assert!(
        err.contains("the manifest says tool 1.0 for gfx90c (")
            && err.contains("the index says tool 1.0 for gfx902,gfx90c ("),
        "{err}"
    );
    assert!(!fx.prefix().join("t").exists());
}

fn tool_clone(t: &Tarball) -> Tarball {
    Tarball {
        name: t.name,
        version: t.version,
        listed: t.listed.clone(),
        entries: t.entries.clone(),
        depends: t.depends.clone(),
    }
}

#[test]
fn passwords_in_urls_reach_neither_errors_nor_receipts() {
    let fx = Fx::new();
    let rel = fx.release(
        "creds",
        &[Tarball::new(
            "cred",
            vec![file("ok", b"ok")],
            vec![e_file("ok", b"ok")],
        )],
    );
    let server = HttpServer::start(&rel);
    let from = format!("http://user:s3cret-pw@127.0.0.1:{}/", server.port);
    let o = fx.install("cred", &from, &[]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(!o.stderr.contains("s3cret") && !o.stdout.contains("s3cret"));
    let receipt =
        std::fs::read_to_string(fx.prefix().join(".rocforge/receipts/cred.json")).unwrap();
    assert!(!receipt.contains("s3cret"), "{receipt}");
    // And in an error.
    let from = format!("http://user:s3cret-pw@127.0.0.1:{}/nowhere/", server.port);
    let o = fx.install("cred", &from, &[]);
    assert_eq!(o.code, 1);
    assert!(!o.stderr.contains("s3cret"), "{}", o.stderr);
}

#[test]
fn inspect_refuses_a_fifo_and_survives_a_file_truncated_under_it() {
    let fx = Fx::new();
    let fifo = fx.root().join("fifo.so");
    let c = std::ffi::CString::new(fifo.display().to_string()).unwrap();
    // SAFETY: a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    let started = Instant::now();
    let mut child = rocforge_command(fx.root(), &[], &["inspect", &fifo.display().to_string()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            panic!("inspect blocked on a FIFO");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    // The report (stdout) lists the file's error.
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("a FIFO; inspect reads regular files only"),
        "{text}"
    );

    // An ELF-looking file that another process keeps truncating and regrowing.
    let victim = fx.root().join("shrinking.so");
    let mut bytes = b"\x7fELF\x02\x01\x01\0".to_vec();
    bytes.resize(32 << 20, 0x41);
    std::fs::write(&victim, &bytes).unwrap();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let churn = {
        let (stop, victim) = (stop.clone(), victim.clone());
        std::thread::spawn(move || {
            let f = std::fs::OpenOptions::new()
                .write(true)
                .open(&victim)
                .unwrap();
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                f.set_len(4096).unwrap();
                f.set_len(32 << 20).unwrap();
            }
        })
    };
    for _ in 0..5 {
        let o = rocforge_command(fx.root(), &[], &["inspect", &victim.display().to_string()])
            .output()
            .unwrap();
        assert!(
            o.status.code().is_some(),
            "inspect died of a signal: {:?}",
            o.status
        );
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    churn.join().unwrap();
}

#[test]
fn a_secret_key_given_as_text_is_used_and_never_echoed() {
    let fx = Fx::new();
    let d = fx.root().join("text-key");
    std::fs::create_dir_all(&d).unwrap();
    Tarball::new("txt", vec![file("ok", b"ok")], vec![e_file("ok", b"ok")]).write(&d);
    let text = std::fs::read_to_string(fx.root().join("keys/rocforge.key")).unwrap();
    let dir = d.display().to_string();
    let run = |value: &str| {
        let cfg = fx.root().join("trust.toml");
        rocforge_command(
            fx.root(),
            &[("ROCFORGE_CONFIG", cfg.as_path())],
            &["--recipes", "recipes", "index", &dir],
        )
        .env("ROCFORGE_SIGNING_KEY", value)
        .output()
        .unwrap()
    };
    // What a CI secret named ROCFORGE_SIGNING_KEY holds: the key file's text.
    let o = run(&text);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(d.join("index.json.minisig").is_file());
    // Its base64 line alone, damaged: refused, and neither form is printed.
    let line = text.lines().nth(1).unwrap();
    let damaged = format!("{}AAAA", &line[..line.len() - 4]);
    for bad in [
        damaged.clone(),
        format!("untrusted comment: x\n{damaged}\n"),
    ] {
        let o = run(&bad);
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(!o.status.success(), "{all}");
        assert!(!all.contains(&line[..40]), "the key was echoed: {all}");
        assert!(!all.contains(&damaged[..40]), "the key was echoed: {all}");
    }
}

/// One answer of a [`registry_server`]: status, extra header lines, body.
type RegAnswer = (u16, Vec<String>, String);
/// What a [`registry_server`] was asked: each request's target and Authorization header.
type RegLog = Arc<std::sync::Mutex<Vec<(String, Option<String>)>>>;

/// A registry that answers `/v2/…` requests with `answer(target, authorization)`, recording
/// each request's target and Authorization header.
fn registry_server(
    answer: impl Fn(&str, Option<&str>) -> RegAnswer + Send + Sync + 'static,
) -> (u16, RegLog) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let log = Arc::new(std::sync::Mutex::new(Vec::new()));
    let (seen, answer) = (log.clone(), Arc::new(answer));
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let (seen, answer) = (seen.clone(), answer.clone());
            std::thread::spawn(move || {
                let mut r = BufReader::new(conn.try_clone().unwrap());
                let mut w = conn;
                loop {
                    let mut line = String::new();
                    if r.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    let target = line
                        .split_whitespace()
                        .nth(1)
                        .unwrap_or_default()
                        .to_string();
                    let mut auth = None;
                    loop {
                        let mut h = String::new();
                        if r.read_line(&mut h).unwrap_or(0) == 0 {
                            return;
                        }
                        let h = h.trim_end();
                        if h.is_empty() {
                            break;
                        }
                        if let Some((k, v)) = h.split_once(':')
                            && k.eq_ignore_ascii_case("authorization")
                        {
                            auth = Some(v.trim().to_string());
                        }
                    }
                    let (status, headers, body) = answer(&target, auth.as_deref());
                    seen.lock().unwrap().push((target, auth));
                    let mut resp = format!(
                        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
                        body.len()
                    );
                    for h in headers {
                        resp.push_str(&h);
                        resp.push_str("\r\n");
                    }
                    resp.push_str("\r\n");
                    resp.push_str(&body);
                    if w.write_all(resp.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    (port, log)
}

/// `rocforge report oci://…` with registry credentials, killed after a minute if still running.
fn report_from(dir: &Path, url: &str) -> (Option<i32>, String) {
    let mut cmd = rocforge_command(
        dir,
        &[
            ("ROCFORGE_REGISTRY_USER", Path::new("reg-user")),
            ("ROCFORGE_REGISTRY_PASSWORD", Path::new("reg-secret-pw")),
        ],
        &["report", url, "--out", "rep", "--allow-unsigned"],
    );
    let mut child = cmd
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let code = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s.code();
        }
        if started.elapsed() > Duration::from_secs(60) {
            child.kill().unwrap();
            child.wait().unwrap();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    (code, err)
}

/// A registry whose tag list pages for ever is cut off with a message; a next page on another
/// host (here another port of 127.0.0.1) never receives the registry's credentials, not even
/// when it asks for them.
#[test]
fn a_hostile_registry_can_neither_page_for_ever_nor_collect_credentials_for_another_host() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let basic = "Basic cmVnLXVzZXI6cmVnLXNlY3JldC1wdw=="; // reg-user:reg-secret-pw
    let challenge = || vec!["WWW-Authenticate: Basic realm=\"r\"".to_string()];

    let (endless, endless_log) = registry_server(move |target, auth| {
        if auth != Some(basic) {
            return (401, challenge(), "{}".into());
        }
        let n: u64 = target
            .rsplit('=')
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        (
            200,
            vec![format!(
                "Link: </v2/x/tags/list?n=1000&last={}>; rel=\"next\"",
                n + 1
            )],
            format!("{{\"name\":\"x\",\"tags\":[\"results-{n}\"]}}"),
        )
    });
    let (code, err) = report_from(dir, &format!("oci://127.0.0.1:{endless}/x"));
    assert_eq!(code, Some(1), "stopped with an error, not killed: {err}");
    assert!(
        err.contains("the tag list goes on past 1000 pages"),
        "{err}"
    );
    assert!(endless_log.lock().unwrap().len() <= 1002);

    let (other, other_log) = registry_server(move |_, _| (401, challenge(), "{}".into()));
    let (first, _) = registry_server(move |_, auth| {
        if auth != Some(basic) {
            return (401, challenge(), "{}".into());
        }
        (
            200,
            vec![format!(
                "Link: <http://127.0.0.1:{other}/v2/x/tags/list?n=1000&last=a>; rel=\"next\""
            )],
            "{\"name\":\"x\",\"tags\":[\"results-a\"]}".into(),
        )
    });
    let (code, err) = report_from(dir, &format!("oci://127.0.0.1:{first}/x"));
    assert_eq!(code, Some(1), "{err}");
    let asked = other_log.lock().unwrap().clone();
    assert!(!asked.is_empty(), "the next page was asked for");
    assert!(
        asked.iter().all(|(_, auth)| auth.is_none()),
        "credentials went to another host: {asked:?}"
    );
    assert!(!err.contains("reg-secret-pw"), "{err}");
}

/// A registry's Bearer challenge names the token server (any URL): one that answers with a
/// token that never ends is read up to a cap, gives no token, and the command fails on the
/// registry's refusal at once, rather than holding the endless answer in memory.
#[test]
fn an_endless_token_answer_is_cut_off() {
    let tmp = tempfile::tempdir().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let token_port = listener.local_addr().unwrap().port();
    let streamed = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let counted = streamed.clone();
    std::thread::spawn(move || {
        for mut conn in listener.incoming().flatten() {
            let counted = counted.clone();
            std::thread::spawn(move || {
                let mut head = [0u8; 4096];
                let _ = conn.read(&mut head);
                let start = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n{\"token\":\"";
                if conn.write_all(start.as_bytes()).is_err() {
                    return;
                }
                let chunk = vec![b'a'; 64 << 10];
                while conn.write_all(&chunk).is_ok() {
                    counted.fetch_add(chunk.len() as u64, std::sync::atomic::Ordering::Relaxed);
                }
            });
        }
    });
    let challenge = format!(
        "WWW-Authenticate: Bearer realm=\"http://127.0.0.1:{token_port}/token\",service=\"r\""
    );
    let (registry, asked) =
        registry_server(move |_, _| (401, vec![challenge.clone()], "{}".into()));
    let started = Instant::now();
    let (code, err) = report_from(tmp.path(), &format!("oci://127.0.0.1:{registry}/x"));
    assert_eq!(code, Some(1), "stopped with an error, not killed: {err}");
    assert!(started.elapsed() < Duration::from_secs(50), "{err}");
    assert!(!asked.lock().unwrap().is_empty());
    // What the server managed to send before rocforge hung up: the cap and the socket buffers.
    let sent = streamed.load(std::sync::atomic::Ordering::Relaxed);
    assert!(
        sent < 64 << 20,
        "{sent} bytes were taken from the endless answer"
    );
}

/// A kill -9 part way through an uninstall of many files (the finding: files left and the
/// receipt, the component listed as installed, install saying "already installed"): the next
/// command on the prefix finishes it. A component whose files were removed by hand is listed
/// as damaged and install puts them back.
#[test]
fn an_uninstall_killed_part_way_is_finished_and_a_damaged_component_repaired() {
    let fx = Fx::new();
    let n = 3000;
    let names: Vec<String> = (0..n).map(|i| format!("share/f{i}")).collect();
    let mut listed = vec![dir("share")];
    let mut entries = vec![e_dir("share")];
    for p in &names {
        listed.push(file(p, p.as_bytes()));
        entries.push(e_file(p, p.as_bytes()));
    }
    let many = Tarball::new("many", listed, entries);
    let rel = fx.release("rel", &[many]);
    let from = rel.display().to_string();
    let o = fx.install("many", &from, &[]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let count = || std::fs::read_dir(fx.prefix().join("share")).map_or(0, |d| d.count());
    assert_eq!(count(), n);

    let killed = rocforge_command(
        fx.root(),
        &[("ROCFORGE_FAULT_AT", Path::new("uninstall:1500"))],
        &["uninstall", "many", "--prefix", &fx.p()],
    )
    .output()
    .unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(killed.status.signal(), Some(libc::SIGKILL), "{killed:?}");
    let left = count();
    assert!(left > 0 && left < n, "{left} files left");

    let list = fx.ok(&["list", "--installed", "--prefix", &fx.p()]);
    assert!(!list.stdout.contains("many"), "{}", list.stdout);
    assert!(
        list.stderr
            .contains("completed the uninstall of many that a killed run had begun"),
        "{}",
        list.stderr
    );
    assert!(!fx.prefix().join("share").exists());
    assert!(!fx.prefix().join(".rocforge/uninstall.json").exists());

    // Damaged by hand: listed as such, repaired by install.
    assert_eq!(fx.install("many", &from, &[]).code, 0);
    for p in &names[..3] {
        std::fs::remove_file(fx.prefix().join(p)).unwrap();
    }
    let list = fx.ok(&["list", "--installed", "--prefix", &fx.p()]);
    assert!(
        list.stdout.contains("DAMAGED (files missing 3)"),
        "{}",
        list.stdout
    );
    let o = fx.install("many", &from, &[]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stderr.contains("repaired (3 of 3000 files were missing)"),
        "{}",
        o.stderr
    );
    assert_eq!(count(), n);
    let list = fx.ok(&["list", "--installed", "--prefix", &fx.p()]);
    assert!(!list.stdout.contains("DAMAGED"), "{}", list.stdout);
    fx.outside_intact();
}

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.display().to_string()).unwrap();
    // SAFETY: a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
}

impl Fx {
    /// `run`, failing the test instead of hanging it when the command blocks (on a FIFO).
    fn run_bounded(&self, args: &[&str]) -> Out {
        let mut child = self
            .command(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let started = Instant::now();
        while child.try_wait().unwrap().is_none() {
            if started.elapsed() > Duration::from_secs(30) {
                let _ = child.kill();
                panic!("{args:?} blocked (on a special file)");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Out::from(child.wait_with_output().unwrap())
    }
}

/// A release directory or a results file whose entries are special files: a FIFO where the
/// index, its signature, a tarball or a results.json is, or a link to /dev/zero. Each is
/// refused at once, naming the file and what it is, never waited on or read without end; the
/// prefix stays empty.
#[test]
fn special_files_in_a_release_directory_or_a_results_bundle_are_refused_not_waited_on() {
    let fx = Fx::new();
    let tool = Tarball::new("tool", vec![file("t", b"t")], vec![e_file("t", b"t")]);
    let rel = fx.release("rel", &[tool]);
    let tarball = std::fs::read_dir(&rel)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .find(|n| n.ends_with(".tar.zst"))
        .unwrap();
    let copy = |name: &str| {
        let d = fx.root().join(name);
        rocforge::fsutil::copy_tree(&rel, &d).unwrap();
        d
    };
    let cases: [(&str, &str, &str); 4] = [
        ("fifo-index", "index.json", "a FIFO"),
        ("fifo-signature", "index.json.minisig", "a FIFO"),
        ("fifo-tarball", tarball.as_str(), "a FIFO"),
        ("zero-index", "index.json", "a character device"),
    ];
    for (name, entry, what) in cases {
        let d = copy(name);
        std::fs::remove_file(d.join(entry)).unwrap();
        if what == "a FIFO" {
            mkfifo(&d.join(entry));
        } else {
            std::os::unix::fs::symlink("/dev/zero", d.join(entry)).unwrap();
        }
        let from = d.display().to_string();
        let p = fx.p();
        let o = fx.run_bounded(&[
            "install", "tool", "--arch", "gfx90c", "--from", &from, "--prefix", &p,
        ]);
        assert_eq!(o.code, 1, "{name}: {}{}", o.stdout, o.stderr);
        assert!(
            o.stderr.contains(entry)
                && o.stderr.contains(&format!("not a regular file but {what}")),
            "{name}: {}",
            o.stderr
        );
        assert!(!fx.prefix().join("t").exists(), "{name}");
    }

    // Results for `report`: a FIFO, and a link to /dev/zero.
    let fifo = fx.root().join("results-fifo.json");
    mkfifo(&fifo);
    let zero = fx.root().join("results-zero.json");
    std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
    for (f, what) in [(&fifo, "a FIFO"), (&zero, "a character device")] {
        let out = fx.root().join("report-out");
        let o = fx.run_bounded(&[
            "report",
            &f.display().to_string(),
            "--out",
            &out.display().to_string(),
        ]);
        assert_eq!(o.code, 1, "{}{}", o.stdout, o.stderr);
        assert!(
            o.stderr.contains(&f.display().to_string())
                && o.stderr.contains(&format!("not a regular file but {what}")),
            "{}",
            o.stderr
        );
    }
}

/// A tarball of one empty file 1,100 directories deep (7.5 KB) left, before the limit, a
/// staging directory std's removal could not remove (one open descriptor per level), and every
/// later install into that prefix failed on it. Refused from the manifest, before anything is
/// written.
#[test]
fn a_path_deeper_than_an_install_tree_goes_is_refused_before_anything_is_written() {
    let fx = Fx::new();
    let deep = format!("{}f", "a/".repeat(1100));
    let from = fx.long_path_release(&deep, b"");
    let err = fx.install_fails("tool", &from);
    assert!(
        err.contains(
            "the manifest lists a path 1100 directories deep; an install tree is at most 64"
        ),
        "{err}"
    );
    assert_eq!(std::fs::read_dir(fx.prefix()).unwrap().count(), 0);
    let beside: Vec<_> = std::fs::read_dir(fx.prefix().parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp-"))
        .collect();
    assert!(beside.is_empty(), "staging left behind: {beside:?}");
    // The prefix still takes an install.
    let ok = Tarball::new(
        "ok",
        vec![file("lib/libok.so", b"k")],
        vec![e_file("lib/libok.so", b"k")],
    );
    let rel2 = fx.release("rel2", &[ok]);
    let from2 = rel2.display().to_string();
    fx.ok(&[
        "install",
        "ok",
        "--arch",
        "gfx90c",
        "--from",
        &from2,
        "--prefix",
        &fx.p(),
    ]);
    assert!(fx.prefix().join("lib/libok.so").is_file());
    fx.outside_intact();
}

/// A file whose path in the prefix would pass PATH_MAX (a deep path in the tarball, each name
/// within NAME_MAX): extraction works relative to a directory and could write it, but uninstall
/// removes files by their full path and would leave it behind, owned by nothing. Refused at
/// install, naming the entry and the limit; the prefix stays empty.
#[test]
fn a_path_beyond_path_max_in_the_prefix_is_refused_at_install() {
    let fx = Fx::new();
    let deep = format!("{}libtool.so.1", format!("{}/", "d".repeat(250)).repeat(17));
    let from = fx.long_path_release(&deep, b"t");
    let err = fx.install_fails("tool", &from);
    let full = fx.p().len() + 1 + deep.len();
    assert!(
        err.contains(&format!(
            "would be {full} bytes, beyond the system's limit of 4096"
        )),
        "{err}"
    );
    assert_eq!(std::fs::read_dir(fx.prefix()).unwrap().count(), 0);
    fx.outside_intact();
}
