//! `ci github` and `nix export`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::{Global, Result, root};
use rocforge::app;
use rocforge::ci::nix;
use rocforge::diag::Diagnostic;

#[derive(clap::Args, Debug)]
pub struct CiRunnersArgs {
    /// OWNER/REPO whose runners to list
    #[arg(long, value_name = "OWNER/REPO", conflicts_with = "org")]
    pub repo: Option<String>,
    /// An organization whose runners to list
    #[arg(long, value_name = "ORG")]
    pub org: Option<String>,
    /// The repository root holding runners.toml
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub dir: PathBuf,
}

#[derive(clap::Args, Debug)]
pub struct CiGithubArgs {
    /// Compare with the committed files instead of writing; exit 1 with a unified diff
    #[arg(long)]
    pub check: bool,
    /// The repository root: runners.toml is read and .github/ written there
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub dir: PathBuf,
}

pub fn github(g: &Global, dir: &Path, check: bool) -> Result<ExitCode> {
    let files = app::ci::github_files(&root(g), dir)?;
    if check {
        let diffs = app::ci::drift(&files);
        for d in &diffs {
            print!("{d}");
        }
        if !diffs.is_empty() {
            eprintln!(
                "error: the committed workflow differs from the generated one\n  = hint: run `rocforge ci github` and commit the result"
            );
            return Ok(ExitCode::FAILURE);
        }
        if !g.quiet {
            eprintln!("generated files are up to date");
        }
        return Ok(ExitCode::SUCCESS);
    }
    let written = app::ci::write(&files)?;
    for (f, w) in files.iter().zip(written) {
        match w {
            app::ci::Written::Unchanged => println!("unchanged {}", f.path.display()),
            app::ci::Written::Wrote => println!("wrote {}", f.path.display()),
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn nix_export(g: &Global, out: &Path) -> Result<ExitCode> {
    let session = super::session(g)?;
    let (catalog, targets) = (&session.catalog, session.targets()?);
    let ex = nix::export(catalog, targets, out)
        .map_err(|e| Diagnostic::new(e.to_string()).hint("choose a writable --out directory"))?;
    match g.format {
        super::Format::Json => super::print_json(&ex.report(out)),
        _ => {
            println!(
                "wrote {} files to {} (overlay.nix, default.nix, nixpkgs.json, patches/)",
                ex.files.len(),
                out.display()
            );
            println!(
                "rocmPackages overridden: {} (gpuTargets {})",
                ex.mapped.join(", "),
                rocforge::arch::comma_list(targets)
            );
            if !ex.unmapped.is_empty() {
                println!("not in nixpkgs' rocmPackages: {}", ex.unmapped.join(", "));
            }
            if !ex.derived.is_empty() {
                println!(
                    "derived files redone in postPatch: {}",
                    ex.derived.join(", ")
                );
            }
            if nix::nixpkgs_pin(&catalog.release.name).is_none() {
                println!(
                    "nixpkgs revision: not pinned (TODO in nixpkgs.json); use a nixpkgs whose rocmPackages matches {}",
                    catalog.release.name
                );
            }
            println!(
                "use it: nix-build {}/default.nix -A rocblas --arg nixpkgs /path/to/nixpkgs",
                out.display()
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `ci runners`: runners.toml's labels, with the API's online counts when a token is set.
pub fn runners(g: &Global, a: &CiRunnersArgs) -> Result<ExitCode> {
    let token = ["ROCFORGE_RUNNERS_TOKEN", "GITHUB_TOKEN"]
        .iter()
        .find_map(|k| std::env::var(k).ok().filter(|v| !v.is_empty()));
    let api = std::env::var("ROCFORGE_GITHUB_API")
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "https://api.github.com".into());
    let report = rocforge::app::ci::runners(&rocforge::app::ci::RunnersRequest {
        dir: &a.dir,
        repo: a.repo.as_deref(),
        org: a.org.as_deref(),
        token: token.as_deref(),
        api: &api,
    })?;
    let source = report.source;
    let (states, gpu_ready) = (&report.labels, &report.gpu_ready);
    let disagree: Vec<&rocforge::ci::discover::LabelState> = states
        .iter()
        .filter(|s| s.online.is_some() && s.ready() != s.registered)
        .collect();
    if g.format == super::Format::Json {
        super::print_json(&report);
    } else {
        println!(
            "{:<18} {:<6} {:<20} online  offline",
            "label", "kind", "runners.toml"
        );
        for s in states {
            let n = |v: Option<usize>| v.map(|n| n.to_string()).unwrap_or_else(|| "-".into());
            println!(
                "{:<18} {:<6} {:<20} {:<7} {}",
                s.label,
                s.kind,
                if s.registered {
                    "registered"
                } else {
                    "not registered"
                },
                n(s.online),
                n(s.offline)
            );
        }
        println!(
            "GPU targets with a runner ({source}): {}",
            if gpu_ready.is_empty() {
                "none".to_string()
            } else {
                gpu_ready.join(", ")
            }
        );
    }
    for s in disagree {
        eprintln!(
            "warning: runners.toml says {} is {}, the API {}: update runners.toml and run `rocforge ci github`",
            s.label,
            if s.registered {
                "registered"
            } else {
                "not registered"
            },
            if s.ready() {
                "has a runner online"
            } else {
                "has none online"
            }
        );
    }
    Ok(ExitCode::SUCCESS)
}
