//! Full (gated) attention for one query token over a KV cache (GQA), in three launches, and
//! the KV-cache append.
//!
//! Order, per head: score_t = seq(q·k_t) · scale (one lane per position, `par`:
//! `attention_scores`); m = max over t (`lanes(32).butterfly()`, exact); p_t = exp(score_t − m);
//! s = Σ p_t (`lanes(32).butterfly()`); p_t ← p_t / s (Transformers normalises before the value
//! product: `attention_softmax`); o_d = seq_t(p_t · v_t,d) (one lane per value dim); out = o ·
//! sigmoid(gate) (`attention_pv`). The scores, then the probabilities, live in a caller-given
//! scratch buffer (n_heads × ctx_stride): the kernel language's shared arrays have a size fixed
//! when the kernel is written, and the context length is not.
//!
//! Three kernels, not one: each has its own grid (the scores spread over positions too, the
//! other two over heads) and its rows sibling its own tiles, and none of them carries the
//! registers of the other phases (one kernel holding all three took 255 registers on sm_90,
//! one workgroup per SM). The phases meet only through the scratch buffer, so the three
//! launches compute exactly what one did.

use baro::dsl::mathlib;
use baro::kernel;
use baro::reference::{max_lanes_butterfly, sum_lanes_butterfly, sum_sequential};

/// Writes `k_new`, `v_new` (n_kv_heads · head_dim = kv_dim each) at position `pos` of caches
/// laid out (position, kv_head, head_dim). Its rows sibling (derived) writes row r's k and v
/// at position pos + r.
#[kernel(grid = [1], block = 256, rows(name = kv_append_rows, axis = 0, row_stride(k_new = kv_dim, v_new = kv_dim), row_step(pos = 1)))]
pub fn kv_append(k_new: &[f32], v_new: &[f32], k_cache: &mut [f32], v_cache: &mut [f32], pos: usize, kv_dim: usize) {
    for i in par(0..kv_dim) {
        k_cache[pos * kv_dim + i] = k_new[i];
        v_cache[pos * kv_dim + i] = v_new[i];
    }
}

/// The scores of one query token: scratch[h · ctx_stride + t] = seq_d(q_h,d · k_t,d) · scale for
/// t < n_ctx. q: (n_heads, head_dim), already normed and rotated; caches: (position,
/// n_kv_heads, head_dim) holding positions 0..n_ctx; query head h reads kv head
/// h / (n_heads / n_kv_heads). One workgroup per (head, 256 positions).
#[kernel(grid = [n_heads, (n_ctx + 255) / 256], block = 256, verify(head_dim = [1, 3, 33], n_heads = [2, 4], n_kv_heads = [1, 2], n_ctx = [1, 31, 33], ctx_stride = [40]))]
pub fn attention_scores(
    q: &[f32],
    k_cache: &[f32],
    scratch: &mut [f32],
    head_dim: usize,
    n_heads: usize,
    n_kv_heads: usize,
    n_ctx: usize,
    ctx_stride: usize,
    scale: f32,
) {
    let h = group_id(0);
    let t0 = group_id(1) * 256;
    let kv = (h / (n_heads / n_kv_heads)) * head_dim;
    let row = n_kv_heads * head_dim;
    for i in par(0..if n_ctx - t0 < 256 { n_ctx - t0 } else { 256 }) {
        scratch[h * ctx_stride + t0 + i] =
            sum!(d in 0..head_dim, order = seq, q[h * head_dim + d] * k_cache[(t0 + i) * row + kv + d]) * scale;
    }
}

/// The largest `head_dim` `attention_scores_rows` and `attention_pv_rows` take: the scores'
/// workgroup arrays hold 16 query rows and a tile of 16 key positions of that many dims (16.3
/// KiB + 17 KiB). `ModelConfig::validate` checks it.
pub const ATTENTION_ROWS_MAX_HEAD_DIM: usize = 256;

