//! The results bundle: one JSON document per run (schema in docs/results-schema.md) and a
//! JUnit XML file for CI systems.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::classify::{Class, Outcome};
use super::detect::Profile;
use super::gtest::XmlCase;
use super::journal::TestRecord;
use super::run::ShardSummary;

/// Version 2 adds `release` to each artifact and orders its fields as every format carries
/// an artifact's identity; version 1 bundles (from older rocforge) are still read.
pub const RESULTS_SCHEMA: &str = "rocforge.results/2";
/// The versions [`crate::report`] reads.
pub const RESULTS_SCHEMAS_READ: &[&str] = &["rocforge.results/1", RESULTS_SCHEMA];

/// `results.json`: one test run of one component on one machine (docs/results-schema.md).
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Bundle {
    pub schema: String,
    pub rocforge_version: String,
    /// The machine's name as its owner chose it (`--machine`, default the hostname).
    pub machine: String,
    /// Seconds since the epoch.
    pub started: u64,
    pub finished: u64,
    pub component: Artifact,
    pub dependencies: Vec<Artifact>,
    /// The target the tested artifact was built for.
    pub arch: String,
    /// True when the artifact is another target's, run under HSA_OVERRIDE_GFX_VERSION.
    pub spoofed: bool,
    pub hsa_override: Option<String>,
    /// The GPU the tests ran on (the detected device; None with --spoof and no GPU found).
    pub device: Option<DeviceSummary>,
    pub profile: Profile,
    pub environment: BTreeMap<String, String>,
    pub client: ClientSpec,
    pub shards: Vec<ShardSummary>,
    pub summary: Summary,
    pub classes: BTreeMap<Class, usize>,
    pub tests: Vec<TestResult>,
    /// How the client's own XML reports compare with the journal.
    pub xml_check: Option<XmlCheck>,
    /// Whether amdgpu reset lines could be looked for in the kernel log.
    pub kernel_log: String,
}

/// A tested artifact or one of its dependencies, and where it came from (a runtime or "index").
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Artifact {
    #[serde(flatten)]
    pub id: crate::ids::ArtifactId,
    pub runtime: String,
}

