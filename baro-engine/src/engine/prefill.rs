//! Prompt processing: **batched** prefill through the rows siblings of the decode kernels
//! (every `_rows` kernel proven, while the crate compiles, to compute row for row what its
//! m = 1 kernel computes), or **replay**, the decode step applied to each prompt token, the
//! comparison arm of the identity gate.
//!
//! A batched chunk of T tokens at position p runs, per layer, the same operations as T decode
//! steps: the projections over rows (a workgroup shares a weight row across 8 rows), the GDN
//! conv and delta-rule scan over rows with their state carried row to row, RoPE and the KV
//! append at positions p..p+T, causal attention per row in the decode kernel's order, and
//! the MoE block with its (token, k) pairs sorted by expert on the device (`moe_count`,
//! `moe_scatter`), gathered, projected per pair, gathered back and summed in top-k order.
//! Chunks cross freely: the KV cache and GDN state carry from one to the next. With staged
//! experts each layer's experts stream into one of two `LayerStaging` sets on a copy stream
//! while the previous layer computes (events, no host wait); the MoE reads the set as it would
//! the resident stacks. The rows launch helpers and buffers here also serve the batched decode
//! step across sequences (`batch_step`). Wiring only: no kernel body and no driver call.

use std::collections::HashMap;

use baro_dsl::runtime::{Buffer, Device, DeviceArg as A, DeviceError, DeviceKernel};
use baro_dsl::ScalarType;

use crate::engine::decode::{Engine, EngineError};
use crate::engine::staging::{DecodeSlots, ExpertStore, LayerStaging};
use crate::engine::state::LayerState;
use crate::engine::weights::{AttentionWeights, ExpertMatrices, GdnWeights, Matrix, MixerWeights, MoeWeights, Weights};
use crate::model::{ModelConfig, TensorType};
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

/// The compiled rows kernels.
pub(crate) struct RowsKernels {
    embed: HashMap<TensorType, DeviceKernel>,
    matvec: HashMap<TensorType, DeviceKernel>,
    /// The quantized rows matvecs with each row's x staged in workgroup memory (k ≤ XS_MAX_K).
    matvec_xs: HashMap<TensorType, DeviceKernel>,
    /// The rows matvecs of one matrix over 8 rows at once (one reduction over rows: each
    /// weight loaded and unpacked once per 8 rows), for the types that have one.
    matvec_one: HashMap<TensorType, DeviceKernel>,
    rmsnorm: DeviceKernel,
    head_rmsnorm: DeviceKernel,
    add_rmsnorm: DeviceKernel,
    rope_neox: DeviceKernel,
    kv_append: DeviceKernel,
    attention: DeviceKernel,
    attention_reordered: DeviceKernel,
    router_topk: DeviceKernel,
    swiglu_pairs: DeviceKernel,
    moe_combine: DeviceKernel,
    moe_count: DeviceKernel,
    moe_scatter: DeviceKernel,
    moe_gather: DeviceKernel,
    moe_ungather: DeviceKernel,
    copy_row: DeviceKernel,
    put_row: DeviceKernel,
    gdn_conv: DeviceKernel,
    gdn_scan: DeviceKernel,
    gated_rmsnorm: DeviceKernel,
}

const TYPES: [(TensorType, &str); 7] = [
    (TensorType::F32, "f32"),
    (TensorType::F16, "f16"),
    (TensorType::BF16, "bf16"),
    (TensorType::Q8_0, "q8_0"),
    (TensorType::Q4_K, "q4_k"),
    (TensorType::Q5_K, "q5_k"),
    (TensorType::Q6_K, "q6_k"),
];

impl RowsKernels {
    /// Picks the rows kernels out of the compiled `kernels::all()`.
    pub(crate) fn take(all: &HashMap<String, DeviceKernel>) -> Result<RowsKernels, EngineError> {
        let take = |name: &'static str| all.get(name).cloned().ok_or(EngineError::MissingKernel { name });
        let family = |prefix: &str, skip_f16: bool| -> Result<HashMap<TensorType, DeviceKernel>, EngineError> {
            let mut m = HashMap::new();
            for (ty, suffix) in TYPES {
                if skip_f16 && ty == TensorType::F16 {
                    continue;
                }
                let name = format!("{prefix}_{suffix}_rows");
                let k = all.get(&name).cloned().ok_or(EngineError::MissingKernel { name: if prefix == "embed" { "embed_*_rows" } else { "matvec_*_rows" } })?;
                m.insert(ty, k);
            }
            Ok(m)
        };
        Ok(RowsKernels {
            embed: family("embed", true)?,
            matvec: family("matvec", false)?,
            matvec_xs: crate::kernels::quant::XS_KERNELS
                .into_iter()
                .map(|(ty, _, name)| Ok((ty, take(name)?)))
                .collect::<Result<_, EngineError>>()?,
            matvec_one: crate::kernels::ROWS8_KERNELS.into_iter().map(|(ty, name)| Ok((ty, take(name)?))).collect::<Result<_, EngineError>>()?,
            rmsnorm: take("rmsnorm_rows")?,
            head_rmsnorm: take("head_rmsnorm_rows")?,
            add_rmsnorm: take("add_rmsnorm_rows")?,
            rope_neox: take("rope_neox_rows")?,
            kv_append: take("kv_append_rows")?,
            attention: take("attention_rows")?,
            attention_reordered: take("attention_rows_reordered")?,
            router_topk: take("router_topk_rows")?,
            swiglu_pairs: take("swiglu_pairs_rows")?,
            moe_combine: take("moe_combine_rows")?,
            moe_count: take("moe_count")?,
            moe_scatter: take("moe_scatter")?,
            moe_gather: take("moe_gather")?,
            moe_ungather: take("moe_ungather")?,
            copy_row: take("copy_row")?,
            put_row: take("put_row")?,
            gdn_conv: take("gdn_conv_rows")?,
            gdn_scan: take("gdn_scan_rows")?,
            gated_rmsnorm: take("gated_rmsnorm_rows")?,
        })
    }
}

