//! rocforge's own configuration: `rocforge.toml` at the catalog root, then the user's
//! `~/.config/rocforge/config.toml` (or the file `ROCFORGE_CONFIG` names), later files winning.
//!
//! ```toml
//! [mirrors]                       # URL prefixes to mirrors, for air-gapped machines and tests
//! "https://github.com/ROCm/" = "file:///srv/mirror/ROCm/"
//!
//! [runtime]                       # extra container runtime arguments some hosts need
//! podman = ["--runtime", "runc"]  # before the subcommand
//! podman-run = ["--ulimit", "nofile=20000:20000"]   # after `podman run`
//!
//! [trust]                         # public keys (minisign `RW…` lines) whose signatures install accepts
//! keys = ["RWQ…"]
//!
//! [install]                       # where `rocforge install` looks without --from or ROCFORGE_INDEX
//! index = "https://example.org/rocforge/rocm-6.4.4/"
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::diag::reader::{self, TableReader};
use crate::diag::{Diagnostic, Diagnostics, SourceFile};

pub const CATALOG_CONFIG: &str = "rocforge.toml";

#[derive(Debug, Clone, Default)]
pub struct Config {
    /// URL prefix → replacement prefix. The longest matching prefix wins.
    pub mirrors: BTreeMap<String, String>,
    /// Extra runtime arguments: `[runtime] podman = [...]` (before the subcommand),
    /// `podman-run = [...]` (after `run`), and the same for docker.
    pub podman_args: Vec<String>,
    pub podman_run_args: Vec<String>,
    pub docker_args: Vec<String>,
    pub docker_run_args: Vec<String>,
    /// Public keys trusted for signed indexes and artifacts (`[trust] keys`), added to the
    /// built-in project key; later files add to earlier ones.
    pub trust_keys: Vec<String>,
    /// `[install] index`: the release index `rocforge install` uses by default, and the file
    /// that set it (the last one wins).
    pub install_index: Option<(String, String)>,
    /// The files that were read, in order, for `--verbose` and error messages.
    pub files: Vec<PathBuf>,
}

impl Config {
    /// Reads the catalog's config (if any) and the user's, the user's overriding.
    pub fn load(catalog_root: Option<&Path>) -> Result<Config, Diagnostics> {
        let mut config = Config::default();
        let mut d = Diagnostics::default();
        let mut files = Vec::new();
        if let Some(root) = catalog_root {
            files.push(root.join(CATALOG_CONFIG));
        }
        match std::env::var_os("ROCFORGE_CONFIG") {
            Some(p) => {
                let p = PathBuf::from(p);
                if !p.is_file() {
                    d.push(
                        Diagnostic::new(format!(
                            "ROCFORGE_CONFIG names {}, which does not exist",
                            p.display()
                        ))
                        .hint("point ROCFORGE_CONFIG at a TOML file, or unset it"),
                    );
                }
                files.push(p);
            }
            None => {
                if let Some(dir) = user_config_dir() {
                    files.push(dir.join("rocforge/config.toml"));
                }
            }
        }
        for path in files {
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            let file = SourceFile::new(super::display_path(&path), text);
            config.merge(&file, &mut d);
            config.files.push(path);
        }
        if d.is_empty() { Ok(config) } else { Err(d) }
    }

