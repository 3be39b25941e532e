//! What can go wrong building a `Model` or stepping a sequence on it, and whose fault it is
//! (the user's input or budget, the driver, a bug in baro). Holds no logic.

use baro_dsl::runtime::DeviceError;

use crate::engine::staging::{BudgetError, SlotError};
use crate::engine::weights::WeightError;
use crate::sampling::SampleError;
use crate::tokenizer::TokenId;

/// What went wrong building or running the engine.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Weights(Box<WeightError>),
    /// The driver's fault, or a bug in baro (a kernel's bounds check).
    #[error(transparent)]
    Device(#[from] DeviceError),
    #[error("context full: expected fewer than {max_ctx} tokens in the sequence, found {pos} already")]
    ContextFull { pos: usize, max_ctx: usize },
    #[error("token {token}: expected an id below the vocabulary size {vocab}")]
    BadToken { token: TokenId, vocab: usize },
    #[error("unsupported model: {what}: expected {expected}, found {found}")]
    Unsupported { what: &'static str, expected: String, found: String },
    #[error(transparent)]
    Sample(#[from] SampleError),
    /// The user's budget is too small.
    #[error(transparent)]
    Budget(#[from] BudgetError),
    #[error(transparent)]
    Staging(#[from] SlotError),
    /// A batched decode step failed part-way (the driver's fault, or a bug in baro); the
    /// states of its rows are undefined.
    #[error("batched decode step of {rows} sequences failed: {message}")]
    BatchStep { rows: usize, message: String },
}

impl From<WeightError> for EngineError {
    fn from(e: WeightError) -> EngineError {
        EngineError::Weights(Box::new(e))
    }
}
