//! The run journal: one JSON line per finished test, appended and synced to disk at once, so
//! that a killed runner (or a machine a GPU hang took down) loses at most the running test.
//! `--resume` reads it back and continues.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::classify::{Class, Outcome};
use crate::ids::ComponentName;

pub const JOURNAL_SCHEMA: &str = "rocforge.journal/1";

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum Record {
    /// The first line: what this run is.
    Start {
        schema: String,
        component: ComponentName,
        key: String,
        arch: String,
        spoofed: bool,
        shards: u32,
        started: u64,
    },
    /// One test's end.
    Test(TestRecord),
    /// A shard ran to its end (the client exited with no test left to run).
    Shard {
        shard: u32,
        exit_code: Option<i32>,
        signal: Option<i32>,
        attempts: u32,
        seconds: f64,
    },
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TestRecord {
    pub shard: u32,
    pub name: String,
    pub outcome: Outcome,
    pub class: Option<Class>,
    pub duration_ms: u64,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub excerpt: String,
    /// Which start of the shard's client ran it (1 for the first).
    pub attempt: u32,
}

pub struct Journal {
    file: File,
    pub path: PathBuf,
}

#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("journal {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("the journal {path} is of another run ({theirs}); this run is {ours}")]
    Mismatch {
        path: String,
        theirs: String,
        ours: String,
    },
    #[error("{path} holds an unfinished run")]
    Unfinished { path: String },
    #[error("there is no journal to resume at {path}")]
    Missing { path: String },
}

impl crate::diag::Hint for JournalError {
    fn hint(&self) -> String {
        match self {
            JournalError::Io { .. } => "check free disk space and permissions of --out".into(),
            JournalError::Mismatch { .. } => {
                "resume with the same component, --arch and --spoof, or choose another --out".into()
            }
            JournalError::Unfinished { .. } => {
                "`--resume` continues it; remove the directory (or choose another --out) to start over"
                    .into()
            }
            JournalError::Missing { .. } => {
                "run without --resume to start; --out must name the earlier run's directory".into()
            }
        }
    }
}

fn describe(r: &Record) -> String {
    match r {
        Record::Start {
            component,
            key,
            arch,
            spoofed,
            ..
        } => format!(
            "{component} {}{} for {arch}{}",
            &key[..12.min(key.len())],
            "…",
            if *spoofed { " (spoofed)" } else { "" }
        ),
        _ => "?".into(),
    }
}

fn same_run(a: &Record, b: &Record) -> bool {
    match (a, b) {
        (
            Record::Start {
                component: c1,
                key: k1,
                arch: a1,
                spoofed: s1,
                shards: n1,
                ..
            },
            Record::Start {
                component: c2,
                key: k2,
                arch: a2,
                spoofed: s2,
                shards: n2,
                ..
            },
        ) => c1 == c2 && k1 == k2 && a1 == a2 && s1 == s2 && n1 == n2,
        _ => false,
    }
}

/// Reads a journal, dropping a torn last line (a kill mid-write) from the file as well.
pub fn read(path: &Path) -> Result<Vec<Record>, JournalError> {
    let err = |source| JournalError::Io {
        path: path.display().to_string(),
        source,
    };
    let bytes = std::fs::read(path).map_err(err)?;
    let mut records = Vec::new();
    let mut good = 0;
    for line in bytes.split_inclusive(|b| *b == b'\n') {
        if !line.ends_with(b"\n") {
            break;
        }
        match serde_json::from_slice::<Record>(line) {
            Ok(r) => {
                records.push(r);
                good += line.len();
            }
            Err(_) => break,
        }
    }
    if good < bytes.len() {
        let f = OpenOptions::new().write(true).open(path).map_err(err)?;
        f.set_len(good as u64).map_err(err)?;
        f.sync_all().map_err(err)?;
    }
    Ok(records)
}

impl Journal {
    /// Starts a new journal (refusing to overwrite an unfinished one) or, with `resume`,
    /// reopens the existing one for the same run and returns what it holds.
    pub fn open(
        path: &Path,
        start: &Record,
        resume: bool,
    ) -> Result<(Journal, Vec<Record>), JournalError> {
        let err = |source| JournalError::Io {
            path: path.display().to_string(),
            source,
        };
        let p = path.display().to_string();
        let mut previous = Vec::new();
        if path.exists() {
            previous = read(path)?;
            if !resume {
                let done = previous
                    .iter()
                    .filter(|r| matches!(r, Record::Shard { .. }))
                    .count() as u32;
                let shards = match previous.first() {
                    Some(Record::Start { shards, .. }) => *shards,
                    _ => 0,
                };
                if done < shards {
                    return Err(JournalError::Unfinished { path: p });
                }
                previous.clear();
                std::fs::remove_file(path).map_err(err)?;
            } else if let Some(first) = previous.first()
                && !same_run(first, start)
            {
                return Err(JournalError::Mismatch {
                    path: p,
                    theirs: describe(first),
                    ours: describe(start),
                });
            }
        } else if resume {
            return Err(JournalError::Missing { path: p });
        }
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(err)?;
        }
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(err)?;
        let mut j = Journal {
            file,
            path: path.to_path_buf(),
        };
        if previous.is_empty() {
            j.append(start)?;
            crate::fsutil::sync_dir(path.parent().unwrap_or(Path::new(".")));
        }
        Ok((j, previous))
    }

    /// Appends one record and syncs it to disk before returning.
    pub fn append(&mut self, r: &Record) -> Result<(), JournalError> {
        let mut line = serde_json::to_vec(r).expect("plain data");
        line.push(b'\n');
        let err = |source| JournalError::Io {
            path: self.path.display().to_string(),
            source,
        };
        self.file.write_all(&line).map_err(err)?;
        self.file.sync_data().map_err(err)
    }
}

/// What to run after Ctrl-C to continue a test run journaled in `out` (given as the user gave
/// it, None for the default directory).
pub fn resume_command(
    component: &str,
    target: &str,
    spoof: bool,
    out: Option<&std::path::Path>,
) -> String {
    let mut cmd = format!("rocforge test {component} --arch {target}");
    if spoof {
        cmd.push_str(" --spoof");
    }
    if let Some(out) = out {
        cmd.push_str(&format!(
            " --out {}",
            crate::process::shell_quote(&out.display().to_string())
        ));
    }
    cmd + " --resume"
}
