//! The compiled kernels the forward pass launches, typed: each operation is a `KernelPair`
//! (its m = 1 kernel and its proven rows sibling), found by the kernels' own IR (the rows
//! builder's `sibling.of`), not by names spelled here. Compiling is the only thing this file
//! does with a device.

use std::collections::HashMap;

use baro_dsl::runtime::{Device, DeviceError, DeviceKernel};
use baro_dsl::Kernel;

use crate::engine::error::EngineError;
use crate::kernels::{self, attention, embed, gdn, kquant_q8, matvec, moe, norm, pick, q8act, quant, rope};
use crate::model::TensorType;

/// One operation's two kernels: `one` for a single token (decode), `rows` its rows sibling
/// (batched prefill, the batched step), proven at build time to compute row for row what
/// `one` computes. The rows kernel's parameters are the m = 1 kernel's plus a trailing `rows`,
/// so the m = 1 kernel's argument struct launches either (`Pass::run`, `Rows`).
#[derive(Clone)]
pub(crate) struct KernelPair {
    pub(crate) one: DeviceKernel,
    pub(crate) rows: DeviceKernel,
}

/// Every kernel of the forward pass and the greedy pick, compiled for one device.
pub(crate) struct Kernels {
    /// By the token table's type (F16 tables are widened to F32 at load, so F16 has none).
    pub(crate) embed: HashMap<TensorType, KernelPair>,
    /// The matvecs by weight type, x read from global memory.
    pub(crate) matvec: HashMap<TensorType, KernelPair>,
    /// The quantized matvecs with x staged in workgroup memory (`quant::XS_KERNELS`, k ≤ XS_MAX_K).
    pub(crate) matvec_xs: HashMap<TensorType, KernelPair>,
    /// The q8 mode's matvecs by weight type: weights times `q8act` blocks (`Precision::Q8`).
    pub(crate) matvec_q8: HashMap<TensorType, KernelPair>,
    /// The q8 mode's 8-row matvecs by weight type (`one` the m = 1 kernel, `rows` the 8-row
    /// kernel over tiles of one matrix, each tile's ids checked equal): the routed experts on
    /// `moe_scatter_tiles`' layout, for k up to `Q8_ROWS8_MAX_K` / `KQ8_ROWS8_MAX_K`.
    pub(crate) matvec_q8_tiles: HashMap<TensorType, KernelPair>,
    /// The q8 mode's tile kernels on the integer matrix step (`mma_i8`), same tiles and
    /// arguments as `matvec_q8_tiles`, for k up to `Q8_MMA_MAX_K`: launched instead of those
    /// only where `q8_tiles` says so (`BARO_Q8_TILES=mma`; measured slower on an H100 so far,
    /// bench/NOTES.md 2026-12-07).
    pub(crate) matvec_q8_mma: HashMap<TensorType, KernelPair>,
    /// Which q8 tile kernels serve the q8 mode's rows passes (`BARO_Q8_TILES`).
    pub(crate) q8_tiles: Q8Tiles,
    /// Activations to 8-bit blocks of 32; one kernel for any number of rows (each block is
    /// quantized on its own).
    pub(crate) q8act: DeviceKernel,
    pub(crate) rmsnorm: KernelPair,
    pub(crate) head_rmsnorm: KernelPair,
    /// `head_rmsnorm` and `rope_neox` in one launch (decode and chunks: rows at consecutive
    /// positions).
    pub(crate) head_rmsnorm_rope: KernelPair,
    pub(crate) add_rmsnorm: KernelPair,
    /// `add_rmsnorm` and `q8act` of its output in one launch (the q8 mode's normed input).
    pub(crate) add_rmsnorm_q8: KernelPair,
    /// `moe_combine`, `add_rmsnorm` and `q8act` in one launch (the q8 mode's residual add
    /// after the MoE block).
    pub(crate) moe_combine_add_rmsnorm_q8: KernelPair,
    /// `gated_rmsnorm` and `q8act` of its output in one launch (the q8 mode's input of the GDN
    /// out projection).
    pub(crate) gated_rmsnorm_q8: KernelPair,
    /// `swiglu_pairs` and `q8act` of its output in one launch (the q8 mode's expert input).
    pub(crate) swiglu_pairs_q8: KernelPair,
    pub(crate) rope_neox: KernelPair,
    pub(crate) kv_append: KernelPair,
    /// Attention's three phases (`kernels::attention`): the scores, their softmax in place,
    /// the gated value product.
    pub(crate) attention_scores: KernelPair,
    pub(crate) attention_softmax: KernelPair,
    pub(crate) attention_pv: KernelPair,
    /// The negative control's P·V rows kernel (no m = 1 sibling: its sum is in another order).
    pub(crate) attention_pv_reordered: DeviceKernel,
    pub(crate) router_topk: KernelPair,
    /// `router_topk` with an f32 shared-expert gate's logit in the same launch.
    pub(crate) router_topk_gate: KernelPair,
    pub(crate) swiglu_pairs: KernelPair,
    pub(crate) moe_combine: KernelPair,
    /// `gdn_conv_step` and `gdn_conv_rows`.
    pub(crate) gdn_conv: KernelPair,
    /// `gdn_step` and `gdn_scan_rows`.
    pub(crate) gdn_scan: KernelPair,
    /// `gdn_step_ba` and `gdn_scan_ba_rows`: the delta rule with an f32 beta/alpha projection
    /// in its launch.
    pub(crate) gdn_scan_ba: KernelPair,
    pub(crate) gated_rmsnorm: KernelPair,
    pub(crate) moe_count: DeviceKernel,
    pub(crate) moe_scatter: DeviceKernel,
    pub(crate) moe_scatter_tiles: DeviceKernel,
    pub(crate) moe_gather: DeviceKernel,
    pub(crate) moe_ungather: DeviceKernel,
    pub(crate) copy_row: DeviceKernel,
    pub(crate) put_row: DeviceKernel,
    pub(crate) greedy_chunks: DeviceKernel,
    pub(crate) greedy_pick: DeviceKernel,
}

