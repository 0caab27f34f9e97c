//! Hostile inputs that are not tarballs (those are in tests/artifacts.rs):
//!
//! - a recipe with shell metacharacters (`$(…)`, backticks, `;`, `|`, `&&`, newlines, quotes)
//!   in every string field that reaches a command: build args, arch-args, env values, test
//!   args, the git source's tag, subdir and paths, a patch's file name, the version. `check`,
//!   `plan`, a `--runtime host` cmake build, `package` and `test` must run no injected command
//!   (no file named PWNED appears anywhere) and hand the strings to cmake and the test client
//!   literally. Fields that are validated (arch-vars, env names, input names, component names)
//!   refuse such strings with a clear diagnostic instead.
//! - tokens (GITHUB_TOKEN, ROCFORGE_REGISTRY_PASSWORD, ROCFORGE_SUBMIT_TOKEN) never reach
//!   stdout or stderr, even with ROCFORGE_LOG=trace, when publish and submit fail.
//!
//! Needs git, cmake and sh on the host; in CI a missing cmake fails the test.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::*;

/// The component's root inside its repository. No `|` and no `"`: CMake writes the source path
/// unescaped into build.ninja, where `|` is syntax, and into cmake_install.cmake, where `"` is
/// (CMake's limitations, not rocforge's: rocforge's own script quotes both).
const SUBDIR_NAME: &str = "$(touch PWNED) `touch PWNED` ; touch PWNED && touch PWNED 'q'";
/// Another path the build needs (only git sees it, so `|` is there too).
const SHARED_NAME: &str =
    "$(touch PWNED) `touch PWNED` ; touch PWNED | touch PWNED && touch PWNED 'q' \"dq\"";

/// Every metacharacter, with an absolute marker too (in case a shell ran somewhere unexpected).
fn hostile(root: &Path) -> String {
    let abs = root.join("PWNED");
    let abs = abs.display();
    format!(
        "$(touch PWNED) `touch PWNED` ; touch PWNED | touch PWNED && touch PWNED\ntouch PWNED\n' ; touch PWNED ; ' \" ; touch PWNED ; \" $(touch {abs}) ; touch {abs}"
    )
}

/// `hostile` on one line: CMake truncates a -D value at its first newline (with a warning).
fn one_line(h: &str) -> String {
    h.replace('\n', " ; ")
}

/// The same without whitespace (versions and git tags may not hold any).
const COMPACT: &str = "1.0$(touch${IFS}PWNED)`touch${IFS}PWNED`;touch${IFS}PWNED|touch${IFS}PWNED&&touch${IFS}PWNED'\"";

/// A TOML basic string holding `s` exactly (JSON's escapes are a subset of TOML's).
fn q(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

fn cmake_works() -> bool {
    Command::new("cmake")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Every file named exactly PWNED under `dir` (symlinks not followed).
fn pwned_under(dir: &Path, found: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if e.file_name() == "PWNED" {
            found.push(p.clone());
        }
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            pwned_under(&p, found);
        }
    }
}

fn assert_not_pwned(root: &Path, after: &str) {
    let mut found = Vec::new();
    pwned_under(root, &mut found);
    for p in [
        manifest().join("PWNED"),
        std::env::temp_dir().join("PWNED"),
        std::env::current_dir().unwrap().join("PWNED"),
    ] {
        if p.exists() {
            found.push(p);
        }
    }
    assert!(found.is_empty(), "after {after}: injected files {found:?}");
}

/// A KFD sysfs tree with one gfx90c node.
fn machine(root: &Path) {
    kfd::write_machine(root, Some(kfd::gfx90c(2 << 30)), None, None);
}

struct Fx {
    w: World,
    h: String,
    recipe: String,
}

derefs_to_world!(Fx);

impl Fx {
    fn run(&self, env: &[(&str, &str)], args: &[&str]) -> Out {
        let env: Vec<(&str, &Path)> = env.iter().map(|(k, v)| (*k, Path::new(*v))).collect();
        self.w.run_env(&env, args)
    }

