//! Hardware-test runner benchmark (no GPU needed):
//! 1. runner overhead per shard: a client that exits at once, run through `testrun::run`
//!    (process group, output pump, journal with fsync, logs) vs spawned directly;
//! 2. parsing and bundling a 300,000-test gtest XML result set (JSON bundle + JUnit XML).
//!
//! `cargo bench --bench testrun`; figures go to docs/performance.md.

#[path = "common/mod.rs"]
mod common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use rocforge::progress::Silent;
use rocforge::testrun::bundle::{self, Artifact, Bundle, ClientSpec, Summary};
use rocforge::testrun::journal::{Journal, Record};
use rocforge::testrun::run::{self, RunSpec};
use rocforge::testrun::{detect, gtest};

const SHARDS: usize = 200;
const TESTS: usize = 300_000;

fn overhead(tmp: &Path) {
    let client = Path::new("/bin/true");
    // Warm up both paths.
    for _ in 0..10 {
        Command::new(client).status().unwrap();
    }
    let t = Instant::now();
    for _ in 0..SHARDS {
        assert!(Command::new(client).status().unwrap().success());
    }
    let direct = t.elapsed() / SHARDS as u32;
    let mut total = Duration::ZERO;
    for i in 0..SHARDS {
        let dir = tmp.join(format!("run-{i}"));
        let start = Record::Start {
            schema: rocforge::testrun::journal::JOURNAL_SCHEMA.into(),
            component: rocforge::ids::ComponentName::checked("bench"),
            key: "0".repeat(64),
            arch: "gfx90c".into(),
            spoofed: false,
            shards: 1,
            started: 0,
        };
        let t = Instant::now();
        let (mut j, prev) = Journal::open(&dir.join("journal.jsonl"), &start, false).unwrap();
        let spec = RunSpec {
            client: client.to_path_buf(),
            corpus: Default::default(),
            args: Vec::new(),
            env: Vec::new(),
            env_remove: Vec::new(),
            shards: 1,
            timeout: Duration::from_secs(30),
            dir: dir.clone(),
            kernel_log: None,
        };
        let r = run::run(&spec, &mut j, &prev, &Silent).unwrap();
        total += t.elapsed();
        assert_eq!(r.shards.len(), 1);
    }
    let runner = total / SHARDS as u32;
    println!(
        "runner overhead per shard: direct spawn+wait {:.2} ms, through the runner {:.2} ms: +{:.2} ms ({:.1}x) over {SHARDS} shards",
        direct.as_secs_f64() * 1e3,
        runner.as_secs_f64() * 1e3,
        (runner.saturating_sub(direct)).as_secs_f64() * 1e3,
        runner.as_secs_f64() / direct.as_secs_f64()
    );
    let (runner_ms, direct_ms) = (runner.as_secs_f64() * 1e3, direct.as_secs_f64() * 1e3);
    common::record(
        "test runner per shard, a client that exits at once (/bin/true)",
        runner_ms,
        "ms",
        Some(("the client spawned and waited for directly", direct_ms)),
        Some(runner_ms / direct_ms),
        "<= 50 ms beyond the client",
        Some(runner_ms - direct_ms <= 50.0),
    );
}

fn xml(n: usize) -> String {
    let mut x = String::with_capacity(n * 130);
    x += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites tests=\"0\">\n<testsuite name=\"pre_checkin/csrmv.level2\">\n";
    for i in 0..n {
        let name = format!("csrmv_real_{i}_f32_r_alpha_1_beta_0");
        if i % 100 == 7 {
            x += &format!(
                "<testcase name=\"{name}\" status=\"run\" result=\"completed\" time=\"0.012\" classname=\"pre_checkin/csrmv.level2\"><failure message=\"csrmv.cpp:88&#x0A;Expected: near 1e-5\" type=\"\"><![CDATA[csrmv.cpp:88\nExpected: near 1e-5\nActual: 3.2e-3]]></failure></testcase>\n"
            );
        } else if i % 100 == 9 {
            x += &format!(
                "<testcase name=\"{name}\" status=\"run\" result=\"skipped\" time=\"0\" classname=\"pre_checkin/csrmv.level2\"><skipped message=\"\"/></testcase>\n"
            );
        } else {
            x += &format!(
                "<testcase name=\"{name}\" status=\"run\" result=\"completed\" time=\"0.003\" classname=\"pre_checkin/csrmv.level2\"/>\n"
            );
        }
    }
    x += "</testsuite>\n</testsuites>\n";
    x
}

fn parse_and_bundle(tmp: &Path) {
    let text = xml(TESTS);
    let t = Instant::now();
    let cases = gtest::parse_xml(text.as_bytes()).unwrap();
    let parsed = t.elapsed();
    let tests = bundle::from_xml(&cases);
    let profile = detect::detect(tmp, &Default::default(), None);
    let b = Bundle {
        schema: bundle::RESULTS_SCHEMA.into(),
        rocforge_version: "bench".into(),
        machine: "bench".into(),
        started: 0,
        finished: 0,
        component: Artifact {
            id: rocforge::ids::ArtifactId {
                name: "rocsparse".parse().unwrap(),
                version: "4.0".into(),
                release: "bench".into(),
                targets: vec!["gfx90c".parse().unwrap()],
                key: "0".repeat(64).parse().unwrap(),
            },
            runtime: "podman".into(),
        },
        dependencies: Vec::new(),
        arch: "gfx90c".into(),
        spoofed: false,
        hsa_override: None,
        device: None,
        profile,
        environment: Default::default(),
        client: ClientSpec {
            path: "bin/rocsparse-test".into(),
            args: Vec::new(),
            shards: 1,
            timeout_secs: 3600,
        },
        shards: Vec::new(),
        summary: Summary::of(tests.iter().map(|t| t.outcome)),
        classes: bundle::classes(&tests),
        xml_check: Some(bundle::check_xml(&tests, &cases, 1)),
        tests,
        kernel_log: "not available".into(),
    };
    let json = serde_json::to_vec(&b).unwrap();
    let junit = bundle::junit(&b);
    std::fs::write(tmp.join("results.json"), &json).unwrap();
    std::fs::write(tmp.join("junit.xml"), &junit).unwrap();
    let total = t.elapsed();
    assert_eq!(b.summary.total, TESTS);
    assert_eq!(b.summary.failed, TESTS / 100);
    println!(
        "{TESTS}-test gtest XML ({:.1} MB): parsed in {:.2} s; parsed, classified and bundled (JSON {:.1} MB + JUnit {:.1} MB written) in {:.2} s",
        text.len() as f64 / 1e6,
        parsed.as_secs_f64(),
        json.len() as f64 / 1e6,
        junit.len() as f64 / 1e6,
        total.as_secs_f64()
    );
    common::record(
        "parse a 300,000-test gtest XML report alone",
        parsed.as_secs_f64(),
        "s",
        None,
        None,
        "",
        None,
    );
    common::record(
        "parse a 300,000-test gtest XML report, classify, write results JSON + JUnit XML",
        total.as_secs_f64(),
        "s",
        None,
        None,
        "< 2 s",
        Some(total.as_secs_f64() < 2.0),
    );
}

fn main() {
    let tmp = tempfile::tempdir().unwrap();
    overhead(tmp.path());
    parse_and_bundle(tmp.path());
}
