//! The deliver wing: what leaves the store. A store entry as a signed tarball with its
//! manifest, and the signed index of a release (package); SBOMs and provenance attached to
//! each (attest); an OCI image of an installed stack (image); and the build cache on an OCI
//! registry (cache_oci), an entry written the way a tarball is.

pub(crate) use rocforge_core::{arch, carries_artifact_id, diag, ids, redact, units};
pub(crate) use rocforge_infra::{fault, fsutil, oci, process, progress, sign, trust};
pub(crate) use rocforge_make::{cache, inspect, plan, recipe, runtime, store};

pub mod attest;
pub mod cache_oci;
pub mod delivery;
pub mod image;
pub mod package;
