//! `publish`: a release directory to a GitHub release or an OCI registry, and its wheel index.

use std::path::PathBuf;
use std::process::ExitCode;

use serde_json::json;

use super::progress::TermReporter;
use super::{CliError, Format, Global, Result, only_text_or_json};
use rocforge::diag::Diagnostic;
use rocforge::package::index::{INDEX_NAME, Index};
use rocforge::progress::Reporter;
use rocforge::publish::{self, Destination, PublishError, wheels};

#[derive(clap::Args, Debug)]
pub struct PublishArgs {
    /// The release directory (`rocforge package --out DIR`)
    pub dir: PathBuf,
    /// github://OWNER/REPO@TAG or oci://REGISTRY/REPO [default: only write the wheel index]
    #[arg(long, value_name = "URL")]
    pub to: Option<String>,
}

fn err(e: PublishError) -> CliError {
    CliError::One(Diagnostic::new(e.to_string()).hint(e.hint()))
}

pub fn publish_cmd(g: &Global, a: &PublishArgs) -> Result<ExitCode> {
    let (dir, to) = (&a.dir, a.to.as_deref());
    only_text_or_json(g, "publish")?;
    if !dir.is_dir() {
        return Err(
            Diagnostic::new(format!("{} is not a directory", dir.display()))
                .hint("publish the directory `rocforge package --out DIR` wrote")
                .into(),
        );
    }
    let dest = to.map(Destination::parse).transpose().map_err(err)?;
    let reporter = TermReporter::new(g.quiet);
    let targets: Vec<String> = std::fs::read(dir.join(INDEX_NAME))
        .ok()
        .and_then(|b| serde_json::from_slice::<Index>(&b).ok())
        .map(|i| {
            let mut t: Vec<String> = i.artifacts.into_iter().flat_map(|a| a.targets).collect();
            t.sort();
            t.dedup();
            t
        })
        .unwrap_or_default();
    let pages = wheels::write_index(dir, &targets).map_err(err)?;
    if !pages.is_empty() {
        reporter.note(&format!(
            "wrote the wheel index ({} pages): pip install --index-url <URL of {}>/<target>/ …",
            pages.len(),
            dir.display()
        ));
    }
    let outcomes = match &dest {
        Some(d) => publish::publish(dir, d, &reporter).map_err(err)?,
        None => {
            if pages.is_empty() {
                return Err(Diagnostic::new("nothing to do: no --to and no wheels")
                    .hint("pass --to github://OWNER/REPO@TAG or --to oci://REGISTRY/REPO")
                    .into());
            }
            Vec::new()
        }
    };
    if g.format == Format::Json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "schema": "rocforge.publish/1",
                "to": to,
                "files": outcomes,
                "wheel_index": pages,
            }))
            .unwrap_or_default()
        );
    } else {
        for o in &outcomes {
            println!("{:<10} {}", o.action, o.file);
        }
    }
    Ok(ExitCode::SUCCESS)
}
