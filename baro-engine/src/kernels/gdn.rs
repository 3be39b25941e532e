//! The gated delta net's decode step: the causal conv step over a ring of recent inputs with
//! SiLU, the delta-rule recurrence (l2norm of q and k, q scaling, beta, decay, state update,
//! read-out), and the gated RMSNorm. All fp32.
//!
//! Value conventions (GGUF's): `ssm_a` is −exp(A_log) (a Hugging Face loader computes it); the
//! conv weight is (channel, tap); value head h reads key head `h % n_k_heads` when `tiled`
//! (GGUF's reordered value heads) or `h / (n_v_heads / n_k_heads)` otherwise (Transformers').

use baro::dsl::mathlib;
use baro::kernel;
use baro::reference::{sum_lanes_butterfly, sum_sequential};

/// y[c] = silu(seq_t(w[c·K + t] · in_t)) for taps t = 0..K (oldest first), where in_{K−1} =
/// x[c] and in_t for t < K−1 is the input of position pos − (K−1) + t, kept in
/// `ring[c · (K−1) + (that position) % (K−1)]` (zero before the sequence starts); then x[c]
/// replaces the oldest. Needs conv_kernel ≥ 2. One workgroup of 64 threads per 64 channels,
/// one channel per thread (a 32-thread workgroup ran two channels per thread one after the
/// other).
#[kernel(grid = [(channels + 63) / 64], block = 64, verify(channels = [1, 3, 70], conv_kernel = [2, 4], pos = [0, 1, 6]))]
pub fn gdn_conv_step(
    x: &[f32],
    w: &[f32],
    ring: &mut [f32],
    y: &mut [f32],
    channels: usize,
    conv_kernel: usize,
    pos: usize,
) {
    let r = conv_kernel - 1;
    for l in par(0..64) {
        let c = group_id(0) * 64 + l;
        if c < channels {
            y[c] = silu(
                sum!(t in 0..conv_kernel, order = seq, w[c * conv_kernel + t] * (if t == r { x[c] } else { ring[c * r + (pos + t) % r] })),
            );
            ring[c * r + pos % r] = x[c];
        }
    }
}

/// `gdn_conv_step` over rows: row r is the token at position pos + r, x and y hold one row of
/// `channels` each, and the ring carries from row to row, as decode would feed them. A tap of
/// row r at a position inside the chunk reads that row's x directly, which is the value the
/// ring would hold by then (row r − (K−1) + t wrote it there, and no later row of the ones
/// before r reuses the slot); a tap before the chunk reads the ring as it was. So rows are
/// independent: one workgroup per 64 channels, its 256 threads 4 rows apart, and the ring is
/// written once at the end (its slots get the last K−1 rows' x), after every read of it. (Both
/// arms of a select are evaluated, loads included, so the in-chunk read's row is clamped to 0
/// where the ring is read instead.)
#[kernel(grid = [(channels + 63) / 64], block = 256, rows_of = gdn_conv_step, rows = rows, row_stride(x = channels, y = channels), row_step(pos = 1), carry(ring),
         verify(channels = [1, 3, 70], conv_kernel = [2, 4], pos = [0, 1, 6], rows = [1, 2, 5, 9]))]
pub fn gdn_conv_rows(
    x: &[f32],
    w: &[f32],
    ring: &mut [f32],
    y: &mut [f32],
    channels: usize,
    conv_kernel: usize,
    pos: usize,
    rows: usize,
) {
    let r = conv_kernel - 1;
    for i in par(0..256) {
        let c = group_id(0) * 64 + i % 64;
        if c < channels {
            for t_row in (i / 64..rows).step_by(4) {
                let p = pos + t_row;
                let xb = t_row * channels;
                y[xb + c] = silu(
                    sum!(t in 0..conv_kernel, order = seq, w[c * conv_kernel + t] * (if t == r { x[xb + c] } else { if t_row + t >= r { x[((t_row + t).max(r) - r) * channels + c] } else { ring[c * r + (p + t) % r] } })),
                );
            }
        }
    }
    for l in par(0..64) {
        let c = group_id(0) * 64 + l;
        if c < channels {
            for t_row in (if rows > r { rows - r } else { 0 })..rows {
                ring[c * r + (pos + t_row) % r] = x[t_row * channels + c];
            }
        }
    }
}

/// The largest key head dimension the delta-rule kernels take: a workgroup keeps its 32 state
/// columns (`dk × 32` floats) in workgroup memory (`ModelConfig::validate` checks it).
pub const GDN_MAX_DK: usize = 128;

