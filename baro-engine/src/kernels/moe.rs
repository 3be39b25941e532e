//! The MoE block's own kernels (the expert projections are the expert-capable matvecs of
//! `matvec.rs`/`quant.rs`, the router logits a plain matvec): router softmax → top-k →
//! renormalise, SwiGLU on a fused gate-and-up output, and the weighted sum of the k experts
//! in top-k order plus the sigmoid-gated shared expert. The router is separate from the
//! experts. The rows siblings of the router, SwiGLU and the combine are derived by `rows(..)`
//! and proven at build time; the MoE grouping kernels below only move integers.

use baro::dsl::mathlib;
use baro::kernel;

/// The most experts `router_topk` takes: the size of its workgroup-memory scratch.
pub const ROUTER_MAX_EXPERTS: usize = 1024;
use baro::reference::{max_lanes_butterfly, sum_lanes_butterfly, sum_sequential};

/// One workgroup. probs = softmax(logits) (max and sum `lanes(32).butterfly()`, p = e / s);
/// then the `top_k` largest probabilities, the **lower expert id** first among equal ones:
/// pick j is the expert whose rank is j, the rank of e being the number of experts before it
/// in that order (#{f: p_f > p_e} + #{f < e: p_f = p_e}: integer counts of exact
/// comparisons, so the picks are those of taking the largest remaining probability k times,
/// without a reduction and a barrier per pick). The count runs as two loops, `p_f ≥ p_e` over
/// f < e and `p_f > p_e` over f ≥ e: the same count as the two-clause condition for every
/// input, NaN included (every comparison with NaN is false in both forms), with one
/// comparison per expert instead of three and an index test. The k picks run side by side, one team of 32
/// lanes each: its id is the integer `min` of the ids of rank j (exact), its weight the `max`
/// of their probabilities (one of them, the rest −inf: exact). weights[j] = p_j / seq(p_0 +
/// … + p_{k−1}) in pick order. NaN logits give unspecified ids, never out of range but
/// `n_experts` (a pick no expert holds), which the expert matvec's bounds check rejects. The
/// probabilities and ranks live in workgroup memory, so `n_experts ≤ ROUTER_MAX_EXPERTS`
/// (`ModelConfig::validate` checks it).
#[kernel(grid = [1], block = 256, verify(n_experts = [1, 31, 33, 70], top_k = [1, 2, 9]),
         rows(name = router_topk_rows, axis = 0, row_stride(logits = n_experts, probs = n_experts, ids = top_k, weights = top_k), verify(n_experts = [1, 33, 70], rows = [1, 3])))]
pub fn router_topk(
    logits: &[f32],
    probs: &mut [f32],
    ids: &mut [u32],
    weights: &mut [f32],
    n_experts: usize,
    top_k: usize,
) {
    let work = shared::<f32, 1024>();
    let rank = shared::<u32, 1024>();
    let m = max!(e in 0..n_experts, order = lanes(32).butterfly(), logits[e]);
    let s = sum!(e in 0..n_experts, order = lanes(32).butterfly(), exp(logits[e] - m));
    for e in par(0..n_experts) {
        probs[e] = exp(logits[e] - m) / s;
        work[e] = exp(logits[e] - m) / s;
    }
    for e in par(0..n_experts) {
        let pe = work[e];
        let mut r: u32 = 0;
        for f in 0..e {
            r = r + if work[f] >= pe { 1 } else { 0 };
        }
        for f in e..n_experts {
            r = r + if work[f] > pe { 1 } else { 0 };
        }
        rank[e] = r;
    }
    for j in par_team(0..top_k, 32) {
        ids[j] = min!(e in 0..n_experts, order = lanes(32).butterfly(), if rank[e] == (j as u32) { e } else { n_experts })
            as u32;
        weights[j] = max!(e in 0..n_experts, order = lanes(32).butterfly(), if rank[e] == (j as u32) { work[e] } else { f32::NEG_INFINITY });
    }
    let total = sum!(j in 0..top_k, order = seq, weights[j]);
    // Every thread sums the weights before any is overwritten (a race the verifier found:
    // with top_k beyond one wave, a thread could read an already divided weight).
    barrier();
    for j in par(0..top_k) {
        weights[j] = weights[j] / total;
    }
}

