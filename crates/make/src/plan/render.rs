//! The plan as people and machines read it: a table, versioned JSON, GitHub Actions matrices.

use std::fmt::Write;

use serde::Serialize;

use super::{Plan, Reason, Status, Step};
use crate::recipe::Resources;
use crate::units::{format_duration, format_hours, format_size};

pub const MATRIX_SCHEMA: &str = "rocforge.github-matrix/1";
/// GitHub Actions refuses a matrix with more entries than this.
pub const MATRIX_MAX: usize = 256;

/// GitHub-hosted Linux runners: about 14 GB of free disk, 16 GB of memory, 4 CPUs and a
/// 6-hour job limit. Resource hints are for an 8-core reference machine, so hours double.
const HOSTED_DISK: u64 = 14 << 30;
/// Free disk once the job removes the preinstalled SDKs a ROCm build does not use (.NET,
/// Android, Haskell, CodeQL): what a bigger build may count on (runners.toml `freed-disk-gib`).
const HOSTED_FREED_DISK: u64 = 45 << 30;
const HOSTED_MEMORY: u64 = 16 << 30;
const HOSTED_JOBS: u64 = 4;
const HOSTED_HOURS: f64 = 5.5;
/// How many hosted jobs one build may take: each stops at [`HOSTED_HOURS`] and pushes a signed
/// checkpoint that the next job continues (runners.toml `[hosted] rounds`).
const HOSTED_ROUNDS: u32 = 4;
pub const HOSTED_LABEL: &str = "ubuntu-24.04";
pub const LARGE_LABEL: &str = "rocforge-large";

/// Where a component builds in the release workflow, and in how many chained jobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Placement {
    pub runner: &'static str,
    /// Jobs the build may take on its runner: more than one on a hosted runner whose job limit
    /// is shorter than the build.
    pub rounds: u32,
    /// The hosted job removes the preinstalled SDKs first: the build needs more disk than a
    /// hosted runner has free.
    pub free_disk: bool,
}

/// A build goes to a hosted runner when its disk and memory fit one and its time fits at most
/// [`HOSTED_ROUNDS`] of its jobs; otherwise to the large self-hosted runner, in one job.
pub fn placement(r: &Resources) -> Placement {
    let fits = r.disk_bytes <= HOSTED_FREED_DISK && r.memory_bytes * HOSTED_JOBS <= HOSTED_MEMORY;
    let rounds = rounds_for(r.hours * 2.0, HOSTED_HOURS);
    if fits && rounds <= HOSTED_ROUNDS {
        Placement {
            runner: HOSTED_LABEL,
            rounds,
            free_disk: r.disk_bytes > HOSTED_DISK,
        }
    } else {
        Placement {
            runner: LARGE_LABEL,
            rounds: 1,
            free_disk: false,
        }
    }
}

/// Jobs of `limit` hours that `hours` of building take (at least one).
pub fn rounds_for(hours: f64, limit: f64) -> u32 {
    ((hours / limit).ceil() as u32).max(1)
}

pub fn runner_label(r: &Resources) -> &'static str {
    placement(r).runner
}

