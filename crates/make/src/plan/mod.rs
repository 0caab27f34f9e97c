//! The plan: which components to build for which targets, in what order, under which content
//! keys, and what it will cost. Computed whole before anything runs, against a [`StoreView`]
//! that the store implements.

pub mod key;
pub mod render;
mod store_view;

use crate::diag::Hint;
use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::arch::TargetId;
use crate::catalog::Catalog;
use crate::catalog::Overlay;
use crate::catalog::lock::Lockfile;
use crate::diag::Diagnostic;
use crate::ids::ComponentName;
use crate::recipe::{BuildSystem, Recipe, Resources};
pub use store_view::{EmptyStore, LocalImage, Measured, MeasuredDisk, StoreView};

use key::{
    BUILD_DRIVER_SCHEMA, BuildInput, ComponentInput, ContentKey, DependencyInput,
    HASH_INPUT_SCHEMA, HashInput, ImageRef, PatchInput, ReleaseInput, RuntimeKind, changed_inputs,
};

pub const PLAN_SCHEMA: &str = "rocforge.plan/1";

#[derive(Debug, Clone)]
pub struct Request {
    /// Components asked for; empty means the whole release line.
    pub components: Vec<String>,
    pub targets: Vec<TargetId>,
    pub runtime: RuntimeKind,
    /// Pins from rocforge.lock: tag commits and the builder image digest.
    pub lock: Lockfile,
    pub overlays: Vec<Overlay>,
    /// What the container runtime says of the builder image (asked only when rocforge.lock
    /// does not pin it).
    pub runtime_image: RuntimeImage,
}

/// The builder image as the local container runtime holds it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum RuntimeImage {
    /// Not asked (the lock pins the image, a host build) or no runtime on this machine.
    #[default]
    Unknown,
    /// The runtime does not hold the image.
    Absent,
    /// The runtime's image ID for the reference, and the inputs `rocforge image build` made it
    /// from (its label), if it says.
    Id { id: String, inputs: Option<String> },
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(tag = "status", rename_all = "lowercase")]
pub enum Status {
    Cached,
    Build { reason: Reason },
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Reason {
    /// The store has never held this component.
    New,
    /// The store holds an older build; these inputs differ from it.
    Changed { inputs: Vec<String> },
}

/// What reaches the component's build so that it targets the requested GPUs.
#[derive(Debug, Clone, Serialize, Default, schemars::JsonSchema)]
pub struct GpuFlags {
    pub cmake: Vec<String>,
    pub env: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Step {
    pub component: ComponentName,
    pub version: String,
    pub key: ContentKey,
    /// Dependency depth: 0 for components with no dependencies in the plan.
    pub level: usize,
    /// Direct dependencies, sorted: built before this step and mounted in its build.
    pub depends: Vec<ComponentName>,
    /// Those of `depends` needed only to build it (`build-depends`): packages do not list
    /// them as run-time dependencies, so installs leave them out. Absent when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub build_only: Vec<ComponentName>,
    #[serde(flatten)]
    pub status: Status,
    pub gpu_flags: GpuFlags,
    pub resources: Resources,
    /// For a step to build: its last build on this machine, in seconds, scaled to this plan's
    /// target count (a component with device code compiles it once per target). Absent when
    /// the store has no build of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_secs: Option<f64>,
    /// For a step to build: the disk its last build on this machine took, scaled as
    /// `measured_secs` is. Absent when the store has no build of it that recorded its disk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_disk: Option<MeasuredDisk>,
    /// The flavour of the builder image the step builds in (`[build] image`), as keys see it.
    /// Absent for a step built in the plan's `image`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<ImageRef>,
    #[serde(skip)]
    pub hash_input: HashInput,
    /// Its source's pins as this plan resolved them: what the build fetches.
    #[serde(skip)]
    pub source: crate::source::resolved::Resolved,
}

impl Step {
    pub fn needs_build(&self) -> bool {
        matches!(self.status, Status::Build { .. })
    }
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Estimate {
    pub components_to_build: usize,
    pub components_cached: usize,
    /// The most disk the builds take at once: what every build leaves in the store, and the
    /// build directories of the [`SIDE_BY_SIDE`] largest at the same time. From each step's
    /// measured disk where the store has it ([`Step::measured_disk`]), its resource hints
    /// otherwise.
    pub disk_bytes: u64,
    /// How many of the components to build have their disk from a measurement here.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub disk_measured_components: usize,
    /// The largest per-job peak among components to build: multiply by `-j`.
    pub memory_per_job_bytes: u64,
    pub build_hours_total: f64,
    /// The longest chain of dependent builds: the wall time with unlimited machines.
    pub build_hours_critical_path: f64,
    /// How many of the components to build were built on this machine before, and their
    /// measured time ([`Step::measured_secs`]) summed. Absent when none was.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub measured_components: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_secs: Option<f64>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Plan {
    pub schema: &'static str,
    pub release: String,
    pub requested: Vec<String>,
    /// True when no component was named: the plan covers the whole release line.
    pub whole_release: bool,
    pub targets: Vec<TargetId>,
    pub runtime: RuntimeKind,
    pub image: ImageRef,
    /// False while tags are not pinned to commits by a lockfile.
    pub sources_locked: bool,
    pub steps: Vec<Step>,
    pub estimate: Estimate,
}

impl Plan {
    pub fn step(&self, component: &str) -> Option<&Step> {
        self.steps.iter().find(|s| s.component == component)
    }

