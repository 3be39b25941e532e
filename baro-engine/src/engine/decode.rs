//! The decode path (m = 1): one token in, the next token's logits out, from baro kernels only,
//! on any `Device`. Per layer: RMSNorm → mixer (gated delta net or gated attention) → residual
//! → RMSNorm → router top-k → routed experts (gate and up fused: one launch for all k slots,
//! SwiGLU, down) and the sigmoid-gated shared expert → combine in top-k order → residual; then
//! the final norm and the output head.
//!
//! This file holds the wiring only: no kernel body and no driver call. Every kernel is compiled
//! once in `Engine::new`; a step queues launches on the device's default stream and waits once,
//! when the logits are read back.

use baro_dsl::runtime::{Buffer, Device, DeviceArg as A, DeviceError, DeviceKernel};

use crate::engine::prefill::{Logits, PrefillMode, PrefillScratch, RowsKernels};
use crate::engine::staging::{self, BudgetError, CacheStats, DecodeSlots, LayerStaging, MemoryPlan, SlotError};
use crate::engine::state::{LayerState, Scratch, State};
use crate::engine::weights::{AttentionWeights, GdnWeights, Matrix, MixerWeights, ModelSource, MoeWeights, WeightError, Weights};
use crate::kernels;
use crate::model::{ModelConfig, TensorType};
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
    #[error("kernel {name}: expected it in kernels::all(), found no such kernel (a bug in baro)")]
    MissingKernel { name: &'static str },
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
}

impl Default for EngineOptions {
    fn default() -> EngineOptions {
        EngineOptions { max_ctx: 4096, vram_budget: None, expert_slots: 64 }
    }
}

/// The compiled kernels: the decode path's, and batched prefill's rows siblings.
pub(crate) struct Kernels {
    embed_f32: DeviceKernel,
    embed_bf16: DeviceKernel,
    embed_q8_0: DeviceKernel,
    embed_q4_k: DeviceKernel,
    embed_q5_k: DeviceKernel,
    embed_q6_k: DeviceKernel,
    rmsnorm: DeviceKernel,
    head_rmsnorm: DeviceKernel,
    add_rmsnorm: DeviceKernel,
    matvec_f32: DeviceKernel,
    matvec_f16: DeviceKernel,
    matvec_bf16: DeviceKernel,
    matvec_q8_0: DeviceKernel,
    matvec_q4_k: DeviceKernel,
    matvec_q5_k: DeviceKernel,
    matvec_q6_k: DeviceKernel,
    /// The quantized matvecs with x staged in workgroup memory (`kernels::quant`, k ≤ XS_MAX_K).
    matvec_xs: std::collections::HashMap<TensorType, DeviceKernel>,
    rope_neox: DeviceKernel,
    kv_append: DeviceKernel,
    attention_decode: DeviceKernel,
    router_topk: DeviceKernel,
    swiglu_pairs: DeviceKernel,
    moe_combine: DeviceKernel,
    gdn_conv_step: DeviceKernel,
    gdn_step: DeviceKernel,
    gated_rmsnorm: DeviceKernel,
    greedy_chunks: DeviceKernel,
    greedy_pick: DeviceKernel,
    pub(crate) rows: RowsKernels,
}

