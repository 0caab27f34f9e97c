//! `detect`, `test` and `report`: tests on hardware.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::{CliError, Format, Global, Result, exit_code, print_json};
use rocforge::app::test;
use rocforge::diag::Diagnostic;
use rocforge::testrun::detect::Device;

#[derive(clap::Args, Debug)]
pub struct DetectArgs {
    /// A directory standing for / (a recorded machine)
    #[arg(long, value_name = "DIR", env = "ROCFORGE_SYSFS_ROOT")]
    pub sysfs_root: Option<PathBuf>,
}

#[derive(clap::Args, Debug)]
pub struct ReportArgs {
    /// results.json files written by `rocforge test`, the directories it wrote them in (`rocforge-results/*`, an `--all` bundle too), or oci://REGISTRY/REPO (every results artifact there)
    #[arg(required = true)]
    pub results: Vec<PathBuf>,
    /// Where report.html and report.md go
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Also trust this public key (RW… or a .pub file) for pulled results; repeatable
    #[arg(long, value_name = "PUB")]
    pub key: Vec<String>,
    /// Include pulled results that carry no signature (they are marked as such on stderr)
    #[arg(long)]
    pub allow_unsigned: bool,
}

#[derive(clap::Args, Debug)]
pub struct TestArgs {
    /// The component whose test client to run
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    pub component: Option<String>,
    /// Every component of --from's index that carries a test client for this GPU, into one bundle
    #[arg(long, requires = "from", conflicts_with_all = ["spoof", "dry_run"])]
    pub all: bool,
    /// Run the nearest target's artifact on this GPU under HSA_OVERRIDE_GFX_VERSION
    #[arg(long)]
    pub spoof: bool,
    /// Continue the run journaled in --out
    #[arg(long)]
    pub resume: bool,
    /// A directory standing for / (a recorded machine)
    #[arg(long, value_name = "DIR", env = "ROCFORGE_SYSFS_ROOT")]
    pub sysfs_root: Option<PathBuf>,
    /// Results directory [default: ./rocforge-results/<component>-<target>[-spoofed], with --all ./rocforge-results/all-<target>]
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// This machine's name in reports [default: the hostname]
    #[arg(long, value_name = "NAME")]
    pub machine: Option<String>,
    /// Share the results: oci://REGISTRY/REPO (an artifact tagged results-<component>-<target>-<machine>-<time>) or an http(s) URL (PUT URL/<machine>-<run>.json)
    #[arg(long, value_name = "DEST")]
    pub submit: Option<String>,
    /// Sign the submitted results.json and junit.xml with this secret key file (with --all: the bundle on disk too, and by default $ROCFORGE_SIGNING_KEY or the default key when there)
    #[arg(long = "sign-key", alias = "key", value_name = "FILE")]
    pub key: Option<PathBuf>,
    /// Install from this artifact index (URL or directory) when the store lacks the component
    #[arg(long, value_name = "INDEX")]
    pub from: Option<String>,
    /// Print the plan (the build or index artifact tested, its dependencies, the GPU or the spoof, the client, shards, timeout and environment) and stop: nothing is laid out, run or written
    #[arg(long)]
    pub dry_run: bool,
}