    /// Succeeds, and nothing the metacharacters could have run left a file behind.
    fn ok(&self, args: &[&str]) -> Out {
        let o = self.run(&[], args);
        assert_eq!(o.code, 0, "{args:?}:\n{}\n{}", o.stdout, o.stderr);
        assert_not_pwned(self.root(), &format!("{args:?}"));
        o
    }
}

/// A catalog with one cmake component, `hostile`, whose git repository keeps its root in a
/// directory named with metacharacters, and whose recipe carries them everywhere.
fn fixture() -> Option<Fx> {
    if !require("cmake", cmake_works()) {
        return None;
    }
    let w = World::new().release("localhost/rocforge-none:1").build();
    let (root, rel) = (w.root().to_path_buf(), w.release_dir());
    let h = hostile(&root);

    // The repository: the component's root under sub/<metacharacters>, another needed path
    // under shared/<metacharacters>; the tag is full of metacharacters too.
    let repo = root.join("origin/hostile.git");
    let sub = format!("sub/{SUBDIR_NAME}");
    let shared = format!("shared/{SHARED_NAME}");
    let args_out = root.join("test-args.txt");
    let cmakelists = "cmake_minimum_required(VERSION 3.16)\nproject(hostile NONE)\nfile(WRITE \"${CMAKE_BINARY_DIR}/values.txt\" \"VALUE=[${VALUE}]\\nARCH_VALUE=[${ARCH_VALUE}]\\nENV=[$ENV{HOSTILE}]\\nGPU_TARGETS=[${GPU_TARGETS}]\\n\")\ninstall(FILES \"${CMAKE_BINARY_DIR}/values.txt\" \"${CMAKE_BINARY_DIR}/CMakeCache.txt\" DESTINATION share/hostile)\ninstall(PROGRAMS hostile-args DESTINATION bin)\n";
    let client = format!(
        "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n--end--\\n' \"$a\"; done >> '{}'\n",
        args_out.display()
    );
    make_repo(
        &repo,
        &[
            (&format!("{sub}/CMakeLists.txt"), cmakelists),
            (&format!("{sub}/hostile-args"), &client),
            (&format!("{shared}/README"), "shared\n"),
            ("README", "not checked out: outside subdir and paths\n"),
        ],
        &format!("v{COMPACT}"),
    );
    std::fs::set_permissions(
        repo.join(&sub).join("hostile-args"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "--amend", "--no-edit"]);
    git(
        &repo,
        &["tag", "-f", "-a", &format!("v{COMPACT}"), "-m", "t"],
    );
    // The patch: made by git (it quotes such paths), then the commit is dropped again.
    commit_files(
        &repo,
        &[(
            &format!("{sub}/CMakeLists.txt"),
            &format!(
                "{cmakelists}file(APPEND \"${{CMAKE_BINARY_DIR}}/values.txt\" \"PATCHED=yes\\n\")\n"
            ),
        )],
        "patch",
    );
    let patch = git(&repo, &["format-patch", "-1", "--stdout", "HEAD"]) + "\n";
    git(&repo, &["reset", "-q", "--hard", "HEAD~1"]);
    let patch_name = format!("0001-{SUBDIR_NAME}.patch");
    let pdir = root.join("patches/test-1.0/hostile");
    std::fs::create_dir_all(&pdir).unwrap();
    std::fs::write(pdir.join(&patch_name), patch).unwrap();

    let recipe = format!(
        "name = \"hostile\"\nversion = {version}\nsummary = \"metacharacters everywhere\"\nlicense = \"MIT\"\n\n[source]\ngit = {url}\ntag = {tag}\nsubdir = {sub}\npaths = [{shared}]\n\n[patches]\nall = [{patch}]\n\n[build]\nsystem = \"cmake\"\narch-vars = [\"GPU_TARGETS\"]\nargs = [{value}, {value2}, {newline}]\nenv = {{ HOSTILE = {h} }}\n\n[build.arch-args]\ngfx90c = [{arch}]\n\n[test]\nkind = \"each-binary\"\ndir = \"bin/hostile-*\"\nargs = [{h}, {flag}]\ntimeout = \"30s\"\n",
        version = q("1.0"),
        url = q(&format!("file://{}", repo.display())),
        tag = q(&format!("v{COMPACT}")),
        sub = q(&sub),
        shared = q(&shared),
        patch = q(&patch_name),
        value = q(&format!("-DVALUE={}", one_line(&h))),
        value2 = q(&format!("-DVALUE2={COMPACT}")),
        h = q(&h),
        arch = q(&format!("-DARCH_VALUE={}", one_line(&h))),
        newline = q("-DNEWLINE=first\ntouch PWNED"),
        flag = q(&format!("--flag={h}")),
    );
    std::fs::write(rel.join("hostile.toml"), &recipe).unwrap();
    Some(Fx { w, h, recipe })
}

