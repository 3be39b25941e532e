use baro_macros::kernel;

#[kernel(grid = [n])]
pub fn fma_two_arguments(x: &[f32], w: &[f32], y: &mut [f32], n: usize) {
    let o = group_id(0);
    y[o] = fma(x[o], w[o]);
}

#[kernel(grid = [n])]
pub fn fma_integer_operand(x: &[f32], w: &[i32], y: &mut [f32], n: usize) {
    let o = group_id(0);
    y[o] = fma(x[o], w[o], 1.0);
}

fn main() {}