/// A kernel's IR builder (the functions `#[kernel]` writes).
type KernelFn = fn() -> Kernel;

/// The compiled `kernels::all()`, by name.
struct Compiled(HashMap<String, DeviceKernel>);

impl Compiled {
    fn one(&self, k: fn() -> Kernel) -> Result<DeviceKernel, EngineError> {
        let ir = k();
        self.0.get(&ir.name).cloned().ok_or_else(|| missing(&ir.name))
    }

    /// A rows kernel and the m = 1 kernel its `rows_of` names.
    fn pair(&self, rows: fn() -> Kernel) -> Result<KernelPair, EngineError> {
        let ir = rows();
        let Some(sibling) = ir.sibling.as_ref() else {
            return Err(EngineError::Unsupported {
                what: "kernel pair",
                expected: format!("{} declared the rows sibling of an m = 1 kernel", ir.name),
                found: "no rows_of (a bug in baro)".into(),
            });
        };
        let get = |name: &str| self.0.get(name).cloned().ok_or_else(|| missing(name));
        Ok(KernelPair { one: get(&sibling.of)?, rows: get(&ir.name)? })
    }
}

/// The q8 mode's tile kernels: the 8-row dot4 kernels (`_rows8`, the default) or the
/// integer-matrix-step kernels (`_mma`). The same bits either way; a benchmark knob, read from
/// `BARO_Q8_TILES` (`dot4` or `mma`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Q8Tiles {
    #[default]
    Dot4,
    Mma,
}

impl Q8Tiles {
    /// `BARO_Q8_TILES`: unset or `dot4`, or `mma`; anything else is an error naming both.
    pub(crate) fn from_env() -> Result<Q8Tiles, EngineError> {
        match std::env::var("BARO_Q8_TILES").as_deref() {
            Err(_) | Ok("") | Ok("dot4") => Ok(Q8Tiles::Dot4),
            Ok("mma") => Ok(Q8Tiles::Mma),
            Ok(other) => Err(EngineError::Unsupported {
                what: "BARO_Q8_TILES",
                expected: "dot4 or mma".into(),
                found: other.into(),
            }),
        }
    }
}

