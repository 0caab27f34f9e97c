//! podman and docker, driven through their command lines. Every command is logged in full.

use std::io::Write;
use std::path::Path;

use super::{
    ContainerRuntime, Exit, Kind, LABEL, LABEL_PID, RunSpec, RuntimeArgs, RuntimeError,
    StartFailure,
};
use crate::process::{Cmd, pid_alive, shell_quote};

pub struct Container {
    kind: Kind,
    args: RuntimeArgs,
}

impl Container {
    /// The image's ID and the value of its label `key`, from one `image inspect`: planning asks
    /// both of the builder image, and each inspect starts the runtime anew.
    pub fn image_id_and_label(&self, image: &str, key: &str) -> Option<(String, Option<String>)> {
        let format = format!("{{{{.Id}}}}\t{{{{index .Config.Labels \"{key}\"}}}}");
        let out = self
            .cmd(&["image", "inspect", "--format", &format, image])
            .run()
            .ok()?;
        let (id, label) = out.trim().split_once('\t').unwrap_or((out.trim(), ""));
        if id.is_empty() {
            return None;
        }
        let id = if id.starts_with("sha256:") {
            id.to_string()
        } else {
            format!("sha256:{id}")
        };
        let label = label.trim();
        Some((
            id,
            (!label.is_empty() && label != "<no value>").then(|| label.to_string()),
        ))
    }

    pub fn new(kind: Kind, args: RuntimeArgs) -> Self {
        Self { kind, args }
    }

    pub fn program(&self) -> &'static str {
        match self.kind {
            Kind::Docker => "docker",
            _ => "podman",
        }
    }

    fn base(&self) -> Vec<String> {
        let mut v = vec![self.program().to_string()];
        v.extend(self.args.global.iter().cloned());
        v
    }

    fn cmd(&self, args: &[&str]) -> Cmd {
        let base = self.base();
        Cmd::new(&base[0])
            .args(base[1..].iter())
            .args(args.iter().copied())
    }

    /// The full `run` command line for a spec.
    pub fn run_args(&self, spec: &RunSpec) -> Vec<String> {
        let mut a = self.base();
        a.extend(["run", "--rm"].map(String::from));
        a.push(format!("--name={}", spec.name));
        a.push(format!("--label={LABEL}=1"));
        a.push(format!("--label={LABEL_PID}={}", std::process::id()));
        for (k, v) in &spec.labels {
            a.push(format!("--label={k}={v}"));
        }
        if !spec.network {
            a.push("--network=none".into());
        }
        // Outputs belong to whoever runs rocforge: rootless podman maps the user in; docker
        // and rootful podman run the build as that uid.
        let (uid, gid) = ids();
        if uid != 0 {
            match self.kind {
                Kind::Podman => a.push("--userns=keep-id".into()),
                _ => a.push(format!("--user={uid}:{gid}")),
            }
        }
        a.extend(self.args.run.iter().cloned());
        for m in &spec.mounts {
            a.push("--volume".into());
            a.push(format!(
                "{}:{}{}",
                m.host.display(),
                m.container,
                if m.read_only { ":ro" } else { "" }
            ));
        }
        for (k, v) in &spec.env {
            a.push("--env".into());
            a.push(format!("{k}={v}"));
        }
        a.push(format!("--workdir={}", spec.workdir));
        a.push(spec.image.clone());
        a.extend(["sh", "-c"].map(String::from));
        a.push(format!("umask 022 && {}", spec.script));
        a
    }
}

pub fn ids() -> (u32, u32) {
    // SAFETY: getuid/getgid cannot fail.
    unsafe { (libc::getuid(), libc::getgid()) }
}

fn append(log: &Path, text: &str) -> Result<std::fs::File, RuntimeError> {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|source| RuntimeError::Log {
            path: log.display().to_string(),
            source,
        })?;
    let _ = f.write_all(text.as_bytes());
    Ok(f)
}

/// Runs a full command line with its output appended to `log`, logging the line first.
fn run_logged(args: &[String], log: &Path, env: &[(&str, &str)]) -> Result<Exit, RuntimeError> {
    let mut cmd = crate::process::Cmd::new(&args[0]).args(&args[1..]);
    for (k, v) in env {
        cmd = cmd.env(k, v);
    }
    let file = append(log, "")?;
    let code = cmd.run_logged(file).map_err(|e| RuntimeError::Spawn {
        command: cmd.display(),
        message: match e {
            crate::process::ProcessError::Spawn { source, .. } => source.to_string(),
            other => other.to_string(),
        },
    })?;
    Ok(Exit(code))
}

impl ContainerRuntime for Container {
    fn kind(&self) -> Kind {
        self.kind
    }

    fn run(&self, spec: &RunSpec, log: &Path) -> Result<Exit, RuntimeError> {
        run_logged(&self.run_args(spec), log, &[])
    }

    fn stop(&self, name: &str) {
        let _ = self.cmd(&["rm", "--force", name]).run();
    }

    fn image_id(&self, image: &str) -> Option<String> {
        let out = self
            .cmd(&["image", "inspect", "--format", "{{.Id}}", image])
            .run()
            .ok()?;
        let id = out.trim();
        (!id.is_empty()).then(|| {
            if id.starts_with("sha256:") {
                id.to_string()
            } else {
                format!("sha256:{id}")
            }
        })
    }

    fn image_label(&self, image: &str, key: &str) -> Option<String> {
        // podman and docker both keep an image's labels under .Config.Labels.
        let format = format!("{{{{index .Config.Labels \"{key}\"}}}}");
        let out = self
            .cmd(&["image", "inspect", "--format", &format, image])
            .run()
            .ok()?;
        let value = out.trim();
        (!value.is_empty() && value != "<no value>").then(|| value.to_string())
    }

