use baro_macros::kernel;

// A local named like a per-row buffer: the derived kernel could not tell which `x[..]` to
// offset.
#[kernel(grid = [n], block = 32, rows(name = stage_rows, row_stride(x = n, y = n)))]
pub fn stage(x: &[f32], y: &mut [f32], n: usize) {
    let o = group_id(0);
    let v = x[o];
    let x = shared::<f32, 32>();
    for j in par(0..32) {
        x[j] = v;
    }
    y[o] = x[0];
}

fn main() {}
