//! A time limit's last stretch. Stopping a build kills the compiles under way, and on a
//! 2-core machine those can be minutes of work each, redone by whichever machine continues
//! the checkpoint. So before the limit a build drains: no component and no compile starts,
//! the compiles under way finish into the build directory (and the compiler cache), and the
//! checkpoint keeps them. The limit itself still kills whatever runs then.
//!
//! A compile learns of the drain through a file in its build directory: the driver puts a
//! gate before ccache in every CMake build's compiler launcher, and the gate refuses to start
//! a compiler once [`MARKER`] exists. Ninja then stops scheduling and waits for the compiles
//! it already runs, and the build ends as a stopped one.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// The file in a build directory that closes its gate.
pub const MARKER: &str = ".rocforge-drain";

/// The gate a CMake build's compiler launcher runs first (`$BUILD/.rocforge-gate`).
pub const GATE: &str = ".rocforge-gate";

/// The gate's text: with the marker beside it, it starts nothing and fails, so ninja starts no
/// other step and waits for those under way; else it runs the rest of the launcher line.
pub fn gate_script() -> String {
    format!(
        "#!/bin/sh\n\
         # rocforge: a time limit is near once {MARKER} exists here: start no compile.\n\
         if [ -e \"$(dirname \"$0\")/{MARKER}\" ]; then\n  \
           echo \"rocforge: time limit near: not starting a compile\" >&2\n  \
           exit 75\n\
         fi\n\
         exec \"$@\"\n"
    )
}

/// The builds under way, and whether the drain has begun.
#[derive(Debug, Default)]
pub struct Drain {
    on: AtomicBool,
    dirs: Mutex<Vec<PathBuf>>,
}

impl Drain {
    /// Begins the drain: every build under way gets the marker; builds that start later get it
    /// as they enter. Returns how many were under way.
    pub fn begin(&self) -> usize {
        self.on.store(true, Ordering::SeqCst);
        let dirs = self.dirs.lock().map(|d| d.clone()).unwrap_or_default();
        for d in &dirs {
            // A build directory that is gone ended its build already.
            let _ = std::fs::write(d.join(MARKER), "");
        }
        dirs.len()
    }

    pub fn is_on(&self) -> bool {
        self.on.load(Ordering::SeqCst)
    }

    /// A build about to run in `dir`: a marker left by a drained run (it travels in the
    /// checkpoint) is removed, unless this run drains already. Leaves the list on drop.
    pub fn enter(&self, dir: &Path) -> std::io::Result<Entered<'_>> {
        let marker = dir.join(MARKER);
        if self.is_on() {
            std::fs::write(&marker, "")?;
        } else {
            match std::fs::remove_file(&marker) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        if let Ok(mut d) = self.dirs.lock() {
            d.push(dir.to_path_buf());
        }
        Ok(Entered {
            drain: self,
            dir: dir.to_path_buf(),
        })
    }
}

/// A build directory listed in its [`Drain`] while its build runs.
pub struct Entered<'a> {
    drain: &'a Drain,
    dir: PathBuf,
}

impl Drop for Entered<'_> {
    fn drop(&mut self) {
        if let Ok(mut d) = self.drain.dirs.lock() {
            d.retain(|x| x != &self.dir);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gate_runs_the_launcher_until_the_marker_closes_it() {
        let dir = tempfile::tempdir().unwrap();
        let gate = dir.path().join(GATE);
        std::fs::write(&gate, gate_script()).unwrap();
        let run = || {
            std::process::Command::new("sh")
                .arg(&gate)
                .args(["sh", "-c", "exit 3"])
                .status()
                .unwrap()
                .code()
        };
        assert_eq!(run(), Some(3), "open: the launcher line runs");
        let drain = Drain::default();
        let entered = drain.enter(dir.path()).unwrap();
        assert_eq!(drain.begin(), 1);
        assert_eq!(run(), Some(75), "closed");
        drop(entered);
        assert_eq!(drain.begin(), 0, "a finished build leaves the list");
        // The next run of the same directory, not draining, opens the gate again.
        let next = Drain::default();
        let _e = next.enter(dir.path()).unwrap();
        assert_eq!(run(), Some(3));
    }
}
