//! What every use case starts from: the catalog of one release line and what goes with it,
//! loaded once.

use crate::diag::Hint;
use std::path::PathBuf;
use std::sync::Arc;

use super::{Error, Result};
use crate::arch::TargetId;
use crate::catalog::Overlay;
use crate::catalog::config::Config;
use crate::catalog::lock::Lockfile;
use crate::catalog::{Catalog, CatalogError, CatalogRoot};
use crate::diag::Diagnostic;
use crate::download::DownloadOptions;
use crate::plan::StoreView;
use crate::plan::{self, Plan, key::RuntimeKind};
use crate::progress::Reporter;
use crate::recipe::Recipe;
use crate::source::cache::Cache;
use crate::source::prepare::Sources;
use crate::store::Store;

/// Where the inputs come from: the global flags of the command line.
#[derive(Debug, Clone)]
pub struct Options {
    pub root: CatalogRoot,
    /// The release line [default: the newest that is no preview, i.e. built and recorded].
    pub release: Option<String>,
    /// The store [default: [`Store::default_root`]].
    pub store: Option<PathBuf>,
    /// GPU targets as a comma list [default: the release's].
    pub arch: Option<String>,
    /// Refuse any input that rocforge.lock does not pin.
    pub locked: bool,
}

impl Options {
    pub fn store(&self) -> Store {
        Store::open(self.store.clone().unwrap_or_else(Store::default_root))
    }
}

/// One release line's catalog with its targets, lock and configuration. Those three are loaded
/// when the session opens but their errors surface only when a use case asks for them, in the
/// order it asks: `plan` needs no rocforge.toml, `image build` no targets.
pub struct Session {
    pub options: Options,
    pub catalog: Catalog,
    targets: Result<Vec<TargetId>>,
    /// Said the first time the targets are asked for (the detected GPU), not by commands that
    /// never use them.
    targets_note: Option<String>,
    noted: std::sync::atomic::AtomicBool,
    lock: Result<Lockfile>,
    config: Result<Config>,
    pub store: Store,
    /// The source cache.
    pub cache: Cache,
    pub reporter: Arc<dyn Reporter>,
}

impl Session {
    pub fn open(options: Options, reporter: Arc<dyn Reporter>) -> Result<Session> {
        let catalog = Catalog::load(options.root.clone(), options.release.as_deref())?;
        let (targets, targets_note) = match targets(&catalog, options.arch.as_deref()) {
            Ok((t, note)) => (Ok(t), note),
            Err(e) => (Err(e), None),
        };
        let lock = catalog
            .root
            .lockfile()
            .map_err(|e| Error::hinted(&e, e.hint()));
        let config = Config::load(catalog.root.base_dir().as_deref()).map_err(Error::Diagnostics);
        Ok(Session {
            store: options.store(),
            cache: Cache::new(Cache::default_root()),
            options,
            catalog,
            targets,
            targets_note,
            noted: std::sync::atomic::AtomicBool::new(false),
            lock,
            config,
            reporter,
        })
    }

    /// The same inputs for another release line.
    pub fn for_release(&self, release: &str) -> Result<Session> {
        let options = Options {
            release: Some(release.to_string()),
            ..self.options.clone()
        };
        Session::open(options, self.reporter.clone())
    }

    /// `--arch`, else the release's default targets.
    pub fn targets(&self) -> Result<&[TargetId]> {
        if let Some(note) = &self.targets_note
            && !self.noted.swap(true, std::sync::atomic::Ordering::Relaxed)
        {
            self.reporter.note(note);
        }
        self.targets.as_deref().map_err(Clone::clone)
    }

    pub fn lock(&self) -> Result<&Lockfile> {
        self.lock.as_ref().map_err(Clone::clone)
    }

    /// rocforge.toml beside the catalog.
    pub fn config(&self) -> Result<&Config> {
        self.config.as_ref().map_err(Clone::clone)
    }