/// Buffers one batched chunk (or one batched decode step, a row per sequence) writes, for up
/// to `rows` rows (pairs: rows · top_k).
pub(crate) struct PrefillScratch {
    pub(super) rows: usize,
    pub(super) tokens: Buffer,     // (row) u32
    pub(super) zero_ids: Buffer,   // (row) u32 = 0: the `ids` of a single-matrix projection
    pub(super) x: Buffer,          // (row, hidden)
    pub(super) h: Buffer,          // (row, hidden)
    pub(super) xn: Buffer,         // (row, hidden)
    pub(super) mix: Buffer,        // (row, hidden)
    pub(super) qkv: Buffer,        // (row, q | k | v channel)
    pub(super) conv_out: Buffer,   // (row, q | k | v channel)
    pub(super) z: Buffer,          // (row, v_head, value_dim)
    pub(super) ba: Buffer,         // (row, beta | alpha · v_head)
    pub(super) o: Buffer,          // (row, v_head, value_dim)
    pub(super) o_normed: Buffer,   // (row, v_head, value_dim)
    pub(super) q_gate: Buffer,     // (row, head, query | gate, head_dim)
    pub(super) q: Buffer,          // (row, head, head_dim)
    pub(super) k_raw: Buffer,      // (row, kv_head, head_dim)
    pub(super) k: Buffer,          // (row, kv_head, head_dim)
    pub(super) v: Buffer,          // (row, kv_head, head_dim)
    pub(super) probs_attn: Buffer, // (row, head, max_ctx)
    pub(super) attn: Buffer,       // (row, head, head_dim)
    pub(super) router_logits: Buffer, // (row, expert)
    pub(super) router_probs: Buffer,  // (row, expert)
    pub(super) expert_ids: Buffer,    // (row, top_k) u32
    pub(super) expert_weights: Buffer, // (row, top_k)
    pub(super) counts: Buffer,        // (expert) u32
    pub(super) pair_of: Buffer,       // (slot) u32: the (row · top_k + k) pair in each expert-sorted slot
    pub(super) slot_of: Buffer,       // (pair) u32
    pub(super) sorted_ids: Buffer,    // (slot) u32: the slot's expert
    pub(super) xs: Buffer,            // (slot, hidden): each slot's token row
    pub(super) gate_up: Buffer,       // (slot, gate | up · expert_ffn)
    pub(super) act: Buffer,           // (slot, expert_ffn)
    pub(super) down_sorted: Buffer,   // (slot, hidden)
    pub(super) down: Buffer,          // (pair, hidden): back in (row, k) order
    pub(super) sh_gate_up: Buffer,    // (row, gate | up · shared_ffn)
    pub(super) sh_act: Buffer,        // (row, shared_ffn)
    pub(super) sh_out: Buffer,        // (row, hidden)
    pub(super) sh_logit: Buffer,      // (row)
    pub(super) head_row: Buffer,      // (hidden): one row on its way into `head_x`
    pub(super) head_x: Buffer,        // (HEAD_TILE, hidden): rows c.. of `xn` for a head tile past the first
    pub(super) logits: Option<Buffer>, // (HEAD_TILE, vocab), allocated at the first head
}

/// Rows the output head computes per launch: its logits buffer holds this many rows whatever
/// the chunk or batch (a 248 320-entry vocabulary makes a row ≈ 1 MB), and each row's logits
/// do not depend on which tile it is in (the rows matvec is proven per row).
pub(super) const HEAD_TILE: usize = 8;

