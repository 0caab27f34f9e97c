//! `build`: flags in, the library's build, the steps' results out.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use super::progress::TermReporter;
use super::{Format, Global, Result, RuntimeArg, exit_code, print_json};
use rocforge::app::build::{self, Outcome, Request};
use rocforge::build::StepResult;
use rocforge::plan::render;

#[derive(clap::Args, Debug)]
pub struct BuildArgs {
    /// Components or bundles to build (`rocforge list`); none asks for --all
    components: Vec<String>,
    /// Build the whole release line (hours to days, and a hundred GiB or more; --dry-run shows the plan)
    #[arg(long, conflicts_with = "components")]
    all: bool,
    /// Total compile jobs [default: one per 2.5 GiB of available memory, at most one per core]
    #[arg(long, short)]
    jobs: Option<usize>,
    #[command(flatten)]
    runtime: RuntimeArg,
    /// Keep building what does not depend on a failed component
    #[arg(long)]
    keep_going: bool,
    /// Start each build over instead of continuing the build directory a stopped or failed
    /// build of the same content key left
    #[arg(long)]
    fresh: bool,
    /// Build the named components again even when the store has them (not their
    /// dependencies); the stored entry is put back if the new build fails or is stopped
    #[arg(long)]
    rebuild: bool,
    /// Print the plan; build nothing
    #[arg(long)]
    dry_run: bool,
    /// Replace a directory of a component's source with your own: COMPONENT:PATH=DIR
    #[arg(long, value_name = "SPEC")]
    overlay: Vec<String>,
    /// Accept built libraries that lack these targets (the gap is recorded in the store entry)
    #[arg(long, value_name = "LIST")]
    allow_missing: Option<String>,
    /// Accept built libraries that carry only the nearest target's code for these targets
    /// (they run only under HSA_OVERRIDE_GFX_VERSION; recorded in the store entry)
    #[arg(long, value_name = "LIST")]
    allow_spoof: Option<String>,
    /// A shared build cache, oci://REGISTRY/REPO: hits are pulled (signed by a trusted key), new entries pushed
    #[arg(long, value_name = "URL", env = "ROCFORGE_CACHE_URL")]
    cache: Option<String>,
    /// The secret key that signs the entries pushed to --cache (without it nothing is pushed)
    #[arg(long, value_name = "FILE", env = "ROCFORGE_CACHE_KEY")]
    cache_key: Option<PathBuf>,
    /// Stop the build after this long (e.g. 5h30m), as Ctrl-C does, and exit 75; with --cache
    /// and --cache-key each unfinished build directory is pushed as a checkpoint that the same
    /// command continues on another machine
    #[arg(long, value_name = "DURATION", value_parser = parse_time_limit)]
    time_limit: Option<std::time::Duration>,
    /// With --time-limit: this long before the limit, start no component and no compile, and
    /// let the compiles under way finish into the checkpoint, so the next machine does not
    /// redo them [default: a tenth of the limit, at most 30m]
    #[arg(long, value_name = "DURATION", value_parser = parse_time_limit, requires = "time_limit")]
    drain: Option<std::time::Duration>,
}

/// The exit code of a build stopped by --time-limit: run the same command again to continue.
pub const TIME_LIMIT_EXIT: u8 = 75;

fn parse_time_limit(s: &str) -> std::result::Result<std::time::Duration, String> {
    match rocforge::units::parse_duration(s) {
        Some(secs) if secs > 0 => Ok(std::time::Duration::from_secs(secs)),
        _ => Err(format!(
            "`{s}` is not a duration: write e.g. 45m, 5h30m or 90s"
        )),
    }
}

pub fn build(g: &Global, a: &BuildArgs) -> Result<ExitCode> {
    let reporter = if g.format == Format::Json {
        TermReporter::json()
    } else {
        TermReporter::new(g)
    };
    let session = super::session_with(g, Arc::new(reporter))?;
    let req = Request {
        components: &a.components,
        all: a.all,
        jobs: a.jobs,
        runtime: a.runtime.runtime.choice(),
        keep_going: a.keep_going,
        fresh: a.fresh,
        rebuild: a.rebuild,
        overlays: &a.overlay,
        allow_missing: a.allow_missing.as_deref(),
        allow_spoof: a.allow_spoof.as_deref(),
        cache: a.cache.as_deref(),
        cache_key: a.cache_key.as_deref(),
        time_limit: a.time_limit,
        drain: a.drain,
    };
    let planned = build::plan(&session, &req)?;
    if a.dry_run {
        match g.format {
            Format::Json => print!("{}", render::json(&planned.plan)),
            _ => print!("{}", render::text(&planned.plan)),
        }
        return Ok(ExitCode::SUCCESS);
    }
    let build = build::prepare(&session, planned, &req)?;
    if let Some(interrupt) = build.interrupt() {
        let _ = ctrlc::set_handler(move || interrupt.interrupt());
    }
    let outcome = build.run(&session)?;
    if g.format == Format::Json {
        let report = outcome.report.report();
        print_json(&report);
        if outcome.timed_out {
            return Ok(ExitCode::from(TIME_LIMIT_EXIT));
        }
        if outcome.stopped {
            return Ok(ExitCode::from(130));
        }
        return Ok(exit_code(report.ok));
    }
    Ok(render_text(g, &outcome, a.time_limit))
}

fn render_text(g: &Global, outcome: &Outcome, limit: Option<std::time::Duration>) -> ExitCode {
    for (component, r) in &outcome.report.steps {
        match r {
            StepResult::Cached { .. } => note!(g, "  {component:<20} cached"),
            StepResult::Pulled { signer, .. } => {
                note!(
                    g,
                    "  {component:<20} pulled from the cache (signed by {signer})"
                )
            }
            StepResult::Built { seconds, .. } => note!(
                g,
                "  {component:<20} built in {}",
                rocforge::units::format_duration(*seconds as u64)
            ),
            StepResult::Interrupted { resumes } => note!(
                g,
                "  {component:<20} interrupted{}",
                resumes
                    .as_ref()
                    .map(|d| format!(": continues from {}", d.display()))
                    .unwrap_or_default()
            ),
            StepResult::Skipped { because } => note!(
                g,
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
    if outcome.timed_out {
        eprintln!(
            "stopped at the time limit ({}): {}",
            rocforge::units::format_duration(limit.map_or(0, |l| l.as_secs())),
            rocforge::build::CONTINUE_HINT
        );
        return ExitCode::from(TIME_LIMIT_EXIT);
    }
    if outcome.stopped {
        eprintln!("interrupted: {}", rocforge::build::CONTINUE_HINT);
        return ExitCode::from(130);
    }
    if !outcome.report.ok() {
        return ExitCode::from(1);
    }
    for tree in &outcome.trees {
        println!("{}", tree.display());
    }
    ExitCode::SUCCESS
}
