//! The make wing: from a recipe to a checked install tree in the store. Recipes as written
//! (recipe) and their test corpora (corpus), a release line loaded and checked (catalog), the
//! dependency order and content keys (plan), sources fetched and patched (source), the
//! container runtimes (runtime), the build driver (build) and its shared cache's interface
//! (cache), the content-addressed store (store), and what a built tree holds (inspect).
//! It never reaches delivery: packaging, publishing and installing come after it.

pub(crate) use rocforge_core::{arch, diag, ids, units};
pub(crate) use rocforge_infra::{
    download, fault, fsutil, interrupt, net, oci, process, progress, sign,
};

pub mod build;
pub mod cache;
pub mod catalog;
pub mod corpus;
pub mod inspect;
pub mod plan;
pub mod recipe;
pub mod runtime;
pub mod source;
pub mod store;