impl PrefillScratch {
    fn new(device: &Device, cfg: &ModelConfig, rows: usize, max_ctx: usize) -> Result<PrefillScratch, DeviceError> {
        let f = |n: usize| device.alloc(ScalarType::F32, rows * n);
        let u = |n: usize| device.alloc(ScalarType::U32, rows * n);
        let (h, k, fi, fs) = (cfg.hidden_dim, cfg.n_experts_used, cfg.expert_ffn_dim, cfg.shared_ffn_dim);
        let (nv, vd, kv_dim) = (cfg.gdn_n_value_heads, cfg.gdn_value_dim, cfg.n_kv_heads * cfg.head_dim);
        Ok(PrefillScratch {
            rows,
            tokens: u(1)?,
            zero_ids: device.upload(&vec![0u32; rows])?,
            x: f(h)?,
            h: f(h)?,
            xn: f(h)?,
            mix: f(h)?,
            qkv: f(cfg.gdn_conv_dim())?,
            conv_out: f(cfg.gdn_conv_dim())?,
            z: f(nv * vd)?,
            ba: f(2 * nv)?,
            o: f(nv * vd)?,
            o_normed: f(nv * vd)?,
            q_gate: f(2 * cfg.n_heads * cfg.head_dim)?,
            q: f(cfg.n_heads * cfg.head_dim)?,
            k_raw: f(kv_dim)?,
            k: f(kv_dim)?,
            v: f(kv_dim)?,
            probs_attn: f(cfg.n_heads * max_ctx)?,
            attn: f(cfg.n_heads * cfg.head_dim)?,
            router_logits: f(cfg.n_experts)?,
            router_probs: f(cfg.n_experts)?,
            expert_ids: u(k)?,
            expert_weights: f(k)?,
            counts: device.alloc(ScalarType::U32, cfg.n_experts.max(1))?,
            pair_of: u(k)?,
            slot_of: u(k)?,
            sorted_ids: u(k)?,
            xs: f(k * h)?,
            gate_up: f(k * 2 * fi)?,
            act: f(k * fi)?,
            down_sorted: f(k * h)?,
            down: f(k * h)?,
            sh_gate_up: f(2 * fs)?,
            sh_act: f(fs)?,
            sh_out: f(h)?,
            sh_logit: f(1)?,
            head_row: device.alloc(ScalarType::F32, h)?,
            head_x: device.alloc(ScalarType::F32, HEAD_TILE * h)?,
            logits: None,
        })
    }
}

/// Launches on the default stream with the rows kernels.
pub(super) struct Rows<'a> {
    pub(super) device: &'a Device,
    pub(super) k: &'a RowsKernels,
}

