//! The `baro` root package: a home for the cross-crate tests in `tests/` and the runnable
//! programs in `examples/`. It re-exports the two crates a kernel author uses and holds the
//! hand-written plain-Rust references the tests compare against.

pub mod reference;

pub use baro_dsl as dsl;
pub use baro_macros::{kernel, kernel_helper};