    /// rocforge.toml, or the defaults when it does not load (for commands that only ask the
    /// runtime about an image; a build reports the error).
    pub fn config_or_default(&self) -> Config {
        self.config.clone().unwrap_or_default()
    }

    /// The built-in keys, rocforge.toml's `[trust] keys`, then `extra` (`--key` arguments).
    pub fn trusted_keys(&self, extra: &[String]) -> Result<Vec<crate::sign::PublicKey>> {
        super::install::keys_of(self.config()?, extra)
    }

    pub fn recipe(&self, name: &str) -> Result<&Recipe> {
        self.catalog
            .get(name)
            .ok_or_else(|| self.catalog.unknown_component(name).into())
    }

    /// `--overlay COMPONENT:PATH=DIR` specs, each naming a component of the catalog.
    pub fn overlays(&self, specs: &[String]) -> Result<Vec<Overlay>> {
        specs
            .iter()
            .map(|spec| {
                let o = Overlay::parse(spec)?;
                if self.catalog.get(&o.component).is_none() {
                    return Err(self.catalog.unknown_component(&o.component).into());
                }
                Ok(o)
            })
            .collect()
    }

    /// What fetching and preparing sources needs, with the session's lock and configuration.
    pub fn sources<'a>(&'a self, overlays: &'a [Overlay], offline: bool) -> Result<Sources<'a>> {
        Ok(Sources {
            catalog: &self.catalog,
            config: self.config()?,
            cache: &self.cache,
            overlays,
            locked: self.options.locked,
            reporter: self.reporter.as_ref(),
            download: DownloadOptions::default(),
            offline,
        })
    }

    /// The plan for `components` (the whole line when empty) against the session's store.
    pub fn plan(
        &self,
        components: &[String],
        runtime: RuntimeKind,
        runtime_image: plan::RuntimeImage,
        overlays: Vec<Overlay>,
    ) -> Result<Plan> {
        let targets = self.targets()?;
        self.plan_for_targets(components, targets, runtime, runtime_image, overlays)
    }

    /// The plan of `components` for `targets` rather than the session's own.
    pub fn plan_for_targets(
        &self,
        components: &[String],
        targets: &[TargetId],
        runtime: RuntimeKind,
        runtime_image: plan::RuntimeImage,
        overlays: Vec<Overlay>,
    ) -> Result<Plan> {
        let lock = self.lock()?;
        let req = plan::Request {
            components: components.to_vec(),
            targets: targets.to_vec(),
            runtime,
            runtime_image,
            lock: lock.clone(),
            overlays,
        };
        Ok(plan::plan(&self.catalog, &req, &self.store)?)
    }

    /// What the runtime says of the builder image for a plan's keys, with rocforge.toml's
    /// arguments when it loads (for commands that read the store and build nothing).
    pub fn default_runtime_image(&self, kind: RuntimeKind) -> Result<plan::RuntimeImage> {
        let (_, lock) = self.plan_inputs()?;
        Ok(super::runtime::runtime_image(
            &self.catalog,
            lock,
            &self.config_or_default(),
            None,
            kind,
        ))
    }

    /// The targets and the lock, whose errors come in that order.
    pub fn plan_inputs(&self) -> Result<(&[TargetId], &Lockfile)> {
        Ok((self.targets()?, self.lock()?))
    }

