//! baro's inference engine as a library: model loading, the decode path, tokenizer, sampling
//! and the HTTP server (`server`). The `baro-engine` binary (`src/main.rs`: `run`, `serve`,
//! `synth-pack`, `demo-dsl`) is its command line. Nothing here calls a driver API directly:
//! devices are `baro_dsl::runtime`'s.

pub mod engine;
pub mod kernels;
pub mod model;
pub mod pack;
pub mod reference;
pub mod sampling;
pub mod server;
pub mod tokenizer;
