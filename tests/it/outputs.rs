//! Every `--format json` output a command gives without a build or the network matches the
//! schema `rocforge schema NAME` publishes for it (the outputs of builds, installs and fetches
//! are checked in their own areas' tests).

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
    ];
    for (name, args) in cases {
        let mut argv = vec!["--format", "json"];
        argv.extend_from_slice(args);
        let o = rocforge(d, &argv);
        let doc: Value = serde_json::from_str(&o.stdout)
            .unwrap_or_else(|e| panic!("{args:?}: {e}\n{}\n{}", o.stdout, o.stderr));
        assert_matches_schema(d, name, &doc);
    }
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
