use baro_macros::kernel;

// `min_groups` asks a compute unit to hold that many workgroups at once: 0 asks for nothing
// and more than 32 for more than any GPU holds.
#[kernel(grid = [n], block = 256, min_groups = 0)]
pub fn none(x: &[f32], y: &mut [f32], n: usize) {
    let o = group_id(0);
    y[o] = x[o];
}

#[kernel(grid = [n], block = 256, min_groups = 64)]
pub fn too_many(x: &[f32], y: &mut [f32], n: usize) {
    let o = group_id(0);
    y[o] = x[o];
}

fn main() {}
