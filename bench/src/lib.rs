//! baro's benchmarks and the cross-target conformance suite, as a library shared by the
//! binaries (`conformance`, `matvec_bw`, `decode_bw`, `identity_gate`, `prefill_speed`, `long_context`, and
//! `q8_bench` inside `baro_gpu`) that are
//! carried to a GPU machine.

pub mod bandwidth;
pub mod conformance;
pub mod decode;
pub mod floor;
pub mod identity;
pub mod long_context;
pub mod matvec_cases;
pub mod matvec_engine;
pub mod q8;
pub mod report;

#[cfg(test)]
mod host_tests;
