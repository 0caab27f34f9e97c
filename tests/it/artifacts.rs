//! Artifacts for real: deterministic tarballs from a store built by the test (host runtime: a C
//! library and a program compiled with cc, plus a copied data component it depends on),
//! minisign interop in both directions, `install` from an HTTP server on 127.0.0.1 into a
//! prefix other than the build's (then a program linked against it), the refusals (truncated,
//! tampered, expired, another host, malicious tarballs) with the prefix unchanged, and
//! uninstall; a build-only dependency built and packaged but left out of installs; license
//! files from a git source in the tarball; the HIP runtime check (a library
//! whose DT_NEEDED names a stub libamdhip64.so.6, indexes with and without a rocm-runtime); key
//! rotation (chains, tampered, untrusted and replayed key lists, revocation).

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use rocforge::package::manifest::{FileEntry, Kind, MANIFEST_NAME, MANIFEST_SCHEMA, Manifest};

struct Fx {
    w: World,
}

derefs_to_world!(Fx);

impl Fx {
    /// Makes a signing key in keys/ and trusts its public half (trust.toml).
    fn trust_a_new_key(&self) {
        self.trust_new_key("keys", "trust.toml");
    }
    /// With more environment variables (e.g. ROCFORGE_HOST_LIBS).
    fn run_env(&self, extra: &[(&'static str, PathBuf)], args: &[&str]) -> Out {
        let extra: Vec<(&str, &Path)> = extra.iter().map(|(k, v)| (*k, v.as_path())).collect();
        self.w.run_env(&extra, args)
    }
    fn key(&self) -> String {
        self.root().join("keys/rocforge.key").display().to_string()
    }
    fn package(&self, out: &str) -> PathBuf {
        self.package_signed(&["greet"], out, &self.key())
    }
    /// `components` packaged for gfx90c (host runtime) into `out`, signed with the secret key
    /// `key`.
    fn package_signed(&self, components: &[&str], out: &str, key: &str) -> PathBuf {
        let mut args = vec!["package"];
        args.extend_from_slice(components);
        args.extend_from_slice(&[
            "--arch",
            "gfx90c",
            "--runtime",
            "host",
            "--out",
            out,
            "--sign-key",
            key,
        ]);
        self.ok(&args);
        self.root().join(out)
    }
}

const GREET: &str = r#"name = "greet"
version = "1.2"
summary = "a C library and a program"
license = "MIT"
depends = ["greetdoc"]

[source]
path = "../../src/greet"

[build]
system = "script"
# The host runtime maps the release prefix to the dependencies' directory, so the install
# directory is spelled in two parts.
script = """
P=/opt; P="$DESTDIR$P/rocm"
mkdir -p "$P/lib" "$P/include" "$P/bin"
cc -shared -fPIC -O2 -o "$P/lib/libgreet.so.1" greet.c -Wl,-soname,libgreet.so.1
ln -s libgreet.so.1 "$P/lib/libgreet.so"
cp greet.h "$P/include/"
cc -O2 -o "$P/bin/greet" main.c -I. -L"$P/lib" -lgreet -Wl,-rpath,'$ORIGIN/../lib'
"""
"#;

/// An empty catalog (release `test-1.0`, prefix /opt/rocm, gfx90c) in a new directory; returns
/// the directory and the release's recipe directory.
/// The element of a JSON array (an index's `artifacts`, `list`'s `components`) whose `name`
/// is `name`.
fn named(items: &serde_json::Value, name: &str) -> serde_json::Value {
    items
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == name)
        .unwrap_or_else(|| panic!("{name} is not listed in {items}"))
        .clone()
}

fn catalog() -> (World, PathBuf, PathBuf) {
    let w = World::new()
        .release("localhost/rocforge-none:1")
        .config("trust.toml")
        .state()
        .build();
    let (root, rel) = (w.root().to_path_buf(), w.release_dir());
    (w, root, rel)
}

/// A catalog with `greet` (script build with cc) depending on `greetdoc` (copy), built with the
/// host runtime into the test's store, and a key pair trusted through the config.
fn fixture() -> Fx {
    let (w, root, rel) = catalog();
    std::fs::create_dir_all(root.join("src/greet")).unwrap();
    std::fs::create_dir_all(root.join("src/doc")).unwrap();
    std::fs::write(
        rel.join("greetdoc.toml"),
        "name = \"greetdoc\"\nversion = \"1.0\"\nsummary = \"data\"\nlicense = \"MIT\"\n\n[source]\npath = \"../../src/doc\"\n\n[build]\nsystem = \"copy\"\ndest = \"share/greet\"\n",
    )
    .unwrap();
    std::fs::write(rel.join("greet.toml"), GREET).unwrap();
    std::fs::write(
        root.join("src/greet/greet.c"),
        "#include <stdio.h>\n#include \"greet.h\"\nvoid greet(const char *who) { printf(\"hello, %s\\n\", who); }\n",
    )
    .unwrap();
    std::fs::write(
        root.join("src/greet/greet.h"),
        "void greet(const char *who);\n",
    )
    .unwrap();
    std::fs::write(
        root.join("src/greet/main.c"),
        "#include \"greet.h\"\nint main(void) { greet(\"world\"); return 0; }\n",
    )
    .unwrap();
    std::fs::write(root.join("src/doc/README"), "docs\n").unwrap();
    let fx = Fx { w };
    fx.ok(&["build", "greet", "--arch", "gfx90c", "--runtime", "host"]);
    fx.trust_a_new_key();
    fx
}

fn tarballs(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.to_string_lossy().ends_with(".tar.zst") || p.to_string_lossy().ends_with(".tar.gz")
        })
        .collect();
    v.sort();
    v
}

#[test]
fn packaging_twice_gives_identical_bytes_and_a_full_manifest() {
    let fx = fixture();
    let a = fx.package("out1");
    let b = fx.package("out2");
    let (ta, tb) = (tarballs(&a), tarballs(&b));
    assert_eq!(ta.len(), 2, "{ta:?}");
    for (x, y) in ta.iter().zip(&tb) {
        assert_eq!(x.file_name(), y.file_name());
        assert!(
            std::fs::read(x).unwrap() == std::fs::read(y).unwrap(),
            "{} differs",
            x.display()
        );
    }
    let name = ta[0].file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        name.starts_with("greet-1.2-gfx90c-") && name.ends_with(".tar.zst"),
        "{name}"
    );
    assert_eq!(
        std::fs::read_to_string(a.join("SHA256SUMS")).unwrap(),
        std::fs::read_to_string(b.join("SHA256SUMS")).unwrap()
    );
    // tar's own view: manifest first, sorted, 0/0, one mtime (the path source's newest file,
    // recorded by the build), exec bits and symlinks kept.
    let out = Command::new("tar")
        .args(["--zstd", "-tvf"])
        .arg(&ta[0])
        .output()
        .unwrap();
    let listing = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = listing.lines().collect();
    assert!(lines[0].ends_with(MANIFEST_NAME), "{listing}");
    let stamp = |l: &str| {
        let f: Vec<&str> = l.split_whitespace().collect();
        format!("{} {}", f[3], f[4])
    };
    let first = stamp(lines[0]);
    assert!(!first.starts_with("1970-01-01"), "{listing}");
    assert!(
        lines
            .iter()
            .all(|l| l.contains(" 0/0 ") && stamp(l) == first),
        "{listing}"
    );
    assert!(
        listing.contains("-rwxr-xr-x 0/0") && listing.contains("bin/greet"),
        "{listing}"
    );
    assert!(
        listing.contains("lib/libgreet.so -> libgreet.so.1"),
        "{listing}"
    );
    let m = rocforge::package::tarball::read_manifest(&ta[0]).unwrap();
    assert_eq!(m.name, "greet");
    assert_eq!(m.target_list(), "gfx90c");
    assert_eq!(m.depends.len(), 1);
    assert_eq!(m.depends[0].name, "greetdoc");
    assert!(
        m.glibc_floor
            .as_deref()
            .is_some_and(|v| v.starts_with("2.")),
        "{:?}",
        m.glibc_floor
    );
    assert!(
        m.files
            .iter()
            .any(|f| f.path == "lib/libgreet.so.1" && f.sha256.is_some() && f.executable)
    );
    assert_eq!(m.hash_input["component"]["name"], "greet");
    // gzip is deterministic too.
    let key = fx.key();
    for out in ["gz1", "gz2"] {
        fx.ok(&[
            "package",
            "greet",
            "--arch",
            "gfx90c",
            "--runtime",
            "host",
            "--out",
            out,
            "--compression",
            "gz",
            "--sign-key",
            &key,
        ]);
    }
    for (x, y) in tarballs(&fx.root().join("gz1"))
        .iter()
        .zip(tarballs(&fx.root().join("gz2")))
    {
        assert!(std::fs::read(x).unwrap() == std::fs::read(&y).unwrap());
    }
    // Not built for another target: an error that says to build first.
    let err = fx.fails(&["package", "greet", "--arch", "gfx902", "--runtime", "host"]);
    assert!(
        err.contains("build first: rocforge build greet --arch gfx902 --runtime host"),
        "{err}"
    );
}

#[test]
fn minisign_verifies_ours_and_we_verify_minisigns() {
    if Command::new("minisign").arg("-v").output().is_err() {
        assert!(std::env::var("CI").is_err(), "minisign is required in CI");
        eprintln!("skipping: minisign is not installed (apt-get install minisign)");
        return;
    }
    let fx = fixture();
    let dist = fx.package("dist");
    let pubfile = fx.root().join("keys/rocforge.pub");
    for f in tarballs(&dist)
        .into_iter()
        .chain([dist.join("index.json"), dist.join("SHA256SUMS")])
    {
        let o = Command::new("minisign")
            .arg("-Vm")
            .arg(&f)
            .arg("-p")
            .arg(&pubfile)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "minisign rejects {}: {}",
            f.display(),
            String::from_utf8_lossy(&o.stderr)
        );
    }
    // minisign's own key and signature, checked by rocforge.
    let st = Command::new("minisign")
        .args(["-G", "-W", "-p", "m.pub", "-s", "m.key"])
        .current_dir(fx.root())
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    std::fs::write(fx.root().join("data.txt"), "signed by minisign\n").unwrap();
    let st = Command::new("minisign")
        .args(["-S", "-s", "m.key", "-m", "data.txt"])
        .current_dir(fx.root())
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    let o = fx.ok(&["verify", "data.txt", "--key", "m.pub"]);
    assert!(o.stdout.contains("good signature"), "{}", o.stdout);
    // Not trusted without the key; wrong after a change.
    let err = fx.fails(&["verify", "data.txt"]);
    assert!(err.contains("not trusted"), "{err}");
    std::fs::write(fx.root().join("data.txt"), "signed by minisign?\n").unwrap();
    let err = fx.fails(&["verify", "data.txt", "--key", "m.pub"]);
    assert!(err.contains("does not verify"), "{err}");
}

