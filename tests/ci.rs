//! The generated release workflow: snapshot for the shipped catalog, the drift check, and the
//! level jobs of a catalog whose widest level needs more than one 256-entry matrix.

mod common;

use std::path::Path;
use std::process::Command;

use common::{manifest, ok, rocforge};
use rocforge::catalog::{Catalog, CatalogRoot};
use rocforge::ci::github::{Line, workflow};
use rocforge::ci::runners::Runners;

#[test]
fn release_workflow_for_the_shipped_catalog() {
    let c = Catalog::load(CatalogRoot::Embedded, None).unwrap();
    let wf = workflow(&[Line::from_catalog(&c)], &Runners::embedded());
    insta::assert_snapshot!(wf);
}

#[test]
fn committed_workflow_is_the_generated_one() {
    // Run elsewhere: the harness writes its private config file into the working directory.
    let cwd = tempfile::tempdir().unwrap();
    let o = rocforge(
        cwd.path(),
        &[
            "ci",
            "github",
            "--check",
            "--dir",
            manifest().to_str().unwrap(),
        ],
    );
    assert_eq!(
        o.code, 0,
        "the committed workflow is stale: run `rocforge ci github`\n{}",
        o.stdout
    );
}

fn copy_repo_files(to: &Path) {
    std::fs::copy(manifest().join("runners.toml"), to.join("runners.toml")).unwrap();
}

#[test]
fn check_prints_a_diff_and_fails_on_drift() {
    let dir = tempfile::tempdir().unwrap();
    copy_repo_files(dir.path());
    // Nothing generated yet: drift.
    let o = rocforge(dir.path(), &["ci", "github", "--check"]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(
        o.stderr.contains("run `rocforge ci github`"),
        "{}",
        o.stderr
    );
    let out = ok(dir.path(), &["ci", "github"]);
    assert!(
        out.contains("wrote ./.github/workflows/release.yml"),
        "{out}"
    );
    ok(dir.path(), &["ci", "github", "--check"]);
    // A hand edit is reported as a unified diff.
    let path = dir.path().join(".github/workflows/release.yml");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(
        &path,
        text.replace("timeout-minutes: 45", "timeout-minutes: 5"),
    )
    .unwrap();
    let o = rocforge(dir.path(), &["ci", "github", "--check"]);
    assert_eq!(o.code, 1);
    assert!(
        o.stdout.contains("--- ./.github/workflows/release.yml (committed)\n+++ ./.github/workflows/release.yml (generated)\n@@ "),
        "{}",
        o.stdout
    );
    assert!(
        o.stdout
            .contains("\n-    timeout-minutes: 5\n+    timeout-minutes: 45\n"),
        "{}",
        o.stdout
    );
    // runners.toml drives the GPU jobs.
    let runners = std::fs::read_to_string(dir.path().join("runners.toml")).unwrap();
    // The first [[gpu]] entry is gfx90c's.
    let registered = runners.replacen(
        "hours = 6\nregistered = false",
        "hours = 6\nregistered = true",
        1,
    );
    assert_ne!(registered, runners);
    std::fs::write(dir.path().join("runners.toml"), registered).unwrap();
    let o = rocforge(dir.path(), &["ci", "github", "--check"]);
    assert_eq!(o.code, 1);
    assert!(
        o.stdout
            .contains("+    runs-on: [self-hosted, linux, gfx90c]"),
        "{}",
        o.stdout
    );
}

/// The 300-leaf catalog of tests/cli.rs: level 0 needs two matrices.
#[test]
fn a_wide_level_gets_one_job_per_part() {
    let dir = tempfile::tempdir().unwrap();
    let st = Command::new("cp")
        .args(["-r", "--"])
        .arg(manifest().join("tests/fixtures/base/recipes"))
        .arg(manifest().join("tests/fixtures/base/patches"))
        .arg(dir.path())
        .status()
        .unwrap();
    assert!(st.success());
    copy_repo_files(dir.path());
    for i in 0..300 {
        std::fs::write(
            dir.path().join(format!("recipes/line-1.0/leaf-{i:03}.toml")),
            format!(
                "name = \"leaf-{i:03}\"\nversion = \"1\"\nsummary = \"s\"\nlicense = \"MIT\"\n\n[source]\npath = \"src\"\n\n[build]\nsystem = \"cmake\"\narch-vars = [\"GPU_TARGETS\"]\n"
            ),
        )
        .unwrap();
    }
    std::fs::write(
        dir.path().join("recipes/line-1.0/top.toml"),
        "name = \"top\"\nversion = \"1\"\nsummary = \"s\"\nlicense = \"MIT\"\ndepends = [\"leaf-000\"]\n\n[source]\npath = \"src\"\n\n[build]\nsystem = \"cmake\"\narch-vars = [\"GPU_TARGETS\"]\n",
    )
    .unwrap();
    ok(dir.path(), &["--recipes", "recipes", "ci", "github"]);
    let wf = std::fs::read_to_string(dir.path().join(".github/workflows/release.yml")).unwrap();
    assert!(wf.contains("\n  build-0:\n") && wf.contains("\n  build-0-part-1:\n"));
    assert!(wf.contains("\n  build-1:\n") && !wf.contains("build-1-part-1"));
    assert!(wf.contains("for slot in 0:0 0:1 1:0; do"), "slots");
    assert!(wf.contains("needs: [plan, images, build-0, build-0-part-1]"));
    assert!(wf.contains("matrix: ${{ fromJSON(needs.plan.outputs.level_0_part_1) }}"));
    // Every (level, part) the plan emits has a job and an output.
    let m: serde_json::Value = serde_json::from_str(&ok(
        dir.path(),
        &["--recipes", "recipes", "plan", "--format", "github-matrix"],
    ))
    .unwrap();
    for l in m["levels"].as_array().unwrap() {
        let out = format!("level_{}_part_{}", l["level"], l["part"]);
        assert!(
            wf.contains(&format!(
                "      {out}: ${{{{ steps.plan.outputs.{out} }}}}\n"
            )),
            "{out}"
        );
        assert!(l["matrix"]["include"].as_array().unwrap().len() <= 256);
    }
}
