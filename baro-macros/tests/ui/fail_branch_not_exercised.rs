// An arm of an `if` inside a reduction body that no shape takes was never compared: the
// check fails as not exercised, naming the arm, instead of passing.
use baro_macros::kernel;

#[kernel(grid = [n])]
pub fn dot(x: &[f32], w: &[f32], y: &mut [f32], k: usize, n: usize) {
    let o = group_id(0);
    y[o] = sum!(i in 0..k, order = lanes(32).butterfly(), x[i] * w[o * k + i]);
}

#[kernel(grid = [n], rows_of = dot, rows = rows, row_stride(x = k, y = n))]
pub fn dot_rows(x: &[f32], w: &[f32], y: &mut [f32], k: usize, n: usize, rows: usize) {
    let o = group_id(0);
    for r in 0..rows {
        y[r * n + o] = sum!(i in 0..k, order = lanes(32).butterfly(),
            if i < 100000 { x[r * k + i] * w[o * k + i] } else { w[o * k + i] * x[r * k + i] });
    }
}

fn main() {}
