use baro_macros::kernel;

#[kernel(grid = [n])]
pub fn axpb(x: &[f32], w: &[f32], b: &[f32], y: &mut [f32], n: usize) {
    let o = group_id(0);
    y[o] = x[o] * w[o] + b[o];
}

// fma(x, w, b) rounds once, x * w + b twice: the verifier keeps them apart, so this rows
// kernel is not the sibling of `axpb` although every operand and its order are the same.
#[kernel(grid = [n], rows_of = axpb, rows = rows, row_stride(x = n, y = n))]
pub fn axpb_rows(x: &[f32], w: &[f32], b: &[f32], y: &mut [f32], n: usize, rows: usize) {
    let o = group_id(0);
    for r in 0..rows {
        y[r * n + o] = fma(x[r * n + o], w[o], b[o]);
    }
}

fn main() {}
