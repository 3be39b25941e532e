use baro_macros::kernel;

// `y` missing from `row_stride`: every row writes the same outputs. The derived kernel is
// proven like a hand-written one, and the proof fails at the store.
#[kernel(grid = [n], rows(name = matvec_rows, tile = 4, axis = 1, row_stride(x = k), verify(rows = [1, 5])))]
pub fn matvec(x: &[f32], w: &[f32], y: &mut [f32], k: usize, n: usize) {
    let o = group_id(0);
    y[o] = sum!(i in 0..k, order = lanes(32).butterfly(), x[i] * w[o * k + i]);
}

fn main() {}