fn missing(name: &str) -> EngineError {
    EngineError::Unsupported {
        what: "kernel",
        expected: format!("{name} in kernels::all()"),
        found: "no such kernel (a bug in baro)".into(),
    }
}

impl Kernels {
    /// Compiles every kernel of `kernels::all()` and sorts them into pairs. On a GPU the
    /// kernels compile on all cores at once (each through the device's cache; LLVM contexts
    /// are per compilation), so a cold start costs the slowest kernels, not their sum.
    pub(crate) fn compile(device: &Device) -> Result<Kernels, EngineError> {
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
        let mut all = HashMap::new();
        for (k, c) in list.iter().zip(compiled) {
            all.insert(k.name.clone(), c?);
        }
        let c = Compiled(all);
        let by_type = |pairs: &[(TensorType, KernelFn)]| {
            pairs.iter().map(|&(ty, rows)| Ok((ty, c.pair(rows)?))).collect::<Result<HashMap<_, _>, EngineError>>()
        };
        use TensorType as T;
        Ok(Kernels {
            embed: by_type(&[
                (T::F32, embed::embed_f32_rows),
                (T::BF16, embed::embed_bf16_rows),
                (T::Q8_0, embed::embed_q8_0_rows),
                (T::Q4_K, embed::embed_q4_k_rows),
                (T::Q5_K, embed::embed_q5_k_rows),
                (T::Q6_K, embed::embed_q6_k_rows),
            ])?,
            matvec: by_type(&[
                (T::F32, matvec::matvec_f32_rows),
                (T::F16, matvec::matvec_f16_rows),
                (T::BF16, matvec::matvec_bf16_rows),
                (T::Q8_0, quant::matvec_q8_0_rows),
                (T::Q4_K, quant::matvec_q4_k_rows),
                (T::Q5_K, quant::matvec_q5_k_rows),
                (T::Q6_K, quant::matvec_q6_k_rows),
            ])?,
            matvec_xs: by_type(&[
                (T::Q8_0, quant::matvec_q8_0_xs_rows),
                (T::Q4_K, quant::matvec_q4_k_xs_rows),
                (T::Q5_K, quant::matvec_q5_k_xs_rows),
                (T::Q6_K, quant::matvec_q6_k_xs_rows),
            ])?,
            matvec_q8: by_type(&[
                (T::Q8_0, q8act::matvec_q8_0_q8_rows),
                (T::Q4_K, kquant_q8::matvec_q4_k_q8_rows),
                (T::Q5_K, kquant_q8::matvec_q5_k_q8_rows),
                (T::Q6_K, kquant_q8::matvec_q6_k_q8_rows),
            ])?,
            matvec_q8_tiles: by_type(&[
                (T::Q8_0, q8act::matvec_q8_0_q8_rows8),
                (T::Q4_K, kquant_q8::matvec_q4_k_q8_rows8),
                (T::Q5_K, kquant_q8::matvec_q5_k_q8_rows8),
                (T::Q6_K, kquant_q8::matvec_q6_k_q8_rows8),
            ])?,
            q8_tiles: Q8Tiles::from_env()?,
            matvec_q8_mma: by_type(&[
                (T::Q8_0, q8act::matvec_q8_0_q8_mma),
                (T::Q4_K, kquant_q8::matvec_q4_k_q8_mma),
                (T::Q5_K, kquant_q8::matvec_q5_k_q8_mma),
                (T::Q6_K, kquant_q8::matvec_q6_k_q8_mma),
            ])?,
            q8act: c.one(q8act::q8act)?,
            rmsnorm: c.pair(norm::rmsnorm_rows)?,
            head_rmsnorm: c.pair(norm::head_rmsnorm_rows)?,
            head_rmsnorm_rope: c.pair(norm::head_rmsnorm_rope_rows)?,
            add_rmsnorm: c.pair(norm::add_rmsnorm_rows)?,
            add_rmsnorm_q8: c.pair(q8act::add_rmsnorm_q8_rows)?,
            moe_combine_add_rmsnorm_q8: c.pair(q8act::moe_combine_add_rmsnorm_q8_rows)?,
            gated_rmsnorm_q8: c.pair(q8act::gated_rmsnorm_q8_rows)?,
            swiglu_pairs_q8: c.pair(q8act::swiglu_pairs_q8_rows)?,
            rope_neox: c.pair(rope::rope_neox_rows)?,
            kv_append: c.pair(attention::kv_append_rows)?,
            attention_scores: c.pair(attention::attention_scores_rows)?,
            attention_softmax: c.pair(attention::attention_softmax_rows)?,
            attention_pv: c.pair(attention::attention_pv_rows)?,
            attention_pv_reordered: c.one(attention::attention_pv_rows_reordered)?,
            router_topk: c.pair(moe::router_topk_rows)?,
            router_topk_gate: c.pair(moe::router_topk_gate_rows)?,
            swiglu_pairs: c.pair(moe::swiglu_pairs_rows)?,
            moe_combine: c.pair(moe::moe_combine_rows)?,
            gdn_conv: c.pair(gdn::gdn_conv_rows)?,
            gdn_scan: c.pair(gdn::gdn_scan_rows)?,
            gdn_scan_ba: c.pair(gdn::gdn_scan_ba_rows)?,
            gated_rmsnorm: c.pair(gdn::gated_rmsnorm_rows)?,
            moe_count: c.one(moe::moe_count)?,
            moe_scatter: c.one(moe::moe_scatter)?,
            moe_scatter_tiles: c.one(moe::moe_scatter_tiles)?,
            moe_gather: c.one(moe::moe_gather)?,
            moe_ungather: c.one(moe::moe_ungather)?,
            copy_row: c.one(embed::copy_row)?,
            put_row: c.one(embed::put_row)?,
            greedy_chunks: c.one(pick::greedy_chunks)?,
            greedy_pick: c.one(pick::greedy_pick)?,
        })
    }

