//! The plan of an install, computed whole before anything is written: which artifacts (from
//! which URLs, with which digest and size) go into which prefix, dependencies first, and what
//! each does there (installed, replacing a version, or kept). The checks that can refuse an
//! install without downloading (URL policy, glibc floor, downgrades, the size limit, the HIP
//! runtime) run here, so `install --dry-run` refuses what the install would. [`super::execute`]
//! carries a plan out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use reqwest::Url;
use serde::Serialize;

use super::receipt::Receipt;
use super::{InstallError, LoadedIndex, Request, runtime};
use crate::arch::TargetId;
use crate::package::extract;
use crate::package::index::{Artifact, Index};
use crate::package::manifest::version_tuple;
use crate::units::format_size;

/// The `schema` of `install --dry-run --format json`.
pub const PLAN_SCHEMA: &str = "rocforge.install-plan/1";

/// What an install will do.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct InstallPlan {
    pub schema: &'static str,
    /// The index's URL, without credentials.
    pub index: String,
    /// The key that signed the index; None when unsigned and allowed.
    pub signer: Option<String>,
    /// Why an unsigned or unverified index was accepted (`--allow-unsigned`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unsigned_reason: Option<String>,
    pub prefix: PathBuf,
    /// The targets asked for, sorted; empty: any.
    pub targets: Vec<TargetId>,
    /// Dependencies first, in the order they are unpacked.
    pub steps: Vec<Step>,
    /// Bytes the installing steps download (the cached included) and unpack.
    pub download_bytes: u64,
    pub unpack_bytes: u64,
    /// Components in the prefix that the install leaves as they are.
    pub kept: Vec<String>,
    /// What planning found worth telling: the index's trust, the HIP runtime, a pending merge.
    pub notes: Vec<String>,
}

/// One artifact of the plan.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Step {
    /// What it is, as the index says.
    #[serde(flatten)]
    pub id: crate::ids::ArtifactId,
    pub action: Action,
    /// The installed version it replaces (action `replace`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replaces: Option<String>,
    /// Files the installed receipt lists that are not in the prefix (action `repair`).
    #[serde(skip_serializing_if = "is_zero")]
    pub missing: usize,
    /// Where the tarball comes from, without credentials.
    pub url: String,
    pub sha256: crate::ids::Sha256Digest,
    /// The tarball's size and what it unpacks to, in bytes.
    pub size: u64,
    pub installed_size: u64,
    /// Whether the download cache already holds the file (verified again before use).
    pub cached: bool,
    /// The URL as fetched (it may carry credentials: never shown).
    #[serde(skip)]
    pub(super) source: Url,
    /// Where the download is kept.
    #[serde(skip)]
    pub(super) download: PathBuf,
    /// The tarball's file name, for messages and its compression.
    #[serde(skip)]
    pub(super) file: String,
}

crate::carries_artifact_id!(Step);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    /// Not in the prefix: unpacked and merged in.
    Install,
    /// Another version of the component is installed: its files the new one lacks are removed.
    Replace,
    /// Installed already with the same content key: left as it is.
    Keep,
    /// Installed with the same content key, but files its receipt lists are gone (an
    /// interrupted removal, a user's `rm`): unpacked again and merged over it.
    Repair,
}

impl Step {
    pub fn changes(&self) -> bool {
        self.action != Action::Keep
    }
}

