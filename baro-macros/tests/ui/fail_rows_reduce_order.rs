use baro_macros::kernel;

#[kernel(grid = [n])]
pub fn dot(x: &[f32], w: &[f32], y: &mut [f32], k: usize, n: usize) {
    let o = group_id(0);
    y[o] = sum!(i in 0..k, order = lanes(32).butterfly(), x[i] * w[o * k + i]);
}

// Every row of the reduction over rows takes its own order, and that order is not `dot`'s.
#[kernel(grid = [n, (rows + 1) / 2], rows_of = dot, rows = rows, row_stride(x = k, y = n))]
pub fn dot_rows2(x: &[f32], w: &[f32], y: &mut [f32], k: usize, n: usize, rows: usize) {
    let o = group_id(0);
    let r0 = group_id(1) * 2;
    let [y0, y1] = sum!(r in 0..2, i in 0..k, order = lanes(32).pairwise(), x[(r0 + r).min(rows - 1) * k + i] * w[o * k + i]);
    y[r0 * n + o] = y0;
    if r0 + 1 < rows {
        y[(r0 + 1) * n + o] = y1;
    }
}

fn main() {}
