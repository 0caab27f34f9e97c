//! The use cases of `rocforge::app` called as a library, on a [`World`]'s files: what the
//! binary's tests reach only through argument parsing and rendering, asserted on the typed
//! outcomes the binary renders from.

use crate::common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use common::world::KEYS;
use common::*;
use rocforge::app::install::{self, Installed};
use rocforge::app::runtime::RuntimeChoice;
use rocforge::app::{Options, Session, doctor, lock};
use rocforge::catalog::CatalogRoot;
use rocforge::install::RuntimeCheck;
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

/// The test release with `data` (a copied directory), built with the host runtime and packaged
/// into dist/, its index signed with the world's key (keys/); returns the world and dist/.
fn signed_index() -> (World, PathBuf) {
    let w = World::new()
        .release("localhost/rocforge-none:1")
        .with_keys()
        .build();
    w.write("src/data/README", "data\n");
    w.write(
        "recipes/test-1.0/data.toml",
        "name = \"data\"\nversion = \"1.0\"\nsummary = \"data\"\nlicense = \"MIT\"\n\n[source]\npath = \"../../src/data\"\n\n[build]\nsystem = \"copy\"\ndest = \"share/data\"\n",
    );
    w.ok(&["build", "data", "--arch", "gfx90c", "--runtime", "host"]);
    let key = w.secret_key(KEYS);
    w.ok(&[
        "package",
        "data",
        "--arch",
        "gfx90c",
        "--runtime",
        "host",
        "--out",
        "dist",
        "--sign-key",
        &key,
    ]);
    let dist = w.path("dist");
    (w, dist)
}

fn install_options(w: &World) -> Options {
    Options {
        root: CatalogRoot::Dir(w.recipes()),
        release: None,
        store: Some(w.store()),
        arch: Some("gfx90c".into()),
        locked: false,
    }
}

/// `app::install` of `data` from the index in `from` into `prefix`, trusting `keys` (public
/// key files) besides the built-in and configured ones.
fn install_data(
    w: &World,
    from: &Path,
    prefix: &Path,
    keys: &[String],
    stop: bool,
) -> rocforge::app::Result<Installed> {
    let components = ["data".to_string()];
    let from = from.display().to_string();
    let req = install::Request {
        components: &components,
        from: Some(&from),
        prefix: Some(prefix),
        keys,
        runtime: RuntimeCheck::Auto,
        ..Default::default()
    };
    install::install(&install_options(w), &req, &Silent, &AtomicBool::new(stop))
}

/// Every receipt in `prefix`, by file name.
fn receipts(prefix: &Path) -> Vec<String> {
    let Ok(rd) = std::fs::read_dir(prefix.join(".rocforge/receipts")) else {
        return Vec::new();
    };
    let mut names: Vec<String> = rd
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// A signed index installs into a prefix: the typed report names what was installed, its
/// files and receipt are there, what the prefix already held stays, and a second install keeps
/// what is there.
#[test]
fn install_of_a_signed_index_fills_the_prefix() {
    let (w, dist) = signed_index();
    let prefix = w.path("opt/rocm");
    w.write("opt/rocm/lib/existing.so", "keep me");
    let trusted = [w.public_key(KEYS)];
    let Installed::Done(done) = install_data(&w, &dist, &prefix, &trusted, false).unwrap() else {
        panic!("an install nobody stopped was stopped");
    };
    assert_eq!(done.prefix, prefix);
    let names: Vec<String> = done
        .report
        .installed
        .iter()
        .map(|r| r.name.to_string())
        .collect();
    assert_eq!(names, ["data"]);
    assert!(done.not_native.is_empty(), "data has no GPU code");
    assert_eq!(
        std::fs::read_to_string(prefix.join("share/data/README")).unwrap(),
        "data\n"
    );
    assert_eq!(
        std::fs::read_to_string(prefix.join("lib/existing.so")).unwrap(),
        "keep me"
    );
    assert_eq!(receipts(&prefix), ["data.json"]);

    let installed = listing(&prefix);
    let Installed::Done(again) = install_data(&w, &dist, &prefix, &trusted, false).unwrap() else {
        panic!("the second install was stopped");
    };
    assert_eq!(again.prefix, prefix);
    assert_eq!(
        listing(&prefix)
            .into_iter()
            .filter(|l| !l.starts_with(".rocforge"))
            .collect::<Vec<_>>(),
        installed
            .into_iter()
            .filter(|l| !l.starts_with(".rocforge"))
            .collect::<Vec<_>>(),
        "installing what is installed changes no file"
    );
}

/// What the prefix looks like when an install is refused: exactly as before, with no staging
/// beside it and no receipt. Each refusal is checked for its reason, so a refusal for another
/// cause (a broken fixture) fails the test.
fn assert_refused(
    prefix: &Path,
    before: &[String],
    what: &str,
    r: rocforge::app::Result<Installed>,
    reason: &str,
) {
    let e = match r {
        Err(e) => e,
        Ok(_) => panic!("{what}: installed"),
    };
    let text = format!("{e:?}");
    assert!(text.contains(reason), "{what}: {text}");
    assert_eq!(listing(prefix), before, "{what}: the prefix changed");
    assert!(receipts(prefix).is_empty(), "{what}: a receipt was written");
    let beside: Vec<String> = std::fs::read_dir(prefix.parent().unwrap())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n != "rocm")
        .collect();
    assert!(
        beside.is_empty(),
        "{what}: left beside the prefix: {beside:?}"
    );
}