fn redact(s: &str, fx: &Fx, port: Option<u16>) -> String {
    let mut s = s.replace(&fx.root().display().to_string(), "[ROOT]");
    if let Some(p) = port {
        s = s.replace(&p.to_string(), "[PORT]");
    }
    // Hashes, keys and dates vary from run to run.
    let mut out = String::new();
    for word in s.split_inclusive([' ', '\n', '(', ')', ',', '/', '-']) {
        let core = word.trim_end_matches([' ', '\n', '(', ')', ',', '/', '-']);
        let tail = &word[core.len()..];
        if core.len() >= 16 && core.chars().all(|c| c.is_ascii_hexdigit()) {
            out += "[HEX]";
            out += tail;
        } else if core.len() == 20 && core.ends_with('Z') && core.contains('T') {
            out += "[DATE]";
            out += tail;
        } else {
            out += word;
        }
    }
    // Progress notes (download/unpack lines) differ between runs; keep the error.
    out.lines()
        .skip_while(|l| !l.starts_with("error"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Signs `dir/index.json` again after the test edited it.
fn resign(fx: &Fx, dir: &Path) {
    let key = fx.key();
    let idx = dir.join("index.json").display().to_string();
    fx.ok(&["sign", &idx, "--sign-key", &key]);
}

fn edit_index(dir: &Path, f: impl FnOnce(&mut serde_json::Value)) {
    let p = dir.join("index.json");
    let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
    f(&mut v);
    std::fs::write(&p, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
}

#[test]
fn install_from_http_then_relocated_link_then_uninstall() {
    let fx = fixture();
    let dist = fx.package("dist");
    let server = HttpServer::start(&dist);
    let url = server.url();
    let prefix = fx.root().join("elsewhere/rocm");
    let p = prefix.display().to_string();
    // A misspelt target is said to be one, before anything is fetched or written.
    let typo = fx.fails(&[
        "install", "greet", "--arch", "gfx09c", "--from", &url, "--prefix", &p,
    ]);
    assert!(
        typo.contains("--arch gfx09c:") && typo.contains("gfx90c"),
        "{typo}"
    );
    assert!(!prefix.exists(), "a refused install wrote its prefix");
    // A separate cache, so the download really comes over HTTP.
    let o = fx.ok(&[
        "install", "greet", "--arch", "gfx90c", "--from", &url, "--prefix", &p,
    ]);
    assert!(
        o.stdout.contains(&format!("export ROCM_PATH={p}")),
        "{}",
        o.stdout
    );
    assert!(
        o.stdout.contains(&format!("LD_LIBRARY_PATH={p}/lib")),
        "{}",
        o.stdout
    );
    // greet and greetdoc are host code and data: no claim about GPU code they do not have.
    assert!(
        o.stderr
            .contains("none of these carries GPU code of its own (headers and host code)"),
        "{}",
        o.stderr
    );
    assert!(!o.stderr.contains("native code"), "{}", o.stderr);
    assert!(o.stderr.contains("index signature: good"), "{}", o.stderr);
    assert!(
        prefix.join("share/greet/README").is_file(),
        "the dependency is installed too"
    );
    // The installed program runs from the new prefix ($ORIGIN rpath)...
    let run = Command::new(prefix.join("bin/greet")).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&run.stdout), "hello, world\n");
    // ...and a new program links against the relocated library.
    std::fs::write(
        fx.root().join("use.c"),
        "#include <greet.h>\nint main(void) { greet(\"relocated\"); return 0; }\n",
    )
    .unwrap();
    let cc = Command::new("cc")
        .arg(fx.root().join("use.c"))
        .arg(format!("-I{p}/include"))
        .arg(format!("-L{p}/lib"))
        .arg("-lgreet")
        .arg(format!("-Wl,-rpath,{p}/lib"))
        .arg("-o")
        .arg(fx.root().join("use"))
        .output()
        .unwrap();
    assert!(
        cc.status.success(),
        "{}",
        String::from_utf8_lossy(&cc.stderr)
    );
    let run = Command::new(fx.root().join("use")).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&run.stdout), "hello, relocated\n");
    // Listed, idempotent.
    let list = fx.ok(&["list", "--installed", "--prefix", &p]).stdout;
    assert!(
        list.contains("greet ") && list.contains("greetdoc"),
        "{list}"
    );
    let again = fx.ok(&[
        "install", "greet", "--arch", "gfx90c", "--from", &url, "--prefix", &p,
    ]);
    assert!(
        again.stderr.contains("already installed"),
        "{}",
        again.stderr
    );
    // Uninstall removes exactly the receipts' files: a user's file stays, with its directory.
    std::fs::write(prefix.join("lib/mine.txt"), "user data").unwrap();
    let err = fx.fails(&["uninstall", "greetdoc", "--prefix", &p]);
    assert!(err.contains("greetdoc is needed by greet"), "{err}");
    fx.ok(&["uninstall", "greet", "greetdoc", "--prefix", &p]);
    assert_eq!(
        listing(&prefix),
        [
            ".rocforge 40755 4096 ",
            ".rocforge/receipts 40755 4096 ",
            "lib 40755 4096 ",
            "lib/mine.txt 100644 9 "
        ]
    );
    let list = fx.ok(&["list", "--installed", "--prefix", &p]);
    assert!(list.stdout.is_empty(), "{}", list.stdout);
}

/// `app` needs `gen` (a code generator) only to build and `greetdoc` (data) at run time.
const APP: &str = r#"name = "app"
version = "1.0"
summary = "made with a generator, reads data"
license = "MIT"
depends = ["greetdoc"]
build-depends = ["gen"]

[source]
path = "../../src/app"

[build]
system = "script"
# Both dependencies are mounted in the build: the generator writes a file into the tree, and
# the data is there to be read.
script = """
P=/opt; P="$DESTDIR$P/rocm"
mkdir -p "$P/share/app"
sh "$ROCFORGE_DEPS/share/gen/gen.sh" app > "$P/share/app/generated.txt"
cat "$ROCFORGE_DEPS/share/greet/README" > "$P/share/app/data-seen.txt"
"""
"#;

/// A catalog with `app` (see [`APP`]), `gen` and `greetdoc`, built with the host runtime, and
/// a key pair trusted through the config.
fn build_only_fixture() -> Fx {
    let (w, root, rel) = catalog();
    for dir in ["src/app", "src/gen", "src/doc"] {
        std::fs::create_dir_all(root.join(dir)).unwrap();
    }
    std::fs::write(root.join("src/app/README"), "app\n").unwrap();
    std::fs::write(
        root.join("src/gen/gen.sh"),
        "printf 'generated for %s\\n' \"$1\"\n",
    )
    .unwrap();
    std::fs::write(root.join("src/doc/README"), "docs\n").unwrap();
    let copy = |name: &str, dir: &str, dest: &str| {
        format!(
            "name = \"{name}\"\nversion = \"1.0\"\nsummary = \"data\"\nlicense = \"MIT\"\n\n[source]\npath = \"../../src/{dir}\"\n\n[build]\nsystem = \"copy\"\ndest = \"share/{dest}\"\n"
        )
    };
    std::fs::write(rel.join("gen.toml"), copy("gen", "gen", "gen")).unwrap();
    std::fs::write(rel.join("greetdoc.toml"), copy("greetdoc", "doc", "greet")).unwrap();
    std::fs::write(rel.join("app.toml"), APP).unwrap();
    let fx = Fx { w };
    fx.ok(&["build", "app", "--arch", "gfx90c", "--runtime", "host"]);
    fx.trust_a_new_key();
    fx
}

