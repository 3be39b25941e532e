// A kernel's argument struct (`ScaleArgs`) names every parameter: leaving one out does not
// compile.
use baro_dsl::runtime::Buffer;
use baro_macros::kernel;

#[kernel(grid = [1])]
pub fn scale(x: &[f32], y: &mut [f32], n: usize, s: f32) {
    for i in par(0..n) {
        y[i] = x[i] * s;
    }
}

fn missing<'a>(x: &'a Buffer, y: &'a mut Buffer) -> ScaleArgs<'a> {
    ScaleArgs { x, y, n: 4 }
}

fn main() {
    let _ = missing;
}