/// `attention_scores` over rows, causal: row r scores the first n_ctx + r positions (n_ctx is
/// row 0's context); q and scratch hold one row each per n_heads heads. One workgroup per
/// (head, 16 consecutive rows, 64 positions): the 16 rows' q are staged in workgroup memory
/// (rows 260 floats apart, so the rows a warp reads sit on different banks), and the keys are
/// read 16 positions at a time into a transposed tile (`ks[d · 17 + t]`: coalesced global
/// reads along d, conflict-free reads along t), from which thread (pair of rows, t) computes
/// both rows' scores at that position in one reduction over the two rows (each key element
/// read once for the two), each row's sum over d sequential as in decode. A workgroup whose
/// positions no row of its tile reaches reads nothing; a row of the tile past the last reads
/// the last row's q and stores nothing.
#[kernel(grid = [n_heads, (rows + 15) / 16, (n_ctx + rows + 62) / 64], block = 256, rows_of = attention_scores, rows = rows,
         row_stride(q = n_heads * head_dim, scratch = n_heads * ctx_stride),
         row_step(n_ctx = 1),
         verify(head_dim = [1, 33], n_heads = [2], n_kv_heads = [1, 2], n_ctx = [1, 17, 40], ctx_stride = [160], rows = [1, 3, 17, 30]))]
pub fn attention_scores_rows(
    q: &[f32],
    k_cache: &[f32],
    scratch: &mut [f32],
    head_dim: usize,
    n_heads: usize,
    n_kv_heads: usize,
    n_ctx: usize,
    ctx_stride: usize,
    scale: f32,
    rows: usize,
) {
    let h = group_id(0);
    let r0 = group_id(1) * 16;
    let p0 = group_id(2) * 64;
    let last = rows - 1;
    let kv = (h / (n_heads / n_kv_heads)) * head_dim;
    let row = n_kv_heads * head_dim;
    // The tile's longest row: its positions are the ones any row of the tile reads; this
    // workgroup's are p0..pe.
    let nt = n_ctx + (r0 + 15).min(last);
    let pe = if p0 < nt { (p0 + 64).min(nt) } else { p0 };
    let qs = shared::<f32, 4160>();
    let ks = shared::<f32, 4352>();
    for d in par(0..if p0 < nt { head_dim } else { 0 }) {
        for j in 0..16 {
            qs[j * 260 + d] = q[((r0 + j).min(last) * n_heads + h) * head_dim + d];
        }
    }
    for t0 in (p0..pe).step_by(16) {
        for d in par(0..head_dim) {
            for t in 0..16 {
                if t0 + t < pe {
                    ks[d * 17 + t] = k_cache[(t0 + t) * row + kv + d];
                }
            }
        }
        for i in par(0..128) {
            let j = i / 16 * 2;
            let t = t0 + i % 16;
            let [s0, s1] = sum!(u in 0..2, d in 0..head_dim, order = seq, qs[(j + u) * 260 + d] * ks[d * 17 + i % 16]);
            if r0 + j < rows && t < pe && t < n_ctx + r0 + j {
                scratch[((r0 + j) * n_heads + h) * ctx_stride + t] = s0 * scale;
            }
            if r0 + j + 1 < rows && t < pe && t < n_ctx + r0 + j + 1 {
                scratch[((r0 + j + 1) * n_heads + h) * ctx_stride + t] = s1 * scale;
            }
        }
    }
}

/// The softmax of one query token's scores, in place: m = max_t score_t, p_t = exp(score_t − m),
/// s = Σ_t p_t, p_t ← p_t / s over t < n_ctx of head h's scratch row (`attention_scores`'
/// output). One workgroup per head; the rows sibling (derived) one per (head, row), row r over
/// n_ctx + r positions.
#[kernel(grid = [n_heads], block = 256, verify(n_heads = [2, 4], n_ctx = [1, 31, 33], ctx_stride = [40]),
         rows(name = attention_softmax_rows, row_stride(scratch = n_heads * ctx_stride), row_step(n_ctx = 1), verify(n_ctx = [1, 33], ctx_stride = [40], rows = [1, 3])))]
