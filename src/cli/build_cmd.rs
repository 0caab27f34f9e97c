//! `build`, `image build`, `doctor` and `store`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::json;

use super::progress::TermReporter;
use super::{CliError, Format, Global, Result, only_text_or_json, root};
use rocforge::build::{BuildOptions, Builder, StepResult, jobs};
use rocforge::catalog::Catalog;
use rocforge::config::Config;
use rocforge::diag::Diagnostic;
use rocforge::plan::{self, key::RuntimeKind, render};
use rocforge::progress::Reporter;
use rocforge::runtime::{self, ContainerRuntime, Kind, RuntimeArgs};
use rocforge::source::cache::Cache;
use rocforge::source::download::DownloadOptions;
use rocforge::source::prepare::Sources;
use rocforge::store::{Store, StoreView};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RuntimeChoice {
    Podman,
    Docker,
    Host,
}

fn runtime_error(e: runtime::RuntimeError) -> CliError {
    CliError::One(Diagnostic::new(e.to_string()).hint(e.hint()))
}

/// The runtime asked for and the podman and docker arguments of rocforge.toml (`run` ones only
/// when something will be run).
fn runtime_config(
    choice: Option<RuntimeChoice>,
    config: &Config,
    with_run: bool,
) -> (Option<Kind>, RuntimeArgs, RuntimeArgs) {
    let wanted = choice.map(|c| match c {
        RuntimeChoice::Podman => Kind::Podman,
        RuntimeChoice::Docker => Kind::Docker,
        RuntimeChoice::Host => Kind::Host,
    });
    let run = |args: &Vec<String>| if with_run { args.clone() } else { Vec::new() };
    let podman = RuntimeArgs {
        global: config.podman_args.clone(),
        run: run(&config.podman_run_args),
    };
    let docker = RuntimeArgs {
        global: config.docker_args.clone(),
        run: run(&config.docker_run_args),
    };
    (wanted, podman, docker)
}

pub fn open_runtime(
    choice: Option<RuntimeChoice>,
    config: &Config,
) -> Result<Arc<dyn ContainerRuntime>> {
    let (wanted, podman, docker) = runtime_config(choice, config, true);
    runtime::detect(wanted, podman, docker)
        .map(Arc::from)
        .map_err(runtime_error)
}

/// What the container runtime says of the release's builder image, for keys: asked only when
/// rocforge.lock does not pin the image and the build runs in a container.
pub fn runtime_image(
    catalog: &Catalog,
    lock: &rocforge::source::lock::Lockfile,
    config: &Config,
    choice: Option<RuntimeChoice>,
    kind: RuntimeKind,
) -> plan::RuntimeImage {
    let image = &catalog.release.image;
    if kind == RuntimeKind::Host || lock.image(&catalog.release.name, image).is_some() {
        return plan::RuntimeImage::Unknown;
    }
    let (wanted, podman, docker) = runtime_config(choice, config, false);
    match runtime::local_image_id(wanted, podman, docker, image) {
        None => plan::RuntimeImage::Unknown,
        Some(None) => plan::RuntimeImage::Absent,
        Some(Some(id)) => plan::RuntimeImage::Id(id),
    }
}

/// [`runtime_image`] for commands that read no rocforge.toml otherwise: a configuration that
/// does not load leaves the runtime's default arguments (the build reports the error).
pub fn runtime_image_default(
    catalog: &Catalog,
    lock: &rocforge::source::lock::Lockfile,
    kind: RuntimeKind,
) -> plan::RuntimeImage {
    let config = Config::load(catalog.root.base_dir().as_deref()).unwrap_or_default();
    runtime_image(catalog, lock, &config, None, kind)
}

pub fn store(g: &Global) -> Store {
    Store::open(g.store.clone().unwrap_or_else(Store::default_root))
}

pub struct BuildArgs<'a> {
    pub components: &'a [String],
    pub jobs: Option<usize>,
    pub runtime: Option<RuntimeChoice>,
    pub keep_going: bool,
    pub fresh: bool,
    pub dry_run: bool,
    pub overlays: &'a [String],
    pub allow_missing: Option<&'a str>,
    pub allow_spoof: Option<&'a str>,
    /// `oci://REGISTRY/REPO`: a shared build cache.
    pub cache: Option<&'a str>,
    /// The secret key that signs pushed cache entries.
    pub cache_key: Option<&'a std::path::Path>,
}

