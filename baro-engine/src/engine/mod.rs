//! The engine proper: a model's weights uploaded to a `Device` (`weights`), one sequence's
//! decode state on it (`state`), the m = 1 decode step wired from `kernels` (`decode`), and
//! where the routed experts live under a device-memory budget (`staging`), and prompt
//! processing, batched through the rows siblings or replayed (`prefill`).
//! Holds wiring only: kernel bodies live in `kernels`, driver calls in `baro_dsl::runtime`.

pub mod decode;
pub mod prefill;
pub mod staging;
pub mod state;
pub mod weights;

pub use decode::{Engine, EngineError, EngineOptions};
pub use prefill::{Logits, PrefillMode, Prefilled};
pub use state::{LayerState, State};
pub use weights::{ExpertMatrices, Matrix, MatrixShape, ModelSource, WeightError, Weights};
