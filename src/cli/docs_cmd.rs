//! `completions` and `man`: shell completions and man pages generated from the same clap
//! definitions the parser uses, so they never drift from the commands.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::CommandFactory;

use super::{Args, Result};
use rocforge::diag::Diagnostic;

#[derive(clap::Args, Debug)]
pub struct CompletionsArgs {
    /// bash, zsh, fish, elvish or powershell
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(clap::Args, Debug)]
pub struct ManArgs {
    /// Write rocforge.1 and one page per command (rocforge-build.1, …) into DIR instead of
    /// printing rocforge.1
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// Writes `bytes` to standard output; a reader that went away (`| head`) is not an error.
fn print(bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(Diagnostic::new(format!(
            "cannot write standard output: {e}"
        ))
        .hint("redirect it to a file")
        .into()),
        _ => Ok(()),
    }
}

pub fn completions(a: &CompletionsArgs) -> Result<ExitCode> {
    let mut cmd = Args::command();
    // Generated in memory: clap_complete panics on a write error, and a closed pipe is not one.
    let mut script = Vec::new();
    clap_complete::generate(a.shell, &mut cmd, "rocforge", &mut script);
    print(&script)?;
    Ok(ExitCode::SUCCESS)
}

pub fn man(a: &ManArgs) -> Result<ExitCode> {
    let cmd = Args::command();
    let failed = |what: &Path, e: std::io::Error| {
        Diagnostic::new(format!("cannot write {}: {e}", what.display()))
            .hint("choose a writable directory")
    };
    match &a.out {
        None => {
            let mut page = Vec::new();
            clap_mangen::Man::new(cmd)
                .render(&mut page)
                .map_err(|e| failed(Path::new("the page"), e))?;
            print(&page)?;
        }
        Some(dir) => {
            std::fs::create_dir_all(dir).map_err(|e| failed(dir, e))?;
            clap_mangen::generate_to(cmd, dir).map_err(|e| failed(dir, e))?;
            eprintln!("man pages written to {}", dir.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}
