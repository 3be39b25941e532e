//! baro-dsl's integration tests as one binary (STYLE 18: one link of LLVM, not one per file):
//! a module per former `tests/*.rs`, sharing the helper modules `host_common` and
//! `gpu_codegen_common`; test data stays in `tests/text/` and `tests/filetests/` (run by
//! `filetests`). One module: `cargo test -p baro-dsl --features llvm --test it host_ops::`.
//! Without `llvm` (no JIT, no runtime) the binary holds the verifier and IR-text tests only
//! (the lowering filetests are listed as not run); `./dev test` builds the workspace, which
//! enables it.
//!
//! The GPU tier lives here too, `#[ignore]`d (STYLE 19): `device_cuda` (feature `cuda`) and
//! `hip_runtime` (feature `hip`). `./dev test-gpu cuda|hip` runs exactly their ignored tests by
//! module name: `cargo test -p baro-dsl --features cuda --test it -- --ignored device_cuda::`.

#[cfg(feature = "llvm")]
mod gpu_codegen_common;
#[cfg(feature = "llvm")]
mod host_common;

mod device_cuda;
#[cfg(feature = "llvm")]
mod device_graph;
#[cfg(feature = "llvm")]
mod device_host;
#[cfg(feature = "llvm")]
mod device_transfer;
mod filetests;
mod gpu_codegen_amdgpu;
mod gpu_codegen_cache;
mod gpu_codegen_ptx;
mod hip_runtime;
#[cfg(feature = "llvm")]
mod host_convert;
#[cfg(feature = "llvm")]
mod host_errors;
#[cfg(feature = "llvm")]
mod host_ops;
#[cfg(feature = "llvm")]
mod host_order;
#[cfg(feature = "llvm")]
mod host_reduce;
#[cfg(feature = "llvm")]
mod int_dot;
#[cfg(feature = "llvm")]
mod int_mma;
#[cfg(feature = "llvm")]
mod int_sum;
mod mathlib_accuracy;
#[cfg(feature = "llvm")]
mod mathlib_jit;
mod par_team;
mod rows_own_lengths;
mod rows_reduce;
mod text_files;
mod text_proptest;
mod text_roundtrip;
mod verifier_mutations;
mod verifier_pairs;
mod verifier_vacuity;
mod verifier_wellformed;