impl Kernels {
    /// Compiles every kernel of `kernels::all()` and picks the ones decode uses. On a GPU the
    /// kernels compile on all cores at once (each through the device's cache; LLVM contexts
    /// are per compilation), so a cold start costs the slowest kernels, not their sum.
    fn compile(device: &Device) -> Result<Kernels, EngineError> {
        let list = kernels::all();
        let compiled: Vec<Result<DeviceKernel, DeviceError>> = if device.target() == baro_dsl::target::Target::Host {
            list.iter().map(|k| device.compile(k)).collect()
        } else {
            let workers = std::thread::available_parallelism().map_or(1, |n| n.get()).min(list.len().max(1));
            let next = std::sync::atomic::AtomicUsize::new(0);
            let mut slots: Vec<Option<Result<DeviceKernel, DeviceError>>> = (0..list.len()).map(|_| None).collect();
            let done = std::sync::Mutex::new(&mut slots);
            std::thread::scope(|s| {
                for _ in 0..workers {
                    s.spawn(|| loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(k) = list.get(i) else { break };
                        let r = device.compile(k);
                        done.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(r);
                    });
                }
            });
            slots.into_iter().map(|r| r.expect("every kernel index is taken by one worker")).collect()
        };
        let mut all = std::collections::HashMap::new();
        for (k, c) in list.iter().zip(compiled) {
            all.insert(k.name.clone(), c?);
        }
        let take = |name: &'static str| all.get(name).cloned().ok_or(EngineError::MissingKernel { name });
        Ok(Kernels {
            embed_f32: take("embed_f32")?,
            embed_bf16: take("embed_bf16")?,
            embed_q8_0: take("embed_q8_0")?,
            embed_q4_k: take("embed_q4_k")?,
            embed_q5_k: take("embed_q5_k")?,
            embed_q6_k: take("embed_q6_k")?,
            rmsnorm: take("rmsnorm")?,
            head_rmsnorm: take("head_rmsnorm")?,
            add_rmsnorm: take("add_rmsnorm")?,
            matvec_f32: take("matvec_f32")?,
            matvec_f16: take("matvec_f16")?,
            matvec_bf16: take("matvec_bf16")?,
            matvec_q8_0: take("matvec_q8_0")?,
            matvec_q4_k: take("matvec_q4_k")?,
            matvec_q5_k: take("matvec_q5_k")?,
            matvec_q6_k: take("matvec_q6_k")?,
            matvec_xs: kernels::quant::XS_KERNELS
                .into_iter()
                .map(|(ty, name, _)| Ok((ty, take(name)?)))
                .collect::<Result<_, EngineError>>()?,
            rope_neox: take("rope_neox")?,
            kv_append: take("kv_append")?,
            attention_decode: take("attention_decode")?,
            router_topk: take("router_topk")?,
            swiglu_pairs: take("swiglu_pairs")?,
            moe_combine: take("moe_combine")?,
            gdn_conv_step: take("gdn_conv_step")?,
            gdn_step: take("gdn_step")?,
            gated_rmsnorm: take("gated_rmsnorm")?,
            greedy_chunks: take("greedy_chunks")?,
            greedy_pick: take("greedy_pick")?,
            rows: RowsKernels::take(&all)?,
        })
    }

    /// The m = 1 matvec for a `ty` matrix of `cols` columns: a quantized one with x staged in
    /// workgroup memory where it fits (the same bits, fewer memory requests), else the plain one.
    /// The choice is `kernels::decode_matvec_name`'s (which benchmarks measure).
    pub(crate) fn matvec_for(&self, ty: TensorType, cols: usize) -> &DeviceKernel {
        let name = kernels::decode_matvec_name(ty, cols);
        if let Some(k) = self.matvec_xs.get(&ty).filter(|k| k.name() == name) {
            return k;
        }
        let plain = match ty {
            TensorType::F32 => &self.matvec_f32,
            TensorType::F16 => &self.matvec_f16,
            TensorType::BF16 => &self.matvec_bf16,
            TensorType::Q8_0 => &self.matvec_q8_0,
            TensorType::Q4_K => &self.matvec_q4_k,
            TensorType::Q5_K => &self.matvec_q5_k,
            TensorType::Q6_K => &self.matvec_q6_k,
        };
        debug_assert_eq!(plain.name(), name, "matvec_for and kernels::decode_matvec_name disagree");
        plain
    }
}

/// A matrix's raw bytes as the matvec `kernel` reads them: little-endian u32 words where its
/// weight parameter (the second) is `&[u32]` and the matrix holds bytes (the `_xs` quantized
/// matvecs), else the buffer itself.
pub fn weight_arg<'a>(kernel: &baro_dsl::Kernel, w: &'a Buffer) -> A<'a> {
    let words = matches!(kernel.params.get(1).map(|p| &p.kind), Some(baro_dsl::ir::ParamKind::Buffer { elem: baro_dsl::ScalarType::U32, .. }));
    if words && w.elem() == baro_dsl::ScalarType::U8 {
        A::words(w)
    } else {
        A::buf(w)
    }
}

/// A model on a device with one sequence's state.
pub struct Engine {
    pub(crate) device: Device,
    pub(crate) kernels: Kernels,
    pub(crate) weights: Weights,
    pub(crate) state: State,
    /// Batched prefill's chunk buffers, allocated at the first batched prefill.
    pub(crate) prefill_scratch: Option<PrefillScratch>,
    /// The negative control's opt-out (`set_reordered_attention`).
    pub(crate) reordered_attention: bool,
    /// Batched prefill's per-stage seconds when profiling (`set_prefill_profile`).
    pub(crate) prefill_profile: Option<std::collections::BTreeMap<&'static str, f64>>,
    pub(crate) memory: MemoryPlan,
    /// Staged mode's decode expert cache; `None` when the experts are resident.
    pub(crate) slots: Option<DecodeSlots>,
    /// Staged mode's whole-layer sets for batched prefill, allocated at the first one.
    pub(crate) layer_staging: Option<LayerStaging>,
}

