//! `lock` and `lock --check`.

use std::process::ExitCode;

use super::{CliError, Format, Global, Result, exit_code, print_json, root};
use rocforge::app::lock;
use rocforge::catalog::display_path;
use rocforge::diag::{Diagnostic, Diagnostics};

#[derive(clap::Args, Debug)]
pub struct LockArgs {
    /// Do not write: exit 1 if rocforge.lock does not match the recipes (for CI; no network)
    #[arg(long)]
    check: bool,
    /// Pin sources only; keep the image digests already in the lock
    #[arg(long)]
    skip_images: bool,
}

pub fn lock(g: &Global, a: &LockArgs) -> Result<ExitCode> {
    if a.check {
        return check(g, a);
    }
    let reporter = super::reporter(g);
    let written = lock::update(&root(g), a.skip_images, reporter.as_ref())?;
    let (path, new) = (&written.path, &written.lock);
    if g.format == Format::Json {
        print_json(&written.report());
    } else {
        println!(
            "{} {}: {} source(s), {} image(s), {} md5-pinned input(s)",
            if written.changed {
                "wrote"
            } else {
                "unchanged"
            },
            display_path(path),
            new.sources.len(),
            new.images.len(),
            new.inputs.len()
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn check(g: &Global, a: &LockArgs) -> Result<ExitCode> {
    let checked = lock::check(&root(g), !a.skip_images)?;
    if g.format == Format::Json {
        let report = checked.report();
        print_json(&report);
        return Ok(exit_code(report.ok));
    }
    let problems = checked.problems;
    if problems.is_empty() {
        println!("ok: {} matches the recipes", display_path(&checked.path));
        return Ok(ExitCode::SUCCESS);
    }
    let mut d = Diagnostics::default();
    for p in problems {
        d.push(
            Diagnostic::new(format!("rocforge.lock is stale: {p}"))
                .hint("run `rocforge lock` and commit rocforge.lock"),
        );
    }
    Err(CliError::Diagnostics(d))
}