/// An index signed by a key nobody trusts, and one whose artifact was changed (with the index
/// edited to match but not signed again), are refused before anything is downloaded or
/// unpacked: the prefix holds what it held. The same index with its key trusted installs, so
/// the refusals are the signature's doing.
#[test]
fn install_refuses_an_untrusted_or_tampered_index_and_leaves_the_prefix_alone() {
    let (w, dist) = signed_index();
    let prefix = w.path("opt/rocm");
    w.write("opt/rocm/lib/existing.so", "keep me");
    let before = listing(&prefix);
    let trusted = [w.public_key(KEYS)];

    // Untrusted: only the built-in and configured keys, none of which signed it.
    let r = install_data(&w, &dist, &prefix, &[], false);
    assert_refused(
        &prefix,
        &before,
        "untrusted",
        r,
        "signature does not verify",
    );

    // Another key's pair, trusted instead of the signer.
    w.generate_key("other");
    let r = install_data(&w, &dist, &prefix, &[w.public_key("other")], false);
    assert_refused(&prefix, &before, "another key", r, "which is not trusted");

    // Tampered: the tarball changed and the index's sha256 with it, the signature not.
    let tampered = w.path("tampered");
    rocforge::fsutil::copy_tree(&dist, &tampered).unwrap();
    let tarball = std::fs::read_dir(&tampered)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().ends_with(".tar.zst"))
        .expect("a tarball in dist/");
    let mut bytes = std::fs::read(&tarball).unwrap();
    let n = bytes.len() / 2;
    bytes[n] ^= 0xff;
    std::fs::write(&tarball, &bytes).unwrap();
    let index = tampered.join("index.json");
    let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&index).unwrap()).unwrap();
    v["artifacts"][0]["sha256"] = sha256_file(&tarball).into();
    std::fs::write(&index, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
    let r = install_data(&w, &tampered, &prefix, &trusted, false);
    assert_refused(&prefix, &before, "tampered", r, "changed after signing");

    // Stopped before it began: nothing changed, and it says so.
    match install_data(&w, &dist, &prefix, &trusted, true).unwrap() {
        Installed::Stopped { prefix: p } => assert_eq!(p, prefix),
        Installed::Done(_) => panic!("a stopped install went on"),
    }
    assert_eq!(listing(&prefix), before, "stopped: the prefix changed");

    // The untampered index, trusted: installed.
    assert!(matches!(
        install_data(&w, &dist, &prefix, &trusted, false).unwrap(),
        Installed::Done(_)
    ));
    assert_eq!(receipts(&prefix), ["data.json"]);
}