pub fn attention_softmax(scratch: &mut [f32], n_heads: usize, n_ctx: usize, ctx_stride: usize) {
    let sb = group_id(0) * ctx_stride;
    let m = max!(t in 0..n_ctx, order = lanes(32).butterfly(), scratch[sb + t]);
    for t in par(0..n_ctx) {
        scratch[sb + t] = exp(scratch[sb + t] - m);
    }
    let s = sum!(t in 0..n_ctx, order = lanes(32).butterfly(), scratch[sb + t]);
    for t in par(0..n_ctx) {
        scratch[sb + t] = scratch[sb + t] / s;
    }
}

/// The gated value product of one query token: y[h · head_dim + d] = seq_t(p_t · v_t,d) ·
/// sigmoid(gate[h · gate_stride + gate_off + d]) over t < n_ctx, p = `attention_softmax`'
/// output. The gate of head h is the `q_proj` output as is (stride 2·head_dim, offset
/// head_dim). One workgroup per head, one lane per value dim.
#[kernel(grid = [n_heads], block = 256, verify(head_dim = [1, 3, 33], n_heads = [2, 4], n_kv_heads = [1, 2], n_ctx = [1, 31, 33], ctx_stride = [40], gate_stride = [70], gate_off = [35]))]
pub fn attention_pv(
    probs: &[f32],
    v_cache: &[f32],
    gate: &[f32],
    y: &mut [f32],
    head_dim: usize,
    n_heads: usize,
    n_kv_heads: usize,
    n_ctx: usize,
    ctx_stride: usize,
    gate_stride: usize,
    gate_off: usize,
) {
    let h = group_id(0);
    let kv = (h / (n_heads / n_kv_heads)) * head_dim;
    let row = n_kv_heads * head_dim;
    for d in par(0..head_dim) {
        y[h * head_dim + d] = sum!(t in 0..n_ctx, order = seq, probs[h * ctx_stride + t] * v_cache[t * row + kv + d])
            * sigmoid(gate[h * gate_stride + gate_off + d]);
    }
}

/// `attention_pv` over rows, causal: row r over its first n_ctx + r positions. One workgroup
/// per (head, 32 consecutive rows); thread i takes 8 of those rows (i / 64) and the value
/// dims i % 64 + 64·e for e < 4, and walks the positions once for its 32 (row, dim) pairs,
/// adding p_j[t] · v[t, d] to pair (j, d)'s partial while t < row j's length (one reduction
/// over 32 results with a length per row): each pair's sum is decode's sequential sum, the 32
/// interleaved. Per position a thread loads 8 probabilities (the same for the whole warp)
/// and 4 values (each load coalesced across the warp) for 32 products, so the loop is not
/// bound by its loads; 8 rows × 1 dim per thread loaded 9 for 8 and waited on them. Needs
/// head_dim ≤ 256 (`ATTENTION_ROWS_MAX_HEAD_DIM`). A row past the last reads the last row's p
/// and stores nothing, as does a dim past head_dim (reading the last dim).
#[kernel(grid = [n_heads, (rows + 31) / 32], block = 256, rows_of = attention_pv, rows = rows,
         row_stride(probs = n_heads * ctx_stride, gate = n_heads * gate_stride, y = n_heads * head_dim),
         row_step(n_ctx = 1),
         verify(head_dim = [1, 33], n_heads = [2], n_kv_heads = [1, 2], n_ctx = [1, 17, 40], ctx_stride = [72], gate_stride = [70], gate_off = [35], rows = [1, 3, 17, 40]))]