    fn reap_stale(&self) -> Vec<String> {
        let format = format!("{{{{.Names}}}}\t{{{{index .Labels \"{LABEL_PID}\"}}}}");
        let Ok(out) = self
            .cmd(&[
                "ps",
                "--all",
                "--filter",
                &format!("label={LABEL}"),
                "--format",
                &format,
            ])
            .run()
        else {
            return Vec::new();
        };
        let mut reaped = Vec::new();
        for line in out.lines() {
            let mut parts = line.split('\t');
            let (Some(name), Some(pid)) = (parts.next(), parts.next()) else {
                continue;
            };
            let alive = pid.trim().parse::<u32>().is_ok_and(pid_alive);
            if !alive {
                self.stop(name.trim());
                reaped.push(name.trim().to_string());
            }
        }
        reaped
    }

    fn version(&self) -> Result<String, RuntimeError> {
        let format = match self.kind {
            Kind::Docker => "{{.Server.Version}}",
            _ => "{{.Client.Version}}",
        };
        self.cmd(&["version", "--format", format])
            .run()
            .map(|v| format!("{} {}", self.program(), v.trim()))
            .map_err(|e| RuntimeError::Unusable {
                runtime: self.program().to_string(),
                message: e.to_string(),
            })
    }

    fn import_rootfs(&self, dir: &Path, tag: &str, log: &Path) -> Result<Exit, RuntimeError> {
        let mut args = self.base();
        let quoted = |args: &[String]| {
            args.iter()
                .map(|a| shell_quote(a))
                .collect::<Vec<_>>()
                .join(" ")
        };
        let (line, command) = if dir.is_file() {
            // A tarball of the root file system (mmdebstrap's): imported as it is.
            args.extend([
                "import".to_string(),
                dir.display().to_string(),
                tag.to_string(),
            ]);
            (quoted(&args), duct::cmd(&args[0], &args[1..]))
        } else {
            args.extend(["import".to_string(), "-".to_string(), tag.to_string()]);
            let tar = duct::cmd(
                "tar",
                ["-C".as_ref(), dir.as_os_str(), "-c".as_ref(), ".".as_ref()],
            );
            (
                format!(
                    "tar -C {} -c . | {}",
                    shell_quote(&dir.display().to_string()),
                    quoted(&args)
                ),
                tar.pipe(duct::cmd(&args[0], &args[1..])),
            )
        };
        let file = append(log, &format!("$ {line}\n"))?;
        let err = file.try_clone().map_err(|source| RuntimeError::Log {
            path: log.display().to_string(),
            source,
        })?;
        let out = command
            .stdin_null()
            .stdout_file(file)
            .stderr_file(err)
            .unchecked()
            .run()
            .map_err(|e| RuntimeError::Spawn {
                command: line,
                message: e.to_string(),
            })?;
        Ok(Exit(out.status.code()))
    }

    fn start_check(&self, image: &str) -> Result<(), StartFailure> {
        let spec = RunSpec {
            name: format!("rocforge-doctor-{}", std::process::id()),
            image: image.to_string(),
            mounts: Vec::new(),
            env: Default::default(),
            workdir: "/".into(),
            script: "true".into(),
            network: false,
            labels: Default::default(),
        };
        let start = |rt: &Container| {
            let args = rt.run_args(&spec);
            Cmd::new(&args[0])
                .args(&args[1..])
                .run()
                .map(drop)
                .map_err(|e| match e.stderr().trim() {
                    "" => e.to_string(),
                    s => s.to_string(),
                })
        };
        let said = match start(self) {
            Ok(()) => return Ok(()),
            Err(said) => said,
        };
        let mut failure = self.start_failure(&said);
        if said.to_lowercase().contains("rlimit") {
            // The limits the fix names are tried here, most first, so doctor prints lines
            // that start a container on this host rather than a guess.
            for [nofile, nproc] in super::ulimit_candidates() {
                let run = super::with_ulimits(&self.args.run, nofile, nproc);
                let trial = Container {
                    kind: self.kind,
                    args: RuntimeArgs {
                        global: self.args.global.clone(),
                        run: run.clone(),
                    },
                };
                if start(&trial).is_ok() {
                    let key = match self.kind {
                        Kind::Docker => "docker-run",
                        _ => "podman-run",
                    };
                    failure.fix = Some(format!(
                        "{} (a container started with these limits here)",
                        super::config_lines(key, run)
                    ));
                    break;
                }
            }
        }
        Err(failure)
    }

    fn start_failure(&self, message: &str) -> StartFailure {
        StartFailure {
            message: message.trim().to_string(),
            fix: super::start_fix(self.kind, message, &self.args),
        }
    }

    fn pull(&self, image: &str, log: &Path) -> Result<Exit, RuntimeError> {
        let mut args = self.base();
        args.extend(["pull".to_string(), image.to_string()]);
        run_logged(&args, log, &[])
    }

    fn build_image(
        &self,
        containerfile: &Path,
        context: &Path,
        tag: &str,
        log: &Path,
    ) -> Result<Exit, RuntimeError> {
        let mut args = self.base();
        args.push("build".into());
        if self.kind == Kind::Podman {
            // Same inputs, same image ID.
            args.push("--timestamp=0".into());
        }
        args.push("--file".into());
        args.push(containerfile.display().to_string());
        args.push("--tag".into());
        args.push(tag.to_string());
        args.push(context.display().to_string());
        // docker 20.10 without buildx: the classic builder.
        run_logged(&args, log, &[("DOCKER_BUILDKIT", "0")])
    }
}
