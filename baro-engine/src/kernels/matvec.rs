//! Matrix-vector products with f32, f16 and bf16 weights: eight output rows per workgroup of
//! 256 threads (one 32-lane team per row), each row's dot as `lanes(32).butterfly()` (lane l
//! sums elements l, l+32, … sequentially, then an xor butterfly), each weight widened to f32
//! exactly before the multiply.
//!
//! Every matvec here and in `quant.rs` is expert-capable: grid axis 1 runs over `n_slots`
//! slots; slot s uses weight matrix `ids[s]` of a stack of (n × k) matrices and input
//! `x[s · x_stride ..]`, and writes `y[s · n ..]`. A plain projection passes `ids = [0]`,
//! `n_slots = 1`; the routed experts pass the top-k ids, `x_stride = 0` for gate/up (one
//! input) and `x_stride = k` for down (one input per expert).
//!
//! The rows siblings (`_rows`, here and in `quant.rs`) are derived from the m = 1 kernels by
//! `rows(..)` (baro-macros `derive.rs`) and proven at build time: row r is slot 0 of a launch
//! with one slot and `x_stride = 0` (`fix`), x, ids and y offset by r·k, r and r·n
//! (`row_stride`); a workgroup runs the m = 1 body for 8 consecutive rows one after another
//! (`tile = 8` along grid axis 1), so the weight rows it reads for the first are reused from
//! cache by the others (pairs sorted by expert share their expert's rows).

use baro::kernel;
use baro::reference::sum_lanes_butterfly;
use half::{bf16, f16};

/// The float matvecs, one definition over the weight's element type (`W`: f32, f16, bf16;
/// half weights widened by `.to_f32()`, exact), each instance with its rows sibling derived
/// by `rows(..)` (`ROWS`).
#[kernel(grid = [(n + 7) / 8, n_slots], block = 256,
         rows(name = ROWS, tile = 8, axis = 1, row_stride(x = k, ids = 1, y = n), fix(x_stride = 0, n_slots = 1), verify(rows = [1, 3, 9])),
         instances(matvec_f32(W = f32, ROWS = matvec_f32_rows),
                   matvec_f16(W = f16, ROWS = matvec_f16_rows),
                   matvec_bf16(W = bf16, ROWS = matvec_bf16_rows)))]
pub fn matvec_float<const W: Elem, const ROWS: Name>(
    x: &[f32],
    w: &[W],
    ids: &[u32],
    y: &mut [f32],
    k: usize,
    n: usize,
    x_stride: usize,
    n_slots: usize,
) {
    let ob = group_id(0) * 8;
    let s = group_id(1);
    let xb = s * x_stride;
    for t in par_team(0..if n - ob < 8 { n - ob } else { 8 }, 32) {
        let o = ob + t;
        let wb = ((ids[s] as usize) * n + o) * k;
        #[when(W == f32)]
        y[s * n + o] = sum!(i in 0..k, order = lanes(32).butterfly(), x[xb + i] * w[wb + i]);
        #[when(W != f32)]
        y[s * n + o] = sum!(i in 0..k, order = lanes(32).butterfly(), x[xb + i] * w[wb + i].to_f32());
    }
}

/// The three float matvecs in plain Rust, on weights already widened to f32 (exact).
pub fn matvec_reference(x: &[f32], w: &[f32], ids: &[u32], k: usize, n: usize, x_stride: usize) -> Vec<f32> {
    let mut y = Vec::with_capacity(ids.len() * n);
    for (s, &e) in ids.iter().enumerate() {
        let (xb, wb) = (s * x_stride, e as usize * n * k);
        y.extend((0..n).map(|o| sum_lanes_butterfly(k, 32, |i| x[xb + i] * w[wb + o * k + i])));
    }
    y
}

/// `matvec_f32` over 8 rows of one matrix at once (`ids[0]` for every row: a plain
/// projection, not the experts, whose rows change matrix from pair to pair): each team's
/// output is one reduction over rows (`let ys = sum!(r in 0..8, ..)`), so a lane loads
/// each weight once for the 8 rows and keeps 8 partials, each in `matvec_f32`'s own order
/// (`lanes(32).butterfly()`). A row past the last (a ragged tile) reads the last row's x and
/// is not stored. Proven the sibling of `matvec_f32` while this crate compiles.
#[kernel(grid = [(n + 7) / 8, (rows + 7) / 8], block = 256, rows_of = matvec_f32, rows = rows,
         row_stride(x = k, y = n), verify(x_stride = [0], n_slots = [1], rows = [1, 3, 7, 8, 9, 17]))]
pub fn matvec_f32_rows8(
    x: &[f32],
    w: &[f32],
    ids: &[u32],
    y: &mut [f32],
    k: usize,
    n: usize,
    x_stride: usize,
    n_slots: usize,
    rows: usize,
) {
    let ob = group_id(0) * 8;
    let r0 = group_id(1) * 8;
    let last = rows - 1;
    for t in par_team(0..if n - ob < 8 { n - ob } else { 8 }, 32) {
        let o = ob + t;
        let wb = ((ids[0] as usize) * n + o) * k;
        let ys = sum!(r in 0..8, i in 0..k, order = lanes(32).butterfly(),
                      x[(r0 + r).min(last) * k + i] * w[wb + i]);
        y[r0 * n + o] = ys[0];
        for r in 1..8 {
            if r0 + r < rows {
                y[(r0 + r) * n + o] = ys[r];
            }
        }
    }
}
