//! Patch series: applying to plain directories (byte-exact, all or nothing), the errors a patch
//! author reads, and the commit/export round trip in real git repositories.

use rocforge::diag::Hint;
use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;

use git2::{IndexAddOption, Repository, Signature, Time};
use rocforge::source::patch::{
    ChangeKind, PatchError, PatchFile, apply_series, commit_series, export_series, validate,
};

const P1: &str = "patches/rocm-6.4.4/rocblas/0001-change-line-3.patch";
const P2: &str = "patches/rocm-6.4.4/rocblas/0002-change-line-8.patch";

/// `line 1\n` … `line n\n`.
fn numbered(n: usize) -> String {
    (1..=n).map(|i| format!("line {i}\n")).collect()
}

fn write(dir: &Path, rel: &str, content: impl AsRef<[u8]>) {
    let path = dir.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, content).unwrap();
}

fn chmod(dir: &Path, rel: &str, mode: u32) {
    fs::set_permissions(dir.join(rel), fs::Permissions::from_mode(mode)).unwrap();
}

fn mode(dir: &Path, rel: &str) -> u32 {
    fs::metadata(dir.join(rel)).unwrap().permissions().mode() & 0o777
}

/// Every file, link and directory under `dir` (but `.git`): content and permission bits.
#[derive(Debug, PartialEq, Eq)]
enum Node {
    Dir,
    File(Vec<u8>, u32),
    Link(String),
}

