//! Where build commands run: podman, docker, or the host. Builds talk to a [`ContainerRuntime`],
//! so the scheduler and drivers are the same for all three and unit tests can use a fake.

pub mod container;
pub mod debootstrap;
pub mod host;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

/// The label every container rocforge starts carries, so stale ones can be found and reaped
/// after a killed run (podman's conmon outlives a killed driver).
pub const LABEL: &str = "rocforge";
pub const LABEL_PID: &str = "rocforge.pid";

#[derive(Debug, Clone, Serialize)]
pub struct Mount {
    pub host: PathBuf,
    pub container: String,
    pub read_only: bool,
}

/// One command to run in the build environment.
#[derive(Debug, Clone)]
pub struct RunSpec {
    pub name: String,
    pub image: String,
    pub mounts: Vec<Mount>,
    /// The complete environment: nothing from the host leaks in.
    pub env: BTreeMap<String, String>,
    pub workdir: String,
    /// Run through `sh -c` after `umask 022`.
    pub script: String,
    /// Network access; builds run with none (sources were fetched before).
    pub network: bool,
    pub labels: BTreeMap<String, String>,
}

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("no container runtime found: neither podman nor docker answers")]
    NoneFound,
    #[error("{runtime} is not usable: {message}")]
    Unusable { runtime: String, message: String },
    #[error("`{command}` could not start: {message}")]
    Spawn { command: String, message: String },
    #[error("image {image} is not available to {runtime}")]
    NoImage { runtime: String, image: String },
    #[error("cannot write the log {path}: {source}")]
    Log {
        path: String,
        source: std::io::Error,
    },
}

impl crate::diag::Hint for RuntimeError {
    fn hint(&self) -> String {
        match self {
            RuntimeError::NoneFound => "install podman (`sudo apt install podman`, `sudo dnf install podman`) or docker; or pass --runtime host to build without containers (not reproducible)".into(),
            RuntimeError::Unusable { .. } => "run `rocforge doctor`, which prints the [runtime] lines that fix it; some hosts need them in rocforge.toml, e.g. [runtime] podman = [\"--runtime\", \"runc\"] and podman-run = [\"--ulimit\", \"nofile=20000:20000\"]".into(),
            RuntimeError::Spawn { .. } => "check that the runtime is installed and on PATH".into(),
            RuntimeError::NoImage { image, .. } => format!("pull it, or build it locally with `rocforge image build` (image {image})"),
            RuntimeError::Log { .. } => "check free disk space".into(),
        }
    }
}

/// A container that did not start: the runtime's own words and, when they say why, the fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartFailure {
    pub message: String,
    pub fix: Option<String>,
}

impl StartFailure {
    /// The hint a user reads: the fix, else where to look.
    pub fn hint(&self) -> String {
        self.fix.clone().unwrap_or_else(|| {
            "run `rocforge doctor`: it starts a container with the flags builds use and says what fails".into()
        })
    }
}

/// The fix for a container start failure `message` of `kind`, given the `[runtime]` arguments
/// in use (`global` before the subcommand, `run` after `run`): the exact rocforge.toml lines.
pub fn start_fix(kind: Kind, message: &str, args: &RuntimeArgs) -> Option<String> {
    let lower = message.to_lowercase();
    let (global_key, run_key) = match kind {
        Kind::Docker => ("docker", "docker-run"),
        _ => ("podman", "podman-run"),
    };
    let toml = config_lines;
    if lower.contains("cannot connect to the docker daemon") || lower.contains("docker daemon") {
        return Some("start the docker daemon (`sudo systemctl start docker`), or point DOCKER_HOST at one that runs; or use --runtime podman".into());
    }
    if lower.contains("rlimit") || lower.contains("ulimit") {
        // A container may not raise a limit above the host's hard one, and podman 4.3 asks for
        // more than many hosts allow: both limits are set to what this host permits. Where
        // the runtime's own processes run under lower limits than this one, `start_check`
        // tries the smaller candidates and names the first that starts.
        let [nofile, nproc] = ulimit_candidates()[0];
        return Some(toml(run_key, with_ulimits(&args.run, nofile, nproc)));
    }
    if kind == Kind::Podman && lower.contains("crun") {
        // crun fails on hosts with a hybrid cgroup v1 hierarchy; runc works there.
        let mut global: Vec<String> = Vec::new();
        let mut it = args.global.iter();
        while let Some(a) = it.next() {
            if a == "--runtime" {
                it.next();
            } else if !a.starts_with("--runtime=") {
                global.push(a.clone());
            }
        }
        global.extend(["--runtime".to_string(), "runc".to_string()]);
        return Some(toml(global_key, global));
    }
    None
}

