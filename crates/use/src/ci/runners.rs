//! `runners.toml`: which GitHub Actions runner labels exist, what they hold, and whether a
//! runner with the label is registered today.

use std::path::Path;

use serde::Deserialize;

use crate::recipe::Resources;

pub const RUNNERS_FILE: &str = "runners.toml";
/// The shipped runners.toml, for a generator run outside the repository and for tests.
pub static EMBEDDED_RUNNERS: &str = include_str!("../../../../runners.toml");

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Hosted {
    pub label: String,
    pub disk_gib: u64,
    pub memory_gib: u64,
    pub cores: u32,
    /// Compile jobs a build runs at once: memory must hold this many peaks.
    pub jobs: u64,
    /// The longest build (in hours on this runner) that still fits the job limit.
    pub hours: f64,
    /// This runner's speed relative to the 8-core reference machine of the resource hints.
    pub speed: f64,
    /// How many jobs one build may chain here: each stops at `hours` with a signed checkpoint
    /// in the build cache, and the next job continues it.
    #[serde(default = "one")]
    pub rounds: u32,
    /// Free disk once the job removes the preinstalled SDKs (absent: `disk-gib`).
    pub freed_disk_gib: Option<u64>,
    #[serde(default = "yes")]
    pub registered: bool,
}

fn yes() -> bool {
    true
}

