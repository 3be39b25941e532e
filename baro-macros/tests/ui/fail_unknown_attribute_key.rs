use baro_macros::kernel;

#[kernel(grid = [n], workgroup_size = 256)]
pub fn copy(x: &[f32], y: &mut [f32], n: usize) {
    let o = group_id(0);
    y[o] = x[o];
}

fn main() {}