/// The device and kernels a launch needs (borrowed apart from the state it writes).
pub(super) struct Launcher<'a> {
    pub(super) device: &'a Device,
    pub(super) k: &'a Kernels,
}

impl Launcher<'_> {
    fn launch(&self, kernel: &DeviceKernel, args: &mut [A<'_>]) -> Result<(), DeviceError> {
        self.device.launch(self.device.default_stream(), kernel, args)
    }

    /// y[slot] = w[ids[slot]] · x[slot · x_stride ..] for `n_slots` slots.
    fn matvec(&self, w: &Matrix, x: &Buffer, ids: &Buffer, y: &mut Buffer, x_stride: usize, n_slots: usize) -> Result<(), DeviceError> {
        let kernel = self.k.matvec_for(w.ty, w.cols);
        self.launch(kernel, &mut [A::buf(x), weight_arg(kernel.kernel(), &w.buf), A::buf(ids), A::buf_mut(y), A::from(w.cols), A::from(w.rows), A::from(x_stride), A::from(n_slots)])
    }

    fn rmsnorm(&self, x: &Buffer, w: &Buffer, y: &mut Buffer, n: usize, eps: f32) -> Result<(), DeviceError> {
        self.launch(&self.k.rmsnorm, &mut [A::buf(x), A::buf(w), A::buf_mut(y), A::from(n), A::from(eps)])
    }

    /// h = a + b, then y = rmsnorm(h, w): the residual add and the norm after it, one launch.
    fn add_rmsnorm(&self, a: &Buffer, b: &Buffer, w: &Buffer, h: &mut Buffer, y: &mut Buffer, n: usize, eps: f32) -> Result<(), DeviceError> {
        self.launch(&self.k.add_rmsnorm, &mut [A::buf(a), A::buf(b), A::buf(w), A::buf_mut(h), A::buf_mut(y), A::from(n), A::from(eps)])
    }

    /// h = silu(gate) · up for `n_slots` slots of a fused gate-and-up output `gu` (2n per slot).
    fn swiglu_pairs(&self, gu: &Buffer, h: &mut Buffer, n: usize, n_slots: usize) -> Result<(), DeviceError> {
        self.launch(&self.k.swiglu_pairs, &mut [A::buf(gu), A::buf_mut(h), A::from(n), A::from(n_slots)])
    }
}

impl Engine {
    /// Compiles the decode kernels, uploads the weights of `source` and allocates one
    /// sequence's state.
    pub fn new(device: Device, source: &ModelSource, options: EngineOptions) -> Result<Engine, EngineError> {
        let cfg = source.config()?;
        if cfg.conv_kernel < 2 {
            return Err(EngineError::Unsupported { what: "conv kernel length", expected: "at least 2".into(), found: cfg.conv_kernel.to_string() });
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
        let (memory, slots) = staging::place_experts(&device, source, &cfg, &mut weights, budget, fixed, options.expert_slots)?;
        Ok(Engine { device, kernels, weights, state, prefill_scratch: None, reordered_attention: false, prefill_profile: None, memory, slots, layer_staging: None })
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
            return Err(EngineError::Unsupported { what: "snapshot", expected: format!("a context of {} positions", self.state.max_ctx), found: format!("{}", copy.max_ctx) });
        }
        self.state = copy;
        Ok(())
    }

    /// Feeds `token` at the next position and returns the logits for the position after it.
    pub fn step(&mut self, token: TokenId) -> Result<Vec<f32>, EngineError> {
        self.queue_step(token)?;
        self.device.default_stream().synchronize()?;
        let logits = self.device.read::<f32>(&self.state.s.logits)?;
        self.state.pos += 1;
        Ok(logits)
    }

