//! SBOM and provenance for real: a component with a pinned source archive (served on
//! 127.0.0.1), a patch and a dependency, built with the host runtime and packaged signed; both
//! documents checked against its manifest and hash input, against the SPDX 2.3 JSON schema's
//! required and allowed fields, and snapshotted; `verify` passes, and fails naming the file
//! after one byte of either changed or with another tarball's SBOM; the documents listed in
//! the index. Images: `image create --push` to a registry on 127.0.0.1 attaches both as OCI
//! referrers (the spec's fallback tag, distribution 2.8 has no referrers API), read back and
//! verified; an SBOM of another image is refused naming both digests; a push killed between
//! the referrer manifests and their listing leaves no referrer claimed.

use crate::common;

use std::path::{Path, PathBuf};

use common::*;
use serde_json::Value;

struct Fx {
    w: World,
    _http: HttpServer,
    port: u16,
}

derefs_to_world!(Fx);

const PATCH: &str = "--- a/greeting.txt\n+++ b/greeting.txt\n@@ -1 +1 @@\n-hello\n+hello, gfx90c\n";

impl Fx {
    /// With more variables given as strings (a signing key's path, a fault point).
    fn run_env(&self, extra: &[(&'static str, &str)], args: &[&str]) -> Out {
        let extra: Vec<(&str, &Path)> = extra.iter().map(|(k, v)| (*k, Path::new(*v))).collect();
        self.w.run_env(&extra, args)
    }
    fn package(&self, out: &str) -> PathBuf {
        self.ok(&[
            "package",
            "greet",
            "--arch",
            "gfx90c",
            "--runtime",
            "host",
            "--out",
            out,
            "--key",
            "keys/rocforge.key",
        ]);
        self.root().join(out)
    }
    fn pubkey(&self) -> String {
        self.root().join("keys/rocforge.pub").display().to_string()
    }
}

/// `greet` 1.2 from a pinned archive on 127.0.0.1, one patch, depending on `greetdoc` (a
/// local directory, copied): built with the host runtime; a key made and trusted.
fn fixture() -> Fx {
    let w = World::new()
        .release("localhost/rocforge-none:1")
        .config("trust.toml")
        .state()
        .var("SOURCE_DATE_EPOCH", "1700000000")
        .build();
    let (root, rel) = (w.root(), w.release_dir());
    let origin = root.join("origin");
    let src = origin.join("src/greet-1.2");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("greeting.txt"), "hello\n").unwrap();
    std::fs::write(src.join("LICENSE"), "MIT License\n").unwrap();
    // The SBOM's date is the source's (its newest entry): fixed, so the document is too.
    set_mtime(&src.join("greeting.txt"), 1_660_000_000);
    set_mtime(&src.join("LICENSE"), 1_660_000_000);
    set_mtime(&src, 1_660_000_000);
    let archive = origin.join("greet-1.2.tar.gz");
    tar_gz(&origin.join("src"), "greet-1.2", &archive);
    let http = HttpServer::start(&origin);
    std::fs::create_dir_all(root.join("patches/test-1.0/greet")).unwrap();
    std::fs::write(
        root.join("patches/test-1.0/greet/0001-greet-gfx90c.patch"),
        PATCH,
    )
    .unwrap();
    std::fs::write(
        rel.join("greet.toml"),
        format!(
            "name = \"greet\"\nversion = \"1.2\"\nsummary = \"a greeting\"\nlicense = \"MIT\"\ndepends = [\"greetdoc\"]\n\n[source]\nurl = \"{}greet-1.2.tar.gz\"\nsha256 = \"{}\"\n\n[patches]\nall = [\"0001-greet-gfx90c.patch\"]\n\n[build]\nsystem = \"script\"\nscript = \"\"\"\nP=/opt; P=\"$DESTDIR$P/rocm\"\nmkdir -p \"$P/share/greet\"\ncp greeting.txt \"$P/share/greet/\"\n\"\"\"\n",
            http.url(),
            sha256_file(&archive)
        ),
    )
    .unwrap();
    std::fs::create_dir_all(root.join("src/doc")).unwrap();
    std::fs::write(root.join("src/doc/README"), "docs\n").unwrap();
    set_mtime(&root.join("src/doc/README"), 1_660_000_000);
    set_mtime(&root.join("src/doc"), 1_660_000_000);
    std::fs::write(
        rel.join("greetdoc.toml"),
        "name = \"greetdoc\"\nversion = \"1.0\"\nsummary = \"data\"\nlicense = \"CC-BY-4.0\"\n\n[source]\npath = \"../../src/doc\"\n\n[build]\nsystem = \"copy\"\ndest = \"share/greet/doc\"\n",
    )
    .unwrap();
    let fx = Fx {
        w,
        port: http.port,
        _http: http,
    };
    fx.ok(&["build", "greet", "--arch", "gfx90c", "--runtime", "host"]);
    fx.trust_new_key("keys", "trust.toml");
    fx
}

fn tarball(dir: &Path, name: &str) -> PathBuf {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            let n = p.file_name().unwrap().to_string_lossy().into_owned();
            n.starts_with(&format!("{name}-")) && n.ends_with(".tar.zst")
        })
        .unwrap_or_else(|| panic!("no {name} tarball in {}", dir.display()))
}

