//! The forward pass, written once: embed → per layer (RMSNorm → mixer → residual fused with
//! the post-attention RMSNorm → MoE → residual fused with the next norm) → the final norm,
//! leaving the normed rows in `Scratch::xn` for the caller's output head.
//!
//! `Mode` says what the rows are and so which kernels run:
//! - `Decode`: one token of one sequence through the m = 1 kernels (the decode step);
//! - `Chunk`: `t` consecutive tokens of one sequence through the rows siblings (batched
//!   prefill), the GDN state and KV cache carried from row to row by the rows kernels;
//! - `Batch`: one token of each of `n` sequences (the batched decode step): the projections,
//!   norms and MoE through the rows siblings, each sequence's stateful part (GDN conv and
//!   delta-rule step, RoPE, KV append, attention) through the m = 1 kernels on its own state.
//!
//! Every rows kernel is proven, while the crate compiles, to compute row for row what its m = 1
//! kernel computes, so the three modes give the same bits for the same token. Wiring only: no
//! kernel body and no driver call.
//!
//! Every launch names its arguments: the struct `#[kernel]` writes for the kernel
//! (`KvAppendArgs { k_new, v_new, k_cache, v_cache, pos, kv_dim }`), one field per parameter,
//! `&[T]` a `&dyn ReadArg`, `&mut [T]` a `&mut Buffer`, scalars their own type; `Pass::run`
//! launches a pair's kernel at the pass's width with the m = 1 struct (the rows kernel gets the
//! row count after it, `Rows`).

use baro_dsl::runtime::{Buffer, Device, DeviceArg, DeviceError, DeviceKernel, KernelArgs, ReadArg, Rows};

use crate::engine::registry::{KernelPair, Kernels};
use crate::engine::scratch::{expert_slots, Q8Blocks, Scratch, HEAD_TILE, MAX_TILE_PADDING};
use crate::engine::staging::{DecodeSlots, ExpertStore, LayerStaging};
use crate::engine::state::{LayerState, State};
use crate::engine::weights::{AttentionWeights, ExpertMatrices, GdnWeights, Matrix, MixerWeights, MoeWeights, Weights};
use crate::engine::{EngineError, Precision};
use crate::kernels::attention::{AttentionPvArgs, AttentionScoresArgs, AttentionSoftmaxArgs, KvAppendArgs};
use crate::kernels::embed::{CopyRowArgs, EmbedF32Args, PutRowArgs};
use crate::kernels::gdn::{GatedRmsnormArgs, GdnConvStepArgs, GdnStepArgs, GdnStepBaArgs};
use crate::kernels::kquant_q8::MatvecQ4KQ8Args;
use crate::kernels::matvec::MatvecF32Args;
use crate::kernels::moe::{
    MoeCombineArgs, MoeCountArgs, MoeGatherArgs, MoeScatterArgs, MoeScatterTilesArgs, MoeUngatherArgs, RouterTopkArgs,
    RouterTopkGateArgs, SwigluPairsArgs, EXPERT_TILE,
};
use crate::kernels::norm::{AddRmsnormArgs, HeadRmsnormArgs, HeadRmsnormRopeArgs, RmsnormArgs};
use crate::kernels::q8act::{
    AddRmsnormQ8Args, GatedRmsnormQ8Args, MatvecQ80Q8Args, MoeCombineAddRmsnormQ8Args, Q8actArgs, SwigluPairsQ8Args,
    GATED_Q8_MAX_HEAD_DIM,
};
use crate::kernels::rope::RopeNeoxArgs;
use crate::model::{ModelConfig, TensorType};
use crate::tokenizer::TokenId;

/// Which kernels a launch picks: the m = 1 kernel, or the rows sibling over `rows` rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Width {
    One,
    Rows(usize),
}

/// Launches on the device's default stream at one width and precision.
pub(crate) struct Pass<'a> {
    pub(crate) device: &'a Device,
    pub(crate) k: &'a Kernels,
    pub(crate) width: Width,
    pub(crate) precision: Precision,
}

/// A matvec input: `n` rows of `cols` f32 in `x` and, in the q8 mode, the same rows quantized
/// to 8-bit blocks (`q8`), which the matrices with a q8 kernel read instead.
pub(crate) struct Input<'b> {
    x: &'b Buffer,
    q8: Option<&'b Q8Blocks>,
}

/// A matrix's raw bytes as the matvec `kernel` reads them: little-endian u32 words where its
/// weight parameter (`w`) is `&[u32]` and the matrix holds bytes (the `_xs` and q8 quantized
/// matvecs), else the buffer itself.
pub(crate) fn weight_read<'a>(kernel: &baro_dsl::Kernel, w: &'a Buffer) -> &'a dyn ReadArg {
    let param = kernel.params.iter().find(|p| p.name == "w");
    let words =
        matches!(param.map(|p| &p.kind), Some(baro_dsl::ir::ParamKind::Buffer { elem: baro_dsl::ScalarType::U32, .. }));
    if words && w.elem() == baro_dsl::ScalarType::U8 {
        w.words()
    } else {
        w
    }
}

/// `weight_read` as a positional argument (for launches built by hand: tests, benchmarks).
pub fn weight_arg<'a>(kernel: &baro_dsl::Kernel, w: &'a Buffer) -> DeviceArg<'a> {
    weight_read(kernel, w).arg()
}

