//! The clap definitions themselves: every command says which formats it writes, every flag is
//! described, and help renders its examples whole.

use std::collections::BTreeSet;
use std::ffi::OsString;

use clap::CommandFactory;
use clap::error::ErrorKind;

use super::{Args, FORMATS, Format, formats};

/// Every leaf command (one that runs, not one that only groups others) with its path.
fn leaves(cmd: &clap::Command, path: &mut Vec<String>, out: &mut Vec<(String, clap::Command)>) {
    for sub in cmd.get_subcommands() {
        if sub.get_name() == "help" {
            continue;
        }
        path.push(sub.get_name().to_string());
        if sub.has_subcommands() {
            leaves(sub, path, out);
        } else {
            out.push((path.join(" "), sub.clone()));
        }
        path.pop();
    }
}

fn all_leaves() -> Vec<(String, clap::Command)> {
    let mut cmd = Args::command();
    cmd.build();
    let mut out = Vec::new();
    leaves(&cmd, &mut Vec::new(), &mut out);
    out
}

/// A command line that parses: the command and a value for each argument it requires.
fn minimal_argv(path: &str, leaf: &clap::Command) -> Vec<OsString> {
    let mut argv: Vec<OsString> = vec!["rocforge".into()];
    argv.extend(path.split(' ').map(OsString::from));
    for arg in leaf.get_arguments() {
        // A positional that is required unless a flag it conflicts with is given (`test COMPONENT`
        // unless `--all`) reads as optional to clap's API: given a value like the required ones.
        let either = arg.get_long().is_none()
            && arg.get_short().is_none()
            && !leaf.get_arg_conflicts_with(arg).is_empty();
        if !(arg.is_required_set() || either) || arg.is_global_set() {
            continue;
        }
        let value = arg
            .get_possible_values()
            .first()
            .map_or("x".to_string(), |v| v.get_name().to_string());
        if let Some(long) = arg.get_long() {
            argv.push(format!("--{long}").into());
        }
        argv.push(value.into());
    }
    // A required group (one of --base or --kind) is met by its first member.
    for group in leaf.get_groups().filter(|g| g.is_required_set()) {
        let Some(id) = group.get_args().next() else {
            continue;
        };
        let Some(arg) = leaf.get_arguments().find(|a| a.get_id() == id) else {
            continue;
        };
        if let Some(long) = arg.get_long() {
            argv.push(format!("--{long}").into());
        }
        argv.push("x".into());
    }
    argv
}

#[test]
fn every_command_declares_its_formats() {
    let defined: BTreeSet<String> = all_leaves().into_iter().map(|(p, _)| p).collect();
    let declared: BTreeSet<String> = FORMATS.iter().map(|(p, _)| p.to_string()).collect();
    assert_eq!(
        defined, declared,
        "FORMATS must name exactly the commands clap defines"
    );
    for (name, f) in FORMATS {
        assert!(f.contains(&Format::Text), "{name}: text is every command's");
        assert_eq!(
            f.contains(&Format::GithubMatrix),
            *name == "plan",
            "{name}: github-matrix is plan's alone"
        );
    }
}

/// `--format` a command does not write is refused as a usage error (exit 2) naming the command
/// and the formats it has; one it writes parses.
#[test]
fn unsupported_formats_are_refused_at_parse_time() {
    for (path, leaf) in all_leaves() {
        for format in ["json", "github-matrix"] {
            let mut argv = minimal_argv(&path, &leaf);
            argv.extend(["--format".into(), format.into()]);
            let wanted = match format {
                "json" => Format::Json,
                _ => Format::GithubMatrix,
            };
            match super::parse_from(argv.clone()) {
                Ok(_) => assert!(formats(&path).contains(&wanted), "{argv:?} was accepted"),
                Err(e) => {
                    assert!(
                        !formats(&path).contains(&wanted),
                        "{argv:?} should parse: {e}"
                    );
                    assert_eq!(e.kind(), ErrorKind::ArgumentConflict, "{argv:?}: {e}");
                    assert_eq!(e.exit_code(), 2);
                    let text = e.to_string();
                    assert!(
                        text.contains(&format!(
                            "--format {format} is not available for `rocforge {path}` (its formats: text"
                        )),
                        "{text}"
                    );
                }
            }
        }
    }
    let explain = super::parse_from(
        [
            "rocforge",
            "plan",
            "--explain",
            "x",
            "--format",
            "github-matrix",
        ]
        .map(OsString::from)
        .to_vec(),
    );
    assert!(
        explain.is_err_and(|e| e.to_string().contains("`rocforge plan --explain`")),
        "a hash input has no matrix"
    );
}

