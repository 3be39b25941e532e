//! The one place the scheduler runs the engine: a decode step over every decoding sequence,
//! and a prefill chunk of one sequence's prompt.
//!
//! Today each row is the m = 1 `Engine::step` with that sequence's state swapped in, one row
//! after the other, so a sequence's arithmetic is exactly what it would be alone (batch
//! invariance by construction). When the rows siblings land on the engine, `decode` becomes
//! one batched step over all rows and `prefill` a rows prefill of the chunk; the siblings'
//! proof (row r computes exactly the m = 1 arithmetic) keeps every output byte the same, and
//! nothing else in the server changes. Must never reorder rows' results.

use crate::engine::{Engine, EngineError, State};
use crate::tokenizer::TokenId;

/// Feeds `token` to each row's state; returns each row's logits for its next position, in
/// row order.
pub fn decode(engine: &mut Engine, rows: &mut [(&mut State, TokenId)]) -> Vec<Result<Vec<f32>, EngineError>> {
    rows.iter_mut().map(|(state, token)| step(engine, state, *token)).collect()
}

/// Feeds `tokens` (not empty) to `state`; returns the logits after the last one.
pub fn prefill(engine: &mut Engine, state: &mut State, tokens: &[TokenId]) -> Result<Vec<f32>, EngineError> {
    let Some((&last, head)) = tokens.split_last() else {
        return Err(EngineError::Unsupported { what: "prefill chunk", expected: "at least one token".into(), found: "none (a bug in baro)".into() });
    };
    engine.swap_state(state);
    let result = head.iter().try_for_each(|&t| engine.step(t).map(drop)).and_then(|()| engine.step(last));
    engine.swap_state(state);
    result
}

fn step(engine: &mut Engine, state: &mut State, token: TokenId) -> Result<Vec<f32>, EngineError> {
    engine.swap_state(state);
    let result = engine.step(token);
    engine.swap_state(state);
    result
}
