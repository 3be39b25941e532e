//! `Engine`: a `Model` with one sequence's `State`, for the callers that run one sequence at a
//! time (the CLI's `run`, the benchmarks, most tests). Every method is the model's on that
//! state; a caller with several sequences holds a `Model` and their `State`s instead
//! (the server). Holds no logic of its own.

use baro_dsl::runtime::{Device, GraphStats};

use crate::engine::error::EngineError;
use crate::engine::model::Model;
use crate::engine::options::EngineOptions;
use crate::engine::prefill::{Logits, PrefillMode, Prefilled};
use crate::engine::state::State;
use crate::engine::weights::ModelSource;
use crate::tokenizer::TokenId;

/// A model on a device with one sequence's state.
pub struct Engine {
    pub model: Model,
    pub state: State,
}

impl Engine {
    /// `Model::new` and one sequence's state.
    pub fn new(device: Device, source: &ModelSource, options: EngineOptions) -> Result<Engine, EngineError> {
        let (model, state) = Model::with_state(device, source, options)?;
        Ok(Engine { model, state })
    }

    /// Feeds `token` at the next position and returns the logits for the position after it.
    pub fn step(&mut self, token: TokenId) -> Result<Vec<f32>, EngineError> {
        self.model.step(&mut self.state, token)
    }

    /// `step` with the greedy pick on the device (`Model::step_greedy`).
    pub fn step_greedy(&mut self, token: TokenId) -> Result<TokenId, EngineError> {
        self.model.step_greedy(&mut self.state, token)
    }

    /// Feeds `tokens` at the next positions (`Model::prefill`).
    pub fn prefill(&mut self, tokens: &[TokenId], mode: PrefillMode, which: Logits) -> Result<Prefilled, EngineError> {
        self.model.prefill(&mut self.state, tokens, mode, which)
    }

    /// Resets, replays `prompt`, then picks `n` tokens greedily (`Model::generate`).
    pub fn generate(&mut self, prompt: &[TokenId], n: usize) -> Result<Vec<TokenId>, EngineError> {
        self.model.generate(&mut self.state, prompt, n)
    }

    /// `generate` with the prompt fed by `mode`.
    pub fn generate_with(
        &mut self,
        prompt: &[TokenId],
        n: usize,
        mode: PrefillMode,
    ) -> Result<Vec<TokenId>, EngineError> {
        self.model.generate_with(&mut self.state, prompt, n, mode)
    }

    /// Starts a new sequence.
    pub fn reset(&mut self) -> Result<(), EngineError> {
        self.model.reset(&mut self.state)
    }

    /// A copy of the sequence's state: `restore` it to resume from this point.
    pub fn snapshot(&self) -> Result<State, EngineError> {
        self.model.snapshot(&self.state)
    }

    /// Resumes from `snapshot`, which must come from this engine's model (same context).
    pub fn restore(&mut self, snapshot: &State) -> Result<(), EngineError> {
        let copy = self.model.snapshot(snapshot)?;
        if copy.max_ctx != self.state.max_ctx {
            return Err(EngineError::Unsupported {
                what: "snapshot",
                expected: format!("a context of {} positions", self.state.max_ctx),
                found: format!("{}", copy.max_ctx),
            });
        }
        self.state = copy;
        Ok(())
    }

    /// Tokens fed since the last reset.
    pub fn position(&self) -> usize {
        self.state.pos
    }

    /// Positions the sequence can hold (the KV cache's capacity).
    pub fn max_context(&self) -> usize {
        self.state.max_ctx
    }

    /// The counters of the state's decode graphs; `None` when `EngineOptions::graphs` is off.
    pub fn decode_graph_stats(&self) -> Option<GraphStats> {
        self.model.graphs.then(|| self.state.graph_stats())
    }
}
