//! baro's inference engine as a library: model loading, the decode path, tokenizer, sampling
//! and the HTTP server (`server`). The `baro-engine` binary (`src/main.rs`) is, until the engine runs,
//! the DSL demonstration and does not use this library. Nothing here may call a driver API.

pub mod engine;
pub mod kernels;
pub mod model;
pub mod pack;
pub mod reference;
pub mod sampling;
pub mod server;
pub mod tokenizer;