fn beside(tarball: &Path, suffix: &str) -> PathBuf {
    let n = tarball.file_name().unwrap().to_string_lossy().into_owned();
    tarball.with_file_name(format!("{}{suffix}", n.strip_suffix(".tar.zst").unwrap()))
}

fn json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The SPDX 2.3 JSON schema's rules for the parts these documents use (spdx-spec
/// schemas/spdx-schema.json): required and allowed properties, ID and date patterns, the
/// checksum and relationship enumerations. Returns what breaks them.
fn spdx_violations(doc: &Value) -> Vec<String> {
    fn check(v: &Value, at: &str, required: &[&str], allowed: &[&str], out: &mut Vec<String>) {
        let Some(o) = v.as_object() else {
            out.push(format!("{at} is not an object"));
            return;
        };
        for r in required {
            if !o.contains_key(*r) {
                out.push(format!("{at} lacks required {r}"));
            }
        }
        for k in o.keys() {
            if !allowed.contains(&k.as_str()) && !required.contains(&k.as_str()) {
                out.push(format!("{at} has {k}, which the schema does not allow"));
            }
        }
    }
    let id_ok = |s: &str| {
        s.strip_prefix("SPDXRef-").is_some_and(|b| {
            !b.is_empty()
                && b.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
        })
    };
    let date_ok = |s: &str| {
        s.len() == 20 && s.as_bytes()[4] == b'-' && s.as_bytes()[10] == b'T' && s.ends_with('Z')
    };
    let checksums = |v: &Value, at: &str, out: &mut Vec<String>| {
        for (i, c) in v.as_array().into_iter().flatten().enumerate() {
            check(
                c,
                &format!("{at}.checksums[{i}]"),
                &["algorithm", "checksumValue"],
                &[],
                out,
            );
            if !["SHA1", "SHA256", "SHA512", "MD5"].contains(&c["algorithm"].as_str().unwrap_or(""))
            {
                out.push(format!("{at}: algorithm {}", c["algorithm"]));
            }
            let hex = c["checksumValue"].as_str().unwrap_or("");
            if hex.is_empty() || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
                out.push(format!("{at}: checksumValue {hex:?} is not hex"));
            }
        }
    };
    let mut out = Vec::new();
    check(
        doc,
        "document",
        &[
            "SPDXID",
            "creationInfo",
            "dataLicense",
            "name",
            "spdxVersion",
            "documentNamespace",
        ],
        &[
            "$schema",
            "annotations",
            "comment",
            "externalDocumentRefs",
            "hasExtractedLicensingInfos",
            "packages",
            "files",
            "snippets",
            "relationships",
            "documentDescribes",
            "revieweds",
        ],
        &mut out,
    );
    check(
        &doc["creationInfo"],
        "creationInfo",
        &["created", "creators"],
        &["comment", "licenseListVersion"],
        &mut out,
    );
    if !date_ok(doc["creationInfo"]["created"].as_str().unwrap_or("")) {
        out.push(format!("created {}", doc["creationInfo"]["created"]));
    }
    let mut ids = vec!["SPDXRef-DOCUMENT".to_string()];
    for (i, p) in doc["packages"].as_array().into_iter().flatten().enumerate() {
        let at = format!("packages[{i}]");
        check(
            p,
            &at,
            &["SPDXID", "downloadLocation", "name"],
            &[
                "annotations",
                "attributionTexts",
                "builtDate",
                "checksums",
                "comment",
                "copyrightText",
                "description",
                "externalRefs",
                "filesAnalyzed",
                "hasFiles",
                "homepage",
                "licenseComments",
                "licenseConcluded",
                "licenseDeclared",
                "licenseInfoFromFiles",
                "originator",
                "packageFileName",
                "packageVerificationCode",
                "primaryPackagePurpose",
                "releaseDate",
                "sourceInfo",
                "summary",
                "supplier",
                "validUntilDate",
                "versionInfo",
            ],
            &mut out,
        );
        checksums(&p["checksums"], &at, &mut out);
        for (j, r) in p["externalRefs"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            check(
                r,
                &format!("{at}.externalRefs[{j}]"),
                &["referenceCategory", "referenceLocator", "referenceType"],
                &["comment"],
                &mut out,
            );
        }
        if p["filesAnalyzed"] != false {
            out.push(format!(
                "{at}: filesAnalyzed is not false, so a verification code would be due"
            ));
        }
        let id = p["SPDXID"].as_str().unwrap_or("");
        if !id_ok(id) {
            out.push(format!("{at}: SPDXID {id:?}"));
        }
        ids.push(id.to_string());
    }
    for (i, f) in doc["files"].as_array().into_iter().flatten().enumerate() {
        let at = format!("files[{i}]");
        check(
            f,
            &at,
            &["SPDXID", "checksums", "fileName"],
            &[
                "annotations",
                "comment",
                "copyrightText",
                "licenseConcluded",
                "licenseInfoInFiles",
                "noticeText",
                "fileTypes",
            ],
            &mut out,
        );
        checksums(&f["checksums"], &at, &mut out);
        ids.push(f["SPDXID"].as_str().unwrap_or("").to_string());
    }
    let kinds = [
        "CONTAINS",
        "DEPENDS_ON",
        "BUILD_DEPENDENCY_OF",
        "DESCRIBES",
        "PATCH_APPLIED",
        "BUILD_TOOL_OF",
        "DESCENDANT_OF",
    ];
    for (i, r) in doc["relationships"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let at = format!("relationships[{i}]");
        check(
            r,
            &at,
            &["spdxElementId", "relatedSpdxElement", "relationshipType"],
            &["comment"],
            &mut out,
        );
        if !kinds.contains(&r["relationshipType"].as_str().unwrap_or("")) {
            out.push(format!("{at}: relationshipType {}", r["relationshipType"]));
        }
        for end in ["spdxElementId", "relatedSpdxElement"] {
            if !ids.iter().any(|i| r[end] == i.as_str()) {
                out.push(format!("{at}: {end} {} names no element", r[end]));
            }
        }
    }
    out
}

