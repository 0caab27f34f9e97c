//! Builds directly on the host, for machines without containers. Explicit opt-in only: the
//! result depends on whatever the host has installed, so artifacts record it as not
//! reproducible and host keys never match container keys.

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::sync::Mutex;

use super::{ContainerRuntime, Exit, Kind, RunSpec, RuntimeError};

#[derive(Default)]
pub struct Host {
    /// The process group of each running build, by name, for `stop`.
    running: Mutex<BTreeMap<String, u32>>,
}

/// Runs the script (`$1`) in the background and waits for it, so that the TERM trap runs at
/// once: it kills the whole process group, the build's every process.
const WRAPPER: &str = "trap 'kill -KILL 0' TERM; sh -c \"$1\" & wait $!";

impl ContainerRuntime for Host {
    fn kind(&self) -> Kind {
        Kind::Host
    }

    fn run(&self, spec: &RunSpec, log: &Path) -> Result<Exit, RuntimeError> {
        // The driver gave host paths in the environment and workdir; mounts mean nothing here.
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .map_err(|source| RuntimeError::Log {
                path: log.display().to_string(),
                source,
            })?;
        let _ = writeln!(
            f,
            "$ (host, in {}) sh -c {}",
            spec.workdir,
            crate::process::shell_quote(&spec.script)
        );
        let err = f.try_clone().map_err(|source| RuntimeError::Log {
            path: log.display().to_string(),
            source,
        })?;
        let mut cmd = std::process::Command::new("sh");
        cmd.arg("-c")
            .arg(WRAPPER)
            .arg("sh")
            .arg(format!("umask 022 && {}", spec.script))
            .current_dir(&spec.workdir)
            .env_clear();
        // The build gets a process group of its own, whose leader receives SIGTERM when rocforge
        // dies, even by kill -9 (PR_SET_PDEATHSIG), and then kills the group: no orphaned build
        // goes on writing into the scratch directory that the next run of the same key reuses.
        let parent = std::process::id();
        cmd.process_group(0);
        // SAFETY: prctl and getppid are async-signal-safe; nothing here allocates.
        unsafe {
            cmd.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // rocforge died before the prctl took effect.
                if libc::getppid() as u32 != parent {
                    return Err(std::io::Error::other("rocforge exited"));
                }
                Ok(())
            });
        }
        // The host's PATH is needed to find its compilers; nothing else leaks in.
        if let Some(path) = std::env::var_os("PATH") {
            cmd.env("PATH", path);
        }
        cmd.envs(&spec.env);
        let mut child = cmd
            .stdin(std::process::Stdio::null())
            .stdout(f)
            .stderr(err)
            .spawn()
            .map_err(|e| RuntimeError::Spawn {
                command: "sh".into(),
                message: e.to_string(),
            })?;
        let running = || self.running.lock().unwrap_or_else(|p| p.into_inner());
        running().insert(spec.name.clone(), child.id());
        let status = child.wait();
        running().remove(&spec.name);
        let status = status.map_err(|e| RuntimeError::Spawn {
            command: "sh".into(),
            message: e.to_string(),
        })?;
        Ok(Exit(status.code()))
    }

    /// Ctrl-C: the build is in its own process group, out of the terminal's reach.
    fn stop(&self, name: &str) {
        let pgid = self
            .running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(name)
            .copied();
        if let Some(pgid) = pgid {
            // SAFETY: signals the build's own process group, which is still waited for.
            unsafe {
                libc::kill(-(pgid as i32), libc::SIGKILL);
            }
        }
    }

    fn image_id(&self, _: &str) -> Option<String> {
        None
    }

    fn reap_stale(&self) -> Vec<String> {
        Vec::new()
    }

    fn version(&self) -> Result<String, RuntimeError> {
        Ok("host".into())
    }

    fn import_rootfs(&self, _: &Path, _: &str, _: &Path) -> Result<Exit, RuntimeError> {
        Err(RuntimeError::Unusable {
            runtime: "host".into(),
            message: "the host runtime has no images".into(),
        })
    }

    fn build_image(&self, _: &Path, _: &Path, _: &str, _: &Path) -> Result<Exit, RuntimeError> {
        Err(RuntimeError::Unusable {
            runtime: "host".into(),
            message: "the host runtime has no images".into(),
        })
    }
}
