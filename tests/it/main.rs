//! The integration tests, one test binary: a module per area (tests/it/<area>.rs), sharing
//! tests/it/common. Fixtures stay under tests/ (tests/fixtures, tests/malformed); the tests find
//! them through CARGO_MANIFEST_DIR. Run one area with `cargo test --test it <area>::`.

mod common;

mod app;
mod artifacts;
mod attest;
mod build;
mod cache;
mod catalog;
mod checkpoint;
mod ci;
mod cli;
mod containment;
mod download;
mod faults;
mod flags;
mod hostile;
mod image;
mod inspect;
mod malformed;
mod nix;
mod outputs;
mod patch;
mod publish;
mod readme;
mod real_rocm;
mod replay;
mod reproduce;
mod sources;
mod test_artifacts;
mod testrun;
