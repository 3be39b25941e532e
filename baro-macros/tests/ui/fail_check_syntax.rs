use baro_macros::kernel;

#[kernel(grid = [1])]
pub fn checks(ids: &[u32], y: &mut [u32]) {
    check!(ids[0], ids[1]);
    check!(ids[0]);
    y[0] = ids[0];
}

fn main() {}
