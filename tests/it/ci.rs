//! The generated release workflow: snapshot for the shipped catalog, the drift check, and the
//! level jobs of a catalog whose widest level needs more than one 256-entry matrix.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::{manifest, ok, rocforge};
use rocforge::catalog::{Catalog, CatalogRoot};
use rocforge::ci::github::{Line, workflow};
use rocforge::ci::runners::Runners;

#[test]
fn release_workflow_for_the_shipped_catalog() {
    let c = Catalog::load(CatalogRoot::Embedded, None).unwrap();
    let wf = workflow(&[Line::from_catalog(&c)], &Runners::embedded()).unwrap();
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
    // Path sources are digested when planned: the tree must exist.
    std::fs::create_dir_all(dir.path().join("recipes/line-1.0/src")).unwrap();
    std::fs::write(dir.path().join("recipes/line-1.0/src/CMakeLists.txt"), "").unwrap();
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
    // The fixture's builder image is localhost/: made on each runner, so no images job.
    assert!(wf.contains("needs: [plan, build-0, build-0-part-1]"));
    assert!(!wf.contains("\n  images:\n"));
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

/// A build longer than a hosted job runs in rounds: each job stops at the time limit (exit 75,
/// having pushed a signed checkpoint) and leaves a marker; a gate job turns the markers into the
/// next round's matrix; the next job continues those builds; one still unfinished in the last
/// round fails with what to change. The generated steps run here against a fake rocforge.
#[test]
fn long_hosted_builds_continue_in_chained_jobs() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let st = Command::new("cp")
        .args(["-r", "--"])
        .arg(manifest().join("tests/fixtures/base/recipes"))
        .arg(manifest().join("tests/fixtures/base/patches"))
        .arg(d)
        .status()
        .unwrap();
    assert!(st.success());
    copy_repo_files(d);
    std::fs::create_dir_all(d.join("recipes/line-1.0/src")).unwrap();
    std::fs::write(d.join("recipes/line-1.0/src/CMakeLists.txt"), "").unwrap();
    // 6 hours on the reference machine: 12 on a hosted runner, three jobs of 5h30m.
    std::fs::write(
        d.join("recipes/line-1.0/slow.toml"),
        "name = \"slow\"\nversion = \"1\"\nsummary = \"s\"\nlicense = \"MIT\"\n\n[source]\npath = \"src\"\n\n[build]\nsystem = \"cmake\"\narch-vars = [\"GPU_TARGETS\"]\n\n[resources]\nhours = 6.0\ndisk = \"20GiB\"\n",
    )
    .unwrap();
    std::fs::write(
        d.join("recipes/line-1.0/top.toml"),
        "name = \"top\"\nversion = \"1\"\nsummary = \"s\"\nlicense = \"MIT\"\ndepends = [\"slow\"]\n\n[source]\npath = \"src\"\n\n[build]\nsystem = \"cmake\"\narch-vars = [\"GPU_TARGETS\"]\n",
    )
    .unwrap();
    ok(d, &["--recipes", "recipes", "ci", "github"]);
    let text = std::fs::read_to_string(d.join(".github/workflows/release.yml")).unwrap();
    let wf: serde_json::Value = serde_yaml_ng::from_str(&text).unwrap();
    let j = jobs(&wf);
    for id in [
        "build-0",
        "build-0-unfinished",
        "build-0-round-2",
        "build-0-round-2-unfinished",
        "build-0-round-3",
    ] {
        assert!(j.contains_key(id), "{id} missing: {:?}", j.keys());
    }
    assert!(!j.contains_key("build-0-round-4"));
    assert!(
        !j.contains_key("pr-build-0-unfinished"),
        "pull requests do not chain"
    );
    assert_eq!(
        wf["jobs"]["build-0-round-2"]["strategy"]["matrix"],
        "${{ fromJSON(needs.build-0-unfinished.outputs.matrix) }}"
    );
    let needs = |id: &str| -> Vec<String> {
        wf["jobs"][id]["needs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_str().unwrap().to_string())
            .collect()
    };
    assert!(needs("build-0-round-3").contains(&"build-0-round-2-unfinished".to_string()));
    // The next level waits for every round of this one.
    for id in [
        "build-0-round-2",
        "build-0-round-3",
        "build-0-round-2-unfinished",
    ] {
        assert!(
            needs("build-1").contains(&id.to_string()),
            "{:?}",
            needs("build-1")
        );
    }
    let m: serde_json::Value = serde_json::from_str(&ok(
        d,
        &[
            "--recipes",
            "recipes",
            "plan",
            "--format",
            "github-matrix",
            "--arch",
            "gfx90c",
        ],
    ))
    .unwrap();
    let level0 = &m["levels"][0]["matrix"];
    let slow = level0["include"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["component"] == "slow")
        .unwrap();
    assert_eq!(slow["runner"], "ubuntu-24.04");
    assert_eq!(slow["rounds"], 3);
    assert_eq!(slow["free_disk"], true);

    // Round 1 on the hosted runner: the build gets the time limit; exit 75 leaves a marker and
    // the step succeeds, so the job does.
    let bin = d.join("bin");
    std::fs::create_dir(&bin).unwrap();
    write_exe(
        &bin.join("rocforge"),
        "#!/bin/bash\nif [ \"$1\" = key ]; then mkdir -p \"$4\"; echo RW > \"$4/rocforge.key\"; echo RWpub; exit 0; fi\nprintf '%s\\n' \"$@\" > \"$PWD/build-args\"\nexit \"$FAKE_EXIT\"\n",
    );
    let build = |job: &str, exit: &str| {
        let work = d.join(format!("work-{job}-{exit}"));
        std::fs::create_dir_all(&work).unwrap();
        let o = run_step(
            &step_script(&wf, job, "Build "),
            &work,
            &bin,
            &[
                ("COMPONENT", "slow"),
                ("TARGETS", "gfx90c"),
                ("RUNNER", "ubuntu-24.04"),
                ("RELEASE", "line-1.0"),
                ("CACHE", "oci://ghcr.io/me/rocforge-cache"),
                ("CACHE_KEY", "secret"),
                ("ROCFORGE_KEY_PASSWORD", ""),
                ("FAKE_EXIT", exit),
            ],
        );
        (o, work)
    };
    let (o, work) = build("build-0", "75");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let args = std::fs::read_to_string(work.join("build-args")).unwrap();
    assert!(args.contains("--time-limit\n5h30m\n"), "{args}");
    assert!(work.join("unfinished/slow").is_file());
    assert_eq!(
        uses(
            &wf,
            "build-0",
            "actions/upload-artifact",
            Some(("name", "unfinished-0-0-0-${{ matrix.component }}"))
        )
        .len(),
        1
    );
    // A build that finishes leaves no marker; one that fails fails the step.
    let (o, work) = build("build-0", "0");
    assert!(o.status.success());
    assert!(!work.join("unfinished").exists());
    let (o, _) = build("build-0", "1");
    assert_eq!(o.status.code(), Some(1));

    // The gate: the plan's matrix narrowed to the unfinished builds, or nothing.
    let gate = step_script(&wf, "build-0-unfinished", "Unfinished builds");
    assert_eq!(
        wf["jobs"]["build-0-unfinished"]["steps"][0]["with"]["pattern"],
        "unfinished-0-0-0-*"
    );
    let matrix = level0.to_string();
    let left = |markers: &[&str]| -> String {
        let work = d.join(format!("gate-{}", markers.len()));
        std::fs::create_dir_all(work.join("unfinished")).unwrap();
        for m in markers {
            std::fs::write(work.join("unfinished").join(m), "").unwrap();
        }
        let out = work.join("github-output");
        let o = run_step(
            &gate,
            &work,
            &bin,
            &[
                ("MATRIX", &matrix),
                ("GITHUB_OUTPUT", out.to_str().unwrap()),
            ],
        );
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        std::fs::read_to_string(out).unwrap()
    };
    let one = left(&["slow"]);
    let v: serde_json::Value =
        serde_json::from_str(one.trim().strip_prefix("matrix=").unwrap()).unwrap();
    let names: Vec<&str> = v["include"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["component"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["slow"]);
    assert_eq!(left(&[]).trim(), "matrix=");

    // The last round: still unfinished is a failure that says what to change.
    let (o, work) = build("build-0-round-3", "75");
    assert_eq!(o.status.code(), Some(1));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("slow is not finished after 3 job(s) of 5h30m: raise [hosted] rounds"),
        "{out}"
    );
    assert!(!work.join("unfinished").exists());
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

/// The committed release workflow (the generated one: `committed_workflow_is_the_generated_one`),
/// parsed as GitHub reads it.
fn shipped_workflow() -> serde_json::Value {
    let text = std::fs::read_to_string(manifest().join(".github/workflows/release.yml")).unwrap();
    serde_yaml_ng::from_str(&text).unwrap()
}

fn jobs(wf: &serde_json::Value) -> &serde_json::Map<String, serde_json::Value> {
    wf["jobs"].as_object().unwrap()
}

/// The `run:` script of the first step of `job` whose name starts with `name`.
fn step_script(wf: &serde_json::Value, job: &str, name: &str) -> String {
    wf["jobs"][job]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"].as_str().is_some_and(|n| n.starts_with(name)))
        .and_then(|s| s["run"].as_str())
        .unwrap_or_else(|| panic!("{job} has no step {name:?} with a script"))
        .to_string()
}

/// The indexes of `job`'s steps that use `action` (with `with.<key>` = `value` when given).
fn uses(wf: &serde_json::Value, job: &str, action: &str, with: Option<(&str, &str)>) -> Vec<usize> {
    wf["jobs"][job]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .filter(|(_, s)| {
            s["uses"]
                .as_str()
                .is_some_and(|u| u.starts_with(&format!("{action}@")))
                && with.is_none_or(|(k, v)| s["with"][k].as_str() == Some(v))
        })
        .map(|(i, _)| i)
        .collect()
}

/// A step script run by bash in `dir` with `env`, PATH led by `path` (fakes of gh, rocforge).
fn run_step(script: &str, dir: &Path, path: &Path, env: &[(&str, &str)]) -> std::process::Output {
    let mut cmd = Command::new("bash");
    cmd.args(["-c", script])
        .current_dir(dir)
        .env(
            "PATH",
            format!("{}:{}", path.display(), std::env::var("PATH").unwrap()),
        )
        .env("RUNNER_TEMP", dir.join("runner-temp"))
        .env("GITHUB_ENV", dir.join("github-env"))
        .env("GITHUB_STEP_SUMMARY", dir.join("summary.md"))
        .env("HOME", dir)
        .env("ROCFORGE_STATE", dir.join("state"));
    std::fs::create_dir_all(dir.join("runner-temp")).unwrap();
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

fn write_exe(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// The top-level `&&` terms of a GitHub expression.
fn conjuncts(expr: &str) -> Vec<String> {
    let (mut out, mut depth, mut cur, mut quoted) = (Vec::new(), 0i32, String::new(), false);
    let b = expr.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let c = b[i] as char;
        match c {
            '\'' => quoted = !quoted,
            '(' if !quoted => depth += 1,
            ')' if !quoted => depth -= 1,
            _ => {}
        }
        if !quoted && depth == 0 && expr[i..].starts_with(" && ") {
            out.push(cur.trim().to_string());
            cur.clear();
            i += 4;
            continue;
        }
        cur.push(c);
        i += 1;
    }
    out.push(cur.trim().to_string());
    out
}

/// Every job that may land on a self-hosted runner (its `runs-on` names `self-hosted` or a
/// label of runners.toml, or is an expression such as a matrix's runner) is guarded so a
/// pull_request event cannot start it; pull-request build jobs run on the hosted label only,
/// and the plan job leaves what needs a self-hosted runner out of their matrices.
#[test]
fn pull_requests_never_reach_self_hosted_runners() {
    use rocforge::ci::github::TRUSTED;
    // The guard itself: only push (main or a v tag) and manual dispatch, never pull_request.
    let events: Vec<&str> = TRUSTED
        .match_indices("github.event_name == '")
        .map(|(i, m)| {
            let rest = &TRUSTED[i + m.len()..];
            &rest[..rest.find('\'').unwrap()]
        })
        .collect();
    assert_eq!(events, ["push", "workflow_dispatch"]);
    assert!(!TRUSTED.contains("!=") && !TRUSTED.contains('!'));

    let runners = Runners::embedded();
    let mut self_hosted: Vec<&str> = runners.self_hosted_labels();
    self_hosted.push("self-hosted");
    assert!(self_hosted.contains(&"rocforge-large"));
    let wf = shipped_workflow();
    let mut guarded = Vec::new();
    for (id, job) in jobs(&wf) {
        let runs_on: Vec<String> = match &job["runs-on"] {
            serde_json::Value::String(s) => vec![s.clone()],
            serde_json::Value::Array(a) => a.iter().map(|v| v.as_str().unwrap().into()).collect(),
            other => panic!("{id}: runs-on {other}"),
        };
        let may_be_self_hosted = runs_on
            .iter()
            .any(|l| l.contains("${{") || self_hosted.contains(&l.as_str()));
        if !may_be_self_hosted {
            assert_eq!(runs_on, std::slice::from_ref(&runners.hosted.label), "{id}");
            continue;
        }
        let cond = job["if"]
            .as_str()
            .unwrap_or_else(|| panic!("{id} runs on {runs_on:?} without an if:"));
        let terms = conjuncts(cond.trim_start_matches("${{").trim_end_matches("}}").trim());
        assert!(
            terms.iter().any(|t| t == TRUSTED),
            "{id} runs on {runs_on:?} but its if: does not require a trusted event: {cond}"
        );
        guarded.push(id.as_str());
    }
    assert!(
        guarded.contains(&"build-0") && guarded.contains(&"test-gfx90c"),
        "{guarded:?}"
    );
    for (id, job) in jobs(&wf)
        .iter()
        .filter(|(id, _)| id.starts_with("pr-build-"))
    {
        assert_eq!(job["runs-on"], runners.hosted.label.as_str(), "{id}");
        assert!(
            job["if"]
                .as_str()
                .unwrap()
                .contains("github.event_name == 'pull_request'")
        );
    }

    // The plan job's filter, on the shipped catalog's real plans. PyTorch (60 GiB, 6 GiB a
    // compile job) goes to rocforge-large, so it and what is above it stay out of a pull
    // request's jobs; rocBLAS fits a hosted runner once its preinstalled SDKs are removed, in
    // two chained jobs on rocm-6.4.4's hints.
    if !common::require("jq", common::which("jq")) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let filtered = |release: &str| -> (serde_json::Value, String) {
        let matrix = ok(
            dir.path(),
            &[
                "--locked",
                "--release",
                release,
                "plan",
                "--format",
                "github-matrix",
            ],
        );
        let plan = ok(
            dir.path(),
            &["--locked", "--release", release, "plan", "--format", "json"],
        );
        std::fs::write(dir.path().join("matrix.json"), &matrix).unwrap();
        std::fs::write(dir.path().join("plan.json"), &plan).unwrap();
        let script = step_script(&wf, "plan", "Plan, one matrix per dependency level");
        let filter = script
            .lines()
            .find(|l| l.trim_start().starts_with("jq --arg hosted"))
            .expect("the plan step filters the matrix for pull requests");
        let o = run_step(
            filter.trim(),
            dir.path(),
            dir.path(),
            &[("HOSTED", &runners.hosted.label)],
        );
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let pr: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.path().join("matrix.pr.json")).unwrap())
                .unwrap();
        (pr, plan)
    };
    let skipped_of = |pr: &serde_json::Value| -> Vec<String> {
        pr["skipped"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect()
    };
    // The default line (debian-6.4, the one the workflow builds) fits hosted runners but for
    // PyTorch and torchvision, whose build needs runners.toml's large runner.
    let (pr, _) = filtered("debian-6.4");
    assert_eq!(skipped_of(&pr), ["torch", "torchvision"]);
    let (pr, plan) = filtered("rocm-6.4.4");
    let kept: Vec<&serde_json::Value> = pr["levels"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|l| l["matrix"]["include"].as_array().unwrap())
        .collect();
    assert!(!kept.is_empty());
    assert!(
        kept.iter()
            .all(|e| e["runner"] == runners.hosted.label.as_str()),
        "{kept:?}"
    );
    let rocblas = kept.iter().find(|e| e["component"] == "rocblas").unwrap();
    assert_eq!(
        (rocblas["rounds"].as_u64(), rocblas["free_disk"].as_bool()),
        (Some(2), Some(true))
    );
    let skipped = skipped_of(&pr);
    for c in ["torch", "torchvision"] {
        assert!(
            skipped.iter().any(|s| s == c),
            "{c} not skipped: {skipped:?}"
        );
    }
    let skipped: Vec<&str> = skipped.iter().map(String::as_str).collect();
    // Nothing kept depends on something skipped.
    let p: serde_json::Value = serde_json::from_str(&plan).unwrap();
    for e in &kept {
        let step = p["steps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["component"] == e["component"])
            .unwrap();
        for d in step["depends"].as_array().unwrap() {
            assert!(!skipped.contains(&d.as_str().unwrap()), "{e} needs {d}");
        }
    }
}

/// rocforge is built by the plan job only, and only when the Actions cache has no binary for
/// the same sources; every other job that runs it downloads that build.
#[test]
fn rocforge_is_built_once_and_cached_between_jobs() {
    let wf = shipped_workflow();
    let plan = &wf["jobs"]["plan"]["steps"];
    let cache = plan
        .as_array()
        .unwrap()
        .iter()
        .find(|s| {
            s["uses"]
                .as_str()
                .is_some_and(|u| u.starts_with("actions/cache@"))
        })
        .expect("the plan job restores rocforge from the Actions cache");
    assert_eq!(cache["with"]["path"], "target/release/rocforge");
    let key = cache["with"]["key"].as_str().unwrap();
    // Everything compiled into the binary: the workspace's sources, and what include_dir
    // embeds, which crates/make/build.rs names for cargo.
    let build_rs =
        std::fs::read_to_string(common::manifest().join("crates/make/build.rs")).unwrap();
    let embedded = build_rs
        .split_once("for path in [")
        .and_then(|(_, rest)| rest.split_once(']'))
        .map(|(list, _)| list)
        .expect("crates/make/build.rs lists what the binary embeds");
    let mut inputs: Vec<String> = embedded
        .split(',')
        .map(|p| p.trim().trim_matches('"'))
        .filter(|p| !p.is_empty())
        .map(|p| {
            if common::manifest().join(p).is_dir() {
                format!("{p}/**")
            } else {
                p.to_string()
            }
        })
        .collect();
    assert!(inputs.len() >= 4, "{inputs:?}");
    inputs.extend(
        [
            "Cargo.lock",
            "Cargo.toml",
            "crates/**",
            "src/**",
            "runners.toml",
        ]
        .map(String::from),
    );
    for input in inputs {
        assert!(key.contains(&format!("'{input}'")), "{input} not in {key}");
    }
    let build = plan
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "Build rocforge")
        .unwrap();
    assert_eq!(
        build["if"].as_str().unwrap(),
        format!(
            "steps.{}.outputs.cache-hit != 'true'",
            cache["id"].as_str().unwrap()
        )
    );
    assert_eq!(
        uses(
            &wf,
            "plan",
            "actions/upload-artifact",
            Some(("name", "rocforge"))
        )
        .len(),
        1
    );
    for (id, job) in jobs(&wf) {
        if serde_json::to_string(job).unwrap().contains("cargo build") {
            assert!(
                ["plan", "resign"].contains(&id.as_str()),
                "{id} builds rocforge"
            );
            continue;
        }
        // A step that runs rocforge (not one that only names it in a message).
        let runs_rocforge = job["steps"].as_array().unwrap().iter().any(|s| {
            s["run"].as_str().is_some_and(|r| {
                r.split_whitespace()
                    .any(|t| t == "rocforge" || t.ends_with("(rocforge"))
            })
        });
        if runs_rocforge {
            assert_eq!(
                uses(
                    &wf,
                    id,
                    "actions/download-artifact",
                    Some(("name", "rocforge"))
                )
                .len(),
                1,
                "{id} runs rocforge without the plan job's build"
            );
        }
    }
}

/// Without `[cache] trusted-keys` or a ROCFORGE_CACHE_KEY secret (the shipped runners.toml),
/// each trusted build job signs its pushes with a key of its own and every later job of the
/// run trusts those keys: the generated build and trust steps, run with a rocforge that
/// records its build arguments.
#[test]
fn later_jobs_reuse_the_cache_without_a_configured_key() {
    assert!(Runners::embedded().cache.trusted_keys.is_empty());
    let wf = shipped_workflow();
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    // `key generate` is the real one; a build records its arguments and that its key exists.
    write_exe(
        &bin.join("rocforge"),
        &format!(
            "#!/bin/bash\nset -eu\nif [ \"$1\" = key ]; then exec {} \"$@\"; fi\nprintf '%s\\n' \"$@\" > \"$PWD/build-args\"\nfor a in \"$@\"; do if [ -f \"$a\" ]; then head -c 20 \"$a\" > \"$PWD/key-seen\"; fi; done\n",
            env!("CARGO_BIN_EXE_rocforge")
        ),
    );
    let script = step_script(&wf, "build-0", "Build ");
    let o = run_step(
        &script,
        dir.path(),
        &bin,
        &[
            ("COMPONENT", "rocprim"),
            ("TARGETS", "gfx90c"),
            ("RUNNER", "ubuntu-24.04"),
            ("RELEASE", "debian-6.4"),
            ("CACHE", "oci://ghcr.io/me/rocforge-cache"),
            ("CACHE_KEY", ""),
            ("ROCFORGE_KEY_PASSWORD", ""),
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let args = std::fs::read_to_string(dir.path().join("build-args")).unwrap();
    assert!(args.contains("--cache-key\n"), "{args}");
    assert!(
        std::fs::read_to_string(dir.path().join("key-seen"))
            .unwrap()
            .starts_with("untrusted comment"),
        "the build got a secret key file"
    );
    assert!(
        !dir.path().join("runner-temp/cache-keys").exists(),
        "the secret key outlives the step"
    );
    let public = std::fs::read_to_string(dir.path().join("cache-pub/rocprim.pub")).unwrap();
    assert!(
        public.trim().starts_with("RW") && public.trim().len() == 56,
        "{public}"
    );
    assert_eq!(
        uses(
            &wf,
            "build-0",
            "actions/upload-artifact",
            Some(("name", "cache-pub-${{ matrix.component }}-0"))
        )
        .len(),
        1
    );

    // A later job downloads the run's public keys before its trust step, which trusts them.
    let later = ["build-1", "build-3", "test-gfx90c", "publish"];
    for id in later {
        let dl = uses(
            &wf,
            id,
            "actions/download-artifact",
            Some(("pattern", "cache-pub-*")),
        );
        assert_eq!(dl.len(), 1, "{id}");
        assert_eq!(wf["jobs"][id]["steps"][dl[0]]["with"]["path"], "cache-pubs");
        assert_eq!(
            wf["jobs"][id]["steps"][dl[0] + 1]["name"],
            "Trust the cache's signing keys"
        );
    }
    std::fs::create_dir(dir.path().join("cache-pubs")).unwrap();
    std::fs::rename(
        dir.path().join("cache-pub/rocprim.pub"),
        dir.path().join("cache-pubs/rocprim.pub"),
    )
    .unwrap();
    // Not a key: ignored rather than written into the config.
    std::fs::write(dir.path().join("cache-pubs/evil.pub"), "RW\"]\n[mirrors]").unwrap();
    let o = run_step(
        &step_script(&wf, "build-1", "Trust the cache's signing keys"),
        dir.path(),
        &bin,
        &[],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let env = std::fs::read_to_string(dir.path().join("github-env")).unwrap();
    let config_path = env.trim().strip_prefix("ROCFORGE_CONFIG=").unwrap();
    let config: toml::Value =
        toml::from_str(&std::fs::read_to_string(config_path).unwrap()).unwrap();
    assert_eq!(
        config["trust"]["keys"].as_array().unwrap(),
        &vec![toml::Value::String(public.trim().into())]
    );
    // Pull-request jobs push nothing and trust only runners.toml.
    let pr = step_script(&wf, "pr-build-0", "Build ");
    assert!(!pr.contains("--cache-key"), "{pr}");
    assert!(
        uses(
            &wf,
            "pr-build-1",
            "actions/download-artifact",
            Some(("pattern", "cache-pub-*"))
        )
        .is_empty()
    );
}

/// The Pages site laid out by the publish job's own step from a release directory with wheels:
/// every link of the wheel index resolves to a file of the site (pip got a 404 when the wheels
/// were left out).
#[test]
fn every_link_of_the_pages_wheel_index_resolves() {
    let wf = shipped_workflow();
    let dir = tempfile::tempdir().unwrap();
    let dist = dir.path().join("dist");
    std::fs::create_dir(&dist).unwrap();
    for f in [
        "torch-2.8.0+rocm6.4.4.gfx90c-cp311-cp311-linux_x86_64.whl",
        "torch-2.8.0+rocm6.4.4.gfx902-cp311-cp311-linux_x86_64.whl",
        "torchvision-0.23.0+rocm6.4.4.gfx90c-cp311-cp311-linux_x86_64.whl",
        "filelock-3.16.1-py3-none-any.whl",
        "rocsparse-3.4.0-gfx90c-0123abcd.tar.zst",
        "SHA256SUMS",
        "report.md",
    ] {
        std::fs::write(dist.join(f), f).unwrap();
    }
    // The wheel index as `rocforge publish` writes it.
    ok(dir.path(), &["publish", "dist"]);
    assert!(dist.join("gfx90c/torch/index.html").is_file());
    let o = run_step(
        &step_script(&wf, "publish", "Pages site"),
        dir.path(),
        dir.path(),
        &[],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let site = dir.path().join("site");
    assert_eq!(
        uses(
            &wf,
            "publish",
            "actions/upload-pages-artifact",
            Some(("path", "site"))
        )
        .len(),
        1
    );
    let mut pages = Vec::new();
    let mut stack = vec![site.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "html") {
                pages.push(p);
            }
        }
    }
    assert!(pages.len() >= 6, "{pages:?}");
    let mut wheels = 0;
    for page in &pages {
        let html = std::fs::read_to_string(page).unwrap();
        for href in html
            .split("href=\"")
            .skip(1)
            .map(|s| &s[..s.find('"').unwrap()])
        {
            // Links are percent-encoded (a local version's `+` is `%2B`); the site's files are not.
            let path = percent_encoding::percent_decode_str(href.split('#').next().unwrap())
                .decode_utf8()
                .unwrap()
                .into_owned();
            let path = path.as_str();
            let mut target = page.parent().unwrap().join(path);
            // A project link is a directory, served as its index.html (as pip asks for it).
            if path.ends_with('/') {
                target = target.join("index.html");
            }
            let target = target.canonicalize().unwrap_or_else(|_| {
                panic!("{} links {href}: no such file on the site", page.display())
            });
            assert!(
                target.starts_with(site.canonicalize().unwrap()),
                "{href} leaves the site"
            );
            assert!(target.is_file(), "{href}");
            if path.ends_with(".whl") {
                wheels += 1;
                // The bytes pip checks against the #sha256= fragment.
                let sha = href.split("#sha256=").nth(1).unwrap();
                assert_eq!(common::sha256_file(&target), sha, "{href}");
            }
        }
    }
    assert!(wheels >= 5, "{wheels} wheel links");
    // The signed index stays on the release with its tarballs: not on Pages, where its
    // relative artifact URLs would 404.
    assert!(!site.join("index.json").exists());
}

/// Published indexes expire after 30 days: a weekly scheduled run re-signs each release's
/// index.json. Its generated step, run with a fake `gh` over two releases, verifies each index,
/// issues it again for 30 days and uploads it; the scheduled run starts nothing else.
#[test]
fn a_scheduled_job_re_signs_published_indexes() {
    if !common::require("jq", common::which("jq")) {
        return;
    }
    let wf = shipped_workflow();
    assert_eq!(
        wf["on"]["schedule"][0]["cron"],
        rocforge::ci::github::RESIGN_CRON
    );
    let resign = &wf["jobs"]["resign"];
    assert_eq!(resign["if"], "github.event_name == 'schedule'");
    assert_eq!(resign["environment"], "release");
    assert_eq!(resign["permissions"]["contents"], "write");
    // Every other job is skipped on a schedule: the plan job says so, the rest need it.
    assert_eq!(wf["jobs"]["plan"]["if"], "github.event_name != 'schedule'");
    for (id, job) in jobs(&wf) {
        if id == "plan" || id == "resign" {
            continue;
        }
        let needs = match &job["needs"] {
            serde_json::Value::String(s) => vec![s.as_str()],
            serde_json::Value::Array(a) => a.iter().map(|v| v.as_str().unwrap()).collect(),
            _ => panic!("{id} needs nothing: it would run on the schedule"),
        };
        assert!(needs.contains(&"plan") || needs == ["publish"], "{id}");
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Two releases signed by the release key an expired while ago, one without an index.
    let keys = d.join("keys");
    let public = ok(d, &["key", "generate", "--out", keys.to_str().unwrap()]);
    let releases = d.join("releases");
    for tag in ["v1.0", "v1.1"] {
        let r = releases.join(tag);
        std::fs::create_dir_all(&r).unwrap();
        let index = serde_json::json!({
            "schema": "rocforge.index/1",
            "issued": "2025-01-01T00:00:00Z",
            "expires": "2025-01-31T00:00:00Z",
            "artifacts": [],
        });
        std::fs::write(r.join("index.json"), index.to_string()).unwrap();
        ok(
            d,
            &[
                "sign",
                r.join("index.json").to_str().unwrap(),
                "--sign-key",
                keys.join("rocforge.key").to_str().unwrap(),
            ],
        );
    }
    std::fs::create_dir_all(releases.join("v0.9")).unwrap();
    let bin = d.join("bin");
    std::fs::create_dir(&bin).unwrap();
    write_exe(
        &bin.join("gh"),
        &format!(
            r#"#!/bin/bash
set -eu
rel={rel}
case "$1 $2" in
  "release list") printf 'v1.1\nv1.0\nv0.9\n' ;;
  "release download")
    tag=$3; shift 3; dir=
    while [ $# -gt 0 ]; do case "$1" in --dir) dir=$2; shift 2 ;; *) shift ;; esac; done
    n=$(find "$rel/$tag" -maxdepth 1 -name 'index.json*' | wc -l)
    [ "$n" -gt 0 ] || {{ echo "no assets match the file pattern" >&2; exit 1; }}
    cp "$rel/$tag"/index.json* "$dir/" ;;
  "release upload")
    tag=$3; shift 3
    while [ $# -gt 0 ]; do
      case "$1" in
        --repo) shift 2 ;;
        --*) shift ;;
        *) mkdir -p "$rel/../uploaded/$tag"; cp "$1" "$rel/../uploaded/$tag/"; shift ;;
      esac
    done ;;
  *) echo "unexpected gh $*" >&2; exit 2 ;;
esac
"#,
            rel = releases.display()
        ),
    );
    // The job puts the binary its rocforge-build steps made on PATH.
    std::fs::create_dir_all(d.join("target/release")).unwrap();
    std::os::unix::fs::symlink(
        env!("CARGO_BIN_EXE_rocforge"),
        d.join("target/release/rocforge"),
    )
    .unwrap();
    std::fs::write(
        d.join("trust.toml"),
        format!("[trust]\nkeys = [\"{}\"]\n", public.trim()),
    )
    .unwrap();
    let secret = std::fs::read_to_string(keys.join("rocforge.key")).unwrap();
    let script = step_script(&wf, "resign", "Re-sign");
    let o = run_step(
        &script,
        d,
        &bin,
        &[
            ("GH_TOKEN", "t"),
            ("REPO", "me/rocforge"),
            ("SIGNING_KEY", secret.trim()),
            ("ROCFORGE_KEY_PASSWORD", ""),
            ("ROCFORGE_CONFIG", d.join("trust.toml").to_str().unwrap()),
        ],
    );
    assert!(
        o.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let summary = std::fs::read_to_string(d.join("summary.md")).unwrap();
    assert!(summary.contains("- v0.9: no index.json"), "{summary}");
    for tag in ["v1.0", "v1.1"] {
        let up = d.join("uploaded").join(tag);
        let index: serde_json::Value =
            serde_json::from_slice(&std::fs::read(up.join("index.json")).unwrap()).unwrap();
        let expires = rocforge::units::parse_rfc3339(index["expires"].as_str().unwrap()).unwrap();
        let now = rocforge::units::now_unix();
        assert!(expires > now + 29 * 86_400, "{tag}: {index}");
        assert!(summary.contains(&format!("- {tag}: index.json re-signed, expires ")));
        // What was uploaded verifies with the release key.
        let o = common::rocforge_env(
            d,
            &[("ROCFORGE_CONFIG", &d.join("trust.toml"))],
            &["verify", up.join("index.json").to_str().unwrap()],
        );
        assert_eq!(o.code, 0, "{}", o.stderr);
    }
    // An index someone else signed is not signed again.
    let other = d.join("other-keys");
    ok(d, &["key", "generate", "--out", other.to_str().unwrap()]);
    ok(
        d,
        &[
            "sign",
            releases.join("v1.0/index.json").to_str().unwrap(),
            "--sign-key",
            other.join("rocforge.key").to_str().unwrap(),
        ],
    );
    std::fs::remove_dir_all(d.join("uploaded")).unwrap();
    let o = run_step(
        &script,
        d,
        &bin,
        &[
            ("GH_TOKEN", "t"),
            ("REPO", "me/rocforge"),
            ("SIGNING_KEY", secret.trim()),
            ("ROCFORGE_KEY_PASSWORD", ""),
            ("ROCFORGE_CONFIG", d.join("trust.toml").to_str().unwrap()),
        ],
    );
    assert!(!o.status.success());
    assert!(!d.join("uploaded/v1.0").exists());
}

/// The publish job ships rocforge itself: its "Package and sign" step packs the binary it runs
/// with scripts/dist.sh and signs the tarball with the release key, and the release step
/// uploads the tarball, its .sha256 and .minisig. The same script, run here on the debug
/// binary (behind a launcher), writes a tarball holding the binary, the three shells' completions, every man page
/// and the README, with a checksum file sha256sum accepts and a signature rocforge verifies.
#[test]
fn the_release_ships_rocforge_with_completions_and_man_pages() {
    let wf = shipped_workflow();
    let package = step_script(&wf, "publish", "Package and sign");
    assert!(
        package.contains("tarball=$(scripts/dist.sh bin/rocforge dist-rocforge)\n"),
        "{package}"
    );
    assert!(
        package.contains("rocforge sign \"$tarball\" --sign-key \"$key\"\n"),
        "{package}"
    );
    let release = step_script(&wf, "publish", "GitHub release");
    assert!(
        release.contains("gh release upload \"$TAG\" --repo \"$REPO\" --clobber dist-rocforge/*\n"),
        "{release}"
    );
    // The upload needs the tarball that the packaging step wrote before it.
    let steps = wf["jobs"]["publish"]["steps"].as_array().unwrap();
    let at = |name: &str| {
        steps
            .iter()
            .position(|s| s["name"].as_str().is_some_and(|n| n.starts_with(name)))
            .unwrap()
    };
    assert!(at("Package and sign") < at("GitHub release"));

    let d = tempfile::tempdir().unwrap();
    // The debug binary behind a small launcher: the script runs it for the completions and man
    // pages the same way, and the tarball stays small (gzip over the 200 MB debug binary is
    // minutes on a shared machine).
    write_exe(
        &d.path().join("rocforge"),
        &format!(
            "#!/bin/sh\nexec {} \"$@\"\n",
            env!("CARGO_BIN_EXE_rocforge")
        ),
    );
    let o = Command::new(manifest().join("scripts/dist.sh"))
        .arg("./rocforge")
        .arg("out")
        .current_dir(d.path())
        .env("TARGET", "x86_64-unknown-linux-gnu")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let name = format!(
        "rocforge-{}-x86_64-unknown-linux-gnu",
        env!("CARGO_PKG_VERSION")
    );
    let tarball = format!("out/{name}.tar.gz");
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), tarball);
    let list = Command::new("tar")
        .args(["-tzf", &tarball])
        .current_dir(d.path())
        .output()
        .unwrap();
    assert!(list.status.success());
    let entries: Vec<String> = String::from_utf8_lossy(&list.stdout)
        .lines()
        .map(|l| l.strip_prefix(&format!("{name}/")).unwrap_or(l).to_string())
        .collect();
    for want in [
        "rocforge",
        "README.md",
        "completions/rocforge.bash",
        "completions/_rocforge",
        "completions/rocforge.fish",
        "man/rocforge.1",
        "man/rocforge-build.1",
        "man/rocforge-install.1",
    ] {
        assert!(
            entries.iter().any(|e| e == want),
            "{want} not in {entries:?}"
        );
    }
    // Every entry is under the one top directory: unpacking makes nothing else.
    assert!(
        String::from_utf8_lossy(&list.stdout)
            .lines()
            .all(|l| l.starts_with(&format!("{name}/"))),
        "{entries:?}"
    );
    // README's lines for the prebuilt binary, run as written where the release's files are,
    // with this version in place of <version>: checked, unpacked, installed, and it runs.
    for line in crate::common::readme::block("Install", 1) {
        let line = line.replace("<version>", env!("CARGO_PKG_VERSION"));
        let o = crate::common::readme::run(&d.path().join("out"), &[("HOME", d.path())], &line);
        assert_eq!(o.code, 0, "README: {line}\n{}{}", o.stdout, o.stderr);
    }
    let v = Command::new(d.path().join(".local/bin/rocforge"))
        .arg("--version")
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&v.stdout).trim(),
        format!("rocforge {}", env!("CARGO_PKG_VERSION"))
    );
    // Signed as the workflow signs it, it verifies with the public key.
    let keys = d.path().join("keys");
    let public = ok(
        d.path(),
        &["key", "generate", "--out", keys.to_str().unwrap()],
    );
    let t = d.path().join(&tarball);
    ok(
        d.path(),
        &[
            "sign",
            t.to_str().unwrap(),
            "--sign-key",
            keys.join("rocforge.key").to_str().unwrap(),
        ],
    );
    ok(
        d.path(),
        &["verify", t.to_str().unwrap(), "--key", public.trim()],
    );
}
