use baro_macros::kernel;
use half::bf16;

#[kernel(grid = [n])]
pub fn matvec(x: &[f32], w: &[bf16], y: &mut [f32], k: usize, n: usize) {
    let o = group_id(0);
    y[o] = sum!(i in 0..k, order = lanes(32).butterfly(), x[i] * w[o * k + i].to_f32());
}

#[kernel(grid = [n], rows_of = matvec, rows = rows, row_stride(x = k, y = n))]
pub fn matvec_rows(x: &[f32], w: &[bf16], y: &mut [f32], k: usize, n: usize, rows: usize) {
    let o = group_id(0);
    for r in 0..rows {
        y[r * n + o] = sum!(i in 0..k, order = lanes(64).butterfly(), x[r * k + i] * w[o * k + i].to_f32());
    }
}

fn main() {}
