//! `test`: a built component's test client run on this machine's GPU. [`test_plan`] decides
//! everything without writing: the artifact (the store, else an index), the GPU or the spoof,
//! the corpus, shards and environment (`test --dry-run` prints it). [`start`] carries the plan
//! out up to the first test: the journal, the scratch prefix, the corpus checked there; and
//! [`Prepared::run`] runs it sharded and hang-proof and writes the results bundle.

mod all;
mod choose;
mod report;

use crate::diag::Hint;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{Error, Result, Session};
use crate::arch::ArchTable;
use crate::catalog::Catalog;
use crate::ids::ComponentName;
use crate::install;
use crate::progress::Reporter;
use crate::recipe::{Test, TestKind};
use crate::sign::SecretKey;
use crate::testrun::bundle::{self, Bundle, ClientSpec, DeviceSummary, Summary};
use crate::testrun::detect::{self, Device, Profile};
use crate::testrun::journal::{Journal, Record};
use crate::testrun::plan::{self as testplan, CorpusPlan, PLAN_SCHEMA, Source, TestPlan};
use crate::testrun::run::{self, Corpus, RunSpec};
use crate::testrun::{ctest, share};

/// The most of a client's gtest XML report read (a whole corpus's is a few MiB); one larger is
/// left out of the cross-check, as an unreadable one is.
const MAX_XML_BYTES: u64 = 256 << 20;
pub use all::{
    ALL_SCHEMA, AllOutcome, AllRequest, ComponentRun, RunStatus, detect_target, run_all, testable,
};
use choose::{Chosen, choose};
pub use report::{Report, TEST_SCHEMA};

/// The index at `from`, its signature checked against the trusted keys, fetched through a
/// client confined to the index's host.
fn signed_index(session: &Session, from: &str) -> Result<install::LoadedIndex> {
    let keys = session.trusted_keys(&[])?;
    let client =
        crate::download::client_confined(&Default::default(), &install::index_url(from)?, &[]);
    Ok(install::load_index(&client, from, &keys, false)?)
}

/// What `rocforge test` was asked.
#[derive(Debug, Clone, Default)]
pub struct Request<'a> {
    pub component: &'a str,
    /// Run the nearest target's artifact under HSA_OVERRIDE_GFX_VERSION.
    pub spoof: bool,
    /// Continue the run journaled in `out`.
    pub resume: bool,
    /// A directory standing for / (a recorded machine).
    pub sysfs_root: Option<&'a Path>,
    /// The results directory [default: ./rocforge-results/<component>-<target>[-spoofed]].
    pub out: Option<&'a Path>,
    /// This machine's name in reports [default: the hostname].
    pub machine: Option<&'a str>,
    /// Where to share the results: `oci://…` or an http(s) URL.
    pub submit: Option<&'a str>,
    /// The secret key that signs submitted results.
    pub key: Option<&'a Path>,
    /// An artifact index to install from when the store lacks the component.
    pub from: Option<&'a str>,
    /// Only the plan (`--dry-run`): a machine without the GPU may plan for `--arch`.
    pub plan_only: bool,
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".into())
}

/// This machine's GPUs as the KFD topology under `sysfs_root` (default /) describes them.
pub fn profile(table: &ArchTable, sysfs_root: Option<&Path>) -> Profile {
    let root = sysfs_root.unwrap_or(Path::new("/"));
    detect::detect(root, table, std::env::var("HSA_XNACK").ok())
}

/// A test run ready to start: its plan, the artifact laid out in the scratch prefix, the
/// journal open and the corpus checked there.
pub struct Prepared {
    plan: TestPlan,
    started: u64,
    journal: Journal,
    previous: Vec<Record>,
    run_spec: RunSpec,
}

/// A finished run: the bundle and where it was written (and shared).
pub struct Outcome {
    pub bundle: Bundle,
    pub results: PathBuf,
    pub junit: PathBuf,
    /// Where `--submit` put the results.
    pub submitted: Option<String>,
}

impl Outcome {
    /// No test failed, hung or crashed, and every test reached a GPU: a run that found no GPU
    /// tested nothing, so it is not a pass (nor the library's failure: its class says so).
    pub fn ok(&self) -> bool {
        self.bundle.summary.failures() == 0 && self.bundle.summary.no_gpu == 0
    }
}

