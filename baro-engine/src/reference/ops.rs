//! The elementary operations of the reference forward pass, each with its floating-point
//! evaluation order fixed and written down (no fma, every sum sequential from +0 in index
//! order). These follow transformers' formulas for `qwen3_5_moe` operation by operation (which
//! side of a product is rounded first, division versus multiplication by a reciprocal); where
//! transformers' own order is a library kernel's (a BLAS dot, a vectorised mean) the plain
//! sequential order stands in. Never used on the decode path.

use crate::reference::real::Real;
use crate::reference::weights::Matrix;

/// `((0 + w[0]·x[0]) + w[1]·x[1]) + …`
pub fn dot<T: Real>(w: &[f32], x: &[T]) -> T {
    w.iter().zip(x).fold(T::ZERO, |acc, (&w, &x)| acc + T::from_f32(w) * x)
}

/// `y[r] = dot(row first_row + r, x)` for `n_rows` rows.
pub fn matvec<T: Real>(m: &Matrix<'_>, first_row: usize, n_rows: usize, x: &[T]) -> Vec<T> {
    let mut buf = Vec::new();
    (first_row..first_row + n_rows).map(|r| dot(m.row(r, &mut buf), x)).collect()
}

/// `1 / (1 + exp(−x))` (torch's `sigmoid`).
pub fn sigmoid<T: Real>(x: T) -> T {
    T::ONE / (T::ONE + (-x).exp())
}

/// `x / (1 + exp(−x))` (torch's `silu` on the CPU).
pub fn silu<T: Real>(x: T) -> T {
    x / (T::ONE + (-x).exp())
}

/// `x` for x > 20, else `ln_1p(exp(x))` (torch's `softplus`, beta 1, threshold 20).
pub fn softplus<T: Real>(x: T) -> T {
    if x > T::from_f32(20.0) {
        x
    } else {
        x.exp().ln_1p()
    }
}

/// `inv = 1 / sqrt(Σx² / n + eps)`; `y[i] = (x[i]·inv)·w[i]`. With `w` = 1 + w' (already
/// applied) this is the zero-centred RMSNorm.
pub fn rms_norm<T: Real>(x: &[T], w: &[T], eps: T) -> Vec<T> {
    let inv = inv_rms(x, eps);
    x.iter().zip(w).map(|(&x, &w)| (x * inv) * w).collect()
}

/// The GDN output norm: `y[i] = (w[i]·(x[i]·inv))·silu(z[i])` with `inv` as in `rms_norm`
/// and a plain weight (norm before gate).
pub fn gated_rms_norm<T: Real>(x: &[T], z: &[T], w: &[T], eps: T) -> Vec<T> {
    let inv = inv_rms(x, eps);
    x.iter().zip(z).zip(w).map(|((&x, &z), &w)| (w * (x * inv)) * silu(z)).collect()
}

fn inv_rms<T: Real>(x: &[T], eps: T) -> T {
    let sum_sq = x.iter().fold(T::ZERO, |acc, &v| acc + v * v);
    T::ONE / (sum_sq / T::from_usize(x.len()) + eps).sqrt()
}

/// `y = x·(1 / sqrt(Σx² + eps))` (transformers' and FLA's `l2norm`, eps 1e-6).
pub fn l2_norm<T: Real>(x: &[T], eps: T) -> Vec<T> {
    let sum_sq = x.iter().fold(T::ZERO, |acc, &v| acc + v * v);
    let inv = T::ONE / (sum_sq + eps).sqrt();
    x.iter().map(|&v| v * inv).collect()
}

/// `e[i] = exp(x[i] − max x)`, `p[i] = e[i] / Σe` (sum sequential).
pub fn softmax<T: Real>(x: &[T]) -> Vec<T> {
    let max = x.iter().copied().fold(None, |m: Option<T>, v| match m {
        Some(m) if m >= v => Some(m),
        _ => Some(v),
    });
    let Some(max) = max else { return Vec::new() };
    let e: Vec<T> = x.iter().map(|&v| (v - max).exp()).collect();
    let sum = e.iter().fold(T::ZERO, |acc, &v| acc + v);
    e.into_iter().map(|v| v / sum).collect()
}

/// The index of the largest value; the lowest index wins ties. NaNs never win.
pub fn argmax<T: Real>(x: &[T]) -> usize {
    let mut best = 0;
    for (i, &v) in x.iter().enumerate() {
        if v > x[best] || (x[best].is_nan() && !v.is_nan()) {
            best = i;
        }
    }
    best
}

/// The `k` indices of the largest values, largest first; among equal values the lower index
/// comes first (NaNs last).
pub fn top_k<T: Real>(x: &[T], k: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..x.len()).collect();
    order.sort_by(|&a, &b| match x[b].partial_cmp(&x[a]) {
        Some(o) => o.then(a.cmp(&b)),
        None => x[a].is_nan().cmp(&x[b].is_nan()).then(a.cmp(&b)),
    });
    order.truncate(k);
    order
}
