//! `doctor`: this machine checked against a plan before hours of work.

use crate::diag::Hint;
use serde::Serialize;

use super::runtime::{RuntimeChoice, open_runtime, runtime_image};
use super::{Error, Result, Session};
use crate::build::jobs;
use crate::catalog::Catalog;
use crate::plan::{Plan, key::RuntimeKind};
use crate::runtime::{ContainerRuntime, Kind, RuntimeError};
use crate::testrun::detect::Profile;
use crate::units::format_size;

/// The `schema` of `doctor --format json`.
pub const DOCTOR_SCHEMA: &str = "rocforge.doctor/1";

/// One check: a failed one makes `doctor` exit 1.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Check {
    pub check: String,
    pub detail: String,
    pub ok: bool,
}

/// Something worth knowing that fails nothing (builds need no GPU).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Note {
    pub check: String,
    pub detail: String,
}

/// The `rocforge.doctor/1` report.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Report {
    pub checks: Vec<Check>,
    /// This machine's GPUs, as `detect` reports them.
    pub gpu: Profile,
    pub notes: Vec<Note>,
    /// Every check passed.
    pub ok: bool,
    pub schema: &'static str,
}

fn check(name: &str, ok: bool, detail: String) -> Check {
    Check {
        check: name.into(),
        detail,
        ok,
    }
}

pub fn doctor(
    session: &Session,
    components: &[String],
    choice: Option<RuntimeChoice>,
) -> Result<Report> {
    let catalog = &session.catalog;
    let config = session.config()?;
    let (_, lock) = session.plan_inputs()?;
    let image = runtime_image(catalog, lock, config, choice, RuntimeKind::Container);
    let plan = session.plan(components, RuntimeKind::Container, image, Vec::new())?;
    let mut checks = Vec::new();
    let mut notes = Vec::new();
    match open_runtime(choice, config) {
        Ok(rt) => runtime_checks(
            rt.as_ref(),
            catalog,
            lock.image(&catalog.release.name, &catalog.release.image)
                .map(|l| l.digest.as_str()),
            &mut checks,
            &mut notes,
        ),
        Err(e) => {
            let detail = match e {
                Error::One(d) => format!("{}; {}", d.message, d.hint.unwrap_or_default()),
                Error::Diagnostics(_) => "unusable".into(),
            };
            checks.push(check("container runtime", false, detail));
        }
    }
    checks.extend(resources(session, &plan));
    // GPU checks: builds need no GPU, so these inform; `rocforge test` needs a matching one.
    let gpu = crate::testrun::detect::detect(
        std::path::Path::new("/"),
        &catalog.arches,
        std::env::var("HSA_XNACK").ok(),
    );
    notes.extend(gpu_notes(&gpu, &plan));
    Ok(Report {
        ok: checks.iter().all(|c| c.ok),
        checks,
        gpu,
        notes,
        schema: DOCTOR_SCHEMA,
    })
}

