//! `rocforge fetch`, `lock`, `dev`, `patch export` and `gc` against git repositories made by the
//! test and served by `git daemon` on 127.0.0.1, through a mirror mapping in rocforge.toml.

use crate::common;

use std::path::{Path, PathBuf};

use common::*;

const CMAKE: &str =
    "cmake_minimum_required(VERSION 3.16)\nset(TARGETS gfx900)\nproject(hip-core)\n";
const PATCH: &str = "Accept gfx90c in the target list.\n\n--- a/CMakeLists.txt\n+++ b/CMakeLists.txt\n@@ -1,3 +1,3 @@\n cmake_minimum_required(VERSION 3.16)\n-set(TARGETS gfx900)\n+set(TARGETS gfx900 gfx90c)\n project(hip-core)\n";

/// The catalog of every test here: the base fixture's line-1.0 with hip-core, a git source
/// whose recipe names https://example.invalid/ROCm/hip-core.git and a patch, and a mirror that
/// maps those URLs to the world's git daemon, so the mirror path is exercised by every test.
fn world() -> World {
    let w = World::new()
        .catalog("base")
        .git_mirror("https://example.invalid/ROCm/")
        .build();
    make_repo(
        &w.origin().join("hip-core.git"),
        &[
            ("CMakeLists.txt", CMAKE),
            ("src/kernel.hip", "__global__ void k() {}\n"),
        ],
        "v1.0.0",
    );
    write_recipe(
        &w,
        "hip-core",
        "name = \"hip-core\"\nversion = \"1.0.0\"\nsummary = \"s\"\nlicense = \"MIT\"\n\n[source]\ngit = \"https://example.invalid/ROCm/hip-core.git\"\ntag = \"v1.0.0\"\n\n[patches]\nall = [\"0001-accept-gfx90c.patch\"]\n\n[build]\nsystem = \"cmake\"\narch-vars = [\"GPU_TARGETS\"]\n",
    );
    write_patch(&w, "hip-core", "0001-accept-gfx90c.patch", PATCH);
    w
}

