//! Shared by the fuzz targets: an allocator that turns any single allocation above a limit into
//! a crash libFuzzer records. libFuzzer's own `-malloc_limit_mb` needs a sanitizer's malloc
//! hooks, and these targets are built without one (`--sanitizer none`, so that they build on a
//! stable toolchain); a huge but untouched allocation would escape `-rss_limit_mb`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::Write;

/// The same figure scripts/fuzz.sh gives libFuzzer as `-rss_limit_mb`.
pub const LIMIT: usize = 2048 << 20;

pub struct Guard;

fn check(size: usize) {
    if size > LIMIT {
        // No formatting: this runs inside the allocator, so nothing here may allocate.
        let _ = std::io::stderr()
            .write_all(b"==fuzz== a single allocation of more than 2048 MiB was requested\n");
        std::process::abort();
    }
}

// SAFETY: every call is passed on unchanged to the system allocator, after a size check.
unsafe impl GlobalAlloc for Guard {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        check(layout.size());
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        check(layout.size());
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        check(new_size);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}