#[test]
fn metacharacters_in_every_recipe_string_reach_commands_literally() {
    let Some(fx) = fixture() else { return };
    let h = &fx.h;

    fx.ok(&["check"]);
    let line = one_line(h);
    fx.ok(&["plan", "hostile", "--arch", "gfx90c", "--format", "json"]);
    // The hash input holds every recipe string that reaches the build, as written.
    let plan: serde_json::Value = serde_json::from_str(
        &fx.ok(&[
            "plan",
            "hostile",
            "--arch",
            "gfx90c",
            "--explain",
            "hostile",
            "--format",
            "json",
        ])
        .stdout,
    )
    .unwrap();
    let text = plan.to_string();
    for s in [
        format!("-DVALUE={line}"),
        format!("-DARCH_VALUE={line}"),
        format!("-DVALUE2={COMPACT}"),
        h.to_string(),
    ] {
        assert!(
            text.contains(&serde_json::Value::String(s.clone()).to_string()),
            "the plan carries {s:?} literally: {plan:#}"
        );
    }
    fx.ok(&["fetch", "hostile", "--arch", "gfx90c"]);
    fx.ok(&["build", "hostile", "--arch", "gfx90c", "--runtime", "host"]);

    // What cmake saw: the values, byte for byte, and the patch applied.
    let store = fx.root().join("store");
    let entry = std::fs::read_dir(&store)
        .unwrap()
        .flatten()
        .find(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .expect("a store entry")
        .path();
    let share = entry.join("tree/share/hostile");
    let values = std::fs::read_to_string(share.join("values.txt")).unwrap();
    assert!(values.contains(&format!("VALUE=[{line}]\n")), "{values}");
    assert!(
        values.contains(&format!("ARCH_VALUE=[{line}]\n")),
        "{values}"
    );
    assert!(values.contains(&format!("ENV=[{h}]\n")), "{values}");
    assert!(values.contains("GPU_TARGETS=[gfx90c]\n"), "{values}");
    assert!(
        values.contains("PATCHED=yes\n"),
        "the patch applied: {values}"
    );
    let cache = std::fs::read_to_string(share.join("CMakeCache.txt")).unwrap();
    assert!(
        cache.contains(&format!("VALUE:UNINITIALIZED={line}\n")),
        "CMakeCache.txt holds the -DVALUE argument verbatim:\n{cache}"
    );
    assert!(
        cache.contains("NEWLINE:UNINITIALIZED=first\n"),
        "cmake cuts a -D value at its newline; the rest runs nowhere:\n{cache}"
    );
    assert!(
        cache.contains(&format!("VALUE2:UNINITIALIZED={COMPACT}\n")),
        "{cache}"
    );
    // The sparse checkout held only subdir and paths.
    let tree = std::fs::read_dir(fx.root().join("cache/src"))
        .unwrap()
        .flatten()
        .find(|e| e.path().join("tree").is_dir())
        .expect("a source tree")
        .path()
        .join("tree");
    assert!(tree.join(format!("shared/{SHARED_NAME}/README")).is_file());
    assert!(!tree.join("README").exists());

    fx.ok(&[
        "package",
        "hostile",
        "--arch",
        "gfx90c",
        "--runtime",
        "host",
        "--out",
        "dist",
        "--allow-build-paths",
    ]);

    // The test client gets each argument as one word, unchanged.
    let sysfs = fx.root().join("machine");
    machine(&sysfs);
    let o = fx.run(
        &[],
        &[
            "test",
            "hostile",
            "--arch",
            "gfx90c",
            "--sysfs-root",
            sysfs.to_str().unwrap(),
            "--out",
            "results",
        ],
    );
    assert_not_pwned(fx.root(), "test");
    assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    let got = std::fs::read_to_string(fx.root().join("test-args.txt")).unwrap();
    assert_eq!(got, format!("{h}\n--end--\n--flag={h}\n--end--\n"));
}

#[test]
fn validated_fields_refuse_metacharacters_with_a_clear_message() {
    let Some(fx) = fixture() else { return };
    let h = q(&fx.h);
    let cases: [(&str, String, &str); 6] = [
        (
            "arch-vars",
            fx.recipe.replace(
                "arch-vars = [\"GPU_TARGETS\"]",
                &format!("arch-vars = [{h}]"),
            ),
            "is not a variable name",
        ),
        (
            "env name",
            fx.recipe
                .replace("env = { HOSTILE =", &format!("env = {{ {h} =")),
            "is not an environment variable name",
        ),
        (
            "input name",
            format!(
                "{}\n[[inputs]]\nname = {h}\nurl = \"https://example.invalid/x.tar.gz\"\nsha256 = \"{}\"\n",
                fx.recipe,
                "0".repeat(64)
            ),
            "invalid input name",
        ),
        (
            "component name",
            fx.recipe
                .replace("name = \"hostile\"", &format!("name = {h}")),
            "invalid component name",
        ),
        (
            "version with whitespace",
            fx.recipe
                .replace("version = \"1.0\"", &format!("version = {h}")),
            "invalid version",
        ),
        (
            // Versions become file names: separators and metacharacters are refused.
            "version with metacharacters",
            fx.recipe
                .replace("version = \"1.0\"", &format!("version = {}", q(COMPACT))),
            "invalid version",
        ),
    ];
    let file = fx.root().join("recipes/test-1.0/hostile.toml");
    for (what, text, message) in cases {
        assert_ne!(text, fx.recipe, "{what}: the case changed nothing");
        std::fs::write(&file, &text).unwrap();
        for args in [&["check"][..], &["plan", "hostile", "--arch", "gfx90c"]] {
            let o = fx.run(&[], args);
            assert_eq!(o.code, 1, "{what} {args:?}: {}\n{}", o.stdout, o.stderr);
            assert!(o.stderr.contains(message), "{what}: {}", o.stderr);
            assert_not_pwned(fx.root(), what);
        }
    }
}

#[test]
fn tokens_never_reach_output_when_publish_and_submit_fail() {
    let Some(fx) = fixture() else { return };
    fx.ok(&["build", "hostile", "--arch", "gfx90c", "--runtime", "host"]);
    fx.ok(&[
        "package",
        "hostile",
        "--arch",
        "gfx90c",
        "--runtime",
        "host",
        "--out",
        "dist",
        "--allow-build-paths",
    ]);
    let sysfs = fx.root().join("machine");
    machine(&sysfs);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let token = format!("rf-secret-{}-{nanos}", std::process::id());
    let port = free_port(); // bound and released: nothing listens there
    let api = format!("http://127.0.0.1:{port}");
    let env = [
        ("GITHUB_TOKEN", token.as_str()),
        ("ROCFORGE_REGISTRY_USER", "someone"),
        ("ROCFORGE_REGISTRY_PASSWORD", token.as_str()),
        ("ROCFORGE_SUBMIT_TOKEN", token.as_str()),
        ("ROCFORGE_GITHUB_API", api.as_str()),
        ("ROCFORGE_LOG", "trace"),
    ];
    let oci = format!("oci://127.0.0.1:{port}/someone/rocforge");
    let submit = format!("{api}/results");
    let cache = format!("oci://127.0.0.1:{port}/someone/cache");
    let sysfs = sysfs.display().to_string();
    let commands: [Vec<&str>; 5] = [
        vec!["publish", "dist", "--to", "github://someone/rocm@v1"],
        vec!["publish", "dist", "--to", &oci],
        vec![
            "test",
            "hostile",
            "--arch",
            "gfx90c",
            "--sysfs-root",
            &sysfs,
            "--out",
            "results-submit",
            "--submit",
            &submit,
        ],
        vec![
            "test",
            "hostile",
            "--arch",
            "gfx90c",
            "--sysfs-root",
            &sysfs,
            "--out",
            "results-oci",
            "--submit",
            &oci,
        ],
        vec![
            "build",
            "hostile",
            "--arch",
            "gfx902",
            "--runtime",
            "host",
            "--cache",
            &cache,
        ],
    ];
    for args in commands {
        let o = fx.run(&env, &args);
        // An unreachable build cache is a warning (the build goes on locally); the rest fail.
        let expected = if args[0] == "build" { 0 } else { 1 };
        assert_eq!(o.code, expected, "{args:?}: {}\n{}", o.stdout, o.stderr);
        assert!(
            !o.stdout.contains(&token) && !o.stderr.contains(&token),
            "{args:?} printed the token:\n{}\n{}",
            o.stdout,
            o.stderr
        );
        assert!(
            o.stderr.contains(&format!("127.0.0.1:{port}")),
            "{args:?} never tried the unreachable server:\n{}",
            o.stderr
        );
    }
    // A server that echoes the credentials it was sent in its error message.
    let echo = JsonServer::start(|req| {
        let auth = req
            .headers
            .get("authorization")
            .cloned()
            .unwrap_or_default();
        (
            401,
            serde_json::json!({ "message": format!("Bad credentials: {auth} was refused") })
                .to_string(),
        )
    });
    let api = echo.url();
    let mut env = env;
    env[4] = ("ROCFORGE_GITHUB_API", api.as_str());
    let o = fx.run(
        &env,
        &["publish", "dist", "--to", "github://someone/rocm@v1"],
    );
    assert_eq!(o.code, 1, "{}\n{}", o.stdout, o.stderr);
    assert!(
        !echo.requests().is_empty(),
        "publish never asked the echoing server"
    );
    assert!(
        !o.stdout.contains(&token) && !o.stderr.contains(&token),
        "the echoed token was printed:\n{}\n{}",
        o.stdout,
        o.stderr
    );
    assert!(o.stderr.contains("Bad credentials"), "{}", o.stderr);
    // A cache key given as its text (what a CI secret named ROCFORGE_CACHE_KEY holds), damaged:
    // refused without printing it.
    let secret_line = format!("RWRTY0Iy{}", "Q".repeat(200));
    let key_text = format!("untrusted comment: rocforge secret key\n{secret_line}\n");
    let env = [("ROCFORGE_CACHE_KEY", key_text.as_str())];
    let o = fx.run(
        &env,
        &[
            "build",
            "hostile",
            "--arch",
            "gfx902",
            "--runtime",
            "host",
            "--cache",
            &cache,
        ],
    );
    assert!(
        !o.stdout.contains(&secret_line[..40]) && !o.stderr.contains(&secret_line[..40]),
        "the cache key was printed:\n{}\n{}",
        o.stdout,
        o.stderr
    );
    assert!(
        o.stderr.contains("the secret key given as text"),
        "{}",
        o.stderr
    );
}