/// Writes line-1.0's recipe of `name`.
fn write_recipe(w: &World, name: &str, text: &str) {
    w.write(&format!("recipes/line-1.0/{name}.toml"), text);
}
/// A CMake component "pkg" from a directory of the catalog's, with `extra` recipe text.
fn local_pkg(w: &World, extra: &str) {
    write_recipe(
        w,
        "pkg",
        &format!(
            "name = \"pkg\"\nversion = \"1.0\"\nsummary = \"s\"\nlicense = \"MIT\"\n\n[source]\npath = \"../../src/pkg\"\n\n[build]\nsystem = \"cmake\"\narch-vars = [\"GPU_TARGETS\"]\n{extra}"
        ),
    );
    w.write("src/pkg/CMakeLists.txt", CMAKE);
}
/// recipes/line-2.0, a line based on line-1.0; its directory, for override files.
fn line_based_on_line_1(w: &World) -> PathBuf {
    w.write(
        "recipes/line-2.0/release.toml",
        "name = \"line-2.0\"\nversion = \"2.0\"\nbase = \"line-1.0\"\nimage = \"localhost/x:2\"\nprefix = \"/opt/rocm\"\narches = [\"gfx90c\"]\nbuilt = [\"pkg\"]\n",
    );
    w.path("recipes/line-2.0")
}
/// Writes line-1.0's patch `name` of `component`.
fn write_patch(w: &World, component: &str, name: &str, text: &str) {
    w.write(&format!("patches/line-1.0/{component}/{name}"), text);
}
/// Maps https://example.invalid/dl/ to `server`, next to the git daemon's mapping [`world`]
/// makes.
fn mirror_downloads(w: &World, server: &HttpServer) {
    w.mirrors(&[("https://example.invalid/dl/", server.url())]);
}
/// `fetch --format json` of `component` for gfx90c, which must succeed.
fn fetch_json(w: &World, component: &str) -> serde_json::Value {
    let o = w.run(&[
        "--recipes",
        "recipes",
        "--format",
        "json",
        "fetch",
        component,
        "--arch",
        "gfx90c",
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let doc: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(doc["schema"], "rocforge.fetch/1", "{doc}");
    crate::common::schema::assert_matches_schema(w.root(), "fetch", &doc);
    doc["sources"][0].clone()
}
/// The error of a `fetch` of `component` for gfx90c, which must fail.
fn fetch_fails(w: &World, component: &str) -> String {
    w.fails(&[
        "--recipes",
        "recipes",
        "fetch",
        component,
        "--arch",
        "gfx90c",
    ])
}
/// The `.part` files a download left in the cache.
fn part_files(w: &World) -> Vec<String> {
    std::fs::read_dir(w.path("cache/downloads"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".part"))
        .collect()
}
/// The tree of a `fetch` of `component` for gfx90c, which must succeed.
fn fetch_tree(w: &World, component: &str) -> PathBuf {
    PathBuf::from(
        w.ok(&[
            "--recipes",
            "recipes",
            "fetch",
            component,
            "--arch",
            "gfx90c",
        ])
        .stdout
        .trim(),
    )
}

#[test]
fn fetch_gives_the_patched_tree_and_a_second_fetch_is_a_no_op() {
    let mut w = world();
    let tree = fetch_tree(&w, "hip-core");
    assert!(tree.starts_with(w.path("cache/src")), "{}", tree.display());
    let cmake = std::fs::read_to_string(tree.join("CMakeLists.txt")).unwrap();
    assert!(cmake.contains("set(TARGETS gfx900 gfx90c)"), "{cmake}");
    assert!(
        !tree.join(".git").exists(),
        "a source tree carries no git metadata"
    );
    let stores: Vec<_> = std::fs::read_dir(w.path("cache/git"))
        .unwrap()
        .flatten()
        .collect();
    assert_eq!(stores.len(), 1);
    assert!(
        stores[0].path().join("shallow").is_file(),
        "libgit2 fetched shallow over git://"
    );

    let again = w.run(&[
        "--recipes",
        "recipes",
        "fetch",
        "hip-core",
        "--arch",
        "gfx90c",
    ]);
    assert_eq!(again.code, 0);
    assert_eq!(PathBuf::from(again.stdout.trim()), tree);
    assert!(
        again.stderr.contains("already in the source cache"),
        "{}",
        again.stderr
    );
    // The repeat needs no network: stop the server and fetch again.
    w.stop_git_server();
    let offline = w.run(&[
        "--recipes",
        "recipes",
        "fetch",
        "hip-core",
        "--arch",
        "gfx90c",
    ]);
    assert_eq!(offline.code, 0, "{}", offline.stderr);
}

#[test]
fn lock_pins_tags_and_check_detects_drift() {
    let w = world();
    let head = git(&w.origin().join("hip-core.git"), &["rev-parse", "HEAD"]);
    let out = w
        .ok(&["--recipes", "recipes", "lock", "--skip-images"])
        .stdout;
    assert!(out.contains("1 source(s)"), "{out}");
    let lock = std::fs::read_to_string(w.path("rocforge.lock")).unwrap();
    assert!(lock.contains(&head), "{lock}");
    assert!(
        lock.contains("git = \"https://example.invalid/ROCm/hip-core.git\""),
        "the lock records the recipe's URL, not the mirror: {lock}"
    );
    w.ok(&["--recipes", "recipes", "lock", "--check", "--skip-images"]);
    // Locking again changes no byte.
    w.ok(&["--recipes", "recipes", "lock", "--skip-images"]);
    assert_eq!(
        lock,
        std::fs::read_to_string(w.path("rocforge.lock")).unwrap()
    );

    // The plan now uses the locked commit.
    let plan: serde_json::Value = serde_json::from_str(
        &w.ok(&[
            "--recipes",
            "recipes",
            "plan",
            "--arch",
            "gfx90c",
            "--format",
            "json",
        ])
        .stdout,
    )
    .unwrap();
    assert_eq!(plan["sources_locked"], true);

    let recipe = w.path("recipes/line-1.0/hip-core.toml");
    std::fs::write(
        &recipe,
        std::fs::read_to_string(&recipe)
            .unwrap()
            .replace("v1.0.0", "v1.0.1"),
    )
    .unwrap();
    let err = w.fails(&["--recipes", "recipes", "lock", "--check", "--skip-images"]);
    assert!(err.contains("locked https://example.invalid/ROCm/hip-core.git tag:v1.0.0, recipe says https://example.invalid/ROCm/hip-core.git tag:v1.0.1"), "{err}");
    let err = w.fails(&[
        "--recipes",
        "recipes",
        "--locked",
        "fetch",
        "hip-core",
        "--arch",
        "gfx90c",
    ]);
    assert!(err.contains("rocforge.lock pins"), "{err}");
}

#[test]
fn a_moved_tag_is_refused_against_the_lock() {
    let w = world();
    w.ok(&["--recipes", "recipes", "lock", "--skip-images"]);
    let repo = w.origin().join("hip-core.git");
    commit_files(
        &repo,
        &[("src/kernel.hip", "__global__ void k2() {}\n")],
        "moved",
    );
    git(&repo, &["tag", "-f", "-a", "v1.0.0", "-m", "moved"]);
    let err = w.fails(&[
        "--recipes",
        "recipes",
        "--locked",
        "fetch",
        "hip-core",
        "--arch",
        "gfx90c",
    ]);
    assert!(
        err.contains("tag v1.0.0 of") && err.contains("now points at"),
        "{err}"
    );
    assert!(
        err.contains("rocforge lock"),
        "the hint says how to re-pin: {err}"
    );
}

#[test]
fn unlocked_inputs_are_refused_with_locked() {
    let w = world();
    let err = w.fails(&[
        "--recipes",
        "recipes",
        "--locked",
        "fetch",
        "hip-core",
        "--arch",
        "gfx90c",
    ]);
    assert!(err.contains("is not pinned in rocforge.lock"), "{err}");
}

#[test]
fn a_conflicting_patch_names_everything_and_leaves_no_cache_entry() {
    let w = world();
    write_patch(
        &w,
        "hip-core",
        "0001-accept-gfx90c.patch",
        &PATCH.replace(
            " cmake_minimum_required(VERSION 3.16)",
            " cmake_minimum_required(VERSION 3.21)",
        ),
    );
    let err = fetch_fails(&w, "hip-core");
    assert!(err.contains("0001-accept-gfx90c.patch"), "{err}");
    assert!(err.contains("CMakeLists.txt"), "{err}");
    assert!(err.contains("@@ -1,3 +1,3 @@"), "{err}");
    assert!(
        err.contains("VERSION 3.21") || err.contains("VERSION 3.16"),
        "{err}"
    );
    let src = w.path("cache/src");
    let left: Vec<_> = std::fs::read_dir(&src)
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "nothing half-patched remains: {left:?}");
}

#[test]
fn monorepo_components_get_a_sparse_partial_clone_of_their_paths() {
    let w = world();
    make_repo(
        &w.origin().join("rocm-libraries.git"),
        &[
            ("projects/rocblas/CMakeLists.txt", "project(rocblas)\n"),
            ("shared/tensile/Tensile/Common.py", "SupportedISA = []\n"),
            ("projects/miopen/huge.bin", "not needed\n"),
            ("README.md", "monorepo\n"),
        ],
        "rocm-7.1.0",
    );
    write_recipe(
        &w,
        "rocblas",
        "name = \"rocblas\"\nversion = \"5.1.0\"\nsummary = \"s\"\nlicense = \"MIT\"\n\n[source]\ngit = \"https://example.invalid/ROCm/rocm-libraries.git\"\ntag = \"rocm-7.1.0\"\nsubdir = \"projects/rocblas\"\npaths = [\"shared/tensile\"]\n\n[build]\nsystem = \"cmake\"\narch-vars = [\"GPU_TARGETS\"]\n",
    );
    let o = w.run_env(
        &[("ROCFORGE_LOG", Path::new("info"))],
        &[
            "--recipes",
            "recipes",
            "fetch",
            "rocblas",
            "--arch",
            "gfx90c",
        ],
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    // Every git command is logged in full: a partial clone, then a sparse checkout.
    assert!(o.stderr.contains("--filter=blob:none"), "{}", o.stderr);
    assert!(
        o.stderr
            .contains("sparse-checkout set --no-cone /projects/rocblas /shared/tensile"),
        "{}",
        o.stderr
    );
    let tree = PathBuf::from(o.stdout.trim());
    assert!(tree.join("projects/rocblas/CMakeLists.txt").is_file());
    assert!(tree.join("shared/tensile/Tensile/Common.py").is_file());
    assert!(
        !tree.join("projects/miopen").exists(),
        "paths outside the sparse set stay out"
    );
    assert!(!tree.join(".git").exists());
}

/// `exclude` leaves files of a repository out of the checkout, and their blobs are never
/// fetched: a source whose server lacks a blob (a snapshot without its largest files, as the
/// reachable MIOpen one lacks three tuning databases) still checks out. The exclusion reaches the
/// source key; a recipe that names it for a tarball is refused.
#[test]
fn excluded_files_are_neither_checked_out_nor_fetched() {
    let w = world();
    let origin = w.origin().join("MIOpen.git");
    make_repo(
        &origin,
        &[
            ("CMakeLists.txt", "project(miopen)\n"),
            ("src/kernels/keep.cl", "kernel\n"),
            ("src/kernels/gfx90878.db.bz2", "a database of another GPU\n"),
        ],
        "rocm-6.4.4",
    );
    // The mirror is a local snapshot (file://) that lacks the database's blob and whose config
    // allows no partial clone, as a fetched snapshot is.
    let blob = git(&origin, &["rev-parse", "HEAD:src/kernels/gfx90878.db.bz2"]);
    std::fs::remove_file(
        origin
            .join(".git/objects")
            .join(&blob[..2])
            .join(&blob[2..]),
    )
    .unwrap();
    git(&origin, &["config", "--unset", "uploadpack.allowFilter"]);
    git(
        &origin,
        &["config", "--unset", "uploadpack.allowAnySHA1InWant"],
    );
    let config = std::fs::read_to_string(w.path("rocforge.toml")).unwrap();
    std::fs::write(
        w.path("rocforge.toml"),
        config.replace(
            "[mirrors]\n",
            &format!(
                "[mirrors]\n\"https://example.invalid/ROCm/MIOpen.git\" = \"file://{}\"\n",
                origin.display()
            ),
        ),
    )
    .unwrap();
    let recipe = |exclude: &str| {
        write_recipe(
            &w,
            "miopen",
            &format!(
                "name = \"miopen\"\nversion = \"3.3.0\"\nsummary = \"s\"\nlicense = \"MIT\"\n\n[source]\ngit = \"https://example.invalid/ROCm/MIOpen.git\"\ntag = \"rocm-6.4.4\"\n{exclude}\n[build]\nsystem = \"script\"\narch-vars = []\nscript = \"true\"\n"
            ),
        )
    };
    let fetch = || {
        w.run_env(
            &[("ROCFORGE_LOG", Path::new("info"))],
            &[
                "--recipes",
                "recipes",
                "fetch",
                "miopen",
                "--arch",
                "gfx90c",
            ],
        )
    };
    recipe("");
    let whole = fetch();
    assert_ne!(
        whole.code, 0,
        "a checkout of the whole tree needs the missing blob"
    );
    recipe("exclude = [\"src/kernels/gfx90878.db.bz2\"]\n");
    let o = fetch();
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stderr
            .contains("sparse-checkout set --no-cone '/*' '!/src/kernels/gfx90878.db.bz2'"),
        "{}",
        o.stderr
    );
    let tree = PathBuf::from(o.stdout.trim());
    assert!(tree.join("CMakeLists.txt").is_file());
    assert!(tree.join("src/kernels/keep.cl").is_file());
    assert!(!tree.join("src/kernels/gfx90878.db.bz2").exists());
    assert!(!tree.join(".git").exists());
    // A tarball is taken whole.
    write_recipe(
        &w,
        "miopen",
        "name = \"miopen\"\nversion = \"3.3.0\"\nsummary = \"s\"\nlicense = \"MIT\"\n\n[source]\nurl = \"https://example.invalid/m.tar.gz\"\nsha256 = \"0000000000000000000000000000000000000000000000000000000000000000\"\nexclude = [\"x\"]\n\n[build]\nsystem = \"script\"\narch-vars = []\nscript = \"true\"\n",
    );
    let o = w.run(&["--recipes", "recipes", "check"]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(
        o.stderr.contains("\"exclude\" applies to git sources only"),
        "{}",
        o.stderr
    );
}

/// `-v` names each command rocforge runs (the git fetch here) on stderr; without it, and
/// without ROCFORGE_LOG, none is shown.
#[test]
fn verbose_fetch_shows_the_commands_it_runs() {
    let w = world();
    let fetch = |verbose: bool| {
        let mut args = vec![
            "--recipes",
            "recipes",
            "fetch",
            "hip-core",
            "--arch",
            "gfx90c",
        ];
        if verbose {
            args.insert(0, "-v");
        }
        let o = w.run(&args);
        assert_eq!(o.code, 0, "{}", o.stderr);
        o.stderr
    };
    let quiet = fetch(false);
    assert!(!quiet.contains("INFO"), "{quiet}");
    // The source cache holds the tree now: clear it so the second fetch runs git again.
    std::fs::remove_dir_all(w.path("cache")).unwrap();
    let loud = fetch(true);
    assert!(
        loud.lines()
            .any(|l| l.contains("INFO") && l.contains("git") && l.contains("fetch")),
        "-v shows no git fetch:\n{loud}"
    );
}

#[test]
fn a_source_that_needs_one_file_checks_out_only_that_file() {
    // hipBLASLt: repackaged from the builder image, only its LICENSE.md is wanted from the tree.
    let w = world();
    make_repo(
        &w.origin().join("hipBLASLt.git"),
        &[
            ("LICENSE.md", "MIT\n"),
            (
                "library/src/amd_detail/rocblaslt/src/Tensile/Logic/huge.yaml",
                "x\n",
            ),
            ("CMakeLists.txt", "project(hipblaslt VERSION 0.12.1)\n"),
        ],
        "rocm-6.4.4",
    );
    write_recipe(
        &w,
        "hipblaslt",
        "name = \"hipblaslt\"\nversion = \"6.4.4\"\nsummary = \"s\"\nlicense = \"MIT\"\n\n[source]\ngit = \"https://example.invalid/ROCm/hipBLASLt.git\"\ntag = \"rocm-6.4.4\"\npaths = [\"LICENSE.md\"]\n\n[build]\nsystem = \"script\"\narch-vars = []\nscript = \"true\"\n",
    );
    let o = w.run_env(
        &[("ROCFORGE_LOG", Path::new("info"))],
        &[
            "--recipes",
            "recipes",
            "fetch",
            "hipblaslt",
            "--arch",
            "gfx90c",
        ],
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stderr.contains("--filter=blob:none"), "{}", o.stderr);
    let tree = PathBuf::from(o.stdout.trim());
    let names: Vec<String> = std::fs::read_dir(&tree)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["LICENSE.md"]);
}

#[test]
fn submodules_are_fetched_when_asked() {
    let w = world();
    make_repo(
        &w.origin().join("sub.git"),
        &[("sub.txt", "from the submodule\n")],
        "s1",
    );
    let repo = w.origin().join("with-sub.git");
    make_repo(&repo, &[("main.txt", "main\n")], "v0");
    git(
        &repo,
        &[
            "-c",
            "protocol.file.allow=always",
            "submodule",
            "add",
            "-q",
            &format!("{}sub.git", w.git_url()),
            "third_party/sub",
        ],
    );
    git(&repo, &["commit", "-q", "-m", "add submodule"]);
    git(&repo, &["tag", "-a", "v1", "-m", "v1"]);
    write_recipe(
        &w,
        "with-sub",
        "name = \"with-sub\"\nversion = \"1\"\nsummary = \"s\"\nlicense = \"MIT\"\n\n[source]\ngit = \"https://example.invalid/ROCm/with-sub.git\"\ntag = \"v1\"\nsubmodules = true\n\n[build]\nsystem = \"cmake\"\narch-vars = [\"GPU_TARGETS\"]\n",
    );
    let tree = fetch_tree(&w, "with-sub");
    assert_eq!(
        std::fs::read_to_string(tree.join("third_party/sub/sub.txt")).unwrap(),
        "from the submodule\n"
    );
    assert!(!tree.join("third_party/sub/.git").exists());
}

/// A minimal recipe named `name` for the git source `url` at `pin` (`tag = "…"` or `rev = "…"`).
fn git_recipe(name: &str, url: &str, pin: &str) -> String {
    format!(
        "name = \"{name}\"\nversion = \"1\"\nsummary = \"s\"\nlicense = \"MIT\"\n\n[source]\ngit = \"{url}\"\n{pin}\n\n[build]\nsystem = \"cmake\"\narch-vars = [\"GPU_TARGETS\"]\n"
    )
}

/// A directory for local (`file://`) mirrors, outside the daemon's base path.
fn local_mirrors(w: &World) -> PathBuf {
    let dir = w.path("local-mirror");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn a_tree_with_a_submodule_entry_is_checked_out_without_submodules() {
    // Tensile's HostLibraryTests/googletest, MIOpen's fin: a gitlink in the tree, not wanted.
    let w = world();
    make_repo(
        &w.origin().join("googletest.git"),
        &[("README.md", "googletest\n")],
        "g1",
    );
    let repo = w.origin().join("tensile.git");
    make_repo(
        &repo,
        &[
            ("Tensile/Common.py", "x = 1\n"),
            ("HostLibraryTests/CMakeLists.txt", "project(t)\n"),
        ],
        "v0",
    );
    git(
        &repo,
        &[
            "-c",
            "protocol.file.allow=always",
            "submodule",
            "add",
            "-q",
            &format!("{}googletest.git", w.git_url()),
            "HostLibraryTests/googletest",
        ],
    );
    git(&repo, &["commit", "-q", "-m", "add googletest"]);
    git(&repo, &["tag", "-a", "rocm-6.4.4", "-m", "rocm-6.4.4"]);
    let local = local_mirrors(&w);
    git(
        &local,
        &[
            "clone",
            "-q",
            "--bare",
            repo.to_str().unwrap(),
            "tensile.git",
        ],
    );
    w.mirrors(&[(
        "https://example.invalid/local/",
        format!("file://{}/", local.display()),
    )]);
    write_recipe(
        &w,
        "tensile",
        &git_recipe(
            "tensile",
            "https://example.invalid/ROCm/tensile.git",
            "tag = \"rocm-6.4.4\"",
        ),
    );
    write_recipe(
        &w,
        "tensile-local",
        &git_recipe(
            "tensile-local",
            "https://example.invalid/local/tensile.git",
            "tag = \"rocm-6.4.4\"",
        ),
    );
    for component in ["tensile", "tensile-local"] {
        let tree = fetch_tree(&w, component);
        assert_eq!(
            std::fs::read_to_string(tree.join("Tensile/Common.py")).unwrap(),
            "x = 1\n"
        );
        assert!(tree.join("HostLibraryTests/CMakeLists.txt").is_file());
        assert!(tree.join(".gitmodules").is_file());
        let sub = tree.join("HostLibraryTests/googletest");
        assert!(sub.is_dir(), "{component}: git leaves an empty directory");
        assert_eq!(std::fs::read_dir(&sub).unwrap().count(), 0, "{component}");
    }
}

#[test]
fn a_mirror_without_the_old_history_serves_the_pinned_commit() {
    let w = world();
    let repo = w.origin().join("snapshot.git");
    make_repo(
        &repo,
        &[
            ("CMakeLists.txt", "project(snapshot)\n"),
            ("data/large.bin", "a large file of an old commit\n"),
        ],
        "v0",
    );
    let large = git(&repo, &["rev-parse", "v0:data/large.bin"]);
    git(&repo, &["rm", "-q", "data/large.bin"]);
    let tip = commit_files(&repo, &[("src/main.c", "int main;\n")], "drop it");
    git(&repo, &["tag", "-a", "v1", "-m", "v1"]);
    // The mirror holds every object but the old blob, like a snapshot that leaves out the
    // blobs of large files from history.
    let local = local_mirrors(&w);
    let mirror = local.join("snapshot.git");
    std::fs::create_dir_all(&mirror).unwrap();
    git(&mirror, &["init", "-q", "--bare"]);
    let objects: String = git(&repo, &["rev-list", "--objects", "--all"])
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|id| *id != large)
        .map(|id| format!("{id}\n"))
        .collect();
    let mut pack = std::process::Command::new("git")
        .current_dir(&repo)
        .arg("pack-objects")
        .arg("-q")
        .arg(mirror.join("objects/pack/pack"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    use std::io::Write;
    pack.stdin
        .take()
        .unwrap()
        .write_all(objects.as_bytes())
        .unwrap();
    assert!(pack.wait().unwrap().success());
    for line in git(
        &repo,
        &["for-each-ref", "--format=%(objectname) %(refname)"],
    )
    .lines()
    {
        let (id, name) = line.split_once(' ').unwrap();
        git(&mirror, &["update-ref", name, id]);
    }
    let fsck = std::process::Command::new("git")
        .current_dir(&mirror)
        .args(["fsck", "--full"])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&fsck.stdout).contains(&format!("missing blob {large}")),
        "the mirror lacks the old blob"
    );
    w.mirrors(&[(
        "https://example.invalid/snap/",
        format!("file://{}/", local.display()),
    )]);
    let url = "https://example.invalid/snap/snapshot.git";
    write_recipe(&w, "by-tag", &git_recipe("by-tag", url, "tag = \"v1\""));
    write_recipe(
        &w,
        "by-rev",
        &git_recipe("by-rev", url, &format!("rev = \"{tip}\"")),
    );
    for component in ["by-tag", "by-rev"] {
        let tree = fetch_tree(&w, component);
        assert!(tree.join("CMakeLists.txt").is_file(), "{component}");
        assert!(tree.join("src/main.c").is_file(), "{component}");
        assert!(!tree.join("data").exists(), "{component}");
    }
    // The commit the mirror cannot give whole is named, and leaves no cache entry.
    write_recipe(&w, "old", &git_recipe("old", url, "tag = \"v0\""));
    let err = fetch_fails(&w, "old");
    assert!(err.contains(url) || err.contains("snapshot.git"), "{err}");
    assert!(
        std::fs::read_dir(w.path("cache/src"))
            .unwrap()
            .flatten()
            .all(|e| !e.file_name().to_string_lossy().contains(".tmp-")),
        "no staging left behind"
    );
}

#[test]
fn a_recipe_version_other_than_the_source_declares_is_refused() {
    let w = world();
    make_repo(
        &w.origin().join("rocprim.git"),
        &[(
            "CMakeLists.txt",
            "cmake_minimum_required(VERSION 3.16)\n# the version rocPRIM declares\nset(VERSION_STRING \"3.3.0\")\nproject(rocprim LANGUAGES CXX)\nrocm_setup_version(VERSION ${VERSION_STRING})\n",
        )],
        "rocm-6.4.4",
    );
    let recipe = |version: &str| {
        format!(
            "name = \"rocprim\"\nversion = \"{version}\"\nsummary = \"s\"\nlicense = \"MIT\"\n\n[source]\ngit = \"https://example.invalid/ROCm/rocprim.git\"\ntag = \"rocm-6.4.4\"\n\n[build]\nsystem = \"cmake\"\narch-vars = [\"GPU_TARGETS\"]\n"
        )
    };
    write_recipe(&w, "rocprim", &recipe("3.4.1"));
    let err = fetch_fails(&w, "rocprim");
    assert!(err.contains("rocprim.toml:2"), "{err}");
    assert!(
        err.contains("3.4.1") && err.contains("declares 3.3.0"),
        "{err}"
    );
    assert!(err.contains("CMakeLists.txt:3"), "{err}");
    assert!(
        err.contains("version = \"3.3.0\""),
        "the hint says what to write: {err}"
    );
    assert!(
        std::fs::read_dir(w.path("cache/src"))
            .unwrap()
            .flatten()
            .all(|e| !e.path().join("tree").exists()),
        "nothing is left in the source cache"
    );
    let check = w.run(&["--recipes", "recipes", "check", "--sources", "rocprim"]);
    assert_eq!(check.code, 1, "{}\n{}", check.stdout, check.stderr);
    assert!(check.stdout.contains("version differs"), "{}", check.stdout);

    write_recipe(&w, "rocprim", &recipe("3.3.0"));
    let tree = fetch_tree(&w, "rocprim");
    assert!(tree.join("CMakeLists.txt").is_file());
    // The version is not part of the source key: a cached tree is checked as well.
    write_recipe(&w, "rocprim", &recipe("3.4.1"));
    let err = fetch_fails(&w, "rocprim");
    assert!(err.contains("declares 3.3.0"), "{err}");
}

#[test]
fn derived_tensile_logic_for_gfx90c_from_vega10() {
    let w = world();
    let logic = "library/src/blas3/Tensile/Logic/asm_full";
    make_repo(
        &w.origin().join("rocBLAS.git"),
        &[
            (
                &format!("{logic}/vega10/vega10_Cijk_Ailk_Bljk_SB.yaml"),
                "- {MinimumRequiredVersion: 4.33.0}\n- vega10\n- gfx900\n- [Device 6860, Device 687f]\n- ISA: [9, 0, 0]\n",
            ),
            (
                &format!("{logic}/vega20/vega20_Cijk_Ailk_Bljk_SB.yaml"),
                "- vega20\n- gfx906\n",
            ),
        ],
        "rocm-6.4.4",
    );
    write_recipe(
        &w,
        "rocblas",
        &format!(
            "name = \"rocblas\"\nversion = \"4.4.1\"\nsummary = \"s\"\nlicense = \"MIT\"\n\n[source]\ngit = \"https://example.invalid/ROCm/rocBLAS.git\"\ntag = \"rocm-6.4.4\"\n\n[build]\nsystem = \"cmake\"\narch-vars = [\"GPU_TARGETS\"]\n\n[[derive]]\narches = [\"gfx90c\", \"gfx902\"]\nfrom = \"{logic}/vega10\"\nto = \"{logic}/{{codename}}\"\nrename = [[\"vega10_\", \"{{codename}}_\"]]\nreplace = [[\"vega10\", \"{{codename}}\"], [\"gfx900\", \"{{arch}}\"], [\"[9, 0, 0]\", \"[{{isa}}]\"]]\n\n[derive.vars.gfx90c]\ncodename = \"renoir\"\n\n[derive.vars.gfx902]\ncodename = \"raven\"\n"
        ),
    );
    let tree = fetch_tree(&w, "rocblas");
    let derived =
        std::fs::read_to_string(tree.join(format!("{logic}/renoir/renoir_Cijk_Ailk_Bljk_SB.yaml")))
            .unwrap();
    assert_eq!(
        derived,
        "- {MinimumRequiredVersion: 4.33.0}\n- renoir\n- gfx90c\n- [Device 6860, Device 687f]\n- ISA: [9, 0, 12]\n"
    );
    assert!(
        tree.join(format!("{logic}/vega10/vega10_Cijk_Ailk_Bljk_SB.yaml"))
            .is_file(),
        "the original stays"
    );
    assert!(
        !tree.join(format!("{logic}/raven")).exists(),
        "only targeted processors are derived"
    );

    // An overlay replaces the derived logic, and changes the key.
    let mine = w.path("my-logic");
    std::fs::create_dir_all(&mine).unwrap();
    let tuned_logic = "- {MinimumRequiredVersion: 4.33.0}\n- renoir\n- gfx90c\n- tuned\n";
    std::fs::write(mine.join("renoir_Cijk_Ailk_Bljk_SB.yaml"), tuned_logic).unwrap();
    let spec = format!("rocblas:{logic}/renoir={}", mine.display());
    let tuned = PathBuf::from(
        w.ok(&[
            "--recipes",
            "recipes",
            "fetch",
            "rocblas",
            "--arch",
            "gfx90c",
            "--overlay",
            &spec,
        ])
        .stdout
        .trim(),
    );
    assert_ne!(tuned, tree);
    assert_eq!(
        std::fs::read_to_string(
            tuned.join(format!("{logic}/renoir/renoir_Cijk_Ailk_Bljk_SB.yaml"))
        )
        .unwrap(),
        tuned_logic
    );
    let key = |extra: &[&str]| -> String {
        let mut args = vec![
            "--recipes",
            "recipes",
            "plan",
            "rocblas",
            "--arch",
            "gfx90c",
            "--format",
            "json",
        ];
        args.extend_from_slice(extra);
        let v: serde_json::Value = serde_json::from_str(&w.ok(&args).stdout).unwrap();
        v["steps"][0]["key"].as_str().unwrap().to_string()
    };
    assert_ne!(
        key(&[]),
        key(&["--overlay", &spec]),
        "overlays are part of the content key"
    );

    // Logic that Tensile would not use as gfx90c's is refused at planning, before any build,
    // naming the file and what is wrong with it.
    let plan_fails = |spec: &str, arch: &str| {
        let o = w.run(&[
            "--recipes",
            "recipes",
            "plan",
            "rocblas",
            "--arch",
            arch,
            "--overlay",
            spec,
        ]);
        assert_ne!(o.code, 0, "{}", o.stdout);
        o.stderr
    };
    let other = w.path("gfx900-logic");
    std::fs::create_dir_all(&other).unwrap();
    let file = other.join("renoir_Cijk_Ailk_Bljk_SB.yaml");
    std::fs::write(
        &file,
        "- {MinimumRequiredVersion: 4.33.0}\n- renoir\n- gfx900\n",
    )
    .unwrap();
    let other_spec = format!("rocblas:{logic}/renoir={}", other.display());
    let err = plan_fails(&other_spec, "gfx90c");
    assert!(
        err.contains(&format!(
            "{}:3: logic for gfx900, in the overlay for gfx90c",
            file.display()
        )),
        "{err}"
    );
    std::fs::remove_file(&file).unwrap();
    let misnamed = other.join("vega10_Cijk_Ailk_Bljk_SB.yaml");
    std::fs::write(&misnamed, tuned_logic).unwrap();
    let err = plan_fails(&other_spec, "gfx90c");
    assert!(
        err.contains("Tensile picks logic for gfx90c by \"renoir\" in the file name")
            && err.contains("rename the file so that it starts with renoir_"),
        "{err}"
    );
    // raven is gfx902's directory: an overlay there while building gfx90c only.
    let raven = format!("rocblas:{logic}/raven={}", mine.display());
    let err = plan_fails(&raven, "gfx90c");
    assert!(
        err.contains("is gfx902's Tensile logic, but gfx902 is not being built (targets: gfx90c)"),
        "{err}"
    );
}

#[test]
fn two_processes_fetching_the_same_source_build_it_once() {
    let w = world();
    let spawn = || {
        w.command(&[
            "--recipes",
            "recipes",
            "fetch",
            "hip-core",
            "--arch",
            "gfx90c",
        ])
        .output()
        .unwrap()
    };
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(spawn);
        let b = s.spawn(spawn);
        (a.join().unwrap(), b.join().unwrap())
    });
    assert!(a.status.success(), "{}", String::from_utf8_lossy(&a.stderr));
    assert!(b.status.success(), "{}", String::from_utf8_lossy(&b.stderr));
    assert_eq!(a.stdout, b.stdout);
    let entries: Vec<_> = std::fs::read_dir(w.path("cache/src"))
        .unwrap()
        .flatten()
        .collect();
    assert_eq!(entries.len(), 1, "one entry, no leftovers: {entries:?}");
}

