//! The engine and its decode path (m = 1): one token in, the next token's logits out, from
//! baro kernels only, on any `Device`. The step is `forward::forward` in `Mode::Decode` (the
//! m = 1 kernels: embed, per layer the mixer and the MoE, the final norm) and the output head.
//!
//! This file holds the wiring only: no kernel body and no driver call. Every kernel is compiled
//! once in `Engine::new` (`registry`); a step writes its token, queues launches on the
//! device's default stream and waits once, when the logits are read back. With resident
//! experts and `EngineOptions::graphs` (the default) the step's launches are recorded and
//! replayed as one launch graph (`Device::replay`: on CUDA one `cuGraphLaunch`, updated in
//! place from step to step): the same kernels with the same arguments in the same order.

use baro_dsl::runtime::{Device, DeviceArg as A, DeviceError, GraphStats, LaunchGraph};

use crate::engine::forward::{forward, write_tokens, Mode, Pass, Sequence, Timer, Width};
use crate::engine::prefill::{Logits, PrefillMode};
use crate::engine::registry::Kernels;
use crate::engine::scratch::Scratch;
use crate::engine::staging::{self, BudgetError, CacheStats, DecodeSlots, LayerStaging, MemoryPlan, SlotError};
use crate::engine::state::State;
use crate::engine::weights::{ModelSource, WeightError, Weights};
use crate::model::ModelConfig;
use crate::sampling::{self, SampleError};
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

/// Engine settings.
#[derive(Clone, Debug)]
pub struct EngineOptions {
    /// Positions the KV cache holds (capped by the model's context length when it has one).
    pub max_ctx: usize,
    /// Device bytes to plan against; `None`: the device's free memory (the host: no limit).
    pub vram_budget: Option<u64>,
    /// Decode expert slots per layer in staged mode (at least top-k; capped at the expert
    /// count and at what the budget holds).
    pub expert_slots: usize,
    /// What the quantized matvecs multiply the weights with.
    pub precision: Precision,
    /// Replay each resident decode step (`step`, `step_greedy`) as a launch graph instead of
    /// launching its kernels one by one; the same bits either way. Staged decode, prefill and
    /// the batched step always launch one by one.
    pub graphs: bool,
}

impl Default for EngineOptions {
    fn default() -> EngineOptions {
        EngineOptions { max_ctx: 4096, vram_budget: None, expert_slots: 64, precision: Precision::F32, graphs: true }
    }
}

/// The launch graphs of resident decode: one per kind of step, so alternating `step` and
/// `step_greedy` updates each graph rather than rebuilding one.
#[derive(Default)]
pub(crate) struct DecodeGraphs {
    logits: LaunchGraph,
    greedy: LaunchGraph,
}

/// The activations the quantized matvecs (Q8_0, Q4_K, Q5_K, Q6_K weights) read. Either way
/// decode, batched prefill and the batched step give the same bits; the modes differ from
/// each other.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Precision {
    /// The f32 activations themselves, each weight dequantized to f32 inside the dot.
    #[default]
    F32,
    /// Activations quantized to 8-bit blocks of 32 (`kernels::q8act`: a scale per block,
    /// int8 rounded half to even) and exact integer dots per block; only the scales are
    /// multiplied in f32, in a declared order. Matrices of other types (F32, F16, BF16) and
    /// inputs whose length is not a multiple of 32 keep the f32 path.
    Q8,
}

impl Precision {
    pub const NAMES: [&'static str; 2] = ["f32", "q8"];

    pub fn name(self) -> &'static str {
        match self {
            Precision::F32 => "f32",
            Precision::Q8 => "q8",
        }
    }
}

impl std::str::FromStr for Precision {
    type Err = String;

    fn from_str(s: &str) -> Result<Precision, String> {
        match s {
            "f32" => Ok(Precision::F32),
            "q8" => Ok(Precision::Q8),
            other => Err(format!("precision: expected one of f32, q8, found {other:?}")),
        }
    }
}

/// A model on a device with one sequence's state.
pub struct Engine {
    pub(crate) device: Device,
    pub(crate) kernels: Kernels,
    pub(crate) weights: Weights,
    pub(crate) state: State,
    pub(crate) precision: Precision,
    /// The rows pass's buffers (batched prefill chunks, batched decode steps), allocated at the
    /// first one.
    pub(crate) rows_scratch: Option<Scratch>,
    /// The negative control's opt-out (`set_reordered_attention`).
    pub(crate) reordered_attention: bool,
    /// Batched prefill's per-stage seconds when profiling (`set_prefill_profile`).
    pub(crate) prefill_profile: Option<std::collections::BTreeMap<&'static str, f64>>,
    pub(crate) memory: MemoryPlan,
    /// Staged mode's decode expert cache; `None` when the experts are resident.
    pub(crate) slots: Option<DecodeSlots>,
    /// Staged mode's whole-layer sets for batched prefill, allocated at the first one.
    pub(crate) layer_staging: Option<LayerStaging>,
    /// Resident decode's launch graphs; `None` with `EngineOptions::graphs` off.
    pub(crate) graphs: Option<DecodeGraphs>,
}

