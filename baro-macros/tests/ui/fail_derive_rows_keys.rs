use baro_macros::kernel;

// `rows(..)` without a name, a tile of zero, an axis past the grid and a key it does not know.
#[kernel(grid = [n], rows(tile = 0, axis = 7, colour = red, row_stride(x = k, y = n)))]
pub fn matvec(x: &[f32], w: &[f32], y: &mut [f32], k: usize, n: usize) {
    let o = group_id(0);
    y[o] = sum!(i in 0..k, order = lanes(32).butterfly(), x[i] * w[o * k + i]);
}

fn main() {}
