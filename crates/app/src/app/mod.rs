//! The use cases behind the command line, without flags or printing.
//!
//! A [`Session`] loads the catalog, target list, lock, configuration, store and source cache
//! once; each use case takes it and returns a typed outcome (or an [`Error`] of diagnostics)
//! that the binary renders as text or JSON. Progress goes through the session's
//! [`Reporter`](crate::progress::Reporter).

pub mod attest;
pub mod build;
pub mod check_sources;
pub mod ci;
pub mod dev;
pub mod doctor;
pub mod fetch;
pub mod image;
pub mod inspect;
pub mod install;
pub mod key;
pub mod lock;
pub mod package;
pub mod publish;
pub mod report;
pub mod runtime;
mod session;
pub mod signature;
pub mod source_gc;
pub mod store_rm;
pub mod test;
pub mod verify;

pub use crate::diag::error::{self, ERROR_SCHEMA, Error, Failed, Problem, Result};
pub use session::{Options, Session, release_names};
