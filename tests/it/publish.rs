//! `rocforge publish`: to a real OCI registry (Debian's docker-registry on 127.0.0.1; pushed,
//! then pulled back byte for byte), to a GitHub-like server written here (every request
//! asserted; idempotent re-runs; a changed asset replaced; the token never shown), and the
//! PEP 503 wheel index used by a real `pip install` from 127.0.0.1.

use crate::common;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::github::FakeGitHub;
use common::*;

/// The world with the GitHub-like servers' variables given per run (their URLs and tokens are
/// strings, not paths under the root).
struct Fx {
    w: World,
}

derefs_to_world!(Fx);

impl Fx {
    fn run(&self, env: &[(&str, &str)], args: &[&str]) -> Out {
        let env: Vec<(&str, &Path)> = env.iter().map(|(k, v)| (*k, Path::new(*v))).collect();
        self.w.run_env(&env, args)
    }
    fn ok(&self, env: &[(&str, &str)], args: &[&str]) -> Out {
        let o = self.run(env, args);
        assert_eq!(o.code, 0, "{args:?}:\n{}\n{}", o.stdout, o.stderr);
        o
    }
    fn dist(&self) -> PathBuf {
        self.path("dist")
    }
}

/// A release directory: `greet` (a program built with cc on the host) and `greetdoc` (copied),
/// packaged and signed into dist/.
fn fixture() -> Fx {
    let w = World::new()
        .release("localhost/rocforge-none:1")
        .config("trust.toml")
        .build();
    w.write(
        "recipes/test-1.0/greetdoc.toml",
        "name = \"greetdoc\"\nversion = \"1.0\"\nsummary = \"data\"\nlicense = \"MIT\"\n\n[source]\npath = \"../../src/doc\"\n\n[build]\nsystem = \"copy\"\ndest = \"share/greet\"\n",
    );
    w.write(
        "recipes/test-1.0/greet.toml",
        "name = \"greet\"\nversion = \"1.2\"\nsummary = \"a program\"\nlicense = \"MIT\"\ndepends = [\"greetdoc\"]\n\n[source]\npath = \"../../src/greet\"\n\n[build]\nsystem = \"script\"\nscript = \"\"\"\nP=/opt; P=\"$DESTDIR$P/rocm\"\nmkdir -p \"$P/bin\"\ncc -O2 -o \"$P/bin/greet\" main.c\n\"\"\"\n",
    );
    w.write(
        "src/greet/main.c",
        "#include <stdio.h>\nint main(void) { puts(\"hello\"); return 0; }\n",
    );
    w.write("src/doc/README", "docs\n");
    let fx = Fx { w };
    fx.ok(
        &[],
        &["build", "greet", "--arch", "gfx90c", "--runtime", "host"],
    );
    fx.generate_key("keys");
    let key = fx.secret_key("keys");
    fx.ok(
        &[],
        &[
            "package",
            "greet",
            "--arch",
            "gfx90c",
            "--runtime",
            "host",
            "--out",
            "dist",
            "--sign-key",
            &key,
        ],
    );
    fx
}

fn tarballs(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(".tar.zst"))
        .collect();
    v.sort();
    v
}