impl Engine {
    /// Compiles the decode kernels, uploads the weights of `source` and allocates one
    /// sequence's state.
    pub fn new(device: Device, source: &ModelSource, options: EngineOptions) -> Result<Engine, EngineError> {
        let cfg = source.config()?;
        if cfg.conv_kernel < 2 {
            return Err(EngineError::Unsupported {
                what: "conv kernel length",
                expected: "at least 2".into(),
                found: cfg.conv_kernel.to_string(),
            });
        }
        let max_ctx = match cfg.context_length {
            0 => options.max_ctx,
            n => options.max_ctx.min(n),
        }
        .max(1);
        let budget = match options.vram_budget {
            Some(b) => Some(b),
            None => device.memory_info()?.map(|m| m.free),
        };
        let kernels = Kernels::compile(&device)?;
        let before = device.allocated_bytes();
        let state = State::new(&device, &cfg, max_ctx)?;
        let mut weights = Weights::load_dense(&device, source, &cfg)?;
        let fixed = device.allocated_bytes() - before;
        let (memory, slots) =
            staging::place_experts(&device, source, &cfg, &mut weights, budget, fixed, options.expert_slots)?;
        let graphs = options.graphs.then(DecodeGraphs::default);
        Ok(Engine {
            device,
            kernels,
            weights,
            state,
            precision: options.precision,
            rows_scratch: None,
            reordered_attention: false,
            prefill_profile: None,
            memory,
            slots,
            layer_staging: None,
            graphs,
        })
    }

    /// Whether decode steps replay launch graphs: `EngineOptions::graphs` with resident
    /// experts (staged decode copies experts between launches, so it launches one by one).
    pub fn decode_graphs(&self) -> bool {
        self.graphs.is_some() && self.slots.is_none()
    }

    /// The counters of the decode graphs (`step`'s and `step_greedy`'s, summed); `None` when
    /// graphs are off.
    pub fn decode_graph_stats(&self) -> Option<GraphStats> {
        let g = self.graphs.as_ref()?;
        let (a, b) = (g.logits.stats(), g.greedy.stats());
        Some(GraphStats {
            replays: a.replays + b.replays,
            builds: a.builds + b.builds,
            updated_nodes: a.updated_nodes + b.updated_nodes,
        })
    }

    /// The activations the quantized matvecs read.
    pub fn precision(&self) -> Precision {
        self.precision
    }

    /// Where the weights live and why.
    pub fn memory_plan(&self) -> &MemoryPlan {
        &self.memory
    }

    /// Staged mode's decode expert cache (its counters, slot count and store); `None` when
    /// resident.
    pub fn decode_slots(&self) -> Option<&DecodeSlots> {
        self.slots.as_ref()
    }

    /// Staged mode's prefill staging sets, once a batched prefill has used them.
    pub fn layer_staging(&self) -> Option<&LayerStaging> {
        self.layer_staging.as_ref()
    }

    /// The decode expert cache's counters summed over layers; `None` when resident.
    pub fn expert_cache_stats(&self) -> Option<CacheStats> {
        self.slots.as_ref().map(DecodeSlots::stats)
    }

