//! RMSNorm in fp32 and the residual add. Weight convention: `rmsnorm` and `head_rmsnorm` take
//! the weight **as GGUF stores it** (already `1 + w`), so `y = x · rsqrt(mean x² + eps) · w`;
//! a Hugging Face checkpoint's zero-centred weight is either offset by the loader (`1.0 + w`
//! in f32, the same rounding the kernel would do) or passed to `rmsnorm_zc`, which adds it
//! in the kernel. The sum of squares is `lanes(32).butterfly()` in every kernel here.

use baro::dsl::mathlib;
use baro::kernel;
use baro::reference::sum_lanes_butterfly;

/// y = x · rsqrt(Σx²/n + eps) · w (w stored as 1 + w_hf).
#[kernel(grid = [1])]
pub fn rmsnorm(x: &[f32], w: &[f32], y: &mut [f32], n: usize, eps: f32) {
    let ss = sum!(i in 0..n, order = lanes(32).butterfly(), x[i] * x[i]);
    let scale = rsqrt(ss / (n as f32) + eps);
    for i in par(0..n) {
        y[i] = x[i] * scale * w[i];
    }
}

/// `rmsnorm` over rows: row r normalises x[r·n ..] into y[r·n ..], one workgroup per row.
#[kernel(grid = [rows], rows_of = rmsnorm, rows = rows, row_stride(x = n, y = n))]
pub fn rmsnorm_rows(x: &[f32], w: &[f32], y: &mut [f32], n: usize, eps: f32, rows: usize) {
    let r = group_id(0);
    let b = r * n;
    let ss = sum!(i in 0..n, order = lanes(32).butterfly(), x[b + i] * x[b + i]);
    let scale = rsqrt(ss / (n as f32) + eps);
    for i in par(0..n) {
        y[b + i] = x[b + i] * scale * w[i];
    }
}

/// y = x · rsqrt(Σx²/n + eps) · (1 + w) (w as Hugging Face stores it).
#[kernel(grid = [1])]
pub fn rmsnorm_zc(x: &[f32], w: &[f32], y: &mut [f32], n: usize, eps: f32) {
    let ss = sum!(i in 0..n, order = lanes(32).butterfly(), x[i] * x[i]);
    let scale = rsqrt(ss / (n as f32) + eps);
    for i in par(0..n) {
        y[i] = x[i] * scale * (1.0 + w[i]);
    }
}

/// Per-head RMSNorm over `head_dim` (q/k norm), one workgroup per head, the weight shared by
/// all heads and stored as `1 + w`. Head h reads `x[h · in_stride ..]` and writes
/// `y[h · out_stride ..]`, so the query half of the interleaved (query, gate) `q_proj` output
/// is normed and compacted in one launch.
#[kernel(grid = [n_heads])]
pub fn head_rmsnorm(x: &[f32], w: &[f32], y: &mut [f32], head_dim: usize, in_stride: usize, out_stride: usize, n_heads: usize, eps: f32) {
    let h = group_id(0);
    let xb = h * in_stride;
    let ss = sum!(i in 0..head_dim, order = lanes(32).butterfly(), x[xb + i] * x[xb + i]);
    let scale = rsqrt(ss / (head_dim as f32) + eps);
    for i in par(0..head_dim) {
        y[h * out_stride + i] = x[xb + i] * scale * w[i];
    }
}

/// `head_rmsnorm` over rows: row r's heads start at x[r · n_heads · in_stride] and
/// y[r · n_heads · out_stride]; one workgroup per (head, row).
#[kernel(grid = [n_heads, rows], rows_of = head_rmsnorm, rows = rows, row_stride(x = n_heads * in_stride, y = n_heads * out_stride),
         verify(head_dim = [1, 31, 33, 70], in_stride = [70, 141], out_stride = [70], n_heads = [1, 2], rows = [1, 3]))]
pub fn head_rmsnorm_rows(x: &[f32], w: &[f32], y: &mut [f32], head_dim: usize, in_stride: usize, out_stride: usize, n_heads: usize, eps: f32, rows: usize) {
    let h = group_id(0);
    let r = group_id(1);
    let xb = r * n_heads * in_stride + h * in_stride;
    let ss = sum!(i in 0..head_dim, order = lanes(32).butterfly(), x[xb + i] * x[xb + i]);
    let scale = rsqrt(ss / (head_dim as f32) + eps);
    for i in par(0..head_dim) {
        y[r * n_heads * out_stride + h * out_stride + i] = x[xb + i] * scale * w[i];
    }
}

/// y = a + b, elementwise (the residual add).
#[kernel(grid = [1])]
pub fn add(a: &[f32], b: &[f32], y: &mut [f32], n: usize) {
    for i in par(0..n) {
        y[i] = a[i] + b[i];
    }
}

/// `add` over rows of n: one workgroup per row.
#[kernel(grid = [rows], rows_of = add, rows = rows, row_stride(a = n, b = n, y = n))]
pub fn add_rows(a: &[f32], b: &[f32], y: &mut [f32], n: usize, rows: usize) {
    let r = group_id(0);
    for i in par(0..n) {
        y[r * n + i] = a[r * n + i] + b[r * n + i];
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
pub fn head_rmsnorm_reference(x: &[f32], w: &[f32], head_dim: usize, in_stride: usize, out_stride: usize, n_heads: usize, eps: f32) -> Vec<f32> {
    let mut y = vec![0.0f32; n_heads * out_stride];
    for h in 0..n_heads {
        let xh = &x[h * in_stride..h * in_stride + head_dim];
        y[h * out_stride..h * out_stride + head_dim].copy_from_slice(&rmsnorm_reference(xh, w, eps, false));
    }
    y
}
