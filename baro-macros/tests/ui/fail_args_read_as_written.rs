// A kernel's argument struct (`ScaleArgs`) takes a written (`&mut [T]`) parameter as a
// `&mut Buffer`: a buffer the caller holds read-only does not fit.
use baro_dsl::runtime::Buffer;
use baro_macros::kernel;

#[kernel(grid = [1])]
pub fn scale(x: &[f32], y: &mut [f32], n: usize, s: f32) {
    for i in par(0..n) {
        y[i] = x[i] * s;
    }
}

fn args<'a>(x: &'a Buffer, y: &'a Buffer) -> ScaleArgs<'a> {
    ScaleArgs { x, y, n: 4, s: 2.0 }
}

fn main() {
    let _ = args;
}
