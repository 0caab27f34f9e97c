//! `completions`, `man` and `schema`: shell completions, man pages and JSON Schemas generated from
//! the same definitions the parser and the writers use, so they never drift.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::CommandFactory;

use super::{Args, Format, Global, Result};
use rocforge::diag::Diagnostic;
use rocforge::schema::Document;

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

#[derive(clap::Args, Debug)]
pub struct SchemaArgs {
    /// The format or command output whose schema to print [default: list them]
    #[arg(value_enum)]
    pub name: Option<Document>,
    /// Write every format's schema into DIR as NAME.schema.json instead
    #[arg(long, value_name = "DIR", conflicts_with = "name")]
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
    // The script asks the binary for each completion, so names follow the catalog in use.
    let script = super::complete::registration(a.shell).map_err(|e| {
        Diagnostic::new(format!(
            "cannot write the {} completion script: {e}",
            a.shell
        ))
        .hint("bash, zsh, fish, elvish and powershell are supported")
    })?;
    print(&script)?;
    Ok(ExitCode::SUCCESS)
}

pub fn schema(g: &Global, a: &SchemaArgs) -> Result<ExitCode> {
    if let Some(name) = a.name {
        print(name.text().as_bytes())?;
        return Ok(ExitCode::SUCCESS);
    }
    let Some(dir) = &a.out else {
        if g.format == Format::Json {
            let listing = rocforge::schema::listing();
            print(format!("{}\n", super::json_text(&listing)).as_bytes())?;
        } else {
            // One column of names, as wide as the longest.
            let width = Document::all().iter().map(|d| d.name().len()).max();
            let width = width.unwrap_or(0);
            let mut out = String::new();
            for d in Document::all() {
                let id = d.identifier().unwrap_or("-");
                out += &format!("{:<width$} {id}\n", d.name());
            }
            print(out.as_bytes())?;
        }
        return Ok(ExitCode::SUCCESS);
    };
    let failed = |what: &Path, e: std::io::Error| {
        Diagnostic::new(format!("cannot write {}: {e}", what.display()))
            .hint("choose a writable directory")
    };
    std::fs::create_dir_all(dir).map_err(|e| failed(dir, e))?;
    for f in Document::all() {
        let path = dir.join(f.file_name());
        rocforge::fsutil::write_atomic(&path, f.text().as_bytes())
            .and_then(|()| {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644))
            })
            .map_err(|e| failed(&path, e))?;
    }
    note!(
        g,
        "{} schemas written to {}",
        Document::all().len(),
        dir.display()
    );
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
