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

/// The wings in pipeline order, as README's Layout section gives them; the binary last.
const WINGS: &[&str] = &["core", "infra", "make", "deliver", "use", "app"];

fn cargo_toml(path: &std::path::Path) -> toml::Table {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .parse()
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn wing_deps(table: &toml::Table, section: &str) -> Vec<String> {
    table
        .get(section)
        .and_then(|d| d.as_table())
        .map(|d| {
            d.keys()
                .filter_map(|k| k.strip_prefix("rocforge-").map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Each wing depends only on wings before it, the binary on the app wing alone, and the
/// workspace holds exactly these wings, each in README's Layout section.
#[test]
fn the_wings_depend_only_on_the_wings_before_them() {
    let root = manifest();
    let text = std::fs::read_to_string(root.join("README.md")).unwrap();
    let layout = &text[text.find("## Layout").unwrap()..text.find("## Dependencies").unwrap()];
    let mut found: Vec<String> = std::fs::read_dir(root.join("crates"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    found.sort();
    let mut expected: Vec<String> = WINGS.iter().map(|w| w.to_string()).collect();
    expected.sort();
    assert_eq!(found, expected, "crates/ holds the wings and nothing else");
    for (i, wing) in WINGS.iter().enumerate() {
        let toml = cargo_toml(&root.join(format!("crates/{wing}/Cargo.toml")));
        assert_eq!(
            toml["package"]["name"].as_str(),
            Some(format!("rocforge-{wing}").as_str())
        );
        for section in ["dependencies", "dev-dependencies", "build-dependencies"] {
            for dep in wing_deps(&toml, section) {
                let at = WINGS.iter().position(|w| *w == dep);
                assert!(
                    at.is_some_and(|at| at < i),
                    "crates/{wing}/Cargo.toml [{section}] names rocforge-{dep}, which is not a wing before {wing}"
                );
            }
        }
        assert!(
            layout.contains(&format!("crates/{wing}/"))
                && layout.contains(&format!("rocforge-{wing}")),
            "README's Layout section does not describe crates/{wing}/"
        );
    }
    let top = cargo_toml(&root.join("Cargo.toml"));
    assert_eq!(
        wing_deps(&top, "dependencies"),
        ["app"],
        "the binary depends on the app wing alone"
    );
}

/// README's Dependencies table names every crate the workspace depends on, and no other.
#[test]
fn readme_lists_each_dependency_and_why() {
    let root = manifest();
    let top = cargo_toml(&root.join("Cargo.toml"));
    let mut used: std::collections::BTreeSet<String> = top["workspace"]["dependencies"]
        .as_table()
        .unwrap()
        .keys()
        .filter(|k| !k.starts_with("rocforge-"))
        .cloned()
        .collect();
    for section in ["dependencies", "dev-dependencies"] {
        used.extend(top[section].as_table().unwrap().keys().cloned());
    }
    used.retain(|k| !k.starts_with("rocforge-"));
    let text = std::fs::read_to_string(root.join("README.md")).unwrap();
    let deps = &text[text.find("## Dependencies").unwrap()..];
    let mut listed = std::collections::BTreeSet::new();
    for row in deps.lines().filter(|l| l.starts_with("| ")).skip(2) {
        let first = row[2..].split(" | ").next().unwrap();
        for name in first.split(", ") {
            listed.insert(name.split(' ').next().unwrap().to_string());
        }
    }
    let missing: Vec<_> = used.difference(&listed).collect();
    let extra: Vec<_> = listed.difference(&used).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "README's Dependencies table lacks {missing:?} and names {extra:?}, which no Cargo.toml uses"
    );
}