fn one() -> u32 {
    1
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct BuildRunner {
    pub label: String,
    pub disk_gib: u64,
    pub memory_gib: u64,
    pub cores: u32,
    pub hours: f64,
    pub registered: bool,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct GpuRunner {
    /// The GPU target, also the runner's label: `[self-hosted, linux, <target>]`.
    pub target: String,
    pub hours: f64,
    pub registered: bool,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct CacheTrust {
    /// minisign public keys (`RW…`) whose cache entries a pull accepts.
    #[serde(default)]
    pub trusted_keys: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Runners {
    #[serde(default)]
    pub cache: CacheTrust,
    pub hosted: Hosted,
    #[serde(default)]
    pub build: Vec<BuildRunner>,
    #[serde(default)]
    pub gpu: Vec<GpuRunner>,
}

#[derive(Debug, thiserror::Error)]
pub enum RunnersError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Invalid { path: String, message: String },
}

impl Runners {
    pub fn parse(path: &str, text: &str) -> Result<Runners, RunnersError> {
        let r: Runners = toml::from_str(text).map_err(|e| RunnersError::Invalid {
            path: path.into(),
            message: e.to_string(),
        })?;
        let invalid = |message: String| RunnersError::Invalid {
            path: path.into(),
            message,
        };
        if r.build.is_empty() {
            return Err(invalid(
                "at least one [[build]] runner is needed for what does not fit a hosted runner"
                    .into(),
            ));
        }
        for k in &r.cache.trusted_keys {
            let b64 = k.len() == 56
                && k.starts_with("RW")
                && k.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '='));
            if !b64 {
                return Err(invalid(format!(
                    "[cache] trusted-keys: {k:?} is not a minisign public key (RW… , 56 characters)"
                )));
            }
        }
        let mut seen = std::collections::BTreeSet::new();
        for label in r.build.iter().map(|b| b.label.as_str()).chain(
            r.gpu
                .iter()
                .map(|g| g.target.as_str())
                .chain([r.hosted.label.as_str()]),
        ) {
            if !is_label(label) {
                return Err(invalid(format!(
                    "runner label {label:?}: use letters, digits, '-', '_' and '.'"
                )));
            }
            if !seen.insert(label) {
                return Err(invalid(format!("runner label {label:?} appears twice")));
            }
        }
        Ok(r)
    }

    pub fn read(path: &Path) -> Result<Runners, RunnersError> {
        let text = std::fs::read_to_string(path).map_err(|source| RunnersError::Io {
            path: path.display().to_string(),
            source,
        })?;
        Runners::parse(&path.display().to_string(), &text)
    }

    pub fn embedded() -> Runners {
        Runners::parse("<built-in>/runners.toml", EMBEDDED_RUNNERS)
            .expect("the shipped runners.toml is valid")
    }

    /// The self-hosted build runner that takes what a hosted runner cannot.
    pub fn large(&self) -> &BuildRunner {
        &self.build[0]
    }

    /// The runner label for a component with these resource hints: the hosted label when the
    /// build fits a hosted runner, else the first build runner's.
    pub fn label_for(&self, r: &Resources) -> &str {
        let h = &self.hosted;
        let fits = r.disk_bytes <= h.freed_disk_gib.unwrap_or(h.disk_gib) << 30
            && r.memory_bytes * h.jobs <= h.memory_gib << 30
            && crate::plan::render::rounds_for(r.hours / h.speed, h.hours) <= h.rounds;
        if fits { &h.label } else { &self.large().label }
    }

    /// `--time-limit` of a hosted build job: its hours, as the flag spells them.
    pub fn hosted_time_limit(&self) -> String {
        let minutes = (self.hosted.hours * 60.0).round() as u64;
        match (minutes / 60, minutes % 60) {
            (h, 0) => format!("{h}h"),
            (0, m) => format!("{m}m"),
            (h, m) => format!("{h}h{m}m"),
        }
    }

    /// GPU targets with a registered runner.
    pub fn registered_gpus(&self) -> impl Iterator<Item = &GpuRunner> {
        self.gpu.iter().filter(|g| g.registered)
    }

    /// Labels a workflow may name besides GitHub's own: for actionlint's configuration.
    pub fn self_hosted_labels(&self) -> Vec<&str> {
        let mut v: Vec<&str> = self.build.iter().map(|b| b.label.as_str()).collect();
        v.extend(self.gpu.iter().map(|g| g.target.as_str()));
        v
    }
}

fn is_label(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::render::{HOSTED_LABEL, LARGE_LABEL, runner_label};

    #[test]
    fn shipped_runners_agree_with_the_plans_labels() {
        let r = Runners::embedded();
        assert_eq!(r.hosted.label, HOSTED_LABEL);
        assert_eq!(r.large().label, LARGE_LABEL);
        // The plan's hard-coded thresholds and runners.toml give the same label everywhere.
        for disk in [1u64, 13, 14, 15, 30, 45, 46, 60] {
            for mem in [1u64, 2, 3, 4, 5] {
                for hours in [0.1, 2.0, 2.75, 2.8, 4.5, 5.5, 11.0, 11.1] {
                    let res = Resources {
                        disk_bytes: disk << 30,
                        installed_bytes: None,
                        memory_bytes: mem << 30,
                        hours,
                    };
                    assert_eq!(r.label_for(&res), runner_label(&res), "{res:?}");
                }
            }
        }
    }

    #[test]
    fn rejects_duplicates_and_bad_labels() {
        let base = "[hosted]\nlabel = \"ubuntu-24.04\"\ndisk-gib = 14\nmemory-gib = 16\ncores = 4\njobs = 4\nhours = 5.5\nspeed = 0.5\n";
        let build = "[[build]]\nlabel = \"big\"\ndisk-gib = 1\nmemory-gib = 1\ncores = 1\nhours = 1\nregistered = false\n";
        assert!(Runners::parse("r", &format!("{base}{build}")).is_ok());
        let e = Runners::parse("r", base).unwrap_err().to_string();
        assert!(e.contains("[[build]]"), "{e}");
        let dup = format!("{base}{build}[[gpu]]\ntarget = \"big\"\nhours = 1\nregistered = true\n");
        let e = Runners::parse("r", &dup).unwrap_err().to_string();
        assert!(e.contains("twice"), "{e}");
        let bad = build.replace("big", "a b");
        let e = Runners::parse("r", &format!("{base}{bad}"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("letters"), "{e}");
        let unknown = format!("{base}{build}colour = 1\n");
        assert!(Runners::parse("r", &unknown).is_err());
    }
}