/// The plan, then the run laid out: what `rocforge test` does before its first test starts.
pub fn prepare(session: &Session, req: &Request<'_>) -> Result<Prepared> {
    start(session, test_plan(session, req)?)
}

/// What a test run will do, decided from the store (or the index), the recipe and the GPU this
/// machine's sysfs describes. Writes nothing: `test --dry-run` prints it, [`start`] carries it
/// out.
pub fn test_plan(session: &Session, req: &Request<'_>) -> Result<TestPlan> {
    // A line that builds the library without its client tests `<name>-tests`, which
    // brings the library along as its dependency.
    if session.recipe(req.component)?.tests_apart {
        let name = format!("{}{}", req.component, crate::recipe::Recipe::TESTS_SUFFIX);
        return plan_for(
            session,
            &Request {
                component: &name,
                ..req.clone()
            },
        );
    }
    plan_for(session, req)
}

fn plan_for(session: &Session, req: &Request<'_>) -> Result<TestPlan> {
    let recipe = session.recipe(req.component)?;
    let Some(spec) = recipe.test.clone() else {
        return Err(Error::hinted(
            format!("{} has no test client", req.component),
            format!(
                "add a [test] table (client = \"bin/<name>-test\") to {}",
                recipe.file.display
            ),
        ));
    };
    let (destination, key) = sharing(req)?;
    let targets = session.targets()?;
    if targets.len() != 1 || session.options.arch.is_none() {
        return Err(Error::hinted(
            "`rocforge test` runs one target's artifact",
            "pass --arch with one target, e.g. --arch gfx90c (or --arch gfx900 --spoof)",
        ));
    }
    let target = targets[0].clone();
    let table = &session.catalog.arches;
    let profile = profile(table, req.sysfs_root);
    // A plan needs no GPU: planning on one machine what another will run is what `--dry-run
    // --arch` is for. Running it does.
    let planned_without_gpu = req.plan_only && !req.spoof && profile.devices.is_empty();
    let device = if planned_without_gpu {
        None
    } else {
        pick_device(&profile, table, &target.arch, req.spoof, req.component)?.map(summary)
    };
    let hsa_override = if req.spoof {
        table.get(&target.arch).map(|x| x.hsa_override())
    } else {
        None
    };
    let chosen = choose(session, req, &target)?;
    let out = req.out.map(Path::to_path_buf).unwrap_or_else(|| {
        PathBuf::from("rocforge-results").join(format!(
            "{}-{}{}",
            req.component,
            target.arch,
            if req.spoof { "-spoofed" } else { "" }
        ))
    });
    let prefix = std::path::absolute(out.join("prefix")).unwrap_or_else(|_| out.join("prefix"));
    let (corpus, mut notes) = planned_corpus(session, req, &spec, &chosen)?;
    if planned_without_gpu {
        notes.push(format!(
            "no GPU here (none under {}): this is the plan for {}; running it needs that GPU, with /dev/kfd and /dev/dri",
            profile.root, target.arch
        ));
    }
    if req.resume {
        notes.push(
            "--resume: the shards and tests the journal in OUT records as finished are not run again"
                .into(),
        );
    }
    let (env, env_remove) = environment(req, &spec, &prefix, hsa_override.as_deref());
    let kmsg = req.sysfs_root.unwrap_or(Path::new("/")).join("dev/kmsg");
    Ok(TestPlan {
        schema: PLAN_SCHEMA,
        component: ComponentName::checked(&recipe.name.value),
        spoofed: req.spoof,
        hsa_override,
        device,
        source: chosen.source,
        tested: chosen.tested,
        dependencies: chosen.dependencies,
        out,
        prefix,
        resume: req.resume,
        machine: req.machine.map_or_else(hostname, str::to_string),
        shards: testplan::shards(spec.kind, spec.shards, corpus.as_deref()),
        corpus: CorpusPlan {
            kind: spec.kind,
            client: spec.client.clone(),
            args: spec.args.clone(),
            timeout_secs: spec.timeout_secs,
            skip_exit_code: spec.skip_exit_code,
            tests: corpus.as_ref().map(Vec::len),
        },
        env,
        env_remove,
        kernel_log: kmsg.exists().then_some(kmsg),
        submit: req.submit.map(crate::redact::url),
        sign_with: req.key.map(Path::to_path_buf),
        notes,
        target,
        spec,
        profile,
        destination,
        key,
        trees: chosen.trees,
        from: req.from.map(str::to_string),
    })
}