impl Rows<'_> {
    pub(super) fn launch(&self, kernel: &DeviceKernel, args: &mut [A<'_>]) -> Result<(), DeviceError> {
        self.device.launch(self.device.default_stream(), kernel, args)
    }

    /// y[r] = w[ids[r]] · x[r] for `rows` rows of x (w.cols wide) into y (w.rows wide).
    pub(super) fn matvec(&self, w: &Matrix, x: &Buffer, ids: &Buffer, y: &mut Buffer, rows: usize) -> Result<(), DeviceError> {
        let staged = if w.cols <= crate::kernels::quant::XS_MAX_K { self.k.matvec_xs.get(&w.ty) } else { None };
        let kernel = staged.unwrap_or(&self.k.matvec[&w.ty]);
        self.launch(kernel, &mut [A::buf(x), super::decode::weight_arg(kernel.kernel(), &w.buf), A::buf(ids), A::buf_mut(y), A::from(w.cols), A::from(w.rows), A::from(0usize), A::from(1usize), A::from(rows)])
    }

    /// `matvec` where every row uses one matrix (`zero_ids`, all zero: a projection, not the
    /// experts): the 8-row kernel of `w`'s type where there is one, the same bytes.
    pub(super) fn matvec_one(&self, w: &Matrix, x: &Buffer, zero_ids: &Buffer, y: &mut Buffer, rows: usize) -> Result<(), DeviceError> {
        let Some(kernel) = self.k.matvec_one.get(&w.ty) else { return self.matvec(w, x, zero_ids, y, rows) };
        self.launch(kernel, &mut [A::buf(x), super::decode::weight_arg(kernel.kernel(), &w.buf), A::buf(zero_ids), A::buf_mut(y), A::from(w.cols), A::from(w.rows), A::from(0usize), A::from(1usize), A::from(rows)])
    }

    pub(super) fn rmsnorm(&self, x: &Buffer, w: &Buffer, y: &mut Buffer, n: usize, eps: f32, rows: usize) -> Result<(), DeviceError> {
        self.launch(&self.k.rmsnorm, &mut [A::buf(x), A::buf(w), A::buf_mut(y), A::from(n), A::from(eps), A::from(rows)])
    }

    /// h = a + b, then y = rmsnorm(h, w), row by row: the residual add and the norm after it.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn add_rmsnorm(&self, a: &Buffer, b: &Buffer, w: &Buffer, h: &mut Buffer, y: &mut Buffer, n: usize, eps: f32, rows: usize) -> Result<(), DeviceError> {
        self.launch(&self.k.add_rmsnorm, &mut [A::buf(a), A::buf(b), A::buf(w), A::buf_mut(h), A::buf_mut(y), A::from(n), A::from(eps), A::from(rows)])
    }

    /// h = silu(gate) · up row by row, from a fused gate-and-up output `gu` (2n per row).
    fn swiglu_pairs(&self, gu: &Buffer, h: &mut Buffer, n: usize, rows: usize) -> Result<(), DeviceError> {
        self.launch(&self.k.swiglu_pairs, &mut [A::buf(gu), A::buf_mut(h), A::from(n), A::from(1usize), A::from(rows)])
    }

    /// y[..dim] = row `row` of x (dim wide): an exact copy.
    pub(super) fn copy_row(&self, x: &Buffer, row: usize, y: &mut Buffer, dim: usize) -> Result<(), DeviceError> {
        self.launch(&self.k.copy_row, &mut [A::buf(x), A::buf_mut(y), A::from(row), A::from(dim)])
    }

    /// Row `row` of y (dim wide) = x[..dim]: an exact copy.
    pub(super) fn put_row(&self, x: &Buffer, y: &mut Buffer, row: usize, dim: usize) -> Result<(), DeviceError> {
        self.launch(&self.k.put_row, &mut [A::buf(x), A::buf_mut(y), A::from(row), A::from(dim)])
    }

    /// The token embeddings of `tokens` (at most `p.rows`) into `p.x`.
    pub(super) fn embed(&self, w: &Weights, p: &mut PrefillScratch, tokens: &[TokenId]) -> Result<(), DeviceError> {
        // The token buffer holds `p.rows` tokens; rows past `tokens` are never read.
        let mut padded = tokens.to_vec();
        padded.resize(p.rows, 0);
        self.device.write(&mut p.tokens, &padded)?;
        let embed = match w.token_embd.ty {
            TensorType::F16 => TensorType::F32, // widened at load
            ty => ty,
        };
        let h = w.config.hidden_dim;
        self.launch(&self.k.embed[&embed], &mut [A::buf(&p.tokens), A::buf(&w.token_embd.buf), A::buf_mut(&mut p.x), A::from(0usize), A::from(h), A::from(tokens.len())])
    }

    /// The output head over `t` rows of `p.xn` (already normed), read back: t × vocab, in
    /// tiles of `HEAD_TILE` rows (rows past the first tile are copied into `p.head_x` first).
    pub(super) fn head(&self, w: &Weights, p: &mut PrefillScratch, t: usize) -> Result<Vec<f32>, DeviceError> {
        let (vocab, h) = (w.config.vocab_size, w.config.hidden_dim);
        if p.logits.is_none() {
            p.logits = Some(self.device.alloc(ScalarType::F32, HEAD_TILE * vocab)?);
        }
        let PrefillScratch { xn, head_row, head_x, zero_ids, logits: Some(logits), .. } = p else { unreachable!("allocated just above") };
        let mut out = Vec::with_capacity(t * vocab);
        for c in (0..t).step_by(HEAD_TILE) {
            let n = HEAD_TILE.min(t - c);
            if c > 0 {
                for j in 0..n {
                    self.copy_row(xn, c + j, head_row, h)?;
                    self.put_row(head_row, head_x, j, h)?;
                }
            }
            self.matvec_one(w.lm_head(), if c == 0 { xn } else { head_x }, zero_ids, logits, n)?;
            self.device.default_stream().synchronize()?;
            out.extend(self.device.read_prefix::<f32>(logits, n * vocab)?);
        }
        Ok(out)
    }
}

/// Per-stage wall time of batched prefill when profiling (`Engine::set_prefill_profile`): a
/// device synchronisation at each mark, so the stages do not overlap; off, marks do nothing.
pub(super) struct Timer {
    last: std::time::Instant,
    totals: Option<std::collections::BTreeMap<&'static str, f64>>,
}

impl Timer {
    /// A timer whose marks do nothing.
    pub(super) fn off() -> Timer {
        Timer { last: std::time::Instant::now(), totals: None }
    }

    fn mark(&mut self, device: &Device, stage: &'static str) -> Result<(), DeviceError> {
        if let Some(totals) = self.totals.as_mut() {
            device.default_stream().synchronize()?;
            let now = std::time::Instant::now();
            *totals.entry(stage).or_insert(0.0) += (now - self.last).as_secs_f64();
            self.last = now;
        }
        Ok(())
    }
}

/// Where a batched chunk's or step's MoE finds each layer's experts: the resident stacks, or
/// (staged) the layers streamed into `LayerStaging`'s two sets on its copy stream, one layer
/// ahead — layer 0 is queued by `start`, layer i + 1 by layer i's `moe` — ordered by events.
pub(super) struct LayerStream<'a> {
    device: &'a Device,
    staged: Option<(&'a ExpertStore, &'a mut LayerStaging)>,
}