/// A matvec's arguments, typed per kernel family: every f32-input matvec (`matvec_f32`, the
/// f16/bf16 and quantized ones, their `_xs` forms) has `matvec_f32`'s parameters; the q8
/// matvecs have `matvec_q8_0_q8`'s, or, for the K-quants with mins, `matvec_q4_k_q8`'s (the
/// blocks' sums `xsum` too). Members of a family differ only in element types, which the
/// launch checks.
enum MatvecArgs<'b> {
    F32(MatvecF32Args<'b>),
    Q8(MatvecQ80Q8Args<'b>),
    Q8Mins(MatvecQ4KQ8Args<'b>),
}

impl MatvecArgs<'_> {
    /// Launches `kernel` with these arguments, and `rows` after them for a rows kernel.
    fn launch(self, pass: &Pass<'_>, kernel: &DeviceKernel, rows: Option<usize>) -> Result<(), DeviceError> {
        match self {
            MatvecArgs::F32(a) => pass.launch_at(kernel, a, rows),
            MatvecArgs::Q8(a) => pass.launch_at(kernel, a, rows),
            MatvecArgs::Q8Mins(a) => pass.launch_at(kernel, a, rows),
        }
    }
}

impl<'a> Pass<'a> {
    pub(crate) fn new(device: &'a Device, k: &'a Kernels, width: Width, precision: Precision) -> Pass<'a> {
        Pass { device, k, width, precision }
    }

    /// The same device, kernels and precision at another width.
    pub(crate) fn at(&self, width: Width) -> Pass<'a> {
        Pass { width, ..*self }
    }

    /// Launches `kernel` with its typed arguments (`Rows(args, t)` for a rows kernel).
    pub(crate) fn launch<'b, T: KernelArgs<'b>>(&self, kernel: &DeviceKernel, args: T) -> Result<(), DeviceError> {
        self.device.launch_args(self.device.default_stream(), kernel, args)
    }

    /// Launches `kernel` with the m = 1 arguments `args`, and `rows` after them when given.
    fn launch_at<'b, T: KernelArgs<'b>>(
        &self,
        kernel: &DeviceKernel,
        args: T,
        rows: Option<usize>,
    ) -> Result<(), DeviceError> {
        match rows {
            None => self.launch(kernel, args),
            Some(t) => self.launch(kernel, Rows(args, t)),
        }
    }

    /// The row count a rows kernel of this width takes after its m = 1 arguments.
    fn row_count(&self) -> Option<usize> {
        match self.width {
            Width::One => None,
            Width::Rows(t) => Some(t),
        }
    }

    /// Rows per launch: 1 for the m = 1 kernels.
    pub(crate) fn rows(&self) -> usize {
        match self.width {
            Width::One => 1,
            Width::Rows(t) => t,
        }
    }

    /// The pair's kernel at this width.
    fn pick<'k>(&self, pair: &'k KernelPair) -> &'k DeviceKernel {
        match self.width {
            Width::One => &pair.one,
            Width::Rows(_) => &pair.rows,
        }
    }

    /// Launches `kernel` (the m = 1 kernel or a rows kernel, as the width says) with the m = 1
    /// arguments `args`, and the row count after them for a rows kernel.
    fn run_kernel<'b, T: KernelArgs<'b>>(&self, kernel: &DeviceKernel, args: T) -> Result<(), DeviceError> {
        self.launch_at(kernel, args, self.row_count())
    }

    /// The pair's kernel at this width with the m = 1 arguments `args` (one struct for both
    /// widths: the rows kernel gets the row count after them).
    pub(crate) fn run<'b, T: KernelArgs<'b>>(&self, pair: &KernelPair, args: T) -> Result<(), DeviceError> {
        self.run_kernel(self.pick(pair), args)
    }

    /// `x`'s rows (one per row of this width, `cols` wide) as a matvec input: in the q8 mode
    /// also quantized into `q8` (when `cols` is a multiple of 32).
    pub(crate) fn input<'b>(&self, x: &'b Buffer, cols: usize, q8: &'b mut Q8Blocks) -> Result<Input<'b>, DeviceError> {
        self.input_rows(x, cols, self.rows(), q8)
    }

    /// `input` for `n` rows of x (a one-token MoE's k slots).
    fn input_rows<'b>(
        &self,
        x: &'b Buffer,
        cols: usize,
        n: usize,
        q8: &'b mut Q8Blocks,
    ) -> Result<Input<'b>, DeviceError> {
        if !self.quantizes(cols) {
            return Ok(Input { x, q8: None });
        }
        let nb = n * cols / crate::kernels::q8act::Q8_BLOCK;
        self.launch(&self.k.q8act, Q8actArgs { x, q: &mut q8.q, d: &mut q8.d, s: &mut q8.sum, nb })?;
        Ok(Input { x, q8: Some(q8) })
    }

    /// The m = 1 arguments of the matvec for `w` reading `x`, and the kernel pair: the q8
    /// matvec where the input is quantized and `w`'s type has one, else the f32 one.
    fn matvec_args<'b>(
        &self,
        w: &'b Matrix,
        x: &Input<'b>,
        ids: &'b Buffer,
        y: &'b mut Buffer,
        x_stride: usize,
        n_slots: usize,
    ) -> (&'a KernelPair, MatvecArgs<'b>) {
        let (k, n) = (w.cols, w.rows);
        if let (Some(q), Some(pair)) = (x.q8, self.k.matvec_q8_for(w.ty)) {
            // The q8 matvecs read the blocks' words and scales, and the K-quants with mins
            // their sums too (`xsum`).
            let (xq, xd, w) = (&q.q, &q.d, weight_read(pair.one.kernel(), &w.buf));
            let args = if pair.one.kernel().params.iter().any(|p| p.name == "xsum") {
                MatvecArgs::Q8Mins(MatvecQ4KQ8Args { xq, xd, xsum: &q.sum, w, ids, y, k, n, x_stride, n_slots })
            } else {
                MatvecArgs::Q8(MatvecQ80Q8Args { xq, xd, w, ids, y, k, n, x_stride, n_slots })
            };
            return (pair, args);
        }
        let pair = self.k.matvec_for(w.ty, w.cols);
        let w = weight_read(pair.one.kernel(), &w.buf);
        (pair, MatvecArgs::F32(MatvecF32Args { x: x.x, w, ids, y, k, n, x_stride, n_slots }))
    }

    /// y[r] = w[ids[r]] · x[r] per row: a rows pass's routed experts pass each pair's expert
    /// (`project` is the one-matrix form).
    pub(crate) fn matvec(&self, w: &Matrix, x: &Input<'_>, ids: &Buffer, y: &mut Buffer) -> Result<(), DeviceError> {
        let (pair, args) = self.matvec_args(w, x, ids, y, 0, 1);
        args.launch(self, self.pick(pair), self.row_count())
    }

    /// y[r] = w · x[r] per row, one matrix (`zero_ids` is `Scratch::zero_ids`). A rows pass in
    /// the q8 mode runs the type's 8-row q8 matvec where it has one and k fits
    /// (`Kernels::matvec_q8_tile_for`: the 8 rows' blocks staged in workgroup memory, the
    /// weights unpacked once for the 8), a proven sibling of the m = 1 q8 matvec, so the bits
    /// are `matvec`'s. The f32 8-row matvecs (`matvec_f32_rows8`, `matvec_q8_0_rows8`) are not
    /// launched: on an H100 they made the projections ≈ 3× slower than the serial rows kernels
    /// (bench/NOTES.md, 2026-12-07), their x read from global memory.
    pub(crate) fn project(
        &self,
        w: &Matrix,
        x: &Input<'_>,
        zero_ids: &Buffer,
        y: &mut Buffer,
    ) -> Result<(), DeviceError> {
        if let (Width::Rows(t), Some(_)) = (self.width, x.q8.as_ref()) {
            if let Some(rows8) = self.k.matvec_q8_for(w.ty).and_then(|pair| self.k.matvec_q8_tile_for(pair, w.cols)) {
                let (_, args) = self.matvec_args(w, x, zero_ids, y, 0, 1);
                return args.launch(self, rows8, Some(t));
            }
        }
        self.matvec(w, x, zero_ids, y)
    }

    /// y[slot] = w[ids[slot]] · x[slot · x_stride ..] for `n_slots` slots: the m = 1 kernel's
    /// expert slots (a one-token MoE).
    fn matvec_slots(
        &self,
        w: &Matrix,
        x: &Input<'_>,
        ids: &Buffer,
        y: &mut Buffer,
        x_stride: usize,
        n_slots: usize,
    ) -> Result<(), DeviceError> {
        let (pair, args) = self.matvec_args(w, x, ids, y, x_stride, n_slots);
        args.launch(self, &pair.one, None)
    }

    pub(crate) fn rmsnorm(
        &self,
        x: &Buffer,
        w: &Buffer,
        y: &mut Buffer,
        n: usize,
        eps: f32,
    ) -> Result<(), DeviceError> {
        self.run(&self.k.rmsnorm, RmsnormArgs { x, w, y, n, eps })
    }

    /// h = a + b, then y = rmsnorm(h, w): the residual add and the norm after it, one launch;
    /// in the q8 mode (n a multiple of 32) y's blocks go into `q8` in the same launch
    /// (`add_rmsnorm_q8`: `q8act`'s bits), for `normed`.
    #[allow(clippy::too_many_arguments)]
    fn add_rmsnorm(
        &self,
        a: &Buffer,
        b: &Buffer,
        w: &Buffer,
        h: &mut Buffer,
        y: &mut Buffer,
        q8: &mut Q8Blocks,
        n: usize,
        eps: f32,
    ) -> Result<(), DeviceError> {
        if self.quantizes(n) {
            let Q8Blocks { q, d, sum: s } = q8;
            return self.run(&self.k.add_rmsnorm_q8, AddRmsnormQ8Args { a, b, w, h, y, q, d, s, n, eps });
        }
        self.run(&self.k.add_rmsnorm, AddRmsnormArgs { a, b, w, h, y, n, eps })
    }

    /// The MoE block's combine (the k expert outputs `p.down` by `p.expert_weights` in top-k
    /// order, plus the gated shared expert) into the residual `p.h`, then the norm `w`: `p.x` =
    /// h + combine, `p.xn` = rmsnorm(p.x), and in the q8 mode `p.q8_in` = xn's blocks, all in
    /// one launch (`moe_combine_add_rmsnorm_q8`); otherwise `moe_combine` into `p.mix`, then
    /// `add_rmsnorm`. The same bits either way.
    fn combine_add_rmsnorm(
        &self,
        p: &mut Scratch,
        w: &Buffer,
        top_k: usize,
        n: usize,
        eps: f32,
    ) -> Result<(), DeviceError> {
        if self.quantizes(n) {
            let Q8Blocks { q, d, sum: s } = &mut p.q8_in;
            return self.run(
                &self.k.moe_combine_add_rmsnorm_q8,
                MoeCombineAddRmsnormQ8Args {
                    a: &p.h,
                    ye: &p.down,
                    weights: &p.expert_weights,
                    shared_out: &p.sh_out,
                    shared_logit: &p.sh_logit,
                    w,
                    h: &mut p.x,
                    y: &mut p.xn,
                    q,
                    d,
                    s,
                    n,
                    top_k,
                    eps,
                },
            );
        }
        self.run(
            &self.k.moe_combine,
            MoeCombineArgs {
                ye: &p.down,
                weights: &p.expert_weights,
                shared: &p.sh_out,
                shared_logit: &p.sh_logit,
                y: &mut p.mix,
                dim: n,
                top_k,
            },
        )?;
        self.add_rmsnorm(&p.h, &p.mix, w, &mut p.x, &mut p.xn, &mut p.q8_in, n, eps)
    }

    /// Whether this pass's matvec inputs of `cols` columns are quantized (the q8 mode, `cols` a
    /// multiple of 32).
    fn quantizes(&self, cols: usize) -> bool {
        self.precision == Precision::Q8 && cols % crate::kernels::q8act::Q8_BLOCK == 0
    }

    /// The normed rows `xn` as a matvec input whose q8 blocks are already in `q8_in` (the norm
    /// before it wrote them: `add_rmsnorm`, or `forward`'s `input` after the first norm): no
    /// launch.
    pub(crate) fn normed<'b>(&self, xn: &'b Buffer, cols: usize, q8_in: &'b Q8Blocks) -> Input<'b> {
        Input { x: xn, q8: self.quantizes(cols).then_some(q8_in) }
    }

    /// h = silu(gate) · up for `n_slots` slots per row of a fused gate-and-up output `gu`
    /// (2n per slot); a rows kernel takes one slot per row.
    fn swiglu_pairs(&self, gu: &Buffer, h: &mut Buffer, n: usize, n_slots: usize) -> Result<(), DeviceError> {
        self.run(&self.k.swiglu_pairs, SwigluPairsArgs { gu, h, n, n_slots })
    }

    /// `swiglu_pairs` into `h`, as a matvec input: in the q8 mode (n a multiple of 32) h's
    /// blocks go into `q8` in the same launch (`swiglu_pairs_q8`: `q8act`'s bits).
    fn swiglu_input<'b>(
        &self,
        gu: &Buffer,
        h: &'b mut Buffer,
        n: usize,
        n_slots: usize,
        q8: &'b mut Q8Blocks,
    ) -> Result<Input<'b>, DeviceError> {
        if !self.quantizes(n) {
            self.swiglu_pairs(gu, h, n, n_slots)?;
            return Ok(Input { x: h, q8: None });
        }
        let Q8Blocks { q, d, sum: s } = &mut *q8;
        self.run(&self.k.swiglu_pairs_q8, SwigluPairsQ8Args { gu, h: &mut *h, q, d, s, n, n_slots })?;
        Ok(Input { x: h, q8: Some(q8) })
    }

    /// y[..dim] = row `row` of x (dim wide): an exact copy.
    pub(crate) fn copy_row(&self, x: &Buffer, row: usize, y: &mut Buffer, dim: usize) -> Result<(), DeviceError> {
        self.launch(&self.k.copy_row, CopyRowArgs { x, y, row, dim })
    }

    /// Row `row` of y (dim wide) = x[..dim]: an exact copy.
    pub(crate) fn put_row(&self, x: &Buffer, y: &mut Buffer, row: usize, dim: usize) -> Result<(), DeviceError> {
        self.launch(&self.k.put_row, PutRowArgs { x, y, row, dim })
    }

    /// The token embeddings of `p.tokens` (written by `write_tokens`) into `p.x`.
    fn embed(&self, w: &Weights, p: &mut Scratch) -> Result<(), DeviceError> {
        let ty = match w.token_embd.ty {
            TensorType::F16 => TensorType::F32, // widened at load
            ty => ty,
        };
        let pair = self.k.embed.get(&ty).ok_or(DeviceError::Mismatch {
            what: "token embedding",
            expected: "a table type with an embed kernel".into(),
            found: ty.to_string(),
        })?;
        // Every embed kernel has `embed_f32`'s parameters (the table's element type aside).
        self.run(
            pair,
            EmbedF32Args { ids: &p.tokens, table: &w.token_embd.buf, y: &mut p.x, pos: 0, dim: w.config.hidden_dim },
        )
    }

    /// The output head over `t` rows of `p.xn` (already normed) through the rows matvec, read
    /// back: t × vocab, in tiles of `HEAD_TILE` rows (rows past the first tile are copied into
    /// `p.head_x` first).
    pub(crate) fn head_rows(&self, w: &Weights, p: &mut Scratch, t: usize) -> Result<Vec<f32>, DeviceError> {
        let (vocab, h) = (w.config.vocab_size, w.config.hidden_dim);
        let Scratch { xn, head_row, head_x, zero_ids, logits, q8_in, .. } = p;
        let mut out = Vec::with_capacity(t * vocab);
        for c in (0..t).step_by(HEAD_TILE) {
            let n = HEAD_TILE.min(t - c);
            if c > 0 {
                for j in 0..n {
                    self.copy_row(xn, c + j, head_row, h)?;
                    self.put_row(head_row, head_x, j, h)?;
                }
            }
            let tile = self.at(Width::Rows(n));
            let x = tile.input(if c == 0 { xn } else { head_x }, h, q8_in)?;
            tile.project(w.lm_head(), &x, zero_ids, logits)?;
            self.device.default_stream().synchronize()?;
            out.extend(self.device.read_prefix::<f32>(logits, n * vocab)?);
        }
        Ok(out)
    }
}