/// `router_topk` with the shared expert's gate logit in the same launch, for a gate stored in
/// f32: gate_logit[0] = seq-lanes Σ_i x[i] · gate_w[i] in `matvec::matvec_f32`'s order
/// (`lanes(32).butterfly()`, the products `x[i] · gate_w[i]`), so its bits are those of the
/// one-row matvec it replaces, without that launch (a one-workgroup launch of its own). The k
/// products are formed in workgroup memory by all 256 threads first (`k ≤
/// norm::NORM_MAX_DIM`), then summed from there. Everything else is `router_topk`'s, operation
/// for operation.
#[kernel(grid = [1], block = 256, verify(n_experts = [1, 31, 33, 70], top_k = [1, 2, 9], k = [1, 31, 33, 70]),
         rows(name = router_topk_gate_rows, axis = 0, row_stride(logits = n_experts, x = k, probs = n_experts, ids = top_k, weights = top_k, gate_logit = 1), verify(n_experts = [1, 33, 70], k = [1, 33], rows = [1, 3])))]
pub fn router_topk_gate(
    logits: &[f32],
    x: &[f32],
    gate_w: &[f32],
    probs: &mut [f32],
    ids: &mut [u32],
    weights: &mut [f32],
    gate_logit: &mut [f32],
    n_experts: usize,
    top_k: usize,
    k: usize,
) {
    let work = shared::<f32, 1024>();
    let rank = shared::<u32, 1024>();
    let gp = shared::<f32, 4096>();
    for i in par(0..k) {
        gp[i] = x[i] * gate_w[i];
    }
    gate_logit[0] = sum!(i in 0..k, order = lanes(32).butterfly(), gp[i]);
    let m = max!(e in 0..n_experts, order = lanes(32).butterfly(), logits[e]);
    let s = sum!(e in 0..n_experts, order = lanes(32).butterfly(), exp(logits[e] - m));
    for e in par(0..n_experts) {
        probs[e] = exp(logits[e] - m) / s;
        work[e] = exp(logits[e] - m) / s;
    }
    for e in par(0..n_experts) {
        let pe = work[e];
        let mut r: u32 = 0;
        for f in 0..e {
            r = r + if work[f] >= pe { 1 } else { 0 };
        }
        for f in e..n_experts {
            r = r + if work[f] > pe { 1 } else { 0 };
        }
        rank[e] = r;
    }
    for j in par_team(0..top_k, 32) {
        ids[j] = min!(e in 0..n_experts, order = lanes(32).butterfly(), if rank[e] == (j as u32) { e } else { n_experts })
            as u32;
        weights[j] = max!(e in 0..n_experts, order = lanes(32).butterfly(), if rank[e] == (j as u32) { work[e] } else { f32::NEG_INFINITY });
    }
    let total = sum!(j in 0..top_k, order = seq, weights[j]);
    barrier();
    for j in par(0..top_k) {
        weights[j] = weights[j] / total;
    }
}

/// SwiGLU on the output of a fused gate-and-up projection: slot s's `2n` projections are its
/// gate (the first n) then its up (the last n), and h[s · n + j] = silu(gu[s · 2n + j]) ·
/// gu[s · 2n + n + j]: one launch for all `n_slots` slots (the k routed experts, or the one
/// shared expert), 256 elements per workgroup.
#[kernel(grid = [(n + 255) / 256, n_slots], block = 256, verify(n = [1, 31, 256, 257, 600], n_slots = [1, 3]),
         rows(name = swiglu_pairs_rows, axis = 1, row_stride(gu = 2 * n, h = n), fix(n_slots = 1)))]
pub fn swiglu_pairs(gu: &[f32], h: &mut [f32], n: usize, n_slots: usize) {
    let base = group_id(0) * 256;
    let s = group_id(1);
    for j in par(0..if n - base < 256 { n - base } else { 256 }) {
        h[s * n + base + j] = silu(gu[s * 2 * n + base + j]) * gu[s * 2 * n + n + base + j];
    }
}

/// y[i] = seq_j(weights[j] · ye[j · dim + i]) + sigmoid(shared_logit[0]) · shared[i]: the k
/// expert outputs (top_k, dim) summed in top-k order from +0, then the gated shared expert;
/// 256 elements per workgroup.
#[kernel(grid = [(dim + 255) / 256], block = 256, verify(dim = [1, 31, 256, 257, 600], top_k = [1, 2, 3]),
         rows(name = moe_combine_rows, row_stride(ye = top_k * dim, weights = top_k, shared = dim, shared_logit = 1, y = dim)))]
