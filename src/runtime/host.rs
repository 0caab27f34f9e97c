//! Builds directly on the host, for machines without containers. Explicit opt-in only: the
//! result depends on whatever the host has installed, so artifacts record it as not
//! reproducible and host keys never match container keys.

use std::io::Write;
use std::path::Path;

use super::{ContainerRuntime, Exit, Kind, RunSpec, RuntimeError};

pub struct Host;

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
            .arg(format!("umask 022 && {}", spec.script))
            .current_dir(&spec.workdir)
            .env_clear();
        // The host's PATH is needed to find its compilers; nothing else leaks in.
        if let Some(path) = std::env::var_os("PATH") {
            cmd.env("PATH", path);
        }
        cmd.envs(&spec.env);
        let status = cmd
            .stdin(std::process::Stdio::null())
            .stdout(f)
            .stderr(err)
            .status()
            .map_err(|e| RuntimeError::Spawn {
                command: "sh".into(),
                message: e.to_string(),
            })?;
        Ok(Exit(status.code()))
    }

    fn stop(&self, _: &str) {}

    fn image_id(&self, _: &str) -> Option<String> {
        None
    }

    fn reap_stale(&self) -> Vec<String> {
        Vec::new()
    }

    fn version(&self) -> Result<String, RuntimeError> {
        Ok("host".into())
    }

    fn build_image(&self, _: &Path, _: &Path, _: &str, _: &Path) -> Result<Exit, RuntimeError> {
        Err(RuntimeError::Unusable {
            runtime: "host".into(),
            message: "the host runtime has no images".into(),
        })
    }
}
