//! baro-dsl: the kernel IR, reduction schedules, the order-equivalence verifier, the LLVM
//! lowering (feature `llvm`) and the runtime that launches compiled kernels.
//!
//! Without the `llvm` feature this crate is pure Rust: the `#[kernel]` macro links it to
//! build and verify kernels while the user's crate compiles.

pub mod ir;
pub mod lanes;
pub mod mathlib;
pub mod schedule;
#[doc(hidden)]
pub mod testkernels;
pub mod verify;

#[cfg(feature = "llvm")]
pub mod compile;
#[cfg(feature = "llvm")]
pub mod lower;
#[cfg(feature = "llvm")]
pub mod runtime;

pub use ir::{Kernel, ScalarType};
pub use schedule::{Combine, Schedule, Tree};

pub mod cache;
pub mod options;
pub mod target;