/// The plan for `req` from the checked index `loaded` into a prefix holding `existing`.
pub(super) fn make(
    loaded: &LoadedIndex,
    req: &Request<'_>,
    existing: &[Receipt],
) -> Result<InstallPlan, InstallError> {
    let mut notes = Vec::new();
    let mut chosen = resolve(&loaded.index, req.components, req.targets)?;
    runtime::add_runtime(
        &loaded.index,
        loaded.url.as_str(),
        &mut chosen,
        existing,
        req,
        &mut notes,
    )?;
    check_tests_library(&chosen, existing)?;
    if !req.allow_downgrade {
        check_downgrades(&chosen, existing)?;
    }
    let urls = artifact_urls(&loaded.url, &chosen, req.allowed_hosts)?;
    if let Some(have) = host_glibc() {
        check_glibc(&chosen, &have)?;
    }
    let dl_dir = req.cache_dir.join("artifacts");
    let steps: Vec<Step> = chosen
        .iter()
        .zip(urls)
        .map(|(a, u)| step(a, u, existing, req.prefix, &dl_dir))
        .collect();
    let todo = || steps.iter().filter(|s| s.changes());
    let unpack_bytes: u64 = todo().map(|s| s.installed_size).sum();
    if unpack_bytes > req.max_bytes {
        return Err(extract::ExtractError::TooBig {
            artifact: todo()
                .map(|s| s.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            size: unpack_bytes,
            limit: req.max_bytes,
        }
        .into());
    }
    let named: BTreeSet<&str> = steps.iter().map(|s| s.name.as_str()).collect();
    Ok(InstallPlan {
        schema: PLAN_SCHEMA,
        index: crate::download::redact_url(loaded.url.as_str()),
        signer: loaded.signer.clone(),
        unsigned_reason: loaded.unsigned_reason.clone(),
        prefix: req.prefix.to_path_buf(),
        targets: req.targets.to_vec(),
        download_bytes: todo().map(|s| s.size).sum(),
        unpack_bytes,
        kept: existing
            .iter()
            .filter(|r| !named.contains(r.name.as_str()))
            .map(|r| r.name.to_string())
            .collect(),
        steps,
        notes,
    })
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

fn step(a: &Artifact, source: Url, existing: &[Receipt], prefix: &Path, dl_dir: &Path) -> Step {
    let same = existing.iter().find(|r| r.key == a.key);
    let missing = same.map_or(0, |r| super::receipt::missing_files(prefix, r));
    let (action, replaces) = if let Some(r) = same.filter(|_| missing > 0) {
        (Action::Repair, Some(r.version.clone()))
    } else if same.is_some() {
        (Action::Keep, None)
    } else if let Some(r) = existing.iter().find(|r| r.name == a.name) {
        (Action::Replace, Some(r.version.clone()))
    } else {
        (Action::Install, None)
    };
    let file = artifact_file(&a.url);
    let download = dl_dir.join(format!(
        "{}-{file}",
        a.sha256.get(..16).unwrap_or("artifact")
    ));
    Step {
        id: a.id.clone(),
        action,
        replaces,
        missing,
        url: crate::download::redact_url(source.as_str()),
        sha256: a.sha256.clone(),
        size: a.size,
        installed_size: a.installed_size,
        cached: action != Action::Keep && download.is_file(),
        source,
        download,
        file,
    }
}

/// `<name>-tests` depends on the library build it tests (`<name>`, by key): an installed
/// `<name>` of another key is refused rather than replaced, since the point of installing a
/// test client is to test what is installed.
fn check_tests_library(chosen: &[&Artifact], existing: &[Receipt]) -> Result<(), InstallError> {
    for a in chosen {
        let Some(library) = a
            .name
            .as_str()
            .strip_suffix(crate::recipe::Recipe::TESTS_SUFFIX)
        else {
            continue;
        };
        let Some(dep) = a.depends.iter().find(|d| d.name.as_str() == library) else {
            continue;
        };
        if let Some(r) = existing.iter().find(|r| r.name.as_str() == library)
            && r.key != dep.key
        {
            return Err(InstallError::TestsLibraryMismatch {
                tests: a.name.to_string(),
                library: library.to_string(),
                wanted: format!("{} (key {})", a.version, dep.key.short()),
                installed: format!("{} (key {})", r.version, r.key.short()),
            });
        }
    }
    Ok(())
}

fn check_downgrades(chosen: &[&Artifact], existing: &[Receipt]) -> Result<(), InstallError> {
    for a in chosen {
        if let Some(r) = existing.iter().find(|r| r.name == a.name)
            && version_tuple(&a.version) < version_tuple(&r.version)
        {
            return Err(InstallError::Downgrade {
                name: a.name.to_string(),
                installed: r.version.clone(),
                offered: a.version.clone(),
            });
        }
    }
    Ok(())
}

/// Each artifact's URL, resolved against the index's; one on another origin than the index's
/// must be on a host `allowed` names (`host` or `host:port`).
fn artifact_urls(
    index: &Url,
    chosen: &[&Artifact],
    allowed: &[String],
) -> Result<Vec<Url>, InstallError> {
    let index_origin = origin(index);
    let mut urls = Vec::new();
    for a in chosen {
        let u = index.join(&a.url).map_err(|e| InstallError::Index {
            from: index.to_string(),
            message: format!("{}: bad url \"{}\": {e}", a.name, extract::shown(&a.url)),
        })?;
        let host_port = match (u.host_str(), u.port_or_known_default()) {
            (Some(h), Some(p)) => vec![h.to_string(), format!("{h}:{p}")],
            (Some(h), None) => vec![h.to_string()],
            _ => vec![],
        };
        if origin(&u) != index_origin && !host_port.iter().any(|h| allowed.contains(h)) {
            return Err(InstallError::OtherHost {
                artifact: extract::shown(&a.url),
                url: crate::download::redact_url(u.as_str()),
                index_host: index_origin.clone(),
            });
        }
        urls.push(u);
    }
    Ok(urls)
}

fn check_glibc(chosen: &[&Artifact], have: &str) -> Result<(), InstallError> {
    for a in chosen {
        if let Some(need) = &a.glibc_floor
            && version_tuple(need) > version_tuple(have)
        {
            return Err(InstallError::Glibc {
                artifact: extract::shown(&a.url),
                need: need.clone(),
                have: have.to_string(),
            });
        }
    }
    Ok(())
}

/// The artifact's file name, for the download cache and messages: the URL's last segment when
/// it is a plain file name, else a fixed one (the URL is the index's; it names no local path).
pub(super) fn artifact_file(url: &str) -> String {
    let base = url.rsplit('/').next().unwrap_or_default();
    let base = base.split(['?', '#']).next().unwrap_or_default();
    let plain = !base.is_empty()
        && base.len() <= 200
        && !base.starts_with('.')
        && base
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_' | b'+'));
    if plain {
        base.to_string()
    } else if base.ends_with(".gz") {
        "artifact.tar.gz".into()
    } else {
        "artifact.tar.zst".into()
    }
}

impl InstallPlan {
    /// The plan as text, for `install --dry-run`.
    pub fn render_text(&self) -> String {
        let mut s = format!("index   {}\n", self.index);
        match (&self.signer, &self.unsigned_reason) {
            (Some(k), _) => s += &format!("signed  by key {k}\n"),
            (None, Some(why)) => s += &format!("signed  NO: {why} (--allow-unsigned)\n"),
            (None, None) => s += "signed  NO\n",
        }
        s += &format!("prefix  {}\n", self.prefix.display());
        let targets = if self.targets.is_empty() {
            "any".to_string()
        } else {
            crate::arch::comma_list(&self.targets)
        };
        s += &format!("targets {targets}\n\n");
        for st in &self.steps {
            let action = match st.action {
                Action::Install => "install".to_string(),
                Action::Replace => {
                    format!("replace {}", st.replaces.as_deref().unwrap_or_default())
                }
                Action::Keep => "keep (installed)".to_string(),
                Action::Repair => format!("repair ({} files missing)", st.missing),
            };
            s += &format!(
                "{:<20} {:<10} {:<14} {action}\n",
                st.name,
                st.version,
                st.target_list()
            );
            if st.changes() {
                s += &format!(
                    "    from   {}{}\n    sha256 {}\n    size   {} download, {} unpacked\n",
                    st.url,
                    if st.cached { " (cached)" } else { "" },
                    st.sha256,
                    format_size(st.size),
                    format_size(st.installed_size)
                );
            }
        }
        let changing = self.steps.iter().filter(|s| s.changes()).count();
        s += &format!(
            "\n{changing} to install: {} to download, {} to unpack\n",
            format_size(self.download_bytes),
            format_size(self.unpack_bytes)
        );
        if !self.kept.is_empty() {
            s += &format!("kept in the prefix: {}\n", self.kept.join(", "));
        }
        for n in &self.notes {
            s += &format!("note: {n}\n");
        }
        s
    }
}

/// The artifacts to install for `components` on `targets` (sorted target IDs; empty = any),
/// dependencies first.
pub fn resolve<'a>(
    index: &'a Index,
    components: &[String],
    targets: &[TargetId],
) -> Result<Vec<&'a Artifact>, InstallError> {
    Resolver::new(index).resolve(components, targets)
}

