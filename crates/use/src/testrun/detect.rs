//! The local GPUs, read from the KFD topology and DRM in sysfs.
//!
//! Everything is read relative to a root directory that stands for `/`, so a recorded tree
//! (`--sysfs-root DIR`) is read exactly like a live machine.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::arch::ArchTable;

pub const PROFILE_SCHEMA: &str = "rocforge.device/1";
pub const TOPOLOGY: &str = "sys/class/kfd/kfd/topology/nodes";

/// What `rocforge detect` found: the machine and each GPU node.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Profile {
    pub schema: String,
    /// `/` for this machine, or the recorded tree that was read.
    pub root: String,
    /// False when a recorded tree (`--sysfs-root`) was read: no live hardware was seen.
    pub live: bool,
    pub kernel: Option<String>,
    /// The amdgpu module's version (`/sys/module/amdgpu/version`; DKMS builds only).
    pub driver_version: Option<String>,
    pub xnack: Xnack,
    pub devices: Vec<Device>,
    /// Why there may be no GPU node; empty when one was found.
    pub why_none: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Xnack {
    /// `HSA_XNACK` as set in the environment.
    pub hsa_xnack: Option<String>,
    /// amdgpu's `noretry` parameter: 1 disables retry (no xnack), 0 enables it, -1 the default.
    pub noretry: Option<i64>,
    /// on, off, or unknown.
    pub mode: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Device {
    /// The KFD topology node number.
    pub node: u32,
    pub gfx_target_version: u32,
    /// The processor from the target table (None when the version is unknown to it).
    pub target: Option<String>,
    /// The full target ID with the xnack mode, e.g. `gfx90c:xnack-`.
    pub target_id: Option<String>,
    pub name: Option<String>,
    /// Other targets that may report as this one (the table's aliases), e.g. gfx90c on old
    /// kernels reports as gfx902.
    pub may_be: Vec<String>,
    pub compute_units: u32,
    pub simd_count: u32,
    pub simd_per_cu: u32,
    pub wavefront: Option<u32>,
    pub pci_device_id: Option<String>,
    pub drm_render_minor: Option<u32>,
    pub mem_banks: u32,
    /// `vram` for a discrete GPU's own memory, `uma` for an iGPU's carve-out of system memory.
    pub memory: String,
    pub memory_bytes: u64,
    pub nearest: Option<String>,
    /// `HSA_OVERRIDE_GFX_VERSION` of the nearest target (the spoof baseline).
    pub nearest_override: Option<String>,
    pub rocm_supported: Option<bool>,
}

/// `key value` lines of a KFD properties file.
pub fn read_properties(path: &Path) -> Option<BTreeMap<String, String>> {
    let text = std::fs::read_to_string(path).ok()?;
    Some(
        text.lines()
            .filter_map(|l| {
                let mut it = l.split_whitespace();
                Some((it.next()?.to_string(), it.next().unwrap_or("").to_string()))
            })
            .collect(),
    )
}

fn read_trim(path: &Path) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

fn num(p: &BTreeMap<String, String>, key: &str) -> u64 {
    p.get(key).and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// Reads the GPUs under `root` (normally `/`). `hsa_xnack` is the caller's `HSA_XNACK`.
pub fn detect(root: &Path, table: &ArchTable, hsa_xnack: Option<String>) -> Profile {
    let noretry = read_trim(&root.join("sys/module/amdgpu/parameters/noretry"))
        .and_then(|v| v.parse::<i64>().ok());
    let mode = match (hsa_xnack.as_deref(), noretry) {
        (_, Some(1)) => "off",
        (Some("0"), _) => "off",
        (Some("1"), Some(_)) => "on",
        (Some("1"), None) => "unknown",
        (_, Some(_)) => "off",
        _ => "unknown",
    };
    let xnack = Xnack {
        hsa_xnack,
        noretry,
        mode: mode.into(),
    };
    let topo = root.join(TOPOLOGY);
    let mut nodes: Vec<(u32, PathBuf)> = std::fs::read_dir(&topo)
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| {
                    let n = e.file_name().to_string_lossy().parse::<u32>().ok()?;
                    Some((n, e.path()))
                })
                .collect()
        })
        .unwrap_or_default();
    nodes.sort();
    let mut devices = Vec::new();
    for (node, dir) in &nodes {
        let Some(p) = read_properties(&dir.join("properties")) else {
            continue;
        };
        let version = num(&p, "gfx_target_version") as u32;
        let simd_count = num(&p, "simd_count") as u32;
        if version == 0 || simd_count == 0 {
            continue; // a CPU node
        }
        devices.push(device(*node, dir, &p, table, &xnack));
    }
    let mut why_none = Vec::new();
    if devices.is_empty() {
        why_none = reasons(root, &topo, !nodes.is_empty());
    }
    Profile {
        schema: PROFILE_SCHEMA.into(),
        root: root.display().to_string(),
        live: root == Path::new("/"),
        kernel: read_trim(&root.join("proc/sys/kernel/osrelease")),
        driver_version: read_trim(&root.join("sys/module/amdgpu/version")),
        xnack,
        devices,
        why_none,
    }
}

