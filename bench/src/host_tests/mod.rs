//! The host runs of the benchmarks and the identity gate: the library's unit tests rather than
//! an integration-test binary (`tests/it/`), because cargo builds and links every binary of a
//! package for its integration tests, and these need none of the eight benchmark binaries (each
//! links LLVM and the engine: 0.4 GB of `target/` and their link time in `./dev test`). One
//! module: `cargo test -p baro-bench --lib host_tests::decode_bw_host::`.

mod decode_bw_host;
mod identity_gate_host;
mod long_context_host;
mod matvec_bw_host;