#[test]
fn oci_publish_pushes_artifacts_that_pull_back_byte_for_byte() {
    let Some(reg) = registry() else {
        return;
    };
    let fx = fixture();
    // A key rotation published with the release: its list travels with the index.
    fx.ok(&[], &["key", "generate", "--out", "keys2"]);
    fx.ok(
        &[],
        &[
            "key",
            "rotate",
            "--old",
            "keys/rocforge.key",
            "--new",
            "keys2/rocforge.pub",
            "--out",
            "dist/keys.json",
        ],
    );
    let to = format!("oci://{}/rocforge/releases", reg.host());
    let out = fx.ok(&[], &["publish", "dist", "--to", &to]).stdout;
    let client = reqwest::blocking::Client::new();
    let base = format!("http://{}/v2/rocforge/releases", reg.host());
    let manifest_of = |tag: &str| -> (serde_json::Value, String) {
        let head = client
            .head(format!("{base}/manifests/{tag}"))
            .header("Accept", "application/vnd.oci.image.manifest.v1+json")
            .send()
            .unwrap();
        assert_eq!(head.status().as_u16(), 200, "HEAD {tag}");
        let digest = head.headers()["docker-content-digest"]
            .to_str()
            .unwrap()
            .to_string();
        let resp = client
            .get(format!("{base}/manifests/{tag}"))
            .header("Accept", "application/vnd.oci.image.manifest.v1+json")
            .send()
            .unwrap();
        assert_eq!(resp.status().as_u16(), 200, "GET {tag}");
        (serde_json::from_reader(resp).unwrap(), digest)
    };
    let blob = |digest: &str| -> Vec<u8> {
        let mut r = client.get(format!("{base}/blobs/{digest}")).send().unwrap();
        assert_eq!(r.status().as_u16(), 200);
        let mut b = Vec::new();
        r.read_to_end(&mut b).unwrap();
        b
    };
    let files = tarballs(&fx.dist());
    assert_eq!(files.len(), 2);
    for t in &files {
        let name = t.file_name().unwrap().to_str().unwrap();
        let tag = name.strip_suffix(".tar.zst").unwrap();
        assert!(
            out.contains(&format!("{}/rocforge/releases:{tag}", reg.host())),
            "{out}"
        );
        let (m, _) = manifest_of(tag);
        assert_eq!(m["mediaType"], "application/vnd.oci.image.manifest.v1+json");
        assert_eq!(
            m["artifactType"],
            "application/vnd.rocforge.artifact.config.v1+json"
        );
        assert_eq!(
            m["config"]["mediaType"],
            "application/vnd.rocforge.artifact.config.v1+json"
        );
        let layer = &m["layers"][0];
        assert_eq!(
            layer["mediaType"],
            "application/vnd.rocforge.component.v1.tar+zstd"
        );
        assert_eq!(layer["annotations"]["org.opencontainers.image.title"], name);
        assert_eq!(
            blob(layer["digest"].as_str().unwrap()),
            std::fs::read(t).unwrap()
        );
        assert_eq!(
            blob(m["layers"][1]["digest"].as_str().unwrap()),
            std::fs::read(format!("{}.minisig", t.display())).unwrap()
        );
        let ann = &m["annotations"];
        assert_eq!(ann["org.opencontainers.image.title"], name);
        assert_eq!(ann["rocforge.targets"], "gfx90c");
        assert!(tag.ends_with(&ann["rocforge.key"].as_str().unwrap()[..8]));
        assert!(ann["org.opencontainers.image.version"].is_string());
        assert!(
            ann["org.opencontainers.image.created"]
                .as_str()
                .unwrap()
                .ends_with('Z')
        );
        let config: serde_json::Value =
            serde_json::from_slice(&blob(m["config"]["digest"].as_str().unwrap())).unwrap();
        assert_eq!(config["schema"], "rocforge.artifact/1");
        assert_eq!(config["key"], ann["rocforge.key"]);
    }
    // The signed index, tagged by the release.
    let (m, digest) = manifest_of("test-1.0");
    assert_eq!(
        blob(m["layers"][0]["digest"].as_str().unwrap()),
        std::fs::read(fx.dist().join("index.json")).unwrap()
    );
    assert_eq!(
        blob(m["layers"][1]["digest"].as_str().unwrap()),
        std::fs::read(fx.dist().join("index.json.minisig")).unwrap()
    );
    let titled = |i: usize| {
        (
            m["layers"][i]["mediaType"].as_str().unwrap().to_string(),
            m["layers"][i]["annotations"]["org.opencontainers.image.title"]
                .as_str()
                .unwrap()
                .to_string(),
        )
    };
    let key_layers: Vec<(String, String)> = (2..m["layers"].as_array().unwrap().len())
        .map(titled)
        .collect();
    assert!(
        key_layers.contains(&(
            "application/vnd.rocforge.keys.v1+json".into(),
            "keys.json".into()
        )),
        "{key_layers:?}"
    );
    assert!(
        key_layers.iter().any(|(_, t)| t == "keys.json.minisig"),
        "{key_layers:?}"
    );
    // A re-run is accepted and changes nothing.
    fx.ok(&[], &["publish", "dist", "--to", &to]);
    assert_eq!(manifest_of("test-1.0").1, digest);
    // skopeo reads the same manifest (a missing skopeo fails in CI, which installs it).
    if require("skopeo", which("skopeo")) {
        let o = Command::new("skopeo")
            .args(["inspect", "--raw", "--tls-verify=false"])
            .arg(format!(
                "docker://{}/rocforge/releases:test-1.0",
                reg.host()
            ))
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let raw: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(raw, m);
    }
}

