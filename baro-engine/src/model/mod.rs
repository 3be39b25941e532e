//! Model loading: configuration, weight files (Hugging Face safetensors, GGUF), the name and
//! value conventions between them, and the plain-Rust dequantization reference. Holds config
//! and weights only; never a kernel body, never a driver call.

pub mod config;
pub mod dequant;
pub mod gguf;
pub mod gguf_write;
pub mod names;
pub mod quantize;
pub mod safetensors;
pub mod source;
pub mod tensor;

pub use config::{ConfigError, LayerKind, ModelConfig};
pub use gguf::{GgufError, GgufFile, MetaValue, TensorInfo};
pub use gguf_write::GgufWriter;
pub use names::{gguf_tensors, GgufTensorSpec, HfSource, Transform};
pub use safetensors::{HfCheckpoint, HfError};
pub use tensor::{TensorType, TensorView};
