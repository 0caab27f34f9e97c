//! The infra wing: the means every later wing works through. Files written whole or not at
//! all (fsutil), Ctrl-C (interrupt), other programs (process), the one HTTP client (net) and
//! downloads, OCI registries (oci), minisign signatures (sign) and signed key lists (trust),
//! text from templates (template), progress events (progress) and crash points for the
//! fault tests (fault). It knows nothing of recipes, builds or artifacts.

pub(crate) use rocforge_core::{diag, redact, units};

pub mod download;
pub mod fault;
pub mod fsutil;
pub mod interrupt;
pub mod net;
pub mod oci;
pub mod process;
pub mod progress;
pub mod sign;
pub mod template;
pub mod trust;