#[test]
fn unreachable_sources_name_the_url_and_the_mirror_hint() {
    let w = world();
    std::fs::write(w.path("rocforge.toml"), "").unwrap();
    write_recipe(
        &w,
        "hip-core",
        "name = \"hip-core\"\nversion = \"1.0.0\"\nsummary = \"s\"\nlicense = \"MIT\"\n\n[source]\ngit = \"git://127.0.0.1:1/nothing.git\"\ntag = \"v1.0.0\"\n\n[build]\nsystem = \"cmake\"\narch-vars = [\"GPU_TARGETS\"]\n",
    );
    let err = fetch_fails(&w, "hip-core");
    assert!(err.contains("git://127.0.0.1:1/nothing.git"), "{err}");
    assert!(err.contains("mirror"), "{err}");
}

/// Offline, the first error names the URL, why it cannot be reached and the mirror setting
/// that would serve it, and comes from one attempt (no "retrying" lines).
#[test]
fn offline_fetch_names_the_cause_and_the_mirror_without_retrying() {
    let w = world();
    std::fs::write(w.path("rocforge.toml"), "").unwrap();
    let recipe = |url: &str| {
        format!(
            "name = \"pkg\"\nversion = \"1.0\"\nsummary = \"s\"\nlicense = \"MIT\"\n\n[source]\nurl = \"{url}\"\nsha256 = \"{}\"\n\n[build]\nsystem = \"cmake\"\narch-vars = [\"GPU_TARGETS\"]\n",
            "0".repeat(64)
        )
    };
    write_recipe(&w, "pkg", &recipe("http://rocforge-test.invalid/x.tar.gz"));
    let err = fetch_fails(&w, "pkg");
    assert!(
        !err.contains("retrying") && !err.contains("attempts"),
        "{err}"
    );
    // The resolver's own words differ between machines ("Name or service not known",
    // "Temporary failure in name resolution"): the rest is what every user reads.
    let (head, rest) = err
        .split_once("(DNS failure) (")
        .unwrap_or_else(|| panic!("{err}"));
    let (_, tail) = rest.split_once(")\n").unwrap_or_else(|| panic!("{err}"));
    // From the error on: the progress lines above it carry times.
    let head = &head[head.find("error:").unwrap_or_else(|| panic!("{err}"))..];
    insta::assert_snapshot!(
        "offline_fetch_dns",
        format!("{head}(DNS failure) ([RESOLVER])\n{tail}")
    );

    let port = free_port();
    let url = format!("http://127.0.0.1:{port}/x.tar.gz");
    write_recipe(&w, "pkg", &recipe(&url));
    let err = fetch_fails(&w, "pkg");
    assert!(
        !err.contains("retrying") && !err.contains("attempts"),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "cannot download {url}: 127.0.0.1:{port} refused the connection"
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!("[mirrors] \"http://127.0.0.1:{port}/\"")),
        "{err}"
    );
}

#[test]
fn missing_tag_is_named() {
    let w = world();
    let recipe = w.path("recipes/line-1.0/hip-core.toml");
    std::fs::write(
        &recipe,
        std::fs::read_to_string(&recipe)
            .unwrap()
            .replace("v1.0.0", "v9.9.9"),
    )
    .unwrap();
    let err = fetch_fails(&w, "hip-core");
    assert!(err.contains("v9.9.9"), "{err}");
}