impl<'a> LayerStream<'a> {
    pub(super) fn start(device: &'a Device, slots: Option<&'a DecodeSlots>, staging: Option<&'a mut LayerStaging>) -> Result<LayerStream<'a>, DeviceError> {
        let mut staged = match (slots, staging) {
            (Some(slots), Some(staging)) => Some((slots.store(), staging)),
            _ => None,
        };
        if let Some((store, staging)) = staged.as_mut() {
            staging.stage(device, store, 0, 0)?;
        }
        Ok(LayerStream { device, staged })
    }

    /// The MoE of layer `i` over `t` rows of `p.xn`, into `p.mix`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn moe(&mut self, run: &Rows<'_>, cfg: &ModelConfig, w: &Weights, i: usize, p: &mut PrefillScratch, t: usize, timer: &mut Timer) -> Result<(), EngineError> {
        let lw = &w.layers[i];
        match (&lw.moe.experts, self.staged.as_mut()) {
            (Some(resident), _) => moe(run, cfg, &lw.moe, resident, p, t, timer)?,
            (None, Some((store, staging))) => {
                let (set, compute) = (i % 2, self.device.default_stream());
                if i + 1 < w.layers.len() {
                    staging.stage(self.device, store, i + 1, 1 - set)?;
                }
                moe(run, cfg, &lw.moe, staging.wait(compute, set)?, p, t, timer)?;
                staging.release(compute, set)?;
            }
            (None, None) => return Err(EngineError::Unsupported { what: "routed experts", expected: "resident or staged".into(), found: "neither (a bug in baro)".into() }),
        }
        Ok(())
    }
}

impl Engine {
    /// Profiles batched prefill by stage (a benchmark aid: it synchronises the device after
    /// every stage); `prefill_profile` returns the seconds per stage since it was turned on.
    pub fn set_prefill_profile(&mut self, on: bool) {
        self.prefill_profile = on.then(Default::default);
    }