/// Where results go and the key that signs them: checked before a long run, not after.
fn sharing(req: &Request<'_>) -> Result<(Option<share::Destination>, Option<SecretKey>)> {
    let destination = req.submit.map(share::Destination::parse).transpose()?;
    let key = req
        .key
        .map(|k| {
            let password = std::env::var(crate::sign::PASSWORD_ENV)
                .ok()
                .filter(|p| !p.is_empty());
            crate::sign::load_secret(k, password).map_err(Error::from)
        })
        .transpose()?;
    Ok((destination, key))
}

/// The names of the tests a store build's corpus holds, checked as the run checks them, in the
/// tested component's own store tree (what is linked into the prefix); the index's artifacts
/// are only there once installed, so their corpus is checked then.
fn planned_corpus(
    session: &Session,
    req: &Request<'_>,
    spec: &Test,
    chosen: &Chosen,
) -> Result<(Option<Vec<String>>, Vec<String>)> {
    let mut notes = Vec::new();
    if let Source::Index { index } = &chosen.source {
        notes.push(format!(
            "the artifacts are downloaded from {index} and installed into the prefix; the test corpus is checked there"
        ));
        return Ok((None, notes));
    }
    if let Source::NotBuilt { build } = &chosen.source {
        notes.push(format!(
            "{} is not built here: `{build}` builds it (see `rocforge plan` for its time), or --from an index installs a published one; the test corpus is known once it exists",
            chosen.tested.name
        ));
        return Ok((None, notes));
    }
    let tree = session.store.tree(chosen.tested.key.as_str());
    let names = match corpus(&session.catalog, req.component, spec, &tree)? {
        // A gtest client lists its tests only when it runs.
        Corpus::Gtest => None,
        Corpus::EachBinary { binaries, .. } => Some(binaries.into_iter().map(|(n, _)| n).collect()),
        Corpus::Ctest { tests } => Some(tests.into_iter().map(|t| t.name).collect()),
    };
    Ok((names, notes))
}

/// The client's environment: the prefix's libraries and tools first, the spoof's override, then
/// the recipe's own variables (which win); and what it must not inherit (a stray
/// HSA_OVERRIDE_GFX_VERSION would spoof a run that is not meant to be).
fn environment(
    req: &Request<'_>,
    spec: &Test,
    prefix: &Path,
    hsa_override: Option<&str>,
) -> (BTreeMap<String, String>, Vec<String>) {
    let mut env = BTreeMap::new();
    env.insert(
        "LD_LIBRARY_PATH".into(),
        format!("{0}/lib:{0}/lib64", prefix.display()),
    );
    env.insert("ROCM_PATH".into(), prefix.display().to_string());
    env.insert(
        "PATH".into(),
        format!(
            "{}/bin:{}",
            prefix.display(),
            std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into())
        ),
    );
    if let Some(v) = hsa_override {
        env.insert("HSA_OVERRIDE_GFX_VERSION".into(), v.to_string());
    }
    for (k, v) in &spec.env {
        env.insert(k.clone(), v.clone());
    }
    let remove = if req.spoof {
        Vec::new()
    } else {
        vec!["HSA_OVERRIDE_GFX_VERSION".into()]
    };
    (env, remove)
}

/// Carries a plan out up to the first test: opens (or, resuming, continues) the journal, lays the
/// artifacts out in the scratch prefix and checks the corpus there, where it runs.
pub fn start(session: &Session, plan: TestPlan) -> Result<Prepared> {
    let start = Record::Start {
        schema: crate::testrun::journal::JOURNAL_SCHEMA.into(),
        component: plan.component.clone(),
        key: plan.tested.key.to_string(),
        arch: plan.target.to_string(),
        spoofed: plan.spoofed,
        shards: plan.spec.shards,
        started: now(),
    };
    let (journal, previous, started) = open_journal(&plan.out, &start, plan.resume)?;
    lay_out(session, &plan)?;
    let corpus = corpus(&session.catalog, &plan.component, &plan.spec, &plan.prefix)?;
    let spec = &plan.spec;
    let run_spec = RunSpec {
        client: plan.prefix.join(&spec.client),
        corpus,
        args: spec.args.clone(),
        env: plan
            .env
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        env_remove: plan.env_remove.clone(),
        shards: spec.shards,
        timeout: Duration::from_secs(spec.timeout_secs),
        dir: plan.out.clone(),
        kernel_log: plan.kernel_log.clone(),
    };
    Ok(Prepared {
        plan,
        started,
        journal,
        previous,
        run_spec,
    })
}

