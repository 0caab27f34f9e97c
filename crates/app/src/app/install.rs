//! `install`: components and their dependencies from a signed release index into a prefix,
//! and what each installed library carries for its targets.

use crate::diag::Hint;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use super::{Error, Options, Result};
use crate::arch::TargetId;
use crate::catalog::config::Config;
use crate::diag::Diagnostics;
use crate::download::DownloadOptions;
use crate::install::{self, InstallError, InstallPlan, RuntimeCheck};
use crate::progress::Reporter;
use crate::source::cache::Cache;

mod report;

pub use report::{INSTALL_SCHEMA, Report};

/// What `rocforge install` was asked, as written on the command line.
#[derive(Debug, Clone, Default)]
pub struct Request<'a> {
    pub components: &'a [String],
    /// The index location [default: $ROCFORGE_INDEX, then the config's [install] index, then
    /// the project's newest release].
    pub from: Option<&'a str>,
    /// [default: [`default_prefix`]]
    pub prefix: Option<&'a Path>,
    pub allow_unsigned: bool,
    pub allow_downgrade: bool,
    /// The longest one artifact's download may take: `600`, `90m`, `3h`.
    pub timeout: Option<&'a str>,
    /// Hosts besides the index's that may serve artifacts.
    pub allow_host: &'a [String],
    /// Public keys trusted besides the built-in and configured ones.
    pub keys: &'a [String],
    /// The most to unpack, e.g. `64GiB`.
    pub max_size: Option<&'a str>,
    pub runtime: RuntimeCheck,
}

/// How an install ended.
pub enum Installed {
    Done(Outcome),
    /// Interrupted before anything in the prefix changed.
    Stopped {
        prefix: PathBuf,
    },
}

pub struct Outcome {
    pub prefix: PathBuf,
    pub report: install::Report,
    /// Installed libraries without native code for one of their targets, with what that means.
    pub not_native: Vec<NotNative>,
}

#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct NotNative {
    pub component: crate::ids::ComponentName,
    /// What it carries for the target instead, and what running it there takes.
    pub advice: String,
}

/// `$ROCFORGE_PREFIX`, else ~/.local/rocforge.
pub fn default_prefix() -> PathBuf {
    if let Some(p) = std::env::var_os("ROCFORGE_PREFIX") {
        return PathBuf::from(p);
    }
    std::env::var_os("HOME")
        .map(|h| PathBuf::from(h).join(".local/rocforge"))
        .unwrap_or_else(|| PathBuf::from("rocforge"))
}

/// The built-in keys, rocforge.toml's `[trust] keys`, then `extra` (base64 or .pub files).
pub fn trusted_keys(options: &Options, extra: &[String]) -> Result<Vec<crate::sign::PublicKey>> {
    let config = Config::load(options.root.base_dir().as_deref()).map_err(Error::Diagnostics)?;
    keys_of(&config, extra)
}

/// [`trusted_keys`] with the configuration at hand.
pub fn keys_of(config: &Config, extra: &[String]) -> Result<Vec<crate::sign::PublicKey>> {
    let sign_err = <Error as From<crate::sign::SignError>>::from;
    let mut keys = crate::sign::trusted_keys(&config.trust_keys).map_err(sign_err)?;
    for k in extra {
        keys.push(crate::sign::public_from_arg(k).map_err(sign_err)?);
    }
    Ok(keys)
}

/// A directory or file of this machine, as against a URL: the indexes local keys are trusted for.
fn is_local(location: &str) -> bool {
    !location.contains("://") || location.starts_with("file://")
}

/// The keys [`trust_locally`] recorded: none when the file does not exist.
pub fn local_keys() -> Result<Vec<crate::sign::PublicKey>> {
    let Some(path) = crate::catalog::config::local_keys_file() else {
        return Ok(Vec::new());
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => {
            return Err(Error::hinted(
                format!("{}: {e}", path.display()),
                "check its permissions, or delete it to trust no local key",
            ));
        }
    };
    let mut keys = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        keys.push(crate::sign::parse_public(line).map_err(|e| {
            Error::hinted(
                format!("{}:{}: {e}", path.display(), n + 1),
                "each line is a public key (RW…) or a # comment; delete the line to stop trusting it",
            )
        })?);
    }
    Ok(keys)
}

