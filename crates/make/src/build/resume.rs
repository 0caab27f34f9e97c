//! The scratch directory of one build, kept when the build does not finish so that the next
//! build of the same content key continues where it stopped.
//!
//! A real ROCm library takes hours on a small machine and a working session may end in the
//! middle of it. The scratch directory is named by the content key, which already covers the
//! source, patches, dependencies, flags and builder image, so a build directory left under that
//! name was made from exactly the same inputs: CMake re-runs its configure step over it and ninja
//! redoes only the steps whose outputs are missing or older than their inputs (a compile killed
//! halfway leaves no output, since the compiler writes through a temporary file). What cannot be
//! trusted is what came after the build: `out/` (the install tree) and the dependency links are
//! always made anew.

use std::io;
use std::path::{Path, PathBuf};

/// Written when a build directory is first made; its presence is what makes a directory
/// left behind resumable (a directory without it is a half-made one and is discarded).
const MARKER: &str = ".rocforge-build";

/// How the build directory was set up for this run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Start {
    Fresh,
    /// An earlier build of the same key stopped; `steps_done` counts the ninja steps it
    /// recorded (None when it used another build tool).
    Resumed {
        steps_done: Option<usize>,
    },
}

/// The scratch directory `<cache>/builds/<key>`: `build/` (kept), `out/`, `deps/`, `inputs/`.
pub struct Scratch {
    pub root: PathBuf,
}

impl Scratch {
    pub fn new(root: PathBuf) -> Scratch {
        Scratch { root }
    }

    pub fn build(&self) -> PathBuf {
        self.root.join("build")
    }

    /// Whether the next run continues the build directory left here (unless --fresh).
    pub fn resumable(&self) -> bool {
        self.build().join(MARKER).is_file()
    }

    /// Makes the directories for a run: resumes the build directory an earlier run of this key
    /// left, unless `fresh` asks to start over.
    pub fn prepare(&self, fresh: bool) -> io::Result<Start> {
        let build = self.build();
        let resumable = !fresh && self.resumable();
        let start = if resumable {
            for part in ["out", "deps", "inputs"] {
                crate::fsutil::remove_tree(&self.root.join(part))?;
            }
            Start::Resumed {
                steps_done: ninja_steps(&build),
            }
        } else {
            crate::fsutil::remove_tree(&self.root)?;
            Start::Fresh
        };
        std::fs::create_dir_all(build.join(".home"))?;
        std::fs::create_dir_all(self.root.join("out"))?;
        std::fs::create_dir_all(self.root.join("deps"))?;
        if start == Start::Fresh {
            std::fs::write(build.join(MARKER), b"")?;
        }
        Ok(start)
    }

    /// Marks a build directory made elsewhere (a pulled checkpoint) as resumable, as begun
    /// here at `began` (when its pull started).
    pub fn mark(&self, began: std::time::SystemTime) -> io::Result<()> {
        let marker = self.build().join(MARKER);
        std::fs::write(&marker, b"")?;
        std::fs::File::options()
            .write(true)
            .open(&marker)?
            .set_modified(began)
    }

    /// When this build directory was begun on this machine (made fresh, or pulled): the
    /// compiler cache entries touched since are this build's.
    pub fn began(&self) -> Option<std::time::SystemTime> {
        std::fs::metadata(self.build().join(MARKER))
            .and_then(|m| m.modified())
            .ok()
    }

    /// After a successful build nothing of it is needed again.
    pub fn remove(&self) -> io::Result<()> {
        crate::fsutil::remove_tree(&self.root)
    }
}

/// Ninja's log lists one line per finished step after its header; a step rebuilt twice has two
/// lines, so this is an upper bound of the distinct steps, good enough to tell a person. The log
/// is the build directory's own, or, for a script that runs CMake in a subdirectory (PyTorch's
/// `setup.py` in `pytorch/build`), the shallowest one within three levels.
pub fn ninja_steps(build: &Path) -> Option<usize> {
    let (dir, log) = find_ninja_log(build)?;
    // The same step may be logged by its relative and its absolute path inside the container,
    // where the build directory is `/build`.
    let inside = Path::new("/build").join(dir.strip_prefix(build).ok()?);
    let prefix = format!("{}/", inside.display());
    let mut outputs: Vec<&str> = log
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split('\t').nth(3))
        .map(|o| o.strip_prefix(prefix.as_str()).unwrap_or(o))
        .collect();
    outputs.sort_unstable();
    outputs.dedup();
    Some(outputs.len())
}

