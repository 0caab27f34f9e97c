//! The use wing: what is done with artifacts once they exist. Install a stack from a signed
//! index (install), publish a release to GitHub or an OCI registry (publish), run the test
//! clients on the local GPU without hanging (testrun), compile results into one report
//! (report), and generate the CI files that run it all (ci).

pub(crate) use rocforge_core::{arch, carries_artifact_id, diag, ids, redact, units};
pub(crate) use rocforge_deliver::{delivery, package};
pub(crate) use rocforge_infra::{
    download, fault, fsutil, net, oci, process, progress, sign, template, trust,
};
pub(crate) use rocforge_make::{catalog, corpus, inspect, plan, recipe, source, store};

pub mod ci;
pub mod install;
pub mod publish;
pub mod report;
pub mod testrun;