/// Records `public_key` as trusted for installs from local directories (`--from DIR`), so a
/// user's own packages install without flags; never for a URL. Returns the file, which the
/// user edits to undo it. A key already there is not written twice.
pub fn trust_locally(public_key: &str, key_id: &str, secret: &Path) -> Result<PathBuf> {
    let path = crate::catalog::config::local_keys_file().ok_or_else(|| {
        Error::hinted(
            "no configuration directory: neither XDG_CONFIG_HOME nor HOME is set",
            "set HOME, or pass --key PUB to `rocforge install` instead",
        )
    })?;
    let failed = |e: std::io::Error| {
        Error::hinted(
            format!("{}: {e}", path.display()),
            "check the permissions of the configuration directory",
        )
    };
    let old = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            "# Public keys trusted for `rocforge install --from DIR` (local indexes) only, never for a URL.\n# Written by `rocforge key generate`; delete a key's lines to stop trusting it.\n".to_string()
        }
        Err(e) => return Err(failed(e)),
    };
    if old.lines().any(|l| l.trim() == public_key) {
        return Ok(path);
    }
    let text = format!(
        "{old}# key {key_id}, secret key {}\n{public_key}\n",
        secret.display()
    );
    crate::fsutil::write_atomic(&path, text.as_bytes()).map_err(failed)?;
    Ok(path)
}

/// `600`, `600s`, `90m`, `3h`; at least one second.
fn parse_duration(s: &str) -> Option<std::time::Duration> {
    let s = s.trim();
    let (n, unit) = match s.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => (&s[..i], &s[i..]),
        None => (s, "s"),
    };
    let n: u64 = n.parse().ok()?;
    let secs = match unit {
        "s" => n,
        "m" => n.checked_mul(60)?,
        "h" => n.checked_mul(3600)?,
        _ => return None,
    };
    (secs > 0).then(|| std::time::Duration::from_secs(secs))
}

/// The library's request for `req`: the index chosen (flag, environment, config, default),
/// the prefix made absolute, the trusted keys, targets, limits; with the hint for an index
/// that cannot be read.
fn prepare<'a>(
    options: &Options,
    req: &Request<'a>,
    reporter: &dyn Reporter,
) -> Result<Prepared<'a>> {
    let config = Config::load(options.root.base_dir().as_deref()).map_err(Error::Diagnostics)?;
    let env = std::env::var(install::origin::INDEX_ENV).ok();
    let choice = install::origin::choose(
        req.from,
        env.as_deref(),
        config
            .install_index
            .as_ref()
            .map(|(i, f)| (i.as_str(), f.as_str())),
    );
    let mut allowed_hosts = req.allow_host.to_vec();
    allowed_hosts.extend(choice.implied_hosts());
    let prefix = req
        .prefix
        .map(Path::to_path_buf)
        .unwrap_or_else(default_prefix);
    let prefix = std::path::absolute(&prefix).unwrap_or(prefix);
    // Read as every command reads --arch: a typo or a trailing comma is an error that says
    // so, not a target no artifact has.
    let mut targets: Vec<TargetId> = match options.arch.as_deref() {
        Some(list) => {
            let mut d = crate::diag::Diagnostics::default();
            let table = crate::catalog::load_arches(&options.root, &mut d)?;
            if !d.is_empty() {
                return Err(Error::Diagnostics(d));
            }
            table
                .resolve_list(list)
                .map_err(|e| Error::hinted(format!("--arch {list}: {e}"), e.hint()))?
        }
        None => Vec::new(),
    };
    targets.sort();
    targets.dedup();
    let max_bytes = match req.max_size {
        Some(s) => crate::units::parse_size(s)
            .ok_or_else(|| Error::hinted(format!("--max-size {s}: not a size"), "e.g. 64GiB"))?,
        None => install::DEFAULT_MAX_BYTES,
    };
    let mut download = DownloadOptions::default();
    if let Some(t) = req.timeout {
        download.deadline = parse_duration(t).ok_or_else(|| {
            Error::hinted(
                format!("--timeout {t}: not a duration"),
                "seconds, or a number with s, m or h: 600, 90m, 3h",
            )
        })?;
    }
    if req.allow_unsigned {
        reporter.note(
            "WARNING: --allow-unsigned: a missing or bad index signature will NOT stop this install",
        );
    }
    Ok(Prepared {
        components: req.components,
        from: choice.location.clone(),
        index_hint: choice.hint(),
        prefix,
        keys: {
            let mut keys = keys_of(&config, req.keys)?;
            if is_local(&choice.location) {
                keys.extend(local_keys()?);
            }
            keys
        },
        targets,
        allowed_hosts,
        max_bytes,
        download,
        allow_unsigned: req.allow_unsigned,
        allow_downgrade: req.allow_downgrade,
        runtime: req.runtime,
    })
}