/// `app::ci`: the generated workflow files are written once, then found unchanged with no
/// drift; a hand edit is named by a diff of that file alone, and writing again restores it.
#[test]
fn ci_github_files_are_written_then_kept_and_a_hand_edit_is_drift() {
    use rocforge::app::ci::{self, Written};
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(repo.join("runners.toml"), dir.path().join("runners.toml")).unwrap();
    let root = CatalogRoot::Dir(repo.join("recipes"));
    let files = ci::github_files(&root, dir.path()).unwrap();
    assert_eq!(files.len(), 2);
    assert_eq!(ci::drift(&files).len(), 2, "nothing is written yet");
    assert_eq!(ci::write(&files).unwrap(), [Written::Wrote, Written::Wrote]);
    assert!(ci::drift(&files).is_empty());
    assert_eq!(
        ci::write(&files).unwrap(),
        [Written::Unchanged, Written::Unchanged]
    );
    // The committed files are the generated ones, as `ci github --check` says.
    for f in &files {
        let committed = repo.join(f.path.strip_prefix(dir.path()).unwrap());
        assert_eq!(std::fs::read_to_string(committed).unwrap(), f.text);
    }
    let workflow = &files[0].path;
    let edited =
        std::fs::read_to_string(workflow)
            .unwrap()
            .replacen("jobs:", "# edited by hand\njobs:", 1);
    std::fs::write(workflow, edited).unwrap();
    let diffs = ci::drift(&files);
    assert_eq!(diffs.len(), 1, "{diffs:?}");
    assert!(diffs[0].contains("-# edited by hand"), "{}", diffs[0]);
    assert!(diffs[0].contains(&workflow.display().to_string()));
    assert_eq!(
        ci::write(&files).unwrap(),
        [Written::Wrote, Written::Unchanged]
    );
    assert!(ci::drift(&files).is_empty());
}

/// `app::key::rotate` and `app::signature`: a list signed by the trusted key moves trust to a
/// new key; a file that key signs verifies through the list, with the chain named, and the
/// retired key's signature is refused once the list revokes it.
#[test]
fn a_rotated_key_verifies_through_the_key_list_and_the_retired_one_is_refused() {
    use rocforge::app::{key, signature};
    let w = World::new().with_keys().build();
    w.generate_key("keys-new");
    let state = w.path("state");
    let dist = w.path("dist");
    std::fs::create_dir_all(&dist).unwrap();
    let new = [w.public_key("keys-new")];
    let r = key::rotate(&key::RotateRequest {
        old: Path::new(&w.secret_key(KEYS)),
        new: &new,
        revoke: &[],
        revoke_old: true,
        out: &dist.join("keys.json"),
        password: None,
    })
    .unwrap();
    assert_eq!(r.sequence, 1);
    assert_eq!(r.trusts.len(), 1);
    assert_eq!(
        r.revokes,
        std::slice::from_ref(&r.signer),
        "the old key revokes itself"
    );
    assert!(r.files.iter().any(|f| f.ends_with("keys-1.json")));
    let old_pub =
        rocforge::sign::public_from_arg(&w.public_key(KEYS)).expect("the world's public key");
    let file = w.write("dist/data.txt", "data\n");
    let verify = |signer: &str| {
        w.ok(&["sign", &file.display().to_string(), "--sign-key", signer]);
        let req = signature::FileRequest {
            file: &file,
            keys: std::slice::from_ref(&old_pub),
            sig: None,
            key_list: None,
            state_dir: Some(&state),
        };
        let trust = signature::trust(&req)?;
        let v = signature::verify_file(&req, &trust)?;
        Ok::<_, rocforge::app::Error>((trust, v))
    };
    let (trust, v) = verify(&w.secret_key("keys-new")).unwrap();
    assert_eq!(v.key_id, r.trusts[0]);
    let chain = trust
        .chain
        .clone()
        .expect("keys.json beside the file is applied");
    assert_eq!((chain.sequence, chain.lists), (1, 1));
    assert!(state.join("trust.json").is_file(), "the list seen is kept");
    let docs = signature::documents(&file, &trust).unwrap();
    assert!(
        docs.checked.is_empty() && !docs.undocumented,
        "not a tarball"
    );
    let Err(refused) = verify(&w.secret_key(KEYS)) else {
        panic!("the old key is revoked, and its signature verified");
    };
    let text = format!("{refused:?}");
    assert!(text.contains("revoked"), "{text}");
}
