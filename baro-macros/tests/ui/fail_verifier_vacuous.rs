// Verify shapes that never give a reduction more elements than lanes prove nothing about its
// order: the sibling check rejects them instead of passing, at the attribute that lists them.
use baro_macros::kernel;

#[kernel(grid = [n])]
pub fn blocks(x: &[f32], y: &mut [f32], k: usize, n: usize) {
    let o = group_id(0);
    let nb = k / 32;
    y[o] = sum!(b in 0..nb, order = lanes(32).butterfly(), x[o * nb + b]);
}

#[kernel(grid = [n], rows_of = blocks, rows = rows, row_stride(y = n), verify(k = [1, 3]))]
pub fn blocks_rows(x: &[f32], y: &mut [f32], k: usize, n: usize, rows: usize) {
    let o = group_id(0);
    let nb = k / 32;
    for r in 0..rows {
        y[r * n + o] = sum!(b in 0..nb, order = lanes(32).butterfly(), x[o * nb + b]);
    }
}

fn main() {}
