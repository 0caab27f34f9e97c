//! Any bytes as a wheel for `rocforge inspect`: the zip directory, each member's header, its
//! deflate stream and CRC, then each member that can hold GPU code inspected as a file. The
//! reader must never panic and never use unbounded memory, whatever sizes the headers declare
//! (libFuzzer's -rss_limit_mb and the allocation guard in src/lib.rs catch the latter).
#![no_main]

use std::io::Cursor;
use std::path::Path;

use libfuzzer_sys::fuzz_target;

#[global_allocator]
static ALLOC: rocforge_fuzz::Guard = rocforge_fuzz::Guard;

fuzz_target!(|data: &[u8]| {
    let (reports, errors) =
        rocforge::inspect::wheel::walk(Cursor::new(data), Path::new("fuzz.whl"), "fuzz.whl");
    for e in &errors {
        let _ = e.to_string();
    }
    for report in &reports {
        let _ = report.targets();
        let _ = serde_json::to_vec(report);
    }
});
