//! `detect`, `test` and `report`: tests on hardware.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use super::progress::TermReporter;
use super::{CliError, Format, Global, Result, only_text_or_json, root};
use rocforge::catalog::Catalog;
use rocforge::diag::Diagnostic;
use rocforge::install;
use rocforge::plan;
use rocforge::recipe::TestKind;
use rocforge::report;
use rocforge::testrun::bundle::{self, Artifact, Bundle, ClientSpec, DeviceSummary, Summary};
use rocforge::testrun::detect::{self, Device, Profile};
use rocforge::testrun::journal::{Journal, Record};
use rocforge::testrun::run::{self, Corpus, RunSpec};
use rocforge::testrun::share;

fn one(e: impl ToString, hint: impl Into<String>) -> CliError {
    CliError::One(Diagnostic::new(e.to_string()).hint(hint))
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn profile(g: &Global, sysfs_root: Option<&Path>) -> Result<(Profile, rocforge::arch::ArchTable)> {
    let table = super::arch_cmd::arch_table(g)?;
    let root = sysfs_root.unwrap_or(Path::new("/"));
    let p = detect::detect(root, &table, std::env::var("HSA_XNACK").ok());
    Ok((p, table))
}

fn print_device(d: &Device) {
    println!(
        "GPU (KFD node {}): {}{}",
        d.node,
        d.target_id.clone().unwrap_or_else(|| format!(
            "unknown target (gfx_target_version {})",
            d.gfx_target_version
        )),
        d.name
            .as_ref()
            .map(|n| format!(" - {n}"))
            .unwrap_or_default()
    );
    println!("  gfx_target_version {}", d.gfx_target_version);
    println!(
        "  compute units      {} ({} SIMDs, {} per CU)",
        d.compute_units, d.simd_count, d.simd_per_cu
    );
    println!(
        "  memory             {}, {} in {} bank(s)",
        if d.memory == "uma" {
            "UMA (carve-out of system memory)"
        } else {
            "VRAM"
        },
        rocforge::units::format_size(d.memory_bytes),
        d.mem_banks
    );
    if let Some(id) = &d.pci_device_id {
        println!("  PCI device         {id}");
    }
    if let Some(m) = d.drm_render_minor {
        println!("  render node        /dev/dri/renderD{m}");
    }
    match (&d.nearest, d.rocm_supported) {
        (_, Some(true)) => println!("  ROCm support       yes (native builds are AMD's own)"),
        (Some(n), _) => println!(
            "  nearest target     {n} (spoof with HSA_OVERRIDE_GFX_VERSION={})",
            d.nearest_override.as_deref().unwrap_or("?")
        ),
        (None, _) => {}
    }
    if !d.may_be.is_empty() {
        println!(
            "  may be             {} (these GPUs also report as {})",
            d.may_be.join(", "),
            d.target.as_deref().unwrap_or("this target")
        );
    }
}

pub fn detect(g: &Global, sysfs_root: Option<&Path>) -> Result<ExitCode> {
    only_text_or_json(g, "detect")?;
    let (p, _) = profile(g, sysfs_root)?;
    let code = if p.devices.is_empty() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    };
    if g.format == Format::Json {
        println!("{}", serde_json::to_string_pretty(&p).unwrap_or_default());
        return Ok(code);
    }
    for d in &p.devices {
        print_device(d);
    }
    if p.devices.is_empty() {
        println!("no GPU found under {}", p.root);
        println!("it may be that:");
        for w in &p.why_none {
            println!("  - {w}");
        }
    }
    println!(
        "xnack              {} (HSA_XNACK {}, amdgpu noretry {})",
        p.xnack.mode,
        p.xnack.hsa_xnack.as_deref().unwrap_or("unset"),
        p.xnack
            .noretry
            .map_or("unreadable".to_string(), |n| n.to_string())
    );
    println!(
        "kernel             {}",
        p.kernel.as_deref().unwrap_or("unknown")
    );
    println!(
        "amdgpu driver      {}",
        p.driver_version
            .as_deref()
            .unwrap_or("in-tree (no module version)")
    );
    if !p.live {
        println!(
            "(read from the recorded tree {}, not live hardware)",
            p.root
        );
    }
    Ok(code)
}

