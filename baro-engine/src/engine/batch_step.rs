//! One decode step over several sequences at once (`Engine::step_batch`): row r is sequence r,
//! at its own position, with its own `State`.
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

use crate::engine::decode::{attention_cached, gdn_recurrent, Engine, EngineError, Launcher, Rope};
use crate::engine::prefill::{attention_project, gdn_output, gdn_project, LayerStream, Rows, Timer};
use crate::engine::state::{LayerState, State};
use crate::engine::weights::MixerWeights;
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

fn layer_mismatch() -> EngineError {
    EngineError::Unsupported { what: "layer state", expected: "the weights' layer kind".into(), found: "another kind (a bug in baro)".into() }
}

impl Engine {
    /// The smallest batch `step_batch` runs through the rows kernels when the experts are
    /// staged (`staged_batch_rows` of this model); 1 when they are resident.
    pub fn staged_batch_rows(&self) -> usize {
        if self.slots.is_none() {
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
    pub fn step_batch(&mut self, rows: &mut [(&mut State, TokenId)]) -> Result<Stepped, EngineError> {
        for (state, token) in rows.iter() {
            self.check_step(state, *token)?;
        }
        if self.slots.is_some() && rows.len() < self.staged_batch_rows() {
            let mut logits = Vec::with_capacity(rows.len());
            for (state, token) in rows.iter_mut() {
                self.swap_state(state);
                let l = self.step(*token);
                self.swap_state(state);
                logits.push(l?);
            }
            return Ok(Stepped { logits, rows_batched: 0 });
        }
        let n = rows.len();
        if n == 0 {
            return Ok(Stepped { logits: Vec::new(), rows_batched: 0 });
        }
        self.grow_prefill_scratch(n)?;
        self.ensure_layer_staging()?;
        let cfg = &self.weights.config;
        let (h, eps, vocab) = (cfg.hidden_dim, cfg.rms_eps, cfg.vocab_size);
        let (q_dim, kv_dim) = (cfg.n_heads * cfg.head_dim, cfg.n_kv_heads * cfg.head_dim);
        let nv = cfg.gdn_n_value_heads;
        let run = Rows { device: &self.device, k: &self.kernels.rows };
        let one = Launcher { device: &self.device, k: &self.kernels };
        let Some(p) = self.prefill_scratch.as_mut() else {
            return Err(EngineError::Unsupported { what: "rows scratch", expected: "allocated before a batched step".into(), found: "none (a bug in baro)".into() });
        };
        let w = &self.weights;
        let tokens: Vec<TokenId> = rows.iter().map(|(_, t)| *t).collect();
        run.embed(w, p, &tokens)?;
        // Staged: each layer's experts stream into one of two sets, exactly as in batched prefill.
        let mut staged = LayerStream::start(&self.device, self.slots.as_ref(), self.layer_staging.as_mut())?;
        run.rmsnorm(&p.x, w.layers.first().map_or(&w.output_norm, |l| &l.attn_norm), &mut p.xn, h, eps, n)?;
        for (i, lw) in w.layers.iter().enumerate() {
            match &lw.mixer {
                MixerWeights::Gdn(g) => {
                    gdn_project(&run, g, p, n)?;
                    for (r, (state, _)) in rows.iter_mut().enumerate() {
                        let State { pos, layers, s, .. } = &mut **state;
                        let Some(LayerState::Gdn { conv_ring, ssm }) = layers.get_mut(i) else { return Err(layer_mismatch()) };
                        run.copy_row(&p.qkv, r, &mut s.qkv, cfg.gdn_conv_dim())?;
                        run.copy_row(&p.ba, r, &mut s.ba, 2 * nv)?;
                        gdn_recurrent(&one, cfg, g, conv_ring, ssm, s, *pos)?;
                        run.put_row(&s.o, &mut p.o, r, nv * cfg.gdn_value_dim)?;
                    }
                    gdn_output(&run, cfg, g, p, n)?;
                }
                MixerWeights::Attention(a) => {
                    attention_project(&run, cfg, a, p, n)?;
                    for (r, (state, _)) in rows.iter_mut().enumerate() {
                        let State { pos, max_ctx, layers, rope_cos, rope_sin, s } = &mut **state;
                        let Some(LayerState::Attention { k_cache, v_cache }) = layers.get_mut(i) else { return Err(layer_mismatch()) };
                        run.copy_row(&p.q_gate, r, &mut s.q_gate, 2 * q_dim)?;
                        run.copy_row(&p.q, r, &mut s.q, q_dim)?;
                        run.copy_row(&p.k, r, &mut s.k, kv_dim)?;
                        run.copy_row(&p.v, r, &mut s.v, kv_dim)?;
                        attention_cached(&one, cfg, k_cache, v_cache, &Rope { cos: rope_cos, sin: rope_sin }, s, *pos, *max_ctx)?;
                        run.put_row(&s.attn, &mut p.attn, r, q_dim)?;
                    }
                    run.matvec_one(&a.o, &p.attn, &p.zero_ids, &mut p.mix, n)?;
                }
            }
            run.add_rmsnorm(&p.x, &p.mix, &lw.post_attention_norm, &mut p.h, &mut p.xn, h, eps, n)?;
            staged.moe(&run, cfg, w, i, p, n, &mut Timer::off())?;
            let next_norm = w.layers.get(i + 1).map_or(&w.output_norm, |l| &l.attn_norm);
            run.add_rmsnorm(&p.h, &p.mix, next_norm, &mut p.x, &mut p.xn, h, eps, n)?;
        }
        let logits = run.head(w, p, n)?;
        for (state, _) in rows.iter_mut() {
            state.pos += 1;
        }
        Ok(Stepped { logits: logits.chunks(vocab).map(<[f32]>::to_vec).collect(), rows_batched: n })
    }
}
