//! The MoE block's own kernels (the expert projections are the expert-capable matvecs of
//! `matvec.rs`/`quant.rs`, the router logits a plain matvec): router softmax → top-k →
//! renormalise, SwiGLU, and the weighted sum of the k experts in top-k order plus the
//! sigmoid-gated shared expert. The router is separate from the experts.

use baro::dsl::mathlib;
use baro::kernel;
use baro::reference::{max_lanes_butterfly, sum_lanes_butterfly, sum_sequential};

/// One workgroup. probs = softmax(logits) (max and sum `lanes(32).butterfly()`, p = e / s);
/// then `top_k` picks, pick j taking the largest remaining probability and, among equal ones,
/// the **lower expert id** (an integer `min` over the ids holding the max: exact); then
/// weights[j] = p_j / seq(p_0 + … + p_{k−1}) in pick order. NaN logits give unspecified ids
/// (never out of range: an id with no match is `n_experts`, which the expert matvec's bounds
/// check rejects). `work` is scratch of n_experts.
#[kernel(grid = [1], verify(n_experts = [1, 31, 33, 70], top_k = [1, 2]))]
pub fn router_topk(logits: &[f32], probs: &mut [f32], work: &mut [f32], ids: &mut [u32], weights: &mut [f32], n_experts: usize, top_k: usize) {
    let m = max!(e in 0..n_experts, order = lanes(32).butterfly(), logits[e]);
    let s = sum!(e in 0..n_experts, order = lanes(32).butterfly(), exp(logits[e] - m));
    for e in par(0..n_experts) {
        probs[e] = exp(logits[e] - m) / s;
        work[e] = exp(logits[e] - m) / s;
    }
    for j in 0..top_k {
        let best = max!(e in 0..n_experts, order = lanes(32).butterfly(), work[e]);
        let id = min!(e in 0..n_experts, order = lanes(32).butterfly(), if work[e] == best { e } else { n_experts });
        ids[j] = id as u32;
        weights[j] = best;
        for e in par(0..n_experts) {
            work[e] = if e == id { f32::NEG_INFINITY } else { work[e] };
        }
    }
    let total = sum!(j in 0..top_k, order = seq, weights[j]);
    for j in par(0..top_k) {
        weights[j] = weights[j] / total;
    }
}

/// h = silu(g) · u, elementwise over n (all k experts' rows at once).
#[kernel(grid = [1])]
pub fn swiglu(g: &[f32], u: &[f32], h: &mut [f32], n: usize) {
    for i in par(0..n) {
        h[i] = silu(g[i]) * u[i];
    }
}

/// y[i] = seq_j(weights[j] · ye[j · dim + i]) + sigmoid(shared_logit[0]) · shared[i]: the k
/// expert outputs (top_k, dim) summed in top-k order from +0, then the gated shared expert.
#[kernel(grid = [1])]
pub fn moe_combine(ye: &[f32], weights: &[f32], shared: &[f32], shared_logit: &[f32], y: &mut [f32], dim: usize, top_k: usize) {
    let gs = sigmoid(shared_logit[0]);
    for i in par(0..dim) {
        y[i] = sum!(j in 0..top_k, order = seq, weights[j] * ye[j * dim + i]) + gs * shared[i];
    }
}

/// `router_topk` in plain Rust: (probs, ids, weights).
pub fn router_reference(logits: &[f32], top_k: usize) -> (Vec<f32>, Vec<u32>, Vec<f32>) {
    let n = logits.len();
    let m = max_lanes_butterfly(n, 32, |e| logits[e]);
    let s = sum_lanes_butterfly(n, 32, |e| mathlib::exp(logits[e] - m));
    let probs: Vec<f32> = logits.iter().map(|&l| mathlib::exp(l - m) / s).collect();
    let mut work = probs.clone();
    let (mut ids, mut w) = (Vec::new(), Vec::new());
    for _ in 0..top_k {
        let best = max_lanes_butterfly(n, 32, |e| work[e]);
        let id = (0..n).find(|&e| work[e] == best).unwrap_or(n);
        ids.push(id as u32);
        w.push(best);
        if id < n {
            work[id] = f32::NEG_INFINITY;
        }
    }
    let total = sum_sequential(top_k, |j| w[j]);
    (probs, ids, w.iter().map(|&v| v / total).collect())
}

/// `moe_combine` in plain Rust.
pub fn combine_reference(ye: &[f32], weights: &[f32], shared: &[f32], shared_logit: f32, dim: usize) -> Vec<f32> {
    let gs = mathlib::sigmoid(shared_logit);
    (0..dim).map(|i| sum_sequential(weights.len(), |j| weights[j] * ye[j * dim + i]) + gs * shared[i]).collect()
}
