//! The plan of a test run, computed whole before anything is written: which artifact carries the
//! target (a store build or an index's artifact) and its dependencies, the GPU it runs on (or the
//! spoof and its HSA_OVERRIDE_GFX_VERSION), where the scratch prefix and the results go, and the
//! corpus: the client, its arguments and environment, the timeout and what each shard runs.
//! `rocforge test --dry-run` prints it; `app::test::start` carries it out.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;

use super::bundle::{Artifact, DeviceSummary};
use super::detect::Profile;
use super::share;
use crate::arch::TargetId;
use crate::ids::ComponentName;
use crate::recipe::{Test, TestKind};
use crate::sign::SecretKey;

/// The `schema` of `test --dry-run --format json`.
pub const PLAN_SCHEMA: &str = "rocforge.test-plan/1";

/// What a test run will do.
#[derive(Serialize, schemars::JsonSchema)]
pub struct TestPlan {
    pub schema: &'static str,
    pub component: ComponentName,
    /// The target whose artifact is tested.
    pub target: TargetId,
    pub spoofed: bool,
    /// HSA_OVERRIDE_GFX_VERSION for a spoofed run.
    pub hsa_override: Option<String>,
    /// The GPU the tests run on.
    pub device: Option<DeviceSummary>,
    /// Where the artifact comes from.
    pub source: Source,
    /// The artifact under test.
    pub tested: Artifact,
    /// Its dependencies, laid out in the prefix with it.
    pub dependencies: Vec<Artifact>,
    /// The results directory (journal, logs, results.json, junit.xml).
    pub out: PathBuf,
    /// The scratch prefix the artifacts are laid out in (emptied first).
    pub prefix: PathBuf,
    /// Continue the run journaled in `out`.
    pub resume: bool,
    /// This machine's name in the results.
    pub machine: String,
    pub corpus: CorpusPlan,
    /// One entry per shard, run one after another.
    pub shards: Vec<ShardPlan>,
    /// Set for the client, on top of the inherited environment.
    pub env: BTreeMap<String, String>,
    /// Inherited variables the client must not see.
    pub env_remove: Vec<String>,
    /// Read for amdgpu reset lines, when there is one.
    pub kernel_log: Option<PathBuf>,
    /// Where the results are shared (`--submit`), without credentials.
    pub submit: Option<String>,
    /// The secret key file that signs submitted results.
    pub sign_with: Option<PathBuf>,
    /// What planning found worth telling.
    pub notes: Vec<String>,
    /// The recipe's `[test]`, the machine profile and what execution needs but the plan does not
    /// show (a loaded secret key, the index location as given, which may carry credentials).
    #[serde(skip)]
    pub spec: Test,
    #[serde(skip)]
    pub profile: Profile,
    #[serde(skip)]
    pub destination: Option<share::Destination>,
    #[serde(skip)]
    pub key: Option<SecretKey>,
    /// Store keys in the order their trees are linked into the prefix (dependencies first).
    #[serde(skip)]
    pub trees: Vec<String>,
    /// `--from` as given (it may carry credentials): installed from when `source` is an index.
    #[serde(skip)]
    pub from: Option<String>,
}

/// Where the tested artifact comes from.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Source {
    /// A build in the store, hard-linked into the prefix.
    Store {
        /// The targets it was built for.
        targets: Vec<TargetId>,
        /// `container` or `host`.
        runtime: String,
        /// Built for more targets than the one tested.
        wider: bool,
    },
    /// An artifact index (the store lacks the component), installed into the prefix.
    Index {
        /// The index's URL or directory, without credentials.
        index: String,
    },
    /// Neither the store nor an index holds it: a plan only (`--dry-run`), with the command
    /// that builds what the run would test.
    NotBuilt { build: String },
}

/// What the recipe's `[test]` runs.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct CorpusPlan {
    pub kind: TestKind,
    /// gtest: the client; each-binary: the corpus dir or glob; ctest: the CTestTestfile's dir;
    /// relative to the prefix.
    pub client: String,
    pub args: Vec<String>,
    /// gtest: per shard without progress; otherwise per test.
    pub timeout_secs: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skip_exit_code: Option<i32>,
    /// The tests, when known before the run (each-binary and CTest corpora of a store build);
    /// a gtest client lists its own only when it runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tests: Option<usize>,
}

/// One shard's first start.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ShardPlan {
    pub shard: u32,
    /// gtest's sharding variables (none for one shard, or a corpus of programs).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// The tests it runs, when known before the run (test i runs in shard i % shards).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tests: Option<Vec<String>>,
}

/// The shards of a corpus: gtest's variables for a sharded gtest client, else each known test in
/// shard i % shards (the rule [`super::run`] applies).
pub fn shards(kind: TestKind, count: u32, tests: Option<&[String]>) -> Vec<ShardPlan> {
    (0..count)
        .map(|shard| {
            let mut env = BTreeMap::new();
            if kind == TestKind::Gtest && count > 1 {
                env.insert("GTEST_TOTAL_SHARDS".into(), count.to_string());
                env.insert("GTEST_SHARD_INDEX".into(), shard.to_string());
            }
            let tests = tests.map(|all| {
                all.iter()
                    .enumerate()
                    .filter(|(i, _)| *i as u32 % count.max(1) == shard)
                    .map(|(_, t)| t.clone())
                    .collect()
            });
            ShardPlan { shard, env, tests }
        })
        .collect()
}

