//! Prompt processing: **batched** prefill through the rows siblings of the decode kernels
//! (every `_rows` kernel proven, while the crate compiles, to compute row for row what its
//! m = 1 kernel computes), or **replay**, the decode step applied to each prompt token, the
//! comparison arm of the identity gate.
//!
//! A batched chunk of T tokens at position p is `forward::forward` in `Mode::Chunk`: per layer,
//! the same operations as T decode steps: the projections over rows (a workgroup shares a weight row across 8 rows), the GDN
//! conv and delta-rule scan over rows with their state carried row to row, RoPE and the KV
//! append at positions p..p+T, causal attention per row in the decode kernel's order, and
//! the MoE block with its (token, k) pairs sorted by expert on the device (`moe_count`,
//! `moe_scatter`), gathered, projected per pair, gathered back and summed in top-k order.
//! Chunks cross freely: the KV cache and GDN state carry from one to the next. With staged
//! experts each layer's experts stream into one of two `LayerStaging` sets on a copy stream
//! while the previous layer computes (events, no host wait); the MoE reads the set as it would
//! the resident stacks. A chunk's rows scratch and the layer sets are the model's
//! (`Workspace`), the KV cache and GDN state the sequence's (`State`). Wiring only: no kernel
//! body and no driver call.

use crate::engine::error::EngineError;
use crate::engine::forward::{forward, write_tokens, LayerStream, Mode, Pass, Sequence, Timer, Width};
use crate::engine::model::{Model, Workspace};
use crate::engine::state::State;
use crate::tokenizer::TokenId;

/// How the prompt is fed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PrefillMode {
    /// Chunks of at most `chunk` tokens through the rows kernels.
    Batched { chunk: usize },
    /// One decode step per token.
    Replay,
}

impl PrefillMode {
    pub const DEFAULT_CHUNK: usize = 512;

    pub fn name(&self) -> &'static str {
        match self {
            PrefillMode::Batched { .. } => "batched",
            PrefillMode::Replay => "replay",
        }
    }
}

/// Which logits a prefill returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Logits {
    /// The logits after the last prompt token only.
    Last,
    /// The logits after every prompt token, (position, vocab) row-major.
    All,
}

/// What a prefill did.
#[derive(Clone, Debug)]
pub struct Prefilled {
    /// `Logits::Last`: vocab values; `Logits::All`: tokens × vocab.
    pub logits: Vec<f32>,
    /// The path that ran.
    pub mode: PrefillMode,
    /// Tokens that went through the rows kernels (0 for replay).
    pub rows_batched: usize,
    /// Rows-kernel chunks launched.
    pub chunks: usize,
}

impl Model {
    /// Profiles batched prefill by stage (a benchmark aid: it synchronises the device after
    /// every stage); `prefill_profile` returns the seconds per stage since it was turned on.
    pub fn set_prefill_profile(&mut self, on: bool) {
        self.workspace_mut().prefill_profile = on.then(Default::default);
    }