/// The longest input `gdn_step_ba` takes (the hidden size): it stages the k products of b and
/// of a in the halves of its 4096-float workgroup array.
pub const GDN_BA_MAX_K: usize = 2048;

/// One delta-rule step, one workgroup per (value head h, 32 value columns), lane l owning
/// column j = 32 · group_id(1) + l of the head's (dk × dv) state (columns never interact). qkv: the conv output (q: n_k_heads·dk | k:
/// n_k_heads·dk | v: n_v_heads·dv); state: (n_v_heads, dk, dv); o: (n_v_heads, dv).
/// q̂ = (q · rsqrt(Σq² + 1e-6)) · q_scale, k̂ = k · rsqrt(Σk² + 1e-6) (sums `lanes(32).butterfly()`);
/// `ba` holds the fused beta and alpha projections (b: n_v_heads | a: n_v_heads, one matvec);
/// beta = sigmoid(b[h]); decay = exp(ssm_a[h] · softplus(a[h] + dt_bias[h]));
/// kv_j = seq_i((S_ij · decay) · k̂_i); δ_j = (v_j − kv_j) · beta;
/// S_ij ← S_ij · decay + k̂_i · δ_j; o_j = seq_i(S_ij · q̂_i).
///
/// The workgroup's 32 columns (`st`, dk × 32 floats) are copied into workgroup memory by all 256
/// threads (their loads independent, so they are in flight together), and so are k̂ and q̂
/// (`kq`: k̂ at 0.., q̂ at 128..). The two sequential sums run one lane per column, each term
/// computed by its lane from workgroup memory ((S_ij · decay) · k̂_i, then S_ij · q̂_i); the
/// state update runs on all 256 threads. The state is copied back at the end. Every value is
/// the same operation on the same operands as when each lane walked its column alone, and
/// the sums keep their order: only where values are kept and which thread computes them
/// changes (`dk ≤ GDN_MAX_DK`; a larger dk is a bounds error on the workgroup arrays).
///
/// With `BA` (`gdn_step_ba`): `gdn_step` with the beta and alpha projections in its launch, for
/// an f32 (b | a) matrix (`w_ba`: (2 · n_v_heads, k), b rows then a rows, as `weights` stacks
/// them) and `k ≤ GDN_BA_MAX_K`: b[h] = seq-lanes Σ_i x[i] · w_ba[h · k + i] and a[h] likewise
/// from row n_v_heads + h, each in `matvec::matvec_f32`'s order (`lanes(32).butterfly()` over
/// the products), from products all 256 threads first write into `pr`. So b and a have the
/// bits of the matvec launch this replaces, and everything after is `gdn_step`'s, operation
/// for operation.
#[kernel(grid = [n_v_heads, (dv + 31) / 32], block = 256, verify(dk = [1, 31, 33], dv = [1, 3, 40], n_k_heads = [1, 2], n_v_heads = [2, 4]),
         instances(gdn_step(BA = false),
                   gdn_step_ba(BA = true, verify(dk = [1, 31, 33], dv = [1, 3, 40], n_k_heads = [1, 2], n_v_heads = [2, 4], k = [1, 33, 70]))))]
