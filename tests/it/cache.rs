//! `rocforge build --cache oci://…` against a real registry (Debian's docker-registry on
//! 127.0.0.1): a build in podman pushes signed entries; a build into an empty store pulls every
//! step instead of building it, with identical trees; an entry signed by an untrusted key is
//! refused and built locally; host builds are never pushed.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;

const IMAGE: &str = "localhost/rocforge-test-builder:bookworm";

struct Fx {
    w: World,
}

derefs_to_world!(Fx);

impl Fx {
    /// Runs rocforge with the store `store` and the config `config` (files under the root).
    fn run(&self, store: &str, config: &str, args: &[&str]) -> Out {
        let store = self.path(store);
        let config = self.path(config);
        self.w.run_env(
            &[
                ("ROCFORGE_STORE", store.as_path()),
                ("ROCFORGE_CONFIG", config.as_path()),
            ],
            args,
        )
    }

    fn build(&self, store: &str, config: &str, args: &[&str]) -> (serde_json::Value, String) {
        let mut full = vec!["build", "greet", "--format", "json"];
        full.extend_from_slice(args);
        let o = self.run(store, config, &full);
        assert_eq!(o.code, 0, "{full:?}:\n{}\n{}", o.stdout, o.stderr);
        (serde_json::from_str(&o.stdout).unwrap(), o.stderr)
    }
}

