//! Whether a built tree holds the recipe's `[test]` corpus in the shape its kind needs, checked
//! when the build is committed rather than on the GPU machine hours later.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use super::ctest::{self, PrefixMap};
use crate::recipe::{BuildSystem, Recipe, Test, TestKind};

/// Whether the recipe's build options switch its tests on: Some(true) when a `-D…TEST…` cache
/// variable is set true, Some(false) when all such variables are false, None when the build
/// does not say (copies, cmake projects with no such option). A script is read for the same
/// switches as words of its text, and only their being off is taken at its word: a script that
/// turns tests on may still install them where rocforge does not look.
pub fn tests_enabled(recipe: &Recipe) -> Option<bool> {
    match &recipe.build.system {
        BuildSystem::Cmake { .. } => switched(recipe.build.args.iter().map(String::as_str)),
        BuildSystem::Script { script } => script_switch(script),
        _ => None,
    }
}

fn script_switch(script: &str) -> Option<bool> {
    let words = script
        .split(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '\\'))
        .filter(|w| !w.is_empty());
    switched(words).filter(|on| !on)
}

fn switched<'a>(args: impl Iterator<Item = &'a str>) -> Option<bool> {
    let mut seen = None;
    for a in args {
        if let Some(on) = test_switch(a) {
            seen = Some(seen.unwrap_or(false) || on);
        }
    }
    seen
}

/// Whether a `-D…` argument is a test switch set true (what `<name>-tests` turns back on).
pub fn switches_tests_on(arg: &str) -> bool {
    test_switch(arg) == Some(true)
}

/// Some(on) when `arg` sets a cache variable that builds tests; None for anything else.
fn test_switch(arg: &str) -> Option<bool> {
    let (name, value) = arg.strip_prefix("-D").and_then(|d| d.split_once('='))?;
    let name = name.split(':').next().unwrap_or(name).to_ascii_uppercase();
    // BUILD_TEST, BUILD_CLIENTS_TESTS, BUILD_TESTING, ROCPRIM_BUILD_TESTS; not a test-data
    // location or a benchmark switch.
    if !name.contains("TEST") || !name.contains("BUILD") {
        return None;
    }
    Some(matches!(
        value.to_ascii_uppercase().as_str(),
        "ON" | "TRUE" | "1" | "YES" | "Y"
    ))
}

fn is_executable(p: &Path) -> bool {
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Paths under `tree` (relative) whose file name is `name`, at most `max`, sorted.
fn find_named(tree: &Path, name: &str, max: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![tree.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_dir() {
                stack.push(e.path());
            } else if e.file_name().to_str() == Some(name)
                && let Ok(rel) = e.path().strip_prefix(tree)
            {
                out.push(rel.display().to_string());
            }
        }
    }
    out.sort();
    out.truncate(max);
    out
}

fn found_instead(tree: &Path, wanted: &str) -> String {
    let mut parts = Vec::new();
    if let Some(base) = Path::new(wanted).file_name().and_then(|b| b.to_str()) {
        let same = find_named(tree, base, 3);
        if !same.is_empty() {
            parts.push(format!("{base} is at {}", same.join(", ")));
        }
    }
    let trees: Vec<String> = find_named(tree, ctest::TESTFILE, 3)
        .into_iter()
        .map(|p| {
            Path::new(&p)
                .parent()
                .map_or(p.clone(), |d| d.display().to_string())
        })
        .collect();
    if !trees.is_empty() {
        parts.push(format!(
            "CTest trees (kind = \"ctest\"): {}",
            trees.join(", ")
        ));
    }
    if parts.is_empty() {
        "found instead: nothing that looks like it".into()
    } else {
        format!("found instead: {}", parts.join("; "))
    }
}

/// What is wrong with the installed corpus, in one sentence with what was found instead.
pub fn check(test: &Test, tree: &Path, built_prefix: &str) -> Result<(), String> {
    let at = tree.join(&test.client);
    match test.kind {
        TestKind::Gtest => {
            if is_executable(&at) {
                return Ok(());
            }
            if at.join(ctest::TESTFILE).is_file() {
                return Err(format!(
                    "the test client {} is a CTest directory, not a program: write kind = \"ctest\" and dir = \"{}\"",
                    test.client, test.client
                ));
            }
            if at.is_file() {
                return Err(format!(
                    "the test client {} is installed but not executable",
                    test.client
                ));
            }
            Err(format!(
                "the test client {} was not installed; {}",
                test.client,
                found_instead(tree, &test.client)
            ))
        }
        TestKind::EachBinary => match super::binaries::find_binaries(tree, &test.client) {
            Ok(b) if !b.is_empty() => Ok(()),
            Ok(_) => Err(format!(
                "no executables match the test dir {}; {}",
                test.client,
                found_instead(tree, &test.client)
            )),
            Err(e) => Err(format!(
                "the test dir {}: {e}; {}",
                test.client,
                found_instead(tree, &test.client)
            )),
        },
        TestKind::Ctest => {
            if !at.join(ctest::TESTFILE).is_file() {
                return Err(format!(
                    "the test dir {} holds no {}; {}",
                    test.client,
                    ctest::TESTFILE,
                    found_instead(tree, ctest::TESTFILE)
                ));
            }
            let map = PrefixMap {
                built: built_prefix.to_string(),
                installed: tree.to_path_buf(),
            };
            let tests = ctest::read_tree(&at, &map).map_err(|d| {
                let s = match d.position() {
                    Some(p) => format!("{p}: {}", d.message),
                    None => d.message.clone(),
                };
                s.replace(&format!("{}/", tree.display()), "")
            })?;
            if tests.is_empty() {
                return Err(format!(
                    "{}/{} declares no tests",
                    test.client,
                    ctest::TESTFILE
                ));
            }
            for t in tests.iter().filter(|t| !t.disabled) {
                if !is_executable(&t.program) {
                    let shown = t.program.strip_prefix(tree).map_or_else(
                        |_| t.program.display().to_string(),
                        |p| p.display().to_string(),
                    );
                    let origin = t
                        .origin
                        .strip_prefix(&format!("{}/", tree.display()))
                        .unwrap_or(&t.origin);
                    return Err(format!(
                        "test \"{}\" ({origin}) runs {shown}, which is not an installed executable",
                        t.name
                    ));
                }
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_script_that_turns_its_tests_off_is_taken_at_its_word() {
        assert_eq!(
            script_switch(
                "cmake -S . -B build \\\n  -DBUILD_TESTING=OFF \\\n  -DCMAKE_BUILD_TYPE=Release"
            ),
            Some(false)
        );
        assert_eq!(
            script_switch("cmake \"-DBUILD_TESTING:BOOL=OFF\""),
            Some(false)
        );
    }

    #[test]
    fn a_script_that_turns_tests_on_or_says_nothing_cannot_be_told() {
        assert_eq!(script_switch("cmake -DBUILD_TESTING=ON"), None);
        assert_eq!(
            script_switch("cmake -DBUILD_TESTING=OFF -DBUILD_CLIENTS_TESTS=ON"),
            None
        );
        assert_eq!(script_switch("python3 setup.py bdist_wheel"), None);
        assert_eq!(
            script_switch("cmake -DBUILD_BENCHMARK=OFF -DTEST_DATA=/x"),
            None
        );
    }
}
