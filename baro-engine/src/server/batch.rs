//! The one place the scheduler runs the engine: a decode step over every decoding sequence,
//! and a prefill chunk of one sequence's prompt.
//!
//! `decode` is one `Model::step_batch` over all decoding sequences: the stateless work (norms,
//! projections, the MoE, the output head) runs once over every row through the rows kernels,
//! each sequence's stateful work (RoPE, its KV cache, its GDN state) on its own `State`.
//! `prefill` feeds the chunk to the sequence's state as one batched prefill
//! (`Model::prefill`, `PrefillMode::Batched`). Every rows kernel is proven, while the crate compiles, to compute
//! row for row what its m = 1 kernel computes, so a sequence's logits are the bytes it would get
//! alone, whatever else is in flight (batch invariance). With staged experts `step_batch`
//! streams whole layers for a batch of at least `Model::staged_batch_rows` rows and steps
//! smaller ones row by row through the slot cache (see there); the bytes are the same. Must never reorder rows'
//! results.

use crate::engine::{EngineError, Logits, Model, PrefillMode, State};
use crate::server::metrics::{self, Metrics};
use crate::tokenizer::TokenId;

/// Feeds `token` to each row's state; returns each row's logits for its next position, in
/// row order. A row `step` would refuse (a token past the vocabulary, a full context) gets
/// that error and is left out of the step, its state untouched; if the step itself fails
/// (the driver, or a bug in baro), every row in it fails, because part of the step may have
/// run on their states and stepping them again would not give their bytes.
pub fn decode(
    model: &Model,
    rows: &mut [(&mut State, TokenId)],
    metrics: &Metrics,
) -> Vec<Result<Vec<f32>, EngineError>> {
    let checks: Vec<Result<(), EngineError>> =
        rows.iter().map(|(state, token)| model.check_step(state, *token)).collect();
    let mut valid: Vec<(&mut State, TokenId)> = rows
        .iter_mut()
        .zip(&checks)
        .filter(|(_, c)| c.is_ok())
        .map(|((state, token), _)| (&mut **state, *token))
        .collect();
    let n = valid.len();
    let stepped: Vec<Result<Vec<f32>, EngineError>> = match model.step_batch(&mut valid) {
        Ok(s) => {
            if s.rows_batched > 1 {
                metrics::add(&metrics.batched_steps, 1);
                metrics::add(&metrics.batched_rows, s.rows_batched as u64);
            }
            s.logits.into_iter().map(Ok).collect()
        }
        Err(e) => {
            let message = e.to_string();
            (0..n).map(|_| Err(EngineError::BatchStep { rows: n, message: message.clone() })).collect()
        }
    };
    let mut stepped = stepped.into_iter();
    checks
        .into_iter()
        .map(|check| match check {
            Err(e) => Err(e),
            Ok(()) => stepped.next().unwrap_or_else(|| {
                Err(EngineError::BatchStep { rows: n, message: "fewer logits than rows (a bug in baro)".into() })
            }),
        })
        .collect()
}

/// Feeds `tokens` (not empty) to `state` as one batched prefill; returns the logits after the
/// last one.
pub fn prefill(
    model: &Model,
    state: &mut State,
    tokens: &[TokenId],
    metrics: &Metrics,
) -> Result<Vec<f32>, EngineError> {
    if tokens.is_empty() {
        return Err(EngineError::Unsupported {
            what: "prefill chunk",
            expected: "at least one token".into(),
            found: "none (a bug in baro)".into(),
        });
    }
    let done = model.prefill(state, tokens, PrefillMode::Batched { chunk: tokens.len() }, Logits::Last)?;
    metrics::add(&metrics.prompt_tokens_batched, done.rows_batched as u64);
    Ok(done.logits)
}