/// A build-only dependency is built first and mounted in the build like a run-time one, is
/// packaged only when asked for, is recorded apart in the component's manifest, and need not
/// stay in the store once the component is built; an install of the component from the
/// index takes the run-time dependency and leaves the build-only one out, and removing the
/// build-only one later is no removal of something the component needs.
#[test]
fn build_only_dependencies_are_built_and_packaged_but_not_installed() {
    let fx = build_only_fixture();
    let plan = fx
        .ok(&["plan", "app", "--arch", "gfx90c", "--runtime", "host"])
        .stdout;
    let row = plan
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some("app"))
        .unwrap();
    assert!(row.ends_with("gen (build), greetdoc"), "{plan}");
    let json: serde_json::Value = serde_json::from_str(
        &fx.ok(&[
            "plan",
            "app",
            "--arch",
            "gfx90c",
            "--runtime",
            "host",
            "--format",
            "json",
        ])
        .stdout,
    )
    .unwrap();
    let app = &json["steps"][2];
    assert_eq!(app["component"], "app", "{json}");
    assert_eq!(app["depends"], serde_json::json!(["gen", "greetdoc"]));
    assert_eq!(app["build_only"], serde_json::json!(["gen"]));
    assert_eq!(app["level"], 1);

    let alone = tarballs(&fx.package_signed(&["app"], "alone", &fx.key()));
    assert_eq!(
        alone.len(),
        2,
        "a build-only dependency is packaged only when asked for: {alone:?}"
    );
    let dist = fx.package_signed(&["app", "gen"], "dist", &fx.key());
    let packaged = tarballs(&dist);
    assert_eq!(packaged.len(), 3, "{packaged:?}");
    let manifest = |name: &str| -> Manifest {
        let t = packaged
            .iter()
            .find(|t| {
                t.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with(&format!("{name}-"))
            })
            .unwrap();
        rocforge::package::tarball::read_manifest(t).unwrap()
    };
    let m = manifest("app");
    let names = |deps: &[rocforge::package::manifest::Dependency]| -> Vec<String> {
        deps.iter().map(|d| d.name.to_string()).collect()
    };
    assert_eq!(names(&m.depends), ["greetdoc"]);
    assert_eq!(names(&m.build_depends), ["gen"]);
    assert_eq!(m.build_depends[0].key, manifest("gen").key);
    // The hash input still lists both: the key covers what the build was made with.
    assert_eq!(m.hash_input["dependencies"].as_array().unwrap().len(), 2);
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dist.join("index.json")).unwrap()).unwrap();
    let entry = index["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "app")
        .unwrap();
    let listed: Vec<&str> = entry["depends"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    assert_eq!(listed, ["greetdoc"], "{entry}");
    assert!(entry.get("build_depends").is_none(), "{entry}");

    let prefix = fx.root().join("fresh/rocm");
    let p = prefix.display().to_string();
    let from = dist.display().to_string();
    fx.ok(&[
        "install", "app", "--arch", "gfx90c", "--from", &from, "--prefix", &p,
    ]);
    assert_eq!(
        std::fs::read_to_string(prefix.join("share/app/generated.txt")).unwrap(),
        "generated for app\n",
        "the build ran the build-only dependency"
    );
    assert_eq!(
        std::fs::read_to_string(prefix.join("share/app/data-seen.txt")).unwrap(),
        "docs\n"
    );
    assert!(
        prefix.join("share/greet/README").is_file(),
        "the run-time dependency is installed"
    );
    assert!(
        !prefix.join("share/gen").exists(),
        "the build-only dependency is not installed: {:?}",
        listing(&prefix)
    );
    let list = fx.ok(&["list", "--installed", "--prefix", &p]).stdout;
    assert!(
        list.contains("app ") && list.contains("greetdoc") && !list.contains("gen "),
        "{list}"
    );

    // Installed by name, it is an ordinary component that nothing installed needs.
    fx.ok(&[
        "install", "gen", "--arch", "gfx90c", "--from", &from, "--prefix", &p,
    ]);
    assert!(prefix.join("share/gen/gen.sh").is_file());
    let err = fx.fails(&["uninstall", "greetdoc", "--prefix", &p]);
    assert!(err.contains("greetdoc is needed by app"), "{err}");
    fx.ok(&["uninstall", "gen", "--prefix", &p]);
    assert!(!prefix.join("share/gen").exists());
    assert!(prefix.join("share/app/generated.txt").is_file());

    // Once the component is built, its build-only dependency may leave the store: packaging
    // it again needs only what the package holds.
    std::fs::remove_dir_all(
        fx.root()
            .join("store")
            .join(m.build_depends[0].key.as_str()),
    )
    .unwrap();
    let again = tarballs(&fx.package_signed(&["app"], "again", &fx.key()));
    assert_eq!(again.len(), 2, "{again:?}");
    let err = fx.fails(&[
        "package",
        "gen",
        "--arch",
        "gfx90c",
        "--runtime",
        "host",
        "--out",
        "none",
    ]);
    assert!(err.contains("not in the store for gfx90c: gen"), "{err}");
}

#[test]
fn install_refuses_truncated_tampered_expired_and_foreign_artifacts() {
    let fx = fixture();
    let dist = fx.package("dist");
    let prefix = fx.root().join("prefix");
    std::fs::create_dir_all(prefix.join("lib")).unwrap();
    std::fs::write(prefix.join("lib/existing.so"), "keep me").unwrap();
    let before = listing(&prefix);
    let p = prefix.display().to_string();
    let greet = tarballs(&dist)[0]
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let mut snaps = Vec::new();
    type Spoil<'a> = Box<dyn Fn(&Path) + 'a>;
    let cases: Vec<(&str, Spoil)> = vec![
        (
            "truncated",
            Box::new(|d: &Path| {
                let t = d.join(&greet);
                let bytes = std::fs::read(&t).unwrap();
                std::fs::write(&t, &bytes[..bytes.len() / 2]).unwrap();
            }),
        ),
        (
            "tampered",
            Box::new(|d: &Path| {
                // The file is changed and the index updated to match, but not re-signed.
                let t = d.join(&greet);
                let mut bytes = std::fs::read(&t).unwrap();
                let n = bytes.len() / 2;
                bytes[n] ^= 0xff;
                std::fs::write(&t, &bytes).unwrap();
                let sha = sha256_file(&t);
                edit_index(d, |v| v["artifacts"][0]["sha256"] = sha.clone().into());
            }),
        ),
        (
            "expired",
            Box::new(|d: &Path| {
                edit_index(d, |v| v["expires"] = "2020-01-01T00:00:00Z".into());
                resign(&fx, d);
            }),
        ),
        (
            "other_host",
            Box::new(|d: &Path| {
                edit_index(d, |v| {
                    v["artifacts"][0]["url"] = format!("http://192.0.2.1/{greet}").into()
                });
                resign(&fx, d);
            }),
        ),
        (
            "unsigned",
            Box::new(|d: &Path| {
                std::fs::remove_file(d.join("index.json.minisig")).unwrap();
            }),
        ),
    ];
    for (name, spoil) in &cases {
        let d = fx.root().join(format!("serve-{name}"));
        rocforge::fsutil::copy_tree(&dist, &d).unwrap();
        spoil(&d);
        let server = HttpServer::start(&d);
        let url = server.url();
        let o = fx.run(&[
            "install", "greet", "--arch", "gfx90c", "--from", &url, "--prefix", &p,
        ]);
        assert_eq!(o.code, 1, "{name}: {}\n{}", o.stdout, o.stderr);
        assert_eq!(listing(&prefix), before, "{name}: the prefix changed");
        let staging: Vec<_> = std::fs::read_dir(fx.root())
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with(".prefix"))
            .collect();
        assert!(
            staging.is_empty(),
            "{name}: staging left behind: {staging:?}"
        );
        snaps.push(format!(
            "--- {name}\n{}",
            redact(&o.stderr, &fx, Some(server.port))
        ));
    }
    insta::assert_snapshot!("install_refusals", snaps.join("\n"));
}

