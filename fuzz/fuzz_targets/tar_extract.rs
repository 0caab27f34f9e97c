//! Any bytes as a tarball for `rocforge install`'s safe extraction (crates/deliver/src/package/extract/),
//! uncompressed, into a staging directory two levels below a scratch root. It must never panic,
//! and nothing may land outside the staging directory: after every input the scratch root holds
//! the staging directory and nothing else, every symlink in it is relative and stays inside it,
//! and every directory in it is a real directory below it.
//!
//! Then the same bytes are installed, twice, into a real prefix (`install::unpack_into`: staging,
//! extraction, the merge with its conflict checks and journal), a prefix that holds a symlink
//! to a directory outside it, where a victim file lives. The second install replaces the first
//! (same component), so the merge's replace and remove paths run too. After both, nothing but
//! the prefix, the victim's directory and the install lock may exist beside it, the victim is
//! untouched and alone, and every symlink rocforge wrote stays inside the prefix.
#![no_main]

use std::path::{Component, Path, PathBuf};
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;

#[global_allocator]
static ALLOC: rocforge_fuzz::Guard = rocforge_fuzz::Guard;

/// The most the target lets one input unpack (the caller's cap in install).
const LIMIT: u64 = 1 << 20;

/// The scratch root, in memory when the machine has /dev/shm: each input costs file system calls.
fn root() -> &'static Path {
    static ROOT: OnceLock<PathBuf> = OnceLock::new();
    ROOT.get_or_init(|| {
        let shm = Path::new("/dev/shm");
        let base = if shm.is_dir() {
            shm.to_path_buf()
        } else {
            std::env::temp_dir()
        };
        base.join(format!("rocforge-fuzz-tar-{}", std::process::id()))
    })
}

fn only_child(dir: &Path, name: &str) {
    let names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        [name],
        "something was written beside {}",
        dir.display()
    );
}

/// Checks every entry under `dir` (`rel` is its path below the staging directory).
fn check(stage: &Path, dir: &Path, rel: &Path) {
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let path = e.path();
        let rel = rel.join(e.file_name());
        let m = std::fs::symlink_metadata(&path).unwrap();
        if m.file_type().is_symlink() {
            let target = std::fs::read_link(&path).unwrap();
            // Lexically: from the link's directory, the target never climbs above the stage.
            let mut depth = rel.components().count() as i64 - 1;
            for c in target.components() {
                match c {
                    Component::Normal(_) => depth += 1,
                    Component::ParentDir => depth -= 1,
                    Component::CurDir => {}
                    Component::RootDir | Component::Prefix(_) => {
                        panic!("absolute symlink {} -> {}", rel.display(), target.display())
                    }
                }
                assert!(
                    depth >= 0,
                    "symlink {} -> {} leaves the staging directory",
                    rel.display(),
                    target.display()
                );
            }
        } else if m.is_dir() {
            check(stage, &path, &rel);
        } else {
            assert!(
                m.is_file(),
                "{} is neither file, directory nor symlink",
                rel.display()
            );
            use std::os::unix::fs::PermissionsExt;
            let mode = m.permissions().mode() & 0o7777;
            assert!(
                mode == 0o644 || mode == 0o755,
                "{} has mode {mode:o}",
                rel.display()
            );
        }
    }
    let _ = stage;
}

/// The prefix's scratch root, beside the staging one.
fn prefix_root() -> PathBuf {
    root().with_extension("prefix")
}

/// A prefix holding only `escape -> ../outside`, and `outside/victim` beside it.
fn fresh_prefix(base: &Path) {
    let _ = std::fs::remove_dir_all(base);
    std::fs::create_dir_all(base.join("prefix")).unwrap();
    std::fs::create_dir_all(base.join("outside")).unwrap();
    std::fs::write(base.join("outside/victim"), "victim").unwrap();
    std::os::unix::fs::symlink("../outside", base.join("prefix/escape")).unwrap();
}

fn check_prefix(base: &Path) {
    let mut names: Vec<String> = std::fs::read_dir(base)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names.retain(|n| n != ".rocforge-install-prefix.lock");
    assert_eq!(
        names,
        ["outside", "prefix"],
        "something was written beside the prefix"
    );
    let outside: Vec<_> = std::fs::read_dir(base.join("outside"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        outside.len(),
        1,
        "something was written outside: {outside:?}"
    );
    assert_eq!(
        std::fs::read(base.join("outside/victim")).unwrap(),
        b"victim",
        "the file outside changed"
    );
    let prefix = base.join("prefix");
    assert_eq!(
        std::fs::read_link(prefix.join("escape")).unwrap(),
        Path::new("../outside")
    );
    // Every other entry, as in the staging directory (receipts are plain files).
    for e in std::fs::read_dir(&prefix).unwrap() {
        let e = e.unwrap();
        // The planted link; and the receipts, rocforge's own files (written 0600 atomically).
        if e.file_name() == "escape" || e.file_name() == ".rocforge" {
            continue;
        }
        let m = std::fs::symlink_metadata(e.path()).unwrap();
        if m.is_dir() {
            check(&prefix, &e.path(), Path::new(&e.file_name()));
        } else if m.file_type().is_symlink() {
            let t = std::fs::read_link(e.path()).unwrap();
            assert!(
                !t.is_absolute() && !t.starts_with(".."),
                "top-level symlink {:?} -> {} leaves the prefix",
                e.file_name(),
                t.display()
            );
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let base = prefix_root();
    let prefix = base.join("prefix");
    // Fresh unless the last input left the prefix as it was made (most inputs are refused).
    let pristine = std::fs::read_dir(&prefix)
        .map(|d| d.count() == 1)
        .unwrap_or(false)
        && std::fs::read_dir(&base)
            .map(|d| d.count() <= 3)
            .unwrap_or(false);
    if !pristine {
        fresh_prefix(&base);
    }
    for _ in 0..2 {
        if let Err(e) = rocforge::install::unpack_into(&prefix, data, "fuzz.tar", LIMIT) {
            let _ = e.to_string();
        }
        check_prefix(&base);
    }

    let root = root();
    let stage = root.join("a/stage");
    // A fresh, empty staging directory; most inputs write nothing, so most runs skip the removal.
    if std::fs::read_dir(&stage).map_or(true, |mut d| d.next().is_some()) {
        let _ = std::fs::remove_dir_all(root);
        std::fs::create_dir_all(&stage).unwrap();
    }
    let result = rocforge::package::extract::extract(data, &stage, "fuzz.tar", LIMIT);
    if let Err(e) = &result {
        let _ = e.to_string();
    }
    only_child(root, "a");
    only_child(&root.join("a"), "stage");
    check(&stage, &stage, Path::new(""));
    if let Ok(x) = result {
        // What it reports having written is there.
        for f in &x.entries {
            assert!(
                std::fs::symlink_metadata(stage.join(&f.path)).is_ok(),
                "{} reported but absent",
                f.path
            );
        }
    }
});
