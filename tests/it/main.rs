//! The root package's integration tests as one binary (STYLE 18: one link of LLVM, not one per
//! file): a module per former `tests/*.rs`. One module: `cargo test -p baro --test it
//! examples_host::`.

mod conformance_host;
mod examples_host;
mod verifier_examples;