fn snapshot(dir: &Path) -> BTreeMap<String, Node> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Node>) {
        for entry in fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            let path = entry.path();
            let rel = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            if rel == ".git" {
                continue;
            }
            let meta = fs::symlink_metadata(&path).unwrap();
            if meta.file_type().is_symlink() {
                out.insert(
                    rel,
                    Node::Link(fs::read_link(&path).unwrap().to_string_lossy().into_owned()),
                );
            } else if meta.is_dir() {
                out.insert(rel, Node::Dir);
                walk(root, &path, out);
            } else {
                out.insert(
                    rel,
                    Node::File(fs::read(&path).unwrap(), meta.permissions().mode() & 0o777),
                );
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

fn pf(name: &str, text: &str) -> PatchFile {
    PatchFile::new(name, text.as_bytes())
}

/// A source tree: src/a.c (12 numbered lines), README, and an executable script.
fn source_tree(dir: &Path) {
    write(dir, "src/a.c", numbered(12));
    write(dir, "README", "hello\n");
    write(dir, "build.sh", "#!/bin/sh\nmake\n");
    chmod(dir, "build.sh", 0o755);
}

/// `git format-patch` output, with mail header, diffstat and signature.
const PATCH1: &str = "From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001
From: Dev <dev@example.com>
Date: Mon, 1 Jan 2024 00:00:00 +0000
Subject: [PATCH 1/2] Change line 3 of a.c for
 gfx1010

The upstream value breaks on RDNA1.
---
 src/a.c | 2 +-
 1 file changed, 1 insertion(+), 1 deletion(-)

diff --git a/src/a.c b/src/a.c
index 1d3e5a4..8c2a1f0 100644
--- a/src/a.c
+++ b/src/a.c
@@ -1,6 +1,6 @@
 line 1
 line 2
-line 3
+line three
 line 4
 line 5
 line 6
-- 
2.43.0
";

/// `git diff` output with a free-text header, two files.
const PATCH2: &str = "Change line 8 and greet the world.

diff --git a/src/a.c b/src/a.c
--- a/src/a.c
+++ b/src/a.c
@@ -5,7 +5,8 @@ line 4
 line 5
 line 6
 line 7
-line 8
+line eight
+line 8.5
 line 9
 line 10
 line 11
diff --git a/README b/README
--- a/README
+++ b/README
@@ -1 +1,2 @@
 hello
+world
";

#[test]
fn a_two_patch_series_patches_a_plain_directory_exactly() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    source_tree(dir);
    apply_series(dir, &[pf(P1, PATCH1), pf(P2, PATCH2)]).unwrap();

    let expected_a = numbered(12)
        .replace("line 3\n", "line three\n")
        .replace("line 8\n", "line eight\nline 8.5\n");
    assert_eq!(fs::read_to_string(dir.join("src/a.c")).unwrap(), expected_a);
    assert_eq!(
        fs::read_to_string(dir.join("README")).unwrap(),
        "hello\nworld\n"
    );
    assert_eq!(
        fs::read_to_string(dir.join("build.sh")).unwrap(),
        "#!/bin/sh\nmake\n"
    );
    assert_eq!(mode(dir, "build.sh"), 0o755);
    assert!(!dir.join(".git").exists(), "no repository is left behind");
    let names: Vec<String> = snapshot(dir).into_keys().collect();
    assert_eq!(
        names,
        ["README", "build.sh", "src", "src/a.c"],
        "no temporary files are left behind"
    );
}

#[test]
fn new_deleted_renamed_and_mode_changed_files() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    source_tree(dir);
    write(dir, "old/gone.txt", "a\nb\n");
    write(dir, "run.sh", "#!/bin/sh\n");
    chmod(dir, "run.sh", 0o755);

    let new_file = "diff --git a/src/new.c b/src/new.c
new file mode 100644
index 0000000..1234567
--- /dev/null
+++ b/src/new.c
@@ -0,0 +1,2 @@
+int x;
+int y;
";
    let deleted = "diff --git a/old/gone.txt b/old/gone.txt
deleted file mode 100644
index 1234567..0000000
--- a/old/gone.txt
+++ /dev/null
@@ -1,2 +0,0 @@
-a
-b
";
    let renamed = "diff --git a/src/a.c b/src/b.c
similarity index 90%
rename from src/a.c
rename to src/b.c
index 1111111..2222222 100644
--- a/src/a.c
+++ b/src/b.c
@@ -1,4 +1,4 @@
 line 1
-line 2
+line two
 line 3
 line 4
";
    let chmod_x = "Make the build script executable... it already is; make README executable.

diff --git a/README b/README
old mode 100644
new mode 100755
";
    // A pure rename states no mode: the executable bit stays.
    let moved = "diff --git a/run.sh b/tools/run.sh
similarity index 100%
rename from run.sh
rename to tools/run.sh
";
    let series = [
        pf("0001-new.patch", new_file),
        pf("0002-delete.patch", deleted),
        pf("0003-rename.patch", renamed),
        pf("0004-chmod.patch", chmod_x),
        pf("0005-move.patch", moved),
    ];
    for p in &series {
        validate(p).unwrap();
    }
    apply_series(dir, &series).unwrap();

    assert_eq!(
        fs::read_to_string(dir.join("src/new.c")).unwrap(),
        "int x;\nint y;\n"
    );
    assert_eq!(mode(dir, "src/new.c") & 0o111, 0);
    assert!(
        !dir.join("old").exists(),
        "deleting the last file removes its directory"
    );
    assert!(!dir.join("src/a.c").exists());
    assert_eq!(
        fs::read_to_string(dir.join("src/b.c")).unwrap(),
        numbered(12).replace("line 2\n", "line two\n")
    );
    assert_eq!(fs::read_to_string(dir.join("README")).unwrap(), "hello\n");
    assert_eq!(mode(dir, "README") & 0o111, 0o111);
    assert!(!dir.join("run.sh").exists());
    assert_eq!(
        fs::read_to_string(dir.join("tools/run.sh")).unwrap(),
        "#!/bin/sh\n"
    );
    assert_eq!(mode(dir, "tools/run.sh"), 0o755);

    // And back: removing the exec bit.
    let chmod_back = "diff --git a/README b/README\nold mode 100755\nnew mode 100644\n";
    apply_series(dir, &[pf("0006-chmod-back.patch", chmod_back)]).unwrap();
    assert_eq!(mode(dir, "README") & 0o111, 0);

    let summary = validate(&series[2]).unwrap();
    assert_eq!(summary.hunks, 1);
    assert_eq!(summary.files.len(), 1);
    assert_eq!(summary.files[0].kind, ChangeKind::Renamed);
    assert_eq!(summary.files[0].path, "src/b.c");
    assert_eq!(summary.files[0].old_path.as_deref(), Some("src/a.c"));
}

