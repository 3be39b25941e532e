//! Synthetic `qwen35moe` packs for benchmarks: valid GGUF v3 files with a model's real shapes
//! (any `ModelConfig`; `presets::real()` is Qwen3.5-35B-A3B), its tokenizer section, and
//! random but seed-determined weights in a quant mix (`mix.rs`) with realistic magnitudes
//! (`values.rs`), generated directly as encoded blocks (`blocks.rs`) and streamed to disk
//! (`write.rs`) at disk speed.
//!
//! A synthetic pack measures speed, never quality: its weights are noise. Nothing here reads a
//! model or calls a driver.

pub mod blocks;
pub mod mix;
pub mod plan;
pub mod presets;
pub mod rng;
pub mod tokenizer_meta;
pub mod values;
pub mod write;

pub use mix::QuantMix;
pub use plan::{plan, PackPlan, PlannedTensor};
pub use tokenizer_meta::TokenizerSource;
pub use values::ValueKind;
pub use write::{write_pack, WriteOptions, CHUNK_BYTES};

use crate::model::config::ConfigError;

/// Why a pack could not be written: the config's or the output path's fault (`Config`,
/// `Output`), the system's (`Io`), or a bug in baro (`Tokenizer`, `Header`).
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum PackError {
    #[error("bad model config: {0}")]
    Config(ConfigError),
    #[error("cannot write {path}: {message}")]
    Output { path: String, message: String },
    #[error("cannot write {path}: {message}")]
    Io { path: String, message: String },
    #[error("cannot build the tokenizer section: {message}")]
    Tokenizer { message: String },
    #[error("cannot lay out the gguf header: {message}")]
    Header { message: String },
}

/// The worker threads to use by default: the machine's available parallelism.
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}