    /// `step` followed by the greedy pick, on the device: the same token (and the same error
    /// for NaN, +inf or all -inf logits) as `sampling::greedy` on `step`'s logits, reading four
    /// integers back instead of the vocabulary's logits.
    pub fn step_greedy(&mut self, token: TokenId) -> Result<TokenId, EngineError> {
        self.queue_step(token)?;
        let run = Launcher { device: &self.device, k: &self.kernels };
        let s = &mut self.state.s;
        let n = self.weights.config.vocab_size;
        let chunks = crate::kernels::pick::pick_chunks(n);
        run.launch(
            &self.kernels.greedy_chunks,
            &mut [A::buf(&s.logits), A::buf_mut(&mut s.pick_best), A::buf_mut(&mut s.pick_at), A::buf_mut(&mut s.pick_nan_at), A::buf_mut(&mut s.pick_inf_at), A::from(n)],
        )?;
        run.launch(
            &self.kernels.greedy_pick,
            &mut [A::buf(&s.pick_best), A::buf(&s.pick_at), A::buf(&s.pick_nan_at), A::buf(&s.pick_inf_at), A::buf_mut(&mut s.pick), A::from(chunks), A::from(n)],
        )?;
        self.device.default_stream().synchronize()?;
        let pick = self.device.read::<u32>(&s.pick)?;
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

    /// Queues `token`'s step, up to the logits in `state.s.logits` (no wait, no position update).
    fn queue_step(&mut self, token: TokenId) -> Result<(), EngineError> {
        self.check_step(&self.state, token)?;
        let cfg = &self.weights.config;
        let pos = self.state.pos;
        let run = Launcher { device: &self.device, k: &self.kernels };
        let State { layers, rope_cos, rope_sin, s, max_ctx, .. } = &mut self.state;
        let w = &self.weights;
        let mut slots = self.slots.as_mut();
        let (h, eps) = (cfg.hidden_dim, cfg.rms_eps);
        self.device.write(&mut s.token, &[token])?;
        let embed = match w.token_embd.ty {
            TensorType::BF16 => &self.kernels.embed_bf16,
            TensorType::Q8_0 => &self.kernels.embed_q8_0,
            TensorType::Q4_K => &self.kernels.embed_q4_k,
            TensorType::Q5_K => &self.kernels.embed_q5_k,
            TensorType::Q6_K => &self.kernels.embed_q6_k,
            // F16 is widened to F32 at load.
            TensorType::F32 | TensorType::F16 => &self.kernels.embed_f32,
        };
        run.launch(embed, &mut [A::buf(&s.token), A::buf(&w.token_embd.buf), A::buf_mut(&mut s.x), A::from(0usize), A::from(h)])?;
        // Each residual add is fused with the norm after it: the layer's post-attention norm,
        // then the next layer's input norm (the output norm after the last layer).
        run.rmsnorm(&s.x, w.layers.first().map_or(&w.output_norm, |l| &l.attn_norm), &mut s.xn, h, eps)?;
        for (i, (lw, ls)) in w.layers.iter().zip(layers.iter_mut()).enumerate() {
            match (&lw.mixer, ls) {
                (MixerWeights::Gdn(g), LayerState::Gdn { conv_ring, ssm }) => gdn(&run, cfg, g, conv_ring, ssm, s, pos)?,
                (MixerWeights::Attention(a), LayerState::Attention { k_cache, v_cache }) => {
                    let rope = Rope { cos: rope_cos, sin: rope_sin };
                    attention(&run, cfg, a, k_cache, v_cache, &rope, s, pos, *max_ctx)?
                }
                // Weights and state are both built from `cfg.layer_kinds`.
                _ => return Err(EngineError::Unsupported { what: "layer state", expected: "the weights' layer kind".into(), found: "another kind (a bug in baro)".into() }),
            }
            run.add_rmsnorm(&s.x, &s.mix, &lw.post_attention_norm, &mut s.h, &mut s.xn, h, eps)?;
            moe(&run, cfg, &lw.moe, slots.as_deref_mut().map(|d| (d, i)), s)?;
            let next_norm = w.layers.get(i + 1).map_or(&w.output_norm, |l| &l.attn_norm);
            run.add_rmsnorm(&s.h, &s.mix, next_norm, &mut s.x, &mut s.xn, h, eps)?;
        }
        Ok(run.matvec(w.lm_head(), &s.xn, &s.plain_ids, &mut s.logits, 0, 1)?)
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
    pub fn generate_with(&mut self, prompt: &[TokenId], n: usize, mode: PrefillMode) -> Result<Vec<TokenId>, EngineError> {
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

pub(super) struct Rope<'a> {
    pub(super) cos: &'a Buffer,
    pub(super) sin: &'a Buffer,
}

/// The gated delta net on `s.xn`, into `s.mix`.
fn gdn(run: &Launcher<'_>, cfg: &ModelConfig, w: &GdnWeights, conv_ring: &mut Buffer, ssm: &mut Buffer, s: &mut Scratch, pos: usize) -> Result<(), DeviceError> {
    let ids = &s.plain_ids;
    run.matvec(&w.qkv, &s.xn, ids, &mut s.qkv, 0, 1)?;
    run.matvec(&w.gate_z, &s.xn, ids, &mut s.z, 0, 1)?;
    run.matvec(&w.beta_alpha, &s.xn, ids, &mut s.ba, 0, 1)?;
    gdn_recurrent(run, cfg, w, conv_ring, ssm, s, pos)?;
    run.launch(&run.k.gated_rmsnorm, &mut [A::buf(&s.o), A::buf(&s.z), A::buf(&w.norm), A::buf_mut(&mut s.o_normed), A::from(cfg.gdn_value_dim), A::from(cfg.gdn_n_value_heads), A::from(cfg.rms_eps)])?;
    run.matvec(&w.out, &s.o_normed, &s.plain_ids, &mut s.mix, 0, 1)
}

/// The GDN's stateful part at `pos`: the conv step on `s.qkv` through `conv_ring`, then the
/// delta-rule step with `s.ba` (beta | alpha) on `ssm`, into `s.o`. What a sequence runs on its
/// own state in a batched decode step.
pub(super) fn gdn_recurrent(run: &Launcher<'_>, cfg: &ModelConfig, w: &GdnWeights, conv_ring: &mut Buffer, ssm: &mut Buffer, s: &mut Scratch, pos: usize) -> Result<(), DeviceError> {
    run.launch(&run.k.gdn_conv_step, &mut [A::buf(&s.qkv), A::buf(&w.conv), A::buf_mut(conv_ring), A::buf_mut(&mut s.conv_out), A::from(cfg.gdn_conv_dim()), A::from(cfg.conv_kernel), A::from(pos)])?;
    let (dk, dv) = (cfg.gdn_key_dim, cfg.gdn_value_dim);
    let q_scale = cfg.gdn_q_scale();
    run.launch(
        &run.k.gdn_step,
        &mut [
            A::buf(&s.conv_out),
            A::buf(&s.ba),
            A::buf(&w.ssm_a),
            A::buf(&w.dt_bias),
            A::buf_mut(ssm),
            A::buf_mut(&mut s.o),
            A::from(dk),
            A::from(dv),
            A::from(cfg.gdn_n_key_heads),
            A::from(cfg.gdn_n_value_heads),
            A::from(true),
            A::from(q_scale),
        ],
    )
}

/// Full gated attention on `s.xn` at position `pos`, into `s.mix`.
#[allow(clippy::too_many_arguments)]
fn attention(run: &Launcher<'_>, cfg: &ModelConfig, w: &AttentionWeights, k_cache: &mut Buffer, v_cache: &mut Buffer, rope: &Rope<'_>, s: &mut Scratch, pos: usize, max_ctx: usize) -> Result<(), DeviceError> {
    let ids = &s.plain_ids;
    let (hd, nh, nkv, eps) = (cfg.head_dim, cfg.n_heads, cfg.n_kv_heads, cfg.rms_eps);
    run.matvec(&w.q, &s.xn, ids, &mut s.q_gate, 0, 1)?;
    run.matvec(&w.k, &s.xn, ids, &mut s.k_raw, 0, 1)?;
    run.matvec(&w.v, &s.xn, ids, &mut s.v, 0, 1)?;
    run.launch(&run.k.head_rmsnorm, &mut [A::buf(&s.q_gate), A::buf(&w.q_norm), A::buf_mut(&mut s.q), A::from(hd), A::from(2 * hd), A::from(hd), A::from(nh), A::from(eps)])?;
    run.launch(&run.k.head_rmsnorm, &mut [A::buf(&s.k_raw), A::buf(&w.k_norm), A::buf_mut(&mut s.k), A::from(hd), A::from(hd), A::from(hd), A::from(nkv), A::from(eps)])?;
    attention_cached(run, cfg, k_cache, v_cache, rope, s, pos, max_ctx)?;
    run.matvec(&w.o, &s.attn, &s.plain_ids, &mut s.mix, 0, 1)
}

/// Attention's stateful part at `pos`: RoPE on `s.q` and `s.k`, the KV append, attention over
/// positions 0..=pos gated by `s.q_gate`, into `s.attn`. What a sequence runs on its own
/// state in a batched decode step.
#[allow(clippy::too_many_arguments)]
pub(super) fn attention_cached(run: &Launcher<'_>, cfg: &ModelConfig, k_cache: &mut Buffer, v_cache: &mut Buffer, rope: &Rope<'_>, s: &mut Scratch, pos: usize, max_ctx: usize) -> Result<(), DeviceError> {
    let (hd, nh, nkv) = (cfg.head_dim, cfg.n_heads, cfg.n_kv_heads);
    for (x, n) in [(&mut s.q, nh), (&mut s.k, nkv)] {
        run.launch(&run.k.rope_neox, &mut [A::buf_mut(x), A::buf(rope.cos), A::buf(rope.sin), A::from(pos), A::from(cfg.rope_dim), A::from(hd), A::from(n)])?;
    }
    run.launch(&run.k.kv_append, &mut [A::buf(&s.k), A::buf(&s.v), A::buf_mut(k_cache), A::buf_mut(v_cache), A::from(pos), A::from(nkv * hd)])?;
    let scale = (1.0 / (hd as f64).sqrt()) as f32;
    run.launch(
        &run.k.attention_decode,
        &mut [
            A::buf(&s.q),
            A::buf(k_cache),
            A::buf(v_cache),
            A::buf(&s.q_gate),
            A::buf_mut(&mut s.probs_attn),
            A::buf_mut(&mut s.attn),
            A::from(hd),
            A::from(nh),
            A::from(nkv),
            A::from(pos + 1),
            A::from(max_ctx),
            A::from(2 * hd),
            A::from(hd),
            A::from(scale),
        ],
    )
}

/// The MoE block on `s.xn`, into `s.mix`: router, routed experts, shared expert, combine.
/// Staged (`slots` = the decode cache and this layer's index): the router's ids come back to
/// the host and the same expert kernels run on the layer's slots by slot id.
fn moe(run: &Launcher<'_>, cfg: &ModelConfig, w: &MoeWeights, slots: Option<(&mut DecodeSlots, usize)>, s: &mut Scratch) -> Result<(), EngineError> {
    let ids = &s.plain_ids;
    let (k, fi, fs, h) = (cfg.n_experts_used, cfg.expert_ffn_dim, cfg.shared_ffn_dim, cfg.hidden_dim);
    run.matvec(&w.router, &s.xn, ids, &mut s.router_logits, 0, 1)?;
    run.launch(
        &run.k.router_topk,
        &mut [
            A::buf(&s.router_logits),
            A::buf_mut(&mut s.router_probs),
            A::buf_mut(&mut s.expert_ids),
            A::buf_mut(&mut s.expert_weights),
            A::from(cfg.n_experts),
            A::from(k),
        ],
    )?;
    let (experts, expert_ids) = match (&w.experts, slots) {
        (Some(resident), _) => (resident, &s.expert_ids),
        (None, Some((decode, layer))) => decode.map(run.device, run.device.default_stream(), layer, &s.expert_ids)?,
        (None, None) => return Err(EngineError::Unsupported { what: "routed experts", expected: "resident or staged".into(), found: "neither (a bug in baro)".into() }),
    };
    run.matvec(&experts.gate_up, &s.xn, expert_ids, &mut s.gate_up, 0, k)?;
    run.swiglu_pairs(&s.gate_up, &mut s.act, fi, k)?;
    run.matvec(&experts.down, &s.act, expert_ids, &mut s.down, fi, k)?;
    run.matvec(&w.gate_up_shexp, &s.xn, ids, &mut s.sh_gate_up, 0, 1)?;
    run.swiglu_pairs(&s.sh_gate_up, &mut s.sh_act, fs, 1)?;
    run.matvec(&w.down_shexp, &s.sh_act, ids, &mut s.sh_out, 0, 1)?;
    run.matvec(&w.shared_gate, &s.xn, ids, &mut s.sh_logit, 0, 1)?;
    run.launch(&run.k.moe_combine, &mut [A::buf(&s.down), A::buf(&s.expert_weights), A::buf(&s.sh_out), A::buf(&s.sh_logit), A::buf_mut(&mut s.mix), A::from(h), A::from(k)])?;
    Ok(())
}