pub fn status_text(s: &Step) -> String {
    match &s.status {
        Status::Cached => "cached".into(),
        Status::Build {
            reason: Reason::New,
        } => "build (new)".into(),
        Status::Build {
            reason: Reason::Changed { inputs },
        } => format!(
            "build ({} changed)",
            inputs
                .iter()
                .map(|i| input_words(i))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// A changed input in words (the JSON plan keeps the dotted path): `component.patches` is the
/// recipe's patches, `dependencies.rocrand` the build of rocrand.
fn input_words(input: &str) -> String {
    if let Some(field) = input.strip_prefix("component.") {
        return match field {
            "source_tree" => "source files".into(),
            "derive_vars" => "derived files' values".into(),
            other => other.replace('_', " "),
        };
    }
    match input.strip_prefix("dependencies.") {
        Some(dep) => format!("{dep}'s build"),
        None => input.to_string(),
    }
}

/// A step's direct dependencies for the plan table: `rocprim, tensile (build)`, where
/// "(build)" marks one needed only to build it (not installed with it); `-` for none.
fn needs_text(s: &Step) -> String {
    if s.depends.is_empty() {
        return "-".into();
    }
    s.depends
        .iter()
        .map(|d| {
            if s.build_only.contains(d) {
                format!("{d} (build)")
            } else {
                d.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

pub fn text(plan: &Plan) -> String {
    let mut out = String::new();
    header_text(&mut out, plan);
    out.push('\n');
    table_text(&mut out, plan);
    estimate_text(&mut out, plan);
    out
}

/// What is built, for which targets, in which builder image and its flavours.
fn header_text(out: &mut String, plan: &Plan) {
    let targets: Vec<String> = plan.targets.iter().map(|t| t.to_string()).collect();
    let _ = writeln!(
        out,
        "Plan for {} on {} (release {}, {} runtime)",
        if plan.whole_release {
            format!("all {} components", plan.requested.len())
        } else {
            plan.requested.join(", ")
        },
        targets.join(", "),
        plan.release,
        match plan.runtime {
            super::key::RuntimeKind::Container => "container",
            super::key::RuntimeKind::Host => "host",
        }
    );
    let _ = writeln!(
        out,
        "Builder image {}{}",
        plan.image.reference,
        match (&plan.image.digest, &plan.image.built_from) {
            (None, Some(inputs)) => {
                format!(" built from {inputs} (its Containerfile and base)")
            }
            (Some(d), _) if plan.image.local || plan.image.runtime_id => {
                format!(" @ {d} (local image ID)")
            }
            (Some(d), _) => format!(" @ {d}"),
            (None, None) => " (digest not pinned)".into(),
        }
    );
    // Flavours of it, each with the components built in it.
    let mut flavours: std::collections::BTreeMap<&str, (&super::key::ImageRef, Vec<&str>)> =
        Default::default();
    for s in &plan.steps {
        let Some(image) = &s.image else { continue };
        flavours
            .entry(image.reference.as_str())
            .or_insert((image, Vec::new()))
            .1
            .push(s.component.as_str());
    }
    for (reference, (image, components)) in flavours {
        let _ = writeln!(
            out,
            "  and {reference}{} for {}",
            match &image.built_from {
                Some(inputs) => format!(" built from {inputs} (its Containerfile and the above)"),
                None => " (not pinned: the builder image above is not)".into(),
            },
            components.join(", ")
        );
    }
    if !plan.sources_locked {
        let _ = writeln!(out, "Sources are named by tag, not yet pinned to commits.");
    }
}

/// One row per step, columns padded to the widest cell.
fn table_text(out: &mut String, plan: &Plan) {
    let rows: Vec<[String; 7]> = plan
        .steps
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let mut flags: Vec<String> = s.gpu_flags.cmake.clone();
            flags.extend(s.gpu_flags.env.iter().map(|(k, v)| format!("{k}={v}")));
            [
                (i + 1).to_string(),
                s.component.to_string(),
                s.version.clone(),
                s.key.short().to_string(),
                status_text(s),
                if flags.is_empty() {
                    "(no GPU code)".into()
                } else {
                    flags.join(" ")
                },
                needs_text(s),
            ]
        })
        .collect();
    // The dependency list is last: the longest (torch's), it would otherwise pad every row.
    let header = [
        "#",
        "component",
        "version",
        "key",
        "status",
        "GPU flags",
        "needs",
    ];
    let mut widths = header.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row.iter()) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: [&str; 7]| {
        let mut l = format!("{:>w$}", cells[0], w = widths[0]);
        for (i, c) in cells.iter().enumerate().skip(1) {
            let _ = write!(l, "  {c:<w$}", w = widths[i]);
        }
        l.trim_end().to_string()
    };
    let _ = writeln!(out, "{}", line(header));
    for row in &rows {
        let _ = writeln!(out, "{}", line(row.each_ref().map(String::as_str)));
    }
}

/// The resource estimate, and what this machine measured before.
fn estimate_text(out: &mut String, plan: &Plan) {
    let e = &plan.estimate;
    out.push('\n');
    let _ = writeln!(
        out,
        "{} to build, {} cached. Estimate from resource hints (8-core reference machine):",
        e.components_to_build, e.components_cached
    );
    let measured = match e.disk_measured_components {
        0 => String::new(),
        n => format!("; {n} of {} as measured here", e.components_to_build),
    };
    let _ = writeln!(
        out,
        "  disk    {} at most at once (what every build installs, and the {} largest build directories{measured})",
        format_size(e.disk_bytes),
        super::SIDE_BY_SIDE
    );
    let _ = writeln!(
        out,
        "  memory  {} per compile job (-j N needs N times this)",
        format_size(e.memory_per_job_bytes)
    );
    let _ = writeln!(
        out,
        "  time    {} of builds, {} along the critical path",
        format_hours(e.build_hours_total),
        format_hours(e.build_hours_critical_path)
    );
    if let Some(secs) = e.measured_secs {
        let _ = writeln!(
            out,
            "  here    {} for the {} of {} built on this machine before (their last build, scaled to {} target(s))",
            format_duration(secs.round() as u64),
            e.measured_components,
            e.components_to_build,
            plan.targets.len()
        );
    }
}

pub fn json(plan: &Plan) -> String {
    serde_json::to_string_pretty(plan).expect("plan is plain data") + "\n"
}

/// One build job: a component to build, on which runner.
#[derive(Serialize, schemars::JsonSchema)]
pub struct MatrixEntry<'a> {
    pub component: &'a str,
    /// The plan's targets, as `--arch` takes them.
    pub targets: String,
    /// The content key the build makes.
    pub key: &'a str,
    /// The runner label the job runs on.
    pub runner: &'static str,
    /// Chained jobs the build may take (1: one job finishes it).
    pub rounds: u32,
    /// The hosted job frees disk first (removes the preinstalled SDKs).
    pub free_disk: bool,
}

/// A GitHub Actions matrix.
#[derive(Serialize, schemars::JsonSchema)]
pub struct MatrixInclude<'a> {
    pub include: Vec<MatrixEntry<'a>>,
}

/// The jobs of one dependency level (or of one part of a level).
#[derive(Serialize, schemars::JsonSchema)]
pub struct MatrixLevel<'a> {
    /// Built after every lower level.
    pub level: usize,
    /// Position of this list within its level when a level needs more than one job.
    pub part: usize,
    pub matrix: MatrixInclude<'a>,
}

/// What `plan --format github-matrix` prints: the release workflow's build jobs.
#[derive(Serialize, schemars::JsonSchema)]
pub struct MatrixDoc<'a> {
    pub schema: &'static str,
    pub release: &'a str,
    pub levels: Vec<MatrixLevel<'a>>,
}