pub fn moe_combine(
    ye: &[f32],
    weights: &[f32],
    shared: &[f32],
    shared_logit: &[f32],
    y: &mut [f32],
    dim: usize,
    top_k: usize,
) {
    let base = group_id(0) * 256;
    let gs = sigmoid(shared_logit[0]);
    for j in par(0..if dim - base < 256 { dim - base } else { 256 }) {
        y[base + j] = sum!(e in 0..top_k, order = seq, weights[e] * ye[e * dim + base + j]) + gs * shared[base + j];
    }
}

/// `router_topk` in plain Rust: (probs, ids, weights). The picks are the experts of rank
/// 0 .. top_k in (probability descending, id ascending) order, counted as the kernel counts
/// them (so NaN probabilities give the kernel's ids too).
pub fn router_reference(logits: &[f32], top_k: usize) -> (Vec<f32>, Vec<u32>, Vec<f32>) {
    let n = logits.len();
    let m = max_lanes_butterfly(n, 32, |e| logits[e]);
    let s = sum_lanes_butterfly(n, 32, |e| mathlib::exp(logits[e] - m));
    let probs: Vec<f32> = logits.iter().map(|&l| mathlib::exp(l - m) / s).collect();
    let rank: Vec<usize> =
        (0..n).map(|e| (0..n).filter(|&f| probs[f] > probs[e] || (probs[f] == probs[e] && f < e)).count()).collect();
    let (mut ids, mut w) = (Vec::new(), Vec::new());
    for j in 0..top_k {
        let id = (0..n).find(|&e| rank[e] == j).unwrap_or(n);
        ids.push(id as u32);
        w.push(if id < n { probs[id] } else { f32::NEG_INFINITY });
    }
    let total = sum_sequential(top_k, |j| w[j]);
    (probs, ids, w.iter().map(|&v| v / total).collect())
}

/// `moe_combine` in plain Rust.
pub fn combine_reference(ye: &[f32], weights: &[f32], shared: &[f32], shared_logit: f32, dim: usize) -> Vec<f32> {
    let gs = mathlib::sigmoid(shared_logit);
    (0..dim).map(|i| sum_sequential(weights.len(), |j| weights[j] * ye[j * dim + i]) + gs * shared[i]).collect()
}

/// Batched prefill's grouping of (token, k) pairs by expert, step 1: `counts[e]` = how many
/// of the `n_pairs` entries of `ids` (in (token, k) order) are `e`. One workgroup per expert;
/// integer counting only, so it is exact in any order.
#[kernel(grid = [n_experts])]
pub fn moe_count(ids: &[u32], counts: &mut [u32], n_pairs: usize, n_experts: usize) {
    let e = group_id(0);
    let mut c: usize = 0;
    for q in 0..n_pairs {
        if (ids[q] as usize) == e {
            c = c + 1;
        }
    }
    counts[e] = c as u32;
}

/// Step 2, a stable counting sort: expert e's pairs take the slots from the sum of the
/// counts of experts below e, in (token, k) order. Writes, per slot, the pair it holds
/// (`pair_of`) and its expert (`sorted_ids`), and per pair its slot (`slot_of`). Pure integer
/// moves: the expert projections then run over slots (`matvec_*_rows` with
/// `ids = sorted_ids`), so pairs that share an expert sit next to each other and share its
/// weight rows, and every pair's dot is still the m=1 kernel's dot.
#[kernel(grid = [n_experts])]
pub fn moe_scatter(
    ids: &[u32],
    counts: &[u32],
    pair_of: &mut [u32],
    slot_of: &mut [u32],
    sorted_ids: &mut [u32],
    n_pairs: usize,
    n_experts: usize,
) {
    let e = group_id(0);
    let mut slot: usize = 0;
    for f in 0..e {
        slot = slot + (counts[f] as usize);
    }
    for q in 0..n_pairs {
        if (ids[q] as usize) == e {
            pair_of[slot] = q as u32;
            slot_of[q] = slot as u32;
            sorted_ids[slot] = e as u32;
            slot = slot + 1;
        }
    }
}

/// The rows of a tile of the 8-row q8 matvecs (`q8act::matvec_q8_0_q8_rows8`, the
/// `kquant_q8::*_rows8`): `moe_scatter_tiles` starts each expert's group on a multiple of it.
pub const EXPERT_TILE: usize = 8;

