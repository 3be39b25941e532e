//! The q8 precision mode's kernels (issue 14; the engine's `Precision::Q8`): activation
//! quantization to 8-bit blocks, and the Q8_0 matvec on those blocks with exact integer dots.
//! The K-quant matvecs on the same blocks are in `kquant_q8.rs`.
//!
//! Activation quantization to 8-bit blocks: per
//! block of 32 floats, the scale `d = max|x| / 127` (f32), the
//! 32 values `q = x / d` rounded half to even as i8 packed four to a u32 (little-endian,
//! element 4w + t in byte t of word w), and the block sum of the q (i32, an order-free sum
//! the verifier proves cannot overflow: 32 · 127). Listed in `kernels::any_rows()`; the
//! engine's `Pass::input` launches it in the q8 mode.
//!
//! Exactly, for every input (the same bits on every target):
//! - `d` is `max|x_j| / 127` rounded once. If the block holds a NaN, `d` is the canonical
//!   quiet NaN `0x7fc00000` (not a payload of the input: GPUs do not propagate payloads the
//!   way the host does); if it holds an infinity and no NaN, `d` is `+inf`.
//! - `q_j` is `x_j / d` rounded half to even, clamped to [−127, 127]. Where `d` is 0 (an
//!   all-zero block, or one whose `max|x|` is so small that `/ 127` underflows to 0) every
//!   `q` is 0; where `x_j / d` is NaN (a NaN block, `±inf / inf`) `q_j` is 0; a finite `x_j`
//!   over an infinite `d` gives ±0, so 0. `−0.0` gives 0.
//! - the block sum is the exact integer Σ q_j (|sum| ≤ 4064).
//!
//! 32 blocks per 256-thread workgroup, in three `par` phases that read x coalesced: a team of
//! 32 lanes per block takes max|x| (one element per lane, `lanes(32).butterfly()`; every
//! order gives the same bits here: |x| has no −0, the maximum of non-NaN values is one of
//! them, and a NaN anywhere gives a NaN, which becomes the canonical one) and writes `d`; a
//! thread per word reads its four floats (16 bytes), quantizes and packs them; a thread per
//! block sums its eight words as `dot4_i8(word, 0x01010101)` (`order = any`).
//!
//! `matvec_q8_0_q8`: Q8_0 weights times quantized activations. Per block b of a row, the
//! integer dot Σ_j q_w[j] · q_x[j] is exact (eight `dot4_i8` of packed words, summed
//! `order = any`: the verifier proves |partial sums| ≤ 8 · 65536 cannot overflow i32, so any
//! order gives the same integer), converted to f32 exactly (|dot| ≤ 32 · 128 · 127 < 2^24),
//! and scaled by `d_w · d_x[b]`; the block results are summed `lanes(32).butterfly()`, as in
//! the f32 `matvec_q8_0`. Only the float part has an order, and it is declared, so the rows
//! sibling (derived by `rows(..)`) gives each row this kernel's bits. Its 8-row tiles
//! (`matvec_q8_0_q8_rows8`, `matvec_q8_0_q8_mma`) are instances of `q8_tiles`' generic
//! kernels, re-exported here.

use baro::reference::sum_lanes_butterfly;
use baro::{kernel, kernel_helper};
use half::f16;

pub use crate::kernels::q8_tiles::{matvec_q8_0_q8_mma, matvec_q8_0_q8_rows8};
use crate::kernels::quant::{__baro_helper_f16_at_words, __baro_helper_f16_bits};

/// Elements per quantization block.
pub const Q8_BLOCK: usize = 32;

/// `x / d` rounded half to even and clamped to [−127, 127]; 0 where `d` is 0 or the
/// quotient is NaN (the float → int conversion takes NaN to 0 and saturates).
#[kernel_helper]
pub fn q8_of(x: f32, d: f32) -> i32 {
    let v = if d == 0.0 { 0.0 } else { x / d };
    let f = v.floor();
    let h = v - f;
    let r = if h > 0.5 {
        f + 1.0
    } else {
        if h < 0.5 {
            f
        } else {
            if ((f as i32) & 1) == 0 {
                f
            } else {
                f + 1.0
            }
        }
    };
    (r as i32).max(-127).min(127)
}

/// Four consecutive values quantized by `q8_of` with scale `d`, packed little-endian into one
/// word (the first value in the low byte).
#[kernel_helper]
pub fn q8_word(x0: f32, x1: f32, x2: f32, x3: f32, d: f32) -> u32 {
    ((q8_of(x0, d) as u32) & 255)
        | (((q8_of(x1, d) as u32) & 255) << 8)
        | (((q8_of(x2, d) as u32) & 255) << 16)
        | (((q8_of(x3, d) as u32) & 255) << 24)
}

