//! `lock`: pin every git tag to a commit, every md5-pinned input to a sha256 and every builder
//! image to a digest in rocforge.lock; `lock --check` compares without the network.

use crate::diag::Hint;
use std::path::PathBuf;

use super::{Error, Result};
use crate::catalog::config::Config;
use crate::catalog::lock::{self, LockedImage, LockedInput, LockedSource, Lockfile};
use crate::catalog::{Catalog, CatalogError, CatalogRoot};
use crate::diag::{Diagnostic, Diagnostics};
use crate::download::{self, DownloadOptions};
use crate::progress::Reporter;
use crate::recipe::{ExtraInput, GitRef, Recipe, Source};
use crate::source::cache::Cache;
use crate::source::git;

/// Every release line of an editable catalog with its current rocforge.lock.
struct Locking {
    base: PathBuf,
    path: PathBuf,
    catalogs: Vec<Catalog>,
    old: Lockfile,
}

impl Locking {
    fn open(root: &CatalogRoot) -> Result<Locking> {
        let Some(base) = root.base_dir() else {
            return Err(Diagnostic::new("the built-in catalog's lock is part of the binary and cannot be rewritten")
                .hint("lock an editable copy: `rocforge catalog export DIR`, then `rocforge --recipes DIR/recipes lock`")
                .into());
        };
        let releases = root.releases().map_err(|source| CatalogError::Io {
            path: root.describe(),
            source,
        })?;
        let catalogs: Vec<Catalog> = releases
            .iter()
            .map(|r| Catalog::load(root.clone(), Some(r)))
            .collect::<std::result::Result<_, _>>()?;
        let path = base.join(lock::LOCK_FILE);
        let old = Lockfile::read(&path)?;
        Ok(Locking {
            base,
            path,
            catalogs,
            old,
        })
    }
}

/// What `lock --check` found.
pub struct Checked {
    pub path: PathBuf,
    /// Each way rocforge.lock differs from the recipes; empty when it matches.
    pub problems: Vec<String>,
}

pub fn check(root: &CatalogRoot, images: bool) -> Result<Checked> {
    let l = Locking::open(root)?;
    let refs: Vec<&Catalog> = l.catalogs.iter().collect();
    Ok(Checked {
        problems: lock::check(&refs, &l.old, images),
        path: l.path,
    })
}

/// What `lock` wrote.
pub struct Written {
    pub path: PathBuf,
    /// The new lock differs from the old one.
    pub changed: bool,
    pub lock: Lockfile,
}

pub const LOCK_SCHEMA: &str = "rocforge.lock/1";
pub const LOCK_CHECK_SCHEMA: &str = "rocforge.lock-check/1";

/// `lock --format json`: where the lock is and how many pins of each kind it holds.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct WrittenReport {
    pub schema: &'static str,
    pub path: PathBuf,
    /// The new lock differs from the old one (false: the file was left as it was).
    pub changed: bool,
    /// Pinned sources (git tags to commits, tarballs to sha256).
    pub sources: usize,
    /// Builder images pinned to a digest.
    pub images: usize,
    /// md5-pinned inputs pinned to a sha256.
    pub inputs: usize,
}

impl Written {
    pub fn report(&self) -> WrittenReport {
        WrittenReport {
            schema: LOCK_SCHEMA,
            path: self.path.clone(),
            changed: self.changed,
            sources: self.lock.sources.len(),
            images: self.lock.images.len(),
            inputs: self.lock.inputs.len(),
        }
    }
}

/// `lock --check --format json`.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct CheckedReport {
    pub schema: &'static str,
    /// rocforge.lock matches the recipes.
    pub ok: bool,
    /// Each way it does not, one sentence each.
    pub problems: Vec<String>,
}

impl Checked {
    pub fn report(&self) -> CheckedReport {
        CheckedReport {
            schema: LOCK_CHECK_SCHEMA,
            ok: self.problems.is_empty(),
            problems: self.problems.clone(),
        }
    }
}

