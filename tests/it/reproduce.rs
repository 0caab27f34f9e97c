//! Reproducible artifacts: the source's date recorded by the build and carried by the manifest,
//! every tarball entry and an application image's `created`; `verify --rebuild` rebuilding a
//! packaged artifact from its recorded inputs and comparing it byte for byte (host runtime,
//! copied components from a path and a tarball source).

use crate::common;

use std::io::Read;
use std::path::{Path, PathBuf};

use common::*;

/// The newest file of the path source `dated` (its other file and its directories are older or
/// newer: directories never count).
const PATH_DATE: u64 = 1_650_000_000;
/// The newest entry of the tarball source `tarred`.
const TAR_DATE: u64 = 1_660_000_000;

struct Fx {
    w: World,
    _http: HttpServer,
}

derefs_to_world!(Fx);

impl Fx {
    fn command(&self, args: &[&str]) -> std::process::Command {
        let mut cmd = self.w.command(args);
        // The date must come from the sources, never from the test's environment.
        cmd.env_remove("SOURCE_DATE_EPOCH");
        cmd
    }
    fn run(&self, args: &[&str]) -> Out {
        Out::from(self.command(args).output().unwrap())
    }
    /// `verify TARBALL --rebuild --format json`: its exit code and the JSON it printed.
    fn rebuild_json(&self, tarball: &Path) -> (i32, serde_json::Value) {
        let o = self.run(&[
            "verify",
            tarball.to_str().unwrap(),
            "--rebuild",
            "--format",
            "json",
        ]);
        let v = serde_json::from_str(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", o.stdout));
        (o.code, v)
    }
    fn ok(&self, args: &[&str]) -> Out {
        let o = self.run(args);
        assert_eq!(o.code, 0, "{args:?}:\n{}\n{}", o.stdout, o.stderr);
        o
    }
}

fn set_mtime(path: &Path, secs: u64) {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs);
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(t)
        .unwrap();
}

/// `dated` (a path source of two files with known mtimes, copied into share/dated) and
/// `tarred` (a tarball served on 127.0.0.1 whose entries carry known mtimes, copied into
/// share/tarred).
fn fixture() -> Fx {
    let w = World::new()
        .release("localhost/rocforge-none:1")
        .containers()
        .args(&["--arch", "gfx90c"])
        .build();
    let (root, rel) = (w.root(), w.release_dir());
    let src = root.join("src/dated");
    std::fs::create_dir_all(src.join("sub")).unwrap();
    std::fs::write(src.join("old.txt"), "older\n").unwrap();
    std::fs::write(src.join("sub/new.txt"), "newest\n").unwrap();
    set_mtime(&src.join("old.txt"), PATH_DATE - 86_400);
    set_mtime(&src.join("sub/new.txt"), PATH_DATE);
    std::fs::write(
        rel.join("dated.toml"),
        "name = \"dated\"\nversion = \"1.0\"\nsummary = \"data\"\nlicense = \"MIT\"\n\n[source]\npath = \"../../src/dated\"\n\n[build]\nsystem = \"copy\"\ndest = \"share/dated\"\n",
    )
    .unwrap();

    let served = root.join("served");
    std::fs::create_dir_all(&served).unwrap();
    let archive = served.join("tarred-1.0.tar.gz");
    let f = std::fs::File::create(&archive).unwrap();
    let mut b = tar::Builder::new(flate2::write::GzEncoder::new(
        f,
        flate2::Compression::default(),
    ));
    let entry = |b: &mut tar::Builder<_>, name: &str, data: &[u8], mtime: u64, dir: bool| {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(if dir {
            tar::EntryType::Directory
        } else {
            tar::EntryType::Regular
        });
        h.set_mode(if dir { 0o755 } else { 0o644 });
        h.set_size(data.len() as u64);
        h.set_mtime(mtime);
        b.append_data(&mut h, name, data).unwrap();
    };
    entry(&mut b, "tarred-1.0/", b"", TAR_DATE - 500, true);
    entry(&mut b, "tarred-1.0/a.txt", b"a\n", TAR_DATE - 1000, false);
    entry(&mut b, "tarred-1.0/b.txt", b"b\n", TAR_DATE, false);
    b.into_inner().unwrap().finish().unwrap();
    let http = HttpServer::start(&served);
    std::fs::write(
        rel.join("tarred.toml"),
        format!(
            "name = \"tarred\"\nversion = \"1.0\"\nsummary = \"data\"\nlicense = \"MIT\"\n\n[source]\nurl = \"{}tarred-1.0.tar.gz\"\nsha256 = \"{}\"\n\n[build]\nsystem = \"copy\"\ndest = \"share/tarred\"\n",
            http.url(),
            sha256_file(&archive)
        ),
    )
    .unwrap();
    Fx { w, _http: http }
}

