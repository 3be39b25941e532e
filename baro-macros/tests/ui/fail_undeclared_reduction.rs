use baro_macros::kernel;

#[kernel(grid = [n])]
pub fn dot(x: &[f32], w: &[f32], y: &mut [f32], k: usize, n: usize) {
    let o = group_id(0);
    let mut acc = 0.0;
    for i in 0..k {
        acc += x[i] * w[o * k + i];
    }
    y[o] = acc;
}

fn main() {}