/// One `include` list per dependency level, holding only what must be built: a matrix cannot
/// order its entries, so each level is its own job. Empty levels are left out and a level
/// with more than [`MATRIX_MAX`] entries is split into parts.
pub fn github_matrix(plan: &Plan) -> String {
    let targets = crate::arch::comma_list(&plan.targets);
    let max_level = plan.steps.iter().map(|s| s.level).max().unwrap_or(0);
    let mut levels = Vec::new();
    for level in 0..=max_level {
        let entries: Vec<MatrixEntry> = plan
            .steps
            .iter()
            .filter(|s| s.level == level && s.needs_build())
            .map(|s| {
                let p = placement(&s.resources);
                MatrixEntry {
                    component: &s.component,
                    targets: targets.clone(),
                    key: &s.key,
                    runner: p.runner,
                    rounds: p.rounds,
                    free_disk: p.free_disk,
                }
            })
            .collect();
        let mut entries = entries.into_iter().peekable();
        let mut part = 0;
        while entries.peek().is_some() {
            let include: Vec<MatrixEntry> = entries.by_ref().take(MATRIX_MAX).collect();
            levels.push(MatrixLevel {
                level,
                part,
                matrix: MatrixInclude { include },
            });
            part += 1;
        }
    }
    let doc = MatrixDoc {
        schema: MATRIX_SCHEMA,
        release: &plan.release,
        levels,
    };
    serde_json::to_string_pretty(&doc).expect("matrix is plain data") + "\n"
}

/// The hash input of one step, pretty-printed: the answer to "why this key?".
pub fn explain(step: &Step) -> String {
    let mut out = format!("{} {}\nkey {}\n", step.component, step.version, step.key);
    if !step.build_only.is_empty() {
        // The hash input lists every dependency alike: which are build-only is the recipe's
        // word, read again whenever the entry is packaged.
        let _ = writeln!(
            out,
            "build-only {} (built and mounted like the others, never installed with it)",
            step.build_only.join(", ")
        );
    }
    out.push('\n');
    out += &serde_json::to_string_pretty(&step.hash_input).expect("hash input is plain data");
    out.push('\n');
    out
}