/// The manifest and every entry's (path, mtime) of a packaged tarball.
fn tarball(path: &Path) -> (serde_json::Value, Vec<(String, u64)>) {
    let f = std::fs::File::open(path).unwrap();
    let mut ar = tar::Archive::new(zstd::stream::read::Decoder::new(f).unwrap());
    let mut manifest = serde_json::Value::Null;
    let mut entries = Vec::new();
    for e in ar.entries().unwrap() {
        let mut e = e.unwrap();
        let name = e.path().unwrap().display().to_string();
        entries.push((name.clone(), e.header().mtime().unwrap()));
        if name == rocforge::package::manifest::MANIFEST_NAME {
            let mut buf = Vec::new();
            e.read_to_end(&mut buf).unwrap();
            manifest = serde_json::from_slice(&buf).unwrap();
        }
    }
    (manifest, entries)
}

fn packaged(dist: &Path, component: &str) -> PathBuf {
    std::fs::read_dir(dist)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            let n = p.file_name().unwrap().to_string_lossy();
            n.starts_with(&format!("{component}-")) && n.ends_with(".tar.zst")
        })
        .unwrap_or_else(|| panic!("no tarball of {component} in {}", dist.display()))
}

#[test]
fn the_sources_date_is_recorded_and_every_packaged_file_carries_it() {
    let fx = fixture();
    for (component, date) in [("dated", PATH_DATE), ("tarred", TAR_DATE)] {
        let o = fx.ok(&["build", component, "--runtime", "host"]);
        let tree = PathBuf::from(o.stdout.trim());
        let meta: serde_json::Value = serde_json::from_slice(
            &std::fs::read(tree.parent().unwrap().join("meta.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(meta["source_date_epoch"], date, "{component}: {meta}");

        fx.ok(&["package", component, "--runtime", "host", "--out", "dist"]);
        let (manifest, entries) = tarball(&packaged(&fx.root().join("dist"), component));
        assert_eq!(manifest["source_date_epoch"], date, "{component}");
        assert!(entries.len() >= 3, "{entries:?}");
        for (name, mtime) in &entries {
            assert_eq!(*mtime, date, "{component}: {name}");
        }
    }
}

/// An entry made before the date was recorded has no `source_date_epoch` in its meta.json: it
/// still packages, with mtime 0 as it did then, so its published tarball stays what packaging it
/// again gives.
#[test]
fn an_entry_from_before_the_date_was_recorded_packages_as_it_did() {
    let fx = fixture();
    let o = fx.ok(&["build", "dated", "--runtime", "host"]);
    let meta_path = PathBuf::from(o.stdout.trim())
        .parent()
        .unwrap()
        .join("meta.json");
    let mut meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&meta_path).unwrap()).unwrap();
    meta.as_object_mut().unwrap().remove("source_date_epoch");
    std::fs::write(&meta_path, serde_json::to_vec_pretty(&meta).unwrap()).unwrap();
    fx.ok(&["package", "dated", "--runtime", "host", "--out", "dist"]);
    let (manifest, entries) = tarball(&packaged(&fx.root().join("dist"), "dated"));
    assert_eq!(manifest["source_date_epoch"], 0);
    assert!(entries.iter().all(|(_, m)| *m == 0), "{entries:?}");
}

const BASE: &str = "localhost/rocforge-test-base:bookworm";

#[test]
fn an_application_images_created_is_the_sources_date() {
    let Some(reg) = registry() else {
        return;
    };
    if !podman_ready(BASE) {
        return;
    }
    let host = reg.host();
    let base = format!("{host}/base:1");
    let push = std::process::Command::new("podman")
        .env("CONTAINERS_CONF", containers_conf())
        .args(["push", "--tls-verify=false", BASE])
        .arg(format!("docker://{base}"))
        .output()
        .unwrap();
    assert!(
        push.status.success(),
        "{}",
        String::from_utf8_lossy(&push.stderr)
    );
    let fx = fixture();
    fx.ok(&["build", "dated", "tarred", "--runtime", "host"]);
    let tag = format!("{host}/dated:1");
    let o = fx.ok(&[
        "image",
        "create",
        "dated",
        "tarred",
        "--runtime",
        "host",
        "--base",
        &base,
        "--tag",
        &tag,
        "--push",
        "--format",
        "json",
    ]);
    let created: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    let digest = created["digest"].as_str().unwrap();
    let remote = rocforge::oci::Remote::new(
        reqwest::blocking::Client::new(),
        rocforge::oci::Repository::parse(&format!("{host}/dated")).unwrap(),
    );
    let (_, bytes) = remote.get_manifest(digest).unwrap().unwrap();
    let m: rocforge::oci::ImageManifest = serde_json::from_slice(&bytes).unwrap();
    let config: serde_json::Value =
        serde_json::from_slice(&remote.get_blob_bytes(&m.config.digest, 1 << 20).unwrap()).unwrap();
    // The newer of the two components' dates.
    let want = rocforge::units::rfc3339(TAR_DATE);
    assert_eq!(config["created"], want.as_str(), "{config}");
    assert_eq!(
        config["history"].as_array().unwrap().last().unwrap()["created"],
        want.as_str()
    );
}

/// Every run of 64 hex digits (keys, digests) as `<sha256>`, the key's first 8 in file names as
/// `<key8>`, and `root` as `<dir>`: what stays is what the user reads.
fn redacted(text: &str, root: &Path, key: &str) -> String {
    let text = text.replace(&root.display().to_string(), "<dir>");
    let mut out = String::new();
    let mut run = String::new();
    for c in text.chars().chain(std::iter::once('\n')) {
        if c.is_ascii_hexdigit() {
            run.push(c);
            continue;
        }
        out += if run.len() == 64 { "<sha256>" } else { &run };
        run.clear();
        out.push(c);
    }
    out.pop();
    out.replace(&key[..8], "<key8>")
}

/// Builds and packages `component` (host runtime): the tarball and its content key.
fn build_and_package(fx: &Fx, component: &str) -> (PathBuf, String) {
    fx.ok(&["build", component, "--runtime", "host"]);
    fx.ok(&["package", component, "--runtime", "host", "--out", "dist"]);
    let tarball = packaged(&fx.root().join("dist"), component);
    let (manifest, _) = self::tarball(&tarball);
    (tarball, manifest["key"].as_str().unwrap().to_string())
}

#[test]
fn verify_rebuild_reproduces_a_packaged_artifact_byte_for_byte() {
    let fx = fixture();
    let (tarball, key) = build_and_package(&fx, "dated");
    let path = tarball.display().to_string();
    // The store holds the key, so the rebuild goes into a temporary store, removed after.
    let o = fx.ok(&["verify", &path, "--rebuild"]);
    insta::assert_snapshot!(
        "verify_rebuild_identical",
        redacted(&o.stdout, fx.root(), &key)
    );
    let leftovers: Vec<_> = std::fs::read_dir(fx.root().join("cache"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(".tmp-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");

    // By URL, into a store of the user's that lacks the key: the entry stays there.
    std::fs::copy(
        &tarball,
        fx.root().join("served").join(tarball.file_name().unwrap()),
    )
    .unwrap();
    let url = format!(
        "{}{}",
        fx._http.url(),
        tarball.file_name().unwrap().to_string_lossy()
    );
    let mine = fx.root().join("mine");
    let o = fx.ok(&[
        "--store",
        mine.to_str().unwrap(),
        "verify",
        &url,
        "--rebuild",
        "--format",
        "json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(v["schema"], "rocforge.verify-rebuild/1");
    crate::common::schema::assert_matches_schema(fx.root(), "verify-rebuild", &v);
    assert_eq!(v["result"], "identical", "{v}");
    assert_eq!(v["sha256"], sha256_file(&tarball));
    assert_eq!(v["name"], "dated");
    assert_eq!(v["key"], key.as_str());
    assert_eq!(v["store"]["kept"], true);
    assert!(mine.join(&key).join("meta.json").is_file());
}

#[test]
fn verify_rebuild_names_the_first_file_that_differs() {
    let fx = fixture();
    // A build whose output depends on when it ran: its `stamp` differs on every build.
    std::fs::write(
        fx.root().join("recipes/test-1.0/noisy.toml"),
        "name = \"noisy\"\nversion = \"1.0\"\nsummary = \"data\"\nlicense = \"MIT\"\n\n[source]\npath = \"../../src/dated\"\n\n[build]\nsystem = \"script\"\nscript = \"\"\"\nP=\"$DESTDIR$PREFIX/share/noisy\"\nmkdir -p \"$P\"\necho steady > \"$P/a-steady\"\ndate +%s%N > \"$P/stamp\"\n\"\"\"\n",
    )
    .unwrap();
    let (tarball, key) = build_and_package(&fx, "noisy");
    let o = fx.run(&["verify", tarball.to_str().unwrap(), "--rebuild"]);
    assert_eq!(o.code, 1, "{}\n{}", o.stdout, o.stderr);
    let text = redacted(&o.stdout, fx.root(), &key);
    assert!(
        text.contains("first difference: share/noisy/stamp: bytes"),
        "{text}"
    );
    insta::assert_snapshot!("verify_rebuild_differs", text);
    let (code, v) = fx.rebuild_json(&tarball);
    assert_eq!(code, 1);
    assert_eq!(v["result"], "differs");
    assert_eq!(v["difference"]["path"], "share/noisy/stamp");
    assert_eq!(v["difference"]["how"], "bytes");
    assert_eq!(v["published_sha256"], sha256_file(&tarball));
    assert_ne!(v["rebuilt_sha256"], v["published_sha256"]);
}

#[test]
fn verify_rebuild_of_another_catalogs_key_names_the_inputs_that_differ() {
    let fx = fixture();
    let (tarball, key) = build_and_package(&fx, "dated");
    // The catalog's recipe changed since: another key, and nothing is built.
    let recipe = fx.root().join("recipes/test-1.0/dated.toml");
    let text = std::fs::read_to_string(&recipe).unwrap();
    std::fs::write(&recipe, text.replace("share/dated", "share/dated-2")).unwrap();
    let o = fx.run(&["verify", tarball.to_str().unwrap(), "--rebuild"]);
    assert_eq!(o.code, 1, "{}\n{}", o.stdout, o.stderr);
    insta::assert_snapshot!(
        "verify_rebuild_key_differs",
        redacted(&o.stdout, fx.root(), &key)
    );
    let (code, v) = fx.rebuild_json(&tarball);
    assert_eq!(code, 1);
    assert_eq!(v["result"], "key-differs");
    assert_eq!(v["recorded"], key.as_str());
    assert_ne!(v["planned"], key.as_str());
    assert_eq!(v["changed"], serde_json::json!(["component.build"]), "{v}");
    // Nothing was built: the store holds the one entry of the first build.
    let entries = std::fs::read_dir(fx.root().join("store"))
        .unwrap()
        .flatten()
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .count();
    assert_eq!(entries, 1);
}

#[test]
fn verify_rebuild_refuses_what_is_no_tarball() {
    let fx = fixture();
    std::fs::write(fx.root().join("notes.txt"), "no tarball\n").unwrap();
    let o = fx.run(&["verify", "notes.txt", "--rebuild"]);
    assert_eq!(o.code, 1);
    let missing = fx.run(&["verify", "gone.tar.zst", "--rebuild"]);
    assert_eq!(missing.code, 1);
    let url = format!("{}gone.tar.zst", fx._http.url());
    let absent = fx.run(&["verify", &url, "--rebuild"]);
    assert_eq!(absent.code, 1);
    insta::assert_snapshot!(
        "verify_rebuild_refusals",
        [
            o.stderr,
            missing.stderr,
            absent.stderr.replace(&fx._http.url(), "<url>/")
        ]
        .join("\n")
    );
}