/// Per-stage wall time of batched prefill when profiling (`Model::set_prefill_profile`): a
/// device synchronisation at each mark, so the stages do not overlap; off, marks do nothing.
pub(crate) struct Timer {
    last: std::time::Instant,
    pub(crate) totals: Option<std::collections::BTreeMap<&'static str, f64>>,
}

impl Timer {
    /// A timer whose marks do nothing.
    pub(crate) fn off() -> Timer {
        Timer { last: std::time::Instant::now(), totals: None }
    }

    /// A timer adding to `totals` when it is `Some`.
    pub(crate) fn new(totals: Option<std::collections::BTreeMap<&'static str, f64>>) -> Timer {
        Timer { last: std::time::Instant::now(), totals }
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

/// Where a rows pass's MoE finds each layer's experts: the resident stacks, or (staged) the
/// layers streamed into `LayerStaging`'s two sets on its copy stream, one layer ahead — layer
/// 0 is queued by `start`, layer i + 1 by layer i's MoE — ordered by events.
pub(crate) struct LayerStream<'a> {
    device: &'a Device,
    staged: Option<(&'a ExpertStore, &'a mut LayerStaging)>,
}

impl<'a> LayerStream<'a> {
    pub(crate) fn start(
        device: &'a Device,
        slots: Option<&'a DecodeSlots>,
        staging: Option<&'a mut LayerStaging>,
    ) -> Result<LayerStream<'a>, DeviceError> {
        let mut staged = match (slots, staging) {
            (Some(slots), Some(staging)) => Some((slots.store(), staging)),
            _ => None,
        };
        if let Some((store, staging)) = staged.as_mut() {
            staging.stage(device, store, 0, 0)?;
        }
        Ok(LayerStream { device, staged })
    }

