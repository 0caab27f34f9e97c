//! The one way rocforge runs another program: the full command line is logged, output is
//! captured (or appended to a log file), and a failure says what ran, where, and what it
//! printed. A child that must be watched while it runs (a test client that may hang) is a
//! [`Pumped`]: its output arrives line by line, so silence can be timed and the child killed.

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

impl Cmd {
    /// Runs to completion with stdout and stderr appended to `log` (after the command line,
    /// `$ …`); returns the exit code, None when killed by a signal.
    pub fn run_logged(&self, log: std::fs::File) -> Result<Option<i32>, ProcessError> {
        use std::io::Write;
        let command = self.display();
        tracing::info!(target: "rocforge::process", "run: {command}");
        let spawn = |source| ProcessError::Spawn {
            command: command.clone(),
            source,
        };
        let mut log = log;
        writeln!(log, "$ {command}").map_err(spawn)?;
        let err = log.try_clone().map_err(spawn)?;
        let mut expr = duct::cmd(&self.program, &self.args)
            .stdin_null()
            .stdout_file(log)
            .stderr_file(err)
            .unchecked();
        if let Some(dir) = &self.cwd {
            expr = expr.dir(dir);
        }
        for (k, v) in &self.env {
            expr = expr.env(k, v);
        }
        Ok(expr.run().map_err(spawn)?.status.code())
    }
}

/// What a [`Pumped`] child's output said within the wait.
#[derive(Debug)]
pub enum Heard {
    /// One line, with its end of line.
    Line(Vec<u8>),
    /// Nothing within the wait.
    Silent,
    /// The output is closed (the child exited, or closed it).
    Closed,
}

/// A running child whose stdout and stderr arrive, joined in one pipe, line by line: a thread
/// pumps them into a channel, so the caller can time the silence between lines.
pub struct Pumped {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<Vec<u8>>,
    pump: std::thread::JoinHandle<()>,
}

/// The longest piece of output [`Pumped`] hands on as one line; with its channel of 4,096
/// lines, what waits to be read is at most 64 MiB.
pub const MAX_LINE: u64 = 16 << 10;

impl Pumped {
    /// Starts `cmd` (its process group, environment and the like already set) with stdout and
    /// stderr into one pipe. `cmd` is consumed: its copies of the pipe's write end must go, or
    /// the end of the output never comes.
    pub fn spawn(mut cmd: std::process::Command) -> std::io::Result<Pumped> {
        use std::io::{BufRead, Read};
        let pipe =
            |e: std::io::Error| std::io::Error::new(e.kind(), format!("creating a pipe: {e}"));
        let (reader, writer) = std::io::pipe().map_err(pipe)?;
        let writer2 = writer.try_clone().map_err(pipe)?;
        cmd.stdout(writer).stderr(writer2);
        let child = cmd.spawn()?;
        drop(cmd);
        let (tx, lines) = std::sync::mpsc::sync_channel::<Vec<u8>>(4096);
        let pump = std::thread::spawn(move || {
            let mut r = std::io::BufReader::with_capacity(1 << 16, reader);
            loop {
                let mut line = Vec::new();
                // A line longer than this comes in pieces: a client printing without a
                // newline (progress dots, a dumped matrix) must not grow one without end.
                match (&mut r).take(MAX_LINE).read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) if tx.send(line).is_err() => break,
                    Ok(_) => {}
                }
            }
        });
        Ok(Pumped { child, lines, pump })
    }

    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// The next line, waiting at most `wait`.
    pub fn next(&self, wait: std::time::Duration) -> Heard {
        use std::sync::mpsc::RecvTimeoutError;
        match self.lines.recv_timeout(wait) {
            Ok(line) => Heard::Line(line),
            Err(RecvTimeoutError::Timeout) => Heard::Silent,
            Err(RecvTimeoutError::Disconnected) => Heard::Closed,
        }
    }

    /// Waits for the exit until `deadline` (a child may close its output and go on running);
    /// past it `kill` gets the child's id, until it is gone. Returns the status and whether
    /// `kill` was called.
    pub fn wait_until(
        &mut self,
        deadline: std::time::Instant,
        kill: &dyn Fn(u32),
    ) -> std::io::Result<(std::process::ExitStatus, bool)> {
        let mut killed = false;
        loop {
            match self.child.try_wait()? {
                Some(s) => return Ok((s, killed)),
                None if std::time::Instant::now() < deadline => {
                    std::thread::sleep(std::time::Duration::from_millis(2))
                }
                None => {
                    killed = true;
                    kill(self.child.id());
                }
            }
        }
    }

    /// What the pipe still holds once the child is gone (a kill closes it), then the pump ends.
    pub fn rest(self) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        while let Ok(line) = self
            .lines
            .recv_timeout(std::time::Duration::from_millis(200))
        {
            out.push(line);
        }
        let _ = self.pump.join();
        out
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

#[cfg(test)]
mod tests {
    use super::*;

    /// 3 MB without a newline comes through whole, in pieces no longer than [`MAX_LINE`].
    #[test]
    fn output_without_newlines_comes_in_bounded_pieces() {
        let mut cmd = std::process::Command::new("sh");
        cmd.args([
            "-c",
            "head -c 3000000 /dev/zero | tr '\\0' x; echo; echo end",
        ]);
        let mut p = Pumped::spawn(cmd).unwrap();
        let mut total = 0usize;
        let mut longest = 0usize;
        let mut last = Vec::new();
        loop {
            match p.next(std::time::Duration::from_secs(60)) {
                Heard::Line(l) => {
                    total += l.len();
                    longest = longest.max(l.len());
                    last = l;
                }
                Heard::Closed => break,
                Heard::Silent => panic!("no output for a minute"),
            }
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        p.wait_until(deadline, &|_| {}).unwrap();
        assert_eq!(total, 3_000_000 + 1 + 4);
        assert_eq!(longest as u64, MAX_LINE);
        assert_eq!(last, b"end\n");
    }
}
