//! Partial rotary position embedding (NeoX `rotate_half` pairing): the first `rope_dim` of each
//! head's `head_dim` values rotate, dim i paired with dim i + rope_dim/2; the rest pass through.
//!
//! cos/sin come from a table the host computes (`rope_table`): the angle `pos · θ^(−2i/rope_dim)`
//! in f64, its cos and sin in f64, each rounded once to f32. This keeps the kernel free of
//! trigonometry (baro's math library has none) and every target reads the same table bits.
//! Transformers computes the angle in f32, so its table differs by a few f32 ulps at long
//! positions; the f64 table is the more accurate of the two.
//!
//! `rope_neox_rows` is derived from `rope_neox` by `rows(..)` and proven at build time: row r's
//! heads start at `x[r · n_heads · head_stride]` at position `pos + r`, one workgroup per
//! (head, row).

use baro::kernel;

/// In place on `x`: head h is `x[h · head_stride ..]`; the table row for position `pos` is
/// `cos[pos · rope_dim/2 ..]` (same for `sin`). `out[i] = x[i]·c − x[i+half]·s`,
/// `out[i+half] = x[i+half]·c + x[i]·s` (Transformers' `q·cos + rotate_half(q)·sin`,
/// where `a + (−b)·s` is exactly `a − b·s`). Heads must not overlap (rope_dim ≤ head_stride):
/// the verifier's race check rejects the default strides, so the domain is listed.
#[kernel(grid = [n_heads], verify(pos = [0, 3], rope_dim = [2, 4, 6], head_stride = [6, 7], n_heads = [1, 2, 3]),
         rows(name = rope_neox_rows, row_stride(x = n_heads * head_stride), row_step(pos = 1), verify(n_heads = [1, 2], rows = [1, 3])))]
pub fn rope_neox(
    x: &mut [f32],
    cos: &[f32],
    sin: &[f32],
    pos: usize,
    rope_dim: usize,
    head_stride: usize,
    n_heads: usize,
) {
    let h = group_id(0);
    let half = rope_dim / 2;
    let b = h * head_stride;
    for i in par(0..half) {
        let c = cos[pos * half + i];
        let s = sin[pos * half + i];
        let x0 = x[b + i];
        let x1 = x[b + i + half];
        x[b + i] = x0 * c - x1 * s;
        x[b + i + half] = x1 * c + x0 * s;
    }
}

/// (cos, sin) tables of `n_pos` rows of `rope_dim/2`: angle `p · theta^(−2i/rope_dim)` in f64.
pub fn rope_table(theta: f64, rope_dim: usize, n_pos: usize) -> (Vec<f32>, Vec<f32>) {
    let half = rope_dim / 2;
    let (mut c, mut s) = (Vec::with_capacity(n_pos * half), Vec::with_capacity(n_pos * half));
    for p in 0..n_pos {
        for i in 0..half {
            let a = p as f64 * theta.powf(-((2 * i) as f64) / rope_dim as f64);
            c.push(a.cos() as f32);
            s.push(a.sin() as f32);
        }
    }
    (c, s)
}

/// `rope_neox` in plain Rust, on a copy.
pub fn rope_reference(
    x: &[f32],
    cos: &[f32],
    sin: &[f32],
    pos: usize,
    rope_dim: usize,
    head_stride: usize,
    n_heads: usize,
) -> Vec<f32> {
    let mut y = x.to_vec();
    let half = rope_dim / 2;
    for h in 0..n_heads {
        let b = h * head_stride;
        for i in 0..half {
            let (c, s) = (cos[pos * half + i], sin[pos * half + i]);
            let (x0, x1) = (x[b + i], x[b + i + half]);
            y[b + i] = x0 * c - x1 * s;
            y[b + i + half] = x1 * c + x0 * s;
        }
    }
    y
}
