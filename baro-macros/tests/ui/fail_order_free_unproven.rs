// An order-free sum (`order = any`) must be the same in every order: the verifier accepts
// it only for an integer sum whose partial sums provably fit, and names the bound it could
// not prove.
use baro_macros::kernel;

/// The length `k` has no bound when the kernel is compiled.
#[kernel(grid = [n])]
pub fn unbounded_length(x: &[i8], w: &[i8], y: &mut [i32], k: usize, n: usize) {
    let o = group_id(0);
    y[o] = sum!(i in 0..k, order = any, (x[i] as i32) * (w[o * k + i] as i32));
}

/// i32 elements have no narrower range: two of them may already overflow.
#[kernel(grid = [n])]
pub fn unbounded_elements(x: &[i32], y: &mut [i32], n: usize) {
    let o = group_id(0);
    y[o] = sum!(i in 0..2, order = any, x[o * 2 + i]);
}

/// 2^17 products of i8 values may reach 2^31.
#[kernel(grid = [n])]
pub fn too_long(x: &[i8], w: &[i8], y: &mut [i32], k: usize, n: usize) {
    let o = group_id(0);
    y[o] = sum!(i in 0..k.min(131072), order = any, (x[i] as i32) * (w[o * k + i] as i32));
}

fn main() {}
