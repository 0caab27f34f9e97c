//! `gc`: the source cache's trees that the catalog no longer produces, and the build
//! directories stopped builds left. Planned whole first
//! (`--dry-run` lists the plan), then removed one by one.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::{Error, Options, Result};
use crate::arch::TargetId;
use crate::catalog::Catalog;
use crate::catalog::config::Config;
use crate::catalog::lock::Lockfile;
use crate::download::DownloadOptions;
use crate::source::cache::Cache;
use crate::source::prepare::{self, Sources};
use crate::source::resolved::Resolved;

/// A source tree no release line produces any more.
pub struct Unused {
    pub key: String,
    pub dir: PathBuf,
    /// `release/component`, as the tree's source.json records it.
    pub what: String,
}

pub struct Plan {
    pub unused: Vec<Unused>,
    /// Staging directories of unfinished fetches.
    pub stale: Vec<PathBuf>,
    /// Build directories kept for resuming a stopped build, by content key: tens of GiB for
    /// rocBLAS, and a gc is the user asking for the disk back.
    pub builds: Vec<(String, PathBuf)>,
    pub kept: usize,
}

pub fn plan(options: &Options) -> Plan {
    let cache = Cache::new(Cache::default_root());
    let mut unused = Vec::new();
    let mut kept = 0usize;
    let mut catalogs: BTreeMap<String, Option<(Catalog, Lockfile, Config)>> = BTreeMap::new();
    for (key, dir) in cache.source_entries() {
        let meta: serde_json::Value = std::fs::read(dir.join("source.json"))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        let release = meta["release"].as_str().unwrap_or_default().to_string();
        let component = meta["component"].as_str().unwrap_or_default();
        let targets: Vec<TargetId> = meta["targets"]
            .as_array()
            .map(|a| a.iter().filter_map(|t| t.as_str()?.parse().ok()).collect())
            .unwrap_or_default();
        let inputs = catalogs.entry(release.clone()).or_insert_with(|| {
            let c = Catalog::load(options.root.clone(), Some(&release)).ok()?;
            let l = c.root.lockfile().ok()?;
            let cfg = Config::load(c.root.base_dir().as_deref()).ok()?;
            Some((c, l, cfg))
        });
        // Kept unless we can prove the catalog no longer produces it.
        let overlay = meta["overlays"].is_array();
        let referenced = inputs.as_ref().is_some_and(|(c, l, cfg)| {
            produced(&cache, (c, l, cfg), component, &targets, &key, overlay)
        });
        if referenced {
            kept += 1;
        } else {
            unused.push(Unused {
                key,
                dir,
                what: format!("{release}/{component}"),
            });
        }
    }
    Plan {
        unused,
        stale: cache.stale_staging(),
        builds: crate::build::resume::leftovers(&cache.root().join("builds")).unwrap_or_default(),
        kept,
    }
}

/// Whether the catalog still produces the tree `key` for `component` and `targets`: patched,
/// pristine (a dev checkout's) or with an overlay (`overlay`); true when that cannot be worked
/// out offline.
fn produced(
    cache: &Cache,
    (catalog, lock, config): (&Catalog, &Lockfile, &Config),
    component: &str,
    targets: &[TargetId],
    key: &str,
    overlay: bool,
) -> bool {
    let Some(recipe) = catalog.get(component) else {
        return false;
    };
    let reporter = crate::progress::Silent;
    let s = Sources {
        catalog,
        config,
        cache,
        overlays: &[],
        locked: false,
        reporter: &reporter,
        download: DownloadOptions::default(),
        offline: true,
    };
    let pristine = super::dev::pristine(recipe);
    let plan = |r: &crate::recipe::Recipe| {
        let resolved = Resolved::of(catalog, lock, r)?;
        prepare::source_plan(&s, r, &resolved, targets)
    };
    match (plan(recipe), plan(&pristine)) {
        (Ok(a), Ok(b)) => a.key == key || b.key == key || overlay,
        _ => true,
    }
}

/// Removes one unused tree.
pub fn remove(u: &Unused) -> Result<()> {
    crate::fsutil::remove_tree(&u.dir).map_err(|e| {
        Error::hinted(
            format!("cannot remove {}: {e}", u.dir.display()),
            "check permissions",
        )
    })
}
