//! Tests on hardware: which GPU this machine has (`detect`), running a component's test client
//! against it sharded and hang-proof (`run`, with an on-disk `journal`), what each failure was
//! (`classify`), which build to test (`select`), the plan of a run that `test --dry-run` prints
//! (`plan`), and the results bundle other machines' reports are compiled from (`bundle`).

pub mod bundle;
pub mod classify;
pub use crate::corpus::ctest;
pub mod detect;
pub mod gtest;
pub use crate::corpus::installed;
pub mod journal;
pub mod plan;
pub mod run;
pub mod select;
pub mod share;