    /// What a package, an image or a test of this plan holds: the requested components and
    /// their run-time dependencies. Once built, only these need to stay in the store: a
    /// build-only dependency (Tensile for rocBLAS) may have been collected since.
    pub fn delivered(&self) -> Vec<&Step> {
        self.installed_with(&self.requested)
    }

    /// The steps an install of `roots` holds, in plan order: the roots and, transitively,
    /// their run-time dependencies; a build-only dependency only when it is a root itself.
    pub fn installed_with(&self, roots: &[String]) -> Vec<&Step> {
        let mut wanted: BTreeSet<&str> = BTreeSet::new();
        let mut todo: Vec<&str> = roots.iter().map(String::as_str).collect();
        while let Some(name) = todo.pop() {
            let Some(step) = self.step(name) else {
                continue;
            };
            if wanted.insert(step.component.as_str()) {
                todo.extend(
                    step.depends
                        .iter()
                        .filter(|d| !step.build_only.contains(d))
                        .map(ComponentName::as_str),
                );
            }
        }
        self.steps
            .iter()
            .filter(|s| wanted.contains(s.component.as_str()))
            .collect()
    }
}

/// Computes the plan. Errors are diagnostics about the request (unknown component).
pub fn plan(catalog: &Catalog, req: &Request, store: &dyn StoreView) -> Result<Plan, Diagnostic> {
    let expanded = catalog.expand(&req.components)?;
    let roots: Vec<&str> = if req.components.is_empty() {
        catalog.recipes.keys().map(String::as_str).collect()
    } else {
        expanded.iter().map(String::as_str).collect()
    };
    let order = closure_in_order(catalog, &roots)?;
    let image = image_ref(catalog, &req.lock, store, &req.runtime_image);
    let mut sources_locked = true;
    let arches: Vec<&str> = req.targets.iter().map(|t| t.arch.as_str()).collect();
    let mut keys: BTreeMap<&str, (ContentKey, usize)> = BTreeMap::new();
    // Each component's key as if no target were asked for, its dependencies' likewise: the key
    // of a component without device code, whose build the target set cannot change.
    let mut host_keys: BTreeMap<&str, ContentKey> = BTreeMap::new();
    let mut steps = Vec::with_capacity(order.len());
    let overlays: Vec<&Overlay> = req.overlays.iter().collect();
    for name in order {
        let r = catalog
            .get(name)
            .expect("planned components are in the catalog");
        // A processor's Tensile logic overlay that Tensile would not use as that processor's
        // is refused before anything is fetched or built.
        crate::catalog::logic::check_overlays(r, &arches, &catalog.arches, &overlays)
            .map_err(|e| Diagnostic::new(format!("{name}: {e}")).hint(e.hint()))?;
        // One list, sorted by name, whatever a dependency is needed for: the hash input
        // encodes them so, and a dependency moved from depends to build-depends keeps the key
        // (the build mounts it the same way, so its output cannot differ).
        let mut deps: Vec<&str> = r.all_depends().map(|d| d.as_str()).collect();
        deps.sort_unstable();
        let level = deps.iter().map(|d| keys[d].1 + 1).max().unwrap_or(0);
        // Resolved once, before either key: a large path tree is walked once per plan, and
        // the step carries it to the build.
        let resolved = crate::source::resolved::Resolved::of(catalog, &req.lock, r)
            .map_err(|e| Diagnostic::new(e.to_string()).hint(e.hint()))?;
        // A flavour of the builder image keys the components built in it, and them alone.
        let step_image = match &r.build.image {
            Some(f) => crate::build::flavour::image_ref(catalog, f.as_str(), &image),
            None => image.clone(),
        };
        let input_for = |targets: &[TargetId], dep_key: &dyn Fn(&str) -> String| HashInput {
            schema: HASH_INPUT_SCHEMA,
            driver: BUILD_DRIVER_SCHEMA,
            release: ReleaseInput {
                name: catalog.release.name.clone(),
                prefix: catalog.release.prefix.clone(),
            },
            image: step_image.clone(),
            runtime: req.runtime,
            component: component_input(
                catalog,
                r,
                &targets.iter().map(|t| t.arch.as_str()).collect::<Vec<_>>(),
                req,
                &resolved,
            ),
            targets: targets.to_vec(),
            dependencies: deps
                .iter()
                .map(|d| DependencyInput {
                    name: d.to_string(),
                    key: dep_key(d),
                })
                .collect(),
        };
        let host_input = input_for(&[], &|d| host_keys[d].to_string());
        host_keys.insert(name, host_input.key());
        let input = if r.build.device_code {
            input_for(&req.targets, &|d| keys[d].0.to_string())
        } else {
            host_input
        };
        if !resolved.locked() {
            sources_locked = false;
        }
        let key = input.key();
        let status = step_status(store, name, &key, &input);
        let measured = matches!(status, Status::Build { .. })
            .then(|| store.measured(name))
            .flatten();
        keys.insert(name, (key.clone(), level));
        steps.push(Step {
            component: ComponentName::checked(name),
            version: r.version.clone(),
            key,
            level,
            depends: deps.iter().map(|d| ComponentName::checked(d)).collect(),
            build_only: deps
                .iter()
                .filter(|d| r.is_build_only(d))
                .map(|d| ComponentName::checked(d))
                .collect(),
            measured_secs: measured
                .map(|m| for_targets(m.secs, m.targets, r.build.device_code, req.targets.len())),
            measured_disk: measured.and_then(|m| {
                let scale = |b: u64| {
                    for_targets(b as f64, m.targets, r.build.device_code, req.targets.len()).round()
                        as u64
                };
                m.disk.map(|d| MeasuredDisk {
                    installed_bytes: scale(d.installed_bytes),
                    build_bytes: scale(d.build_bytes),
                })
            }),
            status,
            image: r.build.image.is_some().then(|| step_image.clone()),
            gpu_flags: gpu_flags(r, &req.targets),
            resources: r.resources,
            hash_input: input,
            source: resolved,
        });
    }
    let estimate = estimate(&steps);
    let mut requested: Vec<String> = roots.iter().map(|s| s.to_string()).collect();
    requested.sort();
    Ok(Plan {
        schema: PLAN_SCHEMA,
        release: catalog.release.name.clone(),
        requested,
        whole_release: req.components.is_empty(),
        targets: req.targets.clone(),
        runtime: req.runtime,
        image,
        sources_locked,
        steps,
        estimate,
    })
}

/// Cached when the store holds `key`; else built, and why: new, or which inputs changed
/// since the store's last build of the component.
fn step_status(store: &dyn StoreView, name: &str, key: &ContentKey, input: &HashInput) -> Status {
    if store.contains(key) {
        Status::Cached
    } else {
        let reason = match store.previous(name) {
            Some(old) => Reason::Changed {
                inputs: changed_inputs(&old, &input.to_value()),
            },
            None => Reason::New,
        };
        Status::Build { reason }
    }
}

/// The builder image as keys see it: the locked digest; else, for an image `rocforge image
/// build` makes from inputs that pin it, those inputs (`built_from`), the same on every machine
/// that builds the line, whether the image is built yet or not; else the ID the local runtime
/// reports for the reference, so an image rebuilt under the same tag (by `rocforge image build`
/// or a plain `podman build`) changes every key; else, with no runtime to ask, the ID `rocforge
/// image build` recorded; else the bare reference (unpinned).
pub fn image_ref(
    catalog: &Catalog,
    lock: &Lockfile,
    store: &dyn StoreView,
    runtime: &RuntimeImage,
) -> ImageRef {
    let reference = catalog.release.image.clone();
    if let Some(i) = lock.image(&catalog.release.name, &reference) {
        return ImageRef {
            reference,
            digest: Some(i.digest.clone()),
            local: false,
            runtime_id: false,
            built_from: None,
        };
    }
    let recorded = store
        .local_image(&catalog.release.name)
        .filter(|l| l.reference == reference)
        .map(|l| l.id);
    // An image under the tag that `rocforge image build` did not make from these inputs
    // (pulled, loaded, built by hand or from another Containerfile) is what it is, whatever the
    // Containerfile says: its ID keys it. One it made says so in its label, on this machine or
    // the one it was made on, whatever this store recorded, so every machine keys it alike.
    let inputs = crate::build::image::inputs_digest(catalog);
    let foreign = matches!(runtime, RuntimeImage::Id { id, inputs: labelled }
        if recorded.as_ref() != Some(id) && (labelled.is_none() || *labelled != inputs));
    if !foreign && let Some(built_from) = inputs {
        // Built already or not, from this Containerfile or an older one: the build makes
        // (`build::image::ensure`) the image these inputs describe before it runs anything.
        return ImageRef {
            reference,
            digest: None,
            local: true,
            runtime_id: false,
            built_from: Some(built_from),
        };
    }
    match runtime {
        // `local` keeps meaning "made by `rocforge image build` here", which is what keeps an
        // entry out of shared caches; an image pulled or loaded under the tag is keyed by its
        // ID just the same, and that ID is its content, so sharing such an entry is safe.
        RuntimeImage::Id { id, .. } => ImageRef {
            reference,
            local: recorded.as_ref() == Some(id),
            digest: Some(id.clone()),
            runtime_id: true,
            built_from: None,
        },
        RuntimeImage::Absent => ImageRef {
            reference,
            digest: None,
            local: false,
            runtime_id: false,
            built_from: None,
        },
        RuntimeImage::Unknown => ImageRef {
            reference,
            local: recorded.is_some(),
            digest: recorded,
            runtime_id: false,
            built_from: None,
        },
    }
}

fn component_input(
    catalog: &Catalog,
    r: &Recipe,
    arches: &[&str],
    req: &Request,
    resolved: &crate::source::resolved::Resolved,
) -> ComponentInput {
    let patches = r
        .patches
        .series(arches.iter().copied())
        .into_iter()
        .map(|p| PatchInput {
            file: p.value.clone(),
            sha256: catalog
                .patch_digests
                .get(&(r.name.value.clone(), p.value.clone()))
                .cloned()
                .unwrap_or_default(),
        })
        .collect();
    let derivations: Vec<&crate::recipe::Derive> = r
        .derive
        .iter()
        .filter(|d| d.arches.iter().any(|a| arches.contains(&a.as_str())))
        .collect();
    ComponentInput {
        name: r.name.value.clone(),
        version: r.version.clone(),
        source: r.source.clone(),
        source_tree: resolved.tree.clone(),
        series: r.series.clone(),
        locked_commit: resolved.locked_commit().map(str::to_string),
        patches,
        build: BuildInput {
            system: r.build.system.clone(),
            arch_vars: r.build.arch_vars.clone(),
            args: r.build.args.clone(),
            arch_args: r
                .build
                .arch_args
                .iter()
                .filter(|(a, _)| arches.contains(&a.as_str()))
                .map(|(a, v)| (a.clone(), v.clone()))
                .collect(),
            env: r.build.env.clone(),
        },
        derivations: derivations.iter().map(|d| (*d).clone()).collect(),
        derive_vars: derivations
            .iter()
            .map(|d| {
                d.arches
                    .iter()
                    .filter(|a| arches.contains(&a.as_str()))
                    .map(|a| {
                        (
                            a.clone(),
                            crate::recipe::derive_vars::vars_for(a, &catalog.arches, d),
                        )
                    })
                    .collect()
            })
            .collect(),
        overlays: req
            .overlays
            .iter()
            .filter(|o| o.component == r.name.value)
            .cloned()
            .collect(),
        inputs: r.inputs.clone(),
        locked_inputs: r
            .inputs
            .iter()
            .filter(|i| i.md5.is_some())
            .filter_map(|i| match resolved.input(&i.name) {
                Some(crate::catalog::lock::InputPin::Sha256(sha)) => {
                    Some((i.name.clone(), sha.clone()))
                }
                _ => None,
            })
            .collect(),
        license_files: r.license_files.iter().map(|p| p.value.clone()).collect(),
    }
}

/// The flags exactly as the build will receive them.
pub fn gpu_flags(r: &Recipe, targets: &[TargetId]) -> GpuFlags {
    let joined = targets
        .iter()
        .map(|t| t.to_string())
        .collect::<Vec<_>>()
        .join(";");
    let mut flags = GpuFlags::default();
    match &r.build.system {
        BuildSystem::Cmake { .. } => {
            flags.cmake = r
                .build
                .arch_vars
                .iter()
                .map(|v| format!("-D{v}={joined}"))
                .collect();
            for t in targets {
                if let Some(extra) = r.build.arch_args.get(&t.arch) {
                    flags.cmake.extend(extra.iter().cloned());
                }
            }
        }
        BuildSystem::Script { .. } => {
            for v in &r.build.arch_vars {
                flags.env.insert(v.clone(), joined.clone());
            }
        }
        BuildSystem::Copy { .. } => {}
    }
    flags
}

/// The requested components and everything they need, dependencies first; among components
/// that are ready at the same time, by name, so the order never depends on hash-map luck.
/// A component that cannot be placed (in a dependency cycle, or needing one the line lacks) is
/// an error: a plan never leaves out what was asked for.
fn closure_in_order<'a>(catalog: &'a Catalog, roots: &[&str]) -> Result<Vec<&'a str>, Diagnostic> {
    let mut needed: BTreeSet<&str> = BTreeSet::new();
    let mut todo: Vec<&str> = roots.to_vec();
    while let Some(n) = todo.pop() {
        if let Some((name, r)) = catalog
            .recipes
            .get_key_value(n)
            .or_else(|| catalog.test_recipes.get_key_value(n))
            && needed.insert(name.as_str())
        {
            todo.extend(r.all_depends().map(|d| d.as_str()));
        }
    }
    let mut remaining: BTreeMap<&str, usize> = BTreeMap::new();
    let mut dependents: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for &n in &needed {
        let r = catalog
            .get(n)
            .expect("planned components are in the catalog");
        remaining.insert(n, r.all_depends().count());
        for d in r.all_depends() {
            dependents.entry(d.as_str()).or_default().push(n);
        }
    }
    let mut ready: BTreeSet<&str> = remaining
        .iter()
        .filter(|(_, c)| **c == 0)
        .map(|(n, _)| *n)
        .collect();
    let mut order = Vec::with_capacity(needed.len());
    while let Some(n) = ready.pop_first() {
        order.push(n);
        for &dep in dependents.get(n).map(Vec::as_slice).unwrap_or(&[]) {
            let c = remaining.get_mut(dep).expect("every dependent is needed");
            *c -= 1;
            if *c == 0 {
                ready.insert(dep);
            }
        }
    }
    if order.len() < needed.len() {
        let unplaced: Vec<&str> = needed
            .iter()
            .copied()
            .filter(|n| !order.contains(n))
            .collect();
        let needed_recipes: BTreeMap<String, Recipe> = unplaced
            .iter()
            .map(|n| (n.to_string(), catalog.recipes[*n].clone()))
            .collect();
        let why = match crate::catalog::find_cycles(&needed_recipes).first() {
            Some(cycle) => format!("dependency cycle: {}", cycle.join(" -> ")),
            None => format!(
                "they need components line {} does not have",
                catalog.release.name
            ),
        };
        return Err(
            Diagnostic::new(format!("cannot plan {}: {why}", unplaced.join(", ")))
                .hint("run `rocforge check`; remove one of the dependencies that close the loop"),
        );
    }
    Ok(order)
}

/// A measured build's time (or disk) for `targets` targets, from a build for `measured`: its
/// device code is compiled once per target, so the figure grows with their number (the host
/// part does not: a rough upper bound).
fn for_targets(value: f64, measured: usize, device_code: bool, targets: usize) -> f64 {
    if device_code && measured > 0 && targets > 0 {
        value * targets as f64 / measured as f64
    } else {
        value
    }
}

/// The most builds `rocforge build` runs at once (its `-j` up to 4): the disk estimate counts
/// the build directories of that many of the largest side by side.
pub const SIDE_BY_SIDE: usize = 4;

fn estimate(steps: &[Step]) -> Estimate {
    // A build's directory goes when it is committed; what it installed stays.
    let mut scratch: Vec<u64> = Vec::new();
    let mut finish: BTreeMap<&str, f64> = BTreeMap::new();
    let mut e = Estimate {
        components_to_build: 0,
        components_cached: 0,
        disk_bytes: 0,
        disk_measured_components: 0,
        memory_per_job_bytes: 0,
        build_hours_total: 0.0,
        build_hours_critical_path: 0.0,
        measured_components: 0,
        measured_secs: None,
    };
    for s in steps {
        let own = if s.needs_build() {
            s.resources.hours
        } else {
            0.0
        };
        let start = s
            .depends
            .iter()
            .map(|d| finish.get(d.as_str()).copied().unwrap_or(0.0))
            .fold(0.0, f64::max);
        finish.insert(s.component.as_str(), start + own);
        e.build_hours_critical_path = e.build_hours_critical_path.max(start + own);
        if s.needs_build() {
            e.components_to_build += 1;
            let (stays, build) = match s.measured_disk {
                Some(m) => {
                    e.disk_measured_components += 1;
                    (m.installed_bytes, m.build_bytes)
                }
                None => {
                    let r = &s.resources;
                    let stays = r.installed_bytes.unwrap_or(r.disk_bytes).min(r.disk_bytes);
                    (stays, r.disk_bytes - stays)
                }
            };
            e.disk_bytes += stays;
            scratch.push(build);
            e.memory_per_job_bytes = e.memory_per_job_bytes.max(s.resources.memory_bytes);
            e.build_hours_total += s.resources.hours;
            if let Some(m) = s.measured_secs {
                e.measured_components += 1;
                *e.measured_secs.get_or_insert(0.0) += m;
            }
        } else {
            e.components_cached += 1;
        }
    }
    scratch.sort_unstable_by(|a, b| b.cmp(a));
    e.disk_bytes += scratch.iter().take(SIDE_BY_SIDE).sum::<u64>();
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_measured_build_scales_with_the_targets_it_compiles_for() {
        assert_eq!(for_targets(100.0, 2, true, 1), 50.0);
        assert_eq!(for_targets(100.0, 2, true, 4), 200.0);
        // Built once for every target set.
        assert_eq!(for_targets(100.0, 2, false, 1), 100.0);
        // An entry that recorded no targets is taken as it is.
        assert_eq!(for_targets(7.0, 0, true, 2), 7.0);
    }

    fn plan_of(components: &[&str]) -> Plan {
        let catalog =
            Catalog::load(crate::catalog::CatalogRoot::Embedded, Some("rocm-6.4.4")).unwrap();
        let req = Request {
            components: components.iter().map(|c| c.to_string()).collect(),
            targets: vec!["gfx90c".parse().unwrap()],
            runtime: RuntimeKind::Container,
            lock: Lockfile::default(),
            overlays: Vec::new(),
            runtime_image: RuntimeImage::Unknown,
        };
        plan(&catalog, &req, &EmptyStore).unwrap()
    }

    /// What builds install stays; their build directories go when each is committed, so only
    /// the largest few that may run side by side count at once, not every one of them.
    #[test]
    fn the_disk_estimate_counts_what_stays_and_the_largest_build_directories_at_once() {
        const G: u64 = 1 << 30;
        let mut p = plan_of(&["rocsolver", "rocfft", "rocrand", "hipcub"]);
        let set = |p: &mut Plan, name: &str, disk: u64, installed: Option<u64>| {
            let s = p.steps.iter_mut().find(|s| s.component == name).unwrap();
            s.resources.disk_bytes = disk * G;
            s.resources.installed_bytes = installed.map(|i| i * G);
        };
        let all: Vec<String> = p.steps.iter().map(|s| s.component.to_string()).collect();
        for name in &all {
            set(&mut p, name, 1, Some(0));
        }
        set(&mut p, "rocblas", 10, Some(2));
        set(&mut p, "rocsolver", 6, Some(1));
        set(&mut p, "rocfft", 4, None);
        assert!(all.len() > SIDE_BY_SIDE + 1, "{all:?}");
        let e = estimate(&p.steps);
        // Stays: 2 + 1 + 4 (rocfft's whole, not split) + 0 for the rest; at once: the build
        // directories of rocblas (8), rocsolver (5) and two others (1 each).
        assert_eq!(e.disk_bytes, (2 + 1 + 4) * G + (8 + 5 + 1 + 1) * G);
        // A component in the store takes nothing more.
        p.steps
            .iter_mut()
            .find(|s| s.component == "rocblas")
            .unwrap()
            .status = Status::Cached;
        assert_eq!(
            estimate(&p.steps).disk_bytes,
            (1 + 4) * G + (5 + 1 + 1 + 1) * G
        );
        // What the last build here took wins over the hints.
        p.steps
            .iter_mut()
            .find(|s| s.component == "rocsolver")
            .unwrap()
            .measured_disk = Some(MeasuredDisk {
            installed_bytes: 3 * G,
            build_bytes: 2 * G,
        });
        let e = estimate(&p.steps);
        assert_eq!(e.disk_bytes, (3 + 4) * G + (2 + 1 + 1 + 1) * G);
        assert_eq!(e.disk_measured_components, 1);
    }

    fn names(steps: Vec<&Step>) -> Vec<&str> {
        steps.iter().map(|s| s.component.as_str()).collect()
    }

    #[test]
    fn a_build_only_dependency_is_planned_first_and_not_installed() {
        let p = plan_of(&["rocsolver"]);
        let rocblas = p.step("rocblas").unwrap();
        assert_eq!(rocblas.depends, ["tensile"]);
        assert_eq!(rocblas.build_only, ["tensile"]);
        assert_eq!(rocblas.level, p.step("tensile").unwrap().level + 1);
        assert!(p.step("rocsolver").unwrap().build_only.is_empty());
        assert_eq!(
            names(p.installed_with(&["rocsolver".into()])),
            ["rocprim", "rocblas", "rocsolver"]
        );
        // Asked for by name, it is installed like any component.
        assert_eq!(
            names(p.installed_with(&["rocblas".into(), "tensile".into()])),
            ["tensile", "rocblas"]
        );
        assert_eq!(names(p.delivered()), ["rocprim", "rocblas", "rocsolver"]);
        assert_eq!(
            names(plan_of(&["rocblas", "tensile"]).delivered()),
            ["tensile", "rocblas"]
        );
    }

    /// A cycle the catalog checks did not catch (a catalog changed after loading) is an error
    /// naming it, never a plan without the components in it.
    #[test]
    fn a_component_in_a_cycle_is_an_error_not_left_out() {
        let mut catalog =
            Catalog::load(crate::catalog::CatalogRoot::Embedded, Some("debian-6.4")).unwrap();
        catalog
            .recipes
            .get_mut("rocblas")
            .unwrap()
            .depends
            .push(crate::diag::reader::Sp::new("rocsolver".to_string(), 0..0));
        let req = Request {
            components: vec!["rocsolver".into()],
            targets: vec!["gfx90c".parse().unwrap()],
            runtime: RuntimeKind::Container,
            lock: Lockfile::default(),
            overlays: Vec::new(),
            runtime_image: RuntimeImage::Unknown,
        };
        let e = plan(&catalog, &req, &EmptyStore).unwrap_err().to_string();
        assert!(
            e.contains(
                "cannot plan rocblas, rocsolver: dependency cycle: rocblas -> rocsolver -> rocblas"
            ),
            "{e}"
        );
    }

    /// The builder image of a line that makes it from a Containerfile FROM its debootstrap
    /// base is keyed by those inputs: whichever ID the runtime reports for an image `image
    /// build` recorded, or none at all, the key is the same; an image under the tag that
    /// rocforge did not make is keyed by its ID.
    #[test]
    fn an_image_built_from_pinned_inputs_is_keyed_by_them_not_its_id() {
        struct Recorded(String);
        impl StoreView for Recorded {
            fn contains(&self, _: &str) -> bool {
                false
            }
            fn previous(&self, _: &str) -> Option<serde_json::Value> {
                None
            }
            fn local_image(&self, _: &str) -> Option<LocalImage> {
                Some(LocalImage {
                    reference: "localhost/rocforge/builder:debian-6.4".into(),
                    id: self.0.clone(),
                    inputs: None,
                    packages: Vec::new(),
                })
            }
        }
        let catalog =
            Catalog::load(crate::catalog::CatalogRoot::Embedded, Some("debian-6.4")).unwrap();
        let lock = Lockfile::default();
        let (a, b) = (
            format!("sha256:{}", "a".repeat(64)),
            format!("sha256:{}", "b".repeat(64)),
        );
        let refs = [
            image_ref(
                &catalog,
                &lock,
                &Recorded(a.clone()),
                &RuntimeImage::Id {
                    id: a.clone(),
                    inputs: None,
                },
            ),
            image_ref(
                &catalog,
                &lock,
                &Recorded(b.clone()),
                &RuntimeImage::Id {
                    id: b.clone(),
                    inputs: None,
                },
            ),
            image_ref(&catalog, &lock, &EmptyStore, &RuntimeImage::Absent),
            image_ref(
                &catalog,
                &lock,
                &Recorded(a.clone()),
                &RuntimeImage::Unknown,
            ),
        ];
        let built_from = crate::build::image::inputs_digest(&catalog).unwrap();
        // Another machine's store never recorded the image, which says what it was made from.
        let labelled = image_ref(
            &catalog,
            &lock,
            &EmptyStore,
            &RuntimeImage::Id {
                id: b.clone(),
                inputs: Some(built_from.clone()),
            },
        );
        let refs = [refs.as_slice(), &[labelled]].concat();
        for r in &refs {
            let json = serde_json::to_string(r).unwrap();
            assert_eq!(r.built_from.as_deref(), Some(built_from.as_str()), "{json}");
            assert!(!json.contains(&a) && !json.contains(&b), "{json}");
            assert_eq!(json, serde_json::to_string(&refs[0]).unwrap());
        }
        let foreign = image_ref(
            &catalog,
            &lock,
            &Recorded(a.clone()),
            &RuntimeImage::Id {
                id: b.clone(),
                inputs: None,
            },
        );
        assert_eq!(foreign.digest.as_deref(), Some(b.as_str()));
        assert!(foreign.built_from.is_none() && !foreign.local);
        // Made by `image build` from another Containerfile: its ID keys it too.
        let older = image_ref(
            &catalog,
            &lock,
            &EmptyStore,
            &RuntimeImage::Id {
                id: b.clone(),
                inputs: Some(format!("sha256:{}", "c".repeat(64))),
            },
        );
        assert_eq!(older.digest.as_deref(), Some(b.as_str()));
        assert!(older.built_from.is_none());
    }
}