fn device(
    node: u32,
    dir: &Path,
    p: &BTreeMap<String, String>,
    table: &ArchTable,
    xnack: &Xnack,
) -> Device {
    let version = num(p, "gfx_target_version") as u32;
    let simd_count = num(p, "simd_count") as u32;
    let simd_per_cu = num(p, "simd_per_cu") as u32;
    let arch = table.by_kfd_version(version);
    let mut mem_banks = 0;
    let mut memory_bytes = 0;
    if let Ok(rd) = std::fs::read_dir(dir.join("mem_banks")) {
        for e in rd.flatten() {
            if let Some(bank) = read_properties(&e.path().join("properties")) {
                mem_banks += 1;
                memory_bytes += num(&bank, "size_in_bytes");
            }
        }
    }
    if mem_banks == 0 {
        mem_banks = num(p, "mem_banks_count") as u32;
    }
    let target = arch.map(|a| a.llvm.clone());
    let target_id = arch.map(|a| {
        if a.xnack && xnack.mode != "unknown" {
            format!(
                "{}:xnack{}",
                a.llvm,
                if xnack.mode == "on" { '+' } else { '-' }
            )
        } else {
            a.llvm.clone()
        }
    });
    let may_be = match &target {
        Some(t) => table
            .iter()
            .filter(|a| a.aliases.iter().any(|al| al == t))
            .map(|a| a.llvm.clone())
            .collect(),
        None => Vec::new(),
    };
    let nearest = arch.and_then(|a| a.nearest.clone());
    let igpu = arch.is_some_and(|a| a.kind == "igpu");
    Device {
        node,
        gfx_target_version: version,
        name: arch.map(|a| a.name.clone()),
        target_id,
        target,
        may_be,
        compute_units: simd_count.checked_div(simd_per_cu).unwrap_or(0),
        simd_count,
        simd_per_cu,
        wavefront: p.get("wave_front_size").and_then(|v| v.parse().ok()),
        pci_device_id: p
            .get("device_id")
            .and_then(|v| v.parse::<u32>().ok())
            .map(|d| format!("1002:{d:04x}")),
        drm_render_minor: p.get("drm_render_minor").and_then(|v| v.parse().ok()),
        mem_banks,
        memory: if igpu { "uma" } else { "vram" }.into(),
        memory_bytes,
        nearest_override: nearest
            .as_ref()
            .and_then(|n| table.get(n))
            .map(|a| a.hsa_override()),
        nearest,
        rocm_supported: arch.map(|a| a.rocm_supported),
    }
}

/// Why no GPU node was found, most likely first.
fn reasons(root: &Path, topo: &Path, topology_present: bool) -> Vec<String> {
    let mut why = Vec::new();
    let kfd = root.join("dev/kfd");
    if !topology_present {
        why.push(format!(
            "no KFD topology at {}: the amdgpu driver is not loaded, or the kernel was built without HSA_AMD (KFD)",
            topo.display()
        ));
    } else {
        why.push(
            "the KFD topology lists only CPU nodes: the GPU is not registered with KFD".into(),
        );
    }
    why.push(
        "a Raven (gfx902) kernel built without IOMMUv2 support (CONFIG_AMD_IOMMU_V2) exposes no KFD node for the GPU: older kernels registered Raven with KFD only through IOMMUv2; use a kernel built with it, or a newer one that no longer needs it"
            .into(),
    );
    if !kfd.exists() {
        why.push(format!(
            "{} does not exist: no process can reach the GPU through ROCm (amdgpu not loaded, or a container started without --device /dev/kfd)",
            kfd.display()
        ));
    }
    if !kfd.exists() || !accessible(&kfd) {
        why.push(
            "no /dev/kfd access: ROCm needs read-write access to /dev/kfd and /dev/dri/renderD*; add yourself to the render and video groups (`sudo usermod -aG render,video $USER`, then log in again); in a container pass --device /dev/kfd --device /dev/dri --group-add video --group-add render"
                .into(),
        );
    }
    why
}

fn accessible(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: access() only reads the NUL-terminated path.
    unsafe { libc::access(c.as_ptr(), libc::R_OK | libc::W_OK) == 0 }
}
