use baro_macros::kernel;

// Slots on grid axis 1, but `fix(n_slots = 1)` forgotten: one m=1 launch is then not one row.
#[kernel(grid = [n, n_slots], rows(name = matvec_rows, tile = 8, axis = 1, row_stride(x = k, y = n)))]
pub fn matvec(x: &[f32], w: &[f32], y: &mut [f32], k: usize, n: usize, n_slots: usize) {
    let o = group_id(0);
    let s = group_id(1);
    y[s * n + o] = sum!(i in 0..k, order = lanes(32).butterfly(), x[i] * w[o * k + i]);
}

fn main() {}
