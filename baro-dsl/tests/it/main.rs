//! baro-dsl's integration tests as one binary (STYLE 18: one link of LLVM, not one per file):
//! a module per former `tests/*.rs`, sharing the helper modules `host_common` and
//! `gpu_codegen_common`; test data stays in `tests/text/`. One module: `cargo test -p baro-dsl
//! --features llvm --test it host_ops::`.
//!
//! The GPU tier lives here too, `#[ignore]`d (STYLE 19): `device_cuda` (feature `cuda`) and
//! `hip_runtime` (feature `hip`). `./dev test-gpu cuda|hip` runs exactly their ignored tests by
//! module name: `cargo test -p baro-dsl --features cuda --test it -- --ignored device_cuda::`.

#[cfg(feature = "llvm")]
mod gpu_codegen_common;
mod host_common;

mod device_cuda;
mod device_host;
mod device_transfer;
mod gpu_codegen_amdgpu;
mod gpu_codegen_cache;
mod gpu_codegen_ptx;
mod hip_runtime;
mod host_convert;
mod host_errors;
mod host_ops;
mod host_order;
mod host_reduce;
mod mathlib_accuracy;
mod mathlib_jit;
mod par_team;
mod text_files;
mod text_proptest;
mod text_roundtrip;
mod verifier_mutations;
mod verifier_pairs;
mod verifier_vacuity;
mod verifier_wellformed;
