//! The app wing: the use cases behind the commands (app), over one session, and the JSON
//! Schemas of what they print and save (schema). It is the library the binary calls: every
//! lower wing is re-exported here in pipeline order, so a caller names `rocforge::build`
//! whatever wing it lives in.

pub use rocforge_core::{arch, carries_artifact_id, diag, ids, redact, units};
pub use rocforge_deliver::{attest, cache_oci, delivery, image, package};
pub use rocforge_infra::{
    download, fault, fsutil, interrupt, net, oci, process, progress, sign, template, trust,
};
pub use rocforge_make::{
    build, cache, catalog, corpus, inspect, plan, recipe, runtime, source, store,
};
pub use rocforge_use::{ci, install, publish, report, testrun};

pub mod app;
pub mod schema;