/// A tarball the test writes itself: the manifest (listing `listed`), then `entries`.
fn evil_tarball(
    dir: &Path,
    name: &str,
    listed: Vec<FileEntry>,
    entries: &[(tar::Header, Vec<u8>)],
) {
    let m = Manifest {
        schema: MANIFEST_SCHEMA.into(),
        kind: Default::default(),
        tests: None,
        id: rocforge::ids::ArtifactId {
            name: name.parse().unwrap(),
            version: "1.0".into(),
            release: "test-1.0".into(),
            targets: vec!["gfx90c".parse().unwrap()],
            key: format!("{:0>64}", hex::encode(name)).parse().unwrap(),
        },
        depends: vec![],
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
        installed_size: listed.iter().map(|f| f.size).sum(),
        hash_input: serde_json::Value::Null,
        files: listed,
    };
    write_artifact(
        &dir.join(format!("{name}-1.0-gfx90c-00000000.tar.zst")),
        &m,
        entries,
    );
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

#[test]
fn malicious_tarballs_are_refused_and_the_prefix_is_unchanged() {
    let fx = fixture();
    let good = b"good bytes".to_vec();
    let ok_entry = (
        raw(
            tar::EntryType::Regular,
            "lib/ok.txt",
            0o644,
            good.len() as u64,
            None,
        ),
        good.clone(),
    );
    let lib = FileEntry {
        path: "lib".into(),
        kind: Kind::Dir,
        size: 0,
        sha256: None,
        executable: false,
        target: None,
    };
    let link = |p: &str, t: &str| FileEntry {
        path: p.into(),
        kind: Kind::Symlink,
        size: 0,
        sha256: None,
        executable: false,
        target: Some(t.into()),
    };
    type Case = (&'static str, Vec<FileEntry>, Vec<(tar::Header, Vec<u8>)>);
    let cases: Vec<Case> = vec![
        (
            "absolute",
            vec![file("lib/ok.txt", &good)],
            vec![
                ok_entry.clone(),
                (
                    raw(
                        tar::EntryType::Regular,
                        "/tmp/rocforge-evil",
                        0o644,
                        4,
                        None,
                    ),
                    b"evil".to_vec(),
                ),
            ],
        ),
        (
            "dotdot",
            vec![file("lib/ok.txt", &good)],
            vec![
                ok_entry.clone(),
                (
                    raw(tar::EntryType::Regular, "lib/../../evil", 0o644, 4, None),
                    b"evil".to_vec(),
                ),
            ],
        ),
        (
            "symlink_escape",
            vec![file("lib/ok.txt", &good), link("lib/up", "../../..")],
            vec![
                ok_entry.clone(),
                (
                    raw(
                        tar::EntryType::Symlink,
                        "lib/up",
                        0o777,
                        0,
                        Some("../../.."),
                    ),
                    vec![],
                ),
            ],
        ),
        (
            "symlink_escape_unlisted",
            vec![file("lib/ok.txt", &good)],
            vec![
                ok_entry.clone(),
                (
                    raw(
                        tar::EntryType::Symlink,
                        "lib/up",
                        0o777,
                        0,
                        Some("../../.."),
                    ),
                    vec![],
                ),
            ],
        ),
        (
            "write_through_symlink",
            vec![
                lib.clone(),
                link("lib/sub", "."),
                file("lib/sub/evil", b"evil"),
            ],
            vec![
                (
                    raw(tar::EntryType::Directory, "lib/", 0o755, 0, None),
                    vec![],
                ),
                (
                    raw(tar::EntryType::Symlink, "lib/sub", 0o777, 0, Some(".")),
                    vec![],
                ),
                (
                    raw(tar::EntryType::Regular, "lib/sub/evil", 0o644, 4, None),
                    b"evil".to_vec(),
                ),
            ],
        ),
        (
            "hardlink_escape",
            vec![file("lib/ok.txt", &good), file("lib/passwd", b"")],
            vec![
                ok_entry.clone(),
                (
                    raw(
                        tar::EntryType::Link,
                        "lib/passwd",
                        0o644,
                        0,
                        Some("../../../../etc/passwd"),
                    ),
                    vec![],
                ),
            ],
        ),
        (
            "device",
            vec![file("lib/ok.txt", &good), file("lib/null", b"")],
            vec![
                ok_entry.clone(),
                (
                    raw(tar::EntryType::Char, "lib/null", 0o666, 0, None),
                    vec![],
                ),
            ],
        ),
        (
            "setuid",
            vec![file("lib/ok.txt", &good), file("lib/su", b"evil")],
            vec![
                ok_entry.clone(),
                (
                    raw(tar::EntryType::Regular, "lib/su", 0o4755, 4, None),
                    b"evil".to_vec(),
                ),
            ],
        ),
        (
            "size_lies",
            vec![file("lib/ok.txt", &good), file("lib/big", b"tiny")],
            vec![
                ok_entry.clone(),
                (
                    raw(tar::EntryType::Regular, "lib/big", 0o644, 4096, None),
                    vec![b'x'; 4096],
                ),
            ],
        ),
        (
            "content_lies",
            vec![file("lib/ok.txt", &good), file("lib/swapped", b"good")],
            vec![
                ok_entry.clone(),
                (
                    raw(tar::EntryType::Regular, "lib/swapped", 0o644, 4, None),
                    b"evil".to_vec(),
                ),
            ],
        ),
        (
            "unlisted",
            vec![file("lib/ok.txt", &good)],
            vec![
                ok_entry.clone(),
                (
                    raw(tar::EntryType::Regular, "lib/extra", 0o644, 4, None),
                    b"evil".to_vec(),
                ),
            ],
        ),
    ];
    let prefix = fx.root().join("prefix");
    std::fs::create_dir_all(prefix.join("lib")).unwrap();
    std::fs::write(prefix.join("lib/existing.so"), "keep me").unwrap();
    let before = listing(&prefix);
    let p = prefix.display().to_string();
    let key = fx.key();
    let mut snaps = Vec::new();
    for (name, listed, entries) in cases {
        let d = fx.root().join(format!("evil-{name}"));
        std::fs::create_dir_all(&d).unwrap();
        let comp = format!("evil{}", name.replace('_', ""));
        evil_tarball(&d, &comp, listed, &entries);
        let dir = d.display().to_string();
        fx.ok(&["index", &dir, "--sign-key", &key]);
        let o = fx.run(&[
            "install", &comp, "--arch", "gfx90c", "--from", &dir, "--prefix", &p,
        ]);
        assert_eq!(o.code, 1, "{name}: {}\n{}", o.stdout, o.stderr);
        assert_eq!(listing(&prefix), before, "{name}: the prefix changed");
        assert!(!Path::new("/tmp/rocforge-evil").exists());
        snaps.push(format!("--- {name}\n{}", redact(&o.stderr, &fx, None)));
    }
    // Sanity: the same machinery installs a clean hand-made tarball.
    let d = fx.root().join("clean");
    std::fs::create_dir_all(&d).unwrap();
    evil_tarball(
        &d,
        "clean",
        vec![lib, file("lib/ok.txt", &good)],
        &[
            (
                raw(tar::EntryType::Directory, "lib/", 0o755, 0, None),
                vec![],
            ),
            ok_entry,
        ],
    );
    let dir = d.display().to_string();
    fx.ok(&["index", &dir, "--sign-key", &key]);
    fx.ok(&[
        "install", "clean", "--arch", "gfx90c", "--from", &dir, "--prefix", &p,
    ]);
    assert_eq!(std::fs::read(prefix.join("lib/ok.txt")).unwrap(), good);
    insta::assert_snapshot!("malicious_tarballs", snaps.join("\n"));
}

/// A recipe building a small data tree with a script, from `source` (a TOML `[source]` body).
fn data_recipe(name: &str, source: &str, extra: &str) -> String {
    format!(
        "name = \"{name}\"\nversion = \"1.0\"\nsummary = \"data\"\nlicense = \"MIT\"\n{extra}\n[source]\n{source}\n\n[build]\nsystem = \"script\"\nscript = \"\"\"\nP=/opt; P=\"$DESTDIR$P/rocm\"\nmkdir -p \"$P/share/{name}\"\necho data > \"$P/share/{name}/data\"\n\"\"\"\n"
    )
}

#[test]
fn packages_carry_the_license_files_of_their_source() {
    let (w, root, rel) = catalog();
    let repo = root.join("origin/lic.git");
    make_repo(
        &repo,
        &[
            ("LICENSE", "MIT License\n"),
            ("COPYING.LIB", "LGPL\n"),
            ("docs/THIRD-PARTY.txt", "third party notices\n"),
            ("README.md", "not a license\n"),
        ],
        "v1",
    );
    let git = format!("git = \"file://{}\"\ntag = \"v1\"", repo.display());
    std::fs::write(rel.join("lic.toml"), data_recipe("lic", &git, "")).unwrap();
    std::fs::write(
        rel.join("listed.toml"),
        data_recipe(
            "listed",
            &git,
            "license-files = [\"docs/THIRD-PARTY.txt\", \"LICENSE\"]\n",
        ),
    )
    .unwrap();
    std::fs::write(
        rel.join("missing.toml"),
        data_recipe("missing", &git, "license-files = [\"NOPE.txt\"]\n"),
    )
    .unwrap();
    std::fs::create_dir_all(root.join("src/nolic")).unwrap();
    std::fs::write(root.join("src/nolic/README"), "no license here\n").unwrap();
    std::fs::write(
        rel.join("nolic.toml"),
        data_recipe("nolic", "path = \"../../src/nolic\"", ""),
    )
    .unwrap();
    let fx = Fx { w };
    // The content key changes only for the recipe that lists license files.
    let explain = |c: &str| -> serde_json::Value {
        let o = fx.ok(&[
            "plan",
            c,
            "--arch",
            "gfx90c",
            "--runtime",
            "host",
            "--explain",
            c,
            "--format",
            "json",
        ]);
        serde_json::from_str(&o.stdout).unwrap()
    };
    let lic = explain("lic").to_string();
    assert!(!lic.contains("license_files"), "{lic}");
    let listed = explain("listed").to_string();
    assert!(
        listed.contains("\"license_files\":[\"docs/THIRD-PARTY.txt\",\"LICENSE\"]"),
        "{listed}"
    );
    let build = fx.ok(&[
        "build",
        "lic",
        "listed",
        "nolic",
        "--arch",
        "gfx90c",
        "--runtime",
        "host",
    ]);
    assert!(
        build.stderr.contains("warning: nolic: no license file")
            && build.stderr.contains("license-files"),
        "{}",
        build.stderr
    );
    assert!(!build.stderr.contains("warning: lic:"), "{}", build.stderr);
    // A listed file the source lacks: the build fails, naming the recipe line.
    let err = fx.run(&["build", "missing", "--arch", "gfx90c", "--runtime", "host"]);
    assert_ne!(err.code, 0);
    let text = format!("{}{}", err.stdout, err.stderr);
    assert!(
        text.contains("recipes/test-1.0/missing.toml:5:")
            && text.contains("the license file NOPE.txt is not in the source"),
        "{text}"
    );
    let o = fx.ok(&[
        "package",
        "lic",
        "listed",
        "nolic",
        "--arch",
        "gfx90c",
        "--runtime",
        "host",
        "--out",
        "dist",
    ]);
    assert!(
        o.stderr
            .contains("warning: nolic: the tarball carries no license file"),
        "{}",
        o.stderr
    );
    let dist = fx.root().join("dist");
    let find = |name: &str| {
        tarballs(&dist)
            .into_iter()
            .find(|p| {
                p.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with(&format!("{name}-"))
            })
            .unwrap()
    };
    let m = rocforge::package::tarball::read_manifest(&find("lic")).unwrap();
    assert_eq!(
        m.licenses,
        ["share/doc/lic/COPYING.LIB", "share/doc/lic/LICENSE"]
    );
    let m = rocforge::package::tarball::read_manifest(&find("listed")).unwrap();
    assert_eq!(
        m.licenses,
        [
            "share/doc/listed/LICENSE",
            "share/doc/listed/THIRD-PARTY.txt"
        ]
    );
    let m = rocforge::package::tarball::read_manifest(&find("nolic")).unwrap();
    assert!(m.licenses.is_empty());
    // tar's own view: the file is in the tarball, with the source's bytes.
    let out = Command::new("tar")
        .args(["--zstd", "-xOf"])
        .arg(find("lic"))
        .arg("share/doc/lic/LICENSE")
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "MIT License\n");
    // Installed with the component.
    let prefix = fx.root().join("prefix");
    let p = prefix.display().to_string();
    fx.ok(&[
        "install",
        "lic",
        "--arch",
        "gfx90c",
        "--from",
        "dist",
        "--prefix",
        &p,
        "--allow-unsigned",
    ]);
    assert_eq!(
        std::fs::read_to_string(prefix.join("share/doc/lic/LICENSE")).unwrap(),
        "MIT License\n"
    );
}

/// `hipapp`: a library whose DT_NEEDED names libamdhip64.so.6 (linked against a stub built in the
/// build directory, not installed); `rocm-runtime`: a stub libamdhip64.so.6 with that SONAME.
fn runtime_fixture() -> Fx {
    let (w, root, rel) = catalog();
    for d in ["src/hipapp", "src/runtime"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    std::fs::write(
        root.join("src/hipapp/app.c"),
        "int hipapp(void) { return 1; }\n",
    )
    .unwrap();
    std::fs::write(root.join("src/hipapp/LICENSE"), "MIT\n").unwrap();
    std::fs::write(
        root.join("src/runtime/hip.c"),
        "int hipInit(unsigned f) { return (int)f; }\n",
    )
    .unwrap();
    std::fs::write(root.join("src/runtime/LICENSE"), "MIT\n").unwrap();
    std::fs::write(
        rel.join("hipapp.toml"),
        r#"name = "hipapp"
version = "1.0"
summary = "needs the HIP runtime"
license = "MIT"

[source]
path = "../../src/hipapp"

[build]
system = "script"
script = """
cc -shared -fPIC -o "$BUILD/libamdhip64.so" -Wl,-soname,libamdhip64.so.6 -x c - <<'C'
int hipInit(unsigned f) { return (int)f; }
C
P=/opt; P="$DESTDIR$P/rocm"
mkdir -p "$P/lib"
cc -shared -fPIC -o "$P/lib/libhipapp.so.1" app.c -Wl,-soname,libhipapp.so.1 -Wl,--no-as-needed -L"$BUILD" -lamdhip64
"""
"#,
    )
    .unwrap();
    std::fs::write(
        rel.join("rocm-runtime.toml"),
        r#"name = "rocm-runtime"
version = "6.4.4"
summary = "a stub HIP runtime"
license = "MIT"

[source]
path = "../../src/runtime"

[build]
system = "script"
script = """
P=/opt; P="$DESTDIR$P/rocm"
mkdir -p "$P/lib"
cc -shared -fPIC -o "$P/lib/libamdhip64.so.6" hip.c -Wl,-soname,libamdhip64.so.6
ln -s libamdhip64.so.6 "$P/lib/libamdhip64.so"
"""
"#,
    )
    .unwrap();
    let fx = Fx { w };
    fx.ok(&[
        "build",
        "hipapp",
        "rocm-runtime",
        "--arch",
        "gfx90c",
        "--runtime",
        "host",
    ]);
    fx.trust_a_new_key();
    fx
}

#[test]
fn install_finds_adds_or_requires_the_hip_runtime() {
    let fx = runtime_fixture();
    let key = fx.key();
    let package =
        |out: &str, comps: &[&str]| fx.package_signed(comps, out, &key).display().to_string();
    let without = package("dist-no", &["hipapp"]);
    let with = package("dist-yes", &["hipapp", "rocm-runtime"]);
    // What package recorded: in the manifests and the index.
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fx.root().join("dist-yes/index.json")).unwrap())
            .unwrap();
    let by_name = |n: &str| named(&index["artifacts"], n);
    assert_eq!(
        by_name("hipapp")["needs"],
        serde_json::json!(["hip-runtime"])
    );
    assert_eq!(
        by_name("hipapp")["runtime_libs"],
        serde_json::json!(["libamdhip64.so.6"])
    );
    assert!(by_name("hipapp").get("provides").is_none());
    assert_eq!(
        by_name("rocm-runtime")["provides"],
        serde_json::json!(["hip-runtime"])
    );
    assert!(by_name("rocm-runtime").get("needs").is_none());
    let empty = fx.root().join("host-empty");
    let hostlib = fx.root().join("host-lib");
    std::fs::create_dir_all(&empty).unwrap();
    std::fs::create_dir_all(&hostlib).unwrap();
    std::fs::write(hostlib.join("libamdhip64.so.6"), "stub").unwrap();
    let host = |d: &Path| vec![("ROCFORGE_HOST_LIBS", d.to_path_buf())];
    let install = |from: &str, prefix: &str, host_dir: &Path, extra: &[&str]| {
        let p = fx.root().join(prefix).display().to_string();
        let mut args = vec![
            "install", "hipapp", "--arch", "gfx90c", "--from", from, "--prefix", &p,
        ];
        args.extend_from_slice(extra);
        fx.run_env(&host(host_dir), &args)
    };

    // No runtime on the host, none in the index: a clear error, nothing installed.
    let o = install(&without, "p-none", &empty, &[]);
    assert_eq!(o.code, 1, "{}\n{}", o.stdout, o.stderr);
    assert!(
        o.stderr
            .contains("hipapp needs the HIP runtime (libamdhip64.so.6), which this system lacks")
            && o.stderr.contains("the index does not offer one")
            && o.stderr.contains("--no-runtime-check"),
        "{}",
        o.stderr
    );
    assert!(!fx.root().join("p-none").exists());
    // Another ROCm's runtime (libamdhip64.so.7) does not serve a tree built against 6: named.
    let rocm7 = fx.root().join("host-rocm7");
    std::fs::create_dir_all(&rocm7).unwrap();
    std::fs::write(rocm7.join("libamdhip64.so.7"), "stub").unwrap();
    let o = install(&without, "p-rocm7", &rocm7, &[]);
    assert_eq!(o.code, 1, "{}\n{}", o.stdout, o.stderr);
    assert!(
        o.stderr.contains(&format!(
            "it has another version: {}/libamdhip64.so.7",
            rocm7.display()
        )),
        "{}",
        o.stderr
    );
    assert!(!fx.root().join("p-rocm7").exists());
    // ...unless told not to check.
    let o = install(&without, "p-none", &empty, &["--no-runtime-check"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stderr.contains("warning: --no-runtime-check"),
        "{}",
        o.stderr
    );
    // The host has it: used.
    let o = install(&without, "p-host", &hostlib, &[]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stderr.contains(&format!(
            "HIP runtime: {}/libamdhip64.so.6",
            hostlib.display()
        )),
        "{}",
        o.stderr
    );
    assert!(!fx.root().join("p-host/lib/libamdhip64.so.6").exists());
    // The index offers one and the host lacks it: added, and said so.
    let o = install(&with, "p-added", &empty, &[]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stderr
            .contains("adding rocm-runtime 6.4.4 from the index: hipapp needs the HIP runtime"),
        "{}",
        o.stderr
    );
    assert!(fx.root().join("p-added/lib/libamdhip64.so.6").is_file());
    let r: serde_json::Value = serde_json::from_slice(
        &std::fs::read(
            fx.root()
                .join("p-added/.rocforge/receipts/rocm-runtime.json"),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(r["provides"], serde_json::json!(["hip-runtime"]));
    let p_added = fx.root().join("p-added").display().to_string();
    let listed: serde_json::Value = serde_json::from_str(
        &fx.ok(&[
            "--format",
            "json",
            "list",
            "--installed",
            "--prefix",
            &p_added,
        ])
        .stdout,
    )
    .unwrap();
    let entry = |n: &str| named(&listed["components"], n);
    assert_eq!(
        entry("rocm-runtime")["provides"],
        serde_json::json!(["hip-runtime"])
    );
    assert_eq!(entry("hipapp")["needs"], serde_json::json!(["hip-runtime"]));
    // The prefix's runtime counts, whatever the host has.
    let o = install(&without, "p-added", &empty, &[]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stderr
            .contains("HIP runtime: rocm-runtime 6.4.4 in the prefix"),
        "{}",
        o.stderr
    );
    // The host has one and the index too: the host's is used unless --with-runtime.
    let o = install(&with, "p-both", &hostlib, &[]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(!fx.root().join("p-both/lib/libamdhip64.so.6").exists());
    let o = install(&with, "p-with", &hostlib, &["--with-runtime"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stderr
            .contains("adding rocm-runtime 6.4.4 from the index: --with-runtime"),
        "{}",
        o.stderr
    );
    assert!(fx.root().join("p-with/lib/libamdhip64.so.6").is_file());
    // --with-runtime and an index without one.
    let o = install(&without, "p-nowith", &hostlib, &["--with-runtime"]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(
        o.stderr
            .contains("offers no component that provides the HIP runtime"),
        "{}",
        o.stderr
    );
    // An index written before these fields existed installs as before (no check).
    edit_index(&fx.root().join("dist-no"), |v| {
        v["artifacts"][0].as_object_mut().unwrap().remove("needs");
    });
    resign(&fx, &fx.root().join("dist-no"));
    let o = install(&without, "p-old", &empty, &[]);
    assert_eq!(o.code, 0, "{}", o.stderr);
}

fn minisign_ok(file: &Path, pubfile: &Path) -> bool {
    Command::new("minisign")
        .arg("-Vm")
        .arg(file)
        .arg("-p")
        .arg(pubfile)
        .output()
        .unwrap()
        .status
        .success()
}

#[test]
fn key_rotation_chains_are_followed_and_bad_lists_refused() {
    let fx = fixture();
    let has_minisign = require(
        "minisign",
        Command::new("minisign").arg("-v").output().is_ok(),
    );
    let a_pub = fx.root().join("keys/rocforge.pub");
    let a_key = fx.key();
    for k in ["keys-b", "keys-c", "keys-u"] {
        fx.ok(&["key", "generate", "--out", k]);
    }
    let path = |p: &str| fx.root().join(p).display().to_string();
    let rotate = |old: &str, new: &str, extra: &[&str], out: &str| {
        let mut args = vec!["key", "rotate", "--old", old, "--new", new];
        args.extend_from_slice(extra);
        args.extend(["--out", out]);
        fx.ok(&args)
    };
    let index = |d: &Path, key: &str| {
        fx.ok(&["index", &d.display().to_string(), "--sign-key", key]);
    };
    // Rotation 1: A → B, A retired. The list is a minisign-signed file.
    let o = rotate(
        &a_key,
        &path("keys-b/rocforge.pub"),
        &["--revoke-old"],
        &path("dist/keys.json"),
    );
    assert!(o.stdout.contains("keys-1.json"), "{}", o.stdout);
    let list: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fx.root().join("dist/keys.json")).unwrap()).unwrap();
    assert_eq!(list["schema"], "rocforge.keys/1");
    assert_eq!(list["sequence"], 1);
    assert_eq!(list["revoke"].as_array().unwrap().len(), 1);
    if has_minisign {
        assert!(minisign_ok(&fx.root().join("dist/keys.json"), &a_pub));
        assert!(!minisign_ok(
            &fx.root().join("dist/keys.json"),
            &fx.root().join("keys-b/rocforge.pub")
        ));
    }
    // Packaged and signed with B; the user trusts only A (config): install follows the list.
    fx.package_signed(&["greet"], "dist", &path("keys-b/rocforge.key"));
    let install = |dir: &str, prefix: &str| {
        let d = path(dir);
        let p = path(prefix);
        fx.run(&[
            "install", "greet", "--arch", "gfx90c", "--from", &d, "--prefix", &p,
        ])
    };
    let o = install("dist", "p1");
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stderr.contains("key list: sequence 1"), "{}", o.stderr);
    let v = fx.ok(&["verify", &path("dist/index.json")]);
    assert!(
        v.stderr.contains("trusted through key list 1"),
        "{}",
        v.stderr
    );
    // Rotation 2: B → C; an installer that trusts A follows two lists.
    rotate(
        &path("keys-b/rocforge.key"),
        &path("keys-c/rocforge.pub"),
        &[],
        &path("dist/keys.json"),
    );
    if has_minisign {
        assert!(minisign_ok(&fx.root().join("dist/keys-1.json"), &a_pub));
        assert!(minisign_ok(
            &fx.root().join("dist/keys-2.json"),
            &fx.root().join("keys-b/rocforge.pub")
        ));
        assert!(minisign_ok(
            &fx.root().join("dist/keys.json"),
            &fx.root().join("keys-b/rocforge.pub")
        ));
    }
    index(&fx.root().join("dist"), &path("keys-c/rocforge.key"));
    let o = install("dist", "p2");
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stderr.contains("key list: sequence 2 (2 lists from key"),
        "{}",
        o.stderr
    );
    // The release files include the key lists, for publish.
    let files: Vec<String> = rocforge::package::index::release_files(&fx.root().join("dist"))
        .unwrap()
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    for f in [
        "keys.json",
        "keys.json.minisig",
        "keys-1.json",
        "keys-2.json.minisig",
    ] {
        assert!(files.contains(&f.to_string()), "{files:?}");
    }

    // Each bad case is served from serve-<name>: the install into p-<name> is refused, the
    // prefix is not created, and the error says what is wrong.
    let refused = |name: &str, says: &[&str]| {
        let o = install(&format!("serve-{name}"), &format!("p-{name}"));
        assert_eq!(o.code, 1, "{name}: {}\n{}", o.stdout, o.stderr);
        assert!(!fx.root().join(format!("p-{name}")).exists(), "{name}");
        for s in says {
            assert!(o.stderr.contains(s), "{name}: {}", o.stderr);
        }
    };
    let copy = |name: &str| {
        let d = fx.root().join(format!("serve-{name}"));
        rocforge::fsutil::copy_tree(&fx.root().join("dist"), &d).unwrap();
        d
    };
    // Tampered: a key swapped into the newest list after signing.
    let d = copy("tampered");
    let u_pub = std::fs::read_to_string(fx.root().join("keys-u/rocforge.pub")).unwrap();
    let u_line = u_pub.lines().last().unwrap();
    let c_pub = std::fs::read_to_string(fx.root().join("keys-c/rocforge.pub")).unwrap();
    let c_line = c_pub.lines().last().unwrap();
    let text = std::fs::read_to_string(d.join("keys.json")).unwrap();
    std::fs::write(d.join("keys.json"), text.replace(c_line, u_line)).unwrap();
    refused(
        "tampered",
        &[
            "keys.json: the signature does not verify with key",
            "changed after signing",
        ],
    );
    // A list signed by an untrusted key U, trusting U, and an index signed by U: refused.
    let d = copy("untrusted");
    for f in [
        "keys.json",
        "keys.json.minisig",
        "keys-1.json",
        "keys-1.json.minisig",
        "keys-2.json",
        "keys-2.json.minisig",
    ] {
        std::fs::remove_file(d.join(f)).unwrap();
    }
    rotate(
        &path("keys-u/rocforge.key"),
        &path("keys-u/rocforge.pub"),
        &[],
        &d.join("keys.json").display().to_string(),
    );
    index(&d, &path("keys-u/rocforge.key"));
    refused(
        "untrusted",
        &[
            "which is not trusted (and no earlier key list leads to a trusted key)",
            "not trusted",
        ],
    );
    // Replayed: the first list served as the newest after the second was seen.
    let d = copy("replayed");
    std::fs::copy(d.join("keys-1.json"), d.join("keys.json")).unwrap();
    std::fs::copy(d.join("keys-1.json.minisig"), d.join("keys.json.minisig")).unwrap();
    index(&d, &path("keys-b/rocforge.key"));
    refused(
        "replayed",
        &[
            "its sequence 1 is older than the key list 2 already accepted",
            "replayed",
        ],
    );
    // Revoked: A retired itself in list 1; an index it signs is refused even with no key list.
    let d = fx.root().join("serve-revoked");
    std::fs::create_dir_all(&d).unwrap();
    for t in tarballs(&fx.root().join("dist")) {
        std::fs::copy(&t, d.join(t.file_name().unwrap())).unwrap();
    }
    index(&d, &a_key);
    refused("revoked", &["which key list 1 (signed by", "revoked"]);
    let err = fx.fails(&["verify", &d.join("index.json").display().to_string()]);
    assert!(err.contains("revoked"), "{err}");
}

/// A library whose build ignores the GPU variable and compiles gfx900 code: accepted with
/// --allow-spoof, its install says it needs HSA_OVERRIDE_GFX_VERSION instead of "native".
#[test]
fn install_advice_follows_what_the_artifact_carries() {
    if !require("hipcc", which("hipcc")) {
        return;
    }
    let (w, root, rel) = catalog();
    std::fs::create_dir_all(root.join("src/spoof")).unwrap();
    std::fs::write(
        root.join("src/spoof/k.hip"),
        "#include <hip/hip_runtime.h>\n__global__ void k(float *x) { x[0] = 1; }\n",
    )
    .unwrap();
    // Both build gfx900 code whatever is asked; lt's recipe says its own dispatch declines
    // gfx90c (as hipBLASLt's does), spoof's says nothing.
    let gfx900_library = |name: &str, summary: &str, coverage: &str| {
        std::fs::write(
            rel.join(format!("{name}.toml")),
            format!(
                r#"name = "{name}"
version = "1.0"
summary = "{summary}"
license = "MIT"

[source]
path = "../../src/spoof"

[build]
system = "script"
arch-vars = ["GPU_TARGETS"]
script = """
P=/opt; P="$DESTDIR$P/rocm"
mkdir -p "$P/lib"
hipcc --offload-arch=gfx900 -fPIC -shared -o "$P/lib/lib{name}.so" k.hip
"""
{coverage}"#
            ),
        )
        .unwrap();
    };
    gfx900_library(
        "spoof",
        "a HIP library built for gfx900 whatever is asked",
        "",
    );
    gfx900_library(
        "lt",
        "a HIP library with kernels for another processor only",
        "\n[coverage]\nkind = \"declined\"\nreason = \"kernels for matrix-core GPUs only\"\nfallback = \"hipBLAS\"\n",
    );
    let fx = Fx { w };
    let o = fx.run(&["build", "spoof", "--arch", "gfx90c", "--runtime", "host"]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(
        o.stderr.contains(
            "lib/libspoof.so: gfx900 code only: runs on gfx90c only under HSA_OVERRIDE_GFX_VERSION=9.0.0"
        ),
        "{}",
        o.stderr
    );
    fx.ok(&[
        "build",
        "spoof",
        "--arch",
        "gfx90c",
        "--runtime",
        "host",
        "--allow-spoof",
        "gfx90c",
    ]);
    let o = fx.ok(&["build", "lt", "--arch", "gfx90c", "--runtime", "host"]);
    assert!(
        o.stderr
            .contains("declined: the library does not run on gfx90c (kernels for matrix-core GPUs only); its consumers fall back to hipBLAS"),
        "{}",
        o.stderr
    );
    fx.trust_a_new_key();
    let dist = fx.package_signed(&["spoof", "lt"], "dist", &fx.key());
    let prefix = fx.root().join("prefix");
    let o = fx.ok(&[
        "install",
        "spoof",
        "lt",
        "--arch",
        "gfx90c",
        "--from",
        &dist.join("index.json").display().to_string(),
        "--prefix",
        &prefix.display().to_string(),
        "--no-runtime-check",
    ]);
    assert!(
        !o.stderr.contains("no HSA_OVERRIDE_GFX_VERSION is needed"),
        "{}",
        o.stderr
    );
    assert!(
        o.stderr.contains(
            "spoof                carries gfx900 code only for gfx90c: it runs there only with HSA_OVERRIDE_GFX_VERSION=9.0.0"
        ),
        "{}",
        o.stderr
    );
    // Declined: no override advice, the consumers' fallback instead; the receipt keeps it.
    assert!(
        o.stderr.contains(
            "lt                   declines gfx90c by design (kernels for matrix-core GPUs only): its consumers fall back to hipBLAS there"
        ),
        "{}",
        o.stderr
    );
    assert!(
        !o.stderr.contains("lt                   carries"),
        "{}",
        o.stderr
    );
    let receipt: serde_json::Value =
        serde_json::from_slice(&std::fs::read(prefix.join(".rocforge/receipts/lt.json")).unwrap())
            .unwrap();
    assert_eq!(receipt["declined"]["fallback"], "hipBLAS", "{receipt}");
    // `inspect --against` of the prefix: the spoofed library is a gap; the declined one is
    // shown apart, as its receipt says, neither missing nor coverage.
    let p = prefix.display().to_string();
    let o = fx.run(&["inspect", "--against", "gfx90c", &p]);
    assert_eq!(o.code, 1, "spoof lacks gfx90c code: {}", o.stdout);
    assert!(
        o.stdout.contains("1 library with GPU code, 0 missing, 1 with another target's code only")
            && o.stdout.contains(
                "declined by its build, not counted: lt (kernels for matrix-core GPUs only; its consumers fall back to hipBLAS there)\n  lib/liblt.so\n"
            ),
        "{}",
        o.stdout
    );
    let j: serde_json::Value = serde_json::from_str(
        &fx.run(&["--format", "json", "inspect", "--against", "gfx90c", &p])
            .stdout,
    )
    .unwrap_or_else(|_| panic!("inspect --format json"));
    assert_eq!(j["rows"].as_array().unwrap().len(), 1, "{j}");
    assert_eq!(j["declined"][0]["component"], "lt", "{j}");
    assert_eq!(
        j["declined"][0]["rows"][0]["library"], "lib/liblt.so",
        "{j}"
    );
    // Without the spoofed library, the prefix holds.
    fx.ok(&["uninstall", "spoof", "--prefix", &p]);
    fx.ok(&["inspect", "--against", "gfx90c", &p]);
}

/// `rocforge install C --arch T` needs no URL: the config's `[install] index`, else the
/// project's published releases. An index that cannot be read is named, with the cause and how
/// to use another (here the default is unreachable: HTTPS goes to a closed local port).
#[test]
fn install_without_from_uses_the_configured_or_the_default_index() {
    use rocforge::install::origin::DEFAULT_INDEX;
    let fx = fixture();
    let dist = fx.package("dist");
    let prefix = fx.root().join("prefix");
    let p = prefix.display().to_string();
    let offline = |args: &[&str]| {
        fx.run_env(
            &[
                ("HTTPS_PROXY", PathBuf::from("http://127.0.0.1:9")),
                ("https_proxy", PathBuf::from("http://127.0.0.1:9")),
                ("ROCFORGE_INDEX", PathBuf::new()),
            ],
            args,
        )
    };
    let install = ["install", "greet", "--arch", "gfx90c", "--prefix", &p];
    let o = offline(&install);
    assert_eq!(o.code, 1, "{}\n{}", o.stdout, o.stderr);
    for text in [
        DEFAULT_INDEX,
        "Connection refused",
        "the default index",
        "--from",
        "ROCFORGE_INDEX",
        "[install] index",
    ] {
        assert!(o.stderr.contains(text), "{text}: {}", o.stderr);
    }
    assert!(!prefix.join("bin/greet").exists());
    let help = fx.ok(&["install", "--help"]).stdout;
    assert!(help.contains(DEFAULT_INDEX), "{help}");

    // The config names the index: no --from needed.
    let config = fx.root().join("trust.toml");
    let trust = std::fs::read_to_string(&config).unwrap();
    let with_index = |index: &Path| {
        std::fs::write(
            &config,
            format!("{trust}\n[install]\nindex = \"{}\"\n", index.display()),
        )
        .unwrap();
    };
    with_index(&fx.root().join("nowhere"));
    let o = offline(&install);
    assert_eq!(o.code, 1, "{}\n{}", o.stdout, o.stderr);
    assert!(o.stderr.contains("nowhere"), "{}", o.stderr);
    assert!(
        o.stderr.contains("[install] index in ") && o.stderr.contains("trust.toml"),
        "{}",
        o.stderr
    );
    with_index(&dist);
    let o = offline(&install);
    assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    let run = Command::new(prefix.join("bin/greet")).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&run.stdout), "hello, world\n");
}

/// `rocforge key generate` into the default key directory makes the key `package` signs with
/// and trusts it for local indexes: the user's own packages install from `--from DIR` with no
/// flag. The same index over HTTP is refused (no key trusted for a URL signed it), and deleting
/// the recorded line undoes the trust.
#[test]
fn a_generated_key_is_trusted_for_local_indexes_only() {
    let fx = fixture();
    std::fs::write(fx.root().join("trust.toml"), "").unwrap();
    let made = fx.ok(&["key", "generate"]);
    let recorded = fx.root().join(".config/rocforge/local-keys.pub");
    assert!(
        made.stderr
            .contains("trusted for installs from local directories")
            && made
                .stderr
                .contains("local-keys.pub; delete its line there to undo it"),
        "{}",
        made.stderr
    );
    let text = std::fs::read_to_string(&recorded).unwrap();
    assert!(text.contains(made.stdout.trim()), "{text}");
    fx.ok(&[
        "package",
        "greet",
        "--arch",
        "gfx90c",
        "--runtime",
        "host",
        "--out",
        "dist",
    ]);
    let prefix = fx.root().join("prefix");
    let p = prefix.display().to_string();
    let dist = fx.root().join("dist");
    let d = dist.display().to_string();
    let install = |from: &str| {
        fx.run(&[
            "install", "greet", "--arch", "gfx90c", "--prefix", &p, "--from", from,
        ])
    };
    let o = install(&d);
    assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    let run = Command::new(prefix.join("bin/greet")).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&run.stdout), "hello, world\n");
    fx.ok(&["uninstall", "greet", "--prefix", &p]);
    let server = HttpServer::start(&dist);
    let o = install(&server.url());
    assert_eq!(o.code, 1, "{}\n{}", o.stdout, o.stderr);
    assert!(!prefix.join("bin/greet").exists());
    std::fs::write(&recorded, text.replace(made.stdout.trim(), "")).unwrap();
    let o = install(&d);
    assert_eq!(o.code, 1, "{}\n{}", o.stdout, o.stderr);
    // A key made elsewhere is trusted only where asked.
    let other = fx.ok(&["key", "generate", "--out", "other"]);
    assert!(
        other.stderr.contains("not trusted by installs on its own"),
        "{}",
        other.stderr
    );
    assert!(
        !std::fs::read_to_string(&recorded)
            .unwrap()
            .contains(other.stdout.trim())
    );
    // One flag name per meaning: --sign-key signs; the old --key still does, and says so.
    let data = fx.root().join("data.txt");
    std::fs::write(&data, "x\n").unwrap();
    let d = data.display().to_string();
    let secret = fx.root().join("other/rocforge.key").display().to_string();
    let old = fx.ok(&["sign", &d, "--key", &secret]);
    assert!(
        old.stderr
            .contains("warning: --key FILE (the secret key that signs) is now --sign-key FILE"),
        "{}",
        old.stderr
    );
    std::fs::remove_file(fx.root().join("data.txt.minisig")).unwrap();
    let new = fx.ok(&["sign", &d, "--sign-key", &secret]);
    assert!(!new.stderr.contains("warning"), "{}", new.stderr);
    let public = fx.root().join("other/rocforge.pub").display().to_string();
    fx.ok(&["verify", &d, "--key", &public]);
}