/// An index's tarballs by name and by content key, made once for any number of resolutions:
/// an index comes from outside, and one search of it per dependency or per request made a
/// large one quadratic.
pub struct Resolver<'a> {
    index: &'a Index,
    /// Tarballs by name, in index order.
    by_name: BTreeMap<&'a str, Vec<&'a Artifact>>,
    /// The first tarball under each key, as a search of the index in order would find it.
    by_key: BTreeMap<&'a str, &'a Artifact>,
}

impl<'a> Resolver<'a> {
    pub fn new(index: &'a Index) -> Resolver<'a> {
        let mut by_name: BTreeMap<&str, Vec<&Artifact>> = BTreeMap::new();
        let mut by_key: BTreeMap<&str, &Artifact> = BTreeMap::new();
        // Wheels are pip's to install; a kind of a newer index is nobody's here.
        for a in index.artifacts.iter().filter(|a| a.kind.is_tarball()) {
            by_name.entry(a.name.as_str()).or_default().push(a);
            by_key.entry(a.key.as_str()).or_insert(a);
        }
        Resolver {
            index,
            by_name,
            by_key,
        }
    }

    /// As [`resolve`].
    pub fn resolve(
        &self,
        components: &[String],
        targets: &[TargetId],
    ) -> Result<Vec<&'a Artifact>, InstallError> {
        let mut order: Vec<&Artifact> = Vec::new();
        let mut seen: BTreeSet<&str> = BTreeSet::new();
        for c in components {
            let best = self.best(c, targets)?;
            self.visit(best, &mut order, &mut seen)?;
        }
        Ok(order)
    }