    /// Runs `f` on layer `i`'s experts (of `n_layers`): resident, or the staged set holding
    /// it, after queueing layer i + 1 into the other set.
    fn with_layer<T>(
        &mut self,
        resident: Option<&ExpertMatrices>,
        i: usize,
        n_layers: usize,
        f: impl FnOnce(&ExpertMatrices) -> Result<T, DeviceError>,
    ) -> Result<T, EngineError> {
        match (resident, self.staged.as_mut()) {
            (Some(resident), _) => Ok(f(resident)?),
            (None, Some((store, staging))) => {
                let (set, compute) = (i % 2, self.device.default_stream());
                if i + 1 < n_layers {
                    staging.stage(self.device, store, i + 1, 1 - set)?;
                }
                let out = f(staging.wait(compute, set)?)?;
                staging.release(compute, set)?;
                Ok(out)
            }
            (None, None) => Err(neither()),
        }
    }
}

fn neither() -> EngineError {
    EngineError::Unsupported {
        what: "routed experts",
        expected: "resident or staged".into(),
        found: "neither (a bug in baro)".into(),
    }
}

fn layer_mismatch() -> EngineError {
    EngineError::Unsupported {
        what: "layer state",
        expected: "the weights' layer kind".into(),
        found: "another kind (a bug in baro)".into(),
    }
}

/// One sequence's state as a pass over its rows sees it.
pub(crate) struct Sequence<'a> {
    pub(crate) layers: &'a mut [LayerState],
    pub(crate) rope_cos: &'a Buffer,
    pub(crate) rope_sin: &'a Buffer,
    /// The position of the pass's first row.
    pub(crate) pos: usize,
    pub(crate) max_ctx: usize,
}

/// What a pass's rows are (module docs).
pub(crate) enum Mode<'a, 'b> {
    /// One token through the m = 1 kernels; staged experts come through the decode slot cache.
    Decode { seq: Sequence<'a>, slots: Option<&'a mut DecodeSlots> },
    /// Consecutive tokens of one sequence through the rows kernels. `reordered`: the negative
    /// control's attention (`Model::set_reordered_attention`).
    Chunk { seq: Sequence<'a>, experts: LayerStream<'a>, reordered: bool },
    /// One token of each sequence `rows[r].0` (row r).
    Batch { rows: &'a mut [(&'b mut State, TokenId)], experts: LayerStream<'a> },
}

