//! `check`: the catalog offline, or with `--sources` every patch against its real source.

use std::process::ExitCode;

use super::{Format, Global, Result, exit_code, print_json};
use rocforge::app::check_sources::{Report, check_sources};
use rocforge::source::verify::{Outcome, SourceCheck};

#[derive(clap::Args, Debug)]
pub struct CheckArgs {
    /// Fetch every source and apply its patches and derivations for every target
    #[arg(long)]
    sources: bool,
    /// With --sources: skip components that carry no patches and no derivations
    #[arg(long, requires = "sources")]
    only_patched: bool,
    /// With --sources: only these components (or bundles) [default: all]
    #[arg(requires = "sources")]
    components: Vec<String>,
}

pub fn check(g: &Global, a: &CheckArgs) -> Result<ExitCode> {
    if !a.sources {
        return super::catalog_cmds::check(g);
    }
    let report = check_sources(
        &super::options(g),
        super::reporter(g),
        &a.components,
        a.only_patched,
    )?;
    if g.format == Format::Json {
        print_json(&report);
    } else {
        render_text(&report);
    }
    Ok(exit_code(report.ok))
}

fn render_text(report: &Report) {
    let rows = &report.checks;
    let w_rel = rows
        .iter()
        .map(|r| r.release.len())
        .max()
        .unwrap_or(0)
        .max(7);
    let w_comp = rows
        .iter()
        .map(|r| r.check.component.len())
        .max()
        .unwrap_or(0)
        .max(9);
    let arches = |c: &SourceCheck| c.arches.join(",");
    let w_arch = rows
        .iter()
        .map(|r| arches(&r.check).len())
        .max()
        .unwrap_or(0)
        .max(6);
    println!(
        "{:w_rel$}  {:w_comp$}  {:w_arch$}  result",
        "release", "component", "arches"
    );
    for r in rows {
        let c = &r.check;
        let result = match &c.outcome {
            Outcome::Applies { patches, derived } => {
                format!("applies ({patches} patch(es), {derived} derived tree(s))")
            }
            Outcome::Conflict { message, .. } => format!("conflict: {message}"),
            Outcome::DeriveFails { message, .. } => format!("derivation fails: {message}"),
            Outcome::VersionDiffers { message, .. } => format!("version differs: {message}"),
            Outcome::DependencyVersion { message, .. } => {
                format!("dependency version: {message}")
            }
            Outcome::Unreachable { message, .. } => format!("source unreachable: {message}"),
        };
        println!(
            "{:w_rel$}  {:w_comp$}  {:w_arch$}  {result}",
            r.release,
            c.component,
            arches(c)
        );
    }
    let mut hints: Vec<&str> = rows
        .iter()
        .filter_map(|r| match &r.check.outcome {
            Outcome::Applies { .. } => None,
            Outcome::Conflict { hint, .. }
            | Outcome::DeriveFails { hint, .. }
            | Outcome::VersionDiffers { hint, .. }
            | Outcome::DependencyVersion { hint, .. }
            | Outcome::Unreachable { hint, .. } => Some(hint.as_str()),
        })
        .collect();
    hints.sort();
    hints.dedup();
    for h in hints {
        eprintln!("hint: {h}");
    }
    let failed = report.failed();
    eprintln!(
        "{} check(s): {} apply, {failed} do not",
        rows.len(),
        rows.len() - failed
    );
}