    /// The newest tarball of `c` for exactly `targets`, else for a superset of them.
    fn best(&self, c: &str, targets: &[TargetId]) -> Result<&'a Artifact, InstallError> {
        let candidates: &[&Artifact] = self.by_name.get(c).map_or(&[], Vec::as_slice);
        let sorted = |a: &Artifact| {
            let mut t = a.targets.clone();
            t.sort();
            t
        };
        let exact: Vec<&Artifact> = candidates
            .iter()
            .copied()
            .filter(|a| targets.is_empty() || sorted(a) == targets)
            .collect();
        let pool = if exact.is_empty() {
            candidates
                .iter()
                .copied()
                .filter(|a| targets.iter().all(|t| a.targets.contains(t)))
                .collect()
        } else {
            exact
        };
        pool.into_iter()
            .max_by(|a, b| version_tuple(&a.version).cmp(&version_tuple(&b.version)))
            .ok_or_else(|| InstallError::NotInIndex {
                component: c.to_string(),
                targets: if targets.is_empty() {
                    "any target".into()
                } else {
                    crate::arch::comma_list(targets)
                },
                available: candidates
                    .iter()
                    .map(|a| format!("{} {} for {}", a.name, a.version, a.target_list()))
                    .collect(),
                near: candidates
                    .is_empty()
                    .then(|| {
                        crate::diag::suggest(
                            c,
                            self.index.artifacts.iter().map(|a| a.name.as_str()),
                        )
                    })
                    .flatten()
                    .map(str::to_string),
            })
    }

    /// `root` after its dependencies, depth first, on a stack of our own: an index's chain of
    /// dependencies may be as long as the index is big.
    fn visit(
        &self,
        root: &'a Artifact,
        order: &mut Vec<&'a Artifact>,
        seen: &mut BTreeSet<&'a str>,
    ) -> Result<(), InstallError> {
        if !seen.insert(&root.key) {
            return Ok(());
        }
        let mut stack: Vec<(&'a Artifact, usize)> = vec![(root, 0)];
        while let Some((a, next)) = stack.last_mut() {
            let a: &'a Artifact = a;
            let Some(d) = a.depends.get(*next) else {
                order.push(a);
                stack.pop();
                continue;
            };
            *next += 1;
            let dep = self.by_key.get(d.key.as_str()).copied().ok_or_else(|| {
                InstallError::MissingDependency {
                    artifact: extract::shown(&a.url),
                    dependency: d.name.to_string(),
                    key: d.key.to_string(),
                }
            })?;
            if seen.insert(&dep.key) {
                stack.push((dep, 0));
            }
        }
        Ok(())
    }
}

