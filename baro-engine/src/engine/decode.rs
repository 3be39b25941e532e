//! The decode step (m = 1): one token of one sequence in, the next token's logits out, from
//! baro kernels only, on any `Device`: `Model::step(&self, &mut State, token)`. The step is
//! `forward::forward` in `Mode::Decode` (the m = 1 kernels: embed, per layer the mixer and the
//! MoE, the final norm) and the output head, into the state's one-row scratch.
//!
//! This file holds the wiring only: no kernel body and no driver call. A step writes its token,
//! queues launches on the device's default stream and waits once, when the logits are read
//! back. With resident experts and `EngineOptions::graphs` (the default) the step's launches
//! are recorded and replayed as the state's own launch graph (`Device::replay`: on CUDA one
//! `cuGraphLaunch`, updated in place from step to step as the position changes): the same
//! kernels with the same arguments in the same order.

use crate::engine::error::EngineError;
use crate::engine::forward::{forward, write_tokens, Mode, Pass, Sequence, Timer, Width};
use crate::engine::model::{Model, Workspace};
use crate::engine::prefill::{Logits, PrefillMode};
use crate::engine::scratch::Scratch;
use crate::engine::staging::DecodeSlots;
use crate::engine::state::State;
use crate::kernels::pick::{GreedyChunksArgs, GreedyPickArgs};
use crate::sampling::{self, SampleError};
use crate::tokenizer::TokenId;

impl Model {
    /// Feeds `token` to `state` at its next position and returns the logits for the position
    /// after it.
    pub fn step(&self, state: &mut State, token: TokenId) -> Result<Vec<f32>, EngineError> {
        let mut ws = self.lock()?;
        self.step_in(&mut ws, state, token)
    }

    /// `step` within a pass that already holds the workspace.
    pub(crate) fn step_in(
        &self,
        ws: &mut Workspace,
        state: &mut State,
        token: TokenId,
    ) -> Result<Vec<f32>, EngineError> {
        self.queue_step(ws, state, token, false)?;
        self.device.default_stream().synchronize()?;
        let logits = self.device.read::<f32>(&state.s.logits)?;
        state.pos += 1;
        Ok(logits)
    }

    /// `step` followed by the greedy pick, on the device: the same token (and the same error
    /// for NaN, +inf or all -inf logits) as `sampling::greedy` on `step`'s logits, reading four
    /// integers back instead of the vocabulary's logits.
    pub fn step_greedy(&self, state: &mut State, token: TokenId) -> Result<TokenId, EngineError> {
        let mut ws = self.lock()?;
        self.queue_step(&mut ws, state, token, true)?;
        self.device.default_stream().synchronize()?;
        let n = self.weights.config.vocab_size;
        let pick = self.device.read::<u32>(&state.s.pick)?;
        state.pos += 1;
        let (best, nan, inf) = (pick[0] as usize, pick[1] as usize, pick[2] as usize);
        if nan < n {
            return Err(SampleError::NaN { index: nan }.into());
        }
        if inf < n {
            return Err(SampleError::PositiveInfinity { index: inf }.into());
        }
        if pick[3] != 0 {
            return Err(SampleError::AllMasked { n }.into());
        }
        Ok(best as TokenId)
    }

    /// Queues `token`'s step, up to the logits in `state.s.logits` and, when `greedy`, the
    /// device's pick in `state.s.pick` (no wait, no position update): through the state's
    /// launch graph when `decode_graphs`, else launch by launch.
    fn queue_step(
        &self,
        ws: &mut Workspace,
        state: &mut State,
        token: TokenId,
        greedy: bool,
    ) -> Result<(), EngineError> {
        self.check_step(state, token)?;
        write_tokens(&self.device, &mut state.s, &[token])?;
        let graphed = self.decode_graphs();
        let State { layers, rope_cos, rope_sin, s, max_ctx, pos, graphs } = state;
        let slots = ws.slots.as_mut();
        let queue = || {
            let seq = Sequence { layers, rope_cos, rope_sin, pos: *pos, max_ctx: *max_ctx };
            queue_decode(self, seq, s, slots, greedy)
        };
        if !graphed {
            return queue();
        }
        let graph = graphs.get(greedy);
        // SAFETY: every buffer the step launches with lives in `state` (borrowed mutably for
        // this call), or in `self`'s weights and kernels (borrowed): none is dropped or
        // replaced before `replay` returns, and the workspace lock keeps every other pass off
        // the stream meanwhile. Graphed steps are resident, so the workspace's slots are unused.
        unsafe { self.device.replay(self.device.default_stream(), graph, queue) }?;
        Ok(())
    }

    /// Resets `state`, feeds `prompt` token by token, then picks `n` tokens greedily (argmax,
    /// lowest id on ties), feeding each but the last back. Returns the picked tokens.
    pub fn generate(&self, state: &mut State, prompt: &[TokenId], n: usize) -> Result<Vec<TokenId>, EngineError> {
        self.generate_with(state, prompt, n, PrefillMode::Replay)
    }

    /// `generate` with the prompt fed by `mode`.
    pub fn generate_with(
        &self,
        state: &mut State,
        prompt: &[TokenId],
        n: usize,
        mode: PrefillMode,
    ) -> Result<Vec<TokenId>, EngineError> {
        self.reset(state)?;
        let logits = self.prefill(state, prompt, mode, Logits::Last)?.logits;
        let mut out = Vec::with_capacity(n);
        if n > 0 {
            out.push(sampling::greedy(&logits)?);
        }
        while out.len() < n {
            let t = self.step_greedy(state, out[out.len() - 1])?;
            out.push(t);
        }
        Ok(out)
    }
}

/// One decode step's launches for the token already in `s.tokens` (`seq`'s scratch): the
/// forward pass, the output head into `s.logits` and, when `greedy`, the device's greedy pick
/// into `s.pick`. Launches only (so that `Device::replay` can record it).
fn queue_decode(
    model: &Model,
    seq: Sequence<'_>,
    s: &mut Scratch,
    slots: Option<&mut DecodeSlots>,
    greedy: bool,
) -> Result<(), EngineError> {
    let Model { device, kernels, weights: w, precision, .. } = model;
    let precision = *precision;
    forward(device, kernels, precision, w, s, 1, Mode::Decode { seq, slots }, &mut Timer::off())?;
    let run = Pass::new(device, kernels, Width::One, precision);
    // The final norm wrote `xn`'s q8 blocks too (`Pass::normed`).
    let x = run.normed(&s.xn, w.config.hidden_dim, &s.q8_in);
    run.matvec(w.lm_head(), &x, &s.zero_ids, &mut s.logits)?;
    if greedy {
        let n = w.config.vocab_size;
        let chunks = crate::kernels::pick::pick_chunks(n);
        run.launch(
            &kernels.greedy_chunks,
            GreedyChunksArgs {
                logits: &s.logits,
                best: &mut s.pick_best,
                at: &mut s.pick_at,
                nan_at: &mut s.pick_nan_at,
                inf_at: &mut s.pick_inf_at,
                n,
            },
        )?;
        run.launch(
            &kernels.greedy_pick,
            GreedyPickArgs {
                best: &s.pick_best,
                at: &s.pick_at,
                nan_at: &s.pick_nan_at,
                inf_at: &s.pick_inf_at,
                pick: &mut s.pick,
                chunks,
                n,
            },
        )?;
    }
    Ok(())
}