/// A registry that drops the first upload halfway (a restart, a proxy's blip): the publish
/// says so, tries again and finishes, and what it pushed pulls back byte for byte.
#[test]
fn oci_publish_tries_a_dropped_upload_again_and_says_so() {
    let Some(reg) = registry() else {
        return;
    };
    let fx = fixture();
    let proxy = common::proxy::FlakyProxy::start(reg.port, common::proxy::AfterCut::CarryOn);
    let to = format!("oci://{}/rocforge/releases", proxy.host());
    let out = fx.ok(&[], &["publish", "dist", "--to", &to]);
    assert_eq!(proxy.cuts(), 1, "the proxy cut no upload");
    assert!(
        out.stderr.contains(&format!("publish {to}: "))
            && out.stderr.contains("trying again in 1s (1 of 4 retries)"),
        "{}",
        out.stderr
    );
    let client = reqwest::blocking::Client::new();
    let base = format!("http://{}/v2/rocforge/releases", reg.host());
    for t in tarballs(&fx.dist()) {
        let tag = t.file_name().unwrap().to_str().unwrap();
        let tag = tag.strip_suffix(".tar.zst").unwrap();
        let m: serde_json::Value = serde_json::from_reader(
            client
                .get(format!("{base}/manifests/{tag}"))
                .header("Accept", "application/vnd.oci.image.manifest.v1+json")
                .send()
                .unwrap(),
        )
        .unwrap();
        let digest = m["layers"][0]["digest"].as_str().unwrap();
        let mut b = Vec::new();
        client
            .get(format!("{base}/blobs/{digest}"))
            .send()
            .unwrap()
            .read_to_end(&mut b)
            .unwrap();
        assert_eq!(b, std::fs::read(&t).unwrap(), "{tag}");
    }
}

const TOKEN: &str = "ghp_test-secret-token-0123456789";