/// Where no release has been published (the index's server answers 404), `install` and
/// `install --dry-run` say so, with how to build and install it here instead; where no server
/// answers, the network cause, with the same advice.
#[test]
fn install_where_no_release_is_published_says_so_and_how_to_build_it() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let server = HttpServer::start(&empty);
    let run = |index: &str, extra: &[&str]| {
        let mut args = vec!["install", "rocrand", "--arch", "gfx90c"];
        args.extend_from_slice(extra);
        rocforge_env(dir.path(), &[("ROCFORGE_INDEX", Path::new(index))], &args)
    };
    for (name, extra) in [("install", &[][..]), ("dry_run", &["--dry-run"][..])] {
        let o = run(&server.url(), extra);
        assert_eq!(o.code, 1, "{}\n{}", o.stdout, o.stderr);
        insta::assert_snapshot!(
            format!("install_unpublished_{name}"),
            o.stderr.replace(&server.port.to_string(), "PORT")
        );
    }
    let port = free_port();
    let o = run(&format!("http://127.0.0.1:{port}/"), &[]);
    assert_eq!(o.code, 1, "{}\n{}", o.stdout, o.stderr);
    for text in [
        format!("cannot reach the index http://127.0.0.1:{port}/index.json"),
        "Connection refused".into(),
        "check the network".into(),
        "`rocforge build rocrand --arch gfx90c`".into(),
        "`rocforge install rocrand --arch gfx90c --from ./dist`".into(),
        "ROCFORGE_INDEX names this index".into(),
    ] {
        assert!(o.stderr.contains(&text), "{text}: {}", o.stderr);
    }
    assert!(!o.stderr.contains("published"), "{}", o.stderr);
}