    /// The seconds per stage since `set_prefill_profile(true)`; `None` when off.
    pub fn prefill_profile(&self) -> Option<std::collections::BTreeMap<&'static str, f64>> {
        self.peek(|ws| ws.prefill_profile.clone())
    }

    /// Opts batched prefill out of identity with decode (the negative control): attention
    /// over rows then runs `attention_pv_rows_reordered`, whose P·V sum is in another order.
    /// Off by default; replay and decode are never affected.
    pub fn set_reordered_attention(&mut self, on: bool) {
        self.reordered_attention = on;
    }

    /// Feeds `tokens` to `state` at its next positions (the sequence is not reset) and returns
    /// the logits `which` asks for. Batched and replay compute the same bits.
    pub fn prefill(
        &self,
        state: &mut State,
        tokens: &[TokenId],
        mode: PrefillMode,
        which: Logits,
    ) -> Result<Prefilled, EngineError> {
        let cfg = &self.weights.config;
        if tokens.is_empty() {
            return Err(EngineError::Unsupported {
                what: "prompt",
                expected: "at least one token".into(),
                found: "none".into(),
            });
        }
        if let Some(&bad) = tokens.iter().find(|&&t| t as usize >= cfg.vocab_size) {
            return Err(EngineError::BadToken { token: bad, vocab: cfg.vocab_size });
        }
        if state.pos + tokens.len() > state.max_ctx {
            return Err(EngineError::ContextFull { pos: state.pos + tokens.len() - 1, max_ctx: state.max_ctx });
        }
        let mut ws = self.lock()?;
        let chunk = match mode {
            PrefillMode::Replay => {
                let mut logits = Vec::with_capacity(if which == Logits::All {
                    tokens.len() * cfg.vocab_size
                } else {
                    cfg.vocab_size
                });
                for (i, &t) in tokens.iter().enumerate() {
                    let l = self.step_in(&mut ws, state, t)?;
                    if which == Logits::All || i + 1 == tokens.len() {
                        logits.extend_from_slice(&l);
                    }
                }
                return Ok(Prefilled { logits, mode, rows_batched: 0, chunks: 0 });
            }
            PrefillMode::Batched { chunk: 0 } => {
                return Err(EngineError::Unsupported {
                    what: "prefill chunk size",
                    expected: "at least 1 token".into(),
                    found: "0".into(),
                });
            }
            PrefillMode::Batched { chunk } => chunk.min(tokens.len()),
        };
        ws.ensure_layer_staging(&self.device)?;
        ws.grow_rows(self, chunk)?;
        let mut logits = Vec::new();
        let mut chunks = 0;
        for part in tokens.chunks(chunk) {
            let last = chunks * chunk + part.len() == tokens.len();
            let l = self.prefill_chunk(&mut ws, state, part, which == Logits::All || last, which == Logits::All)?;
            logits.extend_from_slice(&l);
            chunks += 1;
        }
        Ok(Prefilled { logits, mode, rows_batched: tokens.len(), chunks })
    }

    /// One batched chunk of `state` at its next position. With `want` false no logits are
    /// computed; with `all` false only the last row's (through the m = 1 head, same
    /// arithmetic).
    fn prefill_chunk(
        &self,
        ws: &mut Workspace,
        state: &mut State,
        tokens: &[TokenId],
        want: bool,
        all: bool,
    ) -> Result<Vec<f32>, EngineError> {
        let t = tokens.len();
        let h = self.weights.config.hidden_dim;
        let Workspace { slots, rows, layer_staging, prefill_profile } = ws;
        let Some(p) = rows.as_mut() else {
            return Err(EngineError::Unsupported {
                what: "prefill scratch",
                expected: "allocated before a chunk".into(),
                found: "none (a bug in baro)".into(),
            });
        };
        let w = &self.weights;
        let State { layers, rope_cos, rope_sin, s, max_ctx, pos, .. } = state;
        let seq = Sequence { layers, rope_cos, rope_sin, pos: *pos, max_ctx: *max_ctx };
        let experts = LayerStream::start(&self.device, slots.as_ref(), layer_staging.as_mut())?;
        write_tokens(&self.device, p, tokens)?;
        let mut timer = Timer::new(prefill_profile.take());
        let done = forward(
            &self.device,
            &self.kernels,
            self.precision,
            w,
            p,
            t,
            Mode::Chunk { seq, experts, reordered: self.reordered_attention },
            &mut timer,
        );
        *prefill_profile = timer.totals;
        done?;
        *pos += t;
        if !want {
            self.device.default_stream().synchronize()?;
            return Ok(Vec::new());
        }
        let run = Pass::new(&self.device, &self.kernels, Width::Rows(t), self.precision);
        if all {
            return Ok(run.head_rows(w, p, t)?);
        }
        // The last row through the decode step's own head: the same kernels a replay ends with.
        run.copy_row(&p.xn, t - 1, &mut s.xn, h)?;
        let one = run.at(Width::One);
        let x = one.input(&s.xn, h, &mut s.q8_in)?;
        one.matvec(w.lm_head(), &x, &s.zero_ids, &mut s.logits)?;
        self.device.default_stream().synchronize()?;
        Ok(self.device.read::<f32>(&s.logits)?)
    }
}
