//! `rocforge image create` for real: a store built by the test (host runtime, two copied
//! components), the test base image pushed to a registry on 127.0.0.1 (Debian's
//! docker-registry), the image created and pushed twice (same digest, checked with a HEAD on the
//! registry), its config, labels and layer checked, then pulled and run with podman; and loaded
//! into podman (oci-archive) and docker (docker-archive) and run there.

use crate::common;

use std::io::Read;
use std::process::Command;

use common::*;

const BASE: &str = "localhost/rocforge-test-base:bookworm";
const EPOCH: &str = "1700000000";

fn podman(args: &[&str]) -> std::process::Output {
    Command::new("podman")
        .args(args)
        .env("CONTAINERS_CONF", containers_conf())
        .output()
        .expect("podman")
}

fn podman_ok(args: &[&str]) -> String {
    let o = podman(args);
    assert!(
        o.status.success(),
        "podman {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

const DOCKER_HOST: &str = "unix:///run/rocforge-test/docker.sock";

fn docker(args: &[&str]) -> std::process::Output {
    Command::new("docker")
        .args(args)
        .env("DOCKER_HOST", DOCKER_HOST)
        .output()
        .expect("docker")
}

struct Fx {
    w: World,
}

derefs_to_world!(Fx);

impl Fx {
    fn create(&self, base: &str, tag: &str, how: &[&str]) -> serde_json::Value {
        let mut args = vec![
            "image",
            "create",
            "hello",
            "--runtime",
            "host",
            "--base",
            base,
            "--tag",
            tag,
            "--format",
            "json",
        ];
        args.extend_from_slice(how);
        serde_json::from_str(&self.ok(&args).stdout).unwrap()
    }
}

/// `hello` (a shell script copied into bin/) depending on `hellodoc` (copied into share/hello),
/// built with the host runtime.
fn fixture() -> Fx {
    let w = World::new()
        .release("localhost/rocforge-none:1")
        .containers()
        .var("SOURCE_DATE_EPOCH", EPOCH)
        .var("DOCKER_HOST", DOCKER_HOST)
        .args(&["--arch", "gfx90c"])
        .build();
    let (root, rel) = (w.root(), w.release_dir());
    std::fs::create_dir_all(root.join("src/hello")).unwrap();
    std::fs::create_dir_all(root.join("src/doc/sub")).unwrap();
    std::fs::write(
        rel.join("hellodoc.toml"),
        "name = \"hellodoc\"\nversion = \"1.0\"\nsummary = \"data\"\nlicense = \"MIT\"\n\n[source]\npath = \"../../src/doc\"\n\n[build]\nsystem = \"copy\"\ndest = \"share/hello\"\n",
    )
    .unwrap();
    std::fs::write(
        rel.join("hello.toml"),
        "name = \"hello\"\nversion = \"2.0\"\nsummary = \"a script\"\nlicense = \"MIT\"\ndepends = [\"hellodoc\"]\n\n[source]\npath = \"../../src/hello\"\n\n[build]\nsystem = \"copy\"\ndest = \"bin\"\n",
    )
    .unwrap();
    let script = root.join("src/hello/hello-rocforge");
    std::fs::write(&script, "#!/bin/sh\necho \"hello from $ROCM_PATH\"\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(root.join("src/doc/README"), "stack docs\n").unwrap();
    std::fs::write(root.join("src/doc/sub/notes"), "notes\n").unwrap();
    std::os::unix::fs::symlink("README", root.join("src/doc/README.link")).unwrap();
    let fx = Fx { w };
    fx.ok(&["build", "hello", "--runtime", "host"]);
    fx
}

fn client() -> reqwest::blocking::Client {
    reqwest::blocking::Client::new()
}

fn remote(host: &str, repo: &str) -> rocforge::oci::Remote<'static> {
    rocforge::oci::Remote::new(
        client(),
        rocforge::oci::Repository::parse(&format!("{host}/{repo}")).unwrap(),
    )
}

/// A registry on 127.0.0.1, with podman holding the test base image; None (the test is skipped)
/// without either.
fn registry_and_base() -> Option<Registry> {
    let reg = registry()?;
    podman_ready(BASE).then_some(reg)
}

/// Pushes the local image `local` to `to` (`host/name:tag`) on the test registry.
fn push(local: &str, to: &str) {
    podman_ok(&[
        "push",
        "--tls-verify=false",
        local,
        &format!("docker://{to}"),
    ]);
}

#[test]
fn image_create_is_reproducible_pushes_loads_and_runs() {
    let Some(reg) = registry_and_base() else {
        return;
    };
    let host = reg.host();
    let base = format!("{host}/base:1");
    push(BASE, &base);
    let fx = fixture();

    // Missing store entries: the hint is the build command.
    let o = fx.run(&[
        "image",
        "create",
        "hello",
        "--runtime",
        "container",
        "--base",
        &base,
        "--tag",
        &format!("{host}/stack:1"),
        "--push",
    ]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(
        o.stderr
            .contains("build first: rocforge build hello --arch gfx90c"),
        "{}",
        o.stderr
    );

    // Created and pushed twice: the same digest, and the registry's tag points at it.
    let tag = format!("{host}/stack:1");
    let first = fx.create(&base, &tag, &["--push"]);
    let digest = first["digest"].as_str().unwrap().to_string();
    assert_eq!(
        rocforge::oci::resolve_digest(&client(), &tag).unwrap(),
        digest
    );
    let second = fx.create(&base, &tag, &["--push"]);
    assert_eq!(second["digest"], first["digest"]);
    assert_eq!(second["layer"], first["layer"]);
    assert_eq!(
        rocforge::oci::resolve_digest(&client(), &tag).unwrap(),
        digest
    );
    // Another repository of the same registry (base layers mounted): still the same digest.
    let other = format!("{host}/elsewhere/stack:9");
    assert_eq!(
        fx.create(&base, &other, &["--push"])["digest"],
        first["digest"]
    );
    assert_eq!(
        rocforge::oci::resolve_digest(&client(), &other).unwrap(),
        digest
    );

    // What the registry holds: an OCI manifest of the base's layers plus ours, the config.
    let r = remote(&host, "stack");
    let (_, bytes) = r.get_manifest(&digest).unwrap().unwrap();
    let m: rocforge::oci::ImageManifest = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(m.media_type, "application/vnd.oci.image.manifest.v1+json");
    let (base_digest, base_bytes) = remote(&host, "base").get_manifest("1").unwrap().unwrap();
    let bm: serde_json::Value = serde_json::from_slice(&base_bytes).unwrap();
    let base_layers = bm["layers"].as_array().unwrap();
    assert_eq!(m.layers.len(), base_layers.len() + 1);
    for (ours, theirs) in m.layers.iter().zip(base_layers) {
        assert_eq!(ours.digest, theirs["digest"].as_str().unwrap());
    }
    let layer = m.layers.last().unwrap();
    assert_eq!(
        layer.media_type,
        "application/vnd.oci.image.layer.v1.tar+gzip"
    );
    assert_eq!(
        m.annotations["org.opencontainers.image.base.digest"],
        base_digest
    );
    let config: serde_json::Value =
        serde_json::from_slice(&r.get_blob_bytes(&m.config.digest, 1 << 20).unwrap()).unwrap();
    assert_eq!(config["created"], "2023-11-14T22:13:20Z");
    let env: Vec<&str> = config["config"]["Env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(env.contains(&"ROCM_PATH=/opt/rocm"), "{env:?}");
    assert!(env.contains(&"LD_LIBRARY_PATH=/opt/rocm/lib"), "{env:?}");
    assert!(
        env.iter()
            .any(|e| e.starts_with("PATH=/opt/rocm/bin:") && e.contains("/usr/bin")),
        "{env:?}"
    );
    let labels = &config["config"]["Labels"];
    assert_eq!(labels["rocforge.components"], "hellodoc=1.0,hello=2.0");
    assert_eq!(labels["rocforge.targets"], "gfx90c");
    assert_eq!(labels["org.opencontainers.image.base.name"], base.as_str());
    assert!(
        labels["rocforge.keys"]
            .as_str()
            .unwrap()
            .contains(first["components"][1]["key"].as_str().unwrap())
    );
    let diff_ids = config["rootfs"]["diff_ids"].as_array().unwrap();
    assert_eq!(diff_ids.len(), m.layers.len());
    assert_eq!(diff_ids.last().unwrap(), &first["layer"]["diff_id"]);
    let history = config["history"].as_array().unwrap();
    assert_eq!(history.last().unwrap()["created"], "2023-11-14T22:13:20Z");

    // The layer: gzip with a zero time, a tar sorted by path, 0:0, one mtime, normalized modes,
    // the prefix's directories first; its uncompressed sha256 is the diff_id.
    let mut gz = Vec::new();
    r.get_blob(&layer.digest)
        .unwrap()
        .read_to_end(&mut gz)
        .unwrap();
    assert_eq!(&gz[4..8], &[0, 0, 0, 0], "gzip header time");
    let mut plain = Vec::new();
    flate2::read::GzDecoder::new(&gz[..])
        .read_to_end(&mut plain)
        .unwrap();
    assert_eq!(
        format!("sha256:{}", sha256_hex(&plain)),
        first["layer"]["diff_id"].as_str().unwrap()
    );
    let mut ar = tar::Archive::new(&plain[..]);
    let mut names = Vec::new();
    for e in ar.entries().unwrap() {
        let e = e.unwrap();
        let h = e.header();
        assert_eq!((h.uid().unwrap(), h.gid().unwrap()), (0, 0));
        assert_eq!(h.mtime().unwrap(), 1_700_000_000);
        let name = e.path().unwrap().display().to_string();
        let mode = h.mode().unwrap();
        match name.as_str() {
            "opt/rocm/bin/hello-rocforge" => assert_eq!(mode, 0o755),
            "opt/rocm/share/hello/README" => assert_eq!(mode, 0o644),
            "opt/rocm/share/hello/README.link" => {
                assert_eq!(e.link_name().unwrap().unwrap().to_str(), Some("README"))
            }
            _ => {}
        }
        names.push(name);
    }
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted);
    assert_eq!(
        names,
        [
            "opt/",
            "opt/rocm/",
            "opt/rocm/bin/",
            "opt/rocm/bin/hello-rocforge",
            "opt/rocm/share/",
            "opt/rocm/share/hello/",
            "opt/rocm/share/hello/README",
            "opt/rocm/share/hello/README.link",
            "opt/rocm/share/hello/sub/",
            "opt/rocm/share/hello/sub/notes",
        ]
    );

    // A Docker v2 base (its layer types become OCI's; the bytes are the same) and a base behind
    // a manifest list (linux/amd64 is chosen: the same manifest as base:1).
    let v2 = format!("{host}/base-v2:1");
    podman_ok(&[
        "push",
        "--tls-verify=false",
        "--format",
        "v2s2",
        BASE,
        &format!("docker://{v2}"),
    ]);
    let from_v2 = fx.create(&v2, &format!("{host}/stack-v2:1"), &["--push"]);
    let (_, bytes) = remote(&host, "stack-v2")
        .get_manifest(from_v2["digest"].as_str().unwrap())
        .unwrap()
        .unwrap();
    let m2: rocforge::oci::ImageManifest = serde_json::from_slice(&bytes).unwrap();
    assert!(
        m2.layers
            .iter()
            .all(|l| l.media_type == "application/vnd.oci.image.layer.v1.tar+gzip"),
        "{m2:?}"
    );
    assert_eq!(from_v2["layer"], first["layer"]);
    let list = "localhost/rocforge-test-base-list:1";
    let _ = podman(&["manifest", "rm", list]);
    podman_ok(&["manifest", "create", list]);
    podman_ok(&[
        "manifest",
        "add",
        "--tls-verify=false",
        list,
        &format!("docker://{base}"),
    ]);
    let listed = format!("{host}/base-list:1");
    podman_ok(&[
        "manifest",
        "push",
        "--tls-verify=false",
        "--all",
        list,
        &format!("docker://{listed}"),
    ]);
    let _ = podman(&["manifest", "rm", list]);
    let (_, list_bytes) = remote(&host, "base-list")
        .get_manifest("1")
        .unwrap()
        .unwrap();
    assert!(String::from_utf8_lossy(&list_bytes).contains("\"manifests\""));
    let from_list = fx.create(&listed, &format!("{host}/stack-list:1"), &["--push"]);
    assert_eq!(from_list["base_digest"], base_digest.as_str());

    // Pulled by podman and run: the stack's files and environment are there.
    let script =
        "cat \"$ROCM_PATH/share/hello/README\"; echo \"ROCM_PATH=$ROCM_PATH\"; hello-rocforge";
    let _ = podman(&["rmi", "-f", &tag]);
    podman_ok(&["pull", "--tls-verify=false", &tag]);
    let out = podman_ok(&["run", "--rm", &tag, "sh", "-c", script]);
    assert_eq!(
        out,
        "stack docs\nROCM_PATH=/opt/rocm\nhello from /opt/rocm\n"
    );
    let _ = podman(&["rmi", "-f", &tag]);

    // Loaded into podman (oci-archive): named by --tag, the same image ID, runs.
    let local = "localhost/rocforge-test-stack:load";
    let _ = podman(&["rmi", "-f", local]);
    let loaded = fx.create(&base, local, &["--load", "podman"]);
    assert_eq!(loaded["digest"], first["digest"]);
    let id = podman_ok(&["image", "inspect", "--format", "{{.Id}}", local]);
    assert_eq!(
        format!("sha256:{}", id.trim()),
        first["id"].as_str().unwrap()
    );
    let out = podman_ok(&["run", "--rm", local, "sh", "-c", script]);
    assert_eq!(
        out,
        "stack docs\nROCM_PATH=/opt/rocm\nhello from /opt/rocm\n"
    );
    let _ = podman(&["rmi", "-f", local]);

    // Loaded into docker (docker-archive) and run.
    let docker_ready = which("docker") && docker(&["version"]).status.success();
    if require(
        "a docker daemon at /run/rocforge-test/docker.sock",
        docker_ready,
    ) {
        let _ = docker(&["rmi", "-f", local]);
        fx.create(&base, local, &["--load", "docker"]);
        let o = docker(&["image", "inspect", "--format", "{{.Id}}", local]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(
            String::from_utf8_lossy(&o.stdout).trim(),
            first["id"].as_str().unwrap()
        );
        let o = docker(&["run", "--rm", local, "sh", "-c", script]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(
            String::from_utf8_lossy(&o.stdout),
            "stack docs\nROCM_PATH=/opt/rocm\nhello from /opt/rocm\n"
        );
        let _ = docker(&["rmi", "-f", local]);
    }
}

fn sha256_hex(b: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(b))
}

/// containers/Containerfile.runtime is the base of the published images: built here FROM the test
/// base (no registry is reachable), pushed, then `image create` puts the stack on it, as the
/// release workflow's publish job does. The OS libraries the ROCm runtime links against resolve
/// in the result, and the stack and its environment are there.
#[test]
fn runtime_template_is_the_base_of_published_images() {
    let Some(reg) = registry_and_base() else {
        return;
    };
    let host = reg.host();
    let local = "localhost/rocforge-test-runtime-base:test";
    let build = podman(&[
        "build",
        "--timestamp",
        "0",
        "--build-arg",
        &format!("BASE={BASE}"),
        "-f",
        manifest()
            .join("containers/Containerfile.runtime")
            .to_str()
            .unwrap(),
        "-t",
        local,
        manifest().join("containers").to_str().unwrap(),
    ]);
    assert!(
        build.status.success(),
        "podman build of containers/Containerfile.runtime: {}",
        String::from_utf8_lossy(&build.stderr)
    );
    let base = format!("{host}/rocforge-runtime-base:1");
    push(local, &base);
    let fx = fixture();
    let tag = format!("{host}/rocforge:test-1.0-gfx90c-v1");
    let created = fx.create(&base, &tag, &["--push"]);
    assert!(created["digest"].as_str().unwrap().starts_with("sha256:"));

    let _ = podman(&["rmi", "-f", &tag]);
    podman_ok(&["pull", "--tls-verify=false", &tag]);
    // Every runtime library the template promises is in the linker cache, and the stack runs.
    let script = "for l in libnuma.so.1 libdrm.so.2 libdrm_amdgpu.so.1 libelf.so.1 libz.so.1 \
                  libzstd.so.1 libtinfo.so.6 libgomp.so.1 libgfortran.so.5; do \
                  ldconfig -p | grep -q \"$l \" || echo \"missing $l\"; done; \
                  command -v lspci >/dev/null || echo 'missing lspci'; \
                  echo \"ROCM_PATH=$ROCM_PATH\"; hello-rocforge";
    let out = podman_ok(&["run", "--rm", &tag, "sh", "-c", script]);
    assert_eq!(out, "ROCM_PATH=/opt/rocm\nhello from /opt/rocm\n");
    // The stack's own title and description replace the template's; the template's others stay.
    let labels = podman_ok(&["image", "inspect", "--format", "{{json .Labels}}", &tag]);
    let labels: serde_json::Value = serde_json::from_str(&labels).unwrap();
    assert_eq!(
        labels["org.opencontainers.image.title"],
        "rocforge hellodoc hello"
    );
    assert_eq!(
        labels["org.opencontainers.image.source"], "https://github.com/rocforge/rocforge",
        "{labels}"
    );
    let _ = podman(&["rmi", "-f", &tag]);
    let _ = podman(&["rmi", "-f", local]);
}

/// Answers every request with a redirect to another host (127.0.0.2): a registry that would send
/// pushes elsewhere.
fn redirecting_registry() -> (u16, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = seen.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let mut r = BufReader::new(conn.try_clone().unwrap());
            let mut w = conn;
            loop {
                let mut line = String::new();
                if r.read_line(&mut line).unwrap_or(0) == 0 || line.trim().is_empty() {
                    break;
                }
            }
            let _ = w.write_all(
                b"HTTP/1.1 307 Temporary Redirect\r\nLocation: http://127.0.0.2:9/v2/elsewhere\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            );
        }
    });
    (port, seen)
}

/// `--base` from podman's local storage (containers-storage: and a plain localhost/ name): the
/// saved image becomes the base, twice the same digest, pushed and loaded into docker and run.
/// A tag the registry has for another image is refused (then moved with --force); a local base
/// that is not there, and a registry that redirects elsewhere, are refused naming them.
#[test]
fn image_create_from_a_local_base_and_its_refusals() {
    let Some(reg) = registry_and_base() else {
        return;
    };
    let host = reg.host();
    let fx = fixture();
    let script =
        "cat \"$ROCM_PATH/share/hello/README\"; echo \"ROCM_PATH=$ROCM_PATH\"; hello-rocforge";

    let local = format!("containers-storage:{BASE}");
    let tag = format!("{host}/from-local:1");
    let first = fx.create(&local, &tag, &["--push"]);
    assert_eq!(first["base"], local.as_str());
    assert_eq!(
        rocforge::oci::resolve_digest(&client(), &tag).unwrap(),
        first["digest"].as_str().unwrap()
    );
    // The plain localhost/ name is the same image, read the same way: the same digest.
    let plain = fx.create(BASE, &tag, &["--push"]);
    assert_eq!(plain["digest"], first["digest"]);
    assert_eq!(plain["base_digest"], first["base_digest"]);
    let base_id = podman_ok(&["image", "inspect", "--format", "{{.Id}}", BASE]);
    let (_, bytes) = remote(&host, "from-local")
        .get_manifest(first["digest"].as_str().unwrap())
        .unwrap()
        .unwrap();
    let m: rocforge::oci::ImageManifest = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(
        m.annotations["org.opencontainers.image.base.name"], BASE,
        "{m:?}"
    );
    // The base's layers are podman's own: its rootfs diff_ids are the saved image's.
    let config: serde_json::Value = serde_json::from_slice(
        &remote(&host, "from-local")
            .get_blob_bytes(&m.config.digest, 1 << 20)
            .unwrap(),
    )
    .unwrap();
    let podman_diffs = podman_ok(&[
        "image",
        "inspect",
        "--format",
        "{{json .RootFS.Layers}}",
        BASE,
    ]);
    let podman_diffs: Vec<String> = serde_json::from_str(&podman_diffs).unwrap();
    let ours: Vec<&str> = config["rootfs"]["diff_ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_str().unwrap())
        .collect();
    assert_eq!(
        ours[..ours.len() - 1],
        podman_diffs,
        "base {}",
        base_id.trim()
    );

    // Loaded into docker from the local base, and run.
    let docker_ready = which("docker") && docker(&["version"]).status.success();
    if require(
        "a docker daemon at /run/rocforge-test/docker.sock",
        docker_ready,
    ) {
        let loaded = "localhost/rocforge-test-stack:from-local";
        let _ = docker(&["rmi", "-f", loaded]);
        let l = fx.create(&local, loaded, &["--load", "docker"]);
        assert_eq!(l["digest"], first["digest"]);
        let o = docker(&["run", "--rm", loaded, "sh", "-c", script]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(
            String::from_utf8_lossy(&o.stdout),
            "stack docs\nROCM_PATH=/opt/rocm\nhello from /opt/rocm\n"
        );
        let _ = docker(&["rmi", "-f", loaded]);
    }

    // The same tag for another image (the registry's copy of the base has other layers):
    // refused, the tag unmoved; --force moves it.
    let base = format!("{host}/base:1");
    push(BASE, &base);
    let args = |extra: &[&'static str]| {
        let mut a = vec![
            "image".to_string(),
            "create".into(),
            "hello".into(),
            "--runtime".into(),
            "host".into(),
            "--base".into(),
            base.clone(),
            "--tag".into(),
            tag.clone(),
            "--push".into(),
        ];
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    };
    let refused = args(&[]);
    let o = fx.run(&refused.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(
        o.stderr.contains(&format!(
            "{tag} already exists in its registry as {}, not this image",
            first["digest"].as_str().unwrap()
        )),
        "{}",
        o.stderr
    );
    assert!(o.stderr.contains("--force"), "{}", o.stderr);
    assert_eq!(
        rocforge::oci::resolve_digest(&client(), &tag).unwrap(),
        first["digest"].as_str().unwrap()
    );
    let forced = fx.create(&base, &tag, &["--push", "--force"]);
    assert_ne!(forced["digest"], first["digest"]);
    assert_eq!(
        rocforge::oci::resolve_digest(&client(), &tag).unwrap(),
        forced["digest"].as_str().unwrap()
    );

    // A local base that is not there.
    let o = fx.run(&[
        "image",
        "create",
        "hello",
        "--runtime",
        "host",
        "--base",
        "localhost/rocforge-test-none:9",
        "--tag",
        "localhost/rocforge-test-stack:none",
        "--load",
        "podman",
    ]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(
        o.stderr
            .contains("base image localhost/rocforge-test-none:9 is not in podman's local storage"),
        "{}",
        o.stderr
    );
    assert!(o.stderr.contains("podman images"), "{}", o.stderr);

    // A registry that redirects to another host: refused, nothing followed there.
    let (port, seen) = redirecting_registry();
    let away = format!("127.0.0.1:{port}/stack:1");
    let o = fx.run(&[
        "image",
        "create",
        "hello",
        "--runtime",
        "host",
        "--base",
        &local,
        "--tag",
        &away,
        "--push",
    ]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(
        o.stderr.contains(&format!("pushing {away}"))
            && o.stderr.contains(
                "redirected to http://127.0.0.2:9/v2/elsewhere, another host than the registry's"
            ),
        "{}",
        o.stderr
    );
    assert!(
        o.stderr
            .contains("rocforge pushes only to the registry --tag names"),
        "{}",
        o.stderr
    );
    assert!(seen.load(std::sync::atomic::Ordering::SeqCst) >= 1);

    // A stack linking a library the base lacks: refused before anything is written, naming the
    // library and the file that needs it.
    let lib = fx.root().join("src/needy");
    std::fs::create_dir_all(&lib).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("a.c"), "int nothere(void) { return 1; }\n").unwrap();
    std::fs::write(
        tmp.path().join("b.c"),
        "int nothere(void);\nint needy(void) { return nothere(); }\n",
    )
    .unwrap();
    let cc = |args: &[&str]| {
        let o = std::process::Command::new("cc")
            .current_dir(tmp.path())
            .args(args)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "cc {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    };
    cc(&[
        "-shared",
        "-fPIC",
        "-o",
        "libnothere.so.1",
        "-Wl,-soname,libnothere.so.1",
        "a.c",
    ]);
    let out = lib.join("libneedy.so");
    cc(&[
        "-shared",
        "-fPIC",
        "-o",
        out.to_str().unwrap(),
        "b.c",
        "-L.",
        "-l:libnothere.so.1",
    ]);
    std::fs::write(
        fx.root().join("recipes/test-1.0/needy.toml"),
        "name = \"needy\"\nversion = \"1.0\"\nsummary = \"links a library no base has\"\nlicense = \"MIT\"\n\n[source]\npath = \"../../src/needy\"\n\n[build]\nsystem = \"copy\"\ndest = \"lib\"\n",
    )
    .unwrap();
    fx.ok(&["build", "needy", "--runtime", "host"]);
    let o = fx.run(&[
        "image",
        "create",
        "needy",
        "--runtime",
        "host",
        "--base",
        &local,
        "--tag",
        "localhost/rocforge-test-stack:needy",
        "--load",
        "podman",
    ]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(
        o.stderr
            .contains("lacks libraries the stack links: libnothere.so.1 (needed by needy)")
            && o.stderr
                .contains("containers/Containerfile.runtime-<release>"),
        "{}",
        o.stderr
    );
    assert!(
        !podman(&["image", "exists", "localhost/rocforge-test-stack:needy"])
            .status
            .success()
    );
}

/// A wheel made by the test: `pyhello` (a module and its dist-info), plus `extra` members.
fn write_wheel(path: &std::path::Path, extra: &[(&str, &[u8])]) {
    use std::io::Write;
    let mut z = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
    let opts = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .last_modified_time(zip::DateTime::default());
    let members: Vec<(&str, &[u8])> = [
        (
            "pyhello/__init__.py",
            &b"def greet():\n    return 'hello from a wheel'\n"[..],
        ),
        (
            "pyhello-1.0.dist-info/METADATA",
            b"Metadata-Version: 2.1\nName: pyhello\nVersion: 1.0\n",
        ),
        (
            "pyhello-1.0.dist-info/WHEEL",
            b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        ),
    ]
    .into_iter()
    .chain(extra.iter().copied())
    .collect();
    for (name, bytes) in members {
        z.start_file(name, opts).unwrap();
        z.write_all(bytes).unwrap();
    }
    z.finish().unwrap();
}

/// A stack that carries a wheel (as PyTorch's build does) gets it unpacked in the image, on
/// PYTHONPATH, when the base has the Python it needs: `python3 -c "import …"` works in the
/// image. A base without that Python, or a member that would land outside, is refused.
#[test]
fn wheels_of_the_stack_are_importable_in_the_image() {
    const PY_BASE: &str = "localhost/rocforge-test-builder:bookworm";
    if !podman_ready(PY_BASE) {
        return;
    }
    let fx = fixture();
    let (root, rel) = (fx.root(), fx.release_dir());
    std::fs::create_dir_all(root.join("src/wheels")).unwrap();
    let wheel = root.join("src/wheels/pyhello-1.0-py3-none-any.whl");
    write_wheel(&wheel, &[]);
    std::fs::write(
        rel.join("pyhello.toml"),
        "name = \"pyhello\"\nversion = \"1.0\"\nsummary = \"a wheel\"\nlicense = \"MIT\"\n\n[source]\npath = \"../../src/wheels\"\n\n[build]\nsystem = \"copy\"\ndest = \"share/rocforge/wheels\"\n",
    )
    .unwrap();
    fx.ok(&["build", "pyhello", "--runtime", "host"]);
    let create = |base: &str, tag: &str| {
        fx.run(&[
            "image",
            "create",
            "pyhello",
            "--runtime",
            "host",
            "--base",
            base,
            "--tag",
            tag,
            "--load",
            "podman",
        ])
    };
    let tag = "localhost/rocforge-test-wheel:1";
    let o = create(PY_BASE, tag);
    assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    assert!(
        o.stderr
            .contains("Python 3 for pyhello-1.0-py3-none-any.whl: /usr/lib/python3.11"),
        "{}",
        o.stderr
    );
    let said = podman_ok(&[
        "run",
        "--rm",
        tag,
        "python3",
        "-c",
        "import pyhello, importlib.metadata as m, os; print(pyhello.greet(), m.version('pyhello'), pyhello.__file__, os.environ['PYTHONPATH'])",
    ]);
    assert_eq!(
        said.trim(),
        "hello from a wheel 1.0 /opt/rocm/lib/python3/site-packages/pyhello/__init__.py /opt/rocm/lib/python3/site-packages"
    );
    // Unpacked, not carried twice.
    let listing = podman_ok(&["run", "--rm", tag, "ls", "/opt/rocm/share/rocforge/wheels"]);
    assert_eq!(listing.trim(), "", "{listing}");
    let _ = podman(&["rmi", tag]);

    // A base without Python: refused before anything is written, naming the wheel.
    let o = create(BASE, "localhost/rocforge-test-wheel:2");
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(
        o.stderr.contains(&format!(
            "base image {BASE} has no Python 3, which the wheel pyhello-1.0-py3-none-any.whl of the stack needs"
        )) && o.stderr.contains("help:"),
        "{}",
        o.stderr
    );

    // A member that would land outside site-packages: refused, naming it.
    write_wheel(&wheel, &[("../../../../etc/evil", b"x")]);
    fx.ok(&["build", "pyhello", "--runtime", "host"]);
    let o = create(PY_BASE, "localhost/rocforge-test-wheel:3");
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(
        o.stderr.contains("wheel pyhello-1.0-py3-none-any.whl: member \"../../../../etc/evil\" would land outside its directory"),
        "{}",
        o.stderr
    );
}