/// x: (nb, 32) f32 → q: (nb, 8) u32 (four i8 each), d: (nb) f32, s: (nb) i32.
#[kernel(grid = [(nb + 31) / 32], block = 256, uses = [q8_of, q8_word], verify(nb = [1, 2, 3, 33, 70]))]
pub fn q8act(x: &[f32], q: &mut [u32], d: &mut [f32], s: &mut [i32], nb: usize) {
    let base = group_id(0) * 32;
    let nblk = if nb - base < 32 { nb - base } else { 32 };
    let scales = shared::<f32, 32>();
    let words = shared::<u32, 256>();
    for t in par_team(0..nblk, 32) {
        let amax = max!(j in 0..32, order = lanes(32).butterfly(), x[(base + t) * 32 + j].abs());
        let scale = if amax != amax { f32::from_bits(0x7fc00000) } else { amax / 127.0 };
        d[base + t] = scale;
        scales[t] = scale;
    }
    for i in par(0..nblk * 8) {
        let e = base * 32 + i * 4;
        let scale = scales[i / 8];
        let word = q8_word(x[e], x[e + 1], x[e + 2], x[e + 3], scale);
        q[base * 8 + i] = word;
        words[i] = word;
    }
    for t in par(0..nblk) {
        s[base + t] = sum!(w in 0..8, order = any, dot4_i8(words[t * 8 + w], 0x01010101, 0));
    }
}

/// `add_rmsnorm` and then `q8act` of its output in one launch (the q8 mode's normed input):
/// h = a + b, y = rmsnorm(h, w), and y's blocks of 32 quantized into q, d, s exactly as `q8act`
/// quantizes them (the same max, scale, rounding and block sum on the same y values), so every
/// output is `add_rmsnorm`'s and then `q8act`'s bits, without y's round trip or a launch. Each
/// workgroup forms all n sums a + b in workgroup memory (as `add_rmsnorm` does, `n ≤
/// norm::NORM_MAX_DIM`) and writes its 256 elements of h and y and their 8 blocks. n a
/// multiple of 32.
///
/// With `COMBINE` (`moe_combine_add_rmsnorm_q8`): `moe::moe_combine`, then the above with the
/// combine's output as `b`, in one launch (the q8 mode's residual add after the MoE block):
/// c = seq_j(weights[j] · ye[j · n + i]) + sigmoid(shared_logit[0]) · shared_out[i] (the shared
/// expert's output), h = a + c, y = rmsnorm(h, w) and y's q8 blocks. Every workgroup forms all
/// n values a + c in workgroup memory (`moe_combine`'s operations, then `add`'s), so every
/// output is `moe_combine`'s, then `add_rmsnorm`'s, then `q8act`'s bits, without the combine's
/// launch and its round trip through memory.
#[kernel(grid = [(n + 255) / 256], block = 256, uses = [q8_of, q8_word], verify(n = [32, 96, 256, 288, 608]),
         instances(add_rmsnorm_q8(COMBINE = false,
                       rows(name = add_rmsnorm_q8_rows, row_stride(a = n, b = n, h = n, y = n, q = n / 4, d = n / 32, s = n / 32), verify(n = [32, 288]))),
                   moe_combine_add_rmsnorm_q8(COMBINE = true, verify(n = [32, 96, 256, 288, 608], top_k = [1, 2, 3]),
                       rows(name = moe_combine_add_rmsnorm_q8_rows,
                            row_stride(a = n, ye = top_k * n, weights = top_k, shared_out = n, shared_logit = 1, h = n, y = n, q = n / 4, d = n / 32, s = n / 32),
                            verify(n = [32, 288], top_k = [1, 3])))))]