fn package_named<'a>(doc: &'a Value, name: &str) -> &'a Value {
    doc["packages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("no package {name} in {doc}"))
}

fn has_rel(doc: &Value, a: &str, kind: &str, b: &str) -> bool {
    doc["relationships"].as_array().unwrap().iter().any(|r| {
        r["spdxElementId"] == a && r["relationshipType"] == kind && r["relatedSpdxElement"] == b
    })
}

/// What varies from run to run (the port, the archive's digest and what it changes), named.
fn redact(text: &str, fx: &Fx, pairs: &[(&str, &str)]) -> String {
    let mut s = text.replace(&format!("127.0.0.1:{}", fx.port), "127.0.0.1:[PORT]");
    for (from, to) in pairs {
        s = s.replace(from, to);
    }
    s.replace(env!("CARGO_PKG_VERSION"), "[VERSION]")
}

#[test]
fn packages_carry_signed_sboms_and_provenance_that_verify() {
    let fx = fixture();
    let dist = fx.package("dist");
    let greet = tarball(&dist, "greet");
    let doc_tarball = tarball(&dist, "greetdoc");
    let manifest = rocforge::package::tarball::read_manifest(&greet).unwrap();
    let hi = &manifest.hash_input;
    let key = manifest.key.to_string();
    let dep_key = manifest.depends[0].key.to_string();
    let tar_sha = sha256_file(&greet);
    let src_sha = hi["component"]["source"]["sha256"]
        .as_str()
        .unwrap()
        .to_string();
    let patch_sha = hi["component"]["patches"][0]["sha256"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        patch_sha,
        sha256_file(
            &fx.root()
                .join("patches/test-1.0/greet/0001-greet-gfx90c.patch")
        )
    );

    // Both documents, each signed, for both tarballs.
    for t in [&greet, &doc_tarball] {
        for suffix in [
            ".spdx.json",
            ".spdx.json.minisig",
            ".intoto.json",
            ".intoto.json.minisig",
        ] {
            assert!(
                beside(t, suffix).is_file(),
                "{}",
                beside(t, suffix).display()
            );
        }
    }
    let sbom = json(&beside(&greet, ".spdx.json"));
    assert_eq!(spdx_violations(&sbom), Vec::<String>::new(), "{sbom:#}");
    assert_eq!(
        spdx_violations(&json(&beside(&doc_tarball, ".spdx.json"))),
        Vec::<String>::new()
    );
    // The subject is this tarball; the component is the manifest's, from its pinned source.
    let subject = package_named(&sbom, greet.file_name().unwrap().to_str().unwrap());
    assert_eq!(subject["checksums"][0]["checksumValue"], tar_sha.as_str());
    assert!(has_rel(
        &sbom,
        "SPDXRef-DOCUMENT",
        "DESCRIBES",
        "SPDXRef-Subject"
    ));
    let comp = package_named(&sbom, "greet");
    assert_eq!(comp["versionInfo"], "1.2");
    assert_eq!(
        comp["downloadLocation"],
        format!("http://127.0.0.1:{}/greet-1.2.tar.gz", fx.port)
    );
    assert_eq!(comp["checksums"][0]["checksumValue"], src_sha.as_str());
    assert_eq!(comp["licenseDeclared"], "MIT");
    assert!(
        comp["licenseComments"]
            .as_str()
            .unwrap()
            .contains("share/doc/greet/LICENSE"),
        "{comp}"
    );
    let comp_id = comp["SPDXID"].as_str().unwrap();
    assert!(has_rel(&sbom, "SPDXRef-Subject", "CONTAINS", comp_id));
    let dep = package_named(&sbom, "greetdoc");
    assert_eq!(dep["externalRefs"][0]["referenceLocator"], dep_key.as_str());
    assert_eq!(dep["versionInfo"], "1.0");
    assert_eq!(dep["licenseDeclared"], "NOASSERTION");
    assert!(has_rel(
        &sbom,
        comp_id,
        "DEPENDS_ON",
        dep["SPDXID"].as_str().unwrap()
    ));
    assert_eq!(
        sbom["files"][0]["checksums"][0]["checksumValue"],
        patch_sha.as_str()
    );
    assert!(has_rel(
        &sbom,
        sbom["files"][0]["SPDXID"].as_str().unwrap(),
        "PATCH_APPLIED",
        comp_id
    ));
    assert!(sbom["documentNamespace"].as_str().unwrap().ends_with(&key));

    let prov = json(&beside(&greet, ".intoto.json"));
    assert_eq!(prov["_type"], "https://in-toto.io/Statement/v1");
    assert_eq!(prov["predicateType"], "https://slsa.dev/provenance/v1");
    assert_eq!(prov["subject"][0]["digest"]["sha256"], tar_sha.as_str());
    let def = &prov["predicate"]["buildDefinition"];
    assert_eq!(def["externalParameters"]["component"], "greet");
    assert_eq!(
        def["externalParameters"]["targets"],
        serde_json::json!(["gfx90c"])
    );
    assert_eq!(def["internalParameters"]["build"], hi["component"]["build"]);
    assert_eq!(
        prov["predicate"]["runDetails"]["metadata"]["invocationId"],
        key.as_str()
    );
    let deps = def["resolvedDependencies"].as_array().unwrap();
    assert!(
        deps.iter()
            .any(|d| d["digest"]["sha256"] == src_sha.as_str() && d["name"] == "source")
    );
    assert!(
        deps.iter()
            .any(|d| d["digest"]["sha256"] == patch_sha.as_str())
    );
    assert!(
        deps.iter()
            .any(|d| d["annotations"]["contentKey"] == dep_key.as_str())
    );

    // Same inputs, same bytes.
    let again = fx.package("dist2");
    for suffix in [".spdx.json", ".intoto.json"] {
        assert!(
            std::fs::read(beside(&greet, suffix)).unwrap()
                == std::fs::read(beside(&tarball(&again, "greet"), suffix)).unwrap(),
            "{suffix} differs between two packages of the same entry"
        );
    }
    let short = &key[..8];
    let dshort = &dep_key[..8];
    let pairs = [
        (tar_sha.as_str(), "[TARBALL-SHA256]"),
        (src_sha.as_str(), "[SOURCE-SHA256]"),
        (key.as_str(), "[KEY]"),
        (dep_key.as_str(), "[GREETDOC-KEY]"),
        (&key[..12], "[KEY12]"),
        (&dep_key[..12], "[GREETDOC-KEY12]"),
        (short, "[KEY8]"),
        (dshort, "[GREETDOC-KEY8]"),
    ];
    insta::assert_snapshot!(
        "sbom",
        redact(
            &std::fs::read_to_string(beside(&greet, ".spdx.json")).unwrap(),
            &fx,
            &pairs
        )
    );
    insta::assert_snapshot!(
        "provenance",
        redact(
            &std::fs::read_to_string(beside(&greet, ".intoto.json")).unwrap(),
            &fx,
            &pairs
        )
    );

    // The index pins both documents like the tarball.
    let index = json(&dist.join("index.json"));
    let entry = index["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "greet")
        .unwrap()
        .clone();
    let sbom_name = beside(&greet, ".spdx.json")
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    assert_eq!(entry["sbom"]["url"], sbom_name.as_str());
    assert_eq!(
        entry["sbom"]["sha256"],
        sha256_file(&beside(&greet, ".spdx.json")).as_str()
    );
    assert_eq!(entry["sbom"]["signature"], format!("{sbom_name}.minisig"));
    assert!(
        entry["provenance"]["url"]
            .as_str()
            .unwrap()
            .ends_with(".intoto.json")
    );
    let sums = std::fs::read_to_string(dist.join("SHA256SUMS")).unwrap();
    assert!(sums.contains(&sbom_name), "{sums}");

    // verify: the tarball's signature, then both documents.
    let g = greet.display().to_string();
    let o = fx.ok(&["verify", &g]);
    assert!(o.stdout.contains("good SBOM from key"), "{}", o.stdout);
    assert!(
        o.stdout.contains("good provenance statement from key"),
        "{}",
        o.stdout
    );
    let v: Value =
        serde_json::from_str(&fx.ok(&["verify", &g, "--format", "json"]).stdout).unwrap();
    crate::common::schema::assert_matches_schema(fx.root(), "verify", &v);
    let docs = v["documents"].as_array().unwrap();
    assert_eq!(docs.len(), 2, "{v:#}");
    for d in docs {
        assert_eq!(d["subject"], format!("sha256:{tar_sha}"));
        assert_eq!(d["components"], serde_json::json!([format!("greet@{key}")]));
    }

    // One byte changed in either: refused, naming the document.
    for suffix in [".spdx.json", ".intoto.json"] {
        let path = beside(&greet, suffix);
        let good = std::fs::read(&path).unwrap();
        let mut bad = good.clone();
        let at = bad.iter().position(|b| *b == b'1').unwrap();
        bad[at] = b'2';
        std::fs::write(&path, &bad).unwrap();
        let err = fx.fails(&["verify", &g]);
        assert!(
            err.contains(&path.display().to_string()) && err.contains("does not verify"),
            "{err}"
        );
        std::fs::write(&path, &good).unwrap();
    }
    // Removed: refused, naming what is missing.
    let prov_path = beside(&greet, ".intoto.json");
    let kept = std::fs::read(&prov_path).unwrap();
    std::fs::remove_file(&prov_path).unwrap();
    let err = fx.fails(&["verify", &g]);
    assert!(err.contains("no provenance statement (looked for"), "{err}");
    std::fs::write(&prov_path, kept).unwrap();

    // Another tarball's SBOM (signed by the same trusted key): refused with both digests.
    for suffix in [".spdx.json", ".spdx.json.minisig"] {
        std::fs::copy(beside(&doc_tarball, suffix), beside(&greet, suffix)).unwrap();
    }
    let err = fx.fails(&["verify", &g]);
    let doc_sha = sha256_file(&doc_tarball);
    assert!(
        err.contains("is an SBOM for another tarball")
            && err.contains(&format!("sha256:{doc_sha}"))
            && err.contains(&format!("sha256:{tar_sha}"))
            && err.contains("help: the document was made for something else"),
        "{err}"
    );
    insta::assert_snapshot!(
        "other_tarball_sbom",
        redact(
            &err.replace(&fx.root().display().to_string(), "[ROOT]"),
            &fx,
            &[
                (tar_sha.as_str(), "[TARBALL-SHA256]"),
                (doc_sha.as_str(), "[GREETDOC-SHA256]"),
                (short, "[KEY8]"),
                (dshort, "[GREETDOC-KEY8]")
            ]
        )
    );
}

/// A one-layer base image pushed to `host/base:N` with the registry API (a file `base-N`
/// in it): what `image create` reads. Returns its reference.
fn push_base(host: &str, n: u32) -> String {
    use rocforge::oci::{Descriptor, IMAGE_MANIFEST, ImageManifest};
    use sha2::{Digest, Sha256};
    let remote = rocforge::oci::Remote::new(
        reqwest::blocking::Client::new(),
        rocforge::oci::Repository::parse(&format!("{host}/base")).unwrap(),
    );
    let mut tar = tar::Builder::new(Vec::new());
    let body = format!("base {n}\n");
    let mut h = tar::Header::new_gnu();
    h.set_size(body.len() as u64);
    h.set_mode(0o644);
    h.set_cksum();
    tar.append_data(&mut h, format!("base-{n}"), body.as_bytes())
        .unwrap();
    let tar = tar.into_inner().unwrap();
    let diff_id = format!("sha256:{}", hex::encode(Sha256::digest(&tar)));
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut gz, &tar).unwrap();
    let gz = gz.finish().unwrap();
    let layer = remote
        .push_bytes("application/vnd.oci.image.layer.v1.tar+gzip", &gz)
        .unwrap();
    let config = serde_json::to_vec(&serde_json::json!({
        "architecture": rocforge::image::host_arch(),
        "os": "linux",
        "config": {"Env": ["PATH=/usr/bin:/bin"]},
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
    }))
    .unwrap();
    let config: Descriptor = remote
        .push_bytes("application/vnd.oci.image.config.v1+json", &config)
        .unwrap();
    let tag = format!("{n}");
    remote
        .put_manifest(
            &tag,
            &ImageManifest {
                schema_version: 2,
                media_type: IMAGE_MANIFEST.into(),
                artifact_type: None,
                config,
                layers: vec![layer],
                annotations: Default::default(),
            },
        )
        .unwrap();
    format!("{host}/base:{n}")
}

