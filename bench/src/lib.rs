//! baro's benchmarks and the cross-target conformance suite, as a library shared by the
//! binaries (`conformance`, `matvec_bw`) that are carried to a GPU machine.

pub mod conformance;
pub mod report;
