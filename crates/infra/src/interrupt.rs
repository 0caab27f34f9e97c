//! Ctrl-C as the library sees it: the binary's signal handler calls [`request`], and every wait
//! for another process's lock ([`crate::fsutil::lock`]) ends as soon as it is set. A lock can be
//! held for hours by another build, and a user who presses Ctrl-C while waiting for it must get
//! the prompt back at once, whichever lock it was (store entry, source cache, git cache).

use std::sync::atomic::{AtomicBool, Ordering};

static REQUESTED: AtomicBool = AtomicBool::new(false);

/// Called from the Ctrl-C handler: async-signal-safe (one atomic store).
pub fn request() {
    REQUESTED.store(true, Ordering::SeqCst);
}

pub fn requested() -> bool {
    REQUESTED.load(Ordering::SeqCst)
}
