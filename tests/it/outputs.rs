//! Every `--format json` output a command gives without a build or the network matches the
//! schema `rocforge schema NAME` publishes for it (the outputs of builds, installs, fetches,
//! test runs and rebuilds are checked in their own areas' tests).

use serde_json::Value;

use crate::common::rocforge;
use crate::common::schema::{assert_matches_schema, schema_error};

#[test]
fn outputs_match_their_schemas() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let empty = d.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let empty = empty.to_str().unwrap();
    let prefix = d.join("prefix");
    let prefix = prefix.to_str().unwrap();
    let repo = env!("CARGO_MANIFEST_DIR");
    // An editable catalog: the built-in one's lock cannot be checked as a file.
    let o = rocforge(d, &["catalog", "export", "catalog"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    // A machine without a GPU, and a signed file.
    let no_gpu = d.join("no-gpu");
    std::fs::create_dir_all(&no_gpu).unwrap();
    let no_gpu = no_gpu.to_str().unwrap();
    let o = rocforge(d, &["key", "generate", "--out", "keys"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    std::fs::write(d.join("signed.txt"), "hello\n").unwrap();
    let o = rocforge(
        d,
        &["sign", "signed.txt", "--sign-key", "keys/rocforge.key"],
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    // A release directory with an index of no artifacts: what a publish needs.
    std::fs::create_dir_all(d.join("release")).unwrap();
    let o = rocforge(d, &["index", "release"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let cases: &[(&str, &[&str])] = &[
        ("schemas", &["schema"]),
        ("arches", &["arch", "list"]),
        ("arch", &["arch", "show", "gfx90c:xnack-"]),
        ("list", &["list"]),
        ("check", &["check"]),
        (
            "lock-check",
            &["--recipes", "catalog/recipes", "lock", "--check"],
        ),
        ("store", &["store", "list"]),
        ("installed", &["list", "--installed", "--prefix", prefix]),
        ("coverage", &["inspect", empty, "--against", "gfx90c"]),
        (
            "verdict",
            &[
                "inspect",
                empty,
                "--against",
                "gfx90c",
                "--component",
                "hiprand",
            ],
        ),
        ("runners", &["ci", "runners", "--dir", repo]),
        (
            "nix-export",
            &["nix", "export", "--arch", "gfx90c", "--out", "nix"],
        ),
        // The checks fail or pass with this machine's disk: either way they are a report.
        ("doctor", &["doctor", "--runtime", "host"]),
        ("device", &["detect", "--sysfs-root", no_gpu]),
        ("hash-input", &["plan", "rocrand", "--explain", "rocrand"]),
        ("inspect", &["inspect", empty]),
        (
            "test-plan",
            &[
                "test",
                "rocprim",
                "--dry-run",
                "--arch",
                "gfx90c",
                "--sysfs-root",
                no_gpu,
            ],
        ),
        (
            "publish-plan",
            &[
                "publish",
                "release",
                "--to",
                "github://me/repo@v1",
                "--dry-run",
            ],
        ),
        (
            "verify",
            &["verify", "signed.txt", "--key", "keys/rocforge.pub"],
        ),
        // Failures print their errors, one document whatever the command.
        ("error", &["plan", "rocrnad"]),
        ("error", &["publish", empty, "--dry-run"]),
    ];
    for (name, args) in cases {
        let mut argv = vec!["--format", "json"];
        argv.extend_from_slice(args);
        let o = rocforge(d, &argv);
        let doc: Value = serde_json::from_str(&o.stdout)
            .unwrap_or_else(|e| panic!("{args:?}: {e}\n{}\n{}", o.stdout, o.stderr));
        assert_matches_schema(d, name, &doc);
    }
    let o = rocforge(d, &["--format", "github-matrix", "plan"]);
    let doc: Value = serde_json::from_str(&o.stdout)
        .unwrap_or_else(|e| panic!("github-matrix: {e}\n{}\n{}", o.stdout, o.stderr));
    assert_matches_schema(d, "github-matrix", &doc);
}

/// The check above can fail: a field gone, a type changed or an unknown identifier is found,
/// nested under a `$ref`.
#[test]
fn a_document_unlike_its_schema_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let o = rocforge(d, &["--format", "json", "arch", "show", "gfx90c"]);
    let doc: Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(schema_error(d, "arch", &doc), Ok(()));
    let mut gone = doc.clone();
    gone["arch"].as_object_mut().unwrap().remove("wavefront");
    let e = schema_error(d, "arch", &gone).unwrap_err();
    assert!(e.contains("wavefront"), "{e}");
    let mut retyped = doc.clone();
    retyped["arch"]["xnack"] = "yes".into();
    assert!(schema_error(d, "arch", &retyped).is_err());
    let mut renamed = doc;
    renamed["schema"] = "rocforge.arch/2".into();
    assert!(schema_error(d, "arch", &renamed).is_err());
}

/// The JSON documents the snapshot tests record (an inspected HIP library, coverage tables,
/// recorded machines, plans) match the schemas of their identifiers: outputs this machine
/// may not be able to make (no hipcc), checked as recorded.
#[test]
fn recorded_outputs_match_their_schemas() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let o = rocforge(d, &["--format", "json", "schema"]);
    let listing: Value = serde_json::from_str(&o.stdout).unwrap();
    let name_of = |id: &str| -> Option<String> {
        listing["formats"]
            .as_array()?
            .iter()
            .find(|f| f["schema"] == id)
            .and_then(|f| f["name"].as_str())
            .map(String::from)
    };
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/snapshots");
    let mut checked = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        // insta's header, then the recorded text.
        let Some((_, body)) = text
            .strip_prefix("---\n")
            .and_then(|t| t.split_once("\n---\n"))
        else {
            continue;
        };
        let Ok(doc) = serde_json::from_str::<Value>(body) else {
            continue;
        };
        let Some(id) = doc["schema"]
            .as_str()
            .filter(|s| s.starts_with("rocforge."))
        else {
            continue;
        };
        let name = name_of(id).unwrap_or_else(|| panic!("{}: no schema for {id}", path.display()));
        assert_matches_schema(d, &name, &doc);
        checked.push(name);
    }
    checked.sort();
    checked.dedup();
    for name in ["inspect", "coverage", "device", "plan", "github-matrix"] {
        assert!(checked.iter().any(|c| c == name), "{name}: {checked:?}");
    }
}