/// The `[runtime]` lines of rocforge.toml that set `key` to `values`, as the fix reads.
pub(crate) fn config_lines(key: &str, values: Vec<String>) -> String {
    let list = values
        .iter()
        .map(|v| format!("{v:?}"))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "add to rocforge.toml (or ~/.config/rocforge/config.toml):\n  [runtime]\n  {key} = [{list}]"
    )
}

/// The (nofile, nproc) limits worth asking a container for, most first: this host's hard
/// limits, then each capped at 65536, 32768, 16384 and 8192. The runtime's monitor process
/// (podman's conmon) may run under lower limits than the shell that starts it, and a container
/// cannot rise above its monitor's, so the host's own limits are not always the answer.
pub(crate) fn ulimit_candidates() -> Vec<[u64; 2]> {
    let host = [
        hard_limit(libc::RLIMIT_NOFILE),
        hard_limit(libc::RLIMIT_NPROC),
    ];
    let mut out = vec![host];
    for cap in [65536, 32768, 16384, 8192] {
        let next = host.map(|l| l.min(cap));
        if !out.contains(&next) {
            out.push(next);
        }
    }
    out
}

/// `run` with its `--ulimit` flags replaced by `nofile` and `nproc` (soft = hard).
pub(crate) fn with_ulimits(run: &[String], nofile: u64, nproc: u64) -> Vec<String> {
    let mut out = without_ulimits(run);
    for (name, limit) in [("nofile", nofile), ("nproc", nproc)] {
        out.push("--ulimit".into());
        out.push(format!("{name}={limit}:{limit}"));
    }
    out
}

/// `args` without its `--ulimit` flags, which the fix replaces.
fn without_ulimits(args: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--ulimit" {
            it.next();
        } else if !a.starts_with("--ulimit=") {
            out.push(a.clone());
        }
    }
    out
}

/// This host's hard limit of `resource`; an unlimited one as the soft one, else 65536, since
/// a container runtime takes a number.
fn hard_limit(resource: libc::__rlimit_resource_t) -> u64 {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: r is a valid out-pointer.
    if unsafe { libc::getrlimit(resource, &mut r) } != 0 {
        return 65536;
    }
    [r.rlim_max, r.rlim_cur]
        .into_iter()
        .find(|&v| v != libc::RLIM_INFINITY)
        .unwrap_or(65536)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Podman,
    Docker,
    Host,
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Kind::Podman => "podman",
            Kind::Docker => "docker",
            Kind::Host => "host",
        })
    }
}

rocforge_core::open_enum! {
    /// The runtime a build ran in, as store entries, manifests and provenance inputs name it.
    pub enum RuntimeName {
        Podman = "podman",
        Docker = "docker",
        Host = "host",
    }
    description = "The runtime a build ran in: `podman`, `docker` or `host`; other names come from later versions and are kept as written.";
}

/// Entries written before the runtime was recorded read as the empty name they held.
impl Default for RuntimeName {
    fn default() -> Self {
        RuntimeName::Other(String::new())
    }
}

impl From<Kind> for RuntimeName {
    fn from(k: Kind) -> Self {
        match k {
            Kind::Podman => RuntimeName::Podman,
            Kind::Docker => RuntimeName::Docker,
            Kind::Host => RuntimeName::Host,
        }
    }
}

/// The outcome of a run: exit code (None when killed by a signal).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exit(pub Option<i32>);

impl Exit {
    pub fn success(&self) -> bool {
        self.0 == Some(0)
    }
}

pub trait ContainerRuntime: Send + Sync {
    fn kind(&self) -> Kind;
    /// Runs `spec`, appending its output to `log`. Blocks until it ends.
    fn run(&self, spec: &RunSpec, log: &Path) -> Result<Exit, RuntimeError>;
    /// Stops a running build by name (Ctrl-C).
    fn stop(&self, name: &str);
    /// The local image ID of `image`, if present.
    fn image_id(&self, image: &str) -> Option<String>;
    /// The value of label `key` on the local image `image`, if both exist.
    fn image_label(&self, _image: &str, _key: &str) -> Option<String> {
        None
    }
    /// Removes containers labelled by rocforge processes that no longer exist.
    fn reap_stale(&self) -> Vec<String>;
    /// Version line for doctor and artifact metadata.
    fn version(&self) -> Result<String, RuntimeError>;
    /// Imports a root file system, a directory or a tarball of one, as an image tagged `tag`
    /// (`podman import`).
    fn import_rootfs(&self, dir: &Path, tag: &str, log: &Path) -> Result<Exit, RuntimeError>;
    /// Pulls `image` (by digest, as rocforge.lock pins it) from its registry.
    fn pull(&self, image: &str, _log: &Path) -> Result<Exit, RuntimeError> {
        Err(RuntimeError::NoImage {
            runtime: self.kind().to_string(),
            image: image.to_string(),
        })
    }
    /// Starts one throw-away container of `image` with the flags builds use (no network, the
    /// user mapping, rocforge.toml's run arguments) running `true`: what `doctor` checks so a
    /// host whose runtime cannot start containers is told before a build fails.
    fn start_check(&self, _image: &str) -> Result<(), StartFailure> {
        Ok(())
    }
    /// What the runtime printed when a container did not start, with the rocforge.toml lines
    /// that fix it when the message says which.
    fn start_failure(&self, message: &str) -> StartFailure {
        StartFailure {
            message: message.trim().to_string(),
            fix: None,
        }
    }
    /// Builds an image from a Containerfile.
    fn build_image(
        &self,
        containerfile: &Path,
        context: &Path,
        tag: &str,
        log: &Path,
    ) -> Result<Exit, RuntimeError>;
}

