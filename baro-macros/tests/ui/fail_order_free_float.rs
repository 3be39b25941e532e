// A float reduction has no order-free form: its value depends on the order.
use baro_macros::kernel;

#[kernel(grid = [n])]
pub fn float_any(x: &[f32], y: &mut [f32], k: usize, n: usize) {
    let o = group_id(0);
    y[o] = sum!(i in 0..k.min(64), order = any, x[o * k + i]);
}

fn main() {}