    pub fn config(&self) -> &ModelConfig {
        &self.weights.config
    }

    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Positions the sequence can hold (the KV cache's capacity).
    pub fn max_context(&self) -> usize {
        self.state.max_ctx
    }

    /// Tokens fed since the last reset.
    pub fn position(&self) -> usize {
        self.state.pos
    }

    /// Starts a new sequence.
    pub fn reset(&mut self) -> Result<(), EngineError> {
        self.state.reset(&self.device)?;
        Ok(())
    }

    /// A copy of the sequence's state: `restore` it to resume from this point.
    pub fn snapshot(&self) -> Result<State, EngineError> {
        Ok(self.state.snapshot(&self.device, &self.weights.config)?)
    }

    /// Resumes from `snapshot`, which must come from this engine (same model and context).
    pub fn restore(&mut self, snapshot: &State) -> Result<(), EngineError> {
        let copy = snapshot.snapshot(&self.device, &self.weights.config)?;
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

    /// Feeds `token` at the next position and returns the logits for the position after it.
    pub fn step(&mut self, token: TokenId) -> Result<Vec<f32>, EngineError> {
        self.queue_step(token, false)?;
        self.device.default_stream().synchronize()?;
        let logits = self.device.read::<f32>(&self.state.s.logits)?;
        self.state.pos += 1;
        Ok(logits)
    }

    /// `step` followed by the greedy pick, on the device: the same token (and the same error
    /// for NaN, +inf or all -inf logits) as `sampling::greedy` on `step`'s logits, reading four
    /// integers back instead of the vocabulary's logits.
    pub fn step_greedy(&mut self, token: TokenId) -> Result<TokenId, EngineError> {
        self.queue_step(token, true)?;
        self.device.default_stream().synchronize()?;
        let n = self.weights.config.vocab_size;
        let pick = self.device.read::<u32>(&self.state.s.pick)?;
        self.state.pos += 1;
        let (best, nan, inf) = (pick[0] as usize, pick[1] as usize, pick[2] as usize);
        if nan < n {
            return Err(crate::sampling::SampleError::NaN { index: nan }.into());
        }
        if inf < n {
            return Err(crate::sampling::SampleError::PositiveInfinity { index: inf }.into());
        }
        if pick[3] != 0 {
            return Err(crate::sampling::SampleError::AllMasked { n }.into());
        }
        Ok(best as TokenId)
    }

    /// Queues `token`'s step, up to the logits in `state.s.logits` and, when `greedy`, the
    /// device's pick in `state.s.pick` (no wait, no position update): through a launch graph
    /// when `decode_graphs`, else launch by launch.
    fn queue_step(&mut self, token: TokenId, greedy: bool) -> Result<(), EngineError> {
        self.check_step(&self.state, token)?;
        write_tokens(&self.device, &mut self.state.s, &[token])?;
        let graphed = self.decode_graphs();
        let Engine { device, kernels, weights, state, precision, slots, graphs, .. } = self;
        let mut queue = || queue_decode(device, kernels, *precision, weights, state, slots.as_mut(), greedy);
        match graphs.as_mut() {
            Some(g) if graphed => {
                let graph = if greedy { &mut g.greedy } else { &mut g.logits };
                // SAFETY: every buffer the step launches with lives in `state`, `weights` or
                // `kernels`' scratch, fields of this engine that the closure only borrows: none
                // is dropped or replaced before `replay` returns, and nothing else touches them.
                unsafe { device.replay(device.default_stream(), graph, queue) }?;
                Ok(())
            }
            _ => queue(),
        }
    }

    /// What `step` would refuse for `token` fed to `state` (a token past the vocabulary, a
    /// full context), checked without touching the device.
    pub fn check_step(&self, state: &State, token: TokenId) -> Result<(), EngineError> {
        let vocab = self.weights.config.vocab_size;
        if token as usize >= vocab {
            return Err(EngineError::BadToken { token, vocab });
        }
        if state.pos >= state.max_ctx {
            return Err(EngineError::ContextFull { pos: state.pos, max_ctx: state.max_ctx });
        }
        Ok(())
    }

    /// Resets, feeds `prompt` token by token, then picks `n` tokens greedily (argmax, lowest
    /// id on ties), feeding each but the last back. Returns the picked tokens.
    pub fn generate(&mut self, prompt: &[TokenId], n: usize) -> Result<Vec<TokenId>, EngineError> {
        self.generate_with(prompt, n, PrefillMode::Replay)
    }

    /// `generate` with the prompt fed by `mode`.
    pub fn generate_with(
        &mut self,
        prompt: &[TokenId],
        n: usize,
        mode: PrefillMode,
    ) -> Result<Vec<TokenId>, EngineError> {
        self.reset()?;
        let logits = self.prefill(prompt, mode, Logits::Last)?.logits;
        let mut out = Vec::with_capacity(n);
        if n > 0 {
            out.push(sampling::greedy(&logits)?);
        }
        while out.len() < n {
            let t = self.step_greedy(out[out.len() - 1])?;
            out.push(t);
        }
        Ok(out)
    }

    /// A fresh sequence state (position 0, zeroed) of this engine's shapes and context, for a
    /// caller that keeps several sequences and swaps each in with `swap_state` to step it.
    pub fn new_state(&self) -> Result<State, EngineError> {
        Ok(State::new(&self.device, &self.weights.config, self.state.max_ctx)?)
    }

    /// Exchanges the engine's sequence state with `other` (no copy): `step` then advances the
    /// sequence `other` held.
    pub fn swap_state(&mut self, other: &mut State) {
        std::mem::swap(&mut self.state, other);
    }
}

/// One decode step's launches for the token already in `state.s.tokens`: the forward pass,
/// the output head into `state.s.logits` and, when `greedy`, the device's greedy pick into
/// `state.s.pick`. Launches only (so that `Device::replay` can record it).
fn queue_decode(
    device: &Device,
    kernels: &Kernels,
    precision: Precision,
    w: &Weights,
    state: &mut State,
    slots: Option<&mut DecodeSlots>,
    greedy: bool,
) -> Result<(), EngineError> {
    let State { layers, rope_cos, rope_sin, s, max_ctx, pos } = state;
    let seq = Sequence { layers, rope_cos, rope_sin, pos: *pos, max_ctx: *max_ctx };
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
            &mut [
                A::buf(&s.logits),
                A::buf_mut(&mut s.pick_best),
                A::buf_mut(&mut s.pick_at),
                A::buf_mut(&mut s.pick_nan_at),
                A::buf_mut(&mut s.pick_inf_at),
                A::from(n),
            ],
        )?;
        run.launch(
            &kernels.greedy_pick,
            &mut [
                A::buf(&s.pick_best),
                A::buf(&s.pick_at),
                A::buf(&s.pick_nan_at),
                A::buf(&s.pick_inf_at),
                A::buf_mut(&mut s.pick),
                A::from(chunks),
                A::from(n),
            ],
        )?;
    }
    Ok(())
}