#[test]
fn github_publish_creates_the_release_uploads_once_replaces_changed_assets_and_hides_the_token() {
    let fx = fixture();
    let gh = FakeGitHub::start();
    let api = format!("http://127.0.0.1:{}", gh.port);
    let env = [
        ("GITHUB_TOKEN", TOKEN),
        ("ROCFORGE_GITHUB_API", api.as_str()),
        ("ROCFORGE_LOG", "trace"),
    ];
    let mut files: Vec<PathBuf> = std::fs::read_dir(fx.dist())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    let names: Vec<String> = files
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    // tarballs + signatures, their SBOMs and provenance + signatures, SHA256SUMS(.minisig),
    // index.json(.minisig)
    assert_eq!(names.len(), 16, "{names:?}");

    let first = fx.ok(&env, &["publish", "dist", "--to", "github://o/r@v1"]);
    let reqs = gh.take();
    let summary: Vec<(String, String)> = reqs
        .iter()
        .map(|r| (r.method.clone(), r.target.clone()))
        .collect();
    let mut want = vec![
        ("GET".to_string(), "/repos/o/r/releases/tags/v1".to_string()),
        ("POST".into(), "/repos/o/r/releases".into()),
    ];
    for n in &names {
        want.push((
            "POST".into(),
            format!("/uploads/repos/o/r/releases/7/assets?name={n}"),
        ));
    }
    assert_eq!(summary, want);
    for r in &reqs {
        assert_eq!(r.headers["authorization"], format!("Bearer {TOKEN}"));
        assert_eq!(r.headers["accept"], "application/vnd.github+json");
        assert_eq!(r.headers["x-github-api-version"], "2022-11-28");
        assert!(r.headers["user-agent"].starts_with("rocforge/"));
    }
    let create: serde_json::Value = serde_json::from_slice(&reqs[1].body).unwrap();
    assert_eq!(create["tag_name"], "v1");
    assert_eq!(reqs[1].headers["content-type"], "application/json");
    for (r, f) in reqs[2..].iter().zip(&files) {
        let n = f.file_name().unwrap().to_string_lossy();
        assert_eq!(r.body, std::fs::read(f).unwrap(), "{n}");
        assert_eq!(r.headers["content-length"], r.body.len().to_string());
        let ct = if n.ends_with(".tar.zst") {
            "application/zstd"
        } else if n.ends_with(".json") {
            "application/json"
        } else {
            "text/plain"
        };
        assert_eq!(r.headers["content-type"], ct, "{n}");
    }
    assert!(
        first.stdout.lines().all(|l| l.starts_with("uploaded")),
        "{}",
        first.stdout
    );

    // What was uploaded is what a user downloads, from the URL the listing gives.
    let client = reqwest::blocking::Client::new();
    let listing: Vec<serde_json::Value> = serde_json::from_slice(
        &client
            .get(format!("{api}/repos/o/r/releases/7/assets?per_page=100"))
            .send()
            .unwrap()
            .bytes()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(listing.len(), files.len());
    for f in &files {
        let n = f.file_name().unwrap().to_string_lossy();
        let a = listing.iter().find(|a| a["name"] == *n).unwrap();
        let url = a["browser_download_url"].as_str().unwrap();
        assert_eq!(url, format!("{api}/o/r/releases/download/v1/{n}"));
        let got = client.get(url).send().unwrap();
        assert_eq!(got.status(), 200, "{url}");
        assert_eq!(
            got.bytes().unwrap().to_vec(),
            std::fs::read(f).unwrap(),
            "{n}"
        );
    }
    gh.take();

    // A re-run uploads nothing.
    let second = fx.ok(&env, &["publish", "dist", "--to", "github://o/r@v1"]);
    let summary: Vec<(String, String)> = gh
        .take()
        .iter()
        .map(|r| (r.method.clone(), r.target.clone()))
        .collect();
    assert_eq!(
        summary,
        [
            ("GET".to_string(), "/repos/o/r/releases/tags/v1".to_string()),
            (
                "GET".into(),
                "/repos/o/r/releases/7/assets?per_page=100&page=1".into()
            ),
        ]
    );
    assert!(
        second.stdout.lines().all(|l| l.starts_with("present")),
        "{}",
        second.stdout
    );

    // An asset whose size differs (an interrupted upload) is deleted and uploaded again.
    let sums_id = {
        let mut s = gh.state.lock().unwrap();
        let a = s
            .assets
            .iter_mut()
            .find(|a| a.name == "SHA256SUMS")
            .unwrap();
        a.size = 3;
        a.id
    };
    fx.ok(&env, &["publish", "dist", "--to", "github://o/r@v1"]);
    let summary: Vec<(String, String)> = gh
        .take()
        .iter()
        .map(|r| (r.method.clone(), r.target.clone()))
        .collect();
    assert_eq!(
        summary[2..],
        [
            (
                "DELETE".to_string(),
                format!("/repos/o/r/releases/assets/{sums_id}")
            ),
            (
                "POST".into(),
                "/uploads/repos/o/r/releases/7/assets?name=SHA256SUMS".into()
            ),
        ]
    );

    // A refused token: a clear error, and the token nowhere in what rocforge printed.
    gh.state.lock().unwrap().refuse = true;
    let refused = fx.run(&env, &["publish", "dist", "--to", "github://o/r@v1"]);
    assert_eq!(refused.code, 1);
    assert!(
        refused.stderr.contains("401") && refused.stderr.contains("Bad credentials"),
        "{}",
        refused.stderr
    );
    // Without a token: an error that says which variable to set.
    let none = fx.run(
        &[("ROCFORGE_GITHUB_API", api.as_str()), ("GITHUB_TOKEN", "")],
        &["publish", "dist", "--to", "github://o/r@v1"],
    );
    assert_eq!(none.code, 1);
    assert!(none.stderr.contains("GITHUB_TOKEN"), "{}", none.stderr);
    for o in [&first, &second, &refused] {
        assert!(!o.stdout.contains(TOKEN) && !o.stderr.contains(TOKEN));
        assert!(!o.stderr.contains("test-secret"));
    }
}

/// A tag whose release already holds other bytes under a file's name (GitHub's `digest` says
/// so, even at the same size) is refused before any upload, naming the release, the file and
/// both digests; the same bytes are `present`.
#[test]
fn github_publish_refuses_a_tag_that_holds_other_content_and_uploads_nothing() {
    let fx = fixture();
    let gh = FakeGitHub::start();
    let api = format!("http://127.0.0.1:{}", gh.port);
    let env = [
        ("GITHUB_TOKEN", TOKEN),
        ("ROCFORGE_GITHUB_API", api.as_str()),
    ];
    fx.ok(&env, &["publish", "dist", "--to", "github://o/r@v1"]);
    gh.take();
    let index = std::fs::read(fx.dist().join("index.json")).unwrap();
    let ours = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&index));
    let other = "ab".repeat(32);
    {
        let mut s = gh.state.lock().unwrap();
        s.digests
            .insert("index.json".into(), format!("sha256:{other}"));
        s.digests
            .insert("SHA256SUMS".into(), "sha256:".to_string() + &"0".repeat(64));
    }
    let o = fx.run(&env, &["publish", "dist", "--to", "github://o/r@v1"]);
    assert_eq!(o.code, 1, "{}{}", o.stdout, o.stderr);
    assert!(
        o.stderr.contains(&format!(
            "the release o/r@v1 already holds other content under these names: SHA256SUMS (sha256 {} there,",
            "0".repeat(64)
        )) && o.stderr.contains(&format!("index.json (sha256 {other} there, {ours} here)")),
        "{}",
        o.stderr
    );
    assert!(o.stderr.contains("under a new tag"), "{}", o.stderr);
    let methods: Vec<String> = gh.take().iter().map(|r| r.method.clone()).collect();
    assert_eq!(
        methods,
        ["GET", "GET"],
        "only the release and its assets were read"
    );

    // GitHub's digests of these very bytes: nothing to do.
    {
        let mut s = gh.state.lock().unwrap();
        s.digests.clear();
        s.digests
            .insert("index.json".into(), format!("sha256:{ours}"));
    }
    let o = fx.ok(&env, &["publish", "dist", "--to", "github://o/r@v1"]);
    assert!(
        o.stdout.lines().all(|l| l.starts_with("present")),
        "{}",
        o.stdout
    );
}