    /// The matvec pair for a `ty` matrix of `cols` columns: the quantized one with x staged in
    /// workgroup memory where it fits (the same bits, fewer memory requests), else the plain
    /// one. The m = 1 choice is `kernels::decode_matvec_name`'s (which benchmarks measure).
    pub(crate) fn matvec_for(&self, ty: TensorType, cols: usize) -> &KernelPair {
        let staged = if cols <= quant::XS_MAX_K { self.matvec_xs.get(&ty) } else { None };
        let pair = staged.unwrap_or(&self.matvec[&ty]);
        debug_assert_eq!(
            pair.one.name(),
            kernels::decode_matvec_name(ty, cols),
            "matvec_for and kernels::decode_matvec_name disagree"
        );
        pair
    }

    /// The 8-row q8 kernel that serves `pair` (a q8 pair `matvec_q8_for` gave) over tiles of one
    /// matrix: with `Q8Tiles::Mma` the type's matrix-step kernel where `cols` ≤ `Q8_MMA_MAX_K`,
    /// else the 8-row dot4 kernel where `cols` fits its staged activations. Either gives the m = 1
    /// kernel's bits (both are proven siblings).
    pub(crate) fn matvec_q8_tile_for(&self, pair: &KernelPair, cols: usize) -> Option<&DeviceKernel> {
        let mma = self.matvec_q8_mma.values().find(|t| t.one.name() == pair.one.name());
        if let Some(t) = mma.filter(|_| self.q8_tiles == Q8Tiles::Mma && cols <= q8act::Q8_MMA_MAX_K) {
            return Some(&t.rows);
        }
        let max = if pair.one.name() == "matvec_q8_0_q8" { q8act::Q8_ROWS8_MAX_K } else { kquant_q8::KQ8_ROWS8_MAX_K };
        self.matvec_q8_tiles.values().find(|t| t.one.name() == pair.one.name()).filter(|_| cols <= max).map(|t| &t.rows)
    }

    /// The q8 matvec pair for a `ty` matrix, if the type has one.
    pub(crate) fn matvec_q8_for(&self, ty: TensorType) -> Option<&KernelPair> {
        self.matvec_q8.get(&ty)
    }
}