    fn merge(&mut self, file: &std::sync::Arc<SourceFile>, d: &mut Diagnostics) {
        let Some(doc) = reader::parse(file, d) else {
            return;
        };
        let mut r = TableReader::new(file, &doc, "");
        if let Some(mirrors) = r.opt_str_map("mirrors", d) {
            for (from, to) in mirrors {
                if !has_scheme(&from) || !has_scheme(&to) {
                    d.push(
                        Diagnostic::new(format!(
                            "mirror \"{from}\" = \"{}\" must map one URL prefix to another",
                            to.value
                        ))
                        .at(file, to.span.clone(), "expected a URL with a scheme")
                        .hint("e.g. \"https://github.com/ROCm/\" = \"file:///srv/mirror/ROCm/\""),
                    );
                    continue;
                }
                self.mirrors.insert(from, to.value);
            }
        }
        if let Some(mut rt) = r.opt_table("runtime", d) {
            let list = |rt: &mut TableReader<'_, '_>,
                        key: &'static str,
                        d: &mut Diagnostics|
             -> Option<Vec<String>> {
                rt.opt_str_list(key, d)
                    .map(|v| v.into_iter().map(|s| s.value).collect())
            };
            if let Some(v) = list(&mut rt, "podman", d) {
                self.podman_args = v;
            }
            if let Some(v) = list(&mut rt, "podman-run", d) {
                self.podman_run_args = v;
            }
            if let Some(v) = list(&mut rt, "docker", d) {
                self.docker_args = v;
            }
            if let Some(v) = list(&mut rt, "docker-run", d) {
                self.docker_run_args = v;
            }
            rt.finish(d);
        }
        if let Some(mut t) = r.opt_table("trust", d) {
            if let Some(keys) = t.opt_str_list("keys", d) {
                for k in keys {
                    if crate::sign::parse_public(&k.value).is_err() {
                        d.push(
                            Diagnostic::new(format!(
                                "\"{}\" is not a minisign public key",
                                k.value
                            ))
                            .at(file, k.span.clone(), "expected the RW… line of a .pub file")
                            .hint("copy the second line of the publisher's .pub file"),
                        );
                        continue;
                    }
                    self.trust_keys.push(k.value);
                }
            }
            t.finish(d);
        }
        if let Some(mut t) = r.opt_table("install", d) {
            if let Some(index) = t.opt_str("index", d) {
                if index.value.trim().is_empty() {
                    d.push(
                        Diagnostic::new("[install] index is empty")
                            .at(file, index.span.clone(), "expected a URL or a directory")
                            .hint("a directory or URL holding index.json, or remove the key for the default"),
                    );
                } else {
                    self.install_index = Some((index.value, file.display.clone()));
                }
            }
            t.finish(d);
        }
        r.finish(d);
    }

    /// The URL to fetch instead of `url`, if a mirror covers it.
    pub fn mirror(&self, url: &str) -> Option<String> {
        self.mirrors
            .iter()
            .filter(|(from, _)| url.starts_with(from.as_str()))
            .max_by_key(|(from, _)| from.len())
            .map(|(from, to)| format!("{to}{}", &url[from.len()..]))
    }

    /// `url` with its mirror applied, or unchanged.
    pub fn resolve(&self, url: &str) -> String {
        self.mirror(url).unwrap_or_else(|| url.to_string())
    }
}

fn has_scheme(s: &str) -> bool {
    ["https://", "http://", "file://", "git://", "ssh://"]
        .iter()
        .any(|p| s.starts_with(p))
}

/// The public keys `rocforge key generate` made here, trusted for local indexes only
/// (`install --from DIR`): a file of its own, not `[trust] keys`, because those are trusted for
/// every index (a URL too) and because the user's config.toml is theirs to write, not ours.
pub fn local_keys_file() -> Option<PathBuf> {
    user_config_dir().map(|d| d.join("rocforge/local-keys.pub"))
}

fn user_config_dir() -> Option<PathBuf> {
    std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn longest_prefix_wins() {
        let mut c = Config::default();
        c.mirrors
            .insert("https://github.com/".into(), "file:///m/gh/".into());
        c.mirrors
            .insert("https://github.com/ROCm/".into(), "file:///m/rocm/".into());
        assert_eq!(
            c.resolve("https://github.com/ROCm/rocBLAS.git"),
            "file:///m/rocm/rocBLAS.git"
        );
        assert_eq!(
            c.resolve("https://github.com/x/y.git"),
            "file:///m/gh/x/y.git"
        );
        assert_eq!(c.resolve("https://example.org/z"), "https://example.org/z");
    }
}