/// Writes `tokens` (at most `p.rows`) into `p.tokens` for `forward`'s embedding; a separate
/// step so that a recorded decode step (`Device::replay`) holds launches only.
pub(crate) fn write_tokens(device: &Device, p: &mut Scratch, tokens: &[TokenId]) -> Result<(), DeviceError> {
    // The token buffer holds `p.rows` tokens; rows past `tokens` are never read.
    let mut padded = tokens.to_vec();
    padded.resize(p.rows, 0);
    device.write(&mut p.tokens, &padded)
}

/// Runs the `rows` tokens in `p.tokens` (`write_tokens`; one in `Mode::Decode`) through every
/// layer and the final norm, into `p.xn`. Queues launches only.
#[allow(clippy::too_many_arguments)]
pub(crate) fn forward(
    device: &Device,
    k: &Kernels,
    precision: Precision,
    w: &Weights,
    p: &mut Scratch,
    rows: usize,
    mut mode: Mode<'_, '_>,
    timer: &mut Timer,
) -> Result<(), EngineError> {
    let cfg = &w.config;
    let width = match mode {
        Mode::Decode { .. } => Width::One,
        Mode::Chunk { .. } | Mode::Batch { .. } => Width::Rows(rows),
    };
    let pass = Pass::new(device, k, width, precision);
    let (h, eps) = (cfg.hidden_dim, cfg.rms_eps);
    pass.embed(w, p)?;
    timer.mark(device, "embed")?;
    // Each residual add is fused with the norm after it: the layer's post-attention norm,
    // then the next layer's input norm (the output norm after the last layer).
    pass.rmsnorm(&p.x, w.layers.first().map_or(&w.output_norm, |l| &l.attn_norm), &mut p.xn, h, eps)?;
    // In the q8 mode `q8_in` holds `xn`'s blocks wherever `xn` is read (`Pass::normed`): here
    // from `q8act`, after each fused add and norm from the norm's own launch.
    pass.input(&p.xn, h, &mut p.q8_in)?;
    for (i, lw) in w.layers.iter().enumerate() {
        match &lw.mixer {
            MixerWeights::Gdn(g) => {
                gdn(&pass, cfg, g, p, &mut mode, i, timer)?;
                timer.mark(device, "gdn: gated norm, out projection")?;
            }
            MixerWeights::Attention(a) => {
                attention(&pass, cfg, a, p, &mut mode, i)?;
                timer.mark(device, "attention mixer")?;
            }
        }
        pass.add_rmsnorm(&p.x, &p.mix, &lw.post_attention_norm, &mut p.h, &mut p.xn, &mut p.q8_in, h, eps)?;
        moe(&pass, cfg, &lw.moe, &mut mode, i, w.layers.len(), p, timer)?;
        // The combine runs with the residual add and the next norm (the output norm after the
        // last layer): one launch in the q8 mode.
        let next_norm = w.layers.get(i + 1).map_or(&w.output_norm, |l| &l.attn_norm);
        pass.combine_add_rmsnorm(p, next_norm, cfg.n_experts_used, h, eps)?;
        timer.mark(device, "moe: shared expert, combine")?;
    }
    timer.mark(device, "residual and norms")?;
    Ok(())
}

/// The gated delta net of layer `i` on `p.xn`, into `p.mix`.
fn gdn(
    pass: &Pass<'_>,
    cfg: &ModelConfig,
    w: &GdnWeights,
    p: &mut Scratch,
    mode: &mut Mode<'_, '_>,
    i: usize,
    timer: &mut Timer,
) -> Result<(), EngineError> {
    let ids = &p.zero_ids;
    let x = pass.normed(&p.xn, cfg.hidden_dim, &p.q8_in);
    pass.project(&w.qkv, &x, ids, &mut p.qkv)?;
    pass.project(&w.gate_z, &x, ids, &mut p.z)?;
    // An f32 beta/alpha matrix (what `project` would run as `matvec_f32`) is computed in the
    // delta rule's launch, in that matvec's order (`gdn_step_ba`), one token at a time (decode,
    // the batched step); another type keeps its own. A chunk projects it over its rows first
    // and runs `gdn_scan_rows` (the same bits: `gdn_step_ba` is the matvec then the step): the
    // per-row projection inside the sequential scan made it slower on an H100 (bench/NOTES.md,
    // 2026-12-07).
    let ba_in_step = ba_in_step(cfg, w) && !matches!(mode, Mode::Chunk { .. });
    if !ba_in_step {
        pass.project(&w.beta_alpha, &x, ids, &mut p.ba)?;
    }
    timer.mark(pass.device, "gdn: in projections")?;
    match mode {
        Mode::Decode { seq, .. } | Mode::Chunk { seq, .. } => {
            let Some(LayerState::Gdn { conv_ring, ssm }) = seq.layers.get_mut(i) else { return Err(layer_mismatch()) };
            gdn_conv(pass, cfg, w, conv_ring, p, seq.pos)?;
            timer.mark(pass.device, "gdn: conv")?;
            gdn_scan(pass, cfg, w, ssm, p, ba_in_step)?;
            timer.mark(pass.device, "gdn: delta-rule scan")?;
        }
        Mode::Batch { rows, .. } => {
            let (one, nv) = (pass.at(Width::One), cfg.gdn_n_value_heads);
            for (r, (state, _)) in rows.iter_mut().enumerate() {
                let State { pos, layers, s, .. } = &mut **state;
                let Some(LayerState::Gdn { conv_ring, ssm }) = layers.get_mut(i) else { return Err(layer_mismatch()) };
                pass.copy_row(&p.qkv, r, &mut s.qkv, cfg.gdn_conv_dim())?;
                if ba_in_step {
                    pass.copy_row(&p.xn, r, &mut s.xn, cfg.hidden_dim)?;
                } else {
                    pass.copy_row(&p.ba, r, &mut s.ba, 2 * nv)?;
                }
                gdn_conv(&one, cfg, w, conv_ring, s, *pos)?;
                gdn_scan(&one, cfg, w, ssm, s, ba_in_step)?;
                pass.put_row(&s.o, &mut p.o, r, nv * cfg.gdn_value_dim)?;
            }
        }
    }
    let (dv, nv) = (cfg.gdn_value_dim, cfg.gdn_n_value_heads);
    let o = if pass.quantizes(dv) && dv <= GATED_Q8_MAX_HEAD_DIM {
        // The gated norm quantizes its own output (`gated_rmsnorm_q8`: `q8act`'s bits).
        let Q8Blocks { q, d, sum: s } = &mut p.q8_mid;
        pass.run(
            &pass.k.gated_rmsnorm_q8,
            GatedRmsnormQ8Args {
                x: &p.o,
                z: &p.z,
                w: &w.norm,
                y: &mut p.o_normed,
                q,
                d,
                s,
                head_dim: dv,
                n_heads: nv,
                eps: cfg.rms_eps,
            },
        )?;
        Input { x: &p.o_normed, q8: Some(&p.q8_mid) }
    } else {
        pass.run(
            &pass.k.gated_rmsnorm,
            GatedRmsnormArgs {
                x: &p.o,
                z: &p.z,
                w: &w.norm,
                y: &mut p.o_normed,
                head_dim: dv,
                n_heads: nv,
                eps: cfg.rms_eps,
            },
        )?;
        pass.input(&p.o_normed, nv * dv, &mut p.q8_mid)?
    };
    Ok(pass.project(&w.out, &o, &p.zero_ids, &mut p.mix)?)
}

