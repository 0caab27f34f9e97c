//! Any bytes as one file for `rocforge inspect`: host ELF files and their `.hip_fatbin` /
//! `.llvm.offloading` sections, static archives, plain and compressed (CCOB) offload bundles,
//! OffloadBinaries and bare AMDGPU code objects. The reader must never panic and never use
//! unbounded memory (libFuzzer's -rss_limit_mb and the allocation guard in src/lib.rs catch
//! the latter).
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;

#[global_allocator]
static ALLOC: rocforge_fuzz::Guard = rocforge_fuzz::Guard;

fuzz_target!(|data: &[u8]| {
    let (report, errors) =
        rocforge::inspect::inspect_bytes(Path::new("fuzz.bin"), "fuzz.bin", data);
    // What the CLI does with the result: every error rendered, the report listed and serialised.
    for e in &errors {
        let _ = e.to_string();
    }
    if let Some(report) = report {
        let _ = report.targets();
        let _ = serde_json::to_vec(&report);
    }
});
