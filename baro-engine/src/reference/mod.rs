//! A plain-Rust reference forward pass of the `qwen35moe` text model, decoding one token at a
//! time (KV cache for full-attention layers; conv ring and delta-rule state for gated delta net
//! layers), in f32 or f64, from canonical weights out of an HF checkpoint or a GGUF file
//! (quantized tensors dequantized row by row with `model::dequant`). It follows the mathematics
//! of transformers' `qwen3_5_moe` (its recurrent decode path) operation by operation, with every
//! sum sequential and its order written down in `ops.rs` and beside each layer; it is what the
//! engine's kernels and decode path are checked against. It must never be used to serve tokens
//! and never call a kernel or a driver.

mod attention;
mod gdn;
mod model;
mod moe;
pub mod ops;
mod real;
mod state;
mod weights;

pub use model::ReferenceModel;
pub use moe::Routing;
pub use real::Real;
pub use state::DecodeState;
pub use weights::{Matrix, RefError, Weights};