impl TestPlan {
    /// One line saying what will run, where, and how hangs are caught.
    pub fn describe(&self) -> String {
        let spec = &self.spec;
        format!(
            "testing {} {} for {}{} on {}: {} shard(s), {}s {} kills a test",
            self.component,
            self.tested.version,
            self.target,
            if self.spoofed {
                format!(
                    " (spoofed: HSA_OVERRIDE_GFX_VERSION={})",
                    self.hsa_override.as_deref().unwrap_or("?")
                )
            } else {
                String::new()
            },
            self.device
                .as_ref()
                .and_then(|d| d.target_id.clone())
                .unwrap_or_else(|| "no GPU".into()),
            spec.shards,
            spec.timeout_secs,
            timeout_scope(spec.kind)
        )
    }

    /// The plan as text, for `test --dry-run`.
    pub fn render_text(&self) -> String {
        let mut s = format!(
            "test     {} {} for {}\n",
            self.component, self.tested.version, self.target
        );
        let key = &self.tested.key;
        s += &match &self.source {
            Source::Store {
                targets, runtime, ..
            } => format!(
                "from     the store: {key}, built for {} ({runtime} build)\n",
                join(targets)
            ),
            Source::Index { index } => format!("from     the index {index}: {key}\n"),
            Source::NotBuilt { build } => {
                format!(
                    "from     nothing yet: {key} is not built; `{build}` builds it (or --from an index)\n"
                )
            }
        };
        for d in &self.dependencies {
            s += &format!("depends  {} {} {}\n", d.name, d.version, d.key);
        }
        s += &format!("device   {}\n", self.device_line());
        s += &format!("machine  {}\n", self.machine);
        s += &format!("out      {}\n", self.out.display());
        s += &format!("prefix   {} (emptied first)\n", self.prefix.display());
        let c = &self.corpus;
        s += &format!("client   {} ({})\n", c.client, kind_name(c.kind));
        if !c.args.is_empty() {
            s += &format!("args     {}\n", c.args.join(" "));
        }
        s += &format!(
            "timeout  {}s {} kills a test\n",
            c.timeout_secs,
            timeout_scope(c.kind)
        );
        if let Some(code) = c.skip_exit_code {
            s += &format!("skip     exit code {code}\n");
        }
        s += &format!("shards   {}\n", self.shards.len());
        for sh in &self.shards {
            s += &format!("  shard {}", sh.shard);
            let vars: Vec<String> = sh.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
            if !vars.is_empty() {
                s += &format!(" {}", vars.join(" "));
            }
            match &sh.tests {
                Some(t) => s += &format!(": {}\n", t.join(", ")),
                None => s += "\n",
            }
        }
        s += &self.render_env();
        if let Some(k) = &self.kernel_log {
            s += &format!("kmsg     {}\n", k.display());
        }
        if let Some(to) = &self.submit {
            let signed = match &self.sign_with {
                Some(k) => format!(", signed with {}", k.display()),
                None => ", unsigned".into(),
            };
            s += &format!("submit   {to}{signed}\n");
        }
        for n in &self.notes {
            s += &format!("note: {n}\n");
        }
        s
    }

    fn device_line(&self) -> String {
        let gpu = self
            .device
            .as_ref()
            .map(|d| {
                let name = d
                    .name
                    .as_deref()
                    .map(|n| format!(" - {n}"))
                    .unwrap_or_default();
                format!(
                    "{}{name}",
                    d.target_id.as_deref().unwrap_or("unknown target")
                )
            })
            .unwrap_or_else(|| "no GPU".into());
        match &self.hsa_override {
            Some(v) if self.spoofed => format!(
                "{gpu}, spoofed: the {} artifact under HSA_OVERRIDE_GFX_VERSION={v}",
                self.target
            ),
            _ => gpu,
        }
    }

    fn render_env(&self) -> String {
        let mut s = String::new();
        for (i, (k, v)) in self.env.iter().enumerate() {
            let head = if i == 0 { "env" } else { "" };
            s += &format!("{head:<8} {k}={v}\n");
        }
        if !self.env_remove.is_empty() {
            s += &format!("unset    {}\n", self.env_remove.join(" "));
        }
        s
    }
}

fn join(targets: &[TargetId]) -> String {
    targets
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

fn kind_name(kind: TestKind) -> &'static str {
    match kind {
        TestKind::Gtest => "gtest",
        TestKind::EachBinary => "each-binary",
        TestKind::Ctest => "ctest",
    }
}

/// What the timeout bounds: a gtest client reports progress per test, a program is one test.
fn timeout_scope(kind: TestKind) -> &'static str {
    match kind {
        TestKind::EachBinary => "per binary",
        TestKind::Ctest => "per test",
        TestKind::Gtest => "without progress",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gtest_shards_get_the_variables_and_programs_go_round_robin() {
        let one = shards(TestKind::Gtest, 1, None);
        assert!(one[0].env.is_empty());
        let three = shards(TestKind::Gtest, 3, None);
        assert_eq!(three[2].env["GTEST_SHARD_INDEX"], "2");
        assert_eq!(three[2].env["GTEST_TOTAL_SHARDS"], "3");
        let names: Vec<String> = (0..5).map(|i| format!("t{i}")).collect();
        let each = shards(TestKind::EachBinary, 2, Some(&names));
        assert!(each[0].env.is_empty());
        assert_eq!(each[0].tests.as_deref().unwrap(), ["t0", "t2", "t4"]);
        assert_eq!(each[1].tests.as_deref().unwrap(), ["t1", "t3"]);
    }
}