pub fn gdn_step_family<const BA: bool>(
    qkv: &[f32],
    #[when(!BA)] ba: &[f32],
    #[when(BA)] x: &[f32],
    #[when(BA)] w_ba: &[f32],
    ssm_a: &[f32],
    dt_bias: &[f32],
    state: &mut [f32],
    o: &mut [f32],
    dk: usize,
    dv: usize,
    n_k_heads: usize,
    n_v_heads: usize,
    tiled: bool,
    q_scale: f32,
    #[when(BA)] k: usize,
) {
    let h = group_id(0);
    let c0 = group_id(1) * 32;
    let kh = if tiled { h % n_k_heads } else { h / (n_v_heads / n_k_heads) };
    let qb = kh * dk;
    let kb = n_k_heads * dk + kh * dk;
    let vb = 2 * n_k_heads * dk + h * dv;
    let sb = h * dk * dv;
    let st = shared::<f32, 4096>();
    #[when(BA)]
    let pr = shared::<f32, 4096>();
    let kq = shared::<f32, 256>();
    let dl = shared::<f32, 32>();
    for t in par(0..dk * 32) {
        if c0 + t % 32 < dv {
            st[t] = state[sb + (t / 32) * dv + c0 + t % 32];
        }
    }
    let qn = rsqrt(sum!(i in 0..dk, order = lanes(32).butterfly(), qkv[qb + i] * qkv[qb + i]) + 1e-6);
    let kn = rsqrt(sum!(i in 0..dk, order = lanes(32).butterfly(), qkv[kb + i] * qkv[kb + i]) + 1e-6);
    #[when(!BA)]
    let beta = sigmoid(ba[h]);
    #[when(!BA)]
    let decay = exp(ssm_a[h] * softplus(ba[n_v_heads + h] + dt_bias[h]));
    // With BA: b[h] and a[h] as `matvec_f32` computes them (x · row h, x · row n_v_heads + h of
    // the stacked (b | a) matrix), from products staged in `pr`.
    #[when(BA)]
    for i in par(0..k) {
        pr[i] = x[i] * w_ba[h * k + i];
        pr[2048 + i] = x[i] * w_ba[(n_v_heads + h) * k + i];
    }
    #[when(BA)]
    let bv = sum!(i in 0..k, order = lanes(32).butterfly(), pr[i]);
    #[when(BA)]
    let av = sum!(i in 0..k, order = lanes(32).butterfly(), pr[2048 + i]);
    #[when(BA)]
    let beta = sigmoid(bv);
    #[when(BA)]
    let decay = exp(ssm_a[h] * softplus(av + dt_bias[h]));
    for i in par(0..dk) {
        kq[i] = qkv[kb + i] * kn;
        kq[128 + i] = (qkv[qb + i] * qn) * q_scale;
    }
    for l in par(0..32) {
        if c0 + l < dv {
            dl[l] = (qkv[vb + c0 + l] - sum!(i in 0..dk, order = seq, (st[i * 32 + l] * decay) * kq[i])) * beta;
        }
    }
    for t in par(0..dk * 32) {
        if c0 + t % 32 < dv {
            st[t] = st[t] * decay + kq[t / 32] * dl[t % 32];
        }
    }
    for l in par(0..32) {
        if c0 + l < dv {
            o[h * dv + c0 + l] = sum!(i in 0..dk, order = seq, st[i * 32 + l] * kq[128 + i]);
        }
    }
    for t in par(0..dk * 32) {
        if c0 + t % 32 < dv {
            state[sb + (t / 32) * dv + c0 + t % 32] = st[t];
        }
    }
}

/// `gdn_step` over rows: the delta-rule scan, row r reading qkv[r · (2 · n_k_heads · dk +
/// n_v_heads · dv) ..], ba [r · 2 · n_v_heads ..] and writing o[r · n_v_heads · dv ..], the
/// state carried from row to row, every row in the decode step's own order. The same split
/// as the m=1 kernel: a workgroup walks every row for its head's 32 columns, which stay in
/// workgroup memory from the first row to the last. What no state reaches (the q and k norms'
/// reciprocals, beta, the decay, then k̂ and q̂) is computed for 8 rows at a time side by side
/// before those rows' scan, so a row's sequential part reads only workgroup memory (and its
/// v): its first sum, the state update, and its read-out, which runs in the same phase as the
/// next row's first sum (one warp each: both only read the updated state). The m=1 kernel's
/// reductions in its order: the two norms (with `BA` also b and a), then per step a read-out
/// and a first sum.
///
/// With `BA` (`gdn_scan_ba_rows`): `gdn_scan_rows` with the beta and alpha projections in its
/// launch: `gdn_step_ba` over rows (row r's x at `x[r · k ..]`), the state carried from row to
/// row. Per block of 8 rows, each row's team also computes its b[h] and a[h] dots (in
/// `matvec_f32`'s order, the products read from global memory) beside its q and k norms.
#[kernel(grid = [n_v_heads, (dv + 31) / 32], block = 256, rows = rows, carry(state),
         instances(gdn_scan_rows(BA = false, rows_of = gdn_step,
                       row_stride(qkv = 2 * n_k_heads * dk + n_v_heads * dv, ba = 2 * n_v_heads, o = n_v_heads * dv),
                       verify(dk = [1, 33], dv = [1, 3, 40], n_k_heads = [1, 2], n_v_heads = [2, 4], rows = [1, 3, 9])),
                   gdn_scan_ba_rows(BA = true, rows_of = gdn_step_ba,
                       row_stride(qkv = 2 * n_k_heads * dk + n_v_heads * dv, x = k, o = n_v_heads * dv),
                       verify(dk = [1, 33], dv = [1, 3, 40], n_k_heads = [1, 2], n_v_heads = [2, 4], k = [1, 33], rows = [1, 3, 9]))))]