/// Writes a pure-Python wheel by hand (PEP 427: the package, METADATA, WHEEL, RECORD).
fn write_wheel(dir: &Path, name: &str, version: &str, module: &str, requires: &[&str]) -> PathBuf {
    let file = dir.join(format!("{name}-{version}-py3-none-any.whl"));
    let script = r#"
import base64, hashlib, sys, zipfile
path, name, version, module, code, requires = sys.argv[1:7]
info = f"{name}-{version}.dist-info"
files = {
    f"{module}/__init__.py": code,
    f"{info}/METADATA": "Metadata-Version: 2.1\nName: " + name + "\nVersion: " + version + "\n"
        + "".join(f"Requires-Dist: {r}\n" for r in requires.split(",") if r),
    f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: rocforge-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
record = ""
with zipfile.ZipFile(path, "w") as z:
    for n, text in files.items():
        data = text.encode()
        z.writestr(n, data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record += f"{n},sha256={digest},{len(data)}\n"
    record += f"{info}/RECORD,,\n"
    z.writestr(f"{info}/RECORD", record)
"#;
    let code = format!("def hello():\n    return \"{module} {version}\"\n");
    let st = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(&file)
        .args([name, version, module, &code, &requires.join(",")])
        .status()
        .unwrap();
    assert!(st.success());
    file
}

#[test]
fn wheel_index_serves_pip_per_target() {
    let venv_ok = Command::new("python3")
        .args(["-c", "import venv, ensurepip"])
        .status()
        .is_ok_and(|s| s.success());
    if !require("python3 with venv and ensurepip", venv_ok) {
        return;
    }
    let fx = fixture();
    let dist = fx.dist();
    // The gfx90c wheel comes the way torch's does: a build installs it under
    // share/rocforge/wheels, and `package` copies it beside the tarballs, signed and summed.
    let wheel_src = fx.root().join("src/rocdemo");
    std::fs::create_dir_all(&wheel_src).unwrap();
    let built = write_wheel(
        &wheel_src,
        "rocdemo",
        "1.0+rocm1.0.gfx90c",
        "rocdemo",
        &["roc_dep>=0.1"],
    );
    std::fs::write(
        fx.root().join("recipes/test-1.0/rocdemo.toml"),
        "name = \"rocdemo\"\nversion = \"1.0\"\nsummary = \"a wheel\"\nlicense = \"MIT\"\n\n[source]\npath = \"../../src/rocdemo\"\n\n[build]\nsystem = \"copy\"\ndest = \"share/rocforge/wheels\"\n",
    )
    .unwrap();
    let key = fx.root().join("keys/rocforge.key").display().to_string();
    fx.ok(
        &[],
        &["build", "rocdemo", "--arch", "gfx90c", "--runtime", "host"],
    );
    fx.ok(
        &[],
        &[
            "package",
            "rocdemo",
            "--arch",
            "gfx90c",
            "--runtime",
            "host",
            "--out",
            "dist",
            "--sign-key",
            &key,
        ],
    );
    let name = built.file_name().unwrap().to_str().unwrap();
    assert_eq!(
        sha256_file(&dist.join(name)),
        sha256_file(&built),
        "the packaged wheel is the built one"
    );
    assert!(dist.join(format!("{name}.minisig")).is_file());
    let sums = std::fs::read_to_string(dist.join("SHA256SUMS")).unwrap();
    assert!(
        sums.contains(&format!("{}  {name}", sha256_file(&built))),
        "{sums}"
    );
    // The signed index lists the wheel as what it is, with the id of the build that made it and
    // its digest, after that build's tarball; installs take the tarball.
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dist.join("index.json")).unwrap()).unwrap();
    assert_eq!(index["schema"], "rocforge.index/2");
    let entries = index["artifacts"].as_array().unwrap();
    let tarball = entries
        .iter()
        .position(|a| a["name"] == "rocdemo" && a.get("kind").is_none())
        .unwrap_or_else(|| panic!("rocdemo's tarball in {index}"));
    let wheel = &entries[tarball + 1];
    assert_eq!(wheel["kind"], "wheel", "{index}");
    assert_eq!(wheel["url"], name);
    assert_eq!(wheel["sha256"], sha256_file(&built));
    assert_eq!(wheel["key"], entries[tarball]["key"]);
    assert_eq!(wheel["signature"], format!("{name}.minisig"));
    let prefix = fx.root().join("prefix");
    fx.ok(
        &[],
        &[
            "install",
            "rocdemo",
            "--arch",
            "gfx90c",
            "--from",
            &dist.display().to_string(),
            "--prefix",
            &prefix.display().to_string(),
            "--key",
            &fx.root().join("keys/rocforge.pub").display().to_string(),
        ],
    );
    assert!(
        prefix
            .join(format!("share/rocforge/wheels/{name}"))
            .is_file(),
        "the tarball, not the wheel, was installed"
    );
    // A wheel by that name that is not the tarball's is never pinned by an index.
    let bad = fx.root().join("dist-bad");
    rocforge::fsutil::copy_tree(&dist, &bad).unwrap();
    std::fs::write(bad.join(name), "not a wheel").unwrap();
    let o = fx.run(
        &[],
        &["index", &bad.display().to_string(), "--sign-key", &key],
    );
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(
        o.stderr.contains(&format!(
            "{} is not the wheel rocdemo-1.0-gfx90c-",
            bad.join(name).display()
        )) && o.stderr.contains("package the component again"),
        "{}",
        o.stderr
    );
    let o = Command::new("minisign")
        .args(["-V", "-p"])
        .arg(fx.root().join("keys/rocforge.pub"))
        .arg("-m")
        .arg(dist.join(name))
        .output();
    if require("minisign", o.is_ok()) {
        let o = o.unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    write_wheel(
        &dist,
        "rocdemo",
        "1.0+rocm1.0.gfx902",
        "rocdemo",
        &["roc_dep>=0.1"],
    );
    let dep = write_wheel(&dist, "roc_dep", "0.1", "roc_dep", &[]);
    fx.ok(&[], &["publish", "dist"]);

    let page = std::fs::read_to_string(dist.join("gfx90c/rocdemo/index.html")).unwrap();
    assert!(
        page.contains("rocdemo-1.0+rocm1.0.gfx90c-py3-none-any.whl"),
        "{page}"
    );
    assert!(!page.contains("gfx902-py3"), "{page}");
    let dep_page = std::fs::read_to_string(dist.join("gfx90c/roc-dep/index.html")).unwrap();
    assert!(
        dep_page.contains(&format!(
            "href=\"../../roc_dep-0.1-py3-none-any.whl#sha256={}\"",
            sha256_file(&dep)
        )),
        "{dep_page}"
    );
    let root = std::fs::read_to_string(dist.join("gfx90c/index.html")).unwrap();
    assert!(
        root.contains("href=\"rocdemo/\"") && root.contains("href=\"roc-dep/\""),
        "{root}"
    );
    assert!(
        std::fs::read_to_string(dist.join("gfx902/rocdemo/index.html"))
            .unwrap()
            .contains("gfx902-py3")
    );

    let server = HttpServer::start(&dist);
    let venv = fx.root().join("venv");
    let st = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&venv)
        .status()
        .unwrap();
    assert!(st.success());
    let o = Command::new(venv.join("bin/pip"))
        .args([
            "install",
            "--no-cache-dir",
            "--disable-pip-version-check",
            "--index-url",
            &format!("{}gfx90c/", server.url()),
            "rocdemo",
        ])
        .env_remove("PIP_INDEX_URL")
        .env_remove("PIP_EXTRA_INDEX_URL")
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let o = Command::new(venv.join("bin/python"))
        .args([
            "-c",
            "import rocdemo, roc_dep; print(rocdemo.hello()); print(roc_dep.hello())",
        ])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "rocdemo 1.0+rocm1.0.gfx90c\nroc_dep 0.1\n"
    );

    // README's pip line as written, with its two indexes swapped for stand-ins on 127.0.0.1:
    // the release's wheel index (torch and torchvision wheels standing for ours, one per
    // target) and PyPI (a directory listing, as PEP 503 allows, holding their dependency).
    for t in ["gfx90c", "gfx902"] {
        write_wheel(
            &dist,
            "torch",
            &format!("2.6.0+rocm6.4.{t}"),
            "torch",
            &["roc_dep>=0.1"],
        );
        write_wheel(
            &dist,
            "torchvision",
            &format!("0.21.0+rocm6.4.{t}"),
            "torchvision",
            &["torch"],
        );
    }
    fx.ok(&[], &["publish", "dist"]);
    let pypi = fx.root().join("pypi");
    std::fs::create_dir_all(pypi.join("roc-dep")).unwrap();
    std::fs::copy(&dep, pypi.join("roc-dep").join(dep.file_name().unwrap())).unwrap();
    let pypi_server = HttpServer::start(&pypi);
    let line = crate::common::readme::block("Quick start", 4)
        .into_iter()
        .find(|l| l.starts_with("pip install "))
        .expect("README's pip line");
    let line = line
        .replace("https://OWNER.github.io/REPO/", &server.url())
        .replace("https://pypi.org/simple", &pypi_server.url());
    let path = std::path::PathBuf::from(format!(
        "{}:{}",
        venv.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    ));
    let home = fx.root().join("pip-home");
    std::fs::create_dir_all(&home).unwrap();
    let o = crate::common::readme::run(
        &home,
        &[("PATH", &path), ("PIP_NO_CACHE_DIR", Path::new("1"))],
        &line,
    );
    assert_eq!(o.code, 0, "README: {line}\n{}{}", o.stdout, o.stderr);
    let o = Command::new(venv.join("bin/python"))
        .args([
            "-c",
            "import torch, torchvision; print(torch.hello()); print(torchvision.hello())",
        ])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "torch 2.6.0+rocm6.4.gfx90c\ntorchvision 0.21.0+rocm6.4.gfx90c\n",
        "the gfx90c wheels: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// `publish --dry-run` prints what would go where, read from the directory alone: no