/// The runtime answers (docker: its daemon), the builder image is there or can be made, and a
/// container starts with the flags builds use: what a build needs before its first step.
fn runtime_checks(
    rt: &dyn ContainerRuntime,
    catalog: &Catalog,
    pinned: Option<&str>,
    checks: &mut Vec<Check>,
    notes: &mut Vec<Note>,
) {
    if rt.kind() == Kind::Host {
        checks.push(check(
            "container runtime",
            true,
            "none: --runtime host builds on this machine (not reproducible)".into(),
        ));
        return;
    }
    let version = match rt.version() {
        Ok(v) => v,
        Err(e) => {
            let said = match &e {
                RuntimeError::Unusable { message, .. } => message.clone(),
                other => other.to_string(),
            };
            let failure = rt.start_failure(&said);
            checks.push(check(
                "container runtime",
                false,
                format!("{e}; {}", failure.fix.unwrap_or_else(|| e.hint())),
            ));
            return;
        }
    };
    let (uid, _) = crate::runtime::container::ids();
    let rootless = if uid == 0 { "" } else { " (rootless)" };
    checks.push(check(
        "container runtime",
        true,
        format!("{version}{rootless}"),
    ));
    let image = &catalog.release.image;
    let present = rt.image_id(image);
    // The container start is tried with the builder image, else with the image it is built
    // FROM: the same runtime flags either way, which is what fails on a misconfigured host.
    let probe = match &present {
        Some(id) => {
            checks.push(check(
                "builder image",
                true,
                format!("{image} present ({})", &id[..19.min(id.len())]),
            ));
            Some(image.clone())
        }
        None => {
            let (can, how) = crate::build::image::makeable(rt, catalog, pinned);
            notes.push(Note {
                check: "builder image".into(),
                detail: format!("{image} is not present; {how}"),
            });
            if !can {
                notes.push(Note {
                    check: "builder image".into(),
                    detail: crate::build::image::advice(catalog),
                });
            }
            crate::build::image::containerfile(catalog)
                .and_then(|f| crate::runtime::debootstrap::from_of(&f.text))
                .filter(|from| rt.image_id(from).is_some())
        }
    };
    match probe {
        Some(probe) => match rt.start_check(&probe) {
            Ok(()) => checks.push(check(
                "container start",
                true,
                format!("a container of {probe} starts with the flags builds use"),
            )),
            Err(f) => checks.push(check(
                "container start",
                false,
                format!(
                    "a container of {probe} did not start with the flags builds use: {}; {}",
                    last_line(&f.message),
                    f.hint()
                ),
            )),
        },
        None => notes.push(Note {
            check: "container start".into(),
            detail:
                "not tried: no image to start yet (`rocforge build` tries it when it has made one)"
                    .into(),
        }),
    }
}

/// The runtime's last words, where it says why (podman prints the OCI error last).
fn last_line(message: &str) -> &str {
    message
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or(message)
        .trim()
}

/// Disk at the store and memory per compile job, against the plan's estimate.
fn resources(session: &Session, plan: &Plan) -> [Check; 2] {
    let root = session.store.root();
    let free = free_disk(root);
    let need = plan.estimate.disk_bytes;
    let disk = check(
        "disk",
        free.is_none_or(|f| f >= need),
        format!(
            "{} free at {}, the plan estimates {}",
            free.map_or("unknown".into(), format_size),
            root.display(),
            format_size(need)
        ),
    );
    let mem = jobs::available_memory();
    let per_job = plan.estimate.memory_per_job_bytes.max(1);
    let memory = check(
        "memory",
        mem.is_none_or(|m| m >= per_job),
        format!(
            "{} available: {} compile job(s) at {} each (of {} cores)",
            mem.map_or("unknown".into(), format_size),
            jobs::budget(jobs::cores(), mem, per_job),
            format_size(per_job),
            jobs::cores()
        ),
    );
    [disk, memory]
}

fn gpu_notes(gpu: &Profile, plan: &Plan) -> Vec<Note> {
    let mut notes = Vec::new();
    if gpu.devices.is_empty() {
        notes.push(Note {
            check: "GPU".into(),
            detail: format!(
                "none found ({}); builds need none, `rocforge test` does",
                gpu.why_none.join("; ")
            ),
        });
    }
    for d in &gpu.devices {
        let id =
            d.target_id.clone().or(d.target.clone()).unwrap_or_else(|| {
                format!("unknown (gfx_target_version {})", d.gfx_target_version)
            });
        let wanted = plan
            .targets
            .iter()
            .any(|t| Some(&t.arch) == d.target.as_ref());
        notes.push(Note {
            check: format!("GPU node {}", d.node),
            detail: format!(
                "{id}, {} CUs, {} memory{}{}",
                d.compute_units,
                d.memory,
                if wanted {
                    ", matches --arch"
                } else {
                    ", not among the planned targets"
                },
                d.nearest
                    .as_ref()
                    .map(|n| format!("; nearest supported {n}"))
                    .unwrap_or_default()
            ),
        });
    }
    notes
}

fn free_disk(path: &std::path::Path) -> Option<u64> {
    let mut p = path.to_path_buf();
    while !p.exists() {
        p = p.parent()?.to_path_buf();
    }
    let c = std::ffi::CString::new(p.to_string_lossy().as_bytes()).ok()?;
    // SAFETY: c is a valid C string; st is a valid out-pointer.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::statvfs(c.as_ptr(), &mut st) };
    (r == 0).then(|| st.f_bavail as u64 * st.f_frsize as u64)
}