pub fn add_rmsnorm_q8_family<const COMBINE: bool>(
    a: &[f32],
    #[when(!COMBINE)] b: &[f32],
    #[when(COMBINE)] ye: &[f32],
    #[when(COMBINE)] weights: &[f32],
    #[when(COMBINE)] shared_out: &[f32],
    #[when(COMBINE)] shared_logit: &[f32],
    w: &[f32],
    h: &mut [f32],
    y: &mut [f32],
    q: &mut [u32],
    d: &mut [f32],
    s: &mut [i32],
    n: usize,
    #[when(COMBINE)] top_k: usize,
    eps: f32,
) {
    let base = group_id(0) * 256;
    let m = if n - base < 256 { n - base } else { 256 };
    #[when(COMBINE)]
    let gs = sigmoid(shared_logit[0]);
    let hs = shared::<f32, 4096>();
    for i in par(0..n) {
        #[when(!COMBINE)]
        hs[i] = a[i] + b[i];
        #[when(COMBINE)]
        hs[i] = a[i] + (sum!(e in 0..top_k, order = seq, weights[e] * ye[e * n + i]) + gs * shared_out[i]);
    }
    let ss = sum!(i in 0..n, order = lanes(32).butterfly(), hs[i] * hs[i]);
    let scale = rsqrt(ss / (n as f32) + eps);
    let ys = shared::<f32, 256>();
    let scales = shared::<f32, 8>();
    let words = shared::<u32, 64>();
    for j in par(0..m) {
        h[base + j] = hs[base + j];
        let v = hs[base + j] * scale * w[base + j];
        y[base + j] = v;
        ys[j] = v;
    }
    for t in par_team(0..m / 32, 32) {
        let amax = max!(j in 0..32, order = lanes(32).butterfly(), ys[t * 32 + j].abs());
        let sc = if amax != amax { f32::from_bits(0x7fc00000) } else { amax / 127.0 };
        d[base / 32 + t] = sc;
        scales[t] = sc;
    }
    for i in par(0..m / 4) {
        let sc = scales[i / 8];
        let word = q8_word(ys[i * 4], ys[i * 4 + 1], ys[i * 4 + 2], ys[i * 4 + 3], sc);
        q[base / 4 + i] = word;
        words[i] = word;
    }
    for t in par(0..m / 32) {
        s[base / 32 + t] = sum!(v in 0..8, order = any, dot4_i8(words[t * 8 + v], 0x01010101, 0));
    }
}

/// `gdn::gated_rmsnorm` and then `q8act` of its output in one launch (the q8 mode's input of
/// the GDN out projection): per head, y = (w · (x · rsqrt(Σx²/head_dim + eps))) · silu(z), and
/// the head's blocks of 32 quantized into q, d, s as `q8act` quantizes them, so every output is
/// `gated_rmsnorm`'s and then `q8act`'s bits, without a launch. One workgroup of 128 threads
/// per head, as `gated_rmsnorm`; head_dim a multiple of 32, at most `GATED_Q8_MAX_HEAD_DIM`.
#[kernel(grid = [n_heads], block = 128, uses = [q8_of, q8_word], verify(head_dim = [32, 96, 256], n_heads = [1, 3]),
         rows(name = gated_rmsnorm_q8_rows,
              row_stride(x = n_heads * head_dim, z = n_heads * head_dim, y = n_heads * head_dim, q = n_heads * head_dim / 4, d = n_heads * head_dim / 32, s = n_heads * head_dim / 32),
              verify(head_dim = [32, 96], n_heads = [1, 2])))]
pub fn gated_rmsnorm_q8(
    x: &[f32],
    z: &[f32],
    w: &[f32],
    y: &mut [f32],
    q: &mut [u32],
    d: &mut [f32],
    s: &mut [i32],
    head_dim: usize,
    n_heads: usize,
    eps: f32,
) {
    let hd = group_id(0);
    let b = hd * head_dim;
    let ss = sum!(i in 0..head_dim, order = lanes(32).butterfly(), x[b + i] * x[b + i]);
    let r = rsqrt(ss / (head_dim as f32) + eps);
    let ys = shared::<f32, 256>();
    let scales = shared::<f32, 8>();
    let words = shared::<u32, 64>();
    for i in par(0..head_dim) {
        let v = (w[i] * (x[b + i] * r)) * silu(z[b + i]);
        y[b + i] = v;
        ys[i] = v;
    }
    for t in par_team(0..head_dim / 32, 32) {
        let amax = max!(j in 0..32, order = lanes(32).butterfly(), ys[t * 32 + j].abs());
        let sc = if amax != amax { f32::from_bits(0x7fc00000) } else { amax / 127.0 };
        d[b / 32 + t] = sc;
        scales[t] = sc;
    }
    for i in par(0..head_dim / 4) {
        let sc = scales[i / 8];
        let word = q8_word(ys[i * 4], ys[i * 4 + 1], ys[i * 4 + 2], ys[i * 4 + 3], sc);
        q[b / 4 + i] = word;
        words[i] = word;
    }
    for t in par(0..head_dim / 32) {
        s[b / 32 + t] = sum!(v in 0..8, order = any, dot4_i8(words[t * 8 + v], 0x01010101, 0));
    }
}

