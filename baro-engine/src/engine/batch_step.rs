//! One decode step over several sequences at once (`Model::step_batch`): row r is sequence r,
//! at its own position, with its own `State`; `forward::forward` in `Mode::Batch`, in the
//! model's rows scratch (`Workspace`).
//!
//! What is per token and stateless runs once over all rows through the rows kernels: the
//! embedding gather, every RMSNorm, every projection (the mixers' in and out, the router, the
//! shared expert), the MoE with its (row, k) pairs grouped by expert exactly as batched prefill
//! groups them, SwiGLU, the combine, the residual adds (each with the norm after it), the final
//! norm and the output head. A workgroup of a rows matvec computes its outputs (1, 8 or 16)
//! for 8 rows in turn, so a weight row is loaded once per 8 sequences instead of once per
//! sequence. What touches a sequence's own state runs per
//! row with the decode step's m = 1 kernels on that sequence's buffers: RoPE at its position,
//! the KV append and attention over its cache, the GDN conv ring and delta-rule state. A row's
//! slice goes into the sequence's scratch with `copy_row` and back with `put_row` (exact
//! copies).
//!
//! Each rows kernel is proven while the crate compiles to compute row for row what its m = 1
//! kernel computes, and the stateful part is the m = 1 kernels themselves, so every row's logits
//! are byte-identical to `step` on that sequence alone, whatever else is in the batch.
//! Wiring only: no kernel body and no driver call.

use crate::engine::error::EngineError;
use crate::engine::forward::{forward, write_tokens, LayerStream, Mode, Pass, Timer, Width};
use crate::engine::model::{Model, Workspace};
use crate::engine::state::State;
use crate::tokenizer::TokenId;

/// What a batched decode step did.
#[derive(Clone, Debug)]
pub struct Stepped {
    /// Each row's logits for its next position (vocab values), in row order.
    pub logits: Vec<Vec<f32>>,
    /// Rows that went through the rows kernels together (0: stepped one by one).
    pub rows_batched: usize,
}

/// The smallest staged batch that streams whole layers instead of going row by row through the
/// decode slot cache: the rows' (row, k) pairs reach a quarter of a layer's experts. A cost
/// model, not a measurement: row by row copies about N · k · (1 − hit rate) experts per layer
/// and runs N m = 1 steps; streaming copies all E experts per layer behind one rows step. With
/// 256 experts top-8 that is 8 rows (the rows matvecs' tile).
pub fn staged_batch_rows(n_experts: usize, top_k: usize) -> usize {
    n_experts.div_ceil(4 * top_k.max(1)).max(2)
}

impl Model {
    /// The smallest batch `step_batch` runs through the rows kernels when the experts are
    /// staged (`staged_batch_rows` of this model); 1 when they are resident.
    pub fn staged_batch_rows(&self) -> usize {
        if !self.staged() {
            return 1;
        }
        staged_batch_rows(self.weights.config.n_experts, self.weights.config.n_experts_used)
    }

    /// Feeds `rows[r].1` to the sequence `rows[r].0` for every row and returns each row's
    /// logits for its next position, byte for byte what `step` returns for that sequence run
    /// alone. Every row is checked first (`check_step`): a bad token or a full context is an
    /// error before anything is queued, and no state changes. A device error part-way leaves
    /// the rows' states undefined.
    ///
    /// With staged experts (`MemoryMode::Staged`), a batch of at least
    /// `staged_batch_rows()` rows goes through the rows kernels too, its layers' experts
    /// streamed whole into batched prefill's two device sets one layer ahead (the same
    /// staging, the same bytes); a smaller batch is stepped row after row with `step` through
    /// the decode slot cache, and `rows_batched` is 0.
    pub fn step_batch(&self, rows: &mut [(&mut State, TokenId)]) -> Result<Stepped, EngineError> {
        for (state, token) in rows.iter() {
            self.check_step(state, *token)?;
        }
        let mut ws = self.lock()?;
        if self.staged() && rows.len() < self.staged_batch_rows() {
            let mut logits = Vec::with_capacity(rows.len());
            for (state, token) in rows.iter_mut() {
                logits.push(self.step_in(&mut ws, state, *token)?);
            }
            return Ok(Stepped { logits, rows_batched: 0 });
        }
        let n = rows.len();
        if n == 0 {
            return Ok(Stepped { logits: Vec::new(), rows_batched: 0 });
        }
        ws.grow_rows(self, n)?;
        ws.ensure_layer_staging(&self.device)?;
        let vocab = self.weights.config.vocab_size;
        let Workspace { slots, rows: scratch, layer_staging, .. } = &mut *ws;
        let Some(p) = scratch.as_mut() else {
            return Err(EngineError::Unsupported {
                what: "rows scratch",
                expected: "allocated before a batched step".into(),
                found: "none (a bug in baro)".into(),
            });
        };
        let w = &self.weights;
        let tokens: Vec<TokenId> = rows.iter().map(|(_, t)| *t).collect();
        // Staged: each layer's experts stream into one of two sets, exactly as in batched prefill.
        let experts = LayerStream::start(&self.device, slots.as_ref(), layer_staging.as_mut())?;
        write_tokens(&self.device, p, &tokens)?;
        forward(
            &self.device,
            &self.kernels,
            self.precision,
            w,
            p,
            tokens.len(),
            Mode::Batch { rows, experts },
            &mut Timer::off(),
        )?;
        let logits = Pass::new(&self.device, &self.kernels, Width::Rows(n), self.precision).head_rows(w, p, n)?;
        for (state, _) in rows.iter_mut() {
            state.pos += 1;
        }
        Ok(Stepped { logits: logits.chunks(vocab).map(<[f32]>::to_vec).collect(), rows_batched: n })
    }
}