#[test]
fn plain_diff_u_output_applies_with_strip_level_one() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    source_tree(dir);
    write(dir, "my file.txt", "one\n");
    let patch = "Only in b: docs
diff -ruN a/src/a.c b/src/a.c
--- a/src/a.c\t2024-01-01 00:00:00.000000000 +0000
+++ b/src/a.c\t2024-01-02 00:00:00.000000000 +0000
@@ -2,3 +2,3 @@
 line 2
-line 3
+line three
 line 4
diff -ruN a/build.sh b/build.sh
--- a/build.sh\t2024-01-01 00:00:00.000000000 +0000
+++ b/build.sh\t2024-01-02 00:00:00.000000000 +0000
@@ -1,2 +1,2 @@
 #!/bin/sh
-make
+make -j8
--- orig/my file.txt\t2024-01-01 00:00:00.000000000 +0000
+++ new/my file.txt\t2024-01-02 00:00:00.000000000 +0000
@@ -1 +1 @@
-one
+two
diff -ruN a/docs/new.md b/docs/new.md
--- /dev/null\t1970-01-01 00:00:00.000000000 +0000
+++ b/docs/new.md\t2024-01-02 00:00:00.000000000 +0000
@@ -0,0 +1 @@
+new
";
    let summary = validate(&pf("plain.patch", patch)).unwrap();
    assert_eq!(summary.files.len(), 4);
    assert_eq!(summary.hunks, 4);
    apply_series(dir, &[pf("plain.patch", patch)]).unwrap();
    assert_eq!(
        fs::read_to_string(dir.join("src/a.c")).unwrap(),
        numbered(12).replace("line 3\n", "line three\n")
    );
    assert_eq!(
        fs::read_to_string(dir.join("build.sh")).unwrap(),
        "#!/bin/sh\nmake -j8\n"
    );
    assert_eq!(
        mode(dir, "build.sh"),
        0o755,
        "a plain diff keeps the file's mode"
    );
    assert_eq!(
        fs::read_to_string(dir.join("my file.txt")).unwrap(),
        "two\n"
    );
    assert_eq!(
        fs::read_to_string(dir.join("docs/new.md")).unwrap(),
        "new\n"
    );
}

/// Patch 2 of the series does not match: its second file's hunk expects `line seven`.
const PATCH2_CONFLICTING: &str = "Greet the world, then change line 8.

diff --git a/README b/README
--- a/README
+++ b/README
@@ -1 +1,2 @@
 hello
+world
diff --git a/src/a.c b/src/a.c
--- a/src/a.c
+++ b/src/a.c
@@ -5,7 +5,8 @@ line 4
 line 5
 line 6
 line seven
-line 8
+line eight
+line 8.5
 line 9
 line 10
 line 11
";