/// The host's glibc version (`gnu_get_libc_version`), None on other C libraries.
pub fn host_glibc() -> Option<String> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: returns a pointer to a static NUL-terminated string.
        let p = unsafe { libc::gnu_get_libc_version() };
        if p.is_null() {
            return None;
        }
        // SAFETY: non-null, static, NUL-terminated.
        let s = unsafe { std::ffi::CStr::from_ptr(p) };
        Some(s.to_string_lossy().into_owned())
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        None
    }
}

fn origin(u: &Url) -> String {
    match u.host_str() {
        Some(h) => match u.port_or_known_default() {
            Some(p) => format!("{}://{h}:{p}", u.scheme()),
            None => format!("{}://{h}", u.scheme()),
        },
        None => format!("{}://", u.scheme()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(i: usize) -> String {
        format!("{i:064x}")
    }

    /// `n` artifacts, each depending on the next: a chain as long as an index may hold.
    fn chain(n: usize) -> Index {
        let artifacts: Vec<serde_json::Value> = (0..n)
            .map(|i| {
                let depends = if i + 1 < n {
                    serde_json::json!([{ "name": format!("c{}", i + 1), "key": key(i + 1) }])
                } else {
                    serde_json::json!([])
                };
                serde_json::json!({
                    "name": format!("c{i}"), "version": "1", "release": "debian-6.4",
                    "targets": ["gfx90c"], "key": key(i), "url": format!("c{i}.tar.zst"),
                    "size": 1, "installed_size": 1, "sha256": "a".repeat(64), "depends": depends,
                })
            })
            .collect();
        serde_json::from_value(serde_json::json!({
            "schema": "rocforge.index/1", "issued": "2026-01-01T00:00:00Z",
            "expires": "2099-01-01T00:00:00Z", "artifacts": artifacts,
        }))
        .unwrap()
    }

    /// An index is input from outside: a chain of dependencies as deep as the largest index
    /// read holds resolves, dependencies first, without running out of stack or searching the
    /// index once per dependency.
    #[test]
    fn a_chain_of_dependencies_as_deep_as_an_index_holds_resolves() {
        let n = 40_000;
        let index = chain(n);
        let bytes = serde_json::to_vec(&index).unwrap().len() as u64;
        assert!(
            bytes <= crate::package::index::MAX_INDEX_BYTES,
            "{bytes} bytes"
        );
        let order = resolve(&index, &["c0".to_string()], &[]).unwrap();
        assert_eq!(order.len(), n);
        assert_eq!(order[0].name.as_str(), format!("c{}", n - 1));
        assert_eq!(order[n - 1].name.as_str(), "c0");
    }

    /// A cycle (which no index rocforge writes has) ends: each artifact once, the one asked
    /// for last.
    #[test]
    fn a_cycle_of_dependencies_ends() {
        let mut index = chain(3);
        index.artifacts[2].depends = index.artifacts[1].depends.clone();
        index.artifacts[2].depends[0].key = index.artifacts[0].key.clone();
        let order = resolve(&index, &["c0".to_string()], &[]).unwrap();
        let names: Vec<&str> = order.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["c2", "c1", "c0"]);
    }
}
