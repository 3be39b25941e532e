//! The engine proper. A `Model` (`model`) is what every sequence shares: a model's weights
//! uploaded to a `Device` (`weights`), the compiled kernels as m = 1 / rows pairs
//! (`registry`), where the routed experts live under a device-memory budget (`staging`), and
//! the workspace its passes write under one lock. A `State` (`state`) is one sequence's: its
//! KV cache, GDN state, position and one-row scratch. The passes take the model by `&self`
//! and the states they advance by `&mut`: the decode step (`decode`), prompt processing,
//! batched through the rows siblings or replayed (`prefill`), and one decode step over several
//! sequences through the same rows siblings (`batch_step`); all three run the forward pass
//! written once (`forward`) over the buffers of one plan (`scratch`); `context_memory` is the
//! arithmetic of what a context length costs on the device. `Engine` (`single`) is
//! a model with one state, for one-sequence callers; `options` and `error` are plain data.
//! Holds wiring only: kernel bodies live in `kernels`, driver calls in `baro_dsl::runtime`.

pub mod batch_step;
pub mod context_memory;
pub mod decode;
pub mod error;
pub mod forward;
pub mod model;
pub mod options;
pub mod prefill;
pub mod registry;
pub mod scratch;
pub mod single;
pub mod staging;
pub mod state;
pub mod weights;

pub use batch_step::Stepped;
pub use context_memory::ContextMemory;
pub use error::EngineError;
pub use forward::weight_arg;
pub use model::Model;
pub use options::{EngineOptions, Precision};
pub use prefill::{Logits, PrefillMode, Prefilled};
pub use scratch::Scratch;
pub use single::Engine;
pub use state::{LayerState, State, StatePart};
pub use weights::{ExpertMatrices, Matrix, MatrixShape, ModelSource, WeightError, Weights};
