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
    // runners.toml decides which GPU jobs run when no runner-listing token is set.
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
        o.stdout.contains("+          registered=\" gfx90c \""),
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

/// `ci runners` against a server speaking GitHub's runners endpoint: pages followed, the token
/// sent and never printed, a label ready only when a runner with self-hosted, linux and the label
/// is online, and runners.toml alone when no token is set.
#[test]
fn runners_come_from_the_api_when_a_token_is_set() {
    let dir = tempfile::tempdir().unwrap();
    copy_repo_files(dir.path());
    std::fs::write(
        dir.path().join("runners.toml"),
        std::fs::read_to_string(dir.path().join("runners.toml"))
            .unwrap()
            .replace("registered = true", "registered = false"),
    )
    .unwrap();
    let runner = |id: usize, status: &str, labels: &[&str]| {
        serde_json::json!({
            "id": id, "name": format!("r{id}"), "os": "Linux", "status": status, "busy": false,
            "labels": labels.iter().map(|l| serde_json::json!({"id": 1, "name": l, "type": "custom"})).collect::<Vec<_>>(),
        })
    };
    // 100 filler runners on page 1, the interesting ones on page 2.
    let mut page1: Vec<serde_json::Value> = (0..100)
        .map(|i| {
            runner(
                i,
                "online",
                &["self-hosted", "Linux", "X64", "rocforge-large"],
            )
        })
        .collect();
    page1[0] = runner(0, "offline", &["self-hosted", "linux", "gfx902"]);
    let page2 = vec![
        runner(100, "online", &["self-hosted", "Linux", "X64", "gfx90c"]),
        runner(101, "online", &["self-hosted", "gfx902"]),
    ];
    let server = common::JsonServer::start(move |req| {
        if req.headers.get("authorization").map(String::as_str) != Some("Bearer s3cret-token") {
            return (401, r#"{"message":"Bad credentials"}"#.into());
        }
        let page = if req.target.contains("page=2") {
            &page2
        } else {
            &page1
        };
        if !req
            .target
            .starts_with("/repos/me/rocforge/actions/runners?")
        {
            return (404, r#"{"message":"Not Found"}"#.into());
        }
        (
            200,
            serde_json::json!({"total_count": 102, "runners": page}).to_string(),
        )
    });
    let run = |token: Option<&str>, args: &[&str]| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_rocforge"));
        cmd.current_dir(dir.path())
            .args(["ci", "runners"])
            .args(args)
            .env("ROCFORGE_GITHUB_API", server.url())
            .env_remove("GITHUB_TOKEN")
            .env_remove("ROCFORGE_RUNNERS_TOKEN");
        if let Some(t) = token {
            cmd.env("ROCFORGE_RUNNERS_TOKEN", t);
        }
        let o = cmd.output().unwrap();
        (
            o.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };

    let (code, out, err) = run(
        Some("s3cret-token"),
        &["--repo", "me/rocforge", "--format", "json"],
    );
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["source"], "github-api");
    assert_eq!(v["gpu_ready"], serde_json::json!(["gfx90c"]));
    let label = |l: &str| {
        v["labels"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["label"] == l)
            .unwrap()
            .clone()
    };
    assert_eq!(
        label("gfx902")["online"],
        0,
        "the online gfx902 runner lacks `linux`"
    );
    assert_eq!(label("gfx902")["offline"], 1);
    assert_eq!(label("rocforge-large")["online"], 99);
    assert!(
        err.contains("runners.toml says gfx90c is not registered"),
        "{err}"
    );
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2, "two pages: {reqs:?}");
    assert!(reqs[1].target.ends_with("per_page=100&page=2"), "{reqs:?}");
    assert!(!out.contains("s3cret") && !err.contains("s3cret"));

    // A refused token: the error names the URL and says which rights are needed.
    let (code, out, err) = run(Some("wrong"), &["--repo", "me/rocforge"]);
    assert_eq!(code, 1, "{out}");
    assert!(err.contains("/repos/me/rocforge/actions/runners"), "{err}");
    assert!(err.contains("401"), "{err}");
    assert!(!err.contains("wrong"), "{err}");

    // No token: runners.toml decides (all unregistered here), and --repo without one is an error.
    let (code, out, _) = run(None, &["--format", "json"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["source"], "runners.toml");
    assert_eq!(v["gpu_ready"], serde_json::json!([]));
    let (code, _, err) = run(None, &["--repo", "me/rocforge"]);
    assert_eq!(code, 1);
    assert!(err.contains("ROCFORGE_RUNNERS_TOKEN"), "{err}");
}