/// The longest head `gated_rmsnorm_q8` takes: the size of its workgroup array of outputs.
pub const GATED_Q8_MAX_HEAD_DIM: usize = 256;

/// `moe::swiglu_pairs` and then `q8act` of its output in one launch (the q8 mode's expert
/// input): h[sl · n + j] = silu(gate) · up for each slot sl, and h's blocks of 32 quantized into
/// q, d, s exactly as `q8act` quantizes them, so every output is `swiglu_pairs`' and then
/// `q8act`'s bits. Each workgroup writes 256 elements of one slot and their 8 blocks. n a
/// multiple of 32.
#[kernel(grid = [(n + 255) / 256, n_slots], block = 256, uses = [q8_of, q8_word], verify(n = [32, 96, 256, 288, 608], n_slots = [1, 3]),
         rows(name = swiglu_pairs_q8_rows, axis = 1, row_stride(gu = 2 * n, h = n, q = n / 4, d = n / 32, s = n / 32), fix(n_slots = 1), verify(n = [32, 288])))]
pub fn swiglu_pairs_q8(
    gu: &[f32],
    h: &mut [f32],
    q: &mut [u32],
    d: &mut [f32],
    s: &mut [i32],
    n: usize,
    n_slots: usize,
) {
    let base = group_id(0) * 256;
    let sl = group_id(1);
    let m = if n - base < 256 { n - base } else { 256 };
    let at = sl * n + base;
    let hs = shared::<f32, 256>();
    let scales = shared::<f32, 8>();
    let words = shared::<u32, 64>();
    for j in par(0..m) {
        let v = silu(gu[sl * 2 * n + base + j]) * gu[sl * 2 * n + n + base + j];
        h[at + j] = v;
        hs[j] = v;
    }
    for t in par_team(0..m / 32, 32) {
        let amax = max!(j in 0..32, order = lanes(32).butterfly(), hs[t * 32 + j].abs());
        let sc = if amax != amax { f32::from_bits(0x7fc00000) } else { amax / 127.0 };
        d[at / 32 + t] = sc;
        scales[t] = sc;
    }
    for i in par(0..m / 4) {
        let sc = scales[i / 8];
        let word = q8_word(hs[i * 4], hs[i * 4 + 1], hs[i * 4 + 2], hs[i * 4 + 3], sc);
        q[at / 4 + i] = word;
        words[i] = word;
    }
    for t in par(0..m / 32) {
        s[at / 32 + t] = sum!(v in 0..8, order = any, dot4_i8(words[t * 8 + v], 0x01010101, 0));
    }
}

/// What `q8act` computes, written independently in plain Rust: (q words, d, block sums).
/// `x.len()` must be a multiple of 32.
pub fn q8act_reference(x: &[f32]) -> (Vec<u32>, Vec<f32>, Vec<i32>) {
    let (mut q, mut d, mut s) = (Vec::new(), Vec::new(), Vec::new());
    for block in x.chunks_exact(Q8_BLOCK) {
        let nan = block.iter().any(|v| v.is_nan());
        let amax = block.iter().fold(0.0f32, |m, v| if v.abs() > m { v.abs() } else { m });
        let scale = if nan { f32::from_bits(0x7fc0_0000) } else { amax / 127.0 };
        let qs: Vec<i32> = block
            .iter()
            .map(|&v| {
                let quotient = if scale == 0.0 { 0.0 } else { v / scale };
                if quotient.is_nan() {
                    0
                } else {
                    quotient.round_ties_even().clamp(-127.0, 127.0) as i32
                }
            })
            .collect();
        d.push(scale);
        s.push(qs.iter().sum());
        q.extend(
            qs.chunks_exact(4)
                .map(|c| u32::from_le_bytes([c[0] as i8 as u8, c[1] as i8 as u8, c[2] as i8 as u8, c[3] as i8 as u8])),
        );
    }
    (q, d, s)
}