fn summary(d: &Device) -> DeviceSummary {
    DeviceSummary {
        target: d.target.clone(),
        target_id: d.target_id.clone(),
        name: d.name.clone(),
        gfx_target_version: d.gfx_target_version,
        compute_units: d.compute_units,
        memory: d.memory.clone(),
    }
}

/// OUT/journal.jsonl, new or (with `resume`) continued, and when the run started: a resumed
/// run keeps its first start.
fn open_journal(out: &Path, start: &Record, resume: bool) -> Result<(Journal, Vec<Record>, u64)> {
    let (journal, previous) = Journal::open(&out.join("journal.jsonl"), start, resume)?;
    let started = match (previous.first(), start) {
        (Some(Record::Start { started, .. }), _) | (_, Record::Start { started, .. }) => *started,
        _ => now(),
    };
    Ok((journal, previous, started))
}

/// The scratch prefix: the store trees hard-linked, or the index's artifacts installed.
fn lay_out(session: &Session, plan: &TestPlan) -> Result<()> {
    let prefix = plan.prefix.as_path();
    let io_err = |e: std::io::Error| {
        Error::hinted(
            format!("{}: {e}", prefix.display()),
            "check free disk space and permissions of --out",
        )
    };
    crate::fsutil::remove_tree(prefix).map_err(io_err)?;
    if let Source::Store { .. } = plan.source {
        for key in &plan.trees {
            crate::fsutil::link_tree(&session.store.tree(key), prefix).map_err(io_err)?;
        }
        return Ok(());
    }
    let from = plan.from.as_deref().expect("an index was chosen");
    let keys = session.trusted_keys(&[])?;
    let stop = std::sync::atomic::AtomicBool::new(false);
    let install_req = install::Request {
        allow_downgrade: false,
        components: &[plan.component.to_string()],
        targets: std::slice::from_ref(&plan.target),
        from,
        prefix,
        allow_unsigned: false,
        allowed_hosts: &[],
        keys: &keys,
        cache_dir: crate::source::cache::Cache::default_root(),
        max_bytes: install::DEFAULT_MAX_BYTES,
        download: Default::default(),
        runtime: install::RuntimeCheck::Auto,
        stop: &stop,
    };
    let report = install::install(&install_req, session.reporter.as_ref())?;
    // The index may have changed since it was read: the journal names what was chosen.
    if let Some(r) = report.installed.iter().find(|r| r.name == plan.component)
        && r.key != plan.tested.key
    {
        return Err(Error::hinted(
            format!(
                "{} changed while it was installed from {from}",
                plan.component
            ),
            "run the test again",
        ));
    }
    Ok(())
}

/// What the recipe's `[test]` runs, checked to be in the prefix.
fn corpus(catalog: &Catalog, component: &str, spec: &Test, prefix: &Path) -> Result<Corpus> {
    let client = prefix.join(&spec.client);
    Ok(match spec.kind {
        TestKind::Gtest => {
            if !client.is_file() {
                return Err(Error::hinted(
                    format!(
                        "the test client {} is not in {component}'s install tree",
                        spec.client
                    ),
                    "the recipe's [test] client is relative to the install prefix; check that the build installs it",
                ));
            }
            Corpus::Gtest
        }
        TestKind::EachBinary => {
            let hint = "the recipe's [test] dir is relative to the install prefix; check that the build installs the binaries there";
            let binaries = run::find_binaries(prefix, &spec.client).map_err(|e| {
                Error::hinted(
                    format!("the test dir {} of {component}: {e}", spec.client),
                    hint,
                )
            })?;
            if binaries.is_empty() {
                return Err(Error::hinted(
                    format!(
                        "no executables match the test dir {} in {component}'s install tree",
                        spec.client
                    ),
                    hint,
                ));
            }
            Corpus::EachBinary {
                binaries,
                skip_exit_code: spec.skip_exit_code,
            }
        }
        TestKind::Ctest => Corpus::Ctest {
            tests: ctest_tree(catalog, component, &spec.client, prefix)?,
        },
    })
}

