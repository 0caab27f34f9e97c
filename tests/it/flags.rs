//! The global flags every command shares, through the real binary: `--format json` gives JSON
//! or a clear refusal on every command the parser defines, `-v` adds the commands run and a
//! build's log to stderr, `--color` decides whether diagnostics carry ANSI styles.

use crate::common::*;

use std::path::Path;

/// Every command that runs (not one that only groups others), found the way a user would:
/// walking `--help`'s command lists from the top, so a new command is covered without being
/// listed here.
fn leaves(dir: &Path) -> Vec<Vec<String>> {
    fn walk(dir: &Path, path: Vec<String>, out: &mut Vec<Vec<String>>) {
        let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
        args.push("--help");
        let help = rocforge(dir, &args);
        assert_eq!(help.code, 0, "{args:?}: {}", help.stderr);
        let subs: Vec<String> = help
            .stdout
            .lines()
            .skip_while(|l| *l != "Commands:")
            .skip(1)
            .take_while(|l| !l.is_empty())
            .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
            .filter_map(|l| l.split_whitespace().next().map(str::to_string))
            .filter(|name| name != "help")
            .collect();
        if subs.is_empty() {
            out.push(path);
            return;
        }
        for s in subs {
            let mut p = path.clone();
            p.push(s);
            walk(dir, p, out);
        }
    }
    let mut out = Vec::new();
    walk(dir, Vec::new(), &mut out);
    out
}

/// A value for each argument `Usage:` shows as required: offline, harmless ones (a component
/// of the test catalog, paths that do not exist, a loopback registry nobody listens on).
fn required_args(dir: &Path, path: &[String]) -> Vec<String> {
    let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
    args.push("--help");
    let help = rocforge(dir, &args).stdout;
    let usage = help
        .lines()
        .find_map(|l| l.strip_prefix("Usage: "))
        .expect("a usage line");
    let absent = dir.join("absent").display().to_string();
    let value = |name: &str| -> String {
        match name.trim_matches(['<', '>', '.']) {
            "COMPONENT" | "COMPONENTS" | "NAMES" => "hip-core".into(),
            "SHELL" => "bash".into(),
            "KEY" => "0123456789abcdef".into(),
            "TARGET" => "gfx90c".into(),
            "REF" => "127.0.0.1:9/rocforge/none:1".into(),
            _ => absent.clone(),
        }
    };
    let words: Vec<&str> = usage.split_whitespace().skip(1 + path.len()).collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let w = words[i];
        if w.starts_with("--") && words.get(i + 1).is_some_and(|v| v.starts_with('<')) {
            out.push(w.to_string());
            out.push(value(words[i + 1]));
            i += 2;
            continue;
        }
        // A required group, `<--base <REF>|--kind <KIND>>`: its first member.
        if let Some(flag) = w.strip_prefix("<--") {
            let v = words
                .get(i + 1)
                .and_then(|v| v.split('|').next())
                .unwrap_or("");
            out.push(format!("--{flag}"));
            out.push(value(v));
            while i < words.len() && !words[i].ends_with(">>") {
                i += 1;
            }
            i += 1;
            continue;
        }
        if w.starts_with('<') {
            out.push(value(w));
        }
        i += 1;
    }
    out
}