fn trees(report: &serde_json::Value) -> Vec<Vec<(String, Vec<u8>)>> {
    report["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| tree_contents(Path::new(s["tree"].as_str().unwrap())))
        .collect()
}

/// `greet` (a C program built with cc in the builder image) depending on `greetdoc` (copied).
fn fixture() -> Fx {
    let w = World::new()
        .release(IMAGE)
        .containers()
        .args(&["--arch", "gfx90c"])
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
    w.write("empty.toml", "");
    for (dir, trust) in [("keys", "trust.toml"), ("other-keys", "other.toml")] {
        w.trust_new_key(dir, trust);
    }
    Fx { w }
}

#[test]
fn registry_cache_pushes_signed_entries_pulls_them_and_refuses_untrusted_signers() {
    let Some(reg) = registry() else {
        return;
    };
    if !podman_ready(IMAGE) {
        return;
    }
    let fx = fixture();
    let cache = format!("oci://{}/rocforge/cache", reg.host());
    let key = fx.root().join("keys/rocforge.key").display().to_string();

    // A: built in podman, each new entry pushed.
    let (a, err) = fx.build(
        "store-a",
        "trust.toml",
        &[
            "--runtime",
            "podman",
            "--cache",
            &cache,
            "--cache-key",
            &key,
        ],
    );
    assert_eq!(
        step_results(&a),
        [
            ("greetdoc".into(), "built".into()),
            ("greet".into(), "built".into())
        ],
        "{err}"
    );
    assert!(err.contains("greet: pushed to oci://"), "{err}");
    assert!(err.contains("greetdoc: pushed to oci://"), "{err}");

    // What the registry holds: an OCI image manifest per key with our config and layer types.
    let keys: Vec<String> = a["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let tree = PathBuf::from(s["tree"].as_str().unwrap());
            tree.parent()
                .unwrap()
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    let client = reqwest::blocking::Client::new();
    for k in &keys {
        let resp = client
            .get(format!(
                "http://{}/v2/rocforge/cache/manifests/key-{k}",
                reg.host()
            ))
            .header("Accept", "application/vnd.oci.image.manifest.v1+json")
            .send()
            .unwrap();
        assert_eq!(resp.status().as_u16(), 200);
        let m: serde_json::Value = resp.json_value();
        assert_eq!(m["mediaType"], "application/vnd.oci.image.manifest.v1+json");
        assert_eq!(
            m["config"]["mediaType"],
            "application/vnd.rocforge.cache.config.v1+json"
        );
        assert_eq!(
            m["layers"][0]["mediaType"],
            "application/vnd.rocforge.component.v1.tar+zstd"
        );
        assert_eq!(
            m["layers"][1]["mediaType"],
            "application/vnd.rocforge.signature.v1+minisign"
        );
        assert_eq!(m["annotations"]["rocforge.key"], k.as_str());
        assert_eq!(m["annotations"]["rocforge.targets"], "gfx90c");
    }

    // B: an empty store, the pusher's key trusted: every step is pulled, nothing built.
    let (b, err) = fx.build(
        "store-b",
        "trust.toml",
        &["--runtime", "podman", "--cache", &cache],
    );
    assert_eq!(
        step_results(&b),
        [
            ("greetdoc".into(), "pulled".into()),
            ("greet".into(), "pulled".into())
        ],
        "{err}"
    );
    assert_eq!(trees(&a), trees(&b));
    assert!(
        !fx.root().join("store-b/.logs").exists() || {
            std::fs::read_dir(fx.root().join("store-b/.logs"))
                .unwrap()
                .count()
                == 0
        }
    );
    // The pulled program runs.
    let greet = PathBuf::from(b["steps"][1]["tree"].as_str().unwrap()).join("bin/greet");
    let out = Command::new(&greet).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "hello\n");
    // Its files carry the entry's source date, not the moment of the pull: a dependency pulled
    // on another machine is no newer than the objects a checkpoint compiled against it.
    let meta: serde_json::Value = serde_json::from_slice(
        &std::fs::read(
            greet
                .parent()
                .unwrap()
                .parent()
                .unwrap()
                .parent()
                .unwrap()
                .join("meta.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let date = meta["source_date_epoch"].as_u64().unwrap_or(0);
    let mtime = std::fs::metadata(&greet)
        .unwrap()
        .modified()
        .unwrap()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert_eq!(mtime, date, "{meta}");
    // Pulled entries are complete store entries: a second build finds them cached.
    let (b2, _) = fx.build(
        "store-b",
        "trust.toml",
        &["--runtime", "podman", "--cache", &cache],
    );
    assert!(step_results(&b2).iter().all(|(_, r)| r == "cached"), "{b2}");

    // C: only another key trusted: the entries are refused with a note and built here.
    let (c, err) = fx.build(
        "store-c",
        "other.toml",
        &["--runtime", "podman", "--cache", &cache],
    );
    assert_eq!(
        step_results(&c),
        [
            ("greetdoc".into(), "built".into()),
            ("greet".into(), "built".into())
        ],
        "{err}"
    );
    assert!(
        err.contains("not using the cache entry") && err.contains("not trusted"),
        "{err}"
    );
    assert_eq!(trees(&a), trees(&c));

    // Host builds are never pushed; without a key nothing is pushed.
    let (d, err) = fx.build(
        "store-d",
        "trust.toml",
        &["--runtime", "host", "--cache", &cache, "--cache-key", &key],
    );
    assert!(step_results(&d).iter().all(|(_, r)| r == "built"), "{d}");
    assert!(
        err.contains("not pushed") && err.contains("host runtime"),
        "{err}"
    );
}

trait JsonValue {
    fn json_value(self) -> serde_json::Value;
}

impl JsonValue for reqwest::blocking::Response {
    fn json_value(self) -> serde_json::Value {
        serde_json::from_reader(self).unwrap()
    }
}

/// A build stored before there was a cache seeds it: the same build run again with `--cache`
/// and `--cache-key` builds nothing and pushes each stored entry the cache lacks (once: a
/// third run finds them there), and another store pulls them.
#[test]
fn stored_entries_are_pushed_to_a_cache_that_lacks_them() {
    let Some(reg) = registry() else {
        return;
    };
    if !podman_ready(IMAGE) {
        return;
    }
    let fx = fixture();
    let cache = format!("oci://{}/rocforge/seeded", reg.host());
    let key = fx.root().join("keys/rocforge.key").display().to_string();
    let (first, _) = fx.build("store-a", "trust.toml", &["--runtime", "podman"]);
    let with_cache = [
        "--runtime",
        "podman",
        "--cache",
        &cache,
        "--cache-key",
        &key,
    ];
    let (again, err) = fx.build("store-a", "trust.toml", &with_cache);
    assert_eq!(
        step_results(&again),
        [
            ("greetdoc".into(), "cached".into()),
            ("greet".into(), "cached".into())
        ],
        "{err}"
    );
    assert!(err.contains("greet: pushed to oci://"), "{err}");
    assert!(err.contains("greetdoc: pushed to oci://"), "{err}");
    let (_, err) = fx.build("store-a", "trust.toml", &with_cache);
    assert!(!err.contains("pushed to"), "already there: {err}");
    let (pulled, err) = fx.build(
        "store-b",
        "trust.toml",
        &["--runtime", "podman", "--cache", &cache],
    );
    assert_eq!(
        step_results(&pulled),
        [
            ("greetdoc".into(), "pulled".into()),
            ("greet".into(), "pulled".into())
        ],
        "{err}"
    );
    assert_eq!(trees(&pulled), trees(&first));
}
