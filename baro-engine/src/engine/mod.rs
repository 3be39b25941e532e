//! The engine proper: a model's weights uploaded to a `Device` (`weights`), the compiled
//! kernels as m = 1 / rows pairs (`registry`), one sequence's decode state on it (`state`),
//! the buffers a pass writes (`scratch`), the forward pass written once for one token, a
//! chunk's rows or a batch of sequences (`forward`), the `Engine` and its decode step (`decode`),
//! where the routed experts live under a device-memory budget (`staging`), prompt
//! processing, batched through the rows siblings or replayed (`prefill`), and one decode step
//! over several sequences through the same rows siblings (`batch_step`).
//! Holds wiring only: kernel bodies live in `kernels`, driver calls in `baro_dsl::runtime`.

pub mod batch_step;
pub mod decode;
pub mod forward;
pub mod prefill;
pub mod registry;
pub mod scratch;
pub mod staging;
pub mod state;
pub mod weights;

pub use batch_step::Stepped;
pub use decode::{Engine, EngineError, EngineOptions, Precision};
pub use forward::weight_arg;
pub use prefill::{Logits, PrefillMode, Prefilled};
pub use scratch::Scratch;
pub use state::{LayerState, State};
pub use weights::{ExpertMatrices, Matrix, MatrixShape, ModelSource, WeightError, Weights};