fn pick_device<'p>(
    prof: &'p Profile,
    table: &ArchTable,
    arch: &str,
    spoof: bool,
    component: &str,
) -> Result<Option<&'p Device>> {
    let reasons = || prof.why_none.join("; ");
    if prof.devices.is_empty() {
        return Err(Error::hinted(
            format!("no GPU found under {}", prof.root),
            format!("it may be that: {}", reasons()),
        ));
    }
    let names = prof
        .devices
        .iter()
        .map(|d| {
            d.target
                .clone()
                .unwrap_or_else(|| format!("gfx_target_version {}", d.gfx_target_version))
        })
        .collect::<Vec<_>>()
        .join(", ");
    if spoof {
        if prof
            .devices
            .iter()
            .any(|d| d.target.as_deref() == Some(arch))
        {
            return Err(Error::hinted(
                format!(
                    "--spoof runs another target's artifact, but {arch} is this GPU's own target"
                ),
                format!("drop --spoof: `rocforge test {component} --arch {arch}`"),
            ));
        }
        return match prof
            .devices
            .iter()
            .find(|d| d.nearest.as_deref() == Some(arch))
        {
            Some(d) => Ok(Some(d)),
            None => Err(Error::hinted(
                format!("{arch} is not the nearest target of this machine's GPU ({names})"),
                match prof.devices.iter().find_map(|d| d.nearest.clone()) {
                    Some(n) => format!(
                        "spoof the nearest target: `rocforge test {component} --arch {n} --spoof` (HSA_OVERRIDE_GFX_VERSION={})",
                        table.get(&n).map(|a| a.hsa_override()).unwrap_or_default()
                    ),
                    None => "this GPU has no nearest target to spoof".into(),
                },
            )),
        };
    }
    if let Some(d) = prof
        .devices
        .iter()
        .find(|d| d.target.as_deref() == Some(arch))
    {
        return Ok(Some(d));
    }
    let alias = prof
        .devices
        .iter()
        .find(|d| d.may_be.iter().any(|m| m == arch))
        .map(|d| {
            format!(
                "; a {arch} reports as {} on some kernels (a newer kernel reports it as {arch})",
                d.target.as_deref().unwrap_or("?")
            )
        })
        .unwrap_or_default();
    let first = &prof.devices[0];
    let suggestion = match (&first.target, &first.nearest) {
        (Some(t), Some(n)) => format!(
            "test this GPU's own build (`rocforge build {component} --arch {t}`, then `rocforge test {component} --arch {t}`), or its nearest target's artifact with `--arch {n} --spoof`"
        ),
        (Some(t), None) => {
            format!("test this GPU's own build: `rocforge test {component} --arch {t}`")
        }
        _ => "`rocforge detect` shows what this machine has".into(),
    };
    Err(Error::hinted(
        format!("this machine's GPU is {names}, not {arch}{alias}"),
        suggestion,
    ))
}

/// The tests of a component's installed CTest tree, every program checked to be in the tree
/// before anything runs (a path into the build directory would fail each test alike).
fn ctest_tree(
    catalog: &Catalog,
    component: &str,
    dir: &str,
    prefix: &Path,
) -> Result<Vec<ctest::CtestTest>> {
    let root = prefix.join(dir);
    if !root.join(ctest::TESTFILE).is_file() {
        return Err(Error::hinted(
            format!(
                "{component}'s install tree has no {dir}/{}",
                ctest::TESTFILE
            ),
            "the recipe's [test] dir is the directory the build installs CTestTestfile.cmake to, relative to the install prefix (e.g. bin/rocRAND)",
        ));
    }
    let map = ctest::PrefixMap {
        built: catalog.release.prefix.clone(),
        installed: prefix.to_path_buf(),
    };
    let tests = ctest::read_tree(&root, &map).map_err(Error::One)?;
    if tests.is_empty() {
        return Err(Error::hinted(
            format!("{dir}/{} of {component} declares no tests", ctest::TESTFILE),
            "check that the build enables its tests (e.g. -DBUILD_TEST=ON)",
        ));
    }
    for t in &tests {
        if !t.disabled && !t.program.is_file() {
            let shown = t.program.strip_prefix(prefix).map_or_else(
                |_| t.program.display().to_string(),
                |p| p.display().to_string(),
            );
            return Err(Error::hinted(
                format!(
                    "test \"{}\" ({}) runs {shown}, which is not in {component}'s install tree",
                    t.name, t.origin
                ),
                format!(
                    "an installed CTestTestfile must name programs under the prefix ({}) or relative to itself; a path into the build directory means the tests were not installed with it",
                    catalog.release.prefix
                ),
            ));
        }
    }
    Ok(tests)
}

