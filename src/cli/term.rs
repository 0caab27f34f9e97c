//! The terminal side of the global flags: whether stderr gets colour (`--color`, NO_COLOR,
//! CLICOLOR_FORCE) and how much the log says (`-v`, ROCFORGE_LOG).

use std::ffi::OsString;
use std::io::IsTerminal;

use clap::ValueEnum;

/// `--color`: when diagnostics, clap's help and errors, and log lines carry ANSI styles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Color {
    /// when writing to a terminal; a non-empty NO_COLOR turns it off, CLICOLOR_FORCE on
    Auto,
    /// always, even into a pipe or file
    Always,
    /// never
    Never,
}

impl Color {
    /// Whether text written to stderr is styled. The flag beats the environment: a user who
    /// types `--color always` means it whatever their shell exports.
    pub fn stderr(self) -> bool {
        match self {
            Color::Always => true,
            Color::Never => false,
            Color::Auto => auto(
                std::env::var_os("NO_COLOR"),
                std::env::var_os("CLICOLOR_FORCE"),
                std::io::stderr().is_terminal(),
            ),
        }
    }

    /// The same choice for clap's help and errors. `auto` is left to clap (anstream), which
    /// applies the same NO_COLOR and CLICOLOR_FORCE rules to whichever stream it writes.
    pub fn clap(self) -> clap::ColorChoice {
        match self {
            Color::Auto => clap::ColorChoice::Auto,
            Color::Always => clap::ColorChoice::Always,
            Color::Never => clap::ColorChoice::Never,
        }
    }

    /// `--color` as written on a command line, before clap parses it: clap must know the
    /// choice to colour its own errors, including one about this very command line. A missing
    /// or unknown value is `auto` here; the parser then reports it.
    pub fn from_args(args: &[OsString]) -> Color {
        let mut found = Color::Auto;
        let mut words = args.iter().skip(1).map(|a| a.to_str().unwrap_or(""));
        while let Some(w) = words.next() {
            let value = match w {
                "--" => break,
                "--color" => words.next(),
                _ => w.strip_prefix("--color="),
            };
            if let Some(c) = value.and_then(|v| Color::from_str(v, false).ok()) {
                found = c;
            }
        }
        found
    }
}

/// https://no-color.org and https://bixense.com/clicolors: a non-empty NO_COLOR turns colour
/// off, a CLICOLOR_FORCE other than 0 turns it on without a terminal.
fn auto(no_color: Option<OsString>, force: Option<OsString>, terminal: bool) -> bool {
    if no_color.is_some_and(|v| !v.is_empty()) {
        return false;
    }
    if force.is_some_and(|v| !v.is_empty() && v != "0") {
        return true;
    }
    terminal
}

/// The log filter: `-v` rocforge's info events (each command run, each download), `-vv` its
/// debug events (the libraries' own chatter stays at warnings until `-vvv`, trace for all);
/// without `-v`, ROCFORGE_LOG (an EnvFilter, e.g. `rocforge::process=debug`), else warnings.
pub fn log_filter(verbose: u8, env: Option<&str>) -> Option<String> {
    match (verbose, env) {
        (0, Some(e)) if !e.trim().is_empty() => None,
        (0, _) => Some("warn".into()),
        (1, _) => Some("warn,rocforge=info".into()),
        (2, _) => Some("warn,rocforge=debug".into()),
        _ => Some("trace".into()),
    }
}

/// Log events go to stderr, styled only when `color`. `-v` lines are short (level and
/// message: the terminal or CI log has its own clock); ROCFORGE_LOG, for debugging rocforge
/// itself, keeps the full form with timestamps and modules.
pub fn init_logging(verbose: u8, color: bool) {
    let env = std::env::var("ROCFORGE_LOG").ok();
    let builder = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(color);
    match log_filter(verbose, env.as_deref()) {
        None => builder
            .with_env_filter(
                tracing_subscriber::EnvFilter::try_from_env("ROCFORGE_LOG")
                    .unwrap_or_else(|_| "warn".into()),
            )
            .init(),
        Some(filter) => builder
            .with_env_filter(filter)
            .without_time()
            .with_target(verbose >= 2)
            .init(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(v: &str) -> Option<OsString> {
        Some(v.into())
    }

    #[test]
    fn no_color_and_clicolor_force() {
        assert!(!auto(os("1"), None, true));
        assert!(auto(os(""), None, true), "an empty NO_COLOR is unset");
        assert!(!auto(os("1"), os("1"), true), "NO_COLOR wins");
        assert!(auto(None, os("1"), false));
        assert!(!auto(None, os("0"), false));
        assert!(!auto(None, None, false));
    }

    #[test]
    fn color_is_found_before_parsing() {
        let args = |s: &str| -> Vec<OsString> { s.split(' ').map(OsString::from).collect() };
        assert_eq!(Color::from_args(&args("rocforge list")), Color::Auto);
        assert_eq!(
            Color::from_args(&args("rocforge --color never list")),
            Color::Never
        );
        assert_eq!(
            Color::from_args(&args("rocforge list --color=always")),
            Color::Always
        );
        assert_eq!(
            Color::from_args(&args("rocforge list --color bogus")),
            Color::Auto
        );
        assert_eq!(
            Color::from_args(&args("rocforge inspect -- --color=always")),
            Color::Auto
        );
    }

    #[test]
    fn verbosity_sets_the_filter() {
        let f = |v, e| log_filter(v, e);
        assert_eq!(f(0, None).as_deref(), Some("warn"));
        assert_eq!(
            f(0, Some("rocforge::process=debug")),
            None,
            "ROCFORGE_LOG decides"
        );
        assert_eq!(f(1, Some("error")).as_deref(), Some("warn,rocforge=info"));
        assert_eq!(f(2, None).as_deref(), Some("warn,rocforge=debug"));
        assert_eq!(f(5, None).as_deref(), Some("trace"));
    }
}
