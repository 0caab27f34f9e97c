//! A component's test corpus as a built tree holds it: CTest's generated files read as a test
//! list (ctest.rs), and the check, when a build is committed, that the tree carries the corpus
//! its recipe's `[test]` names (installed.rs). The build checks it and `rocforge test` runs
//! it, so it sits before both.

pub mod binaries;
pub mod ctest;
pub mod installed;