/// What [`prepare`] worked out, owned, for the library's [`install::Request`].
struct Prepared<'a> {
    components: &'a [String],
    from: String,
    index_hint: String,
    prefix: PathBuf,
    keys: Vec<crate::sign::PublicKey>,
    targets: Vec<TargetId>,
    allowed_hosts: Vec<String>,
    max_bytes: u64,
    download: DownloadOptions,
    allow_unsigned: bool,
    allow_downgrade: bool,
    runtime: RuntimeCheck,
}

impl Prepared<'_> {
    fn request<'r>(&'r self, stop: &'r AtomicBool) -> install::Request<'r> {
        install::Request {
            components: self.components,
            targets: &self.targets,
            from: &self.from,
            prefix: &self.prefix,
            allow_unsigned: self.allow_unsigned,
            allow_downgrade: self.allow_downgrade,
            allowed_hosts: &self.allowed_hosts,
            keys: &self.keys,
            cache_dir: Cache::default_root(),
            max_bytes: self.max_bytes,
            download: self.download.clone(),
            runtime: self.runtime,
            stop,
        }
    }

    fn error(&self, e: InstallError) -> Error {
        match e {
            e @ InstallError::Index { .. } => Error::hinted(&e, &self.index_hint),
            // Nothing published (or nothing reachable): what to do instead is to build it.
            InstallError::NotPublished { .. } | InstallError::Unreachable { .. } => {
                let build = install::build_it_yourself(self.components, &self.targets);
                let cause = if matches!(e, InstallError::Unreachable { .. }) {
                    "check the network (DNS, a proxy: HTTPS_PROXY), or build it here"
                } else {
                    "build it here"
                };
                Error::hinted(&e, format!("{cause}: {build}; {}", self.index_hint))
            }
            e => Error::hinted(&e, e.hint()),
        }
    }
}

pub fn install(
    options: &Options,
    req: &Request<'_>,
    reporter: &dyn Reporter,
    stop: &AtomicBool,
) -> Result<Installed> {
    let prepared = prepare(options, req, reporter)?;
    let report = match install::install(&prepared.request(stop), reporter) {
        Err(InstallError::Stopped) => {
            return Ok(Installed::Stopped {
                prefix: prepared.prefix,
            });
        }
        r => r.map_err(|e| prepared.error(e))?,
    };
    let not_native = not_native(options, &report);
    Ok(Installed::Done(Outcome {
        prefix: prepared.prefix,
        report,
        not_native,
    }))
}

/// `install --dry-run`: what [`install`] would do, with nothing downloaded or written.
pub fn plan(options: &Options, req: &Request<'_>, reporter: &dyn Reporter) -> Result<InstallPlan> {
    let prepared = prepare(options, req, reporter)?;
    let never = AtomicBool::new(false);
    install::plan(&prepared.request(&never)).map_err(|e| prepared.error(e))
}

/// The advice follows what each artifact carries, as its build's coverage gate recorded it.
fn not_native(options: &Options, report: &install::Report) -> Vec<NotNative> {
    let mut d = Diagnostics::default();
    let table = crate::catalog::load_arches(&options.root, &mut d)
        .ok()
        .filter(|_| d.is_empty());
    let mut out = Vec::new();
    for r in &report.installed {
        if let Some(d) = &r.declined {
            out.push(NotNative {
                component: r.name.clone(),
                advice: format!(
                    "declines {} by design ({}): its consumers fall back to {} there",
                    r.target_list(),
                    d.reason,
                    d.fallback
                ),
            });
            continue;
        }
        for (target, nearest) in &r.not_native {
            let advice = match table.as_ref().and_then(|t| t.get(nearest)) {
                Some(n) if !nearest.is_empty() => format!(
                    "carries {nearest} code only for {target}: it runs there only with HSA_OVERRIDE_GFX_VERSION={}",
                    n.hsa_override()
                ),
                _ if !nearest.is_empty() => format!("carries {nearest} code only for {target}"),
                _ => format!("carries no code for {target}: its GPU functions fail there"),
            };
            out.push(NotNative {
                component: r.name.clone(),
                advice,
            });
        }
    }
    out
}