    pub fn prefill_profile(&self) -> Option<&std::collections::BTreeMap<&'static str, f64>> {
        self.prefill_profile.as_ref()
    }

    /// Opts batched prefill out of identity with decode (the negative control): attention
    /// over rows then runs `attention_rows_reordered`, whose P·V sum is in another order.
    /// Off by default; replay and decode are never affected.
    pub fn set_reordered_attention(&mut self, on: bool) {
        self.reordered_attention = on;
    }

    /// Feeds `tokens` at the next positions (the sequence is not reset) and returns the
    /// logits `which` asks for. Batched and replay compute the same bits.
    pub fn prefill(&mut self, tokens: &[TokenId], mode: PrefillMode, which: Logits) -> Result<Prefilled, EngineError> {
        let cfg = self.weights.config.clone();
        if tokens.is_empty() {
            return Err(EngineError::Unsupported { what: "prompt", expected: "at least one token".into(), found: "none".into() });
        }
        if let Some(&bad) = tokens.iter().find(|&&t| t as usize >= cfg.vocab_size) {
            return Err(EngineError::BadToken { token: bad, vocab: cfg.vocab_size });
        }
        if self.state.pos + tokens.len() > self.state.max_ctx {
            return Err(EngineError::ContextFull { pos: self.state.pos + tokens.len() - 1, max_ctx: self.state.max_ctx });
        }
        let chunk = match mode {
            PrefillMode::Replay => {
                let mut logits = Vec::with_capacity(if which == Logits::All { tokens.len() * cfg.vocab_size } else { cfg.vocab_size });
                for (i, &t) in tokens.iter().enumerate() {
                    let l = self.step(t)?;
                    if which == Logits::All || i + 1 == tokens.len() {
                        logits.extend_from_slice(&l);
                    }
                }
                return Ok(Prefilled { logits, mode, rows_batched: 0, chunks: 0 });
            }
            PrefillMode::Batched { chunk: 0 } => {
                return Err(EngineError::Unsupported { what: "prefill chunk size", expected: "at least 1 token".into(), found: "0".into() });
            }
            PrefillMode::Batched { chunk } => chunk.min(tokens.len()),
        };
        self.ensure_layer_staging()?;
        self.grow_prefill_scratch(chunk)?;
        let mut logits = Vec::new();
        let mut chunks = 0;
        for part in tokens.chunks(chunk) {
            let last = chunks * chunk + part.len() == tokens.len();
            let l = self.prefill_chunk(part, which == Logits::All || last, which == Logits::All)?;
            logits.extend_from_slice(&l);
            chunks += 1;
        }
        Ok(Prefilled { logits, mode, rows_batched: tokens.len(), chunks })
    }

    /// Makes the rows buffers hold at least `rows` rows (they only grow).
    /// Allocates the rows scratch (batched prefill chunks, batched decode steps) for up to
    /// `rows` rows, the output head's logits tile and, with staged experts, the two whole-layer
    /// staging sets now, so that later chunks and steps of at most `rows` rows allocate
    /// nothing: a server reserves its largest batch at start, and its device memory then stays
    /// flat however many requests come and go.
    pub fn reserve_rows(&mut self, rows: usize) -> Result<(), EngineError> {
        self.grow_prefill_scratch(rows.max(1))?;
        self.ensure_layer_staging()?;
        let vocab = self.weights.config.vocab_size;
        let Some(p) = self.prefill_scratch.as_mut() else { unreachable!("allocated just above") };
        if p.logits.is_none() {
            p.logits = Some(self.device.alloc(ScalarType::F32, HEAD_TILE * vocab)?);
        }
        Ok(())
    }

    /// Staged: allocates the two whole-layer sets batched chunks and steps stream experts into
    /// (the budget already counts them), once; resident: nothing.
    pub(super) fn ensure_layer_staging(&mut self) -> Result<(), EngineError> {
        if let (Some(slots), None) = (&self.slots, &self.layer_staging) {
            self.layer_staging = Some(LayerStaging::new(&self.device, slots.store())?);
        }
        Ok(())
    }

    pub(super) fn grow_prefill_scratch(&mut self, rows: usize) -> Result<(), EngineError> {
        if self.prefill_scratch.as_ref().is_none_or(|s| s.rows < rows) {
            self.prefill_scratch = None;
            self.prefill_scratch = Some(PrefillScratch::new(&self.device, &self.weights.config, rows, self.state.max_ctx)?);
        }
        Ok(())
    }

    /// One batched chunk at the next position. With `want` false no logits are computed;
    /// with `all` false only the last row's (through the m = 1 head, same arithmetic).
    fn prefill_chunk(&mut self, tokens: &[TokenId], want: bool, all: bool) -> Result<Vec<f32>, EngineError> {
        let t = tokens.len();
        let pos = self.state.pos;
        let cfg = &self.weights.config;
        let (h, eps) = (cfg.hidden_dim, cfg.rms_eps);
        let run = Rows { device: &self.device, k: &self.kernels.rows };
        let Some(p) = self.prefill_scratch.as_mut() else {
            return Err(EngineError::Unsupported { what: "prefill scratch", expected: "allocated before a chunk".into(), found: "none (a bug in baro)".into() });
        };
        let w = &self.weights;
        run.embed(w, p, tokens)?;
        let max_ctx = self.state.max_ctx;
        let mut staged = LayerStream::start(&self.device, self.slots.as_ref(), self.layer_staging.as_mut())?;
        let mut timer = Timer { last: std::time::Instant::now(), totals: self.prefill_profile.take() };
        timer.mark(&self.device, "embed")?;
        // Each residual add is fused with the norm after it, as in the decode step.
        run.rmsnorm(&p.x, w.layers.first().map_or(&w.output_norm, |l| &l.attn_norm), &mut p.xn, h, eps, t)?;
        for (i, (lw, ls)) in w.layers.iter().zip(self.state.layers.iter_mut()).enumerate() {
            let mixer = if matches!(lw.mixer, MixerWeights::Gdn(_)) { "gdn: gated norm, out projection" } else { "attention mixer" };
            match (&lw.mixer, ls) {
                (MixerWeights::Gdn(g), LayerState::Gdn { conv_ring, ssm }) => gdn(&run, cfg, g, conv_ring, ssm, p, pos, t, &mut timer)?,
                (MixerWeights::Attention(a), LayerState::Attention { k_cache, v_cache }) => {
                    attention(&run, cfg, a, k_cache, v_cache, (&self.state.rope_cos, &self.state.rope_sin), p, pos, t, max_ctx, self.reordered_attention)?
                }
                _ => return Err(EngineError::Unsupported { what: "layer state", expected: "the weights' layer kind".into(), found: "another kind (a bug in baro)".into() }),
            }
            timer.mark(&self.device, mixer)?;
            run.add_rmsnorm(&p.x, &p.mix, &lw.post_attention_norm, &mut p.h, &mut p.xn, h, eps, t)?;
            staged.moe(&run, cfg, w, i, p, t, &mut timer)?;
            timer.mark(&self.device, "moe: shared expert, combine")?;
            let next_norm = w.layers.get(i + 1).map_or(&w.output_norm, |l| &l.attn_norm);
            run.add_rmsnorm(&p.h, &p.mix, next_norm, &mut p.x, &mut p.xn, h, eps, t)?;
        }
        timer.mark(&self.device, "residual and norms")?;
        self.prefill_profile = timer.totals;
        self.state.pos += t;
        if !want {
            self.device.default_stream().synchronize()?;
            return Ok(Vec::new());
        }
        if all {
            return Ok(run.head(w, p, t)?);
        }
        // The last row through the decode step's own head: the same kernels a replay ends with.
        let head = w.lm_head();
        let s = &mut self.state.s;
        run.copy_row(&p.xn, t - 1, &mut s.xn, h)?;
        let mv = self.kernels.matvec_for(head.ty, head.cols);
        self.device.launch(
            self.device.default_stream(),
            mv,
            &mut [A::buf(&s.xn), super::decode::weight_arg(mv.kernel(), &head.buf), A::buf(&s.plain_ids), A::buf_mut(&mut s.logits), A::from(head.cols), A::from(head.rows), A::from(0usize), A::from(1usize)],
        )?;
        self.device.default_stream().synchronize()?;
        Ok(self.device.read::<f32>(&s.logits)?)
    }
}

