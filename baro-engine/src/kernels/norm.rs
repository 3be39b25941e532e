//! RMSNorm in fp32, and the residual add fused with the norm after it (`add_rmsnorm`).
//! Weight convention: `rmsnorm` and `head_rmsnorm` take the weight **as GGUF stores it**
//! (already `1 + w`), so `y = x · rsqrt(mean x² + eps) · w`; a Hugging Face checkpoint's
//! zero-centred weight is either offset by the loader (`1.0 + w` in f32, the same rounding the
//! kernel would do) or passed to `rmsnorm_zc`, which adds it in the kernel. The sum of squares
//! is `lanes(32).butterfly()` in every kernel here; the elementwise part runs 256 elements per
//! workgroup of 256 threads, over as many workgroups as the length needs. `rmsnorm` and
//! `add_rmsnorm` first copy the whole input (or the sums a + b) into workgroup memory with all
//! 256 threads (their loads independent, so one memory latency instead of the eight of one
//! 32-lane wave walking 2,048 elements), then sum from there: the same values in the same
//! order, so the same bits (`n ≤ NORM_MAX_DIM`, `ModelConfig::validate` checks the hidden
//! size; a longer row is a bounds error on the workgroup array). The rows siblings
//! are derived by `rows(..)` (row r offset by its `row_stride`s, one more grid axis) and proven
//! at build time.

use baro::dsl::mathlib;
use baro::kernel;
use baro::reference::sum_lanes_butterfly;

/// The longest row `rmsnorm`, `add_rmsnorm` and `q8act::add_rmsnorm_q8` take: the size of the
/// workgroup array that holds the row while its sum of squares is formed.
pub const NORM_MAX_DIM: usize = 4096;

/// y = x · rsqrt(Σx²/n + eps) · w (w stored as 1 + w_hf). Workgroup g writes elements
/// g·256 .. g·256 + 256 (one per thread); every workgroup computes the same Σx² in the same
/// order (2048 floats read again per workgroup: cheaper than a second launch), from its copy
/// of x in workgroup memory (`n ≤ NORM_MAX_DIM`).
#[kernel(grid = [(n + 255) / 256], block = 256, verify(n = [1, 31, 33, 256, 257, 600]),
         rows(name = rmsnorm_rows, row_stride(x = n, y = n)))]
pub fn rmsnorm(x: &[f32], w: &[f32], y: &mut [f32], n: usize, eps: f32) {
    let base = group_id(0) * 256;
    let xs = shared::<f32, 4096>();
    for i in par(0..n) {
        xs[i] = x[i];
    }
    let ss = sum!(i in 0..n, order = lanes(32).butterfly(), xs[i] * xs[i]);
    let scale = rsqrt(ss / (n as f32) + eps);
    for j in par(0..if n - base < 256 { n - base } else { 256 }) {
        y[base + j] = xs[base + j] * scale * w[base + j];
    }
}

/// y = x · rsqrt(Σx²/n + eps) · (1 + w) (w as Hugging Face stores it); chunks as `rmsnorm`.
#[kernel(grid = [(n + 255) / 256], block = 256)]
pub fn rmsnorm_zc(x: &[f32], w: &[f32], y: &mut [f32], n: usize, eps: f32) {
    let base = group_id(0) * 256;
    let ss = sum!(i in 0..n, order = lanes(32).butterfly(), x[i] * x[i]);
    let scale = rsqrt(ss / (n as f32) + eps);
    for j in par(0..if n - base < 256 { n - base } else { 256 }) {
        y[base + j] = x[base + j] * scale * (1.0 + w[base + j]);
    }
}

/// Per-head RMSNorm over `head_dim` (q/k norm), one workgroup per head, the weight shared by
/// all heads and stored as `1 + w`. Head h reads `x[h · in_stride ..]` and writes
/// `y[h · out_stride ..]`, so the query half of the interleaved (query, gate) `q_proj` output
/// is normed and compacted in one launch. Heads must not overlap (out_stride ≥ head_dim): the
/// verifier's race check rejects the default strides {1, 3}, so the domain is listed.
#[kernel(grid = [n_heads], block = 256, verify(head_dim = [1, 31, 33, 70], in_stride = [70, 141], out_stride = [70], n_heads = [1, 2, 3]),
         rows(name = head_rmsnorm_rows, row_stride(x = n_heads * in_stride, y = n_heads * out_stride), verify(n_heads = [1, 2], rows = [1, 3])))]
pub fn head_rmsnorm(
    x: &[f32],
    w: &[f32],
    y: &mut [f32],
    head_dim: usize,
    in_stride: usize,
    out_stride: usize,
    n_heads: usize,
    eps: f32,
) {
    let h = group_id(0);
    let xb = h * in_stride;
    let ss = sum!(i in 0..head_dim, order = lanes(32).butterfly(), x[xb + i] * x[xb + i]);
    let scale = rsqrt(ss / (head_dim as f32) + eps);
    for i in par(0..head_dim) {
        y[h * out_stride + i] = x[xb + i] * scale * w[i];
    }
}