/// `install --dry-run` prints what the install would do and writes nothing: not the prefix,
/// not the download cache, not the trust state; after a real install the same plan keeps
/// everything.
#[test]
fn install_dry_run_prints_the_plan_and_writes_nothing() {
    let fx = fixture();
    let dist = fx.package("dist");
    let server = HttpServer::start(&dist);
    let url = server.url();
    let prefix = fx.root().join("p");
    let p = prefix.display().to_string();
    let before = listing(fx.root());
    let args = [
        "install",
        "greet",
        "--arch",
        "gfx90c",
        "--from",
        &url,
        "--prefix",
        &p,
        "--dry-run",
    ];
    let text = fx.ok(&args).stdout;
    assert_eq!(listing(fx.root()), before, "a dry run writes nothing");
    assert!(!prefix.exists());
    let shown: Vec<String> = text
        .lines()
        .map(|l| {
            if l.starts_with("    size ") {
                "    size   [SIZE]".to_string()
            } else if let Some((head, _)) = l.split_once(" to install: ") {
                format!("{head} to install: [SIZE]")
            } else {
                l.to_string()
            }
        })
        .collect();
    let shown = shown.join("\n").replace(&url, "[URL]/");
    let mut redacted = String::new();
    for word in shown.split_inclusive([' ', '\n', '-', '.']) {
        let core = word.trim_end_matches([' ', '\n', '-', '.']);
        // Digests, key IDs and the content keys in file names.
        if core.len() >= 8 && core.chars().all(|c| c.is_ascii_hexdigit()) {
            redacted += &format!("[HEX]{}", &word[core.len()..]);
        } else {
            redacted += word;
        }
    }
    insta::assert_snapshot!(
        "install_dry_run",
        redacted.replace(&fx.root().display().to_string(), "[ROOT]")
    );

    let mut json_args = vec!["--format", "json"];
    json_args.extend_from_slice(&args);
    let plan: serde_json::Value = serde_json::from_str(&fx.ok(&json_args).stdout).unwrap();
    assert_eq!(plan["schema"], "rocforge.install-plan/1");
    crate::common::schema::assert_matches_schema(fx.root(), "install-plan", &plan);
    let steps = plan["steps"].as_array().unwrap();
    let names: Vec<(&str, &str)> = steps
        .iter()
        .map(|s| (s["name"].as_str().unwrap(), s["action"].as_str().unwrap()))
        .collect();
    assert_eq!(names, [("greetdoc", "install"), ("greet", "install")]);
    for s in steps {
        let file = s["url"].as_str().unwrap().rsplit('/').next().unwrap();
        assert_eq!(s["sha256"], sha256_file(&dist.join(file)));
        assert_eq!(s["size"], std::fs::metadata(dist.join(file)).unwrap().len());
    }
    assert_eq!(listing(fx.root()), before, "a dry run writes nothing");

    // Installed: the same plan keeps both, and still changes nothing.
    fx.ok(&args[..args.len() - 1]);
    let installed = listing(fx.root());
    let plan: serde_json::Value = serde_json::from_str(&fx.ok(&json_args).stdout).unwrap();
    let actions: Vec<&str> = plan["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["keep", "keep"]);
    assert_eq!(plan["download_bytes"], 0);
    assert_eq!(listing(fx.root()), installed);
    // A refusal is the install's own: a component the index lacks.
    let o = fx.run(&[
        "install",
        "nosuch",
        "--from",
        &url,
        "--prefix",
        &p,
        "--dry-run",
    ]);
    assert_eq!(o.code, 1);
    assert!(
        o.stderr
            .contains("nosuch for any target is not in the index"),
        "{}",
        o.stderr
    );
    // A typo of a name the index holds is answered with that name.
    let o = fx.run(&[
        "install",
        "greeet",
        "--from",
        &url,
        "--prefix",
        &p,
        "--dry-run",
    ]);
    assert_eq!(o.code, 1);
    assert!(
        o.stderr.contains("help: did you mean \"greet\"?"),
        "{}",
        o.stderr
    );
}

/// A component without device code (hipBLAS over rocBLAS) is keyed by its dependencies'
/// target-free keys, but its package must name the dependency packaged beside it: an install
/// from the index follows that name and key.
#[test]
fn a_package_without_device_code_names_the_dependency_keys_it_is_released_with() {
    let (w, root, rel) = catalog();
    for dir in ["src/wrap", "src/doc"] {
        std::fs::create_dir_all(root.join(dir)).unwrap();
    }
    std::fs::write(root.join("src/wrap/README"), "wrap\n").unwrap();
    std::fs::write(root.join("src/doc/README"), "docs\n").unwrap();
    std::fs::write(
        rel.join("greetdoc.toml"),
        "name = \"greetdoc\"\nversion = \"1.0\"\nsummary = \"data\"\nlicense = \"MIT\"\n\n[source]\npath = \"../../src/doc\"\n\n[build]\nsystem = \"copy\"\ndest = \"share/greet\"\n",
    )
    .unwrap();
    std::fs::write(
        rel.join("wrap.toml"),
        "name = \"wrap\"\nversion = \"1.0\"\nsummary = \"host code\"\nlicense = \"MIT\"\ndepends = [\"greetdoc\"]\n\n[source]\npath = \"../../src/wrap\"\n\n[build]\nsystem = \"copy\"\ndest = \"share/wrap\"\ndevice-code = false\n",
    )
    .unwrap();
    let fx = Fx { w };
    fx.ok(&["build", "wrap", "--arch", "gfx90c", "--runtime", "host"]);
    fx.trust_a_new_key();
    let dist = fx.package_signed(&["wrap"], "dist", &fx.key());
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dist.join("index.json")).unwrap()).unwrap();
    let by_name = |n: &str| named(&index["artifacts"], n);
    assert_eq!(
        by_name("wrap")["depends"][0]["key"],
        by_name("greetdoc")["key"],
        "{index}"
    );
    let prefix = fx.root().join("fresh/rocm");
    let p = prefix.display().to_string();
    let from = dist.display().to_string();
    fx.ok(&[
        "install", "wrap", "--arch", "gfx90c", "--from", &from, "--prefix", &p,
    ]);
    assert!(prefix.join("share/wrap/README").is_file());
    assert!(prefix.join("share/greet/README").is_file());
}