/// Q8_0 weights (the raw GGUF blocks `{ f16 d; i8 q[32] }` seen as little-endian u32 words)
/// times activations quantized by `q8act` (`xq`: 8 words per block, `xd`: one scale per
/// block): y[s · n + o] = Σ_b (d_w · xd[b]) · idot_b, in `lanes(32).butterfly()` order over the
/// row's k / 32 blocks, idot_b the exact integer dot of the block. Expert-capable as every
/// matvec: slot s uses matrix ids[s] and input blocks from element s · x_stride (a multiple of
/// 32). Eight outputs per 256-thread workgroup, one 32-lane team each. A block starts on a
/// half-word when its index is even (34 bytes each: the quants then begin at byte 2 of a
/// word), so its quant words are two half-words joined; odd blocks' quants are whole words.
/// Either way the words read are the block's words q .. q + 8 (q = 34 · block / 4; an odd
/// block's quants are words q + 1 .., since 34 · block ≡ 2 mod 4), so the two forms share
/// their loads: nine words per block.
#[kernel(grid = [(n + 7) / 8, n_slots], block = 256, uses = [f16_at_words, f16_bits], verify(k = [32, 64, 96, 1056], n = [1, 9], x_stride = [0, 64], n_slots = [1, 2]),
         rows(name = matvec_q8_0_q8_rows, tile = 8, axis = 1, row_stride(xq = k / 4, xd = k / 32, ids = 1, y = n), fix(x_stride = 0, n_slots = 1), verify(k = [32, 1056], rows = [1, 3, 9])))]
pub fn matvec_q8_0_q8(
    xq: &[u32],
    xd: &[f32],
    w: &[u32],
    ids: &[u32],
    y: &mut [f32],
    k: usize,
    n: usize,
    x_stride: usize,
    n_slots: usize,
) {
    let ob = group_id(0) * 8;
    let s = group_id(1);
    let e = ids[s] as usize;
    let nb = k / 32;
    let xb = s * x_stride / 32;
    for t in par_team(0..if n - ob < 8 { n - ob } else { 8 }, 32) {
        let o = ob + t;
        let row = (e * n + o) * nb;
        y[s * n + o] = sum!(b in 0..nb, order = lanes(32).butterfly(),
            (f16_at_words(w, (row + b) * 34) * xd[xb + b])
            * (sum!(j in 0..8, order = any, dot4_i8(if (row + b) % 2 == 0 { (w[(row + b) * 34 / 4 + j] >> 16) | (w[(row + b) * 34 / 4 + j + 1] << 16) } else { w[(row + b) * 34 / 4 + j + 1] }, xq[(xb + b) * 8 + j], 0)) as f32));
    }
}

/// The largest k `matvec_q8_0_q8_rows8` takes: its workgroup arrays hold 8 rows of that many
/// quantized activations (8 words per block of 32 and one pad of 4 words after every 4 blocks,
/// 9 words a block in all: block c's words start at 8c + 4·(c / 4), a multiple of 4, so a lane
/// reads them as two 16-byte loads, and the 8 lanes that share a 16-byte load phase fall in 8
/// different groups of 4 banks) and their scales: 36 KiB + 4 KiB.
pub const Q8_ROWS8_MAX_K: usize = 4096;

/// The largest k the q8 matrix-step kernels (`matvec_q8_0_q8_mma`, `kquant_q8::*_mma`) take:
/// their workgroup memory holds the integer dots of 16 outputs × 8 rows for every block of the
/// row (k / 32 tiles of 129 i32: 33 KiB at k = 2048), the 8 rows' scales (2 KiB) and one chunk
/// of 8 blocks of weights and activations (6 + 3 KiB).
pub const Q8_MMA_MAX_K: usize = 2048;

/// `matvec_q8_0_q8` in plain Rust (bytes, not words; `half`'s f16), same order: for each slot
/// and output, the block results `(d_w · xd[b]) · (Σ_j q_w · q_x as f32)` summed by
/// `sum_lanes_butterfly(.., 32, ..)`. `w` is the Q8_0 stack's raw bytes.
#[allow(clippy::too_many_arguments)]
pub fn matvec_q8_0_q8_reference(
    xq: &[u32],
    xd: &[f32],
    w: &[u8],
    ids: &[u32],
    k: usize,
    n: usize,
    x_stride: usize,
) -> Vec<f32> {
    let nb = k / 32;
    let mut y = Vec::with_capacity(ids.len() * n);
    for (s, &e) in ids.iter().enumerate() {
        let xb = s * x_stride / 32;
        for o in 0..n {
            let row = (e as usize * n + o) * nb;
            y.push(sum_lanes_butterfly(nb, 32, |b| {
                let blk = &w[(row + b) * 34..(row + b + 1) * 34];
                let dw = f16::from_le_bytes([blk[0], blk[1]]).to_f32();
                let xs = xq[(xb + b) * 8..(xb + b + 1) * 8].iter().flat_map(|v| v.to_le_bytes());
                let dot: i32 = blk[2..].iter().zip(xs).map(|(&a, c)| i32::from(a as i8) * i32::from(c as i8)).sum();
                (dw * xd[xb + b]) * dot as f32
            }));
        }
    }
    y
}
