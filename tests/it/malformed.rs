//! Every malformed catalog under tests/malformed/ must make `rocforge check` exit 1 with the
//! rendered message in its snapshot. A case directory holds only the files it changes; they
//! are laid over the valid catalog in tests/fixtures/base (a file named `DELETE` lists paths
//! of the base to remove first).

use std::path::Path;
use std::process::Command;

fn copy_tree(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let dest = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            std::fs::create_dir_all(&dest).unwrap();
            copy_tree(&entry.path(), &dest);
        } else if entry.file_name() != "DELETE" {
            std::fs::copy(entry.path(), dest).unwrap();
        }
    }
}

#[test]
fn malformed_catalogs_fail_check_with_their_messages() {
    let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/base");
    let mut cases = 0;
    insta::glob!("..", "malformed/*", |case| {
        cases += 1;
        let dir = tempfile::tempdir().unwrap();
        copy_tree(&base, dir.path());
        if let Ok(list) = std::fs::read_to_string(case.join("DELETE")) {
            for line in list.lines().filter(|l| !l.trim().is_empty()) {
                std::fs::remove_file(dir.path().join(line.trim())).unwrap();
            }
        }
        copy_tree(case, dir.path());
        let out = Command::new(env!("CARGO_BIN_EXE_rocforge"))
            .current_dir(dir.path())
            .args(["check", "--recipes", "recipes"])
            .env("NO_COLOR", "1")
            .env_remove("ROCFORGE_RECIPES")
            .env_remove("ROCFORGE_RELEASE")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{}: expected exit 1\n{stderr}",
            case.display()
        );
        assert!(
            !stderr.contains("panicked"),
            "{}: panic\n{stderr}",
            case.display()
        );
        insta::assert_snapshot!(format!("exit: {:?}\n{stderr}", out.status.code()));
    });
    assert!(
        cases >= 30,
        "the corpus must hold at least 30 malformed catalogs, found {cases}"
    );
}

#[test]
fn the_base_fixture_is_valid() {
    let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/base");
    let out = Command::new(env!("CARGO_BIN_EXE_rocforge"))
        .current_dir(&base)
        .args(["check", "--recipes", "recipes"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
