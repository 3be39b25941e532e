use baro_macros::kernel;

// A stride for a scalar, a fixed buffer, a row count named like a parameter, a parameter
// both fixed and stepped.
#[kernel(grid = [n], rows(name = matvec_rows, rows = n, row_stride(k = 1, y = n), fix(x = 0, pos = 0), row_step(pos = 1)))]
pub fn matvec(x: &[f32], w: &[f32], y: &mut [f32], k: usize, n: usize, pos: usize) {
    let o = group_id(0);
    y[o] = sum!(i in 0..k, order = lanes(32).butterfly(), x[pos + i] * w[o * k + i]);
}

fn main() {}