/// destination is contacted (the registry's port has no listener, no GitHub token is set) and
/// nothing is written (the wheel index pages are only named).
#[test]
fn publish_dry_run_prints_the_plan_and_sends_and_writes_nothing() {
    let fx = fixture();
    write_wheel(&fx.dist(), "hello", "1.0", "hello", &[]);
    let before = tree_contents(fx.root());
    let unset = [("GITHUB_TOKEN", "")];
    let text = fx
        .ok(
            &unset,
            &[
                "publish",
                "dist",
                "--to",
                "github://me/rocm@v1",
                "--dry-run",
            ],
        )
        .stdout;
    assert_eq!(tree_contents(fx.root()), before, "a dry run writes nothing");
    let mut shown = String::new();
    for l in text.lines() {
        let l = if l.starts_with("    sha256 ") {
            "    sha256 [HEX], [SIZE]".to_string()
        } else if let Some(i) = l.find("issued ") {
            format!("{}issued [DATE], expires [DATE], signed", &l[..i])
        } else {
            l.to_string()
        };
        for word in l.split_inclusive([' ', '-', '.']) {
            let core = word.trim_end_matches([' ', '-', '.']);
            if core.len() >= 8 && core.chars().all(|c| c.is_ascii_hexdigit()) {
                shown += &format!("[HEX]{}", &word[core.len()..]);
            } else {
                shown += word;
            }
        }
        shown.push('\n');
    }
    insta::assert_snapshot!("publish_dry_run", shown);

    // The registry's plan, as JSON: every layer, each with the digest of the file sent.
    let to = format!("oci://127.0.0.1:{}/rocforge/releases", free_port());
    let out = fx
        .ok(
            &[],
            &[
                "--format",
                "json",
                "publish",
                "dist",
                "--to",
                &to,
                "--dry-run",
            ],
        )
        .stdout;
    assert_eq!(tree_contents(fx.root()), before, "a dry run writes nothing");
    let plan: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(plan["schema"], "rocforge.publish-plan/1");
    crate::common::schema::assert_matches_schema(fx.root(), "publish-plan", &plan);
    let uploads = plan["uploads"].as_array().unwrap();
    let kinds: Vec<&str> = uploads
        .iter()
        .map(|u| u["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "tarball",
            "signature",
            "sbom",
            "signature",
            "provenance",
            "signature",
            "tarball",
            "signature",
            "sbom",
            "signature",
            "provenance",
            "signature",
            "index",
            "signature"
        ],
        "{out}"
    );
    for u in uploads {
        let file = fx.dist().join(u["file"].as_str().unwrap());
        assert_eq!(u["sha256"], sha256_file(&file), "{u}");
        assert!(
            u["to"].as_str().unwrap().contains("/rocforge/releases:"),
            "{u}"
        );
    }
    assert_eq!(plan["index"]["artifacts"].as_array().unwrap().len(), 2);
    assert_eq!(plan["index"]["signed"], true);
    let pages = plan["wheel_index"].as_array().unwrap();
    assert!(!pages.is_empty());
    assert!(
        pages
            .iter()
            .all(|p| !Path::new(p.as_str().unwrap()).exists())
    );
}

