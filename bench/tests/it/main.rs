//! baro-bench's integration tests as one binary (STYLE 18): the host runs of the benchmarks
//! and the identity gate, a module per former `tests/*.rs`. One module: `cargo test -p
//! baro-bench --test it decode_bw_host::`.

mod decode_bw_host;
mod identity_gate_host;
mod long_context_host;
mod matvec_bw_host;
