//! The engine proper: a model's weights uploaded to a `Device` (`weights`), one sequence's
//! decode state on it (`state`), the m = 1 decode step wired from `kernels` (`decode`),
//! where the routed experts live under a device-memory budget (`staging`), prompt
//! processing, batched through the rows siblings or replayed (`prefill`), and one decode step
//! over several sequences through the same rows siblings (`batch_step`).
//! Holds wiring only: kernel bodies live in `kernels`, driver calls in `baro_dsl::runtime`.

pub mod batch_step;
pub mod decode;
pub mod prefill;
pub mod staging;
pub mod state;
pub mod weights;

pub use batch_step::Stepped;
pub use decode::{weight_arg, Engine, EngineError, EngineOptions};
pub use prefill::{Logits, PrefillMode, Prefilled};
pub use state::{LayerState, State};
pub use weights::{ExpertMatrices, Matrix, MatrixShape, ModelSource, WeightError, Weights};
