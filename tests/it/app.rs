//! The use cases of `rocforge::app` called as a library, on a [`World`]'s files: what the
//! binary's tests reach only through argument parsing and rendering, asserted on the typed
//! outcomes the binary renders from.

use crate::common;

use std::sync::Arc;

use common::*;
use rocforge::app::runtime::RuntimeChoice;
use rocforge::app::{Options, Session, doctor, lock};
use rocforge::catalog::CatalogRoot;
use rocforge::progress::Silent;

/// The test release with `lib`, a git source (a repository on disk tagged v1) copied as data;
/// returns the world and v1's commit.
fn git_world() -> (World, String) {
    let w = World::new().release("localhost/rocforge-none:1").build();
    let repo = w.path("origin/lib.git");
    let commit = make_repo(&repo, &[("README", "v1\n")], "v1");
    w.write(
        "recipes/test-1.0/lib.toml",
        &format!(
            "name = \"lib\"\nversion = \"1.0\"\nsummary = \"data\"\nlicense = \"MIT\"\n\n[source]\ngit = \"file://{}\"\ntag = \"v1\"\n\n[build]\nsystem = \"copy\"\ndest = \"share/lib\"\n",
            repo.display()
        ),
    );
    (w, commit)
}

/// `lock` resolves the tag to its commit and writes rocforge.lock beside recipes/; `lock
/// --check` then finds nothing, a second `lock` changes nothing, and a recipe moved to another
/// tag is named as not locked until `lock` runs again.
#[test]
fn lock_pins_a_tag_to_its_commit_and_check_follows_the_recipe() {
    let (w, v1) = git_world();
    let root = CatalogRoot::Dir(w.recipes());

    let before = lock::check(&root, false).unwrap();
    assert_eq!(
        before.problems.len(),
        1,
        "an unlocked tag is a problem: {:?}",
        before.problems
    );
    assert!(
        before.problems[0].starts_with("test-1.0/lib: ") && before.problems[0].contains("v1"),
        "{:?}",
        before.problems
    );

    let written = lock::update(&root, true, &Silent).unwrap();
    assert_eq!(written.path, w.path("rocforge.lock"));
    assert!(written.changed, "a new lock is a change");
    assert!(written.path.is_file());
    let pinned: Vec<_> = written
        .lock
        .sources
        .iter()
        .map(|s| (s.component.as_str(), s.commit.as_str()))
        .collect();
    assert_eq!(pinned, [("lib", v1.as_str())]);
    let report = written.report();
    assert_eq!((report.sources, report.images), (1, 0));

    let after = lock::check(&root, false).unwrap();
    assert!(after.problems.is_empty(), "{:?}", after.problems);
    assert!(after.report().ok);
    let again = lock::update(&root, true, &Silent).unwrap();
    assert!(!again.changed, "the same pins are no change");

    // A new tag in the recipe: the lock no longer pins what the recipe asks for.
    let repo = w.path("origin/lib.git");
    let v2 = commit_files(&repo, &[("README", "v2\n")], "two");
    git(&repo, &["tag", "-a", "v2", "-m", "v2"]);
    let recipe = std::fs::read_to_string(w.path("recipes/test-1.0/lib.toml")).unwrap();
    w.write(
        "recipes/test-1.0/lib.toml",
        &recipe.replace("tag = \"v1\"", "tag = \"v2\""),
    );
    let stale = lock::check(&root, false).unwrap();
    assert_eq!(stale.problems.len(), 1, "{:?}", stale.problems);
    assert!(stale.problems[0].starts_with("test-1.0/lib: "));
    assert!(!stale.report().ok);
    let relocked = lock::update(&root, true, &Silent).unwrap();
    assert!(relocked.changed);
    assert_eq!(relocked.lock.sources[0].commit, v2);
    assert!(lock::check(&root, false).unwrap().problems.is_empty());
}

/// A tag the repository lacks: `lock` fails naming the component and writes no lock, since a
/// half-written lock would hide what it failed to pin.
#[test]
fn lock_of_a_missing_tag_fails_and_writes_nothing() {
    let (w, _) = git_world();
    let recipe = std::fs::read_to_string(w.path("recipes/test-1.0/lib.toml")).unwrap();
    w.write(
        "recipes/test-1.0/lib.toml",
        &recipe.replace("tag = \"v1\"", "tag = \"v9\""),
    );
    let root = CatalogRoot::Dir(w.recipes());
    let Err(e) = lock::update(&root, true, &Silent) else {
        panic!("a missing tag was locked");
    };
    let text = format!("{e:?}");
    assert!(text.contains("test-1.0/lib"), "{text}");
    assert!(!w.path("rocforge.lock").exists());
}

/// The built-in catalog's lock is part of the binary: `lock` refuses it with the way out.
#[test]
fn lock_refuses_the_built_in_catalog() {
    let Err(e) = lock::update(&CatalogRoot::Embedded, true, &Silent) else {
        panic!("the built-in catalog was locked");
    };
    let text = format!("{e:?}");
    assert!(text.contains("catalog export"), "{text}");
}

/// `doctor` with the host runtime: the runtime check passes without asking any container
/// engine, and the disk check measures the session's store.
#[test]
fn doctor_on_the_host_runtime_checks_the_store_and_no_container_engine() {
    let (w, _) = git_world();
    let session = Session::open(
        Options {
            root: CatalogRoot::Dir(w.recipes()),
            release: None,
            store: Some(w.store()),
            arch: Some("gfx90c".into()),
            locked: false,
        },
        Arc::new(Silent),
    )
    .unwrap();
    let report = doctor::doctor(&session, &["lib".into()], Some(RuntimeChoice::Host)).unwrap();
    assert_eq!(report.schema, doctor::DOCTOR_SCHEMA);
    let check = |name: &str| {
        report
            .checks
            .iter()
            .find(|c| c.check == name)
            .unwrap_or_else(|| panic!("no {name} check in {:?}", report.checks))
    };
    let rt = check("container runtime");
    assert!(rt.ok, "{rt:?}");
    assert!(rt.detail.starts_with("none: --runtime host"), "{rt:?}");
    let disk = check("disk");
    assert!(
        disk.detail.contains(&format!("at {}", w.store().display())),
        "{disk:?}"
    );
    assert!(check("memory").detail.contains("compile job"));
    assert_eq!(report.ok, report.checks.iter().all(|c| c.ok));
}
