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

/// Its input where the runtime is built (feature `llvm`), nothing otherwise: `#[kernel]` wraps
/// each kernel's argument struct (`runtime::KernelArgs`) in it, so a crate that builds and
/// verifies kernels without the runtime still compiles. Not for direct use.
#[cfg(feature = "llvm")]
#[doc(hidden)]
#[macro_export]
macro_rules! __with_runtime {
    ($($item:tt)*) => { $($item)* };
}

/// Its input where the runtime is built (feature `llvm`), nothing otherwise (this build has no
/// runtime). Not for direct use.
#[cfg(not(feature = "llvm"))]
#[doc(hidden)]
#[macro_export]
macro_rules! __with_runtime {
    ($($item:tt)*) => {};
}