fn one(e: impl ToString, hint: impl Into<String>) -> CliError {
    CliError::One(Diagnostic::new(e.to_string()).hint(hint))
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
    let p = test::profile(&super::arch_cmd::arch_table(g)?, sysfs_root);
    let code = if p.devices.is_empty() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    };
    if g.format == Format::Json {
        super::print_json(&p);
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

pub fn test(g: &Global, a: &TestArgs) -> Result<ExitCode> {
    let Some(component) = a.component.as_deref() else {
        return test_all(g, a);
    };
    if a.key.is_some() && a.submit.is_none() {
        return Err(one(
            "--sign-key signs what --submit sends",
            "add --submit oci://REGISTRY/REPO (or an http(s) URL), or use --all, which signs its bundle on disk",
        ));
    }
    let session = super::session(g)?;
    let req = test::Request {
        component,
        spoof: a.spoof,
        resume: a.resume,
        sysfs_root: a.sysfs_root.as_deref(),
        out: a.out.as_deref(),
        machine: a.machine.as_deref(),
        submit: a.submit.as_deref(),
        key: {
            if a.key.is_some() {
                super::warn_old_key_flag();
            }
            a.key.as_deref()
        },
        from: a.from.as_deref(),
        plan_only: a.dry_run,
    };
    let plan = test::test_plan(&session, &req)?;
    if a.dry_run {
        if g.format == Format::Json {
            print_json(&plan);
        } else {
            print!("{}", plan.render_text());
        }
        return Ok(ExitCode::SUCCESS);
    }
    let prepared = test::start(&session, plan)?;
    if !g.quiet {
        eprintln!("{}", prepared.describe());
    }
    // Ctrl-C: every finished test is already in the journal (written and synced one by one),
    // and the running client dies with this process (PR_SET_PDEATHSIG), so exiting at once
    // loses nothing and records no test as crashed.
    let resume = prepared.resume_command(a.out.as_deref());
    let _ = ctrlc::set_handler(move || {
        eprintln!("\ninterrupted: the tests that finished are kept; `{resume}` continues");
        std::process::exit(130);
    });
    let outcome = prepared.run(session.reporter.as_ref())?;
    let (b, summary) = (&outcome.bundle, &outcome.bundle.summary);
    if g.format == Format::Json {
        print_json(&outcome.report());
        return Ok(exit_code(outcome.ok()));
    }
    println!("{}", summary.line());
    if summary.no_gpu > 0 {
        println!(
            "  {} test(s) found no GPU (no /dev/kfd or no device): they did not run on a GPU, which says nothing about the library; run them where the GPU is, with /dev/kfd and /dev/dri passed into any container",
            summary.no_gpu
        );
    }
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
    println!("results: {}", outcome.results.display());
    println!("junit:   {}", outcome.junit.display());
    if let Some(s) = &outcome.submitted {
        println!("submitted: {s}");
    }
    Ok(exit_code(outcome.ok()))
}

pub fn report(g: &Global, a: &ReportArgs) -> Result<ExitCode> {
    use rocforge::app::report::{self, Verdict};
    let options = super::options(g);
    let written = report::report(
        &report::Request {
            results: &a.results,
            out: &a.out,
            keys: &a.key,
            allow_unsigned: a.allow_unsigned,
            options: &options,
        },
        &mut |pulled| {
            for (reference, verdict) in &pulled.artifacts {
                match verdict {
                    Verdict::Signed { key_id } => {
                        if !g.quiet {
                            eprintln!("{reference}: signed by trusted key {key_id}");
                        }
                    }
                    Verdict::Refused { why } => eprintln!("warning: {reference}: refused: {why}"),
                    Verdict::UnsignedIncluded => eprintln!(
                        "warning: {reference}: unsigned, included because of --allow-unsigned"
                    ),
                    Verdict::UnsignedLeftOut => eprintln!(
                        "warning: {reference}: unsigned, left out (--allow-unsigned includes it)"
                    ),
                }
            }
            let (signed, unsigned, refused) = pulled.counts();
            note!(
                g,
                "{}: {signed} signed by trusted keys, {unsigned} unsigned included, {refused} left out",
                pulled.from
            );
        },
    )?;
    println!("{}", written.html.display());
    println!("{}", written.markdown.display());
    Ok(ExitCode::SUCCESS)
}

/// `test --all`: the target detected unless --arch names it, then every testable component.
fn test_all(g: &Global, a: &TestArgs) -> Result<ExitCode> {
    let from = a.from.as_deref().expect("clap requires --from with --all");
    let mut options = super::options(g);
    if options.arch.is_none() {
        let table = super::arch_cmd::arch_table(g)?;
        let target = test::detect_target(&table, a.sysfs_root.as_deref())?;
        note!(g, "GPU detected: {target}");
        options.arch = Some(target);
    }
    let arch = options.arch.clone().unwrap_or_default();
    let session = rocforge::app::Session::open(options, super::reporter(g))?;
    if a.key.is_some() {
        super::warn_old_key_flag();
    }
    // As `package` signs: --sign-key, else $ROCFORGE_SIGNING_KEY, else the default key if there.
    let key = super::artifact_cmd::signing_key_path(a.key.as_deref());
    let out = a
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("rocforge-results").join(format!("all-{arch}")));
    let req = test::AllRequest {
        from,
        out: &out,
        resume: a.resume,
        sysfs_root: a.sysfs_root.as_deref(),
        machine: a.machine.as_deref(),
        submit: a.submit.as_deref(),
        key: key.as_deref(),
    };
    let all = test::run_all(&session, &req)?;
    if g.format == Format::Json {
        print_json(&all);
        return Ok(exit_code(all.ok()));
    }
    for c in &all.components {
        println!("{:<24} {}", c.component, c.verdict());
        if let Some(e) = &c.error {
            for l in e.lines() {
                println!("    {l}");
            }
        }
    }
    let no_gpu: usize = all
        .components
        .iter()
        .filter_map(|c| c.summary.as_ref())
        .map(|s| s.no_gpu)
        .sum();
    if no_gpu > 0 {
        println!(
            "  {no_gpu} test(s) found no GPU (no /dev/kfd or no device): they did not run on a GPU, which says nothing about the libraries; run where the GPU is, with /dev/kfd and /dev/dri passed into any container"
        );
    }
    println!(
        "bundle:  {}{}",
        out.display(),
        if all.signed { " (signed)" } else { "" }
    );
    let submitted = all
        .components
        .iter()
        .filter(|c| c.submitted.is_some())
        .count();
    match &a.submit {
        Some(dest) if submitted == all.components.len() => {
            println!("submitted to {}", rocforge::redact::url(dest))
        }
        Some(dest) => println!(
            "submitted {submitted} of {} component(s) to {}; `--resume` with the same flags sends the rest without running their tests again",
            all.components.len(),
            rocforge::redact::url(dest)
        ),
        None => {
            let mut cmd = format!(
                "rocforge test --all --from {} --arch {} --out {} --resume --submit oci://REGISTRY/REPO",
                rocforge::redact::url(from),
                all.target,
                out.display()
            );
            // The same machine and device tree, so the resumed run names the same bundle.
            if let Some(r) = &a.sysfs_root {
                cmd += &format!(" --sysfs-root {}", r.display());
            }
            cmd += &format!(" --machine {}", all.machine);
            if let Some(k) = &key {
                cmd += &format!(" --sign-key {}", k.display());
            }
            println!("submit:  {cmd}");
        }
    }
    Ok(exit_code(all.ok()))
}