pub fn attention_pv_rows(
    probs: &[f32],
    v_cache: &[f32],
    gate: &[f32],
    y: &mut [f32],
    head_dim: usize,
    n_heads: usize,
    n_kv_heads: usize,
    n_ctx: usize,
    ctx_stride: usize,
    gate_stride: usize,
    gate_off: usize,
    rows: usize,
) {
    let h = group_id(0);
    let last = rows - 1;
    let kv = (h / (n_heads / n_kv_heads)) * head_dim;
    let row = n_kv_heads * head_dim;
    for i in par(0..256) {
        let r0 = group_id(1) * 32 + i / 64 * 8;
        let l = i % 64;
        let os = sum!(u in 0..32, t in 0..n_ctx + (r0 + u / 4).min(last), order = seq,
            probs[((r0 + u / 4).min(last) * n_heads + h) * ctx_stride + t]
                * v_cache[t * row + kv + (l + u % 4 * 64).min(head_dim - 1)]);
        for u in 0..32 {
            if r0 + u / 4 < rows && l + u % 4 * 64 < head_dim {
                y[((r0 + u / 4) * n_heads + h) * head_dim + l + u % 4 * 64] =
                    os[u] * sigmoid(gate[((r0 + u / 4) * n_heads + h) * gate_stride + gate_off + l + u % 4 * 64]);
            }
        }
    }
}

/// `attention_scores`, `attention_softmax` and `attention_pv` in plain Rust.
#[allow(clippy::too_many_arguments)]
pub fn attention_reference(
    q: &[f32],
    k_cache: &[f32],
    v_cache: &[f32],
    gate: &[f32],
    head_dim: usize,
    n_heads: usize,
    n_kv_heads: usize,
    n_ctx: usize,
    gate_stride: usize,
    gate_off: usize,
    scale: f32,
) -> Vec<f32> {
    let row = n_kv_heads * head_dim;
    let mut y = vec![0.0f32; n_heads * head_dim];
    for h in 0..n_heads {
        let kv = (h / (n_heads / n_kv_heads)) * head_dim;
        let scores: Vec<f32> = (0..n_ctx)
            .map(|t| sum_sequential(head_dim, |d| q[h * head_dim + d] * k_cache[t * row + kv + d]) * scale)
            .collect();
        let m = max_lanes_butterfly(n_ctx, 32, |t| scores[t]);
        let e: Vec<f32> = scores.iter().map(|&v| mathlib::exp(v - m)).collect();
        let s = sum_lanes_butterfly(n_ctx, 32, |t| e[t]);
        let p: Vec<f32> = e.iter().map(|&v| v / s).collect();
        for d in 0..head_dim {
            y[h * head_dim + d] = sum_sequential(n_ctx, |t| p[t] * v_cache[t * row + kv + d])
                * mathlib::sigmoid(gate[h * gate_stride + gate_off + d]);
        }
    }
    y
}

/// **Not identical to decode** (the negative control, behind the engine's explicit opt-out):
/// `attention_pv_rows` with the P·V sum over positions as `lanes(32).butterfly()` instead of
/// `seq`, the faster parallel order a tiled attention would use, one workgroup per (head,
/// row). It declares no sibling; given `attention_pv_rows`' declaration the verifier rejects
/// it (`kernels_rows::reordered_attention_is_rejected`), and the identity gate run with it
/// reports the divergence.
#[kernel(grid = [n_heads, rows], block = 256)]
pub fn attention_pv_rows_reordered(
    probs: &[f32],
    v_cache: &[f32],
    gate: &[f32],
    y: &mut [f32],
    head_dim: usize,
    n_heads: usize,
    n_kv_heads: usize,
    n_ctx: usize,
    ctx_stride: usize,
    gate_stride: usize,
    gate_off: usize,
    rows: usize,
) {
    let h = group_id(0);
    let r = group_id(1);
    let kv = (h / (n_heads / n_kv_heads)) * head_dim;
    let row = n_kv_heads * head_dim;
    let sb = (r * n_heads + h) * ctx_stride;
    for d in 0..head_dim {
        y[(r * n_heads + h) * head_dim + d] = sum!(t in 0..n_ctx + r, order = lanes(32).butterfly(), probs[sb + t] * v_cache[t * row + kv + d])
            * sigmoid(gate[(r * n_heads + h) * gate_stride + gate_off + d]);
    }
}