fn remote(host: &str, repo: &str) -> rocforge::oci::Remote<'static> {
    rocforge::oci::Remote::new(
        reqwest::blocking::Client::new(),
        rocforge::oci::Repository::parse(&format!("{host}/{repo}")).unwrap(),
    )
}

#[test]
fn images_carry_their_sbom_and_provenance_as_referrers() {
    let Some(reg) = registry() else {
        return;
    };
    let host = reg.host();
    let fx = fixture();
    let base = push_base(&host, 1);
    let key = fx.root().join("keys/rocforge.key").display().to_string();
    let create = |component: &str, base: &str, tag: &str, fault: Option<&str>| -> Out {
        let mut env = vec![("ROCFORGE_SIGNING_KEY", key.as_str())];
        if let Some(f) = fault {
            env.push(("ROCFORGE_FAULT_AT", f));
        }
        fx.run_env(
            &env,
            &[
                "image",
                "create",
                component,
                "--arch",
                "gfx90c",
                "--runtime",
                "host",
                "--base",
                base,
                "--tag",
                tag,
                "--push",
                "--format",
                "json",
            ],
        )
    };
    let created = |o: &Out| -> String {
        assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
        let v: Value = serde_json::from_str(&o.stdout).unwrap();
        crate::common::schema::assert_matches_schema(fx.root(), "image", &v);
        v["digest"].as_str().unwrap().to_string()
    };
    let tag = format!("{host}/stack:1");
    let digest = created(&create("greet", &base, &tag, None));
    let pubkey = fx.pubkey();
    let verify = |what: &str| fx.run(&["verify", what, "--key", &pubkey, "--format", "json"]);

    // Pushed as the spec's fallback (distribution 2.8 answers 404 to /referrers/): both
    // manifests listed under sha256-<hex>, each with the image as its subject.
    let stack = remote(&host, "stack");
    assert_eq!(stack.get_referrers(&digest).unwrap(), None);
    let fallback = digest.replacen(':', "-", 1);
    let (_, index) = stack
        .get_manifest(&fallback)
        .unwrap()
        .expect("the referrers tag");
    let index: Value = serde_json::from_slice(&index).unwrap();
    let types: Vec<&str> = index["manifests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["artifactType"].as_str().unwrap())
        .collect();
    assert_eq!(
        types,
        ["application/spdx+json", "application/vnd.in-toto+json"]
    );
    let fetched = rocforge::attest::referrers::read_from_image(&stack, &digest).unwrap();
    assert_eq!(fetched.len(), 2);
    for f in &fetched {
        assert_eq!(f.subject.as_deref(), Some(digest.as_str()));
        assert!(
            f.signature
                .as_deref()
                .is_some_and(|s| s.contains("file:image."))
        );
    }
    let sbom: Value = serde_json::from_slice(&fetched[0].document).unwrap();
    assert_eq!(spdx_violations(&sbom), Vec::<String>::new(), "{sbom:#}");
    assert!(has_rel(
        &sbom,
        "SPDXRef-Subject",
        "CONTAINS",
        package_named(&sbom, "greet")["SPDXID"].as_str().unwrap()
    ));
    assert!(has_rel(
        &sbom,
        "SPDXRef-Subject",
        "CONTAINS",
        package_named(&sbom, "greetdoc")["SPDXID"].as_str().unwrap()
    ));
    let base_pkg = package_named(&sbom, &base);
    assert!(has_rel(
        &sbom,
        "SPDXRef-Subject",
        "DESCENDANT_OF",
        base_pkg["SPDXID"].as_str().unwrap()
    ));

    // verify oci://…: found, signed, about this image.
    let o = verify(&format!("oci://{tag}"));
    assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    let v: Value = serde_json::from_str(&o.stdout).unwrap();
    crate::common::schema::assert_matches_schema(fx.root(), "verify", &v);
    assert_eq!(v["digest"], digest.as_str());
    let docs = v["documents"].as_array().unwrap();
    assert_eq!(docs.len(), 2, "{v:#}");
    assert!(docs.iter().all(|d| d["subject"] == digest.as_str()));
    // By digest too; and a push again lists nothing twice.
    assert_eq!(verify(&format!("oci://{host}/stack@{digest}")).code, 0);
    assert_eq!(created(&create("greet", &base, &tag, None)), digest);
    let again = rocforge::attest::referrers::read_from_image(&stack, &digest).unwrap();
    assert_eq!(again.len(), 2);

    // Another image's SBOM listed for this one: refused, naming both digests.
    let other_tag = format!("{host}/stack:doc");
    let other = created(&create("greetdoc", &base, &other_tag, None));
    assert_ne!(other, digest);
    let theirs = rocforge::attest::referrers::read_from_image(&stack, &other).unwrap();
    let (_, mine) = stack.get_manifest(&fallback).unwrap().unwrap();
    let mut forged: Value = serde_json::from_slice(&mine).unwrap();
    forged["manifests"][0]["digest"] = theirs[0].manifest.clone().into();
    let (_, their_manifest) = stack.get_manifest(&theirs[0].manifest).unwrap().unwrap();
    forged["manifests"][0]["size"] = their_manifest.len().into();
    let put = |bytes: &[u8]| {
        stack
            .put_manifest_bytes(&fallback, rocforge::oci::IMAGE_INDEX, bytes)
            .unwrap()
    };
    put(&serde_json::to_vec(&forged).unwrap());
    let o = verify(&format!("oci://{tag}"));
    assert_eq!(o.code, 1, "{}\n{}", o.stdout, o.stderr);
    assert!(
        o.stderr.contains("is an SBOM for another image")
            && o.stderr.contains(&format!("it names {other}"))
            && o.stderr.contains(&format!("is {digest}"))
            && o.stderr.contains("help:"),
        "{}",
        o.stderr
    );
    put(&mine);
    assert_eq!(verify(&format!("oci://{tag}")).code, 0);

    // Killed after the first referrer manifest was pushed, before any was listed: the image
    // is pushed, and no referrer is claimed; a new push attaches both.
    let base2 = push_base(&host, 2);
    let tag3 = format!("{host}/stack:3");
    let o = create("greet", &base2, &tag3, Some("attest:1"));
    assert_ne!(o.code, 0, "the fault did not fire:\n{}", o.stderr);
    assert!(
        o.stderr.contains("rocforge-fault: attest 1"),
        "{}",
        o.stderr
    );
    let d3 = rocforge::oci::resolve_digest(&reqwest::blocking::Client::new(), &tag3).unwrap();
    assert_eq!(stack.get_manifest(&d3.replacen(':', "-", 1)).unwrap(), None);
    let o = verify(&format!("oci://{tag3}"));
    assert_eq!(o.code, 1);
    assert!(
        o.stderr.contains(&format!("no SBOM (looked for a referrer of type application/spdx+json (referrers API or tag {})", d3.replacen(':', "-", 1))),
        "{}",
        o.stderr
    );
    assert_eq!(created(&create("greet", &base2, &tag3, None)), d3);
    assert_eq!(verify(&format!("oci://{tag3}")).code, 0);
}

/// The signed index pins the release's images: `image create --push --record DIR` writes a
/// record, `index DIR` lists it, and `verify oci://… --index DIR` holds the tag to that digest.
/// A tag moved afterwards, an image the index never listed and a damaged record are refused.
#[test]
fn the_signed_index_pins_the_images_pushed_for_the_release() {
    let Some(reg) = registry() else {
        return;
    };
    let host = reg.host();
    let fx = fixture();
    let base = push_base(&host, 1);
    let key = fx.root().join("keys/rocforge.key").display().to_string();
    let dist = fx.root().join("dist");
    let dist_arg = dist.display().to_string();
    let create = |component: &str, tag: &str, more: &[&str]| -> Value {
        let mut args = vec![
            "image",
            "create",
            component,
            "--arch",
            "gfx90c",
            "--runtime",
            "host",
            "--base",
            &base,
            "--tag",
            tag,
            "--push",
            "--format",
            "json",
        ];
        args.extend_from_slice(more);
        let o = fx.run_env(&[("ROCFORGE_SIGNING_KEY", key.as_str())], &args);
        assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
        serde_json::from_str(&o.stdout).unwrap()
    };
    let tag = format!("{host}/stack:release");
    let digest = create("greet", &tag, &["--record", &dist_arg])["digest"]
        .as_str()
        .unwrap()
        .to_string();
    let records: Vec<_> = std::fs::read_dir(&dist)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(records.len(), 1, "{records:?}");
    let record = records[0].clone();
    assert!(
        record
            .to_string_lossy()
            .ends_with("_stack_release.image.json"),
        "{record:?}"
    );
    crate::common::schema::assert_matches_schema(fx.root(), "image-record", &json(&record));

    let o = fx.ok(&["index", &dist_arg, "--sign-key", &key]);
    assert!(
        o.stdout.contains("0 artifact(s), 1 image(s)"),
        "{}",
        o.stdout
    );
    let index = json(&dist.join("index.json"));
    crate::common::schema::assert_matches_schema(fx.root(), "index", &index);
    let image = &index["images"][0];
    assert_eq!(image["reference"], tag.as_str());
    assert_eq!(image["digest"], digest.as_str());
    assert_eq!(image["targets"], serde_json::json!(["gfx90c"]));
    let names: Vec<&str> = image["components"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["greetdoc", "greet"]);

    // The image's record is a delivery of the release: a publish sends it with the index.
    let o = fx.ok(&[
        "--format",
        "json",
        "publish",
        &dist_arg,
        "--to",
        "github://me/rocm@v1",
        "--dry-run",
    ]);
    let plan: Value = serde_json::from_str(&o.stdout).unwrap();
    let sent: Vec<(&str, &str)> = plan["uploads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| (u["kind"].as_str().unwrap(), u["file"].as_str().unwrap()))
        .collect();
    let record_name = record.file_name().unwrap().to_str().unwrap();
    assert!(sent.contains(&("image-record", record_name)), "{sent:?}");
    assert!(sent.contains(&("index", "index.json")), "{sent:?}");

    let pubkey = fx.pubkey();
    let verify = |what: &str| {
        fx.run(&[
            "verify",
            &format!("oci://{what}"),
            "--key",
            &pubkey,
            "--index",
            &dist_arg,
        ])
    };
    let o = verify(&tag);
    assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    assert!(
        o.stdout
            .contains(&format!("{tag}: listed by the signed index")),
        "{}",
        o.stdout
    );
    let o = fx.run(&[
        "verify",
        &format!("oci://{tag}"),
        "--key",
        &pubkey,
        "--index",
        &dist_arg,
        "--format",
        "json",
    ]);
    let v: Value = serde_json::from_str(&o.stdout).unwrap();
    crate::common::schema::assert_matches_schema(fx.root(), "verify", &v);
    assert!(v["index"].as_str().unwrap().ends_with("index.json"), "{v}");

    // The tag moved after the index was signed: refused, naming both digests.
    let moved = create("greetdoc", &tag, &["--force"])["digest"]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(moved, digest);
    let o = verify(&tag);
    assert_eq!(o.code, 1, "{}\n{}", o.stdout, o.stderr);
    assert!(
        o.stderr
            .contains(&format!("is {moved}, which the signed index"))
            && o.stderr.contains(&digest)
            && o.stderr.contains("help: the tag was moved"),
        "{}",
        o.stderr
    );
    // An image of a repository the index does not list.
    let other = format!("{host}/elsewhere:1");
    create("greet", &other, &[]);
    let o = verify(&other);
    assert_eq!(o.code, 1);
    assert!(o.stderr.contains("lists no image of"), "{}", o.stderr);
    // --index is for images.
    let o = fx.run(&[
        "verify",
        &record.display().to_string(),
        "--index",
        &dist_arg,
    ]);
    assert_eq!(o.code, 1);
    assert!(o.stderr.contains("--index checks an image"), "{}", o.stderr);

    // A damaged record: `index` refuses, naming it, and writes no index listing it.
    std::fs::write(
        &record,
        b"{\"schema\": \"rocforge.image-record/1\", \"digest\": \"sha256:zz\"}",
    )
    .unwrap();
    let o = fx.run(&["index", &dist_arg, "--sign-key", &key]);
    assert_eq!(o.code, 1, "{}", o.stdout);
    assert!(
        o.stderr.contains(&record.display().to_string())
            && o.stderr.contains("not an image record"),
        "{}",
        o.stderr
    );
}

fn set_mtime(path: &Path, secs: u64) {
    // A directory opens read-only; either way the handle may set the times.
    std::fs::File::open(path)
        .unwrap()
        .set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs))
        .unwrap();
}
