//! README's `sh` blocks as the tests run them: each block under its heading, its commands with
//! comments dropped and `\` continuations joined, run in bash the way a reader pastes them.

use std::path::Path;
use std::process::Command;

use super::{Out, manifest};

/// One `sh` block of README: the `##`/`###` heading it is under, which block of that heading it
/// is (from 0), and its commands.
#[derive(Debug, Clone)]
pub struct Block {
    pub heading: String,
    pub nth: usize,
    pub commands: Vec<String>,
}

/// Every `sh` block of README.md, in order.
pub fn blocks() -> Vec<Block> {
    let text = std::fs::read_to_string(manifest().join("README.md")).unwrap();
    let mut out: Vec<Block> = Vec::new();
    let mut heading = String::new();
    let mut in_block: Option<Vec<String>> = None;
    let mut fence = false;
    for line in text.lines() {
        if let Some(lines) = in_block.as_mut() {
            if line.starts_with("```") {
                let nth = out.iter().filter(|b| b.heading == heading).count();
                out.push(Block {
                    heading: heading.clone(),
                    nth,
                    commands: commands(lines),
                });
                in_block = None;
            } else {
                lines.push(line.to_string());
            }
            continue;
        }
        if line.starts_with("```") {
            if line == "```sh" {
                in_block = Some(Vec::new());
            } else {
                fence = !fence;
            }
            continue;
        }
        if !fence && let Some(h) = line.strip_prefix("## ").or(line.strip_prefix("### ")) {
            heading = h.trim().to_string();
        }
    }
    out
}

/// The commands of the `nth` `sh` block under `heading`.
pub fn block(heading: &str, nth: usize) -> Vec<String> {
    blocks()
        .into_iter()
        .find(|b| b.heading == heading && b.nth == nth)
        .unwrap_or_else(|| panic!("README has no sh block {nth} under \"{heading}\""))
        .commands
}

/// Lines to commands: comment lines and trailing `  # …` comments dropped, `\` continuations
/// joined.
fn commands(lines: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut pending = String::new();
    for line in lines {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let cmd = line.split_once("  # ").map_or(line, |(c, _)| c).trim_end();
        if let Some(head) = cmd.strip_suffix('\\') {
            pending.push_str(head.trim_end());
            pending.push(' ');
            continue;
        }
        pending.push_str(cmd);
        out.push(std::mem::take(&mut pending));
    }
    out
}

/// One README command in `bash -euo pipefail` in `dir` (also HOME), with this build's
/// rocforge first on PATH, no user config and `env` added.
pub fn run(dir: &Path, env: &[(&str, &Path)], line: &str) -> Out {
    let bin = Path::new(env!("CARGO_BIN_EXE_rocforge")).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    std::fs::write(dir.join("no-user-config.toml"), "").unwrap();
    let mut cmd = Command::new("bash");
    cmd.current_dir(dir)
        .args(["-euo", "pipefail", "-c", line])
        .env("PATH", path)
        .env("NO_COLOR", "1")
        .env_remove("ROCFORGE_RECIPES")
        .env_remove("ROCFORGE_RELEASE")
        .env_remove("GITHUB_ACTIONS")
        .env("ROCFORGE_CONFIG", dir.join("no-user-config.toml"))
        .env("HOME", dir);
    for (k, v) in env {
        cmd.env(k, v);
    }
    Out::from(cmd.output().expect("bash"))
}
