//! `publish`: a release directory to a GitHub release or an OCI registry, and its wheel index.

use std::path::PathBuf;
use std::process::ExitCode;

use super::progress::TermReporter;
use super::{Format, Global, Result, print_json};
use rocforge::app::publish;

#[derive(clap::Args, Debug)]
pub struct PublishArgs {
    /// The release directory (`rocforge package --out DIR`)
    pub dir: PathBuf,
    /// github://OWNER/REPO@TAG or oci://REGISTRY/REPO [default: only write the wheel index]
    #[arg(long, value_name = "URL")]
    pub to: Option<String>,
    /// Print the plan (each file with its sha256 and size and where it goes, the index's entries, the wheel index pages) and stop: nothing is uploaded or written
    #[arg(long)]
    pub dry_run: bool,
}

pub fn publish_cmd(g: &Global, a: &PublishArgs) -> Result<ExitCode> {
    if a.dry_run {
        let plan = publish::plan(&a.dir, a.to.as_deref())?;
        if g.format == Format::Json {
            print_json(&plan);
        } else {
            print!("{}", plan.render_text());
        }
        return Ok(ExitCode::SUCCESS);
    }
    let reporter = TermReporter::new(g);
    let published = publish::publish(&a.dir, a.to.as_deref(), &reporter)?;
    if g.format == Format::Json {
        print_json(&published);
    } else {
        for o in &published.files {
            println!("{:<10} {}", o.action, o.file);
        }
    }
    Ok(ExitCode::SUCCESS)
}