pub struct TestArgs<'a> {
    pub component: &'a str,
    pub spoof: bool,
    pub resume: bool,
    pub sysfs_root: Option<&'a Path>,
    pub out: Option<&'a Path>,
    pub machine: Option<&'a str>,
    pub submit: Option<&'a str>,
    pub key: Option<&'a Path>,
    pub from: Option<&'a str>,
}

fn share_err(e: share::ShareError) -> CliError {
    one(&e, e.hint())
}

fn http_client() -> Result<reqwest::blocking::Client> {
    rocforge::publish::client().map_err(|e| one(&e, e.hint()))
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".into())
}

/// The tests of a component's installed CTest tree, every program checked to be in the tree
/// before anything runs (a path into the build directory would fail each test alike).
fn ctest_tree(
    catalog: &Catalog,
    component: &str,
    dir: &str,
    prefix: &Path,
) -> Result<Vec<rocforge::testrun::ctest::CtestTest>> {
    use rocforge::testrun::ctest;
    let root = prefix.join(dir);
    if !root.join(ctest::TESTFILE).is_file() {
        return Err(one(
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
    let tests = ctest::read_tree(&root, &map).map_err(CliError::One)?;
    if tests.is_empty() {
        return Err(one(
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
            return Err(one(
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

pub fn test(g: &Global, a: TestArgs<'_>) -> Result<ExitCode> {
    only_text_or_json(g, "test")?;
    let catalog = Catalog::load(root(g), g.release.as_deref())?;
    let Some(recipe) = catalog.get(a.component) else {
        return Err(catalog.unknown_component(a.component).into());
    };
    let Some(spec) = recipe.test.clone() else {
        return Err(one(
            format!("{} has no test client", a.component),
            format!(
                "add a [test] table (client = \"bin/<name>-test\") to {}",
                recipe.file.display
            ),
        ));
    };
    // Where results go and the key that signs them: checked before a long run, not after.
    let submit = a
        .submit
        .map(share::Destination::parse)
        .transpose()
        .map_err(share_err)?;
    let key = match a.key {
        Some(k) => Some(
            rocforge::sign::load_secret(
                k,
                std::env::var(rocforge::sign::PASSWORD_ENV)
                    .ok()
                    .filter(|p| !p.is_empty()),
            )
            .map_err(|e| one(&e, e.hint()))?,
        ),
        None => None,
    };
    let targets = super::plan_cmd::targets(g, &catalog)?;
    if targets.len() != 1 || g.arch.is_none() {
        return Err(one(
            "`rocforge test` runs one target's artifact",
            "pass --arch with one target, e.g. --arch gfx90c (or --arch gfx900 --spoof)",
        ));
    }
    let target = targets[0].clone();
    let arch = target.arch.clone();
    let (prof, table) = profile(g, a.sysfs_root)?;
    let device = pick_device(&prof, &table, &arch, a.spoof, a.component)?;
    let hsa_override = if a.spoof {
        table.get(&arch).map(|x| x.hsa_override())
    } else {
        None
    };

    // The artifact and its dependencies, from the store (container build first, else host).
    let store = super::build_cmd::store(g);
    let lock = super::sources::lockfile(&catalog)?;
    let candidates = rocforge::testrun::select::candidates(
        &store.entries(),
        &catalog.release.name,
        a.component,
        &target,
    );
    let found = rocforge::testrun::select::choose(candidates, &store, &target, |c| {
        let req = plan::Request {
            components: vec![a.component.to_string()],
            targets: c.targets.clone(),
            runtime: c.runtime,
            runtime_image: super::build_cmd::runtime_image_default(&catalog, &lock, c.runtime),
            lock: lock.clone(),
            overlays: Vec::new(),
        };
        plan::plan(&catalog, &req, &store)
    })?;
    if let Some(c) = found.as_ref().filter(|_| !g.quiet) {
        eprintln!("{}", c.describe(a.component));
    }
    let found = found.map(|c| c.plan);
    let entry = |s: &plan::Step| -> Artifact {
        let meta = store.find(&s.key.0).ok();
        Artifact {
            name: s.component.clone(),
            version: s.version.clone(),
            key: s.key.0.clone(),
            targets: meta.as_ref().map(|m| m.targets.clone()).unwrap_or_default(),
            runtime: meta.map(|m| m.runtime).unwrap_or_default(),
        }
    };
    // What goes into the prefix: store trees, or (when the store lacks them) an index's
    // artifacts, chosen now so the journal knows the key before anything is installed.
    let (plan, tested, dependencies) = match (found, a.from) {
        (Some(plan), _) => {
            let step = plan
                .step(a.component)
                .expect("requested component is planned");
            let tested = entry(step);
            let deps = plan
                .steps
                .iter()
                .filter(|s| s.component != a.component)
                .map(entry)
                .collect::<Vec<_>>();
            (Some(plan), tested, deps)
        }
        (None, Some(from)) => {
            let keys = super::artifact_cmd::trusted(g, &[])?;
            let client = rocforge::source::download::client_confined(
                &Default::default(),
                &install::index_url(from).map_err(|e| one(&e, e.hint()))?,
                &[],
            );
            let loaded =
                install::load_index(&client, from, &keys, false).map_err(|e| one(&e, e.hint()))?;
            let chosen = install::resolve(
                &loaded.index,
                &[a.component.to_string()],
                &[target.to_string()],
            )
            .map_err(|e| one(&e, e.hint()))?;
            let as_entry = |x: &rocforge::package::index::Artifact| Artifact {
                name: x.name.clone(),
                version: x.version.clone(),
                key: x.key.clone(),
                targets: x.targets.clone(),
                runtime: "index".into(),
            };
            let tested = chosen
                .iter()
                .find(|x| x.name == a.component)
                .map(|x| as_entry(x))
                .expect("resolve returns the requested component");
            let deps = chosen
                .iter()
                .filter(|x| x.name != a.component)
                .map(|x| as_entry(x))
                .collect();
            (None, tested, deps)
        }
        (None, None) => {
            return Err(one(
                format!("{} for {target} is not in the store", a.component),
                format!(
                    "build it first: `rocforge build {} --arch {target}` (add --runtime host to build without containers), or install it from an artifact index with --from URL_OR_DIR",
                    a.component
                ),
            ));
        }
    };

    let out = a.out.map(Path::to_path_buf).unwrap_or_else(|| {
        PathBuf::from("rocforge-results").join(format!(
            "{}-{arch}{}",
            a.component,
            if a.spoof { "-spoofed" } else { "" }
        ))
    });
    let started = now();
    let start = Record::Start {
        schema: rocforge::testrun::journal::JOURNAL_SCHEMA.into(),
        component: a.component.into(),
        key: tested.key.clone(),
        arch: target.to_string(),
        spoofed: a.spoof,
        shards: spec.shards,
        started,
    };
    let (mut journal, previous) = Journal::open(&out.join("journal.jsonl"), &start, a.resume)
        .map_err(|e| one(&e, e.hint()))?;
    let started = match previous.first() {
        Some(Record::Start { started, .. }) => *started,
        _ => started,
    };

    // The scratch prefix: the component's tree and its dependencies', hard-linked.
    let prefix = std::path::absolute(out.join("prefix")).unwrap_or_else(|_| out.join("prefix"));
    let io_err = |e: std::io::Error| {
        one(
            format!("{}: {e}", prefix.display()),
            "check free disk space and permissions of --out",
        )
    };
    rocforge::fsutil::remove_tree(&prefix).map_err(io_err)?;
    match (&plan, a.from) {
        (Some(plan), _) => {
            for s in &plan.steps {
                rocforge::fsutil::link_tree(&store.tree(&s.key.0), &prefix).map_err(io_err)?;
            }
        }
        (None, Some(from)) => {
            let keys = super::artifact_cmd::trusted(g, &[])?;
            let stop = std::sync::atomic::AtomicBool::new(false);
            let installer = TermReporter::new(g.quiet);
            let req = install::Request {
                allow_downgrade: false,
                components: &[a.component.to_string()],
                targets: &[target.to_string()],
                from,
                prefix: &prefix,
                allow_unsigned: false,
                allowed_hosts: &[],
                keys: &keys,
                cache_dir: rocforge::source::cache::Cache::default_root(),
                max_bytes: install::DEFAULT_MAX_BYTES,
                download: Default::default(),
                runtime: install::RuntimeCheck::Auto,
                stop: &stop,
            };
            let report = install::install(&req, &installer).map_err(|e| one(&e, e.hint()))?;
            // The index may have changed since it was read: the journal names what was chosen.
            if let Some(r) = report.installed.iter().find(|r| r.name == a.component)
                && r.key != tested.key
            {
                return Err(one(
                    format!("{} changed while it was installed from {from}", a.component),
                    "run the test again",
                ));
            }
        }
        (None, None) => unreachable!("checked above"),
    }
    let client = prefix.join(&spec.client);
    let corpus = match spec.kind {
        TestKind::Gtest => {
            if !client.is_file() {
                return Err(one(
                    format!(
                        "the test client {} is not in {}'s install tree",
                        spec.client, a.component
                    ),
                    "the recipe's [test] client is relative to the install prefix; check that the build installs it",
                ));
            }
            Corpus::Gtest
        }
        TestKind::EachBinary => {
            let hint = "the recipe's [test] dir is relative to the install prefix; check that the build installs the binaries there";
            let binaries = run::find_binaries(&prefix, &spec.client).map_err(|e| {
                one(
                    format!("the test dir {} of {}: {e}", spec.client, a.component),
                    hint,
                )
            })?;
            if binaries.is_empty() {
                return Err(one(
                    format!(
                        "no executables match the test dir {} in {}'s install tree",
                        spec.client, a.component
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
            tests: ctest_tree(&catalog, a.component, &spec.client, &prefix)?,
        },
    };
    let mut env: Vec<(String, String)> = vec![
        (
            "LD_LIBRARY_PATH".into(),
            format!("{0}/lib:{0}/lib64", prefix.display()),
        ),
        ("ROCM_PATH".into(), prefix.display().to_string()),
        (
            "PATH".into(),
            format!(
                "{}/bin:{}",
                prefix.display(),
                std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into())
            ),
        ),
    ];
    if let Some(v) = &hsa_override {
        env.push(("HSA_OVERRIDE_GFX_VERSION".into(), v.clone()));
    }
    for (k, v) in &spec.env {
        env.push((k.clone(), v.clone()));
    }
    let kmsg = a.sysfs_root.unwrap_or(Path::new("/")).join("dev/kmsg");
    let run_spec = RunSpec {
        client: client.clone(),
        corpus,
        args: spec.args.clone(),
        env: env.clone(),
        env_remove: if a.spoof {
            Vec::new()
        } else {
            vec!["HSA_OVERRIDE_GFX_VERSION".into()]
        },
        shards: spec.shards,
        timeout: Duration::from_secs(spec.timeout_secs),
        dir: out.clone(),
        kernel_log: kmsg.exists().then_some(kmsg),
    };
    let reporter = TermReporter::new(g.quiet);
    if !g.quiet {
        eprintln!(
            "testing {} {} for {target}{} on {}: {} shard(s), {}s {} kills a test",
            a.component,
            tested.version,
            if a.spoof {
                format!(
                    " (spoofed: HSA_OVERRIDE_GFX_VERSION={})",
                    hsa_override.as_deref().unwrap_or("?")
                )
            } else {
                String::new()
            },
            device
                .and_then(|d| d.target_id.clone())
                .unwrap_or_else(|| "no GPU".into()),
            spec.shards,
            spec.timeout_secs,
            match spec.kind {
                TestKind::EachBinary => "per binary",
                TestKind::Ctest => "per test",
                TestKind::Gtest => "without progress",
            }
        );
    }
    // Ctrl-C: every finished test is already in the journal (written and synced one by one),
    // and the running client dies with this process (PR_SET_PDEATHSIG), so exiting at once
    // loses nothing and records no test as crashed.
    let resume = rocforge::testrun::journal::resume_command(
        a.component,
        &target.to_string(),
        a.spoof,
        a.out,
    );
    let _ = ctrlc::set_handler(move || {
        eprintln!("\ninterrupted: the tests that finished are kept; `{resume}` continues");
        std::process::exit(130);
    });
    let result =
        run::run(&run_spec, &mut journal, &previous, &reporter).map_err(|e| one(&e, e.hint()))?;

    let tests = bundle::results(&result.tests);
    let mut xml_cases = Vec::new();
    for x in &result.xml {
        if let Ok(bytes) = std::fs::read(x)
            && let Ok(cases) = rocforge::testrun::gtest::parse_xml(&bytes)
        {
            xml_cases.extend(cases);
        }
    }
    let xml_check =
        (!result.xml.is_empty()).then(|| bundle::check_xml(&tests, &xml_cases, result.xml.len()));
    let summary = Summary::of(tests.iter().map(|t| t.outcome));
    let mut environment: BTreeMap<String, String> = env.into_iter().collect();
    if let Ok(x) = std::env::var("HSA_XNACK") {
        environment.insert("HSA_XNACK".into(), x);
    }
    if spec.kind == TestKind::Gtest {
        environment.insert("GTEST_TOTAL_SHARDS".into(), spec.shards.to_string());
    }
    let b = Bundle {
        schema: bundle::RESULTS_SCHEMA.into(),
        rocforge_version: env!("CARGO_PKG_VERSION").into(),
        machine: a.machine.map(str::to_string).unwrap_or_else(hostname),
        started,
        finished: now(),
        component: tested,
        dependencies,
        arch: target.to_string(),
        spoofed: a.spoof,
        hsa_override,
        device: device.map(|d| DeviceSummary {
            target: d.target.clone(),
            target_id: d.target_id.clone(),
            name: d.name.clone(),
            gfx_target_version: d.gfx_target_version,
            compute_units: d.compute_units,
            memory: d.memory.clone(),
        }),
        profile: prof.clone(),
        environment,
        client: ClientSpec {
            path: spec.client.clone(),
            args: spec.args.clone(),
            shards: spec.shards,
            timeout_secs: spec.timeout_secs,
        },
        shards: result.shards.clone(),
        classes: bundle::classes(&tests),
        summary: summary.clone(),
        tests,
        xml_check,
        kernel_log: match &result.kernel_log {
            None => "not available".into(),
            Some(Ok(())) => "read".into(),
            Some(Err(e)) => format!("unreadable: {e}"),
        },
    };
    let json_path = out.join("results.json");
    rocforge::fsutil::write_atomic(
        &json_path,
        &serde_json::to_vec_pretty(&b).expect("plain data"),
    )
    .map_err(|e| one(format!("{}: {e}", json_path.display()), "check --out"))?;
    let junit_path = out.join("junit.xml");
    rocforge::fsutil::write_atomic(&junit_path, bundle::junit(&b).as_bytes())
        .map_err(|e| one(format!("{}: {e}", junit_path.display()), "check --out"))?;
    let code = if summary.failures() > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    };
    let submitted = match &submit {
        Some(dest) => Some(
            share::submit(&http_client()?, dest, &out, &b, key.as_ref()).map_err(|e| {
                one(
                    format!("the results are in {}, but {e}", json_path.display()),
                    e.hint(),
                )
            })?,
        ),
        None => None,
    };
    if g.format == Format::Json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "schema": "rocforge.test/1",
                "results": json_path,
                "junit": junit_path,
                "submitted": submitted,
                "summary": summary,
                "classes": b.classes,
            }))
            .unwrap_or_default()
        );
        return Ok(code);
    }
    println!("{}", summary.line());
    for (c, n) in &b.classes {
        println!("  {:<18} {n}", c.name());
    }
    for t in b.tests.iter().filter(|t| t.outcome.is_failure()).take(20) {
        println!(
            "  {} {}: {}",
            t.outcome.name().to_uppercase(),
            t.name,
            t.class.map_or("", |c| c.describe())
        );
    }
    println!("results: {}", json_path.display());
    println!("junit:   {}", junit_path.display());
    if let Some(s) = &submitted {
        println!("submitted: {s}");
    }
    Ok(code)
}

fn pick_device<'p>(
    prof: &'p Profile,
    table: &rocforge::arch::ArchTable,
    arch: &str,
    spoof: bool,
    component: &str,
) -> Result<Option<&'p Device>> {
    let reasons = || prof.why_none.join("; ");
    if prof.devices.is_empty() {
        return Err(one(
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
            return Err(one(
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
            None => Err(one(
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
    Err(one(
        format!("this machine's GPU is {names}, not {arch}{alias}"),
        suggestion,
    ))
}

pub fn report(
    g: &Global,
    results: &[PathBuf],
    out: &Path,
    keys: &[String],
    allow_unsigned: bool,
) -> Result<ExitCode> {
    only_text_or_json(g, "report")?;
    let mut bundles = Vec::new();
    let mut client = None;
    let mut trust: Option<rocforge::trust::Resolved> = None;
    for r in results {
        let text = r.to_string_lossy();
        if text.starts_with("oci://") {
            let repo = rocforge::oci::Repository::parse(&text)
                .map_err(|e| share_err(share::ShareError::Oci(e)))?;
            if client.is_none() {
                client = Some(http_client()?);
            }
            let pulled =
                share::pull_all(client.as_ref().expect("just set"), &repo).map_err(share_err)?;
            if pulled.is_empty() {
                return Err(one(
                    format!(
                        "{text} holds no results artifacts (tags {}*)",
                        share::TAG_PREFIX
                    ),
                    "submit results there first: `rocforge test COMPONENT --arch T --submit oci://…`",
                ));
            }
            if trust.is_none() {
                let roots = super::artifact_cmd::trusted(g, keys)?;
                let state =
                    rocforge::trust::StateFile::load_default().map_err(|e| one(&e, e.hint()))?;
                trust = Some(rocforge::trust::Resolved::from_roots(&roots, &state.state));
            }
            let trust = trust.as_ref().expect("just set");
            let (mut signed, mut unsigned, mut refused) = (0, 0, 0);
            for p in pulled {
                match &p.signature {
                    Some(sig) => match trust.verify_bytes(&p.results, sig, &p.reference) {
                        Ok(v) => {
                            signed += 1;
                            if !g.quiet {
                                eprintln!("{}: signed by trusted key {}", p.reference, v.key_id);
                            }
                        }
                        Err(e) => {
                            refused += 1;
                            eprintln!("warning: {}: refused: {e}", p.reference);
                            continue;
                        }
                    },
                    None if allow_unsigned => {
                        unsigned += 1;
                        eprintln!(
                            "warning: {}: unsigned, included because of --allow-unsigned",
                            p.reference
                        );
                    }
                    None => {
                        refused += 1;
                        eprintln!(
                            "warning: {}: unsigned, left out (--allow-unsigned includes it)",
                            p.reference
                        );
                        continue;
                    }
                }
                bundles
                    .push(report::parse(&p.results, &p.reference).map_err(|e| one(&e, e.hint()))?);
            }
            eprintln!(
                "{text}: {signed} signed by trusted keys, {unsigned} unsigned included, {refused} left out"
            );
            if signed + unsigned == 0 {
                return Err(one(
                    format!("{text}: no results artifact is signed by a trusted key"),
                    "trust the submitters' public keys with --key RW… (or [trust] keys in rocforge.toml), or pass --allow-unsigned to read unsigned ones",
                ));
            }
            continue;
        }
        bundles.push(report::load(r).map_err(|e| one(&e, e.hint()))?);
    }
    let rep = report::build(&bundles);
    let html = report::html::render(&rep);
    let md = report::markdown::render(&rep);
    let (h, m) = (out.join("report.html"), out.join("report.md"));
    for (p, text) in [(&h, &html), (&m, &md)] {
        rocforge::fsutil::write_atomic(p, text.as_bytes())
            .map_err(|e| one(format!("{}: {e}", p.display()), "check --out"))?;
    }
    println!("{}", h.display());
    println!("{}", m.display());
    Ok(ExitCode::SUCCESS)
}