/// `head_rmsnorm` and then `rope::rope_neox` on its output in one launch (attention's q and k
/// at decode and over a chunk): head h's normed values v_i = x[h · in_stride + i] · scale · w[i]
/// (`head_rmsnorm`'s operations) are rotated as `rope_neox` rotates them at position `pos`
/// (`out[i] = v_i·c − v_{i+half}·s`, `out[i+half] = v_{i+half}·c + v_i·s` for i < rope_dim/2,
/// the rest passed through) and written to `y[h · out_stride ..]`. A thread computes the two
/// normed values its output needs itself (the same operations on the same operands as the
/// thread that would have stored them), so no value goes through memory and no barrier is
/// needed: the bits are `head_rmsnorm`'s and then `rope_neox`'s, one launch instead of two.
/// Needs rope_dim ≤ head_dim (`ModelConfig::validate`); heads must not overlap, as in
/// `head_rmsnorm`.
#[kernel(grid = [n_heads], block = 256, verify(head_dim = [6, 33, 70], rope_dim = [2, 6], in_stride = [70, 141], out_stride = [70], n_heads = [1, 2, 3], pos = [0, 3]),
         rows(name = head_rmsnorm_rope_rows, row_stride(x = n_heads * in_stride, y = n_heads * out_stride), row_step(pos = 1), verify(n_heads = [1, 2], rows = [1, 3])))]
pub fn head_rmsnorm_rope(
    x: &[f32],
    w: &[f32],
    cos: &[f32],
    sin: &[f32],
    y: &mut [f32],
    head_dim: usize,
    in_stride: usize,
    out_stride: usize,
    n_heads: usize,
    eps: f32,
    pos: usize,
    rope_dim: usize,
) {
    let h = group_id(0);
    let xb = h * in_stride;
    let yb = h * out_stride;
    let half = rope_dim / 2;
    let ss = sum!(i in 0..head_dim, order = lanes(32).butterfly(), x[xb + i] * x[xb + i]);
    let scale = rsqrt(ss / (head_dim as f32) + eps);
    for i in par(0..head_dim) {
        if i < rope_dim {
            let j = if i < half { i } else { i - half };
            let c = cos[pos * half + j];
            let s = sin[pos * half + j];
            let x0 = x[xb + j] * scale * w[j];
            let x1 = x[xb + j + half] * scale * w[j + half];
            if i < half {
                y[yb + i] = x0 * c - x1 * s;
            } else {
                y[yb + i] = x1 * c + x0 * s;
            }
        } else {
            y[yb + i] = x[xb + i] * scale * w[i];
        }
    }
}

/// The residual add and the RMSNorm after it in one launch: h = a + b, y = rmsnorm(h, w) (w
/// stored as 1 + w_hf). Every workgroup forms all n sums a + b (each rounded once, as `add`
/// rounds it) into workgroup memory (all 256 threads, `n ≤ NORM_MAX_DIM`), Σh² from there in
/// `rmsnorm`'s order, and writes its 256 elements of h and y, so h and y are `add`'s and then
/// `rmsnorm`'s bits, without h's round trip through memory or a launch.
#[kernel(grid = [(n + 255) / 256], block = 256, verify(n = [1, 31, 33, 256, 257, 600]),
         rows(name = add_rmsnorm_rows, row_stride(a = n, b = n, h = n, y = n)))]
pub fn add_rmsnorm(a: &[f32], b: &[f32], w: &[f32], h: &mut [f32], y: &mut [f32], n: usize, eps: f32) {
    let base = group_id(0) * 256;
    let hs = shared::<f32, 4096>();
    for i in par(0..n) {
        hs[i] = a[i] + b[i];
    }
    let ss = sum!(i in 0..n, order = lanes(32).butterfly(), hs[i] * hs[i]);
    let scale = rsqrt(ss / (n as f32) + eps);
    for j in par(0..if n - base < 256 { n - base } else { 256 }) {
        h[base + j] = hs[base + j];
        y[base + j] = hs[base + j] * scale * w[base + j];
    }
}

/// `rmsnorm` (`zero_centred = false`) or `rmsnorm_zc` in plain Rust, same order.
pub fn rmsnorm_reference(x: &[f32], w: &[f32], eps: f32, zero_centred: bool) -> Vec<f32> {
    let n = x.len();
    let ss = sum_lanes_butterfly(n, 32, |i| x[i] * x[i]);
    let scale = mathlib::rsqrt(ss / n as f32 + eps);
    (0..n).map(|i| x[i] * scale * if zero_centred { 1.0 + w[i] } else { w[i] }).collect()
}

/// `head_rmsnorm` in plain Rust: `n_heads · out_stride` outputs (gaps left at 0).
pub fn head_rmsnorm_reference(
    x: &[f32],
    w: &[f32],
    head_dim: usize,
    in_stride: usize,
    out_stride: usize,
    n_heads: usize,
    eps: f32,
) -> Vec<f32> {
    let mut y = vec![0.0f32; n_heads * out_stride];
    for h in 0..n_heads {
        let xh = &x[h * in_stride..h * in_stride + head_dim];
        y[h * out_stride..h * out_stride + head_dim].copy_from_slice(&rmsnorm_reference(xh, w, eps, false));
    }
    y
}