/// `install` and `uninstall` under --format json: one JSON document on stdout each (what was
/// installed with its files and whether it carries GPU code, the environment to set; what was
/// removed), nothing else there.
#[test]
fn install_and_uninstall_speak_json() {
    let fx = fixture();
    let dist = fx.package("dist");
    let prefix = fx.root().join("json-prefix");
    let p = prefix.display().to_string();
    let from = dist.join("index.json").display().to_string();
    let o = fx.ok(&[
        "--format", "json", "install", "greet", "--arch", "gfx90c", "--from", &from, "--prefix", &p,
    ]);
    let v: serde_json::Value =
        serde_json::from_str(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", o.stdout));
    assert_eq!(v["schema"], "rocforge.install/1");
    crate::common::schema::assert_matches_schema(fx.root(), "install", &v);
    assert_eq!(v["prefix"], p);
    let names: Vec<&str> = v["installed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["greetdoc", "greet"], "{v}");
    assert!(v["installed"][1]["files"].as_u64().unwrap() > 0, "{v}");
    assert_eq!(v["installed"][1]["device_code"], false, "{v}");
    assert_eq!(v["environment"]["LD_LIBRARY_PATH"], format!("{p}/lib"));
    let o = fx.ok(&["--format", "json", "uninstall", "greet", "--prefix", &p]);
    let v: serde_json::Value =
        serde_json::from_str(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", o.stdout));
    assert_eq!(v["schema"], "rocforge.uninstall/1");
    crate::common::schema::assert_matches_schema(fx.root(), "uninstall", &v);
    assert_eq!(v["removed"], serde_json::json!(["greet"]));
    assert!(v["files"].as_u64().unwrap() > 0, "{v}");
}

/// The JSON of `build`, `store list`, `store show`, `package` and `list --installed` matches the
/// schemas `rocforge schema` publishes for them, with entries in them.
#[test]
fn build_store_and_package_outputs_match_their_schemas() {
    use crate::common::schema::assert_matches_schema;
    let fx = fixture();
    let json = |args: &[&str]| -> serde_json::Value {
        let mut argv = vec!["--format", "json"];
        argv.extend_from_slice(args);
        let o = fx.ok(&argv);
        serde_json::from_str(&o.stdout).unwrap_or_else(|e| panic!("{args:?}: {e}: {}", o.stdout))
    };
    let build = json(&["build", "greet", "--arch", "gfx90c", "--runtime", "host"]);
    assert_matches_schema(fx.root(), "build", &build);
    let store = json(&["store", "list"]);
    assert_matches_schema(fx.root(), "store", &store);
    let key = store["entries"][0]["key"].as_str().unwrap().to_string();
    assert_matches_schema(fx.root(), "store-entry", &json(&["store", "show", &key]));
    let key_file = fx.key();
    let package = json(&[
        "package",
        "greet",
        "--arch",
        "gfx90c",
        "--runtime",
        "host",
        "--out",
        "dist",
        "--sign-key",
        &key_file,
    ]);
    assert_matches_schema(fx.root(), "package", &package);
    let prefix = fx.root().join("prefix").display().to_string();
    let from = fx.root().join("dist/index.json").display().to_string();
    fx.ok(&[
        "install", "greet", "--arch", "gfx90c", "--from", &from, "--prefix", &prefix,
    ]);
    let installed = json(&["list", "--installed", "--prefix", &prefix]);
    assert_eq!(
        installed["components"].as_array().unwrap().len(),
        2,
        "{installed}"
    );
    assert_matches_schema(fx.root(), "installed", &installed);
}

/// An artifact whose library links one nothing carries (built against a library of its build
/// machine that no dependency ships, as rocBLAS of the debian-6.4 line links Debian's
/// libroctx64): install names the library and who needs it and leaves the prefix alone; it
/// installs once this system has the library, or with --no-runtime-check.
#[test]
fn install_refuses_a_library_that_links_one_nothing_provides() {
    let fx = fixture();
    let root = fx.root().to_path_buf();
    fx.write("src/needy/absent.c", "int absent(void) { return 7; }\n");
    fx.write(
        "src/needy/needy.c",
        "int absent(void);\nint needy(void) { return absent(); }\n",
    );
    // libabsent.so.3 is linked against and left out of the install tree.
    fx.write(
        "recipes/test-1.0/needy.toml",
        r#"name = "needy"
version = "1.0"
summary = "a library linking one it does not ship"
license = "MIT"

[source]
path = "../../src/needy"

[build]
system = "script"
script = """
P=/opt; P="$DESTDIR$P/rocm"
mkdir -p "$P/lib" scratch
cc -shared -fPIC -o scratch/libabsent.so.3 absent.c -Wl,-soname,libabsent.so.3
ln -s libabsent.so.3 scratch/libabsent.so
cc -shared -fPIC -o "$P/lib/libneedy.so.1" needy.c -Wl,-soname,libneedy.so.1 -Lscratch -labsent
"""
"#,
    );
    fx.ok(&["build", "needy", "--arch", "gfx90c", "--runtime", "host"]);
    let dist = fx.package_signed(&["needy"], "dist", &fx.key());
    let from = dist.display().to_string();
    let prefix = root.join("opt/needy");
    let p = prefix.display().to_string();
    let args = [
        "install", "needy", "--arch", "gfx90c", "--from", &from, "--prefix", &p,
    ];
    // The system's libraries are those where ROCFORGE_HOST_LIBS points (none; glibc's are the
    // glibc check's): what is said is the same on every machine.
    let libs = root.join("syslibs");
    std::fs::create_dir_all(&libs).unwrap();
    let o = fx.run_env(&[("ROCFORGE_HOST_LIBS", libs.clone())], &args);
    assert_eq!(o.code, 1, "{}", o.stderr);
    let err = o.stderr;
    insta::assert_snapshot!("install_unresolved_library", redact(&err, &fx, None));
    assert!(
        err.contains("1 library the install links is not in it, in the prefix, or on this system")
            && err.contains("libabsent.so.3 (needed by lib/libneedy.so.1 of needy-1.0-gfx90c-")
            && err.contains("apt-file search libabsent.so.3")
            && err.contains("--no-runtime-check"),
        "{err}"
    );
    assert!(
        !prefix.join("lib/libneedy.so.1").exists(),
        "a refused install wrote its prefix"
    );
    // A system that has it: installed.
    std::fs::write(libs.join("libabsent.so.3"), "").unwrap();
    let o = fx.run_env(&[("ROCFORGE_HOST_LIBS", libs)], &args);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(prefix.join("lib/libneedy.so.1").is_file());
    // Without it (the ld.so cache and the usual directories), --no-runtime-check installs
    // anyway (into another prefix).
    let other = root.join("opt/anyway").display().to_string();
    fx.ok(&[
        "install",
        "needy",
        "--arch",
        "gfx90c",
        "--from",
        &from,
        "--prefix",
        &other,
        "--no-runtime-check",
    ]);
}