/// Extra arguments for a runtime, from rocforge.toml `[runtime]`.
#[derive(Debug, Clone, Default)]
pub struct RuntimeArgs {
    /// Before the subcommand (e.g. `--runtime runc` for podman on hybrid-cgroup hosts).
    pub global: Vec<String>,
    /// After `run` (e.g. `--ulimit nofile=20000:20000`).
    pub run: Vec<String>,
}

/// Picks the runtime: the one asked for, else podman, else docker.
pub fn detect(
    wanted: Option<Kind>,
    podman: RuntimeArgs,
    docker: RuntimeArgs,
) -> Result<Box<dyn ContainerRuntime>, RuntimeError> {
    match wanted {
        Some(Kind::Host) => Ok(Box::new(host::Host::default())),
        // Asked for by name: a broken runtime shows itself on first use, with its own message;
        // probing it here would cost every build a round trip.
        Some(Kind::Podman) => Ok(Box::new(container::Container::new(Kind::Podman, podman))),
        Some(Kind::Docker) => Ok(Box::new(container::Container::new(Kind::Docker, docker))),
        None => {
            let p = container::Container::new(Kind::Podman, podman);
            if p.version().is_ok() {
                return Ok(Box::new(p));
            }
            let d = container::Container::new(Kind::Docker, docker);
            if d.version().is_ok() {
                return Ok(Box::new(d));
            }
            Err(RuntimeError::NoneFound)
        }
    }
}

/// What the runtime a build would use says of `image`: its local image ID and the value of
/// its `label`, or that it does not hold it. The runtime is `wanted`, else podman, else docker,
/// found on PATH without running anything, so a machine without one plans as fast as before
/// (None).
pub fn local_image_id(
    wanted: Option<Kind>,
    podman: RuntimeArgs,
    docker: RuntimeArgs,
    image: &str,
    label: &str,
) -> Option<Option<(String, Option<String>)>> {
    let kind = match wanted {
        Some(Kind::Host) => return None,
        Some(k) => k,
        None if on_path("podman") => Kind::Podman,
        None if on_path("docker") => Kind::Docker,
        None => return None,
    };
    let rt = match kind {
        Kind::Docker => container::Container::new(Kind::Docker, docker),
        _ => container::Container::new(Kind::Podman, podman),
    };
    if !on_path(rt.program()) {
        return None;
    }
    Some(rt.image_id_and_label(image, label))
}

fn on_path(program: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|dir| {
            std::fs::metadata(dir.join(program))
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ulimit_candidates_start_at_the_host_and_only_go_down() {
        let c = ulimit_candidates();
        assert_eq!(
            c[0],
            [
                hard_limit(libc::RLIMIT_NOFILE),
                hard_limit(libc::RLIMIT_NPROC)
            ]
        );
        for w in c.windows(2) {
            assert!(w[1][0] <= w[0][0] && w[1][1] <= w[0][1], "{c:?}");
            assert_ne!(w[0], w[1]);
        }
        assert!(c.last().unwrap().iter().all(|&l| l <= 8192), "{c:?}");
    }

    #[test]
    fn the_ulimit_fix_replaces_the_limits_and_keeps_the_other_flags() {
        let run: Vec<String> = [
            "--ulimit",
            "nofile=1:1",
            "--ulimit=nproc=2:2",
            "--cap-add=X",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(
            with_ulimits(&run, 20000, 32768),
            [
                "--cap-add=X",
                "--ulimit",
                "nofile=20000:20000",
                "--ulimit",
                "nproc=32768:32768"
            ]
        );
    }
}