#[test]
fn a_conflict_names_the_patch_file_hunk_and_line_and_changes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    source_tree(dir);
    let before = snapshot(dir);

    let err = apply_series(dir, &[pf(P1, PATCH1), pf(P2, PATCH2_CONFLICTING)]).unwrap_err();
    match &err {
        PatchError::Conflict {
            patch,
            file,
            hunk,
            line,
            expected,
            found,
        } => {
            assert_eq!(patch, P2);
            assert_eq!(file, "src/a.c");
            assert_eq!(hunk, "@@ -5,7 +5,8 @@");
            assert_eq!(*line, 7);
            assert_eq!(expected, "line seven");
            assert_eq!(found.as_deref(), Some("line 7"));
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
    assert_eq!(snapshot(dir), before, "patch 1's change is not left behind");
    insta::assert_snapshot!("conflict_error", format!("{err}\nhint: {}", err.hint()));
}

#[test]
fn a_conflict_past_the_end_of_the_file_and_in_a_later_hunk() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    source_tree(dir);
    let before = snapshot(dir);
    // The first hunk adds two lines, so the second one's line is reported in the file's own
    // numbering (line 12), not the patched file's.
    let patch = "diff --git a/src/a.c b/src/a.c
--- a/src/a.c
+++ b/src/a.c
@@ -1,2 +1,4 @@
 line 1
+line 1.1
+line 1.2
 line 2
@@ -11,3 +13,3 @@
 line 11
-line twelve
+line 12!
 line 13
";
    let err = apply_series(dir, &[pf("x.patch", patch)]).unwrap_err();
    match &err {
        PatchError::Conflict {
            hunk,
            line,
            expected,
            found,
            ..
        } => {
            assert_eq!(hunk, "@@ -11,3 +13,3 @@");
            assert_eq!(*line, 12);
            assert_eq!(expected, "line twelve");
            assert_eq!(found.as_deref(), Some("line 12"));
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
    let patch = patch.replace("-line twelve", "-line 12");
    let err = apply_series(dir, &[pf("x.patch", &patch)]).unwrap_err();
    match &err {
        PatchError::Conflict {
            line,
            expected,
            found,
            ..
        } => {
            assert_eq!(
                (*line, expected.as_str(), found.as_deref()),
                (13, "line 13", None)
            );
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
    assert!(
        err.to_string().contains("the file ends after line 12"),
        "{err}"
    );
    assert_eq!(snapshot(dir), before);
}

#[test]
fn context_that_needs_fuzz_or_an_offset_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    // Line 6, the last context line of patch 1's hunk, differs: `patch --fuzz=2` would apply.
    write(
        dir,
        "src/a.c",
        numbered(12).replace("line 6\n", "line six\n"),
    );
    let before = snapshot(dir);
    let err = apply_series(dir, &[pf(P1, PATCH1)]).unwrap_err();
    assert!(
        matches!(&err, PatchError::Conflict { line: 6, expected, found: Some(found), .. } if expected == "line 6" && found == "line six"),
        "{err:?}"
    );
    assert_eq!(snapshot(dir), before);

    // The same lines one further down: libgit2 applies a hunk only where its header says.
    write(dir, "src/a.c", format!("line 0\n{}", numbered(12)));
    let before = snapshot(dir);
    let err = apply_series(dir, &[pf(P1, PATCH1)]).unwrap_err();
    assert!(
        matches!(&err, PatchError::Conflict { line: 1, .. }),
        "{err:?}"
    );
    assert_eq!(snapshot(dir), before);
}

#[test]
fn crlf_files_and_missing_final_newlines() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    write(dir, "w.txt", "a\r\nb\r\nc\r\n");
    write(dir, "n.txt", "x\ny");
    write(dir, "m.txt", "x\ny");
    let crlf = "diff --git a/w.txt b/w.txt\n--- a/w.txt\n+++ b/w.txt\n@@ -1,3 +1,3 @@\n a\r\n-b\r\n+B\r\n c\r\n";
    let no_newline = "diff --git a/n.txt b/n.txt
--- a/n.txt
+++ b/n.txt
@@ -1,2 +1,2 @@
 x
-y
\\ No newline at end of file
+z
\\ No newline at end of file
";
    let add_newline = "diff --git a/m.txt b/m.txt
--- a/m.txt
+++ b/m.txt
@@ -1,2 +1,2 @@
 x
-y
\\ No newline at end of file
+y
";
    apply_series(
        dir,
        &[
            pf("crlf.patch", crlf),
            pf("nl.patch", no_newline),
            pf("add-nl.patch", add_newline),
        ],
    )
    .unwrap();
    assert_eq!(fs::read(dir.join("w.txt")).unwrap(), b"a\r\nB\r\nc\r\n");
    assert_eq!(fs::read(dir.join("n.txt")).unwrap(), b"x\nz");
    assert_eq!(fs::read(dir.join("m.txt")).unwrap(), b"x\ny\n");

    // An LF patch does not match a CRLF file; the message shows the difference.
    let lf = crlf.replace('\r', "");
    let err = apply_series(dir, &[pf("lf.patch", &lf)]).unwrap_err();
    match &err {
        PatchError::Conflict {
            line,
            expected,
            found,
            ..
        } => {
            assert_eq!(
                (*line, expected.as_str(), found.as_deref()),
                (1, "a", Some("a\r"))
            );
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
    assert!(
        err.to_string()
            .contains(r#"line 1 is "a\r", but the patch expects "a""#),
        "{err}"
    );

    // A patch expecting a final newline the file does not have.
    let err = apply_series(
        dir,
        &[pf(
            "nl2.patch",
            "diff --git a/n.txt b/n.txt\n--- a/n.txt\n+++ b/n.txt\n@@ -1,2 +1,2 @@\n x\n-z\n+q\n",
        )],
    )
    .unwrap_err();
    assert!(
        matches!(&err, PatchError::Conflict { line: 2, .. }),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("newline at the end of the file"),
        "{err}"
    );

    // A patch file whose every line was converted to CRLF (e.g. by a Windows checkout).
    write(dir, "u.txt", "1\n2\n");
    let converted = "Fix u.\r\n\r\ndiff --git a/u.txt b/u.txt\r\n--- a/u.txt\r\n+++ b/u.txt\r\n@@ -1,2 +1,2 @@\r\n 1\r\n-2\r\n+two\r\n";
    apply_series(dir, &[pf("converted.patch", converted)]).unwrap();
    assert_eq!(fs::read(dir.join("u.txt")).unwrap(), b"1\ntwo\n");
}

#[test]
fn missing_and_existing_files_are_named() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    source_tree(dir);
    let before = snapshot(dir);
    let creates_readme = "diff --git a/README b/README\nnew file mode 100644\n--- /dev/null\n+++ b/README\n@@ -0,0 +1 @@\n+x\n";
    let err = apply_series(dir, &[pf("c.patch", creates_readme)]).unwrap_err();
    assert!(
        matches!(&err, PatchError::AlreadyExists { patch, file } if patch == "c.patch" && file == "README"),
        "{err:?}"
    );
    let edits_missing =
        "diff --git a/src/z.c b/src/z.c\n--- a/src/z.c\n+++ b/src/z.c\n@@ -1 +1 @@\n-a\n+b\n";
    let err = apply_series(dir, &[pf("m.patch", edits_missing)]).unwrap_err();
    assert!(
        matches!(&err, PatchError::MissingFile { patch, file } if patch == "m.patch" && file == "src/z.c"),
        "{err:?}"
    );
    assert!(err.to_string().contains("src/z.c"));
    assert_eq!(snapshot(dir), before);

    // A file that goes away in patch 1 cannot be edited by patch 2.
    let deletes = "diff --git a/README b/README\ndeleted file mode 100644\n--- a/README\n+++ /dev/null\n@@ -1 +0,0 @@\n-hello\n";
    let edits =
        "diff --git a/README b/README\n--- a/README\n+++ b/README\n@@ -1 +1 @@\n-hello\n+bye\n";
    let err = apply_series(dir, &[pf("d.patch", deletes), pf("e.patch", edits)]).unwrap_err();
    assert!(
        matches!(&err, PatchError::MissingFile { patch, .. } if patch == "e.patch"),
        "{err:?}"
    );
    assert_eq!(snapshot(dir), before);
}

#[test]
fn paths_through_symbolic_links_or_out_of_the_tree_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    write(dir, "real/x.txt", "a\n");
    symlink("real", dir.join("link")).unwrap();
    let before = snapshot(dir);
    let through = "diff --git a/link/x.txt b/link/x.txt\n--- a/link/x.txt\n+++ b/link/x.txt\n@@ -1 +1 @@\n-a\n+b\n";
    let err = apply_series(dir, &[pf("l.patch", through)]).unwrap_err();
    assert!(matches!(&err, PatchError::BeyondSymlink { .. }), "{err:?}");
    let escape = "diff --git a/../x.txt b/../x.txt\nnew file mode 100644\n--- /dev/null\n+++ b/../x.txt\n@@ -0,0 +1 @@\n+b\n";
    let err = apply_series(dir, &[pf("e.patch", escape)]).unwrap_err();
    assert!(
        matches!(&err, PatchError::Malformed { patch, .. } if patch == "e.patch"),
        "{err:?}"
    );
    assert_eq!(snapshot(dir), before);
}

#[test]
fn malformed_patches_are_named_and_never_panic() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    source_tree(dir);
    let before = snapshot(dir);
    let cases = [
        ("empty.patch", ""),
        ("prose.patch", "This is not a patch.\n"),
        (
            "short-hunk.patch",
            "diff --git a/README b/README\n--- a/README\n+++ b/README\n@@ -1,3 +1,3 @@\n hello\n",
        ),
        (
            "bad-header.patch",
            "diff --git a/README b/README\n--- a/README\n+++ b/README\n@@ -x +1 @@\n-hello\n+bye\n",
        ),
        (
            "bad-line.patch",
            "diff --git a/README b/README\n--- a/README\n+++ b/README\n@@ -1,2 +1,2 @@\n hello\n*bye\n",
        ),
        (
            "bad-mode.patch",
            "diff --git a/README b/README\nold mode 100644\nnew mode 777\n",
        ),
        (
            "no-hunks.patch",
            "diff --git a/README b/README\n--- a/README\n+++ b/README\n",
        ),
        (
            "nul.patch",
            "diff --git a/README b/README\n--- a/README\n+++ b/README\n@@ -1 +1 @@\n-hello\n+b\0ye\n",
        ),
    ];
    for (name, text) in cases {
        let p = pf(name, text);
        let err = validate(&p).unwrap_err();
        assert!(
            matches!(&err, PatchError::Malformed { patch, .. } if patch == name),
            "{name}: {err:?}"
        );
        assert!(err.to_string().starts_with(name), "{err}");
        let err = apply_series(dir, &[pf(P1, PATCH1), p]).unwrap_err();
        assert!(
            matches!(&err, PatchError::Malformed { patch, .. } if patch == name),
            "{name}: {err:?}"
        );
    }
    assert_eq!(snapshot(dir), before);

    // Every truncation and every single-line deletion of real patches: an error or a result,
    // never a panic.
    for text in [PATCH1, PATCH2, PATCH2_CONFLICTING] {
        for end in 0..text.len() {
            let _ = validate(&pf("t.patch", &text[..end]));
        }
        let lines: Vec<&str> = text.split_inclusive('\n').collect();
        for skip in 0..lines.len() {
            let text: String = lines
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != skip)
                .map(|(_, l)| *l)
                .collect();
            let scratch = tempfile::tempdir().unwrap();
            source_tree(scratch.path());
            let _ = apply_series(scratch.path(), &[pf("t.patch", &text)]);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// commit_series / export_series

fn pristine_repo(dir: &Path) -> git2::Oid {
    source_tree(dir);
    write(dir, "old/gone.txt", "a\nb\n");
    let repo = Repository::init(dir).unwrap();
    commit_all(&repo, "Pristine upstream source\n", &[])
}

fn commit_all(repo: &Repository, message: &str, parents: &[&git2::Commit<'_>]) -> git2::Oid {
    let mut index = repo.index().unwrap();
    index.add_all(["*"], IndexAddOption::DEFAULT, None).unwrap();
    index.update_all(["*"], None).unwrap();
    index.write().unwrap();
    let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
    let sig = Signature::new(
        "Upstream",
        "upstream@example.com",
        &Time::new(1_700_000_000, 0),
    )
    .unwrap();
    repo.commit(Some("HEAD"), &sig, &sig, message, &tree, parents)
        .unwrap()
}

fn series() -> Vec<PatchFile> {
    let third = "From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001
From: Dev <dev@example.com>
Subject: [PATCH 3/3] Add a source file, drop the old one, make README executable

Files, deletions and modes all survive the round trip.
---
diff --git a/src/new.c b/src/new.c
new file mode 100755
--- /dev/null
+++ b/src/new.c
@@ -0,0 +1 @@
+int x;
diff --git a/old/gone.txt b/old/gone.txt
deleted file mode 100644
--- a/old/gone.txt
+++ /dev/null
@@ -1,2 +0,0 @@
-a
-b
diff --git a/README b/README
old mode 100644
new mode 100755
";
    vec![
        pf(P1, PATCH1),
        pf(P2, PATCH2),
        pf("patches/rocm-6.4.4/rocblas/0003-add.patch", third),
    ]
}

#[test]
fn commit_then_export_round_trips() {
    let tmp = tempfile::tempdir().unwrap();
    let repo_dir = tmp.path().join("repo");
    let base = pristine_repo(&repo_dir);
    let ids = commit_series(&repo_dir, &series()).unwrap();
    assert_eq!(ids.len(), 3);

    let repo = Repository::open(&repo_dir).unwrap();
    let head = repo.head().unwrap().peel_to_commit().unwrap();
    assert_eq!(head.id().to_string(), ids[2]);
    assert_eq!(head.author().name().ok(), Some("rocforge"));
    assert_eq!(head.author().email().ok(), Some("rocforge@localhost"));
    let first = repo.find_commit(ids[0].parse().unwrap()).unwrap();
    assert_eq!(
        first.message().ok(),
        Some("Change line 3 of a.c for gfx1010\n\nThe upstream value breaks on RDNA1.\n")
    );
    assert_eq!(first.parent_id(0).unwrap(), base);
    let second = repo.find_commit(ids[1].parse().unwrap()).unwrap();
    assert_eq!(
        second.message().ok(),
        Some("Change line 8 and greet the world.\n")
    );
    assert!(
        repo.statuses(None).unwrap().is_empty(),
        "the working tree is at HEAD"
    );
    assert_eq!(
        fs::read_to_string(repo_dir.join("README")).unwrap(),
        "hello\nworld\n"
    );
    assert_eq!(mode(&repo_dir, "src/new.c"), 0o755);

    // Identical input, identical commits.
    let again = tmp.path().join("again");
    pristine_repo(&again);
    assert_eq!(commit_series(&again, &series()).unwrap(), ids);

    // Export: applied to the pristine tree, the patches give HEAD's tree.
    let out = tmp.path().join("patches");
    write(&out, "0007-stale.patch", "stale");
    write(&out, "notes.txt", "kept");
    let names = export_series(&repo_dir, &base.to_string(), &out).unwrap();
    assert_eq!(
        names,
        [
            "0001-change-line-3-of-a-c-for-gfx1010.patch",
            "0002-change-line-8-and-greet-the-world.patch",
            "0003-add-a-source-file-drop-the-old-one-make-readme.patch"
        ]
    );
    let mut on_disk: Vec<String> = fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    on_disk.sort();
    assert_eq!(
        on_disk,
        [
            names[0].as_str(),
            names[1].as_str(),
            names[2].as_str(),
            "notes.txt"
        ]
    );
    let text = fs::read_to_string(out.join(&names[0])).unwrap();
    assert!(text.starts_with("Change line 3 of a.c for gfx1010\n\nThe upstream value breaks on RDNA1.\n---\ndiff --git a/src/a.c b/src/a.c\n"), "{text}");
    assert!(
        text.contains(
            "@@ -1,6 +1,6 @@\n line 1\n line 2\n-line 3\n+line three\n line 4\n line 5\n line 6\n"
        ),
        "{text}"
    );

    let exported: Vec<PatchFile> = names
        .iter()
        .map(|n| PatchFile::read(&out.join(n)).unwrap())
        .collect();
    let plain = tmp.path().join("plain");
    source_tree(&plain);
    write(&plain, "old/gone.txt", "a\nb\n");
    apply_series(&plain, &exported).unwrap();
    assert_eq!(snapshot(&plain), snapshot(&repo_dir));

    // Re-importing the exported series reproduces the same commits.
    let third = tmp.path().join("third");
    pristine_repo(&third);
    assert_eq!(commit_series(&third, &exported).unwrap(), ids);

    // The author edits the tree and commits; the export picks the change up.
    write(&repo_dir, "src/b.c", numbered(3));
    write(
        &repo_dir,
        "src/a.c",
        fs::read_to_string(repo_dir.join("src/a.c"))
            .unwrap()
            .replace("line 10\n", "line ten\n"),
    );
    commit_all(&repo, "Fix line 10\n\nWhy: it was wrong.\n", &[&head]);
    let names2 = export_series(&repo_dir, &base.to_string(), &out).unwrap();
    assert_eq!(names2.len(), 4);
    assert_eq!(names2[..3], names[..]);
    assert_eq!(names2[3], "0004-fix-line-10.patch");
    let text = fs::read_to_string(out.join(&names2[3])).unwrap();
    assert!(
        text.starts_with("Fix line 10\n\nWhy: it was wrong.\n---\n"),
        "{text}"
    );
    assert!(
        text.contains("+line ten\n") && text.contains("new file mode 100644"),
        "{text}"
    );
    let exported: Vec<PatchFile> = names2
        .iter()
        .map(|n| PatchFile::read(&out.join(n)).unwrap())
        .collect();
    let plain = tmp.path().join("plain2");
    source_tree(&plain);
    write(&plain, "old/gone.txt", "a\nb\n");
    apply_series(&plain, &exported).unwrap();
    assert_eq!(snapshot(&plain), snapshot(&repo_dir));

    // Exporting an unchanged history rewrites identical files.
    let first_text = fs::read(out.join(&names2[0])).unwrap();
    export_series(&repo_dir, &base.to_string(), &out).unwrap();
    assert_eq!(fs::read(out.join(&names2[0])).unwrap(), first_text);
}

#[test]
fn commit_series_is_all_or_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let repo_dir = tmp.path().join("repo");
    let base = pristine_repo(&repo_dir);
    let before = snapshot(&repo_dir);
    let err = commit_series(&repo_dir, &[pf(P1, PATCH1), pf(P2, PATCH2_CONFLICTING)]).unwrap_err();
    assert!(
        matches!(&err, PatchError::Conflict { patch, .. } if patch == P2),
        "{err:?}"
    );
    let repo = Repository::open(&repo_dir).unwrap();
    assert_eq!(repo.head().unwrap().peel_to_commit().unwrap().id(), base);
    assert_eq!(snapshot(&repo_dir), before);
}

#[test]
fn a_failed_write_back_is_rolled_back() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    source_tree(dir);
    // `docs` is a file, so creating docs/new.md fails after README has been rewritten.
    write(dir, "docs", "not a directory\n");
    let before = snapshot(dir);
    let patch = "diff --git a/README b/README
--- a/README
+++ b/README
@@ -1 +1 @@
-hello
+bye
diff --git a/src/a.c b/src/a.c
deleted file mode 100644
--- a/src/a.c
+++ /dev/null
@@ -1,12 +0,0 @@
-line 1
-line 2
-line 3
-line 4
-line 5
-line 6
-line 7
-line 8
-line 9
-line 10
-line 11
-line 12
diff --git a/docs/new.md b/docs/new.md
new file mode 100644
--- /dev/null
+++ b/docs/new.md
@@ -0,0 +1 @@
+new
";
    let err = apply_series(dir, &[pf("w.patch", patch)]).unwrap_err();
    assert!(
        matches!(&err, PatchError::Io { path, .. } if path.ends_with("docs/new.md")),
        "{err:?}"
    );
    assert_eq!(
        snapshot(dir),
        before,
        "README and src/a.c (and src/) are restored"
    );
}

#[test]
fn binary_changes_export_and_apply() {
    let tmp = tempfile::tempdir().unwrap();
    let repo_dir = tmp.path().join("repo");
    let blob: Vec<u8> = (0..=255u8).cycle().take(3000).collect();
    write(&repo_dir, "data/table.bin", &blob);
    let repo = Repository::init(&repo_dir).unwrap();
    let base = commit_all(&repo, "Pristine\n", &[]);
    let mut changed = blob.clone();
    changed[100] = 0;
    changed.extend_from_slice(&[0, 1, 2]);
    write(&repo_dir, "data/table.bin", &changed);
    write(&repo_dir, "data/new.bin", [0u8, 159, 146, 150]);
    let head = repo.head().unwrap().peel_to_commit().unwrap();
    commit_all(&repo, "Update the table\n", &[&head]);

    let out = tmp.path().join("patches");
    let names = export_series(&repo_dir, &base.to_string(), &out).unwrap();
    let text = fs::read_to_string(out.join(&names[0])).unwrap();
    assert!(text.contains("GIT binary patch"), "{text}");
    let plain = tmp.path().join("plain");
    write(&plain, "data/table.bin", &blob);
    apply_series(&plain, &[PatchFile::read(&out.join(&names[0])).unwrap()]).unwrap();
    assert_eq!(fs::read(plain.join("data/table.bin")).unwrap(), changed);
    assert_eq!(
        fs::read(plain.join("data/new.bin")).unwrap(),
        [0u8, 159, 146, 150]
    );
}