fn find_ninja_log(build: &Path) -> Option<(PathBuf, String)> {
    let mut level = vec![build.to_path_buf()];
    for _ in 0..=3 {
        let mut next = Vec::new();
        for dir in &level {
            if let Ok(log) = std::fs::read_to_string(dir.join(".ninja_log")) {
                return Some((dir.clone(), log));
            }
            let Ok(entries) = std::fs::read_dir(dir) else {
                continue;
            };
            let mut subdirs: Vec<PathBuf> = entries
                .flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| e.path())
                .collect();
            subdirs.sort();
            next.extend(subdirs);
        }
        level = next;
    }
    None
}

/// Every scratch directory left under `<cache>/builds` with its size, for `gc` and `store`.
pub fn leftovers(builds: &Path) -> io::Result<Vec<(String, PathBuf)>> {
    let mut found = Vec::new();
    let entries = match std::fs::read_dir(builds) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(found),
        Err(e) => return Err(e),
    };
    for entry in entries {
        let entry = entry?;
        if entry.file_type()?.is_dir() {
            found.push((
                entry.file_name().to_string_lossy().into_owned(),
                entry.path(),
            ));
        }
    }
    found.sort();
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_script_builds_ninja_log_is_found_below_and_counted_once_per_step() {
        let dir = tempfile::tempdir().unwrap();
        let nested = dir.path().join("pytorch/build");
        std::fs::create_dir_all(&nested).unwrap();
        std::fs::create_dir_all(dir.path().join("aaa/deep/er")).unwrap();
        std::fs::write(
            nested.join(".ninja_log"),
            "# ninja log v6\n1\t2\t0\ta.o\th\n1\t2\t0\t/build/pytorch/build/a.o\th\n3\t4\t0\tb.o\th\n",
        )
        .unwrap();
        assert_eq!(ninja_steps(dir.path()), Some(2));
        assert_eq!(ninja_steps(&dir.path().join("aaa")), None);
    }

    #[test]
    fn a_marked_build_directory_is_resumed_and_the_rest_is_made_anew() {
        let dir = tempfile::tempdir().unwrap();
        let s = Scratch::new(dir.path().join("k"));
        assert_eq!(s.prepare(false).unwrap(), Start::Fresh);
        std::fs::write(
            s.build().join(".ninja_log"),
            "# ninja log v6\n1\t2\t0\ta.o\th\n3\t4\t0\tb.o\th\n5\t6\t0\ta.o\th\n",
        )
        .unwrap();
        std::fs::write(s.build().join("a.o"), b"obj").unwrap();
        std::fs::write(s.root.join("out/half-installed"), b"x").unwrap();
        assert_eq!(
            s.prepare(false).unwrap(),
            Start::Resumed {
                steps_done: Some(2)
            }
        );
        assert!(
            s.build().join("a.o").is_file(),
            "the build directory is kept"
        );
        assert!(
            !s.root.join("out/half-installed").exists(),
            "the install tree is made anew"
        );
        assert_eq!(s.prepare(true).unwrap(), Start::Fresh);
        assert!(!s.build().join("a.o").exists(), "--fresh starts over");
    }

    #[test]
    fn a_directory_without_the_marker_is_discarded() {
        let dir = tempfile::tempdir().unwrap();
        let s = Scratch::new(dir.path().join("k"));
        std::fs::create_dir_all(s.build()).unwrap();
        std::fs::write(s.build().join("stray"), b"x").unwrap();
        assert_eq!(s.prepare(false).unwrap(), Start::Fresh);
        assert!(!s.build().join("stray").exists());
    }
}
