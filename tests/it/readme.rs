//! README's commands are run, not only parsed: every `sh` block has a runner, a test that runs
//! its lines as written (with the stand-ins that test names) or `.ci/run`, which CI runs on a
//! fresh machine. A block added without one fails here.

use crate::common::{manifest, readme};

/// Each `sh` block of README, by heading and place under it, and what runs it: `module::test`
/// in tests/it, or `.ci/run`.
const RUNNERS: &[(&str, usize, &str)] = &[
    (
        "What works today",
        0,
        "real_rocm::rocrand_from_debians_archive_builds_for_gfx90c_and_gfx902",
    ),
    (
        "What works today",
        1,
        "real_rocm::rocrand_from_debians_archive_builds_for_gfx90c_and_gfx902",
    ),
    (
        "Install a release",
        0,
        "real_rocm::rocrand_from_debians_archive_builds_for_gfx90c_and_gfx902",
    ),
    ("Install", 0, ".ci/run"),
    (
        "Install",
        1,
        "ci::the_release_ships_rocforge_with_completions_and_man_pages",
    ),
    (
        "Install",
        2,
        "readme::the_completion_and_man_page_lines_run_as_written",
    ),
    (
        "Quick start",
        0,
        "cli::the_quick_starts_first_block_runs_as_written",
    ),
    (
        "Quick start",
        1,
        "real_rocm::rocrand_from_debians_archive_builds_for_gfx90c_and_gfx902",
    ),
    (
        "Quick start",
        2,
        "real_rocm::rocrand_from_debians_archive_builds_for_gfx90c_and_gfx902",
    ),
    (
        "Quick start",
        3,
        "testrun::readmes_hardware_block_runs_as_written_on_a_recorded_gfx90c",
    ),
    (
        "Quick start",
        4,
        "publish::wheel_index_serves_pip_per_target",
    ),
    ("Developing: set-up, tests and CI", 0, ".ci/run"),
    ("Developing: set-up, tests and CI", 1, ".ci/run"),
];

/// Every block has exactly one entry above, and its runner exists: the test function is in
/// its module and reads that block (`block("HEADING", N)`), or `.ci/run` holds each command.
#[test]
fn every_readme_command_block_has_a_runner() {
    let blocks = readme::blocks();
    let listed: Vec<(String, usize)> = RUNNERS
        .iter()
        .map(|(h, n, _)| (h.to_string(), *n))
        .collect();
    let found: Vec<(String, usize)> = blocks.iter().map(|b| (b.heading.clone(), b.nth)).collect();
    assert_eq!(
        found, listed,
        "README's sh blocks and the runners listed in tests/it/readme.rs differ"
    );
    let ci_run = std::fs::read_to_string(manifest().join(".ci/run")).unwrap();
    for (block, (heading, nth, runner)) in blocks.iter().zip(RUNNERS) {
        assert!(!block.commands.is_empty(), "{heading} {nth}: no command");
        if *runner == ".ci/run" {
            for cmd in &block.commands {
                for part in cmd.split(" && ") {
                    assert!(
                        ci_run.lines().any(|l| l.trim().ends_with(part.trim())),
                        ".ci/run does not run README's `{part}` ({heading})"
                    );
                }
            }
            continue;
        }
        let (module, test) = runner.split_once("::").unwrap();
        let source =
            std::fs::read_to_string(manifest().join(format!("tests/it/{module}.rs"))).unwrap();
        let at = source
            .find(&format!("fn {test}()"))
            .unwrap_or_else(|| panic!("{runner} does not exist ({heading} {nth})"));
        // The block is read by name in that file (in the test or a function it calls).
        let read = format!("block(\"{heading}\", {nth})");
        assert!(
            source.contains(&read),
            "{runner} is listed for README's \"{heading}\" block {nth} but {module}.rs never reads {read}"
        );
        assert!(at > 0);
    }
}

/// README's completion and man page lines, as written in a fresh HOME: the directories are
/// made, the bash script is written where bash-completion looks, and it completes a
/// component name; the man pages are there for `man rocforge-build`.
#[test]
fn the_completion_and_man_page_lines_run_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let lines = readme::block("Install", 2);
    assert!(
        lines.iter().any(|l| l.contains("completions bash")),
        "{lines:#?}"
    );
    for line in &lines {
        let o = readme::run(d, &[], line);
        assert_eq!(o.code, 0, "README: {line}\n{}{}", o.stdout, o.stderr);
    }
    let script = d.join(".local/share/bash-completion/completions/rocforge");
    assert!(script.is_file());
    assert!(d.join(".local/share/man/man1/rocforge-build.1").is_file());
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_rocforge"))
        .parent()
        .unwrap();
    // The script as bash-completion would source it, asked for `rocforge build rocsp<TAB>`.
    let probe = format!(
        r#"source {}
words=(rocforge build rocsp)
COMP_WORDS=("${{words[@]}}"); COMP_CWORD=2
f=$(complete -p rocforge | sed -E 's/.* -F ([^ ]+) .*/\1/')
"$f" rocforge rocsp build
printf '%s\n' "${{COMPREPLY[@]}}""#,
        script.display()
    );
    let o = std::process::Command::new("bash")
        .args(["-c", &probe])
        .env(
            "PATH",
            format!("{}:{}", bin.display(), std::env::var("PATH").unwrap()),
        )
        .env("HOME", d)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("rocsparse"),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
}