/// The `--cache` registry, trusting the config's keys; pushing when a signing key is given.
fn open_cache(
    url: &str,
    key: Option<&std::path::Path>,
    config: &Config,
) -> Result<rocforge::cache::oci::OciCache> {
    let repo = rocforge::oci::Repository::parse(url).map_err(|e| {
        CliError::One(
            Diagnostic::new(format!("--cache {url}: {e}"))
                .hint("write oci://REGISTRY/REPO, e.g. oci://ghcr.io/me/rocforge-cache"),
        )
    })?;
    let sign_err =
        |e: rocforge::sign::SignError| CliError::One(Diagnostic::new(e.to_string()).hint(e.hint()));
    let trusted = rocforge::sign::trusted_keys(&config.trust_keys).map_err(sign_err)?;
    let password = std::env::var(rocforge::sign::PASSWORD_ENV)
        .ok()
        .filter(|p| !p.is_empty());
    let secret = key
        .map(|k| rocforge::sign::load_secret(k, password))
        .transpose()
        .map_err(sign_err)?;
    let client = reqwest::blocking::Client::builder()
        .user_agent(concat!("rocforge/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| CliError::One(Diagnostic::new(e.to_string()).hint("check the TLS setup")))?;
    Ok(rocforge::cache::oci::OciCache::new(
        client, repo, trusted, secret,
    ))
}

pub fn build(g: &Global, a: BuildArgs<'_>) -> Result<ExitCode> {
    only_text_or_json(g, "build")?;
    let catalog = Catalog::load(root(g), g.release.as_deref())?;
    let targets = super::plan_cmd::targets(g, &catalog)?;
    let lock = super::sources::lockfile(&catalog)?;
    let overlays = super::sources::overlays(&catalog, a.overlays)?;
    let config = Config::load(catalog.root.base_dir().as_deref()).map_err(CliError::Diagnostics)?;
    let store = store(g);
    let runtime_kind = if a.runtime == Some(RuntimeChoice::Host) {
        RuntimeKind::Host
    } else {
        RuntimeKind::Container
    };
    let req = plan::Request {
        components: a.components.to_vec(),
        targets: targets.clone(),
        runtime: runtime_kind,
        runtime_image: runtime_image(&catalog, &lock, &config, a.runtime, runtime_kind),
        lock: lock.clone(),
        overlays: overlays.clone(),
    };
    let mut plan = plan::plan(&catalog, &req, &store)?;
    if a.dry_run {
        match g.format {
            Format::Json => print!("{}", render::json(&plan)),
            _ => print!("{}", render::text(&plan)),
        }
        return Ok(ExitCode::SUCCESS);
    }
    let runtime = if plan.steps.iter().all(|s| !s.needs_build()) {
        None
    } else {
        Some(open_runtime(a.runtime, &config)?)
    };
    let reporter = if g.format == Format::Json {
        TermReporter::json()
    } else {
        TermReporter::new(g.quiet)
    };
    // The builder image before any source is fetched; one built now keys the builds by its ID.
    if let Some(rt) = &runtime {
        let ready =
            rocforge::build::image::ensure(rt.as_ref(), &catalog, &plan.image, &store, &reporter)
                .map_err(image_err)?;
        if let rocforge::build::image::Ready::Built(_) = ready {
            let req = plan::Request {
                runtime_image: runtime_image(&catalog, &lock, &config, a.runtime, runtime_kind),
                ..req
            };
            plan = plan::plan(&catalog, &req, &store)?;
        }
    }
    let cache = Cache::new(Cache::default_root());
    let stop = Arc::new(AtomicBool::new(false));
    let running: Arc<Mutex<Vec<String>>> = Arc::new(Mutex::new(Vec::new()));
    if let Some(rt) = &runtime {
        let (stop, running, rt) = (stop.clone(), running.clone(), rt.clone());
        // Ctrl-C: start nothing new, stop the containers we started; staging entries are
        // removed as their builds unwind, so the store keeps only complete entries.
        let _ = ctrlc::set_handler(move || {
            stop.store(true, Ordering::SeqCst);
            rocforge::interrupt::request();
            for name in running.lock().map(|r| r.clone()).unwrap_or_default() {
                rt.stop(&name);
            }
        });
    }
    let build_cache = a
        .cache
        .map(|url| open_cache(url, a.cache_key, &config))
        .transpose()?;
    let total_jobs = a.jobs.unwrap_or_else(jobs::default_budget);
    let targets_of = |flag: &str, list: Option<&str>| match list {
        Some(list) => catalog.arches.resolve_list(list).map_err(|e| {
            CliError::One(Diagnostic::new(format!("{flag} {list}: {e}")).hint(e.hint()))
        }),
        None => Ok(Vec::new()),
    };
    let allow_missing = targets_of("--allow-missing", a.allow_missing)?;
    let allow_spoof = targets_of("--allow-spoof", a.allow_spoof)?;
    let to_build = plan.steps.iter().filter(|s| s.needs_build()).count();
    if to_build > 0 {
        reporter.note(&format!(
            "building {to_build} component(s) for {} with {} ({total_jobs} compile jobs)",
            targets
                .iter()
                .map(|t| t.to_string())
                .collect::<Vec<_>>()
                .join(","),
            runtime
                .as_ref()
                .map_or("no runtime".into(), |r| r.kind().to_string())
        ));
    }
    let report = match &runtime {
        None => rocforge::build::BuildReport {
            steps: plan
                .steps
                .iter()
                .map(|s| {
                    (
                        s.component.clone(),
                        StepResult::Cached {
                            tree: store.tree(&s.key.0),
                        },
                    )
                })
                .collect(),
        },
        Some(rt) => {
            let builder = Builder {
                plan: &plan,
                sources: Sources {
                    catalog: &catalog,
                    lock: &lock,
                    config: &config,
                    cache: &cache,
                    overlays: &overlays,
                    locked: g.locked,
                    reporter: &reporter,
                    download: DownloadOptions::default(),
                    offline: false,
                },
                store: &store,
                runtime: rt.as_ref(),
                reporter: &reporter,
                options: BuildOptions {
                    jobs: total_jobs,
                    parallel: total_jobs.clamp(1, 4),
                    keep_going: a.keep_going,
                    allow_missing: allow_missing.clone(),
                    allow_spoof: allow_spoof.clone(),
                    fresh: a.fresh,
                },
                stop: &stop,
                running: &running,
                cache: build_cache
                    .as_ref()
                    .map(|c| c as &dyn rocforge::cache::BuildCache),
            };
            builder.run()
        }
    };
    if g.format == Format::Json {
        println!(
            "{}",
            serde_json::to_string_pretty(
                &json!({"schema": "rocforge.build/1", "ok": report.ok(), "steps": report.steps})
            )
            .unwrap_or_default()
        );
        return Ok(if report.ok() {
            ExitCode::SUCCESS
        } else if stop.load(Ordering::SeqCst) {
            ExitCode::from(130)
        } else {
            ExitCode::from(1)
        });
    }
    let mut failed = false;
    for (component, r) in &report.steps {
        match r {
            StepResult::Cached { .. } => eprintln!("  {component:<20} cached"),
            StepResult::Pulled { signer, .. } => {
                eprintln!("  {component:<20} pulled from the cache (signed by {signer})")
            }
            StepResult::Built { seconds, .. } => eprintln!(
                "  {component:<20} built in {}",
                rocforge::units::format_duration(*seconds as u64)
            ),
            StepResult::Interrupted { resumes } => eprintln!(
                "  {component:<20} interrupted{}",
                resumes
                    .as_ref()
                    .map(|d| format!(": continues from {}", d.display()))
                    .unwrap_or_default()
            ),
            StepResult::Skipped { because } => eprintln!(
                "  {component:<20} not built{}",
                because
                    .as_ref()
                    .map(|b| format!(": depends on {b}, which failed"))
                    .unwrap_or_else(|| ": interrupted before it started".into())
            ),
            StepResult::Failed {
                error,
                hint,
                log,
                tail,
            } => {
                failed = true;
                eprintln!("  {component:<20} FAILED");
                eprintln!("\nerror: {error}");
                if !tail.is_empty() {
                    eprintln!("--- last {} lines of the log ---", tail.len());
                    for l in tail {
                        eprintln!("{l}");
                    }
                    eprintln!("---");
                }
                if let Some(log) = log {
                    eprintln!("  log: {}", log.display());
                }
                eprintln!("  = help: {hint}\n");
            }
        }
    }
    if stop.load(Ordering::SeqCst) {
        eprintln!("interrupted: {}", rocforge::build::CONTINUE_HINT);
        return Ok(ExitCode::from(130));
    }
    if failed || !report.ok() {
        return Ok(ExitCode::from(1));
    }
    for c in &plan.requested {
        if let Some(s) = plan.step(c) {
            println!("{}", store.tree(&s.key.0).display());
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn image_err(e: rocforge::build::image::ImageError) -> CliError {
    // A failed image build is read from its log's end, as a failed component build is.
    if let Some(log) = e.log() {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        for l in &lines[lines.len().saturating_sub(40)..] {
            eprintln!("{l}");
        }
    }
    CliError::One(Diagnostic::new(e.to_string()).hint(e.hint()))
}

pub fn image_build(
    g: &Global,
    runtime_choice: Option<RuntimeChoice>,
    containerfile: Option<PathBuf>,
) -> Result<ExitCode> {
    use rocforge::build::image;
    only_text_or_json(g, "image build")?;
    let catalog = Catalog::load(root(g), g.release.as_deref())?;
    let config = Config::load(catalog.root.base_dir().as_deref()).map_err(CliError::Diagnostics)?;
    let release = &catalog.release.name;
    let file = match containerfile {
        Some(path) => image::Containerfile {
            shown: path.display().to_string(),
            text: std::fs::read_to_string(&path).map_err(|e| {
                CliError::One(
                    Diagnostic::new(format!("--containerfile {}: {e}", path.display()))
                        .hint("name an existing Containerfile"),
                )
            })?,
            path: Some(path),
        },
        None => image::containerfile(&catalog).ok_or_else(|| {
            CliError::One(
                Diagnostic::new(format!(
                    "no Containerfile for {release}: neither {} nor a built-in one",
                    catalog
                        .root
                        .base_dir()
                        .unwrap_or_default()
                        .join(image::relative_path(release))
                        .display()
                ))
                .hint("pass --containerfile FILE"),
            )
        })?,
    };
    let rt = open_runtime(runtime_choice, &config)?;
    let store = store(g);
    let reporter = TermReporter::new(g.quiet);
    let log = image::log_path(&store, release).map_err(image_err)?;
    let id =
        image::build(rt.as_ref(), &catalog, &file, &store, &log, &reporter).map_err(image_err)?;
    println!("{} {id}", catalog.release.image);
    eprintln!(
        "recorded as a local image: builds key it by this ID and never push it to a shared cache"
    );
    Ok(ExitCode::SUCCESS)
}

pub fn doctor(
    g: &Global,
    components: &[String],
    runtime_choice: Option<RuntimeChoice>,
) -> Result<ExitCode> {
    only_text_or_json(g, "doctor")?;
    let catalog = Catalog::load(root(g), g.release.as_deref())?;
    let config = Config::load(catalog.root.base_dir().as_deref()).map_err(CliError::Diagnostics)?;
    let targets = super::plan_cmd::targets(g, &catalog)?;
    let store = store(g);
    let lock = super::sources::lockfile(&catalog)?;
    let req = plan::Request {
        components: components.to_vec(),
        targets,
        runtime: RuntimeKind::Container,
        runtime_image: runtime_image(
            &catalog,
            &lock,
            &config,
            runtime_choice,
            RuntimeKind::Container,
        ),
        lock,
        overlays: Vec::new(),
    };
    let plan = plan::plan(&catalog, &req, &store)?;
    let mut checks: Vec<(String, bool, String)> = Vec::new();
    let rt = open_runtime(runtime_choice, &config);
    match &rt {
        Ok(rt) => {
            let version = rt.version().unwrap_or_default();
            let (uid, _) = rocforge::runtime::container::ids();
            checks.push((
                "container runtime".into(),
                true,
                format!("{version}{}", if uid == 0 { "" } else { " (rootless)" }),
            ));
            let present = rt.image_id(&catalog.release.image);
            checks.push((
                "builder image".into(),
                present.is_some() || rt.kind() == Kind::Host,
                match present {
                    Some(id) => format!(
                        "{} present ({})",
                        catalog.release.image,
                        &id[..19.min(id.len())]
                    ),
                    None => format!(
                        "{} is not present: `rocforge build` makes it first; {}",
                        catalog.release.image,
                        rocforge::build::image::advice(&catalog)
                    ),
                },
            ));
        }
        Err(e) => checks.push((
            "container runtime".into(),
            false,
            match e {
                CliError::One(d) => {
                    format!("{}; {}", d.message, d.hint.clone().unwrap_or_default())
                }
                CliError::Diagnostics(_) => "unusable".into(),
            },
        )),
    }
    let free = free_disk(store.root());
    let need = plan.estimate.disk_bytes;
    checks.push((
        "disk".into(),
        free.is_none_or(|f| f >= need),
        format!(
            "{} free at {}, the plan estimates {}",
            free.map_or("unknown".into(), rocforge::units::format_size),
            store.root().display(),
            rocforge::units::format_size(need)
        ),
    ));
    let mem = jobs::available_memory();
    let per_job = plan.estimate.memory_per_job_bytes.max(1);
    checks.push((
        "memory".into(),
        mem.is_none_or(|m| m >= per_job),
        format!(
            "{} available: {} compile job(s) at {} each (of {} cores)",
            mem.map_or("unknown".into(), rocforge::units::format_size),
            jobs::budget(jobs::cores(), mem, per_job),
            rocforge::units::format_size(per_job),
            jobs::cores()
        ),
    ));
    // GPU checks: builds need no GPU, so these inform; `rocforge test` needs a matching one.
    let gpu = rocforge::testrun::detect::detect(
        std::path::Path::new("/"),
        &catalog.arches,
        std::env::var("HSA_XNACK").ok(),
    );
    let mut notes: Vec<(String, String)> = Vec::new();
    if gpu.devices.is_empty() {
        notes.push((
            "GPU".into(),
            format!(
                "none found ({}); builds need none, `rocforge test` does",
                gpu.why_none.join("; ")
            ),
        ));
    }
    for d in &gpu.devices {
        let id =
            d.target_id.clone().or(d.target.clone()).unwrap_or_else(|| {
                format!("unknown (gfx_target_version {})", d.gfx_target_version)
            });
        let wanted = plan
            .targets
            .iter()
            .any(|t| Some(&t.arch) == d.target.as_ref());
        notes.push((
            format!("GPU node {}", d.node),
            format!(
                "{id}, {} CUs, {} memory{}{}",
                d.compute_units,
                d.memory,
                if wanted {
                    ", matches --arch"
                } else {
                    ", not among the planned targets"
                },
                d.nearest
                    .as_ref()
                    .map(|n| format!("; nearest supported {n}"))
                    .unwrap_or_default()
            ),
        ));
    }
    let ok = checks.iter().all(|c| c.1);
    if g.format == Format::Json {
        let items: Vec<_> = checks
            .iter()
            .map(|(n, o, d)| json!({"check": n, "ok": o, "detail": d}))
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(
                &json!({"schema": "rocforge.doctor/1", "ok": ok, "checks": items, "notes": notes.iter().map(|(n, d)| json!({"check": n, "detail": d})).collect::<Vec<_>>(), "gpu": gpu})
            )
            .unwrap_or_default()
        );
    } else {
        for (name, good, detail) in &checks {
            println!(
                "{} {name:<18} {detail}",
                if *good { "ok  " } else { "FAIL" }
            );
        }
        for (name, detail) in &notes {
            println!("note {name:<18} {detail}");
        }
    }
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn free_disk(path: &std::path::Path) -> Option<u64> {
    let mut p = path.to_path_buf();
    while !p.exists() {
        p = p.parent()?.to_path_buf();
    }
    let c = std::ffi::CString::new(p.to_string_lossy().as_bytes()).ok()?;
    // SAFETY: c is a valid C string; st is a valid out-pointer.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::statvfs(c.as_ptr(), &mut st) };
    (r == 0).then(|| st.f_bavail as u64 * st.f_frsize as u64)
}

pub fn store_list(g: &Global) -> Result<ExitCode> {
    only_text_or_json(g, "store list")?;
    let store = store(g);
    let entries = store.entries();
    if g.format == Format::Json {
        println!(
            "{}",
            serde_json::to_string_pretty(
                &json!({"schema": "rocforge.store/1", "root": store.root(), "entries": entries})
            )
            .unwrap_or_default()
        );
        return Ok(ExitCode::SUCCESS);
    }
    if entries.is_empty() {
        eprintln!("{} is empty", store.root().display());
    }
    for e in &entries {
        println!(
            "{}  {:<16} {:<10} {:<14} {}",
            &e.key[..12],
            e.component,
            e.version,
            e.targets.join(","),
            e.runtime
        );
    }
    Ok(ExitCode::SUCCESS)
}

pub fn store_show(g: &Global, key: &str) -> Result<ExitCode> {
    only_text_or_json(g, "store show")?;
    let store = store(g);
    let e = store
        .find(key)
        .map_err(|e| CliError::One(Diagnostic::new(e.to_string()).hint(e.hint())))?;
    if g.format == Format::Json {
        println!("{}", serde_json::to_string_pretty(&e).unwrap_or_default());
        return Ok(ExitCode::SUCCESS);
    }
    println!("{} {} ({})", e.component, e.version, e.release);
    println!("  key        {}", e.key);
    println!("  targets    {}", e.targets.join(","));
    println!(
        "  runtime    {}{}",
        e.runtime,
        if e.reproducible {
            ""
        } else {
            " (not reproducible)"
        }
    );
    if let Some(i) = &e.image {
        println!(
            "  image      {}{}",
            i.reference,
            i.digest
                .as_ref()
                .map(|d| format!(" @ {d}{}", if i.local { " (local)" } else { "" }))
                .unwrap_or_default()
        );
    }
    if let Some(c) = &e.source_commit {
        println!("  source     {c}");
    }
    println!(
        "  built in   {}",
        rocforge::units::format_duration(e.duration_secs as u64)
    );
    println!("  tree       {}", store.tree(&e.key).display());
    println!(
        "  log        {}",
        store.entry_dir(&e.key).join("build.log").display()
    );
    println!(
        "  hash input {}",
        store.entry_dir(&e.key).join("hash-input.json").display()
    );
    Ok(ExitCode::SUCCESS)
}

pub fn store_gc(g: &Global, dry_run: bool) -> Result<ExitCode> {
    only_text_or_json(g, "store gc")?;
    let store = store(g);
    // Keep the newest entry of each component for each target set; older ones are superseded.
    let mut newest: std::collections::BTreeMap<(String, String, Vec<String>), String> =
        Default::default();
    let entries = store.entries();
    for e in &entries {
        newest.insert(
            (e.release.clone(), e.component.clone(), e.targets.clone()),
            e.key.clone(),
        );
    }
    let mut removed = 0;
    for e in &entries {
        if newest.get(&(e.release.clone(), e.component.clone(), e.targets.clone())) == Some(&e.key)
        {
            continue;
        }
        println!(
            "{} {} {}",
            if dry_run { "would remove" } else { "removed" },
            &e.key[..12],
            e.component
        );
        if !dry_run {
            store
                .remove(&e.key)
                .map_err(|e| CliError::One(Diagnostic::new(e.to_string()).hint(e.hint())))?;
        }
        removed += 1;
    }
    if !dry_run {
        for d in store.clean_staging() {
            println!("removed unfinished entry {}", d.display());
        }
    }
    eprintln!(
        "{removed} superseded entr{} {}",
        if removed == 1 { "y" } else { "ies" },
        if dry_run { "to remove" } else { "removed" }
    );
    Ok(ExitCode::SUCCESS)
}

/// Refuses to go on when any step of `plan` is not in the store, naming the build command
/// that would produce it (`package` and `image create` read store entries, never build).
pub(crate) fn require_built(plan: &plan::Plan, store: &Store, components: &[String]) -> Result<()> {
    let missing: Vec<&str> = plan
        .steps
        .iter()
        .filter(|s| !store.contains(&s.key.0))
        .map(|s| s.component.as_str())
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let arch = plan
        .targets
        .iter()
        .map(|t| t.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let runtime = if plan.runtime == RuntimeKind::Host {
        " --runtime host"
    } else {
        ""
    };
    Err(Diagnostic::new(format!(
        "not in the store for {arch}: {}",
        missing.join(", ")
    ))
    .hint(format!(
        "build first: rocforge build {} --arch {arch}{runtime}",
        components.join(" ")
    ))
    .into())
}