/// The gated delta net over `t` rows of `p.xn`, into `p.mix`; the caller's mark after it
/// closes the "gated norm, out projection" stage.
#[allow(clippy::too_many_arguments)]
fn gdn(run: &Rows<'_>, cfg: &ModelConfig, w: &GdnWeights, conv_ring: &mut Buffer, ssm: &mut Buffer, p: &mut PrefillScratch, pos: usize, t: usize, timer: &mut Timer) -> Result<(), DeviceError> {
    gdn_project(run, w, p, t)?;
    timer.mark(run.device, "gdn: in projections")?;
    run.launch(&run.k.gdn_conv, &mut [A::buf(&p.qkv), A::buf(&w.conv), A::buf_mut(conv_ring), A::buf_mut(&mut p.conv_out), A::from(cfg.gdn_conv_dim()), A::from(cfg.conv_kernel), A::from(pos), A::from(t)])?;
    timer.mark(run.device, "gdn: conv")?;
    let (dk, dv) = (cfg.gdn_key_dim, cfg.gdn_value_dim);
    let q_scale = cfg.gdn_q_scale();
    run.launch(
        &run.k.gdn_scan,
        &mut [
            A::buf(&p.conv_out),
            A::buf(&p.ba),
            A::buf(&w.ssm_a),
            A::buf(&w.dt_bias),
            A::buf_mut(ssm),
            A::buf_mut(&mut p.o),
            A::from(dk),
            A::from(dv),
            A::from(cfg.gdn_n_key_heads),
            A::from(cfg.gdn_n_value_heads),
            A::from(true),
            A::from(q_scale),
            A::from(t),
        ],
    )?;
    timer.mark(run.device, "gdn: delta-rule scan")?;
    gdn_output(run, cfg, w, p, t)
}

/// The GDN's input projections over `t` rows of `p.xn`: `p.qkv`, `p.z`, `p.ba` (beta | alpha).
pub(super) fn gdn_project(run: &Rows<'_>, w: &GdnWeights, p: &mut PrefillScratch, t: usize) -> Result<(), DeviceError> {
    let ids = &p.zero_ids;
    run.matvec_one(&w.qkv, &p.xn, ids, &mut p.qkv, t)?;
    run.matvec_one(&w.gate_z, &p.xn, ids, &mut p.z, t)?;
    run.matvec_one(&w.beta_alpha, &p.xn, ids, &mut p.ba, t)
}

/// The GDN's output over `t` rows of `p.o`: the gated norm with `p.z`, the out projection, into
/// `p.mix`.
pub(super) fn gdn_output(run: &Rows<'_>, cfg: &ModelConfig, w: &GdnWeights, p: &mut PrefillScratch, t: usize) -> Result<(), DeviceError> {
    run.launch(&run.k.gated_rmsnorm, &mut [A::buf(&p.o), A::buf(&p.z), A::buf(&w.norm), A::buf_mut(&mut p.o_normed), A::from(cfg.gdn_value_dim), A::from(cfg.gdn_n_value_heads), A::from(cfg.rms_eps), A::from(t)])?;
    run.matvec_one(&w.out, &p.o_normed, &p.zero_ids, &mut p.mix, t)
}

/// Causal gated attention over `t` rows at positions pos..pos+t, into `p.mix`.
#[allow(clippy::too_many_arguments)]
fn attention(run: &Rows<'_>, cfg: &ModelConfig, w: &AttentionWeights, k_cache: &mut Buffer, v_cache: &mut Buffer, rope: (&Buffer, &Buffer), p: &mut PrefillScratch, pos: usize, t: usize, max_ctx: usize, reordered: bool) -> Result<(), DeviceError> {
    let (hd, nh, nkv) = (cfg.head_dim, cfg.n_heads, cfg.n_kv_heads);
    attention_project(run, cfg, w, p, t)?;
    for (x, n) in [(&mut p.q, nh), (&mut p.k, nkv)] {
        run.launch(&run.k.rope_neox, &mut [A::buf_mut(x), A::buf(rope.0), A::buf(rope.1), A::from(pos), A::from(cfg.rope_dim), A::from(hd), A::from(n), A::from(t)])?;
    }
    run.launch(&run.k.kv_append, &mut [A::buf(&p.k), A::buf(&p.v), A::buf_mut(k_cache), A::buf_mut(v_cache), A::from(pos), A::from(nkv * hd), A::from(t)])?;
    let scale = (1.0 / (hd as f64).sqrt()) as f32;
    let kernel = if reordered { &run.k.attention_reordered } else { &run.k.attention };
    run.launch(
        kernel,
        &mut [
            A::buf(&p.q),
            A::buf(k_cache),
            A::buf(v_cache),
            A::buf(&p.q_gate),
            A::buf_mut(&mut p.probs_attn),
            A::buf_mut(&mut p.attn),
            A::from(hd),
            A::from(nh),
            A::from(nkv),
            A::from(pos + 1),
            A::from(max_ctx),
            A::from(2 * hd),
            A::from(hd),
            A::from(scale),
            A::from(t),
        ],
    )?;
    run.matvec_one(&w.o, &p.attn, &p.zero_ids, &mut p.mix, t)
}

