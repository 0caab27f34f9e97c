//! Recorded KFD sysfs trees (with the /proc, /dev and amdgpu parameters `detect` reads): the
//! machines the tests point ROCFORGE_SYSFS_ROOT or `--sysfs-root` at, since the test machine
//! has no GPU of its own.

use std::path::Path;

/// One GPU's KFD node properties.
pub struct Node {
    pub version: u32,
    pub simds: u32,
    pub simd_per_cu: u32,
    pub device_id: u32,
    pub wave: u32,
    pub mem: u64,
}

/// A Renoir-class gfx90c with `mem` bytes of memory.
pub fn gfx90c(mem: u64) -> Node {
    Node {
        version: 90012,
        simds: 32,
        simd_per_cu: 4,
        device_id: 0x1636,
        wave: 64,
        mem,
    }
}

/// A machine under `root`: a CPU node, then `gpu` (when given) as node 1; `noretry` and
/// `driver` are the amdgpu module's parameter and version when given.
pub fn write_machine(root: &Path, gpu: Option<Node>, noretry: Option<&str>, driver: Option<&str>) {
    let topo = root.join("sys/class/kfd/kfd/topology/nodes");
    std::fs::create_dir_all(topo.join("0/mem_banks/0")).unwrap();
    std::fs::write(
        topo.join("0/properties"),
        "cpu_cores_count 8\nsimd_count 0\nmem_banks_count 1\ngfx_target_version 0\nvendor_id 0\ndevice_id 0\n",
    )
    .unwrap();
    std::fs::write(
        topo.join("0/mem_banks/0/properties"),
        "heap_type 0\nsize_in_bytes 16106127360\n",
    )
    .unwrap();
    if let Some(n) = gpu {
        std::fs::create_dir_all(topo.join("1/mem_banks/0")).unwrap();
        std::fs::write(
            topo.join("1/properties"),
            format!(
                "cpu_cores_count 0\nsimd_count {}\nmem_banks_count 1\ngfx_target_version {}\nsimd_per_cu {}\nwave_front_size {}\nvendor_id 4098\ndevice_id {}\ndrm_render_minor 128\n",
                n.simds, n.version, n.simd_per_cu, n.wave, n.device_id
            ),
        )
        .unwrap();
        std::fs::write(
            topo.join("1/mem_banks/0/properties"),
            format!("heap_type 1\nsize_in_bytes {}\nwidth 64\n", n.mem),
        )
        .unwrap();
        std::fs::create_dir_all(root.join("dev")).unwrap();
        std::fs::write(root.join("dev/kfd"), "").unwrap();
        std::fs::write(root.join("dev/kmsg"), "6,1,100,-;Linux version 6.1.0\n").unwrap();
    }
    std::fs::create_dir_all(root.join("proc/sys/kernel")).unwrap();
    std::fs::write(root.join("proc/sys/kernel/osrelease"), "6.1.0-28-amd64\n").unwrap();
    if let Some(nr) = noretry {
        std::fs::create_dir_all(root.join("sys/module/amdgpu/parameters")).unwrap();
        std::fs::write(
            root.join("sys/module/amdgpu/parameters/noretry"),
            format!("{nr}\n"),
        )
        .unwrap();
    }
    if let Some(v) = driver {
        std::fs::create_dir_all(root.join("sys/module/amdgpu")).unwrap();
        std::fs::write(root.join("sys/module/amdgpu/version"), format!("{v}\n")).unwrap();
    }
}

/// The recorded machines under `base`: m-gfx90c, m-gfx902, m-gfx1151 and m-none (no GPU).
pub fn machines(base: &Path) {
    write_machine(
        &base.join("m-gfx90c"),
        Some(gfx90c(512 << 20)),
        Some("1"),
        None,
    );
    write_machine(
        &base.join("m-gfx902"),
        Some(Node {
            version: 90002,
            simds: 44,
            simd_per_cu: 4,
            device_id: 0x15dd,
            wave: 64,
            mem: 1 << 30,
        }),
        Some("0"),
        Some("6.8.5"),
    );
    write_machine(
        &base.join("m-gfx1151"),
        Some(Node {
            version: 110501,
            simds: 80,
            simd_per_cu: 2,
            device_id: 0x1586,
            wave: 32,
            mem: 96 << 30,
        }),
        None,
        None,
    );
    write_machine(&base.join("m-none"), None, None, None);
}