/// Resolves every pin and writes rocforge.lock; nothing is written unless everything resolved,
/// since a half-updated lock would hide drift.
pub fn update(root: &CatalogRoot, skip_images: bool, reporter: &dyn Reporter) -> Result<Written> {
    let l = Locking::open(root)?;
    let config = Config::load(Some(&l.base)).map_err(Error::Diagnostics)?;
    let pins = Pinning {
        old: &l.old,
        config: &config,
        client: download::client(),
        cache: Cache::new(Cache::default_root()),
        reporter,
    };
    let mut new = Lockfile::new();
    let mut d = Diagnostics::default();
    for c in &l.catalogs {
        let release = &c.release.name;
        for r in c.recipes.values() {
            if let Some(s) = pins.source(release, r, &mut d) {
                new.sources.push(s);
            }
        }
        for r in c.recipes.values() {
            for input in &r.inputs {
                let Some(md5) = &input.md5 else { continue };
                if let Some(i) = pins.md5_input(release, &r.name.value, input, md5, &mut d) {
                    new.inputs.push(i);
                }
            }
        }
        if lock::is_local_image(&c.release.image) {
            match lock::LockedLocalImage::current(c) {
                Some(l) => new.local_images.push(l),
                None => reporter.note(&format!(
                    "{release}: {} is built locally (`rocforge image build`) from a Containerfile this catalog does not carry, so rocforge.lock records nothing for it; builds key it by its image ID",
                    c.release.image
                )),
            }
        } else if skip_images {
            if let Some(i) = l.old.image(release, &c.release.image) {
                new.images.push(i.clone());
            }
        } else {
            match crate::oci::resolve_digest(&pins.client, &c.release.image) {
                Ok(digest) => new.images.push(LockedImage {
                    release: release.clone(),
                    reference: c.release.image.clone(),
                    digest,
                }),
                Err(e) => d.push(Diagnostic::new(format!("{release}: {e}")).hint(e.hint())),
            }
        }
    }
    if !d.is_empty() {
        return Err(Error::Diagnostics(d));
    }
    let changed = new != l.old;
    new.write(&l.path)?;
    Ok(Written {
        path: l.path,
        changed,
        lock: new,
    })
}

/// What resolving pins needs; a failure is pushed to the diagnostics and gives None.
struct Pinning<'a> {
    old: &'a Lockfile,
    config: &'a Config,
    client: reqwest::blocking::Client,
    cache: Cache,
    reporter: &'a dyn Reporter,
}

impl Pinning<'_> {
    /// A git source's commit: a tag resolved through the configured mirrors, a rev as written.
    fn source(&self, release: &str, r: &Recipe, d: &mut Diagnostics) -> Option<LockedSource> {
        let Source::Git { url, reference, .. } = &r.source else {
            return None;
        };
        let name = &r.name.value;
        let commit = match reference {
            GitRef::Rev(rev) => rev.clone(),
            GitRef::Tag(tag) => {
                let fetch_url = self.config.resolve(url);
                let task =
                    self.reporter
                        .task(&format!("resolve {release}/{name} {tag}"), None, false);
                match git::resolve_tag(&fetch_url, tag) {
                    Ok(c) => {
                        task.finish(&format!("{release}/{name}: {tag} = {}", &c[..12]));
                        c
                    }
                    Err(e) => {
                        task.finish(&format!("{release}/{name}: failed"));
                        d.push(Diagnostic::new(format!("{release}/{name}: {e}")).hint(e.hint()));
                        return None;
                    }
                }
            }
        };
        Some(LockedSource {
            release: release.to_string(),
            component: crate::ids::ComponentName::checked(name),
            git: url.clone(),
            reference: lock::ref_string(reference),
            commit,
        })
    }

    /// The lock entry of an `[[inputs]]` entry pinned by md5: the old entry when it was made
    /// for the same URL and md5 (the file is not downloaded again), else a download whose md5
    /// must match, recorded by its sha256.
    fn md5_input(
        &self,
        release: &str,
        component: &str,
        input: &ExtraInput,
        md5: &str,
        d: &mut Diagnostics,
    ) -> Option<LockedInput> {
        if let Some(l) = self.old.input(release, component, &input.name)
            && l.url == input.url
            && l.md5 == *md5
        {
            return Some(l.clone());
        }
        let fetch_url = self.config.resolve(&input.url);
        if fetch_url != input.url {
            self.reporter.note(&format!(
                "{release}/{component}: downloading input {} from mirror {fetch_url}",
                input.name
            ));
        }
        match download::download_md5(
            &self.client,
            &fetch_url,
            md5,
            &self.cache.root().join("downloads"),
            &DownloadOptions::default(),
            self.reporter,
        ) {
            Ok((_, sha256)) => Some(LockedInput {
                release: release.to_string(),
                component: crate::ids::ComponentName::checked(component),
                name: input.name.clone(),
                url: input.url.clone(),
                md5: md5.to_string(),
                sha256,
            }),
            Err(e) => {
                d.push(
                    Diagnostic::new(format!(
                        "{release}/{component}: input {} ({}): {e}",
                        input.name, input.url
                    ))
                    .hint(e.hint()),
                );
                None
            }
        }
    }
}
