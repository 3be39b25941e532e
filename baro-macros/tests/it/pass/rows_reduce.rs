use baro_macros::kernel;

#[kernel(grid = [n])]
pub fn dot(x: &[f32], w: &[f32], y: &mut [f32], k: usize, n: usize) {
    let o = group_id(0);
    y[o] = sum!(i in 0..k, order = lanes(32).butterfly(), fma(x[i], w[o * k + i]));
}

// Four rows per workgroup in one reduction with four results: each weight is loaded once for
// the four rows, and result j is exactly `dot` on row r0 + j (a row past the last reads the
// last row again and is not stored).
#[kernel(grid = [n, (rows + 3) / 4], rows_of = dot, rows = rows, row_stride(x = k, y = n))]
pub fn dot_rows4(x: &[f32], w: &[f32], y: &mut [f32], k: usize, n: usize, rows: usize) {
    let o = group_id(0);
    let r0 = group_id(1) * 4;
    let [y0, y1, y2, y3] = sum!(r in 0..4, i in 0..k, order = lanes(32).butterfly(),
                                fma(x[(r0 + r).min(rows - 1) * k + i], w[o * k + i]));
    y[r0 * n + o] = y0;
    if r0 + 1 < rows {
        y[(r0 + 1) * n + o] = y1;
    }
    if r0 + 2 < rows {
        y[(r0 + 2) * n + o] = y2;
    }
    if r0 + 3 < rows {
        y[(r0 + 3) * n + o] = y3;
    }
}

// A quantized-style element: a block scale times a sequential block dot whose unpacking
// (a select on the block's parity) reads no row; the inner sum is over rows too.
#[kernel(grid = [n])]
pub fn qdot(x: &[f32], w: &[f32], y: &mut [f32], k: usize, n: usize) {
    let o = group_id(0);
    y[o] = sum!(b in 0..k / 8, order = lanes(32).butterfly(),
        w[o * k + b * 8] * sum!(j in 0..8, order = seq, (if b % 2 == 1 { -w[o * k + b * 8 + j] } else { w[o * k + b * 8 + j] }) * x[b * 8 + j]));
}

#[kernel(grid = [n, (rows + 1) / 2], rows_of = qdot, rows = rows, row_stride(x = k, y = n))]
pub fn qdot_rows2(x: &[f32], w: &[f32], y: &mut [f32], k: usize, n: usize, rows: usize) {
    let o = group_id(0);
    let r0 = group_id(1) * 2;
    let [y0, y1] = sum!(r in 0..2, b in 0..k / 8, order = lanes(32).butterfly(),
        w[o * k + b * 8] * sum!(j in 0..8, order = seq, (if b % 2 == 1 { -w[o * k + b * 8 + j] } else { w[o * k + b * 8 + j] }) * x[(r0 + r).min(rows - 1) * k + b * 8 + j]));
    y[r0 * n + o] = y0;
    if r0 + 1 < rows {
        y[(r0 + 1) * n + o] = y1;
    }
}

// `dot_rows4` with its results bound to one name: `ys[r]` in a loop over literal bounds is
// result r, the loop unrolled by the macro into the stores `dot_rows4` writes out.
#[kernel(grid = [n, (rows + 3) / 4], rows_of = dot, rows = rows, row_stride(x = k, y = n))]
pub fn dot_rows4_indexed(x: &[f32], w: &[f32], y: &mut [f32], k: usize, n: usize, rows: usize) {
    let o = group_id(0);
    let r0 = group_id(1) * 4;
    let ys = sum!(r in 0..4, i in 0..k, order = lanes(32).butterfly(),
                  fma(x[(r0 + r).min(rows - 1) * k + i], w[o * k + i]));
    y[r0 * n + o] = ys[0];
    for r in 1..4 {
        if r0 + r < rows {
            y[(r0 + r) * n + o] = ys[r];
        }
    }
}

#[test]
fn runs() {
    // The rows kernels' IR holds one reduction over rows each.
    for k in [dot_rows4(), qdot_rows2(), dot_rows4_indexed()] {
        assert!(k.body.iter().any(|s| matches!(s, baro_dsl::ir::Stmt::LetRows { .. })), "{}", k.name);
    }
    // The indexed form is the same statements on the same variables; only the results'
    // names differ (`ys0` for `y0`).
    let (by_hand, indexed) = (dot_rows4(), dot_rows4_indexed());
    assert_eq!(indexed.body, by_hand.body);
    let names = |k: &baro_dsl::ir::Kernel| k.vars.iter().map(|d| d.name.clone()).collect::<Vec<_>>();
    assert_eq!(names(&by_hand), ["o", "r0", "r", "i", "y0", "y1", "y2", "y3"]);
    assert_eq!(names(&indexed), ["o", "r0", "r", "i", "ys0", "ys1", "ys2", "ys3"]);
    let types = |k: &baro_dsl::ir::Kernel| k.vars.iter().map(|d| (d.ty, d.mutable)).collect::<Vec<_>>();
    assert_eq!(types(&indexed), types(&by_hand));
}