/// Attention's projections over `t` rows of `p.xn` and the per-head norms: `p.q_gate` (query
/// and gate), `p.q`, `p.k` (normed), `p.v`.
pub(super) fn attention_project(run: &Rows<'_>, cfg: &ModelConfig, w: &AttentionWeights, p: &mut PrefillScratch, t: usize) -> Result<(), DeviceError> {
    let ids = &p.zero_ids;
    let (hd, nh, nkv, eps) = (cfg.head_dim, cfg.n_heads, cfg.n_kv_heads, cfg.rms_eps);
    run.matvec_one(&w.q, &p.xn, ids, &mut p.q_gate, t)?;
    run.matvec_one(&w.k, &p.xn, ids, &mut p.k_raw, t)?;
    run.matvec_one(&w.v, &p.xn, ids, &mut p.v, t)?;
    run.launch(&run.k.head_rmsnorm, &mut [A::buf(&p.q_gate), A::buf(&w.q_norm), A::buf_mut(&mut p.q), A::from(hd), A::from(2 * hd), A::from(hd), A::from(nh), A::from(eps), A::from(t)])?;
    run.launch(&run.k.head_rmsnorm, &mut [A::buf(&p.k_raw), A::buf(&w.k_norm), A::buf_mut(&mut p.k), A::from(hd), A::from(hd), A::from(hd), A::from(nkv), A::from(eps), A::from(t)])
}

/// The MoE block over `t` rows of `p.xn`, into `p.mix`: router per row, (row, k) pairs sorted
/// by expert, one dot per pair, back to (row, k) order, shared expert, combine in k order.
/// `experts` are the layer's stacks by expert id: resident, or a staging set holding the layer.
/// When profiling, `timer` splits the block into router and sort, the routed experts' matvecs
/// (and their SwiGLU), and the rest (the caller's "moe: shared expert, combine" mark).
#[allow(clippy::too_many_arguments)]
pub(super) fn moe(run: &Rows<'_>, cfg: &ModelConfig, w: &MoeWeights, experts: &ExpertMatrices, p: &mut PrefillScratch, t: usize, timer: &mut Timer) -> Result<(), DeviceError> {
    let ids = &p.zero_ids;
    let (k, fi, fs, h, ne) = (cfg.n_experts_used, cfg.expert_ffn_dim, cfg.shared_ffn_dim, cfg.hidden_dim, cfg.n_experts);
    let pairs = t * k;
    run.matvec_one(&w.router, &p.xn, ids, &mut p.router_logits, t)?;
    run.launch(
        &run.k.router_topk,
        &mut [A::buf(&p.router_logits), A::buf_mut(&mut p.router_probs), A::buf_mut(&mut p.expert_ids), A::buf_mut(&mut p.expert_weights), A::from(ne), A::from(k), A::from(t)],
    )?;
    run.launch(&run.k.moe_count, &mut [A::buf(&p.expert_ids), A::buf_mut(&mut p.counts), A::from(pairs), A::from(ne)])?;
    run.launch(
        &run.k.moe_scatter,
        &mut [A::buf(&p.expert_ids), A::buf(&p.counts), A::buf_mut(&mut p.pair_of), A::buf_mut(&mut p.slot_of), A::buf_mut(&mut p.sorted_ids), A::from(pairs), A::from(ne)],
    )?;
    run.launch(&run.k.moe_gather, &mut [A::buf(&p.xn), A::buf(&p.pair_of), A::buf_mut(&mut p.xs), A::from(h), A::from(k), A::from(pairs)])?;
    timer.mark(run.device, "moe: router, sort, gather")?;
    run.matvec(&experts.gate_up, &p.xs, &p.sorted_ids, &mut p.gate_up, pairs)?;
    run.swiglu_pairs(&p.gate_up, &mut p.act, fi, pairs)?;
    run.matvec(&experts.down, &p.act, &p.sorted_ids, &mut p.down_sorted, pairs)?;
    timer.mark(run.device, "moe: routed experts")?;
    run.launch(&run.k.moe_ungather, &mut [A::buf(&p.down_sorted), A::buf(&p.slot_of), A::buf_mut(&mut p.down), A::from(h), A::from(pairs)])?;
    run.matvec_one(&w.gate_up_shexp, &p.xn, ids, &mut p.sh_gate_up, t)?;
    run.swiglu_pairs(&p.sh_gate_up, &mut p.sh_act, fs, t)?;
    run.matvec_one(&w.down_shexp, &p.sh_act, ids, &mut p.sh_out, t)?;
    run.matvec_one(&w.shared_gate, &p.xn, ids, &mut p.sh_logit, t)?;
    run.launch(&run.k.moe_combine, &mut [A::buf(&p.down), A::buf(&p.expert_weights), A::buf(&p.sh_out), A::buf(&p.sh_logit), A::buf_mut(&mut p.mix), A::from(h), A::from(k), A::from(t)])
}
