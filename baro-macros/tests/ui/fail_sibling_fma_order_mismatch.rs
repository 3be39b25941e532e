use baro_macros::kernel;

#[kernel(grid = [n])]
pub fn dot(x: &[f32], w: &[f32], y: &mut [f32], k: usize, n: usize) {
    let o = group_id(0);
    y[o] = sum!(i in 0..k, order = lanes(32).butterfly(), x[i] * w[o * k + i]);
}

// The same order, but each lane accumulates `acc = fma(x_i, w_i, acc)` (one rounding per
// element) where `dot` rounds the product and then the sum: not its sibling.
#[kernel(grid = [n], rows_of = dot, rows = rows, row_stride(x = k, y = n))]
pub fn dot_rows(x: &[f32], w: &[f32], y: &mut [f32], k: usize, n: usize, rows: usize) {
    let o = group_id(0);
    for r in 0..rows {
        y[r * n + o] = sum!(i in 0..k, order = lanes(32).butterfly(), fma(x[r * k + i], w[o * k + i]));
    }
}

fn main() {}