/// The GDN's causal conv on `p.qkv` through `conv_ring` from position `pos`, into `p.conv_out`.
fn gdn_conv(
    pass: &Pass<'_>,
    cfg: &ModelConfig,
    w: &GdnWeights,
    conv_ring: &mut Buffer,
    p: &mut Scratch,
    pos: usize,
) -> Result<(), DeviceError> {
    pass.run(
        &pass.k.gdn_conv,
        GdnConvStepArgs {
            x: &p.qkv,
            w: &w.conv,
            ring: conv_ring,
            y: &mut p.conv_out,
            channels: cfg.gdn_conv_dim(),
            conv_kernel: cfg.conv_kernel,
            pos,
        },
    )
}

/// Whether layer `w`'s beta and alpha projections run in the delta rule's launch
/// (`gdn_step_ba`): an f32 matrix and a hidden size its workgroup array holds.
fn ba_in_step(cfg: &ModelConfig, w: &GdnWeights) -> bool {
    w.beta_alpha.ty == TensorType::F32 && cfg.hidden_dim <= crate::kernels::gdn::GDN_BA_MAX_K
}

/// The delta rule on `p.conv_out` and `p.ba` (beta | alpha) with the state `ssm`, into `p.o`;
/// `fused` (`ba_in_step` and one token at a time), on `p.conv_out` and the normed input `p.xn`
/// with the beta/alpha matrix.
fn gdn_scan(
    pass: &Pass<'_>,
    cfg: &ModelConfig,
    w: &GdnWeights,
    ssm: &mut Buffer,
    p: &mut Scratch,
    fused: bool,
) -> Result<(), DeviceError> {
    let (dk, dv, n_k_heads, n_v_heads) =
        (cfg.gdn_key_dim, cfg.gdn_value_dim, cfg.gdn_n_key_heads, cfg.gdn_n_value_heads);
    let tiled = true; // value heads in GGUF's order (`weights`)
    let q_scale = cfg.gdn_q_scale();
    if fused {
        return pass.run(
            &pass.k.gdn_scan_ba,
            GdnStepBaArgs {
                qkv: &p.conv_out,
                x: &p.xn,
                w_ba: &w.beta_alpha.buf,
                ssm_a: &w.ssm_a,
                dt_bias: &w.dt_bias,
                state: ssm,
                o: &mut p.o,
                dk,
                dv,
                n_k_heads,
                n_v_heads,
                tiled,
                q_scale,
                k: cfg.hidden_dim,
            },
        );
    }
    pass.run(
        &pass.k.gdn_scan,
        GdnStepArgs {
            qkv: &p.conv_out,
            ba: &p.ba,
            ssm_a: &w.ssm_a,
            dt_bias: &w.dt_bias,
            state: ssm,
            o: &mut p.o,
            dk,
            dv,
            n_k_heads,
            n_v_heads,
            tiled,
            q_scale,
        },
    )
}

/// Full gated attention of layer `i` on `p.xn`, into `p.mix`.
fn attention(
    pass: &Pass<'_>,
    cfg: &ModelConfig,
    w: &AttentionWeights,
    p: &mut Scratch,
    mode: &mut Mode<'_, '_>,
    i: usize,
) -> Result<(), EngineError> {
    let ids = &p.zero_ids;
    let (hd, nh, nkv, eps) = (cfg.head_dim, cfg.n_heads, cfg.n_kv_heads, cfg.rms_eps);
    let x = pass.normed(&p.xn, cfg.hidden_dim, &p.q8_in);
    pass.project(&w.q, &x, ids, &mut p.q_gate)?;
    pass.project(&w.k, &x, ids, &mut p.k_raw)?;
    pass.project(&w.v, &x, ids, &mut p.v)?;
    // At decode and over a chunk (rows at consecutive positions of one sequence) the q and k
    // norms rotate their own output (`head_rmsnorm_rope`: `head_rmsnorm`'s and then
    // `rope_neox`'s bits); a batched step's rows are each at their own sequence's position,
    // so there the norms run over the rows and RoPE per sequence (`attention_cached`).
    let rope_at = match &*mode {
        Mode::Decode { seq, .. } | Mode::Chunk { seq, .. } => Some((seq.rope_cos, seq.rope_sin, seq.pos)),
        Mode::Batch { .. } => None,
    };
    for (x, norm_w, y, in_stride, n_heads) in
        [(&p.q_gate, &w.q_norm, &mut p.q, 2 * hd, nh), (&p.k_raw, &w.k_norm, &mut p.k, hd, nkv)]
    {
        let (head_dim, out_stride) = (hd, hd);
        match rope_at {
            Some((cos, sin, pos)) => pass.run(
                &pass.k.head_rmsnorm_rope,
                HeadRmsnormRopeArgs {
                    x,
                    w: norm_w,
                    cos,
                    sin,
                    y,
                    head_dim,
                    in_stride,
                    out_stride,
                    n_heads,
                    eps,
                    pos,
                    rope_dim: cfg.rope_dim,
                },
            )?,
            None => pass.run(
                &pass.k.head_rmsnorm,
                HeadRmsnormArgs { x, w: norm_w, y, head_dim, in_stride, out_stride, n_heads, eps },
            )?,
        }
    }
    let reordered = matches!(mode, Mode::Chunk { reordered: true, .. });
    match mode {
        Mode::Decode { seq, .. } | Mode::Chunk { seq, .. } => {
            let Some(LayerState::Attention { k_cache, v_cache }) = seq.layers.get_mut(i) else {
                return Err(layer_mismatch());
            };
            let pv = if reordered { &pass.k.attention_pv_reordered } else { pass.pick(&pass.k.attention_pv) };
            attention_cached(pass, pv, cfg, k_cache, v_cache, None, p, seq.pos, seq.max_ctx)?;
        }
        Mode::Batch { rows, .. } => {
            let one = pass.at(Width::One);
            let (q_dim, kv_dim) = (nh * hd, nkv * hd);
            for (r, (state, _)) in rows.iter_mut().enumerate() {
                let State { pos, max_ctx, layers, rope_cos, rope_sin, s, .. } = &mut **state;
                let Some(LayerState::Attention { k_cache, v_cache }) = layers.get_mut(i) else {
                    return Err(layer_mismatch());
                };
                pass.copy_row(&p.q_gate, r, &mut s.q_gate, 2 * q_dim)?;
                pass.copy_row(&p.q, r, &mut s.q, q_dim)?;
                pass.copy_row(&p.k, r, &mut s.k, kv_dim)?;
                pass.copy_row(&p.v, r, &mut s.v, kv_dim)?;
                attention_cached(
                    &one,
                    &pass.k.attention_pv.one,
                    cfg,
                    k_cache,
                    v_cache,
                    Some((rope_cos, rope_sin)),
                    s,
                    *pos,
                    *max_ctx,
                )?;
                pass.put_row(&s.attn, &mut p.attn, r, q_dim)?;
            }
        }
    }
    let a = pass.input(&p.attn, nh * hd, &mut p.q8_mid)?;
    Ok(pass.project(&w.o, &a, &p.zero_ids, &mut p.mix)?)
}