pub fn gdn_scan_family<const BA: bool>(
    qkv: &[f32],
    #[when(!BA)] ba: &[f32],
    #[when(BA)] x: &[f32],
    #[when(BA)] w_ba: &[f32],
    ssm_a: &[f32],
    dt_bias: &[f32],
    state: &mut [f32],
    o: &mut [f32],
    dk: usize,
    dv: usize,
    n_k_heads: usize,
    n_v_heads: usize,
    tiled: bool,
    q_scale: f32,
    #[when(BA)] k: usize,
    rows: usize,
) {
    let h = group_id(0);
    let c0 = group_id(1) * 32;
    let kh = if tiled { h % n_k_heads } else { h / (n_v_heads / n_k_heads) };
    let sb = h * dk * dv;
    let st = shared::<f32, 4096>();
    // Per row j of a block of 8: k̂ at j · 256, q̂ at j · 256 + 128.
    let kq = shared::<f32, 2048>();
    let dl = shared::<f32, 32>();
    // Per block of 8 rows, the scalars no state reaches, computed side by side (one team per
    // row) before the block's scan: qn (0..8), kn (8..16), beta (16..24), decay (24..32).
    let rs = shared::<f32, 32>();
    let stride = 2 * n_k_heads * dk + n_v_heads * dv;
    for t in par(0..dk * 32) {
        if c0 + t % 32 < dv {
            st[t] = state[sb + (t / 32) * dv + c0 + t % 32];
        }
    }
    for rb in (0..rows).step_by(8) {
        let nb = if rows - rb < 8 { rows - rb } else { 8 };
        for j in par_team(0..nb, 32) {
            let qb = (rb + j) * stride + kh * dk;
            let kb = (rb + j) * stride + n_k_heads * dk + kh * dk;
            rs[j] = rsqrt(sum!(i in 0..dk, order = lanes(32).butterfly(), qkv[qb + i] * qkv[qb + i]) + 1e-6);
            rs[8 + j] = rsqrt(sum!(i in 0..dk, order = lanes(32).butterfly(), qkv[kb + i] * qkv[kb + i]) + 1e-6);
            #[when(BA)]
            let bv = sum!(i in 0..k, order = lanes(32).butterfly(), x[(rb + j) * k + i] * w_ba[h * k + i]);
            #[when(BA)]
            let av =
                sum!(i in 0..k, order = lanes(32).butterfly(), x[(rb + j) * k + i] * w_ba[(n_v_heads + h) * k + i]);
            #[when(BA)]
            rs[16 + j] = sigmoid(bv);
            #[when(BA)]
            rs[24 + j] = exp(ssm_a[h] * softplus(av + dt_bias[h]));
        }
        #[when(!BA)]
        for j in par(0..nb) {
            rs[16 + j] = sigmoid(ba[(rb + j) * 2 * n_v_heads + h]);
            rs[24 + j] = exp(ssm_a[h] * softplus(ba[(rb + j) * 2 * n_v_heads + n_v_heads + h] + dt_bias[h]));
        }
        for e in par(0..nb * dk) {
            let j = e / dk;
            let i = e % dk;
            kq[j * 256 + i] = qkv[(rb + j) * stride + n_k_heads * dk + kh * dk + i] * rs[8 + j];
            kq[j * 256 + 128 + i] = (qkv[(rb + j) * stride + kh * dk + i] * rs[j]) * q_scale;
        }
        // Step j: warp 0 reads row j − 1 out, warp 1 takes row j's first sum (both only read
        // the state as row j − 1 left it), then all threads update the state by row j.
        for j in 0..nb + 1 {
            for l in par(0..64) {
                if l < 32 {
                    if j > 0 && c0 + l < dv {
                        o[((rb + j - 1) * n_v_heads + h) * dv + c0 + l] =
                            sum!(i in 0..dk, order = seq, st[i * 32 + l] * kq[(j - 1) * 256 + 128 + i]);
                    }
                } else {
                    if j < nb && c0 + l - 32 < dv {
                        dl[l - 32] = (qkv[(rb + j) * stride + 2 * n_k_heads * dk + h * dv + c0 + l - 32]
                            - sum!(i in 0..dk, order = seq, (st[i * 32 + l - 32] * rs[24 + j]) * kq[j * 256 + i]))
                            * rs[16 + j];
                    }
                }
            }
            for t in par(0..if j < nb { dk * 32 } else { 0 }) {
                if c0 + t % 32 < dv {
                    st[t] = st[t] * rs[24 + j] + kq[j * 256 + t / 32] * dl[t % 32];
                }
            }
        }
    }
    for t in par(0..dk * 32) {
        if c0 + t % 32 < dv {
            state[sb + (t / 32) * dv + c0 + t % 32] = st[t];
        }
    }
}

