//! `doctor`: this machine checked against a plan before hours of work.

use serde::Serialize;

use super::runtime::{RuntimeChoice, open_runtime, runtime_image};
use super::{Error, Result, Session};
use crate::build::jobs;
use crate::plan::{Plan, key::RuntimeKind};
use crate::runtime::Kind;
use crate::testrun::detect::Profile;
use crate::units::format_size;

/// One check: a failed one makes `doctor` exit 1.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub check: String,
    pub detail: String,
    pub ok: bool,
}

/// Something worth knowing that fails nothing (builds need no GPU).
#[derive(Debug, Clone, Serialize)]
pub struct Note {
    pub check: String,
    pub detail: String,
}

/// The `rocforge.doctor/1` report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub checks: Vec<Check>,
    pub gpu: Profile,
    pub notes: Vec<Note>,
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
    match open_runtime(choice, config) {
        Ok(rt) => {
            let version = rt.version().unwrap_or_default();
            let (uid, _) = crate::runtime::container::ids();
            let rootless = if uid == 0 { "" } else { " (rootless)" };
            checks.push(check(
                "container runtime",
                true,
                format!("{version}{rootless}"),
            ));
            let present = rt.image_id(&catalog.release.image);
            let detail = match &present {
                Some(id) => format!(
                    "{} present ({})",
                    catalog.release.image,
                    &id[..19.min(id.len())]
                ),
                None => format!(
                    "{} is not present: `rocforge build` makes it first; {}",
                    catalog.release.image,
                    crate::build::image::advice(catalog)
                ),
            };
            let ok = present.is_some() || rt.kind() == Kind::Host;
            checks.push(check("builder image", ok, detail));
        }
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
    let notes = gpu_notes(&gpu, &plan);
    Ok(Report {
        ok: checks.iter().all(|c| c.ok),
        checks,
        gpu,
        notes,
        schema: "rocforge.doctor/1",
    })
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
