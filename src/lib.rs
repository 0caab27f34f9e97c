//! rocforge: declarative, reproducible builds of ROCm components for the GPUs AMD leaves out.
//!
//! Data flows one way: recipe → catalog → plan → sources → build → store → inspect/package →
//! publish/install → test → report, and no module imports another in a circle. [`app`] holds
//! the use cases the binary calls. The binary owns printing; everything here returns values
//! and typed errors.

pub mod app;
pub mod arch;
pub mod attest;
pub mod build;
pub mod cache;
pub mod cache_oci;
pub mod catalog;
pub mod ci;
pub mod corpus;

pub mod diag;
pub mod download;
pub mod fault;
pub mod fsutil;
pub mod ids;
pub mod image;
pub mod inspect;
pub mod install;
pub mod interrupt;
pub mod net;
pub mod oci;
pub mod package;
pub mod plan;
pub mod process;
pub mod progress;
pub mod publish;
pub mod recipe;
pub mod redact;
pub mod report;
pub mod runtime;
pub mod schema;
pub mod sign;
pub mod source;
pub mod store;
pub mod template;
pub mod testrun;
pub mod trust;
pub mod units;