/// Per head (grid n_heads): y = (w · (x · rsqrt(Σx²/head_dim + eps))) · silu(z), w plain (not
/// zero-centred), shared by the heads; the sum `lanes(32).butterfly()`.
#[kernel(grid = [n_heads], block = 128, rows(name = gated_rmsnorm_rows, row_stride(x = n_heads * head_dim, z = n_heads * head_dim, y = n_heads * head_dim)))]
pub fn gated_rmsnorm(x: &[f32], z: &[f32], w: &[f32], y: &mut [f32], head_dim: usize, n_heads: usize, eps: f32) {
    let h = group_id(0);
    let b = h * head_dim;
    let ss = sum!(i in 0..head_dim, order = lanes(32).butterfly(), x[b + i] * x[b + i]);
    let r = rsqrt(ss / (head_dim as f32) + eps);
    for i in par(0..head_dim) {
        y[b + i] = (w[i] * (x[b + i] * r)) * silu(z[b + i]);
    }
}

/// `gdn_conv_step` in plain Rust; updates `ring` in place.
pub fn conv_step_reference(x: &[f32], w: &[f32], ring: &mut [f32], conv_kernel: usize, pos: usize) -> Vec<f32> {
    let r = conv_kernel - 1;
    let mut y = Vec::with_capacity(x.len());
    for c in 0..x.len() {
        let input = |t: usize| if t == r { x[c] } else { ring[c * r + (pos + t) % r] };
        y.push(mathlib::silu(sum_sequential(conv_kernel, |t| w[c * conv_kernel + t] * input(t))));
        ring[c * r + pos % r] = x[c];
    }
    y
}

/// `gdn_step` in plain Rust; updates `state` in place and returns o.
#[allow(clippy::too_many_arguments)]
pub fn gdn_step_reference(
    qkv: &[f32],
    b: &[f32],
    a: &[f32],
    ssm_a: &[f32],
    dt_bias: &[f32],
    state: &mut [f32],
    dk: usize,
    dv: usize,
    n_k_heads: usize,
    n_v_heads: usize,
    tiled: bool,
    q_scale: f32,
) -> Vec<f32> {
    let mut o = vec![0.0f32; n_v_heads * dv];
    for h in 0..n_v_heads {
        let kh = if tiled { h % n_k_heads } else { h / (n_v_heads / n_k_heads) };
        let (qb, kb, vb) = (kh * dk, n_k_heads * dk + kh * dk, 2 * n_k_heads * dk + h * dv);
        let qn = mathlib::rsqrt(sum_lanes_butterfly(dk, 32, |i| qkv[qb + i] * qkv[qb + i]) + 1e-6);
        let kn = mathlib::rsqrt(sum_lanes_butterfly(dk, 32, |i| qkv[kb + i] * qkv[kb + i]) + 1e-6);
        let beta = mathlib::sigmoid(b[h]);
        let decay = mathlib::exp(ssm_a[h] * mathlib::softplus(a[h] + dt_bias[h]));
        let s = &mut state[h * dk * dv..(h + 1) * dk * dv];
        for j in 0..dv {
            let kv = sum_sequential(dk, |i| (s[i * dv + j] * decay) * (qkv[kb + i] * kn));
            let delta = (qkv[vb + j] - kv) * beta;
            for i in 0..dk {
                s[i * dv + j] = s[i * dv + j] * decay + (qkv[kb + i] * kn) * delta;
            }
            o[h * dv + j] = sum_sequential(dk, |i| s[i * dv + j] * ((qkv[qb + i] * qn) * q_scale));
        }
    }
    o
}

/// `gated_rmsnorm` in plain Rust.
pub fn gated_rmsnorm_reference(x: &[f32], z: &[f32], w: &[f32], head_dim: usize, eps: f32) -> Vec<f32> {
    let mut y = Vec::with_capacity(x.len());
    for (xh, zh) in x.chunks(head_dim).zip(z.chunks(head_dim)) {
        let r = mathlib::rsqrt(sum_lanes_butterfly(head_dim, 32, |i| xh[i] * xh[i]) / head_dim as f32 + eps);
        y.extend((0..head_dim).map(|i| (w[i] * (xh[i] * r)) * mathlib::silu(zh[i])));
    }
    y
}
