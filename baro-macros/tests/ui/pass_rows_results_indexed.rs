use baro_macros::kernel;

#[kernel(grid = [n])]
pub fn dot(x: &[f32], w: &[f32], y: &mut [f32], k: usize, n: usize) {
    let o = group_id(0);
    y[o] = sum!(i in 0..k, order = lanes(32).butterfly(), fma(x[i], w[o * k + i]));
}

// `pass_rows_reduce.rs`' `dot_rows4` with its results bound to one name: `ys[r]` in a loop
// over literal bounds is result r, the loop unrolled by the macro into the four stores that
// kernel writes out, and proven `dot`'s sibling the same way.
#[kernel(grid = [n, (rows + 3) / 4], rows_of = dot, rows = rows, row_stride(x = k, y = n))]
pub fn dot_rows4(x: &[f32], w: &[f32], y: &mut [f32], k: usize, n: usize, rows: usize) {
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

// A row's result scaled before its store, and a `max!` over rows.
#[kernel(grid = [n])]
pub fn peak(x: &[f32], y: &mut [f32], k: usize, n: usize) {
    let o = group_id(0);
    y[o] = max!(i in 0..k, order = lanes(32).butterfly(), x[o * k + i]) * 0.5;
}

#[kernel(grid = [n, (rows + 1) / 2], rows_of = peak, rows = rows, row_stride(x = n * k, y = n))]
pub fn peak_rows2(x: &[f32], y: &mut [f32], k: usize, n: usize, rows: usize) {
    let o = group_id(0);
    let r0 = group_id(1) * 2;
    let ms = max!(r in 0..2, i in 0..k, order = lanes(32).butterfly(), x[(r0 + r).min(rows - 1) * n * k + o * k + i]);
    y[r0 * n + o] = ms[0] * 0.5;
    if r0 + 1 < rows {
        y[(r0 + 1) * n + o] = ms[1] * 0.5;
    }
}

fn main() {}
