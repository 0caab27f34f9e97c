//! The `rocforge` command line. Parses flags, calls the library, prints.

mod cli;

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let args = cli::Args::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_env("ROCFORGE_LOG")
        .unwrap_or_else(|_| "warn".into());
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    let color = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    match cli::run(args) {
        Ok(code) => code,
        Err(e) => {
            eprint!("{}", e.render(color));
            ExitCode::from(1)
        }
    }
}