/// Step 2 for tiles of `tile` rows that share one expert: `moe_scatter`'s stable counting sort
/// with each expert's group starting on a multiple of `tile` slots (expert e's pairs from
/// Σ_{f<e} ⌈counts[f] / tile⌉ · tile, in (token, k) order). The slots that pad a group to a
/// whole number of tiles hold pair 0 (`pair_of`, so a gather reads a real row) and the group's
/// expert (`sorted_ids`); their outputs are never read (`slot_of` names real slots only).
/// `n_slots[0]` = the slot count, a multiple of `tile`. Pure integer moves, as `moe_scatter`.
#[kernel(grid = [n_experts])]
pub fn moe_scatter_tiles(
    ids: &[u32],
    counts: &[u32],
    pair_of: &mut [u32],
    slot_of: &mut [u32],
    sorted_ids: &mut [u32],
    n_slots: &mut [u32],
    n_pairs: usize,
    n_experts: usize,
    tile: usize,
) {
    let e = group_id(0);
    let mut slot: usize = 0;
    for f in 0..e {
        slot = slot + ((counts[f] as usize) + tile - 1) / tile * tile;
    }
    let end = slot + ((counts[e] as usize) + tile - 1) / tile * tile;
    for q in 0..n_pairs {
        if (ids[q] as usize) == e {
            pair_of[slot] = q as u32;
            slot_of[q] = slot as u32;
            sorted_ids[slot] = e as u32;
            slot = slot + 1;
        }
    }
    for pad in slot..end {
        pair_of[pad] = 0;
        sorted_ids[pad] = e as u32;
    }
    if e + 1 == n_experts {
        n_slots[0] = end as u32;
    }
}

/// `moe_scatter_tiles` in plain Rust: (pair_of, slot_of, sorted_ids), each `n_slots` long
/// but `slot_of` (one per pair; a pair of no expert keeps 0).
pub fn sort_tiles_reference(ids: &[u32], n_experts: usize, tile: usize) -> (Vec<u32>, Vec<u32>, Vec<u32>) {
    let (mut pair_of, mut slot_of, mut sorted_ids) = (Vec::new(), vec![0u32; ids.len()], Vec::new());
    for e in 0..n_experts as u32 {
        for (q, _) in ids.iter().enumerate().filter(|(_, &id)| id == e) {
            slot_of[q] = pair_of.len() as u32;
            pair_of.push(q as u32);
            sorted_ids.push(e);
        }
        while pair_of.len() % tile != 0 {
            pair_of.push(0);
            sorted_ids.push(e);
        }
    }
    (pair_of, slot_of, sorted_ids)
}

/// y[p · dim ..] = x[(pair_of[p] / top_k) · dim ..]: each slot's copy of its token's row
/// (a gather, exact). One workgroup per slot.
#[kernel(grid = [n_pairs])]
pub fn moe_gather(x: &[f32], pair_of: &[u32], y: &mut [f32], dim: usize, top_k: usize, n_pairs: usize) {
    let p = group_id(0);
    let src = (pair_of[p] as usize) / top_k;
    for i in par(0..dim) {
        y[p * dim + i] = x[src * dim + i];
    }
}

/// y[q · dim ..] = x[slot_of[q] · dim ..]: expert outputs back in (token, k) order (a gather,
/// exact). One workgroup per pair.
#[kernel(grid = [n_pairs])]
pub fn moe_ungather(x: &[f32], slot_of: &[u32], y: &mut [f32], dim: usize, n_pairs: usize) {
    let q = group_id(0);
    let src = slot_of[q] as usize;
    for i in par(0..dim) {
        y[q * dim + i] = x[src * dim + i];
    }
}

/// The stable counting sort of `moe_count` + `moe_scatter` in plain Rust:
/// (pair_of, slot_of, sorted_ids).
pub fn sort_reference(ids: &[u32], n_experts: usize) -> (Vec<u32>, Vec<u32>, Vec<u32>) {
    let mut pair_of: Vec<u32> = (0..ids.len() as u32).collect();
    pair_of.sort_by_key(|&q| ids[q as usize]);
    pair_of.retain(|&q| (ids[q as usize] as usize) < n_experts);
    let mut slot_of = vec![0u32; ids.len()];
    for (slot, &q) in pair_of.iter().enumerate() {
        slot_of[q as usize] = slot as u32;
    }
    let sorted_ids = pair_of.iter().map(|&q| ids[q as usize]).collect();
    (pair_of, slot_of, sorted_ids)
}