#[test]
fn runtime_values_a_command_cannot_use_are_refused() {
    let argv = |s: &str| s.split(' ').map(OsString::from).collect::<Vec<_>>();
    let e = super::parse_from(argv("rocforge image build --runtime host")).unwrap_err();
    assert_eq!(e.exit_code(), 2);
    assert!(
        e.to_string()
            .contains("--runtime host is not available for `rocforge image build`"),
        "{e}"
    );
    for ok in [
        "rocforge image build --runtime docker",
        "rocforge build --runtime auto",
        "rocforge plan --runtime podman",
        // plan's, package's and image create's old name for auto.
        "rocforge package x --runtime container",
    ] {
        assert!(super::parse_from(argv(ok)).is_ok(), "{ok}");
    }
}

/// One `--runtime` for all: the same values and the same words wherever it appears.
#[test]
fn runtime_is_one_flag_everywhere() {
    let mut seen = Vec::new();
    for (path, leaf) in all_leaves() {
        if let Some(arg) = leaf
            .get_arguments()
            .find(|a| a.get_id().as_str() == "runtime")
        {
            let values: Vec<String> = arg
                .get_possible_values()
                .iter()
                .map(|v| v.get_name().to_string())
                .collect();
            assert_eq!(values, ["auto", "podman", "docker", "host"], "{path}");
            seen.push((path, arg.get_help().map(|h| h.to_string())));
        }
    }
    assert!(seen.len() >= 6, "{seen:?}");
    assert!(
        seen.iter().all(|(_, h)| h.is_some() && *h == seen[0].1),
        "{seen:?}"
    );
}

#[test]
fn every_argument_and_command_is_described() {
    fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
        if path != "rocforge" && cmd.get_about().is_none() {
            missing.push(format!("{path} (the command)"));
        }
        for arg in cmd.get_arguments() {
            if matches!(arg.get_id().as_str(), "help" | "version") {
                continue;
            }
            let described = arg
                .get_help()
                .or(arg.get_long_help())
                .is_some_and(|h| !h.to_string().trim().is_empty());
            if !described {
                missing.push(format!("{path}: {}", arg.get_id()));
            }
        }
        for sub in cmd.get_subcommands() {
            if sub.get_name() != "help" {
                walk(sub, &format!("{path} {}", sub.get_name()), missing);
            }
        }
    }
    let mut cmd = Args::command();
    cmd.build();
    let mut missing = Vec::new();
    walk(&cmd, "rocforge", &mut missing);
    assert!(missing.is_empty(), "no help text: {missing:#?}");
}

/// Examples (the indented lines of a command's after-help) come out of an 80-column help
/// exactly as written: a command wrapped in the middle cannot be copied.
#[test]
fn examples_are_not_wrapped() {
    fn walk(cmd: &mut clap::Command, path: &str, bad: &mut Vec<String>) {
        let source = cmd
            .get_after_help()
            .map(|h| h.to_string())
            .unwrap_or_default();
        for rendered in [cmd.render_help(), cmd.render_long_help()] {
            let rendered = rendered.to_string();
            let lines: BTreeSet<&str> = rendered.lines().map(str::trim_end).collect();
            for line in source.lines().filter(|l| l.starts_with("  ")) {
                if !lines.contains(line.trim_end()) {
                    bad.push(format!("{path}: {line}"));
                }
            }
        }
        let names: Vec<String> = cmd
            .get_subcommands()
            .map(|s| s.get_name().to_string())
            .collect();
        for name in names {
            let sub = cmd.find_subcommand_mut(&name).expect("listed");
            walk(sub, &format!("{path} {name}"), bad);
        }
    }
    let mut cmd = Args::command().term_width(80);
    cmd.build();
    let mut bad = Vec::new();
    walk(&mut cmd, "rocforge", &mut bad);
    bad.dedup();
    assert!(bad.is_empty(), "wrapped at 80 columns: {bad:#?}");
}
