use baro_macros::kernel;

#[kernel(grid = [n])]
pub fn copy(x: &Vec<f32>, y: &mut [f32], n: usize) {
    let o = group_id(0);
    y[o] = x[o];
}

fn main() {}