/// On the built-in catalog, what `dev` tells the author to run next works as printed: the
/// catalog is exported, the commit is written into the export as a patch, the line's own file is
/// told to list it, and a fetch from the export then carries the change. (rocm-smoke: a path
/// source in the built-in catalog, so nothing is downloaded.)
#[test]
fn dev_on_the_built_in_catalog_prints_follow_up_commands_that_work() {
    let w = World::new().build();
    let o = w.run(&["dev", "rocm-smoke"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let checkout = w.root().join(o.stdout.trim());
    std::fs::write(checkout.join("NOTE.md"), "a change of the author's\n").unwrap();
    git(&checkout, &["add", "NOTE.md"]);
    git(&checkout, &["commit", "-qm", "Add a note"]);
    // The indented lines after "then run:" are the commands, each run as written.
    let commands: Vec<&str> = o
        .stderr
        .lines()
        .skip_while(|l| !l.contains("then run:"))
        .skip(1)
        .map(str::trim)
        .filter(|l| l.starts_with("rocforge "))
        .collect();
    assert_eq!(commands.len(), 2, "{}", o.stderr);
    let mut last = None;
    for c in &commands {
        let args: Vec<&str> = c.split_whitespace().skip(1).collect();
        let o = w.run(&args);
        assert_eq!(o.code, 0, "{c}: {}", o.stderr);
        last = Some(o);
    }
    let export = last.unwrap();
    assert!(
        export
            .stdout
            .trim()
            .ends_with("patches/debian-6.4/rocm-smoke/0001-add-a-note.patch"),
        "{}",
        export.stdout
    );
    // It names the file to edit: this line's, whose [patches] resolve from this line's patches.
    let told = export
        .stderr
        .split("[patches]\n")
        .nth(1)
        .unwrap_or_default()
        .trim();
    assert!(
        export
            .stderr
            .contains("rocforge-catalog/recipes/debian-6.4/rocm-smoke.toml"),
        "{}",
        export.stderr
    );
    let line = w.path("rocforge-catalog/recipes/debian-6.4/rocm-smoke.toml");
    let mut text = std::fs::read_to_string(&line).unwrap();
    text += &format!("\n[patches]\n{told}\n");
    std::fs::write(&line, text).unwrap();
    let o = w.run(&[
        "--recipes",
        "rocforge-catalog/recipes",
        "fetch",
        "rocm-smoke",
        "--arch",
        "gfx90c",
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let tree = PathBuf::from(o.stdout.trim());
    assert_eq!(
        std::fs::read_to_string(tree.join("NOTE.md")).unwrap(),
        "a change of the author's\n"
    );
}

#[test]
fn dev_then_patch_export_round_trips_the_series() {
    let w = world();
    let out = w
        .ok(&[
            "--recipes",
            "recipes",
            "dev",
            "hip-core",
            "--arch",
            "gfx90c",
        ])
        .stdout;
    let checkout = w.root().join(out.trim());
    assert!(
        std::fs::read_to_string(checkout.join("CMakeLists.txt"))
            .unwrap()
            .contains("gfx90c")
    );
    let log = git(&checkout, &["log", "--format=%s", "rocforge-base..HEAD"]);
    assert_eq!(log, "Accept gfx90c in the target list.");

    // A patch author adds a commit; export writes it as a second patch.
    commit_files(
        &checkout,
        &[("src/kernel.hip", "__global__ void k() { /* gfx902 */ }\n")],
        "Mark the kernel for gfx902",
    );
    let exported = w
        .ok(&["--recipes", "recipes", "patch", "export", "hip-core"])
        .stdout;
    let files: Vec<&str> = exported.lines().collect();
    assert_eq!(files.len(), 2, "{exported}");
    assert!(
        files[1].ends_with("0002-mark-the-kernel-for-gfx902.patch"),
        "{exported}"
    );
    let text = std::fs::read_to_string(w.root().join(files[1])).unwrap();
    assert!(
        text.contains("Mark the kernel for gfx902"),
        "the header names the purpose: {text}"
    );
}

#[test]
fn gc_removes_trees_the_catalog_no_longer_produces() {
    let w = world();
    let old = fetch_tree(&w, "hip-core");
    write_patch(
        &w,
        "hip-core",
        "0001-accept-gfx90c.patch",
        &PATCH.replace("gfx900 gfx90c", "gfx900 gfx90c gfx902"),
    );
    let new = fetch_tree(&w, "hip-core");
    assert_ne!(old, new);
    let dry = w.ok(&["--recipes", "recipes", "gc", "--dry-run"]).stdout;
    assert!(dry.contains("would remove line-1.0/hip-core"), "{dry}");
    assert!(old.exists(), "--dry-run removes nothing");
    w.ok(&["--recipes", "recipes", "gc"]);
    assert!(!old.exists());
    assert!(new.exists(), "the current tree stays");
}

#[test]
fn tarball_sources_and_extra_inputs_come_through_an_http_mirror() {
    let w = world();
    let srv_dir = w.path("served");
    let pkg = srv_dir.join("pkg-1.0");
    std::fs::create_dir_all(pkg.join("src")).unwrap();
    std::fs::write(pkg.join("CMakeLists.txt"), CMAKE).unwrap();
    std::fs::write(pkg.join("src/kernel.hip"), "__global__ void k() {}\n").unwrap();
    tar_gz(&srv_dir, "pkg-1.0", &srv_dir.join("pkg-1.0.tar.gz"));
    std::fs::create_dir_all(srv_dir.join("data/m")).unwrap();
    std::fs::write(
        srv_dir.join("data/m/matrix.mtx"),
        "%%MatrixMarket matrix\n1 1 1\n1 1 1.0\n",
    )
    .unwrap();
    tar_gz(&srv_dir.join("data"), "m", &srv_dir.join("matrices.tar.gz"));
    std::fs::write(
        srv_dir.join("tensile-4.43.0-py3-none-any.whl"),
        b"PK\x03\x04 a wheel",
    )
    .unwrap();
    let server = HttpServer::start(&srv_dir);
    mirror_downloads(&w, &server);
    let tar_sha = sha256_file(&srv_dir.join("pkg-1.0.tar.gz"));
    let recipe = |sha: &str| {
        format!(
            "name = \"pkg\"\nversion = \"1.0\"\nsummary = \"s\"\nlicense = \"MIT\"\n\n[source]\nurl = \"https://example.invalid/dl/pkg-1.0.tar.gz\"\nsha256 = \"{sha}\"\n\n[patches]\nall = [\"0001-accept-gfx90c.patch\"]\n\n[build]\nsystem = \"cmake\"\narch-vars = [\"GPU_TARGETS\"]\n\n[[inputs]]\nname = \"matrices\"\nurl = \"https://example.invalid/dl/matrices.tar.gz\"\nsha256 = \"{}\"\nunpack = true\n\n[[inputs]]\nname = \"tensile-wheel\"\nurl = \"https://example.invalid/dl/tensile-4.43.0-py3-none-any.whl\"\nsha256 = \"{}\"\n",
            sha256_file(&srv_dir.join("matrices.tar.gz")),
            sha256_file(&srv_dir.join("tensile-4.43.0-py3-none-any.whl")),
        )
    };
    write_recipe(&w, "pkg", &recipe(&tar_sha));
    write_patch(&w, "pkg", "0001-accept-gfx90c.patch", PATCH);
    let v = fetch_json(&w, "pkg");
    let tree = PathBuf::from(v["tree"].as_str().unwrap());
    assert!(
        std::fs::read_to_string(tree.join("CMakeLists.txt"))
            .unwrap()
            .contains("gfx90c"),
        "patched, top directory stripped"
    );
    let inputs = v["inputs"].as_array().unwrap();
    assert_eq!(inputs.len(), 2);
    let matrices = PathBuf::from(inputs[0]["path"].as_str().unwrap());
    assert!(
        matrices.join("m/matrix.mtx").is_file(),
        "unpacked input: {}",
        matrices.display()
    );
    let wheel = PathBuf::from(inputs[1]["path"].as_str().unwrap());
    assert_eq!(std::fs::read(wheel).unwrap(), b"PK\x03\x04 a wheel");

    // A wrong checksum names both digests and leaves nothing behind.
    std::fs::remove_dir_all(w.path("cache")).unwrap();
    let wrong = "0".repeat(64);
    write_recipe(&w, "pkg", &recipe(&wrong));
    let err = fetch_fails(&w, "pkg");
    assert!(err.contains(&wrong) && err.contains(&tar_sha), "{err}");
    let src = w.path("cache/src");
    assert!(!src.exists() || std::fs::read_dir(&src).unwrap().next().is_none());
    let leftovers = part_files(&w);
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn lock_pins_the_builder_image_digest_from_a_registry() {
    let base = "localhost/rocforge-test-base:bookworm";
    let conf = containers_conf();
    let have_image = std::process::Command::new("podman")
        .args(["image", "exists", base])
        .env("CONTAINERS_CONF", &conf)
        .status()
        .is_ok_and(|s| s.success());
    let registry = Registry::start();
    if !require(
        "docker-registry, podman and the test base image",
        have_image && registry.is_some(),
    ) {
        return;
    }
    let registry = registry.unwrap();
    let w = world();
    let image = format!("{}/rocforge/builder:test-1", registry.host());
    let digest_file = w.path("digest");
    let push = std::process::Command::new("podman")
        .env("CONTAINERS_CONF", &conf)
        .args(["push", "--quiet", "--tls-verify=false", "--digestfile"])
        .arg(&digest_file)
        .arg(base)
        .arg(format!("docker://{image}"))
        .output()
        .unwrap();
    assert!(
        push.status.success(),
        "{}",
        String::from_utf8_lossy(&push.stderr)
    );
    let digest = std::fs::read_to_string(&digest_file)
        .unwrap()
        .trim()
        .to_string();
    let release = w.path("recipes/line-1.0/release.toml");
    std::fs::write(
        &release,
        std::fs::read_to_string(&release)
            .unwrap()
            .replace("localhost/rocforge-test:1.0", &image),
    )
    .unwrap();

    w.ok(&["--recipes", "recipes", "lock"]);
    let lock = std::fs::read_to_string(w.path("rocforge.lock")).unwrap();
    assert!(
        lock.contains(&format!("digest = \"{digest}\"")),
        "{lock}\nexpected {digest}"
    );
    w.ok(&["--recipes", "recipes", "lock", "--check"]);
    let plan: serde_json::Value = serde_json::from_str(
        &w.ok(&[
            "--recipes",
            "recipes",
            "plan",
            "--arch",
            "gfx90c",
            "--format",
            "json",
        ])
        .stdout,
    )
    .unwrap();
    assert_eq!(plan["image"]["digest"], digest.as_str());
    assert_eq!(plan["image"]["local"], false);

    // A tag that does not exist is named, with a hint, and nothing is written.
    std::fs::write(
        &release,
        std::fs::read_to_string(&release)
            .unwrap()
            .replace("test-1", "no-such-tag"),
    )
    .unwrap();
    let err = w.fails(&["--recipes", "recipes", "lock"]);
    assert!(err.contains("no-such-tag") && err.contains("404"), "{err}");
    assert_eq!(
        lock,
        std::fs::read_to_string(w.path("rocforge.lock")).unwrap()
    );
}

#[test]
fn path_sources_are_keyed_by_content() {
    let w = world();
    let dir = w.path("recipes/line-1.0/local-src");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("CMakeLists.txt"), CMAKE).unwrap();
    write_recipe(
        &w,
        "local",
        "name = \"local\"\nversion = \"0.1\"\nsummary = \"s\"\nlicense = \"MIT\"\n\n[source]\npath = \"local-src\"\n\n[build]\nsystem = \"cmake\"\narch-vars = [\"GPU_TARGETS\"]\n",
    );
    let first = fetch_tree(&w, "local");
    assert_eq!(
        std::fs::read_to_string(first.join("CMakeLists.txt")).unwrap(),
        CMAKE
    );
    assert_eq!(fetch_tree(&w, "local"), first, "same contents, same tree");
    std::fs::write(dir.join("CMakeLists.txt"), format!("{CMAKE}# edited\n")).unwrap();
    let second = fetch_tree(&w, "local");
    assert_ne!(second, first, "edited contents, new key");
    assert!(
        std::fs::read_to_string(second.join("CMakeLists.txt"))
            .unwrap()
            .ends_with("# edited\n")
    );
}

/// `check --sources`: one row per component and target set, each outcome named, exit 1 when any
/// does not apply, and nothing written to the source cache.
#[test]
fn check_sources_reports_each_component_and_writes_no_cache_entry() {
    let w = world();
    // A second component whose patch was written against another revision.
    make_repo(
        &w.origin().join("old-core.git"),
        &[("CMakeLists.txt", &CMAKE.replace("3.16", "3.21"))],
        "v1.0.0",
    );
    write_recipe(
        &w,
        "old-core",
        "name = \"old-core\"\nversion = \"1.0.0\"\nsummary = \"s\"\nlicense = \"MIT\"\n\n[source]\ngit = \"https://example.invalid/ROCm/old-core.git\"\ntag = \"v1.0.0\"\n\n[patches]\nall = []\ngfx902 = [\"0001-accept-gfx90c.patch\"]\n\n[build]\nsystem = \"cmake\"\narch-vars = [\"GPU_TARGETS\"]\n",
    );
    write_patch(&w, "old-core", "0001-accept-gfx90c.patch", PATCH);
    // One whose repository does not exist behind the mirror.
    write_recipe(
        &w,
        "gone",
        "name = \"gone\"\nversion = \"1.0.0\"\nsummary = \"s\"\nlicense = \"MIT\"\n\n[source]\ngit = \"https://example.invalid/ROCm/gone.git\"\ntag = \"v1.0.0\"\n\n[build]\nsystem = \"cmake\"\narch-vars = [\"GPU_TARGETS\"]\n",
    );
    // One whose derivation source has moved upstream.
    write_recipe(
        &w,
        "logic",
        "name = \"logic\"\nversion = \"1.0.0\"\nsummary = \"s\"\nlicense = \"MIT\"\n\n[source]\ngit = \"https://example.invalid/ROCm/hip-core.git\"\ntag = \"v1.0.0\"\n\n[build]\nsystem = \"cmake\"\narch-vars = [\"GPU_TARGETS\"]\n\n[[derive]]\narches = [\"gfx90c\"]\nfrom = \"logic/vega10\"\nto = \"logic/{arch}\"\n",
    );

    let out = w.run(&["--recipes", "recipes", "check", "--sources"]);
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    let line = |component: &str, arches: &str| -> String {
        out.stdout
            .lines()
            .find(|l| {
                let cols: Vec<&str> = l.split_whitespace().collect();
                cols.get(1) == Some(&component) && cols.get(2) == Some(&arches)
            })
            .unwrap_or_else(|| panic!("no row {component} {arches}:\n{}", out.stdout))
            .to_string()
    };
    assert!(
        line("hip-core", "gfx902,gfx90c").contains("applies (1 patch(es), 0 derived tree(s))"),
        "{}",
        out.stdout
    );
    // The per-arch series is checked with the other targets and alone.
    let both = line("old-core", "gfx902,gfx90c");
    assert!(both.contains("conflict"), "{both}");
    assert!(both.contains("0001-accept-gfx90c.patch"), "{both}");
    assert!(both.contains("@@ -1,3 +1,3 @@"), "{both}");
    assert!(line("old-core", "gfx902").contains("conflict"));
    assert!(
        line("gone", "gfx902,gfx90c").contains("source unreachable"),
        "{}",
        out.stdout
    );
    assert!(
        line("logic", "gfx902,gfx90c").contains("derivation fails"),
        "{}",
        out.stdout
    );
    assert!(out.stderr.contains("hint: "), "{}", out.stderr);
    assert!(
        out.stderr.contains("5 check(s): 1 apply, 4 do not"),
        "{}",
        out.stderr
    );

    // JSON for scripts: the same rows, with the conflict located.
    let out = w.run(&[
        "--recipes",
        "recipes",
        "--format",
        "json",
        "check",
        "--sources",
        "old-core",
        "hip-core",
    ]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    let v: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(v["schema"], "rocforge.check-sources/1");
    crate::common::schema::assert_matches_schema(w.root(), "check-sources", &v);
    assert_eq!(v["ok"], false);
    let checks = v["checks"].as_array().unwrap();
    assert_eq!(checks.len(), 3, "{checks:?}");
    let conflict = checks
        .iter()
        .find(|c| c["component"] == "old-core" && c["arches"] == serde_json::json!(["gfx902"]))
        .unwrap();
    assert_eq!(conflict["result"], "conflict");
    assert_eq!(conflict["file"], "CMakeLists.txt");
    assert_eq!(conflict["line"], 1);
    assert_eq!(conflict["release"], "line-1.0");

    // --only-patched skips components without patches or derivations; a fixed catalog passes.
    std::fs::remove_file(w.path("recipes/line-1.0/gone.toml")).unwrap();
    std::fs::remove_file(w.path("recipes/line-1.0/logic.toml")).unwrap();
    std::fs::remove_file(w.path("recipes/line-1.0/old-core.toml")).unwrap();
    let out = w
        .ok(&[
            "--recipes",
            "recipes",
            "check",
            "--sources",
            "--only-patched",
        ])
        .stdout;
    assert!(out.contains("hip-core"), "{out}");

    // Scratch trees are gone and the source cache holds nothing a build would pick up.
    let cache = w.path("cache");
    let leftovers: Vec<String> = std::fs::read_dir(&cache)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".check-sources-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    let src: Vec<_> = std::fs::read_dir(cache.join("src"))
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(
        src.is_empty(),
        "check --sources writes no source tree: {src:?}"
    );

    let err = w.fails(&["--recipes", "recipes", "check", "--sources", "nonesuch"]);
    assert!(err.contains("nonesuch"), "{err}");
}

/// An `[[inputs]]` entry pinned by the md5 upstream publishes (rocSPARSE's test matrices):
/// nothing fetches it before `rocforge lock` has checked the md5 and recorded the sha256; the
/// content key follows the lock; a wrong md5 names the input and its URL and records nothing.
#[test]
fn md5_pinned_inputs_are_checked_then_locked_by_sha256_and_refused_by_locked_without_one() {
    use md5::{Digest, Md5};
    let w = world();
    let srv_dir = w.path("served");
    std::fs::create_dir_all(srv_dir.join("m/nos1")).unwrap();
    std::fs::write(
        srv_dir.join("m/nos1/nos1.mtx"),
        "%%MatrixMarket matrix coordinate real symmetric\n1 1 1\n1 1 1.0\n",
    )
    .unwrap();
    tar_gz(&srv_dir.join("m"), "nos1", &srv_dir.join("nos1.tar.gz"));
    let served = std::fs::read(srv_dir.join("nos1.tar.gz")).unwrap();
    let md5 = hex::encode(Md5::digest(&served));
    let sha = sha256_file(&srv_dir.join("nos1.tar.gz"));
    let server = HttpServer::start(&srv_dir);
    mirror_downloads(&w, &server);
    let url = "https://example.invalid/dl/nos1.tar.gz";
    // Pinned by rev, so --locked has only the input to object to.
    let rev = git(
        &w.origin().join("hip-core.git"),
        &["rev-parse", "v1.0.0^{commit}"],
    );
    let rev = rev.trim();
    let recipe = |md5: &str| {
        format!(
            "name = \"hip-core\"\nversion = \"1.0.0\"\nsummary = \"s\"\nlicense = \"MIT\"\n\n[source]\ngit = \"https://example.invalid/ROCm/hip-core.git\"\nrev = \"{rev}\"\n\n[patches]\nall = [\"0001-accept-gfx90c.patch\"]\n\n[build]\nsystem = \"cmake\"\narch-vars = [\"GPU_TARGETS\"]\n\n[[inputs]]\nname = \"nos1.tar.gz\"\nurl = \"{url}\"\nmd5 = \"{md5}\"\n"
        )
    };
    write_recipe(&w, "hip-core", &recipe(&md5));
    let hash_input = || -> serde_json::Value {
        serde_json::from_str(
            &w.ok(&[
                "--recipes",
                "recipes",
                "--format",
                "json",
                "plan",
                "hip-core",
                "--arch",
                "gfx90c",
                "--explain",
                "hip-core",
            ])
            .stdout,
        )
        .unwrap()
    };
    let unlocked = hash_input();
    assert!(
        unlocked["component"].get("locked_inputs").is_none(),
        "{unlocked}"
    );
    assert_eq!(unlocked["component"]["inputs"][0]["md5"], md5.as_str());

    // No lock entry: --locked refuses the fetch, naming the input, its URL and the fix.
    let locked_fetch = || {
        w.fails(&[
            "--recipes",
            "recipes",
            "--locked",
            "fetch",
            "hip-core",
            "--arch",
            "gfx90c",
        ])
    };
    let err = locked_fetch();
    assert!(
        err.contains("input nos1.tar.gz") && err.contains(url) && err.contains("rocforge lock"),
        "{err}"
    );
    // Without --locked, as for an unlocked tag, the md5 is checked and the fetch goes on,
    // saying how to pin it; a second fetch finds the checked file without the server.
    let o = w.run(&[
        "--recipes",
        "recipes",
        "fetch",
        "hip-core",
        "--arch",
        "gfx90c",
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stderr.contains("input nos1.tar.gz is pinned by md5 only")
            && o.stderr
                .contains(&format!("run `rocforge lock` to pin its sha256 {sha}")),
        "{}",
        o.stderr
    );
    assert_eq!(
        std::fs::read(w.root().join(format!("cache/downloads/{sha}"))).unwrap(),
        served
    );
    let err = w.fails(&["--recipes", "recipes", "lock", "--check", "--skip-images"]);
    assert!(
        err.contains("input nos1.tar.gz") && err.contains("no sha256 in the lock"),
        "{err}"
    );

    // lock downloads it once, checks the md5 and records the sha256 (and the recipe's URL).
    let out = w
        .ok(&["--recipes", "recipes", "lock", "--skip-images"])
        .stdout;
    assert!(out.contains("1 md5-pinned input(s)"), "{out}");
    let lock = std::fs::read_to_string(w.path("rocforge.lock")).unwrap();
    assert!(
        lock.contains("[[input]]")
            && lock.contains(&format!("sha256 = \"{sha}\""))
            && lock.contains(&format!("md5 = \"{md5}\""))
            && lock.contains(&format!("url = \"{url}\"")),
        "{lock}"
    );
    w.ok(&["--recipes", "recipes", "lock", "--check", "--skip-images"]);
    assert_eq!(
        hash_input()["component"]["locked_inputs"]["nos1.tar.gz"],
        sha.as_str(),
        "the content key covers the locked sha256"
    );

    // The fetch now verifies that sha256 and hands the build the file.
    let v = fetch_json(&w, "hip-core");
    assert_eq!(v["inputs"][0]["name"], "nos1.tar.gz");
    let file = PathBuf::from(v["inputs"][0]["path"].as_str().unwrap());
    assert_eq!(std::fs::read(&file).unwrap(), served);

    // Locking again downloads nothing: the server is gone, the entry is kept byte for byte.
    drop(server);
    let out = w
        .ok(&["--recipes", "recipes", "lock", "--skip-images"])
        .stdout;
    assert!(out.starts_with("unchanged"), "{out}");
    assert_eq!(
        lock,
        std::fs::read_to_string(w.path("rocforge.lock")).unwrap()
    );

    // A wrong md5: the lock fails naming the input and both URLs, and writes nothing.
    let server = HttpServer::start(&srv_dir);
    mirror_downloads(&w, &server);
    let wrong = "0".repeat(32);
    write_recipe(&w, "hip-core", &recipe(&wrong));
    let err = w.fails(&["--recipes", "recipes", "lock", "--skip-images"]);
    assert!(
        err.contains("input nos1.tar.gz")
            && err.contains(url)
            && err.contains(&format!("{}nos1.tar.gz", server.url()))
            && err.contains("md5 mismatch")
            && err.contains(&wrong)
            && err.contains(&md5),
        "{err}"
    );
    assert_eq!(
        lock,
        std::fs::read_to_string(w.path("rocforge.lock")).unwrap(),
        "nothing is written unless everything resolved"
    );
    let leftovers = part_files(&w);
    assert!(leftovers.is_empty(), "{leftovers:?}");
    // The stale entry is refused by a --locked fetch; without --locked the md5 is checked
    // afresh, and the wrong one fails.
    let err = locked_fetch();
    assert!(
        err.contains("input nos1.tar.gz") && err.contains("rocforge lock"),
        "{err}"
    );
    let err = fetch_fails(&w, "hip-core");
    assert!(
        err.contains("md5 mismatch") && err.contains(&wrong),
        "{err}"
    );
}

/// A tar.xz with `files` (name, text), as a distribution's packaging archive is made.
fn tar_xz(path: &Path, files: &[(&str, &str)]) {
    let f = std::fs::File::create(path).unwrap();
    let mut b = tar::Builder::new(liblzma::write::XzEncoder::new(f, 6));
    for (name, text) in files {
        let mut h = tar::Header::new_gnu();
        h.set_size(text.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        b.append_data(&mut h, name, text.as_bytes()).unwrap();
    }
    b.into_inner().unwrap().finish().unwrap();
}

/// A line based on another overrides a component's source with a tarball, applies a
/// distribution's patch series by reference before the base's own patch, and keys it apart.
#[test]
fn a_derived_line_overrides_the_source_and_applies_a_series_by_reference() {
    let w = world();
    let srv_dir = w.path("served");
    let pkg = srv_dir.join("pkg-1.1");
    std::fs::create_dir_all(&pkg).unwrap();
    std::fs::write(pkg.join("CMakeLists.txt"), CMAKE).unwrap();
    std::fs::write(pkg.join("lib.c"), "int f(void) { return 1; }\n").unwrap();
    tar_gz(&srv_dir, "pkg-1.1", &srv_dir.join("pkg_1.1.orig.tar.gz"));
    let fix = "Fix f.\n\n--- a/lib.c\n+++ b/lib.c\n@@ -1 +1 @@\n-int f(void) { return 1; }\n+int f(void) { return 2; }\n";
    let docs = "Docs only.\n\n--- a/README\n+++ b/README\n@@ -1 +1 @@\n-x\n+y\n";
    tar_xz(
        &srv_dir.join("pkg_1.1-1.debian.tar.xz"),
        &[
            (
                "debian/patches/series",
                "# Debian's series\nfix-f.patch\ndocs.patch\n",
            ),
            ("debian/patches/fix-f.patch", fix),
            ("debian/patches/docs.patch", docs),
            ("debian/rules", "#!/usr/bin/make -f\n"),
        ],
    );
    let server = HttpServer::start(&srv_dir);
    mirror_downloads(&w, &server);
    // The base line: pkg from its git repository, with the catalog's own patch.
    write_recipe(
        &w,
        "pkg",
        "name = \"pkg\"\nversion = \"1.0\"\nsummary = \"s\"\nlicense = \"MIT\"\n\n[source]\npath = \"../../src/pkg\"\n\n[patches]\nall = [\"0001-accept-gfx90c.patch\"]\n\n[build]\nsystem = \"cmake\"\narch-vars = [\"GPU_TARGETS\"]\nargs = [\"-DCMAKE_BUILD_TYPE=Release\", \"-DUSE_X=ON\"]\n",
    );
    std::fs::create_dir_all(w.path("src/pkg")).unwrap();
    std::fs::write(w.path("src/pkg/CMakeLists.txt"), CMAKE).unwrap();
    write_patch(&w, "pkg", "0001-accept-gfx90c.patch", PATCH);
    let line = line_based_on_line_1(&w);
    let over = |only: &str| {
        format!(
            "version = \"1.1\"\n\n[source]\nurl = \"https://example.invalid/dl/pkg_1.1.orig.tar.gz\"\nsha256 = \"{}\"\n\n[[series]]\nurl = \"https://example.invalid/dl/pkg_1.1-1.debian.tar.xz\"\nsha256 = \"{}\"\nonly = [{only}]\n\n[build]\nargs = [\"-DUSE_X=OFF\"]\n",
            sha256_file(&srv_dir.join("pkg_1.1.orig.tar.gz")),
            sha256_file(&srv_dir.join("pkg_1.1-1.debian.tar.xz")),
        )
    };
    std::fs::write(line.join("pkg.toml"), over("\"fix-f.patch\"")).unwrap();
    w.ok(&["--recipes", "recipes", "check"]);
    let list = w
        .ok(&["--recipes", "recipes", "--release", "line-2.0", "list"])
        .stdout;
    assert!(list.contains("pkg") && list.contains("1.1"), "{list}");

    let v = fetch_json(&w, "pkg"); // line-2.0 is the newest line built from, so the default
    let tree = PathBuf::from(v["tree"].as_str().unwrap());
    assert_eq!(
        std::fs::read_to_string(tree.join("lib.c")).unwrap(),
        "int f(void) { return 2; }\n",
        "the series' patch applied"
    );
    assert!(
        std::fs::read_to_string(tree.join("CMakeLists.txt"))
            .unwrap()
            .contains("gfx90c"),
        "the base line's own patch applied after it, from patches/line-1.0/"
    );
    // The merged recipe: the override's CMake variable replaces the base's setting of it.
    let plan = w
        .ok(&[
            "--recipes",
            "recipes",
            "plan",
            "pkg",
            "--arch",
            "gfx90c",
            "--explain",
            "pkg",
        ])
        .stdout;
    assert!(
        plan.contains("-DUSE_X=OFF") && !plan.contains("-DUSE_X=ON"),
        "{plan}"
    );
    assert!(plan.contains("pkg_1.1-1.debian.tar.xz"), "{plan}");
    // `check --sources` applies what a fetch applies: the series' patch, then the base's.
    let check_sources = [
        "--recipes",
        "recipes",
        "--release",
        "line-2.0",
        "check",
        "--sources",
        "pkg",
    ];
    let checked = w.ok(&check_sources).stdout;
    assert!(checked.contains("applies (2 patch(es)"), "{checked}");
    let base_plan = w
        .ok(&[
            "--recipes",
            "recipes",
            "--release",
            "line-1.0",
            "plan",
            "pkg",
            "--arch",
            "gfx90c",
            "--explain",
            "pkg",
        ])
        .stdout;
    assert!(base_plan.contains("-DUSE_X=ON"), "{base_plan}");

    // An entry the series does not list: named, with what it does list.
    std::fs::write(line.join("pkg.toml"), over("\"fix-g.patch\"")).unwrap();
    let err = fetch_fails(&w, "pkg");
    assert!(
        err.contains("pkg_1.1-1.debian.tar.xz: debian/patches/series has no entry fix-g.patch"),
        "{err}"
    );
    assert!(err.contains("fix-f.patch, docs.patch"), "{err}");

    // A distribution's patch that no longer applies to the source: named by archive and entry,
    // and the source cache keeps nothing of the attempt.
    std::fs::write(line.join("pkg.toml"), over("\"docs.patch\"")).unwrap();
    let err = fetch_fails(&w, "pkg");
    assert!(
        err.contains("pkg_1.1-1.debian.tar.xz:debian/patches/docs.patch"),
        "{err}"
    );
    let out = w.run(&check_sources);
    assert_eq!(out.code, 1, "{}", out.stdout);
    assert!(
        out.stdout.contains("conflict") && out.stdout.contains("docs.patch"),
        "{}",
        out.stdout
    );
    let staging: Vec<_> = std::fs::read_dir(w.path("cache/src"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains(".tmp-"))
        .collect();
    assert!(staging.is_empty(), "{staging:?}");
}

/// A line whose builder image exists only locally (`localhost/…`, made by `rocforge image
/// build`) locks without a registry: the lock records the Containerfile it is made from, and
/// `lock --check` names that file once it changes. Without the Containerfile nothing is recorded.
#[test]
fn a_local_builder_image_is_locked_by_its_containerfile() {
    let w = world();
    let o = w.run(&["--recipes", "recipes", "lock"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stderr.contains(
            "localhost/rocforge-test:1.0 is built locally (`rocforge image build`) from a Containerfile this catalog does not carry"
        ),
        "{}",
        o.stderr
    );
    let lock = std::fs::read_to_string(w.path("rocforge.lock")).unwrap();
    assert!(!lock.contains("local-image"), "{lock}");
    w.ok(&["--recipes", "recipes", "lock", "--check"]);

    let file = w.path("containers/Containerfile.line-1.0");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(
        &file,
        "FROM localhost/base:1\nRUN apt-get install -y hipcc=7.0.2-1\n",
    )
    .unwrap();
    let stale = w.run(&["--recipes", "recipes", "lock", "--check"]);
    assert_eq!(stale.code, 1, "{}", stale.stderr);
    assert!(
        stale.stderr.contains(
            "line-1.0: builder image localhost/rocforge-test:1.0 (built from containers/Containerfile.line-1.0) is not locked"
        ),
        "{}",
        stale.stderr
    );
    w.ok(&["--recipes", "recipes", "lock"]);
    let lock = std::fs::read_to_string(w.path("rocforge.lock")).unwrap();
    let sha = sha256_file(&file);
    assert!(
        lock.contains("[[local-image]]")
            && lock.contains("containerfile = \"containers/Containerfile.line-1.0\"")
            && lock.contains(&format!("containerfile-sha256 = \"{sha}\"")),
        "{lock}"
    );
    w.ok(&["--recipes", "recipes", "lock", "--check"]);

    std::fs::write(
        &file,
        "FROM localhost/base:1\nRUN apt-get install -y hipcc=7.0.2-2\n",
    )
    .unwrap();
    let changed = w.run(&["--recipes", "recipes", "lock", "--check"]);
    assert_eq!(changed.code, 1, "{}", changed.stderr);
    assert!(
        changed.stderr.contains(&format!(
            "line-1.0: containers/Containerfile.line-1.0 changed since it was locked (sha256 {} then, ",
            &sha[..12]
        )),
        "{}",
        changed.stderr
    );
}

/// rocBLAS asks `find_package(Tensile ${TENSILE_VERSION} EXACT)`; a tensile pinned from another
/// release is named by `check --sources` and by the build before it configures.
#[test]
fn a_dependency_version_the_component_does_not_accept_is_named_before_the_build() {
    let w = world();
    make_repo(
        &w.origin().join("rocBLAS.git"),
        &[
            (
                "CMakeLists.txt",
                "cmake_minimum_required(VERSION 3.16)\nset(VERSION_STRING \"4.4.1\")\nproject(rocblas LANGUAGES CXX)\nrocm_setup_version(VERSION ${VERSION_STRING})\nif(BUILD_WITH_TENSILE)\n  set(TENSILE_VERSION 4.43.0 CACHE STRING \"The version of Tensile to be used\")\n  find_package(Tensile ${TENSILE_VERSION} EXACT REQUIRED HIP LLVM)\nendif()\n",
            ),
            ("LICENSE.md", "MIT\n"),
        ],
        "rocm-6.4.4",
    );
    let tensile = |version: &str| {
        let (major, rest) = version.split_once('.').unwrap();
        let (minor, patch) = rest.split_once('.').unwrap();
        vec![
            (
                "Tensile/__init__.py".to_string(),
                format!("# hardcoded tensile version\n__version__ = \"{version}\"\n"),
            ),
            (
                "Tensile/cmake/TensileConfigVersion.cmake".to_string(),
                format!(
                    "set(TENSILE_VERSION_MAJOR {major})\nset(TENSILE_VERSION_MINOR {minor})\nset(TENSILE_VERSION_PATCH {patch})\nset(PACKAGE_VERSION \"${{TENSILE_VERSION_MAJOR}}.${{TENSILE_VERSION_MINOR}}.${{TENSILE_VERSION_PATCH}}\")\n"
                ),
            ),
            ("LICENSE.md".to_string(), "MIT\n".to_string()),
        ]
    };
    let repo = w.origin().join("Tensile.git");
    let files = tensile("4.42.0");
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    make_repo(&repo, &refs, "rocm-6.3.3");
    let files = tensile("4.43.0");
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    commit_files(&repo, &refs, "Tensile 4.43.0");
    git(&repo, &["tag", "-a", "rocm-6.4.4", "-m", "rocm-6.4.4"]);
    write_recipe(
        &w,
        "rocblas",
        "name = \"rocblas\"\nversion = \"4.4.1\"\nsummary = \"s\"\nlicense = \"MIT\"\ndepends = [\"tensile\"]\n\n[source]\ngit = \"https://example.invalid/ROCm/rocBLAS.git\"\ntag = \"rocm-6.4.4\"\n\n[build]\nsystem = \"cmake\"\narch-vars = [\"GPU_TARGETS\"]\nargs = [\"-DBUILD_WITH_TENSILE=ON\"]\n",
    );
    let tensile_recipe = |tag: &str| {
        format!(
            "name = \"tensile\"\nversion = \"4.43.0\"\nsummary = \"s\"\nlicense = \"MIT\"\n\n[source]\ngit = \"https://example.invalid/ROCm/Tensile.git\"\ntag = \"{tag}\"\n\n[build]\nsystem = \"copy\"\ndest = \"share/rocforge/tensile\"\n"
        )
    };
    write_recipe(&w, "tensile", &tensile_recipe("rocm-6.3.3"));

    let check = w.run(&["--recipes", "recipes", "check", "--sources", "rocblas"]);
    assert_eq!(check.code, 1, "{}\n{}", check.stdout, check.stderr);
    assert!(
        check.stdout.contains(
            "dependency version: rocblas 4.4.1 wants Tensile 4.43.0 EXACT (CMakeLists.txt:7), tensile's source is 4.42.0 (Tensile/cmake/TensileConfigVersion.cmake:4)"
        ),
        "{}",
        check.stdout
    );
    assert!(
        check
            .stderr
            .contains("pin tensile and rocblas from the same release"),
        "{}",
        check.stderr
    );
    let json = w.run(&[
        "--recipes",
        "recipes",
        "--format",
        "json",
        "check",
        "--sources",
        "rocblas",
    ]);
    let v: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    let row = &v["checks"][0];
    assert_eq!(row["result"], "dependency-version", "{row}");
    assert_eq!(row["dependency"], "tensile");
    assert_eq!(row["wanted"], "4.43.0");
    assert_eq!(row["found"], "4.42.0");

    // The build says so too, from tensile's installed tree, before configuring anything.
    let build = w.run(&[
        "--recipes",
        "recipes",
        "build",
        "rocblas",
        "--arch",
        "gfx90c",
        "--runtime",
        "host",
    ]);
    assert_ne!(build.code, 0, "{}\n{}", build.stdout, build.stderr);
    assert!(
        build.stderr.contains("rocblas 4.4.1 wants Tensile 4.43.0 EXACT")
            && build.stderr.contains(
                "tensile's source is 4.42.0 (/opt/rocm/share/rocforge/tensile/Tensile/cmake/TensileConfigVersion.cmake:4)"
            ),
        "{}",
        build.stderr
    );
    assert!(!build.stderr.contains("==> configure"), "{}", build.stderr);

    write_recipe(&w, "tensile", &tensile_recipe("rocm-6.4.4"));
    let check = w.run(&[
        "--recipes",
        "recipes",
        "check",
        "--sources",
        "rocblas",
        "tensile",
    ]);
    assert_eq!(check.code, 0, "{}\n{}", check.stdout, check.stderr);
}

/// A line's `[resources]` replaces the hints it gives and keeps the base's others: its own image
/// and flags build at their own speed (the estimate a plan prints reads them).
#[test]
fn a_derived_line_overrides_resource_hints_key_by_key() {
    let w = world();
    local_pkg(
        &w,
        "\n[resources]\nhours = 4.5\ndisk = \"30GiB\"\ninstalled = \"2GiB\"\n",
    );
    let line = line_based_on_line_1(&w);
    std::fs::write(line.join("pkg.toml"), "[resources]\nhours = 0.75\n").unwrap();
    let resources = |release: &str| {
        let plan = w
            .ok(&[
                "--recipes",
                "recipes",
                "--release",
                release,
                "plan",
                "pkg",
                "--arch",
                "gfx90c",
                "--format",
                "json",
            ])
            .stdout;
        let v: serde_json::Value = serde_json::from_str(&plan).unwrap();
        let step = v["steps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["component"] == "pkg")
            .unwrap()
            .clone();
        (
            step["resources"]["hours"].as_f64().unwrap(),
            step["resources"]["disk_bytes"].as_u64().unwrap(),
            step["resources"]["installed_bytes"].as_u64(),
        )
    };
    assert_eq!(resources("line-1.0"), (4.5, 30 << 30, Some(2 << 30)));
    assert_eq!(
        resources("line-2.0"),
        (0.75, 30 << 30, Some(2 << 30)),
        "hours replaced, disk kept"
    );
    // A line that measures its own disk does not take the base's split of another build's.
    std::fs::write(line.join("pkg.toml"), "[resources]\ndisk = \"3GiB\"\n").unwrap();
    assert_eq!(resources("line-2.0"), (4.5, 3 << 30, None));
    std::fs::write(
        line.join("pkg.toml"),
        "[resources]\ndisk = \"3GiB\"\ninstalled = \"1GiB\"\n",
    )
    .unwrap();
    assert_eq!(resources("line-2.0"), (4.5, 3 << 30, Some(1 << 30)));

    std::fs::write(line.join("pkg.toml"), "[resources]\nhours = -1\n").unwrap();
    let out = w.run(&["--recipes", "recipes", "check"]);
    assert_ne!(out.code, 0);
    assert!(
        out.stderr.contains("hours = -1 is out of range")
            && out.stderr.contains("line-2.0/pkg.toml:2"),
        "{}",
        out.stderr
    );
}

/// `fetch A B` fetches each named component (text: a tree a line; JSON: an array), and an
/// unknown name among them fails before anything is fetched.
#[test]
fn fetch_takes_several_components_and_checks_every_name_first() {
    let w = world();
    local_pkg(&w, "");
    let args = |names: &[&'static str], json: bool| {
        let mut a = vec!["--recipes", "recipes"];
        if json {
            a.extend(["--format", "json"]);
        }
        a.push("fetch");
        a.extend(names);
        a.extend(["--arch", "gfx90c"]);
        a
    };
    let refused = w.run(&args(&["hip-core", "nope"], false));
    assert_ne!(refused.code, 0);
    assert!(
        refused.stderr.contains("no component \"nope\""),
        "{}",
        refused.stderr
    );
    assert!(
        !w.path("cache/src").exists()
            || std::fs::read_dir(w.path("cache/src"))
                .unwrap()
                .next()
                .is_none(),
        "nothing fetched before every name was checked"
    );
    let text = w.ok(&args(&["hip-core", "pkg"], false)).stdout;
    let trees: Vec<&str> = text.lines().collect();
    assert_eq!(trees.len(), 2, "{text}");
    assert!(Path::new(trees[0]).join("CMakeLists.txt").is_file());
    assert!(Path::new(trees[1]).join("CMakeLists.txt").is_file());
    let json: serde_json::Value =
        serde_json::from_str(&w.ok(&args(&["hip-core", "pkg"], true)).stdout).unwrap();
    assert_eq!(json["schema"], "rocforge.fetch/1");
    let listed: Vec<&str> = json["sources"]
        .as_array()
        .expect("a list of sources")
        .iter()
        .map(|p| p["tree"].as_str().unwrap())
        .collect();
    assert_eq!(listed, trees);
    let one: serde_json::Value = serde_json::from_str(&w.ok(&args(&["pkg"], true)).stdout).unwrap();
    assert_eq!(
        one["sources"][0]["tree"], trees[1],
        "one component has the same shape"
    );
}

/// Every input that reaches a build reaches its content key, by content: one byte of a path
/// source's file, its mode, a file added; a patch; an input's pin; an overlay's file; what
/// arches.toml gives a derivation; the builder image's Containerfile. The same inputs give the
/// same key, and `plan --explain` shows the path source's tree digest.
#[test]
fn content_keys_follow_every_input_by_content() {
    let w = world();
    write_patch(&w, "pkg", "0001-p.patch", PATCH);
    local_pkg(
        &w,
        &format!(
            "\n[patches]\nall = [\"0001-p.patch\"]\n\n[[inputs]]\nname = \"data\"\nurl = \"https://example.invalid/dl/data.bin\"\nsha256 = \"{}\"\n\n[[derive]]\narches = [\"gfx90c\"]\nfrom = \"logic/vega10\"\nto = \"logic/{{arch}}\"\nreplace = [[\"[9, 0, 0]\", \"[{{isa}}]\"]]\n",
            "1".repeat(64)
        ),
    );
    let recipe_path = w.path("recipes/line-1.0/pkg.toml");
    let src = w.path("src/pkg");
    std::fs::create_dir_all(src.join("logic/vega10")).unwrap();
    std::fs::write(src.join("logic/vega10/a.yaml"), "- [9, 0, 0]\n").unwrap();
    let mine = w.path("my-logic");
    std::fs::create_dir_all(&mine).unwrap();
    std::fs::write(mine.join("gfx90c_a.yaml"), "- gfx90c\n- tuned\n").unwrap();
    let overlay = format!("pkg:logic/gfx90c={}", mine.display());
    let key = |extra: &[&str]| -> String {
        let mut args = vec![
            "--recipes",
            "recipes",
            "plan",
            "pkg",
            "--arch",
            "gfx90c",
            "--format",
            "json",
        ];
        args.extend_from_slice(extra);
        let v: serde_json::Value = serde_json::from_str(&w.ok(&args).stdout).unwrap();
        v["steps"][0]["key"].as_str().unwrap().to_string()
    };
    let mut seen = vec![key(&[])];
    let mut changes = |what: &str, extra: &[&str]| {
        let k = key(extra);
        assert_eq!(key(extra), k, "{what}: the same inputs, the same key");
        assert!(!seen.contains(&k), "{what}: the key did not change");
        seen.push(k);
    };
    let cmake = src.join("CMakeLists.txt");
    std::fs::write(&cmake, CMAKE.replace("gfx900", "gfx901")).unwrap();
    changes("one byte of a path source's file", &[]);
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&cmake, std::fs::Permissions::from_mode(0o755)).unwrap();
    changes("a path source file's mode", &[]);
    std::fs::write(src.join("NEW"), "").unwrap();
    changes("an empty file added to a path source", &[]);
    write_patch(
        &w,
        "pkg",
        "0001-p.patch",
        &PATCH.replace("Accept", "accept"),
    );
    changes("one byte of a patch", &[]);
    let text = std::fs::read_to_string(&recipe_path).unwrap();
    std::fs::write(&recipe_path, text.replace(&"1".repeat(64), &"2".repeat(64))).unwrap();
    changes("an input's sha256", &[]);
    changes("an overlay", &["--overlay", &overlay]);
    std::fs::write(mine.join("gfx90c_a.yaml"), "- gfx90c\n- tuneD\n").unwrap();
    changes("one byte of an overlay's file", &["--overlay", &overlay]);
    let arches = w.path("recipes/arches.toml");
    let table = std::fs::read_to_string(&arches).unwrap();
    assert!(table.contains("kfd-version = 90012"), "{table}");
    std::fs::write(
        &arches,
        table.replace("kfd-version = 90012", "kfd-version = 90013"),
    )
    .unwrap();
    changes("gfx90c's KFD version, which {isa} substitutes", &[]);

    // The builder image: made from a Containerfile FROM a debootstrap [image-base], it is
    // keyed by those inputs, which hold no mirror.
    let release = w.path("recipes/line-1.0/release.toml");
    let base = std::fs::read_to_string(&release).unwrap();
    let with_base = |mirror: &str| {
        std::fs::write(
            &release,
            format!("{base}\n[image-base]\nname = \"localhost/rocforge-test-base:keys\"\ndebootstrap = \"bookworm\"\n{mirror}"),
        )
        .unwrap()
    };
    with_base("");
    std::fs::create_dir_all(w.path("containers")).unwrap();
    let containerfile = w.path("containers/Containerfile.line-1.0");
    std::fs::write(
        &containerfile,
        "FROM localhost/rocforge-test-base:keys\nRUN apt-get install -y zstd=1.5.4+dfsg2-5\n",
    )
    .unwrap();
    changes("a builder image made from its inputs", &[]);
    let plan: serde_json::Value = serde_json::from_str(
        &w.ok(&[
            "--recipes",
            "recipes",
            "plan",
            "pkg",
            "--arch",
            "gfx90c",
            "--format",
            "json",
        ])
        .stdout,
    )
    .unwrap();
    assert_eq!(plan["image"]["local"], true, "{}", plan["image"]);
    assert!(plan["image"]["digest"].is_null(), "{}", plan["image"]);
    let built_from = plan["image"]["built_from"].as_str().unwrap().to_string();
    assert!(built_from.starts_with("sha256:"), "{built_from}");
    let same = key(&[]);
    with_base("mirror = \"http://mirror.invalid/debian\"\n");
    assert_eq!(key(&[]), same, "mirrors serve the same packages");
    std::fs::write(
        &containerfile,
        "FROM localhost/rocforge-test-base:keys\nRUN apt-get install -y zstd=1.5.4+dfsg2-6\n",
    )
    .unwrap();
    changes("one byte of the Containerfile (a pinned version)", &[]);

    let explain = w
        .ok(&[
            "--recipes",
            "recipes",
            "plan",
            "pkg",
            "--arch",
            "gfx90c",
            "--explain",
            "pkg",
        ])
        .stdout;
    let digest = explain
        .lines()
        .find_map(|l| l.trim().strip_prefix("\"source_tree\": \""))
        .unwrap_or_else(|| panic!("{explain}"));
    let digest = digest.trim_end_matches("\",");
    assert!(
        digest.len() == 64 && digest.bytes().all(|b| b.is_ascii_hexdigit()),
        "{digest}"
    );
}

/// A tarball that carries a live `.git` (an fsmonitor command in its config, a post-commit
/// hook) and a setuid file: `fetch` keeps neither the repository nor the mode, and `dev`, which
/// runs git on the host, runs none of the tarball's commands.
#[test]
fn a_tarball_source_carries_no_repository_state_and_no_setuid_mode() {
    use std::os::unix::fs::PermissionsExt;
    let w = world();
    let srv_dir = w.path("served");
    let pkg = srv_dir.join("pkg-1.0");
    let marker = w.path("ran");
    let script = format!("#!/bin/sh\necho ran >> '{}'\n", marker.display());
    let monitor = w.path("monitor.sh");
    std::fs::write(&monitor, &script).unwrap();
    std::fs::set_permissions(&monitor, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::create_dir_all(pkg.join(".git/hooks")).unwrap();
    std::fs::create_dir_all(pkg.join("sub/.Hg")).unwrap();
    std::fs::write(pkg.join("CMakeLists.txt"), CMAKE).unwrap();
    std::fs::write(
        pkg.join(".git/config"),
        format!(
            "[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tfsmonitor = {}\n",
            monitor.display()
        ),
    )
    .unwrap();
    std::fs::write(pkg.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    std::fs::create_dir_all(pkg.join(".git/objects")).unwrap();
    std::fs::create_dir_all(pkg.join(".git/refs")).unwrap();
    for hook in ["post-commit", "pre-commit", "post-checkout"] {
        std::fs::write(pkg.join(".git/hooks").join(hook), &script).unwrap();
        std::fs::set_permissions(
            pkg.join(".git/hooks").join(hook),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
    }
    std::fs::write(pkg.join("tool.sh"), "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(pkg.join("tool.sh"), std::fs::Permissions::from_mode(0o4755)).unwrap();
    std::fs::write(pkg.join("shared.txt"), "x\n").unwrap();
    std::fs::set_permissions(
        pkg.join("shared.txt"),
        std::fs::Permissions::from_mode(0o666),
    )
    .unwrap();
    tar_gz(&srv_dir, "pkg-1.0", &srv_dir.join("pkg-1.0.tar.gz"));
    let server = HttpServer::start(&srv_dir);
    mirror_downloads(&w, &server);
    write_recipe(
        &w,
        "pkg",
        &format!(
            "name = \"pkg\"\nversion = \"1.0\"\nsummary = \"s\"\nlicense = \"MIT\"\n\n[source]\nurl = \"https://example.invalid/dl/pkg-1.0.tar.gz\"\nsha256 = \"{}\"\n\n[build]\nsystem = \"cmake\"\narch-vars = [\"GPU_TARGETS\"]\n",
            sha256_file(&srv_dir.join("pkg-1.0.tar.gz"))
        ),
    );
    let tree = fetch_tree(&w, "pkg");
    assert!(tree.join("CMakeLists.txt").is_file());
    assert!(
        std::fs::symlink_metadata(tree.join(".git")).is_err(),
        "the fetched tree has no .git"
    );
    assert!(
        !tree.join("sub/.Hg").exists(),
        "nor other VCS dirs, any case"
    );
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode(&tree.join("tool.sh")), 0o755, "setuid dropped");
    assert_eq!(mode(&tree.join("shared.txt")), 0o644, "world-write dropped");

    let out = w
        .ok(&[
            "--recipes",
            "recipes",
            "dev",
            "pkg",
            "--arch",
            "gfx90c",
            "--dir",
            "dev-src",
        ])
        .stdout;
    let checkout = w.root().join(out.trim());
    assert_eq!(
        git(&checkout, &["log", "--format=%s"]),
        "pkg 1.0 pristine source"
    );
    assert!(
        !marker.exists(),
        "a command of the tarball ran: {}",
        std::fs::read_to_string(&marker).unwrap_or_default()
    );
    assert!(
        !checkout.join(".git/hooks/post-commit").exists(),
        "the checkout's hooks are rocforge's own (none)"
    );
}

/// A tarball that plants a link to a directory outside the source tree: a `[[derive]]` that
/// writes or reads through it and an `--overlay` whose destination lies beyond it are refused,
/// naming the path and the link, and nothing outside changes.
#[test]
fn derive_and_overlay_never_follow_a_planted_link_out_of_the_tree() {
    let w = world();
    let outside = w.path("outside");
    std::fs::create_dir_all(outside.join("keep")).unwrap();
    std::fs::write(outside.join("keep/users-file"), "mine\n").unwrap();
    std::fs::write(outside.join("secret.txt"), "host secret\n").unwrap();
    let srv_dir = w.path("served");
    let pkg = srv_dir.join("pkg-1.0");
    std::fs::create_dir_all(pkg.join("data")).unwrap();
    std::fs::write(pkg.join("CMakeLists.txt"), CMAKE).unwrap();
    std::fs::write(pkg.join("data/f.txt"), "vega10\n").unwrap();
    std::os::unix::fs::symlink(&outside, pkg.join("out")).unwrap();
    tar_gz(&srv_dir, "pkg-1.0", &srv_dir.join("pkg-1.0.tar.gz"));
    let server = HttpServer::start(&srv_dir);
    mirror_downloads(&w, &server);
    let sha = sha256_file(&srv_dir.join("pkg-1.0.tar.gz"));
    let recipe = |derive: &str| {
        format!(
            "name = \"pkg\"\nversion = \"1.0\"\nsummary = \"s\"\nlicense = \"MIT\"\n\n[source]\nurl = \"https://example.invalid/dl/pkg-1.0.tar.gz\"\nsha256 = \"{sha}\"\n\n[build]\nsystem = \"cmake\"\narch-vars = [\"GPU_TARGETS\"]\n{derive}"
        )
    };
    let snapshot = || {
        fn walk(dir: &Path, out: &mut Vec<(String, Vec<u8>)>) {
            for e in std::fs::read_dir(dir).unwrap().flatten() {
                let p = e.path();
                if p.is_dir() {
                    out.push((p.display().to_string(), Vec::new()));
                    walk(&p, out);
                } else {
                    out.push((p.display().to_string(), std::fs::read(&p).unwrap()));
                }
            }
        }
        let mut seen = Vec::new();
        walk(&outside, &mut seen);
        seen.sort();
        seen
    };
    let before = snapshot();

    write_recipe(
        &w,
        "pkg",
        &recipe("\n[[derive]]\narches = [\"gfx90c\"]\nfrom = \"data\"\nto = \"out/derived\"\n"),
    );
    let err = fetch_fails(&w, "pkg");
    assert!(
        err.contains(
            "derivation for gfx90c: to: out/derived leaves the source tree: out is a symbolic link"
        ) && err.contains(&outside.display().to_string()),
        "{err}"
    );
    write_recipe(
        &w,
        "pkg",
        &recipe(
            "\n[[derive]]\narches = [\"gfx90c\"]\nfrom = \"out/secret.txt\"\nto = \"data/copied.txt\"\n",
        ),
    );
    let err = fetch_fails(&w, "pkg");
    assert!(
        err.contains("derivation for gfx90c: from: out/secret.txt leaves the source tree: out is a symbolic link"),
        "{err}"
    );

    write_recipe(&w, "pkg", &recipe(""));
    let mine = w.path("mine");
    std::fs::create_dir_all(&mine).unwrap();
    std::fs::write(mine.join("tuned.txt"), "tuned\n").unwrap();
    let o = w.run(&[
        "--recipes",
        "recipes",
        "fetch",
        "pkg",
        "--arch",
        "gfx90c",
        "--overlay",
        &format!("pkg:out/keep={}", mine.display()),
    ]);
    assert_ne!(o.code, 0, "{}", o.stdout);
    assert!(
        o.stderr
            .contains("overlay out/keep: out/keep leaves the source tree: out is a symbolic link"),
        "{}",
        o.stderr
    );
    assert_eq!(snapshot(), before, "nothing outside the tree changed");
    assert_eq!(
        std::fs::read_to_string(outside.join("keep/users-file")).unwrap(),
        "mine\n"
    );
}

/// A Debian binary package (`.deb`) made here with dpkg-deb: `files` (path, text) at their
/// installed paths.
fn deb(out: &Path, name: &str, files: &[(&str, &str)]) {
    let root = out.with_extension("root");
    std::fs::create_dir_all(root.join("DEBIAN")).unwrap();
    std::fs::write(
        root.join("DEBIAN/control"),
        format!("Package: {name}\nVersion: 1.1-1\nArchitecture: amd64\nMaintainer: t <t@example.invalid>\nDescription: test\n"),
    )
    .unwrap();
    for (path, text) in files {
        let p = root.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    let o = std::process::Command::new("dpkg-deb")
        .args(["--root-owner-group", "-Zxz", "--build"])
        .arg(&root)
        .arg(out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// A line takes a component from a distribution's binary packages: the source is one `.deb`
/// (its files at their installed paths, nothing stripped), an input is another, unpacked, and
/// the line's own script replaces the base recipe's commands, with the licence where the
/// package puts it. A script given for a cmake build is refused, naming both files.
#[test]
fn a_derived_line_takes_a_component_from_debian_binary_packages() {
    if !require("dpkg-deb", which("dpkg-deb")) {
        return;
    }
    let w = world();
    let srv_dir = w.path("served");
    std::fs::create_dir_all(&srv_dir).unwrap();
    deb(
        &srv_dir.join("libtool1_1.1-1_amd64.deb"),
        "libtool1",
        &[
            ("usr/lib/x86_64-linux-gnu/libtool.so.1", "ELF-ish\n"),
            (
                "usr/share/doc/libtool1/copyright",
                "MIT, the tool's authors\n",
            ),
        ],
    );
    deb(
        &srv_dir.join("libtool-dev_1.1-1_amd64.deb"),
        "libtool-dev",
        &[("usr/include/tool.h", "int tool(void);\n")],
    );
    let server = HttpServer::start(&srv_dir);
    mirror_downloads(&w, &server);
    write_recipe(
        &w,
        "tool",
        "name = \"tool\"\nversion = \"1.0\"\nsummary = \"s\"\nlicense = \"MIT\"\n\n[source]\npath = \"../../src/tool\"\n\n[build]\nsystem = \"script\"\ndevice-code = false\nscript = \"mkdir -p \\\"$DESTDIR$PREFIX/bin\\\" && cp tool.sh \\\"$DESTDIR$PREFIX/bin/\\\"\"\n",
    );
    std::fs::create_dir_all(w.path("src/tool")).unwrap();
    std::fs::write(w.path("src/tool/tool.sh"), "echo tool\n").unwrap();
    local_pkg(&w, "");
    let line = line_based_on_line_1(&w);
    std::fs::write(line.join("pkg.toml"), "").unwrap();
    let sha = |f: &str| sha256_file(&srv_dir.join(f));
    std::fs::write(
        line.join("tool.toml"),
        format!(
            "version = \"1.1\"\nlicense-files = [\"usr/share/doc/libtool1/copyright\"]\n\n[source]\nurl = \"https://example.invalid/dl/libtool1_1.1-1_amd64.deb\"\nsha256 = \"{}\"\n\n[[inputs]]\nname = \"libtool-dev\"\nurl = \"https://example.invalid/dl/libtool-dev_1.1-1_amd64.deb\"\nsha256 = \"{}\"\nunpack = true\n\n[build]\nscript = '''\nD=\"$DESTDIR$PREFIX\"\nmkdir -p \"$D/lib\" \"$D/include\"\ncp usr/lib/x86_64-linux-gnu/libtool.so.1 \"$D/lib/\"\ncp \"$INPUTS/libtool-dev/usr/include/tool.h\" \"$D/include/\"\n'''\n",
            sha("libtool1_1.1-1_amd64.deb"),
            sha("libtool-dev_1.1-1_amd64.deb"),
        ),
    )
    .unwrap();
    w.ok(&["--recipes", "recipes", "check"]);
    let v = fetch_json(&w, "tool");
    let tree = PathBuf::from(v["tree"].as_str().unwrap());
    assert!(
        tree.join("usr/lib/x86_64-linux-gnu/libtool.so.1").is_file(),
        "the package's files at their installed paths: {:?}",
        listing(&tree)
    );
    let o = w.run(&[
        "--recipes",
        "recipes",
        "--release",
        "line-2.0",
        "--format",
        "json",
        "build",
        "tool",
        "--arch",
        "gfx90c",
        "--runtime",
        "host",
    ]);
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    assert!(!o.stderr.contains("no license file"), "{}", o.stderr);
    let out = w
        .ok(&[
            "--recipes",
            "recipes",
            "--release",
            "line-2.0",
            "store",
            "path",
            "tool",
            "--arch",
            "gfx90c",
            "--runtime",
            "host",
        ])
        .stdout;
    let built = PathBuf::from(out.trim());
    assert_eq!(
        std::fs::read_to_string(built.join("lib/libtool.so.1")).unwrap(),
        "ELF-ish\n"
    );
    assert_eq!(
        std::fs::read_to_string(built.join("include/tool.h")).unwrap(),
        "int tool(void);\n"
    );
    assert!(
        !built.join("bin/tool.sh").exists(),
        "the base's script did not run"
    );

    // A script for a cmake build: refused, pointing at the override and the base recipe.
    std::fs::write(line.join("pkg.toml"), "[build]\nscript = \"true\"\n").unwrap();
    let err = w.fails(&["--recipes", "recipes", "check"]);
    assert!(
        err.contains(
            "[build] script replaces the commands of a script build, and pkg in line-1.0 is not one"
        ),
        "{err}"
    );
    assert!(err.contains("line-2.0/pkg.toml"), "{err}");
}

/// A source whose CMakeLists.txt is a link to /dev/zero: the version check on the host reads
/// only regular files, so the fetch is refused at once, naming the file and what it is, instead
/// of reading until memory runs out.
#[test]
fn a_cmakelists_linked_to_a_device_is_refused_not_read_without_end() {
    let w = world();
    local_pkg(&w, "");
    let cmakelists = w.path("src/pkg/CMakeLists.txt");
    std::fs::remove_file(&cmakelists).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &cmakelists).unwrap();
    let mut child = w
        .command(&["--recipes", "recipes", "fetch", "pkg", "--arch", "gfx90c"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > std::time::Duration::from_secs(60) {
            let _ = child.kill();
            panic!("fetch kept reading /dev/zero");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let o = Out::from(child.wait_with_output().unwrap());
    assert_eq!(o.code, 1, "{}{}", o.stdout, o.stderr);
    assert!(
        o.stderr.contains("CMakeLists.txt")
            && o.stderr
                .contains("not a regular file but a character device"),
        "{}",
        o.stderr
    );
}