    /// The plan of `components` as built before: refuses to go on when any step it delivers
    /// ([`Plan::delivered`]) is not in the store, naming the build command that would produce it (`package` and `image create` read
    /// store entries, never build). The overlays the build was given (`overlay_specs`,
    /// COMPONENT:PATH=DIR) are part of the content keys, so they are given here too.
    pub fn built_plan(
        &self,
        components: &[String],
        runtime: RuntimeKind,
        overlay_specs: &[String],
    ) -> Result<Plan> {
        let image = self.default_runtime_image(runtime)?;
        let overlays = self.overlays(overlay_specs)?;
        let plan = self.plan(components, runtime, image, overlays)?;
        let missing: Vec<&str> = plan
            .delivered()
            .into_iter()
            .filter(|s| !self.store.contains(&s.key))
            .map(|s| s.component.as_str())
            .collect();
        if missing.is_empty() {
            return Ok(plan);
        }
        let arch = crate::arch::comma_list(&plan.targets);
        // Built, but from other inputs: most often a build given --overlay, which is part of
        // the key, or a recipe edited since.
        let others: Vec<String> = self
            .store
            .entries()
            .into_iter()
            .filter(|e| {
                missing.contains(&e.component.as_str())
                    && e.release == self.catalog.release.name
                    && e.targets == plan.targets
            })
            .map(|e| format!("{} {}", e.component, &e.key.as_str()[..12]))
            .collect();
        let runtime = if plan.runtime == RuntimeKind::Host {
            " --runtime host"
        } else {
            ""
        };
        let elsewhere = if others.is_empty() {
            String::new()
        } else {
            format!(
                "; the store holds {} for {arch} from other inputs ({}): a build given --overlay \
                 is found only with the same --overlay, and an edited recipe needs a new build",
                if others.len() == 1 {
                    "a build"
                } else {
                    "builds"
                },
                others.join(", ")
            )
        };
        Err(Diagnostic::new(format!(
            "not in the store for {arch}: {}",
            missing.join(", ")
        ))
        .hint(format!(
            "build first: rocforge build {} --arch {arch}{runtime}{}{elsewhere}",
            components.join(" "),
            overlay_specs
                .iter()
                .map(|o| format!(" --overlay {o}"))
                .collect::<String>()
        ))
        .into())
    }
}

/// Where this machine's KFD topology is read for the default target: `/`, or the recorded tree
/// `ROCFORGE_SYSFS_ROOT` names (as `--sysfs-root` does for `detect` and `test`).
pub const SYSFS_ROOT_ENV: &str = "ROCFORGE_SYSFS_ROOT";

/// The GPU this machine has, when the catalog's target table knows it: what a build without
/// `--arch` is for. The first such device, by KFD node.
fn detected_target(catalog: &Catalog) -> Option<(TargetId, u32)> {
    let root = std::env::var_os(SYSFS_ROOT_ENV).map(PathBuf::from);
    let profile = super::test::profile(&catalog.arches, root.as_deref());
    profile.devices.iter().find_map(|d| {
        let t: TargetId = d.target.as_deref()?.parse().ok()?;
        catalog.arches.get(&t.arch)?;
        Some((t, d.node))
    })
}

/// The targets, and what to say about them when they are the detected GPU's.
fn targets(catalog: &Catalog, arch: Option<&str>) -> Result<(Vec<TargetId>, Option<String>)> {
    match arch {
        None => {
            if let Some((t, node)) = detected_target(catalog) {
                let note = format!(
                    "target {t}: the GPU of this machine (KFD node {node}); --arch builds for others (the line's: {})",
                    crate::arch::comma_list(&catalog.release.arches)
                );
                return Ok((vec![t], Some(note)));
            }
            if catalog.release.arches.is_empty() {
                return Err(Diagnostic::new(format!(
                    "no --arch given and release {} names no default targets",
                    catalog.release.name
                ))
                .hint("pass --arch gfx90c (or a comma list)")
                .into());
            }
            Ok((catalog.release.arches.clone(), None))
        }
        Some(list) => catalog
            .arches
            .resolve_list(list)
            .map(|t| (t, None))
            .map_err(|e| Error::hinted(format!("--arch {list}: {e}"), e.hint())),
    }
}

/// The release lines a command covers: `release`, else every line of the catalog (at least one).
pub fn release_names(root: &CatalogRoot, release: Option<&str>) -> Result<Vec<String>> {
    let releases = match release {
        Some(r) => vec![r.to_string()],
        None => root.releases().map_err(|source| CatalogError::Io {
            path: root.describe(),
            source,
        })?,
    };
    if releases.is_empty() {
        return Err(CatalogError::NoReleases {
            root: root.describe(),
        }
        .into());
    }
    Ok(releases)
}