/// Attention's stateful part from position `pos`: RoPE on `p.q` and `p.k` with the `rope`
/// tables (`None`: the norms already rotated them, `head_rmsnorm_rope`), the KV append,
/// attention over positions 0..=pos (per row) gated by `p.q_gate`, into `p.attn`: the scores
/// and their softmax in `p.probs_attn`, then the value product `pv` (the pass's
/// `attention_pv`, or the negative control's).
#[allow(clippy::too_many_arguments)]
fn attention_cached(
    pass: &Pass<'_>,
    pv: &DeviceKernel,
    cfg: &ModelConfig,
    k_cache: &mut Buffer,
    v_cache: &mut Buffer,
    rope: Option<(&Buffer, &Buffer)>,
    p: &mut Scratch,
    pos: usize,
    max_ctx: usize,
) -> Result<(), DeviceError> {
    let (hd, nh, nkv) = (cfg.head_dim, cfg.n_heads, cfg.n_kv_heads);
    let (head_dim, n_heads, n_kv_heads, ctx_stride) = (hd, nh, nkv, max_ctx);
    for (x, n_heads) in [(&mut p.q, nh), (&mut p.k, nkv)] {
        let Some((cos, sin)) = rope else { break };
        pass.run(
            &pass.k.rope_neox,
            RopeNeoxArgs { x, cos, sin, pos, rope_dim: cfg.rope_dim, head_stride: hd, n_heads },
        )?;
    }
    pass.run(
        &pass.k.kv_append,
        KvAppendArgs {
            k_new: &p.k,
            v_new: &p.v,
            k_cache: &mut *k_cache,
            v_cache: &mut *v_cache,
            pos,
            kv_dim: nkv * hd,
        },
    )?;
    let scale = (1.0 / (hd as f64).sqrt()) as f32;
    let n_ctx = pos + 1;
    pass.run(
        &pass.k.attention_scores,
        AttentionScoresArgs {
            q: &p.q,
            k_cache,
            scratch: &mut p.probs_attn,
            head_dim,
            n_heads,
            n_kv_heads,
            n_ctx,
            ctx_stride,
            scale,
        },
    )?;
    pass.run(
        &pass.k.attention_softmax,
        AttentionSoftmaxArgs { scratch: &mut p.probs_attn, n_heads, n_ctx, ctx_stride },
    )?;
    pass.run_kernel(
        pv,
        AttentionPvArgs {
            probs: &p.probs_attn,
            v_cache,
            gate: &p.q_gate,
            y: &mut p.attn,
            head_dim,
            n_heads,
            n_kv_heads,
            n_ctx,
            ctx_stride,
            gate_stride: 2 * hd,
            gate_off: hd,
        },
    )
}

/// A rows pass's routed-expert projection over its expert-sorted slots (`ids` the slots'
/// experts): on `moe_scatter_tiles`' layout (`tiled`), where the matrix's type has an 8-row q8
/// kernel and its k fits the staged activations, that kernel over tiles of one expert (it
/// checks every tile's ids and fails the launch otherwise), else the rows kernel, one slot
/// per row. Either computes each slot as the m = 1 kernel does (proven).
fn expert_matvec(
    pass: &Pass<'_>,
    tiled: bool,
    w: &Matrix,
    x: &Input<'_>,
    ids: &Buffer,
    y: &mut Buffer,
) -> Result<(), DeviceError> {
    let (pair, args) = pass.matvec_args(w, x, ids, y, 0, 1);
    match pass.k.matvec_q8_tile_for(pair, w.cols).filter(|_| tiled) {
        Some(tiles) => args.launch(pass, tiles, Some(pass.rows())),
        None => args.launch(pass, pass.pick(pair), pass.row_count()),
    }
}