crate::carries_artifact_id!(Artifact);

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DeviceSummary {
    pub target: Option<String>,
    pub target_id: Option<String>,
    pub name: Option<String>,
    pub gfx_target_version: u32,
    pub compute_units: u32,
    pub memory: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ClientSpec {
    pub path: String,
    pub args: Vec<String>,
    pub shards: u32,
    pub timeout_secs: u64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
pub struct Summary {
    pub total: usize,
    pub passed: usize,
    pub failed: usize,
    pub skipped: usize,
    pub hung: usize,
    pub crashed: usize,
    /// Tests that found no GPU: neither passed nor failed. Absent from bundles where it is 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub no_gpu: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl Summary {
    pub fn of(outcomes: impl IntoIterator<Item = Outcome>) -> Summary {
        let mut s = Summary::default();
        for o in outcomes {
            s.total += 1;
            match o {
                Outcome::Passed => s.passed += 1,
                Outcome::Failed => s.failed += 1,
                Outcome::Skipped => s.skipped += 1,
                Outcome::Hung => s.hung += 1,
                Outcome::Crashed => s.crashed += 1,
                Outcome::NoGpu => s.no_gpu += 1,
            }
        }
        s
    }

    /// Failed, hung and crashed together.
    pub fn failures(&self) -> usize {
        self.failed + self.hung + self.crashed
    }

    /// The counts as `rocforge test` prints them and reports repeat them: hung and crashed
    /// tests are counted apart from the failed ones, never among them.
    pub fn line(&self) -> String {
        let mut s = format!(
            "{} tests: {} passed, {} failed, {} skipped, {} hung, {} crashed",
            self.total, self.passed, self.failed, self.skipped, self.hung, self.crashed
        );
        if self.no_gpu > 0 {
            s += &format!(", {} found no GPU", self.no_gpu);
        }
        s
    }

    /// Tests ran but none reached a GPU: not a pass, and not the library's failure.
    pub fn only_no_gpu(&self) -> bool {
        self.no_gpu > 0 && self.passed == 0 && self.failures() == 0
    }

    /// The same counts without the zero ones, for a report's grid cell.
    pub fn short(&self) -> String {
        let parts: Vec<String> = [
            (self.passed, "passed"),
            (self.failed, "failed"),
            (self.skipped, "skipped"),
            (self.hung, "hung"),
            (self.crashed, "crashed"),
            (self.no_gpu, "no GPU"),
        ]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{n} {what}"))
        .collect();
        if parts.is_empty() {
            "no tests".into()
        } else {
            parts.join(", ")
        }
    }

    pub fn add(&mut self, o: &Summary) {
        self.total += o.total;
        self.passed += o.passed;
        self.failed += o.failed;
        self.skipped += o.skipped;
        self.hung += o.hung;
        self.crashed += o.crashed;
        self.no_gpu += o.no_gpu;
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TestResult {
    pub name: String,
    pub shard: u32,
    pub outcome: Outcome,
    pub class: Option<Class>,
    pub duration_ms: u64,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub excerpt: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct XmlCheck {
    pub files: usize,
    pub tests: usize,
    pub agree: usize,
    /// Tests whose XML outcome differs from the journal's: (name, journal, xml).
    pub disagree: Vec<(String, String, String)>,
}

/// The last record of each test wins (a resumed run may have run a test again).
pub fn results(records: &[TestRecord]) -> Vec<TestResult> {
    let mut index: BTreeMap<&str, usize> = BTreeMap::new();
    let mut out: Vec<TestResult> = Vec::with_capacity(records.len());
    for r in records {
        let t = TestResult {
            name: r.name.clone(),
            shard: r.shard,
            outcome: r.outcome,
            class: r.class,
            duration_ms: r.duration_ms,
            excerpt: r.excerpt.clone(),
        };
        match index.get(r.name.as_str()) {
            Some(&i) => out[i] = t,
            None => {
                index.insert(&r.name, out.len());
                out.push(t);
            }
        }
    }
    out
}

/// Test results from gtest XML cases alone (no journal): used for clients that only write XML
/// and by the benchmark. Failures are classified from their messages.
pub fn from_xml(cases: &[XmlCase]) -> Vec<TestResult> {
    cases
        .iter()
        .map(|c| {
            let outcome = match c.outcome {
                "failed" => Outcome::Failed,
                "skipped" => Outcome::Skipped,
                _ => Outcome::Passed,
            };
            let lines: Vec<String> = if c.message.is_empty() {
                Vec::new()
            } else {
                c.message.lines().map(str::to_string).collect()
            };
            let (class, excerpt) = super::classify::classify(
                &super::classify::Evidence {
                    outcome,
                    exit_code: None,
                    signal: None,
                    lines: &lines,
                    kernel: &[],
                },
                super::run::EXCERPT_LINES,
            );
            TestResult {
                name: c.name.clone(),
                shard: 0,
                outcome: super::classify::settled(outcome, class),
                class,
                duration_ms: (c.seconds * 1000.0).round() as u64,
                excerpt,
            }
        })
        .collect()
}

/// Compares the client's XML reports with the journal's results.
pub fn check_xml(tests: &[TestResult], cases: &[XmlCase], files: usize) -> XmlCheck {
    let by_name: BTreeMap<&str, &TestResult> = tests.iter().map(|t| (t.name.as_str(), t)).collect();
    let mut check = XmlCheck {
        files,
        tests: cases.len(),
        agree: 0,
        disagree: Vec::new(),
    };
    for c in cases {
        match by_name.get(c.name.as_str()) {
            Some(t) if t.outcome.name() == c.outcome => check.agree += 1,
            Some(t) => {
                check
                    .disagree
                    .push((c.name.clone(), t.outcome.name().into(), c.outcome.into()))
            }
            None => check
                .disagree
                .push((c.name.clone(), "absent".into(), c.outcome.into())),
        }
    }
    check
}

pub fn classes(tests: &[TestResult]) -> BTreeMap<Class, usize> {
    let mut m = BTreeMap::new();
    for t in tests {
        if let Some(c) = t.class {
            *m.entry(c).or_insert(0) += 1;
        }
    }
    m
}

fn xml_escape(s: &str, out: &mut String) {
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // XML 1.0 allows no other control characters.
            c if (c as u32) < 0x20 && c != '\n' && c != '\t' && c != '\r' => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
}

/// JUnit XML: one `<testsuite>` per gtest suite, hung and crashed tests as `<error>`.
pub fn junit(b: &Bundle) -> String {
    let mut suites: BTreeMap<&str, Vec<&TestResult>> = BTreeMap::new();
    for t in &b.tests {
        let suite = t.name.rsplit_once('.').map_or("", |(s, _)| s);
        suites.entry(suite).or_default().push(t);
    }
    let mut x = String::with_capacity(b.tests.len() * 120 + 512);
    let s = &b.summary;
    x += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
    let _ = writeln!(
        x,
        "<testsuites name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\">",
        {
            let mut n = String::new();
            xml_escape(
                &format!(
                    "{} {} on {}{}",
                    b.component.name,
                    b.arch,
                    b.machine,
                    if b.spoofed { " (spoofed)" } else { "" }
                ),
                &mut n,
            );
            n
        },
        s.total,
        s.failed,
        s.hung + s.crashed,
        s.skipped + s.no_gpu
    );
    for (suite, tests) in suites {
        let failures = tests
            .iter()
            .filter(|t| t.outcome == Outcome::Failed)
            .count();
        let errors = tests
            .iter()
            .filter(|t| matches!(t.outcome, Outcome::Hung | Outcome::Crashed))
            .count();
        // JUnit has no "did not run on a GPU": such a test is skipped there, with the reason.
        let skipped = tests
            .iter()
            .filter(|t| matches!(t.outcome, Outcome::Skipped | Outcome::NoGpu))
            .count();
        let time: u64 = tests.iter().map(|t| t.duration_ms).sum();
        x += "  <testsuite name=\"";
        xml_escape(suite, &mut x);
        let _ = writeln!(
            x,
            "\" tests=\"{}\" failures=\"{failures}\" errors=\"{errors}\" skipped=\"{skipped}\" time=\"{:.3}\">",
            tests.len(),
            time as f64 / 1000.0
        );
        for t in tests {
            let name = t.name.rsplit_once('.').map_or(t.name.as_str(), |(_, n)| n);
            x += "    <testcase classname=\"";
            xml_escape(suite, &mut x);
            x += "\" name=\"";
            xml_escape(name, &mut x);
            let _ = write!(x, "\" time=\"{:.3}\"", t.duration_ms as f64 / 1000.0);
            let class = t.class.map_or("", |c| c.name());
            match t.outcome {
                Outcome::Passed => x += "/>\n",
                Outcome::Skipped => x += "><skipped/></testcase>\n",
                Outcome::NoGpu => x += "><skipped message=\"no GPU\"/></testcase>\n",
                o => {
                    let tag = if o == Outcome::Failed {
                        "failure"
                    } else {
                        "error"
                    };
                    let _ = write!(
                        x,
                        "><{tag} type=\"{class}\" message=\"{} ({})\">",
                        o.name(),
                        class
                    );
                    xml_escape(&t.excerpt, &mut x);
                    let _ = writeln!(x, "</{tag}></testcase>");
                }
            }
        }
        x += "  </testsuite>\n";
    }
    x += "</testsuites>\n";
    x
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_gpu_is_neither_a_pass_nor_a_failure() {
        let s = Summary::of([Outcome::NoGpu, Outcome::NoGpu]);
        assert_eq!((s.total, s.passed, s.failures(), s.no_gpu), (2, 0, 0, 2));
        assert!(s.only_no_gpu());
        assert_eq!(
            s.line(),
            "2 tests: 0 passed, 0 failed, 0 skipped, 0 hung, 0 crashed, 2 found no GPU"
        );
        assert_eq!(s.short(), "2 no GPU");
        // A bundle without the count (written before it existed) reads as 0, and one with 0
        // is written without it, byte for byte as before.
        let old: Summary = serde_json::from_str(
            r#"{"total":1,"passed":1,"failed":0,"skipped":0,"hung":0,"crashed":0}"#,
        )
        .unwrap();
        assert_eq!(old.no_gpu, 0);
        assert!(!serde_json::to_string(&old).unwrap().contains("no_gpu"));
        assert!(!Summary::of([Outcome::Passed, Outcome::NoGpu]).only_no_gpu());
    }
}