/// A publish sends what the signed index lists: a tarball dropped into the release directory
/// after `package` wrote the index is named and left behind, and a directory without an index
/// is refused with the command that writes one, before anything is sent.
#[test]
fn publish_sends_what_the_index_lists_and_needs_an_index() {
    let fx = fixture();
    let listed = tarballs(&fx.dist());
    std::fs::copy(&listed[0], fx.dist().join("stray-1.0.tar.zst")).unwrap();
    let unset = [("GITHUB_TOKEN", "")];
    let args = [
        "--format",
        "json",
        "publish",
        "dist",
        "--to",
        "github://me/rocm@v1",
        "--dry-run",
    ];
    let plan: serde_json::Value = serde_json::from_str(&fx.ok(&unset, &args).stdout).unwrap();
    let files: Vec<&str> = plan["uploads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["file"].as_str().unwrap())
        .collect();
    assert!(!files.contains(&"stray-1.0.tar.zst"), "{files:?}");
    for t in &listed {
        let name = t.file_name().unwrap().to_str().unwrap();
        assert!(files.contains(&name), "{name} not sent: {files:?}");
    }
    let notes = plan["notes"].to_string();
    assert!(
        notes.contains("not in index.json, not sent: stray-1.0.tar.zst"),
        "{notes}"
    );

    std::fs::remove_file(fx.dist().join("index.json")).unwrap();
    let o = fx.run(&unset, &args[2..]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(o.stderr.contains("holds no index.json"), "{}", o.stderr);
    assert!(o.stderr.contains("rocforge index"), "{}", o.stderr);
}