/// The MoE block of layer `i` (of `n_layers`) on `p.xn`: the router per row, the routed
/// experts into `p.down`, the shared expert into `p.sh_out` and its gate's logit into
/// `p.sh_logit` (the combine in top-k order runs with the residual add after it,
/// `Pass::combine_add_rmsnorm`). One token: the m = 1
/// matvecs run the k experts as k slots (staged: the router's ids come back to the host and
/// the decode slot cache maps them to slots). Rows: the (row, k) pairs are sorted by expert
/// on the device (`moe_count`, `moe_scatter`; in the q8 mode `moe_scatter_tiles`, groups
/// padded to tiles of 8 for the 8-row matvecs), gathered, projected one slot per row, and
/// gathered back into (row, k) order. When profiling, `timer` splits a rows pass's block into
/// router and sort, the routed experts' matvecs (and SwiGLU), and the rest (the caller's mark).
#[allow(clippy::too_many_arguments)]
fn moe(
    pass: &Pass<'_>,
    cfg: &ModelConfig,
    w: &MoeWeights,
    mode: &mut Mode<'_, '_>,
    i: usize,
    n_layers: usize,
    p: &mut Scratch,
    timer: &mut Timer,
) -> Result<(), EngineError> {
    let ids = &p.zero_ids;
    let (k, fi, fs, h, ne) =
        (cfg.n_experts_used, cfg.expert_ffn_dim, cfg.shared_ffn_dim, cfg.hidden_dim, cfg.n_experts);
    let x = pass.normed(&p.xn, h, &p.q8_in);
    pass.project(&w.router, &x, ids, &mut p.router_logits)?;
    // An f32 shared-expert gate (what `project` would run as `matvec_f32`) is computed in the
    // router's launch, in that matvec's order (`router_topk_gate`); another type keeps its own
    // matvec after the shared expert.
    let gate_in_router = w.shared_gate.ty == TensorType::F32;
    if gate_in_router {
        pass.run(
            &pass.k.router_topk_gate,
            RouterTopkGateArgs {
                logits: &p.router_logits,
                x: &p.xn,
                gate_w: &w.shared_gate.buf,
                probs: &mut p.router_probs,
                ids: &mut p.expert_ids,
                weights: &mut p.expert_weights,
                gate_logit: &mut p.sh_logit,
                n_experts: ne,
                top_k: k,
                k: h,
            },
        )?;
    } else {
        pass.run(
            &pass.k.router_topk,
            RouterTopkArgs {
                logits: &p.router_logits,
                probs: &mut p.router_probs,
                ids: &mut p.expert_ids,
                weights: &mut p.expert_weights,
                n_experts: ne,
                top_k: k,
            },
        )?;
    }
    match mode {
        Mode::Decode { slots, .. } => {
            let (experts, expert_ids) = match (&w.experts, slots.as_deref_mut()) {
                (Some(resident), _) => (resident, &p.expert_ids),
                (None, Some(decode)) => decode.map(pass.device, pass.device.default_stream(), i, &p.expert_ids)?,
                (None, None) => return Err(neither()),
            };
            pass.matvec_slots(&experts.gate_up, &x, expert_ids, &mut p.gate_up, 0, k)?;
            let act = pass.swiglu_input(&p.gate_up, &mut p.act, fi, k, &mut p.q8_mid)?;
            pass.matvec_slots(&experts.down, &act, expert_ids, &mut p.down, fi, k)?;
        }
        Mode::Chunk { experts, .. } | Mode::Batch { experts, .. } => {
            let pairs = pass.rows() * k;
            pass.launch(
                &pass.k.moe_count,
                MoeCountArgs { ids: &p.expert_ids, counts: &mut p.counts, n_pairs: pairs, n_experts: ne },
            )?;
            // The q8 mode pads each expert's group to whole tiles of EXPERT_TILE slots, so the
            // 8-row matvecs share each weight unpack over a tile of one expert, where that pads
            // the pairs at most MAX_TILE_PADDING-fold (sparse routing, as in a batched step of a
            // few sequences, keeps one slot per pair): the expert counts come back to the host
            // (n_experts u32 per layer) to choose and to size the launches. Either layout gives
            // every pair the m = 1 kernel's bits.
            let tiled = if pass.precision == Precision::Q8 {
                pass.device.default_stream().synchronize()?;
                let counts = pass.device.read_prefix::<u32>(&p.counts, ne)?;
                let slots: usize = counts.iter().map(|&c| (c as usize).div_ceil(EXPERT_TILE) * EXPERT_TILE).sum();
                (slots <= MAX_TILE_PADDING * pairs).then_some(slots)
            } else {
                None
            };
            let slots = if let Some(slots) = tiled {
                pass.launch(
                    &pass.k.moe_scatter_tiles,
                    MoeScatterTilesArgs {
                        ids: &p.expert_ids,
                        counts: &p.counts,
                        pair_of: &mut p.pair_of,
                        slot_of: &mut p.slot_of,
                        sorted_ids: &mut p.sorted_ids,
                        n_slots: &mut p.n_slots,
                        n_pairs: pairs,
                        n_experts: ne,
                        tile: EXPERT_TILE,
                    },
                )?;
                slots
            } else {
                pass.launch(
                    &pass.k.moe_scatter,
                    MoeScatterArgs {
                        ids: &p.expert_ids,
                        counts: &p.counts,
                        pair_of: &mut p.pair_of,
                        slot_of: &mut p.slot_of,
                        sorted_ids: &mut p.sorted_ids,
                        n_pairs: pairs,
                        n_experts: ne,
                    },
                )?;
                pairs
            };
            if slots > expert_slots(cfg, pass.rows()) {
                return Err(EngineError::Unsupported {
                    what: "expert slots",
                    expected: format!("at most {} for {} rows", expert_slots(cfg, pass.rows()), pass.rows()),
                    found: format!("{slots} (a bug in baro)"),
                });
            }
            let by_slot = pass.at(Width::Rows(slots));
            if slots > 0 {
                pass.launch(
                    &pass.k.moe_gather,
                    MoeGatherArgs { x: &p.xn, pair_of: &p.pair_of, y: &mut p.xs, dim: h, top_k: k, n_pairs: slots },
                )?;
            }
            timer.mark(pass.device, "moe: router, sort, gather")?;
            experts.with_layer(w.experts.as_ref(), i, n_layers, |e| {
                if slots == 0 {
                    return Ok(()); // no pair names an expert (NaN router logits)
                }
                let xs = by_slot.input(&p.xs, h, &mut p.q8_mid)?;
                expert_matvec(&by_slot, tiled.is_some(), &e.gate_up, &xs, &p.sorted_ids, &mut p.gate_up)?;
                by_slot.swiglu_pairs(&p.gate_up, &mut p.act, fi, 1)?;
                let act = by_slot.input(&p.act, fi, &mut p.q8_mid)?;
                expert_matvec(&by_slot, tiled.is_some(), &e.down, &act, &p.sorted_ids, &mut p.down_sorted)
            })?;
            timer.mark(pass.device, "moe: routed experts")?;
            pass.launch(
                &pass.k.moe_ungather,
                MoeUngatherArgs { x: &p.down_sorted, slot_of: &p.slot_of, y: &mut p.down, dim: h, n_pairs: pairs },
            )?;
        }
    }
    pass.project(&w.gate_up_shexp, &x, ids, &mut p.sh_gate_up)?;
    let sh_act = pass.swiglu_input(&p.sh_gate_up, &mut p.sh_act, fs, 1, &mut p.q8_sh)?;
    pass.project(&w.down_shexp, &sh_act, ids, &mut p.sh_out)?;
    if !gate_in_router {
        pass.project(&w.shared_gate, &x, ids, &mut p.sh_logit)?;
    }
    Ok(())
}