impl Prepared {
    /// One line saying what will run, where, and how hangs are caught.
    pub fn describe(&self) -> String {
        self.plan.describe()
    }

    /// What this run carries out.
    pub fn plan(&self) -> &TestPlan {
        &self.plan
    }

    /// The command that continues this run after an interruption.
    pub fn resume_command(&self, out: Option<&Path>) -> String {
        let p = &self.plan;
        crate::testrun::journal::resume_command(&p.component, &p.target.to_string(), p.spoofed, out)
    }

    /// Runs the tests, writes OUT/results.json and OUT/junit.xml, and submits them if asked.
    pub fn run(mut self, reporter: &dyn Reporter) -> Result<Outcome> {
        let result = run::run(&self.run_spec, &mut self.journal, &self.previous, reporter)?;
        let tests = bundle::results(&result.tests);
        let mut xml_cases = Vec::new();
        for x in &result.xml {
            // The client wrote it: read up to the cap a whole run's report needs.
            if let Ok(bytes) = crate::fsutil::read_regular(x, MAX_XML_BYTES)
                && let Ok(cases) = crate::testrun::gtest::parse_xml(&bytes)
            {
                xml_cases.extend(cases);
            }
        }
        let xml_check = (!result.xml.is_empty())
            .then(|| bundle::check_xml(&tests, &xml_cases, result.xml.len()));
        let plan = self.plan;
        let spec = &plan.spec;
        let mut environment = plan.env.clone();
        if let Ok(x) = std::env::var("HSA_XNACK") {
            environment.insert("HSA_XNACK".into(), x);
        }
        if spec.kind == TestKind::Gtest {
            environment.insert("GTEST_TOTAL_SHARDS".into(), spec.shards.to_string());
        }
        let b = Bundle {
            schema: bundle::RESULTS_SCHEMA.into(),
            rocforge_version: env!("CARGO_PKG_VERSION").into(),
            machine: plan.machine.clone(),
            started: self.started,
            finished: now(),
            component: plan.tested,
            dependencies: plan.dependencies,
            arch: plan.target.to_string(),
            spoofed: plan.spoofed,
            hsa_override: plan.hsa_override,
            device: plan.device,
            profile: plan.profile,
            environment,
            client: ClientSpec {
                path: spec.client.clone(),
                args: spec.args.clone(),
                shards: spec.shards,
                timeout_secs: spec.timeout_secs,
            },
            shards: result.shards.clone(),
            classes: bundle::classes(&tests),
            summary: Summary::of(tests.iter().map(|t| t.outcome)),
            tests,
            xml_check,
            kernel_log: match &result.kernel_log {
                None => "not available".into(),
                Some(Ok(())) => "read".into(),
                Some(Err(e)) => format!("unreadable: {e}"),
            },
        };
        let out = &plan.out;
        let write = |name: &str, bytes: &[u8]| {
            let path = out.join(name);
            crate::fsutil::write_atomic(&path, bytes)
                .map_err(|e| Error::hinted(format!("{}: {e}", path.display()), "check --out"))
                .map(|()| path)
        };
        let results = write(
            "results.json",
            &serde_json::to_vec_pretty(&b).expect("plain data"),
        )?;
        let junit = write("junit.xml", bundle::junit(&b).as_bytes())?;
        let submitted = match &plan.destination {
            Some(dest) => {
                let client = crate::publish::client()?;
                Some(
                    share::submit(&client, dest, out, &b, plan.key.as_ref()).map_err(|e| {
                        Error::hinted(
                            format!("the results are in {}, but {e}", results.display()),
                            e.hint(),
                        )
                    })?,
                )
            }
            None => None,
        };
        Ok(Outcome {
            bundle: b,
            results,
            junit,
            submitted,
        })
    }
}
