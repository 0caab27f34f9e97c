//! rocforge: declarative, reproducible builds of ROCm components for the GPUs AMD leaves out.
//!
//! Data flows one way: recipe → catalog → plan → sources → build → store → inspect/package →
//! publish/install → test → report. The code lives in a workspace of wings in that order,
//! each depending only on those before it: core (values and formats), infra (files,
//! processes, network, registries, signing), make (recipe to store), deliver (tarballs,
//! attestations, images, the build cache), use (install, publish, test, report, CI) and app
//! (the use cases). This crate is the binary; its library is the app wing, whose modules are
//! every wing's, so callers name `rocforge::build` wherever it lives. The binary owns
//! printing; everything else returns values and typed errors.

pub use rocforge_app::*;
