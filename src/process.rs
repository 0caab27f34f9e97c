//! The one way rocforge runs another program: the full command line is logged, output is
//! captured, and a failure says what ran, where, and what it printed.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    #[error("cannot run `{command}`: {source}")]
    Spawn {
        command: String,
        source: std::io::Error,
    },
    #[error("`{command}` failed ({status}){}", tail(.stderr))]
    Failed {
        command: String,
        status: String,
        stdout: String,
        stderr: String,
    },
}

fn tail(stderr: &str) -> String {
    let lines: Vec<&str> = stderr.trim_end().lines().collect();
    if lines.is_empty() {
        return String::new();
    }
    let start = lines.len().saturating_sub(10);
    format!(":\n  {}", lines[start..].join("\n  "))
}

impl ProcessError {
    pub fn stderr(&self) -> &str {
        match self {
            ProcessError::Failed { stderr, .. } => stderr,
            ProcessError::Spawn { .. } => "",
        }
    }
}

/// A command to run; built up, then `run`.
#[derive(Debug, Clone)]
pub struct Cmd {
    program: OsString,
    args: Vec<OsString>,
    cwd: Option<PathBuf>,
    env: Vec<(OsString, OsString)>,
}

impl Cmd {
    pub fn new(program: impl Into<OsString>) -> Self {
        Self {
            program: program.into(),
            args: Vec::new(),
            cwd: None,
            env: Vec::new(),
        }
    }

    pub fn arg(mut self, a: impl Into<OsString>) -> Self {
        self.args.push(a.into());
        self
    }

    pub fn args<I: IntoIterator<Item = S>, S: Into<OsString>>(mut self, args: I) -> Self {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    pub fn dir(mut self, dir: &Path) -> Self {
        self.cwd = Some(dir.to_path_buf());
        self
    }

    pub fn env(mut self, k: impl Into<OsString>, v: impl Into<OsString>) -> Self {
        self.env.push((k.into(), v.into()));
        self
    }

    /// The command as a shell would show it, for logs and errors.
    pub fn display(&self) -> String {
        let mut parts = vec![shell_quote(&self.program.to_string_lossy())];
        parts.extend(self.args.iter().map(|a| shell_quote(&a.to_string_lossy())));
        let mut s = parts.join(" ");
        if let Some(dir) = &self.cwd {
            s = format!("(cd {} && {s})", shell_quote(&dir.to_string_lossy()));
        }
        s
    }

    /// Runs to completion, capturing stdout and stderr; non-zero exit is an error.
    pub fn run(&self) -> Result<String, ProcessError> {
        let command = self.display();
        tracing::info!(target: "rocforge::process", "run: {command}");
        let mut expr = duct::cmd(&self.program, &self.args)
            .stdout_capture()
            .stderr_capture()
            .unchecked();
        if let Some(dir) = &self.cwd {
            expr = expr.dir(dir);
        }
        for (k, v) in &self.env {
            expr = expr.env(k, v);
        }
        let out = expr.run().map_err(|source| ProcessError::Spawn {
            command: command.clone(),
            source,
        })?;
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        if !out.status.success() {
            tracing::debug!(target: "rocforge::process", "failed: {command}\n{stderr}");
            return Err(ProcessError::Failed {
                command,
                status: out.status.to_string(),
                stdout,
                stderr,
            });
        }
        Ok(stdout)
    }
}

/// Quotes a word for display the way a POSIX shell would need it.
pub fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%^".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// Whether an executable named `tool` is on PATH.
pub fn on_path(tool: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|d| {
            std::fs::metadata(d.join(tool))
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
    })
}
/// Is a process with this pid alive? Used to find containers and locks of killed rocforge
/// runs.
pub fn pid_alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}
