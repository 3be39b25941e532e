// A kernel's argument struct (`ScaleArgs`) takes each scalar as its own Rust type: a `u32`
// where the kernel declares `usize` does not compile (no silent conversion).
use baro_dsl::runtime::Buffer;
use baro_macros::kernel;

#[kernel(grid = [1])]
pub fn scale(x: &[f32], y: &mut [f32], n: usize, s: f32) {
    for i in par(0..n) {
        y[i] = x[i] * s;
    }
}

fn wrong_scalar<'a>(x: &'a Buffer, y: &'a mut Buffer) -> ScaleArgs<'a> {
    ScaleArgs { x, y, n: 4u32, s: 2.0 }
}

fn main() {
    let _ = wrong_scalar;
}