/// `--format json` on every command: a refusal at parse time (exit 2, naming the command and
/// the formats it writes), or JSON on stdout, never text. Commands that write JSON run against a
/// test catalog with harmless arguments; most then fail (exit 1) before writing anything, which
/// is fine: what is checked is that stdout holds nothing but JSON.
#[test]
fn every_command_writes_json_or_refuses_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    copy_dir(&manifest().join("tests/fixtures/base"), dir);
    let mut refused = Vec::new();
    let mut wrote_json = Vec::new();
    for path in leaves(dir) {
        let name = path.join(" ");
        let mut args = vec![
            "--recipes".to_string(),
            "recipes".into(),
            "--format".into(),
            "json".into(),
        ];
        args.extend(path.iter().cloned());
        args.extend(required_args(dir, &path));
        // Offline and without containers: a plan instead of a build, no podman for doctor,
        // no network for lock, no GPU for test and detect, nothing installed from the internet.
        let extra: &[&str] = match name.as_str() {
            "build" => &["--dry-run"],
            "doctor" => &["--runtime", "host"],
            "lock" => &["--check"],
            "detect" => &["--sysfs-root", "absent"],
            // COMPONENT is optional in the usage line (`test --all` runs every one).
            "test" => &["absent", "--sysfs-root", "absent"],
            "install" => &["--from", "absent"],
            _ => &[],
        };
        args.extend(extra.iter().map(|s| s.to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = rocforge(dir, &args);
        if o.code == 2 {
            assert!(
                o.stderr.contains(&format!(
                    "--format json is not available for `rocforge {name}` (its formats: text)"
                )),
                "{args:?}: exit 2 but not a format refusal:\n{}",
                o.stderr
            );
            assert!(o.stdout.is_empty(), "{args:?}: {}", o.stdout);
            refused.push(name);
            continue;
        }
        if o.stdout.trim().is_empty() {
            assert_ne!(o.code, 0, "{args:?}: success without output");
            continue;
        }
        if let Err(e) = serde_json::from_str::<serde_json::Value>(&o.stdout) {
            panic!(
                "{args:?} (exit {}) wrote text for --format json ({e}):\n{}",
                o.code, o.stdout
            );
        }
        wrote_json.push(name);
    }
    // Enough of both kinds ran for the walk to mean something.
    for expected in [
        "completions",
        "man",
        "store gc",
        "key generate",
        "ci github",
    ] {
        assert!(
            refused.iter().any(|r| r == expected),
            "{expected} should refuse json: {refused:?}"
        );
    }
    for expected in ["list", "check", "plan", "build", "arch list", "store list"] {
        assert!(
            wrote_json.iter().any(|r| r == expected),
            "{expected} should write json: {wrote_json:?}"
        );
    }
}

/// `github-matrix` is plan's alone: every other command refuses it the same way.
#[test]
fn github_matrix_is_refused_outside_plan() {
    let tmp = tempfile::tempdir().unwrap();
    let o = rocforge(tmp.path(), &["arch", "list", "--format", "github-matrix"]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(
        o.stderr.contains(
            "--format github-matrix is not available for `rocforge arch list` (its formats: text, json)"
        ),
        "{}",
        o.stderr
    );
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}

/// A catalog whose one component is a host script build that prints two lines.
fn noisy_catalog() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let rel = test_release(root, "localhost/rocforge-none:1");
    std::fs::create_dir_all(root.join("src/noisy")).unwrap();
    std::fs::write(root.join("src/noisy/README"), "x\n").unwrap();
    std::fs::write(
        rel.join("noisy.toml"),
        "name = \"noisy\"\nversion = \"1.0\"\nsummary = \"s\"\nlicense = \"MIT\"\n\n[source]\npath = \"../../src/noisy\"\n\n[build]\nsystem = \"script\"\nscript = \"\"\"\necho compiling-part-one\necho compiling-part-two\nP=/opt; P=\"$DESTDIR$P/rocm/share\"\nmkdir -p \"$P\"\ncp README \"$P/\"\n\"\"\"\n",
    )
    .unwrap();
    tmp
}

/// `-v` prints a build's log lines (after the component's name) as the build writes them;
/// without it only the status lines show.
#[test]
fn verbose_streams_the_build_log() {
    let quiet = noisy_catalog();
    let args = [
        "--recipes",
        "recipes",
        "build",
        "noisy",
        "--arch",
        "gfx90c",
        "--runtime",
        "host",
    ];
    let o = rocforge(quiet.path(), &args);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(!o.stderr.contains("compiling-part-one"), "{}", o.stderr);
    let loud = noisy_catalog();
    let mut v = vec!["-v"];
    v.extend(args);
    let o = rocforge(loud.path(), &v);
    assert_eq!(o.code, 0, "{}", o.stderr);
    for line in ["noisy | compiling-part-one", "noisy | compiling-part-two"] {
        assert!(o.stderr.contains(line), "-v lacks {line}:\n{}", o.stderr);
    }
    // Asking for less and for more at once is a command line error.
    let conflict = rocforge(loud.path(), &["-q", "-v", "list"]);
    assert_eq!(conflict.code, 2, "{}", conflict.stderr);
}

/// `-q` prints nothing but errors: a build, its cached rerun, `store gc`, `key generate` and
/// `fetch` write their results to stdout and nothing to stderr. A bare `build` refuses and
/// says how to ask for the whole line, which `--all` then builds.
#[test]
fn quiet_prints_nothing_but_errors() {
    let dir = noisy_catalog();
    let build = |extra: &[&str]| {
        let mut args = vec![
            "--recipes",
            "recipes",
            "build",
            "--arch",
            "gfx90c",
            "--runtime",
            "host",
        ];
        args.extend_from_slice(extra);
        rocforge(dir.path(), &args)
    };
    let bare = build(&["-q"]);
    assert_eq!(bare.code, 1, "{}", bare.stderr);
    assert!(
        bare.stderr.contains(
            "error: no component named: the whole release line test-1.0 is 1 components to build"
        ),
        "{}",
        bare.stderr
    );
    assert!(
        bare.stderr
            .contains("`rocforge build --all` builds the whole line"),
        "{}",
        bare.stderr
    );
    // `store path` names the tree without building; before a build it says what to run.
    let path = |dir: &Path| {
        rocforge(
            dir,
            &[
                "--recipes",
                "recipes",
                "store",
                "path",
                "noisy",
                "--arch",
                "gfx90c",
                "--runtime",
                "host",
            ],
        )
    };
    let before = path(dir.path());
    assert_eq!(before.code, 1, "{}", before.stderr);
    assert_eq!(before.stdout, "");
    assert!(
        before.stderr.contains("not built yet for gfx90c: noisy")
            && before
                .stderr
                .contains("`rocforge build noisy --arch gfx90c`"),
        "{}",
        before.stderr
    );
    assert!(!dir.path().join("store").read_dir().is_ok_and(|mut d| {
        d.any(|e| e.is_ok_and(|e| !e.file_name().to_string_lossy().starts_with('.')))
    }));
    let first = build(&["-q", "--all"]);
    let after = path(dir.path());
    assert_eq!(
        (after.code, &after.stdout),
        (0, &first.stdout),
        "{}",
        after.stderr
    );
    for run in [first, build(&["-q", "noisy"])] {
        assert_eq!(run.code, 0, "{}", run.stderr);
        assert_eq!(run.stderr, "", "-q wrote to stderr");
        assert!(run.stdout.trim_end().ends_with("/tree"), "{}", run.stdout);
    }
    // Without -q the same cached build says what it did.
    let loud = build(&["noisy"]);
    assert!(
        loud.stderr.contains("noisy") && loud.stderr.contains("cached"),
        "{}",
        loud.stderr
    );
    for args in [
        &["-q", "store", "gc"][..],
        &["-q", "key", "generate", "--out", "keys"][..],
        &[
            "-q",
            "--recipes",
            "recipes",
            "fetch",
            "noisy",
            "--arch",
            "gfx90c",
        ][..],
    ] {
        let o = rocforge(dir.path(), args);
        assert_eq!(o.code, 0, "{args:?}: {}", o.stderr);
        assert_eq!(o.stderr, "", "{args:?} wrote to stderr under -q");
        assert!(!o.stdout.is_empty() || args[1] == "store", "{args:?}");
    }
}

/// A bad recipe's diagnostic: styled with `--color always` (even with NO_COLOR set, as the
/// test environment has it, and into a pipe), plain with `--color never`, with NO_COLOR, and by
/// default into a pipe; CLICOLOR_FORCE styles it without a terminal.
#[test]
fn color_follows_the_flag_and_the_environment() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    copy_dir(&manifest().join("tests/fixtures/base"), dir);
    std::fs::write(
        dir.join("recipes/line-1.0/broken.toml"),
        "name = \"broken\"\nversion = 1\n",
    )
    .unwrap();
    let check = |flags: &[&str], env: &[(&str, &Path)]| {
        let mut args = flags.to_vec();
        args.extend(["--recipes", "recipes", "check"]);
        let o = rocforge_env(dir, env, &args);
        assert_eq!(o.code, 1, "{args:?}: {}", o.stderr);
        assert!(o.stderr.contains("broken"), "{}", o.stderr);
        o.stderr.contains('\x1b')
    };
    assert!(check(&["--color", "always"], &[]));
    assert!(check(&["--color=always"], &[]));
    assert!(!check(&["--color", "never"], &[]));
    assert!(
        !check(&[], &[]),
        "NO_COLOR (set by the test helper) and no terminal"
    );
    let mut force = rocforge_command(dir, &[], &["--recipes", "recipes", "check"]);
    let o = Out::from(
        force
            .env_remove("NO_COLOR")
            .env("CLICOLOR_FORCE", "1")
            .output()
            .unwrap(),
    );
    assert!(o.stderr.contains('\x1b'), "CLICOLOR_FORCE: {}", o.stderr);
    // clap's own errors follow the flag too.
    let o = rocforge(dir, &["--color", "always", "list", "--no-such-flag"]);
    assert_eq!(o.code, 2);
    assert!(o.stderr.contains('\x1b'), "{}", o.stderr);
    let o = rocforge(dir, &["--color", "never", "list", "--no-such-flag"]);
    assert!(!o.stderr.contains('\x1b'), "{}", o.stderr);
}
