// Changes of order that only show on shapes the old defaults never ran: lengths that fill
// every lane exactly (k a multiple of 32) and row counts that fill a row tile of 8. The
// shapes derived from the kernel's constants (c − 1, c, c + 1, 2c) reach both.
use baro_macros::kernel;

#[kernel(grid = [n])]
pub fn dot(x: &[f32], w: &[f32], y: &mut [f32], k: usize, n: usize) {
    let o = group_id(0);
    y[o] = sum!(i in 0..k, order = lanes(32).butterfly(), x[i] * w[o * k + i]);
}

// On full lane blocks only, the rows kernel swaps one product's operands.
#[kernel(grid = [n], rows_of = dot, rows = rows, row_stride(x = k, y = n))]
pub fn dot_rows(x: &[f32], w: &[f32], y: &mut [f32], k: usize, n: usize, rows: usize) {
    let o = group_id(0);
    for r in 0..rows {
        y[r * n + o] = sum!(i in 0..k, order = lanes(32).butterfly(),
            if k % 32 == 0 && i == 0 { w[o * k + i] * x[r * k + i] } else { x[r * k + i] * w[o * k + i] });
    }
}

#[kernel(grid = [n])]
pub fn scale(x: &[f32], y: &mut [f32], n: usize) {
    let o = group_id(0);
    y[o] = x[o] * 0.5;
}

// A tile of 8 rows per workgroup; the last row of a full tile multiplies the other way round.
#[kernel(grid = [n, (rows + 7) / 8], rows_of = scale, rows = rows, row_stride(x = n, y = n))]
pub fn scale_rows(x: &[f32], y: &mut [f32], n: usize, rows: usize) {
    let o = group_id(0);
    for t in 0..8 {
        let s = group_id(1) * 8 + t;
        if s < rows {
            y[s * n + o] = if t == 7 { 0.5 * x[s * n + o] } else { x[s * n + o] * 0.5 };
        }
    }
}

fn main() {}
